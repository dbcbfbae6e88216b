//! Plain: values stored as they are, little-endian; byte strings as two child streams, their
//! lengths and their concatenated bytes.
//!
//! Node for fixed-width types: no meta, buffer 0 = the values. For byte strings: no buffers,
//! child 0 = the lengths as u32, child 1 = the concatenated bytes as a u8 stream, so any text
//! plan (`fsst`, `words`, `ans`, ...) can compress a column's bytes:
//! `plain(lengths: for | bitpack, bytes: words(codes: ans))`.

use crate::node::{EncodedNode, NodeView, cast_or_copy};
use crate::{Encoding, Pattern, Scratch, Slot, encode_child, expect_child};
use zipflow_core::values::ByteStrings;
use zipflow_core::{Error, IntVec, PType, Plan, Result, Values, match_ints};

/// `plain`.
pub struct Plain;

/// On-disk id of [`Plain`].
pub const ID: u16 = DESCRIPTOR.id;

/// A `plain` node, parsed and checked once.
#[derive(Debug, Clone, Copy)]
pub enum View<'n, 'a> {
    /// Fixed-width values: `len * width` bytes, little-endian.
    Fixed {
        /// The values' bytes.
        values: &'a [u8],
    },
    /// Byte strings.
    Strings {
        /// One u32 length per string (the node's length of them).
        lengths: &'n NodeView<'a>,
        /// The strings' bytes, one after another.
        bytes: &'n NodeView<'a>,
    },
}

impl<'n, 'a> View<'n, 'a> {
    /// Checks `node`'s shape and, for fixed-width values, its buffer's length.
    pub fn parse(node: &'n NodeView<'a>) -> Result<View<'n, 'a>> {
        if node.ptype == PType::Bytes {
            node.expect_shape("plain", 0, 2)?;
            node.meta_reader().finish("plain")?;
            expect_child(node, 0, "lengths", PType::U32, Some(node.len))?;
            expect_child(node, 1, "bytes", PType::U8, None)?;
            return Ok(View::Strings {
                lengths: &node.children[0],
                bytes: &node.children[1],
            });
        }
        node.expect_shape("plain", 1, 0)?;
        node.meta_reader().finish("plain")?;
        let values = node.buffer(0, "values")?;
        let width = node.ptype.byte_width();
        if values.len() != node.len * width {
            return Err(Error::corrupt(format!(
                "plain buffer has {} bytes, {} {} values need {}",
                values.len(),
                node.len,
                node.ptype,
                node.len * width
            )));
        }
        Ok(View::Fixed { values })
    }
}

impl Encoding for Plain {
    fn descriptor(&self) -> &'static crate::Descriptor {
        &DESCRIPTOR
    }
    fn child_shape(&self, slot: &str, shape: crate::Shape) -> crate::Shape {
        // The bytes of all strings, one value per byte.
        if slot == "bytes" {
            shape.with_values(shape.bytes, shape.bytes).numbers()
        } else {
            shape.numbers()
        }
    }
    fn decode_cost(&self, shape: crate::Shape, ns: &dyn Fn(&str) -> f64) -> f64 {
        if shape.strings {
            // Each string is placed (offsets, then Arrow views) one by one, where a
            // dictionary's rows are gathered from views built once per entry.
            (ns(DESCRIPTOR.name) + ns(crate::strdict::DESCRIPTOR.name)) * shape.values
        } else {
            ns(DESCRIPTOR.name) * shape.values
        }
    }
    fn calibration(&self) -> Vec<crate::Calibration> {
        vec![crate::Calibration {
            stream: crate::selection::small_ints(),
            plan: "plain",
            minus: &[],
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
                let lengths = Values::Int(IntVec::U32(lengths));
                node.children
                    .push(encode_child(plan, self, "lengths", &lengths)?);
                // The bytes child borrows the data for the encode only.
                let bytes = Values::Int(IntVec::U8(b.data.clone()));
                node.children
                    .push(encode_child(plan, self, "bytes", &bytes)?);
            }
        }
        if input.ptype() != PType::Bytes
            && let Some((slot, _)) = plan.children.first()
        {
            return Err(Error::plan(
                plan,
                format!("`{slot}` applies to byte strings only"),
            ));
        }
        Ok(node)
    }

    fn decode(&self, node: &NodeView<'_>, out: &mut Values, scratch: &mut Scratch) -> Result<()> {
        let buf = match View::parse(node)? {
            View::Strings { lengths, bytes } => {
                let Values::Bytes(o) = out else {
                    return Err(Error::corrupt("plain strings for fixed-width values"));
                };
                return decode_strings(lengths, bytes, o, scratch);
            }
            View::Fixed { values } => values,
        };
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
            Values::Bytes(_) => {}
        }
        Ok(())
    }
}

/// Decodes a byte-string node: lengths into offsets, the bytes child straight into `out.data`.
fn decode_strings(
    lengths: &NodeView<'_>,
    bytes: &NodeView<'_>,
    out: &mut ByteStrings,
    scratch: &mut Scratch,
) -> Result<()> {
    let decoded = scratch.decode(lengths)?;
    let result = fill_offsets(&decoded, bytes.len, &mut out.offsets);
    scratch.give(decoded);
    result?;
    // Decode the bytes in place: the data vector travels as a u8 stream and comes back.
    let mut data = Values::Int(IntVec::U8(std::mem::take(&mut out.data)));
    let result = crate::decode(bytes, &mut data, scratch);
    if let Values::Int(IntVec::U8(data)) = data {
        out.data = data;
    }
    result
}

fn fill_offsets(lengths: &Values, total: usize, offsets: &mut Vec<u64>) -> Result<()> {
    let Values::Int(IntVec::U32(lengths)) = lengths else {
        return Err(Error::corrupt("string lengths are not u32"));
    };
    offsets.clear();
    offsets.reserve(lengths.len() + 1);
    offsets.push(0);
    let mut end = 0u64;
    for &l in lengths {
        end += u64::from(l);
        offsets.push(end);
    }
    if end != total as u64 {
        return Err(Error::corrupt(format!(
            "string lengths add up to {end} bytes, the bytes stream has {total}"
        )));
    }
    Ok(())
}

/// What `plain` is: its id, name, child slots, GPU decoding and part in the search.
pub const DESCRIPTOR: crate::Descriptor = crate::Descriptor {
    id: 1,
    name: "plain",
    slots: &[
        Slot {
            name: "lengths",
            default: "for | bitpack",
        },
        Slot {
            name: "bytes",
            default: "plain",
        },
    ],
    leaf_for_numbers: true,
    gpu: crate::GpuDecode {
        children: crate::ChildPlace::Segments(&["lengths"]),
        ..crate::GpuDecode::parallel(Pattern::FullyParallel)
    },
    search: crate::Search {
        role: crate::Role::Leaf,
        string_root: true,
        uniform: false,
    },
};
