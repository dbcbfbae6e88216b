//! Words: a byte stream cut into tokens (a word with its trailing punctuation and one space
//! or line break, a run of line breaks, a run of one other byte), frequent neighbours joined
//! into one token (`it was `) while the dictionary keeps its code width and stays small, each
//! token replaced by its rank in a dictionary sorted by frequency, so frequent tokens get small
//! codes that an entropy stage (`ans`) codes in few bits.
//!
//! Node for a u8 stream: no buffers, no meta; child 0 = the codes as u32 (default `ans`),
//! child 1 = the dictionary as byte strings, most frequent first (default `plain`). The node's
//! length is the number of bytes.
//!
//! Node for byte strings (a string column): tokens never cross from one string to the next, so
//! a column of short texts keeps a small dictionary. Meta = the strings' total bytes (u64 LE);
//! children `codes` and `dict` as above, and child 2 = `counts`, the number of tokens of each
//! string as u32 (default `ans`); buffer 0, optional, is a [`crate::rowindex`] of (token,
//! byte) pairs. The node's length is the number of strings.
//!
//! How the encoder cuts tokens is not part of the format: the decoder only concatenates
//! dictionary entries, so better tokenisers stay compatible. Decoding copies each token from
//! a 16-byte slot (its first 15 bytes and its length) when every entry is at most [`SLOT`]
//! bytes (always, for this encoder's tokens), checking every code and the running length.

use crate::node::{EncodedNode, NodeView};
use crate::{Encoding, Pattern, Scratch, Slot, encode_child, expect_child};
use rustc_hash::FxHashMap;
use zipflow_core::values::ByteStrings;
use zipflow_core::{Error, IntVec, PType, Plan, Result, Values};

/// `words`.
pub struct Words;

/// On-disk id of [`Words`].
pub const ID: u16 = DESCRIPTOR.id;

/// Tokens are at most this long, and dictionary entries up to this length decode with
/// fixed-size stores.
pub const SLOT: usize = 32;

/// Whether `b` continues a word: ASCII letters and digits, and every byte of a UTF-8
/// multi-byte character (so non-English words stay whole).
#[inline]
fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b >= 0x80
}

/// Whether `b` ends a word as punctuation that stays with it (`the end.` is one token).
#[inline]
fn is_trailing(b: u8) -> bool {
    matches!(b, b',' | b'.' | b';' | b':' | b'!' | b'?')
}

/// The length of the token at the start of `s` (non-empty): a word with its trailing
/// punctuation and one following space or line break, a run of line breaks (`\r\n` or
/// `\n`), or a run of one other byte.
#[inline]
fn token_len(s: &[u8]) -> usize {
    let max = s.len().min(SLOT);
    let first = s[0];
    let mut n = 1;
    if is_word(first) {
        while n < max && is_word(s[n]) {
            n += 1;
        }
        while n < max && is_trailing(s[n]) {
            n += 1;
        }
        if n < max && s[n] == b' ' {
            n += 1;
        } else if n + 1 < max && s[n] == b'\r' && s[n + 1] == b'\n' {
            n += 2;
        }
    } else if first == b'\r' && n < max && s[n] == b'\n' {
        n += 1;
        while n + 1 < max && s[n] == b'\r' && s[n + 1] == b'\n' {
            n += 2;
        }
    } else {
        while n < max && s[n] == first {
            n += 1;
        }
    }
    n
}

/// Dictionary bytes up to which joined tokens may grow a dictionary of fixed-width codes: a
/// `words` dictionary this small stays in a GPU block's shared memory (`zipflow-cuda`'s string
/// kernels).
pub const MERGED_DICT_BYTES: usize = 24 * 1024 - 4;

/// Bytes up to which neighbours join into one token when the codes have a fixed width: the GPU
/// expansion (`zipflow-cuda`) assembles a token of up to 16 bytes in one step, and a warp
/// repeats the step for all its lanes when one lane's token is longer.
pub const MERGED_TOKEN_BYTES: usize = 16;

/// Cuts byte slices into tokens, merges frequent neighbours, and builds the frequency-ranked
/// dictionary.
#[derive(Default)]
struct Tokenizer<'a> {
    /// Each slice pushed, with the end of its tokens in `ends`.
    pieces: Vec<(&'a [u8], usize)>,
    /// Each token's end in its slice.
    ends: Vec<usize>,
}

/// Distinct tokens (with their counts) in order of first appearance, and one code per token.
struct Interned<'a> {
    distinct: Vec<(&'a [u8], u64)>,
    codes: Vec<u32>,
}

impl<'a> Tokenizer<'a> {
    /// Cuts `data` into tokens.
    fn push(&mut self, data: &'a [u8]) {
        let mut pos = 0;
        while pos < data.len() {
            pos += token_len(&data[pos..]);
            self.ends.push(pos);
        }
        self.pieces.push((data, self.ends.len()));
    }

    /// Each slice, its first token and its tokens' ends.
    fn each_piece(&self) -> impl Iterator<Item = (&'a [u8], usize, &[usize])> + '_ {
        let mut first = 0;
        self.pieces.iter().map(move |&(data, end)| {
            let t0 = first;
            first = end;
            (data, t0, &self.ends[t0..end])
        })
    }

    fn intern(&self) -> Interned<'a> {
        let mut index: FxHashMap<&'a [u8], u32> = FxHashMap::default();
        let mut distinct: Vec<(&'a [u8], u64)> = Vec::new();
        let mut codes = Vec::with_capacity(self.ends.len());
        for (data, _, ends) in self.each_piece() {
            let mut start = 0;
            for &end in ends {
                let t = &data[start..end];
                let next = distinct.len() as u32;
                let code = *index.entry(t).or_insert(next);
                if code == next {
                    distinct.push((t, 0));
                }
                distinct[code as usize].1 += 1;
                codes.push(code);
                start = end;
            }
        }
        Interned { distinct, codes }
    }

    /// Joins frequent pairs of neighbouring tokens (within a slice) into one token: fewer,
    /// longer tokens are fewer codes to store and to expand. With fixed-width codes the
    /// dictionary keeps its code width and stays within [`MERGED_DICT_BYTES`], a joined token
    /// within [`MERGED_TOKEN_BYTES`], and a pair pays when the codes it saves outweigh its
    /// entry. With `entropy`-coded codes the dictionary may double, and a pair pays when its
    /// places cost fewer bits as one token (at its own frequency) than as two, by four times
    /// its entry. A joined token is new to the
    /// dictionary (a token's end depends only on its own bytes and the one after it, so the
    /// same bytes never cut as one token), and entries no token uses any more keep a count of
    /// zero.
    fn merge_pairs(&mut self, t: &mut Interned<'a>, entropy: bool) {
        let n = t.distinct.len();
        let bytes: usize = t.distinct.iter().map(|(s, _)| s.len()).sum();
        let (mut room, mut byte_room) = if entropy {
            (n, bytes)
        } else {
            (
                n.next_power_of_two() - n,
                MERGED_DICT_BYTES.saturating_sub(bytes),
            )
        };
        if room == 0 || byte_room == 0 {
            return;
        }
        let len = |c: u32| t.distinct[c as usize].0.len();
        let key = |a: u32, b: u32| u64::from(a) << 32 | u64::from(b);
        // A pair whose tokens have fewer than `least` places could not pay for its entry.
        let bits = u64::from(n.next_power_of_two().trailing_zeros().max(1));
        let least = (8 * 2 + 32) / bits;
        let often: Vec<bool> = t.distinct.iter().map(|d| d.1 >= least).collect();
        // Pairs are counted at every `step`-th place (about 64 Ki places), and their counts
        // scaled back: the frequent pairs that matter show up all the same.
        let step = (t.codes.len() / (64 << 10)).max(1);
        let mut pairs: FxHashMap<u64, u32> = FxHashMap::default();
        for (_, t0, ends) in self.each_piece() {
            for i in t0..t0 + ends.len().saturating_sub(1) {
                let (a, b) = (t.codes[i], t.codes[i + 1]);
                if i % step == 0
                    && often[a as usize]
                    && often[b as usize]
                    && len(a) + len(b) <= if entropy { SLOT } else { MERGED_TOKEN_BYTES }
                {
                    *pairs.entry(key(a, b)).or_default() += step as u32;
                }
            }
        }
        // The bits a pair saves, less its entry's (its bytes and about two bytes of length
        // and offset); each token costs `bits`, or with entropy coding log2(tokens / count).
        let total = t.codes.len() as f64;
        let cost = |count: f64| (total / count.max(1.0)).log2();
        // With entropy coding the estimate leaves out that a joined token pushes others down
        // the frequency ranking `ans` codes them by: only pairs that pay four times over are
        // joined (on the Silesia texts this beats both 1 and 8).
        let margin = if entropy { 4.0 } else { 1.0 };
        let gain = |a: u32, b: u32, count: u32| {
            let c = f64::from(count);
            let saved = if entropy {
                c * (cost(t.distinct[a as usize].1 as f64) + cost(t.distinct[b as usize].1 as f64)
                    - cost(c))
            } else {
                c * bits as f64
            };
            saved - margin * (8 * (len(a) + len(b)) + 32) as f64
        };
        let mut best: Vec<(f64, u32, u32)> = pairs
            .into_iter()
            .map(|(k, c)| {
                let (a, b) = ((k >> 32) as u32, k as u32);
                (gain(a, b, c), a, b)
            })
            .filter(|&(g, ..)| g > 0.0)
            .collect();
        best.sort_unstable_by(|x, y| y.0.total_cmp(&x.0).then((x.1, x.2).cmp(&(y.1, y.2))));
        let mut chosen: FxHashMap<u64, u32> = FxHashMap::default();
        // Whether a token begins a chosen pair: most places need no lookup.
        let mut first = vec![false; n];
        for (_, a, b) in best {
            let l = len(a) + len(b);
            if room == 0 {
                break;
            }
            if byte_room >= l {
                chosen.insert(key(a, b), (n + chosen.len()) as u32);
                first[a as usize] = true;
                room -= 1;
                byte_room -= l;
            }
        }
        if chosen.is_empty() {
            return;
        }
        // Left to right, a chosen pair becomes one token; its bytes are those of its first
        // place (a pair whose places all went to other pairs keeps a count of zero).
        t.distinct
            .extend(std::iter::repeat_n((&[][..], 0), chosen.len()));
        for d in &mut t.distinct {
            d.1 = 0;
        }
        let mut codes = Vec::with_capacity(t.codes.len());
        let mut ends = Vec::with_capacity(self.ends.len());
        let mut pieces = Vec::with_capacity(self.pieces.len());
        for (data, t0, old) in self.each_piece() {
            let (mut i, mut start) = (0, 0);
            while i < old.len() {
                let a = t.codes[t0 + i];
                let joined = (i + 1 < old.len() && first[a as usize])
                    .then(|| chosen.get(&key(a, t.codes[t0 + i + 1])).copied())
                    .flatten();
                let (code, step) = joined.map_or((a, 1), |c| (c, 2));
                let end = old[i + step - 1];
                let entry = &mut t.distinct[code as usize];
                if entry.1 == 0 {
                    entry.0 = &data[start..end];
                }
                entry.1 += 1;
                codes.push(code);
                ends.push(end);
                start = end;
                i += step;
            }
            pieces.push((data, ends.len()));
        }
        t.codes = codes;
        self.ends = ends;
        self.pieces = pieces;
    }

    /// The dictionary (most frequent first, ties in byte order), one code per token, and the
    /// number of tokens of each slice pushed.
    fn finish(mut self, entropy: bool) -> Result<(ByteStrings, Vec<u32>, Vec<u32>)> {
        let mut t = self.intern();
        self.merge_pairs(&mut t, entropy);
        let Interned {
            distinct,
            mut codes,
        } = t;
        // Entries that joined pairs left unused are dropped.
        let mut order: Vec<u32> = (0..distinct.len() as u32)
            .filter(|&c| distinct[c as usize].1 > 0)
            .collect();
        order.sort_unstable_by(|&a, &b| {
            let (ta, ca) = distinct[a as usize];
            let (tb, cb) = distinct[b as usize];
            cb.cmp(&ca).then(ta.cmp(tb))
        });
        let tokens: Vec<&[u8]> = distinct.iter().map(|&(t, _)| t).collect();
        let dict = crate::strdict::renumber(&tokens, &order, &mut codes);
        let counts = self
            .each_piece()
            .map(|(_, _, e)| u32::try_from(e.len()))
            .collect::<std::result::Result<Vec<u32>, _>>()
            .map_err(|_| Error::invalid("string of 2^32 tokens"))?;
        Ok((dict, codes, counts))
    }
}

/// Cuts `data` into tokens and returns the dictionary (most frequent first, ties in byte
/// order) and one code per token. `entropy`: the codes will be entropy coded (`ans`), not
/// stored at a fixed width, which changes which neighbours are worth joining.
pub fn tokenize(data: &[u8], entropy: bool) -> Result<(ByteStrings, Vec<u32>)> {
    let mut t = Tokenizer::default();
    t.push(data);
    let (dict, codes, _) = t.finish(entropy)?;
    Ok((dict, codes))
}

/// Cuts every string of `strings` into tokens apart: the dictionary, one code per token, and
/// the number of tokens of each string (`entropy` as for [`tokenize`]).
pub fn tokenize_strings(
    strings: &ByteStrings,
    entropy: bool,
) -> Result<(ByteStrings, Vec<u32>, Vec<u32>)> {
    let mut t = Tokenizer::default();
    for w in strings.offsets.windows(2) {
        t.push(&strings.data[w[0] as usize..w[1] as usize]);
    }
    t.finish(entropy)
}

impl Encoding for Words {
    fn descriptor(&self) -> &'static crate::Descriptor {
        &DESCRIPTOR
    }
    fn child_shape(&self, slot: &str, shape: crate::Shape) -> crate::Shape {
        match slot {
            // One code per token: for strings at least one per string, else about one per
            // word of text.
            "codes" if shape.strings => {
                let tokens = shape.values.max(shape.bytes / BYTES_PER_TOKEN);
                shape.with_values(tokens, tokens * 4.0).numbers()
            }
            // One dictionary entry per distinct value.
            "dict" => shape.per(shape.distinct),
            _ => shape.numbers(),
        }
    }
    fn decode_cost(&self, shape: crate::Shape, ns: &dyn Fn(&str) -> f64) -> f64 {
        if shape.strings {
            // `words` costs per byte it writes, for strings too, and places each string as a
            // dictionary gather does.
            ns(DESCRIPTOR.name) * shape.bytes + ns(crate::strdict::DESCRIPTOR.name) * shape.values
        } else {
            ns(DESCRIPTOR.name) * shape.values
        }
    }
    fn calibration(&self) -> Vec<crate::Calibration> {
        vec![crate::Calibration {
            stream: crate::selection::text_bytes(),
            plan: "words(codes: plain, dict: plain)",
            minus: &[],
        }]
    }
    fn accepts(&self, ptype: PType) -> bool {
        matches!(ptype, PType::U8 | PType::Bytes)
    }

    fn encode(&self, plan: &Plan, input: &Values) -> Result<EncodedNode> {
        // Codes left to `ans` (the default) cost bits by their frequency.
        let entropy = plan.get("codes").is_none_or(|p| p.name == "ans");
        let (mut node, dict, codes, counts) = match input {
            Values::Int(IntVec::U8(data)) => {
                if plan.get("counts").is_some() {
                    return Err(Error::plan(
                        plan,
                        "`counts` belongs to `words` over strings, not over a byte stream",
                    ));
                }
                let (dict, codes) = tokenize(data, entropy)?;
                let node = EncodedNode::new(ID, PType::U8, data.len())?;
                (node, dict, codes, None)
            }
            Values::Bytes(strings) => {
                let (dict, codes, counts) = tokenize_strings(strings, entropy)?;
                let mut node = EncodedNode::new(ID, PType::Bytes, strings.len())?;
                let total = strings.offsets.last().copied().unwrap_or(0)
                    - strings.offsets.first().copied().unwrap_or(0);
                node.meta = total.to_le_bytes().to_vec();
                node.buffers
                    .extend(crate::rowindex::build(&strings.offsets, Some(&counts)));
                (node, dict, codes, Some(counts))
            }
            _ => return Err(Error::plan(plan, "`words` encodes bytes and strings only")),
        };
        node.children.push(encode_child(
            plan,
            self,
            "codes",
            &Values::Int(IntVec::U32(codes)),
        )?);
        node.children
            .push(encode_child(plan, self, "dict", &Values::Bytes(dict))?);
        if let Some(counts) = counts {
            node.children.push(encode_child(
                plan,
                self,
                "counts",
                &Values::Int(IntVec::U32(counts)),
            )?);
        }
        Ok(node)
    }

    fn decode(&self, node: &NodeView<'_>, out: &mut Values, scratch: &mut Scratch) -> Result<()> {
        let strings = node.ptype == PType::Bytes;
        let total = usize::try_from(View::parse(node)?.total)
            .map_err(|_| Error::corrupt("words total bytes out of range"))?;
        let dict = scratch.decode(&node.children[1])?;
        let Values::Bytes(d) = &dict else {
            scratch.give(dict);
            return Err(Error::corrupt("words dictionary is not byte strings"));
        };
        let result = match out {
            Values::Int(IntVec::U8(out)) if !strings => {
                let exp = Expander::new(d, total, node.children[0].len, out);
                exp.and_then(|exp| {
                    for_each_code_run(&node.children[0], scratch, |codes| {
                        exp.push(codes, out, None)
                    })
                    .and_then(|()| exp.finish(out))
                })
            }
            Values::Bytes(out) if strings => {
                decode_strings(node, d, total, out, scratch, |_| Ok(()))
            }
            _ => Err(Error::corrupt("words output of the wrong type")),
        };
        scratch.give(dict);
        result
    }
}

/// A checked `words` node: its shape, metadata and children.
#[derive(Debug, Clone, Copy)]
pub struct View {
    /// The bytes the node decodes to.
    pub total: u64,
}

impl View {
    /// Checks a `words` node.
    pub fn parse(node: &NodeView<'_>) -> Result<View> {
        let strings = node.ptype == PType::Bytes;
        // Strings may carry a row index (checked by `RowIndex::of`).
        let nbuf = if strings {
            node.buffers.len().min(1)
        } else {
            0
        };
        node.expect_shape("words", nbuf, if strings { 3 } else { 2 })?;
        let mut meta = node.meta_reader();
        let total = if strings {
            meta.u64("words total bytes")?
        } else {
            node.len as u64
        };
        meta.finish("words")?;
        if strings {
            crate::rowindex::RowIndex::of(node, "words", true)?;
        }
        expect_child(node, 0, "codes", PType::U32, None)?;
        expect_child(node, 1, "dict", PType::Bytes, None)?;
        if strings {
            expect_child(node, 2, "counts", PType::U32, Some(node.len))?;
        }
        Ok(View { total })
    }
}

/// Places every string that ends within tokens `before..after`, whose ends are `ends`: the
/// `done` strings before them end after `cum` tokens. Returns the new `(done, cum)`.
fn place(
    counts: &[u32],
    (mut done, mut cum): (usize, u64),
    (before, after): (u64, u64),
    ends: &[u64],
    offsets: &mut Vec<u64>,
) -> (usize, u64) {
    let mut last = offsets.last().copied().unwrap_or(0);
    while let Some(&c) = counts.get(done) {
        let end = cum + u64::from(c);
        if end > after {
            break;
        }
        // A string with tokens ends in this run (every earlier end was placed before it).
        if c > 0 {
            last = ends[(end - 1 - before) as usize];
        }
        offsets.push(last);
        cum = end;
        done += 1;
    }
    (done, cum)
}

/// Hands the decoded codes of `codes` to `f` in runs: `ans` codes a few blocks at a time,
/// so they are consumed while in cache; any other plan all at once.
fn for_each_code_run(
    codes: &NodeView<'_>,
    scratch: &mut Scratch,
    mut f: impl FnMut(&[u32]) -> Result<()>,
) -> Result<()> {
    if codes.id == crate::ans::ID {
        return crate::ans::for_each_u32_run(codes, |run| f(run));
    }
    let decoded = scratch.decode(codes)?;
    let result = match &decoded {
        Values::Int(IntVec::U32(c)) => f(c),
        _ => Err(Error::corrupt("words codes are not u32")),
    };
    scratch.give(decoded);
    result
}

/// Decodes a string node: the tokens go to `out.data`, and each string ends where its last
/// token does (found from the token ends the expansion records).
fn decode_strings(
    node: &NodeView<'_>,
    dict: &ByteStrings,
    total: usize,
    out: &mut ByteStrings,
    scratch: &mut Scratch,
    mut on_run: impl FnMut(&ByteStrings) -> Result<()>,
) -> Result<()> {
    let counts = scratch.decode(&node.children[2])?;
    let Values::Int(IntVec::U32(counts_v)) = &counts else {
        scratch.give(counts);
        return Err(Error::corrupt("words counts are not u32"));
    };
    let ntokens: u64 = counts_v.iter().map(|&c| u64::from(c)).sum();
    if ntokens != node.children[0].len as u64 {
        let n = node.children[0].len;
        scratch.give(counts);
        return Err(Error::corrupt(format!(
            "words strings count {ntokens} tokens, the codes hold {n}"
        )));
    }
    let exp = match Expander::new(dict, total, node.children[0].len, &mut out.data) {
        Ok(exp) => exp,
        Err(e) => {
            scratch.give(counts);
            return Err(e);
        }
    };
    out.offsets.clear();
    out.offsets.reserve(counts_v.len() + 1);
    out.offsets.push(0);
    let mut ends: Vec<u64> = Vec::new();
    // `done` strings are placed, ending after `cum` tokens; `before` tokens precede the run.
    let (mut done, mut cum, mut before) = (0usize, 0u64, 0u64);
    let result = for_each_code_run(&node.children[0], scratch, |codes| {
        if ends.len() < codes.len() {
            ends.resize(codes.len(), 0);
        }
        let ends = &mut ends[..codes.len()];
        exp.push(codes, &mut out.data, Some(ends))?;
        let after = before + codes.len() as u64;
        (done, cum) = place(
            counts_v,
            (done, cum),
            (before, after),
            ends,
            &mut out.offsets,
        );
        before = after;
        on_run(out)
    })
    .and_then(|()| {
        // Strings of no tokens after the last one (the counts add up, so only those remain).
        place(
            counts_v,
            (done, cum),
            (before, before),
            &[],
            &mut out.offsets,
        );
        exp.finish(&out.data)?;
        if let Some(index) = crate::rowindex::RowIndex::of(node, "words", true)? {
            index.verify("words", &out.offsets, Some(counts_v))?;
        }
        on_run(out)
    });
    scratch.give(counts);
    result
}

/// Decodes a `words` node of strings into `out` (its bytes and offsets) and 16-byte views
/// over `out.data` (see [`crate::views`]), each view built right after its string's tokens
/// are expanded, while they are in cache. With `utf8`, the dictionary's entries are checked to
/// be valid UTF-8 each, so that every string (whole entries end to end) is too; no string is
/// checked itself. Strings past 4 GiB in all are an error: a view's offset has 32 bits.
pub fn decode_views(
    node: &NodeView<'_>,
    scratch: &mut Scratch,
    utf8: bool,
    out: &mut ByteStrings,
    views: &mut Vec<u128>,
) -> Result<()> {
    if node.id != ID || node.ptype != PType::Bytes {
        return Err(Error::corrupt(
            "string views asked of a node that is not words over strings",
        ));
    }
    let total = View::parse(node)?.total;
    if u32::try_from(total).is_err() {
        return Err(Error::unsupported(format!(
            "{total} bytes of strings in one chunk: views address 4 GiB"
        )));
    }
    let dict = scratch.decode(&node.children[1])?;
    let Values::Bytes(d) = &dict else {
        scratch.give(dict);
        return Err(Error::corrupt("words dictionary is not byte strings"));
    };
    if utf8 && !entries_are_utf8(d) {
        scratch.give(dict);
        return Err(Error::corrupt(
            "a words dictionary entry is not valid UTF-8",
        ));
    }
    views.clear();
    views.reserve(node.len);
    let mut covered = 0;
    let result = decode_strings(node, d, total as usize, out, scratch, |out| {
        let (k, _) = crate::views::push_views(&out.data, &out.offsets[covered..], views);
        covered += k;
        Ok(())
    })
    .and_then(|()| {
        // The last few strings start within 12 bytes of the end.
        let (k, _) = crate::views::push_views_checked(&out.data, &out.offsets[covered..], views);
        if covered + k == node.len {
            Ok(())
        } else {
            Err(Error::corrupt("words strings of inconsistent offsets"))
        }
    });
    scratch.give(dict);
    result
}

/// Whether every entry of `d` is valid UTF-8 on its own: the bytes as a whole are, and every
/// entry starts (so the one before ends) on a character boundary.
fn entries_are_utf8(d: &ByteStrings) -> bool {
    std::str::from_utf8(&d.data).is_ok()
        && d.offsets.iter().all(|&o| {
            d.data
                .get(o as usize)
                .is_none_or(|&b| !(0x80..0xc0).contains(&b))
        })
}

/// Concatenates `dict[c]` for every code into `out`, which must come to exactly `len` bytes.
pub fn expand(codes: &[u32], dict: &ByteStrings, len: usize, out: &mut Vec<u8>) -> Result<()> {
    let exp = Expander::new(dict, len, codes.len(), out)?;
    exp.push(codes, out, None)?;
    exp.finish(out)
}

/// Appends dictionary entries to a byte stream of known length, a run of codes at a time.
struct Expander<'a> {
    dict: &'a ByteStrings,
    len: usize,
    /// One 16-byte slot per entry: its first 15 bytes and its length. Empty when an entry is
    /// longer than [`SLOT`] (never for this encoder's tokens); those dictionaries take the
    /// checked copy.
    slots: Vec<[u8; 16]>,
    /// The dictionary bytes with `SLOT` zero bytes after them.
    padded: Vec<u8>,
    /// Whether every entry fits its slot (at most 15 bytes), so no copy needs a second part.
    short: bool,
}

impl<'a> Expander<'a> {
    /// Prepares `dict` and empties `out` for `len` bytes made of `ncodes` tokens.
    fn new(dict: &'a ByteStrings, len: usize, ncodes: usize, out: &mut Vec<u8>) -> Result<Self> {
        out.clear();
        let longest = dict
            .offsets
            .windows(2)
            .map(|w| w[1] - w[0])
            .max()
            .unwrap_or(0);
        // Checked before reserving, so a damaged length cannot ask for more memory than the
        // codes and the dictionary could ever fill.
        if len as u64 > (ncodes as u64).saturating_mul(longest) {
            return Err(Error::corrupt(format!(
                "words node claims {len} bytes from {ncodes} tokens of at most {longest} bytes"
            )));
        }
        if longest > SLOT as u64 {
            return Ok(Expander {
                dict,
                len,
                slots: Vec::new(),
                padded: Vec::new(),
                short: false,
            });
        }
        out.try_reserve(len + 2 * SLOT).map_err(|_| {
            Error::corrupt(format!("words node of {len} bytes does not fit memory"))
        })?;
        let mut padded = Vec::with_capacity(dict.data.len() + SLOT);
        padded.extend_from_slice(&dict.data);
        padded.resize(dict.data.len() + SLOT, 0);
        // A token of up to 15 bytes (nearly all of them) then costs one load and one store,
        // with no second load through an offset; longer ones copy the rest from `padded`.
        // Bytes after a token in its slot are stored too but overwritten by the next token.
        let slots = dict
            .offsets
            .windows(2)
            .map(|w| {
                let off = w[0] as usize;
                let mut s = [0u8; 16];
                s.copy_from_slice(&padded[off..off + 16]);
                s[15] = (w[1] - w[0]) as u8;
                s
            })
            .collect();
        Ok(Expander {
            dict,
            len,
            slots,
            padded,
            short: longest <= 15,
        })
    }

    /// Appends the entries of `codes`; with `ends` (as long as `codes`), also records where
    /// each token ends.
    fn push(&self, codes: &[u32], out: &mut Vec<u8>, ends: Option<&mut [u64]>) -> Result<()> {
        let n = self.dict.len();
        // One vectorised pass checks the run, so the copy loop needs no check per code.
        if codes.iter().copied().max().is_some_and(|m| m as usize >= n) {
            let c = codes
                .iter()
                .find(|&&c| c as usize >= n)
                .copied()
                .unwrap_or(0);
            return Err(bad_code(c as usize, n, self.len));
        }
        if self.slots.len() != n || out.capacity() < self.len + 2 * SLOT {
            return self.push_checked(codes, out, ends);
        }
        match (ends, self.short) {
            (Some(ends), true) => self.push_fast::<true, false>(codes, out, ends),
            (Some(ends), false) => self.push_fast::<true, true>(codes, out, ends),
            (None, true) => self.push_fast::<false, false>(codes, out, &mut []),
            (None, false) => self.push_fast::<false, true>(codes, out, &mut []),
        }
    }

    fn push_fast<const RECORD: bool, const LONG: bool>(
        &self,
        codes: &[u32],
        out: &mut Vec<u8>,
        ends: &mut [u64],
    ) -> Result<()> {
        if RECORD && ends.len() != codes.len() {
            return Err(Error::invalid("token ends buffer of the wrong length"));
        }
        let len = self.len;
        let (slots, offsets, src) = (&self.slots, &self.dict.offsets, self.padded.as_ptr());
        let dst = out.as_mut_ptr();
        // Copies one token at `pos` and returns its length.
        let copy = |c: u32, pos: usize| -> usize {
            // SAFETY: `c < n` (checked in `push`); a token longer than 15 bytes starts at
            // `off <= padded.len() - SLOT - 16`, so `off + 15 + SLOT <= padded.len()`; the
            // callers keep `pos <= len`, and the output allocation holds `len + 2 * SLOT`.
            unsafe {
                let s = slots.get_unchecked(c as usize);
                let l = s[15] as usize;
                std::ptr::copy_nonoverlapping(s.as_ptr(), dst.add(pos), 16);
                if LONG && l > 15 {
                    let off = *offsets.get_unchecked(c as usize) as usize;
                    std::ptr::copy_nonoverlapping(src.add(off + 15), dst.add(pos + 15), SLOT);
                }
                l
            }
        };
        // Blocks of codes whose tokens cannot pass `len` even at `SLOT` bytes each run with no
        // bound check, so the running position stays in a register; the rest checks each code.
        const BLOCK: usize = 64;
        let mut pos = out.len();
        let mut i = 0;
        while i < codes.len() {
            let block = &codes[i..codes.len().min(i + BLOCK)];
            if pos + block.len() * SLOT > len {
                break;
            }
            for (k, &c) in block.iter().enumerate() {
                pos += copy(c, pos);
                if RECORD {
                    // SAFETY: `i + k < codes.len() == ends.len()`.
                    unsafe { *ends.get_unchecked_mut(i + k) = pos as u64 };
                }
            }
            i += block.len();
        }
        for (k, &c) in codes.iter().enumerate().skip(i) {
            if pos > len {
                break;
            }
            pos += copy(c, pos);
            if RECORD {
                ends[k] = pos as u64;
            }
        }
        if pos > len {
            return Err(Error::corrupt(format!(
                "words tokens run past the {len} bytes expected"
            )));
        }
        // SAFETY: the tokens' bytes tile out.len()..pos (each stored at the running position),
        // so every byte below pos is initialised, and pos <= len < capacity.
        unsafe { out.set_len(pos) };
        Ok(())
    }

    /// [`Expander::push`] for dictionaries with entries longer than a slot.
    fn push_checked(
        &self,
        codes: &[u32],
        out: &mut Vec<u8>,
        mut ends: Option<&mut [u64]>,
    ) -> Result<()> {
        let n = self.dict.len();
        for (k, &c) in codes.iter().enumerate() {
            let c = c as usize;
            let Some(t) = self.dict.get(c) else {
                return Err(bad_code(c, n, self.len));
            };
            if out.len() + t.len() > self.len {
                return Err(bad_code(c, n, self.len));
            }
            out.extend_from_slice(t);
            if let Some(e) = ends.as_deref_mut().and_then(|e| e.get_mut(k)) {
                *e = out.len() as u64;
            }
        }
        Ok(())
    }

    /// Checks that the tokens came to exactly the expected length.
    fn finish(&self, out: &[u8]) -> Result<()> {
        if out.len() != self.len {
            return Err(Error::corrupt(format!(
                "words tokens add up to {} bytes, expected {}",
                out.len(),
                self.len
            )));
        }
        Ok(())
    }
}

#[cold]
fn bad_code(c: usize, n: usize, len: usize) -> Error {
    if c >= n {
        Error::corrupt(format!("word code {c} outside a dictionary of {n}"))
    } else {
        Error::corrupt(format!("words tokens run past the {len} bytes expected"))
    }
}

/// What `words` is: its id, name, child slots, GPU decoding and part in the search.
pub const DESCRIPTOR: crate::Descriptor = crate::Descriptor {
    id: 13,
    name: "words",
    slots: &[
        Slot {
            name: "codes",
            default: "ans",
        },
        Slot {
            name: "dict",
            default: "plain",
        },
        Slot {
            name: "counts",
            default: "ans",
        },
    ],
    leaf_for_numbers: false,
    gpu: crate::GpuDecode {
        children: crate::ChildPlace::Segments(&["codes", "counts"]),
        ..crate::GpuDecode::parallel(Pattern::GroupParallel)
    },
    search: crate::Search {
        role: crate::Role::Skip,
        string_root: true,
        uniform: false,
    },
};

/// Bytes per token in typical text, for the number of codes a string node holds.
const BYTES_PER_TOKEN: f64 = 5.0;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode;
    use crate::testing::{plan, random, round_trip};

    fn bytes(v: &[u8]) -> Values {
        Values::Int(IntVec::U8(v.to_vec()))
    }

    #[test]
    fn tokens() -> Result<()> {
        let (dict, codes) = tokenize(b"the cat, the hat...  \r\n\r\nend\r\n\n", true)?;
        let toks: Vec<&[u8]> = codes
            .iter()
            .map(|&c| dict.get(c as usize).unwrap_or(b"?"))
            .collect();
        assert_eq!(
            toks,
            vec![
                &b"the "[..],
                b"cat, ",
                b"the ",
                b"hat... ",
                b" ",
                b"\r\n\r\n",
                b"end\r\n",
                b"\n",
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
        cases.push(t.clone());
        // Many `ans` blocks of codes, expanded a run at a time.
        while t.len() < 400_000 {
            t.extend_from_slice(format!("w{} ", r() % 3000).as_bytes());
        }
        cases.push(t);
        for c in &cases {
            for p in [
                "words",
                "words(codes: ans(5))",
                "words(codes: bitpack)",
                "words(codes: for | bitpack, dict: strdict)",
            ] {
                round_trip(&plan(p), &bytes(c))?;
            }
        }
        Ok(())
    }

    fn strings<S: AsRef<[u8]>>(items: &[S]) -> Values {
        let mut b = ByteStrings {
            offsets: vec![0],
            data: Vec::new(),
        };
        for i in items {
            b.data.extend_from_slice(i.as_ref());
            b.offsets.push(b.data.len() as u64);
        }
        Values::Bytes(b)
    }

    #[test]
    fn frequent_neighbours_join_within_the_budgets() -> Result<()> {
        let mut r = random(5);
        let mut text = Vec::new();
        while text.len() < 200_000 {
            let w = ["it was ", "the best ", "of times, ", "the worst "][(r() % 4) as usize];
            text.extend_from_slice(w.as_bytes());
            text.extend_from_slice(format!("w{} ", r() % 300).as_bytes());
        }
        let (dict, codes) = tokenize(&text, false)?;
        let base = text.split(|&b| b == b' ').count() - 1;
        assert!(
            codes.len() < base * 3 / 4,
            "{} codes for {base} words",
            codes.len()
        );
        // The code width stays (300 + 4 words: 9 bits) and so does the byte budget.
        assert!(dict.len() <= 512, "{} entries", dict.len());
        assert!(dict.data.len() <= MERGED_DICT_BYTES);
        assert!((0..dict.len()).any(|i| dict.get(i) == Some(&b"it was "[..])));
        // And so does the token budget with codes of a fixed width, where entropy-coded codes
        // join a frequent pair of long words.
        let mut long = Vec::new();
        while long.len() < 200_000 {
            long.extend_from_slice(b"alphabetical wonderfully ");
            long.extend_from_slice(format!("w{} ", r() % 300).as_bytes());
        }
        let longest =
            |d: &ByteStrings| (0..d.len()).filter_map(|i| d.get(i)).map(<[u8]>::len).max();
        let (fixed, _) = tokenize(&long, false)?;
        assert!(
            longest(&fixed) <= Some(MERGED_TOKEN_BYTES),
            "{:?}",
            longest(&fixed)
        );
        let (coded, _) = tokenize(&long, true)?;
        assert!(
            longest(&coded) > Some(MERGED_TOKEN_BYTES),
            "{:?}",
            longest(&coded)
        );
        let mut out = Vec::new();
        expand(&codes, &dict, text.len(), &mut out)?;
        assert_eq!(out, text);
        // With entropy-coded codes the same pair pays, and the dictionary at most doubles.
        let (dict, codes) = tokenize(&text, true)?;
        assert!(
            codes.len() < base * 3 / 4,
            "{} codes for {base} words",
            codes.len()
        );
        assert!(dict.len() <= 2 * 307, "{} entries", dict.len());
        assert!((0..dict.len()).any(|i| dict.get(i) == Some(&b"it was "[..])));
        expand(&codes, &dict, text.len(), &mut out)?;
        assert_eq!(out, text);

        // Neighbours in different strings never join, however frequent.
        let pairs: Vec<&str> = (0..4000).map(|i| ["ab ", "cd "][i % 2]).collect();
        let Values::Bytes(b) = strings(&pairs) else {
            unreachable!()
        };
        let (dict, codes, counts) = tokenize_strings(&b, true)?;
        assert_eq!((dict.len(), codes.len()), (2, 4000));
        assert!(counts.iter().all(|&c| c == 1));
        Ok(())
    }

    #[test]
    fn string_columns_round_trip() -> Result<()> {
        let mut r = random(5);
        let words = [
            "carefully ",
            "final ",
            "deposits",
            " detect",
            ". ",
            "slyly",
            "?",
        ];
        let mut many: Vec<Vec<u8>> = Vec::new();
        for i in 0..70_000 {
            let k = (r() % 9) as usize;
            let s: Vec<u8> = (0..k)
                .flat_map(|_| words[(r() % 7) as usize].bytes())
                .collect();
            many.push(if i % 1000 == 0 { vec![] } else { s });
        }
        let cases: Vec<Values> = vec![
            strings::<&[u8]>(&[]),
            strings(&[b""]),
            strings(&[b"", b"", b""]),
            strings(&["a", "", "bb cc", "x"]),
            strings(&["żółć gęślą", "ünïcödé wörds, and\r\nlines\n"]),
            strings(&[vec![b'q'; 100], vec![0u8, 255, 7], vec![b' '; 40]]),
            strings(&many),
        ];
        for c in &cases {
            for p in [
                "words",
                "words(codes: ans(5), counts: bitpack)",
                "words(codes: bitpack, dict: strdict, counts: for | bitpack)",
            ] {
                round_trip(&plan(p), c)?;
                views_agree(&plan(p), c)?;
            }
        }
        round_trip(&plan("words(dict: plain(bytes: fsst))"), &strings(&many))?;
        // Tokens stay inside their string: "ab" + "cd" is two tokens, not one.
        let (dict, codes, counts) = tokenize_strings(
            &match strings(&["ab", "cd"]) {
                Values::Bytes(b) => b,
                _ => unreachable!(),
            },
            true,
        )?;
        assert_eq!((dict.len(), codes.len(), counts), (2, 2, vec![1, 1]));
        Ok(())
    }

    /// `decode_views` gives the decoder's strings and their views in the reference layout.
    fn views_agree(p: &Plan, v: &Values) -> Result<()> {
        let Values::Bytes(want) = v else {
            unreachable!()
        };
        let bytes = encode(p, v)?.to_bytes()?;
        let node = NodeView::parse(&bytes)?;
        let (mut got, mut views) = (ByteStrings::default(), Vec::new());
        let utf8 = std::str::from_utf8(&want.data).is_ok();
        decode_views(&node, &mut Scratch::default(), utf8, &mut got, &mut views)?;
        assert_eq!(got.data, want.data);
        assert_eq!(views.len(), want.len());
        let mut reference = Vec::new();
        crate::views::push_views_checked(&got.data, &got.offsets, &mut reference);
        assert_eq!(views, reference);
        Ok(())
    }

    #[test]
    fn views_need_utf8_entries_only_when_asked() -> Result<()> {
        let v = strings(&[vec![b'a', 0xff, b' '], b"b ".to_vec()]);
        let encoded = encode(&plan("words"), &v)?.to_bytes()?;
        let node = NodeView::parse(&encoded)?;
        let (mut out, mut views) = (ByteStrings::default(), Vec::new());
        let mut scratch = Scratch::default();
        assert!(decode_views(&node, &mut scratch, true, &mut out, &mut views).is_err());
        decode_views(&node, &mut scratch, false, &mut out, &mut views)?;
        assert_eq!(views.len(), 2);
        // A byte stream is not strings: no views.
        let b = encode(&plan("words"), &bytes(b"a b"))?.to_bytes()?;
        let e = decode_views(
            &NodeView::parse(&b)?,
            &mut scratch,
            false,
            &mut out,
            &mut views,
        );
        assert!(e.is_err());
        Ok(())
    }

    #[test]
    fn counts_only_for_strings() {
        let e = encode(&plan("words(counts: bitpack)"), &bytes(b"abc"));
        assert!(e.is_err());
    }

    #[test]
    fn string_counts_that_disagree_are_errors() -> Result<()> {
        let good = encode(
            &plan("words(codes: bitpack, counts: bitpack)"),
            &strings(&["a b", "c"]),
        )?;
        // Swap in counts that claim one token too many.
        let mut node = good.clone();
        node.children[2] = encode(&plan("bitpack"), &Values::Int(IntVec::U32(vec![2, 2])))?;
        assert!(crate::decode_bytes(&node.to_bytes()?).is_err());
        // A total that the tokens cannot fill.
        let mut node = good;
        node.meta = 1000u64.to_le_bytes().to_vec();
        assert!(crate::decode_bytes(&node.to_bytes()?).is_err());
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
        let (dict, codes) = tokenize(b"one two three", true)?;
        let mut out = Vec::new();
        expand(&codes, &dict, 13, &mut out)?;
        assert_eq!(out, b"one two three");
        assert!(expand(&codes, &dict, 12, &mut out).is_err());
        assert!(expand(&codes, &dict, 14, &mut out).is_err());
        assert!(expand(&[3], &dict, 4, &mut out).is_err());
        Ok(())
    }
}
