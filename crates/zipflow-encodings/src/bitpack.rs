//! Bit-packing in the FastLanes 1024-value interleaved layout.
//!
//! Values are stored at `W` bits each (the widest value's bit count, or the plan's parameter),
//! 1024 at a time: vector `k` holds values `1024k .. 1024k + 1023` in `128 * W` bytes, laid
//! out by the `fastlanes` crate so that unpacking is auto-vectorised on the CPU and one warp per
//! vector (a thread per lane, coalesced loads) on the GPU. The last vector is padded with
//! zeros. Signed values are packed by their two's-complement bits (put `for` or `zigzag` in
//! front to make them small).
//!
//! Node: meta = `[W: u8]`; buffer 0 = packed words of the stream's unsigned type.

use crate::node::{EncodedNode, NodeView, cast_or_copy};
use crate::{Encoding, Pattern, Scratch, Slot};
use fastlanes::BitPacking;
use zipflow_core::{
    Error, Int, PType, Plan, Result, VECTOR_LEN, Values, match_ints, with_int_ptype,
};

/// `bitpack` / `bitpack(W)`.
pub struct BitPack;

/// On-disk id of [`BitPack`].
pub const ID: u16 = DESCRIPTOR.id;

/// Number of 1024-value vectors needed for `len` values.
pub fn vectors(len: usize) -> usize {
    len.div_ceil(VECTOR_LEN)
}

/// Bytes of packed data for `len` values at `width` bits.
pub fn packed_bytes(len: usize, width: u32) -> usize {
    vectors(len) * 128 * width as usize
}

/// The widest bit count among `values` (as unsigned bits).
pub fn max_width<T: Int>(values: &[T]) -> u32 {
    let or = values.iter().fold(0u64, |acc, v| acc | v.to_u64());
    64 - or.leading_zeros()
}

/// Packs `values` at `width` bits; `width` must cover every value.
pub fn pack<U: Int + BitPacking>(values: &[U], width: u32) -> Vec<U> {
    let w = width as usize;
    let per_vector = VECTOR_LEN * w / U::BITS as usize;
    let mut out = vec![U::ZERO; vectors(values.len()) * per_vector];
    if w == 0 {
        return out;
    }
    let mut tail = [U::ZERO; VECTOR_LEN];
    for (chunk, dst) in values
        .chunks(VECTOR_LEN)
        .zip(out.chunks_exact_mut(per_vector))
    {
        let src: &[U] = if chunk.len() == VECTOR_LEN {
            chunk
        } else {
            tail[..chunk.len()].copy_from_slice(chunk);
            tail[chunk.len()..].fill(U::ZERO);
            &tail
        };
        // SAFETY: `src` has 1024 values, `dst` has 1024 * w / T words, and `w <= T` because
        // every caller derives it from `max_width` or checks it against `U::BITS`.
        unsafe { U::unchecked_pack(w, src, dst) };
    }
    out
}

/// A `bitpack` node, parsed and checked once: its width and its packed bytes.
#[derive(Debug, Clone, Copy)]
pub struct View<'a> {
    /// Bits per value, at most the bits of the stream's unsigned type.
    pub width: u32,
    /// `packed_bytes(len, width)` bytes: the packed words of the stream's unsigned type.
    pub packed: &'a [u8],
    /// Values the node decodes to.
    pub len: usize,
}

impl<'a> View<'a> {
    /// Checks `node`'s shape, width and buffer length.
    pub fn parse(node: &NodeView<'a>) -> Result<View<'a>> {
        node.expect_shape("bitpack", 1, 0)?;
        let mut meta = node.meta_reader();
        let width = u32::from(meta.u8("bit width")?);
        meta.finish("bitpack")?;
        if !node.ptype.is_int() {
            return Err(Error::corrupt(format!(
                "bitpack node claims {} values",
                node.ptype
            )));
        }
        let bits = node.ptype.byte_width() as u32 * 8;
        if width > bits {
            return Err(Error::corrupt(format!(
                "bit width {width} exceeds the {bits}-bit value type"
            )));
        }
        let packed = node.buffer(0, "packed")?;
        let need = packed_bytes(node.len, width);
        if packed.len() != need {
            return Err(Error::corrupt(format!(
                "packed buffer has {} bytes, {} values at {width} bits need {need}",
                packed.len(),
                node.len
            )));
        }
        Ok(View {
            width,
            packed,
            len: node.len,
        })
    }

    /// The packed words as `U`s (copied into `scratch` only if the buffer is misaligned).
    /// `U` must be the stream's unsigned type, or narrower.
    pub fn words<U: Int>(&self, scratch: &'a mut Vec<U>) -> Result<&'a [U]> {
        if self.width > U::BITS {
            return Err(Error::corrupt(format!(
                "bit width {} exceeds the {}-bit value type",
                self.width,
                U::BITS
            )));
        }
        cast_or_copy::<U>(self.packed, scratch, "packed")
    }
}

/// The width `node`'s metadata declares, not checked (for choosing a kernel compiled for it;
/// [`View::parse`] checks it).
pub fn declared_width(node: &NodeView<'_>) -> Option<u32> {
    node.meta.first().map(|&w| u32::from(w))
}

/// A validated bit-packed node: width and packed words.
pub struct Packed<'a, U> {
    /// Bits per value.
    pub width: usize,
    /// `vectors(len) * 1024 * width / U::BITS` words.
    pub words: &'a [U],
}

/// Checks a `bitpack` node holding `U`-typed values and views its words (copying into
/// `scratch` only if the buffer is misaligned).
pub fn view<'a, U: Int + BitPacking>(
    node: &NodeView<'a>,
    scratch: &'a mut Vec<U>,
) -> Result<Packed<'a, U>> {
    let v = View::parse(node)?;
    if U::BITS as usize != node.ptype.byte_width() * 8 {
        return Err(Error::corrupt(format!(
            "a bitpack node of {} values read as {}-bit words",
            node.ptype,
            U::BITS
        )));
    }
    Ok(Packed {
        width: v.width as usize,
        words: v.words(scratch)?,
    })
}

/// Unpacks all vectors of `p` into `out` (resized to `len`), calling `fused` on each full
/// 1024-value block right after it is unpacked, while it is hot in L1.
pub fn unpack_into<U: Int + BitPacking>(p: &Packed<'_, U>, len: usize, out: &mut Vec<U>) {
    let n = vectors(len);
    crate::resize_for_overwrite(out, n * VECTOR_LEN, U::ZERO);
    if p.width == 0 {
        out.truncate(len);
        out.fill(U::ZERO);
        return;
    }
    let per_vector = VECTOR_LEN * p.width / U::BITS as usize;
    for (src, dst) in p
        .words
        .chunks_exact(per_vector)
        .zip(out.chunks_exact_mut(VECTOR_LEN))
    {
        // SAFETY: `view` checked `width <= U::BITS` and that `words` holds exactly
        // `vectors(len)` vectors of `per_vector` words; `dst` is one 1024-value vector.
        unsafe { U::unchecked_unpack(p.width, src, dst) };
    }
    out.truncate(len);
}

impl Encoding for BitPack {
    fn descriptor(&self) -> &'static crate::Descriptor {
        &DESCRIPTOR
    }
    fn calibration(&self) -> Vec<crate::Calibration> {
        vec![crate::Calibration {
            stream: crate::selection::small_ints(),
            plan: "bitpack",
            minus: &[],
        }]
    }
    fn max_params(&self) -> usize {
        1
    }
    fn accepts(&self, ptype: PType) -> bool {
        ptype.is_int()
    }

    fn encode(&self, plan: &Plan, input: &Values) -> Result<EncodedNode> {
        let Values::Int(v) = input else {
            return Err(Error::plan(plan, "bitpack needs integers"));
        };
        let width = resolve_width(plan, v)?;
        let mut node = EncodedNode::new(ID, v.ptype(), v.len())?;
        node.meta = vec![width as u8];
        let packed: Vec<u8> = match_ints!(v, T, x => {
            let bits: &[<T as Int>::U] = bytemuck::cast_slice(x.as_slice());
            bytemuck::cast_slice(&pack(bits, width)).to_vec()
        });
        node.buffers.push(packed);
        Ok(node)
    }

    fn decode(&self, node: &NodeView<'_>, out: &mut Values, scratch: &mut Scratch) -> Result<()> {
        let _ = scratch;
        let Values::Int(out) = out else {
            return Err(Error::corrupt("bitpack node for non-integer values"));
        };
        match_ints!(out, T, o => {
            let mut copy = Vec::new();
            let p = view::<<T as Int>::U>(node, &mut copy)?;
            let mut bits: Vec<<T as Int>::U> = bytemuck::allocation::cast_vec(std::mem::take(o));
            unpack_into(&p, node.len, &mut bits);
            *o = bytemuck::allocation::cast_vec(bits);
        });
        Ok(())
    }

    fn params(&self, node: &NodeView<'_>) -> Vec<i64> {
        View::parse(node)
            .map(|v| vec![i64::from(v.width)])
            .unwrap_or_default()
    }

    fn estimate(&self, plan: &Plan, input: &Values) -> Result<usize> {
        let Values::Int(v) = input else {
            return Err(Error::plan(plan, "bitpack needs integers"));
        };
        let width = resolve_width(plan, v)?;
        // Header and one buffer entry (24 B), 8 B of padded meta, the padded buffer.
        Ok(24 + 8 + packed_bytes(v.len(), width).next_multiple_of(8))
    }
}

fn resolve_width(plan: &Plan, v: &zipflow_core::IntVec) -> Result<u32> {
    let needed = match_ints!(v, T, x => max_width(x));
    let bits = v.ptype().byte_width() as u32 * 8;
    match plan.params.first() {
        None => Ok(needed),
        Some(&w) if w < 0 || w > i64::from(bits) => Err(Error::plan(
            plan,
            format!(
                "bit width {w} is outside 0..={bits} for {} values",
                v.ptype()
            ),
        )),
        Some(&w) if (w as u32) < needed => Err(Error::plan(
            plan,
            format!("values need {needed} bits, the plan allows {w}"),
        )),
        Some(&w) => Ok(w as u32),
    }
}

/// Type-dispatch helper used by fused decoders: the unsigned stream type for `ptype`.
pub fn unsigned_of(ptype: PType) -> PType {
    with_int_ptype!(ptype, T => <<T as Int>::U as Int>::PTYPE, _ => ptype)
}

/// What `bitpack` is: its id, name, child slots, GPU decoding and part in the search.
pub const DESCRIPTOR: crate::Descriptor = crate::Descriptor {
    id: 2,
    name: "bitpack",
    slots: Slot::NONE,
    leaf_for_numbers: false,
    gpu: crate::GpuDecode::parallel(Pattern::FullyParallel),
    search: crate::Search::numeric(crate::Role::Leaf),
};
