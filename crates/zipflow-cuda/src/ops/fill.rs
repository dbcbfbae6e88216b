//! The host side of a chunk's descriptor: each node's length and scratch slots here, its own
//! slots by its op's `fill`.

use super::{
    Op, alprd, ans, bitpack, blockpack, chars, constant, delta, dict, float2int, frame, fsst,
    hipatch, lowbits, patch, plain, radix, rle, strdict, words, zigzag,
};
use crate::codegen::Kernel;
use zipflow_core::{Error, PType, Result};
use zipflow_encodings::NodeView;

/// Fills one chunk's descriptor while checking its tree as the CPU decoders do.
pub(crate) struct Filler<'a> {
    /// Address of the tree's first byte on the host.
    pub(crate) base: usize,
    /// Offset of the tree in the device input buffer.
    pub(crate) device_offset: u64,
    /// Running size of the scratch buffer.
    pub(crate) scratch: &'a mut usize,
    pub(crate) kernel: &'a Kernel,
    pub(crate) prm: &'a mut [u64],
    /// Bytes the host derives for the kernels, placed at `extra_at` in the input buffer.
    pub(crate) extra: Vec<u8>,
    pub(crate) extra_at: u64,
    /// The strings' bytes, for a byte-string root whose tree holds them.
    pub(crate) string_bytes: Option<u64>,
}

impl Filler<'_> {
    /// The device offset of `buf`, which must be `align`-aligned within the tree.
    pub(crate) fn offset(&self, buf: &[u8], align: usize) -> Result<u64> {
        let rel = (buf.as_ptr() as usize).wrapping_sub(self.base);
        if !rel.is_multiple_of(align) {
            return Err(Error::corrupt(format!(
                "buffer at byte {rel} of the tree is not {align}-byte aligned"
            )));
        }
        Ok(self.device_offset + rel as u64)
    }

    /// Pads the host-derived bytes to `align` and returns the device offset of what is
    /// appended next.
    pub(crate) fn extra_aligned(&mut self, align: usize) -> u64 {
        self.extra
            .resize(self.extra.len().next_multiple_of(align), 0);
        self.extra_at + self.extra.len() as u64
    }

    /// Fills the slots of node `k` of the kernel (`node`) and of its children.
    pub(crate) fn fill(&mut self, node: &NodeView<'_>, k: usize) -> Result<()> {
        let kernel = self.kernel;
        let slots = &kernel.nodes[k];
        let b = slots.base;
        self.prm[b] = node.len as u64;
        if let Some(s) = slots.scratch {
            // 16-byte aligned: a string dictionary's scratch is read 16 bytes at a time.
            let at = self.scratch.next_multiple_of(16);
            self.prm[s] = at as u64;
            // A string dictionary's scratch holds its `len + 1` entry offsets, then the same
            // number of packed entries, each list padded to 16 bytes.
            let bytes = if node.ptype == PType::Bytes {
                2 * ((node.len + 1) * 4).next_multiple_of(16)
            } else {
                node.len * node.ptype.byte_width()
            };
            *self.scratch = (at + bytes).next_multiple_of(8);
        }
        match slots.op {
            Op::Plain => plain::fill(self, node, k)?,
            Op::BitPack => bitpack::fill(self, node, b)?,
            Op::BlockPack => blockpack::fill(self, node, b)?,
            Op::For => frame::fill(self, node, b)?,
            Op::ZigZag => zigzag::fill(node)?,
            Op::Delta => delta::fill(self, node, b)?,
            Op::Rle => rle::fill(node)?,
            Op::Dict => dict::fill(node)?,
            Op::Constant => constant::fill(self, node, b)?,
            Op::Patch => patch::fill(self, node, b)?,
            Op::HiPatch => hipatch::fill(self, node, b)?,
            Op::LowBits => lowbits::fill(self, node, b)?,
            Op::Radix => radix::fill(self, node, slots)?,
            Op::FloatToInt => float2int::fill(self, node, b)?,
            Op::AlpRd => alprd::fill(self, node, b)?,
            Op::Ans => ans::fill(self, node, b)?,
            Op::Fsst => fsst::fill(self, node, b)?,
            Op::CharDict | Op::CharTable => chars::fill(self, node, slots)?,
            Op::StrDict => strdict::fill(node)?,
            Op::Words => words::fill(self, node)?,
        }
        // `Shape::of` built the kernel from a tree of this shape, so the children line up.
        for (c, &k) in node.children.iter().zip(&slots.children) {
            self.fill(c, k)?;
        }
        Ok(())
    }
}
