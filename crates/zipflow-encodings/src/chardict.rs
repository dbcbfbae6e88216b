//! Character-dictionary coding of text bytes: `chardict16`, the published coder, and the bit
//! engine it shares with [`chartable`](crate::chartable).
//!
//! `chardict16` gives the 16 preselected characters `' ' e t a o i n s r h l d u c m f`
//! (index 0..15) a 5-bit code, a flag bit `1` then the 4-bit index; every other byte costs 9
//! bits, a flag bit `0` then the byte. Codes are written most-significant bit first into one
//! contiguous bit stream, with no padding between chunks; the input is cut into chunks of
//! [`CHUNK`] bytes. Unlike the published coder, the node also stores where each chunk's codes
//! start, so any chunk decodes alone and chunks decode in parallel; that index costs 4 bytes per
//! chunk (0.39 % of the input).
//!
//! Node: meta = total bits of the stream (u64); buffer 0 = the bit stream, exactly
//! `ceil(total / 8)` bytes, the bits after the last code zero; buffer 1 = the starting bit
//! offset of every chunk (u32 each, the first 0); no children.
//!
//! Encoding runs in three parallel steps: per-chunk bit counts, a prefix sum for the offsets,
//! then every chunk assembles its codes straight into the output. A chunk owns the output bytes
//! from the byte holding its first bit up to (excluding) the byte holding its end; the partial
//! byte at its end is shared with the next chunk, so each chunk returns those bits and they are
//! OR-ed in afterwards. Decoding looks up 12 bits at a time in a table (16 KiB, L1-resident)
//! that yields up to three characters per lookup, four lookups per 64-bit load, and runs four
//! chunks interleaved so the core overlaps their independent lookup chains; groups of chunks
//! decode in parallel. Within a chunk decoding is serial (codes have variable length), hence
//! [`Pattern::Serial`]: parallel only across chunks, whose output positions are fixed.

use crate::node::{EncodedNode, NodeView};
use crate::{Encoding, Pattern, Scratch, Slot};
use rayon::prelude::*;
use std::sync::OnceLock;
use zipflow_core::{Error, IntVec, PType, Plan, Result, Values};

/// `chardict16`.
pub struct CharDict16;

/// On-disk id of [`CharDict16`].
pub const ID: u16 = DESCRIPTOR.id;

/// Bytes per chunk: the unit of random access and of parallel work.
pub const CHUNK: usize = 1024;

/// The published coder's characters, in index order.
pub const PRESET: [u8; 16] = *b" etaoinsrhlducmf";

/// Bits a lookup of the decoding table covers: 2^12 entries of 4 bytes stay in L1, where a
/// 15-bit table (up to three characters a lookup instead of two) waits on L2 and decodes slower.
const WINDOW: u32 = 12;

/// Chunks decoded interleaved: their code chains are independent, so the core overlaps them.
const LANES: usize = 4;

/// Chunks per parallel task: fewer would spend more on scheduling than on decoding.
const MIN_TASK_CHUNKS: usize = 32;

/// A prefix code over bytes. With one tier: `2^k` chosen characters cost `1 + k` bits (a `1`,
/// then the character's index), every other byte 9 bits (a `0`, then the byte). With a second
/// tier of `2^k2` characters: the first tier as before, the second `2 + k2` bits (`01`, then the
/// index), every other byte 10 bits (`00`, then the byte). Codes are at most 10 bits long.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CharCode {
    k: u32,
    k2: Option<u32>,
    /// The first tier's characters, then the second's.
    chars: Vec<u8>,
}

impl CharCode {
    /// The one-tier code giving `chars` (a power of two, 1 to 128 distinct bytes) their
    /// indices.
    pub fn new(chars: &[u8]) -> Result<CharCode> {
        Self::with_tiers(chars, &[])
    }

    /// The code whose first tier is `first` and second tier `second` (each a power of two, 1 to
    /// 128 distinct bytes; `second` empty for a one-tier code).
    pub fn with_tiers(first: &[u8], second: &[u8]) -> Result<CharCode> {
        let width = |n: usize| {
            if !n.is_power_of_two() || n > 128 {
                return Err(Error::corrupt(format!(
                    "a character table tier holds {n} characters, not a power of two up to 128"
                )));
            }
            Ok(n.ilog2())
        };
        let k = width(first.len())?;
        let k2 = if second.is_empty() {
            None
        } else {
            Some(width(second.len())?)
        };
        let mut seen = [false; 256];
        for &c in first.iter().chain(second) {
            if std::mem::replace(&mut seen[usize::from(c)], true) {
                return Err(Error::corrupt(format!(
                    "character {c:#04x} appears twice in a table"
                )));
            }
        }
        Ok(CharCode {
            k,
            k2,
            chars: [first, second].concat(),
        })
    }

    /// All the table's characters: the first tier's, then the second's, each in index order.
    pub fn chars(&self) -> &[u8] {
        &self.chars
    }

    /// Index bits of the first tier (`k`) and of the second, if any (`k2`).
    pub fn index_bits(&self) -> (u32, Option<u32>) {
        (self.k, self.k2)
    }

    /// Bits of a byte in no tier: 9 for one tier, 10 for two.
    pub fn escape_bits(&self) -> u32 {
        if self.k2.is_some() { 10 } else { 9 }
    }

    /// Each tier's characters and their code length in bits.
    pub fn tiers(&self) -> impl Iterator<Item = (&[u8], u32)> {
        let (first, second) = self.chars.split_at(1 << self.k);
        std::iter::once((first, 1 + self.k)).chain(self.k2.map(|k2| (second, 2 + k2)))
    }

    /// Code length in bits of every byte.
    pub fn lengths(&self) -> [u8; 256] {
        let mut l = [self.escape_bits() as u8; 256];
        for (chars, len) in self.tiers() {
            for &c in chars {
                l[usize::from(c)] = len as u8;
            }
        }
        l
    }

    /// Code of every byte: the code's bits in the low 16 bits, its length above them.
    pub fn encoder(&self) -> [u32; 256] {
        let esc = self.escape_bits();
        let mut e: [u32; 256] = std::array::from_fn(|b| b as u32 | (esc << 16));
        for (t, (chars, len)) in self.tiers().enumerate() {
            // Tier prefixes: `1` for the first, `01` for the second.
            let prefix = 1u32 << (len - 1 - t as u32);
            for (i, &c) in chars.iter().enumerate() {
                e[usize::from(c)] = (prefix | i as u32) | (len << 16);
            }
        }
        e
    }

    /// The character and code length at the top of `v`, `rest` bits wide, if a whole code
    /// fits there.
    fn decode_one(&self, v: u32, rest: u32) -> Option<(u8, u32)> {
        let bit = |i: u32| (v >> (rest - 1 - i)) & 1;
        let field = |len: u32, bits: u32| (v >> (rest - len)) & ((1 << bits) - 1);
        let (first, second) = self.chars.split_at(1 << self.k);
        let (c, len) = if bit(0) == 1 {
            let len = 1 + self.k;
            (len <= rest).then(|| (first[field(len, self.k) as usize], len))?
        } else if let Some(k2) = self.k2 {
            if rest < 2 {
                return None;
            }
            if bit(1) == 1 {
                let len = 2 + k2;
                (len <= rest).then(|| (second[field(len, k2) as usize], len))?
            } else {
                (10 <= rest).then(|| (field(10, 8) as u8, 10))?
            }
        } else {
            (9 <= rest).then(|| (field(9, 8) as u8, 9))?
        };
        Some((c, len))
    }

    /// Every 10-bit window's first code (codes are at most 10 bits): the character in the low
    /// 8 bits, the code's length in bits above them. For decoders other than this crate's.
    pub fn table10(&self) -> Vec<u16> {
        (0..1u32 << 10)
            .map(|v| {
                let (c, len) = self.decode_one(v, 10).unwrap_or((0, 10));
                u16::from(c) | (len as u16) << 8
            })
            .collect()
    }

    /// The decoding table for a [`WINDOW`]-bit lookup (longer than any code, so every entry
    /// holds a character). Entry: up to three characters in bytes 0..2, their count in bits
    /// 24..25, the bits they take in bits 26..31.
    pub(crate) fn decoder(&self) -> Decoder {
        let mut lut = Box::new([0u32; 1 << WINDOW]);
        for (v, slot) in (0..1u32 << WINDOW).zip(lut.iter_mut()) {
            let (mut used, mut count, mut entry) = (0u32, 0u32, 0u32);
            while count < 3 && used < WINDOW {
                let Some((c, len)) = self.decode_one(v, WINDOW - used) else {
                    break;
                };
                entry |= u32::from(c) << (8 * count);
                count += 1;
                used += len;
            }
            *slot = entry | (count << 24) | (used << 26);
        }
        Decoder {
            lut: Some(lut),
            code: self.clone(),
        }
    }

    /// A decoder that reads one code at a time, for a few blocks, where building the table
    /// would cost more than it saves.
    pub(crate) fn decoder_without_table(&self) -> Decoder {
        Decoder {
            lut: None,
            code: self.clone(),
        }
    }
}

/// A [`CharCode`]'s decoding table.
pub(crate) struct Decoder {
    lut: Option<Box<[u32; 1 << WINDOW]>>,
    code: CharCode,
}

/// `n <= 16` bits of `payload` from bit `pos`, most significant first; bits past the end read
/// as zeros.
#[inline]
pub(crate) fn peek(payload: &[u8], pos: u64, n: u32) -> u32 {
    let byte = usize::try_from(pos >> 3).unwrap_or(usize::MAX);
    let at = |i: usize| u32::from(payload.get(byte.saturating_add(i)).copied().unwrap_or(0));
    let w = (at(0) << 16) | (at(1) << 8) | at(2);
    (w >> (24 - (pos & 7) as u32 - n)) & ((1 << n) - 1)
}

/// One chunk being decoded: its next bit, its output and how much of it is written.
pub(crate) struct Lane<'o, 'd> {
    pub pos: u64,
    pub k: usize,
    pub out: &'o mut [u8],
    pub dec: &'d Decoder,
}

impl Lane<'_, '_> {
    /// Whether [`Lane::step`] may run: a table, 16 bytes of room in `out` (four lookups of up to three
    /// characters, each storing four bytes) and eight bytes to load.
    #[inline(always)]
    fn can_step(&self, payload: &[u8]) -> bool {
        self.dec.lut.is_some()
            && self.k + 16 <= self.out.len()
            && (self.pos >> 3) + 8 <= payload.len() as u64
    }

    /// Four table lookups from one 64-bit load (at most 48 of its at least 57 fresh bits).
    ///
    /// # Safety
    /// [`Lane::can_step`] must hold.
    #[inline(always)]
    unsafe fn step(&mut self, payload: &[u8]) {
        let Some(lut) = self.dec.lut.as_deref() else {
            return;
        };
        let byte = (self.pos >> 3) as usize;
        // SAFETY: `can_step` checked `byte + 8 <= payload.len()`.
        let src = unsafe {
            payload
                .as_ptr()
                .add(byte)
                .cast::<[u8; 8]>()
                .read_unaligned()
        };
        let mut w = u64::from_be_bytes(src) << (self.pos & 7);
        let mut used = 0u32;
        for _ in 0..4 {
            let e = lut[(w >> (64 - WINDOW)) as usize];
            // SAFETY: `can_step` checked `k + 16 <= out.len()` on entry; each lookup advances
            // `k` by at most 3, so this store ends by `k + 9 + 4`.
            unsafe {
                self.out
                    .as_mut_ptr()
                    .add(self.k)
                    .cast::<[u8; 4]>()
                    .write_unaligned(e.to_le_bytes());
            }
            let bits = e >> 26;
            self.k += ((e >> 24) & 3) as usize;
            used += bits;
            w <<= bits;
        }
        self.pos += u64::from(used);
    }

    /// Decodes the rest of the chunk: table lookups while there is room, then one code at a
    /// time with bounds-checked reads (bits past the end read as zeros). Returns the bit after
    /// the last code.
    fn finish(&mut self, payload: &[u8]) -> u64 {
        while self.can_step(payload) {
            // SAFETY: `can_step` holds.
            unsafe { self.step(payload) };
        }
        while let Some(o) = self.out.get_mut(self.k) {
            // Codes are at most 10 bits, so one always fits.
            let (c, len) = self
                .dec
                .code
                .decode_one(peek(payload, self.pos, 10), 10)
                .unwrap_or((0, 10));
            *o = c;
            self.pos += u64::from(len);
            self.k += 1;
        }
        self.pos
    }
}

/// Decodes `out.len()` characters coded by `dec` from bit `start` of `payload` and returns the
/// bit position after the last code. Never reads out of bounds: corrupt input decodes to some
/// bytes and an end position the caller checks.
#[cfg(test)]
pub(crate) fn decode_block(payload: &[u8], start: u64, dec: &Decoder, out: &mut [u8]) -> u64 {
    Lane {
        pos: start,
        k: 0,
        out,
        dec,
    }
    .finish(payload)
}

/// How one chunk is coded: announcement bits first (`prefix_len` of them), then its bytes by
/// `enc` (a [`CharCode::encoder`]).
pub(crate) struct BlockCode<'a> {
    pub prefix: u32,
    pub prefix_len: u32,
    pub enc: &'a [u32; 256],
}

/// Writes one chunk into `dst`, the bytes it owns, its first bit at bit `lead` of `dst[0]`;
/// returns the bits of its last, partial byte (shared with the next chunk), left-aligned.
fn write_block(dst: &mut [u8], lead: u32, code: &BlockCode<'_>, data: &[u8]) -> u8 {
    let mut acc = u64::from(code.prefix);
    let mut n = lead + code.prefix_len;
    let mut w = 0usize;
    let mut i = 0usize;
    // Three codes (at most 27 bits on top of fewer than 13 pending), then a branch-free flush
    // of every whole byte with one 8-byte store while the chunk's bytes have room for it;
    // bytes past the whole ones are rewritten by the next store.
    while i + 3 <= data.len() && w + 8 <= dst.len() {
        for &c in &data[i..i + 3] {
            let e = code.enc[usize::from(c)];
            let len = e >> 16;
            acc = (acc << len) | u64::from(e & 0xffff);
            n += len;
        }
        i += 3;
        dst[w..w + 8].copy_from_slice(&(acc << (64 - n)).to_be_bytes());
        w += (n / 8) as usize;
        n %= 8;
    }
    for &c in &data[i..] {
        let e = code.enc[usize::from(c)];
        let len = e >> 16;
        acc = (acc << len) | u64::from(e & 0xffff);
        n += len;
        if n >= 32 {
            n -= 32;
            dst[w..w + 4].copy_from_slice(&((acc >> n) as u32).to_be_bytes());
            w += 4;
        }
    }
    while n >= 8 {
        n -= 8;
        dst[w] = (acc >> n) as u8;
        w += 1;
    }
    debug_assert_eq!(w, dst.len());
    if n == 0 { 0 } else { (acc << (8 - n)) as u8 }
}

/// Writes the chunks of `input` into one bit stream of `offsets[nchunks]` bits, chunk `i` from
/// bit `offsets[i]` (which the caller computed from the same codes), all chunks in parallel.
pub(crate) fn assemble<'a>(
    input: &[u8],
    offsets: &[u64],
    code: impl Fn(usize) -> BlockCode<'a> + Sync,
) -> Vec<u8> {
    let nchunks = offsets.len() - 1;
    let total = offsets[nchunks];
    let mut out = vec![0u8; total.div_ceil(8) as usize];
    // Chunk i owns bytes [offsets[i] / 8, offsets[i + 1] / 8): disjoint, in order.
    let mut parts = Vec::with_capacity(nchunks);
    let mut rest = &mut out[..];
    for w in offsets.windows(2) {
        let (mine, next) = rest.split_at_mut((w[1] / 8 - w[0] / 8) as usize);
        parts.push(mine);
        rest = next;
    }
    let tails: Vec<u8> = parts
        .into_par_iter()
        .enumerate()
        .with_min_len(MIN_TASK_CHUNKS)
        .map(|(i, dst)| {
            let data = &input[i * CHUNK..((i + 1) * CHUNK).min(input.len())];
            write_block(dst, (offsets[i] % 8) as u32, &code(i), data)
        })
        .collect();
    // A chunk's first byte has zeros where the previous chunk's last bits go.
    for (i, &t) in tails.iter().enumerate() {
        let end = offsets[i + 1];
        if !end.is_multiple_of(8) {
            out[(end / 8) as usize] |= t;
        }
    }
    out
}

/// Bits every chunk of `input` takes under `lengths`, in parallel.
pub(crate) fn chunk_bits(input: &[u8], lengths: &[u8; 256]) -> Vec<u64> {
    input
        .par_chunks(CHUNK)
        .with_min_len(MIN_TASK_CHUNKS)
        .map(|c| c.iter().map(|&b| u64::from(lengths[usize::from(b)])).sum())
        .collect()
}

/// Decodes every chunk of `out`: `block` gives chunk `i`'s first code's bit (after any
/// announcement, which it checks) and decoder, given the chunk's start bit. Chunks run
/// [`LANES`] at a time interleaved, groups in parallel; chunk `i` must end where chunk `i + 1`
/// starts (`offsets` holds `nchunks + 1` positions).
pub(crate) fn decode_chunks<'d>(
    out: &mut [u8],
    payload: &[u8],
    offsets: &[u64],
    block: impl Fn(usize, u64) -> Result<(u64, &'d Decoder)> + Sync,
) -> Result<()> {
    out.par_chunks_mut(LANES * CHUNK)
        .enumerate()
        .with_min_len(MIN_TASK_CHUNKS / LANES)
        .try_for_each(|(g, o)| {
            let first = g * LANES;
            let mut lanes = Vec::with_capacity(LANES);
            for (j, out) in o.chunks_mut(CHUNK).enumerate() {
                let (pos, dec) = block(first + j, offsets[first + j])?;
                lanes.push(Lane { pos, k: 0, out, dec });
            }
            if let Ok(four) = <&mut [Lane<'_, '_>; LANES]>::try_from(&mut lanes[..]) {
                while four.iter().all(|l| l.can_step(payload)) {
                    for l in four.iter_mut() {
                        // SAFETY: `can_step` holds for every lane.
                        unsafe { l.step(payload) };
                    }
                }
            }
            for (j, l) in lanes.iter_mut().enumerate() {
                let i = first + j;
                let end = l.finish(payload);
                if end != offsets[i + 1] {
                    return Err(Error::corrupt(format!(
                        "chunk {i} of a character-coded stream ends at bit {end}, the next starts at {}",
                        offsets[i + 1]
                    )));
                }
            }
            Ok(())
        })
}

/// Checks a stream of `total` bits whose chunks start at `starts`, and returns the starts with
/// `total` appended: the first is 0, they never decrease, the stream is exactly
/// `ceil(total / 8)` bytes and its bits past `total` are zero.
pub(crate) fn check_stream(payload: &[u8], starts: Vec<u64>, total: u64) -> Result<Vec<u64>> {
    if payload.len() as u64 != total.div_ceil(8) {
        return Err(Error::corrupt(format!(
            "a character-coded stream of {total} bits has {} bytes",
            payload.len()
        )));
    }
    if starts.first().is_some_and(|&s| s != 0) {
        return Err(Error::corrupt("the first chunk does not start at bit 0"));
    }
    let mut offsets = starts;
    offsets.push(total);
    if let Some(i) = offsets.windows(2).position(|w| w[0] > w[1]) {
        return Err(Error::corrupt(format!(
            "chunk {} starts at bit {}, after the next one ({})",
            i,
            offsets[i],
            offsets[i + 1]
        )));
    }
    if let Some(&last) = payload.last()
        && !total.is_multiple_of(8)
        && last & (0xff >> (total % 8)) != 0
    {
        return Err(Error::corrupt(
            "bits past the end of the stream are not zero",
        ));
    }
    Ok(offsets)
}

/// A character-coded node laid out for decoders other than this crate's (the GPU's), checked
/// as this crate's decoder checks it.
pub struct Layout<'a> {
    /// The bit stream, most significant bit first.
    pub payload: &'a [u8],
    /// The codes the blocks use.
    pub codes: Vec<CharCode>,
    /// Per block of [`CHUNK`] bytes: the bit of its first code (after any announcement), the
    /// bit after its last code, and its code's index in `codes`.
    pub blocks: Vec<(u64, u64, usize)>,
}

/// The stream of a `chardict16` node and its chunks' bit offsets (the total bits appended).
fn parse16<'a>(node: &NodeView<'a>) -> Result<(&'a [u8], Vec<u64>)> {
    node.expect_shape("chardict16", 2, 0)?;
    let mut m = node.meta_reader();
    let total = m.u64("total bits")?;
    m.finish("chardict16")?;
    let n = node.len;
    // Every byte costs 5 to 9 bits: this bounds the output by the stream's size.
    if total < 5 * n as u64 || total > 9 * n as u64 {
        return Err(Error::corrupt(format!(
            "chardict16 stream of {total} bits cannot hold {n} bytes"
        )));
    }
    let payload = node.buffer(0, "chardict16 stream")?;
    let starts = read_u32s(
        node.buffer(1, "chardict16 index")?,
        n.div_ceil(CHUNK),
        "chardict16 index",
    )?;
    Ok((payload, check_stream(payload, starts, total)?))
}

/// The [`Layout`] of a `chardict16` node: one code, the published one.
pub fn layout<'a>(node: &NodeView<'a>) -> Result<Layout<'a>> {
    let (payload, offsets) = parse16(node)?;
    Ok(Layout {
        payload,
        codes: vec![preset_code()?],
        blocks: offsets.windows(2).map(|w| (w[0], w[1], 0)).collect(),
    })
}

/// The published code, its encoder and decoder, built once.
struct Preset {
    code: CharCode,
    lengths: [u8; 256],
    enc: [u32; 256],
    dec: Decoder,
}

fn preset() -> Result<&'static Preset> {
    static PRESET_CODE: OnceLock<Option<Preset>> = OnceLock::new();
    PRESET_CODE
        .get_or_init(|| {
            let code = CharCode::new(&PRESET).ok()?;
            Some(Preset {
                lengths: code.lengths(),
                enc: code.encoder(),
                dec: code.decoder(),
                code,
            })
        })
        .as_ref()
        .ok_or_else(|| Error::invalid("the chardict16 character set is not a valid code"))
}

/// The published code.
pub fn preset_code() -> Result<CharCode> {
    Ok(preset()?.code.clone())
}

fn bytes_of<'v>(plan: &Plan, input: &'v Values) -> Result<&'v [u8]> {
    match input {
        Values::Int(IntVec::U8(v)) => Ok(v),
        _ => Err(Error::plan(
            plan,
            format!("`{}` codes u8 streams, not {}", plan.name, input.ptype()),
        )),
    }
}

/// Starting bit of every chunk, then the total, from each chunk's bits; errors if the offsets
/// do not fit `limit` (exclusive).
pub(crate) fn prefix_sum(bits: &[u64], limit: u64) -> Result<Vec<u64>> {
    let mut offsets = Vec::with_capacity(bits.len() + 1);
    let mut at = 0u64;
    offsets.push(0);
    for &b in bits {
        at += b;
        offsets.push(at);
    }
    if at >= limit {
        return Err(Error::unsupported(format!(
            "a character-coded stream of {at} bits does not fit its index; code fewer bytes at once"
        )));
    }
    Ok(offsets)
}

/// Serialised size of a node with `meta` bytes of metadata and buffers of these lengths.
pub(crate) fn node_size(meta: usize, buffers: &[usize]) -> usize {
    let pad = |n: usize| n.next_multiple_of(8);
    pad(crate::node::HEADER_LEN + 4 * buffers.len())
        + pad(meta)
        + buffers.iter().map(|&b| pad(b)).sum::<usize>()
}

/// Reads `n` little-endian u32s from `index` as u64s.
pub(crate) fn read_u32s(index: &[u8], n: usize, what: &str) -> Result<Vec<u64>> {
    if index.len() != 4 * n {
        return Err(Error::corrupt(format!(
            "{what} is {} bytes, expected {} for {n} chunks",
            index.len(),
            4 * n
        )));
    }
    Ok(index
        .chunks_exact(4)
        .map(|c| u64::from(u32::from_le_bytes([c[0], c[1], c[2], c[3]])))
        .collect())
}

impl Encoding for CharDict16 {
    fn descriptor(&self) -> &'static crate::Descriptor {
        &DESCRIPTOR
    }
    fn calibration(&self) -> Vec<crate::Calibration> {
        vec![crate::Calibration {
            stream: crate::selection::text_bytes(),
            plan: "chardict16",
            minus: &[],
        }]
    }
    fn accepts(&self, ptype: PType) -> bool {
        ptype == PType::U8
    }

    fn encode(&self, plan: &Plan, input: &Values) -> Result<EncodedNode> {
        let data = bytes_of(plan, input)?;
        let mut node = EncodedNode::new(ID, PType::U8, data.len())?;
        let p = preset()?;
        let offsets = prefix_sum(&chunk_bits(data, &p.lengths), 1 << 32)?;
        let total = offsets[offsets.len() - 1];
        let payload = assemble(data, &offsets, |_| BlockCode {
            prefix: 0,
            prefix_len: 0,
            enc: &p.enc,
        });
        let index = offsets[..offsets.len() - 1]
            .iter()
            .flat_map(|&o| (o as u32).to_le_bytes())
            .collect();
        node.meta = total.to_le_bytes().to_vec();
        node.buffers = vec![payload, index];
        Ok(node)
    }

    fn decode(&self, node: &NodeView<'_>, out: &mut Values, _scratch: &mut Scratch) -> Result<()> {
        let (payload, offsets) = parse16(node)?;
        let Values::Int(IntVec::U8(out)) = out else {
            return Err(Error::corrupt("chardict16 decodes to u8 values"));
        };
        crate::resize_for_overwrite(out, node.len, 0);
        let dec = &preset()?.dec;
        decode_chunks(out, payload, &offsets, |_, start| Ok((start, dec)))
    }

    fn estimate(&self, plan: &Plan, input: &Values) -> Result<usize> {
        let data = bytes_of(plan, input)?;
        let lengths = preset()?.lengths;
        let bits: u64 = chunk_bits(data, &lengths).iter().sum();
        // Exact: the layout is fixed once the bit count is known.
        Ok(node_size(
            8,
            &[bits.div_ceil(8) as usize, 4 * data.len().div_ceil(CHUNK)],
        ))
    }
}

/// What `chardict16` is: its id, name, child slots, GPU decoding and part in the search.
pub const DESCRIPTOR: crate::Descriptor = crate::Descriptor {
    id: 14,
    name: "chardict16",
    slots: Slot::NONE,
    leaf_for_numbers: false,
    gpu: crate::GpuDecode::not_parallel(Pattern::Serial),
    search: crate::Search::SKIP,
};

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::testing::*;
    use crate::{decode_bytes, encode};
    use proptest::prelude::*;

    fn u8s(v: &[u8]) -> Values {
        Values::Int(IntVec::U8(v.to_vec()))
    }

    /// English-like text: words drawn from a small vocabulary, some punctuation and capitals.
    pub(crate) fn text(seed: u64, n: usize) -> Vec<u8> {
        const WORDS: &[&str] = &[
            "the", "of", "and", "to", "in", "a", "is", "that", "for", "it", "as", "was", "with",
            "be", "by", "on", "not", "he", "I", "this", "are", "or", "his", "from", "at", "which",
            "but", "have", "an", "had", "they", "you", "were", "their", "one", "all", "We", "Mr.",
            "Pickwick", "quoth", "zephyr", "jumbled", "Oxford", "mixed", "\n",
        ];
        let mut r = random(seed);
        let mut t = Vec::with_capacity(n + 16);
        while t.len() < n {
            t.extend_from_slice(WORDS[(r() % WORDS.len() as u64) as usize].as_bytes());
            t.push(if r().is_multiple_of(11) { b',' } else { b' ' });
        }
        t.truncate(n);
        t
    }

    /// Bits of the published code, counted independently of the encoder.
    fn reference_bits(data: &[u8]) -> u64 {
        data.iter()
            .map(|c| {
                if b" etaoinsrhlducmf".contains(c) {
                    5
                } else {
                    9
                }
            })
            .sum()
    }

    /// The published coder, bit by bit (no chunks, no index).
    fn reference_stream(data: &[u8]) -> Vec<u8> {
        let mut bits = Vec::new();
        for &c in data {
            match PRESET.iter().position(|&p| p == c) {
                Some(i) => {
                    bits.push(1u8);
                    bits.extend((0..4).rev().map(|b| ((i >> b) & 1) as u8));
                }
                None => {
                    bits.push(0);
                    bits.extend((0..8).rev().map(|b| (c >> b) & 1));
                }
            }
        }
        bits.chunks(8)
            .map(|c| {
                c.iter()
                    .enumerate()
                    .fold(0u8, |a, (j, &b)| a | (b << (7 - j)))
            })
            .collect()
    }

    fn cases() -> Vec<Vec<u8>> {
        let mut r = random(7);
        let mut cases = vec![vec![], vec![b'e'], vec![0xff]];
        for n in [1023, 1024, 1025, 5000, 70_000] {
            cases.push(text(n as u64, n));
            cases.push((0..n).map(|_| r() as u8).collect());
        }
        cases.push((0..=255u8).collect());
        cases.push((0..=255u8).cycle().take(3 * 1024 + 7).collect());
        cases.push(vec![b' '; 4096]);
        cases.push(vec![b'Z'; 2049]);
        cases
    }

    #[test]
    fn round_trips() -> Result<()> {
        for c in cases() {
            round_trip(&plan("chardict16"), &u8s(&c))?;
        }
        Ok(())
    }

    #[test]
    fn stream_is_the_published_coder() -> Result<()> {
        for c in cases() {
            let node = encode(&plan("chardict16"), &u8s(&c))?;
            let bits = reference_bits(&c);
            assert_eq!(node.buffers[0].len() as u64, bits.div_ceil(8));
            assert_eq!(node.buffers[0], reference_stream(&c), "{} bytes", c.len());
            assert_eq!(node.meta, bits.to_le_bytes());
        }
        Ok(())
    }

    #[test]
    fn text_payload_size_is_exact() -> Result<()> {
        let t = text(3, 300_000);
        let node = encode(&plan("chardict16"), &u8s(&t))?;
        let bits = reference_bits(&t);
        assert_eq!(node.buffers[0].len() as u64, bits.div_ceil(8));
        // The index: one u32 per 1024-byte chunk.
        assert_eq!(node.buffers[1].len(), 4 * t.len().div_ceil(1024));
        Ok(())
    }

    #[test]
    fn every_chunk_decodes_alone() -> Result<()> {
        let t = text(9, 10 * CHUNK + 77);
        let node = encode(&plan("chardict16"), &u8s(&t))?;
        let bytes = node.to_bytes()?;
        let v = NodeView::parse(&bytes)?;
        let starts = read_u32s(v.buffers[1], 11, "index")?;
        let dec = &preset()?.dec;
        for (i, chunk) in t.chunks(CHUNK).enumerate() {
            let mut out = vec![0u8; chunk.len()];
            let end = decode_block(v.buffers[0], starts[i], dec, &mut out);
            assert_eq!(out, chunk, "chunk {i}");
            let next = starts.get(i + 1).copied().unwrap_or(reference_bits(&t));
            assert_eq!(end, next);
        }
        Ok(())
    }

    #[test]
    fn decoding_table_agrees_with_one_code_at_a_time() -> Result<()> {
        // Tables of every index width, one and two tiers: lookups of up to three codes and the
        // code-at-a-time tail must together decode what was encoded.
        let mut codes = Vec::new();
        for k in 0..=7u32 {
            let chars: Vec<u8> = (0..1u32 << k).map(|i| (i * 37 + 5) as u8).collect();
            codes.push(CharCode::new(&chars)?);
            for k2 in [0u32, 3, 7] {
                let second: Vec<u8> = (0..=255u8)
                    .rev()
                    .filter(|b| !chars.contains(b))
                    .take(1 << k2)
                    .collect();
                codes.push(CharCode::with_tiers(&chars, &second)?);
            }
        }
        for code in codes {
            let chars = code.chars().to_vec();
            let k = code.index_bits().0 + code.index_bits().1.unwrap_or(0);
            let enc = code.encoder();
            let mut r = random(u64::from(k));
            let data: Vec<u8> = (0..5000)
                .map(|_| {
                    if r().is_multiple_of(4) {
                        r() as u8
                    } else {
                        chars[(r() % chars.len() as u64) as usize]
                    }
                })
                .collect();
            let lengths = code.lengths();
            let bits: u64 = data
                .iter()
                .map(|&c| u64::from(lengths[usize::from(c)]))
                .sum();
            // Chunks follow each other without padding, so the whole stream decodes from bit 0.
            let offsets = prefix_sum(&chunk_bits(&data, &lengths), 1 << 32)?;
            assert_eq!(offsets.last(), Some(&bits));
            let stream = assemble(&data, &offsets, |_| BlockCode {
                prefix: 0,
                prefix_len: 0,
                enc: &enc,
            });
            let mut out = vec![0u8; data.len()];
            assert_eq!(decode_block(&stream, 0, &code.decoder(), &mut out), bits);
            assert_eq!(out, data, "{code:?}");
        }
        Ok(())
    }

    #[test]
    fn rejects_other_types_and_bad_tables() {
        let e = encode(&plan("chardict16"), &Values::Int(IntVec::U16(vec![1])));
        assert!(matches!(e, Err(Error::Plan { .. })));
        assert!(CharCode::new(b"abc").is_err());
        assert!(CharCode::new(b"abca").is_err());
        assert!(CharCode::new(&[]).is_err());
    }

    #[test]
    fn corruption_is_an_error_not_a_panic() -> Result<()> {
        let t = text(5, 3000);
        let node = encode(&plan("chardict16"), &u8s(&t))?;
        check_corruption("chardict16", &node, 3)?;
        // An index pointing into the middle of a code.
        let e = corrupted(&node, |n| n.buffers[1][4] ^= 1)?;
        assert!(e.contains("ends at bit"), "{e}");
        // A wrong total, a short stream, a first chunk not at 0, decreasing starts.
        let e = corrupted(&node, |n| n.meta[0] ^= 8)?;
        assert!(e.contains("bytes") || e.contains("ends at"), "{e}");
        let e = corrupted(&node, |n| n.buffers[0].truncate(100))?;
        assert!(e.contains("bytes"), "{e}");
        let e = corrupted(&node, |n| n.buffers[1][0] = 1)?;
        assert!(e.contains("bit 0"), "{e}");
        let e = corrupted(&node, |n| {
            n.buffers[1][8..12].copy_from_slice(&1u32.to_le_bytes())
        })?;
        assert!(e.contains("after the next"), "{e}");
        let e = corrupted(&node, |n| n.len = 100_000)?;
        assert!(e.contains("cannot hold"), "{e}");
        Ok(())
    }

    #[test]
    fn estimate_is_exact() -> Result<()> {
        for c in cases() {
            let v = u8s(&c);
            assert_eq!(
                crate::estimate(&plan("chardict16"), &v)?,
                encode(&plan("chardict16"), &v)?.size()
            );
        }
        Ok(())
    }

    proptest! {
        #[test]
        fn round_trip_any_bytes(v in prop::collection::vec(any::<u8>(), 0..5000)) {
            let bytes = encode(&plan("chardict16"), &u8s(&v)).and_then(|n| n.to_bytes())
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(decode_bytes(&bytes).map_err(|e| TestCaseError::fail(e.to_string()))?, u8s(&v));
        }

        #[test]
        fn round_trip_text(seed in any::<u64>(), n in 0usize..9000) {
            round_trip(&plan("chardict16"), &u8s(&text(seed, n)))
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
        }
    }
}
