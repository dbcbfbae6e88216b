//! Tile kernels: one block per four 1024-value vectors, each vector decoded lane by lane (a
//! FastLanes lane's values are consecutive rows of one column of words), with `for`, `dict`,
//! `hipatch` and `radix` folded into the unpacking. Shapes with a materialised node take the
//! generic body in [`super::generate`] instead.

use super::{Gen, KernelKind, NodeSlots, TILE_THREADS, TILE_VECTORS, Writer, ctype, width_expr};
use crate::shape::Op;
use zipflow_core::Result;

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
    let rows = lane_rows(t, word, bits, lanes, &w, &add);
    // Which vector of the block, which row group (warp-uniform) and which lane; the rows go
    // to the block's stage, at the vector's place `s0` in it.
    let (place, groups): (&[&str], &[&str]) = if bytes == 4 {
        (
            &[
                "const u32 warp = threadIdx.x >> 5, lane = threadIdx.x & 31u;",
                "const u32 v = warp >> 1, rg = warp & 1u;",
            ],
            &[
                "case 0u: zf_rows<0u>(e, zf_lst, vw, s0, lane); break;",
                "default: zf_rows<16u>(e, zf_lst, vw, s0, lane); break;",
            ],
        )
    } else {
        (
            &[
                "const u32 warp = threadIdx.x >> 5, lane = threadIdx.x & 15u;",
                "const u32 v = ((warp >> 2) << 1) | ((threadIdx.x >> 4) & 1u), rg = warp & 3u;",
            ],
            &[
                "case 0u: zf_rows<0u>(e, zf_lst, vw, s0, lane); break;",
                "case 1u: zf_rows<16u>(e, zf_lst, vw, s0, lane); break;",
                "case 2u: zf_rows<32u>(e, zf_lst, vw, s0, lane); break;",
                "default: zf_rows<48u>(e, zf_lst, vw, s0, lane); break;",
            ],
        )
    };
    let off = bp.base + 1;
    let Some(h) = patched else {
        let mut b = Writer::at(1);
        lines(&mut b, place);
        b.line("const u32 P0 = vec * 1024u;")
            .line("if (P0 >= len) return;");
        stage_decl(&mut b, t);
        b.line("const u32 p0 = (vec + v) * 1024u, s0 = v * 1024u;")
            .open(format!("if (p0 + 1024u <= len && {w} != 0u)"))
            .line(format!(
                "const {word}* __restrict__ vw = (const {word}*)(e.in + e.prm[{off}]) + (u64)(p0 >> 10) * ({lanes}u * {w}) + lane;"
            ))
            .open("switch (rg)");
        lines(&mut b, groups);
        b.close()
            .reopen("else if (p0 < len)")
            .line("const u32 p1 = min(p0 + 1024u, len);")
            .line("// The vector's 64 threads, numbered within it.")
            .line(format!(
                "for (u32 p = p0 + rg * {lanes}u + lane; p < p1; p += 64u) zf_lst[p - P0] = zf_n0(e, p);"
            ))
            .close();
        stage_store(&mut b, "zf_lst");
        return Ok(Some((rows, b.finish())));
    };
    let parts = LaneParts {
        t,
        word,
        lanes,
        w: &w,
        add: &add,
        place,
        groups,
        off,
        bpi,
    };
    Ok(Some(hipatch_lanes(&parts, nodes, h, rows)))
}

/// Each of `text`'s lines at the writer's depth.
fn lines(w: &mut Writer, text: &[&str]) {
    for l in text {
        w.line(l);
    }
}

/// Declares a tile kernel's stage `zf_lst`: the block's values in shared memory, in order,
/// for [`stage_store`].
pub(crate) fn stage_decl(w: &mut Writer, t: &str) {
    w.line("// The block's values are decoded into a stage in shared memory, in order, and")
        .line("// stored from there (by one bulk copy where the device has it).")
        .line(format!(
            "__shared__ __align__(128) {t} zf_lst[ZF_TILE_VECTORS * 1024u];"
        ));
}

/// Writes the statements that store a tile kernel's stage `st` (the values from position
/// `P0` on) at the end of the block. Stored by a bulk copy, and not row by row by the threads
/// that decoded them, the output goes to device memory as the block's whole run of bytes,
/// evict-first; the block waits only until the copy has read its stage. On the H200 this
/// took TPC-H SF10's lane-by-lane columns 2-7 % faster; where a chunk's output is not 16-byte
/// aligned, and each row of a warp would straddle two lines, the block's consecutive stores
/// from the stage made them 25-60 % faster.
pub(crate) fn stage_store(w: &mut Writer, st: &str) {
    w.line("zf_bulk_fence();")
        .line("__syncthreads();")
        .line(format!(
            "zf_store_values(o + P0, {st}, min(len - P0, ZF_TILE_VECTORS * 1024u));"
        ));
}

/// `zf_rows<R0>`: rows `R0 .. R0 + 15` of a thread's lane of a full vector of `word`s packed
/// `w` bits wide (`lanes` lanes of `bits`-bit words), each plus `add`, to the stage.
fn lane_rows(t: &str, word: &str, bits: u32, lanes: u32, w: &str, add: &str) -> String {
    let mut r = Writer::at(0);
    r.blank()
        .line("// Rows R0 .. R0 + 15 of this thread's lane of a full vector.")
        .line("template <u32 R0>")
        .open(format!(
            "__device__ __forceinline__ void zf_rows(const Env& e, {t}* __restrict__ o, const {word}* __restrict__ vw, u32 p0, u32 lane)"
        ))
        .line(format!("const u32 W = {w};"))
        .line(format!(
            "const {word} mask = W == {bits}u ? ~({word})0 : ((({word})1 << W) - ({word})1);"
        ))
        .line("// The lane's current word stays in a register; each word is loaded once.")
        .line(format!("u32 k = (R0 * W) / {bits}u;"))
        .line(format!("{word} cur = __ldg(vw + {lanes}u * k);"))
        .directive("#pragma unroll")
        .open("for (u32 i = 0u; i < 16u; ++i)")
        .line(format!("const u32 row = R0 + i, sh = (row * W) % {bits}u;"))
        .line(format!("{word} x = cur >> sh;"))
        .open(format!("if (sh + W >= {bits}u)"))
        .line("++k;")
        .line(format!(
            "const {word} next = k < W ? __ldg(vw + {lanes}u * k) : ({word})0;"
        ))
        .line(format!("if (sh + W > {bits}u) x |= next << ({bits}u - sh);"))
        .line("cur = next;")
        .close()
        .line("const u32 g = row >> 3, fl = ((g & 1u) << 2) | (g & 2u) | (g >> 2);")
        .line(format!(
            "o[p0 + (row & 7u) * 128u + fl * 16u + lane] = ({t})((x & mask){add});"
        ))
        .close()
        .close();
    r.finish()
}

/// What a tile kernel's lane-by-lane body needs of its shape (see [`lane_body`]).
struct LaneParts<'a> {
    t: &'a str,
    word: &'a str,
    lanes: u32,
    w: &'a str,
    add: &'a str,
    place: &'a [&'a str],
    groups: &'a [&'a str],
    off: usize,
    bpi: usize,
}

/// The rows and body of a lane-by-lane tile kernel over `hipatch` node `h`: the low bits as
/// in [`lane_body`], one warp per vector finding its exceptions meanwhile and adding their
/// high bits after a barrier.
fn hipatch_lanes(
    p: &LaneParts<'_>,
    nodes: &[NodeSlots],
    h: usize,
    rows: String,
) -> (String, String) {
    let LaneParts {
        t,
        word,
        lanes,
        w,
        add,
        place,
        groups,
        off,
        bpi,
    } = *p;
    let hn = &nodes[h];
    let high = hn.children[3];
    let mut r = Writer::at(0);
    r.raw(rows)
        .blank()
        .line("// Exception j of vector v: its high bits in place (above the low bits' width, so adding")
        .line("// them to the stored low bits plus the reference ORs them in), and its position q (~0u")
        .line("// when the offset is bad).")
        .open(format!(
            "__device__ __forceinline__ {word} zf_hpx(const Env& e, u32 v, u32 j, u32 j0, u32& q)"
        ))
        .line(format!("q = zf_hpq{h}(e, v, j, j0);"))
        .line(format!("if (q == ~0u) return ({word})0;"))
        .line(format!(
            "return ({word})zf_n{high}(e, j) << (u32)e.prm[{}];",
            hn.base + 1
        ))
        .close();

    // No thread returns early: the exceptions wait for every lane's low bits.
    let mut b = Writer::at(1);
    lines(&mut b, place);
    b.line(
        "// The first ZF_TILE_VECTORS warps take a vector's exceptions each: found before the low",
    )
    .line("// bits are written (their loads overlap the other warps' unpacking), and added to them")
    .line("// after, in the stage.")
    .line("const u32 hv = vec + (threadIdx.x >> 5), hl = threadIdx.x & 31u;")
    .line("const bool hw = threadIdx.x < 32u * ZF_TILE_VECTORS && hv * 1024u < len;")
    .line("u32 hj0 = 0u, hj1 = 0u, hq = ~0u;")
    .line(format!("{word} hx = ({word})0;"))
    .open("if (hw)")
    .line(format!("zf_hp{h}(e, hv, hj0, hj1);"))
    .line("if (hj0 + hl < hj1) hx = zf_hpx(e, hv, hj0 + hl, hj0, hq);")
    .close()
    .line("const u32 P0 = vec * 1024u;")
    .line("if (P0 >= len) return;");
    stage_decl(&mut b, t);
    b.line("const u32 p0 = (vec + v) * 1024u, s0 = v * 1024u;")
        .open("if (p0 < len)")
        .open(format!("if (p0 + 1024u <= len && {w} != 0u)"))
        .line(format!(
            "const {word}* __restrict__ vw = (const {word}*)(e.in + e.prm[{off}]) + (u64)(p0 >> 10) * ({lanes}u * {w}) + lane;"
        ))
        .open("switch (rg)");
    lines(&mut b, groups);
    b.close()
        .reopen("else")
        .line("const u32 p1 = min(p0 + 1024u, len);")
        .line(format!(
            "for (u32 p = p0 + rg * {lanes}u + lane; p < p1; p += 64u) zf_lst[p - P0] = ({t})(({word})zf_n{bpi}(e, p){add});"
        ))
        .close()
        .close()
        .line("__syncthreads();")
        .line("// An exception's position lies in its vector, one of the block's.")
        .open("if (hw)")
        .line(format!(
            "if (hq != ~0u) atomicAdd(({word}*)(zf_lst + (hq - P0)), hx);"
        ))
        .open("for (u32 j = hj0 + 32u + hl; j < hj1; j += 32u)")
        .line("u32 q;")
        .line(format!("const {word} x = zf_hpx(e, hv, j, hj0, q);"))
        .line(format!(
            "if (q != ~0u) atomicAdd(({word}*)(zf_lst + (q - P0)), x);"
        ))
        .close()
        .close();
    stage_store(&mut b, "zf_lst");
    (r.finish(), b.finish())
}
