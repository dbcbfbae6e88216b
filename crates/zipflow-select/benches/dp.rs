//! Nanoseconds per block of the per-block shortest path, for option counts from character
//! tables (8, 16) to bit widths (33, 65), against a scalar reference with `u64` back pointers.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use zipflow_select::dp::{Switch, shortest_path};

fn costs(blocks: usize, options: usize) -> Vec<u64> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    (0..blocks * options)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            1000 + x % 4000
        })
        .collect()
}

/// The textbook form: full predecessor scan per (block, option), back pointers as indices.
fn reference(costs: &[u64], n: usize, sw: Switch) -> u64 {
    let blocks = costs.len() / n;
    let mut row: Vec<u64> = costs[..n].iter().map(|c| c + sw.first).collect();
    let mut next = vec![0u64; n];
    let mut from = vec![0usize; costs.len()];
    for b in 1..blocks {
        for j in 0..n {
            let mut best = u64::MAX;
            for (i, &r) in row.iter().enumerate() {
                let c = r + if i == j { sw.stay } else { sw.change };
                if c < best {
                    best = c;
                    from[b * n + j] = i;
                }
            }
            next[j] = best + costs[b * n + j];
        }
        std::mem::swap(&mut row, &mut next);
    }
    row.iter().copied().min().unwrap_or(0)
}

fn bench(c: &mut Criterion) {
    let sw = Switch {
        first: 32,
        stay: 0,
        change: 32,
    };
    let blocks = 4096;
    let mut g = c.benchmark_group("shortest_path");
    g.throughput(Throughput::Elements(blocks as u64));
    for options in [8usize, 16, 33, 65] {
        let data = costs(blocks, options);
        g.bench_with_input(BenchmarkId::new("dp", options), &data, |b, d| {
            b.iter(|| shortest_path(black_box(d), options, sw))
        });
        g.bench_with_input(BenchmarkId::new("all_pairs", options), &data, |b, d| {
            b.iter(|| reference(black_box(d), options, sw))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
