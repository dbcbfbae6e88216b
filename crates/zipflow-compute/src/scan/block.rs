//! Block evaluation: expressions over one 1024-value block of a chunk's columns
//! ([`BlockEval`]), over all of its rows or a selection of them, with checked arithmetic
//! unless the zone maps proved it needless.

use std::collections::HashMap;

use zipflow_core::{Error, Result};

use crate::column::{Block, ChunkColumn};
use crate::expr::{ArithOp, Expr, Func, SqlType, Value, div_round, float_cmp, pow10};

use super::kernels;
use super::pushdown::lit_i128;

/// The right operand of a block operation.
pub(super) enum Operand {
    /// The same value for every row.
    Scalar(i64),
    /// `scalar - value` (a literal on the left of a subtraction).
    RevSub(i64),
    /// One value per row.
    Vector(Vec<i64>),
}

/// Evaluates expressions over one block (all rows, or a selection of positions).
pub(super) struct BlockEval<'a, 'c> {
    pub(super) columns: &'a HashMap<usize, ChunkColumn<'c>>,
    pub(super) checked: bool,
    pub(super) idx: Vec<usize>,
    pub(super) sparse: bool,
    pub(super) b: usize,
    pub(super) n: usize,
    pub(super) pool: Vec<Vec<i64>>,
    /// Per date function, its results on the days seen, direct-mapped by the day's low bits
    /// (a chunk's dates span a few thousand days: most values are looked up, not computed).
    pub(super) date_memo: HashMap<Func, Vec<(i64, i64)>>,
}

/// Entries of a date function's memo (a power of two).
pub(super) const DATE_MEMO: usize = 4096;

pub(super) fn overflow() -> Error {
    Error::invalid("arithmetic overflow (the result does not fit a 64-bit decimal)")
}

impl BlockEval<'_, '_> {
    pub(super) fn len(&self) -> usize {
        if self.sparse { self.idx.len() } else { self.n }
    }

    pub(super) fn sel(&self) -> Option<&[usize]> {
        self.sparse.then_some(self.idx.as_slice())
    }

    pub(super) fn give(&mut self, b: Block) {
        if let Block::Ints(v) = b {
            self.pool.push(v);
        }
    }

    pub(super) fn ints(&mut self) -> Vec<i64> {
        let mut v = self.pool.pop().unwrap_or_default();
        v.clear();
        v
    }

    pub(super) fn eval(&mut self, e: &Expr) -> Result<Block> {
        if e.ty() == SqlType::Float {
            return Ok(Block::Floats(self.eval_f(e)?));
        }
        Ok(Block::Ints(self.eval_i(e)?))
    }

    pub(super) fn eval_f(&mut self, e: &Expr) -> Result<Vec<f64>> {
        let k = self.len();
        Ok(match e {
            Expr::Column { index, .. } => {
                let col = self
                    .columns
                    .get(index)
                    .ok_or_else(|| Error::invalid("column not open"))?;
                let mut out = Block::Floats(Vec::with_capacity(k));
                col.load(self.b, self.n, self.sel(), &mut out)?;
                match out {
                    Block::Floats(v) => v,
                    Block::Ints(v) => v.iter().map(|&x| x as f64).collect(),
                }
            }
            Expr::Lit(v, _) => vec![v.as_f64(); k],
            Expr::Arith { op, l, r, .. } => {
                let a = self.eval_f(l)?;
                let b = self.eval_f(r)?;
                a.iter()
                    .zip(&b)
                    .map(|(&x, &y)| match op {
                        ArithOp::Add => x + y,
                        ArithOp::Sub => x - y,
                        ArithOp::Mul => x * y,
                        ArithOp::Div => x / y,
                        ArithOp::Mod => x % y,
                    })
                    .collect()
            }
            Expr::Neg(x, _) => self.eval_f(x)?.iter().map(|v| -v).collect(),
            Expr::Cast(x, _) => {
                let s = x.ty().scale();
                let v = self.eval_i(x)?;
                let d = pow10(s) as f64;
                let out = v.iter().map(|&x| x as f64 / d).collect();
                self.pool.push(v);
                out
            }
            _ => {
                return Err(Error::unsupported(
                    "float expression in the block evaluator",
                ));
            }
        })
    }

    pub(super) fn eval_i(&mut self, e: &Expr) -> Result<Vec<i64>> {
        let k = self.len();
        Ok(match e {
            Expr::Column { index, .. } => {
                let col = self
                    .columns
                    .get(index)
                    .ok_or_else(|| Error::invalid("column not open"))?;
                let mut out = Block::Ints(self.ints());
                col.load(self.b, self.n, self.sel(), &mut out)?;
                match out {
                    Block::Ints(v) => v,
                    Block::Floats(_) => {
                        return Err(Error::invalid("float column read as integers"));
                    }
                }
            }
            Expr::Lit(v, _) => {
                let x = lit_i128(v)
                    .or(match v {
                        Value::Bool(b) => Some(i128::from(*b)),
                        _ => None,
                    })
                    .and_then(|x| i64::try_from(x).ok())
                    .ok_or_else(overflow)?;
                let mut out = self.ints();
                out.resize(k, x);
                out
            }
            Expr::Arith { op, l, r, .. } => {
                if *op == ArithOp::Div {
                    return Err(Error::invalid("integer division in the block evaluator"));
                }
                // A literal operand stays a scalar.
                let lit = |e: &Expr| match e {
                    Expr::Lit(v, _) => lit_i128(v).and_then(|x| i64::try_from(x).ok()),
                    _ => None,
                };
                let (mut a, b) = match (lit(l), lit(r)) {
                    (None, Some(y)) => (self.eval_i(l)?, Operand::Scalar(y)),
                    (Some(x), None) if matches!(op, ArithOp::Add | ArithOp::Mul) => {
                        (self.eval_i(r)?, Operand::Scalar(x))
                    }
                    (Some(x), None) if *op == ArithOp::Sub => {
                        // x - v == -(v - x)... only exact without overflow, so negate through
                        // the kernel: v * -1 + x.
                        let v = self.eval_i(r)?;
                        (v, Operand::RevSub(x))
                    }
                    _ => (self.eval_i(l)?, Operand::Vector(self.eval_i(r)?)),
                };
                if self.checked {
                    for (i, x) in a.iter_mut().enumerate() {
                        let (p, q) = match &b {
                            Operand::Scalar(y) => (*x, *y),
                            Operand::RevSub(y) => (*y, *x),
                            Operand::Vector(v) => (*x, v[i]),
                        };
                        let op = if matches!(b, Operand::RevSub(_)) {
                            ArithOp::Sub
                        } else {
                            *op
                        };
                        *x = match op {
                            ArithOp::Add => p.checked_add(q),
                            ArithOp::Sub => p.checked_sub(q),
                            // The divisor is a nonzero literal (`fast_expr`); i64::MIN % -1 is 0.
                            ArithOp::Mod => Some(if q == 0 { 0 } else { p.wrapping_rem(q) }),
                            _ => p.checked_mul(q),
                        }
                        .ok_or_else(overflow)?;
                    }
                } else {
                    kernels::arith(*op, &mut a, &b);
                }
                if let Operand::Vector(v) = b {
                    self.pool.push(v);
                }
                a
            }
            Expr::Neg(x, _) => {
                let mut a = self.eval_i(x)?;
                for v in &mut a {
                    *v = v.checked_neg().ok_or_else(overflow)?;
                }
                a
            }
            Expr::Cast(x, to) => {
                let (fs, ts) = (x.ty().scale(), to.scale());
                if x.ty() == SqlType::Float {
                    let f = self.eval_f(x)?;
                    let m = pow10(ts) as f64;
                    let mut out = self.ints();
                    for &v in &f {
                        let s = (v * m).round();
                        if !s.is_finite() || s.abs() >= 9.2e18 {
                            return Err(overflow());
                        }
                        out.push(s as i64);
                    }
                    out
                } else {
                    let mut a = self.eval_i(x)?;
                    if ts > fs {
                        let m = pow10(ts - fs);
                        for v in &mut a {
                            *v = v.checked_mul(m).ok_or_else(overflow)?;
                        }
                    } else if ts < fs {
                        for v in &mut a {
                            *v = div_round(i128::from(*v), fs - ts) as i64;
                        }
                    }
                    a
                }
            }
            Expr::Func { f, args, .. } if f.of_date() => {
                let [a] = args.as_slice() else {
                    return Err(Error::invalid("a date function of other than one date"));
                };
                let mut v = self.eval_i(a)?;
                let memo = self
                    .date_memo
                    .entry(*f)
                    .or_insert_with(|| vec![(i64::MIN, 0); DATE_MEMO]);
                for x in &mut v {
                    let e = &mut memo[*x as usize & (DATE_MEMO - 1)];
                    if e.0 != *x {
                        *e = (*x, f.on_date(i32::try_from(*x).map_err(|_| overflow())?)?);
                    }
                    *x = e.1;
                }
                v
            }
            e if e.ty() == SqlType::Bool => {
                let m = self.eval_bool(e)?;
                let mut out = self.ints();
                out.extend(m.iter().map(|&b| i64::from(b)));
                out
            }
            _ => {
                return Err(Error::unsupported(
                    "integer expression in the block evaluator",
                ));
            }
        })
    }

    pub(super) fn eval_bool(&mut self, e: &Expr) -> Result<Vec<u8>> {
        let k = self.len();
        Ok(match e {
            Expr::Cmp { op, l, r } => {
                let op = *op;
                if l.ty() == SqlType::Float || r.ty() == SqlType::Float {
                    let a = self.eval_f(l)?;
                    let b = self.eval_f(r)?;
                    a.iter()
                        .zip(&b)
                        .map(|(x, y)| u8::from(op.holds(float_cmp(*x, *y))))
                        .collect()
                } else {
                    let a = self.eval_i(l)?;
                    let b = self.eval_i(r)?;
                    let out = a
                        .iter()
                        .zip(&b)
                        .map(|(x, y)| u8::from(op.holds(x.cmp(y))))
                        .collect();
                    self.pool.push(a);
                    self.pool.push(b);
                    out
                }
            }
            Expr::And(v) => {
                let mut m = vec![1u8; k];
                for x in v {
                    let y = self.eval_bool(x)?;
                    m.iter_mut().zip(&y).for_each(|(a, &b)| *a &= b);
                }
                m
            }
            Expr::Or(v) => {
                let mut m = vec![0u8; k];
                for x in v {
                    let y = self.eval_bool(x)?;
                    m.iter_mut().zip(&y).for_each(|(a, &b)| *a |= b);
                }
                m
            }
            Expr::Not(x) => self.eval_bool(x)?.iter().map(|&b| b ^ 1).collect(),
            Expr::InList { e, list, negated } => {
                if e.ty() == SqlType::Float {
                    let a = self.eval_f(e)?;
                    let set: Vec<f64> = list.iter().map(Value::as_f64).collect();
                    a.iter()
                        .map(|x| {
                            u8::from(set.iter().any(|y| float_cmp(*x, *y).is_eq()) != *negated)
                        })
                        .collect()
                } else {
                    let a = self.eval_i(e)?;
                    let set: Vec<i128> = list.iter().filter_map(lit_i128).collect();
                    let out = a
                        .iter()
                        .map(|&x| u8::from(set.contains(&i128::from(x)) != *negated))
                        .collect();
                    self.pool.push(a);
                    out
                }
            }
            Expr::Lit(Value::Bool(b), _) => vec![u8::from(*b); k],
            Expr::Column { .. } => {
                let a = self.eval_i(e)?;
                let out = a.iter().map(|&x| u8::from(x != 0)).collect();
                self.pool.push(a);
                out
            }
            _ => return Err(Error::unsupported("predicate in the block evaluator")),
        })
    }
}
