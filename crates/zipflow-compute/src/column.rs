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

use std::borrow::Cow;
use std::mem::MaybeUninit;

use fastlanes::BitPacking;
use zipflow_core::values::ByteStrings;
use zipflow_core::{Error, Int, IntVec, PType, Result, VECTOR_LEN, Values, match_ints};
use zipflow_encodings::{NodeView, Scratch, bitpack, dict, frame, hipatch, strdict};

/// Values in one block.
pub const BLOCK: usize = VECTOR_LEN;

/// Packed words of one of the four unsigned types.
enum Words<'a> {
    U8(Cow<'a, [u8]>),
    U16(Cow<'a, [u16]>),
    U32(Cow<'a, [u32]>),
    U64(Cow<'a, [u64]>),
}

/// A `bitpack` node, optionally under a `for`: value = `reference + packed` in the stream's
/// type (wrapping, as the decoder does).
struct PackedCol<'a> {
    words: Words<'a>,
    width: usize,
    /// The reference's bits (0 without `for`).
    reference: u64,
    ptype: PType,
    /// When set, `reference + packed` never wraps, so the logical value is exactly
    /// `logical(reference) + packed` and range predicates can be compared on `packed`.
    exact_base: Option<i128>,
}

fn words_of<'a, U: bytemuck::Pod>(bytes: &'a [u8]) -> Result<Cow<'a, [U]>> {
    let size = size_of::<U>();
    if !bytes.len().is_multiple_of(size) {
        return Err(Error::corrupt(
            "packed buffer is not a whole number of words",
        ));
    }
    Ok(match bytemuck::try_cast_slice::<u8, U>(bytes) {
        Ok(s) => Cow::Borrowed(s),
        Err(_) => {
            let mut v = vec![U::zeroed(); bytes.len() / size];
            bytemuck::cast_slice_mut::<U, u8>(&mut v).copy_from_slice(bytes);
            Cow::Owned(v)
        }
    })
}

/// The logical value of `bits` (the low `ptype` bits) as i128.
fn logical(bits: u64, ptype: PType) -> i128 {
    match ptype {
        PType::I8 => i128::from(bits as u8 as i8),
        PType::I16 => i128::from(bits as u16 as i16),
        PType::I32 => i128::from(bits as u32 as i32),
        PType::I64 => i128::from(bits as i64),
        PType::U8 => i128::from(bits as u8),
        PType::U16 => i128::from(bits as u16),
        PType::U32 => i128::from(bits as u32),
        _ => i128::from(bits),
    }
}

fn type_range(ptype: PType) -> (i128, i128) {
    match ptype {
        PType::I8 => (i8::MIN.into(), i8::MAX.into()),
        PType::I16 => (i16::MIN.into(), i16::MAX.into()),
        PType::I32 => (i32::MIN.into(), i32::MAX.into()),
        PType::I64 => (i64::MIN.into(), i64::MAX.into()),
        PType::U8 => (0, u8::MAX.into()),
        PType::U16 => (0, u16::MAX.into()),
        PType::U32 => (0, u32::MAX.into()),
        _ => (0, u64::MAX.into()),
    }
}

impl<'a> PackedCol<'a> {
    fn new(node: &NodeView<'a>, reference: u64, ptype: PType) -> Result<Self> {
        node.expect_shape("bitpack", 1, 0)?;
        let mut meta = node.meta_reader();
        let width = usize::from(meta.u8("bit width")?);
        meta.finish("bitpack")?;
        let bits = ptype.byte_width() * 8;
        if width > bits {
            return Err(Error::corrupt(format!("bit width {width} exceeds {bits}")));
        }
        let buf = node.buffer(0, "packed")?;
        let words = match ptype.byte_width() {
            1 => Words::U8(words_of(buf)?),
            2 => Words::U16(words_of(buf)?),
            4 => Words::U32(words_of(buf)?),
            _ => Words::U64(words_of(buf)?),
        };
        let n = match &words {
            Words::U8(w) => w.len(),
            Words::U16(w) => w.len(),
            Words::U32(w) => w.len(),
            Words::U64(w) => w.len(),
        };
        let expected = bitpack::vectors(node.len) * BLOCK * width / bits;
        if n != expected {
            return Err(Error::corrupt(format!(
                "packed buffer has {n} words, {} values at {width} bits need {expected}",
                node.len
            )));
        }
        let base = logical(reference, ptype);
        let top = if width == 0 { 0 } else { (1i128 << width) - 1 };
        let (lo, hi) = type_range(ptype);
        let exact_base = (base >= lo && base + top <= hi).then_some(base);
        Ok(PackedCol {
            words,
            width,
            reference,
            ptype,
            exact_base,
        })
    }
}

macro_rules! with_words {
    ($words:expr, $U:ident, $w:ident => $body:expr) => {
        match $words {
            Words::U8($w) => {
                type $U = u8;
                $body
            }
            Words::U16($w) => {
                type $U = u16;
                $body
            }
            Words::U32($w) => {
                type $U = u32;
                $body
            }
            Words::U64($w) => {
                type $U = u64;
                $body
            }
        }
    };
}

/// Runs `$body` compiled for AVX2 when the CPU has it (the crate is built for baseline
/// x86-64), else as is. The body must be plain safe code over its arguments.
macro_rules! avx2_dispatch {
    ($avx2:expr, $body:expr) => {{
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU supports AVX2 (checked just above).
                return unsafe { $avx2 };
            }
        }
        $body
    }};
}

/// Converts unsigned bits (plus `reference`, wrapping) of `ptype` to i64.
#[inline(always)]
fn widen_impl<U: Int>(src: &[U], reference: U, ptype: PType, out: &mut [i64]) {
    macro_rules! go {
        ($t:ty) => {
            for (o, &x) in out.iter_mut().zip(src) {
                *o = x.wrapping_add(reference).to_u64() as $t as i64;
            }
        };
    }
    match ptype {
        PType::I8 => go!(i8),
        PType::I16 => go!(i16),
        PType::I32 => go!(i32),
        PType::U8 => go!(u8),
        PType::U16 => go!(u16),
        PType::U32 => go!(u32),
        _ => go!(i64),
    }
}

fn widen<U: Int>(src: &[U], reference: U, ptype: PType, out: &mut [i64]) {
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn avx2<U: Int>(src: &[U], reference: U, ptype: PType, out: &mut [i64]) {
        widen_impl(src, reference, ptype, out);
    }
    avx2_dispatch!(
        avx2(src, reference, ptype, out),
        widen_impl(src, reference, ptype, out)
    )
}

/// `mask[i] &= (x[i] - l) <= span` (wrapping): `l <= x[i] <= l + span`.
#[inline(always)]
fn range_mask_impl<U: Int>(x: &[U], l: U, span: U, mask: &mut [u8]) {
    for (m, &v) in mask.iter_mut().zip(x) {
        *m &= u8::from(v.wrapping_sub(l) <= span);
    }
}

fn range_mask<U: Int>(x: &[U], l: U, span: U, mask: &mut [u8]) {
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn avx2<U: Int>(x: &[U], l: U, span: U, mask: &mut [u8]) {
        range_mask_impl(x, l, span, mask);
    }
    avx2_dispatch!(avx2(x, l, span, mask), range_mask_impl(x, l, span, mask))
}

/// `mask[i] &= table[codes[i]]`; returns the OR of every entry looked up (bit 1 marks a code
/// past the dictionary). `table` has an entry for every value `U` can take at the packed width.
#[inline(always)]
fn table_mask_impl<U: Int>(codes: &[U], table: &[u8], mask: &mut [u8]) -> u8 {
    let mut seen = 0u8;
    for (m, &c) in mask.iter_mut().zip(codes) {
        let t = table.get(c.to_u64() as usize).copied().unwrap_or(2);
        seen |= t;
        *m &= t;
    }
    seen
}

/// [`table_mask_impl`] for byte codes: a 256-entry table needs no bounds checks.
#[inline(always)]
fn table_mask_u8(codes: &[u8], table: &[u8; 256], mask: &mut [u8]) -> u8 {
    let mut seen = 0u8;
    for (m, &c) in mask.iter_mut().zip(codes) {
        let t = table[usize::from(c)];
        seen |= t;
        *m &= t;
    }
    seen
}

fn table_mask<U: Int>(codes: &[U], table: &[u8], mask: &mut [u8]) -> u8 {
    if let (Some(c), Some(t)) = (
        bytemuck::try_cast_slice::<U, u8>(codes)
            .ok()
            .filter(|_| U::BITS == 8),
        <&[u8; 256]>::try_from(table).ok(),
    ) {
        return table_mask_u8(c, t, mask);
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn avx2<U: Int>(codes: &[U], table: &[u8], mask: &mut [u8]) -> u8 {
        table_mask_impl(codes, table, mask)
    }
    avx2_dispatch!(
        avx2(codes, table, mask),
        table_mask_impl(codes, table, mask)
    )
}

/// `out[i] = dict[codes[i]]`; returns the largest code.
#[inline(always)]
fn gather_u8_impl(codes: &[u8], dict: &[i64; 256], out: &mut [i64]) -> u8 {
    let mut max = 0u8;
    for (o, &c) in out.iter_mut().zip(codes) {
        *o = dict[usize::from(c)];
        max = max.max(c);
    }
    max
}

fn gather_u8(codes: &[u8], dict: &[i64; 256], out: &mut [i64]) -> u8 {
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn avx2(codes: &[u8], dict: &[i64; 256], out: &mut [i64]) -> u8 {
        gather_u8_impl(codes, dict, out)
    }
    avx2_dispatch!(avx2(codes, dict, out), gather_u8_impl(codes, dict, out))
}

thread_local! {
    /// One block of unpacked words, reused so blocks are not zeroed before every unpack.
    static UNPACKED: std::cell::RefCell<Vec<u64>> = std::cell::RefCell::new(vec![0; BLOCK]);
}

/// Blocks ahead of the one gathered from whose packed words are prefetched.
const GATHER_PREFETCH_BLOCKS: usize = 2;

impl PackedCol<'_> {
    /// Unpacks block `b` into a reused buffer and hands its first `n` words to `f`.
    fn with_block<R>(&self, b: usize, n: usize, f: impl FnOnce(Unpacked<'_>) -> R) -> R {
        UNPACKED.with(|cell| {
            let mut buf = cell.borrow_mut();
            with_words!(&self.words, U, w => {
                let out: &mut [U] = &mut bytemuck::cast_slice_mut::<u64, U>(&mut buf[..])[..BLOCK];
                if self.width == 0 {
                    out.fill(0 as U);
                } else {
                    let per = BLOCK * self.width / U::BITS as usize;
                    let src = &w[b * per..(b + 1) * per];
                    // SAFETY: `new` checked `width <= U::BITS` and the word count, so block
                    // `b` (below the node's vector count, which callers guarantee) has `per`
                    // words; `out` holds 1024 values.
                    unsafe { U::unchecked_unpack(self.width, src, out) };
                }
                f(U::view(&out[..n]))
            })
        })
    }

    /// Unpacks block `b` (values `1024b..`) into `out[..n]`.
    fn load(&self, b: usize, n: usize, out: &mut [i64]) {
        let r = self.reference;
        let ptype = self.ptype;
        self.with_block(b, n, |u| match u {
            Unpacked::U8(x) => widen(x, r as u8, ptype, &mut out[..n]),
            Unpacked::U16(x) => widen(x, r as u16, ptype, &mut out[..n]),
            Unpacked::U32(x) => widen(x, r as u32, ptype, &mut out[..n]),
            Unpacked::U64(x) => widen(x, r, ptype, &mut out[..n]),
        })
    }

    /// Values at positions `idx` (within block `b`) into `out[..idx.len()]`.
    fn gather(&self, b: usize, idx: &[usize], out: &mut [i64]) {
        with_words!(&self.words, U, w => {
            let r = U::from_u64_wrapping(self.reference);
            let k = idx.len();
            if self.width == 0 {
                let zeros = [0 as U; 1];
                for o in &mut out[..k] {
                    widen(&zeros, r, self.ptype, std::slice::from_mut(o));
                }
            } else {
                // Uninitialised scratch: zeroing a whole block per call would cost more than
                // the few values gathered.
                let mut tmp = [MaybeUninit::<U>::uninit(); BLOCK];
                let per = BLOCK * self.width / U::BITS as usize;
                let src = &w[b * per..(b + 1) * per];
                // A few values per block are scattered over its words, a pattern the hardware
                // prefetcher does not follow: fetch a later block's words while this one's
                // are read, so the gather does not wait on DRAM.
                crate::prefetch::ahead(w, (b + GATHER_PREFETCH_BLOCKS) * per, per);
                // SAFETY: as in `with_block`; every index is below 1024 (positions within a
                // block).
                unsafe { U::unchecked_unpack_indices(self.width, src, idx, &mut tmp[..k]) };
                // SAFETY: `unchecked_unpack_indices` wrote the first `k` outputs, and
                // `MaybeUninit<U>` has the layout of `U`.
                let vals = unsafe { std::slice::from_raw_parts(tmp.as_ptr().cast::<U>(), k) };
                widen(vals, r, self.ptype, &mut out[..k]);
            }
        })
    }

    /// ANDs `lo <= v <= hi` into `mask[..n]`; false when the packed domain cannot be used.
    fn filter_range(&self, b: usize, n: usize, lo: i64, hi: i64, mask: &mut [u8]) -> bool {
        let Some(base) = self.exact_base else {
            return false;
        };
        let top = if self.width == 0 {
            0
        } else {
            (1i128 << self.width) - 1
        };
        let plo = (i128::from(lo) - base).max(0);
        let phi = (i128::from(hi) - base).min(top);
        if plo > phi {
            mask[..n].fill(0);
            return true;
        }
        // plo..=phi lie within 0..2^width, so they fit the packed type.
        let (l, span) = (plo as u64, (phi - plo) as u64);
        let mask = &mut mask[..n];
        self.with_block(b, n, |u| match u {
            Unpacked::U8(x) => range_mask(x, l as u8, span as u8, mask),
            Unpacked::U16(x) => range_mask(x, l as u16, span as u16, mask),
            Unpacked::U32(x) => range_mask(x, l as u32, span as u32, mask),
            Unpacked::U64(x) => range_mask(x, l, span, mask),
        });
        true
    }

    /// ANDs `table[code]` into `mask[..n]`; errors on a code past the dictionary
    /// (`table` marks those with bit 1).
    fn filter_table(&self, b: usize, n: usize, table: &[u8], mask: &mut [u8]) -> Result<()> {
        let mask = &mut mask[..n];
        let seen = self.with_block(b, n, |u| match u {
            Unpacked::U8(x) => table_mask(x, table, mask),
            Unpacked::U16(x) => table_mask(x, table, mask),
            Unpacked::U32(x) => table_mask(x, table, mask),
            Unpacked::U64(x) => table_mask(x, table, mask),
        });
        if seen & 2 != 0 {
            return Err(Error::corrupt("dictionary code past the dictionary's end"));
        }
        Ok(())
    }
}

/// The codes `lo..=hi` when the ones of `table` (over the dictionary) are contiguous.
fn code_range(table: &[u8]) -> Option<(u64, u64)> {
    let lo = table.iter().position(|&t| t == 1)?;
    let hi = table.iter().rposition(|&t| t == 1)?;
    table[lo..=hi]
        .iter()
        .all(|&t| t == 1)
        .then_some((lo as u64, hi as u64))
}

/// The largest value of a block.
#[inline(always)]
fn max_impl<U: Int>(x: &[U]) -> U {
    x.iter().copied().fold(U::ZERO, |a, b| a.max(b))
}

fn block_max<U: Int>(x: &[U]) -> U {
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn avx2<U: Int>(x: &[U]) -> U {
        max_impl(x)
    }
    avx2_dispatch!(avx2(x), max_impl(x))
}

impl PackedCol<'_> {
    /// ANDs `lo <= code <= hi` into `mask[..n]`; errors on a code past the dictionary's
    /// `dict_len` entries (checked only when the packed width can express one).
    fn filter_codes(
        &self,
        b: usize,
        n: usize,
        lo: u64,
        hi: u64,
        dict_len: usize,
        mask: &mut [u8],
    ) -> Result<()> {
        let check = self.width >= 64 || (1u128 << self.width) > dict_len as u128;
        let (l, span) = (lo, hi - lo);
        let mask = &mut mask[..n];
        let max = self.with_block(b, n, |u| {
            macro_rules! go {
                ($x:expr, $t:ty) => {{
                    range_mask($x, l as $t, span as $t, mask);
                    if check { block_max($x).to_u64() } else { 0 }
                }};
            }
            match u {
                Unpacked::U8(x) => go!(x, u8),
                Unpacked::U16(x) => go!(x, u16),
                Unpacked::U32(x) => go!(x, u32),
                Unpacked::U64(x) => go!(x, u64),
            }
        });
        if check && n > 0 && max >= dict_len as u64 {
            return Err(Error::corrupt(format!(
                "dictionary code {max} past the dictionary's {dict_len} entries"
            )));
        }
        Ok(())
    }
}

/// A block of unpacked words of one of the four unsigned types.
enum Unpacked<'u> {
    U8(&'u [u8]),
    U16(&'u [u16]),
    U32(&'u [u32]),
    U64(&'u [u64]),
}

trait View: Sized {
    fn view(x: &[Self]) -> Unpacked<'_>;
}

impl View for u8 {
    fn view(x: &[u8]) -> Unpacked<'_> {
        Unpacked::U8(x)
    }
}
impl View for u16 {
    fn view(x: &[u16]) -> Unpacked<'_> {
        Unpacked::U16(x)
    }
}
impl View for u32 {
    fn view(x: &[u32]) -> Unpacked<'_> {
        Unpacked::U32(x)
    }
}
impl View for u64 {
    fn view(x: &[u64]) -> Unpacked<'_> {
        Unpacked::U64(x)
    }
}

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
            node.expect_shape("for", 0, 1)?;
            let mut meta = node.meta_reader();
            let reference = meta.u64("reference")?;
            meta.finish("for")?;
            Source::Packed(PackedCol::new(&node.children[0], reference, ptype)?)
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
            strdict::check(node)?;
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

/// A range predicate mapped into one chunk's packed domain, for [`ChunkColumn::range_bits`]:
/// a packed word `x` passes when `x - l <= span` (wrapping).
#[derive(Debug, Clone, Copy)]
pub struct PackedRange {
    l: u64,
    span: u64,
    /// No value of the chunk can pass.
    empty: bool,
    /// For dictionary codes: the dictionary's length, when the packed width can express a
    /// code past it (every block is then checked).
    dict_len: Option<usize>,
    /// The fraction of the packed domain that passes, to evaluate selective predicates first.
    pub selectivity: f64,
}

/// Fused unpack-and-compare kernels, one per packed word type. FastLanes stores value
/// `index(row, lane) = FL_ORDER[row / 8] * 16 + (row % 8) * 128 + lane` of a vector as the
/// `row`-th `width`-bit field of lane `lane`'s bit stream (words `packed[LANES * k + lane]`).
/// One row of every lane is therefore a run of `LANES` consecutive values, starting at a
/// multiple of `LANES`: unpacking a row across lanes (contiguous loads, vectorised) and
/// comparing gives `LANES` bits of the logical-order bitmask at once, with no unpacked block
/// in memory.
macro_rules! fused_range_kernel {
    ($name:ident, $t:ty) => {
        /// `out` = the bitmask of `packed_value - l <= span` (wrapping) for the 1024 values of
        /// one vector packed at `width` bits (`1 <= width <= T`, `packed.len() == LANES *
        /// width`); returns whether some value exceeds `limit`.
        #[inline(always)]
        fn $name(
            packed: &[$t],
            width: usize,
            l: $t,
            span: $t,
            limit: $t,
            out: &mut [u64; 16],
        ) -> bool {
            const T: usize = <$t>::BITS as usize;
            const LANES: usize = 1024 / T;
            const PER: usize = if LANES < 64 { LANES } else { 64 };
            let fmask: $t = if width >= T {
                <$t>::MAX
            } else {
                ((1 as $t) << width) - 1
            };
            let mut bad = false;
            *out = [0; 16];
            #[inline(always)]
            fn row_bits(
                get: impl Fn(usize) -> $t,
                l: $t,
                span: $t,
                limit: $t,
                base: usize,
                out: &mut [u64; 16],
                bad: &mut bool,
            ) {
                let mut pos = base;
                for c in 0..LANES / PER {
                    let mut m = 0u64;
                    let mut over = false;
                    for j in 0..PER {
                        let v = get(c * PER + j);
                        m |= u64::from(v.wrapping_sub(l) <= span) << j;
                        over |= v > limit;
                    }
                    out[pos / 64] |= m << (pos % 64);
                    *bad |= over;
                    pos += PER;
                }
            }
            for row in 0..T {
                let bit = row * width;
                let (k, s) = (bit / T, bit % T);
                let base = fastlanes::FL_ORDER[row / 8] * 16 + (row % 8) * 128;
                let lo = &packed[k * LANES..(k + 1) * LANES];
                if s + width > T {
                    let hi = &packed[(k + 1) * LANES..(k + 2) * LANES];
                    let r = T - s;
                    row_bits(
                        |i| ((lo[i] >> s) | (hi[i] << r)) & fmask,
                        l,
                        span,
                        limit,
                        base,
                        out,
                        &mut bad,
                    );
                } else {
                    row_bits(
                        |i| (lo[i] >> s) & fmask,
                        l,
                        span,
                        limit,
                        base,
                        out,
                        &mut bad,
                    );
                }
            }
            bad
        }
    };
}

fused_range_kernel!(fused_u8, u8);
fused_range_kernel!(fused_u16, u16);
fused_range_kernel!(fused_u32, u32);
fused_range_kernel!(fused_u64, u64);

/// Runs a portable fused kernel compiled for AVX2 when the CPU has it (AVX-512 CPUs use
/// [`fused512`]).
macro_rules! fused_dispatch {
    ($kernel:ident, $t:ty, $packed:expr, $width:expr, $l:expr, $span:expr, $limit:expr, $out:expr) => {{
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2")]
        fn avx2(p: &[$t], w: usize, l: $t, s: $t, m: $t, o: &mut [u64; 16]) -> bool {
            $kernel(p, w, l, s, m, o)
        }
        let (p, w, l, s, m, o) = ($packed, $width, $l, $span, $limit, $out);
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU supports AVX2 (checked just above).
                unsafe { avx2(p, w, l, s, m, o) }
            } else {
                $kernel(p, w, l, s, m, o)
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            $kernel(p, w, l, s, m, o)
        }
    }};
}

/// The fused kernels written with AVX-512 mask compares: a row of one vector is always two
/// 512-bit registers (`LANES * T == 1024` bits), whose compares give `LANES` mask bits
/// directly (the portable kernels leave LLVM to assemble those bits, which it does poorly).
#[cfg(target_arch = "x86_64")]
mod fused512 {
    use std::arch::x86_64::*;

    macro_rules! kernel {
        ($name:ident, $t:ty, $splat:ident, $shr:ident, $shl:ident, $sub:ident, $le:ident, $gt:ident) => {
            /// As the portable kernel of the same type.
            #[target_feature(enable = "avx512f,avx512bw")]
            pub(super) fn $name(
                packed: &[$t],
                width: usize,
                l: $t,
                span: $t,
                limit: $t,
                out: &mut [u64; 16],
            ) -> bool {
                const T: usize = <$t>::BITS as usize;
                const LANES: usize = 1024 / T;
                const V: usize = 512 / T;
                let fmask: $t = if width >= T {
                    <$t>::MAX
                } else {
                    ((1 as $t) << width) - 1
                };
                let (vl, vspan, vlim, vmask) =
                    ($splat(l), $splat(span), $splat(limit), $splat(fmask));
                let mut bad = 0u64;
                // Without a code bound to check, skip that compare.
                let check = limit != <$t>::MAX;
                *out = [0; 16];
                for row in 0..T {
                    let bit = row * width;
                    let (k, s) = (bit / T, bit % T);
                    let base = fastlanes::FL_ORDER[row / 8] * 16 + (row % 8) * 128;
                    let lo = &packed[k * LANES..(k + 1) * LANES];
                    let spill = s + width > T;
                    let hi = if spill {
                        &packed[(k + 1) * LANES..(k + 2) * LANES]
                    } else {
                        lo
                    };
                    let mut m = [0u64; 2];
                    for (h, m) in m.iter_mut().enumerate() {
                        // SAFETY: `lo` and `hi` hold `LANES == 2 * V` values; this reads
                        // values `h * V .. (h + 1) * V` of each (unaligned loads).
                        let (a, b) = unsafe {
                            (
                                _mm512_loadu_si512(lo.as_ptr().add(h * V).cast()),
                                _mm512_loadu_si512(hi.as_ptr().add(h * V).cast()),
                            )
                        };
                        let mut v = $shr(a, s as u32);
                        if spill {
                            v = _mm512_or_si512(v, $shl(b, (T - s) as u32));
                        }
                        v = _mm512_and_si512(v, vmask);
                        *m = $le($sub(v, vl), vspan);
                        if check {
                            bad |= $gt(v, vlim);
                        }
                    }
                    if V == 64 {
                        out[base / 64] |= m[0];
                        out[base / 64 + 1] |= m[1];
                    } else {
                        out[base / 64] |= (m[0] | (m[1] << (V % 64))) << (base % 64);
                    }
                }
                bad != 0
            }
        };
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw")]
    fn count(s: u32) -> __m128i {
        _mm_cvtsi32_si128(s as i32)
    }

    macro_rules! ops {
        ($t:ty, $splat:ident, $set1:ident, $st:ty, $shr:ident, $srl:ident, $shl:ident, $sll:ident,
         $sub:ident, $vsub:ident, $le:ident, $cmple:ident, $gt:ident, $cmpgt:ident) => {
            #[inline]
            #[target_feature(enable = "avx512f,avx512bw")]
            fn $splat(x: $t) -> __m512i {
                $set1(x as $st)
            }
            #[inline]
            #[target_feature(enable = "avx512f,avx512bw")]
            fn $shr(a: __m512i, s: u32) -> __m512i {
                $srl(a, count(s))
            }
            #[inline]
            #[target_feature(enable = "avx512f,avx512bw")]
            fn $shl(a: __m512i, s: u32) -> __m512i {
                $sll(a, count(s))
            }
            #[inline]
            #[target_feature(enable = "avx512f,avx512bw")]
            fn $sub(a: __m512i, b: __m512i) -> __m512i {
                $vsub(a, b)
            }
            #[inline]
            #[target_feature(enable = "avx512f,avx512bw")]
            fn $le(a: __m512i, b: __m512i) -> u64 {
                u64::from($cmple(a, b))
            }
            #[inline]
            #[target_feature(enable = "avx512f,avx512bw")]
            fn $gt(a: __m512i, b: __m512i) -> u64 {
                u64::from($cmpgt(a, b))
            }
        };
    }

    ops!(
        u64,
        splat64,
        _mm512_set1_epi64,
        i64,
        shr64,
        _mm512_srl_epi64,
        shl64,
        _mm512_sll_epi64,
        sub64,
        _mm512_sub_epi64,
        le64,
        _mm512_cmple_epu64_mask,
        gt64,
        _mm512_cmpgt_epu64_mask
    );
    ops!(
        u32,
        splat32,
        _mm512_set1_epi32,
        i32,
        shr32,
        _mm512_srl_epi32,
        shl32,
        _mm512_sll_epi32,
        sub32,
        _mm512_sub_epi32,
        le32,
        _mm512_cmple_epu32_mask,
        gt32,
        _mm512_cmpgt_epu32_mask
    );
    ops!(
        u16,
        splat16,
        _mm512_set1_epi16,
        i16,
        shr16,
        _mm512_srl_epi16,
        shl16,
        _mm512_sll_epi16,
        sub16,
        _mm512_sub_epi16,
        le16,
        _mm512_cmple_epu16_mask,
        gt16,
        _mm512_cmpgt_epu16_mask
    );

    // Bytes: no 8-bit shifts, so shift 16-bit words and clear the bits that crossed bytes.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw")]
    fn splat8(x: u8) -> __m512i {
        _mm512_set1_epi8(x as i8)
    }
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw")]
    fn shr8(a: __m512i, s: u32) -> __m512i {
        _mm512_and_si512(_mm512_srl_epi16(a, count(s)), splat8(0xFF >> s))
    }
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw")]
    fn shl8(a: __m512i, s: u32) -> __m512i {
        _mm512_and_si512(_mm512_sll_epi16(a, count(s)), splat8((0xFFu32 << s) as u8))
    }
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw")]
    fn sub8(a: __m512i, b: __m512i) -> __m512i {
        _mm512_sub_epi8(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw")]
    fn le8(a: __m512i, b: __m512i) -> u64 {
        _mm512_cmple_epu8_mask(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw")]
    fn gt8(a: __m512i, b: __m512i) -> u64 {
        _mm512_cmpgt_epu8_mask(a, b)
    }

    kernel!(fused_u8, u8, splat8, shr8, shl8, sub8, le8, gt8);
    kernel!(fused_u16, u16, splat16, shr16, shl16, sub16, le16, gt16);
    kernel!(fused_u32, u32, splat32, shr32, shl32, sub32, le32, gt32);
    kernel!(fused_u64, u64, splat64, shr64, shl64, sub64, le64, gt64);

    /// Whether the CPU runs these kernels.
    pub(super) fn available() -> bool {
        std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
    }
}

/// The fused kernels written with AVX2: a row of one vector is four 256-bit registers, each
/// compared at once (unsigned `<=` as `min(a, b) == a`, or as a signed compare with the
/// sign bits flipped for 64-bit lanes) and its lane masks gathered into bits with a
/// `movemask`. The portable kernels compiled for AVX2 leave LLVM to assemble those bits,
/// which it does a bit at a time.
#[cfg(target_arch = "x86_64")]
mod fused256 {
    use std::arch::x86_64::*;
    use std::mem::MaybeUninit;

    macro_rules! kernel {
        ($name:ident, $row:ident, $t:ty, $splat:ident, $shr:ident, $shl:ident, $sub:ident,
         $le:ident, $bits:ident) => {
            /// The `width`-bit fields of row `row` of every lane (`vmask` keeps `width` bits),
            /// in four registers: lanes `h * V ..` in register `h`.
            #[inline]
            #[target_feature(enable = "avx2")]
            fn $row(packed: &[$t], width: usize, row: usize, vmask: __m256i) -> [__m256i; 4] {
                const T: usize = <$t>::BITS as usize;
                const LANES: usize = 1024 / T;
                const V: usize = 256 / T;
                let bit = row * width;
                let (k, s) = (bit / T, bit % T);
                let lo = &packed[k * LANES..(k + 1) * LANES];
                let spill = s + width > T;
                let hi = if spill {
                    &packed[(k + 1) * LANES..(k + 2) * LANES]
                } else {
                    lo
                };
                let mut v = [_mm256_setzero_si256(); 4];
                for (h, v) in v.iter_mut().enumerate() {
                    // SAFETY: `lo` and `hi` hold `LANES == 4 * V` values; this reads values
                    // `h * V .. (h + 1) * V` of each (unaligned loads).
                    let (a, b) = unsafe {
                        (
                            _mm256_loadu_si256(lo.as_ptr().add(h * V).cast()),
                            _mm256_loadu_si256(hi.as_ptr().add(h * V).cast()),
                        )
                    };
                    let mut x = $shr(a, s as u32);
                    if spill {
                        x = _mm256_or_si256(x, $shl(b, (T - s) as u32));
                    }
                    *v = _mm256_and_si256(x, vmask);
                }
                v
            }

            /// As the portable kernel of the same type.
            #[target_feature(enable = "avx2")]
            pub(super) fn $name(
                packed: &[$t],
                width: usize,
                l: $t,
                span: $t,
                limit: $t,
                out: &mut [u64; 16],
            ) -> bool {
                const T: usize = <$t>::BITS as usize;
                const LANES: usize = 1024 / T;
                let fmask: $t = if width >= T {
                    <$t>::MAX
                } else {
                    ((1 as $t) << width) - 1
                };
                let (vl, vspan, vlim, vmask) =
                    ($splat(l), $splat(span), $splat(limit), $splat(fmask));
                let ones = _mm256_set1_epi8(-1);
                let mut over = _mm256_setzero_si256();
                // Without a code bound to check, skip that compare.
                let check = limit != <$t>::MAX;
                *out = [0; 16];
                for row in 0..T {
                    let base = fastlanes::FL_ORDER[row / 8] * 16 + (row % 8) * 128;
                    let mut m = [_mm256_setzero_si256(); 4];
                    for (m, &v) in m.iter_mut().zip(&$row(packed, width, row, vmask)) {
                        *m = $le($sub(v, vl), vspan);
                        if check {
                            over = _mm256_or_si256(over, _mm256_xor_si256($le(v, vlim), ones));
                        }
                    }
                    let bits: u128 = $bits(&m);
                    if LANES >= 64 {
                        // One word (16-bit lanes) or two (bytes).
                        out[base / 64] |= bits as u64;
                        if LANES == 128 {
                            out[base / 64 + 1] |= (bits >> 64) as u64;
                        }
                    } else {
                        out[base / 64] |= (bits as u64) << (base % 64);
                    }
                }
                _mm256_testz_si256(over, over) == 0
            }
        };
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    fn count(s: u32) -> __m128i {
        _mm_cvtsi32_si128(s as i32)
    }

    macro_rules! ops {
        ($t:ty, $splat:ident, $set1:ident, $st:ty, $shr:ident, $srl:ident, $shl:ident, $sll:ident,
         $sub:ident, $vsub:ident) => {
            #[inline]
            #[target_feature(enable = "avx2")]
            fn $splat(x: $t) -> __m256i {
                $set1(x as $st)
            }
            #[inline]
            #[target_feature(enable = "avx2")]
            fn $shr(a: __m256i, s: u32) -> __m256i {
                $srl(a, count(s))
            }
            #[inline]
            #[target_feature(enable = "avx2")]
            fn $shl(a: __m256i, s: u32) -> __m256i {
                $sll(a, count(s))
            }
            #[inline]
            #[target_feature(enable = "avx2")]
            fn $sub(a: __m256i, b: __m256i) -> __m256i {
                $vsub(a, b)
            }
        };
    }

    ops!(
        u64,
        splat64,
        _mm256_set1_epi64x,
        i64,
        shr64,
        _mm256_srl_epi64,
        shl64,
        _mm256_sll_epi64,
        sub64,
        _mm256_sub_epi64
    );
    ops!(
        u32,
        splat32,
        _mm256_set1_epi32,
        i32,
        shr32,
        _mm256_srl_epi32,
        shl32,
        _mm256_sll_epi32,
        sub32,
        _mm256_sub_epi32
    );
    ops!(
        u16,
        splat16,
        _mm256_set1_epi16,
        i16,
        shr16,
        _mm256_srl_epi16,
        shl16,
        _mm256_sll_epi16,
        sub16,
        _mm256_sub_epi16
    );

    // Bytes: no 8-bit shifts, so shift 16-bit words and clear the bits that crossed bytes.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn splat8(x: u8) -> __m256i {
        _mm256_set1_epi8(x as i8)
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    fn shr8(a: __m256i, s: u32) -> __m256i {
        _mm256_and_si256(_mm256_srl_epi16(a, count(s)), splat8(0xFF >> s))
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    fn shl8(a: __m256i, s: u32) -> __m256i {
        _mm256_and_si256(_mm256_sll_epi16(a, count(s)), splat8((0xFFu32 << s) as u8))
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    fn sub8(a: __m256i, b: __m256i) -> __m256i {
        _mm256_sub_epi8(a, b)
    }

    // Unsigned `a <= b` as lane masks.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn le8(a: __m256i, b: __m256i) -> __m256i {
        _mm256_cmpeq_epi8(_mm256_min_epu8(a, b), a)
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    fn le16(a: __m256i, b: __m256i) -> __m256i {
        _mm256_cmpeq_epi16(_mm256_min_epu16(a, b), a)
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    fn le32(a: __m256i, b: __m256i) -> __m256i {
        _mm256_cmpeq_epi32(_mm256_min_epu32(a, b), a)
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    fn le64(a: __m256i, b: __m256i) -> __m256i {
        let sign = _mm256_set1_epi64x(i64::MIN);
        let gt = _mm256_cmpgt_epi64(_mm256_xor_si256(a, sign), _mm256_xor_si256(b, sign));
        _mm256_xor_si256(gt, _mm256_set1_epi8(-1))
    }

    // Four registers' lane masks as `LANES` bits, register `h`'s lanes at `h * V`.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn bits8(m: &[__m256i; 4]) -> u128 {
        m.iter().enumerate().fold(0u128, |acc, (h, &x)| {
            acc | u128::from(_mm256_movemask_epi8(x) as u32) << (32 * h)
        })
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    fn bits16(m: &[__m256i; 4]) -> u128 {
        // Packing two registers of 16-bit masks into bytes interleaves their 128-bit halves;
        // the permute puts them back in order.
        let pair = |a: __m256i, b: __m256i| {
            let packed = _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_packs_epi16(a, b));
            u128::from(_mm256_movemask_epi8(packed) as u32)
        };
        pair(m[0], m[1]) | (pair(m[2], m[3]) << 32)
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    fn bits32(m: &[__m256i; 4]) -> u128 {
        m.iter().enumerate().fold(0u128, |acc, (h, &x)| {
            acc | u128::from(_mm256_movemask_ps(_mm256_castsi256_ps(x)) as u32) << (8 * h)
        })
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    fn bits64(m: &[__m256i; 4]) -> u128 {
        m.iter().enumerate().fold(0u128, |acc, (h, &x)| {
            acc | u128::from(_mm256_movemask_pd(_mm256_castsi256_pd(x)) as u32) << (4 * h)
        })
    }

    kernel!(fused_u8, row8, u8, splat8, shr8, shl8, sub8, le8, bits8);
    kernel!(
        fused_u16, row16, u16, splat16, shr16, shl16, sub16, le16, bits16
    );
    kernel!(
        fused_u32, row32, u32, splat32, shr32, shl32, sub32, le32, bits32
    );
    kernel!(
        fused_u64_wide,
        row64,
        u64,
        splat64,
        shr64,
        shl64,
        sub64,
        le64,
        bits64
    );

    /// As the portable kernel of the same type. Fields of up to 32 bits compared against a
    /// range that does not wrap are compared in 32-bit lanes: each lane's stream of 64-bit
    /// words holds the same bits as a stream of twice as many 32-bit words (low half first),
    /// so the words are split into halves once, and every row is then two registers of eight
    /// fields (not four of four narrowed row by row), with no 64-bit unsigned compare.
    #[target_feature(enable = "avx2")]
    pub(super) fn fused_u64(
        packed: &[u64],
        width: usize,
        l: u64,
        span: u64,
        limit: u64,
        out: &mut [u64; 16],
    ) -> bool {
        const LANES: usize = 16;
        let max = u64::from(u32::MAX);
        let Some(hi) = l.checked_add(span) else {
            return fused_u64_wide(packed, width, l, span, limit, out);
        };
        if width == 0 || width > 32 || l > max || packed.len() != LANES * width {
            return fused_u64_wide(packed, width, l, span, limit, out);
        }
        // Fields below 2^32: the range past u32::MAX and a code bound past it change nothing.
        let (l32, span32, lim32) = (l as u32, (hi.min(max) - l) as u32, limit.min(max) as u32);
        let fmask = if width == 32 {
            u32::MAX
        } else {
            (1u32 << width) - 1
        };
        let (vl, vspan, vlim) = (splat32(l32), splat32(span32), splat32(lim32));
        let vmask = splat32(fmask);
        let ones = _mm256_set1_epi8(-1);
        let mut over = _mm256_setzero_si256();
        let check = limit < max;
        // Even 32-bit elements of two registers are their words' low halves, odd ones the
        // high halves; the permute restores lane order across the 128-bit halves.
        let split = |x: __m256, y: __m256| {
            let lo = _mm256_shuffle_ps::<0b10_00_10_00>(x, y);
            let hi = _mm256_shuffle_ps::<0b11_01_11_01>(x, y);
            (
                _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_castps_si256(lo)),
                _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_castps_si256(hi)),
            )
        };
        // halves[2k + h][g]: half `h` (0 low, 1 high) of word `k` of lanes `8g .. 8g + 8`.
        // Only the first `2 * width` are written and read: zeroing all 4 KiB cost more than
        // the rows' compares at narrow widths.
        let mut halves = [MaybeUninit::<[__m256i; 2]>::uninit(); 64];
        for k in 0..width {
            let at = |g: usize| {
                // SAFETY: `packed.len() == 16 * width` (checked above) and `k < width`: words
                // `16k + 4g .. 16k + 4g + 4` are in bounds for `g < 4`.
                let p = unsafe { packed.as_ptr().add(LANES * k + 4 * g) };
                // SAFETY: `p` points at four readable words (above).
                _mm256_castsi256_ps(unsafe { _mm256_loadu_si256(p.cast()) })
            };
            let ((lo0, hi0), (lo1, hi1)) = (split(at(0), at(1)), split(at(2), at(3)));
            halves[2 * k].write([lo0, lo1]);
            halves[2 * k + 1].write([hi0, hi1]);
        }
        *out = [0; 16];
        for row in 0..64 {
            let base = fastlanes::FL_ORDER[row / 8] * 16 + (row % 8) * 128;
            let bit = row * width;
            let (k, s) = (bit / 32, (bit % 32) as u32);
            // SAFETY: `k < 2 * width` (bit < 64 * width): written above.
            let lo = unsafe { halves[k].assume_init() };
            let mut n = [shr32(lo[0], s), shr32(lo[1], s)];
            if s as usize + width > 32 {
                // The last field ends at bit 64 * width, the end of half 2 * width - 1, so a
                // field that spills reads a half that was filled.
                // SAFETY: as just said, `k + 1 < 2 * width`.
                let up = unsafe { halves[k + 1].assume_init() };
                n[0] = _mm256_or_si256(n[0], shl32(up[0], 32 - s));
                n[1] = _mm256_or_si256(n[1], shl32(up[1], 32 - s));
            }
            let (n0, n1) = (_mm256_and_si256(n[0], vmask), _mm256_and_si256(n[1], vmask));
            let (m0, m1) = (le32(sub32(n0, vl), vspan), le32(sub32(n1, vl), vspan));
            let bits = _mm256_movemask_ps(_mm256_castsi256_ps(m0)) as u64
                | ((_mm256_movemask_ps(_mm256_castsi256_ps(m1)) as u64) << 8);
            out[base / 64] |= bits << (base % 64);
            if check {
                let fits = _mm256_and_si256(le32(n0, vlim), le32(n1, vlim));
                over = _mm256_or_si256(over, _mm256_xor_si256(fits, ones));
            }
        }
        _mm256_testz_si256(over, over) == 0
    }

    /// Whether the CPU runs these kernels.
    pub(super) fn available() -> bool {
        std::arch::is_x86_feature_detected!("avx2")
    }
}

/// `bits` as one byte per value (`mask[i] = bit i`), for the first `n` values.
pub fn bits_to_mask(bits: &[u64; 16], n: usize, mask: &mut [u8]) {
    for (i, m) in mask[..n].iter_mut().enumerate() {
        *m = ((bits[i / 64] >> (i % 64)) & 1) as u8;
    }
}

impl ChunkColumn<'_> {
    /// `lo <= v <= hi` mapped into this chunk's packed domain, or `None` when the chunk is not
    /// packed (or is a dictionary whose passing codes are not one contiguous run): then
    /// [`ChunkColumn::filter`] serves. `table` is the chunk's [`ChunkColumn::code_table`].
    pub fn packed_range(&self, lo: i64, hi: i64, table: Option<&[u8]>) -> Option<PackedRange> {
        match &self.source {
            Source::Packed(p) => {
                let base = p.exact_base?;
                let top = if p.width == 0 {
                    0
                } else {
                    (1i128 << p.width) - 1
                };
                let plo = (i128::from(lo) - base).max(0);
                let phi = (i128::from(hi) - base).min(top);
                let empty = plo > phi;
                Some(PackedRange {
                    l: if empty { 0 } else { plo as u64 },
                    span: if empty { 0 } else { (phi - plo) as u64 },
                    empty,
                    dict_len: None,
                    selectivity: if empty {
                        0.0
                    } else {
                        (phi - plo + 1) as f64 / (top + 1) as f64
                    },
                })
            }
            Source::Dict {
                codes,
                values: DictValues::Ints(v),
            } => {
                let t = table?;
                let check = codes.width >= 64 || (1u128 << codes.width) > v.len() as u128;
                let dict_len = check.then_some(v.len());
                let t = &t[..v.len().min(t.len())];
                if !t.contains(&1) {
                    return Some(PackedRange {
                        l: 0,
                        span: 0,
                        empty: true,
                        dict_len,
                        selectivity: 0.0,
                    });
                }
                let (l, h) = code_range(t)?;
                Some(PackedRange {
                    l,
                    span: h - l,
                    empty: false,
                    dict_len,
                    selectivity: (h - l + 1) as f64 / v.len().max(1) as f64,
                })
            }
            _ => None,
        }
    }

    /// ANDs `r` for the `n` values of block `b` into the bitmask `bits` (bit `i % 64` of word
    /// `i / 64` is value `i`); bits past `n` are cleared. `r` must come from this column's
    /// [`ChunkColumn::packed_range`].
    pub fn range_bits(
        &self,
        b: usize,
        n: usize,
        r: &PackedRange,
        bits: &mut [u64; 16],
    ) -> Result<()> {
        let p = match &self.source {
            Source::Packed(p) => p,
            Source::Dict { codes, .. } => codes,
            _ => return Err(Error::invalid("packed range on an unpacked column")),
        };
        let check = r.dict_len;
        if r.empty && check.is_none() {
            *bits = [0; 16];
            return Ok(());
        }
        let (l, span) = (r.l, r.span);
        let mut out = [0u64; 16];
        let bad = if p.width == 0 {
            // Every value is 0.
            out = [if l == 0 { u64::MAX } else { 0 }; 16];
            false
        } else {
            let limit = check.map_or(u64::MAX, |len| (len as u64).saturating_sub(1));
            // Words of one vector: 1024 values at `width` bits.
            let per = |bytes: usize| BLOCK * p.width / 8 / bytes;
            macro_rules! go {
                ($w:expr, $t:ty, $kernel:ident) => {{
                    let per = per(size_of::<$t>());
                    let src = &$w[b * per..(b + 1) * per];
                    let limit = limit.min(<$t>::MAX as u64) as $t;
                    #[cfg(target_arch = "x86_64")]
                    if fused512::available() {
                        // SAFETY: the CPU supports AVX-512F/BW (checked just above).
                        unsafe {
                            fused512::$kernel(src, p.width, l as $t, span as $t, limit, &mut out)
                        }
                    } else if fused256::available() {
                        // SAFETY: the CPU supports AVX2 (checked just above).
                        unsafe {
                            fused256::$kernel(src, p.width, l as $t, span as $t, limit, &mut out)
                        }
                    } else {
                        fused_dispatch!(
                            $kernel, $t, src, p.width, l as $t, span as $t, limit, &mut out
                        )
                    }
                    #[cfg(not(target_arch = "x86_64"))]
                    fused_dispatch!(
                        $kernel, $t, src, p.width, l as $t, span as $t, limit, &mut out
                    )
                }};
            }
            match &p.words {
                Words::U8(w) => go!(w, u8, fused_u8),
                Words::U16(w) => go!(w, u16, fused_u16),
                Words::U32(w) => go!(w, u32, fused_u32),
                Words::U64(w) => go!(w, u64, fused_u64),
            }
        };
        if check.is_some() && bad {
            return Err(Error::corrupt(format!(
                "dictionary code past the dictionary's {} entries",
                check.unwrap_or(0)
            )));
        }
        for (x, &o) in bits.iter_mut().zip(&out) {
            *x &= o;
        }
        if n < BLOCK {
            for (i, x) in bits.iter_mut().enumerate() {
                let keep = n.saturating_sub(i * 64).min(64);
                *x &= if keep == 64 {
                    u64::MAX
                } else {
                    (1u64 << keep) - 1
                };
            }
        }
        if r.empty {
            *bits = [0; 16];
        }
        Ok(())
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
        node.expect_shape("for", 0, 1)?;
        let mut meta = node.meta_reader();
        let reference = meta.u64("reference")?;
        meta.finish("for")?;
        (&node.children[0], reference)
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

#[cfg(test)]
mod tests {
    use super::*;

    macro_rules! kernel_test {
        ($test:ident, $t:ty, $kernel:ident) => {
            #[test]
            fn $test() {
                const T: usize = <$t>::BITS as usize;
                let mut seed = 0x9e37_79b9_7f4a_7c15u64;
                let mut next = || {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    seed
                };
                for width in 1..=T {
                    let top = if width == T {
                        u64::from(<$t>::MAX)
                    } else {
                        (1u64 << width) - 1
                    };
                    let values: Vec<$t> = (0..BLOCK).map(|_| (next() & top) as $t).collect();
                    let mut packed = vec![0 as $t; BLOCK * width / T];
                    // SAFETY: 1024 inputs, `1024 * width / T` outputs, width <= T.
                    unsafe { <$t as BitPacking>::unchecked_pack(width, &values, &mut packed) };
                    for _ in 0..4 {
                        let (a, b) = ((next() & top) as $t, (next() & top) as $t);
                        let (l, span) = (a.min(b), a.max(b) - a.min(b));
                        let limit = (next() & top) as $t;
                        let mut want = [0u64; 16];
                        for (i, &v) in values.iter().enumerate() {
                            if v.wrapping_sub(l) <= span {
                                want[i / 64] |= 1 << (i % 64);
                            }
                        }
                        let want_bad = values.iter().any(|&v| v > limit);
                        let mut got = [0u64; 16];
                        let bad = $kernel(&packed, width, l, span, limit, &mut got);
                        assert_eq!((got, bad), (want, want_bad), "width {width}");
                        let mut got = [0u64; 16];
                        let out = &mut got;
                        let bad = fused_dispatch!($kernel, $t, &packed, width, l, span, limit, out);
                        assert_eq!((got, bad), (want, want_bad), "width {width}, dispatched");
                        #[cfg(target_arch = "x86_64")]
                        if fused512::available() {
                            let mut got = [0u64; 16];
                            // SAFETY: the CPU supports AVX-512F/BW (checked just above).
                            let bad = unsafe {
                                fused512::$kernel(&packed, width, l, span, limit, &mut got)
                            };
                            assert_eq!((got, bad), (want, want_bad), "width {width}, AVX-512");
                        }
                        #[cfg(target_arch = "x86_64")]
                        if fused256::available() {
                            let mut got = [0u64; 16];
                            // SAFETY: the CPU supports AVX2 (checked just above).
                            let bad = unsafe {
                                fused256::$kernel(&packed, width, l, span, limit, &mut got)
                            };
                            assert_eq!((got, bad), (want, want_bad), "width {width}, AVX2");
                        }
                    }
                }
            }
        };
    }

    kernel_test!(fused_u8_matches_brute_force, u8, fused_u8);
    kernel_test!(fused_u16_matches_brute_force, u16, fused_u16);
    kernel_test!(fused_u32_matches_brute_force, u32, fused_u32);
    kernel_test!(fused_u64_matches_brute_force, u64, fused_u64);
}
