"""SQL, text bytes, and the errors a user meets."""

import os
import random

import pyarrow as pa
import pytest

import zipflow


@pytest.fixture
def orders(tmp_path):
    n = 6000
    t = pa.table(
        {
            "o_id": pa.array(range(n), pa.int64()),
            "o_status": pa.array(["FOP"[i % 3] for i in range(n)]),
            "o_total": pa.array([(i * 37 % 1000) / 4 for i in range(n)]),
        }
    )
    path = tmp_path / "orders.zf"
    zipflow.compress(t, path, chunk_rows=2048)
    return t, path


def test_sql_over_files_named_and_quoted(orders):
    t, path = orders
    got = zipflow.sql(
        "SELECT o_status, count(*) AS n, sum(o_total) AS total FROM o GROUP BY o_status "
        "ORDER BY o_status",
        tables={"o": path},
    )
    assert got.column("o_status").to_pylist() == ["F", "O", "P"]
    assert got.column("n").to_pylist() == [2000, 2000, 2000]
    want = {}
    for s, v in zip(t.column("o_status").to_pylist(), t.column("o_total").to_pylist()):
        want[s] = want.get(s, 0) + v
    assert got.column("total").to_pylist() == [want["F"], want["O"], want["P"]]

    quoted = zipflow.sql(f"SELECT max(o_id) AS m FROM '{path}'")
    assert quoted.column("m").to_pylist() == [5999]
    opened = zipflow.sql("SELECT count(*) AS c FROM o", tables={"o": zipflow.open(path)})
    assert opened.column("c").to_pylist() == [6000]


def test_sql_joins_files_with_arrow_and_pandas_tables(orders):
    _, path = orders
    names = pa.table({"code": ["F", "O", "P"], "label": ["final", "open", "pending"]})
    got = zipflow.sql(
        "SELECT label, count(*) AS n FROM o JOIN s ON o_status = code "
        "WHERE o_total > 100 GROUP BY label ORDER BY label",
        tables={"o": path, "s": names},
    )
    assert got.column("label").to_pylist() == ["final", "open", "pending"]
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"code": ["O"], "w": [2.5]})
    got = zipflow.sql(
        "SELECT sum(w) AS w FROM o JOIN d ON o_status = code", tables={"o": path, "d": df}
    )
    assert got.column("w").to_pylist() == [5000.0]


def test_sql_keeps_arrow_types(tmp_path):
    t = pa.table(
        {
            "ts": pa.array([0, 86_400_000_000, 2 * 86_400_000_000], pa.timestamp("us", tz="UTC")),
            "d": pa.array([1, 2, 3], pa.decimal128(10, 3)),
        }
    )
    zipflow.compress(t, tmp_path / "t.zf")
    got = zipflow.sql("SELECT ts, d FROM t WHERE d > 1", tables={"t": tmp_path / "t.zf"})
    assert got.schema.field("ts").type == pa.timestamp("us", tz="UTC")
    assert got.schema.field("d").type == pa.decimal128(10, 3)
    assert got.num_rows == 2


def test_sql_errors_are_query_errors(orders):
    _, path = orders
    with pytest.raises(zipflow.QueryError):
        zipflow.sql("SELEC 1")
    with pytest.raises(zipflow.QueryError, match="nope"):
        zipflow.sql("SELECT * FROM nope", tables={"o": path})
    with pytest.raises(ValueError):
        zipflow.sql("SELECT missing_column FROM o", tables={"o": path})
    with pytest.raises(FileNotFoundError):
        zipflow.sql("SELECT 1", tables={"o": "/no/such/file.zf"})


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"a",
        ("The quick brown fox jumps over the lazy dog. " * 2000).encode(),
        bytes(random.Random(7).randrange(256) for _ in range(70_000)),
    ],
    ids=["empty", "one", "prose", "random"],
)
def test_bytes_round_trip(data):
    blob = zipflow.compress_bytes(data)
    assert zipflow.decompress_bytes(blob) == data
    assert zipflow.decompress_bytes(bytearray(blob)) == data


def test_bytes_with_a_plan_and_objective():
    text = ("zipflow compresses text with word and character dictionaries. " * 500).encode()
    small = zipflow.compress_bytes(text, objective="smallest")
    assert len(small) < len(text) / 4
    planned = zipflow.compress_bytes(text, "fsst")
    assert zipflow.decompress_bytes(planned) == text
    with pytest.raises(zipflow.InvalidInputError, match="^bytes, column `text`"):
        # A forced plan that does not fit is refused, naming the input as `bytes`.
        zipflow.compress_bytes(bytes(range(256)), "fsst")
    with pytest.raises(zipflow.InvalidInputError):
        zipflow.compress_bytes(text, "no_such_primitive")


def test_damaged_bytes_and_files_raise_corrupt_file_errors(tmp_path):
    with pytest.raises(zipflow.CorruptFileError):
        zipflow.decompress_bytes(b"not a zipflow file at all")
    blob = bytearray(zipflow.compress_bytes(b"hello world " * 1000))
    blob[len(blob) // 3] ^= 0x10
    with pytest.raises(zipflow.CorruptFileError):
        zipflow.decompress_bytes(bytes(blob))

    (tmp_path / "junk.zf").write_bytes(b"PAR1" + b"\0" * 100)
    with pytest.raises(zipflow.CorruptFileError, match="junk.zf"):
        zipflow.open(tmp_path / "junk.zf")

    t = pa.table({"a": pa.array(range(50_000), pa.int64()), "b": [1.5] * 50_000})
    path = tmp_path / "t.zf"
    zipflow.compress(t, path, chunk_rows=10_000)
    raw = bytearray(path.read_bytes())
    raw[4000] ^= 0xFF  # inside the first chunk of column a
    path.write_bytes(bytes(raw))
    f = zipflow.open(path)
    with pytest.raises(zipflow.CorruptFileError) as e:
        f.read()
    message = str(e.value)
    assert "t.zf" in message and "column" in message and "chunk" in message
    assert "\n" not in message
    # The other column still reads.
    assert f.read(columns=["b"]).num_rows == 50_000


def test_missing_files_and_unreadable_paths():
    with pytest.raises(FileNotFoundError, match="nothing-here.zf"):
        zipflow.open("/tmp/nothing-here.zf")
    with pytest.raises(OSError):
        zipflow.open("/")


def test_errors_are_catchable_as_builtin_kinds():
    assert issubclass(zipflow.InvalidInputError, ValueError)
    assert issubclass(zipflow.QueryError, ValueError)
    assert issubclass(zipflow.UnsupportedError, NotImplementedError)
    for cls in (
        zipflow.CorruptFileError,
        zipflow.InvalidInputError,
        zipflow.QueryError,
        zipflow.UnsupportedError,
    ):
        assert issubclass(cls, zipflow.ZipflowError)


def test_version():
    assert zipflow.__version__.count(".") == 2
    assert os.path.basename(zipflow.__file__) == "__init__.py"
