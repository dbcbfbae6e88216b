//! Scoring plans on one sample: estimated size, extrapolated to the whole stream, and
//! estimated decode time.

use rustc_hash::{FxHashMap, FxHashSet};

use zipflow_core::{Int, Plan, Values, match_ints};
use zipflow_encodings::gpu::{decodes_at, gpu_parallel_at, is_gpu_parallel};
use zipflow_encodings::{GpuPlace, Shape, estimate};

use super::objective::{additive_key, rank_by};
use super::space::expanded;
use super::{Candidate, Objective, SelectOptions};

/// Bytes of a node that do not grow with its stream: header, child entries, metadata.
/// Scaled up from the sample with the rest they would count `scale` times over, and plans of
/// several nodes (or with short side streams) would look worse than they are.
const NODE_BYTES: f64 = 24.0;

/// The size on the whole stream of a plan of `nodes` nodes that takes `size` bytes on the
/// sample: the part that grows with the stream scaled, the nodes' fixed bytes once.
pub(super) fn extrapolate(size: usize, nodes: usize, scale: f64) -> f64 {
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
pub(super) struct Scorer<'a> {
    pub(super) sample: &'a Values,
    pub(super) shape: Shape,
    pub(super) scale: f64,
    pub(super) plain_bytes: f64,
    pub(super) options: &'a SelectOptions,
    /// Size, decode time and speed of every plan scored (`None`: it cannot encode the sample).
    seen: FxHashMap<Plan, Option<(usize, f64, f64)>>,
    /// (stream, form) pairs the stream-by-stream cascade scored: streams split, leaves
    /// estimated.
    pub(super) forms_scored: usize,
    /// Whether the stream is a child of a string column (codes, lengths, counts), where the
    /// GPU decodes its plan a segment at a time ([`GpuPlace::Codes`]).
    pub(super) nested: bool,
    /// Whether the cascade may end streams in entropy coders (where the objective allows).
    pub(super) entropy: bool,
    /// How many times as many distinct values the whole stream holds as the sample (numbers
    /// only, where the sample is shorter than the stream): a dictionary's size follows it.
    pub(super) distinct: Option<f64>,
}

/// Distinct values of a numeric stream (floats by bits); `None` for byte strings.
fn distinct(values: &Values) -> Option<usize> {
    fn count<T: Copy>(v: &[T], key: impl Fn(T) -> u64) -> usize {
        let mut seen =
            FxHashSet::with_capacity_and_hasher(v.len().min(1 << 16), Default::default());
        v.iter().filter(|&&x| seen.insert(key(x))).count()
    }
    match values {
        Values::Int(v) => Some(match_ints!(v, T, x => count(x, |y: T| y.to_u64()))),
        Values::F32(v) => Some(count(v, |y: f32| u64::from(y.to_bits()))),
        Values::F64(v) => Some(count(v, f64::to_bits)),
        Values::Bytes(_) => None,
    }
}

impl<'a> Scorer<'a> {
    pub(super) fn new(
        values: &Values,
        sample: &'a Values,
        options: &'a SelectOptions,
    ) -> Scorer<'a> {
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
            entropy: true,
            // Counted only where the stream-by-stream cascade (the one reader) runs and the
            // sample is shorter than the stream: a hash of every value of the chunk.
            distinct: (additive_key(options.objective).is_some() && values.len() > sample.len())
                .then(|| match (distinct(values), distinct(sample)) {
                    (Some(whole), Some(part)) if part > 0 => Some(whole as f64 / part as f64),
                    _ => None,
                })
                .flatten(),
        }
    }

    /// The place of the stream's plan: a column's, or a string column's child stream's.
    pub(super) fn top(&self) -> GpuPlace {
        if self.nested {
            GpuPlace::Codes
        } else {
            GpuPlace::Tile
        }
    }

    /// Whether the objective lets plans use primitive `name` at `place`.
    pub(super) fn allows_at(&self, name: &str, place: GpuPlace) -> bool {
        self.allows(name) && (self.options.objective != Objective::Gpu || decodes_at(name, place))
    }

    /// Whether the objective lets plans use primitive `name`.
    pub(super) fn allows(&self, name: &str) -> bool {
        self.options.objective != Objective::Gpu || is_gpu_parallel(name)
    }

    pub(super) fn score(&mut self, plan: &Plan) -> Option<Candidate> {
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

    pub(super) fn ranked(self) -> (Vec<Candidate>, usize) {
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
