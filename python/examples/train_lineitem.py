"""Trains a small model on TPC-H lineitem straight from a .zf file.

    zipflow tpch --sf 1 -o lineitem.zf        # or: zipflow compress lineitem.parquet lineitem.zf
    python python/examples/train_lineitem.py lineitem.zf [--epochs 3] [--device cuda]

The model learns l_extendedprice from quantity, discount, tax and the ship date. Each item of
the ChunkDataset is about a million rows; on a CUDA device the compressed row groups cross
PCIe and are decoded on the GPU into the tensors the model reads (the next item decodes while
the model trains on this one). With --device cpu the same runs on the CPU.
"""

import argparse
import time

import torch

import zipflow
import zipflow.torch as zt

FEATURES = ["l_quantity", "l_discount", "l_tax", "l_shipdate"]
TARGET = "l_extendedprice"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--lr", type=float, default=1e-2)
    a = ap.parse_args()
    device = torch.device(a.device)
    f = zipflow.open(a.path)
    print(f"{a.path}: {f.num_rows} rows in {f.num_chunks} row groups; device {device}")

    ds = zt.ChunkDataset(a.path, FEATURES + [TARGET], device=device, shuffle=True)
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(len(FEATURES), 32), torch.nn.ReLU(), torch.nn.Linear(32, 1)
    ).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    # Inputs scaled to about [0, 1] from the column ranges TPC-H defines.
    scale = torch.tensor([50.0, 0.1, 0.08, 2600.0], device=device)
    offset = torch.tensor([0.0, 0.0, 0.0, 8035.0], device=device)  # 1992-01-01 in days

    for epoch in range(a.epochs):
        ds.set_epoch(epoch)
        start = time.perf_counter()
        total, rows = 0.0, 0
        for batch in ds:
            x = torch.stack([batch[c].to(torch.float32) for c in FEATURES], dim=1)
            x = (x - offset) / scale
            y = batch[TARGET].to(torch.float32).unsqueeze(1) / 100_000.0
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += loss.item() * len(y)
            rows += len(y)
        secs = time.perf_counter() - start
        print(
            f"epoch {epoch}: mean squared error {total / rows:.5f}, "
            f"{rows / secs / 1e6:.1f} M rows/s"
        )


if __name__ == "__main__":
    main()
