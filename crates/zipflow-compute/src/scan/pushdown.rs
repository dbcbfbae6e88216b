//! The fast path's view of a query's expressions: conjuncts on one column that the
//! encodings evaluate in the encoded domain ([`ColPred`]), the expressions that block
//! evaluation supports ([`fast_expr`]), and the intervals that zone maps give them, which
//! prove when arithmetic cannot overflow ([`no_overflow`]).

use zipflow_core::values::ByteStrings;

use crate::expr::{ArithOp, CmpOp, Expr, Func, SqlType, Value, div_round, pow10};

/// A conjunct on one column that encodings can evaluate.
#[derive(Debug, Clone)]
pub(super) enum ColPred {
    /// `lo <= v <= hi` on the column's stored (scaled) integers.
    Range { col: usize, lo: i64, hi: i64 },
    /// `v IN set` (or NOT IN) on stored integers.
    Set {
        col: usize,
        set: Vec<i64>,
        negated: bool,
    },
    /// `v IN set` or `v LIKE pattern` (or their negations) on strings.
    Strings {
        col: usize,
        test: StrTest,
        negated: bool,
    },
}

/// What a string predicate tests each string for.
#[derive(Debug, Clone)]
pub(super) enum StrTest {
    /// Equality with one of these.
    In(Vec<Vec<u8>>),
    /// A `LIKE` pattern.
    Like(crate::like::LikePattern),
}

impl StrTest {
    pub(super) fn matches(&self, v: &[u8]) -> bool {
        match self {
            StrTest::In(set) => set.iter().any(|x| x.as_slice() == v),
            StrTest::Like(p) => p.matches(v),
        }
    }
}

pub(super) fn conjuncts(e: &Expr, out: &mut Vec<Expr>) {
    match e {
        Expr::And(v) => v.iter().for_each(|x| conjuncts(x, out)),
        x => out.push(x.clone()),
    }
}

/// `col * 10^k` when `e` is a column or an exact upscaling cast of one.
pub(super) fn scaled_column(e: &Expr) -> Option<(usize, SqlType, u8)> {
    match e {
        Expr::Column { index, ty } if ty.is_integral() && *ty != SqlType::Bool => {
            Some((*index, *ty, 0))
        }
        Expr::Cast(inner, to) => match (inner.as_ref(), to) {
            (Expr::Column { index, ty }, SqlType::Decimal(t))
                if matches!(ty, SqlType::Int | SqlType::Decimal(_)) && *t >= ty.scale() =>
            {
                Some((*index, *ty, t - ty.scale()))
            }
            _ => None,
        },
        _ => None,
    }
}

pub(super) fn lit_i128(v: &Value) -> Option<i128> {
    match v {
        Value::Int(x) => Some(i128::from(*x)),
        Value::Decimal(x, _) => Some(*x),
        Value::Date(d) => Some(i128::from(*d)),
        _ => None,
    }
}

/// `col * m OP lit` as a closed range on `col`; `None` when it is not a range.
pub(super) fn range_of(op: CmpOp, m: i128, lit: i128) -> Option<(i128, i128)> {
    let floor = lit.div_euclid(m);
    let ceil = -((-lit).div_euclid(m));
    let (lo, hi) = (i128::from(i64::MIN), i128::from(i64::MAX));
    Some(match op {
        CmpOp::Ge => (ceil, hi),
        CmpOp::Gt => (floor + 1, hi),
        CmpOp::Le => (lo, floor),
        CmpOp::Lt => (lo, ceil - 1),
        CmpOp::Eq if lit.rem_euclid(m) == 0 => (floor, floor),
        CmpOp::Eq => (1, 0),
        CmpOp::Ne => return None,
    })
}

pub(super) fn col_pred(e: &Expr) -> Option<ColPred> {
    match e {
        Expr::Cmp { op, l, r } => {
            let (col, lit, op) = match (l.as_ref(), r.as_ref()) {
                (c, Expr::Lit(v, _)) => (c, v, *op),
                (Expr::Lit(v, _), c) => (c, v, op.flip()),
                _ => return None,
            };
            if let (
                Expr::Column {
                    index,
                    ty: SqlType::Str,
                },
                Value::Str(s),
            ) = (col, lit)
            {
                return match op {
                    CmpOp::Eq | CmpOp::Ne => Some(ColPred::Strings {
                        col: *index,
                        test: StrTest::In(vec![s.as_bytes().to_vec()]),
                        negated: op == CmpOp::Ne,
                    }),
                    _ => None,
                };
            }
            let (index, _, k) = scaled_column(col)?;
            let m = i128::from(pow10(k));
            let (lo, hi) = range_of(op, m, lit_i128(lit)?)?;
            let clamp = |x: i128| x.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64;
            if lo > hi {
                return Some(ColPred::Range {
                    col: index,
                    lo: 1,
                    hi: 0,
                });
            }
            Some(ColPred::Range {
                col: index,
                lo: clamp(lo),
                hi: clamp(hi),
            })
        }
        Expr::InList { e, list, negated } => match e.as_ref() {
            Expr::Column {
                index,
                ty: SqlType::Str,
            } => Some(ColPred::Strings {
                col: *index,
                test: StrTest::In(
                    list.iter()
                        .map(|v| match v {
                            Value::Str(s) => Some(s.as_bytes().to_vec()),
                            _ => None,
                        })
                        .collect::<Option<Vec<_>>>()?,
                ),
                negated: *negated,
            }),
            Expr::Column { index, ty } if ty.is_integral() => Some(ColPred::Set {
                col: *index,
                set: list
                    .iter()
                    .map(|v| lit_i128(v).and_then(|x| i64::try_from(x).ok()))
                    .collect::<Option<Vec<_>>>()?,
                negated: *negated,
            }),
            _ => None,
        },
        Expr::Like {
            e,
            pattern,
            negated,
        } => match e.as_ref() {
            Expr::Column {
                index,
                ty: SqlType::Str,
            } => Some(ColPred::Strings {
                col: *index,
                test: StrTest::Like(pattern.clone()),
                negated: *negated,
            }),
            _ => None,
        },
        _ => None,
    }
}

/// Whether the block evaluator handles `e` (no strings, no NULL literals, no refs).
pub(super) fn fast_expr(e: &Expr) -> bool {
    match e {
        Expr::Column { ty, .. } => *ty != SqlType::Str,
        Expr::Lit(v, ty) => !matches!(v, Value::Null) && *ty != SqlType::Str,
        // An integral `%` is NULL by a divisor of 0: only a nonzero literal divisor here.
        Expr::Arith {
            op: ArithOp::Mod,
            l,
            r,
            ty,
        } => {
            fast_expr(l)
                && fast_expr(r)
                && (*ty == SqlType::Float
                    || matches!(&**r, Expr::Lit(v, _) if lit_i128(v).is_some_and(|y| y != 0)))
        }
        Expr::Arith { l, r, .. } | Expr::Cmp { l, r, .. } => fast_expr(l) && fast_expr(r),
        Expr::Neg(x, _) | Expr::Not(x) => fast_expr(x),
        Expr::And(v) | Expr::Or(v) => v.iter().all(fast_expr),
        Expr::InList { e, list, .. } => {
            fast_expr(e)
                && list
                    .iter()
                    .all(|v| !matches!(v, Value::Null | Value::Str(_)))
        }
        Expr::Func { f, args, .. } => {
            f.of_date() && matches!(args.as_slice(), [a] if a.ty() == SqlType::Date && fast_expr(a))
        }
        Expr::IsNull { .. } | Expr::Like { .. } | Expr::Case { .. } => false,
        Expr::Cast(x, to) => {
            fast_expr(x)
                && match (x.ty(), *to) {
                    (f, t) if f.is_integral() && (t.is_integral() || t == SqlType::Float) => {
                        t != SqlType::Bool && t != SqlType::Date
                            || f == t
                            || (f, t) == (SqlType::Int, SqlType::Date)
                    }
                    (SqlType::Float, t) => t == SqlType::Int || matches!(t, SqlType::Decimal(_)),
                    _ => false,
                }
        }
        Expr::AggRef(..) | Expr::KeyRef(..) => false,
    }
}

/// Per-chunk interval of an integral expression, from the zone maps; `None` when unknown.
pub(super) fn interval(
    e: &Expr,
    stats: &dyn Fn(usize) -> Option<(i128, i128)>,
) -> Option<(i128, i128)> {
    let fits = |(a, b): (i128, i128)| {
        (a >= i128::from(i64::MIN) && b <= i128::from(i64::MAX)).then_some((a, b))
    };
    let r = match e {
        Expr::Column { index, .. } => stats(*index)?,
        Expr::Lit(v, _) => {
            let x = lit_i128(v).or(match v {
                Value::Bool(b) => Some(i128::from(*b)),
                _ => None,
            })?;
            (x, x)
        }
        Expr::Arith { op, l, r, ty } if *ty != SqlType::Float => {
            let (a, b) = interval(l, stats)?;
            let (c, d) = interval(r, stats)?;
            match op {
                ArithOp::Add => (a + c, b + d),
                ArithOp::Sub => (a - d, b - c),
                ArithOp::Mul => {
                    let p = [a * c, a * d, b * c, b * d];
                    (*p.iter().min()?, *p.iter().max()?)
                }
                // A literal divisor y: |x % y| < |y|, of x's sign.
                ArithOp::Mod if c == d && c != 0 => {
                    let m = c.abs() - 1;
                    (a.max(-m).min(0), b.min(m).max(0))
                }
                ArithOp::Div | ArithOp::Mod => return None,
            }
        }
        Expr::Func { f, args, .. } if f.of_date() => match f {
            // Monotonic in the date.
            Func::Year | Func::DateTrunc(_) => {
                let (a, b) = interval(args.first()?, stats)?;
                let on = |d: i128| f.on_date(i32::try_from(d).ok()?).ok().map(i128::from);
                (on(a)?, on(b)?)
            }
            Func::Month => (1, 12),
            Func::Day => (1, 31),
            Func::Quarter => (1, 4),
            Func::DayOfWeek => (0, 6),
            _ => (1, 366),
        },
        Expr::Neg(x, ty) if *ty != SqlType::Float => {
            let (a, b) = interval(x, stats)?;
            (-b, -a)
        }
        Expr::Cast(x, to) if x.ty().is_integral() && to.is_integral() => {
            let (a, b) = interval(x, stats)?;
            let (fs, ts) = (x.ty().scale(), to.scale());
            if ts >= fs {
                let m = i128::from(pow10(ts - fs));
                (a * m, b * m)
            } else {
                (div_round(a, fs - ts), div_round(b, fs - ts))
            }
        }
        _ => return None,
    };
    fits(r)
}

/// Whether every integral node of `e` provably fits an i64 in this chunk.
pub(super) fn no_overflow(e: &Expr, stats: &dyn Fn(usize) -> Option<(i128, i128)>) -> bool {
    let children_ok = match e {
        Expr::Arith { l, r, .. } | Expr::Cmp { l, r, .. } => {
            no_overflow(l, stats) && no_overflow(r, stats)
        }
        Expr::Neg(x, _) | Expr::Not(x) | Expr::Cast(x, _) => no_overflow(x, stats),
        Expr::InList { e, .. } => no_overflow(e, stats),
        Expr::And(v) | Expr::Or(v) => v.iter().all(|x| no_overflow(x, stats)),
        _ => true,
    };
    children_ok
        && (!e.ty().is_integral() || e.ty() == SqlType::Bool || interval(e, stats).is_some())
}

/// Whether each row's string passes `test` (or fails it, `negated`), for every row of a
/// chunk: each run of equal strings is decided once.
pub(super) fn string_mask(s: &ByteStrings, test: &StrTest, negated: bool) -> Vec<u8> {
    let n = s.len();
    let mut out = Vec::with_capacity(n);
    let mut last: Option<(&[u8], u8)> = None;
    for i in 0..n {
        let v = s.get(i).unwrap_or(&[]);
        let m = match last {
            Some((l, m)) if l == v => m,
            _ => {
                let m = u8::from(test.matches(v) != negated);
                last = Some((v, m));
                m
            }
        };
        out.push(m);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_round_the_right_way() {
        // col(scale 2) < 0.055  <=>  col * 10 < 55  <=>  col <= 5
        assert_eq!(range_of(CmpOp::Lt, 10, 55).map(|r| r.1), Some(5));
        assert_eq!(range_of(CmpOp::Le, 10, 55).map(|r| r.1), Some(5));
        assert_eq!(range_of(CmpOp::Gt, 10, 55).map(|r| r.0), Some(6));
        assert_eq!(range_of(CmpOp::Ge, 10, 50).map(|r| r.0), Some(5));
        assert_eq!(range_of(CmpOp::Ge, 10, -55).map(|r| r.0), Some(-5));
        assert_eq!(range_of(CmpOp::Lt, 10, -55).map(|r| r.1), Some(-6));
        assert_eq!(range_of(CmpOp::Eq, 10, 55), Some((1, 0)));
        assert_eq!(range_of(CmpOp::Ne, 10, 55), None);
    }
}
