//! `zipflow compress`.

use crate::Output;
use crate::io::{self, TableFormat};
use crate::report::{Table, bytes, ratio};
use anyhow::{Context, Result};
use std::path::PathBuf;
use std::time::Instant;
use zipflow_format::table::{TableWriter, WriteOptions};

/// Arguments of `zipflow compress`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Input table: .parquet, .csv or .arrow (Arrow IPC file or stream).
    pub input: PathBuf,
    #[command(flatten)]
    pub out: Output,
    /// Force the plan of a column, e.g. --plan 'l_orderkey=delta | for | bitpack'.
    /// Repeatable. Plan grammar: docs/plans.md; `zipflow inspect` shows the plans chosen.
    #[arg(long = "plan", value_name = "COLUMN=PLAN")]
    pub plans: Vec<String>,
    /// Rows per chunk: the unit of random access, zone maps and plan choice.
    #[arg(long, default_value_t = 65_536, value_parser = clap::value_parser!(u32).range(1024..=16_777_216))]
    pub chunk_rows: u32,
    /// Input format; by default from the file extension.
    #[arg(long, value_enum)]
    pub format: Option<TableFormat>,
    /// CSV field delimiter.
    #[arg(long, default_value_t = ',')]
    pub delimiter: char,
    /// No progress bar.
    #[arg(short, long)]
    pub quiet: bool,
}

/// Runs `zipflow compress`.
pub fn run(a: Args) -> Result<()> {
    let format = match a.format {
        Some(f) => f,
        None => TableFormat::from_path(&a.input)?,
    };
    let delimiter = u8::try_from(a.delimiter)
        .ok()
        .filter(u8::is_ascii)
        .context("--delimiter must be one ASCII character")?;
    let plans = super::parse_plans(&a.plans)?;
    io::check_output_dir(&a.out.output)?;
    let input = io::open(&a.input, format, delimiter)?;
    let schema = input.reader.schema();
    let opts = WriteOptions {
        chunk_rows: a.chunk_rows as usize,
        plans,
        overwrite: a.out.force,
    };
    let start = Instant::now();
    let mut writer = TableWriter::create(&a.out.output, schema, opts)?;
    let bar = super::progress(input.rows, "compressing", a.quiet);
    for batch in input.reader {
        let batch = batch.with_context(|| format!("{}: reading input", a.input.display()))?;
        writer.write(&batch)?;
        bar.inc(batch.num_rows() as u64);
    }
    let summary = writer.finish()?;
    bar.finish_and_clear();
    let secs = start.elapsed().as_secs_f64();
    let in_size = std::fs::metadata(&a.input).map(|m| m.len()).unwrap_or(0);

    let mut t = Table::new(&["column", "type", "plan", "size", "plain", "ratio"], 3);
    let (mut plain, mut packed) = (0u64, 0u64);
    for c in &summary.columns {
        plain += c.plain_bytes;
        packed += c.compressed_bytes;
        t.row(vec![
            c.name.clone(),
            c.column_type.to_string(),
            c.plan_summary(),
            bytes(c.compressed_bytes),
            bytes(c.plain_bytes),
            ratio(c.plain_bytes, c.compressed_bytes),
        ]);
    }
    print!("{}", t.render());
    println!(
        "{} rows, {} column{}: {} ({}) -> {} ({}; {} plain, ratio {}) in {secs:.2} s",
        summary.rows,
        summary.columns.len(),
        if summary.columns.len() == 1 { "" } else { "s" },
        a.input.display(),
        bytes(in_size),
        a.out.output.display(),
        bytes(summary.bytes),
        bytes(plain),
        ratio(plain, packed),
    );
    Ok(())
}
