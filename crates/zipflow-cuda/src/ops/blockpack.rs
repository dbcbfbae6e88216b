//! `blockpack`: bit-packing with a width and a reference per 1024-value vector.

use super::Filler;
use crate::codegen::{Gen, Writer, acc, ctype};
use zipflow_core::{Result, VECTOR_LEN};
use zipflow_encodings::{NodeView, blockpack};

/// Slots after the length: the byte offset of the packed words, the byte offset of the
/// vector table (per 1024-value vector, a `u32` word offset and a `u32` bit width, staged by
/// the host after the tree).
pub(crate) const SLOTS: usize = 2;

/// Checks a `blockpack` node, writes its words' offset and stages its vector table.
pub(crate) fn fill(f: &mut Filler<'_>, node: &NodeView<'_>, b: usize) -> Result<()> {
    let width = node.ptype.byte_width();
    let runs = blockpack::View::parse(node)?.runs;
    f.prm[b + 1] = f.offset(node.buffer(1, "packed")?, width)?;
    // Per vector: where its words start (in words) and its width.
    f.prm[b + 2] = f.extra_aligned(8);
    let per_bit = (VECTOR_LEN / (width * 8)) as u32;
    let mut at = 0u32;
    for r in runs {
        let w = r & 0xff;
        for _ in 0..r >> 8 {
            f.extra.extend_from_slice(&at.to_le_bytes());
            f.extra.extend_from_slice(&w.to_le_bytes());
            at += w * per_bit;
        }
    }
    Ok(())
}

/// The body of `zf_n<k>` for `blockpack` node `k`.
pub(crate) fn value(g: &Gen<'_>, k: usize) -> Result<String> {
    let n = &g.nodes[k];
    let t = ctype(n.ptype)?;
    let u = ctype(n.ptype.to_unsigned()).unwrap_or(t);
    let a = acc(n.ptype);
    let b = n.base;
    let (words, tab) = (b + 1, b + 2);
    let c = n.children.first().copied().unwrap_or(0);
    let bits = n.ptype.byte_width() * 8;
    Ok(Writer::at(1)
        .line("// Vector p / 1024: its words' offset and its width, then its reference.")
        .line(format!(
            "const uint2 vt = __ldg((const uint2*)(e.in + e.prm[{tab}]) + (p >> 10));"
        ))
        .line(format!(
            "const {u}* w = (const {u}*)(e.in + e.prm[{words}]) + vt.x;"
        ))
        .line(format!(
            "return ({t})({u})(zf_unpack<{u}, {a}, {bits}>(w, vt.y, p & 1023u) + ({a})({u})zf_n{c}(e, p >> 10));"
        ))
        .finish())
}
