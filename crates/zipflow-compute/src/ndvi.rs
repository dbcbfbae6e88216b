//! Fused two-band raster aggregates (NDVI) and the one-column fused SUM over bit-packed data.
//!
//! NDVI = (N - R) / (N + R) for a near-infrared band N and a red band R. The kernels read the
//! two bands' chunks in lockstep, 1024 pixels (one FastLanes vector) at a time: each band's
//! vector is unpacked (and its frame of reference added, and its patched exceptions written)
//! into a 2 KiB stack buffer that stays in L1, and the pair is folded into the aggregate at
//! once. Decoded bands are never written to memory. Chunks run in parallel.
//!
//! Operations ([`Op`]):
//! - `sum`: SUM(NDVI) with exact f32 division per pixel (IEEE, correctly rounded), summed in
//!   f32 lanes within a vector and in f64 across vectors.
//! - `sum-recip`: the division replaced by the hardware reciprocal estimate and a multiply
//!   (`vrcp14ps`, relative error below 2^-14, on CPUs with AVX-512; `vrcpps`, below
//!   1.5 * 2^-12, on the others).
//! - `sum-newton`: the estimate refined by one Newton step, `x' = x * (2 - s * x)` (relative
//!   error about 2^-22 or less).
//! - `count`: COUNT(NDVI > t) without division: for `t = k / 10000` (a decimal with at most
//!   four fractional digits), `(N - R) / (N + R) > t` is `N * (10000 - k) > R * (10000 + k)`,
//!   exact in 32-bit integers for |t| <= 1.
//! - `sum-nr`: SUM(N + R) in integers, the lightest two-band case.
//!
//! Pixels with N + R == 0 (both bands 0: no data in Sentinel-2 products) have no NDVI: SUM
//! skips them (adds 0) and COUNT never counts them, for any t. The integer rule gives that
//! for free (`0 > 0` is false), and it equals the f64 reference `(N - R) as f64 / (N + R) as
//! f64 > t`, for which 0 / 0 is NaN and every comparison with NaN is false.
//!
//! Why the integer COUNT equals the f64 division COUNT for every u16 pair: with s = N + R in
//! 1..=131070, the exact quotient q = (N - R) / s and t = k / 10000 are either equal or differ
//! by at least 1 / (10000 * s) >= 7.6e-10, far more than the f64 rounding of q and of t
//! (< 2^-53 relative, both |q|, |t| <= 1 here; |t| > 1 makes both sides constant). So rounding
//! cannot move q across t; when q == t exactly, both round to the same double and `>` is false
//! on both sides. (In f32 the rounding, up to 3e-8, can cross t: f32 division is not a
//! reference for COUNT.) `tests/ndvi.rs` checks this over all 2^32 pairs for several t.
//!
//! Chunk shapes read in the packed domain: `bitpack`, `for | bitpack`, `patch | bitpack`,
//! `for | patch | bitpack`. Any other plan is decoded chunk by chunk through
//! [`zipflow_encodings::decode`] (correct, not fused).
//!
//! The one-column kernels [`packed_sum`] and [`plain_sum`] are the baseline of the same idea:
//! SUM over a bit-packed u32 column, fused into the unpacking loop, vs SUM over plain u32.

use std::borrow::Cow;

use rayon::prelude::*;
use zipflow_core::{Error, PType, Result, VECTOR_LEN, Values};
use zipflow_encodings::{NodeView, Scratch, bitpack, frame, patch};

use crate::raster::Band;

#[cfg(target_arch = "x86_64")]
mod avx512;

/// Pixels per vector.
const V: usize = VECTOR_LEN;

/// A threshold `t = k / 10000`, parsed exactly from a decimal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Threshold {
    /// `t * 10000`.
    pub k: i64,
}

impl Threshold {
    /// Parses a decimal like `0.3`, `-0.125`, `1`, `.25` (at most four fractional digits).
    pub fn parse(text: &str) -> Result<Threshold> {
        let bad = || {
            Error::invalid(format!(
                "threshold `{text}`: expected a decimal with at most 4 fractional digits"
            ))
        };
        let s = text.trim();
        let (neg, s) = match s.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, s.strip_prefix('+').unwrap_or(s)),
        };
        let (int, frac) = s.split_once('.').unwrap_or((s, ""));
        if (int.is_empty() && frac.is_empty())
            || frac.len() > 4
            || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit())
            || int.len() > 12
        {
            return Err(bad());
        }
        let whole: i64 = if int.is_empty() {
            0
        } else {
            int.parse().map_err(|_| bad())?
        };
        let mut f: i64 = if frac.is_empty() {
            0
        } else {
            frac.parse().map_err(|_| bad())?
        };
        for _ in frac.len()..4 {
            f *= 10;
        }
        let k = whole * 10000 + f;
        Ok(Threshold {
            k: if neg { -k } else { k },
        })
    }

    /// The threshold as f64 (nearest double to `k / 10000`).
    pub fn to_f64(self) -> f64 {
        self.k as f64 / 10000.0
    }
}

impl std::fmt::Display for Threshold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sign = if self.k < 0 { "-" } else { "" };
        let a = self.k.unsigned_abs();
        write!(f, "{sign}{}.{:04}", a / 10000, a % 10000)
    }
}

/// A two-band aggregate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// SUM(NDVI), exact f32 division.
    Sum,
    /// SUM(NDVI), reciprocal estimate times the difference.
    SumRecip,
    /// SUM(NDVI), reciprocal estimate plus one Newton step.
    SumNewton,
    /// COUNT(NDVI > t), integer rule.
    Count(Threshold),
    /// SUM(N + R).
    SumNr,
}

impl Op {
    /// Parses `sum`, `sum-recip`, `sum-newton`, `count` (needs `t`) or `sum-nr`.
    pub fn parse(name: &str, t: Option<&str>) -> Result<Op> {
        Ok(match name {
            "sum" => Op::Sum,
            "sum-recip" => Op::SumRecip,
            "sum-newton" => Op::SumNewton,
            "sum-nr" => Op::SumNr,
            "count" => {
                Op::Count(Threshold::parse(t.ok_or_else(|| {
                    Error::invalid("count needs a threshold (--t 0.3)")
                })?)?)
            }
            other => {
                return Err(Error::invalid(format!(
                    "unknown NDVI op `{other}` (sum, sum-recip, sum-newton, count, sum-nr)"
                )));
            }
        })
    }

    /// The op's name as [`Op::parse`] takes it.
    pub fn name(self) -> &'static str {
        match self {
            Op::Sum => "sum",
            Op::SumRecip => "sum-recip",
            Op::SumNewton => "sum-newton",
            Op::Count(_) => "count",
            Op::SumNr => "sum-nr",
        }
    }
}

/// The result of an [`Op`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Answer {
    /// SUM(NDVI) in any of its variants.
    Sum(f64),
    /// A count of pixels.
    Count(u64),
    /// SUM(N + R).
    SumNr(u64),
}

impl std::fmt::Display for Answer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Answer::Sum(s) => write!(f, "{s}"),
            Answer::Count(c) | Answer::SumNr(c) => write!(f, "{c}"),
        }
    }
}

/// Partial aggregate of some vectors.
#[derive(Debug, Clone, Copy, Default)]
struct Acc {
    f: f64,
    n: u64,
}

impl Acc {
    fn merge(self, o: Acc) -> Acc {
        Acc {
            f: self.f + o.f,
            n: self.n + o.n,
        }
    }
    fn answer(self, op: Op) -> Answer {
        match op {
            Op::Sum | Op::SumRecip | Op::SumNewton => Answer::Sum(self.f),
            Op::Count(_) => Answer::Count(self.n),
            Op::SumNr => Answer::SumNr(self.n),
        }
    }
}

/// The exact-arithmetic reference of `op` over two plain bands, one pixel at a time, in f64
/// (the SUM variants all have the same reference: the sum of correctly rounded f64 NDVIs).
pub fn reference(op: Op, nir: &[u16], red: &[u16]) -> Result<Answer> {
    check_lengths(nir.len(), red.len())?;
    let pairs = nir
        .iter()
        .zip(red)
        .map(|(&n, &r)| (f64::from(n), f64::from(r)));
    Ok(match op {
        Op::Sum | Op::SumRecip | Op::SumNewton => Answer::Sum(
            pairs
                .filter(|&(n, r)| n + r > 0.0)
                .map(|(n, r)| (n - r) / (n + r))
                .sum(),
        ),
        Op::Count(t) => {
            let t = t.to_f64();
            Answer::Count(pairs.filter(|&(n, r)| (n - r) / (n + r) > t).count() as u64)
        }
        Op::SumNr => Answer::SumNr(pairs.map(|(n, r)| (n + r) as u64).sum()),
    })
}

fn check_lengths(n: usize, r: usize) -> Result<()> {
    if n != r {
        return Err(Error::invalid(format!(
            "bands differ in size: {n} and {r} pixels"
        )));
    }
    Ok(())
}

/// A thread pool of `threads` workers (0: one per core).
pub fn pool(threads: usize) -> Result<rayon::ThreadPool> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| Error::external("starting a thread pool", e))
}

/// `op` over two uncompressed bands in memory, with the same per-vector kernels as the fused
/// path (the baseline the fused kernels are measured against).
pub fn plain(op: Op, nir: &[u16], red: &[u16], pool: &rayon::ThreadPool) -> Result<Answer> {
    check_lengths(nir.len(), red.len())?;
    // 64 vectors per task: large enough to amortise the task, small enough to balance.
    const TASK: usize = 64 * V;
    let acc = pool.install(|| {
        nir.par_chunks(TASK)
            .zip(red.par_chunks(TASK))
            .map(|(n, r)| {
                let mut acc = Acc::default();
                let mut nc = n.chunks_exact(V);
                let mut rc = r.chunks_exact(V);
                for (a, b) in (&mut nc).zip(&mut rc) {
                    kernel(op, as_vector(a), as_vector(b), &mut acc);
                }
                let (nt, rt) = (nc.remainder(), rc.remainder());
                if !nt.is_empty() {
                    let (mut a, mut b) = ([0u16; V], [0u16; V]);
                    a[..nt.len()].copy_from_slice(nt);
                    b[..rt.len()].copy_from_slice(rt);
                    // Zero pixels have N + R == 0: they add nothing to any op.
                    kernel(op, &a, &b, &mut acc);
                }
                acc
            })
            .reduce(Acc::default, Acc::merge)
    });
    Ok(acc.answer(op))
}

/// Vector pairs of the window [`kernel_only`] reads: four, 16 KiB, held in L1 as the fused
/// path's two decoded vectors are.
const KERNEL_WINDOW: usize = 4;

/// `op`'s per-vector kernel alone, `vectors` times, over the first four vector pairs of the
/// bands again and again (held in L1): the rate of the arithmetic that the plain and the fused
/// paths both do, without their reads. The fused path runs this kernel on every pixel, from
/// vectors it has just decoded into L1, and decodes the bands besides, so no plan can make it
/// faster than this.
pub fn kernel_only(
    op: Op,
    nir: &[u16],
    red: &[u16],
    vectors: usize,
    pool: &rayon::ThreadPool,
) -> Result<Answer> {
    check_lengths(nir.len(), red.len())?;
    let window = (nir.len() / V).min(KERNEL_WINDOW);
    if window == 0 {
        return Err(Error::invalid(format!(
            "the bands hold {} pixels, less than one vector of {V}",
            nir.len()
        )));
    }
    // 64 vectors per task, as in `plain`.
    const TASK: usize = 64;
    let acc = pool.install(|| {
        (0..vectors.div_ceil(TASK))
            .into_par_iter()
            .map(|task| {
                let mut acc = Acc::default();
                for i in task * TASK..((task + 1) * TASK).min(vectors) {
                    let w = (i % window) * V;
                    kernel(
                        op,
                        as_vector(&nir[w..w + V]),
                        as_vector(&red[w..w + V]),
                        &mut acc,
                    );
                }
                acc
            })
            .reduce(Acc::default, Acc::merge)
    });
    Ok(acc.answer(op))
}

fn as_vector(s: &[u16]) -> &[u16; V] {
    match s.try_into() {
        Ok(a) => a,
        // chunks_exact(V) yields only slices of V values.
        Err(_) => unreachable!("a vector slice of {} values", s.len()),
    }
}

/// `op` over two raster bands stored in zipflow files, fused: chunk by chunk in parallel, each
/// vector of both bands unpacked into L1 and consumed at once.
///
/// The bands must hold the same number of pixels in the same chunking (as `zipflow raster
/// compress` writes them); their width and height must agree.
pub fn fused(op: Op, nir: &Band, red: &Band, pool: &rayon::ThreadPool) -> Result<Answer> {
    if (nir.width, nir.height) != (red.width, red.height) {
        return Err(Error::invalid(format!(
            "bands differ in size: {} x {} and {} x {}",
            nir.width, nir.height, red.width, red.height
        )));
    }
    let chunks = nir.file.num_chunks();
    if red.file.num_chunks() != chunks || red.file.chunk_rows() != nir.file.chunk_rows() {
        return Err(Error::unsupported(format!(
            "the bands are chunked differently ({} and {} rows per chunk); write both with \
             `zipflow raster compress`",
            nir.file.chunk_rows(),
            red.file.chunk_rows()
        )));
    }
    let acc = pool.install(|| {
        (0..chunks)
            .into_par_iter()
            .map(|c| fused_chunk(op, nir, red, c))
            .try_reduce(Acc::default, |a, b| Ok(a.merge(b)))
    })?;
    Ok(acc.answer(op))
}

fn fused_chunk(op: Op, nir: &Band, red: &Band, chunk: usize) -> Result<Acc> {
    let mut scratch = Scratch::default();
    let (n_bytes, rows) = chunk_values(nir, chunk)?;
    let (r_bytes, r_rows) = chunk_values(red, chunk)?;
    if rows != r_rows {
        return Err(Error::unsupported(format!(
            "chunk {chunk} holds {rows} NIR and {r_rows} red pixels"
        )));
    }
    let locate = |e: Error, b: &Band| {
        e.at_column(crate::raster::VALUE_COLUMN)
            .at_chunk(u32::try_from(chunk).unwrap_or(u32::MAX))
            .in_file(b.file.path())
    };
    let n_node = NodeView::parse(n_bytes).map_err(|e| locate(e, nir))?;
    let r_node = NodeView::parse(r_bytes).map_err(|e| locate(e, red))?;
    let n_src = Source::new(&n_node, rows, &mut scratch).map_err(|e| locate(e, nir))?;
    let r_src = Source::new(&r_node, rows, &mut scratch).map_err(|e| locate(e, red))?;
    let mut acc = Acc::default();
    let (mut nb, mut rb) = ([0u16; V], [0u16; V]);
    let (mut nc, mut rc) = (0usize, 0usize);
    for v in 0..bitpack::vectors(rows) {
        n_src.fill(v, &mut nb, &mut nc);
        r_src.fill(v, &mut rb, &mut rc);
        kernel(op, &nb, &rb, &mut acc);
    }
    Ok(acc)
}

/// The values tree of a chunk of a band's pixel column, and its row count.
fn chunk_values(band: &Band, chunk: usize) -> Result<(&[u8], usize)> {
    let (payload, meta) = band.file.chunk_payload(band.column, chunk)?;
    if meta.validity_len != 0 {
        return Err(Error::unsupported("raster bands with null pixels"));
    }
    let rows = meta.rows as usize;
    let values = payload
        .get(..meta.values_len as usize)
        .ok_or_else(|| Error::corrupt("values tree is longer than the chunk payload"))?;
    Ok((values, rows))
}

fn words_of<'a, U: bytemuck::Pod>(bytes: &'a [u8]) -> Result<Cow<'a, [U]>> {
    let size = size_of::<U>();
    if !bytes.len().is_multiple_of(size) {
        return Err(Error::corrupt("buffer is not a whole number of words"));
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

/// One band's chunk as a source of 1024-pixel vectors.
enum Source<'a> {
    /// `[for |] [patch |] bitpack`: value = reference + packed, exceptions overwritten.
    Packed {
        words: Cow<'a, [u16]>,
        /// The unpacker of `width`, chosen once for the chunk.
        unpack: UnpackFn,
        width: usize,
        reference: u16,
        positions: Cow<'a, [u32]>,
        exceptions: Cow<'a, [u16]>,
        len: usize,
    },
    /// Any other plan, decoded whole.
    Decoded(Vec<u16>),
}

impl<'a> Source<'a> {
    fn new(node: &NodeView<'a>, rows: usize, scratch: &mut Scratch) -> Result<Source<'a>> {
        if node.ptype != PType::U16 || node.len != rows {
            return Err(Error::corrupt(format!(
                "values tree holds {} {} values, the index says {rows} u16 values",
                node.len, node.ptype
            )));
        }
        let (reference, inner) = if node.id == frame::ID {
            node.expect_shape("for", 0, 1)?;
            let mut meta = node.meta_reader();
            let r = meta.u64("reference")?;
            meta.finish("for")?;
            let r = u16::try_from(r)
                .map_err(|_| Error::corrupt(format!("for reference {r} exceeds u16")))?;
            (r, node.child(0, "offsets")?)
        } else {
            (0, node)
        };
        if inner.ptype == PType::U16
            && inner.len == rows
            && let Some(src) = Source::packed(inner, reference)?
        {
            return Ok(src);
        }
        let mut out = Values::Int(zipflow_core::IntVec::U16(Vec::new()));
        zipflow_encodings::decode(node, &mut out, scratch)?;
        match out {
            Values::Int(zipflow_core::IntVec::U16(v)) if v.len() == rows => Ok(Source::Decoded(v)),
            _ => Err(Error::corrupt(
                "raster chunk did not decode to its u16 pixels",
            )),
        }
    }

    /// `[patch |] bitpack` under an optional reference; `None` for other shapes.
    fn packed(node: &NodeView<'a>, reference: u16) -> Result<Option<Source<'a>>> {
        let (positions, exceptions, bp): (Cow<'a, [u32]>, Cow<'a, [u16]>, &NodeView<'a>) =
            if node.id == patch::ID {
                node.expect_shape("patch", 2, 1)?;
                let mut meta = node.meta_reader();
                let _width = meta.u8("bit width")?;
                let count = meta.u32("exception count")? as usize;
                meta.finish("patch")?;
                let positions = words_of::<u32>(node.buffer(0, "exception positions")?)?;
                let exceptions = words_of::<u16>(node.buffer(1, "exception values")?)?;
                if positions.len() != count || exceptions.len() != count {
                    return Err(Error::corrupt(format!(
                        "patch node holds {} positions and {} values, metadata says {count}",
                        positions.len(),
                        exceptions.len()
                    )));
                }
                patch::validate_positions(&positions, node.len)?;
                let child = node.child(0, "patched stream")?;
                if child.ptype != PType::U16 || child.len != node.len {
                    return Err(Error::corrupt("patch child is not the u16 stream"));
                }
                (positions, exceptions, child)
            } else {
                (Cow::Borrowed(&[]), Cow::Borrowed(&[]), node)
            };
        if bp.id != bitpack::ID {
            return Ok(None);
        }
        bp.expect_shape("bitpack", 1, 0)?;
        let mut meta = bp.meta_reader();
        let width = usize::from(meta.u8("bit width")?);
        meta.finish("bitpack")?;
        if width > 16 {
            return Err(Error::corrupt(format!("bit width {width} exceeds 16")));
        }
        let words = words_of::<u16>(bp.buffer(0, "packed")?)?;
        let expected = bitpack::vectors(bp.len) * V * width / 16;
        if words.len() != expected {
            return Err(Error::corrupt(format!(
                "packed buffer has {} words, {} values at {width} bits need {expected}",
                words.len(),
                bp.len
            )));
        }
        Ok(Some(Source::Packed {
            words,
            unpack: unpack_fn(width),
            width,
            reference,
            positions,
            exceptions,
            len: bp.len,
        }))
    }

    /// Writes vector `v` into `buf` (pixels past the end are 0); `cursor` is the index of the
    /// first exception not yet applied, advanced as vectors are read in order.
    #[inline]
    fn fill(&self, v: usize, buf: &mut [u16; V], cursor: &mut usize) {
        let start = v * V;
        let len = match self {
            Source::Packed {
                words,
                unpack,
                width,
                reference,
                positions,
                exceptions,
                len,
            } => {
                // Width 0 has no words: its unpacker writes the reference.
                let per = V * *width / 16;
                unpack(&words[v * per..(v + 1) * per], *reference, buf);
                let end = (start + V) as u64;
                while let (Some(&p), Some(&x)) = (positions.get(*cursor), exceptions.get(*cursor)) {
                    if u64::from(p) >= end {
                        break;
                    }
                    // Positions are strictly increasing and below `len` (validated), and
                    // vectors are read in order, so `p - start` is inside this vector.
                    buf[p as usize - start] = x.wrapping_add(*reference);
                    *cursor += 1;
                }
                *len
            }
            Source::Decoded(values) => {
                let end = values.len().min(start + V);
                buf[..end - start].copy_from_slice(&values[start..end]);
                values.len()
            }
        };
        if start + V > len {
            // Padding (or a reference added to it) must not count: zero pixels add nothing.
            buf[len.saturating_sub(start).min(V)..].fill(0);
        }
    }
}

/// Unpacks one vector of `W`-bit values plus a reference, in FastLanes order.
type UnpackFn = fn(&[u16], u16, &mut [u16; V]);

/// Unpacks one u16 vector packed at `W` bits (FastLanes layout: 64 lanes, value `row` of lane
/// `l` at bits `row * W ..` of the lane's `W` words, word `j` of lane `l` at `64 * j + l`) and
/// adds `reference`, writing logical index `FL_ORDER[row / 8] * 16 + (row % 8) * 128 + l`, the
/// order `fastlanes` unpacks to (exception positions refer to it). A copy of the crate's kernel
/// that is compiled for the CPU's vector width (the crate's own is built for baseline x86-64).
#[inline(always)]
fn unpack16<const W: usize>(packed: &[u16], reference: u16, out: &mut [u16; V]) {
    const FL_ORDER: [usize; 2] = [0, 4];
    let mask: u16 = if W == 16 { u16::MAX } else { (1u16 << W) - 1 };
    let rows: &[[u16; 64]] = bytemuck::cast_slice(packed);
    // Rows unrolled by hand so that every word index and shift is a constant.
    macro_rules! rows {
        ($($row:literal)*) => {$({
            const ROW: usize = $row;
            let bit = ROW * W;
            let (word, shift) = (bit / 16, bit % 16);
            let base = FL_ORDER[ROW / 8] * 16 + (ROW % 8) * 128;
            let dst = &mut out[base..base + 64];
            let lo = &rows[word];
            if shift + W <= 16 {
                for l in 0..64 {
                    dst[l] = ((lo[l] >> shift) & mask).wrapping_add(reference);
                }
            } else {
                let hi = &rows[word + 1];
                for l in 0..64 {
                    dst[l] = (((lo[l] >> shift) | (hi[l] << ((16 - shift) % 16))) & mask)
                        .wrapping_add(reference);
                }
            }
        })*};
    }
    rows!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15);
}

macro_rules! unpack_table {
    ($($w:literal)*) => {
        /// The unpacker for width `w` in 1..=16, compiled for AVX-512 or AVX2 when the CPU has
        /// them. `packed` must hold `64 * w` words (callers slice whole validated vectors).
        fn unpack_fn(w: usize) -> UnpackFn {
            #[cfg(target_arch = "x86_64")]
            {
                if std::arch::is_x86_feature_detected!("avx512bw") {
                    $(
                        if w == $w {
                            #[target_feature(enable = "avx512f,avx512bw")]
                            fn wide(p: &[u16], r: u16, o: &mut [u16; V]) {
                                unpack16::<$w>(p, r, o)
                            }
                            fn call(p: &[u16], r: u16, o: &mut [u16; V]) {
                                // SAFETY: chosen only after AVX-512BW was detected above.
                                unsafe { wide(p, r, o) }
                            }
                            return call;
                        }
                    )*
                }
                if std::arch::is_x86_feature_detected!("avx2") {
                    $(
                        if w == $w {
                            #[target_feature(enable = "avx2")]
                            fn avx2(p: &[u16], r: u16, o: &mut [u16; V]) {
                                unpack16::<$w>(p, r, o)
                            }
                            fn call(p: &[u16], r: u16, o: &mut [u16; V]) {
                                // SAFETY: chosen only after AVX2 was detected above.
                                unsafe { avx2(p, r, o) }
                            }
                            return call;
                        }
                    )*
                }
            }
            $(
                if w == $w {
                    return unpack16::<$w>;
                }
            )*
            // Width 0: every value is the reference (wider than 16 was rejected when
            // validating).
            |_, r, o| o.fill(r)
        }
    };
}
unpack_table!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16);

/// Folds one vector pair into `acc`, with the AVX-512 kernels ([`avx512`]) or those for AVX2
/// and FMA when the CPU has them.
#[inline]
fn kernel(op: Op, n: &[u16; V], r: &[u16; V], acc: &mut Acc) {
    #[cfg(target_arch = "x86_64")]
    {
        if avx512::available() && avx512::supports(op) {
            // SAFETY: the CPU and the op were checked just above.
            return unsafe { avx512::kernel(op, n, r, acc) };
        }
        if x86::available() {
            // SAFETY: the CPU supports AVX2 and FMA (checked just above).
            return unsafe { x86::kernel(op, n, r, acc) };
        }
    }
    match op {
        Op::SumNr => acc.n += u64::from(sum_nr(n, r)),
        Op::Count(t) => acc.n += u64::from(count_gt(n, r, t)),
        Op::Sum | Op::SumRecip | Op::SumNewton => acc.f += f64::from(sum_ndvi_portable(n, r)),
    }
}

/// SUM(N + R) of a vector: at most 1024 * 131070 < 2^32.
#[inline(always)]
fn sum_nr(n: &[u16; V], r: &[u16; V]) -> u32 {
    n.iter()
        .zip(r)
        .map(|(&a, &b)| u32::from(a) + u32::from(b))
        .fold(0u32, u32::wrapping_add)
}

/// COUNT(N * (10000 - k) > R * (10000 + k)) of a vector.
#[inline(always)]
fn count_gt(n: &[u16; V], r: &[u16; V], t: Threshold) -> u32 {
    if t.k >= 10000 {
        // NDVI <= 1 <= t.
        return 0;
    }
    if t.k < -10000 {
        // NDVI >= -1 > t for every pixel with data.
        return n.iter().zip(r).filter(|&(&a, &b)| a != 0 || b != 0).count() as u32;
    }
    // |k| <= 10000: both factors are in 0..=20000, products below 65535 * 20000 < 2^31.
    let a = (10000 - t.k) as i32;
    let b = (10000 + t.k) as i32;
    n.iter()
        .zip(r)
        .map(|(&x, &y)| u32::from(i32::from(x) * a > i32::from(y) * b))
        .sum()
}

/// The portable SUM(NDVI): exact division for every variant (the reciprocal estimate is an x86
/// instruction), eight partial sums as the AVX2 kernel's lanes.
fn sum_ndvi_portable(n: &[u16; V], r: &[u16; V]) -> f32 {
    let mut lanes = [0f32; 8];
    for (a, b) in n.chunks_exact(8).zip(r.chunks_exact(8)) {
        for i in 0..8 {
            let (x, y) = (f32::from(a[i]), f32::from(b[i]));
            // No-data pixels (x = y = 0) divide 0 by 1.
            lanes[i] += (x - y) / (x + y).max(1.0);
        }
    }
    lanes.iter().sum()
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{Acc, Op, V, count_gt, sum_nr};
    use std::arch::x86_64::*;

    /// Whether the CPU runs these kernels.
    pub(super) fn available() -> bool {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }

    /// [`super::kernel`] for AVX2 and FMA: SUM(NDVI) in four accumulators of eight f32 lanes,
    /// COUNT in 32-bit lanes; one loop per op.
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn kernel(op: Op, n: &[u16; V], r: &[u16; V], acc: &mut Acc) {
        match op {
            // The compiler's own vectorisation of the portable sum was the faster one.
            Op::SumNr => acc.n += u64::from(sum_nr(n, r)),
            Op::Count(t) if t.k.abs() <= 10000 => {
                // As in `count_gt`: factors in 0..=20000, products below 2^31.
                acc.n += u64::from(count(n, r, (10000 - t.k) as i32, (10000 + t.k) as i32))
            }
            Op::Count(t) => acc.n += u64::from(count_gt(n, r, t)),
            Op::SumRecip => acc.f += f64::from(sum_ndvi::<RECIP>(n, r)),
            Op::SumNewton => acc.f += f64::from(sum_ndvi::<NEWTON>(n, r)),
            Op::Sum => acc.f += f64::from(sum_ndvi::<DIVIDE>(n, r)),
        }
    }

    const DIVIDE: u8 = 0;
    const RECIP: u8 = 1;
    const NEWTON: u8 = 2;

    /// SUM(NDVI) of a vector, the quotient by `Q` (one of the three constants above).
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn sum_ndvi<const Q: u8>(n: &[u16; V], r: &[u16; V]) -> f32 {
        let one = _mm256_set1_ps(1.0);
        let two = _mm256_set1_ps(2.0);
        let mut lanes = [_mm256_setzero_ps(); 4];
        for i in (0..V).step_by(32) {
            for (j, a) in lanes.iter_mut().enumerate() {
                let k = i + 8 * j;
                let (x, y) = (ps8(n, k), ps8(r, k));
                // N + R is a whole number: at least 1 unless both are 0 (no data), whose
                // difference 0 divided by 1 adds nothing (no mask, no 0 / 0).
                let s = _mm256_max_ps(_mm256_add_ps(x, y), one);
                let d = _mm256_sub_ps(x, y);
                let q = match Q {
                    RECIP => _mm256_mul_ps(d, _mm256_rcp_ps(s)),
                    NEWTON => {
                        let e = _mm256_rcp_ps(s);
                        let e = _mm256_mul_ps(e, _mm256_fnmadd_ps(s, e, two));
                        _mm256_mul_ps(d, e)
                    }
                    _ => _mm256_div_ps(d, s),
                };
                *a = _mm256_add_ps(*a, q);
            }
        }
        let s = _mm256_add_ps(
            _mm256_add_ps(lanes[0], lanes[1]),
            _mm256_add_ps(lanes[2], lanes[3]),
        );
        let mut out = [0f32; 8];
        // SAFETY: `out` has room for eight f32.
        unsafe { _mm256_storeu_ps(out.as_mut_ptr(), s) };
        out.iter().sum()
    }

    /// The eight 32-bit lanes of four registers added up (wrapping).
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn total(a: &[__m256i; 4]) -> u32 {
        let s = _mm256_add_epi32(_mm256_add_epi32(a[0], a[1]), _mm256_add_epi32(a[2], a[3]));
        let mut out = [0u32; 8];
        // SAFETY: `out` has room for eight u32.
        unsafe { _mm256_storeu_si256(out.as_mut_ptr().cast(), s) };
        out.iter().fold(0u32, |a, &b| a.wrapping_add(b))
    }

    /// Eight pixels from `k` as 32-bit lanes.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn load8(b: &[u16; V], k: usize) -> __m256i {
        let s = &b[k..k + 8];
        // SAFETY: `s` holds 8 values (16 bytes).
        _mm256_cvtepu16_epi32(unsafe { _mm_loadu_si128(s.as_ptr().cast()) })
    }

    /// Eight pixels from `k` as f32 lanes.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn ps8(b: &[u16; V], k: usize) -> __m256 {
        _mm256_cvtepi32_ps(load8(b, k))
    }

    /// COUNT(N * a > R * b) of a vector (`a`, `b` in 0..=20000).
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn count(n: &[u16; V], r: &[u16; V], a: i32, b: i32) -> u32 {
        let (va, vb) = (_mm256_set1_epi32(a), _mm256_set1_epi32(b));
        let mut c = [_mm256_setzero_si256(); 4];
        for k in (0..V).step_by(32) {
            for (j, c) in c.iter_mut().enumerate() {
                let x = _mm256_mullo_epi32(load8(n, k + 8 * j), va);
                let y = _mm256_mullo_epi32(load8(r, k + 8 * j), vb);
                // A passing pixel's mask is -1: subtracting it counts it.
                *c = _mm256_sub_epi32(*c, _mm256_cmpgt_epi32(x, y));
            }
        }
        total(&c)
    }
}

// ---------------------------------------------------------------------------------------------
// One column: SUM over bit-packed u32, fused into unpacking, and over plain u32.

/// Vectors per parallel task of the one-column sums.
const SUM_TASK_VECTORS: usize = 64;

/// SUM of a bit-packed u32 column (`bitpack::pack` output at `width` bits, whole vectors, the
/// padding zero), fused: each value is extracted from the packed words straight into a lane
/// accumulator, never stored.
pub fn packed_sum(words: &[u32], width: u32, pool: &rayon::ThreadPool) -> Result<u64> {
    if width > 32 {
        return Err(Error::invalid(format!("bit width {width} exceeds 32")));
    }
    let w = width as usize;
    if w == 0 {
        return Ok(0);
    }
    let per = V * w / 32;
    if !words.len().is_multiple_of(per) {
        return Err(Error::invalid(format!(
            "{} packed words are not whole vectors of {per} words",
            words.len()
        )));
    }
    let f = sum_fn(w);
    Ok(pool.install(|| words.par_chunks(per * SUM_TASK_VECTORS).map(f).sum()))
}

/// SUM of plain u32 values (the baseline of [`packed_sum`]).
pub fn plain_sum(values: &[u32], pool: &rayon::ThreadPool) -> u64 {
    #[inline(always)]
    fn go(v: &[u32]) -> u64 {
        // 16-bit halves summed in u32 lanes (no overflow within 2^15 values), widened per
        // block: as fast as the loads, unlike a u64 widening add per value.
        let mut total = 0u64;
        for block in v.chunks(1 << 15) {
            let (mut lo, mut hi) = (0u32, 0u32);
            for &x in block {
                lo = lo.wrapping_add(x & 0xFFFF);
                hi = hi.wrapping_add(x >> 16);
            }
            total += u64::from(lo) + (u64::from(hi) << 16);
        }
        total
    }
    fn run(v: &[u32]) -> u64 {
        #[cfg(target_arch = "x86_64")]
        {
            #[target_feature(enable = "avx2")]
            fn avx2(v: &[u32]) -> u64 {
                go(v)
            }
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU supports AVX2 (checked just above).
                return unsafe { avx2(v) };
            }
        }
        go(v)
    }
    pool.install(|| values.par_chunks(V * SUM_TASK_VECTORS).map(run).sum())
}

/// The sum of whole packed vectors at one width.
type SumFn = fn(&[u32]) -> u64;

/// `sum` over each whole vector of `per` words, each vector first loaded in address order
/// ([`crate::prefetch::load_in_order`]: the unrolled extraction's own loads lose the hardware
/// prefetcher's stream).
#[inline(always)]
fn sum_in_order(words: &[u32], per: usize, sum: impl Fn(&[u32]) -> u64) -> u64 {
    words
        .chunks_exact(per)
        .map(|v| {
            crate::prefetch::load_in_order(v);
            sum(v)
        })
        .sum()
}

/// Extracts the 32 values of each lane of a vector packed at `W` bits (FastLanes layout:
/// value `row` of lane `l` occupies bits `row * W ..` of the lane's `W` words, word `j` of lane
/// `l` at index `32 * j + l`) and adds them up. Order does not matter to a sum, so the
/// FastLanes transpose is skipped.
#[inline(always)]
fn sum_vector<const W: usize>(vector: &[u32]) -> u64 {
    let mask: u32 = if W == 32 { u32::MAX } else { (1u32 << W) - 1 };
    {
        let rows: &[[u32; 32]] = bytemuck::cast_slice(vector);
        // 32 values of W <= 27 bits per lane fit a u32 lane sum; wider values are summed as
        // 16-bit halves.
        let (mut lo_acc, mut hi_acc) = ([0u32; 32], [0u32; 32]);
        // Rows unrolled by hand so that every word index and shift is a constant.
        macro_rules! rows {
            ($($row:literal)*) => {$({
                const ROW: usize = $row;
                let bit = ROW * W;
                let (word, shift) = (bit / 32, bit % 32);
                let lo = &rows[word];
                if shift + W <= 32 {
                    for l in 0..32 {
                        let v = (lo[l] >> shift) & mask;
                        if W <= 27 {
                            lo_acc[l] += v;
                        } else {
                            lo_acc[l] += v & 0xFFFF;
                            hi_acc[l] += v >> 16;
                        }
                    }
                } else {
                    let hi = &rows[word + 1];
                    for l in 0..32 {
                        let v = ((lo[l] >> shift) | (hi[l] << ((32 - shift) % 32))) & mask;
                        if W <= 27 {
                            lo_acc[l] += v;
                        } else {
                            lo_acc[l] += v & 0xFFFF;
                            hi_acc[l] += v >> 16;
                        }
                    }
                }
            })*};
        }
        rows!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31);
        let lo: u64 = lo_acc.iter().map(|&x| u64::from(x)).sum();
        let hi: u64 = hi_acc.iter().map(|&x| u64::from(x)).sum();
        lo + (hi << 16)
    }
}

macro_rules! sum_table {
    ($($w:literal)*) => {
        /// The fused sum for width `w` in 1..=32, compiled for AVX-512 or AVX2 when the CPU has
        /// them.
        fn sum_fn(w: usize) -> SumFn {
            #[cfg(target_arch = "x86_64")]
            {
                if std::arch::is_x86_feature_detected!("avx512bw") {
                    $(
                        if w == $w {
                            #[target_feature(enable = "avx512f,avx512bw")]
                            #[inline(never)]
                            fn wide(vector: &[u32]) -> u64 {
                                sum_vector::<$w>(vector)
                            }
                            fn call(words: &[u32]) -> u64 {
                                // SAFETY: chosen only after AVX-512BW was detected above.
                                sum_in_order(words, 32 * $w, |v| unsafe { wide(v) })
                            }
                            return call;
                        }
                    )*
                }
                if std::arch::is_x86_feature_detected!("avx2") {
                    $(
                        if w == $w {
                            #[target_feature(enable = "avx2")]
                            #[inline(never)]
                            fn avx2(vector: &[u32]) -> u64 {
                                sum_vector::<$w>(vector)
                            }
                            fn call(words: &[u32]) -> u64 {
                                // SAFETY: chosen only after AVX2 was detected above.
                                sum_in_order(words, 32 * $w, |v| unsafe { avx2(v) })
                            }
                            return call;
                        }
                    )*
                }
            }
            $(
                if w == $w {
                    return |words| words.chunks_exact(32 * $w).map(sum_vector::<$w>).sum();
                }
            )*
            // Width 0 is handled by the caller; widths above 32 were rejected.
            |_| 0
        }
    };
}
sum_table!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unpack_matches_fastlanes_at_every_width() {
        use fastlanes::FoR;
        let mut x = 12345u32;
        for w in 1..=16usize {
            let values: Vec<u16> = (0..V)
                .map(|_| {
                    x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                    ((x >> 8) as u16) & (((1u32 << w) - 1) as u16)
                })
                .collect();
            let packed = bitpack::pack(&values, w as u32);
            let (mut ours, mut theirs) = ([0u16; V], [0u16; V]);
            unpack_fn(w)(&packed, 7, &mut ours);
            // SAFETY: one whole vector at width w <= 16.
            unsafe { u16::unchecked_unfor_pack(w, &packed, 7, &mut theirs) };
            assert_eq!(ours, theirs, "width {w}");
            let plus: Vec<u16> = values.iter().map(|v| v.wrapping_add(7)).collect();
            assert_eq!(&ours[..], &plus[..], "width {w}");
        }
    }

    #[test]
    fn kernel_only_repeats_the_window() -> Result<()> {
        let pool = pool(2)?;
        let n: Vec<u16> = (0..5 * V).map(|i| (i * 7 % 5000) as u16).collect();
        let r: Vec<u16> = (0..5 * V).map(|i| (i * 13 % 3000) as u16).collect();
        let window = KERNEL_WINDOW * V;
        for op in [Op::SumNr, Op::Count(Threshold { k: 3000 })] {
            let once = plain(op, &n[..window], &r[..window], &pool)?;
            let three = kernel_only(op, &n, &r, 3 * KERNEL_WINDOW, &pool)?;
            match (once, three) {
                (Answer::SumNr(a), Answer::SumNr(b)) | (Answer::Count(a), Answer::Count(b)) => {
                    assert_eq!(3 * a, b, "{}", op.name())
                }
                other => panic!("{other:?}"),
            }
        }
        assert!(kernel_only(Op::SumNr, &n[..V - 1], &r[..V - 1], 1, &pool).is_err());
        Ok(())
    }

    #[test]
    fn threshold_parses_exactly() -> Result<()> {
        for (s, k) in [
            ("0.3", 3000),
            ("-0.125", -1250),
            ("1", 10000),
            (".25", 2500),
            ("0.0001", 1),
            ("-1.5", -15000),
            ("+0", 0),
        ] {
            assert_eq!(Threshold::parse(s)?.k, k, "{s}");
        }
        for s in ["", ".", "0.12345", "1e3", "--1", "0.3x"] {
            assert!(Threshold::parse(s).is_err(), "{s}");
        }
        assert_eq!(Threshold { k: -1250 }.to_string(), "-0.1250");
        Ok(())
    }

    #[test]
    fn packed_sum_matches_plain_at_every_width() -> Result<()> {
        let pool = pool(2)?;
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for width in 0..=32u32 {
            let len = 3 * V + 17;
            let mask = if width == 32 {
                u32::MAX
            } else {
                (1u32 << width) - 1
            };
            let values: Vec<u32> = (0..len)
                .map(|i| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    // Edges: all ones, zeros, then random.
                    match i % 5 {
                        0 => mask,
                        1 => 0,
                        _ => (x as u32) & mask,
                    }
                })
                .collect();
            let words = bitpack::pack(&values, width);
            let expected: u64 = values.iter().map(|&v| u64::from(v)).sum();
            assert_eq!(packed_sum(&words, width, &pool)?, expected, "w{width}");
            assert_eq!(plain_sum(&values, &pool), expected);
        }
        Ok(())
    }
}
