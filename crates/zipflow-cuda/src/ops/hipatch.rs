//! `hipatch`: exceptions whose high bits are ORed over their low bits, found by vector.

use super::Filler;
use crate::codegen::{Gen, acc, ctype};
use zipflow_core::Result;
use zipflow_encodings::{NodeView, hipatch};

/// Slots after the length: the low bits' width `W`, the exception count.
pub(crate) const SLOTS: usize = 2;

/// Checks a `hipatch` node and writes its width and exception count.
pub(crate) fn fill(f: &mut Filler<'_>, node: &NodeView<'_>, b: usize) -> Result<()> {
    let w = hipatch::check(node)?;
    f.prm[b + 1] = u64::from(w);
    f.prm[b + 2] = node.children[2].len as u64;
    Ok(())
}

impl Gen<'_> {
    pub(crate) fn hipatch_vector(&mut self, k: usize) {
        let n = &self.nodes[k];
        let (b, counts, offsets) = (n.base, n.children[1], n.children[2]);
        self.src.push_str(&format!(
            r#"
// node {k}: hipatch: the exceptions [j0, j1) of vector v; every lane of the warp calls it.
__device__ __forceinline__ void zf_hp{k}(const Env& e, u32 v, u32& j0, u32& j1) {{
  const u32 lane = threadIdx.x & 31u, cnt = (u32)e.prm[{cnt}], n = (u32)e.prm[{b}];
  u32 s = 0u;
  for (u32 i = lane; i < v; i += 32u) s += (u32)zf_n{counts}(e, i);
#pragma unroll
  for (u32 d = 16u; d > 0u; d >>= 1) s += __shfl_xor_sync(0xffffffffu, s, d);
  const u32 end = s + (u32)zf_n{counts}(e, v);
  const bool last = v + 1u == (n + 1023u) >> 10;
  if (lane == 0u && (end > cnt || end < s || (last && end != cnt))) atomicOr(e.err, ZF_ERR_PATCH);
  j1 = min(end, cnt);
  j0 = min(s, j1);
}}

// node {k}: hipatch: the position of exception j (of vector v, whose first is j0), or ~0u.
__device__ __forceinline__ u32 zf_hpq{k}(const Env& e, u32 v, u32 j, u32 j0) {{
  const u32 off = (u32)zf_n{offsets}(e, j), q = v * 1024u + off;
  if (off >= 1024u || q >= (u32)e.prm[{b}] || (j > j0 && off <= (u32)zf_n{offsets}(e, j - 1u))) {{
    atomicOr(e.err, ZF_ERR_PATCH);
    return ~0u;
  }}
  return q;
}}
"#,
            cnt = b + 2,
        ));
    }

    fn hipatch_apply(&self, k: usize, slot: &str) -> Result<String> {
        let n = &self.nodes[k];
        let t = ctype(n.ptype)?;
        let a = acc(n.ptype);
        let high = n.children[3];
        Ok(format!(
            r#"      u32 j0, j1;
      zf_hp{k}(e, v, j0, j1);
      const u32 W = (u32)e.prm[{w}];
      for (u32 j = j0 + (threadIdx.x & 31u); j < j1; j += 32u) {{
        const u32 q = zf_hpq{k}(e, v, j, j0);
        if (q == ~0u) continue;
        const {a} h = ({a})zf_n{high}(e, j) << W;
        {slot} = ({t})(((({a}){slot}) | h));
      }}
"#,
            w = n.base + 1,
        ))
    }

    /// The stage of a `hipatch` node `k` outside a tile kernel's lanes.
    pub(crate) fn hipatch_stage(&mut self, k: usize) -> Result<String> {
        let (s0, s1) = self.span(k);
        let children = self.nodes[k].children.clone();
        let ch = |i: usize| children.get(i).copied().unwrap_or(0);
        Ok(format!(
            r#"  {{ // node {k}: hipatch: the low bits, then each vector's exceptions ORed in
    const u32 s0 = {s0}, s1 = {s1};
    for (u32 p = s0 + threadIdx.x; p < s1; p += ZF_THREADS) {bp} = zf_n{low}(e, p);
    __syncthreads();
    for (u32 v = (s0 >> 10) + (threadIdx.x >> 5); v < (s1 + 1023u) >> 10; v += ZF_THREADS / 32u) {{
{apply}    }}
    __syncthreads();
  }}
"#,
            bp = self.buf(k, "p")?,
            low = ch(0),
            apply = self.hipatch_apply(k, &self.buf(k, "q")?)?,
        ))
    }
}
