//! Plain: values stored as they are, little-endian; byte strings as their bytes plus a child
//! stream of lengths.
//!
//! Node for fixed-width types: no meta, buffer 0 = the values. For byte strings: buffer 0 =
//! the concatenated bytes, child 0 = the lengths as u32.

use crate::node::{EncodedNode, NodeView, cast_or_copy};
use crate::{Encoding, Pattern, Scratch, Slot, encode_child, expect_child};
use zipflow_core::values::ByteStrings;
use zipflow_core::{Error, IntVec, PType, Plan, Result, Values, match_ints};

/// `plain`.
pub struct Plain;

/// On-disk id of [`Plain`].
pub const ID: u16 = 1;

impl Encoding for Plain {
    fn id(&self) -> u16 {
        ID
    }
    fn name(&self) -> &'static str {
        "plain"
    }
    fn pattern(&self) -> Pattern {
        Pattern::FullyParallel
    }
    fn slots(&self) -> &'static [Slot] {
        &[Slot {
            name: "lengths",
            default: "for | bitpack",
        }]
    }
    fn accepts(&self, _ptype: PType) -> bool {
        true
    }

    fn encode(&self, plan: &Plan, input: &Values) -> Result<EncodedNode> {
        let mut node = EncodedNode::new(ID, input.ptype(), input.len())?;
        match input {
            Values::Int(v) => node.buffers.push(v.as_bytes().to_vec()),
            Values::F32(v) => node.buffers.push(bytemuck::cast_slice(v).to_vec()),
            Values::F64(v) => node.buffers.push(bytemuck::cast_slice(v).to_vec()),
            Values::Bytes(b) => {
                let lengths = b
                    .offsets
                    .windows(2)
                    .map(|w| u32::try_from(w[1] - w[0]))
                    .collect::<Result<Vec<u32>, _>>()
                    .map_err(|_| Error::unsupported("a string longer than 4 GiB"))?;
                node.buffers.push(b.data.clone());
                let lengths = Values::Int(IntVec::U32(lengths));
                node.children
                    .push(encode_child(plan, self, "lengths", &lengths)?);
            }
        }
        if plan.get("lengths").is_some() && input.ptype() != PType::Bytes {
            return Err(Error::plan(plan, "`lengths` applies to byte strings only"));
        }
        Ok(node)
    }

    fn decode(&self, node: &NodeView<'_>, out: &mut Values, scratch: &mut Scratch) -> Result<()> {
        let nchild = usize::from(node.ptype == PType::Bytes);
        node.expect_shape("plain", 1, nchild)?;
        node.meta_reader().finish("plain")?;
        let buf = node.buffer(0, "values")?;
        let width = node.ptype.byte_width();
        if width > 0 && buf.len() != node.len * width {
            return Err(Error::corrupt(format!(
                "plain buffer has {} bytes, {} {} values need {}",
                buf.len(),
                node.len,
                node.ptype,
                node.len * width
            )));
        }
        match out {
            Values::Int(o) => match_ints!(o, T, o => {
                let mut copy = Vec::new();
                let v = cast_or_copy::<T>(buf, &mut copy, "plain")?;
                o.clear();
                o.extend_from_slice(v);
            }),
            Values::F32(o) => {
                let mut copy = Vec::new();
                o.clear();
                o.extend_from_slice(cast_or_copy::<f32>(buf, &mut copy, "plain")?);
            }
            Values::F64(o) => {
                let mut copy = Vec::new();
                o.clear();
                o.extend_from_slice(cast_or_copy::<f64>(buf, &mut copy, "plain")?);
            }
            Values::Bytes(o) => {
                expect_child(node, 0, "lengths", PType::U32, Some(node.len))?;
                let lengths = scratch.decode(&node.children[0])?;
                let result = fill_strings(&lengths, buf, o);
                scratch.give(lengths);
                result?;
            }
        }
        Ok(())
    }
}

fn fill_strings(lengths: &Values, data: &[u8], out: &mut ByteStrings) -> Result<()> {
    let Values::Int(IntVec::U32(lengths)) = lengths else {
        return Err(Error::corrupt("string lengths are not u32"));
    };
    out.offsets.clear();
    out.offsets.reserve(lengths.len() + 1);
    out.offsets.push(0);
    let mut end = 0u64;
    for &l in lengths {
        end += u64::from(l);
        out.offsets.push(end);
    }
    if end != data.len() as u64 {
        return Err(Error::corrupt(format!(
            "string lengths add up to {end} bytes, the data has {}",
            data.len()
        )));
    }
    out.data.clear();
    out.data.extend_from_slice(data);
    Ok(())
}
