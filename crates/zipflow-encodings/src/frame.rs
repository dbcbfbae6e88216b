//! Frame of reference: subtract the minimum, so the child stores small unsigned offsets.
//!
//! `for | bitpack` is decoded in one fused pass (unpack and add the reference per 1024-value
//! vector, FastLanes' `unfor_pack`); any other child is decoded first and the reference added
//! after.
//!
//! Node: meta = `[reference: u64]` (the minimum's bits, zero-extended); child 0 = the offsets
//! `v - min` as the unsigned type of the same width.

use crate::memo::Split;
use crate::node::{EncodedNode, NodeView};
use crate::{Encoding, Pattern, Scratch, Slot, bitpack, encode_child, expect_child};
use fastlanes::FoR;
use std::rc::Rc;
use zipflow_core::values::IntVecOf;
use zipflow_core::{Error, Int, PType, Plan, Result, VECTOR_LEN, Values, match_ints};

/// `for`.
pub struct FrameOfReference;

/// On-disk id of [`FrameOfReference`].
pub const ID: u16 = DESCRIPTOR.id;

/// The minimum and the offsets from it, as unsigned values.
pub fn offsets<T: Int>(values: &[T]) -> (T, Vec<<T as Int>::U>) {
    let min = values.iter().copied().min().unwrap_or(T::ZERO);
    let offs = values
        .iter()
        .map(|v| v.wrapping_sub(min).to_bits())
        .collect();
    (min, offs)
}

/// A `for` node, parsed and checked once: its reference and its offsets child.
#[derive(Debug, Clone, Copy)]
pub struct View<'n, 'a> {
    /// The reference's bits (the minimum, zero-extended to 64 bits).
    pub reference: u64,
    /// The offsets from the reference: the stream's unsigned type, the node's length.
    pub offsets: &'n NodeView<'a>,
}

impl<'n, 'a> View<'n, 'a> {
    /// Checks `node`'s shape, metadata and child.
    pub fn parse(node: &'n NodeView<'a>) -> Result<View<'n, 'a>> {
        node.expect_shape("for", 0, 1)?;
        let mut meta = node.meta_reader();
        let reference = meta.u64("reference")?;
        meta.finish("for")?;
        let child_type = bitpack::unsigned_of(node.ptype);
        expect_child(node, 0, "offsets", child_type, Some(node.len))?;
        Ok(View {
            reference,
            offsets: &node.children[0],
        })
    }
}

/// Header (16 B) plus one child-table entry, padded to 8, plus the 8-byte reference.
const NODE_OVERHEAD: usize = 24 + 8;

impl Encoding for FrameOfReference {
    fn descriptor(&self) -> &'static crate::Descriptor {
        &DESCRIPTOR
    }
    fn calibration(&self) -> Vec<crate::Calibration> {
        vec![crate::Calibration {
            stream: crate::selection::small_ints(),
            plan: "for | bitpack",
            minus: &[(crate::selection::FILLER, 1.0)],
        }]
    }
    fn accepts(&self, ptype: PType) -> bool {
        ptype.is_int()
    }

    fn encode(&self, plan: &Plan, input: &Values) -> Result<EncodedNode> {
        let Values::Int(v) = input else {
            return Err(Error::plan(plan, "for needs integers"));
        };
        let (reference, child) = match_ints!(v, T, x => {
            let (min, offs) = offsets(x);
            (min.to_u64(), Values::Int(<<T as Int>::U as IntVecOf>::wrap(offs)))
        });
        let mut node = EncodedNode::new(ID, v.ptype(), v.len())?;
        node.meta = reference.to_le_bytes().to_vec();
        node.children.push(encode_child(plan, self, "", &child)?);
        Ok(node)
    }

    fn split(&self, plan: &Plan, input: &Values) -> Option<Result<Rc<Split>>> {
        // A fixed overhead on top of the child.
        crate::memo::split_ints("for", plan, input, |v| {
            Ok(Split {
                own: NODE_OVERHEAD,
                children: vec![match_ints!(v, T, x => {
                    Values::Int(<<T as Int>::U as IntVecOf>::wrap(offsets(x).1))
                })],
            })
        })
    }

    fn decode(&self, node: &NodeView<'_>, out: &mut Values, scratch: &mut Scratch) -> Result<()> {
        let Values::Int(out) = out else {
            return Err(Error::corrupt("for node for non-integer values"));
        };
        let View {
            reference,
            offsets: child,
        } = View::parse(node)?;
        match_ints!(out, T, o => {
            let r = T::from_u64_wrapping(reference).to_bits();
            let mut bits: Vec<<T as Int>::U> = bytemuck::allocation::cast_vec(std::mem::take(o));
            let result = decode_offsets::<<T as Int>::U>(child, r, &mut bits, scratch);
            *o = bytemuck::allocation::cast_vec(bits);
            result?;
        });
        Ok(())
    }
}

/// Decodes the offsets child and adds `reference`, fused with unpacking when the child is a
/// `bitpack` node.
fn decode_offsets<U: Int + FoR + IntVecOf>(
    child: &NodeView<'_>,
    reference: U,
    out: &mut Vec<U>,
    scratch: &mut Scratch,
) -> Result<()> {
    if child.id == bitpack::ID {
        let mut copy = Vec::new();
        let p = bitpack::view::<U>(child, &mut copy)?;
        let n = bitpack::vectors(child.len);
        crate::resize_for_overwrite(out, n * VECTOR_LEN, U::ZERO);
        if p.width == 0 {
            out.fill(reference);
        } else {
            let per_vector = VECTOR_LEN * p.width / U::BITS as usize;
            for (src, dst) in p
                .words
                .chunks_exact(per_vector)
                .zip(out.chunks_exact_mut(VECTOR_LEN))
            {
                // SAFETY: `bitpack::view` checked `width <= U::BITS` and that `words` holds
                // exactly `n` vectors of `per_vector` words; `dst` is one 1024-value vector.
                unsafe { U::unchecked_unfor_pack(p.width, src, reference, dst) };
            }
        }
        out.truncate(child.len);
        return Ok(());
    }
    if child.id == crate::hipatch::ID {
        return crate::hipatch::decode_under_reference(
            child,
            reference,
            out,
            scratch,
            |low, out, scratch| decode_offsets(low, reference, out, scratch),
        );
    }
    // Other children (`patch`, ...) decode straight into `out`, and the reference is added in
    // place: one pass, no intermediate stream.
    let mut offsets = Values::Int(U::wrap(std::mem::take(out)));
    let result = crate::decode(child, &mut offsets, scratch);
    if let Values::Int(iv) = &mut offsets
        && let Some(v) = U::slice_mut(iv)
    {
        *out = std::mem::take(v);
    }
    result?;
    if out.len() != child.len {
        return Err(Error::corrupt("for offsets have the wrong type"));
    }
    for d in out.iter_mut() {
        *d = d.wrapping_add(reference);
    }
    Ok(())
}

/// What `for` is: its id, name, child slots, GPU decoding and part in the search.
///
/// On the GPU a frame of reference adds its reference to each value its child decodes, so
/// the child keeps the node's place.
pub const DESCRIPTOR: crate::Descriptor = crate::Descriptor {
    id: 3,
    name: "for",
    slots: &[Slot {
        name: "",
        default: "bitpack",
    }],
    leaf_for_numbers: false,
    gpu: crate::GpuDecode {
        children: crate::ChildPlace::Keep,
        ..crate::GpuDecode::parallel(Pattern::FullyParallel)
    },
    search: crate::Search::numeric(crate::Role::Inner {
        side_streams: false,
    }),
};
