//! zipflow files as Apache DataFusion tables.
//!
//! zipflow's own SQL front answers single-table queries on compressed chunks; everything
//! else (joins, subqueries, CTEs, UNION, window functions) runs in DataFusion, reading .zf
//! files through this crate. [`ZfTable`] is a `TableProvider` over one .zf file or many
//! (a directory or a glob of files with one schema):
//!
//! - projection pushdown: only the projected columns' chunks are decoded;
//! - limit pushdown: a partition stops decoding once it has produced the limit;
//! - filter pushdown: the footer's zone maps (per chunk min, max and null count) prune whole
//!   chunks through DataFusion's `PruningPredicate`; the filters are reported `Inexact`, so
//!   DataFusion still filters the rows of the chunks that remain;
//! - statistics from the zone maps (exact row counts, per-column min, max and null count);
//! - [`ZfScanExec`] spreads the remaining chunks over the session's target partitions and
//!   decodes each with the file's own decoders into Arrow arrays of the file's exact types.
//!
//! ```no_run
//! # async fn demo() -> datafusion::error::Result<()> {
//! use std::sync::Arc;
//! use datafusion::prelude::SessionContext;
//! use zipflow_datafusion::ZfTable;
//!
//! let ctx = SessionContext::new();
//! ctx.register_table("lineitem", Arc::new(ZfTable::open("lineitem.zf")?))?;
//! let df = ctx.sql("SELECT l_returnflag, count(*) FROM lineitem GROUP BY 1").await?;
//! df.show().await?;
//! # Ok(())
//! # }
//! ```

mod exec;
mod functions;
pub mod fused;
mod prune;
pub mod query;
mod table;

pub use exec::ZfScanExec;
pub use functions::{register_functions, session};
pub use fused::{FusedAggregate, ZfAggregateExec};
pub use table::ZfTable;

use datafusion::error::DataFusionError;

/// A zipflow error as a DataFusion error; its text names the file, column and chunk.
pub(crate) fn external(e: zipflow_core::Error) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}
