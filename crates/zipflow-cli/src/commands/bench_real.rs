//! `zipflow bench real`: the real-data suite, size and decode speed against Parquet, one run.
//!
//! The suite is a directory made by `python3 scripts/real_data.py DIR` (public tables shipped
//! inside PyPI packages, as Parquet, with the sizes pyarrow writes in `manifest.tsv`), plus
//! TPC-H's seven tables besides lineitem, generated in process. Per table: Parquet+zstd(3) and
//! Parquet+snappy as pyarrow and arrow-rs write them, zipflow under each objective, single-thread
//! decode to Arrow of zipflow and of arrow-rs reading Parquet+zstd(3) (both from files in the
//! page cache, medians), and whether every column came back bit for bit.

use crate::out::{out, outln};
use crate::report::{Table, bytes};
use anyhow::{Context, Result, bail};
use arrow::array::{Array, ArrayRef, RecordBatch};
use arrow::datatypes::{DataType, SchemaRef};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;
use zipflow_format::ZfFile;
use zipflow_format::table::{FileSummary, TableWriter, WriteOptions};

/// Arguments of `zipflow bench real`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The suite's directory, made by `python3 scripts/real_data.py DIR` (NAME.parquet per
    /// table and manifest.tsv).
    #[arg(long, default_value = "target/real-data")]
    pub dir: PathBuf,
    /// Only these tables (names from the manifest, or TPC-H table names).
    #[arg(long, value_delimiter = ',')]
    pub tables: Vec<String>,
    /// Scale factor of the TPC-H tables besides lineitem; 0 leaves them out.
    #[arg(long, default_value_t = 1.0)]
    pub tpch_sf: f64,
    /// The objectives to compress with; the first two are held to the bars (at most 1.0x and
    /// 1.05x Parquet+zstd(3)).
    #[arg(long, value_delimiter = ',', default_values_t = ["smallest".to_string(), "balanced".to_string(), "fastest".to_string()])]
    pub objectives: Vec<String>,
    /// Decode runs per file; the median is reported.
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// Also print every column: its size per objective and in Parquet+zstd(3), and its plan.
    #[arg(long)]
    pub columns: bool,
    /// Rows per chunk (and per Parquet batch read back).
    #[arg(long, default_value_t = 65_536)]
    pub chunk_rows: usize,
}

/// One table of the suite.
struct Source {
    name: String,
    /// Where its rows come from, for the report.
    origin: String,
    batches: Vec<RecordBatch>,
    /// Sizes pyarrow writes with zstd(3) and with snappy, when the manifest has them.
    pyarrow: Option<(u64, u64)>,
}

/// What one table measured.
struct Measured {
    rows: usize,
    cols: usize,
    /// The reference: the smaller of pyarrow's and arrow-rs's Parquet+zstd(3).
    zstd: u64,
    snappy: u64,
    /// Per objective: the file and what writing it produced.
    zf: Vec<FileSummary>,
    zf_decode_s: f64,
    pq_decode_s: f64,
    /// Columns that did not come back bit for bit, with why.
    mismatches: Vec<String>,
}

/// Runs `zipflow bench real`.
pub fn run(a: Args) -> Result<()> {
    if a.objectives.is_empty() {
        bail!("--objectives needs at least one objective");
    }
    for o in &a.objectives {
        super::compress::select_options(o, None).with_context(|| format!("--objectives {o}"))?;
    }
    if !(0.0..=10.0).contains(&a.tpch_sf) || a.chunk_rows < 1024 {
        bail!("--tpch-sf must be in [0, 10] and --chunk-rows at least 1024");
    }
    let manifest = read_manifest(&a.dir)?;
    let mut names = suite_names(&a, &manifest)?;
    if !a.tables.is_empty() {
        let unknown: Vec<&String> = a.tables.iter().filter(|t| !names.contains(t)).collect();
        if let Some(t) = unknown.first() {
            bail!("no table `{t}` in the suite (tables: {})", names.join(", "));
        }
        names.retain(|n| a.tables.contains(n));
    }
    let work = tempfile::tempdir().context("creating a scratch directory")?;
    let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build()?;

    let mut head = vec!["table", "rows", "cols", "pq zstd(3)", "pq snappy"];
    let titles: Vec<String> = a.objectives.iter().map(|o| format!("zf {o}")).collect();
    head.extend(titles.iter().map(String::as_str));
    let ratio_titles: Vec<String> = a.objectives.iter().map(|o| format!("x {o}")).collect();
    head.extend(ratio_titles.iter().map(String::as_str));
    head.extend(["decode zf ms", "decode pq ms", "speedup", "bit-exact"]);
    let mut report = Table::new(&head, 1);
    let first = format!("zf {}", a.objectives[0]);
    let mut column_report = Table::new(
        &["table", "column", "type", "pq zstd(3)", &first, "x", "plan"],
        3,
    );
    let mut totals = Totals::new(a.objectives.len());
    for name in &names {
        let t = Instant::now();
        let source = load(&a, name, &manifest)?;
        if !crate::out::quiet() {
            eprintln!("{name}: {}", source.origin);
        }
        let m =
            measure(&a, &source, work.path(), &pool).with_context(|| format!("table `{name}`"))?;
        let mut row = vec![
            name.clone(),
            m.rows.to_string(),
            m.cols.to_string(),
            bytes(m.zstd),
            bytes(m.snappy),
        ];
        row.extend(m.zf.iter().map(|s| bytes(s.bytes)));
        row.extend(
            m.zf.iter()
                .map(|s| format!("{:.3}", s.bytes as f64 / m.zstd as f64)),
        );
        row.extend([
            format!("{:.2}", m.zf_decode_s * 1e3),
            format!("{:.2}", m.pq_decode_s * 1e3),
            format!("{:.2}x", m.pq_decode_s / m.zf_decode_s),
            if m.mismatches.is_empty() {
                "yes".to_string()
            } else {
                format!("NO: {}", m.mismatches.join("; "))
            },
        ]);
        report.row(row);
        if a.columns {
            column_rows(&mut column_report, name, &source, &m, work.path())?;
        }
        totals.add(name, &m);
        if !crate::out::quiet() {
            eprintln!("  {:.1} s", t.elapsed().as_secs_f64());
        }
    }
    out!("{}", report.render());
    if a.columns {
        outln!();
        out!("{}", column_report.render());
    }
    outln!();
    totals.print(&a.objectives);
    Ok(())
}

/// The suite's tables: every manifest entry, then the TPC-H tables.
fn suite_names(a: &Args, manifest: &Manifest) -> Result<Vec<String>> {
    let mut names: Vec<String> = manifest.keys().cloned().collect();
    if names.is_empty() && a.tpch_sf == 0.0 {
        bail!(
            "{}: no manifest.tsv, and --tpch-sf 0 leaves out TPC-H: fetch the suite with \
             `python3 scripts/real_data.py {}`",
            a.dir.display(),
            a.dir.display()
        );
    }
    if names.is_empty() && !crate::out::quiet() {
        eprintln!(
            "{}: no manifest.tsv, only TPC-H measured (fetch the real tables with `python3 \
             scripts/real_data.py {}`)",
            a.dir.display(),
            a.dir.display()
        );
    }
    if a.tpch_sf > 0.0 {
        names.extend(
            super::tpch_db::TABLES
                .iter()
                .filter(|t| **t != "lineitem")
                .map(|t| t.to_string()),
        );
    }
    Ok(names)
}

/// Manifest rows by table name: origin and pyarrow's zstd(3) and snappy sizes.
type Manifest = BTreeMap<String, (String, u64, u64)>;

/// The suite's manifest, empty when there is none.
fn read_manifest(dir: &Path) -> Result<Manifest> {
    let path = dir.join("manifest.tsv");
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Ok(BTreeMap::new());
    };
    let mut out = BTreeMap::new();
    for (i, line) in text.lines().enumerate().skip(1) {
        let f: Vec<&str> = line.split('\t').collect();
        let parse = |s: &str| {
            s.parse::<u64>()
                .with_context(|| format!("{}: line {}: `{s}` is not a size", path.display(), i + 1))
        };
        if f.len() != 6 {
            bail!("{}: line {}: expected 6 fields", path.display(), i + 1);
        }
        out.insert(
            f[0].to_string(),
            (f[1].to_string(), parse(f[4])?, parse(f[5])?),
        );
    }
    Ok(out)
}

fn load(a: &Args, name: &str, manifest: &BTreeMap<String, (String, u64, u64)>) -> Result<Source> {
    if let Some((origin, zstd, snappy)) = manifest.get(name) {
        let path = a.dir.join(format!("{name}.parquet"));
        let file = std::fs::File::open(&path)
            .with_context(|| format!("{}: cannot open", path.display()))?;
        let batches = ParquetRecordBatchReaderBuilder::try_new(file)
            .with_context(|| format!("{}: not a readable Parquet file", path.display()))?
            .with_batch_size(a.chunk_rows)
            .build()?
            .collect::<std::result::Result<Vec<_>, _>>()
            .with_context(|| format!("{}: reading", path.display()))?;
        return Ok(Source {
            name: name.to_string(),
            origin: origin.clone(),
            batches,
            pyarrow: Some((*zstd, *snappy)),
        });
    }
    let batches = super::tpch_db::batches(name, a.tpch_sf)?.collect::<Result<Vec<_>>>()?;
    Ok(Source {
        name: name.to_string(),
        origin: format!("TPC-H {name} at SF {}", a.tpch_sf),
        batches,
        pyarrow: None,
    })
}

fn schema(s: &Source) -> Result<SchemaRef> {
    s.batches
        .first()
        .map(|b| b.schema())
        .with_context(|| format!("table `{}` has no rows", s.name))
}

fn measure(a: &Args, s: &Source, dir: &Path, pool: &rayon::ThreadPool) -> Result<Measured> {
    let schema = schema(s)?;
    let rows = s.batches.iter().map(|b| b.num_rows()).sum();
    let pq_zstd = dir.join(format!("{}.zstd.parquet", s.name));
    let rs_zstd = write_parquet(&pq_zstd, &schema, &s.batches, zstd3()?)?;
    let rs_snappy = parquet_size(&schema, &s.batches, Compression::SNAPPY)?;
    let (zstd, snappy) = match s.pyarrow {
        Some((z, sn)) => (z.min(rs_zstd), sn.min(rs_snappy)),
        None => (rs_zstd, rs_snappy),
    };
    let mut zf = Vec::new();
    for o in &a.objectives {
        zf.push(write_zf(
            &zf_path(dir, &s.name, o),
            &schema,
            &s.batches,
            o,
            a.chunk_rows,
        )?);
    }
    // Decode speed and the round trip are measured on the second objective's file (balanced
    // by default): the bars hold it to 2x Parquet's decode.
    let decoded = zf_path(dir, &s.name, &a.objectives[a.objectives.len().min(2) - 1]);
    let zf_decode_s = median(a.runs, || {
        pool.install(|| -> Result<()> {
            let f = ZfFile::open(&decoded)?;
            for b in f.batches() {
                std::hint::black_box(b?);
            }
            Ok(())
        })
    })?;
    let pq_decode_s = median(a.runs, || {
        pool.install(|| -> Result<()> {
            let f = std::fs::File::open(&pq_zstd)?;
            for b in ParquetRecordBatchReaderBuilder::try_new(f)?
                .with_batch_size(a.chunk_rows)
                .build()?
            {
                std::hint::black_box(b?);
            }
            Ok(())
        })
    })?;
    let mut mismatches = Vec::new();
    let wanted = (0..schema.fields().len())
        .map(|i| concat(s.batches.iter().map(|b| b.column(i).clone())))
        .collect::<Result<Vec<_>>>()?;
    for o in &a.objectives {
        let f = ZfFile::open(zf_path(dir, &s.name, o))?;
        let back = f.batches().collect::<zipflow_core::Result<Vec<_>>>()?;
        for (i, (field, want)) in schema.fields().iter().zip(&wanted).enumerate() {
            let got = concat(back.iter().map(|b| b.column(i).clone()))?;
            if let Err(why) = same_bits(want, &got) {
                mismatches.push(format!("{o} `{}`: {why}", field.name()));
            }
        }
    }
    Ok(Measured {
        rows,
        cols: schema.fields().len(),
        zstd,
        snappy,
        zf,
        zf_decode_s,
        pq_decode_s,
        mismatches,
    })
}

fn zf_path(dir: &Path, table: &str, objective: &str) -> PathBuf {
    dir.join(format!("{table}.{objective}.zf"))
}

fn zstd3() -> Result<Compression> {
    Ok(Compression::ZSTD(parquet::basic::ZstdLevel::try_new(3)?))
}

fn write_zf(
    path: &Path,
    schema: &SchemaRef,
    batches: &[RecordBatch],
    objective: &str,
    chunk_rows: usize,
) -> Result<FileSummary> {
    let opts = WriteOptions {
        chunk_rows,
        overwrite: true,
        chooser: Some(zipflow_select::Chooser::shared(
            super::compress::select_options(objective, None)?,
        )),
        ..WriteOptions::default()
    };
    let mut w = TableWriter::create(path, schema.clone(), opts)?;
    for b in batches {
        w.write(b)?;
    }
    Ok(w.finish()?)
}

fn write_parquet(
    path: &Path,
    schema: &SchemaRef,
    batches: &[RecordBatch],
    codec: Compression,
) -> Result<u64> {
    let file = std::fs::File::create(path).with_context(|| format!("{}", path.display()))?;
    let props = WriterProperties::builder().set_compression(codec).build();
    let mut w = ArrowWriter::try_new(file, schema.clone(), Some(props))?;
    for b in batches {
        w.write(b)?;
    }
    w.close()?;
    Ok(std::fs::metadata(path)?.len())
}

fn parquet_size(schema: &SchemaRef, batches: &[RecordBatch], codec: Compression) -> Result<u64> {
    let props = WriterProperties::builder().set_compression(codec).build();
    let mut w = ArrowWriter::try_new(Vec::new(), schema.clone(), Some(props))?;
    for b in batches {
        w.write(b)?;
    }
    Ok(w.into_inner()?.len() as u64)
}

/// Parquet+zstd(3) bytes per column (compressed column chunks over all row groups).
fn parquet_column_sizes(path: &Path) -> Result<Vec<u64>> {
    let f = std::fs::File::open(path)?;
    let meta = ParquetRecordBatchReaderBuilder::try_new(f)?
        .metadata()
        .clone();
    let n = meta.file_metadata().schema_descr().num_columns();
    let mut sizes = vec![0u64; n];
    for rg in meta.row_groups() {
        for (i, c) in rg.columns().iter().enumerate() {
            sizes[i] += u64::try_from(c.compressed_size()).unwrap_or(0);
        }
    }
    Ok(sizes)
}

fn column_rows(t: &mut Table, table: &str, s: &Source, m: &Measured, dir: &Path) -> Result<()> {
    let pq = parquet_column_sizes(&dir.join(format!("{}.zstd.parquet", s.name)))?;
    let Some(first) = m.zf.first() else {
        return Ok(());
    };
    // Parquet leaves and zipflow columns line up for flat schemas, which the suite has.
    for (i, c) in first.columns.iter().enumerate() {
        let p = pq.get(i).copied().unwrap_or(0);
        t.row(vec![
            table.to_string(),
            c.name.clone(),
            c.column_type.to_string(),
            bytes(p),
            bytes(c.compressed_bytes),
            format!("{:.2}", c.compressed_bytes as f64 / p.max(1) as f64),
            c.plan_summary(),
        ]);
    }
    Ok(())
}

fn median(runs: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    let mut times = Vec::new();
    for _ in 0..runs.max(1) {
        let t = Instant::now();
        f()?;
        times.push(t.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

fn concat(arrays: impl Iterator<Item = ArrayRef>) -> Result<ArrayRef> {
    let arrays: Vec<ArrayRef> = arrays.collect();
    let refs: Vec<&dyn Array> = arrays.iter().map(|a| a.as_ref()).collect();
    Ok(arrow::compute::concat(&refs)?)
}

/// Whether `got` equals `want` bit for bit: same type, same nulls, and floats compared by
/// their bits (NaN payloads and -0.0 included), not by value.
fn same_bits(want: &ArrayRef, got: &ArrayRef) -> std::result::Result<(), String> {
    if want.data_type() != got.data_type() {
        return Err(format!(
            "type {} came back as {}",
            want.data_type(),
            got.data_type()
        ));
    }
    if want.len() != got.len() {
        return Err(format!("{} rows came back as {}", want.len(), got.len()));
    }
    if want.logical_nulls() != got.logical_nulls() {
        return Err("nulls differ".to_string());
    }
    let as_bits = |a: &ArrayRef| -> Option<ArrayRef> {
        let int = match a.data_type() {
            DataType::Float16 => DataType::Int16,
            DataType::Float32 => DataType::Int32,
            DataType::Float64 => DataType::Int64,
            _ => return None,
        };
        let data = a.to_data().into_builder().data_type(int).build().ok()?;
        Some(arrow::array::make_array(data))
    };
    let equal = match (as_bits(want), as_bits(got)) {
        (Some(w), Some(g)) => w.to_data() == g.to_data(),
        _ => want.to_data() == got.to_data(),
    };
    if equal {
        Ok(())
    } else {
        let first = (0..want.len())
            .find(|&i| want.slice(i, 1).to_data() != got.slice(i, 1).to_data())
            .unwrap_or(0);
        Err(format!("values differ (first at row {first})"))
    }
}

/// Sums over the suite and the bars.
struct Totals {
    zstd: u64,
    snappy: u64,
    zf: Vec<u64>,
    /// Per objective: the worst table and its ratio.
    worst: Vec<(String, f64)>,
    /// Per objective: tables over their bar.
    over: Vec<Vec<String>>,
    log_speedup: f64,
    slowest: (String, f64),
    tables: usize,
    inexact: Vec<String>,
}

impl Totals {
    fn new(objectives: usize) -> Totals {
        Totals {
            zstd: 0,
            snappy: 0,
            zf: vec![0; objectives],
            worst: vec![(String::new(), 0.0); objectives],
            over: vec![Vec::new(); objectives],
            log_speedup: 0.0,
            slowest: (String::new(), f64::INFINITY),
            tables: 0,
            inexact: Vec::new(),
        }
    }

    fn add(&mut self, name: &str, m: &Measured) {
        self.zstd += m.zstd;
        self.snappy += m.snappy;
        for (i, s) in m.zf.iter().enumerate() {
            self.zf[i] += s.bytes;
            let r = s.bytes as f64 / m.zstd as f64;
            if r > self.worst[i].1 {
                self.worst[i] = (name.to_string(), r);
            }
            if r > bar(i) {
                self.over[i].push(format!("{name} {r:.3}"));
            }
        }
        let speedup = m.pq_decode_s / m.zf_decode_s;
        self.log_speedup += speedup.ln();
        if speedup < self.slowest.1 {
            self.slowest = (name.to_string(), speedup);
        }
        self.tables += 1;
        if !m.mismatches.is_empty() {
            self.inexact.push(name.to_string());
        }
    }

    fn print(&self, objectives: &[String]) {
        outln!(
            "{} tables; Parquet+zstd(3) {} (the smaller of pyarrow's and arrow-rs's per table), \
             Parquet+snappy {}",
            self.tables,
            bytes(self.zstd),
            bytes(self.snappy)
        );
        for (i, o) in objectives.iter().enumerate() {
            let over = if i < 2 {
                if self.over[i].is_empty() {
                    format!("; every table at most {:.2}x", bar(i))
                } else {
                    format!("; over {:.2}x: {}", bar(i), self.over[i].join(", "))
                }
            } else {
                String::new()
            };
            outln!(
                "zipflow {o}: {} in total, {:.3}x Parquet+zstd(3); worst {} {:.3}x{over}",
                bytes(self.zf[i]),
                self.zf[i] as f64 / self.zstd.max(1) as f64,
                self.worst[i].0,
                self.worst[i].1
            );
        }
        outln!(
            "decode to Arrow, one thread: zipflow {:.2}x arrow-rs reading Parquet+zstd(3) \
             (geometric mean); slowest {} {:.2}x",
            (self.log_speedup / self.tables.max(1) as f64).exp(),
            self.slowest.0,
            self.slowest.1
        );
        if self.inexact.is_empty() {
            outln!("every table came back bit for bit");
        } else {
            outln!("NOT bit for bit: {}", self.inexact.join(", "));
        }
    }
}

/// The size bar of the objective in position `i`: smallest at most 1.0x, balanced 1.05x.
fn bar(i: usize) -> f64 {
    if i == 0 { 1.0 } else { 1.05 }
}
