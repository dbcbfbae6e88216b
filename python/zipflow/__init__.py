"""zipflow: columnar compression with composable lightweight encodings, and queries on the
compressed data.

    import zipflow
    zipflow.compress(table, "t.zf")                 # a pyarrow Table, RecordBatchReader,
                                                    # pandas DataFrame or a file path
    f = zipflow.open("t.zf")
    f.schema, f.num_rows, f.columns, f.inspect()
    f.read(columns=["a", "b"], filter="a > 10")     # -> pyarrow.Table
    for batch in f.iter_batches(): ...              # one row group at a time
    f.to_pandas()
    zipflow.sql("SELECT a, count(*) FROM t GROUP BY a", tables={"t": "t.zf"})
    blob = zipflow.compress_bytes(b"some text"); zipflow.decompress_bytes(blob)

Tables cross into and out of zipflow through the Arrow C interfaces: reading hands pyarrow
the decoders' own buffers, without a copy. Errors raise the classes in `zipflow.errors`, with
the one-line message the `zipflow` command prints.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Iterable, Mapping, Optional, Sequence, Union

import pyarrow as pa

from . import _zipflow
from .errors import (
    CorruptFileError,
    InvalidInputError,
    QueryError,
    UnsupportedError,
    ZipflowError,
)

__version__ = _zipflow.__version__

PathLike = Union[str, "os.PathLike[str]"]

OBJECTIVES = ("smallest", "balanced", "fastest", "gpu")
DEFAULT_CHUNK_ROWS = 65536


def _is_path(x: Any) -> bool:
    return isinstance(x, (str, os.PathLike))


def _arrow_stream(source: Any) -> Any:
    """Anything that holds a table, as an object with `__arrow_c_stream__`."""
    if _is_path(source):
        return _open_path(os.fspath(source))
    if hasattr(source, "__arrow_c_stream__"):
        return source
    if isinstance(source, pa.RecordBatch):
        return pa.Table.from_batches([source])
    # pandas (and anything with a DataFrame interchange or to_arrow method) without importing
    # pandas here.
    module = type(source).__module__
    if module.startswith("pandas"):
        return pa.Table.from_pandas(source, preserve_index=False)
    if hasattr(source, "to_arrow"):
        return source.to_arrow()
    raise InvalidInputError(
        f"cannot compress a {type(source).__name__}: give a pyarrow Table or "
        "RecordBatchReader, a pandas DataFrame, or the path of a .parquet, .csv or .arrow file"
    )


def _open_path(path: str) -> Any:
    """A table file as a record batch reader that streams it."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: No such file or directory")
    lower = path.lower()
    if lower.endswith(".parquet"):
        import pyarrow.parquet as pq

        pf = pq.ParquetFile(path)
        return pa.RecordBatchReader.from_batches(pf.schema_arrow, pf.iter_batches())
    if lower.endswith(".csv") or lower.endswith(".csv.gz"):
        import pyarrow.csv as pacsv

        return pacsv.open_csv(path)
    if lower.endswith((".arrow", ".ipc", ".feather", ".arrows")):
        import pyarrow.ipc as ipc

        try:
            return ipc.open_file(path).read_all()
        except pa.ArrowInvalid:
            return ipc.open_stream(path)
    if lower.endswith(".zf"):
        return open(path).iter_batches()
    raise InvalidInputError(
        f"{path}: unknown table format (expected .parquet, .csv, .arrow or .zf)"
    )


def compress(
    source: Any,
    path: PathLike,
    *,
    objective: str = "balanced",
    plans: Optional[Mapping[str, str]] = None,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    min_decode_gbs: Optional[float] = None,
    overwrite: bool = False,
) -> Dict[str, Any]:
    """Compresses a table into the .zf file `path`.

    source: a pyarrow Table or RecordBatchReader (or any object with `__arrow_c_stream__`;
        read as a stream, without a copy), a pandas DataFrame, or the path of a .parquet,
        .csv, .arrow (Arrow IPC) or .zf file (streamed batch by batch).
    objective: what chosen plans optimise: "smallest", "balanced" (size and decode speed),
        "fastest", or "gpu" (plans the GPU decodes in parallel).
    plans: a forced plan per column, e.g. {"price": "float2int(2) | for | bitpack"}.
    chunk_rows: rows per row group (and per chunk of every column).
    min_decode_gbs: choose the smallest plan decoding at this many GB/s or more (overrides
        objective).
    overwrite: replace an existing file; otherwise an existing `path` is an error.

    The file is written to a temporary file renamed at the end: an error leaves nothing at
    `path`. Returns a summary: rows, bytes, and per column its type, plans and sizes.
    """
    if objective not in OBJECTIVES:
        raise InvalidInputError(
            f"unknown objective `{objective}` (known: {', '.join(OBJECTIVES)})"
        )
    stream = _arrow_stream(source)
    return _zipflow.compress_stream(
        stream,
        os.fspath(path),
        objective,
        dict(plans or {}),
        int(chunk_rows),
        min_decode_gbs,
        bool(overwrite),
    )


class File:
    """An open .zf file. Open one with `zipflow.open(path)`."""

    def __init__(self, raw: Any) -> None:
        self._raw = raw

    @property
    def path(self) -> str:
        """The path the file was opened from."""
        return os.fspath(self._raw.path)

    @property
    def schema(self) -> pa.Schema:
        """The pyarrow schema the table was written with (types, nullability, metadata)."""
        return self._raw.schema

    @property
    def num_rows(self) -> int:
        """Rows in the file."""
        return self._raw.num_rows

    @property
    def num_chunks(self) -> int:
        """Row groups: every column is stored as this many independently decodable chunks."""
        return self._raw.num_chunks

    @property
    def chunk_rows(self) -> int:
        """Rows per row group (every one but the last holds this many)."""
        return self._raw.chunk_rows

    @property
    def columns(self) -> list:
        """Column names, in order."""
        return self._raw.columns

    @property
    def nbytes(self) -> int:
        """Size of the file in bytes."""
        return self._raw.nbytes

    def __len__(self) -> int:
        return len(self._raw)

    def __repr__(self) -> str:
        return repr(self._raw)

    def inspect(self) -> Dict[str, Any]:
        """What `zipflow inspect` shows: rows, chunks, bytes, and per column its type, the
        plans of its chunks (plan -> chunk count), compressed and plain bytes, nulls."""
        return self._raw.inspect()

    def read(
        self,
        columns: Optional[Sequence[str]] = None,
        filter: Optional[str] = None,
        *,
        threads: int = 0,
    ) -> pa.Table:
        """The table, or `columns` of it, as a pyarrow Table.

        filter: a SQL predicate over the columns, e.g. "l_shipdate < DATE '1998-09-02' AND
            l_quantity > 10"; chunks whose zone maps rule it out are not read. Unquoted names
            are lower-cased as in SQL: quote others ("\\"Name\\"").
        threads: decoding threads; 0 for one per core.

        Without a filter the arrays are the decoders' own buffers, handed to pyarrow without
        a copy; each row group is one record batch of the table.
        """
        return self._raw.read(_names(columns), filter, threads)

    def iter_batches(
        self,
        columns: Optional[Sequence[str]] = None,
        filter: Optional[str] = None,
        *,
        threads: int = 0,
    ) -> pa.RecordBatchReader:
        """A pyarrow RecordBatchReader over the table (or `columns`, rows passing `filter`)
        that decodes one row group as each batch is read: memory stays at one row group."""
        return self._raw.iter_batches(_names(columns), filter, threads)

    def read_row_group(self, i: int, columns: Optional[Sequence[str]] = None) -> pa.RecordBatch:
        """Row group `i` alone (rows `i * chunk_rows` on), decoded on this thread."""
        return self._raw.read_row_group(i, _names(columns))

    def to_pandas(
        self,
        columns: Optional[Sequence[str]] = None,
        filter: Optional[str] = None,
        **kwargs: Any,
    ):
        """The table as a pandas DataFrame (`pyarrow.Table.to_pandas(**kwargs)`)."""
        return self.read(columns, filter).to_pandas(**kwargs)

    def __datafusion_table_provider__(self, session: Any) -> object:
        """The file as a table of the `datafusion` Python package (version 55), scanned by
        zipflow with projection, zone-map filter and limit pushdown:

            ctx = datafusion.SessionContext()
            ctx.register_table("lineitem", zipflow.open("lineitem.zf"))
            ctx.sql("SELECT count(*) FROM lineitem").to_arrow_table()
        """
        return _zipflow.datafusion_table_provider(self._raw, session)

    def to_torch(self, column: str, device: Any = "cpu", decimal: str = "float64"):
        """Column `column` as a torch tensor on `device`: with a CUDA device, decoded on the
        GPU straight into device memory. See `zipflow.torch.column`."""
        from . import torch as zt

        return zt.column(self, column, device=device, decimal=decimal)

    def to_device(
        self,
        columns: Optional[Sequence[str]] = None,
        device: Any = "cuda",
        decimal: str = "float64",
    ):
        """Columns (all when None) as a dict of torch tensors on `device`, decoded there.
        See `zipflow.torch.columns`."""
        from . import torch as zt

        return zt.columns(self, columns, device=device, decimal=decimal)


def _names(columns: Optional[Iterable[str]]) -> Optional[list]:
    if columns is None:
        return None
    if isinstance(columns, str):
        raise InvalidInputError(
            f"columns must be a list of names, not the string {columns!r}"
        )
    return [str(c) for c in columns]


def open(path: PathLike) -> File:  # noqa: A001 - the package's entry point, as in the CLI
    """Opens a .zf file: checks its header, footer and index; no chunk is read yet."""
    return File(_zipflow.open(os.fspath(path)))


def sql(
    query: str,
    tables: Optional[Mapping[str, Any]] = None,
    *,
    threads: int = 0,
) -> pa.Table:
    """Runs a SQL query and returns a pyarrow Table.

    tables: name -> a .zf path (a file, a directory of .zf files or a glob), or Arrow data
        (a pyarrow Table or RecordBatchReader, a pandas DataFrame) to query beside them.
    A .zf path quoted in FROM or JOIN is a table too: "SELECT count(*) FROM 'lineitem.zf'".

    The query runs on Apache DataFusion with zipflow's tables and functions, as
    `zipflow sql --engine datafusion` does: joins, subqueries, CTEs, window functions and
    DataFusion's functions; chunks are pruned by zone maps and decoded on `threads` threads
    (0: one per core).
    """
    paths = []
    memory = []
    for name, value in (tables or {}).items():
        if _is_path(value):
            paths.append((str(name), os.fspath(value)))
        elif isinstance(value, File):
            paths.append((str(name), value.path))
        else:
            stream = _arrow_stream(value)
            memory.append((str(name), stream))
    return _zipflow.sql(query, paths, memory, threads)


def compress_bytes(
    data: Union[bytes, bytearray, memoryview],
    plan: Optional[str] = None,
    *,
    objective: str = "balanced",
) -> bytes:
    """Compresses bytes (text or any binary) with zipflow's text plans, or `plan` (e.g.
    "words(dict: plain(bytes: fsst))"), and returns the bytes of a .zf file (what
    `zipflow compress --text` writes). `decompress_bytes` gives the input back."""
    if not isinstance(data, bytes):
        data = bytes(data)
    return _zipflow.compress_bytes(data, plan, objective)


def decompress_bytes(data: Union[bytes, bytearray, memoryview]) -> bytes:
    """The bytes held by a text .zf file's bytes (what `compress_bytes` returned)."""
    if not isinstance(data, bytes):
        data = bytes(data)
    return _zipflow.decompress_bytes(data)


__all__ = [
    "File",
    "compress",
    "open",
    "sql",
    "compress_bytes",
    "decompress_bytes",
    "ZipflowError",
    "CorruptFileError",
    "UnsupportedError",
    "InvalidInputError",
    "QueryError",
    "OBJECTIVES",
    "DEFAULT_CHUNK_ROWS",
]
