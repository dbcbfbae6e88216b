//! `zipflow bench`: the benchmark suites. `tpch` (TPC-H Q1 and Q6 on a lineitem .zf, at several
//! thread counts) lives here; the others in their own modules.

use crate::out::outln;
use anyhow::{Context, Result, bail};
use std::path::PathBuf;
use std::time::Instant;
use zipflow_compute::{ScanOptions, Table, sql, tpch};
use zipflow_format::{TableWriter, WriteOptions};

/// Arguments of `zipflow bench`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The suite to run.
    #[command(subcommand)]
    pub suite: Suite,
}

/// The benchmark suites.
#[derive(clap::Subcommand, Debug)]
pub enum Suite {
    /// TPC-H Q1 and Q6 on lineitem through the scan, at several thread counts.
    Tpch(TpchArgs),
    /// Text plans against gzip, zstd and bzip2 on the same files (Silesia by default).
    Text(super::bench_text::Args),
    /// Plan selection: cascade search against exhaustive search, Parquet+zstd and snappy, per
    /// TPC-H column; `--calibrate` measures the decode cost table.
    Selection(super::bench_selection::Args),
    /// Fused NDVI on compressed raster bands vs the same kernels on plain bands.
    Ndvi(super::raster::BenchNdviArgs),
    /// Fused SUM over a bit-packed u32 column vs plain, at bit widths 1..32.
    SumCurve(super::raster::SumCurveArgs),
    /// Every TPC-H lineitem column decoded on the GPU beside nvCOMP 6.0 on the same rows
    /// (`--nvcomp`), and fused nested plans against one kernel per primitive, in one run.
    Gpu(super::bench_gpu::Args),
    /// `chardict16` and `chartable` encoding text on the GPU beside the CPU encoder on all
    /// cores, with the GPU's bytes checked against the CPU's.
    GpuEncode(super::bench_gpu_encode::Args),
    /// The real-data suite (`python3 scripts/real_data.py DIR` fetches it) and TPC-H's other
    /// tables: sizes against Parquet+zstd(3) and snappy, decode speed, bit-exact round trips.
    Real(super::bench_real::Args),
    /// SVG charts from saved results: `gpu` (zipflow against nvCOMP) and `queries` (DuckDB
    /// against zipflow), for runs made on another machine.
    Chart(super::bench_chart::Args),
}

/// Runs `zipflow bench`.
pub fn run(a: Args) -> Result<()> {
    match a.suite {
        Suite::Tpch(a) => run_tpch(a),
        Suite::Text(a) => super::bench_text::run(a),
        Suite::Selection(a) => super::bench_selection::run(a),
        Suite::Ndvi(a) => super::raster::bench_ndvi(a),
        Suite::SumCurve(a) => super::raster::bench_sum_curve(a),
        Suite::Gpu(a) => super::bench_gpu::run(a),
        Suite::Real(a) => super::bench_real::run(a),
        Suite::GpuEncode(a) => super::bench_gpu_encode::run(a),
        Suite::Chart(a) => super::bench_chart::run(a),
    }
}

/// Arguments of `zipflow bench tpch`.
#[derive(clap::Args, Debug)]
pub struct TpchArgs {
    /// TPC-H scale factor of the generated lineitem table.
    #[arg(long, default_value_t = 1.0)]
    pub sf: f64,
    /// Read this lineitem .zf instead of generating one (it is written here when missing).
    #[arg(long)]
    pub file: Option<PathBuf>,
    /// Thread counts to measure, comma separated.
    #[arg(long, default_value = "1,2", value_delimiter = ',')]
    pub threads: Vec<usize>,
    /// Queries to run, comma separated.
    #[arg(long, default_value = "Q1,Q6", value_delimiter = ',')]
    pub queries: Vec<String>,
    /// Force a plan for a column of the generated file, e.g.
    /// --plan 'l_returnflag=strdict(codes: bitpack)' (repeatable).
    #[arg(long = "plan")]
    pub plans: Vec<String>,
    /// Timed runs per query and thread count (the median is reported).
    #[arg(long, default_value_t = 7)]
    pub runs: usize,
    /// Which engine runs the queries: native (zipflow's own scan), datafusion (DataFusion
    /// over the zipflow table provider, with zipflow's fused scan + aggregate),
    /// datafusion-unfused (the same without the fused aggregate: DataFusion's operators
    /// over zipflow's scan) or parquet (DataFusion over a Parquet+zstd(3) copy of the file,
    /// written beside it).
    #[arg(long, value_enum, default_value = "native")]
    pub engine: BenchEngine,
}

/// The engines `zipflow bench tpch` can time.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum BenchEngine {
    /// zipflow's fused scan.
    Native,
    /// DataFusion over the .zf file, with zipflow's fused scan + aggregate.
    Datafusion,
    /// DataFusion's own operators over the .zf file's scan.
    DatafusionUnfused,
    /// DataFusion over Parquet+zstd(3).
    Parquet,
    /// zipflow's GPU query path (`zipflow sql --device gpu`) beside the native engine on all
    /// cores: the host's preparation (chunks checked and parsed into pinned memory, kernels
    /// compiled), the first run, and the median of warm runs (each copies the compressed
    /// bytes to the device, decodes them and runs the query kernel).
    Gpu,
}

/// `zipflow bench tpch --engine gpu`: each query on the GPU (cold, then warm runs) and on the
/// CPU with all cores, the answers compared.
fn bench_gpu_queries(path: &std::path::Path, a: &TpchArgs) -> Result<()> {
    let table = Table::open(path).with_context(|| format!("opening {}", path.display()))?;
    let name = path.to_string_lossy().into_owned();
    let start = Instant::now();
    let gpu = zipflow_cuda::Gpu::open(0)?;
    outln!(
        "TPC-H on {} ({} rows); {} (opened in {:.0} ms); median of {} runs",
        name,
        table.file().num_rows(),
        gpu.info(),
        start.elapsed().as_secs_f64() * 1e3,
        a.runs
    );
    outln!(
        "{:<6} {:>11} {:>10} {:>10} {:>10} {:>10} {:>10} {:>11} {:>7} {:>6}",
        "query",
        "prepare ms",
        "first ms",
        "decode ms",
        "warm ms",
        "cpu ms",
        "cpu/gpu",
        "MB to GPU",
        "GB/s",
        "equal"
    );
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    for (qname, text) in [("Q1", tpch::q1(&name)), ("Q6", tpch::q6(&name))] {
        if !a.queries.iter().any(|x| x.eq_ignore_ascii_case(qname)) {
            continue;
        }
        let q = sql::plan(&text, &table.schema()?)?;
        let t = Instant::now();
        let query = zipflow_cuda::query::GpuQuery::new(&table, &q)?;
        let mut prepared = query.prepare(&gpu, &table)?;
        let prepare = t.elapsed().as_secs_f64() * 1e3;
        let t = Instant::now();
        let first = prepared.run(&q)?;
        let first_ms = t.elapsed().as_secs_f64() * 1e3;
        let mut warm = Vec::with_capacity(a.runs);
        for _ in 0..a.runs {
            let t = Instant::now();
            std::hint::black_box(prepared.run(&q)?);
            warm.push(t.elapsed().as_secs_f64() * 1e3);
        }
        let mut decode = Vec::with_capacity(a.runs);
        for _ in 0..a.runs {
            let t = Instant::now();
            prepared.decode()?;
            decode.push(t.elapsed().as_secs_f64() * 1e3);
        }
        let opts = ScanOptions::default();
        let cpu_answer = table.run(&q, &opts)?;
        let mut cpu = Vec::with_capacity(a.runs);
        for _ in 0..a.runs {
            let t = Instant::now();
            std::hint::black_box(table.run(&q, &opts)?);
            cpu.push(t.elapsed().as_secs_f64() * 1e3);
        }
        let (warm, cpu) = (median(warm), median(cpu));
        let bytes = prepared.compressed_bytes() as f64;
        outln!(
            "{:<6} {:>11.1} {:>10.1} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>11.1} {:>7.1} {:>6}",
            qname,
            prepare,
            first_ms,
            median(decode),
            warm,
            cpu,
            cpu / warm,
            bytes / 1e6,
            bytes / warm / 1e6,
            if first == cpu_answer { "yes" } else { "NO" }
        );
        if first != cpu_answer {
            bail!("{qname}: the GPU's answer differs from the CPU's");
        }
    }
    Ok(())
}

/// Runs `zipflow bench tpch`.
fn run_tpch(a: TpchArgs) -> Result<()> {
    if a.runs == 0 {
        bail!("--runs must be at least 1");
    }
    let tmp;
    let path = match &a.file {
        Some(p) if p.exists() => p.clone(),
        other => {
            let p = match other {
                Some(p) => p.clone(),
                None => {
                    tmp = tempfile_dir()?;
                    tmp.join(format!("lineitem-sf{}.zf", a.sf))
                }
            };
            let start = Instant::now();
            let batches = super::tpch::generate_lineitem(a.sf);
            let Some(first) = batches.first() else {
                bail!("generated no rows at SF {}", a.sf);
            };
            let mut w = TableWriter::create(
                &p,
                first.schema(),
                WriteOptions {
                    overwrite: true,
                    plans: super::parse_plans(&a.plans)?,
                    chooser: Some(zipflow_select::Chooser::shared(Default::default())),
                    ..Default::default()
                },
            )?;
            for b in &batches {
                w.write(b)?;
            }
            let s = w.finish()?;
            if !crate::out::quiet() {
                eprintln!(
                    "generated and compressed lineitem SF {} ({} rows, {:.1} MB) in {:.1} s",
                    a.sf,
                    s.rows,
                    s.bytes as f64 / 1e6,
                    start.elapsed().as_secs_f64()
                );
            }
            p
        }
    };
    if a.engine == BenchEngine::Gpu {
        return bench_gpu_queries(&path, &a);
    }
    if a.engine != BenchEngine::Native {
        let source = match a.engine {
            BenchEngine::Parquet => super::bench_df::Source::Parquet,
            BenchEngine::DatafusionUnfused => super::bench_df::Source::ZipflowUnfused,
            _ => super::bench_df::Source::Zipflow,
        };
        let queries: Vec<(&str, String)> =
            [("Q1", tpch::q1("lineitem")), ("Q6", tpch::q6("lineitem"))]
                .into_iter()
                .filter(|(q, _)| a.queries.iter().any(|x| x.eq_ignore_ascii_case(q)))
                .collect();
        return super::bench_df::run(source, &path, &queries, &a.threads, a.runs);
    }
    let table = Table::open(&path).with_context(|| format!("opening {}", path.display()))?;
    let name = path.to_string_lossy().into_owned();
    outln!(
        "TPC-H on {} ({} rows), median of {} runs",
        name,
        table.file().num_rows(),
        a.runs
    );
    outln!(
        "{:<6} {:>8} {:>12} {:>12} {:>14} {:>12}",
        "query",
        "threads",
        "median ms",
        "min ms",
        "rows/s",
        "cpu ms/run"
    );
    for (qname, text) in [("Q1", tpch::q1(&name)), ("Q6", tpch::q6(&name))] {
        if !a.queries.iter().any(|x| x.eq_ignore_ascii_case(qname)) {
            continue;
        }
        let q = sql::plan(&text, &table.schema()?)?;
        for &threads in &a.threads {
            let opts = ScanOptions {
                threads,
                reference: false,
            };
            table.run(&q, &opts)?; // warm-up
            let mut times = Vec::with_capacity(a.runs);
            let cpu_start = cpu_seconds();
            for _ in 0..a.runs {
                let start = Instant::now();
                std::hint::black_box(table.run(&q, &opts)?);
                times.push(start.elapsed().as_secs_f64() * 1e3);
            }
            let cpu = match (cpu_start, cpu_seconds()) {
                (Some(s), Some(e)) => format!("{:.1}", (e - s) * 1e3 / a.runs as f64),
                _ => "-".to_string(),
            };
            times.sort_by(f64::total_cmp);
            let median = times[times.len() / 2];
            outln!(
                "{:<6} {:>8} {:>12.2} {:>12.2} {:>14.3e} {:>12}",
                qname,
                threads,
                median,
                times[0],
                table.file().num_rows() as f64 / (median / 1e3),
                cpu
            );
        }
    }
    Ok(())
}

/// CPU time (user + system, all threads) this process has used, from `/proc/self/stat`:
/// unlike wall time it does not grow when other processes compete for the cores. `None`
/// where `/proc` is missing.
pub(super) fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may hold spaces) start at field 3.
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = f.get(11)?.parse().ok()?;
    let stime: f64 = f.get(12)?.parse().ok()?;
    // Clock ticks are 1/100 s on Linux unless the kernel was built otherwise.
    Some((utime + stime) / 100.0)
}

fn tempfile_dir() -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("zipflow-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
