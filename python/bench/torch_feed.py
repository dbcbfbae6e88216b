"""Feeding a model on the GPU: zipflow's ChunkDataset (compressed chunks over PCIe, decoded on
the GPU) against the Parquet path people use today, on the same table, in one run.

    python python/bench/torch_feed.py lineitem.zf [--epochs 5] [--columns a,b,...]

The baseline reads the same rows from Parquet+zstd with pyarrow (all cores), makes tensors
with torch.from_numpy and moves them with .to("cuda"). Its Parquet file is written from the
.zf file with decimals stored as float64 and dates as int32, so that it decodes straight to
the tensors the model takes (no conversion counted against it). Both feed the same batches
(about a million rows: one Parquet row group, 16 zipflow row groups of 65,536) to the same
small MLP. Reported per path: median epoch seconds over the epochs after a warm-up, rows/s,
bytes copied to the GPU, with the model step and without (feed only). Also the whole columns
once: File.to_device against pyarrow.parquet.read_table + .to("cuda").
"""

import argparse
import os
import statistics
import time

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import torch

import zipflow
import zipflow.torch as zt

LINEITEM = [
    "l_orderkey",
    "l_partkey",
    "l_suppkey",
    "l_linenumber",
    "l_quantity",
    "l_extendedprice",
    "l_discount",
    "l_tax",
    "l_shipdate",
]


def tensor_ready(table: pa.Table) -> pa.Table:
    """Decimals as float64 and dates as int32: what the model's tensors hold."""
    cols = []
    for name in table.column_names:
        c = table.column(name)
        if pa.types.is_decimal(c.type):
            c = pc.cast(c, pa.float64())
        elif pa.types.is_date32(c.type):
            c = c.cast(pa.int32())
        cols.append(c)
    return pa.table(cols, names=table.column_names)


def model_for(n: int) -> tuple:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(n, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1)
    ).cuda()
    return model, torch.optim.SGD(model.parameters(), lr=1e-3)


def step(model, opt, batch: dict, names: list) -> None:
    x = torch.stack([batch[n].to(torch.float32) for n in names[1:]], dim=1)
    x = (x - x.mean(0)) / (x.std(0) + 1.0)
    y = batch[names[0]].to(torch.float32).unsqueeze(1)
    y = (y - y.mean()) / (y.std() + 1.0)
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()


def epochs(run, n: int) -> list:
    run()  # warm-up: page cache, kernels compiled, allocator
    secs = []
    for _ in range(n):
        torch.cuda.synchronize()
        t = time.perf_counter()
        run()
        torch.cuda.synchronize()
        secs.append(time.perf_counter() - t)
    return secs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--columns", help="comma-separated (default: nine lineitem columns)")
    ap.add_argument("--parquet", help="Parquet file to write and read (default: beside the .zf)")
    a = ap.parse_args()
    f = zipflow.open(a.path)
    names = a.columns.split(",") if a.columns else LINEITEM
    rows = f.num_rows
    per_item = max(1, (1 << 20) // f.chunk_rows)
    pq_path = a.parquet or os.path.splitext(a.path)[0] + ".feed.parquet"
    pq.write_table(
        tensor_ready(f.read(names)),
        pq_path,
        compression="zstd",
        compression_level=3,
        row_group_size=per_item * f.chunk_rows,
    )
    print(f"{a.path}: {rows} rows, columns {', '.join(names)}")
    print(f"device: {torch.cuda.get_device_name()}, host cores: {os.cpu_count()}")
    pf = pq.ParquetFile(pq_path)
    pq_bytes = sum(
        pf.metadata.row_group(g).column(c).total_compressed_size
        for g in range(pf.num_row_groups)
        for c in range(pf.metadata.num_columns)
    )
    ds = zt.ChunkDataset(a.path, names, device="cuda", row_groups=per_item)

    def parquet_batches():
        for g in range(pf.num_row_groups):
            t = pf.read_row_group(g, columns=names)
            yield {n: torch.from_numpy(t.column(n).to_numpy()).to("cuda") for n in names}

    zf_h2d = [0]

    def zipflow_batches():
        zf_h2d[0] = 0
        for b in ds:
            zf_h2d[0] += b.h2d_bytes
            yield b

    results = []
    for label, batches, h2d in [
        ("parquet+zstd -> from_numpy -> .to(cuda)", parquet_batches, lambda: None),
        ("zipflow ChunkDataset(device=cuda)", zipflow_batches, lambda: zf_h2d[0]),
    ]:
        model, opt = model_for(len(names) - 1)

        def feed_only():
            for b in batches():
                for t in b.values():
                    t.sum()

        def train():
            for b in batches():
                step(model, opt, b, names)

        feed = statistics.median(epochs(feed_only, a.epochs))
        trained = statistics.median(epochs(train, a.epochs))
        results.append((label, feed, trained, h2d()))
    plain = sum(t.nbytes for t in tensor_ready(f.read(names)).columns)
    print(f"decoded bytes {plain / 1e6:.1f} MB; parquet chunks {pq_bytes / 1e6:.1f} MB")
    print(f"{'path':42} {'feed s':>8} {'rows/s':>10} {'train s':>8} {'rows/s':>10} {'to GPU MB':>10}")
    for label, feed, trained, h2d in results:
        moved = plain if h2d is None else h2d
        print(
            f"{label:42} {feed:8.3f} {rows / feed / 1e6:9.1f}M {trained:8.3f} "
            f"{rows / trained / 1e6:9.1f}M {moved / 1e6:10.1f}"
        )
    base, ours = results
    print(f"zipflow speedup: feed {base[1] / ours[1]:.2f}x, train {base[2] / ours[2]:.2f}x")

    # Whole columns at once.
    def whole_parquet():
        t = pq.read_table(pq_path, columns=names)
        return {n: torch.from_numpy(t.column(n).to_numpy()).to("cuda") for n in names}

    def whole_zipflow():
        return f.to_device(names)

    pw = statistics.median(epochs(whole_parquet, a.epochs))
    zw = statistics.median(epochs(whole_zipflow, a.epochs))
    print(
        f"whole columns: parquet read_table + .to(cuda) {pw * 1e3:.1f} ms, "
        f"zipflow to_device {zw * 1e3:.1f} ms ({pw / zw:.2f}x), "
        f"{f.to_device(names).h2d_bytes / 1e6:.1f} MB to the GPU"
    )


if __name__ == "__main__":
    main()
