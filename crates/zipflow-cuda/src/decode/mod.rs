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

use crate::cache::TUNE_THREADS;
use crate::codegen::strings::{EXPAND_NAME, EXPAND_NARROW_NAME};
use crate::codegen::{
    ERR_ANS, ERR_CHAR, ERR_DICT, ERR_FSST, ERR_PATCH, ERR_RLE_SUM, ERR_RLE_ZERO, ERR_STR,
    KERNEL_NAME, Kernel, KernelKind, generate,
};
use crate::device::{Gpu, Staging, cuda};
pub(crate) mod host;

use crate::shape::Shape;
use cudarc::driver::sys::{CUevent_flags, CUfunction_attribute};
use cudarc::driver::{
    CudaEvent, CudaFunction, CudaSlice, CudaStream, DevicePtr, LaunchConfig, PushKernelArg,
};
use host::HostColumn;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;
use zipflow_core::values::ByteStrings;
use zipflow_core::{Error, PType, Result, Values, with_int_ptype};
use zipflow_encodings::NodeView;
use zipflow_format::{Payload, ZfFile};

/// Chunks per upload batch: large enough that a batch's tile kernels fill the GPU and a copy
/// takes well over a launch's overhead, small enough that the first kernels start early.
pub(crate) const BATCH_CHUNKS: usize = 32;

/// Each chunk's bytes start at a multiple of this in the input buffer.
pub(crate) const INPUT_ALIGN: usize = 256;

/// A decoded column on the device: the values in the column's physical type, chunk after
/// chunk. Byte strings are laid out as Arrow's strings: the strings' bytes, then, at the next
/// multiple of 16 (the kernels store a thread's offsets 16 bytes at a time), `len + 1` little-endian offsets into them, `u32` when the bytes are fewer
/// than 2^32 (Arrow's `Utf8`), else `u64` (`LargeUtf8`).
pub struct DeviceColumn {
    /// Physical type of the values.
    pub ptype: PType,
    /// Number of values.
    pub len: usize,
    /// Bytes of the strings (byte-string columns; 0 otherwise).
    pub string_bytes: usize,
    /// Bytes per string offset: 4 or 8 (0: the offsets were not written).
    pub offset_width: usize,
    /// The values' bytes (`len * ptype.byte_width()` of them, maybe one more), or the
    /// strings' bytes and offsets.
    pub buffer: CudaSlice<u8>,
}

/// Where the offsets of a byte-string column with `string_bytes` bytes start in its buffer.
pub fn offsets_start(string_bytes: usize) -> usize {
    string_bytes.next_multiple_of(16)
}

/// Bytes per offset of a byte-string column with `string_bytes` bytes.
pub fn offset_width(string_bytes: usize) -> usize {
    if u32::try_from(string_bytes).is_ok() {
        4
    } else {
        8
    }
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
    /// Copies the values back to the host: the bytes the values occupy, not the padding
    /// around them (which no kernel writes).
    pub fn to_host(&self, gpu: &Gpu) -> Result<Values> {
        let stream = &gpu.streams[0];
        let copy = |range: std::ops::Range<usize>| -> Result<Vec<u8>> {
            if range.end > self.buffer.len() {
                return Err(Error::corrupt("device column shorter than its values"));
            }
            if range.is_empty() {
                return Ok(Vec::new());
            }
            stream
                .clone_dtoh(&self.buffer.slice(range))
                .map_err(cuda("copying values to the host"))
        };
        if self.ptype == PType::Bytes {
            let at = offsets_start(self.string_bytes);
            let w = self.offset_width;
            if w == 0 {
                return Err(Error::invalid("the strings were decoded without offsets"));
            }
            let raw = copy(at..at + w * (self.len + 1))?;
            let offsets = if w == 8 {
                bytemuck::pod_collect_to_vec(&raw)
            } else {
                raw.chunks_exact(4)
                    .map(|c| u64::from(u32::from_le_bytes([c[0], c[1], c[2], c[3]])))
                    .collect()
            };
            return Ok(Values::Bytes(ByteStrings {
                offsets,
                data: copy(0..self.string_bytes)?,
            }));
        }
        let bytes = copy(0..self.len * self.ptype.byte_width())?;
        values_from_bytes(self.ptype, &bytes)
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
/// back concatenated. Byte strings need each chunk's byte count when a chunk's tree does not
/// hold it (`strdict`): `string_bytes`, one per tree.
pub fn decode_trees(
    gpu: &Gpu,
    ptype: PType,
    trees: &[&[u8]],
    string_bytes: Option<&[u64]>,
) -> Result<Values> {
    let mut d = ColumnDecoder::with_string_bytes(gpu, ptype, trees, string_bytes)?;
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
    /// The same on the host.
    prm_host: Vec<u64>,
    /// Two u32 per block: chunk index in the group, vector index.
    work: CudaSlice<u32>,
    /// Byte strings: the expansion kernel, run after `function`, its work list (two u32
    /// per block: chunk index in the group, segment index) and its dynamic shared memory.
    expand: Option<(CudaFunction, CudaSlice<u32>, u32)>,
}

/// A column prepared for decoding on one GPU (see the module docs).
pub struct ColumnDecoder<'g> {
    gpu: &'g Gpu,
    ptype: PType,
    rows: usize,
    staging: Staging<'g>,
    /// Per batch: the bytes of `staging` it covers, and per group the range of work entries.
    batches: Vec<(Range<usize>, Vec<Range<usize>>)>,
    groups: Vec<Group>,
    input: CudaSlice<u8>,
    output: CudaSlice<u8>,
    scratch: CudaSlice<u8>,
    err: CudaSlice<i32>,
    compressed: usize,
    /// Bytes of the strings of a byte-string column.
    string_bytes: usize,
    /// Bytes per string offset the kernels write (0: none).
    offset_width: usize,
    /// Whether the input buffer holds the compressed bytes.
    uploaded: bool,
    /// Recorded behind this decoder's last work (its set-up, then each decode): the next
    /// upload into its buffers waits for it, and for nothing else queued on the GPU.
    done: CudaEvent,
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

/// An event behind everything queued on both kernel streams so far.
fn behind_both(streams: &[Arc<CudaStream>; 2]) -> Result<CudaEvent> {
    streams[0]
        .join(&streams[1])
        .map_err(cuda("ordering streams"))?;
    streams[0]
        .record_event(None)
        .map_err(cuda("recording an event"))
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
        Self::for_chunk_list(gpu, file, column, 0..file.num_chunks(), times.max(1))
    }

    /// Prepares chunks `chunks` (row groups, in the order given) of column `column` of
    /// `file`, decoded one after another into one buffer.
    pub fn for_chunks(
        gpu: &'g Gpu,
        file: &ZfFile,
        column: usize,
        chunks: &[usize],
    ) -> Result<ColumnDecoder<'g>> {
        if let Some(&c) = chunks.iter().find(|&&c| c >= file.num_chunks()) {
            return Err(Error::invalid(format!(
                "row group {c} out of range: the file has {}",
                file.num_chunks()
            )));
        }
        Self::for_chunk_list(gpu, file, column, chunks.iter().copied(), 1)
    }

    fn for_chunk_list(
        gpu: &'g Gpu,
        file: &ZfFile,
        column: usize,
        chunks: impl ExactSizeIterator<Item = usize>,
        times: usize,
    ) -> Result<ColumnDecoder<'g>> {
        let meta = file
            .columns()
            .get(column)
            .ok_or_else(|| Error::invalid(format!("column index {column} out of range")))?;
        let ptype = meta.column_type.ptype();
        let name = meta.name.clone();
        let mut trees = Vec::with_capacity(chunks.len());
        let mut sizes = Vec::with_capacity(chunks.len());
        for c in chunks {
            let (values, cm) = decoded_tree(file, column, c)?;
            trees.push(values);
            // A string chunk's plain size is its bytes plus 4 per offset.
            sizes.push(cm.plain_bytes.saturating_sub(4 * (u64::from(cm.rows) + 1)));
        }
        let trees: Vec<&[u8]> = trees.iter().map(|t| &t[..]).collect();
        let only = trees.repeat(times);
        let sizes = sizes.repeat(times);
        let sizes = (ptype == PType::Bytes).then_some(&sizes[..]);
        Self::with_string_bytes(gpu, ptype, &only, sizes)
            .map_err(|e| e.at_column(&name).in_file(file.path()))
    }

    /// Prepares serialised node trees, one per chunk, all decoding to `ptype` (numbers, or
    /// byte strings whose trees hold their byte counts).
    pub fn new(gpu: &'g Gpu, ptype: PType, trees: &[&[u8]]) -> Result<ColumnDecoder<'g>> {
        Self::with_string_bytes(gpu, ptype, trees, None)
    }

    /// Like [`ColumnDecoder::new`], with each chunk's string bytes for byte strings (the
    /// footer's record; checked against the tree where it holds them, and by the kernel).
    pub fn with_string_bytes(
        gpu: &'g Gpu,
        ptype: PType,
        trees: &[&[u8]],
        string_bytes: Option<&[u64]>,
    ) -> Result<ColumnDecoder<'g>> {
        let threads = |key: &str| gpu.launch_threads(key);
        let h = HostColumn::plan(ptype, trees, string_bytes, &threads)?;
        Self::upload(gpu, ptype, trees, h)
    }

    /// Uploads a column the host has laid out: compiles its kernels, copies the descriptors
    /// and work lists and allocates its buffers.
    fn upload(
        gpu: &'g Gpu,
        ptype: PType,
        trees: &[&[u8]],
        h: HostColumn,
    ) -> Result<ColumnDecoder<'g>> {
        let HostColumn {
            groups: host,
            offsets,
            extras,
            total,
            rows,
            scratch_bytes,
            batches,
            string_bytes,
            width,
            ..
        } = h;
        let stream = &gpu.streams[0];
        // A column's shapes compile side by side.
        gpu.prepare(&host.iter().map(|g| &g.kernel).collect::<Vec<_>>())?;
        let mut groups = Vec::with_capacity(host.len());
        for g in host {
            let function = load(gpu, &g.kernel, KERNEL_NAME, g.kernel.dyn_smem)?;
            let prm = stream
                .clone_htod(&g.prm)
                .map_err(cuda("uploading descriptors"))?;
            let work = stream
                .clone_htod(&g.work)
                .map_err(cuda("uploading the work list"))?;
            let expand = if g.kernel.segment_rows > 0 {
                // The expansion with the smaller stage (more blocks a multiprocessor) when
                // every segment's strings are short enough on average for a tile to fit it.
                let (name, smem) = if g.kernel.expand_narrow_smem > 0 && g.narrow {
                    (EXPAND_NARROW_NAME, g.kernel.expand_narrow_smem)
                } else {
                    (EXPAND_NAME, g.kernel.expand_smem)
                };
                let f = load(gpu, &g.kernel, name, smem)?;
                let w = stream
                    .clone_htod(&g.expand_work)
                    .map_err(cuda("uploading the work list"))?;
                Some((f, w, smem))
            } else {
                None
            };
            groups.push(Group {
                kernel: g.kernel,
                function,
                prm,
                prm_host: g.prm,
                work,
                expand,
            });
        }
        let mut staging = gpu.staging(total)?;
        {
            let s = staging
                .buffer_mut()
                .as_mut_slice()
                .map_err(cuda("mapping pinned memory"))?;
            // The copies read `total` bytes: trees, what the host derived, and zeros between.
            let s = &mut s[..total];
            s.fill(0);
            for (t, &o) in trees.iter().zip(&offsets) {
                s[o..o + t.len()].copy_from_slice(t);
            }
            for (o, x) in &extras {
                s[*o..*o + x.len()].copy_from_slice(x);
            }
        }
        let out_bytes = if ptype == PType::Bytes {
            offsets_start(string_bytes) + width * (rows + 1)
        } else {
            rows * ptype.byte_width()
        };
        // SAFETY: device buffers that kernels write before anything reads them (input by the
        // uploads, output by the kernels, which the validated descriptors keep within
        // bounds); `err` is zeroed before every decode.
        let (input, output) = unsafe {
            (
                stream.alloc::<u8>(total.max(1)),
                stream.alloc::<u8>(out_bytes.max(1)),
            )
        };
        // Zeroed once: a corrupt chunk stops its first stage part way, and the expansion that
        // follows may then read scratch no stage wrote before the error is seen.
        let scratch = stream.alloc_zeros::<u8>(scratch_bytes.max(1));
        let err = stream
            .alloc_zeros::<i32>(1)
            .map_err(cuda("allocating the error word"))?;
        let done = stream
            .record_event(None)
            .map_err(cuda("recording an event"))?;
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
            string_bytes,
            offset_width: if ptype == PType::Bytes { width } else { 0 },
            uploaded: false,
            done,
        })
    }

    /// Whether the kernels of a byte-string column write the strings' offsets (the default)
    /// or only their bytes, the concatenated strings a byte-stream decompressor gives.
    pub fn set_string_offsets(&mut self, on: bool) -> Result<()> {
        if self.ptype != PType::Bytes {
            return Ok(());
        }
        self.offset_width = if on {
            offset_width(self.string_bytes)
        } else {
            0
        };
        let stream = &self.gpu.streams[0];
        for g in &mut self.groups {
            let base = g.kernel.nodes[0].base;
            for d in g.prm_host.chunks_exact_mut(g.kernel.nparams) {
                d[base + 3] = self.offset_width as u64;
            }
            stream
                .memcpy_htod(&g.prm_host, &mut g.prm)
                .map_err(cuda("uploading descriptors"))?;
        }
        Ok(())
    }

    /// The plan shapes of the column's chunks, one per generated kernel.
    pub fn shapes(&self) -> Vec<String> {
        self.groups.iter().map(|g| g.kernel.key.clone()).collect()
    }

    /// Number of values.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// The device buffer the kernels write the values into (see [`DeviceColumn`] for its
    /// layout), valid after [`ColumnDecoder::finish`].
    pub fn output(&self) -> &CudaSlice<u8> {
        &self.output
    }

    /// Bytes of compressed input (chunk trees with alignment padding).
    pub fn compressed_bytes(&self) -> usize {
        self.compressed
    }

    /// Bytes of decoded values: for byte strings, the strings' bytes (without offsets).
    pub fn decoded_bytes(&self) -> usize {
        if self.ptype == PType::Bytes {
            self.string_bytes
        } else {
            self.rows * self.ptype.byte_width()
        }
    }

    /// Launches `group`'s kernel over its work entries `range` on `stream`, then its
    /// expansion kernel (byte strings) over all of its own when `range` is the whole list.
    fn launch(&self, group: &Group, range: Range<usize>, stream: &CudaStream) -> Result<()> {
        let all = range.start == 0 && range.end == group.work.len() / 2;
        if group.kernel.first_kernel {
            self.launch_one(
                &group.function,
                &group.work,
                range,
                group.kernel.threads,
                group.kernel.dyn_smem,
                &group.prm,
                stream,
            )?;
        }
        if let Some((f, work, smem)) = &group.expand {
            debug_assert!(all, "string kernels run over all chunks at once");
            self.launch_one(
                f,
                work,
                0..work.len() / 2,
                group.kernel.threads,
                *smem,
                &group.prm,
                stream,
            )?;
        }
        Ok(())
    }

    /// Launches `function` over work entries `range` of `work` on `stream`.
    #[allow(clippy::too_many_arguments)]
    fn launch_one(
        &self,
        function: &CudaFunction,
        work: &CudaSlice<u32>,
        range: Range<usize>,
        threads: u32,
        smem: u32,
        prm: &CudaSlice<u64>,
        stream: &CudaStream,
    ) -> Result<()> {
        if range.is_empty() {
            return Ok(());
        }
        let blocks = u32::try_from(range.len())
            .map_err(|_| Error::unsupported("more than 2^32 thread blocks in one launch"))?;
        let (input, _a) = self.input.device_ptr(stream);
        let (output, _b) = self.output.device_ptr(stream);
        let (scratch, _c) = self.scratch.device_ptr(stream);
        let (prm, _d) = prm.device_ptr(stream);
        let (work, _e) = work.device_ptr(stream);
        let (err, _f) = self.err.device_ptr(stream);
        let work = work + (range.start * 2 * size_of::<u32>()) as u64;
        let cfg = LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (threads, 1, 1),
            shared_mem_bytes: smem,
        };
        let mut b = stream.launch_builder(function);
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

    /// Queues the copy of the compressed bytes to the device batch by batch on the GPU's
    /// copy stream, each batch's kernels on one of two kernel streams behind an event of its
    /// own copy, and returns without waiting: the copies of the next decoders queue right
    /// behind these, so PCIe stays busy while the kernels run. The copy waits only for this
    /// decoder's previous work ([`ColumnDecoder::finish`] reports errors).
    pub fn upload_and_decode(&mut self) -> Result<()> {
        let streams = self.gpu.streams.clone();
        let copy = self.gpu.copy.clone();
        copy.wait(&self.done).map_err(cuda("ordering streams"))?;
        copy.memset_zeros(&mut self.err)
            .map_err(cuda("clearing the error word"))?;
        let src = self
            .staging
            .buffer()
            .as_slice()
            .map_err(cuda("mapping pinned memory"))?;
        let (input, _guard) = self.input.device_ptr(&copy);
        for (i, (bytes, ranges)) in self.batches.iter().enumerate() {
            let stream = &streams[i % 2];
            if !bytes.is_empty() {
                // SAFETY: `bytes` lies within the staging buffer, which has the input
                // buffer's size; the pinned source outlives the copy (it is owned by `self`,
                // and `finish`, or dropping the staging buffer, synchronises the copy stream
                // before anything else touches it), and the copy waited for every kernel of
                // this decoder that read the input before (`done`).
                unsafe {
                    cudarc::driver::result::memcpy_htod_async(
                        input + bytes.start as u64,
                        &src[bytes.clone()],
                        copy.cu_stream(),
                    )
                }
                .map_err(cuda("copying compressed bytes to the device"))?;
            }
            let arrived = copy
                .record_event(None)
                .map_err(cuda("recording an event"))?;
            stream.wait(&arrived).map_err(cuda("ordering streams"))?;
            for (g, r) in self.groups.iter().zip(ranges) {
                if g.kernel.kind == KernelKind::Tile {
                    self.launch(g, r.clone(), stream)?;
                }
            }
        }
        let all = copy
            .record_event(None)
            .map_err(cuda("recording an event"))?;
        for s in &streams {
            s.wait(&all).map_err(cuda("ordering streams"))?;
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
            let chunk = self
                .groups
                .iter()
                .filter(|g| g.kernel.kind == KernelKind::Chunk);
            self.launch_alternating(chunk, &streams)?;
        }
        self.done = behind_both(&streams)?;
        self.uploaded = true;
        Ok(())
    }

    /// Runs the kernels on bytes already on the device, the groups of plan shapes alternating
    /// between two streams (the first call uploads them, as
    /// [`ColumnDecoder::upload_and_decode`] does). [`ColumnDecoder::finish`] waits for both.
    pub fn decode_resident(&mut self) -> Result<()> {
        if !self.uploaded {
            return self.upload_and_decode();
        }
        let streams = self.gpu.streams.clone();
        streams[0]
            .wait(&self.done)
            .map_err(cuda("ordering streams"))?;
        self.reset_error(&streams[0])?;
        self.launch_alternating(self.groups.iter(), &streams)?;
        self.done = behind_both(&streams)?;
        Ok(())
    }

    /// Launches `groups` over all their chunks, the first on the first stream, the next on
    /// the second, and so on (both after the first stream's work so far), so that a small
    /// group's kernels, which leave most of the GPU idle, run beside a larger group's.
    fn launch_alternating<'a>(
        &self,
        groups: impl Iterator<Item = &'a Group>,
        streams: &[Arc<CudaStream>],
    ) -> Result<()> {
        streams[1]
            .join(&streams[0])
            .map_err(cuda("ordering streams"))?;
        for (i, g) in groups.enumerate() {
            self.launch(g, 0..g.work.len() / 2, &streams[i % 2])?;
        }
        Ok(())
    }

    /// Waits for the decode and turns the kernels' error word into an error.
    pub fn finish(&self) -> Result<()> {
        for s in self.gpu.streams.iter().chain([&self.gpu.copy]) {
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
        if f & ERR_ANS != 0 {
            return Err(Error::corrupt("an ans block does not decode consistently"));
        }
        if f & ERR_STR != 0 {
            return Err(Error::corrupt(
                "string lengths, token counts or byte counts disagree",
            ));
        }
        if f & ERR_FSST != 0 {
            return Err(Error::corrupt(
                "an fsst piece does not decode to its length (a code without a symbol, an \
                 escape without its byte, or codes outside the stream)",
            ));
        }
        if f & ERR_CHAR != 0 {
            return Err(Error::corrupt(
                "a character-coded block's codes do not end where the next block starts",
            ));
        }
        if f & ERR_PATCH != 0 {
            return Err(Error::corrupt(
                "hipatch exception counts do not add up, or an offset is outside its vector \
                 or out of order",
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
            // The second stream and the copies start after the first's start event.
            streams[1].wait(&start).map_err(cuda("ordering streams"))?;
            self.gpu
                .copy
                .wait(&start)
                .map_err(cuda("ordering streams"))?;
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

    /// Compiles the numeric chunk kernels of the column for `threads` per block (one of
    /// [`TUNE_THREADS`]) and decodes with them from now on.
    pub fn set_chunk_threads(&mut self, threads: u32) -> Result<()> {
        if !TUNE_THREADS.contains(&threads) {
            return Err(Error::invalid(format!(
                "{threads} threads per block (chunk kernels take one of {TUNE_THREADS:?})"
            )));
        }
        for g in &mut self.groups {
            if tunable(&g.kernel) && g.kernel.threads != threads {
                (g.kernel, g.function) = at_threads(self.gpu, &g.kernel, threads)?;
            }
        }
        Ok(())
    }

    /// Times each numeric chunk kernel of the column at every block size of
    /// [`TUNE_THREADS`] (its launch over all of its chunks, input on the device, CUDA events,
    /// median of `reps`) and keeps the fastest. Tile and string kernels keep their shapes.
    /// [`Gpu::remember_launch`] makes later decoders of a shape on this device start with
    /// its choice (`zipflow gpu tune` does so once the column checks against the CPU).
    pub fn tune(&mut self, reps: usize) -> Result<Vec<TunedShape>> {
        if !self.groups.iter().any(|g| tunable(&g.kernel)) {
            return Ok(Vec::new());
        }
        if !self.uploaded {
            self.upload_and_decode()?;
            self.finish()?;
        }
        let stream = self.gpu.streams[0].clone();
        let ctx = self.gpu.ctx.clone();
        let mut tuned = Vec::new();
        for gi in 0..self.groups.len() {
            if !tunable(&self.groups[gi].kernel) {
                continue;
            }
            let mut ms = Vec::new();
            for t in TUNE_THREADS {
                let Ok((k, f)) = at_threads(self.gpu, &self.groups[gi].kernel, t) else {
                    ms.push((t, None));
                    continue;
                };
                let g = &self.groups[gi];
                let n = g.work.len() / 2;
                let mut times = Vec::with_capacity(reps.max(1));
                for rep in 0..=reps.max(1) {
                    let timed = Some(CUevent_flags::CU_EVENT_DEFAULT);
                    let start = ctx.new_event(timed).map_err(cuda("creating an event"))?;
                    let end = ctx.new_event(timed).map_err(cuda("creating an event"))?;
                    start.record(&stream).map_err(cuda("recording an event"))?;
                    self.launch_one(&f, &g.work, 0..n, t, k.dyn_smem, &g.prm, &stream)?;
                    end.record(&stream).map_err(cuda("recording an event"))?;
                    end.synchronize().map_err(cuda("waiting for an event"))?;
                    // The first launch warms up.
                    if rep > 0 {
                        times.push(start.elapsed_ms(&end).map_err(cuda("reading an event"))?);
                    }
                }
                self.finish()?;
                times.sort_by(f32::total_cmp);
                ms.push((t, Some(f64::from(times[times.len() / 2]))));
            }
            let threads = ms
                .iter()
                .filter_map(|&(t, m)| Some((t, m?)))
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .map_or(self.groups[gi].kernel.threads, |m| m.0);
            let g = &mut self.groups[gi];
            if g.kernel.threads != threads {
                (g.kernel, g.function) = at_threads(self.gpu, &g.kernel, threads)?;
            }
            tuned.push(TunedShape {
                key: g.kernel.key.clone(),
                ms,
                threads,
            });
        }
        Ok(tuned)
    }

    /// The decoded column (call [`ColumnDecoder::finish`] first).
    pub fn into_column(self) -> DeviceColumn {
        DeviceColumn {
            ptype: self.ptype,
            len: self.rows,
            string_bytes: self.string_bytes,
            offset_width: self.offset_width,
            buffer: self.output,
        }
    }
}

/// Whether `kernel`'s block size may be tuned: numeric chunk kernels (string kernels tie their
/// tiles to their block size, tile kernels their lanes).
pub(crate) fn tunable(kernel: &Kernel) -> bool {
    kernel.kind == KernelKind::Chunk && kernel.out != PType::Bytes
}

/// `kernel` compiled for `threads` per block, and its decode function.
fn at_threads(gpu: &Gpu, kernel: &Kernel, threads: u32) -> Result<(Kernel, CudaFunction)> {
    let mut k = kernel.clone();
    k.threads = threads;
    let f = load(gpu, &k, KERNEL_NAME, k.dyn_smem)?;
    Ok((k, f))
}

/// One plan shape's chunk kernel timed at each block size by [`ColumnDecoder::tune`].
#[derive(Debug, Clone)]
pub struct TunedShape {
    /// The plan shape's key.
    pub key: String,
    /// Median kernel milliseconds at each block size of [`TUNE_THREADS`], in order; `None`
    /// where the kernel does not compile at that size (its shared arrays grow with the block).
    pub ms: Vec<(u32, Option<f64>)>,
    /// The block size kept (the fastest).
    pub threads: u32,
}

/// Function `name` of `kernel`'s module, allowed `smem` bytes of dynamic shared memory (static
/// and dynamic together may pass the default 48 KiB).
fn load(gpu: &Gpu, kernel: &Kernel, name: &str, smem: u32) -> Result<CudaFunction> {
    let f = gpu.function(kernel, name)?;
    if smem > 0 {
        f.set_attribute(
            CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            smem as i32,
        )
        .map_err(cuda("allowing a kernel its shared memory"))?;
    }
    Ok(f)
}

/// The values tree of chunk `chunk` of column `column` (the payload without its validity),
/// with the chunk's index entry.
pub(crate) fn values_tree(
    file: &ZfFile,
    column: usize,
    chunk: usize,
) -> Result<(Payload<'_>, &zipflow_format::ChunkMeta)> {
    let (mut payload, cm) = file.chunk_payload(column, chunk)?;
    if payload.len() < cm.values_len as usize {
        return Err(Error::corrupt("values tree outside the payload"));
    }
    payload.truncate(cm.values_len as usize);
    Ok((payload, cm))
}

/// [`values_tree`] for a decoder, which places values by row: a chunk whose nulls are left
/// out of its tree (`zipflow_format::nulls`) holds fewer values than rows, and is refused as
/// unsupported, so that the caller reads it on the CPU.
pub(crate) fn decoded_tree(
    file: &ZfFile,
    column: usize,
    chunk: usize,
) -> Result<(Payload<'_>, &zipflow_format::ChunkMeta)> {
    let (payload, cm) = values_tree(file, column, chunk)?;
    if cm.stats.null_count > 0 && NodeView::parse(&payload)?.len != cm.rows as usize {
        return Err(Error::unsupported(
            "a chunk that stores only its valid values (the GPU decoders place values by row)",
        ));
    }
    Ok((payload, cm))
}

/// One plan shape of a column and the kernel generated for it.
#[derive(Debug)]
pub struct ColumnKernel {
    /// The shape's key (see [`Shape::key`]).
    pub key: String,
    /// How many of the column's chunks have this shape.
    pub chunks: usize,
    /// The generated kernel, or why the GPU does not decode the shape.
    pub kernel: Result<Kernel>,
}

/// The kernels generated for the plan shapes of column `column` of `file`, in the order the
/// shapes first appear. Needs no GPU: this is what a decoder would compile (at default
/// launch shapes).
pub fn column_kernels(file: &ZfFile, column: usize) -> Result<Vec<ColumnKernel>> {
    let meta = file
        .columns()
        .get(column)
        .ok_or_else(|| Error::invalid(format!("column index {column} out of range")))?;
    let ptype = meta.column_type.ptype();
    let mut out: Vec<ColumnKernel> = Vec::new();
    let mut by_key: HashMap<String, usize> = HashMap::new();
    for c in 0..file.num_chunks() {
        let at = |e: Error| {
            e.at_chunk(c as u32)
                .at_column(&meta.name)
                .in_file(file.path())
        };
        let (tree, _) = values_tree(file, column, c).map_err(at)?;
        let node = NodeView::parse(&tree).map_err(at)?;
        if node.ptype != ptype {
            return Err(at(Error::corrupt(format!(
                "values tree holds {} values, the column is {ptype}",
                node.ptype
            ))));
        }
        let shape = Shape::of(&node).map_err(at)?;
        let key = shape.key();
        match by_key.get(&key) {
            Some(&i) => out[i].chunks += 1,
            None => {
                by_key.insert(key.clone(), out.len());
                out.push(ColumnKernel {
                    key,
                    chunks: 1,
                    kernel: generate(&shape),
                });
            }
        }
    }
    Ok(out)
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
