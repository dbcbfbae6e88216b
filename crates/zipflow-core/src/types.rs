//! Column and stream types.
//!
//! [`PType`] is the physical type of a value stream, the thing encodings see. [`ColumnType`] is
//! what a column means to a user; each maps to one physical stream type. Both have stable
//! one-byte codes used on disk: codes are never reused.

use crate::{Error, Result};
use std::fmt;

/// Physical type of a value stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum PType {
    /// Unsigned 8-bit.
    U8 = 1,
    /// Unsigned 16-bit.
    U16 = 2,
    /// Unsigned 32-bit.
    U32 = 3,
    /// Unsigned 64-bit.
    U64 = 4,
    /// Signed 8-bit.
    I8 = 5,
    /// Signed 16-bit.
    I16 = 6,
    /// Signed 32-bit.
    I32 = 7,
    /// Signed 64-bit.
    I64 = 8,
    /// IEEE 754 binary32.
    F32 = 9,
    /// IEEE 754 binary64.
    F64 = 10,
    /// Variable-length byte strings (offsets + bytes).
    Bytes = 11,
}

impl PType {
    /// All physical types, in code order.
    pub const ALL: [PType; 11] = [
        PType::U8,
        PType::U16,
        PType::U32,
        PType::U64,
        PType::I8,
        PType::I16,
        PType::I32,
        PType::I64,
        PType::F32,
        PType::F64,
        PType::Bytes,
    ];

    /// The integer types.
    pub const INTS: [PType; 8] = [
        PType::U8,
        PType::U16,
        PType::U32,
        PType::U64,
        PType::I8,
        PType::I16,
        PType::I32,
        PType::I64,
    ];

    /// The on-disk code.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// Parses an on-disk code.
    pub fn from_code(code: u8) -> Result<Self> {
        PType::ALL
            .into_iter()
            .find(|p| p.code() == code)
            .ok_or_else(|| Error::corrupt(format!("unknown physical type code {code}")))
    }

    /// Width of one value in bytes (0 for [`PType::Bytes`]).
    pub fn byte_width(self) -> usize {
        match self {
            PType::U8 | PType::I8 => 1,
            PType::U16 | PType::I16 => 2,
            PType::U32 | PType::I32 | PType::F32 => 4,
            PType::U64 | PType::I64 | PType::F64 => 8,
            PType::Bytes => 0,
        }
    }

    /// Whether this is an integer type.
    pub fn is_int(self) -> bool {
        PType::INTS.contains(&self)
    }

    /// Whether this is a signed integer type.
    pub fn is_signed_int(self) -> bool {
        matches!(self, PType::I8 | PType::I16 | PType::I32 | PType::I64)
    }

    /// Whether this is a float type.
    pub fn is_float(self) -> bool {
        matches!(self, PType::F32 | PType::F64)
    }

    /// The unsigned integer type of the same width (floats map to their bit patterns).
    pub fn to_unsigned(self) -> PType {
        match self {
            PType::U8 | PType::I8 => PType::U8,
            PType::U16 | PType::I16 => PType::U16,
            PType::U32 | PType::I32 | PType::F32 => PType::U32,
            PType::U64 | PType::I64 | PType::F64 => PType::U64,
            PType::Bytes => PType::Bytes,
        }
    }

    /// The signed integer type of the same width.
    pub fn to_signed(self) -> PType {
        match self {
            PType::U8 | PType::I8 => PType::I8,
            PType::U16 | PType::I16 => PType::I16,
            PType::U32 | PType::I32 | PType::F32 => PType::I32,
            PType::U64 | PType::I64 | PType::F64 => PType::I64,
            PType::Bytes => PType::Bytes,
        }
    }

    /// Lower-case name (`u8`, `i64`, `f32`, `bytes`).
    pub fn name(self) -> &'static str {
        match self {
            PType::U8 => "u8",
            PType::U16 => "u16",
            PType::U32 => "u32",
            PType::U64 => "u64",
            PType::I8 => "i8",
            PType::I16 => "i16",
            PType::I32 => "i32",
            PType::I64 => "i64",
            PType::F32 => "f32",
            PType::F64 => "f64",
            PType::Bytes => "bytes",
        }
    }
}

impl fmt::Display for PType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Resolution of a timestamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum TimeUnit {
    /// Seconds.
    Second = 0,
    /// Milliseconds.
    Millisecond = 1,
    /// Microseconds.
    Microsecond = 2,
    /// Nanoseconds.
    Nanosecond = 3,
}

/// What a column holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ColumnType {
    /// Booleans, stored as a u8 stream of 0 and 1.
    Bool,
    /// Integers of the given physical type.
    Int(PType),
    /// Floats of the given physical type (f32 or f64).
    Float(PType),
    /// Days since 1970-01-01.
    Date32,
    /// A 64-bit count of `TimeUnit` since the epoch.
    Timestamp(TimeUnit),
    /// A decimal stored as an i64 count of 10^-scale units.
    Decimal {
        /// Total significant digits (at most 18).
        precision: u8,
        /// Digits after the point.
        scale: i8,
    },
    /// UTF-8 strings.
    Utf8,
    /// Arbitrary byte strings.
    Binary,
}

impl ColumnType {
    /// The physical stream type the values are encoded as.
    pub fn ptype(self) -> PType {
        match self {
            ColumnType::Bool => PType::U8,
            ColumnType::Int(p) | ColumnType::Float(p) => p,
            ColumnType::Date32 => PType::I32,
            ColumnType::Timestamp(_) | ColumnType::Decimal { .. } => PType::I64,
            ColumnType::Utf8 | ColumnType::Binary => PType::Bytes,
        }
    }

    /// Serialises to 4 bytes: tag, then up to three parameter bytes.
    pub fn to_bytes(self) -> [u8; 4] {
        match self {
            ColumnType::Bool => [1, 0, 0, 0],
            ColumnType::Int(p) => [2, p.code(), 0, 0],
            ColumnType::Float(p) => [3, p.code(), 0, 0],
            ColumnType::Date32 => [4, 0, 0, 0],
            ColumnType::Timestamp(u) => [5, u as u8, 0, 0],
            ColumnType::Decimal { precision, scale } => [6, precision, scale as u8, 0],
            ColumnType::Utf8 => [7, 0, 0, 0],
            ColumnType::Binary => [8, 0, 0, 0],
        }
    }

    /// Parses [`ColumnType::to_bytes`].
    pub fn from_bytes(b: [u8; 4]) -> Result<Self> {
        let ty = match b[0] {
            1 => ColumnType::Bool,
            2 => {
                let p = PType::from_code(b[1])?;
                if !p.is_int() {
                    return Err(Error::corrupt(format!("integer column with type {p}")));
                }
                ColumnType::Int(p)
            }
            3 => {
                let p = PType::from_code(b[1])?;
                if !p.is_float() {
                    return Err(Error::corrupt(format!("float column with type {p}")));
                }
                ColumnType::Float(p)
            }
            4 => ColumnType::Date32,
            5 => ColumnType::Timestamp(match b[1] {
                0 => TimeUnit::Second,
                1 => TimeUnit::Millisecond,
                2 => TimeUnit::Microsecond,
                3 => TimeUnit::Nanosecond,
                u => return Err(Error::corrupt(format!("unknown time unit code {u}"))),
            }),
            6 => {
                if b[1] == 0 || b[1] > 18 {
                    return Err(Error::corrupt(format!("decimal precision {}", b[1])));
                }
                ColumnType::Decimal {
                    precision: b[1],
                    scale: b[2] as i8,
                }
            }
            7 => ColumnType::Utf8,
            8 => ColumnType::Binary,
            t => return Err(Error::corrupt(format!("unknown column type code {t}"))),
        };
        Ok(ty)
    }
}

impl fmt::Display for ColumnType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ColumnType::Bool => f.write_str("bool"),
            ColumnType::Int(p) | ColumnType::Float(p) => write!(f, "{p}"),
            ColumnType::Date32 => f.write_str("date32"),
            ColumnType::Timestamp(u) => write!(f, "timestamp({u:?})"),
            ColumnType::Decimal { precision, scale } => write!(f, "decimal({precision},{scale})"),
            ColumnType::Utf8 => f.write_str("utf8"),
            ColumnType::Binary => f.write_str("binary"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for p in PType::ALL {
            assert_eq!(PType::from_code(p.code()).ok(), Some(p));
        }
        let types = [
            ColumnType::Bool,
            ColumnType::Int(PType::I16),
            ColumnType::Float(PType::F64),
            ColumnType::Date32,
            ColumnType::Timestamp(TimeUnit::Microsecond),
            ColumnType::Decimal {
                precision: 15,
                scale: -2,
            },
            ColumnType::Utf8,
            ColumnType::Binary,
        ];
        for t in types {
            assert_eq!(ColumnType::from_bytes(t.to_bytes()).ok(), Some(t));
        }
        assert!(ColumnType::from_bytes([2, 9, 0, 0]).is_err());
        assert!(ColumnType::from_bytes([99, 0, 0, 0]).is_err());
    }
}
