//! Arrow record batches from a file, its columns decoded on the GPU.
//!
//! Each column decodes whole on the device and is cut into the file's row groups on the
//! host; validity stays on the CPU ([`ZfFile::read_validity`]), as do columns whose plans the
//! GPU does not decode (a composition the code generator has no code for), read as
//! [`ZfFile::read_array`] reads them.

use crate::decode::{decode_column_to_host, split_chunks};
use crate::device::Gpu;
use arrow::array::ArrayRef;
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use zipflow_core::{Error, PType, Result, Values};
use zipflow_encodings::Scratch;
use zipflow_format::ZfFile;

/// All row groups of `zf` as record batches, columns decoded on `gpu` where it decodes their
/// plans and on the CPU otherwise.
pub fn read_batches(gpu: &Gpu, zf: &ZfFile) -> Result<Vec<RecordBatch>> {
    let rows = chunk_rows(zf);
    // Per column: the decoded chunks, or None for columns left to the CPU.
    let mut decoded: Vec<Option<Vec<Values>>> = Vec::with_capacity(zf.columns().len());
    for (c, meta) in zf.columns().iter().enumerate() {
        match decode_column_to_host(gpu, zf, c) {
            Ok(values) => decoded.push(Some(split_chunks(&values, &rows)?)),
            // A primitive the GPU does not decode yet: this column stays on the CPU.
            Err(Error::Unsupported { .. }) => decoded.push(None),
            Err(e) => return Err(e.at_column(&meta.name)),
        }
    }
    let schema = zf.arrow_schema();
    let mut scratch = Scratch::default();
    let mut batches = Vec::with_capacity(rows.len());
    for (i, &n) in rows.iter().enumerate() {
        let mut arrays: Vec<ArrayRef> = Vec::with_capacity(decoded.len());
        for (c, col) in decoded.iter_mut().enumerate() {
            let array = match col {
                Some(parts) => {
                    let values = std::mem::replace(&mut parts[i], Values::empty(PType::U8));
                    let validity = zf.read_validity(c, i, &mut scratch)?;
                    zipflow_format::arrow::from_column(
                        schema.field(c),
                        zf.columns()[c].column_type,
                        values,
                        validity,
                    )?
                }
                None => zf.read_array(c, i, &mut scratch)?,
            };
            arrays.push(array);
        }
        let options = RecordBatchOptions::new().with_row_count(Some(n));
        let batch = RecordBatch::try_new_with_options(schema.clone(), arrays, &options)
            .map_err(|e| Error::invalid(format!("assembling row group {i}: {e}")))?;
        batches.push(batch);
    }
    Ok(batches)
}

/// Rows of each of the file's chunks (row groups).
fn chunk_rows(zf: &ZfFile) -> Vec<usize> {
    (0..zf.num_chunks())
        .map(|i| {
            let first = i as u64 * zf.chunk_rows();
            zf.chunk_rows().min(zf.num_rows() - first) as usize
        })
        .collect()
}
