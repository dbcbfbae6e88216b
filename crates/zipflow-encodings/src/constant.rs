//! Constant: every value is the same; only the value is stored.
//!
//! Node: meta = the value's bits (u64, zero-extended; floats by their bit pattern, so NaN
//! payloads and -0.0 survive). Byte strings are not supported yet.

use crate::node::{EncodedNode, NodeView};
use crate::{Encoding, Pattern, Scratch, Slot};
use zipflow_core::{Error, Int, PType, Plan, Result, Values, match_ints};

/// `constant`.
pub struct Constant;

/// On-disk id of [`Constant`].
pub const ID: u16 = DESCRIPTOR.id;

fn single_bits(input: &Values) -> Option<u64> {
    fn all_same<T: Copy, K: PartialEq + Into<u64>>(v: &[T], key: impl Fn(T) -> K) -> Option<u64> {
        let first = key(*v.first()?);
        v.iter().all(|x| key(*x) == first).then(|| first.into())
    }
    match input {
        Values::Int(v) => match_ints!(v, T, x => all_same(x, |e: T| e.to_u64())),
        Values::F32(v) => all_same(v, f32::to_bits),
        Values::F64(v) => all_same(v, f64::to_bits),
        Values::Bytes(_) => None,
    }
}

/// A `constant` node, parsed and checked once.
#[derive(Debug, Clone, Copy)]
pub struct View {
    /// The value's bits, zero-extended (floats by their bit pattern).
    pub bits: u64,
}

impl View {
    /// Checks `node`'s shape and metadata.
    pub fn parse(node: &NodeView<'_>) -> Result<View> {
        node.expect_shape("constant", 0, 0)?;
        let mut meta = node.meta_reader();
        let bits = meta.u64("value")?;
        meta.finish("constant")?;
        Ok(View { bits })
    }
}

impl Encoding for Constant {
    fn descriptor(&self) -> &'static crate::Descriptor {
        &DESCRIPTOR
    }
    fn calibration(&self) -> Vec<crate::Calibration> {
        vec![crate::Calibration {
            stream: crate::selection::ints(vec![5; crate::selection::CALIBRATION_LEN]),
            plan: "constant",
            minus: &[],
        }]
    }
    fn accepts(&self, ptype: PType) -> bool {
        ptype != PType::Bytes
    }

    fn encode(&self, plan: &Plan, input: &Values) -> Result<EncodedNode> {
        let bits = if input.is_empty() {
            0
        } else {
            single_bits(input).ok_or_else(|| Error::plan(plan, "the values are not all equal"))?
        };
        let mut node = EncodedNode::new(ID, input.ptype(), input.len())?;
        node.meta = bits.to_le_bytes().to_vec();
        Ok(node)
    }

    fn decode(&self, node: &NodeView<'_>, out: &mut Values, _scratch: &mut Scratch) -> Result<()> {
        let View { bits } = View::parse(node)?;
        let n = node.len;
        match out {
            Values::Int(o) => match_ints!(o, T, o => {
                o.clear();
                o.resize(n, T::from_u64_wrapping(bits));
            }),
            Values::F32(o) => {
                o.clear();
                o.resize(n, f32::from_bits(bits as u32));
            }
            Values::F64(o) => {
                o.clear();
                o.resize(n, f64::from_bits(bits));
            }
            Values::Bytes(_) => return Err(Error::corrupt("constant node for byte strings")),
        }
        Ok(())
    }

    fn params(&self, _node: &NodeView<'_>) -> Vec<i64> {
        Vec::new()
    }
}

/// What `constant` is: its id, name, child slots, GPU decoding and part in the search.
pub const DESCRIPTOR: crate::Descriptor = crate::Descriptor {
    id: 8,
    name: "constant",
    slots: Slot::NONE,
    leaf_for_numbers: false,
    gpu: crate::GpuDecode::parallel(Pattern::FullyParallel),
    search: crate::Search {
        role: crate::Role::Leaf,
        string_root: false,
        uniform: true,
    },
};
