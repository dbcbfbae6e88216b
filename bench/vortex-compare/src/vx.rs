//! Vortex 0.90 with its default (BtrBlocks-style) compressor, kept to one thread.
//!
//! The session's runtime handle is a [`SingleThreadRuntime`]: every task the writer and the
//! scan spawn (CPU work included) runs on the calling thread, and Vortex starts no threads of
//! its own (its `available_parallelism` only sets how many tasks are in flight). Two forms
//! are measured:
//! - a **file** written by the default write strategy (`session.write_options()`: row blocks
//!   of 8192 rows coalesced to ~1 MB, dictionary layouts, zone maps) into a `Vec<u8>`, opened
//!   with `open_buffer` and scanned to Arrow record batches;
//! - **arrays**: each input batch compressed by `BtrBlocksCompressor::from_session` (the
//!   compressor's default preset) and executed back to an Arrow struct array.

use crate::timing::{Timing, measure};
use anyhow::{Result, bail};
use arrow::array::AsArray;
use arrow::array::{Array, ArrayRef as ArrowArrayRef, RecordBatch};
use arrow::datatypes::{Field, SchemaRef};
use vortex::VortexSessionDefault;
use vortex::array::{ArrayRef, VortexSessionExecute};
use vortex::arrow::ArrowSessionExt;
use vortex::buffer::ByteBuffer;
use vortex::compressor::BtrBlocksCompressor;
use vortex::file::{OpenOptionsSessionExt, WriteOptionsSessionExt};
use vortex::io::runtime::BlockingRuntime;
use vortex::io::runtime::single::SingleThreadRuntime;
use vortex::io::session::RuntimeSessionExt;
use vortex::session::VortexSession;

/// Sizes and decode times of Vortex on one table.
#[derive(Debug)]
pub struct VortexFigures {
    /// Size of the file (the in-memory buffer the writer filled): segments, layout, footer.
    pub file_bytes: u64,
    /// Per column: the segments the file attributes to it (`compressed_column_sizes`, which
    /// counts its zone maps and dictionaries too).
    pub column_bytes: Vec<u64>,
    /// Scanning the whole file to Arrow record batches.
    pub file_to_arrow: Timing,
    /// Sum of `nbytes()` of the compressed arrays (buffers only, no framing).
    pub array_bytes: u64,
    /// Executing every compressed array to an Arrow struct array.
    pub arrays_to_arrow: Timing,
    /// Per column: the column's batches compressed alone, executed to Arrow.
    pub column_to_arrow: Vec<Timing>,
}

/// Compresses `batches` both ways, checks every value comes back, and times decoding to
/// Arrow, `runs` passes each.
pub fn run(schema: &SchemaRef, batches: &[RecordBatch], runs: usize) -> Result<VortexFigures> {
    let runtime = SingleThreadRuntime::default();
    let session = VortexSession::default().with_handle(runtime.handle());
    let dtype = session.arrow().from_arrow_schema(schema)?;
    let chunks = batches
        .iter()
        .map(|b| session.arrow().from_arrow_record_batch(b.clone(), schema))
        .collect::<Result<Vec<ArrayRef>, _>>()?;
    let originals = concat_columns(batches)?;

    // File.
    let mut buf = Vec::new();
    let mut writer = session
        .write_options()
        .blocking(&runtime)
        .writer(&mut buf, dtype);
    for chunk in &chunks {
        writer.push(chunk.clone())?;
    }
    let summary = writer.finish()?;
    let column_bytes = summary.compressed_column_sizes()?;
    let file = ByteBuffer::from(buf);
    let file_bytes = file.len() as u64;
    let read_file = || -> Result<Vec<RecordBatch>> {
        let reader = session
            .open_options()
            .open_buffer(file.clone())?
            .scan()?
            .into_record_batch_reader(SchemaRef::clone(schema), &runtime)?;
        Ok(reader.collect::<Result<Vec<_>, _>>()?)
    };
    if concat_columns(&read_file()?)? != originals {
        bail!("Vortex file: the values read back differ from the input");
    }
    let file_to_arrow = measure(runs, || {
        std::hint::black_box(read_file()?);
        Ok(())
    })?;

    // Arrays.
    let compressor = BtrBlocksCompressor::from_session(&session);
    let mut ctx = session.create_execution_ctx();
    let compressed = chunks
        .iter()
        .map(|c| compressor.compress(c, &mut ctx))
        .collect::<Result<Vec<ArrayRef>, _>>()?;
    let array_bytes = compressed.iter().map(ArrayRef::nbytes).sum();
    let struct_field = Field::new_struct("", schema.fields().clone(), false);
    let to_arrow = |c: &ArrayRef| -> Result<ArrowArrayRef> {
        let mut ctx = session.create_execution_ctx();
        Ok(session
            .arrow()
            .execute_arrow(c.clone(), Some(&struct_field), &mut ctx)?)
    };
    for (c, b) in compressed.iter().zip(batches) {
        if to_arrow(c)?.as_struct().columns() != b.columns() {
            bail!("Vortex arrays: the values executed back differ from the input");
        }
    }
    let arrays_to_arrow = measure(runs, || {
        for c in &compressed {
            std::hint::black_box(to_arrow(c)?);
        }
        Ok(())
    })?;

    let mut column_to_arrow = Vec::with_capacity(schema.fields().len());
    for (c, f) in schema.fields().iter().enumerate() {
        let one = SchemaRef::new(arrow::datatypes::Schema::new(vec![f.clone()]));
        let field = Field::new_struct("", one.fields().clone(), false);
        let compressed = batches
            .iter()
            .map(|b| {
                let b = RecordBatch::try_new(one.clone(), vec![b.column(c).clone()])?;
                let a = session.arrow().from_arrow_record_batch(b, &one)?;
                Ok(compressor.compress(&a, &mut ctx)?)
            })
            .collect::<Result<Vec<ArrayRef>>>()?;
        column_to_arrow.push(measure(runs, || {
            for a in &compressed {
                let mut ctx = session.create_execution_ctx();
                std::hint::black_box(session.arrow().execute_arrow(
                    a.clone(),
                    Some(&field),
                    &mut ctx,
                )?);
            }
            Ok(())
        })?);
    }

    Ok(VortexFigures {
        column_to_arrow,
        file_bytes,
        column_bytes,
        file_to_arrow,
        array_bytes,
        arrays_to_arrow,
    })
}

/// Each column of `batches` as one array.
fn concat_columns(batches: &[RecordBatch]) -> Result<Vec<ArrowArrayRef>> {
    let ncol = batches.first().map_or(0, RecordBatch::num_columns);
    (0..ncol)
        .map(|c| {
            let parts: Vec<&dyn Array> = batches.iter().map(|b| b.column(c).as_ref()).collect();
            Ok(arrow::compute::concat(&parts)?)
        })
        .collect()
}
