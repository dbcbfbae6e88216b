//! The fused kernels written with AVX2: a row of one vector is four 256-bit registers, each
//! compared at once (unsigned `<=` as `min(a, b) == a`, or as a signed compare with the
//! sign bits flipped for 64-bit lanes) and its lane masks gathered into bits with a
//! `movemask`. The portable kernels compiled for AVX2 leave LLVM to assemble those bits,
//! which it does a bit at a time.

use std::arch::x86_64::*;
use std::mem::MaybeUninit;

macro_rules! kernel {
    ($name:ident, $row:ident, $t:ty, $splat:ident, $shr:ident, $shl:ident, $sub:ident,
     $le:ident, $bits:ident) => {
        /// The `width`-bit fields of row `row` of every lane (`vmask` keeps `width` bits),
        /// in four registers: lanes `h * V ..` in register `h`.
        #[inline]
        #[target_feature(enable = "avx2")]
        fn $row(packed: &[$t], width: usize, row: usize, vmask: __m256i) -> [__m256i; 4] {
            const T: usize = <$t>::BITS as usize;
            const LANES: usize = 1024 / T;
            const V: usize = 256 / T;
            let bit = row * width;
            let (k, s) = (bit / T, bit % T);
            let lo = &packed[k * LANES..(k + 1) * LANES];
            let spill = s + width > T;
            let hi = if spill {
                &packed[(k + 1) * LANES..(k + 2) * LANES]
            } else {
                lo
            };
            let mut v = [_mm256_setzero_si256(); 4];
            for (h, v) in v.iter_mut().enumerate() {
                // SAFETY: `lo` and `hi` hold `LANES == 4 * V` values; this reads values
                // `h * V .. (h + 1) * V` of each (unaligned loads).
                let (a, b) = unsafe {
                    (
                        _mm256_loadu_si256(lo.as_ptr().add(h * V).cast()),
                        _mm256_loadu_si256(hi.as_ptr().add(h * V).cast()),
                    )
                };
                let mut x = $shr(a, s as u32);
                if spill {
                    x = _mm256_or_si256(x, $shl(b, (T - s) as u32));
                }
                *v = _mm256_and_si256(x, vmask);
            }
            v
        }

        /// As the portable kernel of the same type.
        #[target_feature(enable = "avx2")]
        pub(super) fn $name(
            packed: &[$t],
            width: usize,
            l: $t,
            span: $t,
            limit: $t,
            out: &mut [u64; 16],
        ) -> bool {
            const T: usize = <$t>::BITS as usize;
            const LANES: usize = 1024 / T;
            let fmask: $t = if width >= T {
                <$t>::MAX
            } else {
                ((1 as $t) << width) - 1
            };
            let (vl, vspan, vlim, vmask) = ($splat(l), $splat(span), $splat(limit), $splat(fmask));
            let ones = _mm256_set1_epi8(-1);
            let mut over = _mm256_setzero_si256();
            // Without a code bound to check, skip that compare.
            let check = limit != <$t>::MAX;
            *out = [0; 16];
            for row in 0..T {
                let base = fastlanes::FL_ORDER[row / 8] * 16 + (row % 8) * 128;
                let mut m = [_mm256_setzero_si256(); 4];
                for (m, &v) in m.iter_mut().zip(&$row(packed, width, row, vmask)) {
                    *m = $le($sub(v, vl), vspan);
                    if check {
                        over = _mm256_or_si256(over, _mm256_xor_si256($le(v, vlim), ones));
                    }
                }
                let bits: u128 = $bits(&m);
                if LANES >= 64 {
                    // One word (16-bit lanes) or two (bytes).
                    out[base / 64] |= bits as u64;
                    if LANES == 128 {
                        out[base / 64 + 1] |= (bits >> 64) as u64;
                    }
                } else {
                    out[base / 64] |= (bits as u64) << (base % 64);
                }
            }
            _mm256_testz_si256(over, over) == 0
        }
    };
}

#[inline]
#[target_feature(enable = "avx2")]
fn count(s: u32) -> __m128i {
    _mm_cvtsi32_si128(s as i32)
}

macro_rules! ops {
    ($t:ty, $splat:ident, $set1:ident, $st:ty, $shr:ident, $srl:ident, $shl:ident, $sll:ident,
     $sub:ident, $vsub:ident) => {
        #[inline]
        #[target_feature(enable = "avx2")]
        fn $splat(x: $t) -> __m256i {
            $set1(x as $st)
        }
        #[inline]
        #[target_feature(enable = "avx2")]
        fn $shr(a: __m256i, s: u32) -> __m256i {
            $srl(a, count(s))
        }
        #[inline]
        #[target_feature(enable = "avx2")]
        fn $shl(a: __m256i, s: u32) -> __m256i {
            $sll(a, count(s))
        }
        #[inline]
        #[target_feature(enable = "avx2")]
        fn $sub(a: __m256i, b: __m256i) -> __m256i {
            $vsub(a, b)
        }
    };
}

ops!(
    u64,
    splat64,
    _mm256_set1_epi64x,
    i64,
    shr64,
    _mm256_srl_epi64,
    shl64,
    _mm256_sll_epi64,
    sub64,
    _mm256_sub_epi64
);
ops!(
    u32,
    splat32,
    _mm256_set1_epi32,
    i32,
    shr32,
    _mm256_srl_epi32,
    shl32,
    _mm256_sll_epi32,
    sub32,
    _mm256_sub_epi32
);
ops!(
    u16,
    splat16,
    _mm256_set1_epi16,
    i16,
    shr16,
    _mm256_srl_epi16,
    shl16,
    _mm256_sll_epi16,
    sub16,
    _mm256_sub_epi16
);

// Bytes: no 8-bit shifts, so shift 16-bit words and clear the bits that crossed bytes.
#[inline]
#[target_feature(enable = "avx2")]
fn splat8(x: u8) -> __m256i {
    _mm256_set1_epi8(x as i8)
}
#[inline]
#[target_feature(enable = "avx2")]
fn shr8(a: __m256i, s: u32) -> __m256i {
    _mm256_and_si256(_mm256_srl_epi16(a, count(s)), splat8(0xFF >> s))
}
#[inline]
#[target_feature(enable = "avx2")]
fn shl8(a: __m256i, s: u32) -> __m256i {
    _mm256_and_si256(_mm256_sll_epi16(a, count(s)), splat8((0xFFu32 << s) as u8))
}
#[inline]
#[target_feature(enable = "avx2")]
fn sub8(a: __m256i, b: __m256i) -> __m256i {
    _mm256_sub_epi8(a, b)
}

// Unsigned `a <= b` as lane masks.
#[inline]
#[target_feature(enable = "avx2")]
fn le8(a: __m256i, b: __m256i) -> __m256i {
    _mm256_cmpeq_epi8(_mm256_min_epu8(a, b), a)
}
#[inline]
#[target_feature(enable = "avx2")]
fn le16(a: __m256i, b: __m256i) -> __m256i {
    _mm256_cmpeq_epi16(_mm256_min_epu16(a, b), a)
}
#[inline]
#[target_feature(enable = "avx2")]
fn le32(a: __m256i, b: __m256i) -> __m256i {
    _mm256_cmpeq_epi32(_mm256_min_epu32(a, b), a)
}
#[inline]
#[target_feature(enable = "avx2")]
fn le64(a: __m256i, b: __m256i) -> __m256i {
    let sign = _mm256_set1_epi64x(i64::MIN);
    let gt = _mm256_cmpgt_epi64(_mm256_xor_si256(a, sign), _mm256_xor_si256(b, sign));
    _mm256_xor_si256(gt, _mm256_set1_epi8(-1))
}

// Four registers' lane masks as `LANES` bits, register `h`'s lanes at `h * V`.
#[inline]
#[target_feature(enable = "avx2")]
fn bits8(m: &[__m256i; 4]) -> u128 {
    m.iter().enumerate().fold(0u128, |acc, (h, &x)| {
        acc | u128::from(_mm256_movemask_epi8(x) as u32) << (32 * h)
    })
}
#[inline]
#[target_feature(enable = "avx2")]
fn bits16(m: &[__m256i; 4]) -> u128 {
    // Packing two registers of 16-bit masks into bytes interleaves their 128-bit halves;
    // the permute puts them back in order.
    let pair = |a: __m256i, b: __m256i| {
        let packed = _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_packs_epi16(a, b));
        u128::from(_mm256_movemask_epi8(packed) as u32)
    };
    pair(m[0], m[1]) | (pair(m[2], m[3]) << 32)
}
#[inline]
#[target_feature(enable = "avx2")]
fn bits32(m: &[__m256i; 4]) -> u128 {
    m.iter().enumerate().fold(0u128, |acc, (h, &x)| {
        acc | u128::from(_mm256_movemask_ps(_mm256_castsi256_ps(x)) as u32) << (8 * h)
    })
}
#[inline]
#[target_feature(enable = "avx2")]
fn bits64(m: &[__m256i; 4]) -> u128 {
    m.iter().enumerate().fold(0u128, |acc, (h, &x)| {
        acc | u128::from(_mm256_movemask_pd(_mm256_castsi256_pd(x)) as u32) << (4 * h)
    })
}

kernel!(fused_u8, row8, u8, splat8, shr8, shl8, sub8, le8, bits8);
kernel!(
    fused_u16, row16, u16, splat16, shr16, shl16, sub16, le16, bits16
);
kernel!(
    fused_u32, row32, u32, splat32, shr32, shl32, sub32, le32, bits32
);
kernel!(
    fused_u64_wide,
    row64,
    u64,
    splat64,
    shr64,
    shl64,
    sub64,
    le64,
    bits64
);

/// As the portable kernel of the same type. Fields of up to 32 bits compared against a
/// range that does not wrap are compared in 32-bit lanes: each lane's stream of 64-bit
/// words holds the same bits as a stream of twice as many 32-bit words (low half first),
/// so the words are split into halves once, and every row is then two registers of eight
/// fields (not four of four narrowed row by row), with no 64-bit unsigned compare.
#[target_feature(enable = "avx2")]
pub(super) fn fused_u64(
    packed: &[u64],
    width: usize,
    l: u64,
    span: u64,
    limit: u64,
    out: &mut [u64; 16],
) -> bool {
    const LANES: usize = 16;
    let max = u64::from(u32::MAX);
    let Some(hi) = l.checked_add(span) else {
        return fused_u64_wide(packed, width, l, span, limit, out);
    };
    if width == 0 || width > 32 || l > max || packed.len() != LANES * width {
        return fused_u64_wide(packed, width, l, span, limit, out);
    }
    // Fields below 2^32: the range past u32::MAX and a code bound past it change nothing.
    let (l32, span32, lim32) = (l as u32, (hi.min(max) - l) as u32, limit.min(max) as u32);
    let fmask = if width == 32 {
        u32::MAX
    } else {
        (1u32 << width) - 1
    };
    let (vl, vspan, vlim) = (splat32(l32), splat32(span32), splat32(lim32));
    let vmask = splat32(fmask);
    let ones = _mm256_set1_epi8(-1);
    let mut over = _mm256_setzero_si256();
    let check = limit < max;
    // Even 32-bit elements of two registers are their words' low halves, odd ones the
    // high halves; the permute restores lane order across the 128-bit halves.
    let split = |x: __m256, y: __m256| {
        let lo = _mm256_shuffle_ps::<0b10_00_10_00>(x, y);
        let hi = _mm256_shuffle_ps::<0b11_01_11_01>(x, y);
        (
            _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_castps_si256(lo)),
            _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_castps_si256(hi)),
        )
    };
    // halves[2k + h][g]: half `h` (0 low, 1 high) of word `k` of lanes `8g .. 8g + 8`.
    // Only the first `2 * width` are written and read: zeroing all 4 KiB cost more than
    // the rows' compares at narrow widths.
    let mut halves = [MaybeUninit::<[__m256i; 2]>::uninit(); 64];
    for k in 0..width {
        let at = |g: usize| {
            // SAFETY: `packed.len() == 16 * width` (checked above) and `k < width`: words
            // `16k + 4g .. 16k + 4g + 4` are in bounds for `g < 4`.
            let p = unsafe { packed.as_ptr().add(LANES * k + 4 * g) };
            // SAFETY: `p` points at four readable words (above).
            _mm256_castsi256_ps(unsafe { _mm256_loadu_si256(p.cast()) })
        };
        let ((lo0, hi0), (lo1, hi1)) = (split(at(0), at(1)), split(at(2), at(3)));
        halves[2 * k].write([lo0, lo1]);
        halves[2 * k + 1].write([hi0, hi1]);
    }
    *out = [0; 16];
    for row in 0..64 {
        let base = fastlanes::FL_ORDER[row / 8] * 16 + (row % 8) * 128;
        let bit = row * width;
        let (k, s) = (bit / 32, (bit % 32) as u32);
        // SAFETY: `k < 2 * width` (bit < 64 * width): written above.
        let lo = unsafe { halves[k].assume_init() };
        let mut n = [shr32(lo[0], s), shr32(lo[1], s)];
        if s as usize + width > 32 {
            // The last field ends at bit 64 * width, the end of half 2 * width - 1, so a
            // field that spills reads a half that was filled.
            // SAFETY: as just said, `k + 1 < 2 * width`.
            let up = unsafe { halves[k + 1].assume_init() };
            n[0] = _mm256_or_si256(n[0], shl32(up[0], 32 - s));
            n[1] = _mm256_or_si256(n[1], shl32(up[1], 32 - s));
        }
        let (n0, n1) = (_mm256_and_si256(n[0], vmask), _mm256_and_si256(n[1], vmask));
        let (m0, m1) = (le32(sub32(n0, vl), vspan), le32(sub32(n1, vl), vspan));
        let bits = _mm256_movemask_ps(_mm256_castsi256_ps(m0)) as u64
            | ((_mm256_movemask_ps(_mm256_castsi256_ps(m1)) as u64) << 8);
        out[base / 64] |= bits << (base % 64);
        if check {
            let fits = _mm256_and_si256(le32(n0, vlim), le32(n1, vlim));
            over = _mm256_or_si256(over, _mm256_xor_si256(fits, ones));
        }
    }
    _mm256_testz_si256(over, over) == 0
}

/// Whether the CPU runs these kernels.
pub(super) fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx2")
}
