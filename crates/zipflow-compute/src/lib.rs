//! Queries on compressed zipflow files, on the CPU.
//!
//! The read path of a query: SQL text ([`sql::plan`]) becomes a bound [`Query`] over the
//! expression IR ([`expr`]); [`Table::run`] scans the file chunk by chunk in parallel, each
//! chunk 1024 values at a time ([`column`](mod@column)), evaluating predicates in the encoded domain
//! (zone maps, packed-domain compares, dictionary tables) and folding the surviving rows into
//! per-group accumulators. A row-at-a-time reference path gives the same results and serves
//! chunks with nulls and constructs the block path lacks.
//!
//! ```no_run
//! use zipflow_compute::{Format, ScanOptions, Table, sql};
//!
//! let table = Table::open("lineitem.zf").unwrap();
//! let q = sql::plan(
//!     "SELECT l_returnflag, sum(l_quantity) FROM 'lineitem.zf' GROUP BY l_returnflag",
//!     &table.schema().unwrap(),
//! )
//! .unwrap();
//! let result = table.run(&q, &ScanOptions::default()).unwrap();
//! print!("{}", result.render(Format::Table));
//! ```

pub mod column;
pub mod expr;
pub mod like;
pub mod ndvi;
mod prefetch;
pub mod query;
pub mod raster;
mod scan;
pub mod sql;
pub mod tpch;

pub use expr::{Expr, SqlType, Value};
pub use query::{Format, Query, QueryResult};
pub use scan::{AggState, GroupState, ScanOptions, Table, finish_groups};

/// Runs SQL against the .zf file named in its FROM clause.
pub fn query_file(sql_text: &str, opts: &ScanOptions) -> zipflow_core::Result<QueryResult> {
    let path = sql::table_of(sql_text)?;
    let table = Table::open(&path)?;
    let q = sql::plan(sql_text, &table.schema()?)?;
    table.run(&q, opts)
}
