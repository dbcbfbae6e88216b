//! Decode throughput of every primitive, single thread, into reused buffers, beside the raw
//! `fastlanes` unpack at the same width in the same run.
//!
//! `cargo bench -p zipflow-encodings --bench decode` (filter with a name, e.g. `-- bitpack`).
//! Throughput is decoded bytes per second.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use fastlanes::BitPacking;
use std::hint::black_box;
use std::time::Duration;
use zipflow_core::{IntVec, Plan, Values};
use zipflow_encodings::{NodeView, Scratch, decode, encode};

/// Values in one chunk (the default chunk size): fits in L2.
const CHUNK: usize = 64 * 1024;
/// A stream far larger than the caches: measures from DRAM.
const LARGE: usize = 16 * 1024 * 1024;

fn rng(seed: u64) -> impl FnMut() -> u64 {
    let mut x = seed | 1;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

fn encoded(plan: &str, values: &Values) -> Vec<u8> {
    let plan: Plan = plan.parse().unwrap_or_else(|e| panic!("{e}"));
    encode(&plan, values)
        .and_then(|n| n.to_bytes())
        .unwrap_or_else(|e| panic!("{plan}: {e}"))
}

/// Benchmarks decoding `bytes` (a node tree) into a reused output.
fn bench_decode(c: &mut Criterion, group: &str, id: String, bytes: &[u8], decoded_bytes: usize) {
    let mut g = c.benchmark_group(group);
    g.throughput(Throughput::Bytes(decoded_bytes as u64));
    let node = NodeView::parse(bytes).unwrap_or_else(|e| panic!("{e}"));
    let mut out = Values::empty(node.ptype);
    let mut scratch = Scratch::default();
    g.bench_function(BenchmarkId::new("zipflow", id), |b| {
        b.iter(|| {
            decode(black_box(&node), &mut out, &mut scratch).unwrap_or_else(|e| panic!("{e}"));
            black_box(&out);
        })
    });
    g.finish();
}

fn bitpack_vs_fastlanes(c: &mut Criterion) {
    for (n, size) in [(CHUNK, "64Ki"), (LARGE, "16Mi")] {
        for w in [1u32, 3, 8, 13, 17, 25, 32] {
            if n == LARGE && ![8, 25].contains(&w) {
                continue;
            }
            let mut r = rng(u64::from(w));
            let mask = if w == 32 { u32::MAX } else { (1u32 << w) - 1 };
            let v: Vec<u32> = (0..n).map(|_| r() as u32 & mask).collect();
            let group = format!("bitpack_u32_{size}");
            let id = format!("w{w:02}");

            // Raw fastlanes: the same packed words, unpacked vector by vector.
            let packed = zipflow_encodings::bitpack::pack(&v, w);
            let mut out = vec![0u32; n];
            let per_vector = 1024 * w as usize / 32;
            let mut g = c.benchmark_group(&group);
            g.throughput(Throughput::Bytes(4 * n as u64));
            g.bench_function(BenchmarkId::new("fastlanes", &id), |b| {
                b.iter(|| {
                    for (src, dst) in packed
                        .chunks_exact(per_vector)
                        .zip(out.chunks_exact_mut(1024))
                    {
                        // SAFETY: `src` is one packed vector at width `w <= 32`, `dst` 1024 values.
                        unsafe { u32::unchecked_unpack(w as usize, black_box(src), dst) };
                    }
                    black_box(&out);
                })
            });
            g.finish();

            let bytes = encoded("bitpack", &Values::Int(IntVec::U32(v)));
            bench_decode(c, &group, id, &bytes, 4 * n);
        }
    }
    for w in [1u32, 16, 33, 48, 64] {
        let mut r = rng(u64::from(w));
        let mask = if w == 64 { u64::MAX } else { (1u64 << w) - 1 };
        let v: Vec<u64> = (0..CHUNK).map(|_| r() & mask).collect();
        let bytes = encoded("bitpack", &Values::Int(IntVec::U64(v)));
        bench_decode(c, "bitpack_u64_64Ki", format!("w{w:02}"), &bytes, 8 * CHUNK);
    }
}

fn primitives(c: &mut Criterion) {
    let mut r = rng(7);
    let n = CHUNK;
    let i64s = |f: &mut dyn FnMut(usize) -> i64| Values::Int(IntVec::I64((0..n).map(f).collect()));
    let cases: Vec<(&str, &str, Values)> = vec![
        (
            "for",
            "for | bitpack",
            i64s(&mut |_| 1_000_000 + (r() % 5000) as i64),
        ),
        (
            "zigzag",
            "zigzag | bitpack",
            i64s(&mut |i| (i as i64 % 200) - 100),
        ),
        (
            "delta",
            "delta | for | bitpack",
            i64s(&mut |i| 7 * i as i64 + (i as i64 % 3)),
        ),
        (
            "rle",
            "rle(values: for | bitpack, runs: for | bitpack)",
            i64s(&mut |i| (i / 8) as i64 % 977),
        ),
        (
            "dict",
            "dict(codes: bitpack, values: for | bitpack)",
            i64s(&mut |i| [5i64, 1_000_000, -7, 42, 99][i % 5]),
        ),
        ("constant", "constant", i64s(&mut |_| 42)),
        (
            "patch",
            "for | patch | bitpack",
            i64s(&mut |i| {
                if i % 500 == 0 {
                    1 << 40
                } else {
                    (i % 100) as i64
                }
            }),
        ),
        ("plain", "plain", i64s(&mut |i| i as i64)),
    ];
    // A price column: 3 % of the values one bit past 23 bits (TPC-H l_extendedprice), as
    // `hipatch` stores it and as plain 24-bit packing.
    let mut prices = rng(11);
    let spill = i64s(&mut |_| {
        let x = prices();
        let low = (x % (1 << 23)) as i64;
        if (x >> 40) % 100 < 3 {
            low | 1 << 23
        } else {
            low
        }
    });
    let cases = cases.into_iter().chain([
        ("hipatch", "hipatch(23) | bitpack", spill.clone()),
        ("hipatch_for", "for | hipatch(23) | bitpack", spill.clone()),
        ("hipatch_vs_bitpack24", "bitpack", spill),
    ]);
    for (name, plan, values) in cases {
        let bytes = encoded(plan, &values);
        bench_decode(c, "primitive_i64_64Ki", name.to_string(), &bytes, 8 * n);
    }
    let prices = Values::F64(
        (0..n)
            .map(|i| ((i * 7919) % 10_000_000) as f64 / 100.0)
            .collect(),
    );
    let bytes = encoded("float2int | for | bitpack", &prices);
    bench_decode(c, "primitive_f64_64Ki", "float2int".into(), &bytes, 8 * n);
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
}

criterion_group! {
    name = benches;
    config = config();
    targets = bitpack_vs_fastlanes, primitives
}
criterion_main!(benches);
