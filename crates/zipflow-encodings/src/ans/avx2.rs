//! The byte decoder on AVX2: 8 lanes per vector, four vectors per step, the table read by a
//! gather and the refill words placed by a permutation looked up from the refill mask.
//! Bit-identical to [`super::step_u8`], which the tests check; the same step, with variable shifts
//! for the bypass bits, decodes `u16`/`u32` blocks ([`run_wide`]).

use super::{Block, ByteBlock, LANES, PRECISION, TOTAL};
use std::arch::x86_64::*;
use zipflow_core::Int;

/// Whether this CPU runs [`run`].
pub(super) fn available() -> bool {
    is_x86_feature_detected!("avx2") && is_x86_feature_detected!("popcnt")
}

/// For each 8-bit refill mask, the word each lane takes: the number of refilling lanes
/// below it.
static EXPAND: [[u32; 8]; 256] = {
    let mut t = [[0u32; 8]; 256];
    let mut m = 0;
    while m < 256 {
        let mut c = 0;
        let mut i = 0;
        while i < 8 {
            t[m][i] = c;
            c += (m >> i) as u32 & 1;
            i += 1;
        }
        m += 1;
    }
    t
};

/// One vector of 8 lanes: decodes a symbol from each state, refills from `words` at `*pos`
/// (at least 8 words must exist there), returns the 8 symbols in the low 8 bytes.
#[inline]
#[target_feature(enable = "avx2,popcnt")]
fn quarter(
    table: &[u32; TOTAL as usize],
    x: &mut __m256i,
    words: &[u16],
    pos: &mut usize,
) -> __m128i {
    let e = entries(table, x, words, pos);
    // Byte 0 of each 32-bit lane, then the two 128-bit halves side by side.
    let pick = _mm256_setr_epi8(
        0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 8, 12, -1, -1, -1, -1,
        -1, -1, -1, -1, -1, -1, -1, -1,
    );
    let b = _mm256_shuffle_epi8(e, pick);
    _mm_unpacklo_epi32(_mm256_castsi256_si128(b), _mm256_extracti128_si256::<1>(b))
}

/// One vector of 8 lanes: decodes a symbol from each state and refills from `words` at
/// `*pos` (at least 8 words must exist there); returns the table entries (the symbol in
/// the low byte).
#[inline]
#[target_feature(enable = "avx2,popcnt")]
fn entries(
    table: &[u32; TOTAL as usize],
    x: &mut __m256i,
    words: &[u16],
    pos: &mut usize,
) -> __m256i {
    let mask = _mm256_set1_epi32((TOTAL - 1) as i32);
    let slot = _mm256_and_si256(*x, mask);
    // SAFETY: every index is `slot <= 4095`, inside the 4096-entry table.
    let e = unsafe { _mm256_i32gather_epi32::<4>(table.as_ptr().cast(), slot) };
    let f = _mm256_srli_epi32::<20>(e);
    let bias = _mm256_and_si256(_mm256_srli_epi32::<8>(e), mask);
    let y = _mm256_add_epi32(
        _mm256_mullo_epi32(f, _mm256_srli_epi32::<{ PRECISION as i32 }>(*x)),
        bias,
    );
    *x = refill(y, words, pos);
    e
}

/// Refills the lanes of `y` below 2^16 from `words` at `*pos` in lane order (at least 8
/// words must exist there).
#[inline]
#[target_feature(enable = "avx2,popcnt")]
fn refill(y: __m256i, words: &[u16], pos: &mut usize) -> __m256i {
    let need = _mm256_cmpeq_epi32(_mm256_srli_epi32::<16>(y), _mm256_setzero_si256());
    let m = _mm256_movemask_ps(_mm256_castsi256_ps(need)) as usize & 0xff;
    debug_assert!(*pos + 8 <= words.len());
    // SAFETY: the caller guarantees 8 words at `*pos`.
    let w = unsafe { _mm_loadu_si128(words.as_ptr().add(*pos).cast()) };
    // SAFETY: `m < 256` indexes the table; each row is 32 bytes.
    let idx = unsafe { _mm256_loadu_si256(EXPAND[m].as_ptr().cast()) };
    let w = _mm256_permutevar8x32_epi32(_mm256_cvtepu16_epi32(w), idx);
    let refilled = _mm256_or_si256(_mm256_slli_epi32::<16>(y), w);
    *pos += m.count_ones() as usize;
    _mm256_blendv_epi8(y, refilled, need)
}

/// Decodes whole steps of `N` `u16`/`u32` blocks (`NPHASES` phases) in lockstep while
/// each has a step whose words surely exist, as the AVX-512 `run_wide` does with half the
/// lanes a vector. Bit-identical to [`super::step_wide`].
#[target_feature(enable = "avx2,popcnt")]
pub(super) fn run_wide<T: Int, const NPHASES: usize, const N: usize>(
    table: &[u32; TOTAL as usize],
    blocks: &mut [Block<'_, T>; N],
) {
    const { assert!(size_of::<T>() == 2 || size_of::<T>() == 4) };
    let mut v = [[_mm256_setzero_si256(); 4]; N];
    for (b, v) in blocks.iter().zip(v.iter_mut()) {
        for (i, v) in v.iter_mut().enumerate() {
            // SAFETY: `x` holds 32 u32s; this reads 8 of them at `8 i`.
            *v = unsafe { _mm256_loadu_si256(b.x.as_ptr().add(8 * i).cast()) };
        }
    }
    let (low, one, two) = (
        _mm256_set1_epi32(0xff),
        _mm256_set1_epi32(1),
        _mm256_set1_epi32(2),
    );
    let (three, four, fifteen, sixteen) = (
        _mm256_set1_epi32(3),
        _mm256_set1_epi32(4),
        _mm256_set1_epi32(15),
        _mm256_set1_epi32(16),
    );
    while blocks.iter().all(|b| b.can_step_phases(NPHASES)) {
        for (blk, v) in blocks.iter_mut().zip(v.iter_mut()) {
            // `can_step_phases`: 32 words per phase at `pos`, 8 for each quarter.
            let (words, pos) = (blk.words, &mut blk.pos);
            let mut val = [_mm256_setzero_si256(); 4];
            for (val, x) in val.iter_mut().zip(v.iter_mut()) {
                *val = _mm256_and_si256(entries(table, x, words, pos), low);
            }
            if NPHASES >= 2 {
                let mut nb = [_mm256_setzero_si256(); 4];
                for ((b, x), nb) in val.iter_mut().zip(v.iter_mut()).zip(nb.iter_mut()) {
                    // Buckets from 16 carry `b / 4 - 2` bypass bits above a base of
                    // `(4 + b % 4) << nb`; smaller ones are their value.
                    let large = _mm256_cmpgt_epi32(*b, fifteen);
                    *nb =
                        _mm256_and_si256(large, _mm256_sub_epi32(_mm256_srli_epi32::<2>(*b), two));
                    let shifted =
                        _mm256_sllv_epi32(_mm256_add_epi32(four, _mm256_and_si256(*b, three)), *nb);
                    let base = _mm256_blendv_epi8(*b, shifted, large);
                    let k = _mm256_min_epu32(*nb, sixteen);
                    let bits =
                        _mm256_and_si256(*x, _mm256_sub_epi32(_mm256_sllv_epi32(one, k), one));
                    *b = _mm256_or_si256(base, bits);
                    *x = refill(_mm256_srlv_epi32(*x, k), words, pos);
                }
                if NPHASES >= 3 {
                    for ((val, x), nb) in val.iter_mut().zip(v.iter_mut()).zip(nb.iter()) {
                        let k = _mm256_sub_epi32(*nb, _mm256_min_epu32(*nb, sixteen));
                        let high =
                            _mm256_and_si256(*x, _mm256_sub_epi32(_mm256_sllv_epi32(one, k), one));
                        *val = _mm256_or_si256(*val, _mm256_slli_epi32::<16>(high));
                        *x = refill(_mm256_srlv_epi32(*x, k), words, pos);
                    }
                }
            }
            for (i, val) in val.iter().enumerate() {
                // SAFETY: `can_step_phases` checked `done + 32 <= out.len()`; this writes
                // 8 values at `done + 8 i`.
                unsafe { store8::<T>(blk.out.as_mut_ptr().add(blk.done + 8 * i), *val) };
            }
            blk.done += LANES;
        }
    }
    for (b, v) in blocks.iter_mut().zip(v.iter()) {
        for (i, v) in v.iter().enumerate() {
            // SAFETY: as for the loads.
            unsafe { _mm256_storeu_si256(b.x.as_mut_ptr().add(8 * i).cast(), *v) };
        }
    }
}

/// Stores 8 lanes of `val` (each below 2^16 when `T` is 2 bytes wide) at `o` as `T`s.
///
/// # Safety
/// `o` has room for 8 `T`s, and `T` is 2 or 4 bytes wide.
#[inline]
#[target_feature(enable = "avx2,popcnt")]
unsafe fn store8<T: Int>(o: *mut T, val: __m256i) {
    // SAFETY: the caller's contract.
    unsafe {
        if size_of::<T>() == 2 {
            // Packing keeps each 128-bit half's four values side by side; the permute
            // puts the two halves' in order.
            let p = _mm256_permute4x64_epi64::<0b00_00_10_00>(_mm256_packus_epi32(val, val));
            _mm_storeu_si128(o.cast(), _mm256_castsi256_si128(p));
        } else {
            _mm256_storeu_si256(o.cast(), val);
        }
    }
}

/// Decodes whole steps of `N` blocks in lockstep while each has a step whose words surely
/// exist.
#[target_feature(enable = "avx2,popcnt")]
pub(super) fn run<const N: usize>(table: &[u32; TOTAL as usize], blocks: &mut [ByteBlock<'_>; N]) {
    let mut v = [[_mm256_setzero_si256(); 4]; N];
    for (b, v) in blocks.iter().zip(v.iter_mut()) {
        for (i, v) in v.iter_mut().enumerate() {
            // SAFETY: `x` holds 32 u32s; this reads 8 of them at `8 i`.
            *v = unsafe { _mm256_loadu_si256(b.x.as_ptr().add(8 * i).cast()) };
        }
    }
    while blocks.iter().all(ByteBlock::can_step) {
        for (b, v) in blocks.iter_mut().zip(v.iter_mut()) {
            for (i, v) in v.iter_mut().enumerate() {
                // `can_step`: 32 words at `pos`, 8 for each quarter.
                let s = quarter(table, v, b.words, &mut b.pos);
                // SAFETY: `can_step` checked `done + 32 <= out.len()`; 8 bytes at `8 i`.
                unsafe { _mm_storel_epi64(b.out.as_mut_ptr().add(b.done + 8 * i).cast(), s) };
            }
            b.done += LANES;
        }
    }
    for (b, v) in blocks.iter_mut().zip(v.iter()) {
        for (i, v) in v.iter().enumerate() {
            // SAFETY: as for the loads.
            unsafe { _mm256_storeu_si256(b.x.as_mut_ptr().add(8 * i).cast(), *v) };
        }
    }
}
