//! `dict`: codes into a sorted dictionary of values.

use crate::codegen::lanes::{stage_decl, stage_store};
use crate::codegen::{
    Gen, KernelKind, NodeSlots, TILE_THREADS, TILE_VECTORS, Writer, ctype, stage_below, width_expr,
};
use crate::shape::Op;
use zipflow_core::PType;
use zipflow_core::Result;
use zipflow_encodings::NodeView;
use zipflow_encodings::dict::View;

/// Slots after the length: none (the dictionary's size is its values child's length slot).
pub(crate) const SLOTS: usize = 0;

/// Checks a `dict` node (it has no slots of its own).
pub(crate) fn fill(node: &NodeView<'_>) -> Result<()> {
    View::parse(node).map(|_| ())
}

/// The body of `zf_n<k>` for `dict` node `k`. A dictionary of at most `ZF_DICT_CACHE` entries
/// (`DICT_SHARED` where the kernel's shared memory has room, see [`dict_cache_define`])
/// whose values need no stage is decoded once per block into shared memory (the kernel's
/// prologue), so each lookup is one shared load instead of decoding its entry again (a
/// bit-unpack at a random position, for packed values).
///
/// [`dict_cache_define`]: crate::codegen::dict_cache_define
pub(crate) fn value(g: &mut Gen<'_>, k: usize) -> Result<String> {
    let n = &g.nodes[k];
    let t = ctype(n.ptype)?;
    let ch = |i: usize| n.children.get(i).copied().unwrap_or(0);
    let (codes, values) = (ch(0), ch(1));
    let vlen = g.nodes[values].base;
    let mut w = Writer::at(1);
    w.line(format!("const u32 c = (u32)zf_n{codes}(e, p);"));
    if g.has_stage(values) {
        w.line(format!(
            "if (c >= (u32)e.prm[{vlen}]) {{ atomicOr(e.err, ZF_ERR_DICT); return ({t})0; }}"
        ))
        .line(format!("return zf_n{values}(e, c);"));
        return Ok(w.finish());
    }
    let decl = Writer::at(0)
        .blank()
        .line(format!("__shared__ {t} zf_d{k}[ZF_DICT_CACHE];"))
        .finish();
    g.src.push_str(&decl);
    let fill = Writer::at(1)
        .scope(format!("node {k}: dict entries to shared memory"))
        .line(format!("const u32 n = (u32)e.prm[{vlen}];"))
        .line(format!(
            "if (n <= ZF_DICT_CACHE) for (u32 i = threadIdx.x; i < n; i += ZF_THREADS) zf_d{k}[i] = zf_n{values}(e, i);"
        ))
        .line("__syncthreads();")
        .close()
        .finish();
    g.prologue.push_str(&fill);
    w.line(format!("const u32 n = (u32)e.prm[{vlen}];"))
        .line(format!(
            "if (c >= n) {{ atomicOr(e.err, ZF_ERR_DICT); return ({t})0; }}"
        ))
        .line(format!(
            "return n <= ZF_DICT_CACHE ? zf_d{k}[c] : zf_n{values}(e, c);"
        ));
    Ok(w.finish())
}

/// The body of a tile kernel for `dict` with bit-packed 8-, 16- or 32-bit codes and a
/// dictionary read from shared memory (`prologue` loads it): the codes are unpacked lane by
/// lane as in [`lane_body`] (rows as template constants, each word loaded once) and looked up
/// as they come, into the block's stage. Per vector of 64 threads: 8-bit codes have 128
/// lanes of 8 rows (two lanes a thread: neighbouring ones for 8-byte values, so a row is one
/// 16-byte store), 16-bit codes 64 lanes of 16 rows, 32-bit codes 32 lanes in two groups of
/// 16 rows.
/// `None` for other shapes.
pub(crate) fn lane_body(
    nodes: &[NodeSlots],
    kind: KernelKind,
    prologue: &str,
) -> Result<Option<(String, String)>> {
    if kind != KernelKind::Tile || TILE_THREADS != 256 || TILE_VECTORS != 4 {
        return Ok(None);
    }
    let root = &nodes[0];
    let (Some(&codes), Some(&values)) = (root.children.first(), root.children.get(1)) else {
        return Ok(None);
    };
    let cn = &nodes[codes];
    if root.op != Op::Dict || cn.op != Op::BitPack || stage_below(nodes, values, kind) {
        return Ok(None);
    }
    let (word, bits) = match cn.ptype {
        PType::U8 => ("u8", 8u32),
        PType::U16 => ("u16", 16),
        PType::U32 => ("u32", 32),
        _ => return Ok(None),
    };
    let lanes = 1024 / bits;
    let t = ctype(root.ptype)?;
    let w = width_expr(cn);
    let vlen = nodes[values].base;
    let mut rows = Writer::at(0);
    dict_rows(&mut rows, t, word, bits, lanes, &w, values);
    // Byte codes of 8-byte values: each thread takes two neighbouring lanes, so their codes
    // are one 16-bit load a word and their values one 16-byte store a row. The width is
    // compiled in (a shape's always is, for a valid one), so a thread's code words are
    // loaded before the block's barrier after the dictionary, their latency overlapping its
    // staging, and still index registers.
    let pairs = bits == 8 && root.ptype.byte_width() == 8 && cn.width.is_some();
    if pairs {
        pair_rows(&mut rows, t, &w, values);
    }
    // Which vector of the block, which lane, and which rows (uniform within a warp).
    let place = [
        "const u32 warp = threadIdx.x >> 5, v = warp >> 1;",
        match bits {
            8 | 16 => "const u32 lane = (warp & 1u) * 32u + (threadIdx.x & 31u);",
            _ => "const u32 lane = threadIdx.x & 31u, rg = warp & 1u;",
        },
    ];
    let off = cn.base + 1;
    let mut b = Writer::at(1);
    b.line("(void)vec;");
    if pairs {
        // A full vector's code words, loaded before the dictionary's barrier (`zf_pre`).
        b.line(place[0]).line(place[1]).lines(format!(
            r#"const u32 p0 = (vec + v) * 1024u;
const u8* const zf_vb = e.in + e.prm[{off}] + (u64)(p0 >> 10) * ({lanes}u * {w});
const bool zf_pre = p0 + 1024u <= len && (((size_t)zf_vb) & 1u) == 0u;
u32 zf_wd[8];
if (zf_pre) zf_load2(zf_vb, lane, zf_wd);
"#
        ));
        b.raw(prologue);
    } else {
        b.raw(prologue)
            .line(place[0])
            .line(place[1])
            .line("const u32 p0 = (vec + v) * 1024u;");
    }
    b.line("const u32 P0 = vec * 1024u, s0 = p0 - P0;")
        .line("if (P0 >= len) return;");
    stage_decl(&mut b, t);
    b.line(format!("const u32 n = (u32)e.prm[{vlen}];"))
        .open(format!("if (p0 + 1024u <= len && {w} != 0u)"))
        .line(format!(
            "const {word}* __restrict__ vw = (const {word}*)(e.in + e.prm[{off}]) + (u64)(p0 >> 10) * ({lanes}u * {w}) + lane;"
        ));
    let bytes = [
        "zf_rows<0u, 8u>(e, zf_lst, vw, s0, lane, n);",
        "zf_rows<0u, 8u>(e, zf_lst, vw + 64u, s0, lane + 64u, n);",
    ];
    match bits {
        8 if pairs => b
            .open("if (zf_pre)")
            .line("zf_rows2(e, zf_lst, zf_wd, s0, lane, n);")
            .reopen("else")
            .line(bytes[0])
            .line(bytes[1])
            .close(),
        8 => b.line(bytes[0]).line(bytes[1]),
        16 => b.line("zf_rows<0u, 16u>(e, zf_lst, vw, s0, lane, n);"),
        _ => b
            .line("if (rg == 0u) zf_rows<0u, 16u>(e, zf_lst, vw, s0, lane, n);")
            .line("else zf_rows<16u, 16u>(e, zf_lst, vw, s0, lane, n);"),
    };
    b.reopen("else if (p0 < len)")
        .line("const u32 p1 = min(p0 + 1024u, len);")
        .line("// The vector's 64 threads, numbered within it.")
        .line("for (u32 p = p0 + (threadIdx.x & 63u); p < p1; p += 64u) zf_lst[p - P0] = zf_n0(e, p);")
        .close();
    stage_store(&mut b, "zf_lst");
    Ok(Some((rows.finish(), b.finish())))
}

/// `zf_rows<R0, NR>`: rows `R0 .. R0 + NR - 1` of a thread's lane of a full vector of codes
/// (`word`s packed `w` bits wide, `lanes` lanes), looked up in dictionary `values`.
fn dict_rows(r: &mut Writer, t: &str, word: &str, bits: u32, lanes: u32, w: &str, values: usize) {
    r.blank()
        .line("// Rows R0 .. R0 + NR - 1 of this thread's lane of a full vector of codes, looked up.")
        .line("template <u32 R0, u32 NR>")
        .line(format!("__device__ __forceinline__ void zf_rows(const Env& e, {t}* __restrict__ o,"))
        .open(format!("                                        const {word}* __restrict__ vw, u32 p0, u32 lane, u32 n)"))
        .lines(format!(
            r#"const u32 W = {w};
const u32 mask = W == 32u ? 0xffffffffu : ((1u << W) - 1u);
u32 k = (R0 * W) / {bits}u;
u32 cur = __ldg(vw + {lanes}u * k);
#pragma unroll
for (u32 i = 0u; i < NR; ++i) {{
  const u32 row = R0 + i, sh = (row * W) % {bits}u;
  u32 x = cur >> sh;
  if (sh + W >= {bits}u) {{
    ++k;
    const u32 next = k < W ? (u32)__ldg(vw + {lanes}u * k) : 0u;
    if (sh + W > {bits}u) x |= next << ({bits}u - sh);
    cur = next;
  }}
  const u32 c = x & mask;
  const u32 g = row >> 3, fl = ((g & 1u) << 2) | (g & 2u) | (g >> 2);
  {t} v;
  if (c >= n) {{ atomicOr(e.err, ZF_ERR_DICT); v = ({t})0; }}
  else v = n <= ZF_DICT_CACHE ? zf_d0[c] : zf_n{values}(e, c);
  o[p0 + (row & 7u) * 128u + fl * 16u + lane] = v;
}}
"#
        ))
        .close();
}

/// `zf_load2`/`zf_rows2`: two neighbouring lanes of byte codes a thread, their
/// code words loaded ahead, their 8-byte values stored as pairs.
fn pair_rows(r: &mut Writer, t: &str, w: &str, values: usize) {
    r.blank()
        .line("// The code words of lanes 2m and 2m + 1 of a full vector of byte codes (`vb`, the vector's")
        .line("// words, 2-byte aligned), one 16-bit word a step of 8 bits.")
        .open("__device__ __forceinline__ void zf_load2(const u8* __restrict__ vb, u32 m, u32 (&wd)[8])")
        .lines(format!(
            r#"const u16* __restrict__ w2 = (const u16*)vb + m;
#pragma unroll
for (u32 k = 0u; k < 8u; ++k) wd[k] = k < {w} ? (u32)__ldg(w2 + 64u * k) : 0u;
"#
        ))
        .close()
        .blank()
        .line("// Rows 0 .. 7 of lanes 2m and 2m + 1 of a full vector of byte codes (their words), looked up")
        .line("// and stored as pairs (`o` + p0 16-byte aligned: the block's stage).")
        .line(format!("__device__ __forceinline__ void zf_rows2(const Env& e, {t}* __restrict__ o,"))
        .open("                                         const u32 (&wd)[8], u32 p0, u32 m, u32 n)")
        .lines(format!(
            r#"const u32 W = {w};
const u32 rep = 0x0101u, mask = rep * ((1u << W) - 1u);
u32 k = 0u;
u32 cur = wd[0];
#pragma unroll
for (u32 i = 0u; i < 8u; ++i) {{
  const u32 sh = (i * W) % 8u;
  u32 x = (cur >> sh) & (rep * (0xffu >> sh));
  if (sh + W >= 8u) {{
    ++k;
    const u32 next = k < W ? wd[k] : 0u;
    if (sh + W > 8u) x |= (next << (8u - sh)) & (rep * ((0xffu << (8u - sh)) & 0xffu));
    cur = next;
  }}
  x &= mask;
  union {{ {t} v[2]; ulonglong2 u; }} pr;
#pragma unroll
  for (u32 h = 0u; h < 2u; ++h) {{
    const u32 c = (x >> (8u * h)) & 0xffu;
    if (c >= n) {{ atomicOr(e.err, ZF_ERR_DICT); pr.v[h] = ({t})0; }}
    else pr.v[h] = n <= ZF_DICT_CACHE ? zf_d0[c] : zf_n{values}(e, c);
  }}
  *(ulonglong2*)(o + p0 + i * 128u + 2u * m) = pr.u;
}}
"#
        ))
        .close();
}
