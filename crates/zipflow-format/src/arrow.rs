//! Arrow arrays to zipflow value streams and back.
//!
//! [`to_column`] turns one Arrow array into a [`ColumnType`], a [`Values`] stream and (if it
//! has nulls) a [`Validity`]; [`from_column`] turns them back into an array of exactly the
//! field's `DataType`. The stored stream is the column's physical representation:
//!
//! | Arrow type | column type | stream |
//! | --- | --- | --- |
//! | Boolean | bool | u8 (0 / 1) |
//! | Int8..Int64, UInt8..UInt64 | int | the same integers |
//! | Float32, Float64 | float | f32, f64 |
//! | Date32 | date32 | i32 |
//! | Date64 | timestamp(ms) | i64 |
//! | Timestamp(unit, tz) | timestamp(unit) | i64 |
//! | Time32, Time64, Duration | int | i32, i64 |
//! | Decimal32/64/128/256(p, s) | decimal(min(p, 18), s) | i64 (unscaled) |
//! | Utf8, LargeUtf8, Utf8View | utf8 | byte strings |
//! | Binary, LargeBinary, BinaryView | binary | byte strings |
//! | Dictionary(K, V) | V's | V's (the dictionary is rebuilt on read) |
//!
//! The exact Arrow type (string offsets width, views, dictionary key type, time zone, declared
//! decimal precision) lives in the Arrow schema of the file, so it comes back exactly.
//!
//! A null slot stores the previous valid value (0 before the first), which keeps runs and
//! bit widths as they are; null strings store the empty string, which costs nothing.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BinaryViewArray, BooleanArray, GenericByteArray, GenericStringArray,
    OffsetSizeTrait, PrimitiveArray, StringViewArray,
};
use arrow::buffer::{BooleanBuffer, Buffer, NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow::datatypes::{
    ArrowPrimitiveType, ByteArrayType, DataType, Date32Type, Date64Type, Decimal32Type,
    Decimal64Type, Decimal128Type, Decimal256Type, DecimalType, DurationMicrosecondType,
    DurationMillisecondType, DurationNanosecondType, DurationSecondType, Field, Float32Type,
    Float64Type, GenericBinaryType, Int8Type, Int16Type, Int32Type, Int64Type,
    Time32MillisecondType, Time32SecondType, Time64MicrosecondType, Time64NanosecondType,
    TimeUnit as ArrowTimeUnit, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, TimestampSecondType, UInt8Type, UInt16Type, UInt32Type, UInt64Type,
    i256,
};
use zipflow_core::types::TimeUnit;
use zipflow_core::values::ByteStrings;
use zipflow_core::{ColumnType, Error, IntVec, PType, Result, Values};
use zipflow_encodings::rowindex::RowIndex;
use zipflow_encodings::{NodeView, Scratch, views};

use crate::file::Validity;

fn unsupported_type(name: &str, dt: &DataType) -> Error {
    Error::unsupported(format!("column `{name}`: type {dt} is not supported"))
}

fn time_unit(u: &ArrowTimeUnit) -> TimeUnit {
    match u {
        ArrowTimeUnit::Second => TimeUnit::Second,
        ArrowTimeUnit::Millisecond => TimeUnit::Millisecond,
        ArrowTimeUnit::Microsecond => TimeUnit::Microsecond,
        ArrowTimeUnit::Nanosecond => TimeUnit::Nanosecond,
    }
}

fn decimal(precision: u8, scale: i8) -> ColumnType {
    // Values are stored as i64, which holds every 18-digit number; a wider declared precision
    // stays in the Arrow schema and each value is checked to fit when it is written.
    ColumnType::Decimal {
        precision: precision.clamp(1, 18),
        scale,
    }
}

/// The column type a field is stored as, or [`Error::Unsupported`] naming the column and type.
pub fn column_type(field: &Field) -> Result<ColumnType> {
    storage_type(field.name(), field.data_type())
}

fn storage_type(name: &str, dt: &DataType) -> Result<ColumnType> {
    Ok(match dt {
        DataType::Boolean => ColumnType::Bool,
        DataType::Int8 => ColumnType::Int(PType::I8),
        DataType::Int16 => ColumnType::Int(PType::I16),
        DataType::Int32 => ColumnType::Int(PType::I32),
        DataType::Int64 => ColumnType::Int(PType::I64),
        DataType::UInt8 => ColumnType::Int(PType::U8),
        DataType::UInt16 => ColumnType::Int(PType::U16),
        DataType::UInt32 => ColumnType::Int(PType::U32),
        DataType::UInt64 => ColumnType::Int(PType::U64),
        DataType::Float32 => ColumnType::Float(PType::F32),
        DataType::Float64 => ColumnType::Float(PType::F64),
        DataType::Date32 => ColumnType::Date32,
        DataType::Date64 => ColumnType::Timestamp(TimeUnit::Millisecond),
        DataType::Timestamp(u, _) => ColumnType::Timestamp(time_unit(u)),
        DataType::Time32(ArrowTimeUnit::Second | ArrowTimeUnit::Millisecond) => {
            ColumnType::Int(PType::I32)
        }
        DataType::Time64(ArrowTimeUnit::Microsecond | ArrowTimeUnit::Nanosecond)
        | DataType::Duration(_) => ColumnType::Int(PType::I64),
        DataType::Decimal32(p, s)
        | DataType::Decimal64(p, s)
        | DataType::Decimal128(p, s)
        | DataType::Decimal256(p, s) => decimal(*p, *s),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => ColumnType::Utf8,
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => ColumnType::Binary,
        DataType::Dictionary(_, v) => match storage_type(name, v) {
            Ok(t) => t,
            Err(_) => return Err(unsupported_type(name, dt)),
        },
        _ => return Err(unsupported_type(name, dt)),
    })
}

/// Replaces every null slot with the previous valid value (the default before the first).
fn fill_nulls<T: Copy + Default>(v: &mut [T], nulls: Option<&NullBuffer>) {
    let Some(nulls) = nulls.filter(|n| n.null_count() > 0) else {
        return;
    };
    let mut prev = T::default();
    let mut filled_to = 0;
    for (start, end) in nulls.inner().set_slices() {
        if let Some(gap) = v.get_mut(filled_to..start) {
            gap.fill(prev);
        }
        if let Some(&last) = end.checked_sub(1).and_then(|i| v.get(i)) {
            prev = last;
        }
        filled_to = end;
    }
    if let Some(rest) = v.get_mut(filled_to..) {
        rest.fill(prev);
    }
}

fn primitive<T: ArrowPrimitiveType>(array: &dyn Array) -> Result<Vec<T::Native>>
where
    T::Native: Default,
{
    let a = array.as_primitive_opt::<T>().ok_or_else(|| {
        Error::invalid(format!("array of {} is not primitive", array.data_type()))
    })?;
    let mut v = a.values().to_vec();
    fill_nulls(&mut v, a.nulls());
    Ok(v)
}

fn ints<T: ArrowPrimitiveType>(
    array: &dyn Array,
    wrap: fn(Vec<T::Native>) -> IntVec,
) -> Result<Values>
where
    T::Native: Default,
{
    Ok(Values::Int(wrap(primitive::<T>(array)?)))
}

fn widen<T: ArrowPrimitiveType>(array: &dyn Array) -> Result<Values>
where
    T::Native: Default + Into<i64>,
{
    let v = primitive::<T>(array)?;
    Ok(Values::Int(IntVec::I64(
        v.into_iter().map(Into::into).collect(),
    )))
}

fn narrow<T: ArrowPrimitiveType>(
    name: &str,
    array: &dyn Array,
    to_i64: fn(T::Native) -> Option<i64>,
) -> Result<Values>
where
    T::Native: Default + std::fmt::Display,
{
    let v = primitive::<T>(array)?;
    let mut out = Vec::with_capacity(v.len());
    for x in v {
        let Some(y) = to_i64(x) else {
            return Err(Error::unsupported(format!(
                "column `{name}`: {} value {x} (unscaled) does not fit in 64 bits; \
                 zipflow stores decimals as scaled 64-bit integers",
                array.data_type()
            )));
        };
        out.push(y);
    }
    Ok(Values::Int(IntVec::I64(out)))
}

/// Byte strings from Arrow offsets and data; null slots become empty strings.
fn strings_from_offsets<O: OffsetSizeTrait>(
    offsets: &[O],
    data: &[u8],
    nulls: Option<&NullBuffer>,
) -> ByteStrings {
    let (Some(first), Some(last)) = (offsets.first(), offsets.last()) else {
        return ByteStrings {
            offsets: vec![0],
            data: Vec::new(),
        };
    };
    let base = first.as_usize();
    match nulls.filter(|n| n.null_count() > 0) {
        None => ByteStrings {
            offsets: offsets
                .iter()
                .map(|o| (o.as_usize() - base) as u64)
                .collect(),
            data: data[base..last.as_usize()].to_vec(),
        },
        Some(nulls) => {
            let mut out = ByteStrings {
                offsets: Vec::with_capacity(offsets.len()),
                data: Vec::with_capacity(last.as_usize() - base),
            };
            out.offsets.push(0);
            for (i, w) in offsets.windows(2).enumerate() {
                if nulls.is_valid(i) {
                    out.data
                        .extend_from_slice(&data[w[0].as_usize()..w[1].as_usize()]);
                }
                out.offsets.push(out.data.len() as u64);
            }
            out
        }
    }
}

fn byte_array<T: ByteArrayType>(array: &dyn Array) -> Result<Values> {
    let a = array.as_bytes_opt::<T>().ok_or_else(|| {
        Error::invalid(format!(
            "array of {} is not a byte array",
            array.data_type()
        ))
    })?;
    Ok(Values::Bytes(strings_from_offsets(
        a.value_offsets(),
        a.value_data(),
        a.nulls(),
    )))
}

fn byte_views(array: &dyn Array) -> Result<Values> {
    let mut out = ByteStrings {
        offsets: Vec::with_capacity(array.len() + 1),
        data: Vec::new(),
    };
    out.offsets.push(0);
    let nulls = array.nulls();
    let mut push = |i: usize, value: &[u8]| {
        if nulls.is_none_or(|n| n.is_valid(i)) {
            out.data.extend_from_slice(value);
        }
        out.offsets.push(out.data.len() as u64);
    };
    if let Some(a) = array.as_string_view_opt() {
        for i in 0..a.len() {
            push(i, a.value(i).as_bytes());
        }
    } else if let Some(a) = array.as_binary_view_opt() {
        for i in 0..a.len() {
            push(i, a.value(i));
        }
    } else {
        return Err(Error::invalid(format!(
            "array of {} is not a view array",
            array.data_type()
        )));
    }
    Ok(Values::Bytes(out))
}

fn validity_of(array: &dyn Array) -> Option<Validity> {
    let nulls = array.logical_nulls()?;
    if nulls.null_count() == 0 {
        return None;
    }
    Some(nulls.iter().collect())
}

/// Converts an Arrow array of `field` into a column type, a value stream and, if the array has
/// nulls, its validity.
pub fn to_column(
    field: &Field,
    array: &dyn Array,
) -> Result<(ColumnType, Values, Option<Validity>)> {
    let name = field.name();
    let ty = column_type(field)?;
    if array.data_type() != field.data_type() {
        return Err(Error::invalid(format!(
            "column `{name}`: array of {} for a field of {}",
            array.data_type(),
            field.data_type()
        )));
    }
    if let DataType::Dictionary(_, value_type) = array.data_type() {
        let decoded = arrow::compute::cast(array, value_type)
            .map_err(|e| Error::external(format!("column `{name}`: decoding a dictionary"), e))?;
        let inner = Field::new(name, value_type.as_ref().clone(), field.is_nullable());
        return to_column(&inner, decoded.as_ref());
    }
    let values = values_of(name, array)?;
    Ok((ty, values, validity_of(array)))
}

fn values_of(name: &str, array: &dyn Array) -> Result<Values> {
    use ArrowTimeUnit as U;
    let dt = array.data_type();
    Ok(match dt {
        DataType::Boolean => {
            let a = array.as_boolean();
            let mut v: Vec<u8> = a.values().iter().map(u8::from).collect();
            fill_nulls(&mut v, a.nulls());
            Values::Int(IntVec::U8(v))
        }
        DataType::Int8 => ints::<Int8Type>(array, IntVec::I8)?,
        DataType::Int16 => ints::<Int16Type>(array, IntVec::I16)?,
        DataType::Int32 => ints::<Int32Type>(array, IntVec::I32)?,
        DataType::Int64 => ints::<Int64Type>(array, IntVec::I64)?,
        DataType::UInt8 => ints::<UInt8Type>(array, IntVec::U8)?,
        DataType::UInt16 => ints::<UInt16Type>(array, IntVec::U16)?,
        DataType::UInt32 => ints::<UInt32Type>(array, IntVec::U32)?,
        DataType::UInt64 => ints::<UInt64Type>(array, IntVec::U64)?,
        DataType::Float32 => Values::F32(primitive::<Float32Type>(array)?),
        DataType::Float64 => Values::F64(primitive::<Float64Type>(array)?),
        DataType::Date32 => ints::<Date32Type>(array, IntVec::I32)?,
        DataType::Date64 => ints::<Date64Type>(array, IntVec::I64)?,
        DataType::Timestamp(U::Second, _) => ints::<TimestampSecondType>(array, IntVec::I64)?,
        DataType::Timestamp(U::Millisecond, _) => {
            ints::<TimestampMillisecondType>(array, IntVec::I64)?
        }
        DataType::Timestamp(U::Microsecond, _) => {
            ints::<TimestampMicrosecondType>(array, IntVec::I64)?
        }
        DataType::Timestamp(U::Nanosecond, _) => {
            ints::<TimestampNanosecondType>(array, IntVec::I64)?
        }
        DataType::Time32(U::Second) => ints::<Time32SecondType>(array, IntVec::I32)?,
        DataType::Time32(U::Millisecond) => ints::<Time32MillisecondType>(array, IntVec::I32)?,
        DataType::Time64(U::Microsecond) => ints::<Time64MicrosecondType>(array, IntVec::I64)?,
        DataType::Time64(U::Nanosecond) => ints::<Time64NanosecondType>(array, IntVec::I64)?,
        DataType::Duration(U::Second) => ints::<DurationSecondType>(array, IntVec::I64)?,
        DataType::Duration(U::Millisecond) => ints::<DurationMillisecondType>(array, IntVec::I64)?,
        DataType::Duration(U::Microsecond) => ints::<DurationMicrosecondType>(array, IntVec::I64)?,
        DataType::Duration(U::Nanosecond) => ints::<DurationNanosecondType>(array, IntVec::I64)?,
        DataType::Decimal32(..) => widen::<Decimal32Type>(array)?,
        DataType::Decimal64(..) => ints::<Decimal64Type>(array, IntVec::I64)?,
        DataType::Decimal128(..) => {
            narrow::<Decimal128Type>(name, array, |x| i64::try_from(x).ok())?
        }
        DataType::Decimal256(..) => narrow::<Decimal256Type>(name, array, |x| {
            x.to_i128().and_then(|x| i64::try_from(x).ok())
        })?,
        DataType::Utf8 => byte_array::<arrow::datatypes::Utf8Type>(array)?,
        DataType::LargeUtf8 => byte_array::<arrow::datatypes::LargeUtf8Type>(array)?,
        DataType::Binary => byte_array::<GenericBinaryType<i32>>(array)?,
        DataType::LargeBinary => byte_array::<GenericBinaryType<i64>>(array)?,
        DataType::Utf8View | DataType::BinaryView => byte_views(array)?,
        _ => return Err(unsupported_type(name, dt)),
    })
}

// ---------------------------------------------------------------------------------------------
// Back to Arrow

fn mismatch(name: &str, values: &Values, dt: &DataType) -> Error {
    Error::corrupt(format!(
        "column `{name}`: a stream of {} values cannot hold {dt}",
        values.ptype()
    ))
}

macro_rules! take_ints {
    ($values:expr, $variant:ident, $name:expr, $dt:expr) => {
        match $values {
            Values::Int(IntVec::$variant(v)) => v,
            other => return Err(mismatch($name, &other, $dt)),
        }
    };
}

fn prim_array<T: ArrowPrimitiveType>(v: Vec<T::Native>, nulls: Option<NullBuffer>) -> ArrayRef {
    Arc::new(PrimitiveArray::<T>::new(ScalarBuffer::from(v), nulls))
}

fn decimal_array<T: DecimalType>(
    name: &str,
    v: Vec<T::Native>,
    nulls: Option<NullBuffer>,
    precision: u8,
    scale: i8,
) -> Result<ArrayRef> {
    let a = PrimitiveArray::<T>::new(ScalarBuffer::from(v), nulls)
        .with_precision_and_scale(precision, scale)
        .map_err(|e| Error::external(format!("column `{name}`: rebuilding decimals"), e))?;
    Ok(Arc::new(a))
}

/// Arrow offsets from byte-string offsets, which must start at 0 and never decrease.
fn arrow_offsets<O: OffsetSizeTrait>(name: &str, b: &ByteStrings) -> Result<OffsetBuffer<O>> {
    let mut prev = 0u64;
    let mut out = Vec::with_capacity(b.offsets.len());
    for (i, &o) in b.offsets.iter().enumerate() {
        if (i == 0 && o != 0) || o < prev || o > b.data.len() as u64 {
            return Err(Error::corrupt(format!(
                "column `{name}`: string offsets are not increasing within the data"
            )));
        }
        prev = o;
        let o = usize::try_from(o)
            .ok()
            .and_then(O::from_usize)
            .ok_or_else(|| {
                Error::unsupported(format!(
                    "column `{name}`: a chunk of more than 2 GiB of string data needs a Large type"
                ))
            })?;
        out.push(o);
    }
    if b.offsets.last().copied().unwrap_or(0) != b.data.len() as u64 {
        return Err(Error::corrupt(format!(
            "column `{name}`: string offsets do not end at the end of the data"
        )));
    }
    // Checked above: starts at 0, non-decreasing, so `OffsetBuffer::new`'s checks hold.
    Ok(OffsetBuffer::new(ScalarBuffer::from(out)))
}

fn bytes_array<O: OffsetSizeTrait>(
    name: &str,
    b: ByteStrings,
    nulls: Option<NullBuffer>,
    utf8: bool,
) -> Result<ArrayRef> {
    let offsets = arrow_offsets::<O>(name, &b)?;
    let data = Buffer::from_vec(b.data);
    let arr: Result<ArrayRef, _> = if utf8 {
        GenericStringArray::<O>::try_new(offsets, data, nulls).map(|a| Arc::new(a) as ArrayRef)
    } else {
        GenericByteArray::<GenericBinaryType<O>>::try_new(offsets, data, nulls)
            .map(|a| Arc::new(a) as ArrayRef)
    };
    arr.map_err(|e| Error::external(format!("column `{name}`: rebuilding strings"), e))
}

/// A string or binary array with offsets of type `O` taken from `reuse`.
fn string_array_pooled<O: OffsetSizeTrait>(
    name: &str,
    b: ByteStrings,
    nulls: Option<NullBuffer>,
    utf8: bool,
    reuse: &mut Reuse<'_>,
) -> Result<ArrayRef> {
    let last = b.offsets.last().copied().unwrap_or(0);
    if matches!(reuse, Reuse::None)
        || O::from_usize(last as usize).is_none()
        || b.offsets.first() != Some(&0)
    {
        return bytes_array::<O>(name, b, nulls, utf8);
    }
    let mut offsets: Vec<O> = reuse.offsets::<O>(b.offsets.len());
    // One pass, without branches, narrows and checks: offsets that never decrease and end
    // at `last`, which fits `O`, all fit `O`.
    let mut backwards = false;
    let mut prev = 0u64;
    offsets.extend(b.offsets.iter().map(|&o| {
        backwards |= o < prev;
        prev = o;
        O::usize_as(o as usize)
    }));
    if backwards {
        return Err(Error::corrupt(format!(
            "column `{name}`: string offsets run backwards"
        )));
    }
    let ByteStrings {
        offsets: wide,
        data,
    } = b;
    reuse.give(Values::Bytes(ByteStrings {
        offsets: wide,
        data: Vec::new(),
    }));
    // Offsets checked above: start at 0, never decrease, all fit `O`.
    let offsets = OffsetBuffer::new(ScalarBuffer::from(offsets));
    let data = Buffer::from_vec(data);
    let arr: Result<ArrayRef, _> = if utf8 {
        GenericStringArray::<O>::try_new(offsets, data, nulls).map(|a| Arc::new(a) as ArrayRef)
    } else {
        GenericByteArray::<GenericBinaryType<O>>::try_new(offsets, data, nulls)
            .map(|a| Arc::new(a) as ArrayRef)
    };
    arr.map_err(|e| Error::external(format!("column `{name}`: rebuilding strings"), e))
}

/// A string or binary view array straight from a `strdict` node (checked by
/// `zipflow_encodings::strdict::View::parse`, which gives its row `index`) and its decoded
/// dictionary: one view per dictionary entry, then one 16-byte view per row gathered by code
/// as the codes stream, with the dictionary's bytes as the only data buffer. No row's bytes
/// are copied, and the codes are never written out whole. The row index, if any, is checked
/// against the rows' lengths.
pub fn dict_view_array(
    name: &str,
    node: &NodeView<'_>,
    index: Option<RowIndex<'_>>,
    dict: ByteStrings,
    utf8: bool,
    views: Vec<u128>,
    scratch: &mut Scratch,
) -> Result<ArrayRef> {
    let bad = |what: &str| Error::corrupt(format!("column `{name}`: {what}"));
    let (codes, rows) = (&node.children[0], node.len);
    if u32::try_from(dict.data.len()).is_err() {
        return Err(Error::unsupported(format!(
            "column `{name}`: a string dictionary over 4 GiB"
        )));
    }
    if utf8 {
        std::str::from_utf8(&dict.data).map_err(|_| bad("strings are not valid UTF-8"))?;
    }
    let data = &dict.data;
    let mut entry_views = Vec::with_capacity(dict.len());
    let (built, mid_char) = views::push_views_checked(data, &dict.offsets, &mut entry_views);
    if built != dict.len() {
        return Err(bad("dictionary offsets run backwards or past the data"));
    }
    // Entries lie end to end, so each one's end is the next one's start, or the last offset.
    let last = dict.offsets.last().map_or(0, |&o| o as usize);
    if utf8 && (mid_char || data.get(last).is_some_and(|&c| (0x80..0xc0).contains(&c))) {
        return Err(bad("a dictionary string splits a UTF-8 character"));
    }
    let mut views = views;
    views.clear();
    views.reserve(rows);
    let entries = entry_views.len();
    zipflow_encodings::runs::for_each_run::<u32>(codes, scratch, |run| {
        // One vectorised pass checks the run, so the gather needs no check per row.
        if run
            .iter()
            .copied()
            .max()
            .is_some_and(|m| m as usize >= entries)
        {
            return Err(bad("a string code lies outside its dictionary"));
        }
        if views.len() + run.len() > rows {
            return Err(bad("more string codes than rows"));
        }
        let (src, dst) = (entry_views.as_ptr(), views.as_mut_ptr());
        let at = views.len();
        for (i, &c) in run.iter().enumerate() {
            // SAFETY: `c < entries` (checked above), and `at + i < rows`, the capacity.
            unsafe { dst.add(at + i).write(src.add(c as usize).read()) };
        }
        // SAFETY: the loop initialised the views up to `at + run.len()`.
        unsafe { views.set_len(at + run.len()) };
        Ok(())
    })?;
    if views.len() != rows {
        return Err(bad("fewer string codes than rows"));
    }
    if let Some(index) = index {
        // A view's first four bytes are its string's length.
        let lengths = views.iter().map(|&v| u64::from(v as u32));
        index.verify_lengths("strdict", lengths)?;
    }
    let buffers: Arc<[Buffer]> = Arc::from(vec![Buffer::from_vec(dict.data)]);
    let views = ScalarBuffer::from(views);
    // SAFETY: every view is a copy of an entry view built above from a range checked to lie
    // inside buffer 0 (the dictionary's bytes), with its length, inline bytes or 4-byte prefix
    // copied from that range; for UTF-8 the whole buffer was validated and every entry starts
    // and ends on a character boundary.
    Ok(unsafe {
        if utf8 {
            Arc::new(StringViewArray::new_unchecked(views, buffers, None)) as ArrayRef
        } else {
            Arc::new(BinaryViewArray::new_unchecked(views, buffers, None)) as ArrayRef
        }
    })
}

/// A string or binary array with offsets of type `O` straight from a `strdict` node
/// (checked by `zipflow_encodings::strdict::View::parse`, which gives its row `index`) and
/// its decoded dictionary: the dictionary is checked once (UTF-8, and every entry starting on
/// a character boundary), then the rows are gathered by code
/// ([`zipflow_encodings::strdict::gather`]). Rows made of whole checked entries are valid
/// UTF-8 with every offset on a character boundary, so the rows' bytes are not validated
/// again, as a generic string column's are. The row index, if any, is checked against the
/// rows' lengths.
pub fn dict_string_array<O: OffsetSizeTrait>(
    name: &str,
    node: &NodeView<'_>,
    index: Option<RowIndex<'_>>,
    dict: ByteStrings,
    utf8: bool,
    scratch: &mut Scratch,
) -> Result<ArrayRef> {
    let bad = |what: &str| Error::corrupt(format!("column `{name}`: {what}"));
    let ends_ok = dict.offsets.first() == Some(&0)
        && dict.offsets.last() == Some(&(dict.data.len() as u64))
        && dict.offsets.windows(2).all(|w| w[0] <= w[1]);
    if !ends_ok {
        return Err(bad("dictionary offsets run backwards or past the data"));
    }
    if utf8 {
        let text =
            std::str::from_utf8(&dict.data).map_err(|_| bad("strings are not valid UTF-8"))?;
        if !dict
            .offsets
            .iter()
            .all(|&o| text.is_char_boundary(o as usize))
        {
            return Err(bad("a dictionary string splits a UTF-8 character"));
        }
    }
    let codes = scratch.decode(&node.children[0])?;
    let mut rows = match scratch.take(PType::Bytes) {
        Values::Bytes(b) => b,
        other => {
            scratch.give(other);
            ByteStrings::default()
        }
    };
    let gathered = match &codes {
        Values::Int(IntVec::U32(c)) if c.len() == node.len => {
            zipflow_encodings::strdict::gather(c, &dict, &mut rows)
        }
        _ => Err(bad("string codes of the wrong type or count")),
    };
    scratch.give(codes);
    scratch.give(Values::Bytes(dict));
    gathered?;
    if let Some(index) = index {
        let lengths = rows.offsets.windows(2).map(|w| w[1] - w[0]);
        index.verify_lengths("strdict", lengths)?;
    }
    let total = rows.data.len();
    if O::from_usize(total).is_none() {
        return Err(Error::unsupported(format!(
            "column `{name}`: a chunk of more than 2 GiB of string data needs a Large type"
        )));
    }
    // `gather` wrote offsets from 0, never decreasing, ending at the data's length, which
    // fits `O`: narrowing each is exact.
    let offsets: Vec<O> = rows
        .offsets
        .iter()
        .map(|&o| O::usize_as(o as usize))
        .collect();
    let data = Buffer::from_vec(std::mem::take(&mut rows.data));
    scratch.give(Values::Bytes(rows));
    let offsets = OffsetBuffer::new(ScalarBuffer::from(offsets));
    // SAFETY: the offsets start at 0, never decrease and end at the data's length (built so
    // by `gather`); for UTF-8 every row is whole dictionary entries, the dictionary valid
    // UTF-8 with every entry starting on a character boundary (checked above), so the data
    // is valid UTF-8 and every offset lies on a character boundary.
    Ok(unsafe {
        if utf8 {
            Arc::new(GenericStringArray::<O>::new_unchecked(offsets, data, None)) as ArrayRef
        } else {
            Arc::new(GenericByteArray::<GenericBinaryType<O>>::new_unchecked(
                offsets, data, None,
            )) as ArrayRef
        }
    })
}

/// A `Decimal128` array from the values tree of a chunk of scaled `i64` integers without nulls:
/// the integers stream a vector at a time into the 16-byte output, written into `wide`
/// (emptied first; its capacity is reused).
pub fn wide_decimal_array(
    name: &str,
    node: &NodeView<'_>,
    precision: u8,
    scale: i8,
    scratch: &mut Scratch,
    mut wide: Vec<i128>,
) -> Result<ArrayRef> {
    wide.clear();
    wide.reserve(node.len);
    zipflow_encodings::runs::for_each_run::<i64>(node, scratch, |run| {
        if wide.len() + run.len() > node.len {
            return Err(Error::corrupt("more values than the node holds"));
        }
        wide.extend(run.iter().map(|&x| i128::from(x)));
        Ok(())
    })?;
    if wide.len() != node.len {
        return Err(Error::corrupt("fewer values than the node holds"));
    }
    decimal_array::<Decimal128Type>(name, wide, None, precision, scale)
}

/// A string or binary view array over one data buffer, with no nulls.
///
/// # Safety
/// Every view must describe a range inside `data` (or inline its bytes), in the layout of
/// [`zipflow_encodings::views`]; with `utf8`, every string must be valid UTF-8.
pub(crate) unsafe fn views_array(views: Vec<u128>, data: Vec<u8>, utf8: bool) -> ArrayRef {
    let buffers: Arc<[Buffer]> = Arc::from(vec![Buffer::from_vec(data)]);
    let views = ScalarBuffer::from(views);
    // SAFETY: the caller's contract.
    unsafe {
        if utf8 {
            Arc::new(StringViewArray::new_unchecked(views, buffers, None)) as ArrayRef
        } else {
            Arc::new(BinaryViewArray::new_unchecked(views, buffers, None)) as ArrayRef
        }
    }
}

/// Builds a string or binary view array straight from offsets: one pass writes the 16-byte
/// views (short strings inline, long ones as prefix + offset into the single data buffer).
fn view_array(
    name: &str,
    b: ByteStrings,
    nulls: Option<NullBuffer>,
    utf8: bool,
    reuse: &mut Reuse<'_>,
) -> Result<ArrayRef> {
    if u32::try_from(b.data.len()).is_err() {
        // Views address at most 4 GiB per buffer: go through the offset form.
        let plain = bytes_array::<i64>(name, b, nulls, utf8)?;
        let dt = if utf8 {
            DataType::Utf8View
        } else {
            DataType::BinaryView
        };
        return cast_to(name, &plain, &dt);
    }
    let bad = |what: &str| Error::corrupt(format!("column `{name}`: {what}"));
    if utf8 {
        std::str::from_utf8(&b.data).map_err(|_| bad("strings are not valid UTF-8"))?;
    }
    let (data, offsets) = (&b.data, &b.offsets);
    if offsets.is_empty() {
        return Err(bad("string offsets are empty"));
    }
    // One branch-free pass checks every range, so the view loop below needs no check per string.
    let backwards = offsets[1..]
        .iter()
        .zip(offsets.iter())
        .fold(false, |bad, (&end, &start)| bad | (end < start));
    if backwards || offsets.last().is_some_and(|&o| o > data.len() as u64) {
        return Err(bad("string offsets run backwards or past the data"));
    }
    let mut views: Vec<u128> = reuse.u128s(b.len());
    let (fast, fast_mid) = views::push_views(data, offsets, &mut views);
    let (rest, rest_mid) = views::push_views_checked(data, &offsets[fast..], &mut views);
    if fast + rest != b.len() {
        return Err(bad("string offsets run backwards or past the data"));
    }
    let mid_char = fast_mid || rest_mid;
    let start = *offsets.last().unwrap_or(&0) as usize;
    if utf8 && (mid_char || data.len() > start && (0x80..0xc0).contains(&data[start])) {
        return Err(bad("a string starts or ends inside a UTF-8 character"));
    }
    let views = ScalarBuffer::from(views);
    let ByteStrings { offsets, data } = b;
    reuse.give(Values::Bytes(ByteStrings {
        offsets,
        data: Vec::new(),
    }));
    let buffers: Arc<[Buffer]> = Arc::from(vec![Buffer::from_vec(data)]);
    // SAFETY: every view was built above from a range checked to lie inside buffer 0, with
    // its length, inline bytes or 4-byte prefix copied from that range; for UTF-8 the whole
    // buffer was validated and every string starts and ends on a character boundary, so each
    // string is valid UTF-8 on its own.
    Ok(unsafe {
        if utf8 {
            Arc::new(StringViewArray::new_unchecked(views, buffers, nulls)) as ArrayRef
        } else {
            Arc::new(BinaryViewArray::new_unchecked(views, buffers, nulls)) as ArrayRef
        }
    })
}

/// Validity flags as Arrow's null buffer, packed 64 flags at a time.
fn null_buffer(flags: &[bool]) -> NullBuffer {
    NullBuffer::new(arrow::buffer::BooleanBuffer::collect_bool(
        flags.len(),
        |i| flags[i],
    ))
}

/// Builds an array of exactly `field`'s data type from a decoded stream and its validity.
pub fn from_column(
    field: &Field,
    ty: ColumnType,
    values: Values,
    validity: Option<Validity>,
) -> Result<ArrayRef> {
    let name = field.name();
    let dt = field.data_type();
    let expected = column_type(field)?;
    if expected != ty {
        return Err(Error::corrupt(format!(
            "column `{name}` is stored as {ty}, its Arrow type {dt} needs {expected}"
        )));
    }
    if let Some(v) = &validity
        && v.len() != values.len()
    {
        return Err(Error::corrupt(format!(
            "column `{name}`: validity of {} rows for {} values",
            v.len(),
            values.len()
        )));
    }
    let nulls = validity.as_deref().map(null_buffer);
    array_of(name, dt, values, nulls, &mut Reuse::None)
}

/// Like [`from_column`], taking the buffers that conversions need (decimals widened to i128,
/// string offsets narrowed to i32, string views) from `pool`, and handing the decoded stream's
/// leftover buffers back to it.
pub fn from_column_in(
    field: &Field,
    ty: ColumnType,
    values: Values,
    validity: Option<Validity>,
    pool: &mut ArrayPool,
) -> Result<ArrayRef> {
    let expected = column_type(field)?;
    if expected != ty {
        return Err(Error::corrupt(format!(
            "column `{}` is stored as {ty}, its Arrow type {} needs {expected}",
            field.name(),
            field.data_type()
        )));
    }
    if let Some(v) = &validity
        && v.len() != values.len()
    {
        return Err(Error::corrupt(format!(
            "column `{}`: validity of {} rows for {} values",
            field.name(),
            v.len(),
            values.len()
        )));
    }
    let nulls = validity.as_deref().map(null_buffer);
    array_of(
        field.name(),
        field.data_type(),
        values,
        nulls,
        &mut Reuse::Pool(pool),
    )
}

/// Reusable allocations for reading chunk after chunk as Arrow arrays without fresh memory
/// (and its page faults) each time: read with [`crate::ZfFile::read_array_in`], and hand each
/// array back with [`ArrayPool::recycle`] once it is no longer needed.
#[derive(Debug, Default)]
pub struct ArrayPool {
    /// Decoding buffers, also where recycled value buffers go.
    pub scratch: zipflow_encodings::Scratch,
    pub(crate) i128s: Vec<Vec<i128>>,
    pub(crate) u128s: Vec<Vec<u128>>,
    i32s: Vec<Vec<i32>>,
    i64s: Vec<Vec<i64>>,
    bytes: Vec<Vec<u8>>,
}

/// Keeps at most this many buffers of each kind.
const POOL_DEPTH: usize = 8;

fn keep<T>(pool: &mut Vec<Vec<T>>, v: Vec<T>) {
    if pool.len() < POOL_DEPTH {
        pool.push(v);
    }
}

impl ArrayPool {
    /// Takes back the buffers of an array this pool's reads produced (or any array whose
    /// buffers are not shared); arrays still referenced elsewhere are simply dropped.
    pub fn recycle(&mut self, array: ArrayRef) {
        let data = array.to_data();
        drop(array);
        let (dt, _, _, offset, mut buffers, _) = data.into_parts();
        if offset != 0 || buffers.is_empty() {
            return;
        }
        let first = buffers.remove(0);
        let give = |scratch: &mut zipflow_encodings::Scratch, v: Values| scratch.give(v);
        match dt {
            DataType::Int8 => {
                if let Ok(v) = first.into_vec::<i8>() {
                    give(&mut self.scratch, Values::Int(IntVec::I8(v)));
                }
            }
            DataType::Int16 => {
                if let Ok(v) = first.into_vec::<i16>() {
                    give(&mut self.scratch, Values::Int(IntVec::I16(v)));
                }
            }
            DataType::Int32 | DataType::Date32 | DataType::Time32(_) => {
                if let Ok(v) = first.into_vec::<i32>() {
                    give(&mut self.scratch, Values::Int(IntVec::I32(v)));
                }
            }
            DataType::Int64
            | DataType::Date64
            | DataType::Time64(_)
            | DataType::Timestamp(..)
            | DataType::Duration(_)
            | DataType::Decimal64(..) => {
                if let Ok(v) = first.into_vec::<i64>() {
                    give(&mut self.scratch, Values::Int(IntVec::I64(v)));
                }
            }
            DataType::UInt8 => {
                if let Ok(v) = first.into_vec::<u8>() {
                    give(&mut self.scratch, Values::Int(IntVec::U8(v)));
                }
            }
            DataType::UInt16 => {
                if let Ok(v) = first.into_vec::<u16>() {
                    give(&mut self.scratch, Values::Int(IntVec::U16(v)));
                }
            }
            DataType::UInt32 => {
                if let Ok(v) = first.into_vec::<u32>() {
                    give(&mut self.scratch, Values::Int(IntVec::U32(v)));
                }
            }
            DataType::UInt64 => {
                if let Ok(v) = first.into_vec::<u64>() {
                    give(&mut self.scratch, Values::Int(IntVec::U64(v)));
                }
            }
            DataType::Float32 => {
                if let Ok(v) = first.into_vec::<f32>() {
                    give(&mut self.scratch, Values::F32(v));
                }
            }
            DataType::Float64 => {
                if let Ok(v) = first.into_vec::<f64>() {
                    give(&mut self.scratch, Values::F64(v));
                }
            }
            DataType::Decimal128(..) => {
                if let Ok(v) = first.into_vec::<i128>() {
                    keep(&mut self.i128s, v);
                }
            }
            DataType::Utf8 | DataType::Binary => {
                if let Ok(v) = first.into_vec::<i32>() {
                    keep(&mut self.i32s, v);
                }
                self.keep_data(buffers);
            }
            DataType::LargeUtf8 | DataType::LargeBinary => {
                if let Ok(v) = first.into_vec::<i64>() {
                    keep(&mut self.i64s, v);
                }
                self.keep_data(buffers);
            }
            DataType::Utf8View | DataType::BinaryView => {
                if let Ok(v) = first.into_vec::<u128>() {
                    keep(&mut self.u128s, v);
                }
                self.keep_data(buffers);
            }
            _ => {}
        }
    }

    fn keep_data(&mut self, buffers: Vec<Buffer>) {
        for b in buffers {
            if let Ok(v) = b.into_vec::<u8>() {
                keep(&mut self.bytes, v);
            }
        }
    }

    /// Before decoding a byte-string chunk: attach a recycled data buffer to the pooled string
    /// stream the decoder will take.
    pub(crate) fn prime_strings(&mut self) {
        if let Some(data) = self.bytes.pop() {
            let mut b = match self.scratch.take(PType::Bytes) {
                Values::Bytes(b) => b,
                _ => ByteStrings::default(),
            };
            if b.data.capacity() < data.capacity() {
                b.data = data;
            }
            self.scratch.give(Values::Bytes(b));
        }
    }
}

/// Where conversions get their buffers.
enum Reuse<'a> {
    None,
    Pool(&'a mut ArrayPool),
}

impl Reuse<'_> {
    fn i128s(&mut self, n: usize) -> Vec<i128> {
        let mut v = match self {
            Reuse::Pool(p) => p.i128s.pop().unwrap_or_default(),
            Reuse::None => Vec::new(),
        };
        v.clear();
        v.reserve(n);
        v
    }
    fn u128s(&mut self, n: usize) -> Vec<u128> {
        let mut v = match self {
            Reuse::Pool(p) => p.u128s.pop().unwrap_or_default(),
            Reuse::None => Vec::new(),
        };
        v.clear();
        v.reserve(n);
        v
    }
    /// An empty offsets vector of `n` capacity: i32 and i64 ones come from the pool.
    fn offsets<O: OffsetSizeTrait>(&mut self, n: usize) -> Vec<O> {
        let mut v: Vec<O> = match self {
            Reuse::Pool(p) => {
                let any: Option<Box<dyn std::any::Any>> = if O::IS_LARGE {
                    p.i64s.pop().map(|v| Box::new(v) as Box<dyn std::any::Any>)
                } else {
                    p.i32s.pop().map(|v| Box::new(v) as Box<dyn std::any::Any>)
                };
                any.and_then(|b| b.downcast::<Vec<O>>().ok())
                    .map(|b| *b)
                    .unwrap_or_default()
            }
            Reuse::None => Vec::new(),
        };
        v.clear();
        v.reserve(n);
        v
    }
    /// Hands a converted stream's buffer back.
    fn give(&mut self, v: Values) {
        if let Reuse::Pool(p) = self {
            p.scratch.give(v);
        }
    }
}

fn array_of(
    name: &str,
    dt: &DataType,
    values: Values,
    nulls: Option<NullBuffer>,
    reuse: &mut Reuse<'_>,
) -> Result<ArrayRef> {
    use ArrowTimeUnit as U;
    Ok(match dt {
        DataType::Boolean => {
            let v = take_ints!(values, U8, name, dt);
            let bits = BooleanBuffer::from_iter(v.iter().map(|&b| b != 0));
            Arc::new(BooleanArray::new(bits, nulls))
        }
        DataType::Int8 => prim_array::<Int8Type>(take_ints!(values, I8, name, dt), nulls),
        DataType::Int16 => prim_array::<Int16Type>(take_ints!(values, I16, name, dt), nulls),
        DataType::Int32 => prim_array::<Int32Type>(take_ints!(values, I32, name, dt), nulls),
        DataType::Int64 => prim_array::<Int64Type>(take_ints!(values, I64, name, dt), nulls),
        DataType::UInt8 => prim_array::<UInt8Type>(take_ints!(values, U8, name, dt), nulls),
        DataType::UInt16 => prim_array::<UInt16Type>(take_ints!(values, U16, name, dt), nulls),
        DataType::UInt32 => prim_array::<UInt32Type>(take_ints!(values, U32, name, dt), nulls),
        DataType::UInt64 => prim_array::<UInt64Type>(take_ints!(values, U64, name, dt), nulls),
        DataType::Float32 => match values {
            Values::F32(v) => prim_array::<Float32Type>(v, nulls),
            other => return Err(mismatch(name, &other, dt)),
        },
        DataType::Float64 => match values {
            Values::F64(v) => prim_array::<Float64Type>(v, nulls),
            other => return Err(mismatch(name, &other, dt)),
        },
        DataType::Date32 => prim_array::<Date32Type>(take_ints!(values, I32, name, dt), nulls),
        DataType::Date64 => prim_array::<Date64Type>(take_ints!(values, I64, name, dt), nulls),
        DataType::Timestamp(u, tz) => {
            let v = ScalarBuffer::from(take_ints!(values, I64, name, dt));
            match u {
                U::Second => Arc::new(
                    PrimitiveArray::<TimestampSecondType>::new(v, nulls)
                        .with_timezone_opt(tz.clone()),
                ),
                U::Millisecond => Arc::new(
                    PrimitiveArray::<TimestampMillisecondType>::new(v, nulls)
                        .with_timezone_opt(tz.clone()),
                ),
                U::Microsecond => Arc::new(
                    PrimitiveArray::<TimestampMicrosecondType>::new(v, nulls)
                        .with_timezone_opt(tz.clone()),
                ),
                U::Nanosecond => Arc::new(
                    PrimitiveArray::<TimestampNanosecondType>::new(v, nulls)
                        .with_timezone_opt(tz.clone()),
                ),
            }
        }
        DataType::Time32(U::Second) => {
            prim_array::<Time32SecondType>(take_ints!(values, I32, name, dt), nulls)
        }
        DataType::Time32(U::Millisecond) => {
            prim_array::<Time32MillisecondType>(take_ints!(values, I32, name, dt), nulls)
        }
        DataType::Time64(U::Microsecond) => {
            prim_array::<Time64MicrosecondType>(take_ints!(values, I64, name, dt), nulls)
        }
        DataType::Time64(U::Nanosecond) => {
            prim_array::<Time64NanosecondType>(take_ints!(values, I64, name, dt), nulls)
        }
        DataType::Duration(U::Second) => {
            prim_array::<DurationSecondType>(take_ints!(values, I64, name, dt), nulls)
        }
        DataType::Duration(U::Millisecond) => {
            prim_array::<DurationMillisecondType>(take_ints!(values, I64, name, dt), nulls)
        }
        DataType::Duration(U::Microsecond) => {
            prim_array::<DurationMicrosecondType>(take_ints!(values, I64, name, dt), nulls)
        }
        DataType::Duration(U::Nanosecond) => {
            prim_array::<DurationNanosecondType>(take_ints!(values, I64, name, dt), nulls)
        }
        DataType::Decimal32(p, s) => {
            let v = take_ints!(values, I64, name, dt);
            let v = v
                .into_iter()
                .map(i32::try_from)
                .collect::<Result<Vec<i32>, _>>()
                .map_err(|_| {
                    Error::corrupt(format!("column `{name}`: a stored value does not fit {dt}"))
                })?;
            decimal_array::<Decimal32Type>(name, v, nulls, *p, *s)?
        }
        DataType::Decimal64(p, s) => {
            decimal_array::<Decimal64Type>(name, take_ints!(values, I64, name, dt), nulls, *p, *s)?
        }
        DataType::Decimal128(p, s) => {
            let v = take_ints!(values, I64, name, dt);
            let mut wide = reuse.i128s(v.len());
            wide.extend(v.iter().map(|&x| i128::from(x)));
            reuse.give(Values::Int(IntVec::I64(v)));
            decimal_array::<Decimal128Type>(name, wide, nulls, *p, *s)?
        }
        DataType::Decimal256(p, s) => {
            let v = take_ints!(values, I64, name, dt);
            let v = v
                .into_iter()
                .map(|x| i256::from_i128(i128::from(x)))
                .collect();
            decimal_array::<Decimal256Type>(name, v, nulls, *p, *s)?
        }
        DataType::Utf8 | DataType::Binary | DataType::LargeUtf8 | DataType::LargeBinary => {
            let Values::Bytes(b) = values else {
                return Err(mismatch(name, &values, dt));
            };
            let utf8 = matches!(dt, DataType::Utf8 | DataType::LargeUtf8);
            if matches!(dt, DataType::Utf8 | DataType::Binary) {
                string_array_pooled::<i32>(name, b, nulls, utf8, reuse)?
            } else {
                string_array_pooled::<i64>(name, b, nulls, utf8, reuse)?
            }
        }
        DataType::Utf8View | DataType::BinaryView => {
            let Values::Bytes(b) = values else {
                return Err(mismatch(name, &values, dt));
            };
            view_array(name, b, nulls, *dt == DataType::Utf8View, reuse)?
        }
        DataType::Dictionary(_, value_type) => {
            // The cast builds fresh keys and values; the plain array's buffers go back to
            // the pool for the next chunk.
            let plain = array_of(name, value_type, values, nulls, reuse)?;
            let dict = cast_to(name, &plain, dt)?;
            if let Reuse::Pool(pool) = reuse {
                pool.recycle(plain);
            }
            dict
        }
        _ => return Err(unsupported_type(name, dt)),
    })
}

fn cast_to(name: &str, array: &ArrayRef, dt: &DataType) -> Result<ArrayRef> {
    arrow::compute::cast(array, dt)
        .map_err(|e| Error::external(format!("column `{name}`: converting to {dt}"), e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int32Array, StringArray};

    #[test]
    fn nulls_take_the_previous_value() -> Result<()> {
        let a = Int32Array::from(vec![None, Some(5), None, None, Some(7), None]);
        let f = Field::new("a", DataType::Int32, true);
        let (ty, v, validity) = to_column(&f, &a)?;
        assert_eq!(ty, ColumnType::Int(PType::I32));
        assert_eq!(v, Values::Int(IntVec::I32(vec![0, 5, 5, 5, 7, 7])));
        assert_eq!(validity, Some(vec![false, true, false, false, true, false]));
        let back = from_column(&f, ty, v, validity)?;
        assert_eq!(back.as_ref(), &a as &dyn Array);
        Ok(())
    }

    #[test]
    fn sliced_strings_rebase() -> Result<()> {
        let a = StringArray::from(vec![Some("xx"), None, Some("abc"), Some(""), Some("d")]);
        let s = a.slice(1, 3);
        let f = Field::new("s", DataType::Utf8, true);
        let (ty, v, validity) = to_column(&f, &s)?;
        let Values::Bytes(b) = &v else {
            panic!("not bytes")
        };
        assert_eq!(b.offsets, vec![0, 0, 3, 3]);
        let back = from_column(&f, ty, v, validity)?;
        assert_eq!(back.as_ref(), &s as &dyn Array);
        Ok(())
    }

    #[test]
    fn unsupported_types_name_the_column() {
        let f = Field::new("x", DataType::Float16, false);
        let e = column_type(&f)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            e.contains("column `x`: type Float16 is not supported"),
            "{e}"
        );
    }

    /// `dict_string_array` over `strings` encoded as `strdict`: as `utf8` or binary, with
    /// `O` offsets.
    fn dict_strings<O: OffsetSizeTrait>(strings: &[&[u8]], utf8: bool) -> Result<ArrayRef> {
        let mut b = ByteStrings::default();
        b.offsets.push(0);
        for s in strings {
            b.data.extend_from_slice(s);
            b.offsets.push(b.data.len() as u64);
        }
        let plan: zipflow_core::Plan = "strdict"
            .parse()
            .map_err(|e| Error::invalid(format!("{e}")))?;
        let bytes = zipflow_encodings::encode(&plan, &Values::Bytes(b))?.to_bytes()?;
        let node = NodeView::parse(&bytes)?;
        let index = zipflow_encodings::strdict::View::parse(&node)?.index;
        let mut scratch = Scratch::default();
        let Values::Bytes(dict) = scratch.decode(&node.children[1])? else {
            return Err(Error::corrupt("not bytes"));
        };
        dict_string_array::<O>("s", &node, index, dict, utf8, &mut scratch)
    }

    #[test]
    fn strings_from_a_dictionary_equal_the_rows() -> Result<()> {
        let rows: Vec<&[u8]> = (0..5000)
            .map(|i| ["", "héllo", "a", "wörld, longer than sixteen bytes"][i % 4].as_bytes())
            .collect();
        let a = dict_strings::<i32>(&rows, true)?;
        let want = StringArray::from_iter_values(
            rows.iter().map(|r| std::str::from_utf8(r).unwrap_or("")),
        );
        assert_eq!(a.as_ref(), &want as &dyn Array);
        let large = dict_strings::<i64>(&rows, false)?;
        let want = arrow::array::LargeBinaryArray::from_iter_values(rows.iter().copied());
        assert_eq!(large.as_ref(), &want as &dyn Array);
        Ok(())
    }

    #[test]
    fn a_dictionary_that_is_not_utf8_is_an_error_for_strings() -> Result<()> {
        let rows: Vec<&[u8]> = vec![b"ok", b"\xff\xfe", b"ok"];
        let Err(e) = dict_strings::<i32>(&rows, true) else {
            return Err(Error::invalid("invalid UTF-8 read as strings"));
        };
        assert!(e.to_string().contains("not valid UTF-8"), "{e}");
        // As binary the same bytes are fine.
        assert_eq!(dict_strings::<i32>(&rows, false)?.len(), 3);
        Ok(())
    }
}
