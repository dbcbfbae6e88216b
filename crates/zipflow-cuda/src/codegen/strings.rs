//! Stages for `ans` streams and byte strings.
//!
//! - `ans`: each warp of the chunk's block takes whole blocks of the stream and decodes them
//!   with one state per lane, exactly as the format lays them out (`zipflow_encodings::ans`):
//!   the lanes that renormalise find their word by a ballot and a population count. The
//!   4096-slot decoding table is built in shared memory from the cumulative frequencies the
//!   host staged after the tree.
//! - String dictionaries (`plain` over byte strings under `strdict` or `words`): the entries'
//!   offsets (an exclusive sum of their lengths) and their bytes go to shared memory when they
//!   fit, to the chunk's scratch region (offsets) or stay in the input (bytes) otherwise.
//! - String roots: each tile of `ZF_THREADS` rows finds its strings' lengths (a dictionary
//!   entry's, a sum of tokens', or the lengths child's), one block-wide exclusive sum places
//!   them, each thread copies its strings' bytes into a shared staging buffer, and the block
//!   stores the tile's bytes in order (coalesced). Offsets are `u32` or `u64` (the host
//!   picks per column), relative to the start of the column's bytes, or not written at all
//!   when only the bytes are wanted.
//!
//! Every read is bounded by what the host validated (dictionary codes and token positions
//! are checked in the kernel), and every write by the chunk's byte count: a chunk whose
//! strings do not add up to it sets [`super::ERR_STR`] instead of writing past its region.

use super::Gen;
use crate::shape::Op;
use zipflow_core::{PType, Result};

/// Entries of a `words` dictionary whose offsets are kept in shared memory (a `strdict`'s:
/// a quarter of it, so that more chunks share a multiprocessor).
pub const DICT_OFFSETS: u32 = 4096;
/// Bytes of a `words` dictionary kept in shared memory (a `strdict`'s: a quarter).
pub const DICT_BYTES: u32 = 24 * 1024;
/// Bytes of a tile's strings assembled in shared memory before they are stored.
pub const STAGE_BYTES: u32 = 16 * 1024;
/// Token codes of a `words` tile staged in shared memory.
pub const TOKENS: u32 = 4096;

/// Words of an `ans` block each warp keeps in shared memory.
pub const ANS_WINDOW: u32 = 512;

const ANS_RENORM: &str = r#"
// A warp's window of its block's words in shared memory: words [base, end) of the stream.
// Each step reads its words from the window, so the state's dependency chain waits on
// shared memory, not on device memory; the window is refilled (all loads in flight at once)
// when a step might read past it.
struct ZfWin {
  u16* w;
  u32 base, end;
};

__device__ __forceinline__ void zf_ans_fill(ZfWin& win, const u16* __restrict__ words,
                                            u32 from, u32 stop) {
  __syncwarp();
  const u32 to = min(from + ZF_ANS_WIN, stop), lane = threadIdx.x & 31u;
#pragma unroll 8
  for (u32 i = from + lane; i < to; i += 32u) win.w[i - from] = __ldg(words + i);
  __syncwarp();
  win.base = from;
  win.end = to;
}

// Refills the states of the lanes that fell below 2^16, in lane order, from the block's
// words; a read past the block's words marks it bad.
__device__ __forceinline__ void zf_ans_renorm(u32& x, bool act, u32& pos, const ZfWin& win,
                                              bool& bad) {
  const bool need = act && x < 65536u;
  const u32 m = __ballot_sync(0xffffffffu, need);
  if (need) {
    const u32 i = pos + __popc(m & ((1u << (threadIdx.x & 31u)) - 1u));
    u32 w = 0u;
    if (i < win.end) w = win.w[i - win.base]; else bad = true;
    x = (x << 16) | w;
  }
  pos += __popc(m);
}
"#;

impl Gen<'_> {
    /// Declares the dynamic shared memory of string kernels once.
    fn declare_strings(&mut self) {
        if self.dyn_smem != 0 {
            return;
        }
        let (offs, dict, tokens, items) = match self.nodes[0].op {
            Op::Words => (DICT_OFFSETS, DICT_BYTES, TOKENS, 1),
            Op::StrDict => (DICT_OFFSETS / 4, DICT_BYTES / 4, 0, 2),
            _ => (0, 0, 0, 2),
        };
        self.dyn_smem = offs * 4 + dict + STAGE_BYTES + tokens * 4;
        self.src.push_str(&format!(
            r#"
#define ZF_STR_OFFS {offs}u
#define ZF_STR_DICT {dict}u
#define ZF_STR_STAGE {STAGE_BYTES}u
#define ZF_STR_TOK {tokens}u
// Consecutive rows per thread in each tile.
#define ZF_STR_ITEMS {items}u
// Dynamic shared memory: dictionary offsets, the tile's tokens, the tile's staged bytes,
// dictionary bytes.
extern __shared__ __align__(16) u8 zf_dyn[];
#define zf_soff ((u32*)zf_dyn)
#define zf_stok ((u32*)zf_dyn + ZF_STR_OFFS)
#define zf_stage (zf_dyn + 4u * (ZF_STR_OFFS + ZF_STR_TOK))
#define zf_sdict (zf_stage + ZF_STR_STAGE)
"#
        ));
    }

    /// Emits the stage that decodes `ans` node `k` into its buffer.
    pub(super) fn ans_stage(&mut self, k: usize) -> Result<String> {
        let n = self.nodes[k].clone();
        let t = super::ctype(n.ptype)?;
        let b = n.base;
        if !self.ans_table {
            self.ans_table = true;
            self.src.push_str(&format!(
                "\n#define ZF_ANS_WIN {ANS_WINDOW}u\n__shared__ u32 zf_atab[4096];\n__shared__ u16 zf_awin[ZF_THREADS / 32u][ZF_ANS_WIN];\n"
            ));
            self.src.push_str(ANS_RENORM);
        }
        let nphases = match n.ptype {
            PType::U8 => 1,
            PType::U16 => 2,
            _ => 3,
        };
        let phases = match n.ptype {
            PType::U8 => "",
            PType::U16 => {
                r#"
        // Bypass bits only when some lane's bucket has them (else no state changes).
        u32 nb = 0u;
        if (__any_sync(0xffffffffu, act && v >= 16u)) {
        if (act && v >= 16u) {
          nb = (v >> 2) - 2u;
          const u32 k1 = min(nb, 16u);
          const u32 bits = x & ((1u << k1) - 1u);
          x >>= k1;
          v = ((4u + (v & 3u)) << nb) | bits;
        }
        zf_ans_renorm(x, act, pos, win, bad);
        }"#
            }
            _ => {
                r#"
        // Bypass bits only when some lane's bucket has them (else no state changes).
        u32 nb = 0u;
        if (__any_sync(0xffffffffu, act && v >= 16u)) {
        if (act && v >= 16u) {
          nb = (v >> 2) - 2u;
          const u32 k1 = min(nb, 16u);
          const u32 bits = x & ((1u << k1) - 1u);
          x >>= k1;
          v = ((4u + (v & 3u)) << nb) | bits;
        }
        zf_ans_renorm(x, act, pos, win, bad);
        if (__any_sync(0xffffffffu, nb > 16u)) {
        if (act && nb > 16u) {
          const u32 k2 = nb - 16u;
          v |= (x & ((1u << k2) - 1u)) << 16;
          x >>= k2;
        }
        zf_ans_renorm(x, act, pos, win, bad);
        }
        }"#
            }
        };
        let out = self.buf(k, "first + j0 + lane")?;
        Ok(format!(
            r#"  {{ // node {k}: ans: each warp decodes whole blocks, one state per lane
    const u32 n = (u32)e.prm[{b}];
    const u32 nsym = (u32)e.prm[{nsym}];
    const u32* cum = (const u32*)(e.in + e.prm[{cum}]);
    // The table may still be read by an earlier ans stage.
    __syncthreads();
    if (n != 0u) {{
      for (u32 slot = threadIdx.x; slot < 4096u; slot += ZF_THREADS) {{
        u32 lo = 0u, hi = nsym;  // the last symbol whose cumulative frequency is <= slot
        while (hi - lo > 1u) {{
          const u32 mid = (lo + hi) >> 1;
          if (__ldg(cum + mid) <= slot) lo = mid; else hi = mid;
        }}
        const u32 c = __ldg(cum + lo), f = __ldg(cum + lo + 1u) - c;
        zf_atab[slot] = f << 20 | (slot - c) << 8 | lo;
      }}
    }}
    __syncthreads();
    const u32 lb = (u32)e.prm[{log2}], B = 1u << lb, nblocks = (n + B - 1u) >> lb;
    const u32* states = (const u32*)(e.in + e.prm[{states}]);
    const u32* starts = (const u32*)(e.in + e.prm[{starts}]);
    const u16* words = (const u16*)(e.in + e.prm[{words}]);
    const u32 nwords = (u32)e.prm[{nwords}];
    const u32 lane = threadIdx.x & 31u;
    for (u32 blk = threadIdx.x >> 5; blk < nblocks; blk += ZF_THREADS / 32u) {{
      const u32 first = blk * B, cnt = min(B, n - first);
      u32 x = __ldg(states + blk * 32u + lane);
      u32 pos = __ldg(starts + blk);
      const u32 end = blk + 1u < nblocks ? __ldg(starts + blk + 1u) : nwords;
      bool bad = false;
      ZfWin win = {{zf_awin[threadIdx.x >> 5], 0u, 0u}};
      zf_ans_fill(win, words, pos, end);
      for (u32 j0 = 0u; j0 < cnt; j0 += 32u) {{
        // A step reads at most 32 words per phase.
        if (pos + {nphases}u * 32u > win.end && win.end < end) zf_ans_fill(win, words, pos, end);
        const bool act = j0 + lane < cnt;
        u32 v = 0u;
        if (act) {{
          const u32 s = zf_atab[x & 4095u];
          v = s & 0xffu;
          x = (s >> 20) * (x >> 12) + ((s >> 8) & 4095u);
        }}
        zf_ans_renorm(x, act, pos, win, bad);{phases}
        if (act) {out} = ({t})v;
      }}
      if (bad || pos != end || x != 65536u) atomicOr(e.err, ZF_ERR_ANS);
    }}
    __syncthreads();
  }}
"#,
            states = b + 1,
            starts = b + 2,
            words = b + 3,
            nwords = b + 4,
            log2 = b + 5,
            cum = b + 6,
            nsym = b + 7,
        ))
    }

    /// Emits the stage that stages string dictionary `k` (`plain` over byte strings) and
    /// declares `zf_m<k>` (entries), `zf_doff<k>` (offsets, `m + 1`), `zf_dok<k>` (whether
    /// the lengths add up to the bytes) for the root's stage; `zf_db<k>(q)` reads byte `q`.
    pub(super) fn dict_stage(&mut self, k: usize) -> Result<()> {
        self.declare_strings();
        let n = self.nodes[k].clone();
        let (lengths, bytes) = (n.children[0], n.children[1]);
        let scratch = n.scratch.map_or_else(|| "0".to_string(), |s| s.to_string());
        self.stages.push_str(&format!(
            r#"  // node {k}: dictionary: entry offsets (exclusive sum of the lengths) and bytes,
  // in shared memory when they fit
  const u32 zf_m{k} = (u32)e.prm[{b}];
  const u32 zf_nb{k} = (u32)e.prm[{nb}];
  u32* const zf_doff{k} = zf_m{k} < ZF_STR_OFFS ? zf_soff : (u32*)(e.scratch + e.prm[{scratch}]);
  const bool zf_sb{k} = zf_nb{k} <= ZF_STR_DICT;
  {{
    u64 carry = 0ull;
    for (u32 i0 = 0u; i0 < zf_m{k}; i0 += ZF_THREADS) {{
      const u32 i = i0 + threadIdx.x;
      const u32 l = i < zf_m{k} ? (u32)zf_n{lengths}(e, i) : 0u;
      u64 tot;
      const u64 s = carry + zf_scan_excl<u64>((u64)l, &tot);
      if (i < zf_m{k}) zf_doff{k}[i] = (u32)min(s, (u64)0xffffffffu);
      carry += tot;
    }}
    if (threadIdx.x == 0u) {{
      zf_doff{k}[zf_m{k}] = (u32)min(carry, (u64)0xffffffffu);
      if (carry != (u64)zf_nb{k}) atomicOr(e.err, ZF_ERR_STR);
    }}
    if (zf_sb{k}) for (u32 q = threadIdx.x; q < zf_nb{k}; q += ZF_THREADS) zf_sdict[q] = zf_n{bytes}(e, q);
    __syncthreads();
  }}
  const bool zf_dok{k} = zf_doff{k}[zf_m{k}] == zf_nb{k};
#define zf_db{k}(q) (zf_sb{k} ? zf_sdict[q] : zf_n{bytes}(e, (q)))
"#,
            b = n.base,
            nb = self.nodes[bytes].base,
        ));
        Ok(())
    }

    /// Emits the root stage of a byte-string shape: offsets and bytes of every row.
    pub(super) fn string_root(&mut self, k: usize) -> Result<()> {
        self.declare_strings();
        let n = self.nodes[k].clone();
        let b = n.base;
        let ch = |i: usize| n.children.get(i).copied().unwrap_or(0);
        // Per row `r = rb + i`: its byte length `l[i]`, and the code that copies its bytes to
        // `dst` (rows whose length is 0 copy nothing).
        let (find, copy, check) = match n.op {
            Op::StrDict => {
                let (codes, d) = (ch(0), ch(1));
                (
                    format!(
                        r#"      u32 so[ZF_STR_ITEMS];
#pragma unroll
      for (u32 i = 0u; i < ZF_STR_ITEMS; ++i) {{
        const u32 r = rb + i;
        so[i] = 0u;
        l[i] = 0u;
        if (r < n) {{
          const u32 c = (u32)zf_n{codes}(e, r);
          if (c < zf_m{d}) {{
            so[i] = zf_doff{d}[c];
            l[i] = zf_doff{d}[c + 1u] - so[i];
          }} else {{
            atomicOr(e.err, ZF_ERR_DICT);
          }}
        }}
      }}
"#
                    ),
                    format!("for (u32 j = 0u; j < l[i]; ++j) dst[j] = zf_db{d}(so[i] + j);"),
                    format!("zf_dok{d}"),
                )
            }
            Op::Words => {
                let (codes, d, counts) = (ch(0), ch(1), ch(2));
                (
                    format!(
                        r#"      // The tile's tokens are consecutive codes: staged in shared memory at once.
      u32 cnt[ZF_STR_ITEMS], csum = 0u;
#pragma unroll
      for (u32 i = 0u; i < ZF_STR_ITEMS; ++i) {{
        cnt[i] = rb + i < n ? (u32)zf_n{counts}(e, rb + i) : 0u;
        csum += cnt[i];
      }}
      u32 ttot;
      const u32 tt = zf_scan_excl<u32>(csum, &ttot);
      const bool tok_ok = (u64)tcarry + ttot <= (u64)ntok && ttot >= csum;
      if (!tok_ok && threadIdx.x == 0u) atomicOr(e.err, ZF_ERR_STR);
      const bool tok_staged = tok_ok && ttot <= ZF_STR_TOK;
      if (tok_staged) {{
        for (u32 q = threadIdx.x; q < ttot; q += ZF_THREADS) zf_stok[q] = (u32)zf_n{codes}(e, tcarry + q);
      }}
      __syncthreads();
#define ZF_TOKEN(q) (tok_staged ? zf_stok[q] : (u32)zf_n{codes}(e, tcarry + (q)))
      u32 t0 = tt;
#pragma unroll
      for (u32 i = 0u; i < ZF_STR_ITEMS; ++i) {{
        l[i] = 0u;
        if (tok_ok) {{
          for (u32 t = t0; t < t0 + cnt[i]; ++t) {{
            const u32 c = ZF_TOKEN(t);
            if (c < zf_m{d}) {{
              l[i] += zf_doff{d}[c + 1u] - zf_doff{d}[c];
            }} else {{
              atomicOr(e.err, ZF_ERR_DICT);
            }}
          }}
        }}
        t0 += cnt[i];
      }}
"#
                    ),
                    format!(
                        r#"{{
          u32 t = tt;
          for (u32 x = 0u; x < i; ++x) t += cnt[x];
          u8* w = dst;
          for (const u32 te = t + cnt[i]; t < te; ++t) {{
            const u32 c = ZF_TOKEN(t);
            if (c >= zf_m{d}) continue;
            const u32 so = zf_doff{d}[c], sl = zf_doff{d}[c + 1u] - so;
            for (u32 j = 0u; j < sl; ++j) w[j] = zf_db{d}(so + j);
            w += sl;
          }}
        }}"#
                    ),
                    format!("zf_dok{d}"),
                )
            }
            _ => {
                let (lengths, bytes) = (ch(0), ch(1));
                (
                    r#"#pragma unroll
      for (u32 i = 0u; i < ZF_STR_ITEMS; ++i) l[i] = rb + i < n ? (u32)zf_n@L@(e, rb + i) : 0u;
"#
                    .replace("@L@", &lengths.to_string()),
                    format!("for (u32 j = 0u; j < l[i]; ++j) dst[j] = zf_n{bytes}(e, s + j);"),
                    "true".to_string(),
                )
            }
        };
        let (words_head, words_tail) = if n.op == Op::Words {
            (
                format!(
                    "    const u32 ntok = (u32)e.prm[{}];\n    u32 tcarry = 0u;\n",
                    self.nodes[ch(0)].base
                ),
                "      tcarry += ttot;\n",
            )
        } else {
            (String::new(), "")
        };
        let words_end = if n.op == Op::Words {
            "    if (threadIdx.x == 0u && tcarry != ntok) atomicOr(e.err, ZF_ERR_STR);\n#undef ZF_TOKEN\n"
        } else {
            ""
        };
        self.stages.push_str(&format!(
            r#"  {{ // node {k}: {name} (byte strings): per tile of rows (ZF_STR_ITEMS consecutive per
    // thread), lengths, one exclusive sum for their positions, bytes assembled in shared
    // memory at the output's alignment and stored a word at a time
    const u32 n = len;
    const u64 at = e.prm[{at}];
    const u32 claimed = (u32)e.prm[{claimed}];
    // Offsets: 8 or 4 bytes each, or none (only the bytes are wanted).
    const u32 ow = (u32)e.prm[{ow}];
{words_head}    u32 carry = 0u;
    for (u32 r0 = 0u; r0 < n; r0 += ZF_THREADS * ZF_STR_ITEMS) {{
      const u32 rb = r0 + threadIdx.x * ZF_STR_ITEMS;
      u32 l[ZF_STR_ITEMS];
{find}      u32 lsum = 0u;
#pragma unroll
      for (u32 i = 0u; i < ZF_STR_ITEMS; ++i) lsum += l[i];
      u32 tot;
      const u32 s0 = carry + zf_scan_excl<u32>(lsum, &tot);
      // Uniform: the tile's bytes fit the chunk's region (else the chunk is corrupt).
      const bool fits = {check} && (u64)carry + tot <= (u64)claimed && tot >= lsum;
      const u64 g0 = at + carry;
      const u32 shift = (u32)g0 & 3u;
      const bool staged = fits && tot + shift <= ZF_STR_STAGE;
      u32 s = s0;
#pragma unroll
      for (u32 i = 0u; i < ZF_STR_ITEMS; ++i) {{
        const u32 r = rb + i;
        if (r < n) {{
          if (ow == 8u) ((u64*)o)[r] = at + s;
          else if (ow == 4u) ((u32*)o)[r] = (u32)(at + s);
        }}
        if (fits && l[i] != 0u) {{
          u8* dst = staged ? zf_stage + shift + (s - carry) : out + at + s;
          {copy}
        }}
        s += l[i];
      }}
      if (staged) {{
        // Stage index = output address - (g0 rounded down to a word).
        __syncthreads();
        const u64 g1 = g0 + tot, w0 = (g0 + 3u) & ~3ull, w1 = g1 & ~3ull;
        if (w0 > w1) {{
          if (threadIdx.x < tot) out[g0 + threadIdx.x] = zf_stage[shift + threadIdx.x];
        }} else {{
          if (threadIdx.x < w0 - g0) out[g0 + threadIdx.x] = zf_stage[shift + threadIdx.x];
          if (threadIdx.x < g1 - w1) out[w1 + threadIdx.x] = zf_stage[w1 - (g0 & ~3ull) + threadIdx.x];
          const u32* sw = (const u32*)zf_stage + (w0 - (g0 & ~3ull)) / 4u;
          u32* gw = (u32*)(out + w0);
          for (u32 q = threadIdx.x; q < (u32)((w1 - w0) / 4u); q += ZF_THREADS) gw[q] = sw[q];
        }}
      }}
      if (!fits && threadIdx.x == 0u) atomicOr(e.err, ZF_ERR_STR);
      carry += tot;
{words_tail}    }}
{words_end}    if (threadIdx.x == 0u) {{
      if (carry != claimed) atomicOr(e.err, ZF_ERR_STR);
      if (ow == 8u) ((u64*)o)[n] = at + claimed;
      else if (ow == 4u) ((u32*)o)[n] = (u32)(at + claimed);
    }}
  }}
"#,
            name = n.op.name(),
            at = b + 1,
            claimed = b + 2,
            ow = b + 3,
        ));
        Ok(())
    }
}
