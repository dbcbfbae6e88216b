//! `constant`: one value repeated.

use super::Filler;
use crate::codegen::{Gen, Writer, ctype};
use zipflow_core::{PType, Result};
use zipflow_encodings::NodeView;
use zipflow_encodings::constant::View;

/// Slots after the length: the value's bits.
pub(crate) const SLOTS: usize = 1;

/// Checks a `constant` node and writes its value.
pub(crate) fn fill(f: &mut Filler<'_>, node: &NodeView<'_>, b: usize) -> Result<()> {
    f.prm[b + 1] = View::parse(node)?.bits;
    Ok(())
}

/// The body of `zf_n<k>` for `constant` node `k`.
pub(crate) fn value(g: &Gen<'_>, k: usize) -> Result<String> {
    let n = &g.nodes[k];
    let t = ctype(n.ptype)?;
    let value = n.base + 1;
    let ret = match n.ptype {
        PType::F32 => format!("return __int_as_float((int)(u32)e.prm[{value}]);"),
        PType::F64 => format!("return __longlong_as_double((long long)e.prm[{value}]);"),
        _ => format!("return ({t})e.prm[{value}];"),
    };
    Ok(Writer::at(1).line(ret).finish())
}
