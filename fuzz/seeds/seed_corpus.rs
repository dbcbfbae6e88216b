//! Writes a seed corpus for the `decode_node` target: every candidate plan (numeric, string
//! and text) encoded over small streams of each type, one file per tree, so the fuzzer
//! starts from trees that get past the headers and mutates into every decoder.
//!
//! `cargo run --manifest-path fuzz/Cargo.toml --bin seed_corpus [DIR]` (default
//! `fuzz/corpus/decode_node`).

use std::collections::HashSet;
use std::path::PathBuf;
use zipflow_core::values::{ByteStrings, IntVecOf};
use zipflow_core::{Int, IntVec, PType, Plan, Values, with_int_ptype};

/// A small deterministic generator.
fn rng(seed: u64) -> impl FnMut() -> u64 {
    let mut x = seed | 1;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

/// Streams of integers with the shapes encodings look for: a narrow range, runs, sorted
/// keys, a few outliers, negatives, and a length that is not a multiple of 1024.
fn ints(n: usize) -> Vec<Vec<i64>> {
    let mut r = rng(7);
    let narrow = (0..n).map(|_| 1000 + (r() % 50) as i64).collect();
    let runs = (0..n).map(|i| (i / 37) as i64 % 9).collect();
    let sorted = (0..n).map(|i| (i as i64) * 3 + (i as i64 % 4)).collect();
    let outliers = (0..n)
        .map(|i| {
            if i % 97 == 5 {
                1 << 40
            } else {
                (r() % 16) as i64
            }
        })
        .collect();
    let signed = (0..n).map(|_| (r() % 2001) as i64 - 1000).collect();
    vec![narrow, runs, sorted, outliers, signed]
}

/// `v` cast to integer type `ptype` (wrapping into its range).
fn as_ptype(v: &[i64], ptype: PType) -> Values {
    with_int_ptype!(ptype, T => Values::Int(T::wrap(
        v.iter().map(|&x| T::from_u64_wrapping(x as u64)).collect(),
    )), _ => Values::Int(IntVec::I64(v.to_vec())))
}

fn strings(items: &[String]) -> Values {
    let mut b = ByteStrings {
        offsets: vec![0],
        data: Vec::new(),
    };
    for s in items {
        b.data.extend_from_slice(s.as_bytes());
        b.offsets.push(b.data.len() as u64);
    }
    Values::Bytes(b)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args()
        .nth(1)
        .map_or_else(|| PathBuf::from("fuzz/corpus/decode_node"), PathBuf::from);
    std::fs::create_dir_all(&dir)?;
    let n = 3000;
    let mut work: Vec<(Vec<Plan>, Vec<Values>)> = Vec::new();
    for ptype in PType::INTS {
        let streams = ints(n).iter().map(|v| as_ptype(v, ptype)).collect();
        work.push((zipflow_select::candidates(ptype), streams));
    }
    let mut r = rng(11);
    let prices: Vec<f64> = (0..n).map(|_| (r() % 100_000) as f64 / 100.0).collect();
    let noisy: Vec<f64> = (0..n).map(|_| f64::from_bits(r() >> 2)).collect();
    work.push((
        zipflow_select::candidates(PType::F64),
        vec![Values::F64(prices.clone()), Values::F64(noisy)],
    ));
    work.push((
        zipflow_select::candidates(PType::F32),
        vec![Values::F32(prices.iter().map(|&x| x as f32).collect())],
    ));
    let words = [
        "quick",
        "final",
        "deposits",
        "sleep",
        "furiously",
        "ironic",
        "é",
    ];
    let flags: Vec<String> = (0..n).map(|i| ["A", "N", "R"][i % 3].to_string()).collect();
    let comments: Vec<String> = (0..n)
        .map(|_| {
            (0..1 + r() % 6)
                .map(|_| words[(r() % words.len() as u64) as usize])
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    work.push((
        zipflow_select::candidates(PType::Bytes),
        vec![strings(&flags), strings(&comments)],
    ));
    let text = comments.join(". ").into_bytes();
    work.push((
        zipflow_select::text_candidates(),
        vec![Values::Int(IntVec::U8(text))],
    ));
    let mut seen = HashSet::new();
    for (plans, streams) in &work {
        for plan in plans {
            for s in streams {
                // A plan that does not fit a stream is skipped, as the selector skips it.
                let Ok(node) = zipflow_encodings::encode(plan, s) else {
                    continue;
                };
                let bytes = node.to_bytes()?;
                let key = xxhash_rust::xxh3::xxh3_64(&bytes);
                if seen.insert(key) {
                    std::fs::write(dir.join(format!("{key:016x}")), &bytes)?;
                }
            }
        }
    }
    println!("{} seed trees in {}", seen.len(), dir.display());
    Ok(())
}
