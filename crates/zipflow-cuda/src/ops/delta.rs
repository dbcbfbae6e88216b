//! `delta`: a wrapping prefix sum over the chunk, from a base.

use super::Filler;
use crate::codegen::runs::RunTiles;
use crate::codegen::{Gen, Writer, acc, ctype};
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
    /// The stage of a root `delta` node `k` over the `rle` node `rle`, decoded in one pass.
    pub(crate) fn delta_rle_stage(&mut self, k: usize, rle: usize) -> Result<String> {
        let n = &self.nodes[k];
        let r = &self.nodes[rle];
        let t = ctype(n.ptype)?;
        let u = ctype(n.ptype.to_unsigned()).unwrap_or(t);
        let a = acc(n.ptype);
        let (values, runs, base) = (r.children[0], r.children[1], n.base + 1);
        let len = r.base;
        let pair = if a == "u64" { "ulonglong2" } else { "uint2" };
        let tiles = RunTiles {
            t,
            loads: self.rle_loads(t, values, runs)?,
            prefetch: self.runs_prefetch(values, runs),
            vlen: self.nodes[values].base,
            delta: Some(a),
        };
        let mut w = Writer::at(1);
        w.scope(format!(
            "node {k}: delta over rle (node {rle}), in one pass over run tiles: each run's first"
        ))
        .line("// value from an exclusive sum of value * length, then each output position of the tile")
        .line("// (coalesced) from its run's, the runs counted from a map of where they start")
        .line(format!("__shared__ u32 zf_rs{k}[ZF_RLE_PADDED + 1u];"))
        .line(format!("__shared__ {pair} zf_rp{k}[ZF_RLE_PADDED];"))
        .line(format!(
            "__shared__ __align__(16) u32 zf_hd{k}[2u * ZF_HEAD_BITS / 32u];"
        ))
        .line(format!("u32* const rs = zf_rs{k};"))
        .line(format!("u32* const zf_hd = zf_hd{k};"))
        .line(format!("{pair}* const rp = zf_rp{k};"))
        .line(format!("const u32 n = (u32)e.prm[{len}];"))
        .line(format!("{a} dcarry = ({a})e.prm[{base}];"));
        tiles.load(&mut w);
        w.open("for (u32 r0 = 0u; r0 < nruns; r0 += ZF_RLE_TILE)")
            .line("// This tile's head map, and the last tile's cleared (its walk passed a barrier since).")
            .line("u32* const hd = zf_hd + hp;")
            .line("zf_head_clear(zf_hd + (hp ^ ZF_HEAD_BITS / 32u));")
            .line("hp ^= ZF_HEAD_BITS / 32u;");
        tiles.place(&mut w);
        w.open("zf_rle_walk_heads(rs, hd, rs[0], rs[zf_rle_slot(ZF_RLE_TILE)], [&](u32 q, u32 j)")
            .line(format!("const {pair} bv = rp[zf_rle_slot(j)];"))
            .line(format!("o[q] = ({t})({u})(bv.x + bv.y * ({a})q);"))
            .close_with(");")
            .line("carry += tot;")
            .line("dcarry += dtot;")
            .line("__syncthreads();")
            .close()
            .line("if (threadIdx.x == 0u && carry != n) atomicOr(e.err, ZF_ERR_RLE_SUM);")
            .line("__syncthreads();")
            .close();
        Ok(w.finish())
    }

    /// The stage of a `delta` node `k`: a wrapping prefix sum over the chunk, tile by tile.
    pub(crate) fn delta_stage(&mut self, k: usize) -> Result<String> {
        let b = self.nodes[k].base;
        let t = ctype(self.nodes[k].ptype)?;
        let u = ctype(self.nodes[k].ptype.to_unsigned()).unwrap_or(t);
        let a = acc(self.nodes[k].ptype);
        let c = self.nodes[k].children.first().copied().unwrap_or(0);
        let bi = self.buf(k, "p")?;
        let mut w = Writer::at(1);
        w.scope(format!(
            "node {k}: delta: wrapping prefix sum over the chunk, tile by tile"
        ))
        .line(format!("const u32 n = (u32)e.prm[{b}];"))
        .line("const u32 lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;")
        .line(format!("{a} carry = ({a})e.prm[{}];", b + 1))
        .line("// Each thread sums ZF_DELTA_ITEMS consecutive values in registers; one warp scan of the")
        .line("// threads' sums and the warps' totals give each thread its offset. The tile goes out")
        .line("// through shared memory in coalesced rows; both shared arrays alternate between two")
        .line("// halves, so the next tile needs no barrier before it writes them.")
        .line(format!("__shared__ {a} zf_w2{k}[2u * (ZF_THREADS / 32u)];"))
        .line(format!(
            "__shared__ {a} zf_st{k}[2u * ZF_THREADS * ZF_DELTA_ITEMS];"
        ))
        .line("u32 half = 0u;")
        .line("// The next tile's differences are read before this tile's second barrier, so their")
        .line("// loads overlap the wait.")
        .line(format!("{a} nx[ZF_DELTA_ITEMS];"));
        self.load4(&mut w, c, "threadIdx.x * ZF_DELTA_ITEMS", "n", "nx", a)?;
        w.blank()
            .open("for (u32 t0 = 0u; t0 < n; t0 += ZF_THREADS * ZF_DELTA_ITEMS)")
            .line("const u32 first = t0 + threadIdx.x * ZF_DELTA_ITEMS;")
            .line(format!("{a} v[ZF_DELTA_ITEMS];"))
            .line(format!("{a} run = ({a})0;"))
            .directive("#pragma unroll")
            .open("for (u32 i = 0u; i < ZF_DELTA_ITEMS; ++i)")
            .line("run += nx[i];")
            .line("v[i] = run;")
            .close()
            .line(format!("{a} x = run;"))
            .directive("#pragma unroll")
            .open("for (u32 d = 1u; d < 32u; d <<= 1)")
            .line(format!("const {a} y = __shfl_up_sync(0xffffffffu, x, d);"))
            .line("if (lane >= d) x += y;")
            .close()
            .line(format!("{a}* wt = zf_w2{k} + half * (ZF_THREADS / 32u);"))
            .line(format!(
                "{a}* st = zf_st{k} + half * (ZF_THREADS * ZF_DELTA_ITEMS);"
            ))
            .line("if (lane == 31u) wt[warp] = x;")
            .line("__syncthreads();")
            .line(format!("{a} off = x - run, tot = ({a})0;"))
            .open("for (u32 w = 0u; w < ZF_THREADS / 32u; ++w)")
            .line(format!("const {a} t = wt[w];"))
            .line("if (w < warp) off += t;")
            .line("tot += t;")
            .close()
            .line("off += carry;")
            .directive("#pragma unroll")
            .open("for (u32 i = 0u; i < ZF_DELTA_ITEMS; ++i)")
            .line("st[threadIdx.x * ZF_DELTA_ITEMS + i] = off + v[i];")
            .close();
        self.load4(
            &mut w,
            c,
            "(first + ZF_THREADS * ZF_DELTA_ITEMS)",
            "n",
            "nx",
            a,
        )?;
        w.line("__syncthreads();")
            .directive("#pragma unroll")
            .open("for (u32 i = 0u; i < ZF_DELTA_ITEMS; ++i)")
            .line("const u32 p = t0 + i * ZF_THREADS + threadIdx.x;")
            .line(format!(
                "if (p < n) {bi} = ({t})({u})st[i * ZF_THREADS + threadIdx.x];"
            ))
            .close()
            .line("carry += tot;")
            .line("half ^= 1u;")
            .close()
            .line("__syncthreads();")
            .close();
        Ok(w.finish())
    }
}
