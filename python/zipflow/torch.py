"""zipflow columns as PyTorch tensors, decoded on the CPU or straight into GPU memory.

    import zipflow, zipflow.torch
    f = zipflow.open("lineitem.zf")
    qty = f.to_torch("l_quantity")                      # decoded on the CPU
    qty = f.to_torch("l_quantity", device="cuda")       # decoded on the GPU
    cols = f.to_device(["l_quantity", "l_discount"])    # dict of CUDA tensors
    cols.h2d_bytes                                      # bytes copied to the GPU (compressed)
    ds = zipflow.torch.ChunkDataset("lineitem.zf", ["l_quantity", "l_discount"], device="cuda")
    for batch in ds: ...                                # dicts of CUDA tensors

Types: integers, floats and booleans keep their type; dates become int32 days since
1970-01-01; timestamps and durations int64 in their unit; decimals float64, the stored scaled
integer divided by 10^scale (`decimal="int64"` keeps the scaled integer instead). String
columns and columns with nulls are refused: fill or drop nulls first (`File.read(...)`,
pyarrow.compute).

`device="cpu"` decodes on the CPU and makes a tensor over the decoded buffer (one copy where
a column spans several row groups, to make it contiguous). A CUDA device decodes on the GPU:
the file's compressed chunks are copied to the device as they are, the generated decoders
write the values into device memory, and the buffer becomes a tensor by DLPack without a copy;
the values equal the CPU decode's bit for bit. Any other device is refused.
"""

from __future__ import annotations

import warnings
from typing import Any, Dict, Iterator, Optional, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from .errors import InvalidInputError, UnsupportedError

try:
    import torch as _torch
except ImportError as e:  # pragma: no cover - exercised where torch is absent
    raise ImportError(
        "zipflow.torch needs PyTorch: pip install torch"
    ) from e

_DECIMALS = ("float64", "int64")


def _device(device: Any) -> Any:
    """`device` as a torch device: the CPU or a CUDA device."""
    dev = _torch.device(device)
    if dev.type not in ("cpu", "cuda"):
        raise UnsupportedError(
            f"decoding into {dev.type} memory is not supported: zipflow decodes on the CPU "
            "('cpu') and on NVIDIA GPUs ('cuda'); move the tensors with tensor.to(device)"
        )
    return dev


class DeviceColumns(dict):
    """Column name -> tensor, with what the decode moved: `h2d_bytes`, the bytes copied from
    host to device (the compressed chunks, aligned, with the tables the decoders need), and
    `file_bytes`, the bytes of those chunks in the file (0 for both on the CPU)."""

    def __init__(self) -> None:
        super().__init__()
        self.h2d_bytes = 0
        self.file_bytes = 0


def _scaled_to_float(t: Any, scale: int) -> Any:
    """Scaled decimal integers as float64: the integer (rounded to the nearest double) divided
    by 10^scale, correctly rounded, the same bits on every device. The power of ten is a
    tensor on the values' device: a CUDA tensor divided by a host scalar is multiplied by its
    reciprocal, which can differ in the last bit."""
    x = t.to(_torch.float64)
    p = _torch.tensor(10.0 ** abs(scale), dtype=_torch.float64, device=t.device)
    return x / p if scale >= 0 else x * p


def _finish(t: Any, arrow_type: pa.DataType, decimal: str) -> Any:
    """A tensor of the stored values (decimals as scaled integers, booleans as bytes) in the
    type documented above."""
    if pa.types.is_boolean(arrow_type) and t.dtype == _torch.uint8:
        return t.view(_torch.bool)
    if pa.types.is_decimal(arrow_type) and decimal == "float64":
        return _scaled_to_float(t, arrow_type.scale)
    return t


def _check_decimal(decimal: str) -> None:
    if decimal not in _DECIMALS:
        raise InvalidInputError(f"decimal must be one of {_DECIMALS}, not {decimal!r}")


def _as_numpy_ready(array: pa.Array, name: str) -> pa.Array:
    """`array` cast to a type numpy shares without a copy."""
    t = array.type
    if array.null_count:
        raise InvalidInputError(
            f"column `{name}` holds {array.null_count} nulls: a tensor cannot; fill or drop them "
            "first (File.read(...) with pyarrow.compute.fill_null)"
        )
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        return array
    if pa.types.is_boolean(t):
        return array  # to_numpy copies bits into bytes
    if pa.types.is_date32(t):
        return array.view(pa.int32())
    if pa.types.is_date64(t) or pa.types.is_timestamp(t) or pa.types.is_duration(t):
        return array.view(pa.int64())
    if pa.types.is_time32(t):
        return array.view(pa.int32())
    if pa.types.is_time64(t):
        return array.view(pa.int64())
    if pa.types.is_decimal(t):
        # The scaled integers; `_finish` makes float64 of them where asked.
        if t.precision > 18:
            raise UnsupportedError(
                f"column `{name}` is {t}: its scaled integers do not fit int64"
            )
        scaled = pc.multiply(array, pa.scalar(10**t.scale, pa.decimal128(19, 0)))
        return pc.cast(scaled, pa.int64())
    if pa.types.is_dictionary(t):
        return _as_numpy_ready(array.dictionary_decode(), name)
    raise UnsupportedError(f"column `{name}` is {t}: a tensor holds numbers only")


def _tensor(chunked: Any, name: str, decimal: str):
    """A pyarrow column decoded on the CPU as one tensor."""
    _check_decimal(decimal)
    parts = chunked.chunks if isinstance(chunked, pa.ChunkedArray) else [chunked]
    tensors = []
    for part in parts:
        ready = _as_numpy_ready(part, name)
        values = ready.to_numpy(zero_copy_only=not pa.types.is_boolean(ready.type))
        with warnings.catch_warnings():
            # The decoded buffer is read-only to numpy (Arrow memory is immutable); torch
            # warns that it cannot mark the tensor so. Nothing else refers to the buffer.
            warnings.simplefilter("ignore", UserWarning)
            tensors.append(_torch.from_numpy(values))
    if not tensors:
        empty = _as_numpy_ready(pa.array([], chunked.type), name)
        t = _torch.from_numpy(empty.to_numpy(zero_copy_only=False))
    else:
        t = tensors[0] if len(tensors) == 1 else _torch.cat(tensors)
    return _finish(t, chunked.type, decimal)


def _on_gpu(f: Any, names: Sequence[str], dev: Any, decimal: str, chunks=None) -> DeviceColumns:
    """`names` of row groups `chunks` (all when None) of File `f`, decoded on CUDA device
    `dev`."""
    from . import _zipflow

    _check_decimal(decimal)
    index = dev.index
    if index is None:
        # Without a usable CUDA runtime in torch, device 0: zipflow then says why it has none.
        index = _torch.cuda.current_device() if _torch.cuda.is_available() else 0
    chunks = list(range(f.num_chunks)) if chunks is None else list(chunks)
    out = DeviceColumns()
    if not chunks:
        # Nothing to copy: the empty columns, typed as the CPU gives them.
        table = f.read(list(names))
        for i, n in enumerate(table.column_names):
            out[n] = _tensor(table.column(i), n, decimal).to(dev)
        return out
    schema = f.schema
    for a in _zipflow.decode_on_device(f._raw, list(names), chunks, index):
        out[a.column] = _finish(_torch.from_dlpack(a), schema.field(a.column).type, decimal)
        out.h2d_bytes += a.h2d_bytes
        out.file_bytes += a.file_bytes
    return out


def column(file: Any, name: str, *, device: Any = "cpu", decimal: str = "float64"):
    """Column `name` of `file` (a zipflow.File or a path) as one tensor on `device`, decoded
    there (see the module's notes)."""
    from . import File, open as zopen

    f = file if isinstance(file, File) else zopen(file)
    dev = _device(device)
    if dev.type == "cuda":
        return _on_gpu(f, [name], dev, decimal)[name]
    table = f.read([name])
    return _tensor(table.column(0), name, decimal)


def columns(
    file: Any,
    names: Optional[Sequence[str]] = None,
    *,
    device: Any = "cpu",
    decimal: str = "float64",
) -> DeviceColumns:
    """Columns `names` (all when None) of `file` as a dict of tensors on `device`, decoded
    there; its `h2d_bytes` tells the bytes copied to the GPU."""
    from . import File, open as zopen

    f = file if isinstance(file, File) else zopen(file)
    dev = _device(device)
    wanted = f.columns if names is None else list(names)
    if dev.type == "cuda":
        return _on_gpu(f, wanted, dev, decimal)
    table = f.read(wanted)
    out = DeviceColumns()
    for i, n in enumerate(table.column_names):
        out[n] = _tensor(table.column(i), n, decimal)
    return out


class ChunkDataset(_torch.utils.data.IterableDataset):
    """An IterableDataset over a .zf file yielding a few row groups at a time as a dict of
    tensors (column -> tensor of those rows) on `device`.

    Row groups are decoded as they are asked for, so memory stays at a few items. Each item
    holds `row_groups` row groups (default: one on the CPU; on a GPU, as many as make about a
    million rows, enough to keep it busy). With `shuffle=True` the order of row groups changes
    each epoch (seeded by `seed` and the epoch).

    On the CPU, with a DataLoader (batch_size=None) each worker takes every num_workers-th
    item. On a CUDA device the compressed row groups are copied and decoded on the GPU, and
    the next item is decoded on a background thread while the current one is used (GPU
    decoding runs in the main process: use num_workers=0).
    """

    def __init__(
        self,
        path: Any,
        columns: Optional[Sequence[str]] = None,
        *,
        device: Any = "cpu",
        decimal: str = "float64",
        shuffle: bool = False,
        seed: int = 0,
        row_groups: Optional[int] = None,
    ) -> None:
        super().__init__()
        from . import open as zopen

        self.path = path
        self._file = zopen(path)
        self.columns = list(columns) if columns is not None else self._file.columns
        missing = [c for c in self.columns if c not in self._file.columns]
        if missing:
            raise InvalidInputError(
                f"{self._file.path}: no column {', '.join(missing)} "
                f"(columns: {', '.join(self._file.columns)})"
            )
        _check_decimal(decimal)
        self.device = _device(device)
        if row_groups is None:
            rows = max(1, self._file.chunk_rows)
            row_groups = 1 if self.device.type == "cpu" else max(1, (1 << 20) // rows)
        if row_groups < 1:
            raise InvalidInputError(f"row_groups must be at least 1, not {row_groups}")
        self.row_groups = row_groups
        self.decimal = decimal
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0

    def __len__(self) -> int:
        return -(-self._file.num_chunks // self.row_groups)

    def set_epoch(self, epoch: int) -> None:
        """The epoch, which seeds the shuffled order of row groups."""
        self.epoch = epoch

    def _items(self) -> list:
        """The row groups of each item this iterator yields, in order."""
        order = list(range(self._file.num_chunks))
        if self.shuffle:
            g = _torch.Generator()
            g.manual_seed(self.seed + self.epoch)
            order = [order[i] for i in _torch.randperm(len(order), generator=g).tolist()]
        k = self.row_groups
        items = [order[i : i + k] for i in range(0, len(order), k)]
        info = _torch.utils.data.get_worker_info()
        if info is not None:
            if self.device.type == "cuda":
                raise InvalidInputError(
                    "a ChunkDataset on a GPU decodes in the main process: use a DataLoader "
                    "with num_workers=0 (the next item is decoded on a background thread)"
                )
            items = items[info.id :: info.num_workers]
        return items

    def _cpu_item(self, groups: list) -> Dict[str, Any]:
        batches = [self._file.read_row_group(i, self.columns) for i in groups]
        table = pa.Table.from_batches(batches) if len(batches) > 1 else batches[0]
        return {
            name: _tensor(table.column(j), name, self.decimal)
            for j, name in enumerate(self.columns)
        }

    def __iter__(self) -> Iterator[Dict[str, Any]]:
        items = self._items()
        if self.device.type == "cpu":
            for groups in items:
                yield self._cpu_item(groups)
            return
        if not items:
            return
        # The next item decodes on a thread (the decode releases the GIL) while this one is
        # used: its copy and kernels overlap the consumer's work on the GPU.
        from concurrent.futures import ThreadPoolExecutor

        def decode(groups: list) -> DeviceColumns:
            return _on_gpu(self._file, self.columns, self.device, self.decimal, groups)

        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="zipflow-decode") as pool:
            pending = pool.submit(decode, items[0])
            for nxt in items[1:]:
                ready = pending.result()
                pending = pool.submit(decode, nxt)
                yield ready
            yield pending.result()


__all__ = ["column", "columns", "ChunkDataset", "DeviceColumns"]
