//! Character coders as stages: `chardict`/`chartable` (each thread decodes whole 1024-byte
//! blocks through a table of every 10-bit window's first code) and `fsst` (each thread
//! decodes whole pieces, the symbols in shared memory).

use super::Gen;
use zipflow_core::Result;

impl Gen<'_> {
    /// The stage of a `chardict` or `chartable` node `k`.
    pub(super) fn char_stage(&mut self, k: usize) -> Result<String> {
        let n = self.nodes[k].clone();
        let b = self.nodes[k].base;
        Ok(format!(
            r#"  {{ // node {k}: {name}: each thread decodes whole 1024-byte blocks, a code at a time
    // from a table of every 10-bit window's first code
    const u32 n = (u32)e.prm[{b}], nbytes = (u32)e.prm[{nbytes}];
    const u8* pay = e.in + e.prm[{pay}];
    const uint4* blk = (const uint4*)(e.in + e.prm[{blocks}]);
    const u16* tabs = (const u16*)(e.in + e.prm[{tables}]);
    for (u32 i = threadIdx.x; i < (n + 1023u) / 1024u; i += ZF_THREADS) {{
      const uint4 r = __ldg(blk + i);  // first code bit, end bit, table
      const u16* t = tabs + (u64)r.z * 1024u;
      const u32 p0 = i * 1024u, cnt = min(1024u, n - p0);
      u64 pos = r.x;
      for (u32 j = 0u; j < cnt; ++j) {{
        // 10 bits from `pos`, most significant first; bytes past the stream read as zeros.
        const u32 at = (u32)min(pos >> 3, (u64)nbytes);
        u32 w = 0u;
#pragma unroll
        for (u32 x = 0u; x < 3u; ++x) w = (w << 8) | (at + x < nbytes ? (u32)__ldg(pay + at + x) : 0u);
        const u32 c = __ldg(t + ((w >> (14u - (u32)(pos & 7u))) & 1023u));
        {put} = (u8)c;
        pos += c >> 8;
      }}
      if (pos != (u64)r.y) atomicOr(e.err, ZF_ERR_CHAR);
    }}
    __syncthreads();
  }}
"#,
            name = n.op.name(),
            pay = b + 1,
            blocks = b + 2,
            tables = b + 3,
            nbytes = b + 4,
            put = self.buf(k, "p0 + j")?,
        ))
    }

    /// The stage of an `fsst` node `k`.
    pub(super) fn fsst_stage(&mut self, k: usize) -> Result<String> {
        let n = self.nodes[k].clone();
        let b = self.nodes[k].base;
        let children = self.nodes[k].children.clone();
        let ch = |i: usize| children.get(i).copied().unwrap_or(0);
        Ok({
            // Into a scratch region (8-byte aligned, and so are pieces of 8 bytes or more):
            // each thread gathers its bytes into 8-byte words and stores them whole. At
            // the root, or for smaller pieces, byte by byte.
            let bytewise = format!(
                "for (u32 x = 0u; x < l; ++x) {} = (u8)(s >> (8u * x));",
                self.buf(k, "pos + x")?
            );
            let (begin, put, flush) = match n.scratch {
                    Some(slot) => (
                        format!(
                            "const bool wide = lg >= 3u;\n      u64* const w = (u64*)(e.scratch + e.prm[{slot}]) + (wide ? (i << lg) >> 3 : 0u);\n      u64 acc = 0ull;\n      u32 fill = 0u, nw = 0u;"
                        ),
                        // Byte string `s` of `l` bytes (1..=8) after the `fill` pending ones.
                        format!(
                            "if (!wide) {{\n          {bytewise}\n        }} else {{\n          acc |= fill == 0u ? s : s << (8u * fill);\n          if (fill + l >= 8u) {{\n            w[nw++] = acc;\n            acc = fill == 0u ? 0ull : s >> (8u * (8u - fill));\n            fill = fill + l - 8u;\n          }} else {{\n            fill += l;\n          }}\n        }}"
                        ),
                        "u8* const tail = (u8*)(w + nw);\n      for (u32 x = 0u; x < fill; ++x) tail[x] = (u8)(acc >> (8u * x));".to_string(),
                    ),
                    None => (String::new(), bytewise, String::new()),
                };
            format!(
                r#"  {{ // node {k}: fsst: each thread decodes whole pieces, symbols from shared memory
    __shared__ u64 zf_fs{k}[256];
    __shared__ u8 zf_fl{k}[256];
    const u64* tab = (const u64*)(e.in + e.prm[{table}]);
    for (u32 i = threadIdx.x; i < 256u; i += ZF_THREADS) {{
      const u8 l = ((const u8*)(tab + 256))[i];
      // Only the symbol's own bytes: they are ORed together.
      zf_fs{k}[i] = l >= 8u ? tab[i] : tab[i] & ((1ull << (8u * l)) - 1ull);
      zf_fl{k}[i] = l;
    }}
    __syncthreads();
    const u32 n = (u32)e.prm[{b}], lg = (u32)e.prm[{log2}], ncodes = (u32)e.prm[{clen}];
    const u32* ends = (const u32*)(e.in + e.prm[{ends}]);
    const u32 np = (u32)(((u64)n + (1ull << lg) - 1ull) >> lg);
    for (u32 i = threadIdx.x; i < np; i += ZF_THREADS) {{
      const u32 c0 = i == 0u ? 0u : __ldg(ends + i - 1u), c1 = __ldg(ends + i);
      const u32 o1 = (u32)min(((u64)i + 1ull) << lg, (u64)n);
      u32 pos = i << lg;
      {begin}
      bool bad = c0 > c1 || c1 > ncodes || (i + 1u == np && c1 != ncodes);
      for (u32 j = c0; j < c1 && !bad;) {{
        const u32 c = (u32)zf_n{codes}(e, j);
        u64 s;
        u32 l;
        if (c == 255u) {{
          if (j + 1u >= c1) {{ bad = true; break; }}
          s = (u64)zf_n{codes}(e, j + 1u);
          l = 1u;
          j += 2u;
        }} else {{
          s = zf_fs{k}[c];
          l = zf_fl{k}[c];
          ++j;
        }}
        if (l == 0u || pos + l > o1) {{ bad = true; break; }}
        {put}
        pos += l;
      }}
      {flush}
      if (bad || pos != o1) atomicOr(e.err, ZF_ERR_FSST);
    }}
    __syncthreads();
  }}
"#,
                table = b + 1,
                ends = b + 2,
                log2 = b + 3,
                clen = self.nodes[ch(0)].base,
                codes = ch(0),
            )
        })
    }
}
