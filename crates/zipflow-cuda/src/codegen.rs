//! CUDA C generation: one kernel per plan shape that decodes every stream of a chunk.
//!
//! Every node of the shape becomes a `__device__` function `zf_n<k>(env, p)` that returns the
//! node's value at position `p` (`k` is the node's pre-order index). Fully parallel primitives
//! (`plain`, `bitpack`, `for`, `zigzag`, `dict`, `constant`) compose as nested calls, so a
//! `for | bitpack` value is unpacked and offset in registers and never stored in between.
//! Primitives that need more than one position of their child are *materialised*: a stage
//! of the kernel writes their whole output to a buffer first, and their parents read it:
//!
//! - `patch` and `float2int` fill the buffer from their child, then scatter their exceptions
//!   (positions are strictly increasing, so each block finds its own by binary search);
//! - `delta` is a block-wide wrapping prefix sum over the chunk, carried from tile to tile;
//! - `rle` scans the run lengths (block-wide exclusive sum) and expands each run, each warp
//!   walking its share of a tile's positions 32 at a time (`zf_rle_walk`); a root `delta`
//!   over `rle` decodes both from sums over the runs, marking where runs start in a bitmap of
//!   the tile's positions and counting a lane's run from it (`zf_rle_walk_heads`);
//!
//! `delta` and `rle` read their children four neighbouring values per thread (`zf_q<k>`):
//! bit-packed, those are neighbouring lanes of one row, unpacked from one position
//! computation (and for bytes from one 32-bit load).
//! - `ans` decodes each block of its stream in one warp, a state per lane.
//!
//! Byte-string roots (`strdict`, `words`, `plain` over strings) write Arrow-style output: the
//! column's bytes, then its `u64` offsets; their dictionaries are staged in shared memory
//! ([`strings`]).
//!
//! Two kernel kinds follow from the shape ([`KernelKind`]):
//! - **tile**: one thread block per 1024-value vector, for shapes without `delta`/`rle` whose
//!   materialised nodes are all read at the output position; their buffers live in shared
//!   memory, the root's is the output itself;
//! - **chunk**: one thread block per chunk, for everything else; materialised buffers live in
//!   a per-chunk region of a device scratch buffer (the root's, again, is the output).
//!
//! The generator is split by what it emits: `prelude` (the CUDA C every kernel opens with),
//! `lanes` (tile kernels' lane-by-lane bodies), `runs` (the loads and run walks `delta` and
//! `rle` share) and [`strings`] (byte strings); each op's own value and stage are in its
//! module of [`crate::ops`]. This module analyses the shape, lays out its descriptor slots
//! and puts the kernel together.
//!
//! Bit widths are part of the shape and compiled in as constants. The other per-chunk
//! parameters (lengths, references, buffer offsets) are read from a descriptor of `u64` slots
//! ([`Kernel::nodes`] says which), so the source depends only on the shape and modules are
//! reused across chunks and files.
//!
//! Kernel arguments, in order (see [`crate::decode`]):
//! `const u8* in, u8* out, u8* scratch, const u64* prm, const u32* work, int* err`:
//! the compressed bytes, the output (the column's physical type), the scratch buffer, the
//! descriptors (`ZF_NPRM` slots per chunk), two `u32` per block (chunk index in `prm`, vector
//! index) and an error word where the kernel ORs [`ERR_DICT`], [`ERR_RLE_ZERO`],
//! [`ERR_RLE_SUM`], [`ERR_ANS`], [`ERR_STR`] on corrupt data.

pub(crate) mod lanes;
mod prelude;
pub(crate) mod runs;
pub mod strings;
mod writer;

pub(crate) use crate::ops::bitpack::width_expr;
use crate::ops::dict::lane_body as dict_lane_body;
use crate::ops::{radix_group, radix_groups_body};
use crate::shape::{Op, Shape};
use lanes::lane_body;
pub(crate) use writer::Writer;
use zipflow_core::{Error, PType, Result};

/// Threads per block of tile kernels (passed to NVRTC as `-DZF_THREADS`).
pub const TILE_THREADS: u32 = 256;
/// Consecutive 1024-value vectors of one chunk per block of a tile kernel (passed to NVRTC as
/// `-DZF_TILE_VECTORS`): each block's descriptor loads are dependent global reads, and
/// several vectors per block amortise them.
pub const TILE_VECTORS: u32 = 4;
/// Threads per block of chunk kernels (passed to NVRTC as `-DZF_THREADS`). Small blocks let
/// several chunks share a multiprocessor, so one block's barriers do not idle it.
pub const CHUNK_THREADS: u32 = 256;
/// Threads per block of both byte-string kernels (the segment table, one block per chunk; the
/// expansion, one block per segment, see [`strings`]).
pub const STRING_THREADS: u32 = 512;
/// Error bit: a dictionary code at or past the dictionary's end.
pub const ERR_DICT: i32 = 1;
/// Error bit: an RLE run of length 0.
pub const ERR_RLE_ZERO: i32 = 2;
/// Error bit: RLE runs that do not add up to the node's length.
pub const ERR_RLE_SUM: i32 = 4;
/// Error bit: an `ans` block that does not decode consistently (words left over or missing,
/// or a lane not ending at its initial state).
pub const ERR_ANS: i32 = 8;
/// Error bit: string lengths, token counts or byte totals that disagree with each other.
pub const ERR_STR: i32 = 16;
/// Error bit: an `fsst` piece that does not decode to its length (a code without a symbol,
/// an escape without its byte, bytes past the piece, or codes outside the stream).
pub const ERR_FSST: i32 = 64;
/// Error bit: a `chardict16` or `chartable` block whose codes do not end where the next
/// block starts.
pub const ERR_CHAR: i32 = 128;
/// Error bit: `hipatch` exception counts that do not add up to the node's, or an offset
/// outside its vector, past the stream's end or not after the one before it.
pub const ERR_PATCH: i32 = 32;
/// Dictionaries of at most this many entries are read from shared memory, where the kernel's
/// other shared arrays leave room for them (the generated `ZF_DICT_CACHE`).
pub const DICT_SHARED: usize = 1024;
/// Bytes of static shared memory a kernel may declare.
const STATIC_SHARED: usize = 48 * 1024;
/// Bytes of static shared memory kept for the prelude's block-reduction helpers, whose arrays
/// are sized by their template's type (one array per type a kernel uses them with).
const HELPER_SHARED: usize = 2048;
/// Name of the generated kernel.
pub const KERNEL_NAME: &str = "zf_decode";

/// How a generated kernel maps thread blocks to work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KernelKind {
    /// One block per 1024-value vector of a chunk.
    Tile,
    /// One block per chunk.
    Chunk,
}

impl KernelKind {
    /// Threads per block.
    pub fn threads(self) -> u32 {
        match self {
            KernelKind::Tile => TILE_THREADS,
            KernelKind::Chunk => CHUNK_THREADS,
        }
    }
}

/// Descriptor slots of one node (pre-order index = position in [`Kernel::nodes`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSlots {
    /// The primitive.
    pub op: Op,
    /// The node's physical type.
    pub ptype: PType,
    /// First slot: the node's length; the op's own parameters follow (see [`Op::param_slots`]).
    pub base: usize,
    /// Slot holding the byte offset of the node's buffer in the scratch buffer (chunk kernels,
    /// materialised nodes other than the root).
    pub scratch: Option<usize>,
    /// Pre-order indices of the children.
    pub children: Vec<usize>,
    /// A `bitpack` node's bit width when the kernel is compiled for it (see [`Shape::width`]).
    pub width: Option<u32>,
}

/// A generated kernel.
#[derive(Debug, Clone)]
pub struct Kernel {
    /// The CUDA C source.
    pub source: String,
    /// Tile or chunk kernel.
    pub kind: KernelKind,
    /// Descriptor slots per chunk.
    pub nparams: usize,
    /// Slot layout of every node, in pre-order.
    pub nodes: Vec<NodeSlots>,
    /// The shape's key.
    pub key: String,
    /// The output's physical type.
    pub out: PType,
    /// Threads per block (passed to NVRTC as `-DZF_THREADS`).
    pub threads: u32,
    /// Bytes of dynamic shared memory per block (string kernels).
    pub dyn_smem: u32,
    /// Byte strings: rows per block of the second kernel, [`strings::EXPAND_NAME`], which
    /// expands the strings after [`KERNEL_NAME`] has written each chunk's segment table
    /// (see [`strings`]); 0 for other kernels.
    pub segment_rows: u32,
    /// Byte strings: consecutive segments of `segment_rows` rows each block of the expansion
    /// takes in turn, staging the dictionary once for all of them; 0 for other kernels.
    pub segments_per_block: u32,
    /// Bytes of dynamic shared memory per block of the expansion kernel.
    pub expand_smem: u32,
    /// Bytes of dynamic shared memory per block of [`strings::EXPAND_NARROW_NAME`], the
    /// expansion with the smaller stage, or 0 when the shape has none.
    pub expand_narrow_smem: u32,
    /// Whether [`KERNEL_NAME`] must run before the expansion. A `strdict` root whose entries
    /// have one length and whose nodes are all fully parallel needs nothing from it: its
    /// segment table is arithmetic and its entries sit at `code * length`.
    pub first_kernel: bool,
    /// Byte strings of one length (a `strdict` whose entries all have it): their positions
    /// are arithmetic, and the host checks a row index against them.
    pub fixed_strings: bool,
}

impl Kernel {
    /// A kernel that decodes no plan shape (no descriptors, no byte strings): `source`,
    /// cached under `key`, launched with `threads` threads per block.
    pub fn standalone(key: String, source: String, threads: u32) -> Kernel {
        Kernel {
            source,
            kind: KernelKind::Tile,
            nparams: 0,
            nodes: Vec::new(),
            key,
            out: PType::I64,
            threads,
            dyn_smem: 0,
            segment_rows: 0,
            segments_per_block: 0,
            expand_smem: 0,
            expand_narrow_smem: 0,
            first_kernel: true,
            fixed_strings: false,
        }
    }
}

/// Descriptor slot 0: the chunk's first output element in the output buffer (for byte
/// strings, the byte offset of its first offset).
pub const SLOT_OUT: usize = 0;

/// The C type name of a physical type.
pub(crate) fn ctype(p: PType) -> Result<&'static str> {
    Ok(match p {
        PType::I8 => "i8",
        PType::I16 => "i16",
        PType::I32 => "i32",
        PType::I64 => "i64",
        PType::U8 => "u8",
        PType::U16 => "u16",
        PType::U32 => "u32",
        PType::U64 => "u64",
        PType::F32 => "f32",
        PType::F64 => "f64",
        PType::Bytes => {
            return Err(Error::unsupported(
                "the GPU decoder does not handle byte strings",
            ));
        }
    })
}

/// The unsigned arithmetic type integer ops of `p` compute in (wrapping, truncated on store).
pub(crate) fn acc(p: PType) -> &'static str {
    if p.byte_width() <= 4 { "u32" } else { "u64" }
}

/// Whether `op` writes its output to a buffer in kernels of `kind`: a numeric op whose
/// decoding is not fully parallel ([`Op::pattern`]: runs, prefix sums, exceptions, serial
/// coders) does, so its parent reads finished values. In chunk kernels `patch` and
/// `float2int` are expressions instead (a binary search over the exception positions, or
/// nothing when a chunk has none), which spares a pass through device memory. `hipatch`
/// places its exceptions by vector, so it always writes its low bits first. Byte-string roots
/// place their strings by their own row index.
pub fn materialised(op: Op, kind: KernelKind) -> bool {
    match op {
        Op::Patch | Op::FloatToInt => kind == KernelKind::Tile,
        _ => !op.decodes_strings() && op.pattern() != zipflow_encodings::Pattern::FullyParallel,
    }
}

/// Whether node `k` of `nodes` or a node below it is materialised by a stage.
pub(crate) fn stage_below(nodes: &[NodeSlots], k: usize, kind: KernelKind) -> bool {
    materialised(nodes[k].op, kind)
        || nodes[k]
            .children
            .iter()
            .any(|&c| stage_below(nodes, c, kind))
}

/// Whether the shape needs a chunk kernel: `delta`/`rle` anywhere, or a materialised node
/// read at positions other than the output's (under a dictionary's values or RLE children).
pub fn kind_of(shape: &Shape) -> KernelKind {
    if shape.ptype == PType::Bytes {
        return KernelKind::Chunk;
    }
    fn chunk(s: &Shape, elsewhere: bool) -> bool {
        if s.op.is_chunk_wide() || (elsewhere && s.op.is_materialised()) {
            return true;
        }
        s.children.iter().enumerate().any(|(i, c)| {
            let moved = elsewhere
                || (s.op == Op::Dict && i == 1)
                || s.op == Op::BlockPack
                || (s.op == Op::HiPatch && i > 0)
                || s.op == Op::Rle;
            chunk(c, moved)
        })
    }
    if chunk(shape, false) {
        KernelKind::Chunk
    } else {
        KernelKind::Tile
    }
}

/// Checks the types the decoders require of each child, so that generated code is well typed.
fn check_types(s: &Shape) -> Result<()> {
    let bad = |what: &str| {
        Err(Error::unsupported(format!(
            "the GPU decoder has no code for `{}` over {} values with {what}",
            s.op.name(),
            s.ptype
        )))
    };
    let n = s.children.len();
    let child = |i: usize| s.children.get(i).map(|c| c.ptype);
    let int = s.ptype.is_int();
    let bytes = s.ptype == PType::Bytes;
    // A string dictionary: `plain` over byte strings with numeric children.
    let dict = |i: usize| {
        s.children
            .get(i)
            .is_some_and(|c| c.op == Op::Plain && c.ptype == PType::Bytes)
    };
    let ok = match s.op {
        Op::Plain if bytes => n == 2 && child(0) == Some(PType::U32) && child(1) == Some(PType::U8),
        Op::Plain => n == 0,
        Op::Ans => n == 0 && matches!(s.ptype, PType::U8 | PType::U16 | PType::U32),
        Op::Fsst => s.ptype == PType::U8 && n == 1 && child(0) == Some(PType::U8),
        Op::CharDict | Op::CharTable => s.ptype == PType::U8 && n == 0,
        Op::StrDict => bytes && n == 2 && child(0) == Some(PType::U32) && dict(1),
        Op::Words => {
            bytes
                && n == 3
                && child(0) == Some(PType::U32)
                && dict(1)
                && child(2) == Some(PType::U32)
        }
        Op::BitPack | Op::Radix => int && n == 0,
        Op::BlockPack => int && n == 1 && child(0) == Some(s.ptype),
        Op::HiPatch => {
            int && n == 4
                && child(0) == Some(s.ptype)
                && child(1) == Some(PType::U16)
                && child(2) == Some(PType::U16)
                && child(3) == Some(s.ptype)
        }
        Op::Constant => n == 0,
        Op::For | Op::ZigZag => int && n == 1 && child(0) == Some(s.ptype.to_unsigned()),
        Op::LowBits => {
            int && n == 2
                && child(0) == Some(s.ptype.to_unsigned())
                && child(1) == Some(s.ptype.to_unsigned())
        }
        Op::Delta | Op::Patch => int && n == 1 && child(0) == Some(s.ptype),
        Op::Rle => int && n == 2 && child(0) == Some(s.ptype) && child(1) == Some(PType::U32),
        Op::Dict => {
            int && n == 2
                && matches!(child(0), Some(PType::U8 | PType::U16 | PType::U32))
                && child(1) == Some(s.ptype)
        }
        Op::FloatToInt => match s.ptype {
            PType::F64 => n == 1 && child(0) == Some(PType::I64),
            PType::F32 => n == 1 && child(0) == Some(PType::I32),
            _ => false,
        },
        Op::AlpRd => match s.ptype {
            PType::F64 => n == 2 && child(0) == Some(PType::U16) && child(1) == Some(PType::U64),
            PType::F32 => n == 2 && child(0) == Some(PType::U16) && child(1) == Some(PType::U32),
            _ => false,
        },
    };
    if !ok {
        let types: Vec<String> = s.children.iter().map(|c| c.ptype.to_string()).collect();
        return bad(&format!("children of types [{}]", types.join(", ")));
    }
    s.children.iter().try_for_each(check_types)
}

/// Checks that byte strings appear only at the root and as the dictionary of a `strdict` or
/// `words` root (the GPU assembles strings only there).
fn check_strings(s: &Shape) -> Result<()> {
    let nested =
        |c: &Shape| {
            c.preorder().iter().any(|n| n.ptype == PType::Bytes).then(|| {
            Err(Error::unsupported(format!(
                "the GPU decoder handles byte strings only as a column or as its dictionary, \
                 not below `{}` in `{}`",
                c.op.name(),
                s.key()
            )))
        })
        };
    for (i, c) in s.children.iter().enumerate() {
        let is_dict = matches!(s.op, Op::StrDict | Op::Words) && i == 1;
        let below: Vec<&Shape> = if is_dict {
            c.children.iter().collect()
        } else {
            vec![c]
        };
        for b in below {
            if let Some(e) = nested(b) {
                return e;
            }
        }
    }
    Ok(())
}

/// Whether node `k` (of shape `s`) needs a scratch region in a chunk kernel: a materialised
/// node below the root, or a string dictionary (its entries' offsets, which the first
/// kernel writes and the expansion reads).
fn needs_scratch(s: &Shape, k: usize, kind: KernelKind) -> bool {
    kind == KernelKind::Chunk
        && k > 0
        && (materialised(s.op, kind) || (s.op == Op::Plain && s.ptype == PType::Bytes))
}

/// Whether the shape is a root `delta` over `rle` in a chunk kernel: one stage decodes both,
/// from sums over runs (see [`Gen::delta_rle_stage`]), and the runs are never expanded into
/// a buffer of their own.
fn delta_over_rle(shape: &Shape, kind: KernelKind) -> bool {
    kind == KernelKind::Chunk
        && shape.op == Op::Delta
        && shape.children.first().is_some_and(|c| c.op == Op::Rle)
}

/// Assigns descriptor slots in pre-order.
fn layout(shape: &Shape, kind: KernelKind) -> (Vec<NodeSlots>, usize) {
    let order = shape.preorder();
    let mut nodes = Vec::with_capacity(order.len());
    let mut next = SLOT_OUT + 1;
    // Children's pre-order indices: walk again, tracking subtree sizes.
    fn size(s: &Shape) -> usize {
        1 + s.children.iter().map(size).sum::<usize>()
    }
    let mut starts = Vec::with_capacity(order.len());
    {
        fn walk(s: &Shape, at: usize, out: &mut Vec<Vec<usize>>) {
            let mut child_at = at + 1;
            let mut kids = Vec::new();
            for c in &s.children {
                kids.push(child_at);
                child_at += size(c);
            }
            out[at] = kids;
            let mut child_at = at + 1;
            for c in &s.children {
                walk(c, child_at, out);
                child_at += size(c);
            }
        }
        starts.resize(order.len(), Vec::new());
        walk(shape, 0, &mut starts);
    }
    let fused = delta_over_rle(shape, kind);
    for (k, s) in order.iter().enumerate() {
        let base = next;
        next += 1 + s.op.param_slots();
        let scratch = (needs_scratch(s, k, kind) && !(fused && k == 1)).then(|| {
            next += 1;
            next - 1
        });
        nodes.push(NodeSlots {
            op: s.op,
            ptype: s.ptype,
            base,
            scratch,
            children: std::mem::take(&mut starts[k]),
            width: s.width,
        });
    }
    (nodes, next)
}

/// Generates the kernel for `shape`. Shapes the GPU cannot decode give an `Unsupported`
/// error naming the primitive.
pub fn generate(shape: &Shape) -> Result<Kernel> {
    check_types(shape)?;
    check_strings(shape)?;
    let kind = kind_of(shape);
    let (nodes, nparams) = layout(shape, kind);
    let mut g = Gen {
        nodes: &nodes,
        kind,
        src: String::new(),
        prologue: String::new(),
        stages: String::new(),
        ans_table: false,
        dyn_smem: 0,
        expand: String::new(),
        expand_smem: 0,
        expand_narrow_smem: 0,
        staged: Vec::new(),
        quads: Vec::new(),
    };
    let key = shape.key();
    g.src.push_str(&prelude::prelude(&key, kind, nparams));
    let prelude_end = g.src.len();
    g.node(0)?;
    if shape.ptype == PType::Bytes {
        let entries = string_entries(&g);
        g.src.push_str(&entries);
        g.src.insert_str(prelude_end, &dict_cache_define(&g.src));
        let (dyn_smem, expand_smem, segment_rows) = (g.dyn_smem, g.expand_smem, g.segment_rows());
        let expand_narrow_smem = g.expand_narrow_smem;
        let segments_per_block = g.segments_per_block();
        let fixed_strings = g.fixed_length(0).is_some();
        let first_kernel =
            !fixed_strings || nodes.iter().any(|n| materialised(n.op, KernelKind::Chunk));
        return Ok(Kernel {
            source: g.src,
            kind,
            nparams,
            nodes,
            key,
            out: shape.ptype,
            threads: STRING_THREADS,
            dyn_smem,
            segment_rows,
            segments_per_block,
            expand_smem,
            expand_narrow_smem,
            first_kernel,
            fixed_strings,
        });
    }
    let entry = numeric_entry(&mut g, shape.ptype)?;
    g.src.push_str(&entry);
    g.src.insert_str(prelude_end, &dict_cache_define(&g.src));
    let source = g.src;
    Ok(Kernel {
        kind,
        nparams,
        nodes,
        out: shape.ptype,
        ..Kernel::standalone(key, source, kind.threads())
    })
}

/// The line defining `ZF_DICT_CACHE`, the entries each dictionary cache (`zf_d<k>`) of `src`
/// holds: [`DICT_SHARED`] where the caches fit in [`STATIC_SHARED`] beside every other static
/// shared array `src` declares, else 1, so that a kernel whose stages already fill its shared
/// memory (an `ans` table beside a delta scan's tiles, say) reads its dictionary entries from
/// the values node instead of failing to compile. Empty where `src` has no cache.
///
/// Each shared array is declared on a line of its own as
/// `__shared__ [__align__(N)] TYPE NAME[DIM]...;`, its sizes constant expressions of the
/// prelude's macros; the condition is a C constant expression over them, so the compiler
/// evaluates it with the launch constants it is given.
pub(crate) fn dict_cache_define(src: &str) -> String {
    let (mut caches, mut others) = (Vec::new(), Vec::new());
    for line in src.lines() {
        let Some(decl) = line.trim().strip_prefix("__shared__ ") else {
            continue;
        };
        let decl = match decl.strip_prefix("__align__(") {
            Some(rest) => rest.split_once(") ").map_or(decl, |(_, d)| d),
            None => decl,
        };
        let Some((ty, rest)) = decl.split_once(' ') else {
            continue;
        };
        let Some((name, dims)) = rest.trim_end_matches(';').split_once('[') else {
            continue;
        };
        // The prelude's helpers are templates over `A`: counted in HELPER_SHARED.
        if ty == "A" {
            continue;
        }
        let dims: Vec<&str> = dims
            .trim_end_matches(']')
            .split("][")
            .map(str::trim)
            .collect();
        if name.starts_with("zf_d") && dims == ["ZF_DICT_CACHE"] {
            caches.push(format!("sizeof({ty}) * {DICT_SHARED}u"));
        } else {
            let size: Vec<String> = dims.iter().map(|d| format!("({d})")).collect();
            others.push(format!("sizeof({ty}) * {}", size.join(" * ")));
        }
    }
    if caches.is_empty() {
        return String::new();
    }
    let all: Vec<String> = caches.into_iter().chain(others).collect();
    format!(
        "// Dictionary caches hold {DICT_SHARED} entries where they fit beside the other shared arrays.\n\
         #define ZF_DICT_CACHE (({}) <= {}u ? {DICT_SHARED}u : 1u)\n",
        all.join(" + "),
        STATIC_SHARED - HELPER_SHARED
    )
}

/// The parameters every entry point (and the expansion's template body) takes.
const PARAMS: &str = "(const u8* __restrict__ in, u8* __restrict__ out, u8* __restrict__ scratch, const u64* __restrict__ prm, const u32* __restrict__ work, int* __restrict__ err)";

/// The head of a global entry point with launch bounds `bounds`.
fn global(bounds: &str) -> String {
    format!("extern \"C\" __global__ void __launch_bounds__({bounds})")
}

/// The entry points of a byte-string kernel: [`KERNEL_NAME`] (the stages, writing each
/// segment's table) and the expansion ([`strings::EXPAND_NAME`], and where the shape has it
/// [`strings::EXPAND_NARROW_NAME`]).
fn string_entries(g: &Gen<'_>) -> String {
    let len_slot = g.nodes[0].base;
    let mut w = Writer::at(0);
    // A function over one chunk: `decl` the lines before its name, `seg` its first lines
    // after the chunk's.
    let head = |w: &mut Writer, decl: &[&str], name: &str, body: &str, seg: &[String]| {
        w.blank();
        for d in decl {
            w.line(d);
        }
        w.open(format!("{name}{PARAMS}"))
            .line("const u32 chunk = work[2u * blockIdx.x];");
        for l in seg {
            w.line(l);
        }
        w.line("const Env e = {in, scratch, prm + (u64)chunk * ZF_NPRM, err};")
            .line(format!("const u32 len = (u32)e.prm[{len_slot}];"))
            .raw(body)
            .close();
    };
    head(
        &mut w,
        &[&global("ZF_THREADS")],
        KERNEL_NAME,
        &g.stages,
        &["(void)out;".to_string()],
    );
    // A `words` expansion holds two blocks of 512 threads per multiprocessor (its shared
    // memory allows no more): registers are capped to fit them, as the loop over a
    // block's segments would otherwise take more.
    // Entries of one length: three blocks fit by shared memory, and registers are capped
    // to fit them too (the unchecked and checked lookups would otherwise take more).
    let bounds = if g.segments_per_block() > 1 {
        "ZF_THREADS, 1024 / ZF_THREADS"
    } else if g.fixed_length(0).is_some() {
        "ZF_THREADS, 1536 / ZF_THREADS"
    } else {
        "ZF_THREADS"
    };
    let seg = [
        "const u32 seg0 = work[2u * blockIdx.x + 1u];".to_string(),
        format!("u8* o = out + prm[(u64)chunk * ZF_NPRM + {SLOT_OUT}];"),
    ];
    if g.narrow_expansion() {
        // The body once, as a template over the stage's size (`ZF_STR_STAGE`) and the
        // staged codes' type, and two entry points: the stage for long strings and `u32`
        // codes, two blocks a multiprocessor as their shared memory allows, and the
        // smaller one with `u16` codes, three (registers capped to fit them).
        head(
            &mut w,
            &["template <u32 zf_stage_t, typename zf_code_t>"],
            "__device__ __forceinline__ void zf_expand_t",
            &g.expand,
            &seg,
        );
        for (name, bounds, args) in [
            (strings::EXPAND_NAME, bounds, "ZF_STAGE_WIDE, u32"),
            (
                strings::EXPAND_NARROW_NAME,
                "ZF_THREADS, 1536 / ZF_THREADS",
                "ZF_STAGE_NARROW, u16",
            ),
        ] {
            w.blank()
                .line(global(bounds))
                .open(format!("{name}{PARAMS}"))
                .line(format!(
                    "zf_expand_t<{args}>(in, out, scratch, prm, work, err);"
                ))
                .close();
        }
    } else {
        head(
            &mut w,
            &[&global(bounds)],
            strings::EXPAND_NAME,
            &g.expand,
            &seg,
        );
    }
    w.finish()
}

/// The entry point of a numeric kernel, [`KERNEL_NAME`]: a tile kernel's lane-by-lane body
/// where the shape has one (its device functions go to `g.src`), else the stages and a loop
/// over the block's positions.
fn numeric_entry(g: &mut Gen<'_>, ptype: PType) -> Result<String> {
    let kind = g.kind;
    let nodes = g.nodes;
    let root_t = ctype(ptype)?;
    let root = &nodes[0];
    let lanes = match lane_body(g, kind)? {
        Some(l) => Some(l),
        None => match dict_lane_body(nodes, kind, &g.prologue)? {
            Some(l) => Some(l),
            None => radix_groups_body(nodes, kind)?,
        },
    };
    let body = match lanes {
        Some((rows, body)) => {
            g.src.push_str(&rows);
            body
        }
        None => {
            let each =
                "for (u32 p = p0 + threadIdx.x; p < p1; p += ZF_THREADS) o[p] = zf_n0(e, p);";
            let mut w = Writer::at(1);
            w.line("(void)vec;").raw(&g.prologue);
            match kind {
                KernelKind::Tile => {
                    w.open("for (u32 vi = 0u; vi < ZF_TILE_VECTORS; ++vi)")
                        .line("const u32 p0 = (vec + vi) * 1024u;")
                        .line("if (p0 >= len) break;")
                        .line("const u32 p1 = min(p0 + 1024u, len);");
                }
                KernelKind::Chunk => {
                    w.line("const u32 p0 = 0u, p1 = len;");
                }
            }
            w.raw(&g.stages);
            match kind {
                // The root's stage writes the output.
                _ if materialised(root.op, kind) => {}
                KernelKind::Tile => {
                    // Full vectors (all but a chunk's last) take an unrolled loop, so each
                    // thread's loads are all in flight before the first store.
                    w.open("if (p1 - p0 == 1024u)")
                        .directive("#pragma unroll")
                        .open("for (u32 i = 0u; i < 1024u / ZF_THREADS; ++i)")
                        .line("const u32 p = p0 + threadIdx.x + i * ZF_THREADS;")
                        .line("o[p] = zf_n0(e, p);")
                        .close()
                        .reopen("else")
                        .line(each)
                        .close();
                }
                KernelKind::Chunk => {
                    w.line(each);
                }
            }
            if kind == KernelKind::Tile {
                // Shared-memory buffers are reused by the next vector.
                if !g.stages.is_empty() {
                    w.line("__syncthreads();");
                }
                w.close();
            }
            w.finish()
        }
    };
    // A chunk kernel runs one block per chunk, each a long chain of barriers: registers are
    // capped so that a multiprocessor holds as many blocks as it has threads for (2048), and
    // a column of a thousand chunks runs in one wave.
    let bounds = match kind {
        KernelKind::Tile => "ZF_THREADS",
        KernelKind::Chunk => "ZF_THREADS, 2048 / ZF_THREADS",
    };
    let mut w = Writer::at(0);
    w.blank()
        .line(global(bounds))
        .open(format!("{KERNEL_NAME}{PARAMS}"))
        .line("const u32 chunk = work[2u * blockIdx.x], vec = work[2u * blockIdx.x + 1u];")
        .line("const Env e = {in, scratch, prm + (u64)chunk * ZF_NPRM, err};")
        .line(format!("{root_t}* o = ({root_t}*)out + e.prm[{SLOT_OUT}];"))
        .line(format!("const u32 len = (u32)e.prm[{}];", root.base))
        .raw(body)
        .close();
    Ok(w.finish())
}

pub(crate) struct Gen<'a> {
    pub(crate) nodes: &'a [NodeSlots],
    pub(crate) kind: KernelKind,
    /// Device functions, children before parents.
    pub(crate) src: String,
    /// Kernel body run once per block before its vectors (small dictionaries to shared
    /// memory), children before parents.
    pub(crate) prologue: String,
    /// Kernel body stages, children before parents.
    pub(crate) stages: String,
    /// Whether the shared `ans` decoding table is declared.
    pub(crate) ans_table: bool,
    /// Bytes of dynamic shared memory the stages use.
    pub(crate) dyn_smem: u32,
    /// Byte strings: the body of the expansion kernel (see [`strings`]).
    pub(crate) expand: String,
    /// Bytes of dynamic shared memory the expansion uses.
    pub(crate) expand_smem: u32,
    /// Bytes of dynamic shared memory the expansion with the smaller stage uses (0: none).
    pub(crate) expand_narrow_smem: u32,
    /// Nodes whose `zf_each<k>` (a visit of a range of values) is emitted.
    pub(crate) staged: Vec<usize>,
    /// Nodes whose `zf_q<k>` (four neighbouring values at once) is emitted.
    pub(crate) quads: Vec<usize>,
}

impl Gen<'_> {
    /// Whether node `k` or a node below it is materialised by a stage.
    pub(crate) fn has_stage(&self, k: usize) -> bool {
        stage_below(self.nodes, k, self.kind)
    }

    /// The range of positions a stage of node `k` fills: the block's vectors in a tile
    /// kernel, the whole chunk in a chunk kernel.
    pub(crate) fn span(&self, k: usize) -> (String, String) {
        match self.kind {
            KernelKind::Tile => ("p0".to_string(), "p1".to_string()),
            KernelKind::Chunk => (
                "0u".to_string(),
                format!("(u32)e.prm[{}]", self.nodes[k].base),
            ),
        }
    }

    /// Where node `k`'s materialised output lives, indexed by `idx`.
    pub(crate) fn buf(&self, k: usize, idx: &str) -> Result<String> {
        let n = &self.nodes[k];
        let t = ctype(n.ptype)?;
        Ok(if k == 0 {
            format!("o[{idx}]")
        } else {
            match (self.kind, n.scratch) {
                (KernelKind::Chunk, Some(s)) => {
                    format!("(({t}*)(e.scratch + e.prm[{s}]))[{idx}]")
                }
                _ => format!("zf_m{k}[({idx}) & 1023u]"),
            }
        })
    }

    /// Emits node `k`'s functions (children first) and, if it is materialised, its stage.
    pub(crate) fn node(&mut self, k: usize) -> Result<()> {
        let n = self.nodes[k].clone();
        let fused = k == 0
            && self.kind == KernelKind::Chunk
            && n.op == Op::Delta
            && n.children
                .first()
                .is_some_and(|&c| self.nodes[c].op == Op::Rle);
        if fused {
            // The root `delta` over `rle`: the runs' children, then one stage for both.
            let rle = n.children[0];
            for &c in &self.nodes[rle].children.clone() {
                self.node(c)?;
            }
            let st = self.delta_rle_stage(k, rle)?;
            self.stages.push_str(&st);
            return Ok(());
        }
        for &c in &n.children {
            self.node(c)?;
        }
        if n.ptype == PType::Bytes {
            return if k == 0 {
                self.string_root(k)
            } else {
                self.dict_stage(k)
            };
        }
        let t = ctype(n.ptype)?;
        let body = crate::ops::value(self, k)?;
        if k == 0 && materialised(n.op, self.kind) {
            // The root's stage writes the output; nothing reads it back.
            return Ok(());
        }
        let mut w = Writer::at(0);
        w.blank()
            .line(format!("// node {k}: {} ({})", n.op.name(), n.ptype))
            .open(format!(
                "__device__ __forceinline__ {t} zf_n{k}(const Env& e, u32 p)"
            ))
            .raw(body)
            .close();
        self.src.push_str(&w.finish());
        Ok(())
    }

    /// Emits the stage that materialises node `k`.
    pub(crate) fn stage(&mut self, k: usize) -> Result<()> {
        let n = self.nodes[k].clone();
        let t = ctype(n.ptype)?;
        if self.kind == KernelKind::Tile && k > 0 {
            let decl = Writer::at(0)
                .blank()
                .line(format!("__shared__ {t} zf_m{k}[1024];"))
                .finish();
            self.src.push_str(&decl);
        }
        let st = crate::ops::stage(self, k)?;
        self.stages.push_str(&st);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
