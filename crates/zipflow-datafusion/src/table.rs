//! `ZfTable`: one or more .zf files of one schema as a DataFusion table.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use async_trait::async_trait;
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::{DFSchema, Statistics};
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::utils::conjunction;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown, TableType};
use datafusion::physical_optimizer::pruning::PruningPredicateBuilder;
use datafusion::physical_plan::ExecutionPlan;
use zipflow_format::ZfFile;

use crate::exec::{ScanParts, ZfScanExec};
use crate::external;
use crate::prune::{ChunkRef, ChunkStatistics, all_chunks, statistics};

/// One .zf file, or several with the same schema (a directory of .zf files or a glob), as a
/// DataFusion table. Files are opened (footers read and checked) once, when the table is.
#[derive(Debug, Clone)]
pub struct ZfTable {
    files: Vec<Arc<ZfFile>>,
    schema: SchemaRef,
}

impl ZfTable {
    /// Opens a table: `path` is a .zf file, a directory (every `*.zf` file in it, in name
    /// order) or a glob pattern such as `data/part-*.zf`.
    pub fn open(path: impl AsRef<Path>) -> Result<ZfTable> {
        let path = path.as_ref();
        let text = path.to_string_lossy();
        let paths = if path.is_dir() {
            directory_files(path)?
        } else if text.contains(['*', '?', '[']) && !path.exists() {
            glob_files(&text)?
        } else {
            vec![path.to_path_buf()]
        };
        Self::open_files(&paths)
    }

    /// Opens a table of the files `paths`, which must all have the schema of the first.
    pub fn open_files(paths: &[PathBuf]) -> Result<ZfTable> {
        let files = paths
            .iter()
            .map(|p| ZfFile::open(p).map(Arc::new).map_err(external))
            .collect::<Result<Vec<_>>>()?;
        Self::from_files(files)
    }

    /// A table of files already open, which must all have the schema of the first.
    pub fn from_files(files: Vec<Arc<ZfFile>>) -> Result<ZfTable> {
        let Some(first) = files.first() else {
            return Err(DataFusionError::Plan(
                "a zipflow table needs at least one file".into(),
            ));
        };
        let schema = first.arrow_schema();
        for f in &files[1..] {
            let other = f.arrow_schema();
            if other.fields() != schema.fields() {
                return Err(DataFusionError::Plan(format!(
                    "{} does not have the schema of {}: {} against {}",
                    f.path().display(),
                    first.path().display(),
                    describe(&other),
                    describe(&schema)
                )));
            }
        }
        Ok(ZfTable { files, schema })
    }

    /// The files of the table.
    pub fn files(&self) -> &[Arc<ZfFile>] {
        &self.files
    }

    /// Total rows over all files.
    pub fn num_rows(&self) -> u64 {
        self.files.iter().map(|f| f.num_rows()).sum()
    }

    /// The chunks `filters` cannot rule out by their zone maps, and the predicate as text.
    #[allow(clippy::type_complexity)] // (chunks kept, (predicate, pruning predicate) shown)
    fn prune(
        &self,
        state: &dyn Session,
        filters: &[Expr],
        chunks: Vec<ChunkRef>,
    ) -> Result<(Vec<ChunkRef>, Option<(String, String)>)> {
        let Some(filter) = conjunction(filters.iter().cloned()) else {
            return Ok((chunks, None));
        };
        let df_schema = DFSchema::try_from(Arc::clone(&self.schema))?;
        let physical = state.create_physical_expr(filter, &df_schema)?;
        let pruning = PruningPredicateBuilder::new()
            .with_file_schema(Arc::clone(&self.schema))
            .try_build(physical)?;
        let text = Some((
            pruning.orig_expr().to_string(),
            pruning.predicate_expr().to_string(),
        ));
        if pruning.always_true() {
            return Ok((chunks, text));
        }
        let stats = ChunkStatistics {
            files: &self.files,
            schema: &self.schema,
            chunks: &chunks,
        };
        let keep = pruning.prune(&stats)?;
        let kept = chunks
            .iter()
            .zip(keep)
            .filter_map(|(c, k)| k.then_some(*c))
            .collect();
        Ok((kept, text))
    }
}

/// A schema's fields as `name: type` text, for errors.
fn describe(schema: &SchemaRef) -> String {
    let fields: Vec<String> = schema
        .fields()
        .iter()
        .map(|f| format!("{}: {}", f.name(), f.data_type()))
        .collect();
    format!("({})", fields.join(", "))
}

/// The `*.zf` files in `dir`, in name order.
fn directory_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let io = |e: std::io::Error| {
        DataFusionError::Execution(format!("reading directory {}: {e}", dir.display()))
    };
    let mut paths = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let p = entry.map_err(io)?.path();
        if p.is_file() && p.extension().is_some_and(|e| e == "zf") {
            paths.push(p);
        }
    }
    paths.sort();
    if paths.is_empty() {
        return Err(DataFusionError::Plan(format!(
            "directory {} holds no .zf files",
            dir.display()
        )));
    }
    Ok(paths)
}

/// The files matching the glob `pattern`, in name order.
fn glob_files(pattern: &str) -> Result<Vec<PathBuf>> {
    let matches = glob::glob(pattern)
        .map_err(|e| DataFusionError::Plan(format!("bad glob pattern `{pattern}`: {e}")))?;
    let mut paths = Vec::new();
    for m in matches {
        let p = m.map_err(|e| DataFusionError::Execution(format!("`{pattern}`: {e}")))?;
        if p.is_file() {
            paths.push(p);
        }
    }
    paths.sort();
    if paths.is_empty() {
        return Err(DataFusionError::Plan(format!(
            "no file matches `{pattern}`"
        )));
    }
    Ok(paths)
}

#[async_trait]
impl TableProvider for ZfTable {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let projection = projection
            .cloned()
            .unwrap_or_else(|| (0..self.schema.fields().len()).collect());
        let chunks = all_chunks(&self.files);
        let chunks_total = chunks.len();
        let (chunks, predicate) = self.prune(state, filters, chunks)?;
        let config = state.config();
        let exec = ZfScanExec::new(ScanParts {
            files: self.files.clone(),
            table_schema: Arc::clone(&self.schema),
            projection,
            chunks,
            chunks_total,
            limit,
            batch_size: config.batch_size(),
            target_partitions: config.target_partitions(),
            predicate,
        })?;
        Ok(Arc::new(exec))
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> Result<Vec<TableProviderFilterPushDown>> {
        // Filters prune whole chunks only; DataFusion still filters the rows of the rest.
        Ok(vec![TableProviderFilterPushDown::Inexact; filters.len()])
    }

    fn statistics(&self) -> Option<Statistics> {
        let chunks = all_chunks(&self.files);
        let projection: Vec<usize> = (0..self.schema.fields().len()).collect();
        Some(statistics(
            &self.files,
            &self.schema,
            &projection,
            &[&chunks],
            None,
        ))
    }
}
