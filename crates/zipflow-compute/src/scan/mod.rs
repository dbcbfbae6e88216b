//! The scan operator: a table, a predicate, group keys and aggregates, chunk by chunk in
//! parallel.
//!
//! Each chunk runs one of two paths that give identical results:
//! - the **reference** path decodes the chunk's columns whole and evaluates every row with
//!   [`expr::eval`] (NULLs, three-valued logic, checked arithmetic). Chunks with nulls in a
//!   column the query reads, and queries using a construct the fast path lacks, take it;
//! - the **fast** path works on 1024-value blocks: zone maps skip the chunk (or drop a
//!   conjunct that holds for the whole chunk), column predicates are evaluated in the encoded
//!   domain into a byte mask (or, when all are ranges on packed columns, by fused
//!   unpack-and-compare kernels into a bitmask), the surviving rows become a selection, and
//!   only then are the aggregate arguments decoded (gathered one by one when few rows
//!   survive) and folded into per-chunk accumulators indexed by dense group ids. String
//!   predicates (`=`, `IN`, `LIKE`) are decided once per dictionary entry in dictionary
//!   chunks, once per run of equal strings in others.
//!
//! Chunks run in batches of a few per thread; each batch's groups are merged into the
//! scan's before the next batch runs ([`Merger`]): split by key into one part per thread,
//! merged field by field from the fast path's dense accumulators (the reference path's
//! groups as one-slot ones), each group's chunks in chunk order, then put back in the order
//! their keys were first seen. When the only key is an integral column whose zone maps bound
//! it to a short range ([`KeyRange`]), the parts are ranges of its values and the groups are
//! indexed by value: no hashing, and chunks whose slots are numbered in key order are merged
//! walking both sides in order.
//!
//! Here: the table and the reference path. Beside it, `fast_path` (one chunk on the fast
//! path, phase by phase) and `pushdown` (which parts of a query it takes, and as what),
//! `block` (block evaluation) over `kernels` (block arithmetic and the per-slot scatter),
//! `group_values` (keys interned into dense group ids), `accumulators` (per-group aggregate
//! state) and `merge` (chunks' partial groups combined into the scan's).

mod accumulators;
mod block;
mod fast_path;
mod group_values;
mod kernels;
mod merge;
mod pushdown;

use std::collections::HashMap;
use std::sync::Arc;

use rayon::prelude::*;
use zipflow_core::stats::Scalar;
use zipflow_core::{Error, Result, Values};
use zipflow_encodings::Scratch;
use zipflow_format::{Validity, ZfFile};

use crate::expr::{self, Expr, Row, SqlType, Value};
use crate::query::{Query, QueryResult};

use self::accumulators::Acc;
use self::fast_path::FastPlan;
use self::group_values::{GroupResult, Groups, SlotOrder, is_too_many_groups};
use self::merge::{DIRECT_SPAN, FEW_GROUPS, KeyRange, Merger, Partial};

/// How a scan runs.
#[derive(Debug, Clone, Default)]
pub struct ScanOptions {
    /// Worker threads (0: rayon's default, one per core).
    pub threads: usize,
    /// Run every chunk through the reference path (for checking the fast path).
    pub reference: bool,
}

/// A cell of a decoded column as a value of type `ty`.
fn cell(values: &Values, validity: Option<&Validity>, i: usize, ty: SqlType) -> Value {
    if validity.is_some_and(|v| !v.get(i).copied().unwrap_or(true)) {
        return Value::Null;
    }
    match values {
        Values::Int(v) => {
            let x = v.get_i128(i).unwrap_or(0);
            match ty {
                SqlType::Bool => Value::Bool(x != 0),
                SqlType::Decimal(s) => Value::Decimal(x, s),
                SqlType::Date => Value::Date(x as i32),
                _ => Value::Int(x as i64),
            }
        }
        Values::F32(v) => Value::Float(v.get(i).map_or(f64::NAN, |&f| f64::from(f))),
        Values::F64(v) => Value::Float(v.get(i).copied().unwrap_or(f64::NAN)),
        Values::Bytes(b) => {
            Value::Str(String::from_utf8_lossy(b.get(i).unwrap_or(&[])).into_owned())
        }
    }
}

/// The decoded columns of one chunk, for the reference path.
struct DecodedChunk {
    /// By file column index: values, validity, type.
    cols: HashMap<usize, (Values, Option<Validity>, SqlType)>,
}

struct ChunkRow<'a> {
    chunk: &'a DecodedChunk,
    i: usize,
}

impl Row for ChunkRow<'_> {
    fn column(&self, index: usize) -> Value {
        match self.chunk.cols.get(&index) {
            Some((v, validity, ty)) => cell(v, validity.as_ref(), self.i, *ty),
            None => Value::Null,
        }
    }
}

/// A table open for queries.
pub struct Table {
    file: Arc<ZfFile>,
    /// Each column's type in queries; `None` for one they cannot read (timestamps, bytes).
    types: Vec<Option<SqlType>>,
}

impl Table {
    /// Wraps an open file; fails on a column type queries cannot read.
    pub fn new(file: ZfFile) -> Result<Table> {
        let table = Table::shared(Arc::new(file));
        table.schema()?;
        Ok(table)
    }

    /// Wraps a file open elsewhere too (a DataFusion scan's, say). Columns of a type
    /// queries cannot read are kept but unusable: a query naming one fails when it runs, and
    /// [`Table::schema`] fails.
    pub fn shared(file: Arc<ZfFile>) -> Table {
        let types = file
            .columns()
            .iter()
            .map(|c| SqlType::of_column(c.column_type).ok())
            .collect();
        Table { file, types }
    }

    /// Opens a .zf file.
    pub fn open(path: impl AsRef<std::path::Path>) -> Result<Table> {
        Table::new(ZfFile::open(path)?)
    }

    /// Column `c`'s type in queries, or why queries cannot read it.
    fn column_type(&self, c: usize) -> Result<SqlType> {
        let col = self
            .file
            .columns()
            .get(c)
            .ok_or_else(|| Error::invalid(format!("no column {c}")))?;
        match self.types.get(c).copied().flatten() {
            Some(t) => Ok(t),
            None => SqlType::of_column(col.column_type).map_err(|e| e.at_column(&col.name)),
        }
    }

    /// `(name, type)` of every column, for binding SQL; fails naming the first column
    /// queries cannot read.
    pub fn schema(&self) -> Result<Vec<(String, SqlType)>> {
        (0..self.types.len())
            .map(|c| Ok((self.file.columns()[c].name.clone(), self.column_type(c)?)))
            .collect()
    }

    /// The underlying file.
    pub fn file(&self) -> &ZfFile {
        &self.file
    }

    fn decode_chunk(
        &self,
        cols: &[usize],
        chunk: usize,
        scratch: &mut Scratch,
    ) -> Result<DecodedChunk> {
        let mut out = HashMap::new();
        for &c in cols {
            let (v, validity) = self.file.read_chunk(c, chunk, scratch)?;
            out.insert(c, (v, validity, self.column_type(c)?));
        }
        Ok(DecodedChunk { cols: out })
    }

    /// Runs `q` and returns its rows, ordered and limited.
    pub fn run(&self, q: &Query, opts: &ScanOptions) -> Result<QueryResult> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(opts.threads)
            .build()
            .map_err(|e| Error::external("starting worker threads", e))?;
        let rows = if q.aggregating {
            pool.install(|| self.aggregate(q, opts))?
        } else {
            let mut rows = Vec::new();
            let stop = q
                .order_by
                .is_empty()
                .then(|| q.limit.map(|l| l + q.offset))
                .flatten();
            self.for_each_row(q, |r| {
                rows.push(r);
                stop.is_none_or(|s| (rows.len() as u64) < s)
            })?;
            rows
        };
        Ok(shape_result(q, rows))
    }

    /// Streams the rows of a projection query (no aggregates), in table order, to `f`, which
    /// returns false to stop. Every output column is produced, hidden ones included.
    pub fn for_each_row(&self, q: &Query, mut f: impl FnMut(Vec<Value>) -> bool) -> Result<()> {
        let cols = q.columns();
        let mut scratch = Scratch::default();
        for c in 0..self.file.num_chunks() {
            let chunk = self.decode_chunk(&cols, c, &mut scratch)?;
            let rows = self
                .file
                .try_chunk_meta(0, c)
                .map_or(0, |m| m.rows as usize);
            for i in 0..rows {
                let row = ChunkRow { chunk: &chunk, i };
                if let Some(p) = &q.filter
                    && expr::eval(p, &row)? != Value::Bool(true)
                {
                    continue;
                }
                let out = q
                    .output
                    .iter()
                    .map(|o| expr::eval(&o.expr, &row))
                    .collect::<Result<Vec<_>>>()?;
                if !f(out) {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    fn aggregate(&self, q: &Query, opts: &ScanOptions) -> Result<Vec<Vec<Value>>> {
        let cols = q.columns();
        let fast = if opts.reference {
            None
        } else {
            FastPlan::new(self, q)?
        };
        let naggs = q.aggregates.len();
        let nchunks = self.file.num_chunks();
        // Chunks run in batches of a few per thread, each batch merged before the next, so
        // that many groups do not hold every chunk's accumulators at once; once the groups
        // are known to be few, the rest runs as one batch (no thread waits at a batch's end).
        let threads = rayon::current_num_threads().max(1);
        let range = fast.as_ref().and_then(|_| self.key_range(q));
        // Ordered first by the only key, the groups need no first-seen order: every key is
        // one group, so ORDER BY alone decides their order.
        let by_key = q.keys.len() == 1
            && q.order_by.first().is_some_and(|&(o, _)| {
                matches!(q.output.get(o).map(|c| &c.expr), Some(Expr::KeyRef(0, _)))
            });
        let first_seen = fast.as_ref().is_none_or(|f| f.first_seen);
        let order = match (range.is_some(), first_seen) {
            (false, _) => SlotOrder::FirstSeen,
            (true, true) => SlotOrder::Keys,
            (true, false) => SlotOrder::KeysOnly,
        };
        let mut merger = fast.as_ref().map(|_| Merger::new(q, threads, range));
        let mut rows = Groups::default();
        let mut first = 0;
        while first < nchunks {
            let few = match &merger {
                Some(m) => first > 0 && m.groups() < FEW_GROUPS,
                None => first > 0 && rows.keys.len() < FEW_GROUPS,
            };
            let end = if few {
                nchunks
            } else {
                nchunks.min(first + 4 * threads)
            };
            let partials = (first..end)
                .into_par_iter()
                .map_init(Scratch::default, |scratch, c| {
                    let has_nulls = cols
                        .iter()
                        .any(|&col| self.file.chunk_meta(col, c).stats.null_count > 0);
                    match &fast {
                        Some(plan) if !has_nulls => match plan.chunk(self, q, c, order, scratch) {
                            // More key combinations than the fast path's slots: this chunk
                            // row by row instead.
                            Err(e) if is_too_many_groups(&e) => self
                                .reference_chunk(q, &cols, c, scratch)
                                .map(Partial::Rows),
                            r => r,
                        },
                        _ => self
                            .reference_chunk(q, &cols, c, scratch)
                            .map(Partial::Rows),
                    }
                })
                .collect::<Result<Vec<Partial>>>()?;
            match &mut merger {
                Some(m) => m.add(q, first, &partials).map_err(|e| match range {
                    Some(r) => e
                        .at_column(&self.file.columns()[r.column].name)
                        .in_file(self.file.path()),
                    None => e,
                })?,
                None => {
                    for p in partials {
                        if let Partial::Rows(g) = p {
                            rows.merge(g, naggs);
                        }
                    }
                }
            }
            first = end;
        }
        let all = match merger {
            Some(m) => m.finish(q, by_key)?,
            None => rows.results(q),
        };
        output_rows(q, all)
    }

    /// The range of values of the query's only GROUP BY key when it is an integral column
    /// without nulls whose zone maps bound it to at most [`DIRECT_SPAN`] values (and at most
    /// twice the table's rows, or 2^16).
    fn key_range(&self, q: &Query) -> Option<KeyRange> {
        let [Expr::Column { index, ty }] = q.keys.as_slice() else {
            return None;
        };
        if !ty.is_integral() || *ty == SqlType::Bool {
            return None;
        }
        let (mut lo, mut hi, mut rows) = (i128::MAX, i128::MIN, 0u64);
        for c in 0..self.file.num_chunks() {
            let m = self.file.try_chunk_meta(*index, c).ok()?;
            let (Some(Scalar::Int(a)), Some(Scalar::Int(b))) = (&m.stats.min, &m.stats.max) else {
                return None;
            };
            if m.stats.null_count > 0 {
                return None;
            }
            (lo, hi) = (lo.min(*a), hi.max(*b));
            rows += u64::from(m.rows);
        }
        // The range's end, one past its last value, is an i64 too.
        i64::try_from(hi.checked_add(1)?).ok()?;
        let len = usize::try_from(hi.checked_sub(lo)?.checked_add(1)?).ok()?;
        let most = DIRECT_SPAN.min(usize::try_from(2 * rows).ok()?.max(1 << 16));
        (len <= most).then_some(KeyRange {
            column: *index,
            lo: i64::try_from(lo).ok()?,
            len,
            ty: *ty,
        })
    }

    fn reference_chunk(
        &self,
        q: &Query,
        cols: &[usize],
        c: usize,
        scratch: &mut Scratch,
    ) -> Result<Groups> {
        let chunk = self.decode_chunk(cols, c, scratch)?;
        let rows = self.file.try_chunk_meta(0, c)?.rows as usize;
        let naggs = q.aggregates.len();
        let mut groups = Groups::default();
        for i in 0..rows {
            let row = ChunkRow { chunk: &chunk, i };
            if let Some(p) = &q.filter
                && expr::eval(p, &row)? != Value::Bool(true)
            {
                continue;
            }
            let key = q
                .keys
                .iter()
                .map(|k| expr::eval(k, &row))
                .collect::<Result<Vec<_>>>()?;
            let g = groups.slot(key, naggs);
            for (a, acc) in q.aggregates.iter().zip(&mut groups.accs[g]) {
                match &a.arg {
                    None => acc.count += 1,
                    Some(e) if a.distinct => acc.add_distinct(expr::eval(e, &row)?),
                    Some(e) => acc.add(&expr::eval(e, &row)?),
                }
            }
        }
        Ok(groups)
    }
}

/// The output rows of aggregating query `q` from its groups' results: an empty table without
/// GROUP BY still gives one group; HAVING filters; the output expressions are evaluated.
fn output_rows(q: &Query, mut all: Vec<GroupResult>) -> Result<Vec<Vec<Value>>> {
    if q.keys.is_empty() && all.is_empty() {
        let mut one = Groups::default();
        one.slot(Vec::new(), q.aggregates.len());
        all = one.results(q);
    }
    let mut rows = Vec::with_capacity(all.len());
    for (key, aggs) in &all {
        let row = AggRow { aggs, keys: key };
        if let Some(h) = &q.having
            && expr::eval(h, &row)? != Value::Bool(true)
        {
            continue;
        }
        rows.push(
            q.output
                .iter()
                .map(|o| expr::eval(&o.expr, &row))
                .collect::<Result<Vec<_>>>()?,
        );
    }
    Ok(rows)
}

/// `rows` (every output column of `q`, hidden ones included) ordered, offset and limited,
/// with the hidden columns dropped.
fn shape_result(q: &Query, mut rows: Vec<Vec<Value>>) -> QueryResult {
    if !q.order_by.is_empty() {
        rows.sort_by(|a, b| {
            for &(i, desc) in &q.order_by {
                let o = a[i].sort_cmp(&b[i]);
                let o = if desc { o.reverse() } else { o };
                if o.is_ne() {
                    return o;
                }
            }
            std::cmp::Ordering::Equal
        });
    }
    let start = usize::try_from(q.offset)
        .unwrap_or(usize::MAX)
        .min(rows.len());
    let end = match q.limit {
        Some(l) => start
            .saturating_add(usize::try_from(l).unwrap_or(usize::MAX))
            .min(rows.len()),
        None => rows.len(),
    };
    let shown = q.output.len() - q.hidden;
    rows.truncate(end);
    rows.drain(..start);
    for r in &mut rows {
        r.truncate(shown);
    }
    QueryResult {
        names: q.output[..shown].iter().map(|o| o.name.clone()).collect(),
        types: q.output[..shown].iter().map(|o| o.expr.ty()).collect(),
        rows,
    }
}

/// The state of one aggregate over one group's rows, as an executor outside this crate (the
/// GPU) computes it: enough for `count`, `sum`, `avg`, `min` and `max` over integral
/// arguments (integers, decimals, dates), without DISTINCT.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AggState {
    /// Rows (or non-null values) counted.
    pub count: i64,
    /// The exact sum of the values, in the argument's scaled units.
    pub sum: i128,
    /// The least value (`None` before any).
    pub min: Option<Value>,
    /// The greatest value.
    pub max: Option<Value>,
}

/// One group of an aggregating query as another executor computed it: the key's values (one
/// per GROUP BY key) and one state per aggregate.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupState {
    /// The key.
    pub key: Vec<Value>,
    /// One state per aggregate of the query.
    pub aggs: Vec<AggState>,
}

/// Finishes aggregating query `q` from its groups' states, exactly as [`Table::run`]
/// finishes its own: aggregate results, HAVING, output expressions, ORDER BY, OFFSET and
/// LIMIT. Groups come out in the order given unless ORDER BY decides. The query must
/// aggregate, and its aggregates must be ones [`AggState`] holds.
pub fn finish_groups(q: &Query, groups: Vec<GroupState>) -> Result<QueryResult> {
    if !q.aggregating {
        return Err(Error::invalid(
            "finish_groups: the query does not aggregate",
        ));
    }
    if let Some(a) = q.aggregates.iter().find(|a| {
        a.distinct || a.func.is_moment() || a.arg.as_ref().is_some_and(|e| !e.ty().is_integral())
    }) {
        return Err(Error::unsupported(format!(
            "finishing {:?} from external aggregate states",
            a.func
        )));
    }
    let naggs = q.aggregates.len();
    let mut all = Groups::default();
    for g in groups {
        if g.aggs.len() != naggs || g.key.len() != q.keys.len() {
            return Err(Error::invalid(format!(
                "a group with {} keys and {} aggregate states for a query with {} and {naggs}",
                g.key.len(),
                g.aggs.len(),
                q.keys.len()
            )));
        }
        let slot = all.slot(g.key, naggs);
        for (acc, s) in all.accs[slot].iter_mut().zip(g.aggs) {
            acc.merge(&Acc {
                count: s.count,
                sum_i: s.sum,
                min: s.min,
                max: s.max,
                ..Acc::default()
            });
        }
    }
    Ok(shape_result(q, output_rows(q, all.results(q))?))
}

struct AggRow<'a> {
    aggs: &'a [Value],
    keys: &'a [Value],
}

impl Row for AggRow<'_> {
    fn column(&self, _: usize) -> Value {
        Value::Null
    }
    fn agg(&self, i: usize) -> Value {
        self.aggs.get(i).cloned().unwrap_or(Value::Null)
    }
    fn key(&self, i: usize) -> Value {
        self.keys.get(i).cloned().unwrap_or(Value::Null)
    }
}
