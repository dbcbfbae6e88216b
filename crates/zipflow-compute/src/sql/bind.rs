//! Binding: `sqlparser` expressions to typed [`Expr`]s over the table's columns ([`Binder`]),
//! or, after aggregation, over the group keys and the aggregates it collects.

use sqlparser::ast::{self, BinaryOperator, DataType, FunctionArg, FunctionArgExpr};
use zipflow_core::{Error, Result};

use crate::expr::{ArithOp, CmpOp, DateUnit, Expr, Func, SqlType, Value, cast_value, fold};
use crate::query::{AggFunc, Aggregate};

use super::typing::{
    add_interval, arith, bool_expr, coerce, coerce_to, common_type, compare, interval, literal,
    scalar, sql_type, typed_literal,
};
use super::unsupported;

pub(super) fn aggregate_name(name: &str) -> Option<&'static str> {
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

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    /// Expressions over table rows.
    Rows,
    /// Expressions over aggregates and group keys.
    Aggregated,
}

pub(super) struct Binder<'a> {
    pub(super) columns: &'a [(String, SqlType)],
    pub(super) keys: Vec<Expr>,
    pub(super) key_asts: Vec<ast::Expr>,
    pub(super) aggregates: Vec<Aggregate>,
    pub(super) mode: Mode,
}

impl Binder<'_> {
    pub(super) fn column(&self, name: &str) -> Result<Expr> {
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

    pub(super) fn bind(&mut self, e: &ast::Expr) -> Result<Expr> {
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

    pub(super) fn bind_inner(&mut self, e: &ast::Expr) -> Result<Expr> {
        use ast::Expr as A;
        match e {
            A::Identifier(id) => self.column(&id.value),
            A::CompoundIdentifier(ids) => match ids.last() {
                Some(id) => self.column(&id.value),
                None => Err(Error::invalid("empty identifier")),
            },
            A::Nested(x) => self.bind(x),
            A::Value(v) => literal(&v.value),
            A::TypedString(ts) => typed_literal(ts),
            A::Interval(_) => Err(unsupported(
                "an INTERVAL outside `date + INTERVAL` / `date - INTERVAL`",
            )),
            A::UnaryOp { op, expr } => self.unary(op, expr),
            A::BinaryOp { left, op, right } => self.binary(left, op, right),
            A::Between {
                expr,
                negated,
                low,
                high,
            } => self.between(expr, *negated, low, high),
            A::In {
                expr,
                target: ast::InTarget::List(list),
                negated,
                ..
            } => self.in_list(expr, list, *negated),
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
            } => self.cast(expr, data_type),
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
            A::Extract { field, expr, .. } => self.extract(field, expr),
            A::Trim {
                trim_where,
                trim_what: None,
                expr,
                trim_characters: None,
            } => self.trim(trim_where.as_ref(), expr),
            A::Trim { .. } => Err(unsupported("TRIM of characters other than spaces")),
            A::Substring {
                expr,
                substring_from,
                substring_for,
                ..
            } => self.substring(expr, substring_from.as_deref(), substring_for.as_deref()),
            other => Err(unsupported(format!("expression `{other}`"))),
        }
    }

    /// `NOT x`, `-x` and `+x`.
    fn unary(&mut self, op: &ast::UnaryOperator, expr: &ast::Expr) -> Result<Expr> {
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

    /// `x [NOT] BETWEEN low AND high`: two comparisons.
    fn between(
        &mut self,
        expr: &ast::Expr,
        negated: bool,
        low: &ast::Expr,
        high: &ast::Expr,
    ) -> Result<Expr> {
        let x = self.bind(expr)?;
        let lo = self.bind(low)?;
        let hi = self.bind(high)?;
        let ge = compare(CmpOp::Ge, x.clone(), lo)?;
        let le = compare(CmpOp::Le, x, hi)?;
        let both = Expr::And(vec![ge, le]);
        Ok(if negated {
            Expr::Not(Box::new(both))
        } else {
            both
        })
    }

    /// `x [NOT] IN (list)`: the items are constants of the type of `x`.
    fn in_list(&mut self, expr: &ast::Expr, list: &[ast::Expr], negated: bool) -> Result<Expr> {
        let x = self.bind(expr)?;
        let mut values = Vec::with_capacity(list.len());
        for item in list {
            let lit = self.bind(item)?;
            let (a, b) = coerce(x.clone(), lit)?;
            let Expr::Lit(v, _) = (if b.is_constant() { fold(&b)? } else { b }) else {
                return Err(unsupported("IN lists with non-constant items"));
            };
            if matches!(v, Value::Null) {
                // `x NOT IN (.., NULL)` is never true and `x IN (.., NULL)` is NULL where no
                // item matches: three-valued logic the block path does not carry.
                return Err(unsupported("IN lists with a NULL item"));
            }
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
            negated,
        })
    }

    /// `CAST(x AS type)`, done at once on a literal.
    fn cast(&mut self, expr: &ast::Expr, data_type: &DataType) -> Result<Expr> {
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

    /// `EXTRACT(field FROM x)`: the date function of the field.
    fn extract(&mut self, field: &ast::DateTimeField, expr: &ast::Expr) -> Result<Expr> {
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

    /// `TRIM([BOTH | LEADING | TRAILING] FROM x)`, of spaces.
    fn trim(&mut self, trim_where: Option<&ast::TrimWhereField>, expr: &ast::Expr) -> Result<Expr> {
        let f = match trim_where {
            None | Some(ast::TrimWhereField::Both) => Func::Trim,
            Some(ast::TrimWhereField::Leading) => Func::LTrim,
            Some(ast::TrimWhereField::Trailing) => Func::RTrim,
        };
        let x = self.bind(expr)?;
        scalar(f, vec![x])
    }

    /// `SUBSTRING(x FROM start [FOR length])` (`start` 1 when absent).
    fn substring(
        &mut self,
        expr: &ast::Expr,
        substring_from: Option<&ast::Expr>,
        substring_for: Option<&ast::Expr>,
    ) -> Result<Expr> {
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

    /// `CASE [operand] WHEN .. THEN .. [ELSE ..] END`: a simple CASE compares its operand with
    /// each WHEN value; the results take their common type.
    pub(super) fn case(
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
    pub(super) fn coalesce(&mut self, args: &[FunctionArg]) -> Result<Expr> {
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
    pub(super) fn like(
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
            // As in PostgreSQL and DataFusion, `\` escapes unless ESCAPE names another.
            None => Some('\\'),
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

    pub(super) fn function(&mut self, f: &ast::Function) -> Result<Expr> {
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
    pub(super) fn scalar_call(&mut self, name: &str, f: &ast::Function) -> Result<Expr> {
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

    pub(super) fn binary(
        &mut self,
        left: &ast::Expr,
        op: &BinaryOperator,
        right: &ast::Expr,
    ) -> Result<Expr> {
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
