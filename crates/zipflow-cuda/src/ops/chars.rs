//! `chardict16` and `chartable`: bytes as codes of up to 10 bits, MSB first, in 1024-byte
//! blocks that decode on their own; `chartable` picks one of up to 16 tables per block.

use super::{Filler, Op};
use crate::codegen::{Gen, NodeSlots, Writer};
use zipflow_core::{Error, Result};
use zipflow_encodings::{NodeView, chardict, chartable};

/// Slots after the length: byte offsets of the bit stream, of its blocks (per 1024-byte
/// block a `u32` first code bit, the `u32` bit after its last code, its table, and a `u32`
/// of padding) and of its tables (per table 1024 `u16`: the first code of every 10-bit
/// window, character and length), the stream's bytes (all staged by the host after the tree
/// but the stream).
pub(crate) const SLOTS: usize = 4;

/// Checks a `chardict16` or `chartable` node, writes its slots and stages its block list
/// and decoding tables.
pub(crate) fn fill(f: &mut Filler<'_>, node: &NodeView<'_>, slots: &NodeSlots) -> Result<()> {
    let b = slots.base;
    let layout = if slots.op == Op::CharDict {
        chardict::layout(node)?
    } else {
        chartable::layout(node)?
    };
    let bits = layout.payload.len() as u64 * 8;
    if bits > u64::from(u32::MAX) {
        return Err(Error::unsupported(format!(
            "a `{}` stream of {bits} bits on the GPU (at most 2^32 - 1)",
            slots.op.name()
        )));
    }
    f.prm[b + 1] = f.offset(layout.payload, 1)?;
    f.prm[b + 4] = layout.payload.len() as u64;
    // Per block: first code bit, end bit, table, padding; then the tables.
    f.prm[b + 2] = f.extra_aligned(16);
    for (first, end, table) in layout.blocks {
        for v in [first as u32, end as u32, table as u32, 0] {
            f.extra.extend_from_slice(&v.to_le_bytes());
        }
    }
    f.prm[b + 3] = f.extra_at + f.extra.len() as u64;
    for code in &layout.codes {
        for e in code.table10() {
            f.extra.extend_from_slice(&e.to_le_bytes());
        }
    }
    Ok(())
}

impl Gen<'_> {
    /// The stage of a `chardict` or `chartable` node `k`.
    pub(crate) fn char_stage(&mut self, k: usize) -> Result<String> {
        let n = &self.nodes[k];
        let b = n.base;
        let put = self.buf(k, "p0 + j")?;
        let mut w = Writer::at(1);
        w.scope(format!(
            "node {k}: {}: each thread decodes whole 1024-byte blocks, a code at a time",
            n.op.name()
        ))
        .line("// from a table of every 10-bit window's first code")
        .line(format!(
            "const u32 n = (u32)e.prm[{b}], nbytes = (u32)e.prm[{}];",
            b + 4
        ))
        .line(format!("const u8* pay = e.in + e.prm[{}];", b + 1))
        .line(format!(
            "const uint4* blk = (const uint4*)(e.in + e.prm[{}]);",
            b + 2
        ))
        .line(format!(
            "const u16* tabs = (const u16*)(e.in + e.prm[{}]);",
            b + 3
        ))
        .open("for (u32 i = threadIdx.x; i < (n + 1023u) / 1024u; i += ZF_THREADS)")
        .line("const uint4 r = __ldg(blk + i);  // first code bit, end bit, table")
        .line("const u16* t = tabs + (u64)r.z * 1024u;")
        .line("const u32 p0 = i * 1024u, cnt = min(1024u, n - p0);")
        .line("u64 pos = r.x;")
        .open("for (u32 j = 0u; j < cnt; ++j)")
        .line("// 10 bits from `pos`, most significant first; bytes past the stream read as zeros.")
        .line("const u32 at = (u32)min(pos >> 3, (u64)nbytes);")
        .line("u32 w = 0u;")
        .directive("#pragma unroll")
        .line("for (u32 x = 0u; x < 3u; ++x) w = (w << 8) | (at + x < nbytes ? (u32)__ldg(pay + at + x) : 0u);")
        .line("const u32 c = __ldg(t + ((w >> (14u - (u32)(pos & 7u))) & 1023u));")
        .line(format!("{put} = (u8)c;"))
        .line("pos += c >> 8;")
        .close()
        .line("if (pos != (u64)r.y) atomicOr(e.err, ZF_ERR_CHAR);")
        .close()
        .line("__syncthreads();")
        .close();
        Ok(w.finish())
    }
}
