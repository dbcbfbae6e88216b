//! The stream-by-stream cascade, for objectives that add up over a plan's nodes: each child
//! stream's plan is chosen on the stream itself.

use zipflow_core::plan::THEN;
use zipflow_core::{PType, Plan, VECTOR_LEN, Values};
use zipflow_encodings::{GpuPlace, Role, Shape, estimate};

use super::objective::rank_by;
use super::scorer::{Scorer, extrapolate};
use super::space::{
    Family, cascade_leaves, child_streams, entropy_coders, inner, leaves_for, side_slot,
    slot_forms, split_changes, string_roots, type_change,
};
use super::{Candidate, Objective, SelectOptions, select_at};

/// A subplan chosen for one stream: its plan, estimated size (of the whole stream) and decode
/// time.
#[derive(Debug, Clone)]
struct Sub {
    plan: Plan,
    size: f64,
    ns: f64,
}

/// The cascade for an objective that adds up over nodes: every root form for `sample`, each
/// inner primitive with the best plan for each of its child streams, chosen on that stream
/// the same way (`room` primitives deep). A plan's size is its nodes' own bytes plus its
/// children's sizes, and its decode time the same sum, so this finds the best plan of the
/// whole space while scoring each (stream, form) pair once. Returns the root forms, best
/// first.
pub(super) fn by_streams(
    scorer: &mut Scorer<'_>,
    family: Family,
    room: usize,
    key: (f64, f64),
) -> Vec<Candidate> {
    let (sample, shape) = (scorer.sample, scorer.shape);
    let mut roots = Vec::new();
    if family == Family::Float {
        // The leaves that take floats as they are, and every other form below the change of
        // type.
        let direct = leaves_for(sample.ptype());
        for leaf in &direct {
            let at = Stream::root(scorer, shape);
            roots.extend(leaf_sub(sample, at, leaf, scorer));
        }
        if let Some(change) = type_change(sample.ptype())
            && let Some(Ok(split)) = zipflow_encodings::split(&Plan::new(change.name()), sample)
            && let Some(stream) = split.children.first()
        {
            let child = change.child_shape(THEN, shape);
            let own = (
                extrapolate(split.own, 1, scorer.scale),
                scorer.options.costs.own_ns(change.name(), shape),
            );
            let at = Stream {
                shape: child,
                side: false,
                place: change.gpu().child_place(scorer.top(), THEN),
                scale: scorer.scale,
                distinct: scorer.distinct,
            };
            for sub in forms(stream, at, room, key, scorer, &direct) {
                roots.push(Sub {
                    plan: Plan::new(change.name()).then(sub.plan),
                    size: own.0 + sub.size,
                    ns: own.1 + sub.ns,
                });
            }
        }
        // Changes of type into several streams (`alprd`'s two parts), each stream with its
        // best plan; a change that takes floats the objective does not allow is left out.
        let at = Stream::root(scorer, shape);
        for change in split_changes(sample.ptype()) {
            if scorer.allows_at(change.name(), at.place)
                && let Some(Ok(split)) = zipflow_encodings::split(&Plan::new(change.name()), sample)
            {
                roots.extend(compose(change, &split, at, room + 1, key, scorer));
            }
        }
    } else {
        let at = Stream::root(scorer, shape);
        roots = forms(sample, at, room, key, scorer, &[]);
    }
    let mut ranked: Vec<Candidate> = roots
        .into_iter()
        .map(|r| {
            let decode_ns = r.ns.max(1e-3);
            Candidate {
                plan: r.plan,
                size: r.size.round() as usize,
                decode_ns,
                decode_gbs: scorer.plain_bytes / decode_ns,
            }
        })
        .collect();
    rank_by(&mut ranked, scorer.options.objective);
    ranked
}

/// What the cascade knows of a stream besides its values.
#[derive(Debug, Clone, Copy)]
struct Stream {
    /// Its shape, for decode costs.
    shape: Shape,
    /// Whether it is an exception side stream (leaves only).
    side: bool,
    /// Where its plan sits, for what the GPU decodes at full speed there (see
    /// [`gpu_parallel`](super::gpu_parallel)).
    place: GpuPlace,
    /// How many times longer the stream is on the whole chunk than in the sample.
    scale: f64,
    /// How many times as many distinct values the stream holds on the whole chunk as in the
    /// sample, where known (counted on the column; carried through transforms unchanged).
    distinct: Option<f64>,
}

impl Stream {
    /// The column's own stream (or a string column's child stream) at `shape`.
    fn root(scorer: &Scorer<'_>, shape: Shape) -> Stream {
        Stream {
            shape,
            side: false,
            place: scorer.top(),
            scale: scorer.scale,
            distinct: scorer.distinct,
        }
    }
}

/// Every form for `stream` with room for `room` primitives, leaves but those in `skip`, each
/// inner primitive with the best plan for each child stream.
fn forms(
    stream: &Values,
    at: Stream,
    room: usize,
    key: (f64, f64),
    scorer: &mut Scorer<'_>,
    skip: &[&str],
) -> Vec<Sub> {
    let mut out = leaf_forms(stream, at, scorer, skip);
    // Exception streams are a few percent of the values: leaves only, so a primitive with
    // side streams costs the search little more than one without.
    if room < 2 || at.side {
        return out;
    }
    for enc in inner() {
        let name = enc.name();
        if !scorer.allows_at(name, at.place) {
            continue;
        }
        let Some(Ok(split)) = zipflow_encodings::split(&Plan::new(name), stream) else {
            continue;
        };
        out.extend(compose(enc, &split, at, room, key, scorer));
    }
    out
}

/// Primitive `enc`, which split a stream at `at` into `split`, with the best plan for each of
/// its child streams (`room - 1` primitives deep); `None` where a child stream has no plan.
fn compose(
    enc: &dyn zipflow_encodings::Encoding,
    split: &zipflow_encodings::Split,
    at: Stream,
    room: usize,
    key: (f64, f64),
    scorer: &mut Scorer<'_>,
) -> Option<Sub> {
    let name = enc.name();
    scorer.forms_scored += 1;
    let mut sub = Sub {
        plan: Plan::new(name),
        size: extrapolate(split.own, 1, at.scale),
        ns: scorer.options.costs.own_ns(name, at.shape),
    };
    // What each child stream stands for on the whole chunk: grown with the stream, or as
    // the primitive says (a dictionary grows with the distinct values). (The sample's own
    // streams are passed as they are: the split memo knows them.)
    let grown = at
        .distinct
        .and_then(|d| enc.extrapolate_split(split, at.scale, d));
    let children: Vec<(&Values, f64)> = match &grown {
        Some(g) => g.iter().map(|(c, s)| (c, *s)).collect(),
        None => split.children.iter().map(|c| (c, at.scale)).collect(),
    };
    for (slot, &(child, scale)) in enc.slots().iter().zip(&children) {
        let side = at.side || side_slot(enc, slot.name);
        // A handful of sampled values (a sample's two exception counts) cannot tell
        // whether a leaf that needs every value alike fits the whole chunk.
        let skip = if side && child.len() < 8 {
            uniform_leaves()
        } else {
            Vec::new()
        };
        let child_at = Stream {
            shape: enc.child_shape(slot.name, at.shape),
            side,
            place: enc.gpu().child_place(at.place, slot.name),
            scale,
            distinct: at.distinct,
        };
        let best = forms(child, child_at, room - 1, key, scorer, &skip)
            .into_iter()
            .min_by(|a, b| weigh(a, key).total_cmp(&weigh(b, key)))?;
        sub.plan = sub.plan.child(slot.name, best.plan);
        sub.size += best.size;
        sub.ns += best.ns;
    }
    Some(sub)
}

/// The leaves the cascade tries on `stream`, but those in `skip`: every leaf, the leaves for
/// long streams where it is long, and the entropy coders where size is all that counts.
fn leaf_forms(stream: &Values, at: Stream, scorer: &mut Scorer<'_>, skip: &[&str]) -> Vec<Sub> {
    // A leaf for long streams of small values (codes) saves a few bytes on a short stream (a
    // dictionary's entries, exceptions), and its parameters, compiled into GPU kernels,
    // vary from chunk to chunk.
    let short = at.side || stream.len() < VECTOR_LEN;
    let gpu = scorer.options.objective == Objective::Gpu;
    // An entropy coder (`ans`: unsigned streams of at most 32 bits, so `zigzag | ans` for
    // signed ones; `zstd`) where size is all that counts, and for the balanced objective
    // where the whole plan saves a margin (see `select_at`): it decodes serially and no scan
    // predicate reads it packed, so the other objectives keep the lightweight leaves.
    let entropy = match scorer.options.objective {
        Objective::Smallest | Objective::Balanced if scorer.entropy => entropy_coders(),
        _ => Vec::new(),
    };
    let leaves: Vec<&'static str> = cascade_leaves()
        .into_iter()
        .chain(entropy)
        .filter(|e| {
            let long_only = matches!(
                e.descriptor().search.role,
                Role::LongLeaf | Role::BlockCoder
            );
            !(skip.contains(&e.name()) || short && long_only)
        })
        .filter(|e| !gpu || e.gpu().decodes_at(at.place))
        .map(|e| e.name())
        .collect();
    leaves
        .into_iter()
        .filter_map(|l| leaf_sub(stream, at, l, scorer))
        .collect()
}

/// The leaves that fit only a stream whose values are all alike.
fn uniform_leaves() -> Vec<&'static str> {
    cascade_leaves()
        .into_iter()
        .filter(|e| e.descriptor().search.uniform)
        .map(|e| e.name())
        .collect()
}

fn weigh(s: &Sub, (per_byte, per_ns): (f64, f64)) -> f64 {
    s.size * per_byte + s.ns * per_ns
}

/// Longest stream a short side stream is repeated to for its estimate.
const MAX_REPEAT: usize = 1 << 16;

/// `stream` repeated to `n` values (`stream` not empty).
fn repeated(stream: &Values, n: usize) -> Values {
    let copies = vec![stream.clone(); n.div_ceil(stream.len())];
    crate::concat(&copies).slice(0, n)
}

/// Leaf `name` on `stream`, if it can encode it.
fn leaf_sub(stream: &Values, at: Stream, name: &str, scorer: &mut Scorer<'_>) -> Option<Sub> {
    let (shape, side) = (at.shape, at.side);
    if !scorer.allows(name) {
        return None;
    }
    let plan = Plan::new(name);
    scorer.forms_scored += 1;
    let full = (stream.len() as f64 * at.scale).round() as usize;
    let size = if side && stream.len() < VECTOR_LEN && full > stream.len() {
        // A short exception stream grows with the chunk, but its padding to whole vectors
        // does not: estimate it repeated to its expected length. (Not a dictionary, whose
        // length the sample's already is.)
        let n = full.min(MAX_REPEAT);
        estimate(&plan, &repeated(stream, n)).ok()? as f64 * (full as f64 / n as f64)
    } else {
        extrapolate(estimate(&plan, stream).ok()?, 1, at.scale)
    };
    Some(Sub {
        ns: scorer.options.costs.decode_ns(&plan, shape),
        size,
        plan,
    })
}

/// The cascade for a string column: per root, each child stream's plan is chosen on the
/// stream itself (the integer cascade, the text candidates, or the dictionary forms; a string
/// node's size is its children's sizes plus a fixed header), then the composed plans and the
/// fixed candidate list are scored whole on the sample.
pub(super) fn select_strings(scorer: &mut Scorer<'_>, options: &SelectOptions) {
    // A child stream's plan is chosen by the child's own shape, the whole plan by shapes
    // derived from the parent's, so the fixed list stays as a check on the composed plans.
    for p in crate::candidates(PType::Bytes) {
        scorer.score(&p);
    }
    let room = options.depth.saturating_sub(1);
    let child_options = SelectOptions {
        depth: room,
        ..options.clone()
    };
    for root in string_roots() {
        let Some(streams) = child_streams(root, scorer.sample) else {
            continue;
        };
        let mut plan = Plan::new(root);
        for (slot, v) in &streams {
            let mut sub = Scorer::new(v, v, &child_options);
            sub.nested = true;
            match v.ptype() {
                PType::Bytes | PType::U8 => {
                    for f in slot_forms(v.ptype(), room) {
                        sub.score(&f);
                    }
                }
                _ => {
                    if let Some(c) = select_at(v, false, &child_options, true).best() {
                        sub.score(&c.plan);
                    }
                    for coder in entropy_coders() {
                        sub.score(&Plan::new(coder.name()));
                    }
                }
            }
            let best = sub.ranked().0.into_iter().next();
            if let Some(best) = best {
                plan = plan.child(*slot, best.plan);
            }
        }
        scorer.score(&plan);
    }
}
