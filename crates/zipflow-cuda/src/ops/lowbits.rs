//! `lowbits`: each integer joined from its high bits and its low `S` bits.

use super::Filler;
use crate::codegen::{Gen, Writer, ctype};
use zipflow_core::{Error, Result};
use zipflow_encodings::NodeView;
use zipflow_encodings::lowbits::View;

/// Slots after the length: `S`, the bits of the low part.
pub(crate) const SLOTS: usize = 1;

/// Checks a `lowbits` node and writes its cut.
pub(crate) fn fill(f: &mut Filler<'_>, node: &NodeView<'_>, b: usize) -> Result<()> {
    let view = View::parse(node)?;
    f.prm[b + 1] = u64::from(view.shift);
    Ok(())
}

/// The body of `zf_n<k>` for `lowbits` node `k`. The low part is masked to `S` bits as on
/// the CPU, so a damaged stream gives the same wrong values on both.
pub(crate) fn value(g: &Gen<'_>, k: usize) -> Result<String> {
    let n = &g.nodes[k];
    let t = ctype(n.ptype)?;
    let u = ctype(n.ptype.to_unsigned()).unwrap_or(t);
    let (Some(&high), Some(&low)) = (n.children.first(), n.children.get(1)) else {
        return Err(Error::corrupt("lowbits node without its two children"));
    };
    let s = n.base + 1;
    Ok(Writer::at(1)
        .line(format!("const u32 s = (u32)e.prm[{s}];"))
        .line(format!(
            "const u64 bits = ((u64)({u})zf_n{high}(e, p) << s) | ((u64)({u})zf_n{low}(e, p) & ((1ull << s) - 1ull));"
        ))
        .line(format!("return ({t})({u})bits;"))
        .finish())
}
