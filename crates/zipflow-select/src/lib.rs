//! Choosing plans.
//!
//! The selector knows no concrete encoding: it asks [`zipflow_encodings::estimate`] for the
//! size of each candidate plan on a sample of the stream and keeps the smallest. This first
//! selector tries a fixed candidate list per physical type ([`candidates`]); the plan that
//! wins on the sample is then run on the whole stream, falling back to the next best if the
//! sample misled it (e.g. `constant` on a sample that happened to be constant).
//!
//! ```
//! use zipflow_core::{IntVec, Values};
//! let sorted = Values::Int(IntVec::I64((0..10_000).map(|i| 5_000_000 + i / 4).collect()));
//! let (plan, node) = zipflow_select::choose_and_encode(&sorted).unwrap();
//! assert!(node.size() < 10_000 / 2, "{plan}: {} bytes", node.size());
//! ```

use zipflow_core::{Error, PType, Plan, Result, Values};
use zipflow_encodings::{EncodedNode, encode, estimate};

/// Integer candidates, tried in this order (ties go to the earlier, simpler plan).
const INT_CANDIDATES: &[&str] = &[
    "constant",
    "bitpack",
    "for | bitpack",
    "for | patch | bitpack",
    "dict(codes: bitpack, values: for | bitpack)",
    "rle(values: for | bitpack, runs: for | bitpack)",
    "delta | for | bitpack",
    "delta | for | patch | bitpack",
    "delta | rle(values: for | bitpack, runs: for | bitpack)",
];

/// The candidate plans for a stream of `ptype`.
pub fn candidates(ptype: PType) -> Vec<Plan> {
    let texts: Vec<String> = match ptype {
        PType::F32 | PType::F64 => std::iter::once("constant".to_string())
            .chain(
                INT_CANDIDATES
                    .iter()
                    .filter(|c| **c != "constant")
                    .map(|c| format!("float2int | {c}")),
            )
            .chain(std::iter::once("plain".to_string()))
            .collect(),
        PType::Bytes => vec!["plain".to_string()],
        _ => INT_CANDIDATES
            .iter()
            .map(|c| c.to_string())
            .chain(std::iter::once("plain".to_string()))
            .collect(),
    };
    texts.iter().filter_map(|t| t.parse().ok()).collect()
}

/// Vectors (of 1024 values) in a sample.
const SAMPLE_VECTORS: usize = 8;

/// A deterministic stratified sample: up to eight runs of 1024 consecutive values,
/// evenly spread, so runs and local order survive sampling. Small streams are used whole.
pub fn sample(values: &Values) -> Values {
    let n = values.len();
    let run = zipflow_core::VECTOR_LEN;
    if n <= run * SAMPLE_VECTORS * 2 {
        return values.clone();
    }
    let stride = n / SAMPLE_VECTORS;
    let parts: Vec<Values> = (0..SAMPLE_VECTORS)
        .map(|k| {
            let start = k * stride;
            values.slice(start, (start + run).min(n))
        })
        .collect();
    concat(&parts)
}

fn concat(parts: &[Values]) -> Values {
    let Some(first) = parts.first() else {
        return Values::empty(PType::U8);
    };
    let mut out = first.clone();
    for p in &parts[1..] {
        match (&mut out, p) {
            (Values::Int(a), Values::Int(b)) => {
                zipflow_core::match_ints!(a, T, a => {
                    if let Some(b) = <T as zipflow_core::values::IntVecOf>::slice(b) {
                        a.extend_from_slice(b);
                    }
                })
            }
            (Values::F32(a), Values::F32(b)) => a.extend_from_slice(b),
            (Values::F64(a), Values::F64(b)) => a.extend_from_slice(b),
            (Values::Bytes(a), Values::Bytes(b)) => {
                let base = a.data.len() as u64;
                a.offsets.extend(b.offsets[1..].iter().map(|o| o + base));
                a.data.extend_from_slice(&b.data);
            }
            _ => {}
        }
    }
    out
}

/// Candidates ranked by estimated size on a sample of `values`, smallest first.
pub fn rank(values: &Values) -> Vec<(Plan, usize)> {
    let s = sample(values);
    let mut ranked: Vec<(Plan, usize)> = candidates(values.ptype())
        .into_iter()
        .filter_map(|p| estimate(&p, &s).ok().map(|size| (p, size)))
        .collect();
    // Stable: ties keep candidate order.
    ranked.sort_by_key(|(_, size)| *size);
    ranked
}

/// Chooses a plan for `values` and encodes them with it.
pub fn choose_and_encode(values: &Values) -> Result<(Plan, EncodedNode)> {
    let mut last_err = None;
    for (plan, _) in rank(values) {
        match encode(&plan, values) {
            Ok(node) => return Ok((plan, node)),
            Err(e) => last_err = Some(e),
        }
    }
    Err(last_err.unwrap_or_else(|| {
        Error::unsupported(format!("no plan can encode {} values", values.ptype()))
    }))
}
