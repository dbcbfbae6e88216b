//! GPU decoding checked bit for bit against the CPU decoder.
//!
//! Without a GPU these tests print that they skipped and pass; with `ZIPFLOW_REQUIRE_GPU=1`
//! a missing GPU fails them. `ZIPFLOW_TPCH_ZF=FILE.zf` adds a check of every column of that
//! file (e.g. `zipflow tpch --sf 1 -o FILE.zf --no-parquet`). `ZIPFLOW_GPU_PLANS=delta,rle`
//! checks only the plans whose text contains one of those words (a quick look at one area;
//! the minimum count of checked streams is then not asserted).

mod common;
use common::{gpu, rng};

use zipflow_core::values::ByteStrings;
use zipflow_core::{Error, Int, IntVec, PType, Plan, Result, Values, with_int_ptype};
use zipflow_cuda::codegen::generate;
use zipflow_cuda::{ColumnDecoder, Gpu, Shape, decode_trees, gpu_required};
use zipflow_encodings::{NodeView, decode_bytes, encode};

/// The words of `ZIPFLOW_GPU_PLANS`, when set: only plans naming one of them are checked.
fn plan_filter() -> Option<Vec<String>> {
    let v = std::env::var("ZIPFLOW_GPU_PLANS").ok()?;
    Some(v.split(',').map(|w| w.trim().to_string()).collect())
}

/// Edge-case streams of one integer type.
fn int_cases<T: Int>() -> Vec<Vec<T>> {
    let mut r = rng(u64::from(T::BITS));
    let f = T::from_u64_wrapping;
    let mut cases: Vec<Vec<T>> = Vec::new();
    for n in [0usize, 1, 1023, 1024, 1025, 3000] {
        cases.push((0..n).map(|_| f(r())).collect());
    }
    // Small range around a large base, with rare wide outliers.
    cases.push(
        (0..70_000u64)
            .map(|i| {
                if i % 997 == 5 {
                    f(r())
                } else {
                    f((1u64 << (T::BITS - 2)).wrapping_add(r() % 300))
                }
            })
            .collect(),
    );
    // Runs of varied length, including long ones.
    let mut runs = Vec::new();
    for k in 0..400u64 {
        let len = if k % 50 == 0 {
            2000
        } else {
            1 + (r() % 40) as usize
        };
        runs.extend(std::iter::repeat_n(f(r() % 1000), len));
    }
    cases.push(runs);
    // Sorted and slowly increasing.
    cases.push((0..9000u64).map(|i| f(i * 3 + r() % 3)).collect());
    cases.push(vec![f(42); 5000]);
    cases.push([T::MIN, T::MAX, T::ZERO, T::MAX, T::MIN].repeat(700));
    // Few distinct values (dictionary).
    cases.push((0..6000).map(|_| f(r() % 37 * 1_000_003)).collect());
    // A 3 % one-bit spill over 12 bits, a partial last vector, and vectors without any.
    cases.push(
        (0..70_001u64)
            .map(|i| {
                let spill = i % 33 == 4 && (i / 1024) % 5 != 3;
                f(r() % 4096 + if spill { 4096 + (r() % 3) * 8192 } else { 0 })
            })
            .collect(),
    );
    // Values below small bases (radix), with partial groups at the end.
    for (base, n) in [(3u64, 70_001usize), (5, 3001), (7, 1025), (2, 999)] {
        cases.push((0..n).map(|_| f(r() % base)).collect());
    }
    cases
}

/// Plans over `hipatch`, `radix` and `lowbits`, which the candidate list holds only in part.
const PATCHED_AND_RADIX: &[&str] = &[
    "hipatch | bitpack",
    "for | hipatch | bitpack",
    "hipatch(counts: plain, offsets: bitpack, high: constant) | bitpack",
    "for | hipatch(3, high: plain) | bitpack",
    "zigzag | hipatch | bitpack",
    "delta | hipatch(counts: bitpack, offsets: plain, high: for | bitpack) | bitpack",
    "hipatch(counts: rle) | for | bitpack",
    "dict(codes: bitpack, values: for | hipatch | bitpack)",
    "radix",
    "for | radix",
    "dict(codes: radix, values: for | bitpack)",
    "zigzag | radix",
    "lowbits(3)",
    "lowbits(1, high: for | bitpack, low: plain)",
    "zigzag | lowbits(5, high: for | bitpack, low: dict(codes: bitpack, values: plain))",
];

/// Edge-case streams of floats: decimals, specials, random bits.
fn float_cases() -> Vec<Vec<f64>> {
    let mut r = rng(77);
    let specials = [
        -0.0,
        f64::NAN,
        f64::from_bits(0x7ff8_dead_beef_0001),
        f64::INFINITY,
        f64::NEG_INFINITY,
        1e300,
        5e-324,
        f64::MIN_POSITIVE,
    ];
    let mut cases = Vec::new();
    for n in [0usize, 1, 1023, 1025] {
        cases.push((0..n).map(|_| (r() % 100_000) as f64 / 100.0).collect());
    }
    cases.push(
        (0..70_000u64)
            .map(|i| {
                if i % 1013 == 7 {
                    specials[(i as usize / 1013) % specials.len()]
                } else {
                    (r() % 10_000_000) as f64 / 100.0 - 20_000.0
                }
            })
            .collect(),
    );
    cases.push((0..5000).map(|_| f64::from_bits(r())).collect());
    cases.push(vec![0.07; 3000]);
    cases.push((0..4000).map(|i| f64::from(i / 100) * 0.5).collect());
    // float32 values widened: `alprd` drops their 29 zero low bits.
    cases.push(
        (0..5000)
            .map(|_| f64::from((r() % 1_000_000) as f32 / 7.0))
            .collect(),
    );
    cases
}

fn concat(parts: &[Values], ptype: PType) -> Values {
    let mut out = Values::empty(ptype);
    for p in parts {
        match (&mut out, p) {
            (Values::F32(a), Values::F32(b)) => a.extend_from_slice(b),
            (Values::F64(a), Values::F64(b)) => a.extend_from_slice(b),
            (Values::Int(a), Values::Int(b)) => {
                let merged = zipflow_core::match_ints!(a, T, x => {
                    if let Some(y) = <T as zipflow_core::values::IntVecOf>::slice(b) {
                        x.extend_from_slice(y);
                    }
                    x.len()
                });
                let _ = merged;
            }
            (Values::Bytes(a), Values::Bytes(b)) => {
                if a.offsets.is_empty() {
                    a.offsets.push(0);
                }
                let base = a.data.len() as u64;
                a.data.extend_from_slice(&b.data);
                let first = b.offsets.first().copied().unwrap_or(0);
                a.offsets
                    .extend(b.offsets.iter().skip(1).map(|&o| o - first + base));
            }
            _ => panic!("mixed types"),
        }
    }
    out
}

/// Each stream encoded with `plan` (skipping streams the plan cannot represent), and the
/// trees decoded on the CPU as one column; `None` when the plan represents none of them.
fn encode_streams(
    plan: &Plan,
    streams: &[Values],
    ptype: PType,
) -> Result<Option<(Vec<Vec<u8>>, Values)>> {
    let mut trees = Vec::new();
    for s in streams {
        match encode(plan, s) {
            Ok(node) => trees.push(node.to_bytes()?),
            Err(Error::Plan { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    if trees.is_empty() {
        return Ok(None);
    }
    let cpu: Vec<Values> = trees
        .iter()
        .map(|t| decode_bytes(t))
        .collect::<Result<_>>()?;
    Ok(Some((trees, concat(&cpu, ptype))))
}

/// Whether `ZIPFLOW_GPU_PLANS` (if set) names a word of `plan`.
fn wanted(plan: &Plan) -> bool {
    plan_filter().is_none_or(|words| {
        let text = plan.to_string();
        words.iter().any(|w| text.contains(w.as_str()))
    })
}

/// The kernels a column of `streams` encoded with `plan` decodes with, one per plan shape
/// (streams the plan cannot represent, and shapes the GPU does not read, are left out).
fn kernels_of(plan: &Plan, streams: &[Values]) -> Result<Vec<zipflow_cuda::codegen::Kernel>> {
    let mut seen = std::collections::HashSet::new();
    let mut kernels = Vec::new();
    for s in streams {
        let Ok(node) = encode(plan, s) else { continue };
        let bytes = node.to_bytes()?;
        let Ok(shape) = Shape::of(&NodeView::parse(&bytes)?) else {
            continue;
        };
        if seen.insert(shape.key())
            && let Ok(k) = generate(&shape)
        {
            kernels.push(k);
        }
    }
    Ok(kernels)
}

/// Compiles the kernels of every wanted plan over its streams up front, on all cores
/// ([`Gpu::prepare`]): compiling, not decoding, takes most of a plan test's time.
fn prepare<'a>(
    gpu: &Gpu,
    sets: impl Iterator<Item = (&'a [Plan], &'a [Values])>,
    test: &str,
) -> Result<()> {
    let mut kernels = Vec::new();
    for (plans, streams) in sets {
        for plan in plans.iter().filter(|p| wanted(p)) {
            kernels.extend(kernels_of(plan, streams)?);
        }
    }
    let started = std::time::Instant::now();
    gpu.prepare(&kernels.iter().collect::<Vec<_>>())?;
    eprintln!(
        "{test}: {} kernels ready in {:.1} s",
        kernels.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Encodes each stream with `plan` (skipping streams the plan cannot represent), decodes the
/// trees on the GPU in one column and on the CPU one by one, and compares bit for bit.
fn check(
    gpu: &Gpu,
    plan: &Plan,
    streams: &[Values],
    ptype: PType,
    failures: &mut Vec<String>,
) -> Result<usize> {
    if !wanted(plan) {
        return Ok(0);
    }
    let Some((trees, cpu)) = encode_streams(plan, streams, ptype)? else {
        return Ok(0);
    };
    let refs: Vec<&[u8]> = trees.iter().map(Vec::as_slice).collect();
    let sizes: Vec<u64> = streams_bytes(&trees)?;
    let hint = (ptype == PType::Bytes).then_some(&sizes[..]);
    let got = match decode_trees(gpu, ptype, &refs, hint) {
        Ok(v) => v,
        Err(Error::Unsupported { what, .. }) => {
            // Primitives the GPU does not decode yet must say so, by name.
            assert!(
                what.contains('`'),
                "{plan}: unsupported without a name: {what}"
            );
            eprintln!("{plan} over {ptype}: not on the GPU ({what})");
            return Ok(0);
        }
        Err(e) => {
            failures.push(format!("{plan} over {ptype}: {e}"));
            return Ok(0);
        }
    };
    if got.len() != cpu.len() {
        failures.push(format!(
            "{plan} over {ptype}: {} values, expected {}",
            got.len(),
            cpu.len()
        ));
    } else if !got.bit_eq(&cpu) {
        let first = (0..cpu.len())
            .find(|&i| !got.slice(i, i + 1).bit_eq(&cpu.slice(i, i + 1)))
            .unwrap_or(0);
        failures.push(format!(
            "{plan} over {ptype}: GPU differs from CPU first at {first}: {:?} vs {:?}",
            got.slice(first, (first + 4).min(got.len())),
            cpu.slice(first, (first + 4).min(cpu.len()))
        ));
    }
    Ok(trees.len())
}

/// Each tree's decoded string bytes (0 for numbers), as the footer records them.
fn streams_bytes(trees: &[Vec<u8>]) -> Result<Vec<u64>> {
    trees
        .iter()
        .map(|t| {
            Ok(match decode_bytes(t)? {
                Values::Bytes(b) => b.data.len() as u64,
                _ => 0,
            })
        })
        .collect()
}

/// Byte strings from their values.
fn strings(v: &[Vec<u8>]) -> Values {
    let mut b = ByteStrings::default();
    b.offsets.push(0);
    for s in v {
        b.data.extend_from_slice(s);
        b.offsets.push(b.data.len() as u64);
    }
    Values::Bytes(b)
}

/// Byte-string streams: edge cases of lengths and content, a low-cardinality column, text,
/// and dictionaries too large for shared memory.
fn string_streams() -> Vec<Values> {
    let mut r = rng(99);
    let words = [
        "the ", "quick ", "brown ", "fox, ", "jumps ", "over. ", "lazy ", "dogs; ", "é ", "ü\n",
        "\r\n", "--", "  ", "x",
    ];
    let of = |v: Vec<Vec<u8>>| strings(&v);
    let mut out = Vec::new();
    out.push(of(Vec::new()));
    out.push(of(vec![Vec::new(); 3000]));
    // Lengths 0..100 of random bytes.
    out.push(of((0..3000)
        .map(|_| {
            let n = (r() % 100) as usize;
            (0..n).map(|_| r() as u8).collect()
        })
        .collect()));
    // A few flags, as l_returnflag.
    out.push(of((0..70_000)
        .map(|i| [b"A".to_vec(), b"N".to_vec(), b"R".to_vec()][(i * 7 + (i >> 3)) % 3].clone())
        .collect()));
    // Two flags, as l_linestatus, and eight (a dictionary that just fits two registers).
    out.push(of((0..70_000)
        .map(|i| vec![[b'F', b'O'][(i * 3 + (i >> 5)) % 2]])
        .collect()));
    out.push(of((0..70_000)
        .map(|i| vec![b'a' + ((i * 5 + (i >> 6)) % 8) as u8])
        .collect()));
    // Codes of three bytes, as l_shipmode's first letters: a segment's bytes fill the stage
    // more than once.
    out.push(of((0..70_000)
        .map(|i| {
            [
                b"AIR".to_vec(),
                b"FOB".to_vec(),
                b"REG".to_vec(),
                b"SHP".to_vec(),
            ][(i * 5 + (i >> 4)) % 4]
                .clone()
        })
        .collect()));
    // Short strings with one tile of long ones: a `strdict` expands them with the smaller
    // stage, which that tile does not fit (it goes byte by byte, in windows).
    out.push(of((0..70_000)
        .map(|i| {
            if (8192..12_288).contains(&i) {
                [b"0123456789AB".to_vec(), b"XYZXYZXYZXYZ".to_vec()][i % 2].clone()
            } else {
                [b"ab".to_vec(), b"cde".to_vec()][(i / 3) % 2].clone()
            }
        })
        .collect()));
    // Text: 2 to 12 words each, over 4 tiles of stage memory per tile in places.
    out.push(of((0..70_000)
        .map(|i| {
            let k = 2 + (r() % 11) as usize;
            let mut s = Vec::new();
            for _ in 0..k {
                s.extend_from_slice(words[(r() % words.len() as u64) as usize].as_bytes());
            }
            if i % 5000 == 7 {
                s.extend(std::iter::repeat_n(b'z', 20_000));
            }
            s
        })
        .collect()));
    // One empty string: the chunks before it start at multiples of four rows (a `words`
    // thread stores its four offsets at once), those after it do not (one at a time).
    out.push(of(vec![Vec::new()]));
    // Names of 1 to 8 bytes and phrases of 9 to 24, a few dozen of each, as l_shipmode and
    // l_shipinstruct: a tile's tokens each take one step of three words, or of seven.
    fn names(lo: usize, hi: usize, seed: u64) -> Vec<Vec<u8>> {
        let pool: Vec<Vec<u8>> = (0..40u64)
            .map(|i| {
                let n = lo + ((i * 7 + seed) as usize) % (hi - lo + 1);
                (0..n).map(|x| b'A' + ((i + x as u64) % 26) as u8).collect()
            })
            .collect();
        let mut r = rng(seed);
        (0..30_000)
            .map(|_| pool[(r() % 40) as usize].clone())
            .collect()
    }
    out.push(of(names(1, 8, 5)));
    out.push(of(names(9, 24, 6)));
    // 6000 distinct strings of 10 bytes (offsets past shared memory), and 3000 distinct of
    // 40 bytes (bytes past shared memory).
    out.push(of((0..20_000u64)
        .map(|i| format!("{:010}", (i * 7919) % 6000).into_bytes())
        .collect()));
    out.push(of((0..20_000u64)
        .map(|i| format!("{:040}", (i * 7919) % 3000).into_bytes())
        .collect()));
    out
}

fn int_streams(ptype: PType) -> Vec<Values> {
    with_int_ptype!(ptype, T => int_cases::<T>()
        .into_iter()
        .map(|v| Values::Int(<T as zipflow_core::values::IntVecOf>::wrap(v)))
        .collect(), _ => Vec::new())
}

fn float_streams(ptype: PType) -> Vec<Values> {
    float_cases()
        .into_iter()
        .map(|v| match ptype {
            PType::F32 => Values::F32(v.iter().map(|&x| x as f32).collect()),
            _ => Values::F64(v),
        })
        .collect()
}

const NUMERIC: [PType; 10] = [
    PType::I8,
    PType::I16,
    PType::I32,
    PType::I64,
    PType::U8,
    PType::U16,
    PType::U32,
    PType::U64,
    PType::F32,
    PType::F64,
];

#[test]
fn every_candidate_plan_matches_the_cpu() -> Result<()> {
    let Some(gpu) = gpu("every_candidate_plan_matches_the_cpu") else {
        return Ok(());
    };
    let mut checked = 0;
    let mut failures = Vec::new();
    let mut work: Vec<(PType, Vec<Values>, Vec<Plan>)> = Vec::new();
    for ptype in NUMERIC {
        let streams = if ptype.is_float() {
            float_streams(ptype)
        } else {
            int_streams(ptype)
        };
        let mut extra: Vec<Plan> = Vec::new();
        if ptype.is_int() {
            for p in [
                "zigzag | bitpack",
                "delta | zigzag | bitpack",
                "rle(values: plain, runs: plain)",
                "dict(codes: bitpack, values: for | patch | bitpack)",
                "delta | rle(values: zigzag | bitpack, runs: bitpack)",
                "delta | for | patch | bitpack",
                "delta | dict(codes: bitpack, values: for | bitpack)",
                "delta | radix",
                "ans",
                "ans(5)",
                "ans(9)",
                "zigzag | ans",
                "delta | zigzag | ans",
                "dict(codes: ans, values: for | bitpack)",
                "delta | dict(codes: ans, values: plain)",
                "rle(values: ans, runs: ans)",
            ]
            .into_iter()
            .chain(PATCHED_AND_RADIX.iter().copied())
            {
                extra.push(p.parse()?);
            }
        }
        if ptype.is_float() {
            for p in [
                "alprd",
                "alprd(left: plain, right: for | bitpack)",
                "alprd(left: rle(values: plain, runs: plain), right: plain)",
                "alprd(left: ans, right: bitpack)",
                "alprd(right: lowbits(4, high: bitpack, low: dict(codes: bitpack, values: plain)))",
            ] {
                extra.push(p.parse()?);
            }
        }
        if ptype == PType::U8 {
            for p in ["chardict16", "chartable", "chartable(3)", "chartable(16)"] {
                extra.push(p.parse()?);
            }
        }
        work.push((
            ptype,
            streams,
            zipflow_select::candidates(ptype)
                .into_iter()
                .chain(extra)
                .collect(),
        ));
    }
    prepare(
        &gpu,
        work.iter().map(|(_, s, p)| (&p[..], &s[..])),
        "every_candidate_plan_matches_the_cpu",
    )?;
    for (ptype, streams, plans) in &work {
        for plan in plans {
            checked += check(&gpu, plan, streams, *ptype, &mut failures)?;
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    eprintln!("{checked} encoded streams decoded identically on the GPU and the CPU");
    assert!(
        checked > 500 || plan_filter().is_some(),
        "only {checked} streams checked"
    );
    Ok(())
}

#[test]
fn patched_and_radix_plans_match_the_cpu() -> Result<()> {
    let Some(gpu) = gpu("patched_and_radix_plans_match_the_cpu") else {
        return Ok(());
    };
    let mut checked = 0;
    let mut failures = Vec::new();
    let plans: Vec<Plan> = PATCHED_AND_RADIX
        .iter()
        .map(|p| p.parse())
        .collect::<Result<_>>()?;
    let work: Vec<(PType, Vec<Values>)> = NUMERIC
        .into_iter()
        .filter(|p| p.is_int())
        .map(|p| (p, int_streams(p)))
        .collect();
    prepare(
        &gpu,
        work.iter().map(|(_, s)| (&plans[..], &s[..])),
        "patched_and_radix_plans_match_the_cpu",
    )?;
    for (ptype, streams) in &work {
        for plan in &plans {
            checked += check(&gpu, plan, streams, *ptype, &mut failures)?;
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(
        checked > 100 || plan_filter().is_some(),
        "only {checked} streams checked"
    );
    Ok(())
}

#[test]
fn string_plans_match_the_cpu() -> Result<()> {
    let Some(gpu) = gpu("string_plans_match_the_cpu") else {
        return Ok(());
    };
    let streams = string_streams();
    let mut failures = Vec::new();
    let mut checked = 0;
    let extra = [
        "strdict(codes: ans)",
        "strdict(codes: bitpack)",
        "strdict(codes: ans(6), dict: plain(lengths: ans, bytes: ans))",
        "words(codes: bitpack, counts: bitpack)",
        "words(codes: ans, counts: ans)",
        "words(codes: ans(7), dict: plain(lengths: plain, bytes: ans), counts: for | bitpack)",
        "plain(lengths: ans, bytes: ans)",
        "plain(lengths: bitpack, bytes: plain)",
        "strdict(codes: radix)",
        "strdict(codes: hipatch | bitpack)",
        "words(codes: bitpack, counts: radix)",
        "words(codes: bitpack, counts: for | radix)",
        "strdict(codes: for | radix)",
        "plain(bytes: fsst)",
        "plain(lengths: bitpack, bytes: fsst(codes: ans))",
        "strdict(dict: plain(bytes: fsst))",
        "words(dict: plain(bytes: fsst))",
        "plain(bytes: chardict16)",
        "plain(lengths: bitpack, bytes: chartable)",
        "strdict(dict: plain(bytes: chartable(3)))",
        "words(dict: plain(bytes: chardict16))",
    ];
    let mut plans = zipflow_select::candidates(PType::Bytes);
    for p in extra {
        plans.push(p.parse()?);
    }
    prepare(
        &gpu,
        std::iter::once((&plans[..], &streams[..])),
        "string_plans_match_the_cpu",
    )?;
    for plan in plans {
        checked += check(&gpu, &plan, &streams, PType::Bytes, &mut failures)?;
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    eprintln!("{checked} string streams decoded identically on the GPU and the CPU");
    assert!(
        checked > 60 || plan_filter().is_some(),
        "only {checked} streams checked"
    );
    Ok(())
}

/// String nodes without a row index (as written before there was one) decode on the GPU as
/// on the CPU: the first kernel sums their segment table.
#[test]
fn strings_without_a_row_index_match_the_cpu() -> Result<()> {
    let Some(gpu) = gpu("strings_without_a_row_index_match_the_cpu") else {
        return Ok(());
    };
    let streams = string_streams();
    let mut checked = 0;
    for plan in [
        "strdict",
        "strdict(codes: ans)",
        "words(codes: bitpack, counts: bitpack)",
        "words",
    ] {
        let plan: Plan = plan.parse()?;
        for s in &streams {
            let Ok(mut node) = encode(&plan, s) else {
                continue;
            };
            if node.buffers.pop().is_none() {
                continue;
            }
            let tree = node.to_bytes()?;
            let cpu = decode_bytes(&tree)?;
            let Values::Bytes(b) = &cpu else {
                unreachable!()
            };
            let got = decode_trees(&gpu, PType::Bytes, &[&tree], Some(&[b.data.len() as u64]))?;
            assert!(got.bit_eq(&cpu), "{plan}: the GPU differs from the CPU");
            checked += 1;
        }
    }
    assert!(checked >= 8, "only {checked} streams checked");
    Ok(())
}

#[test]
fn corrupt_strings_are_errors() -> Result<()> {
    let Some(gpu) = gpu("corrupt_strings_are_errors") else {
        return Ok(());
    };
    let flags = strings(
        &(0..5000)
            .map(|i| vec![b'A' + (i % 3) as u8; 1 + i % 2])
            .collect::<Vec<_>>(),
    );
    let Values::Bytes(b) = &flags else {
        unreachable!()
    };
    let bytes = b.data.len() as u64;
    // A code past the dictionary.
    let mut node = encode(&"strdict(codes: plain)".parse()?, &flags)?;
    node.children[0].buffers[0][40] = 9;
    let e = decode_trees(&gpu, PType::Bytes, &[&node.to_bytes()?], Some(&[bytes]));
    assert!(matches!(e, Err(Error::Corrupt { .. })), "{e:?}");
    // A wrong byte count for the chunk: more, and fewer, than its strings hold.
    let node = encode(&"strdict".parse()?, &flags)?.to_bytes()?;
    for wrong in [bytes + 1, bytes - 1, 0] {
        let e = decode_trees(&gpu, PType::Bytes, &[&node], Some(&[wrong]));
        assert!(matches!(e, Err(Error::Corrupt { .. })), "{wrong}: {e:?}");
    }
    // No byte count at all for a dictionary of strings.
    let e = decode_trees(&gpu, PType::Bytes, &[&node], None);
    assert!(matches!(e, Err(Error::Invalid { .. })), "{e:?}");
    // Strings of one length (expanded row by row): a wrong byte count, a code past the end.
    let ones = strings(
        &(0..5000)
            .map(|i| vec![b'A' + (i % 3) as u8])
            .collect::<Vec<_>>(),
    );
    let node = encode(&"strdict(codes: radix)".parse()?, &ones)?.to_bytes()?;
    for wrong in [5001, 4999, 0] {
        let e = decode_trees(&gpu, PType::Bytes, &[&node], Some(&[wrong]));
        assert!(matches!(e, Err(Error::Corrupt { .. })), "{wrong}: {e:?}");
    }
    let mut node = encode(&"strdict(codes: plain)".parse()?, &ones)?;
    node.children[0].buffers[0][40] = 3;
    let e = decode_trees(&gpu, PType::Bytes, &[&node.to_bytes()?], Some(&[5000]));
    assert!(matches!(e, Err(Error::Corrupt { .. })), "{e:?}");
    // Codes whose encoding reaches past the three entries (two bits, or digits of base 5):
    // bytes of ones in their words make codes of 3 and past.
    for plan in ["strdict(codes: bitpack(2))", "strdict(codes: radix(5))"] {
        let mut node = encode(&plan.parse()?, &ones)?;
        let w = &mut node.children[0].buffers[0];
        let at = w.len() / 2;
        w[at..at + 4].fill(0xff);
        let bytes = node.to_bytes()?;
        assert!(decode_bytes(&bytes).is_err(), "{plan}: the CPU accepts it");
        let e = decode_trees(&gpu, PType::Bytes, &[&bytes], Some(&[5000]));
        assert!(matches!(e, Err(Error::Corrupt { .. })), "{plan}: {e:?}");
    }
    // A word code past the dictionary.
    let mut node = encode(&"words(codes: plain, counts: plain)".parse()?, &flags)?;
    node.children[0].buffers[0][40] = 9;
    let bytes = node.to_bytes()?;
    assert!(decode_bytes(&bytes).is_err(), "the CPU accepts it");
    let e = decode_trees(&gpu, PType::Bytes, &[&bytes], None);
    assert!(matches!(e, Err(Error::Corrupt { .. })), "{e:?}");
    // Token counts that ask for more tokens than the codes hold.
    let mut node = encode(&"words(codes: plain, counts: plain)".parse()?, &flags)?;
    node.children[2].buffers[0][0..4].copy_from_slice(&7u32.to_le_bytes());
    let e = decode_trees(&gpu, PType::Bytes, &[&node.to_bytes()?], None);
    assert!(matches!(e, Err(Error::Corrupt { .. })), "{e:?}");
    // Row indexes: an entry one byte or one token off (a segment disagrees with its rows),
    // or running backwards; for one-byte strings (positions never summed) one byte off.
    let long = |len: fn(usize) -> usize| {
        strings(
            &(0..20_000)
                .map(|i| vec![b'A' + (i % 3) as u8; len(i)])
                .collect::<Vec<_>>(),
        )
    };
    let (long_flags, long_ones) = (long(|i| 1 + i % 2), long(|_| 1));
    let plans = [
        ("strdict", &long_flags, 0usize, 1i64),
        ("strdict", &long_flags, 4, -1),
        ("strdict", &long_flags, 4, -100_000),
        ("words(codes: bitpack, counts: bitpack)", &flags, 0, 1),
        ("words(codes: bitpack, counts: bitpack)", &flags, 4, 1),
        ("words(codes: bitpack, counts: bitpack)", &flags, 12, -1),
        ("strdict(codes: radix)", &long_ones, 0, 1),
        ("strdict(codes: ans)", &long_ones, 4, -1),
    ];
    for (plan, stream, at, delta) in plans {
        let mut node = encode(&plan.parse()?, stream)?;
        let index = &mut node.buffers[0];
        let v = u32::from_le_bytes([index[at], index[at + 1], index[at + 2], index[at + 3]]);
        index[at..at + 4].copy_from_slice(&((i64::from(v) + delta) as u32).to_le_bytes());
        let tree = node.to_bytes()?;
        let Values::Bytes(sb) = stream else {
            unreachable!()
        };
        assert!(
            decode_bytes(&tree).is_err(),
            "{plan} {at}: the CPU accepts it"
        );
        let e = decode_trees(&gpu, PType::Bytes, &[&tree], Some(&[sb.data.len() as u64]));
        assert!(
            matches!(e, Err(Error::Corrupt { .. })),
            "{plan} {at}: {e:?}"
        );
    }
    // fsst: a piece that ends one code early, or one late.
    let text = strings(
        &(0..3000)
            .map(|i| format!("row {i} of some text, {} more", i % 17).into_bytes())
            .collect::<Vec<_>>(),
    );
    let Values::Bytes(tb) = &text else {
        unreachable!()
    };
    let good = encode(&"plain(bytes: fsst)".parse()?, &text)?;
    for delta in [-1i64, 1] {
        let mut node = good.clone();
        let ends = &mut node.children[1].buffers[1];
        let e0 = u32::from_le_bytes([ends[0], ends[1], ends[2], ends[3]]);
        ends[0..4].copy_from_slice(&((i64::from(e0) + delta) as u32).to_le_bytes());
        let bytes = node.to_bytes()?;
        assert!(decode_bytes(&bytes).is_err(), "{delta}: the CPU accepts it");
        let e = decode_trees(&gpu, PType::Bytes, &[&bytes], Some(&[tb.data.len() as u64]));
        assert!(matches!(e, Err(Error::Corrupt { .. })), "{delta}: {e:?}");
    }
    // chardict16 and chartable: the first bit flipped (the first code's flag, or the first
    // block's table), so the first block's codes end elsewhere or name another table.
    let raw = Values::Int(IntVec::U8(tb.data.clone()));
    for plan in ["chardict16", "chartable"] {
        let mut node = encode(&plan.parse()?, &raw)?;
        node.buffers[0][0] ^= 0x80;
        let bytes = node.to_bytes()?;
        assert!(decode_bytes(&bytes).is_err(), "{plan}: the CPU accepts it");
        let e = decode_trees(&gpu, PType::U8, &[&bytes], None);
        assert!(matches!(e, Err(Error::Corrupt { .. })), "{plan}: {e:?}");
    }
    // A flipped word in an ans stream.
    let v = Values::Int(IntVec::U8(
        (0..20_000).map(|i| (i * 7 % 13) as u8).collect(),
    ));
    let mut node = encode(&"ans".parse()?, &v)?;
    let w = &mut node.buffers[2];
    let at = w.len() / 2;
    w[at] ^= 0x5a;
    let e = decode_trees(&gpu, PType::U8, &[&node.to_bytes()?], None);
    assert!(matches!(e, Err(Error::Corrupt { .. })), "{e:?}");
    Ok(())
}

#[test]
fn chunks_of_different_shapes_decode_in_one_column() -> Result<()> {
    let Some(gpu) = gpu("chunks_of_different_shapes_decode_in_one_column") else {
        return Ok(());
    };
    let streams = int_streams(PType::I64);
    let plans = [
        "for | bitpack",
        "delta | for | bitpack",
        "constant",
        "rle",
        "dict(codes: bitpack, values: for | bitpack)",
        "plain",
    ];
    let mut trees = Vec::new();
    let mut cpu = Vec::new();
    for (i, s) in streams.iter().enumerate() {
        for (j, p) in plans.iter().enumerate() {
            if (i + j) % 3 != 0 {
                continue;
            }
            if let Ok(node) = encode(&p.parse()?, s) {
                let bytes = node.to_bytes()?;
                cpu.push(decode_bytes(&bytes)?);
                trees.push(bytes);
            }
        }
    }
    let refs: Vec<&[u8]> = trees.iter().map(Vec::as_slice).collect();
    let got = decode_trees(&gpu, PType::I64, &refs, None)?;
    assert!(got.bit_eq(&concat(&cpu, PType::I64)));
    Ok(())
}

#[test]
fn corrupt_runs_and_codes_are_errors() -> Result<()> {
    let Some(gpu) = gpu("corrupt_runs_and_codes_are_errors") else {
        return Ok(());
    };
    // Runs of 7 (429 runs: one tile) and of 2 (1,500: two tiles at 256 threads), a length
    // rewritten to 0 or past the end, in the first tile or the last.
    for (len, at) in [(7u32, 0usize), (2, 0), (2, 1400)] {
        let v = Values::Int(IntVec::U32((0..3000).map(|i| i / len).collect()));
        for bad in [0u32, u32::MAX] {
            let mut node = encode(&"rle(values: plain, runs: plain)".parse()?, &v)?;
            node.children[1].buffers[0][4 * at..4 * at + 4].copy_from_slice(&bad.to_le_bytes());
            let bytes = node.to_bytes()?;
            assert!(
                decode_bytes(&bytes).is_err(),
                "runs of {len}: the CPU accepts it"
            );
            let e = decode_trees(&gpu, PType::U32, &[&bytes], None);
            assert!(
                matches!(e, Err(Error::Corrupt { .. })),
                "runs of {len}, run {at} of length {bad}: {e:?}"
            );
        }
    }
    // A dictionary code past the end: codes stored plain, one of them rewritten.
    let v = Values::Int(IntVec::I64((0..3000).map(|i| i % 10).collect()));
    let mut node = encode(&"dict(codes: plain, values: plain)".parse()?, &v)?;
    node.children[0].buffers[0][17] = 200;
    let e = decode_trees(&gpu, PType::I64, &[&node.to_bytes()?], None);
    assert!(matches!(e, Err(Error::Corrupt { .. })), "{e:?}");
    // hipatch: outliers at 0, 1030, 1031 and 2999 (vectors 0, 1, 1, 2).
    let mut outliers: Vec<u32> = (0..3000).map(|i| i % 8).collect();
    for p in [0, 1030, 1031, 2999] {
        outliers[p] = 1 << 20;
    }
    let v = Values::Int(IntVec::U32(outliers));
    let plan = "hipatch(3, counts: plain, offsets: plain, high: plain) | bitpack".parse()?;
    let good = encode(&plan, &v)?;
    let u16s = |x: &[u16]| x.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>();
    for (what, counts, offsets) in [
        ("counts past the total", [1u16, 3, 1], [0u16, 6, 7, 951]),
        ("counts short of the total", [1, 1, 1], [0, 6, 7, 951]),
        ("an offset past its vector", [1, 2, 1], [0, 6, 1024, 951]),
        ("an offset past the end", [1, 2, 1], [0, 6, 7, 952]),
        ("offsets out of order", [1, 2, 1], [0, 7, 6, 951]),
        ("one offset twice", [1, 2, 1], [0, 7, 7, 951]),
    ] {
        let mut node = good.clone();
        node.children[1].buffers[0] = u16s(&counts);
        node.children[2].buffers[0] = u16s(&offsets);
        let bytes = node.to_bytes()?;
        assert!(decode_bytes(&bytes).is_err(), "{what}: the CPU accepts it");
        let e = decode_trees(&gpu, PType::U32, &[&bytes], None);
        assert!(matches!(e, Err(Error::Corrupt { .. })), "{what}: {e:?}");
    }
    // radix: a base whose layout is not the stored one.
    let v = Values::Int(IntVec::U8((0..3000).map(|i| (i % 3) as u8).collect()));
    let mut node = encode(&"radix".parse()?, &v)?;
    node.meta[1] = 16;
    let e = decode_trees(&gpu, PType::U8, &[&node.to_bytes()?], None);
    assert!(matches!(e, Err(Error::Corrupt { .. })), "{e:?}");
    Ok(())
}

#[test]
fn tpch_columns_match_the_cpu() -> Result<()> {
    let Some(path) = std::env::var_os("ZIPFLOW_TPCH_ZF") else {
        eprintln!("tpch_columns_match_the_cpu: skipped (set ZIPFLOW_TPCH_ZF to a .zf file)");
        return Ok(());
    };
    let Some(gpu) = gpu("tpch_columns_match_the_cpu") else {
        return Ok(());
    };
    let file = zipflow_format::ZfFile::open(&path)?;
    let mut scratch = zipflow_encodings::Scratch::default();
    for (c, meta) in file.columns().iter().enumerate() {
        let ptype = meta.column_type.ptype();
        let got = match zipflow_cuda::decode_column_to_host(&gpu, &file, c) {
            Ok(v) => v,
            Err(Error::Unsupported { what, .. }) => {
                eprintln!("{}: not on the GPU ({what})", meta.name);
                continue;
            }
            Err(e) => return Err(e),
        };
        let mut cpu = Vec::new();
        for k in 0..file.num_chunks() {
            cpu.push(file.read_chunk(c, k, &mut scratch)?.0);
        }
        let cpu = concat(&cpu, ptype);
        assert!(got.bit_eq(&cpu), "column {} differs", meta.name);
        eprintln!("{}: {} {ptype} values identical", meta.name, got.len());
    }
    Ok(())
}

/// Chunk kernels decode the same at every block size they may be tuned to.
#[test]
fn chunk_kernels_match_the_cpu_at_every_tuned_block_size() -> Result<()> {
    let Some(gpu) = gpu("chunk_kernels_match_the_cpu_at_every_tuned_block_size") else {
        return Ok(());
    };
    let plans = [
        "delta | for | bitpack",
        "delta | rle(values: zigzag | bitpack, runs: bitpack)",
        "rle(values: for | bitpack, runs: bitpack)",
        "delta | zigzag | ans",
        "rle(values: ans, runs: ans)",
        "dict(codes: bitpack, values: for | patch | bitpack)",
        "delta | hipatch | bitpack",
    ];
    let (mut checked, mut skipped) = (0, 0);
    for ptype in [PType::I64, PType::I32, PType::U16] {
        let streams = int_streams(ptype);
        for p in plans {
            let Some((trees, cpu)) = encode_streams(&p.parse()?, &streams, ptype)? else {
                continue;
            };
            let refs: Vec<&[u8]> = trees.iter().map(Vec::as_slice).collect();
            for t in zipflow_cuda::cache::TUNE_THREADS {
                let mut d = ColumnDecoder::new(&gpu, ptype, &refs)?;
                if let Err(e) = d.set_chunk_threads(t) {
                    // As in `gpu tune`: a size whose shared arrays pass 48 KiB is skipped.
                    let e = e.to_string();
                    assert!(
                        t != 256 && e.contains("too much shared data"),
                        "{p} over {ptype} at {t} threads per block: {e}"
                    );
                    eprintln!("{p} over {ptype}: no kernel at {t} threads per block");
                    skipped += 1;
                    continue;
                }
                d.decode_resident()?;
                d.finish()?;
                let got = d.into_column().to_host(&gpu)?;
                assert!(
                    got.bit_eq(&cpu),
                    "{p} over {ptype} at {t} threads per block"
                );
                checked += 1;
            }
            let mut d = ColumnDecoder::new(&gpu, ptype, &refs)?;
            assert!(d.set_chunk_threads(100).is_err());
        }
    }
    eprintln!(
        "{checked} columns decoded identically at every block size ({skipped} sizes skipped)"
    );
    assert!(checked + skipped >= 3 * 3 * plans.len() - 9 && skipped <= 9);
    Ok(())
}

/// Compiles the kernel of every candidate plan's shape with NVRTC (needs only the NVRTC
/// library, no GPU).
#[test]
fn nvrtc_compiles_every_candidate_shape() -> Result<()> {
    // SAFETY: only tries to load the library by name.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        if gpu_required() {
            panic!("ZIPFLOW_REQUIRE_GPU is set, but NVRTC was not found");
        }
        eprintln!("nvrtc_compiles_every_candidate_shape: skipped (no NVRTC library)");
        return Ok(());
    }
    // Every distinct shape with the NVRTC options it is compiled with (numeric chunk
    // kernels also at the other block sizes they may be tuned to), then compiled on all
    // cores.
    let mut seen = std::collections::HashSet::new();
    let mut jobs: Vec<(zipflow_cuda::codegen::Kernel, Vec<String>, bool)> = Vec::new();
    for ptype in NUMERIC.into_iter().chain([PType::Bytes]) {
        let streams = if ptype == PType::Bytes {
            string_streams()
        } else if ptype.is_float() {
            float_streams(ptype)
        } else {
            int_streams(ptype)
        };
        let extra = [
            "ans",
            "strdict(codes: ans)",
            "words(codes: bitpack, counts: bitpack)",
            "strdict(codes: radix)",
            "chardict16",
            "chartable",
            "plain(bytes: chardict16)",
            "words(dict: plain(bytes: chartable))",
        ];
        let extra = extra
            .iter()
            .chain(PATCHED_AND_RADIX)
            .filter_map(|p| p.parse::<Plan>().ok());
        for plan in zipflow_select::candidates(ptype).into_iter().chain(extra) {
            for s in &streams {
                let Ok(node) = encode(&plan, s) else { continue };
                let bytes = node.to_bytes()?;
                let unsupported = |what: &str| eprintln!("{plan}: not on the GPU ({what})");
                let shape = match Shape::of(&NodeView::parse(&bytes)?) {
                    Ok(s) => s,
                    Err(Error::Unsupported { what, .. }) => {
                        unsupported(&what);
                        continue;
                    }
                    Err(e) => return Err(e),
                };
                if !seen.insert(shape.key()) {
                    continue;
                }
                let kernel = match generate(&shape) {
                    Ok(k) => k,
                    // Said by name, as for a shape it cannot read.
                    Err(Error::Unsupported { what, .. }) => {
                        assert!(
                            what.contains('`'),
                            "{plan}: unsupported without a name: {what}"
                        );
                        unsupported(&what);
                        continue;
                    }
                    Err(e) => return Err(e),
                };
                let options = vec![
                    "--gpu-architecture=sm_90".to_string(),
                    format!("-DZF_THREADS={}", kernel.threads),
                    format!("-DZF_TILE_VECTORS={}", zipflow_cuda::codegen::TILE_VECTORS),
                    "--std=c++17".to_string(),
                ];
                if kernel.kind == zipflow_cuda::codegen::KernelKind::Chunk && ptype != PType::Bytes
                {
                    for t in zipflow_cuda::cache::TUNE_THREADS {
                        if t != kernel.threads {
                            let mut o = options.clone();
                            o[1] = format!("-DZF_THREADS={t}");
                            jobs.push((kernel.clone(), o, false));
                        }
                    }
                }
                jobs.push((kernel, options, true));
            }
        }
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let failures: Vec<String> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut failed = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some((kernel, options, default)) = jobs.get(i) else {
                            return failed;
                        };
                        match zipflow_cuda::cache::compile(kernel, options) {
                            Ok(cubin)
                                if zipflow_cuda::cache::is_cubin(&cubin)
                                    && cubin.windows(9).any(|w| w == b"zf_decode") => {}
                            Ok(_) => {
                                failed.push(format!("{}: no zf_decode in its cubin", kernel.key))
                            }
                            // Tuned sizes are tried, not required: the tuner skips a size
                            // that does not compile.
                            Err(e) if !*default => {
                                eprintln!("{} at {}: {e}", kernel.key, options[1])
                            }
                            Err(e) => failed.push(format!("{}: {e}", kernel.key)),
                        }
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| {
                w.join()
                    .unwrap_or_else(|_| vec!["a compile worker panicked".to_string()])
            })
            .collect()
    });
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    eprintln!("{} shapes compiled", seen.len());
    assert!(seen.len() > 50);
    Ok(())
}
