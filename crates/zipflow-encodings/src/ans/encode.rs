//! The encoder: blocks coded backwards, each lane's state in a register, and the size
//! predicted without coding.

use super::*;

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
pub(super) fn encode_values(v: &IntVec, block_log2: u32) -> Result<EncodedNode> {
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
pub(super) fn estimate_values(v: &IntVec, block_log2: u32) -> Result<usize> {
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
