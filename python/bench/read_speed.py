"""File.read() into pyarrow against the Rust reader on the same file, one thread each.

    python python/bench/read_speed.py lineitem.zf [--runs 7] [--columns a,b]

Both decode every row group with the same decoders; File.read() adds what crossing into
Python costs: releasing the GIL, exporting the arrays through the Arrow C data interface and
assembling the pyarrow Table. Prints the medians, their ratio, and pyarrow's own allocations
during the read (0: the decoded buffers were handed over, not copied).
"""

import argparse
import statistics
import time

import pyarrow as pa

import zipflow
from zipflow import _zipflow


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--columns", help="comma-separated column names (default: all)")
    a = ap.parse_args()
    columns = a.columns.split(",") if a.columns else None
    f = zipflow.open(a.path)
    f.read(columns, threads=1)  # warm the page cache and the allocator

    py_secs = []
    allocated = 0
    nbytes = 0
    for _ in range(a.runs):
        before = pa.total_allocated_bytes()
        start = time.perf_counter()
        t = f.read(columns, threads=1)
        py_secs.append(time.perf_counter() - start)
        allocated = max(allocated, pa.total_allocated_bytes() - before)
        nbytes = t.nbytes
        del t
    rust = _zipflow.bench_rust_read(a.path, columns, a.runs)
    py = statistics.median(py_secs)
    print(f"file: {a.path} ({f.num_rows} rows, {f.num_chunks} row groups, {nbytes / 1e6:.1f} MB as Arrow)")
    print(f"Rust reader, 1 thread:        {rust * 1e3:9.1f} ms  {nbytes / rust / 1e9:6.2f} GB/s")
    print(f"File.read(threads=1):         {py * 1e3:9.1f} ms  {nbytes / py / 1e9:6.2f} GB/s")
    print(f"speed of File.read / Rust:    {rust / py:9.3f}")
    print(f"pyarrow pool bytes allocated: {allocated}")


if __name__ == "__main__":
    main()
