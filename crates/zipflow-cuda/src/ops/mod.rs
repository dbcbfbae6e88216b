//! The GPU op registry: one module per primitive the GPU decodes, each holding the op's
//! descriptor slots (`SLOTS`, documented there), its host side (`fill`: checks a node as the
//! CPU decoder does and writes its slots and the bytes the host derives for the kernel) and
//! the CUDA C it emits (its `zf_n<k>` value and, for materialised ops, its stage).
//!
//! [`Op::from_id`] is the only place that maps encoding ids to ops; the rest of the crate
//! dispatches on [`Op`]. `chars` serves both character coders (`chardict16`, `chartable`),
//! which share their slots, their kernel and their host tables.
//!
//! [`Shape::width`]: crate::shape::Shape::width

mod alprd;
pub(crate) mod ans;
pub(crate) mod bitpack;
mod blockpack;
mod chars;
mod constant;
mod delta;
pub(crate) mod dict;
mod float2int;
mod frame;
mod fsst;
mod hipatch;
mod lowbits;
mod patch;
mod plain;
mod radix;
mod rle;
mod strdict;
mod words;
mod zigzag;

mod fill;

pub(crate) use fill::Filler;
pub(crate) use radix::{radix_group, radix_groups_body};

use crate::codegen::{Gen, KernelKind, Writer};
use zipflow_core::{Error, Result};
use zipflow_encodings::rowindex::RowIndex;
use zipflow_encodings::{NodeView, Pattern, by_id, by_name};

/// The row index of a byte-string root `node` of `op` (named `name` in messages) and the
/// number of tokens its index counts: a `words` node's codes, else its rows. `None` for a
/// root without one.
pub(crate) fn row_index<'a>(
    op: Op,
    node: &NodeView<'a>,
    name: &str,
) -> Result<(Option<RowIndex<'a>>, usize)> {
    match op {
        Op::Words => words::row_index(node, name),
        Op::StrDict => strdict::row_index(node, name),
        _ => Ok((None, node.len)),
    }
}

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
    /// `lowbits`: integers joined from their high bits and their low bits.
    LowBits,
    /// `radix`: values below a small base packed as the digits of `k`-bit numbers.
    Radix,
    /// `float2int`: decimal scaling with exceptions.
    FloatToInt,
    /// `alprd`: float bits joined from a left and a right part.
    AlpRd,
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
            zipflow_encodings::plain::ID => Op::Plain,
            zipflow_encodings::bitpack::ID => Op::BitPack,
            zipflow_encodings::blockpack::ID => Op::BlockPack,
            zipflow_encodings::frame::ID => Op::For,
            zipflow_encodings::zigzag::ID => Op::ZigZag,
            zipflow_encodings::delta::ID => Op::Delta,
            zipflow_encodings::rle::ID => Op::Rle,
            zipflow_encodings::dict::ID => Op::Dict,
            zipflow_encodings::constant::ID => Op::Constant,
            zipflow_encodings::patch::ID => Op::Patch,
            zipflow_encodings::hipatch::ID => Op::HiPatch,
            zipflow_encodings::lowbits::ID => Op::LowBits,
            zipflow_encodings::radix::ID => Op::Radix,
            zipflow_encodings::float2int::ID => Op::FloatToInt,
            zipflow_encodings::alprd::ID => Op::AlpRd,
            zipflow_encodings::ans::ID => Op::Ans,
            zipflow_encodings::fsst::ID => Op::Fsst,
            zipflow_encodings::chardict::ID => Op::CharDict,
            zipflow_encodings::chartable::ID => Op::CharTable,
            zipflow_encodings::strdict::ID => Op::StrDict,
            zipflow_encodings::words::ID => Op::Words,
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
            Op::LowBits => "lowbits",
            Op::Radix => "radix",
            Op::FloatToInt => "float2int",
            Op::AlpRd => "alprd",
            Op::Ans => "ans",
            Op::Fsst => "fsst",
            Op::CharDict => "chardict16",
            Op::CharTable => "chartable",
            Op::StrDict => "strdict",
            Op::Words => "words",
        }
    }

    /// How its encoding's decoding parallelises (the registry's [`GpuDecode::pattern`]),
    /// which decides whether the op computes each value where it is read or writes its
    /// output first ([`crate::codegen::materialised`]).
    ///
    /// [`GpuDecode::pattern`]: zipflow_encodings::GpuDecode::pattern
    pub fn pattern(self) -> Pattern {
        // Every op's name is registered (`every_op_is_a_registered_primitive`); a serial
        // pattern is the safe answer for one that were not.
        by_name(self.name()).map_or(Pattern::Serial, |e| e.gpu().pattern)
    }

    /// Whether the op needs its whole output before its parent reads it in some kernel (a
    /// scan over the chunk, or exceptions scattered over its child's output).
    pub fn is_materialised(self) -> bool {
        crate::codegen::materialised(self, KernelKind::Tile)
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

    /// Descriptor slots the op takes after its length slot (each op's `SLOTS` says what
    /// they hold).
    pub fn param_slots(self) -> usize {
        match self {
            Op::Plain => plain::SLOTS,
            Op::BitPack => bitpack::SLOTS,
            Op::BlockPack => blockpack::SLOTS,
            Op::For => frame::SLOTS,
            Op::ZigZag => zigzag::SLOTS,
            Op::Delta => delta::SLOTS,
            Op::Rle => rle::SLOTS,
            Op::Dict => dict::SLOTS,
            Op::Constant => constant::SLOTS,
            Op::Patch => patch::SLOTS,
            Op::HiPatch => hipatch::SLOTS,
            Op::LowBits => lowbits::SLOTS,
            Op::Radix => radix::SLOTS,
            Op::FloatToInt => float2int::SLOTS,
            Op::AlpRd => alprd::SLOTS,
            Op::Ans => ans::SLOTS,
            Op::Fsst => fsst::SLOTS,
            Op::CharDict | Op::CharTable => chars::SLOTS,
            Op::StrDict => strdict::SLOTS,
            Op::Words => words::SLOTS,
        }
    }

    /// The parameter compiled into the kernel for `node` of this op (see [`Shape::width`]).
    pub(crate) fn compiled_width(self, node: &NodeView<'_>) -> Option<u32> {
        match self {
            Op::BitPack => bitpack::compiled_width(node),
            Op::Radix => radix::compiled_width(node),
            _ => None,
        }
    }
}

/// The body of node `k`'s device function `zf_n<k>(e, p)`, its value at position `p`; a
/// materialised node emits its stage and reads its buffer.
pub(crate) fn value(g: &mut Gen<'_>, k: usize) -> Result<String> {
    let n = &g.nodes[k];
    let op = n.op;
    match op {
        Op::Plain => plain::value(g, k),
        Op::BitPack => bitpack::value(g, k),
        Op::BlockPack => blockpack::value(g, k),
        Op::For => frame::value(g, k),
        Op::ZigZag => zigzag::value(g, k),
        Op::AlpRd => alprd::value(g, k),
        Op::LowBits => lowbits::value(g, k),
        Op::Radix => radix::value(g, k),
        Op::Constant => constant::value(g, k),
        Op::Dict => dict::value(g, k),
        Op::Patch | Op::FloatToInt if g.kind == KernelKind::Chunk => patch::value(g, k),
        Op::StrDict | Op::Words => Err(Error::unsupported(format!(
            "`{}` over {} values",
            op.name(),
            n.ptype
        ))),
        Op::Patch
        | Op::FloatToInt
        | Op::HiPatch
        | Op::Delta
        | Op::Rle
        | Op::Ans
        | Op::Fsst
        | Op::CharDict
        | Op::CharTable => {
            if op == Op::HiPatch {
                g.hipatch_vector(k);
            }
            g.stage(k)?;
            let buf = g.buf(k, "p")?;
            Ok(Writer::at(1).line(format!("return {buf};")).finish())
        }
    }
}

/// The stage that materialises node `k` (the kernel body that writes its whole output).
pub(crate) fn stage(g: &mut Gen<'_>, k: usize) -> Result<String> {
    let op = g.nodes[k].op;
    match op {
        Op::Patch | Op::FloatToInt => g.patch_stage(k),
        Op::HiPatch => g.hipatch_stage(k),
        Op::Delta => g.delta_stage(k),
        Op::Rle => g.rle_stage(k),
        Op::Ans => g.ans_stage(k),
        Op::CharDict | Op::CharTable => g.char_stage(k),
        Op::Fsst => g.fsst_stage(k),
        _ => Err(Error::unsupported(format!(
            "`{}` is not a materialised primitive",
            op.name()
        ))),
    }
}
