//! One column of one chunk, read 1024 values at a time.
//!
//! `bitpack` and `for | bitpack` chunks stay packed: a block is unpacked into a stack buffer
//! when it is asked for, a range predicate is compared in the packed domain (`v >= c` is
//! `packed >= c - reference`), and a sparse selection gathers single values without unpacking
//! the block. `dict` chunks decode the (small) dictionary once, evaluate predicates on it and
//! then map codes through a per-code table. `hipatch` over bit-packed low bits (under a `for`
//! or not) stays packed too: its few exceptions are decoded once per chunk and written over
//! the blocks and gathers they fall in. Any other encoding is decoded whole through
//! [`zipflow_encodings::decode`], so new encodings work without this module knowing them.
//!
//! The readers: `packed` (bit-packed blocks, also a dictionary's codes), `fused_range`
//! (range predicates compared while unpacking, portable/AVX2/AVX-512 kernels behind one
//! dispatch) and `kernels` (the per-block widen, mask and gather kernels they share).

mod fused_range;
mod kernels;
mod packed;

use zipflow_core::values::ByteStrings;
use zipflow_core::{Error, Int, IntVec, PType, Result, VECTOR_LEN, Values, match_ints};
use zipflow_encodings::{NodeView, Scratch, bitpack, dict, frame, hipatch, strdict};

use self::kernels::gather_u8;
use self::packed::{PackedCol, Unpacked, code_range, logical};

pub use self::fused_range::{PackedRange, bits_to_mask};

/// Values in one block.
pub const BLOCK: usize = VECTOR_LEN;

/// A decoded dictionary.
enum DictValues {
    Ints(Vec<i64>),
    Floats(Vec<f64>),
}

/// A predicate on one column's stored (scaled) integers.
#[derive(Clone, Copy)]
pub struct Predicate<'p> {
    /// `Some((lo, hi))` when the predicate is exactly `lo <= v <= hi`: that form is compared
    /// in the packed domain.
    pub range: Option<(i64, i64)>,
    /// The predicate on a value.
    pub pred: &'p dyn Fn(i64) -> bool,
    /// For a dictionary chunk, [`ChunkColumn::code_table`] of `pred`.
    pub table: Option<&'p [u8]>,
}

/// How one column of one chunk is read.
enum Source<'a> {
    Packed(PackedCol<'a>),
    /// `hipatch` over packed low bits: the exceptions of each block, whose high bits are
    /// ORed over the unpacked values as they are read.
    Patched {
        packed: PackedCol<'a>,
        exceptions: hipatch::Exceptions,
    },
    Dict {
        codes: PackedCol<'a>,
        values: DictValues,
    },
    Ints(Vec<i64>),
    Floats(Vec<f64>),
    Strings(ByteStrings),
    /// A string dictionary: codes (checked against the dictionary by their users) and the
    /// distinct strings.
    StrDict {
        codes: Vec<u32>,
        dict: ByteStrings,
    },
}

/// The strings of a chunk: decoded, or as dictionary codes.
pub enum StrView<'s> {
    /// Every value.
    Plain(&'s ByteStrings),
    /// Codes into a dictionary of distinct strings.
    Dict(&'s [u32], &'s ByteStrings),
}

/// Values of one block of a column: integral (scaled i64) or float.
#[derive(Debug)]
pub enum Block {
    /// Integers, decimals, dates, booleans.
    Ints(Vec<i64>),
    /// Floats.
    Floats(Vec<f64>),
}

/// One column of one chunk.
pub struct ChunkColumn<'a> {
    source: Source<'a>,
    len: usize,
}

/// Converts decoded integers to i64, rejecting u64 values past `i64::MAX`.
pub fn ints_to_i64(v: &IntVec) -> Result<Vec<i64>> {
    match v {
        IntVec::U64(x) => x
            .iter()
            .map(|&u| {
                i64::try_from(u)
                    .map_err(|_| Error::unsupported("u64 values above i64::MAX in a query"))
            })
            .collect(),
        _ => Ok(match_ints!(v, T, x => x.iter().map(|e| e.to_i128() as i64).collect())),
    }
}

impl<'a> ChunkColumn<'a> {
    /// Prepares a chunk's values tree (`node`, already checked to hold `len` values of the
    /// column's type) for block reads. `packed_ok` allows the packed and dictionary fast paths.
    pub fn new(node: &NodeView<'a>, scratch: &mut Scratch) -> Result<ChunkColumn<'a>> {
        let len = node.len;
        let ptype = node.ptype;
        let source = if ptype.is_int() && node.id == bitpack::ID {
            Source::Packed(PackedCol::new(node, 0, ptype)?)
        } else if ptype.is_int()
            && node.id == frame::ID
            && node.children.len() == 1
            && node.children[0].id == bitpack::ID
            && node.children[0].len == len
            && node.children[0].ptype == bitpack::unsigned_of(ptype)
        {
            let view = frame::View::parse(node)?;
            Source::Packed(PackedCol::new(view.offsets, view.reference, ptype)?)
        } else if let Some((h, reference)) = patched_bits(node)? {
            let packed = PackedCol::new(&h.children[0], reference, ptype)?;
            Source::Patched {
                packed,
                exceptions: hipatch::exceptions(h, scratch)?,
            }
        } else if node.id == dict::ID
            && node.children.len() == 2
            && node.children[0].id == bitpack::ID
            && node.children[0].len == len
            && matches!(node.children[0].ptype, PType::U8 | PType::U16 | PType::U32)
            && node.children[1].ptype == ptype
            && ptype != PType::Bytes
        {
            node.expect_shape("dict", 0, 2)?;
            let codes = PackedCol::new(&node.children[0], 0, node.children[0].ptype)?;
            let dv = scratch.decode(&node.children[1])?;
            let values = match &dv {
                Values::Int(v) => DictValues::Ints(ints_to_i64(v)?),
                Values::F32(v) => DictValues::Floats(v.iter().map(|&x| f64::from(x)).collect()),
                Values::F64(v) => DictValues::Floats(v.clone()),
                Values::Bytes(_) => return Err(Error::corrupt("dictionary of strings")),
            };
            scratch.give(dv);
            Source::Dict { codes, values }
        } else if node.id == strdict::ID
            && ptype == PType::Bytes
            && node.children.len() == 2
            && node.children[0].ptype == PType::U32
            && node.children[0].len == len
            && node.children[1].ptype == PType::Bytes
        {
            // The codes are read, not the strings' places: the row index is not needed.
            strdict::View::parse(node)?;
            let codes = scratch.decode(&node.children[0])?;
            let dict = scratch.decode(&node.children[1])?;
            let s = match (&codes, dict) {
                (Values::Int(IntVec::U32(c)), Values::Bytes(d)) => Source::StrDict {
                    codes: c.clone(),
                    dict: d,
                },
                _ => return Err(Error::corrupt("strdict children have the wrong types")),
            };
            scratch.give(codes);
            s
        } else {
            let v = scratch.decode(node)?;
            let s = match &v {
                Values::Int(x) => Source::Ints(ints_to_i64(x)?),
                Values::F32(x) => Source::Floats(x.iter().map(|&f| f64::from(f)).collect()),
                Values::F64(x) => Source::Floats(x.clone()),
                Values::Bytes(b) => Source::Strings(b.clone()),
            };
            scratch.give(v);
            s
        };
        if let Source::Ints(v) = &source
            && v.len() != len
        {
            return Err(Error::corrupt("decoded length differs from the header"));
        }
        Ok(ChunkColumn { source, len })
    }

    /// Rows in the chunk.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the chunk is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The decoded strings (string columns only).
    pub fn strings(&self) -> Option<StrView<'_>> {
        match &self.source {
            Source::Strings(s) => Some(StrView::Plain(s)),
            Source::StrDict { codes, dict } => Some(StrView::Dict(codes, dict)),
            _ => None,
        }
    }

    /// Whether values are floats.
    pub fn is_float(&self) -> bool {
        matches!(
            self.source,
            Source::Floats(_)
                | Source::Dict {
                    values: DictValues::Floats(_),
                    ..
                }
        )
    }

    fn dict_codes(
        codes: &PackedCol<'_>,
        b: usize,
        n: usize,
        sel: Option<&[usize]>,
        dict_len: usize,
        out: &mut [i64],
    ) -> Result<usize> {
        let k = match sel {
            None => {
                codes.load(b, n, out);
                n
            }
            Some(idx) => {
                codes.gather(b, idx, out);
                idx.len()
            }
        };
        let max = out[..k].iter().copied().max().unwrap_or(0);
        if max < 0 || max as usize >= dict_len.max(1) && k > 0 {
            return Err(Error::corrupt(format!(
                "dictionary code {max} past the dictionary's {dict_len} entries"
            )));
        }
        Ok(k)
    }

    /// Loads the values of block `b` (rows `1024b .. 1024b + n`), all of them or those at
    /// `sel` (positions within the block), into `out` (resized).
    pub fn load(&self, b: usize, n: usize, sel: Option<&[usize]>, out: &mut Block) -> Result<()> {
        let k = sel.map_or(n, <[usize]>::len);
        let start = b * BLOCK;
        match &self.source {
            Source::Packed(p) => {
                let o = ints(out, k);
                match sel {
                    None => p.load(b, n, o),
                    Some(idx) => p.gather(b, idx, o),
                }
            }
            Source::Patched { packed, exceptions } => {
                let o = ints(out, k);
                // Block `b` is vector `b`; `ChunkColumn::new` checked every offset below the
                // chunk's length.
                let e = exceptions;
                let range = e.starts[b] as usize..e.starts[b + 1] as usize;
                let (exc, high) = (&e.offsets[range.clone()], &e.high[range]);
                // An unpacked value holds reference + low bits: take the reference off, OR the
                // high bits in, put it back, in the stream's type.
                let (r, ptype) = (packed.reference, packed.ptype);
                let patch = |v: i64, h: u64| {
                    logical(((v as u64).wrapping_sub(r) | h).wrapping_add(r), ptype) as i64
                };
                match sel {
                    None => {
                        packed.load(b, n, o);
                        for (&p, &h) in exc.iter().zip(high) {
                            let v = &mut o[usize::from(p)];
                            *v = patch(*v, h);
                        }
                    }
                    Some(idx) => {
                        packed.gather(b, idx, o);
                        if idx.is_sorted() {
                            // Both in increasing order (as the scan selects): one merge.
                            let mut j = 0usize;
                            for (o, &i) in o.iter_mut().zip(idx) {
                                while j < exc.len() && usize::from(exc[j]) < i {
                                    j += 1;
                                }
                                if j < exc.len() && usize::from(exc[j]) == i {
                                    *o = patch(*o, high[j]);
                                }
                            }
                        } else {
                            for (o, &i) in o.iter_mut().zip(idx) {
                                if let Ok(j) = exc.binary_search_by(|&x| usize::from(x).cmp(&i)) {
                                    *o = patch(*o, high[j]);
                                }
                            }
                        }
                    }
                }
            }
            Source::Dict {
                codes,
                values: DictValues::Ints(v),
            } if sel.is_none() && codes.ptype == PType::U8 && !v.is_empty() => {
                // Byte codes: gather straight from a 256-entry copy of the dictionary, after
                // checking the block's largest code.
                let mut padded = [0i64; 256];
                for (p, &x) in padded.iter_mut().zip(v) {
                    *p = x;
                }
                let o = ints(out, k);
                let max = codes.with_block(b, n, |u| match u {
                    Unpacked::U8(x) => gather_u8(x, &padded, o),
                    _ => u8::MAX,
                });
                if usize::from(max) >= v.len() {
                    return Err(Error::corrupt(format!(
                        "dictionary code {max} past the dictionary's {} entries",
                        v.len()
                    )));
                }
            }
            Source::Dict { codes, values } => {
                let mut c = [0i64; BLOCK];
                let dict_len = match values {
                    DictValues::Ints(v) => v.len(),
                    DictValues::Floats(v) => v.len(),
                };
                Self::dict_codes(codes, b, n, sel, dict_len, &mut c)?;
                match values {
                    DictValues::Ints(v) => {
                        let o = ints(out, k);
                        for (o, &c) in o.iter_mut().zip(&c[..k]) {
                            *o = v[c as usize];
                        }
                    }
                    DictValues::Floats(v) => {
                        let o = floats(out, k);
                        for (o, &c) in o.iter_mut().zip(&c[..k]) {
                            *o = v[c as usize];
                        }
                    }
                }
            }
            Source::Ints(v) => {
                let src = &v[start..start + n];
                let o = ints(out, k);
                match sel {
                    None => o.copy_from_slice(src),
                    Some(idx) => {
                        for (o, &i) in o.iter_mut().zip(idx) {
                            *o = src[i];
                        }
                    }
                }
            }
            Source::Floats(v) => {
                let src = &v[start..start + n];
                let o = floats(out, k);
                match sel {
                    None => o.copy_from_slice(src),
                    Some(idx) => {
                        for (o, &i) in o.iter_mut().zip(idx) {
                            *o = src[i];
                        }
                    }
                }
            }
            Source::Strings(_) | Source::StrDict { .. } => {
                return Err(Error::unsupported("arithmetic on a string column"));
            }
        }
        Ok(())
    }

    /// For a dictionary chunk: `pred` evaluated on every dictionary entry, one entry per code
    /// the packed width can hold (codes past the dictionary marked invalid with bit 1), for
    /// [`ChunkColumn::filter`]. Built once per chunk.
    pub fn code_table(&self, pred: &dyn Fn(i64) -> bool) -> Option<Vec<u8>> {
        let Source::Dict {
            codes,
            values: DictValues::Ints(v),
        } = &self.source
        else {
            return None;
        };
        if codes.width > 16 {
            return None;
        }
        let mut table: Vec<u8> = v.iter().map(|&x| u8::from(pred(x))).collect();
        // Byte codes get a full 256-entry table (codes past 2^width never occur).
        let entries = if codes.ptype == PType::U8 {
            256
        } else {
            1 << codes.width
        };
        table.resize(entries.max(table.len()), 2);
        Some(table)
    }

    /// ANDs the predicate into `mask[..n]` for block `b` (see [`Predicate`]).
    pub fn filter(
        &self,
        b: usize,
        n: usize,
        p: &Predicate<'_>,
        mask: &mut [u8],
        tmp: &mut Block,
    ) -> Result<()> {
        let Predicate { range, pred, table } = *p;
        match &self.source {
            Source::Packed(p) => {
                if let Some((lo, hi)) = range
                    && p.filter_range(b, n, lo, hi, mask)
                {
                    return Ok(());
                }
            }
            Source::Dict {
                codes,
                values: DictValues::Ints(v),
            } => {
                if let Some(t) = table {
                    // The dictionary is sorted, so a range predicate keeps a contiguous range
                    // of codes: compare the codes instead of looking each one up.
                    if let Some((lo, hi)) = code_range(&t[..v.len().min(t.len())]) {
                        return codes.filter_codes(b, n, lo, hi, v.len(), mask);
                    }
                    return codes.filter_table(b, n, t, mask);
                }
                let mut c = [0i64; BLOCK];
                Self::dict_codes(codes, b, n, None, v.len(), &mut c)?;
                for (m, &c) in mask[..n].iter_mut().zip(&c[..n]) {
                    *m &= u8::from(pred(v[c as usize]));
                }
                return Ok(());
            }
            _ => {}
        }
        self.load(b, n, None, tmp)?;
        match tmp {
            Block::Ints(v) => {
                if let Some((lo, hi)) = range {
                    for (m, &x) in mask[..n].iter_mut().zip(v.iter()) {
                        *m &= u8::from(x >= lo && x <= hi);
                    }
                } else {
                    for (m, &x) in mask[..n].iter_mut().zip(v.iter()) {
                        *m &= u8::from(pred(x));
                    }
                }
            }
            Block::Floats(_) => return Err(Error::unsupported("integer predicate on floats")),
        }
        Ok(())
    }
}

fn ints(b: &mut Block, k: usize) -> &mut [i64] {
    if !matches!(b, Block::Ints(_)) {
        *b = Block::Ints(Vec::with_capacity(BLOCK));
    }
    match b {
        Block::Ints(v) => {
            v.resize(k, 0);
            v
        }
        Block::Floats(_) => &mut [],
    }
}

fn floats(b: &mut Block, k: usize) -> &mut [f64] {
    if !matches!(b, Block::Floats(_)) {
        *b = Block::Floats(Vec::with_capacity(BLOCK));
    }
    match b {
        Block::Floats(v) => {
            v.resize(k, 0.0);
            v
        }
        Block::Ints(_) => &mut [],
    }
}

/// The `hipatch` node of `for | hipatch | bitpack` or `hipatch | bitpack` (`node` of an
/// integer type) and the `for` reference's bits (0 without `for`), checked to line up.
fn patched_bits<'n, 'a>(node: &'n NodeView<'a>) -> Result<Option<(&'n NodeView<'a>, u64)>> {
    if !node.ptype.is_int() {
        return Ok(None);
    }
    let (h, reference) = if node.id == frame::ID
        && node.children.len() == 1
        && node.children[0].id == hipatch::ID
        && node.children[0].ptype == bitpack::unsigned_of(node.ptype)
    {
        let view = frame::View::parse(node)?;
        (view.offsets, view.reference)
    } else if node.id == hipatch::ID {
        (node, 0)
    } else {
        return Ok(None);
    };
    let lines_up = h.len == node.len
        && h.children.first().is_some_and(|low| {
            low.id == bitpack::ID && low.len == node.len && low.ptype == h.ptype
        });
    Ok(lines_up.then_some((h, reference)))
}
