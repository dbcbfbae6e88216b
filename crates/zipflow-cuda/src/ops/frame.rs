//! `for`: frame of reference, the reference added in the value's unsigned arithmetic.

use super::Filler;
use crate::codegen::{Gen, Writer, acc, ctype};
use zipflow_core::Result;
use zipflow_encodings::NodeView;
use zipflow_encodings::frame::View;

/// Slots after the length: the reference's bits.
pub(crate) const SLOTS: usize = 1;

/// Checks a `for` node and writes its reference.
pub(crate) fn fill(f: &mut Filler<'_>, node: &NodeView<'_>, b: usize) -> Result<()> {
    f.prm[b + 1] = View::parse(node)?.reference;
    Ok(())
}

/// The body of `zf_n<k>` for `for` node `k`.
pub(crate) fn value(g: &Gen<'_>, k: usize) -> Result<String> {
    let n = &g.nodes[k];
    let t = ctype(n.ptype)?;
    let u = ctype(n.ptype.to_unsigned()).unwrap_or(t);
    let a = acc(n.ptype);
    let reference = n.base + 1;
    let c = n.children.first().copied().unwrap_or(0);
    Ok(Writer::at(1)
        .line(format!(
            "return ({t})({u})(({a})zf_n{c}(e, p) + ({a})e.prm[{reference}]);"
        ))
        .finish())
}
