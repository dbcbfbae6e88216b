//! The shared vocabulary of zipflow.
//!
//! Everything that more than one stage of the pipeline must agree on lives here:
//!
//! - [`error`]: the one structured [`Error`] type, with the file / column / chunk location that
//!   the format layer fills in as errors travel outwards;
//! - [`values`]: typed value streams ([`Values`], [`IntVec`]) that encodings consume and produce;
//! - [`types`]: the column types a file can hold and their on-disk codes;
//! - [`plan`]: the plan tree (which primitives encode a stream) and its text form;
//! - [`stats`]: per-chunk zone maps (min, max, null count).
//!
//! ```
//! use zipflow_core::plan::Plan;
//! let plan: Plan = "dict(codes: bitpack, values: for | bitpack)".parse().unwrap();
//! assert_eq!(plan.to_string().parse::<Plan>().unwrap(), plan);
//! ```

pub mod error;
pub mod plan;
pub mod stats;
pub mod types;
pub mod values;

pub use error::{Error, Location, Result};
pub use plan::Plan;
pub use types::{ColumnType, PType};
pub use values::{Int, IntVec, Values};

/// The most values one chunk (and so one encoded stream) may hold; readers reject more, so
/// a damaged length cannot make a decoder allocate without bound.
pub const MAX_CHUNK_LEN: usize = 1 << 24;

/// Values per vector: the unit of the FastLanes layout and of block-wise decoding.
pub const VECTOR_LEN: usize = 1024;
