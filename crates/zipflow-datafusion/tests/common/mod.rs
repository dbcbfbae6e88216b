//! Helpers the integration tests share: writing .zf files and comparing results as text.

use std::path::{Path, PathBuf};

use arrow::array::RecordBatch;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use zipflow_format::{TableWriter, WriteOptions};

/// Writes `batches` to `path` in chunks of `chunk_rows`.
pub fn write(batches: &[RecordBatch], path: &Path, chunk_rows: usize) -> PathBuf {
    let options = WriteOptions {
        chunk_rows,
        overwrite: true,
        chooser: Some(zipflow_select::Chooser::shared(Default::default())),
        ..Default::default()
    };
    let mut w =
        TableWriter::create(path, batches[0].schema(), options).unwrap_or_else(|e| panic!("{e}"));
    for b in batches {
        w.write(b).unwrap_or_else(|e| panic!("{e}"));
    }
    w.finish().unwrap_or_else(|e| panic!("{e}"));
    path.to_path_buf()
}

/// The rows of `batches` as text, sorted, with the column names first.
pub fn rows(batches: &[RecordBatch]) -> Vec<String> {
    let options = FormatOptions::default().with_null("NULL");
    let mut out = Vec::new();
    for b in batches {
        let formatters: Vec<_> = b
            .columns()
            .iter()
            .map(|c| {
                ArrayFormatter::try_new(c.as_ref(), &options).unwrap_or_else(|e| panic!("{e}"))
            })
            .collect();
        for r in 0..b.num_rows() {
            let cells: Vec<String> = formatters.iter().map(|f| f.value(r).to_string()).collect();
            out.push(cells.join("|"));
        }
    }
    out.sort();
    if let Some(b) = batches.first() {
        let schema = b.schema();
        let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        out.insert(0, names.join("|"));
    }
    out
}
