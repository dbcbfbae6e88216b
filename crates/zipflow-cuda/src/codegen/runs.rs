//! `delta` and `rle`: the group-parallel stages of chunk kernels. Both read their children
//! four neighbouring values per thread (`zf_q<k>`) and work in tiles carried from one to the
//! next: `delta` a block-wide wrapping prefix sum, `rle` a block-wide sum of run lengths that
//! places the runs, then each warp walking its share of the tile's positions. A root `delta`
//! over `rle` decodes both in one pass over the runs.

use super::{Gen, Writer, acc, ctype, width_expr};
use crate::shape::Op;
use zipflow_core::Result;

/// Writes code that sets `dst[0..4]` to values `p .. p + 3` of node `c` (of C type `ct`,
/// `p % 4 == 0`) cast to `cast`, or 0 at and past `lim`; `zf_q<c>` must be emitted.
pub(crate) fn load4_code(
    w: &mut Writer,
    c: usize,
    ct: &str,
    p: &str,
    lim: &str,
    dst: &str,
    cast: &str,
) {
    w.open(format!("if ({p} + 3u < {lim})"))
        .line(format!("{ct} zq[4];"))
        .line(format!("zf_q{c}(e, {p}, zq);"))
        .directive("#pragma unroll")
        .line(format!(
            "for (u32 i = 0u; i < 4u; ++i) {dst}[i] = ({cast})zq[i];"
        ))
        .reopen("else")
        .directive("#pragma unroll")
        .line(format!(
            "for (u32 i = 0u; i < 4u; ++i) {dst}[i] = {p} + i < {lim} ? ({cast})zf_n{c}(e, {p} + i) : ({cast})0;"
        ))
        .close();
}

/// The shared part of the `rle` stages, written in two places of the stage by
/// [`RunTiles::load`] and [`RunTiles::place`]. `load` reads the first tile's runs ahead (and
/// declares `nruns`, `carry`); `place` (in the loop over tiles starting at `r0`) sums the
/// tile's lengths, checks them, writes the run starts to `rs` (`ZF_RLE_TILE + 1` entries, the
/// last one the tile's end, run j's in slot `zf_rle_slot(j)`) and the values to `rv` (the
/// same slots), reads the next tile's runs ahead, and ends with a barrier; `tot` is the
/// tile's length. With `delta` (its accumulator type), each run's value times its length is
/// summed too (in one block-wide sum with the lengths, `zf_scan_tile2`), and `rp` holds each
/// run's pair (base, value) instead of `rv`: the base is the value before the run (`dcarry`
/// plus the exclusive sum) less the value times the run's start less one, so that position q
/// of the run decodes to base + value * q; `dtot` is the tile's total; and the runs' starts
/// are set in the head map `hd` (its first window, for `zf_rle_walk_heads`; the stage
/// alternates two maps by tile).
pub(crate) struct RunTiles<'a, L: Fn(&mut Writer, &str)> {
    /// The values' C type.
    pub(crate) t: &'a str,
    /// Writes the loads of one thread's runs from the given first run into `nl` and `nv`.
    pub(crate) loads: L,
    /// Statements by which one thread fetches runs `a .. z` into L2 (none where the streams
    /// have no prefetch): the second tile at the start, and the tile after next with each
    /// tile.
    pub(crate) prefetch: Vec<String>,
    /// The slot of the run count.
    pub(crate) vlen: usize,
    /// Under `delta`, its accumulator type.
    pub(crate) delta: Option<&'a str>,
}

impl<L: Fn(&mut Writer, &str)> RunTiles<'_, L> {
    /// The prefetch of the tile starting at run `from`, by thread 0.
    fn ahead(&self, w: &mut Writer, from: &str) {
        if self.prefetch.is_empty() {
            return;
        }
        w.open(format!("if (threadIdx.x == 0u && {from} < nruns)"));
        for s in &self.prefetch {
            w.open("")
                .line(format!(
                    "const u32 a = {from}, z = min({from} + ZF_RLE_TILE, nruns);"
                ))
                .line(s)
                .close();
        }
        w.close();
    }

    /// The declarations before the loop over tiles and the first tile's loads.
    pub(crate) fn load(&self, w: &mut Writer) {
        w.line(format!("const u32 nruns = (u32)e.prm[{}];", self.vlen))
            .line("u64 carry = 0ull;")
            .line("u32 flip = 0u;");
        if self.delta.is_some() {
            w.line("// Both head maps start clear; each tile clears the one the tile before read.")
                .line("zf_head_clear(zf_hd);")
                .line("zf_head_clear(zf_hd + ZF_HEAD_BITS / 32u);")
                .line("u32 hp = 0u;");
        }
        w.line("// Each thread's ZF_RLE_ITEMS consecutive runs of the next tile, loaded a tile ahead, and")
            .line("// the tile after that fetched into L2 ahead of its loads.")
            .line("u32 nl[ZF_RLE_ITEMS];")
            .line(format!("{} nv[ZF_RLE_ITEMS];", self.t));
        self.ahead(w, "ZF_RLE_TILE");
        (self.loads)(w, "threadIdx.x * ZF_RLE_ITEMS");
    }

    /// The placing of one tile's runs, in the loop over tiles.
    pub(crate) fn place(&self, w: &mut Writer) {
        w.line(
            "// The lengths add up in 32 bits: a sum that wraps has a run past the chunk's end,",
        )
        .line("// found below from the 64-bit starts, and the starts stay at most n.")
        .line("u32 ls = 0u;")
        .directive("#pragma unroll")
        .line("for (u32 i = 0u; i < ZF_RLE_ITEMS; ++i) ls += nl[i];")
        .line("u32 tot;");
        // Under `delta`, the lengths and the values times the lengths are summed together.
        match self.delta {
            Some(a) => {
                w.line(format!("{a} dl = ({a})0, dtot, d;"))
                    .directive("#pragma unroll")
                    .line(format!(
                        "for (u32 i = 0u; i < ZF_RLE_ITEMS; ++i) dl += ({a})nv[i] * ({a})nl[i];"
                    ))
                    .line(format!(
                        "u64 s = carry + (u64)zf_scan_tile2<{a}>(ls, dl, &tot, &d, &dtot, flip);"
                    ))
                    .line("d += dcarry;")
                    .line("// The word of the head map whose bits this thread is collecting, and the bits.")
                    .line("u32 hw = 0xffffffffu, hm = 0u;");
            }
            None => {
                w.line("u64 s = carry + (u64)zf_scan_tile<u32>(ls, &tot, flip);");
            }
        }
        w.line(
            "// A thread's runs are checked once: a zero length among them, and its last run's end",
        )
        .line("// against the chunk's (ends rise within a thread, so no earlier one can pass it).")
        .line("bool zero = false;")
        .directive("#pragma unroll")
        .open("for (u32 i = 0u; i < ZF_RLE_ITEMS; ++i)")
        .line("zero |= nl[i] == 0u && r0 + threadIdx.x * ZF_RLE_ITEMS + i < nruns;")
        .line("rs[zf_rle_slot(threadIdx.x * ZF_RLE_ITEMS + i)] = (u32)min(s, (u64)n);");
        match self.delta {
            Some(a) => {
                let make = if a == "u64" {
                    "make_ulonglong2"
                } else {
                    "make_uint2"
                };
                w.line("// The run's base taken back to position 0, and its value: the value at")
                    .line("// position q of the run is then one multiply-add, and one shared load.")
                    .line(format!(
                        "rp[zf_rle_slot(threadIdx.x * ZF_RLE_ITEMS + i)] = {make}(d - ({a})nv[i] * (({a})s - ({a})1), ({a})nv[i]);"
                    ))
                    .line(format!("d += ({a})nv[i] * ({a})nl[i];"))
                    .open("if (nl[i] != 0u && s - carry < ZF_HEAD_BITS)")
                    .line("// A thread's runs are neighbours: their heads are ORed per word, one atomic a word.")
                    .line("const u32 b = (u32)(s - carry);")
                    .open("if ((b >> 5) != hw)")
                    .line("if (hm != 0u) atomicOr(hd + hw, hm);")
                    .line("hw = b >> 5;")
                    .line("hm = 0u;")
                    .close()
                    .line("hm |= 1u << (b & 31u);")
                    .close();
            }
            None => {
                w.line("rv[zf_rle_slot(threadIdx.x * ZF_RLE_ITEMS + i)] = nv[i];");
            }
        }
        w.line("s += nl[i];")
            .close()
            .line("if (zero) atomicOr(e.err, ZF_ERR_RLE_ZERO);")
            .line("if (s > n) atomicOr(e.err, ZF_ERR_RLE_SUM);");
        if self.delta.is_some() {
            w.line("if (hm != 0u) atomicOr(hd + hw, hm);");
        }
        w.line(
            "if (threadIdx.x == 0u) rs[zf_rle_slot(ZF_RLE_TILE)] = (u32)min(carry + tot, (u64)n);",
        )
        .line("// The next tile's runs load while the block waits.");
        (self.loads)(w, "r0 + ZF_RLE_TILE + threadIdx.x * ZF_RLE_ITEMS");
        self.ahead(w, "r0 + 2u * ZF_RLE_TILE");
        w.line("__syncthreads();");
    }
}

impl Gen<'_> {
    /// Writes the loads of [`load4_code`] for node `c`, emitting its `zf_q<c>`.
    pub(crate) fn load4(
        &mut self,
        w: &mut Writer,
        c: usize,
        p: &str,
        lim: &str,
        dst: &str,
        cast: &str,
    ) -> Result<()> {
        self.quad(c)?;
        load4_code(w, c, ctype(self.nodes[c].ptype)?, p, lim, dst, cast);
        Ok(())
    }

    /// The loads of one thread's runs of an `rle` node (its `values` and `runs` children)
    /// into `nl` and `nv`, from the run given: for [`RunTiles::loads`].
    pub(crate) fn rle_loads(
        &mut self,
        t: &str,
        values: usize,
        runs: usize,
    ) -> Result<impl Fn(&mut Writer, &str) + use<>> {
        self.quad(runs)?;
        self.quad(values)?;
        let (rt, vt) = (
            ctype(self.nodes[runs].ptype)?,
            ctype(self.nodes[values].ptype)?,
        );
        let t = t.to_string();
        Ok(move |w: &mut Writer, r: &str| {
            load4_code(w, runs, rt, r, "nruns", "nl", "u32");
            load4_code(w, values, vt, r, "nruns", "nv", &t);
        })
    }

    /// The L2 prefetch of runs `a .. z` of an `rle` node's `values` and `runs` streams (those
    /// that have one): statements for [`RunTiles::prefetch`].
    pub(crate) fn runs_prefetch(&self, values: usize, runs: usize) -> Vec<String> {
        [values, runs]
            .into_iter()
            .filter_map(|k| self.prefetch_values(k, "a", "z"))
            .collect()
    }

    /// Emits `zf_q<k>`, values `p .. p + 3` of node `k` at once (`p % 4 == 0`), and returns
    /// its name.
    pub(crate) fn quad(&mut self, k: usize) -> Result<String> {
        let name = format!("zf_q{k}");
        if self.quads.contains(&k) {
            return Ok(name);
        }
        let n = self.nodes[k].clone();
        let t = ctype(n.ptype)?;
        let u = ctype(n.ptype.to_unsigned()).unwrap_or(t);
        let a = acc(n.ptype);
        let b = n.base;
        let mut w = Writer::at(0);
        w.blank()
            .line(format!("// node {k}: values p .. p + 3 (p % 4 == 0)"))
            .open(format!(
                "__device__ __forceinline__ void {name}(const Env& e, u32 p, {t}* v)"
            ));
        let each = |w: &mut Writer, f: &str| {
            w.directive("#pragma unroll")
                .line(format!("for (u32 i = 0u; i < 4u; ++i) {f}"));
        };
        match n.op {
            Op::BitPack => {
                w.line(format!("{a} x[4];")).line(format!(
                    "zf_unpack4<{u}, {a}, {bits}>((const {u}*)(e.in + e.prm[{}]), {}, p, x);",
                    b + 1,
                    width_expr(&n),
                    bits = n.ptype.byte_width() * 8
                ));
                each(&mut w, &format!("v[i] = ({t})x[i];"));
            }
            Op::For => {
                let c = n.children[0];
                let q = self.quad(c)?;
                let ct = ctype(self.nodes[c].ptype)?;
                w.line(format!("{ct} c[4];")).line(format!("{q}(e, p, c);"));
                each(
                    &mut w,
                    &format!("v[i] = ({t})({u})(({a})c[i] + ({a})e.prm[{}]);", b + 1),
                );
            }
            Op::Dict if !self.has_stage(n.children[1]) => {
                let (codes, values) = (n.children[0], n.children[1]);
                let q = self.quad(codes)?;
                let ct = ctype(self.nodes[codes].ptype)?;
                w.line(format!("{ct} c[4];"))
                    .line(format!("{q}(e, p, c);"))
                    .line(format!(
                        "const u32 n = (u32)e.prm[{}];",
                        self.nodes[values].base
                    ));
                w.directive("#pragma unroll")
                    .open("for (u32 i = 0u; i < 4u; ++i)")
                    .line("const u32 ci = (u32)c[i];")
                    .line(format!(
                        "if (ci >= n) {{ atomicOr(e.err, ZF_ERR_DICT); v[i] = ({t})0; }}"
                    ))
                    .line(format!(
                        "else v[i] = n <= ZF_DICT_CACHE ? zf_d{k}[ci] : zf_n{values}(e, ci);"
                    ))
                    .close();
            }
            _ => {
                each(&mut w, &format!("v[i] = zf_n{k}(e, p + i);"));
            }
        }
        w.close();
        self.quads.push(k);
        self.src.push_str(&w.finish());
        Ok(name)
    }
}
