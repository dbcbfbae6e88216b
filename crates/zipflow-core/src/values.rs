//! Typed value streams.
//!
//! Encodings turn one stream into metadata plus child streams. A stream is a [`Values`]:
//! integers of one of eight widths/signednesses ([`IntVec`]), floats, or byte strings.
//! Generic code is written once over [`Int`] and dispatched with [`match_ints!`](crate::match_ints).

use crate::PType;
use std::fmt::Debug;

/// An integer type a stream can hold. `U` is the unsigned type of the same width, which is what
/// bit-packing stores; `to_bits`/`from_bits` reinterpret without changing any bit.
pub trait Int:
    Copy + Ord + Default + Debug + Send + Sync + bytemuck::Pod + std::hash::Hash + 'static
{
    /// The unsigned type of the same width.
    type U: Int<U = Self::U> + fastlanes::BitPacking + fastlanes::FoR + fastlanes::Delta;
    /// This type's [`PType`].
    const PTYPE: PType;
    /// Width in bits.
    const BITS: u32;
    /// Smallest value.
    const MIN: Self;
    /// Largest value.
    const MAX: Self;
    /// Zero.
    const ZERO: Self;
    /// Reinterprets as the unsigned type of the same width.
    fn to_bits(self) -> Self::U;
    /// Reinterprets from the unsigned type of the same width.
    fn from_bits(u: Self::U) -> Self;
    /// The value, widened exactly.
    fn to_i128(self) -> i128;
    /// The low `BITS` bits of `v`.
    fn from_i128_wrapping(v: i128) -> Self;
    /// The unsigned bits, zero-extended to 64.
    fn to_u64(self) -> u64;
    /// The low `BITS` bits of `v`.
    fn from_u64_wrapping(v: u64) -> Self;
    /// Wrapping subtraction.
    fn wrapping_sub(self, rhs: Self) -> Self;
    /// Wrapping addition.
    fn wrapping_add(self, rhs: Self) -> Self;
    /// Bits needed to store `self` as an unsigned number (0 for 0).
    fn used_bits(self) -> u32;
}

macro_rules! impl_int {
    ($t:ty, $u:ty, $p:ident) => {
        impl Int for $t {
            type U = $u;
            const PTYPE: PType = PType::$p;
            const BITS: u32 = <$t>::BITS;
            const MIN: Self = <$t>::MIN;
            const MAX: Self = <$t>::MAX;
            const ZERO: Self = 0;
            #[inline(always)]
            fn to_bits(self) -> $u {
                self as $u
            }
            #[inline(always)]
            fn from_bits(u: $u) -> Self {
                u as $t
            }
            #[inline(always)]
            fn to_i128(self) -> i128 {
                self as i128
            }
            #[inline(always)]
            fn from_i128_wrapping(v: i128) -> Self {
                v as $t
            }
            #[inline(always)]
            fn to_u64(self) -> u64 {
                (self as $u) as u64
            }
            #[inline(always)]
            fn from_u64_wrapping(v: u64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn wrapping_sub(self, rhs: Self) -> Self {
                <$t>::wrapping_sub(self, rhs)
            }
            #[inline(always)]
            fn wrapping_add(self, rhs: Self) -> Self {
                <$t>::wrapping_add(self, rhs)
            }
            #[inline(always)]
            fn used_bits(self) -> u32 {
                <$u>::BITS - (self as $u).leading_zeros()
            }
        }
    };
}

impl_int!(u8, u8, U8);
impl_int!(u16, u16, U16);
impl_int!(u32, u32, U32);
impl_int!(u64, u64, U64);
impl_int!(i8, u8, I8);
impl_int!(i16, u16, I16);
impl_int!(i32, u32, I32);
impl_int!(i64, u64, I64);

/// A stream of integers of one type.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum IntVec {
    U8(Vec<u8>),
    U16(Vec<u16>),
    U32(Vec<u32>),
    U64(Vec<u64>),
    I8(Vec<i8>),
    I16(Vec<i16>),
    I32(Vec<i32>),
    I64(Vec<i64>),
}

/// Runs `$body` with `$v` bound to the typed `Vec` inside an [`IntVec`] (or a reference to one),
/// and `$T` to its element type.
///
/// ```
/// use zipflow_core::{match_ints, IntVec, Int};
/// let v = IntVec::I16(vec![-3, 4]);
/// let n = match_ints!(&v, T, x => x.iter().map(|e| e.to_i128()).sum::<i128>());
/// assert_eq!(n, 1);
/// ```
#[macro_export]
macro_rules! match_ints {
    ($vec:expr, $T:ident, $v:ident => $body:expr) => {{
        use $crate::values::IntVec as __IV;
        match $vec {
            __IV::U8($v) => {
                #[allow(dead_code)]
                type $T = u8;
                $body
            }
            __IV::U16($v) => {
                #[allow(dead_code)]
                type $T = u16;
                $body
            }
            __IV::U32($v) => {
                #[allow(dead_code)]
                type $T = u32;
                $body
            }
            __IV::U64($v) => {
                #[allow(dead_code)]
                type $T = u64;
                $body
            }
            __IV::I8($v) => {
                #[allow(dead_code)]
                type $T = i8;
                $body
            }
            __IV::I16($v) => {
                #[allow(dead_code)]
                type $T = i16;
                $body
            }
            __IV::I32($v) => {
                #[allow(dead_code)]
                type $T = i32;
                $body
            }
            __IV::I64($v) => {
                #[allow(dead_code)]
                type $T = i64;
                $body
            }
        }
    }};
}

/// Runs `$body` with `$T` bound to the Rust integer type of an integer [`PType`]; evaluates
/// `$other` for non-integer types.
#[macro_export]
macro_rules! with_int_ptype {
    ($ptype:expr, $T:ident => $body:expr, _ => $other:expr) => {{
        use $crate::PType as __P;
        match $ptype {
            __P::U8 => {
                type $T = u8;
                $body
            }
            __P::U16 => {
                type $T = u16;
                $body
            }
            __P::U32 => {
                type $T = u32;
                $body
            }
            __P::U64 => {
                type $T = u64;
                $body
            }
            __P::I8 => {
                type $T = i8;
                $body
            }
            __P::I16 => {
                type $T = i16;
                $body
            }
            __P::I32 => {
                type $T = i32;
                $body
            }
            __P::I64 => {
                type $T = i64;
                $body
            }
            _ => $other,
        }
    }};
}

/// Conversion between a typed `Vec<T>` and an [`IntVec`].
pub trait IntVecOf: Int {
    /// Wraps a vector.
    fn wrap(v: Vec<Self>) -> IntVec;
    /// Borrows the vector if the types match.
    fn slice(v: &IntVec) -> Option<&Vec<Self>>;
    /// Borrows the vector mutably if the types match.
    fn slice_mut(v: &mut IntVec) -> Option<&mut Vec<Self>>;
}

macro_rules! impl_int_vec_of {
    ($t:ty, $p:ident) => {
        impl IntVecOf for $t {
            fn wrap(v: Vec<Self>) -> IntVec {
                IntVec::$p(v)
            }
            fn slice(v: &IntVec) -> Option<&Vec<Self>> {
                match v {
                    IntVec::$p(x) => Some(x),
                    _ => None,
                }
            }
            fn slice_mut(v: &mut IntVec) -> Option<&mut Vec<Self>> {
                match v {
                    IntVec::$p(x) => Some(x),
                    _ => None,
                }
            }
        }
    };
}

impl_int_vec_of!(u8, U8);
impl_int_vec_of!(u16, U16);
impl_int_vec_of!(u32, U32);
impl_int_vec_of!(u64, U64);
impl_int_vec_of!(i8, I8);
impl_int_vec_of!(i16, I16);
impl_int_vec_of!(i32, I32);
impl_int_vec_of!(i64, I64);

impl IntVec {
    /// An empty stream of the given integer type; `None` for non-integer types.
    pub fn empty(ptype: PType) -> Option<IntVec> {
        with_int_ptype!(ptype, T => Some(T::wrap(Vec::new())), _ => None)
    }

    /// The element type.
    pub fn ptype(&self) -> PType {
        match_ints!(self, T, _v => T::PTYPE)
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        match_ints!(self, T, v => v.len())
    }

    /// Whether there are no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Removes all values, keeping the allocation.
    pub fn clear(&mut self) {
        match_ints!(self, T, v => v.clear())
    }

    /// The values as little-endian bytes.
    pub fn as_bytes(&self) -> &[u8] {
        match_ints!(self, T, v => bytemuck::cast_slice(v.as_slice()))
    }

    /// Value `i` widened to i128.
    pub fn get_i128(&self, i: usize) -> Option<i128> {
        match_ints!(self, T, v => v.get(i).map(|x| x.to_i128()))
    }
}

/// Variable-length byte strings: `offsets` has one more entry than there are strings, starts at 0
/// and never decreases; string `i` is `data[offsets[i]..offsets[i + 1]]`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ByteStrings {
    /// Start offsets, plus the end of the last string.
    pub offsets: Vec<u64>,
    /// All strings, concatenated.
    pub data: Vec<u8>,
}

impl ByteStrings {
    /// Number of strings.
    pub fn len(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// Whether there are no strings.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// String `i`.
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        let start = usize::try_from(*self.offsets.get(i)?).ok()?;
        let end = usize::try_from(*self.offsets.get(i + 1)?).ok()?;
        self.data.get(start..end)
    }
}

/// A value stream of any type.
#[derive(Debug, Clone, PartialEq)]
pub enum Values {
    /// Integers.
    Int(IntVec),
    /// binary32 floats.
    F32(Vec<f32>),
    /// binary64 floats.
    F64(Vec<f64>),
    /// Byte strings.
    Bytes(ByteStrings),
}

impl Values {
    /// An empty stream of the given type.
    pub fn empty(ptype: PType) -> Values {
        match ptype {
            PType::F32 => Values::F32(Vec::new()),
            PType::F64 => Values::F64(Vec::new()),
            PType::Bytes => Values::Bytes(ByteStrings {
                offsets: vec![0],
                data: Vec::new(),
            }),
            p => with_int_ptype!(p, T => Values::Int(T::wrap(Vec::new())), _ => unreachable!()),
        }
    }

    /// The element type.
    pub fn ptype(&self) -> PType {
        match self {
            Values::Int(v) => v.ptype(),
            Values::F32(_) => PType::F32,
            Values::F64(_) => PType::F64,
            Values::Bytes(_) => PType::Bytes,
        }
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        match self {
            Values::Int(v) => v.len(),
            Values::F32(v) => v.len(),
            Values::F64(v) => v.len(),
            Values::Bytes(b) => b.len(),
        }
    }

    /// Whether there are no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bit-exact equality (floats compared by their bits, so NaN payloads and -0.0 count).
    pub fn bit_eq(&self, other: &Values) -> bool {
        match (self, other) {
            (Values::F32(a), Values::F32(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
            }
            (Values::F64(a), Values::F64(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
            }
            (a, b) => a == b,
        }
    }

    /// Size of the values in plain form: fixed-width values at their width, strings as bytes
    /// plus 4-byte offsets (what an Arrow array of them occupies, without validity).
    pub fn plain_size(&self) -> usize {
        match self {
            Values::Bytes(b) => b.data.len() + 4 * b.offsets.len(),
            v => v.len() * v.ptype().byte_width(),
        }
    }

    /// Values `start..end` as a new stream.
    pub fn slice(&self, start: usize, end: usize) -> Values {
        match self {
            Values::Int(v) => Values::Int(match_ints!(v, T, x => T::wrap(x[start..end].to_vec()))),
            Values::F32(v) => Values::F32(v[start..end].to_vec()),
            Values::F64(v) => Values::F64(v[start..end].to_vec()),
            Values::Bytes(b) => {
                let base = b.offsets[start];
                let offsets = b.offsets[start..=end].iter().map(|o| o - base).collect();
                // Offsets come from a valid `ByteStrings`, so they index `data`.
                let data = b.data[base as usize..b.offsets[end] as usize].to_vec();
                Values::Bytes(ByteStrings { offsets, data })
            }
        }
    }
}

impl From<IntVec> for Values {
    fn from(v: IntVec) -> Self {
        Values::Int(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn used_bits() {
        assert_eq!(0u8.used_bits(), 0);
        assert_eq!(1u32.used_bits(), 1);
        assert_eq!((-1i16).used_bits(), 16);
        assert_eq!(u64::MAX.used_bits(), 64);
        assert_eq!(255u64.used_bits(), 8);
    }

    #[test]
    fn float_bit_eq() {
        let a = Values::F64(vec![-0.0, f64::from_bits(0x7ff8_0000_0000_0001)]);
        let b = Values::F64(vec![0.0, f64::from_bits(0x7ff8_0000_0000_0001)]);
        assert!(a.bit_eq(&a.clone()));
        assert!(!a.bit_eq(&b));
    }

    #[test]
    fn slice_bytes() {
        let b = ByteStrings {
            offsets: vec![0, 1, 3, 6],
            data: b"abbccc".to_vec(),
        };
        let s = Values::Bytes(b).slice(1, 3);
        let Values::Bytes(s) = s else { panic!() };
        assert_eq!(s.offsets, vec![0, 2, 5]);
        assert_eq!(s.get(1), Some(&b"ccc"[..]));
    }
}
