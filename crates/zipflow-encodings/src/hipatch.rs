//! Patched exceptions that keep their low bits in place (`hipatch`): only an outlier's high
//! bits and its place are stored aside, and as encoded streams.
//!
//! [`patch`](crate::patch) replaces an outlier by 0 and stores its position and whole value
//! raw: 32 + `T::BITS` bits each, which pays off only for rare outliers. Where a few percent of
//! a stream spill one or two bits past the rest (prices, sizes, products of two ranges), the
//! exceptions must cost far less. Here the pipe child keeps the low `W` bits of every value,
//! outliers included, and three small streams place the outliers and hold their high bits:
//! `counts`, the number of outliers in each 1024-value vector; `offsets`, each outlier's place
//! in its vector (10 bits); `high`, its bits above `W` (`v >> W` as unsigned, typically 1 or
//! 2 bits). With 3 % of values one bit wide of the rest, an exception costs about 11 bits
//! instead of 96. Each vector finds its outliers from the counts before it alone (64 per
//! chunk), so a GPU block decodes its vectors without reading the others'.
//!
//! Decoding decodes the children, then ORs each outlier's high bits into place.
//! [`Pattern::GroupParallel`], like `patch`.
//!
//! Node: meta = `[W: u8, exception_count: u32]`; no buffers; child 0 = the low `W` bits of
//! every value (same type and length); child 1 (`counts`) = `u16`, one per 1024-value vector
//! (the last one possibly partial), summing to the exception count; child 2 (`offsets`) =
//! `u16`, one per exception, its position within its vector, increasing within a vector;
//! child 3 (`high`) = the exceptions' values shifted right by `W` (same type).

use crate::memo::Split;
use crate::node::{EncodedNode, NodeView};
use crate::patch::{read_meta, resolve_width};
use crate::{Encoding, Pattern, Scratch, Slot, encode_child, expect_child};
use std::rc::Rc;
use zipflow_core::VECTOR_LEN;
use zipflow_core::values::IntVecOf;
use zipflow_core::{Error, Int, IntVec, PType, Plan, Result, Values, match_ints};

/// `hipatch` / `hipatch(W)`.
pub struct HiPatch;

/// On-disk id of [`HiPatch`].
pub const ID: u16 = DESCRIPTOR.id;

/// Slot of the exception counts per vector.
pub const COUNTS: &str = "counts";
/// Slot of the exceptions' offsets within their vectors.
pub const OFFSETS: &str = "offsets";
/// Slot of the exceptions' high bits.
pub const HIGH: &str = "high";

/// The width that minimises the estimated bits of `values`: `len * W` for the low bits, plus
/// per exception its high bits (`max_width - W`) and its 10-bit offset. Ties go to the wider
/// `W`: fewer exceptions decode faster.
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
        let cost = len * u64::from(w) + exceptions * (OFFSET_BITS + u64::from(top - w));
        if cost < best.0 {
            best = (cost, w);
        }
        exceptions += histogram[w as usize];
    }
    best.1
}

/// Bits of an exception's offset within its vector.
const OFFSET_BITS: u64 = 10;

/// What [`split`] makes of a stream.
pub struct Parts<T> {
    /// Every value's low bits.
    pub low: Vec<T>,
    /// Exceptions per vector.
    pub counts: Vec<u16>,
    /// Each exception's offset within its vector.
    pub offsets: Vec<u16>,
    /// Each exception's bits above the width.
    pub high: Vec<T>,
}

/// Splits `values` at width `width` (below `T::BITS`, or no value is an exception).
pub fn split<T: Int>(values: &[T], width: u32) -> Parts<T> {
    let mut counts = vec![0u16; values.len().div_ceil(VECTOR_LEN)];
    let mut offsets = Vec::new();
    let mut high = Vec::new();
    let low = values
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            if v.used_bits() > width {
                let u = v.to_u64();
                counts[i / VECTOR_LEN] += 1;
                offsets.push((i % VECTOR_LEN) as u16);
                high.push(T::from_u64_wrapping(u >> width));
                T::from_u64_wrapping(u & ((1u64 << width) - 1))
            } else {
                v
            }
        })
        .collect();
    Parts {
        low,
        counts,
        offsets,
        high,
    }
}

impl Encoding for HiPatch {
    fn descriptor(&self) -> &'static crate::Descriptor {
        &DESCRIPTOR
    }
    fn child_shape(&self, slot: &str, shape: crate::Shape) -> crate::Shape {
        match slot {
            // Exceptions: a few percent of values where `hipatch` pays off; 1 in 32 assumed.
            OFFSETS | HIGH => shape.per(1.0 / 32.0).numbers(),
            COUNTS => shape.per(1.0 / zipflow_core::VECTOR_LEN as f64).numbers(),
            _ => shape,
        }
    }
    fn calibration(&self) -> Vec<crate::Calibration> {
        vec![crate::Calibration {
            stream: crate::selection::outlier_ints(),
            plan: "hipatch(counts: plain, offsets: plain, high: plain) | plain",
            minus: &[(crate::selection::RAW, 1.02)],
        }]
    }
    fn max_params(&self) -> usize {
        1
    }
    fn accepts(&self, ptype: PType) -> bool {
        ptype.is_int()
    }

    fn encode(&self, plan: &Plan, input: &Values) -> Result<EncodedNode> {
        let (mut node, [low, counts, offsets, high]) = shell(plan, input)?;
        node.children.push(encode_child(plan, self, "", &low)?);
        node.children
            .push(encode_child(plan, self, COUNTS, &counts)?);
        node.children
            .push(encode_child(plan, self, OFFSETS, &offsets)?);
        node.children.push(encode_child(plan, self, HIGH, &high)?);
        Ok(node)
    }

    fn split(&self, plan: &Plan, input: &Values) -> Option<Result<Rc<Split>>> {
        Some(crate::memo::split("hipatch", plan, input, || {
            let (node, children) = shell(plan, input)?;
            Ok(Split {
                own: node.size_with_children(4),
                children: children.into(),
            })
        }))
    }

    fn decode(&self, node: &NodeView<'_>, out: &mut Values, scratch: &mut Scratch) -> Result<()> {
        View::parse(node)?;
        crate::decode(&node.children[0], out, scratch)?;
        let e = exceptions(node, scratch)?;
        match out {
            Values::Int(o) => match_ints!(o, T, o => apply(&e, T::ZERO, o)),
            _ => Err(Error::corrupt("hipatch node for non-integer values")),
        }
    }

    fn params(&self, node: &NodeView<'_>) -> Vec<i64> {
        node.meta
            .first()
            .map(|&w| vec![i64::from(w)])
            .unwrap_or_default()
    }
}

/// A checked `hipatch` node: its metadata and children's types and lengths.
#[derive(Debug, Clone, Copy)]
pub struct View {
    /// The low bits' width; the high bits lie above it.
    pub width: u32,
}

impl View {
    /// Checks a `hipatch` node's metadata and children's types and lengths.
    pub fn parse(node: &NodeView<'_>) -> Result<View> {
        node.expect_shape("hipatch", 0, 4)?;
        let (width, count) = read_meta(node, "hipatch", "bit width")?;
        let width = u32::from(width);
        let bits = node.ptype.byte_width() as u32 * 8;
        if width > bits || (width == bits && count > 0) {
            return Err(Error::corrupt(format!(
                "hipatch width {width} leaves no high bits in the {bits}-bit value type"
            )));
        }
        expect_child(node, 0, "low bits", node.ptype, Some(node.len))?;
        let vectors = node.len.div_ceil(VECTOR_LEN);
        expect_child(node, 1, "exception counts", PType::U16, Some(vectors))?;
        expect_child(node, 2, "exception offsets", PType::U16, Some(count))?;
        expect_child(node, 3, "exception high bits", node.ptype, Some(count))?;
        Ok(View { width })
    }
}

/// Decodes a checked node's counts, offsets and high bits into pooled streams.
fn decode_sides(node: &NodeView<'_>, scratch: &mut Scratch) -> Result<Vec<Values>> {
    let mut sides = Vec::with_capacity(3);
    for child in &node.children[1..] {
        match scratch.decode(child) {
            Ok(v) => sides.push(v),
            Err(e) => {
                sides.into_iter().for_each(|v| scratch.give(v));
                return Err(e);
            }
        }
    }
    Ok(sides)
}

/// A `hipatch` node's exceptions, for readers that keep the low bits packed.
#[derive(Debug, Default)]
pub struct Exceptions {
    /// Where each 1024-value vector's exceptions start in `offsets` and `high`; one more
    /// entry than vectors, the last the total.
    pub starts: Vec<u32>,
    /// Each exception's position within its vector, increasing within a vector.
    pub offsets: Vec<u16>,
    /// Each exception's high bits shifted into place (`high << W`, the stream type's bits
    /// zero-extended).
    pub high: Vec<u64>,
}

/// The exceptions of `node` (a `hipatch` node), checked: every one inside its vector, after
/// the one before it and before the stream's end, the counts adding up.
pub fn exceptions(node: &NodeView<'_>, scratch: &mut Scratch) -> Result<Exceptions> {
    let width = View::parse(node)?.width;
    let sides = decode_sides(node, scratch)?;
    let result = (|| {
        let [
            Values::Int(IntVec::U16(counts)),
            Values::Int(IntVec::U16(offsets)),
            Values::Int(high),
        ] = &sides[..]
        else {
            return Err(Error::corrupt("hipatch children of the wrong types"));
        };
        let mut starts = Vec::with_capacity(counts.len() + 1);
        let mut total = 0usize;
        starts.push(0);
        for &c in counts {
            total += usize::from(c);
            starts.push(total as u32);
        }
        if total != offsets.len() || total != high.len() {
            return Err(Error::corrupt(format!(
                "hipatch counts add up to {total} exceptions, the node holds {}",
                offsets.len()
            )));
        }
        for (vector, w) in starts.windows(2).enumerate() {
            let mut next = 0u16;
            for &off in &offsets[w[0] as usize..w[1] as usize] {
                if off < next {
                    return Err(Error::corrupt(format!(
                        "hipatch exception offsets of vector {vector} are not increasing \
                         ({off} after {})",
                        next - 1
                    )));
                }
                if usize::from(off) >= VECTOR_LEN
                    || vector * VECTOR_LEN + usize::from(off) >= node.len
                {
                    return Err(Error::corrupt(format!(
                        "hipatch exception at offset {off} of vector {vector}, outside the \
                         vector or past the end of {} values",
                        node.len
                    )));
                }
                next = off + 1;
            }
        }
        let high = match_ints!(high, T, h => h.iter().map(|x| x.to_u64() << width).collect());
        Ok(Exceptions {
            starts,
            offsets: offsets.clone(),
            high,
        })
    })();
    sides.into_iter().for_each(|v| scratch.give(v));
    result
}

/// Decodes `for | hipatch | ...` in one pass over the output: `low` writes the low bits with
/// `reference` added (fused with unpacking where the low bits are bit-packed), and each
/// exception takes the reference off, gets its high bits, and puts it back.
pub(crate) fn decode_under_reference<U: IntVecOf>(
    node: &NodeView<'_>,
    reference: U,
    out: &mut Vec<U>,
    scratch: &mut Scratch,
    low: impl FnOnce(&NodeView<'_>, &mut Vec<U>, &mut Scratch) -> Result<()>,
) -> Result<()> {
    View::parse(node)?;
    low(&node.children[0], out, scratch)?;
    apply(&exceptions(node, scratch)?, reference, out)
}

/// ORs the high bits of each exception into the decoded low bits in `o`, which hold
/// `reference` added (wrapping). `e` was checked against `o`'s length by [`exceptions`].
fn apply<T: Int>(e: &Exceptions, reference: T, o: &mut [T]) -> Result<()> {
    for (vector, w) in e.starts.windows(2).enumerate() {
        let (start, end) = (w[0] as usize, w[1] as usize);
        let base = vector * VECTOR_LEN;
        for (&off, &h) in e.offsets[start..end].iter().zip(&e.high[start..end]) {
            let Some(v) = o.get_mut(base + usize::from(off)) else {
                return Err(Error::corrupt(
                    "hipatch exception past the decoded low bits",
                ));
            };
            let low = v.wrapping_sub(reference).to_u64();
            *v = T::from_u64_wrapping(low | h).wrapping_add(reference);
        }
    }
    Ok(())
}

/// The node without its children, and the three streams they encode.
fn shell(plan: &Plan, input: &Values) -> Result<(EncodedNode, [Values; 4])> {
    let Values::Int(v) = input else {
        return Err(Error::plan(plan, "hipatch needs integers"));
    };
    // Built first: it rejects streams whose positions would not fit in a u32.
    let mut node = EncodedNode::new(ID, v.ptype(), v.len())?;
    let (width, children) = match_ints!(v, T, x => {
        let width = resolve_width::<T>(plan, x, best_width)?;
        let parts = if width >= T::BITS {
            Parts {
                low: x.clone(),
                counts: vec![0; x.len().div_ceil(VECTOR_LEN)],
                offsets: Vec::new(),
                high: Vec::new(),
            }
        } else {
            split(x, width)
        };
        (width, [
            Values::Int(T::wrap(parts.low)),
            Values::Int(IntVec::U16(parts.counts)),
            Values::Int(IntVec::U16(parts.offsets)),
            Values::Int(T::wrap(parts.high)),
        ])
    });
    let count = u32::try_from(children[2].len())
        .map_err(|_| Error::unsupported("more than 2^32 - 1 exceptions"))?;
    node.meta = vec![width as u8];
    node.meta.extend_from_slice(&count.to_le_bytes());
    Ok((node, children))
}

/// What `hipatch` is: its id, name, child slots, GPU decoding and part in the search.
///
/// The GPU decodes `hipatch` at full speed only at the top of a numeric column's plan or
/// under `for`s there, where it decodes it in tiles of 1024-value vectors. Below other
/// primitives, and in a string's codes or counts, it would be decoded a whole chunk by one
/// thread block.
pub const DESCRIPTOR: crate::Descriptor = crate::Descriptor {
    id: 18,
    name: "hipatch",
    slots: &[
        Slot {
            name: "",
            default: "bitpack",
        },
        // 64 counts per chunk: bit-packing would pad them to a whole vector.
        Slot {
            name: COUNTS,
            default: "plain",
        },
        Slot {
            name: OFFSETS,
            default: "bitpack",
        },
        Slot {
            name: HIGH,
            default: "for | bitpack",
        },
    ],
    leaf_for_numbers: false,
    gpu: crate::GpuDecode {
        full_speed: crate::GpuPlace::Tile,
        ..crate::GpuDecode::parallel(Pattern::GroupParallel)
    },
    search: crate::Search::numeric(crate::Role::Inner { side_streams: true }),
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode;
    use crate::testing::*;

    /// The exception count of the `hipatch` node of a serialised tree: the root or the first
    /// one down the pipe.
    fn exceptions(bytes: &[u8]) -> Result<u32> {
        exception_count(bytes, ID)
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
                    "hipatch(3, counts: plain, offsets: plain, high: plain) | for | bitpack",
                    "hipatch(2, offsets: for | bitpack, high: constant) | bitpack",
                    "hipatch(counts: rle, offsets: delta | zigzag | bitpack, high: zigzag | bitpack) | bitpack",
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
        let p = "hipatch(3, counts: plain, offsets: plain, high: plain) | plain";
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
        // Outliers at 0, 1500 and 2999: vectors 0, 1 and 2 hold one each.
        let u16_bytes = |v: &[u16]| bytemuck::cast_slice::<u16, u8>(v).to_vec();
        let e = corrupted(&good, |n| {
            n.children[1].buffers[0] = u16_bytes(&[1, 2, 1]);
        })?;
        assert!(
            e.contains("add up to 4 exceptions, the node holds 3"),
            "{e}"
        );
        // An offset outside its vector, and one past the end of a partial last vector.
        let e = corrupted(&good, |n| {
            n.children[2].buffers[0] = u16_bytes(&[0, 1024, 951]);
        })?;
        assert!(e.contains("offset 1024 of vector 1"), "{e}");
        let e = corrupted(&good, |n| {
            n.children[2].buffers[0] = u16_bytes(&[0, 476, 952]);
        })?;
        assert!(e.contains("past the end of 3000"), "{e}");
        // Two exceptions of one vector out of order, or at one place.
        let mut two = with_outliers::<u32>(3000, 1 << 20);
        two[7] = 1 << 20;
        let good = encode(&plan(p), &Values::Int(IntVec::U32(two)))?;
        for bad in [[7u16, 0, 476, 951], [7, 7, 476, 951]] {
            let e = corrupted(&good, |n| {
                n.children[2].buffers[0] = u16_bytes(&bad);
            })?;
            assert!(
                e.contains("are not increasing (7 after 7)") || e.contains("(0 after 7)"),
                "{e}"
            );
        }
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
