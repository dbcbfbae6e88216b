//! The fused kernels written with AVX-512 mask compares: a row of one vector is always two
//! 512-bit registers (`LANES * T == 1024` bits), whose compares give `LANES` mask bits
//! directly (the portable kernels leave LLVM to assemble those bits, which it does poorly).

use std::arch::x86_64::*;

macro_rules! kernel {
    ($name:ident, $t:ty, $splat:ident, $shr:ident, $shl:ident, $sub:ident, $le:ident, $gt:ident) => {
        /// As the portable kernel of the same type.
        #[target_feature(enable = "avx512f,avx512bw")]
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
            const V: usize = 512 / T;
            let fmask: $t = if width >= T {
                <$t>::MAX
            } else {
                ((1 as $t) << width) - 1
            };
            let (vl, vspan, vlim, vmask) = ($splat(l), $splat(span), $splat(limit), $splat(fmask));
            let mut bad = 0u64;
            // Without a code bound to check, skip that compare.
            let check = limit != <$t>::MAX;
            *out = [0; 16];
            for row in 0..T {
                let bit = row * width;
                let (k, s) = (bit / T, bit % T);
                let base = fastlanes::FL_ORDER[row / 8] * 16 + (row % 8) * 128;
                let lo = &packed[k * LANES..(k + 1) * LANES];
                let spill = s + width > T;
                let hi = if spill {
                    &packed[(k + 1) * LANES..(k + 2) * LANES]
                } else {
                    lo
                };
                let mut m = [0u64; 2];
                for (h, m) in m.iter_mut().enumerate() {
                    // SAFETY: `lo` and `hi` hold `LANES == 2 * V` values; this reads
                    // values `h * V .. (h + 1) * V` of each (unaligned loads).
                    let (a, b) = unsafe {
                        (
                            _mm512_loadu_si512(lo.as_ptr().add(h * V).cast()),
                            _mm512_loadu_si512(hi.as_ptr().add(h * V).cast()),
                        )
                    };
                    let mut v = $shr(a, s as u32);
                    if spill {
                        v = _mm512_or_si512(v, $shl(b, (T - s) as u32));
                    }
                    v = _mm512_and_si512(v, vmask);
                    *m = $le($sub(v, vl), vspan);
                    if check {
                        bad |= $gt(v, vlim);
                    }
                }
                if V == 64 {
                    out[base / 64] |= m[0];
                    out[base / 64 + 1] |= m[1];
                } else {
                    out[base / 64] |= (m[0] | (m[1] << (V % 64))) << (base % 64);
                }
            }
            bad != 0
        }
    };
}

#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn count(s: u32) -> __m128i {
    _mm_cvtsi32_si128(s as i32)
}

macro_rules! ops {
    ($t:ty, $splat:ident, $set1:ident, $st:ty, $shr:ident, $srl:ident, $shl:ident, $sll:ident,
     $sub:ident, $vsub:ident, $le:ident, $cmple:ident, $gt:ident, $cmpgt:ident) => {
        #[inline]
        #[target_feature(enable = "avx512f,avx512bw")]
        fn $splat(x: $t) -> __m512i {
            $set1(x as $st)
        }
        #[inline]
        #[target_feature(enable = "avx512f,avx512bw")]
        fn $shr(a: __m512i, s: u32) -> __m512i {
            $srl(a, count(s))
        }
        #[inline]
        #[target_feature(enable = "avx512f,avx512bw")]
        fn $shl(a: __m512i, s: u32) -> __m512i {
            $sll(a, count(s))
        }
        #[inline]
        #[target_feature(enable = "avx512f,avx512bw")]
        fn $sub(a: __m512i, b: __m512i) -> __m512i {
            $vsub(a, b)
        }
        #[inline]
        #[target_feature(enable = "avx512f,avx512bw")]
        fn $le(a: __m512i, b: __m512i) -> u64 {
            u64::from($cmple(a, b))
        }
        #[inline]
        #[target_feature(enable = "avx512f,avx512bw")]
        fn $gt(a: __m512i, b: __m512i) -> u64 {
            u64::from($cmpgt(a, b))
        }
    };
}

ops!(
    u64,
    splat64,
    _mm512_set1_epi64,
    i64,
    shr64,
    _mm512_srl_epi64,
    shl64,
    _mm512_sll_epi64,
    sub64,
    _mm512_sub_epi64,
    le64,
    _mm512_cmple_epu64_mask,
    gt64,
    _mm512_cmpgt_epu64_mask
);
ops!(
    u32,
    splat32,
    _mm512_set1_epi32,
    i32,
    shr32,
    _mm512_srl_epi32,
    shl32,
    _mm512_sll_epi32,
    sub32,
    _mm512_sub_epi32,
    le32,
    _mm512_cmple_epu32_mask,
    gt32,
    _mm512_cmpgt_epu32_mask
);
ops!(
    u16,
    splat16,
    _mm512_set1_epi16,
    i16,
    shr16,
    _mm512_srl_epi16,
    shl16,
    _mm512_sll_epi16,
    sub16,
    _mm512_sub_epi16,
    le16,
    _mm512_cmple_epu16_mask,
    gt16,
    _mm512_cmpgt_epu16_mask
);

// Bytes: no 8-bit shifts, so shift 16-bit words and clear the bits that crossed bytes.
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn splat8(x: u8) -> __m512i {
    _mm512_set1_epi8(x as i8)
}
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn shr8(a: __m512i, s: u32) -> __m512i {
    _mm512_and_si512(_mm512_srl_epi16(a, count(s)), splat8(0xFF >> s))
}
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn shl8(a: __m512i, s: u32) -> __m512i {
    _mm512_and_si512(_mm512_sll_epi16(a, count(s)), splat8((0xFFu32 << s) as u8))
}
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn sub8(a: __m512i, b: __m512i) -> __m512i {
    _mm512_sub_epi8(a, b)
}
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn le8(a: __m512i, b: __m512i) -> u64 {
    _mm512_cmple_epu8_mask(a, b)
}
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn gt8(a: __m512i, b: __m512i) -> u64 {
    _mm512_cmpgt_epu8_mask(a, b)
}

kernel!(fused_u8, u8, splat8, shr8, shl8, sub8, le8, gt8);
kernel!(fused_u16, u16, splat16, shr16, shl16, sub16, le16, gt16);
kernel!(fused_u32, u32, splat32, shr32, shl32, sub32, le32, gt32);
kernel!(fused_u64, u64, splat64, shr64, shl64, sub64, le64, gt64);

/// Whether the CPU runs these kernels.
pub(super) fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512bw")
}
