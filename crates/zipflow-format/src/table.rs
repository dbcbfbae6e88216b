//! Tables: Arrow record batches in, a zipflow file out, and back.
//!
//! [`TableWriter`] cuts the incoming batches into row groups of
//! [`WriteOptions::chunk_rows`] rows, converts every column ([`crate::arrow::to_column`]),
//! chooses and runs a plan per chunk (the columns of a row group in parallel) and streams the
//! chunks into a [`FileWriter`]. [`ZfFile::read_array`], [`ZfFile::read_batch`] and
//! [`ZfFile::batches`] read them back as Arrow.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arrow::array::{ArrayRef, RecordBatch, RecordBatchOptions};
use arrow::datatypes::{DataType, Field, SchemaRef};
use rayon::prelude::*;
use zipflow_core::stats::ChunkStats;
use zipflow_core::{ColumnType, Error, IntVec, PType, Plan, Result, Values};
use zipflow_encodings::{ColumnChooser, EncodedNode, NodeView, PlanChooser, Scratch};

use crate::arrow::{ArrayPool, column_type, from_column, from_column_in, to_column};
use crate::file::{ColumnMeta, EncodedChunk, FileWriter, ZfFile, schema_to_ipc};

/// How a table is written.
#[derive(Debug, Clone)]
pub struct WriteOptions {
    /// Rows per row group (and so per chunk of every column).
    pub chunk_rows: usize,
    /// A forced plan per column name; other columns get a chosen plan per chunk.
    pub plans: HashMap<String, Plan>,
    /// Replace an existing file at the target path.
    pub overwrite: bool,
    /// u8 columns that hold text (or any raw bytes): the chooser picks their plans among
    /// its text plans.
    pub text_columns: Vec<String>,
    /// Chooses the plans of columns without a forced plan, and encodes validity. Needed
    /// unless every column has a plan in [`WriteOptions::plans`] and none is nullable; the
    /// selector's is `zipflow_select::Chooser`.
    pub chooser: Option<Arc<dyn PlanChooser>>,
}

impl Default for WriteOptions {
    fn default() -> Self {
        WriteOptions {
            chunk_rows: 64 * zipflow_core::VECTOR_LEN,
            plans: HashMap::new(),
            overwrite: false,
            text_columns: Vec::new(),
            chooser: None,
        }
    }
}

/// What writing one column cost and produced.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnSummary {
    /// Column name.
    pub name: String,
    /// How the column is stored.
    pub column_type: ColumnType,
    /// Bytes of its chunk payloads (values and validity trees).
    pub compressed_bytes: u64,
    /// Bytes of its values in plain form ([`Values::plain_size`]).
    pub plain_bytes: u64,
    /// Seconds spent converting and encoding it, summed over its chunks (across threads).
    pub encode_secs: f64,
    /// Plans used for its values, with how many chunks used each, most used first.
    pub plans: Vec<(String, u64)>,
}

impl ColumnSummary {
    /// The most used plan, and how many others there were: `for | bitpack(7)`, or
    /// `for | bitpack(7) (12 chunks; 2 other plans)`.
    pub fn plan_summary(&self) -> String {
        match self.plans.as_slice() {
            [] => "-".to_string(),
            [(p, _)] => p.clone(),
            [(p, n), rest @ ..] => format!("{p} ({n} chunks; {} other plans)", rest.len()),
        }
    }
}

/// What [`TableWriter::finish`] wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct FileSummary {
    /// Rows written.
    pub rows: u64,
    /// Size of the file.
    pub bytes: u64,
    /// Per column.
    pub columns: Vec<ColumnSummary>,
}

#[derive(Debug, Default)]
struct ColumnTally {
    compressed: u64,
    plain: u64,
    time: Duration,
    plans: BTreeMap<String, u64>,
}

/// Writes Arrow record batches to a zipflow file, one row group at a time.
///
/// Holds at most one row group of input plus its encoded chunks. Dropping it before
/// [`TableWriter::finish`] leaves no file behind.
pub struct TableWriter {
    file: FileWriter,
    schema: SchemaRef,
    types: Vec<ColumnType>,
    plans: Vec<Choice>,
    /// Per column without a forced plan, its chooser (consulted in chunk order).
    choosers: Vec<Option<Column>>,
    /// Encodes validity flags.
    chooser: Option<Arc<dyn PlanChooser>>,
    chunk_rows: usize,
    pending: Vec<RecordBatch>,
    pending_rows: usize,
    tallies: Vec<ColumnTally>,
    /// Set when a row group failed to encode or write: the file would miss rows, so the
    /// writer refuses to go on (dropping it removes the temporary file).
    failed: bool,
}

impl std::fmt::Debug for TableWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableWriter")
            .field("file", &self.file)
            .field("pending_rows", &self.pending_rows)
            .finish_non_exhaustive()
    }
}

impl TableWriter {
    /// Starts writing a table of `schema` to `path`. Fails on a type zipflow cannot store, on
    /// a forced plan for a column that does not exist, and on an existing file unless
    /// [`WriteOptions::overwrite`] is set.
    pub fn create(
        path: impl AsRef<Path>,
        schema: SchemaRef,
        options: WriteOptions,
    ) -> Result<Self> {
        let path = path.as_ref();
        let types = schema
            .fields()
            .iter()
            .map(|f| column_type(f))
            .collect::<Result<Vec<_>>>()
            .map_err(|e| e.in_file(path))?;
        let mut unknown: Vec<&String> = options
            .plans
            .keys()
            .chain(&options.text_columns)
            .filter(|name| schema.field_with_name(name).is_err())
            .collect();
        unknown.sort();
        if let Some(name) = unknown.first() {
            let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
            return Err(Error::invalid(format!(
                "a plan is given for column `{name}`, which does not exist (columns: {})",
                names.join(", ")
            ))
            .in_file(path));
        }
        let plans: Vec<Choice> = schema
            .fields()
            .iter()
            .map(|f| match options.plans.get(f.name()) {
                Some(p) => Choice::Forced(p.clone()),
                None if options.text_columns.contains(f.name()) => Choice::Text,
                None => Choice::Auto,
            })
            .collect();
        let choosers = column_choosers(&schema, &plans, options.chooser.as_deref())
            .map_err(|e| e.in_file(path))?;
        let columns = schema
            .fields()
            .iter()
            .zip(&types)
            .map(|(f, ty)| ColumnMeta {
                name: f.name().clone(),
                column_type: *ty,
                nullable: f.is_nullable(),
            })
            .collect();
        let file = FileWriter::create(
            path,
            columns,
            schema_to_ipc(&schema),
            options.chunk_rows,
            options.overwrite,
        )?;
        let tallies = (0..types.len()).map(|_| ColumnTally::default()).collect();
        Ok(TableWriter {
            file,
            schema,
            choosers,
            types,
            plans,
            chooser: options.chooser,
            chunk_rows: options.chunk_rows,
            pending: Vec::new(),
            pending_rows: 0,
            tallies,
            failed: false,
        })
    }

    /// Appends a batch of any size; full row groups are encoded and written as they complete.
    pub fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        self.check_failed()?;
        self.check_batch(batch)
            .map_err(|e| e.in_file(self.file.path()))?;
        let mut offset = 0;
        while offset < batch.num_rows() {
            let take = (self.chunk_rows - self.pending_rows).min(batch.num_rows() - offset);
            self.pending.push(batch.slice(offset, take));
            self.pending_rows += take;
            offset += take;
            if self.pending_rows == self.chunk_rows {
                let flushed = self.flush();
                self.failed = flushed.is_err();
                flushed?;
            }
        }
        Ok(())
    }

    fn check_failed(&self) -> Result<()> {
        if self.failed {
            return Err(
                Error::invalid("an earlier write failed; this file cannot be completed")
                    .in_file(self.file.path()),
            );
        }
        Ok(())
    }

    fn check_batch(&self, batch: &RecordBatch) -> Result<()> {
        let fields = self.schema.fields();
        if batch.num_columns() != fields.len() {
            return Err(Error::invalid(format!(
                "batch has {} columns, the table has {}",
                batch.num_columns(),
                fields.len()
            )));
        }
        for (field, array) in fields.iter().zip(batch.columns()) {
            if array.data_type() != field.data_type() {
                return Err(Error::invalid(format!(
                    "batch column of type {}, the table's column is {}",
                    array.data_type(),
                    field.data_type()
                ))
                .at_column(field.name()));
            }
            if !field.is_nullable() && array.logical_null_count() > 0 {
                return Err(Error::invalid("nulls in a column declared not nullable")
                    .at_column(field.name()));
            }
        }
        Ok(())
    }

    /// Encodes and writes the pending rows as one row group.
    fn flush(&mut self) -> Result<()> {
        if self.pending_rows == 0 {
            return Ok(());
        }
        let path = self.file.path().to_path_buf();
        let batch = match self.pending.len() {
            1 => self.pending.pop(),
            _ => None,
        };
        let batch = match batch {
            Some(b) => b,
            None => arrow::compute::concat_batches(&self.schema, &self.pending).map_err(|e| {
                Error::external("joining batches into a row group", e).in_file(&path)
            })?,
        };
        self.pending.clear();
        self.pending_rows = 0;
        let chunk = u32::try_from(self.file.rows() / self.chunk_rows as u64)
            .map_err(|_| Error::unsupported("more than 2^32 row groups").in_file(&path))?;
        let fields = self.schema.fields();
        let encoded: Vec<(EncodedChunk, u64, Duration)> = (0..fields.len())
            .into_par_iter()
            .map(|c| {
                let field = &fields[c];
                let choosers = (self.choosers[c].as_ref(), self.chooser.as_deref());
                encode_chunk(
                    field,
                    self.types[c],
                    &self.plans[c],
                    choosers,
                    batch.column(c),
                )
                .map_err(|e| e.at_column(field.name()).at_chunk(chunk).in_file(&path))
            })
            .collect::<Result<_>>()?;
        let mut chunks = Vec::with_capacity(encoded.len());
        for ((chunk, plain, time), tally) in encoded.into_iter().zip(&mut self.tallies) {
            tally.compressed +=
                (chunk.values.len() + chunk.validity.as_ref().map_or(0, Vec::len)) as u64;
            tally.plain += plain;
            tally.time += time;
            *tally.plans.entry(chunk.plan.clone()).or_default() += 1;
            chunks.push(chunk);
        }
        self.file.write_row_group(chunks)
    }

    /// Writes the last, partial row group and the footer, and moves the file into place.
    pub fn finish(mut self) -> Result<FileSummary> {
        self.check_failed()?;
        self.flush()?;
        let rows = self.file.rows();
        let bytes = self.file.finish()?;
        let columns = self
            .schema
            .fields()
            .iter()
            .zip(self.types)
            .zip(std::mem::take(&mut self.tallies))
            .map(|((f, ty), t)| {
                let mut plans: Vec<(String, u64)> = t.plans.into_iter().collect();
                plans.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
                ColumnSummary {
                    name: f.name().clone(),
                    column_type: ty,
                    compressed_bytes: t.compressed,
                    plain_bytes: t.plain,
                    encode_secs: t.time.as_secs_f64(),
                    plans,
                }
            })
            .collect();
        Ok(FileSummary {
            rows,
            bytes,
            columns,
        })
    }
}

/// The serialised tree and its resolved plan text.
fn serialise(node: &EncodedNode) -> Result<(Vec<u8>, String)> {
    let bytes = node.to_bytes()?;
    let plan = zipflow_encodings::describe(&NodeView::parse(&bytes)?)?.to_string();
    Ok((bytes, plan))
}

/// Converts and encodes one chunk of one column; returns it with its plain size and the time
/// it took.
/// How a column's plan is found.
#[derive(Debug, Clone)]
enum Choice {
    /// Given by the user.
    Forced(Plan),
    /// Chosen among the text candidates.
    Text,
    /// Chosen among the candidates for the column's type.
    Auto,
}

/// One column's chooser; its chunks are encoded in order, so the lock is never contended.
type Column = Mutex<Box<dyn ColumnChooser>>;

/// Per column, a chooser where its plan is not forced; errors if one is needed (a column
/// without a forced plan, or a nullable one) and `chooser` is `None`.
fn column_choosers(
    schema: &SchemaRef,
    plans: &[Choice],
    chooser: Option<&dyn PlanChooser>,
) -> Result<Vec<Option<Column>>> {
    schema
        .fields()
        .iter()
        .zip(plans)
        .map(|(f, plan)| {
            let text = match plan {
                Choice::Forced(_) if !f.is_nullable() => return Ok(None),
                Choice::Forced(_) => None,
                Choice::Text => Some(true),
                Choice::Auto => Some(false),
            };
            let Some(chooser) = chooser else {
                let why = if text.is_some() {
                    "has no plan"
                } else {
                    "is nullable"
                };
                return Err(Error::invalid(format!(
                    "column `{}` {why} and no plan chooser was given",
                    f.name()
                )));
            };
            Ok(text.map(|t| Mutex::new(chooser.column(t))))
        })
        .collect()
}

fn encode_chunk(
    field: &Field,
    ty: ColumnType,
    plan: &Choice,
    (column, chooser): (Option<&Column>, Option<&dyn PlanChooser>),
    array: &ArrayRef,
) -> Result<(EncodedChunk, u64, Duration)> {
    let start = Instant::now();
    let (got, values, validity) = to_column(field, array.as_ref())?;
    debug_assert_eq!(got, ty);
    let stats = ChunkStats::compute(&values, validity.as_deref());
    // Only the valid values go into the tree (`crate::nulls`).
    let stored = match &validity {
        Some(v) => std::borrow::Cow::Owned(crate::nulls::compact(&values, v)),
        None => std::borrow::Cow::Borrowed(&values),
    };
    let node = match plan {
        Choice::Forced(p) => zipflow_encodings::encode(p, &stored)?,
        Choice::Text | Choice::Auto => {
            let Some(column) = column else {
                return Err(Error::invalid("no plan chooser for this column"));
            };
            // Chunks of one column are encoded in order, so the lock is never contended.
            column
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .choose_and_encode(&stored)?
        }
    };
    drop(stored);
    let (values_bytes, plan) = serialise(&node)?;
    let (validity, validity_plan) = match &validity {
        None => (None, String::new()),
        Some(v) => {
            let flags = Values::Int(IntVec::U8(v.iter().map(|&b| u8::from(b)).collect()));
            let Some(chooser) = chooser else {
                return Err(Error::invalid("no plan chooser for this column's validity"));
            };
            let node = chooser.encode_flags(&flags)?;
            let (bytes, plan) = serialise(&node)?;
            (Some(bytes), plan)
        }
    };
    let rows = u32::try_from(values.len())
        .map_err(|_| Error::unsupported("a chunk of more than 2^32 rows"))?;
    let chunk = EncodedChunk {
        values: values_bytes,
        validity,
        rows,
        plain_bytes: values.plain_size() as u64,
        stats,
        plan,
        validity_plan,
    };
    Ok((chunk, values.plain_size() as u64, start.elapsed()))
}

impl ZfFile {
    /// Reads chunk `chunk` of column `col` as an Arrow array of the column's exact type.
    /// Errors name file, column and chunk.
    pub fn read_array(&self, col: usize, chunk: usize, scratch: &mut Scratch) -> Result<ArrayRef> {
        let (payload, _) = self.chunk_payload(col, chunk)?;
        if let Some(a) = self.try_streamed(col, chunk, &payload, scratch, None)? {
            return Ok(a);
        }
        let (values, validity) = self.decode_payload(col, chunk, &payload, scratch)?;
        let schema = self.arrow_schema();
        let locate = |e: Error| {
            e.at_chunk(u32::try_from(chunk).unwrap_or(u32::MAX))
                .in_file(self.path())
        };
        let (Some(field), Some(meta)) = (schema.fields().get(col), self.columns().get(col)) else {
            return Err(locate(Error::invalid(format!(
                "column index {col} out of range"
            ))));
        };
        from_column(field, meta.column_type, values, validity)
            .map_err(|e| locate(e.at_column(&meta.name)))
    }

    /// Like [`ZfFile::read_array`], decoding into `pool`'s buffers: hand the array back with
    /// [`ArrayPool::recycle`] when done, and reading chunk after chunk allocates nothing new.
    pub fn read_array_in(
        &self,
        col: usize,
        chunk: usize,
        pool: &mut ArrayPool,
    ) -> Result<ArrayRef> {
        let schema = self.arrow_schema();
        let locate = |e: Error| {
            e.at_chunk(u32::try_from(chunk).unwrap_or(u32::MAX))
                .in_file(self.path())
        };
        let (Some(field), Some(meta)) = (schema.fields().get(col), self.columns().get(col)) else {
            return Err(locate(Error::invalid(format!(
                "column index {col} out of range"
            ))));
        };
        if meta.column_type.ptype() == zipflow_core::PType::Bytes {
            pool.prime_strings();
        }
        let (payload, _) = self.chunk_payload(col, chunk)?;
        let reuse = Some((&mut pool.u128s, &mut pool.i128s));
        if let Some(a) = self.try_streamed(col, chunk, &payload, &mut pool.scratch, reuse)? {
            return Ok(a);
        }
        let (values, validity) = self.decode_payload(col, chunk, &payload, &mut pool.scratch)?;
        from_column_in(field, meta.column_type, values, validity, pool)
            .map_err(|e| locate(e.at_column(&meta.name)))
    }

    /// The values tree of a chunk without nulls in its `payload`, with a function that
    /// places an error at the file, column and chunk; `None` for a chunk with nulls.
    #[allow(clippy::type_complexity)]
    fn plain_node<'p>(
        &'p self,
        col: usize,
        chunk: usize,
        payload: &'p [u8],
    ) -> Result<Option<(NodeView<'p>, impl Fn(Error) -> Error + 'p)>> {
        let meta = self.try_chunk_meta(col, chunk)?;
        if meta.validity_len != 0 {
            return Ok(None);
        }
        let name = &self.columns()[col].name;
        let rows = meta.rows as usize;
        let locate = move |e: Error| {
            e.at_column(name)
                .at_chunk(u32::try_from(chunk).unwrap_or(u32::MAX))
                .in_file(self.path())
        };
        let values = payload
            .get(..meta.values_len as usize)
            .ok_or_else(|| locate(Error::corrupt("values tree outside the payload")))?;
        let node = NodeView::parse(values).map_err(locate)?;
        let ptype = self.columns()[col].column_type.ptype();
        if node.ptype != ptype || node.len != rows {
            return Err(locate(Error::corrupt(format!(
                "values tree holds {} {} values, the index says {rows} {ptype} values",
                node.len, node.ptype
            ))));
        }
        Ok(Some((node, locate)))
    }

    /// The streaming fast paths for chunks without nulls, the values tree (in `payload`)
    /// parsed once: a string-view column whose chunk is `strdict` (views gathered from the
    /// dictionary's as the codes stream, the dictionary as the data buffer) or `words` (views
    /// built as the tokens expand), a string or binary column whose chunk is `strdict` (the
    /// dictionary checked once, the rows not validated again), and a `Decimal128` column (the
    /// scaled integers widened a vector at a time). `reuse` offers recycled view and decimal buffers. `None` when the chunk does not
    /// qualify.
    #[allow(clippy::type_complexity)]
    fn try_streamed(
        &self,
        col: usize,
        chunk: usize,
        payload: &[u8],
        scratch: &mut Scratch,
        reuse: Option<(&mut Vec<Vec<u128>>, &mut Vec<Vec<i128>>)>,
    ) -> Result<Option<ArrayRef>> {
        let schema = self.arrow_schema();
        let (Some(field), Some(column)) = (schema.fields().get(col), self.columns().get(col))
        else {
            return Ok(None);
        };
        let dt = field.data_type();
        let utf8 = match dt {
            DataType::Utf8View | DataType::Utf8 | DataType::LargeUtf8 => true,
            DataType::BinaryView | DataType::Binary | DataType::LargeBinary => false,
            DataType::Decimal128(..) if column.column_type.ptype() == PType::I64 => false,
            _ => return Ok(None),
        };
        let Some((node, locate)) = self.plain_node(col, chunk, payload)? else {
            return Ok(None);
        };
        let (views, wide) = match reuse {
            Some((v, w)) => (Some(v), Some(w)),
            None => (None, None),
        };
        let name = &column.name;
        let array = match *dt {
            DataType::Decimal128(precision, scale) => {
                let wide = wide.and_then(|b| b.pop()).unwrap_or_default();
                crate::arrow::wide_decimal_array(name, &node, precision, scale, scratch, wide)
            }
            DataType::Utf8 | DataType::Binary if node.id == zipflow_encodings::strdict::ID => {
                dict_strings::<i32>(name, &node, utf8, scratch)
            }
            DataType::LargeUtf8 | DataType::LargeBinary
                if node.id == zipflow_encodings::strdict::ID =>
            {
                dict_strings::<i64>(name, &node, utf8, scratch)
            }
            DataType::Utf8 | DataType::Binary | DataType::LargeUtf8 | DataType::LargeBinary => {
                return Ok(None);
            }
            _ if node.id == zipflow_encodings::strdict::ID => {
                let views = views.and_then(|v| v.pop()).unwrap_or_default();
                dict_views(name, &node, utf8, views, scratch)
            }
            _ if node.id == zipflow_encodings::words::ID => {
                let views = views.and_then(|v| v.pop()).unwrap_or_default();
                word_views(&node, utf8, views, scratch)
            }
            _ => return Ok(None),
        };
        array.map(Some).map_err(locate)
    }

    /// Reads row group `i` (chunk `i` of every column, decoded in parallel) as a record batch.
    pub fn read_batch(&self, i: usize) -> Result<RecordBatch> {
        if i >= self.num_chunks() {
            return Err(Error::invalid(format!(
                "row group {i} out of range: the file has {}",
                self.num_chunks()
            ))
            .in_file(self.path()));
        }
        let arrays = (0..self.columns().len())
            .into_par_iter()
            .map_init(Scratch::default, |scratch, c| {
                self.read_array(c, i, scratch)
            })
            .collect::<Result<Vec<_>>>()?;
        let first = i as u64 * self.chunk_rows();
        let rows = self.chunk_rows().min(self.num_rows() - first) as usize;
        let options = RecordBatchOptions::new().with_row_count(Some(rows));
        RecordBatch::try_new_with_options(self.arrow_schema(), arrays, &options).map_err(|e| {
            Error::external(format!("assembling row group {i}"), e).in_file(self.path())
        })
    }

    /// All row groups, in order, as record batches.
    pub fn batches(&self) -> impl Iterator<Item = Result<RecordBatch>> + '_ {
        (0..self.num_chunks()).map(move |i| self.read_batch(i))
    }
}

/// A view array from a `strdict` node: the dictionary decoded, the codes streamed into
/// views gathered from the dictionary's (see [`crate::arrow::dict_view_array`]).
fn dict_views(
    name: &str,
    node: &NodeView<'_>,
    utf8: bool,
    views: Vec<u128>,
    scratch: &mut Scratch,
) -> Result<ArrayRef> {
    let wrong = || Error::corrupt("strdict children have the wrong types");
    let index = zipflow_encodings::strdict::View::parse(node)?.index;
    let dict = match scratch.decode(&node.children[1])? {
        Values::Bytes(d) => d,
        other => {
            scratch.give(other);
            return Err(wrong());
        }
    };
    crate::arrow::dict_view_array(name, node, index, dict, utf8, views, scratch)
}

/// A string or binary array from a `strdict` node: the dictionary decoded and checked once,
/// the rows gathered by code (see [`crate::arrow::dict_string_array`]).
fn dict_strings<O: arrow::array::OffsetSizeTrait>(
    name: &str,
    node: &NodeView<'_>,
    utf8: bool,
    scratch: &mut Scratch,
) -> Result<ArrayRef> {
    let index = zipflow_encodings::strdict::View::parse(node)?.index;
    let dict = match scratch.decode(&node.children[1])? {
        Values::Bytes(d) => d,
        other => {
            scratch.give(other);
            return Err(Error::corrupt("strdict children have the wrong types"));
        }
    };
    crate::arrow::dict_string_array::<O>(name, node, index, dict, utf8, scratch)
}

/// A view array from a `words` node over strings, each view built as its string's tokens
/// expand (see [`zipflow_encodings::words::decode_views`]).
fn word_views(
    node: &NodeView<'_>,
    utf8: bool,
    mut views: Vec<u128>,
    scratch: &mut Scratch,
) -> Result<ArrayRef> {
    let mut strings = match scratch.take(PType::Bytes) {
        Values::Bytes(b) => b,
        other => {
            scratch.give(other);
            zipflow_core::values::ByteStrings::default()
        }
    };
    zipflow_encodings::words::decode_views(node, scratch, utf8, &mut strings, &mut views)?;
    let data = std::mem::take(&mut strings.data);
    scratch.give(Values::Bytes(strings));
    // SAFETY: `decode_views` built every view from a range inside `data`, and with `utf8`
    // checked that every string is valid UTF-8 (each is whole dictionary entries, each
    // checked).
    Ok(unsafe { crate::arrow::views_array(views, data, utf8) })
}
