//! Decoding columns on the device.
//!
//! [`ColumnDecoder::new`] does the host work once: parse and validate every chunk's node tree,
//! group chunks by plan shape, generate and compile one kernel per shape, fill the per-chunk
//! descriptors, and stage the compressed bytes in pinned host memory. Then
//! [`ColumnDecoder::upload_and_decode`] copies the bytes in batches of chunks, alternating
//! between two streams, so that the copy of batch `k + 1` overlaps the kernels of batch `k`;
//! [`ColumnDecoder::decode_resident`] runs only the kernels, on bytes already on the device
//! (what the benchmarks time).
//!
//! Validation is split like the CPU decoder's: everything in the node headers and metadata is
//! checked on the host before any launch (types, lengths, widths, buffer sizes, exception
//! positions), so no kernel reads out of bounds; checks that need decoded values
//! (dictionary codes in range, run lengths) run in the kernels and set bits of an error word
//! that [`ColumnDecoder::finish`] turns into `Error::Corrupt`. One check the CPU makes is not
//! repeated: that a dictionary is strictly increasing (it only matters for predicates).

use crate::codegen::{ERR_DICT, ERR_RLE_SUM, ERR_RLE_ZERO, Kernel, KernelKind, generate};
use crate::device::{Gpu, cuda};
use crate::shape::{Op, Shape};
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{
    CudaFunction, CudaSlice, CudaStream, DevicePtr, LaunchConfig, PinnedHostSlice, PushKernelArg,
};
use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;
use zipflow_core::{Error, PType, Result, VECTOR_LEN, Values, with_int_ptype};
use zipflow_encodings::node::cast_or_copy;
use zipflow_encodings::{NodeView, bitpack, dict, float2int, patch};
use zipflow_format::ZfFile;

/// Chunks per upload batch: large enough that a batch's tile kernels fill the GPU and a copy
/// takes well over a launch's overhead, small enough that the first kernels start early.
const BATCH_CHUNKS: usize = 32;

/// Each chunk's bytes start at a multiple of this in the input buffer.
const INPUT_ALIGN: usize = 256;

/// A decoded column on the device: the values in the column's physical type, chunk after
/// chunk.
pub struct DeviceColumn {
    /// Physical type of the values.
    pub ptype: PType,
    /// Number of values.
    pub len: usize,
    /// The values' bytes (`len * ptype.byte_width()` of them, maybe one more).
    pub buffer: CudaSlice<u8>,
}

impl std::fmt::Debug for DeviceColumn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceColumn")
            .field("ptype", &self.ptype)
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

impl DeviceColumn {
    /// Copies the values back to the host.
    pub fn to_host(&self, gpu: &Gpu) -> Result<Values> {
        let stream = &gpu.streams[0];
        let bytes = stream
            .clone_dtoh(&self.buffer)
            .map_err(cuda("copying values to the host"))?;
        let n = self.len * self.ptype.byte_width();
        let bytes = bytes
            .get(..n)
            .ok_or_else(|| Error::corrupt("device column shorter than its length"))?;
        values_from_bytes(self.ptype, bytes)
    }
}

/// Typed values from little-endian bytes.
fn values_from_bytes(ptype: PType, bytes: &[u8]) -> Result<Values> {
    Ok(match ptype {
        PType::F32 => Values::F32(bytemuck::pod_collect_to_vec(bytes)),
        PType::F64 => Values::F64(bytemuck::pod_collect_to_vec(bytes)),
        p => with_int_ptype!(p, T => Values::Int(<T as zipflow_core::values::IntVecOf>::wrap(
            bytemuck::pod_collect_to_vec::<u8, T>(bytes)
        )), _ => return Err(Error::unsupported(format!("the GPU decoder does not handle {p} values")))),
    })
}

/// Decodes column `column` of `file` on `gpu` into device memory.
pub fn decode_column(gpu: &Gpu, file: &ZfFile, column: usize) -> Result<DeviceColumn> {
    let mut d = ColumnDecoder::for_column(gpu, file, column)?;
    d.upload_and_decode()?;
    d.finish()?;
    Ok(d.into_column())
}

/// Decodes column `column` of `file` on `gpu` and copies the values back.
pub fn decode_column_to_host(gpu: &Gpu, file: &ZfFile, column: usize) -> Result<Values> {
    decode_column(gpu, file, column)?.to_host(gpu)
}

/// Decodes serialised node trees (one per chunk, all of `ptype`) on `gpu`; the values come
/// back concatenated.
pub fn decode_trees(gpu: &Gpu, ptype: PType, trees: &[&[u8]]) -> Result<Values> {
    let mut d = ColumnDecoder::new(gpu, ptype, trees)?;
    d.upload_and_decode()?;
    d.finish()?;
    d.into_column().to_host(gpu)
}

/// One plan shape's kernel and the chunks it decodes.
struct Group {
    kernel: Kernel,
    function: CudaFunction,
    /// Descriptors on the device, `kernel.nparams` per chunk of the group.
    prm: CudaSlice<u64>,
    /// Two u32 per block: chunk index in the group, vector index.
    work: CudaSlice<u32>,
}

/// A column prepared for decoding on one GPU (see the module docs).
pub struct ColumnDecoder<'g> {
    gpu: &'g Gpu,
    ptype: PType,
    rows: usize,
    staging: PinnedHostSlice<u8>,
    /// Per batch: the bytes of `staging` it covers, and per group the range of work entries.
    batches: Vec<(Range<usize>, Vec<Range<usize>>)>,
    groups: Vec<Group>,
    input: CudaSlice<u8>,
    output: CudaSlice<u8>,
    scratch: CudaSlice<u8>,
    err: CudaSlice<i32>,
    compressed: usize,
    /// Whether the input buffer holds the compressed bytes.
    uploaded: bool,
}

impl std::fmt::Debug for ColumnDecoder<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ColumnDecoder")
            .field("ptype", &self.ptype)
            .field("rows", &self.rows)
            .field("shapes", &self.shapes())
            .finish_non_exhaustive()
    }
}

/// Host-side state of one group while descriptors are filled.
struct HostGroup {
    kernel: Kernel,
    prm: Vec<u64>,
    work: Vec<u32>,
}

impl<'g> ColumnDecoder<'g> {
    /// Prepares column `column` of `file`: checksums and parses every chunk's values tree
    /// (validity stays on the host, see [`crate`]).
    pub fn for_column(gpu: &'g Gpu, file: &ZfFile, column: usize) -> Result<ColumnDecoder<'g>> {
        Self::for_column_repeated(gpu, file, column, 1)
    }

    /// Like [`ColumnDecoder::for_column`], with the column's chunks repeated `times` times
    /// (one longer column), so that benchmarks can time columns larger than a file holds.
    pub fn for_column_repeated(
        gpu: &'g Gpu,
        file: &ZfFile,
        column: usize,
        times: usize,
    ) -> Result<ColumnDecoder<'g>> {
        let meta = file
            .columns()
            .get(column)
            .ok_or_else(|| Error::invalid(format!("column index {column} out of range")))?;
        let ptype = meta.column_type.ptype();
        let mut trees = Vec::with_capacity(file.num_chunks());
        for c in 0..file.num_chunks() {
            let (payload, cm) = file.chunk_payload(column, c)?;
            let values = payload
                .get(..cm.values_len as usize)
                .ok_or_else(|| Error::corrupt("values tree outside the payload"))?;
            trees.push((values, cm.rows as usize));
        }
        let one: Vec<&[u8]> = trees.iter().map(|t| t.0).collect();
        let only = one.repeat(times.max(1));
        let name = meta.name.clone();
        let d =
            Self::new(gpu, ptype, &only).map_err(|e| e.at_column(&name).in_file(file.path()))?;
        Ok(d)
    }

    /// Prepares serialised node trees, one per chunk, all decoding to `ptype`.
    pub fn new(gpu: &'g Gpu, ptype: PType, trees: &[&[u8]]) -> Result<ColumnDecoder<'g>> {
        let mut by_key: HashMap<String, usize> = HashMap::new();
        let mut host: Vec<HostGroup> = Vec::new();
        // Input layout: each tree at an aligned offset.
        let mut offsets = Vec::with_capacity(trees.len());
        let mut total = 0usize;
        for t in trees {
            offsets.push(total);
            total = (total + t.len()).next_multiple_of(INPUT_ALIGN);
        }
        let mut rows = 0usize;
        let mut scratch_bytes = 0usize;
        let mut batches = Vec::new();
        for (b, batch) in trees.chunks(BATCH_CHUNKS).enumerate() {
            let first = b * BATCH_CHUNKS;
            let start_work: Vec<usize> = host.iter().map(|g| g.work.len() / 2).collect();
            for (i, tree) in batch.iter().enumerate() {
                let c = first + i;
                let node = NodeView::parse(tree).map_err(|e| e.at_chunk(c as u32))?;
                if node.ptype != ptype {
                    return Err(Error::corrupt(format!(
                        "values tree holds {} values, the column is {ptype}",
                        node.ptype
                    ))
                    .at_chunk(c as u32));
                }
                let shape = Shape::of(&node).map_err(|e| e.at_chunk(c as u32))?;
                let key = shape.key();
                let gi = match by_key.get(&key) {
                    Some(&gi) => gi,
                    None => {
                        let kernel = generate(&shape)?;
                        host.push(HostGroup {
                            kernel,
                            prm: Vec::new(),
                            work: Vec::new(),
                        });
                        by_key.insert(key, host.len() - 1);
                        host.len() - 1
                    }
                };
                let g = &mut host[gi];
                let index = (g.prm.len() / g.kernel.nparams) as u32;
                let at = g.prm.len();
                g.prm.resize(at + g.kernel.nparams, 0);
                let mut filler = Filler {
                    base: tree.as_ptr() as usize,
                    device_offset: offsets[c] as u64,
                    scratch: &mut scratch_bytes,
                    kernel: &g.kernel,
                    prm: &mut g.prm[at..],
                };
                filler.prm[crate::codegen::SLOT_OUT] = rows as u64;
                filler.fill(&node, 0).map_err(|e| e.at_chunk(c as u32))?;
                match g.kernel.kind {
                    KernelKind::Tile => {
                        let step = crate::codegen::TILE_VECTORS as usize;
                        for v in (0..node.len.div_ceil(VECTOR_LEN)).step_by(step) {
                            g.work.extend([index, v as u32]);
                        }
                    }
                    KernelKind::Chunk => g.work.extend([index, 0]),
                }
                rows += node.len;
            }
            let bytes_end = offsets.get(first + batch.len()).copied().unwrap_or(total);
            let mut ranges: Vec<Range<usize>> = host
                .iter()
                .enumerate()
                .map(|(gi, g)| start_work.get(gi).copied().unwrap_or(0)..g.work.len() / 2)
                .collect();
            ranges.truncate(host.len());
            batches.push((
                offsets.get(first).copied().unwrap_or(total)..bytes_end,
                ranges,
            ));
        }

        let ctx = &gpu.ctx;
        let stream = &gpu.streams[0];
        let mut groups = Vec::with_capacity(host.len());
        for g in host {
            let function = gpu.function(&g.kernel)?;
            let prm = stream
                .clone_htod(&g.prm)
                .map_err(cuda("uploading descriptors"))?;
            let work = stream
                .clone_htod(&g.work)
                .map_err(cuda("uploading the work list"))?;
            groups.push(Group {
                kernel: g.kernel,
                function,
                prm,
                work,
            });
        }
        // SAFETY: pinned memory of `total.max(1)` bytes; every byte is written below before
        // any copy reads it.
        let mut staging = unsafe { ctx.alloc_pinned::<u8>(total.max(1)) }
            .map_err(cuda("allocating pinned host memory"))?;
        {
            let s = staging
                .as_mut_slice()
                .map_err(cuda("mapping pinned memory"))?;
            s.fill(0);
            for (t, &o) in trees.iter().zip(&offsets) {
                s[o..o + t.len()].copy_from_slice(t);
            }
        }
        let width = ptype.byte_width();
        // SAFETY: device buffers that kernels write before anything reads them (input by the
        // uploads, output and scratch by the kernels, which the validated descriptors keep
        // within bounds); `err` is zeroed before every decode.
        let (input, output, scratch) = unsafe {
            (
                stream.alloc::<u8>(total.max(1)),
                stream.alloc::<u8>((rows * width).max(1)),
                stream.alloc::<u8>(scratch_bytes.max(1)),
            )
        };
        let err = stream
            .alloc_zeros::<i32>(1)
            .map_err(cuda("allocating the error word"))?;
        Ok(ColumnDecoder {
            gpu,
            ptype,
            rows,
            staging,
            batches,
            groups,
            input: input.map_err(cuda("allocating the input buffer"))?,
            output: output.map_err(cuda("allocating the output buffer"))?,
            scratch: scratch.map_err(cuda("allocating the scratch buffer"))?,
            err,
            compressed: total,
            uploaded: false,
        })
    }

    /// The plan shapes of the column's chunks, one per generated kernel.
    pub fn shapes(&self) -> Vec<String> {
        self.groups.iter().map(|g| g.kernel.key.clone()).collect()
    }

    /// Number of values.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Bytes of compressed input (chunk trees with alignment padding).
    pub fn compressed_bytes(&self) -> usize {
        self.compressed
    }

    /// Bytes of decoded output.
    pub fn decoded_bytes(&self) -> usize {
        self.rows * self.ptype.byte_width()
    }

    /// Launches `group`'s kernel over its work entries `range` on `stream`.
    fn launch(&self, group: &Group, range: Range<usize>, stream: &CudaStream) -> Result<()> {
        if range.is_empty() {
            return Ok(());
        }
        let blocks = u32::try_from(range.len())
            .map_err(|_| Error::unsupported("more than 2^32 thread blocks in one launch"))?;
        let (input, _a) = self.input.device_ptr(stream);
        let (output, _b) = self.output.device_ptr(stream);
        let (scratch, _c) = self.scratch.device_ptr(stream);
        let (prm, _d) = group.prm.device_ptr(stream);
        let (work, _e) = group.work.device_ptr(stream);
        let (err, _f) = self.err.device_ptr(stream);
        let work = work + (range.start * 2 * size_of::<u32>()) as u64;
        let cfg = LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (group.kernel.threads, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut b = stream.launch_builder(&group.function);
        b.arg(&input)
            .arg(&output)
            .arg(&scratch)
            .arg(&prm)
            .arg(&work)
            .arg(&err);
        // SAFETY: the argument list matches the generated kernel's signature (see
        // `codegen`): in, out, scratch, prm, work, err, all device pointers. The descriptors
        // were validated against the trees, whose bytes sit at the offsets they name, so every
        // access stays within the buffers; `range` is within the group's work list.
        unsafe { b.launch(cfg) }.map_err(cuda("launching a decode kernel"))?;
        Ok(())
    }

    fn reset_error(&mut self, stream: &Arc<CudaStream>) -> Result<()> {
        stream
            .memset_zeros(&mut self.err)
            .map_err(cuda("clearing the error word"))
    }

    /// Copies the compressed bytes to the device batch by batch, alternating two streams,
    /// each batch's kernels queued right behind its copy.
    pub fn upload_and_decode(&mut self) -> Result<()> {
        let streams = self.gpu.streams.clone();
        self.reset_error(&streams[0])?;
        streams[0].synchronize().map_err(cuda("synchronising"))?;
        let src = self
            .staging
            .as_slice()
            .map_err(cuda("mapping pinned memory"))?;
        let (input, _guard) = self.input.device_ptr(&streams[0]);
        for (i, (bytes, ranges)) in self.batches.iter().enumerate() {
            let stream = &streams[i % 2];
            if !bytes.is_empty() {
                // SAFETY: `bytes` lies within the staging buffer, which has the input
                // buffer's size, and the pinned source outlives the copy (it is owned by
                // `self`, and `finish` synchronises before anything else touches it).
                unsafe {
                    cudarc::driver::result::memcpy_htod_async(
                        input + bytes.start as u64,
                        &src[bytes.clone()],
                        stream.cu_stream(),
                    )
                }
                .map_err(cuda("copying compressed bytes to the device"))?;
            }
            for (g, r) in self.groups.iter().zip(ranges) {
                if g.kernel.kind == KernelKind::Tile {
                    self.launch(g, r.clone(), stream)?;
                }
            }
        }
        // Chunk kernels run one block per chunk: launched per batch they would leave most of
        // the GPU idle, so they run once over all chunks after the last copy.
        if self
            .groups
            .iter()
            .any(|g| g.kernel.kind == KernelKind::Chunk)
        {
            streams[0]
                .join(&streams[1])
                .map_err(cuda("ordering streams"))?;
            for g in &self.groups {
                if g.kernel.kind == KernelKind::Chunk {
                    self.launch(g, 0..g.work.len() / 2, &streams[0])?;
                }
            }
        }
        self.uploaded = true;
        Ok(())
    }

    /// Runs the kernels on bytes already on the device, all on one stream (the first call
    /// uploads them, as [`ColumnDecoder::upload_and_decode`] does).
    pub fn decode_resident(&mut self) -> Result<()> {
        if !self.uploaded {
            return self.upload_and_decode();
        }
        let stream = self.gpu.streams[0].clone();
        self.reset_error(&stream)?;
        for g in &self.groups {
            let n = g.work.len() / 2;
            self.launch(g, 0..n, &stream)?;
        }
        Ok(())
    }

    /// Waits for the decode and turns the kernels' error word into an error.
    pub fn finish(&self) -> Result<()> {
        for s in &self.gpu.streams {
            s.synchronize().map_err(cuda("waiting for the decode"))?;
        }
        let flags = self.gpu.streams[0]
            .clone_dtoh(&self.err)
            .map_err(cuda("reading the error word"))?;
        let f = flags.first().copied().unwrap_or(0);
        if f & ERR_DICT != 0 {
            return Err(Error::corrupt("dictionary code out of range"));
        }
        if f & ERR_RLE_ZERO != 0 {
            return Err(Error::corrupt("rle run of length 0"));
        }
        if f & ERR_RLE_SUM != 0 {
            return Err(Error::corrupt(
                "rle runs do not add up to the node's length",
            ));
        }
        Ok(())
    }

    /// Times `reps` runs of the kernels alone (input on the device) with CUDA events, in
    /// milliseconds, after one untimed run.
    pub fn time_resident(&mut self, reps: usize) -> Result<Vec<f32>> {
        self.time(reps, Self::decode_resident)
    }

    /// Times `reps` runs of upload (pinned, overlapped) plus decode, in milliseconds.
    pub fn time_upload_and_decode(&mut self, reps: usize) -> Result<Vec<f32>> {
        self.time(reps, Self::upload_and_decode)
    }

    fn time(
        &mut self,
        reps: usize,
        mut run: impl FnMut(&mut Self) -> Result<()>,
    ) -> Result<Vec<f32>> {
        run(self)?;
        self.finish()?;
        let streams = self.gpu.streams.clone();
        let ctx = &self.gpu.ctx;
        let mut times = Vec::with_capacity(reps);
        for _ in 0..reps {
            let timed = Some(CUevent_flags::CU_EVENT_DEFAULT);
            let start = ctx.new_event(timed).map_err(cuda("creating an event"))?;
            let end = ctx.new_event(timed).map_err(cuda("creating an event"))?;
            start
                .record(&streams[0])
                .map_err(cuda("recording an event"))?;
            // The second stream starts after the first's start event.
            streams[1].wait(&start).map_err(cuda("ordering streams"))?;
            run(self)?;
            // The end waits for both streams.
            let other = streams[1]
                .record_event(None)
                .map_err(cuda("recording an event"))?;
            streams[0].wait(&other).map_err(cuda("ordering streams"))?;
            end.record(&streams[0])
                .map_err(cuda("recording an event"))?;
            end.synchronize().map_err(cuda("waiting for an event"))?;
            times.push(start.elapsed_ms(&end).map_err(cuda("reading an event"))?);
        }
        self.finish()?;
        Ok(times)
    }

    /// The decoded column (call [`ColumnDecoder::finish`] first).
    pub fn into_column(self) -> DeviceColumn {
        DeviceColumn {
            ptype: self.ptype,
            len: self.rows,
            buffer: self.output,
        }
    }
}

/// Fills one chunk's descriptor while checking its tree as the CPU decoders do.
struct Filler<'a> {
    /// Address of the tree's first byte on the host.
    base: usize,
    /// Offset of the tree in the device input buffer.
    device_offset: u64,
    /// Running size of the scratch buffer.
    scratch: &'a mut usize,
    kernel: &'a Kernel,
    prm: &'a mut [u64],
}

impl Filler<'_> {
    /// The device offset of `buf`, which must be `align`-aligned within the tree.
    fn offset(&self, buf: &[u8], align: usize) -> Result<u64> {
        let rel = (buf.as_ptr() as usize).wrapping_sub(self.base);
        if !rel.is_multiple_of(align) {
            return Err(Error::corrupt(format!(
                "buffer at byte {rel} of the tree is not {align}-byte aligned"
            )));
        }
        Ok(self.device_offset + rel as u64)
    }

    fn fill(&mut self, node: &NodeView<'_>, k: usize) -> Result<()> {
        let slots = &self.kernel.nodes[k];
        let b = slots.base;
        let width = node.ptype.byte_width();
        self.prm[b] = node.len as u64;
        if let Some(s) = slots.scratch {
            self.prm[s] = *self.scratch as u64;
            *self.scratch = (*self.scratch + node.len * width).next_multiple_of(8);
        }
        let same_len = |c: &NodeView<'_>, what: &str| -> Result<()> {
            if c.len != node.len {
                return Err(Error::corrupt(format!(
                    "{what} child holds {} values, expected {}",
                    c.len, node.len
                )));
            }
            Ok(())
        };
        let name = slots.op.name();
        match slots.op {
            Op::Plain => {
                node.expect_shape(name, 1, 0)?;
                node.meta_reader().finish(name)?;
                let buf = node.buffer(0, "values")?;
                if buf.len() != node.len * width {
                    return Err(Error::corrupt(format!(
                        "plain buffer has {} bytes, {} {} values need {}",
                        buf.len(),
                        node.len,
                        node.ptype,
                        node.len * width
                    )));
                }
                self.prm[b + 1] = self.offset(buf, width)?;
            }
            Op::BitPack => {
                node.expect_shape(name, 1, 0)?;
                let mut meta = node.meta_reader();
                let w = meta.u8("bit width")?;
                meta.finish(name)?;
                if usize::from(w) > width * 8 {
                    return Err(Error::corrupt(format!(
                        "bit width {w} exceeds the {}-bit value type",
                        width * 8
                    )));
                }
                let buf = node.buffer(0, "packed")?;
                let need = bitpack::packed_bytes(node.len, u32::from(w));
                if buf.len() != need {
                    return Err(Error::corrupt(format!(
                        "packed buffer has {} bytes, {} values at {w} bits need {need}",
                        buf.len(),
                        node.len
                    )));
                }
                self.prm[b + 1] = self.offset(buf, width)?;
                self.prm[b + 2] = u64::from(w);
            }
            Op::For | Op::ZigZag | Op::Delta => {
                node.expect_shape(name, 0, 1)?;
                let mut meta = node.meta_reader();
                if slots.op != Op::ZigZag {
                    self.prm[b + 1] = meta.u64(if slots.op == Op::For {
                        "reference"
                    } else {
                        "base"
                    })?;
                }
                meta.finish(name)?;
                same_len(&node.children[0], name)?;
            }
            Op::Constant => {
                node.expect_shape(name, 0, 0)?;
                let mut meta = node.meta_reader();
                self.prm[b + 1] = meta.u64("value")?;
                meta.finish(name)?;
            }
            Op::Rle => {
                node.expect_shape(name, 0, 2)?;
                node.meta_reader().finish(name)?;
                let nruns = node.children[0].len;
                if node.children[1].len != nruns {
                    return Err(Error::corrupt(format!(
                        "runs child holds {} values, expected {nruns}",
                        node.children[1].len
                    )));
                }
                if nruns > node.len {
                    return Err(Error::corrupt(format!(
                        "rle node has {nruns} runs for {} values",
                        node.len
                    )));
                }
            }
            Op::Dict => {
                node.expect_shape(name, 0, 2)?;
                node.meta_reader().finish(name)?;
                let entries = node.children[1].len;
                if node.children[0].ptype != dict::code_type(entries) {
                    return Err(Error::corrupt(format!(
                        "codes child holds {} values, expected {}",
                        node.children[0].ptype,
                        dict::code_type(entries)
                    )));
                }
                same_len(&node.children[0], "codes")?;
                if entries > node.len {
                    return Err(Error::corrupt(format!(
                        "dictionary of {entries} values for a stream of {}",
                        node.len
                    )));
                }
            }
            Op::Patch | Op::FloatToInt => {
                node.expect_shape(name, 2, 1)?;
                let mut meta = node.meta_reader();
                let param = meta.u8("parameter")?;
                let count = meta.u32("exception count")? as usize;
                meta.finish(name)?;
                if count > node.len {
                    return Err(Error::corrupt(format!(
                        "{name} node claims {count} exceptions among {} values",
                        node.len
                    )));
                }
                let positions_buf = node.buffer(0, "exception positions")?;
                let mut copy = Vec::new();
                let positions =
                    cast_or_copy::<u32>(positions_buf, &mut copy, "exception positions")?;
                if positions.len() != count {
                    return Err(Error::corrupt(format!(
                        "exception position buffer holds {} positions, metadata says {count}",
                        positions.len()
                    )));
                }
                patch::validate_positions(positions, node.len)?;
                let values = node.buffer(1, "exception values")?;
                if values.len() != count * width {
                    return Err(Error::corrupt(format!(
                        "exception value buffer holds {} bytes, {count} exceptions need {}",
                        values.len(),
                        count * width
                    )));
                }
                if slots.op == Op::Patch {
                    if usize::from(param) > width * 8 {
                        return Err(Error::corrupt(format!(
                            "patch width {param} exceeds the {}-bit value type",
                            width * 8
                        )));
                    }
                } else {
                    let max = if node.ptype == PType::F32 { 9 } else { 18 };
                    if param > max {
                        return Err(Error::corrupt(format!(
                            "float2int exponent {param} exceeds {max} for {} values",
                            node.ptype
                        )));
                    }
                    self.prm[b + 4] = float2int::POW10[usize::from(param)].to_bits();
                }
                self.prm[b + 1] = self.offset(positions_buf, 4)?;
                self.prm[b + 2] = self.offset(values, width)?;
                self.prm[b + 3] = count as u64;
                same_len(&node.children[0], name)?;
            }
        }
        // `Shape::of` built the kernel from a tree of this shape, so the children line up.
        let children = slots.children.clone();
        for (c, k) in node.children.iter().zip(children) {
            self.fill(c, k)?;
        }
        Ok(())
    }
}

/// Splits a column's values into per-chunk streams of `rows` values each.
pub fn split_chunks(values: &Values, rows: &[usize]) -> Result<Vec<Values>> {
    let mut out = Vec::with_capacity(rows.len());
    let mut at = 0usize;
    for &n in rows {
        if at + n > values.len() {
            return Err(Error::corrupt("chunk rows exceed the decoded column"));
        }
        out.push(values.slice(at, at + n));
        at += n;
    }
    Ok(out)
}
