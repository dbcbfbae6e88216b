//! The fused band reader: one band's chunk as a source of 1024-pixel vectors. The packed
//! shapes (`[for |] [patch |] bitpack`) are unpacked a vector at a time into a buffer that
//! stays in L1, by an unpacker chosen once per chunk for its width and the CPU
//! ([`unpack_fn`]); any other plan is decoded whole.

use std::borrow::Cow;

use zipflow_core::{Error, PType, Result, Values};
use zipflow_encodings::node::cast_cow;
use zipflow_encodings::{NodeView, Scratch, bitpack, frame, patch};

use super::V;

/// One band's chunk as a source of 1024-pixel vectors.
pub(super) enum Source<'a> {
    /// `[for |] [patch |] bitpack`: value = reference + packed, exceptions overwritten.
    Packed {
        words: Cow<'a, [u16]>,
        /// The unpacker of `width`, chosen once for the chunk.
        unpack: UnpackFn,
        width: usize,
        reference: u16,
        positions: Cow<'a, [u32]>,
        exceptions: Cow<'a, [u16]>,
        len: usize,
    },
    /// Any other plan, decoded whole.
    Decoded(Vec<u16>),
}

impl<'a> Source<'a> {
    pub(super) fn new(
        node: &NodeView<'a>,
        rows: usize,
        scratch: &mut Scratch,
    ) -> Result<Source<'a>> {
        if node.ptype != PType::U16 || node.len != rows {
            return Err(Error::corrupt(format!(
                "values tree holds {} {} values, the index says {rows} u16 values",
                node.len, node.ptype
            )));
        }
        let (reference, inner) = if node.id == frame::ID {
            let view = frame::View::parse(node)?;
            let r = u16::try_from(view.reference).map_err(|_| {
                Error::corrupt(format!("for reference {} exceeds u16", view.reference))
            })?;
            (r, view.offsets)
        } else {
            (0, node)
        };
        if inner.ptype == PType::U16
            && inner.len == rows
            && let Some(src) = Source::packed(inner, reference)?
        {
            return Ok(src);
        }
        let mut out = Values::Int(zipflow_core::IntVec::U16(Vec::new()));
        zipflow_encodings::decode(node, &mut out, scratch)?;
        match out {
            Values::Int(zipflow_core::IntVec::U16(v)) if v.len() == rows => Ok(Source::Decoded(v)),
            _ => Err(Error::corrupt(
                "raster chunk did not decode to its u16 pixels",
            )),
        }
    }

    /// `[patch |] bitpack` under an optional reference; `None` for other shapes.
    pub(super) fn packed(node: &NodeView<'a>, reference: u16) -> Result<Option<Source<'a>>> {
        let (positions, exceptions, bp): (Cow<'a, [u32]>, Cow<'a, [u16]>, &NodeView<'a>) =
            if node.id == patch::ID {
                let view = patch::View::parse(node)?;
                let exceptions = cast_cow::<u16>(view.exceptions.values, "exception values")?;
                (view.exceptions.positions, exceptions, view.patched)
            } else {
                (Cow::Borrowed(&[]), Cow::Borrowed(&[]), node)
            };
        if bp.id != bitpack::ID {
            return Ok(None);
        }
        // `bp` holds u16 values (the caller's check, or the patch's), so its view's width is
        // at most 16 and its buffer whole 1024-value vectors of u16 words.
        let view = bitpack::View::parse(bp)?;
        let width = view.width as usize;
        let words = cast_cow::<u16>(view.packed, "packed")?;
        Ok(Some(Source::Packed {
            words,
            unpack: unpack_fn(width),
            width,
            reference,
            positions,
            exceptions,
            len: bp.len,
        }))
    }

    /// Writes vector `v` into `buf` (pixels past the end are 0); `cursor` is the index of the
    /// first exception not yet applied, advanced as vectors are read in order.
    #[inline]
    pub(super) fn fill(&self, v: usize, buf: &mut [u16; V], cursor: &mut usize) {
        let start = v * V;
        let len = match self {
            Source::Packed {
                words,
                unpack,
                width,
                reference,
                positions,
                exceptions,
                len,
            } => {
                // Width 0 has no words: its unpacker writes the reference.
                let per = V * *width / 16;
                unpack(&words[v * per..(v + 1) * per], *reference, buf);
                let end = (start + V) as u64;
                while let (Some(&p), Some(&x)) = (positions.get(*cursor), exceptions.get(*cursor)) {
                    if u64::from(p) >= end {
                        break;
                    }
                    // Positions are strictly increasing and below `len` (validated), and
                    // vectors are read in order, so `p - start` is inside this vector.
                    buf[p as usize - start] = x.wrapping_add(*reference);
                    *cursor += 1;
                }
                *len
            }
            Source::Decoded(values) => {
                let end = values.len().min(start + V);
                buf[..end - start].copy_from_slice(&values[start..end]);
                values.len()
            }
        };
        if start + V > len {
            // Padding (or a reference added to it) must not count: zero pixels add nothing.
            buf[len.saturating_sub(start).min(V)..].fill(0);
        }
    }
}

/// Unpacks one vector of `W`-bit values plus a reference, in FastLanes order.
pub(super) type UnpackFn = fn(&[u16], u16, &mut [u16; V]);

/// Unpacks one u16 vector packed at `W` bits (FastLanes layout: 64 lanes, value `row` of lane
/// `l` at bits `row * W ..` of the lane's `W` words, word `j` of lane `l` at `64 * j + l`) and
/// adds `reference`, writing logical index `FL_ORDER[row / 8] * 16 + (row % 8) * 128 + l`, the
/// order `fastlanes` unpacks to (exception positions refer to it). A copy of the crate's kernel
/// that is compiled for the CPU's vector width (the crate's own is built for baseline x86-64).
#[inline(always)]
pub(super) fn unpack16<const W: usize>(packed: &[u16], reference: u16, out: &mut [u16; V]) {
    const FL_ORDER: [usize; 2] = [0, 4];
    let mask: u16 = if W == 16 { u16::MAX } else { (1u16 << W) - 1 };
    let rows: &[[u16; 64]] = bytemuck::cast_slice(packed);
    // Rows unrolled by hand so that every word index and shift is a constant.
    macro_rules! rows {
        ($($row:literal)*) => {$({
            const ROW: usize = $row;
            let bit = ROW * W;
            let (word, shift) = (bit / 16, bit % 16);
            let base = FL_ORDER[ROW / 8] * 16 + (ROW % 8) * 128;
            let dst = &mut out[base..base + 64];
            let lo = &rows[word];
            if shift + W <= 16 {
                for l in 0..64 {
                    dst[l] = ((lo[l] >> shift) & mask).wrapping_add(reference);
                }
            } else {
                let hi = &rows[word + 1];
                for l in 0..64 {
                    dst[l] = (((lo[l] >> shift) | (hi[l] << ((16 - shift) % 16))) & mask)
                        .wrapping_add(reference);
                }
            }
        })*};
    }
    rows!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15);
}

macro_rules! unpack_table {
    ($($w:literal)*) => {
        /// The unpacker for width `w` in 1..=16, compiled for AVX-512 or AVX2 when the CPU has
        /// them. `packed` must hold `64 * w` words (callers slice whole validated vectors).
        pub(super) fn unpack_fn(w: usize) -> UnpackFn {
            #[cfg(target_arch = "x86_64")]
            {
                if std::arch::is_x86_feature_detected!("avx512bw") {
                    $(
                        if w == $w {
                            #[target_feature(enable = "avx512f,avx512bw")]
                            fn wide(p: &[u16], r: u16, o: &mut [u16; V]) {
                                unpack16::<$w>(p, r, o)
                            }
                            fn call(p: &[u16], r: u16, o: &mut [u16; V]) {
                                // SAFETY: chosen only after AVX-512BW was detected above.
                                unsafe { wide(p, r, o) }
                            }
                            return call;
                        }
                    )*
                }
                if std::arch::is_x86_feature_detected!("avx2") {
                    $(
                        if w == $w {
                            #[target_feature(enable = "avx2")]
                            fn avx2(p: &[u16], r: u16, o: &mut [u16; V]) {
                                unpack16::<$w>(p, r, o)
                            }
                            fn call(p: &[u16], r: u16, o: &mut [u16; V]) {
                                // SAFETY: chosen only after AVX2 was detected above.
                                unsafe { avx2(p, r, o) }
                            }
                            return call;
                        }
                    )*
                }
            }
            $(
                if w == $w {
                    return unpack16::<$w>;
                }
            )*
            // Width 0: every value is the reference (wider than 16 was rejected when
            // validating).
            |_, r, o| o.fill(r)
        }
    };
}

unpack_table!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16);
