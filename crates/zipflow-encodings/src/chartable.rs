//! `chartable(T)`: character tables trained on the data, chosen per 1024-byte block.
//!
//! A generalisation of [`chardict16`](crate::chardict): up to `T` tables (default 8, at most
//! 16), each a [`CharCode`]: either one tier, `2^k` characters at `1 + k` bits and every other
//! byte at 9, or two tiers, `2^k` characters at `1 + k` bits, the next `2^k2` at `2 + k2` and
//! every other byte at 10, with the shape (`k`, `k2`: 0 to 7) chosen per table. The second
//! tier is what beats the published code on text: on `dickens` one trained table gives 0.716
//! with one tier and 0.634 with two. Every code is at most 10 bits, so the same 12-bit lookup
//! table decodes it. Every block of [`CHUNK`] bytes is coded by one table; the
//! stream announces the table at the start of each block: block 0 writes the table id in
//! `ceil(log2 T)` bits, later blocks a `1` when they keep the previous block's table, else a `0`
//! and the new table's rank among the other `T - 1` in `ceil(log2 (T - 1))` bits (nothing at all
//! when there is one table). These announcements make the stream decodable front to back
//! without the index, so they count in the payload.
//!
//! The choice of table per block is an exact shortest path ([`shortest_path`]) over
//! (block, table) minimising the stream's bits, switch announcements included. Training is a
//! few rounds of clustering blocks by histogram: seed tables one by one from the block the
//! current tables serve worst (relative to a table of its own), then alternately assign blocks
//! by the shortest path and retrain each table on its blocks' summed histogram (the best shape
//! filled with the most frequent characters, which is optimal for a fixed assignment), until
//! the total stops falling (at most 8 rounds). Several tables are kept only if they beat the one
//! table trained on everything, announcements included. No randomness, so output is
//! deterministic.
//!
//! Node: meta = requested `T` (u8) | table count (u8) | per table: `k` (u8), `k2` (u8, 255 for
//! one tier), the first tier's `2^k` characters then the second's `2^k2` | total bits of the
//! stream (u64). Buffer 0 = the bit stream (MSB first, exactly
//! `ceil(total / 8)` bytes, zero bits after the end); buffer 1 = one u32 per block,
//! `bit offset << 4 | table`, so any block decodes alone (4 bytes per 1024-byte block). No
//! children. Decoding is serial within a block and parallel across blocks.

use crate::chardict::{
    BlockCode, CHUNK, CharCode, Decoder, Layout, assemble, check_stream, decode_chunks, peek,
    prefix_sum, read_u32s,
};
use crate::node::{EncodedNode, NodeView};
use crate::{Encoding, Pattern, Scratch, Slot};
use rayon::prelude::*;
use zipflow_core::{Error, IntVec, PType, Plan, Result, Values};

/// `chartable(T)`.
pub struct CharTable;

/// On-disk id of [`CharTable`].
pub const ID: u16 = DESCRIPTOR.id;

/// Tables when the plan gives no parameter.
pub const DEFAULT_TABLES: usize = 8;

/// Most tables a node may hold (the index keeps a table id in 4 bits).
pub const MAX_TABLES: usize = 16;

/// The second-tier width in the metadata of a one-tier table.
const NO_TIER: u8 = 0xff;

/// Most rounds of assign-then-retrain.
const ROUNDS: usize = 8;

/// Blocks a table must code for decoding to build its lookup table.
const TABLE_MIN_BLOCKS: usize = 16;

/// Blocks per parallel task.
const MIN_TASK_BLOCKS: usize = 32;

/// The index keeps bit offsets in 28 bits.
const OFFSET_LIMIT: u64 = 1 << 28;

/// `ceil(log2 n)`: bits of an id among `n` choices.
fn id_bits(n: usize) -> u32 {
    if n <= 1 { 0 } else { (n - 1).ilog2() + 1 }
}

/// What announcing a block's table costs with `ntables` tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SwitchCost {
    /// The first block's table id.
    pub first: u64,
    /// A block that keeps the previous block's table.
    pub stay: u64,
    /// A block that changes table.
    pub change: u64,
}

impl SwitchCost {
    /// The announcement costs of the stream format with `ntables` tables.
    pub fn of(ntables: usize) -> SwitchCost {
        if ntables <= 1 {
            return SwitchCost {
                first: 0,
                stay: 0,
                change: 0,
            };
        }
        SwitchCost {
            first: u64::from(id_bits(ntables)),
            stay: 1,
            change: 1 + u64::from(id_bits(ntables - 1)),
        }
    }
}

/// The announcement of table `t` after table `prev` (`None` for the first block): bits and
/// their count.
pub fn announcement(ntables: usize, prev: Option<usize>, t: usize) -> (u32, u32) {
    match prev {
        _ if ntables <= 1 => (0, 0),
        None => (t as u32, id_bits(ntables)),
        Some(p) if p == t => (1, 1),
        Some(p) => {
            let rank = t - usize::from(t > p);
            (rank as u32, 1 + id_bits(ntables - 1))
        }
    }
}

/// The cheapest choice per block, exactly: `costs` holds `nchoices` costs per block (row-major);
/// switching between blocks costs `switch.change`, keeping `switch.stay`, and the first block
/// `switch.first` (with `stay <= change`). Returns the total and the choices; ties go to the
/// lower choice, preferring to stay.
///
/// ```
/// use zipflow_encodings::chartable::{SwitchCost, shortest_path};
/// // Three blocks, two choices: each block is free under one choice and costs 10 under the other.
/// let costs = [10, 0, 0, 10, 10, 0];
/// // Cheap switches: follow the free choice.
/// let sw = SwitchCost { first: 1, stay: 1, change: 3 };
/// assert_eq!(shortest_path(&costs, 2, sw), (1 + 3 + 3, vec![1, 0, 1]));
/// // Dear switches: stay, and pay 10 for the middle block.
/// let sw = SwitchCost { first: 1, stay: 1, change: 12 };
/// assert_eq!(shortest_path(&costs, 2, sw), (1 + 1 + 10 + 1, vec![1, 1, 1]));
/// ```
pub fn shortest_path(costs: &[u64], nchoices: usize, switch: SwitchCost) -> (u64, Vec<u8>) {
    debug_assert!(switch.stay <= switch.change && nchoices <= 256);
    if nchoices == 0 || costs.is_empty() {
        return (0, Vec::new());
    }
    let nblocks = costs.len() / nchoices;
    let argmin = |row: &[u64]| {
        let mut best = 0;
        for (j, &v) in row.iter().enumerate() {
            if v < row[best] {
                best = j;
            }
        }
        best
    };
    let mut row: Vec<u64> = costs[..nchoices]
        .iter()
        .map(|&c| c + switch.first)
        .collect();
    // changed[b * nchoices + j]: block b took choice j after a change from row b - 1's best.
    let mut changed = vec![false; costs.len()];
    let mut best_before = vec![0u8; nblocks];
    for b in 1..nblocks {
        let p = argmin(&row);
        best_before[b] = p as u8;
        let from_best = row[p] + switch.change;
        for (j, v) in row.iter_mut().enumerate() {
            let stay = *v + switch.stay;
            let change = from_best < stay;
            changed[b * nchoices + j] = change;
            *v = if change { from_best } else { stay } + costs[b * nchoices + j];
        }
    }
    let mut j = argmin(&row);
    let total = row[j];
    let mut choice = vec![0u8; nblocks];
    for b in (0..nblocks).rev() {
        choice[b] = j as u8;
        if changed[b * nchoices + j] {
            j = usize::from(best_before[b]);
        }
    }
    (total, choice)
}

/// A byte histogram of one block (at most 1024 of each byte).
type Hist = [u16; 256];

/// The cheapest code shape for byte counts sorted in decreasing order, given as prefix sums
/// (`prefix[i]` = the `i` largest counts together, `i` in 0..=256) over `n` bytes: bits, then
/// the first tier's index bits and the second's, if any. Ties go to one tier and smaller
/// tiers.
fn best_shape(prefix: &[u64; 257], n: u64) -> (u64, u32, Option<u32>) {
    let mut best = (u64::MAX, 0, None);
    for k in 0..=7u32 {
        let bits = 9 * n - u64::from(8 - k) * prefix[1 << k];
        if bits < best.0 {
            best = (bits, k, None);
        }
    }
    for k in 0..=7u32 {
        for k2 in 0..=7u32 {
            let (a, b) = (1usize << k, 1usize << k2);
            let bits = 10 * n
                - u64::from(9 - k) * prefix[a]
                - u64::from(8 - k2) * (prefix[(a + b).min(256)] - prefix[a]);
            if bits < best.0 {
                best = (bits, k, Some(k2));
            }
        }
    }
    best
}

/// Prefix sums of counts sorted in decreasing order.
fn prefix_sums(sorted: impl Iterator<Item = u64>) -> [u64; 257] {
    let mut prefix = [0u64; 257];
    let mut at = 0;
    for (i, c) in sorted.take(256).enumerate() {
        at += c;
        prefix[i + 1] = at;
    }
    let filled = prefix.iter().rposition(|&p| p == at).unwrap_or(0);
    for p in &mut prefix[filled..] {
        *p = at;
    }
    prefix
}

/// The best code for a histogram ([`best_shape`] over its bytes by decreasing count, ties to
/// the smaller byte): exact for a fixed set of blocks.
fn best_code(h: &[u64; 256]) -> Result<CharCode> {
    let mut order: Vec<u8> = (0..=255).collect();
    order.sort_by_key(|&b| (std::cmp::Reverse(h[usize::from(b)]), b));
    let prefix = prefix_sums(order.iter().map(|&b| h[usize::from(b)]));
    let (_, k, k2) = best_shape(&prefix, prefix[256]);
    let a = 1usize << k;
    let b = k2.map_or(0, |k2| 1usize << k2);
    CharCode::with_tiers(&order[..a], &order[a..(a + b).min(256)])
}

/// Bits of every block under every code, row-major (block, code): the escape length for
/// every byte, less what each tier's characters save on it.
fn cost_matrix(hists: &[Hist], lens: &[u32], codes: &[CharCode]) -> Vec<u64> {
    // Per code: its escape length, and each tier's characters with the bits they save.
    type Shape<'c> = (u32, Vec<(&'c [u8], u32)>);
    let shapes: Vec<Shape<'_>> = codes
        .iter()
        .map(|c| {
            let esc = c.escape_bits();
            (
                esc,
                c.tiers().map(|(chars, len)| (chars, esc - len)).collect(),
            )
        })
        .collect();
    let mut costs = vec![0u64; hists.len() * codes.len()];
    costs
        .par_chunks_mut(codes.len().max(1))
        .zip(hists.par_iter().zip(lens))
        .with_min_len(MIN_TASK_BLOCKS)
        .for_each(|(row, (h, &len))| {
            for (c, (esc, tiers)) in row.iter_mut().zip(&shapes) {
                let saved: u32 = tiers
                    .iter()
                    .map(|(chars, save)| {
                        save * chars
                            .iter()
                            .map(|&b| u32::from(h[usize::from(b)]))
                            .sum::<u32>()
                    })
                    .sum();
                *c = u64::from(esc * len - saved);
            }
        });
    costs
}

/// Bits of a block under the best code for its own histogram (see [`best_code`]).
fn own_cost(h: &Hist, len: u32) -> u64 {
    let mut counts = [0u16; 256];
    let mut n = 0;
    for &c in h {
        if c > 0 {
            counts[n] = c;
            n += 1;
        }
    }
    let counts = &mut counts[..n];
    counts.sort_unstable_by(|a, b| b.cmp(a));
    best_shape(
        &prefix_sums(counts.iter().map(|&c| u64::from(c))),
        u64::from(len),
    )
    .0
}

fn sum_hists<'h>(hists: impl Iterator<Item = &'h Hist>) -> [u64; 256] {
    let mut total = [0u64; 256];
    for h in hists {
        for (t, &c) in total.iter_mut().zip(h) {
            *t += u64::from(c);
        }
    }
    total
}

/// The trained tables, each block's table and the stream's total bits.
struct Trained {
    codes: Vec<CharCode>,
    choice: Vec<u8>,
    costs: Vec<u64>,
}

fn train(hists: &[Hist], lens: &[u32], max_tables: usize) -> Result<Trained> {
    let nblocks = hists.len();
    let global = best_code(&sum_hists(hists.iter()))?;
    let mut codes = vec![global.clone()];
    if max_tables > 1 && nblocks > 1 {
        // Seeds: each new table is the own table of the block the current ones serve worst.
        let own: Vec<u64> = hists
            .par_iter()
            .zip(lens)
            .with_min_len(MIN_TASK_BLOCKS)
            .map(|(h, &len)| own_cost(h, len))
            .collect();
        let mut served: Vec<u64> = cost_matrix(hists, lens, &codes);
        while codes.len() < max_tables.min(nblocks) {
            let (worst, regret) = served
                .iter()
                .zip(&own)
                // A block's own table comes from a heuristic and can cost more than one
                // already trained: no regret then.
                .map(|(s, o)| s.saturating_sub(*o))
                .enumerate()
                .fold(
                    (0, 0),
                    |best, (b, r)| if r > best.1 { (b, r) } else { best },
                );
            if regret == 0 {
                break;
            }
            let h = &hists[worst];
            let code = best_code(&std::array::from_fn(|i| u64::from(h[i])))?;
            let column = cost_matrix(hists, lens, std::slice::from_ref(&code));
            for (s, c) in served.iter_mut().zip(column) {
                *s = (*s).min(c);
            }
            codes.push(code);
        }
    }
    let mut best: Option<(u64, Trained)> = None;
    for _ in 0..ROUNDS {
        let costs = cost_matrix(hists, lens, &codes);
        let (total, choice) = shortest_path(&costs, codes.len(), SwitchCost::of(codes.len()));
        // Stop once a round gains less than 0.01 %.
        if best.as_ref().is_some_and(|(b, _)| total >= *b) {
            break;
        }
        let converged = best.as_ref().is_some_and(|(b, _)| b - total < b / 10_000);
        let retrained = (0..codes.len())
            .map(|t| {
                let mine = hists
                    .iter()
                    .zip(&choice)
                    .filter(|&(_, &c)| usize::from(c) == t);
                let h = sum_hists(mine.map(|(h, _)| h));
                // A table no block chose stays as it is (it is dropped at the end).
                if h.iter().all(|&c| c == 0) {
                    Ok(codes[t].clone())
                } else {
                    best_code(&h)
                }
            })
            .collect::<Result<Vec<_>>>()?;
        best = Some((
            total,
            Trained {
                codes: std::mem::replace(&mut codes, retrained),
                choice,
                costs,
            },
        ));
        if converged {
            break;
        }
    }
    let Some((_, mut trained)) = best else {
        return Err(Error::invalid("chartable training ran no round"));
    };
    // Drop tables no block uses; fewer tables make announcements cheaper, so choose again.
    let mut used = vec![false; trained.codes.len()];
    for &c in &trained.choice {
        used[usize::from(c)] = true;
    }
    if used.contains(&false) {
        let codes: Vec<CharCode> = trained
            .codes
            .into_iter()
            .zip(&used)
            .filter_map(|(c, &u)| u.then_some(c))
            .collect();
        let costs = cost_matrix(hists, lens, &codes);
        let (_, choice) = shortest_path(&costs, codes.len(), SwitchCost::of(codes.len()));
        trained = Trained {
            codes,
            choice,
            costs,
        };
    }
    // Several tables pay announcement bits on every block; keep them only when they gain.
    if trained.codes.len() > 1 {
        let codes = vec![global];
        let single = Trained {
            costs: cost_matrix(hists, lens, &codes),
            codes,
            choice: vec![0; nblocks],
        };
        let bits = |t: &Trained| block_bits(t).iter().sum::<u64>();
        if bits(&single) <= bits(&trained) {
            trained = single;
        }
    }
    Ok(trained)
}

fn bytes_of<'v>(plan: &Plan, input: &'v Values) -> Result<&'v [u8]> {
    match input {
        Values::Int(IntVec::U8(v)) => Ok(v),
        _ => Err(Error::plan(
            plan,
            format!("`chartable` codes u8 streams, not {}", input.ptype()),
        )),
    }
}

fn requested_tables(plan: &Plan) -> Result<usize> {
    match plan.params.first() {
        None => Ok(DEFAULT_TABLES),
        Some(&t) if (1..=MAX_TABLES as i64).contains(&t) => Ok(t as usize),
        Some(t) => Err(Error::plan(
            plan,
            format!("`chartable` takes 1 to {MAX_TABLES} tables, got {t}"),
        )),
    }
}

/// A parsed, validated `chartable` node: tables, block starts (and the total), block tables.
struct Parsed<'a> {
    codes: Vec<CharCode>,
    payload: &'a [u8],
    offsets: Vec<u64>,
    tables: Vec<u8>,
}

/// The bit of block `b`'s first code, after its announcement (which must name the table the
/// index gives it), the block starting at bit `start`.
fn first_code(p: &Parsed<'_>, b: usize, start: u64) -> Result<u64> {
    let n = p.codes.len();
    let t = usize::from(p.tables[b]);
    if n <= 1 {
        return Ok(start);
    }
    let sw = SwitchCost::of(n);
    let (ok, pos) = if b == 0 {
        (
            peek(p.payload, start, sw.first as u32) as usize == t,
            start + sw.first,
        )
    } else if peek(p.payload, start, 1) == 1 {
        (p.tables[b - 1] == p.tables[b], start + 1)
    } else {
        let prev = usize::from(p.tables[b - 1]);
        let rank = peek(p.payload, start + 1, (sw.change - 1) as u32) as usize;
        (
            t != prev && rank == t - usize::from(t > prev),
            start + sw.change,
        )
    };
    if !ok {
        return Err(Error::corrupt(format!(
            "chartable block {b} announces a table other than its index's {t}"
        )));
    }
    Ok(pos)
}

/// The [`Layout`] of a `chartable` node: its tables, and each block's first code after its
/// announcement (checked).
pub fn layout<'a>(node: &NodeView<'a>) -> Result<Layout<'a>> {
    let p = parse(node)?;
    let blocks = (0..p.tables.len())
        .map(|b| {
            let first = first_code(&p, b, p.offsets[b])?;
            Ok((first, p.offsets[b + 1], usize::from(p.tables[b])))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Layout {
        payload: p.payload,
        codes: p.codes,
        blocks,
    })
}

fn parse<'a>(node: &NodeView<'a>) -> Result<Parsed<'a>> {
    if node.id != ID {
        return Err(Error::invalid(format!(
            "node id {} is not chartable's {ID}",
            node.id
        )));
    }
    node.expect_shape("chartable", 2, 0)?;
    let mut m = node.meta_reader();
    let requested = m.u8("requested tables")?;
    let ntables = usize::from(m.u8("table count")?);
    if !(1..=MAX_TABLES).contains(&usize::from(requested)) || ntables > usize::from(requested) {
        return Err(Error::corrupt(format!(
            "chartable with {ntables} of {requested} tables"
        )));
    }
    let mut codes = Vec::with_capacity(ntables);
    for _ in 0..ntables {
        let k = m.u8("table width")?;
        let k2 = m.u8("second tier width")?;
        if k > 7 || (k2 > 7 && k2 != NO_TIER) {
            return Err(Error::corrupt(format!(
                "chartable table of tiers 2^{k} and 2^{k2}"
            )));
        }
        let mut tier = |k: u8| -> Result<Vec<u8>> {
            (0..1u32 << k).map(|_| m.u8("table characters")).collect()
        };
        let first = tier(k)?;
        let second = if k2 == NO_TIER { Vec::new() } else { tier(k2)? };
        codes.push(CharCode::with_tiers(&first, &second)?);
    }
    let total = m.u64("total bits")?;
    m.finish("chartable")?;
    let n = node.len;
    // Every byte costs 1 to 10 bits: this bounds the output by the stream's size.
    if total < n as u64 || total > 10 * n as u64 + 5 * n.div_ceil(CHUNK) as u64 {
        return Err(Error::corrupt(format!(
            "chartable stream of {total} bits cannot hold {n} bytes"
        )));
    }
    if n > 0 && ntables == 0 {
        return Err(Error::corrupt("chartable holds bytes but no table"));
    }
    let payload = node.buffer(0, "chartable stream")?;
    let index = read_u32s(
        node.buffer(1, "chartable index")?,
        n.div_ceil(CHUNK),
        "chartable index",
    )?;
    let tables: Vec<u8> = index.iter().map(|&e| (e & 15) as u8).collect();
    if let Some(b) = tables.iter().position(|&t| usize::from(t) >= ntables) {
        return Err(Error::corrupt(format!(
            "chartable block {b} uses table {} of {ntables}",
            tables[b]
        )));
    }
    let offsets = check_stream(payload, index.iter().map(|&e| e >> 4).collect(), total)?;
    Ok(Parsed {
        codes,
        payload,
        offsets,
        tables,
    })
}

/// How one table of a `chartable` node is used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableUse {
    /// The table's characters: its first tier, then its second, each in index order.
    pub chars: Vec<u8>,
    /// Code length in bits of each of `chars`.
    pub bits: Vec<u8>,
    /// Code length in bits of any other byte.
    pub escape_bits: u8,
    /// Blocks coded by the table.
    pub blocks: usize,
    /// Bytes those blocks hold.
    pub bytes: usize,
}

/// Each table of a `chartable` node: its characters and how many blocks and bytes use it.
pub fn table_usage(node: &NodeView<'_>) -> Result<Vec<TableUse>> {
    let p = parse(node)?;
    let mut uses: Vec<TableUse> = p
        .codes
        .iter()
        .map(|c| TableUse {
            chars: c.chars().to_vec(),
            bits: c
                .chars()
                .iter()
                .map(|&b| c.lengths()[usize::from(b)])
                .collect(),
            escape_bits: c.escape_bits() as u8,
            blocks: 0,
            bytes: 0,
        })
        .collect();
    for (b, &t) in p.tables.iter().enumerate() {
        let u = &mut uses[usize::from(t)];
        u.blocks += 1;
        u.bytes += CHUNK.min(node.len - b * CHUNK);
    }
    Ok(uses)
}

/// Histogram and length of every block.
fn histograms(data: &[u8]) -> (Vec<Hist>, Vec<u32>) {
    data.par_chunks(CHUNK)
        .with_min_len(MIN_TASK_BLOCKS)
        .map(|c| {
            let mut h = [0u16; 256];
            for &b in c {
                h[usize::from(b)] += 1;
            }
            (h, c.len() as u32)
        })
        .unzip()
}

/// Bits of every block: its announcement and its codes.
fn block_bits(t: &Trained) -> Vec<u64> {
    let n = t.codes.len();
    let sw = SwitchCost::of(n);
    t.choice
        .iter()
        .enumerate()
        .map(|(b, &c)| {
            let c = usize::from(c);
            let ann = match b {
                0 => sw.first,
                _ if t.choice[b - 1] == t.choice[b] => sw.stay,
                _ => sw.change,
            };
            ann + t.costs[b * n + c]
        })
        .collect()
}

impl Encoding for CharTable {
    fn descriptor(&self) -> &'static crate::Descriptor {
        &DESCRIPTOR
    }
    fn calibration(&self) -> Vec<crate::Calibration> {
        vec![crate::Calibration {
            stream: crate::selection::text_bytes(),
            plan: "chartable",
            minus: &[],
        }]
    }
    fn max_params(&self) -> usize {
        1
    }
    fn accepts(&self, ptype: PType) -> bool {
        ptype == PType::U8
    }

    fn encode(&self, plan: &Plan, input: &Values) -> Result<EncodedNode> {
        let data = bytes_of(plan, input)?;
        let requested = requested_tables(plan)?;
        let mut node = EncodedNode::new(ID, PType::U8, data.len())?;
        let (hists, lens) = histograms(data);
        let trained = if data.is_empty() {
            Trained {
                codes: Vec::new(),
                choice: Vec::new(),
                costs: Vec::new(),
            }
        } else {
            train(&hists, &lens, requested)?
        };
        let offsets = prefix_sum(&block_bits(&trained), OFFSET_LIMIT)?;
        let total = offsets[offsets.len() - 1];
        let encoders: Vec<[u32; 256]> = trained.codes.iter().map(CharCode::encoder).collect();
        let n = trained.codes.len();
        let payload = assemble(data, &offsets, |b| {
            let t = usize::from(trained.choice[b]);
            let prev = b.checked_sub(1).map(|p| usize::from(trained.choice[p]));
            let (prefix, prefix_len) = announcement(n, prev, t);
            BlockCode {
                prefix,
                prefix_len,
                enc: &encoders[t],
            }
        });
        let mut meta = vec![requested as u8, n as u8];
        for c in &trained.codes {
            let (k, k2) = c.index_bits();
            meta.push(k as u8);
            meta.push(k2.map_or(NO_TIER, |k2| k2 as u8));
            meta.extend_from_slice(c.chars());
        }
        meta.extend_from_slice(&total.to_le_bytes());
        let index = offsets[..offsets.len() - 1]
            .iter()
            .zip(&trained.choice)
            .flat_map(|(&o, &t)| ((o as u32) << 4 | u32::from(t)).to_le_bytes())
            .collect();
        node.meta = meta;
        node.buffers = vec![payload, index];
        Ok(node)
    }

    fn decode(&self, node: &NodeView<'_>, out: &mut Values, _scratch: &mut Scratch) -> Result<()> {
        let p = parse(node)?;
        let Values::Int(IntVec::U8(out)) = out else {
            return Err(Error::corrupt("chartable decodes to u8 values"));
        };
        crate::resize_for_overwrite(out, node.len, 0);
        // A lookup table (4096 entries) pays off over a few dozen blocks; a table used less
        // decodes one code at a time.
        let mut uses = vec![0usize; p.codes.len()];
        for &t in &p.tables {
            uses[usize::from(t)] += 1;
        }
        let decoders: Vec<Decoder> = p
            .codes
            .iter()
            .zip(&uses)
            .map(|(c, &u)| {
                if u >= TABLE_MIN_BLOCKS {
                    c.decoder()
                } else {
                    c.decoder_without_table()
                }
            })
            .collect();
        decode_chunks(out, p.payload, &p.offsets, |b, start| {
            Ok((
                first_code(&p, b, start)?,
                &decoders[usize::from(p.tables[b])],
            ))
        })
    }

    fn params(&self, node: &NodeView<'_>) -> Vec<i64> {
        node.meta
            .first()
            .map(|&t| vec![i64::from(t)])
            .unwrap_or_default()
    }
}

/// What `chartable` is: its id, name, child slots, GPU decoding and part in the search.
pub const DESCRIPTOR: crate::Descriptor = crate::Descriptor {
    id: 15,
    name: "chartable",
    slots: Slot::NONE,
    leaf_for_numbers: false,
    gpu: crate::GpuDecode::not_parallel(Pattern::Serial),
    search: crate::Search::SKIP,
};

#[cfg(test)]
mod tests {
    use super::*;

    /// Streams on which a block's own table costs more than one already trained (digits in
    /// few patterns, long runs of one byte among names): training must not count that as a
    /// negative regret.
    #[test]
    fn blocks_served_better_than_by_their_own_table_train_and_round_trip() -> Result<()> {
        let digits: Vec<u8> = (0..20_000u64)
            .flat_map(|i| format!("{:010}", (i * 7919) % 6000).into_bytes())
            .collect();
        let mut runs: Vec<u8> = Vec::new();
        for i in 0..60_000u32 {
            runs.extend_from_slice(b"SHIP MAIL TRUCK ");
            if i % 5000 == 7 {
                runs.extend(std::iter::repeat_n(b'z', 20_000));
            }
        }
        let flags: Vec<u8> = (0..70_000)
            .map(|i| [b'F', b'O'][(i * 3 + (i >> 5)) % 2])
            .collect();
        let letters: Vec<u8> = (0..70_000)
            .map(|i| b'a' + ((i * 5 + (i >> 6)) % 8) as u8)
            .collect();
        let codes: Vec<u8> = (0..70_000)
            .flat_map(|i| [b"AIR", b"FOB", b"REG", b"SHP"][(i * 5 + (i >> 4)) % 4].to_vec())
            .collect();
        let mixed: Vec<u8> = (0..70_000)
            .flat_map(|i| {
                if (8192..12_288).contains(&i) {
                    [b"0123456789AB".to_vec(), b"XYZXYZXYZXYZ".to_vec()][i % 2].clone()
                } else {
                    [b"ab".to_vec(), b"cde".to_vec()][(i / 3) % 2].clone()
                }
            })
            .collect();
        for bytes in [digits, runs, flags, letters, codes, mixed] {
            let v = Values::Int(zipflow_core::IntVec::U8(bytes));
            let node = encode(&"chartable".parse()?, &v)?;
            assert_eq!(decode_bytes(&node.to_bytes()?)?, v);
        }
        Ok(())
    }

    use crate::chardict::decode_block;
    use crate::chardict::tests::text;
    use crate::testing::*;
    use crate::{decode_bytes, encode};
    use proptest::prelude::*;

    fn u8s(v: &[u8]) -> Values {
        Values::Int(IntVec::U8(v.to_vec()))
    }

    /// Text whose character mix changes every few blocks: digits, then text, then noise.
    fn mixed(seed: u64, n: usize) -> Vec<u8> {
        let mut r = random(seed);
        let t = text(seed, n);
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            let run = (1 + r() % 5) as usize * CHUNK;
            match r() % 3 {
                0 => out.extend((0..run).map(|_| b"0123456789,\n"[(r() % 12) as usize])),
                1 => out.extend_from_slice(&t[..run.min(t.len())]),
                _ => out.extend((0..run).map(|_| r() as u8)),
            }
        }
        out.truncate(n);
        out
    }

    fn cases() -> Vec<Vec<u8>> {
        let mut r = random(17);
        let mut cases = vec![vec![], vec![b'e'], vec![0x80]];
        for n in [1023, 1024, 1025, 20_000] {
            cases.push(text(n as u64, n));
            cases.push(mixed(n as u64, n));
            cases.push((0..n).map(|_| r() as u8).collect());
        }
        cases.push((0..=255u8).collect());
        cases.push(vec![b' '; 5000]);
        // Enough blocks per table that decoding builds lookup tables for some and not others.
        cases.push(text(31, 120_000));
        cases.push(mixed(32, 300_000));
        cases
    }

    /// The layout other decoders get: each block decoded alone from its first code with the
    /// 10-bit tables, a code at a time, gives the input and ends at its end bit.
    #[test]
    fn layouts_decode_a_code_at_a_time_with_ten_bit_tables() -> Result<()> {
        for c in cases() {
            for p in ["chardict16", "chartable", "chartable(3)", "chartable(16)"] {
                let bytes = encode(&plan(p), &u8s(&c))?.to_bytes()?;
                let view = NodeView::parse(&bytes)?;
                let l = if p == "chardict16" {
                    crate::chardict::layout(&view)?
                } else {
                    layout(&view)?
                };
                assert_eq!(l.blocks.len(), c.len().div_ceil(CHUNK), "{p}");
                let tables: Vec<Vec<u16>> = l.codes.iter().map(CharCode::table10).collect();
                let mut out = Vec::with_capacity(c.len());
                for (b, &(first, end, t)) in l.blocks.iter().enumerate() {
                    let mut pos = first;
                    for _ in 0..(c.len() - b * CHUNK).min(CHUNK) {
                        let e = tables[t][peek(l.payload, pos, 10) as usize];
                        out.push(e as u8);
                        pos += u64::from(e >> 8);
                    }
                    assert_eq!(pos, end, "{p}: block {b}");
                }
                assert!(out == c, "{p}: {} bytes decode differently", c.len());
            }
        }
        Ok(())
    }

    #[test]
    fn round_trips() -> Result<()> {
        for c in cases() {
            for p in [
                "chartable",
                "chartable(1)",
                "chartable(2)",
                "chartable(3)",
                "chartable(16)",
            ] {
                round_trip(&plan(p), &u8s(&c))?;
            }
        }
        Ok(())
    }

    /// Every assignment of `nchoices` choices to the blocks, by counting in base `nchoices`.
    fn brute_force(costs: &[u64], nchoices: usize, sw: SwitchCost) -> u64 {
        let nblocks = costs.len() / nchoices;
        let mut best = u64::MAX;
        for mut code in 0..nchoices.pow(nblocks as u32) {
            let mut total = 0;
            let mut prev = None;
            for b in 0..nblocks {
                let c = code % nchoices;
                code /= nchoices;
                total += costs[b * nchoices + c]
                    + match prev {
                        None => sw.first,
                        Some(p) if p == c => sw.stay,
                        Some(_) => sw.change,
                    };
                prev = Some(c);
            }
            best = best.min(total);
        }
        best
    }

    fn path_cost(costs: &[u64], nchoices: usize, sw: SwitchCost, choice: &[u8]) -> u64 {
        choice
            .iter()
            .enumerate()
            .map(|(b, &c)| {
                costs[b * nchoices + usize::from(c)]
                    + match b {
                        0 => sw.first,
                        _ if choice[b - 1] == c => sw.stay,
                        _ => sw.change,
                    }
            })
            .sum()
    }

    #[test]
    fn shortest_path_is_exact() {
        let mut r = random(23);
        for nchoices in 1..=4usize {
            for nblocks in 1..=7usize {
                if nchoices.pow(nblocks as u32) > 20_000 {
                    continue;
                }
                for _ in 0..30 {
                    let costs: Vec<u64> = (0..nblocks * nchoices).map(|_| r() % 20).collect();
                    let stay = r() % 3;
                    let sw = SwitchCost {
                        first: r() % 4,
                        stay,
                        change: stay + r() % 12,
                    };
                    let (total, choice) = shortest_path(&costs, nchoices, sw);
                    assert_eq!(choice.len(), nblocks);
                    assert_eq!(total, brute_force(&costs, nchoices, sw), "{costs:?} {sw:?}");
                    assert_eq!(path_cost(&costs, nchoices, sw, &choice), total);
                }
            }
        }
    }

    #[test]
    fn stream_size_is_what_the_path_predicts() -> Result<()> {
        // Payload bits counted independently: every byte by its block's table, plus the
        // announcements, from the node's own tables and index.
        let data = mixed(4, 40_000);
        let node = encode(&plan("chartable(4)"), &u8s(&data))?;
        let bytes = node.to_bytes()?;
        let view = NodeView::parse(&bytes)?;
        let p = parse(&view)?;
        let sw = SwitchCost::of(p.codes.len());
        let mut bits = 0u64;
        for (b, block) in data.chunks(CHUNK).enumerate() {
            let code = &p.codes[usize::from(p.tables[b])];
            bits += block
                .iter()
                .map(|c| {
                    code.tiers()
                        .find(|(chars, _)| chars.contains(c))
                        .map_or(u64::from(code.escape_bits()), |(_, len)| u64::from(len))
                })
                .sum::<u64>();
            bits += match b {
                0 => sw.first,
                _ if p.tables[b - 1] == p.tables[b] => sw.stay,
                _ => sw.change,
            };
        }
        assert_eq!(node.buffers[0].len() as u64, bits.div_ceil(8));
        assert!(p.codes.len() > 1, "mixed data should use several tables");
        Ok(())
    }

    #[test]
    fn more_tables_never_cost_more_on_mixed_data() -> Result<()> {
        let data = mixed(8, 100_000);
        let size = |t: usize| -> Result<usize> {
            Ok(encode(&plan(&format!("chartable({t})")), &u8s(&data))?.buffers[0].len())
        };
        let one = size(1)?;
        let four = size(4)?;
        assert!(four < one, "{four} vs {one}");
        // And one trained table beats the published one on text.
        let t = text(2, 50_000);
        let trained = encode(&plan("chartable(1)"), &u8s(&t))?.buffers[0].len();
        let published = encode(&plan("chardict16"), &u8s(&t))?.buffers[0].len();
        assert!(trained <= published, "{trained} vs {published}");
        Ok(())
    }

    #[test]
    fn every_block_decodes_alone() -> Result<()> {
        let data = mixed(6, 9 * CHUNK + 300);
        let node = encode(&plan("chartable(4)"), &u8s(&data))?;
        let bytes = node.to_bytes()?;
        let view = NodeView::parse(&bytes)?;
        let p = parse(&view)?;
        for (b, block) in data.chunks(CHUNK).enumerate() {
            // From its index entry alone: skip its announcement, then decode its bytes.
            let t = usize::from(p.tables[b]);
            let sw = SwitchCost::of(p.codes.len());
            let ann = match b {
                0 => sw.first,
                _ if p.tables[b - 1] == p.tables[b] => sw.stay,
                _ => sw.change,
            };
            let mut out = vec![0u8; block.len()];
            let end = decode_block(
                p.payload,
                p.offsets[b] + ann,
                &p.codes[t].decoder(),
                &mut out,
            );
            assert_eq!(out, block, "block {b}");
            assert_eq!(end, p.offsets[b + 1]);
        }
        Ok(())
    }

    #[test]
    fn usage_counts_blocks_and_bytes() -> Result<()> {
        let data = mixed(3, 30 * CHUNK + 5);
        let node = encode(&plan("chartable(8)"), &u8s(&data))?;
        let bytes = node.to_bytes()?;
        let view = NodeView::parse(&bytes)?;
        let uses = table_usage(&view)?;
        assert_eq!(uses.iter().map(|u| u.blocks).sum::<usize>(), 31);
        assert_eq!(uses.iter().map(|u| u.bytes).sum::<usize>(), data.len());
        assert!(uses.iter().all(|u| {
            u.blocks > 0
                && u.chars.len() == u.bits.len()
                && u.bits.iter().all(|&b| b < u.escape_bits)
        }));
        assert_eq!(described(&bytes)?, "chartable(8)");
        Ok(())
    }

    #[test]
    fn is_deterministic() -> Result<()> {
        let data = mixed(12, 50_000);
        let a = encode(&plan("chartable(8)"), &u8s(&data))?.to_bytes()?;
        let b = encode(&plan("chartable(8)"), &u8s(&data))?.to_bytes()?;
        assert_eq!(a, b);
        Ok(())
    }

    #[test]
    fn rejects_bad_plans() {
        for p in ["chartable(0)", "chartable(17)"] {
            assert!(
                matches!(encode(&plan(p), &u8s(b"ab")), Err(Error::Plan { .. })),
                "{p}"
            );
        }
        let e = encode(&plan("chartable"), &Values::Int(IntVec::I8(vec![1])));
        assert!(matches!(e, Err(Error::Plan { .. })));
    }

    #[test]
    fn corruption_is_an_error_not_a_panic() -> Result<()> {
        let data = mixed(5, 4000);
        for p in ["chartable(1)", "chartable(4)"] {
            let node = encode(&plan(p), &u8s(&data))?;
            check_corruption(p, &node, 3)?;
        }
        let node = encode(&plan("chartable(4)"), &u8s(&data))?;
        // A block index naming a table that does not exist, or another table.
        let e = corrupted(&node, |n| n.buffers[1][4] |= 15)?;
        assert!(e.contains("table"), "{e}");
        let e = corrupted(&node, |n| n.meta[1] = 17)?;
        assert!(e.contains("tables"), "{e}");
        let e = corrupted(&node, |n| n.len = 1 << 20)?;
        assert!(e.contains("cannot hold"), "{e}");
        Ok(())
    }

    proptest! {
        #[test]
        fn round_trip_any_bytes(v in prop::collection::vec(any::<u8>(), 0..5000), t in 1usize..6) {
            let bytes = encode(&plan(&format!("chartable({t})")), &u8s(&v)).and_then(|n| n.to_bytes())
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(decode_bytes(&bytes).map_err(|e| TestCaseError::fail(e.to_string()))?, u8s(&v));
        }

        #[test]
        fn round_trip_mixed(seed in any::<u64>(), n in 0usize..12_000, t in 1usize..9) {
            round_trip(&plan(&format!("chartable({t})")), &u8s(&mixed(seed, n)))
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
        }
    }
}
