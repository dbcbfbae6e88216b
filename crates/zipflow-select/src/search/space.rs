//! The search space: which plans the search builds for each stream family, from the parts the
//! primitives declare for themselves in the registry ([`Role`], [`Search`]).
//!
//! [`Search`]: zipflow_encodings::Search

use zipflow_core::{PType, Plan, Values};
use zipflow_encodings::selection::{DICT_FORMS, FILLER, RAW, STRING_BYTES_FORMS};
use zipflow_encodings::{Encoding, Role, by_name, encodings};

use super::search_sample;

/// Stream families, each with its own search space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Family {
    Int,
    Float,
    Fixed,
}

pub(super) fn family(values: &Values, text: bool) -> Family {
    match values.ptype() {
        PType::F32 | PType::F64 => Family::Float,
        PType::Bytes => Family::Fixed,
        PType::U8 if text => Family::Fixed,
        _ => Family::Int,
    }
}

/// The primitives whose search role passes `keep`, in registry order.
fn having(keep: impl Fn(Role) -> bool) -> impl Iterator<Item = &'static dyn Encoding> {
    encodings()
        .iter()
        .copied()
        .filter(move |e| keep(e.descriptor().search.role))
}

/// The leaves of the numeric space ([`Role::Leaf`]).
pub(super) fn leaves() -> Vec<&'static str> {
    having(|r| r == Role::Leaf).map(|e| e.name()).collect()
}

/// The leaves the stream-by-stream cascade tries: every leaf, and those for long streams
/// ([`Role::LongLeaf`]), which the exhaustive space leaves out.
pub(super) fn cascade_leaves() -> Vec<&'static dyn Encoding> {
    having(|r| matches!(r, Role::Leaf | Role::LongLeaf)).collect()
}

/// The entropy coders and block coders ([`Role::Entropy`], [`Role::BlockCoder`]).
pub(super) fn entropy_coders() -> Vec<&'static dyn Encoding> {
    having(|r| matches!(r, Role::Entropy | Role::BlockCoder)).collect()
}

/// The inner primitives of the numeric space ([`Role::Inner`]).
pub(super) fn inner() -> Vec<&'static dyn Encoding> {
    having(|r| matches!(r, Role::Inner { .. })).collect()
}

/// Whether `slot` of `enc` holds an exception side stream.
pub(super) fn side_slot(enc: &dyn Encoding, slot: &str) -> bool {
    let side = matches!(
        enc.descriptor().search.role,
        Role::Inner { side_streams: true }
    );
    side && !slot.is_empty()
}

/// The change of type that turns a stream of `ptype` into one stream of integers, if any
/// ([`Role::TypeChange`] with a pipe child).
pub(super) fn type_change(ptype: PType) -> Option<&'static dyn Encoding> {
    having(|r| r == Role::TypeChange).find(|e| e.accepts(ptype) && piped(*e))
}

/// The changes of type that turn a stream of `ptype` into several streams of integers
/// ([`Role::TypeChange`] with named slots), which the stream-by-stream cascade composes.
pub(super) fn split_changes(ptype: PType) -> Vec<&'static dyn Encoding> {
    having(|r| r == Role::TypeChange)
        .filter(|e| e.accepts(ptype) && !piped(*e))
        .collect()
}

/// Whether `enc`'s only child is its pipe child.
fn piped(enc: &dyn Encoding) -> bool {
    matches!(enc.slots(), [s] if s.name == zipflow_core::plan::THEN)
}

/// Whether primitive `name` is a change of type, which does not count towards the depth.
pub(super) fn is_type_change(name: &str) -> bool {
    by_name(name).is_some_and(|e| e.descriptor().search.role == Role::TypeChange)
}

/// The leaves that encode a stream of `ptype` as it is: a float column's roots besides its
/// change of type.
pub(super) fn leaves_for(ptype: PType) -> Vec<&'static str> {
    having(|r| r == Role::Leaf)
        .filter(|e| e.accepts(ptype))
        .map(|e| e.name())
        .collect()
}

/// The primitives a string column's plan starts with.
pub fn string_roots() -> Vec<&'static str> {
    encodings()
        .iter()
        .filter(|e| e.descriptor().search.string_root)
        .map(|e| e.name())
        .collect()
}

/// `plan` with every child slot filled (defaults written out), so depth and refinement see
/// the whole tree.
pub(super) fn expanded(plan: &Plan) -> Plan {
    // A numeric leaf's slots are a byte string's, outside the numeric space.
    let Some(enc) = by_name(&plan.name).filter(|e| !e.descriptor().leaf_for_numbers) else {
        return plan.clone();
    };
    let mut out = Plan::new(plan.name.clone());
    out.params = plan.params.clone();
    for slot in enc.slots() {
        let child = match plan.get(slot.name) {
            Some(c) => expanded(c),
            None => match slot.default.parse::<Plan>() {
                Ok(c) => expanded(&c),
                Err(_) => continue,
            },
        };
        out = out.child(slot.name, child);
    }
    out
}

/// Primitives on the longest path; a change of type does not count.
pub fn depth(plan: &Plan) -> usize {
    let own = usize::from(!is_type_change(&plan.name));
    own + plan
        .children
        .iter()
        .map(|(_, c)| depth(c))
        .max()
        .unwrap_or(0)
}

/// Every integer plan of at most `d` primitives (side streams take the [`FILLER`]).
pub(super) fn int_plans(d: usize) -> Vec<Plan> {
    if d == 0 {
        return Vec::new();
    }
    let mut out: Vec<Plan> = leaves().into_iter().map(Plan::new).collect();
    if d < 2 {
        return out;
    }
    let sub = int_plans(d - 1);
    let side = [Plan::new(FILLER)];
    for enc in inner() {
        let mut partial = vec![Plan::new(enc.name())];
        for slot in enc.slots() {
            // Side streams (exception counts, offsets and high bits) take the filler here:
            // every combination of three slots would multiply the space by 40; the cascade
            // still searches them.
            let forms = if side_slot(enc, slot.name) {
                &side[..]
            } else {
                &sub[..]
            };
            partial = partial
                .iter()
                .flat_map(|p| forms.iter().map(|c| p.clone().child(slot.name, c.clone())))
                .collect();
        }
        out.extend(partial);
    }
    out
}

/// The forms tried in a slot with room for `d` primitives: leaves, and inner primitives with
/// the [`FILLER`] in every slot.
pub(super) fn int_forms(d: usize) -> Vec<Plan> {
    if d == 0 {
        return Vec::new();
    }
    let mut out: Vec<Plan> = leaves().into_iter().map(Plan::new).collect();
    if d >= 2 {
        for enc in inner() {
            let mut p = Plan::new(enc.name());
            for slot in enc.slots() {
                p = p.child(slot.name, Plan::new(FILLER));
            }
            out.push(p);
        }
    }
    out
}

/// The first round: leaves, and inner primitives with their default children where those fit
/// in `d` (a transform's output usually needs its default, e.g. `delta`'s signed differences
/// `for`), else with [`FILLER`] children.
pub(super) fn first_forms(d: usize) -> Vec<Plan> {
    int_forms(d)
        .into_iter()
        .map(|p| {
            let full = expanded(&Plan::new(p.name.clone()));
            if p.children.is_empty() || depth(&full) > d {
                p
            } else {
                full
            }
        })
        .collect()
}

/// The roots of a stream of `ptype` in `family` over the integer plans `inner`: for floats,
/// the leaves that take floats as they are, and every other plan below the change of type.
pub(super) fn with_root(family: Family, ptype: PType, inner: Vec<Plan>) -> Vec<Plan> {
    match (family, type_change(ptype)) {
        (Family::Float, Some(change)) => {
            let direct = leaves_for(ptype);
            direct
                .iter()
                .map(|n| Plan::new(*n))
                .chain(
                    inner
                        .into_iter()
                        .filter(|p| !direct.contains(&p.name.as_str()))
                        .map(|p| Plan::new(change.name()).then(p)),
                )
                .collect()
        }
        _ => inner,
    }
}

/// Every plan of the search space for `values` (sampled as text if `text`) of at most `depth`
/// primitives; for text, the fixed candidate list; for byte strings, every combination of
/// [`string_roots`] and the forms of their child slots ([`string_space`]).
pub fn space(values: &Values, text: bool, depth: usize) -> Vec<Plan> {
    let f = family(values, text);
    match f {
        Family::Fixed if values.ptype() == PType::Bytes && !text => {
            let sample = search_sample(values, text);
            string_space(&sample, depth)
        }
        Family::Fixed => fixed_candidates(values, text),
        _ => with_root(f, values.ptype(), int_plans(depth)),
    }
}

/// The fixed candidate list for `values` (text if `text`).
pub(super) fn fixed_candidates(values: &Values, text: bool) -> Vec<Plan> {
    if text {
        crate::text_candidates()
    } else {
        crate::candidates(values.ptype())
    }
}

/// The child streams `root` cuts `sample` into, by slot, found by encoding the sample with
/// [`RAW`] children and decoding each child back.
pub(super) fn child_streams(root: &str, sample: &Values) -> Option<Vec<(&'static str, Values)>> {
    let enc = by_name(root)?;
    let mut probe = Plan::new(root);
    for slot in enc.slots() {
        probe = probe.child(slot.name, Plan::new(RAW));
    }
    let bytes = zipflow_encodings::encode(&probe, sample)
        .and_then(|n| n.to_bytes())
        .ok()?;
    let node = zipflow_encodings::NodeView::parse(&bytes).ok()?;
    let mut scratch = zipflow_encodings::Scratch::default();
    enc.slots()
        .iter()
        .zip(&node.children)
        .map(|(slot, child)| scratch.decode(child).ok().map(|v| (slot.name, v)))
        .collect()
}

/// The forms a child stream of `ptype` takes in the string space, `room` primitives deep.
pub(super) fn slot_forms(ptype: PType, room: usize) -> Vec<Plan> {
    let parse = |t: &str| t.parse::<Plan>().ok();
    match ptype {
        PType::Bytes => DICT_FORMS.iter().filter_map(|t| parse(t)).collect(),
        PType::U8 => STRING_BYTES_FORMS.iter().filter_map(|t| parse(t)).collect(),
        // Codes, lengths and counts: the integer plans, and the entropy coders.
        _ => int_plans(room)
            .into_iter()
            .chain(entropy_coders().into_iter().map(|e| Plan::new(e.name())))
            .collect(),
    }
}

/// Every plan of the string space for `sample`: each root with every combination of its slots'
/// forms (integer streams: every integer plan `depth - 1` deep and the entropy coders; bytes:
/// [`STRING_BYTES_FORMS`]; dictionaries: [`DICT_FORMS`]).
pub fn string_space(sample: &Values, depth: usize) -> Vec<Plan> {
    let mut out = Vec::new();
    for root in string_roots() {
        let Some(streams) = child_streams(root, sample) else {
            continue;
        };
        let mut plans = vec![Plan::new(root)];
        for (slot, v) in &streams {
            let forms = slot_forms(v.ptype(), depth.saturating_sub(1));
            plans = plans
                .iter()
                .flat_map(|p| forms.iter().map(move |f| p.clone().child(*slot, f.clone())))
                .collect();
        }
        out.extend(plans);
    }
    out
}

/// Plans whose depth with slot defaults written out exceeds the limit are outside the space;
/// the search only builds plans within it, which this checks in tests.
pub fn within_depth(plan: &Plan, limit: usize) -> bool {
    depth(&expanded(plan)) <= limit
}
