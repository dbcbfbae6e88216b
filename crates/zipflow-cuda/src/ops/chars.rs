//! `chardict16` and `chartable`: bytes as codes of up to 10 bits, MSB first, in 1024-byte
//! blocks that decode on their own; `chartable` picks one of up to 16 tables per block.

use super::{Filler, Op};
use crate::codegen::{Gen, NodeSlots};
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
        let n = self.nodes[k].clone();
        let b = self.nodes[k].base;
        Ok(format!(
            r#"  {{ // node {k}: {name}: each thread decodes whole 1024-byte blocks, a code at a time
    // from a table of every 10-bit window's first code
    const u32 n = (u32)e.prm[{b}], nbytes = (u32)e.prm[{nbytes}];
    const u8* pay = e.in + e.prm[{pay}];
    const uint4* blk = (const uint4*)(e.in + e.prm[{blocks}]);
    const u16* tabs = (const u16*)(e.in + e.prm[{tables}]);
    for (u32 i = threadIdx.x; i < (n + 1023u) / 1024u; i += ZF_THREADS) {{
      const uint4 r = __ldg(blk + i);  // first code bit, end bit, table
      const u16* t = tabs + (u64)r.z * 1024u;
      const u32 p0 = i * 1024u, cnt = min(1024u, n - p0);
      u64 pos = r.x;
      for (u32 j = 0u; j < cnt; ++j) {{
        // 10 bits from `pos`, most significant first; bytes past the stream read as zeros.
        const u32 at = (u32)min(pos >> 3, (u64)nbytes);
        u32 w = 0u;
#pragma unroll
        for (u32 x = 0u; x < 3u; ++x) w = (w << 8) | (at + x < nbytes ? (u32)__ldg(pay + at + x) : 0u);
        const u32 c = __ldg(t + ((w >> (14u - (u32)(pos & 7u))) & 1023u));
        {put} = (u8)c;
        pos += c >> 8;
      }}
      if (pos != (u64)r.y) atomicOr(e.err, ZF_ERR_CHAR);
    }}
    __syncthreads();
  }}
"#,
            name = n.op.name(),
            pay = b + 1,
            blocks = b + 2,
            tables = b + 3,
            nbytes = b + 4,
            put = self.buf(k, "p0 + j")?,
        ))
    }
}
