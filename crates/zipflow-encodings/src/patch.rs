//! Patched exceptions (PFor): a few wide outliers are stored aside so the rest of the stream
//! packs at a narrow width.
//!
//! Values whose unsigned bit width ([`Int::bit_width`]) exceeds `W` are exceptions: their
//! positions and full values are kept in two buffers, and in the child stream they are replaced
//! by 0, so `for | patch | bitpack` packs at `W` bits instead of the outliers' width. `W` is the
//! plan's parameter (`patch(3)`), or chosen from a histogram of bit widths to minimise
//! `len * W + exceptions * (32 + T::BITS)` bits.
//!
//! Decoding decodes the child, then overwrites the exception positions: groups of one vector
//! expand independently, hence [`Pattern::GroupParallel`].
//!
//! Node: meta = `[W: u8, exception_count: u32]`; buffer 0 = exception positions (u32, strictly
//! increasing); buffer 1 = exception values (the stream's type, little-endian); child 0 = the
//! stream with exceptions replaced by 0, same type and length.

use crate::node::{EncodedNode, NodeView, cast_or_copy};
use crate::{Encoding, Pattern, Scratch, Slot, encode_child, expect_child};
use zipflow_core::values::IntVecOf;
use zipflow_core::{Error, Int, PType, Plan, Result, Values, match_ints};

/// `patch` / `patch(W)`.
pub struct Patch;

/// On-disk id of [`Patch`].
pub const ID: u16 = 9;

/// Bits one exception costs besides its value: its u32 position.
const POSITION_BITS: u64 = 32;

/// The width that minimises `len * W + exceptions(W) * (32 + T::BITS)` bits, from one pass
/// over `values`. Ties go to the wider `W`: fewer exceptions decode faster.
pub fn best_width<T: Int>(values: &[T]) -> u32 {
    let mut histogram = [0u64; 65];
    for v in values {
        histogram[v.bit_width() as usize] += 1;
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
            if v.bit_width() > width {
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

/// Reads `[parameter: u8, exception_count: u32]` metadata, as `patch` and `float2int` write it.
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

/// Views buffer 0 of `node` as `count` exception positions, validated against `node.len`.
pub(crate) fn read_positions<'s>(
    node: &NodeView<'s>,
    count: usize,
    scratch: &'s mut Vec<u32>,
) -> Result<&'s [u32]> {
    let positions = cast_or_copy::<u32>(
        node.buffer(0, "exception positions")?,
        scratch,
        "exception positions",
    )?;
    if positions.len() != count {
        return Err(Error::corrupt(format!(
            "exception position buffer holds {} positions, metadata says {count}",
            positions.len()
        )));
    }
    validate_positions(positions, node.len)?;
    Ok(positions)
}

/// Views buffer 1 of `node` as `count` exception values of type `T`.
pub(crate) fn read_exceptions<'s, T: bytemuck::Pod>(
    node: &NodeView<'s>,
    count: usize,
    scratch: &'s mut Vec<T>,
) -> Result<&'s [T]> {
    let values = cast_or_copy::<T>(
        node.buffer(1, "exception values")?,
        scratch,
        "exception values",
    )?;
    if values.len() != count {
        return Err(Error::corrupt(format!(
            "exception value buffer holds {} values, metadata says {count}",
            values.len()
        )));
    }
    Ok(values)
}

impl Encoding for Patch {
    fn id(&self) -> u16 {
        ID
    }
    fn name(&self) -> &'static str {
        "patch"
    }
    fn pattern(&self) -> Pattern {
        Pattern::GroupParallel
    }
    fn slots(&self) -> &'static [Slot] {
        &[Slot {
            name: "",
            default: "bitpack",
        }]
    }
    fn max_params(&self) -> usize {
        1
    }
    fn accepts(&self, ptype: PType) -> bool {
        ptype.is_int()
    }

    fn encode(&self, plan: &Plan, input: &Values) -> Result<EncodedNode> {
        let Values::Int(v) = input else {
            return Err(Error::plan(plan, "patch needs integers"));
        };
        // Built first: it rejects streams whose positions would not fit in a u32.
        let mut node = EncodedNode::new(ID, v.ptype(), v.len())?;
        let (width, positions, values, child) = match_ints!(v, T, x => {
            let width = resolve_width::<T>(plan, x)?;
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
        node.children.push(encode_child(plan, self, "", &child)?);
        Ok(node)
    }

    fn decode(&self, node: &NodeView<'_>, out: &mut Values, scratch: &mut Scratch) -> Result<()> {
        node.expect_shape("patch", 2, 1)?;
        let (width, count) = read_meta(node, "patch", "bit width")?;
        let bits = node.ptype.byte_width() * 8;
        if usize::from(width) > bits {
            return Err(Error::corrupt(format!(
                "patch width {width} exceeds the {bits}-bit value type"
            )));
        }
        let mut position_copy = Vec::new();
        let positions = read_positions(node, count, &mut position_copy)?;
        expect_child(node, 0, "patched", node.ptype, Some(node.len))?;
        // The child has this node's type and length, so it decodes straight into `out`: no
        // intermediate stream, no copy. `decode` checks it produced `node.len` values.
        crate::decode(&node.children[0], out, scratch)?;
        let Values::Int(o) = out else {
            return Err(Error::corrupt("patch node for non-integer values"));
        };
        match_ints!(o, T, o => {
            let mut value_copy = Vec::new();
            let values = read_exceptions::<T>(node, count, &mut value_copy)?;
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
