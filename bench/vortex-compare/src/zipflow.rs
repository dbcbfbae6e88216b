//! zipflow: write the table with `TableWriter`, verify it, time single-thread decode.

use crate::timing::{Timing, measure};
use anyhow::{Result, bail};
use arrow::array::{Array, ArrayRef};
use arrow::record_batch::RecordBatch;
use std::path::Path;
use zipflow_encodings::Scratch;
use zipflow_format::ZfFile;
use zipflow_format::arrow::ArrayPool;
use zipflow_format::table::{TableWriter, WriteOptions};

/// Sizes and decode times of zipflow on one table.
#[derive(Debug)]
pub struct ZipflowResult {
    /// Per column: sum of its chunk payloads ([`zipflow_format::ChunkMeta::compressed_bytes`]).
    pub column_bytes: Vec<u64>,
    /// The whole file, footer and zone maps included.
    pub file_bytes: u64,
    /// Every chunk of every column into reused buffers (`read_chunk` + `Scratch::give`).
    pub reused: Timing,
    /// Every chunk of every column to a fresh Arrow array of the original type (`read_array`).
    pub to_arrow: Timing,
    /// The same into recycled buffers (`read_array_in`, each array handed back with
    /// `ArrayPool::recycle` before the next).
    pub to_arrow_pooled: Timing,
    /// Per column: its chunks alone, as `to_arrow_pooled`.
    pub column_to_arrow: Vec<Timing>,
}

/// Writes `batches` to `path` (replacing it), checks every value comes back, and times
/// decoding on the calling thread, `runs` passes each.
pub fn run(
    batches: &[RecordBatch],
    originals: &[ArrayRef],
    path: &Path,
    chunk_rows: usize,
    runs: usize,
) -> Result<ZipflowResult> {
    let Some(first) = batches.first() else {
        bail!("no batches to write");
    };
    let opts = WriteOptions {
        chunk_rows,
        overwrite: true,
        chooser: Some(zipflow_select::Chooser::shared(Default::default())),
        ..WriteOptions::default()
    };
    let mut w = TableWriter::create(path, first.schema(), opts)?;
    for b in batches {
        w.write(b)?;
    }
    let summary = w.finish()?;

    let zf = ZfFile::open(path)?;
    let ncol = zf.columns().len();
    verify(&zf, originals)?;
    let column_bytes = (0..ncol)
        .map(|c| {
            (0..zf.num_chunks())
                .map(|i| zf.chunk_meta(c, i).compressed_bytes())
                .sum()
        })
        .collect();

    let mut scratch = Scratch::default();
    let reused = measure(runs, || {
        for c in 0..ncol {
            for i in 0..zf.num_chunks() {
                let (values, _validity) = zf.read_chunk(c, i, &mut scratch)?;
                std::hint::black_box(&values);
                scratch.give(values);
            }
        }
        Ok(())
    })?;
    let to_arrow = measure(runs, || {
        for c in 0..ncol {
            for i in 0..zf.num_chunks() {
                std::hint::black_box(zf.read_array(c, i, &mut scratch)?);
            }
        }
        Ok(())
    })?;
    let mut pool = ArrayPool::default();
    let to_arrow_pooled = measure(runs, || {
        for c in 0..ncol {
            for i in 0..zf.num_chunks() {
                let array = zf.read_array_in(c, i, &mut pool)?;
                std::hint::black_box(&array);
                pool.recycle(array);
            }
        }
        Ok(())
    })?;
    let column_to_arrow = (0..ncol)
        .map(|c| {
            measure(runs, || {
                for i in 0..zf.num_chunks() {
                    let array = zf.read_array_in(c, i, &mut pool)?;
                    std::hint::black_box(&array);
                    pool.recycle(array);
                }
                Ok(())
            })
        })
        .collect::<Result<_>>()?;
    Ok(ZipflowResult {
        column_to_arrow,
        column_bytes,
        file_bytes: summary.bytes,
        reused,
        to_arrow,
        to_arrow_pooled,
    })
}

/// Every chunk of every column equals the rows of `originals` it covers.
fn verify(zf: &ZfFile, originals: &[ArrayRef]) -> Result<()> {
    let mut scratch = Scratch::default();
    for (c, original) in originals.iter().enumerate() {
        let mut row = 0;
        for i in 0..zf.num_chunks() {
            let got = zf.read_array(c, i, &mut scratch)?;
            if row + got.len() > original.len()
                || got.as_ref() != original.slice(row, got.len()).as_ref()
            {
                bail!("zipflow: column {c}, chunk {i} does not round-trip");
            }
            row += got.len();
        }
        if row != original.len() {
            bail!(
                "zipflow: column {c} has {row} rows, {} went in",
                original.len()
            );
        }
    }
    Ok(())
}
