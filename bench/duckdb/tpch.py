#!/usr/bin/env python3
"""TPC-H Q1 and Q6 in DuckDB, the reference for `zipflow bench tpch`.

Generates lineitem with DuckDB's tpch extension (the same data as tpchgen-rs), then times
Q1 and Q6 on DuckDB's native table and on a Parquet copy, at each thread count, and prints
the median of several runs plus the query results (to compare with `zipflow sql`).

Setup (PyPI): pip install duckdb==1.4.4 duckdb-ext-tpch==1.4.4.20260205
Usage:        python3 bench/duckdb/tpch.py --sf 1 --threads 1,2 --runs 7

With `--zipflow target/release/zipflow --zf lineitem.zf`, each (query, threads) measurement
of DuckDB is followed at once by `zipflow bench tpch` on the same query and thread count, so
both see the same machine load (this machine is shared; timings drift minute to minute).

With `--json results.json`, the medians are also saved as JSON (one row per query, thread
count and engine: `duckdb`, `duckdb-parquet` or `zipflow`), which
`zipflow bench chart queries --from results.json --svg queries.svg` draws as grouped bars.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import duckdb

Q1 = """
SELECT l_returnflag, l_linestatus,
       sum(l_quantity) AS sum_qty,
       sum(l_extendedprice) AS sum_base_price,
       sum(l_extendedprice * (1 - l_discount)) AS sum_disc_price,
       sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) AS sum_charge,
       avg(l_quantity) AS avg_qty,
       avg(l_extendedprice) AS avg_price,
       avg(l_discount) AS avg_disc,
       count(*) AS count_order
FROM {table}
WHERE l_shipdate <= DATE '1998-12-01' - INTERVAL '90' DAY
GROUP BY l_returnflag, l_linestatus
ORDER BY l_returnflag, l_linestatus
"""

Q6 = """
SELECT sum(l_extendedprice * l_discount) AS revenue
FROM {table}
WHERE l_shipdate >= DATE '1994-01-01'
  AND l_shipdate < DATE '1994-01-01' + INTERVAL '1' YEAR
  AND l_discount BETWEEN 0.06 - 0.01 AND 0.06 + 0.01
  AND l_quantity < 24
"""


def extension_dir():
    """Where the duckdb-ext-tpch wheel put the extension (no download needed)."""
    import importlib.util

    spec = importlib.util.find_spec("duckdb_ext")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("the tpch extension is missing: pip install duckdb-ext-tpch==1.4.4.20260205")
    return os.path.join(list(spec.submodule_search_locations)[0], "extensions")


def zf_bench(args, qname, threads):
    """Runs `zipflow bench tpch` for one query and thread count, prints its line and returns
    its median ms (None when it printed no line for the query)."""
    out = subprocess.run(
        [args.zipflow, "bench", "tpch", "--file", args.zf, "--queries", qname,
         "--threads", str(threads), "--runs", str(args.runs)],
        check=True, capture_output=True, text=True,
    ).stdout
    for line in out.splitlines():
        f = line.split()
        if f and f[0] == qname:
            print(f"{qname:<6} {'zipflow':<8} {threads:>7} {float(f[2]):>10.2f} {float(f[3]):>9.2f} {f[5]:>11}")
            return float(f[2])
    return None


def write_json(path, args, medians):
    """Writes the medians for `zipflow bench chart queries`, through a temporary file renamed
    onto `path` when complete."""
    doc = {
        "measured": f"TPC-H SF {args.sf:g} lineitem, DuckDB {duckdb.__version__}, medians of "
                    f"{args.runs}, {time.strftime('%Y-%m-%d')}",
        "sf": args.sf,
        "runs": args.runs,
        "duckdb": duckdb.__version__,
        "results": [
            {"query": q, "threads": t, "engine": e, "median_ms": round(ms, 3)}
            for (q, t, e, ms) in medians
        ],
    }
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sf", type=float, default=1.0)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--parquet", help="lineitem Parquet file to query (default: exported from DuckDB)")
    ap.add_argument("--no-parquet", action="store_true", help="only the native table")
    ap.add_argument("--zipflow", help="zipflow binary to interleave with (see the module docs)")
    ap.add_argument("--zf", help="lineitem .zf file for --zipflow")
    ap.add_argument("--json", metavar="PATH",
                    help="also save the medians (query, threads, engine, median ms) as JSON here, "
                         "for `zipflow bench chart queries --from PATH --svg CHART`")
    args = ap.parse_args()
    if args.json and not os.path.isdir(os.path.dirname(os.path.abspath(args.json))):
        sys.exit(f"--json {args.json}: its directory does not exist")
    threads = [int(t) for t in args.threads.split(",")]

    con = duckdb.connect()
    con.execute("SET autoinstall_known_extensions=false")
    con.execute(f"SET extension_directory='{extension_dir()}'")
    con.execute("LOAD tpch")
    start = time.perf_counter()
    con.execute(f"CALL dbgen(sf={args.sf})")
    rows = con.execute("SELECT count(*) FROM lineitem").fetchone()[0]
    print(f"DuckDB {duckdb.__version__}: generated TPC-H SF {args.sf} ({rows} lineitem rows) "
          f"in {time.perf_counter() - start:.1f} s", file=sys.stderr)

    tables = [("native", "lineitem")]
    tmp = None
    if not args.no_parquet:
        path = args.parquet
        if path is None:
            tmp = tempfile.TemporaryDirectory()
            path = os.path.join(tmp.name, "lineitem.parquet")
            con.execute(f"COPY lineitem TO '{path}' (FORMAT parquet)")
        tables.append(("parquet", f"read_parquet('{path}')"))

    print(f"{'query':<6} {'source':<8} {'threads':>7} {'median ms':>10} {'min ms':>9} {'cpu ms/run':>11}")
    results = {}
    medians = []  # (query, threads, engine, median ms)
    for qname, text in [("Q1", Q1), ("Q6", Q6)]:
        for source, table in tables:
            sql = text.format(table=table)
            for t in threads:
                con.execute(f"SET threads={t}")
                results[qname] = con.execute(sql).fetchall()  # warm-up
                times = []
                cpu0 = time.process_time()
                for _ in range(args.runs):
                    s = time.perf_counter()
                    con.execute(sql).fetchall()
                    times.append((time.perf_counter() - s) * 1e3)
                cpu = (time.process_time() - cpu0) * 1e3 / args.runs
                median = statistics.median(times)
                print(f"{qname:<6} {source:<8} {t:>7} {median:>10.2f} {min(times):>9.2f} {cpu:>11.1f}")
                engine = "duckdb" if source == "native" else f"duckdb-{source}"
                medians.append((qname, t, engine, median))
                if args.zipflow and source == "native":
                    zf = zf_bench(args, qname, t)
                    if zf is not None:
                        medians.append((qname, t, "zipflow", zf))
    if args.json:
        write_json(args.json, args, medians)
        print(f"wrote the medians to {args.json}", file=sys.stderr)
    for qname, rows in results.items():
        print(f"\n{qname} result:")
        for r in rows:
            print("  " + " | ".join(str(v) for v in r))


if __name__ == "__main__":
    main()
