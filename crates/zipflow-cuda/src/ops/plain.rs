//! `plain`: values as they are stored, or byte strings as lengths and bytes.

use super::Filler;
use crate::codegen::{Gen, Writer, ctype};
use zipflow_core::Result;
use zipflow_encodings::NodeView;
use zipflow_encodings::plain::View;

/// Slots after the length: the byte offset of the values in `in` (four slots unused); over
/// byte strings at the root, as `strdict`'s.
pub(crate) const SLOTS: usize = 5;

/// Checks a `plain` node (node `k`) and writes its values' offset; a byte-string root
/// records its bytes.
pub(crate) fn fill(f: &mut Filler<'_>, node: &NodeView<'_>, k: usize) -> Result<()> {
    match View::parse(node)? {
        View::Strings { bytes, .. } => {
            if k == 0 {
                f.string_bytes = Some(bytes.len as u64);
            }
        }
        View::Fixed { values } => {
            let b = f.kernel.nodes[k].base;
            f.prm[b + 1] = f.offset(values, node.ptype.byte_width())?;
        }
    }
    Ok(())
}

/// The body of `zf_n<k>` for `plain` node `k` of numbers.
pub(crate) fn value(g: &Gen<'_>, k: usize) -> Result<String> {
    let n = &g.nodes[k];
    let t = ctype(n.ptype)?;
    let values = n.base + 1;
    Ok(Writer::at(1)
        .line(format!(
            "return __ldg((const {t}*)(e.in + e.prm[{values}]) + p);"
        ))
        .finish())
}
