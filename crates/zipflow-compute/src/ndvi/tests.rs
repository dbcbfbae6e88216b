use super::reader::unpack_fn;
use super::*;

#[test]
fn unpack_matches_fastlanes_at_every_width() {
    use fastlanes::FoR;
    let mut x = 12345u32;
    for w in 1..=16usize {
        let values: Vec<u16> = (0..V)
            .map(|_| {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                ((x >> 8) as u16) & (((1u32 << w) - 1) as u16)
            })
            .collect();
        let packed = bitpack::pack(&values, w as u32);
        let (mut ours, mut theirs) = ([0u16; V], [0u16; V]);
        unpack_fn(w)(&packed, 7, &mut ours);
        // SAFETY: one whole vector at width w <= 16.
        unsafe { u16::unchecked_unfor_pack(w, &packed, 7, &mut theirs) };
        assert_eq!(ours, theirs, "width {w}");
        let plus: Vec<u16> = values.iter().map(|v| v.wrapping_add(7)).collect();
        assert_eq!(&ours[..], &plus[..], "width {w}");
    }
}

#[test]
fn kernel_only_repeats_the_window() -> Result<()> {
    let pool = pool(2)?;
    let n: Vec<u16> = (0..5 * V).map(|i| (i * 7 % 5000) as u16).collect();
    let r: Vec<u16> = (0..5 * V).map(|i| (i * 13 % 3000) as u16).collect();
    let window = KERNEL_WINDOW * V;
    for op in [Op::SumNr, Op::Count(Threshold { k: 3000 })] {
        let once = plain(op, &n[..window], &r[..window], &pool)?;
        let three = kernel_only(op, &n, &r, 3 * KERNEL_WINDOW, &pool)?;
        match (once, three) {
            (Answer::SumNr(a), Answer::SumNr(b)) | (Answer::Count(a), Answer::Count(b)) => {
                assert_eq!(3 * a, b, "{}", op.name())
            }
            other => panic!("{other:?}"),
        }
    }
    assert!(kernel_only(Op::SumNr, &n[..V - 1], &r[..V - 1], 1, &pool).is_err());
    Ok(())
}

#[test]
fn threshold_parses_exactly() -> Result<()> {
    for (s, k) in [
        ("0.3", 3000),
        ("-0.125", -1250),
        ("1", 10000),
        (".25", 2500),
        ("0.0001", 1),
        ("-1.5", -15000),
        ("+0", 0),
    ] {
        assert_eq!(Threshold::parse(s)?.k, k, "{s}");
    }
    for s in ["", ".", "0.12345", "1e3", "--1", "0.3x"] {
        assert!(Threshold::parse(s).is_err(), "{s}");
    }
    assert_eq!(Threshold { k: -1250 }.to_string(), "-0.1250");
    Ok(())
}

#[test]
fn packed_sum_matches_plain_at_every_width() -> Result<()> {
    let pool = pool(2)?;
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for width in 0..=32u32 {
        let len = 3 * V + 17;
        let mask = if width == 32 {
            u32::MAX
        } else {
            (1u32 << width) - 1
        };
        let values: Vec<u32> = (0..len)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                // Edges: all ones, zeros, then random.
                match i % 5 {
                    0 => mask,
                    1 => 0,
                    _ => (x as u32) & mask,
                }
            })
            .collect();
        let words = bitpack::pack(&values, width);
        let expected: u64 = values.iter().map(|&v| u64::from(v)).sum();
        assert_eq!(packed_sum(&words, width, &pool)?, expected, "w{width}");
        assert_eq!(plain_sum(&values, &pool), expected);
    }
    Ok(())
}
