//! Patched exceptions (PFor): a few wide outliers are stored aside so the rest of the stream
//! packs at a narrow width.
//!
//! Values whose unsigned bit width ([`Int::used_bits`]) exceeds `W` are exceptions: their
//! positions and full values are kept in two buffers, and in the child stream they are replaced
//! by 0, so `for | patch | bitpack` packs at `W` bits instead of the outliers' width. `W` is the
//! plan's parameter (`patch(3)`), or chosen from a histogram of bit widths to minimise
//! `len * W + exceptions * (32 + T::BITS)` bits.
//!
//! Decoding decodes the child, then scatters the exceptions over it. Where a vector's
//! exceptions start in the list depends on how many came before, a variable-size group per
//! vector, hence [`Pattern::GroupParallel`].
//!
//! Node: meta = `[W: u8, exception_count: u32]`; buffer 0 = exception positions (u32, strictly
//! increasing); buffer 1 = exception values (the stream's type, little-endian); child 0 = the
//! stream with exceptions replaced by 0, same type and length.

use crate::memo::Split;
use crate::node::{EncodedNode, NodeView, cast_cow, cast_or_copy};
use crate::{Encoding, Pattern, Scratch, Slot, encode_child, expect_child};
use std::borrow::Cow;
use std::rc::Rc;
use zipflow_core::values::IntVecOf;
use zipflow_core::{Error, Int, PType, Plan, Result, Values, match_ints};

/// `patch` / `patch(W)`.
pub struct Patch;

/// On-disk id of [`Patch`].
pub const ID: u16 = DESCRIPTOR.id;

/// Bits one exception costs besides its value: its u32 position.
const POSITION_BITS: u64 = 32;

/// The width that minimises `len * W + exceptions(W) * (32 + T::BITS)` bits, from one pass
/// over `values`. Ties go to the wider `W`: fewer exceptions decode faster.
pub fn best_width<T: Int>(values: &[T]) -> u32 {
    let mut histogram = [0u64; 65];
    for v in values {
        histogram[v.used_bits() as usize] += 1;
    }
    let len = values.len() as u64;
    let exception_bits = POSITION_BITS + u64::from(T::BITS);
    // Walk W downwards, adding the values that become exceptions as W drops below their width.
    let mut exceptions = 0u64;
    let mut best = (u64::MAX, T::BITS);
    for w in (0..=T::BITS).rev() {
        let cost = len * u64::from(w) + exceptions * exception_bits;
        if cost < best.0 {
            best = (cost, w);
        }
        exceptions += histogram[w as usize];
    }
    best.1
}

/// Splits `values` at width `width`: the exceptions' positions and values, and the stream with
/// exceptions replaced by 0. `values.len()` must fit in a u32 (callers build the node first,
/// which checks it).
pub fn split<T: Int>(values: &[T], width: u32) -> (Vec<u32>, Vec<T>, Vec<T>) {
    let mut positions = Vec::new();
    let mut exceptions = Vec::new();
    let cleaned = values
        .iter()
        .zip(0u32..)
        .map(|(&v, i)| {
            if v.used_bits() > width {
                positions.push(i);
                exceptions.push(v);
                T::ZERO
            } else {
                v
            }
        })
        .collect();
    (positions, exceptions, cleaned)
}

/// Checks that exception `positions` are strictly increasing and below `len`, so each one
/// indexes the decoded stream exactly once.
pub fn validate_positions(positions: &[u32], len: usize) -> Result<()> {
    let mut next = 0usize;
    for (k, &p) in positions.iter().enumerate() {
        let p = p as usize;
        if p < next {
            return Err(Error::corrupt(format!(
                "exception {k} is at position {p}, not after the previous one"
            )));
        }
        if p >= len {
            return Err(Error::corrupt(format!(
                "exception {k} is at position {p}, past the end of {len} values"
            )));
        }
        next = p + 1;
    }
    Ok(())
}

/// Reads `[parameter: u8, exception_count: u32]` metadata, as `patch`, `float2int` and
/// `hipatch` write it.
pub(crate) fn read_meta(node: &NodeView<'_>, name: &str, param: &str) -> Result<(u8, usize)> {
    let mut meta = node.meta_reader();
    let p = meta.u8(param)?;
    let count = meta.u32("exception count")? as usize;
    meta.finish(name)?;
    if count > node.len {
        return Err(Error::corrupt(format!(
            "{name} node claims {count} exceptions among {} values",
            node.len
        )));
    }
    Ok((p, count))
}

/// The exceptions of a `patch` or `float2int` node, parsed and checked once.
#[derive(Debug, Clone)]
pub struct Exceptions<'a> {
    /// Their positions: strictly increasing, each below the node's length.
    pub positions: Cow<'a, [u32]>,
    /// The positions' buffer as stored (u32, little-endian), for readers that ship it whole.
    pub positions_bytes: &'a [u8],
    /// Their values as stored: `positions.len()` little-endian values of the node's value
    /// width (raw bits for `float2int`).
    pub values: &'a [u8],
}

impl<'a> Exceptions<'a> {
    /// Checks the two exception buffers of `node` (a `patch` or `float2int` node with
    /// `[parameter: u8, exception_count: u32]` metadata); returns the parameter too.
    pub(crate) fn parse(
        node: &NodeView<'a>,
        name: &str,
        param: &str,
    ) -> Result<(u8, Exceptions<'a>)> {
        node.expect_shape(name, 2, 1)?;
        let (p, count) = read_meta(node, name, param)?;
        let positions_bytes = node.buffer(0, "exception positions")?;
        let positions = cast_cow::<u32>(positions_bytes, "exception positions")?;
        if positions.len() != count {
            return Err(Error::corrupt(format!(
                "exception position buffer holds {} positions, metadata says {count}",
                positions.len()
            )));
        }
        validate_positions(&positions, node.len)?;
        let values = node.buffer(1, "exception values")?;
        let width = node.ptype.byte_width();
        if !values.len().is_multiple_of(width) {
            return Err(Error::corrupt(format!(
                "exception values buffer of {} bytes is not a multiple of {width}",
                values.len()
            )));
        }
        if values.len() != count * width {
            return Err(Error::corrupt(format!(
                "exception value buffer holds {} bytes, metadata says {count} of {width} bytes",
                values.len()
            )));
        }
        Ok((
            p,
            Exceptions {
                positions,
                positions_bytes,
                values,
            },
        ))
    }

    /// The values as `T`s, `T` as wide as the node's values (copied into `scratch` only if
    /// the buffer is misaligned).
    pub fn values_as<T: bytemuck::Pod>(&self, scratch: &'a mut Vec<T>) -> Result<&'a [T]> {
        let values = cast_or_copy::<T>(self.values, scratch, "exception values")?;
        if values.len() != self.positions.len() {
            return Err(Error::corrupt(format!(
                "exception value buffer holds {} values, metadata says {}",
                values.len(),
                self.positions.len()
            )));
        }
        Ok(values)
    }
}

/// A `patch` node, parsed and checked once.
#[derive(Debug, Clone)]
pub struct View<'n, 'a> {
    /// Bits a value may use before it is an exception.
    pub width: u32,
    /// The exceptions.
    pub exceptions: Exceptions<'a>,
    /// The stream with exceptions replaced by 0: the node's type and length.
    pub patched: &'n NodeView<'a>,
}

impl<'n, 'a> View<'n, 'a> {
    /// Checks `node`'s shape, metadata, buffers and child.
    pub fn parse(node: &'n NodeView<'a>) -> Result<View<'n, 'a>> {
        let (width, exceptions) = Exceptions::parse(node, "patch", "bit width")?;
        let bits = node.ptype.byte_width() * 8;
        if usize::from(width) > bits {
            return Err(Error::corrupt(format!(
                "patch width {width} exceeds the {bits}-bit value type"
            )));
        }
        expect_child(node, 0, "patched", node.ptype, Some(node.len))?;
        Ok(View {
            width: u32::from(width),
            exceptions,
            patched: &node.children[0],
        })
    }
}

impl Encoding for Patch {
    fn descriptor(&self) -> &'static crate::Descriptor {
        &DESCRIPTOR
    }
    fn calibration(&self) -> Vec<crate::Calibration> {
        vec![crate::Calibration {
            stream: crate::selection::outlier_ints(),
            plan: "patch | bitpack",
            minus: &[(crate::selection::FILLER, 1.0)],
        }]
    }
    fn max_params(&self) -> usize {
        1
    }
    fn accepts(&self, ptype: PType) -> bool {
        ptype.is_int()
    }

    fn encode(&self, plan: &Plan, input: &Values) -> Result<EncodedNode> {
        let (mut node, child) = shell(plan, input)?;
        node.children.push(encode_child(plan, self, "", &child)?);
        Ok(node)
    }

    fn split(&self, plan: &Plan, input: &Values) -> Option<Result<Rc<Split>>> {
        Some(crate::memo::split("patch", plan, input, || {
            let (node, child) = shell(plan, input)?;
            Ok(Split {
                own: node.size_with_children(1),
                children: vec![child],
            })
        }))
    }

    fn decode(&self, node: &NodeView<'_>, out: &mut Values, scratch: &mut Scratch) -> Result<()> {
        let view = View::parse(node)?;
        // The child has this node's type and length, so it decodes straight into `out`: no
        // intermediate stream, no copy. `decode` checks it produced `node.len` values.
        crate::decode(view.patched, out, scratch)?;
        let Values::Int(o) = out else {
            return Err(Error::corrupt("patch node for non-integer values"));
        };
        let positions = &view.exceptions.positions;
        match_ints!(o, T, o => {
            let mut value_copy = Vec::new();
            let values = view.exceptions.values_as::<T>(&mut value_copy)?;
            for (&p, &v) in positions.iter().zip(values) {
                // `positions` checked every position against `node.len`, the length of `o`.
                o[p as usize] = v;
            }
        });
        Ok(())
    }

    fn params(&self, node: &NodeView<'_>) -> Vec<i64> {
        node.meta
            .first()
            .map(|&w| vec![i64::from(w)])
            .unwrap_or_default()
    }
}

/// The node without its child, and the patched stream its child encodes.
fn shell(plan: &Plan, input: &Values) -> Result<(EncodedNode, Values)> {
    let Values::Int(v) = input else {
        return Err(Error::plan(plan, "patch needs integers"));
    };
    // Built first: it rejects streams whose positions would not fit in a u32.
    let mut node = EncodedNode::new(ID, v.ptype(), v.len())?;
    let (width, positions, values, child) = match_ints!(v, T, x => {
        let width = resolve_width::<T>(plan, x, best_width)?;
        let (positions, exceptions, cleaned) = split(x, width);
        let values: Vec<u8> = bytemuck::cast_slice(&exceptions).to_vec();
        (width, positions, values, Values::Int(T::wrap(cleaned)))
    });
    let count = u32::try_from(positions.len())
        .map_err(|_| Error::unsupported("more than 2^32 - 1 exceptions"))?;
    node.meta = vec![width as u8];
    node.meta.extend_from_slice(&count.to_le_bytes());
    node.buffers.push(bytemuck::cast_slice(&positions).to_vec());
    node.buffers.push(values);
    Ok((node, child))
}

/// The plan's width parameter, checked against `T`, or `best(values)` when the plan gives
/// none (`patch`, `hipatch`).
pub(crate) fn resolve_width<T: Int>(
    plan: &Plan,
    values: &[T],
    best: fn(&[T]) -> u32,
) -> Result<u32> {
    match plan.params.first() {
        None => Ok(best(values)),
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

/// What `patch` is: its id, name, child slots, GPU decoding and part in the search.
pub const DESCRIPTOR: crate::Descriptor = crate::Descriptor {
    id: 9,
    name: "patch",
    slots: &[Slot {
        name: "",
        default: "bitpack",
    }],
    leaf_for_numbers: false,
    gpu: crate::GpuDecode::parallel(Pattern::GroupParallel),
    search: crate::Search::numeric(crate::Role::Inner {
        side_streams: false,
    }),
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode;
    use crate::testing::*;
    use proptest::prelude::*;
    use zipflow_core::IntVec;

    /// The `patch` node in a serialised tree: the root or the first one down the pipe.
    fn exceptions(bytes: &[u8]) -> Result<u32> {
        exception_count(bytes, ID)
    }

    /// Every plan shape over edge lengths, and the exception counts at 3 bits, the full width
    /// and 0 bits.
    struct EdgeLengths;

    impl IntCheck for EdgeLengths {
        fn check<T: IntVecOf>(&self) -> Result<()> {
            for n in [0, 1, 2, 1023, 1024, 1025, 3000] {
                let values = Values::Int(T::wrap(with_outliers(n, T::MAX)));
                for plan in [
                    "patch | bitpack",
                    "patch(3) | bitpack",
                    "patch(0) | bitpack",
                    "for | patch | bitpack",
                    "patch | for | bitpack",
                    "patch",
                ] {
                    round_trip_bits(plan, &values)?;
                }
                let bits = T::BITS;
                let expected_outliers = [0, n / 2, n.saturating_sub(1)]
                    .iter()
                    .filter(|&&p| p < n)
                    .collect::<std::collections::BTreeSet<_>>()
                    .len() as u32;
                // Outliers at the first and last positions are exceptions; nothing else is.
                let bytes = round_trip_bits("patch(3) | bitpack", &values)?;
                assert_eq!(exceptions(&bytes)?, expected_outliers, "{} n={n}", T::PTYPE);
                // No exceptions at the full width.
                let bytes = round_trip_bits(&format!("patch({bits}) | bitpack"), &values)?;
                assert_eq!(exceptions(&bytes)?, 0);
                // All exceptions: every value but the zeros is wider than 0 bits.
                let nonzero = Values::Int(T::wrap(vec![T::MAX; n]));
                let bytes = round_trip_bits("patch(0) | bitpack", &nonzero)?;
                assert_eq!(exceptions(&bytes)?, n as u32);
                assert_eq!(described(&bytes)?, "patch(0) | bitpack(0)");
            }
            Ok(())
        }
    }

    #[test]
    fn round_trips_every_int_type() -> Result<()> {
        for_every_int_type(&EdgeLengths)
    }

    #[test]
    fn outliers_do_not_widen_the_packing() -> Result<()> {
        let values = Values::Int(IntVec::I64(with_outliers(5000, 1 << 40)));
        let patched = round_trip_bits("for | patch | bitpack", &values)?;
        let plain = round_trip_bits("for | bitpack", &values)?;
        assert_eq!(exceptions(&patched)?, 3);
        assert_eq!(described(&patched)?, "for | patch(3) | bitpack(3)");
        assert!(
            patched.len() * 4 < plain.len(),
            "{} vs {}",
            patched.len(),
            plain.len()
        );
        Ok(())
    }

    #[test]
    fn best_width_weighs_exceptions_against_width() {
        // 1000 values of 3 bits and 2 of 64: 1002 * 3 + 2 * 96 beats 1002 * 64.
        let mut v: Vec<u64> = (0..1000).map(|i| i % 8).collect();
        v.extend([u64::MAX, u64::MAX - 1]);
        assert_eq!(best_width(&v), 3);
        // Half the values wide: exceptions cost more than the width.
        let v: Vec<u64> = (0..1000)
            .map(|i| if i % 2 == 0 { 1 << 20 } else { 1 })
            .collect();
        assert_eq!(best_width(&v), 21);
        assert_eq!(best_width::<u32>(&[]), 32);
        assert_eq!(best_width(&[0u8; 100]), 0);
        // Negative values are full width as unsigned bits.
        assert_eq!(best_width(&[-1i16; 10]), 16);
    }

    #[test]
    fn validates_positions() {
        assert!(validate_positions(&[], 0).is_ok());
        assert!(validate_positions(&[0, 1, 5], 6).is_ok());
        assert!(validate_positions(&[0, 0], 6).is_err());
        assert!(validate_positions(&[3, 2], 6).is_err());
        assert!(validate_positions(&[6], 6).is_err());
        assert!(validate_positions(&[0], 0).is_err());
    }

    #[test]
    fn plan_errors() -> Result<()> {
        let v64 = Values::Int(IntVec::I64(vec![1, 2, 3]));
        let v8 = Values::Int(IntVec::U8(vec![1, 2, 3]));
        for (plan, values) in [
            ("patch(65) | bitpack", &v64),
            ("patch(-1) | bitpack", &v64),
            ("patch(9) | bitpack", &v8),
            ("patch(1, 2) | bitpack", &v8),
        ] {
            assert!(encode(&plan.parse()?, values).is_err(), "{plan}");
        }
        assert!(encode(&"patch".parse()?, &Values::F64(vec![1.0])).is_err());
        round_trip_bits("patch(64)", &v64)?;
        round_trip_bits("patch(8)", &v8)?;
        Ok(())
    }

    const SAMPLE_PLAN: &str = "patch(3) | bitpack";

    fn sample_node() -> Result<EncodedNode> {
        let mut v: Vec<u32> = (0..100).map(|i| i % 8).collect();
        v[0] = 1 << 30;
        v[40] = 1 << 20;
        v[99] = u32::MAX;
        encode(&SAMPLE_PLAN.parse()?, &Values::Int(IntVec::U32(v)))
    }

    #[test]
    fn every_truncation_is_an_error_and_bit_flips_never_panic() -> Result<()> {
        check_corruption(SAMPLE_PLAN, &sample_node()?, 1)
    }

    #[test]
    fn corrupt_exceptions_are_reported() -> Result<()> {
        let good = sample_node()?;

        assert!(
            corrupted(&good, |n| n.buffers[0] = u32_bytes(&[0, 99, 40]))?
                .contains("not after the previous one")
        );
        assert!(
            corrupted(&good, |n| n.buffers[0] = u32_bytes(&[0, 40, 100]))?
                .contains("past the end of 100 values")
        );
        assert!(
            corrupted(&good, |n| n.buffers[0] = u32_bytes(&[0, 40]))?.contains("metadata says 3")
        );
        assert!(corrupted(&good, |n| n.buffers[1].truncate(8))?.contains("metadata says 3"));
        assert!(corrupted(&good, |n| n.buffers[1].push(0))?.contains("not a multiple of 4"));
        assert!(
            corrupted(&good, |n| n.meta[1..5]
                .copy_from_slice(&101u32.to_le_bytes()))?
            .contains("claims 101 exceptions among 100 values")
        );
        assert!(corrupted(&good, |n| n.meta[0] = 33)?.contains("exceeds the 32-bit value type"));
        assert!(corrupted(&good, |n| n.meta.push(0))?.contains("extra bytes"));
        assert!(
            corrupted(&good, |n| {
                n.buffers.pop();
            })?
            .contains("expected 2 and 1")
        );

        let wide = encode(&"bitpack".parse()?, &Values::Int(IntVec::U64(vec![0; 100])))?;
        assert!(corrupted(&good, |n| n.children[0] = wide)?.contains("expected u32"));
        let short = encode(&"bitpack".parse()?, &Values::Int(IntVec::U32(vec![0; 99])))?;
        assert!(corrupted(&good, |n| n.children[0] = short)?.contains("expected 100"));
        Ok(())
    }

    fn small_with_outliers<T: Arbitrary + Copy + From<u8>>() -> impl Strategy<Value = Vec<T>> {
        prop::collection::vec(
            prop_oneof![8 => (0u8..16).prop_map(T::from), 1 => any::<T>()],
            0..2100,
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn i64_round_trips(v in prop_oneof![
            prop::collection::vec(any::<i64>(), 0..2100),
            small_with_outliers::<i64>(),
        ]) {
            let values = Values::Int(IntVec::I64(v));
            for plan in ["for | patch | bitpack", "patch(3) | bitpack", "patch | bitpack",
                         "zigzag | patch | bitpack"] {
                round_trip_bits(plan, &values).map_err(|e| TestCaseError::fail(e.to_string()))?;
            }
        }

        #[test]
        fn u32_round_trips(v in prop_oneof![
            prop::collection::vec(any::<u32>(), 0..2100),
            small_with_outliers::<u32>(),
        ]) {
            let values = Values::Int(IntVec::U32(v));
            for plan in ["for | patch | bitpack", "patch(3) | bitpack", "patch | bitpack",
                         "patch(32) | bitpack"] {
                round_trip_bits(plan, &values).map_err(|e| TestCaseError::fail(e.to_string()))?;
            }
        }
    }
}
