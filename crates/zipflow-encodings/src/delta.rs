//! Delta: store the differences between neighbours, so sorted or slowly changing streams
//! (timestamps, ids, offsets) become small numbers.
//!
//! Differences wrap in the stream's own type, so every input round-trips, whatever its range
//! (`i64::MIN` after `i64::MAX` is a difference of 1). Decoding is a wrapping prefix sum
//! starting at the first value. The default child, `for | bitpack`, is decoded in one fused
//! pass: each 1024-value vector is unpacked with its reference added (FastLanes'
//! `unfor_pack`) into a stack buffer that is hot in L1, and the prefix sum runs straight from
//! it into the output, so the differences are never materialised as a whole.
//!
//! Node: meta = `[base: u64]` (the first value's bits, zero-extended; 0 when empty); child 0 =
//! the differences as the same type: `d[0] = 0`, `d[i] = v[i] - v[i - 1]` (wrapping).

use crate::memo::Split;
use crate::node::{EncodedNode, NodeView};
use crate::{Encoding, Pattern, Scratch, Slot, encode_child, expect_child};
use std::rc::Rc;
use zipflow_core::values::IntVecOf;
use zipflow_core::{Error, Int, PType, Plan, Result, Values, match_ints};

/// `delta`.
pub struct Delta;

/// On-disk id of [`Delta`].
pub const ID: u16 = DESCRIPTOR.id;

/// Header (16 B) plus one child-table entry, padded to 8, plus the 8-byte base.
const NODE_OVERHEAD: usize = 24 + 8;

/// The first value (zero when empty) and the wrapping differences, `d[0] = 0`.
pub fn deltas<T: Int>(values: &[T]) -> (T, Vec<T>) {
    let Some(&first) = values.first() else {
        return (T::ZERO, Vec::new());
    };
    let mut out = Vec::with_capacity(values.len());
    out.push(T::ZERO);
    out.extend(values.windows(2).map(|w| w[1].wrapping_sub(w[0])));
    (first, out)
}

/// Replaces each difference by the running wrapping sum starting at `base`, in place.
#[inline]
pub fn prefix_sum<T: Int>(base: T, values: &mut [T]) {
    let mut acc = base;
    for v in values {
        acc = acc.wrapping_add(*v);
        *v = acc;
    }
}

/// A `delta` node, parsed and checked once: its base and its differences child.
#[derive(Debug, Clone, Copy)]
pub struct View<'n, 'a> {
    /// The first value's bits, zero-extended (0 when empty).
    pub base: u64,
    /// The differences: the stream's type, the node's length.
    pub differences: &'n NodeView<'a>,
}

impl<'n, 'a> View<'n, 'a> {
    /// Checks `node`'s shape, metadata and child.
    pub fn parse(node: &'n NodeView<'a>) -> Result<View<'n, 'a>> {
        node.expect_shape("delta", 0, 1)?;
        let mut meta = node.meta_reader();
        let base = meta.u64("base")?;
        meta.finish("delta")?;
        expect_child(node, 0, "differences", node.ptype, Some(node.len))?;
        Ok(View {
            base,
            differences: &node.children[0],
        })
    }
}

impl Encoding for Delta {
    fn descriptor(&self) -> &'static crate::Descriptor {
        &DESCRIPTOR
    }
    fn calibration(&self) -> Vec<crate::Calibration> {
        vec![crate::Calibration {
            stream: calibration_sorted(),
            plan: "delta | plain",
            minus: &[(crate::selection::RAW, 1.0)],
        }]
    }
    fn accepts(&self, ptype: PType) -> bool {
        ptype.is_int()
    }

    fn encode(&self, plan: &Plan, input: &Values) -> Result<EncodedNode> {
        let Values::Int(v) = input else {
            return Err(Error::plan(plan, "delta needs integers"));
        };
        let mut node = EncodedNode::new(ID, v.ptype(), v.len())?;
        let (base, child) = match_ints!(v, T, x => {
            let (first, d) = deltas(x);
            (first.to_u64(), Values::Int(T::wrap(d)))
        });
        node.meta = base.to_le_bytes().to_vec();
        node.children.push(encode_child(plan, self, "", &child)?);
        Ok(node)
    }

    fn decode(&self, node: &NodeView<'_>, out: &mut Values, scratch: &mut Scratch) -> Result<()> {
        let View {
            base,
            differences: child,
        } = View::parse(node)?;
        let Values::Int(o) = out else {
            return Err(Error::corrupt("delta node for non-integer values"));
        };
        if crate::runs::streams(child) {
            // The differences arrive a vector or two at a time, hot in L1, and only the sums
            // are written out.
            return match_ints!(o, T, o => {
                o.clear();
                o.reserve(node.len);
                let mut acc = T::from_u64_wrapping(base);
                crate::runs::for_each_run::<T>(child, scratch, |run| {
                    if o.len() + run.len() > node.len {
                        return Err(Error::corrupt("more delta differences than values"));
                    }
                    // Summed in place first: a load and a store to one L1 line per value.
                    for d in run.iter_mut() {
                        acc = acc.wrapping_add(*d);
                        *d = acc;
                    }
                    o.extend_from_slice(run);
                    Ok(())
                })?;
                if o.len() != node.len {
                    return Err(Error::corrupt("fewer delta differences than values"));
                }
                Ok(())
            });
        }
        // Any other child decodes straight into `out` (it has the output's type and length,
        // checked above), and the prefix sum then runs in place: no intermediate buffer.
        crate::decode(child, out, scratch)?;
        let Values::Int(o) = out else {
            return Err(Error::corrupt("delta differences are not integers"));
        };
        match_ints!(o, T, o => prefix_sum(T::from_u64_wrapping(base), o));
        Ok(())
    }

    fn split(&self, plan: &Plan, input: &Values) -> Option<Result<Rc<Split>>> {
        // The node adds a fixed overhead to its child.
        crate::memo::split_ints("delta", plan, input, |v| {
            Ok(Split {
                own: NODE_OVERHEAD,
                children: vec![match_ints!(v, T, x => Values::Int(T::wrap(deltas(x).1)))],
            })
        })
    }
}

/// What `delta` is: its id, name, child slots, GPU decoding and part in the search.
pub const DESCRIPTOR: crate::Descriptor = crate::Descriptor {
    id: 5,
    name: "delta",
    slots: &[Slot {
        name: "",
        default: "for | bitpack",
    }],
    leaf_for_numbers: false,
    gpu: crate::GpuDecode::parallel(Pattern::GroupParallel),
    search: crate::Search::numeric(crate::Role::Inner {
        side_streams: false,
    }),
};

/// A sorted stream with small irregular steps.
fn calibration_sorted() -> zipflow_core::Values {
    crate::selection::ints(
        (0..crate::selection::CALIBRATION_LEN as i64)
            .map(|i| 7 * i + (i % 3))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::*;
    use crate::{decode_bytes, encode};
    use proptest::prelude::*;
    use zipflow_core::IntVec;

    struct EdgeCases;

    impl IntCases for EdgeCases {
        fn cases<T: Int>() -> Vec<Vec<T>> {
            let mut r = random(7);
            let mut cases = edge_lengths(&mut r, T::MAX);
            cases.extend([
                random_ints(&mut r, 5000),
                vec![T::from_u64_wrapping(42); 3000],
                [T::MIN, T::MAX, T::ZERO, T::MAX, T::MIN, T::MIN].repeat(400),
                (0..4100).map(|i| T::from_u64_wrapping(i / 500)).collect(),
            ]);
            let mut sorted = random_ints(&mut r, 2049);
            sorted.sort_unstable();
            cases.push(sorted);
            cases.push(
                (0..3000u64)
                    .map(|i| T::from_u64_wrapping(i * 7 + 3))
                    .collect(),
            );
            cases
        }
    }

    #[test]
    fn round_trips_edge_cases() -> Result<()> {
        round_trip_every_int_type::<EdgeCases>(&[
            "delta",
            "delta | bitpack",
            "delta | zigzag | bitpack",
            "delta | plain",
        ])
    }

    #[test]
    fn mixes_of_extremes() -> Result<()> {
        let v = vec![i64::MIN, i64::MAX, 0, -1, i64::MIN, 1, i64::MAX];
        round_trip(&plan("delta"), &Values::Int(IntVec::I64(v)))?;
        let v = vec![u64::MAX, 0, u64::MAX, 1, u64::MAX - 1];
        round_trip(&plan("delta"), &Values::Int(IntVec::U64(v)))?;
        Ok(())
    }

    #[test]
    fn sorted_input_packs_small() -> Result<()> {
        let v: Vec<i64> = (0..65536)
            .map(|i| 1_700_000_000_000 + i * 1000 + i % 7)
            .collect();
        let node = encode(&plan("delta"), &Values::Int(IntVec::I64(v)))?;
        // Differences lie in 0..=1006: 10 bits each.
        assert!(node.size() < 65536 * 10 / 8 + 256, "{}", node.size());
        Ok(())
    }

    #[test]
    fn describe_fills_in_defaults() -> Result<()> {
        let v: Vec<u32> = (0..100).map(|i| i * 3).collect();
        let bytes = round_trip(&plan("delta"), &Values::Int(IntVec::U32(v)))?;
        // Differences 0 and 3: `for` subtracts 0, leaving 2 bits.
        assert_eq!(described(&bytes)?, "delta | for | bitpack(2)");
        Ok(())
    }

    #[test]
    fn rejects_non_integers() {
        let e = encode(&plan("delta"), &Values::F64(vec![1.0]));
        assert!(matches!(e, Err(Error::Plan { .. })));
    }

    #[test]
    fn corruption_is_an_error_not_a_panic() -> Result<()> {
        let mut r = random(3);
        let v: Vec<i64> = (0..1500).map(|i| i * 5 + (r() % 9) as i64).collect();
        let v = Values::Int(IntVec::I64(v));
        for p in ["delta", "delta | zigzag | bitpack", "delta | plain"] {
            check_corruption(p, &encode(&plan(p), &v)?, 7)?;
        }
        Ok(())
    }

    #[test]
    fn bad_for_child_is_an_error() -> Result<()> {
        let v = Values::Int(IntVec::U16((0..2000).collect()));
        let mut node = encode(&plan("delta"), &v)?;
        node.children[0].meta.push(0);
        assert!(decode_bytes(&node.to_bytes()?).is_err());
        let mut node = encode(&plan("delta"), &v)?;
        node.children[0].children[0].len -= 1;
        assert!(decode_bytes(&node.to_bytes()?).is_err());
        let mut node = encode(&plan("delta"), &v)?;
        node.children[0].children[0].ptype = PType::I16;
        assert!(decode_bytes(&node.to_bytes()?).is_err());
        Ok(())
    }

    proptest! {
        #[test]
        fn round_trip_i64(v in prop::collection::vec(any::<i64>(), 0..3000),
                          p in prop::sample::select(vec![
                              "delta", "delta | zigzag | bitpack", "delta | bitpack",
                              "delta | for | plain",
                          ])) {
            round_trip(&plan(p), &Values::Int(IntVec::I64(v)))
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
        }

        #[test]
        fn round_trip_u16(v in prop::collection::vec(any::<u16>(), 0..3000),
                          p in prop::sample::select(vec![
                              "delta", "delta | zigzag | bitpack", "delta | plain",
                          ])) {
            round_trip(&plan(p), &Values::Int(IntVec::U16(v)))
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
        }

        #[test]
        fn round_trip_runs(v in prop::collection::vec((any::<i64>(), 1usize..300), 0..40)) {
            let v: Vec<i64> = v.into_iter().flat_map(|(x, n)| std::iter::repeat_n(x, n)).collect();
            round_trip(&plan("delta"), &Values::Int(IntVec::I64(v)))
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
        }
    }
}
