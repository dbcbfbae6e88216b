//! `fsst`: a byte stream as one-byte codes into a table of up to 8-byte symbols, in pieces
//! that decode on their own; one thread a piece.

use super::Filler;
use crate::codegen::{Gen, Writer};
use zipflow_core::{Error, Result};
use zipflow_encodings::{NodeView, fsst};

/// Slots after the length: the byte offset of the symbol table (256 `u64` symbols, then 256
/// `u8` lengths, 0 for codes without a symbol; staged by the host after the tree), the byte
/// offset of the piece ends, the pieces' log2 size.
pub(crate) const SLOTS: usize = 3;

/// Checks an `fsst` node, stages its symbol table and writes its slots.
pub(crate) fn fill(f: &mut Filler<'_>, node: &NodeView<'_>, b: usize) -> Result<()> {
    let fsst::View {
        table,
        log2_piece: log2,
        ends,
    } = fsst::View::parse(node)?;
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
        let b = n.base;
        let codes = n.children.first().copied().unwrap_or(0);
        let clen = self.nodes[codes].base;
        // Into a scratch region (8-byte aligned, and so are pieces of 8 bytes or more): each
        // thread gathers its bytes into 8-byte words and stores them whole. At the root, or
        // for smaller pieces, byte by byte.
        let bytewise = format!(
            "for (u32 x = 0u; x < l; ++x) {} = (u8)(s >> (8u * x));",
            self.buf(k, "pos + x")?
        );
        let mut w = Writer::at(1);
        w.scope(format!(
            "node {k}: fsst: each thread decodes whole pieces, symbols from shared memory"
        ))
        .line(format!("__shared__ u64 zf_fs{k}[256];"))
        .line(format!("__shared__ u8 zf_fl{k}[256];"))
        .line(format!(
            "const u64* tab = (const u64*)(e.in + e.prm[{}]);",
            b + 1
        ))
        .open("for (u32 i = threadIdx.x; i < 256u; i += ZF_THREADS)")
        .line("const u8 l = ((const u8*)(tab + 256))[i];")
        .line("// Only the symbol's own bytes: they are ORed together.")
        .line(format!(
            "zf_fs{k}[i] = l >= 8u ? tab[i] : tab[i] & ((1ull << (8u * l)) - 1ull);"
        ))
        .line(format!("zf_fl{k}[i] = l;"))
        .close()
        .line("__syncthreads();")
        .line(format!(
            "const u32 n = (u32)e.prm[{b}], lg = (u32)e.prm[{}], ncodes = (u32)e.prm[{clen}];",
            b + 3
        ))
        .line(format!(
            "const u32* ends = (const u32*)(e.in + e.prm[{}]);",
            b + 2
        ))
        .line("const u32 np = (u32)(((u64)n + (1ull << lg) - 1ull) >> lg);")
        .open("for (u32 i = threadIdx.x; i < np; i += ZF_THREADS)")
        .line("const u32 c0 = i == 0u ? 0u : __ldg(ends + i - 1u), c1 = __ldg(ends + i);")
        .line("const u32 o1 = (u32)min(((u64)i + 1ull) << lg, (u64)n);")
        .line("u32 pos = i << lg;");
        if let Some(slot) = n.scratch {
            w.line("const bool wide = lg >= 3u;")
                .line(format!(
                    "u64* const w = (u64*)(e.scratch + e.prm[{slot}]) + (wide ? (i << lg) >> 3 : 0u);"
                ))
                .line("u64 acc = 0ull;")
                .line("u32 fill = 0u, nw = 0u;");
        }
        w.line("bool bad = c0 > c1 || c1 > ncodes || (i + 1u == np && c1 != ncodes);")
            .open("for (u32 j = c0; j < c1 && !bad;)")
            .line(format!("const u32 c = (u32)zf_n{codes}(e, j);"))
            .line("u64 s;")
            .line("u32 l;")
            .open("if (c == 255u)")
            .line("if (j + 1u >= c1) { bad = true; break; }")
            .line(format!("s = (u64)zf_n{codes}(e, j + 1u);"))
            .line("l = 1u;")
            .line("j += 2u;")
            .reopen("else")
            .line(format!("s = zf_fs{k}[c];"))
            .line(format!("l = zf_fl{k}[c];"))
            .line("++j;")
            .close()
            .line("if (l == 0u || pos + l > o1) { bad = true; break; }");
        if n.scratch.is_some() {
            // Byte string `s` of `l` bytes (1..=8) after the `fill` pending ones.
            w.open("if (!wide)")
                .line(&bytewise)
                .reopen("else")
                .line("acc |= fill == 0u ? s : s << (8u * fill);")
                .open("if (fill + l >= 8u)")
                .line("w[nw++] = acc;")
                .line("acc = fill == 0u ? 0ull : s >> (8u * (8u - fill));")
                .line("fill = fill + l - 8u;")
                .reopen("else")
                .line("fill += l;")
                .close()
                .close();
        } else {
            w.line(&bytewise);
        }
        w.line("pos += l;").close();
        if n.scratch.is_some() {
            w.line("u8* const tail = (u8*)(w + nw);")
                .line("for (u32 x = 0u; x < fill; ++x) tail[x] = (u8)(acc >> (8u * x));");
        }
        w.line("if (bad || pos != o1) atomicOr(e.err, ZF_ERR_FSST);")
            .close()
            .line("__syncthreads();")
            .close();
        Ok(w.finish())
    }
}
