//! Writing tables and reading them back: every type, nulls, sizes around vector and chunk
//! boundaries, single chunks alone, forced plans, atomic and refusing writes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use arrow::array::*;
use arrow::compute::concat_batches;
use arrow::datatypes::*;
use zipflow_core::{Error, Plan};
use zipflow_encodings::Scratch;
use zipflow_format::{FileSummary, TableWriter, WriteOptions, ZfFile};

fn write(path: &Path, batch: &RecordBatch, piece: usize, options: WriteOptions) -> FileSummary {
    let mut w = TableWriter::create(path, batch.schema(), options).unwrap();
    let mut off = 0;
    while off < batch.num_rows() {
        let take = piece.min(batch.num_rows() - off);
        w.write(&batch.slice(off, take)).unwrap();
        off += take;
    }
    w.finish().unwrap()
}

fn opts(chunk_rows: usize) -> WriteOptions {
    WriteOptions {
        chunk_rows,
        ..common::selected()
    }
}

fn read_all(file: &ZfFile) -> RecordBatch {
    let batches: Vec<RecordBatch> = file.batches().collect::<Result<_, _>>().unwrap();
    concat_batches(&file.arrow_schema(), &batches).unwrap()
}

fn check_round_trip(n: usize, nulls: bool, chunk_rows: usize, piece: usize) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.zf");
    let batch = common::batch(n, nulls, n as u64 * 31 + u64::from(nulls));
    let summary = write(&path, &batch, piece, opts(chunk_rows));
    assert_eq!(summary.rows, n as u64);
    assert_eq!(summary.bytes, std::fs::metadata(&path).unwrap().len());
    assert_eq!(summary.columns.len(), batch.num_columns());

    let file = ZfFile::open(&path).unwrap();
    assert_eq!(
        file.arrow_schema(),
        batch.schema(),
        "schema and metadata come back"
    );
    assert_eq!(file.num_rows(), n as u64);
    assert_eq!(file.num_chunks(), n.div_ceil(chunk_rows));
    let back = read_all(&file);
    for (c, field) in batch.schema().fields().iter().enumerate() {
        assert_eq!(back.column(c).data_type(), field.data_type());
        assert_eq!(
            back.column(c).as_ref(),
            batch.column(c).as_ref(),
            "column {} ({n} rows, nulls: {nulls})",
            field.name()
        );
    }
    assert_eq!(back, batch);

    // Every chunk alone, in reverse order, with one scratch shared across types.
    let mut scratch = Scratch::default();
    for i in (0..file.num_chunks()).rev() {
        for c in (0..batch.num_columns()).rev() {
            let meta = file.chunk_meta(c, i);
            let start = meta.first_row as usize;
            let got = file.read_array(c, i, &mut scratch).unwrap();
            let want = batch.column(c).slice(start, meta.rows as usize);
            assert_eq!(got.as_ref(), want.as_ref(), "column {c} chunk {i}");
            assert_eq!(meta.stats.null_count as usize, want.logical_null_count());
            assert!(!meta.plan.is_empty());
            assert_eq!(meta.validity_plan.is_empty(), meta.stats.null_count == 0);
        }
    }
}

#[test]
fn every_type_small_sizes_many_chunks() {
    for n in [0, 1, 1023, 1024, 1025, 2500] {
        for nulls in [false, true] {
            check_round_trip(n, nulls, 1000, 333);
        }
    }
}

#[test]
fn every_type_past_a_default_chunk() {
    check_round_trip(65536 + 7, true, 65536, 10_000);
}

#[test]
fn batch_sizes_independent_of_chunking() {
    // One big batch and many tiny ones give the same file contents.
    check_round_trip(3001, true, 1024, 1);
    check_round_trip(3001, false, 1024, 5000);
}

#[test]
fn empty_table() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("empty.zf");
    let w = TableWriter::create(&path, common::schema(), common::selected()).unwrap();
    let summary = w.finish().unwrap();
    assert_eq!(summary.rows, 0);
    let file = ZfFile::open(&path).unwrap();
    assert_eq!(file.num_chunks(), 0);
    assert_eq!(file.batches().count(), 0);
    assert_eq!(file.arrow_schema(), common::schema());
    assert!(file.read_batch(0).is_err());
}

#[test]
fn forced_plans_are_used() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("forced.zf");
    let batch = common::batch(3000, false, 5);
    let plans = HashMap::from([
        ("i64".to_string(), "plain".parse::<Plan>().unwrap()),
        ("u8".to_string(), "for | bitpack".parse::<Plan>().unwrap()),
        (
            "utf8".to_string(),
            "plain(lengths: bitpack)".parse::<Plan>().unwrap(),
        ),
    ]);
    let options = WriteOptions {
        chunk_rows: 1000,
        plans,
        overwrite: false,
        ..common::selected()
    };
    let summary = write(&path, &batch, 3000, options);
    let file = ZfFile::open(&path).unwrap();
    let col = |name: &str| file.column_index(name).unwrap();
    for i in 0..file.num_chunks() {
        assert_eq!(file.chunk_meta(col("i64"), i).plan, "plain");
        assert!(
            file.chunk_meta(col("u8"), i)
                .plan
                .starts_with("for | bitpack")
        );
        assert!(
            file.chunk_meta(col("utf8"), i)
                .plan
                .starts_with("plain(lengths: bitpack")
        );
    }
    let s = summary.columns.iter().find(|c| c.name == "i64").unwrap();
    assert_eq!(s.plans, vec![("plain".to_string(), 3)]);
    assert_eq!(s.plain_bytes, 3000 * 8);
    assert_eq!(s.plan_summary(), "plain");
    assert!(s.encode_secs >= 0.0);
    let c = file.column_index("i64").unwrap();
    assert_eq!(file.chunk_meta(c, 0).plain_bytes, 1000 * 8);
    assert_eq!(
        (0..3)
            .map(|i| file.chunk_meta(c, i).compressed_bytes())
            .sum::<u64>(),
        s.compressed_bytes
    );
    assert_eq!(read_all(&file), batch);
}

fn no_files_left(dir: &Path) {
    let left: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn forced_plan_that_does_not_fit_names_column_and_chunk() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.zf");
    let batch = common::batch(2500, false, 9);
    let options = WriteOptions {
        chunk_rows: 1000,
        plans: HashMap::from([("wide".to_string(), Plan::new("constant"))]),
        overwrite: false,
        ..common::selected()
    };
    // Unknown column: the error lists the columns.
    let e = TableWriter::create(&path, batch.schema(), options.clone()).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("`wide`") && msg.contains("i64, u8"), "{msg}");
    no_files_left(dir.path());

    let options = WriteOptions {
        plans: HashMap::from([("i64".to_string(), Plan::new("constant"))]),
        ..options
    };
    let mut w = TableWriter::create(&path, batch.schema(), options).unwrap();
    let e = w.write(&batch).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, Error::Plan { .. }), "{msg}");
    assert!(msg.contains("bad.zf, column `i64`, chunk 0"), "{msg}");
    assert!(
        w.write(&batch).is_err(),
        "a failed writer refuses more rows"
    );
    drop(w);
    no_files_left(dir.path());
}

#[test]
fn overwrite_needs_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("o.zf");
    let batch = common::batch(10, true, 1);
    write(&path, &batch, 10, opts(4));
    let e = TableWriter::create(&path, batch.schema(), opts(4)).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("o.zf") && msg.contains("--force"), "{msg}");
    let other = common::batch(20, false, 2);
    let options = WriteOptions {
        overwrite: true,
        ..opts(4)
    };
    write(&path, &other, 7, options);
    assert_eq!(read_all(&ZfFile::open(&path).unwrap()), other);
}

#[test]
fn failed_or_abandoned_writes_leave_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gone.zf");
    let batch = common::batch(2500, true, 3);

    // Dropped before finish.
    let mut w = TableWriter::create(&path, batch.schema(), opts(1000)).unwrap();
    w.write(&batch).unwrap();
    let temp = dir
        .path()
        .join(format!(".gone.zf.tmp-{}", std::process::id()));
    assert!(temp.exists());
    drop(w);
    no_files_left(dir.path());

    // A panic while writing.
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut w = TableWriter::create(&path, batch.schema(), opts(1000)).unwrap();
        w.write(&batch).unwrap();
        panic!("interrupted");
    }));
    assert!(result.is_err());
    no_files_left(dir.path());

    // A batch that does not match the schema.
    let mut w = TableWriter::create(&path, batch.schema(), opts(1000)).unwrap();
    let other = RecordBatch::try_new(
        Arc::new(Schema::new(vec![Field::new("x", DataType::Int8, false)])),
        vec![Arc::new(Int8Array::from(vec![1]))],
    )
    .unwrap();
    assert!(w.write(&other).is_err());
    drop(w);
    no_files_left(dir.path());
}

#[test]
fn unsupported_types_and_values_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("u.zf");
    let list = DataType::List(Arc::new(Field::new("item", DataType::Int32, true)));
    let schema = Arc::new(Schema::new(vec![Field::new("x", list, true)]));
    let e = TableWriter::create(&path, schema, common::selected()).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, Error::Unsupported { .. }), "{msg}");
    assert!(msg.contains("column `x`: type List("), "{msg}");

    let schema = Arc::new(Schema::new(vec![Field::new(
        "big",
        DataType::Decimal128(38, 0),
        false,
    )]));
    let array = Decimal128Array::from(vec![1, i128::from(i64::MAX) + 1])
        .with_precision_and_scale(38, 0)
        .unwrap();
    let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(array)]).unwrap();
    let mut w = TableWriter::create(&path, schema, common::selected()).unwrap();
    w.write(&batch).unwrap();
    let e = w.finish().unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, Error::Unsupported { .. }), "{msg}");
    assert!(
        msg.contains("column `big`") && msg.contains("Decimal128(38, 0)"),
        "{msg}"
    );
    no_files_left(dir.path());
}

#[test]
fn sliced_and_offset_arrays() {
    // Arrays that start at a non-zero offset (slices of bigger arrays) convert correctly.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.zf");
    let big = common::batch(5000, true, 77);
    let batch = big.slice(1234, 2345);
    write(&path, &batch, 1000, opts(700));
    assert_eq!(read_all(&ZfFile::open(&path).unwrap()), batch);
}

mod prop {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

        /// Any values, any nulls, any chunking: the data comes back, chunk by chunk.
        #[test]
        fn ints_and_strings_round_trip(
            values in proptest::collection::vec(proptest::option::weighted(0.8, any::<i64>()), 0..2500),
            chunk_rows in 1usize..1500,
            piece in 1usize..3000,
        ) {
            let schema = Arc::new(Schema::new(vec![
                Field::new("v", DataType::Int64, true),
                Field::new("s", DataType::Utf8View, true),
            ]));
            let strings: Vec<Option<String>> =
                values.iter().map(|v| v.map(|x| format!("{}", x % 1000))).collect();
            let batch = RecordBatch::try_new(
                schema,
                vec![
                    Arc::new(Int64Array::from(values.clone())),
                    Arc::new(StringViewArray::from(
                        strings.iter().map(|s| s.as_deref()).collect::<Vec<_>>(),
                    )),
                ],
            )
            .unwrap();
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("p.zf");
            write(&path, &batch, piece, opts(chunk_rows));
            let file = ZfFile::open(&path).unwrap();
            prop_assert_eq!(read_all(&file), batch);
        }
    }
}

#[test]
fn pooled_reads_equal_fresh_reads_and_reuse_buffers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.zf");
    let batch = common::batch(5000, true, 17);
    write(&path, &batch, 5000, opts(1024));
    let file = ZfFile::open(&path).unwrap();
    let mut pool = zipflow_format::ArrayPool::default();
    let mut scratch = Scratch::default();
    for c in 0..file.columns().len() {
        let mut seen = std::collections::HashSet::new();
        for i in 0..file.num_chunks() {
            let fresh = file.read_array(c, i, &mut scratch).unwrap();
            let pooled = file.read_array_in(c, i, &mut pool).unwrap();
            assert_eq!(fresh.as_ref(), pooled.as_ref(), "column {c}, chunk {i}");
            let data = pooled.to_data();
            let ptr = data.buffers().first().map(|b| b.as_ptr());
            drop(data);
            seen.insert(ptr.map(|p| p as usize));
            pool.recycle(pooled);
        }
        // Later chunks come back in earlier chunks' allocations. Dictionary arrays are
        // rebuilt by a cast into fresh buffers, so whether their addresses repeat is up to
        // the allocator (and to the tests running beside this one).
        let ty = file.arrow_schema().field(c).data_type().clone();
        let rebuilt = matches!(
            ty,
            DataType::Boolean | DataType::Null | DataType::Dictionary(..)
        );
        if !rebuilt && file.num_chunks() > 3 {
            assert!(
                seen.len() < file.num_chunks(),
                "column {c} ({ty}): no buffer reused"
            );
        }
    }
}

/// Strings for the view tests: inline and long, multi-byte, empty.
const VIEW_STRINGS: [&str; 6] = [
    "A",
    "N",
    "R",
    "a string longer than twelve bytes",
    "żółć",
    "",
];

#[test]
fn dictionary_strings_read_as_views() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v.zf");
    let words = VIEW_STRINGS;
    let values: Vec<&str> = (0..5000).map(|i| words[(i * 7) % words.len()]).collect();
    let schema = Arc::new(Schema::new(vec![
        Field::new("s", DataType::Utf8View, false),
        Field::new("b", DataType::BinaryView, false),
    ]));
    let batch = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(StringViewArray::from(values.clone())),
            Arc::new(BinaryViewArray::from_iter_values(
                values.iter().map(|s| s.as_bytes()),
            )),
        ],
    )
    .unwrap();
    let plans = HashMap::from([
        ("s".to_string(), "strdict".parse::<Plan>().unwrap()),
        ("b".to_string(), "strdict".parse::<Plan>().unwrap()),
    ]);
    let options = WriteOptions {
        chunk_rows: 1024,
        plans,
        ..common::selected()
    };
    write(&path, &batch, 5000, options);
    let file = ZfFile::open(&path).unwrap();
    assert_eq!(read_all(&file), batch);
    let mut pool = zipflow_format::ArrayPool::default();
    let mut row = 0;
    for i in 0..file.num_chunks() {
        for c in 0..2 {
            let a = file.read_array_in(c, i, &mut pool).unwrap();
            assert_eq!(a.as_ref(), batch.column(c).slice(row, a.len()).as_ref());
            pool.recycle(a);
        }
        row += file.chunk_meta(0, i).rows as usize;
    }
}

#[test]
fn streamed_decimals_and_views_equal_decoded_ones() {
    // Decimal128 and view columns without nulls read through the streaming fast paths; every
    // plan shape they stream (and some they decode whole) must give what the decoder gives.
    let dir = tempfile::tempdir().unwrap();
    let n = 5000;
    let mut rng = common::Rng(23);
    let prices: Vec<i128> = (0..n)
        .map(|_| i128::from(rng.below(100_000)) - 500)
        .collect();
    let flags = VIEW_STRINGS;
    let words: Vec<&str> = (0..n).map(|i| flags[(i * i + 3) % flags.len()]).collect();
    let decimal_plans = [
        "bitpack",
        "for | bitpack",
        "dict(codes: bitpack)",
        "dict(codes: ans)",
        "dict(codes: bitpack(0))",
        "delta",
        "plain",
    ];
    let view_plans = [
        "strdict(codes: bitpack)",
        "strdict(codes: ans)",
        "strdict(codes: rle)",
        "strdict(codes: for | bitpack)",
        "words",
        "words(codes: bitpack, dict: strdict)",
    ];
    for (k, (dp, vp)) in decimal_plans
        .iter()
        .zip(view_plans.iter().cycle())
        .enumerate()
    {
        let small = k == 4;
        let values: Vec<i128> = if small { vec![1234; n] } else { prices.clone() };
        let schema = Arc::new(Schema::new(vec![
            Field::new("d", DataType::Decimal128(15, 2), false),
            Field::new("s", DataType::Utf8View, false),
        ]));
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(
                    Decimal128Array::from(values)
                        .with_precision_and_scale(15, 2)
                        .unwrap(),
                ),
                Arc::new(StringViewArray::from(words.clone())),
            ],
        )
        .unwrap();
        let path = dir.path().join(format!("s{k}.zf"));
        let options = WriteOptions {
            chunk_rows: 2048,
            plans: HashMap::from([
                ("d".to_string(), dp.parse::<Plan>().unwrap()),
                ("s".to_string(), vp.parse::<Plan>().unwrap()),
            ]),
            ..common::selected()
        };
        write(&path, &batch, 1500, options);
        let file = ZfFile::open(&path).unwrap();
        let mut pool = zipflow_format::ArrayPool::default();
        let mut scratch = Scratch::default();
        let mut row = 0;
        for i in 0..file.num_chunks() {
            for c in 0..2 {
                let field = file.arrow_schema().field(c).clone();
                let (values, validity) = file.read_chunk(c, i, &mut scratch).unwrap();
                let ty = file.columns()[c].column_type;
                let decoded =
                    zipflow_format::arrow::from_column(&field, ty, values, validity).unwrap();
                let pooled = file.read_array_in(c, i, &mut pool).unwrap();
                let fresh = file.read_array(c, i, &mut scratch).unwrap();
                let want = batch.column(c).slice(row, decoded.len());
                assert_eq!(decoded.as_ref(), want.as_ref(), "{dp} / {vp}, chunk {i}");
                assert_eq!(pooled.as_ref(), want.as_ref(), "{dp} / {vp}, chunk {i}");
                assert_eq!(fresh.as_ref(), want.as_ref(), "{dp} / {vp}, chunk {i}");
                pool.recycle(pooled);
            }
            row += file.chunk_meta(0, i).rows as usize;
        }
        assert_eq!(row, n);
    }
}
