//! `patch`: exceptions scattered over the child's values (shared with `float2int`, whose
//! exceptions are the same two buffers).

use super::Filler;
use crate::codegen::{Gen, Writer, ctype};
use crate::shape::Op;
use zipflow_core::{PType, Result};
use zipflow_encodings::NodeView;
use zipflow_encodings::patch::{Exceptions, View};

/// Slots after the length: byte offsets of the exception positions and values, the
/// exception count.
pub(crate) const SLOTS: usize = 3;

/// Checks a `patch` node and writes its exceptions' slots.
pub(crate) fn fill(f: &mut Filler<'_>, node: &NodeView<'_>, b: usize) -> Result<()> {
    let v = View::parse(node)?;
    fill_exceptions(f, node, b, &v.exceptions)
}

/// Writes the slots of the exceptions of `node` (`patch` or `float2int`): positions,
/// values, count.
pub(crate) fn fill_exceptions(
    f: &mut Filler<'_>,
    node: &NodeView<'_>,
    b: usize,
    ex: &Exceptions<'_>,
) -> Result<()> {
    f.prm[b + 1] = f.offset(ex.positions_bytes, 4)?;
    f.prm[b + 2] = f.offset(ex.values, node.ptype.byte_width())?;
    f.prm[b + 3] = ex.positions.len() as u64;
    Ok(())
}

impl Gen<'_> {
    /// Emits `zf_c<k>`, the values of `patch`/`float2int` node `k` before exceptions, and
    /// returns the exception values' raw type and the expression converting one (`x`).
    pub(crate) fn before_exceptions(&mut self, k: usize) -> Result<(&'static str, String)> {
        let n = self.nodes[k].clone();
        let t = ctype(n.ptype)?;
        let c = n.children.first().copied().unwrap_or(0);
        let scale = n.base + 4;
        let (compute, raw, conv) = match (n.op, n.ptype) {
            (Op::Patch, _) => (format!("return zf_n{c}(e, p);"), t, "x".to_string()),
            (_, PType::F64) => (
                format!(
                    "return (f64)zf_n{c}(e, p) / __longlong_as_double((long long)e.prm[{scale}]);"
                ),
                "u64",
                "__longlong_as_double((long long)x)".to_string(),
            ),
            _ => (
                format!(
                    "return (f32)((f64)zf_n{c}(e, p) / __longlong_as_double((long long)e.prm[{scale}]));"
                ),
                "u32",
                "__int_as_float((int)x)".to_string(),
            ),
        };
        let decl = Writer::at(0)
            .blank()
            .line(format!(
                "// node {k}: {} ({}) before exceptions",
                n.op.name(),
                n.ptype
            ))
            .line(format!(
                "__device__ __forceinline__ {t} zf_c{k}(const Env& e, u32 p) {{ {compute} }}"
            ))
            .finish();
        self.src.push_str(&decl);
        Ok((raw, conv))
    }

    /// The stage of a `patch` or `float2int` node `k`: its child's values, then its exceptions.
    pub(crate) fn patch_stage(&mut self, k: usize) -> Result<String> {
        let n = self.nodes[k].clone();
        let b = self.nodes[k].base;
        let (s0, s1) = self.span(k);
        let (raw, conv) = self.before_exceptions(k)?;
        let (bp, bq) = (self.buf(k, "p")?, self.buf(k, "q")?);
        let (pos, val, cnt) = (b + 1, b + 2, b + 3);
        Ok(Writer::at(1)
            .scope(format!(
                "node {k}: {}: child values, then exceptions",
                n.op.name()
            ))
            .line(format!("const u32 s0 = {s0}, s1 = {s1};"))
            .line(format!(
                "for (u32 p = s0 + threadIdx.x; p < s1; p += ZF_THREADS) {bp} = zf_c{k}(e, p);"
            ))
            .line("__syncthreads();")
            .line(format!("const u32* pos = (const u32*)(e.in + e.prm[{pos}]);"))
            .line(format!("const {raw}* val = (const {raw}*)(e.in + e.prm[{val}]);"))
            .line(format!("const u32 cnt = (u32)e.prm[{cnt}];"))
            .open("for (u32 j = zf_lower_bound(pos, cnt, s0) + threadIdx.x; j < cnt; j += ZF_THREADS)")
            .line("const u32 q = __ldg(pos + j);")
            .line("if (q >= s1) break;")
            .line(format!("const {raw} x = __ldg(val + j);"))
            .line(format!("{bq} = {conv};"))
            .close()
            .line("__syncthreads();")
            .close()
            .finish())
    }
}

/// The body of `zf_n<k>` for `patch` or `float2int` node `k` in a chunk kernel: a binary
/// search over the exception positions, else the value before exceptions.
pub(crate) fn value(g: &mut Gen<'_>, k: usize) -> Result<String> {
    let b = g.nodes[k].base;
    let (raw, conv) = g.before_exceptions(k)?;
    let (pos, val, cnt) = (b + 1, b + 2, b + 3);
    Ok(Writer::at(1)
        .line(format!("const u32 cnt = (u32)e.prm[{cnt}];"))
        .open("if (cnt != 0u)")
        .line(format!(
            "const u32* pos = (const u32*)(e.in + e.prm[{pos}]);"
        ))
        .line("const u32 j = zf_lower_bound(pos, cnt, p);")
        .open("if (j < cnt && __ldg(pos + j) == p)")
        .line(format!(
            "const {raw} x = __ldg((const {raw}*)(e.in + e.prm[{val}]) + j);"
        ))
        .line(format!("return {conv};"))
        .close()
        .close()
        .line(format!("return zf_c{k}(e, p);"))
        .finish())
}
