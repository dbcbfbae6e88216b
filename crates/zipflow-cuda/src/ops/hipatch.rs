//! `hipatch`: exceptions whose high bits are ORed over their low bits, found by vector.

use super::Filler;
use crate::codegen::{Gen, Writer, acc, ctype};
use zipflow_core::Result;
use zipflow_encodings::{NodeView, hipatch};

/// Slots after the length: the low bits' width `W`, the exception count.
pub(crate) const SLOTS: usize = 2;

/// Checks a `hipatch` node and writes its width and exception count.
pub(crate) fn fill(f: &mut Filler<'_>, node: &NodeView<'_>, b: usize) -> Result<()> {
    let w = hipatch::View::parse(node)?.width;
    f.prm[b + 1] = u64::from(w);
    f.prm[b + 2] = node.children[2].len as u64;
    Ok(())
}

impl Gen<'_> {
    pub(crate) fn hipatch_vector(&mut self, k: usize) {
        let n = &self.nodes[k];
        let (b, counts, offsets) = (n.base, n.children[1], n.children[2]);
        let cnt = b + 2;
        let mut w = Writer::at(0);
        w.blank()
            .line(format!(
                "// node {k}: hipatch: the exceptions [j0, j1) of vector v; every lane of the warp calls it."
            ))
            .open(format!(
                "__device__ __forceinline__ void zf_hp{k}(const Env& e, u32 v, u32& j0, u32& j1)"
            ))
            .line(format!(
                "const u32 lane = threadIdx.x & 31u, cnt = (u32)e.prm[{cnt}], n = (u32)e.prm[{b}];"
            ))
            .line("u32 s = 0u;")
            .line(format!(
                "for (u32 i = lane; i < v; i += 32u) s += (u32)zf_n{counts}(e, i);"
            ))
            .directive("#pragma unroll")
            .line("for (u32 d = 16u; d > 0u; d >>= 1) s += __shfl_xor_sync(0xffffffffu, s, d);")
            .line(format!("const u32 end = s + (u32)zf_n{counts}(e, v);"))
            .line("const bool last = v + 1u == (n + 1023u) >> 10;")
            .line("if (lane == 0u && (end > cnt || end < s || (last && end != cnt))) atomicOr(e.err, ZF_ERR_PATCH);")
            .line("j1 = min(end, cnt);")
            .line("j0 = min(s, j1);")
            .close()
            .blank()
            .line(format!(
                "// node {k}: hipatch: the position of exception j (of vector v, whose first is j0), or ~0u."
            ))
            .open(format!(
                "__device__ __forceinline__ u32 zf_hpq{k}(const Env& e, u32 v, u32 j, u32 j0)"
            ))
            .line(format!(
                "const u32 off = (u32)zf_n{offsets}(e, j), q = v * 1024u + off;"
            ))
            .open(format!(
                "if (off >= 1024u || q >= (u32)e.prm[{b}] || (j > j0 && off <= (u32)zf_n{offsets}(e, j - 1u)))"
            ))
            .line("atomicOr(e.err, ZF_ERR_PATCH);")
            .line("return ~0u;")
            .close()
            .line("return q;")
            .close();
        self.src.push_str(&w.finish());
    }

    /// Writes the loop that ORs vector `v`'s exceptions of node `k` over `slot` (indexed by `q`).
    fn hipatch_apply(&self, w: &mut Writer, k: usize, slot: &str) -> Result<()> {
        let n = &self.nodes[k];
        let t = ctype(n.ptype)?;
        let a = acc(n.ptype);
        let high = n.children[3];
        w.line("u32 j0, j1;")
            .line(format!("zf_hp{k}(e, v, j0, j1);"))
            .line(format!("const u32 W = (u32)e.prm[{}];", n.base + 1))
            .open("for (u32 j = j0 + (threadIdx.x & 31u); j < j1; j += 32u)")
            .line(format!("const u32 q = zf_hpq{k}(e, v, j, j0);"))
            .line("if (q == ~0u) continue;")
            .line(format!("const {a} h = ({a})zf_n{high}(e, j) << W;"))
            .line(format!("{slot} = ({t})(((({a}){slot}) | h));"))
            .close();
        Ok(())
    }

    /// The stage of a `hipatch` node `k` outside a tile kernel's lanes.
    pub(crate) fn hipatch_stage(&mut self, k: usize) -> Result<String> {
        let (s0, s1) = self.span(k);
        let children = self.nodes[k].children.clone();
        let low = children.first().copied().unwrap_or(0);
        let mut w = Writer::at(1);
        w.scope(format!(
            "node {k}: hipatch: the low bits, then each vector's exceptions ORed in"
        ))
        .line(format!("const u32 s0 = {s0}, s1 = {s1};"))
        .line(format!(
            "for (u32 p = s0 + threadIdx.x; p < s1; p += ZF_THREADS) {} = zf_n{low}(e, p);",
            self.buf(k, "p")?
        ))
        .line("__syncthreads();")
        .open("for (u32 v = (s0 >> 10) + (threadIdx.x >> 5); v < (s1 + 1023u) >> 10; v += ZF_THREADS / 32u)");
        self.hipatch_apply(&mut w, k, &self.buf(k, "q")?)?;
        w.close().line("__syncthreads();").close();
        Ok(w.finish())
    }
}
