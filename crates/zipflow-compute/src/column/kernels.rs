//! Kernels over one block of unpacked words: widening to i64, range and code-table masks,
//! a dictionary gather and the block's maximum. Each is a portable body, compiled for AVX2
//! when the CPU has it behind one dispatch ([`avx2_dispatch`]); the crate itself is built
//! for baseline x86-64.

use zipflow_core::{Int, PType};

/// Runs `$body` compiled for AVX2 when the CPU has it (the crate is built for baseline
/// x86-64), else as is. The body must be plain safe code over its arguments.
macro_rules! avx2_dispatch {
    ($avx2:expr, $body:expr) => {{
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU supports AVX2 (checked just above).
                return unsafe { $avx2 };
            }
        }
        $body
    }};
}

/// Converts unsigned bits (plus `reference`, wrapping) of `ptype` to i64.
#[inline(always)]
pub(super) fn widen_impl<U: Int>(src: &[U], reference: U, ptype: PType, out: &mut [i64]) {
    macro_rules! go {
        ($t:ty) => {
            for (o, &x) in out.iter_mut().zip(src) {
                *o = x.wrapping_add(reference).to_u64() as $t as i64;
            }
        };
    }
    match ptype {
        PType::I8 => go!(i8),
        PType::I16 => go!(i16),
        PType::I32 => go!(i32),
        PType::U8 => go!(u8),
        PType::U16 => go!(u16),
        PType::U32 => go!(u32),
        _ => go!(i64),
    }
}

pub(super) fn widen<U: Int>(src: &[U], reference: U, ptype: PType, out: &mut [i64]) {
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn avx2<U: Int>(src: &[U], reference: U, ptype: PType, out: &mut [i64]) {
        widen_impl(src, reference, ptype, out);
    }
    avx2_dispatch!(
        avx2(src, reference, ptype, out),
        widen_impl(src, reference, ptype, out)
    )
}

/// `mask[i] &= (x[i] - l) <= span` (wrapping): `l <= x[i] <= l + span`.
#[inline(always)]
pub(super) fn range_mask_impl<U: Int>(x: &[U], l: U, span: U, mask: &mut [u8]) {
    for (m, &v) in mask.iter_mut().zip(x) {
        *m &= u8::from(v.wrapping_sub(l) <= span);
    }
}

pub(super) fn range_mask<U: Int>(x: &[U], l: U, span: U, mask: &mut [u8]) {
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn avx2<U: Int>(x: &[U], l: U, span: U, mask: &mut [u8]) {
        range_mask_impl(x, l, span, mask);
    }
    avx2_dispatch!(avx2(x, l, span, mask), range_mask_impl(x, l, span, mask))
}

/// `mask[i] &= table[codes[i]]`; returns the OR of every entry looked up (bit 1 marks a code
/// past the dictionary). `table` has an entry for every value `U` can take at the packed width.
#[inline(always)]
pub(super) fn table_mask_impl<U: Int>(codes: &[U], table: &[u8], mask: &mut [u8]) -> u8 {
    let mut seen = 0u8;
    for (m, &c) in mask.iter_mut().zip(codes) {
        let t = table.get(c.to_u64() as usize).copied().unwrap_or(2);
        seen |= t;
        *m &= t;
    }
    seen
}

/// [`table_mask_impl`] for byte codes: a 256-entry table needs no bounds checks.
#[inline(always)]
pub(super) fn table_mask_u8(codes: &[u8], table: &[u8; 256], mask: &mut [u8]) -> u8 {
    let mut seen = 0u8;
    for (m, &c) in mask.iter_mut().zip(codes) {
        let t = table[usize::from(c)];
        seen |= t;
        *m &= t;
    }
    seen
}

pub(super) fn table_mask<U: Int>(codes: &[U], table: &[u8], mask: &mut [u8]) -> u8 {
    if let (Some(c), Some(t)) = (
        bytemuck::try_cast_slice::<U, u8>(codes)
            .ok()
            .filter(|_| U::BITS == 8),
        <&[u8; 256]>::try_from(table).ok(),
    ) {
        return table_mask_u8(c, t, mask);
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn avx2<U: Int>(codes: &[U], table: &[u8], mask: &mut [u8]) -> u8 {
        table_mask_impl(codes, table, mask)
    }
    avx2_dispatch!(
        avx2(codes, table, mask),
        table_mask_impl(codes, table, mask)
    )
}

/// `out[i] = dict[codes[i]]`; returns the largest code.
#[inline(always)]
pub(super) fn gather_u8_impl(codes: &[u8], dict: &[i64; 256], out: &mut [i64]) -> u8 {
    let mut max = 0u8;
    for (o, &c) in out.iter_mut().zip(codes) {
        *o = dict[usize::from(c)];
        max = max.max(c);
    }
    max
}

pub(super) fn gather_u8(codes: &[u8], dict: &[i64; 256], out: &mut [i64]) -> u8 {
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn avx2(codes: &[u8], dict: &[i64; 256], out: &mut [i64]) -> u8 {
        gather_u8_impl(codes, dict, out)
    }
    avx2_dispatch!(avx2(codes, dict, out), gather_u8_impl(codes, dict, out))
}

/// The largest value of a block.
#[inline(always)]
pub(super) fn max_impl<U: Int>(x: &[U]) -> U {
    x.iter().copied().fold(U::ZERO, |a, b| a.max(b))
}

pub(super) fn block_max<U: Int>(x: &[U]) -> U {
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn avx2<U: Int>(x: &[U]) -> U {
        max_impl(x)
    }
    avx2_dispatch!(avx2(x), max_impl(x))
}
