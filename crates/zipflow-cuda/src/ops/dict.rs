//! `dict`: codes into a sorted dictionary of values.

use crate::codegen::{DICT_SHARED, Gen, ctype};
use zipflow_core::Result;
use zipflow_encodings::NodeView;
use zipflow_encodings::dict::View;

/// Slots after the length: none (the dictionary's size is its values child's length slot).
pub(crate) const SLOTS: usize = 0;

/// Checks a `dict` node (it has no slots of its own).
pub(crate) fn fill(node: &NodeView<'_>) -> Result<()> {
    View::parse(node).map(|_| ())
}

/// The body of `zf_n<k>` for `dict` node `k`. A dictionary of at most `DICT_SHARED` entries
/// whose values need no stage is decoded once per block into shared memory (the kernel's
/// prologue), so each lookup is one shared load instead of decoding its entry again (a
/// bit-unpack at a random position, for packed values).
pub(crate) fn value(g: &mut Gen<'_>, k: usize) -> Result<String> {
    let n = &g.nodes[k];
    let t = ctype(n.ptype)?;
    let ch = |i: usize| n.children.get(i).copied().unwrap_or(0);
    let (codes, values) = (ch(0), ch(1));
    let vlen = g.nodes[values].base;
    if g.has_stage(values) {
        return Ok(format!(
            "  const u32 c = (u32)zf_n{codes}(e, p);\n  if (c >= (u32)e.prm[{vlen}]) {{ atomicOr(e.err, ZF_ERR_DICT); return ({t})0; }}\n  return zf_n{values}(e, c);\n"
        ));
    }
    g.src
        .push_str(&format!("\n__shared__ {t} zf_d{k}[{DICT_SHARED}];\n"));
    g.prologue.push_str(&format!(
        "  {{ // node {k}: dict entries to shared memory\n    const u32 n = (u32)e.prm[{vlen}];\n    if (n <= {DICT_SHARED}u) for (u32 i = threadIdx.x; i < n; i += ZF_THREADS) zf_d{k}[i] = zf_n{values}(e, i);\n    __syncthreads();\n  }}\n"
    ));
    Ok(format!(
        "  const u32 c = (u32)zf_n{codes}(e, p);\n  const u32 n = (u32)e.prm[{vlen}];\n  if (c >= n) {{ atomicOr(e.err, ZF_ERR_DICT); return ({t})0; }}\n  return n <= {DICT_SHARED}u ? zf_d{k}[c] : zf_n{values}(e, c);\n"
    ))
}
