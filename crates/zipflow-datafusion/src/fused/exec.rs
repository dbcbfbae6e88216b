//! `ZfAggregateExec`: zipflow's fused scan + aggregate as a DataFusion plan node, emitting a
//! partial aggregate's state.

use std::fmt;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanArray, Date32Array, Decimal128Array, Int64Array, RecordBatch,
    RecordBatchOptions, StringArray,
};
use arrow::compute::{CastOptions, cast_with_options};
use arrow::datatypes::SchemaRef;
use arrow::util::display::FormatOptions;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
    SendableRecordBatchStream,
};
use zipflow_compute::expr::{SqlType, Value};
use zipflow_compute::{Query, ScanOptions, Table};

use crate::external;

/// What [`ZfAggregateExec`] is built from.
pub(crate) struct FusedParts {
    /// One table per file of the scan it replaces.
    pub tables: Vec<Table>,
    /// The fused query: filter, keys, aggregates (keys then aggregates in its rows).
    pub query: Query,
    /// For each field of the partial state, in order, the query's output column it comes
    /// from (its keys, then its aggregates).
    pub slots: Vec<usize>,
    /// The partial state's schema.
    pub schema: SchemaRef,
    /// Worker threads.
    pub threads: usize,
    /// The files' paths, for `EXPLAIN`.
    pub files: Vec<String>,
}

/// Scans zipflow files and aggregates them in one pass (zipflow's fused decode + filter +
/// aggregate on all cores), producing the state a partial `AggregateExec` over a
/// `ZfScanExec` would: one row per group and file, in one partition. Put into plans by
/// [`super::FusedAggregate`].
pub struct ZfAggregateExec {
    parts: Arc<FusedParts>,
    cache: Arc<PlanProperties>,
}

impl fmt::Debug for ZfAggregateExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZfAggregateExec")
            .field("files", &self.parts.files)
            .field("query", &self.parts.query)
            .finish()
    }
}

impl ZfAggregateExec {
    pub(crate) fn new(parts: FusedParts) -> ZfAggregateExec {
        let cache = PlanProperties::new(
            EquivalenceProperties::new(Arc::clone(&parts.schema)),
            Partitioning::UnknownPartitioning(1),
            EmissionType::Final,
            Boundedness::Bounded,
        );
        ZfAggregateExec {
            parts: Arc::new(parts),
            cache: Arc::new(cache),
        }
    }

    /// The fused query each file runs.
    pub fn query(&self) -> &Query {
        &self.parts.query
    }
}

impl DisplayAs for ZfAggregateExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let q = &self.parts.query;
        let names: Vec<&str> = self
            .parts
            .schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        write!(
            f,
            "ZfAggregateExec: files=[{}], keys={}, state=[{}]",
            self.parts.files.join(", "),
            q.keys.len(),
            names.join(", "),
        )?;
        if let Some(filter) = &q.filter {
            write!(f, ", filter={filter:?}")?;
        }
        Ok(())
    }
}

impl ExecutionPlan for ZfAggregateExec {
    fn name(&self) -> &'static str {
        "ZfAggregateExec"
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
        crate::exec::leaf(self, &children)
    }

    fn execute(
        &self,
        partition: usize,
        _context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        if partition != 0 {
            return Err(DataFusionError::Internal(format!(
                "ZfAggregateExec has one partition, partition {partition} was asked for"
            )));
        }
        let parts = Arc::clone(&self.parts);
        let schema = Arc::clone(&parts.schema);
        let batch = async move {
            tokio::task::spawn_blocking(move || run(&parts))
                .await
                .map_err(|e| DataFusionError::External(Box::new(e)))?
        };
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            schema,
            futures::stream::once(batch),
        )))
    }
}

/// Runs the fused query over every file and lays the rows out as the partial state.
fn run(parts: &FusedParts) -> Result<RecordBatch> {
    let opts = ScanOptions {
        threads: parts.threads,
        reference: false,
    };
    let mut rows = Vec::new();
    for t in &parts.tables {
        rows.extend(t.run(&parts.query, &opts).map_err(external)?.rows);
    }
    let mut columns = Vec::with_capacity(parts.slots.len());
    for (&at, field) in parts.slots.iter().zip(parts.schema.fields()) {
        let ty = match parts.query.output.get(at) {
            Some(o) => o.expr.ty(),
            None => {
                return Err(DataFusionError::Internal(format!(
                    "state field `{}` from output column {at} of {}",
                    field.name(),
                    parts.query.output.len()
                )));
            }
        };
        let array = array(rows.iter().map(|r| r.get(at).unwrap_or(&Value::Null)), ty)?;
        let options = CastOptions {
            safe: false,
            format_options: FormatOptions::default(),
        };
        let array = cast_with_options(&array, field.data_type(), &options).map_err(|e| {
            DataFusionError::Execution(format!(
                "{}: `{}` does not fit {}: {e}",
                parts.files.join(", "),
                field.name(),
                field.data_type()
            ))
        })?;
        columns.push(array);
    }
    let options = RecordBatchOptions::new().with_row_count(Some(rows.len()));
    Ok(RecordBatch::try_new_with_options(
        Arc::clone(&parts.schema),
        columns,
        &options,
    )?)
}

/// Values of type `ty` as an Arrow array of that type's widest layout (64-bit integers,
/// 38-digit decimals, dates, strings, booleans).
fn array<'a>(values: impl Iterator<Item = &'a Value>, ty: SqlType) -> Result<ArrayRef> {
    let mismatch =
        |v: &Value| DataFusionError::Internal(format!("a {ty} result holds the value {v:?}"));
    Ok(match ty {
        SqlType::Int => Arc::new(
            values
                .map(|v| match v {
                    Value::Null => Ok(None),
                    Value::Int(x) => Ok(Some(*x)),
                    v => Err(mismatch(v)),
                })
                .collect::<Result<Int64Array>>()?,
        ),
        SqlType::Decimal(s) => Arc::new(
            values
                .map(|v| match v {
                    Value::Null => Ok(None),
                    Value::Decimal(x, t) if *t == s => Ok(Some(*x)),
                    Value::Int(x) if s == 0 => Ok(Some(i128::from(*x))),
                    v => Err(mismatch(v)),
                })
                .collect::<Result<Decimal128Array>>()?
                .with_precision_and_scale(38, s as i8)?,
        ),
        SqlType::Date => Arc::new(
            values
                .map(|v| match v {
                    Value::Null => Ok(None),
                    Value::Date(d) => Ok(Some(*d)),
                    v => Err(mismatch(v)),
                })
                .collect::<Result<Date32Array>>()?,
        ),
        SqlType::Str => Arc::new(
            values
                .map(|v| match v {
                    Value::Null => Ok(None),
                    Value::Str(s) => Ok(Some(s.as_str())),
                    v => Err(mismatch(v)),
                })
                .collect::<Result<StringArray>>()?,
        ),
        SqlType::Bool => Arc::new(
            values
                .map(|v| match v {
                    Value::Null => Ok(None),
                    Value::Bool(b) => Ok(Some(*b)),
                    v => Err(mismatch(v)),
                })
                .collect::<Result<BooleanArray>>()?,
        ),
        SqlType::Float => {
            return Err(DataFusionError::Internal(
                "the fused aggregate has no float fields".into(),
            ));
        }
    })
}
