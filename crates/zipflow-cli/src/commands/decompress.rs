//! `zipflow decompress`.

use crate::Output;
use crate::io::{AtomicFile, TableFormat, TableSink};
use crate::out::Stdout;
use anyhow::{Result, bail};
use std::io::Write;
use std::path::PathBuf;
use zipflow_format::{ZfFile, text};

/// Arguments of `zipflow decompress`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The .zf file.
    pub input: PathBuf,
    #[command(flatten)]
    pub out: Output,
    /// Output format; by default from the output's extension (.parquet, .csv, .arrow).
    /// Files compressed with --text come back as their exact bytes, whatever the extension.
    /// With `-o -` the table goes to standard output (Arrow as an IPC stream) and --format
    /// is needed (text-mode files need none).
    #[arg(long, value_enum)]
    pub format: Option<TableFormat>,
    /// Where columns are decoded: `cpu`, or `gpu` (GPU 0; columns whose plans the GPU does not
    /// decode, such as the character coders, and null masks stay on the CPU).
    #[arg(long, value_enum, default_value_t = Device::Cpu)]
    pub device: Device,
}

/// A decoder device.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Device {
    /// The CPU, all cores.
    Cpu,
    /// NVIDIA GPU 0.
    Gpu,
}

/// Runs `zipflow decompress`.
pub fn run(a: Args) -> Result<()> {
    crate::io::check_output(&a.out.output, &[&a.input])?;
    let zf = ZfFile::open(&a.input)?;
    let to_stdout = crate::io::is_std(&a.out.output);
    if text::is_text(&zf) {
        if a.format.is_some() {
            bail!(
                "{} holds a file's bytes (compressed with --text): --format does not apply",
                a.input.display()
            );
        }
        let bar = super::progress_bytes(Some(zf.num_rows()), "decompressing", false);
        if to_stdout {
            let mut out = Stdout::new();
            text::decompress(&zf, &mut out, |n| bar.set_position(n))?;
            out.flush()?;
        } else {
            let (atomic, mut file) = AtomicFile::create(&a.out.output, a.out.force)?;
            text::decompress(&zf, &mut file, |n| bar.set_position(n))?;
            drop(file);
            atomic.commit()?;
        }
        bar.finish_and_clear();
        return Ok(());
    }
    let format = match a.format {
        Some(f) => f,
        None => TableFormat::from_path(&a.out.output)?,
    };
    if to_stdout {
        let sink = TableSink::new(Stdout::new(), format, &zf.arrow_schema(), true)?;
        write_table(&a, &zf, sink)?;
    } else {
        let (atomic, file) = AtomicFile::create(&a.out.output, a.out.force)?;
        let sink = TableSink::new(file, format, &zf.arrow_schema(), false)?;
        write_table(&a, &zf, sink)?;
        atomic.commit()?;
    }
    Ok(())
}

/// Decodes every row group of `zf` into `sink` and completes it.
fn write_table<W: Write + Send>(a: &Args, zf: &ZfFile, mut sink: TableSink<W>) -> Result<()> {
    let bar = super::progress(Some(zf.num_rows()), "decompressing", false);
    let gpu_batches = match a.device {
        Device::Gpu => Some(super::gpu::read_batches(zf, 0)?),
        Device::Cpu => None,
    };
    let batches: Box<dyn Iterator<Item = Result<_>>> = match gpu_batches {
        Some(b) => Box::new(b.into_iter().map(Ok)),
        None => Box::new(zf.batches().map(|b| b.map_err(anyhow::Error::from))),
    };
    for batch in batches {
        let batch = batch?;
        sink.write(&batch)?;
        bar.inc(batch.num_rows() as u64);
    }
    if zf.num_chunks() == 0 {
        // An empty table still gets its header (CSV) and schema (Parquet, Arrow).
        sink.write(&arrow::record_batch::RecordBatch::new_empty(
            zf.arrow_schema(),
        ))?;
    }
    sink.finish()?;
    bar.finish_and_clear();
    Ok(())
}
