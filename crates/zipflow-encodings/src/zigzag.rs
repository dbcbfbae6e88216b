//! ZigZag: maps signed values to unsigned so that small magnitudes become small numbers
//! (0, -1, 1, -2, ... -> 0, 1, 2, 3, ...). Unsigned input is read as two's complement.
//!
//! Node: no meta; child 0 = the mapped values, as the unsigned type of the same width.

use crate::memo::Split;
use crate::node::{EncodedNode, NodeView};
use crate::{Encoding, Pattern, Scratch, Slot, bitpack, encode_child, expect_child};
use std::rc::Rc;
use zipflow_core::values::IntVecOf;
use zipflow_core::{Error, Int, IntVec, PType, Plan, Result, Values, match_ints};

/// `zigzag`.
pub struct ZigZag;

/// On-disk id of [`ZigZag`].
pub const ID: u16 = DESCRIPTOR.id;

/// Encodes one value's bits.
#[inline(always)]
pub fn zigzag(bits: u64, width: u32) -> u64 {
    let shift = 64 - width;
    let signed = ((bits << shift) as i64) >> shift;
    ((signed << 1) ^ (signed >> 63)) as u64 & (u64::MAX >> shift)
}

/// Decodes one value's bits.
#[inline(always)]
pub fn unzigzag(z: u64) -> u64 {
    (z >> 1) ^ (z & 1).wrapping_neg()
}

/// Header (16 B) plus one child-table entry, padded to 8; no meta.
const NODE_OVERHEAD: usize = 24;

/// The zigzag child stream of `v`.
fn zigzagged(v: &IntVec) -> Values {
    match_ints!(v, T, x => {
        let z: Vec<<T as Int>::U> = x
            .iter()
            .map(|e| <T as Int>::U::from_u64_wrapping(zigzag(e.to_u64(), T::BITS)))
            .collect();
        Values::Int(<<T as Int>::U as IntVecOf>::wrap(z))
    })
}

/// A `zigzag` node, parsed and checked once.
#[derive(Debug, Clone, Copy)]
pub struct View<'n, 'a> {
    /// The mapped values: the stream's unsigned type, the node's length.
    pub mapped: &'n NodeView<'a>,
}

impl<'n, 'a> View<'n, 'a> {
    /// Checks `node`'s shape and child.
    pub fn parse(node: &'n NodeView<'a>) -> Result<View<'n, 'a>> {
        node.expect_shape("zigzag", 0, 1)?;
        node.meta_reader().finish("zigzag")?;
        expect_child(
            node,
            0,
            "zigzag",
            bitpack::unsigned_of(node.ptype),
            Some(node.len),
        )?;
        Ok(View {
            mapped: &node.children[0],
        })
    }
}

impl Encoding for ZigZag {
    fn descriptor(&self) -> &'static crate::Descriptor {
        &DESCRIPTOR
    }
    fn calibration(&self) -> Vec<crate::Calibration> {
        vec![crate::Calibration {
            stream: calibration_signed(),
            plan: "zigzag | plain",
            minus: &[(crate::selection::RAW, 1.0)],
        }]
    }
    fn accepts(&self, ptype: PType) -> bool {
        ptype.is_int()
    }

    fn encode(&self, plan: &Plan, input: &Values) -> Result<EncodedNode> {
        let Values::Int(v) = input else {
            return Err(Error::plan(plan, "zigzag needs integers"));
        };
        let child = zigzagged(v);
        let mut node = EncodedNode::new(ID, v.ptype(), v.len())?;
        node.children.push(encode_child(plan, self, "", &child)?);
        Ok(node)
    }

    fn split(&self, plan: &Plan, input: &Values) -> Option<Result<Rc<Split>>> {
        // A fixed overhead on top of the child.
        crate::memo::split_ints("zigzag", plan, input, |v| {
            Ok(Split {
                own: NODE_OVERHEAD,
                children: vec![zigzagged(v)],
            })
        })
    }

    fn decode(&self, node: &NodeView<'_>, out: &mut Values, scratch: &mut Scratch) -> Result<()> {
        let View { mapped } = View::parse(node)?;
        let decoded = scratch.decode(mapped)?;
        let Values::Int(o) = out else {
            return Err(Error::corrupt("zigzag node for non-integer values"));
        };
        let result = match &decoded {
            Values::Int(z) => match_ints!(o, T, o => {
                match <<T as Int>::U as IntVecOf>::slice(z) {
                    Some(z) => {
                        o.clear();
                        o.extend(z.iter().map(|e| T::from_u64_wrapping(unzigzag(e.to_u64()))));
                        Ok(())
                    }
                    None => Err(Error::corrupt("zigzag child has the wrong type")),
                }
            }),
            _ => Err(Error::corrupt("zigzag child is not integers")),
        };
        scratch.give(decoded);
        result
    }
}

/// What `zigzag` is: its id, name, child slots, GPU decoding and part in the search.
pub const DESCRIPTOR: crate::Descriptor = crate::Descriptor {
    id: 4,
    name: "zigzag",
    slots: &[Slot {
        name: "",
        default: "bitpack",
    }],
    leaf_for_numbers: false,
    gpu: crate::GpuDecode::parallel(Pattern::FullyParallel),
    search: crate::Search::numeric(crate::Role::Inner {
        side_streams: false,
    }),
};

/// Random values around zero, in a 4096-wide range.
fn calibration_signed() -> zipflow_core::Values {
    let mut rnd = crate::selection::xorshift(0x1f83_d9ab_fb41_bd6b);
    crate::selection::ints(
        (0..crate::selection::CALIBRATION_LEN)
            .map(|_| (rnd() % 4096) as i64 - 2048)
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_small_magnitudes_to_small_numbers() {
        for (v, z) in [(0i64, 0u64), (-1, 1), (1, 2), (-2, 3), (i64::MIN, u64::MAX)] {
            assert_eq!(zigzag(v as u64, 64), z);
            assert_eq!(unzigzag(z) as i64, v);
        }
        assert_eq!(zigzag((-1i8) as u8 as u64, 8), 1);
        assert_eq!(zigzag(i8::MIN as u8 as u64, 8), 255);
        assert_eq!(unzigzag(255) as u8 as i8, i8::MIN);
    }
}
