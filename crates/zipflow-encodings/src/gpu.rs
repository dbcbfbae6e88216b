//! What the GPU decoder (`zipflow-cuda`) decodes at full speed, and where.
//!
//! Each primitive's [`Descriptor`](crate::Descriptor) says how it decodes on the GPU
//! ([`GpuDecode`]): its parallel pattern, whether the GPU decodes it in parallel at all, and
//! at which [`GpuPlace`]s of a plan it does so at full speed. [`gpu_parallel`] reads those
//! declarations over a whole plan; the selector's GPU objective keeps to the plans it accepts.
//!
//! ```
//! use zipflow_core::Plan;
//! use zipflow_encodings::gpu_parallel;
//! let packed: Plan = "for | bitpack".parse().unwrap();
//! let entropy: Plan = "for | ans".parse().unwrap();
//! assert!(gpu_parallel(&packed));
//! assert!(!gpu_parallel(&entropy));
//! ```

use zipflow_core::Plan;

use crate::{Pattern, by_name, encodings};

/// Where a node of a plan sits, for what the GPU decodes at full speed there. Ordered from
/// the most favourable place to the least.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum GpuPlace {
    /// The top of a numeric column's plan, or under `for`s there: decoded in tiles of
    /// 1024-value vectors.
    Tile,
    /// The top of a string column's codes, counts or lengths, or under `for`s there:
    /// decoded a segment at a time.
    Codes,
    /// Anywhere else: decoded value by value, or a chunk by one thread block.
    Inner,
}

/// Where a node's children sit, given where the node sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChildPlace {
    /// Children sit where the node sits (a frame of reference adds a number to each value
    /// and keeps its child's schedule).
    Keep,
    /// Children sit [`GpuPlace::Inner`].
    Below,
    /// At [`GpuPlace::Tile`], the children in these slots are decoded a segment at a time
    /// ([`GpuPlace::Codes`]); every other child sits [`GpuPlace::Inner`].
    Segments(&'static [&'static str]),
}

/// How the GPU decoder decodes a primitive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuDecode {
    /// How decoding parallelises, which decides how the GPU schedules it.
    pub pattern: Pattern,
    /// Whether the GPU decodes it in parallel. Not so for an `ans` block (a chain of
    /// dependent steps), `fsst` and the character coders (a piece or block per thread) or
    /// `blockpack` (a table read for every value).
    pub parallel: bool,
    /// The least favourable place where it still decodes at full speed.
    pub full_speed: GpuPlace,
    /// Where its children sit.
    pub children: ChildPlace,
    /// Whether the GPU has a decoder for it at all; a column whose plan has a primitive
    /// without one decodes on the CPU.
    pub decoder: bool,
}

impl GpuDecode {
    /// A primitive the GPU decodes in parallel everywhere, its children
    /// [`ChildPlace::Below`].
    pub const fn parallel(pattern: Pattern) -> GpuDecode {
        GpuDecode {
            pattern,
            parallel: true,
            full_speed: GpuPlace::Inner,
            children: ChildPlace::Below,
            decoder: true,
        }
    }

    /// A primitive the GPU does not decode in parallel.
    pub const fn not_parallel(pattern: Pattern) -> GpuDecode {
        GpuDecode {
            pattern,
            parallel: false,
            full_speed: GpuPlace::Inner,
            children: ChildPlace::Below,
            decoder: true,
        }
    }

    /// A primitive the GPU has no decoder for (a general-purpose coder kept for size).
    pub const fn cpu_only() -> GpuDecode {
        GpuDecode {
            decoder: false,
            ..GpuDecode::not_parallel(Pattern::Serial)
        }
    }

    /// Whether a node decodes at full speed at `place`.
    pub fn decodes_at(&self, place: GpuPlace) -> bool {
        place <= self.full_speed
    }

    /// The place of the child in `slot` of a node at `place`.
    pub fn child_place(&self, place: GpuPlace, slot: &str) -> GpuPlace {
        match self.children {
            ChildPlace::Keep => place,
            ChildPlace::Segments(slots) if place == GpuPlace::Tile && slots.contains(&slot) => {
                GpuPlace::Codes
            }
            _ => GpuPlace::Inner,
        }
    }
}

/// The names of the primitives the GPU decoder decodes in parallel, which the selector's GPU
/// objective keeps to.
pub fn gpu_parallel_names() -> Vec<&'static str> {
    encodings()
        .iter()
        .filter(|e| e.gpu().parallel)
        .map(|e| e.name())
        .collect()
}

/// Whether primitive `name` is one the GPU decodes in parallel ([`GpuDecode::parallel`]).
pub fn is_gpu_parallel(name: &str) -> bool {
    by_name(name).is_some_and(|e| e.gpu().parallel)
}

/// Whether the GPU decodes primitive `name` at full speed at `place` (true for a name the
/// registry does not know: it is refused elsewhere).
pub fn decodes_at(name: &str, place: GpuPlace) -> bool {
    by_name(name).is_none_or(|e| e.gpu().decodes_at(place))
}

/// Whether every node of `plan`, default children included, is one the GPU decodes in
/// parallel and decoded at full speed where it sits (see each primitive's
/// [`GpuDecode::full_speed`]: `hipatch` only in tiles, `radix` also in a string's codes).
pub fn gpu_parallel(plan: &Plan) -> bool {
    gpu_parallel_at(plan, GpuPlace::Tile)
}

/// [`gpu_parallel`] for `plan` at `place`.
pub fn gpu_parallel_at(plan: &Plan, place: GpuPlace) -> bool {
    let Some(enc) = by_name(&plan.name) else {
        return false;
    };
    let gpu = enc.gpu();
    if !gpu.parallel || !gpu.decodes_at(place) {
        return false;
    }
    enc.slots().iter().all(|slot| {
        let at = gpu.child_place(place, slot.name);
        match plan.get(slot.name) {
            Some(c) => gpu_parallel_at(c, at),
            // A numeric leaf's slots are a byte string's; its defaults need not be walked.
            None if enc.descriptor().leaf_for_numbers => true,
            None => slot
                .default
                .parse::<Plan>()
                .is_ok_and(|c| gpu_parallel_at(&c, at)),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parallel_primitives_are_the_ones_the_gpu_decodes_in_parallel() {
        let mut names = gpu_parallel_names();
        names.sort_unstable();
        let mut expected = vec![
            "plain",
            "bitpack",
            "for",
            "zigzag",
            "delta",
            "rle",
            "dict",
            "constant",
            "patch",
            "hipatch",
            "lowbits",
            "radix",
            "float2int",
            "alprd",
            "strdict",
            "words",
        ];
        expected.sort_unstable();
        assert_eq!(names, expected);
    }

    #[test]
    fn places_narrow_from_tiles_to_inner_nodes() {
        for (plan, ok) in [
            ("for | for | hipatch | bitpack", true),
            ("plain(lengths: for | radix, bytes: plain)", true),
            ("plain(lengths: hipatch | bitpack)", false),
            ("float2int | hipatch | bitpack", false),
            ("words", false),
        ] {
            let p: Plan = plan.parse().unwrap_or_else(|e| panic!("{plan}: {e}"));
            assert_eq!(gpu_parallel(&p), ok, "{plan}");
        }
    }
}
