//! `zipflow sql` with its two engines: the native one for single-table queries, DataFusion
//! for joins and the rest, tables quoted in FROM or named with --table and --db.

use arrow::array::{ArrayRef, Decimal128Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use parquet::arrow::ArrowWriter;
use std::fs::File;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;

fn zipflow(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_zipflow"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("running zipflow: {e}"))
}

/// Runs `zipflow sql` with `args` in `dir`; it must succeed. Returns stdout.
fn sql_ok(args: &[&str], dir: &Path) -> String {
    let mut all = vec!["sql"];
    all.extend_from_slice(args);
    let o = zipflow(&all, dir);
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Runs `zipflow sql` with `args` in `dir`; it must fail. Returns stderr.
fn sql_err(args: &[&str], dir: &Path) -> String {
    let mut all = vec!["sql"];
    all.extend_from_slice(args);
    let o = zipflow(&all, dir);
    assert!(!o.status.success(), "{args:?} succeeded");
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Writes `batch` as Parquet and compresses it to `name`.zf in `dir`.
fn table(dir: &Path, name: &str, batch: &RecordBatch) {
    let parquet = dir.join(format!("{name}.parquet"));
    let file = File::create(&parquet).unwrap_or_else(|e| panic!("{e}"));
    let mut w = ArrowWriter::try_new(file, batch.schema(), None).unwrap_or_else(|e| panic!("{e}"));
    w.write(batch).unwrap_or_else(|e| panic!("{e}"));
    w.close().unwrap_or_else(|e| panic!("{e}"));
    let out = format!("{name}.zf");
    let o = zipflow(
        &["compress", &format!("{name}.parquet"), "-o", &out, "-q"],
        dir,
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::remove_file(parquet).unwrap_or_else(|e| panic!("{e}"));
}

/// `items` (k = i % 4, v = i, price) and `owners` (k, name) in a fresh directory.
fn setup() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let n = 1000i64;
    let k: ArrayRef = Arc::new(Int64Array::from_iter_values((0..n).map(|i| i % 4)));
    let v: ArrayRef = Arc::new(Int64Array::from_iter_values(0..n));
    let price: ArrayRef = Arc::new(
        Decimal128Array::from_iter_values((0..n).map(|i| i128::from(i) * 25))
            .with_precision_and_scale(10, 2)
            .unwrap_or_else(|e| panic!("{e}")),
    );
    let schema = Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("v", DataType::Int64, false),
        Field::new("price", DataType::Decimal128(10, 2), false),
    ]);
    let items =
        RecordBatch::try_new(Arc::new(schema), vec![k, v, price]).unwrap_or_else(|e| panic!("{e}"));
    table(dir.path(), "items", &items);
    let k: ArrayRef = Arc::new(Int64Array::from_iter_values(0..3));
    let name: ArrayRef = Arc::new(StringArray::from(vec!["ann", "bob", "cy"]));
    let schema = Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("name", DataType::Utf8, false),
    ]);
    let owners =
        RecordBatch::try_new(Arc::new(schema), vec![k, name]).unwrap_or_else(|e| panic!("{e}"));
    table(dir.path(), "owners", &owners);
    dir
}

#[test]
fn both_engines_print_single_table_results_alike() {
    let dir = setup();
    let d = dir.path();
    let q = "SELECT k, sum(v) AS s, count(*) AS n, max(price) AS top FROM 'items.zf' \
             WHERE v >= 100 GROUP BY k ORDER BY k";
    for format in ["table", "csv", "json"] {
        let native = sql_ok(&[q, "--engine", "native", "--format", format], d);
        let df = sql_ok(&[q, "--engine", "datafusion", "--format", format], d);
        assert_eq!(native, df, "{format}");
    }
    // k = 0 holds v = 100, 104, ..., 996: 225 values summing to 123,300.
    let csv = sql_ok(&[q, "--format", "csv"], d);
    assert_eq!(csv.lines().nth(1), Some("0,123300,225,249.00"), "{csv}");
}

#[test]
fn joins_run_through_datafusion_on_quoted_paths_tables_and_a_db() {
    let dir = setup();
    let d = dir.path();
    // k = 3 has no owner, so the inner join keeps k = 0, 1, 2.
    let expected = "name,total\nann,124500\nbob,124750\ncy,125000\n";
    let quoted = "SELECT o.name, sum(i.v) AS total FROM 'items.zf' i JOIN 'owners.zf' o \
                  ON i.k = o.k GROUP BY o.name ORDER BY o.name";
    assert_eq!(sql_ok(&[quoted, "--format", "csv"], d), expected);
    let named = "SELECT o.name, sum(i.v) AS total FROM items i JOIN owners o \
                 ON i.k = o.k GROUP BY o.name ORDER BY o.name";
    assert_eq!(
        sql_ok(&[named, "--format", "csv", "--db", "."], d),
        expected
    );
    let args = [
        named,
        "--format",
        "csv",
        "--table",
        "items=items.zf",
        "--table",
        "owners=owners.zf",
        "--engine",
        "datafusion",
    ];
    assert_eq!(sql_ok(&args, d), expected);
    // A CTE and a subquery.
    let cte = "WITH big AS (SELECT k, v FROM items WHERE v > 990) \
               SELECT count(*) AS n FROM big WHERE k IN (SELECT k FROM owners)";
    assert_eq!(sql_ok(&[cte, "--format", "csv", "--db", "."], d), "n\n6\n");
}

#[test]
fn a_directory_is_one_table() {
    let dir = setup();
    let d = dir.path();
    std::fs::create_dir(d.join("parts")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::copy(d.join("items.zf"), d.join("parts/a.zf")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::copy(d.join("items.zf"), d.join("parts/b.zf")).unwrap_or_else(|e| panic!("{e}"));
    let q = "SELECT count(*) AS n FROM items";
    let out = sql_ok(&[q, "--table", "items=parts", "--format", "csv"], d);
    assert_eq!(out, "n\n2000\n");
    let out = sql_ok(&[q, "--table", "items=parts/*.zf", "--format", "csv"], d);
    assert_eq!(out, "n\n2000\n");
}

#[test]
fn errors_say_what_is_wrong() {
    let dir = setup();
    let d = dir.path();
    let err = sql_err(&["SELECT * FROM nowhere", "--db", "."], d);
    assert!(
        err.contains("nowhere") && err.contains("tables: items, owners"),
        "{err}"
    );
    let err = sql_err(&["SELECT * FROM 'missing.zf' JOIN 'items.zf' ON true"], d);
    assert!(err.contains("missing.zf"), "{err}");
    let err = sql_err(&["SELECT nope FROM 'items.zf' JOIN 'owners.zf' ON true"], d);
    assert!(err.contains("nope"), "{err}");
    let join = "SELECT * FROM 'items.zf' i JOIN 'owners.zf' o ON i.k = o.k";
    let err = sql_err(&[join, "--engine", "native"], d);
    assert!(!err.is_empty());
    let err = sql_err(&["SELECT 1 FROM x", "--table", "x"], d);
    assert!(err.contains("name=path"), "{err}");
    let err = sql_err(&[join, "--engine", "datafusion", "--reference"], d);
    assert!(err.contains("native engine only"), "{err}");
}

#[test]
fn timestamps_binary_and_null_in_lists_get_sql_answers() {
    use arrow::array::{BinaryArray, TimestampMicrosecondArray};
    use arrow::datatypes::TimeUnit;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let d = dir.path();
    // 2024-03-01 23:30 and 2024-03-02 00:15 UTC, and a null.
    let ts: ArrayRef = Arc::new(
        TimestampMicrosecondArray::from(vec![
            Some(1_709_335_800_000_000),
            Some(1_709_338_500_000_000),
            None,
        ])
        .with_timezone("UTC"),
    );
    // Bytes that are not UTF-8 must stay apart.
    let b: ArrayRef = Arc::new(BinaryArray::from(vec![
        Some(&[0xffu8, 0x00][..]),
        Some(&[0xfeu8, 0x00][..]),
        Some(&[0xffu8, 0x00][..]),
    ]));
    let k: ArrayRef = Arc::new(Int64Array::from(vec![Some(1), None, Some(3)]));
    let schema = Schema::new(vec![
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            true,
        ),
        Field::new("b", DataType::Binary, true),
        Field::new("k", DataType::Int64, true),
    ]);
    let batch =
        RecordBatch::try_new(Arc::new(schema), vec![ts, b, k]).unwrap_or_else(|e| panic!("{e}"));
    table(d, "t", &batch);
    let csv = |q: &str| sql_ok(&[q, "--format", "csv"], d);
    assert_eq!(
        csv("SELECT CAST(ts AS DATE) AS day, count(*) AS n FROM 't.zf' GROUP BY 1 ORDER BY 1"),
        "day,n\n2024-03-01,1\n2024-03-02,1\n,1\n"
    );
    assert_eq!(
        csv("SELECT count(*) AS n FROM 't.zf' WHERE ts >= TIMESTAMP '2024-03-02 00:00:00Z'"),
        "n\n1\n"
    );
    assert_eq!(csv("SELECT count(DISTINCT b) AS n FROM 't.zf'"), "n\n2\n");
    assert_eq!(
        csv("SELECT min(b) AS lo, max(b) AS hi FROM 't.zf'"),
        "lo,hi\nfe00,ff00\n"
    );
    // NOT IN with a NULL item is never true; IN with one is NULL where nothing matches.
    for engine in ["auto", "datafusion"] {
        let q = |q: &str| sql_ok(&[q, "--format", "csv", "--engine", engine], d);
        assert_eq!(
            q("SELECT count(*) AS n FROM 't.zf' WHERE k NOT IN (1, NULL)"),
            "n\n0\n"
        );
        assert_eq!(
            q("SELECT count(*) AS n FROM 't.zf' WHERE k IN (3, NULL)"),
            "n\n1\n"
        );
        assert_eq!(
            q("SELECT count(*) AS n FROM 't.zf' WHERE NOT (k IN (3, NULL))"),
            "n\n0\n"
        );
    }
    // The native engine says what it leaves to DataFusion.
    let e = sql_err(&["SELECT count(*) FROM 't.zf'", "--engine", "native"], d);
    assert!(e.contains("timestamp columns"), "{e}");
}

#[test]
fn tpch_db_holds_every_table_for_joins() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let d = dir.path();
    let o = zipflow(&["tpch", "--sf", "0.01", "--db", "db"], d);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report = String::from_utf8_lossy(&o.stdout);
    for t in [
        "region", "nation", "supplier", "customer", "part", "partsupp", "orders",
    ] {
        assert!(
            d.join("db").join(format!("{t}.zf")).is_file(),
            "{t}: {report}"
        );
    }
    let csv = |q: &str| sql_ok(&["--db", "db", q, "--format", "csv"], d);
    // Every line item has its order, every customer its nation.
    assert_eq!(
        csv(
            "SELECT count(*) AS n, count(DISTINCT o_orderkey) AS o FROM lineitem \
             JOIN orders ON l_orderkey = o_orderkey"
        ),
        "n,o\n60175,15000\n"
    );
    assert_eq!(
        csv(
            "SELECT r_name, count(*) AS n FROM customer JOIN nation ON c_nationkey = n_nationkey \
             JOIN region ON n_regionkey = r_regionkey GROUP BY r_name ORDER BY r_name"
        )
        .lines()
        .count(),
        6
    );
    // A second run refuses to overwrite without --force.
    let o = zipflow(&["tpch", "--sf", "0.01", "--db", "db"], d);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("region.zf"));
}

/// `--device`: `auto` answers as the CPU does (on the GPU when there is one, else on the
/// CPU); `gpu` answers the same or says in one line why it cannot (no usable GPU, a query
/// the GPU does not run) and exits 1.
#[test]
fn device_gpu_answers_as_the_cpu_or_says_why_not() {
    let dir = setup();
    let d = dir.path();
    let q = "SELECT k, sum(price), min(v), max(v), avg(price), count(*) FROM 'items.zf' \
             WHERE v > 100 AND price * 2 < 40000 GROUP BY k ORDER BY k";
    let cpu = sql_ok(&[q, "--format", "csv"], d);
    assert!(cpu.lines().count() == 5, "{cpu}");
    assert_eq!(sql_ok(&[q, "--format", "csv", "--device", "auto"], d), cpu);
    let o = zipflow(&["sql", q, "--format", "csv", "--device", "gpu"], d);
    if o.status.success() {
        assert_eq!(String::from_utf8_lossy(&o.stdout), cpu);
    } else {
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(err.contains("no usable GPU"), "{err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    }
    // Rows rather than aggregates: the GPU path refuses, auto falls back to the CPU.
    let rows = "SELECT v FROM 'items.zf' WHERE v < 3";
    let err = sql_err(&[rows, "--device", "gpu"], d);
    assert!(
        err.contains("queries without aggregates on the GPU"),
        "{err}"
    );
    assert_eq!(
        sql_ok(&[rows, "--device", "auto", "--format", "csv"], d),
        sql_ok(&[rows, "--format", "csv"], d)
    );
    // A join is DataFusion's.
    let join = "SELECT count(*) FROM 'items.zf' i JOIN 'owners.zf' o ON i.k = o.k";
    let err = sql_err(&[join, "--device", "gpu"], d);
    assert!(err.contains("needs DataFusion"), "{err}");
    assert_eq!(
        sql_ok(&[join, "--device", "auto", "--format", "csv"], d),
        sql_ok(&[join, "--format", "csv"], d)
    );
    let err = sql_err(&[q, "--device", "gpu", "--reference"], d);
    assert!(err.contains("--reference runs on the CPU"), "{err}");
}
