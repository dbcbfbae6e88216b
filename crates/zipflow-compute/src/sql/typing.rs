//! Types of bound expressions: SQL literals and type names to typed constants and
//! [`SqlType`]s, date intervals, and the constructors of calls, comparisons and arithmetic
//! that coerce their operands to a common type.

use sqlparser::ast::{self, DataType};
use zipflow_core::{Error, Result};

use crate::expr::{
    ArithOp, CmpOp, Expr, Func, MAX_SCALE, SqlType, Value, add_months, cast_value, fold, parse_date,
};

use super::unsupported;

/// A constant interval: months and days.
pub(super) struct Interval {
    pub(super) months: i64,
    pub(super) days: i64,
}

pub(super) fn bool_expr(e: Expr, clause: &str) -> Result<Expr> {
    if e.ty() != SqlType::Bool {
        return Err(Error::invalid(format!(
            "{clause} needs a boolean expression, got {}",
            e.ty()
        )));
    }
    Ok(e)
}

/// A typed literal: `DATE '1998-12-01'`.
pub(super) fn typed_literal(ts: &ast::TypedString) -> Result<Expr> {
    let text = match &ts.value.value {
        ast::Value::SingleQuotedString(s) | ast::Value::DoubleQuotedString(s) => s,
        other => return Err(unsupported(format!("typed literal `{other}`"))),
    };
    match ts.data_type {
        DataType::Date => Ok(Expr::Lit(Value::Date(parse_date(text)?), SqlType::Date)),
        ref t => Err(unsupported(format!("{t} literals"))),
    }
}

pub(super) fn literal(v: &ast::Value) -> Result<Expr> {
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
pub(super) fn number(n: &str) -> Result<Expr> {
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

pub(super) fn sql_type(t: &DataType) -> Result<SqlType> {
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

pub(super) fn interval(iv: &ast::Interval) -> Result<Interval> {
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

pub(super) fn add_interval(base: Expr, iv: &Interval, sign: i64) -> Result<Expr> {
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
pub(super) fn scalar(f: Func, mut args: Vec<Expr>) -> Result<Expr> {
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

/// `e` as type `to`: a literal converted, anything else wrapped in a cast.
pub fn coerce_to(e: Expr, to: SqlType) -> Result<Expr> {
    if e.ty() == to {
        return Ok(e);
    }
    if let Expr::Lit(v, from) = &e {
        return Ok(Expr::Lit(cast_value(v, *from, to)?, to));
    }
    Ok(Expr::Cast(Box::new(e), to))
}

/// The common type two operands are compared (or added) in.
pub(super) fn common_type(a: SqlType, b: SqlType) -> Option<SqlType> {
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

pub(super) fn coerce(a: Expr, b: Expr) -> Result<(Expr, Expr)> {
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

/// The comparison `l op r`, both sides converted to their common type.
pub fn compare(op: CmpOp, l: Expr, r: Expr) -> Result<Expr> {
    let (l, r) = coerce(l, r)?;
    Ok(Expr::Cmp {
        op,
        l: Box::new(l),
        r: Box::new(r),
    })
}

/// The arithmetic `l op r` typed as SQL text would bind it: decimal sums in the larger scale,
/// products adding their scales, division and anything with a float in floats, date
/// arithmetic in days.
pub fn arith(op: ArithOp, l: Expr, r: Expr) -> Result<Expr> {
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
