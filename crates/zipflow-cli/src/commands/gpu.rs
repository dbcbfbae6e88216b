//! `zipflow gpu`: what the GPU is, and how fast it decodes a file's columns; plus the GPU
//! path of `zipflow decompress --device gpu`.

use crate::out::outln;
use anyhow::{Context, Result, bail};
use arrow::record_batch::RecordBatch;
use std::path::{Path, PathBuf};
use std::time::Instant;
use zipflow_core::{PType, Values};
use zipflow_cuda::{ColumnDecoder, Gpu};
use zipflow_encodings::Scratch;
use zipflow_format::ZfFile;

/// Arguments of `zipflow gpu`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub command: GpuCommand,
}

/// `zipflow gpu` subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum GpuCommand {
    /// Print the GPU's name, compute capability, memory and driver version, or why there is
    /// no usable GPU (and exit non-zero).
    Info {
        /// Device ordinal.
        #[arg(long, default_value_t = 0)]
        device: usize,
    },
    /// Decode every column of a .zf file on the GPU, check it against the CPU, and time the
    /// kernels (input already on the device) and upload + decode (pinned memory, copies
    /// overlapped with kernels). Medians over --reps runs, timed with CUDA events. String
    /// columns count their strings' bytes as decoded (offsets are written but not counted).
    /// Columns with plans the GPU does not decode say so and are skipped.
    Bench {
        /// The .zf file.
        input: PathBuf,
        /// Device ordinal.
        #[arg(long, default_value_t = 0)]
        device: usize,
        /// Timed runs per column.
        #[arg(long, default_value_t = 20)]
        reps: usize,
        /// Only these columns (comma-separated names).
        #[arg(long, value_delimiter = ',')]
        columns: Vec<String>,
        /// Skip the comparison with the CPU decoder.
        #[arg(long)]
        no_check: bool,
        /// Decode each column's chunks this many times over, as one longer column (to time
        /// columns larger than the file's).
        #[arg(long, default_value_t = 1)]
        repeat: usize,
    },
    /// Tune the launch shapes of a file's plan shapes on this GPU: every numeric chunk kernel
    /// (`delta`, `rle`, `ans`, ... one block per chunk) is timed at 128, 256 and 512 threads per
    /// block over its column's chunks, and the fastest is remembered for the shape, this arch
    /// and driver in the kernel cache directory (`launch.tsv`), where every later decode on
    /// this device finds it. Each column is then decoded with the chosen shapes and checked
    /// against the CPU.
    Tune {
        /// The .zf file.
        input: PathBuf,
        /// Device ordinal.
        #[arg(long, default_value_t = 0)]
        device: usize,
        /// Timed runs per block size (the median is compared).
        #[arg(long, default_value_t = 20)]
        reps: usize,
        /// Only these columns (comma-separated names).
        #[arg(long, value_delimiter = ',')]
        columns: Vec<String>,
    },
    /// Print the CUDA C generated for a column's plan shapes: one kernel source per shape, as
    /// a decoder compiles it with NVRTC (no GPU needed). With --out, each goes to its own file
    /// there instead, named after the column and the shape's place in the list.
    Source {
        /// The .zf file.
        input: PathBuf,
        /// The column.
        #[arg(long)]
        column: String,
        /// Write `<column>.<n>.cu` files into this existing folder instead of printing.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Replace existing files in --out.
        #[arg(short, long)]
        force: bool,
    },
    /// Fused against separate kernels: each nested plan decoded by its one generated kernel,
    /// then as one kernel per primitive (each reading its inputs from and writing its output
    /// to device memory), and plain `bitpack` on the same values for reference. Synthetic
    /// i64 columns shaped like TPC-H's; kernel time with CUDA events, input on the device.
    Fusion {
        /// Device ordinal.
        #[arg(long, default_value_t = 0)]
        device: usize,
        /// Values per column.
        #[arg(long, default_value_t = 64 << 20)]
        rows: usize,
        /// Timed runs per kernel (the median is reported).
        #[arg(long, default_value_t = 20)]
        reps: usize,
        /// Threads per block of every chunk kernel (fused and separate: 128, 256 or 512);
        /// by default each shape's remembered or default launch shape.
        #[arg(long, value_parser = ["128", "256", "512"])]
        chunk_threads: Option<String>,
    },
}

/// Runs `zipflow gpu`.
pub fn run(a: Args) -> Result<()> {
    match a.command {
        GpuCommand::Info { device } => {
            let gpu = Gpu::open(device)?;
            outln!("{}", gpu.info());
            Ok(())
        }
        GpuCommand::Bench {
            input,
            device,
            reps,
            columns,
            no_check,
            repeat,
        } => bench(
            &input,
            device,
            reps.max(1),
            &columns,
            !no_check,
            repeat.max(1),
        )
        .map(drop),
        GpuCommand::Fusion {
            device,
            rows,
            reps,
            chunk_threads,
        } => {
            // The parser admits only the three block sizes.
            let threads = chunk_threads.map(|t| t.parse()).transpose()?;
            fusion(device, rows.max(1024), reps.max(1), threads)
        }
        GpuCommand::Tune {
            input,
            device,
            reps,
            columns,
        } => tune(&input, device, reps.max(1), &columns),
        GpuCommand::Source {
            input,
            column,
            out,
            force,
        } => source(&input, &column, out.as_deref(), force),
    }
}

/// Prints (or writes into `out`) the kernel source of each plan shape of `column`.
fn source(input: &Path, column: &str, out: Option<&Path>, force: bool) -> Result<()> {
    let zf = ZfFile::open(input)?;
    let Some(c) = zf.column_index(column) else {
        let names: Vec<&str> = zf.columns().iter().map(|m| m.name.as_str()).collect();
        bail!(
            "{}: no column `{column}` (columns: {})",
            input.display(),
            names.join(", ")
        );
    };
    if let Some(dir) = out
        && !dir.is_dir()
    {
        bail!("--out {}: no such folder", dir.display());
    }
    let kernels = zipflow_cuda::column_kernels(&zf, c)?;
    let total = zf.num_chunks();
    for (n, k) in kernels.iter().enumerate() {
        let mut head = format!(
            "// Column `{column}` of {}: {} of {total} chunks have plan shape\n// {}\n",
            input.display(),
            k.chunks,
            k.key
        );
        let kernel = match &k.kernel {
            Ok(kernel) => kernel,
            Err(e) => {
                outln!("{head}// not decoded on the GPU: {e}\n");
                continue;
            }
        };
        let entry = if kernel.segment_rows > 0 {
            let narrow = if kernel.expand_narrow_smem > 0 {
                format!(
                    ", or `{}` instead when the strings are short (a smaller stage, three \
                     blocks a multiprocessor)",
                    zipflow_cuda::codegen::strings::EXPAND_NARROW_NAME
                )
            } else {
                String::new()
            };
            format!(
                "`{}` (one block per chunk) then `{}` (one block per {} rows){narrow}",
                zipflow_cuda::codegen::KERNEL_NAME,
                zipflow_cuda::codegen::strings::EXPAND_NAME,
                kernel.segment_rows * kernel.segments_per_block.max(1)
            )
        } else {
            format!(
                "`{}`, {}",
                zipflow_cuda::codegen::KERNEL_NAME,
                match kernel.kind {
                    zipflow_cuda::codegen::KernelKind::Tile => format!(
                        "one block per {} vectors of 1024 values",
                        zipflow_cuda::codegen::TILE_VECTORS
                    ),
                    zipflow_cuda::codegen::KernelKind::Chunk => "one block per chunk".into(),
                }
            )
        };
        head.push_str(&format!(
            "// Entry points: {entry}. NVRTC options: --gpu-architecture=sm_XY (the device's) \
             -DZF_THREADS={} -DZF_TILE_VECTORS={} --std=c++17\n",
            kernel.threads,
            zipflow_cuda::codegen::TILE_VECTORS
        ));
        let text = format!("{head}{}", kernel.source);
        match out {
            None => outln!("{text}"),
            Some(dir) => {
                let path = dir.join(format!("{column}.{n}.cu"));
                let (tmp, mut file) = crate::io::AtomicFile::create(&path, force)?;
                std::io::Write::write_all(&mut file, text.as_bytes())
                    .with_context(|| format!("writing {}", path.display()))?;
                drop(file);
                tmp.commit()?;
                outln!("{}: {} chunks, {}", path.display(), k.chunks, k.key);
            }
        }
    }
    Ok(())
}

/// The synthetic columns of `zipflow gpu fusion`: (what, plan, values).
fn fusion_cases(rows: usize) -> Vec<(&'static str, &'static str, Vec<i64>)> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    // Prices of 50 distinct values (l_quantity x a unit price), keys sorted with runs of
    // 1-7 (l_orderkey), and dates in a 7-year range (l_shipdate as days).
    let prices: Vec<i64> = (0..rows)
        .map(|_| 90_000 + 10_000 * (1 + (rnd() % 50) as i64))
        .collect();
    let mut keys = Vec::with_capacity(rows);
    let mut k = 1i64;
    while keys.len() < rows {
        let run = 1 + (rnd() % 7) as usize;
        keys.extend(std::iter::repeat_n(k, run.min(rows - keys.len())));
        k += 1 + (rnd() % 32) as i64;
    }
    let dates: Vec<i64> = (0..rows).map(|_| 8036 + (rnd() % 2526) as i64).collect();
    vec![
        ("dates", "for | bitpack", dates),
        (
            "prices",
            "dict(codes: bitpack, values: for | bitpack)",
            prices,
        ),
        (
            "sorted keys",
            "delta | rle(values: bitpack, runs: bitpack)",
            keys,
        ),
    ]
}

/// A decoder of `trees` on the device, its chunk kernels at `threads` per block when given.
fn decoder<'g>(
    gpu: &'g Gpu,
    ptype: PType,
    trees: &[Vec<u8>],
    threads: Option<u32>,
) -> Result<ColumnDecoder<'g>> {
    let refs: Vec<&[u8]> = trees.iter().map(Vec::as_slice).collect();
    let mut d = ColumnDecoder::new(gpu, ptype, &refs)?;
    if let Some(t) = threads {
        d.set_chunk_threads(t)?;
    }
    Ok(d)
}

/// Median kernel milliseconds of decoding `trees` on the device.
fn kernel_ms(
    gpu: &Gpu,
    ptype: PType,
    trees: &[Vec<u8>],
    reps: usize,
    threads: Option<u32>,
) -> Result<f64> {
    Ok(median(
        decoder(gpu, ptype, trees, threads)?.time_resident(reps)?,
    ))
}

/// For every non-`plain` node of `node` (pre-order), one tree per chunk that decodes the
/// node's output by its own primitive alone, its children stored `plain` (so read from device
/// memory): the plan run as one kernel per primitive.
fn split_nodes(
    node: &zipflow_encodings::NodeView<'_>,
    out: &mut Vec<(String, PType, Vec<u8>)>,
    scratch: &mut Scratch,
) -> Result<()> {
    let mut plan = zipflow_encodings::describe(node)?;
    if plan.name != "plain" {
        for (_, child) in &mut plan.children {
            *child = zipflow_core::Plan::new("plain");
        }
        let values = scratch.decode(node)?;
        let tree = zipflow_encodings::encode(&plan, &values)?.to_bytes()?;
        scratch.give(values);
        out.push((plan.to_string(), node.ptype, tree));
    }
    for child in &node.children {
        split_nodes(child, out, scratch)?;
    }
    Ok(())
}

/// Prints the table of `zipflow gpu fusion`: each nested plan fused against one kernel per
/// primitive, over `rows` synthetic values per column.
pub fn fusion(device: usize, rows: usize, reps: usize, threads: Option<u32>) -> Result<()> {
    let gpu = Gpu::open(device)?;
    outln!("{}", gpu.info());
    outln!(
        "{rows} i64 values per column in chunks of 64 Ki; decoded GB/s of kernel time (CUDA \
         events, input on the device), medians of {reps} runs"
    );
    outln!(
        "| column | plan | ratio | fused ms | fused GB/s | separate kernels (ms each) | separate ms | fused speedup | bitpack GB/s | fused / bitpack | bars (70 % of bitpack, 2x separate) |"
    );
    outln!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    let mut scratch = Scratch::default();
    for (what, plan, values) in fusion_cases(rows) {
        let plan: zipflow_core::Plan = plan.parse()?;
        let chunks: Vec<Values> = values
            .chunks(64 << 10)
            .map(|c| Values::Int(zipflow_core::IntVec::I64(c.to_vec())))
            .collect();
        let decoded = (rows * 8) as f64;
        let mut fused_trees = Vec::new();
        let mut bitpack_trees = Vec::new();
        for c in &chunks {
            fused_trees.push(zipflow_encodings::encode(&plan, c)?.to_bytes()?);
            let bp = zipflow_core::Plan::new("bitpack");
            bitpack_trees.push(zipflow_encodings::encode(&bp, c)?.to_bytes()?);
        }
        let compressed: usize = fused_trees.iter().map(Vec::len).sum();
        // The fused kernel's output must equal the input.
        let mut d = decoder(&gpu, PType::I64, &fused_trees, threads)?;
        let fused = median(d.time_resident(reps)?);
        d.decode_resident()?;
        d.finish()?;
        let got = d.into_column().to_host(&gpu)?;
        if got != Values::Int(zipflow_core::IntVec::I64(values.clone())) {
            bail!("{what}: the fused kernel decoded different values");
        }
        // One list of per-chunk trees per node of the plan.
        let mut per_node: Vec<(String, PType, Vec<Vec<u8>>)> = Vec::new();
        for t in &fused_trees {
            let mut nodes = Vec::new();
            split_nodes(
                &zipflow_encodings::NodeView::parse(t)?,
                &mut nodes,
                &mut scratch,
            )?;
            if per_node.is_empty() {
                per_node = nodes
                    .iter()
                    .map(|(p, ty, _)| (p.clone(), *ty, Vec::new()))
                    .collect();
            }
            if nodes.len() != per_node.len() {
                bail!("{what}: chunks of different plan shapes");
            }
            for (slot, (_, _, tree)) in per_node.iter_mut().zip(nodes) {
                slot.2.push(tree);
            }
        }
        let mut separate = 0.0;
        let mut parts = Vec::new();
        for (p, ty, trees) in &per_node {
            let ms = kernel_ms(&gpu, *ty, trees, reps, threads)?;
            separate += ms;
            parts.push(format!("`{p}` {ms:.3}"));
        }
        let bitpack = kernel_ms(&gpu, PType::I64, &bitpack_trees, reps, threads)?;
        let yes = |ok: bool| if ok { "yes" } else { "no" };
        outln!(
            "| {what} | `{plan}` | {:.2} | {fused:.3} | {:.0} | {} | {separate:.3} | {:.2}x | {:.0} | {:.0} % | {}, {} |",
            decoded / compressed as f64,
            decoded / fused / 1e6,
            parts.join(", "),
            separate / fused,
            decoded / bitpack / 1e6,
            100.0 * bitpack / fused,
            yes(bitpack / fused >= 0.7),
            yes(separate / fused >= 2.0),
        );
    }
    Ok(())
}

fn median(mut v: Vec<f32>) -> f64 {
    v.sort_by(f32::total_cmp);
    v.get(v.len() / 2).copied().map_or(f64::NAN, f64::from)
}

/// Decodes column `c` of `zf` with `d` and fails, naming the first chunk that differs (and
/// `how`, said after it), unless every chunk equals the CPU's decode.
fn check_column(
    gpu: &Gpu,
    mut d: ColumnDecoder<'_>,
    zf: &ZfFile,
    c: usize,
    scratch: &mut Scratch,
    how: &str,
) -> Result<()> {
    d.decode_resident()?;
    d.finish()?;
    let got = d.into_column().to_host(gpu)?;
    let mut at = 0usize;
    for k in 0..zf.num_chunks() {
        let (cpu, _) = zf.read_chunk(c, k, scratch)?;
        let n = cpu.len();
        if at + n > got.len() || !got.slice(at, at + n).bit_eq(&cpu) {
            bail!(
                "column `{}` chunk {k}: the GPU decoded different values{how}",
                zf.columns()[c].name
            );
        }
        at += n;
    }
    Ok(())
}

/// Runs `zipflow gpu tune`.
fn tune(input: &PathBuf, device: usize, reps: usize, only: &[String]) -> Result<()> {
    let gpu = Gpu::open(device)?;
    outln!("{}", gpu.info());
    let zf = ZfFile::open(input)?;
    outln!(
        "{}: chunk kernels timed at {:?} threads per block, medians of {reps} runs",
        input.display(),
        zipflow_cuda::cache::TUNE_THREADS
    );
    outln!("| column | plan shape | ms at each block size | chosen |");
    outln!("| --- | --- | --- | --- |");
    let mut scratch = Scratch::default();
    let mut tuned = 0;
    for (c, meta) in zf.columns().iter().enumerate() {
        if !only.is_empty() && !only.contains(&meta.name) {
            continue;
        }
        let mut d = match ColumnDecoder::for_column(&gpu, &zf, c) {
            Ok(d) => d,
            Err(e) => {
                outln!("| {} | not decoded: {e} | | |", meta.name);
                continue;
            }
        };
        let shapes = d.tune(reps)?;
        if shapes.is_empty() {
            continue;
        }
        for s in &shapes {
            let ms: Vec<String> =
                s.ms.iter()
                    .map(|(t, ms)| match ms {
                        Some(ms) => format!("{t}: {ms:.4}"),
                        None => format!("{t}: does not compile"),
                    })
                    .collect();
            outln!(
                "| {} | `{}` | {} | {} |",
                meta.name,
                s.key,
                ms.join(", "),
                s.threads
            );
            tuned += 1;
        }
        // The chosen shapes decode what the CPU decodes.
        check_column(&gpu, d, &zf, c, &mut scratch, " with the tuned shapes")?;
        for s in &shapes {
            gpu.remember_launch(&s.key, s.threads);
        }
    }
    if tuned == 0 {
        outln!(
            "no column of {} has a chunk kernel to tune",
            input.display()
        );
    } else {
        outln!(
            "{tuned} plan shape(s) tuned and remembered for this device; every tuned column is bit-identical to the CPU"
        );
    }
    Ok(())
}

/// One column's figures from [`bench()`].
#[derive(Debug, Clone)]
pub struct ColumnTiming {
    /// Column name.
    pub name: String,
    /// The plan shapes of its chunks, ` / `-separated.
    pub shapes: String,
    /// Decoded bytes (of a string column: its strings' bytes, offsets not counted).
    pub decoded: f64,
    /// Compressed bytes, as staged for the GPU.
    pub compressed: f64,
    /// Median kernel milliseconds, input on the device.
    pub kernel_ms: f64,
    /// Whether it is a string column.
    pub strings: bool,
    /// A string column's median kernel milliseconds without writing its offsets.
    pub bytes_only_ms: Option<f64>,
}

/// Prints the table of `zipflow gpu bench` for the columns of `input` (all, or `only`), and
/// returns each column's figures.
pub fn bench(
    input: &PathBuf,
    device: usize,
    reps: usize,
    only: &[String],
    check: bool,
    repeat: usize,
) -> Result<Vec<ColumnTiming>> {
    let gpu = Gpu::open(device)?;
    outln!("{}", gpu.info());
    let zf = ZfFile::open(input)?;
    outln!(
        "{}: {} rows, {} chunks per column, each column decoded {repeat} time(s) over; medians of {reps} runs",
        input.display(),
        zf.num_rows(),
        zf.num_chunks()
    );
    outln!(
        "| column | type | plan shapes | decoded MB | ratio | prepare ms | kernels ms | GB/s | upload+decode ms | GB/s |"
    );
    outln!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    let mut scratch = Scratch::default();
    let mut timings = Vec::new();
    let (mut total_decoded, mut total_kernel_ms) = (0f64, 0f64);
    let (mut string_decoded, mut string_kernel_ms) = (0f64, 0f64);
    for (c, meta) in zf.columns().iter().enumerate() {
        if !only.is_empty() && !only.contains(&meta.name) {
            continue;
        }
        let strings = meta.column_type.ptype() == PType::Bytes;
        let t = Instant::now();
        let mut d = match ColumnDecoder::for_column_repeated(&gpu, &zf, c, repeat) {
            Ok(d) => d,
            Err(e) => {
                outln!(
                    "| {} | {} | not decoded: {e} |",
                    meta.name,
                    meta.column_type
                );
                continue;
            }
        };
        let prepare_ms = t.elapsed().as_secs_f64() * 1e3;
        let kernel = median(d.time_resident(reps)?);
        let e2e = median(d.time_upload_and_decode(reps)?);
        let decoded = d.decoded_bytes() as f64;
        let d_compressed = d.compressed_bytes().max(1) as f64;
        let ratio = decoded / d_compressed;
        let shapes = d.shapes().join(" / ");
        // Strings without their offsets: the output a byte-stream decompressor gives.
        let bytes_only = if strings {
            d.set_string_offsets(false)?;
            let k = median(d.time_resident(reps)?);
            let e = median(d.time_upload_and_decode(reps)?);
            d.set_string_offsets(true)?;
            Some((k, e))
        } else {
            None
        };
        if check {
            check_column(&gpu, d, &zf, c, &mut scratch, "")?;
        }
        timings.push(ColumnTiming {
            name: meta.name.clone(),
            shapes: shapes.clone(),
            decoded,
            compressed: d_compressed,
            kernel_ms: kernel,
            strings,
            bytes_only_ms: bytes_only.map(|(k, _)| k),
        });
        if strings {
            string_decoded += decoded;
            string_kernel_ms += kernel;
        } else {
            total_decoded += decoded;
            total_kernel_ms += kernel;
        }
        outln!(
            "| {} | {} | {} | {:.1} | {:.2} | {:.1} | {:.4} | {:.0} | {:.3} | {:.0} |",
            meta.name,
            meta.column_type,
            shapes,
            decoded / 1e6,
            ratio,
            prepare_ms,
            kernel,
            decoded / kernel / 1e6,
            e2e,
            decoded / e2e / 1e6
        );
        if let Some((k, e)) = bytes_only {
            outln!(
                "| {} (bytes only, no offsets) | {} | {} | {:.1} | {:.2} | | {:.4} | {:.0} | {:.3} | {:.0} |",
                meta.name,
                meta.column_type,
                shapes,
                decoded / 1e6,
                ratio,
                k,
                decoded / k / 1e6,
                e,
                decoded / e / 1e6
            );
        }
    }
    if string_kernel_ms > 0.0 {
        outln!(
            "string columns: {:.1} MB of string bytes (offsets not counted) in {:.3} ms of kernels: {:.0} GB/s",
            string_decoded / 1e6,
            string_kernel_ms,
            string_decoded / string_kernel_ms / 1e6,
        );
    }
    if total_kernel_ms > 0.0 {
        outln!(
            "all numeric columns: {:.1} MB decoded in {:.3} ms of kernels: {:.0} GB/s{}",
            total_decoded / 1e6,
            total_kernel_ms,
            total_decoded / total_kernel_ms / 1e6,
            if check {
                " (bit-identical to the CPU)"
            } else {
                ""
            }
        );
    }
    Ok(timings)
}

/// All row groups of `zf` as record batches, columns decoded on GPU `device` (see
/// [`zipflow_cuda::arrow::read_batches`]).
pub fn read_batches(zf: &ZfFile, device: usize) -> Result<Vec<RecordBatch>> {
    let gpu = Gpu::open(device)?;
    Ok(zipflow_cuda::arrow::read_batches(&gpu, zf)?)
}
