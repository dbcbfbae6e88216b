//! The `zipflow` command.
//!
//! Compresses Parquet, CSV and Arrow IPC files into zipflow files and back, shows what is
//! inside a file, and runs the TPC-H demo that generates lineitem in-process, compresses it,
//! verifies the round trip and compares with Parquet+zstd.

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

mod commands;
mod io;
mod out;
mod report;

/// Columnar compression with composable lightweight encodings.
#[derive(Parser, Debug)]
#[command(name = "zipflow", version, about, long_about = None, propagate_version = true,
          after_help = EXIT_STATUS)]
struct Cli {
    /// Print nothing but errors: no progress bars, no reports on standard error (results a
    /// command exists to print, such as `inspect` or `sql`, still go to standard output).
    #[arg(short, long, global = true)]
    quiet: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Compress a Parquet, CSV or Arrow IPC file into a .zf file.
    ///
    /// Each column is cut into chunks of --chunk-rows rows; each chunk gets the plan (tree of
    /// encodings) that is smallest on a sample, unless --plan forces one for the column.
    ///
    /// Memory: one row group of input and its encoded chunks (about twice --chunk-rows times
    /// the width of a row, more for wide string columns), whatever the input's size; with
    /// CSV on standard input, also the first 100,000 lines, read to infer the types.
    Compress(commands::compress::Args),
    /// Decompress a .zf file to Parquet, CSV or Arrow IPC (chosen by the output's extension).
    ///
    /// Memory: one decoded row group; a Parquet output also buffers one Parquet row group
    /// (up to 1,048,576 rows, compressed) before writing it.
    Decompress(commands::decompress::Args),
    /// Show what a .zf file holds: rows, columns, types, plans, sizes, zone maps.
    Inspect(commands::inspect::Args),
    /// GPU information, and decoding benchmarks on the GPU.
    Gpu(commands::gpu::Args),
    /// Generate TPC-H lineitem in-process, compress it, verify the round trip, and compare
    /// sizes and speeds with Parquet+zstd(3).
    ///
    /// Memory does not grow with --sf: a few generated parts (about 45 MB each, one per
    /// thread), one row group and its encoded chunks, a Parquet row group being written, and
    /// the chunks of the .zf file being read back. The table is generated twice
    /// (to compress, then to verify) instead of being kept.
    Tpch(commands::tpch::Args),
    /// Run a SQL query on a .zf file: SELECT ... FROM 'file.zf' WHERE ... GROUP BY ...
    ///
    /// Memory: projections without ORDER BY stream; GROUP BY holds one entry per group,
    /// DISTINCT one per distinct value, and ORDER BY (or the table format) every result row.
    Sql(commands::sql::Args),
    /// Raster bands: compress uint16 GeoTIFF bands, fused NDVI aggregates on them.
    Raster(commands::raster::Args),
    /// Benchmark suites: tpch (Q1 and Q6), text (text plans beside gzip, zstd, bzip2),
    /// selection (plan search against exhaustive search and Parquet), gpu (against nvCOMP),
    /// and SVG charts of saved results (chart).
    Bench(commands::bench::Args),
}

/// The exit statuses, shown by `--help`.
const EXIT_STATUS: &str = "\
Exit status: 0 done; 1 failed (the error is on standard error); 130, 143, 129 stopped by \
SIGINT, SIGTERM, SIGHUP; 141 standard output closed early (e.g. `| head`). However a run \
ends, it leaves no temporary file behind and never a partly written output.";

/// Keeps freed blocks of up to 32 MiB in the process for the next allocation (glibc would map
/// each one afresh and return it on free: a scan's per-chunk buffers then fault in their
/// pages chunk after chunk).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn keep_freed_memory() {
    // SAFETY: mallopt only sets two of glibc's allocation thresholds, before any other
    // thread runs.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 1 << 30);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn keep_freed_memory() {}

fn main() -> ExitCode {
    keep_freed_memory();
    let cli = Cli::parse();
    out::set_quiet(cli.quiet);
    if let Err(e) = out::handle_signals() {
        eprintln!("error: cannot install the signal handlers: {e}");
        return ExitCode::FAILURE;
    }
    let result = match cli.command {
        Command::Compress(a) => commands::compress::run(a),
        Command::Decompress(a) => commands::decompress::run(a),
        Command::Inspect(a) => commands::inspect::run(a),
        Command::Gpu(a) => commands::gpu::run(a),
        Command::Tpch(a) => commands::tpch::run(a),
        Command::Sql(a) => commands::sql::run(a),
        Command::Raster(a) => commands::raster::run(a),
        Command::Bench(a) => commands::bench::run(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if out::is_broken_pipe(&e) => ExitCode::from(out::CLOSED_STDOUT as u8),
        Err(e) => {
            eprintln!("error: {}", one_line(&e));
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes in one line, leaving out a cause whose text the line already holds
/// (library errors name their source in their own message).
fn one_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line.replace('\n', " ")
}

/// An output path given with `-o`, plus `--force`.
#[derive(clap::Args, Debug)]
pub struct Output {
    /// Where to write. Written to a temporary file first, synced and renamed when complete,
    /// so a failed or interrupted run leaves nothing behind. Refused when it is the input.
    /// `-` is standard output where the format streams (see the command's --format).
    #[arg(short, long)]
    pub output: PathBuf,
    /// Overwrite the output if it exists. A symbolic link is refused, with or without
    /// --force: zipflow neither replaces the link nor writes through it.
    #[arg(short, long)]
    pub force: bool,
}
