//! The session zipflow runs DataFusion queries in, with its fixes to DataFusion's functions.
//!
//! DataFusion's grouped MIN and MAX over floats start each group at the type's largest
//! finite value and compare with a partial order: a group of `+inf` (or `-inf`) values
//! reads back as `f64::MAX` (or `f64::MIN`), and NaN is kept or dropped by the order the
//! rows come in. Its row-at-a-time accumulators order floats totally (NaN above every
//! value), as the ungrouped aggregates and ORDER BY do; [`session`] registers MIN and MAX
//! that use them for float arguments.

use std::sync::Arc;

use arrow::datatypes::{DataType, FieldRef};
use datafusion::common::{Result, ScalarValue};
use datafusion::execution::SessionStateBuilder;
use datafusion::functions_aggregate::min_max::{max_udaf, min_udaf};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::AggregateOrderSensitivity;
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Documentation, GroupsAccumulator, ReversedUDAF,
    SetMonotonicity, Signature, StatisticsArgs,
};
use datafusion::prelude::{SessionConfig, SessionContext};

/// A session context with zipflow's fixes registered (see the module docs) and its fused
/// scan + aggregate among the physical optimizer rules ([`crate::FusedAggregate`]).
pub fn session(config: SessionConfig) -> SessionContext {
    let state = SessionStateBuilder::new()
        .with_config(config)
        .with_default_features()
        .with_physical_optimizer_rule(Arc::new(crate::FusedAggregate))
        .build();
    let ctx = SessionContext::new_with_state(state);
    register_functions(&ctx);
    ctx
}

/// Registers zipflow's fixes to DataFusion's functions in `ctx` (see the module docs).
pub fn register_functions(ctx: &SessionContext) {
    for f in [min_udaf(), max_udaf()] {
        ctx.register_udaf(AggregateUDF::new_from_impl(TotalOrder(f.as_ref().clone())));
    }
}

/// MIN or MAX without the grouped accumulator for floats.
#[derive(Debug, PartialEq, Eq, Hash)]
struct TotalOrder(AggregateUDF);

fn is_float(dt: &DataType) -> bool {
    match dt {
        DataType::Float16 | DataType::Float32 | DataType::Float64 => true,
        DataType::Dictionary(_, v) => is_float(v),
        _ => false,
    }
}

impl AggregateUDFImpl for TotalOrder {
    fn name(&self) -> &str {
        self.0.inner().name()
    }

    fn aliases(&self) -> &[String] {
        self.0.inner().aliases()
    }

    fn signature(&self) -> &Signature {
        self.0.inner().signature()
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        self.0.inner().return_type(arg_types)
    }

    fn return_field(&self, arg_fields: &[FieldRef]) -> Result<FieldRef> {
        self.0.inner().return_field(arg_fields)
    }

    fn is_nullable(&self) -> bool {
        self.0.inner().is_nullable()
    }

    fn accumulator(&self, acc_args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        self.0.inner().accumulator(acc_args)
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        self.0.inner().state_fields(args)
    }

    fn groups_accumulator_supported(&self, args: AccumulatorArgs) -> bool {
        !is_float(args.return_field.data_type())
            && self.0.inner().groups_accumulator_supported(args)
    }

    fn create_groups_accumulator(
        &self,
        args: AccumulatorArgs,
    ) -> Result<Box<dyn GroupsAccumulator>> {
        self.0.inner().create_groups_accumulator(args)
    }

    fn create_sliding_accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        self.0.inner().create_sliding_accumulator(args)
    }

    fn order_sensitivity(&self) -> AggregateOrderSensitivity {
        self.0.inner().order_sensitivity()
    }

    fn reverse_expr(&self) -> ReversedUDAF {
        self.0.inner().reverse_expr()
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        self.0.inner().coerce_types(arg_types)
    }

    fn is_descending(&self) -> Option<bool> {
        self.0.inner().is_descending()
    }

    fn value_from_stats(&self, statistics_args: &StatisticsArgs) -> Option<ScalarValue> {
        self.0.inner().value_from_stats(statistics_args)
    }

    fn default_value(&self, data_type: &DataType) -> Result<ScalarValue> {
        self.0.inner().default_value(data_type)
    }

    fn documentation(&self) -> Option<&Documentation> {
        self.0.inner().documentation()
    }

    fn set_monotonicity(&self, data_type: &DataType) -> SetMonotonicity {
        self.0.inner().set_monotonicity(data_type)
    }
}
