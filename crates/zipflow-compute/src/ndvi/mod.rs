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
//! No data: pixels with N + R == 0 (both bands 0: no data in Sentinel-2 and Landsat
//! products) have no NDVI: SUM skips them (adds 0) and COUNT never counts them, for any t;
//! [`fused_counted`] also counts the pixels that have data. A band whose TIFF stated another
//! no-data value is refused by name rather than read with the wrong rule. The integer rule gives that
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
//!
//! Here: the ops, their answers and the plain, kernel-only and fused drivers; `reader` (a
//! band's chunk as 1024-pixel vectors), `kernels` (the per-vector folds, portable, AVX2 and
//! AVX-512, behind one dispatch) and `sum` (the one-column sums).

mod kernels;
mod reader;
mod sum;
#[cfg(test)]
mod tests;

use rayon::prelude::*;
use zipflow_core::{Error, Result, VECTOR_LEN};
use zipflow_encodings::{NodeView, Scratch, bitpack};
use zipflow_format::Payload;

use crate::raster::Band;

use self::kernels::kernel;
use self::reader::Source;

pub use self::sum::{packed_sum, plain_sum};

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
    /// Pixels with data, where counted.
    valid: u64,
}

impl Acc {
    fn merge(self, o: Acc) -> Acc {
        Acc {
            f: self.f + o.f,
            n: self.n + o.n,
            valid: self.valid + o.valid,
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
    Ok(fused_acc(op, nir, red, pool, false)?.answer(op))
}

/// [`fused`], and the number of pixels with data (those whose bands are not both 0), counted
/// in the same pass.
pub fn fused_counted(
    op: Op,
    nir: &Band,
    red: &Band,
    pool: &rayon::ThreadPool,
) -> Result<(Answer, u64)> {
    let acc = fused_acc(op, nir, red, pool, true)?;
    Ok((acc.answer(op), acc.valid))
}

/// The pixels with data (not both bands 0) of two plain bands: the reference of
/// [`fused_counted`]'s count.
pub fn valid_reference(nir: &[u16], red: &[u16]) -> u64 {
    nir.iter()
        .zip(red)
        .filter(|&(&n, &r)| n != 0 || r != 0)
        .count() as u64
}

fn fused_acc(
    op: Op,
    nir: &Band,
    red: &Band,
    pool: &rayon::ThreadPool,
    count_valid: bool,
) -> Result<Acc> {
    for band in [nir, red] {
        band.check_ndvi_nodata()?;
    }
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
    pool.install(|| {
        (0..chunks)
            .into_par_iter()
            .map(|c| fused_chunk(op, nir, red, c, count_valid))
            .try_reduce(Acc::default, |a, b| Ok(a.merge(b)))
    })
}

fn fused_chunk(op: Op, nir: &Band, red: &Band, chunk: usize, count_valid: bool) -> Result<Acc> {
    let mut scratch = Scratch::default();
    let (n_payload, rows) = chunk_values(nir, chunk)?;
    let (r_payload, r_rows) = chunk_values(red, chunk)?;
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
    let n_node = values_tree(&n_payload, nir, chunk).map_err(|e| locate(e, nir))?;
    let r_node = values_tree(&r_payload, red, chunk).map_err(|e| locate(e, red))?;
    let n_src = Source::new(&n_node, rows, &mut scratch).map_err(|e| locate(e, nir))?;
    let r_src = Source::new(&r_node, rows, &mut scratch).map_err(|e| locate(e, red))?;
    let mut acc = Acc::default();
    let (mut nb, mut rb) = ([0u16; V], [0u16; V]);
    let (mut nc, mut rc) = (0usize, 0usize);
    for v in 0..bitpack::vectors(rows) {
        n_src.fill(v, &mut nb, &mut nc);
        r_src.fill(v, &mut rb, &mut rc);
        kernel(op, &nb, &rb, &mut acc);
        if count_valid {
            acc.valid += u64::from(kernels::valid(&nb, &rb));
        }
    }
    Ok(acc)
}

/// The values tree in the `payload` of chunk `chunk` of a band's pixel column.
fn values_tree<'p>(payload: &'p [u8], band: &Band, chunk: usize) -> Result<NodeView<'p>> {
    let len = band.file.chunk_meta(band.column, chunk).values_len as usize;
    let tree = payload
        .get(..len)
        .ok_or_else(|| Error::corrupt("values tree is longer than the chunk payload"))?;
    NodeView::parse(tree)
}

/// The payload of a chunk of a band's pixel column, and its row count.
fn chunk_values(band: &Band, chunk: usize) -> Result<(Payload<'_>, usize)> {
    let (payload, meta) = band.file.chunk_payload(band.column, chunk)?;
    if meta.validity_len != 0 {
        return Err(Error::unsupported("raster bands with null pixels"));
    }
    Ok((payload, meta.rows as usize))
}

// ---------------------------------------------------------------------------------------------
// One column: SUM over bit-packed u32, fused into unpacking, and over plain u32.
