//! Row index of a string node: where every few thousand strings start.
//!
//! A `words` or `strdict` node over byte strings may carry one buffer, its row index: for
//! every row `k * step` after the first (`0 < k * step < len`), the first token of that row
//! (`words` only) and its first byte, each a `u32` LE; a `words` index interleaves them
//! (token, byte) every [`WORDS_ROWS`] rows, a `strdict` index holds the bytes alone (the token
//! is the row) every [`STRDICT_ROWS`] rows. A decoder that starts anywhere but the first row
//! needs these sums, which otherwise take a pass over every code before it: the GPU's
//! expansion blocks start at the index's rows (one block a step).
//!
//! The index is redundant, so every decoder that places the strings checks it against the
//! positions it computes, and a wrong index is a corrupt node, on any device. The encoder
//! writes it when the node has more strings than one step and its bytes and tokens count
//! below 2^32.

use zipflow_core::{Error, Result};

/// Rows between two entries of a `words` node's row index.
pub const WORDS_ROWS: usize = 2048;
/// Rows between two entries of a `strdict` node's row index.
pub const STRDICT_ROWS: usize = 8192;

/// Rows between two entries of an index with tokens (`words`) or without (`strdict`).
pub fn step(tokens: bool) -> usize {
    if tokens { WORDS_ROWS } else { STRDICT_ROWS }
}

/// The row index of strings whose offsets are `offsets` (`len + 1` of them), and for `words`
/// each string's token count; `None` when it would be empty or its sums do not fit 32 bits.
pub fn build(offsets: &[u64], counts: Option<&[u32]>) -> Option<Vec<u8>> {
    let rows = offsets.len().checked_sub(1)?;
    let step = step(counts.is_some());
    let start = offsets[0];
    if rows <= step || u32::try_from(offsets[rows] - start).is_err() {
        return None;
    }
    let mut out = Vec::with_capacity(rows / step * 8);
    let mut tokens = 0u64;
    for k in 1..rows.div_ceil(step) {
        if let Some(c) = counts {
            tokens += c[(k - 1) * step..k * step]
                .iter()
                .map(|&t| u64::from(t))
                .sum::<u64>();
            out.extend_from_slice(&u32::try_from(tokens).ok()?.to_le_bytes());
        }
        out.extend_from_slice(&((offsets[k * step] - start) as u32).to_le_bytes());
    }
    Some(out)
}

/// The entries a row index of `rows` strings holds, one every `step` rows.
pub fn entries(rows: usize, step: usize) -> usize {
    rows.div_ceil(step).saturating_sub(1)
}

/// A node's row index, checked for its size: entry `k` is row `(k + 1) * step`.
#[derive(Debug, Clone, Copy)]
pub struct RowIndex<'a> {
    bytes: &'a [u8],
    tokens: bool,
}

impl<'a> RowIndex<'a> {
    /// The index in `node`'s buffers (`None` when it has none), checked to hold one entry for
    /// every step of its `len` strings after the first; `tokens` for `words` (two words an
    /// entry, a step of [`WORDS_ROWS`]), else a step of [`STRDICT_ROWS`].
    pub fn of(
        node: &crate::node::NodeView<'a>,
        name: &str,
        tokens: bool,
    ) -> Result<Option<RowIndex<'a>>> {
        let Some(&bytes) = node.buffers.first() else {
            return Ok(None);
        };
        let want = entries(node.len, step(tokens)) * if tokens { 8 } else { 4 };
        if bytes.len() != want {
            return Err(Error::corrupt(format!(
                "{name} row index has {} bytes, {} strings need {want}",
                bytes.len(),
                node.len
            )));
        }
        Ok(Some(RowIndex { bytes, tokens }))
    }

    /// Rows between two entries.
    pub fn step(&self) -> usize {
        step(self.tokens)
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.bytes.len() / if self.tokens { 8 } else { 4 }
    }

    /// Whether the index has no entries.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    fn word(&self, i: usize) -> u64 {
        let w = &self.bytes[4 * i..4 * i + 4];
        u64::from(u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
    }

    /// Entry `k`'s first token (for a `strdict` index, its row).
    pub fn token(&self, k: usize) -> u64 {
        if self.tokens {
            self.word(2 * k)
        } else {
            ((k + 1) * self.step()) as u64
        }
    }

    /// Entry `k`'s first byte.
    pub fn byte(&self, k: usize) -> u64 {
        self.word(if self.tokens { 2 * k + 1 } else { k })
    }

    /// Checks every entry against the strings' `offsets` (relative to the first) and, for
    /// `words`, each string's token `counts`.
    pub fn verify(&self, name: &str, offsets: &[u64], counts: Option<&[u32]>) -> Result<()> {
        let start = offsets.first().copied().unwrap_or(0);
        let step = self.step();
        let mut tokens = 0u64;
        for k in 0..self.len() {
            let row = (k + 1) * step;
            if let Some(c) = counts.filter(|_| self.tokens) {
                tokens += c[k * step..row].iter().map(|&t| u64::from(t)).sum::<u64>();
                if tokens != self.token(k) {
                    return Err(self.mismatch(name, row, "token", self.token(k), tokens));
                }
            }
            let at = offsets[row] - start;
            if at != self.byte(k) {
                return Err(self.mismatch(name, row, "byte", self.byte(k), at));
            }
        }
        Ok(())
    }

    /// Checks every entry's byte against the strings' lengths, in row order.
    pub fn verify_lengths(&self, name: &str, lengths: impl Iterator<Item = u64>) -> Result<()> {
        let (mut at, mut k, step) = (0u64, 0usize, self.step());
        for (row, l) in lengths.enumerate() {
            if row == (k + 1) * step && k < self.len() {
                if at != self.byte(k) {
                    return Err(self.mismatch(name, row, "byte", self.byte(k), at));
                }
                k += 1;
            }
            at += l;
        }
        Ok(())
    }

    fn mismatch(&self, name: &str, row: usize, what: &str, says: u64, is: u64) -> Error {
        Error::corrupt(format!(
            "{name} row index puts row {row} at {what} {says}, its strings at {is}"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{plan, random, round_trip};
    use crate::{decode_bytes, encode};
    use zipflow_core::Values;
    use zipflow_core::values::ByteStrings;

    /// Strings of 0 to 3 words each, some empty.
    fn texts(n: usize) -> Values {
        let mut r = random(5);
        let words = ["the ", "quick ", "fox ", "a ", "jumps over ", "lazy dogs. "];
        let mut b = ByteStrings::default();
        b.offsets.push(0);
        for _ in 0..n {
            for _ in 0..r() % 4 {
                b.data
                    .extend_from_slice(words[(r() % 6) as usize].as_bytes());
            }
            b.offsets.push(b.data.len() as u64);
        }
        Values::Bytes(b)
    }

    /// The error decoding `node` gives.
    fn error_of(node: &crate::node::EncodedNode) -> Result<String> {
        match decode_bytes(&node.to_bytes()?) {
            Ok(_) => Err(Error::invalid("a damaged row index decodes")),
            Err(e) => Ok(e.to_string()),
        }
    }

    #[test]
    fn string_nodes_carry_a_checked_index() -> Result<()> {
        for (p, per) in [("words(codes: bitpack)", 8), ("strdict", 4)] {
            let step = step(p.starts_with("words"));
            for n in [step - 1, step, step + 1, 5 * step + 17] {
                let v = texts(n);
                let bytes = round_trip(&plan(p), &v)?;
                let mut node = encode(&plan(p), &v)?;
                assert_eq!(
                    node.buffers.first().map_or(0, Vec::len),
                    entries(n, step) * per,
                    "{p} {n}"
                );
                if n <= step {
                    continue;
                }
                // Without its index a node decodes the same (as written before there was one).
                let index = node.buffers.pop().unwrap_or_default();
                assert_eq!(decode_bytes(&node.to_bytes()?)?, v);
                assert!(node.to_bytes()?.len() < bytes.len());
                // Any entry off by one is an error naming the index.
                for at in (0..index.len()).step_by(4) {
                    let mut bad = index.clone();
                    bad[at] ^= 1;
                    node.buffers = vec![bad];
                    let e = error_of(&node)?;
                    assert!(e.contains("row index puts row"), "{p} {n} {at}: {e}");
                }
                node.buffers = vec![index[4..].to_vec()];
                let e = error_of(&node)?;
                assert!(e.contains("row index has"), "{e}");
            }
        }
        Ok(())
    }

    #[test]
    fn entries_follow_the_rows() -> Result<()> {
        const W: usize = WORDS_ROWS;
        assert_eq!(entries(0, W), 0);
        assert_eq!(entries(W, W), 0);
        assert_eq!(entries(W + 1, W), 1);
        assert_eq!(entries(3 * W, W), 2);
        let offsets: Vec<u64> = (0..=(2 * STRDICT_ROWS as u64 + 5))
            .map(|r| 7 + 3 * r)
            .collect();
        let counts = vec![2u32; offsets.len() - 1];
        let b = build(&offsets, Some(&counts)).unwrap_or_default();
        assert_eq!(b.len(), 8 * 8);
        let r = RowIndex {
            bytes: &b,
            tokens: true,
        };
        assert_eq!((r.token(1), r.byte(1)), (4 * W as u64, 6 * W as u64));
        r.verify("words", &offsets, Some(&counts))?;
        let mut wrong = counts.clone();
        wrong[5] = 3;
        assert!(r.verify("words", &offsets, Some(&wrong)).is_err());
        let s = build(&offsets, None).unwrap_or_default();
        assert_eq!(s.len(), 8);
        let r = RowIndex {
            bytes: &s,
            tokens: false,
        };
        let sr = STRDICT_ROWS as u64;
        assert_eq!((r.token(1), r.byte(1)), (2 * sr, 6 * sr));
        r.verify_lengths("strdict", std::iter::repeat_n(3, offsets.len() - 1))?;
        let e = r.verify_lengths("strdict", std::iter::repeat_n(4, offsets.len() - 1));
        assert!(e.is_err_and(|e| e.to_string().contains("row 8192")));
        assert!(build(&offsets[..STRDICT_ROWS + 1], None).is_none());
        Ok(())
    }
}
