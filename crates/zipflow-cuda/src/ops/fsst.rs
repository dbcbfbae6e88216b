//! `fsst`: a byte stream as one-byte codes into a table of up to 8-byte symbols, in pieces
//! that decode on their own; one thread a piece.

use super::Filler;
use crate::codegen::Gen;
use zipflow_core::{Error, Result};
use zipflow_encodings::{NodeView, fsst};

/// Slots after the length: the byte offset of the symbol table (256 `u64` symbols, then 256
/// `u8` lengths, 0 for codes without a symbol; staged by the host after the tree), the byte
/// offset of the piece ends, the pieces' log2 size.
pub(crate) const SLOTS: usize = 3;

/// Checks an `fsst` node, stages its symbol table and writes its slots.
pub(crate) fn fill(f: &mut Filler<'_>, node: &NodeView<'_>, b: usize) -> Result<()> {
    let (table, log2, ends) = fsst::check(node)?;
    if ends.is_empty() && node.children[0].len != 0 {
        return Err(Error::corrupt("fsst codes for an empty stream"));
    }
    // The symbol table for the kernel: 256 symbols (0 past the table's), then their 256
    // lengths (0: a code without a symbol).
    f.prm[b + 1] = f.extra_aligned(8);
    for c in 0..256 {
        let s = table.symbols.get(c).copied().unwrap_or(0);
        f.extra.extend_from_slice(&s.to_le_bytes());
    }
    for c in 0..256 {
        f.extra.push(table.lens.get(c).copied().unwrap_or(0));
    }
    f.prm[b + 2] = f.offset(ends, 4)?;
    f.prm[b + 3] = u64::from(log2);
    Ok(())
}

impl Gen<'_> {
    /// The stage of an `fsst` node `k`.
    pub(crate) fn fsst_stage(&mut self, k: usize) -> Result<String> {
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
