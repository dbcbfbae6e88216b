//! `delta`: a wrapping prefix sum over the chunk, from a base.

use super::Filler;
use crate::codegen::runs::rle_tiles;
use crate::codegen::{Gen, acc, ctype};
use zipflow_core::Result;
use zipflow_encodings::NodeView;
use zipflow_encodings::delta::View;

/// Slots after the length: the base's bits.
pub(crate) const SLOTS: usize = 1;

/// Checks a `delta` node and writes its base.
pub(crate) fn fill(f: &mut Filler<'_>, node: &NodeView<'_>, b: usize) -> Result<()> {
    f.prm[b + 1] = View::parse(node)?.base;
    Ok(())
}

impl Gen<'_> {
    pub(crate) fn delta_rle_stage(&mut self, k: usize, rle: usize) -> Result<String> {
        let n = &self.nodes[k];
        let r = &self.nodes[rle];
        let t = ctype(n.ptype)?;
        let u = ctype(n.ptype.to_unsigned()).unwrap_or(t);
        let a = acc(n.ptype);
        let (values, runs) = (r.children[0], r.children[1]);
        let loads = self.rle_loads(t, values, runs)?;
        let ahead = self.runs_prefetch(values, runs);
        let (load, place) = rle_tiles(t, loads, ahead, self.nodes[values].base, Some(a));
        Ok(format!(
            r#"  {{ // node {k}: delta over rle (node {rle}), in one pass over run tiles: each run's first
    // value from an exclusive sum of value * length, then each output position of the tile
    // (coalesced) from its run's, the runs counted from a map of where they start
    __shared__ u32 zf_rs{k}[ZF_RLE_PADDED + 1u];
    __shared__ {pair} zf_rp{k}[ZF_RLE_PADDED];
    __shared__ __align__(16) u32 zf_hd{k}[2u * ZF_HEAD_BITS / 32u];
    u32* const rs = zf_rs{k};
    u32* const zf_hd = zf_hd{k};
    {pair}* const rp = zf_rp{k};
    const u32 n = (u32)e.prm[{len}];
    {a} dcarry = ({a})e.prm[{base}];
{load}    for (u32 r0 = 0u; r0 < nruns; r0 += ZF_RLE_TILE) {{
      // This tile's head map, and the last tile's cleared (its walk passed a barrier since).
      u32* const hd = zf_hd + hp;
      zf_head_clear(zf_hd + (hp ^ ZF_HEAD_BITS / 32u));
      hp ^= ZF_HEAD_BITS / 32u;
{place}      zf_rle_walk_heads(rs, hd, rs[0], rs[zf_rle_slot(ZF_RLE_TILE)], [&](u32 q, u32 j) {{
        const {pair} bv = rp[zf_rle_slot(j)];
        o[q] = ({t})({u})(bv.x + bv.y * ({a})q);
      }});
      carry += tot;
      dcarry += dtot;
      __syncthreads();
    }}
    if (threadIdx.x == 0u && carry != n) atomicOr(e.err, ZF_ERR_RLE_SUM);
    __syncthreads();
  }}
"#,
            len = self.nodes[rle].base,
            base = n.base + 1,
            pair = if a == "u64" { "ulonglong2" } else { "uint2" },
        ))
    }

    /// The stage of a `delta` node `k`: a wrapping prefix sum over the chunk, tile by tile.
    pub(crate) fn delta_stage(&mut self, k: usize) -> Result<String> {
        let b = self.nodes[k].base;
        let t = ctype(self.nodes[k].ptype)?;
        let u = ctype(self.nodes[k].ptype.to_unsigned()).unwrap_or(t);
        let a = acc(self.nodes[k].ptype);
        let children = self.nodes[k].children.clone();
        let ch = |i: usize| children.get(i).copied().unwrap_or(0);
        Ok(format!(
            r#"  {{ // node {k}: delta: wrapping prefix sum over the chunk, tile by tile
    const u32 n = (u32)e.prm[{b}];
    const u32 lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    {a} carry = ({a})e.prm[{base}];
    // Each thread sums ZF_DELTA_ITEMS consecutive values in registers; one warp scan of the
    // threads' sums and the warps' totals give each thread its offset. The tile goes out
    // through shared memory in coalesced rows; both shared arrays alternate between two
    // halves, so the next tile needs no barrier before it writes them.
    __shared__ {a} zf_w2{k}[2u * (ZF_THREADS / 32u)];
    __shared__ {a} zf_st{k}[2u * ZF_THREADS * ZF_DELTA_ITEMS];
    u32 half = 0u;
    // The next tile's differences are read before this tile's second barrier, so their
    // loads overlap the wait.
    {a} nx[ZF_DELTA_ITEMS];
{first}
    for (u32 t0 = 0u; t0 < n; t0 += ZF_THREADS * ZF_DELTA_ITEMS) {{
      const u32 first = t0 + threadIdx.x * ZF_DELTA_ITEMS;
      {a} v[ZF_DELTA_ITEMS];
      {a} run = ({a})0;
#pragma unroll
      for (u32 i = 0u; i < ZF_DELTA_ITEMS; ++i) {{
        run += nx[i];
        v[i] = run;
      }}
      {a} x = run;
#pragma unroll
      for (u32 d = 1u; d < 32u; d <<= 1) {{
        const {a} y = __shfl_up_sync(0xffffffffu, x, d);
        if (lane >= d) x += y;
      }}
      {a}* wt = zf_w2{k} + half * (ZF_THREADS / 32u);
      {a}* st = zf_st{k} + half * (ZF_THREADS * ZF_DELTA_ITEMS);
      if (lane == 31u) wt[warp] = x;
      __syncthreads();
      {a} off = x - run, tot = ({a})0;
      for (u32 w = 0u; w < ZF_THREADS / 32u; ++w) {{
        const {a} t = wt[w];
        if (w < warp) off += t;
        tot += t;
      }}
      off += carry;
#pragma unroll
      for (u32 i = 0u; i < ZF_DELTA_ITEMS; ++i) {{
        st[threadIdx.x * ZF_DELTA_ITEMS + i] = off + v[i];
      }}
{next}      __syncthreads();
#pragma unroll
      for (u32 i = 0u; i < ZF_DELTA_ITEMS; ++i) {{
        const u32 p = t0 + i * ZF_THREADS + threadIdx.x;
        if (p < n) {bi} = ({t})({u})st[i * ZF_THREADS + threadIdx.x];
      }}
      carry += tot;
      half ^= 1u;
    }}
    __syncthreads();
  }}
"#,
            base = b + 1,
            bi = self.buf(k, "p")?,
            first = self.load4(ch(0), "threadIdx.x * ZF_DELTA_ITEMS", "n", "nx", a)?,
            next = self.load4(ch(0), "(first + ZF_THREADS * ZF_DELTA_ITEMS)", "n", "nx", a)?,
        ))
    }
}
