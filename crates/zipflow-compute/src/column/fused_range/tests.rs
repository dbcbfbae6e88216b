use fastlanes::BitPacking;

use super::*;

macro_rules! kernel_test {
    ($test:ident, $t:ty, $kernel:ident) => {
        #[test]
        fn $test() {
            const T: usize = <$t>::BITS as usize;
            let mut seed = 0x9e37_79b9_7f4a_7c15u64;
            let mut next = || {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed
            };
            for width in 1..=T {
                let top = if width == T {
                    u64::from(<$t>::MAX)
                } else {
                    (1u64 << width) - 1
                };
                let values: Vec<$t> = (0..BLOCK).map(|_| (next() & top) as $t).collect();
                let mut packed = vec![0 as $t; BLOCK * width / T];
                // SAFETY: 1024 inputs, `1024 * width / T` outputs, width <= T.
                unsafe { <$t as BitPacking>::unchecked_pack(width, &values, &mut packed) };
                for _ in 0..4 {
                    let (a, b) = ((next() & top) as $t, (next() & top) as $t);
                    let (l, span) = (a.min(b), a.max(b) - a.min(b));
                    let limit = (next() & top) as $t;
                    let mut want = [0u64; 16];
                    for (i, &v) in values.iter().enumerate() {
                        if v.wrapping_sub(l) <= span {
                            want[i / 64] |= 1 << (i % 64);
                        }
                    }
                    let want_bad = values.iter().any(|&v| v > limit);
                    let mut got = [0u64; 16];
                    let bad = $kernel(&packed, width, l, span, limit, &mut got);
                    assert_eq!((got, bad), (want, want_bad), "width {width}");
                    let mut got = [0u64; 16];
                    let out = &mut got;
                    let bad = fused_dispatch!($kernel, $t, &packed, width, l, span, limit, out);
                    assert_eq!((got, bad), (want, want_bad), "width {width}, dispatched");
                    #[cfg(target_arch = "x86_64")]
                    if avx512::available() {
                        let mut got = [0u64; 16];
                        let bad =
                            // SAFETY: the CPU supports AVX-512F/BW (checked just above).
                            unsafe { avx512::$kernel(&packed, width, l, span, limit, &mut got) };
                        assert_eq!((got, bad), (want, want_bad), "width {width}, AVX-512");
                    }
                    #[cfg(target_arch = "x86_64")]
                    if avx2::available() {
                        let mut got = [0u64; 16];
                        let bad =
                            // SAFETY: the CPU supports AVX2 (checked just above).
                            unsafe { avx2::$kernel(&packed, width, l, span, limit, &mut got) };
                        assert_eq!((got, bad), (want, want_bad), "width {width}, AVX2");
                    }
                }
            }
        }
    };
}

kernel_test!(fused_u8_matches_brute_force, u8, fused_u8);
kernel_test!(fused_u16_matches_brute_force, u16, fused_u16);
kernel_test!(fused_u32_matches_brute_force, u32, fused_u32);
kernel_test!(fused_u64_matches_brute_force, u64, fused_u64);
