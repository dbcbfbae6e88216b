//! `zipflow bench tpch --engine datafusion|parquet`: the same TPC-H queries through
//! DataFusion, over the zipflow table provider or over Parquet+zstd(3) of the same table.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, anyhow};
use arrow::array::RecordBatch;
use datafusion::common::TableReference;
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use zipflow_datafusion::ZfTable;
use zipflow_format::ZfFile;

/// Where DataFusion reads the table from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The .zf file, through `ZfTable`, with zipflow's fused scan + aggregate.
    Zipflow,
    /// The .zf file, through `ZfTable`, aggregated by DataFusion's own operators.
    ZipflowUnfused,
    /// A Parquet+zstd(3) copy of it, through DataFusion's Parquet reader.
    Parquet,
}

/// Writes the Parquet+zstd(3) copy of `zf` beside it (kept for later runs) and returns its
/// path.
fn parquet_copy(zf: &Path) -> Result<PathBuf> {
    let target = zf.with_extension("zstd3.parquet");
    if target.exists() {
        return Ok(target);
    }
    let file = ZfFile::open(zf)?;
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(3)?))
        .build();
    let tmp = target.with_extension("parquet.tmp");
    let out = std::fs::File::create(&tmp).with_context(|| format!("{}", tmp.display()))?;
    let mut w = ArrowWriter::try_new(out, file.arrow_schema(), Some(props))?;
    for b in file.batches() {
        w.write(&b?)?;
    }
    w.close()?;
    std::fs::rename(&tmp, &target).with_context(|| format!("{}", target.display()))?;
    Ok(target)
}

/// One session reading `path` as the table `lineitem` on `threads` threads.
async fn context(source: Source, path: &Path, threads: usize) -> Result<SessionContext> {
    let config = SessionConfig::new().with_target_partitions(threads);
    let ctx = if source == Source::ZipflowUnfused {
        let ctx = SessionContext::new_with_config(config);
        zipflow_datafusion::register_functions(&ctx);
        ctx
    } else {
        zipflow_datafusion::session(config)
    };
    match source {
        Source::Zipflow | Source::ZipflowUnfused => {
            let table = ZfTable::open(path).map_err(|e| anyhow!("{e}"))?;
            ctx.register_table(TableReference::bare("lineitem"), Arc::new(table))?;
        }
        Source::Parquet => {
            let p = path.to_string_lossy();
            ctx.register_parquet("lineitem", p.as_ref(), ParquetReadOptions::default())
                .await?;
        }
    }
    Ok(ctx)
}

/// Times `queries` (name, SQL over the table `lineitem`) at each thread count and prints a
/// line per query and thread count, as the native engine's bench does.
pub fn run(
    source: Source,
    zf: &Path,
    queries: &[(&str, String)],
    threads: &[usize],
    runs: usize,
) -> Result<()> {
    let path = match source {
        Source::Zipflow | Source::ZipflowUnfused => zf.to_path_buf(),
        Source::Parquet => parquet_copy(zf)?,
    };
    let rows = ZfFile::open(zf)?.num_rows();
    println!("DataFusion over {}", path.display());
    for (qname, text) in queries {
        let (sql, _) = zipflow_datafusion::query::quoted_tables(text)?;
        for &t in threads {
            let t = if t == 0 {
                std::thread::available_parallelism().map_or(1, usize::from)
            } else {
                t
            };
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(t)
                .enable_all()
                .build()?;
            let ctx = runtime.block_on(context(source, &path, t))?;
            let once = || -> Result<Vec<RecordBatch>> {
                runtime.block_on(async { Ok(ctx.sql(&sql).await?.collect().await?) })
            };
            once()?; // warm-up
            let mut times = Vec::with_capacity(runs);
            let cpu_start = super::bench::cpu_seconds();
            for _ in 0..runs {
                let start = Instant::now();
                std::hint::black_box(once()?);
                times.push(start.elapsed().as_secs_f64() * 1e3);
            }
            let cpu = match (cpu_start, super::bench::cpu_seconds()) {
                (Some(s), Some(e)) => format!("{:.1}", (e - s) * 1e3 / runs as f64),
                _ => "-".to_string(),
            };
            times.sort_by(f64::total_cmp);
            let median = times[times.len() / 2];
            println!(
                "{:<6} {:>8} {:>12.2} {:>12.2} {:>14.3e} {:>12}",
                qname,
                t,
                median,
                times[0],
                rows as f64 / (median / 1e3),
                cpu
            );
        }
    }
    Ok(())
}
