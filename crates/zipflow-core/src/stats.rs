//! Zone maps: per-chunk minimum, maximum and null count, used to skip chunks a predicate
//! cannot match and shown by `zipflow inspect`.

use crate::values::ByteStrings;
use crate::{Error, Int, Result, Values, match_ints};

/// A minimum or maximum.
#[derive(Debug, Clone, PartialEq)]
pub enum Scalar {
    /// Any integer type, widened.
    Int(i128),
    /// Any float type, widened (NaN is never a min or max).
    Float(f64),
    /// Byte strings (stored only up to [`MAX_STAT_BYTES`]).
    Bytes(Vec<u8>),
}

/// Longest string kept as a min or max; longer extremes are not recorded.
pub const MAX_STAT_BYTES: usize = 64;

impl std::fmt::Display for Scalar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Scalar::Int(v) => write!(f, "{v}"),
            Scalar::Float(v) if *v != 0.0 && !(1e-4..1e15).contains(&v.abs()) => write!(f, "{v:e}"),
            Scalar::Float(v) => write!(f, "{v}"),
            Scalar::Bytes(b) => write!(f, "{:?}", String::from_utf8_lossy(b)),
        }
    }
}

/// Statistics of one chunk of one column.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChunkStats {
    /// Smallest non-null value, if any and recorded.
    pub min: Option<Scalar>,
    /// Largest non-null value, if any and recorded.
    pub max: Option<Scalar>,
    /// Number of nulls.
    pub null_count: u64,
}

impl ChunkStats {
    /// Computes the statistics of `values`; `valid(i)` says whether row `i` is non-null.
    pub fn compute(values: &Values, validity: Option<&[bool]>) -> ChunkStats {
        let is_valid = |i: usize| validity.is_none_or(|v| v.get(i).copied().unwrap_or(true));
        let null_count = validity.map_or(0, |v| v.iter().filter(|b| !**b).count() as u64);
        let (min, max) = match values {
            Values::Int(v) => match_ints!(v, T, x => {
                let mut it = x.iter().enumerate().filter(|(i, _)| is_valid(*i)).map(|(_, v)| *v);
                match it.next() {
                    None => (None, None),
                    Some(first) => {
                        let (lo, hi) = it.fold((first, first), |(lo, hi), v| (lo.min(v), hi.max(v)));
                        (Some(Scalar::Int(lo.to_i128())), Some(Scalar::Int(hi.to_i128())))
                    }
                }
            }),
            Values::F32(v) => float_min_max(
                v.iter()
                    .enumerate()
                    .filter(|(i, _)| is_valid(*i))
                    .map(|(_, v)| f64::from(*v)),
            ),
            Values::F64(v) => float_min_max(
                v.iter()
                    .enumerate()
                    .filter(|(i, _)| is_valid(*i))
                    .map(|(_, v)| *v),
            ),
            Values::Bytes(b) => bytes_min_max(b, &is_valid),
        };
        ChunkStats {
            min,
            max,
            null_count,
        }
    }

    /// Serialises: null count (u64), then min and max as tagged scalars.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.null_count.to_le_bytes());
        write_scalar(self.min.as_ref(), out);
        write_scalar(self.max.as_ref(), out);
    }

    /// Parses [`ChunkStats::write`] from the front of `bytes`, advancing it.
    pub fn read(bytes: &mut &[u8]) -> Result<ChunkStats> {
        let null_count = u64::from_le_bytes(take::<8>(bytes)?);
        let min = read_scalar(bytes)?;
        let max = read_scalar(bytes)?;
        Ok(ChunkStats {
            min,
            max,
            null_count,
        })
    }
}

fn float_min_max(it: impl Iterator<Item = f64>) -> (Option<Scalar>, Option<Scalar>) {
    let mut lo: Option<f64> = None;
    let mut hi: Option<f64> = None;
    for v in it.filter(|v| !v.is_nan()) {
        lo = Some(lo.map_or(v, |l| if v.total_cmp(&l).is_lt() { v } else { l }));
        hi = Some(hi.map_or(v, |h| if v.total_cmp(&h).is_gt() { v } else { h }));
    }
    (lo.map(Scalar::Float), hi.map(Scalar::Float))
}

fn bytes_min_max(
    b: &ByteStrings,
    is_valid: &dyn Fn(usize) -> bool,
) -> (Option<Scalar>, Option<Scalar>) {
    let mut lo: Option<&[u8]> = None;
    let mut hi: Option<&[u8]> = None;
    for i in (0..b.len()).filter(|&i| is_valid(i)) {
        let Some(s) = b.get(i) else { continue };
        if lo.is_none_or(|l| s < l) {
            lo = Some(s);
        }
        if hi.is_none_or(|h| s > h) {
            hi = Some(s);
        }
    }
    let keep = |s: Option<&[u8]>| {
        s.filter(|s| s.len() <= MAX_STAT_BYTES)
            .map(|s| Scalar::Bytes(s.to_vec()))
    };
    (keep(lo), keep(hi))
}

fn take<const N: usize>(bytes: &mut &[u8]) -> Result<[u8; N]> {
    let Some((head, rest)) = bytes.split_first_chunk::<N>() else {
        return Err(Error::corrupt("statistics truncated"));
    };
    *bytes = rest;
    Ok(*head)
}

fn write_scalar(s: Option<&Scalar>, out: &mut Vec<u8>) {
    match s {
        None => out.push(0),
        Some(Scalar::Int(v)) => {
            out.push(1);
            out.extend_from_slice(&v.to_le_bytes());
        }
        Some(Scalar::Float(v)) => {
            out.push(2);
            out.extend_from_slice(&v.to_bits().to_le_bytes());
        }
        Some(Scalar::Bytes(b)) => {
            out.push(3);
            // Only strings up to MAX_STAT_BYTES are ever recorded, so the length fits a byte.
            out.push(b.len() as u8);
            out.extend_from_slice(b);
        }
    }
}

fn read_scalar(bytes: &mut &[u8]) -> Result<Option<Scalar>> {
    let [tag] = take::<1>(bytes)?;
    Ok(match tag {
        0 => None,
        1 => Some(Scalar::Int(i128::from_le_bytes(take::<16>(bytes)?))),
        2 => Some(Scalar::Float(f64::from_bits(u64::from_le_bytes(
            take::<8>(bytes)?,
        )))),
        3 => {
            let [len] = take::<1>(bytes)?;
            let len = usize::from(len);
            if len > MAX_STAT_BYTES || bytes.len() < len {
                return Err(Error::corrupt("string statistic truncated or too long"));
            }
            let (s, rest) = bytes.split_at(len);
            *bytes = rest;
            Some(Scalar::Bytes(s.to_vec()))
        }
        t => return Err(Error::corrupt(format!("unknown statistic tag {t}"))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::IntVec;

    #[test]
    fn ints_skip_nulls() {
        let v = Values::Int(IntVec::I32(vec![5, -100, 7, 3]));
        let s = ChunkStats::compute(&v, Some(&[true, false, true, true]));
        assert_eq!(s.min, Some(Scalar::Int(3)));
        assert_eq!(s.max, Some(Scalar::Int(7)));
        assert_eq!(s.null_count, 1);
        let mut buf = Vec::new();
        s.write(&mut buf);
        assert_eq!(ChunkStats::read(&mut buf.as_slice()).ok(), Some(s));
    }

    #[test]
    fn floats_ignore_nan() {
        let v = Values::F64(vec![f64::NAN, 1.5, -2.0]);
        let s = ChunkStats::compute(&v, None);
        assert_eq!(s.min, Some(Scalar::Float(-2.0)));
        assert_eq!(s.max, Some(Scalar::Float(1.5)));
    }

    #[test]
    fn truncated_is_an_error() {
        let mut buf = Vec::new();
        ChunkStats::default().write(&mut buf);
        for n in 0..buf.len() {
            assert!(ChunkStats::read(&mut &buf[..n]).is_err());
        }
    }
}
