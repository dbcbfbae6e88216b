//! `float2int`: decimal scaling with exceptions (the exceptions as `patch`'s).

use super::{Filler, patch};
use zipflow_core::Result;
use zipflow_encodings::NodeView;
use zipflow_encodings::float2int::{POW10, View};

/// Slots after the length: `patch`'s three, then the bits of `10^E` as an f64.
pub(crate) const SLOTS: usize = 4;

/// Checks a `float2int` node and writes its exceptions' slots and its scale.
pub(crate) fn fill(f: &mut Filler<'_>, node: &NodeView<'_>, b: usize) -> Result<()> {
    let v = View::parse(node)?;
    f.prm[b + 4] = POW10[usize::from(v.exponent)].to_bits();
    patch::fill_exceptions(f, node, b, &v.exceptions)
}
