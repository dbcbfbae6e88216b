"""A .zf file as a table of the `datafusion` Python package (its FFI table providers)."""

import datetime as dt
import decimal

import pyarrow as pa
import pytest

datafusion = pytest.importorskip("datafusion")

import zipflow  # noqa: E402


@pytest.fixture
def table():
    n = 5_000
    return pa.table(
        {
            "k": pa.array([f"key{i % 7}" for i in range(n)]),
            "v": pa.array([None if i % 11 == 0 else i % 97 for i in range(n)], pa.int32()),
            "p": pa.array([decimal.Decimal(i % 1000) / 100 for i in range(n)], pa.decimal128(7, 2)),
            "d": pa.array([dt.date(2020, 1, 1) + dt.timedelta(days=i % 300) for i in range(n)]),
        }
    )


def test_a_file_is_a_datafusion_table(tmp_path, table):
    path = tmp_path / "t.zf"
    zipflow.compress(table, path, chunk_rows=1_000)
    ctx = datafusion.SessionContext()
    ctx.register_table("t", zipflow.open(path))
    ctx.register_record_batches("mem", [table.to_batches()])
    query = (
        "SELECT k, count(*) AS n, count(v) AS nv, sum(v) AS s, sum(p) AS sp, max(d) AS md "
        "FROM {} WHERE d >= DATE '2020-03-01' AND v > 10 GROUP BY k ORDER BY k"
    )
    got = ctx.sql(query.format("t")).to_arrow_table()
    want = ctx.sql(query.format("mem")).to_arrow_table()
    assert got.num_rows == 7 and got.equals(want)
    # The table keeps the file's types, and joins with the session's other tables.
    assert ctx.table("t").schema() == zipflow.open(path).schema
    joined = ctx.sql(
        "SELECT count(*) AS n FROM t JOIN (SELECT DISTINCT k FROM mem WHERE k < 'key3') m "
        "ON t.k = m.k"
    ).to_arrow_table()
    assert joined.column("n")[0].as_py() == sum(1 for i in range(5_000) if i % 7 < 3)
    # Zone maps prune: no row group holds these dates, and none is read.
    none = ctx.sql("SELECT count(*) AS n FROM t WHERE d > DATE '2021-01-01'").to_arrow_table()
    assert none.column("n")[0].as_py() == 0


def test_not_a_session_is_refused(tmp_path, table):
    path = tmp_path / "t.zf"
    zipflow.compress(table, path)
    with pytest.raises(zipflow.InvalidInputError, match="SessionContext"):
        zipflow.open(path).__datafusion_table_provider__(object())
