//! `zipflow bench selection`: how good and how fast plan selection is, per column of TPC-H
//! lineitem and orders (generated in process) and of the Sentinel-2 raster bands (uint16).
//!
//! For a few chunks of every column, evenly spread: the cascade search under each objective
//! (plan, encoded size, measured decode speed, selection time), exhaustive search over every
//! plan of the same space (size and selection time), the fixed candidate list the selector
//! used before the cascade, and the same rows in Parquet with zstd(3) and with snappy
//! (arrow-rs). Then, over every chunk of every column, the share of compression time spent
//! choosing plans, as `zipflow compress` chooses them (the previous chunk's best plans
//! re-scored, a full search every few chunks). `--calibrate` measures the decode cost table
//! instead.

use crate::out::{out, outln};
use crate::report::{Table, bytes};
use anyhow::{Context, Result, bail};
use arrow::array::{Array, ArrayRef, RecordBatch};
use arrow::datatypes::{Field, Schema};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use rayon::prelude::*;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;
use tpchgen::generators::{LineItemGenerator, OrderGenerator};
use tpchgen_arrow::{LineItemArrow, OrderArrow};
use zipflow_core::{Plan, Values};
use zipflow_select::{ColumnSelector, Objective, SelectOptions, search};

/// Arguments of `zipflow bench selection`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// TPC-H scale factor.
    #[arg(long, default_value_t = 1.0)]
    pub sf: f64,
    /// Chunks per column measured against exhaustive search, evenly spread.
    #[arg(long, default_value_t = 4)]
    pub chunks: usize,
    /// Rows per chunk.
    #[arg(long, default_value_t = 65_536)]
    pub chunk_rows: usize,
    /// Only these tables (lineitem, orders; raster: the Sentinel-2 bands of --raster-dir as
    /// uint16 columns, row-major).
    #[arg(long, value_delimiter = ',', default_values_t = ["lineitem".to_string(), "orders".to_string(), "raster".to_string()])]
    pub tables: Vec<String>,
    /// Where the raster table's bands are (`sentinel2_B08_nir.tif`, `sentinel2_B04_red.tif`).
    #[arg(long, default_value = "../shared/data/raster")]
    pub raster_dir: PathBuf,
    /// Only columns whose name contains this.
    #[arg(long)]
    pub column: Option<String>,
    /// Measure the decode cost table on this machine and print it (the format of
    /// crates/zipflow-select/src/costs.txt) instead of benchmarking.
    #[arg(long)]
    pub calibrate: bool,
    /// With --calibrate: also write the table here.
    #[arg(long)]
    pub write: Option<PathBuf>,
}

/// Runs `zipflow bench selection`.
pub fn run(a: Args) -> Result<()> {
    if a.calibrate {
        let t = zipflow_select::cost::calibrate(15)?;
        let text = t.to_text();
        out!("{text}");
        if let Some(p) = &a.write {
            std::fs::write(p, &text).with_context(|| format!("{}", p.display()))?;
        }
        return Ok(());
    }
    if !(a.sf > 0.0 && a.sf <= 100.0) || a.chunks == 0 || a.chunk_rows < 1024 {
        bail!("--sf must be in (0, 100], --chunks at least 1, --chunk-rows at least 1024");
    }
    let mut bars = Bars::default();
    for table in &a.tables {
        let t = Instant::now();
        let batches = match table.as_str() {
            "lineitem" => generate(a.sf, |sf, p, n| {
                LineItemArrow::new(LineItemGenerator::new(sf, p, n))
                    .with_batch_size(64 * 1024)
                    .collect()
            }),
            "orders" => generate(a.sf, |sf, p, n| {
                OrderArrow::new(OrderGenerator::new(sf, p, n))
                    .with_batch_size(64 * 1024)
                    .collect()
            }),
            "raster" => raster_bands(&a.raster_dir),
            other => bail!("unknown table `{other}` (known: lineitem, orders, raster)"),
        }?;
        let Some(first) = batches.first() else {
            bail!("the generator produced no {table} rows");
        };
        let schema = first.schema();
        let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
        let scale = if table == "raster" {
            "Sentinel-2 scene".to_string()
        } else {
            format!("SF {}", a.sf)
        };
        outln!(
            "\n## {table}, {scale}: {rows} rows, read in {:.1} s",
            t.elapsed().as_secs_f64()
        );
        let mut t1 = Table::new(
            &[
                "column",
                "smallest: plan",
                "size",
                "exhaustive",
                "diff",
                "select ms",
                "exh. ms",
                "speedup",
                "before",
                "balanced",
                "fastest",
                "pq zstd",
                "pq snappy",
            ],
            2,
        );
        let mut t2 = Table::new(
            &[
                "column",
                "chunks",
                "select s",
                "encode s",
                "select share",
                "searches",
                "plans",
            ],
            1,
        );
        let (mut table_select, mut table_encode) = (0.0, 0.0);
        for (c, field) in schema.fields().iter().enumerate() {
            if a.column.as_ref().is_some_and(|s| !field.name().contains(s)) {
                continue;
            }
            let parts: Vec<&dyn Array> = batches.iter().map(|b| b.column(c).as_ref()).collect();
            let column = arrow::compute::concat(&parts)?;
            let m = measure_column(field, &column, a.chunks, a.chunk_rows)?;
            bars.add(&m);
            t1.row(m.row(field.name()));
            let s = selection_share(field, &column, a.chunk_rows)?;
            let share = 100.0 * s.select / (s.select + s.encode).max(1e-12);
            table_select += s.select;
            table_encode += s.encode;
            if share > bars.share {
                bars.share = share;
                bars.share_col = field.name().clone();
            }
            t2.row(vec![
                field.name().clone(),
                s.chunks.to_string(),
                format!("{:.3}", s.select),
                format!("{:.3}", s.encode),
                format!("{share:.1} %"),
                s.searches.to_string(),
                s.plans.to_string(),
            ]);
        }
        outln!(
            "\nSizes summed over {} chunks per column; speeds are decode GB/s of plain values, \
             one thread. diff = cascade (smallest) vs exhaustive, same sample, actual sizes.",
            a.chunks
        );
        out!("{}", t1.render());
        let table_share = 100.0 * table_select / (table_select + table_encode).max(1e-12);
        t2.row(vec![
            "(whole table)".into(),
            "-".into(),
            format!("{table_select:.3}"),
            format!("{table_encode:.3}"),
            format!("{table_share:.1} %"),
            "-".into(),
            "-".into(),
        ]);
        if table_share > bars.table_share {
            bars.table_share = table_share;
            bars.table_share_name = table.to_string();
        }
        outln!("\nSelection share of compression time, every chunk, as `zipflow compress`:");
        out!("{}", t2.render());
    }
    outln!(
        "\nbars: worst size vs exhaustive {:+.2} % ({}), least selection speedup {:.1}x ({}), \
         largest selection share of a table's compression time {:.1} % ({}), of a column's \
         {:.1} % ({})",
        bars.worst_diff,
        bars.worst_diff_col,
        bars.least_speedup,
        bars.least_speedup_col,
        bars.table_share,
        bars.table_share_name,
        bars.share,
        bars.share_col
    );
    Ok(())
}

type Generated = std::result::Result<Vec<RecordBatch>, arrow::error::ArrowError>;

/// The two Sentinel-2 bands as one table of uint16 columns, pixels row-major, in batches of
/// 64 Ki rows.
fn raster_bands(dir: &std::path::Path) -> Result<Vec<RecordBatch>> {
    let mut fields = Vec::new();
    let mut columns = Vec::new();
    for (name, file) in [
        ("b08_nir", "sentinel2_B08_nir.tif"),
        ("b04_red", "sentinel2_B04_red.tif"),
    ] {
        let path = dir.join(file);
        let r = zipflow_compute::raster::read_tiff(&path)
            .with_context(|| format!("raster band {}", path.display()))?;
        fields.push(arrow::datatypes::Field::new(
            name,
            arrow::datatypes::DataType::UInt16,
            false,
        ));
        columns.push(r.pixels);
    }
    let n = columns.iter().map(Vec::len).min().unwrap_or(0);
    let schema = Arc::new(arrow::datatypes::Schema::new(fields));
    (0..n)
        .step_by(64 * 1024)
        .map(|start| {
            let end = (start + 64 * 1024).min(n);
            let arrays: Vec<arrow::array::ArrayRef> = columns
                .iter()
                .map(|c| {
                    Arc::new(arrow::array::UInt16Array::from(c[start..end].to_vec()))
                        as arrow::array::ArrayRef
                })
                .collect();
            Ok(RecordBatch::try_new(schema.clone(), arrays)?)
        })
        .collect()
}

fn generate(sf: f64, part: impl Fn(f64, i32, i32) -> Generated + Sync) -> Result<Vec<RecordBatch>> {
    let parts = ((sf * 8.0).ceil() as i32).clamp(1, 1024);
    let all = (1..=parts)
        .into_par_iter()
        .map(|p| part(sf, p, parts))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    Ok(all.into_iter().flatten().collect())
}

#[derive(Default)]
struct Bars {
    worst_diff: f64,
    worst_diff_col: String,
    least_speedup: f64,
    least_speedup_col: String,
    share: f64,
    share_col: String,
    table_share: f64,
    table_share_name: String,
}

impl Bars {
    fn add(&mut self, m: &ColumnResult) {
        let diff = m.diff();
        if self.worst_diff_col.is_empty() || diff > self.worst_diff {
            self.worst_diff = diff;
            self.worst_diff_col = m.name.clone();
        }
        let speedup = m.exhaustive_secs / m.select_secs.max(1e-12);
        if self.least_speedup_col.is_empty() || speedup < self.least_speedup {
            self.least_speedup = speedup;
            self.least_speedup_col = m.name.clone();
        }
    }
}

/// Size and decode seconds of one way of storing the measured chunks.
#[derive(Default, Clone, Copy)]
struct Stored {
    bytes: u64,
    decode_secs: f64,
}

impl Stored {
    fn show(&self, plain: u64) -> String {
        format!(
            "{} {:.2}",
            bytes(self.bytes),
            plain as f64 / self.decode_secs.max(1e-12) / 1e9
        )
    }
}

struct ColumnResult {
    name: String,
    plan: String,
    plain: u64,
    smallest: Stored,
    exhaustive: u64,
    select_secs: f64,
    exhaustive_secs: f64,
    before: u64,
    balanced: Stored,
    fastest: Stored,
    zstd: Stored,
    snappy: Stored,
}

impl ColumnResult {
    fn diff(&self) -> f64 {
        100.0 * (self.smallest.bytes as f64 / self.exhaustive.max(1) as f64 - 1.0)
    }

    fn row(&self, name: &str) -> Vec<String> {
        vec![
            name.to_string(),
            self.plan.clone(),
            bytes(self.smallest.bytes),
            bytes(self.exhaustive),
            format!("{:+.2} %", self.diff()),
            format!("{:.1}", self.select_secs * 1e3),
            format!("{:.1}", self.exhaustive_secs * 1e3),
            format!("{:.0}x", self.exhaustive_secs / self.select_secs.max(1e-12)),
            bytes(self.before),
            self.balanced.show(self.plain),
            self.fastest.show(self.plain),
            self.zstd.show(self.plain),
            self.snappy.show(self.plain),
        ]
    }
}

/// Median seconds of `reps` runs of `f`.
fn median(reps: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    let mut t = Vec::with_capacity(reps);
    for _ in 0..reps {
        let s = Instant::now();
        f()?;
        t.push(s.elapsed().as_secs_f64());
    }
    t.sort_by(f64::total_cmp);
    Ok(t[t.len() / 2])
}

/// Encodes with `plan`, returns the size and the median decode time.
fn store(plan: &Plan, values: &Values) -> Result<Stored> {
    let bytes = zipflow_encodings::encode(plan, values)?.to_bytes()?;
    let secs = median(5, || {
        let back = zipflow_encodings::decode_bytes(&bytes)?;
        std::hint::black_box(back);
        Ok(())
    })?;
    Ok(Stored {
        bytes: bytes.len() as u64,
        decode_secs: secs,
    })
}

fn add(a: &mut Stored, b: Stored) {
    a.bytes += b.bytes;
    a.decode_secs += b.decode_secs;
}

fn measure_column(
    field: &Field,
    column: &ArrayRef,
    nchunks: usize,
    chunk_rows: usize,
) -> Result<ColumnResult> {
    let total = column.len().div_ceil(chunk_rows);
    let picks: Vec<usize> = (0..nchunks.min(total))
        .map(|k| k * total / nchunks.min(total))
        .collect();
    let options = |objective| SelectOptions {
        objective,
        ..SelectOptions::default()
    };
    let mut r = ColumnResult {
        name: field.name().clone(),
        plan: String::new(),
        plain: 0,
        smallest: Stored::default(),
        exhaustive: 0,
        select_secs: 0.0,
        exhaustive_secs: 0.0,
        before: 0,
        balanced: Stored::default(),
        fastest: Stored::default(),
        zstd: Stored::default(),
        snappy: Stored::default(),
    };
    let mut arrays = Vec::new();
    for &i in &picks {
        let start = i * chunk_rows;
        let slice = column.slice(start, chunk_rows.min(column.len() - start));
        let (_, values, _) = zipflow_format::arrow::to_column(field, slice.as_ref())?;
        arrays.push(slice);
        r.plain += values.plain_size() as u64;

        let t = Instant::now();
        let small = search::select(&values, false, &options(Objective::Smallest));
        r.select_secs += t.elapsed().as_secs_f64();
        let (plan, _) = zipflow_select::encode_selection(&values, small)?;
        if r.plan.is_empty() {
            r.plan = plan.to_string();
        }
        add(&mut r.smallest, store(&plan, &values)?);

        let t = Instant::now();
        let all = search::exhaustive(&values, false, &options(Objective::Smallest));
        r.exhaustive_secs += t.elapsed().as_secs_f64();
        let (_, node) = zipflow_select::encode_selection(&values, all)?;
        r.exhaustive += node.size() as u64;

        let (_, node) = zipflow_select::choose_among_and_encode(
            &values,
            &zipflow_select::candidates(values.ptype()),
            false,
        )?;
        r.before += node.size() as u64;

        for (objective, slot) in [
            (Objective::Balanced, &mut r.balanced),
            (Objective::Fastest, &mut r.fastest),
        ] {
            let s = search::select(&values, false, &options(objective));
            let (plan, _) = zipflow_select::encode_selection(&values, s)?;
            add(slot, store(&plan, &values)?);
        }
    }
    r.zstd = parquet_stored(
        field,
        &arrays,
        Compression::ZSTD(ZstdLevel::try_new(3)?),
        chunk_rows,
    )?;
    r.snappy = parquet_stored(field, &arrays, Compression::SNAPPY, chunk_rows)?;
    Ok(r)
}

/// The chunks as one Parquet column (one row group per chunk): compressed bytes of the
/// column chunks, and the median time to read them back as Arrow.
fn parquet_stored(
    field: &Field,
    arrays: &[ArrayRef],
    compression: Compression,
    chunk_rows: usize,
) -> Result<Stored> {
    let schema = Arc::new(Schema::new(vec![field.clone()]));
    let props = WriterProperties::builder()
        .set_compression(compression)
        .set_max_row_group_row_count(Some(chunk_rows))
        .build();
    let mut buf = Vec::new();
    let mut w = ArrowWriter::try_new(&mut buf, schema.clone(), Some(props))?;
    for a in arrays {
        w.write(&RecordBatch::try_new(schema.clone(), vec![a.clone()])?)?;
    }
    let meta = w.close()?;
    let compressed: i64 = meta
        .row_groups()
        .iter()
        .map(|g| g.column(0).compressed_size())
        .sum();
    let bytes = bytes::Bytes::from(buf);
    let secs = median(5, || {
        let reader = ParquetRecordBatchReaderBuilder::try_new(bytes.clone())?
            .with_batch_size(chunk_rows)
            .build()?;
        for b in reader {
            std::hint::black_box(b?);
        }
        Ok(())
    })?;
    Ok(Stored {
        bytes: compressed.max(0) as u64,
        decode_secs: secs,
    })
}

struct Share {
    chunks: usize,
    select: f64,
    encode: f64,
    /// Chunks on which the full search ran.
    searches: usize,
    plans: usize,
}

/// Every chunk of the column through a [`ColumnSelector`] with the default options, as the
/// writer does: the time of its searches, against converting, encoding and serialising the
/// same chunks with the plans it chose given up front.
fn selection_share(field: &Field, column: &ArrayRef, chunk_rows: usize) -> Result<Share> {
    let options = SelectOptions::default();
    let mut selector = ColumnSelector::new();
    let mut given = 0.0;
    let (mut chunks, mut searches) = (0, 0);
    let mut plans: Vec<Plan> = Vec::new();
    let mut start = 0;
    while start < column.len() {
        let slice = column.slice(start, chunk_rows.min(column.len() - start));
        start += slice.len();
        let (_, values, _) = zipflow_format::arrow::to_column(field, slice.as_ref())?;
        let (plan, node, searched) = selector.choose_and_encode(&values, false, &options)?;
        searches += usize::from(searched);
        std::hint::black_box(node.to_bytes()?);
        let t = Instant::now();
        let (_, values, _) = zipflow_format::arrow::to_column(field, slice.as_ref())?;
        let node = zipflow_encodings::encode(&plan, &values)?;
        std::hint::black_box(node.to_bytes()?);
        given += t.elapsed().as_secs_f64();
        if !plans.contains(&plan) {
            plans.push(plan);
        }
        chunks += 1;
    }
    // The searches are timed inside the selector: the difference of the two passes would
    // drown them in the passes' noise.
    Ok(Share {
        chunks,
        select: selector.searching().as_secs_f64(),
        encode: given,
        searches,
        plans: plans.len(),
    })
}
