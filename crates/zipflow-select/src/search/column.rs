//! Carrying a column's winning plan from chunk to chunk.

use zipflow_core::{Plan, Values};

use super::{SelectOptions, select};

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
