//! `zipflow.File`: an open .zf file, read as pyarrow tables and record batch readers.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use arrow::array::{RecordBatch, RecordBatchOptions, RecordBatchReader};
use arrow::datatypes::SchemaRef;
use arrow::error::ArrowError;
use arrow_pyarrow::{IntoPyArrow, Table, ToPyArrow};
use pyo3::exceptions::PyIndexError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use rayon::prelude::*;
use zipflow_core::Error;
use zipflow_encodings::Scratch;
use zipflow_format::ZfFile;

use crate::errors::{InvalidInputError, to_py};
use crate::query;

/// Opens a .zf file: reads and checks its header, footer and index (no chunk is read yet).
#[pyfunction]
pub fn open(py: Python<'_>, path: PathBuf) -> PyResult<File> {
    let file = py.detach(|| ZfFile::open(&path)).map_err(to_py)?;
    Ok(File {
        inner: Arc::new(file),
    })
}

/// An open .zf file (wrapped by the Python class `zipflow.File`).
#[pyclass(module = "zipflow._zipflow", name = "RawFile", frozen)]
pub struct File {
    inner: Arc<ZfFile>,
}

#[pymethods]
impl File {
    /// The path the file was opened from.
    #[getter]
    fn path(&self) -> PathBuf {
        self.inner.path().to_path_buf()
    }

    /// The pyarrow schema the file was written with.
    #[getter]
    fn schema<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.inner.arrow_schema().as_ref().to_pyarrow(py)
    }

    /// Rows in the file.
    #[getter]
    fn num_rows(&self) -> u64 {
        self.inner.num_rows()
    }

    /// Row groups (chunks per column).
    #[getter]
    fn num_chunks(&self) -> usize {
        self.inner.num_chunks()
    }

    /// Rows per chunk (every chunk but the last holds this many).
    #[getter]
    fn chunk_rows(&self) -> u64 {
        self.inner.chunk_rows()
    }

    /// Column names, in order.
    #[getter]
    fn columns(&self) -> Vec<String> {
        self.inner
            .columns()
            .iter()
            .map(|c| c.name.clone())
            .collect()
    }

    /// Size of the file in bytes.
    #[getter]
    fn nbytes(&self) -> u64 {
        self.inner.file_len()
    }

    fn __len__(&self) -> usize {
        usize::try_from(self.inner.num_rows()).unwrap_or(usize::MAX)
    }

    fn __repr__(&self) -> String {
        format!(
            "zipflow.File('{}': {} rows, {} columns, {} bytes)",
            self.inner.path().display(),
            self.inner.num_rows(),
            self.inner.columns().len(),
            self.inner.file_len()
        )
    }

    /// What `zipflow inspect` shows, as a dict: the file's rows, chunks and size, and per
    /// column its type, plans (with the chunks using each), sizes and null count.
    fn inspect<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let f = &self.inner;
        let out = PyDict::new(py);
        out.set_item("path", f.path())?;
        out.set_item("rows", f.num_rows())?;
        out.set_item("chunks", f.num_chunks())?;
        out.set_item("chunk_rows", f.chunk_rows())?;
        out.set_item("bytes", f.file_len())?;
        let columns = PyList::empty(py);
        for (c, meta) in f.columns().iter().enumerate() {
            let (mut compressed, mut plain, mut nulls) = (0u64, 0u64, 0u64);
            let mut plans: BTreeMap<String, usize> = BTreeMap::new();
            for chunk in 0..f.num_chunks() {
                let cm = f.try_chunk_meta(c, chunk).map_err(to_py)?;
                compressed += cm.compressed_bytes();
                plain += cm.plain_bytes;
                nulls += cm.stats.null_count;
                *plans.entry(cm.plan.clone()).or_default() += 1;
            }
            let col = PyDict::new(py);
            col.set_item("name", &meta.name)?;
            col.set_item("type", meta.column_type.to_string())?;
            col.set_item("nullable", meta.nullable)?;
            col.set_item("plans", plans)?;
            col.set_item("compressed_bytes", compressed)?;
            col.set_item("plain_bytes", plain)?;
            col.set_item("null_count", nulls)?;
            columns.append(col)?;
        }
        out.set_item("columns", columns)?;
        Ok(out)
    }

    /// Reads the file (or `columns` of it) as a pyarrow table; `filter` is a SQL predicate
    /// over the columns, evaluated by the query engine with zone-map pruning. `threads`: 0 for
    /// one per core.
    #[pyo3(signature = (columns=None, filter=None, threads=0))]
    fn read<'py>(
        &self,
        py: Python<'py>,
        columns: Option<Vec<String>>,
        filter: Option<String>,
        threads: usize,
    ) -> PyResult<Bound<'py, PyAny>> {
        let projection = self.projection(columns.as_deref())?;
        let (schema, batches) = match filter {
            Some(predicate) => {
                let file = Arc::clone(&self.inner);
                let names = self.names(&projection);
                py.detach(|| query::filtered(file, &names, &predicate, threads))?
            }
            None => {
                let file = &self.inner;
                let schema = projected_schema(file, &projection)?;
                let batches = py
                    .detach(|| read_all(file, &projection, &schema, threads))
                    .map_err(to_py)?;
                (schema, batches)
            }
        };
        let table = Table::try_new(batches, schema).map_err(|e| to_py(assembling(e)))?;
        table.into_pyarrow(py)
    }

    /// Row group `i` (or `columns` of it) as a pyarrow record batch, decoded on this thread.
    #[pyo3(signature = (i, columns=None))]
    fn read_row_group<'py>(
        &self,
        py: Python<'py>,
        i: usize,
        columns: Option<Vec<String>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let f = &self.inner;
        if i >= f.num_chunks() {
            return Err(PyIndexError::new_err(format!(
                "{}: row group {i} out of range: the file has {}",
                f.path().display(),
                f.num_chunks()
            )));
        }
        let projection = self.projection(columns.as_deref())?;
        let schema = projected_schema(f, &projection)?;
        let batch = py
            .detach(|| read_projected(f, i, &projection, &schema, &mut Scratch::default()))
            .map_err(to_py)?;
        batch.to_pyarrow(py)
    }

    /// The file (or `columns` of it, rows passing `filter`) as a `pyarrow.RecordBatchReader`
    /// that decodes one row group per batch as it is read.
    #[pyo3(signature = (columns=None, filter=None, threads=0))]
    fn iter_batches<'py>(
        &self,
        py: Python<'py>,
        columns: Option<Vec<String>>,
        filter: Option<String>,
        threads: usize,
    ) -> PyResult<Bound<'py, PyAny>> {
        let projection = self.projection(columns.as_deref())?;
        let reader: Box<dyn RecordBatchReader + Send> = match filter {
            Some(predicate) => {
                let names = self.names(&projection);
                let file = Arc::clone(&self.inner);
                Box::new(py.detach(|| query::stream(file, &names, &predicate, threads))?)
            }
            None => {
                let schema = projected_schema(&self.inner, &projection)?;
                Box::new(ChunkReader {
                    file: Arc::clone(&self.inner),
                    projection,
                    schema,
                    next: 0,
                    scratch: Scratch::default(),
                })
            }
        };
        reader.into_pyarrow(py)
    }
}

impl File {
    /// The open file.
    pub(crate) fn zf(&self) -> &Arc<ZfFile> {
        &self.inner
    }

    /// The names of the columns at `projection`.
    fn names(&self, projection: &[usize]) -> Vec<String> {
        projection
            .iter()
            .map(|&c| self.inner.columns()[c].name.clone())
            .collect()
    }

    /// The indices of `columns` (all when `None`), refusing unknown and repeated names.
    pub(crate) fn projection(&self, columns: Option<&[String]>) -> PyResult<Vec<usize>> {
        let f = &self.inner;
        let Some(names) = columns else {
            return Ok((0..f.columns().len()).collect());
        };
        let mut out = Vec::with_capacity(names.len());
        for name in names {
            let Some(i) = f.column_index(name) else {
                let all: Vec<&str> = f.columns().iter().map(|c| c.name.as_str()).collect();
                return Err(InvalidInputError::new_err(format!(
                    "{}: no column `{name}` (columns: {})",
                    f.path().display(),
                    all.join(", ")
                )));
            };
            if out.contains(&i) {
                return Err(InvalidInputError::new_err(format!(
                    "column `{name}` named twice"
                )));
            }
            out.push(i);
        }
        Ok(out)
    }
}

/// The file's schema reduced to `projection`, metadata kept.
fn projected_schema(file: &ZfFile, projection: &[usize]) -> PyResult<SchemaRef> {
    let schema = file.arrow_schema();
    schema
        .project(projection)
        .map(Arc::new)
        .map_err(|e| to_py(Error::external("projecting the schema", e).in_file(file.path())))
}

fn assembling(e: ArrowError) -> Error {
    Error::external("assembling the table", e)
}

/// Seconds the Rust reader takes to decode `columns` of the file at `path` into Arrow arrays
/// on one thread (the median of `runs`): the reference `File.read(threads=1)`
/// is measured against (python/bench/read_speed.py).
#[pyfunction]
#[pyo3(signature = (path, columns=None, runs=5))]
pub fn bench_rust_read(
    py: Python<'_>,
    path: PathBuf,
    columns: Option<Vec<String>>,
    runs: usize,
) -> PyResult<f64> {
    let file = open(py, path)?;
    let projection = file.projection(columns.as_deref())?;
    let schema = projected_schema(&file.inner, &projection)?;
    let mut secs = py
        .detach(|| {
            (0..runs.max(1))
                .map(|_| {
                    let start = std::time::Instant::now();
                    let batches = read_all(&file.inner, &projection, &schema, 1)?;
                    let secs = start.elapsed().as_secs_f64();
                    // Freed outside the timing, as the Python side frees its table.
                    drop(std::hint::black_box(batches));
                    Ok(secs)
                })
                .collect::<zipflow_core::Result<Vec<f64>>>()
        })
        .map_err(to_py)?;
    secs.sort_by(f64::total_cmp);
    Ok(secs[secs.len() / 2])
}

/// Every row group of `file`, columns `projection`, decoded on `threads` threads (0: one per
/// core; 1: this thread alone).
fn read_all(
    file: &ZfFile,
    projection: &[usize],
    schema: &SchemaRef,
    threads: usize,
) -> zipflow_core::Result<Vec<RecordBatch>> {
    let one =
        |scratch: &mut Scratch, i: usize| read_projected(file, i, projection, schema, scratch);
    if threads == 1 {
        let mut scratch = Scratch::default();
        return (0..file.num_chunks())
            .map(|i| one(&mut scratch, i))
            .collect();
    }
    let run = || {
        (0..file.num_chunks())
            .into_par_iter()
            .map_init(Scratch::default, one)
            .collect()
    };
    if threads == 0 {
        return run();
    }
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| Error::external("starting the decode threads", e))?
        .install(run)
}

/// Row group `i` of `file`, columns `projection` (whose schema is `schema`), decoded on
/// this thread.
fn read_projected(
    file: &ZfFile,
    i: usize,
    projection: &[usize],
    schema: &SchemaRef,
    scratch: &mut Scratch,
) -> zipflow_core::Result<RecordBatch> {
    let arrays = projection
        .iter()
        .map(|&c| file.read_array(c, i, scratch))
        .collect::<zipflow_core::Result<Vec<_>>>()?;
    let first = i as u64 * file.chunk_rows();
    let rows = file.chunk_rows().min(file.num_rows().saturating_sub(first)) as usize;
    let options = RecordBatchOptions::new().with_row_count(Some(rows));
    RecordBatch::try_new_with_options(Arc::clone(schema), arrays, &options)
        .map_err(|e| Error::external(format!("assembling row group {i}"), e).in_file(file.path()))
}

/// Row groups decoded one per batch, as they are asked for.
struct ChunkReader {
    file: Arc<ZfFile>,
    projection: Vec<usize>,
    schema: SchemaRef,
    next: usize,
    scratch: Scratch,
}

impl Iterator for ChunkReader {
    type Item = Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.next >= self.file.num_chunks() {
            return None;
        }
        let i = self.next;
        self.next += 1;
        Some(
            read_projected(
                &self.file,
                i,
                &self.projection,
                &self.schema,
                &mut self.scratch,
            )
            .map_err(|e| ArrowError::ExternalError(Box::new(e))),
        )
    }
}

impl RecordBatchReader for ChunkReader {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }
}
