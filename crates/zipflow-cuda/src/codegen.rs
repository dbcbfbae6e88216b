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
//! - `ans` decodes each block of its stream in one warp, a state per lane ([`strings`]).
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

pub mod strings;

use crate::shape::{Op, Shape};
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
/// Dictionaries of at most this many entries are read from shared memory.
pub const DICT_SHARED: usize = 1024;
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
    /// First slot: the node's length; the op's own parameters follow (see [`param_slots`]).
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

/// Descriptor slot 0: the chunk's first output element in the output buffer (for byte
/// strings, the byte offset of its first offset).
pub const SLOT_OUT: usize = 0;

/// Parameter slots an op takes after its length slot, in order:
/// - `plain`: byte offset of the values in `in` (four slots unused); over byte strings at
///   the root, as `strdict`;
/// - `strdict`, `words`: the byte offset of the chunk's bytes in the output, their number,
///   the width of the offsets (8, 4, or 0 for none), the byte offset of the chunk's
///   segment table in the scratch buffer (`2 * (segments + 1)` u32, see [`strings`]), and
///   the byte offset in `in` of the same table built by the host from the node's row index
///   (all ones when the first kernel sums it);
/// - `bitpack`: byte offset of the packed words, bit width;
/// - `blockpack`: byte offset of the packed words, byte offset of its vector table (per
///   1024-value vector, a `u32` word offset and a `u32` bit width, staged by the host after
///   the tree);
/// - `for`: reference bits; `constant`: value bits; `delta`: base bits;
/// - `patch`, `float2int`: byte offsets of positions and exception values, exception count
///   (`float2int` then the bits of `10^E` as an f64);
/// - `hipatch`: the low bits' width `W`, exception count;
/// - `radix`: byte offset of the groups (the base is compiled in, see [`Shape::width`]);
/// - `fsst`: byte offset of its symbol table (256 `u64` symbols, then 256 `u8` lengths, 0 for
///   codes without a symbol; staged by the host after the tree), byte offset of the piece
///   ends, the pieces' log2 size;
/// - `chardict16`, `chartable`: byte offsets of the bit stream, of its blocks (per 1024-byte
///   block a `u32` first code bit, the `u32` bit after its last code, its table, and a `u32`
///   of padding) and of its tables (per table 1024 `u16`: the first code of every 10-bit
///   window, character and length), the stream's bytes (all staged by the host after the
///   tree but the stream);
/// - `ans`: byte offsets of the states, block starts and words, the number of words, the
///   block size's log2, the byte offset of the cumulative frequencies (`nsym + 1` u32, staged
///   by the host after the tree) and `nsym`;
/// - `zigzag`, `rle`, `dict`: none (they read their children's length slots).
pub fn param_slots(op: Op) -> usize {
    match op {
        Op::ZigZag | Op::Rle | Op::Dict => 0,
        Op::For | Op::Constant | Op::Delta | Op::Radix => 1,
        Op::BitPack | Op::BlockPack | Op::HiPatch => 2,
        Op::Fsst => 3,
        Op::CharDict | Op::CharTable => 4,
        Op::Patch => 3,
        Op::Plain | Op::StrDict | Op::Words => 5,
        Op::FloatToInt => 4,
        Op::Ans => 7,
    }
}

/// The C type name of a physical type.
fn ctype(p: PType) -> Result<&'static str> {
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
fn acc(p: PType) -> &'static str {
    if p.byte_width() <= 4 { "u32" } else { "u64" }
}

/// Whether `op` writes its output to a buffer in kernels of `kind`. In chunk kernels `patch`
/// and `float2int` are expressions instead (a binary search over the exception positions, or
/// nothing when a chunk has none), which spares a pass through device memory. `hipatch`
/// places its exceptions by vector, so it always writes its low bits first.
pub fn materialised(op: Op, kind: KernelKind) -> bool {
    match op {
        Op::Delta | Op::Rle | Op::Ans | Op::HiPatch | Op::Fsst | Op::CharDict | Op::CharTable => {
            true
        }
        Op::Patch | Op::FloatToInt => kind == KernelKind::Tile,
        _ => false,
    }
}

/// Whether node `k` of `nodes` or a node below it is materialised by a stage.
fn stage_below(nodes: &[NodeSlots], k: usize, kind: KernelKind) -> bool {
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
        next += 1 + param_slots(s.op);
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

const PRELUDE: &str = r#"// Generated by zipflow-cuda. Shape: @SHAPE@ (@KIND@ kernel).
#if !defined(ZF_THREADS) || !defined(ZF_TILE_VECTORS)
#error "ZF_THREADS and ZF_TILE_VECTORS must be defined (-D...)"
#endif
typedef signed char i8;
typedef unsigned char u8;
typedef short i16;
typedef unsigned short u16;
typedef int i32;
typedef unsigned int u32;
typedef long long i64;
typedef unsigned long long u64;
typedef float f32;
typedef double f64;
#define ZF_NPRM @NPRM@
// Consecutive values per thread in each step of a delta scan (four: read as one quad).
#define ZF_DELTA_ITEMS 4u
#define ZF_ERR_DICT 1
#define ZF_ERR_RLE_ZERO 2
#define ZF_ERR_RLE_SUM 4
#define ZF_ERR_ANS 8
#define ZF_ERR_STR 16
#define ZF_ERR_PATCH 32
#define ZF_ERR_FSST 64
#define ZF_ERR_CHAR 128

struct Env {
  const u8* in;
  u8* scratch;
  const u64* prm;
  int* err;
};

// Value `p` of a FastLanes bit-packed stream of BITS-bit words at width W: vector p / 1024,
// position q in it; q = FL_ORDER[row / 8] * 16 + (row % 8) * 128 + lane, lane < 1024 / BITS,
// and the row's bits start at bit row * W of the lane's words (word k at LANES * k + lane).
template <typename U, typename A, int BITS>
__device__ __forceinline__ A zf_unpack(const U* __restrict__ w, u32 W, u32 p) {
  if (W == 0u) return (A)0;
  const u32 LANES = 1024u / BITS;
  const u32 q = p & 1023u, s = q >> 7, r = q & 127u;
  const u32 lane = r % LANES, fl = (r / LANES) * (LANES / 16u);
  const u32 o = ((fl & 1u) << 2) | (fl & 2u) | (fl >> 2);  // FL_ORDER is its own inverse
  const u32 bit = (o * 8u + s) * W, k = bit / BITS, sh = bit % BITS;
  const U* vw = w + (u64)(p >> 10) * (LANES * W);
  A x = (A)__ldg(vw + LANES * k + lane) >> sh;
  if (sh + W > (u32)BITS) x |= (A)__ldg(vw + LANES * (k + 1u) + lane) << (BITS - sh);
  return W == (u32)BITS ? x : (x & (((A)1 << W) - (A)1));
}

// Values p .. p + 3 (p % 4 == 0) of the same stream: four neighbouring lanes of one row, so
// the position arithmetic is done once and the four loads are of neighbouring words.
template <typename U, typename A, int BITS>
__device__ __forceinline__ void zf_unpack4(const U* __restrict__ w, u32 W, u32 p, A* x) {
  if (W == 0u) {
#pragma unroll
    for (u32 i = 0u; i < 4u; ++i) x[i] = (A)0;
    return;
  }
  const u32 LANES = 1024u / BITS;
  const u32 q = p & 1023u, s = q >> 7, r = q & 127u;
  const u32 lane = r % LANES, fl = (r / LANES) * (LANES / 16u);
  const u32 o = ((fl & 1u) << 2) | (fl & 2u) | (fl >> 2);
  const u32 bit = (o * 8u + s) * W, k = bit / BITS, sh = bit % BITS;
  const U* lw = w + (u64)(p >> 10) * (LANES * W) + LANES * k + lane;
  if (BITS == 8 && ((size_t)lw & 3u) == 0u) {
    // Bytes: the four lanes are one 32-bit word, shifted and masked byte by byte.
    const u32 rep = 0x01010101u;
    u32 y = (__ldg((const u32*)lw) >> sh) & (rep * (0xffu >> sh));
    if (sh + W > 8u) y |= (__ldg((const u32*)(lw + LANES)) << (8u - sh)) & (rep * ((0xffu << (8u - sh)) & 0xffu));
    y &= rep * ((1u << W) - 1u);
#pragma unroll
    for (u32 i = 0u; i < 4u; ++i) x[i] = (A)((y >> (8u * i)) & 0xffu);
    return;
  }
#pragma unroll
  for (u32 i = 0u; i < 4u; ++i) {
    A y = (A)__ldg(lw + i) >> sh;
    if (sh + W > (u32)BITS) y |= (A)__ldg(lw + LANES + i) << (BITS - sh);
    x[i] = W == (u32)BITS ? y : (y & (((A)1 << W) - (A)1));
  }
}

// Runs per thread of an rle tile (four: read as one quad), and runs per tile.
#define ZF_RLE_ITEMS 4u
#define ZF_RLE_TILE (ZF_RLE_ITEMS * ZF_THREADS)

// The run of an rle tile holding output position q: the last j with rs[j] <= q (rs holds
// ZF_RLE_TILE + 1 non-decreasing starts, rs[0] <= q < rs[ZF_RLE_TILE]). A fixed number of
// branch-free steps, so that several searches interleave.
__device__ __forceinline__ u32 zf_run_of(const u32* rs, u32 q) {
  u32 j = 0u;
#pragma unroll
  for (u32 s = ZF_RLE_TILE / 2u; s > 0u; s >>= 1) j += rs[j + s] <= q ? s : 0u;
  return j;
}

// A warp's OR of x (Ampere and later in one instruction).
__device__ __forceinline__ u32 zf_warp_or(u32 x) {
#if __CUDA_ARCH__ >= 800
  return __reduce_or_sync(0xffffffffu, x);
#else
#pragma unroll
  for (u32 d = 16u; d > 0u; d >>= 1) x |= __shfl_xor_sync(0xffffffffu, x, d);
  return x;
#endif
}

// Calls f(q, j) for every output position q of an rle tile, [lo, hi), with j its run (the
// last j with rs[j] <= q, below ZF_RLE_TILE). Each warp takes an equal share of the
// positions, 32 consecutive ones a step, so its stores coalesce. Only its first position
// is searched for; after that a step's runs follow from the last: the runs starting within
// the step are among the 32 after the run of the step's last position before, so each lane
// tests one run start, and a lane's run is that base plus the starts at or before it.
template <typename F>
__device__ __forceinline__ void zf_rle_walk(const u32* rs, u32 lo, u32 hi, F f) {
  const u32 lane = threadIdx.x & 31u, warp = threadIdx.x >> 5, nw = ZF_THREADS / 32u;
  const u32 per = (u32)((((u64)(hi - lo) + nw - 1u) / nw + 31u) & ~31ull);
  const u64 a64 = (u64)lo + (u64)warp * per;
  if (a64 >= hi) return;
  const u32 a = (u32)a64, z = (u32)min(a64 + per, (u64)hi);
  u32 jb = zf_run_of(rs, a);
  for (u32 qw = a; qw < z; qw += 32u) {
    const u32 m = jb + 1u + lane;
    const u32 s = m <= ZF_RLE_TILE ? rs[m] : 0xffffffffu;
    // Starts at or before the step's first position, then one bit per start after it.
    const u32 le = __popc(__ballot_sync(0xffffffffu, s <= qw));
    const u32 d = s - qw;
    const u32 bits = zf_warp_or(d - 1u < 31u ? 1u << d : 0u);
    const u32 j = min(jb + le + __popc(bits & (0xffffffffu >> (31u - lane))), ZF_RLE_TILE - 1u);
    if (qw + lane < z) f(qw + lane, j);
    jb = __shfl_sync(0xffffffffu, j, 31);
  }
}

// Positions of an rle tile's head map: one bit per output position of a window of the tile,
// set where a run starts (a power of two, at least 32).
#define ZF_HEAD_BITS 16384u

// Sets the head-map bit of a run starting at b (relative to the window) when it is in the
// window. Several threads' runs may share a word.
__device__ __forceinline__ void zf_head(u32* hd, u32 b) {
  if (b < ZF_HEAD_BITS) atomicOr(hd + (b >> 5), 1u << (b & 31u));
}

// Calls f(q, j) for every output position q of a window [lo, hi) of an rle tile (hi - lo <=
// ZF_HEAD_BITS), with j its run (the last j with rs[j] <= q, below ZF_RLE_TILE), then clears
// the head-map words it read. Each warp takes an equal share of the positions, 32
// consecutive ones (one head-map word) a step, so its stores coalesce. Only its first
// position is searched for; after that a lane's run is the run before the step's plus the
// heads at or before it in the word, so the steps depend on each other by one add.
template <typename F>
__device__ __forceinline__ void zf_rle_window(const u32* rs, u32* hd, u32 lo, u32 hi, F f) {
  const u32 lane = threadIdx.x & 31u, warp = threadIdx.x >> 5, nw = ZF_THREADS / 32u;
  const u32 per = ((hi - lo + nw - 1u) / nw + 31u) & ~31u;
  if (warp * per >= hi - lo) return;
  const u32 a = lo + warp * per, z = hi - a > per ? a + per : hi;
  const u32 i0 = (a - lo) >> 5, le = 0xffffffffu >> (31u - lane);
  u32 i = i0;
  // The run before position a when a run starts there (its bit is counted below).
  u32 jb = zf_run_of(rs, a) - (hd[i] & 1u);
  for (u32 qw = a; qw < z; qw += 32u, ++i) {
    const u32 w = hd[i];
    const u32 j = min(jb + __popc(w & le), ZF_RLE_TILE - 1u);
    if (qw + lane < z) f(qw + lane, j);
    jb += __popc(w);
  }
  __syncwarp();
  for (u32 x = i0 + lane; x < i; x += 32u) hd[x] = 0u;
}

// zf_rle_walk with a head map: calls f(q, j) for every output position q of an rle tile,
// [lo, hi), with j its run, a window of ZF_HEAD_BITS positions at a time. The caller has set
// the first window's heads; later windows' heads come from the tile's starts. Every thread
// of the block calls it.
template <typename F>
__device__ __forceinline__ void zf_rle_walk_heads(const u32* rs, u32* hd, u32 lo, u32 hi, F f) {
  for (u32 w0 = lo;;) {
    const u32 w1 = hi - w0 > ZF_HEAD_BITS ? w0 + ZF_HEAD_BITS : hi;
    zf_rle_window(rs, hd, w0, w1, f);
    if (w1 == hi) return;
    __syncthreads();
    for (u32 r = threadIdx.x; r < ZF_RLE_TILE; r += ZF_THREADS)
      if (rs[r] < rs[r + 1u]) zf_head(hd, rs[r] - w1);
    __syncthreads();
    w0 = w1;
  }
}

// First index in the sorted a[0..n) whose value is >= x.
__device__ __forceinline__ u32 zf_lower_bound(const u32* a, u32 n, u32 x) {
  u32 lo = 0u, hi = n;
  while (lo < hi) {
    const u32 mid = (lo + hi) >> 1;
    if (__ldg(a + mid) < x) lo = mid + 1u; else hi = mid;
  }
  return lo;
}

// Block-wide exclusive prefix sum (wrapping); every thread of the block must call it.
template <typename A>
__device__ __forceinline__ A zf_scan_excl(A x, A* total) {
  __shared__ A ws[33];
  const u32 lane = threadIdx.x & 31u, warp = threadIdx.x >> 5, nw = (blockDim.x + 31u) >> 5;
  A incl = x;
#pragma unroll
  for (u32 d = 1u; d < 32u; d <<= 1) {
    const A y = __shfl_up_sync(0xffffffffu, incl, d);
    if (lane >= d) incl += y;
  }
  __syncthreads();
  if (lane == 31u) ws[warp] = incl;
  __syncthreads();
  if (warp == 0u) {
    const A w = lane < nw ? ws[lane] : (A)0;
    A wi = w;
#pragma unroll
    for (u32 d = 1u; d < 32u; d <<= 1) {
      const A y = __shfl_up_sync(0xffffffffu, wi, d);
      if (lane >= d) wi += y;
    }
    if (lane < nw) ws[lane] = wi - w;
    if (lane == 31u) ws[32] = wi;
  }
  __syncthreads();
  *total = ws[32];
  return ws[warp] + incl - x;
}
"#;

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
    g.src.push_str(
        &PRELUDE
            .replace("@SHAPE@", &key)
            .replace(
                "@KIND@",
                match kind {
                    KernelKind::Tile => "tile",
                    KernelKind::Chunk => "chunk",
                },
            )
            .replace("@NPRM@", &nparams.to_string()),
    );
    g.node(0)?;
    if shape.ptype == PType::Bytes {
        let len_slot = nodes[0].base;
        // Every entry point (and the expansion's template body) takes the same parameters.
        let params = "(const u8* __restrict__ in, u8* __restrict__ out, u8* __restrict__ scratch,\n          const u64* __restrict__ prm, const u32* __restrict__ work, int* __restrict__ err)";
        let global =
            |bounds: &str| format!("extern \"C\" __global__ void __launch_bounds__({bounds})\n");
        let head = |decl: &str, name: &str, body: &str, seg: &str| {
            format!(
                r#"
{decl}{name}{params} {{
  const u32 chunk = work[2u * blockIdx.x];{seg}
  const Env e = {{in, scratch, prm + (u64)chunk * ZF_NPRM, err}};
  const u32 len = (u32)e.prm[{len_slot}];
{body}}}
"#
            )
        };
        let first = head(
            &global("ZF_THREADS"),
            KERNEL_NAME,
            &g.stages,
            "\n  (void)out;",
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
        let seg = format!(
            "\n  const u32 seg0 = work[2u * blockIdx.x + 1u];\n  u8* o = out + prm[(u64)chunk * ZF_NPRM + {SLOT_OUT}];"
        );
        let second = if g.narrow_expansion() {
            // The body once, as a template over the stage's size (`ZF_STR_STAGE`) and the
            // staged codes' type, and two entry points: the stage for long strings and `u32`
            // codes, two blocks a multiprocessor as their shared memory allows, and the
            // smaller one with `u16` codes, three (registers capped to fit them).
            let body = head(
                "template <u32 zf_stage_t, typename zf_code_t>\n__device__ __forceinline__ void ",
                "zf_expand_t",
                &g.expand,
                &seg,
            );
            let entry = |name: &str, bounds: &str, args: &str| {
                format!(
                    "\n{}{name}{params} {{\n  zf_expand_t<{args}>(in, out, scratch, prm, work, err);\n}}\n",
                    global(bounds)
                )
            };
            format!(
                "{body}{}{}",
                entry(strings::EXPAND_NAME, bounds, "ZF_STAGE_WIDE, u32"),
                entry(
                    strings::EXPAND_NARROW_NAME,
                    "ZF_THREADS, 1536 / ZF_THREADS",
                    "ZF_STAGE_NARROW, u16"
                )
            )
        } else {
            head(&global(bounds), strings::EXPAND_NAME, &g.expand, &seg)
        };
        g.src.push_str(&first);
        g.src.push_str(&second);
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
    let root_t = ctype(shape.ptype)?;
    let (range, end) = match kind {
        KernelKind::Tile => (
            "  for (u32 vi = 0u; vi < ZF_TILE_VECTORS; ++vi) {\n  const u32 p0 = (vec + vi) * 1024u;\n  if (p0 >= len) break;\n  const u32 p1 = min(p0 + 1024u, len);\n",
            // Shared-memory buffers are reused by the next vector.
            if g.stages.is_empty() {
                "  }\n"
            } else {
                "  __syncthreads();\n  }\n"
            },
        ),
        KernelKind::Chunk => ("  const u32 p0 = 0u, p1 = len;\n", ""),
    };
    let root = &nodes[0];
    let lanes = match lane_body(&g, kind)? {
        Some(l) => Some(l),
        None => match dict_lane_body(&nodes, kind, &g.prologue)? {
            Some(l) => Some(l),
            None => radix_groups_body(&nodes, kind)?,
        },
    };
    let body = match lanes {
        Some((rows, body)) => {
            g.src.push_str(&rows);
            body
        }
        None => {
            let finish = if materialised(root.op, kind) {
                ""
            } else {
                match kind {
                    // Full vectors (all but a chunk's last) take an unrolled loop, so each
                    // thread's loads are all in flight before the first store.
                    KernelKind::Tile => {
                        "  if (p1 - p0 == 1024u) {\n#pragma unroll\n    for (u32 i = 0u; i < 1024u / ZF_THREADS; ++i) {\n      const u32 p = p0 + threadIdx.x + i * ZF_THREADS;\n      o[p] = zf_n0(e, p);\n    }\n  } else {\n    for (u32 p = p0 + threadIdx.x; p < p1; p += ZF_THREADS) o[p] = zf_n0(e, p);\n  }\n"
                    }
                    KernelKind::Chunk => {
                        "  for (u32 p = p0 + threadIdx.x; p < p1; p += ZF_THREADS) o[p] = zf_n0(e, p);\n"
                    }
                }
            };
            format!(
                "  (void)vec;\n{}{range}{}{finish}{end}",
                g.prologue, g.stages
            )
        }
    };
    // A chunk kernel runs one block per chunk, each a long chain of barriers: registers are
    // capped so that a multiprocessor holds as many blocks as it has threads for (2048), and
    // a column of a thousand chunks runs in one wave.
    let bounds = match kind {
        KernelKind::Tile => "ZF_THREADS",
        KernelKind::Chunk => "ZF_THREADS, 2048 / ZF_THREADS",
    };
    g.src.push_str(&format!(
        r#"
extern "C" __global__ void __launch_bounds__({bounds})
{KERNEL_NAME}(const u8* __restrict__ in, u8* __restrict__ out, u8* __restrict__ scratch,
          const u64* __restrict__ prm, const u32* __restrict__ work, int* __restrict__ err) {{
  const u32 chunk = work[2u * blockIdx.x], vec = work[2u * blockIdx.x + 1u];
  const Env e = {{in, scratch, prm + (u64)chunk * ZF_NPRM, err}};
  {root_t}* o = ({root_t}*)out + e.prm[{SLOT_OUT}];
  const u32 len = (u32)e.prm[{len_slot}];
{body}}}
"#,
        len_slot = root.base,
    ));
    Ok(Kernel {
        source: g.src,
        kind,
        nparams,
        nodes,
        key,
        out: shape.ptype,
        threads: kind.threads(),
        dyn_smem: 0,
        segment_rows: 0,
        segments_per_block: 0,
        expand_smem: 0,
        expand_narrow_smem: 0,
        first_kernel: true,
        fixed_strings: false,
    })
}

/// The body of a tile kernel for `bitpack` or `for | bitpack` over 32- or 64-bit words,
/// decoded lane by lane as FastLanes lays them out, with the device function it calls: each
/// thread owns one lane of a vector and walks 16 of its rows, so every packed word is loaded
/// once and shifted out in registers, and each row stores the lanes' consecutive values. A
/// warp's threads share their rows, which are template constants, so with the width compiled
/// in every shift and word index is a constant. 32-bit words: 32 lanes, two warps per vector;
/// 64-bit words: 16 lanes, a warp covers two vectors, four warps their 64 rows. A block of 8
/// warps covers its `ZF_TILE_VECTORS` = 4 vectors either way. `None` for other shapes.
///
/// Over `hipatch` (`hipatch | bitpack`, `for | hipatch | bitpack`) the low bits go lane by
/// lane the same way; one warp per vector finds that vector's exceptions meanwhile and, after
/// a barrier, adds their high bits to the stored values (atomically). The high bits lie above
/// the low bits' width, so adding them to the low bits plus the reference is the same as
/// ORing them in before, and the low bits are not read again.
fn lane_body(g: &Gen<'_>, kind: KernelKind) -> Result<Option<(String, String)>> {
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
    // Which vector of the block, which row group (warp-uniform) and which lane.
    let (place, groups) = if bytes == 4 {
        (
            "const u32 warp = threadIdx.x >> 5, lane = threadIdx.x & 31u;\n  \
             const u32 v = warp >> 1, rg = warp & 1u;",
            "      case 0u: zf_rows<0u>(e, o, vw, p0, lane); break;\n      \
             default: zf_rows<16u>(e, o, vw, p0, lane); break;",
        )
    } else {
        (
            "const u32 warp = threadIdx.x >> 5, lane = threadIdx.x & 15u;\n  \
             const u32 v = ((warp >> 2) << 1) | ((threadIdx.x >> 4) & 1u), rg = warp & 3u;",
            "      case 0u: zf_rows<0u>(e, o, vw, p0, lane); break;\n      \
             case 1u: zf_rows<16u>(e, o, vw, p0, lane); break;\n      \
             case 2u: zf_rows<32u>(e, o, vw, p0, lane); break;\n      \
             default: zf_rows<48u>(e, o, vw, p0, lane); break;",
        )
    };
    let Some(h) = patched else {
        let body = format!(
            r#"  {place}
  const u32 p0 = (vec + v) * 1024u;
  if (p0 >= len) return;
  if (p0 + 1024u <= len && {w} != 0u) {{
    const {word}* __restrict__ vw = (const {word}*)(e.in + e.prm[{off}]) + (u64)(p0 >> 10) * ({lanes}u * {w}) + lane;
    switch (rg) {{
{groups}
    }}
  }} else {{
    const u32 p1 = min(p0 + 1024u, len);
    // The vector's 64 threads, numbered within it.
    for (u32 p = p0 + rg * {lanes}u + lane; p < p1; p += 64u) o[p] = zf_n0(e, p);
  }}
"#,
            off = bp.base + 1,
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

    // No thread returns early: the stores of exceptions wait for every lane's low bits.
    let body = format!(
        r#"  {place}
  // The first ZF_TILE_VECTORS warps take a vector's exceptions each: found before the low
  // bits are written (their loads overlap the other warps' unpacking), and added to them
  // after, where they lie in the output.
  const u32 hv = vec + (threadIdx.x >> 5), hl = threadIdx.x & 31u;
  const bool hw = threadIdx.x < 32u * ZF_TILE_VECTORS && hv * 1024u < len;
  u32 hj0 = 0u, hj1 = 0u, hq = ~0u;
  {word} hx = ({word})0;
  if (hw) {{
    zf_hp{h}(e, hv, hj0, hj1);
    if (hj0 + hl < hj1) hx = zf_hpx(e, hv, hj0 + hl, hj0, hq);
  }}
  const u32 p0 = (vec + v) * 1024u;
  if (p0 < len) {{
    if (p0 + 1024u <= len && {w} != 0u) {{
      const {word}* __restrict__ vw = (const {word}*)(e.in + e.prm[{off}]) + (u64)(p0 >> 10) * ({lanes}u * {w}) + lane;
      switch (rg) {{
{groups}
      }}
    }} else {{
      const u32 p1 = min(p0 + 1024u, len);
      for (u32 p = p0 + rg * {lanes}u + lane; p < p1; p += 64u) o[p] = ({t})(({word})zf_n{bpi}(e, p){add});
    }}
  }}
  __syncthreads();
  if (hw) {{
    if (hq != ~0u) atomicAdd(({word}*)(o + hq), hx);
    for (u32 j = hj0 + 32u + hl; j < hj1; j += 32u) {{
      u32 q;
      const {word} x = zf_hpx(e, hv, j, hj0, q);
      if (q != ~0u) atomicAdd(({word}*)(o + q), x);
    }}
  }}
"#,
        off = bp.base + 1,
    );
    Ok(Some((rows, body)))
}

/// The body of a tile kernel for `radix` or `for | radix`: each thread takes whole groups,
/// one or two loads for `m` values, and peels their digits with one constant division each
/// into shared memory; the block then stores its vectors in order. `None` for other shapes.
///
/// `dict` with `radix` codes keeps the value-by-value body: staged the same way (the
/// dictionary in shared memory beside the block's values) it ran 6 % slower on the H200
/// (l_quantity, 2,242 against 2,379 GB/s).
fn radix_groups_body(nodes: &[NodeSlots], kind: KernelKind) -> Result<Option<(String, String)>> {
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
    let group = radix_group(base);
    let body = format!(
        r#"  (void)vec;
  const u32 P0 = vec * 1024u, P1 = min(P0 + ZF_TILE_VECTORS * 1024u, len);
  if (P0 >= len) return;
  // radix({base}): {m} digits in {k} bits a group; the block's values staged in order.
  __shared__ {t} zf_rst[ZF_TILE_VECTORS * 1024u];
  const u32* __restrict__ w = (const u32*)(e.in + e.prm[{off}]);
  const u32 G1 = (P1 + {m}u - 1u) / {m}u;
  for (u32 g = P0 / {m}u + threadIdx.x; g < G1; g += ZF_THREADS) {{
{group}#pragma unroll
    for (u32 d = 0u; d < {m}u; ++d) {{
      const u32 q = rest / {base}u, p = g * {m}u + d;
      const u32 v = rest - q * {base}u;
      if (p >= P0 && p < P1) zf_rst[p - P0] = {value};
      rest = q;
    }}
  }}
  __syncthreads();
  for (u32 p = P0 + threadIdx.x; p < P1; p += ZF_THREADS) o[p] = zf_rst[p - P0];
"#,
        off = r.base + 1,
    );
    Ok(Some((String::new(), body)))
}

/// The lines that load group `g` of a `radix(base)` stream of 32-bit words `w` into `rest`
/// (its `k` bits, from one or two words), four spaces in.
fn radix_group(base: u32) -> String {
    let (_, k) = zipflow_encodings::radix::layout(base);
    let mask = if k == 32 { u32::MAX } else { (1u32 << k) - 1 };
    format!(
        r#"    const u64 bit = (u64)g * {k}u;
    const u32* gw = w + (bit >> 5);
    const u32 sh = (u32)bit & 31u;
    u64 x = __ldg(gw);
    if (sh + {k}u > 32u) x |= (u64)__ldg(gw + 1) << 32;
    u32 rest = (u32)(x >> sh) & {mask}u;
"#
    )
}

/// The body of a tile kernel for `dict` with bit-packed 8-, 16- or 32-bit codes and a
/// dictionary read from shared memory (`prologue` loads it): the codes are unpacked lane by
/// lane as in [`lane_body`] (rows as template constants, each word loaded once) and looked up
/// as they come. Per vector of 64 threads: 8-bit codes have 128 lanes of 8 rows (two lanes a
/// thread: neighbouring ones for 8-byte values, so a row is one 16-byte store), 16-bit codes
/// 64 lanes of 16 rows, 32-bit codes 32 lanes in two groups of 16 rows.
/// `None` for other shapes.
fn dict_lane_body(
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
// and stored as pairs (`o` + p0 16-byte aligned).
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
             zf_rows2(e, o, zf_wd, p0, lane, n);\n    \
             } else {\n      \
             zf_rows<0u, 8u>(e, o, vw, p0, lane, n);\n      \
             zf_rows<0u, 8u>(e, o, vw + 64u, p0, lane + 64u, n);\n    \
             }",
        ),
        8 => (
            "const u32 warp = threadIdx.x >> 5, v = warp >> 1;\n  \
             const u32 lane = (warp & 1u) * 32u + (threadIdx.x & 31u);",
            "    zf_rows<0u, 8u>(e, o, vw, p0, lane, n);\n    \
             zf_rows<0u, 8u>(e, o, vw + 64u, p0, lane + 64u, n);",
        ),
        16 => (
            "const u32 warp = threadIdx.x >> 5, v = warp >> 1;\n  \
             const u32 lane = (warp & 1u) * 32u + (threadIdx.x & 31u);",
            "    zf_rows<0u, 16u>(e, o, vw, p0, lane, n);",
        ),
        _ => (
            "const u32 warp = threadIdx.x >> 5, v = warp >> 1;\n  \
             const u32 lane = threadIdx.x & 31u, rg = warp & 1u;",
            "    if (rg == 0u) zf_rows<0u, 16u>(e, o, vw, p0, lane, n);\n    \
             else zf_rows<16u, 16u>(e, o, vw, p0, lane, n);",
        ),
    };
    // A full vector's code words, loaded before the dictionary's barrier (`zf_pre`).
    let early = if pairs {
        format!(
            r#"  const u32 p0 = (vec + v) * 1024u;
  const u8* const zf_vb = e.in + e.prm[{off}] + (u64)(p0 >> 10) * ({lanes}u * {w});
  const bool zf_pre = p0 + 1024u <= len && (((size_t)(o + p0)) & 15u) == 0u && (((size_t)zf_vb) & 1u) == 0u;
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
{first}{late}  if (p0 >= len) return;
  const u32 n = (u32)e.prm[{vlen}];
  if (p0 + 1024u <= len && {w} != 0u) {{
    const {word}* __restrict__ vw = (const {word}*)(e.in + e.prm[{off}]) + (u64)(p0 >> 10) * ({lanes}u * {w}) + lane;
{call}
  }} else {{
    const u32 p1 = min(p0 + 1024u, len);
    // The vector's 64 threads, numbered within it.
    for (u32 p = p0 + (threadIdx.x & 63u); p < p1; p += 64u) o[p] = zf_n0(e, p);
  }}
"#,
        off = cn.base + 1,
    );
    Ok(Some((rows, body)))
}

/// A `bitpack` node's width in generated code: a literal when the kernel is compiled for
/// it, else read from the chunk's descriptor.
fn width_expr(n: &NodeSlots) -> String {
    match n.width {
        Some(w) => format!("{w}u"),
        None => format!("(u32)e.prm[{}]", n.base + 2),
    }
}

/// The body of `radix` node `n`'s device function: digit `p % m` of group `p / m`, whose `k`
/// bits are read from two 32-bit words. The base is compiled in, so every division is a
/// multiply; the group is divided by `B^(p % m)` one bit of `p % m` at a time.
fn radix_body(n: &NodeSlots, t: &str) -> Result<String> {
    let base = n
        .width
        .filter(|b| (2..=255).contains(b))
        .ok_or_else(|| Error::corrupt("radix node without a base in 2..=255"))?;
    let (m, k) = zipflow_encodings::radix::layout(base);
    let mask = if k == 32 { u32::MAX } else { (1u32 << k) - 1 };
    let mut steps = String::new();
    let mut bit = 1u32;
    let mut power = u64::from(base);
    while bit < m {
        steps.push_str(&format!("  if (d & {bit}u) g /= {power}u;\n"));
        bit <<= 1;
        power = power.saturating_mul(power);
    }
    Ok(format!(
        "  // radix({base}): {m} digits in {k} bits a group\n  const u32 j = p / {m}u, d = p - j * {m}u;\n  const u64 bit = (u64)j * {k}u;\n  const u32* w = (const u32*)(e.in + e.prm[{off}]) + (bit >> 5);\n  const u32 sh = (u32)bit & 31u;\n  u64 x = __ldg(w);\n  if (sh + {k}u > 32u) x |= (u64)__ldg(w + 1) << 32;\n  u32 g = (u32)(x >> sh) & {mask}u;\n  (void)d;\n{steps}  return ({t})(g % {base}u);\n",
        off = n.base + 1,
    ))
}

/// Code that sets `dst[0..4]` to values `p .. p + 3` of node `c` (of C type `ct`, `p % 4 ==
/// 0`) cast to `cast`, or 0 at and past `lim`; `zf_q<c>` must be emitted.
fn load4_code(c: usize, ct: &str, p: &str, lim: &str, dst: &str, cast: &str) -> String {
    format!(
        r#"    if ({p} + 3u < {lim}) {{
      {ct} zq[4];
      zf_q{c}(e, {p}, zq);
#pragma unroll
      for (u32 i = 0u; i < 4u; ++i) {dst}[i] = ({cast})zq[i];
    }} else {{
#pragma unroll
      for (u32 i = 0u; i < 4u; ++i) {dst}[i] = {p} + i < {lim} ? ({cast})zf_n{c}(e, {p} + i) : ({cast})0;
    }}
"#
    )
}

/// The shared part of the `rle` stages: `load` reads the first tile's runs ahead (and declares
/// `nruns`, `carry`); `place` (in the loop over tiles starting at `r0`) sums the tile's
/// lengths, checks them, writes the run starts to `rs` (`ZF_RLE_TILE + 1` entries, the last
/// one the tile's end) and the values to `rv`, reads the next tile's runs ahead, and ends
/// with a barrier; `tot` is the tile's length. With `delta` (its accumulator type), each
/// run's value times its length is summed too, and `rp` holds each run's pair (base, value)
/// instead of `rv`: the base is the value before the run (`dcarry` plus the exclusive sum)
/// less the value times the run's start less one, so that position q of the run decodes to
/// base + value * q; `dtot` is the tile's total; and the runs' starts are set in the head map
/// `hd` (its first window, for `zf_rle_walk_heads`).
fn rle_tiles(
    t: &str,
    loads: impl Fn(&str) -> String,
    vlen: usize,
    delta: Option<&str>,
) -> (String, String) {
    let first = loads("threadIdx.x * ZF_RLE_ITEMS");
    let next = loads("r0 + ZF_RLE_TILE + threadIdx.x * ZF_RLE_ITEMS");
    let clear = if delta.is_some() {
        "    // The head map starts clear; each window's walk clears the words it read.
    for (u32 x = threadIdx.x; x < ZF_HEAD_BITS / 32u; x += ZF_THREADS) hd[x] = 0u;
"
    } else {
        ""
    };
    let load = format!(
        r#"    const u32 nruns = (u32)e.prm[{vlen}];
    u64 carry = 0ull;
{clear}    // Each thread's ZF_RLE_ITEMS consecutive runs of the next tile, loaded a tile ahead.
    u32 nl[ZF_RLE_ITEMS];
    {t} nv[ZF_RLE_ITEMS];
{first}"#
    );
    let (dsum, dput, dend) = match delta {
        Some(a) => (
            format!(
                r#"      {a} dl = ({a})0;
#pragma unroll
      for (u32 i = 0u; i < ZF_RLE_ITEMS; ++i) dl += ({a})nv[i] * ({a})nl[i];
      {a} dtot;
      {a} d = dcarry + zf_scan_excl<{a}>(dl, &dtot);
      // The word of the head map whose bits this thread is collecting, and the bits.
      u32 hw = 0xffffffffu, hm = 0u;
"#
            ),
            format!(
                "        // The run's base taken back to position 0, and its value: the value at
        // position q of the run is then one multiply-add, and one shared load.
        rp[threadIdx.x * ZF_RLE_ITEMS + i] = {make}(d - ({a})nv[i] * (({a})s - ({a})1), ({a})nv[i]);
        d += ({a})nv[i] * ({a})nl[i];
        if (nl[i] != 0u && s - carry < ZF_HEAD_BITS) {{
          // A thread's runs are neighbours: their heads are ORed per word, one atomic a word.
          const u32 b = (u32)(s - carry);
          if ((b >> 5) != hw) {{
            if (hm != 0u) atomicOr(hd + hw, hm);
            hw = b >> 5;
            hm = 0u;
          }}
          hm |= 1u << (b & 31u);
        }}
",
                make = if a == "u64" {
                    "make_ulonglong2"
                } else {
                    "make_uint2"
                },
            ),
            "      if (hm != 0u) atomicOr(hd + hw, hm);
",
        ),
        None => (
            String::new(),
            "        rv[threadIdx.x * ZF_RLE_ITEMS + i] = nv[i];\n".to_string(),
            "",
        ),
    };
    let place = format!(
        r#"      u64 ls = 0ull;
#pragma unroll
      for (u32 i = 0u; i < ZF_RLE_ITEMS; ++i) ls += nl[i];
      u64 tot;
      u64 s = carry + zf_scan_excl<u64>(ls, &tot);
{dsum}#pragma unroll
      for (u32 i = 0u; i < ZF_RLE_ITEMS; ++i) {{
        const u32 r = r0 + threadIdx.x * ZF_RLE_ITEMS + i;
        if (r < nruns && nl[i] == 0u) atomicOr(e.err, ZF_ERR_RLE_ZERO);
        if (s + nl[i] > n) atomicOr(e.err, ZF_ERR_RLE_SUM);
        rs[threadIdx.x * ZF_RLE_ITEMS + i] = (u32)min(s, (u64)n);
{dput}        s += nl[i];
      }}
{dend}      if (threadIdx.x == 0u) rs[ZF_RLE_TILE] = (u32)min(carry + tot, (u64)n);
      // The next tile's runs load while the block waits.
{next}      __syncthreads();
"#
    );
    (load, place)
}

struct Gen<'a> {
    nodes: &'a [NodeSlots],
    kind: KernelKind,
    /// Device functions, children before parents.
    src: String,
    /// Kernel body run once per block before its vectors (small dictionaries to shared
    /// memory), children before parents.
    prologue: String,
    /// Kernel body stages, children before parents.
    stages: String,
    /// Whether the shared `ans` decoding table is declared.
    ans_table: bool,
    /// Bytes of dynamic shared memory the stages use.
    dyn_smem: u32,
    /// Byte strings: the body of the expansion kernel (see [`strings`]).
    expand: String,
    /// Bytes of dynamic shared memory the expansion uses.
    expand_smem: u32,
    /// Bytes of dynamic shared memory the expansion with the smaller stage uses (0: none).
    expand_narrow_smem: u32,
    /// Nodes whose `zf_each<k>` (a visit of a range of values) is emitted.
    staged: Vec<usize>,
    /// Nodes whose `zf_q<k>` (four neighbouring values at once) is emitted.
    quads: Vec<usize>,
}

impl Gen<'_> {
    /// Whether node `k` or a node below it is materialised by a stage.
    fn has_stage(&self, k: usize) -> bool {
        stage_below(self.nodes, k, self.kind)
    }

    /// Where node `k`'s materialised output lives, indexed by `idx`.
    fn buf(&self, k: usize, idx: &str) -> Result<String> {
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
    fn node(&mut self, k: usize) -> Result<()> {
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
        let u = ctype(n.ptype.to_unsigned()).unwrap_or(t);
        let a = acc(n.ptype);
        let b = n.base;
        let ch = |i: usize| n.children.get(i).copied().unwrap_or(0);
        let head = format!(
            "\n// node {k}: {} ({})\n__device__ __forceinline__ {t} zf_n{k}(const Env& e, u32 p) {{\n",
            n.op.name(),
            n.ptype
        );
        let body = match n.op {
            Op::Plain => format!(
                "  return __ldg((const {t}*)(e.in + e.prm[{}]) + p);\n",
                b + 1
            ),
            Op::BitPack => format!(
                "  return ({t})zf_unpack<{u}, {a}, {bits}>((const {u}*)(e.in + e.prm[{}]), {}, p);\n",
                b + 1,
                width_expr(&n),
                bits = n.ptype.byte_width() * 8
            ),
            Op::BlockPack => format!(
                "  // Vector p / 1024: its words' offset and its width, then its reference.\n  const uint2 vt = __ldg((const uint2*)(e.in + e.prm[{tab}]) + (p >> 10));\n  const {u}* w = (const {u}*)(e.in + e.prm[{words}]) + vt.x;\n  return ({t})({u})(zf_unpack<{u}, {a}, {bits}>(w, vt.y, p & 1023u) + ({a})({u})zf_n{c}(e, p >> 10));\n",
                words = b + 1,
                tab = b + 2,
                c = ch(0),
                bits = n.ptype.byte_width() * 8
            ),
            Op::For => format!(
                "  return ({t})({u})(({a})zf_n{c}(e, p) + ({a})e.prm[{}]);\n",
                b + 1,
                c = ch(0)
            ),
            Op::ZigZag => format!(
                "  const {a} z = ({a})zf_n{c}(e, p);\n  return ({t})({u})((z >> 1) ^ (({a})0 - (z & ({a})1)));\n",
                c = ch(0)
            ),
            Op::Radix => radix_body(&n, t)?,
            Op::Constant => match n.ptype {
                PType::F32 => format!("  return __int_as_float((int)(u32)e.prm[{}]);\n", b + 1),
                PType::F64 => format!(
                    "  return __longlong_as_double((long long)e.prm[{}]);\n",
                    b + 1
                ),
                _ => format!("  return ({t})e.prm[{}];\n", b + 1),
            },
            Op::Dict if !self.has_stage(ch(1)) => {
                // A dictionary of at most `DICT_SHARED` entries is decoded once per block into
                // shared memory, so each lookup is one shared load instead of decoding its
                // entry again (a bit-unpack at a random position, for packed values).
                let (codes, values) = (ch(0), ch(1));
                let vlen = self.nodes[values].base;
                self.src
                    .push_str(&format!("\n__shared__ {t} zf_d{k}[{DICT_SHARED}];\n"));
                self.prologue.push_str(&format!(
                    "  {{ // node {k}: dict entries to shared memory\n    const u32 n = (u32)e.prm[{vlen}];\n    if (n <= {DICT_SHARED}u) for (u32 i = threadIdx.x; i < n; i += ZF_THREADS) zf_d{k}[i] = zf_n{values}(e, i);\n    __syncthreads();\n  }}\n"
                ));
                format!(
                    "  const u32 c = (u32)zf_n{codes}(e, p);\n  const u32 n = (u32)e.prm[{vlen}];\n  if (c >= n) {{ atomicOr(e.err, ZF_ERR_DICT); return ({t})0; }}\n  return n <= {DICT_SHARED}u ? zf_d{k}[c] : zf_n{values}(e, c);\n"
                )
            }
            Op::Dict => {
                let (codes, values) = (ch(0), ch(1));
                format!(
                    "  const u32 c = (u32)zf_n{codes}(e, p);\n  if (c >= (u32)e.prm[{vlen}]) {{ atomicOr(e.err, ZF_ERR_DICT); return ({t})0; }}\n  return zf_n{values}(e, c);\n",
                    vlen = self.nodes[values].base
                )
            }
            Op::Patch | Op::FloatToInt if self.kind == KernelKind::Chunk => {
                let (raw, conv) = self.before_exceptions(k)?;
                format!(
                    "  const u32 cnt = (u32)e.prm[{cnt}];\n  if (cnt != 0u) {{\n    const u32* pos = (const u32*)(e.in + e.prm[{pos}]);\n    const u32 j = zf_lower_bound(pos, cnt, p);\n    if (j < cnt && __ldg(pos + j) == p) {{\n      const {raw} x = __ldg((const {raw}*)(e.in + e.prm[{val}]) + j);\n      return {conv};\n    }}\n  }}\n  return zf_c{k}(e, p);\n",
                    cnt = b + 3,
                    pos = b + 1,
                    val = b + 2
                )
            }
            Op::StrDict | Op::Words => {
                return Err(Error::unsupported(format!(
                    "`{}` over {} values",
                    n.op.name(),
                    n.ptype
                )));
            }
            Op::Patch
            | Op::FloatToInt
            | Op::HiPatch
            | Op::Delta
            | Op::Rle
            | Op::Ans
            | Op::Fsst
            | Op::CharDict
            | Op::CharTable => {
                if n.op == Op::HiPatch {
                    self.hipatch_vector(k);
                }
                self.stage(k)?;
                format!("  return {};\n", self.buf(k, "p")?)
            }
        };
        if k == 0 && materialised(n.op, self.kind) {
            // The root's stage writes the output; nothing reads it back.
            return Ok(());
        }
        self.src.push_str(&head);
        self.src.push_str(&body);
        self.src.push_str("}\n");
        Ok(())
    }

    /// Code that sets `dst[0..4]` to values `p .. p + 3` of node `c` (`p % 4 == 0`) cast to
    /// `cast`, or 0 at and past `lim`: the four at once (`zf_q<c>`) when all are below `lim`.
    fn load4(&mut self, c: usize, p: &str, lim: &str, dst: &str, cast: &str) -> Result<String> {
        self.quad(c)?;
        Ok(load4_code(
            c,
            ctype(self.nodes[c].ptype)?,
            p,
            lim,
            dst,
            cast,
        ))
    }

    /// The loads of an `rle` tile's runs (lengths of node `runs` to `nl`, values of node
    /// `values`, of type `t`, to `nv`), for [`rle_tiles`], as a function of the first run's
    /// index.
    fn rle_loads(
        &mut self,
        t: &str,
        values: usize,
        runs: usize,
    ) -> Result<impl Fn(&str) -> String + use<>> {
        self.quad(runs)?;
        self.quad(values)?;
        let (rt, vt) = (
            ctype(self.nodes[runs].ptype)?,
            ctype(self.nodes[values].ptype)?,
        );
        let t = t.to_string();
        Ok(move |r: &str| {
            format!(
                "{}{}",
                load4_code(runs, rt, r, "nruns", "nl", "u32"),
                load4_code(values, vt, r, "nruns", "nv", &t)
            )
        })
    }

    /// Emits `zf_q<k>(e, p, v)` once and returns its name: values `p .. p + 3` of node `k`
    /// (`p % 4 == 0`, all four within the node) into `v[0..4]`. Bit-packed values are four
    /// neighbouring lanes of one row, so their position is computed once; `for` and a
    /// dictionary in shared memory map their children's four; other nodes read value by
    /// value. Called after `zf_n<k>` is emitted.
    fn quad(&mut self, k: usize) -> Result<String> {
        let name = format!("zf_q{k}");
        if self.quads.contains(&k) {
            return Ok(name);
        }
        let n = self.nodes[k].clone();
        let t = ctype(n.ptype)?;
        let u = ctype(n.ptype.to_unsigned()).unwrap_or(t);
        let a = acc(n.ptype);
        let b = n.base;
        let each = |f: &str| format!("#pragma unroll\n  for (u32 i = 0u; i < 4u; ++i) {f}\n");
        let body = match n.op {
            Op::BitPack => format!(
                "  {a} x[4];\n  zf_unpack4<{u}, {a}, {bits}>((const {u}*)(e.in + e.prm[{}]), {}, p, x);\n{}",
                b + 1,
                width_expr(&n),
                each(&format!("v[i] = ({t})x[i];")),
                bits = n.ptype.byte_width() * 8
            ),
            Op::For => {
                let c = n.children[0];
                let q = self.quad(c)?;
                let ct = ctype(self.nodes[c].ptype)?;
                format!(
                    "  {ct} c[4];\n  {q}(e, p, c);\n{}",
                    each(&format!(
                        "v[i] = ({t})({u})(({a})c[i] + ({a})e.prm[{}]);",
                        b + 1
                    ))
                )
            }
            Op::Dict if !self.has_stage(n.children[1]) => {
                let (codes, values) = (n.children[0], n.children[1]);
                let q = self.quad(codes)?;
                let ct = ctype(self.nodes[codes].ptype)?;
                format!(
                    "  {ct} c[4];\n  {q}(e, p, c);\n  const u32 n = (u32)e.prm[{vlen}];\n{}",
                    each(&format!(
                        "{{\n    const u32 ci = (u32)c[i];\n    if (ci >= n) {{ atomicOr(e.err, ZF_ERR_DICT); v[i] = ({t})0; }}\n    else v[i] = n <= {DICT_SHARED}u ? zf_d{k}[ci] : zf_n{values}(e, ci);\n  }}"
                    )),
                    vlen = self.nodes[values].base
                )
            }
            _ => each(&format!("v[i] = zf_n{k}(e, p + i);")),
        };
        self.quads.push(k);
        self.src.push_str(&format!(
            "\n// node {k}: values p .. p + 3 (p % 4 == 0)\n__device__ __forceinline__ void {name}(const Env& e, u32 p, {t}* v) {{\n{body}}}\n"
        ));
        Ok(name)
    }

    /// Emits `zf_c<k>`, the values of `patch`/`float2int` node `k` before exceptions, and
    /// returns the exception values' raw type and the expression converting one (`x`).
    fn before_exceptions(&mut self, k: usize) -> Result<(&'static str, String)> {
        let n = self.nodes[k].clone();
        let t = ctype(n.ptype)?;
        let c = n.children.first().copied().unwrap_or(0);
        let scale = n.base + 4;
        let (compute, raw, conv) = match (n.op, n.ptype) {
            (Op::Patch, _) => (format!("return zf_n{c}(e, p);"), t, "x".to_string()),
            (_, PType::F64) => (
                format!(
                    "return (f64)zf_n{c}(e, p) / __longlong_as_double((long long)e.prm[{scale}]);"
                ),
                "u64",
                "__longlong_as_double((long long)x)".to_string(),
            ),
            _ => (
                format!(
                    "return (f32)((f64)zf_n{c}(e, p) / __longlong_as_double((long long)e.prm[{scale}]));"
                ),
                "u32",
                "__int_as_float((int)x)".to_string(),
            ),
        };
        self.src.push_str(&format!(
            "\n// node {k}: {} ({}) before exceptions\n__device__ __forceinline__ {t} zf_c{k}(const Env& e, u32 p) {{ {compute} }}\n",
            n.op.name(),
            n.ptype
        ));
        Ok((raw, conv))
    }

    /// Emits `zf_hp<k>(e, v, j0, j1)`: the exceptions `[j0, j1)` of vector `v` of `hipatch`
    /// node `k`, found by summing the counts before it across a warp (every lane calls it),
    /// checked against the node's exception count.
    /// Also `zf_hpq<k>(e, v, j, j0)`: exception `j`'s position, or `~0u` (and an error) when
    /// its offset is outside its vector, past the end, or not after the one before it.
    fn hipatch_vector(&mut self, k: usize) {
        let n = &self.nodes[k];
        let (b, counts, offsets) = (n.base, n.children[1], n.children[2]);
        self.src.push_str(&format!(
            r#"
// node {k}: hipatch: the exceptions [j0, j1) of vector v; every lane of the warp calls it.
__device__ __forceinline__ void zf_hp{k}(const Env& e, u32 v, u32& j0, u32& j1) {{
  const u32 lane = threadIdx.x & 31u, cnt = (u32)e.prm[{cnt}], n = (u32)e.prm[{b}];
  u32 s = 0u;
  for (u32 i = lane; i < v; i += 32u) s += (u32)zf_n{counts}(e, i);
#pragma unroll
  for (u32 d = 16u; d > 0u; d >>= 1) s += __shfl_xor_sync(0xffffffffu, s, d);
  const u32 end = s + (u32)zf_n{counts}(e, v);
  const bool last = v + 1u == (n + 1023u) >> 10;
  if (lane == 0u && (end > cnt || end < s || (last && end != cnt))) atomicOr(e.err, ZF_ERR_PATCH);
  j1 = min(end, cnt);
  j0 = min(s, j1);
}}

// node {k}: hipatch: the position of exception j (of vector v, whose first is j0), or ~0u.
__device__ __forceinline__ u32 zf_hpq{k}(const Env& e, u32 v, u32 j, u32 j0) {{
  const u32 off = (u32)zf_n{offsets}(e, j), q = v * 1024u + off;
  if (off >= 1024u || q >= (u32)e.prm[{b}] || (j > j0 && off <= (u32)zf_n{offsets}(e, j - 1u))) {{
    atomicOr(e.err, ZF_ERR_PATCH);
    return ~0u;
  }}
  return q;
}}
"#,
            cnt = b + 2,
        ));
    }

    /// Code that ORs the exceptions of vector `v` of `hipatch` node `k` into `slot` (a place
    /// indexed by `q`, the exception's position), run by one whole warp.
    fn hipatch_apply(&self, k: usize, slot: &str) -> Result<String> {
        let n = &self.nodes[k];
        let t = ctype(n.ptype)?;
        let a = acc(n.ptype);
        let high = n.children[3];
        Ok(format!(
            r#"      u32 j0, j1;
      zf_hp{k}(e, v, j0, j1);
      const u32 W = (u32)e.prm[{w}];
      for (u32 j = j0 + (threadIdx.x & 31u); j < j1; j += 32u) {{
        const u32 q = zf_hpq{k}(e, v, j, j0);
        if (q == ~0u) continue;
        const {a} h = ({a})zf_n{high}(e, j) << W;
        {slot} = ({t})(((({a}){slot}) | h));
      }}
"#,
            w = n.base + 1,
        ))
    }

    /// Emits the stage that materialises node `k`.
    /// The stage of a root `delta` (node `k`) over `rle` (node `rle`): the value at output
    /// position `q` in run `j` (starting at `s_j`, value `v_j`) is the delta's base plus the
    /// sum of `v * length` over the runs before `j`, plus `v_j * (q - s_j + 1)`. So both
    /// decode in one pass over run tiles, as `rle` alone does, with a second sum over the
    /// runs, and no buffer in between.
    fn delta_rle_stage(&mut self, k: usize, rle: usize) -> Result<String> {
        let n = &self.nodes[k];
        let r = &self.nodes[rle];
        let t = ctype(n.ptype)?;
        let u = ctype(n.ptype.to_unsigned()).unwrap_or(t);
        let a = acc(n.ptype);
        let (values, runs) = (r.children[0], r.children[1]);
        let loads = self.rle_loads(t, values, runs)?;
        let (load, place) = rle_tiles(t, loads, self.nodes[values].base, Some(a));
        Ok(format!(
            r#"  {{ // node {k}: delta over rle (node {rle}), in one pass over run tiles: each run's first
    // value from an exclusive sum of value * length, then each output position of the tile
    // (coalesced) from its run's, the runs counted from a map of where they start
    __shared__ u32 zf_rs{k}[ZF_RLE_TILE + 1u];
    __shared__ {pair} zf_rp{k}[ZF_RLE_TILE];
    __shared__ u32 zf_hd{k}[ZF_HEAD_BITS / 32u];
    u32* const rs = zf_rs{k};
    u32* const hd = zf_hd{k};
    {pair}* const rp = zf_rp{k};
    const u32 n = (u32)e.prm[{len}];
    {a} dcarry = ({a})e.prm[{base}];
{load}    for (u32 r0 = 0u; r0 < nruns; r0 += ZF_RLE_TILE) {{
{place}      zf_rle_walk_heads(rs, hd, rs[0], rs[ZF_RLE_TILE], [&](u32 q, u32 j) {{
        const {pair} bv = rp[j];
        o[q] = ({t})({u})(bv.x + bv.y * ({a})q);
      }});
      carry += tot;
      dcarry += dtot;
      __syncthreads();
    }}
    if (threadIdx.x == 0u && carry != n) atomicOr(e.err, ZF_ERR_RLE_SUM);
    __syncthreads();
  }}
"#,
            len = self.nodes[rle].base,
            base = n.base + 1,
            pair = if a == "u64" { "ulonglong2" } else { "uint2" },
        ))
    }

    fn stage(&mut self, k: usize) -> Result<()> {
        let n = self.nodes[k].clone();
        let t = ctype(n.ptype)?;
        let u = ctype(n.ptype.to_unsigned()).unwrap_or(t);
        let a = acc(n.ptype);
        let b = n.base;
        let ch = |i: usize| n.children.get(i).copied().unwrap_or(0);
        let (s0, s1) = match self.kind {
            KernelKind::Tile => ("p0".to_string(), "p1".to_string()),
            KernelKind::Chunk => ("0u".to_string(), format!("(u32)e.prm[{b}]")),
        };
        if self.kind == KernelKind::Tile && k > 0 {
            self.src
                .push_str(&format!("\n__shared__ {t} zf_m{k}[1024];\n"));
        }
        let st = match n.op {
            Op::Patch | Op::FloatToInt => {
                let (raw, conv) = self.before_exceptions(k)?;
                format!(
                    r#"  {{ // node {k}: {name}: child values, then exceptions
    const u32 s0 = {s0}, s1 = {s1};
    for (u32 p = s0 + threadIdx.x; p < s1; p += ZF_THREADS) {bp} = zf_c{k}(e, p);
    __syncthreads();
    const u32* pos = (const u32*)(e.in + e.prm[{pos}]);
    const {raw}* val = (const {raw}*)(e.in + e.prm[{val}]);
    const u32 cnt = (u32)e.prm[{cnt}];
    for (u32 j = zf_lower_bound(pos, cnt, s0) + threadIdx.x; j < cnt; j += ZF_THREADS) {{
      const u32 q = __ldg(pos + j);
      if (q >= s1) break;
      const {raw} x = __ldg(val + j);
      {bq} = {conv};
    }}
    __syncthreads();
  }}
"#,
                    name = n.op.name(),
                    bp = self.buf(k, "p")?,
                    bq = self.buf(k, "q")?,
                    pos = b + 1,
                    val = b + 2,
                    cnt = b + 3,
                )
            }
            Op::HiPatch => format!(
                r#"  {{ // node {k}: hipatch: the low bits, then each vector's exceptions ORed in
    const u32 s0 = {s0}, s1 = {s1};
    for (u32 p = s0 + threadIdx.x; p < s1; p += ZF_THREADS) {bp} = zf_n{low}(e, p);
    __syncthreads();
    for (u32 v = (s0 >> 10) + (threadIdx.x >> 5); v < (s1 + 1023u) >> 10; v += ZF_THREADS / 32u) {{
{apply}    }}
    __syncthreads();
  }}
"#,
                bp = self.buf(k, "p")?,
                low = ch(0),
                apply = self.hipatch_apply(k, &self.buf(k, "q")?)?,
            ),
            Op::Delta => format!(
                r#"  {{ // node {k}: delta: wrapping prefix sum over the chunk, tile by tile
    const u32 n = (u32)e.prm[{b}];
    const u32 lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    {a} carry = ({a})e.prm[{base}];
    // Each thread sums ZF_DELTA_ITEMS consecutive values in registers; one warp scan of the
    // threads' sums and the warps' totals give each thread its offset. The tile goes out
    // through shared memory in coalesced rows; both shared arrays alternate between two
    // halves, so the next tile needs no barrier before it writes them.
    __shared__ {a} zf_w2{k}[2u * (ZF_THREADS / 32u)];
    __shared__ {a} zf_st{k}[2u * ZF_THREADS * ZF_DELTA_ITEMS];
    u32 half = 0u;
    // The next tile's differences are read before this tile's second barrier, so their
    // loads overlap the wait.
    {a} nx[ZF_DELTA_ITEMS];
{first}
    for (u32 t0 = 0u; t0 < n; t0 += ZF_THREADS * ZF_DELTA_ITEMS) {{
      const u32 first = t0 + threadIdx.x * ZF_DELTA_ITEMS;
      {a} v[ZF_DELTA_ITEMS];
      {a} run = ({a})0;
#pragma unroll
      for (u32 i = 0u; i < ZF_DELTA_ITEMS; ++i) {{
        run += nx[i];
        v[i] = run;
      }}
      {a} x = run;
#pragma unroll
      for (u32 d = 1u; d < 32u; d <<= 1) {{
        const {a} y = __shfl_up_sync(0xffffffffu, x, d);
        if (lane >= d) x += y;
      }}
      {a}* wt = zf_w2{k} + half * (ZF_THREADS / 32u);
      {a}* st = zf_st{k} + half * (ZF_THREADS * ZF_DELTA_ITEMS);
      if (lane == 31u) wt[warp] = x;
      __syncthreads();
      {a} off = x - run, tot = ({a})0;
      for (u32 w = 0u; w < ZF_THREADS / 32u; ++w) {{
        const {a} t = wt[w];
        if (w < warp) off += t;
        tot += t;
      }}
      off += carry;
#pragma unroll
      for (u32 i = 0u; i < ZF_DELTA_ITEMS; ++i) {{
        st[threadIdx.x * ZF_DELTA_ITEMS + i] = off + v[i];
      }}
{next}      __syncthreads();
#pragma unroll
      for (u32 i = 0u; i < ZF_DELTA_ITEMS; ++i) {{
        const u32 p = t0 + i * ZF_THREADS + threadIdx.x;
        if (p < n) {bi} = ({t})({u})st[i * ZF_THREADS + threadIdx.x];
      }}
      carry += tot;
      half ^= 1u;
    }}
    __syncthreads();
  }}
"#,
                base = b + 1,
                bi = self.buf(k, "p")?,
                first = self.load4(ch(0), "threadIdx.x * ZF_DELTA_ITEMS", "n", "nx", a)?,
                next = self.load4(ch(0), "(first + ZF_THREADS * ZF_DELTA_ITEMS)", "n", "nx", a)?,
            ),
            Op::Rle => {
                let (values, runs) = (ch(0), ch(1));
                let loads = self.rle_loads(t, values, runs)?;
                let (load, place) = rle_tiles(t, loads, self.nodes[values].base, None);
                format!(
                    r#"  {{ // node {k}: rle: run tiles of ZF_RLE_ITEMS runs per thread; an exclusive sum of
    // their lengths places them, then each warp walks its share of the tile's output
    // positions 32 at a time (coalesced), finding their runs from the tile's run starts
    __shared__ u32 zf_rs{k}[ZF_RLE_TILE + 1u];
    __shared__ {t} zf_rv{k}[ZF_RLE_TILE];
    u32* const rs = zf_rs{k};
    {t}* const rv = zf_rv{k};
    const u32 n = (u32)e.prm[{b}];
{load}    for (u32 r0 = 0u; r0 < nruns; r0 += ZF_RLE_TILE) {{
{place}      zf_rle_walk(rs, rs[0], rs[ZF_RLE_TILE], [&](u32 q, u32 j) {{ {bq} = rv[j]; }});
      carry += tot;
      __syncthreads();
    }}
    if (threadIdx.x == 0u && carry != n) atomicOr(e.err, ZF_ERR_RLE_SUM);
    __syncthreads();
  }}
"#,
                    bq = self.buf(k, "q")?,
                )
            }
            Op::Ans => self.ans_stage(k)?,
            Op::CharDict | Op::CharTable => format!(
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
            ),
            Op::Fsst => {
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
            }
            _ => {
                return Err(Error::unsupported(format!(
                    "`{}` is not a materialised primitive",
                    n.op.name()
                )));
            }
        };
        self.stages.push_str(&st);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zipflow_core::{IntVec, Plan, Values};
    use zipflow_encodings::{NodeView, encode};

    fn shape_of(plan: &str, values: &Values) -> Shape {
        let plan: Plan = plan.parse().unwrap_or_else(|e| panic!("{plan}: {e}"));
        let node = encode(&plan, values).unwrap_or_else(|e| panic!("{plan}: {e}"));
        let bytes = node.to_bytes().unwrap_or_else(|e| panic!("{e}"));
        let view = NodeView::parse(&bytes).unwrap_or_else(|e| panic!("{e}"));
        Shape::of(&view).unwrap_or_else(|e| panic!("{plan}: {e}"))
    }

    fn ints() -> Values {
        Values::Int(IntVec::I64(
            (0..3000).map(|i| (i * 7919) % 1000 - 300).collect(),
        ))
    }

    #[test]
    fn narrow_bitpacked_tiles_decode_lane_by_lane() {
        let v = Values::Int(IntVec::I32(
            (0..5000).map(|i| 8036 + (i * 7919) % 2526).collect(),
        ));
        for plan in ["for | bitpack", "bitpack"] {
            let k = generate(&shape_of(plan, &v)).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(k.kind, KernelKind::Tile);
            assert!(
                k.source
                    .contains("o[p0 + (row & 7u) * 128u + fl * 16u + lane]"),
                "{plan}"
            );
        }
        // 64-bit words: 16 lanes, four row groups per vector.
        let k = generate(&shape_of("for | bitpack", &ints())).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            k.source
                .contains("const u32 warp = threadIdx.x >> 5, lane = threadIdx.x & 15u;")
        );
        assert!(k.source.contains("u64 cur = __ldg(vw + 16u * k);"));
        assert!(
            k.source
                .contains("default: zf_rows<48u>(e, o, vw, p0, lane);")
        );
        assert!(
            k.source
                .contains("o[p0 + (row & 7u) * 128u + fl * 16u + lane]")
        );
        // Other shapes keep the per-position loop.
        let k = generate(&shape_of("zigzag | bitpack", &ints())).unwrap_or_else(|e| panic!("{e}"));
        assert!(!k.source.contains("fl * 16u + lane"));
    }

    #[test]
    fn small_dictionaries_are_read_from_shared_memory() {
        let v = Values::Int(IntVec::I64(
            (0..5000).map(|i| 1000 + (i % 50) * 7).collect(),
        ));
        let k = generate(&shape_of("dict(codes: bitpack, values: for | bitpack)", &v))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(k.kind, KernelKind::Tile);
        assert!(k.source.contains("__shared__ i64 zf_d0[1024]"));
        // Filled once per block, before the codes are unpacked lane by lane and looked up.
        let fill = k.source.find("zf_d0[i] = zf_n2(e, i)");
        let lanes = k.source.find("zf_rows<0u, 8u>(e, o, vw, p0, lane, n)");
        assert!(fill.is_some() && lanes.is_some() && fill < lanes);
        assert!(k.source.contains("? zf_d0[c] : zf_n2(e, c)"));
        // The second lane of each thread's pair.
        assert!(
            k.source
                .contains("zf_rows<0u, 8u>(e, o, vw + 64u, p0, lane + 64u, n)")
        );
        // Aligned, byte codes of 8-byte values go two neighbouring lanes a thread: one 16-bit
        // load a word, one 16-byte store a row, the words loaded before the dictionary's
        // barrier.
        assert!(k.source.contains("zf_rows2(e, o, zf_wd, p0, lane, n);"));
        let load = k.source.find("if (zf_pre) zf_load2(zf_vb, lane, zf_wd);");
        let barrier = k.source[fill.unwrap_or(0)..].find("__syncthreads();");
        assert!(load.is_some() && load < fill && barrier.is_some());
        assert!(
            k.source
                .contains("*(ulonglong2*)(o + p0 + i * 128u + 2u * m) = pr.u;")
        );
        // Values that need a stage keep the per-lookup path.
        let runs = Values::Int(IntVec::I64((0..5000).map(|i| i / 100).collect()));
        let k = generate(&shape_of("dict(codes: bitpack, values: rle)", &runs))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(!k.source.contains("zf_d0"));
    }

    #[test]
    fn for_bitpack_is_one_fused_tile_kernel() {
        let k = generate(&shape_of("for | bitpack", &ints())).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(k.kind, KernelKind::Tile);
        assert_eq!(k.key, "for:i64(bitpack(10):u64)");
        // The width is compiled in, not read from the descriptor.
        assert!(k.source.contains("e.prm[4]), 10u, p)"));
        assert!(k.source.contains("extern \"C\" __global__"));
        assert!(k.source.contains("zf_decode("));
        assert!(k.source.contains("zf_unpack<u64, u64, 64>"));
        // Fused: the root's value is written straight from the expression, no buffer.
        assert!(k.source.contains("o[p] = zf_n0(e, p)"));
        assert!(!k.source.contains("__shared__ i64 zf_m"));
        assert_eq!(k.threads, TILE_THREADS);
        // out offset, for: len + reference, bitpack: len + offset + width.
        assert_eq!(k.nparams, 1 + 2 + 3);
        assert_eq!(k.nodes[1].base, 3);
        assert_eq!(k.source.matches("#define ZF_NPRM 6").count(), 1);
    }

    #[test]
    fn other_tile_shapes_use_the_unrolled_generic_body() {
        let k = generate(&shape_of("zigzag | for | bitpack", &ints()))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(k.threads, TILE_THREADS);
        assert!(k.source.contains("o[p] = zf_n0(e, p)"));
        assert!(
            k.source
                .contains("#pragma unroll\n    for (u32 i = 0u; i < 1024u / ZF_THREADS")
        );
        // Dictionary codes of every width go lane by lane.
        let k = generate(&shape_of(
            "dict(codes: bitpack, values: for | bitpack)",
            &ints(),
        ))
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(k.source.contains("zf_rows<0u, 16u>(e, o, vw, p0, lane, n)"));
        let wide = Values::Int(IntVec::I64((0..200_000).map(|i| i * 3).collect()));
        let k = generate(&shape_of("dict(codes: bitpack, values: plain)", &wide))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(
            k.source
                .contains("else zf_rows<16u, 16u>(e, o, vw, p0, lane, n)")
        );
    }

    #[test]
    fn every_primitive_has_its_code_path() {
        let f: Values = Values::F64((0..3000).map(|i| f64::from(i) * 0.25 + 0.01).collect());
        let cases = [
            ("plain", ints(), "__ldg((const i64*)"),
            (
                "bitpack",
                Values::Int(IntVec::U16((0..3000).collect())),
                "zf_unpack<u16, u32, 16>",
            ),
            ("zigzag | bitpack", ints(), "(z >> 1) ^"),
            (
                "constant",
                Values::Int(IntVec::U8(vec![7; 100])),
                "return (u8)e.prm[",
            ),
            (
                "dict(codes: bitpack, values: for | bitpack)",
                ints(),
                "ZF_ERR_DICT",
            ),
            (
                "for | patch | bitpack",
                ints(),
                "zf_lower_bound(pos, cnt, s0)",
            ),
            (
                "delta | for | bitpack",
                ints(),
                "if (lane == 31u) wt[warp] = x;",
            ),
            (
                "rle(values: for | bitpack, runs: for | bitpack)",
                ints(),
                "ZF_ERR_RLE_SUM",
            ),
            (
                "float2int | for | bitpack",
                f,
                "__longlong_as_double((long long)x)",
            ),
        ];
        for (plan, values, needle) in cases {
            let k = generate(&shape_of(plan, &values)).unwrap_or_else(|e| panic!("{plan}: {e}"));
            assert!(
                k.source.contains(needle),
                "{plan}: no `{needle}` in\n{}",
                k.source
            );
        }
    }

    /// Values below 2^20 with one in 32 spilling one bit past them.
    fn spilled() -> Values {
        Values::Int(IntVec::I64(
            (0..5000)
                .map(|i| 1000 + (i * 7919) % (1 << 20) + if i % 32 == 5 { 1 << 20 } else { 0 })
                .collect(),
        ))
    }

    #[test]
    fn hipatch_roots_decode_lane_by_lane_and_add_exceptions_high_bits() {
        for (plan, low, reference) in [
            ("hipatch | bitpack", "zf_n1(e, p)", false),
            (
                "for | hipatch | bitpack",
                "zf_n2(e, p) + (u64)e.prm[2]",
                true,
            ),
        ] {
            let k = generate(&shape_of(plan, &spilled())).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(k.kind, KernelKind::Tile, "{plan}");
            let src = &k.source;
            assert!(
                src.contains("default: zf_rows<48u>(e, o, vw, p0, lane);"),
                "{plan}"
            );
            // Partial vectors take the low bits alone; no thread leaves before the barrier.
            assert!(src.contains(low), "{plan}: no `{low}` in\n{src}");
            assert!(!src.contains("if (p0 >= len) return;"), "{plan}");
            // Exceptions found before the low bits, their high bits added after the barrier.
            let (before, after) = src
                .split_once("  __syncthreads();\n  if (hw) {")
                .unwrap_or_else(|| panic!("{plan}: no exception stores in\n{src}"));
            let hp = if reference { 1 } else { 0 };
            let found = before
                .find(&format!("zf_hp{hp}(e, hv, hj0, hj1);"))
                .unwrap_or_else(|| panic!("{plan}: exceptions not found first"));
            assert!(found < before.find("switch (rg)").unwrap_or(0), "{plan}");
            assert!(
                after.contains("if (hq != ~0u) atomicAdd((u64*)(o + hq), hx);"),
                "{plan}"
            );
            let full = if reference {
                "return (u64)zf_n5(e, j) << (u32)e.prm[4];"
            } else {
                "return (u64)zf_n4(e, j) << (u32)e.prm[2];"
            };
            assert!(src.contains(full), "{plan}: no `{full}` in\n{src}");
            // Counts summed across the warp; offsets checked in order.
            assert!(
                src.contains("s += __shfl_xor_sync(0xffffffffu, s, d);"),
                "{plan}"
            );
            assert!(src.contains("atomicOr(e.err, ZF_ERR_PATCH);"), "{plan}");
        }
    }

    #[test]
    fn hipatch_elsewhere_is_a_stage() {
        // Under `zigzag` in a tile: low bits to shared memory, then one warp's exceptions.
        let k = generate(&shape_of("zigzag | hipatch | bitpack", &spilled()))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(k.kind, KernelKind::Tile);
        assert!(
            k.source.contains("__shared__ u64 zf_m1[1024]"),
            "{}",
            k.source
        );
        assert!(
            k.source.contains("zf_m1[(p) & 1023u] = zf_n2(e, p);"),
            "{}",
            k.source
        );
        assert!(
            k.source
                .contains("zf_m1[(q) & 1023u] = (u64)((((u64)zf_m1[(q) & 1023u]) | h));")
        );
        // Under `delta`: a chunk kernel with the low bits in scratch.
        let k = generate(&shape_of("delta | hipatch | bitpack", &spilled()))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(k.kind, KernelKind::Chunk);
        assert!(k.nodes[1].scratch.is_some());
        assert!(
            k.source
                .contains("v < (s1 + 1023u) >> 10; v += ZF_THREADS / 32u")
        );
        // Side streams that need a stage are read at exception positions: a chunk kernel.
        let k = generate(&shape_of("hipatch(counts: rle) | bitpack", &spilled()))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(k.kind, KernelKind::Chunk);
    }

    #[test]
    fn short_strings_take_the_expansion_with_the_smaller_stage() {
        // l_shipmode's 4.3 bytes a row fit it, l_shipinstruct's 12.6 do not.
        assert!(strings::fits_narrow_stage(65_536, 65_536 * 43 / 10));
        assert!(!strings::fits_narrow_stage(65_536, 65_536 * 126 / 10));
        assert!(strings::fits_narrow_stage(0, 0));
        assert!(!strings::fits_narrow_stage(1, u64::from(u32::MAX)));
        // The edge: an average tile with a quarter more fills the stage, less 16 bytes.
        let edge = u64::from(strings::STAGE_BYTES_NARROW_STRINGS - 16) * 4 / 5;
        assert!(strings::fits_narrow_stage(4096, edge));
        assert!(!strings::fits_narrow_stage(4096, edge + 1));
        // A `strdict` gets it when its codes' encoding stays below 2^16; entries of one
        // length, codes that could pass 2^16 and `words` roots do not.
        let short = byte_strings((0..3000).map(|i| format!("s{}", "x".repeat(i % 9)).into_bytes()));
        for (plan, values, has) in [
            ("strdict(codes: radix)", &short, true),
            ("strdict(codes: bitpack)", &short, true),
            ("strdict(codes: ans)", &short, false),
            ("strdict(codes: plain)", &short, false),
            ("words(codes: bitpack, counts: bitpack)", &texts(), false),
        ] {
            let k = generate(&shape_of(plan, values)).unwrap_or_else(|e| panic!("{plan}: {e}"));
            assert_eq!(k.expand_narrow_smem > 0, has, "{plan}");
            assert_eq!(
                k.source.contains(strings::EXPAND_NARROW_NAME),
                has,
                "{plan}"
            );
            let code_t = if has {
                "zf_code_t"
            } else if plan.starts_with("words") {
                "u16"
            } else {
                "u32"
            };
            assert!(
                k.source.contains(&format!("#define ZF_CODE_T {code_t}")),
                "{plan}"
            );
        }
        let ones = byte_strings((0..3000).map(|i| vec![b'a' + (i % 3) as u8]));
        let k =
            generate(&shape_of("strdict(codes: radix)", &ones)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(k.expand_narrow_smem, 0);
    }

    #[test]
    fn strings_of_one_length_expand_row_by_row() {
        let mut b = zipflow_core::values::ByteStrings::default();
        b.offsets.push(0);
        for i in 0..5000u64 {
            b.data.push(b"ANR"[(i % 3) as usize]);
            b.offsets.push(b.data.len() as u64);
        }
        let flags = Values::Bytes(b);
        for plan in ["strdict(codes: radix)", "strdict(codes: bitpack)"] {
            let shape = shape_of(plan, &flags);
            assert!(
                shape.key().contains("for:u32(bitpack(0):u32)"),
                "{}",
                shape.key()
            );
            let k = generate(&shape).unwrap_or_else(|e| panic!("{plan}: {e}"));
            for needle in [
                "tab[2u * s + 1u] = (u32)min((u64)r * L, (u64)claimed);",
                "const u64 g = at + (u64)r * L;",
                "((u32*)o)[r] = (u32)(at + (u64)r * L);",
                "const u8* const src = zf_sdict + zf_dsh",
            ] {
                assert!(k.source.contains(needle), "{plan}: no `{needle}`");
            }
            // No sums over the rows' lengths, and no shared memory for token positions or
            // staged codes.
            assert!(!k.source.contains("zf_scan_excl<u64>(b, &bt)"), "{plan}");
            assert!(
                k.source
                    .contains("#define zf_scode ((ZF_CODE_T*)((u32*)zf_dyn + ZF_STR_OFFS + 0u))")
            );
            assert_eq!(k.segment_rows, strings::SEGMENT_ROWS_FIXED, "{plan}");
        }
        // Radix codes are peeled a group at a time.
        let k =
            generate(&shape_of("strdict(codes: radix)", &flags)).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            k.source.contains("u32 rest = (u32)(x >> sh)"),
            "{}",
            k.source
        );
        // One-byte entries: looked up in registers, unchecked where the codes' encoding
        // cannot pass the dictionary (a base of 3, two bits), whole groups and items
        // without bounds checks; three blocks a multiprocessor.
        for (plan, domain, split) in [
            ("strdict(codes: radix)", "3u <= zf_m", "if (SPLIT && g * "),
            (
                "strdict(codes: bitpack)",
                "4u <= zf_m",
                "const bool whole = SPLIT && base >= first",
            ),
        ] {
            let k = generate(&shape_of(plan, &flags)).unwrap_or_else(|e| panic!("{e}"));
            for needle in [
                domain,
                split,
                "st[i] = (u8)zf_pick8(dl, dh, c);",
                "zf_each1<true>(e,",
                "__launch_bounds__(ZF_THREADS, 1536 / ZF_THREADS)\nzf_expand",
            ] {
                assert!(k.source.contains(needle), "{plan}: no `{needle}`");
            }
        }
        // Other codes (here `for` over bit-packing) are always checked.
        let k = generate(&shape_of("strdict(codes: for | bitpack)", &flags))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(k.source.contains(" <= 8u && false;"));
        // Entries of several lengths keep the general expansion.
        let k = generate(&shape_of("strdict(codes: bitpack)", &texts()))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(!k.source.contains("const u64 g = at + (u64)r * L;"));
    }

    #[test]
    fn fsst_pieces_decode_a_thread_each_in_the_first_kernel() {
        for plan in [
            "plain(bytes: fsst)",
            "words(dict: plain(bytes: fsst(codes: ans)))",
        ] {
            let k = generate(&shape_of(plan, &texts())).unwrap_or_else(|e| panic!("{plan}: {e}"));
            let (first, _) = k
                .source
                .split_once(strings::EXPAND_NAME)
                .unwrap_or_else(|| panic!("{plan}: no expansion kernel"));
            for needle in [
                "__shared__ u64 zf_fs",
                "const u32 np = (u32)(((u64)n + (1ull << lg) - 1ull) >> lg);",
                "if (l == 0u || pos + l > o1) { bad = true; break; }",
                "if (bad || pos != o1) atomicOr(e.err, ZF_ERR_FSST);",
            ] {
                assert!(first.contains(needle), "{plan}: no `{needle}` in\n{first}");
            }
            assert!(
                k.nodes
                    .iter()
                    .any(|n| n.op == Op::Fsst && n.scratch.is_some()),
                "{plan}"
            );
        }
    }

    #[test]
    fn radix_divides_by_constant_powers_of_its_base() {
        let v = Values::Int(IntVec::U8((0..5000).map(|i| (i * 7 % 3) as u8).collect()));
        let shape = shape_of("radix", &v);
        assert_eq!(shape.key(), "radix(3):u8");
        let k = generate(&shape).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(k.kind, KernelKind::Tile);
        for needle in [
            "const u32 j = p / 17u, d = p - j * 17u;",
            "const u64 bit = (u64)j * 27u;",
            "if (sh + 27u > 32u)",
            "u32 g = (u32)(x >> sh) & 134217727u;",
            "if (d & 1u) g /= 3u;",
            "if (d & 16u) g /= 43046721u;",
            "return (u8)(g % 3u);",
        ] {
            assert!(k.source.contains(needle), "no `{needle}` in\n{}", k.source);
        }
        assert!(!k.source.contains("if (d & 32u)"));
        let k = generate(&shape_of("dict(codes: radix, values: plain)", &v))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(!k.source.contains("zf_rst"));
        // At the root, alone, under `for` or as a dictionary's codes, a thread takes whole
        // groups and the block stores its values in order.
        for (plan, store) in [
            ("radix", "zf_rst[p - P0] = v;"),
            (
                "for | radix",
                "zf_rst[p - P0] = (u8)((u32)v + (u32)e.prm[2]);",
            ),
        ] {
            let k = generate(&shape_of(plan, &v)).unwrap_or_else(|e| panic!("{plan}: {e}"));
            for needle in [
                store,
                "const u32 q = rest / 3u, p = g * 17u + d;",
                "o[p] = zf_rst[p - P0];",
            ] {
                assert!(
                    k.source.contains(needle),
                    "{plan}: no `{needle}` in\n{}",
                    k.source
                );
            }
        }
        // Each base its own kernel.
        let five = Values::Int(IntVec::U8((0..5000).map(|i| (i % 5) as u8).collect()));
        let k5 = generate(&shape_of("radix", &five)).unwrap_or_else(|e| panic!("{e}"));
        assert!(k5.source.contains("const u32 j = p / 3u, d = p - j * 3u;"));
        assert!(k5.source.contains("if (d & 2u) g /= 25u;"));
    }

    #[test]
    fn kernel_kinds_follow_the_shape() {
        let kind = |p: &str| {
            generate(&shape_of(p, &ints()))
                .unwrap_or_else(|e| panic!("{p}: {e}"))
                .kind
        };
        assert_eq!(kind("for | bitpack"), KernelKind::Tile);
        assert_eq!(kind("for | patch | bitpack"), KernelKind::Tile);
        assert_eq!(
            kind("dict(codes: bitpack, values: for | bitpack)"),
            KernelKind::Tile
        );
        assert_eq!(kind("delta | for | bitpack"), KernelKind::Chunk);
        assert_eq!(kind("rle"), KernelKind::Chunk);
        // A patched dictionary is read at code positions, not output positions.
        assert_eq!(
            kind("dict(codes: bitpack, values: for | patch | bitpack)"),
            KernelKind::Chunk
        );
    }

    #[test]
    fn nested_materialised_nodes_use_shared_memory_in_tiles_and_scratch_in_chunks() {
        let tile =
            generate(&shape_of("for | patch | bitpack", &ints())).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            tile.source.contains("__shared__ u64 zf_m1[1024]"),
            "{}",
            tile.source
        );
        assert!(tile.nodes.iter().all(|n| n.scratch.is_none()));
        let chunk = generate(&shape_of("delta | for | patch | bitpack", &ints()))
            .unwrap_or_else(|e| panic!("{e}"));
        // In a chunk kernel, patch is an expression: no buffer, a search for exceptions.
        assert_eq!(chunk.nodes[2].op, Op::Patch);
        assert!(chunk.nodes.iter().all(|n| n.scratch.is_none()));
        assert!(
            chunk.source.contains("zf_lower_bound(pos, cnt, p)"),
            "{}",
            chunk.source
        );
        let nested = generate(&shape_of(
            "zigzag | delta | rle(values: for | bitpack, runs: for | bitpack)",
            &ints(),
        ))
        .unwrap_or_else(|e| panic!("{e}"));
        for (k, op) in [(1, Op::Delta), (2, Op::Rle)] {
            assert_eq!(nested.nodes[k].op, op);
            let slot = nested.nodes[k]
                .scratch
                .unwrap_or_else(|| panic!("no scratch slot"));
            assert!(
                nested
                    .source
                    .contains(&format!("(u64*)(e.scratch + e.prm[{slot}])")),
                "{}",
                nested.source
            );
        }
        // The root delta writes the output directly.
        let delta =
            generate(&shape_of("delta | for | bitpack", &ints())).unwrap_or_else(|e| panic!("{e}"));
        assert!(delta.nodes[0].scratch.is_none());
        assert!(
            delta
                .source
                .contains("o[p] = (i64)(u64)st[i * ZF_THREADS + threadIdx.x]")
        );
    }

    #[test]
    fn a_root_delta_over_rle_decodes_both_from_sums_over_runs() {
        let k = generate(&shape_of(
            "delta | rle(values: for | bitpack, runs: for | bitpack)",
            &ints(),
        ))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(k.kind, KernelKind::Chunk);
        assert_eq!(k.nodes[1].op, Op::Rle);
        // No buffer for the runs' expansion, no scan over values.
        assert!(k.nodes.iter().all(|n| n.scratch.is_none()));
        assert!(!k.source.contains("zf_st0"), "{}", k.source);
        assert!(
            k.source
                .contains("o[q] = (i64)(u64)(bv.x + bv.y * (u64)q);"),
            "{}",
            k.source
        );
        assert!(k.source.contains(
            "rp[threadIdx.x * ZF_RLE_ITEMS + i] = make_ulonglong2(d - (u64)nv[i] * ((u64)s - (u64)1), (u64)nv[i]);"
        ));
        assert!(k.source.contains("dl += (u64)nv[i] * (u64)nl[i];"));
        // Each run's start goes to the head map, which starts clear, a thread's bits ORed
        // per word; the walk counts runs from it.
        for q in [
            "__shared__ u32 zf_hd0[ZF_HEAD_BITS / 32u];",
            "for (u32 x = threadIdx.x; x < ZF_HEAD_BITS / 32u; x += ZF_THREADS) hd[x] = 0u;",
            "if (nl[i] != 0u && s - carry < ZF_HEAD_BITS) {",
            "hm |= 1u << (b & 31u);",
            "if (hm != 0u) atomicOr(hd + hw, hm);",
            "zf_rle_walk_heads(rs, hd, rs[0], rs[ZF_RLE_TILE],",
        ] {
            assert!(k.source.contains(q), "{q}: {}", k.source);
        }
        assert!(
            k.source
                .contains("__launch_bounds__(ZF_THREADS, 2048 / ZF_THREADS)")
        );
        // Under another node, `rle` is expanded into its buffer as usual.
        let k = generate(&shape_of(
            "rle(values: delta | rle(values: bitpack, runs: bitpack), runs: bitpack)",
            &ints(),
        ))
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(!k.source.contains("zf_rp"), "{}", k.source);
    }

    #[test]
    fn delta_and_rle_read_four_neighbouring_values_and_walk_their_runs() {
        // delta over a dictionary of bit-packed codes: the codes four at a time, each looked
        // up in the shared dictionary.
        let k = generate(&shape_of(
            "delta | dict(codes: bitpack, values: plain)",
            &ints(),
        ))
        .unwrap_or_else(|e| panic!("{e}"));
        let codes = &k.nodes[2];
        assert_eq!(codes.op, Op::BitPack);
        assert!(
            k.source.contains("void zf_q2(const Env& e, u32 p,"),
            "{}",
            k.source
        );
        assert!(k.source.contains("zf_unpack4<"), "{}", k.source);
        assert!(k.source.contains("void zf_q1(const Env& e, u32 p, i64* v)"));
        assert!(
            k.source
                .contains("zf_q1(e, threadIdx.x * ZF_DELTA_ITEMS, zq);")
        );
        // rle: both children four at a time (the `for` maps its child's four), and every
        // output position from the walk, not one search each.
        let k = generate(&shape_of(
            "rle(values: for | bitpack, runs: for | bitpack)",
            &ints(),
        ))
        .unwrap_or_else(|e| panic!("{e}"));
        for q in [
            "zf_q1(e, threadIdx.x * ZF_RLE_ITEMS, zq);",
            "zf_q3(e, threadIdx.x * ZF_RLE_ITEMS, zq);",
        ] {
            assert!(k.source.contains(q), "{q}: {}", k.source);
        }
        assert!(k.source.contains("zf_q2(e, p, c);"), "{}", k.source);
        assert!(k.source.contains("zf_rle_walk(rs, rs[0], rs[ZF_RLE_TILE],"));
        assert!(!k.source.contains("zf_hd0"), "{}", k.source);
        // Other children read value by value behind the same interface.
        let k = generate(&shape_of("delta | zigzag | bitpack", &ints()))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(k.source.contains("v[i] = zf_n1(e, p + i);"), "{}", k.source);
    }

    #[test]
    fn same_shape_same_source_and_each_width_its_own() {
        let a = generate(&shape_of("for | bitpack", &ints())).unwrap_or_else(|e| panic!("{e}"));
        let same = Values::Int(IntVec::I64((0..70_000).map(|i| 5 + i % 1000).collect()));
        let b = generate(&shape_of("for | bitpack", &same)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(a.source, b.source);
        let wider = Values::Int(IntVec::I64((0..70_000).map(|i| i * 1_000_003).collect()));
        let c = generate(&shape_of("for | bitpack", &wider)).unwrap_or_else(|e| panic!("{e}"));
        assert_ne!(a.key, c.key);
        assert_ne!(a.source, c.source);
    }

    #[test]
    fn the_gpu_objective_names_only_primitives_the_gpu_decodes() {
        for name in zipflow_select::GPU_PARALLEL {
            let enc = zipflow_encodings::by_name(name).unwrap_or_else(|| panic!("{name}"));
            assert!(Op::from_id(enc.id()).is_ok(), "{name}");
        }
    }

    #[test]
    fn unknown_primitives_are_unsupported_by_name() {
        let e = Op::from_id(999).map(|_| ());
        let Err(Error::Unsupported { what, .. }) = e else {
            panic!("expected Unsupported, got {e:?}")
        };
        assert!(what.contains("id 999"), "{what}");
        // Every primitive the CPU writes has an op.
        for id in 1..=19 {
            if zipflow_encodings::by_id(id).is_some() {
                Op::from_id(id).unwrap_or_else(|e| panic!("{id}: {e}"));
            }
        }
    }

    #[test]
    fn one_length_strings_run_without_the_first_kernel() {
        let ones = {
            let mut b = zipflow_core::values::ByteStrings::default();
            b.offsets.push(0);
            for i in 0..5000u64 {
                b.data.push(b'A' + (i % 3) as u8);
                b.offsets.push(b.data.len() as u64);
            }
            Values::Bytes(b)
        };
        for (plan, first) in [
            ("strdict(codes: radix)", false),
            ("strdict(codes: bitpack)", false),
            ("strdict(codes: ans)", true),
            ("strdict", false),
        ] {
            let k = generate(&shape_of(plan, &ones)).unwrap_or_else(|e| panic!("{plan}: {e}"));
            assert_eq!(k.first_kernel, first, "{plan}");
            // One-byte entries: each warp stages its own pieces, with no block barrier, and
            // the offsets go 16 bytes a store.
            if !first {
                for n in [
                    "#define ZF_FIX_PIECE",
                    "zf_store_from(out, wst, pa, pz, lane, 32u);",
                    "((uint4*)o)[r / 4u] = make_uint4(w, w + L, w + 2u * L, w + 3u * L);",
                ] {
                    assert!(k.source.contains(n), "{plan}: no `{n}`");
                }
            }
        }
        let k = generate(&shape_of("strdict(codes: bitpack)", &texts()))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(k.first_kernel);
    }

    #[test]
    fn character_coders_and_blockpack_generate() {
        let view_of = |plan: &str, v: &Values| {
            let plan: Plan = plan.parse().unwrap_or_else(|e| panic!("{e}"));
            let node = encode(&plan, v).unwrap_or_else(|e| panic!("{e}"));
            node.to_bytes().unwrap_or_else(|e| panic!("{e}"))
        };
        // The character coders: a stage in the first kernel, into the dictionary's bytes.
        for plan in [
            "plain(bytes: chardict16)",
            "words(dict: plain(bytes: chartable))",
        ] {
            let raw = view_of(plan, &texts());
            let view = NodeView::parse(&raw).unwrap_or_else(|e| panic!("{e}"));
            let k = generate(&Shape::of(&view).unwrap_or_else(|e| panic!("{plan}: {e}")))
                .unwrap_or_else(|e| panic!("{plan}: {e}"));
            assert_eq!(k.kind, KernelKind::Chunk, "{plan}");
            assert!(
                k.source
                    .contains("if (pos != (u64)r.y) atomicOr(e.err, ZF_ERR_CHAR);"),
                "{plan}"
            );
        }
        // `blockpack`: fully parallel at the top (a tile kernel), a chunk kernel when its
        // references need a scan.
        let k = generate(&shape_of("blockpack", &ints())).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(k.kind, KernelKind::Tile);
        assert!(
            k.source
                .contains("zf_unpack<u64, u64, 64>(w, vt.y, p & 1023u)")
        );
        let k = generate(&shape_of("blockpack(refs: delta | for | bitpack)", &ints()))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(k.kind, KernelKind::Chunk);
    }

    fn byte_strings(rows: impl Iterator<Item = Vec<u8>>) -> Values {
        let mut b = zipflow_core::values::ByteStrings::default();
        b.offsets.push(0);
        for r in rows {
            b.data.extend_from_slice(&r);
            b.offsets.push(b.data.len() as u64);
        }
        Values::Bytes(b)
    }

    fn texts() -> Values {
        byte_strings(
            (0..3000u64).map(|i| format!("word{} and {} more. ", i % 40, i % 7).into_bytes()),
        )
    }

    #[test]
    fn string_roots_write_a_segment_table_and_expand_segments() {
        let cases = [
            ("plain", "out[at + B0 + bc + x] = zf_n3(e, B0 + bc + x);"),
            // Bit-packed codes are staged lane by lane; bytes are assembled a word at a time.
            (
                "strdict(codes: bitpack)",
                "if (whole || p < cnt) f(p, (u32)(win >> sh) & mask);",
            ),
            ("strdict(codes: bitpack)", "__funnelshift_l(t0, t1, nb)"),
            (
                "strdict(codes: bitpack)",
                "st[x - w0] = zf_sdict[zf_dsh2 + so[j] + (x - q)];",
            ),
            (
                "strdict(codes: ans)",
                "zf_ans_renorm(x, act, pos, win, bad);",
            ),
            (
                "words(codes: ans, counts: ans)",
                "f(i, (u32)zf_n6(e, first + i));",
            ),
            // With every entry packed, a token's length is one load in the segment sums and
            // in the tiles, and a code past the dictionary is found from the largest.
            (
                "strdict(codes: bitpack)",
                "cmax = max(cmax, c); b += zf_soff[min(c, zf_m2)] >> 24;",
            ),
            (
                "words(codes: bitpack, counts: bitpack)",
                "zf_cmax = max(zf_cmax, in ? c : 0u);",
            ),
            (
                "words(codes: bitpack, counts: bitpack)",
                "if (tseg != 0u && zf_cmax >= zf_m2) atomicOr(e.err, ZF_ERR_DICT);",
            ),
        ];
        for (plan, needle) in cases {
            let k = generate(&shape_of(plan, &texts())).unwrap_or_else(|e| panic!("{plan}: {e}"));
            assert_eq!(k.kind, KernelKind::Chunk, "{plan}");
            let rows = if plan.starts_with("words") {
                strings::SEGMENT_ROWS
            } else {
                strings::SEGMENT_ROWS_STRINGS
            };
            assert_eq!(k.segment_rows, rows, "{plan}");
            // A `words` block takes several segments in turn, its dictionary staged once.
            let looped = "for (u32 seg = seg0; seg < min(seg0 + 8u, zf_nseg); ++seg) {";
            if plan.starts_with("words") {
                assert_eq!(k.segments_per_block, strings::WORDS_SEGMENTS_PER_BLOCK);
                assert!(k.source.contains(looped), "{plan}");
                assert!(
                    k.source
                        .contains("__launch_bounds__(ZF_THREADS, 1024 / ZF_THREADS)")
                );
            } else {
                assert_eq!(k.segments_per_block, 1, "{plan}");
                assert!(k.source.contains("const u32 seg = seg0;"), "{plan}");
            }
            // Codes bit-packed in at most 16 bits: a `words` tile stages them as `u16` and
            // takes eight tokens a thread, in a larger stage; a `strdict` has a second
            // expansion with a smaller stage and its codes as `u16`, three blocks a
            // multiprocessor.
            let narrow_dict = plan.starts_with("strdict(codes: bitpack");
            let narrow = plan.starts_with("words(codes: bitpack") || narrow_dict;
            let stage = if narrow && !narrow_dict {
                strings::STAGE_BYTES_NARROW
            } else if plan.starts_with("words") {
                strings::STAGE_BYTES
            } else {
                strings::STAGE_BYTES_STRINGS
            };
            assert_eq!(
                k.source.contains("#define ZF_CODE_T u16"),
                narrow && !narrow_dict,
                "{plan}"
            );
            assert_eq!(
                k.source.contains("zf_cq0.x & 0xffffu, zf_cq0.x >> 16"),
                narrow,
                "{plan}"
            );
            // The segment table comes from the row index when the chunk has one.
            assert!(
                k.source
                    .contains("zf_copy_table((const u32*)(e.in + given), tab, 2u * (nseg + 1u));"),
                "{plan}"
            );
            assert!(k.expand_smem >= stage, "{plan}");
            if narrow_dict {
                let narrow_stage = strings::STAGE_BYTES_NARROW_STRINGS;
                for n in [
                    "#define ZF_STR_STAGE zf_stage_t".to_string(),
                    format!("#define ZF_STAGE_WIDE {stage}u"),
                    format!("#define ZF_STAGE_NARROW {narrow_stage}u"),
                    "template <u32 zf_stage_t, typename zf_code_t>\n__device__ __forceinline__ void zf_expand_t("
                        .to_string(),
                    "#define ZF_CODE_T zf_code_t".to_string(),
                    "if constexpr (sizeof(ZF_CODE_T) == 2u) {".to_string(),
                    "__launch_bounds__(ZF_THREADS)\nzf_expand(".to_string(),
                    "zf_expand_t<ZF_STAGE_WIDE, u32>(in, out, scratch, prm, work, err);".to_string(),
                    "__launch_bounds__(ZF_THREADS, 1536 / ZF_THREADS)\nzf_expand_n(".to_string(),
                    "zf_expand_t<ZF_STAGE_NARROW, u16>(in, out, scratch, prm, work, err);".to_string(),
                ] {
                    assert!(k.source.contains(&n), "{plan}: {n}");
                }
                // Three blocks (and their static shared memory) fit a multiprocessor's 228
                // KiB, a KiB of each reserved.
                assert!(k.expand_narrow_smem >= narrow_stage, "{plan}");
                assert!(
                    3 * (k.expand_narrow_smem + 2048 + 1024) <= 228 * 1024,
                    "{plan}"
                );
                assert!(k.expand_smem > k.expand_narrow_smem, "{plan}");
            } else {
                assert!(
                    k.source.contains(&format!("#define ZF_STR_STAGE {stage}u")),
                    "{plan}"
                );
                assert_eq!(k.expand_narrow_smem, 0, "{plan}");
                assert!(!k.source.contains(strings::EXPAND_NARROW_NAME), "{plan}");
            }
            let (first, second) = k
                .source
                .split_once(strings::EXPAND_NAME)
                .unwrap_or_else(|| panic!("{plan}: no expansion kernel"));
            assert!(first.contains(KERNEL_NAME), "{plan}");
            // The first kernel writes the table; the second reads it and writes the strings.
            assert!(
                first.contains(
                    "tab[2u * ((j0 + threadIdx.x) / parts) + 1u] = (u32)min(t, (u64)claimed);"
                ),
                "{plan}"
            );
            // A `strdict` tile of entries of at most 8 or 24 bytes takes one step a token (of
            // three or seven words); a `words` tile one of five words for tokens of at most 16.
            for n in [
                "const bool zf_short = __syncthreads_and(zf_lmax2 <= 8u);",
                "const bool zf_mid = __syncthreads_and(zf_lmax2 <= 24u);",
                "d6 = dw[wa + 6u];",
            ] {
                assert_eq!(
                    k.source.contains(n),
                    plan.starts_with("strdict"),
                    "{plan}: {n}"
                );
            }
            // A thread's codes come in 16-byte loads (four a thread of a `words` tile, or
            // eight as `u16`, eight of a `strdict` or `plain` one), and a tile's sum takes one
            // barrier.
            let last_quad = if plan.starts_with("words") {
                "const uint4 zf_cq0 = ((const uint4*)codes)[1u * threadIdx.x + 0u];"
            } else {
                "const uint4 zf_cq1 = ((const uint4*)codes)[2u * threadIdx.x + 1u];"
            };
            for n in [last_quad, "p0 = zf_scan_tile<u64>(lsum, &ttot, zf_flip);"] {
                assert!(k.source.contains(n), "{plan}: {n}");
            }
            assert_eq!(
                k.source.contains("#define ZF_TOK_ITEMS 8u"),
                !plan.starts_with("words") || narrow,
                "{plan}"
            );
            assert_eq!(
                k.source
                    .contains("zf_short = false, zf_mid = __syncthreads_and(zf_lmax2 <= 16u);"),
                plan.starts_with("words"),
                "{plan}"
            );
            let offsets = if plan.starts_with("words") {
                "__stcs((u32*)o + rb + i, (u32)v);"
            } else {
                "__stcs((u32*)o + r0 + tt + x, (u32)v);"
            };
            for n in [
                "const u32 T1 = tab[2u * seg + 2u], B1 = tab[2u * seg + 3u];",
                offsets,
            ] {
                assert!(second.contains(n), "{plan}: no `{n}` in\n{second}");
            }
            assert!(
                k.source.contains(needle),
                "{plan}: no `{needle}` in\n{}",
                k.source
            );
        }
        // Dictionaries get a scratch region for their offsets, which the expansion reads.
        let k = generate(&shape_of("strdict", &texts())).unwrap_or_else(|e| panic!("{e}"));
        assert!(k.nodes[2].scratch.is_some());
        assert!(
            k.source
                .contains("zf_m2 < ZF_STR_OFFS ? zf_soff : zf_goff2")
        );
        // Entries are looked up packed (offset and length in one word) in shared memory.
        assert!(
            k.source
                .contains("zf_entry(zf_m2 < ZF_STR_OFFS, zf_goff2, c, so[j], sl[j]);")
        );
        // Staged bytes are stored 16 bytes at a time, marked to be evicted first (the output
        // is not read again by the decoder), and so are the offsets.
        assert!(k.source.contains("__stcs(gw + y, sw[y]);"));
    }
}
