//! Aggregating queries on the GPU against the CPU engine: TPC-H Q1 and Q6 and random queries
//! over a generated lineitem table must give the same rows, bit for bit. Without a GPU the
//! device tests skip (`ZIPFLOW_REQUIRE_GPU=1` makes that a failure); what the host decides
//! (which queries run on the GPU, and the kernels' source) is checked everywhere.

mod common;
use common::gpu;

use std::path::Path;

use arrow::array::RecordBatch;
use tpchgen::generators::LineItemGenerator;
use tpchgen_arrow::LineItemArrow;
use zipflow_compute::{QueryResult, ScanOptions, Table, sql, tpch};
use zipflow_core::Error;
use zipflow_cuda::query::GpuQuery;

use zipflow_format::{TableWriter, WriteOptions};

/// TPC-H lineitem at scale factor `sf` in row groups of `chunk_rows`, at `dir/lineitem.zf`.
fn lineitem(dir: &Path, sf: f64, chunk_rows: usize) -> String {
    let batches: Vec<RecordBatch> = LineItemArrow::new(LineItemGenerator::new(sf, 1, 1))
        .with_batch_size(8192)
        .collect::<Result<Vec<_>, _>>()
        .unwrap_or_else(|e| panic!("{e}"));
    let path = dir.join("lineitem.zf");
    let options = WriteOptions {
        chunk_rows,
        overwrite: true,
        chooser: Some(zipflow_select::Chooser::shared(Default::default())),
        ..Default::default()
    };
    let mut w =
        TableWriter::create(&path, batches[0].schema(), options).unwrap_or_else(|e| panic!("{e}"));
    for b in &batches {
        w.write(b).unwrap_or_else(|e| panic!("{e}"));
    }
    w.finish().unwrap_or_else(|e| panic!("{e}"));
    path.to_string_lossy().into_owned()
}

fn plan(table: &Table, text: &str) -> zipflow_compute::Query {
    let schema = table.schema().unwrap_or_else(|e| panic!("{e}"));
    sql::plan(text, &schema).unwrap_or_else(|e| panic!("{text}: {e}"))
}

/// The rows of a result in a fixed order (groups come out in key order on the GPU and in
/// first-seen order on the CPU when the query does not say).
fn sorted(mut r: QueryResult) -> QueryResult {
    r.rows.sort_by(|a, b| {
        a.iter()
            .zip(b)
            .map(|(x, y)| x.sort_cmp(y))
            .find(|o| o.is_ne())
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    r
}

#[test]
fn the_host_accepts_q1_and_q6_and_names_what_it_refuses() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = lineitem(dir.path(), 0.01, 8192);
    let table = Table::open(&path).unwrap_or_else(|e| panic!("{e}"));
    for text in [tpch::q1(&path), tpch::q6(&path)] {
        let q = plan(&table, &text);
        let g = GpuQuery::new(&table, &q).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert!(g.source().contains("zf_query"), "{}", g.source());
    }
    let q1 =
        GpuQuery::new(&table, &plan(&table, &tpch::q1(&path))).unwrap_or_else(|e| panic!("{e}"));
    // Q1's string keys are dictionary codes mapped per chunk, its products checked.
    assert!(q1.source().contains("zf_map(maps"), "{}", q1.source());
    assert!(q1.source().contains("zf_mul("), "{}", q1.source());
    let refused = [
        // Rows, not aggregates.
        format!("SELECT l_quantity FROM '{path}' WHERE l_quantity > 10"),
        // DISTINCT.
        format!("SELECT count(DISTINCT l_partkey) FROM '{path}'"),
        // Too many groups.
        format!("SELECT l_partkey, l_suppkey, count(*) FROM '{path}' GROUP BY 1, 2"),
        // Strings outside the keys.
        format!("SELECT count(*) FROM '{path}' WHERE l_shipmode = 'AIR'"),
        format!("SELECT l_shipmode, count(*) FROM '{path}' WHERE l_shipmode = 'AIR' GROUP BY 1"),
        // Floats.
        format!("SELECT sum(CAST(l_quantity AS DOUBLE)) FROM '{path}'"),
        // Variances.
        format!("SELECT stddev(l_quantity) FROM '{path}'"),
    ];
    for text in &refused {
        let q = plan(&table, text);
        match GpuQuery::new(&table, &q) {
            Err(Error::Unsupported { .. }) => {}
            Err(e) => panic!("{text}: not an Unsupported error: {e}"),
            Ok(_) => panic!("{text}: accepted"),
        }
    }
}

/// Random aggregating queries over lineitem's integral, decimal and date columns, with and
/// without keys (xorshift64*, fixed seed).
fn random_queries(path: &str, n: usize) -> Vec<String> {
    let mut s: u64 = 0x2545_F491_4F6C_DD1D;
    let mut next = move |m: u64| {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        s.wrapping_mul(0x2545_F491_4F6C_DD1D) % m
    };
    let cols = [
        ("l_quantity", 1, 50),
        ("l_discount", 0, 10),
        ("l_tax", 0, 8),
        ("l_linenumber", 1, 7),
        ("l_partkey", 1, 2000),
        ("l_suppkey", 1, 100),
    ];
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let pred = |next: &mut dyn FnMut(u64) -> u64| -> String {
            match next(6) {
                0 => {
                    let (c, lo, hi) = cols[next(cols.len() as u64) as usize];
                    let v = lo + next((hi - lo + 1) as u64) as i64;
                    let op = ["<", "<=", ">", ">=", "=", "<>"][next(6) as usize];
                    if c == "l_discount" || c == "l_tax" {
                        format!("{c} {op} 0.{v:02}")
                    } else {
                        format!("{c} {op} {v}")
                    }
                }
                1 => {
                    let d = 8000 + next(2500) as i64;
                    let days = next(400);
                    format!(
                        "l_shipdate BETWEEN DATE '1970-01-01' + INTERVAL '{d}' DAY AND \
                         DATE '1970-01-01' + INTERVAL '{}' DAY",
                        d + days as i64
                    )
                }
                2 => format!("l_linenumber IN ({}, {})", 1 + next(7), 1 + next(7)),
                3 => format!("NOT (l_quantity < {})", 1 + next(50)),
                4 => "l_commitdate < l_receiptdate".to_string(),
                _ => format!(
                    "l_extendedprice * (1 - l_discount) > {}",
                    1000 + next(90000)
                ),
            }
        };
        let filter = match next(4) {
            0 => String::new(),
            1 => format!(" WHERE {}", pred(&mut next)),
            2 => format!(" WHERE {} AND {}", pred(&mut next), pred(&mut next)),
            _ => format!(" WHERE {} OR {}", pred(&mut next), pred(&mut next)),
        };
        let args = [
            "l_quantity",
            "l_extendedprice",
            "l_extendedprice * l_discount",
            "l_extendedprice * (1 - l_discount) * (1 + l_tax)",
            "l_partkey + l_suppkey",
            "-l_quantity",
            "CASE WHEN l_quantity > 25 THEN l_extendedprice ELSE 0 END",
            "l_shipdate",
            "l_linenumber * 3 - l_quantity",
        ];
        let mut aggs = Vec::new();
        for i in 0..1 + next(4) {
            let a = args[next(args.len() as u64) as usize];
            let f = ["sum", "min", "max", "avg", "count"][next(5) as usize];
            let f = if a == "l_shipdate" && (f == "sum" || f == "avg") {
                "min"
            } else {
                f
            };
            aggs.push(format!("{f}({a}) AS a{i}"));
        }
        aggs.push("count(*) AS n".into());
        let keys = [
            "",
            "l_returnflag",
            "l_linestatus",
            "l_returnflag, l_linestatus",
            "l_linenumber",
            "l_shipmode, l_linenumber",
            "l_shipinstruct",
        ][next(7) as usize];
        let sel = if keys.is_empty() {
            aggs.join(", ")
        } else {
            format!("{keys}, {}", aggs.join(", "))
        };
        let group = if keys.is_empty() {
            String::new()
        } else {
            format!(" GROUP BY {keys}")
        };
        out.push(format!("SELECT {sel} FROM '{path}'{filter}{group}"));
    }
    out
}

#[test]
fn gpu_answers_equal_the_cpu_engine() {
    let Some(gpu) = gpu("gpu_answers_equal_the_cpu_engine") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    // Row groups of 8,192 rows, decoded in batches of three of them, and of the default size
    // in one batch.
    for (chunk_rows, batch_rows) in [(8192, 3 * 8192), (65536, 1 << 24)] {
        let path = lineitem(dir.path(), 0.05, chunk_rows);
        let table = Table::open(&path).unwrap_or_else(|e| panic!("{e}"));
        let mut queries = vec![tpch::q1(&path), tpch::q6(&path)];
        queries.extend(random_queries(&path, 60));
        let mut ran = 0;
        for text in &queries {
            let q = plan(&table, text);
            let g = match GpuQuery::new(&table, &q) {
                Ok(g) => g.with_batch_rows(batch_rows),
                Err(Error::Unsupported { .. }) if !text.contains("sum_qty") => continue,
                Err(e) => panic!("{text}: {e}"),
            };
            let cpu = table.run(&q, &ScanOptions::default());
            let on_gpu = g.run(&gpu, &table, &q);
            match (cpu, on_gpu) {
                (Ok(c), Ok(d)) => {
                    assert_eq!(sorted(d), sorted(c), "{text}\n{}", g.source());
                    ran += 1;
                }
                (Err(c), Err(d)) => assert_eq!(d.to_string(), c.to_string(), "{text}"),
                (c, d) => panic!("{text}: CPU {c:?}, GPU {d:?}"),
            }
        }
        assert!(ran >= 50, "only {ran} queries ran on the GPU");
    }
}

#[test]
fn an_overflow_is_the_cpu_engines_error() {
    let Some(gpu) = gpu("an_overflow_is_the_cpu_engines_error") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = lineitem(dir.path(), 0.01, 8192);
    let table = Table::open(&path).unwrap_or_else(|e| panic!("{e}"));
    let text = format!(
        "SELECT sum(l_extendedprice * l_extendedprice * l_extendedprice * l_extendedprice) \
         FROM '{path}'"
    );
    let q = plan(&table, &text);
    let cpu = table.run(&q, &ScanOptions::default());
    let g = GpuQuery::new(&table, &q).unwrap_or_else(|e| panic!("{e}"));
    let on_gpu = g.run(&gpu, &table, &q);
    match (cpu, on_gpu) {
        (Err(c), Err(d)) => assert_eq!(d.to_string(), c.to_string()),
        (c, d) => panic!("expected both to overflow: CPU {c:?}, GPU {d:?}"),
    }
}

/// Columns with nulls (string keys included) and floats (NaN, -0.0) stay on the CPU: a query
/// reading one is refused by name, and a query over the table's other columns runs on the GPU with the CPU's answer.
/// (Binary columns never get here: the native SQL front does not plan over them.)
#[test]
fn nulls_and_floats_stay_on_the_cpu() {
    use arrow::array::{ArrayRef, Float64Array, Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let n = 5000i64;
    let k: ArrayRef = Arc::new(Int64Array::from_iter_values((0..n).map(|i| i % 7)));
    let x: ArrayRef = Arc::new(Int64Array::from_iter(
        (0..n).map(|i| (i % 5 != 0).then_some(i)),
    ));
    let f: ArrayRef = Arc::new(Float64Array::from_iter_values((0..n).map(|i| {
        match i % 3 {
            0 => f64::NAN,
            1 => -0.0,
            _ => i as f64,
        }
    })));
    // A dictionary-coded string key with nulls: the null rows must not join a string's group.
    let s: ArrayRef =
        Arc::new(StringArray::from_iter((0..n).map(|i| {
            (i % 4 != 0).then_some(["a", "b", "c"][(i % 3) as usize])
        })));
    let schema = Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("x", DataType::Int64, true),
        Field::new("f", DataType::Float64, false),
        Field::new("s", DataType::Utf8, true),
    ]);
    let batch =
        RecordBatch::try_new(Arc::new(schema), vec![k, x, f, s]).unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("t.zf");
    let options = WriteOptions {
        chunk_rows: 1024,
        chooser: Some(zipflow_select::Chooser::shared(Default::default())),
        ..Default::default()
    };
    let mut w =
        TableWriter::create(&path, batch.schema(), options).unwrap_or_else(|e| panic!("{e}"));
    w.write(&batch).unwrap_or_else(|e| panic!("{e}"));
    w.finish().unwrap_or_else(|e| panic!("{e}"));
    let path = path.to_string_lossy().into_owned();
    let table = Table::open(&path).unwrap_or_else(|e| panic!("{e}"));
    for text in [
        format!("SELECT sum(x) FROM '{path}'"),
        format!("SELECT k, count(*) FROM '{path}' WHERE x > 10 GROUP BY k"),
        format!("SELECT max(f) FROM '{path}'"),
        format!("SELECT count(*) FROM '{path}' WHERE f = 0"),
        format!("SELECT s, count(*) FROM '{path}' GROUP BY s"),
    ] {
        let q = plan(&table, &text);
        match GpuQuery::new(&table, &q) {
            Err(Error::Unsupported { .. }) => {}
            Err(e) => panic!("{text}: not an Unsupported error: {e}"),
            Ok(_) => panic!("{text}: accepted"),
        }
    }
    let text = format!("SELECT k, sum(k), min(k), count(*) FROM '{path}' GROUP BY k");
    let q = plan(&table, &text);
    let g = GpuQuery::new(&table, &q).unwrap_or_else(|e| panic!("{text}: {e}"));
    let Some(gpu) = gpu("nulls_and_floats_stay_on_the_cpu") else {
        return;
    };
    let cpu = table
        .run(&q, &ScanOptions::default())
        .unwrap_or_else(|e| panic!("{e}"));
    let on_gpu = g.run(&gpu, &table, &q).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(sorted(on_gpu), sorted(cpu), "{text}");
}
