//! Byte strings. They take two kernels. The first (`zf_decode`, one block per chunk) runs every
//!   numeric stage, computes the string dictionary's entry offsets (an exclusive sum of their
//!   lengths) into the chunk's scratch region, each entry's offset and length packed in one
//!   word after them, and writes the chunk's *segment table*: for
//!   every [`SEGMENT_ROWS`] rows, the first token and the first byte of their strings (a warp
//!   sums one segment's tokens at a time, a block-wide sum places them, then the same for
//!   their bytes, so the segments need no barriers between them). A node with a row index
//!   (`zipflow_encodings::rowindex`, an entry every segment) has its table built by the
//!   host, and the first kernel only copies it: the sums were a pass over every code. The
//!   second ([`EXPAND_NAME`], one block per segment, or per [`WORDS_SEGMENTS_PER_BLOCK`]
//!   consecutive segments of a `words` root, taken in turn) expands its rows independently
//!   of the other blocks: it copies the packed entries and the dictionary's bytes to shared
//!   memory 16 bytes at a time, once (a token's lookup is then one load); for each segment
//!   it finds each row's first token (a `words` root's counts, one block-wide sum), and
//!   walks the segment's tokens in tiles of [`TILE_TOKENS`] (four a thread; eight,
//!   [`TILE_TOKENS_NARROW`], when its codes are bit-packed in at most 16 bits and staged as
//!   `u16`, which leaves room for a larger stage). In a tile each
//!   thread takes consecutive tokens, so its bytes are one contiguous run: a block-wide sum
//!   of the tokens' lengths places them, the bytes are assembled in shared memory at the
//!   output's alignment and stored 16 bytes at a time, and each row whose first token falls
//!   in the tile writes its offset.
//!
//! A `strdict` or `plain` root is the same with one token per row, in tiles of [`TILE_ROWS`]
//! (eight a thread, two tiles a block). The expansion of a `strdict` whose codes' encoding
//! stays below 2^16 comes twice: [`EXPAND_NAME`] with a stage for long strings, two blocks a
//! multiprocessor, and [`EXPAND_NARROW_NAME`] with a smaller one and its codes staged as
//! `u16`, three blocks a multiprocessor, which the host launches when every segment's
//! strings are short enough on average for a tile to fit it ([`fits_narrow_stage`]; a tile
//! that does not fit takes the byte-by-byte path). When every packed entry of a `strdict`
//! has at most 8 or 24 bytes (every token of a `words` root at most 16), a tile takes one
//! assembly step a token instead of one per 16 bytes. Entries of one length need no table: their offsets are
//! arithmetic (stored 16 bytes at a time), and with one byte each warp of the expansion takes
//! [`FIXED_PIECE`] bytes of the output at a time into its own part of the stage, with no
//! block barrier; up to eight such entries sit in two registers and a code's byte is one byte
//! permute, unchecked where the codes' encoding cannot pass the dictionary. When every entry
//! is packed, a token's length is one shared load in the segment sums and in the tiles, and a
//! code past the dictionary is caught from the largest. In the first kernel, a chunk with
//! fewer segments than warps shares each segment's byte sum among several warps. Offsets are
//! `u32` or `u64` (the host picks per column), relative to the start of the column's bytes,
//! or not written at all when only the bytes are wanted.
//!
//! Every read is bounded by what the host validated (dictionary codes and token positions
//! are checked in the kernels), and every write by the chunk's byte count: the expansion
//! checks its segment against the table and the table against its own sums, and a chunk
//! whose strings do not add up sets [`super::ERR_STR`] instead of writing past its region.

mod root;

use super::{Gen, NodeSlots, Writer};
use crate::shape::Op;
use zipflow_core::{PType, Result};

/// Name of the generated kernel that expands a byte-string column's segments.
pub const EXPAND_NAME: &str = "zf_expand";
/// Name of the same expansion with [`STAGE_BYTES_NARROW_STRINGS`] of stage, three blocks a
/// multiprocessor (`strdict` roots whose codes are staged as `u16`).
pub const EXPAND_NARROW_NAME: &str = "zf_expand_n";
/// Rows of a chunk each expansion block of a `words` root takes.
pub const SEGMENT_ROWS: u32 = 2048;
// A segment is one step of its node's row index, so the file holds its segment table.
const _: () = assert!(SEGMENT_ROWS as usize == zipflow_encodings::rowindex::WORDS_ROWS);
const _: () = assert!(SEGMENT_ROWS_STRINGS as usize == zipflow_encodings::rowindex::STRDICT_ROWS);
/// Rows of a chunk each expansion block of a `strdict` or `plain` root takes (two tiles, so
/// that a block's start, its dictionary and codes staged behind one barrier, is paid once
/// for both: one tile a block lost 5 %).
pub const SEGMENT_ROWS_STRINGS: u32 = 2 * TILE_ROWS;
/// Rows of a chunk each expansion block of a `strdict` root with entries of one length takes:
/// its rows need no sums, so a block runs through several windows of the stage and pays for
/// its start (the dictionary copied to shared memory) once.
pub const SEGMENT_ROWS_FIXED: u32 = 32768;
/// Output bytes each warp of a `strdict` expansion with one-byte entries stages at a time.
pub const FIXED_PIECE: u32 = 2048;
/// Segments of a `words` root each expansion block takes in turn: its dictionary (up to
/// 40 KB of entries and bytes) is staged once for all of them (l_comment: eight decode 2 %
/// faster than four, sixteen no faster than eight).
pub const WORDS_SEGMENTS_PER_BLOCK: u32 = 8;
/// Tokens of one tile of a `words` expansion block: four per thread.
pub const TILE_TOKENS: u32 = 2048;
/// Rows of one tile of a `strdict` or `plain` expansion block: eight per thread, so that
/// what a tile costs whatever its rows (its block-wide sum, staging, stores and barriers) is
/// paid once for eight strings (l_shipmode's short ones decode 14 % faster than with four).
pub const TILE_ROWS: u32 = 4096;
/// Entries of a `words` dictionary whose offsets are kept in shared memory (a `strdict`'s:
/// a quarter of it, so that more blocks share a multiprocessor).
pub const DICT_OFFSETS: u32 = 4096;
/// Bytes of a `words` dictionary kept in shared memory (a `strdict`'s: a quarter).
pub const DICT_BYTES: u32 = 24 * 1024;
// A `words` dictionary that the encoder grew by joining tokens still fits (the expansion
// needs 4 bytes of slack).
const _: () = assert!(zipflow_encodings::words::MERGED_DICT_BYTES + 4 <= DICT_BYTES as usize);
/// Codes of a `words` segment staged in shared memory at once, with the dictionary and the
/// counts (a `strdict` or `plain` segment stages its [`SEGMENT_ROWS`] codes or lengths); a
/// segment with more tokens stages them a tile at a time.
pub const SEGMENT_TOKENS: u32 = 10240;
/// Bytes of a `words` tile's strings assembled in shared memory before they are stored (a
/// tile with more takes several passes, byte by byte). A `words` block keeps its whole
/// dictionary in shared memory, so its stage is small.
pub const STAGE_BYTES: u32 = 16 * 1024;
/// Tokens of one tile of a `words` root whose codes are bit-packed in at most 16 bits: eight
/// a thread. Its codes are staged as `u16`, which leaves room for a stage that holds such a
/// tile whole (l_comment's: 30.5 KB on average).
pub const TILE_TOKENS_NARROW: u32 = 4096;
/// Codes of such a segment staged at once (l_comment's 2,048-row segments hold about 7,300).
pub const SEGMENT_TOKENS_NARROW: u32 = 8192;
/// The stage of such a `words` root: two blocks still share a multiprocessor.
pub const STAGE_BYTES_NARROW: u32 = 39 * 1024;
/// The stage of `strdict` and `plain` roots: their tiles of [`TILE_ROWS`] rows fit it whole
/// up to 13.2 bytes a row on average (l_shipinstruct has 12.6; a tile with more takes
/// several passes, byte by byte), and a block (111 KiB of dynamic shared memory, 112.4 with
/// its static) still leaves room for a second one on a multiprocessor, as its registers
/// allow.
pub const STAGE_BYTES_STRINGS: u32 = 53 * 1024;
/// The stage of [`EXPAND_NARROW_NAME`]: with codes staged as `u16` a block takes 70 KiB of
/// dynamic shared memory, so three share a multiprocessor, as their registers (capped at
/// 40) allow. Three blocks decode l_shipmode's strings (4.3 bytes) 7 to 9 % faster than
/// two; the same layout at two blocks is no faster than the wide stage.
pub const STAGE_BYTES_NARROW_STRINGS: u32 = 28 * 1024;

/// Whether `rows` strings of `bytes` bytes in all (a segment, or a chunk without a row
/// index) expand with [`EXPAND_NARROW_NAME`]: their average tile ([`TILE_ROWS`] rows) with a
/// quarter more fits [`STAGE_BYTES_NARROW_STRINGS`] with 16 bytes of alignment.
pub fn fits_narrow_stage(rows: u64, bytes: u64) -> bool {
    rows == 0
        || u128::from(bytes) * u128::from(TILE_ROWS) * 5
            <= u128::from(rows) * u128::from(STAGE_BYTES_NARROW_STRINGS - 16) * 4
}

/// The stage of `strdict` roots with entries of one length: three blocks still share a
/// multiprocessor.
pub const STAGE_BYTES_FIXED: u32 = 48 * 1024;

const STRING_HELPERS: &str = r#"
// A dictionary entry in shared memory: its offset (24 bits) and length (8 bits), or all ones
// for an entry that does not fit (read from the offsets in device memory instead).
__device__ __forceinline__ u32 zf_pack(u64 off, u32 len) {
  return off < 0xffffffull && len < 255u ? (u32)off | (len << 24) : 0xffffffffu;
}

// Entry c's offset and length: packed in shared memory when `sm`, else (or when it does not
// fit) from the offsets `g` in device memory.
__device__ __forceinline__ void zf_entry(bool sm, const u32* __restrict__ g, u32 c, u32& so, u32& sl) {
  const u32 v = sm ? zf_soff[c] : 0xffffffffu;
  if (v != 0xffffffffu) {
    so = v & 0xffffffu;
    sl = v >> 24;
  } else {
    so = g[c];
    sl = g[c + 1u] - so;
  }
}

// Byte `c` (below 8) of the eight in `lo`, `hi`: one byte permute (the intrinsic would mask
// the selector first).
__device__ __forceinline__ u32 zf_pick8(u32 lo, u32 hi, u32 c) {
  u32 r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(lo), "r"(hi), "r"(c));
  return r;
}

// Stores output bytes [g0, g1) from `st`, which holds output byte x at byte
// x - (g0 rounded down to 16): the 16-byte words in between whole (marked evict-first, as
// are the offsets: nothing here reads them again), the ends byte by byte (threads t of nt,
// at least 16).
__device__ __forceinline__ void zf_store_from(u8* __restrict__ out, const u8* st, u64 g0, u64 g1, u32 t, u32 nt) {
  const u64 gb = g0 & ~15ull, v0 = (g0 + 15u) & ~15ull, v1 = g1 & ~15ull;
  if (v0 > v1) {
    if (t < g1 - g0) out[g0 + t] = st[g0 - gb + t];
    return;
  }
  if (t < v0 - g0) out[g0 + t] = st[g0 - gb + t];
  if (t < g1 - v1) out[v1 + t] = st[v1 - gb + t];
  const uint4* sw = (const uint4*)st + (v0 - gb) / 16u;
  uint4* gw = (uint4*)(out + v0);
  for (u32 y = t; y < (u32)((v1 - v0) / 16u); y += nt) __stcs(gw + y, sw[y]);
}

// The same from the block's stage, by all threads of the block (a macro: where the stage
// lies may depend on the expansion's template parameters).
#define zf_store_stage(out, g0, g1) zf_store_from(out, zf_stage, g0, g1, threadIdx.x, ZF_THREADS)

// A tile's bytes from the stage, as zf_store_from, but on Hopper and later the 16-byte words
// in between go by one bulk copy (the copy engine reads the stage; no thread loads and stores
// them), issued by thread 0, evict-first (see zf_bulk_fence for the fences and waits).
__device__ __forceinline__ void zf_store_bulk(u8* __restrict__ out, const u8* st, u64 g0, u64 g1) {
#if ZF_BULK
  const u32 t = threadIdx.x;
  const u64 gb = g0 & ~15ull, v0 = (g0 + 15u) & ~15ull, v1 = g1 & ~15ull;
  if (v0 > v1) {
    if (t < g1 - g0) out[g0 + t] = st[g0 - gb + t];
    return;
  }
  if (t < v0 - g0) out[g0 + t] = st[g0 - gb + t];
  if (t < g1 - v1) out[v1 + t] = st[v1 - gb + t];
  if (t == 0u && v1 > v0) zf_bulk_store(out + v0, st + (v0 - gb), (u32)(v1 - v0));
#else
  zf_store_from(out, st, g0, g1, threadIdx.x, ZF_THREADS);
#endif
}

// Copies `n` words of a segment table, by all threads of the block. Not inlined: the first
// kernel's sums, the other branch, keep their registers.
__device__ __noinline__ void zf_copy_table(const u32* __restrict__ src, u32* tab, u32 n) {
  for (u32 i = threadIdx.x; i < n; i += ZF_THREADS) tab[i] = __ldg(src + i);
}

// The sum over a warp, in every lane.
__device__ __forceinline__ u64 zf_warp_sum(u64 x) {
#pragma unroll
  for (u32 d = 16u; d > 0u; d >>= 1) x += __shfl_xor_sync(0xffffffffu, x, d);
  return x;
}

// Turns t[2 * s], s < nseg, into exclusive sums clamped to `cap`, with the clamped total in
// t[2 * nseg]; returns the total (all threads of the block).
__device__ u64 zf_tab_scan(u32* t, u32 nseg, u32 cap) {
  u64 carry = 0ull;
  for (u32 s0 = 0u; s0 < nseg; s0 += ZF_THREADS) {
    const u32 s = s0 + threadIdx.x;
    const u64 v = s < nseg ? (u64)t[2u * s] : 0ull;
    u64 tot;
    const u64 x = carry + zf_scan_excl<u64>(v, &tot);
    if (s < nseg) t[2u * s] = (u32)min(x, (u64)cap);
    carry += tot;
  }
  if (threadIdx.x == 0u) t[2u * nseg] = (u32)min(carry, (u64)cap);
  __syncthreads();
  return carry;
}
"#;

/// Declares `d0 .. d{n-1}`: the `n` dictionary words from word `wa`; `gather`: only those
/// holding the `len` bytes from byte `src` (see [`one_step`]), the others zero.
fn dict_words(w: &mut Writer, n: usize, len: &str, gather: bool) {
    let list = |f: &dyn Fn(usize) -> String| (0..n).map(f).collect::<Vec<_>>().join(", ");
    if gather {
        w.line(format!("const u32 nw = ((src & 3u) + {len} + 3u) >> 2;"))
            .line(format!("u32 {};", list(&|i| format!("d{i} = 0u"))));
        for i in 0..n {
            w.line(format!("if (nw > {i}u) d{i} = dw[wa + {i}u];"));
        }
    } else {
        w.line(format!(
            "const u32 {};",
            list(&|i| format!("d{i} = dw[wa + {i}u]"))
        ));
    }
}

/// One assembly step a token for a tile whose entries all have at most `4 * kw` bytes:
/// reads `kw + 1` dictionary words at the token's byte alignment, shifts them after the `nb`
/// pending bits and stores the words it fills (the run's first word is or-ed in last, as in
/// the 16-byte steps). A missing token (length 0) leaves everything as it was. `gather`: each
/// lane reads only the words its token's bytes lie in (the others stay zero: their bits land
/// past the token, in no word stored whole and masked off the pending one), for a `words`
/// root, whose lanes gather from a large dictionary, so that a short token's lane stays out
/// of the banks its neighbours read; a small `strdict` dictionary's lanes mostly read the
/// same words (one broadcast), and the tests cost more than they save there.
fn one_step(w: &mut Writer, kw: usize, d: usize, gather: bool) {
    let (bytes, read) = (4 * kw, kw + 1);
    let upto = if gather { "up to " } else { "" };
    let list = |f: &dyn Fn(usize) -> String, n: usize| (0..n).map(f).collect::<Vec<_>>().join(", ");
    let ts = list(
        &|i| format!("t{i} = __funnelshift_r(d{i}, d{}, sh)", i + 1),
        kw,
    );
    let outs = list(
        &|i| match i {
            0 => "o0 = pend | (t0 << nb)".to_string(),
            i if i == kw => format!("o{i} = __funnelshift_l(t{}, 0u, nb)", i - 1),
            i => format!("o{i} = __funnelshift_l(t{}, t{i}, nb)", i - 1),
        },
        kw + 1,
    );
    let pick = (0..kw).fold(format!("o{kw}"), |acc, i| {
        let i = kw - 1 - i;
        format!("full == {i}u ? o{i} : {acc}")
    });
    w.line(format!(
        "// Every entry has at most {bytes} bytes: one step a token, {upto}{read} words read."
    ))
    .directive("#pragma unroll")
    .open("for (u32 j = 0u; j < ZF_TOK_ITEMS; ++j)")
    .line(format!(
        "const u32 src = zf_dsh{d} + so[j], wa = src >> 2, sh = (src & 3u) * 8u;"
    ));
    dict_words(w, kw + 1, "sl[j]", gather);
    w.line(format!("const u32 {ts};"))
        .line(format!("const u32 {outs};"))
        .line("const u32 bits = nb + sl[j] * 8u, full = bits >> 5;")
        .open("if (full > 0u)")
        .line("if (wi == wf) first = o0; else sw[wi] = o0;")
        .close();
    for i in 1..kw {
        w.line(format!("if (full > {i}u) sw[wi + {i}u] = o{i};"));
    }
    w.line("nb = bits & 31u;")
        .line(format!(
            "pend = ({pick}) & __funnelshift_lc(0xffffffffu, 0u, nb);"
        ))
        .line("wi += full;")
        .close();
}

impl Gen<'_> {
    /// Rows per expansion block of this byte-string shape.
    pub(super) fn segment_rows(&self) -> u32 {
        if self.fixed_length(0).is_some() {
            SEGMENT_ROWS_FIXED
        } else if self.nodes[0].op == Op::Words {
            SEGMENT_ROWS
        } else {
            SEGMENT_ROWS_STRINGS
        }
    }

    /// Whether this shape is a `words` root whose codes are bit-packed in at most 16 bits
    /// (compiled in): its codes are staged as `u16`, eight tokens a thread.
    pub(super) fn narrow_codes(&self) -> bool {
        let root = &self.nodes[0];
        root.op == Op::Words
            && root.children.first().is_some_and(|&c| {
                let n = &self.nodes[c];
                n.op == Op::BitPack && n.width.is_some_and(|w| w <= 16)
            })
    }

    /// Whether the expansion comes twice, [`EXPAND_NARROW_NAME`] beside [`EXPAND_NAME`]: a
    /// `strdict` root (of entries of more than one length) whose codes' encoding cannot pass
    /// 2^16, so that the narrow one can stage them as `u16` (the wide one keeps `u32`: from
    /// `u16`, l_shipinstruct's longer strings decoded 1 to 2 % slower).
    pub(super) fn narrow_expansion(&self) -> bool {
        let root = &self.nodes[0];
        root.op == Op::StrDict
            && self.fixed_length(0).is_none()
            && root
                .children
                .first()
                .and_then(|&c| self.code_domain(c))
                .is_some_and(|d| d <= 1 << 16)
    }

    /// Tokens of one tile of this byte-string shape's expansion.
    pub(super) fn tile_tokens(&self) -> u32 {
        if self.narrow_codes() {
            TILE_TOKENS_NARROW
        } else if self.nodes[0].op == Op::Words {
            TILE_TOKENS
        } else {
            TILE_ROWS
        }
    }

    /// Bytes of this byte-string shape's stage.
    pub(super) fn stage_bytes(&self) -> u32 {
        if self.narrow_codes() {
            STAGE_BYTES_NARROW
        } else if self.nodes[0].op == Op::Words {
            STAGE_BYTES
        } else if self.fixed_length(0).is_some() {
            STAGE_BYTES_FIXED
        } else {
            STAGE_BYTES_STRINGS
        }
    }

    /// Segments each expansion block of this byte-string shape takes in turn.
    pub(super) fn segments_per_block(&self) -> u32 {
        if self.fixed_length(0).is_none() && self.nodes[0].op == Op::Words {
            WORDS_SEGMENTS_PER_BLOCK
        } else {
            1
        }
    }

    /// The expansion's loop over the block's segments (`seg`, from the work entry's `seg0`),
    /// around `body`: one barrier between segments, so that the next one's staging waits
    /// for the last one's readers. With one segment a block, just that segment.
    fn segment_loop(&self, w: &mut Writer, body: impl FnOnce(&mut Writer)) {
        if self.segments_per_block() == 1 {
            w.line("const u32 seg = seg0;");
            body(w);
            return;
        }
        // The loop's lines stay at its depth.
        w.line("const u32 zf_nseg = max(1u, (len + ZF_SEG_ROWS - 1u) / ZF_SEG_ROWS);")
            .line(format!(
                "for (u32 seg = seg0; seg < min(seg0 + {}u, zf_nseg); ++seg) {{",
                self.segments_per_block()
            ))
            .line("if (seg != seg0) __syncthreads();");
        body(w);
        w.line("}");
    }

    /// Declares the dynamic shared memory of string kernels once: the dictionary's entry
    /// offsets (both kernels), then for the expansion the tile's token positions, its staged
    /// bytes and the dictionary's bytes.
    fn declare_strings(&mut self) {
        if self.dyn_smem != 0 {
            return;
        }
        // A `strdict` or `plain` segment has one token per row.
        let narrow = self.narrow_codes();
        let (offs, dict, seg_tok) = match self.nodes[0].op {
            Op::Words if narrow => (DICT_OFFSETS, DICT_BYTES, SEGMENT_TOKENS_NARROW),
            Op::Words => (DICT_OFFSETS, DICT_BYTES, SEGMENT_TOKENS),
            Op::StrDict => (DICT_OFFSETS / 4, DICT_BYTES / 4, SEGMENT_ROWS_STRINGS),
            _ => (4, 0, SEGMENT_ROWS_STRINGS),
        };
        // Entries of one length need neither token positions nor staged codes: the smaller
        // block lets more of them share a multiprocessor.
        let fixed = self.fixed_length(0).is_some();
        let (tp_words, code_words) = if fixed {
            (0, 0)
        } else if narrow {
            (self.tile_tokens(), seg_tok / 2)
        } else {
            (self.tile_tokens(), seg_tok)
        };
        // Staged codes: `u16` (in 16-byte groups of eight) for narrow codes, else `u32`.
        let (code_t, code_quad) = if narrow { ("u16", 8) } else { ("u32", 4) };
        let seg_rows = self.segment_rows();
        let words = u32::from(self.nodes[0].op == Op::Words);
        self.dyn_smem = offs * 4;
        // The dictionary's bytes come last, with slack: the expansion reads up to 28 bytes from
        // the word that holds an entry's first byte, 16 bytes into the stage at most.
        let stage = self.stage_bytes();
        self.expand_smem = (offs + tp_words + code_words) * 4 + stage + dict + 48;
        // A stage of either size and codes of either type: the expansion is a template over
        // them (see `narrow_expansion`).
        let (stage_define, code_t, code_words) = if self.narrow_expansion() {
            self.expand_narrow_smem =
                (offs + tp_words + code_words / 2) * 4 + STAGE_BYTES_NARROW_STRINGS + dict + 48;
            (
                "zf_stage_t".to_string(),
                "zf_code_t",
                "(u32)sizeof(ZF_CODE_T) * ZF_SEG_TOK / 4u".to_string(),
            )
        } else {
            (format!("{stage}u"), code_t, format!("{code_words}u"))
        };
        let tile = self.tile_tokens();
        let items = tile / super::STRING_THREADS;
        let rows = seg_rows / super::STRING_THREADS;
        let mut w = Writer::at(0);
        w.blank()
            .directive(format!("#define ZF_STR_OFFS {offs}u"))
            .directive(format!("#define ZF_STR_DICT {dict}u"))
            .directive(format!("#define ZF_STR_STAGE {stage_define}"));
        if self.narrow_expansion() {
            w.directive(format!("#define ZF_STAGE_WIDE {stage}u"))
                .directive(format!(
                    "#define ZF_STAGE_NARROW {STAGE_BYTES_NARROW_STRINGS}u"
                ));
        }
        w.lines(format!(
            r#"#define ZF_SEG_ROWS {seg_rows}u
#define ZF_TILE_TOK {tile}u
#define ZF_SEG_TOK {seg_tok}u
// Consecutive tokens per thread in a tile, consecutive rows per thread in a segment.
#define ZF_TOK_ITEMS {items}u
#define ZF_ROW_ITEMS {rows}u
#if ZF_TILE_TOK != ZF_TOK_ITEMS * ZF_THREADS || ZF_SEG_ROWS != ZF_ROW_ITEMS * ZF_THREADS || ZF_SEG_TOK < ZF_TILE_TOK || ZF_TOK_ITEMS % {code_quad}u != 0u
#error "string tiles and segments must be whole multiples of the block, whole 16 bytes of codes a thread"
#endif
// A `words` segment's counts go where a tile's token positions go later.
#if {words} && ZF_SEG_ROWS > ZF_TILE_TOK
#error "a words segment's counts must fit a tile's token positions"
#endif
"#
        ));
        // Entries of one byte: each warp stages its own pieces of the output.
        if fixed {
            w.lines(format!(
                r#"#define ZF_FIX_PIECE {FIXED_PIECE}u
#if ZF_STR_STAGE < (ZF_THREADS / 32u) * (ZF_FIX_PIECE + 16u)
#error "each warp's piece of the output must fit the stage"
#endif
"#
            ));
        }
        w.lines(format!(
            r#"// Dynamic shared memory: dictionary offsets (the first kernel uses only these), a tile's
// token positions (a segment's counts before), a segment's codes (or a tile's), the tile's
// staged bytes, dictionary bytes.
extern __shared__ __align__(16) u8 zf_dyn[];
#define zf_soff ((u32*)zf_dyn)
#define zf_stp ((u32*)zf_dyn + ZF_STR_OFFS)
#define ZF_CODE_T {code_t}
#define zf_scode ((ZF_CODE_T*)((u32*)zf_dyn + ZF_STR_OFFS + {tp_words}u))
#define zf_stage (zf_dyn + 4u * (ZF_STR_OFFS + {tp_words}u + {code_words}))
#define zf_sdict (zf_stage + ZF_STR_STAGE)
"#
        ))
        .raw(STRING_HELPERS);
        self.src.push_str(&w.finish());
    }

    /// Emits string dictionary `k` (`plain` over byte strings) for both kernels, declaring
    /// `zf_m<k>` (entries), `zf_goff<k>` (offsets, `m + 1`, in the chunk's scratch region) and
    /// `zf_dok<k>` (whether the lengths add up to the bytes); in the expansion, `zf_sb<k>`
    /// says whether the bytes are in shared memory.
    ///
    /// The first kernel sums the lengths into the offsets; both kernels keep every entry's
    /// offset and length packed in shared memory when the dictionary has fewer than
    /// [`DICT_OFFSETS`] entries (`zf_entry` falls back to the offsets for an
    /// entry that does not pack), and the total after them.
    pub(super) fn dict_stage(&mut self, k: usize) -> Result<()> {
        self.declare_strings();
        let n = self.nodes[k].clone();
        let (lengths, bytes) = (n.children[0], n.children[1]);
        let scratch = n.scratch.map_or_else(|| "0".to_string(), |s| s.to_string());
        let (b, nb) = (n.base, self.nodes[bytes].base);
        // The packed entries follow the `m + 1` offsets, padded to 16 bytes (the host sizes
        // the scratch region so).
        let packed = format!("zf_goff{k} + ((zf_m{k} + 4u) & ~3u)");
        let stage = Writer::at(1)
            .lines(format!(
                r#"// node {k}: dictionary: entry offsets (exclusive sum of the lengths) to the chunk's
// scratch region, and to shared memory when they fit
const u32 zf_m{k} = (u32)e.prm[{b}];
const u32 zf_nb{k} = (u32)e.prm[{nb}];
u32* const zf_goff{k} = (u32*)(e.scratch + e.prm[{scratch}]);
u32* const zf_gpk{k} = {packed};
const u32* const zf_doff{k} = zf_m{k} < ZF_STR_OFFS ? zf_soff : zf_goff{k};
// Whether every entry is packed in shared memory.
bool zf_allpk{k} = zf_m{k} < ZF_STR_OFFS;
{{
  u64 carry = 0ull;
  for (u32 i0 = 0u; i0 < zf_m{k}; i0 += ZF_THREADS) {{
    const u32 i = i0 + threadIdx.x;
    const u32 l = i < zf_m{k} ? (u32)zf_n{lengths}(e, i) : 0u;
    u64 tot;
    const u64 s = carry + zf_scan_excl<u64>((u64)l, &tot);
    if (i < zf_m{k}) {{
      const u32 v = (u32)min(s, (u64)0xffffffffu);
      zf_goff{k}[i] = v;
      if (zf_m{k} < ZF_STR_OFFS) {{
        const u32 pk = zf_pack(s, l);
        zf_soff[i] = zf_gpk{k}[i] = pk;
        zf_allpk{k} &= pk != 0xffffffffu;
      }}
    }}
    carry += tot;
  }}
  if (threadIdx.x == 0u) {{
    const u32 v = (u32)min(carry, (u64)0xffffffffu);
    zf_goff{k}[zf_m{k}] = v;
    if (zf_m{k} < ZF_STR_OFFS) zf_soff[zf_m{k}] = zf_gpk{k}[zf_m{k}] = v;
    if (carry != (u64)zf_nb{k}) atomicOr(e.err, ZF_ERR_STR);
  }}
  zf_allpk{k} = __syncthreads_and(zf_allpk{k});
}}
(void)zf_allpk{k};
const bool zf_dok{k} = zf_doff{k}[zf_m{k}] == zf_nb{k};
"#
            ))
            .finish();
        self.stages.push_str(&stage);
        let mut w = Writer::at(1);
        if let Some(length) = self.fixed_length(0) {
            // Entries of one length: entry c at c * L. The expansion reads no offsets, so it
            // runs without the first kernel.
            w.lines(format!(
                r#"// node {k}: dictionary of entries of one length: its bytes, to shared memory
// when they fit
const u32 zf_m{k} = (u32)e.prm[{b}];
const u32 zf_nb{k} = (u32)e.prm[{nb}];
const bool zf_sb{k} = zf_nb{k} + 4u <= ZF_STR_DICT;
"#
            ));
            self.dict_copy(&mut w, k, bytes);
            w.directive(format!(
                "#define zf_dok{k} ((u64)zf_m{k} * ({length}) == (u64)zf_nb{k})"
            ));
            self.expand.push_str(&w.finish());
            return Ok(());
        }
        w.lines(format!(
            r#"// node {k}: dictionary: entry offsets (from the first kernel) and bytes, to shared
// memory when they fit
const u32 zf_m{k} = (u32)e.prm[{b}];
const u32 zf_nb{k} = (u32)e.prm[{nb}];
const u32* const zf_goff{k} = (const u32*)(e.scratch + e.prm[{scratch}]);
const u32* const zf_doff{k} = zf_m{k} < ZF_STR_OFFS ? zf_soff : zf_goff{k};
const bool zf_sb{k} = zf_nb{k} + 4u <= ZF_STR_DICT;
// The longest of the packed entries this thread copies (an entry that does not pack reads
// as 255, and so do all when the offsets are not in shared memory).
u32 zf_lmax{k} = zf_m{k} < ZF_STR_OFFS ? 0u : 255u;
if (zf_m{k} < ZF_STR_OFFS) {{
  // The packed entries the first kernel wrote after the offsets, 16 bytes at a time.
  const uint4* const pk = (const uint4*)({packed});
  for (u32 i = threadIdx.x; i < (zf_m{k} + 4u) >> 2; i += ZF_THREADS) {{
    const uint4 v = pk[i];
    ((uint4*)zf_soff)[i] = v;
    const u32 c = 4u * i;
    zf_lmax{k} = max(zf_lmax{k}, max(max(c < zf_m{k} ? v.x >> 24 : 0u, c + 1u < zf_m{k} ? v.y >> 24 : 0u),
        max(c + 2u < zf_m{k} ? v.z >> 24 : 0u, c + 3u < zf_m{k} ? v.w >> 24 : 0u)));
  }}
}}
"#
        ));
        self.dict_copy(&mut w, k, bytes);
        w.line("// Read after the root's first barrier.")
            .directive(format!(
                "#define zf_dok{k} (zf_doff{k}[zf_m{k}] == zf_nb{k})"
            ));
        self.expand.push_str(&w.finish());
        Ok(())
    }

    /// The copy of string dictionary `k`'s bytes (node `bytes`) to shared memory, where they
    /// fit (`zf_sb<k>`), and `zf_dsh<k>`, where they start there.
    fn dict_copy(&self, w: &mut Writer, k: usize, bytes: usize) {
        // Byte q of the dictionary is at `zf_sdict[zf_dsh + q]`: a plain child is copied 16
        // bytes at a time from the 16 holding its first byte, its last bytes a word at a time.
        if self.nodes[bytes].op == Op::Plain {
            let off = self.nodes[bytes].base + 1;
            w.lines(format!(
                r#"const u32 zf_dsh{k} = (u32)e.prm[{off}] & 15u;
if (zf_sb{k}) {{
  const u32* src = (const u32*)(e.in + (e.prm[{off}] & ~15ull));
  const u32 end = zf_dsh{k} + zf_nb{k}, nq = end >> 4;
  for (u32 i = threadIdx.x; i < nq; i += ZF_THREADS) ((uint4*)zf_sdict)[i] = __ldg((const uint4*)src + i);
  for (u32 i = 4u * nq + threadIdx.x; i < (end + 3u) >> 2; i += ZF_THREADS) ((u32*)zf_sdict)[i] = __ldg(src + i);
}}
"#
            ));
        } else {
            w.line(format!("const u32 zf_dsh{k} = 0u;")).line(format!(
                "if (zf_sb{k}) for (u32 q = threadIdx.x; q < zf_nb{k}; q += ZF_THREADS) zf_sdict[q] = zf_n{bytes}(e, q);"
            ));
        }
    }

    /// Emits `zf_each<k>(e, first, cnt, tid, nth, f)` once: `nth` threads (`tid` is the
    /// caller's index among them: the whole block, or one warp) call `f(i, v)` for every value
    /// `v` at position `first + i` of `u32` node `k`, `i < cnt`, each once, in no particular
    /// order (all `nth` threads must call it). A bit-packed node is read lane by
    /// lane as FastLanes lays it out (each thread walks eight rows of one lane, so a warp's
    /// loads are consecutive words); others value by value. `zf_each<k><true>` gives bit-packed
    /// items and `radix` groups away from the range's edges a path without bounds checks:
    /// it pays where `f` is a few instructions (one-byte entries), and costs registers where
    /// it is not.
    fn stage_values(&mut self, k: usize) -> String {
        let name = format!("zf_each{k}");
        if self.staged.contains(&k) {
            return name;
        }
        self.staged.push(k);
        let n = &self.nodes[k];
        let mut w = Writer::at(0);
        w.blank()
            .line(format!(
                "// node {k}: f(i, value first + i) for i < cnt (the calling threads); SPLIT: a separate"
            ))
            .line("// unchecked path for values away from the range's edges, where the encoding has one")
            .line("template <bool SPLIT = false, typename F>")
            .open(format!(
                "__device__ __forceinline__ void {name}(const Env& e, u32 first, u32 cnt, u32 tid, u32 nth, F f)"
            ));
        if n.op == Op::BitPack && n.ptype == PType::U32 {
            w.lines(format!(
                r#"if (cnt == 0u) return;
const u32* __restrict__ w = (const u32*)(e.in + e.prm[{words}]);
const u32 W = {width};
const u32 v0 = first >> 10, items = (((first + cnt - 1u) >> 10) - v0 + 1u) * 128u;
// Item i: lane i % 32, rows 8 * g .. 8 * g + 8 (g = (i / 32) % 4) of vector v0 + i / 128.
// Row 8 * g + s of a lane holds value 128 * s + 32 * FL_ORDER[g] + lane of its vector; the
// lane's bits run on through its words (32 apart), so each value is a shift of a window.
for (u32 i = tid; i < items; i += nth) {{
  const u32 lane = i & 31u, g = (i >> 5) & 3u, v = v0 + (i >> 7);
  const u32 base = v * 1024u + (((g & 1u) << 1) | (g >> 1)) * 32u + lane;
  if (base + 896u < first || base >= first + cnt) continue;
  if (W == 0u) {{
#pragma unroll
    for (u32 s = 0u; s < 8u; ++s) if (base + 128u * s - first < cnt) f(base + 128u * s - first, 0u);
    continue;
  }}
  const u32* lw = w + (u64)v * (32u * W) + lane;
  const u32 mask = W == 32u ? 0xffffffffu : (1u << W) - 1u;
  const u32 bit = g * 8u * W;
  u32 k = bit >> 5, sh = bit & 31u;
  u64 win = (u64)__ldg(lw + 32u * k) | (k + 1u < W ? (u64)__ldg(lw + 32u * (k + 1u)) << 32 : 0ull);
  // With SPLIT, an item whose eight values all lie in the range (all but the edges) goes
  // unchecked.
  const bool whole = SPLIT && base >= first && base + 896u < first + cnt;
  if (8u * W <= 32u) {{
    // All eight values lie in the window from `sh`: constant shifts.
    const u64 x = win >> sh;
#pragma unroll
    for (u32 s = 0u; s < 8u; ++s) {{
      const u32 p = base + 128u * s - first;
      if (whole || p < cnt) f(p, (u32)(x >> (s * W)) & mask);
    }}
  }} else {{
#pragma unroll
    for (u32 s = 0u; s < 8u; ++s) {{
      const u32 p = base + 128u * s - first;
      if (whole || p < cnt) f(p, (u32)(win >> sh) & mask);
      sh += W;
      if (sh >= 32u) {{
        sh -= 32u;
        ++k;
        win = (win >> 32) | (k + 1u < W ? (u64)__ldg(lw + 32u * (k + 1u)) << 32 : 0ull);
      }}
    }}
  }}
}}
"#,
                words = n.base + 1,
                width = super::width_expr(n),
            ));
        } else if !self.radix_groups(&mut w, k) {
            w.line(format!(
                "for (u32 i = tid; i < cnt; i += nth) f(i, (u32)zf_n{k}(e, first + i));"
            ));
        }
        w.close();
        self.src.push_str(&w.finish());
        name
    }

    /// A statement by which one thread fetches into L2 the stream of node `k` that holds its
    /// values `a .. z` (expressions, `a < z` within the node's values): a bit-packed node's
    /// vectors (under a `for` or not), or a `u32` `radix` node's groups. `None` for other
    /// nodes.
    pub(super) fn prefetch_values(&self, k: usize, a: &str, z: &str) -> Option<String> {
        let n = &self.nodes[k];
        let r = match n.op {
            Op::For => &self.nodes[*n.children.first()?],
            _ => n,
        };
        let (lo, hi) = match r.op {
            // A vector is 1024 values of the width's bits, whatever their type.
            Op::BitPack => {
                let vb = format!("128u * ({})", super::width_expr(r));
                (
                    format!("(size_t)(({a}) >> 10) * ({vb})"),
                    format!("(size_t)((({z}) - 1u) >> 10) * ({vb}) + {vb}"),
                )
            }
            Op::Radix if n.ptype == PType::U32 && r.ptype == PType::U32 => {
                let base = r.width.filter(|b| (2..=255).contains(b))?;
                let (m, bits) = zipflow_encodings::radix::layout(base);
                // Up to the last group's first word (which its reader loads).
                let word = |v: &str| format!("4u * (size_t)(((u64)(({v}) / {m}u) * {bits}u) >> 5)");
                (word(a), format!("{} + 4u", word(&format!("({z}) - 1u"))))
            }
            _ => return None,
        };
        Some(format!(
            "zf_prefetch_l2(e.in + e.prm[{}], {lo}, {hi});",
            r.base + 1
        ))
    }

    /// Declares `zf_codes8_<k>` for bit-packed node `k` (at most 16 bits, compiled in) and
    /// returns its name: it stages codes `first .. first + cnt` (`first` a multiple of
    /// eight) as `u16` at `dst[i - first]`, eight a thread and one 16-byte store. Eight
    /// consecutive values from a multiple of eight lie in eight neighbouring lanes of one
    /// row of their vector, at the same bits of each lane's word, so a thread reads them as
    /// two 16-byte words (four when they run into the next word), where the staging by
    /// `zf_each<k>` takes one lane's eight rows and stores each code alone. The codes past
    /// `first + cnt` in the last eight lie in the same vector.
    fn codes_by_eight(&mut self, k: usize) -> String {
        let name = format!("zf_codes8_{k}");
        let n = &self.nodes[k];
        let (words, width) = (n.base + 1, super::width_expr(n));
        let mut w = Writer::at(0);
        w.blank()
            .line(format!(
                "// node {k}: codes first .. first + cnt (first a multiple of 8) to dst as u16, eight a thread."
            ))
            .open(format!(
                "__device__ __forceinline__ void {name}(const Env& e, u32 first, u32 cnt, ZF_CODE_T* dst)"
            ))
            .lines(format!(
                r#"const u32* __restrict__ w = (const u32*)(e.in + e.prm[{words}]);
const u32 W = {width}, m = W == 32u ? 0xffffffffu : (1u << W) - 1u;
// Whole 16-byte words when the stream is so aligned (its vectors and rows are).
const bool quad = ((size_t)w & 15u) == 0u;
for (u32 q = threadIdx.x; q < (cnt + 7u) >> 3; q += ZF_THREADS) {{
  u32 c[8] = {{0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u}};
  if (W != 0u) {{
    // Value r of its vector: lane r % 32, row 8 * FL_ORDER[(r / 32) % 4] + r / 128.
    const u32 i = first + 8u * q, r = i & 1023u, gq = (r >> 5) & 3u;
    const u32 bit = (8u * (((gq & 1u) << 1) | (gq >> 1)) + (r >> 7)) * W, sh = bit & 31u;
    const u32* const lw = w + (u64)(i >> 10) * (32u * W) + 32u * (bit >> 5) + (r & 24u);
    u32 a[8], b[8] = {{0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u}};
    if (quad) {{
      const uint4 a0 = __ldg((const uint4*)lw), a1 = __ldg((const uint4*)lw + 1);
      a[0] = a0.x; a[1] = a0.y; a[2] = a0.z; a[3] = a0.w; a[4] = a1.x; a[5] = a1.y; a[6] = a1.z; a[7] = a1.w;
      if (sh + W > 32u) {{
        const uint4 b0 = __ldg((const uint4*)(lw + 32u)), b1 = __ldg((const uint4*)(lw + 32u) + 1);
        b[0] = b0.x; b[1] = b0.y; b[2] = b0.z; b[3] = b0.w; b[4] = b1.x; b[5] = b1.y; b[6] = b1.z; b[7] = b1.w;
      }}
    }} else {{
#pragma unroll
      for (u32 j = 0u; j < 8u; ++j) a[j] = __ldg(lw + j);
      if (sh + W > 32u) {{
#pragma unroll
        for (u32 j = 0u; j < 8u; ++j) b[j] = __ldg(lw + 32u + j);
      }}
    }}
#pragma unroll
    for (u32 j = 0u; j < 8u; ++j) c[j] = __funnelshift_r(a[j], b[j], sh) & m;
  }}
  ((uint4*)dst)[q] = make_uint4(c[0] | (c[1] << 16), c[2] | (c[3] << 16), c[4] | (c[5] << 16), c[6] | (c[7] << 16));
}}
"#
            ))
            .close();
        self.src.push_str(&w.finish());
        name
    }

    /// The body of `zf_each<k>` for a `u32` `radix` node, or `for` over one: each thread
    /// takes whole groups (one or two loads for their digits) and peels the digits off with
    /// one constant division each, instead of dividing a group by a power of the base for
    /// every value. Written to `w`; `false`, and nothing written, for other nodes.
    fn radix_groups(&self, w: &mut Writer, k: usize) -> bool {
        let n = &self.nodes[k];
        let (r, add) = match n.op {
            Op::Radix => (n, String::new()),
            Op::For => match n.children.first() {
                Some(&c) => (&self.nodes[c], format!(" + (u32)e.prm[{}]", n.base + 1)),
                None => return false,
            },
            _ => return false,
        };
        if n.ptype != PType::U32 || r.op != Op::Radix || r.ptype != PType::U32 {
            return false;
        }
        let Some(base) = r.width.filter(|b| (2..=255).contains(b)) else {
            return false;
        };
        let (m, bits) = zipflow_encodings::radix::layout(base);
        w.lines(format!(
            r#"if (cnt == 0u) return;
// radix({base}): {m} digits in {bits} bits a group.
const u32* __restrict__ w = (const u32*)(e.in + e.prm[{off}]);
const u32 G1 = (first + cnt - 1u) / {m}u + 1u;
"#,
            off = r.base + 1,
        ))
        .open(format!(
            "for (u32 g = first / {m}u + tid; g < G1; g += nth)"
        ));
        super::radix_group(w, base);
        w.lines(format!(
            r#"const u32 i0 = g * {m}u - first;
if (SPLIT && g * {m}u >= first && i0 + {m}u <= cnt) {{
  // With SPLIT, a whole group (all but the edges): its digits go unchecked.
#pragma unroll
  for (u32 d = 0u; d < {m}u; ++d) {{
    const u32 q = rest / {base}u;
    f(i0 + d, (rest - q * {base}u){add});
    rest = q;
  }}
}} else {{
#pragma unroll
  for (u32 d = 0u; d < {m}u; ++d) {{
    const u32 q = rest / {base}u, i = i0 + d;
    if (i < cnt) f(i, (rest - q * {base}u){add});
    rest = q;
  }}
}}
"#
        ))
        .close();
        true
    }

    /// The length of every entry of `strdict` root `k`'s dictionary, as an expression, when
    /// the shape fixes them all to one: lengths `constant`, or `for` over `bitpack(0)`.
    pub(super) fn fixed_length(&self, k: usize) -> Option<String> {
        let n = &self.nodes[k];
        if n.op != Op::StrDict {
            return None;
        }
        let dict = &self.nodes[*n.children.get(1)?];
        let lengths = &self.nodes[*dict.children.first()?];
        match lengths.op {
            Op::Constant => Some(format!("(u32)e.prm[{}]", lengths.base + 1)),
            Op::For => {
                let below = &self.nodes[*lengths.children.first()?];
                (below.op == Op::BitPack && below.width == Some(0))
                    .then(|| format!("(u32)e.prm[{}]", lengths.base + 1))
            }
            _ => None,
        }
    }

    /// The number of values node `k`'s encoding can express at all, where the shape fixes
    /// it: a `radix` base, or two to a compiled `bitpack` width.
    pub(super) fn code_domain(&self, k: usize) -> Option<u32> {
        let n = &self.nodes[k];
        match n.op {
            Op::Radix => n.width,
            Op::BitPack => n.width.filter(|&w| w < 32).map(|w| 1u32 << w),
            _ => None,
        }
    }

    /// A `strdict` root whose entries all have `length` bytes: row `r`'s bytes start at
    /// `r * length`, so the segment table is arithmetic and each row is expanded on its own
    /// (its code, its bytes, its offset), with no sum over the rows.
    fn fixed_strings(&mut self, k: usize, length: &str) {
        let n = self.nodes[k].clone();
        let (b, codes, d) = (n.base, n.children[0], n.children[1]);
        let table = Writer::at(1)
            .scope(format!(
                "node {k}: strdict (entries of one length): the segment table is arithmetic"
            ))
            .lines(format!(
                r#"const u32 n = len, L = {length};
const u32 claimed = (u32)e.prm[{claimed}];
u32* const tab = (u32*)(e.scratch + e.prm[{tab}]);
const u32 nseg = max(1u, (n + ZF_SEG_ROWS - 1u) / ZF_SEG_ROWS);
for (u32 s = threadIdx.x; s <= nseg; s += ZF_THREADS) {{
  const u32 r = min(s * ZF_SEG_ROWS, n);
  tab[2u * s] = r;
  tab[2u * s + 1u] = (u32)min((u64)r * L, (u64)claimed);
}}
if (threadIdx.x == 0u && ((u64)n * L != (u64)claimed || !zf_dok{d})) atomicOr(e.err, ZF_ERR_STR);
"#,
                claimed = b + 2,
                tab = b + 4,
            ))
            .close()
            .finish();
        self.stages.push_str(&table);
        let each = self.stage_values(codes);
        let mut w = Writer::at(1);
        self.segment_loop(&mut w, |w| {
            w.scope(format!(
                "node {k}: strdict (entries of one length L): row r's bytes at r * L"
            ))
            .lines(format!(
                r#"const u32 n = len, L = {length};
const u64 at = e.prm[{at}];
const u32 claimed = (u32)e.prm[{claimed}];
const u32 ow = (u32)e.prm[{ow}];
const u32 r0 = seg * ZF_SEG_ROWS, r1 = min(r0 + ZF_SEG_ROWS, n);
__syncthreads();
// Uniform: the chunk's bytes are its rows' and the dictionary's lengths add up.
if ((u64)n * L != (u64)claimed || !zf_dok{d}) {{
  if (threadIdx.x == 0u) atomicOr(e.err, ZF_ERR_STR);
  return;
}}
// The offsets need no codes: 16 bytes a store where the offsets are so aligned.
if (ow != 0u && ((size_t)o & 15u) == 0u && r0 % 4u == 0u) {{
  for (u32 r = r0 + 4u * threadIdx.x; r < r1; r += 4u * ZF_THREADS) {{
    const u64 v = at + (u64)r * L;
    if (r + 4u > r1) {{
      for (u32 x = r; x < r1; ++x) {{
        if (ow == 8u) ((u64*)o)[x] = v + (u64)(x - r) * L; else ((u32*)o)[x] = (u32)(v + (u64)(x - r) * L);
      }}
    }} else if (ow == 8u) {{
      ((ulonglong2*)o)[r / 2u] = make_ulonglong2(v, v + L);
      ((ulonglong2*)o)[r / 2u + 1u] = make_ulonglong2(v + 2u * L, v + 3u * L);
    }} else {{
      const u32 w = (u32)v;
      ((uint4*)o)[r / 4u] = make_uint4(w, w + L, w + 2u * L, w + 3u * L);
    }}
  }}
}} else if (ow == 8u) {{
  for (u32 r = r0 + threadIdx.x; r < r1; r += ZF_THREADS) ((u64*)o)[r] = at + (u64)r * L;
}} else if (ow == 4u) {{
  for (u32 r = r0 + threadIdx.x; r < r1; r += ZF_THREADS) ((u32*)o)[r] = (u32)(at + (u64)r * L);
}}
"#,
                at = b + 1,
                claimed = b + 2,
                ow = b + 3,
            ));
            self.fixed_bytes(w, codes, d, &each);
            w.lines(
                r#"if (r1 == n && threadIdx.x == 0u) {
  if (ow == 8u) ((u64*)o)[n] = at + claimed;
  else if (ow == 4u) ((u32*)o)[n] = (u32)(at + claimed);
}
"#,
            )
            .close();
        });
        self.expand.push_str(&w.finish());
    }

    /// The bytes of a segment of `strdict` rows whose entries all have `L` bytes: their codes
    /// (node `codes`, read by `each`) looked up in dictionary `d`.
    fn fixed_bytes(&self, w: &mut Writer, codes: usize, d: usize, each: &str) {
        let bytes = self.nodes[d].children[1];
        let (domain, trusted) = match self.code_domain(codes) {
            Some(dom) => (format!("codes below {dom}"), format!("{dom}u <= zf_m{d}")),
            None => ("here unknown".to_string(), "false".to_string()),
        };
        w.lines(format!(
            r#"if (zf_sb{d} && L == 1u) {{
  // One byte a row (flags): each warp takes ZF_FIX_PIECE bytes of the output at a time
  // (at its 16-byte alignment), looks its rows' codes up into its own part of the stage
  // and stores them 16 bytes a lane; no block barrier.
  const u32 lane = threadIdx.x & 31u;
  u8* const wst = zf_stage + (threadIdx.x >> 5) * (ZF_FIX_PIECE + 16u);
  const u64 ga = at + r0, gz = at + r1, gb = ga & ~15ull;
  const u32 npc = (u32)((gz - gb + ZF_FIX_PIECE - 1u) / ZF_FIX_PIECE);
  // Up to eight entries: the dictionary in two registers, and a code's byte one byte
  // permute. When the codes' encoding cannot reach past the dictionary ({domain}), they
  // go unchecked.
  u32 dl = 0u, dh = 0u;
#pragma unroll
  for (u32 x = 0u; x < 4u; ++x) {{
    dl |= (u32)zf_sdict[zf_dsh{d} + x] << (8u * x);
    dh |= (u32)zf_sdict[zf_dsh{d} + 4u + x] << (8u * x);
  }}
  const bool trusted = zf_m{d} <= 8u && {trusted};
  for (u32 pc = threadIdx.x >> 5; pc < npc; pc += ZF_THREADS / 32u) {{
    const u64 pa = max(gb + (u64)pc * ZF_FIX_PIECE, ga), pz = min(gb + (u64)(pc + 1u) * ZF_FIX_PIECE, gz);
    u8* const st = wst + ((u32)pa & 15u);
    if (trusted) {{
      {each}<true>(e, (u32)(pa - at), (u32)(pz - pa), lane, 32u, [&](u32 i, u32 c) {{
        st[i] = (u8)zf_pick8(dl, dh, c);
      }});
    }} else {{
      {each}(e, (u32)(pa - at), (u32)(pz - pa), lane, 32u, [&](u32 i, u32 c) {{
        if (c < zf_m{d}) st[i] = zf_sdict[zf_dsh{d} + c]; else atomicOr(e.err, ZF_ERR_DICT);
      }});
    }}
    __syncwarp();
    zf_store_from(out, wst, pa, pz, lane, 32u);
    __syncwarp();
  }}
}} else if (zf_sb{d} && L != 0u && L <= ZF_STR_STAGE / 64u) {{
  // Windows of rows: their bytes assembled in the stage at the output's alignment (the
  // codes decoded as their encoding lays them out), then stored 16 bytes at a time.
  const u32 wrows = (ZF_STR_STAGE - 16u) / L;
  for (u32 w0 = r0; w0 < r1; w0 += wrows) {{
    const u32 wn = min(wrows, r1 - w0);
    const u64 g0 = at + (u64)w0 * L, g1 = g0 + (u64)wn * L;
    u8* const st = zf_stage + ((u32)g0 & 15u);
    {each}(e, w0, wn, threadIdx.x, ZF_THREADS, [&](u32 i, u32 c) {{
      if (c < zf_m{d}) {{
        const u8* const src = zf_sdict + zf_dsh{d} + c * L;
        u8* const dst = st + i * L;
        for (u32 x = 0u; x < L; ++x) dst[x] = src[x];
      }} else {{
        atomicOr(e.err, ZF_ERR_DICT);
      }}
    }});
    __syncthreads();
    zf_store_stage(out, g0, g1);
    __syncthreads();
  }}
}} else {{
  // Long entries, or a dictionary past shared memory: one row a thread.
  for (u32 r = r0 + threadIdx.x; r < r1; r += ZF_THREADS) {{
    const u32 c = (u32)zf_n{codes}(e, r);
    const u64 g = at + (u64)r * L;
    if (c >= zf_m{d}) {{
      atomicOr(e.err, ZF_ERR_DICT);
    }} else if (zf_sb{d}) {{
      const u8* src = zf_sdict + zf_dsh{d} + c * L;
      for (u32 x = 0u; x < L; ++x) out[g + x] = src[x];
    }} else {{
      for (u32 x = 0u; x < L; ++x) out[g + x] = zf_n{bytes}(e, c * L + x);
    }}
  }}
}}
"#
        ));
    }
}
