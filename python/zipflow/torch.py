"""zipflow columns as PyTorch tensors.

    import zipflow, zipflow.torch
    f = zipflow.open("lineitem.zf")
    qty = f.to_torch("l_quantity")                      # the whole column, decoded on the CPU
    ds = zipflow.torch.ChunkDataset("lineitem.zf", ["l_quantity", "l_discount"])
    for batch in torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2): ...

Types: integers, floats and booleans keep their type; dates become int32 days since
1970-01-01; timestamps and durations int64 in their unit; decimals the float64 nearest their
value (`decimal="int64"` keeps the scaled integer instead). String columns and columns with
nulls are refused: fill or drop nulls first (`File.read(...)`, pyarrow.compute).

`device="cpu"` decodes on the CPU and makes a tensor over the decoded buffer (one copy where
a column spans several row groups, to make it contiguous). Decoding on the GPU straight into
device memory is not implemented yet: another device is refused with an error that says so,
rather than silently decoding on the host and copying plain bytes.
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


def _cpu_only(device: Any) -> Any:
    """`device` as a torch device, refused unless it is the CPU."""
    dev = _torch.device(device)
    if dev.type != "cpu":
        raise UnsupportedError(
            f"decoding into {dev.type} memory is not implemented yet: decode with "
            "device='cpu' and move the tensors (tensor.to(device)); that copies decoded, "
            "not compressed, bytes"
        )
    return dev


def _as_numpy_ready(array: pa.Array, name: str, decimal: str) -> pa.Array:
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
        if decimal == "float64":
            return pc.cast(array, pa.float64())
        if t.precision > 18:
            raise UnsupportedError(
                f"column `{name}` is {t}: its scaled integers do not fit int64"
            )
        scaled = pc.multiply(array, pa.scalar(10**t.scale, pa.decimal128(19, 0)))
        return pc.cast(scaled, pa.int64())
    if pa.types.is_dictionary(t):
        return _as_numpy_ready(array.dictionary_decode(), name, decimal)
    raise UnsupportedError(f"column `{name}` is {t}: a tensor holds numbers only")


def _tensor(chunked: Any, name: str, decimal: str):
    if decimal not in _DECIMALS:
        raise InvalidInputError(f"decimal must be one of {_DECIMALS}, not {decimal!r}")
    parts = chunked.chunks if isinstance(chunked, pa.ChunkedArray) else [chunked]
    tensors = []
    for part in parts:
        ready = _as_numpy_ready(part, name, decimal)
        values = ready.to_numpy(zero_copy_only=not pa.types.is_boolean(ready.type))
        with warnings.catch_warnings():
            # The decoded buffer is read-only to numpy (Arrow memory is immutable); torch
            # warns that it cannot mark the tensor so. Nothing else refers to the buffer.
            warnings.simplefilter("ignore", UserWarning)
            tensors.append(_torch.from_numpy(values))
    if not tensors:
        return _torch.empty(0)
    return tensors[0] if len(tensors) == 1 else _torch.cat(tensors)


def column(file: Any, name: str, *, device: Any = "cpu", decimal: str = "float64"):
    """Column `name` of `file` (a zipflow.File or a path) as one tensor on `device`."""
    from . import File, open as zopen

    f = file if isinstance(file, File) else zopen(file)
    _cpu_only(device)
    table = f.read([name])
    return _tensor(table.column(0), name, decimal)


def columns(
    file: Any,
    names: Optional[Sequence[str]] = None,
    *,
    device: Any = "cpu",
    decimal: str = "float64",
) -> Dict[str, Any]:
    """Columns `names` (all when None) of `file` as a dict of tensors on `device`."""
    from . import File, open as zopen

    f = file if isinstance(file, File) else zopen(file)
    _cpu_only(device)
    table = f.read(None if names is None else list(names))
    return {
        n: _tensor(table.column(i), n, decimal)
        for i, n in enumerate(table.column_names)
    }


class ChunkDataset(_torch.utils.data.IterableDataset):
    """An IterableDataset over a .zf file yielding one row group at a time as a dict of
    tensors (column -> tensor of that row group's rows) on `device`.

    Row groups are decoded as they are asked for, so memory stays at a few row groups. With
    a DataLoader (batch_size=None) each worker takes every num_workers-th row group; with
    `shuffle=True` the order of row groups changes each epoch (seeded by `seed` and the
    epoch). Row groups are decoded on the CPU (`device="cpu"`; decoding on the GPU is not
    implemented yet).
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
        if decimal not in _DECIMALS:
            raise InvalidInputError(f"decimal must be one of {_DECIMALS}, not {decimal!r}")
        self.device = _cpu_only(device)
        self.decimal = decimal
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0

    def __len__(self) -> int:
        return self._file.num_chunks

    def set_epoch(self, epoch: int) -> None:
        """The epoch, which seeds the shuffled order of row groups."""
        self.epoch = epoch

    def _order(self) -> list:
        order = list(range(self._file.num_chunks))
        if self.shuffle:
            g = _torch.Generator()
            g.manual_seed(self.seed + self.epoch)
            order = [order[i] for i in _torch.randperm(len(order), generator=g).tolist()]
        info = _torch.utils.data.get_worker_info()
        if info is not None:
            order = order[info.id :: info.num_workers]
        return order

    def __iter__(self) -> Iterator[Dict[str, Any]]:
        for i in self._order():
            batch = self._file.read_row_group(i, self.columns)
            yield {
                name: _tensor(batch.column(j), name, self.decimal)
                for j, name in enumerate(self.columns)
            }


__all__ = ["column", "columns", "ChunkDataset"]
