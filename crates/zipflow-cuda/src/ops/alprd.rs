//! `alprd`: each float's bits joined from its left part (above bit `R`) and its right part.

use super::Filler;
use crate::codegen::{Gen, Writer};
use zipflow_core::{Error, PType, Result};
use zipflow_encodings::NodeView;
use zipflow_encodings::alprd::View;

/// Slots after the length: `R`, the right part's bits, and `S`, the zero bits below them
/// that are not stored.
pub(crate) const SLOTS: usize = 2;

/// Checks an `alprd` node and writes its split and shift.
pub(crate) fn fill(f: &mut Filler<'_>, node: &NodeView<'_>, b: usize) -> Result<()> {
    let view = View::parse(node)?;
    f.prm[b + 1] = u64::from(view.right_bits);
    f.prm[b + 2] = u64::from(view.shift);
    Ok(())
}

/// The body of `zf_n<k>` for `alprd` node `k`. The right part is shifted up and masked as on
/// the CPU, so a damaged stream gives the same wrong bits on both.
pub(crate) fn value(g: &Gen<'_>, k: usize) -> Result<String> {
    let n = &g.nodes[k];
    let (r, sh) = (n.base + 1, n.base + 2);
    let (Some(&left), Some(&right)) = (n.children.first(), n.children.get(1)) else {
        return Err(Error::corrupt("alprd node without its two children"));
    };
    let mut w = Writer::at(1);
    Ok(match n.ptype {
        PType::F64 => w
            .line(format!("const u32 r = (u32)e.prm[{r}];"))
            .line(format!("const u32 sh = (u32)e.prm[{sh}];"))
            .line(format!(
                "const u64 bits = ((u64)zf_n{left}(e, p) << r) | (((u64)zf_n{right}(e, p) << sh) & ((1ull << r) - 1ull));"
            ))
            .line("return __longlong_as_double((long long)bits);"),
        PType::F32 => w
            .line(format!("const u32 r = (u32)e.prm[{r}];"))
            .line(format!("const u32 sh = (u32)e.prm[{sh}];"))
            .line(format!(
                "const u32 bits = ((u32)zf_n{left}(e, p) << r) | (((u32)zf_n{right}(e, p) << sh) & ((1u << r) - 1u));"
            ))
            .line("return __uint_as_float(bits);"),
        p => return Err(Error::unsupported(format!("`alprd` over {p} values"))),
    }
    .finish())
}
