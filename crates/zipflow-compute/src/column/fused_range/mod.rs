//! The fused range reader: a range predicate mapped into a packed chunk's domain
//! ([`PackedRange`]) and compared while unpacking, 64 values of the logical-order bitmask
//! at a time, without an unpacked block in memory ([`ChunkColumn::range_bits`]).
//!
//! One kernel per packed word type, in three variants behind one dispatch
//! ([`fused_bits`]): the portable kernels (compiled for AVX2 when the CPU has it), and the
//! same kernels written with AVX2 ([`avx2`]) and AVX-512 ([`avx512`]) intrinsics. The tests
//! compare every variant with a brute-force mask at every bit width.

use zipflow_core::{Error, Result};

use self::portable::{fused_u8, fused_u16, fused_u32, fused_u64};
use super::packed::{PackedCol, Words, code_range};
use super::{BLOCK, ChunkColumn, DictValues, Source};

/// A range predicate mapped into one chunk's packed domain, for [`ChunkColumn::range_bits`]:
/// a packed word `x` passes when `x - l <= span` (wrapping).
#[derive(Debug, Clone, Copy)]
pub struct PackedRange {
    pub(super) l: u64,
    pub(super) span: u64,
    /// No value of the chunk can pass.
    pub(super) empty: bool,
    /// For dictionary codes: the dictionary's length, when the packed width can express a
    /// code past it (every block is then checked).
    pub(super) dict_len: Option<usize>,
    /// The fraction of the packed domain that passes, to evaluate selective predicates first.
    pub selectivity: f64,
}

/// Runs a portable fused kernel compiled for AVX2 when the CPU has it (AVX-512 CPUs use
/// [`avx512`]).
macro_rules! fused_dispatch {
    ($kernel:ident, $t:ty, $packed:expr, $width:expr, $l:expr, $span:expr, $limit:expr, $out:expr) => {{
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2")]
        fn avx2(p: &[$t], w: usize, l: $t, s: $t, m: $t, o: &mut [u64; 16]) -> bool {
            $kernel(p, w, l, s, m, o)
        }
        let (p, w, l, s, m, o) = ($packed, $width, $l, $span, $limit, $out);
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU supports AVX2 (checked just above).
                unsafe { avx2(p, w, l, s, m, o) }
            } else {
                $kernel(p, w, l, s, m, o)
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            $kernel(p, w, l, s, m, o)
        }
    }};
}

#[cfg(target_arch = "x86_64")]
mod avx512;
mod portable;

#[cfg(target_arch = "x86_64")]
mod avx2;

/// `bits` as one byte per value (`mask[i] = bit i`), for the first `n` values.
pub fn bits_to_mask(bits: &[u64; 16], n: usize, mask: &mut [u8]) {
    for (i, m) in mask[..n].iter_mut().enumerate() {
        *m = ((bits[i / 64] >> (i % 64)) & 1) as u8;
    }
}

impl ChunkColumn<'_> {
    /// `lo <= v <= hi` mapped into this chunk's packed domain, or `None` when the chunk is not
    /// packed (or is a dictionary whose passing codes are not one contiguous run): then
    /// [`ChunkColumn::filter`] serves. `table` is the chunk's [`ChunkColumn::code_table`].
    pub fn packed_range(&self, lo: i64, hi: i64, table: Option<&[u8]>) -> Option<PackedRange> {
        match &self.source {
            Source::Packed(p) => {
                let base = p.exact_base?;
                let top = if p.width == 0 {
                    0
                } else {
                    (1i128 << p.width) - 1
                };
                let plo = (i128::from(lo) - base).max(0);
                let phi = (i128::from(hi) - base).min(top);
                let empty = plo > phi;
                Some(PackedRange {
                    l: if empty { 0 } else { plo as u64 },
                    span: if empty { 0 } else { (phi - plo) as u64 },
                    empty,
                    dict_len: None,
                    selectivity: if empty {
                        0.0
                    } else {
                        (phi - plo + 1) as f64 / (top + 1) as f64
                    },
                })
            }
            Source::Dict {
                codes,
                values: DictValues::Ints(v),
            } => {
                let t = table?;
                let check = codes.width >= 64 || (1u128 << codes.width) > v.len() as u128;
                let dict_len = check.then_some(v.len());
                let t = &t[..v.len().min(t.len())];
                if !t.contains(&1) {
                    return Some(PackedRange {
                        l: 0,
                        span: 0,
                        empty: true,
                        dict_len,
                        selectivity: 0.0,
                    });
                }
                let (l, h) = code_range(t)?;
                Some(PackedRange {
                    l,
                    span: h - l,
                    empty: false,
                    dict_len,
                    selectivity: (h - l + 1) as f64 / v.len().max(1) as f64,
                })
            }
            _ => None,
        }
    }

    /// ANDs `r` for the `n` values of block `b` into the bitmask `bits` (bit `i % 64` of word
    /// `i / 64` is value `i`); bits past `n` are cleared. `r` must come from this column's
    /// [`ChunkColumn::packed_range`].
    pub fn range_bits(
        &self,
        b: usize,
        n: usize,
        r: &PackedRange,
        bits: &mut [u64; 16],
    ) -> Result<()> {
        let p = match &self.source {
            Source::Packed(p) => p,
            Source::Dict { codes, .. } => codes,
            _ => return Err(Error::invalid("packed range on an unpacked column")),
        };
        let check = r.dict_len;
        if r.empty && check.is_none() {
            *bits = [0; 16];
            return Ok(());
        }
        let (l, span) = (r.l, r.span);
        let mut out = [0u64; 16];
        let bad = if p.width == 0 {
            // Every value is 0.
            out = [if l == 0 { u64::MAX } else { 0 }; 16];
            false
        } else {
            let limit = check.map_or(u64::MAX, |len| (len as u64).saturating_sub(1));
            fused_bits(p, b, l, span, limit, &mut out)
        };
        if check.is_some() && bad {
            return Err(Error::corrupt(format!(
                "dictionary code past the dictionary's {} entries",
                check.unwrap_or(0)
            )));
        }
        for (x, &o) in bits.iter_mut().zip(&out) {
            *x &= o;
        }
        if n < BLOCK {
            for (i, x) in bits.iter_mut().enumerate() {
                let keep = n.saturating_sub(i * 64).min(64);
                *x &= if keep == 64 {
                    u64::MAX
                } else {
                    (1u64 << keep) - 1
                };
            }
        }
        if r.empty {
            *bits = [0; 16];
        }
        Ok(())
    }
}

/// The bitmask of `x - l <= span` (wrapping) for the 1024 packed values of block `b` of `p`
/// (`p.width > 0`) into `out`, on the best kernel the CPU runs; returns whether some value
/// exceeds `limit`.
#[inline]
fn fused_bits(
    p: &PackedCol<'_>,
    b: usize,
    l: u64,
    span: u64,
    limit: u64,
    out: &mut [u64; 16],
) -> bool {
    // Words of one vector: 1024 values at `width` bits.
    let per = |bytes: usize| BLOCK * p.width / 8 / bytes;
    macro_rules! go {
        ($w:expr, $t:ty, $kernel:ident) => {{
            let per = per(size_of::<$t>());
            let src = &$w[b * per..(b + 1) * per];
            let limit = limit.min(<$t>::MAX as u64) as $t;
            #[cfg(target_arch = "x86_64")]
            if avx512::available() {
                // SAFETY: the CPU supports AVX-512F/BW (checked just above).
                unsafe { avx512::$kernel(src, p.width, l as $t, span as $t, limit, out) }
            } else if avx2::available() {
                // SAFETY: the CPU supports AVX2 (checked just above).
                unsafe { avx2::$kernel(src, p.width, l as $t, span as $t, limit, out) }
            } else {
                fused_dispatch!($kernel, $t, src, p.width, l as $t, span as $t, limit, out)
            }
            #[cfg(not(target_arch = "x86_64"))]
            fused_dispatch!($kernel, $t, src, p.width, l as $t, span as $t, limit, out)
        }};
    }
    match &p.words {
        Words::U8(w) => go!(w, u8, fused_u8),
        Words::U16(w) => go!(w, u16, fused_u16),
        Words::U32(w) => go!(w, u32, fused_u32),
        Words::U64(w) => go!(w, u64, fused_u64),
    }
}

#[cfg(test)]
mod tests;
