//! The conformance harness: every primitive and every plan the selector can emit, on every
//! stream type, over edge cases and random data.
//!
//! For each (plan, input) where the plan applies:
//! - the round trip is bit-exact (floats compared by bits);
//! - `estimate` is within 10 % of the encoded size;
//! - the resolved plan (`describe`) re-encodes the input to the same bytes;
//! - truncated and bit-flipped encodings decode to an error or to some values, never a panic.
//!
//! A plan that cannot represent an input (`constant` on varying values, `bitpack(3)` on wide
//! values) must say so with `Error::Plan`, never panic.

use proptest::prelude::*;
use zipflow_core::values::IntVecOf;
use zipflow_core::{Error, IntVec, PType, Plan, Values};
use zipflow_encodings::{NodeView, decode_bytes, describe, encode, encodings, estimate};
use zipflow_select::candidates;

/// Plans beyond the selector's candidates, so every primitive and child slot is exercised.
const EXTRA_INT_PLANS: &[&str] = &[
    "plain",
    "zigzag | bitpack",
    "for | zigzag | plain",
    "delta | zigzag | bitpack",
    "delta | plain",
    "rle(values: bitpack, runs: bitpack)",
    "rle(values: plain, runs: plain)",
    "dict(codes: plain, values: plain)",
    "dict(codes: rle(values: bitpack, runs: bitpack), values: delta | for | bitpack)",
    "patch(3) | bitpack",
    "for | patch(0) | bitpack",
    "hipatch(3) | bitpack",
    "radix",
    "dict(codes: radix, values: plain)",
    "for | hipatch | bitpack",
    "hipatch(0, counts: bitpack, offsets: plain, high: plain) | plain",
    "bitpack(7)",
    "constant",
    "ans",
    "zigzag | ans",
    "dict(codes: ans, values: for | ans)",
    "above(1)",
    "above(37) | delta | zigzag | ans",
    "above(1000) | for | bitpack",
    "lowbits(1)",
    "lowbits(3, high: for | bitpack, low: dict(codes: bitpack, values: plain))",
    "zigzag | lowbits(2, high: delta | zigzag | bitpack, low: rle)",
];

/// Text plans, run on every u8 stream (any bytes are valid text).
const EXTRA_TEXT_PLANS: &[&str] = &[
    "chardict16",
    "chartable(1)",
    "chartable(3)",
    "fsst(codes: ans)",
    "fsst(codes: chardict16)",
    "words(codes: bitpack)",
    "words(codes: ans, dict: strdict(codes: ans, dict: plain(bytes: fsst)))",
    "words(codes: for | bitpack, dict: plain(lengths: ans, bytes: chartable))",
];

/// String plans beyond the selector's candidates.
const EXTRA_STRING_PLANS: &[&str] = &[
    "plain(lengths: plain, bytes: plain)",
    "plain(bytes: chardict16)",
    "plain(lengths: ans, bytes: chartable)",
    "plain(bytes: ans)",
    "strdict(codes: ans, dict: plain(bytes: fsst(codes: ans)))",
    "strdict(codes: rle(values: bitpack, runs: bitpack), dict: strdict)",
    "plain(bytes: words)",
    "plain(bytes: words(codes: bitpack, dict: plain(bytes: fsst)))",
    "words(codes: bitpack, counts: bitpack)",
    "words(codes: ans(5), dict: strdict(codes: ans), counts: for | bitpack)",
];

const EXTRA_FLOAT_PLANS: &[&str] = &[
    "plain",
    "constant",
    "float2int(0) | plain",
    "float2int(2) | for | bitpack",
    "float2int(9) | zigzag | bitpack",
    "float2int | delta | for | bitpack",
    "alprd",
    "alprd(left: rle(values: plain, runs: plain), right: for | bitpack)",
    "alprd(left: ans, right: plain)",
    "alprd(right: lowbits(6, high: bitpack, low: dict(codes: ans, values: plain)))",
];

fn plans_for(ptype: PType) -> Vec<Plan> {
    let extra: Vec<&str> = if ptype.is_float() {
        EXTRA_FLOAT_PLANS.to_vec()
    } else if ptype == PType::U8 {
        [EXTRA_INT_PLANS, EXTRA_TEXT_PLANS].concat()
    } else if ptype.is_int() {
        EXTRA_INT_PLANS.to_vec()
    } else {
        EXTRA_STRING_PLANS.to_vec()
    };
    let mut plans = candidates(ptype);
    if ptype == PType::U8 {
        plans.extend(zipflow_select::text_candidates());
    }
    for t in extra {
        match t.parse::<Plan>() {
            Ok(p) => plans.push(p),
            Err(e) => panic!("{t}: {e}"),
        }
    }
    plans
}

/// Flips and truncations chosen deterministically from the bytes' length.
fn corruptions(bytes: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let n = bytes.len();
    let mut state = 0x9e37_79b9_7f4a_7c15u64 ^ n as u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for k in 0..12 {
        out.push(bytes[..(n * k / 12)].to_vec());
    }
    if n > 0 {
        for _ in 0..24 {
            let mut b = bytes.to_vec();
            let bit = (next() % (8 * n as u64)) as usize;
            b[bit / 8] ^= 1 << (bit % 8);
            out.push(b);
        }
        // Headers are where lengths live: flip every bit of the first 24 bytes too.
        for bit in 0..(8 * n.min(24)) {
            let mut b = bytes.to_vec();
            b[bit / 8] ^= 1 << (bit % 8);
            out.push(b);
        }
    }
    out
}

fn check(plan: &Plan, input: &Values) -> Result<(), TestCaseError> {
    let node = match encode(plan, input) {
        Ok(n) => n,
        Err(Error::Plan { .. }) => return Ok(()),
        Err(e) => return Err(TestCaseError::fail(format!("{plan}: unexpected error {e}"))),
    };
    let bytes = node
        .to_bytes()
        .map_err(|e| TestCaseError::fail(format!("{plan}: {e}")))?;
    prop_assert_eq!(bytes.len(), node.size());
    let back = decode_bytes(&bytes).map_err(|e| TestCaseError::fail(format!("{plan}: {e}")))?;
    prop_assert!(
        back.bit_eq(input),
        "{} did not round-trip {} {} values",
        plan,
        input.len(),
        input.ptype()
    );

    let est = estimate(plan, input).map_err(|e| TestCaseError::fail(format!("{plan}: {e}")))?;
    let actual = node.size();
    prop_assert!(
        est.abs_diff(actual) * 10 <= actual,
        "{}: estimate {} vs actual {} on {} values",
        plan,
        est,
        actual,
        input.len()
    );

    let view = NodeView::parse(&bytes).map_err(|e| TestCaseError::fail(format!("{e}")))?;
    let resolved = describe(&view).map_err(|e| TestCaseError::fail(format!("{e}")))?;
    let again = encode(&resolved, input)
        .and_then(|n| n.to_bytes())
        .map_err(|e| TestCaseError::fail(format!("{resolved} (from {plan}): {e}")))?;
    prop_assert!(
        again == bytes,
        "{} re-encoded differently from {}",
        resolved,
        plan
    );

    for bad in corruptions(&bytes) {
        let _ = decode_bytes(&bad);
    }
    Ok(())
}

fn check_all(input: &Values) -> Result<(), TestCaseError> {
    for plan in plans_for(input.ptype()) {
        check(&plan, input)?;
    }
    for plan in searched(input) {
        check(&plan, input)?;
    }
    Ok(())
}

/// The plans the cascade search picks for `input` under every objective: the search builds
/// plans beyond the fixed candidate lists, so what it emits goes through the harness too.
fn searched(input: &Values) -> Vec<Plan> {
    use zipflow_select::{Objective, SelectOptions, search};
    let mut out: Vec<Plan> = Vec::new();
    for objective in [
        Objective::Smallest,
        Objective::Balanced,
        Objective::Fastest,
        Objective::MinDecodeGbs(8.0),
    ] {
        let options = SelectOptions {
            objective,
            ..SelectOptions::default()
        };
        let s = search::select(input, false, &options);
        for c in s.ranked.into_iter().take(2) {
            if !out.contains(&c.plan) {
                out.push(c.plan);
            }
        }
    }
    out
}

fn ints_as<T: IntVecOf>(v: &[i64]) -> Values {
    Values::Int(T::wrap(
        v.iter()
            .map(|&x| T::from_i128_wrapping(i128::from(x)))
            .collect(),
    ))
}

fn all_int_types(v: &[i64]) -> Vec<Values> {
    vec![
        ints_as::<u8>(v),
        ints_as::<u16>(v),
        ints_as::<u32>(v),
        ints_as::<u64>(v),
        ints_as::<i8>(v),
        ints_as::<i16>(v),
        ints_as::<i32>(v),
        ints_as::<i64>(v),
    ]
}

/// The edge cases every encoding must survive.
fn edge_cases() -> Vec<Vec<i64>> {
    let mut cases = vec![
        vec![],
        vec![0],
        vec![-1],
        vec![i64::MIN, i64::MAX],
        vec![i64::MAX; 1025],
        vec![7; 1024],
        (0..1023).collect(),
        (0..1024).map(|i| i * 3).collect(),
        (0..1025).map(|i| -i).collect(),
        (0..5000).map(|i| i / 7).collect(),
        (0..3000)
            .map(|i| if i % 97 == 0 { i64::MAX - i } else { i % 13 })
            .collect(),
        (0..2049)
            .map(|i| if i % 2 == 0 { i64::MIN } else { i64::MAX })
            .collect(),
    ];
    let mut x = 0x1234_5678_9abc_def0u64;
    cases.push(
        (0..2500)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as i64
            })
            .collect(),
    );
    cases
}

#[test]
fn every_primitive_is_exercised() {
    let mut used: Vec<String> = Vec::new();
    for p in PType::ALL {
        for plan in plans_for(p) {
            let mut stack = vec![plan];
            while let Some(p) = stack.pop() {
                used.push(p.name.clone());
                stack.extend(p.children.into_iter().map(|(_, c)| c));
            }
        }
    }
    for e in encodings() {
        assert!(
            used.iter().any(|u| u == e.name()),
            "{} is not in the harness",
            e.name()
        );
    }
}

#[test]
fn int_edge_cases() -> Result<(), TestCaseError> {
    for case in edge_cases() {
        for values in all_int_types(&case) {
            check_all(&values)?;
        }
    }
    Ok(())
}

fn float_edge_cases() -> Vec<Vec<f64>> {
    vec![
        vec![],
        vec![-0.0],
        vec![0.0, -0.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY],
        vec![
            f64::from_bits(0x7ff8_0000_0000_0001),
            f64::from_bits(0xfff0_0000_0000_0001),
        ],
        vec![f64::MIN, f64::MAX, f64::MIN_POSITIVE, 5e-324, 1e300],
        (0..1025).map(|i| (i as f64) * 0.01).collect(),
        (0..3000)
            .map(|i| ((i * 7919) % 100_000) as f64 / 100.0 + 900.0)
            .collect(),
        (0..1024).map(|i| (i as f64).sqrt()).collect(),
        vec![21168.23; 1023],
    ]
}

#[test]
fn float_edge_cases_round_trip() -> Result<(), TestCaseError> {
    for case in float_edge_cases() {
        check_all(&Values::F64(case.clone()))?;
        check_all(&Values::F32(case.iter().map(|&v| v as f32).collect()))?;
    }
    Ok(())
}

#[test]
fn bytes_round_trip() -> Result<(), TestCaseError> {
    use zipflow_core::values::ByteStrings;
    let strings: Vec<&[u8]> = vec![b"", b"a", b"hello", b"\xff\x00binary", b""];
    let mut b = ByteStrings {
        offsets: vec![0],
        data: Vec::new(),
    };
    for s in strings.iter().cycle().take(2049) {
        b.data.extend_from_slice(s);
        b.offsets.push(b.data.len() as u64);
    }
    check_all(&Values::Bytes(b))?;
    check_all(&Values::empty(PType::Bytes))
}

fn strings(items: impl IntoIterator<Item = Vec<u8>>) -> Values {
    use zipflow_core::values::ByteStrings;
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

/// Text-like bytes: words from a small vocabulary, spaces, punctuation, some UTF-8 and raw
/// bytes, so dictionary and symbol-table plans have something to find.
fn text_bytes(n: usize, seed: u64) -> Vec<u8> {
    const WORDS: &[&str] = &[
        "the",
        "of",
        "and",
        "furiously",
        "regular",
        "deposits",
        "sleep",
        "quickly",
        "żółw",
        "über",
        "ideas",
        "a",
        "packages",
        "<tag>",
        "</tag>",
        "0.25",
        "1998-09-02",
    ];
    let mut x = seed | 1;
    let mut out = Vec::with_capacity(n + 16);
    while out.len() < n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        match x % 23 {
            0 => out.extend_from_slice(b", "),
            1 => out.push(b'\n'),
            2 => out.push((x >> 32) as u8),
            _ => {
                out.extend_from_slice(WORDS[(x >> 8) as usize % WORDS.len()].as_bytes());
                out.push(b' ');
            }
        }
    }
    out.truncate(n);
    out
}

#[test]
fn text_round_trips() -> Result<(), TestCaseError> {
    for n in [0, 1, 31, 32, 33, 1023, 1024, 1025, 4095, 4097, 20_000] {
        check_all(&Values::Int(IntVec::U8(text_bytes(n, n as u64 + 1))))?;
    }
    check_all(&Values::Int(IntVec::U8(
        (0..=255u8).cycle().take(3000).collect(),
    )))
}

#[test]
fn string_columns_round_trip() -> Result<(), TestCaseError> {
    let text = text_bytes(40_000, 5);
    // Comment-like strings cut from the text, low-cardinality flags, and empty strings.
    let comments = (0..1500).map(|i| {
        let start = (i * 7919) % 39_000;
        text[start..start + (i % 44)].to_vec()
    });
    check_all(&strings(comments))?;
    let flags = (0..3000).map(|i| [b"A".to_vec(), b"N".to_vec(), b"R".to_vec()][i % 3].clone());
    check_all(&strings(flags))?;
    check_all(&strings((0..1025).map(|_| Vec::new())))
}

/// Random data shaped like real columns: small ranges, runs, sorted keys, outliers, wide.
fn int_data() -> impl Strategy<Value = Vec<i64>> {
    let len = prop_oneof![0usize..40, 1000usize..1100, 2000usize..4200];
    (len, 0u8..6, any::<u64>()).prop_map(|(n, shape, seed)| {
        let mut x = seed | 1;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut out = Vec::with_capacity(n);
        let mut acc = (rnd() % 1_000_000) as i64;
        while out.len() < n {
            let v = match shape {
                0 => rnd() as i64,
                1 => (rnd() % 100) as i64 - 50,
                2 => {
                    acc += (rnd() % 4) as i64;
                    acc
                }
                3 => {
                    if rnd() % 50 == 0 {
                        rnd() as i64
                    } else {
                        1000 + (rnd() % 16) as i64
                    }
                }
                4 => [3i64, -9, 100_000, 42][(rnd() % 4) as usize],
                _ => acc,
            };
            let run = if shape == 5 { 1 + rnd() % 40 } else { 1 };
            for _ in 0..run {
                out.push(v);
            }
            if shape == 5 {
                acc = (rnd() % 1000) as i64;
            }
        }
        out.truncate(n);
        out
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn random_ints(v in int_data(), ty in 0usize..8) {
        let values = all_int_types(&v).swap_remove(ty);
        check_all(&values)?;
    }

    #[test]
    fn random_float_bits(bits in prop::collection::vec(any::<u64>(), 0..1100)) {
        check_all(&Values::F64(bits.iter().map(|&b| f64::from_bits(b)).collect()))?;
        check_all(&Values::F32(bits.iter().map(|&b| f32::from_bits(b as u32)).collect()))?;
    }

    #[test]
    fn random_text(n in 0usize..6000, seed in any::<u64>()) {
        check_all(&Values::Int(IntVec::U8(text_bytes(n, seed))))?;
    }

    #[test]
    fn random_strings(lens in prop::collection::vec(0usize..60, 0..1500), seed in any::<u64>()) {
        let text = text_bytes(lens.iter().sum::<usize>() + 1, seed);
        let mut pos = 0;
        check_all(&strings(lens.iter().map(|&l| {
            pos += l;
            text[pos - l..pos].to_vec()
        })))?;
    }

    #[test]
    fn random_decimals(cents in prop::collection::vec(-10_000_000i64..10_000_000, 0..2100)) {
        check_all(&Values::F64(cents.iter().map(|&c| c as f64 / 100.0).collect()))?;
    }
}

#[test]
fn selector_is_deterministic_and_round_trips() {
    let v: Vec<i64> = (0..70_000).map(|i| (i * 37 % 1001) + i / 1000).collect();
    let values = Values::Int(IntVec::I64(v));
    let a = zipflow_select::choose_and_encode(&values).map(|(p, n)| (p, n.to_bytes().ok()));
    let b = zipflow_select::choose_and_encode(&values).map(|(p, n)| (p, n.to_bytes().ok()));
    let (Ok(a), Ok(b)) = (a, b) else {
        panic!("selection failed")
    };
    assert_eq!(a, b);
    let bytes = a.1.unwrap_or_default();
    assert!(decode_bytes(&bytes).is_ok_and(|back| back == values));
}
