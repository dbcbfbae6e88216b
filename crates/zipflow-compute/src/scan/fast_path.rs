//! The fast path over one chunk ([`FastPlan`]).
//!
//! Zone maps prune the chunk's conjuncts, the columns it reads open in encoded form, each
//! 1024-value block is filtered into a mask or a selection of rows, and the surviving rows
//! are folded into the chunk's accumulators by dense group id. The phases of a chunk are
//! named functions; the per-block loop stays in [`FastPlan::chunk`].

use std::collections::HashMap;

use zipflow_core::stats::Scalar;
use zipflow_core::{Error, Result};
use zipflow_encodings::{NodeView, Scratch};
use zipflow_format::Payload;

use crate::column::{BLOCK, Block, ChunkColumn, PackedRange, Predicate, StrView, bits_to_mask};
use crate::expr::{Expr, SqlType};
use crate::query::{AggFunc, Query};

use super::Table;
use super::accumulators::{DenseAcc, shared_accs};
use super::block::BlockEval;
use super::group_values::{Groups, SlotKeys, SlotOrder, group_ids};
use super::kernels::{self, ONES};
use super::merge::{DenseGroups, Partial};
use super::pushdown::{
    ColPred, col_pred, conjuncts, fast_expr, interval, no_overflow, string_mask,
};

/// The fast plan of a query: its conjuncts split into column predicates and the rest.
pub(super) struct FastPlan {
    pub(super) preds: Vec<ColPred>,
    pub(super) rest: Vec<Expr>,
    /// Whether the groups' first-seen order matters (ORDER BY does not name every key).
    pub(super) first_seen: bool,
}

impl FastPlan {
    /// The fast plan, or `None` when some part of the query needs the reference path.
    pub(super) fn new(table: &Table, q: &Query) -> Result<Option<FastPlan>> {
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
    pub(super) fn mask_rows(
        &self,
        ev: &mut BlockEval<'_, '_>,
        mask: &mut [u8],
    ) -> Result<Option<usize>> {
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
    pub(super) fn chunk(
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
        let Some(preds) = self.zone_preds(&stats) else {
            return Ok(Partial::Rows(Groups::default()));
        };
        let payloads = self.read_columns(table, q, &preds, c)?;
        let columns = open_columns(table, &payloads, c, rows, scratch)?;
        let checked = self.checked(q, &stats);
        let filter = ChunkFilter::new(preds, &columns)?;
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
        let mut dense = dense_accs(q, &shared, nslots, copies, &stats);
        let mut selected = vec![0i64; nslots + 1];
        let filtered = !filter.preds.is_empty() || !self.rest.is_empty();
        let mut first_kept = self.first_kept(&slot_keys, gids.is_some(), filtered, nslots);
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
            let Some(hits) = self.select_rows(&filter, &mut ev, &mut mask, &mut tmp)? else {
                continue;
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
        Ok(chunk_groups(slot_keys, dense, &selected, first_kept))
    }

    /// The column predicates that the chunk's zone maps (`stats`) leave: those that hold for
    /// all of it dropped. `None` when one rules the whole chunk out.
    fn zone_preds(&self, stats: &dyn Fn(usize) -> Option<(i128, i128)>) -> Option<Vec<ColPred>> {
        let mut preds = Vec::new();
        for p in &self.preds {
            if let ColPred::Range { col, lo, hi } = p {
                if lo > hi {
                    return None;
                }
                if let Some((a, b)) = stats(*col) {
                    if b < i128::from(*lo) || a > i128::from(*hi) {
                        return None;
                    }
                    if a >= i128::from(*lo) && b <= i128::from(*hi) {
                        continue;
                    }
                }
            }
            preds.push(p.clone());
        }
        Some(preds)
    }

    /// The columns chunk `c` reads (those of `preds`, of the other conjuncts, of the aggregate
    /// arguments and of the keys), their payloads read from the file.
    fn read_columns<'f>(
        &self,
        table: &'f Table,
        q: &Query,
        preds: &[ColPred],
        c: usize,
    ) -> Result<Vec<(usize, Payload<'f>)>> {
        let mut needed = Vec::new();
        for p in preds {
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
        needed
            .into_iter()
            .map(|col| Ok((col, table.file.chunk_payload(col, c)?.0)))
            .collect()
    }

    /// Whether the chunk needs checked arithmetic: unless its zone maps (`stats`) prove that
    /// every value of the other conjuncts and of the aggregate arguments fits.
    fn checked(&self, q: &Query, stats: &dyn Fn(usize) -> Option<(i128, i128)>) -> bool {
        // Overflow: checked arithmetic unless the zone maps prove every value fits.
        self.rest.iter().any(|e| !no_overflow(e, stats))
            || q.aggregates
                .iter()
                .any(|a| a.arg.as_ref().is_some_and(|e| !no_overflow(e, stats)))
    }

    /// Where each slot's first kept row is to be found while the chunk runs (`nslots` slots
    /// and the trash slot), or empty when nothing needs it.
    fn first_kept(
        &self,
        slot_keys: &SlotKeys,
        grouped: bool,
        filtered: bool,
        nslots: usize,
    ) -> Vec<u32> {
        // The groups' first-seen order (when it matters) is that of their first rows that
        // pass the WHERE. Slots numbered in first-seen order give it without a WHERE, and
        // so do slots in key order with their first rows; otherwise each slot's first kept
        // row is found here, while some slot has not shown one.
        let known = slot_keys.first_seen || !slot_keys.first_row.is_empty();
        if self.first_seen && grouped && (filtered || !known) {
            let mut f = vec![u32::MAX; nslots + 1];
            // The trash slot never counts as unseen.
            f[nslots] = 0;
            f
        } else {
            Vec::new()
        }
    }

    /// Filters block `ev.b` (`ev.n` rows) by the chunk's WHERE and selects the rows that pass
    /// (as [`FastPlan::mask_rows`] does, or straight from the fused range filters' bitmask).
    /// Returns how many pass, or `None` when none does.
    #[inline]
    fn select_rows(
        &self,
        filter: &ChunkFilter<'_, '_>,
        ev: &mut BlockEval<'_, '_>,
        mask: &mut [u8],
        tmp: &mut Block,
    ) -> Result<Option<usize>> {
        let (b, n) = (ev.b, ev.n);
        let start = b * BLOCK;
        let columns = ev.columns;
        let ChunkFilter {
            preds,
            tables,
            string_masks,
            packed: packed_preds,
        } = filter;
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
                return Ok(None);
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
                bits_to_mask(&bits, n, mask);
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
        for ((p, sm), table) in byte_preds.iter().zip(string_masks).zip(tables) {
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
                    cc.filter(b, n, &p, mask, tmp)?;
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
                    cc.filter(b, n, &p, mask, tmp)?;
                }
                (ColPred::Strings { .. }, None) => {}
            }
            any = mask[..n].iter().fold(0u8, |a, &m| a | m) != 0;
            if !any {
                break;
            }
        }
        if !any {
            return Ok(None);
        }
        match direct {
            Some(h) => Ok(Some(h)),
            None => self.mask_rows(ev, mask),
        }
    }
}

/// Chunk `c`'s columns opened in encoded form from their `payloads`.
fn open_columns<'p>(
    table: &Table,
    payloads: &'p [(usize, Payload<'_>)],
    c: usize,
    rows: usize,
    scratch: &mut Scratch,
) -> Result<HashMap<usize, ChunkColumn<'p>>> {
    let file = &table.file;
    let mut columns = HashMap::new();
    for (col, payload) in payloads {
        let col = *col;
        let locate = |e: Error| {
            e.at_column(&file.columns()[col].name)
                .at_chunk(c as u32)
                .in_file(file.path())
        };
        let values_len = file.chunk_meta(col, c).values_len as usize;
        let bytes = payload
            .get(..values_len)
            .ok_or_else(|| locate(Error::corrupt("values tree past the payload")))?;
        let node = NodeView::parse(bytes).map_err(locate)?;
        let ptype = file.columns()[col].column_type.ptype();
        if node.ptype != ptype || node.len != rows {
            return Err(locate(Error::corrupt(format!(
                "values tree holds {} {} values, the index says {rows} {ptype} values",
                node.len, node.ptype
            ))));
        }
        columns.insert(col, ChunkColumn::new(&node, scratch).map_err(locate)?);
    }
    Ok(columns)
}

/// A chunk's WHERE, prepared once for all of its blocks: the column predicates its zone
/// maps leave, their code tables on dictionary columns, their masks on string columns and,
/// when every one is a range in its column's packed domain, the fused range filters.
struct ChunkFilter<'c, 'f> {
    preds: Vec<ColPred>,
    tables: Vec<Option<Vec<u8>>>,
    string_masks: Vec<Option<Vec<u8>>>,
    packed: Option<Vec<(&'c ChunkColumn<'f>, PackedRange)>>,
}

impl<'c, 'f> ChunkFilter<'c, 'f> {
    /// The filter of `preds` on the chunk's open `columns`.
    fn new(preds: Vec<ColPred>, columns: &'c HashMap<usize, ChunkColumn<'f>>) -> Result<Self> {
        let tables = code_tables(&preds, columns);
        let string_masks = string_masks(&preds, columns)?;
        let packed = packed_preds(&preds, &tables, columns);
        Ok(ChunkFilter {
            preds,
            tables,
            string_masks,
            packed,
        })
    }
}

/// Each predicate's table of the dictionary codes that pass, where its column is
/// dictionary-encoded in the chunk.
fn code_tables(
    preds: &[ColPred],
    columns: &HashMap<usize, ChunkColumn<'_>>,
) -> Vec<Option<Vec<u8>>> {
    // Dictionary chunks evaluate their predicates on the dictionary, once per chunk.
    let mut tables: Vec<Option<Vec<u8>>> = Vec::with_capacity(preds.len());
    for p in preds {
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
    tables
}

/// Each string predicate's mask over all the chunk's rows.
fn string_masks(
    preds: &[ColPred],
    columns: &HashMap<usize, ChunkColumn<'_>>,
) -> Result<Vec<Option<Vec<u8>>>> {
    // String predicates are evaluated once per chunk.
    let mut string_masks: Vec<Option<Vec<u8>>> = Vec::with_capacity(preds.len());
    for p in preds {
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
    Ok(string_masks)
}

/// The fused range filters of `preds`, most selective first, when every one is a range in
/// its column's packed domain; else `None`.
fn packed_preds<'c, 'f>(
    preds: &[ColPred],
    tables: &[Option<Vec<u8>>],
    columns: &'c HashMap<usize, ChunkColumn<'f>>,
) -> Option<Vec<(&'c ChunkColumn<'f>, PackedRange)>> {
    // When every column predicate is a range in its chunk's packed domain, blocks are
    // filtered into a bitmask, the most selective predicate first.
    let mut packed_preds: Option<Vec<(&ChunkColumn<'_>, PackedRange)>> = (!preds.is_empty())
        .then(|| {
            preds
                .iter()
                .zip(tables)
                .map(|(p, t)| match p {
                    ColPred::Range { col, lo, hi } => columns
                        .get(col)
                        .and_then(|cc| cc.packed_range(*lo, *hi, t.as_deref()).map(|r| (cc, r))),
                    _ => None,
                })
                .collect::<Option<Vec<_>>>()
        })
        .flatten();
    if let Some(pp) = &mut packed_preds {
        pp.sort_by(|a, b| a.1.selectivity.total_cmp(&b.1.selectivity));
    }
    packed_preds
}

/// One accumulator per aggregate of `q` for `nslots` slots and the trash slot, `copies`
/// copies of the partial sums, folded as the zone maps (`stats`) allow.
fn dense_accs(
    q: &Query,
    shared: &[usize],
    nslots: usize,
    copies: usize,
    stats: &dyn Fn(usize) -> Option<(i128, i128)>,
) -> Vec<DenseAcc> {
    q.aggregates
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
                .and_then(|e| interval(e, stats))
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
        .collect()
}

/// The chunk's result from its accumulators, the rows each slot kept (`selected`) and, where
/// they were tracked, the slots' first kept rows.
fn chunk_groups(
    slot_keys: SlotKeys,
    mut dense: Vec<DenseAcc>,
    selected: &[i64],
    mut first_kept: Vec<u32>,
) -> Partial {
    for d in &mut dense {
        d.finish(selected);
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
    Partial::Dense(DenseGroups {
        keys: slot_keys,
        seen,
        dense,
    })
}
