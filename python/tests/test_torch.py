"""Columns as torch tensors decoded on the CPU (tests/test_gpu.py: on the GPU)."""

import datetime as dt
import decimal

import pyarrow as pa
import pytest

torch = pytest.importorskip("torch")

import zipflow  # noqa: E402
import zipflow.torch as zt  # noqa: E402


@pytest.fixture
def path(tmp_path):
    n = 10_000
    t = pa.table(
        {
            "i": pa.array(range(n), pa.int64()),
            "h": pa.array([i % 200 for i in range(n)], pa.int16()),
            "x": pa.array([i * 0.5 for i in range(n)], pa.float32()),
            "b": pa.array([i % 2 == 0 for i in range(n)]),
            "d": pa.array([dt.date(2000, 1, 1) + dt.timedelta(days=i % 400) for i in range(n)]),
            "p": pa.array([decimal.Decimal(i) / 100 for i in range(n)], pa.decimal128(9, 2)),
            "s": pa.array([str(i) for i in range(n)]),
            "nul": pa.array([None if i == 5 else i for i in range(n)], pa.int32()),
        }
    )
    p = tmp_path / "t.zf"
    zipflow.compress(t, p, chunk_rows=3000)
    return p


def test_columns_become_tensors_of_their_type(path):
    f = zipflow.open(path)
    i = f.to_torch("i")
    assert i.dtype == torch.int64 and i.shape == (10_000,)
    assert torch.equal(i, torch.arange(10_000))
    assert f.to_torch("h").dtype == torch.int16
    assert torch.equal(f.to_torch("x"), torch.arange(10_000, dtype=torch.float32) * 0.5)
    assert f.to_torch("b").dtype == torch.bool
    d = f.to_torch("d")
    assert d.dtype == torch.int32 and int(d[0]) == (dt.date(2000, 1, 1) - dt.date(1970, 1, 1)).days
    p = f.to_torch("p")
    assert p.dtype == torch.float64 and float(p[12]) == 0.12
    assert torch.equal(p, torch.arange(10_000, dtype=torch.float64) / 100)
    scaled = zt.column(f, "p", decimal="int64")
    assert torch.equal(scaled, torch.arange(10_000))
    cols = zt.columns(path, ["i", "x"])
    assert set(cols) == {"i", "x"} and torch.equal(cols["i"], i)
    assert cols.h2d_bytes == 0


def test_what_a_tensor_cannot_hold_is_refused(path):
    f = zipflow.open(path)
    with pytest.raises(zipflow.UnsupportedError, match="numbers only"):
        f.to_torch("s")
    with pytest.raises(zipflow.InvalidInputError, match="1 nulls"):
        f.to_torch("nul")
    with pytest.raises(zipflow.UnsupportedError, match="meta memory is not supported"):
        f.to_torch("i", device="meta")
    with pytest.raises(zipflow.InvalidInputError, match="decimal must be"):
        f.to_torch("p", decimal="float32")


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present (tests/test_gpu.py)")
def test_without_a_gpu_cuda_says_why(path):
    f = zipflow.open(path)
    with pytest.raises(zipflow.UnsupportedError, match="no usable GPU"):
        f.to_torch("i", device="cuda")
    with pytest.raises(zipflow.UnsupportedError, match="no usable GPU"):
        f.to_device(["i", "x"])
    # Columns a tensor cannot hold are refused before any GPU is needed.
    with pytest.raises(zipflow.InvalidInputError, match="1 nulls"):
        f.to_torch("nul", device="cuda")


def test_the_dataset_yields_every_row_group_once(path):
    ds = zt.ChunkDataset(path, ["i", "x"])
    assert len(ds) == 4
    seen = torch.cat([b["i"] for b in ds])
    assert torch.equal(seen, torch.arange(10_000))
    shuffled = zt.ChunkDataset(path, ["i"], shuffle=True, seed=3)
    order = [int(b["i"][0]) for b in shuffled]
    assert sorted(order) == [0, 3000, 6000, 9000]
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2)
    rows = sorted(int(v) for b in loader for v in b["i"])
    assert rows == list(range(10_000))
    with pytest.raises(zipflow.InvalidInputError, match="no column"):
        zt.ChunkDataset(path, ["zz"])
    pairs = zt.ChunkDataset(path, ["i"], row_groups=2)
    assert len(pairs) == 2 and [len(b["i"]) for b in pairs] == [6000, 4000]
    with pytest.raises(zipflow.InvalidInputError, match="at least 1"):
        zt.ChunkDataset(path, ["i"], row_groups=0)


def test_a_small_model_trains_from_the_dataset(path):
    torch.manual_seed(0)
    ds = zt.ChunkDataset(path, ["x", "h"])
    model = torch.nn.Linear(1, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    for _ in range(3):
        for batch in ds:
            x = batch["x"].unsqueeze(1) / 5000
            y = batch["h"].to(torch.float32).unsqueeze(1) / 200
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
    assert losses[-1] < losses[0]
