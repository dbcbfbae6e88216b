//! A node's integers handed over a vector or two at a time.
//!
//! A consumer that converts values as they arrive (Arrow's 16-byte decimals, string views
//! gathered by dictionary code) then keeps each run in L1 and writes only its own output,
//! instead of the decoded stream first and its output after. `bitpack`, `for | bitpack`,
//! `dict` with bit-packed codes and `u32` `ans` nodes stream; any other node is decoded whole
//! and handed over as one run. Either way the values and the errors are the decoder's.

use fastlanes::{BitPacking, FoR};
use zipflow_core::values::IntVecOf;
use zipflow_core::{Error, Int, Result, VECTOR_LEN, Values};

use crate::{NodeView, Scratch, ans, bitpack, dict, frame};

/// Whether [`for_each_run`] streams `node` rather than decoding it whole first.
pub fn streams(node: &NodeView<'_>) -> bool {
    let first_is_packed = node.children.first().is_some_and(|c| c.id == bitpack::ID);
    node.id == bitpack::ID
        || (node.id == frame::ID || node.id == dict::ID) && first_is_packed
        || node.id == ans::ID && node.ptype == zipflow_core::PType::U32
}

/// Calls `f` on the values of `node` (of type `T`), in order, in runs of at most 2048. Each
/// run is `f`'s to change in place (say, to prefix-sum it in L1).
pub fn for_each_run<T: Int + IntVecOf>(
    node: &NodeView<'_>,
    scratch: &mut Scratch,
    mut f: impl FnMut(&mut [T]) -> Result<()>,
) -> Result<()> {
    if node.ptype != T::PTYPE {
        return Err(Error::corrupt(format!(
            "a node of {} values read as {}",
            node.ptype,
            T::PTYPE
        )));
    }
    if node.id == bitpack::ID {
        return unpacked::<T>(node, None, &mut f);
    }
    if node.id == frame::ID && node.children.first().is_some_and(|c| c.id == bitpack::ID) {
        let view = frame::View::parse(node)?;
        let r = T::from_u64_wrapping(view.reference).to_bits();
        return unpacked::<T>(view.offsets, Some(r), &mut f);
    }
    if node.id == dict::ID {
        return dict::for_each_run(node, scratch, f);
    }
    if node.id == ans::ID && T::PTYPE == zipflow_core::PType::U32 {
        return ans::for_each_u32_run(node, |run| f(bytemuck::cast_slice_mut(run)));
    }
    let mut decoded = scratch.decode(node)?;
    let result = match &mut decoded {
        Values::Int(v) => match T::slice_mut(v) {
            Some(v) => f(v),
            None => Err(Error::corrupt("decoded values of the wrong type")),
        },
        _ => Err(Error::corrupt("decoded values are not integers")),
    };
    scratch.give(decoded);
    result
}

/// Streams a `bitpack` node of `T` values, adding `reference` (wrapping) when given.
fn unpacked<T: Int>(
    node: &NodeView<'_>,
    reference: Option<T::U>,
    f: &mut impl FnMut(&mut [T]) -> Result<()>,
) -> Result<()> {
    let mut copy = Vec::new();
    let p = bitpack::view::<T::U>(node, &mut copy)?;
    let fill = reference.unwrap_or(<T::U as Int>::ZERO);
    let mut buf = [fill; VECTOR_LEN];
    if p.width == 0 {
        for start in (0..node.len).step_by(VECTOR_LEN) {
            // Refilled each time: `f` may have changed the last run in place.
            let run = &mut buf[..VECTOR_LEN.min(node.len - start)];
            run.fill(fill);
            f(bytemuck::cast_slice_mut(run))?;
        }
        return Ok(());
    }
    let per_vector = VECTOR_LEN * p.width / <T::U as Int>::BITS as usize;
    for (i, src) in p.words.chunks_exact(per_vector).enumerate() {
        // SAFETY: `bitpack::view` checked `width <= U::BITS` and that `words` holds whole
        // vectors of `per_vector` words; `buf` is one 1024-value vector.
        unsafe {
            match reference {
                Some(r) => T::U::unchecked_unfor_pack(p.width, src, r, &mut buf),
                None => T::U::unchecked_unpack(p.width, src, &mut buf),
            }
        }
        let n = VECTOR_LEN.min(node.len - i * VECTOR_LEN);
        f(bytemuck::cast_slice_mut(&mut buf[..n]))?;
    }
    Ok(())
}
