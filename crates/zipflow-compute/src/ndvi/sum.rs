//! One column: SUM over bit-packed u32, fused into unpacking, and over plain u32.

use rayon::prelude::*;
use zipflow_core::{Error, Result};

use super::V;

/// Vectors per parallel task of the one-column sums.
pub(super) const SUM_TASK_VECTORS: usize = 64;

/// SUM of a bit-packed u32 column (`bitpack::pack` output at `width` bits, whole vectors, the
/// padding zero), fused: each value is extracted from the packed words straight into a lane
/// accumulator, never stored.
pub fn packed_sum(words: &[u32], width: u32, pool: &rayon::ThreadPool) -> Result<u64> {
    if width > 32 {
        return Err(Error::invalid(format!("bit width {width} exceeds 32")));
    }
    let w = width as usize;
    if w == 0 {
        return Ok(0);
    }
    let per = V * w / 32;
    if !words.len().is_multiple_of(per) {
        return Err(Error::invalid(format!(
            "{} packed words are not whole vectors of {per} words",
            words.len()
        )));
    }
    let f = sum_fn(w);
    Ok(pool.install(|| words.par_chunks(per * SUM_TASK_VECTORS).map(f).sum()))
}

/// SUM of plain u32 values (the baseline of [`packed_sum`]).
pub fn plain_sum(values: &[u32], pool: &rayon::ThreadPool) -> u64 {
    #[inline(always)]
    fn go(v: &[u32]) -> u64 {
        // 16-bit halves summed in u32 lanes (no overflow within 2^15 values), widened per
        // block: as fast as the loads, unlike a u64 widening add per value.
        let mut total = 0u64;
        for block in v.chunks(1 << 15) {
            let (mut lo, mut hi) = (0u32, 0u32);
            for &x in block {
                lo = lo.wrapping_add(x & 0xFFFF);
                hi = hi.wrapping_add(x >> 16);
            }
            total += u64::from(lo) + (u64::from(hi) << 16);
        }
        total
    }
    fn run(v: &[u32]) -> u64 {
        #[cfg(target_arch = "x86_64")]
        {
            #[target_feature(enable = "avx2")]
            fn avx2(v: &[u32]) -> u64 {
                go(v)
            }
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU supports AVX2 (checked just above).
                return unsafe { avx2(v) };
            }
        }
        go(v)
    }
    pool.install(|| values.par_chunks(V * SUM_TASK_VECTORS).map(run).sum())
}

/// The sum of whole packed vectors at one width.
pub(super) type SumFn = fn(&[u32]) -> u64;

/// `sum` over each whole vector of `per` words, each vector first loaded in address order
/// ([`crate::prefetch::load_in_order`]: the unrolled extraction's own loads lose the hardware
/// prefetcher's stream).
#[inline(always)]
pub(super) fn sum_in_order(words: &[u32], per: usize, sum: impl Fn(&[u32]) -> u64) -> u64 {
    words
        .chunks_exact(per)
        .map(|v| {
            crate::prefetch::load_in_order(v);
            sum(v)
        })
        .sum()
}

/// Extracts the 32 values of each lane of a vector packed at `W` bits (FastLanes layout:
/// value `row` of lane `l` occupies bits `row * W ..` of the lane's `W` words, word `j` of lane
/// `l` at index `32 * j + l`) and adds them up. Order does not matter to a sum, so the
/// FastLanes transpose is skipped.
#[inline(always)]
pub(super) fn sum_vector<const W: usize>(vector: &[u32]) -> u64 {
    let mask: u32 = if W == 32 { u32::MAX } else { (1u32 << W) - 1 };
    {
        let rows: &[[u32; 32]] = bytemuck::cast_slice(vector);
        // 32 values of W <= 27 bits per lane fit a u32 lane sum; wider values are summed as
        // 16-bit halves.
        let (mut lo_acc, mut hi_acc) = ([0u32; 32], [0u32; 32]);
        // Rows unrolled by hand so that every word index and shift is a constant.
        macro_rules! rows {
            ($($row:literal)*) => {$({
                const ROW: usize = $row;
                let bit = ROW * W;
                let (word, shift) = (bit / 32, bit % 32);
                let lo = &rows[word];
                if shift + W <= 32 {
                    for l in 0..32 {
                        let v = (lo[l] >> shift) & mask;
                        if W <= 27 {
                            lo_acc[l] += v;
                        } else {
                            lo_acc[l] += v & 0xFFFF;
                            hi_acc[l] += v >> 16;
                        }
                    }
                } else {
                    let hi = &rows[word + 1];
                    for l in 0..32 {
                        let v = ((lo[l] >> shift) | (hi[l] << ((32 - shift) % 32))) & mask;
                        if W <= 27 {
                            lo_acc[l] += v;
                        } else {
                            lo_acc[l] += v & 0xFFFF;
                            hi_acc[l] += v >> 16;
                        }
                    }
                }
            })*};
        }
        rows!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31);
        let lo: u64 = lo_acc.iter().map(|&x| u64::from(x)).sum();
        let hi: u64 = hi_acc.iter().map(|&x| u64::from(x)).sum();
        lo + (hi << 16)
    }
}

macro_rules! sum_table {
    ($($w:literal)*) => {
        /// The fused sum for width `w` in 1..=32, compiled for AVX-512 or AVX2 when the CPU has
        /// them.
        fn sum_fn(w: usize) -> SumFn {
            #[cfg(target_arch = "x86_64")]
            {
                if std::arch::is_x86_feature_detected!("avx512bw") {
                    $(
                        if w == $w {
                            #[target_feature(enable = "avx512f,avx512bw")]
                            #[inline(never)]
                            fn wide(vector: &[u32]) -> u64 {
                                sum_vector::<$w>(vector)
                            }
                            fn call(words: &[u32]) -> u64 {
                                // SAFETY: chosen only after AVX-512BW was detected above.
                                sum_in_order(words, 32 * $w, |v| unsafe { wide(v) })
                            }
                            return call;
                        }
                    )*
                }
                if std::arch::is_x86_feature_detected!("avx2") {
                    $(
                        if w == $w {
                            #[target_feature(enable = "avx2")]
                            #[inline(never)]
                            fn avx2(vector: &[u32]) -> u64 {
                                sum_vector::<$w>(vector)
                            }
                            fn call(words: &[u32]) -> u64 {
                                // SAFETY: chosen only after AVX2 was detected above.
                                sum_in_order(words, 32 * $w, |v| unsafe { avx2(v) })
                            }
                            return call;
                        }
                    )*
                }
            }
            $(
                if w == $w {
                    return |words| words.chunks_exact(32 * $w).map(sum_vector::<$w>).sum();
                }
            )*
            // Width 0 is handled by the caller; widths above 32 were rejected.
            |_| 0
        }
    };
}

sum_table!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32);
