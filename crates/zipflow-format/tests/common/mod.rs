//! Test tables with every supported Arrow type.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::*;
use arrow::compute::cast;
use arrow::datatypes::*;

/// A deterministic pseudo-random sequence (splitmix64).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Every supported type, with field and schema metadata.
pub fn schema() -> SchemaRef {
    let tz: Arc<str> = Arc::from("Europe/Paris");
    let fields = vec![
        Field::new("bool", DataType::Boolean, true),
        Field::new("i8", DataType::Int8, true),
        Field::new("i16", DataType::Int16, true),
        Field::new("i32", DataType::Int32, true),
        Field::new("i64", DataType::Int64, true)
            .with_metadata(HashMap::from([("unit".to_string(), "cents".to_string())])),
        Field::new("u8", DataType::UInt8, true),
        Field::new("u16", DataType::UInt16, true),
        Field::new("u32", DataType::UInt32, true),
        Field::new("u64", DataType::UInt64, true),
        Field::new("f32", DataType::Float32, true),
        Field::new("f64", DataType::Float64, true),
        Field::new("date32", DataType::Date32, true),
        Field::new("date64", DataType::Date64, true),
        Field::new(
            "ts_tz",
            DataType::Timestamp(TimeUnit::Microsecond, Some(tz)),
            true,
        ),
        Field::new("ts", DataType::Timestamp(TimeUnit::Nanosecond, None), true),
        Field::new("time32", DataType::Time32(TimeUnit::Millisecond), true),
        Field::new("time64", DataType::Time64(TimeUnit::Nanosecond), true),
        Field::new("duration", DataType::Duration(TimeUnit::Second), true),
        Field::new("dec32", DataType::Decimal32(7, 2), true),
        Field::new("dec64", DataType::Decimal64(12, 3), true),
        Field::new("dec128", DataType::Decimal128(15, 2), true),
        Field::new("dec128_wide", DataType::Decimal128(38, 4), true),
        Field::new("utf8", DataType::Utf8, true),
        Field::new("large_utf8", DataType::LargeUtf8, true),
        Field::new("utf8_view", DataType::Utf8View, true),
        Field::new("binary", DataType::Binary, true),
        Field::new("large_binary", DataType::LargeBinary, true),
        Field::new("binary_view", DataType::BinaryView, true),
        Field::new(
            "dict_utf8",
            DataType::Dictionary(Box::new(DataType::Int16), Box::new(DataType::Utf8)),
            true,
        ),
        Field::new(
            "dict_i32",
            DataType::Dictionary(Box::new(DataType::UInt8), Box::new(DataType::Int32)),
            true,
        ),
        Field::new("required", DataType::Int64, false),
    ];
    Arc::new(Schema::new_with_metadata(
        fields,
        HashMap::from([("source".to_string(), "zipflow tests".to_string())]),
    ))
}

/// `n` rows of every supported type; about one in five values null when `nulls`.
pub fn batch(n: usize, nulls: bool, seed: u64) -> RecordBatch {
    let schema = schema();
    let mut rng = Rng(seed);
    let valid: Vec<bool> = (0..n).map(|_| !nulls || rng.below(5) != 0).collect();
    let ints = |rng: &mut Rng, f: &dyn Fn(u64, usize) -> i64| -> Vec<Option<i64>> {
        (0..n).map(|i| valid[i].then(|| f(rng.next(), i))).collect()
    };
    let small = ints(&mut rng, &|r, i| (i as i64 / 7) + (r % 5) as i64 - 2);
    let wide = ints(&mut rng, &|r, _| r as i64);
    let sorted = ints(&mut rng, &|r, i| {
        1_700_000_000_000_000 + i as i64 * 1000 + (r % 10) as i64
    });
    let words = [
        "",
        "alpha",
        "beta",
        "gamma",
        "delta",
        "épsilon",
        "zeta-long-word-for-stats-over-sixty-four-bytes-aaaaaaaaaaaaaaaaaaaaa",
    ];
    let strs: Vec<Option<String>> = (0..n)
        .map(|i| valid[i].then(|| format!("{}{}", words[i % words.len()], i % 13)))
        .collect();
    let opt = |v: &Vec<Option<i64>>, i: usize| v[i];
    let arrays: Vec<ArrayRef> = vec![
        Arc::new(BooleanArray::from(
            (0..n)
                .map(|i| opt(&small, i).map(|x| x % 2 == 0))
                .collect::<Vec<_>>(),
        )),
        Arc::new(Int8Array::from(
            (0..n)
                .map(|i| opt(&wide, i).map(|x| x as i8))
                .collect::<Vec<_>>(),
        )),
        Arc::new(Int16Array::from(
            (0..n)
                .map(|i| opt(&small, i).map(|x| x as i16))
                .collect::<Vec<_>>(),
        )),
        Arc::new(Int32Array::from(
            (0..n)
                .map(|i| opt(&wide, i).map(|x| x as i32))
                .collect::<Vec<_>>(),
        )),
        Arc::new(Int64Array::from(wide.clone())),
        Arc::new(UInt8Array::from(
            (0..n)
                .map(|i| opt(&small, i).map(|x| x as u8))
                .collect::<Vec<_>>(),
        )),
        Arc::new(UInt16Array::from(
            (0..n)
                .map(|i| opt(&wide, i).map(|x| x as u16))
                .collect::<Vec<_>>(),
        )),
        Arc::new(UInt32Array::from(
            (0..n)
                .map(|i| opt(&small, i).map(|x| x as u32))
                .collect::<Vec<_>>(),
        )),
        Arc::new(UInt64Array::from(
            (0..n)
                .map(|i| opt(&wide, i).map(|x| x as u64))
                .collect::<Vec<_>>(),
        )),
        Arc::new(Float32Array::from(
            (0..n)
                .map(|i| opt(&small, i).map(|x| x as f32 * 0.25))
                .collect::<Vec<_>>(),
        )),
        Arc::new(Float64Array::from(
            (0..n)
                .map(|i| {
                    opt(&wide, i).map(|x| match i % 50 {
                        0 => f64::NAN,
                        1 => -0.0,
                        2 => f64::INFINITY,
                        _ => (x % 100_000) as f64 / 100.0,
                    })
                })
                .collect::<Vec<_>>(),
        )),
        Arc::new(Date32Array::from(
            (0..n)
                .map(|i| opt(&small, i).map(|x| 19_000 + x as i32))
                .collect::<Vec<_>>(),
        )),
        Arc::new(Date64Array::from(
            (0..n)
                .map(|i| opt(&sorted, i).map(|x| x / 1000))
                .collect::<Vec<_>>(),
        )),
        Arc::new(TimestampMicrosecondArray::from(sorted.clone()).with_timezone("Europe/Paris")),
        Arc::new(TimestampNanosecondArray::from(wide.clone())),
        Arc::new(Time32MillisecondArray::from(
            (0..n)
                .map(|i| opt(&small, i).map(|x| x as i32 * 1000))
                .collect::<Vec<_>>(),
        )),
        Arc::new(Time64NanosecondArray::from(sorted.clone())),
        Arc::new(DurationSecondArray::from(small.clone())),
        Arc::new(
            Decimal32Array::from(
                (0..n)
                    .map(|i| opt(&small, i).map(|x| x as i32 * 101))
                    .collect::<Vec<_>>(),
            )
            .with_precision_and_scale(7, 2)
            .unwrap(),
        ),
        Arc::new(
            Decimal64Array::from(
                (0..n)
                    .map(|i| opt(&wide, i).map(|x| x % 1_000_000_000))
                    .collect::<Vec<_>>(),
            )
            .with_precision_and_scale(12, 3)
            .unwrap(),
        ),
        Arc::new(
            Decimal128Array::from(
                (0..n)
                    .map(|i| opt(&small, i).map(|x| x as i128 * 99))
                    .collect::<Vec<_>>(),
            )
            .with_precision_and_scale(15, 2)
            .unwrap(),
        ),
        Arc::new(
            Decimal128Array::from(
                (0..n)
                    .map(|i| opt(&wide, i).map(i128::from))
                    .collect::<Vec<_>>(),
            )
            .with_precision_and_scale(38, 4)
            .unwrap(),
        ),
        Arc::new(StringArray::from(strs.clone())),
        Arc::new(LargeStringArray::from(strs.clone())),
        Arc::new(StringViewArray::from(
            strs.iter().map(|s| s.as_deref()).collect::<Vec<_>>(),
        )),
        Arc::new(BinaryArray::from(
            strs.iter()
                .map(|s| s.as_deref().map(str::as_bytes))
                .collect::<Vec<_>>(),
        )),
        Arc::new(LargeBinaryArray::from(
            strs.iter()
                .map(|s| s.as_deref().map(str::as_bytes))
                .collect::<Vec<_>>(),
        )),
        Arc::new(BinaryViewArray::from(
            strs.iter()
                .map(|s| s.as_deref().map(str::as_bytes))
                .collect::<Vec<_>>(),
        )),
        cast(
            &StringArray::from(
                (0..n)
                    .map(|i| valid[i].then(|| words[(i / 3) % words.len()]))
                    .collect::<Vec<_>>(),
            ),
            schema.field(28).data_type(),
        )
        .unwrap(),
        cast(
            &Int32Array::from(
                (0..n)
                    .map(|i| opt(&small, i).map(|x| (x % 40) as i32 * 1000))
                    .collect::<Vec<_>>(),
            ),
            schema.field(29).data_type(),
        )
        .unwrap(),
        Arc::new(Int64Array::from_iter_values((0..n as i64).map(|i| i * 3))),
    ];
    RecordBatch::try_new(schema, arrays).unwrap()
}

/// Write options with the selector choosing every plan, as the command line wires it.
pub fn selected() -> zipflow_format::WriteOptions {
    zipflow_format::WriteOptions {
        chooser: Some(zipflow_select::Chooser::shared(Default::default())),
        ..Default::default()
    }
}
