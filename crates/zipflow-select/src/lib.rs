//! Choosing plans.
//!
//! The selector knows no concrete encoding: it asks [`zipflow_encodings::estimate`] for the
//! size of candidate plans on a stratified sample of the stream, and a [`cost::CostTable`] for
//! their decode time, and keeps the best by an [`Objective`]. What part each primitive plays in the
//! search, what its child streams look like, what it costs to decode and whether the GPU
//! decodes it in parallel, it reads from the registry ([`zipflow_encodings::Descriptor`] and
//! the [`zipflow_encodings::Encoding`] methods beside each encoder); the fixed candidate lists
//! come from [`zipflow_encodings::selection`]. Integer and float streams get a
//! cascade search over plans up to a depth limit ([`search`]); byte strings and text choose
//! among a fixed candidate list ([`candidates`], [`text_candidates`]). The plan that wins on the
//! sample is then run on the whole stream, falling back to the next best if the sample misled
//! it (e.g. `constant` on a sample that happened to be constant). [`ColumnSelector`] carries a
//! column's best plans from chunk to chunk, so most chunks re-score a few plans instead of
//! searching. Inside a plan, per-block choices are made by an exact shortest path ([`dp`]).
//!
//! ```
//! use zipflow_core::{IntVec, Values};
//! let sorted = Values::Int(IntVec::I64((0..10_000).map(|i| 5_000_000 + i / 4).collect()));
//! let (plan, node) = zipflow_select::choose_and_encode(&sorted).unwrap();
//! assert!(node.size() < 10_000 / 2, "{plan}: {} bytes", node.size());
//! ```

pub mod cost;
pub mod dp;
pub mod search;

pub use cost::CostTable;
pub use search::{Candidate, ColumnSelector, Objective, SelectOptions, Selection, rank_by};
pub use zipflow_encodings::selection::{candidates, text_candidates};
pub use zipflow_encodings::{gpu_parallel, gpu_parallel_names};

use zipflow_core::{Error, PType, Plan, Result, Values};
use zipflow_encodings::selection::RAW;
use zipflow_encodings::{ColumnChooser, EncodedNode, PlanChooser, encode, estimate};

/// The selector as the file writer's [`PlanChooser`]: each column gets a [`ColumnSelector`]
/// run by `options`, validity flags the best of the u8 [`candidates`].
#[derive(Debug, Clone, Default)]
pub struct Chooser {
    /// How plans are chosen: objective, search depth, decode cost table.
    pub options: SelectOptions,
}

impl Chooser {
    /// A chooser that selects by `options`, shared by a writer's threads.
    pub fn shared(options: SelectOptions) -> std::sync::Arc<dyn PlanChooser> {
        std::sync::Arc::new(Chooser { options })
    }
}

impl PlanChooser for Chooser {
    fn column(&self, text: bool) -> Box<dyn ColumnChooser> {
        Box::new(ColumnChoice {
            selector: ColumnSelector::new(),
            text,
            options: self.options.clone(),
        })
    }

    fn encode_flags(&self, flags: &Values) -> Result<EncodedNode> {
        Ok(choose_among_and_encode(flags, &candidates(PType::U8), false)?.1)
    }
}

/// One column's [`ColumnSelector`] with the options it runs by.
struct ColumnChoice {
    selector: ColumnSelector,
    text: bool,
    options: SelectOptions,
}

impl ColumnChooser for ColumnChoice {
    fn choose_and_encode(&mut self, values: &Values) -> Result<EncodedNode> {
        let (_, node, _) = self
            .selector
            .choose_and_encode(values, self.text, &self.options)?;
        Ok(node)
    }
}

/// Candidates the search ranks best that are encoded on the whole stream before one is
/// taken: a sample of a few runs can misjudge clustered values (long runs, rare outliers) by
/// several times, and a few encodes cost little next to the search, which runs only on some
/// chunks of a column.
pub const VERIFY: usize = 4;

/// Runs in a sample.
const SAMPLE_RUNS: usize = 8;

/// A deterministic stratified sample: up to eight runs of 1024 consecutive values,
/// evenly spread, so runs and local order survive sampling. Small streams are used whole.
pub fn sample(values: &Values) -> Values {
    sample_runs(values, zipflow_core::VECTOR_LEN)
}

/// Like [`sample`] with runs of `run` values. Byte strings and text use longer runs: their
/// dictionaries only pay off over many values.
pub fn sample_runs(values: &Values, run: usize) -> Values {
    sample_spread(values, run, SAMPLE_RUNS)
}

/// `runs` runs of `run` consecutive values, evenly spread; small streams whole.
pub(crate) fn sample_spread(values: &Values, run: usize, runs: usize) -> Values {
    let n = values.len();
    if n <= run * runs * 2 {
        return values.clone();
    }
    let stride = n / runs;
    let parts: Vec<Values> = (0..runs)
        .map(|k| {
            let start = k * stride;
            values.slice(start, (start + run).min(n))
        })
        .collect();
    concat(&parts)
}

/// The run length sampled for `values` when choosing among plans for it.
pub(crate) fn run_for(values: &Values, text: bool) -> usize {
    match values.ptype() {
        PType::Bytes => zipflow_core::VECTOR_LEN,
        _ if text => 128 * zipflow_core::VECTOR_LEN,
        _ => zipflow_core::VECTOR_LEN,
    }
}

fn concat(parts: &[Values]) -> Values {
    let Some(first) = parts.first() else {
        return Values::empty(PType::U8);
    };
    let mut out = first.clone();
    for p in &parts[1..] {
        match (&mut out, p) {
            (Values::Int(a), Values::Int(b)) => {
                zipflow_core::match_ints!(a, T, a => {
                    if let Some(b) = <T as zipflow_core::values::IntVecOf>::slice(b) {
                        a.extend_from_slice(b);
                    }
                })
            }
            (Values::F32(a), Values::F32(b)) => a.extend_from_slice(b),
            (Values::F64(a), Values::F64(b)) => a.extend_from_slice(b),
            (Values::Bytes(a), Values::Bytes(b)) => {
                let base = a.data.len() as u64;
                a.offsets.extend(b.offsets[1..].iter().map(|o| o + base));
                a.data.extend_from_slice(&b.data);
            }
            _ => {}
        }
    }
    out
}

/// Candidates ranked by estimated size on a sample of `values`, smallest first.
pub fn rank(values: &Values) -> Vec<(Plan, usize)> {
    rank_among(values, &candidates(values.ptype()), false)
}

/// `plans` ranked by estimated size on a sample of `values` (longer runs if it is `text`),
/// smallest first. Plans that cannot encode the sample are left out.
pub fn rank_among(values: &Values, plans: &[Plan], text: bool) -> Vec<(Plan, usize)> {
    let s = sample_runs(values, run_for(values, text));
    let mut ranked: Vec<(Plan, usize)> = plans
        .iter()
        .filter_map(|p| estimate(p, &s).ok().map(|size| (p.clone(), size)))
        .collect();
    // Stable: ties keep candidate order.
    ranked.sort_by_key(|(_, size)| *size);
    ranked
}

/// Chooses a plan for `values` (by [`search::select`] with the default options) and encodes
/// them with it.
pub fn choose_and_encode(values: &Values) -> Result<(Plan, EncodedNode)> {
    choose_with(values, false, &SelectOptions::default())
}

/// Chooses a plan for `values` (sampled as text if `text`) by `options` and encodes them with
/// it.
pub fn choose_with(
    values: &Values,
    text: bool,
    options: &SelectOptions,
) -> Result<(Plan, EncodedNode)> {
    encode_selection(values, search::select(values, text, options))
}

/// Encodes `values` with the best plan of `selection` that can encode them (a plan may fit
/// the sample and not the whole stream); storing the values as they are ([`RAW`]) as the last
/// resort. The best few candidates are encoded on the whole stream and judged by their real
/// sizes (see [`VERIFY`]).
pub fn encode_selection(values: &Values, selection: Selection) -> Result<(Plan, EncodedNode)> {
    let mut tried: Vec<(Candidate, EncodedNode)> =
        encode_first(values, selection.ranked.iter().map(|c| &c.plan))
            .into_iter()
            .map(|(i, node)| {
                let mut c = selection.ranked[i].clone();
                c.size = node.size();
                (c, node)
            })
            .collect();
    let mut judged: Vec<Candidate> = tried.iter().map(|(c, _)| c.clone()).collect();
    rank_by(&mut judged, selection.objective);
    if let Some(best) = judged.first()
        && let Some(i) = tried.iter().position(|(c, _)| c.plan == best.plan)
    {
        let (c, node) = tried.swap_remove(i);
        return Ok((c.plan, node));
    }
    let mut ranked: Vec<(Plan, usize)> = selection
        .ranked
        .into_iter()
        .skip(VERIFY)
        .map(|c| (c.plan, c.size))
        .collect();
    if values.ptype() != PType::Bytes && !ranked.iter().any(|(p, _)| p.name == RAW) {
        ranked.push((Plan::new(RAW), 0));
    }
    encode_best(values, ranked)
}

/// The first [`VERIFY`] of `plans` encoded on the whole of `values`: each one that can encode
/// them, by its position, with its node.
fn encode_first<'p>(
    values: &Values,
    plans: impl Iterator<Item = &'p Plan>,
) -> Vec<(usize, EncodedNode)> {
    plans
        .take(VERIFY)
        .enumerate()
        .filter_map(|(i, p)| encode(p, values).ok().map(|node| (i, node)))
        .collect()
}

/// Chooses among `plans` for `values` (sampled as text if `text`) and encodes them with the
/// winner: the smallest of the [`VERIFY`] best by the sample's estimate, encoded whole.
pub fn choose_among_and_encode(
    values: &Values,
    plans: &[Plan],
    text: bool,
) -> Result<(Plan, EncodedNode)> {
    let ranked = rank_among(values, plans, text);
    // The first of equally small ones, as the ranking had them.
    let best = encode_first(values, ranked.iter().map(|(p, _)| p))
        .into_iter()
        .min_by_key(|(_, node)| node.size())
        .map(|(i, node)| (ranked[i].0.clone(), node));
    match best {
        Some(best) => Ok(best),
        None => encode_best(values, ranked.into_iter().skip(VERIFY).collect()),
    }
}

fn encode_best(values: &Values, ranked: Vec<(Plan, usize)>) -> Result<(Plan, EncodedNode)> {
    let mut last_err = None;
    for (plan, _) in ranked {
        match encode(&plan, values) {
            Ok(node) => return Ok((plan, node)),
            Err(e) => last_err = Some(e),
        }
    }
    Err(last_err.unwrap_or_else(|| {
        Error::unsupported(format!("no plan can encode {} values", values.ptype()))
    }))
}
