//! The same SQL through DataFusion over .zf files (`ZfTable`) and over a `MemTable` of the
//! same Arrow batches gives the same rows; zone maps prune chunks; errors name their place.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, Date32Array, Decimal128Array, Int32Array, Int64Array, RecordBatch,
    StringArray, TimestampMicrosecondArray,
};
use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use datafusion::catalog::TableProvider;
use datafusion::common::ScalarValue;
use datafusion::common::stats::Precision;
use datafusion::datasource::MemTable;
use datafusion::physical_plan::{ExecutionPlan, collect, displayable};
use datafusion::prelude::{SessionConfig, SessionContext};
use tpchgen::generators::{LineItemGenerator, OrderGenerator};
use tpchgen_arrow::{LineItemArrow, OrderArrow};
use zipflow_datafusion::{ZfScanExec, ZfTable};

mod common;
use common::{rows, write};

fn lineitem(sf: f64) -> Vec<RecordBatch> {
    LineItemArrow::new(LineItemGenerator::new(sf, 1, 1))
        .with_batch_size(8192)
        .collect::<Result<Vec<_>, _>>()
        .unwrap_or_else(|e| panic!("{e}"))
}

fn orders(sf: f64) -> Vec<RecordBatch> {
    OrderArrow::new(OrderGenerator::new(sf, 1, 1))
        .with_batch_size(8192)
        .collect::<Result<Vec<_>, _>>()
        .unwrap_or_else(|e| panic!("{e}"))
}

fn context() -> SessionContext {
    SessionContext::new_with_config(SessionConfig::new().with_target_partitions(3))
}

/// zipflow's session: its functions and the fused scan + aggregate.
fn zipflow_context() -> SessionContext {
    zipflow_datafusion::session(SessionConfig::new().with_target_partitions(3))
}

fn mem(batches: &[RecordBatch]) -> Arc<MemTable> {
    Arc::new(
        MemTable::try_new(batches[0].schema(), vec![batches.to_vec()])
            .unwrap_or_else(|e| panic!("{e}")),
    )
}

fn zf(path: &Path) -> Arc<ZfTable> {
    Arc::new(ZfTable::open(path).unwrap_or_else(|e| panic!("{e}")))
}

async fn run(ctx: &SessionContext, sql: &str) -> Vec<RecordBatch> {
    let df = ctx.sql(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    df.collect().await.unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// Each query gives the same rows through both contexts, and at least one row.
async fn same(zf_ctx: &SessionContext, mem_ctx: &SessionContext, queries: &[&str]) {
    for sql in queries {
        let a = rows(&run(zf_ctx, sql).await);
        let b = rows(&run(mem_ctx, sql).await);
        assert_eq!(a, b, "{sql}");
        assert!(a.len() > 1, "{sql}: no rows");
    }
}

/// Every `ZfScanExec` in a plan.
fn scans(plan: &Arc<dyn ExecutionPlan>, out: &mut Vec<Arc<dyn ExecutionPlan>>) {
    if plan.downcast_ref::<ZfScanExec>().is_some() {
        out.push(Arc::clone(plan));
    }
    for c in plan.children() {
        scans(c, out);
    }
}

const TPCH_QUERIES: &[&str] = &[
    // projection
    "SELECT l_orderkey, l_partkey, l_quantity, l_shipmode FROM lineitem",
    // a filter that prunes (l_orderkey is sorted) and one that does not
    "SELECT * FROM lineitem WHERE l_orderkey < 2000",
    "SELECT l_orderkey, l_extendedprice FROM lineitem WHERE l_shipdate >= DATE '1995-01-01' \
     AND l_discount > 0.05",
    "SELECT count(*) FROM lineitem WHERE l_orderkey > 60000 AND l_shipmode = 'AIR'",
    // limits
    "SELECT count(*) FROM (SELECT l_orderkey FROM lineitem LIMIT 17)",
    "SELECT l_orderkey, l_linenumber FROM lineitem ORDER BY l_orderkey DESC, l_linenumber LIMIT 10",
    "SELECT o_orderkey FROM orders WHERE o_orderkey > 100 ORDER BY o_orderkey LIMIT 5",
    // aggregates, GROUP BY, ORDER BY (TPC-H Q1 and Q6)
    "SELECT l_returnflag, l_linestatus, sum(l_quantity) AS sum_qty, \
     sum(l_extendedprice) AS sum_base_price, \
     sum(l_extendedprice * (1 - l_discount)) AS sum_disc_price, \
     sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) AS sum_charge, \
     avg(l_quantity) AS avg_qty, avg(l_discount) AS avg_disc, count(*) AS count_order \
     FROM lineitem WHERE l_shipdate <= DATE '1998-12-01' - INTERVAL '90' DAY \
     GROUP BY l_returnflag, l_linestatus ORDER BY l_returnflag, l_linestatus",
    "SELECT sum(l_extendedprice * l_discount) AS revenue FROM lineitem \
     WHERE l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01' \
     AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24",
    "SELECT min(l_shipdate), max(l_shipdate), min(l_orderkey), max(l_orderkey), \
     min(l_shipmode), max(l_comment), count(l_comment) FROM lineitem",
    // a join of two .zf tables (TPC-H Q3's shape)
    "SELECT l_orderkey, sum(l_extendedprice * (1 - l_discount)) AS revenue, o_orderdate, \
     o_shippriority FROM orders JOIN lineitem ON l_orderkey = o_orderkey \
     WHERE o_orderdate < DATE '1995-03-15' AND l_shipdate > DATE '1995-03-15' \
     GROUP BY l_orderkey, o_orderdate, o_shippriority \
     ORDER BY revenue DESC, o_orderdate, l_orderkey LIMIT 10",
    // a subquery
    "SELECT o_orderpriority, count(*) FROM orders WHERE o_orderkey IN \
     (SELECT l_orderkey FROM lineitem WHERE l_quantity > 49) GROUP BY 1 ORDER BY 1",
    "SELECT count(*) FROM orders o WHERE EXISTS (SELECT 1 FROM lineitem l \
     WHERE l.l_orderkey = o.o_orderkey AND l.l_commitdate < l.l_receiptdate)",
    // a CTE
    "WITH big AS (SELECT l_orderkey, sum(l_quantity) AS q FROM lineitem GROUP BY l_orderkey) \
     SELECT o_orderstatus, count(*), sum(q) FROM orders JOIN big ON o_orderkey = l_orderkey \
     WHERE q > 150 GROUP BY 1 ORDER BY 1",
];

#[tokio::test]
async fn tpch_queries_match_a_memory_table() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (li, ord) = (lineitem(0.01), orders(0.01));
    let li_path = write(&li, &dir.path().join("lineitem.zf"), 8192);
    let ord_path = write(&ord, &dir.path().join("orders.zf"), 4096);
    let (a, b) = (zipflow_context(), context());
    a.register_table("lineitem", zf(&li_path))
        .unwrap_or_else(|e| panic!("{e}"));
    a.register_table("orders", zf(&ord_path))
        .unwrap_or_else(|e| panic!("{e}"));
    b.register_table("lineitem", mem(&li))
        .unwrap_or_else(|e| panic!("{e}"));
    b.register_table("orders", mem(&ord))
        .unwrap_or_else(|e| panic!("{e}"));
    same(&a, &b, TPCH_QUERIES).await;
}

/// Every table of TPC-H at `sf`, by name.
fn tpch_tables(sf: f64) -> Vec<(&'static str, Vec<RecordBatch>)> {
    fn all<I, E>(it: I) -> Vec<RecordBatch>
    where
        I: Iterator<Item = Result<RecordBatch, E>>,
        E: std::fmt::Display,
    {
        it.collect::<Result<Vec<_>, _>>()
            .unwrap_or_else(|e| panic!("{e}"))
    }
    use tpchgen::generators as g;
    use tpchgen_arrow as a;
    vec![
        (
            "region",
            all(a::RegionArrow::new(g::RegionGenerator::new(sf, 1, 1))),
        ),
        (
            "nation",
            all(a::NationArrow::new(g::NationGenerator::new(sf, 1, 1))),
        ),
        (
            "supplier",
            all(a::SupplierArrow::new(g::SupplierGenerator::new(sf, 1, 1))),
        ),
        (
            "customer",
            all(a::CustomerArrow::new(g::CustomerGenerator::new(sf, 1, 1))),
        ),
        (
            "part",
            all(a::PartArrow::new(g::PartGenerator::new(sf, 1, 1))),
        ),
        (
            "partsupp",
            all(a::PartSuppArrow::new(g::PartSuppGenerator::new(sf, 1, 1))),
        ),
        ("orders", orders(sf)),
        ("lineitem", lineitem(sf)),
    ]
}

/// The 22 TPC-H queries of `bench/tpch-queries`.
fn tpch_query_texts() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/tpch-queries");
    (1..=22)
        .map(|q| {
            let name = format!("q{q:02}.sql");
            let text = std::fs::read_to_string(dir.join(&name))
                .unwrap_or_else(|e| panic!("{}: {e}", dir.join(&name).display()));
            (name, text)
        })
        .collect()
}

#[tokio::test]
async fn all_22_tpch_queries_match_memory_tables() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (a, b) = (zipflow_context(), context());
    for (name, batches) in tpch_tables(0.01) {
        let path = write(&batches, &dir.path().join(format!("{name}.zf")), 4096);
        a.register_table(name, zf(&path))
            .unwrap_or_else(|e| panic!("{e}"));
        b.register_table(name, mem(&batches))
            .unwrap_or_else(|e| panic!("{e}"));
    }
    for (name, sql) in tpch_query_texts() {
        let mine = rows(&run(&a, &sql).await);
        let theirs = rows(&run(&b, &sql).await);
        assert_eq!(mine, theirs, "{name}");
        assert!(mine.len() > 1, "{name}: no rows");
    }
}

#[tokio::test]
async fn a_directory_or_a_glob_of_files_is_one_table() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let li = lineitem(0.005);
    let parts = dir.path().join("parts");
    std::fs::create_dir(&parts).unwrap_or_else(|e| panic!("{e}"));
    let half = li.len() / 2;
    write(&li[..half], &parts.join("a.zf"), 4096);
    write(&li[half..], &parts.join("b.zf"), 4096);
    std::fs::write(parts.join("notes.txt"), "not a table").unwrap_or_else(|e| panic!("{e}"));
    let queries = [
        "SELECT l_returnflag, count(*), sum(l_quantity) FROM lineitem GROUP BY 1",
        "SELECT * FROM lineitem WHERE l_orderkey BETWEEN 1000 AND 3000",
    ];
    let b = context();
    b.register_table("lineitem", mem(&li))
        .unwrap_or_else(|e| panic!("{e}"));
    for source in [parts.clone(), parts.join("*.zf")] {
        let table = zf(&source);
        assert_eq!(table.files().len(), 2, "{}", source.display());
        let a = context();
        a.register_table("lineitem", table)
            .unwrap_or_else(|e| panic!("{e}"));
        same(&a, &b, &queries).await;
    }
}

/// 5,000 rows of every kind the provider must keep: nulls, timestamps with and without a
/// time zone, dates, decimals, strings.
fn typed_batch() -> RecordBatch {
    let n = 5000;
    let id: ArrayRef = Arc::new(Int64Array::from_iter_values(0..n as i64));
    let small: ArrayRef = Arc::new(Int32Array::from_iter(
        (0..n).map(|i| (i % 7 != 3).then_some((i % 100) as i32 - 50)),
    ));
    let at: ArrayRef = Arc::new(
        TimestampMicrosecondArray::from_iter(
            (0..n)
                .map(|i| (i % 13 != 0).then_some(1_700_000_000_000_000 + i as i64 * 3_600_000_000)),
        )
        .with_timezone("+02:00"),
    );
    let local: ArrayRef = Arc::new(TimestampMicrosecondArray::from_iter_values(
        (0..n).map(|i| 1_600_000_000_000_000 + i as i64 * 1_000_000),
    ));
    let day: ArrayRef = Arc::new(Date32Array::from_iter(
        (0..n).map(|i| (i % 11 != 5).then_some(18_000 + (i % 400) as i32)),
    ));
    let price: ArrayRef = Arc::new(
        Decimal128Array::from_iter(
            (0..n).map(|i| (i % 9 != 4).then_some((i * 7919 % 100_000) as i128)),
        )
        .with_precision_and_scale(12, 2)
        .unwrap_or_else(|e| panic!("{e}")),
    );
    let name: ArrayRef = Arc::new(StringArray::from_iter(
        (0..n).map(|i| (i % 5 != 0).then(|| format!("item-{}", i % 17))),
    ));
    let all_null: ArrayRef = Arc::new(Int32Array::from(vec![None::<i32>; n]));
    let schema = Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("small", DataType::Int32, true),
        Field::new(
            "at",
            DataType::Timestamp(TimeUnit::Microsecond, Some("+02:00".into())),
            true,
        ),
        Field::new(
            "local",
            DataType::Timestamp(TimeUnit::Microsecond, None),
            false,
        ),
        Field::new("day", DataType::Date32, true),
        Field::new("price", DataType::Decimal128(12, 2), true),
        Field::new("name", DataType::Utf8, true),
        Field::new("nothing", DataType::Int32, true),
    ]);
    RecordBatch::try_new(
        Arc::new(schema),
        vec![id, small, at, local, day, price, name, all_null],
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

/// A context over the typed batch as a .zf table of five 1,024-row chunks, and one over the
/// same batch in memory.
fn typed_contexts(dir: &Path) -> (SessionContext, SessionContext, PathBuf) {
    typed_contexts_over(dir, 3)
}

/// [`typed_contexts`] with `partitions` target partitions.
fn typed_contexts_over(dir: &Path, partitions: usize) -> (SessionContext, SessionContext, PathBuf) {
    let batch = typed_batch();
    let path = write(std::slice::from_ref(&batch), &dir.join("typed.zf"), 1024);
    let config = || SessionConfig::new().with_target_partitions(partitions);
    let (a, b) = (
        SessionContext::new_with_config(config()),
        SessionContext::new_with_config(config()),
    );
    a.register_table("t", zf(&path))
        .unwrap_or_else(|e| panic!("{e}"));
    b.register_table("t", mem(&[batch]))
        .unwrap_or_else(|e| panic!("{e}"));
    (a, b, path)
}

#[tokio::test]
async fn types_and_nulls_survive_and_match_a_memory_table() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (a, b, path) = typed_contexts(dir.path());
    let table = zf(&path);
    assert_eq!(
        table.schema(),
        typed_batch().schema(),
        "the file's schema, types preserved"
    );
    let queries = [
        "SELECT * FROM t",
        "SELECT id, at, price FROM t WHERE at >= TIMESTAMP '2023-12-01T00:00:00+02:00'",
        "SELECT id FROM t WHERE local < TIMESTAMP '2020-09-13 12:30:00'",
        "SELECT count(*), count(small), count(at), count(nothing) FROM t WHERE small IS NULL OR day IS NULL",
        "SELECT name, count(*), sum(price), min(price), max(at) FROM t GROUP BY name ORDER BY name",
        "SELECT * FROM t WHERE price > 900.50 AND name LIKE 'item-1%'",
        "SELECT day, avg(small) FROM t WHERE id >= 4500 GROUP BY day",
        "SELECT * FROM t WHERE nothing IS NULL AND id < 10",
        "SELECT min(id), max(id), min(name), max(name), min(day), max(local) FROM t",
        "SELECT date_trunc('day', at), count(*) FROM t GROUP BY 1",
    ];
    same(&a, &b, &queries).await;
}

#[tokio::test]
async fn zone_maps_prune_chunks_and_explain_shows_them() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (a, _, _) = typed_contexts(dir.path());
    let cases = [
        ("SELECT id, name FROM t WHERE id >= 4500", 1),
        ("SELECT id FROM t WHERE id BETWEEN 1000 AND 2100", 3),
        ("SELECT id FROM t WHERE id BETWEEN 1030 AND 2040", 1),
        ("SELECT id FROM t WHERE id < 0", 0),
        ("SELECT id FROM t WHERE nothing IS NOT NULL", 0),
        ("SELECT id FROM t WHERE small > 1000", 0),
        ("SELECT id FROM t WHERE name = 'item-3'", 5),
        ("SELECT id FROM t", 5),
    ];
    for (sql, expected) in cases {
        let df = a.sql(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
        let plan = df
            .create_physical_plan()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let mut found = Vec::new();
        scans(&plan, &mut found);
        assert_eq!(found.len(), 1, "{sql}");
        let scan = found[0]
            .downcast_ref::<ZfScanExec>()
            .unwrap_or_else(|| panic!());
        assert_eq!(scan.chunks_total(), 5, "{sql}");
        assert_eq!(scan.chunks_scanned(), expected, "{sql}");
        let batches = collect(Arc::clone(&plan), a.task_ctx())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
        let decoded = found[0]
            .metrics()
            .and_then(|m| m.sum_by_name("chunks_decoded"))
            .map_or(0, |v| v.as_usize());
        assert_eq!(decoded, expected, "{sql}: chunks decoded");
        if sql.contains("4500") {
            assert_eq!(rows, 500, "{sql}");
            let text = displayable(plan.as_ref()).indent(true).to_string();
            assert!(text.contains("ZfScanExec: files=["), "{text}");
            assert!(text.contains("projection=[id, name]"), "{text}");
            assert!(text.contains("chunks=1 of 5"), "{text}");
            assert!(text.contains("pruning_predicate="), "{text}");
        }
    }
}

#[tokio::test]
async fn limits_stop_decoding_early() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (a, _, _) = typed_contexts_over(dir.path(), 1);
    let df = a
        .sql("SELECT id FROM t LIMIT 10")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let plan = df
        .create_physical_plan()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let batches = collect(Arc::clone(&plan), a.task_ctx())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(batches.iter().map(RecordBatch::num_rows).sum::<usize>(), 10);
    let mut found = Vec::new();
    scans(&plan, &mut found);
    let decoded = found[0]
        .metrics()
        .and_then(|m| m.sum_by_name("chunks_decoded"))
        .map_or(0, |v| v.as_usize());
    assert_eq!(decoded, 1, "one chunk of five holds the ten rows");
}

#[test]
fn statistics_come_from_the_zone_maps() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let batch = typed_batch();
    let path = write(
        std::slice::from_ref(&batch),
        &dir.path().join("typed.zf"),
        1024,
    );
    let stats = zf(&path)
        .statistics()
        .unwrap_or_else(|| panic!("no statistics"));
    assert_eq!(stats.num_rows, Precision::Exact(5000));
    let id = &stats.column_statistics[0];
    assert_eq!(id.min_value, Precision::Exact(ScalarValue::Int64(Some(0))));
    assert_eq!(
        id.max_value,
        Precision::Exact(ScalarValue::Int64(Some(4999)))
    );
    assert_eq!(id.null_count, Precision::Exact(0));
    let small_nulls = batch.column(1).null_count();
    assert_eq!(
        stats.column_statistics[1].null_count,
        Precision::Exact(small_nulls)
    );
    let price = &stats.column_statistics[5];
    assert_eq!(
        price.max_value,
        Precision::Exact(ScalarValue::Decimal128(Some(99_972), 12, 2))
    );
    let nothing = &stats.column_statistics[7];
    assert_eq!(nothing.null_count, Precision::Exact(5000));
    assert_eq!(nothing.min_value, Precision::Absent);
}

#[tokio::test]
async fn errors_name_the_file_column_and_chunk() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let missing = ZfTable::open(dir.path().join("missing.zf")).map(|_| ());
    let text = missing.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(text.contains("missing.zf"), "{text}");
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap_or_else(|e| panic!("{e}"));
    let text = ZfTable::open(&empty)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(text.contains("no .zf files"), "{text}");

    // Flip a byte inside the last chunk of the `name` column: opening still works (the footer
    // is intact), reading that chunk fails and says where.
    let path = write(&[typed_batch()], &dir.path().join("bad.zf"), 1024);
    let file = zipflow_format::ZfFile::open(&path).unwrap_or_else(|e| panic!("{e}"));
    let col = file.column_index("name").unwrap_or_else(|| panic!());
    let meta = file.chunk_meta(col, 4).clone();
    drop(file);
    let mut bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{e}"));
    bytes[meta.offset as usize + 3] ^= 0x55;
    std::fs::write(&path, bytes).unwrap_or_else(|e| panic!("{e}"));
    let ctx = context();
    ctx.register_table("t", zf(&path))
        .unwrap_or_else(|e| panic!("{e}"));
    // (Not count(name): the planner answers that from the zone maps' null counts.)
    let df = ctx
        .sql("SELECT max(length(name)) FROM t")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let text = df
        .collect()
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(text.contains("bad.zf"), "{text}");
    assert!(text.contains("name"), "{text}");
    assert!(text.contains('4'), "{text}");
    // Columns and chunks outside the damage still read.
    let df = ctx
        .sql("SELECT count(*) FROM t WHERE id < 4096")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let ok = df.collect().await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(rows(&ok)[1], "4096");
}
