//! Node metadata read by hand: the `for` reference, the `bitpack` width and the `patch`
//! exception count. Every read of an encoding's metadata in this crate goes through these
//! functions, each checking the node's shape and that the metadata holds nothing more, so
//! that typed views of the encodings can replace them in one place.

use zipflow_core::Result;
use zipflow_encodings::NodeView;

/// The reference's bits of a `for` node (one child, no buffers).
pub(crate) fn for_reference(node: &NodeView<'_>) -> Result<u64> {
    node.expect_shape("for", 0, 1)?;
    let mut meta = node.meta_reader();
    let reference = meta.u64("reference")?;
    meta.finish("for")?;
    Ok(reference)
}

/// The bit width of a `bitpack` node (one buffer, no children), not yet checked against its
/// type.
pub(crate) fn bitpack_width(node: &NodeView<'_>) -> Result<usize> {
    node.expect_shape("bitpack", 1, 0)?;
    let mut meta = node.meta_reader();
    let width = usize::from(meta.u8("bit width")?);
    meta.finish("bitpack")?;
    Ok(width)
}

/// The exception count of a `patch` node (two buffers, one child); its bit width is read
/// and not used.
pub(crate) fn patch_exception_count(node: &NodeView<'_>) -> Result<usize> {
    node.expect_shape("patch", 2, 1)?;
    let mut meta = node.meta_reader();
    let _width = meta.u8("bit width")?;
    let count = meta.u32("exception count")? as usize;
    meta.finish("patch")?;
    Ok(count)
}
