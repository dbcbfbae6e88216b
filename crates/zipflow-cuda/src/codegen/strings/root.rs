//! A byte-string root (`strdict`, `words`, `plain` over strings) by phase: the parts both
//! kernels share, the first kernel's segment table, and the expansion of a segment's rows.

use super::*;

impl Gen<'_> {
    /// Emits the root of a byte-string shape: the segment table in the first kernel and the
    /// expansion of one segment (offsets and bytes of its rows) in the second.
    pub(in crate::codegen) fn string_root(&mut self, k: usize) -> Result<()> {
        self.declare_strings();
        if let Some(length) = self.fixed_length(k) {
            self.fixed_strings(k, &length);
            return Ok(());
        }
        let r = self.root_parts(k);
        self.segment_table_stage(&r);
        self.expansion(&r);
        Ok(())
    }

    /// The parts of byte-string root `k` its phases share, its token children staged.
    fn root_parts(&mut self, k: usize) -> Root {
        let n = self.nodes[k].clone();
        let b = n.base;
        let ch = |i: usize| n.children.get(i).copied().unwrap_or(0);
        let words = n.op == Op::Words;
        let ntok = if words {
            format!("const u32 ntok = (u32)e.prm[{}];", self.nodes[ch(0)].base)
        } else {
            "const u32 ntok = n;".to_string()
        };
        // Per token: the codes (words, strdict) or lengths (plain) child; a `words` root's
        // counts per row.
        let vals = self.stage_values(ch(0));
        let counts = if words {
            Some(self.stage_values(ch(2)))
        } else {
            None
        };
        // A staged token's length `l` (from `c = zf_scode[i]`), and for the expansion its
        // source offset `so[j]`.
        let (d, check) = match n.op {
            Op::Words | Op::StrDict => (Some(ch(1)), format!("zf_dok{}", ch(1))),
            _ => (None, "true".to_string()),
        };
        Root {
            k,
            b,
            ch: [ch(0), ch(1), ch(2)],
            words,
            ntok,
            vals,
            counts,
            d,
            check,
            n,
        }
    }

    /// The first kernel's stage of a byte-string root: the segment table, summed over the
    /// chunk's tokens and their bytes (or copied from the host's).
    fn segment_table_stage(&mut self, r: &Root) {
        let (k, b, n) = (r.k, r.b, &r.n);
        let (ntok, check) = (&r.ntok, &r.check);
        let mut w = Writer::at(1);
        w.scope(format!(
            "node {k}: {name} (byte strings): the segment table, for every ZF_SEG_ROWS rows their",
            name = n.op.name()
        ))
        .lines(format!(
            r#"// first token and first byte (and the totals after the last segment). A warp takes a
// segment at a time and sums its tokens; a block-wide sum places them. Then the same for
// the bytes of each segment's tokens (several warps a segment when there are few).
const u32 n = len;
const u32 claimed = (u32)e.prm[{claimed}];
{ntok}
u32* const tab = (u32*)(e.scratch + e.prm[{tab}]);
const u32 nseg = max(1u, (n + ZF_SEG_ROWS - 1u) / ZF_SEG_ROWS);
const u64 given = e.prm[{given}];
if (given != ~0ull) {{
  // The host built the table from the node's row index: copied as it is (the expansion
  // checks each segment against its rows).
  zf_copy_table((const u32*)(e.in + given), tab, 2u * (nseg + 1u));
  if (threadIdx.x == 0u && !({check})) atomicOr(e.err, ZF_ERR_STR);
}} else {{
const u32 lane = threadIdx.x & 31u;
// A segment with more tokens or bytes than its chunk is corrupt; clamped to the chunk's,
// the sums stay in 32 bits.
bool bad = false;
"#,
            claimed = b + 2,
            tab = b + 4,
            given = b + 5,
        ))
        .open("for (u32 s = threadIdx.x >> 5; s < nseg; s += ZF_THREADS / 32u)")
        .line("const u32 r0 = s * ZF_SEG_ROWS, r1 = min(r0 + ZF_SEG_ROWS, n);");
        // The first kernel: a warp sums one segment's tokens (`c`, from its rows [r0, r1)),
        // later its tokens' bytes (`b`).
        match &r.counts {
            Some(cv) => w.line("u64 c = 0ull;").line(format!(
                "{cv}(e, r0, r1 - r0, lane, 32u, [&](u32, u32 v) {{ c += v; }});"
            )),
            None => w.line("u64 c = lane == 0u ? (u64)(r1 - r0) : 0ull;"),
        };
        w.lines(
            r#"c = zf_warp_sum(c);
bad |= c > (u64)ntok;
if (lane == 0u) tab[2u * s] = (u32)min(c, (u64)ntok);
"#,
        )
        .close()
        .lines(
            r#"__syncthreads();
const u64 tc = zf_tab_scan(tab, nseg, ntok);
// With fewer segments than warps (a chunk of one token a row has 8), `parts` warps share
// a segment, each a piece of its tokens in whole vectors, their sums added in shared
// memory; else a warp takes a segment at a time.
__shared__ u64 zf_segb[ZF_THREADS / 32u];
const u32 nw = ZF_THREADS / 32u, parts = nseg < nw ? nw / nseg : 1u;
"#,
        )
        .open("for (u32 j0 = 0u; j0 < nseg * parts; j0 += nw)")
        .line("const u32 j = j0 + (threadIdx.x >> 5);")
        .line("u64 b = 0ull;")
        .open("if (j < nseg * parts)")
        .lines(
            r#"const u32 s = j / parts, q = j % parts;
const u64 ta = tab[2u * s], tz = tab[2u * s + 2u];
const u64 step = ((tz - ta + parts - 1u) / parts + 1023u) & ~1023ull;
const u64 a = min(ta + q * step, tz), z = min(a + step, tz);
"#,
        );
        segment_bytes(&mut w, r);
        w.line("b = zf_warp_sum(b);")
            .close()
            .lines(
                r#"if (lane == 0u) zf_segb[threadIdx.x >> 5] = b;
__syncthreads();
if (threadIdx.x < nw && threadIdx.x % parts == 0u && j0 + threadIdx.x < nseg * parts) {
  u64 t = 0ull;
  for (u32 p = 0u; p < parts; ++p) t += zf_segb[threadIdx.x + p];
  bad |= t > (u64)claimed;
  tab[2u * ((j0 + threadIdx.x) / parts) + 1u] = (u32)min(t, (u64)claimed);
}
__syncthreads();
"#,
            )
            .close()
            .line("const u64 bc = zf_tab_scan(tab + 1, nseg, claimed);")
            .line(format!(
                "if (bad || (threadIdx.x == 0u && (tc != (u64)ntok || bc != (u64)claimed || !({check})))) atomicOr(e.err, ZF_ERR_STR);"
            ))
            // The `else` above, its lines at the block's depth.
            .line("}")
            .close();
        self.stages.push_str(&w.finish());
    }

    /// The second kernel's body of a byte-string root: the expansion of one segment's rows,
    /// tile by tile of their tokens, looped over the block's segments.
    fn expansion(&mut self, r: &Root) {
        let (codes8, prefetch) = self.segment_prefetch(r);
        let vals = &r.vals;
        let x = Expansion {
            prefetch,
            stage_seg: match &codes8 {
                Some(f) => format!("{f}(e, T0 - za, T1 - T0 + za, zf_scode)"),
                None => format!(
                    "{vals}(e, T0, T1 - T0, threadIdx.x, ZF_THREADS, [&](u32 i, u32 v) {{ zf_scode[i] = (ZF_CODE_T)v; }})"
                ),
            },
            stage_tile: match &codes8 {
                Some(f) => format!("{f}(e, T0 - za + tt, min(ZF_TILE_TOK, tend - tt), zf_scode)"),
                None => format!(
                    "{vals}(e, T0 + tt, min(ZF_TILE_TOK, tseg - tt), threadIdx.x, ZF_THREADS, [&](u32 i, u32 v) {{ zf_scode[i] = (ZF_CODE_T)v; }})"
                ),
            },
        };
        let mut w = Writer::at(1);
        self.segment_loop(&mut w, |w| self.expansion_text(w, r, &x));
        // The block's last bulk copy is done before it ends.
        w.line("zf_bulk_wait();");
        self.expand.push_str(&w.finish());
    }

    /// The copy of a tile's bytes to the output, its tokens' source offsets `so[j]` and
    /// lengths `sl[j]` looked up.
    fn tile_copy(&self, w: &mut Writer, r: &Root) {
        let Some(d) = r.d else {
            let bytes = r.ch[1];
            w.line("// Plain strings: the tile's bytes are the bytes child's, in place.")
                .line(format!(
                    "for (u32 x = threadIdx.x; x < (u32)ttot; x += ZF_THREADS) out[at + B0 + bc + x] = zf_n{bytes}(e, B0 + bc + x);"
                ))
                .line("__syncthreads();");
            return;
        };
        let bytes = self.nodes[d].children[1];
        let window = |w: &mut Writer, src: &str| {
            w.open("for (u32 j = 0u; j < ZF_TOK_ITEMS; ++j)")
                .line("const u32 a = max(q, w0), z = min(q + sl[j], w0 + wl);")
                .line(format!("for (u32 x = a; x < z; ++x) st[x - w0] = {src};"))
                .line("q += sl[j];")
                .close();
        };
        w.line("const u64 g = at + B0 + bc, gb = g & ~15ull;")
            .open(format!(
                "if (zf_sb{d} && (u32)(g - gb) + ttot <= ZF_STR_STAGE)"
            ))
            .lines(
                r#"// The tile fits the stage: each thread assembles its run a word at a time (words
// it shares with its neighbours are or-ed into zeroed words).
u32* const sw = (u32*)zf_stage;
const u32 nq = ((u32)(g - gb) + (u32)ttot + 15u) >> 4;
for (u32 y = threadIdx.x; y < nq; y += ZF_THREADS) ((uint4*)zf_stage)[y] = make_uint4(0u, 0u, 0u, 0u);
__syncthreads();
"#,
            )
            .open("if (lsum != 0ull)");
        assemble_runs(w, d, r.words);
        w.close()
            .lines(
                r#"zf_bulk_fence();
__syncthreads();
zf_store_bulk(out, zf_stage, g, g + ttot);
"#,
            )
            // The `else` block's lines stay at its depth.
            .close_with(" else {")
            .line("// Otherwise byte by byte, in windows of the stage, each at the output's alignment.")
            .open("for (u32 w0 = 0u; w0 < (u32)ttot; w0 += ZF_STR_STAGE - 16u)")
            .lines(
                r#"const u32 wl = min((u32)ttot - w0, ZF_STR_STAGE - 16u);
const u64 g0 = g + w0, g1 = g0 + wl;
u8* const st = zf_stage + ((u32)g0 & 15u);
u32 q = (u32)p0;
"#,
            )
            .open(format!("if (zf_sb{d})"))
            .directive("#pragma unroll");
        window(w, &format!("zf_sdict[zf_dsh{d} + so[j] + (x - q)]"));
        w.reopen("else").directive("#pragma unroll");
        window(w, &format!("zf_n{bytes}(e, so[j] + (x - q))"));
        w.close()
            .lines(
                r#"__syncthreads();
zf_store_stage(out, g0, g1);
__syncthreads();
"#,
            )
            .close()
            .line("// Also when the tile has no bytes: the offsets read the positions.")
            .line("__syncthreads();")
            .line("}");
    }

    /// A thread's codes in 16-byte loads: `cq[j]`, its token `j`'s code.
    fn load_codes(&self, w: &mut Writer) {
        // A thread's tokens in 16-byte quads: its codes are loaded (four `u32` or eight
        // `u16` a load) and its token positions stored a quad at a time.
        let quads = self.tile_tokens() / crate::codegen::STRING_THREADS / 4;
        let load = |w: &mut Writer, narrow: bool, var: &str| {
            let loads = if narrow { quads / 2 } else { quads };
            let parts = |q: u32| -> String {
                ["x", "y", "z", "w"]
                    .map(|c| match narrow {
                        true => format!("zf_cq{q}.{c} & 0xffffu, zf_cq{q}.{c} >> 16"),
                        false => format!("zf_cq{q}.{c}"),
                    })
                    .join(", ")
            };
            for q in 0..loads {
                w.line(format!(
                    "const uint4 zf_cq{q} = ((const uint4*)codes)[{loads}u * threadIdx.x + {q}u];"
                ));
            }
            w.line(format!(
                "const u32 {var}[ZF_TOK_ITEMS] = {{{}}};",
                (0..loads).map(parts).collect::<Vec<_>>().join(", ")
            ));
        };
        if self.narrow_expansion() {
            // `u16` in the narrow expansion, `u32` in the wide one.
            w.line("u32 cq[ZF_TOK_ITEMS];")
                .open("if constexpr (sizeof(ZF_CODE_T) == 2u)");
            load(w, true, "zf_c");
            w.line("for (u32 j = 0u; j < ZF_TOK_ITEMS; ++j) cq[j] = zf_c[j];")
                .reopen("else");
            load(w, false, "zf_c");
            w.line("for (u32 j = 0u; j < ZF_TOK_ITEMS; ++j) cq[j] = zf_c[j];")
                .close();
        } else {
            load(w, self.narrow_codes(), "cq");
        }
    }

    /// The stores of a thread's token positions `tp`, a quad at a time.
    fn store_positions(&self, w: &mut Writer) {
        let quads = self.tile_tokens() / crate::codegen::STRING_THREADS / 4;
        for q in 0..quads {
            let t = |i: u32| format!("tp[{}]", 4 * q + i);
            w.line(format!(
                "((uint4*)zf_stp)[{quads}u * threadIdx.x + {q}u] = make_uint4({}, {}, {}, {});",
                t(0),
                t(1),
                t(2),
                t(3)
            ));
        }
    }

    /// The codes staged eight at a time where they are (its function's name), and the
    /// prefetch of each next segment's codes and counts (its lines); the first segment's is
    /// put at the start of the expansion.
    fn segment_prefetch(&mut self, r: &Root) -> (Option<String>, Vec<String>) {
        let (k, b, words, ntok) = (r.k, r.b, r.words, &r.ntok);
        let ch = |i: usize| r.ch[i];
        let codes8 = self.narrow_codes().then(|| self.codes_by_eight(ch(0)));
        // A block's segments wait at their start for their codes and counts: those of its
        // first are fetched into L2 before it stages the dictionary, those of each next one
        // (a `words` block's) while this one expands.
        let prefetch = |first: &str| -> Vec<String> {
            let rows = format!("min({first} * ZF_SEG_ROWS + ZF_SEG_ROWS, len)");
            let mut p = Vec::new();
            if words {
                let codes = self.prefetch_values(ch(0), "na", "nz");
                let counts = self.prefetch_values(ch(2), &format!("{first} * ZF_SEG_ROWS"), &rows);
                if let Some(c) = codes {
                    p.push(format!(
                        "const u32 na = tab[2u * ({first})], nz = tab[2u * ({first}) + 2u];"
                    ));
                    p.push(format!("if (na < nz && nz <= ntok) {c}"));
                }
                if let Some(c) = counts {
                    p.push(format!("if ({first} * ZF_SEG_ROWS < len) {c}"));
                }
            } else if let Some(c) =
                self.prefetch_values(ch(0), &format!("{first} * ZF_SEG_ROWS"), &rows)
            {
                p.push(format!("if ({first} * ZF_SEG_ROWS < len) {c}"));
            }
            p
        };
        let (first_segment, next_segment) = (prefetch("seg0"), prefetch("(seg + 1u)"));
        let next_segment = match self.segments_per_block() {
            1 => Vec::new(),
            _ => next_segment,
        };
        if !first_segment.is_empty() {
            let mut w = Writer::at(1);
            w.line(format!(
                "// node {k}: the codes and counts of the block's first segment, fetched into L2."
            ))
            .directive("#if __CUDA_ARCH__ >= 900")
            .open("if (threadIdx.x == 0u)");
            if words {
                w.line(format!(
                    "const u32* const tab = (const u32*)(e.scratch + e.prm[{}]);",
                    b + 4
                ))
                .line(ntok);
            }
            // The fetches sit one level further in, as the next segment's do.
            for l in &first_segment {
                w.line(format!("  {l}"));
            }
            w.close().directive("#endif");
            self.expand.insert_str(0, &w.finish());
        }
        (codes8, next_segment)
    }

    /// A segment's expansion, from its pieces.
    fn expansion_text(&self, w: &mut Writer, r: &Root, x: &Expansion) {
        let (k, b, d, words) = (r.k, r.b, r.d, r.words);
        let (ntok, check, counts) = (&r.ntok, &r.check, &r.counts);
        let name = r.n.op.name();
        let (at, claimed, ow, tab) = (b + 1, b + 2, b + 3, b + 4);
        let za = if self.narrow_codes() { "T0 & 7u" } else { "0u" };
        w.scope(format!(
            "node {k}: {name} (byte strings): the offsets and bytes of one segment's rows"
        ))
        .lines(format!(
            r#"const u32 n = len;
const u64 at = e.prm[{at}];
const u32 claimed = (u32)e.prm[{claimed}];
// Offsets: 8 or 4 bytes each, or none (only the bytes are wanted).
const u32 ow = (u32)e.prm[{ow}];
{ntok}
const u32* const tab = (const u32*)(e.scratch + e.prm[{tab}]);
const u32 r0 = seg * ZF_SEG_ROWS, r1 = min(r0 + ZF_SEG_ROWS, n);
const u32 T0 = tab[2u * seg], B0 = tab[2u * seg + 1u];
const u32 T1 = tab[2u * seg + 2u], B1 = tab[2u * seg + 3u];
// One barrier for all that is staged up front: the dictionary, the rows' counts and,
// when they fit, the segment's codes.
// Tiles start `za` tokens before the segment's first (codes staged eight at a time
// start at a multiple of eight); those tokens are not the segment's.
const u32 za = {za};
const bool seg_codes = T0 <= T1 && T1 <= ntok && T1 - T0 <= ZF_SEG_TOK - za;
"#
        ));
        if let Some(cv) = counts {
            w.line(format!(
                "{cv}(e, r0, r1 - r0, threadIdx.x, ZF_THREADS, [&](u32 i, u32 v) {{ zf_stp[i] = v; }});"
            ));
        }
        w.line(format!("if (seg_codes) {};", x.stage_seg));
        if !x.prefetch.is_empty() {
            w.directive("#if __CUDA_ARCH__ >= 900").open(format!(
                "if (threadIdx.x == 0u && seg + 1u < min(seg0 + {}u, zf_nseg))",
                self.segments_per_block()
            ));
            for l in &x.prefetch {
                w.line(l);
            }
            w.close().directive("#endif");
        }
        // Whether every dictionary entry is packed in shared memory with at most 8 or 24
        // bytes (a `words` root's tokens: at most 16), for the one-step paths.
        match d {
            Some(d) if !words => w
                .line("// Whether every dictionary entry is packed in shared memory with at most 8 (24) bytes.")
                .line(format!("const bool zf_short = __syncthreads_and(zf_lmax{d} <= 8u);"))
                .line(format!("const bool zf_mid = __syncthreads_and(zf_lmax{d} <= 24u);")),
            Some(d) => w
                .line("// Whether every token is packed in shared memory with at most 16 bytes.")
                .line(format!(
                    "const bool zf_short = false, zf_mid = __syncthreads_and(zf_lmax{d} <= 16u);"
                )),
            None => w
                .line("__syncthreads();")
                .line("const bool zf_short = false, zf_mid = false;"),
        };
        // The expansion: each row's first token (relative to the segment's), and per token
        // `so[j]`, `sl[j]` (source offset and length), then the copy of a tile's bytes.
        w.lines(
            r#"// Each thread's ZF_ROW_ITEMS consecutive rows and their first tokens.
const u32 rb = r0 + threadIdx.x * ZF_ROW_ITEMS;
u32 rt[ZF_ROW_ITEMS];
u32 zf_flip = 0u;
"#,
        )
        .lines(if counts.is_some() { COUNTED_ROWS } else { TOKEN_ROWS })
        .lines(format!(
            r#"// Uniform: the segment's tokens and bytes lie within the chunk's and agree with its rows.
if (!(T0 <= T1 && T1 <= ntok && B0 <= B1 && B1 <= claimed && ctot == (u64)(T1 - T0) && {check})) {{
  if (threadIdx.x == 0u) atomicOr(e.err, ZF_ERR_STR);
  zf_bulk_wait();
  return;
}}
#pragma unroll
for (u32 i = 0u; i < ZF_ROW_ITEMS; ++i) rt[i] += (u32)cb;
const u32 tseg = T1 - T0, bseg = B1 - B0;
u32 bc = 0u;
bool good = true;
const u32 tend = tseg == 0u ? 0u : tseg + za;
"#
        ));
        // With every entry packed in shared memory (`zf_mid`), a token's entry is one load;
        // a code past the dictionary reads as empty and is caught after the segment from
        // the largest code (when the segment has tokens: with none the largest is no code).
        if d.is_some() {
            w.line("u32 zf_cmax = 0u;");
        }
        // A `words` thread's rows take their first tokens' positions from the tiles
        // those lie in, and are stored once, after the last tile: a 16-byte store a
        // thread (two of 8-byte offsets) where one store a row and tile wrote a quarter
        // of each sector it touched.
        if words {
            w.lines(
                r#"// Each row's first byte from the segment's (the rows after the last token: its end).
u32 ro[ZF_ROW_ITEMS];
#pragma unroll
for (u32 i = 0u; i < ZF_ROW_ITEMS; ++i) ro[i] = bseg;
"#,
            );
        }
        self.tile_loop(w, r, x);
        if let Some(d) = d {
            w.line(format!(
                "if (tseg != 0u && zf_cmax >= zf_m{d}) atomicOr(e.err, ZF_ERR_DICT);"
            ));
        }
        w.open("if (!good || bc != bseg)")
            .line("if (threadIdx.x == 0u) atomicOr(e.err, ZF_ERR_STR);")
            .reopen("else if (ow != 0u)");
        row_stores(w, words);
        w.close()
            .lines(
                r#"if (r1 == n && threadIdx.x == 0u) {
  if (ow == 8u) ((u64*)o)[n] = at + claimed;
  else if (ow == 4u) ((u32*)o)[n] = (u32)(at + claimed);
}
"#,
            )
            .close();
    }

    /// A segment's loop over its tiles: each tile's codes looked up, its bytes copied and its
    /// rows' offsets placed.
    fn tile_loop(&self, w: &mut Writer, r: &Root, x: &Expansion) {
        let small = match r.d {
            Some(d) => format!("zf_nb{d} < (1u << 20)"),
            None => "false".to_string(),
        };
        w.open("for (u32 tt = 0u; tt < tend; tt += ZF_TILE_TOK)")
            .open("if (!seg_codes)")
            .line(format!("{};", x.stage_tile))
            .line("__syncthreads();")
            .close()
            .lines(
                r#"const ZF_CODE_T* const codes = zf_scode + (seg_codes ? tt : 0u);
// ZF_TOK_ITEMS consecutive tokens per thread: its bytes are one run.
const u32 tb = tt + threadIdx.x * ZF_TOK_ITEMS;
// Its codes in 16-byte loads (those past the segment's tokens are not used).
"#,
            );
        self.load_codes(w);
        w.blank()
            .line("u32 so[ZF_TOK_ITEMS], sl[ZF_TOK_ITEMS];")
            .line("u64 lsum = 0ull;");
        token_lookup(w, r.d);
        w.lines(format!(
            r#"// The last tile's bulk copy has read the stage before the sum's barrier, after which
// the stage is written.
zf_bulk_read_wait();
// Token lengths below 2^20 (a dictionary of fewer bytes) add up in 32 bits.
u64 ttot, p0;
if ({small}) {{
  u32 t32;
  p0 = zf_scan_tile<u32>((u32)lsum, &t32, zf_flip);
  ttot = t32;
}} else {{
  p0 = zf_scan_tile<u64>(lsum, &ttot, zf_flip);
}}
// Uniform: the tile's bytes fit the segment's (else the chunk is corrupt).
if ((u64)bc + ttot > (u64)bseg) {{
  good = false;
  break;
}}
"#
        ))
        .open("if (ow != 0u)")
        .lines(
            r#"// Its token positions, 16 bytes a store.
u32 tp[ZF_TOK_ITEMS];
tp[0] = bc + (u32)p0;
#pragma unroll
for (u32 j = 1u; j < ZF_TOK_ITEMS; ++j) tp[j] = tp[j - 1u] + sl[j - 1u];
"#,
        );
        self.store_positions(w);
        w.close().lines(
            r#"// The copy ends with a barrier, so the offsets read the positions whole. No barrier
// after them: the next tile's first (in its sum) comes before anything it writes to
// shared memory.
"#,
        );
        self.tile_copy(w, r);
        w.lines(if r.words { WORDS_OFFSETS } else { ROW_OFFSETS })
            .blank()
            .line("bc += (u32)ttot;")
            .close();
    }
}

/// What the phases of a byte-string root share: its node, its token children and the
/// expressions both kernels read them with.
struct Root {
    k: usize,
    n: NodeSlots,
    /// The root's first descriptor slot.
    b: usize,
    /// Its children: the codes (words, strdict) or lengths (plain), the dictionary (or the
    /// bytes) and a `words` root's counts.
    ch: [usize; 3],
    words: bool,
    /// The declaration of `ntok`, the chunk's tokens.
    ntok: String,
    /// The staged reader of the tokens' codes or lengths, and of a `words` root's counts.
    vals: String,
    counts: Option<String>,
    /// The dictionary node, and the check of its entries.
    d: Option<usize>,
    check: String,
}

/// The pieces of a segment's expansion that depend on the shape (see `Gen::expansion`):
/// the lines that prefetch the next segment, and the statements that stage a segment's
/// codes and a tile's.
struct Expansion {
    prefetch: Vec<String>,
    stage_seg: String,
    stage_tile: String,
}

/// Each row's first token from the rows' counts, summed over the segment.
const COUNTED_ROWS: &str = r#"u64 csum = 0ull;
#pragma unroll
for (u32 i = 0u; i < ZF_ROW_ITEMS; ++i) {
  rt[i] = (u32)csum;
  csum += rb + i < r1 ? zf_stp[threadIdx.x * ZF_ROW_ITEMS + i] : 0u;
}
u64 ctot;
const u64 cb = zf_scan_tile<u64>(csum, &ctot, zf_flip);
"#;

/// Each row's first token where a row is one token.
const TOKEN_ROWS: &str = r#"#pragma unroll
for (u32 i = 0u; i < ZF_ROW_ITEMS; ++i) rt[i] = i;
const u64 ctot = r1 - r0, cb = threadIdx.x * ZF_ROW_ITEMS;
"#;

/// A warp's sum `b` of the bytes of tokens [a, z) of a segment, for the segment table.
fn segment_bytes(w: &mut Writer, r: &Root) {
    let vals = &r.vals;
    let sum_len = match r.d {
        Some(d) => format!(
            "if (c < zf_m{d}) {{ u32 so, sl; zf_entry(zf_m{d} < ZF_STR_OFFS, zf_goff{d}, c, so, sl); b += sl; }} else atomicOr(e.err, ZF_ERR_DICT);"
        ),
        None => "b += c;".to_string(),
    };
    // With every entry packed in shared memory, a token's length is one load (its code
    // clamped; a code past the dictionary is found from the largest of a warp's range,
    // when it has one), and whole bit-packed items or radix groups go unchecked.
    let checked_sum =
        format!("{vals}(e, (u32)a, (u32)(z - a), lane, 32u, [&](u32, u32 c) {{ {sum_len} }});");
    match r.d {
        Some(d) => w
            .open(format!("if (zf_allpk{d})"))
            .line("u32 cmax = 0u;")
            .line(format!(
                "{vals}<true>(e, (u32)a, (u32)(z - a), lane, 32u, [&](u32, u32 c) {{ cmax = max(cmax, c); b += zf_soff[min(c, zf_m{d})] >> 24; }});"
            ))
            .line(format!(
                "if (z > a && cmax >= zf_m{d}) atomicOr(e.err, ZF_ERR_DICT);"
            ))
            .reopen("else")
            .line(checked_sum)
            .close(),
        None => w.line(checked_sum),
    };
}

/// The runs of a tile whose bytes fit the stage, assembled there a word at a time: one step
/// a token where every entry of dictionary `d` is short enough, else 16 bytes a step.
fn assemble_runs(w: &mut Writer, d: usize, words: bool) {
    w.lines(
        r#"// Each step takes up to 16 bytes of a token (read as four words at its byte
// alignment, masked to its length) and shifts them after the `nb` pending bits.
const u32 a0 = (u32)(g - gb) + (u32)p0, wf = a0 >> 2;
const u32* const dw = (const u32*)zf_sdict;
u32 wi = wf, nb = (a0 & 3u) * 8u, pend = 0u, first = 0u;
"#,
    )
    .open("if (zf_short)");
    // A `words` root has no short step, and one step of five words for tokens of at most
    // 16 bytes.
    if !words {
        one_step(w, 2, d, false);
    }
    w.reopen("else if (zf_mid)");
    one_step(w, if words { 4 } else { 6 }, d, words);
    // The `else` block's lines stay at its depth.
    w.close_with(" else {")
        .directive("#pragma unroll")
        .open("for (u32 j = 0u; j < ZF_TOK_ITEMS; ++j)")
        .line(format!("u32 src = zf_dsh{d} + so[j], rem = sl[j];"))
        .open("while (rem != 0u)")
        .lines(
            r#"// Bits past the token are cleared from the pending word only: every word
// stored whole holds the run's bytes alone.
const u32 take = min(rem, 16u), wa = src >> 2, sh = (src & 3u) * 8u;
"#,
        );
    // The words holding this step's bytes, as in the one-step path.
    dict_words(w, 5, "take", words);
    w.lines(
        r#"const u32 t0 = __funnelshift_r(d0, d1, sh), t1 = __funnelshift_r(d1, d2, sh);
const u32 t2 = __funnelshift_r(d2, d3, sh), t3 = __funnelshift_r(d3, d4, sh);
const u32 o0 = pend | (t0 << nb), o1 = __funnelshift_l(t0, t1, nb);
const u32 o2 = __funnelshift_l(t1, t2, nb), o3 = __funnelshift_l(t2, t3, nb);
const u32 o4 = __funnelshift_l(t3, 0u, nb);
const u32 bits = nb + take * 8u, full = bits >> 5;
// The run's first word is shared with the run before: it is or-ed in last.
if (full > 0u) {
  if (wi == wf) first = o0; else sw[wi] = o0;
}
if (full > 1u) sw[wi + 1u] = o1;
if (full > 2u) sw[wi + 2u] = o2;
if (full > 3u) sw[wi + 3u] = o3;
nb = bits & 31u;
pend = (full == 0u ? o0 : full == 1u ? o1 : full == 2u ? o2 : full == 3u ? o3 : o4)
    & __funnelshift_lc(0xffffffffu, 0u, nb);
wi += full;
src += take;
rem -= take;
"#,
    )
    .close()
    .close()
    .line("}")
    .line("if (wi != wf) atomicOr(sw + wf, first);")
    .line("if (nb != 0u) atomicOr(sw + wi, pend);");
}

/// The lookup of a tile's tokens (`so[j]`, `sl[j]` and their sum), one load each where every
/// entry of dictionary `d` is packed in shared memory, else checked.
fn token_lookup(w: &mut Writer, d: Option<usize>) {
    if let Some(d) = d {
        w.open("if (zf_mid)")
            .directive("#pragma unroll")
            .open("for (u32 j = 0u; j < ZF_TOK_ITEMS; ++j)")
            .lines(format!(
                r#"const bool in = tb + j - za < tseg;
const u32 c = cq[j], v = in && c < zf_m{d} ? zf_soff[c] : 0u;
zf_cmax = max(zf_cmax, in ? c : 0u);
so[j] = v & 0xffffffu;
sl[j] = v >> 24;
lsum += sl[j];
"#
            ))
            .close()
            // The `else` block's lines stay at its depth.
            .close_with(" else {");
    }
    w.directive("#pragma unroll")
        .open("for (u32 j = 0u; j < ZF_TOK_ITEMS; ++j)")
        .line("so[j] = 0u;")
        .line("sl[j] = 0u;")
        .open("if (tb + j - za < tseg)");
    // A token's source offset `so[j]` and length `sl[j]` from its code `cq[j]` (checked).
    match d {
        Some(d) => w
            .line("const u32 c = cq[j];")
            .open(format!("if (c < zf_m{d})"))
            .line(format!(
                "zf_entry(zf_m{d} < ZF_STR_OFFS, zf_goff{d}, c, so[j], sl[j]);"
            ))
            .reopen("else")
            .line("atomicOr(e.err, ZF_ERR_DICT);")
            .close(),
        None => w.line("sl[j] = cq[j];"),
    };
    w.close().line("lsum += sl[j];").close();
    if d.is_some() {
        w.line("}");
    }
}

/// The stores of a segment's rows' offsets after its last tile.
fn row_stores(w: &mut Writer, words: bool) {
    if !words {
        w.lines(
            r#"// Rows after the last token (empty strings).
#pragma unroll
for (u32 i = 0u; i < ZF_ROW_ITEMS; ++i) {
  if (rb + i < r1 && rt[i] == tseg) {
    if (ow == 8u) ((u64*)o)[rb + i] = at + B1; else ((u32*)o)[rb + i] = (u32)(at + B1);
  }
}
"#,
        );
        return;
    }
    let rows = SEGMENT_ROWS / crate::codegen::STRING_THREADS;
    let scalar = r#"#pragma unroll
for (u32 i = 0u; i < ZF_ROW_ITEMS; ++i) {
  if (rb + i < r1) {
    if (ow == 8u) ((u64*)o)[rb + i] = base + ro[i]; else ((u32*)o)[rb + i] = (u32)(base + ro[i]);
  }
}
"#;
    w.line("const u64 base = at + B0;");
    if !rows.is_multiple_of(4) {
        w.open("").lines(scalar).close();
        return;
    }
    w.open("if (rb + ZF_ROW_ITEMS <= r1 && ((size_t)o & 15u) == 0u)")
        .open("if (ow == 8u)");
    for q in 0..rows / 2 {
        w.line(format!(
            "__stcs((ulonglong2*)((u64*)o + rb) + {q}, make_ulonglong2(base + ro[{}], base + ro[{}]));",
            2 * q,
            2 * q + 1
        ));
    }
    w.reopen("else").line("const u32 b = (u32)base;");
    for q in 0..rows / 4 {
        w.line(format!(
            "__stcs((uint4*)((u32*)o + rb) + {q}, make_uint4(b + ro[{}], b + ro[{}], b + ro[{}], b + ro[{}]));",
            4 * q,
            4 * q + 1,
            4 * q + 2,
            4 * q + 3
        ));
    }
    w.close().reopen("else").lines(scalar).close();
}

/// The stores of the offsets of the rows whose first token is in a `words` tile.
const WORDS_OFFSETS: &str = r#"// Rows whose first token is in this tile.
if (ow != 0u) {
#pragma unroll
  for (u32 i = 0u; i < ZF_ROW_ITEMS; ++i) {
    if (rt[i] < tseg && rt[i] + za >= tt && rt[i] + za - tt < ZF_TILE_TOK) ro[i] = zf_stp[rt[i] + za - tt];
  }
}
"#;

/// The stores of the offsets of a tile's rows, one token each.
const ROW_OFFSETS: &str = r#"// One token per row: the tile's rows, stored in order.
if (ow != 0u) {
  const u32 tn = min(ZF_TILE_TOK, tseg - tt);
  for (u32 x = threadIdx.x; x < tn; x += ZF_THREADS) {
    const u64 v = at + B0 + zf_stp[x];
    if (ow == 8u) __stcs((u64*)o + r0 + tt + x, v); else __stcs((u32*)o + r0 + tt + x, (u32)v);
  }
}
"#;
