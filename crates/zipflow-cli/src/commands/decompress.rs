//! `zipflow decompress`.

use crate::Output;
use crate::io::{AtomicFile, TableFormat, TableSink};
use anyhow::Result;
use std::path::PathBuf;
use zipflow_format::ZfFile;

/// Arguments of `zipflow decompress`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The .zf file.
    pub input: PathBuf,
    #[command(flatten)]
    pub out: Output,
    /// Output format; by default from the output's extension (.parquet, .csv, .arrow).
    #[arg(long, value_enum)]
    pub format: Option<TableFormat>,
    /// No progress bar.
    #[arg(short, long)]
    pub quiet: bool,
}

/// Runs `zipflow decompress`.
pub fn run(a: Args) -> Result<()> {
    let format = match a.format {
        Some(f) => f,
        None => TableFormat::from_path(&a.out.output)?,
    };
    let zf = ZfFile::open(&a.input)?;
    let schema = zf.arrow_schema();
    let (atomic, file) = AtomicFile::create(&a.out.output, a.out.force)?;
    let mut sink = TableSink::new(file, format, &schema)?;
    let bar = super::progress(Some(zf.num_rows()), "decompressing", a.quiet);
    for batch in zf.batches() {
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
