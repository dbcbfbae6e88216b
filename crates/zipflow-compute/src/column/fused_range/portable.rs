//! The portable fused range kernels: plain Rust that LLVM vectorises, the reference the
//! AVX2 and AVX-512 kernels are tested against, and the fallback on other CPUs.

/// Fused unpack-and-compare kernels, one per packed word type. FastLanes stores value
/// `index(row, lane) = FL_ORDER[row / 8] * 16 + (row % 8) * 128 + lane` of a vector as the
/// `row`-th `width`-bit field of lane `lane`'s bit stream (words `packed[LANES * k + lane]`).
/// One row of every lane is therefore a run of `LANES` consecutive values, starting at a
/// multiple of `LANES`: unpacking a row across lanes (contiguous loads, vectorised) and
/// comparing gives `LANES` bits of the logical-order bitmask at once, with no unpacked block
/// in memory.
macro_rules! fused_range_kernel {
    ($name:ident, $t:ty) => {
        /// `out` = the bitmask of `packed_value - l <= span` (wrapping) for the 1024 values of
        /// one vector packed at `width` bits (`1 <= width <= T`, `packed.len() == LANES *
        /// width`); returns whether some value exceeds `limit`.
        #[inline(always)]
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
            const PER: usize = if LANES < 64 { LANES } else { 64 };
            let fmask: $t = if width >= T {
                <$t>::MAX
            } else {
                ((1 as $t) << width) - 1
            };
            let mut bad = false;
            *out = [0; 16];
            #[inline(always)]
            fn row_bits(
                get: impl Fn(usize) -> $t,
                l: $t,
                span: $t,
                limit: $t,
                base: usize,
                out: &mut [u64; 16],
                bad: &mut bool,
            ) {
                let mut pos = base;
                for c in 0..LANES / PER {
                    let mut m = 0u64;
                    let mut over = false;
                    for j in 0..PER {
                        let v = get(c * PER + j);
                        m |= u64::from(v.wrapping_sub(l) <= span) << j;
                        over |= v > limit;
                    }
                    out[pos / 64] |= m << (pos % 64);
                    *bad |= over;
                    pos += PER;
                }
            }
            for row in 0..T {
                let bit = row * width;
                let (k, s) = (bit / T, bit % T);
                let base = fastlanes::FL_ORDER[row / 8] * 16 + (row % 8) * 128;
                let lo = &packed[k * LANES..(k + 1) * LANES];
                if s + width > T {
                    let hi = &packed[(k + 1) * LANES..(k + 2) * LANES];
                    let r = T - s;
                    row_bits(
                        |i| ((lo[i] >> s) | (hi[i] << r)) & fmask,
                        l,
                        span,
                        limit,
                        base,
                        out,
                        &mut bad,
                    );
                } else {
                    row_bits(
                        |i| (lo[i] >> s) & fmask,
                        l,
                        span,
                        limit,
                        base,
                        out,
                        &mut bad,
                    );
                }
            }
            bad
        }
    };
}

fused_range_kernel!(fused_u8, u8);

fused_range_kernel!(fused_u16, u16);

fused_range_kernel!(fused_u32, u32);

fused_range_kernel!(fused_u64, u64);
