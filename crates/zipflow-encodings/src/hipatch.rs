//! Patched exceptions that keep their low bits in place (`hipatch`): only an outlier's high
//! bits and its position are stored aside, and both as encoded streams.
//!
//! [`patch`](crate::patch) replaces an outlier by 0 and stores its position and whole value
//! raw: 32 + `T::BITS` bits each, which pays off only for rare outliers. Where a few percent of
//! a stream spill one or two bits past the rest (prices, sizes, products of two ranges), the
//! exceptions must cost far less. Here the pipe child keeps the low `W` bits of every value,
//! outliers included; child `gaps` holds the gaps between the outliers' positions (`u32`, a
//! few bits each where outliers are spread evenly, and a stream whose widths a sample
//! predicts, unlike positions, which grow with the stream) and child `high` their bits above
//! `W` (`v >> W` as unsigned, typically 1 or 2 bits). With 3 % of values one bit wide of the
//! rest, an exception costs about 8 bits instead of 96.
//!
//! Decoding decodes the three children, sums the gaps into positions, then ORs each
//! outlier's high bits into place. [`Pattern::GroupParallel`], like `patch`.
//!
//! Node: meta = `[W: u8, exception_count: u32]`; no buffers; child 0 = the low `W` bits of
//! every value (same type and length); child 1 (`gaps`) = one `u32` per exception, the number
//! of values between it and the previous exception (or the stream's start); child 2 (`high`)
//! = the exceptions' values shifted right by `W` (same type).

use crate::memo::Split;
use crate::node::{EncodedNode, NodeView};
use crate::patch::read_meta;
use crate::{Encoding, Pattern, Scratch, Slot, encode_child, expect_child};
use std::rc::Rc;
use zipflow_core::values::IntVecOf;
use zipflow_core::{Error, Int, IntVec, PType, Plan, Result, Values, match_ints};

/// `hipatch` / `hipatch(W)`.
pub struct HiPatch;

/// On-disk id of [`HiPatch`].
pub const ID: u16 = 18;

/// Slot of the gaps between exception positions.
pub const GAPS: &str = "gaps";
/// Slot of the exceptions' high bits.
pub const HIGH: &str = "high";

/// The width that minimises the estimated bits of `values`: `len * W` for the low bits, plus
/// per exception its high bits (`max_width - W`) and a gap of about `log2` of the mean gap
/// plus 2 bits (what `bitpack` makes of geometric gaps). Ties go to the wider `W`: fewer
/// exceptions decode faster.
pub fn best_width<T: Int>(values: &[T]) -> u32 {
    let mut histogram = [0u64; 65];
    for v in values {
        histogram[v.used_bits() as usize] += 1;
    }
    let len = values.len() as u64;
    let top = (0..=T::BITS)
        .rev()
        .find(|&b| histogram[b as usize] > 0)
        .unwrap_or(0);
    let mut exceptions = 0u64;
    let mut best = (u64::MAX, top);
    for w in (0..=top).rev() {
        let position_bits = len
            .checked_div(exceptions)
            .map_or(0, |gap| u64::from(64 - gap.leading_zeros()) + 2);
        let cost = len * u64::from(w) + exceptions * (position_bits + u64::from(top - w));
        if cost < best.0 {
            best = (cost, w);
        }
        exceptions += histogram[w as usize];
    }
    best.1
}

/// Splits `values` at width `width` (below `T::BITS`, or no value is an exception): every
/// value's low bits, and the exceptions' gaps and high bits.
pub fn split<T: Int>(values: &[T], width: u32) -> (Vec<T>, Vec<u32>, Vec<T>) {
    let mut gaps = Vec::new();
    let mut high = Vec::new();
    let mut next = 0u32;
    let low = values
        .iter()
        .zip(0u32..)
        .map(|(&v, i)| {
            if v.used_bits() > width {
                let u = v.to_u64();
                gaps.push(i - next);
                next = i + 1;
                high.push(T::from_u64_wrapping(u >> width));
                T::from_u64_wrapping(u & ((1u64 << width) - 1))
            } else {
                v
            }
        })
        .collect();
    (low, gaps, high)
}

impl Encoding for HiPatch {
    fn id(&self) -> u16 {
        ID
    }
    fn name(&self) -> &'static str {
        "hipatch"
    }
    fn pattern(&self) -> Pattern {
        Pattern::GroupParallel
    }
    fn slots(&self) -> &'static [Slot] {
        &[
            Slot {
                name: "",
                default: "bitpack",
            },
            Slot {
                name: GAPS,
                default: "bitpack",
            },
            Slot {
                name: HIGH,
                default: "for | bitpack",
            },
        ]
    }
    fn max_params(&self) -> usize {
        1
    }
    fn accepts(&self, ptype: PType) -> bool {
        ptype.is_int()
    }

    fn encode(&self, plan: &Plan, input: &Values) -> Result<EncodedNode> {
        let (mut node, [low, gaps, high]) = shell(plan, input)?;
        node.children.push(encode_child(plan, self, "", &low)?);
        node.children.push(encode_child(plan, self, GAPS, &gaps)?);
        node.children.push(encode_child(plan, self, HIGH, &high)?);
        Ok(node)
    }

    fn split(&self, plan: &Plan, input: &Values) -> Option<Result<Rc<Split>>> {
        Some(crate::memo::split("hipatch", plan, input, || {
            let (node, children) = shell(plan, input)?;
            Ok(Split {
                own: node.size_with_children(3),
                children: children.into(),
            })
        }))
    }

    fn decode(&self, node: &NodeView<'_>, out: &mut Values, scratch: &mut Scratch) -> Result<()> {
        node.expect_shape("hipatch", 0, 3)?;
        let (width, count) = read_meta(node, "hipatch", "bit width")?;
        let width = u32::from(width);
        let bits = node.ptype.byte_width() as u32 * 8;
        if width > bits || (width == bits && count > 0) {
            return Err(Error::corrupt(format!(
                "hipatch width {width} leaves no high bits in the {bits}-bit value type"
            )));
        }
        expect_child(node, 0, "low bits", node.ptype, Some(node.len))?;
        expect_child(node, 1, "exception gaps", PType::U32, Some(count))?;
        expect_child(node, 2, "exception high bits", node.ptype, Some(count))?;
        crate::decode(&node.children[0], out, scratch)?;
        let gaps = scratch.decode(&node.children[1])?;
        let high = match scratch.decode(&node.children[2]) {
            Ok(h) => h,
            Err(e) => {
                scratch.give(gaps);
                return Err(e);
            }
        };
        let result = apply(width, &gaps, &high, out);
        scratch.give(gaps);
        scratch.give(high);
        result
    }

    fn params(&self, node: &NodeView<'_>) -> Vec<i64> {
        node.meta
            .first()
            .map(|&w| vec![i64::from(w)])
            .unwrap_or_default()
    }
}

/// ORs the high bits of each exception, placed by `gaps`, into the decoded low bits `out`.
fn apply(width: u32, gaps: &Values, high: &Values, out: &mut Values) -> Result<()> {
    let (Values::Int(IntVec::U32(gaps)), Values::Int(high), Values::Int(o)) = (gaps, high, out)
    else {
        return Err(Error::corrupt("hipatch children of the wrong types"));
    };
    match_ints!(o, T, o => {
        let Some(high) = T::slice(high) else {
            return Err(Error::corrupt("hipatch high bits of the wrong type"));
        };
        let (len, mut next) = (o.len(), 0usize);
        for (k, (&g, &h)) in gaps.iter().zip(high).enumerate() {
            let p = next + g as usize;
            // `width` is below the type's width whenever there are exceptions.
            let Some(v) = o.get_mut(p) else {
                return Err(Error::corrupt(format!(
                    "hipatch exception {k} is at position {p}, past the end of {len} values"
                )));
            };
            *v = T::from_u64_wrapping(v.to_u64() | (h.to_u64() << width));
            next = p + 1;
        }
    });
    Ok(())
}

/// The node without its children, and the three streams they encode.
fn shell(plan: &Plan, input: &Values) -> Result<(EncodedNode, [Values; 3])> {
    let Values::Int(v) = input else {
        return Err(Error::plan(plan, "hipatch needs integers"));
    };
    // Built first: it rejects streams whose positions would not fit in a u32.
    let mut node = EncodedNode::new(ID, v.ptype(), v.len())?;
    let (width, children) = match_ints!(v, T, x => {
        let width = resolve_width::<T>(plan, x)?;
        let (low, gaps, high) = if width >= T::BITS {
            (x.clone(), Vec::new(), Vec::new())
        } else {
            split(x, width)
        };
        (width, [
            Values::Int(T::wrap(low)),
            Values::Int(IntVec::U32(gaps)),
            Values::Int(T::wrap(high)),
        ])
    });
    let count = u32::try_from(children[1].len())
        .map_err(|_| Error::unsupported("more than 2^32 - 1 exceptions"))?;
    node.meta = vec![width as u8];
    node.meta.extend_from_slice(&count.to_le_bytes());
    Ok((node, children))
}

fn resolve_width<T: Int>(plan: &Plan, values: &[T]) -> Result<u32> {
    match plan.params.first() {
        None => Ok(best_width(values)),
        Some(&w) if w < 0 || w > i64::from(T::BITS) => Err(Error::plan(
            plan,
            format!(
                "bit width {w} is outside 0..={} for {} values",
                T::BITS,
                T::PTYPE
            ),
        )),
        Some(&w) => Ok(w as u32),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode;
    use crate::testing::*;

    /// The `hipatch` node of a serialised tree: the root or the first one down the pipe.
    fn exceptions(bytes: &[u8]) -> Result<u32> {
        fn find<'a>(node: &'a NodeView<'a>) -> Option<&'a NodeView<'a>> {
            if node.id == ID {
                Some(node)
            } else {
                node.children.first().and_then(find)
            }
        }
        let root = NodeView::parse(bytes)?;
        let node = find(&root).ok_or_else(|| Error::invalid("no hipatch node"))?;
        let b = node
            .meta
            .get(1..5)
            .ok_or_else(|| Error::invalid("short meta"))?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// `i % 8` with `outlier` at the first, middle and last positions.
    fn with_outliers<T: Int>(n: usize, outlier: T) -> Vec<T> {
        let mut v: Vec<T> = (0..n as u64).map(|i| T::from_u64_wrapping(i % 8)).collect();
        for p in [0, n / 2, n.saturating_sub(1)] {
            if let Some(x) = v.get_mut(p) {
                *x = outlier;
            }
        }
        v
    }

    struct EdgeLengths;

    impl IntCheck for EdgeLengths {
        fn check<T: IntVecOf>(&self) -> Result<()> {
            let bits = T::BITS;
            for n in [0, 1, 2, 1023, 1024, 1025, 3000] {
                let values = Values::Int(T::wrap(with_outliers(n, T::MAX)));
                for plan in [
                    "hipatch",
                    "hipatch | bitpack",
                    "hipatch(3) | bitpack",
                    "hipatch(0) | bitpack",
                    &format!("hipatch({bits})"),
                    "for | hipatch | bitpack",
                    "hipatch(3, gaps: plain, high: plain) | for | bitpack",
                    "hipatch(2, gaps: for | bitpack, high: constant) | bitpack",
                    "hipatch(gaps: rle, high: zigzag | bitpack) | bitpack",
                ] {
                    // `constant` high bits only fit when every outlier is the same value.
                    match round_trip(&crate::testing::plan(plan), &values) {
                        Ok(_) => {}
                        Err(Error::Plan { .. }) if plan.contains("constant") => {}
                        Err(e) => return Err(e),
                    }
                }
                let expected = [0, n / 2, n.saturating_sub(1)]
                    .iter()
                    .filter(|&&p| p < n)
                    .collect::<std::collections::BTreeSet<_>>()
                    .len() as u32;
                let bytes = round_trip_bits("hipatch(3) | bitpack", &values)?;
                assert_eq!(exceptions(&bytes)?, expected, "{} n={n}", T::PTYPE);
                let bytes = round_trip_bits(&format!("hipatch({bits}) | bitpack"), &values)?;
                assert_eq!(exceptions(&bytes)?, 0);
                // Every nonzero value is an exception at width 0.
                let all = Values::Int(T::wrap(vec![T::MAX; n]));
                let bytes = round_trip_bits("hipatch(0) | bitpack", &all)?;
                assert_eq!(exceptions(&bytes)?, n as u32);
                // Random values over the whole range at a middle width.
                let mut r = random(n as u64 + u64::from(bits));
                for case in edge_lengths::<T>(&mut r, T::MIN) {
                    let values = Values::Int(T::wrap(case));
                    round_trip(&crate::testing::plan("hipatch"), &values)?;
                    round_trip(
                        &crate::testing::plan(&format!("hipatch({})", bits / 2)),
                        &values,
                    )?;
                }
            }
            Ok(())
        }
    }

    #[test]
    fn round_trips_every_int_type() -> Result<()> {
        for_every_int_type(&EdgeLengths)
    }

    #[test]
    fn one_bit_spill_costs_a_few_bits_per_exception() -> Result<()> {
        // 3 % of the values one bit past the rest: 23 bits plus a few per exception, where
        // bit-packing needs 24 and `patch` 96 per exception.
        let mut r = random(7);
        let v: Vec<i64> = (0..65536)
            .map(|_| {
                let x = (r() % (1 << 23)) as i64;
                if r() % 100 < 3 { x | (1 << 23) } else { x }
            })
            .collect();
        let values = Values::Int(IntVec::I64(v));
        let hi = round_trip_bits("hipatch | bitpack", &values)?;
        let packed = round_trip_bits("bitpack", &values)?;
        let patched = round_trip_bits("patch | bitpack", &values)?;
        assert!(
            described(&hi)?.starts_with("hipatch(23"),
            "{}",
            described(&hi)?
        );
        let bits = hi.len() as f64 * 8.0 / 65536.0;
        assert!(bits < 23.4, "{bits} bits per value");
        assert!(hi.len() < packed.len() && hi.len() < patched.len());
        Ok(())
    }

    #[test]
    fn best_width_weighs_exceptions_against_width() {
        assert_eq!(best_width::<u32>(&[]), 0);
        assert_eq!(best_width(&[0u8; 100]), 0);
        // All values the same width: nothing to patch.
        assert_eq!(best_width(&[5u16; 100]), 3);
        // Half the values one bit wider: exceptions would cost more than that bit.
        let v: Vec<u64> = (0..1000).map(|i| if i % 2 == 0 { 8 } else { 1 }).collect();
        assert_eq!(best_width(&v), 4);
        // One wide outlier among 1000 small values.
        let mut v: Vec<u64> = (0..1000).map(|i| i % 8).collect();
        v.push(u64::MAX);
        assert_eq!(best_width(&v), 3);
    }

    #[test]
    fn corrupt_nodes_are_errors() -> Result<()> {
        let values = Values::Int(IntVec::U32(with_outliers(3000, 1 << 20)));
        let p = "hipatch(3, gaps: plain, high: plain) | plain";
        let good = encode(&plan(p), &values)?;
        check_corruption(p, &good, 7)?;
        // A width past the type.
        let e = corrupted(&good, |n| n.meta[0] = 33)?;
        assert!(e.contains("leaves no high bits"), "{e}");
        // The full width with exceptions.
        let e = corrupted(&good, |n| n.meta[0] = 32)?;
        assert!(e.contains("leaves no high bits"), "{e}");
        // More exceptions than the children hold.
        let e = corrupted(&good, |n| n.meta[1] = 4)?;
        assert!(e.contains("expected 4"), "{e}");
        // Gaps that run past the end: the last exception one past it, and a gap of 2^32 - 1.
        let e = corrupted(&good, |n| {
            n.children[1].buffers[0] = u32_bytes(&[0, 1499, 1499]);
        })?;
        assert!(e.contains("at position 3000, past the end of 3000"), "{e}");
        let e = corrupted(&good, |n| {
            n.children[1].buffers[0] = u32_bytes(&[0, u32::MAX, 0]);
        })?;
        assert!(e.contains("past the end"), "{e}");
        Ok(())
    }

    #[test]
    fn plan_errors() -> Result<()> {
        let v = Values::Int(IntVec::I32(vec![1, 2, 3]));
        for p in [
            "hipatch(33)",
            "hipatch(-1)",
            "hipatch(1, 2)",
            "hipatch(values: plain)",
        ] {
            assert!(encode(&plan(p), &v).is_err(), "{p}");
        }
        let f = Values::F64(vec![1.0]);
        assert!(encode(&plan("hipatch"), &f).is_err());
        Ok(())
    }
}
