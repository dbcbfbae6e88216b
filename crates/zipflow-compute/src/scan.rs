//! The scan operator: a table, a predicate, group keys and aggregates, chunk by chunk in
//! parallel.
//!
//! Each chunk runs one of two paths that give identical results:
//! - the **reference** path decodes the chunk's columns whole and evaluates every row with
//!   [`expr::eval`] (NULLs, three-valued logic, checked arithmetic). Chunks with nulls in a
//!   column the query reads, and queries using a construct the fast path lacks, take it;
//! - the **fast** path works on 1024-value blocks: zone maps skip the chunk (or drop a
//!   conjunct that holds for the whole chunk), column predicates are evaluated in the encoded
//!   domain into a byte mask (or, when all are ranges on packed columns, by fused
//!   unpack-and-compare kernels into a bitmask), the surviving rows become a selection, and
//!   only then are the aggregate arguments decoded (gathered one by one when few rows
//!   survive) and folded into per-chunk accumulators indexed by dense group ids. String
//!   predicates (`=`, `IN`, `LIKE`) are decided once per dictionary entry in dictionary
//!   chunks, once per run of equal strings in others.
//!
//! Chunks run in batches of a few per thread; each batch's groups are merged into the
//! scan's before the next batch runs ([`Merger`]): split by key into one part per thread,
//! merged field by field from the fast path's dense accumulators (the reference path's
//! groups as one-slot ones), each group's chunks in chunk order, then put back in the order
//! their keys were first seen. When the only key is an integral column whose zone maps bound
//! it to a short range ([`KeyRange`]), the parts are ranges of its values and the groups are
//! indexed by value: no hashing, and chunks whose slots are numbered in key order are merged
//! walking both sides in order.

use std::collections::HashMap;
use std::hash::BuildHasher;

use rayon::prelude::*;
use rustc_hash::FxHashMap;
use zipflow_core::stats::Scalar;
use zipflow_core::values::ByteStrings;
use zipflow_core::{Error, IntVec, Result, Values};
use zipflow_encodings::{NodeView, Scratch};
use zipflow_format::{Validity, ZfFile};

use crate::column::{
    BLOCK, Block, ChunkColumn, PackedRange, Predicate, StrView, bits_to_mask, ints_to_i64,
};
use crate::expr::{
    self, ArithOp, CmpOp, Expr, Func, Row, SqlType, Value, div_round, make_integral, pow10,
};
use crate::query::{AggFunc, Query, QueryResult};

/// How a scan runs.
#[derive(Debug, Clone, Default)]
pub struct ScanOptions {
    /// Worker threads (0: rayon's default, one per core).
    pub threads: usize,
    /// Run every chunk through the reference path (for checking the fast path).
    pub reference: bool,
}

/// The running state of one aggregate for one group.
#[derive(Debug, Clone, Default)]
struct Acc {
    count: i64,
    sum_i: i128,
    sum_f: f64,
    min: Option<Value>,
    max: Option<Value>,
    /// The numeric values' running mean and sum of squared deviations from it (Welford's
    /// update, merged by Chan's rule), in the argument's scaled units: the variances.
    mean: f64,
    m2: f64,
    /// A DISTINCT aggregate's values so far (the rest stays empty until its result).
    distinct: Option<HashMap<KeyPart, Value>>,
}

/// Welford's update of a running (count, mean, sum of squared deviations) by `x`, the count
/// already including it.
#[inline]
fn welford(n: i64, mean: &mut f64, m2: &mut f64, x: f64) {
    let d = x - *mean;
    *mean += d / n as f64;
    *m2 += d * (x - *mean);
}

/// Chan's rule: the (mean, sum of squared deviations) of `na` values `a` and `nb` values `b`
/// together.
fn chan(na: i64, a: (f64, f64), nb: i64, b: (f64, f64)) -> (f64, f64) {
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
    fn add_distinct(&mut self, v: Value) {
        if !matches!(v, Value::Null) {
            self.distinct
                .get_or_insert_with(HashMap::new)
                .entry(key_part(&v))
                .or_insert(v);
        }
    }

    fn add(&mut self, v: &Value) {
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

    fn merge(&mut self, o: &Acc) {
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

    fn result(&self, func: AggFunc, ty: SqlType, arg_ty: Option<SqlType>) -> Value {
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

/// A hashable group key part.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum KeyPart {
    Null,
    I(i128),
    F(u64),
    S(String),
}

fn key_part(v: &Value) -> KeyPart {
    match v {
        Value::Null => KeyPart::Null,
        Value::Bool(b) => KeyPart::I(i128::from(*b)),
        Value::Int(x) => KeyPart::I(i128::from(*x)),
        Value::Decimal(x, _) => KeyPart::I(*x),
        Value::Date(d) => KeyPart::I(i128::from(*d)),
        Value::Float(f) => KeyPart::F(f.to_bits()),
        Value::Str(s) => KeyPart::S(s.clone()),
    }
}

/// A group's key and its aggregates' results.
type GroupResult = (Vec<Value>, Vec<Value>);

/// Groups of one chunk (or of the whole scan): keys in first-seen order, accumulators.
#[derive(Debug, Default)]
struct Groups {
    /// Where each key is, for [`Groups::slot`].
    index: FxHashMap<Vec<KeyPart>, usize>,
    /// The same for keys of one integral value (no key allocated, none dereferenced).
    ints: FxHashMap<i128, usize>,
    keys: Vec<Vec<Value>>,
    accs: Vec<Vec<Acc>>,
}

/// A group key as [`Groups`] looks it up.
#[derive(Hash)]
enum GroupKey {
    /// One integral value.
    Int(i128),
    /// Any other key.
    Parts(Vec<KeyPart>),
}

impl GroupKey {
    fn of(key: &[Value]) -> GroupKey {
        if let [v] = key
            && let KeyPart::I(x) = key_part(v)
        {
            return GroupKey::Int(x);
        }
        GroupKey::Parts(key.iter().map(key_part).collect())
    }
}

impl Groups {
    fn find(&self, k: &GroupKey) -> Option<usize> {
        match k {
            GroupKey::Int(x) => self.ints.get(x),
            GroupKey::Parts(p) => self.index.get(p),
        }
        .copied()
    }

    /// Adds the group of a key [`Groups::find`] did not find.
    fn add(&mut self, k: GroupKey, key: Vec<Value>, accs: Vec<Acc>) -> usize {
        let i = self.keys.len();
        match k {
            GroupKey::Int(x) => self.ints.insert(x, i),
            GroupKey::Parts(p) => self.index.insert(p, i),
        };
        self.keys.push(key);
        self.accs.push(accs);
        i
    }

    fn slot(&mut self, key: Vec<Value>, naggs: usize) -> usize {
        let k = GroupKey::of(&key);
        match self.find(&k) {
            Some(i) => i,
            None => self.add(k, key, vec![Acc::default(); naggs]),
        }
    }

    /// Each group's key and its aggregates' results, in order.
    fn results(self, q: &Query) -> Vec<GroupResult> {
        self.keys
            .into_iter()
            .zip(self.accs)
            .map(|(key, accs)| {
                let aggs = q
                    .aggregates
                    .iter()
                    .zip(&accs)
                    .map(|(a, acc)| acc.result(a.func, a.ty, a.arg.as_ref().map(Expr::ty)))
                    .collect();
                (key, aggs)
            })
            .collect()
    }

    fn merge(&mut self, other: Groups, naggs: usize) {
        for (k, accs) in other.keys.into_iter().zip(other.accs) {
            let gk = GroupKey::of(&k);
            let Some(i) = self.find(&gk) else {
                // A new group takes the chunk's accumulators as they are.
                self.add(gk, k, accs);
                continue;
            };
            debug_assert_eq!(accs.len(), naggs);
            for (a, o) in self.accs[i].iter_mut().zip(&accs) {
                a.merge(o);
            }
        }
    }
}

/// Which accumulator each aggregate of the fast path reads: its own, or that of an earlier
/// aggregate over the same argument that keeps what it needs (sum and avg share the sums,
/// the variances the moments).
fn shared_accs(q: &Query) -> Vec<usize> {
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

/// A chunk's result: the fast path's accumulators by slot, or the reference path's groups.
enum Partial {
    Dense(DenseGroups),
    Rows(Groups),
}

/// A chunk's groups on the fast path: every slot's key, the slots that kept rows (in slot
/// order, which is the keys' first-seen order), and one accumulator per aggregate (those
/// of [`shared_accs`] read).
struct DenseGroups {
    keys: SlotKeys,
    seen: Vec<u32>,
    dense: Vec<DenseAcc>,
}

/// One part of the scan's groups (those whose keys fall in it): keys in first-seen order,
/// an index of them, one accumulator per aggregate with a slot per group (merged field by
/// field), and where each group was first seen (chunk, place among the chunk's groups).
struct MergedDense {
    groups: Groups,
    dense: Vec<DenseAcc>,
    first: Vec<(u32, u32)>,
}

impl MergedDense {
    /// The slot of `key` (first seen at `at`), and whether it is new.
    fn slot(&mut self, key: &[Value], at: (u32, u32)) -> (usize, bool) {
        let gk = GroupKey::of(key);
        match self.groups.find(&gk) {
            Some(g) => (g, false),
            None => {
                self.first.push(at);
                (self.groups.add(gk, key.to_vec(), Vec::new()), true)
            }
        }
    }
}

/// Groups below which a scan's remaining chunks run as one batch.
const FEW_GROUPS: usize = 4096;

/// Which of `parts` parts of the merge a group key belongs to: high bits of its hash, so
/// that the part's own hash table still sees varied low bits.
fn part_of(key: &[Value], parts: usize) -> usize {
    let h = rustc_hash::FxBuildHasher.hash_one(GroupKey::of(key));
    ((h >> 32) as usize) % parts
}

/// A single integral GROUP BY key column whose zone maps bound its values to a short range:
/// the merge indexes groups by value (no hashing, no key objects), and a chunk whose slots
/// come in ascending key order is merged walking the accumulators in order.
#[derive(Debug, Clone, Copy)]
struct KeyRange {
    /// The key's column.
    column: usize,
    lo: i64,
    len: usize,
    ty: SqlType,
}

/// The widest key range merged by value (4 Mi values: tens of MB of accumulators at most).
const DIRECT_SPAN: usize = 1 << 22;

/// A group not seen yet, in [`DirectPart::first`].
const UNSEEN: (u32, u32) = (u32::MAX, u32::MAX);

/// One part of a merge by key value: the groups of values `base .. base + first.len()`.
struct DirectPart {
    base: i64,
    /// Where each value's group was first seen (chunk, place in it), or [`UNSEEN`].
    first: Vec<(u32, u32)>,
    dense: Vec<DenseAcc>,
    groups: usize,
}

impl DirectPart {
    /// The group of `v` (of this part), and whether it is new (then first seen at `at`).
    fn claim(&mut self, v: i64, at: (u32, u32)) -> (u32, bool) {
        let g = (v - self.base) as usize;
        let new = self.first[g] == UNSEEN;
        if new {
            self.first[g] = at;
            self.groups += 1;
        }
        (g as u32, new)
    }
}

/// The error of a group key of chunk `chunk` outside the range its column's zone maps give.
fn outside_zone_maps(v: i128, chunk: u32) -> Error {
    Error::corrupt(format!(
        "group key {v} lies outside the range the column's zone maps give"
    ))
    .at_chunk(chunk)
}

/// The scan's groups, merged from the chunks' results batch by batch in chunk order (so
/// that only a batch of chunks' accumulators is held at a time) without an accumulator
/// object per group and chunk. The groups are split by key into as many parts as the scan
/// has threads and the parts merged in parallel; a group's chunks are merged in chunk
/// order whatever its part, so float sums and moments add up as a sequential merge adds
/// them, and the groups come back in first-seen order.
struct Merger {
    shared: Vec<usize>,
    /// The aggregates whose accumulators are kept (the others read one of these).
    own: Vec<usize>,
    parts: Vec<MergedDense>,
    /// With a [`KeyRange`]: the parts by key value (and `parts` is empty).
    direct: Option<(KeyRange, Vec<DirectPart>)>,
}

impl Merger {
    fn new(q: &Query, parts: usize, range: Option<KeyRange>) -> Merger {
        let shared = shared_accs(q);
        let own = (0..shared.len()).filter(|&i| shared[i] == i).collect();
        let parts = parts.max(1);
        let accs = |n: usize| -> Vec<DenseAcc> {
            q.aggregates
                .iter()
                .map(|a| DenseAcc::new(n, a.func, arg_is_float(a.arg.as_ref()), 0, 1))
                .collect()
        };
        if let Some(r) = range {
            // Consecutive ranges of values, one a part.
            let at = |p: usize| (r.len as u128 * p as u128 / parts as u128) as usize;
            let direct = (0..parts)
                .map(|p| DirectPart {
                    base: r.lo + at(p) as i64,
                    first: vec![UNSEEN; at(p + 1) - at(p)],
                    dense: accs(at(p + 1) - at(p)),
                    groups: 0,
                })
                .collect();
            return Merger {
                shared,
                own,
                parts: Vec::new(),
                direct: Some((r, direct)),
            };
        }
        let parts = (0..parts)
            .map(|_| MergedDense {
                groups: Groups::default(),
                dense: accs(0),
                first: Vec::new(),
            })
            .collect();
        Merger {
            shared,
            own,
            parts,
            direct: None,
        }
    }

    /// Merges the results of chunks `first ..` (in order) by key value: each part takes the
    /// slots of its values, a chunk's in ascending key order when they are numbered so.
    fn add_direct(&mut self, first: usize, batch: &[Partial]) -> Result<()> {
        let own = &self.own;
        let Some((range, parts)) = &mut self.direct else {
            return Ok(());
        };
        let (lo, hi) = (range.lo, range.lo + range.len as i64);
        parts.par_iter_mut().try_for_each(|m| -> Result<()> {
            let (a, b) = (m.base, m.base + m.first.len() as i64);
            let (mut pairs, mut fresh) = (Vec::new(), Vec::new());
            let ends = (a == lo, b == hi);
            for (c, item) in batch.iter().enumerate() {
                let chunk = (first + c) as u32;
                match item {
                    Partial::Dense(d) => {
                        let k = &d.keys;
                        if k.ints.len() != k.len() {
                            return Err(Error::invalid(
                                "a chunk's group keys were not kept as integers",
                            ));
                        }
                        let of = |s: u32| k.ints[s as usize];
                        // Slots numbered in key order keep their first rows (and the slots
                        // that kept rows are in key order: this part's are a run of them);
                        // others are in first-seen order.
                        let ordered = !k.first_row.is_empty();
                        // A group's place in the chunk: its first row (slots in key order) or
                        // its place in `seen` (slots in first-seen order).
                        let at = |j: usize, s: u32| {
                            let place = k.first_row.get(s as usize).copied();
                            (chunk, place.unwrap_or(j as u32))
                        };
                        let seen = &d.seen[..];
                        let (x, y) = match ordered {
                            true => (
                                seen.partition_point(|&s| of(s) < a),
                                seen.partition_point(|&s| of(s) < b),
                            ),
                            false => (0, seen.len()),
                        };
                        if ordered && ((ends.0 && x > 0) || (ends.1 && y < seen.len())) {
                            let s = if x > 0 { seen[0] } else { seen[y] };
                            return Err(outside_zone_maps(of(s).into(), chunk));
                        }
                        // The chunk's slots of this part and their groups, then each aggregate
                        // merged over all of them at once.
                        pairs.clear();
                        fresh.clear();
                        for (j, &s) in seen.iter().enumerate().take(y).skip(x) {
                            let v = of(s);
                            if (v < a && ends.0) || (v >= b && ends.1) {
                                return Err(outside_zone_maps(v.into(), chunk));
                            }
                            if (a..b).contains(&v) {
                                let (g, new) = m.claim(v, at(j, s));
                                pairs.push((g, s));
                                fresh.push(new);
                            }
                        }
                        for &i in own {
                            m.dense[i].merge_pairs(&d.dense[i], &pairs, &fresh);
                        }
                    }
                    Partial::Rows(rows) => {
                        for (at, (key, accs)) in rows.keys.iter().zip(&rows.accs).enumerate() {
                            let v = match key.first().map(key_part) {
                                Some(KeyPart::I(v)) => v,
                                _ => {
                                    return Err(Error::invalid(
                                        "a group key that is not an integer in an integral column",
                                    ));
                                }
                            };
                            if (v < i128::from(a) && ends.0) || (v >= i128::from(b) && ends.1) {
                                return Err(outside_zone_maps(v, chunk));
                            }
                            if !(i128::from(a)..i128::from(b)).contains(&v) {
                                continue;
                            }
                            let one: Vec<DenseAcc> = m
                                .dense
                                .iter()
                                .zip(accs)
                                .map(|(d, a)| DenseAcc::of_acc(d.func, d.float, a))
                                .collect();
                            let (g, new) = m.claim(v as i64, (chunk, at as u32));
                            for &i in own {
                                m.dense[i].merge_pairs(&one[i], &[(g, 0)], &[new]);
                            }
                        }
                    }
                }
            }
            Ok(())
        })
    }

    /// Merges the results of chunks `first ..` (in order).
    fn add(&mut self, q: &Query, first: usize, batch: &[Partial]) -> Result<()> {
        if self.direct.is_some() {
            return self.add_direct(first, batch);
        }
        let n = self.parts.len();
        // Each result's groups' parts, found once.
        let ids: Vec<Vec<u16>> = if n > 1 {
            batch
                .par_iter()
                .map(|p| match p {
                    Partial::Dense(d) => d
                        .seen
                        .iter()
                        .map(|&s| part_of(d.keys.get(s as usize), n) as u16)
                        .collect(),
                    Partial::Rows(g) => g.keys.iter().map(|k| part_of(k, n) as u16).collect(),
                })
                .collect()
        } else {
            Vec::new()
        };
        let own = &self.own;
        self.parts.par_iter_mut().enumerate().for_each(|(p, m)| {
            let mine = |c: usize, at: usize| n == 1 || usize::from(ids[c][at]) == p;
            for (c, item) in batch.iter().enumerate() {
                let chunk = (first + c) as u32;
                match item {
                    Partial::Dense(d) => {
                        for (at, &s) in d.seen.iter().enumerate() {
                            if !mine(c, at) {
                                continue;
                            }
                            let s = s as usize;
                            let (g, new) = m.slot(d.keys.get(s), (chunk, at as u32));
                            for &i in own {
                                if new {
                                    m.dense[i].push_slot(&d.dense[i], s);
                                } else {
                                    m.dense[i].merge_slot(g, &d.dense[i], s);
                                }
                            }
                        }
                    }
                    // A chunk of the reference path (it has nulls): its groups' accumulators
                    // as one-slot dense ones.
                    Partial::Rows(rows) => {
                        for (at, (key, accs)) in rows.keys.iter().zip(&rows.accs).enumerate() {
                            if !mine(c, at) {
                                continue;
                            }
                            let (g, new) = m.slot(key, (chunk, at as u32));
                            for &i in own {
                                let a = &q.aggregates[i];
                                let one = DenseAcc::of_acc(
                                    a.func,
                                    arg_is_float(a.arg.as_ref()),
                                    &accs[i],
                                );
                                if new {
                                    m.dense[i].push_slot(&one, 0);
                                } else {
                                    m.dense[i].merge_slot(g, &one, 0);
                                }
                            }
                        }
                    }
                }
            }
        });
        Ok(())
    }

    /// Groups so far.
    fn groups(&self) -> usize {
        match &self.direct {
            Some((_, parts)) => parts.iter().map(|m| m.groups).sum(),
            None => self.parts.iter().map(|m| m.first.len()).sum(),
        }
    }

    /// The groups in first-seen order: each one's key and its aggregates' results (computed
    /// from the accumulator arrays group by group, with no accumulator object kept per group).
    ///
    /// With `by_key`, groups merged by key value come in key order instead (the rows are
    /// sorted by the key next, and a sorted input sorts in one pass).
    fn finish(self, q: &Query, by_key: bool) -> Result<Vec<GroupResult>> {
        if let Some((range, parts)) = &self.direct {
            // Each part's groups in key order (its accumulators read in order), in parallel,
            // then all of them put in first-seen order (unless `by_key`).
            let ty = range.ty;
            let shared = &self.shared;
            #[allow(clippy::type_complexity)]
            let built: Vec<Vec<((u32, u32), Vec<Value>, Vec<Value>)>> = parts
                .par_iter()
                .map(|m| {
                    m.first
                        .iter()
                        .enumerate()
                        .filter(|(_, f)| **f != UNSEEN)
                        .map(|(g, &f)| {
                            let key = make_integral(i128::from(m.base) + g as i128, ty)?;
                            Ok((f, vec![key], group_results(q, shared, &m.dense, g)))
                        })
                        .collect::<Result<Vec<_>>>()
                })
                .collect::<Result<_>>()?;
            // Parts cover ascending key ranges, each built in key order.
            let mut all: Vec<_> = built.into_iter().flatten().collect();
            if !by_key {
                all.sort_unstable_by_key(|g| g.0);
            }
            return Ok(all.into_iter().map(|(_, key, aggs)| (key, aggs)).collect());
        }
        let mut parts = self.parts;
        let mut order: Vec<((u32, u32), usize, usize)> = parts
            .iter()
            .enumerate()
            .flat_map(|(p, m)| m.first.iter().enumerate().map(move |(g, &f)| (f, p, g)))
            .collect();
        order.sort_unstable();
        let mut groups = Vec::with_capacity(order.len());
        for (_, p, g) in order {
            let m = &mut parts[p];
            let aggs = group_results(q, &self.shared, &m.dense, g);
            groups.push((std::mem::take(&mut m.groups.keys[g]), aggs));
        }
        Ok(groups)
    }
}

/// The aggregates' results of group `g` of merged accumulator arrays (aggregate `i` reads
/// the arrays of `shared[i]`).
fn group_results(q: &Query, shared: &[usize], dense: &[DenseAcc], g: usize) -> Vec<Value> {
    q.aggregates
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let arg = a.arg.as_ref().map(Expr::ty);
            dense[shared[i]].to_acc(g, arg).result(a.func, a.ty, arg)
        })
        .collect()
}

/// Whether an aggregate's argument is a float (its sums, minima and maxima kept in `f64`).
fn arg_is_float(arg: Option<&Expr>) -> bool {
    arg.is_some_and(|e| e.ty() == SqlType::Float)
}

/// A cell of a decoded column as a value of type `ty`.
fn cell(values: &Values, validity: Option<&Validity>, i: usize, ty: SqlType) -> Value {
    if validity.is_some_and(|v| !v.get(i).copied().unwrap_or(true)) {
        return Value::Null;
    }
    match values {
        Values::Int(v) => {
            let x = v.get_i128(i).unwrap_or(0);
            match ty {
                SqlType::Bool => Value::Bool(x != 0),
                SqlType::Decimal(s) => Value::Decimal(x, s),
                SqlType::Date => Value::Date(x as i32),
                _ => Value::Int(x as i64),
            }
        }
        Values::F32(v) => Value::Float(v.get(i).map_or(f64::NAN, |&f| f64::from(f))),
        Values::F64(v) => Value::Float(v.get(i).copied().unwrap_or(f64::NAN)),
        Values::Bytes(b) => {
            Value::Str(String::from_utf8_lossy(b.get(i).unwrap_or(&[])).into_owned())
        }
    }
}

/// The decoded columns of one chunk, for the reference path.
struct DecodedChunk {
    /// By file column index: values, validity, type.
    cols: HashMap<usize, (Values, Option<Validity>, SqlType)>,
}

struct ChunkRow<'a> {
    chunk: &'a DecodedChunk,
    i: usize,
}

impl Row for ChunkRow<'_> {
    fn column(&self, index: usize) -> Value {
        match self.chunk.cols.get(&index) {
            Some((v, validity, ty)) => cell(v, validity.as_ref(), self.i, *ty),
            None => Value::Null,
        }
    }
}

/// A table open for queries.
pub struct Table {
    file: ZfFile,
    types: Vec<SqlType>,
}

impl Table {
    /// Wraps an open file; fails on a column type queries cannot read.
    pub fn new(file: ZfFile) -> Result<Table> {
        let types = file
            .columns()
            .iter()
            .map(|c| SqlType::of_column(c.column_type).map_err(|e| e.at_column(&c.name)))
            .collect::<Result<Vec<_>>>()?;
        Ok(Table { file, types })
    }

    /// Opens a .zf file.
    pub fn open(path: impl AsRef<std::path::Path>) -> Result<Table> {
        Table::new(ZfFile::open(path)?)
    }

    /// `(name, type)` of every column, for binding SQL.
    pub fn schema(&self) -> Vec<(String, SqlType)> {
        self.file
            .columns()
            .iter()
            .zip(&self.types)
            .map(|(c, t)| (c.name.clone(), *t))
            .collect()
    }

    /// The underlying file.
    pub fn file(&self) -> &ZfFile {
        &self.file
    }

    fn decode_chunk(
        &self,
        cols: &[usize],
        chunk: usize,
        scratch: &mut Scratch,
    ) -> Result<DecodedChunk> {
        let mut out = HashMap::new();
        for &c in cols {
            let (v, validity) = self.file.read_chunk(c, chunk, scratch)?;
            out.insert(c, (v, validity, self.types[c]));
        }
        Ok(DecodedChunk { cols: out })
    }

    /// Runs `q` and returns its rows, ordered and limited.
    pub fn run(&self, q: &Query, opts: &ScanOptions) -> Result<QueryResult> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(opts.threads)
            .build()
            .map_err(|e| Error::external("starting worker threads", e))?;
        let mut rows = if q.aggregating {
            pool.install(|| self.aggregate(q, opts))?
        } else {
            let mut rows = Vec::new();
            let stop = q
                .order_by
                .is_empty()
                .then(|| q.limit.map(|l| l + q.offset))
                .flatten();
            self.for_each_row(q, |r| {
                rows.push(r);
                stop.is_none_or(|s| (rows.len() as u64) < s)
            })?;
            rows
        };
        if !q.order_by.is_empty() {
            rows.sort_by(|a, b| {
                for &(i, desc) in &q.order_by {
                    let o = a[i].sort_cmp(&b[i]);
                    let o = if desc { o.reverse() } else { o };
                    if o.is_ne() {
                        return o;
                    }
                }
                std::cmp::Ordering::Equal
            });
        }
        let start = usize::try_from(q.offset)
            .unwrap_or(usize::MAX)
            .min(rows.len());
        let end = match q.limit {
            Some(l) => start
                .saturating_add(usize::try_from(l).unwrap_or(usize::MAX))
                .min(rows.len()),
            None => rows.len(),
        };
        let shown = q.output.len() - q.hidden;
        rows.truncate(end);
        rows.drain(..start);
        for r in &mut rows {
            r.truncate(shown);
        }
        Ok(QueryResult {
            names: q.output[..shown].iter().map(|o| o.name.clone()).collect(),
            types: q.output[..shown].iter().map(|o| o.expr.ty()).collect(),
            rows,
        })
    }

    /// Streams the rows of a projection query (no aggregates), in table order, to `f`, which
    /// returns false to stop. Every output column is produced, hidden ones included.
    pub fn for_each_row(&self, q: &Query, mut f: impl FnMut(Vec<Value>) -> bool) -> Result<()> {
        let cols = q.columns();
        let mut scratch = Scratch::default();
        for c in 0..self.file.num_chunks() {
            let chunk = self.decode_chunk(&cols, c, &mut scratch)?;
            let rows = self
                .file
                .try_chunk_meta(0, c)
                .map_or(0, |m| m.rows as usize);
            for i in 0..rows {
                let row = ChunkRow { chunk: &chunk, i };
                if let Some(p) = &q.filter
                    && expr::eval(p, &row)? != Value::Bool(true)
                {
                    continue;
                }
                let out = q
                    .output
                    .iter()
                    .map(|o| expr::eval(&o.expr, &row))
                    .collect::<Result<Vec<_>>>()?;
                if !f(out) {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    fn aggregate(&self, q: &Query, opts: &ScanOptions) -> Result<Vec<Vec<Value>>> {
        let cols = q.columns();
        let fast = if opts.reference {
            None
        } else {
            FastPlan::new(self, q)?
        };
        let naggs = q.aggregates.len();
        let nchunks = self.file.num_chunks();
        // Chunks run in batches of a few per thread, each batch merged before the next, so
        // that many groups do not hold every chunk's accumulators at once; once the groups
        // are known to be few, the rest runs as one batch (no thread waits at a batch's end).
        let threads = rayon::current_num_threads().max(1);
        let range = fast.as_ref().and_then(|_| self.key_range(q));
        // Ordered first by the only key, the groups need no first-seen order: every key is
        // one group, so ORDER BY alone decides their order.
        let by_key = q.keys.len() == 1
            && q.order_by.first().is_some_and(|&(o, _)| {
                matches!(q.output.get(o).map(|c| &c.expr), Some(Expr::KeyRef(0, _)))
            });
        let first_seen = fast.as_ref().is_none_or(|f| f.first_seen);
        let order = match (range.is_some(), first_seen) {
            (false, _) => SlotOrder::FirstSeen,
            (true, true) => SlotOrder::Keys,
            (true, false) => SlotOrder::KeysOnly,
        };
        let mut merger = fast.as_ref().map(|_| Merger::new(q, threads, range));
        let mut rows = Groups::default();
        let mut first = 0;
        while first < nchunks {
            let few = match &merger {
                Some(m) => first > 0 && m.groups() < FEW_GROUPS,
                None => first > 0 && rows.keys.len() < FEW_GROUPS,
            };
            let end = if few {
                nchunks
            } else {
                nchunks.min(first + 4 * threads)
            };
            let partials = (first..end)
                .into_par_iter()
                .map_init(Scratch::default, |scratch, c| {
                    let has_nulls = cols
                        .iter()
                        .any(|&col| self.file.chunk_meta(col, c).stats.null_count > 0);
                    match &fast {
                        Some(plan) if !has_nulls => match plan.chunk(self, q, c, order, scratch) {
                            // More key combinations than the fast path's slots: this chunk
                            // row by row instead.
                            Err(e) if is_too_many_groups(&e) => self
                                .reference_chunk(q, &cols, c, scratch)
                                .map(Partial::Rows),
                            r => r,
                        },
                        _ => self
                            .reference_chunk(q, &cols, c, scratch)
                            .map(Partial::Rows),
                    }
                })
                .collect::<Result<Vec<Partial>>>()?;
            match &mut merger {
                Some(m) => m.add(q, first, &partials).map_err(|e| match range {
                    Some(r) => e
                        .at_column(&self.file.columns()[r.column].name)
                        .in_file(self.file.path()),
                    None => e,
                })?,
                None => {
                    for p in partials {
                        if let Partial::Rows(g) = p {
                            rows.merge(g, naggs);
                        }
                    }
                }
            }
            first = end;
        }
        let mut all = match merger {
            Some(m) => m.finish(q, by_key)?,
            None => rows.results(q),
        };
        if q.keys.is_empty() && all.is_empty() {
            let mut one = Groups::default();
            one.slot(Vec::new(), naggs);
            all = one.results(q);
        }
        let mut rows = Vec::with_capacity(all.len());
        for (key, aggs) in &all {
            let row = AggRow { aggs, keys: key };
            if let Some(h) = &q.having
                && expr::eval(h, &row)? != Value::Bool(true)
            {
                continue;
            }
            rows.push(
                q.output
                    .iter()
                    .map(|o| expr::eval(&o.expr, &row))
                    .collect::<Result<Vec<_>>>()?,
            );
        }
        Ok(rows)
    }

    /// The range of values of the query's only GROUP BY key when it is an integral column
    /// without nulls whose zone maps bound it to at most [`DIRECT_SPAN`] values (and at most
    /// twice the table's rows, or 2^16).
    fn key_range(&self, q: &Query) -> Option<KeyRange> {
        let [Expr::Column { index, ty }] = q.keys.as_slice() else {
            return None;
        };
        if !ty.is_integral() || *ty == SqlType::Bool {
            return None;
        }
        let (mut lo, mut hi, mut rows) = (i128::MAX, i128::MIN, 0u64);
        for c in 0..self.file.num_chunks() {
            let m = self.file.try_chunk_meta(*index, c).ok()?;
            let (Some(Scalar::Int(a)), Some(Scalar::Int(b))) = (&m.stats.min, &m.stats.max) else {
                return None;
            };
            if m.stats.null_count > 0 {
                return None;
            }
            (lo, hi) = (lo.min(*a), hi.max(*b));
            rows += u64::from(m.rows);
        }
        // The range's end, one past its last value, is an i64 too.
        i64::try_from(hi.checked_add(1)?).ok()?;
        let len = usize::try_from(hi.checked_sub(lo)?.checked_add(1)?).ok()?;
        let most = DIRECT_SPAN.min(usize::try_from(2 * rows).ok()?.max(1 << 16));
        (len <= most).then_some(KeyRange {
            column: *index,
            lo: i64::try_from(lo).ok()?,
            len,
            ty: *ty,
        })
    }

    fn reference_chunk(
        &self,
        q: &Query,
        cols: &[usize],
        c: usize,
        scratch: &mut Scratch,
    ) -> Result<Groups> {
        let chunk = self.decode_chunk(cols, c, scratch)?;
        let rows = self.file.try_chunk_meta(0, c)?.rows as usize;
        let naggs = q.aggregates.len();
        let mut groups = Groups::default();
        for i in 0..rows {
            let row = ChunkRow { chunk: &chunk, i };
            if let Some(p) = &q.filter
                && expr::eval(p, &row)? != Value::Bool(true)
            {
                continue;
            }
            let key = q
                .keys
                .iter()
                .map(|k| expr::eval(k, &row))
                .collect::<Result<Vec<_>>>()?;
            let g = groups.slot(key, naggs);
            for (a, acc) in q.aggregates.iter().zip(&mut groups.accs[g]) {
                match &a.arg {
                    None => acc.count += 1,
                    Some(e) if a.distinct => acc.add_distinct(expr::eval(e, &row)?),
                    Some(e) => acc.add(&expr::eval(e, &row)?),
                }
            }
        }
        Ok(groups)
    }
}

struct AggRow<'a> {
    aggs: &'a [Value],
    keys: &'a [Value],
}

impl Row for AggRow<'_> {
    fn column(&self, _: usize) -> Value {
        Value::Null
    }
    fn agg(&self, i: usize) -> Value {
        self.aggs.get(i).cloned().unwrap_or(Value::Null)
    }
    fn key(&self, i: usize) -> Value {
        self.keys.get(i).cloned().unwrap_or(Value::Null)
    }
}

// ---------------------------------------------------------------------------------------------
// The fast path

/// A conjunct on one column that encodings can evaluate.
#[derive(Debug, Clone)]
enum ColPred {
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
enum StrTest {
    /// Equality with one of these.
    In(Vec<Vec<u8>>),
    /// A `LIKE` pattern.
    Like(crate::like::LikePattern),
}

impl StrTest {
    fn matches(&self, v: &[u8]) -> bool {
        match self {
            StrTest::In(set) => set.iter().any(|x| x.as_slice() == v),
            StrTest::Like(p) => p.matches(v),
        }
    }
}

/// The fast plan of a query: its conjuncts split into column predicates and the rest.
struct FastPlan {
    preds: Vec<ColPred>,
    rest: Vec<Expr>,
    /// Whether the groups' first-seen order matters (ORDER BY does not name every key).
    first_seen: bool,
}

fn conjuncts(e: &Expr, out: &mut Vec<Expr>) {
    match e {
        Expr::And(v) => v.iter().for_each(|x| conjuncts(x, out)),
        x => out.push(x.clone()),
    }
}

/// `col * 10^k` when `e` is a column or an exact upscaling cast of one.
fn scaled_column(e: &Expr) -> Option<(usize, SqlType, u8)> {
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

fn lit_i128(v: &Value) -> Option<i128> {
    match v {
        Value::Int(x) => Some(i128::from(*x)),
        Value::Decimal(x, _) => Some(*x),
        Value::Date(d) => Some(i128::from(*d)),
        _ => None,
    }
}

/// `col * m OP lit` as a closed range on `col`; `None` when it is not a range.
fn range_of(op: CmpOp, m: i128, lit: i128) -> Option<(i128, i128)> {
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

fn col_pred(e: &Expr) -> Option<ColPred> {
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
fn fast_expr(e: &Expr) -> bool {
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
fn interval(e: &Expr, stats: &dyn Fn(usize) -> Option<(i128, i128)>) -> Option<(i128, i128)> {
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
fn no_overflow(e: &Expr, stats: &dyn Fn(usize) -> Option<(i128, i128)>) -> bool {
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

impl FastPlan {
    /// The fast plan, or `None` when some part of the query needs the reference path.
    fn new(table: &Table, q: &Query) -> Result<Option<FastPlan>> {
        let mut parts = Vec::new();
        if let Some(f) = &q.filter {
            conjuncts(f, &mut parts);
        }
        let mut preds = Vec::new();
        let mut rest = Vec::new();
        for p in parts {
            match col_pred(&p) {
                Some(cp) => preds.push(cp),
                None if fast_expr(&p) => rest.push(p),
                None => return Ok(None),
            }
        }
        // Keys: columns, or integral expressions of the block path (evaluated per block).
        for k in &q.keys {
            let expr_key = fast_expr(k) && k.ty().is_integral();
            if !matches!(k, Expr::Column { .. }) && !expr_key {
                return Ok(None);
            }
        }
        for a in &q.aggregates {
            if a.distinct {
                return Ok(None);
            }
            if let Some(e) = &a.arg {
                let string_count = a.func == AggFunc::Count && matches!(e, Expr::Column { .. });
                if !string_count && !fast_expr(e) {
                    return Ok(None);
                }
            }
        }
        let _ = table;
        // Whether ORDER BY names every key: then no two groups tie and it alone decides
        // their order, so the chunks need not find where each group is first seen.
        let keys_sorted = (0..q.keys.len()).all(|k| {
            q.order_by.iter().any(|&(o, _)| {
                matches!(q.output.get(o).map(|c| &c.expr), Some(Expr::KeyRef(i, _)) if *i == k)
            })
        });
        Ok(Some(FastPlan {
            preds,
            rest,
            first_seen: !keys_sorted,
        }))
    }

    /// Applies the non-column conjuncts to `mask` (block `ev.b`, `ev.n` rows) and selects the
    /// rows that pass: as positions in `ev.idx` when few pass (`ev.sparse`), else as the mask.
    /// Returns how many pass, or `None` when none does.
    fn mask_rows(&self, ev: &mut BlockEval<'_, '_>, mask: &mut [u8]) -> Result<Option<usize>> {
        let n = ev.n;
        ev.sparse = false;
        for e in &self.rest {
            let m = ev.eval_bool(e)?;
            for (x, &y) in mask[..n].iter_mut().zip(&m) {
                *x &= y;
            }
        }
        let hits = mask[..n].iter().map(|&m| u32::from(m)).sum::<u32>() as usize;
        if hits == 0 {
            return Ok(None);
        }
        // Few hits: gather just those rows. Many: decode whole blocks and send the rows
        // that failed the filter to the trash slot.
        ev.sparse = hits * 4 < n;
        ev.idx.clear();
        if ev.sparse {
            // Eight mask bytes at a time, skipping empty words.
            let mut words = mask[..n].chunks_exact(8);
            for (w, bytes) in (&mut words).enumerate() {
                let mut word = u64::from_le_bytes(bytes.try_into().unwrap_or([0; 8]));
                while word != 0 {
                    ev.idx.push(w * 8 + (word.trailing_zeros() / 8) as usize);
                    word &= word - 1;
                }
            }
            let base = n - words.remainder().len();
            for (i, &m) in words.remainder().iter().enumerate() {
                if m != 0 {
                    ev.idx.push(base + i);
                }
            }
        }
        Ok(Some(hits))
    }

    /// One chunk's groups, a single integral key's slots numbered as `order` asks.
    fn chunk(
        &self,
        table: &Table,
        q: &Query,
        c: usize,
        order: SlotOrder,
        scratch: &mut Scratch,
    ) -> Result<Partial> {
        let file = &table.file;
        let rows = file.try_chunk_meta(0, c)?.rows as usize;
        let stats = |col: usize| -> Option<(i128, i128)> {
            let s = &file.chunk_meta(col, c).stats;
            match (&s.min, &s.max) {
                (Some(Scalar::Int(a)), Some(Scalar::Int(b))) => Some((*a, *b)),
                _ => None,
            }
        };
        // Zone maps: skip the chunk, or drop conjuncts that hold for all of it.
        let mut preds = Vec::new();
        for p in &self.preds {
            if let ColPred::Range { col, lo, hi } = p {
                if lo > hi {
                    return Ok(Partial::Rows(Groups::default()));
                }
                if let Some((a, b)) = stats(*col) {
                    if b < i128::from(*lo) || a > i128::from(*hi) {
                        return Ok(Partial::Rows(Groups::default()));
                    }
                    if a >= i128::from(*lo) && b <= i128::from(*hi) {
                        continue;
                    }
                }
            }
            preds.push(p.clone());
        }
        // Columns, opened lazily in encoded form.
        let mut needed = Vec::new();
        for p in &preds {
            let (ColPred::Range { col, .. }
            | ColPred::Set { col, .. }
            | ColPred::Strings { col, .. }) = p;
            if !needed.contains(col) {
                needed.push(*col);
            }
        }
        for e in &self.rest {
            e.columns(&mut needed);
        }
        for a in &q.aggregates {
            if let Some(e) = &a.arg {
                e.columns(&mut needed);
            }
        }
        for k in &q.keys {
            k.columns(&mut needed);
        }
        let mut columns: HashMap<usize, ChunkColumn<'_>> = HashMap::new();
        for &col in &needed {
            let (payload, meta) = file.chunk_payload(col, c)?;
            let bytes = payload
                .get(..meta.values_len as usize)
                .ok_or_else(|| Error::corrupt("values tree past the payload"))?;
            let node = NodeView::parse(bytes)?;
            let ptype = file.columns()[col].column_type.ptype();
            if node.ptype != ptype || node.len != rows {
                return Err(Error::corrupt(format!(
                    "values tree holds {} {} values, the index says {rows} {ptype} values",
                    node.len, node.ptype
                ))
                .at_column(&file.columns()[col].name)
                .at_chunk(c as u32)
                .in_file(file.path()));
            }
            let cc = ChunkColumn::new(&node, scratch).map_err(|e| {
                e.at_column(&file.columns()[col].name)
                    .at_chunk(c as u32)
                    .in_file(file.path())
            })?;
            columns.insert(col, cc);
        }
        // Overflow: checked arithmetic unless the zone maps prove every value fits.
        let checked = self.rest.iter().any(|e| !no_overflow(e, &stats))
            || q.aggregates
                .iter()
                .any(|a| a.arg.as_ref().is_some_and(|e| !no_overflow(e, &stats)));
        // Dictionary chunks evaluate their predicates on the dictionary, once per chunk.
        let mut tables: Vec<Option<Vec<u8>>> = Vec::with_capacity(preds.len());
        for p in &preds {
            tables.push(match p {
                ColPred::Range { col, lo, hi } => {
                    let (lo, hi) = (*lo, *hi);
                    columns
                        .get(col)
                        .and_then(|c| c.code_table(&|x| x >= lo && x <= hi))
                }
                ColPred::Set { col, set, negated } => {
                    let neg = *negated;
                    columns
                        .get(col)
                        .and_then(|c| c.code_table(&|x| set.contains(&x) != neg))
                }
                ColPred::Strings { .. } => None,
            });
        }
        // String predicates are evaluated once per chunk.
        let mut string_masks: Vec<Option<Vec<u8>>> = Vec::with_capacity(preds.len());
        for p in &preds {
            string_masks.push(match p {
                ColPred::Strings { col, test, negated } => {
                    let s = columns
                        .get(col)
                        .and_then(ChunkColumn::strings)
                        .ok_or_else(|| Error::corrupt("string predicate on a non-string chunk"))?;
                    Some(match s {
                        StrView::Plain(s) => string_mask(s, test, *negated),
                        StrView::Dict(codes, dict) => {
                            // Evaluate on the dictionary, then map the codes.
                            let table = string_mask(dict, test, *negated);
                            codes
                                .iter()
                                .map(|&c| {
                                    table.get(c as usize).copied().ok_or_else(|| {
                                        Error::corrupt("string code past the dictionary")
                                    })
                                })
                                .collect::<Result<Vec<u8>>>()?
                        }
                    })
                }
                _ => None,
            });
        }
        // Dense group ids for the chunk.
        let (gids, slot_keys) = group_ids(table, q, &columns, rows, c, order, scratch)?;
        let nslots = slot_keys.len().max(1);
        // Four interleaved copies of the per-slot partial sums keep neighbouring rows of one
        // group from waiting on each other's store; with a thousand slots or more such
        // neighbours are rare, and one copy touches a quarter of the memory.
        let copies = if nslots >= 1024 { 1 } else { 4 };
        // Slot `nslots` takes the rows a dense block filtered out.
        let trash = nslots;
        let shared = shared_accs(q);
        let mut dense: Vec<DenseAcc> = q
            .aggregates
            .iter()
            .enumerate()
            .map(|(i, a)| {
                let float = a.arg.as_ref().is_some_and(|e| e.ty() == SqlType::Float);
                // Partial sums in i64 stay exact while they hold fewer than 2^62 / m values
                // of magnitude below m: folded that many blocks apart (once a chunk for the
                // usual columns), and not used for values of 2^52 or more.
                let fold = a
                    .arg
                    .as_ref()
                    .filter(|_| !float)
                    .and_then(|e| interval(e, &stats))
                    .map(|(lo, hi)| lo.unsigned_abs().max(hi.unsigned_abs()).max(1))
                    .filter(|&m| m < 1u128 << 52)
                    .map_or(0, |m| {
                        ((1u128 << 62) / (m * BLOCK as u128)).min(u64::MAX as u128) as u64
                    });
                // Aggregates that read an earlier one's accumulator keep only counts.
                let func = if shared[i] == i {
                    a.func
                } else {
                    AggFunc::Count
                };
                DenseAcc::new(nslots + 1, func, float, fold, copies)
            })
            .collect();
        let mut selected = vec![0i64; nslots + 1];
        // The groups' first-seen order (when it matters) is that of their first rows that
        // pass the WHERE. Slots numbered in first-seen order give it without a WHERE, and
        // so do slots in key order with their first rows; otherwise each slot's first kept
        // row is found here, while some slot has not shown one.
        let filtered = !preds.is_empty() || !self.rest.is_empty();
        let known = slot_keys.first_seen || !slot_keys.first_row.is_empty();
        let mut first_kept: Vec<u32> = if self.first_seen && gids.is_some() && (filtered || !known)
        {
            let mut f = vec![u32::MAX; nslots + 1];
            // The trash slot never counts as unseen.
            f[nslots] = 0;
            f
        } else {
            Vec::new()
        };
        let mut unseen = nslots;
        let mut selected4 = vec![0i64; copies * (nslots + 1)];
        let mut ev = BlockEval {
            columns: &columns,
            checked,
            idx: Vec::with_capacity(BLOCK),
            sparse: false,
            b: 0,
            n: 0,
            pool: Vec::new(),
            date_memo: HashMap::new(),
        };
        // When every column predicate is a range in its chunk's packed domain, blocks are
        // filtered into a bitmask, the most selective predicate first.
        let mut packed_preds: Option<Vec<(&ChunkColumn<'_>, PackedRange)>> = (!preds.is_empty())
            .then(|| {
                preds
                    .iter()
                    .zip(&tables)
                    .map(|(p, t)| match p {
                        ColPred::Range { col, lo, hi } => columns.get(col).and_then(|cc| {
                            cc.packed_range(*lo, *hi, t.as_deref()).map(|r| (cc, r))
                        }),
                        _ => None,
                    })
                    .collect::<Option<Vec<_>>>()
            })
            .flatten();
        if let Some(pp) = &mut packed_preds {
            pp.sort_by(|a, b| a.1.selectivity.total_cmp(&b.1.selectivity));
        }
        let mut mask = vec![0u8; BLOCK];
        let mut tmp = Block::Ints(Vec::with_capacity(BLOCK));
        let mut sel_g: Vec<u32> = Vec::with_capacity(BLOCK);
        for b in 0..rows.div_ceil(BLOCK) {
            let start = b * BLOCK;
            let n = BLOCK.min(rows - start);
            ev.b = b;
            ev.n = n;
            ev.sparse = false;
            ev.idx.clear();
            // Rows that pass, when the bitmask path already found them.
            let mut direct = None;
            if let Some(pp) = &packed_preds {
                let mut bits = [u64::MAX; 16];
                for (cc, r) in pp {
                    cc.range_bits(b, n, r, &mut bits)?;
                    if bits.iter().all(|&w| w == 0) {
                        break;
                    }
                }
                let h = bits.iter().map(|w| w.count_ones()).sum::<u32>() as usize;
                if h == 0 {
                    continue;
                }
                if self.rest.is_empty() && h * 4 < n {
                    for (w, &word) in bits.iter().enumerate() {
                        let mut word = word;
                        while word != 0 {
                            ev.idx.push(w * 64 + word.trailing_zeros() as usize);
                            word &= word - 1;
                        }
                    }
                    ev.sparse = true;
                    direct = Some(h);
                } else {
                    bits_to_mask(&bits, n, &mut mask);
                }
            } else {
                mask[..n].fill(1);
            }
            let mut any = true;
            let byte_preds = if packed_preds.is_some() {
                &[][..]
            } else {
                &preds[..]
            };
            for ((p, sm), table) in byte_preds.iter().zip(&string_masks).zip(&tables) {
                let table = table.as_deref();
                let col = match p {
                    ColPred::Range { col, .. }
                    | ColPred::Set { col, .. }
                    | ColPred::Strings { col, .. } => *col,
                };
                match (p, sm) {
                    (_, Some(sm)) => {
                        for (m, &s) in mask[..n].iter_mut().zip(&sm[start..start + n]) {
                            *m &= s;
                        }
                    }
                    (ColPred::Range { lo, hi, .. }, None) => {
                        let (lo, hi) = (*lo, *hi);
                        let cc = columns
                            .get(&col)
                            .ok_or_else(|| Error::invalid("column not open"))?;
                        let p = Predicate {
                            range: Some((lo, hi)),
                            pred: &|x| x >= lo && x <= hi,
                            table,
                        };
                        cc.filter(b, n, &p, &mut mask, &mut tmp)?;
                    }
                    (ColPred::Set { set, negated, .. }, None) => {
                        let cc = columns
                            .get(&col)
                            .ok_or_else(|| Error::invalid("column not open"))?;
                        let neg = *negated;
                        let p = Predicate {
                            range: None,
                            pred: &|x| set.contains(&x) != neg,
                            table,
                        };
                        cc.filter(b, n, &p, &mut mask, &mut tmp)?;
                    }
                    (ColPred::Strings { .. }, None) => {}
                }
                any = mask[..n].iter().fold(0u8, |a, &m| a | m) != 0;
                if !any {
                    break;
                }
            }
            if !any {
                continue;
            }
            let hits = match direct {
                Some(h) => h,
                None => {
                    let Some(h) = self.mask_rows(&mut ev, &mut mask)? else {
                        continue;
                    };
                    h
                }
            };
            sel_g.clear();
            let k = ev.len();
            if let Some(g) = &gids {
                let g = &g[start..start + n];
                if ev.sparse {
                    sel_g.extend(ev.idx.iter().map(|&i| g[i]));
                } else {
                    let t = trash as u32;
                    sel_g.extend(
                        g.iter()
                            .zip(&mask[..n])
                            .map(|(&g, &m)| if m != 0 { g } else { t }),
                    );
                }
            } else if hits < n && !ev.sparse {
                let t = trash as u32;
                sel_g.extend(mask[..n].iter().map(|&m| if m != 0 { 0 } else { t }));
            } else {
                sel_g.resize(k, 0);
            }
            if unseen > 0 && !first_kept.is_empty() {
                // Rows in order: a slot's first sight is its first kept row.
                let mut keep = |row: usize, g: u32| {
                    let f = &mut first_kept[g as usize];
                    if *f == u32::MAX {
                        *f = row as u32;
                        unseen -= 1;
                    }
                };
                if ev.sparse {
                    for (&i, &g) in ev.idx.iter().zip(&sel_g) {
                        keep(start + i, g);
                    }
                } else {
                    for (j, &g) in sel_g.iter().enumerate() {
                        keep(start + j, g);
                    }
                }
            }
            // Without group keys, slots are 0 (kept) and `trash`.
            let uniform = gids.is_none() && sel_g.len() == k && (ev.sparse || hits == n);
            if uniform {
                selected[0] += k as i64;
            } else {
                let stride = if copies > 1 { selected.len() } else { 0 };
                kernels::scatter(&mut selected4, stride, &ONES[..sel_g.len()], &sel_g);
            }
            for (i, (a, d)) in q.aggregates.iter().zip(&mut dense).enumerate() {
                let Some(e) = &a.arg else { continue };
                if a.func == AggFunc::Count || shared[i] != i {
                    continue;
                }
                let v = ev.eval(e)?;
                match &v {
                    Block::Ints(x) => d.add_ints(x, &sel_g, uniform, gids.is_none()),
                    Block::Floats(x) => d.add_floats(x, &sel_g, uniform),
                }
                ev.give(v);
            }
        }
        for k in 0..copies {
            for (s, c) in selected.iter_mut().zip(&selected4[k * (nslots + 1)..]) {
                *s += c;
            }
        }
        for d in &mut dense {
            d.finish(&selected);
        }
        let mut seen: Vec<u32> = (0..slot_keys.len() as u32)
            .filter(|&s| selected[s as usize] > 0)
            .collect();
        let mut slot_keys = slot_keys;
        if !first_kept.is_empty() {
            if slot_keys.first_row.is_empty() {
                // Slots in first-seen order: the kept ones in the order of their first kept
                // rows (the merge reads a slot's place in `seen`).
                seen.sort_by_key(|&s| first_kept[s as usize]);
            } else {
                first_kept.truncate(slot_keys.first_row.len());
                slot_keys.first_row = first_kept;
            }
        }
        Ok(Partial::Dense(DenseGroups {
            keys: slot_keys,
            seen,
            dense,
        }))
    }
}

/// Whether each row's string passes `test` (or fails it, `negated`), for every row of a
/// chunk: each run of equal strings is decided once.
fn string_mask(s: &ByteStrings, test: &StrTest, negated: bool) -> Vec<u8> {
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

/// The key tuples of a chunk's group slots, `width` values each, in one vector.
#[derive(Debug)]
struct SlotKeys {
    width: usize,
    count: usize,
    values: Vec<Value>,
    /// With one integral key: each slot's key as stored (else empty). Then `values` is empty
    /// when the slots are in key order (`first_row` set): only the merge by value reads them.
    ints: Vec<i64>,
    /// When the slots are not in first-seen order (they are in key order): each slot's
    /// first row (else empty).
    first_row: Vec<u32>,
    /// Whether the slots are numbered in the order the chunk's rows first show them (not so
    /// for dictionary codes, several keys, or slots in key order).
    first_seen: bool,
}

impl SlotKeys {
    fn len(&self) -> usize {
        self.count
    }

    fn get(&self, s: usize) -> &[Value] {
        self.values
            .get(s * self.width..(s + 1) * self.width)
            .unwrap_or(&[])
    }
}

/// Per-row dense group ids of a chunk and the key values of each id; `None` without keys.
#[allow(clippy::type_complexity)]
fn group_ids(
    table: &Table,
    q: &Query,
    columns: &HashMap<usize, ChunkColumn<'_>>,
    rows: usize,
    c: usize,
    order: SlotOrder,
    scratch: &mut Scratch,
) -> Result<(Option<Vec<u32>>, SlotKeys)> {
    let mut keys = SlotKeys {
        width: 0,
        count: 1,
        values: Vec::new(),
        ints: Vec::new(),
        first_row: Vec::new(),
        first_seen: q.keys.len() == 1,
    };
    // One integral key: its ids are the slots, its values kept as integers too (and their
    // order, when known) for the merge.
    let one = |keys: &mut SlotKeys, ids: IntIds| -> Result<Vec<u32>> {
        if ids.ids.len() != rows {
            return Err(Error::corrupt("group key column length differs"));
        }
        if ids.values.len() > 1 << 20 {
            return Err(too_many_groups());
        }
        keys.width = 1;
        keys.count = ids.values.len();
        keys.values = ids.distinct;
        keys.ints = ids.values;
        keys.first_seen = ids.first_row.is_empty();
        keys.first_row = ids.first_row;
        Ok(ids.ids)
    };
    if q.keys.is_empty() {
        return Ok((None, keys));
    }
    let mut gids = vec![0u32; rows];
    for k in &q.keys {
        let Expr::Column { index, ty } = k else {
            let order = if q.keys.len() == 1 {
                order
            } else {
                SlotOrder::FirstSeen
            };
            let ids = int_ids(&IntVec::I64(key_values(k, columns, rows)?), k.ty(), order)?;
            if q.keys.len() == 1 {
                return Ok((Some(one(&mut keys, ids)?), keys));
            }
            combine(&mut gids, &mut keys, ids.ids, ids.distinct)?;
            continue;
        };
        let (ids, distinct) = match columns.get(index).and_then(ChunkColumn::strings) {
            Some(StrView::Plain(s)) => string_ids(s)?,
            Some(StrView::Dict(codes, dict)) => {
                // The codes are the group ids (in the dictionary's order); the dictionary
                // gives their values.
                keys.first_seen = false;
                if codes.iter().any(|&c| c as usize >= dict.len()) {
                    return Err(Error::corrupt("string code past the dictionary"));
                }
                let distinct = (0..dict.len())
                    .map(|i| {
                        Value::Str(String::from_utf8_lossy(dict.get(i).unwrap_or(&[])).into_owned())
                    })
                    .collect();
                (codes.to_vec(), distinct)
            }
            None => {
                let (v, _) = table.file.read_chunk(*index, c, scratch)?;
                let r = match &v {
                    Values::Int(x) if q.keys.len() == 1 => {
                        let ids = int_ids(x, *ty, order);
                        scratch.give(v);
                        return Ok((Some(one(&mut keys, ids?)?), keys));
                    }
                    Values::Int(x) => {
                        let ids = int_ids(x, *ty, SlotOrder::FirstSeen)?;
                        (ids.ids, ids.distinct)
                    }
                    Values::F32(x) => float_ids(x.iter().map(|&f| f64::from(f))),
                    Values::F64(x) => float_ids(x.iter().copied()),
                    Values::Bytes(s) => string_ids(s)?,
                };
                scratch.give(v);
                r
            }
        };
        combine(&mut gids, &mut keys, ids, distinct)?;
    }
    Ok((Some(gids), keys))
}

/// What [`too_many_groups`] says.
const TOO_MANY_GROUPS: &str = "GROUP BY with more than 2^20 key combinations in one chunk (keys must have few distinct values)";

/// Whether `e` is [`too_many_groups`]'s error (the chunk then runs on the reference path).
fn is_too_many_groups(e: &Error) -> bool {
    matches!(e, Error::Unsupported { what, .. } if what == TOO_MANY_GROUPS)
}

fn too_many_groups() -> Error {
    Error::unsupported(TOO_MANY_GROUPS)
}

/// Adds one key's per-row ids and distinct values to the chunk's group ids and key tuples:
/// the new key varies slowest.
fn combine(
    gids: &mut [u32],
    keys: &mut SlotKeys,
    ids: Vec<u32>,
    distinct: Vec<Value>,
) -> Result<()> {
    if ids.len() != gids.len() {
        return Err(Error::corrupt("group key column length differs"));
    }
    let card = distinct.len().max(1);
    let total = keys.count * card;
    if total > 1 << 20 {
        return Err(too_many_groups());
    }
    let stride = keys.count as u32;
    for (g, &id) in gids.iter_mut().zip(&ids) {
        *g += id * stride;
    }
    let mut next = Vec::with_capacity(distinct.len() * keys.count * (keys.width + 1));
    for d in &distinct {
        for k in 0..keys.count {
            next.extend_from_slice(keys.get(k));
            next.push(d.clone());
        }
    }
    keys.width += 1;
    keys.count *= distinct.len();
    keys.values = next;
    Ok(())
}

/// The values of an integral key expression of the block path over a chunk's `rows` rows,
/// block by block (checked arithmetic).
fn key_values(
    k: &Expr,
    columns: &HashMap<usize, ChunkColumn<'_>>,
    rows: usize,
) -> Result<Vec<i64>> {
    let mut ev = BlockEval {
        columns,
        checked: true,
        idx: Vec::new(),
        sparse: false,
        b: 0,
        n: 0,
        pool: Vec::new(),
        date_memo: HashMap::new(),
    };
    let mut out = Vec::with_capacity(rows);
    for b in 0..rows.div_ceil(BLOCK) {
        ev.b = b;
        ev.n = BLOCK.min(rows - b * BLOCK);
        let v = ev.eval_i(k)?;
        out.extend_from_slice(&v);
        ev.pool.push(v);
    }
    Ok(out)
}

fn string_ids(s: &ByteStrings) -> Result<(Vec<u32>, Vec<Value>)> {
    let n = s.len();
    let mut ids = Vec::with_capacity(n);
    let mut distinct: Vec<Value> = Vec::new();
    let str_of = |b: &[u8]| Value::Str(String::from_utf8_lossy(b).into_owned());
    let one_byte = s.data.len() == n
        && s.offsets.first() == Some(&0)
        && s.offsets.windows(2).all(|w| w[1] == w[0] + 1);
    if one_byte {
        let mut table = [u32::MAX; 256];
        for &b in &s.data {
            let t = &mut table[usize::from(b)];
            if *t == u32::MAX {
                *t = distinct.len() as u32;
                distinct.push(str_of(&[b]));
            }
            ids.push(*t);
        }
        return Ok((ids, distinct));
    }
    let mut map: HashMap<&[u8], u32> = HashMap::new();
    for i in 0..n {
        let v = s.get(i).ok_or_else(|| Error::corrupt("string offsets"))?;
        let next = map.len() as u32;
        let id = *map.entry(v).or_insert_with(|| {
            distinct.push(str_of(v));
            next
        });
        ids.push(id);
    }
    Ok((ids, distinct))
}

/// How a chunk numbers the group slots of a single integral key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SlotOrder {
    /// In first-seen order (the merge finds groups by hashing their keys).
    FirstSeen,
    /// In ascending key order where a table finds them (for a merge by key value), each
    /// slot with its first row, from which the merge restores first-seen order.
    Keys,
    /// As `Keys`, for a scan whose groups come out in key order, so that no first rows are
    /// needed: a chunk whose keys are dense in a short range numbers its slots by value.
    KeysOnly,
}

/// An integral key's per-row ids (in first-seen order, or in ascending order of their
/// values), and each id's value (as stored, and as a [`Value`] unless the ids are in the
/// values' order).
struct IntIds {
    ids: Vec<u32>,
    distinct: Vec<Value>,
    values: Vec<i64>,
    /// Ids in ascending order of their values: each one's first row, or with
    /// [`SlotOrder::KeysOnly`] any increasing numbers (else empty).
    first_row: Vec<u32>,
}

/// Ids of an integral key's values, numbered as `order` asks where a table finds them (and
/// otherwise in first-seen order).
fn int_ids(v: &IntVec, ty: SqlType, order: SlotOrder) -> Result<IntIds> {
    let x = ints_to_i64(v)?;
    let mut distinct = Vec::new();
    let mut values = Vec::new();
    // Values within a short range (days of a few years, keys of a few rows each): ids from
    // a table indexed by the value less the least one, in first-seen order as with the map
    // below, or (`ordered`) the values' ranks read off the table.
    // One pass for both ends (vectorised), none when empty.
    let ends = x
        .first()
        .map(|&f| x.iter().fold((f, f), |(lo, hi), &v| (lo.min(v), hi.max(v))));
    if let Some((lo, hi)) = ends
        && (hi as i128 - lo as i128) < (1i128 << 16).max(4 * x.len() as i128).min(1 << 24)
    {
        let span = (hi - lo) as usize + 1;
        if order == SlotOrder::KeysOnly && span <= x.len() / 4 && span <= 1 << 20 {
            // At least four rows a value on average: the slots are the values less the
            // least one (some may keep no rows), one pass, no table. First rows are not
            // needed; the slot numbers stand in for them.
            return Ok(IntIds {
                ids: x.iter().map(|&v| (v - lo) as u32).collect(),
                distinct,
                values: (lo..=hi).collect(),
                first_row: (0..span as u32).collect(),
            });
        }
        let mut table = vec![u32::MAX; span];
        if order != SlotOrder::FirstSeen && u32::try_from(x.len()).is_ok() {
            // Each value's first row (the least row index: no branch to mispredict at each
            // value's first sight), then the values' ranks for ids.
            for (i, &v) in x.iter().enumerate() {
                let t = &mut table[(v - lo) as usize];
                *t = (*t).min(i as u32);
            }
            // Only the merge by value reads these slots' keys: as integers, no values made.
            let mut first_row = Vec::new();
            for (off, t) in table.iter_mut().enumerate() {
                if *t != u32::MAX {
                    first_row.push(*t);
                    *t = values.len() as u32;
                    values.push(lo + off as i64);
                }
            }
            let ids = x.iter().map(|&v| table[(v - lo) as usize]).collect();
            return Ok(IntIds {
                ids,
                distinct,
                values,
                first_row,
            });
        }
        let ids = x
            .iter()
            .map(|&v| {
                let t = &mut table[(v - lo) as usize];
                if *t == u32::MAX {
                    *t = distinct.len() as u32;
                    distinct.push(make_integral(i128::from(v), ty).unwrap_or(Value::Null));
                    values.push(v);
                }
                *t
            })
            .collect();
        return Ok(IntIds {
            ids,
            distinct,
            values,
            first_row: Vec::new(),
        });
    }
    let mut map: FxHashMap<i64, u32> = FxHashMap::default();
    let mut ids = Vec::with_capacity(x.len());
    for &v in &x {
        let next = map.len() as u32;
        let id = *map.entry(v).or_insert_with(|| {
            distinct.push(make_integral(i128::from(v), ty).unwrap_or(Value::Null));
            values.push(v);
            next
        });
        ids.push(id);
    }
    Ok(IntIds {
        ids,
        distinct,
        values,
        first_row: Vec::new(),
    })
}

fn float_ids(x: impl Iterator<Item = f64>) -> (Vec<u32>, Vec<Value>) {
    let mut map: HashMap<u64, u32> = HashMap::new();
    let mut distinct = Vec::new();
    let ids = x
        .map(|f| {
            let next = map.len() as u32;
            *map.entry(f.to_bits()).or_insert_with(|| {
                distinct.push(Value::Float(f));
                next
            })
        })
        .collect();
    (ids, distinct)
}

/// Accumulators of one aggregate for every group slot of a chunk (or, merged, of the scan):
/// only the fields its function reads are kept, the others stay empty.
#[derive(Debug, Clone)]
struct DenseAcc {
    func: AggFunc,
    /// Whether the argument is a float (sums, minima and maxima in `f64`).
    float: bool,
    /// Rows per slot (set at the end of the chunk: no nulls on the fast path, so every
    /// aggregate of a slot sees the same rows).
    count: Vec<i64>,
    sum_i: Vec<i128>,
    /// Partial sums in i64, four interleaved copies of the slots, or one copy where slots
    /// are many (see `fold`).
    part: Vec<i64>,
    /// Blocks whose values the partial sums take before they are folded into `sum_i`
    /// without overflow; 0 when the values are not known to be small enough.
    fold: u64,
    /// Blocks added to the partial sums since the last fold.
    pending: u64,
    sum_f: Vec<f64>,
    min_i: Vec<i64>,
    max_i: Vec<i64>,
    min_f: Vec<f64>,
    max_f: Vec<f64>,
    /// Float slots that have a min/max yet.
    has_f: Vec<bool>,
    /// Values, running mean and sum of squared deviations per slot (the variances, in row
    /// order as on the reference path, so that results match it bit for bit).
    wn: Vec<i64>,
    mean: Vec<f64>,
    m2: Vec<f64>,
}

impl DenseAcc {
    /// Accumulators of `n` slots for `func` (over floats or not); `fold` as the field, with
    /// `copies` (1 or 4) interleaved copies of the partial sums.
    fn new(n: usize, func: AggFunc, float: bool, fold: u64, copies: usize) -> DenseAcc {
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
    fn fold_parts(&mut self) {
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
    fn finish(&mut self, selected: &[i64]) {
        self.count.clone_from_slice(selected);
        if self.pending > 0 {
            self.fold_parts();
        }
    }

    /// Adds values to the running variances of their slots, in row order.
    fn add_moments(&mut self, x: impl Iterator<Item = f64>, slots: &[u32], uniform: bool) {
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
    fn add_ints(&mut self, x: &[i64], slots: &[u32], uniform: bool, two: bool) {
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
    fn add_floats(&mut self, x: &[f64], slots: &[u32], uniform: bool) {
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
    fn of_acc(func: AggFunc, float: bool, a: &Acc) -> DenseAcc {
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
    fn push_slot(&mut self, o: &DenseAcc, s: usize) {
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
    fn set_slot(&mut self, g: usize, o: &DenseAcc, s: usize) {
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
    fn merge_pairs(&mut self, o: &DenseAcc, pairs: &[(u32, u32)], fresh: &[bool]) {
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
    fn merge_slot(&mut self, g: usize, o: &DenseAcc, s: usize) {
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

    fn to_acc(&self, s: usize, ty: Option<SqlType>) -> Acc {
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

/// A block of ones, for counting rows per slot with [`kernels::scatter`].
static ONES: [i64; BLOCK] = [1; BLOCK];

/// The right operand of a block operation.
enum Operand {
    /// The same value for every row.
    Scalar(i64),
    /// `scalar - value` (a literal on the left of a subtraction).
    RevSub(i64),
    /// One value per row.
    Vector(Vec<i64>),
}

/// Block arithmetic, compiled for AVX-512 (64-bit multiplies) or AVX2 when the CPU has them.
mod kernels {
    use super::{ArithOp, Operand};

    #[inline(always)]
    fn arith_impl(op: ArithOp, a: &mut [i64], b: &Operand) {
        match (op, b) {
            (ArithOp::Add, Operand::Scalar(y)) => {
                a.iter_mut().for_each(|x| *x = x.wrapping_add(*y))
            }
            (ArithOp::Sub, Operand::Scalar(y)) => {
                a.iter_mut().for_each(|x| *x = x.wrapping_sub(*y))
            }
            (ArithOp::Mul, Operand::Scalar(y)) => {
                a.iter_mut().for_each(|x| *x = x.wrapping_mul(*y))
            }
            (_, Operand::RevSub(y)) => a.iter_mut().for_each(|x| *x = y.wrapping_sub(*x)),
            (ArithOp::Add, Operand::Vector(v)) => a
                .iter_mut()
                .zip(v)
                .for_each(|(x, &y)| *x = x.wrapping_add(y)),
            (ArithOp::Sub, Operand::Vector(v)) => a
                .iter_mut()
                .zip(v)
                .for_each(|(x, &y)| *x = x.wrapping_sub(y)),
            (ArithOp::Mod, Operand::Scalar(y)) => {
                // The divisor is a nonzero literal (`fast_expr`).
                if *y != 0 {
                    a.iter_mut().for_each(|x| *x = x.wrapping_rem(*y));
                }
            }
            (ArithOp::Mod, Operand::Vector(v)) => a
                .iter_mut()
                .zip(v)
                .for_each(|(x, &y)| *x = if y == 0 { 0 } else { x.wrapping_rem(y) }),
            (_, Operand::Vector(v)) => a
                .iter_mut()
                .zip(v)
                .for_each(|(x, &y)| *x = x.wrapping_mul(y)),
            (ArithOp::Div, Operand::Scalar(_)) => {}
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512dq")]
    fn arith_avx512(op: ArithOp, a: &mut [i64], b: &Operand) {
        arith_impl(op, a, b);
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn arith_avx2(op: ArithOp, a: &mut [i64], b: &Operand) {
        arith_impl(op, a, b);
    }

    /// `a = a op b`, wrapping (callers proved that nothing overflows).
    pub(super) fn arith(op: ArithOp, a: &mut [i64], b: &Operand) {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512dq") {
                // SAFETY: the CPU supports AVX-512F/DQ (checked just above).
                return unsafe { arith_avx512(op, a, b) };
            }
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU supports AVX2 (checked just above).
                return unsafe { arith_avx2(op, a, b) };
            }
        }
        arith_impl(op, a, b);
    }

    #[inline(always)]
    fn scatter_impl(part: &mut [i64], stride: usize, x: &[i64], slots: &[u32]) {
        // Four interleaved copies of the partial sums, so neighbouring rows of the same group
        // do not wait on each other's store.
        let mut xs = x.chunks_exact(4);
        let mut ss = slots.chunks_exact(4);
        for (v, s) in (&mut xs).zip(&mut ss) {
            part[s[0] as usize] += v[0];
            part[stride + s[1] as usize] += v[1];
            part[2 * stride + s[2] as usize] += v[2];
            part[3 * stride + s[3] as usize] += v[3];
        }
        for (v, s) in xs.remainder().iter().zip(ss.remainder()) {
            part[*s as usize] += v;
        }
    }

    /// `part[k * stride + slots[j]] += x[j]` with `k = j % 4`; `part` has `4 * stride` entries
    /// and every slot is below `stride`, or `stride` is 0 (one copy: every slot indexes
    /// `part`).
    pub(super) fn scatter(part: &mut [i64], stride: usize, x: &[i64], slots: &[u32]) {
        scatter_impl(part, stride, x, slots);
    }
}

/// Evaluates expressions over one block (all rows, or a selection of positions).
struct BlockEval<'a, 'c> {
    columns: &'a HashMap<usize, ChunkColumn<'c>>,
    checked: bool,
    idx: Vec<usize>,
    sparse: bool,
    b: usize,
    n: usize,
    pool: Vec<Vec<i64>>,
    /// Per date function, its results on the days seen, direct-mapped by the day's low bits
    /// (a chunk's dates span a few thousand days: most values are looked up, not computed).
    date_memo: HashMap<Func, Vec<(i64, i64)>>,
}

/// Entries of a date function's memo (a power of two).
const DATE_MEMO: usize = 4096;

fn overflow() -> Error {
    Error::invalid("arithmetic overflow (the result does not fit a 64-bit decimal)")
}

impl BlockEval<'_, '_> {
    fn len(&self) -> usize {
        if self.sparse { self.idx.len() } else { self.n }
    }

    fn sel(&self) -> Option<&[usize]> {
        self.sparse.then_some(self.idx.as_slice())
    }

    fn give(&mut self, b: Block) {
        if let Block::Ints(v) = b {
            self.pool.push(v);
        }
    }

    fn ints(&mut self) -> Vec<i64> {
        let mut v = self.pool.pop().unwrap_or_default();
        v.clear();
        v
    }

    fn eval(&mut self, e: &Expr) -> Result<Block> {
        if e.ty() == SqlType::Float {
            return Ok(Block::Floats(self.eval_f(e)?));
        }
        Ok(Block::Ints(self.eval_i(e)?))
    }

    fn eval_f(&mut self, e: &Expr) -> Result<Vec<f64>> {
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

    fn eval_i(&mut self, e: &Expr) -> Result<Vec<i64>> {
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

    fn eval_bool(&mut self, e: &Expr) -> Result<Vec<u8>> {
        let k = self.len();
        Ok(match e {
            Expr::Cmp { op, l, r } => {
                let op = *op;
                if l.ty() == SqlType::Float || r.ty() == SqlType::Float {
                    let a = self.eval_f(l)?;
                    let b = self.eval_f(r)?;
                    a.iter()
                        .zip(&b)
                        .map(|(x, y)| u8::from(op.holds(x.total_cmp(y))))
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
                        .map(|x| u8::from(set.iter().any(|y| x.total_cmp(y).is_eq()) != *negated))
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
