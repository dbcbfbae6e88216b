"""Columns decoded on the GPU into device memory: equal to the CPU decode bit for bit, the
bytes copied to the device those of the compressed chunks. Skipped without a CUDA GPU."""

import datetime as dt
import decimal

import pyarrow as pa
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

import zipflow  # noqa: E402
import zipflow.torch as zt  # noqa: E402
from zipflow import _zipflow  # noqa: E402

N = 200_000
CHUNK = 65_536
NUMERIC = ["i", "sorted", "h", "u", "x", "y", "b", "d", "ts", "p"]


def _table():
    g = torch.Generator().manual_seed(7)
    noise = torch.randint(0, 1000, (N,), generator=g).tolist()
    return pa.table(
        {
            "i": pa.array([(v * 7919) % 100_003 - 50_000 for v in range(N)], pa.int64()),
            "sorted": pa.array([v // 3 for v in range(N)], pa.int32()),
            "h": pa.array([v % 200 - 100 for v in noise], pa.int16()),
            "u": pa.array([v % 7 for v in range(N)], pa.uint8()),
            "x": pa.array([v * 0.25 for v in noise], pa.float32()),
            "y": pa.array([v / 3.0 for v in noise], pa.float64()),
            "b": pa.array([v % 3 == 0 for v in noise]),
            "d": pa.array([dt.date(1995, 1, 1) + dt.timedelta(days=v % 2500) for v in range(N)]),
            "ts": pa.array([1_600_000_000_000_000 + v * 1_000_003 for v in range(N)], pa.timestamp("us")),
            "p": pa.array([decimal.Decimal(v * 37 % 1_000_000) / 100 for v in range(N)], pa.decimal128(12, 2)),
            "s": pa.array([f"row {v % 50}" for v in range(N)]),
            "nul": pa.array([None if v % 1000 == 0 else v for v in range(N)], pa.int32()),
        }
    )


@pytest.fixture(scope="module", params=["balanced", "smallest", "gpu"])
def path(request, tmp_path_factory):
    p = tmp_path_factory.mktemp("gpu") / f"t-{request.param}.zf"
    zipflow.compress(_table(), p, objective=request.param, chunk_rows=CHUNK)
    return p


def _same_bits(a, b):
    """Equal bit for bit (floats compared as their integer bits: NaN and -0.0 included)."""
    assert a.dtype == b.dtype and a.shape == b.shape
    if a.dtype.is_floating_point:
        width = {torch.float32: torch.int32, torch.float64: torch.int64}[a.dtype]
        return torch.equal(a.view(width), b.view(width))
    return torch.equal(a, b)


def test_every_column_equals_the_cpu_decode(path):
    f = zipflow.open(path)
    for name in NUMERIC:
        for mode in ("float64", "int64"):
            cpu = f.to_torch(name, decimal=mode)
            gpu = f.to_torch(name, device="cuda", decimal=mode)
            assert gpu.device.type == "cuda"
            assert _same_bits(gpu.cpu(), cpu), (name, mode)


def test_bytes_to_the_device_are_the_compressed_chunks(path):
    f = zipflow.open(path)
    cols = f.to_device(NUMERIC)
    assert set(cols) == set(NUMERIC)
    info = {c["name"]: c for c in f.inspect()["columns"]}
    compressed = sum(info[n]["compressed_bytes"] for n in NUMERIC)
    plain = sum(info[n]["plain_bytes"] for n in NUMERIC)
    # The values trees (no validity: these columns have no nulls) are the chunks' payloads.
    assert cols.file_bytes == compressed
    # Each chunk goes at an aligned offset (at most 255 bytes of padding), plus the tables an
    # entropy-coded chunk needs: still far below the decoded bytes.
    assert compressed <= cols.h2d_bytes <= compressed + 256 * f.num_chunks * len(NUMERIC) + 4096 * f.num_chunks
    assert cols.h2d_bytes < plain


def test_chunks_in_any_order_and_the_dataset(path):
    f = zipflow.open(path)
    order = [3, 0, 2]
    arrays = _zipflow.decode_on_device(f._raw, ["i"], order, 0)
    got = torch.from_dlpack(arrays[0]).cpu()
    whole = f.to_torch("i")
    want = torch.cat([whole[c * CHUNK : (c + 1) * CHUNK] for c in order])
    assert torch.equal(got, want)
    ds = zt.ChunkDataset(path, ["i", "p"], device="cuda", row_groups=2, shuffle=True, seed=1)
    seen = [b["i"] for b in ds]
    assert all(t.device.type == "cuda" for t in seen) and len(seen) == len(ds) == 2
    assert torch.equal(torch.sort(torch.cat(seen).cpu()).values, torch.sort(whole).values)
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2)
    with pytest.raises(zipflow.InvalidInputError, match="num_workers=0"):
        next(iter(loader))


def test_dlpack_capsules_and_lifetimes(path):
    f = zipflow.open(path)
    cpu = f.to_torch("y")
    (a,) = _zipflow.decode_on_device(f._raw, ["y"], list(range(f.num_chunks)), 0)
    assert a.__dlpack_device__() == (2, 0) and a.dtype == "float64" and len(a) == N
    legacy = torch.utils.dlpack.from_dlpack(a.__dlpack__())
    versioned = torch.from_dlpack(a)
    del a, f
    torch.cuda.synchronize()
    assert _same_bits(legacy.cpu(), cpu) and _same_bits(versioned.cpu(), cpu)
    # Decoding and dropping many times returns the memory (no leak), while torch keeps using
    # what it holds.
    f = zipflow.open(path)
    free_before = torch.cuda.mem_get_info()[0]
    for _ in range(30):
        t = f.to_torch("y", device="cuda")
        s = float(t.sum())
        del t
    torch.cuda.synchronize()
    assert abs(torch.cuda.mem_get_info()[0] - free_before) < 64 << 20
    assert s == float(cpu.sum())


def test_what_a_tensor_cannot_hold_is_refused_on_the_gpu(path):
    f = zipflow.open(path)
    with pytest.raises(zipflow.UnsupportedError, match="numbers only"):
        f.to_torch("s", device="cuda")
    with pytest.raises(zipflow.InvalidInputError, match="200 nulls"):
        f.to_device(["i", "nul"])
    with pytest.raises(zipflow.InvalidInputError, match="out of range"):
        _zipflow.decode_on_device(f._raw, ["i"], [f.num_chunks], 0)
