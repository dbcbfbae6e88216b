//! Arbitrary SQL text against a small table with nulls, negative zero, NaN, decimals, dates
//! and strings: planning and running return results or errors, never panic, and the fused
//! block path agrees with the row-at-a-time reference path on whether the query runs and on
//! its rows (exactly, where no floating-point sum can differ by order).
#![no_main]

use std::sync::{Arc, OnceLock};

use arrow::array::{
    ArrayRef, Date32Array, Decimal128Array, Float64Array, Int64Array, RecordBatch, StringArray,
};
use arrow::datatypes::{DataType, Field, Schema};
use libfuzzer_sys::fuzz_target;
use zipflow_compute::{ScanOptions, SqlType, Table, sql};

fn table() -> Option<&'static Table> {
    static TABLE: OnceLock<Option<Table>> = OnceLock::new();
    TABLE.get_or_init(build).as_ref()
}

fn build() -> Option<Table> {
    let n = 3000i64;
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("q", DataType::Int64, true),
        Field::new("x", DataType::Float64, true),
        Field::new("p", DataType::Decimal128(12, 2), false),
        Field::new("d", DataType::Date32, false),
        Field::new("s", DataType::Utf8, true),
    ]));
    let floats = [0.0, -0.0, 1.5, f64::NAN, -2.25, 1e300];
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values((0..n).map(|i| i % 7))),
        Arc::new(Int64Array::from_iter(
            (0..n).map(|i| (i % 5 != 0).then_some(i - 1500)),
        )),
        Arc::new(Float64Array::from_iter(
            (0..n).map(|i| (i % 13 != 0).then_some(floats[(i % 6) as usize])),
        )),
        Arc::new(
            Decimal128Array::from_iter_values((0..n).map(|i| i128::from(i) * 37 - 50_000))
                .with_precision_and_scale(12, 2)
                .ok()?,
        ),
        Arc::new(Date32Array::from_iter_values(
            (0..n).map(|i| 9000 + (i % 400) as i32),
        )),
        Arc::new(StringArray::from_iter((0..n).map(|i| {
            (i % 11 != 0).then_some(["a", "bb", "", "ccc", "dé"][(i % 5) as usize])
        }))),
    ];
    let batch = RecordBatch::try_new(schema.clone(), columns).ok()?;
    let dir = std::env::temp_dir().join(format!("zipflow-fuzz-sql-{}", std::process::id()));
    std::fs::create_dir_all(&dir).ok()?;
    let path = dir.join("t.zf");
    let options = zipflow_format::WriteOptions {
        chunk_rows: 1024,
        chooser: Some(zipflow_select::Chooser::shared(Default::default())),
        ..Default::default()
    };
    let mut w = zipflow_format::TableWriter::create(&path, schema, options).ok()?;
    w.write(&batch).ok()?;
    w.finish().ok()?;
    let bytes = std::fs::read(&path).ok()?;
    let _ = std::fs::remove_dir_all(&dir);
    Table::new(zipflow_format::ZfFile::from_bytes("t.zf", &bytes).ok()?).ok()
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Some(table) = table() else {
        return;
    };
    let Ok(q) = sql::plan(text, &table.schema()) else {
        return;
    };
    let fast = table.run(
        &q,
        &ScanOptions {
            threads: 1,
            reference: false,
        },
    );
    let reference = table.run(
        &q,
        &ScanOptions {
            threads: 1,
            reference: true,
        },
    );
    match (fast, reference) {
        (Ok(a), Ok(b)) => {
            assert_eq!(a.rows.len(), b.rows.len(), "{text}: row counts differ");
            if !a.types.contains(&SqlType::Float) {
                assert_eq!(
                    a, b,
                    "{text}: the block path and the reference path disagree"
                );
            }
        }
        (Err(_), Err(_)) => {}
        (a, b) => panic!("{text}: one path failed: {a:?} / {b:?}"),
    }
});
