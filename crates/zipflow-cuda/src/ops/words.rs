//! `words`: each string's tokens as codes into a dictionary of byte strings (a byte-string
//! root; its kernels are in [`crate::codegen::strings`]).

use super::Filler;
use zipflow_core::Result;
use zipflow_encodings::rowindex::RowIndex;
use zipflow_encodings::{NodeView, words};

/// Slots after the length: as `strdict`'s.
pub(crate) const SLOTS: usize = 5;

/// Checks a `words` node and records its strings' bytes.
pub(crate) fn fill(f: &mut Filler<'_>, node: &NodeView<'_>) -> Result<()> {
    f.string_bytes = Some(words::View::parse(node)?.total);
    Ok(())
}

/// The node's row index (a step of tokens and bytes) and its tokens.
pub(crate) fn row_index<'a>(
    node: &NodeView<'a>,
    name: &str,
) -> Result<(Option<RowIndex<'a>>, usize)> {
    Ok((RowIndex::of(node, name, true)?, node.children[0].len))
}
