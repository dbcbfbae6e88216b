//! Cascade search: plans up to a depth limit, built on a sample, scored by an objective.
//!
//! The search space is a grammar of plan texts per stream family: leaves (`bitpack`, `plain`,
//! `constant`) and inner primitives whose every child slot is again a plan of the space, down to
//! [`SelectOptions::depth`] primitives on the longest path (slot defaults expanded, so
//! `for | bitpack` has depth 2 and `rle` with its default children depth 3). `float2int` is a
//! change of type, not a step of the cascade: it does not count. Which primitive is which is
//! each primitive's own declaration ([`zipflow_encodings::Role`]), read from the registry in
//! its order (ties between equally good forms go to the earlier).
//!
//! The folder follows the search's parts: [`objective`] (what a plan is chosen for and the
//! ranking), `space` (the plans of each family), `scorer` (size and decode time on a sample),
//! `cascade` (the stream-by-stream search for additive objectives and string columns),
//! `refine` (slot-by-slot refinement for a speed bound) and `column` (a column's plan carried
//! from chunk to chunk).
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
//! `estimate`) and its estimated decode time (from the [`CostTable`](crate::CostTable)).

mod cascade;
mod column;
pub mod objective;
mod refine;
mod scorer;
mod space;
#[cfg(test)]
mod tests;

pub use column::{ColumnSelector, DRIFT, REFRESH};
pub use objective::{Candidate, Objective, SelectOptions, Selection, rank_by};
pub use space::{depth, space, string_roots, string_space, within_depth};
pub use zipflow_encodings::gpu_parallel;

use zipflow_core::{PType, Values};
use zipflow_encodings::{Role, by_name};

use cascade::{by_streams, select_strings};
use objective::additive_key;
use refine::refine;
use scorer::Scorer;
use space::{Family, family, first_forms, fixed_candidates, with_root};

/// Plans kept after the first round and refined.
pub const BEAM: usize = 4;

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
        let mut roots = by_streams(&mut scorer, f, options.depth, key);
        if options.objective == Objective::Balanced {
            let margin = if nested {
                BALANCED_ENTROPY_MARGIN
            } else {
                margin_for(values.len())
            };
            roots = entropy_by_margin(roots, &mut scorer, f, options.depth, key, margin);
        }
        return Selection {
            objective: options.objective,
            ranked: roots,
            evaluated: scorer.forms_scored,
            values: values.len(),
            sampled: sample.len(),
        };
    } else {
        let first: Vec<Candidate> = with_root(f, values.ptype(), first_forms(options.depth))
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

/// How much cheaper (by the balanced objective's weights: bytes read at 0.5 GB/s plus
/// decode time) a plan with an entropy coder must be than the best plan without one for the
/// balanced objective to take it: an entropy coder decodes serially and no scan predicate
/// reads it packed, so a small saving does not pay for what a query loses.
pub const BALANCED_ENTROPY_MARGIN: f64 = 0.2;

/// Values over which the whole [`BALANCED_ENTROPY_MARGIN`] is asked: a full chunk at the
/// default `--chunk-rows`.
pub const MARGIN_VALUES: usize = 1 << 16;

/// The margin asked of a chunk of `len` values: what a scan loses to an entropy coder grows
/// with the values it reads, so a short chunk (a small table, a table's last chunk), whose
/// cost is mostly fixed per chunk, asks for that share of the margin.
pub fn margin_for(len: usize) -> f64 {
    BALANCED_ENTROPY_MARGIN * (len as f64 / MARGIN_VALUES as f64).min(1.0)
}

/// The cascade's `roots` (found with entropy coders allowed), or the best plans without
/// entropy coders where those come within `margin` (see [`margin_for`]) of the best.
fn entropy_by_margin(
    roots: Vec<Candidate>,
    scorer: &mut Scorer<'_>,
    f: Family,
    depth: usize,
    (per_byte, per_ns): (f64, f64),
    margin: f64,
) -> Vec<Candidate> {
    let weigh = |c: &Candidate| c.size as f64 * per_byte + c.decode_ns * per_ns;
    let entropy = |p: &zipflow_core::Plan| {
        fn any(p: &zipflow_core::Plan, f: &dyn Fn(&str) -> bool) -> bool {
            f(&p.name) || p.children.iter().any(|(_, c)| any(c, f))
        }
        any(p, &|n| {
            by_name(n).is_some_and(|e| {
                matches!(e.descriptor().search.role, Role::Entropy | Role::BlockCoder)
            })
        })
    };
    let Some(best) = roots.first() else {
        return roots;
    };
    if !entropy(&best.plan) {
        return roots;
    }
    scorer.entropy = false;
    let light = by_streams(scorer, f, depth, (per_byte, per_ns));
    scorer.entropy = true;
    match light.first() {
        Some(l) if weigh(best) > weigh(l) * (1.0 - margin) => light,
        _ => roots,
    }
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
