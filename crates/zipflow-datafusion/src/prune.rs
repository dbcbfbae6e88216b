//! Zone maps as DataFusion sees them: per-chunk min, max, null and row counts for
//! `PruningPredicate`, and table or partition statistics for the planner.

use std::collections::HashSet;
use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, UInt64Array};
use arrow::datatypes::{DataType, Field, SchemaRef, TimeUnit};
use datafusion::common::pruning::PruningStatistics;
use datafusion::common::stats::Precision;
use datafusion::common::{Column, ColumnStatistics, ScalarValue, Statistics};
use zipflow_core::stats::{ChunkStats, Scalar};
use zipflow_format::ZfFile;

/// One chunk (row group) of one file of a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ChunkRef {
    /// Index of the file in the table.
    pub file: usize,
    /// Index of the row group in the file.
    pub chunk: usize,
    /// Rows in the row group.
    pub rows: usize,
}

/// Every chunk of every file, in file and row order.
pub(crate) fn all_chunks(files: &[Arc<ZfFile>]) -> Vec<ChunkRef> {
    let mut out = Vec::new();
    for (f, file) in files.iter().enumerate() {
        let chunk_rows = file.chunk_rows();
        for c in 0..file.num_chunks() {
            let first = c as u64 * chunk_rows;
            let rows = chunk_rows.min(file.num_rows().saturating_sub(first));
            out.push(ChunkRef {
                file: f,
                chunk: c,
                rows: usize::try_from(rows).unwrap_or(usize::MAX),
            });
        }
    }
    out
}

/// The zone maps of a list of chunks, one pruning container per chunk.
pub(crate) struct ChunkStatistics<'a> {
    /// The table's files.
    pub files: &'a [Arc<ZfFile>],
    /// The table's schema (every file has it).
    pub schema: &'a SchemaRef,
    /// The chunks, in container order.
    pub chunks: &'a [ChunkRef],
}

impl ChunkStatistics<'_> {
    /// The zone map of column `col` of `chunk`, if the footer has one.
    fn stats(&self, col: usize, chunk: &ChunkRef) -> Option<&ChunkStats> {
        let file = self.files.get(chunk.file)?;
        file.try_chunk_meta(col, chunk.chunk).ok().map(|m| &m.stats)
    }

    /// Per-chunk min or max of `column` as an array of its type; unknown entries are null.
    fn bounds(&self, column: &Column, max: bool) -> Option<ArrayRef> {
        let col = self.schema.index_of(&column.name).ok()?;
        let field = self.schema.field(col);
        // A float zone map leaves NaN out, and in DataFusion's order NaN is above every
        // value (and a negative NaN below): its bounds do not bound the chunk.
        if matches!(
            field.data_type(),
            DataType::Float16 | DataType::Float32 | DataType::Float64
        ) {
            return None;
        }
        let null = ScalarValue::try_from(field.data_type()).ok()?;
        let values = self.chunks.iter().map(|c| {
            self.stats(col, c)
                .and_then(|s| if max { s.max.as_ref() } else { s.min.as_ref() })
                .and_then(|s| stat_value(field.data_type(), s))
                .unwrap_or_else(|| null.clone())
        });
        ScalarValue::iter_to_array(values).ok()
    }
}

impl PruningStatistics for ChunkStatistics<'_> {
    fn min_values(&self, column: &Column) -> Option<ArrayRef> {
        self.bounds(column, false)
    }

    fn max_values(&self, column: &Column) -> Option<ArrayRef> {
        self.bounds(column, true)
    }

    fn num_containers(&self) -> usize {
        self.chunks.len()
    }

    fn null_counts(&self, column: &Column) -> Option<ArrayRef> {
        let col = self.schema.index_of(&column.name).ok()?;
        let counts: UInt64Array = self
            .chunks
            .iter()
            .map(|c| self.stats(col, c).map(|s| s.null_count))
            .collect();
        Some(Arc::new(counts))
    }

    fn row_counts(&self) -> Option<ArrayRef> {
        let rows: UInt64Array = self.chunks.iter().map(|c| Some(c.rows as u64)).collect();
        Some(Arc::new(rows))
    }

    fn contained(&self, _column: &Column, _values: &HashSet<ScalarValue>) -> Option<BooleanArray> {
        // Zone maps hold bounds, not value sets.
        None
    }
}

/// A zone-map bound as a scalar of the column's Arrow type; `None` where the bound does not
/// fit the type (a corrupt footer) or the type has no comparable bound.
pub(crate) fn stat_value(dt: &DataType, s: &Scalar) -> Option<ScalarValue> {
    use ScalarValue as S;
    let int = |s: &Scalar| match s {
        Scalar::Int(v) => Some(*v),
        _ => None,
    };
    Some(match dt {
        DataType::Boolean => S::Boolean(Some(int(s)? != 0)),
        DataType::Int8 => S::Int8(Some(int(s)?.try_into().ok()?)),
        DataType::Int16 => S::Int16(Some(int(s)?.try_into().ok()?)),
        DataType::Int32 => S::Int32(Some(int(s)?.try_into().ok()?)),
        DataType::Int64 => S::Int64(Some(int(s)?.try_into().ok()?)),
        DataType::UInt8 => S::UInt8(Some(int(s)?.try_into().ok()?)),
        DataType::UInt16 => S::UInt16(Some(int(s)?.try_into().ok()?)),
        DataType::UInt32 => S::UInt32(Some(int(s)?.try_into().ok()?)),
        DataType::UInt64 => S::UInt64(Some(int(s)?.try_into().ok()?)),
        // Float bounds were widened from the column's own values, so narrowing is exact.
        DataType::Float32 => match s {
            Scalar::Float(v) => S::Float32(Some(*v as f32)),
            _ => return None,
        },
        DataType::Float64 => match s {
            Scalar::Float(v) => S::Float64(Some(*v)),
            _ => return None,
        },
        DataType::Date32 => S::Date32(Some(int(s)?.try_into().ok()?)),
        DataType::Date64 => S::Date64(Some(int(s)?.try_into().ok()?)),
        DataType::Timestamp(unit, tz) => {
            let v = Some(i64::try_from(int(s)?).ok()?);
            match unit {
                TimeUnit::Second => S::TimestampSecond(v, tz.clone()),
                TimeUnit::Millisecond => S::TimestampMillisecond(v, tz.clone()),
                TimeUnit::Microsecond => S::TimestampMicrosecond(v, tz.clone()),
                TimeUnit::Nanosecond => S::TimestampNanosecond(v, tz.clone()),
            }
        }
        DataType::Decimal32(p, sc) => S::Decimal32(Some(int(s)?.try_into().ok()?), *p, *sc),
        DataType::Decimal64(p, sc) => S::Decimal64(Some(int(s)?.try_into().ok()?), *p, *sc),
        DataType::Decimal128(p, sc) => S::Decimal128(Some(int(s)?), *p, *sc),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
            let Scalar::Bytes(b) = s else { return None };
            let text = String::from_utf8(b.clone()).ok()?;
            match dt {
                DataType::Utf8 => S::Utf8(Some(text)),
                DataType::LargeUtf8 => S::LargeUtf8(Some(text)),
                _ => S::Utf8View(Some(text)),
            }
        }
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => {
            let Scalar::Bytes(b) = s else { return None };
            match dt {
                DataType::Binary => S::Binary(Some(b.clone())),
                DataType::LargeBinary => S::LargeBinary(Some(b.clone())),
                _ => S::BinaryView(Some(b.clone())),
            }
        }
        DataType::Dictionary(key, value) => {
            S::Dictionary(key.clone(), Box::new(stat_value(value, s)?))
        }
        _ => return None,
    })
}

/// Statistics of the rows of `chunks`, for the columns `projection` (indices into `schema`).
/// `limit` caps the rows each of `partitions` produces.
pub(crate) fn statistics(
    files: &[Arc<ZfFile>],
    schema: &SchemaRef,
    projection: &[usize],
    partitions: &[&[ChunkRef]],
    limit: Option<usize>,
) -> Statistics {
    let mut rows = 0usize;
    let mut capped = false;
    for part in partitions {
        let total: usize = part.iter().map(|c| c.rows).sum();
        let kept = limit.map_or(total, |l| total.min(l));
        capped |= kept < total;
        rows += kept;
    }
    let chunks: Vec<ChunkRef> = partitions.iter().flat_map(|p| p.iter().copied()).collect();
    let mut bytes = 0u64;
    let column_statistics = projection
        .iter()
        .map(|&col| {
            let (stats, plain) = column_statistics(files, schema.field(col), col, &chunks);
            bytes = bytes.saturating_add(plain);
            if capped { stats.to_inexact() } else { stats }
        })
        .collect();
    Statistics {
        // Each partition yields all its rows or exactly `limit` of them.
        num_rows: Precision::Exact(rows),
        total_byte_size: Precision::Inexact(usize::try_from(bytes).unwrap_or(usize::MAX)),
        column_statistics,
    }
}

/// Min, max and null count of column `col` over `chunks`, and its plain size in bytes.
fn column_statistics(
    files: &[Arc<ZfFile>],
    field: &Field,
    col: usize,
    chunks: &[ChunkRef],
) -> (ColumnStatistics, u64) {
    let mut nulls = 0usize;
    let mut plain = 0u64;
    let mut known = true;
    let (mut min, mut max): (Option<ScalarValue>, Option<ScalarValue>) = (None, None);
    for c in chunks {
        let Some(meta) = files
            .get(c.file)
            .and_then(|f| f.try_chunk_meta(col, c.chunk).ok())
        else {
            known = false;
            continue;
        };
        plain = plain.saturating_add(meta.plain_bytes);
        let chunk_nulls = usize::try_from(meta.stats.null_count).unwrap_or(usize::MAX);
        nulls = nulls.saturating_add(chunk_nulls);
        if chunk_nulls >= c.rows {
            continue; // all null: no bound to merge
        }
        let lo = meta
            .stats
            .min
            .as_ref()
            .and_then(|s| stat_value(field.data_type(), s));
        let hi = meta
            .stats
            .max
            .as_ref()
            .and_then(|s| stat_value(field.data_type(), s));
        let (Some(lo), Some(hi)) = (lo, hi) else {
            known = false;
            continue;
        };
        if min
            .as_ref()
            .is_none_or(|m| lo.partial_cmp(m) == Some(std::cmp::Ordering::Less))
        {
            min = Some(lo);
        }
        if max
            .as_ref()
            .is_none_or(|m| hi.partial_cmp(m) == Some(std::cmp::Ordering::Greater))
        {
            max = Some(hi);
        }
    }
    // NaN is never a zone-map bound, but DataFusion orders NaN above every number: float
    // bounds are estimates only.
    let exact = known && !matches!(field.data_type(), DataType::Float32 | DataType::Float64);
    let bound = |v: Option<ScalarValue>| match v {
        Some(v) if exact => Precision::Exact(v),
        Some(v) => Precision::Inexact(v),
        None => Precision::Absent,
    };
    let (min, max) = if known || min.is_some() {
        (bound(min), bound(max))
    } else {
        (Precision::Absent, Precision::Absent)
    };
    let stats = ColumnStatistics {
        null_count: if known || chunks.is_empty() {
            Precision::Exact(nulls)
        } else {
            Precision::Inexact(nulls)
        },
        max_value: max,
        min_value: min,
        ..ColumnStatistics::new_unknown()
    };
    (stats, plain)
}
