//! Words: a byte stream cut into tokens (words with their following space, runs of one
//! punctuation or space byte), each token replaced by its rank in a dictionary sorted by
//! frequency, so frequent tokens get small codes that an entropy stage (`ans`) codes in few
//! bits. On English text this leaves about 2.7 bits per character before the dictionary.
//!
//! Node: no meta, no buffers; child 0 = the codes as u32 (default `ans`), child 1 = the
//! dictionary as byte strings, most frequent first (default `plain`). The node's length is the
//! number of bytes. How the encoder cuts tokens is not part of the format: the decoder only
//! concatenates dictionary entries, so better tokenisers stay compatible.
//!
//! Decoding copies each token with two 16-byte stores from a padded copy of the dictionary
//! when every entry is at most [`SLOT`] bytes (always, for this encoder's tokens), checking
//! every code and the running length.

use crate::node::{EncodedNode, NodeView};
use crate::{Encoding, Pattern, Scratch, Slot, encode_child, expect_child};
use rustc_hash::FxHashMap;
use zipflow_core::values::ByteStrings;
use zipflow_core::{Error, IntVec, PType, Plan, Result, Values};

/// `words`.
pub struct Words;

/// On-disk id of [`Words`].
pub const ID: u16 = 13;

/// Tokens are at most this long, and dictionary entries up to this length decode with
/// fixed-size stores.
pub const SLOT: usize = 32;

/// Whether `b` continues a word: ASCII letters and digits, and every byte of a UTF-8
/// multi-byte character (so non-English words stay whole).
#[inline]
fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b >= 0x80
}

/// The length of the token at the start of `s` (non-empty).
#[inline]
fn token_len(s: &[u8]) -> usize {
    let max = s.len().min(SLOT);
    let first = s[0];
    let mut n = 1;
    if is_word(first) {
        while n < max && is_word(s[n]) {
            n += 1;
        }
        if n < max && s[n] == b' ' {
            n += 1;
        }
    } else {
        while n < max && s[n] == first {
            n += 1;
        }
    }
    n
}

/// Cuts `data` into tokens and returns the dictionary (most frequent first, ties in byte
/// order) and one code per token.
pub fn tokenize(data: &[u8]) -> Result<(ByteStrings, Vec<u32>)> {
    let mut index: FxHashMap<&[u8], u32> = FxHashMap::default();
    let mut distinct: Vec<(&[u8], u64)> = Vec::new();
    let mut codes = Vec::with_capacity(data.len() / 4);
    let mut pos = 0;
    while pos < data.len() {
        let n = token_len(&data[pos..]);
        let t = &data[pos..pos + n];
        let next = distinct.len() as u32;
        let code = *index.entry(t).or_insert(next);
        if code == next {
            distinct.push((t, 0));
        }
        distinct[code as usize].1 += 1;
        codes.push(code);
        pos += n;
    }
    let mut order: Vec<u32> = (0..distinct.len() as u32).collect();
    order.sort_unstable_by(|&a, &b| {
        let (ta, ca) = distinct[a as usize];
        let (tb, cb) = distinct[b as usize];
        cb.cmp(&ca).then(ta.cmp(tb))
    });
    let tokens: Vec<&[u8]> = distinct.iter().map(|&(t, _)| t).collect();
    let dict = crate::strdict::renumber(&tokens, &order, &mut codes);
    Ok((dict, codes))
}

impl Encoding for Words {
    fn id(&self) -> u16 {
        ID
    }
    fn name(&self) -> &'static str {
        "words"
    }
    fn pattern(&self) -> Pattern {
        Pattern::GroupParallel
    }
    fn slots(&self) -> &'static [Slot] {
        &[
            Slot {
                name: "codes",
                default: "ans",
            },
            Slot {
                name: "dict",
                default: "plain",
            },
        ]
    }
    fn accepts(&self, ptype: PType) -> bool {
        ptype == PType::U8
    }

    fn encode(&self, plan: &Plan, input: &Values) -> Result<EncodedNode> {
        let Values::Int(IntVec::U8(data)) = input else {
            return Err(Error::plan(plan, "`words` encodes u8 streams only"));
        };
        let (dict, codes) = tokenize(data)?;
        let mut node = EncodedNode::new(ID, PType::U8, data.len())?;
        node.children.push(encode_child(
            plan,
            self,
            "codes",
            &Values::Int(IntVec::U32(codes)),
        )?);
        node.children
            .push(encode_child(plan, self, "dict", &Values::Bytes(dict))?);
        Ok(node)
    }

    fn decode(&self, node: &NodeView<'_>, out: &mut Values, scratch: &mut Scratch) -> Result<()> {
        node.expect_shape("words", 0, 2)?;
        node.meta_reader().finish("words")?;
        expect_child(node, 0, "codes", PType::U32, None)?;
        expect_child(node, 1, "dict", PType::Bytes, None)?;
        let Values::Int(IntVec::U8(out)) = out else {
            return Err(Error::corrupt("words decodes u8 streams only"));
        };
        let codes = scratch.decode(&node.children[0])?;
        let dict = match scratch.decode(&node.children[1]) {
            Ok(d) => d,
            Err(e) => {
                scratch.give(codes);
                return Err(e);
            }
        };
        let result = match (&codes, &dict) {
            (Values::Int(IntVec::U32(codes)), Values::Bytes(dict)) => {
                expand(codes, dict, node.len, out)
            }
            _ => Err(Error::corrupt("words children have the wrong types")),
        };
        scratch.give(codes);
        scratch.give(dict);
        result
    }
}

/// Concatenates `dict[c]` for every code into `out`, which must come to exactly `len` bytes.
pub fn expand(codes: &[u32], dict: &ByteStrings, len: usize, out: &mut Vec<u8>) -> Result<()> {
    let n = dict.len();
    out.clear();
    // Fast path: every entry fits a `SLOT`-byte copy and the dictionary fits 26-bit offsets.
    // Each entry is then one u32, `offset << 6 | length`, read with one load; the bytes are
    // copied `SLOT` at a time from the dictionary itself, padded at its end. The table and
    // the frequency-sorted dictionary stay small and hot in cache.
    let fits = dict.data.len() < 1 << 26
        && dict
            .offsets
            .windows(2)
            .all(|w| (w[1] - w[0]) as usize <= SLOT);
    if !fits {
        return expand_slow(codes, dict, len, out);
    }
    // One entry more than the dictionary: a zero-length sentinel that out-of-range codes map
    // to, so the loop needs no branch for them (they are reported after it).
    let mut entries: Vec<u32> = dict
        .offsets
        .windows(2)
        .map(|w| ((w[0] as u32) << 6) | (w[1] - w[0]) as u32)
        .collect();
    entries.push(0);
    let mut padded = Vec::with_capacity(dict.data.len() + SLOT);
    padded.extend_from_slice(&dict.data);
    padded.resize(dict.data.len() + SLOT, 0);
    out.reserve(len + SLOT);
    let src = padded.as_ptr();
    let dst = out.as_mut_ptr();
    let mut pos = 0usize;
    let mut out_of_range = false;
    for &c in codes {
        let c = c as usize;
        out_of_range |= c >= n;
        let e = entries[c.min(n)];
        let (off, l) = ((e >> 6) as usize, (e & 63) as usize);
        if pos > len {
            break;
        }
        // SAFETY: `off + SLOT <= padded.len()` because `off` is an entry's start inside the
        // dictionary data (0 for the sentinel) and `padded` has `SLOT` bytes after it; `pos <=
        // len` (checked just above) and the output allocation holds `len + SLOT` bytes.
        unsafe {
            // Most tokens fit 16 bytes: one load and one store; longer ones take a second.
            std::ptr::copy_nonoverlapping(src.add(off), dst.add(pos), 16);
            if l > 16 {
                std::ptr::copy_nonoverlapping(src.add(off + 16), dst.add(pos + 16), 16);
            }
        }
        pos += l;
    }
    if out_of_range {
        let c = codes
            .iter()
            .find(|&&c| c as usize >= n)
            .copied()
            .unwrap_or(0);
        return Err(bad_code(c as usize, n, len));
    }
    if pos != len {
        return Err(Error::corrupt(format!(
            "words tokens add up to {pos} bytes, expected {len}"
        )));
    }
    // SAFETY: the tokens' bytes tile 0..len (each stored at the running position, which ends
    // exactly at len), so every byte below len is initialised.
    unsafe { out.set_len(len) };
    Ok(())
}

fn expand_slow(codes: &[u32], dict: &ByteStrings, len: usize, out: &mut Vec<u8>) -> Result<()> {
    let n = dict.len();
    for &c in codes {
        let c = c as usize;
        let Some(t) = dict.get(c) else {
            return Err(bad_code(c, n, len));
        };
        if out.len() + t.len() > len {
            return Err(bad_code(c, n, len));
        }
        out.extend_from_slice(t);
    }
    if out.len() != len {
        return Err(Error::corrupt(format!(
            "words tokens add up to {} bytes, expected {len}",
            out.len()
        )));
    }
    Ok(())
}

#[cold]
fn bad_code(c: usize, n: usize, len: usize) -> Error {
    if c >= n {
        Error::corrupt(format!("word code {c} outside a dictionary of {n}"))
    } else {
        Error::corrupt(format!("words tokens run past the {len} bytes expected"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{plan, random, round_trip};

    fn bytes(v: &[u8]) -> Values {
        Values::Int(IntVec::U8(v.to_vec()))
    }

    #[test]
    fn tokens() -> Result<()> {
        let (dict, codes) = tokenize(b"the cat, the hat...  ")?;
        let toks: Vec<&[u8]> = codes
            .iter()
            .map(|&c| dict.get(c as usize).unwrap_or(b"?"))
            .collect();
        assert_eq!(
            toks,
            vec![
                &b"the "[..],
                b"cat",
                b",",
                b" ",
                b"the ",
                b"hat",
                b"...",
                b"  "
            ]
        );
        // "the " is the most frequent token, so it has code 0.
        assert_eq!(codes[0], 0);
        Ok(())
    }

    #[test]
    fn round_trips() -> Result<()> {
        let mut r = random(11);
        let long_word = vec![b'a'; 100];
        let mut cases: Vec<Vec<u8>> = vec![
            vec![],
            b"a".to_vec(),
            b" ".to_vec(),
            long_word,
            "żółć gęślą jaźń, ünïcödé wörds".as_bytes().to_vec(),
            (0..=255u8).collect(),
        ];
        cases.push((0..5000).map(|_| r() as u8).collect());
        let mut t = Vec::new();
        while t.len() < 20_000 {
            t.extend_from_slice(
                ["it was ", "the best ", "of times", ", ", "\n\n"][(r() % 5) as usize].as_bytes(),
            );
        }
        cases.push(t);
        for c in &cases {
            for p in [
                "words(codes: bitpack)",
                "words(codes: for | bitpack, dict: strdict)",
            ] {
                round_trip(&plan(p), &bytes(c))?;
            }
        }
        Ok(())
    }

    #[test]
    fn long_dictionary_entries_decode() -> Result<()> {
        // A dictionary this encoder never writes: one entry longer than a slot.
        let dict = ByteStrings {
            offsets: vec![0, 40, 41],
            data: [vec![b'x'; 40], vec![b'y']].concat(),
        };
        let mut out = Vec::new();
        expand(&[1, 0, 1], &dict, 42, &mut out)?;
        assert_eq!(out.len(), 42);
        assert!(expand(&[1, 0, 1], &dict, 41, &mut out).is_err());
        assert!(expand(&[2], &dict, 1, &mut out).is_err());
        Ok(())
    }

    #[test]
    fn bad_codes_and_lengths_are_errors() -> Result<()> {
        let (dict, codes) = tokenize(b"one two three")?;
        let mut out = Vec::new();
        expand(&codes, &dict, 13, &mut out)?;
        assert_eq!(out, b"one two three");
        assert!(expand(&codes, &dict, 12, &mut out).is_err());
        assert!(expand(&codes, &dict, 14, &mut out).is_err());
        assert!(expand(&[3], &dict, 4, &mut out).is_err());
        Ok(())
    }
}
