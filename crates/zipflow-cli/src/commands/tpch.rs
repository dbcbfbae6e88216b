//! `zipflow tpch`: the embedded default workload.
//!
//! Generates TPC-H lineitem in-process, compresses it, verifies that every value comes back,
//! and prints per column: the plan, the compression ratio, encode and decode speed, and the
//! size the same column takes in Parquet+zstd(3) written by arrow-rs.

use super::lineitem::{Lineitem, Verifier};
use crate::io::parquet_props;
use crate::out::{out, outln};
use crate::report::chart::{Point, Scatter, Series};
use crate::report::{Table, bytes, ratio, speed};
use anyhow::{Context, Result, bail};
use arrow::array::Array;
use arrow::record_batch::RecordBatch;
use indicatif::ProgressBar;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::{ArrowWriter, ProjectionMask};
use parquet::file::metadata::ParquetMetaData;
use rayon::prelude::*;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tpchgen::generators::LineItemGenerator;
use tpchgen_arrow::LineItemArrow;
use zipflow_encodings::Scratch;
use zipflow_format::ZfFile;
use zipflow_format::table::{FileSummary, TableWriter, WriteOptions};

/// Arguments of `zipflow tpch`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// TPC-H scale factor (1 = 6 million lineitem rows).
    #[arg(long, default_value_t = 1.0)]
    pub sf: f64,
    /// Keep the compressed file here (default: a temporary file, deleted at the end).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Overwrite --output if it exists.
    #[arg(short, long)]
    pub force: bool,
    /// Rows per chunk.
    #[arg(long, default_value_t = 65_536)]
    pub chunk_rows: usize,
    /// Skip the Parquet+zstd(3) comparison.
    #[arg(long)]
    pub no_parquet: bool,
    /// Also draw decode speed to Arrow (GB/s) against compression ratio, one point per column,
    /// into this SVG file; with the Parquet comparison, each column's Parquet+zstd(3) ratio
    /// and arrow-rs decode speed (read alone, one thread) as a second series.
    #[arg(long)]
    pub svg: Option<PathBuf>,
    /// Instead of the lineitem report, write all eight TPC-H tables into this directory as
    /// NAME.zf (region, nation, supplier, customer, part, partsupp, orders, lineitem) for
    /// `zipflow sql --db DIR`: every TPC-H query, joins included. Memory stays a few batches
    /// at any scale factor; SF 1 takes about 0.3 GB of disk.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["output", "svg", "no_parquet"])]
    pub db: Option<PathBuf>,
}

pub(crate) fn spinner(msg: &str, quiet: bool) -> ProgressBar {
    if quiet || crate::out::quiet() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new_spinner();
    bar.set_message(msg.to_string());
    bar.enable_steady_tick(Duration::from_millis(120));
    bar
}

/// Generates lineitem at `sf`, in parallel parts concatenated in order.
pub fn generate_lineitem(sf: f64) -> Vec<RecordBatch> {
    let parts = ((sf * 8.0).ceil() as i32).clamp(1, 1024);
    (1..=parts)
        .into_par_iter()
        .map(|part| {
            LineItemArrow::new(LineItemGenerator::new(sf, part, parts))
                .with_batch_size(64 * 1024)
                .collect::<Result<Vec<_>, _>>()
        })
        .collect::<Result<Vec<_>, _>>()
        .map(|v| v.into_iter().flatten().collect())
        .unwrap_or_default()
}

/// Plain size of an Arrow array: values at their width, strings as bytes + 4-byte offsets.
fn plain_size(a: &dyn Array) -> u64 {
    use arrow::array::AsArray;
    use arrow::datatypes::DataType;
    match a.data_type() {
        DataType::Utf8View => {
            let s = a.as_string_view();
            s.iter()
                .map(|v| v.map_or(0, str::len) as u64 + 4)
                .sum::<u64>()
                + 4
        }
        DataType::Utf8 => a.as_string::<i32>().values().len() as u64 + 4 * (a.len() as u64 + 1),
        DataType::Decimal128(_, _) => 8 * a.len() as u64,
        t => t.primitive_width().map_or(0, |w| (w * a.len()) as u64),
    }
}

/// Runs `zipflow tpch`.
pub fn run(a: Args) -> Result<()> {
    if !(a.sf > 0.0 && a.sf <= 1000.0) {
        bail!("--sf must be in (0, 1000], got {}", a.sf);
    }
    if let Some(dir) = &a.db {
        return super::tpch_db::write(dir, a.sf, a.chunk_rows, a.force);
    }
    for out in a.output.iter().chain(&a.svg) {
        crate::io::check_output_dir(out)?;
    }
    let mut _listed = None;
    let path = match &a.output {
        Some(p) => p.clone(),
        None => {
            let tmp_dir = std::env::temp_dir().join(format!("zipflow-tpch-{}", std::process::id()));
            _listed = Some(zipflow_format::cleanup::register_dir(&tmp_dir));
            std::fs::create_dir_all(&tmp_dir)?;
            tmp_dir.join("lineitem.zf")
        }
    };
    let result = compress_verify_report(&a, &path);
    if a.output.is_none() {
        let _ = std::fs::remove_file(&path);
        if let Some(dir) = path.parent() {
            let _ = std::fs::remove_dir(dir);
        }
    }
    result
}

/// What the generate-and-compress pass measured.
struct Written {
    summary: FileSummary,
    schema: arrow::datatypes::SchemaRef,
    /// Plain bytes per column.
    plain: Vec<u64>,
    rows: u64,
    generate_secs: f64,
    compress_secs: f64,
}

fn compress_verify_report(a: &Args, path: &PathBuf) -> Result<()> {
    let bar = spinner(
        &format!("generating and compressing lineitem at SF {}", a.sf),
        false,
    );
    let written = compress(a, path)?;
    bar.finish_and_clear();
    outln!(
        "generated TPC-H lineitem, SF {}: {} rows in {:.1} s",
        a.sf,
        written.rows,
        written.generate_secs
    );
    let schema = written.schema.clone();

    let bar = spinner("verifying against the table generated again", false);
    let zf = ZfFile::open(path)?;
    let scratch_parquet = (!a.no_parquet).then(|| ScratchFile::new("parquet"));
    let parquet_meta = verify(
        a.sf,
        &zf,
        &schema,
        scratch_parquet.as_ref().map(|f| f.path.as_path()),
    )?;
    bar.finish_and_clear();
    outln!(
        "compressed to {} in {:.1} s and verified: every value round-trips",
        path.display(),
        written.compress_secs
    );

    let bar = spinner("timing decode", false);
    let decode = time_decode(&zf)?;
    bar.finish_and_clear();

    let main_cols: Vec<usize> = (0..schema.fields().len())
        .filter(|&c| !NOT_MAIN.contains(&schema.field(c).name().as_str()))
        .collect();
    let parquet = match (scratch_parquet, parquet_meta) {
        (Some(file), Some(meta)) => {
            let bar = spinner("timing Parquet+zstd(3) for comparison", false);
            let p = parquet_reference(
                &file.path,
                &meta,
                schema.fields().len(),
                &main_cols,
                a.chunk_rows,
                a.svg.is_some(),
            )?;
            bar.finish_and_clear();
            Some(p)
        }
        _ => None,
    };
    let report = Report {
        summary: &written.summary,
        plain: &written.plain,
        decode: &decode,
        parquet: parquet.as_ref(),
    };
    report.columns();
    report.totals(&schema, &main_cols);
    if let Some(svg) = &a.svg {
        report.chart(a.sf).write(svg)?;
        outln!(
            "wrote the chart of decode speed against ratio to {}",
            svg.display()
        );
    }
    Ok(())
}

/// Generates lineitem and compresses it to `path` as it comes (columns of a row group in
/// parallel), holding only a window of generated parts.
fn compress(a: &Args, path: &PathBuf) -> Result<Written> {
    let mut generator = Lineitem::new(a.sf);
    let mut generate_secs = 0.0;
    let mut next = || {
        let t = Instant::now();
        let batch = generator.next().transpose();
        generate_secs += t.elapsed().as_secs_f64();
        batch
    };
    let Some(first) = next()? else {
        bail!("the generator produced no rows at SF {}", a.sf);
    };
    let schema = first.schema();
    let opts = WriteOptions {
        chunk_rows: a.chunk_rows,
        overwrite: a.force || a.output.is_none(),
        chooser: Some(zipflow_select::Chooser::shared(Default::default())),
        ..WriteOptions::default()
    };
    let start = Instant::now();
    let mut w = TableWriter::create(path, schema.clone(), opts)?;
    let mut compress_secs = start.elapsed().as_secs_f64();
    let mut plain = vec![0u64; schema.fields().len()];
    let mut rows = 0u64;
    let mut batch = Some(first);
    while let Some(b) = batch {
        for (c, p) in plain.iter_mut().enumerate() {
            *p += plain_size(b.column(c).as_ref());
        }
        rows += b.num_rows() as u64;
        let t = Instant::now();
        w.write(&b)?;
        compress_secs += t.elapsed().as_secs_f64();
        drop(b);
        batch = next()?;
    }
    let t = Instant::now();
    let summary = w.finish()?;
    compress_secs += t.elapsed().as_secs_f64();
    Ok(Written {
        summary,
        schema,
        plain,
        rows,
        generate_secs,
        compress_secs,
    })
}

/// Generates the table again and checks that every row of every column comes back from
/// `zf`; with `parquet`, writes the same rows there as Parquet+zstd(3) on the way.
fn verify(
    sf: f64,
    zf: &ZfFile,
    schema: &arrow::datatypes::SchemaRef,
    parquet: Option<&std::path::Path>,
) -> Result<Option<ParquetMetaData>> {
    let mut writer = match parquet {
        Some(p) => {
            let file = std::fs::File::create(p)
                .with_context(|| format!("{}: cannot create", p.display()))?;
            Some(ArrowWriter::try_new(
                file,
                schema.clone(),
                Some(parquet_props()?),
            )?)
        }
        None => None,
    };
    let mut verifier = Verifier::new(zf);
    for batch in Lineitem::new(sf) {
        let batch = batch?;
        verifier.check(&batch)?;
        if let Some(w) = &mut writer {
            w.write(&batch)?;
        }
    }
    verifier.finish()?;
    Ok(match writer {
        Some(w) => Some(w.close()?),
        None => None,
    })
}

/// A scratch file in the temporary directory, on the list a signal cleans up, deleted when
/// dropped.
struct ScratchFile {
    path: PathBuf,
    _listed: zipflow_format::cleanup::Registered,
}

impl ScratchFile {
    fn new(ext: &str) -> ScratchFile {
        let path = std::env::temp_dir().join(format!("zipflow-tpch-{}.{ext}", std::process::id()));
        ScratchFile {
            _listed: zipflow_format::cleanup::register_file(&path),
            path,
        }
    }
}

impl Drop for ScratchFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Seconds to decode each column on one thread, median of 3 passes over all chunks.
struct DecodeSecs {
    /// Into zipflow's own reused buffers.
    reused: Vec<f64>,
    /// Into Arrow arrays of the original types whose buffers are recycled (as a streaming
    /// reader does).
    arrow: Vec<f64>,
    /// Into freshly allocated Arrow arrays.
    fresh: Vec<f64>,
}

fn time_decode(zf: &ZfFile) -> Result<DecodeSecs> {
    let ncol = zf.columns().len();
    let mut t = DecodeSecs {
        reused: vec![0f64; ncol],
        arrow: vec![0f64; ncol],
        fresh: vec![0f64; ncol],
    };
    let one_thread = rayon::ThreadPoolBuilder::new().num_threads(1).build()?;
    for c in 0..ncol {
        let mut pool = zipflow_format::ArrayPool::default();
        let mut scratch = Scratch::default();
        t.reused[c] = one_thread.install(|| {
            median_secs(|| {
                for i in 0..zf.num_chunks() {
                    let (values, _validity) = zf.read_chunk(c, i, &mut scratch)?;
                    std::hint::black_box(&values);
                    scratch.give(values);
                }
                Ok(())
            })
        })?;
        t.arrow[c] = one_thread.install(|| {
            median_secs(|| {
                for i in 0..zf.num_chunks() {
                    let array = zf.read_array_in(c, i, &mut pool)?;
                    pool.recycle(std::hint::black_box(array));
                }
                Ok(())
            })
        })?;
        t.fresh[c] = one_thread.install(|| {
            median_secs(|| {
                for i in 0..zf.num_chunks() {
                    std::hint::black_box(zf.read_array(c, i, &mut scratch)?);
                }
                Ok(())
            })
        })?;
    }
    Ok(t)
}

/// The same table in Parquet+zstd(3) by arrow-rs.
struct Parquet {
    /// Compressed bytes per column.
    sizes: Vec<u64>,
    /// Bytes of the whole file.
    total: u64,
    /// Seconds to read the main columns on one thread (median of 3).
    main_secs: f64,
    /// Seconds to read each column alone on one thread (median of 3), when asked for.
    column_secs: Option<Vec<f64>>,
}

/// Sizes from the written file's metadata; read speeds from the file itself (in the page
/// cache after writing), so only one row group of it is in memory at a time.
fn parquet_reference(
    path: &std::path::Path,
    meta: &ParquetMetaData,
    ncol: usize,
    main_cols: &[usize],
    batch_rows: usize,
    per_column: bool,
) -> Result<Parquet> {
    let mut sizes = vec![0u64; ncol];
    for rg in meta.row_groups() {
        for (c, cc) in rg.columns().iter().enumerate() {
            sizes[c] += cc.compressed_size() as u64;
        }
    }
    let total = std::fs::metadata(path)
        .with_context(|| format!("{}", path.display()))?
        .len();
    let read = |cols: &[usize]| {
        median_secs(|| {
            let builder = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(path)?)?;
            let mask = ProjectionMask::roots(builder.parquet_schema(), cols.iter().copied());
            // Batches as large as zipflow's chunks: arrow-rs's fastest setting here.
            let reader = builder
                .with_projection(mask)
                .with_batch_size(batch_rows)
                .build()?;
            for b in reader {
                std::hint::black_box(b?);
            }
            Ok(())
        })
    };
    let main_secs = read(main_cols)?;
    let column_secs = if per_column {
        Some((0..ncol).map(|c| read(&[c])).collect::<Result<Vec<_>>>()?)
    } else {
        None
    };
    Ok(Parquet {
        sizes,
        total,
        main_secs,
        column_secs,
    })
}

/// What `zipflow tpch` prints.
struct Report<'a> {
    summary: &'a FileSummary,
    /// Plain bytes per column.
    plain: &'a [u64],
    decode: &'a DecodeSecs,
    parquet: Option<&'a Parquet>,
}

impl Report<'_> {
    /// One row per column.
    fn columns(&self) {
        let mut table = Table::new(
            &[
                "column",
                "type",
                "plan",
                "plain",
                "zipflow",
                "ratio",
                "encode",
                "decode",
                "to Arrow",
                "fresh Arrow",
                "pq+zstd",
                "zf/pq",
            ],
            3,
        );
        for (c, col) in self.summary.columns.iter().enumerate() {
            let plain = self.plain[c];
            let (pq, zf_pq) = match self.parquet {
                None => ("-".into(), "-".into()),
                Some(p) => (
                    bytes(p.sizes[c]),
                    format!(
                        "{:.2}",
                        col.compressed_bytes as f64 / p.sizes[c].max(1) as f64
                    ),
                ),
            };
            table.row(vec![
                col.name.clone(),
                col.column_type.to_string(),
                col.plan_summary(),
                bytes(plain),
                bytes(col.compressed_bytes),
                ratio(plain, col.compressed_bytes),
                speed(plain, col.encode_secs),
                speed(plain, self.decode.reused[c]),
                speed(plain, self.decode.arrow[c]),
                speed(plain, self.decode.fresh[c]),
                pq,
                zf_pq,
            ]);
        }
        out!("{}", table.render());
    }

    /// A line per group of columns: all, the non-string ones, the main ones.
    fn totals(&self, schema: &arrow::datatypes::Schema, main_cols: &[usize]) {
        let ncol = schema.fields().len();
        let groups: [(&str, Vec<usize>); 3] = [
            ("all columns", (0..ncol).collect()),
            (
                "non-string columns",
                (0..ncol)
                    .filter(|&c| !STRINGS.contains(&schema.field(c).name().as_str()))
                    .collect(),
            ),
            ("12 main columns", main_cols.to_vec()),
        ];
        for (label, cols) in groups {
            outln!("{}", self.total_line(label, &cols));
        }
        if let Some(p) = self.parquet {
            outln!(
                "Parquet+zstd(3) file written by arrow-rs: {}",
                bytes(p.total)
            );
        }
    }

    /// Decode speed to Arrow against compression ratio, a point per column: zipflow's, and
    /// Parquet+zstd(3)'s where each column was read alone.
    fn chart(&self, sf: f64) -> Scatter {
        let gbs = |plain: u64, secs: f64| plain as f64 / secs.max(1e-12) / 1e9;
        let name = |c: usize| self.summary.columns[c].name.clone();
        let mut series = vec![Series {
            name: "zipflow, to Arrow".into(),
            points: (0..self.summary.columns.len())
                .map(|c| {
                    let plain = self.plain[c];
                    let zf = self.summary.columns[c].compressed_bytes.max(1);
                    Point::labelled(
                        plain as f64 / zf as f64,
                        gbs(plain, self.decode.arrow[c]),
                        name(c),
                    )
                })
                .collect(),
        }];
        if let Some((p, secs)) = self
            .parquet
            .and_then(|p| Some((p, p.column_secs.as_ref()?)))
        {
            series.push(Series {
                name: "Parquet+zstd(3), arrow-rs".into(),
                points: secs
                    .iter()
                    .enumerate()
                    .map(|(c, &s)| {
                        let plain = self.plain[c];
                        Point::labelled(
                            plain as f64 / p.sizes[c].max(1) as f64,
                            gbs(plain, s),
                            name(c),
                        )
                    })
                    .collect(),
            });
        }
        let subtitle = match self.parquet {
            Some(p) if p.column_secs.is_some() => format!(
                "TPC-H lineitem SF {sf}; one thread; Parquet+zstd(3) read by arrow-rs one column at a time"
            ),
            _ => format!("TPC-H lineitem SF {sf}; one thread"),
        };
        Scatter {
            title: "Decode speed against compression ratio, per column".into(),
            subtitle: Some(subtitle),
            x_desc: "compression ratio (Arrow size / compressed size, log scale)".into(),
            y_desc: "decode to Arrow, GB/s (one thread)".into(),
            log_x: true,
            log_y: false,
            series,
        }
    }

    fn total_line(&self, label: &str, cols: &[usize]) -> String {
        let sum = |f: &dyn Fn(usize) -> f64| cols.iter().map(|&c| f(c)).sum::<f64>();
        let plain = cols.iter().map(|&c| self.plain[c]).sum::<u64>();
        let zf_bytes = cols
            .iter()
            .map(|&c| self.summary.columns[c].compressed_bytes)
            .sum::<u64>();
        let arrow_secs = sum(&|c| self.decode.arrow[c]);
        let mut line = format!(
            "{label}: zipflow {} (ratio {})",
            bytes(zf_bytes),
            ratio(plain, zf_bytes)
        );
        if let Some(p) = self.parquet {
            let pq = cols.iter().map(|&c| p.sizes[c]).sum::<u64>();
            line += &format!(
                ", Parquet+zstd(3) {} (zipflow/parquet {:.3})",
                bytes(pq),
                zf_bytes as f64 / pq.max(1) as f64
            );
        }
        line += &format!(
            "; decode on 1 thread {} into zipflow's buffers, {} to Arrow arrays in recycled \
             buffers, {} to fresh Arrow arrays",
            speed(plain, sum(&|c| self.decode.reused[c])),
            speed(plain, arrow_secs),
            speed(plain, sum(&|c| self.decode.fresh[c]))
        );
        if let Some(p) = self.parquet.filter(|_| label == "12 main columns") {
            line += &format!(
                "; arrow-rs reads them from Parquet+zstd(3) at {} ({:.2}x slower than zipflow to Arrow)",
                speed(plain, p.main_secs),
                p.main_secs / arrow_secs.max(1e-9)
            );
        }
        line
    }
}

/// String columns (plain-encoded for now).
const STRINGS: [&str; 5] = [
    "l_returnflag",
    "l_linestatus",
    "l_shipinstruct",
    "l_shipmode",
    "l_comment",
];

/// Columns left out of the "12 main columns" comparison.
const NOT_MAIN: [&str; 4] = [
    "l_linenumber",
    "l_commitdate",
    "l_receiptdate",
    "l_shipinstruct",
];

/// Median wall time of three runs of `f`.
fn median_secs(mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    let mut runs = Vec::with_capacity(3);
    for _ in 0..3 {
        let t = Instant::now();
        f()?;
        runs.push(t.elapsed().as_secs_f64());
    }
    runs.sort_by(f64::total_cmp);
    Ok(runs[1])
}
