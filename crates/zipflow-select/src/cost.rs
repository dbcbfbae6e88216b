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
//! ([`Shape`]: runs and distinct values measured on the sample) by the parent primitive
//! ([`Encoding::child_shape`]): a run-length node's children hold one entry per run, a
//! dictionary's one per distinct value, and so on. What a node costs over its stream is the
//! primitive's to say too ([`Encoding::decode_cost`]), and so are the calibration cases
//! ([`Encoding::calibration`]).
//!
//! [`Encoding::child_shape`]: zipflow_encodings::Encoding::child_shape
//! [`Encoding::decode_cost`]: zipflow_encodings::Encoding::decode_cost
//! [`Encoding::calibration`]: zipflow_encodings::Encoding::calibration

use std::collections::HashMap;
use std::time::Instant;
use zipflow_core::{Plan, Result, Values};
use zipflow_encodings::{Scratch, by_name, decode, encode, encodings};

pub use zipflow_encodings::Shape;
pub use zipflow_encodings::selection::DISTINCT_WINDOW;

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
        if enc.descriptor().leaf_for_numbers && !shape.strings {
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
            total += self.decode_ns(&child, enc.child_shape(slot.name, shape));
        }
        total
    }

    /// Nanoseconds a `name` node takes to decode a stream of `shape`, its children not
    /// counted ([`Encoding::decode_cost`]).
    ///
    /// [`Encoding::decode_cost`]: zipflow_encodings::Encoding::decode_cost
    pub fn own_ns(&self, name: &str, shape: Shape) -> f64 {
        match by_name(name) {
            Some(enc) => enc.decode_cost(shape, &|n| self.ns_per_value(n)),
            None => self.ns_per_value(name) * shape.values,
        }
    }
}

/// The shape of the stream in child slot `slot` of a `name` node decoding a stream of
/// `shape` ([`Encoding::child_shape`]; a number per value for a primitive the registry does
/// not know).
///
/// [`Encoding::child_shape`]: zipflow_encodings::Encoding::child_shape
pub fn child_shape(name: &str, slot: &str, shape: Shape) -> Shape {
    match by_name(name) {
        Some(enc) => enc.child_shape(slot, shape),
        None => shape.numbers(),
    }
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
    // Registry order measures the primitives other cases subtract first.
    for enc in encodings() {
        for case in enc.calibration() {
            let n = case.stream.len().max(1) as f64;
            let t = time_decode(case.plan, &case.stream, reps)?;
            let others: f64 = case
                .minus
                .iter()
                .map(|(p, k)| ns.get(*p).copied().unwrap_or(0.0) * k * n)
                .sum();
            let per_value = ((t - others) / n).max(0.01);
            // Text primitives are costed per byte of their (u8) stream, which `stream` is.
            ns.insert(enc.name().to_string(), per_value);
        }
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
