//! DataFusion physical expressions as zipflow's expression IR, where both give the same
//! answer for every row.
//!
//! Only what is exact in both engines is translated: integers, decimals, dates, strings and
//! booleans (floats are left to DataFusion: their sums depend on the order rows are added),
//! comparisons, AND / OR / NOT, IS [NOT] NULL, IN lists of literals, LIKE, `+ - *` on
//! 64-bit integers and decimals (zipflow checks overflow where DataFusion would wrap, so an
//! answer is never different, at worst an error), CASE, and the casts that lose nothing
//! (integers widened or made decimals, decimals to a larger scale). Anything else is
//! [`Unsupported`], and the plan keeps DataFusion's operators.

use std::sync::Arc;

use arrow::datatypes::{DataType, Schema};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::{
    BinaryExpr, CaseExpr, CastExpr, Column, InListExpr, IsNotNullExpr, IsNullExpr, LikeExpr,
    Literal, NegativeExpr, NotExpr,
};
use zipflow_compute::expr::{ArithOp, CmpOp, Expr, MAX_SCALE, SqlType, Value};
use zipflow_compute::like::LikePattern;
use zipflow_compute::sql::{arith, coerce_to, compare};

/// Why an expression stays with DataFusion (shown by nothing: the plan simply keeps its
/// operators; kept for tests and debugging).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unsupported(pub String);

pub(crate) type Translated = std::result::Result<Expr, Unsupported>;

fn no<T>(what: impl Into<String>) -> std::result::Result<T, Unsupported> {
    Err(Unsupported(what.into()))
}

/// The zipflow type of values of Arrow type `dt`, for the types translated.
pub(crate) fn sql_type(dt: &DataType) -> Option<SqlType> {
    Some(match dt {
        DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32 => SqlType::Int,
        DataType::Decimal32(_, s) | DataType::Decimal64(_, s) | DataType::Decimal128(_, s) => {
            match u8::try_from(*s) {
                Ok(s) if s <= MAX_SCALE => SqlType::Decimal(s),
                _ => return None,
            }
        }
        DataType::Date32 => SqlType::Date,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => SqlType::Str,
        DataType::Boolean => SqlType::Bool,
        DataType::Dictionary(_, v) => sql_type(v)?,
        _ => return None,
    })
}

/// Translates `e`, evaluated over rows of `schema`, whose column `i` is `columns[i]` in
/// zipflow's terms (`None`: a column that has no translation).
pub(crate) fn translate(
    e: &Arc<dyn PhysicalExpr>,
    schema: &Schema,
    columns: &[Option<Expr>],
) -> Translated {
    let t = |x: &Arc<dyn PhysicalExpr>| translate(x, schema, columns);
    if let Some(c) = e.downcast_ref::<Column>() {
        return match columns.get(c.index()) {
            Some(Some(x)) => Ok(x.clone()),
            _ => no(format!("column {}", c.name())),
        };
    }
    if let Some(l) = e.downcast_ref::<Literal>() {
        return literal(l.value());
    }
    if let Some(b) = e.downcast_ref::<BinaryExpr>() {
        return binary(b, schema, columns);
    }
    if let Some(n) = e.downcast_ref::<NotExpr>() {
        return Ok(Expr::Not(Box::new(boolean(t(n.arg())?)?)));
    }
    if let Some(n) = e.downcast_ref::<IsNullExpr>() {
        return Ok(Expr::IsNull {
            e: Box::new(t(n.arg())?),
            negated: false,
        });
    }
    if let Some(n) = e.downcast_ref::<IsNotNullExpr>() {
        return Ok(Expr::IsNull {
            e: Box::new(t(n.arg())?),
            negated: true,
        });
    }
    if let Some(n) = e.downcast_ref::<NegativeExpr>() {
        let x = t(n.arg())?;
        let ty = x.ty();
        if !matches!(ty, SqlType::Int | SqlType::Decimal(_)) || !is_wide(n.arg(), schema) {
            return no("negation");
        }
        return Ok(Expr::Neg(Box::new(x), ty));
    }
    if let Some(i) = e.downcast_ref::<InListExpr>() {
        return in_list(i, schema, columns);
    }
    if let Some(l) = e.downcast_ref::<LikeExpr>() {
        return like(l, schema, columns);
    }
    if let Some(c) = e.downcast_ref::<CastExpr>() {
        return cast(c, schema, columns);
    }
    if let Some(c) = e.downcast_ref::<CaseExpr>() {
        return case(c, schema, columns);
    }
    no(format!("expression {e}"))
}

/// `e` where a predicate is needed.
fn boolean(e: Expr) -> Translated {
    if e.ty() == SqlType::Bool {
        Ok(e)
    } else {
        no("a predicate that is not boolean")
    }
}

/// Whether `e`'s Arrow type is one whose arithmetic zipflow does in the same width: 64-bit
/// integers and decimals (narrower integers wrap in DataFusion at their width).
fn is_wide(e: &Arc<dyn PhysicalExpr>, schema: &Schema) -> bool {
    matches!(
        e.data_type(schema),
        Ok(DataType::Int64
            | DataType::Decimal32(..)
            | DataType::Decimal64(..)
            | DataType::Decimal128(..))
    )
}

fn literal(v: &ScalarValue) -> Translated {
    let int = |x: Option<i64>| match x {
        Some(x) => Expr::Lit(Value::Int(x), SqlType::Int),
        None => Expr::Lit(Value::Null, SqlType::Int),
    };
    Ok(match v {
        ScalarValue::Int8(x) => int(x.map(i64::from)),
        ScalarValue::Int16(x) => int(x.map(i64::from)),
        ScalarValue::Int32(x) => int(x.map(i64::from)),
        ScalarValue::Int64(x) => int(*x),
        ScalarValue::UInt8(x) => int(x.map(i64::from)),
        ScalarValue::UInt16(x) => int(x.map(i64::from)),
        ScalarValue::UInt32(x) => int(x.map(i64::from)),
        ScalarValue::Decimal128(x, _, s) => {
            let Some(SqlType::Decimal(s)) = sql_type(&DataType::Decimal128(38, *s)) else {
                return no(format!("a decimal of scale {s}"));
            };
            let ty = SqlType::Decimal(s);
            match x {
                // Decimal literals are held as scaled `i64`s, like the columns.
                Some(x) => match i64::try_from(*x) {
                    Ok(_) => Expr::Lit(Value::Decimal(*x, s), ty),
                    Err(_) => return no("a decimal literal beyond 64 bits"),
                },
                None => Expr::Lit(Value::Null, ty),
            }
        }
        ScalarValue::Date32(x) => match x {
            Some(d) => Expr::Lit(Value::Date(*d), SqlType::Date),
            None => Expr::Lit(Value::Null, SqlType::Date),
        },
        ScalarValue::Utf8(x) | ScalarValue::LargeUtf8(x) | ScalarValue::Utf8View(x) => match x {
            Some(s) => Expr::Lit(Value::Str(s.clone()), SqlType::Str),
            None => Expr::Lit(Value::Null, SqlType::Str),
        },
        ScalarValue::Boolean(x) => match x {
            Some(b) => Expr::Lit(Value::Bool(*b), SqlType::Bool),
            None => Expr::Lit(Value::Null, SqlType::Bool),
        },
        ScalarValue::Dictionary(_, v) => literal(v)?,
        other => return no(format!("literal {other:?}")),
    })
}

fn binary(b: &BinaryExpr, schema: &Schema, columns: &[Option<Expr>]) -> Translated {
    let (l, r) = (
        translate(b.left(), schema, columns)?,
        translate(b.right(), schema, columns)?,
    );
    let cmp = |op: CmpOp| {
        let (lt, rt) = (l.ty(), r.ty());
        // Both sides are of one type after DataFusion's coercion; zipflow's own coercion
        // only aligns decimal scales and integers with decimals, which is exact.
        let same_kind = match (lt, rt) {
            (SqlType::Decimal(_) | SqlType::Int, SqlType::Decimal(_) | SqlType::Int) => true,
            (a, b) => a == b,
        };
        if !same_kind {
            return no(format!("comparing {lt} with {rt}"));
        }
        compare(op, l.clone(), r.clone()).map_err(|e| Unsupported(e.to_string()))
    };
    match b.op() {
        Operator::Eq => cmp(CmpOp::Eq),
        Operator::NotEq => cmp(CmpOp::Ne),
        Operator::Lt => cmp(CmpOp::Lt),
        Operator::LtEq => cmp(CmpOp::Le),
        Operator::Gt => cmp(CmpOp::Gt),
        Operator::GtEq => cmp(CmpOp::Ge),
        Operator::And | Operator::Or => {
            let is_and = *b.op() == Operator::And;
            let mut parts = Vec::new();
            for x in [boolean(l)?, boolean(r)?] {
                match x {
                    Expr::And(v) if is_and => parts.extend(v),
                    Expr::Or(v) if !is_and => parts.extend(v),
                    x => parts.push(x),
                }
            }
            Ok(if is_and {
                Expr::And(parts)
            } else {
                Expr::Or(parts)
            })
        }
        op @ (Operator::Plus | Operator::Minus | Operator::Multiply) => {
            let numeric = |t: SqlType| matches!(t, SqlType::Int | SqlType::Decimal(_));
            if !numeric(l.ty())
                || !numeric(r.ty())
                || !is_wide(b.left(), schema)
                || !is_wide(b.right(), schema)
            {
                return no(format!("{op} on {} and {}", l.ty(), r.ty()));
            }
            let op = match op {
                Operator::Plus => ArithOp::Add,
                Operator::Minus => ArithOp::Sub,
                _ => ArithOp::Mul,
            };
            let x = arith(op, l, r).map_err(|e| Unsupported(e.to_string()))?;
            // The result must be of the type DataFusion gives it (a decimal's scale).
            match (b.data_type(schema).ok().as_ref().and_then(sql_type), x.ty()) {
                (Some(want), got) if want == got => Ok(x),
                (want, got) => no(format!("arithmetic typed {want:?} here, {got} in zipflow")),
            }
        }
        op => no(format!("operator {op}")),
    }
}

fn in_list(i: &InListExpr, schema: &Schema, columns: &[Option<Expr>]) -> Translated {
    let e = translate(i.expr(), schema, columns)?;
    let ty = e.ty();
    if matches!(ty, SqlType::Bool) {
        return no("IN over booleans");
    }
    let mut list = Vec::with_capacity(i.list().len());
    for x in i.list() {
        // NULL in the list makes NOT IN never true and IN never false: left to DataFusion.
        match translate(x, schema, columns)? {
            Expr::Lit(Value::Null, _) => return no("NULL in an IN list"),
            lit @ Expr::Lit(..) => match coerce_to(lit, ty) {
                Ok(Expr::Lit(v, _)) => list.push(v),
                _ => return no("an IN list item of another type"),
            },
            _ => return no("an IN list of expressions"),
        }
    }
    Ok(Expr::InList {
        e: Box::new(e),
        list,
        negated: i.negated(),
    })
}

fn like(l: &LikeExpr, schema: &Schema, columns: &[Option<Expr>]) -> Translated {
    let e = translate(l.expr(), schema, columns)?;
    if e.ty() != SqlType::Str {
        return no("LIKE on a value that is not a string");
    }
    let Some(p) = l.pattern().downcast_ref::<Literal>() else {
        return no("a LIKE pattern that is not a literal");
    };
    let pattern = match p.value() {
        ScalarValue::Utf8(Some(s))
        | ScalarValue::LargeUtf8(Some(s))
        | ScalarValue::Utf8View(Some(s)) => s,
        _ => return no("a LIKE pattern that is not a string"),
    };
    // DataFusion escapes with `\` where no ESCAPE is given, as zipflow does.
    let pattern = LikePattern::new(pattern, Some('\\'), l.case_insensitive())
        .map_err(|e| Unsupported(e.to_string()))?;
    Ok(Expr::Like {
        e: Box::new(e),
        pattern,
        negated: l.negated(),
    })
}

fn cast(c: &CastExpr, schema: &Schema, columns: &[Option<Expr>]) -> Translated {
    let x = translate(c.expr(), schema, columns)?;
    let Ok(from) = c.expr().data_type(schema) else {
        return no("a cast from an unknown type");
    };
    let to = c.cast_type();
    let Some(want) = sql_type(to) else {
        return no(format!("a cast to {to}"));
    };
    let lossless = match (&from, to) {
        (f, t) if f == t => true,
        // Strings of any layout (dictionary, view) to strings; dates to dates.
        (_, _) if x.ty() == want && matches!(want, SqlType::Str | SqlType::Date) => true,
        (f, DataType::Int64) => matches!(
            f,
            DataType::Int8
                | DataType::Int16
                | DataType::Int32
                | DataType::UInt8
                | DataType::UInt16
                | DataType::UInt32
        ),
        (
            DataType::Decimal32(_, s) | DataType::Decimal64(_, s) | DataType::Decimal128(_, s),
            DataType::Decimal128(_, t) | DataType::Decimal64(_, t),
        ) => t >= s,
        (f, DataType::Decimal128(..) | DataType::Decimal64(..)) => {
            x.ty() == SqlType::Int && f != &DataType::UInt64
        }
        _ => false,
    };
    if !lossless {
        return no(format!("a cast from {from} to {to}"));
    }
    coerce_to(x, want).map_err(|e| Unsupported(e.to_string()))
}

fn case(c: &CaseExpr, schema: &Schema, columns: &[Option<Expr>]) -> Translated {
    if c.expr().is_some() {
        return no("CASE with an operand");
    }
    let Some(ty) = c.data_type(schema).ok().as_ref().and_then(sql_type) else {
        return no("CASE of an untranslated type");
    };
    let result = |x: &Arc<dyn PhysicalExpr>| -> Translated {
        let r = translate(x, schema, columns)?;
        if r.ty() != ty && !matches!(r, Expr::Lit(..)) {
            return no("a CASE branch of another type");
        }
        coerce_to(r, ty).map_err(|e| Unsupported(e.to_string()))
    };
    let mut whens = Vec::new();
    for (w, t) in c.when_then_expr() {
        whens.push((boolean(translate(w, schema, columns)?)?, result(t)?));
    }
    let otherwise = match c.else_expr() {
        Some(e) => Some(Box::new(result(e)?)),
        None => None,
    };
    Ok(Expr::Case {
        whens,
        otherwise,
        ty,
    })
}
