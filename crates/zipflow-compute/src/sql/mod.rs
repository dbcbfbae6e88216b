//! SQL text to a bound [`Query`](crate::Query): `sqlparser` parses, this module checks the
//! subset it supports (one table, filter, aggregates, GROUP BY, HAVING, ORDER BY, LIMIT;
//! `LIKE` patterns are constants, compiled once by [`crate::like`]), binds names to the
//! file's columns and types every expression, folding constants (`DATE '1998-12-01' - INTERVAL
//! '90' DAY` becomes `DATE '1998-09-02'`).
//!
//! In order: `parse` (text to one `SELECT`), `select` (its clauses, phase by phase, into a
//! query), `bind` (expressions to typed IR over the columns), `typing` (literals, types and
//! coercions).

mod bind;
mod parse;
mod select;
mod typing;

use zipflow_core::{Error, Result};

use self::parse::{parse_select, table_name};

pub use self::select::plan;
pub use self::typing::{arith, coerce_to, compare};

fn unsupported(what: impl std::fmt::Display) -> Error {
    Error::unsupported(format!(
        "{what} (queries are single-table select/filter/aggregate)"
    ))
}

/// The table a query reads: the text of its FROM clause (`'file.zf'`, `"file.zf"` or a name).
pub fn table_of(sql: &str) -> Result<String> {
    let select = parse_select(sql)?;
    table_name(&select.0)
}
