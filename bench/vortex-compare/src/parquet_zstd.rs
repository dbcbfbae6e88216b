//! Parquet+zstd(3) written and read by arrow-rs, in memory, on one thread.

use crate::timing::{Timing, measure};
use anyhow::{Result, bail};
use arrow::record_batch::RecordBatch;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

/// Sizes and decode time of Parquet+zstd(3) on one table.
#[derive(Debug)]
pub struct ParquetResult {
    /// Per column: compressed size of its column chunks, summed over row groups.
    pub column_bytes: Vec<u64>,
    /// The whole file, footer included.
    pub file_bytes: u64,
    /// Reading every column of the in-memory file to Arrow record batches.
    pub to_arrow: Timing,
}

/// Writes `batches` to an in-memory Parquet file (zstd level 3, other settings default, as
/// `zipflow tpch` does) and times reading it back in batches of `batch_rows` rows (as
/// `zipflow tpch` does: batches as large as zipflow's chunks), `runs` passes.
pub fn run(
    batches: &[RecordBatch],
    rows: usize,
    batch_rows: usize,
    runs: usize,
) -> Result<ParquetResult> {
    let Some(first) = batches.first() else {
        bail!("no batches to write");
    };
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(3)?))
        .build();
    let mut buf = Vec::new();
    let mut w = ArrowWriter::try_new(&mut buf, first.schema(), Some(props))?;
    for b in batches {
        w.write(b)?;
    }
    let meta = w.close()?;
    let mut column_bytes = vec![0u64; first.num_columns()];
    for rg in meta.row_groups() {
        for (c, cc) in rg.columns().iter().enumerate() {
            if let Some(total) = column_bytes.get_mut(c) {
                *total += u64::try_from(cc.compressed_size())?;
            }
        }
    }
    let file_bytes = buf.len() as u64;
    let bytes = bytes::Bytes::from(buf);

    let read_rows = ParquetRecordBatchReaderBuilder::try_new(bytes.clone())?
        .build()?
        .map(|b| b.map(|b| b.num_rows()))
        .sum::<Result<usize, _>>()?;
    if read_rows != rows {
        bail!("Parquet: {read_rows} rows back, {rows} went in");
    }
    let to_arrow = measure(runs, || {
        let reader = ParquetRecordBatchReaderBuilder::try_new(bytes.clone())?
            .with_batch_size(batch_rows)
            .build()?;
        for b in reader {
            std::hint::black_box(b?);
        }
        Ok(())
    })?;
    Ok(ParquetResult {
        column_bytes,
        file_bytes,
        to_arrow,
    })
}
