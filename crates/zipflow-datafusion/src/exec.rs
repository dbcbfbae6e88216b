//! `ZfScanExec`: the physical scan of a zipflow table, one partition per group of chunks.

use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, RecordBatchOptions};
use arrow::datatypes::SchemaRef;
use datafusion::common::Statistics;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::metrics::{
    Count, ExecutionPlanMetricsSet, MetricBuilder, MetricsSet,
};
use datafusion::physical_plan::statistics::StatisticsArgs;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
    SendableRecordBatchStream,
};
use zipflow_encodings::Scratch;
use zipflow_format::ZfFile;

use crate::external;
use crate::prune::{ChunkRef, statistics};

/// What [`ZfScanExec`] is built from.
#[derive(Debug, Clone)]
pub(crate) struct ScanParts {
    /// The table's files.
    pub files: Vec<Arc<ZfFile>>,
    /// The table's schema.
    pub table_schema: SchemaRef,
    /// Indices of the columns to decode, in output order.
    pub projection: Vec<usize>,
    /// The chunks left after pruning, in file and row order.
    pub chunks: Vec<ChunkRef>,
    /// Chunks in the table before pruning.
    pub chunks_total: usize,
    /// Most rows any partition needs to produce.
    pub limit: Option<usize>,
    /// Rows per output batch at most.
    pub batch_size: usize,
    /// Partitions to spread the chunks over.
    pub target_partitions: usize,
    /// The filter the chunks were pruned with, and the zone-map predicate derived from it,
    /// both as text for `EXPLAIN`.
    pub predicate: Option<(String, String)>,
}

/// Scans chunks of .zf files, decoding only the projected columns of the chunks that
/// survived zone-map pruning. Each partition is a contiguous run of chunks; its batches are
/// one chunk, or the session's batch size where chunks are larger.
#[derive(Debug)]
pub struct ZfScanExec {
    parts: ScanParts,
    schema: SchemaRef,
    partitions: Vec<Vec<ChunkRef>>,
    metrics: ExecutionPlanMetricsSet,
    cache: Arc<PlanProperties>,
}

impl ZfScanExec {
    pub(crate) fn new(parts: ScanParts) -> Result<ZfScanExec> {
        let schema = Arc::new(parts.table_schema.project(&parts.projection)?);
        let partitions = split(&parts.chunks, parts.target_partitions);
        let cache = PlanProperties::new(
            EquivalenceProperties::new(Arc::clone(&schema)),
            Partitioning::UnknownPartitioning(partitions.len()),
            EmissionType::Incremental,
            Boundedness::Bounded,
        );
        Ok(ZfScanExec {
            parts,
            schema,
            partitions,
            metrics: ExecutionPlanMetricsSet::new(),
            cache: Arc::new(cache),
        })
    }

    /// Chunks (row groups, summed over files) in the table.
    pub fn chunks_total(&self) -> usize {
        self.parts.chunks_total
    }

    /// Chunks the scan will read: those zone-map pruning kept.
    pub fn chunks_scanned(&self) -> usize {
        self.parts.chunks.len()
    }

    /// The most rows the scan produces, where a limit was pushed into it.
    pub fn limit(&self) -> Option<usize> {
        self.parts.limit
    }

    /// The files scanned.
    pub(crate) fn shared_files(&self) -> Vec<Arc<ZfFile>> {
        self.parts.files.clone()
    }

    /// Each output column's index in the table and its type in zipflow's queries (`None`
    /// where they cannot read it).
    pub(crate) fn column_types(&self) -> Vec<(usize, Option<zipflow_compute::SqlType>)> {
        let Some(file) = self.parts.files.first() else {
            return self.parts.projection.iter().map(|&c| (c, None)).collect();
        };
        self.parts
            .projection
            .iter()
            .map(|&c| {
                let ty = file
                    .columns()
                    .get(c)
                    .and_then(|col| zipflow_compute::SqlType::of_column(col.column_type).ok());
                (c, ty)
            })
            .collect()
    }

    /// The paths of the files scanned.
    pub fn files(&self) -> Vec<String> {
        self.parts
            .files
            .iter()
            .map(|f| f.path().display().to_string())
            .collect()
    }
}

/// `with_new_children` of a plan node that has none: itself, if given none.
pub(crate) fn leaf(
    node: Arc<dyn ExecutionPlan>,
    children: &[Arc<dyn ExecutionPlan>],
) -> Result<Arc<dyn ExecutionPlan>> {
    if children.is_empty() {
        Ok(node)
    } else {
        Err(DataFusionError::Internal(format!(
            "{} is a leaf: it takes no children",
            node.name()
        )))
    }
}

/// Splits `chunks` into at most `n` contiguous groups of about equal rows (at least one group).
fn split(chunks: &[ChunkRef], n: usize) -> Vec<Vec<ChunkRef>> {
    let n = n.clamp(1, chunks.len().max(1));
    let total: usize = chunks.iter().map(|c| c.rows).sum();
    let mut out: Vec<Vec<ChunkRef>> = Vec::with_capacity(n);
    let mut current = Vec::new();
    let mut done = 0usize;
    for (i, c) in chunks.iter().enumerate() {
        current.push(*c);
        done += c.rows;
        let left_chunks = chunks.len() - i - 1;
        let left_groups = n - out.len() - 1;
        // Close the group at its share of the rows, or when each later group needs a chunk.
        let share = total.saturating_mul(out.len() + 1) / n;
        if left_groups > 0 && (done >= share || left_chunks == left_groups) {
            out.push(std::mem::take(&mut current));
        }
    }
    out.push(current);
    out
}

impl DisplayAs for ZfScanExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let names: Vec<&str> = self
            .schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        write!(
            f,
            "ZfScanExec: files=[{}], projection=[{}], chunks={} of {}",
            self.files().join(", "),
            names.join(", "),
            self.chunks_scanned(),
            self.chunks_total()
        )?;
        if let Some((predicate, pruning)) = &self.parts.predicate {
            write!(f, ", predicate={predicate}, pruning_predicate={pruning}")?;
        }
        if let Some(limit) = self.parts.limit {
            write!(f, ", limit={limit}")?;
        }
        Ok(())
    }
}

impl ExecutionPlan for ZfScanExec {
    fn name(&self) -> &'static str {
        "ZfScanExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.cache
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        Vec::new()
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        leaf(self, &children)
    }

    fn execute(
        &self,
        partition: usize,
        _context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let chunks = self.partitions.get(partition).ok_or_else(|| {
            DataFusionError::Internal(format!(
                "ZfScanExec has {} partitions, partition {partition} was asked for",
                self.partitions.len()
            ))
        })?;
        let reader = ChunkReader {
            files: self.parts.files.clone(),
            schema: Arc::clone(&self.schema),
            projection: self.parts.projection.clone(),
            chunks: chunks.iter().copied().collect(),
            pending: VecDeque::new(),
            left: self.parts.limit,
            batch_size: self.parts.batch_size.max(1),
            scratch: Scratch::default(),
            decoded: MetricBuilder::new(&self.metrics).counter("chunks_decoded", partition),
            output_rows: MetricBuilder::new(&self.metrics).output_rows(partition),
        };
        let stream = futures::stream::iter(reader);
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            Arc::clone(&self.schema),
            stream,
        )))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }

    fn statistics_from_inputs(
        &self,
        _input_stats: &[Arc<Statistics>],
        args: &StatisticsArgs,
    ) -> Result<Arc<Statistics>> {
        let groups: Vec<&[ChunkRef]> = match args.partition() {
            None => self.partitions.iter().map(Vec::as_slice).collect(),
            Some(p) => vec![self.partitions.get(p).map_or(&[][..], Vec::as_slice)],
        };
        let p = &self.parts;
        Ok(Arc::new(statistics(
            &p.files,
            &p.table_schema,
            &p.projection,
            &groups,
            p.limit,
        )))
    }
}

/// Decodes one partition's chunks into batches, in order, stopping at the limit.
struct ChunkReader {
    files: Vec<Arc<ZfFile>>,
    schema: SchemaRef,
    projection: Vec<usize>,
    chunks: VecDeque<ChunkRef>,
    pending: VecDeque<RecordBatch>,
    left: Option<usize>,
    batch_size: usize,
    scratch: Scratch,
    decoded: Count,
    output_rows: Count,
}

impl ChunkReader {
    /// Decodes the next chunk's projected columns into `pending`, cut to the batch size.
    fn decode_next(&mut self, chunk: ChunkRef) -> Result<()> {
        let file = self.files.get(chunk.file).ok_or_else(|| {
            DataFusionError::Internal(format!(
                "chunk of file {} of {}",
                chunk.file,
                self.files.len()
            ))
        })?;
        let arrays = self
            .projection
            .iter()
            .map(|&col| {
                file.read_array(col, chunk.chunk, &mut self.scratch)
                    .map_err(external)
            })
            .collect::<Result<Vec<ArrayRef>>>()?;
        self.decoded.add(1);
        let options = RecordBatchOptions::new().with_row_count(Some(chunk.rows));
        let batch = RecordBatch::try_new_with_options(Arc::clone(&self.schema), arrays, &options)
            .map_err(|e| {
            DataFusionError::Execution(format!(
                "{}: chunk {}: the decoded columns do not form a batch of the table's schema: {e}",
                file.path().display(),
                chunk.chunk
            ))
        })?;
        let mut offset = 0;
        while offset < batch.num_rows() {
            let len = self.batch_size.min(batch.num_rows() - offset);
            self.pending.push_back(batch.slice(offset, len));
            offset += len;
        }
        Ok(())
    }
}

impl Iterator for ChunkReader {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Result<RecordBatch>> {
        loop {
            if self.left == Some(0) {
                return None;
            }
            if let Some(batch) = self.pending.pop_front() {
                let batch = match self.left {
                    Some(l) if l < batch.num_rows() => batch.slice(0, l),
                    _ => batch,
                };
                self.left = self.left.map(|l| l - batch.num_rows());
                self.output_rows.add(batch.num_rows());
                return Some(Ok(batch));
            }
            let chunk = self.chunks.pop_front()?;
            if let Err(e) = self.decode_next(chunk) {
                self.chunks.clear();
                return Some(Err(e));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunks(rows: &[usize]) -> Vec<ChunkRef> {
        rows.iter()
            .enumerate()
            .map(|(i, &rows)| ChunkRef {
                file: 0,
                chunk: i,
                rows,
            })
            .collect()
    }

    #[test]
    fn split_keeps_order_and_balances_rows() {
        let c = chunks(&[10, 10, 10, 10, 5]);
        let parts = split(&c, 2);
        assert_eq!(parts.len(), 2);
        assert_eq!(parts.concat(), c);
        assert_eq!(parts[0].len(), 3);
        assert_eq!(split(&c, 8).len(), 5);
        assert_eq!(split(&[], 4), vec![Vec::new()]);
        assert_eq!(split(&c, 1), vec![c.clone()]);
    }
}
