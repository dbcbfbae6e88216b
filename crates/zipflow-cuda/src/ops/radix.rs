//! `radix`: values below a small base packed as the digits of `k`-bit numbers, the base
//! compiled in.

use super::Filler;
use crate::codegen::{Gen, KernelKind, NodeSlots, Writer, acc, ctype};
use crate::shape::Op;
use zipflow_core::{Error, Result};
use zipflow_encodings::{NodeView, radix};

/// Slots after the length: the byte offset of the groups (the base is compiled in, see
/// [`crate::shape::Shape::width`]).
pub(crate) const SLOTS: usize = 1;

/// The base a kernel is compiled for (one below 2 is left to the descriptor check).
pub(crate) fn compiled_width(node: &NodeView<'_>) -> Option<u32> {
    let b = radix::declared_base(node)?;
    (b >= 2).then_some(b)
}

/// Checks a `radix` node against the base its kernel is compiled for and writes its groups'
/// offset.
pub(crate) fn fill(f: &mut Filler<'_>, node: &NodeView<'_>, slots: &NodeSlots) -> Result<()> {
    let layout = radix::View::parse(node)?;
    if slots.width != Some(layout.base) {
        return Err(Error::corrupt(format!(
            "radix base {} in a kernel compiled for base {:?}",
            layout.base, slots.width
        )));
    }
    f.prm[slots.base + 1] = f.offset(layout.groups, 4)?;
    Ok(())
}

/// The body of `radix` node `n`'s device function: digit `p % m` of group `p / m`, whose `k`
/// bits are read from two 32-bit words. The base is compiled in, so every division is a
/// multiply; the group is divided by `B^(p % m)` one bit of `p % m` at a time.
pub(crate) fn radix_body(n: &NodeSlots, t: &str) -> Result<String> {
    let base = n
        .width
        .filter(|b| (2..=255).contains(b))
        .ok_or_else(|| Error::corrupt("radix node without a base in 2..=255"))?;
    let (m, k) = zipflow_encodings::radix::layout(base);
    let mask = if k == 32 { u32::MAX } else { (1u32 << k) - 1 };
    let off = n.base + 1;
    let mut w = Writer::at(1);
    w.line(format!("// radix({base}): {m} digits in {k} bits a group"))
        .line(format!("const u32 j = p / {m}u, d = p - j * {m}u;"))
        .line(format!("const u64 bit = (u64)j * {k}u;"))
        .line(format!(
            "const u32* w = (const u32*)(e.in + e.prm[{off}]) + (bit >> 5);"
        ))
        .line("const u32 sh = (u32)bit & 31u;")
        .line("u64 x = __ldg(w);")
        .line(format!(
            "if (sh + {k}u > 32u) x |= (u64)__ldg(w + 1) << 32;"
        ))
        .line(format!("u32 g = (u32)(x >> sh) & {mask}u;"))
        .line("(void)d;");
    let mut bit = 1u32;
    let mut power = u64::from(base);
    while bit < m {
        w.line(format!("if (d & {bit}u) g /= {power}u;"));
        bit <<= 1;
        power = power.saturating_mul(power);
    }
    w.line(format!("return ({t})(g % {base}u);"));
    Ok(w.finish())
}

/// Writes the lines that load group `g` of a `radix(base)` stream of 32-bit words `w` into
/// `rest` (its `k` bits, from one or two words).
pub(crate) fn radix_group(w: &mut Writer, base: u32) {
    let (_, k) = zipflow_encodings::radix::layout(base);
    let mask = if k == 32 { u32::MAX } else { (1u32 << k) - 1 };
    w.lines(format!(
        r#"const u64 bit = (u64)g * {k}u;
const u32* gw = w + (bit >> 5);
const u32 sh = (u32)bit & 31u;
u64 x = __ldg(gw);
if (sh + {k}u > 32u) x |= (u64)__ldg(gw + 1) << 32;
u32 rest = (u32)(x >> sh) & {mask}u;
"#
    ));
}

/// The body of a tile kernel for `radix` or `for | radix`: each thread takes whole groups,
/// one or two loads for `m` values, and peels their digits with one constant division each
/// into shared memory; the block then stores its vectors in order. `None` for other shapes.
/// (By the threads: a bulk copy of the stage, as in [`stage_store`], ran 3-7 % slower for
/// these shapes on the H200.)
///
/// `dict` with `radix` codes keeps the value-by-value body: staged the same way (the
/// dictionary in shared memory beside the block's values) it ran 6 % slower on the H200
/// (l_quantity, 2,242 against 2,379 GB/s).
pub(crate) fn radix_groups_body(
    nodes: &[NodeSlots],
    kind: KernelKind,
) -> Result<Option<(String, String)>> {
    if kind != KernelKind::Tile {
        return Ok(None);
    }
    let root = &nodes[0];
    let t = ctype(root.ptype)?;
    let a = acc(root.ptype);
    let (ri, value) = match nodes {
        [r] if r.op == Op::Radix => (0, "v".to_string()),
        [f, r] if f.op == Op::For && r.op == Op::Radix => {
            (1, format!("({t})(({a})v + ({a})e.prm[{}])", f.base + 1))
        }
        _ => return Ok(None),
    };
    let r = &nodes[ri];
    let Some(base) = r.width.filter(|b| (2..=255).contains(b)) else {
        return Ok(None);
    };
    let (m, k) = zipflow_encodings::radix::layout(base);
    let mut w = Writer::at(1);
    w.lines(format!(
        r#"(void)vec;
const u32 P0 = vec * 1024u, P1 = min(P0 + ZF_TILE_VECTORS * 1024u, len);
if (P0 >= len) return;
// radix({base}): {m} digits in {k} bits a group; the block's values staged in order.
__shared__ {t} zf_rst[ZF_TILE_VECTORS * 1024u];
const u32* __restrict__ w = (const u32*)(e.in + e.prm[{off}]);
const u32 G1 = (P1 + {m}u - 1u) / {m}u;
"#,
        off = r.base + 1,
    ))
    .open(format!(
        "for (u32 g = P0 / {m}u + threadIdx.x; g < G1; g += ZF_THREADS)"
    ));
    radix_group(&mut w, base);
    w.lines(format!(
        r#"#pragma unroll
for (u32 d = 0u; d < {m}u; ++d) {{
  const u32 q = rest / {base}u, p = g * {m}u + d;
  const u32 v = rest - q * {base}u;
  if (p >= P0 && p < P1) zf_rst[p - P0] = {value};
  rest = q;
}}
"#
    ))
    .close()
    .line("__syncthreads();")
    .line("for (u32 p = P0 + threadIdx.x; p < P1; p += ZF_THREADS) o[p] = zf_rst[p - P0];");
    Ok(Some((String::new(), w.finish())))
}

/// The body of `zf_n<k>` for `radix` node `k`.
pub(crate) fn value(g: &Gen<'_>, k: usize) -> Result<String> {
    let n = &g.nodes[k];
    radix_body(n, ctype(n.ptype)?)
}
