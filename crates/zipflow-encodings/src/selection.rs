//! What the plan selector (`zipflow-select`) needs to know about the primitives, which it
//! reads from the registry rather than naming any of them.
//!
//! - [`Search`]: the part a primitive plays in the cascade search ([`Role`]), declared in its
//!   [`Descriptor`](crate::Descriptor).
//! - [`Shape`]: the shape of a stream as the decode-cost model sees it; each primitive says
//!   what shape its child streams take ([`Encoding::child_shape`](crate::Encoding::child_shape))
//!   and what decoding a stream costs it
//!   ([`Encoding::decode_cost`](crate::Encoding::decode_cost)).
//! - [`Calibration`]: the synthetic streams and plans that isolate a primitive's decode cost
//!   ([`Encoding::calibration`](crate::Encoding::calibration)).
//! - The fixed candidate lists ([`candidates`], [`text_candidates`]) and the forms the search
//!   tries in a string column's slots ([`DICT_FORMS`], [`STRING_BYTES_FORMS`]).
//!
//! ```
//! use zipflow_core::PType;
//! use zipflow_encodings::selection::candidates;
//! assert!(candidates(PType::I64).iter().any(|p| p.to_string() == "for | bitpack"));
//! ```

use zipflow_core::values::ByteStrings;
use zipflow_core::{Int, IntVec, PType, Plan, Values};

use crate::{bitpack, constant, float2int, plain};

/// The part a primitive plays in the selector's cascade search over numeric streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Not tried by the numeric search.
    Skip,
    /// A leaf, tried in every slot.
    Leaf,
    /// A leaf for long streams of small values only (dictionary codes): tried by the
    /// stream-by-stream cascade on streams of at least a vector, and left out of the
    /// exhaustive space, whose size grows with every leaf.
    LongLeaf,
    /// An entropy coder: a leaf tried only where size is all that counts. It decodes serially
    /// and no scan predicate reads it packed, so the other objectives keep the lightweight
    /// leaves. It is also tried for a string column's integer streams.
    Entropy,
    /// A general-purpose block coder: tried where an entropy coder is, but only on streams
    /// of at least a vector (on a short stream its frame's fixed bytes dominate, and a short
    /// side stream is estimated repeated, which such a coder would find and remove).
    BlockCoder,
    /// An inner primitive: every child slot is again a plan of the space.
    Inner {
        /// Whether the slots other than the pipe child hold short exception side streams,
        /// which the search gives leaves only (exhaustively, the [`FILLER`]).
        side_streams: bool,
    },
    /// A change of type (floats to integers), not a step of the cascade: it does not count
    /// towards the depth, and a float stream's inner plans hang below it.
    TypeChange,
}

/// What part a primitive plays in the selector's search.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Search {
    /// Its part in the numeric cascade.
    pub role: Role,
    /// Whether a byte-string column's plan may start with it.
    pub string_root: bool,
    /// Whether it fits only a stream whose values are all alike, so that a handful of
    /// sampled values cannot tell whether it fits the whole stream.
    pub uniform: bool,
}

impl Search {
    /// A primitive the search does not try.
    pub const SKIP: Search = Search {
        role: Role::Skip,
        string_root: false,
        uniform: false,
    };

    /// A primitive with `role` in the numeric cascade that does not start string plans.
    pub const fn numeric(role: Role) -> Search {
        Search {
            role,
            string_root: false,
            uniform: false,
        }
    }
}

/// The leaf the search puts in a slot it has not refined yet, and in side streams of the
/// exhaustive space: bit-packing, cheap to estimate and right for most integer streams.
pub const FILLER: &str = bitpack::DESCRIPTOR.name;

/// The leaf that stores values as they are: what the search cuts a stream into child streams
/// with, and the last resort for a stream no chosen plan can encode.
pub const RAW: &str = plain::DESCRIPTOR.name;

/// Integer candidates, tried in this order (ties go to the earlier, simpler plan).
pub const INT_CANDIDATES: &[&str] = &[
    "constant",
    "bitpack",
    "for | bitpack",
    "for | patch | bitpack",
    "for | hipatch | bitpack",
    "dict(codes: bitpack, values: for | bitpack)",
    "rle(values: for | bitpack, runs: for | bitpack)",
    "delta | for | bitpack",
    "delta | for | patch | bitpack",
    "delta | rle(values: for | bitpack, runs: for | bitpack)",
    "blockpack",
    "blockpack(refs: delta | for | bitpack)",
];

/// Byte-string candidates: as they are, a dictionary of whole strings, or the bytes of all
/// strings compressed as one text.
pub const STRING_CANDIDATES: &[&str] = &[
    "plain",
    "strdict",
    "strdict(dict: plain(bytes: fsst))",
    "plain(bytes: fsst)",
    "plain(bytes: fsst(codes: ans))",
    "words",
    "words(dict: plain(bytes: fsst))",
];

/// Text candidates: plans for a u8 stream that holds text (or any bytes).
pub const TEXT_CANDIDATES: &[&str] = &[
    "plain",
    "ans",
    "chartable",
    "fsst",
    "fsst(codes: ans)",
    "words",
    "words(dict: plain(bytes: fsst))",
    "zstd",
];

/// Forms of a string dictionary (a `strdict` or `words` child) in the string space.
pub const DICT_FORMS: &[&str] = &[
    "plain",
    "plain(bytes: fsst)",
    "plain(bytes: fsst(codes: ans))",
    "plain(bytes: ans)",
    "plain(bytes: zstd)",
];

/// Forms of the bytes of `plain` strings: the text plans but the character tables, whose
/// training costs most and which short strings do not repay.
pub const STRING_BYTES_FORMS: &[&str] = &[
    "plain",
    "ans",
    "fsst",
    "fsst(codes: ans)",
    "words",
    "words(dict: plain(bytes: fsst))",
    "zstd",
];

/// The candidate plans for a u8 stream of text, the default for `zipflow compress --text`.
pub fn text_candidates() -> Vec<Plan> {
    TEXT_CANDIDATES
        .iter()
        .filter_map(|t| t.parse().ok())
        .collect()
}

/// The candidate plans for a stream of `ptype`: for floats, `constant`, then each integer
/// candidate below a change of type, then `plain`; for integers the integer candidates and
/// `plain`.
pub fn candidates(ptype: PType) -> Vec<Plan> {
    let constant = constant::DESCRIPTOR.name;
    let texts: Vec<String> = match ptype {
        PType::F32 | PType::F64 => std::iter::once(constant.to_string())
            .chain(
                INT_CANDIDATES
                    .iter()
                    .filter(|c| **c != constant)
                    .map(|c| format!("{} | {c}", float2int::DESCRIPTOR.name)),
            )
            .chain(std::iter::once(RAW.to_string()))
            .collect(),
        PType::Bytes => STRING_CANDIDATES.iter().map(|c| c.to_string()).collect(),
        _ => INT_CANDIDATES
            .iter()
            .map(|c| c.to_string())
            .chain(std::iter::once(RAW.to_string()))
            .collect(),
    };
    texts.iter().filter_map(|t| t.parse().ok()).collect()
}

/// The shape of a stream, as far as decode cost needs it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shape {
    /// Values in the stream.
    pub values: f64,
    /// Bytes of the values' payload (string bytes for byte strings, else values x width).
    pub bytes: f64,
    /// Runs of equal values per value (1 when no two neighbours are equal).
    pub runs: f64,
    /// Distinct values per value.
    pub distinct: f64,
    /// Whether the stream holds byte strings (`plain` has children only for those).
    pub strings: bool,
}

/// Values over which distinct values are counted.
pub const DISTINCT_WINDOW: usize = 2048;

impl Shape {
    /// Measures `values` (a sample): the run fraction over all of it, the distinct fraction
    /// over its first [`DISTINCT_WINDOW`] values (enough to tell a dictionary's use).
    pub fn of(values: &Values) -> Shape {
        let (runs, distinct) = match values {
            Values::Int(v) => {
                zipflow_core::match_ints!(v, T, x => fractions(x.iter().map(|v| v.to_u64())))
            }
            Values::F32(v) => fractions(v.iter().map(|f| u64::from(f.to_bits()))),
            Values::F64(v) => fractions(v.iter().map(|f| f.to_bits())),
            Values::Bytes(b) => fractions((0..b.len()).map(|i| b.get(i).map_or(0, fnv1a))),
        };
        Shape {
            values: values.len() as f64,
            bytes: values.plain_size() as f64,
            runs,
            distinct,
            strings: matches!(values, Values::Bytes(_)),
        }
    }

    /// The same shape scaled to `n` values.
    pub fn scaled(self, n: usize) -> Shape {
        let k = n as f64 / self.values.max(1.0);
        Shape {
            values: n as f64,
            bytes: self.bytes * k,
            ..self
        }
    }

    /// The same shape with `values` values of `bytes` bytes.
    pub fn with_values(self, values: f64, bytes: f64) -> Shape {
        Shape {
            values,
            bytes,
            ..self
        }
    }

    /// The same shape with `f` times the values and bytes.
    pub fn per(self, f: f64) -> Shape {
        self.with_values(self.values * f, self.bytes * f)
    }

    /// The same shape as a stream of numbers (not byte strings).
    pub fn numbers(self) -> Shape {
        Shape {
            strings: false,
            ..self
        }
    }
}

/// Run and distinct fractions of a stream of keys.
fn fractions(keys: impl Iterator<Item = u64>) -> (f64, f64) {
    let (mut n, mut runs, mut prev) = (0usize, 0usize, None);
    let mut window = Vec::with_capacity(DISTINCT_WINDOW);
    for k in keys {
        if prev != Some(k) {
            runs += 1;
        }
        prev = Some(k);
        if window.len() < DISTINCT_WINDOW {
            window.push(k);
        }
        n += 1;
    }
    let w = window.len().max(1) as f64;
    window.sort_unstable();
    window.dedup();
    (runs as f64 / n.max(1) as f64, window.len() as f64 / w)
}

/// A 64-bit FNV-1a hash of a string, to count distinct strings as numbers.
fn fnv1a(s: &[u8]) -> u64 {
    s.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// One calibration case: a synthetic stream, a plan that decodes it with the primitive under
/// measure, and the plans whose decode time is subtracted, each scaled by its stream length
/// relative to `stream` (those primitives are measured first: registry order).
#[derive(Debug, Clone)]
pub struct Calibration {
    /// The synthetic stream.
    pub stream: Values,
    /// The plan that isolates the primitive.
    pub plan: &'static str,
    /// Primitives whose cost is subtracted, with their stream length relative to `stream`.
    pub minus: &'static [(&'static str, f64)],
}

/// Values in a calibration stream.
pub const CALIBRATION_LEN: usize = 65_536;

/// A deterministic xorshift generator seeded with `seed` (not zero).
pub fn xorshift(seed: u64) -> impl FnMut() -> u64 {
    let mut x = seed;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

/// `v` as a stream of i64 values.
pub fn ints(v: Vec<i64>) -> Values {
    Values::Int(IntVec::I64(v))
}

/// Random values in a 4096-wide range far from zero: what bit-packing and frames of
/// reference are measured on.
pub fn small_ints() -> Values {
    let mut rnd = xorshift(0x2545_f491_4f6c_dd1d);
    ints(
        (0..CALIBRATION_LEN)
            .map(|_| 1_000_000 + (rnd() % 4096) as i64)
            .collect(),
    )
}

/// Bytes below 256 with one huge value in a hundred: what exception coders are measured on.
pub fn outlier_ints() -> Values {
    let mut rnd = xorshift(0x3c6e_f372_fe94_f82b);
    ints(
        (0..CALIBRATION_LEN)
            .map(|i| {
                if i % 100 == 0 {
                    1 << 40
                } else {
                    (rnd() % 256) as i64
                }
            })
            .collect(),
    )
}

/// Text drawn from a small vocabulary, as a u8 stream: what text coders are measured on.
pub fn text_bytes() -> Values {
    let mut rnd = xorshift(0xa54f_f53a_5f1d_36f1);
    let words = [
        "the ",
        "quick ",
        "deposits ",
        "sleep ",
        "furiously ",
        "regular ",
        "ideas ",
        "among ",
    ];
    let text: Vec<u8> = (0..CALIBRATION_LEN)
        .flat_map(|_| words[(rnd() % 8) as usize].bytes())
        .take(4 * CALIBRATION_LEN)
        .collect();
    Values::Int(IntVec::U8(text))
}

/// Short strings from a set of four: what string dictionaries are measured on.
pub fn flag_strings() -> Values {
    let mut rnd = xorshift(0x510e_527f_ade6_82d1);
    let mut flags = ByteStrings {
        offsets: vec![0],
        data: Vec::new(),
    };
    for _ in 0..CALIBRATION_LEN {
        flags
            .data
            .extend_from_slice([&b"MAIL"[..], b"SHIP", b"TRUCK", b"AIR"][(rnd() % 4) as usize]);
        flags.offsets.push(flags.data.len() as u64);
    }
    Values::Bytes(flags)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{by_id, by_name, encode, encodings};

    #[test]
    fn descriptors_are_unique_and_found_by_id_and_name() {
        for e in encodings() {
            let d = e.descriptor();
            assert_eq!(by_id(d.id).map(|f| f.name()), Some(d.name));
            assert_eq!(by_name(d.name).map(|f| f.id()), Some(d.id));
        }
        assert_eq!(crate::bitpack::ID, crate::bitpack::DESCRIPTOR.id);
    }

    #[test]
    fn calibration_plans_encode_their_streams() {
        for e in encodings() {
            for case in e.calibration() {
                let plan: Plan = case.plan.parse().unwrap_or_else(|err| panic!("{err}"));
                assert_eq!(plan.name, e.name());
                let stream = case.stream.slice(0, 4096.min(case.stream.len()));
                encode(&plan, &stream).unwrap_or_else(|err| panic!("{}: {err}", case.plan));
                for (minus, _) in case.minus {
                    assert!(by_name(minus).is_some(), "{minus}");
                }
            }
        }
    }

    #[test]
    fn every_candidate_parses() {
        for ptype in PType::ALL {
            let texts = match ptype {
                PType::Bytes => STRING_CANDIDATES.len(),
                // Floats: `constant`, the rest below the change of type, and `plain`.
                _ => INT_CANDIDATES.len() + 1,
            };
            assert_eq!(candidates(ptype).len(), texts, "{ptype}");
        }
        assert_eq!(text_candidates().len(), TEXT_CANDIDATES.len());
        for t in DICT_FORMS.iter().chain(STRING_BYTES_FORMS) {
            assert!(t.parse::<Plan>().is_ok(), "{t}");
        }
    }
}
