//! Plan shapes: the part of an encoded node tree that decides the generated kernel.
//!
//! A shape is the tree of primitives, their physical types and their bit widths: two chunks
//! encoded as `for | bitpack(12)` share one shape, one kernel source and one compiled module,
//! while `for | bitpack(7)` gets its own. Compiled-in widths turn the unpacking's shifts,
//! masks and word indices into constants (measured in docs/history/gpu-2026-12.md); every
//! other parameter (references, offsets, lengths) travels in the per-chunk descriptor.

use zipflow_core::{Error, PType, Result};
use zipflow_encodings::{
    NodeView, ans, bitpack, blockpack, by_id, chardict, chartable, constant, delta, dict,
    float2int, frame, fsst, hipatch, patch, plain, radix, rle, strdict, words, zigzag,
};

/// A primitive the GPU decoder handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// `plain`: values stored as they are.
    Plain,
    /// `bitpack`: FastLanes 1024-value interleaved bit-packing.
    BitPack,
    /// `blockpack`: bit-packing with a width and a reference per 1024-value vector.
    BlockPack,
    /// `for`: frame of reference.
    For,
    /// `zigzag`.
    ZigZag,
    /// `delta`: wrapping prefix sum over the chunk.
    Delta,
    /// `rle`: values and run lengths.
    Rle,
    /// `dict`: codes into a sorted dictionary.
    Dict,
    /// `constant`.
    Constant,
    /// `patch`: patched exceptions.
    Patch,
    /// `hipatch`: exceptions whose high bits are ORed over their low bits.
    HiPatch,
    /// `radix`: values below a small base packed as the digits of `k`-bit numbers.
    Radix,
    /// `float2int`: decimal scaling with exceptions.
    FloatToInt,
    /// `ans`: interleaved rANS, one warp per block.
    Ans,
    /// `fsst`: a byte stream as one-byte codes into a table of up to 8-byte symbols, in
    /// pieces that decode on their own.
    Fsst,
    /// `chardict16`: bytes as codes of 5 or 9 bits, MSB first, in 1024-byte blocks that
    /// decode on their own.
    CharDict,
    /// `chartable`: bytes as codes of up to 10 bits from one of up to 16 tables per
    /// 1024-byte block.
    CharTable,
    /// `strdict`: string codes into a dictionary of byte strings.
    StrDict,
    /// `words`: each string's tokens as codes into a dictionary of byte strings.
    Words,
}

impl Op {
    /// The op for an on-disk encoding id, or an `Unsupported` error naming the primitive.
    pub fn from_id(id: u16) -> Result<Op> {
        Ok(match id {
            plain::ID => Op::Plain,
            bitpack::ID => Op::BitPack,
            blockpack::ID => Op::BlockPack,
            frame::ID => Op::For,
            zigzag::ID => Op::ZigZag,
            delta::ID => Op::Delta,
            rle::ID => Op::Rle,
            dict::ID => Op::Dict,
            constant::ID => Op::Constant,
            patch::ID => Op::Patch,
            hipatch::ID => Op::HiPatch,
            radix::ID => Op::Radix,
            float2int::ID => Op::FloatToInt,
            ans::ID => Op::Ans,
            fsst::ID => Op::Fsst,
            chardict::ID => Op::CharDict,
            chartable::ID => Op::CharTable,
            strdict::ID => Op::StrDict,
            words::ID => Op::Words,
            _ => {
                let name =
                    by_id(id).map_or_else(|| format!("id {id}"), |e| format!("`{}`", e.name()));
                return Err(Error::unsupported(format!(
                    "the GPU decoder does not handle the primitive {name}"
                )));
            }
        })
    }

    /// The primitive's name in plans.
    pub fn name(self) -> &'static str {
        match self {
            Op::Plain => "plain",
            Op::BitPack => "bitpack",
            Op::BlockPack => "blockpack",
            Op::For => "for",
            Op::ZigZag => "zigzag",
            Op::Delta => "delta",
            Op::Rle => "rle",
            Op::Dict => "dict",
            Op::Constant => "constant",
            Op::Patch => "patch",
            Op::HiPatch => "hipatch",
            Op::Radix => "radix",
            Op::FloatToInt => "float2int",
            Op::Ans => "ans",
            Op::Fsst => "fsst",
            Op::CharDict => "chardict16",
            Op::CharTable => "chartable",
            Op::StrDict => "strdict",
            Op::Words => "words",
        }
    }

    /// Whether the op needs its whole output before its parent reads it (a scan over the
    /// chunk, or exceptions scattered over its child's output).
    pub fn is_materialised(self) -> bool {
        matches!(
            self,
            Op::Delta
                | Op::Rle
                | Op::Patch
                | Op::HiPatch
                | Op::FloatToInt
                | Op::Ans
                | Op::Fsst
                | Op::CharDict
                | Op::CharTable
        )
    }

    /// Whether the op needs the whole chunk in one thread block (a scan across vectors).
    pub fn is_chunk_wide(self) -> bool {
        matches!(
            self,
            Op::Delta | Op::Rle | Op::Ans | Op::Fsst | Op::CharDict | Op::CharTable
        )
    }

    /// Whether the op decodes byte strings (`plain` also decodes numbers).
    pub fn decodes_strings(self) -> bool {
        matches!(self, Op::Plain | Op::StrDict | Op::Words)
    }
}

/// The shape of an encoded node tree: ops and physical types, no parameters.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Shape {
    /// The primitive.
    pub op: Op,
    /// The physical type the node decodes to.
    pub ptype: PType,
    /// A `bitpack` node's bit width or a `radix` node's base, compiled into the kernel as a
    /// constant (`None` for other primitives, and for a width past the type's bits or a base
    /// outside 2..=255, which the descriptor check rejects).
    pub width: Option<u32>,
    /// Child shapes, in the primitive's slot order.
    pub children: Vec<Shape>,
}

impl Shape {
    /// The shape of a parsed node tree. Primitives the GPU does not decode give an
    /// `Unsupported` error that names them.
    pub fn of(node: &NodeView<'_>) -> Result<Shape> {
        let op = Op::from_id(node.id)?;
        if node.ptype == PType::Bytes && !op.decodes_strings() {
            return Err(Error::unsupported(format!(
                "the GPU decoder does not handle byte strings (`{}` node)",
                op.name()
            )));
        }
        let children = node
            .children
            .iter()
            .map(Shape::of)
            .collect::<Result<Vec<_>>>()?;
        let first = node.meta.first().map(|&w| u32::from(w));
        let width = match op {
            Op::BitPack => first.filter(|&w| w as usize <= node.ptype.byte_width() * 8),
            Op::Radix => first.filter(|&b| b >= 2),
            _ => None,
        };
        Ok(Shape {
            op,
            ptype: node.ptype,
            width,
            children,
        })
    }

    /// A canonical text key, e.g. `for:i64(bitpack(12):u64)`.
    pub fn key(&self) -> String {
        let mut s = match self.width {
            Some(w) => format!("{}({w}):{}", self.op.name(), self.ptype),
            None => format!("{}:{}", self.op.name(), self.ptype),
        };
        if !self.children.is_empty() {
            s.push('(');
            for (i, c) in self.children.iter().enumerate() {
                if i > 0 {
                    s.push(',');
                }
                s.push_str(&c.key());
            }
            s.push(')');
        }
        s
    }

    /// Nodes in pre-order (the order of the descriptor slots).
    pub fn preorder(&self) -> Vec<&Shape> {
        let mut out = Vec::new();
        fn walk<'a>(s: &'a Shape, out: &mut Vec<&'a Shape>) {
            out.push(s);
            for c in &s.children {
                walk(c, out);
            }
        }
        walk(self, &mut out);
        out
    }
}
