//! Arrow batches as a [`QueryResult`], so DataFusion's answers print exactly as the native
//! engine's do (same table layout, CSV quoting, JSON numbers).

use anyhow::{Context, Result};
use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::datatypes::{
    DataType, Date32Type, Decimal128Type, Float16Type, Float32Type, Float64Type, Int8Type,
    Int16Type, Int32Type, Int64Type, Schema, UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};
use arrow::util::display::{ArrayFormatter, FormatOptions};
use zipflow_compute::{QueryResult, SqlType, Value};

/// How a column of a given Arrow type is shown.
fn sql_type(dt: &DataType) -> SqlType {
    match dt {
        DataType::Boolean => SqlType::Bool,
        DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32
        | DataType::UInt64 => SqlType::Int,
        DataType::Float16 | DataType::Float32 | DataType::Float64 => SqlType::Float,
        DataType::Decimal32(_, s)
        | DataType::Decimal64(_, s)
        | DataType::Decimal128(_, s)
        | DataType::Decimal256(_, s)
            if *s >= 0 =>
        {
            SqlType::Decimal(s.unsigned_abs())
        }
        DataType::Date32 => SqlType::Date,
        DataType::Dictionary(_, v) => sql_type(v),
        _ => SqlType::Str,
    }
}

/// The batches of a result with schema `schema` as rows of values.
pub fn to_result(schema: &Schema, batches: &[RecordBatch]) -> Result<QueryResult> {
    let names = schema.fields().iter().map(|f| f.name().clone()).collect();
    let types: Vec<SqlType> = schema
        .fields()
        .iter()
        .map(|f| sql_type(f.data_type()))
        .collect();
    let mut rows = Vec::new();
    for batch in batches {
        let columns = batch
            .columns()
            .iter()
            .zip(&types)
            .map(|(c, &ty)| values(c, ty))
            .collect::<Result<Vec<_>>>()?;
        for r in 0..batch.num_rows() {
            rows.push(
                columns
                    .iter()
                    .map(|c| c.get(r).cloned().unwrap_or(Value::Null))
                    .collect(),
            );
        }
    }
    Ok(QueryResult { names, types, rows })
}

/// One column's values, shown as `ty`.
fn values(array: &ArrayRef, ty: SqlType) -> Result<Vec<Value>> {
    let dt = array.data_type();
    if let DataType::Dictionary(_, value) = dt {
        let plain = arrow::compute::cast(array, value).context("expanding a dictionary column")?;
        return values(&plain, ty);
    }
    let n = array.len();
    let each = |f: &dyn Fn(usize) -> Value| -> Vec<Value> {
        (0..n)
            .map(|i| if array.is_null(i) { Value::Null } else { f(i) })
            .collect()
    };
    macro_rules! ints {
        ($t:ty) => {{
            let a = array.as_primitive::<$t>();
            each(&|i| Value::Int(i64::from(a.value(i))))
        }};
    }
    macro_rules! floats {
        ($t:ty) => {{
            let a = array.as_primitive::<$t>();
            each(&|i| Value::Float(f64::from(a.value(i))))
        }};
    }
    Ok(match (dt, ty) {
        (DataType::Boolean, _) => {
            let a = array.as_boolean();
            each(&|i| Value::Bool(a.value(i)))
        }
        (DataType::Int8, _) => ints!(Int8Type),
        (DataType::Int16, _) => ints!(Int16Type),
        (DataType::Int32, _) => ints!(Int32Type),
        (DataType::Int64, _) => ints!(Int64Type),
        (DataType::UInt8, _) => ints!(UInt8Type),
        (DataType::UInt16, _) => ints!(UInt16Type),
        (DataType::UInt32, _) => ints!(UInt32Type),
        (DataType::UInt64, _) => {
            let a = array.as_primitive::<UInt64Type>();
            // Above i64::MAX: shown as a scale-0 decimal, which prints the same digits.
            each(&|i| {
                let v = a.value(i);
                i64::try_from(v).map_or(Value::Decimal(i128::from(v), 0), Value::Int)
            })
        }
        (DataType::Float16, _) => floats!(Float16Type),
        (DataType::Float32, _) => floats!(Float32Type),
        (DataType::Float64, _) => floats!(Float64Type),
        (DataType::Date32, _) => {
            let a = array.as_primitive::<Date32Type>();
            each(&|i| Value::Date(a.value(i)))
        }
        (DataType::Decimal32(..) | DataType::Decimal64(..), SqlType::Decimal(_)) => {
            let wide = DataType::Decimal128(38, i8::try_from(ty.scale()).unwrap_or(0));
            let a = arrow::compute::cast(array, &wide).context("widening a decimal column")?;
            return values(&a, ty);
        }
        (DataType::Decimal128(..), SqlType::Decimal(scale)) => {
            let a = array.as_primitive::<Decimal128Type>();
            each(&|i| Value::Decimal(a.value(i), scale))
        }
        (DataType::Utf8, _) => {
            let a = array.as_string::<i32>();
            each(&|i| Value::Str(a.value(i).to_string()))
        }
        (DataType::LargeUtf8, _) => {
            let a = array.as_string::<i64>();
            each(&|i| Value::Str(a.value(i).to_string()))
        }
        (DataType::Utf8View, _) => {
            let a = array.as_string_view();
            each(&|i| Value::Str(a.value(i).to_string()))
        }
        _ => {
            // Timestamps, times, intervals, binary, nested: Arrow's own text.
            let options = FormatOptions::default();
            let f = ArrayFormatter::try_new(array.as_ref(), &options)
                .with_context(|| format!("showing a column of type {dt}"))?;
            each(&|i| Value::Str(f.value(i).to_string()))
        }
    })
}
