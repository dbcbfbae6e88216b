//! What a plan is chosen for, how plans are chosen, and what the search reports.

use zipflow_core::Plan;

use crate::cost::CostTable;

/// Read bandwidth assumed by [`Objective::Balanced`]: bytes per nanosecond (0.5 GB/s, a disk
/// or a network link): a plan may be larger than the smallest only where it decodes enough
/// faster to make up for it at that speed.
pub(super) const BALANCED_BYTES_PER_NS: f64 = 0.5;

/// Read bandwidth assumed by [`Objective::Fastest`]: data already in memory (32 GB/s).
pub(super) const FASTEST_BYTES_PER_NS: f64 = 32.0;

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
    /// ([`GpuDecode::parallel`]): for files decoded on the GPU, where an `ans` block is a chain of
    /// dependent steps, `fsst` and the character coders decode a piece or block per thread and
    /// `blockpack` reads a table for every value; `hipatch` and `radix` only where the GPU
    /// decodes them at full speed ([`gpu_parallel`]).
    ///
    /// [`GpuDecode::parallel`]: zipflow_encodings::GpuDecode::parallel
    /// [`gpu_parallel`]: zipflow_encodings::gpu_parallel
    Gpu,
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
                    let serial: Vec<String> = zipflow_encodings::encodings()
                        .iter()
                        .filter(|e| !e.gpu().parallel)
                        .map(|e| format!("`{}`", e.name()))
                        .collect();
                    format!(
                        "it is the smallest the GPU decodes in parallel (none of {})",
                        serial.join(", ")
                    )
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

pub(super) fn better(a: &Candidate, b: &Candidate, objective: Objective) -> bool {
    order(a, b, objective) == std::cmp::Ordering::Less
}

/// Per-byte and per-nanosecond weights of an objective that adds up over a plan's nodes
/// (every one but [`Objective::MinDecodeGbs`], a bound rather than a sum).
pub(super) fn additive_key(objective: Objective) -> Option<(f64, f64)> {
    match objective {
        Objective::Smallest | Objective::Gpu => Some((1.0, 1e-9)),
        Objective::Balanced => Some((1.0 / BALANCED_BYTES_PER_NS, 1.0)),
        Objective::Fastest => Some((1.0 / FASTEST_BYTES_PER_NS, 1.0)),
        Objective::MinDecodeGbs(_) => None,
    }
}
