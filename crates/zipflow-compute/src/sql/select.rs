//! The clauses of a `SELECT` bound into a [`Query`]: DISTINCT and GROUP BY to group keys,
//! the projection to output columns, then HAVING, ORDER BY and LIMIT, each a named phase of
//! [`plan`].

use sqlparser::ast::{self, SelectItem};
use sqlparser::dialect::DuckDbDialect;
use sqlparser::tokenizer::{Token, Tokenizer};
use zipflow_core::{Error, Result};

use crate::expr::{Expr, SqlType};
use crate::query::{OutputColumn, Query};

use super::bind::{Binder, Mode, aggregate_name};
use super::parse::{parse_select, table_name};
use super::typing::bool_expr;
use super::unsupported;

/// Parses `sql` and binds it to a table with `columns`.
pub fn plan(sql: &str, columns: &[(String, SqlType)]) -> Result<Query> {
    let (select, order_by, limit) = parse_select(sql)?;
    let table = table_name(&select)?;
    let distinct = distinct(&select)?;
    let mut b = Binder {
        columns,
        keys: Vec::new(),
        key_asts: Vec::new(),
        aggregates: Vec::new(),
        mode: Mode::Rows,
    };
    let filter = match &select.selection {
        Some(e) => Some(bool_expr(b.bind(e)?, "WHERE")?),
        None => None,
    };
    let group_all = matches!(select.group_by, ast::GroupByExpr::All(_));
    let group_asts = group_asts(&select, distinct)?;
    bind_keys(&mut b, &select, &group_asts, group_all)?;
    let aggregating = !group_asts.is_empty() || select.projection.iter().any(has_aggregate);
    b.mode = if aggregating {
        Mode::Aggregated
    } else {
        Mode::Rows
    };
    let mut output = bind_output(&mut b, &select, columns, aggregating)?;
    let having = match &select.having {
        Some(h) if aggregating => Some(bool_expr(b.bind(h)?, "HAVING")?),
        Some(_) => return Err(unsupported("HAVING without aggregates")),
        None => None,
    };
    let shown = output.len();
    let order = match order_by {
        Some(ob) => bind_order(&mut b, ob, &select.projection, &mut output, shown)?,
        None => Vec::new(),
    };
    let (limit, offset) = limit_offset(limit)?;
    let hidden = output.len() - shown;
    Ok(Query {
        table,
        filter,
        keys: b.keys,
        aggregates: b.aggregates,
        aggregating,
        having,
        output,
        hidden,
        order_by: order,
        limit,
        offset,
    })
}

/// Whether the query is `SELECT DISTINCT`; refuses the select modifiers outside the subset.
fn distinct(select: &ast::Select) -> Result<bool> {
    let distinct = match &select.distinct {
        None | Some(ast::Distinct::All) => false,
        Some(ast::Distinct::Distinct) => true,
        Some(_) => return Err(unsupported("DISTINCT ON")),
    };
    if select.top.is_some() {
        return Err(unsupported("TOP"));
    }
    if select.prewhere.is_some() || select.qualify.is_some() {
        return Err(unsupported("PREWHERE/QUALIFY"));
    }
    if !select.named_window.is_empty() {
        return Err(unsupported("window definitions"));
    }
    Ok(distinct)
}

/// The expressions the query groups by: its GROUP BY (ALL: every select item without an
/// aggregate), or with `distinct` and no aggregates, the columns it selects.
fn group_asts(select: &ast::Select, distinct: bool) -> Result<Vec<ast::Expr>> {
    let mut group_asts = match &select.group_by {
        // GROUP BY ALL: every select item without an aggregate.
        ast::GroupByExpr::All(mods) => {
            if !mods.is_empty() {
                return Err(unsupported("GROUP BY modifiers (ROLLUP, CUBE, ...)"));
            }
            let mut keys = Vec::new();
            for p in &select.projection {
                match p {
                    SelectItem::UnnamedExpr(x) | SelectItem::ExprWithAlias { expr: x, .. } => {
                        if !has_aggregate(p) {
                            keys.push(x.clone());
                        }
                    }
                    _ => return Err(unsupported("GROUP BY ALL with SELECT * (name the columns)")),
                }
            }
            keys
        }
        ast::GroupByExpr::Expressions(v, mods) => {
            if !mods.is_empty() {
                return Err(unsupported("GROUP BY modifiers (ROLLUP, CUBE, ...)"));
            }
            v.clone()
        }
    };
    // SELECT DISTINCT without aggregates groups by what it selects; with aggregates and no
    // GROUP BY there is one row, distinct already.
    if distinct && !select.projection.iter().any(has_aggregate) {
        if !group_asts.is_empty() {
            return Err(unsupported("DISTINCT with GROUP BY"));
        }
        for p in &select.projection {
            match p {
                SelectItem::UnnamedExpr(x) | SelectItem::ExprWithAlias { expr: x, .. } => {
                    if !matches!(
                        x,
                        ast::Expr::Identifier(_) | ast::Expr::CompoundIdentifier(_)
                    ) {
                        return Err(unsupported(format!(
                            "SELECT DISTINCT on an expression (`{x}`); select columns"
                        )));
                    }
                    group_asts.push(x.clone());
                }
                _ => return Err(unsupported("SELECT DISTINCT * (name the columns)")),
            }
        }
    } else if distinct && !group_asts.is_empty() {
        return Err(unsupported("DISTINCT with GROUP BY"));
    }
    Ok(group_asts)
}

/// Binds the group keys `group_asts` (positions and select aliases resolved) into `b`; with
/// GROUP BY ALL, constant items are not keys.
fn bind_keys(
    b: &mut Binder<'_>,
    select: &ast::Select,
    group_asts: &[ast::Expr],
    group_all: bool,
) -> Result<()> {
    // Select aliases may be used in GROUP BY, as most engines allow.
    let aliases: Vec<(String, ast::Expr)> = select
        .projection
        .iter()
        .filter_map(|p| match p {
            SelectItem::ExprWithAlias { expr, alias } => {
                Some((alias.value.to_lowercase(), expr.clone()))
            }
            _ => None,
        })
        .collect();
    for g in group_asts {
        let g = match group_position(g, &select.projection)? {
            Some(e) => e,
            None => resolve_alias(g, &aliases),
        };
        // A key is a column or an expression of the row (row by row when not a column).
        let e = b.bind(&g)?;
        if e.is_constant() && group_all {
            continue;
        }
        if e.is_constant() {
            return Err(Error::invalid(format!("GROUP BY a constant (`{g}`)")));
        }
        b.keys.push(e);
        b.key_asts.push(g);
    }
    Ok(())
}

/// The output columns of the select items (`*`: every column of the table).
fn bind_output(
    b: &mut Binder<'_>,
    select: &ast::Select,
    columns: &[(String, SqlType)],
    aggregating: bool,
) -> Result<Vec<OutputColumn>> {
    let mut output = Vec::new();
    for item in &select.projection {
        match item {
            SelectItem::UnnamedExpr(e) => output.push(OutputColumn {
                name: e.to_string(),
                expr: b.bind(e)?,
            }),
            SelectItem::ExprWithAlias { expr, alias } => output.push(OutputColumn {
                name: alias.value.clone(),
                expr: b.bind(expr)?,
            }),
            SelectItem::Wildcard(_) => {
                if aggregating {
                    return Err(unsupported("SELECT * with aggregates"));
                }
                for (i, (name, ty)) in columns.iter().enumerate() {
                    output.push(OutputColumn {
                        name: name.clone(),
                        expr: Expr::Column { index: i, ty: *ty },
                    });
                }
            }
            other => return Err(unsupported(format!("select item `{other}`"))),
        }
    }
    Ok(output)
}

/// The sort keys of ORDER BY `ob`: (output column, descending). A sort expression that no
/// output column (of the `shown` ones, by position or alias, or by value) is becomes a
/// hidden output column.
fn bind_order(
    b: &mut Binder<'_>,
    ob: ast::OrderBy,
    projection: &[SelectItem],
    output: &mut Vec<OutputColumn>,
    shown: usize,
) -> Result<Vec<(usize, bool)>> {
    let mut order = Vec::new();
    let ast::OrderByKind::Expressions(items) = ob.kind else {
        return Err(unsupported("ORDER BY ALL"));
    };
    for item in items {
        let desc = match item.options.sort {
            Some(ast::OrderBySort::Desc) => true,
            Some(ast::OrderBySort::Asc) | None => false,
            Some(other) => return Err(unsupported(format!("ORDER BY {other:?}"))),
        };
        if item.options.nulls_first.is_some() {
            return Err(unsupported("NULLS FIRST/LAST"));
        }
        let idx = order_target(&item.expr, projection, shown)?;
        let idx = match idx {
            Some(i) => i,
            None => {
                let e = b.bind(&item.expr)?;
                match output.iter().position(|o| o.expr == e) {
                    Some(i) => i,
                    None => {
                        output.push(OutputColumn {
                            name: item.expr.to_string(),
                            expr: e,
                        });
                        output.len() - 1
                    }
                }
            }
        };
        order.push((idx, desc));
    }
    Ok(order)
}

/// The LIMIT (if any) and OFFSET (0 if none) of the query.
fn limit_offset(limit: Option<ast::LimitClause>) -> Result<(Option<u64>, u64)> {
    Ok(match limit {
        None => (None, 0),
        Some(ast::LimitClause::LimitOffset {
            limit,
            offset,
            limit_by,
        }) => {
            if !limit_by.is_empty() {
                return Err(unsupported("LIMIT BY"));
            }
            let l = limit
                .as_ref()
                .map(|e| count_literal(e, "LIMIT"))
                .transpose()?;
            let o = offset
                .as_ref()
                .map(|o| count_literal(&o.value, "OFFSET"))
                .transpose()?;
            (l, o.unwrap_or(0))
        }
        Some(ast::LimitClause::OffsetCommaLimit { offset, limit }) => (
            Some(count_literal(&limit, "LIMIT")?),
            count_literal(&offset, "OFFSET")?,
        ),
    })
}

pub(super) fn resolve_alias(e: &ast::Expr, aliases: &[(String, ast::Expr)]) -> ast::Expr {
    if let ast::Expr::Identifier(id) = e
        && let Some((_, x)) = aliases.iter().find(|(a, _)| *a == id.value.to_lowercase())
    {
        return x.clone();
    }
    e.clone()
}

/// The select item a GROUP BY position names (`GROUP BY 1`), `None` for anything else.
pub(super) fn group_position(
    e: &ast::Expr,
    projection: &[SelectItem],
) -> Result<Option<ast::Expr>> {
    let ast::Expr::Value(v) = e else {
        return Ok(None);
    };
    let ast::Value::Number(n, _) = &v.value else {
        return Ok(None);
    };
    let k: usize = n
        .parse()
        .map_err(|_| Error::invalid(format!("GROUP BY position `{n}`")))?;
    match k.checked_sub(1).and_then(|i| projection.get(i)) {
        Some(SelectItem::UnnamedExpr(x) | SelectItem::ExprWithAlias { expr: x, .. }) => {
            Ok(Some(x.clone()))
        }
        Some(_) => Err(unsupported(format!("GROUP BY position {k} on a wildcard"))),
        None => Err(Error::invalid(format!(
            "GROUP BY position {k} is not in 1..={}",
            projection.len()
        ))),
    }
}

/// ORDER BY by position (`ORDER BY 2`) or by an output alias.
pub(super) fn order_target(
    e: &ast::Expr,
    projection: &[SelectItem],
    shown: usize,
) -> Result<Option<usize>> {
    if let ast::Expr::Value(v) = e
        && let ast::Value::Number(n, _) = &v.value
    {
        let k: usize = n
            .parse()
            .map_err(|_| Error::invalid(format!("ORDER BY position `{n}`")))?;
        if k == 0 || k > shown {
            return Err(Error::invalid(format!(
                "ORDER BY position {k} is not in 1..={shown}"
            )));
        }
        return Ok(Some(k - 1));
    }
    if let ast::Expr::Identifier(id) = e {
        for (i, p) in projection.iter().enumerate() {
            if let SelectItem::ExprWithAlias { alias, .. } = p
                && alias.value.eq_ignore_ascii_case(&id.value)
            {
                return Ok(Some(i));
            }
        }
    }
    Ok(None)
}

pub(super) fn count_literal(e: &ast::Expr, what: &str) -> Result<u64> {
    if let ast::Expr::Value(v) = e
        && let ast::Value::Number(n, _) = &v.value
        && let Ok(k) = n.parse::<u64>()
    {
        return Ok(k);
    }
    Err(unsupported(format!("{what} `{e}` (only a number)")))
}

pub(super) fn has_aggregate(item: &SelectItem) -> bool {
    let e = match item {
        SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => e,
        _ => return false,
    };
    // A call of an aggregate by name: an unquoted word that names one, then `(` (tokens, so
    // that string literals and longer names do not count).
    let text = e.to_string();
    let Ok(tokens) = Tokenizer::new(&DuckDbDialect {}, &text).tokenize() else {
        return false;
    };
    let mut named = false;
    for t in tokens {
        match t {
            Token::Whitespace(_) => {}
            Token::LParen if named => return true,
            Token::Word(w) => named = w.quote_style.is_none() && aggregate_name(&w.value).is_some(),
            _ => named = false,
        }
    }
    false
}
