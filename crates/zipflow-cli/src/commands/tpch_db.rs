//! `zipflow tpch --db DIR`: the eight TPC-H tables as .zf files, one per table, for
//! queries with joins (`zipflow sql --db DIR`).
//!
//! Each table is generated a batch at a time and compressed as it comes (lineitem a window
//! of parts at a time, in parallel), so memory stays a few batches whatever the scale
//! factor. Each file is written to a temporary name and renamed at its end.

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use arrow::record_batch::RecordBatch;
use tpchgen::generators::{
    CustomerGenerator, NationGenerator, OrderGenerator, PartGenerator, PartSuppGenerator,
    RegionGenerator, SupplierGenerator,
};
use tpchgen_arrow::{
    CustomerArrow, NationArrow, OrderArrow, PartArrow, PartSuppArrow, RegionArrow, SupplierArrow,
};
use zipflow_format::table::{TableWriter, WriteOptions};

use super::lineitem::Lineitem;
use crate::out::{out, outln};
use crate::report::{Table, bytes, ratio};

/// Rows of the batches generated.
const BATCH_ROWS: usize = 64 * 1024;

/// The tables in the order they are written (smallest first).
pub const TABLES: [&str; 8] = [
    "region", "nation", "supplier", "customer", "part", "partsupp", "orders", "lineitem",
];

/// Batches of table `name` at `sf`.
pub(crate) fn batches(
    name: &str,
    sf: f64,
) -> Result<Box<dyn Iterator<Item = Result<RecordBatch>>>> {
    fn each<I, E>(it: I) -> Box<dyn Iterator<Item = Result<RecordBatch>>>
    where
        I: Iterator<Item = Result<RecordBatch, E>> + 'static,
        E: std::error::Error + Send + Sync + 'static,
    {
        Box::new(it.map(|b| b.map_err(anyhow::Error::from)))
    }
    Ok(match name {
        "region" => {
            each(RegionArrow::new(RegionGenerator::new(sf, 1, 1)).with_batch_size(BATCH_ROWS))
        }
        "nation" => {
            each(NationArrow::new(NationGenerator::new(sf, 1, 1)).with_batch_size(BATCH_ROWS))
        }
        "supplier" => {
            each(SupplierArrow::new(SupplierGenerator::new(sf, 1, 1)).with_batch_size(BATCH_ROWS))
        }
        "customer" => {
            each(CustomerArrow::new(CustomerGenerator::new(sf, 1, 1)).with_batch_size(BATCH_ROWS))
        }
        "part" => each(PartArrow::new(PartGenerator::new(sf, 1, 1)).with_batch_size(BATCH_ROWS)),
        "partsupp" => {
            each(PartSuppArrow::new(PartSuppGenerator::new(sf, 1, 1)).with_batch_size(BATCH_ROWS))
        }
        "orders" => {
            each(OrderArrow::new(OrderGenerator::new(sf, 1, 1)).with_batch_size(BATCH_ROWS))
        }
        "lineitem" => Box::new(Lineitem::new(sf)),
        other => bail!("no TPC-H table `{other}`"),
    })
}

/// Writes every table at `sf` into `dir` as NAME.zf and prints what each took.
pub fn write(dir: &Path, sf: f64, chunk_rows: usize, force: bool) -> Result<()> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("--db {}: cannot create the directory", dir.display()))?;
    let mut report = Table::new(&["table", "rows", "zipflow", "ratio", "seconds"], 1);
    let start = Instant::now();
    for name in TABLES {
        let bar = super::tpch::spinner(&format!("generating and compressing {name}"), false);
        let t = Instant::now();
        let path = dir.join(format!("{name}.zf"));
        let mut it = batches(name, sf)?;
        let Some(first) = it.next().transpose()? else {
            bail!("the generator produced no {name} rows at SF {sf}");
        };
        let opts = WriteOptions {
            chunk_rows,
            overwrite: force,
            chooser: Some(zipflow_select::Chooser::shared(Default::default())),
            ..WriteOptions::default()
        };
        let mut w = TableWriter::create(&path, first.schema(), opts)?;
        w.write(&first)?;
        drop(first);
        for b in it {
            w.write(&b?)?;
        }
        let summary = w.finish()?;
        bar.finish_and_clear();
        report.row(vec![
            name.to_string(),
            summary.rows.to_string(),
            bytes(summary.bytes),
            ratio(
                summary.columns.iter().map(|c| c.plain_bytes).sum(),
                summary.bytes,
            ),
            format!("{:.2}", t.elapsed().as_secs_f64()),
        ]);
    }
    out!("{}", report.render());
    outln!(
        "SF {sf}: eight tables in {} ({:.1} s); query them with `zipflow sql --db {}`",
        dir.display(),
        start.elapsed().as_secs_f64(),
        dir.display()
    );
    Ok(())
}
