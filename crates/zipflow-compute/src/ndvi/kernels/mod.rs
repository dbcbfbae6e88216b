//! The two-band kernels: one vector pair folded into the aggregate, on AVX-512 ([`avx512`]),
//! on AVX2 and FMA ([`avx2`]), or portably, behind one dispatch ([`kernel`]).

use super::{Acc, Op, Threshold, V};

#[cfg(target_arch = "x86_64")]
mod avx512;

/// Folds one vector pair into `acc`, with the AVX-512 kernels ([`avx512`]) or those for AVX2
/// and FMA when the CPU has them.
#[inline]
pub(super) fn kernel(op: Op, n: &[u16; V], r: &[u16; V], acc: &mut Acc) {
    #[cfg(target_arch = "x86_64")]
    {
        if avx512::available() && avx512::supports(op) {
            // SAFETY: the CPU and the op were checked just above.
            return unsafe { avx512::kernel(op, n, r, acc) };
        }
        if avx2::available() {
            // SAFETY: the CPU supports AVX2 and FMA (checked just above).
            return unsafe { avx2::kernel(op, n, r, acc) };
        }
    }
    match op {
        Op::SumNr => acc.n += u64::from(sum_nr(n, r)),
        Op::Count(t) => acc.n += u64::from(count_gt(n, r, t)),
        Op::Sum | Op::SumRecip | Op::SumNewton => acc.f += f64::from(sum_ndvi_portable(n, r)),
    }
}

/// The pixels of a vector pair with data: not both bands 0.
#[inline]
pub(super) fn valid(n: &[u16; V], r: &[u16; V]) -> u32 {
    n.iter().zip(r).map(|(&a, &b)| u32::from(a | b != 0)).sum()
}

/// SUM(N + R) of a vector: at most 1024 * 131070 < 2^32.
#[inline(always)]
pub(super) fn sum_nr(n: &[u16; V], r: &[u16; V]) -> u32 {
    n.iter()
        .zip(r)
        .map(|(&a, &b)| u32::from(a) + u32::from(b))
        .fold(0u32, u32::wrapping_add)
}

/// COUNT(N * (10000 - k) > R * (10000 + k)) of a vector.
#[inline(always)]
pub(super) fn count_gt(n: &[u16; V], r: &[u16; V], t: Threshold) -> u32 {
    if t.k >= 10000 {
        // NDVI <= 1 <= t.
        return 0;
    }
    if t.k < -10000 {
        // NDVI >= -1 > t for every pixel with data.
        return n.iter().zip(r).filter(|&(&a, &b)| a != 0 || b != 0).count() as u32;
    }
    // |k| <= 10000: both factors are in 0..=20000, products below 65535 * 20000 < 2^31.
    let a = (10000 - t.k) as i32;
    let b = (10000 + t.k) as i32;
    n.iter()
        .zip(r)
        .map(|(&x, &y)| u32::from(i32::from(x) * a > i32::from(y) * b))
        .sum()
}

/// The portable SUM(NDVI): exact division for every variant (the reciprocal estimate is an x86
/// instruction), eight partial sums as the AVX2 kernel's lanes.
pub(super) fn sum_ndvi_portable(n: &[u16; V], r: &[u16; V]) -> f32 {
    let mut lanes = [0f32; 8];
    for (a, b) in n.chunks_exact(8).zip(r.chunks_exact(8)) {
        for i in 0..8 {
            let (x, y) = (f32::from(a[i]), f32::from(b[i]));
            // No-data pixels (x = y = 0) divide 0 by 1.
            lanes[i] += (x - y) / (x + y).max(1.0);
        }
    }
    lanes.iter().sum()
}

#[cfg(target_arch = "x86_64")]
mod avx2;
