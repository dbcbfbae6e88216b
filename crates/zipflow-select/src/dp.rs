//! Optimal per-block choice: one option per 1024-value block, by an exact shortest path over
//! (block, option) with a cost for announcing a change of option.
//!
//! The dynamic program lives next to the encoder that uses it (`blockpack`, which chooses a
//! bit width per block; `chartable` runs the same recursion over character tables); it is
//! re-exported here with the selector's other tools, and benchmarked in `benches/dp.rs`.
//!
//! ```
//! use zipflow_select::dp::{Switch, shortest_path};
//! // Two options over three blocks: staying on option 1 beats paying for two changes.
//! let costs = [10, 0, 4, 10, 10, 0];
//! let sw = Switch { first: 1, stay: 1, change: 6 };
//! assert_eq!(shortest_path(&costs, 2, sw).1, vec![1, 1, 1]);
//! ```

pub use zipflow_encodings::blockpack::{INFEASIBLE, Switch, shortest_path};
