//! The byte decoder on AVX-512: 16 lanes per vector, two vectors per step, the table read by a
//! gather and the refill words placed by an expand (the CPU's form of the warp's ballot and
//! prefix count). Bit-identical to [`super::step_u8`], which the tests check.

use super::{Block, ByteBlock, LANES, PRECISION, STATE_LOW, TOTAL};
use std::arch::x86_64::*;
use zipflow_core::Int;

/// Whether this CPU runs [`run`].
pub(super) fn available() -> bool {
    is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("popcnt")
}

/// Refills the lanes of `y` below 2^16 from `words` at `*pos` in lane order (at least 16
/// words must exist there).
#[inline]
#[target_feature(enable = "avx512f,popcnt")]
fn refill(y: __m512i, words: &[u16], pos: &mut usize) -> __m512i {
    let need = _mm512_cmplt_epu32_mask(y, _mm512_set1_epi32(STATE_LOW as i32));
    debug_assert!(*pos + 16 <= words.len());
    // SAFETY: the caller guarantees 16 words at `*pos`.
    let w = unsafe { _mm256_loadu_si256(words.as_ptr().add(*pos).cast()) };
    let w = _mm512_maskz_expand_epi32(need, _mm512_cvtepu16_epi32(w));
    *pos += need.count_ones() as usize;
    _mm512_mask_or_epi32(y, need, _mm512_slli_epi32::<16>(y), w)
}

/// One vector of 16 lanes: decodes a symbol from each state and refills; returns the
/// table entries (the symbol in the low byte).
#[inline]
#[target_feature(enable = "avx512f,popcnt")]
fn symbol(
    table: &[u32; TOTAL as usize],
    x: &mut __m512i,
    words: &[u16],
    pos: &mut usize,
) -> __m512i {
    let slot = _mm512_and_si512(*x, _mm512_set1_epi32((TOTAL - 1) as i32));
    // SAFETY: every index is `slot <= 4095`, inside the 4096-entry table.
    let e = unsafe { _mm512_i32gather_epi32::<4>(slot, table.as_ptr().cast()) };
    let f = _mm512_srli_epi32::<20>(e);
    let bias = _mm512_and_si512(
        _mm512_srli_epi32::<8>(e),
        _mm512_set1_epi32((TOTAL - 1) as i32),
    );
    let y = _mm512_add_epi32(
        _mm512_mullo_epi32(f, _mm512_srli_epi32::<PRECISION>(*x)),
        bias,
    );
    *x = refill(y, words, pos);
    e
}

/// Byte symbols of 16 lanes.
#[inline]
#[target_feature(enable = "avx512f,popcnt")]
fn half(table: &[u32; TOTAL as usize], x: &mut __m512i, words: &[u16], pos: &mut usize) -> __m128i {
    _mm512_cvtepi32_epi8(symbol(table, x, words, pos))
}

/// Decodes whole steps of `N` `u16`/`u32` blocks (`NPHASES` phases) in lockstep while
/// each has a step whose words surely exist.
#[target_feature(enable = "avx512f,popcnt")]
pub(super) fn run_wide<T: Int, const NPHASES: usize, const N: usize>(
    table: &[u32; TOTAL as usize],
    blocks: &mut [Block<'_, T>; N],
) {
    const { assert!(size_of::<T>() == 2 || size_of::<T>() == 4) };
    let mut vs = [[_mm512_setzero_si512(); 2]; N];
    for (b, v) in blocks.iter().zip(vs.iter_mut()) {
        // SAFETY: `x` holds 32 u32s, two unaligned 64-byte loads.
        *v = unsafe {
            [
                _mm512_loadu_si512(b.x.as_ptr().cast()),
                _mm512_loadu_si512(b.x.as_ptr().add(16).cast()),
            ]
        };
    }
    let one = _mm512_set1_epi32(1);
    while blocks.iter().all(|b| b.can_step_phases(NPHASES)) {
        for (blk, v) in blocks.iter_mut().zip(vs.iter_mut()) {
            // `can_step_phases`: 32 words per phase at `pos`, 16 for each half.
            let (words, pos) = (blk.words, &mut blk.pos);
            let mut bucket = [_mm512_setzero_si512(); 2];
            for (b, x) in bucket.iter_mut().zip(v.iter_mut()) {
                *b = _mm512_and_si512(symbol(table, x, words, pos), _mm512_set1_epi32(0xff));
            }
            if NPHASES == 1 {
                for (h, b) in bucket.iter().enumerate() {
                    // SAFETY: as for the stores below.
                    unsafe { store_lanes::<T>(blk.out.as_mut_ptr().add(blk.done + 16 * h), *b) };
                }
                blk.done += LANES;
                continue;
            }
            let mut val = [_mm512_setzero_si512(); 2];
            let mut nb = [_mm512_setzero_si512(); 2];
            for ((b, x), (val, nb)) in bucket
                .iter()
                .zip(v.iter_mut())
                .zip(val.iter_mut().zip(nb.iter_mut()))
            {
                // Buckets from 16 carry `b / 4 - 2` bypass bits above a base of
                // `(4 + b % 4) << nb`; smaller ones are their value.
                let large = _mm512_cmpge_epu32_mask(*b, _mm512_set1_epi32(16));
                *nb =
                    _mm512_maskz_sub_epi32(large, _mm512_srli_epi32::<2>(*b), _mm512_set1_epi32(2));
                let base = _mm512_mask_sllv_epi32(
                    *b,
                    large,
                    _mm512_add_epi32(
                        _mm512_set1_epi32(4),
                        _mm512_and_si512(*b, _mm512_set1_epi32(3)),
                    ),
                    *nb,
                );
                let k = _mm512_min_epu32(*nb, _mm512_set1_epi32(16));
                let low = _mm512_and_si512(*x, _mm512_sub_epi32(_mm512_sllv_epi32(one, k), one));
                *val = _mm512_or_si512(base, low);
                *x = refill(_mm512_srlv_epi32(*x, k), words, pos);
            }
            if NPHASES >= 3 {
                for (x, (val, nb)) in v.iter_mut().zip(val.iter_mut().zip(nb.iter())) {
                    let k = _mm512_sub_epi32(*nb, _mm512_min_epu32(*nb, _mm512_set1_epi32(16)));
                    let high =
                        _mm512_and_si512(*x, _mm512_sub_epi32(_mm512_sllv_epi32(one, k), one));
                    *val = _mm512_or_si512(*val, _mm512_slli_epi32::<16>(high));
                    *x = refill(_mm512_srlv_epi32(*x, k), words, pos);
                }
            }
            for (h, val) in val.iter().enumerate() {
                // SAFETY: `can_step_phases` left 32 values at `done`; this writes 16 at
                // `done + 16 h`.
                unsafe { store_lanes::<T>(blk.out.as_mut_ptr().add(blk.done + 16 * h), *val) };
            }
            blk.done += LANES;
        }
    }
    for (b, v) in blocks.iter_mut().zip(vs.iter()) {
        // SAFETY: as for the loads.
        unsafe {
            _mm512_storeu_si512(b.x.as_mut_ptr().cast(), v[0]);
            _mm512_storeu_si512(b.x.as_mut_ptr().add(16).cast(), v[1]);
        }
    }
}

/// Stores 16 lanes of `val` at `o` as u16 or u32 values.
///
/// # Safety
/// `o` has room for 16 `T`s, and `T` is 2 or 4 bytes wide.
#[inline]
#[target_feature(enable = "avx512f,popcnt")]
unsafe fn store_lanes<T: Int>(o: *mut T, val: __m512i) {
    // SAFETY: the caller's contract.
    unsafe {
        if size_of::<T>() == 2 {
            _mm256_storeu_si256(o.cast(), _mm512_cvtepi32_epi16(val));
        } else {
            _mm512_storeu_si512(o.cast(), val);
        }
    }
}

/// Decodes whole steps of `N` blocks in lockstep while each has a step whose words surely
/// exist.
#[target_feature(enable = "avx512f,popcnt")]
pub(super) fn run<const N: usize>(table: &[u32; TOTAL as usize], blocks: &mut [ByteBlock<'_>; N]) {
    let mut v = [[_mm512_setzero_si512(); 2]; N];
    for (b, v) in blocks.iter().zip(v.iter_mut()) {
        // SAFETY: `x` holds 32 u32s, two unaligned 64-byte loads.
        *v = unsafe {
            [
                _mm512_loadu_si512(b.x.as_ptr().cast()),
                _mm512_loadu_si512(b.x.as_ptr().add(16).cast()),
            ]
        };
    }
    while blocks.iter().all(ByteBlock::can_step) {
        for (b, v) in blocks.iter_mut().zip(v.iter_mut()) {
            // `can_step`: 32 words at `pos`, 16 for each half.
            let lo = half(table, &mut v[0], b.words, &mut b.pos);
            let hi = half(table, &mut v[1], b.words, &mut b.pos);
            // SAFETY: `can_step` checked `done + 32 <= out.len()`; two 16-byte stores.
            unsafe {
                let o = b.out.as_mut_ptr().add(b.done);
                _mm_storeu_si128(o.cast(), lo);
                _mm_storeu_si128(o.add(16).cast(), hi);
            }
            b.done += LANES;
        }
    }
    for (b, v) in blocks.iter_mut().zip(v.iter()) {
        // SAFETY: as for the loads.
        unsafe {
            _mm512_storeu_si512(b.x.as_mut_ptr().cast(), v[0]);
            _mm512_storeu_si512(b.x.as_mut_ptr().add(16).cast(), v[1]);
        }
    }
}
