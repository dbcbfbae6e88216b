//! Accumulators: the running state of each aggregate, per group.
//!
//! [`Acc`] is the reference path's state of one aggregate for one group; [`DenseAcc`] holds
//! one aggregate's state for every dense group slot of a chunk (or, merged, of the scan),
//! field by field, so that the fast path folds 1024-value blocks into it by slot instead of
//! updating an object per row.

use std::collections::HashMap;

use crate::expr::{Expr, SqlType, Value, make_integral, pow10};
use crate::query::{AggFunc, Query};

use super::group_values::{KeyPart, key_part};
use super::kernels;

/// The running state of one aggregate for one group.
#[derive(Debug, Clone, Default)]
pub(super) struct Acc {
    pub(super) count: i64,
    pub(super) sum_i: i128,
    pub(super) sum_f: f64,
    pub(super) min: Option<Value>,
    pub(super) max: Option<Value>,
    /// The numeric values' running mean and sum of squared deviations from it (Welford's
    /// update, merged by Chan's rule), in the argument's scaled units: the variances.
    pub(super) mean: f64,
    pub(super) m2: f64,
    /// A DISTINCT aggregate's values so far (the rest stays empty until its result).
    pub(super) distinct: Option<HashMap<KeyPart, Value>>,
}

/// Welford's update of a running (count, mean, sum of squared deviations) by `x`, the count
/// already including it.
#[inline]
pub(super) fn welford(n: i64, mean: &mut f64, m2: &mut f64, x: f64) {
    let d = x - *mean;
    *mean += d / n as f64;
    *m2 += d * (x - *mean);
}

/// Chan's rule: the (mean, sum of squared deviations) of `na` values `a` and `nb` values `b`
/// together.
pub(super) fn chan(na: i64, a: (f64, f64), nb: i64, b: (f64, f64)) -> (f64, f64) {
    if na == 0 {
        return b;
    }
    if nb == 0 {
        return a;
    }
    let n = (na + nb) as f64;
    let d = b.0 - a.0;
    (
        a.0 + d * (nb as f64 / n),
        a.1 + b.1 + d * d * (na as f64 * nb as f64 / n),
    )
}

impl Acc {
    /// Adds a value of a DISTINCT aggregate.
    pub(super) fn add_distinct(&mut self, v: Value) {
        if !matches!(v, Value::Null) {
            self.distinct
                .get_or_insert_with(HashMap::new)
                .entry(key_part(&v))
                .or_insert(v);
        }
    }

    pub(super) fn add(&mut self, v: &Value) {
        if matches!(v, Value::Null) {
            return;
        }
        self.count += 1;
        let x = match v {
            Value::Int(x) => {
                self.sum_i += i128::from(*x);
                *x as f64
            }
            Value::Decimal(x, _) => {
                self.sum_i += *x;
                *x as f64
            }
            Value::Bool(b) => {
                self.sum_i += i128::from(*b);
                f64::from(u8::from(*b))
            }
            Value::Float(x) => {
                self.sum_f += *x;
                *x
            }
            _ => f64::NAN,
        };
        welford(self.count, &mut self.mean, &mut self.m2, x);
        if self.min.as_ref().is_none_or(|m| v.sort_cmp(m).is_lt()) {
            self.min = Some(v.clone());
        }
        if self.max.as_ref().is_none_or(|m| v.sort_cmp(m).is_gt()) {
            self.max = Some(v.clone());
        }
    }

    pub(super) fn merge(&mut self, o: &Acc) {
        if let Some(d) = &o.distinct {
            let mine = self.distinct.get_or_insert_with(HashMap::new);
            for (k, v) in d {
                mine.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
        (self.mean, self.m2) = chan(self.count, (self.mean, self.m2), o.count, (o.mean, o.m2));
        self.count += o.count;
        self.sum_i += o.sum_i;
        self.sum_f += o.sum_f;
        if let Some(m) = &o.min
            && self.min.as_ref().is_none_or(|x| m.sort_cmp(x).is_lt())
        {
            self.min = Some(m.clone());
        }
        if let Some(m) = &o.max
            && self.max.as_ref().is_none_or(|x| m.sort_cmp(x).is_gt())
        {
            self.max = Some(m.clone());
        }
    }

    pub(super) fn result(&self, func: AggFunc, ty: SqlType, arg_ty: Option<SqlType>) -> Value {
        if let Some(d) = &self.distinct {
            let mut all = Acc::default();
            d.values().for_each(|v| all.add(v));
            return all.result(func, ty, arg_ty);
        }
        match func {
            AggFunc::CountStar | AggFunc::Count => Value::Int(self.count),
            _ if self.count == 0 => Value::Null,
            AggFunc::Sum => match ty {
                SqlType::Float => Value::Float(self.sum_f),
                t => Value::Decimal(self.sum_i, t.scale()),
            },
            AggFunc::Avg => match arg_ty {
                Some(SqlType::Float) => Value::Float(self.sum_f / self.count as f64),
                t => {
                    let s = t.map_or(0, SqlType::scale);
                    Value::Float(self.sum_i as f64 / pow10(s) as f64 / self.count as f64)
                }
            },
            AggFunc::Min => self.min.clone().unwrap_or(Value::Null),
            AggFunc::Max => self.max.clone().unwrap_or(Value::Null),
            AggFunc::VarSamp | AggFunc::VarPop | AggFunc::StddevSamp | AggFunc::StddevPop => {
                let sample = matches!(func, AggFunc::VarSamp | AggFunc::StddevSamp);
                let d = self.count - i64::from(sample);
                if d <= 0 {
                    return Value::Null;
                }
                // The values were taken in their scaled units (decimals as integers).
                let unit = pow10(arg_ty.map_or(0, SqlType::scale)) as f64;
                let var = self.m2 / d as f64 / (unit * unit);
                Value::Float(match func {
                    AggFunc::VarSamp | AggFunc::VarPop => var,
                    _ => var.sqrt(),
                })
            }
        }
    }
}

/// Which accumulator each aggregate of the fast path reads: its own, or that of an earlier
/// aggregate over the same argument that keeps what it needs (sum and avg share the sums,
/// the variances the moments).
pub(super) fn shared_accs(q: &Query) -> Vec<usize> {
    let sum_like = |f: AggFunc| matches!(f, AggFunc::Sum | AggFunc::Avg);
    q.aggregates
        .iter()
        .enumerate()
        .map(|(i, a)| {
            q.aggregates[..i]
                .iter()
                .position(|b| {
                    b.arg == a.arg
                        && (b.func == a.func
                            || sum_like(a.func) && sum_like(b.func)
                            || a.func.is_moment() && b.func.is_moment())
                })
                .unwrap_or(i)
        })
        .collect()
}

/// Whether an aggregate's argument is a float (its sums, minima and maxima kept in `f64`).
pub(super) fn arg_is_float(arg: Option<&Expr>) -> bool {
    arg.is_some_and(|e| e.ty() == SqlType::Float)
}

/// Accumulators of one aggregate for every group slot of a chunk (or, merged, of the scan):
/// only the fields its function reads are kept, the others stay empty.
#[derive(Debug, Clone)]
pub(super) struct DenseAcc {
    pub(super) func: AggFunc,
    /// Whether the argument is a float (sums, minima and maxima in `f64`).
    pub(super) float: bool,
    /// Rows per slot (set at the end of the chunk: no nulls on the fast path, so every
    /// aggregate of a slot sees the same rows).
    pub(super) count: Vec<i64>,
    pub(super) sum_i: Vec<i128>,
    /// Partial sums in i64, four interleaved copies of the slots, or one copy where slots
    /// are many (see `fold`).
    pub(super) part: Vec<i64>,
    /// Blocks whose values the partial sums take before they are folded into `sum_i`
    /// without overflow; 0 when the values are not known to be small enough.
    pub(super) fold: u64,
    /// Blocks added to the partial sums since the last fold.
    pub(super) pending: u64,
    pub(super) sum_f: Vec<f64>,
    pub(super) min_i: Vec<i64>,
    pub(super) max_i: Vec<i64>,
    pub(super) min_f: Vec<f64>,
    pub(super) max_f: Vec<f64>,
    /// Float slots that have a min/max yet.
    pub(super) has_f: Vec<bool>,
    /// Values, running mean and sum of squared deviations per slot (the variances, in row
    /// order as on the reference path, so that results match it bit for bit).
    pub(super) wn: Vec<i64>,
    pub(super) mean: Vec<f64>,
    pub(super) m2: Vec<f64>,
}

impl DenseAcc {
    /// Accumulators of `n` slots for `func` (over floats or not); `fold` as the field, with
    /// `copies` (1 or 4) interleaved copies of the partial sums.
    pub(super) fn new(n: usize, func: AggFunc, float: bool, fold: u64, copies: usize) -> DenseAcc {
        let sized = |on: bool| if on { n } else { 0 };
        let sums = matches!(func, AggFunc::Sum | AggFunc::Avg);
        let (min, max) = (func == AggFunc::Min, func == AggFunc::Max);
        DenseAcc {
            func,
            float,
            count: vec![0; n],
            sum_i: vec![0; sized(sums && !float)],
            part: vec![0; copies * sized(sums && !float && fold > 0)],
            fold,
            pending: 0,
            sum_f: vec![0.0; sized(sums && float)],
            min_i: vec![i64::MAX; sized(min && !float)],
            max_i: vec![i64::MIN; sized(max && !float)],
            min_f: vec![0.0; sized(min && float)],
            max_f: vec![0.0; sized(max && float)],
            has_f: vec![false; sized((min || max) && float)],
            wn: vec![0; sized(func.is_moment())],
            mean: vec![0.0; sized(func.is_moment())],
            m2: vec![0.0; sized(func.is_moment())],
        }
    }

    /// Adds the partial sums into `sum_i` and clears them.
    pub(super) fn fold_parts(&mut self) {
        let stride = self.sum_i.len();
        for k in 0..self.part.len() / stride.max(1) {
            for (p, s) in self.part[k * stride..(k + 1) * stride]
                .iter_mut()
                .zip(&mut self.sum_i)
            {
                *s += i128::from(*p);
                *p = 0;
            }
        }
        self.pending = 0;
    }

    /// Ends the chunk: rows per slot, and the partial sums folded.
    pub(super) fn finish(&mut self, selected: &[i64]) {
        self.count.clone_from_slice(selected);
        if self.pending > 0 {
            self.fold_parts();
        }
    }

    /// Adds values to the running variances of their slots, in row order.
    pub(super) fn add_moments(
        &mut self,
        x: impl Iterator<Item = f64>,
        slots: &[u32],
        uniform: bool,
    ) {
        if uniform {
            let (mut n, mut mean, mut m2) = (self.wn[0], self.mean[0], self.m2[0]);
            for v in x {
                n += 1;
                welford(n, &mut mean, &mut m2, v);
            }
            (self.wn[0], self.mean[0], self.m2[0]) = (n, mean, m2);
            return;
        }
        for (v, &s) in x.zip(slots) {
            let s = s as usize;
            self.wn[s] += 1;
            welford(self.wn[s], &mut self.mean[s], &mut self.m2[s], v);
        }
    }

    /// Adds a block of values, value `j` to slot `slots[j]`.
    /// `uniform`: every slot is 0; `two`: slots are 0 or the trash slot.
    pub(super) fn add_ints(&mut self, x: &[i64], slots: &[u32], uniform: bool, two: bool) {
        match self.func {
            AggFunc::Sum | AggFunc::Avg => {
                if self.fold > 0 {
                    if uniform {
                        self.sum_i[0] += i128::from(x.iter().sum::<i64>());
                        return;
                    }
                    if two {
                        let kept: i64 = x
                            .iter()
                            .zip(slots)
                            .map(|(&v, &s)| v & -i64::from(s == 0))
                            .sum();
                        self.sum_i[0] += i128::from(kept);
                        return;
                    }
                    // Folded when the sums could overflow, not every block: with many
                    // slots a fold costs far more than the block.
                    let stride = self.sum_i.len();
                    let stride = if self.part.len() > stride { stride } else { 0 };
                    kernels::scatter(&mut self.part, stride, x, slots);
                    self.pending += 1;
                    if self.pending >= self.fold {
                        self.fold_parts();
                    }
                } else {
                    for (&v, &s) in x.iter().zip(slots) {
                        self.sum_i[s as usize] += i128::from(v);
                    }
                }
            }
            AggFunc::Min => {
                for (&v, &s) in x.iter().zip(slots) {
                    let m = &mut self.min_i[s as usize];
                    *m = (*m).min(v);
                }
            }
            AggFunc::Max => {
                for (&v, &s) in x.iter().zip(slots) {
                    let m = &mut self.max_i[s as usize];
                    *m = (*m).max(v);
                }
            }
            AggFunc::VarSamp | AggFunc::VarPop | AggFunc::StddevSamp | AggFunc::StddevPop => {
                self.add_moments(x.iter().map(|&v| v as f64), slots, uniform);
            }
            AggFunc::Count | AggFunc::CountStar => {}
        }
    }

    /// Adds a block of floats in row order (so sums match the reference bit for bit).
    pub(super) fn add_floats(&mut self, x: &[f64], slots: &[u32], uniform: bool) {
        if self.func.is_moment() {
            self.add_moments(x.iter().copied(), slots, uniform);
            return;
        }
        for (&v, &s) in x.iter().zip(slots) {
            let s = s as usize;
            match self.func {
                AggFunc::Sum | AggFunc::Avg => self.sum_f[s] += v,
                // Same order as `Value::sort_cmp` (total order), so min and max match.
                AggFunc::Min => {
                    if !self.has_f[s] || v.total_cmp(&self.min_f[s]).is_lt() {
                        self.min_f[s] = v;
                    }
                    self.has_f[s] = true;
                }
                AggFunc::Max => {
                    if !self.has_f[s] || v.total_cmp(&self.max_f[s]).is_gt() {
                        self.max_f[s] = v;
                    }
                    self.has_f[s] = true;
                }
                // Counts need no values; the variances took them above.
                _ => {}
            }
        }
    }

    /// One slot holding what an [`Acc`] of the reference path holds, for `func` (over
    /// floats or not).
    pub(super) fn of_acc(func: AggFunc, float: bool, a: &Acc) -> DenseAcc {
        let mut d = DenseAcc::new(1, func, float, 0, 1);
        d.count[0] = a.count;
        let int = |v: &Value| match v {
            Value::Int(x) => *x,
            Value::Decimal(x, _) => *x as i64,
            Value::Date(x) => i64::from(*x),
            Value::Bool(b) => i64::from(*b),
            _ => 0,
        };
        let float_of = |v: &Value| match v {
            Value::Float(f) => *f,
            _ => f64::NAN,
        };
        if let Some(s) = d.sum_i.first_mut() {
            *s = a.sum_i;
        }
        if let Some(s) = d.sum_f.first_mut() {
            *s = a.sum_f;
        }
        match (&a.min, &a.max) {
            (Some(v), _) if func == AggFunc::Min && float => {
                d.min_f[0] = float_of(v);
                d.has_f[0] = true;
            }
            (_, Some(v)) if func == AggFunc::Max && float => {
                d.max_f[0] = float_of(v);
                d.has_f[0] = true;
            }
            (Some(v), _) if func == AggFunc::Min => d.min_i[0] = int(v),
            (_, Some(v)) if func == AggFunc::Max => d.max_i[0] = int(v),
            _ => {}
        }
        if func.is_moment() {
            (d.wn[0], d.mean[0], d.m2[0]) = (a.count, a.mean, a.m2);
        }
        d
    }

    /// Appends slot `s` of `o` (a chunk's accumulators for the same function) as a new slot.
    pub(super) fn push_slot(&mut self, o: &DenseAcc, s: usize) {
        fn push<T: Copy>(to: &mut Vec<T>, from: &[T], s: usize) {
            if let Some(&x) = from.get(s) {
                to.push(x);
            }
        }
        push(&mut self.count, &o.count, s);
        push(&mut self.sum_i, &o.sum_i, s);
        push(&mut self.sum_f, &o.sum_f, s);
        push(&mut self.min_i, &o.min_i, s);
        push(&mut self.max_i, &o.max_i, s);
        push(&mut self.min_f, &o.min_f, s);
        push(&mut self.max_f, &o.max_f, s);
        push(&mut self.has_f, &o.has_f, s);
        push(&mut self.wn, &o.wn, s);
        push(&mut self.mean, &o.mean, s);
        push(&mut self.m2, &o.m2, s);
    }

    /// Sets slot `g` to slot `s` of `o` (a chunk's accumulators for the same function).
    pub(super) fn set_slot(&mut self, g: usize, o: &DenseAcc, s: usize) {
        fn set<T: Copy>(to: &mut [T], from: &[T], g: usize, s: usize) {
            if let (Some(t), Some(&x)) = (to.get_mut(g), from.get(s)) {
                *t = x;
            }
        }
        set(&mut self.count, &o.count, g, s);
        set(&mut self.sum_i, &o.sum_i, g, s);
        set(&mut self.sum_f, &o.sum_f, g, s);
        set(&mut self.min_i, &o.min_i, g, s);
        set(&mut self.max_i, &o.max_i, g, s);
        set(&mut self.min_f, &o.min_f, g, s);
        set(&mut self.max_f, &o.max_f, g, s);
        set(&mut self.has_f, &o.has_f, g, s);
        set(&mut self.wn, &o.wn, g, s);
        set(&mut self.mean, &o.mean, g, s);
        set(&mut self.m2, &o.m2, g, s);
    }

    /// Merges slot `s` of `o` into slot `g` for each pair `(g, s)`; `fresh[j]`: pair `j`'s
    /// slot `g` holds nothing yet (it is set instead). The integer aggregates merge into an
    /// empty slot as a set would, so they take all pairs in one loop a field.
    pub(super) fn merge_pairs(&mut self, o: &DenseAcc, pairs: &[(u32, u32)], fresh: &[bool]) {
        let exact = !self.float && !self.func.is_moment();
        if !exact {
            for (&(g, s), &new) in pairs.iter().zip(fresh) {
                if new {
                    self.set_slot(g as usize, o, s as usize);
                } else {
                    self.merge_slot(g as usize, o, s as usize);
                }
            }
            return;
        }
        fn each<T: Copy>(to: &mut [T], from: &[T], pairs: &[(u32, u32)], f: impl Fn(T, T) -> T) {
            for &(g, s) in pairs {
                if let (Some(t), Some(&x)) = (to.get_mut(g as usize), from.get(s as usize)) {
                    *t = f(*t, x);
                }
            }
        }
        each(&mut self.count, &o.count, pairs, |a, b| a + b);
        match self.func {
            AggFunc::Sum | AggFunc::Avg => each(&mut self.sum_i, &o.sum_i, pairs, |a, b| a + b),
            AggFunc::Min => each(&mut self.min_i, &o.min_i, pairs, i64::min),
            AggFunc::Max => each(&mut self.max_i, &o.max_i, pairs, i64::max),
            _ => {}
        }
    }

    /// Merges slot `s` of `o` (a chunk's accumulators for the same function) into slot `g`,
    /// as [`Acc::merge`] merges them.
    pub(super) fn merge_slot(&mut self, g: usize, o: &DenseAcc, s: usize) {
        match self.func {
            AggFunc::Sum | AggFunc::Avg if self.float => self.sum_f[g] += o.sum_f[s],
            AggFunc::Sum | AggFunc::Avg => self.sum_i[g] += o.sum_i[s],
            AggFunc::Min if self.float => {
                if o.has_f[s] && (!self.has_f[g] || o.min_f[s].total_cmp(&self.min_f[g]).is_lt()) {
                    self.min_f[g] = o.min_f[s];
                    self.has_f[g] = true;
                }
            }
            AggFunc::Max if self.float => {
                if o.has_f[s] && (!self.has_f[g] || o.max_f[s].total_cmp(&self.max_f[g]).is_gt()) {
                    self.max_f[g] = o.max_f[s];
                    self.has_f[g] = true;
                }
            }
            AggFunc::Min => self.min_i[g] = self.min_i[g].min(o.min_i[s]),
            AggFunc::Max => self.max_i[g] = self.max_i[g].max(o.max_i[s]),
            AggFunc::VarSamp | AggFunc::VarPop | AggFunc::StddevSamp | AggFunc::StddevPop => {
                (self.mean[g], self.m2[g]) = chan(
                    self.count[g],
                    (self.mean[g], self.m2[g]),
                    o.count[s],
                    (o.mean[s], o.m2[s]),
                );
            }
            AggFunc::Count | AggFunc::CountStar => {}
        }
        self.count[g] += o.count[s];
    }

    pub(super) fn to_acc(&self, s: usize, ty: Option<SqlType>) -> Acc {
        let count = self.count[s];
        let (min, max) = match ty {
            _ if count == 0 => (None, None),
            Some(SqlType::Float) => (
                self.min_f.get(s).map(|&f| Value::Float(f)),
                self.max_f.get(s).map(|&f| Value::Float(f)),
            ),
            Some(t) => (
                self.min_i
                    .get(s)
                    .and_then(|&x| make_integral(i128::from(x), t).ok()),
                self.max_i
                    .get(s)
                    .and_then(|&x| make_integral(i128::from(x), t).ok()),
            ),
            None => (None, None),
        };
        let get = |v: &[f64]| v.get(s).copied().unwrap_or(0.0);
        Acc {
            count,
            sum_i: self.sum_i.get(s).copied().unwrap_or(0),
            sum_f: get(&self.sum_f),
            min,
            max,
            mean: get(&self.mean),
            m2: get(&self.m2),
            distinct: None,
        }
    }
}
