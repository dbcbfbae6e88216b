//! The two-band kernels on CPUs with AVX2 and FMA: a vector pair folded 32 pixels at a time
//! in 256-bit registers.

use std::arch::x86_64::*;

use super::{Acc, Op, V, count_gt, sum_nr};

/// Whether the CPU runs these kernels.
pub(super) fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
}

/// [`super::kernel`] for AVX2 and FMA: SUM(NDVI) in four accumulators of eight f32 lanes,
/// COUNT in 32-bit lanes; one loop per op.
#[target_feature(enable = "avx2,fma")]
pub(super) fn kernel(op: Op, n: &[u16; V], r: &[u16; V], acc: &mut Acc) {
    match op {
        // The compiler's own vectorisation of the portable sum was the faster one.
        Op::SumNr => acc.n += u64::from(sum_nr(n, r)),
        Op::Count(t) if t.k.abs() <= 10000 => {
            // As in `count_gt`: factors in 0..=20000, products below 2^31.
            acc.n += u64::from(count(n, r, (10000 - t.k) as i32, (10000 + t.k) as i32))
        }
        Op::Count(t) => acc.n += u64::from(count_gt(n, r, t)),
        Op::SumRecip => acc.f += f64::from(sum_ndvi::<RECIP>(n, r)),
        Op::SumNewton => acc.f += f64::from(sum_ndvi::<NEWTON>(n, r)),
        Op::Sum => acc.f += f64::from(sum_ndvi::<DIVIDE>(n, r)),
    }
}

const DIVIDE: u8 = 0;
const RECIP: u8 = 1;
const NEWTON: u8 = 2;

/// SUM(NDVI) of a vector, the quotient by `Q` (one of the three constants above).
#[inline]
#[target_feature(enable = "avx2,fma")]
fn sum_ndvi<const Q: u8>(n: &[u16; V], r: &[u16; V]) -> f32 {
    let one = _mm256_set1_ps(1.0);
    let two = _mm256_set1_ps(2.0);
    let mut lanes = [_mm256_setzero_ps(); 4];
    for i in (0..V).step_by(32) {
        for (j, a) in lanes.iter_mut().enumerate() {
            let k = i + 8 * j;
            let (x, y) = (ps8(n, k), ps8(r, k));
            // N + R is a whole number: at least 1 unless both are 0 (no data), whose
            // difference 0 divided by 1 adds nothing (no mask, no 0 / 0).
            let s = _mm256_max_ps(_mm256_add_ps(x, y), one);
            let d = _mm256_sub_ps(x, y);
            let q = match Q {
                RECIP => _mm256_mul_ps(d, _mm256_rcp_ps(s)),
                NEWTON => {
                    let e = _mm256_rcp_ps(s);
                    let e = _mm256_mul_ps(e, _mm256_fnmadd_ps(s, e, two));
                    _mm256_mul_ps(d, e)
                }
                _ => _mm256_div_ps(d, s),
            };
            *a = _mm256_add_ps(*a, q);
        }
    }
    let s = _mm256_add_ps(
        _mm256_add_ps(lanes[0], lanes[1]),
        _mm256_add_ps(lanes[2], lanes[3]),
    );
    let mut out = [0f32; 8];
    // SAFETY: `out` has room for eight f32.
    unsafe { _mm256_storeu_ps(out.as_mut_ptr(), s) };
    out.iter().sum()
}

/// The eight 32-bit lanes of four registers added up (wrapping).
#[inline]
#[target_feature(enable = "avx2,fma")]
fn total(a: &[__m256i; 4]) -> u32 {
    let s = _mm256_add_epi32(_mm256_add_epi32(a[0], a[1]), _mm256_add_epi32(a[2], a[3]));
    let mut out = [0u32; 8];
    // SAFETY: `out` has room for eight u32.
    unsafe { _mm256_storeu_si256(out.as_mut_ptr().cast(), s) };
    out.iter().fold(0u32, |a, &b| a.wrapping_add(b))
}

/// Eight pixels from `k` as 32-bit lanes.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn load8(b: &[u16; V], k: usize) -> __m256i {
    let s = &b[k..k + 8];
    // SAFETY: `s` holds 8 values (16 bytes).
    _mm256_cvtepu16_epi32(unsafe { _mm_loadu_si128(s.as_ptr().cast()) })
}

/// Eight pixels from `k` as f32 lanes.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn ps8(b: &[u16; V], k: usize) -> __m256 {
    _mm256_cvtepi32_ps(load8(b, k))
}

/// COUNT(N * a > R * b) of a vector (`a`, `b` in 0..=20000).
#[inline]
#[target_feature(enable = "avx2,fma")]
fn count(n: &[u16; V], r: &[u16; V], a: i32, b: i32) -> u32 {
    let (va, vb) = (_mm256_set1_epi32(a), _mm256_set1_epi32(b));
    let mut c = [_mm256_setzero_si256(); 4];
    for k in (0..V).step_by(32) {
        for (j, c) in c.iter_mut().enumerate() {
            let x = _mm256_mullo_epi32(load8(n, k + 8 * j), va);
            let y = _mm256_mullo_epi32(load8(r, k + 8 * j), vb);
            // A passing pixel's mask is -1: subtracting it counts it.
            *c = _mm256_sub_epi32(*c, _mm256_cmpgt_epi32(x, y));
        }
    }
    total(&c)
}
