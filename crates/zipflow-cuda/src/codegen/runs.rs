//! `delta` and `rle`: the group-parallel stages of chunk kernels. Both read their children
//! four neighbouring values per thread (`zf_q<k>`) and work in tiles carried from one to the
//! next: `delta` a block-wide wrapping prefix sum, `rle` a block-wide sum of run lengths that
//! places the runs, then each warp walking its share of the tile's positions. A root `delta`
//! over `rle` decodes both in one pass over the runs.

use super::{DICT_SHARED, Gen, acc, ctype, width_expr};
use crate::shape::Op;
use zipflow_core::Result;

/// Code that sets `dst[0..4]` to values `p .. p + 3` of node `c` (of C type `ct`, `p % 4 ==
/// 0`) cast to `cast`, or 0 at and past `lim`; `zf_q<c>` must be emitted.
pub(crate) fn load4_code(c: usize, ct: &str, p: &str, lim: &str, dst: &str, cast: &str) -> String {
    format!(
        r#"    if ({p} + 3u < {lim}) {{
      {ct} zq[4];
      zf_q{c}(e, {p}, zq);
#pragma unroll
      for (u32 i = 0u; i < 4u; ++i) {dst}[i] = ({cast})zq[i];
    }} else {{
#pragma unroll
      for (u32 i = 0u; i < 4u; ++i) {dst}[i] = {p} + i < {lim} ? ({cast})zf_n{c}(e, {p} + i) : ({cast})0;
    }}
"#
    )
}

/// The shared part of the `rle` stages: `load` reads the first tile's runs ahead (and declares
/// `nruns`, `carry`); `place` (in the loop over tiles starting at `r0`) sums the tile's
/// lengths, checks them, writes the run starts to `rs` (`ZF_RLE_TILE + 1` entries, the last
/// one the tile's end, run j's in slot `zf_rle_slot(j)`) and the values to `rv` (the same
/// slots), reads the next tile's runs ahead, and ends
/// with a barrier; `tot` is the tile's length. With `delta` (its accumulator type), each
/// run's value times its length is summed too (in one block-wide sum with the lengths,
/// `zf_scan_tile2`), and `rp` holds each run's pair (base, value)
/// instead of `rv`: the base is the value before the run (`dcarry` plus the exclusive sum)
/// less the value times the run's start less one, so that position q of the run decodes to
/// base + value * q; `dtot` is the tile's total; and the runs' starts are set in the head map
/// `hd` (its first window, for `zf_rle_walk_heads`; the stage alternates two maps by tile). `prefetch(a, z)` is the statements by
/// which one thread fetches runs `a .. z` into L2 (empty where the streams have no prefetch):
/// the second tile at the start, and the tile after next with each tile.
pub(crate) fn rle_tiles(
    t: &str,
    loads: impl Fn(&str) -> String,
    prefetch: impl Fn(&str, &str) -> String,
    vlen: usize,
    delta: Option<&str>,
) -> (String, String) {
    let first = loads("threadIdx.x * ZF_RLE_ITEMS");
    let next = loads("r0 + ZF_RLE_TILE + threadIdx.x * ZF_RLE_ITEMS");
    let ahead = |from: &str| {
        let body = prefetch(from, &format!("min({from} + ZF_RLE_TILE, nruns)"));
        if body.is_empty() {
            String::new()
        } else {
            format!(
                "    if (threadIdx.x == 0u && {from} < nruns) {{
{body}    }}
"
            )
        }
    };
    let (ahead1, ahead2) = (ahead("ZF_RLE_TILE"), ahead("r0 + 2u * ZF_RLE_TILE"));
    let clear = if delta.is_some() {
        "    // Both head maps start clear; each tile clears the one the tile before read.
    zf_head_clear(zf_hd);
    zf_head_clear(zf_hd + ZF_HEAD_BITS / 32u);
    u32 hp = 0u;
"
    } else {
        ""
    };
    let load = format!(
        r#"    const u32 nruns = (u32)e.prm[{vlen}];
    u64 carry = 0ull;
    u32 flip = 0u;
{clear}    // Each thread's ZF_RLE_ITEMS consecutive runs of the next tile, loaded a tile ahead, and
    // the tile after that fetched into L2 ahead of its loads.
    u32 nl[ZF_RLE_ITEMS];
    {t} nv[ZF_RLE_ITEMS];
{ahead1}{first}"#
    );
    let (dsum, dput, dend) = match delta {
        Some(a) => (
            "      // The word of the head map whose bits this thread is collecting, and the bits.
      u32 hw = 0xffffffffu, hm = 0u;
"
            .to_string(),
            format!(
                "        // The run's base taken back to position 0, and its value: the value at
        // position q of the run is then one multiply-add, and one shared load.
        rp[zf_rle_slot(threadIdx.x * ZF_RLE_ITEMS + i)] = {make}(d - ({a})nv[i] * (({a})s - ({a})1), ({a})nv[i]);
        d += ({a})nv[i] * ({a})nl[i];
        if (nl[i] != 0u && s - carry < ZF_HEAD_BITS) {{
          // A thread's runs are neighbours: their heads are ORed per word, one atomic a word.
          const u32 b = (u32)(s - carry);
          if ((b >> 5) != hw) {{
            if (hm != 0u) atomicOr(hd + hw, hm);
            hw = b >> 5;
            hm = 0u;
          }}
          hm |= 1u << (b & 31u);
        }}
",
                make = if a == "u64" {
                    "make_ulonglong2"
                } else {
                    "make_uint2"
                },
            ),
            "      if (hm != 0u) atomicOr(hd + hw, hm);
",
        ),
        None => (
            String::new(),
            "        rv[zf_rle_slot(threadIdx.x * ZF_RLE_ITEMS + i)] = nv[i];\n".to_string(),
            "",
        ),
    };
    // Under `delta`, the lengths and the values times the lengths are summed together.
    let scan = match delta {
        Some(a) => format!(
            r#"      {a} dl = ({a})0, dtot, d;
#pragma unroll
      for (u32 i = 0u; i < ZF_RLE_ITEMS; ++i) dl += ({a})nv[i] * ({a})nl[i];
      u64 s = carry + (u64)zf_scan_tile2<{a}>(ls, dl, &tot, &d, &dtot, flip);
      d += dcarry;
"#
        ),
        None => "      u64 s = carry + (u64)zf_scan_tile<u32>(ls, &tot, flip);
"
        .to_string(),
    };
    let place = format!(
        r#"      // The lengths add up in 32 bits: a sum that wraps has a run past the chunk's end,
      // found below from the 64-bit starts, and the starts stay at most n.
      u32 ls = 0u;
#pragma unroll
      for (u32 i = 0u; i < ZF_RLE_ITEMS; ++i) ls += nl[i];
      u32 tot;
{scan}{dsum}      // A thread's runs are checked once: a zero length among them, and its last run's end
      // against the chunk's (ends rise within a thread, so no earlier one can pass it).
      bool zero = false;
#pragma unroll
      for (u32 i = 0u; i < ZF_RLE_ITEMS; ++i) {{
        zero |= nl[i] == 0u && r0 + threadIdx.x * ZF_RLE_ITEMS + i < nruns;
        rs[zf_rle_slot(threadIdx.x * ZF_RLE_ITEMS + i)] = (u32)min(s, (u64)n);
{dput}        s += nl[i];
      }}
      if (zero) atomicOr(e.err, ZF_ERR_RLE_ZERO);
      if (s > n) atomicOr(e.err, ZF_ERR_RLE_SUM);
{dend}      if (threadIdx.x == 0u) rs[zf_rle_slot(ZF_RLE_TILE)] = (u32)min(carry + tot, (u64)n);
      // The next tile's runs load while the block waits.
{next}{ahead2}      __syncthreads();
"#
    );
    (load, place)
}

impl Gen<'_> {
    pub(crate) fn load4(
        &mut self,
        c: usize,
        p: &str,
        lim: &str,
        dst: &str,
        cast: &str,
    ) -> Result<String> {
        self.quad(c)?;
        Ok(load4_code(
            c,
            ctype(self.nodes[c].ptype)?,
            p,
            lim,
            dst,
            cast,
        ))
    }

    pub(crate) fn rle_loads(
        &mut self,
        t: &str,
        values: usize,
        runs: usize,
    ) -> Result<impl Fn(&str) -> String + use<>> {
        self.quad(runs)?;
        self.quad(values)?;
        let (rt, vt) = (
            ctype(self.nodes[runs].ptype)?,
            ctype(self.nodes[values].ptype)?,
        );
        let t = t.to_string();
        Ok(move |r: &str| {
            format!(
                "{}{}",
                load4_code(runs, rt, r, "nruns", "nl", "u32"),
                load4_code(values, vt, r, "nruns", "nv", &t)
            )
        })
    }

    /// The L2 prefetch of runs `a .. z` of an `rle` node's `values` and `runs` streams (those
    /// that have one): statements for [`rle_tiles`].
    pub(crate) fn runs_prefetch(
        &self,
        values: usize,
        runs: usize,
    ) -> impl Fn(&str, &str) -> String + use<> {
        let each = [values, runs].map(|k| self.prefetch_values(k, "a", "z"));
        move |a: &str, z: &str| {
            each.iter()
                .flatten()
                .map(|s| format!("      {{ const u32 a = {a}, z = {z};\n        {s}\n      }}\n"))
                .collect()
        }
    }

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
        let each = |f: &str| format!("#pragma unroll\n  for (u32 i = 0u; i < 4u; ++i) {f}\n");
        let body = match n.op {
            Op::BitPack => format!(
                "  {a} x[4];\n  zf_unpack4<{u}, {a}, {bits}>((const {u}*)(e.in + e.prm[{}]), {}, p, x);\n{}",
                b + 1,
                width_expr(&n),
                each(&format!("v[i] = ({t})x[i];")),
                bits = n.ptype.byte_width() * 8
            ),
            Op::For => {
                let c = n.children[0];
                let q = self.quad(c)?;
                let ct = ctype(self.nodes[c].ptype)?;
                format!(
                    "  {ct} c[4];\n  {q}(e, p, c);\n{}",
                    each(&format!(
                        "v[i] = ({t})({u})(({a})c[i] + ({a})e.prm[{}]);",
                        b + 1
                    ))
                )
            }
            Op::Dict if !self.has_stage(n.children[1]) => {
                let (codes, values) = (n.children[0], n.children[1]);
                let q = self.quad(codes)?;
                let ct = ctype(self.nodes[codes].ptype)?;
                format!(
                    "  {ct} c[4];\n  {q}(e, p, c);\n  const u32 n = (u32)e.prm[{vlen}];\n{}",
                    each(&format!(
                        "{{\n    const u32 ci = (u32)c[i];\n    if (ci >= n) {{ atomicOr(e.err, ZF_ERR_DICT); v[i] = ({t})0; }}\n    else v[i] = n <= {DICT_SHARED}u ? zf_d{k}[ci] : zf_n{values}(e, ci);\n  }}"
                    )),
                    vlen = self.nodes[values].base
                )
            }
            _ => each(&format!("v[i] = zf_n{k}(e, p + i);")),
        };
        self.quads.push(k);
        self.src.push_str(&format!(
            "\n// node {k}: values p .. p + 3 (p % 4 == 0)\n__device__ __forceinline__ void {name}(const Env& e, u32 p, {t}* v) {{\n{body}}}\n"
        ));
        Ok(name)
    }
}
