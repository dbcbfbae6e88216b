//! Decode cost: what each primitive costs per value it decodes, and a plan's estimated decode
//! time built from it.
//!
//! The table holds nanoseconds per value of the stream a primitive decodes (for text
//! primitives the stream is bytes, so it is nanoseconds per byte), measured on one CPU core by
//! [`calibrate`]: each primitive is decoded on synthetic data inside a small plan, and the
//! cost of the plan's other nodes (measured first) is subtracted. A table measured on the
//! development machine is compiled in ([`CostTable::default`], `src/costs.txt`);
//! `zipflow bench selection --calibrate` measures the machine it runs on and prints a table in
//! the same format, which [`CostTable::parse`] reads.
//!
//! A plan's decode time ([`CostTable::decode_ns`]) sums its nodes' costs over the values each
//! node decodes. How many values a child stream holds is estimated from the stream's shape
//! ([`Shape`]: runs and distinct values measured on the sample), by slot name: `values` and
//! `runs` of a run-length node hold one entry per run, a dictionary's `values`/`dict` one per
//! distinct value, `bytes` one per byte, `refs` one per 1024-value block.

use std::collections::HashMap;
use std::time::Instant;
use zipflow_core::values::ByteStrings;
use zipflow_core::{Int, IntVec, Plan, Result, Values};
use zipflow_encodings::hipatch::{COUNTS, HIGH, OFFSETS};
use zipflow_encodings::{Scratch, by_name, decode, encode};

/// The compiled-in table.
const DEFAULT_TABLE: &str = include_str!("costs.txt");

/// Cost of a primitive missing from the table (ns per value): a deliberate overestimate.
const UNKNOWN_NS: f64 = 5.0;

/// Nanoseconds per decoded value, per primitive.
#[derive(Debug, Clone, PartialEq)]
pub struct CostTable {
    ns: HashMap<String, f64>,
}

impl Default for CostTable {
    fn default() -> Self {
        // The compiled-in text is checked by a test; an unreadable one falls back to flat costs.
        CostTable::parse(DEFAULT_TABLE).unwrap_or_else(|_| CostTable { ns: HashMap::new() })
    }
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

    fn with_values(self, values: f64, bytes: f64) -> Shape {
        Shape {
            values,
            bytes,
            ..self
        }
    }
}

/// Bytes per `words` token in typical text, for the number of codes a string node holds.
const BYTES_PER_TOKEN: f64 = 5.0;

/// Values over which distinct values are counted.
pub const DISTINCT_WINDOW: usize = 2048;

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

impl CostTable {
    /// Parses `name ns_per_value` lines (`#` starts a comment).
    pub fn parse(text: &str) -> Result<CostTable> {
        let mut ns = HashMap::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let mut parts = line.split_whitespace();
            let (Some(name), Some(value), None) = (parts.next(), parts.next(), parts.next()) else {
                return Err(zipflow_core::Error::invalid(format!(
                    "cost table line {}: expected `name ns_per_value`, got `{line}`",
                    i + 1
                )));
            };
            let v: f64 = value.parse().map_err(|_| {
                zipflow_core::Error::invalid(format!(
                    "cost table line {}: `{value}` is not a number",
                    i + 1
                ))
            })?;
            if !(v.is_finite() && v >= 0.0) {
                return Err(zipflow_core::Error::invalid(format!(
                    "cost table line {}: cost {v} must be finite and not negative",
                    i + 1
                )));
            }
            ns.insert(name.to_string(), v);
        }
        Ok(CostTable { ns })
    }

    /// The table as text that [`CostTable::parse`] reads, sorted by name.
    pub fn to_text(&self) -> String {
        let mut names: Vec<(&String, &f64)> = self.ns.iter().collect();
        names.sort_by(|a, b| a.0.cmp(b.0));
        let mut out = String::from("# primitive  ns per decoded value (one core)\n");
        for (n, v) in names {
            out.push_str(&format!("{n} {v:.3}\n"));
        }
        out
    }

    /// Nanoseconds per value for primitive `name`.
    pub fn ns_per_value(&self, name: &str) -> f64 {
        self.ns.get(name).copied().unwrap_or(UNKNOWN_NS)
    }

    /// Estimated time to decode a stream of `shape` encoded by `plan`, in nanoseconds: each
    /// node's [`own_ns`](CostTable::own_ns) over the [`child_shape`] its parent gives it.
    pub fn decode_ns(&self, plan: &Plan, shape: Shape) -> f64 {
        let own = self.own_ns(&plan.name, shape);
        let Some(enc) = by_name(&plan.name) else {
            return own;
        };
        if plan.name == "plain" && !shape.strings {
            return own;
        }
        let mut total = own;
        for slot in enc.slots() {
            let child = match plan.get(slot.name) {
                Some(p) => p.clone(),
                None => match slot.default.parse::<Plan>() {
                    Ok(p) => p,
                    Err(_) => continue,
                },
            };
            total += self.decode_ns(&child, child_shape(&plan.name, slot.name, shape));
        }
        total
    }

    /// Nanoseconds a `name` node takes to decode a stream of `shape`, its children not
    /// counted.
    pub fn own_ns(&self, name: &str, shape: Shape) -> f64 {
        if name == "words" && shape.strings {
            // `words` costs per byte it writes, for strings too, and places each string as a
            // dictionary gather does.
            self.ns_per_value("words") * shape.bytes + self.ns_per_value("strdict") * shape.values
        } else if name == "plain" && shape.strings {
            // Each string is placed (offsets, then Arrow views) one by one, where a
            // dictionary's rows are gathered from views built once per entry.
            (self.ns_per_value("plain") + self.ns_per_value("strdict")) * shape.values
        } else {
            self.ns_per_value(name) * shape.values
        }
    }
}

/// The shape of the stream in child slot `slot` of a `name` node decoding a stream of
/// `shape`.
pub fn child_shape(name: &str, slot: &str, shape: Shape) -> Shape {
    let per = |f: f64| shape.with_values(shape.values * f, shape.bytes * f);
    let numbers = |s: Shape| Shape {
        strings: false,
        ..s
    };
    match (name, slot) {
        // One code per token: for strings at least one per string, else about one per word of
        // text.
        ("words", "codes") if shape.strings => {
            let tokens = shape.values.max(shape.bytes / BYTES_PER_TOKEN);
            numbers(shape.with_values(tokens, tokens * 4.0))
        }
        ("rle", _) => per(shape.runs),
        // Exceptions: a few percent of values where `hipatch` pays off; 1 in 32 assumed.
        ("hipatch", OFFSETS | HIGH) => numbers(per(1.0 / 32.0)),
        ("hipatch", COUNTS) => numbers(per(1.0 / zipflow_core::VECTOR_LEN as f64)),
        (_, "values") | (_, "dict") => per(shape.distinct),
        (_, "bytes") => numbers(shape.with_values(shape.bytes, shape.bytes)),
        (_, "refs") => numbers(per(1.0 / zipflow_core::VECTOR_LEN as f64)),
        _ if slot.is_empty() => shape,
        _ => numbers(shape),
    }
}

/// Synthetic streams and the plans that isolate each primitive: (primitive, stream, plan,
/// plans whose decode time is subtracted, scaled by their stream length relative to `stream`).
/// One calibration case: (primitive, stream, plan, plans subtracted with their length factor).
type Case = (&'static str, Values, &'static str, Vec<(&'static str, f64)>);

fn calibration_cases() -> Vec<Case> {
    const N: usize = 65_536;
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let small: Vec<i64> = (0..N).map(|_| 1_000_000 + (rnd() % 4096) as i64).collect();
    let signed: Vec<i64> = (0..N).map(|_| (rnd() % 4096) as i64 - 2048).collect();
    let sorted: Vec<i64> = (0..N as i64).map(|i| 7 * i + (i % 3)).collect();
    let runs: Vec<i64> = (0..N).map(|i| ((i / 8) as i64 * 7919) % 4096).collect();
    let few: Vec<i64> = (0..N)
        .map(|_| [3i64, 77, 1 << 40, -5][(rnd() % 4) as usize])
        .collect();
    let outliers: Vec<i64> = (0..N)
        .map(|i| {
            if i % 100 == 0 {
                1 << 40
            } else {
                (rnd() % 256) as i64
            }
        })
        .collect();
    let local: Vec<i64> = (0..N as i64)
        .map(|i| (i / 1024) * 1_000_003 + (rnd() % 64) as i64)
        .collect();
    let cents: Vec<f64> = (0..N)
        .map(|_| (rnd() % 10_000_000) as f64 / 100.0)
        .collect();
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
    let text: Vec<u8> = (0..N)
        .flat_map(|_| words[(rnd() % 8) as usize].bytes())
        .take(4 * N)
        .collect();
    let mut flags = ByteStrings {
        offsets: vec![0],
        data: Vec::new(),
    };
    for _ in 0..N {
        flags
            .data
            .extend_from_slice([&b"MAIL"[..], b"SHIP", b"TRUCK", b"AIR"][(rnd() % 4) as usize]);
        flags.offsets.push(flags.data.len() as u64);
    }
    let ints = |v: &Vec<i64>| Values::Int(IntVec::I64(v.clone()));
    let text_bytes = Values::Int(IntVec::U8(text));
    vec![
        ("bitpack", ints(&small), "bitpack", vec![]),
        ("plain", ints(&small), "plain", vec![]),
        ("constant", ints(&vec![5; N]), "constant", vec![]),
        ("for", ints(&small), "for | bitpack", vec![("bitpack", 1.0)]),
        (
            "zigzag",
            ints(&signed),
            "zigzag | plain",
            vec![("plain", 1.0)],
        ),
        (
            "delta",
            ints(&sorted),
            "delta | plain",
            vec![("plain", 1.0)],
        ),
        (
            "patch",
            ints(&outliers),
            "patch | bitpack",
            vec![("bitpack", 1.0)],
        ),
        (
            "radix",
            Values::Int(IntVec::U8((0..N).map(|_| (rnd() % 3) as u8).collect())),
            "radix",
            vec![],
        ),
        (
            "hipatch",
            ints(&outliers),
            "hipatch(counts: plain, offsets: plain, high: plain) | plain",
            vec![("plain", 1.02)],
        ),
        (
            "rle",
            ints(&runs),
            "rle(values: plain, runs: plain)",
            vec![("plain", 2.0 / 8.0)],
        ),
        (
            "dict",
            ints(&few),
            "dict(codes: plain, values: plain)",
            vec![("plain", 1.0)],
        ),
        (
            "blockpack",
            ints(&local),
            "blockpack(refs: plain)",
            vec![("plain", 1.0 / 1024.0)],
        ),
        (
            "float2int",
            Values::F64(cents),
            "float2int | plain",
            vec![("plain", 1.0)],
        ),
        ("ans", text_bytes.clone(), "ans", vec![]),
        ("chartable", text_bytes.clone(), "chartable", vec![]),
        ("chardict16", text_bytes.clone(), "chardict16", vec![]),
        ("fsst", text_bytes.clone(), "fsst(codes: plain)", vec![]),
        (
            "words",
            text_bytes,
            "words(codes: plain, dict: plain)",
            vec![],
        ),
        (
            "strdict",
            Values::Bytes(flags),
            "strdict(codes: plain, dict: plain)",
            vec![("plain", 1.0)],
        ),
    ]
}

/// Median nanoseconds to decode `plan` on `values`.
fn time_decode(plan: &str, values: &Values, reps: usize) -> Result<f64> {
    let plan: Plan = plan.parse()?;
    let bytes = encode(&plan, values)?.to_bytes()?;
    let node = zipflow_encodings::NodeView::parse(&bytes)?;
    let mut out = Values::empty(values.ptype());
    let mut scratch = Scratch::default();
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps.max(1) {
        let t = Instant::now();
        decode(&node, &mut out, &mut scratch)?;
        times.push(t.elapsed().as_secs_f64() * 1e9);
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

/// Measures the cost table on this machine (one thread, median of `reps` decodes per case;
/// about a second with `reps = 15`).
///
/// Costs never go below 0.01 ns (a primitive cheaper than the timer's noise).
pub fn calibrate(reps: usize) -> Result<CostTable> {
    let mut ns: HashMap<String, f64> = HashMap::new();
    for (name, values, plan, minus) in calibration_cases() {
        let n = values.len().max(1) as f64;
        let t = time_decode(plan, &values, reps)?;
        let others: f64 = minus
            .iter()
            .map(|(p, k)| ns.get(*p).copied().unwrap_or(0.0) * k * n)
            .sum();
        let per_value = ((t - others) / n).max(0.01);
        // Text primitives are costed per byte of their (u8) stream, which `values` is.
        ns.insert(name.to_string(), per_value);
    }
    Ok(CostTable { ns })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compiled_in_table_parses_and_covers_the_search_space() -> Result<()> {
        let t = CostTable::parse(DEFAULT_TABLE)?;
        for name in [
            "bitpack",
            "blockpack",
            "constant",
            "delta",
            "dict",
            "for",
            "patch",
            "hipatch",
            "radix",
            "plain",
            "rle",
            "zigzag",
            "float2int",
            "strdict",
            "fsst",
            "ans",
            "words",
            "chartable",
        ] {
            assert!(t.ns.contains_key(name), "{name} missing from costs.txt");
        }
        assert_eq!(CostTable::parse(&t.to_text())?, t);
        Ok(())
    }

    #[test]
    fn bad_tables_are_rejected() {
        assert!(CostTable::parse("bitpack").is_err());
        assert!(CostTable::parse("bitpack x").is_err());
        assert!(CostTable::parse("bitpack -1").is_err());
        assert!(CostTable::parse("# nothing\n\n").is_ok());
    }

    #[test]
    fn children_are_costed_by_their_stream() -> Result<()> {
        let t = CostTable::parse("rle 1\nbitpack 1\nfor 1\nplain 1")?;
        let shape = Shape {
            values: 1000.0,
            bytes: 8000.0,
            runs: 0.1,
            distinct: 0.5,
            strings: false,
        };
        // rle over 1000 values, two children of 100 entries each, each `for | bitpack` (2 ns).
        let plan: Plan = "rle".parse()?;
        assert_eq!(t.decode_ns(&plan, shape), 1000.0 + 2.0 * 100.0 * 2.0);
        Ok(())
    }
}
