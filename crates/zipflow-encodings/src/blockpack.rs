//! Bit-packing with a width and a reference per 1024-value block, chosen by a shortest path.
//!
//! `for | bitpack` stores every value of a chunk at the width of the chunk's whole range. A
//! column whose values stay in a narrow local range that drifts (sensor readings, ids handed
//! out in batches, timestamps with jitter) needs far fewer bits per block: each block here gets
//! its own reference (its minimum) and its own bit width, as FastLanes and BtrBlocks do per
//! vector. Which width each block takes is an exact shortest path over (block, width)
//! ([`shortest_path`]): the stream's bits plus the bits that announce a change of width (widths
//! are stored as runs), so a chunk never pays more for its widths than it saves.
//!
//! Decoding is fully parallel: every block unpacks alone (fused unpack and add-reference,
//! FastLanes' `unfor_pack`), its offset being the prefix sum of the widths before it.
//!
//! Node: no meta; buffer 0 = width runs, one u32 each, `blocks << 8 | width`; buffer 1 = the
//! packed blocks one after the other, block `b` in `128 * width_b` bytes of the stream's
//! unsigned type (the last block zero-padded); child 0 (`refs`) = one reference per block, of
//! the stream's type, default plan `for | bitpack`.

use crate::memo::Split;
use crate::node::{EncodedNode, NodeView, cast_or_copy};
use crate::{Encoding, Pattern, Scratch, Slot, encode_child, expect_child};
use fastlanes::{BitPacking, FoR};
use std::rc::Rc;
use zipflow_core::values::IntVecOf;
use zipflow_core::{Error, Int, PType, Plan, Result, VECTOR_LEN, Values, match_ints};

/// `blockpack(refs: ...)`.
pub struct BlockPack;

/// On-disk id of [`BlockPack`].
pub const ID: u16 = DESCRIPTOR.id;

/// Cost of an option that a block cannot take.
pub const INFEASIBLE: u64 = u64::MAX / 4;

/// Bits that announce a block's option: the first block's, one kept from the previous block,
/// and one that changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Switch {
    /// Announcing the first block's option.
    pub first: u64,
    /// A block that keeps the previous block's option.
    pub stay: u64,
    /// A block that takes another option than the previous block.
    pub change: u64,
}

/// Bits of one width run (`blocks << 8 | width` as a u32).
const RUN_BITS: u64 = 32;

/// Width runs cost a run entry when the width changes and nothing while it stays.
pub const WIDTH_SWITCH: Switch = Switch {
    first: RUN_BITS,
    stay: 0,
    change: RUN_BITS,
};

/// The exact cheapest choice of one option per block: minimises the sum of
/// `costs[b * noptions + j]` over the chosen `j` of every block `b`, plus `switch.first` for
/// block 0, `switch.stay` for each block that keeps its predecessor's option and
/// `switch.change` for each that does not. Returns the total and the option of every block.
///
/// Dynamic programming over (block, option) in `O(blocks x options)`: with a uniform change
/// cost, the best way into option `j` of block `b` either stays on `j` or changes from the
/// best option of block `b - 1`, so each step is one minimum over the row and one
/// element-wise select, both of which vectorise. The back pointers are the option itself
/// when staying, so the backtrack takes the branch `j != from` rarely and the predictor keeps
/// the dependent loads off the critical path. Ties go to staying, then to the lower option.
/// Options of cost [`INFEASIBLE`] or more are never taken while a block has a cheaper one;
/// `noptions` must be at most 256 (returns nothing otherwise).
///
/// ```
/// use zipflow_encodings::blockpack::{Switch, shortest_path};
/// // Option 0 is cheaper in the middle block, but not by the two changes it would take.
/// let costs = [10, 0, 4, 10, 10, 0];
/// let sw = Switch { first: 1, stay: 1, change: 6 };
/// assert_eq!(shortest_path(&costs, 2, sw), (1 + 0 + 1 + 0 + 1 + 10, vec![1, 1, 1]));
/// ```
pub fn shortest_path(costs: &[u64], noptions: usize, switch: Switch) -> (u64, Vec<u8>) {
    if noptions == 0 || noptions > 256 || costs.len() < noptions {
        return (0, Vec::new());
    }
    let nblocks = costs.len() / noptions;
    let mut row: Vec<u64> = costs[..noptions]
        .iter()
        .map(|&c| c.saturating_add(switch.first))
        .collect();
    // from[b * noptions + j]: the option of block b - 1 on the best path into (b, j).
    let mut from = vec![0u8; nblocks * noptions];
    for (j, f) in from[..noptions].iter_mut().enumerate() {
        *f = j as u8;
    }
    for b in 1..nblocks {
        let (p, best) = argmin(&row);
        let via = best.saturating_add(switch.change);
        let p = p as u8;
        let cost = &costs[b * noptions..(b + 1) * noptions];
        let back = &mut from[b * noptions..(b + 1) * noptions];
        for (j, ((r, &c), f)) in row.iter_mut().zip(cost).zip(back).enumerate() {
            let stay = r.saturating_add(switch.stay);
            let change = via < stay;
            *f = if change { p } else { j as u8 };
            *r = (if change { via } else { stay }).saturating_add(c);
        }
    }
    let (mut j, total) = argmin(&row);
    let mut choice = vec![0u8; nblocks];
    for b in (0..nblocks).rev() {
        choice[b] = j as u8;
        let prev = usize::from(from[b * noptions + j]);
        if j != prev {
            j = prev;
        }
    }
    (total, choice)
}

/// The first smallest entry: its index and value. The minimum is a vectorised reduction; the
/// search for its position stops at the first hit.
#[inline]
fn argmin(row: &[u64]) -> (usize, u64) {
    let best = row.iter().copied().fold(u64::MAX, u64::min);
    let at = row.iter().position(|&v| v == best).unwrap_or(0);
    (at, best)
}

/// Each block's minimum and the width its offsets from it need.
fn block_stats<T: Int>(values: &[T]) -> (Vec<T>, Vec<u8>) {
    let mut refs = Vec::with_capacity(values.len().div_ceil(VECTOR_LEN));
    let mut needs = Vec::with_capacity(refs.capacity());
    for block in values.chunks(VECTOR_LEN) {
        let lo = block.iter().copied().min().unwrap_or(T::ZERO);
        let hi = block.iter().copied().max().unwrap_or(T::ZERO);
        refs.push(lo);
        needs.push(hi.wrapping_sub(lo).to_bits().used_bits() as u8);
    }
    (refs, needs)
}

/// The width of every block: the shortest path over widths `0..=bits`, a width being
/// feasible when it holds the block's offsets.
fn choose_widths(needs: &[u8], bits: u32) -> Vec<u8> {
    let noptions = bits as usize + 1;
    let mut costs = vec![INFEASIBLE; needs.len() * noptions];
    for (row, &need) in costs.chunks_exact_mut(noptions).zip(needs) {
        for (w, c) in row.iter_mut().enumerate().skip(usize::from(need)) {
            *c = (VECTOR_LEN * w) as u64;
        }
    }
    shortest_path(&costs, noptions, WIDTH_SWITCH).1
}

/// Width runs as stored: `blocks << 8 | width`.
fn runs_of(widths: &[u8]) -> Vec<u32> {
    let mut runs: Vec<u32> = Vec::new();
    for &w in widths {
        match runs.last_mut() {
            Some(r) if (*r & 0xff) as u8 == w => *r += 1 << 8,
            _ => runs.push(1 << 8 | u32::from(w)),
        }
    }
    runs
}

fn pack_blocks<T: Int>(values: &[T], refs: &[T], widths: &[u8]) -> Vec<T::U> {
    let words_per_bit = VECTOR_LEN / T::BITS as usize;
    let total: usize = widths.iter().map(|&w| usize::from(w) * words_per_bit).sum();
    let mut out = vec![<T::U as Int>::ZERO; total];
    let mut tail = [<T::U as Int>::ZERO; VECTOR_LEN];
    let mut at = 0;
    for ((block, &r), &w) in values.chunks(VECTOR_LEN).zip(refs).zip(widths) {
        let w = usize::from(w);
        if w == 0 {
            continue;
        }
        for (t, &v) in tail.iter_mut().zip(block) {
            *t = v.wrapping_sub(r).to_bits();
        }
        tail[block.len()..].fill(<T::U as Int>::ZERO);
        let dst = &mut out[at..at + w * words_per_bit];
        // SAFETY: `tail` holds 1024 values, `dst` 1024 * w / BITS words, and `w` (at least the
        // block's need, at most BITS: the shortest path only takes feasible widths) covers
        // every offset.
        unsafe { <T::U as BitPacking>::unchecked_pack(w, &tail, dst) };
        at += w * words_per_bit;
    }
    out
}

/// Node size without the references child: table (16 B header and three u32 entries, padded)
/// plus the two padded buffers.
fn own_size(runs: usize, widths: &[u8]) -> usize {
    let packed: usize = widths.iter().map(|&w| 128 * usize::from(w)).sum();
    32 + (4 * runs).next_multiple_of(8) + packed.next_multiple_of(8)
}

impl Encoding for BlockPack {
    fn descriptor(&self) -> &'static crate::Descriptor {
        &DESCRIPTOR
    }
    fn child_shape(&self, slot: &str, shape: crate::Shape) -> crate::Shape {
        // One reference per 1024-value block.
        let _ = slot;
        shape.per(1.0 / zipflow_core::VECTOR_LEN as f64).numbers()
    }
    fn calibration(&self) -> Vec<crate::Calibration> {
        vec![crate::Calibration {
            stream: calibration_local(),
            plan: "blockpack(refs: plain)",
            minus: &[(crate::selection::RAW, 1.0 / 1024.0)],
        }]
    }
    fn accepts(&self, ptype: PType) -> bool {
        ptype.is_int()
    }

    fn encode(&self, plan: &Plan, input: &Values) -> Result<EncodedNode> {
        let Values::Int(v) = input else {
            return Err(Error::plan(plan, "blockpack needs integers"));
        };
        let mut node = EncodedNode::new(ID, v.ptype(), v.len())?;
        let (runs, packed, refs) = match_ints!(v, T, x => {
            let (refs, needs) = block_stats(x);
            let widths = choose_widths(&needs, T::BITS);
            let packed = pack_blocks(x, &refs, &widths);
            let bytes: Vec<u8> = bytemuck::cast_slice(&packed).to_vec();
            (runs_of(&widths), bytes, Values::Int(T::wrap(refs)))
        });
        node.buffers
            .push(runs.iter().flat_map(|r| r.to_le_bytes()).collect());
        node.buffers.push(packed);
        node.children.push(encode_child(plan, self, "refs", &refs)?);
        Ok(node)
    }

    fn decode(&self, node: &NodeView<'_>, out: &mut Values, scratch: &mut Scratch) -> Result<()> {
        let runs = View::parse(node)?.runs;
        let refs = scratch.decode(&node.children[0])?;
        let Values::Int(out) = out else {
            scratch.give(refs);
            return Err(Error::corrupt("blockpack node for non-integer values"));
        };
        let result = match (&refs, &mut *out) {
            (Values::Int(r), o) => match_ints!(o, T, o => match T::slice(r) {
                Some(r) => {
                    let mut bits: Vec<<T as Int>::U> =
                        bytemuck::allocation::cast_vec(std::mem::take(o));
                    let res = decode_blocks::<T>(node, &runs, r, &mut bits);
                    *o = bytemuck::allocation::cast_vec(bits);
                    res
                }
                None => Err(Error::corrupt("blockpack references have the wrong type")),
            }),
            _ => Err(Error::corrupt("blockpack references are not integers")),
        };
        scratch.give(refs);
        result
    }

    fn split(&self, plan: &Plan, input: &Values) -> Option<Result<Rc<Split>>> {
        // Exact: the widths are the encoder's, only the references child is estimated.
        crate::memo::split_ints("blockpack", plan, input, |v| {
            let (own, refs) = match_ints!(v, T, x => {
                let (refs, needs) = block_stats(x);
                let widths = choose_widths(&needs, T::BITS);
                (own_size(runs_of(&widths).len(), &widths), Values::Int(T::wrap(refs)))
            });
            Ok(Split {
                own,
                children: vec![refs],
            })
        })
    }
}

/// A checked `blockpack` node: its width runs, checked against the node's length and its
/// packed buffer, which holds exactly the words they need; the references child holds one
/// value per block.
#[derive(Debug, Clone)]
pub struct View {
    /// The width runs, `blocks << 8 | width` each.
    pub runs: Vec<u32>,
}

impl View {
    /// Checks a `blockpack` node and reads its width runs.
    pub fn parse(node: &NodeView<'_>) -> Result<View> {
        node.expect_shape("blockpack", 2, 1)?;
        node.meta_reader().finish("blockpack")?;
        if !node.ptype.is_int() {
            return Err(Error::corrupt(format!(
                "blockpack node for {} values",
                node.ptype
            )));
        }
        let nblocks = node.len.div_ceil(VECTOR_LEN);
        expect_child(node, 0, "references", node.ptype, Some(nblocks))?;
        let bits = (node.ptype.byte_width() * 8) as u32;
        let mut copy = Vec::new();
        let runs = cast_or_copy::<u32>(node.buffer(0, "width runs")?, &mut copy, "runs")?.to_vec();
        let words_per_bit = VECTOR_LEN / bits as usize;
        let (mut blocks, mut words) = (0usize, 0usize);
        for &r in &runs {
            let (count, width) = ((r >> 8) as usize, r & 0xff);
            if count == 0 || width > bits {
                return Err(Error::corrupt(format!(
                    "blockpack run of {count} blocks at width {width} for {bits}-bit values"
                )));
            }
            blocks += count;
            if blocks > nblocks {
                return Err(Error::corrupt(format!(
                    "blockpack runs cover more than the {nblocks} blocks of {} values",
                    node.len
                )));
            }
            words += count * width as usize * words_per_bit;
        }
        if blocks != nblocks {
            return Err(Error::corrupt(format!(
                "blockpack runs cover {blocks} blocks, {} values need {nblocks}",
                node.len
            )));
        }
        let packed = node.buffer(1, "packed")?.len();
        if packed != words * (bits as usize / 8) {
            return Err(Error::corrupt(format!(
                "blockpack packed buffer has {packed} bytes, the widths need {words} words of {bits} bits"
            )));
        }
        Ok(View { runs })
    }
}

/// Unpacks every block of a checked node (its `runs`, see [`View::parse`]) with its reference added.
fn decode_blocks<T: Int>(
    node: &NodeView<'_>,
    runs: &[u32],
    refs: &[T],
    out: &mut Vec<T::U>,
) -> Result<()> {
    let nblocks = node.len.div_ceil(VECTOR_LEN);
    let words_per_bit = VECTOR_LEN / T::BITS as usize;
    let mut copy = Vec::new();
    let packed = cast_or_copy::<T::U>(node.buffer(1, "packed")?, &mut copy, "packed")?;
    crate::resize_for_overwrite(out, nblocks * VECTOR_LEN, <T::U as Int>::ZERO);
    let (mut at, mut block) = (0usize, 0usize);
    for &r in runs {
        let width = (r & 0xff) as usize;
        let per_block = width * words_per_bit;
        for _ in 0..(r >> 8) as usize {
            let reference = refs[block].to_bits();
            let dst = &mut out[block * VECTOR_LEN..(block + 1) * VECTOR_LEN];
            if width == 0 {
                dst.fill(reference);
            } else {
                let src = &packed[at..at + per_block];
                // SAFETY: `check` checked the runs: `width <= BITS`, they cover exactly
                // `nblocks` blocks and `packed` holds exactly their words, so `src` is one
                // block's 1024 * width / BITS words; `dst` is one 1024-value block.
                unsafe { <T::U as FoR>::unchecked_unfor_pack(width, src, reference, dst) };
            }
            at += per_block;
            block += 1;
        }
    }
    out.truncate(node.len);
    Ok(())
}

/// What `blockpack` is: its id, name, child slots, GPU decoding and part in the search.
pub const DESCRIPTOR: crate::Descriptor = crate::Descriptor {
    id: 17,
    name: "blockpack",
    slots: &[Slot {
        name: "refs",
        default: "for | bitpack",
    }],
    leaf_for_numbers: false,
    gpu: crate::GpuDecode::not_parallel(Pattern::FullyParallel),
    search: crate::Search::numeric(crate::Role::Inner {
        side_streams: false,
    }),
};

/// Small noise over a reference that jumps every block.
fn calibration_local() -> zipflow_core::Values {
    let mut rnd = crate::selection::xorshift(0x5be0_cd19_137e_2179);
    crate::selection::ints(
        (0..crate::selection::CALIBRATION_LEN as i64)
            .map(|i| (i / 1024) * 1_000_003 + (rnd() % 64) as i64)
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use zipflow_core::IntVec;

    /// Every path, for a few blocks and options.
    fn brute_force(costs: &[u64], n: usize, sw: Switch) -> u64 {
        let blocks = costs.len() / n;
        let mut best = u64::MAX;
        for code in 0..n.pow(blocks as u32) {
            let mut c = code;
            let mut total = 0u64;
            let mut prev = usize::MAX;
            for b in 0..blocks {
                let j = c % n;
                c /= n;
                total += costs[b * n + j]
                    + match prev {
                        usize::MAX => sw.first,
                        p if p == j => sw.stay,
                        _ => sw.change,
                    };
                prev = j;
            }
            best = best.min(total);
        }
        best
    }

    #[test]
    fn shortest_path_is_exact() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for case in 0..400 {
            let n = 1 + case % 4;
            let blocks = case % 7;
            let costs: Vec<u64> = (0..n * blocks)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x % 20
                })
                .collect();
            let sw = Switch {
                first: x % 3,
                stay: x % 2,
                change: 2 + x % 9,
            };
            let (total, path) = shortest_path(&costs, n, sw);
            if blocks == 0 {
                assert_eq!((total, path.len()), (0, 0));
                continue;
            }
            assert_eq!(total, brute_force(&costs, n, sw), "{costs:?} {sw:?}");
            let mut again = sw.first + costs[usize::from(path[0])];
            for b in 1..blocks {
                let j = usize::from(path[b]);
                again += costs[b * n + j]
                    + if path[b] == path[b - 1] {
                        sw.stay
                    } else {
                        sw.change
                    };
            }
            assert_eq!(again, total, "the path does not cost what was returned");
        }
    }

    #[test]
    fn local_ranges_pack_small() -> Result<()> {
        // 64 blocks, each within 16 of a base that jumps by millions.
        let v: Vec<i64> = (0..65_536i64)
            .map(|i| (i / 1024) * 3_000_017 + (i * 7) % 16)
            .collect();
        let values = Values::Int(IntVec::I64(v));
        let plan: Plan = "blockpack".parse()?;
        let node = crate::encode(&plan, &values)?;
        let global = crate::encode(&"for | bitpack".parse()?, &values)?;
        assert!(
            node.size() * 4 < global.size(),
            "{} vs {}",
            node.size(),
            global.size()
        );
        assert_eq!(crate::estimate(&plan, &values)?, node.size());
        assert_eq!(crate::decode_bytes(&node.to_bytes()?)?, values);
        Ok(())
    }

    #[test]
    fn widths_never_cost_more_than_they_save() {
        // A lone narrow block between wide ones keeps its own width: 1024 bits saved per bit
        // outweigh two run entries.
        let w = choose_widths(&[9, 3, 9, 9], 64);
        assert_eq!(w, vec![9, 3, 9, 9]);
        assert_eq!(runs_of(&w), vec![1 << 8 | 9, 1 << 8 | 3, 2 << 8 | 9]);
    }
}
