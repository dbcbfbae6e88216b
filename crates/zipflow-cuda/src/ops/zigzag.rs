//! `zigzag`: signed values from their zigzag mapping.

use crate::codegen::{Gen, Writer, acc, ctype};
use zipflow_core::Result;
use zipflow_encodings::NodeView;
use zipflow_encodings::zigzag::View;

/// Slots after the length: none (the child's length slot says the rest).
pub(crate) const SLOTS: usize = 0;

/// Checks a `zigzag` node (it has no slots of its own).
pub(crate) fn fill(node: &NodeView<'_>) -> Result<()> {
    View::parse(node).map(|_| ())
}

/// The body of `zf_n<k>` for `zigzag` node `k`.
pub(crate) fn value(g: &Gen<'_>, k: usize) -> Result<String> {
    let n = &g.nodes[k];
    let t = ctype(n.ptype)?;
    let u = ctype(n.ptype.to_unsigned()).unwrap_or(t);
    let a = acc(n.ptype);
    let c = n.children.first().copied().unwrap_or(0);
    Ok(Writer::at(1)
        .line(format!("const {a} z = ({a})zf_n{c}(e, p);"))
        .line(format!(
            "return ({t})({u})((z >> 1) ^ (({a})0 - (z & ({a})1)));"
        ))
        .finish())
}
