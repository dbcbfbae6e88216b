//! Structure-aware: arbitrary values encoded with an arbitrary candidate plan must decode to
//! exactly the same values; the encoded tree then mutated must decode or give an error,
//! never panic.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use zipflow_core::{IntVec, PType, Values};

#[derive(Arbitrary, Debug)]
enum Column {
    I64(Vec<i64>),
    U32(Vec<u32>),
    I16(Vec<i16>),
    U8(Vec<u8>),
    F64(Vec<f64>),
    F32(Vec<f32>),
    Strings(Vec<Vec<u8>>),
}

#[derive(Arbitrary, Debug)]
struct Input {
    column: Column,
    /// Repeats the values to reach chunk-sized streams (runs, several vectors).
    repeat: u8,
    plan: u16,
    /// (position, xor mask) applied to the encoded tree.
    flips: Vec<(u32, u8)>,
}

fn values(c: Column, repeat: usize) -> (PType, Values) {
    fn rep<T: Clone>(v: Vec<T>, n: usize) -> Vec<T> {
        let mut out = Vec::with_capacity(v.len() * n);
        for _ in 0..n {
            out.extend_from_slice(&v);
        }
        out
    }
    match c {
        Column::I64(v) => (PType::I64, Values::Int(IntVec::I64(rep(v, repeat)))),
        Column::U32(v) => (PType::U32, Values::Int(IntVec::U32(rep(v, repeat)))),
        Column::I16(v) => (PType::I16, Values::Int(IntVec::I16(rep(v, repeat)))),
        Column::U8(v) => (PType::U8, Values::Int(IntVec::U8(rep(v, repeat)))),
        Column::F64(v) => (PType::F64, Values::F64(rep(v, repeat))),
        Column::F32(v) => (PType::F32, Values::F32(rep(v, repeat))),
        Column::Strings(v) => {
            let mut s = zipflow_core::values::ByteStrings {
                offsets: vec![0],
                data: Vec::new(),
            };
            for x in rep(v, repeat) {
                s.data.extend_from_slice(&x);
                s.offsets.push(s.data.len() as u64);
            }
            (PType::Bytes, Values::Bytes(s))
        }
    }
}

fuzz_target!(|input: Input| {
    let (ptype, values) = values(input.column, usize::from(input.repeat % 8) + 1);
    if values.len() > zipflow_core::MAX_CHUNK_LEN {
        return;
    }
    let plans = zipflow_encodings::selection::candidates(ptype);
    let Some(plan) = plans.get(usize::from(input.plan) % plans.len().max(1)) else {
        return;
    };
    let Ok(node) = zipflow_encodings::encode(plan, &values) else {
        return;
    };
    let Ok(mut bytes) = node.to_bytes() else {
        return;
    };
    let back = zipflow_encodings::decode_bytes(&bytes).expect("an encoded tree must decode");
    assert!(back.bit_eq(&values), "plan {plan} does not round-trip");
    if bytes.is_empty() {
        return;
    }
    for (pos, mask) in input.flips {
        let at = pos as usize % bytes.len();
        bytes[at] ^= mask;
    }
    let _ = zipflow_encodings::decode_bytes(&bytes);
});
