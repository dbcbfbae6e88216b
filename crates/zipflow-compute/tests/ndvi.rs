//! Fused NDVI on compressed raster bands against an f64 reference over the decoded bands.

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use zipflow_compute::ndvi::{self, Answer, Op, Threshold};
use zipflow_compute::raster::{self, Band, Raster};

/// Per-pixel error allowed to the SUM variants: exact f32 division and Newton are far below
/// 1e-5; the reciprocal estimate's relative error is below 1.5 * 2^-12 < 4e-4, and |NDVI| <= 1.
fn tolerance(op: Op) -> f64 {
    match op {
        Op::SumRecip => 4e-4,
        _ => 1e-5,
    }
}

fn ops() -> Vec<Op> {
    let mut v = vec![Op::Sum, Op::SumRecip, Op::SumNewton, Op::SumNr];
    for t in [
        "0.3", "0", "-0.5", "0.9999", "-1", "1", "-1.5", "2", "0.0001",
    ] {
        v.push(Op::Count(Threshold::parse(t).unwrap()));
    }
    v
}

fn assert_close(op: Op, got: Answer, want: Answer, pixels: usize, what: &str) {
    match (got, want) {
        (Answer::Sum(g), Answer::Sum(w)) => {
            let tol = tolerance(op) * pixels as f64;
            assert!(
                (g - w).abs() <= tol,
                "{what} {}: {g} vs reference {w} (tolerance {tol})",
                op.name()
            );
        }
        _ => assert_eq!(got, want, "{what} {op:?}"),
    }
}

/// Seeded bands with the edge cases spread through them: both 0 (no data), 65535, one side 0,
/// equal values, ties with t = 0.3 (N = 13 m, R = 7 m), and random reflectances.
fn synthetic(width: u32, height: u32, seed: u64) -> (Raster, Raster) {
    let len = (width * height) as usize;
    let mut x = seed;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let (mut n, mut r) = (Vec::with_capacity(len), Vec::with_capacity(len));
    for i in 0..len {
        let rnd = next();
        let (a, b) = match rnd % 16 {
            0 => (0, 0),
            1 => (65535, 65535),
            2 => (65535, 0),
            3 => (0, 65535),
            4 => (0, (rnd >> 8) as u16),
            5 => {
                let m = (rnd >> 8) % 5000;
                ((13 * m) as u16, (7 * m) as u16)
            }
            6 => ((rnd >> 8) as u16, (rnd >> 8) as u16),
            // A long no-data run, as at the edge of a Sentinel-2 tile.
            7 if i % 3000 < 1500 => (0, 0),
            _ => (
                (500 + (rnd >> 8) % 9000) as u16,
                (300 + (rnd >> 24) % 6000) as u16,
            ),
        };
        n.push(a);
        r.push(b);
    }
    (
        Raster::new(width, height, n).unwrap(),
        Raster::new(width, height, r).unwrap(),
    )
}

fn check_pair(nir: &Raster, red: &Raster, plans: [&str; 2], what: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (np, rp) = (dir.path().join("nir.zf"), dir.path().join("red.zf"));
    raster::write_zf(
        nir,
        &np,
        raster::RasterPlan::Forced(plans[0].parse().unwrap()),
        false,
    )
    .unwrap();
    raster::write_zf(
        red,
        &rp,
        raster::RasterPlan::Forced(plans[1].parse().unwrap()),
        false,
    )
    .unwrap();
    let (nb, rb) = (Band::open(&np).unwrap(), Band::open(&rp).unwrap());
    assert_eq!((nb.width, nb.height), (nir.width, nir.height));
    assert_eq!(nb.decode().unwrap(), *nir);
    for threads in [1, 2] {
        let pool = ndvi::pool(threads).unwrap();
        for op in ops() {
            let want = ndvi::reference(op, &nir.pixels, &red.pixels).unwrap();
            let fused = ndvi::fused(op, &nb, &rb, &pool).unwrap();
            let plain = ndvi::plain(op, &nir.pixels, &red.pixels, &pool).unwrap();
            let what = format!("{what} {plans:?} {threads} threads");
            assert_close(op, fused, want, nir.pixels.len(), &format!("fused {what}"));
            assert_close(op, plain, want, nir.pixels.len(), &format!("plain {what}"));
            // The same pixels folded into the same lanes in the same order: equal bit for bit.
            assert_eq!(fused, plain, "fused against plain, {what} {op:?}");
            let (counted, valid) = ndvi::fused_counted(op, &nb, &rb, &pool).unwrap();
            assert_eq!(counted, fused, "{what} {op:?}");
            assert_eq!(
                valid,
                ndvi::valid_reference(&nir.pixels, &red.pixels),
                "pixels with data, {what}"
            );
        }
    }
}

#[test]
fn synthetic_bands_every_plan() {
    // 700 x 400 = 280000 pixels: two chunks, the second partial and not a whole vector.
    let (nir, red) = synthetic(700, 400, 7);
    for plans in [
        ["bitpack", "bitpack"],
        ["for | bitpack", "for | bitpack"],
        ["for | patch | bitpack", "for | patch | bitpack"],
        ["patch | bitpack", "for | patch(4) | bitpack"],
        ["bitpack", "for | patch | bitpack"],
        // Not read in the packed domain: decoded chunk by chunk.
        ["rle", "delta | for | bitpack"],
        // The 2-D predictor, `raster compress`'s default.
        [
            "above(700) | delta | zigzag | ans",
            "above(700) | delta | zigzag | bitpack",
        ],
    ] {
        check_pair(&nir, &red, plans, "synthetic");
    }
}

#[test]
fn tiny_and_constant_bands() {
    for (w, h) in [(1, 1), (31, 33), (1024, 1), (1025, 1)] {
        let (nir, red) = synthetic(w, h, u64::from(w * 31 + h));
        check_pair(
            &nir,
            &red,
            ["for | bitpack", "for | patch | bitpack"],
            "tiny",
        );
    }
    // Constant bands: width 0 under `for`, so every value is the reference.
    let n = Raster::new(100, 50, vec![4000; 5000]).unwrap();
    let r = Raster::new(100, 50, vec![1000; 5000]).unwrap();
    check_pair(&n, &r, ["for | bitpack", "for | bitpack"], "constant");
    let z = Raster::new(100, 50, vec![0; 5000]).unwrap();
    check_pair(&z, &z, ["bitpack", "for | bitpack"], "all no-data");
}

#[test]
fn low_high_and_full_range_bands() {
    // Low values, a high reference with 15-bit offsets, and the whole u16 range; exceptions
    // and a partial last vector in each.
    let pixels = |lo: u64, span: u64, seed: u64| {
        let mut x = seed;
        (0..70_001)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                if i % 97 == 0 {
                    (lo + span + 5000).min(65535) as u16
                } else {
                    (lo + x % span) as u16
                }
            })
            .collect::<Vec<u16>>()
    };
    for (lo, span) in [(100, 3000), (40_000, 25_000), (0, 65_535)] {
        let n = Raster::new(70_001, 1, pixels(lo, span, 3)).unwrap();
        let r = Raster::new(70_001, 1, pixels(lo, span, 5)).unwrap();
        for plans in [
            ["for | bitpack", "for | patch | bitpack"],
            ["for | patch(4) | bitpack", "bitpack"],
        ] {
            check_pair(&n, &r, plans, &format!("values from {lo}"));
        }
    }
}

#[test]
fn hand_computed_answers() {
    // NDVI: 0.3 (tie), 0.5, -1, no data, 1, 0.
    let n = Raster::new(6, 1, vec![13, 3, 0, 0, 65535, 9]).unwrap();
    let r = Raster::new(6, 1, vec![7, 1, 5, 0, 0, 9]).unwrap();
    let pool = ndvi::pool(1).unwrap();
    let t = |s| Op::Count(Threshold::parse(s).unwrap());
    let ans = |op| ndvi::plain(op, &n.pixels, &r.pixels, &pool).unwrap();
    assert_eq!(ans(t("0.3")), Answer::Count(2));
    assert_eq!(ans(t("0.2999")), Answer::Count(3));
    assert_eq!(ans(t("-1")), Answer::Count(4));
    assert_eq!(ans(t("-1.0001")), Answer::Count(5));
    assert_eq!(ans(Op::SumNr), Answer::SumNr(20 + 4 + 5 + 65535 + 18));
    match ans(Op::Sum) {
        Answer::Sum(s) => assert!((s - 0.8).abs() < 1e-6, "{s}"),
        other => panic!("{other:?}"),
    }
}

fn real_band(name: &str) -> Option<PathBuf> {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    [
        manifest.join("../../../shared/data/raster").join(name),
        PathBuf::from("/work/shared/data/raster").join(name),
    ]
    .into_iter()
    .find(|p| p.exists())
}

#[test]
fn sentinel2_crop() {
    let (Some(np), Some(rp)) = (
        real_band("sentinel2_B08_nir.tif"),
        real_band("sentinel2_B04_red.tif"),
    ) else {
        eprintln!("Sentinel-2 bands not found; skipped");
        return;
    };
    let nir = raster::read_tiff(np).unwrap();
    let red = raster::read_tiff(rp).unwrap();
    assert_eq!((nir.width, nir.height), (1933, 1947));
    let (nir, red) = (
        nir.crop(800, 900, 300, 300).unwrap(),
        red.crop(800, 900, 300, 300).unwrap(),
    );
    for plans in [
        ["bitpack", "bitpack"],
        ["for | bitpack", "for | bitpack"],
        ["for | patch | bitpack", "for | patch | bitpack"],
        [
            "above(300) | delta | zigzag | ans",
            "above(300) | delta | zigzag | ans",
        ],
    ] {
        check_pair(&nir, &red, plans, "sentinel-2 300x300");
    }
}

#[test]
fn tiff_round_trip_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    let (nir, _) = synthetic(37, 21, 3);
    let p = dir.path().join("b.tif");
    raster::write_tiff(&nir, &p).unwrap();
    assert_eq!(raster::read_tiff(&p).unwrap(), nir);
    assert!(raster::read_tiff(dir.path().join("missing.tif")).is_err());
    std::fs::write(&p, b"not a tiff").unwrap();
    assert!(raster::read_tiff(&p).is_err());
    assert!(nir.crop(30, 0, 10, 1).is_err());
    assert!(Raster::new(2, 2, vec![0; 3]).is_err());
}

#[test]
fn mismatched_bands_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let (a, _) = synthetic(10, 10, 1);
    let (b, _) = synthetic(20, 5, 2);
    let (ap, bp) = (dir.path().join("a.zf"), dir.path().join("b.zf"));
    raster::write_zf(&a, &ap, chosen(), false).unwrap();
    raster::write_zf(&b, &bp, chosen(), false).unwrap();
    let pool = ndvi::pool(1).unwrap();
    let (ab, bb) = (Band::open(&ap).unwrap(), Band::open(&bp).unwrap());
    assert!(ndvi::fused(Op::Sum, &ab, &bb, &pool).is_err());
    assert!(ndvi::plain(Op::Sum, &a.pixels, &b.pixels[..99], &pool).is_err());
}

/// The integer COUNT rule against f64 division over the kernel, for every N and a spread of R
/// (all 2^32 pairs in `count_rule_is_exact_over_all_u16_pairs`).
#[test]
fn count_rule_matches_division_sampled() {
    check_count_rule(
        (0..=65535u32)
            .step_by(251)
            .chain([1, 2, 3, 7, 13, 65534, 65535]),
    );
}

/// All 2^32 (N, R) pairs, through the vector kernel. Slow in debug builds: run with
/// `cargo test --release -p zipflow-compute --test ndvi -- --ignored`.
#[test]
#[ignore]
fn count_rule_is_exact_over_all_u16_pairs() {
    check_count_rule(0..=65535u32);
}

fn check_count_rule(reds: impl Iterator<Item = u32>) {
    let pool = ndvi::pool(0).unwrap();
    let n: Vec<u16> = (0..=65535u16).collect();
    let reds: Vec<u32> = reds.collect();
    for t in ["0.3", "-0.5", "0", "0.9999", "-0.0001", "0.5", "-1", "1"] {
        let th = Threshold::parse(t).unwrap();
        let tf = th.to_f64();
        for &rv in &reds {
            let r = vec![rv as u16; n.len()];
            let got = ndvi::plain(Op::Count(th), &n, &r, &pool).unwrap();
            let y = f64::from(rv);
            let want = n
                .iter()
                .filter(|&&x| (f64::from(x) - y) / (f64::from(x) + y) > tf)
                .count() as u64;
            assert_eq!(got, Answer::Count(want), "t {t}, R {rv}");
        }
    }
}

/// Plans chosen per chunk by the selector, as the command line wires it.
fn chosen() -> raster::RasterPlan {
    raster::RasterPlan::Chosen(zipflow_select::Chooser::shared(Default::default()))
}
