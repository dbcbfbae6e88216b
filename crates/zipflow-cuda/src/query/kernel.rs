//! CUDA C for one aggregating query: its filter, group keys and aggregate arguments as C
//! expressions over the decoded columns of a batch, folded into per-group accumulators.
//!
//! Every intermediate value of an integral expression fits an `i64` (the reference evaluator
//! checks each one, see `zipflow_compute::expr::eval`), so the kernel computes in `i64` and
//! sets a flag where the CPU would report an overflow: additions and subtractions by their
//! sign bits, products by their high 64 bits, dates by their `i32` range. `AND`, `OR` and
//! `CASE` are C's short-circuit operators, so an operand the CPU would not evaluate cannot
//! raise the flag either.
//!
//! Accumulators, per group `g`: slot `g * S` counts the group's rows, then four slots per
//! aggregate hold its sum (low and high 64 bits of an `i128`) and its minimum and maximum
//! (`S = 1 + 4 * aggregates`). Rows fold into per-thread registers when there is one group;
//! with a few groups, each warp sums its rows of one group across its lanes (one round per
//! group present) and one lane adds that to shared memory; with more, rows go to shared
//! memory one by one when every group's slots fit there, else straight to device memory;
//! blocks then add theirs to the device's with atomics (a 128-bit sum as two 64-bit adds, the
//! carry of the low word into the high one).

use std::fmt::Write as _;

use zipflow_compute::expr::{ArithOp, CmpOp, Expr, SqlType, Value};
use zipflow_compute::query::{AggFunc, Query};
use zipflow_core::{Error, PType, Result};

use crate::codegen::Kernel;

/// Name of the generated kernel.
pub const QUERY_KERNEL: &str = "zf_query";
/// Threads per block.
pub const QUERY_THREADS: u32 = 256;
/// Error bit: an arithmetic overflow the CPU reports as an error.
pub const ERR_OVERFLOW: i32 = 1;
/// Error bit: a group key outside the range its zone maps give, or a dictionary code past
/// its chunk's dictionary (a damaged file).
pub const ERR_KEY: i32 = 2;
/// Most groups whose rows a warp sums across its lanes before adding them to shared memory.
const WARP_GROUPS: usize = 64;
/// Bytes of shared memory the accumulators of every group may take in one block.
const SHARED_ACC_BYTES: usize = 32 * 1024;

/// How one group key's values map to a dense index.
#[derive(Debug, Clone, PartialEq)]
pub enum KeyMap {
    /// An integral column whose values lie in `lo..lo + len`: the index is `value - lo`.
    Range {
        /// The column's slot among the kernel's columns.
        slot: usize,
        /// The least value.
        lo: i64,
        /// How many values.
        len: usize,
    },
    /// Dictionary codes of a string column, mapped by a table per chunk (`maps[base + code]`,
    /// its length at `maps[base - 1]`) to one of `len` distinct strings.
    Codes {
        /// The codes' slot among the kernel's columns.
        slot: usize,
        /// Which of the kernel's code maps.
        map: usize,
        /// Distinct strings over the whole table.
        len: usize,
    },
}

impl KeyMap {
    /// Distinct values of the key (the group index's factor for it).
    pub fn values(&self) -> usize {
        match self {
            KeyMap::Range { len, .. } | KeyMap::Codes { len, .. } => *len,
        }
    }
}

/// What the kernel reads and computes, as the host lays it out.
#[derive(Debug, Clone)]
pub struct QueryLayout {
    /// Physical type of each column slot, in slot order.
    pub slots: Vec<PType>,
    /// Which slot each table column the query reads is in (by file column index).
    pub column_slot: Vec<(usize, usize)>,
    /// The group keys, most significant first.
    pub keys: Vec<KeyMap>,
    /// Groups: the product of the keys' lengths (1 without keys).
    pub groups: usize,
    /// Number of string key maps (each a table of `u32` per batch).
    pub maps: usize,
}

impl QueryLayout {
    /// Accumulator slots per group.
    pub fn slots_per_group(&self, aggregates: usize) -> usize {
        1 + 4 * aggregates
    }
}

/// Where rows fold into accumulators first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fold {
    /// Per-thread registers (one group).
    Registers,
    /// The block's shared memory, each warp's rows of one group summed across the warp
    /// first (few groups: many rows of a warp share one).
    Warp,
    /// The block's shared memory, row by row.
    Shared,
    /// Device memory.
    Global,
}

/// Generates the kernel of `q` over the columns of `layout`.
///
/// Signature: `zf_query(const u64* cols, u64 rows, const u32* maps, const u32* map_base,
/// u64 chunk_rows, u64* acc, int* err)`: the device addresses of the column slots, the batch's
/// rows, the string keys' code maps and, per chunk of the batch and map, where its table
/// starts (`chunk_rows` rows a chunk), the accumulators and the error word.
pub fn generate(q: &Query, layout: &QueryLayout) -> Result<Kernel> {
    let naggs = q.aggregates.len();
    let s = layout.slots_per_group(naggs);
    let fold = if layout.groups == 1 {
        Fold::Registers
    } else if layout.groups <= WARP_GROUPS && layout.groups * s * 8 <= SHARED_ACC_BYTES {
        Fold::Warp
    } else if layout.groups * s * 8 <= SHARED_ACC_BYTES {
        Fold::Shared
    } else {
        Fold::Global
    };
    let g = Gen { layout };
    let mut src = String::from(PRELUDE);
    let _ = writeln!(src, "#define ZF_G {}\n#define ZF_S {s}", layout.groups);
    src.push_str("extern \"C\" __global__ void __launch_bounds__(ZF_THREADS) zf_query(\n");
    src.push_str("    const u64* __restrict__ cols, u64 rows, const u32* __restrict__ maps,\n");
    src.push_str("    const u32* __restrict__ map_base, u64 chunk_rows, u64* acc, int* err) {\n");
    for (i, p) in layout.slots.iter().enumerate() {
        let t = crate::codegen::ctype(*p)?;
        let _ = writeln!(
            src,
            "  const {t}* __restrict__ c{i} = (const {t}*)cols[{i}];"
        );
    }
    match fold {
        Fold::Registers => {
            src.push_str("  u64 n = 0;\n");
            for a in 0..naggs {
                let _ = writeln!(
                    src,
                    "  u64 lo{a} = 0, hi{a} = 0; i64 mn{a} = ZF_I64_MAX, mx{a} = ZF_I64_MIN;"
                );
            }
        }
        Fold::Shared | Fold::Warp => {
            src.push_str(&shared_accumulators("ZF_G * ZF_S"));
        }
        Fold::Global => {}
    }
    // Warps step through the rows together (lanes past the end or filtered out are `ok ==
    // false`), so that warp-wide votes and shuffles see every lane.
    src.push_str("  const u32 lane = threadIdx.x & 31;\n");
    src.push_str("  const u64 step = (u64)gridDim.x * blockDim.x;\n");
    src.push_str(
        "  for (u64 r0 = (u64)blockIdx.x * blockDim.x + (threadIdx.x - lane); r0 < rows; \
         r0 += step) {\n",
    );
    src.push_str("    const u64 r = r0 + lane;\n    int bad = 0;\n    bool ok = r < rows;\n");
    if let Some(f) = &q.filter {
        let _ = writeln!(src, "    if (ok) ok = {};", g.pred(f)?);
        src.push_str("    if (bad) { atomicOr(err, ZF_ERR_OVERFLOW); ok = false; }\n");
    }
    src.push_str("    u32 g = 0;\n");
    let mut args = Vec::new();
    let mut body = String::new();
    if !layout.keys.is_empty() {
        if layout.maps > 0 {
            body.push_str("      const u64 chunk = r / chunk_rows;\n");
        }
        let _ = writeln!(body, "      g = {};", g.group_index()?);
    }
    for (a, agg) in q.aggregates.iter().enumerate() {
        if agg.distinct {
            return Err(Error::unsupported("DISTINCT aggregates on the GPU"));
        }
        match agg.func {
            AggFunc::CountStar | AggFunc::Count => {}
            AggFunc::Sum | AggFunc::Avg | AggFunc::Min | AggFunc::Max => {
                let arg = agg
                    .arg
                    .as_ref()
                    .ok_or_else(|| Error::invalid("an aggregate without its argument"))?;
                if !matches!(arg.ty(), SqlType::Int | SqlType::Decimal(_) | SqlType::Date) {
                    return Err(Error::unsupported(format!(
                        "{:?} over {} values on the GPU",
                        agg.func,
                        arg.ty()
                    )));
                }
                let _ = writeln!(src, "    i64 v{a} = 0;");
                let _ = writeln!(body, "      v{a} = {};", g.value(arg)?);
                args.push(a);
            }
            f => {
                return Err(Error::unsupported(format!("{f:?} on the GPU")));
            }
        }
    }
    let _ = write!(src, "    if (ok) {{\n{body}    }}\n");
    if !args.is_empty() {
        src.push_str("    if (bad) { atomicOr(err, ZF_ERR_OVERFLOW); ok = false; }\n");
    }
    let sums = |f: AggFunc| matches!(f, AggFunc::Sum | AggFunc::Avg);
    match fold {
        Fold::Registers => {
            src.push_str("    if (ok) {\n      n += 1;\n");
            for &a in &args {
                let f = q.aggregates[a].func;
                if sums(f) {
                    let _ = writeln!(src, "      zf_add128(&lo{a}, &hi{a}, v{a});");
                } else if f == AggFunc::Min {
                    let _ = writeln!(src, "      mn{a} = min(mn{a}, v{a});");
                } else {
                    let _ = writeln!(src, "      mx{a} = max(mx{a}, v{a});");
                }
            }
            src.push_str("    }\n");
        }
        Fold::Warp => {
            // One round per distinct group among the warp's rows: its lanes' values are
            // summed across the warp (the others add zero), and one lane adds the result.
            src.push_str("    u32 todo = __ballot_sync(~0u, ok);\n");
            src.push_str("    while (todo) {\n");
            src.push_str("      const int l = __ffs(todo) - 1;\n");
            src.push_str("      const u32 gg = __shfl_sync(~0u, g, l);\n");
            src.push_str("      const bool mine = ok && g == gg;\n");
            src.push_str("      const u32 peers = __ballot_sync(~0u, mine);\n");
            src.push_str("      todo &= ~peers;\n");
            src.push_str("      u64* t = sacc + (u64)gg * ZF_S;\n");
            src.push_str("      if (lane == (u32)l) atomicAdd(&t[0], (u64)__popc(peers));\n");
            for &a in &args {
                let f = q.aggregates[a].func;
                let o = 1 + 4 * a;
                if sums(f) {
                    let _ = writeln!(
                        src,
                        "      {{ u64 lo = mine ? (u64)v{a} : 0ull, hi = mine && v{a} < 0 ? ~0ull : 0ull;\n\
                         \x20       zf_warp_add128(&lo, &hi);\n\
                         \x20       if (lane == (u32)l) zf_atomic_add128(&t[{o}], lo, hi); }}"
                    );
                } else {
                    let Extreme {
                        neutral,
                        op,
                        atomic: at,
                        slot,
                    } = extreme(f, o);
                    let _ = writeln!(
                        src,
                        "      {{ i64 x = mine ? v{a} : {neutral};\n\
                         \x20       for (int d = 16; d > 0; d >>= 1) x = {op}(x, (i64)__shfl_xor_sync(~0u, x, d));\n\
                         \x20       if (lane == (u32)l) {at}((long long*)&t[{slot}], x); }}"
                    );
                }
            }
            src.push_str("    }\n");
        }
        Fold::Shared | Fold::Global => {
            let base = if fold == Fold::Shared { "sacc" } else { "acc" };
            let _ = writeln!(
                src,
                "    if (ok) {{\n      u64* t = {base} + (u64)g * ZF_S;"
            );
            src.push_str("      atomicAdd(&t[0], 1ull);\n");
            for &a in &args {
                let f = q.aggregates[a].func;
                let o = 1 + 4 * a;
                if sums(f) {
                    let _ = writeln!(
                        src,
                        "      zf_atomic_add128(&t[{o}], (u64)v{a}, v{a} < 0 ? ~0ull : 0ull);"
                    );
                } else {
                    let e = extreme(f, o);
                    let _ = writeln!(src, "      {}((long long*)&t[{}], v{a});", e.atomic, e.slot);
                }
            }
            src.push_str("    }\n");
        }
    }
    src.push_str("  }\n");
    match fold {
        Fold::Registers => {
            src.push_str(&shared_accumulators("ZF_S"));
            src.push_str("  if (n > 0) {\n    atomicAdd(&sacc[0], n);\n");
            for &a in &args {
                let f = q.aggregates[a].func;
                let o = 1 + 4 * a;
                if sums(f) {
                    let _ = writeln!(src, "    zf_atomic_add128(&sacc[{o}], lo{a}, hi{a});");
                } else {
                    let e = extreme(f, o);
                    let reg = if f == AggFunc::Min { "mn" } else { "mx" };
                    let _ = writeln!(
                        src,
                        "    {}((long long*)&sacc[{}], {reg}{a});",
                        e.atomic, e.slot
                    );
                }
            }
            src.push_str("  }\n  __syncthreads();\n");
            src.push_str(FLUSH);
        }
        Fold::Shared | Fold::Warp => {
            src.push_str("  __syncthreads();\n");
            src.push_str(FLUSH);
        }
        Fold::Global => {}
    }
    src.push_str("}\n");
    Ok(Kernel::standalone(
        format!("query {}", xxhash_rust::xxh3::xxh3_64(src.as_bytes())),
        src,
        QUERY_THREADS,
    ))
}

/// The CUDA C every query kernel opens with.
const PRELUDE: &str = r#"typedef signed char i8;
typedef short i16;
typedef int i32;
typedef long long i64;
typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
#define ZF_I64_MAX 0x7fffffffffffffffLL
#define ZF_I64_MIN (-ZF_I64_MAX - 1)
#define ZF_ERR_OVERFLOW 1
#define ZF_ERR_KEY 2
__device__ __forceinline__ u32 zf_key(i64 v, i64 lo, u64 len, int* err) {
  u64 d = (u64)v - (u64)lo;
  if (d >= len) { atomicOr(err, ZF_ERR_KEY); return 0; }
  return (u32)d;
}
__device__ __forceinline__ u32 zf_map(const u32* maps, u32 base, u64 code, int* err) {
  if (code >= maps[base - 1]) { atomicOr(err, ZF_ERR_KEY); return 0; }
  return maps[base + code];
}
__device__ __forceinline__ i64 zf_add(i64 a, i64 b, int* bad) {
  i64 r = (i64)((u64)a + (u64)b);
  *bad |= ((a ^ r) & (b ^ r)) < 0;
  return r;
}
__device__ __forceinline__ i64 zf_sub(i64 a, i64 b, int* bad) {
  i64 r = (i64)((u64)a - (u64)b);
  *bad |= ((a ^ b) & (a ^ r)) < 0;
  return r;
}
__device__ __forceinline__ i64 zf_mul(i64 a, i64 b, int* bad) {
  i64 lo = (i64)((u64)a * (u64)b);
  *bad |= __mul64hi(a, b) != (lo >> 63);
  return lo;
}
__device__ __forceinline__ i64 zf_neg(i64 a, int* bad) {
  *bad |= a == ZF_I64_MIN;
  return (i64)(0ull - (u64)a);
}
__device__ __forceinline__ i64 zf_date(i64 a, int* bad) {
  *bad |= a != (i64)(i32)a;
  return a;
}
__device__ __forceinline__ void zf_add128(u64* lo, u64* hi, i64 v) {
  u64 n = *lo + (u64)v;
  *hi += (v < 0 ? ~0ull : 0ull) + (n < *lo ? 1ull : 0ull);
  *lo = n;
}
__device__ __forceinline__ void zf_warp_add128(u64* lo, u64* hi) {
  for (int d = 16; d > 0; d >>= 1) {
    const u64 olo = __shfl_xor_sync(~0u, *lo, d), ohi = __shfl_xor_sync(~0u, *hi, d);
    const u64 n = *lo + olo;
    *hi += ohi + (n < *lo ? 1ull : 0ull);
    *lo = n;
  }
}
__device__ __forceinline__ void zf_atomic_add128(u64* t, u64 lo, u64 hi) {
  u64 old = atomicAdd(&t[0], lo);
  // Most values are small and positive: the high word then changes only on a carry.
  u64 h = hi + (old + lo < old ? 1ull : 0ull);
  if (h != 0) atomicAdd(&t[1], h);
}
"#;

/// A block's accumulators (`sacc`, `ZF_G` groups) added to the device's.
const FLUSH: &str = r#"  for (u32 gg = threadIdx.x; gg < ZF_G; gg += blockDim.x) {
    const u64* s = sacc + (u64)gg * ZF_S;
    if (s[0] == 0) continue;
    u64* t = acc + (u64)gg * ZF_S;
    atomicAdd(&t[0], s[0]);
    for (u32 a = 1; a + 3 < ZF_S + 0; a += 4) {
      if (s[a] != 0 || s[a + 1] != 0) zf_atomic_add128(&t[a], s[a], s[a + 1]);
      atomicMin((long long*)&t[a + 2], (long long)s[a + 2]);
      atomicMax((long long*)&t[a + 3], (long long)s[a + 3]);
    }
  }
"#;

/// How a `min` or `max` aggregate folds: its neutral value, the C function that combines two
/// values, the atomic that folds one into memory, and its slot (`o`: the aggregate's first).
struct Extreme {
    neutral: &'static str,
    op: &'static str,
    atomic: &'static str,
    slot: usize,
}

fn extreme(f: AggFunc, o: usize) -> Extreme {
    if f == AggFunc::Min {
        Extreme {
            neutral: "ZF_I64_MAX",
            op: "min",
            atomic: "atomicMin",
            slot: o + 2,
        }
    } else {
        Extreme {
            neutral: "ZF_I64_MIN",
            op: "max",
            atomic: "atomicMax",
            slot: o + 3,
        }
    }
}

/// The block's accumulators in shared memory, `slots` of them (a C expression), set to
/// their starting values: counts and sums 0, minima the greatest `i64`, maxima the least.
fn shared_accumulators(slots: &str) -> String {
    format!(
        "  __shared__ u64 sacc[{slots}];\n\
         \x20 for (u32 i = threadIdx.x; i < {slots}; i += blockDim.x) {{\n\
         \x20   const u32 k = i % ZF_S;\n\
         \x20   sacc[i] = (k > 0 && (k - 1) % 4 == 2) ? (u64)ZF_I64_MAX\n\
         \x20           : (k > 0 && (k - 1) % 4 == 3) ? (u64)ZF_I64_MIN : 0;\n\
         \x20 }}\n\
         \x20 __syncthreads();\n"
    )
}

struct Gen<'a> {
    layout: &'a QueryLayout,
}

impl Gen<'_> {
    fn slot(&self, index: usize) -> Result<usize> {
        self.layout
            .column_slot
            .iter()
            .find(|(c, _)| *c == index)
            .map(|(_, s)| *s)
            .ok_or_else(|| Error::invalid(format!("column {index} has no slot in the kernel")))
    }

    /// A boolean C expression.
    fn pred(&self, e: &Expr) -> Result<String> {
        Ok(match e {
            Expr::Lit(Value::Bool(b), _) => b.to_string(),
            Expr::Cmp { op, l, r } => {
                if l.ty() != r.ty() || !integral(l.ty()) {
                    return Err(Error::unsupported(format!(
                        "comparing {} with {} on the GPU",
                        l.ty(),
                        r.ty()
                    )));
                }
                let op = match op {
                    CmpOp::Eq => "==",
                    CmpOp::Ne => "!=",
                    CmpOp::Lt => "<",
                    CmpOp::Le => "<=",
                    CmpOp::Gt => ">",
                    CmpOp::Ge => ">=",
                };
                format!("({} {op} {})", self.value(l)?, self.value(r)?)
            }
            Expr::And(v) | Expr::Or(v) => {
                let join = if matches!(e, Expr::And(_)) {
                    " && "
                } else {
                    " || "
                };
                let parts = v.iter().map(|x| self.pred(x)).collect::<Result<Vec<_>>>()?;
                format!("({})", parts.join(join))
            }
            Expr::Not(x) => format!("(!{})", self.pred(x)?),
            Expr::InList { e, list, negated } => {
                if !integral(e.ty()) {
                    return Err(Error::unsupported(format!("IN over {} on the GPU", e.ty())));
                }
                let x = self.value(e)?;
                let mut parts = Vec::with_capacity(list.len());
                for v in list {
                    parts.push(format!("zf_x == {}", literal(v)?));
                }
                let any = if parts.is_empty() {
                    "false".to_string()
                } else {
                    parts.join(" || ")
                };
                let neg = if *negated { "!" } else { "" };
                format!("({neg}([&](i64 zf_x) {{ return {any}; }})({x}))")
            }
            other => {
                return Err(Error::unsupported(format!(
                    "this predicate on the GPU: {other:?}"
                )));
            }
        })
    }

    /// An `i64` C expression (integral types, in their scaled units).
    fn value(&self, e: &Expr) -> Result<String> {
        if !integral(e.ty()) {
            return Err(Error::unsupported(format!(
                "{} expressions on the GPU",
                e.ty()
            )));
        }
        Ok(match e {
            Expr::Column { index, .. } => format!("(i64)c{}[r]", self.slot(*index)?),
            Expr::Lit(v, _) => literal(v)?,
            Expr::Arith { op, l, r, ty } => {
                let f = match op {
                    ArithOp::Add => "zf_add",
                    ArithOp::Sub => "zf_sub",
                    ArithOp::Mul => "zf_mul",
                    ArithOp::Div | ArithOp::Mod => {
                        return Err(Error::unsupported(format!("{op:?} on the GPU")));
                    }
                };
                let x = format!("{f}({}, {}, &bad)", self.value(l)?, self.value(r)?);
                if *ty == SqlType::Date {
                    format!("zf_date({x}, &bad)")
                } else {
                    x
                }
            }
            Expr::Neg(x, _) => format!("zf_neg({}, &bad)", self.value(x)?),
            Expr::Case {
                whens,
                otherwise: Some(otherwise),
                ..
            } => {
                let mut s = self.value(otherwise)?;
                for (c, r) in whens.iter().rev() {
                    s = format!("({} ? {} : {s})", self.pred(c)?, self.value(r)?);
                }
                s
            }
            Expr::Cast(x, to) => {
                let from = x.ty();
                match (from, *to) {
                    (SqlType::Int | SqlType::Decimal(_), SqlType::Int | SqlType::Decimal(_))
                        if to.scale() >= from.scale() && to.scale() - from.scale() <= 18 =>
                    {
                        let k = 10i64.pow(u32::from(to.scale() - from.scale()));
                        format!("zf_mul({}, {k}LL, &bad)", self.value(x)?)
                    }
                    _ => {
                        return Err(Error::unsupported(format!(
                            "CAST from {from} to {to} on the GPU"
                        )));
                    }
                }
            }
            other => {
                return Err(Error::unsupported(format!(
                    "this expression on the GPU: {other:?}"
                )));
            }
        })
    }

    /// The dense group index of a row (`u32`).
    fn group_index(&self) -> Result<String> {
        let mut stride = 1usize;
        let mut parts = Vec::new();
        for map in self.layout.keys.iter().rev() {
            let x = match map {
                KeyMap::Range { slot, lo, len } => {
                    format!(
                        "zf_key((i64)c{slot}[r], {}, {len}ull, err)",
                        literal(&Value::Int(*lo))?
                    )
                }
                KeyMap::Codes { slot, map, .. } => format!(
                    "zf_map(maps, map_base[chunk * {} + {map}], (u64)c{slot}[r], err)",
                    self.layout.maps
                ),
            };
            parts.push(if stride == 1 {
                x
            } else {
                format!("{x} * {stride}u")
            });
            stride *= map.values();
        }
        parts.reverse();
        Ok(parts.join(" + "))
    }
}

fn integral(t: SqlType) -> bool {
    matches!(t, SqlType::Int | SqlType::Decimal(_) | SqlType::Date)
}

/// A literal as an `i64` C constant.
fn literal(v: &Value) -> Result<String> {
    let x: i64 = match v {
        Value::Int(x) => *x,
        Value::Date(d) => i64::from(*d),
        Value::Decimal(x, _) => i64::try_from(*x)
            .map_err(|_| Error::unsupported("a decimal literal beyond 64 bits on the GPU"))?,
        Value::Bool(b) => i64::from(*b),
        other => {
            return Err(Error::unsupported(format!(
                "the literal {other} on the GPU"
            )));
        }
    };
    // The least i64 has no literal of its own in C.
    Ok(if x == i64::MIN {
        "ZF_I64_MIN".into()
    } else {
        format!("{x}LL")
    })
}
