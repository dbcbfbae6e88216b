use super::*;
use crate::testing::*;
use crate::{decode_bytes, describe, encode, estimate};
use proptest::prelude::*;

/// Encodes `values` by plan `p`, requires a bit-exact round trip, the estimate within 10 %
/// of the size, the resolved plan to re-encode to the same bytes, and the bytes to decode
/// the same by [`reference_decode`]. Returns the node.
fn check(p: &str, values: &Values) -> Result<EncodedNode> {
    let node = encode(&plan(p), values)?;
    let bytes = node.to_bytes()?;
    assert_eq!(bytes.len(), node.size());
    assert_eq!(&decode_bytes(&bytes)?, values, "plan `{p}`");
    let est = estimate(&plan(p), values)? as f64;
    let size = node.size() as f64;
    assert!(
        (est - size).abs() <= 0.1 * size,
        "plan `{p}`: estimate {est}, size {size}"
    );
    let resolved = describe(&NodeView::parse(&bytes)?)?;
    assert_eq!(
        encode(&resolved, values)?.to_bytes()?,
        bytes,
        "`{resolved}`"
    );
    if node.id == ID {
        let Values::Int(v) = values else {
            panic!("ans takes integers")
        };
        let expected: Vec<u32> = match v {
            IntVec::U8(x) => x.iter().map(|&e| u32::from(e)).collect(),
            IntVec::U16(x) => x.iter().map(|&e| u32::from(e)).collect(),
            IntVec::U32(x) => x.clone(),
            _ => panic!("ans takes u8, u16 and u32"),
        };
        assert_eq!(reference_decode(&node), expected, "reference decoder");
    }
    Ok(node)
}

/// A decoder written from the module documentation alone, one coding operation at a time,
/// with the warp's ballot and prefix count spelled out.
fn reference_decode(node: &EncodedNode) -> Vec<u32> {
    let meta = &node.meta;
    let block = 1usize << meta[0];
    let nsym = usize::from(u16::from_le_bytes([meta[1], meta[2]]));
    let mut freq = Vec::new();
    let mut i = 3;
    while freq.len() < nsym {
        match meta[i] {
            0 => {
                freq.extend(std::iter::repeat_n(0u32, usize::from(meta[i + 1]) + 1));
                i += 2;
            }
            b if b < 0x80 => {
                freq.push(u32::from(b));
                i += 1;
            }
            b => {
                freq.push(u32::from(b & 0x7f) + 128 * u32::from(meta[i + 1]));
                i += 2;
            }
        }
    }
    let u32s = |b: &[u8]| -> Vec<u32> {
        b.chunks(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    };
    let states = u32s(&node.buffers[0]);
    let starts = u32s(&node.buffers[1]);
    let words: Vec<u32> = node.buffers[2]
        .chunks(2)
        .map(|c| u32::from(c[0]) | u32::from(c[1]) << 8)
        .collect();
    let nphases = phases(node.ptype);
    let len = node.len as usize;
    let mut out = vec![0u32; len];
    for b in 0..len.div_ceil(block) {
        let n = (len - b * block).min(block);
        let mut x: Vec<u32> = states[b * 32..b * 32 + 32].to_vec();
        let mut pos = starts[b] as usize;
        let mut sym = [0u32; 32];
        for step in 0..n.div_ceil(32) {
            let active = (n - step * 32).min(32);
            for phase in 0..nphases {
                // Every lane applies its operation, then the warp refills in lane order.
                for lane in 0..active {
                    if phase == 0 {
                        let slot = x[lane] % 4096;
                        let mut c = 0;
                        let mut s = 0;
                        while c + freq[s] <= slot {
                            c += freq[s];
                            s += 1;
                        }
                        sym[lane] = s as u32;
                        x[lane] = freq[s] * (x[lane] / 4096) + slot - c;
                        out[b * block + step * 32 + lane] = s as u32;
                    } else if sym[lane] >= 16 {
                        let (e, m) = (sym[lane] / 4, sym[lane] % 4);
                        let nb = e - 2;
                        let (k, shift) = if phase == 1 {
                            (nb.min(16), 0)
                        } else {
                            (nb.saturating_sub(16), 16)
                        };
                        let bits = x[lane] % (1 << k);
                        x[lane] /= 1 << k;
                        let o = &mut out[b * block + step * 32 + lane];
                        if phase == 1 {
                            *o = (4 + m) << nb;
                        }
                        *o += bits << shift;
                    }
                }
                let ballot: Vec<bool> = (0..32).map(|l| l < active && x[l] < 65536).collect();
                for lane in 0..32 {
                    if ballot[lane] {
                        let before = ballot[..lane].iter().filter(|&&r| r).count();
                        x[lane] = x[lane] * 65536 + words[pos + before];
                    }
                }
                pos += ballot.iter().filter(|&&r| r).count();
            }
        }
        assert!(x.iter().all(|&s| s == 65536), "block {b} final states");
    }
    out
}

/// Values drawn from a geometric-like distribution: value `i` about twice as likely as `i+1`
/// with probability `p` percent... concentrated on small values.
fn skewed(r: &mut impl FnMut() -> u64, n: usize, spread: u32) -> Vec<u32> {
    (0..n)
        .map(|_| {
            let u = r();
            // The number of trailing ones of `spread` random bits, plus a random low part.
            let t = (u | (1 << spread)).trailing_ones().min(spread);
            t * t + (((u >> 40) as u32) % (t + 1))
        })
        .collect()
}

fn u8s(v: &[u32]) -> Values {
    Values::Int(IntVec::U8(v.iter().map(|&x| x as u8).collect()))
}
fn u16s(v: &[u32]) -> Values {
    Values::Int(IntVec::U16(v.iter().map(|&x| x as u16).collect()))
}
fn u32s(v: &[u32]) -> Values {
    Values::Int(IntVec::U32(v.to_vec()))
}

/// Streams of every edge length and shape, as u32 (cast down per type).
fn cases(max: u64) -> Vec<Vec<u32>> {
    let mut r = random(7);
    let mut rand = |n: usize| -> Vec<u32> { (0..n).map(|_| (r() % (max + 1)) as u32).collect() };
    let mut out = vec![
        vec![],
        vec![max as u32],
        vec![0],
        rand(31),
        rand(32),
        rand(33),
        rand(255),
        rand(256),
        rand(257),
        rand(3000),
        vec![5; 100],
        vec![max as u32; 777],
        (0..=max.min(4000)).map(|v| v as u32).collect(),
    ];
    let mut r = random(8);
    out.push(skewed(&mut r, 5000, 20));
    out.push(
        skewed(&mut r, 5000, 20)
            .iter()
            .map(|&v| (max as u32).wrapping_sub(v))
            .collect(),
    );
    out
}

#[test]
fn round_trips_bytes() -> Result<()> {
    for c in cases(255) {
        for p in ["ans", "ans(5)", "ans(8)", "ans(6)"] {
            check(p, &u8s(&c))?;
        }
    }
    Ok(())
}

#[test]
fn round_trips_u16() -> Result<()> {
    for c in cases(u64::from(u16::MAX)) {
        for p in ["ans", "ans(5)", "ans(8)"] {
            check(p, &u16s(&c))?;
        }
    }
    Ok(())
}

#[test]
fn round_trips_u32() -> Result<()> {
    for c in cases(u64::from(u32::MAX)) {
        for p in ["ans", "ans(5)", "ans(8)"] {
            check(p, &u32s(&c))?;
        }
    }
    // Every bucket boundary, the largest value of each bucket and the extremes.
    let mut edges = vec![0, 1, 15, 16, 17, u32::MAX, u32::MAX - 1, 1 << 31];
    for e in 4..32 {
        for m in 0..4u32 {
            let base = (4 + m) << (e - 2);
            edges.extend([
                base,
                base + ((1 << (e - 2)) - 1),
                base | 0x5555_5555 >> (34 - e),
            ]);
        }
    }
    check("ans(5)", &u32s(&edges))?;
    check(
        "ans",
        &u16s(&edges.iter().map(|&v| v & 0xffff).collect::<Vec<_>>()),
    )?;
    Ok(())
}

#[test]
fn block_edges_and_many_blocks() -> Result<()> {
    let mut r = random(3);
    let block = 1 << DEFAULT_BLOCK_LOG2;
    for n in [block - 1, block, block + 1, 5 * block + 17] {
        let v = skewed(&mut r, n, 12);
        check("ans", &u8s(&v))?;
        check("ans", &u16s(&v))?;
        check("ans", &u32s(&v))?;
    }
    let v = skewed(&mut r, 100_000, 30);
    let node = check("ans(9)", &u32s(&v))?;
    assert_eq!(node.buffers[1].len(), 4 * 100_000usize.div_ceil(512));
    Ok(())
}

#[test]
fn one_distinct_symbol_costs_nothing() -> Result<()> {
    for s in [0u32, 7, 255] {
        let node = check("ans", &u8s(&vec![s; 70_000]))?;
        assert!(
            node.buffers[2].len() <= 16,
            "{} word bytes",
            node.buffers[2].len()
        );
    }
    let node = check("ans", &u32s(&vec![u32::MAX; 10_000]))?;
    // Only the 29 bypass bits per value remain.
    let words = node.buffers[2].len() as f64;
    assert!((words - 10_000.0 * 29.0 / 8.0).abs() < 600.0, "{words}");
    Ok(())
}

#[test]
fn buckets_round_trip() {
    for v in (0..=u32::from(u16::MAX)).chain((0..32).flat_map(|e| {
        let b = 1u32 << e;
        [b, b - 1, b + 1, b.wrapping_mul(3)]
    })) {
        let b = u32::from(bucket(v));
        let nb = bypass_bits(b);
        assert!(b < 128);
        assert_eq!(bucket_base(b) | (v & ((1u64 << nb) - 1) as u32), v, "{v}");
        assert_eq!(bucket_base(b) & ((1u64 << nb) - 1) as u32, 0, "{v}");
        if v <= u32::from(u16::MAX) {
            assert!(b < 64);
        }
    }
}

#[test]
fn quantisation_is_valid_and_close_to_the_counts() {
    let mut r = random(11);
    for trial in 0..300 {
        let nsym = 1 + (r() % 256) as usize;
        let counts: Vec<u64> = (0..256)
            .map(|s| {
                if s < nsym && r() % 3 < 2 {
                    1 + r() % (1 << (r() % 30))
                } else {
                    0
                }
            })
            .collect();
        let f = quantize(&counts, 256);
        let present = counts.iter().filter(|&&c| c > 0).count();
        if present == 0 {
            assert!(f.is_empty());
            continue;
        }
        assert_eq!(f.iter().sum::<u32>(), TOTAL, "trial {trial}");
        assert!(f.iter().all(|&x| x <= MAX_FREQ));
        assert!(f.last().is_some_and(|&x| x > 0));
        for (s, &c) in counts.iter().enumerate() {
            let q = f.get(s).copied().unwrap_or(0);
            if present > 1 {
                assert_eq!(c > 0, q > 0, "trial {trial} symbol {s}");
            }
        }
        // The quantised code is within 1 % (or 0.01 bit per value) of the counts' entropy.
        let n: u64 = counts.iter().sum();
        let (mut ideal, mut coded) = (0.0, 0.0);
        for (s, &c) in counts.iter().enumerate() {
            if c > 0 {
                let c = c as f64;
                ideal -= c * (c / n as f64).log2();
                coded -= c * (f64::from(f[s]) / f64::from(TOTAL)).log2();
            }
        }
        assert!(
            coded <= ideal * 1.01 + 0.01 * n as f64 + 64.0,
            "trial {trial}: {coded} vs {ideal}"
        );
    }
    assert_eq!(quantize(&[0, 0, 9], 3), vec![0, 1, 4095]);
    assert_eq!(quantize(&[9], 256), vec![4095, 1]);
    assert!(quantize(&[0; 256], 256).is_empty());
}

/// Order-0 entropy of `syms` under the node's quantised table, plus bypass bits, in bits.
fn model_bits(node: &EncodedNode, values: &[u32]) -> f64 {
    let bytes = node.to_bytes().unwrap_or_else(|e| panic!("{e}"));
    let view = NodeView::parse(&bytes).unwrap_or_else(|e| panic!("{e}"));
    let mut meta = view.meta_reader();
    let _block_log2 = meta.u8("block size");
    let freqs = read_table(&mut meta, 256, false).unwrap_or_else(|e| panic!("{e}"));
    values
        .iter()
        .map(|&v| {
            let (s, extra) = if node.ptype == PType::U8 {
                (v as usize, 0.0)
            } else {
                let b = bucket(v);
                (usize::from(b), f64::from(bypass_bits(u32::from(b))))
            };
            extra + (f64::from(TOTAL) / f64::from(freqs[s])).log2()
        })
        .sum()
}

#[test]
fn skewed_data_costs_its_entropy() -> Result<()> {
    let mut r = random(21);
    let v = skewed(&mut r, 1 << 20, 14);
    for values in [
        u8s(&v),
        u16s(&v.iter().map(|&x| x * 37).collect::<Vec<_>>()),
    ] {
        let node = check("ans", &values)?;
        let Values::Int(iv) = &values else {
            unreachable!()
        };
        let as_u32: Vec<u32> = match iv {
            IntVec::U8(x) => x.iter().map(|&e| u32::from(e)).collect(),
            IntVec::U16(x) => x.iter().map(|&e| u32::from(e)).collect(),
            _ => unreachable!(),
        };
        let entropy = model_bits(&node, &as_u32);
        // The words carry the code less what the final states hold above 2^16.
        let states: f64 = node.buffers[0]
            .chunks(4)
            .map(|c| f64::from(u32::from_le_bytes([c[0], c[1], c[2], c[3]])).log2() - 16.0)
            .sum();
        let coded = 8.0 * node.buffers[2].len() as f64 + states;
        assert!(
            coded >= entropy * 0.999 && coded <= entropy * 1.002,
            "{} coded {coded} bits, entropy {entropy}",
            values.ptype()
        );
        let size = 8.0 * node.size() as f64;
        assert!(
            size <= entropy * 1.01,
            "{}: {size} bits, entropy {entropy}",
            values.ptype()
        );
    }
    Ok(())
}

#[test]
fn signed_streams_go_through_zigzag() -> Result<()> {
    let mut r = random(5);
    let v: Vec<i64> = skewed(&mut r, 4000, 10)
        .iter()
        .enumerate()
        .map(|(i, &x)| {
            if i % 3 == 0 {
                -i64::from(x)
            } else {
                i64::from(x)
            }
        })
        .collect();
    check(
        "zigzag | ans",
        &Values::Int(IntVec::I8(v.iter().map(|&x| x as i8).collect())),
    )?;
    check(
        "zigzag | ans",
        &Values::Int(IntVec::I16(v.iter().map(|&x| x as i16).collect())),
    )?;
    check(
        "zigzag | ans(7)",
        &Values::Int(IntVec::I32(v.iter().map(|&x| x as i32 * 1000).collect())),
    )?;
    for bad in [
        Values::Int(IntVec::I8(vec![1])),
        Values::Int(IntVec::I32(vec![1])),
        Values::Int(IntVec::U64(vec![1])),
        Values::F64(vec![1.0]),
    ] {
        let e = encode(&plan("ans"), &bad);
        assert!(matches!(e, Err(Error::Plan { .. })), "{e:?}");
    }
    for p in ["ans(4)", "ans(25)", "ans(-1)"] {
        let e = encode(&plan(p), &u8s(&[1, 2]));
        assert!(matches!(e, Err(Error::Plan { .. })), "{p}: {e:?}");
    }
    Ok(())
}

#[test]
fn describe_shows_only_non_default_blocks() -> Result<()> {
    let v = u8s(&[1, 2, 3, 3]);
    assert_eq!(described(&encode(&plan("ans"), &v)?.to_bytes()?)?, "ans");
    assert_eq!(
        described(&encode(&plan("ans(9)"), &v)?.to_bytes()?)?,
        "ans(9)"
    );
    Ok(())
}

#[test]
fn corruption_is_an_error_not_a_panic() -> Result<()> {
    let mut r = random(9);
    let v = skewed(&mut r, 700, 16);
    for (p, values) in [
        ("ans(6)", u8s(&v)),
        (
            "ans(7)",
            u16s(&v.iter().map(|&x| x * 900).collect::<Vec<_>>()),
        ),
        (
            "ans(8)",
            u32s(
                &v.iter()
                    .map(|&x| x.wrapping_mul(0x9e37_79b9))
                    .collect::<Vec<_>>(),
            ),
        ),
        ("ans", u8s(&[])),
        ("ans", u8s(&[4; 40])),
    ] {
        check_corruption(p, &encode(&plan(p), &values)?, 1)?;
    }
    Ok(())
}

#[test]
fn detects_inconsistent_nodes() -> Result<()> {
    let mut r = random(13);
    let v = u8s(&skewed(&mut r, 2000, 16));
    let p = "ans(8)";
    let e = corrupt(p, &v, |n| n.meta[0] = 4)?;
    assert!(e.contains("block size"), "{e}");
    let e = corrupt(p, &v, |n| n.meta[1] = 255)?;
    assert!(e.contains("add up to") || e.contains("too short"), "{e}");
    let e = corrupt(p, &v, |n| {
        n.buffers[0][0..4].copy_from_slice(&5u32.to_le_bytes())
    })?;
    assert!(e.contains("below 2^16"), "{e}");
    let e = corrupt(p, &v, |n| {
        n.buffers[1][4..8].copy_from_slice(&u32::MAX.to_le_bytes())
    })?;
    assert!(e.contains("block starts"), "{e}");
    let e = corrupt(p, &v, |n| {
        let w = n.buffers[2].len();
        n.buffers[2].truncate(w - 2)
    })?;
    assert!(e.contains("does not decode"), "{e}");
    let e = corrupt(p, &v, |n| n.buffers[2][100] ^= 0x10)?;
    assert!(e.contains("does not decode"), "{e}");
    let e = corrupt(p, &v, |n| n.buffers[1].truncate(4))?;
    assert!(e.contains("block starts"), "{e}");
    let e = corrupt(p, &v, |n| n.ptype = PType::I8)?;
    assert!(e.contains("i8"), "{e}");
    let e = corrupt(p, &v, |n| n.ptype = PType::U16)?;
    assert!(
        e.contains("does not decode") || e.contains("symbols"),
        "{e}"
    );
    Ok(())
}

/// The SIMD byte decoders agree with the scalar one on good and on corrupted nodes.
#[test]
fn simd_matches_scalar() -> Result<()> {
    let mut r = random(17);
    for (n, spread, log2) in [
        (5000, 3, 8),
        (140_000, 14, 15),
        (3000, 40, 10),
        (999, 0, 5),
        (7 * 1024 + 5, 9, 10),
    ] {
        let v: Vec<u8> = skewed(&mut r, n, spread).iter().map(|&x| x as u8).collect();
        let good = encode(
            &plan(&format!("ans({log2})")),
            &Values::Int(IntVec::U8(v.clone())),
        )?;
        let mut flips = random(n as u64);
        for flip in 0..8 {
            let mut node = good.clone();
            let words = &mut node.buffers[2];
            if flip > 0 && !words.is_empty() {
                let i = flips() as usize % words.len();
                words[i] ^= 1 << (flips() % 8);
            }
            let bytes = node.to_bytes()?;
            let view = NodeView::parse(&bytes)?;
            let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
            let layout = parse(&view, &mut a, &mut b, &mut c)?;
            let mut scalar = Vec::new();
            let ok_scalar = decode_bytes_into(&layout, n, &mut scalar, Kernel::Scalar);
            if flip == 0 {
                assert!(ok_scalar.is_ok());
                assert_eq!(scalar, v);
            }
            for kernel in Kernel::available() {
                let mut simd = vec![7u8; 3];
                let ok = decode_bytes_into(&layout, n, &mut simd, kernel);
                assert_eq!(
                    ok_scalar.as_ref().map_err(|e| e.to_string()),
                    ok.as_ref().map_err(|e| e.to_string()),
                    "{kernel:?} n {n} flip {flip}"
                );
                assert_eq!(scalar, simd, "{kernel:?} n {n} flip {flip}");
            }
        }
    }
    Ok(())
}

/// The SIMD `u16`/`u32` decoder agrees with the scalar one on good and corrupted nodes.
#[test]
fn wide_simd_matches_scalar() -> Result<()> {
    fn compare<T: zipflow_core::values::IntVecOf, const NPHASES: usize, const W: usize>(
        v: Vec<T>,
        log2: u32,
    ) -> Result<()> {
        let n = v.len();
        let good = encode(
            &plan(&format!("ans({log2})")),
            &Values::Int(T::wrap(v.clone())),
        )?;
        let mut flips = random(n as u64 + 1);
        for flip in 0..8 {
            let mut node = good.clone();
            let words = &mut node.buffers[2];
            if flip > 0 && !words.is_empty() {
                let i = flips() as usize % words.len();
                words[i] ^= 1 << (flips() % 8);
            }
            let bytes = node.to_bytes()?;
            let view = NodeView::parse(&bytes)?;
            let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
            let layout = parse(&view, &mut a, &mut b, &mut c)?;
            let mut scalar = Vec::new();
            let ok_scalar =
                decode_wide_into::<T, NPHASES, W>(&layout, n, &mut scalar, Kernel::Scalar);
            if flip == 0 {
                assert!(ok_scalar.is_ok());
                assert_eq!(scalar, v);
            }
            for kernel in Kernel::available() {
                let mut simd = Vec::new();
                let ok = decode_wide_into::<T, NPHASES, W>(&layout, n, &mut simd, kernel);
                assert_eq!(
                    ok_scalar.as_ref().map_err(|e| e.to_string()),
                    ok.as_ref().map_err(|e| e.to_string()),
                    "{kernel:?} n {n} flip {flip}"
                );
                assert_eq!(scalar, simd, "{kernel:?} n {n} flip {flip}");
            }
        }
        Ok(())
    }
    let mut r = random(19);
    for (n, spread, log2) in [(5000, 3, 8), (70_000, 30, 15), (3000, 40, 10), (999, 0, 5)] {
        let v = skewed(&mut r, n, spread);
        compare::<u16, 2, 64>(v.iter().map(|&x| (x * 97) as u16).collect(), log2)?;
        // Alphabets of at most 16 values: one phase.
        compare::<u16, 2, 64>(v.iter().map(|&x| (x % 11) as u16).collect(), log2)?;
        compare::<u32, 3, 128>(v.iter().map(|&x| x % 3).collect(), log2)?;
        compare::<u32, 3, 128>(
            v.iter().map(|&x| x.wrapping_mul(0x0101_0101 + x)).collect(),
            log2,
        )?;
        compare::<u32, 3, 128>((0..n).map(|_| r() as u32 >> (r() % 32)).collect(), log2)?;
        // Values below 2^18 decode with two phases (what `decode` picks for them) too.
        let small: Vec<u32> = (0..n).map(|_| (r() as u32 >> (r() % 32)) >> 14).collect();
        compare::<u32, 2, 64>(small.clone(), log2)?;
        compare::<u32, 3, 128>(small, log2)?;
    }
    Ok(())
}

proptest! {
    #[test]
    fn round_trip_random(v in prop::collection::vec(any::<u32>(), 0..1500),
                         shift in 0u32..32,
                         log2 in MIN_BLOCK_LOG2..10) {
        let v: Vec<u32> = v.iter().map(|&x| x >> shift).collect();
        let p = format!("ans({log2})");
        for values in [u8s(&v), u16s(&v), u32s(&v)] {
            check(&p, &values).map_err(|e| TestCaseError::fail(e.to_string()))?;
        }
    }
}
