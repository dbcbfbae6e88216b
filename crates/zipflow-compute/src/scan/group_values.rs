//! Group values: GROUP BY keys interned into dense group ids.
//!
//! The reference path's [`Groups`] index whole keys by hash. On the fast path,
//! [`group_ids`] numbers a chunk's key combinations as dense slots ([`SlotKeys`]) from its
//! key columns (dictionary codes, string runs, integral values), so that the accumulators
//! are indexed by slot and no row is hashed.

use std::collections::HashMap;

use rustc_hash::FxHashMap;
use zipflow_core::values::ByteStrings;
use zipflow_core::{Error, IntVec, Result, Values};
use zipflow_encodings::Scratch;

use crate::column::{BLOCK, ChunkColumn, StrView, ints_to_i64};
use crate::expr::{Expr, SqlType, Value, make_integral};
use crate::query::Query;

use super::Table;
use super::accumulators::Acc;
use super::block::BlockEval;

/// A hashable group key part.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) enum KeyPart {
    Null,
    I(i128),
    F(u64),
    S(String),
}

/// The bits a float groups by: `+ 0.0` turns -0.0 into +0.0, so the two zeros are one group.
fn float_key(f: f64) -> u64 {
    (f + 0.0).to_bits()
}

pub(super) fn key_part(v: &Value) -> KeyPart {
    match v {
        Value::Null => KeyPart::Null,
        Value::Bool(b) => KeyPart::I(i128::from(*b)),
        Value::Int(x) => KeyPart::I(i128::from(*x)),
        Value::Decimal(x, _) => KeyPart::I(*x),
        Value::Date(d) => KeyPart::I(i128::from(*d)),
        Value::Float(f) => KeyPart::F(float_key(*f)),
        Value::Str(s) => KeyPart::S(s.clone()),
    }
}

/// A group's key and its aggregates' results.
pub(super) type GroupResult = (Vec<Value>, Vec<Value>);

/// Groups of one chunk (or of the whole scan): keys in first-seen order, accumulators.
#[derive(Debug, Default)]
pub(super) struct Groups {
    /// Where each key is, for [`Groups::slot`].
    pub(super) index: FxHashMap<Vec<KeyPart>, usize>,
    /// The same for keys of one integral value (no key allocated, none dereferenced).
    pub(super) ints: FxHashMap<i128, usize>,
    pub(super) keys: Vec<Vec<Value>>,
    pub(super) accs: Vec<Vec<Acc>>,
}

/// A group key as [`Groups`] looks it up.
#[derive(Hash)]
pub(super) enum GroupKey {
    /// One integral value.
    Int(i128),
    /// Any other key.
    Parts(Vec<KeyPart>),
}

impl GroupKey {
    pub(super) fn of(key: &[Value]) -> GroupKey {
        if let [v] = key
            && let KeyPart::I(x) = key_part(v)
        {
            return GroupKey::Int(x);
        }
        GroupKey::Parts(key.iter().map(key_part).collect())
    }
}

impl Groups {
    pub(super) fn find(&self, k: &GroupKey) -> Option<usize> {
        match k {
            GroupKey::Int(x) => self.ints.get(x),
            GroupKey::Parts(p) => self.index.get(p),
        }
        .copied()
    }

    /// Adds the group of a key [`Groups::find`] did not find.
    pub(super) fn add(&mut self, k: GroupKey, key: Vec<Value>, accs: Vec<Acc>) -> usize {
        let i = self.keys.len();
        match k {
            GroupKey::Int(x) => self.ints.insert(x, i),
            GroupKey::Parts(p) => self.index.insert(p, i),
        };
        self.keys.push(key);
        self.accs.push(accs);
        i
    }

    pub(super) fn slot(&mut self, key: Vec<Value>, naggs: usize) -> usize {
        let k = GroupKey::of(&key);
        match self.find(&k) {
            Some(i) => i,
            None => self.add(k, key, vec![Acc::default(); naggs]),
        }
    }

    /// Each group's key and its aggregates' results, in order.
    pub(super) fn results(self, q: &Query) -> Vec<GroupResult> {
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

    pub(super) fn merge(&mut self, other: Groups, naggs: usize) {
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

/// The key tuples of a chunk's group slots, `width` values each, in one vector.
#[derive(Debug)]
pub(super) struct SlotKeys {
    pub(super) width: usize,
    pub(super) count: usize,
    pub(super) values: Vec<Value>,
    /// With one integral key: each slot's key as stored (else empty). Then `values` is empty
    /// when the slots are in key order (`first_row` set): only the merge by value reads them.
    pub(super) ints: Vec<i64>,
    /// When the slots are not in first-seen order (they are in key order): each slot's
    /// first row (else empty).
    pub(super) first_row: Vec<u32>,
    /// Whether the slots are numbered in the order the chunk's rows first show them (not so
    /// for dictionary codes, several keys, or slots in key order).
    pub(super) first_seen: bool,
}

impl SlotKeys {
    pub(super) fn len(&self) -> usize {
        self.count
    }

    pub(super) fn get(&self, s: usize) -> &[Value] {
        self.values
            .get(s * self.width..(s + 1) * self.width)
            .unwrap_or(&[])
    }
}

/// Per-row dense group ids of a chunk and the key values of each id; `None` without keys.
#[allow(clippy::type_complexity)]
pub(super) fn group_ids(
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
                // The largest code, found with a vectorised max (no early exit per code).
                if codes
                    .iter()
                    .copied()
                    .max()
                    .is_some_and(|c| c as usize >= dict.len())
                {
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
pub(super) const TOO_MANY_GROUPS: &str = "GROUP BY with more than 2^20 key combinations in one chunk (keys must have few distinct values)";

/// Whether `e` is [`too_many_groups`]'s error (the chunk then runs on the reference path).
pub(super) fn is_too_many_groups(e: &Error) -> bool {
    matches!(e, Error::Unsupported { what, .. } if what == TOO_MANY_GROUPS)
}

pub(super) fn too_many_groups() -> Error {
    Error::unsupported(TOO_MANY_GROUPS)
}

/// Adds one key's per-row ids and distinct values to the chunk's group ids and key tuples:
/// the new key varies slowest.
pub(super) fn combine(
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
pub(super) fn key_values(
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

pub(super) fn string_ids(s: &ByteStrings) -> Result<(Vec<u32>, Vec<Value>)> {
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
pub(super) enum SlotOrder {
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
pub(super) struct IntIds {
    pub(super) ids: Vec<u32>,
    pub(super) distinct: Vec<Value>,
    pub(super) values: Vec<i64>,
    /// Ids in ascending order of their values: each one's first row, or with
    /// [`SlotOrder::KeysOnly`] any increasing numbers (else empty).
    pub(super) first_row: Vec<u32>,
}

/// Ids of an integral key's values, numbered as `order` asks where a table finds them (and
/// otherwise in first-seen order).
pub(super) fn int_ids(v: &IntVec, ty: SqlType, order: SlotOrder) -> Result<IntIds> {
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

pub(super) fn float_ids(x: impl Iterator<Item = f64>) -> (Vec<u32>, Vec<Value>) {
    let mut map: HashMap<u64, u32> = HashMap::new();
    let mut distinct = Vec::new();
    let ids = x
        .map(|f| {
            let next = map.len() as u32;
            *map.entry(float_key(f)).or_insert_with(|| {
                distinct.push(Value::Float(f));
                next
            })
        })
        .collect();
    (ids, distinct)
}
