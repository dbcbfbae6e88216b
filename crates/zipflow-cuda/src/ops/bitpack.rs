//! `bitpack`: FastLanes 1024-value interleaved bit-packing, its width compiled in.

use super::Filler;
use crate::codegen::{Gen, NodeSlots, Writer, acc, ctype};
use zipflow_core::Result;
use zipflow_encodings::NodeView;
use zipflow_encodings::bitpack::View;

/// Slots after the length: the byte offset of the packed words, the bit width.
pub(crate) const SLOTS: usize = 2;

/// The width a kernel is compiled for: the node's, when it fits the value type (a wider one
/// is left to the descriptor check).
pub(crate) fn compiled_width(node: &NodeView<'_>) -> Option<u32> {
    let w = zipflow_encodings::bitpack::declared_width(node)?;
    (w as usize <= node.ptype.byte_width() * 8).then_some(w)
}

/// Checks a `bitpack` node and writes its words' offset and width.
pub(crate) fn fill(f: &mut Filler<'_>, node: &NodeView<'_>, b: usize) -> Result<()> {
    let v = View::parse(node)?;
    f.prm[b + 1] = f.offset(v.packed, node.ptype.byte_width())?;
    f.prm[b + 2] = u64::from(v.width);
    Ok(())
}

/// The body of `zf_n<k>` for `bitpack` node `k`.
pub(crate) fn value(g: &Gen<'_>, k: usize) -> Result<String> {
    let n = &g.nodes[k];
    let t = ctype(n.ptype)?;
    let u = ctype(n.ptype.to_unsigned()).unwrap_or(t);
    let a = acc(n.ptype);
    let (words, width) = (n.base + 1, width_expr(n));
    let bits = n.ptype.byte_width() * 8;
    Ok(Writer::at(1)
        .line(format!(
            "return ({t})zf_unpack<{u}, {a}, {bits}>((const {u}*)(e.in + e.prm[{words}]), {width}, p);"
        ))
        .finish())
}

/// A `bitpack` node's width in generated code: a literal when the kernel is compiled for
/// it, else read from the chunk's descriptor.
pub(crate) fn width_expr(n: &NodeSlots) -> String {
    match n.width {
        Some(w) => format!("{w}u"),
        None => format!("(u32)e.prm[{}]", n.base + 2),
    }
}
