//! Interleaved static rANS: an order-0 entropy coder for unsigned integer streams, laid out so
//! that one GPU warp (32 threads) decodes a block, one state per thread.
//!
//! A leaf: `ans`, `zigzag | ans`, or a child of another primitive (`dict(codes: ans)`). Signed
//! streams go through `zigzag` first. The optional parameter is the base-2 logarithm of the
//! block length in values, [`MIN_BLOCK_LOG2`]`..=`[`MAX_BLOCK_LOG2`], default
//! [`DEFAULT_BLOCK_LOG2`] (blocks of 32 768 values).
//!
//! # Symbols
//! - `u8`: the symbol is the byte (alphabet of up to 256).
//! - `u16`, `u32`: the symbol is a logarithmic bucket of the value `v`. Values below 16 are their
//!   own bucket. Otherwise, with `e = floor(log2 v)` (4..=31) and `m = (v >> (e - 2)) & 3` (the
//!   two bits after the leading one), the bucket is `4 e + m` (16..=127), and the `nb = e - 2`
//!   bits below those, `r = v & (2^nb - 1)`, are sent as raw "bypass" bits through the same
//!   state. Decoding: `v = (4 + m) << (e - 2) | r`. Alphabets: 64 buckets for `u16` (`e <= 15`),
//!   128 for `u32`. Bypass bits go in at most two chunks of at most 16 bits: the low
//!   `k1 = min(nb, 16)` bits of `r`, then (only when `nb > 16`, i.e. `u32`) the high
//!   `k2 = nb - 16` bits, so `r = chunk1 | chunk2 << 16`.
//!
//! # Model
//! One static table of frequencies per node, quantised to a total of `2^12` ([`PRECISION`]):
//! every present symbol has a frequency in `1..=4095`, the others 0, and they add up to exactly
//! 4096. A stream with a single distinct symbol `s` gives it 4095 and gives 1 to a neighbour
//! (`s + 1`, or `s - 1` for the alphabet's last symbol) that never occurs; the cost is 0.0004
//! bits per value. `cum[s]` is the sum of the frequencies of the symbols below `s`.
//!
//! # Coder
//! 32-bit states `x` in `[2^16, 2^32)` between symbols, 16-bit renormalisation words, at most one
//! word per coding operation. With `f = freq[s]`, `c = cum[s]`:
//! - decode a symbol: `slot = x & 4095`; `s` is the symbol with `c <= slot < c + f`;
//!   `x = f * (x >> 12) + slot - c`; then renormalise.
//! - decode `k` bypass bits (`1 <= k <= 16`): `bits = x & (2^k - 1)`; `x = x >> k`; then
//!   renormalise.
//! - renormalise: if `x < 2^16`, `x = (x << 16) | next_word` (one read is always enough).
//!
//! The encoder runs the exact inverse, backwards: before a symbol, if `x >= f << 20` it emits
//! `x & 0xffff` and shifts `x >>= 16`, then `x = ((x / f) << 12) + x % f + c`; before `k` bypass
//! bits, if `x >= 2^(32 - k)` it emits and shifts the same way, then `x = (x << k) | bits`.
//! Every lane starts encoding from `x = 2^16`, so a correctly decoded lane ends at `2^16`.
//!
//! # Blocks and lanes
//! The stream is cut into blocks of `B = 2^block_log2` values (the last one shorter). In a block
//! of `n` values, value `j` belongs to lane `j % 32` and is decoded at step `j / 32`; the block
//! has `ceil(n / 32)` steps, and in the last step only lanes `< n - 32 * (steps - 1)` are active.
//! Each step runs up to three phases, each over all active lanes in lane order 0..32:
//! 1. decode the symbol (for `u16`/`u32`, the bucket), renormalise;
//! 2. `u16`/`u32` only: lanes whose bucket has `nb > 0` decode `k1` bypass bits, renormalise;
//! 3. `u32` only: lanes whose bucket has `nb > 16` decode `k2` bypass bits, renormalise.
//!
//! Lanes that renormalise within a phase read consecutive words of the block's word stream in
//! lane order: a lane reads word `pos + (number of lower lanes that also read in this phase)`,
//! and `pos` then advances by the number of lanes that read (on a GPU: `__ballot_sync` of the
//! condition, `__popc` of the ballot masked to the lower lanes, then `__popc` of the ballot). A
//! lane with no bypass bits in phase 2 or 3 neither changes its state nor reads. The encoder
//! processes steps, phases and lanes in exactly the reverse order and reverses each block's
//! words, so the decoder reads them front to back.
//!
//! # Node
//! ```text
//! meta    := block_log2: u8 | nsym: u16 | entry...   (frequencies of symbols 0..nsym)
//! entry   := f: u8                 1 <= f < 128
//!          | 0x80 | f & 0x7f: u8, f >> 7: u8          128 <= f <= 4095
//!          | 0: u8, r: u8          r + 1 symbols of frequency 0
//! buffer 0: states  u32 x 32 per block, block-major, lane order: the final encoder states,
//!                   which are the decoder's initial states
//! buffer 1: starts  u32 per block: index (in words) of the block's first word; starts[0] = 0
//! buffer 2: words   u16: the blocks' word streams, concatenated in block order
//! ```
//! All integers little-endian. Block `b`'s words are `words[starts[b] .. starts[b + 1]]` (the
//! last block's run to the end of the buffer). An empty stream has `nsym = 0` and empty
//! buffers. The decoder checks that every block consumes exactly its words and that every lane
//! ends at `2^16`, which catches most corruption of the coded bytes; no corruption can make it
//! read or write out of bounds.
//!
//! # Speed
//! The decoder uses a 4096-entry table (one `u32` per slot: `f << 20 | (slot - c) << 8 | s`),
//! renormalises without branches, and reads words from a fixed-size window checked once per
//! step, so the inner loop has no bounds checks. On x86-64 it picks at run time the widest
//! vector unit the CPU has: AVX-512 or AVX2 (bytes, `u16`, `u32`). A gather reads the
//! table for 16 or 8 lanes, and the refill words are placed by an expand (AVX-512) or a
//! permutation looked up from the refill mask (AVX2), the CPU's form of the warp's ballot and
//! prefix count. Byte blocks decode several at a time in lockstep, because one block's 32
//! states form only two or four dependency chains, too few to hide the gather's latency.
//! Every kernel gives the same values and the same errors as the portable code, which the
//! tests check. The encoder divides by a multiplication with a per-symbol reciprocal.

use crate::node::{EncodedNode, MetaReader, NodeView, cast_or_copy};
use crate::{Encoding, Pattern, Scratch, Slot};
use zipflow_core::{Error, Int, IntVec, PType, Plan, Result, Values};

/// `ans` / `ans(block_log2)`.
pub struct Ans;

/// On-disk id of [`Ans`].
pub const ID: u16 = DESCRIPTOR.id;

/// Interleaved states per block (one per GPU thread of a warp).
pub const LANES: usize = 32;

/// Frequencies add up to `2^PRECISION`.
pub const PRECISION: u32 = 12;

/// Sum of the quantised frequencies.
pub const TOTAL: u32 = 1 << PRECISION;

/// Largest frequency a symbol may have.
pub const MAX_FREQ: u32 = TOTAL - 1;

/// Lower bound of a state between symbols; also every lane's initial encoder state.
pub const STATE_LOW: u32 = 1 << 16;

/// Default base-2 logarithm of the block length.
pub const DEFAULT_BLOCK_LOG2: u32 = 15;

/// Smallest block length parameter (one step of 32 lanes).
pub const MIN_BLOCK_LOG2: u32 = 5;

/// Largest block length parameter.
pub const MAX_BLOCK_LOG2: u32 = 24;

/// Most symbols any alphabet has.
const MAX_ALPHABET: usize = 256;

/// The alphabet size for a stream type, `None` for types `ans` does not code.
pub fn alphabet(ptype: PType) -> Option<usize> {
    match ptype {
        PType::U8 => Some(256),
        PType::U16 => Some(64),
        PType::U32 => Some(128),
        _ => None,
    }
}

/// Buckets `0..TWO_PHASE_BUCKETS` carry at most 16 bypass bits.
const TWO_PHASE_BUCKETS: usize = 76;

/// Coding phases per step: the symbol, then up to two chunks of bypass bits.
fn phases(ptype: PType) -> usize {
    match ptype {
        PType::U8 => 1,
        PType::U16 => 2,
        _ => 3,
    }
}

/// The bucket of a `u16`/`u32` value.
#[inline(always)]
pub fn bucket(v: u32) -> u8 {
    // The exponent and the two bits after the leading one, read from the (exact) f64 of `v`:
    // this vectorises, unlike `leading_zeros` without `lzcnt`. Both arms are computed and
    // selected, so mixed small and large values do not mispredict.
    let bits = f64::from(v).to_bits();
    let e = ((bits >> 52) as u32).wrapping_sub(1023);
    let large = e.wrapping_mul(4).wrapping_add((bits >> 50) as u32 & 3);
    std::hint::select_unpredictable(v < 16, v, large) as u8
}

/// Number of bypass bits a bucket's values carry.
#[inline(always)]
pub fn bypass_bits(bucket: u32) -> u32 {
    std::hint::select_unpredictable(bucket >= 16, (bucket / 4).wrapping_sub(2), 0)
}

/// Smallest value of a bucket (`bucket < 128`).
#[inline(always)]
pub fn bucket_base(bucket: u32) -> u32 {
    if bucket < 16 {
        bucket
    } else {
        (4 + (bucket & 3)) << (bucket / 4 - 2)
    }
}

/// Quantises symbol counts to frequencies adding up to [`TOTAL`], each present symbol in
/// `1..=MAX_FREQ`. Returns frequencies for symbols `0..nsym` (the last one non-zero), or an
/// empty table when every count is 0. `alphabet` bounds the neighbour a single-symbol stream
/// borrows. Integer arithmetic only, so every platform quantises alike. At most 256 symbols.
pub(crate) fn quantize(counts: &[u64], alphabet: usize) -> Vec<u32> {
    let present: Vec<usize> = (0..counts.len()).filter(|&s| counts[s] > 0).collect();
    let mut f = vec![0u32; counts.len().max(2)];
    match present[..] {
        [] => return Vec::new(),
        [s] => {
            let other = if s + 1 < alphabet.max(2) {
                s + 1
            } else {
                s - 1
            };
            f.resize(f.len().max(other + 1), 0);
            f[s] = MAX_FREQ;
            f[other] = 1;
        }
        _ => {
            let n: u64 = present.iter().map(|&s| counts[s]).sum();
            for &s in &present {
                // Rounded share of TOTAL, in u128 so that no count can overflow it.
                let q = (u128::from(counts[s]) * u128::from(TOTAL) * 2 + u128::from(n))
                    / (2 * u128::from(n));
                f[s] = (q as u32).clamp(1, MAX_FREQ);
            }
            let mut sum: u32 = f.iter().sum();
            // Fix the total one unit at a time where it costs the fewest bits: the cost of
            // moving f by one is about count / (f +- 1/2) bits, compared by cross-multiplying.
            while sum < TOTAL {
                let mut best = usize::MAX;
                for &s in &present {
                    if f[s] < MAX_FREQ
                        && (best == usize::MAX
                            || u128::from(counts[s]) * u128::from(2 * f[best] + 1)
                                > u128::from(counts[best]) * u128::from(2 * f[s] + 1))
                    {
                        best = s;
                    }
                }
                f[best] += 1;
                sum += 1;
            }
            while sum > TOTAL {
                let mut best = usize::MAX;
                for &s in &present {
                    if f[s] > 1
                        && (best == usize::MAX
                            || u128::from(counts[s]) * u128::from(2 * f[best] - 1)
                                < u128::from(counts[best]) * u128::from(2 * f[s] - 1))
                    {
                        best = s;
                    }
                }
                f[best] -= 1;
                sum -= 1;
            }
        }
    }
    let nsym = f.iter().rposition(|&x| x > 0).map_or(0, |i| i + 1);
    f.truncate(nsym);
    f
}

/// Appends the serialised frequency table (`nsym` and entries) to `out`.
fn write_table(freqs: &[u32], out: &mut Vec<u8>) {
    out.extend_from_slice(&(freqs.len() as u16).to_le_bytes());
    let mut i = 0;
    while i < freqs.len() {
        let f = freqs[i];
        if f == 0 {
            let run = freqs[i..].iter().take(256).take_while(|&&x| x == 0).count();
            out.extend_from_slice(&[0, (run - 1) as u8]);
            i += run;
        } else {
            if f < 128 {
                out.push(f as u8);
            } else {
                out.extend_from_slice(&[0x80 | (f & 0x7f) as u8, (f >> 7) as u8]);
            }
            i += 1;
        }
    }
}

/// Serialised size of the frequency table.
fn table_len(freqs: &[u32]) -> usize {
    let mut out = Vec::new();
    write_table(freqs, &mut out);
    out.len()
}

/// Reads and validates a frequency table for an alphabet of `alphabet` symbols.
fn read_table(r: &mut MetaReader<'_>, alphabet: usize, empty: bool) -> Result<Vec<u32>> {
    let nsym = usize::from(u16::from_le_bytes(r.array::<2>("ans alphabet size")?));
    if nsym > alphabet {
        return Err(Error::corrupt(format!(
            "ans table has {nsym} symbols, the alphabet {alphabet}"
        )));
    }
    let mut freqs = Vec::with_capacity(nsym);
    while freqs.len() < nsym {
        let b = r.u8("ans frequency")?;
        if b == 0 {
            let run = usize::from(r.u8("ans zero run")?) + 1;
            if freqs.len() + run > nsym {
                return Err(Error::corrupt("ans zero run past the alphabet"));
            }
            freqs.resize(freqs.len() + run, 0);
        } else if b < 0x80 {
            freqs.push(u32::from(b));
        } else {
            let f = u32::from(b & 0x7f) | u32::from(r.u8("ans frequency")?) << 7;
            if !(128..=MAX_FREQ).contains(&f) {
                return Err(Error::corrupt(format!("ans frequency {f} out of range")));
            }
            freqs.push(f);
        }
    }
    let sum: u32 = freqs.iter().sum();
    if empty {
        if nsym != 0 {
            return Err(Error::corrupt("empty ans stream with a frequency table"));
        }
    } else if sum != TOTAL {
        return Err(Error::corrupt(format!(
            "ans frequencies add up to {sum}, not {TOTAL}"
        )));
    }
    Ok(freqs)
}

/// The per-type symbols of a stream: bytes, or buckets plus the values for their bypass bits.
enum Symbols<'a> {
    Bytes(&'a [u8]),
    U16 { buckets: Vec<u8>, values: &'a [u16] },
    U32 { buckets: Vec<u8>, values: &'a [u32] },
}

impl Symbols<'_> {
    fn of(v: &IntVec) -> Option<Symbols<'_>> {
        match v {
            IntVec::U8(x) => Some(Symbols::Bytes(x)),
            IntVec::U16(x) => Some(Symbols::U16 {
                buckets: x.iter().map(|&v| bucket(u32::from(v))).collect(),
                values: x,
            }),
            IntVec::U32(x) => Some(Symbols::U32 {
                buckets: x.iter().map(|&v| bucket(v)).collect(),
                values: x,
            }),
            _ => None,
        }
    }

    fn syms(&self) -> &[u8] {
        match self {
            Symbols::Bytes(b) => b,
            Symbols::U16 { buckets, .. } | Symbols::U32 { buckets, .. } => buckets,
        }
    }
}

fn histogram(syms: &[u8]) -> [u64; MAX_ALPHABET] {
    // Four sub-histograms so that runs of one symbol do not serialise on one counter.
    let mut h = [[0u64; MAX_ALPHABET]; 4];
    let mut chunks = syms.chunks_exact(4);
    for c in &mut chunks {
        h[0][usize::from(c[0])] += 1;
        h[1][usize::from(c[1])] += 1;
        h[2][usize::from(c[2])] += 1;
        h[3][usize::from(c[3])] += 1;
    }
    for &s in chunks.remainder() {
        h[0][usize::from(s)] += 1;
    }
    let mut out = [0u64; MAX_ALPHABET];
    for (i, o) in out.iter_mut().enumerate() {
        *o = h[0][i] + h[1][i] + h[2][i] + h[3][i];
    }
    out
}

fn resolve_block_log2(plan: &Plan) -> Result<u32> {
    match plan.params.first() {
        None => Ok(DEFAULT_BLOCK_LOG2),
        Some(&p) if (i64::from(MIN_BLOCK_LOG2)..=i64::from(MAX_BLOCK_LOG2)).contains(&p) => {
            Ok(p as u32)
        }
        Some(p) => Err(Error::plan(
            plan,
            format!(
                "ans block size 2^{p} is outside 2^{MIN_BLOCK_LOG2}..=2^{MAX_BLOCK_LOG2} values"
            ),
        )),
    }
}

fn unsigned_input<'a>(plan: &Plan, input: &'a Values) -> Result<&'a IntVec> {
    match input {
        Values::Int(v) if alphabet(v.ptype()).is_some() => Ok(v),
        _ => Err(Error::plan(
            plan,
            format!(
                "ans codes u8, u16 and u32 values, not {} (put zigzag in front of signed ones)",
                input.ptype()
            ),
        )),
    }
}

/// A word source for the decoder: a window checked once per step, or checked reads.
trait Words {
    fn at(&self, i: usize) -> u32;
}

/// `W` words known to exist (a power of two, so the index mask removes the bounds check).
struct Window<'a, const W: usize>(&'a [u16; W]);

impl<const W: usize> Words for Window<'_, W> {
    #[inline(always)]
    fn at(&self, i: usize) -> u32 {
        u32::from(self.0[i % W])
    }
}

/// Reads past the end give 0; the caller then sees that more words were read than exist.
struct Checked<'a>(&'a [u16]);

impl Words for Checked<'_> {
    #[inline(always)]
    fn at(&self, i: usize) -> u32 {
        self.0.get(i).map_or(0, |&w| u32::from(w))
    }
}

/// The decoding table: `f << 20 | (slot - c) << 8 | s` for each of the 4096 slots.
fn decode_table(freqs: &[u32]) -> Box<[u32; TOTAL as usize]> {
    let mut t = Box::new([0u32; TOTAL as usize]);
    let mut c = 0usize;
    for (s, &f) in freqs.iter().enumerate() {
        for (i, e) in t[c..c + f as usize].iter_mut().enumerate() {
            *e = f << 20 | (i as u32) << 8 | s as u32;
        }
        c += f as usize;
    }
    t
}

/// Decodes one symbol from `x`.
#[inline(always)]
fn decode_symbol(table: &[u32; TOTAL as usize], x: &mut u32) -> u32 {
    let e = table[(*x & (TOTAL - 1)) as usize];
    // Table entries have bias < f <= 4095, so this stays below f * 2^20 < 2^32.
    *x = (e >> 20) * (*x >> PRECISION) + ((e >> 8) & (TOTAL - 1));
    e & 0xff
}

/// Refills `x` from the next word if it fell below [`STATE_LOW`]; branch-free.
#[inline(always)]
fn renormalise(x: &mut u32, words: &impl Words, pos: &mut usize) {
    let need = *x < STATE_LOW;
    let refilled = (*x << 16) | words.at(*pos);
    *x = std::hint::select_unpredictable(need, refilled, *x);
    *pos += usize::from(need);
}

/// One step of a byte block: the lanes of `out` (at most 32) from `x`; returns the new position.
#[inline(always)]
fn step_u8(
    table: &[u32; TOTAL as usize],
    x: &mut [u32; LANES],
    words: &impl Words,
    mut pos: usize,
    out: &mut [u8],
) -> usize {
    for (o, s) in out.iter_mut().zip(x.iter_mut()) {
        *o = decode_symbol(table, s) as u8;
        renormalise(s, words, &mut pos);
    }
    pos
}

/// Which code decodes the whole steps of a block (AVX2: bytes only); all give identical
/// results.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kernel {
    Scalar,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    #[cfg(target_arch = "x86_64")]
    Avx512,
}

impl Kernel {
    /// Every kernel this CPU runs, fastest last.
    #[cfg(test)]
    fn available() -> Vec<Kernel> {
        #[allow(unused_mut)]
        let mut k = vec![Kernel::Scalar];
        #[cfg(target_arch = "x86_64")]
        {
            if avx2::available() {
                k.push(Kernel::Avx2);
            }
            if avx512::available() {
                k.push(Kernel::Avx512);
            }
        }
        k
    }

    /// The fastest kernel this CPU runs.
    fn best() -> Kernel {
        #[cfg(target_arch = "x86_64")]
        {
            if avx512::available() {
                return Kernel::Avx512;
            }
            if avx2::available() {
                return Kernel::Avx2;
            }
        }
        Kernel::Scalar
    }
}

/// A block being decoded: its states, the words read and the values written so far.
struct Block<'a, T> {
    x: [u32; LANES],
    pos: usize,
    done: usize,
    /// The block's words and what follows them (later blocks' words, or zero padding), so
    /// that a step may load a whole window near the block's end.
    words: &'a [u16],
    /// How many of `words` are the block's own.
    end: usize,
    out: &'a mut [T],
}

/// A byte block being decoded.
type ByteBlock<'a> = Block<'a, u8>;

impl<'a, T> Block<'a, T> {
    fn new(init: &[u32; LANES], (words, end): (&'a [u16], usize), out: &'a mut [T]) -> Self {
        Block {
            x: *init,
            pos: 0,
            done: 0,
            words,
            end,
            out,
        }
    }

    /// Whether a whole step remains and its words (at most 32 per phase) surely exist.
    #[inline(always)]
    fn can_step_phases(&self, nphases: usize) -> bool {
        // A step reads at most `nphases * LANES` words, so a consistent block at `pos <= end`
        // never reads past `words`; an inconsistent one shows as `pos != end` at the finish.
        self.done + LANES <= self.out.len()
            && self.pos <= self.end
            && self.pos + nphases * LANES <= self.words.len()
    }
}

impl ByteBlock<'_> {
    /// Whether a whole step remains and its (at most 32) words surely exist.
    #[inline(always)]
    fn can_step(&self) -> bool {
        self.can_step_phases(1)
    }

    /// Decodes the rest with the portable code; false when the data is inconsistent.
    fn finish(self, table: &[u32; TOTAL as usize]) -> bool {
        let ByteBlock {
            mut x,
            mut pos,
            done,
            words,
            end,
            out,
        } = self;
        let mut chunks = out[done..].chunks_exact_mut(LANES);
        for chunk in &mut chunks {
            match words.get(pos..).and_then(|w| w.first_chunk::<LANES>()) {
                Some(w) => pos += step_u8(table, &mut x, &Window(w), 0, chunk),
                None => pos = step_u8(table, &mut x, &Checked(words), pos, chunk),
            }
        }
        pos = step_u8(table, &mut x, &Checked(words), pos, chunks.into_remainder());
        pos == end && x.iter().all(|&s| s == STATE_LOW)
    }
}

/// Decodes byte blocks with `kernel`, several in lockstep (different blocks' states are
/// independent, so their steps overlap); false for each inconsistent one.
fn decode_u8_blocks(
    table: &[u32; TOTAL as usize],
    #[allow(unused_mut)] mut blocks: Vec<ByteBlock<'_>>,
    kernel: Kernel,
) -> Vec<bool> {
    match kernel {
        Kernel::Scalar => {}
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx512 => {
            for quad in blocks.chunks_exact_mut(4) {
                if let Ok(quad) = <&mut [ByteBlock<'_>; 4]>::try_from(quad) {
                    // SAFETY: `Kernel::Avx512` is only made after checking the CPU features.
                    unsafe { avx512::run(table, quad) };
                }
            }
            for pair in blocks.chunks_exact_mut(2) {
                if let Ok(pair) = <&mut [ByteBlock<'_>; 2]>::try_from(pair) {
                    // SAFETY: `Kernel::Avx512` is only made after checking the CPU features.
                    unsafe { avx512::run(table, pair) };
                }
            }
            for b in &mut blocks {
                // SAFETY: as above.
                unsafe { avx512::run(table, std::array::from_mut(b)) };
            }
        }
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx2 => {
            for pair in blocks.chunks_exact_mut(2) {
                if let Ok(pair) = <&mut [ByteBlock<'_>; 2]>::try_from(pair) {
                    // SAFETY: `Kernel::Avx2` is only made after checking the CPU features.
                    unsafe { avx2::run(table, pair) };
                }
            }
            for b in &mut blocks {
                // SAFETY: `Kernel::Avx2` is only made after checking the CPU features.
                unsafe { avx2::run(table, std::array::from_mut(b)) };
            }
        }
    }
    blocks.into_iter().map(|b| b.finish(table)).collect()
}

mod encode;
use encode::{encode_values, estimate_values};

#[cfg(target_arch = "x86_64")]
mod avx512;

#[cfg(target_arch = "x86_64")]
mod avx2;

/// Per-bucket value base and bypass bit count, indexed by bucket (`< 128`).
struct Buckets {
    base: [u32; 128],
    bits: [u32; 128],
}

impl Buckets {
    fn new() -> Buckets {
        let mut b = Buckets {
            base: [0; 128],
            bits: [0; 128],
        };
        for i in 0..128u32 {
            b.base[i as usize] = bucket_base(i);
            b.bits[i as usize] = bypass_bits(i);
        }
        b
    }
}

/// One step of a `u16`/`u32` block with `NPHASES` phases.
#[inline(always)]
fn step_wide<T: Int, const NPHASES: usize>(
    table: &[u32; TOTAL as usize],
    buckets: &Buckets,
    x: &mut [u32; LANES],
    words: &impl Words,
    mut pos: usize,
    out: &mut [T],
) -> usize {
    let mut b = [0u8; LANES];
    let mut v = [0u32; LANES];
    for (bk, s) in b.iter_mut().zip(x.iter_mut()).take(out.len()) {
        *bk = decode_symbol(table, s) as u8;
        renormalise(s, words, &mut pos);
    }
    for ((bk, s), val) in b.iter().zip(x.iter_mut()).zip(v.iter_mut()).take(out.len()) {
        let k = buckets.bits[usize::from(*bk) % 128].min(16);
        *val = buckets.base[usize::from(*bk) % 128] | (*s & ((1 << k) - 1));
        *s >>= k;
        renormalise(s, words, &mut pos);
    }
    if NPHASES >= 3 {
        for ((bk, s), val) in b.iter().zip(x.iter_mut()).zip(v.iter_mut()).take(out.len()) {
            let k = buckets.bits[usize::from(*bk) % 128].saturating_sub(16);
            *val |= (*s & ((1 << k) - 1)) << 16;
            *s >>= k;
            renormalise(s, words, &mut pos);
        }
    }
    for (o, val) in out.iter_mut().zip(v) {
        *o = T::from_u64_wrapping(u64::from(val));
    }
    pos
}

/// Decodes the rest of a `u16`/`u32` block with the portable code; false when the data is
/// inconsistent.
fn finish_wide<T: Int, const NPHASES: usize, const W: usize>(
    table: &[u32; TOTAL as usize],
    buckets: &Buckets,
    block: Block<'_, T>,
) -> bool {
    let Block {
        mut x,
        mut pos,
        done,
        words,
        end,
        out,
    } = block;
    let mut chunks = out[done..].chunks_exact_mut(LANES);
    for chunk in &mut chunks {
        match words.get(pos..).and_then(|w| w.first_chunk::<W>()) {
            Some(w) => pos += step_wide::<T, NPHASES>(table, buckets, &mut x, &Window(w), 0, chunk),
            None => {
                pos = step_wide::<T, NPHASES>(table, buckets, &mut x, &Checked(words), pos, chunk)
            }
        }
    }
    let rest = chunks.into_remainder();
    pos = step_wide::<T, NPHASES>(table, buckets, &mut x, &Checked(words), pos, rest);
    pos == end && x.iter().all(|&s| s == STATE_LOW)
}

/// A validated node: its table and per-block slices.
struct Layout<'a> {
    block: usize,
    freqs: Vec<u32>,
    states: &'a [u32],
    starts: &'a [u32],
    words: &'a [u16],
    /// `words[cut..]` followed by [`READ_AHEAD`] zero words, so that blocks near the end
    /// (or blocks of very few words, as low-entropy streams have) still decode whole steps
    /// with the vector kernels.
    tail: Vec<u16>,
    cut: usize,
}

/// A block's words with what follows them, and how many are its own.
type BlockWords<'a> = (&'a [u16], usize);

/// Words a vector step may read past a block's own words.
const READ_AHEAD: usize = 3 * LANES;

/// Words copied into [`Layout::tail`] (besides the padding).
const TAIL_WORDS: usize = 8192;

impl Layout<'_> {
    /// Block `b`'s initial decoder states, and its words with what follows them (see
    /// [`Block::words`]) and how many are its own.
    fn block(&self, b: usize) -> Option<(&[u32; LANES], BlockWords<'_>)> {
        let init = self.states.get(b * LANES..)?.first_chunk::<LANES>()?;
        let start = *self.starts.get(b)? as usize;
        let end = self
            .starts
            .get(b + 1)
            .map_or(self.words.len(), |&e| e as usize);
        let own = end.checked_sub(start)?;
        let words = match start.checked_sub(self.cut) {
            Some(at) => self.tail.get(at..)?,
            None => self.words.get(start..)?,
        };
        Some((init, (words, own)))
    }
}

/// The validated header of an `ans` node (the same checks the decoder makes before
/// decoding). Decoders elsewhere (the GPU's) read the buffers themselves.
#[derive(Debug, Clone)]
pub struct View {
    /// The log2 of the node's block size.
    pub log2_block: u32,
    /// The frequencies of its symbols `0..nsym`.
    pub freqs: Vec<u32>,
}

impl View {
    /// Checks an `ans` node as its decoder does and reads its header.
    pub fn parse(node: &NodeView<'_>) -> Result<View> {
        let (mut states, mut starts, mut words) = (Vec::new(), Vec::new(), Vec::new());
        let layout = parse(node, &mut states, &mut starts, &mut words)?;
        Ok(View {
            log2_block: layout.block.trailing_zeros(),
            freqs: layout.freqs,
        })
    }
}

fn parse<'a>(
    node: &NodeView<'a>,
    states_copy: &'a mut Vec<u32>,
    starts_copy: &'a mut Vec<u32>,
    words_copy: &'a mut Vec<u16>,
) -> Result<Layout<'a>> {
    node.expect_shape("ans", 3, 0)?;
    let Some(alpha) = alphabet(node.ptype) else {
        return Err(Error::corrupt(format!(
            "ans node claims {} values",
            node.ptype
        )));
    };
    let mut meta = node.meta_reader();
    let block_log2 = u32::from(meta.u8("ans block size")?);
    if !(MIN_BLOCK_LOG2..=MAX_BLOCK_LOG2).contains(&block_log2) {
        return Err(Error::corrupt(format!(
            "ans block size 2^{block_log2} out of range"
        )));
    }
    let freqs = read_table(&mut meta, alpha, node.len == 0)?;
    meta.finish("ans")?;
    let block = 1usize << block_log2;
    let nblocks = node.len.div_ceil(block);
    let states = cast_or_copy::<u32>(node.buffer(0, "states")?, states_copy, "ans states")?;
    let starts = cast_or_copy::<u32>(node.buffer(1, "starts")?, starts_copy, "ans starts")?;
    let words = cast_or_copy::<u16>(node.buffer(2, "words")?, words_copy, "ans words")?;
    if states.len() != nblocks * LANES || starts.len() != nblocks {
        return Err(Error::corrupt(format!(
            "ans node of {} values in {nblocks} blocks has {} states and {} block starts",
            node.len,
            states.len(),
            starts.len()
        )));
    }
    if states.iter().any(|&s| s < STATE_LOW) {
        return Err(Error::corrupt("ans state below 2^16"));
    }
    if starts.first().is_some_and(|&s| s != 0)
        || starts.windows(2).any(|w| w[0] > w[1])
        || starts.last().is_some_and(|&s| s as usize > words.len())
    {
        return Err(Error::corrupt("ans block starts out of order or range"));
    }
    let cut = words.len().saturating_sub(TAIL_WORDS);
    let mut tail = Vec::with_capacity(words.len() - cut + READ_AHEAD);
    tail.extend_from_slice(&words[cut..]);
    tail.resize(words.len() - cut + READ_AHEAD, 0);
    Ok(Layout {
        block,
        freqs,
        states,
        starts,
        words,
        tail,
        cut,
    })
}

fn corrupt_block(b: usize) -> Error {
    Error::corrupt(format!("ans block {b} does not decode consistently"))
}

fn decode_bytes_into(
    layout: &Layout<'_>,
    len: usize,
    out: &mut Vec<u8>,
    kernel: Kernel,
) -> Result<()> {
    crate::resize_for_overwrite(out, len, 0);
    let table = decode_table(&layout.freqs);
    let mut blocks = Vec::with_capacity(len.div_ceil(layout.block));
    for (b, chunk) in out.chunks_mut(layout.block).enumerate() {
        let Some((init, words)) = layout.block(b) else {
            return Err(corrupt_block(b));
        };
        blocks.push(ByteBlock::new(init, words, chunk));
    }
    match decode_u8_blocks(&table, blocks, kernel)
        .iter()
        .position(|&ok| !ok)
    {
        Some(b) => Err(corrupt_block(b)),
        None => Ok(()),
    }
}

fn decode_wide_into<T: Int, const NPHASES: usize, const W: usize>(
    layout: &Layout<'_>,
    len: usize,
    out: &mut Vec<T>,
    kernel: Kernel,
) -> Result<()> {
    crate::resize_for_overwrite(out, len, T::ZERO);
    let table = decode_table(&layout.freqs);
    decode_wide_blocks::<T, NPHASES, W>(layout, &table, 0, out, kernel)
}

/// Decodes the blocks from `first` on into `out`, which holds whole blocks (the last one may
/// be the node's short last block).
fn decode_wide_blocks<T: Int, const NPHASES: usize, const W: usize>(
    layout: &Layout<'_>,
    table: &[u32; TOTAL as usize],
    first: usize,
    out: &mut [T],
    kernel: Kernel,
) -> Result<()> {
    let buckets = Buckets::new();
    let mut blocks = Vec::with_capacity(out.len().div_ceil(layout.block));
    for (b, chunk) in out.chunks_mut(layout.block).enumerate() {
        let Some((init, words)) = layout.block(first + b) else {
            return Err(corrupt_block(first + b));
        };
        blocks.push(Block::new(init, words, chunk));
    }
    #[cfg(target_arch = "x86_64")]
    if kernel == Kernel::Avx512 {
        // Buckets below 16 are their value with no bypass bits, so when the table has no
        // others the later phases read nothing and one phase decodes the same stream.
        let one_phase = layout.freqs.len() <= 16;
        // Blocks in lockstep: their states are independent, so their steps overlap. One
        // phase is short enough for four to fit the registers.
        if one_phase {
            for quad in blocks.chunks_exact_mut(4) {
                if let Ok(quad) = <&mut [Block<'_, T>; 4]>::try_from(quad) {
                    // SAFETY: `Kernel::Avx512` is only made after checking the CPU features.
                    unsafe { avx512::run_wide::<T, 1, 4>(table, quad) };
                }
            }
        }
        for pair in blocks.chunks_exact_mut(2) {
            if let Ok(pair) = <&mut [Block<'_, T>; 2]>::try_from(pair) {
                // SAFETY: `Kernel::Avx512` is only made after checking the CPU features.
                unsafe {
                    if one_phase {
                        avx512::run_wide::<T, 1, 2>(table, pair);
                    } else {
                        avx512::run_wide::<T, NPHASES, 2>(table, pair);
                    }
                }
            }
        }
        for b in &mut blocks {
            // SAFETY: as above.
            unsafe { avx512::run_wide::<T, NPHASES, 1>(table, std::array::from_mut(b)) };
        }
    }
    #[cfg(target_arch = "x86_64")]
    if kernel == Kernel::Avx2 {
        // Two blocks in lockstep, then each alone; one phase when the table allows (as above).
        let one_phase = layout.freqs.len() <= 16;
        for pair in blocks.chunks_exact_mut(2) {
            if let Ok(pair) = <&mut [Block<'_, T>; 2]>::try_from(pair) {
                // SAFETY: `Kernel::Avx2` is only made after checking the CPU features.
                unsafe {
                    if one_phase {
                        avx2::run_wide::<T, 1, 2>(table, pair);
                    } else {
                        avx2::run_wide::<T, NPHASES, 2>(table, pair);
                    }
                }
            }
        }
        for b in &mut blocks {
            // SAFETY: as above.
            unsafe { avx2::run_wide::<T, NPHASES, 1>(table, std::array::from_mut(b)) };
        }
    }
    let _ = kernel;
    // Every block is finished before the first failure is reported, so the output does not
    // depend on the kernel even for corrupt data.
    let ok: Vec<bool> = blocks
        .into_iter()
        .map(|b| finish_wide::<T, NPHASES, W>(table, &buckets, b))
        .collect();
    match ok.iter().position(|&ok| !ok) {
        Some(b) => Err(corrupt_block(first + b)),
        None => Ok(()),
    }
}

/// [`decode_wide_blocks`] for `u32` values: without buckets of more than 16 bypass bits
/// (values below 2^18) the third phase never moves a state, so two phases decode the same
/// stream faster.
fn decode_u32_blocks(
    layout: &Layout<'_>,
    table: &[u32; TOTAL as usize],
    first: usize,
    out: &mut [u32],
    kernel: Kernel,
) -> Result<()> {
    if layout.freqs.len() <= TWO_PHASE_BUCKETS {
        decode_wide_blocks::<u32, 2, 64>(layout, table, first, out, kernel)
    } else {
        decode_wide_blocks::<u32, 3, 128>(layout, table, first, out, kernel)
    }
}

/// Decodes a `u32` `ans` node two blocks at a time into a buffer that stays in cache, handing
/// each run of values to `f` in order: a consumer that folds the values as they come (as
/// `words` does) never writes or reads the whole stream.
pub(crate) fn for_each_u32_run(
    node: &NodeView<'_>,
    mut f: impl FnMut(&mut [u32]) -> Result<()>,
) -> Result<()> {
    if node.ptype != PType::U32 {
        return Err(Error::corrupt(format!(
            "ans node of {} values where u32 values belong",
            node.ptype
        )));
    }
    let (mut states, mut starts, mut words) = (Vec::new(), Vec::new(), Vec::new());
    let layout = parse(node, &mut states, &mut starts, &mut words)?;
    let kernel = Kernel::best();
    let table = decode_table(&layout.freqs);
    let mut buf = Vec::new();
    let step = 2 * layout.block;
    for (i, start) in (0..node.len).step_by(step).enumerate() {
        let n = step.min(node.len - start);
        crate::resize_for_overwrite(&mut buf, n, 0u32);
        decode_u32_blocks(&layout, &table, 2 * i, &mut buf, kernel)?;
        f(&mut buf)?;
    }
    Ok(())
}

impl Encoding for Ans {
    fn descriptor(&self) -> &'static crate::Descriptor {
        &DESCRIPTOR
    }
    fn calibration(&self) -> Vec<crate::Calibration> {
        vec![crate::Calibration {
            stream: crate::selection::text_bytes(),
            plan: "ans",
            minus: &[],
        }]
    }
    fn max_params(&self) -> usize {
        1
    }
    fn accepts(&self, ptype: PType) -> bool {
        alphabet(ptype).is_some()
    }

    fn encode(&self, plan: &Plan, input: &Values) -> Result<EncodedNode> {
        let v = unsigned_input(plan, input)?;
        encode_values(v, resolve_block_log2(plan)?)
    }

    fn decode(&self, node: &NodeView<'_>, out: &mut Values, scratch: &mut Scratch) -> Result<()> {
        let _ = scratch;
        let (mut states, mut starts, mut words) = (Vec::new(), Vec::new(), Vec::new());
        let layout = parse(node, &mut states, &mut starts, &mut words)?;
        let len = node.len;
        match out {
            Values::Int(IntVec::U8(o)) => decode_bytes_into(&layout, len, o, Kernel::best()),
            Values::Int(IntVec::U16(o)) => {
                decode_wide_into::<u16, 2, 64>(&layout, len, o, Kernel::best())
            }
            Values::Int(IntVec::U32(o)) => {
                crate::resize_for_overwrite(o, len, 0);
                decode_u32_blocks(&layout, &decode_table(&layout.freqs), 0, o, Kernel::best())
            }
            _ => Err(Error::corrupt(format!(
                "ans node for {} values",
                out.ptype()
            ))),
        }
    }

    fn params(&self, node: &NodeView<'_>) -> Vec<i64> {
        match node.meta.first() {
            Some(&b) if u32::from(b) != DEFAULT_BLOCK_LOG2 => vec![i64::from(b)],
            _ => Vec::new(),
        }
    }

    fn estimate(&self, plan: &Plan, input: &Values) -> Result<usize> {
        let v = unsigned_input(plan, input)?;
        if u32::try_from(v.len()).is_err() {
            return Err(Error::unsupported(format!(
                "stream of {} values exceeds 2^32 - 1",
                v.len()
            )));
        }
        estimate_values(v, resolve_block_log2(plan)?)
    }
}

/// What `ans` is: its id, name, child slots, GPU decoding and part in the search.
pub const DESCRIPTOR: crate::Descriptor = crate::Descriptor {
    id: 16,
    name: "ans",
    slots: Slot::NONE,
    leaf_for_numbers: false,
    gpu: crate::GpuDecode::not_parallel(Pattern::Serial),
    search: crate::Search::numeric(crate::Role::Entropy),
};

#[cfg(test)]
mod tests;
