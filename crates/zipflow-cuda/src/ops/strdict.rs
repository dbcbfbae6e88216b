//! `strdict`: string codes into a dictionary of byte strings (a byte-string root; its
//! kernels are in [`crate::codegen::strings`]).

use zipflow_core::Result;
use zipflow_encodings::rowindex::RowIndex;
use zipflow_encodings::{NodeView, strdict};

/// Slots after the length: the byte offset of the chunk's bytes in the output, their
/// number, the width of the offsets (8, 4, or 0 for none), the byte offset of the chunk's
/// segment table in the scratch buffer (`2 * (segments + 1)` u32, see
/// [`crate::codegen::strings`]), and the byte offset in `in` of the same table built by the
/// host from the node's row index (all ones when the first kernel sums it).
pub(crate) const SLOTS: usize = 5;

/// Checks a `strdict` node (its slots are the string root's, filled by the decoder).
pub(crate) fn fill(node: &NodeView<'_>) -> Result<()> {
    strdict::View::parse(node).map(|_| ())
}

/// The node's row index (a step of rows) and its rows.
pub(crate) fn row_index<'a>(
    node: &NodeView<'a>,
    name: &str,
) -> Result<(Option<RowIndex<'a>>, usize)> {
    Ok((RowIndex::of(node, name, false)?, node.len))
}
