//! The fused scan + aggregate inside DataFusion gives exactly DataFusion's own answers: each
//! query runs in zipflow's session (with `FusedAggregate`) and in a session without the rule
//! over the same .zf tables, and the rows must be the same; the plans show where the rule
//! applied and where it left DataFusion's operators.

use std::path::Path;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, BinaryArray, BooleanArray, Date32Array, Decimal128Array, Float64Array, Int16Array,
    Int32Array, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray,
};
use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use datafusion::physical_plan::{ExecutionPlan, displayable};
use datafusion::prelude::{SessionConfig, SessionContext};
use tpchgen::generators::LineItemGenerator;
use tpchgen_arrow::LineItemArrow;
use zipflow_datafusion::{ZfAggregateExec, ZfTable, register_functions, session};

mod common;
use common::{rows, write};

/// zipflow's session and one without the rule, both over the table at `path` as `t`.
fn contexts(path: &Path, partitions: usize) -> (SessionContext, SessionContext) {
    let config = || SessionConfig::new().with_target_partitions(partitions);
    let fused = session(config());
    let plain = SessionContext::new_with_config(config());
    register_functions(&plain);
    for ctx in [&fused, &plain] {
        let table = ZfTable::open(path).unwrap_or_else(|e| panic!("{e}"));
        ctx.register_table("t", Arc::new(table))
            .unwrap_or_else(|e| panic!("{e}"));
    }
    (fused, plain)
}

fn fused_nodes(plan: &Arc<dyn ExecutionPlan>) -> usize {
    usize::from(plan.downcast_ref::<ZfAggregateExec>().is_some())
        + plan.children().into_iter().map(fused_nodes).sum::<usize>()
}

/// Runs `sql` both ways: the same rows (with their types), and whether the rule applied
/// (with the plan, for messages).
async fn check(fused: &SessionContext, plain: &SessionContext, sql: &str) -> (bool, String) {
    let df = fused
        .sql(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    let plan = df
        .clone()
        .create_physical_plan()
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    let a = df.collect().await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    let df = plain
        .sql(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    let b = df.collect().await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    assert_eq!(rows(&a), rows(&b), "{sql}");
    if let (Some(x), Some(y)) = (a.first(), b.first()) {
        assert_eq!(x.schema(), y.schema(), "{sql}");
    }
    let n = fused_nodes(&plan);
    assert!(
        n <= 1,
        "{sql}: {n} fused nodes\n{}",
        displayable(plan.as_ref()).indent(false)
    );
    (n == 1, displayable(plan.as_ref()).indent(false).to_string())
}

const LINEITEM_FUSED: &[&str] = &[
    // TPC-H Q1 and Q6
    "SELECT l_returnflag, l_linestatus, sum(l_quantity) AS sum_qty, \
     sum(l_extendedprice) AS sum_base_price, \
     sum(l_extendedprice * (1 - l_discount)) AS sum_disc_price, \
     sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) AS sum_charge, \
     avg(l_quantity) AS avg_qty, avg(l_extendedprice) AS avg_price, \
     avg(l_discount) AS avg_disc, count(*) AS count_order \
     FROM t WHERE l_shipdate <= DATE '1998-12-01' - INTERVAL '90' DAY \
     GROUP BY l_returnflag, l_linestatus ORDER BY l_returnflag, l_linestatus",
    "SELECT sum(l_extendedprice * l_discount) AS revenue FROM t \
     WHERE l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01' \
     AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24",
    // no rows pass: NULL sums, zero counts
    "SELECT sum(l_quantity), count(*), count(l_tax), min(l_shipdate), avg(l_tax) FROM t \
     WHERE l_orderkey < 0",
    "SELECT l_shipmode, count(*) FROM t WHERE l_orderkey < 0 GROUP BY l_shipmode",
    // keys of several types, min / max of strings and dates, HAVING and ORDER BY above
    "SELECT l_shipmode, l_linenumber, min(l_shipdate), max(l_receiptdate), min(l_comment), \
     max(l_shipinstruct), count(l_comment) FROM t GROUP BY l_shipmode, l_linenumber",
    "SELECT l_suppkey, sum(l_quantity) AS q FROM t GROUP BY l_suppkey HAVING sum(l_quantity) > 700 \
     ORDER BY q DESC, l_suppkey LIMIT 7",
    "SELECT l_orderkey, count(*), sum(l_extendedprice) FROM t GROUP BY l_orderkey",
    // filters: IN, NOT IN, LIKE, OR, NOT, CASE in an argument, comparisons of two columns
    "SELECT l_returnflag, sum(CASE WHEN l_shipmode IN ('AIR', 'REG AIR') THEN l_extendedprice \
     ELSE 0 END), count(*) FROM t WHERE l_shipinstruct NOT IN ('NONE', 'TAKE BACK RETURN') \
     GROUP BY l_returnflag",
    "SELECT count(*), sum(l_quantity) FROM t WHERE (l_comment LIKE '%fluffily%' OR \
     l_shipmode = 'MAIL') AND NOT l_commitdate < l_receiptdate",
    "SELECT max(l_partkey), min(l_suppkey), sum(l_linenumber) FROM t \
     WHERE l_comment NOT LIKE 'the%' AND l_discount <> 0.04",
    "SELECT sum(l_quantity - l_discount * 2), sum(-l_extendedprice), min(l_tax + 1) FROM t",
    // DataFusion plans a lone DISTINCT aggregate as a grouping, which is fused
    "SELECT count(DISTINCT l_suppkey) FROM t",
];

/// Aggregates the rule leaves to DataFusion, which must still run.
const LINEITEM_NOT_FUSED: &[&str] = &[
    "SELECT string_agg(l_shipmode, ',') FROM t WHERE l_orderkey < 10",
    "SELECT l_returnflag, sum(l_quantity) FILTER (WHERE l_tax > 0.02) FROM t GROUP BY 1",
    "SELECT avg(l_linenumber) FROM t",
    "SELECT sum(l_extendedprice / l_quantity) FROM t",
    "SELECT l_shipmode, count(*) FROM t GROUP BY ROLLUP (l_shipmode)",
    "SELECT extract(year FROM l_shipdate) AS y, sum(l_quantity) FROM t GROUP BY 1",
    "SELECT count(*) FROM (SELECT * FROM t LIMIT 100)",
];

#[tokio::test]
async fn tpch_aggregates_are_fused_and_equal_datafusion() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("lineitem.zf");
    let batches = LineItemArrow::new(LineItemGenerator::new(0.01, 1, 1))
        .with_batch_size(8192)
        .collect::<Result<Vec<_>, _>>()
        .unwrap_or_else(|e| panic!("{e}"));
    write(&batches, &path, 8192);
    // Three partitions (partial + final aggregates) and one (a single-stage aggregate).
    for partitions in [3, 1] {
        let (fused, plain) = contexts(&path, partitions);
        for sql in LINEITEM_FUSED {
            let (done, plan) = check(&fused, &plain, sql).await;
            assert!(done, "{sql}: not fused at {partitions} partitions\n{plan}");
        }
        for sql in LINEITEM_NOT_FUSED {
            let (done, plan) = check(&fused, &plain, sql).await;
            assert!(!done, "{sql}: fused at {partitions} partitions\n{plan}");
        }
    }
}

/// A table with nulls in every column but the first, narrow integers, booleans, floats.
fn nullable_batch() -> RecordBatch {
    let n = 6000usize;
    let some = |i: usize, k: usize| i % k != 1;
    let id: ArrayRef = Arc::new(Int64Array::from_iter_values(0..n as i64));
    let small: ArrayRef = Arc::new(Int16Array::from_iter(
        (0..n).map(|i| some(i, 7).then_some((i % 300) as i16 - 150)),
    ));
    let group: ArrayRef = Arc::new(Int32Array::from_iter(
        (0..n).map(|i| some(i, 5).then_some((i % 23) as i32)),
    ));
    let day: ArrayRef = Arc::new(Date32Array::from_iter(
        (0..n).map(|i| some(i, 11).then_some(18_000 + (i % 400) as i32)),
    ));
    let price: ArrayRef = Arc::new(
        Decimal128Array::from_iter(
            (0..n).map(|i| some(i, 9).then_some((i * 7919 % 100_000) as i128 - 20_000)),
        )
        .with_precision_and_scale(12, 2)
        .unwrap_or_else(|e| panic!("{e}")),
    );
    let name: ArrayRef = Arc::new(StringArray::from_iter(
        (0..n).map(|i| some(i, 4).then(|| format!("item-{}", i % 17))),
    ));
    let flag: ArrayRef = Arc::new(BooleanArray::from_iter(
        (0..n).map(|i| some(i, 3).then_some(i % 2 == 0)),
    ));
    // NaN and both zeros among the floats, which the rule leaves to DataFusion.
    let ratio: ArrayRef = Arc::new(Float64Array::from_iter((0..n).map(|i| match i % 12 {
        1 | 7 => None,
        2 => Some(f64::NAN),
        3 => Some(-0.0),
        4 => Some(0.0),
        _ => Some(i as f64 / 7.0),
    })));
    // Bytes that are not UTF-8: queries cannot read them, the other columns still fuse.
    let raw: ArrayRef = Arc::new(BinaryArray::from_iter(
        (0..n).map(|i| some(i, 10).then(|| vec![0xff, (i % 5) as u8, 0xfe])),
    ));
    let nothing: ArrayRef = Arc::new(Int64Array::from(vec![None::<i64>; n]));
    // A column zipflow's queries cannot read: aggregates of the others are still fused.
    let at: ArrayRef = Arc::new(
        TimestampMicrosecondArray::from_iter(
            (0..n).map(|i| some(i, 8).then_some(1_700_000_000_000_000 + i as i64 * 60_000_000)),
        )
        .with_timezone("+02:00"),
    );
    let schema = Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("small", DataType::Int16, true),
        Field::new("grp", DataType::Int32, true),
        Field::new("day", DataType::Date32, true),
        Field::new("price", DataType::Decimal128(12, 2), true),
        Field::new("name", DataType::Utf8, true),
        Field::new("flag", DataType::Boolean, true),
        Field::new("ratio", DataType::Float64, true),
        Field::new("nothing", DataType::Int64, true),
        Field::new("raw", DataType::Binary, true),
        Field::new(
            "at",
            DataType::Timestamp(TimeUnit::Microsecond, Some("+02:00".into())),
            true,
        ),
    ]);
    RecordBatch::try_new(
        Arc::new(schema),
        vec![
            id, small, group, day, price, name, flag, ratio, nothing, raw, at,
        ],
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

const NULLABLE_FUSED: &[&str] = &[
    "SELECT count(*), count(small), count(grp), count(day), count(price), count(name), \
     count(flag), count(nothing) FROM t WHERE id >= 0",
    "SELECT grp, sum(small), min(small), max(small), sum(price), avg(price), min(day), \
     max(name), count(*) FROM t GROUP BY grp",
    "SELECT name, flag, sum(price), count(price) FROM t GROUP BY name, flag",
    "SELECT day, count(*) FROM t WHERE price IS NULL OR small IS NOT NULL GROUP BY day",
    "SELECT sum(nothing), min(nothing), count(nothing), sum(id) FROM t WHERE grp IS NULL",
    "SELECT count(*) FROM t WHERE flag",
    "SELECT count(*), sum(price) FROM t WHERE NOT flag AND price > -10.5",
    "SELECT grp, count(*) FROM t WHERE small IN (1, 2, 3, -150) OR name IN ('item-3') GROUP BY grp",
    "SELECT count(*) FROM t WHERE small NOT IN (1, 2, 3) AND name NOT LIKE 'item-1%'",
    "SELECT sum(price * price), sum(price + 1), sum(id * 3 - 2) FROM t WHERE day >= DATE '2019-04-01'",
    // DataFusion folds the NULL in the list into `AND NULL` before the rule sees it
    "SELECT count(*) FROM t WHERE small NOT IN (1, NULL)",
];

const NULLABLE_NOT_FUSED: &[&str] = &[
    // floats, arithmetic on 16-bit integers
    "SELECT sum(ratio), min(ratio) FROM t",
    "SELECT count(*) FROM t WHERE ratio > 100",
    "SELECT count(*) FROM t WHERE ratio > CAST(small AS DOUBLE)",
    "SELECT ratio, count(*) FROM t GROUP BY ratio",
    "SELECT count(*) FROM t WHERE ratio = 0",
    "SELECT grp, min(ratio), max(ratio) FROM t GROUP BY grp",
    "SELECT raw, count(*) FROM t GROUP BY raw",
    "SELECT min(raw), max(raw), count(raw) FROM t WHERE grp > 3",
    "SELECT grp, max(at), count(at) FROM t GROUP BY grp",
    "SELECT count(*) FROM t WHERE at > TIMESTAMP '2023-11-20T00:00:00+02:00'",
    "SELECT sum(small + small) FROM t",
];

#[tokio::test]
async fn nulls_and_narrow_types_are_fused_and_equal_datafusion() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("nullable.zf");
    write(&[nullable_batch()], &path, 1000);
    for partitions in [4, 1] {
        let (fused, plain) = contexts(&path, partitions);
        for sql in NULLABLE_FUSED {
            let (done, plan) = check(&fused, &plain, sql).await;
            assert!(done, "{sql}: not fused at {partitions} partitions\n{plan}");
        }
        for sql in NULLABLE_NOT_FUSED {
            let (done, plan) = check(&fused, &plain, sql).await;
            assert!(!done, "{sql}: fused at {partitions} partitions\n{plan}");
        }
    }
}

#[tokio::test]
async fn a_directory_of_files_is_fused_file_by_file() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let parts = dir.path().join("parts");
    std::fs::create_dir(&parts).unwrap_or_else(|e| panic!("{e}"));
    let batches = LineItemArrow::new(LineItemGenerator::new(0.005, 1, 1))
        .with_batch_size(4096)
        .collect::<Result<Vec<_>, _>>()
        .unwrap_or_else(|e| panic!("{e}"));
    for (i, part) in batches.chunks(3).enumerate() {
        write(part, &parts.join(format!("part-{i}.zf")), 2048);
    }
    let (fused, plain) = contexts(&parts, 2);
    for sql in &LINEITEM_FUSED[..2] {
        let (done, plan) = check(&fused, &plain, sql).await;
        assert!(done, "{sql}\n{plan}");
    }
}

#[tokio::test]
async fn explain_shows_the_fused_scan() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("nullable.zf");
    write(&[nullable_batch()], &path, 1000);
    let (fused, _) = contexts(&path, 2);
    let df = fused
        .sql("EXPLAIN SELECT grp, sum(price) FROM t WHERE day > DATE '2019-01-01' GROUP BY grp")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let text = rows(&df.collect().await.unwrap_or_else(|e| panic!("{e}"))).join("\n");
    assert!(text.contains("ZfAggregateExec: files=["), "{text}");
    assert!(!text.contains("ZfScanExec"), "{text}");
}
