//! Tile kernels: one block per four 1024-value vectors, each vector decoded lane by lane (a
//! FastLanes lane's values are consecutive rows of one column of words), with `for`, `dict`,
//! `hipatch` and `radix` folded into the unpacking. Shapes with a materialised node take the
//! generic body in [`super::generate`] instead.

use super::{
    DICT_SHARED, Gen, KernelKind, NodeSlots, TILE_THREADS, TILE_VECTORS, ctype, stage_below,
};
use crate::shape::Op;
use zipflow_core::{PType, Result};

/// The body of a tile kernel for `bitpack` or `for | bitpack` over 32- or 64-bit words,
/// decoded lane by lane as FastLanes lays them out, with the device function it calls: each
/// thread owns one lane of a vector and walks 16 of its rows, so every packed word is loaded
/// once and shifted out in registers, and each row writes the lanes' consecutive values to
/// the block's stage in shared memory, stored at the end as in [`stage_store`]. A warp's
/// threads share their rows, which are template constants, so with the width compiled in
/// every shift and word index is a constant. 32-bit words: 32 lanes, two warps per vector;
/// 64-bit words: 16 lanes, a warp covers two vectors, four warps their 64 rows. A block of 8
/// warps covers its `ZF_TILE_VECTORS` = 4 vectors either way. `None` for other shapes.
///
/// Over `hipatch` (`hipatch | bitpack`, `for | hipatch | bitpack`) the low bits go lane by
/// lane the same way; one warp per vector finds that vector's exceptions meanwhile and, after
/// a barrier, adds their high bits to the staged values (atomically). The high bits lie above
/// the low bits' width, so adding them to the low bits plus the reference is the same as
/// ORing them in before, and the low bits are not read again.
pub(super) fn lane_body(g: &Gen<'_>, kind: KernelKind) -> Result<Option<(String, String)>> {
    let nodes = g.nodes;
    if kind != KernelKind::Tile || TILE_THREADS != 256 || TILE_VECTORS != 4 {
        return Ok(None);
    }
    let hp = |h: &NodeSlots, below: usize| {
        h.op == Op::HiPatch && h.children.first() == Some(&below) && nodes[below].op == Op::BitPack
    };
    let (bpi, reference, patched) = match nodes {
        [n] if n.op == Op::BitPack => (0, None, None),
        [f, n] if f.op == Op::For && n.op == Op::BitPack => (1, Some(f.base + 1), None),
        [h, ..] if hp(h, 1) => (1, None, Some(0)),
        [f, h, ..] if f.op == Op::For && f.children == [1] && hp(h, 2) => {
            (2, Some(f.base + 1), Some(1))
        }
        _ => return Ok(None),
    };
    let bp = &nodes[bpi];
    let bytes = bp.ptype.byte_width();
    if !matches!(bytes, 4 | 8) || nodes[0].ptype.byte_width() != bytes {
        return Ok(None);
    }
    let (word, bits, lanes) = if bytes == 4 {
        ("u32", 32u32, 32u32)
    } else {
        ("u64", 64, 16)
    };
    let t = ctype(nodes[0].ptype)?;
    let add = match reference {
        Some(r) => format!(" + ({word})e.prm[{r}]"),
        None => String::new(),
    };
    let w = width_expr(bp);
    let rows = format!(
        r#"
// Rows R0 .. R0 + 15 of this thread's lane of a full vector.
template <u32 R0>
__device__ __forceinline__ void zf_rows(const Env& e, {t}* __restrict__ o,
                                        const {word}* __restrict__ vw, u32 p0, u32 lane) {{
  const u32 W = {w};
  const {word} mask = W == {bits}u ? ~({word})0 : ((({word})1 << W) - ({word})1);
  // The lane's current word stays in a register; each word is loaded once.
  u32 k = (R0 * W) / {bits}u;
  {word} cur = __ldg(vw + {lanes}u * k);
#pragma unroll
  for (u32 i = 0u; i < 16u; ++i) {{
    const u32 row = R0 + i, sh = (row * W) % {bits}u;
    {word} x = cur >> sh;
    if (sh + W >= {bits}u) {{
      ++k;
      const {word} next = k < W ? __ldg(vw + {lanes}u * k) : ({word})0;
      if (sh + W > {bits}u) x |= next << ({bits}u - sh);
      cur = next;
    }}
    const u32 g = row >> 3, fl = ((g & 1u) << 2) | (g & 2u) | (g >> 2);
    o[p0 + (row & 7u) * 128u + fl * 16u + lane] = ({t})((x & mask){add});
  }}
}}
"#
    );
    // Which vector of the block, which row group (warp-uniform) and which lane; the rows go
    // to the block's stage, at the vector's place `s0` in it.
    let (place, groups) = if bytes == 4 {
        (
            "const u32 warp = threadIdx.x >> 5, lane = threadIdx.x & 31u;\n  \
             const u32 v = warp >> 1, rg = warp & 1u;",
            "      case 0u: zf_rows<0u>(e, zf_lst, vw, s0, lane); break;\n      \
             default: zf_rows<16u>(e, zf_lst, vw, s0, lane); break;",
        )
    } else {
        (
            "const u32 warp = threadIdx.x >> 5, lane = threadIdx.x & 15u;\n  \
             const u32 v = ((warp >> 2) << 1) | ((threadIdx.x >> 4) & 1u), rg = warp & 3u;",
            "      case 0u: zf_rows<0u>(e, zf_lst, vw, s0, lane); break;\n      \
             case 1u: zf_rows<16u>(e, zf_lst, vw, s0, lane); break;\n      \
             case 2u: zf_rows<32u>(e, zf_lst, vw, s0, lane); break;\n      \
             default: zf_rows<48u>(e, zf_lst, vw, s0, lane); break;",
        )
    };
    let Some(h) = patched else {
        let body = format!(
            r#"  {place}
  const u32 P0 = vec * 1024u;
  if (P0 >= len) return;
  {stage}
  const u32 p0 = (vec + v) * 1024u, s0 = v * 1024u;
  if (p0 + 1024u <= len && {w} != 0u) {{
    const {word}* __restrict__ vw = (const {word}*)(e.in + e.prm[{off}]) + (u64)(p0 >> 10) * ({lanes}u * {w}) + lane;
    switch (rg) {{
{groups}
    }}
  }} else if (p0 < len) {{
    const u32 p1 = min(p0 + 1024u, len);
    // The vector's 64 threads, numbered within it.
    for (u32 p = p0 + rg * {lanes}u + lane; p < p1; p += 64u) zf_lst[p - P0] = zf_n0(e, p);
  }}
{store}"#,
            off = bp.base + 1,
            stage = stage_decl(t),
            store = stage_store("zf_lst"),
        );
        return Ok(Some((rows, body)));
    };
    let hn = &nodes[h];
    let high = hn.children[3];
    let rows = format!(
        r#"{rows}
// Exception j of vector v: its high bits in place (above the low bits' width, so adding
// them to the stored low bits plus the reference ORs them in), and its position q (~0u
// when the offset is bad).
__device__ __forceinline__ {word} zf_hpx(const Env& e, u32 v, u32 j, u32 j0, u32& q) {{
  q = zf_hpq{h}(e, v, j, j0);
  if (q == ~0u) return ({word})0;
  return ({word})zf_n{high}(e, j) << (u32)e.prm[{wslot}];
}}
"#,
        wslot = hn.base + 1,
    );

    // No thread returns early: the exceptions wait for every lane's low bits.
    let body = format!(
        r#"  {place}
  // The first ZF_TILE_VECTORS warps take a vector's exceptions each: found before the low
  // bits are written (their loads overlap the other warps' unpacking), and added to them
  // after, in the stage.
  const u32 hv = vec + (threadIdx.x >> 5), hl = threadIdx.x & 31u;
  const bool hw = threadIdx.x < 32u * ZF_TILE_VECTORS && hv * 1024u < len;
  u32 hj0 = 0u, hj1 = 0u, hq = ~0u;
  {word} hx = ({word})0;
  if (hw) {{
    zf_hp{h}(e, hv, hj0, hj1);
    if (hj0 + hl < hj1) hx = zf_hpx(e, hv, hj0 + hl, hj0, hq);
  }}
  const u32 P0 = vec * 1024u;
  if (P0 >= len) return;
  {stage}
  const u32 p0 = (vec + v) * 1024u, s0 = v * 1024u;
  if (p0 < len) {{
    if (p0 + 1024u <= len && {w} != 0u) {{
      const {word}* __restrict__ vw = (const {word}*)(e.in + e.prm[{off}]) + (u64)(p0 >> 10) * ({lanes}u * {w}) + lane;
      switch (rg) {{
{groups}
      }}
    }} else {{
      const u32 p1 = min(p0 + 1024u, len);
      for (u32 p = p0 + rg * {lanes}u + lane; p < p1; p += 64u) zf_lst[p - P0] = ({t})(({word})zf_n{bpi}(e, p){add});
    }}
  }}
  __syncthreads();
  // An exception's position lies in its vector, one of the block's.
  if (hw) {{
    if (hq != ~0u) atomicAdd(({word}*)(zf_lst + (hq - P0)), hx);
    for (u32 j = hj0 + 32u + hl; j < hj1; j += 32u) {{
      u32 q;
      const {word} x = zf_hpx(e, hv, j, hj0, q);
      if (q != ~0u) atomicAdd(({word}*)(zf_lst + (q - P0)), x);
    }}
  }}
{store}"#,
        off = bp.base + 1,
        stage = stage_decl(t),
        store = stage_store("zf_lst"),
    );
    Ok(Some((rows, body)))
}

/// The declaration of a tile kernel's stage `zf_lst`: the block's values in shared memory,
/// in order, for [`stage_store`].
fn stage_decl(t: &str) -> String {
    format!(
        "// The block's values are decoded into a stage in shared memory, in order, and\n  \
         // stored from there (by one bulk copy where the device has it).\n  \
         __shared__ __align__(128) {t} zf_lst[ZF_TILE_VECTORS * 1024u];"
    )
}

/// The statements that store a tile kernel's stage `st` (the values from position `P0` on)
/// at the end of the block. Stored by a bulk copy, and not row by row by the threads that
/// decoded them, the output goes to device memory as the block's whole run of bytes,
/// evict-first; the block waits only until the copy has read its stage. On the H200 this
/// took TPC-H SF10's lane-by-lane columns 2-7 % faster; where a chunk's output is not 16-byte
/// aligned, and each row of a warp would straddle two lines, the block's consecutive stores
/// from the stage made them 25-60 % faster.
fn stage_store(st: &str) -> String {
    format!(
        "  zf_bulk_fence();\n  __syncthreads();\n  \
         zf_store_values(o + P0, {st}, min(len - P0, ZF_TILE_VECTORS * 1024u));\n"
    )
}

/// The body of a tile kernel for `dict` with bit-packed 8-, 16- or 32-bit codes and a
/// dictionary read from shared memory (`prologue` loads it): the codes are unpacked lane by
/// lane as in [`lane_body`] (rows as template constants, each word loaded once) and looked up
/// as they come, into the block's stage. Per vector of 64 threads: 8-bit codes have 128
/// lanes of 8 rows (two lanes a thread: neighbouring ones for 8-byte values, so a row is one
/// 16-byte store), 16-bit codes 64 lanes of 16 rows, 32-bit codes 32 lanes in two groups of
/// 16 rows.
/// `None` for other shapes.
pub(super) fn dict_lane_body(
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
    let rows = format!(
        r#"
// Rows R0 .. R0 + NR - 1 of this thread's lane of a full vector of codes, looked up.
template <u32 R0, u32 NR>
__device__ __forceinline__ void zf_rows(const Env& e, {t}* __restrict__ o,
                                        const {word}* __restrict__ vw, u32 p0, u32 lane, u32 n) {{
  const u32 W = {w};
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
    else v = n <= {DICT_SHARED}u ? zf_d0[c] : zf_n{values}(e, c);
    o[p0 + (row & 7u) * 128u + fl * 16u + lane] = v;
  }}
}}
"#
    );
    // Byte codes of 8-byte values: each thread takes two neighbouring lanes, so their codes
    // are one 16-bit load a word and their values one 16-byte store a row. The width is
    // compiled in (a shape's always is, for a valid one), so a thread's code words are
    // loaded before the block's barrier after the dictionary, their latency overlapping its
    // staging, and still index registers.
    let pairs = bits == 8 && root.ptype.byte_width() == 8 && cn.width.is_some();
    let rows = if pairs {
        format!(
            r#"{rows}
// The code words of lanes 2m and 2m + 1 of a full vector of byte codes (`vb`, the vector's
// words, 2-byte aligned), one 16-bit word a step of 8 bits.
__device__ __forceinline__ void zf_load2(const u8* __restrict__ vb, u32 m, u32 (&wd)[8]) {{
  const u16* __restrict__ w2 = (const u16*)vb + m;
#pragma unroll
  for (u32 k = 0u; k < 8u; ++k) wd[k] = k < {w} ? (u32)__ldg(w2 + 64u * k) : 0u;
}}

// Rows 0 .. 7 of lanes 2m and 2m + 1 of a full vector of byte codes (their words), looked up
// and stored as pairs (`o` + p0 16-byte aligned: the block's stage).
__device__ __forceinline__ void zf_rows2(const Env& e, {t}* __restrict__ o,
                                         const u32 (&wd)[8], u32 p0, u32 m, u32 n) {{
  const u32 W = {w};
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
      else pr.v[h] = n <= {DICT_SHARED}u ? zf_d0[c] : zf_n{values}(e, c);
    }}
    *(ulonglong2*)(o + p0 + i * 128u + 2u * m) = pr.u;
  }}
}}
"#
        )
    } else {
        rows
    };
    // Which vector of the block, which lane, and which rows (uniform within a warp).
    let (place, call) = match bits {
        8 if pairs => (
            "const u32 warp = threadIdx.x >> 5, v = warp >> 1;\n  \
             const u32 lane = (warp & 1u) * 32u + (threadIdx.x & 31u);",
            "    if (zf_pre) {\n      \
             zf_rows2(e, zf_lst, zf_wd, s0, lane, n);\n    \
             } else {\n      \
             zf_rows<0u, 8u>(e, zf_lst, vw, s0, lane, n);\n      \
             zf_rows<0u, 8u>(e, zf_lst, vw + 64u, s0, lane + 64u, n);\n    \
             }",
        ),
        8 => (
            "const u32 warp = threadIdx.x >> 5, v = warp >> 1;\n  \
             const u32 lane = (warp & 1u) * 32u + (threadIdx.x & 31u);",
            "    zf_rows<0u, 8u>(e, zf_lst, vw, s0, lane, n);\n    \
             zf_rows<0u, 8u>(e, zf_lst, vw + 64u, s0, lane + 64u, n);",
        ),
        16 => (
            "const u32 warp = threadIdx.x >> 5, v = warp >> 1;\n  \
             const u32 lane = (warp & 1u) * 32u + (threadIdx.x & 31u);",
            "    zf_rows<0u, 16u>(e, zf_lst, vw, s0, lane, n);",
        ),
        _ => (
            "const u32 warp = threadIdx.x >> 5, v = warp >> 1;\n  \
             const u32 lane = threadIdx.x & 31u, rg = warp & 1u;",
            "    if (rg == 0u) zf_rows<0u, 16u>(e, zf_lst, vw, s0, lane, n);\n    \
             else zf_rows<16u, 16u>(e, zf_lst, vw, s0, lane, n);",
        ),
    };
    // A full vector's code words, loaded before the dictionary's barrier (`zf_pre`).
    let early = if pairs {
        format!(
            r#"  const u32 p0 = (vec + v) * 1024u;
  const u8* const zf_vb = e.in + e.prm[{off}] + (u64)(p0 >> 10) * ({lanes}u * {w});
  const bool zf_pre = p0 + 1024u <= len && (((size_t)zf_vb) & 1u) == 0u;
  u32 zf_wd[8];
  if (zf_pre) zf_load2(zf_vb, lane, zf_wd);
"#,
            off = cn.base + 1,
        )
    } else {
        String::new()
    };
    let (first, late) = if pairs {
        (format!("  {place}\n{early}{prologue}"), "")
    } else {
        (
            format!("{prologue}  {place}\n"),
            "  const u32 p0 = (vec + v) * 1024u;\n",
        )
    };
    let body = format!(
        r#"  (void)vec;
{first}{late}  const u32 P0 = vec * 1024u, s0 = p0 - P0;
  if (P0 >= len) return;
  {stage}
  const u32 n = (u32)e.prm[{vlen}];
  if (p0 + 1024u <= len && {w} != 0u) {{
    const {word}* __restrict__ vw = (const {word}*)(e.in + e.prm[{off}]) + (u64)(p0 >> 10) * ({lanes}u * {w}) + lane;
{call}
  }} else if (p0 < len) {{
    const u32 p1 = min(p0 + 1024u, len);
    // The vector's 64 threads, numbered within it.
    for (u32 p = p0 + (threadIdx.x & 63u); p < p1; p += 64u) zf_lst[p - P0] = zf_n0(e, p);
  }}
{store}"#,
        off = cn.base + 1,
        stage = stage_decl(t),
        store = stage_store("zf_lst"),
    );
    Ok(Some((rows, body)))
}

/// A `bitpack` node's width in generated code: a literal when the kernel is compiled for
/// it, else read from the chunk's descriptor.
pub(super) fn width_expr(n: &NodeSlots) -> String {
    match n.width {
        Some(w) => format!("{w}u"),
        None => format!("(u32)e.prm[{}]", n.base + 2),
    }
}
