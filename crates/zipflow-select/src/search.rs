//! Cascade search: plans up to a depth limit, built on a sample, scored by an objective.
//!
//! The search space is a grammar of plan texts per stream family: leaves (`bitpack`, `plain`,
//! `constant`) and inner primitives whose every child slot is again a plan of the space, down to
//! [`SelectOptions::depth`] primitives on the longest path (slot defaults expanded, so
//! `for | bitpack` has depth 2 and `rle` with its default children depth 3). `float2int` is a
//! change of type, not a step of the cascade: it does not count.
//!
//! [`select`] runs the cascade on a stratified sample with a fixed layout (so the same input
//! always gives the same plan). A plan's estimated size is its nodes' own bytes plus its
//! children's sizes ([`zipflow_encodings::Encoding::split`]), and its estimated decode time the
//! same sum over nodes, so for every objective but [`Objective::MinDecodeGbs`] the best plan
//! for a stream is: the best of each leaf, and of each inner primitive with, in each slot, the
//! best plan for that child stream, found the same way one level less deep. The cascade scores
//! each (stream, form) pair once, a few hundred instead of the space's thousands of plans, and
//! finds the same best plan as [`exhaustive`], which scores every plan of the space (and is
//! what `zipflow bench selection` compares against).
//!
//! `MinDecodeGbs` is a bound, not a sum, so it keeps a slot-by-slot refinement:
//! 1. every leaf, and every inner primitive with its default children (`bitpack` children
//!    where the defaults do not fit the depth limit);
//! 2. each of those has its child slots refined: each slot, with the rest of the plan fixed,
//!    tries every form that fits its remaining depth (a leaf, or a primitive with `bitpack`
//!    children) and keeps the best;
//! 3. the best [`BEAM`] results are refined further down, breadth first, the children of each
//!    kept form the same way, to the depth limit.
//!
//! Each candidate is scored by [`Objective`]: its estimated size (from the encodings'
//! `estimate`) and its estimated decode time (from the [`CostTable`]).

use rustc_hash::FxHashMap;

use zipflow_core::{PType, Plan, VECTOR_LEN, Values};
use zipflow_encodings::{by_name, estimate};

use crate::cost::{CostTable, Shape, child_shape};

/// Plans kept after the first round and refined.
pub const BEAM: usize = 4;

/// Read bandwidth assumed by [`Objective::Balanced`]: bytes per nanosecond (0.5 GB/s, a disk
/// or a network link): a plan may be larger than the smallest only where it decodes enough
/// faster to make up for it at that speed.
const BALANCED_BYTES_PER_NS: f64 = 0.5;

/// Read bandwidth assumed by [`Objective::Fastest`]: data already in memory (32 GB/s).
const FASTEST_BYTES_PER_NS: f64 = 32.0;

/// What a plan is chosen for.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Objective {
    /// The smallest estimated size; decode time breaks ties.
    Smallest,
    /// The least time to read the bytes at 0.5 GB/s and decode them: small, unless a plan
    /// saves a few bytes at a large decode cost.
    #[default]
    Balanced,
    /// The least time to read the bytes from memory (32 GB/s) and decode them.
    Fastest,
    /// The smallest plan whose estimated decode speed is at least this many GB/s of plain
    /// values; the fastest plan if none is.
    MinDecodeGbs(f64),
    /// The smallest plan made only of primitives the GPU decoder runs in parallel
    /// ([`GPU_PARALLEL`]): for files decoded on the GPU, where an `ans` block is a chain of
    /// dependent steps, `fsst` and the character coders decode a piece or block per thread and
    /// `blockpack` reads a table for every value; `hipatch` and `radix` only where the GPU
    /// decodes them at full speed ([`gpu_parallel`]).
    Gpu,
}

/// Primitives the GPU decoder (`zipflow-cuda`) decodes in parallel, which [`Objective::Gpu`]
/// keeps to.
pub const GPU_PARALLEL: &[&str] = &[
    "plain",
    "bitpack",
    "for",
    "zigzag",
    "delta",
    "rle",
    "dict",
    "constant",
    "patch",
    "hipatch",
    "radix",
    "float2int",
    "strdict",
    "words",
];

/// Whether every node of `plan`, default children included, is in [`GPU_PARALLEL`] and
/// decoded at full speed where it sits:
/// - `hipatch` only at the top of a numeric column's plan or under `for`s there, where the
///   GPU decodes it in tiles of 1024-value vectors. Below other primitives, and in a string's
///   codes or counts, it would be decoded a whole chunk by one thread block.
/// - `radix` only there or at the top of a string column's codes, counts or lengths (or under
///   `for`s there), where each thread peels a group's digits off one after the other.
///   Elsewhere (a dictionary's codes, under `delta`) every value would divide its group by a
///   power of the base: `dict` over `radix` decoded l_quantity at 2,393 GB/s on the H200,
///   where bit-packed codes decode a dictionary at about 3,000.
pub fn gpu_parallel(plan: &Plan) -> bool {
    gpu_parallel_at(plan, Place::Tile)
}

/// Where a node of a plan sits, for what the GPU decodes at full speed there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// The top of a numeric column's plan, or under `for`s there: decoded in tiles.
    Tile,
    /// The top of a string column's codes, counts or lengths, or under `for`s there:
    /// decoded a segment at a time.
    Codes,
    /// Anywhere else: decoded value by value, or a chunk by one thread block.
    Inner,
}

impl Place {
    /// The place of `parent`'s child in `slot`.
    fn child(self, parent: &str, slot: &str) -> Place {
        match (self, parent, slot) {
            (_, "for", _) => self,
            (Place::Tile, "strdict" | "words", "codes" | "counts") => Place::Codes,
            (Place::Tile, "plain", "lengths") => Place::Codes,
            _ => Place::Inner,
        }
    }

    /// Whether the GPU decodes primitive `name` at full speed here.
    fn decodes(self, name: &str) -> bool {
        match name {
            "hipatch" => self == Place::Tile,
            "radix" => self != Place::Inner,
            _ => true,
        }
    }
}

/// [`gpu_parallel`] for `plan` at `place`.
fn gpu_parallel_at(plan: &Plan, place: Place) -> bool {
    if !GPU_PARALLEL.contains(&plan.name.as_str()) || !place.decodes(&plan.name) {
        return false;
    }
    let Some(enc) = by_name(&plan.name) else {
        return false;
    };
    enc.slots().iter().all(|slot| {
        let at = place.child(&plan.name, slot.name);
        match plan.get(slot.name) {
            Some(c) => gpu_parallel_at(c, at),
            // A numeric `plain` has no children; a string one's defaults are plain forms.
            None if plan.name == "plain" => true,
            None => slot
                .default
                .parse::<Plan>()
                .is_ok_and(|c| gpu_parallel_at(&c, at)),
        }
    })
}

impl std::fmt::Display for Objective {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Objective::Smallest => f.write_str("smallest"),
            Objective::Balanced => f.write_str("balanced"),
            Objective::Fastest => f.write_str("fastest"),
            Objective::MinDecodeGbs(x) => write!(f, "min-decode-gbs {x}"),
            Objective::Gpu => f.write_str("gpu"),
        }
    }
}

impl std::str::FromStr for Objective {
    type Err = zipflow_core::Error;
    fn from_str(s: &str) -> zipflow_core::Result<Objective> {
        match s {
            "smallest" => Ok(Objective::Smallest),
            "balanced" => Ok(Objective::Balanced),
            "fastest" => Ok(Objective::Fastest),
            "gpu" => Ok(Objective::Gpu),
            _ => Err(zipflow_core::Error::invalid(format!(
                "unknown objective `{s}` (known: smallest, balanced, fastest, gpu)"
            ))),
        }
    }
}

/// How plans are chosen.
#[derive(Debug, Clone, PartialEq)]
pub struct SelectOptions {
    /// What the plan is chosen for.
    pub objective: Objective,
    /// Most primitives on a path from the root to a leaf.
    pub depth: usize,
    /// Decode cost per primitive.
    pub costs: CostTable,
}

impl Default for SelectOptions {
    fn default() -> Self {
        SelectOptions {
            objective: Objective::default(),
            depth: 3,
            costs: CostTable::default(),
        }
    }
}

/// One plan the search scored.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// The plan.
    pub plan: Plan,
    /// Estimated encoded size of the whole stream, in bytes (the sample's, scaled).
    pub size: usize,
    /// Estimated time to decode the whole stream, in nanoseconds.
    pub decode_ns: f64,
    /// Estimated decode speed in GB/s of plain values.
    pub decode_gbs: f64,
}

/// What the search found: every candidate it scored, best first by the objective.
#[derive(Debug, Clone, PartialEq)]
pub struct Selection {
    /// The objective the ranking follows.
    pub objective: Objective,
    /// Scored candidates, best first.
    pub ranked: Vec<Candidate>,
    /// How many plans were scored (for the stream-by-stream cascade: how many leaves were
    /// estimated and streams split, one per (stream, form) pair).
    pub evaluated: usize,
    /// Values in the stream.
    pub values: usize,
    /// Values in the sample.
    pub sampled: usize,
}

impl Selection {
    /// The winning plan, if any candidate could encode the sample.
    pub fn best(&self) -> Option<&Candidate> {
        self.ranked.first()
    }

    /// A few lines that say what was considered and why the winner won.
    pub fn explain(&self, top: usize) -> String {
        let mut out = format!(
            "objective {}; {} plans or child-stream forms scored on a sample of {} of {} values\n",
            self.objective, self.evaluated, self.sampled, self.values
        );
        for (i, c) in self.ranked.iter().take(top).enumerate() {
            out.push_str(&format!(
                "  {}{:>2}. {:<60} ~{:>10} B  ~{:>7.2} GB/s decode\n",
                if i == 0 { "*" } else { " " },
                i + 1,
                c.plan.to_string(),
                c.size,
                c.decode_gbs
            ));
        }
        if let (Some(w), Some(smallest)) = (
            self.ranked.first(),
            self.ranked.iter().min_by_key(|c| c.size),
        ) {
            let fastest = self
                .ranked
                .iter()
                .max_by(|a, b| a.decode_gbs.total_cmp(&b.decode_gbs));
            let why = match self.objective {
                Objective::Smallest => "it is the smallest".to_string(),
                Objective::Gpu => {
                    "it is the smallest the GPU decodes in parallel (no `ans`, `fsst`, \
                     character coders or `blockpack`)"
                        .to_string()
                }
                Objective::MinDecodeGbs(x) if w.decode_gbs >= x => {
                    format!("it is the smallest that decodes at >= {x} GB/s")
                }
                Objective::MinDecodeGbs(x) => {
                    format!("no plan decodes at >= {x} GB/s, so the fastest")
                }
                _ if w.plan == smallest.plan => {
                    "it is the smallest, and no faster plan makes up for its size".to_string()
                }
                o => format!(
                    "it is {:.1} % larger than the smallest ({}) but decodes {:.1}x faster, \
                     which pays off when reading at {}",
                    100.0 * (w.size as f64 / smallest.size.max(1) as f64 - 1.0),
                    smallest.plan,
                    w.decode_gbs / smallest.decode_gbs.max(1e-9),
                    if o == Objective::Fastest {
                        "32 GB/s (memory)"
                    } else {
                        "0.5 GB/s"
                    }
                ),
            };
            out.push_str(&format!("winner: {} because {why}", w.plan));
            if let Some(f) = fastest
                && f.plan != w.plan
            {
                out.push_str(&format!(
                    " (fastest considered: {} at {:.2} GB/s)",
                    f.plan, f.decode_gbs
                ));
            }
            out.push('\n');
        }
        out
    }
}

/// Stream families, each with its own search space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    Int,
    Float,
    Fixed,
}

/// Integer leaves and inner primitives (their child slots come from the registry).
const INT_LEAVES: &[&str] = &["bitpack", "plain", "constant"];
/// Leaves the stream-by-stream cascade also tries: `radix` fits only streams of small values
/// (dictionary codes), so the exhaustive space, whose size grows with every leaf, leaves it
/// out.
const CASCADE_LEAVES: &[&str] = &["bitpack", "plain", "constant", "radix"];
const INT_INNER: &[&str] = &[
    "for",
    "zigzag",
    "delta",
    "patch",
    "hipatch",
    "blockpack",
    "rle",
    "dict",
];

fn family(values: &Values, text: bool) -> Family {
    match values.ptype() {
        PType::F32 | PType::F64 => Family::Float,
        PType::Bytes => Family::Fixed,
        PType::U8 if text => Family::Fixed,
        _ => Family::Int,
    }
}

/// `plan` with every child slot filled (defaults written out), so depth and refinement see
/// the whole tree.
fn expanded(plan: &Plan) -> Plan {
    // `plain` has children only for byte strings, outside the numeric space.
    let Some(enc) = by_name(&plan.name).filter(|_| plan.name != "plain") else {
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

/// Primitives on the longest path; `float2int` does not count.
pub fn depth(plan: &Plan) -> usize {
    let own = usize::from(plan.name != "float2int");
    own + plan
        .children
        .iter()
        .map(|(_, c)| depth(c))
        .max()
        .unwrap_or(0)
}

/// Every integer plan of at most `d` primitives (`hipatch` with `bitpack` side streams).
fn int_plans(d: usize) -> Vec<Plan> {
    if d == 0 {
        return Vec::new();
    }
    let mut out: Vec<Plan> = INT_LEAVES.iter().map(|n| Plan::new(*n)).collect();
    if d < 2 {
        return out;
    }
    let sub = int_plans(d - 1);
    let side = [Plan::new("bitpack")];
    for name in INT_INNER {
        let Some(enc) = by_name(name) else { continue };
        let mut partial = vec![Plan::new(*name)];
        for slot in enc.slots() {
            // `hipatch`'s side streams (exception counts, offsets and high bits) take `bitpack` here:
            // every combination of three slots would multiply the space by 40; the cascade
            // still searches them.
            let forms = if *name == "hipatch" && !slot.name.is_empty() {
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
/// `bitpack` in every slot.
fn int_forms(d: usize) -> Vec<Plan> {
    if d == 0 {
        return Vec::new();
    }
    let mut out: Vec<Plan> = INT_LEAVES.iter().map(|n| Plan::new(*n)).collect();
    if d >= 2 {
        for name in INT_INNER {
            let Some(enc) = by_name(name) else { continue };
            let mut p = Plan::new(*name);
            for slot in enc.slots() {
                p = p.child(slot.name, Plan::new("bitpack"));
            }
            out.push(p);
        }
    }
    out
}

/// The first round: leaves, and inner primitives with their default children where those fit
/// in `d` (a transform's output usually needs its default, e.g. `delta`'s signed differences
/// `for`), else with `bitpack` children.
fn first_forms(d: usize) -> Vec<Plan> {
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

fn with_root(family: Family, inner: Vec<Plan>) -> Vec<Plan> {
    match family {
        Family::Float => [Plan::new("constant"), Plan::new("plain")]
            .into_iter()
            .chain(
                inner
                    .into_iter()
                    .filter(|p| p.name != "plain" && p.name != "constant")
                    .map(|p| Plan::new("float2int").then(p)),
            )
            .collect(),
        _ => inner,
    }
}

/// Every plan of the search space for `values` (sampled as text if `text`) of at most `depth`
/// primitives; for text, the fixed candidate list; for byte strings, every combination of
/// [`STRING_ROOTS`] and the forms of their child slots ([`string_space`]).
pub fn space(values: &Values, text: bool, depth: usize) -> Vec<Plan> {
    let f = family(values, text);
    match f {
        Family::Fixed if values.ptype() == PType::Bytes && !text => {
            let sample = search_sample(values, text);
            string_space(&sample, depth)
        }
        Family::Fixed => fixed_candidates(values, text),
        _ => with_root(f, int_plans(depth)),
    }
}

/// The primitives a string column's plan starts with.
pub const STRING_ROOTS: &[&str] = &["plain", "strdict", "words"];

/// Forms of a string dictionary (a `strdict` or `words` child) in the string space.
const DICT_FORMS: &[&str] = &[
    "plain",
    "plain(bytes: fsst)",
    "plain(bytes: fsst(codes: ans))",
    "plain(bytes: ans)",
];

/// Forms of the bytes of `plain` strings: the text plans but the character tables, whose
/// training costs most and which short strings do not repay.
const STRING_BYTES_FORMS: &[&str] = &[
    "plain",
    "ans",
    "fsst",
    "fsst(codes: ans)",
    "words",
    "words(dict: plain(bytes: fsst))",
];

/// The child streams `root` cuts `sample` into, by slot, found by encoding the sample with
/// `plain` children and decoding each child back.
fn child_streams(root: &str, sample: &Values) -> Option<Vec<(&'static str, Values)>> {
    let enc = by_name(root)?;
    let mut probe = Plan::new(root);
    for slot in enc.slots() {
        probe = probe.child(slot.name, Plan::new("plain"));
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
fn slot_forms(ptype: PType, room: usize) -> Vec<Plan> {
    let parse = |t: &str| t.parse::<Plan>().ok();
    match ptype {
        PType::Bytes => DICT_FORMS.iter().filter_map(|t| parse(t)).collect(),
        PType::U8 => STRING_BYTES_FORMS.iter().filter_map(|t| parse(t)).collect(),
        // Codes, lengths and counts: the integer plans, and `ans` (their entropy coder).
        _ => int_plans(room)
            .into_iter()
            .chain(std::iter::once(Plan::new("ans")))
            .collect(),
    }
}

/// Every plan of the string space for `sample`: each root with every combination of its slots'
/// forms (integer streams: every integer plan `depth - 1` deep and `ans`; bytes:
/// `STRING_BYTES_FORMS`; dictionaries: `DICT_FORMS`).
pub fn string_space(sample: &Values, depth: usize) -> Vec<Plan> {
    let mut out = Vec::new();
    for root in STRING_ROOTS {
        let Some(streams) = child_streams(root, sample) else {
            continue;
        };
        let mut plans = vec![Plan::new(*root)];
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

/// The cascade for a string column: per root, each child stream's plan is chosen on the
/// stream itself (the integer cascade, the text candidates, or the dictionary forms; a string
/// node's size is its children's sizes plus a fixed header), then the composed plans and the
/// fixed candidate list are scored whole on the sample.
fn select_strings(scorer: &mut Scorer<'_>, options: &SelectOptions) {
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
    for root in STRING_ROOTS {
        let Some(streams) = child_streams(root, scorer.sample) else {
            continue;
        };
        let mut plan = Plan::new(*root);
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
                    sub.score(&Plan::new("ans"));
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

fn fixed_candidates(values: &Values, text: bool) -> Vec<Plan> {
    if text {
        crate::text_candidates()
    } else {
        crate::candidates(values.ptype())
    }
}

/// Bytes of a node that do not grow with its stream: header, child entries, metadata.
/// Scaled up from the sample with the rest they would count `scale` times over, and plans of
/// several nodes (or with short side streams) would look worse than they are.
const NODE_BYTES: f64 = 24.0;

/// The size on the whole stream of a plan of `nodes` nodes that takes `size` bytes on the
/// sample: the part that grows with the stream scaled, the nodes' fixed bytes once.
fn extrapolate(size: usize, nodes: usize, scale: f64) -> f64 {
    let size = size as f64;
    let fixed = (NODE_BYTES * nodes as f64).min(size);
    (size - fixed) * scale + fixed
}

/// Nodes of `plan` once its child slots take their defaults.
fn node_count(plan: &Plan) -> usize {
    fn count(p: &Plan) -> usize {
        1 + p.children.iter().map(|(_, c)| count(c)).sum::<usize>()
    }
    count(&expanded(plan))
}

/// Scores plans on one sample, remembering each plan's score.
struct Scorer<'a> {
    sample: &'a Values,
    shape: Shape,
    scale: f64,
    plain_bytes: f64,
    options: &'a SelectOptions,
    /// Size, decode time and speed of every plan scored (`None`: it cannot encode the sample).
    seen: FxHashMap<Plan, Option<(usize, f64, f64)>>,
    /// (stream, form) pairs the stream-by-stream cascade scored: streams split, leaves
    /// estimated.
    forms_scored: usize,
    /// Whether the stream is a child of a string column (codes, lengths, counts), where the
    /// GPU does not decode `hipatch` in tiles ([`Place::Codes`]).
    nested: bool,
}

impl<'a> Scorer<'a> {
    fn new(values: &Values, sample: &'a Values, options: &'a SelectOptions) -> Scorer<'a> {
        let shape = Shape::of(sample).scaled(values.len());
        Scorer {
            sample,
            shape,
            scale: values.len() as f64 / sample.len().max(1) as f64,
            plain_bytes: values.plain_size() as f64,
            options,
            seen: FxHashMap::default(),
            forms_scored: 0,
            nested: false,
        }
    }

    /// The place of the stream's plan: a column's, or a string column's child stream's.
    fn top(&self) -> Place {
        if self.nested {
            Place::Codes
        } else {
            Place::Tile
        }
    }

    /// Whether the objective lets plans use primitive `name` at `place`.
    fn allows_at(&self, name: &str, place: Place) -> bool {
        self.allows(name) && (self.options.objective != Objective::Gpu || place.decodes(name))
    }

    /// Whether the objective lets plans use primitive `name`.
    fn allows(&self, name: &str) -> bool {
        self.options.objective != Objective::Gpu || GPU_PARALLEL.contains(&name)
    }

    fn score(&mut self, plan: &Plan) -> Option<Candidate> {
        if self.options.objective == Objective::Gpu && !gpu_parallel_at(plan, self.top()) {
            return None;
        }
        let found = match self.seen.get(plan) {
            Some(found) => *found,
            None => {
                let found = estimate(plan, self.sample).ok().map(|size| {
                    let decode_ns = self.options.costs.decode_ns(plan, self.shape).max(1e-3);
                    (
                        extrapolate(size, node_count(plan), self.scale).round() as usize,
                        decode_ns,
                        self.plain_bytes / decode_ns,
                    )
                });
                self.seen.insert(plan.clone(), found);
                found
            }
        };
        found.map(|(size, decode_ns, decode_gbs)| Candidate {
            plan: plan.clone(),
            size,
            decode_ns,
            decode_gbs,
        })
    }

    fn ranked(self) -> (Vec<Candidate>, usize) {
        let evaluated = self.seen.len();
        let mut all: Vec<Candidate> = self
            .seen
            .into_iter()
            .filter_map(|(plan, found)| {
                found.map(|(size, decode_ns, decode_gbs)| Candidate {
                    plan,
                    size,
                    decode_ns,
                    decode_gbs,
                })
            })
            .collect();
        rank_by(&mut all, self.options.objective);
        (all, evaluated)
    }
}

/// Sorts best first by `objective`; ties go to the smaller plan text, so the order never
/// depends on the order plans were scored in.
pub fn rank_by(c: &mut [Candidate], objective: Objective) {
    c.sort_by(|a, b| order(a, b, objective));
}

/// `objective`'s order of two candidates: by its key, then by the plan text on a tie.
fn order(a: &Candidate, b: &Candidate, objective: Objective) -> std::cmp::Ordering {
    let key = |c: &Candidate| -> (u8, f64) {
        let size = c.size as f64;
        match (additive_key(objective), objective) {
            (Some((per_byte, per_ns)), _) => (0, size * per_byte + c.decode_ns * per_ns),
            (None, Objective::MinDecodeGbs(x)) if c.decode_gbs >= x => (0, size),
            (None, _) => (1, c.decode_ns),
        }
    };
    let (ka, kb) = (key(a), key(b));
    ka.0.cmp(&kb.0).then(ka.1.total_cmp(&kb.1)).then_with(|| {
        let (ta, tb) = (a.plan.to_string(), b.plan.to_string());
        ta.len().cmp(&tb.len()).then_with(|| ta.cmp(&tb))
    })
}

fn better(a: &Candidate, b: &Candidate, objective: Objective) -> bool {
    order(a, b, objective) == std::cmp::Ordering::Less
}

/// The subplan at `path` (slot names from the root).
fn at<'p>(plan: &'p Plan, path: &[String]) -> Option<&'p Plan> {
    path.iter().try_fold(plan, |p, slot| p.get(slot))
}

/// `plan` with the subplan at `path` replaced by `sub`.
fn replaced(plan: &Plan, path: &[String], sub: &Plan) -> Plan {
    let Some((first, rest)) = path.split_first() else {
        return sub.clone();
    };
    let mut out = plan.clone();
    for (slot, child) in &mut out.children {
        if slot == first {
            *child = replaced(child, rest, sub);
        }
    }
    out
}

/// Refines `root` slot by slot, breadth first, each slot trying every form that fits; slots
/// more than `levels` below the root are left as they are.
fn refine(
    root: Candidate,
    scorer: &mut Scorer<'_>,
    limit: usize,
    objective: Objective,
    levels: usize,
) -> Candidate {
    let mut best = root;
    let base: Vec<String> = if best.plan.name == "float2int" {
        vec![String::new()]
    } else {
        Vec::new()
    };
    // Paths below `base` whose slot is to be refined, with the depth used above them.
    let mut queue: std::collections::VecDeque<Vec<String>> = std::collections::VecDeque::new();
    let push_children =
        |queue: &mut std::collections::VecDeque<Vec<String>>, plan: &Plan, path: &[String]| {
            if let Some(p) = at(plan, path) {
                for (slot, _) in &p.children {
                    let mut c = path.to_vec();
                    c.push(slot.clone());
                    queue.push_back(c);
                }
            }
        };
    push_children(&mut queue, &best.plan, &base);
    while let Some(path) = queue.pop_front() {
        let used = path.len() - base.len();
        if used > levels {
            continue;
        }
        let room = limit.saturating_sub(used);
        let start = best.clone();
        for form in int_forms(room) {
            let plan = replaced(&start.plan, &path, &form);
            let Some(mut c) = scorer.score(&plan) else {
                continue;
            };
            // A primitive with several child streams is judged with the best leaf in each
            // (short streams such as a dictionary's values pay `bitpack`'s 1024-value padding).
            if form.children.len() > 1 {
                for (slot, _) in &form.children {
                    let mut sub = path.clone();
                    sub.push(slot.clone());
                    let base = c.clone();
                    for leaf in INT_LEAVES {
                        let plan = replaced(&base.plan, &sub, &Plan::new(*leaf));
                        if let Some(l) = scorer.score(&plan)
                            && better(&l, &c, objective)
                        {
                            c = l;
                        }
                    }
                }
            }
            if better(&c, &best, objective) {
                best = c;
            }
        }
        push_children(&mut queue, &best.plan, &path);
    }
    best
}

/// Runs the cascade search on a sample of `values` (sampled as text if `text`).
pub fn select(values: &Values, text: bool, options: &SelectOptions) -> Selection {
    select_at(values, text, options, false)
}

/// [`select`] for a column (`nested` false) or a string column's child stream.
fn select_at(values: &Values, text: bool, options: &SelectOptions, nested: bool) -> Selection {
    let sample = search_sample(values, text);
    let mut scorer = Scorer::new(values, &sample, options);
    scorer.nested = nested;
    let f = family(values, text);
    if f == Family::Fixed && values.ptype() == PType::Bytes && !text {
        select_strings(&mut scorer, options);
    } else if f == Family::Fixed {
        for p in fixed_candidates(values, text) {
            scorer.score(&p);
        }
    } else if let Some(key) = additive_key(options.objective) {
        let roots = by_streams(&mut scorer, f, options.depth, key);
        return Selection {
            objective: options.objective,
            ranked: roots,
            evaluated: scorer.forms_scored,
            values: values.len(),
            sampled: sample.len(),
        };
    } else {
        let first: Vec<Candidate> = with_root(f, first_forms(options.depth))
            .iter()
            .filter_map(|p| scorer.score(p))
            .collect();
        // Every root gets its own slots refined (a transform judged with a poor child would
        // be dropped unfairly); the best BEAM of those are refined all the way down.
        let mut second: Vec<Candidate> = first
            .into_iter()
            .map(|root| refine(root, &mut scorer, options.depth, options.objective, 1))
            .collect();
        rank_by(&mut second, options.objective);
        second.dedup_by(|a, b| a.plan == b.plan);
        for root in second.into_iter().take(BEAM) {
            refine(
                root,
                &mut scorer,
                options.depth,
                options.objective,
                usize::MAX,
            );
        }
    }
    finish(scorer, values, &sample, options.objective)
}

/// Per-byte and per-nanosecond weights of an objective that adds up over a plan's nodes
/// (every one but [`Objective::MinDecodeGbs`], a bound rather than a sum).
fn additive_key(objective: Objective) -> Option<(f64, f64)> {
    match objective {
        Objective::Smallest | Objective::Gpu => Some((1.0, 1e-9)),
        Objective::Balanced => Some((1.0 / BALANCED_BYTES_PER_NS, 1.0)),
        Objective::Fastest => Some((1.0 / FASTEST_BYTES_PER_NS, 1.0)),
        Objective::MinDecodeGbs(_) => None,
    }
}

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
fn by_streams(
    scorer: &mut Scorer<'_>,
    family: Family,
    room: usize,
    key: (f64, f64),
) -> Vec<Candidate> {
    let (sample, shape) = (scorer.sample, scorer.shape);
    let mut roots = Vec::new();
    if family == Family::Float {
        for leaf in ["constant", "plain"] {
            roots.extend(leaf_sub(sample, shape, leaf, false, scorer));
        }
        let f2i = Plan::new("float2int");
        if let Some(Ok(split)) = zipflow_encodings::split(&f2i, sample) {
            let child = child_shape("float2int", "", shape);
            let own = (
                extrapolate(split.own, 1, scorer.scale),
                scorer.options.costs.own_ns("float2int", shape),
            );
            for sub in forms(
                &split.children[0],
                child,
                room,
                key,
                scorer,
                &["plain", "constant"],
                false,
                Place::Inner,
            ) {
                roots.push(Sub {
                    plan: f2i.clone().then(sub.plan),
                    size: own.0 + sub.size,
                    ns: own.1 + sub.ns,
                });
            }
        }
    } else {
        let place = scorer.top();
        roots = forms(sample, shape, room, key, scorer, &[], false, place);
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

/// Every form for `stream` (of `shape`) with room for `room` primitives, leaves but those in
/// `skip`, each inner primitive with the best plan for each child stream. `side`: an
/// exception stream (leaves only); `place`: where the stream's plan sits (see
/// [`gpu_parallel`]).
#[allow(clippy::too_many_arguments)]
fn forms(
    stream: &Values,
    shape: Shape,
    room: usize,
    key: (f64, f64),
    scorer: &mut Scorer<'_>,
    skip: &[&str],
    side: bool,
    place: Place,
) -> Vec<Sub> {
    // `radix` is for long streams of small values (codes). On a short stream (a dictionary's
    // entries, exceptions) it saves a few bytes, and its base, compiled into GPU kernels,
    // varies from chunk to chunk.
    let short = side || stream.len() < VECTOR_LEN;
    let gpu = scorer.options.objective == Objective::Gpu;
    // `ans` (an entropy coder: unsigned streams of at most 32 bits, so `zigzag | ans` for
    // signed ones) only where size is all that counts: it decodes serially and no scan
    // predicate reads it packed, so the other objectives keep the lightweight leaves.
    let entropy = (scorer.options.objective == Objective::Smallest).then_some(&"ans");
    let mut out: Vec<Sub> = CASCADE_LEAVES
        .iter()
        .chain(entropy)
        .filter(|l| !(skip.contains(l) || short && **l == "radix"))
        .filter(|l| !gpu || place.decodes(l))
        .filter_map(|l| leaf_sub(stream, shape, l, side, scorer))
        .collect();
    // Exception streams are a few percent of the values: leaves only, so a `hipatch` costs
    // the search little more than a `patch`.
    if room < 2 || side {
        return out;
    }
    'form: for name in INT_INNER {
        if !scorer.allows_at(name, place) {
            continue;
        }
        let Some(enc) = by_name(name) else { continue };
        let Some(Ok(split)) = zipflow_encodings::split(&Plan::new(*name), stream) else {
            continue;
        };
        scorer.forms_scored += 1;
        let mut sub = Sub {
            plan: Plan::new(*name),
            size: extrapolate(split.own, 1, scorer.scale),
            ns: scorer.options.costs.own_ns(name, shape),
        };
        for (slot, child) in enc.slots().iter().zip(&split.children) {
            let child_shape = child_shape(name, slot.name, shape);
            let side = side || (*name == "hipatch" && !slot.name.is_empty());
            // A handful of sampled values (a sample's two exception counts) cannot tell a
            // constant stream: `constant` would fail on the whole chunk.
            let skip: &[&str] = if side && child.len() < 8 {
                &["constant"]
            } else {
                &[]
            };
            let at = place.child(name, slot.name);
            let best = forms(child, child_shape, room - 1, key, scorer, skip, side, at)
                .into_iter()
                .min_by(|a, b| weigh(a, key).total_cmp(&weigh(b, key)));
            let Some(best) = best else { continue 'form };
            sub.plan = sub.plan.child(slot.name, best.plan);
            sub.size += best.size;
            sub.ns += best.ns;
        }
        out.push(sub);
    }
    out
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
fn leaf_sub(
    stream: &Values,
    shape: Shape,
    name: &str,
    side: bool,
    scorer: &mut Scorer<'_>,
) -> Option<Sub> {
    if !scorer.allows(name) {
        return None;
    }
    let plan = Plan::new(name);
    scorer.forms_scored += 1;
    let full = (stream.len() as f64 * scorer.scale).round() as usize;
    let size = if side && stream.len() < VECTOR_LEN && full > stream.len() {
        // A short exception stream grows with the chunk, but its padding to whole vectors
        // does not: estimate it repeated to its expected length. (Not a dictionary, whose
        // length the sample's already is.)
        let n = full.min(MAX_REPEAT);
        estimate(&plan, &repeated(stream, n)).ok()? as f64 * (full as f64 / n as f64)
    } else {
        extrapolate(estimate(&plan, stream).ok()?, 1, scorer.scale)
    };
    Some(Sub {
        ns: scorer.options.costs.decode_ns(&plan, shape),
        size,
        plan,
    })
}

/// Runs of a numeric search sample: a quarter of [`crate::sample`]'s, since the cascade scores
/// hundreds of plans on it.
pub const SEARCH_RUNS: usize = 2;

/// The sample plans are scored on: [`SEARCH_RUNS`] runs of 1024 values for numbers, the
/// usual longer sample for byte strings and text.
pub fn search_sample(values: &Values, text: bool) -> Values {
    match family(values, text) {
        Family::Fixed => crate::sample_runs(values, crate::run_for(values, text)),
        _ => crate::sample_spread(values, zipflow_core::VECTOR_LEN, SEARCH_RUNS),
    }
}

fn finish(scorer: Scorer<'_>, values: &Values, sample: &Values, objective: Objective) -> Selection {
    let (ranked, evaluated) = scorer.ranked();
    Selection {
        objective,
        ranked,
        evaluated,
        values: values.len(),
        sampled: sample.len(),
    }
}

/// Scores every plan of the search space ([`space`]) on the same sample [`select`] uses.
pub fn exhaustive(values: &Values, text: bool, options: &SelectOptions) -> Selection {
    let sample = search_sample(values, text);
    let mut scorer = Scorer::new(values, &sample, options);
    for p in space(values, text, options.depth) {
        scorer.score(&p);
    }
    finish(scorer, values, &sample, options.objective)
}

/// Plans whose depth with slot defaults written out exceeds the limit are outside the space;
/// the search only builds plans within it, which this checks in tests.
pub fn within_depth(plan: &Plan, limit: usize) -> bool {
    depth(&expanded(plan)) <= limit
}

/// A per-column selector that carries the winning plan from chunk to chunk: consecutive
/// chunks of a column look alike, so a chunk is first encoded with the previous winner, and the
/// full search runs again only when that result grew more than [`DRIFT`] per value over the
/// chunk the plan was found on, or every [`REFRESH`] chunks. Chunks must be given in order for
/// the output to be deterministic.
#[derive(Debug, Clone, Default)]
pub struct ColumnSelector {
    winner: Option<Plan>,
    bytes_per_value: f64,
    since_full: usize,
    searching: std::time::Duration,
}

/// Chunks between full searches.
pub const REFRESH: usize = 256;
/// Growth of the encoded size per value that triggers a full search.
pub const DRIFT: f64 = 0.05;

impl ColumnSelector {
    /// A selector with no history.
    pub fn new() -> ColumnSelector {
        ColumnSelector::default()
    }

    /// Time spent in full searches so far (not in encoding).
    pub fn searching(&self) -> std::time::Duration {
        self.searching
    }

    /// Chooses a plan for the next chunk of the column and encodes it. Returns whether a full
    /// search ran.
    pub fn choose_and_encode(
        &mut self,
        values: &Values,
        text: bool,
        options: &SelectOptions,
    ) -> zipflow_core::Result<(Plan, zipflow_encodings::EncodedNode, bool)> {
        let n = values.len().max(1) as f64;
        if let Some(plan) = &self.winner
            && self.since_full < REFRESH
            && let Ok(node) = zipflow_encodings::encode(plan, values)
        {
            // A node's fixed overhead weighs more on a short (last) chunk: allow it.
            let per_value = (node.size() as f64 - 256.0).max(0.0) / n;
            if per_value <= self.bytes_per_value * (1.0 + DRIFT) {
                self.since_full += 1;
                return Ok((plan.clone(), node, false));
            }
        }
        let started = std::time::Instant::now();
        let selection = select(values, text, options);
        self.searching += started.elapsed();
        let (plan, node) = crate::encode_selection(values, selection)?;
        self.bytes_per_value = node.size() as f64 / n;
        self.winner = Some(plan.clone());
        self.since_full = 0;
        Ok((plan, node, true))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zipflow_core::IntVec;

    #[test]
    fn balanced_keeps_words_for_comment_text() {
        // Comments drawn from a small vocabulary, as TPC-H's are: `words` stores them in
        // about half the bytes of any byte-level coder, which reading at 0.5 GB/s repays.
        use zipflow_core::values::ByteStrings;
        let vocab = [
            "final",
            "deposits",
            "slyly",
            "furiously",
            "ironic",
            "packages",
            "among",
            "the",
            "quickly",
            "regular",
            "accounts",
            "blithely",
            "bold",
            "requests",
            "sleep",
            "above",
            "carefully",
            "express",
            "pending",
            "theodolites",
            "haggle",
            "according",
            "to",
            "even",
            "instructions",
            "wake",
            "fluffily",
            "unusual",
            "dependencies",
            "cajole",
        ];
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut b = ByteStrings {
            offsets: vec![0],
            data: Vec::new(),
        };
        for _ in 0..20_000 {
            let target = 10 + (next() % 34) as usize;
            let start = b.data.len();
            while b.data.len() - start < target {
                if b.data.len() > start {
                    b.data.push(b' ');
                }
                let w = vocab[(next() % vocab.len() as u64) as usize];
                b.data.extend_from_slice(w.as_bytes());
            }
            if next() % 4 == 0 {
                b.data.push(b'.');
            }
            b.offsets.push(b.data.len() as u64);
        }
        let values = Values::Bytes(b);
        let s = select(&values, false, &SelectOptions::default());
        let best = s.best().unwrap_or_else(|| panic!("no plan"));
        assert_eq!(best.plan.name, "words", "{}", s.explain(6));
    }

    #[test]
    fn gpu_objective_keeps_to_parallel_primitives() {
        for (plan, ok) in [
            ("bitpack", true),
            ("for | bitpack", true),
            ("delta | rle(values: bitpack, runs: bitpack)", true),
            ("ans", false),
            ("blockpack", false),
            ("for | hipatch | bitpack", true),
            ("hipatch | bitpack", true),
            ("delta | hipatch | bitpack", false),
            ("strdict(codes: hipatch | bitpack)", false),
            ("strdict(codes: radix)", true),
            ("words(codes: bitpack, counts: for | radix)", true),
            ("for | radix", true),
            ("dict(codes: radix, values: plain)", false),
            ("delta | radix", false),
            ("rle(values: bitpack, runs: radix)", false),
            ("hipatch(counts: ans) | bitpack", false),
            ("for | ans", false),
            ("words(codes: bitpack, counts: bitpack)", true),
            ("words(codes: ans, counts: bitpack)", false),
            (
                "strdict(codes: bitpack, dict: plain(lengths: bitpack, bytes: fsst))",
                false,
            ),
            ("plain(lengths: bitpack, bytes: plain)", true),
        ] {
            let p: Plan = plan.parse().unwrap_or_else(|e| panic!("{plan}: {e}"));
            assert_eq!(gpu_parallel(&p), ok, "{plan}");
        }
        // Skewed integers (where `ans` is smallest) and words over a small vocabulary: every
        // plan the objective ranks is made of parallel primitives.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let skewed: Vec<u32> = (0..65_536)
            .map(|_| (next() % 1000) as u32 * (next() % 1000) as u32 / 997 % 300)
            .collect();
        let mut b = zipflow_core::values::ByteStrings {
            offsets: vec![0],
            data: Vec::new(),
        };
        let vocab = [
            "final ",
            "deposits ",
            "slyly ",
            "ironic ",
            "the ",
            "carefully. ",
        ];
        for _ in 0..20_000 {
            for _ in 0..(2 + next() % 6) {
                b.data
                    .extend_from_slice(vocab[(next() % vocab.len() as u64) as usize].as_bytes());
            }
            b.offsets.push(b.data.len() as u64);
        }
        let gpu = SelectOptions {
            objective: Objective::Gpu,
            ..SelectOptions::default()
        };
        for values in [Values::Int(IntVec::U32(skewed)), Values::Bytes(b)] {
            let s = select(&values, false, &gpu);
            assert!(s.best().is_some(), "no plan for {}", values.ptype());
            for c in &s.ranked {
                assert!(gpu_parallel(&c.plan), "{} ranked under gpu", c.plan);
            }
            let smallest = select(
                &values,
                false,
                &SelectOptions {
                    objective: Objective::Smallest,
                    ..SelectOptions::default()
                },
            );
            let (g, m) = (s.best().map(|c| c.size), smallest.best().map(|c| c.size));
            assert!(g >= m, "gpu {g:?} smaller than smallest {m:?}");
        }
        assert_eq!("gpu".parse::<Objective>().ok(), Some(Objective::Gpu));
    }

    #[test]
    fn string_cascade_matches_exhaustive_search() {
        use zipflow_core::values::ByteStrings;
        let mut b = ByteStrings {
            offsets: vec![0],
            data: Vec::new(),
        };
        let words = ["final ", "deposits ", "slyly. ", "AIR", "REG AIR", ""];
        for i in 0..3000usize {
            for k in 0..(i * 7 % 4) {
                b.data
                    .extend_from_slice(words[(i * 13 + k * 5) % words.len()].as_bytes());
            }
            b.offsets.push(b.data.len() as u64);
        }
        let values = Values::Bytes(b);
        let options = SelectOptions {
            objective: Objective::Smallest,
            depth: 2,
            ..SelectOptions::default()
        };
        let cascade = select(&values, false, &options);
        let full = exhaustive(&values, false, &options);
        let (c, e) = (cascade.best().map(|c| c.size), full.best().map(|c| c.size));
        let (Some(c), Some(e)) = (c, e) else {
            panic!("no plan for the strings");
        };
        assert!(c as f64 <= e as f64 * 1.02, "cascade {c} vs exhaustive {e}");
        assert!(cascade.evaluated * 3 < full.evaluated);
        // Every root is in the space, with each of its slots filled.
        let space = string_space(&search_sample(&values, false), 2);
        for root in STRING_ROOTS {
            assert!(
                space
                    .iter()
                    .any(|p| p.name == *root && !p.children.is_empty())
            );
        }
    }

    #[test]
    fn space_sizes_and_depths() {
        assert_eq!(int_plans(1).len(), 3);
        // 3 leaves, 5 one-slot primitives over 3, 2 two-slot primitives over 3 x 3, and
        // `hipatch` over 3 with `bitpack` side streams.
        assert_eq!(int_plans(2).len(), 3 + 5 * 3 + 2 * 9 + 3);
        let three = int_plans(3);
        assert_eq!(three.len(), 3 + 5 * 39 + 2 * 39 * 39 + 39);
        assert!(three.iter().all(|p| depth(p) <= 3));
        let p: Plan = "rle".parse().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(depth(&expanded(&p)), 3);
    }

    #[test]
    fn one_bit_spills_take_hipatch_when_size_is_all() {
        // 3 % of the values one bit past the rest, as TPC-H l_extendedprice: the smallest
        // plan keeps 23 bits and patches the high bit; the balanced objective weighs the
        // slower decode against the 3 % it saves and keeps plain bit-packing.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let v: Vec<i64> = (0..65_536)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let low = (x % (1 << 23)) as i64;
                if (x >> 40) % 100 < 3 {
                    low | 1 << 23
                } else {
                    low
                }
            })
            .collect();
        let values = Values::Int(IntVec::I64(v));
        let smallest = SelectOptions {
            objective: Objective::Smallest,
            ..SelectOptions::default()
        };
        let s = select(&values, false, &smallest);
        let best = s.best().unwrap_or_else(|| panic!("no plan"));
        assert!(
            best.plan.to_string().contains("hipatch"),
            "{}",
            s.explain(4)
        );
        let s = select(&values, false, &SelectOptions::default());
        let best = s.best().unwrap_or_else(|| panic!("no plan"));
        assert!(
            !best.plan.to_string().contains("hipatch"),
            "{}",
            s.explain(4)
        );
    }

    #[test]
    fn only_the_smallest_objective_entropy_codes_integers() {
        // Line numbers: 1..=k for orders of k = 1..=7 lines. Their differences are mostly 1,
        // which an entropy coder stores in fewer bits than bit-packing or a radix needs.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut v = Vec::new();
        while v.len() < 60_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            v.extend(1..=1 + (x % 7) as i64);
        }
        let values = Values::Int(IntVec::I64(v));
        let smallest = SelectOptions {
            objective: Objective::Smallest,
            ..SelectOptions::default()
        };
        let s = select(&values, false, &smallest);
        let small = s.best().unwrap_or_else(|| panic!("no plan"));
        assert!(small.plan.to_string().contains("ans"), "{}", s.explain(4));
        let b = select(&values, false, &SelectOptions::default());
        let balanced = b.best().unwrap_or_else(|| panic!("no plan"));
        assert!(
            !balanced.plan.to_string().contains("ans"),
            "{}",
            b.explain(4)
        );
        assert!(
            small.size * 5 < balanced.size * 4,
            "{} vs {}",
            small.size,
            balanced.size
        );
    }

    #[test]
    fn cascade_matches_exhaustive_on_shaped_data() {
        let shapes: Vec<Vec<i64>> = vec![
            (0..20_000).map(|i| 5_000_000 + i / 4).collect(),
            (0..20_000).map(|i| (i * 7919) % 1000).collect(),
            (0..20_000).map(|i| [3, 9, 1 << 33][(i / 50) % 3]).collect(),
            (0..20_000)
                .map(|i| (i / 1024) * 1_000_003 + (i * 31) % 64)
                .collect(),
        ];
        let opts = SelectOptions {
            objective: Objective::Smallest,
            ..SelectOptions::default()
        };
        for v in shapes {
            let values = Values::Int(IntVec::I64(v));
            let fast = select(&values, false, &opts);
            let all = exhaustive(&values, false, &opts);
            let (Some(a), Some(b)) = (fast.best(), all.best()) else {
                panic!("nothing scored")
            };
            // Sizes add up over a plan's nodes, so choosing each child stream's plan on its
            // own finds the best plan of the space, up to rounding.
            assert!(
                a.size <= b.size + 1,
                "cascade {} ({} B) vs exhaustive {} ({} B)",
                a.plan,
                a.size,
                b.plan,
                b.size
            );
            // Stream forms scored against whole plans scored (`smallest` also tries `ans` on
            // every stream, which the exhaustive space leaves out).
            assert!(
                fast.evaluated * 4 <= all.evaluated,
                "{} vs {}",
                fast.evaluated,
                all.evaluated
            );
            assert!(within_depth(&a.plan, 3), "{}", a.plan);
        }
    }

    #[test]
    fn cascade_matches_exhaustive_for_every_additive_objective() {
        let values = Values::Int(IntVec::I64(
            (0..30_000i64)
                .map(|i| (i / 7) * 3 + [0, 0, 1, 90_000][((i % 11) % 4) as usize])
                .collect(),
        ));
        for (objective, per_byte) in [
            (Objective::Smallest, 1.0),
            (Objective::Balanced, 1.0 / BALANCED_BYTES_PER_NS),
            (Objective::Fastest, 1.0 / FASTEST_BYTES_PER_NS),
        ] {
            let opts = SelectOptions {
                objective,
                ..SelectOptions::default()
            };
            // `smallest` weighs size alone (its decode time only breaks ties).
            let key = |c: &Candidate| match objective {
                Objective::Smallest => c.size as f64,
                _ => c.size as f64 * per_byte + c.decode_ns,
            };
            let (Some(a), Some(b)) = (
                select(&values, false, &opts).best().cloned(),
                exhaustive(&values, false, &opts).best().cloned(),
            ) else {
                panic!("nothing scored for {objective}")
            };
            assert!(
                key(&a) <= key(&b) + 2.0 * per_byte,
                "{objective}: cascade {} vs exhaustive {}",
                a.plan,
                b.plan
            );
        }
    }

    #[test]
    fn objectives_order_size_and_speed() {
        let values = Values::Int(IntVec::I64(
            (0..50_000).map(|i| (i * 7919) % 100_000).collect(),
        ));
        let mut sizes = Vec::new();
        for o in [Objective::Smallest, Objective::Balanced, Objective::Fastest] {
            let s = select(
                &values,
                false,
                &SelectOptions {
                    objective: o,
                    ..SelectOptions::default()
                },
            );
            let b = s
                .best()
                .cloned()
                .unwrap_or_else(|| panic!("nothing for {o}"));
            sizes.push((b.size, b.decode_gbs));
        }
        assert!(
            sizes[0].0 <= sizes[1].0 && sizes[1].0 <= sizes[2].0,
            "{sizes:?}"
        );
        assert!(sizes[2].1 >= sizes[0].1, "{sizes:?}");
        let need = sizes[0].1 * 1.5;
        let s = select(
            &values,
            false,
            &SelectOptions {
                objective: Objective::MinDecodeGbs(need),
                ..SelectOptions::default()
            },
        );
        let b = s.best().cloned().unwrap_or_else(|| panic!("nothing"));
        let any_fast = s.ranked.iter().any(|c| c.decode_gbs >= need);
        assert_eq!(b.decode_gbs >= need, any_fast);
    }
}
