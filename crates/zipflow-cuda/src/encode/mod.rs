//! Encoding text on the device: `chardict16` and `chartable` nodes, byte for byte what the
//! CPU encoder writes, from bytes already in device memory.
//!
//! The CPU encoder's three steps run as three kernels ([`kernel`]): every 1024-byte chunk's
//! bits, a prefix sum over them, and the assembly of every chunk's codes straight into the
//! bit stream, which, with the chunk index, is all that comes back to the host. `chartable`'s
//! choice of tables stays on the CPU: [`TableChoice`] carries the tables and every block's
//! table (from [`TableChoice::of_node`], or built by the caller), and the kernels code each
//! block with its table, announcements included.
//!
//! ```no_run
//! use zipflow_cuda::Gpu;
//! use zipflow_cuda::encode::{TextCoder, encode_text};
//!
//! let gpu = Gpu::open(0)?;
//! let text = b"the quick brown fox jumps over the lazy dog\n".repeat(10_000);
//! let done = encode_text(&gpu, &text, &TextCoder::CharDict16)?;
//! println!("{} bytes, kernels {:.3} ms", done.node.size(), done.times.kernel_ms);
//! # Ok::<(), zipflow_core::Error>(())
//! ```

pub mod kernel;
#[cfg(test)]
mod tests;

use crate::device::{Gpu, cuda};
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaEvent, CudaSlice, CudaStream, DevicePtr, LaunchConfig, PushKernelArg};
use kernel::{
    ASSEMBLE_KERNEL, COUNT_KERNEL, ENCODE_THREADS, MAX_ANNOUNCE_BITS, SCAN_KERNEL, TILE_CHUNKS,
};
use std::sync::Arc;
use zipflow_core::{Error, PType, Result};
use zipflow_encodings::chardict::{self, CHUNK, CharCode};
use zipflow_encodings::chartable::{self, MAX_TABLES};
use zipflow_encodings::{EncodedNode, Encoding, NodeView};

/// The character coder a text is encoded with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TextCoder {
    /// `chardict16`: the published code of 16 characters.
    CharDict16,
    /// `chartable`: trained tables and each block's table, as the CPU chose them.
    CharTable(TableChoice),
}

/// The tables of a `chartable` node and the table of each of its 1024-byte blocks: what the
/// CPU encoder's training chooses, and all the device needs besides the bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableChoice {
    requested: u8,
    codes: Vec<CharCode>,
    blocks: Vec<u8>,
}

impl TableChoice {
    /// `codes` for a node asking for `requested` tables (`chartable(requested)`, 1 to 16, at
    /// least `codes.len()`), block `b` coded by `codes[blocks[b]]`.
    pub fn new(requested: usize, codes: Vec<CharCode>, blocks: Vec<u8>) -> Result<TableChoice> {
        if !(1..=MAX_TABLES).contains(&requested) || codes.len() > requested {
            return Err(Error::invalid(format!(
                "chartable with {} of {requested} tables (1 to {MAX_TABLES} requested, at most \
                 that many tables)",
                codes.len()
            )));
        }
        if let Some(b) = blocks.iter().position(|&t| usize::from(t) >= codes.len()) {
            return Err(Error::invalid(format!(
                "chartable block {b} uses table {} of {}",
                blocks[b],
                codes.len()
            )));
        }
        Ok(TableChoice {
            requested: requested as u8,
            codes,
            blocks,
        })
    }

    /// One table for all blocks of a `len`-byte input (`chartable(1)`'s layout).
    pub fn single(code: CharCode, len: usize) -> TableChoice {
        TableChoice {
            requested: 1,
            codes: vec![code],
            blocks: vec![0; len.div_ceil(CHUNK)],
        }
    }

    /// The choice the CPU made for a `chartable` node: its tables, its blocks' tables and the
    /// table count it asked for, so that the device's node equals it.
    pub fn of_node(node: &NodeView<'_>) -> Result<TableChoice> {
        let layout = chartable::layout(node)?;
        let requested = chartable::CharTable
            .params(node)
            .first()
            .and_then(|&t| usize::try_from(t).ok())
            .ok_or_else(|| Error::corrupt("chartable node without its table count"))?;
        let blocks = layout.blocks.iter().map(|&(_, _, t)| t as u8).collect();
        TableChoice::new(requested, layout.codes, blocks)
    }

    /// The table count the node asks for.
    pub fn requested(&self) -> usize {
        usize::from(self.requested)
    }

    /// The tables.
    pub fn codes(&self) -> &[CharCode] {
        &self.codes
    }

    /// Each block's table, an index into [`TableChoice::codes`].
    pub fn blocks(&self) -> &[u8] {
        &self.blocks
    }
}

/// Where an encode's time went on the device, in milliseconds (CUDA events).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct EncodeTimes {
    /// Copying the input from pinned memory to the device; 0 when it was there already.
    pub upload_ms: f32,
    /// The three kernels, from the first one's start to the last one's end.
    pub kernel_ms: f32,
    /// Copying the bit stream and the index back to the host.
    pub download_ms: f32,
}

/// A node encoded on the device, and how long that took.
#[derive(Debug, Clone)]
pub struct DeviceEncoded {
    /// The node, equal to the CPU encoder's.
    pub node: EncodedNode,
    /// Device time of its steps.
    pub times: EncodeTimes,
}

/// The kernels' table of `code`: per byte, the code's length in bits 12..15 and its bits
/// below (codes are at most [`kernel::MAX_CODE_BITS`] bits).
pub fn kernel_table(code: &CharCode) -> [u16; 256] {
    code.encoder()
        .map(|e| (((e >> 16) << 12) | (e & 0xfff)) as u16)
}

/// The kernels' word per block: its table in bits 0..3, its announcement's length in bits
/// 4..7 and the announcement above, as `chartable` writes them.
pub fn block_words(choice: &TableChoice) -> Vec<u32> {
    let n = choice.codes.len();
    let mut prev = None;
    choice
        .blocks
        .iter()
        .map(|&t| {
            let t = usize::from(t);
            let (bits, len) = chartable::announcement(n, prev, t);
            prev = Some(t);
            t as u32 | len << 4 | bits << 8
        })
        .collect()
}

/// What the kernels need of a coder for an input of `len` bytes, checked.
struct Setup {
    /// [`kernel_table`] of every table, one after the other.
    tables: Vec<u16>,
    ntables: u32,
    /// [`block_words`], or none for one table without announcements.
    blocks: Option<Vec<u32>>,
    /// The index keeps a chunk's start shifted by this, its table below.
    index_shift: u32,
    /// Streams must have fewer bits than this for the index to hold their offsets.
    limit: u64,
    /// Most bits the stream can take.
    max_bits: u64,
}

impl Setup {
    fn new(coder: &TextCoder, len: usize) -> Result<Setup> {
        let n = u32::try_from(len)
            .map_err(|_| Error::unsupported(format!("stream of {len} values exceeds 2^32 - 1")))?;
        let nchunks = len.div_ceil(CHUNK);
        let (codes, blocks, index_shift, limit) = match coder {
            TextCoder::CharDict16 => (vec![chardict::preset_code()?], None, 0, 1u64 << 32),
            TextCoder::CharTable(choice) => {
                if choice.blocks.len() != nchunks {
                    return Err(Error::invalid(format!(
                        "a table choice for {} blocks, the input has {nchunks}",
                        choice.blocks.len()
                    )));
                }
                // The index keeps a block's table in the low bits, its offset above them.
                let shift = MAX_TABLES.ilog2();
                (
                    choice.codes.clone(),
                    Some(block_words(choice)),
                    shift,
                    1u64 << (32 - shift),
                )
            }
        };
        let lengths: Vec<[u8; 256]> = codes.iter().map(CharCode::lengths).collect();
        let shortest = lengths.iter().flatten().copied().min().unwrap_or(0);
        let longest = lengths.iter().flatten().copied().max().unwrap_or(0);
        let min_bits = u64::from(n) * u64::from(shortest);
        if min_bits >= limit {
            return Err(too_long(min_bits));
        }
        let announce = if blocks.is_some() {
            MAX_ANNOUNCE_BITS
        } else {
            0
        };
        Ok(Setup {
            tables: codes.iter().flat_map(kernel_table).collect(),
            ntables: codes.len() as u32,
            blocks,
            index_shift,
            limit,
            max_bits: u64::from(n) * u64::from(longest) + nchunks as u64 * u64::from(announce),
        })
    }
}

fn too_long(bits: u64) -> Error {
    Error::unsupported(format!(
        "a character-coded stream of {bits} bits does not fit its index; code fewer bytes at once"
    ))
}

/// The node of `coder` over `len` bytes: `total` bits in `payload`, the chunk index `index`.
fn node(
    coder: &TextCoder,
    len: usize,
    total: u64,
    payload: Vec<u8>,
    index: Vec<u8>,
) -> Result<EncodedNode> {
    let (id, mut meta) = match coder {
        TextCoder::CharDict16 => (chardict::ID, Vec::new()),
        TextCoder::CharTable(choice) => {
            let mut meta = vec![choice.requested, choice.codes.len() as u8];
            for c in &choice.codes {
                let (k, k2) = c.index_bits();
                meta.push(k as u8);
                // A one-tier table's second width: `chartable`'s NO_TIER.
                meta.push(k2.map_or(0xff, |k2| k2 as u8));
                meta.extend_from_slice(c.chars());
            }
            (chartable::ID, meta)
        }
    };
    meta.extend_from_slice(&total.to_le_bytes());
    let mut node = EncodedNode::new(id, PType::U8, len)?;
    node.meta = meta;
    node.buffers = vec![payload, index];
    Ok(node)
}

/// Encodes the bytes of `input`, already on `gpu`, with `coder`; only the node's stream and
/// index come back to the host. Work queued on `input`'s stream runs first.
pub fn encode_text_on_device(
    gpu: &Gpu,
    input: &CudaSlice<u8>,
    coder: &TextCoder,
) -> Result<DeviceEncoded> {
    if !Arc::ptr_eq(input.context(), &gpu.ctx) {
        return Err(Error::invalid(
            "the input lives in another CUDA context than the GPU's",
        ));
    }
    let stream = gpu.stream();
    if !Arc::ptr_eq(input.stream(), stream) {
        stream
            .join(input.stream())
            .map_err(cuda("ordering the input's stream"))?;
    }
    let (ptr, _sync) = input.device_ptr(stream);
    encode_resident(gpu, ptr, input.len(), coder)
}

/// Encodes `bytes` with `coder` on `gpu`: staged through pinned memory, copied to the device,
/// encoded there ([`encode_text_on_device`]).
pub fn encode_text(gpu: &Gpu, bytes: &[u8], coder: &TextCoder) -> Result<DeviceEncoded> {
    let n = bytes.len();
    if n == 0 {
        return encode_resident(gpu, 0, 0, coder);
    }
    // Checked before anything is allocated or copied.
    Setup::new(coder, n)?;
    let stream = gpu.stream();
    let mut staging = gpu.staging(n)?;
    staging
        .buffer_mut()
        .as_mut_slice()
        .map_err(cuda("mapping pinned memory"))?[..n]
        .copy_from_slice(bytes);
    // SAFETY: the copy below writes all `n` bytes before the kernels, queued behind it on the
    // same stream, read them.
    let input = unsafe { stream.alloc::<u8>(n) }.map_err(cuda("allocating the input"))?;
    let (dst, _sync) = input.device_ptr(stream);
    let src = staging
        .buffer()
        .as_slice()
        .map_err(cuda("mapping pinned memory"))?;
    let start = record(gpu, stream)?;
    // SAFETY: `src[..n]` lies in the pinned staging buffer, which outlives the copy (it is
    // dropped after `encode_resident` synchronised the stream); `dst` holds `n` bytes.
    unsafe { cudarc::driver::result::memcpy_htod_async(dst, &src[..n], stream.cu_stream()) }
        .map_err(cuda("copying the input to the device"))?;
    let end = record(gpu, stream)?;
    let mut done = encode_resident(gpu, dst, n, coder)?;
    done.times.upload_ms = start.elapsed_ms(&end).map_err(cuda("reading an event"))?;
    drop(staging);
    Ok(done)
}

/// A timing event recorded on `stream` now.
fn record(gpu: &Gpu, stream: &CudaStream) -> Result<CudaEvent> {
    let e = gpu
        .ctx
        .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
        .map_err(cuda("creating an event"))?;
    e.record(stream).map_err(cuda("recording an event"))?;
    Ok(e)
}

/// The device buffers of one encode.
struct Buffers {
    tables: CudaSlice<u16>,
    blocks: Option<CudaSlice<u32>>,
    chunk_bits: CudaSlice<u32>,
    tile_bits: CudaSlice<u64>,
    total: CudaSlice<u64>,
    out: CudaSlice<u8>,
    index: CudaSlice<u8>,
}

impl Buffers {
    fn new(stream: &Arc<CudaStream>, setup: &Setup, nchunks: usize) -> Result<Buffers> {
        let ntiles = nchunks.div_ceil(TILE_CHUNKS as usize);
        let out_bytes = 4 * (setup.max_bits.div_ceil(32) as usize + 1);
        // SAFETY: the count kernel writes every chunk's and tile's bits and the scan the total
        // before anything reads them; the assembly writes every index entry and every output
        // word up to the one holding the stream's last bit, past which nothing is read.
        let (chunk_bits, tile_bits, total, out, index) = unsafe {
            (
                stream.alloc::<u32>(nchunks),
                stream.alloc::<u64>(ntiles),
                stream.alloc::<u64>(1),
                stream.alloc::<u8>(out_bytes),
                stream.alloc::<u8>(4 * nchunks),
            )
        };
        Ok(Buffers {
            tables: stream
                .clone_htod(&setup.tables)
                .map_err(cuda("uploading code tables"))?,
            blocks: setup
                .blocks
                .as_ref()
                .map(|b| stream.clone_htod(b))
                .transpose()
                .map_err(cuda("uploading block tables"))?,
            chunk_bits: chunk_bits.map_err(cuda("allocating encoder buffers"))?,
            tile_bits: tile_bits.map_err(cuda("allocating encoder buffers"))?,
            total: total.map_err(cuda("allocating encoder buffers"))?,
            out: out.map_err(cuda("allocating encoder buffers"))?,
            index: index.map_err(cuda("allocating encoder buffers"))?,
        })
    }
}

/// Encodes the `n` bytes at device address `input` (on `gpu`'s stream) with `coder`.
fn encode_resident(gpu: &Gpu, input: u64, n: usize, coder: &TextCoder) -> Result<DeviceEncoded> {
    let setup = Setup::new(coder, n)?;
    if n == 0 {
        return Ok(DeviceEncoded {
            node: node(coder, 0, 0, Vec::new(), Vec::new())?,
            times: EncodeTimes::default(),
        });
    }
    let stream = gpu.stream();
    let k = kernel::kernel();
    let count = gpu.function(k, COUNT_KERNEL)?;
    let scan = gpu.function(k, SCAN_KERNEL)?;
    let assemble = gpu.function(k, ASSEMBLE_KERNEL)?;
    let nchunks = n.div_ceil(CHUNK);
    let ntiles = nchunks.div_ceil(TILE_CHUNKS as usize) as u32;
    let b = Buffers::new(stream, &setup, nchunks)?;
    let n32 = n as u32;
    let (input_p, tables_p, chunk_p, tiles_p, total_p, out_p, index_p) = (
        input,
        b.tables.device_ptr(stream).0,
        b.chunk_bits.device_ptr(stream).0,
        b.tile_bits.device_ptr(stream).0,
        b.total.device_ptr(stream).0,
        b.out.device_ptr(stream).0,
        b.index.device_ptr(stream).0,
    );
    let blocks_p: u64 = b.blocks.as_ref().map_or(0, |s| s.device_ptr(stream).0);
    let grid = |blocks: u32| LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (ENCODE_THREADS, 1, 1),
        shared_mem_bytes: 0,
    };
    let start = record(gpu, stream)?;
    let mut l = stream.launch_builder(&count);
    l.arg(&input_p)
        .arg(&n32)
        .arg(&tables_p)
        .arg(&setup.ntables)
        .arg(&blocks_p)
        .arg(&chunk_p)
        .arg(&tiles_p);
    // SAFETY: the arguments match `zf_char_count`'s signature (see `kernel`); `input` holds
    // `n` bytes, `tables` `ntables` tables, `blocks` (or null) and `chunk_bits` one word per
    // chunk, `tile_bits` one per tile of the grid; table indices in `blocks` are below
    // `ntables` (checked by `TableChoice::new`).
    unsafe { l.launch(grid(ntiles)) }.map_err(cuda("launching the chunk count"))?;
    let mut l = stream.launch_builder(&scan);
    l.arg(&tiles_p).arg(&ntiles).arg(&total_p);
    // SAFETY: `tile_bits` holds `ntiles` words, `total` one.
    unsafe { l.launch(grid(1)) }.map_err(cuda("launching the tile scan"))?;
    let mut l = stream.launch_builder(&assemble);
    l.arg(&input_p)
        .arg(&n32)
        .arg(&tables_p)
        .arg(&setup.ntables)
        .arg(&blocks_p)
        .arg(&chunk_p)
        .arg(&tiles_p)
        .arg(&out_p)
        .arg(&index_p)
        .arg(&setup.index_shift);
    // SAFETY: the arguments match `zf_char_assemble`'s signature; `out` holds the longest
    // stream the tables allow (`Setup::max_bits`) rounded up to whole words, and chunks write
    // only the words their bits cover; `index` holds one word per chunk.
    unsafe { l.launch(grid(ntiles)) }.map_err(cuda("launching the assembly"))?;
    let end = record(gpu, stream)?;
    let total = stream
        .clone_dtoh(&b.total)
        .map_err(cuda("reading the stream's length"))?
        .first()
        .copied()
        .unwrap_or(0);
    let kernel_ms = start.elapsed_ms(&end).map_err(cuda("reading an event"))?;
    if total >= setup.limit {
        return Err(too_long(total));
    }
    let bytes = total.div_ceil(8) as usize;
    let down = record(gpu, stream)?;
    let payload = if bytes == 0 {
        Vec::new()
    } else {
        stream
            .clone_dtoh(&b.out.slice(..bytes))
            .map_err(cuda("copying the stream to the host"))?
    };
    let index = stream
        .clone_dtoh(&b.index)
        .map_err(cuda("copying the index to the host"))?;
    let downloaded = record(gpu, stream)?;
    let download_ms = down
        .elapsed_ms(&downloaded)
        .map_err(cuda("reading an event"))?;
    Ok(DeviceEncoded {
        node: node(coder, n, total, payload, index)?,
        times: EncodeTimes {
            upload_ms: 0.0,
            kernel_ms,
            download_ms,
        },
    })
}
