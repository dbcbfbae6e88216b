//! Merges: the chunks' partial groups combined into the scan's.
//!
//! [`Merger`] takes the chunks' results ([`Partial`]) batch by batch in chunk order and
//! merges them part by part in parallel: parts by hash of the key, or, with a
//! [`KeyRange`], ranges of the key's values indexed directly.

use std::hash::BuildHasher;

use rayon::prelude::*;
use zipflow_core::{Error, Result};

use crate::expr::{Expr, SqlType, Value, make_integral};
use crate::query::Query;

use super::accumulators::{DenseAcc, arg_is_float, shared_accs};
use super::group_values::{GroupKey, GroupResult, Groups, KeyPart, SlotKeys, key_part};

/// A chunk's result: the fast path's accumulators by slot, or the reference path's groups.
pub(super) enum Partial {
    Dense(DenseGroups),
    Rows(Groups),
}

/// A chunk's groups on the fast path: every slot's key, the slots that kept rows (in slot
/// order, which is the keys' first-seen order), and one accumulator per aggregate (those
/// of [`shared_accs`] read).
pub(super) struct DenseGroups {
    pub(super) keys: SlotKeys,
    pub(super) seen: Vec<u32>,
    pub(super) dense: Vec<DenseAcc>,
}

/// One part of the scan's groups (those whose keys fall in it): keys in first-seen order,
/// an index of them, one accumulator per aggregate with a slot per group (merged field by
/// field), and where each group was first seen (chunk, place among the chunk's groups).
pub(super) struct MergedDense {
    pub(super) groups: Groups,
    pub(super) dense: Vec<DenseAcc>,
    pub(super) first: Vec<(u32, u32)>,
}

impl MergedDense {
    /// The slot of `key` (first seen at `at`), and whether it is new.
    pub(super) fn slot(&mut self, key: &[Value], at: (u32, u32)) -> (usize, bool) {
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
pub(super) const FEW_GROUPS: usize = 4096;

/// Which of `parts` parts of the merge a group key belongs to: high bits of its hash, so
/// that the part's own hash table still sees varied low bits.
pub(super) fn part_of(key: &[Value], parts: usize) -> usize {
    let h = rustc_hash::FxBuildHasher.hash_one(GroupKey::of(key));
    ((h >> 32) as usize) % parts
}

/// A single integral GROUP BY key column whose zone maps bound its values to a short range:
/// the merge indexes groups by value (no hashing, no key objects), and a chunk whose slots
/// come in ascending key order is merged walking the accumulators in order.
#[derive(Debug, Clone, Copy)]
pub(super) struct KeyRange {
    /// The key's column.
    pub(super) column: usize,
    pub(super) lo: i64,
    pub(super) len: usize,
    pub(super) ty: SqlType,
}

/// The widest key range merged by value (4 Mi values: tens of MB of accumulators at most).
pub(super) const DIRECT_SPAN: usize = 1 << 22;

/// A group not seen yet, in [`DirectPart::first`].
pub(super) const UNSEEN: (u32, u32) = (u32::MAX, u32::MAX);

/// One part of a merge by key value: the groups of values `base .. base + first.len()`.
pub(super) struct DirectPart {
    pub(super) base: i64,
    /// Where each value's group was first seen (chunk, place in it), or [`UNSEEN`].
    pub(super) first: Vec<(u32, u32)>,
    pub(super) dense: Vec<DenseAcc>,
    pub(super) groups: usize,
}

impl DirectPart {
    /// The group of `v` (of this part), and whether it is new (then first seen at `at`).
    pub(super) fn claim(&mut self, v: i64, at: (u32, u32)) -> (u32, bool) {
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
pub(super) fn outside_zone_maps(v: i128, chunk: u32) -> Error {
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
pub(super) struct Merger {
    pub(super) shared: Vec<usize>,
    /// The aggregates whose accumulators are kept (the others read one of these).
    pub(super) own: Vec<usize>,
    pub(super) parts: Vec<MergedDense>,
    /// With a [`KeyRange`]: the parts by key value (and `parts` is empty).
    pub(super) direct: Option<(KeyRange, Vec<DirectPart>)>,
}

impl Merger {
    pub(super) fn new(q: &Query, parts: usize, range: Option<KeyRange>) -> Merger {
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
    pub(super) fn add_direct(&mut self, first: usize, batch: &[Partial]) -> Result<()> {
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
    pub(super) fn add(&mut self, q: &Query, first: usize, batch: &[Partial]) -> Result<()> {
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
    pub(super) fn groups(&self) -> usize {
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
    pub(super) fn finish(self, q: &Query, by_key: bool) -> Result<Vec<GroupResult>> {
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
pub(super) fn group_results(
    q: &Query,
    shared: &[usize],
    dense: &[DenseAcc],
    g: usize,
) -> Vec<Value> {
    q.aggregates
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let arg = a.arg.as_ref().map(Expr::ty);
            dense[shared[i]].to_acc(g, arg).result(a.func, a.ty, arg)
        })
        .collect()
}
