//! Side-by-side benchmark: zipflow vs Vortex 0.90 (default compressor) vs Parquet+zstd(3),
//! on the same TPC-H lineitem data in the same run.
//!
//! Generates lineitem in-process at `--sf`, keeps the 12 main columns (all but
//! l_linenumber, l_commitdate, l_receiptdate, l_shipinstruct), compresses them with each
//! system, checks every value comes back, and times single-thread decode of the whole table:
//! median of `--runs` passes, reported as plain bytes per second (decimals as 8-byte
//! integers, dates as 4 bytes, strings as bytes + 4-byte offsets).
//!
//! ```sh
//! cd bench/vortex-compare && cargo run --release -- --sf 1
//! ```
//!
//! A standalone crate outside the zipflow workspace; CI never builds it. Building it needs
//! libclang (`apt-get install libclang1-14` on Debian 12) for a build script under vortex-io.

mod data;
mod parquet_zstd;
mod timing;
mod vx;
mod zipflow;

use anyhow::{Context, Result, bail};
use arrow::array::{Array, ArrayRef};
use arrow::record_batch::RecordBatch;
use clap::Parser;
use std::time::Instant;
use timing::Timing;

/// Command-line arguments.
#[derive(Parser, Debug)]
#[command(about = "zipflow vs Vortex 0.90 vs Parquet+zstd(3) on TPC-H lineitem, 12 columns")]
struct Args {
    /// TPC-H scale factor (1 = 6 million lineitem rows).
    #[arg(long, default_value_t = 1.0)]
    sf: f64,
    /// Timed passes per measurement; the median is reported.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// zipflow rows per chunk.
    #[arg(long, default_value_t = 65_536)]
    chunk_rows: usize,
}

fn main() -> Result<()> {
    let args = Args::parse();
    if !(args.sf > 0.0 && args.sf <= 100.0) {
        bail!("--sf must be in (0, 100], got {}", args.sf);
    }

    let t = Instant::now();
    let batches = data::generate_lineitem(args.sf)?;
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    let Some(schema) = batches.first().map(RecordBatch::schema) else {
        bail!("no rows generated");
    };
    let plain = data::plain_sizes(&batches);
    let plain_total: u64 = plain.iter().sum();
    eprintln!(
        "generated lineitem SF {}: {rows} rows in {:.1} s",
        args.sf,
        t.elapsed().as_secs_f64()
    );
    let originals: Vec<ArrayRef> = (0..schema.fields().len())
        .map(|c| {
            let parts: Vec<&dyn Array> = batches.iter().map(|b| b.column(c).as_ref()).collect();
            arrow::compute::concat(&parts)
        })
        .collect::<Result<_, _>>()?;

    eprintln!("zipflow ...");
    let dir = std::env::temp_dir().join(format!("vortex-compare-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("lineitem.zf");
    let zf = zipflow::run(&batches, &originals, &path, args.chunk_rows, args.runs);
    // Best-effort cleanup: the result (or its error) matters more than a leftover temp file.
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_dir(&dir);
    let zf = zf?;
    drop(originals);

    eprintln!("Parquet+zstd(3) ...");
    let pq = parquet_zstd::run(&batches, rows, args.chunk_rows, args.runs)?;

    eprintln!("Vortex ...");
    let schema = batches
        .first()
        .map(|b| b.schema())
        .context("no batches generated")?;
    let vx = vx::run(&schema, &batches, args.runs)?;
    drop(batches);

    let zf_total: u64 = zf.column_bytes.iter().sum();
    println!(
        "TPC-H lineitem SF {}: {rows} rows, 12 columns, plain {:.1} MB; decode on 1 thread, \
         median of {} passes over the whole table, GB/s = plain bytes / s",
        args.sf,
        mb(plain_total),
        args.runs
    );
    println!();
    println!("| system | size (MB) | ratio | decode (GB/s) | CPU/wall |");
    println!("| --- | ---: | ---: | ---: | ---: |");
    let row = |name: &str, size: u64, timing: &Timing| {
        println!(
            "| {name} | {:.1} | {:.2} | {:.2} | {} |",
            mb(size),
            plain_total as f64 / size.max(1) as f64,
            timing.gbps(plain_total),
            timing
                .cpu_per_wall
                .map_or_else(|| "-".to_string(), |r| format!("{r:.2}"))
        );
    };
    row(
        "zipflow, into reused buffers (size: chunk payloads)",
        zf_total,
        &zf.reused,
    );
    row(
        "zipflow, to Arrow arrays in recycled buffers (size: chunk payloads)",
        zf_total,
        &zf.to_arrow_pooled,
    );
    row(
        "zipflow, to fresh Arrow arrays (size: chunk payloads)",
        zf_total,
        &zf.to_arrow,
    );
    row(
        "Vortex 0.90 file, default write strategy, scan to Arrow (size: whole file)",
        vx.file_bytes,
        &vx.file_to_arrow,
    );
    row(
        "Vortex 0.90 arrays, BtrBlocksCompressor per generated batch, to Arrow (size: nbytes)",
        vx.array_bytes,
        &vx.arrays_to_arrow,
    );
    row(
        &format!(
            "Parquet+zstd(3), arrow-rs 60, to Arrow in {}-row batches (size: whole file)",
            args.chunk_rows
        ),
        pq.file_bytes,
        &pq.to_arrow,
    );
    println!();
    println!(
        "zipflow file with footer and zone maps: {:.1} MB",
        mb(zf.file_bytes)
    );
    println!();

    println!(
        "| column | type | plain (MB) | zipflow (MB) | ratio | Vortex file (MB) | ratio | \
         zipflow/Vortex | Parquet+zstd(3) (MB) |"
    );
    println!("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for (c, field) in schema.fields().iter().enumerate() {
        let p = plain[c];
        let z = zf.column_bytes[c];
        let v = vx.column_bytes.get(c).copied().unwrap_or_default();
        let q = pq.column_bytes[c];
        println!(
            "| {} | {} | {:.1} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
            field.name(),
            field.data_type(),
            mb(p),
            mb(z),
            p as f64 / z.max(1) as f64,
            mb(v),
            p as f64 / v.max(1) as f64,
            z as f64 / v.max(1) as f64,
            mb(q),
        );
    }
    let v_total: u64 = vx.column_bytes.iter().sum();
    let q_total: u64 = pq.column_bytes.iter().sum();
    println!(
        "| all 12 | | {:.1} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
        mb(plain_total),
        mb(zf_total),
        plain_total as f64 / zf_total.max(1) as f64,
        mb(v_total),
        plain_total as f64 / v_total.max(1) as f64,
        zf_total as f64 / v_total.max(1) as f64,
        mb(q_total),
    );
    println!();
    println!(
        "Per column, to Arrow on 1 thread (zipflow: recycled buffers; Vortex: the column's \
         batches compressed alone), median of {} passes",
        args.runs
    );
    println!();
    println!(
        "| column | zipflow (ms) | Vortex arrays (ms) | zipflow GB/s | Vortex GB/s | \
         Vortex time / zipflow time |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: |");
    let (mut zt, mut vt) = (0.0, 0.0);
    for (c, field) in schema.fields().iter().enumerate() {
        let (z, v) = (&zf.column_to_arrow[c], &vx.column_to_arrow[c]);
        zt += z.median_secs;
        vt += v.median_secs;
        println!(
            "| {} | {:.1} | {:.1} | {:.2} | {:.2} | {:.2} |",
            field.name(),
            z.median_secs * 1e3,
            v.median_secs * 1e3,
            z.gbps(plain[c]),
            v.gbps(plain[c]),
            v.median_secs / z.median_secs.max(1e-12),
        );
    }
    println!(
        "| sum | {:.1} | {:.1} | {:.2} | {:.2} | {:.2} |",
        zt * 1e3,
        vt * 1e3,
        plain_total as f64 / zt.max(1e-12) / 1e9,
        plain_total as f64 / vt.max(1e-12) / 1e9,
        vt / zt.max(1e-12),
    );
    Ok(())
}

/// Bytes in MB (10^6).
fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1e6
}
