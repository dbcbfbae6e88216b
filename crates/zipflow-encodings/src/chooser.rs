//! The contract between a writer of chunks and whatever chooses their plans.
//!
//! The file writer (`zipflow-format`) encodes each chunk by a plan it does not choose: a plan
//! the user forced, or one a [`PlanChooser`] picks. The selector (`zipflow-select`) implements
//! the trait and the program that writes files wires the two together, so the format knows no
//! search and no concrete encoding.

use zipflow_core::{Result, Values};

use crate::EncodedNode;

/// Chooses plans for the chunks of a table's columns and encodes the chunks by them.
pub trait PlanChooser: Send + Sync + std::fmt::Debug {
    /// A chooser for one column's chunks, given in order. `text` marks a u8 column that holds
    /// text (or any raw bytes), whose plans come from the text candidates.
    fn column(&self, text: bool) -> Box<dyn ColumnChooser>;

    /// Encodes the 0/1 flags of a chunk's validity (u8 values).
    fn encode_flags(&self, flags: &Values) -> Result<EncodedNode>;
}

/// Chooses a plan for each chunk of one column, in order, and encodes the chunk by it; it
/// may remember what won earlier chunks.
pub trait ColumnChooser: Send {
    /// Chooses a plan for the next chunk and encodes `values` with it.
    fn choose_and_encode(&mut self, values: &Values) -> Result<EncodedNode>;
}
