//! zipflow's fused scan + aggregate inside DataFusion plans.
//!
//! [`FusedAggregate`] is a physical optimizer rule. Where a plan aggregates a zipflow table
//! directly, `AggregateExec(Partial) <- [FilterExec | ProjectionExec | RepartitionExec |
//! CooperativeExec]* <- ZfScanExec`, it replaces that subtree by a [`ZfAggregateExec`]:
//! zipflow's own scan, which decodes, filters and aggregates each chunk in one pass on all
//! cores (the fused block path of `zipflow sql --engine native`) and emits the same partial
//! state the `AggregateExec` would have, so DataFusion's final aggregation above it, and
//! everything above that (HAVING, ORDER BY, joins with other inputs), is unchanged. A
//! single-stage aggregate (`mode=Single`) becomes DataFusion's final aggregate over the
//! fused one.
//!
//! It rewrites only what it computes exactly as DataFusion does (the `translate` module): group
//! keys that are columns; `count`, `sum`, `min`, `max` and `avg` over integers, decimals,
//! dates (and strings for `min` and `max`), without DISTINCT, FILTER or ORDER BY; filters
//! and arguments made of comparisons, boolean logic, IN lists, LIKE, CASE, lossless casts
//! and 64-bit integer or decimal arithmetic. Anything else keeps DataFusion's operators.
//! Integer overflow is an error in zipflow where DataFusion would wrap.

mod exec;
mod translate;

use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::error::Result;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::coop::CooperativeExec;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::repartition::RepartitionExec;
use zipflow_compute::expr::{Expr, SqlType};
use zipflow_compute::query::{AggFunc, Aggregate, OutputColumn};
use zipflow_compute::{Query, Table};

use crate::ZfScanExec;
use exec::FusedParts;
pub use exec::ZfAggregateExec;
use translate::{Unsupported, sql_type, translate};

/// The physical optimizer rule that puts zipflow's fused scan + aggregate into DataFusion
/// plans (see the module docs). [`crate::session`] adds it; add it to a session of your own
/// with `SessionStateBuilder::with_physical_optimizer_rule`.
#[derive(Debug, Default)]
pub struct FusedAggregate;

impl PhysicalOptimizerRule for FusedAggregate {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let threads = config.execution.target_partitions;
        plan.transform_up(|node| {
            let Some(agg) = node.downcast_ref::<AggregateExec>() else {
                return Ok(Transformed::no(node));
            };
            match fuse(agg, threads) {
                Ok(fused) => Ok(Transformed::yes(fused)),
                Err(_) => Ok(Transformed::no(node)),
            }
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "zipflow_fused_aggregate"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// What lies under an aggregate: the scan, each of the input's columns in zipflow's terms,
/// and the filter the rows pass.
struct Input<'a> {
    scan: &'a ZfScanExec,
    columns: Vec<Option<Expr>>,
    filter: Vec<Expr>,
}

/// Follows `plan` down to a zipflow scan through the operators that keep rows as they are
/// (filters drop some), translating filters and projections on the way.
fn input_of(plan: &Arc<dyn ExecutionPlan>) -> std::result::Result<Input<'_>, Unsupported> {
    if let Some(scan) = plan.downcast_ref::<ZfScanExec>() {
        if scan.limit().is_some() {
            return Err(Unsupported("a scan with a limit".into()));
        }
        let columns = scan
            .column_types()
            .into_iter()
            // Floats stay with DataFusion: it orders -0.0 below 0.0 and sums in its own
            // order, where zipflow's SQL takes the zeros as equal.
            .map(|(index, ty)| {
                ty.filter(|t| *t != SqlType::Float)
                    .map(|ty| Expr::Column { index, ty })
            })
            .collect();
        return Ok(Input {
            scan,
            columns,
            filter: Vec::new(),
        });
    }
    if let Some(f) = plan.downcast_ref::<FilterExec>() {
        let mut input = input_of(f.input())?;
        let schema = f.input().schema();
        let predicate = translate(f.predicate(), &schema, &input.columns)?;
        if predicate.ty() != SqlType::Bool {
            return Err(Unsupported("a filter that is not boolean".into()));
        }
        input.filter.push(predicate);
        if let Some(p) = f.projection() {
            input.columns = p
                .iter()
                .map(|&i| input.columns.get(i).cloned().flatten())
                .collect();
        }
        return Ok(input);
    }
    if let Some(p) = plan.downcast_ref::<ProjectionExec>() {
        let mut input = input_of(p.input())?;
        let schema = p.input().schema();
        input.columns = p
            .expr()
            .iter()
            .map(|e| translate(&e.expr, &schema, &input.columns).ok())
            .collect();
        return Ok(input);
    }
    if let Some(r) = plan.downcast_ref::<RepartitionExec>() {
        return input_of(r.input());
    }
    if let Some(c) = plan.downcast_ref::<CooperativeExec>() {
        return input_of(c.input());
    }
    Err(Unsupported(format!("input {}", plan.name())))
}

/// The fused replacement of `agg`, or why there is none.
fn fuse(
    agg: &AggregateExec,
    threads: usize,
) -> std::result::Result<Arc<dyn ExecutionPlan>, Unsupported> {
    let err = |what: &str| Unsupported(what.to_string());
    let single = match agg.mode() {
        AggregateMode::Partial => false,
        AggregateMode::Single | AggregateMode::SinglePartitioned => true,
        _ => return Err(err("an aggregate over partial states")),
    };
    let group_by = agg.group_expr();
    if !group_by.is_single() {
        return Err(err("grouping sets"));
    }
    if agg.limit_options().is_some() {
        return Err(err("an aggregate with a limit"));
    }
    if agg.filter_expr().iter().any(Option::is_some) {
        return Err(err("aggregate FILTER"));
    }
    let input = input_of(agg.input())?;
    let schema = agg.input().schema();
    let mut keys = Vec::new();
    for (e, _) in group_by.expr() {
        match translate(e, &schema, &input.columns)? {
            k @ Expr::Column { .. } => keys.push(k),
            _ => return Err(err("a group key that is not a column")),
        }
    }
    let mut aggregates: Vec<Aggregate> = Vec::new();
    let mut slot = |func: AggFunc, arg: Option<Expr>, ty: SqlType| {
        let a = Aggregate {
            func,
            arg,
            ty,
            distinct: false,
        };
        match aggregates.iter().position(|x| *x == a) {
            Some(i) => i,
            None => {
                aggregates.push(a);
                aggregates.len() - 1
            }
        }
    };
    // For each state field, in the order of the partial aggregate's output, the fused
    // query's output column it comes from: the keys, then the aggregates.
    let nkeys = keys.len();
    let mut slots: Vec<usize> = (0..nkeys).collect();
    for a in agg.aggr_expr() {
        if a.is_distinct() || !a.order_bys().is_empty() {
            return Err(err("DISTINCT or ordered aggregates"));
        }
        let args = a.expressions();
        let arg = match args.as_slice() {
            [x] => translate(x, &schema, &input.columns)?,
            _ => return Err(err("an aggregate of several arguments")),
        };
        let ty = arg.ty();
        let integral = matches!(ty, SqlType::Int | SqlType::Decimal(_));
        let sum_ty = SqlType::Decimal(ty.scale());
        match a.fun().name() {
            "count" => {
                let i = match &arg {
                    Expr::Lit(v, _) if *v != zipflow_compute::Value::Null => {
                        slot(AggFunc::CountStar, None, SqlType::Int)
                    }
                    Expr::Lit(..) => return Err(err("count(NULL)")),
                    _ => slot(AggFunc::Count, Some(arg), SqlType::Int),
                };
                slots.push(nkeys + i);
            }
            "sum" if integral => {
                let i = slot(AggFunc::Sum, Some(arg), sum_ty);
                slots.push(nkeys + i);
            }
            "avg" if matches!(ty, SqlType::Decimal(_)) => {
                let c = slot(AggFunc::Count, Some(arg.clone()), SqlType::Int);
                let s = slot(AggFunc::Sum, Some(arg), sum_ty);
                slots.push(nkeys + c);
                slots.push(nkeys + s);
            }
            f @ ("min" | "max") if integral || matches!(ty, SqlType::Date | SqlType::Str) => {
                let func = if f == "min" {
                    AggFunc::Min
                } else {
                    AggFunc::Max
                };
                let i = slot(func, Some(arg), ty);
                slots.push(nkeys + i);
            }
            f => return Err(Unsupported(format!("aggregate {f} over {ty}"))),
        }
    }
    // The partial state's schema: the aggregate's own where it is partial, else the one a
    // partial aggregate of the same expressions has.
    let partial_schema: SchemaRef = if single {
        partial_of(agg)?.schema()
    } else {
        agg.schema()
    };
    if partial_schema.fields().len() != slots.len() {
        return Err(err("a partial state of unexpected fields"));
    }
    for (f, &s) in partial_schema.fields().iter().zip(&slots) {
        let ty = match s.checked_sub(nkeys) {
            None => keys[s].ty(),
            Some(i) => aggregates[i].ty,
        };
        // Counts are UInt64 in some states; every other field is of the slot's kind.
        let fits = match (sql_type(f.data_type()), ty) {
            (Some(a), b) if a == b => true,
            (Some(SqlType::Int), SqlType::Decimal(0)) => true,
            (None, SqlType::Int) => matches!(f.data_type(), arrow::datatypes::DataType::UInt64),
            _ => false,
        };
        if !fits {
            return Err(Unsupported(format!(
                "state field {} of type {}",
                f.name(),
                f.data_type()
            )));
        }
    }
    let tables = input
        .scan
        .shared_files()
        .into_iter()
        .map(Table::shared)
        .collect();
    let filter = match input.filter.len() {
        0 => None,
        1 => input.filter.into_iter().next(),
        _ => Some(Expr::And(input.filter)),
    };
    let output = keys
        .iter()
        .enumerate()
        .map(|(i, k)| OutputColumn {
            name: format!("key{i}"),
            expr: Expr::KeyRef(i, k.ty()),
        })
        .chain(aggregates.iter().enumerate().map(|(i, a)| OutputColumn {
            name: format!("agg{i}"),
            expr: Expr::AggRef(i, a.ty),
        }))
        .collect();
    let query = Query {
        table: String::new(),
        filter,
        keys,
        aggregates,
        aggregating: true,
        having: None,
        output,
        hidden: 0,
        order_by: Vec::new(),
        limit: None,
        offset: 0,
    };
    let fused: Arc<dyn ExecutionPlan> = Arc::new(ZfAggregateExec::new(FusedParts {
        tables,
        query,
        slots,
        schema: partial_schema,
        threads,
        files: input.scan.files(),
    }));
    if !single {
        return Ok(fused);
    }
    let final_agg = AggregateExec::try_new(
        AggregateMode::Final,
        group_by.as_final(),
        agg.aggr_expr().to_vec(),
        vec![None; agg.aggr_expr().len()],
        fused,
        agg.input_schema(),
    )
    .map_err(|e| Unsupported(e.to_string()))?;
    Ok(Arc::new(final_agg))
}

/// The partial aggregate a single-stage `agg` splits into.
fn partial_of(agg: &AggregateExec) -> std::result::Result<AggregateExec, Unsupported> {
    AggregateExec::try_new(
        AggregateMode::Partial,
        agg.group_expr().clone(),
        agg.aggr_expr().to_vec(),
        agg.filter_expr().to_vec(),
        Arc::clone(agg.input()),
        agg.input_schema(),
    )
    .map_err(|e| Unsupported(e.to_string()))
}
