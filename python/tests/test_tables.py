"""Tables through zipflow and back: types, projections, filters, streams, inspection."""

import datetime as dt
import decimal
import math
import os

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

import zipflow


def mixed_table(n=5000):
    """A table with every kind of column zipflow stores, nulls and awkward floats included."""
    rows = range(n)
    return pa.table(
        {
            "i8": pa.array([(i % 250) - 125 for i in rows], pa.int8()),
            "u16": pa.array([i % 60000 for i in rows], pa.uint16()),
            "i32": pa.array([None if i % 97 == 0 else i * 7 - 1000 for i in rows], pa.int32()),
            "i64": pa.array([(i * 2654435761) % (1 << 40) - (1 << 39) for i in rows], pa.int64()),
            "u64": pa.array([(1 << 63) + i for i in rows], pa.uint64()),
            "f32": pa.array([i / 8 for i in rows], pa.float32()),
            "f64": pa.array(
                [
                    [math.nan, -0.0, 0.0, math.inf, -math.inf, 1e-300][i % 6]
                    if i % 50 == 0
                    else i * 0.1
                    for i in rows
                ],
                pa.float64(),
            ),
            "flag": pa.array([None if i % 11 == 0 else i % 3 == 0 for i in rows], pa.bool_()),
            "name": pa.array([None if i % 13 == 0 else f"name-{i % 40}" for i in rows], pa.string()),
            "text": pa.array(["x" * (i % 70) + "é" for i in rows], pa.large_string()),
            "blob": pa.array([bytes([i % 256, 0, 255]) * (i % 5) for i in rows], pa.binary()),
            "day": pa.array(
                [dt.date(1992, 1, 1) + dt.timedelta(days=i % 2500) for i in rows], pa.date32()
            ),
            "ts": pa.array(
                [1_700_000_000_000_000 + i * 1_000_003 for i in rows],
                pa.timestamp("us", tz="Europe/Paris"),
            ),
            "price": pa.array(
                [decimal.Decimal(i * 13 % 100000) / 100 for i in rows], pa.decimal128(12, 2)
            ),
        }
    )


def bits(table):
    """`table` with each float column as the integers of its bits, so that equals() compares
    NaN and the sign of zero exactly."""
    width = {pa.float32(): pa.int32(), pa.float64(): pa.int64()}
    cols = []
    for col in table.columns:
        if col.type in width:
            col = pa.chunked_array([c.view(width[col.type]) for c in col.chunks], width[col.type])
        cols.append(col)
    return pa.table(cols, names=table.column_names)


@pytest.fixture
def table():
    return mixed_table()


@pytest.fixture
def zf(tmp_path, table):
    path = tmp_path / "t.zf"
    zipflow.compress(table, path, chunk_rows=1024)
    return path


def test_every_type_round_trips_bit_for_bit(zf, table):
    f = zipflow.open(zf)
    back = f.read()
    assert back.schema == table.schema
    assert bits(back).equals(bits(table))
    assert back.column("ts").type.tz == "Europe/Paris"


def test_file_properties_and_inspect(zf, table):
    f = zipflow.open(zf)
    assert f.num_rows == len(f) == table.num_rows
    assert f.columns == table.column_names
    assert f.num_chunks == 5 and f.chunk_rows == 1024
    assert f.nbytes == os.path.getsize(zf)
    assert f.path == os.fspath(zf)
    info = f.inspect()
    assert info["rows"] == table.num_rows and info["chunks"] == 5
    cols = {c["name"]: c for c in info["columns"]}
    assert cols["i32"]["null_count"] == sum(1 for i in range(table.num_rows) if i % 97 == 0)
    assert cols["i32"]["nullable"]
    assert sum(cols["name"]["plans"].values()) == 5
    assert all(c["compressed_bytes"] > 0 for c in info["columns"])
    assert "5000 rows" in repr(f)


def test_projection_keeps_order_and_types(zf, table):
    f = zipflow.open(zf)
    got = f.read(columns=["price", "i8"])
    assert got.column_names == ["price", "i8"]
    assert got.equals(table.select(["price", "i8"]))
    with pytest.raises(zipflow.InvalidInputError, match="no column `nope`"):
        f.read(columns=["nope"])
    with pytest.raises(ValueError, match="named twice"):
        f.read(columns=["i8", "i8"])
    with pytest.raises(zipflow.InvalidInputError, match="list of names"):
        f.read(columns="i8")


def test_filter_selects_the_rows_a_predicate_keeps(zf, table):
    f = zipflow.open(zf)
    got = f.read(columns=["i32", "name"], filter="i32 > 20000 AND name LIKE 'name-1%'")
    mask = pc.and_(
        pc.greater(table.column("i32"), 20000), pc.match_like(table.column("name"), "name-1%")
    )
    want = table.select(["i32", "name"]).filter(mask)
    assert got.sort_by("i32").equals(want.sort_by("i32"))
    with pytest.raises(zipflow.QueryError):
        f.read(filter="no_such_column > 1")


def test_iter_batches_streams_row_groups(zf, table):
    f = zipflow.open(zf)
    reader = f.iter_batches(columns=["i64", "text"])
    assert isinstance(reader, pa.RecordBatchReader)
    sizes = [b.num_rows for b in reader]
    assert sizes == [1024, 1024, 1024, 1024, 904]
    again = pa.Table.from_batches(f.iter_batches(columns=["i64", "text"]))
    assert again.equals(table.select(["i64", "text"]))
    filtered = f.iter_batches(columns=["u16"], filter="u16 < 100").read_all()
    assert filtered.num_rows == pc.sum(pc.less(table.column("u16"), 100)).as_py()


def test_row_groups_read_alone(zf, table):
    f = zipflow.open(zf)
    b = f.read_row_group(3, columns=["day", "flag"])
    assert b.num_rows == 1024
    assert pa.Table.from_batches([b]).equals(table.select(["day", "flag"]).slice(3072, 1024))
    with pytest.raises(IndexError, match="row group 5 out of range"):
        f.read_row_group(5)


def test_threads_do_not_change_the_answer(zf):
    f = zipflow.open(zf)
    assert bits(f.read(threads=1)).equals(bits(f.read(threads=3)))


def test_read_hands_over_the_decoders_buffers(zf):
    f = zipflow.open(zf)
    before = pa.total_allocated_bytes()
    t = f.read(columns=["i64", "f64", "text"])
    # The arrays were allocated by zipflow and imported through the C data interface:
    # pyarrow's own pool allocated nothing for them.
    assert pa.total_allocated_bytes() - before < 4096
    assert t.nbytes > 100_000


def test_pandas_in_and_out(tmp_path):
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame(
        {
            "a": range(3000),
            "b": [f"s{i % 17}" for i in range(3000)],
            "c": [i * 0.25 for i in range(3000)],
        }
    )
    path = tmp_path / "df.zf"
    summary = zipflow.compress(df, path)
    assert summary["rows"] == 3000 and [c["name"] for c in summary["columns"]] == ["a", "b", "c"]
    back = zipflow.open(path).to_pandas()
    pd.testing.assert_frame_equal(back, df, check_dtype=False)
    assert list(back["a"]) == list(df["a"])


def test_sources_by_path(tmp_path, table):
    small = table.select(["i8", "i64", "name", "day", "price"])
    pq.write_table(small, tmp_path / "s.parquet", row_group_size=700)
    zipflow.compress(tmp_path / "s.parquet", tmp_path / "p.zf")
    assert zipflow.open(tmp_path / "p.zf").read().equals(small)

    pacsv.write_csv(table.select(["i64", "name"]), tmp_path / "s.csv")
    zipflow.compress(str(tmp_path / "s.csv"), tmp_path / "c.zf")
    back = zipflow.open(tmp_path / "c.zf").read()
    assert back.column("i64").equals(table.column("i64"))

    # A .zf source is streamed through again, with other plans.
    zipflow.compress(tmp_path / "p.zf", tmp_path / "again.zf", objective="smallest")
    assert zipflow.open(tmp_path / "again.zf").read().equals(small)

    with pytest.raises(FileNotFoundError):
        zipflow.compress(tmp_path / "missing.parquet", tmp_path / "m.zf")
    with pytest.raises(zipflow.InvalidInputError, match="unknown table format"):
        (tmp_path / "x.txt").write_text("1,2\n")
        zipflow.compress(tmp_path / "x.txt", tmp_path / "x.zf")


def test_forced_plans_objectives_and_chunk_rows(tmp_path):
    t = pa.table({"k": pa.array(range(10000), pa.int64()), "v": pa.array([1.25] * 10000)})
    s = zipflow.compress(
        t,
        tmp_path / "p.zf",
        plans={"k": "delta | for | bitpack"},
        chunk_rows=4096,
        objective="fastest",
    )
    k = next(c for c in s["columns"] if c["name"] == "k")
    assert "delta" in k["plan"]
    f = zipflow.open(tmp_path / "p.zf")
    assert f.num_chunks == 3
    assert all("delta" in p for p in f.inspect()["columns"][0]["plans"])
    zipflow.compress(t, tmp_path / "g.zf", min_decode_gbs=2.0)
    with pytest.raises(zipflow.InvalidInputError, match="unknown objective"):
        zipflow.compress(t, tmp_path / "o.zf", objective="tiny")
    with pytest.raises(zipflow.InvalidInputError, match="plan for column `k`"):
        zipflow.compress(t, tmp_path / "o.zf", plans={"k": "bitpack |"})
    with pytest.raises(zipflow.InvalidInputError, match="does not have"):
        zipflow.compress(t, tmp_path / "o.zf", plans={"nope": "bitpack"})
    with pytest.raises(zipflow.InvalidInputError, match="min_decode_gbs"):
        zipflow.compress(t, tmp_path / "o.zf", min_decode_gbs=-1.0)
    with pytest.raises(zipflow.InvalidInputError, match="chunk_rows"):
        zipflow.compress(t, tmp_path / "o.zf", chunk_rows=0)
    assert not (tmp_path / "o.zf").exists()


def test_an_existing_output_needs_overwrite(tmp_path):
    t = pa.table({"a": [1, 2, 3]})
    zipflow.compress(t, tmp_path / "a.zf")
    with pytest.raises(zipflow.ZipflowError, match="exists"):
        zipflow.compress(t, tmp_path / "a.zf")
    zipflow.compress(pa.table({"a": [4, 5]}), tmp_path / "a.zf", overwrite=True)
    assert zipflow.open(tmp_path / "a.zf").read().column("a").to_pylist() == [4, 5]


def test_a_failing_source_leaves_nothing_behind(tmp_path):
    schema = pa.schema([("a", pa.int64())])

    def batches():
        yield pa.record_batch([pa.array(range(100))], schema=schema)
        raise RuntimeError("the producer failed")

    reader = pa.RecordBatchReader.from_batches(schema, batches())
    with pytest.raises(Exception, match="the producer failed"):
        zipflow.compress(reader, tmp_path / "f.zf")
    assert os.listdir(tmp_path) == []


def test_empty_and_unsupported_tables(tmp_path):
    empty = pa.table({"a": pa.array([], pa.int32()), "s": pa.array([], pa.string())})
    zipflow.compress(empty, tmp_path / "e.zf")
    f = zipflow.open(tmp_path / "e.zf")
    assert f.num_rows == 0 and f.read().schema == empty.schema
    nested = pa.table({"l": pa.array([[1, 2], [3]])})
    with pytest.raises(zipflow.UnsupportedError):
        zipflow.compress(nested, tmp_path / "n.zf")
    assert not (tmp_path / "n.zf").exists()
