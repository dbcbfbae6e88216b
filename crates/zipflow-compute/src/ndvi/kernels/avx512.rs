//! The two-band kernels on CPUs with AVX-512: a vector pair folded 64 pixels at a time in
//! 512-bit registers (the AVX2 kernels fold 32 at a time).
//!
//! Both the plain and the fused path fold through these, so their answers stay equal bit for
//! bit. The fused path still unpacks each band's vector into L1 first: decoding both bands a
//! row at a time straight into registers was measured and not kept, because the row unpacker
//! then takes the width at run time (one function a pair of band widths would be 256 an op)
//! and was slower than the unrolled constant-shift unpacker plus the L1 round trip.

use super::{Acc, Op, V};
use std::arch::x86_64::*;

/// Pixels a block (two registers of 32 u16).
const BLOCK: usize = 64;

/// The op kinds, as const parameters of the kernels.
const SUM_NR: u8 = 0;
const COUNT: u8 = 1;
const DIVIDE: u8 = 2;
const RECIP: u8 = 3;
const NEWTON: u8 = 4;

/// Whether the CPU runs these kernels (AVX-512 F and BW).
pub(super) fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512bw")
}

/// Whether `op` has a kernel here: COUNT only for |t| <= 1 (beyond, the answer does not
/// depend on the division, and the portable kernel handles it).
pub(super) fn supports(op: Op) -> bool {
    !matches!(op, Op::Count(t) if t.k.abs() > 10000)
}

/// COUNT's constants: the i16 factor pair `(10000 - k, -(10000 + k))` in each 32-bit lane,
/// and the bound `65536 k` its biased products are compared with (unused by the other ops).
#[derive(Clone, Copy)]
struct Params {
    factors: __m512i,
    bound: __m512i,
}

/// The accumulators of one vector.
#[derive(Clone, Copy)]
struct Regs {
    i: [__m512i; 2],
    f: [__m512; 4],
}

/// Pixels `64 * j .. 64 * (j + 1)` of a vector.
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn block(v: &[u16; V], j: usize) -> [__m512i; 2] {
    assert!(j < V / BLOCK);
    // SAFETY: j < 16 (asserted), so 64 * j + 64 <= V: two loads of 32 u16 inside the vector.
    unsafe {
        let p = v.as_ptr().add(BLOCK * j);
        [
            _mm512_loadu_si512(p.cast()),
            _mm512_loadu_si512(p.add(32).cast()),
        ]
    }
}

/// The 16 pixels of quarter `q` (0..4) of a block as 32-bit lanes.
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn widen(b: &[__m512i; 2], q: usize) -> __m512i {
    let r = b[q / 2];
    _mm512_cvtepu16_epi32(if q.is_multiple_of(2) {
        _mm512_castsi512_si256(r)
    } else {
        _mm512_extracti64x4_epi64::<1>(r)
    })
}

/// Half `q` (0: low, 1: high) of each 128-bit lane of `a` and `b`, interleaved into 32-bit
/// lanes: `a` in the low 16 bits, `b` in the high. Both bands go through the same
/// interleaving, so pixel pairs stay lined up (in an order the sums do not depend on).
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn interleave(a: __m512i, b: __m512i, q: usize) -> __m512i {
    if q == 0 {
        _mm512_unpacklo_epi16(a, b)
    } else {
        _mm512_unpackhi_epi16(a, b)
    }
}

/// Folds a block pair (64 pixels) into the accumulators of op kind `K`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn fold<const K: u8>(s: &mut Regs, n: [__m512i; 2], r: [__m512i; 2], p: Params) {
    match K {
        SUM_NR => {
            // Pairs of u16 added in i32 lanes by a multiply-add with ones, each biased by
            // -32768 to fit i16 (undone in `finish`).
            let bias = _mm512_set1_epi16(i16::MIN);
            let ones = _mm512_set1_epi16(1);
            for h in 0..2 {
                let x = _mm512_madd_epi16(_mm512_xor_si512(n[h], bias), ones);
                let y = _mm512_madd_epi16(_mm512_xor_si512(r[h], bias), ones);
                s.i[h] = _mm512_add_epi32(s.i[h], _mm512_add_epi32(x, y));
            }
        }
        COUNT => {
            // N a > R b with N = N' + 32768 (N' the pixel biased to i16), a = 10000 - k and
            // b = 10000 + k: N' a - R' b > 32768 (b - a) = 65536 k. One multiply-add of the
            // interleaved pair (N', R') with (a, -b) gives the left side; its products stay
            // within 32768 * 20000 each, so the sum fits i32.
            let bias = _mm512_set1_epi16(i16::MIN);
            let one = _mm512_set1_epi32(1);
            for h in 0..2 {
                let (x, y) = (_mm512_xor_si512(n[h], bias), _mm512_xor_si512(r[h], bias));
                for q in 0..2 {
                    let lhs = _mm512_madd_epi16(interleave(x, y, q), p.factors);
                    let m = _mm512_cmpgt_epi32_mask(lhs, p.bound);
                    s.i[q] = _mm512_mask_add_epi32(s.i[q], m, s.i[q], one);
                }
            }
        }
        DIVIDE => {
            // Bound by the divider, which shares a port with the multiply-adds: converting
            // with the conversion unit (below, the work moves to the multiply-adds) keeps it fed.
            let one = _mm512_set1_ps(1.0);
            for q in 0..4 {
                let x = _mm512_cvtepi32_ps(widen(&n, q));
                let y = _mm512_cvtepi32_ps(widen(&r, q));
                // N + R is a whole number: at least 1 unless both are 0 (no data), whose
                // difference 0 divided by 1 adds nothing.
                let sum = _mm512_max_ps(_mm512_add_ps(x, y), one);
                let d = _mm512_sub_ps(x, y);
                s.f[q] = _mm512_add_ps(s.f[q], _mm512_div_ps(d, sum));
            }
        }
        RECIP | NEWTON => {
            // Each u16 under the high half 0x4B00 is the f32 2^23 + v, exactly: no
            // conversion instructions. N - R is then one exact subtraction, and N + R is
            // (2^23 + N) + (2^23 + R - 2^24), exact at both steps (integers below 2^24). The
            // work is split between the adder and the multiply-add units: the sum's last step
            // and the accumulation are multiply-adds (x * 1 + t rounds once, exactly).
            let magic = _mm512_set1_epi16(0x4B00);
            let two_24 = _mm512_set1_ps(16_777_216.0);
            let one = _mm512_set1_ps(1.0);
            for h in 0..2 {
                for q in 0..2 {
                    let x = _mm512_castsi512_ps(interleave(n[h], magic, q));
                    let y = _mm512_castsi512_ps(interleave(r[h], magic, q));
                    let d = _mm512_sub_ps(x, y);
                    let sum = _mm512_fmadd_ps(x, one, _mm512_sub_ps(y, two_24));
                    // As above: 0 / 1 where both bands are 0.
                    let sum = _mm512_max_ps(sum, one);
                    let acc = &mut s.f[2 * h + q];
                    let e = _mm512_rcp14_ps(sum);
                    let e = if K == NEWTON {
                        _mm512_mul_ps(e, _mm512_fnmadd_ps(sum, e, _mm512_set1_ps(2.0)))
                    } else {
                        e
                    };
                    *acc = _mm512_fmadd_ps(d, e, *acc);
                }
            }
        }
        _ => unreachable!("op kind {K}"),
    }
}

/// Adds a vector's accumulators of op kind `K` to `acc`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn finish<const K: u8>(s: Regs, acc: &mut Acc) {
    match K {
        SUM_NR => {
            // V / 2 pairs a band, each biased by -65536; the sum is at most V * 131070 < 2^32
            // once the bias is undone.
            let biased = i64::from(_mm512_reduce_add_epi32(_mm512_add_epi32(s.i[0], s.i[1])));
            acc.n += (biased + V as i64 * 65536) as u64;
        }
        COUNT => {
            let c = _mm512_reduce_add_epi32(_mm512_add_epi32(s.i[0], s.i[1]));
            acc.n += u64::from(c as u32);
        }
        _ => {
            let f = _mm512_add_ps(_mm512_add_ps(s.f[0], s.f[1]), _mm512_add_ps(s.f[2], s.f[3]));
            acc.f += f64::from(_mm512_reduce_add_ps(f));
        }
    }
}

#[target_feature(enable = "avx512f,avx512bw")]
fn vector<const K: u8>(n: &[u16; V], r: &[u16; V], p: Params, acc: &mut Acc) {
    let mut s = Regs {
        i: [_mm512_setzero_si512(); 2],
        f: [_mm512_setzero_ps(); 4],
    };
    for j in 0..V / BLOCK {
        fold::<K>(&mut s, block(n, j), block(r, j), p);
    }
    finish::<K>(s, acc);
}

/// Folds a vector pair into `acc`.
///
/// # Safety
/// The CPU must support AVX-512 F and BW ([`available`]); `op` must be one [`supports`].
#[target_feature(enable = "avx512f,avx512bw")]
pub(super) unsafe fn kernel(op: Op, n: &[u16; V], r: &[u16; V], acc: &mut Acc) {
    let k = match op {
        Op::Count(t) => t.k.clamp(-10000, 10000) as i32,
        _ => 0,
    };
    let (a, b) = (10000 - k, 10000 + k);
    let p = Params {
        // Both in 0..=20000: each fits i16.
        factors: _mm512_set1_epi32((a & 0xFFFF) | (-b << 16)),
        bound: _mm512_set1_epi32(65536 * k),
    };
    match op {
        Op::SumNr => vector::<SUM_NR>(n, r, p, acc),
        Op::Count(_) => vector::<COUNT>(n, r, p, acc),
        Op::Sum => vector::<DIVIDE>(n, r, p, acc),
        Op::SumRecip => vector::<RECIP>(n, r, p, acc),
        Op::SumNewton => vector::<NEWTON>(n, r, p, acc),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ndvi::Threshold;
    use crate::ndvi::kernels::{count_gt, sum_nr};

    #[test]
    fn kernels_equal_the_portable_ones() {
        if !available() {
            return;
        }
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for round in 0..50 {
            let (mut n, mut r) = ([0u16; V], [0u16; V]);
            for i in 0..V {
                let v = next();
                (n[i], r[i]) = match (v + round) % 9 {
                    0 => (0, 0),
                    1 => (u16::MAX, u16::MAX),
                    2 => (u16::MAX, 0),
                    3 => (0, u16::MAX),
                    4 => ((13 * (v % 5000)) as u16, (7 * (v % 5000)) as u16),
                    _ => ((v >> 16) as u16, (v >> 32) as u16),
                };
            }
            for op in [Op::SumNr, Op::Count(Threshold { k: 3000 })]
                .into_iter()
                .chain([-10000, -2500, 0, 9999, 10000].map(|k| Op::Count(Threshold { k })))
            {
                let mut acc = Acc::default();
                // SAFETY: `available` was checked above; every op here is supported.
                unsafe { kernel(op, &n, &r, &mut acc) };
                let want = match op {
                    Op::SumNr => u64::from(sum_nr(&n, &r)),
                    Op::Count(t) => u64::from(count_gt(&n, &r, t)),
                    _ => unreachable!(),
                };
                assert_eq!(acc.n, want, "{op:?} round {round}");
            }
            // The SUM variants against the exact f64 sum: f32 lanes, |NDVI| <= 1.
            let exact: f64 = n
                .iter()
                .zip(&r)
                .filter(|&(&a, &b)| a != 0 || b != 0)
                .map(|(&a, &b)| (f64::from(a) - f64::from(b)) / (f64::from(a) + f64::from(b)))
                .sum();
            for (op, tolerance) in [(Op::Sum, 1e-5), (Op::SumNewton, 1e-5), (Op::SumRecip, 1e-4)] {
                let mut acc = Acc::default();
                // SAFETY: as above.
                unsafe { kernel(op, &n, &r, &mut acc) };
                let bound = tolerance * V as f64;
                assert!(
                    (acc.f - exact).abs() <= bound,
                    "{op:?}: {} vs {exact}",
                    acc.f
                );
            }
        }
    }
}
