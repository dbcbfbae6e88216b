//! The workload: TPC-H lineitem generated in-process, cut to the 12 main columns, with the
//! plain size every speed is measured against.

use anyhow::{Context, Result, bail};
use arrow::array::{Array, AsArray};
use arrow::datatypes::DataType;
use arrow::record_batch::RecordBatch;
use rayon::prelude::*;
use tpchgen::generators::LineItemGenerator;
use tpchgen_arrow::LineItemArrow;

/// Columns left out of the comparison (the other 12 are the "main" columns).
pub const NOT_MAIN: [&str; 4] = [
    "l_linenumber",
    "l_commitdate",
    "l_receiptdate",
    "l_shipinstruct",
];

/// Generates lineitem at `sf` in parallel parts concatenated in order (as `zipflow tpch`
/// does) and keeps the 12 main columns.
pub fn generate_lineitem(sf: f64) -> Result<Vec<RecordBatch>> {
    let parts = ((sf * 8.0).ceil() as i32).clamp(1, 1024);
    let parts: Vec<Vec<RecordBatch>> = (1..=parts)
        .into_par_iter()
        .map(|part| {
            LineItemArrow::new(LineItemGenerator::new(sf, part, parts))
                .with_batch_size(64 * 1024)
                .collect::<Result<Vec<_>, _>>()
        })
        .collect::<Result<_, _>>()
        .context("generating lineitem")?;
    let batches: Vec<RecordBatch> = parts.into_iter().flatten().collect();
    let Some(first) = batches.first() else {
        bail!("the generator produced no rows at SF {sf}");
    };
    let schema = first.schema();
    let keep: Vec<usize> = (0..schema.fields().len())
        .filter(|&c| !NOT_MAIN.contains(&schema.field(c).name().as_str()))
        .collect();
    batches
        .iter()
        .map(|b| b.project(&keep).context("projecting the main columns"))
        .collect()
}

/// Plain size of an Arrow array: values at their width, decimals as 8-byte integers, strings
/// as bytes + 4-byte offsets (as `zipflow tpch` counts them).
pub fn plain_size(a: &dyn Array) -> u64 {
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

/// Plain size of every column, summed over `batches`.
pub fn plain_sizes(batches: &[RecordBatch]) -> Vec<u64> {
    let ncol = batches.first().map_or(0, RecordBatch::num_columns);
    (0..ncol)
        .map(|c| {
            batches
                .iter()
                .map(|b| plain_size(b.column(c).as_ref()))
                .sum()
        })
        .collect()
}
