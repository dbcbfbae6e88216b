"""Tables of the real-data suite through zipflow and back, bit for bit.

The suite is laid out by `python3 scripts/real_data.py DIR` (scripts/test-python.sh does it
into target/real-data and sets ZIPFLOW_REAL_DATA). The tables here are those with the most
kinds of columns: time-zoned timestamps, dates, nulls, booleans, long and categorical strings,
doubles with full mantissas. `zipflow bench real` runs every table of the suite.
"""

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import zipflow

SUITE = os.environ.get("ZIPFLOW_REAL_DATA", "")
TABLES = [
    "flights",
    "mpls_stops",
    "trump_tweets",
    "pizzaplace",
    "star",
    "rain_ibk",
    "loans",
    "birthdays",
]
# Rows taken from each table: enough for several chunks of 16 Ki rows.
ROWS = 40_000


def suite_table(name):
    path = os.path.join(SUITE, name + ".parquet")
    if not os.path.exists(path):
        if os.environ.get("ZIPFLOW_REAL_DATA_REQUIRED"):
            pytest.fail(f"{path} is missing: run python3 scripts/real_data.py {SUITE}")
        pytest.skip(f"the real-data suite is not laid out at {SUITE!r}")
    return pq.read_table(path).slice(0, ROWS)


def as_bits(column):
    """Floats as their bits, so NaN payloads and -0.0 compare exactly."""
    widths = {pa.float16(): pa.int16(), pa.float32(): pa.int32(), pa.float64(): pa.int64()}
    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    return column.view(widths[column.type]) if column.type in widths else column


@pytest.mark.parametrize("objective", ["smallest", "balanced"])
@pytest.mark.parametrize("name", TABLES)
def test_real_table_round_trips_bit_for_bit(tmp_path, name, objective):
    table = suite_table(name)
    path = tmp_path / f"{name}.zf"
    summary = zipflow.compress(table, path, objective=objective, chunk_rows=16_384)
    assert summary["rows"] == table.num_rows
    back = zipflow.open(path).read()
    assert back.schema == table.schema
    for field in table.schema:
        want, got = as_bits(table[field.name]), as_bits(back[field.name])
        assert got.equals(want), f"{name}.{field.name} ({field.type}) under {objective}"
