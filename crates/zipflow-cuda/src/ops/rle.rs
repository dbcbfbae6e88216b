//! `rle`: values and run lengths.

use crate::codegen::runs::RunTiles;
use crate::codegen::{Gen, Writer, ctype};
use zipflow_core::Result;
use zipflow_encodings::NodeView;
use zipflow_encodings::rle::View;

/// Slots after the length: none (the runs are the children's length slots).
pub(crate) const SLOTS: usize = 0;

/// Checks an `rle` node (it has no slots of its own).
pub(crate) fn fill(node: &NodeView<'_>) -> Result<()> {
    View::parse(node).map(|_| ())
}

impl Gen<'_> {
    /// The stage of an `rle` node `k`: its runs placed tile by tile, then expanded.
    pub(crate) fn rle_stage(&mut self, k: usize) -> Result<String> {
        let t = ctype(self.nodes[k].ptype)?;
        let b = self.nodes[k].base;
        let children = self.nodes[k].children.clone();
        let ch = |i: usize| children.get(i).copied().unwrap_or(0);
        let (values, runs) = (ch(0), ch(1));
        let tiles = RunTiles {
            t,
            loads: self.rle_loads(t, values, runs)?,
            prefetch: self.runs_prefetch(values, runs),
            vlen: self.nodes[values].base,
            delta: None,
        };
        let bq = self.buf(k, "q")?;
        let mut w = Writer::at(1);
        w.scope(format!(
            "node {k}: rle: run tiles of ZF_RLE_ITEMS runs per thread; an exclusive sum of"
        ))
        .line("// their lengths places them, then each warp walks its share of the tile's output")
        .line(
            "// positions 32 at a time (coalesced), finding their runs from the tile's run starts",
        )
        .line(format!("__shared__ u32 zf_rs{k}[ZF_RLE_PADDED + 1u];"))
        .line(format!("__shared__ {t} zf_rv{k}[ZF_RLE_PADDED];"))
        .line(format!("u32* const rs = zf_rs{k};"))
        .line(format!("{t}* const rv = zf_rv{k};"))
        .line(format!("const u32 n = (u32)e.prm[{b}];"));
        tiles.load(&mut w);
        w.open("for (u32 r0 = 0u; r0 < nruns; r0 += ZF_RLE_TILE)");
        tiles.place(&mut w);
        w.line(format!(
            "zf_rle_walk(rs, rs[0], rs[zf_rle_slot(ZF_RLE_TILE)], [&](u32 q, u32 j) {{ {bq} = rv[zf_rle_slot(j)]; }});"
        ))
        .line("carry += tot;")
        .line("__syncthreads();")
        .close()
        .line("if (threadIdx.x == 0u && carry != n) atomicOr(e.err, ZF_ERR_RLE_SUM);")
        .line("__syncthreads();")
        .close();
        Ok(w.finish())
    }
}
