//! Encode and decode throughput of the character-dictionary coders (`chardict16`, `chartable`
//! with 1, 2, 4 and 8 tables) beside a memcpy of the same bytes, in the same run.
//!
//! `cargo bench -p zipflow-encodings --bench chardict` (filter with a name, e.g. `-- decode`).
//! Input: the Silesia `dickens` text, from `$ZIPFLOW_DICKENS` or `/tmp/dickens` (decompress
//! `dickens.bz2` there), else generated English-like text of the same size. Throughput is
//! input bytes per second; `single` runs on one thread, `all` on every core.
//!
//! With `ZIPFLOW_TEXTS=/tmp/dickens,/tmp/xml` it first prints a table per corpus: payload
//! ratio, index overhead, and median encode and decode MB/s beside a memcpy.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use std::time::{Duration, Instant};
use zipflow_core::{IntVec, Plan, Values};
use zipflow_encodings::{NodeView, Scratch, decode, encode};

/// Decode and encode bytes of at most this many bytes per node (the chunk limit is 16 MiB).
const MAX_LEN: usize = 16 << 20;

fn text() -> (String, Vec<u8>) {
    let path = std::env::var("ZIPFLOW_DICKENS").unwrap_or_else(|_| "/tmp/dickens".into());
    if let Ok(mut b) = std::fs::read(&path) {
        b.truncate(MAX_LEN);
        return ("dickens".into(), b);
    }
    const WORDS: &[&str] = &[
        "the", "of", "and", "to", "in", "a", "is", "that", "for", "it", "as", "was", "with", "be",
        "by", "on", "not", "he", "I", "this", "are", "or", "his", "from", "at", "which", "but",
        "have", "an", "had", "they", "you", "were", "Mr.", "Pickwick", "said", "\n",
    ];
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut t = Vec::with_capacity(10 << 20);
    while t.len() < 10 << 20 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        t.extend_from_slice(WORDS[(x % WORDS.len() as u64) as usize].as_bytes());
        t.push(if x.is_multiple_of(13) { b',' } else { b' ' });
    }
    ("generated".into(), t)
}

fn pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Median seconds of `runs` calls of `f`.
fn median_secs(runs: usize, mut f: impl FnMut()) -> f64 {
    let mut t: Vec<f64> = (0..runs)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed().as_secs_f64()
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[runs / 2]
}

/// Prints, per corpus in `$ZIPFLOW_TEXTS` (comma-separated paths), each coder's payload ratio,
/// index overhead, and median MB/s of encoding (all cores) and decoding (one core, all cores)
/// beside a memcpy of the same bytes. Files over 16 MiB are coded in 16 MiB pieces.
/// The table's timings are wall-clock: on a busy machine, count cycles instead (below).
fn table() {
    let Ok(list) = std::env::var("ZIPFLOW_TEXTS") else {
        return;
    };
    let single = pool(1);
    let all = pool(std::thread::available_parallelism().map_or(1, |n| n.get()));
    let mb = |n: usize, s: f64| n as f64 / s / 1e6;
    for path in list.split(',') {
        let data = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let pieces: Vec<Values> = data
            .chunks(MAX_LEN)
            .map(|c| Values::Int(IntVec::U8(c.to_vec())))
            .collect();
        let mut copy = vec![0u8; data.len()];
        let memcpy = median_secs(5, || copy.copy_from_slice(black_box(&data)));
        println!(
            "{path}: {} bytes, memcpy {:.0} MB/s",
            data.len(),
            mb(data.len(), memcpy)
        );
        let only = std::env::var("ZIPFLOW_PLANS").unwrap_or_default();
        for p in PLANS
            .into_iter()
            .filter(|p| only.is_empty() || only.split(';').any(|o| o == *p))
        {
            let plan: Plan = p.parse().unwrap_or_else(|e| panic!("{e}"));
            let encode_all = || {
                pieces
                    .iter()
                    .map(|v| encode(&plan, v).and_then(|n| n.to_bytes()))
                    .collect::<Result<Vec<_>, _>>()
                    .unwrap_or_else(|e| panic!("{p}: {e}"))
            };
            let nodes: Vec<_> = single.install(|| {
                pieces
                    .iter()
                    .map(|v| encode(&plan, v).unwrap_or_else(|e| panic!("{p}: {e}")))
                    .collect()
            });
            let payload: usize = nodes.iter().map(|n| n.buffers[0].len()).sum();
            let index: usize = nodes.iter().map(|n| n.buffers[1].len()).sum();
            let meta: usize = nodes.iter().map(|n| n.meta.len()).sum();
            let total: usize = nodes.iter().map(|n| n.size()).sum();
            let bytes = single.install(encode_all);
            let views: Vec<NodeView<'_>> = bytes
                .iter()
                .map(|b| NodeView::parse(b).unwrap_or_else(|e| panic!("{e}")))
                .collect();
            let mut out = Values::empty(views[0].ptype);
            let mut scratch = Scratch::default();
            let mut decode_all = || {
                for v in &views {
                    decode(v, &mut out, &mut scratch).unwrap_or_else(|e| panic!("{e}"));
                    black_box(&out);
                }
            };
            // `ZIPFLOW_PHASE=encode1|decode1|none` runs only that phase (10 times, one core) or
            // neither, so `perf stat -e cycles:u` can tell a phase's cycles from the setup's.
            let phase = std::env::var("ZIPFLOW_PHASE").unwrap_or_default();
            let runs = |name: &str, n: usize| match phase.as_str() {
                "" => n,
                ph if ph == name => 10,
                _ => 0,
            };
            let timed = |n: usize, f: &mut dyn FnMut()| {
                if n == 0 { f64::NAN } else { median_secs(n, f) }
            };
            let mut encode_once = || drop(black_box(encode_all()));
            let enc1 = single.install(|| timed(runs("encode1", 3), &mut encode_once));
            let enc = all.install(|| timed(runs("encode", 3), &mut encode_once));
            let dec1 = single.install(|| timed(runs("decode1", 5), &mut decode_all));
            let dec = all.install(|| timed(runs("decode", 5), &mut decode_all));
            println!(
                "  {p:<13} payload {:.4} (saving {:.1} %), index {} B ({:.2} %), meta {} B, node {:.4} | encode {:.0} / {:.0} MB/s, decode {:.0} / {:.0} MB/s (1 core / all)",
                payload as f64 / data.len() as f64,
                100.0 * (1.0 - payload as f64 / data.len() as f64),
                index,
                100.0 * index as f64 / data.len() as f64,
                meta,
                total as f64 / data.len() as f64,
                mb(data.len(), enc1),
                mb(data.len(), enc),
                mb(data.len(), dec1),
                mb(data.len(), dec),
            );
        }
    }
}

const PLANS: [&str; 5] = [
    "chardict16",
    "chartable(1)",
    "chartable(2)",
    "chartable(4)",
    "chartable(8)",
];

fn coders(c: &mut Criterion) {
    let (name, data) = text();
    let values = Values::Int(IntVec::U8(data.clone()));
    let single = pool(1);
    let all = pool(std::thread::available_parallelism().map_or(1, |n| n.get()));
    let mut g = c.benchmark_group(format!("chardict/{name}"));
    g.throughput(Throughput::Bytes(data.len() as u64));
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(3));
    g.bench_function("memcpy", |b| {
        let mut out = vec![0u8; data.len()];
        b.iter(|| {
            out.copy_from_slice(black_box(&data));
            black_box(&out);
        })
    });
    table();
    for p in PLANS {
        let plan: Plan = p.parse().unwrap_or_else(|e| panic!("{e}"));
        let Ok(node) = encode(&plan, &values) else {
            continue;
        };
        eprintln!(
            "{p} on {name}: {} bytes -> payload {} bytes (ratio {:.4}), node {} bytes",
            data.len(),
            node.buffers.first().map_or(0, Vec::len),
            node.buffers.first().map_or(0, Vec::len) as f64 / data.len() as f64,
            node.size()
        );
        let bytes = node.to_bytes().unwrap_or_else(|e| panic!("{e}"));
        let view = NodeView::parse(&bytes).unwrap_or_else(|e| panic!("{e}"));
        for (threads, pool) in [("single", &single), ("all", &all)] {
            g.bench_function(BenchmarkId::new(format!("encode/{threads}"), p), |b| {
                b.iter(|| pool.install(|| black_box(encode(&plan, black_box(&values)))))
            });
            g.bench_function(BenchmarkId::new(format!("decode/{threads}"), p), |b| {
                let mut out = Values::empty(view.ptype);
                let mut scratch = Scratch::default();
                b.iter(|| {
                    pool.install(|| decode(black_box(&view), &mut out, &mut scratch))
                        .unwrap_or_else(|e| panic!("{e}"));
                    black_box(&out);
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, coders);
criterion_main!(benches);
