//! FSST (Fast Static Symbol Table) over a byte stream: up to 255 symbols of 1 to 8 bytes, each
//! replaced by a one-byte code; other bytes are escaped as code 255 followed by the byte.
//!
//! The symbol table is trained on the stream by the `fsst-rs` crate, which also compresses.
//! Decoding is this module's own: it checks every code and every bound (the crate's decoder
//! panics on malformed input) and writes each symbol with one 8-byte store.
//!
//! The input is cut into pieces of 2^`log2_piece` bytes, compressed independently, so piece
//! `i` decodes alone into output bytes `i << log2_piece ..`: pieces run in parallel on a GPU
//! (one thread or warp each) and a damaged piece is found by its bounds.
//!
//! ```text
//! meta     := nsym: u8 | log2_piece: u8 | len: u8 x nsym
//! buffer 0 := symbol: u64 x nsym     (little-endian: the symbol's first byte is the low byte)
//! buffer 1 := end: u32 x npieces     (offset in the code stream where piece i ends)
//! child 0  := codes (u8 stream)      (default `plain`, e.g. `fsst(codes: ans)`)
//! ```
//! A byte string column uses it for its bytes: `plain(bytes: fsst)`. The code stream may not
//! be longer than the input (FSST expands incompressible bytes up to 2x); such input is refused
//! with a plan error so another plan is chosen.

use crate::node::{EncodedNode, NodeView, cast_or_copy};
use crate::{Encoding, Pattern, Scratch, Slot, encode_child, expect_child, resize_for_overwrite};
use fsst::Compressor;
use zipflow_core::{Error, IntVec, PType, Plan, Result, Values};

/// `fsst`.
pub struct Fsst;

/// On-disk id of [`Fsst`].
pub const ID: u16 = DESCRIPTOR.id;

/// The escape code.
pub const ESCAPE: u8 = 255;

/// Bytes per independently compressed piece (2^12).
pub const LOG2_PIECE: u8 = 12;

/// The longest piece a decoder accepts (2^24 bytes).
const MAX_LOG2_PIECE: u8 = 24;

/// A trained symbol table: symbol `c` is the low `lens[c]` bytes of `symbols[c]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SymbolTable {
    /// Symbols, little-endian.
    pub symbols: Vec<u64>,
    /// Their lengths, 1 to 8.
    pub lens: Vec<u8>,
}

/// Trains a table on `data` (deterministic: same input, same table).
pub fn train(data: &[u8]) -> Compressor {
    let piece = 1usize << LOG2_PIECE;
    let lines: Vec<&[u8]> = data.chunks(piece).collect();
    Compressor::train(&lines)
}

impl Encoding for Fsst {
    fn descriptor(&self) -> &'static crate::Descriptor {
        &DESCRIPTOR
    }
    fn calibration(&self) -> Vec<crate::Calibration> {
        vec![crate::Calibration {
            stream: crate::selection::text_bytes(),
            plan: "fsst(codes: plain)",
            minus: &[],
        }]
    }
    fn accepts(&self, ptype: PType) -> bool {
        ptype == PType::U8
    }

    fn encode(&self, plan: &Plan, input: &Values) -> Result<EncodedNode> {
        let Values::Int(IntVec::U8(data)) = input else {
            return Err(Error::plan(plan, "`fsst` encodes u8 streams only"));
        };
        let compressor = train(data);
        let nsym = compressor.n_symbols();
        let piece = 1usize << LOG2_PIECE;
        let mut codes: Vec<u8> = Vec::with_capacity(data.len() / 2 + 16);
        let mut ends = Vec::with_capacity(data.len().div_ceil(piece));
        for p in data.chunks(piece) {
            codes.reserve(2 * p.len() + 16);
            let spare = codes.spare_capacity_mut();
            // SAFETY: the spare capacity holds at least 2 * p.len() bytes, the most FSST writes
            // for p (every byte escaped).
            let n = unsafe { compressor.compress_into(p, spare) };
            let len = codes.len() + n;
            // SAFETY: compress_into initialised the first n bytes of the spare capacity.
            unsafe { codes.set_len(len) };
            if codes.len() > data.len() {
                return Err(Error::plan(
                    plan,
                    "`fsst` would expand these bytes (too few repeated substrings); use `plain`",
                ));
            }
            ends.push(u32::try_from(codes.len()).map_err(|_| {
                Error::unsupported("an fsst code stream longer than 4 GiB in one chunk")
            })?);
        }
        let mut node = EncodedNode::new(ID, PType::U8, data.len())?;
        node.meta.push(nsym as u8);
        node.meta.push(LOG2_PIECE);
        node.meta
            .extend_from_slice(&compressor.symbol_lengths()[..nsym]);
        let symbols: Vec<u8> = compressor
            .symbol_table()
            .iter()
            .flat_map(|s| s.to_u64().to_le_bytes())
            .collect();
        node.buffers.push(symbols);
        node.buffers.push(bytemuck::cast_slice(&ends).to_vec());
        node.children.push(encode_child(
            plan,
            self,
            "codes",
            &Values::Int(IntVec::U8(codes)),
        )?);
        Ok(node)
    }

    fn decode(&self, node: &NodeView<'_>, out: &mut Values, scratch: &mut Scratch) -> Result<()> {
        let View {
            table,
            log2_piece,
            ends,
        } = View::parse(node)?;
        let mut copy = Vec::new();
        let ends = cast_or_copy::<u32>(ends, &mut copy, "fsst")?;
        let Values::Int(IntVec::U8(out)) = out else {
            return Err(Error::corrupt("fsst decodes u8 streams only"));
        };
        let codes = scratch.decode(&node.children[0])?;
        let result = match &codes {
            Values::Int(IntVec::U8(codes)) => {
                decode_pieces(&table, log2_piece, ends, codes, node.len, out)
            }
            _ => Err(Error::corrupt("fsst codes are not u8")),
        };
        scratch.give(codes);
        result
    }
}

/// A checked `fsst` node: its shape, table, piece ends (as many as its pieces) and codes
/// child.
pub struct View<'a> {
    /// The symbol table.
    pub table: SymbolTable,
    /// The log2 of the pieces' size in bytes.
    pub log2_piece: u8,
    /// The pieces' ends, `u32` each, as stored.
    pub ends: &'a [u8],
}

impl<'a> View<'a> {
    /// Checks an `fsst` node.
    pub fn parse(node: &NodeView<'a>) -> Result<View<'a>> {
        node.expect_shape("fsst", 2, 1)?;
        let (table, log2_piece) = read_table(node)?;
        let npieces = node.len.div_ceil(1 << log2_piece);
        let ends = node.buffer(1, "piece ends")?;
        if ends.len() != 4 * npieces {
            return Err(Error::corrupt(format!(
                "fsst has {} bytes of piece ends, {} bytes in pieces of 2^{log2_piece} need \
                 {npieces} ends",
                ends.len(),
                node.len
            )));
        }
        expect_child(node, 0, "codes", PType::U8, None)?;
        Ok(View {
            table,
            log2_piece,
            ends,
        })
    }
}

/// Reads and checks the symbol table and piece size of an `fsst` node.
pub fn read_table(node: &NodeView<'_>) -> Result<(SymbolTable, u8)> {
    let mut meta = node.meta_reader();
    let nsym = usize::from(meta.u8("fsst symbol count")?);
    let log2_piece = meta.u8("fsst piece size")?;
    if nsym > 255 || !(1..=MAX_LOG2_PIECE).contains(&log2_piece) {
        return Err(Error::corrupt(format!(
            "fsst claims {nsym} symbols in pieces of 2^{log2_piece} bytes"
        )));
    }
    let mut lens = Vec::with_capacity(nsym);
    for _ in 0..nsym {
        let l = meta.u8("fsst symbol lengths")?;
        if !(1..=8).contains(&l) {
            return Err(Error::corrupt(format!("fsst symbol of {l} bytes")));
        }
        lens.push(l);
    }
    meta.finish("fsst")?;
    let buf = node.buffer(0, "fsst symbols")?;
    if buf.len() != 8 * nsym {
        return Err(Error::corrupt(format!(
            "fsst symbol buffer has {} bytes for {nsym} symbols",
            buf.len()
        )));
    }
    let symbols = buf
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
        .collect();
    Ok((SymbolTable { symbols, lens }, log2_piece))
}

/// Decodes every piece into `out` (`len` bytes).
fn decode_pieces(
    table: &SymbolTable,
    log2_piece: u8,
    ends: &[u32],
    codes: &[u8],
    len: usize,
    out: &mut Vec<u8>,
) -> Result<()> {
    // 256 entries so every code indexes the table; codes without a symbol get length 0, which
    // the loop reports.
    let mut symbols = [0u64; 256];
    let mut lens = [0u8; 256];
    symbols[..table.symbols.len()].copy_from_slice(&table.symbols);
    lens[..table.lens.len()].copy_from_slice(&table.lens);
    // 8 bytes of slack for the last symbol's full-width store.
    resize_for_overwrite(out, len + 8, 0);
    let piece = 1usize << log2_piece;
    let mut start = 0usize;
    for (i, &end) in ends.iter().enumerate() {
        let end = end as usize;
        if end < start || end > codes.len() {
            return Err(Error::corrupt(format!(
                "fsst piece {i} ends at code {end}, outside {start}..={}",
                codes.len()
            )));
        }
        let lo = i * piece;
        let hi = (lo + piece).min(len);
        let written = decode_piece(&symbols, &lens, &codes[start..end], &mut out[lo..hi + 8])?;
        if written != hi - lo {
            return Err(Error::corrupt(format!(
                "fsst piece {i} decodes to {written} bytes, expected {}",
                hi - lo
            )));
        }
        start = end;
    }
    if start != codes.len() {
        return Err(Error::corrupt(format!(
            "fsst code stream has {} codes after its last piece",
            codes.len() - start
        )));
    }
    out.truncate(len);
    Ok(())
}

/// Decodes one piece into `out`, whose last 8 bytes are slack. Returns the bytes written.
#[inline]
fn decode_piece(
    symbols: &[u64; 256],
    lens: &[u8; 256],
    codes: &[u8],
    out: &mut [u8],
) -> Result<usize> {
    let limit = out.len() - 8;
    let n = codes.len();
    let mut pos = 0usize;
    let mut i = 0usize;
    // Codes without a symbol (length 0) are noted in the fast loop and reported after it.
    let mut missing = false;
    loop {
        // Eight codes at a time while none is an escape and even eight 8-byte symbols stay
        // inside the piece.
        while i + 8 <= n && pos + 64 <= limit {
            let word = u64::from_le_bytes(codes[i..i + 8].try_into().unwrap_or([ESCAPE; 8]));
            // Some byte of `word` is 0xff exactly when some byte of `!word` is zero.
            let inv = !word;
            if inv.wrapping_sub(0x0101_0101_0101_0101) & !inv & 0x8080_8080_8080_8080 != 0 {
                break;
            }
            let dst = out.as_mut_ptr();
            for k in 0..8 {
                let c = usize::from((word >> (8 * k)) as u8);
                let l = usize::from(lens[c]);
                missing |= l == 0;
                // SAFETY: `pos + 64 <= limit` held before these eight codes and each adds at
                // most 8 to `pos`, so this 8-byte store ends at most at `limit + 8 = out.len()`.
                unsafe {
                    dst.add(pos)
                        .cast::<u64>()
                        .write_unaligned(symbols[c].to_le())
                };
                pos += l;
            }
            i += 8;
        }
        if i >= n {
            break;
        }
        // One code with every check: escapes, and the piece's end.
        let c = codes[i];
        if c == ESCAPE {
            if i + 1 >= n {
                return Err(bad_code(c, 0));
            }
            if pos >= limit {
                return Err(too_long());
            }
            out[pos] = codes[i + 1];
            pos += 1;
            i += 2;
        } else {
            let l = usize::from(lens[usize::from(c)]);
            if l == 0 || pos + l > limit {
                return Err(bad_code(c, l));
            }
            out[pos..pos + 8].copy_from_slice(&symbols[usize::from(c)].to_le_bytes());
            pos += l;
            i += 1;
        }
    }
    if missing {
        return Err(Error::corrupt("fsst piece holds a code without a symbol"));
    }
    Ok(pos)
}

#[cold]
fn too_long() -> Error {
    Error::corrupt("fsst piece decodes past its end")
}

#[cold]
fn bad_code(c: u8, l: usize) -> Error {
    if c == ESCAPE {
        Error::corrupt("fsst piece ends in an escape without its byte")
    } else if l == 0 {
        Error::corrupt(format!("fsst code {c} has no symbol"))
    } else {
        too_long()
    }
}

/// What `fsst` is: its id, name, child slots, GPU decoding and part in the search.
pub const DESCRIPTOR: crate::Descriptor = crate::Descriptor {
    id: 12,
    name: "fsst",
    slots: &[Slot {
        name: "codes",
        default: "plain",
    }],
    leaf_for_numbers: false,
    gpu: crate::GpuDecode::not_parallel(Pattern::GroupParallel),
    search: crate::Search::SKIP,
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{plan, random, round_trip};

    fn bytes(v: &[u8]) -> Values {
        Values::Int(IntVec::U8(v.to_vec()))
    }

    fn text(n: usize, seed: u64) -> Vec<u8> {
        let words = [
            "the ",
            "quick ",
            "brown ",
            "fox ",
            "jumps ",
            "over ",
            "lazy ",
            "dog",
            ". ",
            "\n",
            "furiously ",
            "regular ",
            "deposits ",
            "sleep",
        ];
        let mut r = random(seed);
        let mut s = Vec::new();
        while s.len() < n {
            s.extend_from_slice(words[(r() % words.len() as u64) as usize].as_bytes());
        }
        s.truncate(n);
        s
    }

    #[test]
    fn round_trips_text_of_every_edge_length() -> Result<()> {
        for n in [0, 1, 7, 8, 9, 200, 4095, 4096, 4097, 3 * 4096, 20_000] {
            let v = bytes(&text(n, n as u64));
            for p in ["fsst", "fsst(codes: plain)"] {
                // A few bytes can come out longer than they went in: refused, never wrong.
                if n < 100 && crate::encode(&plan(p), &v).is_err() {
                    continue;
                }
                let encoded = round_trip(&plan(p), &v)?;
                if n > 1000 {
                    assert!(encoded.len() < n / 2, "{n} bytes -> {}", encoded.len());
                }
            }
        }
        Ok(())
    }

    #[test]
    fn escapes_round_trip() -> Result<()> {
        // Mostly text, with every byte value (255 included) sprinkled in.
        let mut t = text(30_000, 3);
        for b in 0..=255u8 {
            t[usize::from(b) * 100] = b;
        }
        round_trip(&plan("fsst"), &bytes(&t))?;
        Ok(())
    }

    #[test]
    fn random_bytes_are_refused() {
        let mut r = random(9);
        let v: Vec<u8> = (0..10_000).map(|_| r() as u8).collect();
        let e = crate::encode(&plan("fsst"), &bytes(&v));
        assert!(matches!(e, Err(Error::Plan { .. })), "{e:?}");
    }

    #[test]
    fn damaged_codes_are_errors() -> Result<()> {
        let t = text(10_000, 5);
        let node = crate::encode(&plan("fsst"), &bytes(&t))?;
        let bytes = node.to_bytes()?;
        // Flip every byte of the code stream in turn (it is the last buffer written): no panic.
        for i in bytes.len().saturating_sub(3000)..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0xA5;
            let _ = crate::decode_bytes(&b);
        }
        Ok(())
    }
}
