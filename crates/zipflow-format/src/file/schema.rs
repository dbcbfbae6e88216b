//! The Arrow schema a file stores in its footer, as an Arrow IPC schema message.

use arrow::datatypes::Schema;
use arrow::ipc::writer::{DictionaryTracker, IpcDataGenerator, IpcWriteOptions};
use zipflow_core::{Error, Result};

/// Serialises an Arrow schema (fields, types, dictionary types, all metadata) as an Arrow IPC
/// schema message.
pub fn schema_to_ipc(schema: &Schema) -> Vec<u8> {
    let mut tracker = DictionaryTracker::new(false);
    IpcDataGenerator::default()
        .schema_to_bytes_with_dictionary_tracker(schema, &mut tracker, &IpcWriteOptions::default())
        .ipc_message
}

/// Parses [`schema_to_ipc`].
pub fn schema_from_ipc(bytes: &[u8]) -> Result<Schema> {
    check_ipc_types(bytes)?;
    // The flatbuffer is verified and its types checked before it is converted; should the
    // conversion still reach an assertion, a malformed schema is an error, not a crash.
    let parsed =
        std::panic::catch_unwind(|| arrow::ipc::convert::try_schema_from_flatbuffer_bytes(bytes));
    match parsed {
        Ok(Ok(schema)) => Ok(schema),
        Ok(Err(e)) => Err(Error::Corrupt {
            loc: Default::default(),
            what: format!("Arrow schema in the footer does not parse: {e}"),
        }),
        Err(_) => Err(Error::corrupt("Arrow schema in the footer does not parse")),
    }
}

/// Checks that every field of an IPC schema message has a type zipflow stores, with valid
/// parameters, before Arrow converts it (Arrow's conversion asserts on types it cannot
/// represent, such as an integer 0 bits wide).
fn check_ipc_types(bytes: &[u8]) -> Result<()> {
    use arrow::ipc::{DateUnit, Precision, TimeUnit as Unit, Type};
    let bad = |what: String| Error::corrupt(format!("Arrow schema in the footer: {what}"));
    let message =
        arrow::ipc::root_as_message(bytes).map_err(|e| bad(format!("does not parse: {e}")))?;
    let schema = message
        .header_as_schema()
        .ok_or_else(|| bad("the message holds no schema".into()))?;
    let fields = schema.fields().ok_or_else(|| bad("no fields".into()))?;
    let int_ok =
        |i: Option<arrow::ipc::Int>| i.is_some_and(|i| matches!(i.bitWidth(), 8 | 16 | 32 | 64));
    for (n, f) in fields.iter().enumerate() {
        let name = f.name().unwrap_or_default();
        let t = f.type_type();
        let ok = match t {
            Type::Bool | Type::Utf8 | Type::LargeUtf8 | Type::Utf8View => true,
            Type::Binary | Type::LargeBinary | Type::BinaryView => true,
            Type::Int => int_ok(f.type_as_int()),
            Type::FloatingPoint => f
                .type_as_floating_point()
                .is_some_and(|x| matches!(x.precision(), Precision::SINGLE | Precision::DOUBLE)),
            Type::Date => f
                .type_as_date()
                .is_some_and(|d| matches!(d.unit(), DateUnit::DAY | DateUnit::MILLISECOND)),
            Type::Time => f.type_as_time().is_some_and(|x| {
                matches!(
                    (x.bitWidth(), x.unit()),
                    (32, Unit::SECOND | Unit::MILLISECOND)
                        | (64, Unit::MICROSECOND | Unit::NANOSECOND)
                )
            }),
            Type::Timestamp => f.type_as_timestamp().is_some_and(|x| {
                matches!(
                    x.unit(),
                    Unit::SECOND | Unit::MILLISECOND | Unit::MICROSECOND | Unit::NANOSECOND
                )
            }),
            Type::Duration => f.type_as_duration().is_some_and(|x| {
                matches!(
                    x.unit(),
                    Unit::SECOND | Unit::MILLISECOND | Unit::MICROSECOND | Unit::NANOSECOND
                )
            }),
            Type::Decimal => {
                schema.endianness() == arrow::ipc::Endianness::Little
                    && f.type_as_decimal().is_some_and(|d| {
                        matches!(d.bitWidth(), 32 | 64 | 128 | 256)
                            && u8::try_from(d.precision()).is_ok()
                            && i8::try_from(d.scale()).is_ok()
                    })
            }
            _ => false,
        };
        let dictionary_ok = f.dictionary().is_none_or(|d| int_ok(d.indexType()));
        if !ok || !dictionary_ok || f.children().is_some_and(|c| !c.is_empty()) {
            return Err(bad(format!(
                "field {n} (`{name}`) has type {t:?}, which zipflow does not store, or invalid \
                 parameters"
            )));
        }
    }
    Ok(())
}
