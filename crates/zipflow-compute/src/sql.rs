//! SQL text to a bound [`Query`]: `sqlparser` parses, this module checks the subset it supports
//! (one table, filter, aggregates, GROUP BY, HAVING, ORDER BY, LIMIT; `LIKE` patterns are
//! constants, compiled once by [`crate::like`]), binds names to the
//! file's columns and types every expression, folding constants (`DATE '1998-12-01' - INTERVAL
//! '90' DAY` becomes `DATE '1998-09-02'`).

use sqlparser::ast::{self, BinaryOperator, DataType, FunctionArg, FunctionArgExpr, SelectItem};
use sqlparser::dialect::DuckDbDialect;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::{Token, Tokenizer};
use zipflow_core::{Error, Result};

use crate::expr::{
    ArithOp, CmpOp, DateUnit, Expr, Func, MAX_SCALE, SqlType, Value, add_months, cast_value, fold,
    parse_date,
};
use crate::query::{AggFunc, Aggregate, OutputColumn, Query};

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

type Parsed = (ast::Select, Option<ast::OrderBy>, Option<ast::LimitClause>);

fn parse_select(sql: &str) -> Result<Parsed> {
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

fn table_name(select: &ast::Select) -> Result<String> {
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

/// Parses `sql` and binds it to a table with `columns`.
pub fn plan(sql: &str, columns: &[(String, SqlType)]) -> Result<Query> {
    let (select, order_by, limit) = parse_select(sql)?;
    let table = table_name(&select)?;
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
    for g in &group_asts {
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
    let aggregating = !group_asts.is_empty() || select.projection.iter().any(has_aggregate);
    b.mode = if aggregating {
        Mode::Aggregated
    } else {
        Mode::Rows
    };
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
    let having = match &select.having {
        Some(h) if aggregating => Some(bool_expr(b.bind(h)?, "HAVING")?),
        Some(_) => return Err(unsupported("HAVING without aggregates")),
        None => None,
    };
    let shown = output.len();
    let mut order = Vec::new();
    if let Some(ob) = order_by {
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
            let idx = order_target(&item.expr, &select.projection, shown)?;
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
    }
    let (limit, offset) = match limit {
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
    };
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

fn resolve_alias(e: &ast::Expr, aliases: &[(String, ast::Expr)]) -> ast::Expr {
    if let ast::Expr::Identifier(id) = e
        && let Some((_, x)) = aliases.iter().find(|(a, _)| *a == id.value.to_lowercase())
    {
        return x.clone();
    }
    e.clone()
}

/// The select item a GROUP BY position names (`GROUP BY 1`), `None` for anything else.
fn group_position(e: &ast::Expr, projection: &[SelectItem]) -> Result<Option<ast::Expr>> {
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
fn order_target(e: &ast::Expr, projection: &[SelectItem], shown: usize) -> Result<Option<usize>> {
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

fn count_literal(e: &ast::Expr, what: &str) -> Result<u64> {
    if let ast::Expr::Value(v) = e
        && let ast::Value::Number(n, _) = &v.value
        && let Ok(k) = n.parse::<u64>()
    {
        return Ok(k);
    }
    Err(unsupported(format!("{what} `{e}` (only a number)")))
}

fn bool_expr(e: Expr, clause: &str) -> Result<Expr> {
    if e.ty() != SqlType::Bool {
        return Err(Error::invalid(format!(
            "{clause} needs a boolean expression, got {}",
            e.ty()
        )));
    }
    Ok(e)
}

fn aggregate_name(name: &str) -> Option<&'static str> {
    match name.to_lowercase().as_str() {
        "sum" => Some("sum"),
        "count" => Some("count"),
        "min" => Some("min"),
        "max" => Some("max"),
        "avg" | "mean" => Some("avg"),
        "stddev" | "stddev_samp" => Some("stddev_samp"),
        "stddev_pop" => Some("stddev_pop"),
        "variance" | "var_samp" => Some("var_samp"),
        "var_pop" => Some("var_pop"),
        _ => None,
    }
}

fn has_aggregate(item: &SelectItem) -> bool {
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

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Expressions over table rows.
    Rows,
    /// Expressions over aggregates and group keys.
    Aggregated,
}

struct Binder<'a> {
    columns: &'a [(String, SqlType)],
    keys: Vec<Expr>,
    key_asts: Vec<ast::Expr>,
    aggregates: Vec<Aggregate>,
    mode: Mode,
}

/// A constant interval: months and days.
struct Interval {
    months: i64,
    days: i64,
}

impl Binder<'_> {
    fn column(&self, name: &str) -> Result<Expr> {
        let found = self
            .columns
            .iter()
            .position(|(n, _)| n == name)
            .or_else(|| {
                self.columns
                    .iter()
                    .position(|(n, _)| n.eq_ignore_ascii_case(name))
            });
        let Some(index) = found else {
            let names: Vec<&str> = self.columns.iter().map(|(n, _)| n.as_str()).collect();
            return Err(Error::invalid(format!(
                "no column `{name}` (columns: {})",
                names.join(", ")
            )));
        };
        let col = Expr::Column {
            index,
            ty: self.columns[index].1,
        };
        if self.mode == Mode::Aggregated {
            return match self.keys.iter().position(|k| *k == col) {
                Some(i) => Ok(Expr::KeyRef(i, col.ty())),
                None => Err(Error::invalid(format!(
                    "column `{name}` must appear in GROUP BY or inside an aggregate"
                ))),
            };
        }
        Ok(col)
    }

    fn bind(&mut self, e: &ast::Expr) -> Result<Expr> {
        // After aggregation, an expression a key was grouped by is that key.
        if self.mode == Mode::Aggregated
            && let Some(i) = self.key_asts.iter().position(|k| k == e)
            && !matches!(self.keys[i], Expr::Column { .. })
        {
            return Ok(Expr::KeyRef(i, self.keys[i].ty()));
        }
        let out = self.bind_inner(e)?;
        if out.is_constant() && !matches!(out, Expr::Lit(..)) {
            return fold(&out);
        }
        Ok(out)
    }

    fn bind_inner(&mut self, e: &ast::Expr) -> Result<Expr> {
        use ast::Expr as A;
        match e {
            A::Identifier(id) => self.column(&id.value),
            A::CompoundIdentifier(ids) => match ids.last() {
                Some(id) => self.column(&id.value),
                None => Err(Error::invalid("empty identifier")),
            },
            A::Nested(x) => self.bind(x),
            A::Value(v) => literal(&v.value),
            A::TypedString(ts) => {
                let text = match &ts.value.value {
                    ast::Value::SingleQuotedString(s) | ast::Value::DoubleQuotedString(s) => s,
                    other => return Err(unsupported(format!("typed literal `{other}`"))),
                };
                match ts.data_type {
                    DataType::Date => Ok(Expr::Lit(Value::Date(parse_date(text)?), SqlType::Date)),
                    ref t => Err(unsupported(format!("{t} literals"))),
                }
            }
            A::Interval(_) => Err(unsupported(
                "an INTERVAL outside `date + INTERVAL` / `date - INTERVAL`",
            )),
            A::UnaryOp { op, expr } => {
                let x = self.bind(expr)?;
                match op {
                    ast::UnaryOperator::Not => Ok(Expr::Not(Box::new(bool_expr(x, "NOT")?))),
                    ast::UnaryOperator::Minus => {
                        if !x.ty().is_numeric() {
                            return Err(Error::invalid(format!("cannot negate {}", x.ty())));
                        }
                        let ty = x.ty();
                        Ok(Expr::Neg(Box::new(x), ty))
                    }
                    ast::UnaryOperator::Plus => Ok(x),
                    other => Err(unsupported(format!("operator {other}"))),
                }
            }
            A::BinaryOp { left, op, right } => self.binary(left, op, right),
            A::Between {
                expr,
                negated,
                low,
                high,
            } => {
                let x = self.bind(expr)?;
                let lo = self.bind(low)?;
                let hi = self.bind(high)?;
                let ge = compare(CmpOp::Ge, x.clone(), lo)?;
                let le = compare(CmpOp::Le, x, hi)?;
                let both = Expr::And(vec![ge, le]);
                Ok(if *negated {
                    Expr::Not(Box::new(both))
                } else {
                    both
                })
            }
            A::In {
                expr,
                target: ast::InTarget::List(list),
                negated,
                ..
            } => {
                let x = self.bind(expr)?;
                let mut values = Vec::with_capacity(list.len());
                for item in list {
                    let lit = self.bind(item)?;
                    let (a, b) = coerce(x.clone(), lit)?;
                    let Expr::Lit(v, _) = (if b.is_constant() { fold(&b)? } else { b }) else {
                        return Err(unsupported("IN lists with non-constant items"));
                    };
                    if a != x {
                        return Err(unsupported(format!(
                            "IN list of type {} on a {} value",
                            a.ty(),
                            x.ty()
                        )));
                    }
                    values.push(v);
                }
                Ok(Expr::InList {
                    e: Box::new(x),
                    list: values,
                    negated: *negated,
                })
            }
            A::IsNull(x) => Ok(Expr::IsNull {
                e: Box::new(self.bind(x)?),
                negated: false,
            }),
            A::IsNotNull(x) => Ok(Expr::IsNull {
                e: Box::new(self.bind(x)?),
                negated: true,
            }),
            A::Cast {
                expr, data_type, ..
            } => {
                let x = self.bind(expr)?;
                let to = sql_type(data_type)?;
                if x.ty() == to {
                    return Ok(x);
                }
                if let Expr::Lit(v, from) = &x {
                    return Ok(Expr::Lit(cast_value(v, *from, to)?, to));
                }
                Ok(Expr::Cast(Box::new(x), to))
            }
            A::Function(f) => self.function(f),
            A::Subquery(_) | A::Exists { .. } | A::In { .. } => Err(unsupported("subqueries")),
            A::Like {
                negated,
                any,
                expr,
                pattern,
                escape_char,
            } => self.like(*negated, *any, expr, pattern, escape_char.as_deref(), false),
            A::ILike {
                negated,
                any,
                expr,
                pattern,
                escape_char,
            } => self.like(*negated, *any, expr, pattern, escape_char.as_deref(), true),
            A::SimilarTo { .. } | A::RLike { .. } => {
                Err(unsupported("SIMILAR TO / regular expressions"))
            }
            A::Case {
                operand,
                conditions,
                else_result,
                ..
            } => self.case(operand.as_deref(), conditions, else_result.as_deref()),
            A::Extract { field, expr, .. } => {
                use ast::DateTimeField as F;
                let f = match field {
                    F::Year | F::Years => Func::Year,
                    F::Month | F::Months => Func::Month,
                    F::Day | F::Days => Func::Day,
                    F::Quarter => Func::Quarter,
                    F::DayOfWeek | F::Dow => Func::DayOfWeek,
                    F::DayOfYear | F::Doy => Func::DayOfYear,
                    other => return Err(unsupported(format!("EXTRACT({other})"))),
                };
                let x = self.bind(expr)?;
                scalar(f, vec![x])
            }
            A::Trim {
                trim_where,
                trim_what: None,
                expr,
                trim_characters: None,
            } => {
                let f = match trim_where {
                    None | Some(ast::TrimWhereField::Both) => Func::Trim,
                    Some(ast::TrimWhereField::Leading) => Func::LTrim,
                    Some(ast::TrimWhereField::Trailing) => Func::RTrim,
                };
                let x = self.bind(expr)?;
                scalar(f, vec![x])
            }
            A::Trim { .. } => Err(unsupported("TRIM of characters other than spaces")),
            A::Substring {
                expr,
                substring_from,
                substring_for,
                ..
            } => {
                let mut args = vec![self.bind(expr)?];
                args.push(match substring_from {
                    Some(x) => self.bind(x)?,
                    None => Expr::Lit(Value::Int(1), SqlType::Int),
                });
                if let Some(x) = substring_for {
                    args.push(self.bind(x)?);
                }
                scalar(Func::Substring, args)
            }
            other => Err(unsupported(format!("expression `{other}`"))),
        }
    }

    /// `CASE [operand] WHEN .. THEN .. [ELSE ..] END`: a simple CASE compares its operand with
    /// each WHEN value; the results take their common type.
    fn case(
        &mut self,
        operand: Option<&ast::Expr>,
        conditions: &[ast::CaseWhen],
        otherwise: Option<&ast::Expr>,
    ) -> Result<Expr> {
        let operand = operand.map(|o| self.bind(o)).transpose()?;
        let mut whens = Vec::with_capacity(conditions.len());
        for w in conditions {
            let c = self.bind(&w.condition)?;
            let c = match &operand {
                Some(x) => compare(CmpOp::Eq, x.clone(), c)?,
                None => c,
            };
            if c.ty() != SqlType::Bool {
                return Err(Error::invalid(format!(
                    "CASE WHEN needs a condition, not a {} value",
                    c.ty()
                )));
            }
            whens.push((c, self.bind(&w.result)?));
        }
        let otherwise = otherwise.map(|e| self.bind(e)).transpose()?;
        // The results' common type, NULL literals aside.
        let mut ty: Option<SqlType> = None;
        for r in whens.iter().map(|w| &w.1).chain(otherwise.as_ref()) {
            if matches!(r, Expr::Lit(Value::Null, _)) {
                continue;
            }
            ty = Some(match ty {
                None => r.ty(),
                Some(t) => common_type(t, r.ty()).ok_or_else(|| {
                    Error::invalid(format!(
                        "CASE results of types {t} and {} do not combine",
                        r.ty()
                    ))
                })?,
            });
        }
        let ty = ty.unwrap_or(SqlType::Int);
        let to = |r: Expr| -> Result<Expr> {
            match r {
                Expr::Lit(Value::Null, _) => Ok(Expr::Lit(Value::Null, ty)),
                r => coerce_to(r, ty),
            }
        };
        Ok(Expr::Case {
            whens: whens
                .into_iter()
                .map(|(c, r)| Ok((c, to(r)?)))
                .collect::<Result<Vec<_>>>()?,
            otherwise: otherwise.map(to).transpose()?.map(Box::new),
            ty,
        })
    }

    /// `coalesce(a, b, ...)`: the first argument that is not NULL, as the CASE it stands for.
    fn coalesce(&mut self, args: &[FunctionArg]) -> Result<Expr> {
        let mut exprs = Vec::with_capacity(args.len());
        for a in args {
            match a {
                FunctionArg::Unnamed(FunctionArgExpr::Expr(x)) => exprs.push(x.clone()),
                _ => return Err(unsupported("coalesce with these arguments")),
            }
        }
        let Some((last, rest)) = exprs.split_last() else {
            return Err(Error::invalid("coalesce of no arguments"));
        };
        let conditions: Vec<ast::CaseWhen> = rest
            .iter()
            .map(|x| ast::CaseWhen {
                condition: ast::Expr::IsNotNull(Box::new(x.clone())),
                result: x.clone(),
            })
            .collect();
        if conditions.is_empty() {
            return self.bind(last);
        }
        self.case(None, &conditions, Some(last))
    }

    /// `expr [NOT] LIKE pattern [ESCAPE c]` (`ILIKE` with `fold_case`): a string expression
    /// against a constant pattern.
    fn like(
        &mut self,
        negated: bool,
        any: bool,
        expr: &ast::Expr,
        pattern: &ast::Expr,
        escape: Option<&ast::Expr>,
        fold_case: bool,
    ) -> Result<Expr> {
        let op = if fold_case { "ILIKE" } else { "LIKE" };
        if any {
            return Err(unsupported(format!("{op} ANY")));
        }
        let x = self.bind(expr)?;
        if x.ty() != SqlType::Str {
            return Err(unsupported(format!("{op} on a {} value", x.ty())));
        }
        let mut text = |e: &ast::Expr, what: &str| -> Result<String> {
            let b = self.bind(e)?;
            let b = if b.is_constant() { fold(&b)? } else { b };
            match b {
                Expr::Lit(Value::Str(s), _) => Ok(s.to_string()),
                _ => Err(unsupported(format!(
                    "{op} with a {what} that is not a string literal"
                ))),
            }
        };
        let p = text(pattern, "pattern")?;
        let escape = match escape {
            None => None,
            Some(e) => {
                let t = text(e, "escape character")?;
                let mut chars = t.chars();
                match (chars.next(), chars.next()) {
                    (Some(c), None) => Some(c),
                    _ => {
                        return Err(Error::invalid(format!(
                            "{op} ESCAPE takes one character, not `{t}`"
                        )));
                    }
                }
            }
        };
        Ok(Expr::Like {
            e: Box::new(x),
            pattern: crate::like::LikePattern::new(&p, escape, fold_case)?,
            negated,
        })
    }

    fn function(&mut self, f: &ast::Function) -> Result<Expr> {
        let name = f.name.to_string();
        if f.over.is_some() {
            return Err(unsupported("window functions (OVER)"));
        }
        if f.filter.is_some() {
            return Err(unsupported("aggregate FILTER"));
        }
        let Some(func) = aggregate_name(&name) else {
            return self.scalar_call(&name, f);
        };
        let ast::FunctionArguments::List(list) = &f.args else {
            return Err(unsupported(format!("`{name}` without an argument list")));
        };
        let distinct = list.duplicate_treatment == Some(ast::DuplicateTreatment::Distinct);
        if !list.clauses.is_empty() {
            return Err(unsupported("clauses inside aggregate calls"));
        }
        if self.mode != Mode::Aggregated {
            return Err(Error::invalid(format!(
                "aggregate `{name}` is not allowed here (WHERE and GROUP BY see rows)"
            )));
        }
        let arg = match list.args.as_slice() {
            [FunctionArg::Unnamed(FunctionArgExpr::Wildcard)] if func == "count" && !distinct => {
                None
            }
            [FunctionArg::Unnamed(FunctionArgExpr::Expr(x))] => {
                self.mode = Mode::Rows;
                let bound = self.bind(x);
                self.mode = Mode::Aggregated;
                Some(bound?)
            }
            _ => return Err(unsupported(format!("`{name}` with these arguments"))),
        };
        let (func, ty) = match (func, &arg) {
            ("count", None) => (AggFunc::CountStar, SqlType::Int),
            ("count", Some(_)) => (AggFunc::Count, SqlType::Int),
            (_, None) => return Err(Error::invalid(format!("`{name}(*)`"))),
            ("sum", Some(a)) => {
                let ty = match a.ty() {
                    SqlType::Int | SqlType::Bool => SqlType::Decimal(0),
                    SqlType::Decimal(s) => SqlType::Decimal(s),
                    SqlType::Float => SqlType::Float,
                    t => return Err(Error::invalid(format!("sum of {t}"))),
                };
                (AggFunc::Sum, ty)
            }
            ("avg" | "stddev_samp" | "stddev_pop" | "var_samp" | "var_pop", Some(a)) => {
                if !a.ty().is_numeric() {
                    return Err(Error::invalid(format!("{func} of {}", a.ty())));
                }
                let f = match func {
                    "avg" => AggFunc::Avg,
                    "stddev_samp" => AggFunc::StddevSamp,
                    "stddev_pop" => AggFunc::StddevPop,
                    "var_samp" => AggFunc::VarSamp,
                    _ => AggFunc::VarPop,
                };
                (f, SqlType::Float)
            }
            ("min", Some(a)) => (AggFunc::Min, a.ty()),
            (_, Some(a)) => (AggFunc::Max, a.ty()),
        };
        let agg = Aggregate {
            func,
            arg,
            ty,
            distinct,
        };
        let i = match self.aggregates.iter().position(|a| *a == agg) {
            Some(i) => i,
            None => {
                self.aggregates.push(agg);
                self.aggregates.len() - 1
            }
        };
        Ok(Expr::AggRef(i, ty))
    }

    /// A call of a scalar function by name: `upper`, `lower`, `length` (`char_length`),
    /// `substring` (`substr`), `year`, `month`, `day`, `quarter`, `dayofweek`, `dayofyear`,
    /// `date_part('field', date)` and `date_trunc('unit', date)`.
    fn scalar_call(&mut self, name: &str, f: &ast::Function) -> Result<Expr> {
        let lower = name.to_ascii_lowercase();
        // `None`: date_part, whose function its first argument names.
        let func = match lower.as_str() {
            "upper" | "ucase" => Some(Func::Upper),
            "lower" | "lcase" => Some(Func::Lower),
            "length" | "char_length" | "character_length" => Some(Func::Length),
            "substring" | "substr" => Some(Func::Substring),
            "year" => Some(Func::Year),
            "month" => Some(Func::Month),
            "day" | "dayofmonth" => Some(Func::Day),
            "quarter" => Some(Func::Quarter),
            "dayofweek" | "dow" => Some(Func::DayOfWeek),
            "dayofyear" | "doy" => Some(Func::DayOfYear),
            "date_part" | "datepart" | "date_trunc" | "datetrunc" => None,
            "trim" => Some(Func::Trim),
            "ltrim" => Some(Func::LTrim),
            "rtrim" => Some(Func::RTrim),
            "abs" => Some(Func::Abs),
            "concat" => return Err(unsupported("concat() (use ||)")),
            "coalesce" | "ifnull" => {
                let ast::FunctionArguments::List(list) = &f.args else {
                    return Err(unsupported(format!("`{name}` without an argument list")));
                };
                return self.coalesce(&list.args);
            }
            _ => return Err(unsupported(format!("function `{name}`"))),
        };
        let ast::FunctionArguments::List(list) = &f.args else {
            return Err(unsupported(format!("`{name}` without an argument list")));
        };
        if list.duplicate_treatment.is_some() || !list.clauses.is_empty() {
            return Err(unsupported(format!("`{name}` with DISTINCT or clauses")));
        }
        let mut args = Vec::with_capacity(list.args.len());
        for a in &list.args {
            match a {
                FunctionArg::Unnamed(FunctionArgExpr::Expr(x)) => args.push(self.bind(x)?),
                _ => return Err(unsupported(format!("`{name}` with these arguments"))),
            }
        }
        if let Some(func) = func {
            return scalar(func, args);
        }
        // date_part('field', date) and date_trunc('unit', date): the field a string literal.
        let field = match args.first() {
            Some(e) if e.is_constant() && e.ty() == SqlType::Str => match fold(e)? {
                Expr::Lit(Value::Str(s), _) => s.to_ascii_lowercase(),
                _ => String::new(),
            },
            _ => {
                return Err(unsupported(format!(
                    "{lower} with a first argument that is not a string literal"
                )));
            }
        };
        if lower.contains("trunc") {
            let unit = DateUnit::parse(&field)
                .ok_or_else(|| unsupported(format!("date_trunc('{field}')")))?;
            return scalar(Func::DateTrunc(unit), args.split_off(1));
        }
        let func = match field.as_str() {
            "year" | "years" => Func::Year,
            "month" | "months" => Func::Month,
            "day" | "days" => Func::Day,
            "quarter" => Func::Quarter,
            "dow" | "dayofweek" => Func::DayOfWeek,
            "doy" | "dayofyear" => Func::DayOfYear,
            other => return Err(unsupported(format!("date_part('{other}')"))),
        };
        scalar(func, args.split_off(1))
    }

    fn binary(&mut self, left: &ast::Expr, op: &BinaryOperator, right: &ast::Expr) -> Result<Expr> {
        if matches!(op, BinaryOperator::Plus | BinaryOperator::Minus)
            && let ast::Expr::Interval(iv) = right
        {
            let base = self.bind(left)?;
            let iv = interval(iv)?;
            let sign = if *op == BinaryOperator::Minus { -1 } else { 1 };
            return add_interval(base, &iv, sign);
        }
        if *op == BinaryOperator::Plus
            && let ast::Expr::Interval(iv) = left
        {
            let base = self.bind(right)?;
            return add_interval(base, &interval(iv)?, 1);
        }
        let l = self.bind(left)?;
        let r = self.bind(right)?;
        match op {
            BinaryOperator::And => Ok(Expr::And(vec![bool_expr(l, "AND")?, bool_expr(r, "AND")?])),
            BinaryOperator::Or => Ok(Expr::Or(vec![bool_expr(l, "OR")?, bool_expr(r, "OR")?])),
            BinaryOperator::Eq => compare(CmpOp::Eq, l, r),
            BinaryOperator::NotEq => compare(CmpOp::Ne, l, r),
            BinaryOperator::Lt => compare(CmpOp::Lt, l, r),
            BinaryOperator::LtEq => compare(CmpOp::Le, l, r),
            BinaryOperator::Gt => compare(CmpOp::Gt, l, r),
            BinaryOperator::GtEq => compare(CmpOp::Ge, l, r),
            BinaryOperator::StringConcat => scalar(Func::Concat, vec![l, r]),
            BinaryOperator::Plus => arith(ArithOp::Add, l, r),
            BinaryOperator::Minus => arith(ArithOp::Sub, l, r),
            BinaryOperator::Multiply => arith(ArithOp::Mul, l, r),
            BinaryOperator::Divide => arith(ArithOp::Div, l, r),
            BinaryOperator::Modulo => arith(ArithOp::Mod, l, r),
            other => Err(unsupported(format!("operator {other}"))),
        }
    }
}

fn literal(v: &ast::Value) -> Result<Expr> {
    match v {
        ast::Value::Number(n, _) => number(n),
        ast::Value::SingleQuotedString(s) => Ok(Expr::Lit(Value::Str(s.clone()), SqlType::Str)),
        ast::Value::Boolean(b) => Ok(Expr::Lit(Value::Bool(*b), SqlType::Bool)),
        ast::Value::Null => Ok(Expr::Lit(Value::Null, SqlType::Int)),
        other => Err(unsupported(format!("literal `{other}`"))),
    }
}

/// A numeric literal: an integer, an exact decimal (`0.05` is decimal(_, 2)), or a float
/// when written with an exponent.
fn number(n: &str) -> Result<Expr> {
    let bad = || Error::invalid(format!("number `{n}` out of range"));
    if n.contains(['e', 'E']) {
        let f: f64 = n.parse().map_err(|_| bad())?;
        return Ok(Expr::Lit(Value::Float(f), SqlType::Float));
    }
    match n.split_once('.') {
        None => Ok(Expr::Lit(
            Value::Int(n.parse().map_err(|_| bad())?),
            SqlType::Int,
        )),
        Some((int, frac)) => {
            let scale = u8::try_from(frac.len()).map_err(|_| bad())?;
            if scale > MAX_SCALE {
                return Err(bad());
            }
            let digits = format!("{int}{frac}");
            let v: i64 = if digits.is_empty() {
                0
            } else {
                digits.parse().map_err(|_| bad())?
            };
            Ok(Expr::Lit(
                Value::Decimal(i128::from(v), scale),
                SqlType::Decimal(scale),
            ))
        }
    }
}

fn sql_type(t: &DataType) -> Result<SqlType> {
    Ok(match t {
        DataType::Date => SqlType::Date,
        DataType::Double(_)
        | DataType::DoublePrecision
        | DataType::Float(_)
        | DataType::Float64
        | DataType::Real => SqlType::Float,
        DataType::Int(_)
        | DataType::Integer(_)
        | DataType::BigInt(_)
        | DataType::SmallInt(_)
        | DataType::Int64 => SqlType::Int,
        DataType::Decimal(info) | DataType::Numeric(info) => match info {
            ast::ExactNumberInfo::PrecisionAndScale(_, s) => match u8::try_from(*s) {
                Ok(s) if s <= MAX_SCALE => SqlType::Decimal(s),
                _ => return Err(unsupported(format!("decimal scale {s}"))),
            },
            _ => SqlType::Decimal(0),
        },
        DataType::Varchar(_) | DataType::Text | DataType::String(_) => SqlType::Str,
        DataType::Boolean | DataType::Bool => SqlType::Bool,
        other => return Err(unsupported(format!("type {other}"))),
    })
}

fn interval(iv: &ast::Interval) -> Result<Interval> {
    let text = match &*iv.value {
        ast::Expr::Value(v) => match &v.value {
            ast::Value::SingleQuotedString(s) => s.clone(),
            ast::Value::Number(n, _) => n.clone(),
            other => return Err(unsupported(format!("interval `{other}`"))),
        },
        other => return Err(unsupported(format!("interval `{other}`"))),
    };
    let mut words = text.split_whitespace();
    let n: i64 = words
        .next()
        .and_then(|w| w.parse().ok())
        .ok_or_else(|| Error::invalid(format!("interval `{text}`")))?;
    let unit = match (&iv.leading_field, words.next()) {
        (Some(f), None) => f.to_string().to_lowercase(),
        (None, Some(w)) => w.to_lowercase(),
        _ => return Err(unsupported(format!("interval `{iv}`"))),
    };
    if iv.last_field.is_some() {
        return Err(unsupported(format!("interval `{iv}`")));
    }
    match unit.trim_end_matches('s') {
        "day" => Ok(Interval { months: 0, days: n }),
        "week" => Ok(Interval {
            months: 0,
            days: 7 * n,
        }),
        "month" => Ok(Interval { months: n, days: 0 }),
        "year" => Ok(Interval {
            months: 12 * n,
            days: 0,
        }),
        _ => Err(unsupported(format!("interval unit `{unit}`"))),
    }
}

fn add_interval(base: Expr, iv: &Interval, sign: i64) -> Result<Expr> {
    let base = if base.ty() == SqlType::Str {
        coerce_to(base, SqlType::Date)?
    } else {
        base
    };
    if base.ty() != SqlType::Date {
        return Err(Error::invalid(format!(
            "cannot add an interval to {}",
            base.ty()
        )));
    }
    if let Expr::Lit(v, _) = &base {
        let Value::Date(d) = v else {
            return Ok(Expr::Lit(Value::Null, SqlType::Date));
        };
        let moved = add_months(*d, sign * iv.months)?;
        let days = i64::from(moved) + sign * iv.days;
        let days = i32::try_from(days).map_err(|_| Error::invalid("date out of range"))?;
        return Ok(Expr::Lit(Value::Date(days), SqlType::Date));
    }
    if iv.months != 0 {
        return Err(unsupported(
            "adding month or year intervals to a column (only to constant dates)",
        ));
    }
    // A column plus whole days: the days ride as a date-typed offset.
    let days =
        i32::try_from(sign * iv.days).map_err(|_| Error::invalid("interval out of range"))?;
    Ok(Expr::Arith {
        op: ArithOp::Add,
        l: Box::new(base),
        r: Box::new(Expr::Lit(Value::Date(days), SqlType::Date)),
        ty: SqlType::Date,
    })
}

/// Converts `e` to `to`, folding literals.
/// A scalar function call, its arguments checked (and integers coerced) against what `f`
/// takes.
fn scalar(f: Func, mut args: Vec<Expr>) -> Result<Expr> {
    if f == Func::Abs {
        return match args.as_slice() {
            [a] if a.ty().is_numeric() => Ok(Expr::Func {
                f,
                ty: f.ty(a.ty()),
                args,
            }),
            [a] => Err(Error::invalid(format!("abs of a {} value", a.ty()))),
            _ => Err(Error::invalid(format!(
                "abs takes 1 argument, not {}",
                args.len()
            ))),
        };
    }
    let want: &[SqlType] = match f {
        Func::Upper | Func::Lower | Func::Length | Func::Trim | Func::LTrim | Func::RTrim => {
            &[SqlType::Str]
        }
        Func::Substring => &[SqlType::Str, SqlType::Int, SqlType::Int],
        Func::Concat => &[SqlType::Str, SqlType::Str],
        _ => &[SqlType::Date],
    };
    let least = if f == Func::Substring { 2 } else { want.len() };
    if args.len() < least || args.len() > want.len() {
        return Err(Error::invalid(format!(
            "{} takes {} argument{}, not {}",
            f.name(),
            if least == want.len() {
                least.to_string()
            } else {
                format!("{least} or {}", want.len())
            },
            if want.len() == 1 { "" } else { "s" },
            args.len()
        )));
    }
    for (a, &t) in args.iter_mut().zip(want) {
        let ty = a.ty();
        if ty == t {
            continue;
        }
        let ok = match (ty, t) {
            // NULL literals bind as integers; integral decimals of scale 0 count as integers.
            (SqlType::Decimal(0), SqlType::Int) => true,
            (SqlType::Int, _) if matches!(a, Expr::Lit(Value::Null, _)) => true,
            // A string literal where a date goes (`year('1998-12-01')`).
            (SqlType::Str, SqlType::Date) => a.is_constant(),
            // `||` takes any value as its text.
            (_, SqlType::Str) => f == Func::Concat,
            _ => false,
        };
        if !ok {
            return Err(Error::invalid(format!(
                "{} of a {ty} value (it takes {t})",
                f.name()
            )));
        }
        let x = std::mem::replace(a, Expr::Lit(Value::Null, t));
        *a = match x {
            Expr::Lit(Value::Null, _) => Expr::Lit(Value::Null, t),
            x => Expr::Cast(Box::new(x), t),
        };
    }
    Ok(Expr::Func {
        f,
        ty: f.ty(args[0].ty()),
        args,
    })
}

fn coerce_to(e: Expr, to: SqlType) -> Result<Expr> {
    if e.ty() == to {
        return Ok(e);
    }
    if let Expr::Lit(v, from) = &e {
        return Ok(Expr::Lit(cast_value(v, *from, to)?, to));
    }
    Ok(Expr::Cast(Box::new(e), to))
}

/// The common type two operands are compared (or added) in.
fn common_type(a: SqlType, b: SqlType) -> Option<SqlType> {
    use SqlType as T;
    Some(match (a, b) {
        (x, y) if x == y => x,
        (T::Float, y) | (y, T::Float) if y.is_numeric() => T::Float,
        (T::Decimal(s), T::Decimal(t)) => T::Decimal(s.max(t)),
        (T::Decimal(s), T::Int) | (T::Int, T::Decimal(s)) => T::Decimal(s),
        (T::Date, T::Str) | (T::Str, T::Date) => T::Date,
        _ => return None,
    })
}

fn coerce(a: Expr, b: Expr) -> Result<(Expr, Expr)> {
    // NULL literals take the other side's type.
    if matches!(a, Expr::Lit(Value::Null, _)) {
        let t = b.ty();
        return Ok((Expr::Lit(Value::Null, t), b));
    }
    if matches!(b, Expr::Lit(Value::Null, _)) {
        let t = a.ty();
        return Ok((a, Expr::Lit(Value::Null, t)));
    }
    let Some(t) = common_type(a.ty(), b.ty()) else {
        return Err(Error::invalid(format!(
            "cannot combine {} with {}",
            a.ty(),
            b.ty()
        )));
    };
    if t == SqlType::Date
        && (a.ty() == SqlType::Str && !a.is_constant()
            || b.ty() == SqlType::Str && !b.is_constant())
    {
        return Err(unsupported("comparing a string column with a date"));
    }
    Ok((coerce_to(a, t)?, coerce_to(b, t)?))
}

fn compare(op: CmpOp, l: Expr, r: Expr) -> Result<Expr> {
    let (l, r) = coerce(l, r)?;
    Ok(Expr::Cmp {
        op,
        l: Box::new(l),
        r: Box::new(r),
    })
}

fn arith(op: ArithOp, l: Expr, r: Expr) -> Result<Expr> {
    use SqlType as T;
    let (lt, rt) = (l.ty(), r.ty());
    // Date arithmetic: date +- integer days, date - date.
    if lt == T::Date || rt == T::Date {
        return match (op, lt, rt) {
            (ArithOp::Add | ArithOp::Sub, T::Date, T::Int) => {
                let r = Expr::Cast(Box::new(r), T::Date);
                let r = if r.is_constant() { fold(&r)? } else { r };
                Ok(Expr::Arith {
                    op,
                    l: Box::new(l),
                    r: Box::new(r),
                    ty: T::Date,
                })
            }
            (ArithOp::Sub, T::Date, T::Date) => Ok(Expr::Cast(
                Box::new(Expr::Arith {
                    op,
                    l: Box::new(l),
                    r: Box::new(r),
                    ty: T::Date,
                }),
                T::Int,
            )),
            _ => Err(Error::invalid(format!(
                "cannot apply {op:?} to {lt} and {rt}"
            ))),
        };
    }
    if !lt.is_numeric() || !rt.is_numeric() {
        return Err(Error::invalid(format!(
            "arithmetic needs numbers, got {lt} and {rt}"
        )));
    }
    if op == ArithOp::Div || lt == T::Float || rt == T::Float {
        return Ok(Expr::Arith {
            op,
            l: Box::new(coerce_to(l, T::Float)?),
            r: Box::new(coerce_to(r, T::Float)?),
            ty: T::Float,
        });
    }
    if op == ArithOp::Mul {
        let s = lt.scale() + rt.scale();
        if s > MAX_SCALE {
            return Err(unsupported(format!(
                "a product of scale {s} (at most {MAX_SCALE})"
            )));
        }
        let ty = if lt == T::Int && rt == T::Int {
            T::Int
        } else {
            T::Decimal(s)
        };
        return Ok(Expr::Arith {
            op,
            l: Box::new(l),
            r: Box::new(r),
            ty,
        });
    }
    let (l, r) = coerce(l, r)?;
    let ty = l.ty();
    Ok(Expr::Arith {
        op,
        l: Box::new(l),
        r: Box::new(r),
        ty,
    })
}
