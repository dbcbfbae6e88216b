//! `zipflow compress`.

use crate::Output;
use crate::io::{self, TableFormat};
use crate::out::{out, outln};
use crate::report::{Table, bytes, ratio};
use anyhow::{Context, Result, bail};
use std::path::PathBuf;
use std::time::Instant;
use zipflow_core::Plan;
use zipflow_format::table::{TableWriter, WriteOptions};
use zipflow_format::text::{self, TextOptions};

/// Arguments of `zipflow compress`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Input table: .parquet, .csv or .arrow (Arrow IPC file or stream); with --text, any file.
    /// `-` reads standard input: CSV or an Arrow IPC stream (with --format), or any bytes
    /// with --text.
    pub input: PathBuf,
    /// Compress the input's bytes as they are (any file: text, logs, binary) with the text
    /// plans, in chunks of 16 MiB. `zipflow decompress` gives back the exact bytes.
    #[arg(long)]
    pub text: bool,
    #[command(flatten)]
    pub out: Output,
    /// Force the plan of a column, e.g. --plan 'l_orderkey=delta | for | bitpack'.
    /// Repeatable. With --text, just the plan, e.g. --plan 'words(codes: ans)'.
    /// Plan grammar: docs/plans.md; `zipflow inspect` shows the plans chosen.
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
    /// CSV fields read as nulls besides empty ones, comma-separated, e.g. `NA,NULL,-`
    /// (matched whole and case-sensitively, in every column; they also count as nulls when
    /// column types are inferred, so a number column with `NA` stays numbers).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub null_values: Vec<String>,
    /// What chosen plans optimise: smallest, balanced (size and decode speed), fastest, or gpu
    /// (the smallest plan the GPU decodes in parallel: no `ans`, `fsst`, character coders or
    /// `blockpack`, `hipatch` only at the top of a numeric plan or under `for`, and `radix`
    /// only there or at the top of a string's codes or counts; for files read with `--device
    /// gpu` or `zipflow gpu`).
    #[arg(long, default_value = "balanced", value_parser = ["smallest", "balanced", "fastest", "gpu"])]
    pub objective: String,
    /// Choose the smallest plan whose estimated decode speed is at least this many GB/s
    /// (overrides --objective).
    #[arg(long, value_name = "GBS")]
    pub min_decode_gbs: Option<f64>,
}

/// The selection options `--objective` and `--min-decode-gbs` ask for.
pub fn select_options(
    objective: &str,
    min_gbs: Option<f64>,
) -> Result<zipflow_select::SelectOptions> {
    let objective = match min_gbs {
        Some(x) if x.is_finite() && x > 0.0 => zipflow_select::Objective::MinDecodeGbs(x),
        Some(x) => bail!("--min-decode-gbs must be a positive number, got {x}"),
        None => objective.parse()?,
    };
    Ok(zipflow_select::SelectOptions {
        objective,
        ..zipflow_select::SelectOptions::default()
    })
}

/// Runs `zipflow compress`.
pub fn run(a: Args) -> Result<()> {
    if a.text {
        return run_text(a);
    }
    let format = match a.format {
        Some(f) => f,
        None => TableFormat::from_path(&a.input)?,
    };
    let delimiter = u8::try_from(a.delimiter)
        .ok()
        .filter(u8::is_ascii)
        .context("--delimiter must be one ASCII character")?;
    let plans = super::parse_plans(&a.plans)?;
    check_output(&a)?;
    let csv = io::CsvOptions {
        delimiter,
        nulls: a.null_values.clone(),
    };
    let input = io::open(&a.input, format, &csv)?;
    let schema = input.reader.schema();
    let opts = WriteOptions {
        chunk_rows: a.chunk_rows as usize,
        plans,
        overwrite: a.out.force,
        chooser: Some(zipflow_select::Chooser::shared(select_options(
            &a.objective,
            a.min_decode_gbs,
        )?)),
        ..WriteOptions::default()
    };
    let start = Instant::now();
    let mut writer = TableWriter::create(&a.out.output, schema, opts)?;
    let bar = super::progress(input.rows, "compressing", crate::out::quiet());
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
    out!("{}", t.render());
    outln!(
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

/// Refuses an output that cannot be written: standard output (a .zf file is renamed into
/// place when complete), the input itself, a symbolic link, a missing directory.
fn check_output(a: &Args) -> Result<()> {
    if io::is_std(&a.out.output) {
        bail!(
            "-o -: a .zf file cannot go to standard output (it is written under a temporary \
             name and renamed when complete); name a file"
        );
    }
    io::check_output(&a.out.output, &[&a.input])?;
    io::check_output_dir(&a.out.output)
}

/// `zipflow compress --text`.
fn run_text(a: Args) -> Result<()> {
    let plan = match a.plans.as_slice() {
        [] => None,
        [p] => {
            // Accept `PLAN` and `text=PLAN`.
            let text = p
                .split_once('=')
                .filter(|(c, _)| c.trim() == text::TEXT_COLUMN)
                .map_or(p.as_str(), |(_, t)| t);
            Some(text.parse::<Plan>().context("--plan")?)
        }
        _ => bail!("--text takes one --plan (the plan of the whole file)"),
    };
    if a.format.is_some() {
        bail!("--format does not apply with --text: the input is read as bytes");
    }
    check_output(&a)?;
    let (input, in_size): (Box<dyn std::io::Read>, _) = if io::is_std(&a.input) {
        (Box::new(std::io::stdin().lock()), None)
    } else {
        let file = std::fs::File::open(&a.input)
            .with_context(|| format!("{}: cannot open", a.input.display()))?;
        let size = file.metadata().map(|m| m.len()).ok();
        (Box::new(file), size)
    };
    let opts = TextOptions {
        plan,
        overwrite: a.out.force,
        chooser: Some(zipflow_select::Chooser::shared(select_options(
            &a.objective,
            a.min_decode_gbs,
        )?)),
        ..TextOptions::default()
    };
    let start = Instant::now();
    let bar = super::progress_bytes(in_size, "compressing", crate::out::quiet());
    let summary = text::compress(std::io::BufReader::new(input), &a.out.output, &opts, |n| {
        bar.set_position(n)
    })
    .with_context(|| format!("{}", a.input.display()))?;
    bar.finish_and_clear();
    let secs = start.elapsed().as_secs_f64();
    let Some(c) = summary.columns.first() else {
        bail!("internal: a text table without its column");
    };
    outln!(
        "{} ({}) -> {} ({}), ratio {} (size {:.3} of the input), plan {}, {:.0} MB/s",
        a.input.display(),
        bytes(c.plain_bytes),
        a.out.output.display(),
        bytes(summary.bytes),
        ratio(c.plain_bytes, c.compressed_bytes),
        c.compressed_bytes as f64 / c.plain_bytes.max(1) as f64,
        c.plan_summary(),
        c.plain_bytes as f64 / secs / 1e6,
    );
    Ok(())
}
