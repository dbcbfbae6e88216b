//! SQL through DataFusion over zipflow tables: `zipflow.sql` and the filtered reads of a
//! `File`.

use std::path::PathBuf;
use std::sync::Arc;

use arrow::array::{RecordBatch, RecordBatchReader};
use arrow::datatypes::SchemaRef;
use arrow::error::ArrowError;
use arrow_pyarrow::{IntoPyArrow, PyArrowType, Table};
use datafusion::datasource::MemTable;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::prelude::{SessionConfig, SessionContext};
use futures::StreamExt;
use pyo3::prelude::*;
use tokio::runtime::Runtime;
use zipflow_datafusion::ZfTable;
use zipflow_format::ZfFile;

use crate::errors::{QueryError, query_error};

/// Runs `query` and returns a pyarrow table. `paths` maps table names to .zf files,
/// directories or globs; `tables` maps names to Arrow data (pyarrow tables). Files quoted in
/// FROM (`FROM 'lineitem.zf'`) are tables too.
#[pyfunction]
#[pyo3(signature = (query, paths, tables, threads=0))]
pub fn sql<'py>(
    py: Python<'py>,
    query: String,
    paths: Vec<(String, PathBuf)>,
    tables: Vec<(String, PyArrowType<Table>)>,
    threads: usize,
) -> PyResult<Bound<'py, PyAny>> {
    let memory: Vec<(String, Table)> = tables.into_iter().map(|(n, t)| (n, t.0)).collect();
    let (schema, batches) = py.detach(|| {
        let (runtime, ctx) = session(threads)?;
        runtime.block_on(async {
            for (name, path) in &paths {
                let table = ZfTable::open(path).map_err(query_error)?;
                ctx.register_table(name.as_str(), Arc::new(table))
                    .map_err(query_error)?;
            }
            for (name, table) in memory {
                let (batches, schema) = table.into_inner();
                let mem = MemTable::try_new(schema, vec![batches]).map_err(query_error)?;
                ctx.register_table(name.as_str(), Arc::new(mem))
                    .map_err(query_error)?;
            }
            let (text, _) = zipflow_datafusion::query::register_quoted_tables(&ctx, &query)
                .map_err(query_error)?;
            collect(&ctx, &text).await
        })
    })?;
    let table = Table::try_new(batches, schema).map_err(|e| QueryError::new_err(e.to_string()))?;
    table.into_pyarrow(py)
}

/// `file`'s columns `names`, rows where `predicate` holds, collected.
pub fn filtered(
    file: Arc<ZfFile>,
    names: &[String],
    predicate: &str,
    threads: usize,
) -> PyResult<(SchemaRef, Vec<RecordBatch>)> {
    let (runtime, ctx) = session(threads)?;
    let text = select(&ctx, file, names, predicate)?;
    runtime.block_on(collect(&ctx, &text))
}

/// `file`'s columns `names`, rows where `predicate` holds, as a stream read batch by batch.
pub fn stream(
    file: Arc<ZfFile>,
    names: &[String],
    predicate: &str,
    threads: usize,
) -> PyResult<StreamReader> {
    let (runtime, ctx) = session(threads)?;
    let text = select(&ctx, file, names, predicate)?;
    let stream = runtime.block_on(async {
        ctx.sql(&text)
            .await
            .map_err(query_error)?
            .execute_stream()
            .await
            .map_err(query_error)
    })?;
    Ok(StreamReader { runtime, stream })
}

/// A query's batches as a [`RecordBatchReader`], each computed when it is asked for.
pub struct StreamReader {
    runtime: Runtime,
    stream: SendableRecordBatchStream,
}

impl Iterator for StreamReader {
    type Item = Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        let next = self.runtime.block_on(self.stream.next())?;
        Some(next.map_err(|e| ArrowError::ExternalError(Box::new(e))))
    }
}

impl RecordBatchReader for StreamReader {
    fn schema(&self) -> SchemaRef {
        self.stream.schema()
    }
}

/// A runtime with `threads` workers (0: one per core) and a zipflow session using them.
fn session(threads: usize) -> PyResult<(Runtime, SessionContext)> {
    let (runtime, threads) = zipflow_datafusion::query::runtime(threads)
        .map_err(|e| QueryError::new_err(format!("starting the query runtime: {e}")))?;
    let config = SessionConfig::new()
        .with_target_partitions(threads)
        .with_information_schema(true);
    Ok((runtime, zipflow_datafusion::session(config)))
}

/// Registers `file` and returns the query selecting `names` where `predicate` holds.
fn select(
    ctx: &SessionContext,
    file: Arc<ZfFile>,
    names: &[String],
    predicate: &str,
) -> PyResult<String> {
    let table = ZfTable::from_files(vec![file]).map_err(query_error)?;
    ctx.register_table("zipflow_file", Arc::new(table))
        .map_err(query_error)?;
    if names.is_empty() {
        return Err(QueryError::new_err(
            "a filtered read needs at least one column",
        ));
    }
    let columns = names
        .iter()
        .map(|n| quote(n))
        .collect::<Vec<_>>()
        .join(", ");
    Ok(format!(
        "SELECT {columns} FROM zipflow_file WHERE {predicate}"
    ))
}

/// `name` as a SQL identifier, exactly as written.
fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

async fn collect(ctx: &SessionContext, text: &str) -> PyResult<(SchemaRef, Vec<RecordBatch>)> {
    let df = ctx.sql(text).await.map_err(query_error)?;
    let planned: SchemaRef = Arc::new(df.schema().as_arrow().clone());
    let batches = df.collect().await.map_err(query_error)?;
    // The batches' own schema, which the physical plan may state more exactly (nullability).
    let schema = batches.first().map_or(planned, RecordBatch::schema);
    Ok((schema, batches))
}
