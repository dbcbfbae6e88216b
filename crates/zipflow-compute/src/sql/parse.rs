//! Parsing: SQL text to one `SELECT` of `sqlparser`'s syntax tree, with the constructs
//! outside the supported subset refused before anything is bound.

use sqlparser::ast::{self};
use sqlparser::dialect::DuckDbDialect;
use sqlparser::parser::Parser;
use zipflow_core::{Error, Result};

use super::unsupported;

pub(super) type Parsed = (ast::Select, Option<ast::OrderBy>, Option<ast::LimitClause>);

pub(super) fn parse_select(sql: &str) -> Result<Parsed> {
    let mut statements = Parser::parse_sql(&DuckDbDialect {}, sql)
        .map_err(|e| Error::invalid(format!("SQL syntax: {e}")))?;
    if statements.len() != 1 {
        return Err(Error::invalid(format!(
            "expected one SQL statement, got {}",
            statements.len()
        )));
    }
    let ast::Statement::Query(query) = statements.remove(0) else {
        return Err(unsupported("statements other than SELECT"));
    };
    let query = *query;
    if query.with.is_some() {
        return Err(unsupported("WITH (common table expressions)"));
    }
    if query.fetch.is_some() {
        return Err(unsupported("FETCH"));
    }
    let select = match *query.body {
        ast::SetExpr::Select(s) => *s,
        ast::SetExpr::SetOperation { op, .. } => return Err(unsupported(format!("{op}"))),
        ast::SetExpr::Query(_) => return Err(unsupported("subqueries")),
        ast::SetExpr::Values(_) => return Err(unsupported("VALUES")),
        other => return Err(unsupported(format!("`{other}`"))),
    };
    Ok((select, query.order_by, query.limit_clause))
}

pub(super) fn table_name(select: &ast::Select) -> Result<String> {
    match select.from.as_slice() {
        [] => Err(Error::invalid("the query has no FROM clause")),
        [t] => {
            if !t.joins.is_empty() {
                return Err(unsupported("joins"));
            }
            match &t.relation {
                ast::TableFactor::Table { name, args, .. } => {
                    if args.is_some() {
                        return Err(unsupported("table functions"));
                    }
                    let parts: Vec<String> = name
                        .0
                        .iter()
                        .map(|p| match p {
                            ast::ObjectNamePart::Identifier(i) => i.value.clone(),
                            ast::ObjectNamePart::Function(f) => f.name.value.clone(),
                        })
                        .collect();
                    Ok(parts.join("."))
                }
                ast::TableFactor::Derived { .. } => Err(unsupported("subqueries in FROM")),
                other => Err(unsupported(format!("FROM `{other}`"))),
            }
        }
        _ => Err(unsupported("joins (more than one table in FROM)")),
    }
}
