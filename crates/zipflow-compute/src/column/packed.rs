//! The bit-packed reader: a `bitpack` node (under a `for` or not) kept packed. A block is
//! unpacked into a reused buffer when it is asked for; range predicates are compared on the
//! unpacked words before they are widened, dictionary codes checked against their
//! dictionary's length, and sparse selections gathered without unpacking the block.

use std::borrow::Cow;
use std::mem::MaybeUninit;

use fastlanes::BitPacking;
use zipflow_core::{Error, Int, PType, Result};
use zipflow_encodings::node::cast_cow;
use zipflow_encodings::{NodeView, bitpack};

use super::BLOCK;
use super::kernels::{block_max, range_mask, table_mask, widen};

/// Packed words of one of the four unsigned types.
pub(super) enum Words<'a> {
    U8(Cow<'a, [u8]>),
    U16(Cow<'a, [u16]>),
    U32(Cow<'a, [u32]>),
    U64(Cow<'a, [u64]>),
}

/// A `bitpack` node, optionally under a `for`: value = `reference + packed` in the stream's
/// type (wrapping, as the decoder does).
pub(super) struct PackedCol<'a> {
    pub(super) words: Words<'a>,
    pub(super) width: usize,
    /// The reference's bits (0 without `for`).
    pub(super) reference: u64,
    pub(super) ptype: PType,
    /// When set, `reference + packed` never wraps, so the logical value is exactly
    /// `logical(reference) + packed` and range predicates can be compared on `packed`.
    pub(super) exact_base: Option<i128>,
}

/// The logical value of `bits` (the low `ptype` bits) as i128.
pub(super) fn logical(bits: u64, ptype: PType) -> i128 {
    match ptype {
        PType::I8 => i128::from(bits as u8 as i8),
        PType::I16 => i128::from(bits as u16 as i16),
        PType::I32 => i128::from(bits as u32 as i32),
        PType::I64 => i128::from(bits as i64),
        PType::U8 => i128::from(bits as u8),
        PType::U16 => i128::from(bits as u16),
        PType::U32 => i128::from(bits as u32),
        _ => i128::from(bits),
    }
}

pub(super) fn type_range(ptype: PType) -> (i128, i128) {
    match ptype {
        PType::I8 => (i8::MIN.into(), i8::MAX.into()),
        PType::I16 => (i16::MIN.into(), i16::MAX.into()),
        PType::I32 => (i32::MIN.into(), i32::MAX.into()),
        PType::I64 => (i64::MIN.into(), i64::MAX.into()),
        PType::U8 => (0, u8::MAX.into()),
        PType::U16 => (0, u16::MAX.into()),
        PType::U32 => (0, u32::MAX.into()),
        _ => (0, u64::MAX.into()),
    }
}

impl<'a> PackedCol<'a> {
    pub(super) fn new(node: &NodeView<'a>, reference: u64, ptype: PType) -> Result<Self> {
        let view = bitpack::View::parse(node)?;
        if node.ptype.byte_width() != ptype.byte_width() {
            return Err(Error::corrupt(format!(
                "a bitpack node of {} values under a {ptype} column",
                node.ptype
            )));
        }
        // The view checked the width against the node's type and the buffer's length.
        let width = view.width as usize;
        let buf = view.packed;
        let words = match ptype.byte_width() {
            1 => Words::U8(cast_cow(buf, "packed")?),
            2 => Words::U16(cast_cow(buf, "packed")?),
            4 => Words::U32(cast_cow(buf, "packed")?),
            _ => Words::U64(cast_cow(buf, "packed")?),
        };
        let base = logical(reference, ptype);
        let top = if width == 0 { 0 } else { (1i128 << width) - 1 };
        let (lo, hi) = type_range(ptype);
        let exact_base = (base >= lo && base + top <= hi).then_some(base);
        Ok(PackedCol {
            words,
            width,
            reference,
            ptype,
            exact_base,
        })
    }
}

macro_rules! with_words {
    ($words:expr, $U:ident, $w:ident => $body:expr) => {
        match $words {
            Words::U8($w) => {
                type $U = u8;
                $body
            }
            Words::U16($w) => {
                type $U = u16;
                $body
            }
            Words::U32($w) => {
                type $U = u32;
                $body
            }
            Words::U64($w) => {
                type $U = u64;
                $body
            }
        }
    };
}

thread_local! {
    /// One block of unpacked words, reused so blocks are not zeroed before every unpack.
    static UNPACKED: std::cell::RefCell<Vec<u64>> = std::cell::RefCell::new(vec![0; BLOCK]);
}

/// Blocks ahead of the one gathered from whose packed words are prefetched.
pub(super) const GATHER_PREFETCH_BLOCKS: usize = 2;

impl PackedCol<'_> {
    /// Unpacks block `b` into a reused buffer and hands its first `n` words to `f`.
    pub(super) fn with_block<R>(&self, b: usize, n: usize, f: impl FnOnce(Unpacked<'_>) -> R) -> R {
        UNPACKED.with(|cell| {
            let mut buf = cell.borrow_mut();
            with_words!(&self.words, U, w => {
                let out: &mut [U] = &mut bytemuck::cast_slice_mut::<u64, U>(&mut buf[..])[..BLOCK];
                if self.width == 0 {
                    out.fill(0 as U);
                } else {
                    let per = BLOCK * self.width / U::BITS as usize;
                    let src = &w[b * per..(b + 1) * per];
                    // SAFETY: `new` checked `width <= U::BITS` and the word count, so block
                    // `b` (below the node's vector count, which callers guarantee) has `per`
                    // words; `out` holds 1024 values.
                    unsafe { U::unchecked_unpack(self.width, src, out) };
                }
                f(U::view(&out[..n]))
            })
        })
    }

    /// Unpacks block `b` (values `1024b..`) into `out[..n]`.
    pub(super) fn load(&self, b: usize, n: usize, out: &mut [i64]) {
        let r = self.reference;
        let ptype = self.ptype;
        self.with_block(b, n, |u| match u {
            Unpacked::U8(x) => widen(x, r as u8, ptype, &mut out[..n]),
            Unpacked::U16(x) => widen(x, r as u16, ptype, &mut out[..n]),
            Unpacked::U32(x) => widen(x, r as u32, ptype, &mut out[..n]),
            Unpacked::U64(x) => widen(x, r, ptype, &mut out[..n]),
        })
    }

    /// Values at positions `idx` (within block `b`) into `out[..idx.len()]`.
    pub(super) fn gather(&self, b: usize, idx: &[usize], out: &mut [i64]) {
        with_words!(&self.words, U, w => {
            let r = U::from_u64_wrapping(self.reference);
            let k = idx.len();
            if self.width == 0 {
                let zeros = [0 as U; 1];
                for o in &mut out[..k] {
                    widen(&zeros, r, self.ptype, std::slice::from_mut(o));
                }
            } else {
                // Uninitialised scratch: zeroing a whole block per call would cost more than
                // the few values gathered.
                let mut tmp = [MaybeUninit::<U>::uninit(); BLOCK];
                let per = BLOCK * self.width / U::BITS as usize;
                let src = &w[b * per..(b + 1) * per];
                // A few values per block are scattered over its words, a pattern the hardware
                // prefetcher does not follow: fetch a later block's words while this one's
                // are read, so the gather does not wait on DRAM.
                crate::prefetch::ahead(w, (b + GATHER_PREFETCH_BLOCKS) * per, per);
                // SAFETY: as in `with_block`; every index is below 1024 (positions within a
                // block).
                unsafe { U::unchecked_unpack_indices(self.width, src, idx, &mut tmp[..k]) };
                // SAFETY: `unchecked_unpack_indices` wrote the first `k` outputs, and
                // `MaybeUninit<U>` has the layout of `U`.
                let vals = unsafe { std::slice::from_raw_parts(tmp.as_ptr().cast::<U>(), k) };
                widen(vals, r, self.ptype, &mut out[..k]);
            }
        })
    }

    /// ANDs `lo <= v <= hi` into `mask[..n]`; false when the packed domain cannot be used.
    pub(super) fn filter_range(
        &self,
        b: usize,
        n: usize,
        lo: i64,
        hi: i64,
        mask: &mut [u8],
    ) -> bool {
        let Some(base) = self.exact_base else {
            return false;
        };
        let top = if self.width == 0 {
            0
        } else {
            (1i128 << self.width) - 1
        };
        let plo = (i128::from(lo) - base).max(0);
        let phi = (i128::from(hi) - base).min(top);
        if plo > phi {
            mask[..n].fill(0);
            return true;
        }
        // plo..=phi lie within 0..2^width, so they fit the packed type.
        let (l, span) = (plo as u64, (phi - plo) as u64);
        let mask = &mut mask[..n];
        self.with_block(b, n, |u| match u {
            Unpacked::U8(x) => range_mask(x, l as u8, span as u8, mask),
            Unpacked::U16(x) => range_mask(x, l as u16, span as u16, mask),
            Unpacked::U32(x) => range_mask(x, l as u32, span as u32, mask),
            Unpacked::U64(x) => range_mask(x, l, span, mask),
        });
        true
    }

    /// ANDs `table[code]` into `mask[..n]`; errors on a code past the dictionary
    /// (`table` marks those with bit 1).
    pub(super) fn filter_table(
        &self,
        b: usize,
        n: usize,
        table: &[u8],
        mask: &mut [u8],
    ) -> Result<()> {
        let mask = &mut mask[..n];
        let seen = self.with_block(b, n, |u| match u {
            Unpacked::U8(x) => table_mask(x, table, mask),
            Unpacked::U16(x) => table_mask(x, table, mask),
            Unpacked::U32(x) => table_mask(x, table, mask),
            Unpacked::U64(x) => table_mask(x, table, mask),
        });
        if seen & 2 != 0 {
            return Err(Error::corrupt("dictionary code past the dictionary's end"));
        }
        Ok(())
    }
}

/// The codes `lo..=hi` when the ones of `table` (over the dictionary) are contiguous.
pub(super) fn code_range(table: &[u8]) -> Option<(u64, u64)> {
    let lo = table.iter().position(|&t| t == 1)?;
    let hi = table.iter().rposition(|&t| t == 1)?;
    table[lo..=hi]
        .iter()
        .all(|&t| t == 1)
        .then_some((lo as u64, hi as u64))
}

impl PackedCol<'_> {
    /// ANDs `lo <= code <= hi` into `mask[..n]`; errors on a code past the dictionary's
    /// `dict_len` entries (checked only when the packed width can express one).
    pub(super) fn filter_codes(
        &self,
        b: usize,
        n: usize,
        lo: u64,
        hi: u64,
        dict_len: usize,
        mask: &mut [u8],
    ) -> Result<()> {
        let check = self.width >= 64 || (1u128 << self.width) > dict_len as u128;
        let (l, span) = (lo, hi - lo);
        let mask = &mut mask[..n];
        let max = self.with_block(b, n, |u| {
            macro_rules! go {
                ($x:expr, $t:ty) => {{
                    range_mask($x, l as $t, span as $t, mask);
                    if check { block_max($x).to_u64() } else { 0 }
                }};
            }
            match u {
                Unpacked::U8(x) => go!(x, u8),
                Unpacked::U16(x) => go!(x, u16),
                Unpacked::U32(x) => go!(x, u32),
                Unpacked::U64(x) => go!(x, u64),
            }
        });
        if check && n > 0 && max >= dict_len as u64 {
            return Err(Error::corrupt(format!(
                "dictionary code {max} past the dictionary's {dict_len} entries"
            )));
        }
        Ok(())
    }
}

/// A block of unpacked words of one of the four unsigned types.
pub(super) enum Unpacked<'u> {
    U8(&'u [u8]),
    U16(&'u [u16]),
    U32(&'u [u32]),
    U64(&'u [u64]),
}

pub(super) trait View: Sized {
    fn view(x: &[Self]) -> Unpacked<'_>;
}

impl View for u8 {
    fn view(x: &[u8]) -> Unpacked<'_> {
        Unpacked::U8(x)
    }
}

impl View for u16 {
    fn view(x: &[u16]) -> Unpacked<'_> {
        Unpacked::U16(x)
    }
}

impl View for u32 {
    fn view(x: &[u32]) -> Unpacked<'_> {
        Unpacked::U32(x)
    }
}

impl View for u64 {
    fn view(x: &[u64]) -> Unpacked<'_> {
        Unpacked::U64(x)
    }
}
