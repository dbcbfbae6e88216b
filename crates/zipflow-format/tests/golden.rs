//! Files written by an earlier build must keep reading back exactly.
//!
//! `tests/golden/` holds small `.zf` files of format versions 2 and 3 (see its README). This test
//! rebuilds the values each file was written from and compares what the reader gives back,
//! bit for bit (floats by their bits, nulls by position). A change that makes these files
//! unreadable, or read differently, is a format change: bump the version and keep a reader
//! for the old one (docs/format.md, section 9).
//!
//! To write a file added here (those already on disk are kept as they are):
//! `ZIPFLOW_WRITE_GOLDEN=1 cargo test -p zipflow-format --test golden`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use arrow::array::{
    Array, ArrayRef, AsArray, Date32Array, Decimal128Array, Float64Array, Int32Array, Int64Array,
    RecordBatch, StringArray,
};
use arrow::datatypes::{DataType, Field, Float64Type, Schema};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use zipflow_format::text::{self, TextOptions};
use zipflow_format::{TableWriter, WriteOptions, ZfFile};

fn golden(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name)
}

/// Integers, a decimal, dates and floats with -0.0, infinities and a NaN payload; 2,500 rows
/// in chunks of 1,024 (two full row groups and a short one).
fn numeric() -> RecordBatch {
    let n = 2500i64;
    let ids: ArrayRef = Arc::new(Int64Array::from_iter_values((0..n).map(|i| i * 37 - 900)));
    let small: ArrayRef = Arc::new(Int32Array::from_iter_values(
        (0..n).map(|i| ((i * 7919) % 201 - 100) as i32),
    ));
    let price: ArrayRef = Arc::new(
        Decimal128Array::from_iter_values((0..n).map(|i| i128::from((i * 104_729) % 1_000_000)))
            .with_precision_and_scale(15, 2)
            .unwrap(),
    );
    let day: ArrayRef = Arc::new(Date32Array::from_iter_values(
        (0..n).map(|i| 8035 + (i % 2526) as i32),
    ));
    let special = [
        -0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::from_bits(0x7ff8_0000_dead_beef),
        f64::MIN_POSITIVE,
    ];
    let x: ArrayRef = Arc::new(Float64Array::from_iter_values((0..n).map(|i| {
        if i % 250 == 3 {
            special[(i / 250) as usize % special.len()]
        } else {
            (i % 400) as f64 * 0.25 - 17.5
        }
    })));
    let schema = Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("small", DataType::Int32, false),
        Field::new("price", DataType::Decimal128(15, 2), false),
        Field::new("day", DataType::Date32, false),
        Field::new("x", DataType::Float64, false),
    ]);
    RecordBatch::try_new(Arc::new(schema), vec![ids, small, price, day, x]).unwrap()
}

/// Strings (empty, repeated, unique, non-ASCII) and integers, each with nulls; a chunk of
/// all nulls and one with none.
fn strings_with_nulls() -> RecordBatch {
    let n = 3000usize;
    let words = [
        "",
        "alpha",
        "beta",
        "gamma",
        "délta",
        "ε",
        "a much longer value here",
    ];
    let s: ArrayRef = Arc::new(StringArray::from_iter((0..n).map(|i| match i {
        1024..2048 => None,
        2048.. => Some(format!("{}-{}", words[i % words.len()], i % 13)),
        _ if i % 6 == 1 => None,
        _ if i % 10 == 0 => Some(format!("unique {i}")),
        _ => Some(words[i % words.len()].to_string()),
    })));
    let k: ArrayRef = Arc::new(Int32Array::from_iter((0..n).map(|i| {
        (i % 9 != 2 && !(1024..2048).contains(&i)).then_some((i as i32 % 300) - 150)
    })));
    let schema = Schema::new(vec![
        Field::new("s", DataType::Utf8, true),
        Field::new("k", DataType::Int32, true),
    ]);
    RecordBatch::try_new(Arc::new(schema), vec![s, k]).unwrap()
}

/// Text with repeated words and lines, non-ASCII and a few control bytes.
fn text_bytes() -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..300u32 {
        let line = format!(
            "{i:05} the quick brown fox {} jumps over the lazy dög\t{}\r\n",
            ["ran", "walked", "flew"][i as usize % 3],
            i.wrapping_mul(2_654_435_761) % 10_007
        );
        out.extend_from_slice(line.as_bytes());
    }
    out.extend_from_slice(&[0, 1, 2, 255, 254, b'\n']);
    out
}

fn write_table(path: &Path, batch: &RecordBatch) {
    let opts = WriteOptions {
        chunk_rows: 1024,
        overwrite: true,
        chooser: Some(zipflow_select::Chooser::shared(Default::default())),
        ..WriteOptions::default()
    };
    let mut w = TableWriter::create(path, batch.schema(), opts).unwrap();
    w.write(batch).unwrap();
    w.finish().unwrap();
}

fn write_text(path: &Path, bytes: &[u8]) {
    let opts = TextOptions {
        chunk_bytes: 4096,
        overwrite: true,
        chooser: Some(zipflow_select::Chooser::shared(Default::default())),
        ..TextOptions::default()
    };
    text::compress(bytes, path, &opts, |_| ()).unwrap();
}

/// Every row of `back` equals `want`: values and nulls, floats by their bits.
fn assert_same(file: &str, want: &RecordBatch, back: &RecordBatch) {
    assert_eq!(back.schema(), want.schema(), "{file}: schema");
    assert_eq!(back.num_rows(), want.num_rows(), "{file}: rows");
    for (c, field) in want.schema().fields().iter().enumerate() {
        let (w, b) = (want.column(c), back.column(c));
        assert_eq!(
            w.nulls(),
            b.nulls(),
            "{file}, column `{}`: nulls",
            field.name()
        );
        if field.data_type() == &DataType::Float64 {
            let bits = |a: &ArrayRef| -> Vec<u64> {
                a.as_primitive::<Float64Type>()
                    .values()
                    .iter()
                    .map(|v| v.to_bits())
                    .collect()
            };
            assert_eq!(bits(w), bits(b), "{file}, column `{}`", field.name());
        } else {
            assert_eq!(w, b, "{file}, column `{}`", field.name());
        }
    }
}

fn read_all(path: &Path) -> (ZfFile, RecordBatch) {
    let zf = ZfFile::open(path).unwrap();
    let batches: Vec<RecordBatch> = zf.batches().map(Result::unwrap).collect();
    let all = arrow::compute::concat_batches(&zf.arrow_schema(), &batches).unwrap();
    (zf, all)
}

#[test]
fn golden_files_read_back_bit_for_bit() {
    // Writes only the files that are missing: a file of an older version is never rewritten.
    if std::env::var_os("ZIPFLOW_WRITE_GOLDEN").is_some() {
        let missing = |name: &str| !golden(name).exists();
        if missing("numeric.zf") {
            write_table(&golden("numeric.zf"), &numeric());
        }
        if missing("strings_nulls.zf") {
            write_table(&golden("strings_nulls.zf"), &strings_with_nulls());
        }
        if missing("text.zf") {
            write_text(&golden("text.zf"), &text_bytes());
        }
        if missing("strings_nulls_v3.zf") {
            write_table(&golden("strings_nulls_v3.zf"), &strings_with_nulls());
        }
        if missing("numeric_v4.zf") {
            write_table(&golden("numeric_v4.zf"), &numeric());
        }
    }
    for (name, version, want) in [
        ("numeric.zf", 2, numeric()),
        ("strings_nulls.zf", 2, strings_with_nulls()),
        ("strings_nulls_v3.zf", 3, strings_with_nulls()),
        ("numeric_v4.zf", 4, numeric()),
    ] {
        let path = golden(name);
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(
            u16::from_le_bytes([bytes[8], bytes[9]]),
            version,
            "{name}: version"
        );
        let (zf, back) = read_all(&path);
        assert!(zf.num_chunks() >= 3, "{name}: {} chunks", zf.num_chunks());
        assert_same(name, &want, &back);
    }
    let zf = ZfFile::open(golden("text.zf")).unwrap();
    assert!(text::is_text(&zf));
    let mut back = Vec::new();
    text::decompress(&zf, &mut back, |_| ()).unwrap();
    assert_eq!(back, text_bytes(), "text.zf");
}

#[test]
fn a_newer_version_names_both_versions() {
    let mut bytes = std::fs::read(golden("numeric.zf")).unwrap();
    bytes[8..10].copy_from_slice(&(zipflow_format::file::VERSION + 1).to_le_bytes());
    let msg = ZfFile::from_bytes("new.zf", &bytes)
        .unwrap_err()
        .to_string();
    let want = format!(
        "written by a newer zipflow (format version {}, this build reads up to {})",
        zipflow_format::file::VERSION + 1,
        zipflow_format::file::VERSION
    );
    assert!(msg.contains(&want), "{msg}");
    assert!(msg.contains("new.zf"), "{msg}");
}
