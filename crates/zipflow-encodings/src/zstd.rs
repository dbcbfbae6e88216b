//! `zstd`: a general-purpose block coder for the streams no lightweight plan wins, such as
//! doubles with full mantissas or bytes without repeated words.
//!
//! A leaf over any fixed-width stream: the values' little-endian bytes, compressed as one
//! Zstandard frame (the `zstd` crate) at the plan's level (`zstd(9)`; default
//! [`DEFAULT_LEVEL`], what Parquet writers default to). It decodes serially at a few hundred
//! MB/s a core and no predicate reads it packed, so the search offers it, like `ans`, only
//! where size is all that counts (the `smallest` objective); the GPU has no decoder for it
//! (files for the GPU are written without it, and a column that has it decodes on the CPU).
//!
//! Node: meta = `[level: i8]`; buffer 0 = the frame, which holds exactly `len * width`
//! bytes; no children.

use std::cell::RefCell;

use crate::node::{EncodedNode, NodeView};
use crate::{Encoding, Scratch, Slot};
use zipflow_core::{Error, PType, Plan, Result, Values, match_ints};

/// `zstd` / `zstd(level)`.
pub struct Zstd;

/// On-disk id of [`Zstd`].
pub const ID: u16 = DESCRIPTOR.id;

/// The level without a parameter: 3, Zstandard's own default.
pub const DEFAULT_LEVEL: i32 = 3;

/// A `zstd` node, parsed and checked once.
#[derive(Debug, Clone, Copy)]
pub struct View<'a> {
    /// The level it was written at (informational: decoding does not need it).
    pub level: i32,
    /// The compressed frame.
    pub frame: &'a [u8],
}

impl<'a> View<'a> {
    /// Checks `node`'s shape.
    pub fn parse(node: &NodeView<'a>) -> Result<View<'a>> {
        node.expect_shape("zstd", 1, 0)?;
        if node.ptype == PType::Bytes {
            return Err(Error::corrupt("zstd node for byte strings"));
        }
        let mut meta = node.meta_reader();
        let level = i32::from(meta.u8("zstd level")? as i8);
        meta.finish("zstd")?;
        Ok(View {
            level,
            frame: node.buffer(0, "frame")?,
        })
    }
}

fn level(plan: &Plan) -> Result<i32> {
    match plan.params.first() {
        None => Ok(DEFAULT_LEVEL),
        Some(&l) if (1..=22).contains(&l) => Ok(l as i32),
        Some(l) => Err(Error::plan(
            plan,
            format!("zstd level {l} is not in 1..=22"),
        )),
    }
}

thread_local! {
    // One compression and one decompression context per thread, reused: creating a context
    // allocates and clears hundreds of KB, which costs more than a small frame's (de)coding,
    // and a search compresses a sample once per candidate.
    static COMPRESSOR: RefCell<Option<::zstd::bulk::Compressor<'static>>> =
        const { RefCell::new(None) };
    static DECOMPRESSOR: RefCell<Option<::zstd::bulk::Decompressor<'static>>> =
        const { RefCell::new(None) };
}

/// `data` as one frame at `level` (stating its size), with this thread's context.
pub fn compress(data: &[u8], level: i32) -> std::io::Result<Vec<u8>> {
    COMPRESSOR.with_borrow_mut(|c| {
        let c = match c {
            Some(c) => {
                c.set_compression_level(level)?;
                c
            }
            None => c.insert(::zstd::bulk::Compressor::new(level)?),
        };
        c.compress(data)
    })
}

/// Decompresses `frame` into `out`, with this thread's context; returns the bytes written.
pub fn decompress_to(frame: &[u8], out: &mut [u8]) -> std::io::Result<usize> {
    DECOMPRESSOR.with_borrow_mut(|d| {
        let d = match d {
            Some(d) => d,
            None => d.insert(::zstd::bulk::Decompressor::new()?),
        };
        d.decompress_to_buffer(frame, out)
    })
}

/// The decompressed size a frame states in its header; `None` where it states none or is no
/// frame.
pub fn frame_size(frame: &[u8]) -> Option<u64> {
    ::zstd::zstd_safe::get_frame_content_size(frame)
        .ok()
        .flatten()
}

/// The values' little-endian bytes.
fn raw_bytes(input: &Values) -> &[u8] {
    match input {
        Values::Int(v) => match_ints!(v, _T, x => bytemuck::cast_slice(x)),
        Values::F32(v) => bytemuck::cast_slice(v),
        Values::F64(v) => bytemuck::cast_slice(v),
        Values::Bytes(_) => &[],
    }
}

impl Encoding for Zstd {
    fn descriptor(&self) -> &'static crate::Descriptor {
        &DESCRIPTOR
    }
    fn calibration(&self) -> Vec<crate::Calibration> {
        vec![crate::Calibration {
            stream: crate::selection::text_bytes(),
            plan: "zstd",
            minus: &[],
        }]
    }
    fn max_params(&self) -> usize {
        1
    }
    fn accepts(&self, ptype: PType) -> bool {
        ptype != PType::Bytes
    }

    fn encode(&self, plan: &Plan, input: &Values) -> Result<EncodedNode> {
        if input.ptype() == PType::Bytes {
            return Err(Error::plan(
                plan,
                "zstd takes fixed-width values (for strings: plain(bytes: zstd))",
            ));
        }
        let level = level(plan)?;
        let frame = compress(raw_bytes(input), level)
            .map_err(|e| Error::external("zstd compression", e))?;
        let mut node = EncodedNode::new(ID, input.ptype(), input.len())?;
        node.meta = vec![level as i8 as u8];
        node.buffers.push(frame);
        Ok(node)
    }

    fn decode(&self, node: &NodeView<'_>, out: &mut Values, _scratch: &mut Scratch) -> Result<()> {
        let View { frame, .. } = View::parse(node)?;
        let n = node.len;
        let corrupt = |e: std::io::Error| Error::corrupt(format!("zstd frame: {e}"));
        // Decompresses straight into the output's bytes; a frame that holds more or fewer
        // bytes than the node's values is corrupt.
        fn fill<T: bytemuck::Pod + Default>(
            o: &mut Vec<T>,
            n: usize,
            frame: &[u8],
            corrupt: impl Fn(std::io::Error) -> Error,
        ) -> Result<()> {
            crate::resize_for_overwrite(o, n, T::default());
            let bytes: &mut [u8] = bytemuck::cast_slice_mut(o.as_mut_slice());
            let want = bytes.len();
            let got = decompress_to(frame, bytes).map_err(corrupt)?;
            if got != want {
                return Err(Error::corrupt(format!(
                    "zstd frame holds {got} bytes, {want} expected"
                )));
            }
            Ok(())
        }
        match out {
            Values::Int(o) => match_ints!(o, _T, o => fill(o, n, frame, corrupt)),
            Values::F32(o) => fill(o, n, frame, corrupt),
            Values::F64(o) => fill(o, n, frame, corrupt),
            Values::Bytes(_) => Err(Error::corrupt("zstd node for byte strings")),
        }
    }

    fn decode_cost(&self, shape: crate::Shape, ns: &dyn Fn(&str) -> f64) -> f64 {
        // Decompression runs over bytes, whatever the values' width.
        ns(self.name()) * shape.bytes
    }

    fn params(&self, node: &NodeView<'_>) -> Vec<i64> {
        match View::parse(node) {
            Ok(v) if v.level != DEFAULT_LEVEL => vec![i64::from(v.level)],
            _ => Vec::new(),
        }
    }
}

/// What `zstd` is: its id, name, child slots, GPU decoding and part in the search.
pub const DESCRIPTOR: crate::Descriptor = crate::Descriptor {
    id: 20,
    name: "zstd",
    slots: Slot::NONE,
    leaf_for_numbers: false,
    gpu: crate::GpuDecode::cpu_only(),
    search: crate::Search::numeric(crate::Role::BlockCoder),
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{decode_bytes, encode};
    use zipflow_core::IntVec;

    fn round_trip(plan: &str, v: Values) -> Result<usize> {
        let node = encode(&plan.parse()?, &v)?;
        let bytes = node.to_bytes()?;
        let back = decode_bytes(&bytes)?;
        assert_eq!(back.ptype(), v.ptype());
        match (&back, &v) {
            (Values::F64(a), Values::F64(b)) => {
                assert!(a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits()));
                assert_eq!(a.len(), b.len());
            }
            _ => assert_eq!(back, v),
        }
        Ok(bytes.len())
    }

    #[test]
    fn round_trips_every_width_and_special_floats() -> Result<()> {
        for n in [0usize, 1, 1023, 1024, 5000] {
            round_trip(
                "zstd",
                Values::Int(IntVec::U8((0..n).map(|i| (i * 7) as u8).collect())),
            )?;
            round_trip(
                "zstd",
                Values::Int(IntVec::I16((0..n).map(|i| i as i16 - 300).collect())),
            )?;
            round_trip(
                "zstd(1)",
                Values::Int(IntVec::I64((0..n as i64).map(|i| i * i).collect())),
            )?;
            round_trip(
                "zstd(19)",
                Values::Int(IntVec::U32((0..n as u32).collect())),
            )?;
            let mut f: Vec<f64> = (0..n).map(|i| (i as f64).sqrt()).collect();
            f.extend([f64::from_bits(0x7ff8_0000_0000_0001), -0.0, f64::INFINITY]);
            round_trip("zstd", Values::F64(f))?;
            round_trip(
                "zstd",
                Values::F32((0..n).map(|i| i as f32 / 3.0).collect()),
            )?;
        }
        Ok(())
    }

    #[test]
    fn repeated_doubles_shrink() -> Result<()> {
        let v: Vec<f64> = (0..8192).map(|i| [0.1, 2.5, 1e10][i % 3]).collect();
        let size = round_trip("zstd", Values::F64(v))?;
        assert!(size < 8192, "{size} bytes");
        Ok(())
    }

    #[test]
    fn bad_levels_and_byte_strings_are_refused() {
        let v = Values::Int(IntVec::U8(vec![1, 2, 3]));
        assert!(encode(&Plan::new("zstd").param(0), &v).is_err());
        assert!(encode(&Plan::new("zstd").param(23), &v).is_err());
    }

    #[test]
    fn damaged_frames_are_errors() -> Result<()> {
        let v = Values::Int(IntVec::U32((0..4096).collect()));
        let bytes = encode(&Plan::new("zstd"), &v)?.to_bytes()?;
        // Flip each byte of the node in turn: parse or decode fails, or the values still
        // come back (a flipped bit the frame does not check); nothing panics.
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x5a;
            let _ = decode_bytes(&b);
        }
        // A frame with fewer bytes than the node's values.
        let short = encode(
            &Plan::new("zstd"),
            &Values::Int(IntVec::U32((0..4000).collect())),
        )?;
        let mut node = encode(&Plan::new("zstd"), &v)?;
        node.buffers[0] = short.buffers[0].clone();
        assert!(decode_bytes(&node.to_bytes()?).is_err());
        Ok(())
    }
}
