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

/// Per symbol: frequency, cumulative frequency and `ceil(2^44 / frequency)`, which turns
/// `x / f` into a multiplication: for `x < 2^32` the product overshoots `x / f` by less than
/// `2^-12`, and `x / f` is at least `1 / f > 2^-12` below the next integer, so the floor is
/// exact.
struct EncodeModel {
    freq: [u32; MAX_ALPHABET],
    cum: [u32; MAX_ALPHABET],
    rcp: [u64; MAX_ALPHABET],
}

impl EncodeModel {
    fn new(freqs: &[u32]) -> EncodeModel {
        let mut m = EncodeModel {
            freq: [0; MAX_ALPHABET],
            cum: [0; MAX_ALPHABET],
            rcp: [0; MAX_ALPHABET],
        };
        let mut acc = 0;
        for (s, &f) in freqs.iter().enumerate() {
            m.freq[s] = f;
            m.cum[s] = acc;
            m.rcp[s] = (1u64 << 44).div_ceil(u64::from(f.max(1)));
            acc += f;
        }
        m
    }
}

/// The state once its low word is emitted (shifted out) if `need`, else `s`.
#[inline(always)]
fn shed(s: u32, need: bool) -> u32 {
    std::hint::select_unpredictable(need, s >> 16, s)
}

/// Encodes symbol `sym` into `s`; returns the new state, the word to emit and whether to.
#[inline(always)]
fn encode_symbol(model: &EncodeModel, s: u32, sym: usize) -> (u32, u16, bool) {
    let (f, c, rcp) = (model.freq[sym], model.cum[sym], model.rcp[sym]);
    let need = s >= f << (32 - PRECISION);
    let v = shed(s, need);
    let q = ((u128::from(v) * u128::from(rcp)) >> 44) as u32;
    ((q << PRECISION) + (v - q * f) + c, s as u16, need)
}

/// Encodes `k <= 16` bypass bits into `s` (nothing for `k = 0`, branch-free); returns the new
/// state, the word to emit and whether to.
#[inline(always)]
fn encode_bits(s: u32, bits: u32, k: u32) -> (u32, u16, bool) {
    let need = u64::from(s) >= 1 << (32 - k);
    (
        (shed(s, need) << k) | (bits & ((1 << k) - 1)),
        s as u16,
        need,
    )
}

/// Encodes one block (`syms`, and `values` for bypass bits unless empty) backwards into
/// `buf` (words in reverse order, returns how many), leaving the final states in `x`.
///
/// Within a step, each lane runs all its operations with its state in a register, keeping
/// the words it may emit per phase; they are then appended phase by phase, lanes backwards,
/// which is the order a phase-by-phase encoder would emit them in.
fn encode_block<V: Copy + Into<u32>>(
    syms: &[u8],
    values: &[V],
    nphases: usize,
    model: &EncodeModel,
    x: &mut [u32; LANES],
    buf: &mut [u16],
) -> usize {
    let mut p = 0;
    let mut word = [[0u16; LANES]; 3];
    let mut need = [[false; LANES]; 3];
    for (step, step_syms) in syms.chunks(LANES).enumerate().rev() {
        let n = step_syms.len();
        if nphases == 1 {
            for (s, &sym) in x.iter_mut().zip(step_syms).rev() {
                let (y, w, e) = encode_symbol(model, *s, usize::from(sym));
                *s = y;
                buf[p] = w;
                p += usize::from(e);
            }
            continue;
        }
        let step_values = &values[step * LANES..step * LANES + n];
        for (lane, ((s, &sym), &v)) in x.iter_mut().zip(step_syms).zip(step_values).enumerate() {
            let v: u32 = v.into();
            let nb = bypass_bits(u32::from(sym));
            let mut y = *s;
            if nphases >= 3 {
                let (z, w, e) = encode_bits(y, v >> 16, nb.saturating_sub(16));
                (y, word[2][lane], need[2][lane]) = (z, w, e);
            }
            let (z, w, e) = encode_bits(y, v, nb.min(16));
            (y, word[1][lane], need[1][lane]) = (z, w, e);
            let (z, w, e) = encode_symbol(model, y, usize::from(sym));
            (*s, word[0][lane], need[0][lane]) = (z, w, e);
        }
        for phase in (0..nphases).rev() {
            for lane in (0..n).rev() {
                buf[p] = word[phase][lane];
                p += usize::from(need[phase][lane]);
            }
        }
    }
    p
}

/// Builds the node for `v` with blocks of `2^block_log2` values.
fn encode_values(v: &IntVec, block_log2: u32) -> Result<EncodedNode> {
    let ptype = v.ptype();
    let mut node = EncodedNode::new(ID, ptype, v.len())?;
    let (Some(alpha), Some(symbols)) = (alphabet(ptype), Symbols::of(v)) else {
        return Err(Error::unsupported(format!(
            "ans cannot code {ptype} values"
        )));
    };
    let syms = symbols.syms();
    let freqs = quantize(&histogram(syms), alpha);
    let model = EncodeModel::new(&freqs);
    node.meta.push(block_log2 as u8);
    write_table(&freqs, &mut node.meta);
    let block = 1usize << block_log2;
    let nphases = phases(ptype);
    match &symbols {
        Symbols::Bytes(b) => encode_blocks::<u8>(&mut node, b, &[], nphases, &model, block)?,
        Symbols::U16 { buckets, values } => {
            encode_blocks(&mut node, buckets, values, nphases, &model, block)?
        }
        Symbols::U32 { buckets, values } => {
            encode_blocks(&mut node, buckets, values, nphases, &model, block)?
        }
    }
    Ok(node)
}

/// Encodes `syms` (and `values` for bypass bits unless empty) block by block into `node`'s
/// three buffers.
fn encode_blocks<V: Copy + Into<u32>>(
    node: &mut EncodedNode,
    syms: &[u8],
    values: &[V],
    nphases: usize,
    model: &EncodeModel,
    block: usize,
) -> Result<()> {
    let nblocks = syms.len().div_ceil(block);
    let mut states = Vec::with_capacity(nblocks * LANES * 4);
    let mut starts = Vec::with_capacity(nblocks * 4);
    let mut words: Vec<u16> = Vec::with_capacity(syms.len() * nphases / 2);
    let mut buf = vec![0u16; block.min(syms.len()) * nphases + 1];
    for (b, block_syms) in syms.chunks(block).enumerate() {
        let block_values = if values.is_empty() {
            &[][..]
        } else {
            &values[b * block..b * block + block_syms.len()]
        };
        let mut x = [STATE_LOW; LANES];
        let n = encode_block(block_syms, block_values, nphases, model, &mut x, &mut buf);
        let start = u32::try_from(words.len())
            .map_err(|_| Error::unsupported("ans stream of more than 2^32 words in one chunk"))?;
        starts.extend_from_slice(&start.to_le_bytes());
        for s in x {
            states.extend_from_slice(&s.to_le_bytes());
        }
        words.extend(buf[..n].iter().rev());
    }
    node.buffers.push(states);
    node.buffers.push(starts);
    node.buffers.push(bytemuck::cast_slice(&words).to_vec());
    Ok(())
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

/// The byte decoder on AVX-512: 16 lanes per vector, two vectors per step, the table read by a
/// gather and the refill words placed by an expand (the CPU's form of the warp's ballot and
/// prefix count). Bit-identical to [`step_u8`], which the tests check.
#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::{Block, ByteBlock, LANES, PRECISION, STATE_LOW, TOTAL};
    use std::arch::x86_64::*;
    use zipflow_core::Int;

    /// Whether this CPU runs [`run`].
    pub(super) fn available() -> bool {
        is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("popcnt")
    }

    /// Refills the lanes of `y` below 2^16 from `words` at `*pos` in lane order (at least 16
    /// words must exist there).
    #[inline]
    #[target_feature(enable = "avx512f,popcnt")]
    fn refill(y: __m512i, words: &[u16], pos: &mut usize) -> __m512i {
        let need = _mm512_cmplt_epu32_mask(y, _mm512_set1_epi32(STATE_LOW as i32));
        debug_assert!(*pos + 16 <= words.len());
        // SAFETY: the caller guarantees 16 words at `*pos`.
        let w = unsafe { _mm256_loadu_si256(words.as_ptr().add(*pos).cast()) };
        let w = _mm512_maskz_expand_epi32(need, _mm512_cvtepu16_epi32(w));
        *pos += need.count_ones() as usize;
        _mm512_mask_or_epi32(y, need, _mm512_slli_epi32::<16>(y), w)
    }

    /// One vector of 16 lanes: decodes a symbol from each state and refills; returns the
    /// table entries (the symbol in the low byte).
    #[inline]
    #[target_feature(enable = "avx512f,popcnt")]
    fn symbol(
        table: &[u32; TOTAL as usize],
        x: &mut __m512i,
        words: &[u16],
        pos: &mut usize,
    ) -> __m512i {
        let slot = _mm512_and_si512(*x, _mm512_set1_epi32((TOTAL - 1) as i32));
        // SAFETY: every index is `slot <= 4095`, inside the 4096-entry table.
        let e = unsafe { _mm512_i32gather_epi32::<4>(slot, table.as_ptr().cast()) };
        let f = _mm512_srli_epi32::<20>(e);
        let bias = _mm512_and_si512(
            _mm512_srli_epi32::<8>(e),
            _mm512_set1_epi32((TOTAL - 1) as i32),
        );
        let y = _mm512_add_epi32(
            _mm512_mullo_epi32(f, _mm512_srli_epi32::<PRECISION>(*x)),
            bias,
        );
        *x = refill(y, words, pos);
        e
    }

    /// Byte symbols of 16 lanes.
    #[inline]
    #[target_feature(enable = "avx512f,popcnt")]
    fn half(
        table: &[u32; TOTAL as usize],
        x: &mut __m512i,
        words: &[u16],
        pos: &mut usize,
    ) -> __m128i {
        _mm512_cvtepi32_epi8(symbol(table, x, words, pos))
    }

    /// Decodes whole steps of `N` `u16`/`u32` blocks (`NPHASES` phases) in lockstep while
    /// each has a step whose words surely exist.
    #[target_feature(enable = "avx512f,popcnt")]
    pub(super) fn run_wide<T: Int, const NPHASES: usize, const N: usize>(
        table: &[u32; TOTAL as usize],
        blocks: &mut [Block<'_, T>; N],
    ) {
        const { assert!(size_of::<T>() == 2 || size_of::<T>() == 4) };
        let mut vs = [[_mm512_setzero_si512(); 2]; N];
        for (b, v) in blocks.iter().zip(vs.iter_mut()) {
            // SAFETY: `x` holds 32 u32s, two unaligned 64-byte loads.
            *v = unsafe {
                [
                    _mm512_loadu_si512(b.x.as_ptr().cast()),
                    _mm512_loadu_si512(b.x.as_ptr().add(16).cast()),
                ]
            };
        }
        let one = _mm512_set1_epi32(1);
        while blocks.iter().all(|b| b.can_step_phases(NPHASES)) {
            for (blk, v) in blocks.iter_mut().zip(vs.iter_mut()) {
                // `can_step_phases`: 32 words per phase at `pos`, 16 for each half.
                let (words, pos) = (blk.words, &mut blk.pos);
                let mut bucket = [_mm512_setzero_si512(); 2];
                for (b, x) in bucket.iter_mut().zip(v.iter_mut()) {
                    *b = _mm512_and_si512(symbol(table, x, words, pos), _mm512_set1_epi32(0xff));
                }
                if NPHASES == 1 {
                    for (h, b) in bucket.iter().enumerate() {
                        // SAFETY: as for the stores below.
                        unsafe {
                            store_lanes::<T>(blk.out.as_mut_ptr().add(blk.done + 16 * h), *b)
                        };
                    }
                    blk.done += LANES;
                    continue;
                }
                let mut val = [_mm512_setzero_si512(); 2];
                let mut nb = [_mm512_setzero_si512(); 2];
                for ((b, x), (val, nb)) in bucket
                    .iter()
                    .zip(v.iter_mut())
                    .zip(val.iter_mut().zip(nb.iter_mut()))
                {
                    // Buckets from 16 carry `b / 4 - 2` bypass bits above a base of
                    // `(4 + b % 4) << nb`; smaller ones are their value.
                    let large = _mm512_cmpge_epu32_mask(*b, _mm512_set1_epi32(16));
                    *nb = _mm512_maskz_sub_epi32(
                        large,
                        _mm512_srli_epi32::<2>(*b),
                        _mm512_set1_epi32(2),
                    );
                    let base = _mm512_mask_sllv_epi32(
                        *b,
                        large,
                        _mm512_add_epi32(
                            _mm512_set1_epi32(4),
                            _mm512_and_si512(*b, _mm512_set1_epi32(3)),
                        ),
                        *nb,
                    );
                    let k = _mm512_min_epu32(*nb, _mm512_set1_epi32(16));
                    let low =
                        _mm512_and_si512(*x, _mm512_sub_epi32(_mm512_sllv_epi32(one, k), one));
                    *val = _mm512_or_si512(base, low);
                    *x = refill(_mm512_srlv_epi32(*x, k), words, pos);
                }
                if NPHASES >= 3 {
                    for (x, (val, nb)) in v.iter_mut().zip(val.iter_mut().zip(nb.iter())) {
                        let k = _mm512_sub_epi32(*nb, _mm512_min_epu32(*nb, _mm512_set1_epi32(16)));
                        let high =
                            _mm512_and_si512(*x, _mm512_sub_epi32(_mm512_sllv_epi32(one, k), one));
                        *val = _mm512_or_si512(*val, _mm512_slli_epi32::<16>(high));
                        *x = refill(_mm512_srlv_epi32(*x, k), words, pos);
                    }
                }
                for (h, val) in val.iter().enumerate() {
                    // SAFETY: `can_step_phases` left 32 values at `done`; this writes 16 at
                    // `done + 16 h`.
                    unsafe { store_lanes::<T>(blk.out.as_mut_ptr().add(blk.done + 16 * h), *val) };
                }
                blk.done += LANES;
            }
        }
        for (b, v) in blocks.iter_mut().zip(vs.iter()) {
            // SAFETY: as for the loads.
            unsafe {
                _mm512_storeu_si512(b.x.as_mut_ptr().cast(), v[0]);
                _mm512_storeu_si512(b.x.as_mut_ptr().add(16).cast(), v[1]);
            }
        }
    }

    /// Stores 16 lanes of `val` at `o` as u16 or u32 values.
    ///
    /// # Safety
    /// `o` has room for 16 `T`s, and `T` is 2 or 4 bytes wide.
    #[inline]
    #[target_feature(enable = "avx512f,popcnt")]
    unsafe fn store_lanes<T: Int>(o: *mut T, val: __m512i) {
        // SAFETY: the caller's contract.
        unsafe {
            if size_of::<T>() == 2 {
                _mm256_storeu_si256(o.cast(), _mm512_cvtepi32_epi16(val));
            } else {
                _mm512_storeu_si512(o.cast(), val);
            }
        }
    }

    /// Decodes whole steps of `N` blocks in lockstep while each has a step whose words surely
    /// exist.
    #[target_feature(enable = "avx512f,popcnt")]
    pub(super) fn run<const N: usize>(
        table: &[u32; TOTAL as usize],
        blocks: &mut [ByteBlock<'_>; N],
    ) {
        let mut v = [[_mm512_setzero_si512(); 2]; N];
        for (b, v) in blocks.iter().zip(v.iter_mut()) {
            // SAFETY: `x` holds 32 u32s, two unaligned 64-byte loads.
            *v = unsafe {
                [
                    _mm512_loadu_si512(b.x.as_ptr().cast()),
                    _mm512_loadu_si512(b.x.as_ptr().add(16).cast()),
                ]
            };
        }
        while blocks.iter().all(ByteBlock::can_step) {
            for (b, v) in blocks.iter_mut().zip(v.iter_mut()) {
                // `can_step`: 32 words at `pos`, 16 for each half.
                let lo = half(table, &mut v[0], b.words, &mut b.pos);
                let hi = half(table, &mut v[1], b.words, &mut b.pos);
                // SAFETY: `can_step` checked `done + 32 <= out.len()`; two 16-byte stores.
                unsafe {
                    let o = b.out.as_mut_ptr().add(b.done);
                    _mm_storeu_si128(o.cast(), lo);
                    _mm_storeu_si128(o.add(16).cast(), hi);
                }
                b.done += LANES;
            }
        }
        for (b, v) in blocks.iter_mut().zip(v.iter()) {
            // SAFETY: as for the loads.
            unsafe {
                _mm512_storeu_si512(b.x.as_mut_ptr().cast(), v[0]);
                _mm512_storeu_si512(b.x.as_mut_ptr().add(16).cast(), v[1]);
            }
        }
    }
}

/// The byte decoder on AVX2: 8 lanes per vector, four vectors per step, the table read by a
/// gather and the refill words placed by a permutation looked up from the refill mask.
/// Bit-identical to [`step_u8`], which the tests check; the same step, with variable shifts
/// for the bypass bits, decodes `u16`/`u32` blocks ([`avx2::run_wide`]).
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{Block, ByteBlock, LANES, PRECISION, TOTAL};
    use std::arch::x86_64::*;
    use zipflow_core::Int;

    /// Whether this CPU runs [`run`].
    pub(super) fn available() -> bool {
        is_x86_feature_detected!("avx2") && is_x86_feature_detected!("popcnt")
    }

    /// For each 8-bit refill mask, the word each lane takes: the number of refilling lanes
    /// below it.
    static EXPAND: [[u32; 8]; 256] = {
        let mut t = [[0u32; 8]; 256];
        let mut m = 0;
        while m < 256 {
            let mut c = 0;
            let mut i = 0;
            while i < 8 {
                t[m][i] = c;
                c += (m >> i) as u32 & 1;
                i += 1;
            }
            m += 1;
        }
        t
    };

    /// One vector of 8 lanes: decodes a symbol from each state, refills from `words` at `*pos`
    /// (at least 8 words must exist there), returns the 8 symbols in the low 8 bytes.
    #[inline]
    #[target_feature(enable = "avx2,popcnt")]
    fn quarter(
        table: &[u32; TOTAL as usize],
        x: &mut __m256i,
        words: &[u16],
        pos: &mut usize,
    ) -> __m128i {
        let e = entries(table, x, words, pos);
        // Byte 0 of each 32-bit lane, then the two 128-bit halves side by side.
        let pick = _mm256_setr_epi8(
            0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 8, 12, -1, -1, -1,
            -1, -1, -1, -1, -1, -1, -1, -1, -1,
        );
        let b = _mm256_shuffle_epi8(e, pick);
        _mm_unpacklo_epi32(_mm256_castsi256_si128(b), _mm256_extracti128_si256::<1>(b))
    }

    /// One vector of 8 lanes: decodes a symbol from each state and refills from `words` at
    /// `*pos` (at least 8 words must exist there); returns the table entries (the symbol in
    /// the low byte).
    #[inline]
    #[target_feature(enable = "avx2,popcnt")]
    fn entries(
        table: &[u32; TOTAL as usize],
        x: &mut __m256i,
        words: &[u16],
        pos: &mut usize,
    ) -> __m256i {
        let mask = _mm256_set1_epi32((TOTAL - 1) as i32);
        let slot = _mm256_and_si256(*x, mask);
        // SAFETY: every index is `slot <= 4095`, inside the 4096-entry table.
        let e = unsafe { _mm256_i32gather_epi32::<4>(table.as_ptr().cast(), slot) };
        let f = _mm256_srli_epi32::<20>(e);
        let bias = _mm256_and_si256(_mm256_srli_epi32::<8>(e), mask);
        let y = _mm256_add_epi32(
            _mm256_mullo_epi32(f, _mm256_srli_epi32::<{ PRECISION as i32 }>(*x)),
            bias,
        );
        *x = refill(y, words, pos);
        e
    }

    /// Refills the lanes of `y` below 2^16 from `words` at `*pos` in lane order (at least 8
    /// words must exist there).
    #[inline]
    #[target_feature(enable = "avx2,popcnt")]
    fn refill(y: __m256i, words: &[u16], pos: &mut usize) -> __m256i {
        let need = _mm256_cmpeq_epi32(_mm256_srli_epi32::<16>(y), _mm256_setzero_si256());
        let m = _mm256_movemask_ps(_mm256_castsi256_ps(need)) as usize & 0xff;
        debug_assert!(*pos + 8 <= words.len());
        // SAFETY: the caller guarantees 8 words at `*pos`.
        let w = unsafe { _mm_loadu_si128(words.as_ptr().add(*pos).cast()) };
        // SAFETY: `m < 256` indexes the table; each row is 32 bytes.
        let idx = unsafe { _mm256_loadu_si256(EXPAND[m].as_ptr().cast()) };
        let w = _mm256_permutevar8x32_epi32(_mm256_cvtepu16_epi32(w), idx);
        let refilled = _mm256_or_si256(_mm256_slli_epi32::<16>(y), w);
        *pos += m.count_ones() as usize;
        _mm256_blendv_epi8(y, refilled, need)
    }

    /// Decodes whole steps of `N` `u16`/`u32` blocks (`NPHASES` phases) in lockstep while
    /// each has a step whose words surely exist, as the AVX-512 `run_wide` does with half the
    /// lanes a vector. Bit-identical to [`super::step_wide`].
    #[target_feature(enable = "avx2,popcnt")]
    pub(super) fn run_wide<T: Int, const NPHASES: usize, const N: usize>(
        table: &[u32; TOTAL as usize],
        blocks: &mut [Block<'_, T>; N],
    ) {
        const { assert!(size_of::<T>() == 2 || size_of::<T>() == 4) };
        let mut v = [[_mm256_setzero_si256(); 4]; N];
        for (b, v) in blocks.iter().zip(v.iter_mut()) {
            for (i, v) in v.iter_mut().enumerate() {
                // SAFETY: `x` holds 32 u32s; this reads 8 of them at `8 i`.
                *v = unsafe { _mm256_loadu_si256(b.x.as_ptr().add(8 * i).cast()) };
            }
        }
        let (low, one, two) = (
            _mm256_set1_epi32(0xff),
            _mm256_set1_epi32(1),
            _mm256_set1_epi32(2),
        );
        let (three, four, fifteen, sixteen) = (
            _mm256_set1_epi32(3),
            _mm256_set1_epi32(4),
            _mm256_set1_epi32(15),
            _mm256_set1_epi32(16),
        );
        while blocks.iter().all(|b| b.can_step_phases(NPHASES)) {
            for (blk, v) in blocks.iter_mut().zip(v.iter_mut()) {
                // `can_step_phases`: 32 words per phase at `pos`, 8 for each quarter.
                let (words, pos) = (blk.words, &mut blk.pos);
                let mut val = [_mm256_setzero_si256(); 4];
                for (val, x) in val.iter_mut().zip(v.iter_mut()) {
                    *val = _mm256_and_si256(entries(table, x, words, pos), low);
                }
                if NPHASES >= 2 {
                    let mut nb = [_mm256_setzero_si256(); 4];
                    for ((b, x), nb) in val.iter_mut().zip(v.iter_mut()).zip(nb.iter_mut()) {
                        // Buckets from 16 carry `b / 4 - 2` bypass bits above a base of
                        // `(4 + b % 4) << nb`; smaller ones are their value.
                        let large = _mm256_cmpgt_epi32(*b, fifteen);
                        *nb = _mm256_and_si256(
                            large,
                            _mm256_sub_epi32(_mm256_srli_epi32::<2>(*b), two),
                        );
                        let shifted = _mm256_sllv_epi32(
                            _mm256_add_epi32(four, _mm256_and_si256(*b, three)),
                            *nb,
                        );
                        let base = _mm256_blendv_epi8(*b, shifted, large);
                        let k = _mm256_min_epu32(*nb, sixteen);
                        let bits =
                            _mm256_and_si256(*x, _mm256_sub_epi32(_mm256_sllv_epi32(one, k), one));
                        *b = _mm256_or_si256(base, bits);
                        *x = refill(_mm256_srlv_epi32(*x, k), words, pos);
                    }
                    if NPHASES >= 3 {
                        for ((val, x), nb) in val.iter_mut().zip(v.iter_mut()).zip(nb.iter()) {
                            let k = _mm256_sub_epi32(*nb, _mm256_min_epu32(*nb, sixteen));
                            let high = _mm256_and_si256(
                                *x,
                                _mm256_sub_epi32(_mm256_sllv_epi32(one, k), one),
                            );
                            *val = _mm256_or_si256(*val, _mm256_slli_epi32::<16>(high));
                            *x = refill(_mm256_srlv_epi32(*x, k), words, pos);
                        }
                    }
                }
                for (i, val) in val.iter().enumerate() {
                    // SAFETY: `can_step_phases` checked `done + 32 <= out.len()`; this writes
                    // 8 values at `done + 8 i`.
                    unsafe { store8::<T>(blk.out.as_mut_ptr().add(blk.done + 8 * i), *val) };
                }
                blk.done += LANES;
            }
        }
        for (b, v) in blocks.iter_mut().zip(v.iter()) {
            for (i, v) in v.iter().enumerate() {
                // SAFETY: as for the loads.
                unsafe { _mm256_storeu_si256(b.x.as_mut_ptr().add(8 * i).cast(), *v) };
            }
        }
    }

    /// Stores 8 lanes of `val` (each below 2^16 when `T` is 2 bytes wide) at `o` as `T`s.
    ///
    /// # Safety
    /// `o` has room for 8 `T`s, and `T` is 2 or 4 bytes wide.
    #[inline]
    #[target_feature(enable = "avx2,popcnt")]
    unsafe fn store8<T: Int>(o: *mut T, val: __m256i) {
        // SAFETY: the caller's contract.
        unsafe {
            if size_of::<T>() == 2 {
                // Packing keeps each 128-bit half's four values side by side; the permute
                // puts the two halves' in order.
                let p = _mm256_permute4x64_epi64::<0b00_00_10_00>(_mm256_packus_epi32(val, val));
                _mm_storeu_si128(o.cast(), _mm256_castsi256_si128(p));
            } else {
                _mm256_storeu_si256(o.cast(), val);
            }
        }
    }

    /// Decodes whole steps of `N` blocks in lockstep while each has a step whose words surely
    /// exist.
    #[target_feature(enable = "avx2,popcnt")]
    pub(super) fn run<const N: usize>(
        table: &[u32; TOTAL as usize],
        blocks: &mut [ByteBlock<'_>; N],
    ) {
        let mut v = [[_mm256_setzero_si256(); 4]; N];
        for (b, v) in blocks.iter().zip(v.iter_mut()) {
            for (i, v) in v.iter_mut().enumerate() {
                // SAFETY: `x` holds 32 u32s; this reads 8 of them at `8 i`.
                *v = unsafe { _mm256_loadu_si256(b.x.as_ptr().add(8 * i).cast()) };
            }
        }
        while blocks.iter().all(ByteBlock::can_step) {
            for (b, v) in blocks.iter_mut().zip(v.iter_mut()) {
                for (i, v) in v.iter_mut().enumerate() {
                    // `can_step`: 32 words at `pos`, 8 for each quarter.
                    let s = quarter(table, v, b.words, &mut b.pos);
                    // SAFETY: `can_step` checked `done + 32 <= out.len()`; 8 bytes at `8 i`.
                    unsafe { _mm_storel_epi64(b.out.as_mut_ptr().add(b.done + 8 * i).cast(), s) };
                }
                b.done += LANES;
            }
        }
        for (b, v) in blocks.iter_mut().zip(v.iter()) {
            for (i, v) in v.iter().enumerate() {
                // SAFETY: as for the loads.
                unsafe { _mm256_storeu_si256(b.x.as_mut_ptr().add(8 * i).cast(), *v) };
            }
        }
    }
}

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
/// decoding): the log2 of its block size and the frequencies of its symbols `0..nsym`.
/// Decoders elsewhere (the GPU's) read the buffers themselves.
pub fn header(node: &NodeView<'_>) -> Result<(u32, Vec<u32>)> {
    let (mut states, mut starts, mut words) = (Vec::new(), Vec::new(), Vec::new());
    let layout = parse(node, &mut states, &mut starts, &mut words)?;
    Ok((layout.block.trailing_zeros(), layout.freqs))
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

/// Words the encoder emits for `syms`, predicted by running each lane's coder in the log
/// domain: `r` is `log2(x) - 16`, each operation adds its cost in bits and first emits a word
/// (`r -= 16`) when the result would pass 16, as the real coder does at `x >= 2^32`.
fn estimate_words(syms: &[u8], nphases: usize, freqs: &[u32], block: usize) -> usize {
    let mut cost = [0f32; MAX_ALPHABET];
    for (c, &f) in cost.iter_mut().zip(freqs) {
        if f > 0 {
            *c = PRECISION as f32 - (f as f32).log2();
        }
    }
    let mut words = 0usize;
    let mut op = |r: &mut f32, c: f32| {
        if *r + c >= 16.0 {
            *r -= 16.0;
            words += 1;
        }
        *r += c;
    };
    for blk in syms.chunks(block) {
        let mut r = [0f32; LANES];
        // In the encoder's order: steps and lanes backwards, bypass chunks before the symbol.
        for (j, &s) in blk.iter().enumerate().rev() {
            let lane = &mut r[j % LANES];
            if nphases > 1 {
                let nb = bypass_bits(u32::from(s));
                for k in [nb.saturating_sub(16), nb.min(16)] {
                    if k > 0 {
                        op(lane, k as f32);
                    }
                }
            }
            op(lane, cost[usize::from(s)]);
        }
    }
    words
}

/// Predicted size of the node for `v`: exact but for the word stream, which
/// [`estimate_words`] predicts from the quantised model.
fn estimate_values(v: &IntVec, block_log2: u32) -> Result<usize> {
    let ptype = v.ptype();
    let (Some(alpha), Some(symbols)) = (alphabet(ptype), Symbols::of(v)) else {
        return Err(Error::unsupported(format!(
            "ans cannot code {ptype} values"
        )));
    };
    let syms = symbols.syms();
    let freqs = quantize(&histogram(syms), alpha);
    let block = 1usize << block_log2;
    let nblocks = v.len().div_ceil(block);
    let words = estimate_words(syms, phases(ptype), &freqs, block);
    let pad8 = |n: usize| n.next_multiple_of(8);
    // Header and three buffer lengths (28 B, padded to 32), meta, states, starts, words.
    Ok(
        32 + pad8(1 + table_len(&freqs))
            + nblocks * LANES * 4
            + pad8(nblocks * 4)
            + pad8(words * 2),
    )
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
mod tests {
    use super::*;
    use crate::testing::*;
    use crate::{decode_bytes, describe, encode, estimate};
    use proptest::prelude::*;

    /// Encodes `values` by plan `p`, requires a bit-exact round trip, the estimate within 10 %
    /// of the size, the resolved plan to re-encode to the same bytes, and the bytes to decode
    /// the same by [`reference_decode`]. Returns the node.
    fn check(p: &str, values: &Values) -> Result<EncodedNode> {
        let node = encode(&plan(p), values)?;
        let bytes = node.to_bytes()?;
        assert_eq!(bytes.len(), node.size());
        assert_eq!(&decode_bytes(&bytes)?, values, "plan `{p}`");
        let est = estimate(&plan(p), values)? as f64;
        let size = node.size() as f64;
        assert!(
            (est - size).abs() <= 0.1 * size,
            "plan `{p}`: estimate {est}, size {size}"
        );
        let resolved = describe(&NodeView::parse(&bytes)?)?;
        assert_eq!(
            encode(&resolved, values)?.to_bytes()?,
            bytes,
            "`{resolved}`"
        );
        if node.id == ID {
            let Values::Int(v) = values else {
                panic!("ans takes integers")
            };
            let expected: Vec<u32> = match v {
                IntVec::U8(x) => x.iter().map(|&e| u32::from(e)).collect(),
                IntVec::U16(x) => x.iter().map(|&e| u32::from(e)).collect(),
                IntVec::U32(x) => x.clone(),
                _ => panic!("ans takes u8, u16 and u32"),
            };
            assert_eq!(reference_decode(&node), expected, "reference decoder");
        }
        Ok(node)
    }

    /// A decoder written from the module documentation alone, one coding operation at a time,
    /// with the warp's ballot and prefix count spelled out.
    fn reference_decode(node: &EncodedNode) -> Vec<u32> {
        let meta = &node.meta;
        let block = 1usize << meta[0];
        let nsym = usize::from(u16::from_le_bytes([meta[1], meta[2]]));
        let mut freq = Vec::new();
        let mut i = 3;
        while freq.len() < nsym {
            match meta[i] {
                0 => {
                    freq.extend(std::iter::repeat_n(0u32, usize::from(meta[i + 1]) + 1));
                    i += 2;
                }
                b if b < 0x80 => {
                    freq.push(u32::from(b));
                    i += 1;
                }
                b => {
                    freq.push(u32::from(b & 0x7f) + 128 * u32::from(meta[i + 1]));
                    i += 2;
                }
            }
        }
        let u32s = |b: &[u8]| -> Vec<u32> {
            b.chunks(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect()
        };
        let states = u32s(&node.buffers[0]);
        let starts = u32s(&node.buffers[1]);
        let words: Vec<u32> = node.buffers[2]
            .chunks(2)
            .map(|c| u32::from(c[0]) | u32::from(c[1]) << 8)
            .collect();
        let nphases = phases(node.ptype);
        let len = node.len as usize;
        let mut out = vec![0u32; len];
        for b in 0..len.div_ceil(block) {
            let n = (len - b * block).min(block);
            let mut x: Vec<u32> = states[b * 32..b * 32 + 32].to_vec();
            let mut pos = starts[b] as usize;
            let mut sym = [0u32; 32];
            for step in 0..n.div_ceil(32) {
                let active = (n - step * 32).min(32);
                for phase in 0..nphases {
                    // Every lane applies its operation, then the warp refills in lane order.
                    for lane in 0..active {
                        if phase == 0 {
                            let slot = x[lane] % 4096;
                            let mut c = 0;
                            let mut s = 0;
                            while c + freq[s] <= slot {
                                c += freq[s];
                                s += 1;
                            }
                            sym[lane] = s as u32;
                            x[lane] = freq[s] * (x[lane] / 4096) + slot - c;
                            out[b * block + step * 32 + lane] = s as u32;
                        } else if sym[lane] >= 16 {
                            let (e, m) = (sym[lane] / 4, sym[lane] % 4);
                            let nb = e - 2;
                            let (k, shift) = if phase == 1 {
                                (nb.min(16), 0)
                            } else {
                                (nb.saturating_sub(16), 16)
                            };
                            let bits = x[lane] % (1 << k);
                            x[lane] /= 1 << k;
                            let o = &mut out[b * block + step * 32 + lane];
                            if phase == 1 {
                                *o = (4 + m) << nb;
                            }
                            *o += bits << shift;
                        }
                    }
                    let ballot: Vec<bool> = (0..32).map(|l| l < active && x[l] < 65536).collect();
                    for lane in 0..32 {
                        if ballot[lane] {
                            let before = ballot[..lane].iter().filter(|&&r| r).count();
                            x[lane] = x[lane] * 65536 + words[pos + before];
                        }
                    }
                    pos += ballot.iter().filter(|&&r| r).count();
                }
            }
            assert!(x.iter().all(|&s| s == 65536), "block {b} final states");
        }
        out
    }

    /// Values drawn from a geometric-like distribution: value `i` about twice as likely as `i+1`
    /// with probability `p` percent... concentrated on small values.
    fn skewed(r: &mut impl FnMut() -> u64, n: usize, spread: u32) -> Vec<u32> {
        (0..n)
            .map(|_| {
                let u = r();
                // The number of trailing ones of `spread` random bits, plus a random low part.
                let t = (u | (1 << spread)).trailing_ones().min(spread);
                t * t + (((u >> 40) as u32) % (t + 1))
            })
            .collect()
    }

    fn u8s(v: &[u32]) -> Values {
        Values::Int(IntVec::U8(v.iter().map(|&x| x as u8).collect()))
    }
    fn u16s(v: &[u32]) -> Values {
        Values::Int(IntVec::U16(v.iter().map(|&x| x as u16).collect()))
    }
    fn u32s(v: &[u32]) -> Values {
        Values::Int(IntVec::U32(v.to_vec()))
    }

    /// Streams of every edge length and shape, as u32 (cast down per type).
    fn cases(max: u64) -> Vec<Vec<u32>> {
        let mut r = random(7);
        let mut rand =
            |n: usize| -> Vec<u32> { (0..n).map(|_| (r() % (max + 1)) as u32).collect() };
        let mut out = vec![
            vec![],
            vec![max as u32],
            vec![0],
            rand(31),
            rand(32),
            rand(33),
            rand(255),
            rand(256),
            rand(257),
            rand(3000),
            vec![5; 100],
            vec![max as u32; 777],
            (0..=max.min(4000)).map(|v| v as u32).collect(),
        ];
        let mut r = random(8);
        out.push(skewed(&mut r, 5000, 20));
        out.push(
            skewed(&mut r, 5000, 20)
                .iter()
                .map(|&v| (max as u32).wrapping_sub(v))
                .collect(),
        );
        out
    }

    #[test]
    fn round_trips_bytes() -> Result<()> {
        for c in cases(255) {
            for p in ["ans", "ans(5)", "ans(8)", "ans(6)"] {
                check(p, &u8s(&c))?;
            }
        }
        Ok(())
    }

    #[test]
    fn round_trips_u16() -> Result<()> {
        for c in cases(u64::from(u16::MAX)) {
            for p in ["ans", "ans(5)", "ans(8)"] {
                check(p, &u16s(&c))?;
            }
        }
        Ok(())
    }

    #[test]
    fn round_trips_u32() -> Result<()> {
        for c in cases(u64::from(u32::MAX)) {
            for p in ["ans", "ans(5)", "ans(8)"] {
                check(p, &u32s(&c))?;
            }
        }
        // Every bucket boundary, the largest value of each bucket and the extremes.
        let mut edges = vec![0, 1, 15, 16, 17, u32::MAX, u32::MAX - 1, 1 << 31];
        for e in 4..32 {
            for m in 0..4u32 {
                let base = (4 + m) << (e - 2);
                edges.extend([
                    base,
                    base + ((1 << (e - 2)) - 1),
                    base | 0x5555_5555 >> (34 - e),
                ]);
            }
        }
        check("ans(5)", &u32s(&edges))?;
        check(
            "ans",
            &u16s(&edges.iter().map(|&v| v & 0xffff).collect::<Vec<_>>()),
        )?;
        Ok(())
    }

    #[test]
    fn block_edges_and_many_blocks() -> Result<()> {
        let mut r = random(3);
        let block = 1 << DEFAULT_BLOCK_LOG2;
        for n in [block - 1, block, block + 1, 5 * block + 17] {
            let v = skewed(&mut r, n, 12);
            check("ans", &u8s(&v))?;
            check("ans", &u16s(&v))?;
            check("ans", &u32s(&v))?;
        }
        let v = skewed(&mut r, 100_000, 30);
        let node = check("ans(9)", &u32s(&v))?;
        assert_eq!(node.buffers[1].len(), 4 * 100_000usize.div_ceil(512));
        Ok(())
    }

    #[test]
    fn one_distinct_symbol_costs_nothing() -> Result<()> {
        for s in [0u32, 7, 255] {
            let node = check("ans", &u8s(&vec![s; 70_000]))?;
            assert!(
                node.buffers[2].len() <= 16,
                "{} word bytes",
                node.buffers[2].len()
            );
        }
        let node = check("ans", &u32s(&vec![u32::MAX; 10_000]))?;
        // Only the 29 bypass bits per value remain.
        let words = node.buffers[2].len() as f64;
        assert!((words - 10_000.0 * 29.0 / 8.0).abs() < 600.0, "{words}");
        Ok(())
    }

    #[test]
    fn buckets_round_trip() {
        for v in (0..=u32::from(u16::MAX)).chain((0..32).flat_map(|e| {
            let b = 1u32 << e;
            [b, b - 1, b + 1, b.wrapping_mul(3)]
        })) {
            let b = u32::from(bucket(v));
            let nb = bypass_bits(b);
            assert!(b < 128);
            assert_eq!(bucket_base(b) | (v & ((1u64 << nb) - 1) as u32), v, "{v}");
            assert_eq!(bucket_base(b) & ((1u64 << nb) - 1) as u32, 0, "{v}");
            if v <= u32::from(u16::MAX) {
                assert!(b < 64);
            }
        }
    }

    #[test]
    fn quantisation_is_valid_and_close_to_the_counts() {
        let mut r = random(11);
        for trial in 0..300 {
            let nsym = 1 + (r() % 256) as usize;
            let counts: Vec<u64> = (0..256)
                .map(|s| {
                    if s < nsym && r() % 3 < 2 {
                        1 + r() % (1 << (r() % 30))
                    } else {
                        0
                    }
                })
                .collect();
            let f = quantize(&counts, 256);
            let present = counts.iter().filter(|&&c| c > 0).count();
            if present == 0 {
                assert!(f.is_empty());
                continue;
            }
            assert_eq!(f.iter().sum::<u32>(), TOTAL, "trial {trial}");
            assert!(f.iter().all(|&x| x <= MAX_FREQ));
            assert!(f.last().is_some_and(|&x| x > 0));
            for (s, &c) in counts.iter().enumerate() {
                let q = f.get(s).copied().unwrap_or(0);
                if present > 1 {
                    assert_eq!(c > 0, q > 0, "trial {trial} symbol {s}");
                }
            }
            // The quantised code is within 1 % (or 0.01 bit per value) of the counts' entropy.
            let n: u64 = counts.iter().sum();
            let (mut ideal, mut coded) = (0.0, 0.0);
            for (s, &c) in counts.iter().enumerate() {
                if c > 0 {
                    let c = c as f64;
                    ideal -= c * (c / n as f64).log2();
                    coded -= c * (f64::from(f[s]) / f64::from(TOTAL)).log2();
                }
            }
            assert!(
                coded <= ideal * 1.01 + 0.01 * n as f64 + 64.0,
                "trial {trial}: {coded} vs {ideal}"
            );
        }
        assert_eq!(quantize(&[0, 0, 9], 3), vec![0, 1, 4095]);
        assert_eq!(quantize(&[9], 256), vec![4095, 1]);
        assert!(quantize(&[0; 256], 256).is_empty());
    }

    /// Order-0 entropy of `syms` under the node's quantised table, plus bypass bits, in bits.
    fn model_bits(node: &EncodedNode, values: &[u32]) -> f64 {
        let bytes = node.to_bytes().unwrap_or_else(|e| panic!("{e}"));
        let view = NodeView::parse(&bytes).unwrap_or_else(|e| panic!("{e}"));
        let mut meta = view.meta_reader();
        let _block_log2 = meta.u8("block size");
        let freqs = read_table(&mut meta, 256, false).unwrap_or_else(|e| panic!("{e}"));
        values
            .iter()
            .map(|&v| {
                let (s, extra) = if node.ptype == PType::U8 {
                    (v as usize, 0.0)
                } else {
                    let b = bucket(v);
                    (usize::from(b), f64::from(bypass_bits(u32::from(b))))
                };
                extra + (f64::from(TOTAL) / f64::from(freqs[s])).log2()
            })
            .sum()
    }

    #[test]
    fn skewed_data_costs_its_entropy() -> Result<()> {
        let mut r = random(21);
        let v = skewed(&mut r, 1 << 20, 14);
        for values in [
            u8s(&v),
            u16s(&v.iter().map(|&x| x * 37).collect::<Vec<_>>()),
        ] {
            let node = check("ans", &values)?;
            let Values::Int(iv) = &values else {
                unreachable!()
            };
            let as_u32: Vec<u32> = match iv {
                IntVec::U8(x) => x.iter().map(|&e| u32::from(e)).collect(),
                IntVec::U16(x) => x.iter().map(|&e| u32::from(e)).collect(),
                _ => unreachable!(),
            };
            let entropy = model_bits(&node, &as_u32);
            // The words carry the code less what the final states hold above 2^16.
            let states: f64 = node.buffers[0]
                .chunks(4)
                .map(|c| f64::from(u32::from_le_bytes([c[0], c[1], c[2], c[3]])).log2() - 16.0)
                .sum();
            let coded = 8.0 * node.buffers[2].len() as f64 + states;
            assert!(
                coded >= entropy * 0.999 && coded <= entropy * 1.002,
                "{} coded {coded} bits, entropy {entropy}",
                values.ptype()
            );
            let size = 8.0 * node.size() as f64;
            assert!(
                size <= entropy * 1.01,
                "{}: {size} bits, entropy {entropy}",
                values.ptype()
            );
        }
        Ok(())
    }

    #[test]
    fn signed_streams_go_through_zigzag() -> Result<()> {
        let mut r = random(5);
        let v: Vec<i64> = skewed(&mut r, 4000, 10)
            .iter()
            .enumerate()
            .map(|(i, &x)| {
                if i % 3 == 0 {
                    -i64::from(x)
                } else {
                    i64::from(x)
                }
            })
            .collect();
        check(
            "zigzag | ans",
            &Values::Int(IntVec::I8(v.iter().map(|&x| x as i8).collect())),
        )?;
        check(
            "zigzag | ans",
            &Values::Int(IntVec::I16(v.iter().map(|&x| x as i16).collect())),
        )?;
        check(
            "zigzag | ans(7)",
            &Values::Int(IntVec::I32(v.iter().map(|&x| x as i32 * 1000).collect())),
        )?;
        for bad in [
            Values::Int(IntVec::I8(vec![1])),
            Values::Int(IntVec::I32(vec![1])),
            Values::Int(IntVec::U64(vec![1])),
            Values::F64(vec![1.0]),
        ] {
            let e = encode(&plan("ans"), &bad);
            assert!(matches!(e, Err(Error::Plan { .. })), "{e:?}");
        }
        for p in ["ans(4)", "ans(25)", "ans(-1)"] {
            let e = encode(&plan(p), &u8s(&[1, 2]));
            assert!(matches!(e, Err(Error::Plan { .. })), "{p}: {e:?}");
        }
        Ok(())
    }

    #[test]
    fn describe_shows_only_non_default_blocks() -> Result<()> {
        let v = u8s(&[1, 2, 3, 3]);
        assert_eq!(described(&encode(&plan("ans"), &v)?.to_bytes()?)?, "ans");
        assert_eq!(
            described(&encode(&plan("ans(9)"), &v)?.to_bytes()?)?,
            "ans(9)"
        );
        Ok(())
    }

    #[test]
    fn corruption_is_an_error_not_a_panic() -> Result<()> {
        let mut r = random(9);
        let v = skewed(&mut r, 700, 16);
        for (p, values) in [
            ("ans(6)", u8s(&v)),
            (
                "ans(7)",
                u16s(&v.iter().map(|&x| x * 900).collect::<Vec<_>>()),
            ),
            (
                "ans(8)",
                u32s(
                    &v.iter()
                        .map(|&x| x.wrapping_mul(0x9e37_79b9))
                        .collect::<Vec<_>>(),
                ),
            ),
            ("ans", u8s(&[])),
            ("ans", u8s(&[4; 40])),
        ] {
            check_corruption(p, &encode(&plan(p), &values)?, 1)?;
        }
        Ok(())
    }

    #[test]
    fn detects_inconsistent_nodes() -> Result<()> {
        let mut r = random(13);
        let v = u8s(&skewed(&mut r, 2000, 16));
        let p = "ans(8)";
        let e = corrupt(p, &v, |n| n.meta[0] = 4)?;
        assert!(e.contains("block size"), "{e}");
        let e = corrupt(p, &v, |n| n.meta[1] = 255)?;
        assert!(e.contains("add up to") || e.contains("too short"), "{e}");
        let e = corrupt(p, &v, |n| {
            n.buffers[0][0..4].copy_from_slice(&5u32.to_le_bytes())
        })?;
        assert!(e.contains("below 2^16"), "{e}");
        let e = corrupt(p, &v, |n| {
            n.buffers[1][4..8].copy_from_slice(&u32::MAX.to_le_bytes())
        })?;
        assert!(e.contains("block starts"), "{e}");
        let e = corrupt(p, &v, |n| {
            let w = n.buffers[2].len();
            n.buffers[2].truncate(w - 2)
        })?;
        assert!(e.contains("does not decode"), "{e}");
        let e = corrupt(p, &v, |n| n.buffers[2][100] ^= 0x10)?;
        assert!(e.contains("does not decode"), "{e}");
        let e = corrupt(p, &v, |n| n.buffers[1].truncate(4))?;
        assert!(e.contains("block starts"), "{e}");
        let e = corrupt(p, &v, |n| n.ptype = PType::I8)?;
        assert!(e.contains("i8"), "{e}");
        let e = corrupt(p, &v, |n| n.ptype = PType::U16)?;
        assert!(
            e.contains("does not decode") || e.contains("symbols"),
            "{e}"
        );
        Ok(())
    }

    /// The SIMD byte decoders agree with the scalar one on good and on corrupted nodes.
    #[test]
    fn simd_matches_scalar() -> Result<()> {
        let mut r = random(17);
        for (n, spread, log2) in [
            (5000, 3, 8),
            (140_000, 14, 15),
            (3000, 40, 10),
            (999, 0, 5),
            (7 * 1024 + 5, 9, 10),
        ] {
            let v: Vec<u8> = skewed(&mut r, n, spread).iter().map(|&x| x as u8).collect();
            let good = encode(
                &plan(&format!("ans({log2})")),
                &Values::Int(IntVec::U8(v.clone())),
            )?;
            let mut flips = random(n as u64);
            for flip in 0..8 {
                let mut node = good.clone();
                let words = &mut node.buffers[2];
                if flip > 0 && !words.is_empty() {
                    let i = flips() as usize % words.len();
                    words[i] ^= 1 << (flips() % 8);
                }
                let bytes = node.to_bytes()?;
                let view = NodeView::parse(&bytes)?;
                let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
                let layout = parse(&view, &mut a, &mut b, &mut c)?;
                let mut scalar = Vec::new();
                let ok_scalar = decode_bytes_into(&layout, n, &mut scalar, Kernel::Scalar);
                if flip == 0 {
                    assert!(ok_scalar.is_ok());
                    assert_eq!(scalar, v);
                }
                for kernel in Kernel::available() {
                    let mut simd = vec![7u8; 3];
                    let ok = decode_bytes_into(&layout, n, &mut simd, kernel);
                    assert_eq!(
                        ok_scalar.as_ref().map_err(|e| e.to_string()),
                        ok.as_ref().map_err(|e| e.to_string()),
                        "{kernel:?} n {n} flip {flip}"
                    );
                    assert_eq!(scalar, simd, "{kernel:?} n {n} flip {flip}");
                }
            }
        }
        Ok(())
    }

    /// The SIMD `u16`/`u32` decoder agrees with the scalar one on good and corrupted nodes.
    #[test]
    fn wide_simd_matches_scalar() -> Result<()> {
        fn compare<T: zipflow_core::values::IntVecOf, const NPHASES: usize, const W: usize>(
            v: Vec<T>,
            log2: u32,
        ) -> Result<()> {
            let n = v.len();
            let good = encode(
                &plan(&format!("ans({log2})")),
                &Values::Int(T::wrap(v.clone())),
            )?;
            let mut flips = random(n as u64 + 1);
            for flip in 0..8 {
                let mut node = good.clone();
                let words = &mut node.buffers[2];
                if flip > 0 && !words.is_empty() {
                    let i = flips() as usize % words.len();
                    words[i] ^= 1 << (flips() % 8);
                }
                let bytes = node.to_bytes()?;
                let view = NodeView::parse(&bytes)?;
                let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
                let layout = parse(&view, &mut a, &mut b, &mut c)?;
                let mut scalar = Vec::new();
                let ok_scalar =
                    decode_wide_into::<T, NPHASES, W>(&layout, n, &mut scalar, Kernel::Scalar);
                if flip == 0 {
                    assert!(ok_scalar.is_ok());
                    assert_eq!(scalar, v);
                }
                for kernel in Kernel::available() {
                    let mut simd = Vec::new();
                    let ok = decode_wide_into::<T, NPHASES, W>(&layout, n, &mut simd, kernel);
                    assert_eq!(
                        ok_scalar.as_ref().map_err(|e| e.to_string()),
                        ok.as_ref().map_err(|e| e.to_string()),
                        "{kernel:?} n {n} flip {flip}"
                    );
                    assert_eq!(scalar, simd, "{kernel:?} n {n} flip {flip}");
                }
            }
            Ok(())
        }
        let mut r = random(19);
        for (n, spread, log2) in [(5000, 3, 8), (70_000, 30, 15), (3000, 40, 10), (999, 0, 5)] {
            let v = skewed(&mut r, n, spread);
            compare::<u16, 2, 64>(v.iter().map(|&x| (x * 97) as u16).collect(), log2)?;
            // Alphabets of at most 16 values: one phase.
            compare::<u16, 2, 64>(v.iter().map(|&x| (x % 11) as u16).collect(), log2)?;
            compare::<u32, 3, 128>(v.iter().map(|&x| x % 3).collect(), log2)?;
            compare::<u32, 3, 128>(
                v.iter().map(|&x| x.wrapping_mul(0x0101_0101 + x)).collect(),
                log2,
            )?;
            compare::<u32, 3, 128>((0..n).map(|_| r() as u32 >> (r() % 32)).collect(), log2)?;
            // Values below 2^18 decode with two phases (what `decode` picks for them) too.
            let small: Vec<u32> = (0..n).map(|_| (r() as u32 >> (r() % 32)) >> 14).collect();
            compare::<u32, 2, 64>(small.clone(), log2)?;
            compare::<u32, 3, 128>(small, log2)?;
        }
        Ok(())
    }

    proptest! {
        #[test]
        fn round_trip_random(v in prop::collection::vec(any::<u32>(), 0..1500),
                             shift in 0u32..32,
                             log2 in MIN_BLOCK_LOG2..10) {
            let v: Vec<u32> = v.iter().map(|&x| x >> shift).collect();
            let p = format!("ans({log2})");
            for values in [u8s(&v), u16s(&v), u32s(&v)] {
                check(&p, &values).map_err(|e| TestCaseError::fail(e.to_string()))?;
            }
        }
    }
}
