//! Encode and decode throughput of the string and text primitives (`plain` strings, `strdict`,
//! `fsst`, `words`), single thread, beside a copy of the same bytes in the same run.
//!
//! `cargo bench -p zipflow-encodings --bench strings` (filter with a name, e.g. `-- words`).
//! Data: TPC-H-like comments and flags generated here, and Silesia `dickens` when
//! `../shared/data/silesia/dickens.bz2` (or `ZIPFLOW_TEXT=path`) is readable. Throughput is
//! plain bytes per second.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use std::time::Duration;
use zipflow_core::values::ByteStrings;
use zipflow_core::{IntVec, Plan, Values};
use zipflow_encodings::{NodeView, Scratch, decode, encode};

fn rng(seed: u64) -> impl FnMut() -> u64 {
    let mut x = seed | 1;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

/// English-like text from a small vocabulary with a skewed distribution.
fn text(n: usize) -> Vec<u8> {
    const WORDS: &[&str] = &[
        "the ",
        "of ",
        "and ",
        "to ",
        "a ",
        "in ",
        "furiously ",
        "regular ",
        "deposits ",
        "sleep ",
        "quickly ",
        "ironic ",
        "packages ",
        "across ",
        "blithely ",
        "final ",
        "accounts ",
        "haggle ",
        "carefully ",
        "pending ",
        "requests ",
        "boost ",
        "slyly ",
        "express ",
        ". ",
        ", ",
    ];
    let mut r = rng(3);
    let mut s = Vec::with_capacity(n + 16);
    while s.len() < n {
        // Skewed: low indices far more often.
        let a = (r() % WORDS.len() as u64) as usize;
        let b = (r() % WORDS.len() as u64) as usize;
        s.extend_from_slice(WORDS[a.min(b)].as_bytes());
    }
    s.truncate(n);
    s
}

/// The Silesia `dickens` text if it can be read.
fn dickens() -> Option<Vec<u8>> {
    let path = std::env::var("ZIPFLOW_TEXT")
        .unwrap_or_else(|_| "../../../shared/data/silesia/dickens.bz2".into());
    if path.ends_with(".bz2") {
        let out = std::process::Command::new("bzip2")
            .arg("-dc")
            .arg(&path)
            .output()
            .ok()?;
        out.status.success().then_some(out.stdout)
    } else {
        std::fs::read(path).ok()
    }
}

fn strings(items: impl IntoIterator<Item = Vec<u8>>) -> Values {
    let mut b = ByteStrings {
        offsets: vec![0],
        data: Vec::new(),
    };
    for s in items {
        b.data.extend_from_slice(&s);
        b.offsets.push(b.data.len() as u64);
    }
    Values::Bytes(b)
}

/// Comment-like strings (substrings of the text, 10 to 43 bytes) and three-valued flags.
fn columns() -> Vec<(&'static str, Values)> {
    let t = text(4 << 20);
    let mut r = rng(9);
    let comments = strings((0..65_536).map(|_| {
        let len = 10 + (r() % 34) as usize;
        let start = (r() % (t.len() - len) as u64) as usize;
        t[start..start + len].to_vec()
    }));
    let flags =
        strings((0..65_536).map(|i| [&b"A"[..], b"N", b"R"][(i * 7 % 3) as usize].to_vec()));
    vec![("comments", comments), ("flags", flags)]
}

fn bench_plan(c: &mut Criterion, group: &str, plan: &str, values: &Values) {
    let plan_p: Plan = plan.parse().unwrap_or_else(|e| panic!("{e}"));
    let bytes = encode(&plan_p, values)
        .and_then(|n| n.to_bytes())
        .unwrap_or_else(|e| panic!("{plan}: {e}"));
    let plain = values.plain_size() as u64;
    let mut g = c.benchmark_group(group);
    g.throughput(Throughput::Bytes(plain));
    g.bench_function(BenchmarkId::new("encode", plan), |b| {
        b.iter(|| black_box(encode(&plan_p, black_box(values)).map(|n| n.size())))
    });
    let node = NodeView::parse(&bytes).unwrap_or_else(|e| panic!("{e}"));
    let mut out = Values::empty(node.ptype);
    let mut scratch = Scratch::default();
    g.bench_function(BenchmarkId::new("decode", plan), |b| {
        b.iter(|| {
            decode(black_box(&node), &mut out, &mut scratch).unwrap_or_else(|e| panic!("{e}"));
            black_box(&out);
        })
    });
    g.finish();
    eprintln!(
        "{group} {plan}: {} -> {} bytes, ratio {:.2}",
        plain,
        bytes.len(),
        plain as f64 / bytes.len() as f64
    );
}

/// The reference: copying the same number of plain bytes.
fn bench_copy(c: &mut Criterion, group: &str, n: usize) {
    let src = vec![7u8; n];
    let mut dst = vec![0u8; n];
    let mut g = c.benchmark_group(group);
    g.throughput(Throughput::Bytes(n as u64));
    g.bench_function("memcpy", |b| {
        b.iter(|| {
            dst.copy_from_slice(black_box(&src));
            black_box(&dst);
        })
    });
    g.finish();
}

fn string_columns(c: &mut Criterion) {
    for (name, values) in columns() {
        let group = format!("strings_{name}");
        bench_copy(c, &group, values.plain_size());
        for plan in [
            "plain",
            "strdict",
            "plain(bytes: fsst)",
            "plain(bytes: words)",
            "words",
            "words(dict: plain(bytes: fsst))",
        ] {
            bench_plan(c, &group, plan, &values);
        }
    }
}

fn text_streams(c: &mut Criterion) {
    let mut inputs = vec![("generated", text(8 << 20))];
    if let Some(d) = dickens() {
        inputs.push(("dickens", d));
    }
    for (name, data) in inputs {
        let group = format!("text_{name}");
        bench_copy(c, &group, data.len());
        let values = Values::Int(IntVec::U8(data));
        for plan in ["fsst", "fsst(codes: ans)", "words(codes: bitpack)", "words"] {
            bench_plan(c, &group, plan, &values);
        }
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2));
    targets = string_columns, text_streams
}
criterion_main!(benches);
