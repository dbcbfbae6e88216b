//! Text mode: any file's bytes as a one-column table, so whole text files get zipflow's text
//! plans (`words`, `fsst`, `chartable`, `ans`, ...) and its chunk index.
//!
//! The table has one non-null `u8` column named [`TEXT_COLUMN`], in chunks of
//! [`TEXT_CHUNK_BYTES`] bytes; the Arrow schema carries the metadata key [`TEXT_KEY`] so
//! readers know to give the bytes back as a file rather than as a table.
//!
//! ```
//! use zipflow_format::text;
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("t.zf");
//! let data = b"it was the best of times, it was the worst of times".repeat(100);
//! let options = text::TextOptions {
//!     chooser: Some(zipflow_select::Chooser::shared(Default::default())),
//!     ..Default::default()
//! };
//! text::compress(&data[..], &path, &options, |_| {}).unwrap();
//! let f = zipflow_format::ZfFile::open(&path).unwrap();
//! assert!(text::is_text(&f));
//! let mut back = Vec::new();
//! text::decompress(&f, &mut back, |_| {}).unwrap();
//! assert_eq!(back, data);
//! ```

use crate::ZfFile;
use crate::table::{FileSummary, TableWriter, WriteOptions};
use arrow::array::{RecordBatch, UInt8Array};
use arrow::buffer::ScalarBuffer;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::Path;
use std::sync::Arc;
use zipflow_core::{Error, IntVec, MAX_CHUNK_LEN, Plan, Result, Values};
use zipflow_encodings::{PlanChooser, Scratch};

/// The one column of a text table.
pub const TEXT_COLUMN: &str = "text";

/// Schema metadata key marking a text table (value `"1"`).
pub const TEXT_KEY: &str = "zipflow.text";

/// Bytes per chunk: the largest chunk, so dictionaries and tables amortise.
pub const TEXT_CHUNK_BYTES: usize = MAX_CHUNK_LEN;

/// How a text file is compressed.
#[derive(Debug, Clone)]
pub struct TextOptions {
    /// A forced plan; by default one is chosen per chunk among the text candidates.
    pub plan: Option<Plan>,
    /// Bytes per chunk (at most [`TEXT_CHUNK_BYTES`]).
    pub chunk_bytes: usize,
    /// Replace an existing output.
    pub overwrite: bool,
    /// Chooses each chunk's plan among its text plans; needed unless `plan` is given.
    pub chooser: Option<Arc<dyn PlanChooser>>,
}

impl Default for TextOptions {
    fn default() -> Self {
        TextOptions {
            plan: None,
            chunk_bytes: TEXT_CHUNK_BYTES,
            overwrite: false,
            chooser: None,
        }
    }
}

/// The schema of a text table.
pub fn text_schema() -> SchemaRef {
    let metadata = HashMap::from([(TEXT_KEY.to_string(), "1".to_string())]);
    Arc::new(Schema::new_with_metadata(
        vec![Field::new(TEXT_COLUMN, DataType::UInt8, false)],
        metadata,
    ))
}

/// Whether `f` holds a text file.
pub fn is_text(f: &ZfFile) -> bool {
    f.arrow_schema()
        .metadata()
        .get(TEXT_KEY)
        .is_some_and(|v| v == "1")
        && f.columns().len() == 1
}

/// Compresses all of `input` into a text table at `out`; `progress` gets the bytes read so
/// far after each chunk. Nothing is left at `out` if it fails.
pub fn compress(
    mut input: impl Read,
    out: &Path,
    options: &TextOptions,
    mut progress: impl FnMut(u64),
) -> Result<FileSummary> {
    let chunk = options.chunk_bytes;
    if chunk == 0 || chunk > TEXT_CHUNK_BYTES {
        return Err(Error::invalid(format!(
            "text chunks must hold 1 to {TEXT_CHUNK_BYTES} bytes, not {chunk}"
        )));
    }
    let mut write = WriteOptions {
        chunk_rows: chunk,
        overwrite: options.overwrite,
        chooser: options.chooser.clone(),
        ..WriteOptions::default()
    };
    match &options.plan {
        Some(p) => {
            write.plans.insert(TEXT_COLUMN.to_string(), p.clone());
        }
        None => write.text_columns.push(TEXT_COLUMN.to_string()),
    }
    let schema = text_schema();
    let mut writer = TableWriter::create(out, schema.clone(), write)?;
    let mut read = 0u64;
    loop {
        let mut buf = Vec::with_capacity(chunk);
        (&mut input)
            .take(chunk as u64)
            .read_to_end(&mut buf)
            .map_err(|e| Error::external("reading the input", e))?;
        if buf.is_empty() {
            break;
        }
        read += buf.len() as u64;
        let column = UInt8Array::new(ScalarBuffer::from(buf), None);
        let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(column)])
            .map_err(|e| Error::external("building a text batch", e))?;
        writer.write(&batch)?;
        progress(read);
    }
    writer.finish()
}

/// Writes the bytes of text table `f` to `out`; `progress` gets the bytes written so far
/// after each chunk. Returns the byte count.
pub fn decompress(f: &ZfFile, out: &mut impl Write, mut progress: impl FnMut(u64)) -> Result<u64> {
    if !is_text(f) {
        return Err(
            Error::invalid("not a text file (compressed without --text)").in_file(f.path()),
        );
    }
    let mut scratch = Scratch::default();
    let mut written = 0u64;
    for chunk in 0..f.num_chunks() {
        let (values, _) = f.read_chunk(0, chunk, &mut scratch)?;
        let Values::Int(IntVec::U8(bytes)) = &values else {
            return Err(Error::corrupt("text chunk is not a u8 stream")
                .at_chunk(chunk as u32)
                .in_file(f.path()));
        };
        out.write_all(bytes)
            .map_err(|e| Error::external("writing the output", e))?;
        written += bytes.len() as u64;
        scratch.give(values);
        progress(written);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(data: &[u8], options: &TextOptions) -> Result<Vec<u8>> {
        let dir = tempfile::tempdir().map_err(|e| Error::external("tempdir", e))?;
        let path = dir.path().join("t.zf");
        let mut seen = Vec::new();
        let summary = compress(data, &path, options, |n| seen.push(n))?;
        assert_eq!(summary.rows, data.len() as u64);
        assert_eq!(seen.last().copied().unwrap_or(0), data.len() as u64);
        let f = ZfFile::open(&path)?;
        assert!(is_text(&f));
        let mut back = Vec::new();
        assert_eq!(decompress(&f, &mut back, |_| {})?, data.len() as u64);
        Ok(back)
    }

    #[test]
    fn any_bytes_round_trip_in_several_chunks() -> Result<()> {
        let mut x = 7u64;
        let mut data: Vec<u8> = b"some text, then every byte value: ".repeat(300);
        data.extend(0..=255u8);
        data.extend((0..20_000).map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        }));
        let options = TextOptions {
            chunk_bytes: 4096,
            chooser: Some(zipflow_select::Chooser::shared(Default::default())),
            ..TextOptions::default()
        };
        assert_eq!(round_trip(&data, &options)?, data);
        assert_eq!(round_trip(&[], &options)?, Vec::<u8>::new());
        let forced = TextOptions {
            plan: Some("chardict16".parse()?),
            ..options
        };
        assert_eq!(round_trip(&data, &forced)?, data);
        Ok(())
    }

    #[test]
    fn tables_are_not_text() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::external("tempdir", e))?;
        let path = dir.path().join("t.zf");
        let schema = Arc::new(Schema::new(vec![Field::new(
            TEXT_COLUMN,
            DataType::UInt8,
            false,
        )]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![Arc::new(UInt8Array::from(vec![1u8, 2, 3]))],
        )
        .map_err(|e| Error::external("batch", e))?;
        let mut w = TableWriter::create(
            &path,
            schema,
            WriteOptions {
                chooser: Some(zipflow_select::Chooser::shared(Default::default())),
                ..WriteOptions::default()
            },
        )?;
        w.write(&batch)?;
        w.finish()?;
        let f = ZfFile::open(&path)?;
        assert!(!is_text(&f));
        let e = decompress(&f, &mut Vec::new(), |_| {});
        assert!(
            e.as_ref()
                .is_err_and(|e| e.to_string().contains("not a text file")),
            "{e:?}"
        );
        Ok(())
    }
}
