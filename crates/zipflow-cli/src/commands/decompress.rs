//! `zipflow decompress`.

use crate::Output;
use crate::io::{AtomicFile, TableFormat, TableSink};
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
    let zf = ZfFile::open(&a.input)?;
    if text::is_text(&zf) {
        if a.format.is_some() {
            bail!(
                "{} holds a file's bytes (compressed with --text): --format does not apply",
                a.input.display()
            );
        }
        let (atomic, mut file) = AtomicFile::create(&a.out.output, a.out.force)?;
        let total = zf.num_rows();
        let bar = super::progress_bytes(Some(total), "decompressing", crate::out::quiet());
        text::decompress(&zf, &mut file, |n| bar.set_position(n))?;
        file.flush()?;
        drop(file);
        atomic.commit()?;
        bar.finish_and_clear();
        return Ok(());
    }
    let format = match a.format {
        Some(f) => f,
        None => TableFormat::from_path(&a.out.output)?,
    };
    let schema = zf.arrow_schema();
    let (atomic, file) = AtomicFile::create(&a.out.output, a.out.force)?;
    let mut sink = TableSink::new(file, format, &schema)?;
    let bar = super::progress(Some(zf.num_rows()), "decompressing", crate::out::quiet());
    let gpu_batches = match a.device {
        Device::Gpu => Some(super::gpu::read_batches(&zf, 0)?),
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
        sink.write(&arrow::record_batch::RecordBatch::new_empty(schema.clone()))?;
    }
    sink.finish()?;
    atomic.commit()?;
    bar.finish_and_clear();
    Ok(())
}
