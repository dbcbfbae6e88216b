//! Run-length encoding: each run of equal neighbours becomes one value and its length.
//!
//! Decoding validates the run lengths once (every run at least 1, the sum exactly the node's
//! length), then expands without further checks on the output positions: long runs are slice
//! fills, short runs one fixed-width store each into a buffer with a little slack at the end,
//! so the common case has no branch on the run length beyond "short or long".
//!
//! Node: no meta; child 0 (`values`) = one value per run, same type; child 1 (`runs`) = the
//! run lengths as u32, each at least 1.

use crate::memo::Split;
use crate::node::{EncodedNode, NodeView};
use crate::{Encoding, Pattern, Scratch, Slot, encode_child, expect_child};
use std::rc::Rc;
use zipflow_core::values::IntVecOf;
use zipflow_core::{Error, Int, IntVec, PType, Plan, Result, Values, match_ints};

/// `rle(values: P, runs: Q)`.
pub struct Rle;

/// On-disk id of [`Rle`].
pub const ID: u16 = DESCRIPTOR.id;

/// Header (16 B) plus two child-table entries; no meta.
const NODE_OVERHEAD: usize = 24;

/// Runs no longer than this are expanded with one fixed-width store of `SHORT` copies.
const SHORT: usize = 8;

/// One value per run and the run lengths. `values.len()` must fit in u32 (callers check it),
/// so no run overflows its length.
pub fn runs<T: Int>(values: &[T]) -> (Vec<T>, Vec<u32>) {
    let mut vals = Vec::new();
    let mut lens = Vec::new();
    let mut rest = values;
    while let Some(&first) = rest.first() {
        let n = rest.iter().position(|&v| v != first).unwrap_or(rest.len());
        vals.push(first);
        lens.push(n as u32);
        rest = &rest[n..];
    }
    (vals, lens)
}

/// An `rle` node, parsed and checked once: one value and one length per run.
#[derive(Debug, Clone, Copy)]
pub struct View<'n, 'a> {
    /// One value per run, the node's type.
    pub values: &'n NodeView<'a>,
    /// One u32 length per run, as many as `values`, at most the node's length.
    pub runs: &'n NodeView<'a>,
}

impl<'n, 'a> View<'n, 'a> {
    /// Checks `node`'s shape and children.
    pub fn parse(node: &'n NodeView<'a>) -> Result<View<'n, 'a>> {
        node.expect_shape("rle", 0, 2)?;
        node.meta_reader().finish("rle")?;
        expect_child(node, 0, "values", node.ptype, None)?;
        let nruns = node.children[0].len;
        expect_child(node, 1, "runs", PType::U32, Some(nruns))?;
        // Every run is at least 1 long, so more runs than values is corrupt; checking it first
        // keeps a hostile header from making us decode huge children.
        if nruns > node.len {
            return Err(Error::corrupt(format!(
                "rle node has {nruns} runs for {} values",
                node.len
            )));
        }
        Ok(View {
            values: &node.children[0],
            runs: &node.children[1],
        })
    }
}

impl Encoding for Rle {
    fn descriptor(&self) -> &'static crate::Descriptor {
        &DESCRIPTOR
    }
    fn child_shape(&self, slot: &str, shape: crate::Shape) -> crate::Shape {
        // Values and run lengths: one entry per run.
        let _ = slot;
        shape.per(shape.runs)
    }
    fn calibration(&self) -> Vec<crate::Calibration> {
        vec![crate::Calibration {
            stream: calibration_runs(),
            plan: "rle(values: plain, runs: plain)",
            minus: &[(crate::selection::RAW, 2.0 / 8.0)],
        }]
    }
    fn accepts(&self, ptype: PType) -> bool {
        ptype.is_int()
    }

    fn encode(&self, plan: &Plan, input: &Values) -> Result<EncodedNode> {
        let Values::Int(v) = input else {
            return Err(Error::plan(plan, "rle needs integers"));
        };
        // Checks the length fits in u32 before any run length is cast to it.
        let mut node = EncodedNode::new(ID, v.ptype(), v.len())?;
        let (values, lengths) = split(v);
        node.children
            .push(encode_child(plan, self, "values", &values)?);
        node.children
            .push(encode_child(plan, self, "runs", &lengths)?);
        Ok(node)
    }

    fn decode(&self, node: &NodeView<'_>, out: &mut Values, scratch: &mut Scratch) -> Result<()> {
        let view = View::parse(node)?;
        let lengths = scratch.decode(view.runs)?;
        let values = match scratch.decode(view.values) {
            Ok(v) => v,
            Err(e) => {
                scratch.give(lengths);
                return Err(e);
            }
        };
        let result = expand_values(&values, &lengths, node.len, out);
        scratch.give(values);
        scratch.give(lengths);
        result
    }

    fn split(&self, plan: &Plan, input: &Values) -> Option<Result<Rc<Split>>> {
        // A fixed overhead on top of the children.
        crate::memo::split_ints("rle", plan, input, |v| {
            if u32::try_from(v.len()).is_err() {
                return Err(Error::unsupported(format!(
                    "stream of {} values exceeds 2^32 - 1",
                    v.len()
                )));
            }
            let (values, lengths) = split(v);
            Ok(Split {
                own: NODE_OVERHEAD,
                children: vec![values, lengths],
            })
        })
    }
}

/// The two child streams of `v`.
fn split(v: &IntVec) -> (Values, Values) {
    let (values, lengths) = match_ints!(v, T, x => {
        let (vals, lens) = runs(x);
        (T::wrap(vals), lens)
    });
    (Values::Int(values), Values::Int(IntVec::U32(lengths)))
}

fn expand_values(values: &Values, lengths: &Values, len: usize, out: &mut Values) -> Result<()> {
    let Values::Int(IntVec::U32(lengths)) = lengths else {
        return Err(Error::corrupt("rle run lengths are not u32"));
    };
    let (Values::Int(values), Values::Int(out)) = (values, out) else {
        return Err(Error::corrupt("rle values are not integers"));
    };
    check_runs(lengths, values.len(), len)?;
    match_ints!(out, T, o => match T::slice(values) {
        Some(vals) => {
            expand(vals, lengths, len, o);
            Ok(())
        }
        None => Err(Error::corrupt("rle values have the wrong type")),
    })
}

/// Checks that there is one length per value, every run is at least 1 long, and the runs add
/// up to exactly `len`.
pub fn check_runs(lengths: &[u32], nvalues: usize, len: usize) -> Result<()> {
    if lengths.len() != nvalues {
        return Err(Error::corrupt(format!(
            "rle has {nvalues} values but {} run lengths",
            lengths.len()
        )));
    }
    if lengths.contains(&0) {
        return Err(Error::corrupt("rle run of length 0"));
    }
    // At most 2^32 - 1 runs (a node length is a u32) of at most 2^32 - 1 each: the sum stays
    // below 2^64, so it cannot overflow a u64.
    let total: u64 = lengths.iter().map(|&l| u64::from(l)).sum();
    if total != len as u64 {
        return Err(Error::corrupt(format!(
            "rle runs add up to {total} values, the node holds {len}"
        )));
    }
    Ok(())
}

/// Expands runs into `out` (replacing its contents). `lengths` must have passed
/// [`check_runs`] for `vals.len()` and `len`; otherwise this panics rather than write out of
/// bounds.
pub fn expand<T: Int>(vals: &[T], lengths: &[u32], len: usize, out: &mut Vec<T>) {
    // `SHORT` slack values at the end let a short run store `SHORT` copies unconditionally.
    crate::resize_for_overwrite(out, len + SHORT, T::ZERO);
    let mut pos = 0usize;
    for (&v, &n) in vals.iter().zip(lengths) {
        let n = n as usize;
        if n <= SHORT {
            // `check_runs` made the lengths sum to `len`, so `pos + n <= len` and this store of
            // `SHORT` values ends within the slack.
            out[pos..pos + SHORT].copy_from_slice(&[v; SHORT]);
        } else {
            out[pos..pos + n].fill(v);
        }
        pos += n;
    }
    out.truncate(len);
}

/// What `rle` is: its id, name, child slots, GPU decoding and part in the search.
pub const DESCRIPTOR: crate::Descriptor = crate::Descriptor {
    id: 6,
    name: "rle",
    slots: &[
        Slot {
            name: "values",
            default: "for | bitpack",
        },
        Slot {
            name: "runs",
            default: "for | bitpack",
        },
    ],
    leaf_for_numbers: false,
    gpu: crate::GpuDecode::parallel(Pattern::GroupParallel),
    search: crate::Search::numeric(crate::Role::Inner {
        side_streams: false,
    }),
};

/// Runs of eight equal values.
fn calibration_runs() -> zipflow_core::Values {
    crate::selection::ints(
        (0..crate::selection::CALIBRATION_LEN)
            .map(|i| ((i / 8) as i64 * 7919) % 4096)
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode;
    use crate::testing::*;
    use proptest::prelude::*;

    struct EdgeCases;

    impl IntCases for EdgeCases {
        fn cases<T: Int>() -> Vec<Vec<T>> {
            let mut r = random(11);
            let mut cases = edge_lengths(&mut r, T::MIN);
            cases.extend([
                vec![T::from_u64_wrapping(9); 1024],
                vec![T::MAX; 70_000],
                [T::MIN, T::MAX, T::ZERO, T::MAX, T::MAX, T::MIN].repeat(300),
            ]);
            // Runs of every length 1..=40, then a few very long ones.
            let mut mixed = Vec::new();
            for n in 1..=40u64 {
                mixed.extend(std::iter::repeat_n(
                    T::from_u64_wrapping(n * 31),
                    n as usize,
                ));
            }
            for n in [1000u64, 5000, 1, 2, 3000] {
                mixed.extend(std::iter::repeat_n(T::from_u64_wrapping(n), n as usize));
            }
            cases.push(mixed);
            let mut sorted = random_ints::<T>(&mut r, 4000)
                .iter()
                .map(|&v| T::from_u64_wrapping(v.to_u64() % 50))
                .collect::<Vec<_>>();
            sorted.sort_unstable();
            cases.push(sorted);
            cases
        }
    }

    #[test]
    fn round_trips_edge_cases() -> Result<()> {
        round_trip_every_int_type::<EdgeCases>(&[
            "rle",
            "rle(values: bitpack, runs: bitpack)",
            "rle(values: plain, runs: plain)",
            "rle(values: zigzag | bitpack)",
        ])
    }

    #[test]
    fn mixes_of_extremes() -> Result<()> {
        let v = vec![i64::MIN, i64::MIN, i64::MAX, 0, -1, -1, -1, i64::MIN];
        round_trip(&plan("rle"), &Values::Int(IntVec::I64(v)))?;
        let v = vec![u64::MAX, 0, u64::MAX, u64::MAX, 1];
        round_trip(&plan("rle"), &Values::Int(IntVec::U64(v)))?;
        Ok(())
    }

    #[test]
    fn describe_fills_in_defaults() -> Result<()> {
        let v: Vec<i16> = (0..3000).map(|i| (i / 100) as i16).collect();
        let bytes = round_trip(&plan("rle"), &Values::Int(IntVec::I16(v)))?;
        // 30 values 0..=29 (5 bits); every run is 100 long, so its offsets are all 0.
        assert_eq!(
            described(&bytes)?,
            "rle(values: for | bitpack(5), runs: for | bitpack(0))"
        );
        Ok(())
    }

    #[test]
    fn rejects_non_integers() {
        let e = encode(&plan("rle"), &Values::F32(vec![1.0]));
        assert!(matches!(e, Err(Error::Plan { .. })));
    }

    #[test]
    fn checks_runs() -> Result<()> {
        let p = "rle(values: plain, runs: plain)";
        let v = Values::Int(IntVec::U32((0..3000).map(|i| i / 7).collect()));
        // A zero-length run.
        let e = corrupt(p, &v, |n| {
            n.children[1].buffers[0][0..4].copy_from_slice(&0u32.to_le_bytes())
        })?;
        assert!(e.contains("length 0"), "{e}");
        // Runs that add up to too few values, and to too many.
        let e = corrupt(p, &v, |n| {
            n.children[1].buffers[0][0..4].copy_from_slice(&6u32.to_le_bytes())
        })?;
        assert!(e.contains("add up to 2999"), "{e}");
        let e = corrupt(p, &v, |n| {
            n.children[1].buffers[0][0..4].copy_from_slice(&u32::MAX.to_le_bytes())
        })?;
        assert!(e.contains("add up to"), "{e}");
        // Child lengths that disagree.
        let e = corrupt(p, &v, |n| {
            n.children[1].len -= 1;
            let runs = &mut n.children[1].buffers[0];
            runs.truncate(runs.len() - 4);
        })?;
        assert!(e.contains("runs child holds"), "{e}");
        // More runs than values.
        let e = corrupt(p, &v, |n| n.len = 10)?;
        assert!(e.contains("more than its parent's 10"), "{e}");
        // Wrong child types.
        let e = corrupt("rle", &v, |n| n.children[1].ptype = PType::U16)?;
        assert!(e.contains("expected u32"), "{e}");
        Ok(())
    }

    #[test]
    fn corruption_is_an_error_not_a_panic() -> Result<()> {
        let mut r = random(5);
        let v: Vec<i64> = (0..2500)
            .map(|i| (i / (1 + (r() % 9) as i64)) - 300)
            .collect();
        let v = Values::Int(IntVec::I64(v));
        for p in [
            "rle",
            "rle(values: bitpack, runs: bitpack)",
            "rle(values: plain, runs: plain)",
        ] {
            check_corruption(p, &encode(&plan(p), &v)?, 5)?;
        }
        Ok(())
    }

    fn runs_of<T: Clone>(v: Vec<(T, usize)>) -> Vec<T> {
        v.into_iter()
            .flat_map(|(x, n)| std::iter::repeat_n(x, n))
            .collect()
    }

    proptest! {
        #[test]
        fn round_trip_i64(v in prop::collection::vec((any::<i64>(), 1usize..40), 0..200),
                          p in prop::sample::select(vec![
                              "rle", "rle(values: bitpack, runs: bitpack)",
                              "rle(values: zigzag | bitpack, runs: plain)",
                              "delta | rle(values: for | bitpack, runs: bitpack)",
                          ])) {
            round_trip(&plan(p), &Values::Int(IntVec::I64(runs_of(v))))
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
        }

        #[test]
        fn round_trip_u16(v in prop::collection::vec((any::<u16>(), 1usize..2000), 0..40),
                          p in prop::sample::select(vec![
                              "rle", "rle(values: bitpack, runs: bitpack)",
                              "rle(values: plain, runs: for | plain)",
                          ])) {
            round_trip(&plan(p), &Values::Int(IntVec::U16(runs_of(v))))
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
        }

        #[test]
        fn round_trip_random_u16(v in prop::collection::vec(any::<u16>(), 0..2000)) {
            round_trip(&plan("rle"), &Values::Int(IntVec::U16(v)))
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
        }
    }
}
