//! Random queries through the native engine and a reference: whatever the native engine
//! accepts must give the rows DataFusion gives over the same data held in memory (nulls,
//! NaN, -0.0, decimals, dates, strings, several chunks). `ZIPFLOW_DIFF_QUERIES` sets how
//! many (default 1,500).
//!
//! The reference shares no zipflow code: a `MemTable` of the Arrow batch the file was
//! written from. A query holds at most one IN list: DataFusion 55's expression simplifier
//! rewrites `x NOT IN (a) OR x NOT IN (b)` to `true` (and `x IN (a) AND x IN (b)` to
//! `false`) even where `x` is NULL, and its IN lists of more than a few floats tell -0.0
//! from 0.0 (its `=` does not); the native engine answers both as PostgreSQL does.

use std::cmp::Ordering;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{
    ArrayRef, Date32Array, Decimal128Array, Float64Array, Int32Array, Int64Array, RecordBatch,
    StringArray,
};
use arrow::datatypes::{DataType, Field, Schema};
use datafusion::datasource::MemTable;
use datafusion::prelude::{SessionConfig, SessionContext};
use zipflow_compute::{QueryResult, ScanOptions, Table, Value, sql};
use zipflow_format::{TableWriter, WriteOptions};

use super::render::to_result;

/// A small deterministic generator (xorshift).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }

    /// True one time in `n`.
    fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }
}

const ROWS: usize = 6_000;

/// A table with nulls in every column, NaN, infinities and both zeros among the floats,
/// repeated and unique strings, decimals and dates; several chunks.
fn table(dir: &Path) -> (PathBuf, RecordBatch) {
    let mut r = Rng(0x2545_F491_4F6C_DD1D);
    let floats = [
        0.0,
        -0.0,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        1.5,
        -2.25,
        1e300,
        -7.0,
        3.0,
    ];
    let words = [
        "apple",
        "Banana",
        "cherry",
        "",
        "apple pie",
        "zeta",
        "a%b",
        "ß",
    ];
    let mut i = Vec::new();
    let mut k = Vec::new();
    let mut f = Vec::new();
    let mut d = Vec::new();
    let mut s = Vec::new();
    let mut dt = Vec::new();
    for row in 0..ROWS {
        i.push((!r.one_in(9)).then(|| r.below(2_000) as i64 - 1_000));
        k.push((!r.one_in(7)).then(|| r.below(12) as i32));
        f.push((!r.one_in(8)).then(|| {
            if r.one_in(3) {
                (r.below(10_000) as f64 - 5_000.0) / 8.0
            } else {
                floats[r.below(floats.len())]
            }
        }));
        d.push((!r.one_in(10)).then(|| r.below(200_000) as i128 - 100_000));
        s.push((!r.one_in(6)).then(|| {
            if r.one_in(5) {
                format!("u{row}")
            } else {
                words[r.below(words.len())].to_string()
            }
        }));
        dt.push((!r.one_in(11)).then(|| 9_000 + r.below(2_000) as i32));
    }
    let schema = Arc::new(Schema::new(vec![
        Field::new("i", DataType::Int64, true),
        Field::new("k", DataType::Int32, true),
        Field::new("f", DataType::Float64, true),
        Field::new("d", DataType::Decimal128(12, 2), true),
        Field::new("s", DataType::Utf8, true),
        Field::new("dt", DataType::Date32, true),
    ]));
    let decimals = Decimal128Array::from(d)
        .with_precision_and_scale(12, 2)
        .unwrap_or_else(|e| panic!("{e}"));
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(i)),
        Arc::new(Int32Array::from(k)),
        Arc::new(Float64Array::from(f)),
        Arc::new(decimals),
        Arc::new(StringArray::from(s)),
        Arc::new(Date32Array::from(dt)),
    ];
    let batch = RecordBatch::try_new(schema.clone(), columns).unwrap_or_else(|e| panic!("{e}"));
    let path = dir.join("t.zf");
    let options = WriteOptions {
        chunk_rows: 1_000,
        overwrite: true,
        chooser: Some(zipflow_select::Chooser::shared(Default::default())),
        ..Default::default()
    };
    let mut w = TableWriter::create(&path, schema, options).unwrap_or_else(|e| panic!("{e}"));
    w.write(&batch).unwrap_or_else(|e| panic!("{e}"));
    w.finish().unwrap_or_else(|e| panic!("{e}"));
    (path, batch)
}

/// DataFusion over `batch` in memory as table `t`.
fn reference(batch: RecordBatch) -> SessionContext {
    let ctx = zipflow_datafusion::session(SessionConfig::new().with_target_partitions(2));
    let table =
        MemTable::try_new(batch.schema(), vec![vec![batch]]).unwrap_or_else(|e| panic!("{e}"));
    ctx.register_table("t", Arc::new(table))
        .unwrap_or_else(|e| panic!("{e}"));
    ctx
}

/// The reference's answer to `sql`.
async fn answer(ctx: &SessionContext, sql: &str) -> QueryResult {
    let df = ctx.sql(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    let schema = df.schema().as_arrow().clone();
    let batches = df.collect().await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    to_result(&schema, &batches).unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// A random predicate of up to `depth` levels of AND / OR / NOT; `in_list` is set once it
/// holds an IN list (a predicate holds at most one).
fn predicate(r: &mut Rng, depth: usize, in_list: &mut bool) -> String {
    if depth > 0 && r.one_in(3) {
        let a = predicate(r, depth - 1, in_list);
        let b = predicate(r, depth - 1, in_list);
        return match r.below(3) {
            0 => format!("({a} AND {b})"),
            1 => format!("({a} OR {b})"),
            _ => format!("NOT ({a})"),
        };
    }
    let n = r.below(2_400) as i64 - 1_200;
    let fl = r.pick(&[
        "0", "-0.0", "0.0", "1.5", "-7", "100.125", "1e300", "-1e308",
    ]);
    let mut leaf = r.below(24);
    while *in_list && matches!(leaf, 3..=6 | 11) {
        leaf = r.below(24);
    }
    *in_list |= matches!(leaf, 3..=6 | 11);
    match leaf {
        0 => format!("i < {n}"),
        1 => format!("i = {n}"),
        2 => format!("i BETWEEN {n} AND {}", n + 300),
        3 => format!("k IN ({}, {}, {})", r.below(12), r.below(12), r.below(14)),
        4 => format!("k NOT IN ({}, {})", r.below(12), r.below(12)),
        5 => format!("k IN ({}, NULL)", r.below(12)),
        6 => format!("k NOT IN ({}, NULL)", r.below(12)),
        7 => format!("f = {fl}"),
        8 => format!("f < {fl}"),
        9 => format!("f >= {fl}"),
        10 => format!("f <> {fl}"),
        11 => format!("f IN ({fl}, 3)"),
        12 => format!("f {} NULL", r.pick(&["IS", "IS NOT"])),
        13 => format!("d > {}.{:02}", n, r.below(100)),
        14 => format!("d <= {}", n * 7),
        15 => format!("s = '{}'", r.pick(&["apple", "Banana", "", "zeta", "u17"])),
        16 => format!(
            "s LIKE '{}'",
            r.pick(&["a%", "%e%", "_eta", "%pie", "a\\%b"])
        ),
        17 => format!("s < '{}'", r.pick(&["b", "apple", "Z", "u5"])),
        18 => format!("s IS {}NULL", r.pick(&["", "NOT "])),
        19 => format!("dt >= DATE '{}-03-01'", 1994 + r.below(5)),
        20 => format!("i + k > {}", n / 4),
        21 => format!("i % 7 = {}", r.below(7)),
        22 => format!("i * 2 - k < {n}"),
        _ => format!("d * 2 > {}", n * 3),
    }
}

/// A random query over `from` (a quoted path).
fn query(r: &mut Rng, from: &str) -> String {
    let filter = if r.one_in(5) {
        String::new()
    } else {
        format!(" WHERE {}", predicate(r, 2, &mut false))
    };
    let aggs = [
        "count(*)",
        "count(f)",
        "sum(i)",
        "min(i)",
        "max(k)",
        "sum(d)",
        "min(d)",
        "max(d)",
        "min(f)",
        "max(f)",
        "min(s)",
        "max(s)",
        "min(dt)",
        "max(dt)",
        "count(DISTINCT k)",
        "count(DISTINCT s)",
        "sum(i * 2)",
        "sum(k)",
    ];
    match r.below(4) {
        0 => {
            let a = r.pick(&aggs);
            let b = r.pick(&aggs);
            format!("SELECT {a} AS a1, {b} AS a2 FROM {from}{filter}")
        }
        1 => {
            let key = r.pick(&["k", "s", "dt", "k % 3", "f", "d"]);
            let a = r.pick(&aggs);
            let b = r.pick(&aggs);
            format!("SELECT {key} AS g, {a} AS a1, {b} AS a2 FROM {from}{filter} GROUP BY 1")
        }
        2 => {
            let cols = r.pick(&["i, f", "s, d", "k, dt, f", "i + k AS x, s", "f, d * 3 AS x"]);
            format!("SELECT {cols} FROM {from}{filter}")
        }
        _ => {
            let col = r.pick(&["s", "k", "f", "dt", "k, s"]);
            format!("SELECT DISTINCT {col} FROM {from}{filter}")
        }
    }
}

/// Whether two answers' values agree: numbers by value (decimals of any scale, floats to
/// a relative 1e-9 for sums in another order, NaN equal to NaN), the rest exactly.
fn same(a: &Value, b: &Value) -> bool {
    let number = |v: &Value| match v {
        Value::Int(x) => Some(*x as f64),
        Value::Decimal(x, s) => Some(*x as f64 / 10f64.powi(i32::from(*s))),
        Value::Float(x) => Some(*x),
        _ => None,
    };
    match (a, b) {
        (Value::Int(x), Value::Int(y)) => x == y,
        (Value::Decimal(x, sx), Value::Decimal(y, sy)) => {
            let s = (*sx).max(*sy);
            let up = |v: i128, from: u8| v * 10i128.pow(u32::from(s - from));
            up(*x, *sx) == up(*y, *sy)
        }
        _ => match (number(a), number(b)) {
            (Some(x), Some(y)) => {
                (x.is_nan() && y.is_nan()) || x == y || (x - y).abs() <= 1e-9 * x.abs().max(y.abs())
            }
            _ => a == b,
        },
    }
}

/// The rows sorted, so answers without ORDER BY compare as multisets.
fn sorted(result: &QueryResult) -> Vec<Vec<Value>> {
    let mut rows = result.rows.clone();
    rows.sort_by(|x, y| {
        x.iter()
            .zip(y)
            .map(|(a, b)| a.sort_cmp(b))
            .find(|o| *o != Ordering::Equal)
            .unwrap_or(Ordering::Equal)
    });
    rows
}

fn agree(native: &QueryResult, other: &QueryResult) -> bool {
    let (a, b) = (sorted(native), sorted(other));
    a.len() == b.len()
        && a.iter()
            .zip(&b)
            .all(|(x, y)| x.len() == y.len() && x.iter().zip(y).all(|(u, v)| same(u, v)))
}

#[test]
fn random_queries_give_datafusions_answers() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (path, batch) = table(dir.path());
    let from = format!("'{}'", path.display());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let ctx = reference(batch);
    let count = std::env::var("ZIPFLOW_DIFF_QUERIES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_500);
    let table = Table::open(&path).unwrap_or_else(|e| panic!("{e}"));
    let schema = table.schema().unwrap_or_else(|e| panic!("{e}"));
    let opts = ScanOptions {
        threads: 2,
        reference: false,
    };
    let mut r = Rng(0x9E37_79B9_7F4A_7C15);
    let (mut native, mut failures) = (0, Vec::new());
    for _ in 0..count {
        let template = query(&mut r, "{from}");
        let q = template.replace("{from}", &from);
        let Ok(plan) = sql::plan(&q, &schema) else {
            continue;
        };
        native += 1;
        let mine = table
            .run(&plan, &opts)
            .unwrap_or_else(|e| panic!("{q}: {e}"));
        let theirs = runtime.block_on(answer(&ctx, &template.replace("{from}", "t")));
        if !agree(&mine, &theirs) {
            failures.push(format!(
                "{q}\n  native ({} rows): {:?}\n  datafusion ({} rows): {:?}",
                mine.rows.len(),
                sorted(&mine).into_iter().take(6).collect::<Vec<_>>(),
                theirs.rows.len(),
                sorted(&theirs).into_iter().take(6).collect::<Vec<_>>(),
            ));
        }
    }
    eprintln!("{native} of {count} queries ran on both");
    assert!(
        native * 2 > count,
        "the native engine took only {native} of {count} queries"
    );
    assert!(
        failures.is_empty(),
        "{} of {native} queries disagree:\n{}",
        failures.len(),
        failures
            .iter()
            .take(12)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}
