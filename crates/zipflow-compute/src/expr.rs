//! The expression IR: typed, bound to a table's columns, with a row-at-a-time evaluator that is
//! the reference every fast path is checked against.
//!
//! Binding (see [`crate::sql`]) inserts explicit [`Expr::Cast`]s so that both operands of an
//! arithmetic operation or a comparison share one representation: integers, decimals and dates
//! are scaled `i64`s (a decimal of scale `s` stores `v * 10^s`), floats are `f64`. Products of
//! decimals add their scales; sums are kept in `i128`.

use std::cmp::Ordering;
use std::fmt;

use zipflow_core::{ColumnType, Error, Result};

/// The SQL type of an expression.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SqlType {
    /// Booleans (predicates).
    Bool,
    /// 64-bit integers.
    Int,
    /// Exact decimals: `i64` (or `i128` for sums) scaled by `10^scale`.
    Decimal(u8),
    /// Days since 1970-01-01.
    Date,
    /// binary64 floats.
    Float,
    /// UTF-8 strings.
    Str,
}

impl SqlType {
    /// The type a stored column of `ty` is read as.
    pub fn of_column(ty: ColumnType) -> Result<SqlType> {
        Ok(match ty {
            ColumnType::Bool => SqlType::Bool,
            ColumnType::Int(_) => SqlType::Int,
            // Read as plain integers or lossy text these would give wrong answers (dates cast
            // from instants, bytes compared as text): DataFusion runs such queries.
            ColumnType::Timestamp(_) => return Err(Error::unsupported("timestamp columns")),
            ColumnType::Binary => return Err(Error::unsupported("binary columns")),
            ColumnType::Float(_) => SqlType::Float,
            ColumnType::Date32 => SqlType::Date,
            ColumnType::Decimal { scale, .. } => match u8::try_from(scale) {
                Ok(s) if s <= MAX_SCALE => SqlType::Decimal(s),
                _ => {
                    return Err(Error::unsupported(format!(
                        "decimal columns of scale {scale} (queries support scales 0..={MAX_SCALE})"
                    )));
                }
            },
            ColumnType::Utf8 => SqlType::Str,
        })
    }

    /// Whether values are scaled `i64`s (integers, decimals, dates, booleans).
    pub fn is_integral(self) -> bool {
        matches!(
            self,
            SqlType::Int | SqlType::Decimal(_) | SqlType::Date | SqlType::Bool
        )
    }

    /// Whether the type is numeric (integer, decimal or float).
    pub fn is_numeric(self) -> bool {
        matches!(self, SqlType::Int | SqlType::Decimal(_) | SqlType::Float)
    }

    /// The decimal scale (0 for integers).
    pub fn scale(self) -> u8 {
        match self {
            SqlType::Decimal(s) => s,
            _ => 0,
        }
    }
}

impl fmt::Display for SqlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SqlType::Bool => f.write_str("boolean"),
            SqlType::Int => f.write_str("bigint"),
            SqlType::Decimal(s) => write!(f, "decimal(38,{s})"),
            SqlType::Date => f.write_str("date"),
            SqlType::Float => f.write_str("double"),
            SqlType::Str => f.write_str("varchar"),
        }
    }
}

/// Largest decimal scale an expression may have (`10^18` still fits an `i64`).
pub const MAX_SCALE: u8 = 18;

/// `10^k` for `k` in `0..=18`.
pub fn pow10(k: u8) -> i64 {
    10i64.pow(u32::from(k.min(18)))
}

/// A scalar value: a literal, a cell, or an aggregate's result.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// SQL NULL.
    Null,
    /// A boolean.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A decimal: `v / 10^scale`.
    Decimal(i128, u8),
    /// Days since 1970-01-01.
    Date(i32),
    /// A float.
    Float(f64),
    /// A string.
    Str(String),
}

impl Value {
    /// Total order used by ORDER BY: NULL last, then by value within a type.
    pub fn sort_cmp(&self, other: &Value) -> Ordering {
        match (self, other) {
            (Value::Null, Value::Null) => Ordering::Equal,
            (Value::Null, _) => Ordering::Greater,
            (_, Value::Null) => Ordering::Less,
            (Value::Bool(a), Value::Bool(b)) => a.cmp(b),
            (Value::Int(a), Value::Int(b)) => a.cmp(b),
            (Value::Date(a), Value::Date(b)) => a.cmp(b),
            (Value::Decimal(a, sa), Value::Decimal(b, sb)) => {
                let s = (*sa).max(*sb);
                rescale_i128(*a, *sa, s).cmp(&rescale_i128(*b, *sb, s))
            }
            (Value::Float(a), Value::Float(b)) => a.total_cmp(b),
            (Value::Str(a), Value::Str(b)) => a.cmp(b),
            (a, b) => a.as_f64().total_cmp(&b.as_f64()),
        }
    }

    /// The value as a float (NaN when it is not numeric).
    pub fn as_f64(&self) -> f64 {
        match self {
            Value::Bool(b) => f64::from(u8::from(*b)),
            Value::Int(v) => *v as f64,
            Value::Decimal(v, s) => *v as f64 / pow10(*s) as f64,
            Value::Date(d) => f64::from(*d),
            Value::Float(v) => *v,
            Value::Null | Value::Str(_) => f64::NAN,
        }
    }
}

/// Multiplies `v` by `10^(to - from)` when `to >= from` (saturating; callers compare only).
fn rescale_i128(v: i128, from: u8, to: u8) -> i128 {
    v.saturating_mul(10i128.pow(u32::from(to.saturating_sub(from))))
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => f.write_str("NULL"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Int(v) => write!(f, "{v}"),
            Value::Decimal(v, s) => f.write_str(&format_decimal(*v, *s)),
            Value::Date(d) => f.write_str(&format_date(*d)),
            Value::Float(v) => write!(f, "{v}"),
            Value::Str(s) => f.write_str(s),
        }
    }
}

/// `v / 10^scale` with exactly `scale` decimals.
pub fn format_decimal(v: i128, scale: u8) -> String {
    if scale == 0 {
        return v.to_string();
    }
    let digits = v.unsigned_abs().to_string();
    let s = usize::from(scale);
    let padded = if digits.len() <= s {
        format!("{}{digits}", "0".repeat(s + 1 - digits.len()))
    } else {
        digits
    };
    let (int, frac) = padded.split_at(padded.len() - s);
    let sign = if v < 0 { "-" } else { "" };
    format!("{sign}{int}.{frac}")
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (i64::from(m) + 9) % 12;
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The (year, month, day) of `days` since 1970-01-01.
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        _ => 28,
    }
}

/// `YYYY-MM-DD`.
pub fn format_date(days: i32) -> String {
    let (y, m, d) = civil_from_days(i64::from(days));
    format!("{y:04}-{m:02}-{d:02}")
}

/// Parses `YYYY-MM-DD` into days since 1970-01-01.
pub fn parse_date(text: &str) -> Result<i32> {
    let bad = || Error::invalid(format!("`{text}` is not a date (expected YYYY-MM-DD)"));
    let mut parts = text.trim().splitn(3, '-');
    let (Some(y), Some(m), Some(d)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(bad());
    };
    let y: i64 = y.parse().map_err(|_| bad())?;
    let m: u32 = m.parse().map_err(|_| bad())?;
    let d: u32 = d.parse().map_err(|_| bad())?;
    if !(1..=12).contains(&m) || d == 0 || d > days_in_month(y, m) || !(0..=9999).contains(&y) {
        return Err(bad());
    }
    i32::try_from(days_from_civil(y, m, d)).map_err(|_| bad())
}

/// Adds `months` calendar months to a date, clamping the day to the month's end (as SQL does).
pub fn add_months(days: i32, months: i64) -> Result<i32> {
    let (y, m, d) = civil_from_days(i64::from(days));
    let total = y * 12 + i64::from(m) - 1 + months;
    let (ny, nm) = (total.div_euclid(12), (total.rem_euclid(12) + 1) as u32);
    let nd = d.min(days_in_month(ny, nm));
    i32::try_from(days_from_civil(ny, nm, nd))
        .map_err(|_| Error::invalid("date arithmetic out of range"))
}

/// Arithmetic operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArithOp {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/` (always on floats)
    Div,
    /// `%`: the remainder of the truncated quotient (of the dividend's sign); on integers and
    /// decimals NULL when the divisor is 0, on floats as `fmod` (NaN).
    Mod,
}

/// Comparison operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    /// `=`
    Eq,
    /// `<>`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

impl CmpOp {
    /// Whether `ord` (left compared with right) satisfies the operator.
    pub fn holds(self, ord: Ordering) -> bool {
        match self {
            CmpOp::Eq => ord == Ordering::Equal,
            CmpOp::Ne => ord != Ordering::Equal,
            CmpOp::Lt => ord == Ordering::Less,
            CmpOp::Le => ord != Ordering::Greater,
            CmpOp::Gt => ord == Ordering::Greater,
            CmpOp::Ge => ord != Ordering::Less,
        }
    }

    /// The operator with its operands swapped (`a < b` is `b > a`).
    pub fn flip(self) -> CmpOp {
        match self {
            CmpOp::Lt => CmpOp::Gt,
            CmpOp::Le => CmpOp::Ge,
            CmpOp::Gt => CmpOp::Lt,
            CmpOp::Ge => CmpOp::Le,
            op => op,
        }
    }
}

/// A typed, bound expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// Column `index` of the table.
    Column {
        /// Column index in the file.
        index: usize,
        /// Its type.
        ty: SqlType,
    },
    /// A literal (integral types hold their scaled `i64` as [`Value::Int`]-like variants).
    Lit(Value, SqlType),
    /// Arithmetic on two operands of one representation (see the module docs).
    Arith {
        /// Operator.
        op: ArithOp,
        /// Left operand.
        l: Box<Expr>,
        /// Right operand.
        r: Box<Expr>,
        /// Result type.
        ty: SqlType,
    },
    /// Negation.
    Neg(Box<Expr>, SqlType),
    /// A comparison of two operands of one type.
    Cmp {
        /// Operator.
        op: CmpOp,
        /// Left operand.
        l: Box<Expr>,
        /// Right operand.
        r: Box<Expr>,
    },
    /// All of (SQL three-valued AND).
    And(Vec<Expr>),
    /// Any of (SQL three-valued OR).
    Or(Vec<Expr>),
    /// NOT.
    Not(Box<Expr>),
    /// `e [NOT] IN (literals)`; the literals have `e`'s type.
    InList {
        /// Tested expression.
        e: Box<Expr>,
        /// The list.
        list: Vec<Value>,
        /// NOT IN.
        negated: bool,
    },
    /// `e [NOT] LIKE pattern` (or `ILIKE`) on a string.
    Like {
        /// Tested expression.
        e: Box<Expr>,
        /// The compiled pattern.
        pattern: crate::like::LikePattern,
        /// NOT LIKE.
        negated: bool,
    },
    /// `e IS [NOT] NULL`.
    IsNull {
        /// Tested expression.
        e: Box<Expr>,
        /// IS NOT NULL.
        negated: bool,
    },
    /// `CASE WHEN c THEN r ... [ELSE e] END`: the first branch whose condition is true, else
    /// `otherwise` (NULL when absent); every result has type `ty`.
    Case {
        /// The branches: condition, result.
        whens: Vec<(Expr, Expr)>,
        /// The ELSE result.
        otherwise: Option<Box<Expr>>,
        /// Result type.
        ty: SqlType,
    },
    /// A conversion.
    Cast(Box<Expr>, SqlType),
    /// A scalar function of its arguments (NULL when any is NULL).
    Func {
        /// Which.
        f: Func,
        /// Its arguments, of the types [`Func`] names.
        args: Vec<Expr>,
        /// Result type.
        ty: SqlType,
    },
    /// After aggregation: the value of aggregate `i`.
    AggRef(usize, SqlType),
    /// After aggregation: the value of group key `i`.
    KeyRef(usize, SqlType),
}

impl Expr {
    /// The expression's type.
    pub fn ty(&self) -> SqlType {
        match self {
            Expr::Column { ty, .. }
            | Expr::Lit(_, ty)
            | Expr::Arith { ty, .. }
            | Expr::Neg(_, ty)
            | Expr::Cast(_, ty)
            | Expr::Case { ty, .. }
            | Expr::Func { ty, .. }
            | Expr::AggRef(_, ty)
            | Expr::KeyRef(_, ty) => *ty,
            Expr::Cmp { .. }
            | Expr::And(_)
            | Expr::Or(_)
            | Expr::Not(_)
            | Expr::InList { .. }
            | Expr::Like { .. }
            | Expr::IsNull { .. } => SqlType::Bool,
        }
    }

    /// Adds every column index the expression reads to `out`.
    pub fn columns(&self, out: &mut Vec<usize>) {
        match self {
            Expr::Column { index, .. } => {
                if !out.contains(index) {
                    out.push(*index);
                }
            }
            Expr::Lit(..) | Expr::AggRef(..) | Expr::KeyRef(..) => {}
            Expr::Arith { l, r, .. } | Expr::Cmp { l, r, .. } => {
                l.columns(out);
                r.columns(out);
            }
            Expr::And(v) | Expr::Or(v) => v.iter().for_each(|e| e.columns(out)),
            Expr::Neg(e, _)
            | Expr::Not(e)
            | Expr::Cast(e, _)
            | Expr::InList { e, .. }
            | Expr::Like { e, .. }
            | Expr::IsNull { e, .. } => e.columns(out),
            Expr::Case {
                whens, otherwise, ..
            } => {
                for (c, r) in whens {
                    c.columns(out);
                    r.columns(out);
                }
                if let Some(x) = otherwise {
                    x.columns(out);
                }
            }
            Expr::Func { args, .. } => args.iter().for_each(|e| e.columns(out)),
        }
    }

    /// Whether the expression reads no column (it can be folded to a constant).
    pub fn is_constant(&self) -> bool {
        let mut cols = Vec::new();
        self.columns(&mut cols);
        cols.is_empty() && !self.has_refs()
    }

    fn has_refs(&self) -> bool {
        match self {
            Expr::AggRef(..) | Expr::KeyRef(..) => true,
            Expr::Column { .. } | Expr::Lit(..) => false,
            Expr::Arith { l, r, .. } | Expr::Cmp { l, r, .. } => l.has_refs() || r.has_refs(),
            Expr::And(v) | Expr::Or(v) => v.iter().any(Expr::has_refs),
            Expr::Neg(e, _)
            | Expr::Not(e)
            | Expr::Cast(e, _)
            | Expr::InList { e, .. }
            | Expr::Like { e, .. }
            | Expr::IsNull { e, .. } => e.has_refs(),
            Expr::Case {
                whens, otherwise, ..
            } => {
                whens.iter().any(|(c, r)| c.has_refs() || r.has_refs())
                    || otherwise.as_ref().is_some_and(|x| x.has_refs())
            }
            Expr::Func { args, .. } => args.iter().any(Expr::has_refs),
        }
    }
}

/// What a row-at-a-time evaluation reads: cells, aggregate results, group keys.
pub trait Row {
    /// Cell of column `index`.
    fn column(&self, index: usize) -> Value;
    /// Result of aggregate `i` (after aggregation only).
    fn agg(&self, i: usize) -> Value {
        let _ = i;
        Value::Null
    }
    /// Group key `i` (after aggregation only).
    fn key(&self, i: usize) -> Value {
        let _ = i;
        Value::Null
    }
}

/// A row with no columns, for constant folding.
pub struct NoRow;

impl Row for NoRow {
    fn column(&self, _: usize) -> Value {
        Value::Null
    }
}

fn overflow() -> Error {
    Error::invalid("arithmetic overflow (the result does not fit a 64-bit decimal)")
}

/// The integral payload of a value of an integral type, as scaled i128.
fn integral(v: &Value) -> Option<i128> {
    match v {
        Value::Bool(b) => Some(i128::from(*b)),
        Value::Int(x) => Some(i128::from(*x)),
        Value::Decimal(x, _) => Some(*x),
        Value::Date(d) => Some(i128::from(*d)),
        _ => None,
    }
}

/// Builds a value of integral type `ty` from its scaled payload, checking it fits an `i64`
/// (aggregated sums are built elsewhere and may exceed it).
pub fn make_integral(v: i128, ty: SqlType) -> Result<Value> {
    let x = i64::try_from(v).map_err(|_| overflow())?;
    Ok(match ty {
        SqlType::Bool => Value::Bool(x != 0),
        SqlType::Decimal(s) => Value::Decimal(i128::from(x), s),
        SqlType::Date => Value::Date(i32::try_from(x).map_err(|_| overflow())?),
        _ => Value::Int(x),
    })
}

/// Rounds `v / 10^k` half away from zero.
pub fn div_round(v: i128, k: u8) -> i128 {
    if k == 0 {
        return v;
    }
    let d = 10i128.pow(u32::from(k));
    let q = v / d;
    let r = v % d;
    if r.abs() * 2 >= d { q + v.signum() } else { q }
}

/// Casts a value to `to`.
pub fn cast_value(v: &Value, from: SqlType, to: SqlType) -> Result<Value> {
    if matches!(v, Value::Null) || from == to {
        return Ok(v.clone());
    }
    match (from, to) {
        (f, SqlType::Float) if f.is_integral() => {
            let x = integral(v).unwrap_or(0);
            Ok(Value::Float(x as f64 / pow10(f.scale()) as f64))
        }
        (SqlType::Float, t) if t.is_integral() && t != SqlType::Date => {
            let Value::Float(x) = v else {
                return Ok(Value::Null);
            };
            let scaled = (x * pow10(t.scale()) as f64).round();
            if !scaled.is_finite() || scaled.abs() >= 9.2e18 {
                return Err(overflow());
            }
            make_integral(scaled as i128, t)
        }
        (
            SqlType::Int | SqlType::Decimal(_) | SqlType::Bool,
            SqlType::Int | SqlType::Decimal(_),
        ) => {
            let x = integral(v).unwrap_or(0);
            let (fs, ts) = (from.scale(), to.scale());
            let y = if ts >= fs {
                x.checked_mul(i128::from(pow10(ts - fs)))
                    .ok_or_else(overflow)?
            } else {
                div_round(x, fs - ts)
            };
            make_integral(y, to)
        }
        (SqlType::Str, SqlType::Date) => match v {
            Value::Str(s) => Ok(Value::Date(parse_date(s)?)),
            _ => Ok(Value::Null),
        },
        (_, SqlType::Str) => Ok(Value::Str(v.to_string())),
        (SqlType::Date, SqlType::Int) => Ok(Value::Int(integral(v).unwrap_or(0) as i64)),
        // Days since 1970-01-01 (date + integer adds days).
        (SqlType::Int, SqlType::Date) => Ok(Value::Date(
            i32::try_from(integral(v).unwrap_or(0))
                .map_err(|_| Error::invalid("date arithmetic out of range"))?,
        )),
        _ => Err(Error::unsupported(format!("cast from {from} to {to}"))),
    }
}

/// Scalar functions (row by row, on the reference path).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Func {
    /// `EXTRACT(YEAR FROM date)`, `year(date)`.
    Year,
    /// The month, 1 to 12.
    Month,
    /// The day of the month.
    Day,
    /// The quarter, 1 to 4.
    Quarter,
    /// The day of the week, 0 (Sunday) to 6.
    DayOfWeek,
    /// The day of the year, from 1.
    DayOfYear,
    /// `upper(string)`.
    Upper,
    /// `lower(string)`.
    Lower,
    /// `length(string)`, in characters.
    Length,
    /// `substring(string, start[, length])`: characters from position `start` (the first is
    /// 1) on, `length` of them at most, those before position 1 cut off (as SQL has it).
    Substring,
    /// `a || b`: the two strings one after the other.
    Concat,
    /// `trim(string)`: without its leading and trailing spaces.
    Trim,
    /// `ltrim(string)`: without its leading spaces.
    LTrim,
    /// `rtrim(string)`: without its trailing spaces.
    RTrim,
    /// `abs(number)`, of the number's type.
    Abs,
    /// `date_trunc('unit', date)`: the first day of the date's unit.
    DateTrunc(DateUnit),
}

/// The units of `date_trunc`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DateUnit {
    /// The year divided by 1000 (truncated), times 1000, January 1st.
    Millennium,
    /// The year divided by 100 (truncated), times 100, January 1st.
    Century,
    /// The year divided by 10 (truncated), times 10, January 1st.
    Decade,
    /// January 1st.
    Year,
    /// The first day of the quarter.
    Quarter,
    /// The first day of the month.
    Month,
    /// The Monday on or before the date (ISO weeks).
    Week,
    /// The date itself.
    Day,
}

impl DateUnit {
    /// The unit `name` names (`date_trunc`'s spellings), if any.
    pub fn parse(name: &str) -> Option<DateUnit> {
        Some(match name {
            "millennium" | "millennia" | "mil" | "mils" => DateUnit::Millennium,
            "century" | "centuries" | "cent" | "c" => DateUnit::Century,
            "decade" | "decades" | "dec" => DateUnit::Decade,
            "year" | "years" | "yr" | "yrs" | "y" => DateUnit::Year,
            "quarter" | "quarters" => DateUnit::Quarter,
            "month" | "months" | "mon" | "mons" => DateUnit::Month,
            "week" | "weeks" | "w" => DateUnit::Week,
            "day" | "days" | "d" => DateUnit::Day,
            _ => return None,
        })
    }

    /// The first day of `d`'s unit (days since 1970-01-01).
    pub fn trunc(self, d: i32) -> Result<i32> {
        let (y, m, _) = civil_from_days(i64::from(d));
        let first = |y: i64, m: u32| {
            i32::try_from(days_from_civil(y, m, 1))
                .map_err(|_| Error::invalid("date_trunc out of the date range"))
        };
        match self {
            DateUnit::Millennium => first(y / 1000 * 1000, 1),
            DateUnit::Century => first(y / 100 * 100, 1),
            DateUnit::Decade => first(y / 10 * 10, 1),
            DateUnit::Year => first(y, 1),
            DateUnit::Quarter => first(y, (m - 1) / 3 * 3 + 1),
            DateUnit::Month => first(y, m),
            // 1970-01-01 was a Thursday, so Monday is day 4 of the week counted from it.
            DateUnit::Week => Ok(d - (d - 4).rem_euclid(7)),
            DateUnit::Day => Ok(d),
        }
    }
}

impl Func {
    /// The function's name as SQL spells it.
    pub fn name(self) -> &'static str {
        match self {
            Func::Year => "year",
            Func::Month => "month",
            Func::Day => "day",
            Func::Quarter => "quarter",
            Func::DayOfWeek => "dayofweek",
            Func::DayOfYear => "dayofyear",
            Func::Upper => "upper",
            Func::Lower => "lower",
            Func::Length => "length",
            Func::Substring => "substring",
            Func::Concat => "||",
            Func::Trim => "trim",
            Func::LTrim => "ltrim",
            Func::RTrim => "rtrim",
            Func::Abs => "abs",
            Func::DateTrunc(_) => "date_trunc",
        }
    }

    /// Its result on non-null arguments of the bound types.
    pub fn apply(self, args: &[Value]) -> Result<Value> {
        let bad = || Error::invalid(format!("{} on arguments {args:?}", self.name()));
        let text = || match args.first() {
            Some(Value::Str(s)) => Ok(s.as_str()),
            _ => Err(bad()),
        };
        let int = |i: usize| match args.get(i) {
            Some(Value::Int(v)) => Ok(*v),
            _ => Err(bad()),
        };
        Ok(match self {
            f if f.of_date() => {
                let Some(Value::Date(d)) = args.first() else {
                    return Err(bad());
                };
                make_integral(i128::from(self.on_date(*d)?), self.ty(SqlType::Date))?
            }
            Func::Upper => Value::Str(text()?.to_uppercase()),
            Func::Lower => Value::Str(text()?.to_lowercase()),
            Func::Length => Value::Int(text()?.chars().count() as i64),
            Func::Substring => {
                let s = text()?;
                let start = int(1)?;
                // Characters [start, end) of 1-based positions, end open when no length.
                let end = match args.len() {
                    2 => i64::MAX,
                    _ => {
                        let len = int(2)?;
                        if len < 0 {
                            return Err(Error::invalid(format!(
                                "substring with a negative length ({len})"
                            )));
                        }
                        start.saturating_add(len)
                    }
                };
                let from = usize::try_from(start.max(1) - 1).unwrap_or(usize::MAX);
                let take = usize::try_from(end.saturating_sub(start.max(1))).unwrap_or(0);
                Value::Str(s.chars().skip(from).take(take).collect())
            }
            Func::Concat => match args {
                [Value::Str(a), Value::Str(b)] => Value::Str(format!("{a}{b}")),
                _ => return Err(bad()),
            },
            Func::Trim => Value::Str(text()?.trim_matches(' ').to_string()),
            Func::LTrim => Value::Str(text()?.trim_start_matches(' ').to_string()),
            Func::RTrim => Value::Str(text()?.trim_end_matches(' ').to_string()),
            Func::Abs => match args.first() {
                Some(Value::Int(v)) => Value::Int(v.checked_abs().ok_or_else(overflow)?),
                Some(Value::Decimal(v, s)) => {
                    Value::Decimal(v.checked_abs().ok_or_else(overflow)?, *s)
                }
                Some(Value::Float(v)) => Value::Float(v.abs()),
                _ => return Err(bad()),
            },
            _ => return Err(bad()),
        })
    }

    /// Whether the function takes one date (`year` .. `dayofyear`, `date_trunc`).
    pub fn of_date(self) -> bool {
        matches!(
            self,
            Func::Year
                | Func::Month
                | Func::Day
                | Func::Quarter
                | Func::DayOfWeek
                | Func::DayOfYear
                | Func::DateTrunc(_)
        )
    }

    /// The result of a date function ([`Func::of_date`]) on date `d`, as its integer
    /// payload (days for `date_trunc`).
    pub fn on_date(self, d: i32) -> Result<i64> {
        let (y, m, dd) = civil_from_days(i64::from(d));
        Ok(match self {
            Func::Year => y,
            Func::Month => i64::from(m),
            Func::Day => i64::from(dd),
            Func::Quarter => i64::from((m - 1) / 3 + 1),
            // 1970-01-01 was a Thursday.
            Func::DayOfWeek => (i64::from(d) + 4).rem_euclid(7),
            Func::DayOfYear => i64::from(d) - days_from_civil(y, 1, 1) + 1,
            Func::DateTrunc(unit) => i64::from(unit.trunc(d)?),
            other => {
                return Err(Error::invalid(format!(
                    "{} is not a function of a date",
                    other.name()
                )));
            }
        })
    }

    /// The result type, given the first argument's (`abs` keeps it).
    pub fn ty(self, first: SqlType) -> SqlType {
        match self {
            Func::Upper
            | Func::Lower
            | Func::Substring
            | Func::Concat
            | Func::Trim
            | Func::LTrim
            | Func::RTrim => SqlType::Str,
            Func::Abs => first,
            Func::DateTrunc(_) => SqlType::Date,
            _ => SqlType::Int,
        }
    }
}

/// SQL three-valued truth of a boolean value.
fn truth(v: &Value) -> Option<bool> {
    match v {
        Value::Bool(b) => Some(*b),
        _ => None,
    }
}

/// SQL's order of floats in comparisons: the two zeros equal, NaN equal to itself and above
/// everything else, as in PostgreSQL, DuckDB and DataFusion.
pub fn float_cmp(a: f64, b: f64) -> Ordering {
    if a == b {
        Ordering::Equal
    } else {
        a.total_cmp(&b)
    }
}

/// Compares two non-null values of the same type.
fn compare(a: &Value, b: &Value) -> Ordering {
    match (integral(a), integral(b)) {
        (Some(x), Some(y)) => x.cmp(&y),
        _ => match (a, b) {
            (Value::Str(x), Value::Str(y)) => x.cmp(y),
            _ => float_cmp(a.as_f64(), b.as_f64()),
        },
    }
}

/// Evaluates `e` on one row: the reference semantics (NULL propagation, three-valued logic,
/// checked arithmetic).
pub fn eval(e: &Expr, row: &dyn Row) -> Result<Value> {
    Ok(match e {
        Expr::Column { index, .. } => row.column(*index),
        Expr::Lit(v, _) => v.clone(),
        Expr::AggRef(i, _) => row.agg(*i),
        Expr::KeyRef(i, _) => row.key(*i),
        Expr::Arith { op, l, r, ty } => {
            let (a, b) = (eval(l, row)?, eval(r, row)?);
            if matches!(a, Value::Null) || matches!(b, Value::Null) {
                return Ok(Value::Null);
            }
            if *ty == SqlType::Float {
                let (x, y) = (a.as_f64(), b.as_f64());
                Value::Float(match op {
                    ArithOp::Add => x + y,
                    ArithOp::Sub => x - y,
                    ArithOp::Mul => x * y,
                    ArithOp::Div => x / y,
                    ArithOp::Mod => x % y,
                })
            } else {
                let (x, y) = (integral(&a).unwrap_or(0), integral(&b).unwrap_or(0));
                let z = match op {
                    ArithOp::Add => x.checked_add(y),
                    ArithOp::Sub => x.checked_sub(y),
                    ArithOp::Mul => x.checked_mul(y),
                    ArithOp::Mod if y == 0 => return Ok(Value::Null),
                    ArithOp::Mod => x.checked_rem(y),
                    ArithOp::Div => return Err(Error::invalid("integer division in the IR")),
                };
                make_integral(z.ok_or_else(overflow)?, *ty)?
            }
        }
        Expr::Neg(x, ty) => match eval(x, row)? {
            Value::Null => Value::Null,
            Value::Float(f) => Value::Float(-f),
            v => make_integral(-integral(&v).unwrap_or(0), *ty)?,
        },
        Expr::Cmp { op, l, r } => {
            let (a, b) = (eval(l, row)?, eval(r, row)?);
            if matches!(a, Value::Null) || matches!(b, Value::Null) {
                return Ok(Value::Null);
            }
            Value::Bool(op.holds(compare(&a, &b)))
        }
        Expr::And(v) => {
            let mut unknown = false;
            for x in v {
                match truth(&eval(x, row)?) {
                    Some(false) => return Ok(Value::Bool(false)),
                    None => unknown = true,
                    Some(true) => {}
                }
            }
            if unknown {
                Value::Null
            } else {
                Value::Bool(true)
            }
        }
        Expr::Or(v) => {
            let mut unknown = false;
            for x in v {
                match truth(&eval(x, row)?) {
                    Some(true) => return Ok(Value::Bool(true)),
                    None => unknown = true,
                    Some(false) => {}
                }
            }
            if unknown {
                Value::Null
            } else {
                Value::Bool(false)
            }
        }
        Expr::Not(x) => match truth(&eval(x, row)?) {
            Some(b) => Value::Bool(!b),
            None => Value::Null,
        },
        Expr::InList { e, list, negated } => {
            let v = eval(e, row)?;
            if matches!(v, Value::Null) {
                return Ok(Value::Null);
            }
            let found = list.iter().any(|x| compare(&v, x) == Ordering::Equal);
            Value::Bool(found != *negated)
        }
        Expr::Like {
            e,
            pattern,
            negated,
        } => match eval(e, row)? {
            Value::Null => Value::Null,
            Value::Str(s) => Value::Bool(pattern.matches(s.as_bytes()) != *negated),
            other => {
                return Err(Error::invalid(format!(
                    "LIKE on a non-string value {other:?}"
                )));
            }
        },
        Expr::IsNull { e, negated } => {
            Value::Bool(matches!(eval(e, row)?, Value::Null) != *negated)
        }
        Expr::Case {
            whens, otherwise, ..
        } => {
            for (c, r) in whens {
                if truth(&eval(c, row)?) == Some(true) {
                    return eval(r, row);
                }
            }
            match otherwise {
                Some(x) => eval(x, row)?,
                None => Value::Null,
            }
        }
        Expr::Cast(x, to) => cast_value(&eval(x, row)?, x.ty(), *to)?,
        Expr::Func { f, args, .. } => {
            let mut vals = Vec::with_capacity(args.len());
            for a in args {
                match eval(a, row)? {
                    Value::Null => return Ok(Value::Null),
                    v => vals.push(v),
                }
            }
            f.apply(&vals)?
        }
    })
}

/// Folds a constant expression into a literal.
pub fn fold(e: &Expr) -> Result<Expr> {
    Ok(Expr::Lit(eval(e, &NoRow)?, e.ty()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_round_trip() {
        for d in [-800_000, -1, 0, 1, 10_000, 10_592, 2_932_896] {
            let (y, m, dd) = civil_from_days(d);
            assert_eq!(days_from_civil(y, m, dd), d);
        }
        assert_eq!(parse_date("1998-12-01").ok(), Some(10_561));
        assert_eq!(format_date(10_561), "1998-12-01");
        assert_eq!(parse_date("1998-09-02").ok(), Some(10_561 - 90));
        assert_eq!(
            add_months(parse_date("1994-01-31").unwrap_or(0), 1).ok(),
            parse_date("1994-02-28").ok()
        );
        assert!(parse_date("1998-02-30").is_err());
    }

    #[test]
    fn scalar_functions() {
        let d = |s: &str| Value::Date(parse_date(s).unwrap_or(0));
        let st = |s: &str| Value::Str(s.to_string());
        let ap = |f: Func, a: &[Value]| f.apply(a).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(ap(Func::Year, &[d("1998-12-01")]), Value::Int(1998));
        assert_eq!(ap(Func::Month, &[d("1998-12-01")]), Value::Int(12));
        assert_eq!(ap(Func::Day, &[d("1998-12-01")]), Value::Int(1));
        assert_eq!(ap(Func::Quarter, &[d("1994-04-01")]), Value::Int(2));
        assert_eq!(ap(Func::Quarter, &[d("1994-03-31")]), Value::Int(1));
        // 1970-01-01 a Thursday, 1969-12-28 a Sunday, 2000-03-01 a Wednesday.
        assert_eq!(ap(Func::DayOfWeek, &[d("1970-01-01")]), Value::Int(4));
        assert_eq!(ap(Func::DayOfWeek, &[d("1969-12-28")]), Value::Int(0));
        assert_eq!(ap(Func::DayOfWeek, &[d("2000-03-01")]), Value::Int(3));
        assert_eq!(ap(Func::DayOfYear, &[d("2000-12-31")]), Value::Int(366));
        assert_eq!(ap(Func::DayOfYear, &[d("1999-01-01")]), Value::Int(1));
        assert_eq!(ap(Func::Upper, &[st("déjà vu")]), st("DÉJÀ VU"));
        assert_eq!(ap(Func::Lower, &[st("AIR")]), st("air"));
        assert_eq!(ap(Func::Length, &[st("déjà")]), Value::Int(4));
        let sub = |s: &str, a: &[i64]| {
            let mut v = vec![st(s)];
            v.extend(a.iter().map(|&x| Value::Int(x)));
            ap(Func::Substring, &v)
        };
        assert_eq!(sub("hello", &[2, 3]), st("ell"));
        assert_eq!(sub("hello", &[2]), st("ello"));
        assert_eq!(sub("hello", &[0, 2]), st("h"));
        assert_eq!(sub("hello", &[-3, 5]), st("h"));
        assert_eq!(sub("hello", &[4, 10]), st("lo"));
        assert_eq!(sub("hello", &[9, 2]), st(""));
        assert_eq!(sub("déjà", &[2, 2]), st("éj"));
        assert!(
            Func::Substring
                .apply(&[st("x"), Value::Int(1), Value::Int(-1)])
                .is_err()
        );
        assert_eq!(ap(Func::Concat, &[st("ab"), st("é")]), st("abé"));
        assert_eq!(ap(Func::Trim, &[st("  a b  ")]), st("a b"));
        assert_eq!(ap(Func::LTrim, &[st("  a ")]), st("a "));
        assert_eq!(ap(Func::RTrim, &[st(" a  ")]), st(" a"));
        assert_eq!(ap(Func::Abs, &[Value::Int(-3)]), Value::Int(3));
        assert_eq!(
            ap(Func::Abs, &[Value::Decimal(-125, 2)]),
            Value::Decimal(125, 2)
        );
        assert_eq!(ap(Func::Abs, &[Value::Float(-0.5)]), Value::Float(0.5));
        assert!(Func::Abs.apply(&[Value::Int(i64::MIN)]).is_err());
        // date_trunc, as DuckDB has it (weeks from Monday, decades and centuries by the
        // truncated year).
        let tr = |u: &str, s: &str| {
            let unit = DateUnit::parse(u).unwrap_or_else(|| panic!("{u}"));
            ap(Func::DateTrunc(unit), &[d(s)])
        };
        assert_eq!(tr("month", "1994-05-17"), d("1994-05-01"));
        assert_eq!(tr("quarter", "1994-05-17"), d("1994-04-01"));
        assert_eq!(tr("quarter", "1994-12-31"), d("1994-10-01"));
        assert_eq!(tr("year", "1994-05-17"), d("1994-01-01"));
        assert_eq!(tr("day", "1994-05-17"), d("1994-05-17"));
        assert_eq!(tr("week", "1994-05-19"), d("1994-05-16"));
        assert_eq!(tr("week", "1994-05-16"), d("1994-05-16"));
        assert_eq!(tr("week", "1970-01-01"), d("1969-12-29"));
        assert_eq!(tr("decade", "1999-12-31"), d("1990-01-01"));
        assert_eq!(tr("century", "2000-05-05"), d("2000-01-01"));
        assert_eq!(tr("century", "2001-05-05"), d("2000-01-01"));
        assert_eq!(tr("millennium", "2001-01-01"), d("2000-01-01"));
        assert!(DateUnit::parse("hour").is_none());
    }

    #[test]
    fn remainders_take_the_dividends_sign() {
        let m = |a: Value, b: Value, ty: SqlType| {
            let e = Expr::Arith {
                op: ArithOp::Mod,
                l: Box::new(Expr::Lit(a, ty)),
                r: Box::new(Expr::Lit(b, ty)),
                ty,
            };
            eval(&e, &NoRow).unwrap_or_else(|e| panic!("{e}"))
        };
        let int = |a: i64, b: i64| m(Value::Int(a), Value::Int(b), SqlType::Int);
        assert_eq!(int(7, 3), Value::Int(1));
        assert_eq!(int(-7, 3), Value::Int(-1));
        assert_eq!(int(7, -3), Value::Int(1));
        assert_eq!(int(i64::MIN, -1), Value::Int(0));
        assert_eq!(int(7, 0), Value::Null);
        // 7.5 % 2.0 and 7.25 % 0.50, at a common scale.
        let dec = SqlType::Decimal(2);
        assert_eq!(
            m(Value::Decimal(750, 2), Value::Decimal(200, 2), dec),
            Value::Decimal(150, 2)
        );
        assert_eq!(
            m(Value::Decimal(725, 2), Value::Decimal(50, 2), dec),
            Value::Decimal(25, 2)
        );
        assert_eq!(
            m(Value::Decimal(725, 2), Value::Decimal(0, 2), dec),
            Value::Null
        );
        let fl = |a: f64, b: f64| m(Value::Float(a), Value::Float(b), SqlType::Float);
        assert_eq!(fl(-7.5, 2.0), Value::Float(-1.5));
        assert!(matches!(fl(5.0, 0.0), Value::Float(x) if x.is_nan()));
    }

    #[test]
    fn decimals_print_with_their_scale() {
        assert_eq!(format_decimal(123, 2), "1.23");
        assert_eq!(format_decimal(-5, 3), "-0.005");
        assert_eq!(format_decimal(0, 2), "0.00");
        assert_eq!(format_decimal(42, 0), "42");
        assert_eq!(div_round(-15, 1), -2);
        assert_eq!(div_round(14, 1), 1);
    }
}
