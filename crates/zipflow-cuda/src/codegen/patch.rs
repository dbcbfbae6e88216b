//! Exceptions: `patch` and `float2int` (child values, then each exception written at its
//! position) and `hipatch` (low bits, then each vector's exceptions' high bits ORed in), as
//! stages of chunk kernels and inside tile kernels.

use super::{Gen, acc, ctype};
use crate::shape::Op;
use zipflow_core::{PType, Result};

impl Gen<'_> {
    pub(super) fn before_exceptions(&mut self, k: usize) -> Result<(&'static str, String)> {
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
        self.src.push_str(&format!(
            "\n// node {k}: {} ({}) before exceptions\n__device__ __forceinline__ {t} zf_c{k}(const Env& e, u32 p) {{ {compute} }}\n",
            n.op.name(),
            n.ptype
        ));
        Ok((raw, conv))
    }

    pub(super) fn hipatch_vector(&mut self, k: usize) {
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

    /// The stage of a `patch` or `float2int` node `k`: its child's values, then its exceptions.
    pub(super) fn patch_stage(&mut self, k: usize) -> Result<String> {
        let n = self.nodes[k].clone();
        let b = self.nodes[k].base;
        let (s0, s1) = self.span(k);
        Ok({
            let (raw, conv) = self.before_exceptions(k)?;
            format!(
                r#"  {{ // node {k}: {name}: child values, then exceptions
    const u32 s0 = {s0}, s1 = {s1};
    for (u32 p = s0 + threadIdx.x; p < s1; p += ZF_THREADS) {bp} = zf_c{k}(e, p);
    __syncthreads();
    const u32* pos = (const u32*)(e.in + e.prm[{pos}]);
    const {raw}* val = (const {raw}*)(e.in + e.prm[{val}]);
    const u32 cnt = (u32)e.prm[{cnt}];
    for (u32 j = zf_lower_bound(pos, cnt, s0) + threadIdx.x; j < cnt; j += ZF_THREADS) {{
      const u32 q = __ldg(pos + j);
      if (q >= s1) break;
      const {raw} x = __ldg(val + j);
      {bq} = {conv};
    }}
    __syncthreads();
  }}
"#,
                name = n.op.name(),
                bp = self.buf(k, "p")?,
                bq = self.buf(k, "q")?,
                pos = b + 1,
                val = b + 2,
                cnt = b + 3,
            )
        })
    }

    /// The stage of a `hipatch` node `k` outside a tile kernel's lanes.
    pub(super) fn hipatch_stage(&mut self, k: usize) -> Result<String> {
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
