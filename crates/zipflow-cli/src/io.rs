//! Reading Parquet, CSV and Arrow IPC inputs as record batches, and writing them back.

use anyhow::{Context, Result, bail};
use arrow::datatypes::SchemaRef;
use arrow::record_batch::{RecordBatch, RecordBatchReader};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use std::fs::File;
use std::io::{BufReader, Seek, Write};
use std::path::{Path, PathBuf};

/// A tabular file format zipflow reads and writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TableFormat {
    /// Apache Parquet.
    Parquet,
    /// Comma-separated values with a header line.
    Csv,
    /// Arrow IPC file (or stream) format.
    Arrow,
}

impl TableFormat {
    /// The format a path's extension names.
    pub fn from_path(path: &Path) -> Result<TableFormat> {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase)
            .unwrap_or_default();
        Ok(match ext.as_str() {
            "parquet" | "pq" => TableFormat::Parquet,
            "csv" | "tsv" | "txt" => TableFormat::Csv,
            "arrow" | "ipc" | "feather" | "arrows" => TableFormat::Arrow,
            _ => bail!(
                "{}: cannot tell the format from the extension `.{ext}`; use .parquet, .csv or \
                 .arrow, or pass --format",
                path.display()
            ),
        })
    }
}

/// An input table: schema, batches, and (when known) the row count for progress.
pub struct Input {
    /// The batches.
    pub reader: Box<dyn RecordBatchReader + Send>,
    /// Rows, if the format says up front.
    pub rows: Option<u64>,
}

/// Opens `path` as a table.
pub fn open(path: &Path, format: TableFormat, delimiter: u8) -> Result<Input> {
    let file = File::open(path).with_context(|| format!("{}: cannot open", path.display()))?;
    match format {
        TableFormat::Parquet => {
            let builder = ParquetRecordBatchReaderBuilder::try_new(file)
                .with_context(|| format!("{}: not a readable Parquet file", path.display()))?;
            let rows = u64::try_from(builder.metadata().file_metadata().num_rows()).ok();
            let reader = builder
                .with_batch_size(64 * 1024)
                .build()
                .with_context(|| format!("{}: reading Parquet", path.display()))?;
            Ok(Input {
                reader: Box::new(reader),
                rows,
            })
        }
        TableFormat::Csv => {
            let mut file = file;
            let format = arrow::csv::reader::Format::default()
                .with_header(true)
                .with_delimiter(delimiter);
            let (schema, _) = format
                .infer_schema(BufReader::new(&mut file), Some(100_000))
                .with_context(|| format!("{}: cannot infer the CSV schema", path.display()))?;
            // A column with no values to infer from (e.g. a header-only file) reads as strings.
            let schema = arrow::datatypes::Schema::new(
                schema
                    .fields()
                    .iter()
                    .map(|f| match f.data_type() {
                        arrow::datatypes::DataType::Null => f
                            .as_ref()
                            .clone()
                            .with_data_type(arrow::datatypes::DataType::Utf8),
                        _ => f.as_ref().clone(),
                    })
                    .collect::<Vec<_>>(),
            );
            file.rewind()?;
            let reader = arrow::csv::ReaderBuilder::new(std::sync::Arc::new(schema))
                .with_format(format)
                .with_batch_size(64 * 1024)
                .build(BufReader::new(file))
                .with_context(|| format!("{}: reading CSV", path.display()))?;
            Ok(Input {
                reader: Box::new(reader),
                rows: None,
            })
        }
        TableFormat::Arrow => {
            if let Ok(reader) = arrow::ipc::reader::FileReader::try_new(BufReader::new(file), None)
            {
                return Ok(Input {
                    reader: Box::new(reader),
                    rows: None,
                });
            }
            let file = File::open(path)?;
            let reader = arrow::ipc::reader::StreamReader::try_new(BufReader::new(file), None)
                .with_context(|| format!("{}: not an Arrow IPC file or stream", path.display()))?;
            Ok(Input {
                reader: Box::new(reader),
                rows: None,
            })
        }
    }
}

/// Writer for one output table; call [`TableSink::finish`] to complete it.
pub enum TableSink {
    /// Parquet.
    Parquet(ArrowWriter<File>),
    /// CSV.
    Csv(arrow::csv::Writer<File>),
    /// Arrow IPC file.
    Arrow(arrow::ipc::writer::FileWriter<File>),
}

/// Parquet writer settings used for outputs and comparisons: zstd level 3.
pub fn parquet_props() -> Result<WriterProperties> {
    Ok(WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(3)?))
        .build())
}

impl TableSink {
    /// Starts writing `format` into `file`.
    pub fn new(file: File, format: TableFormat, schema: &SchemaRef) -> Result<TableSink> {
        Ok(match format {
            TableFormat::Parquet => TableSink::Parquet(ArrowWriter::try_new(
                file,
                schema.clone(),
                Some(parquet_props()?),
            )?),
            TableFormat::Csv => TableSink::Csv(arrow::csv::WriterBuilder::new().build(file)),
            TableFormat::Arrow => {
                TableSink::Arrow(arrow::ipc::writer::FileWriter::try_new(file, schema)?)
            }
        })
    }

    /// Writes one batch.
    pub fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        match self {
            TableSink::Parquet(w) => w.write(batch)?,
            TableSink::Csv(w) => w.write(batch)?,
            TableSink::Arrow(w) => w.write(batch)?,
        }
        Ok(())
    }

    /// Completes the file and syncs it to disk.
    pub fn finish(self) -> Result<()> {
        let file = match self {
            TableSink::Parquet(w) => w.into_inner()?,
            TableSink::Csv(w) => w.into_inner(),
            TableSink::Arrow(mut w) => {
                w.finish()?;
                w.into_inner()?
            }
        };
        let mut file = file;
        file.flush()?;
        file.sync_all()?;
        Ok(())
    }
}

/// Fails with a clear message when the directory `path` is to be written in does not exist.
pub fn check_output_dir(path: &Path) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
        && !dir.is_dir()
    {
        bail!(
            "{}: cannot write there: directory {} does not exist",
            path.display(),
            dir.display()
        );
    }
    Ok(())
}

/// A file written under a temporary name and renamed onto its target only when complete;
/// dropped before [`AtomicFile::commit`], it deletes the temporary file.
pub struct AtomicFile {
    tmp: PathBuf,
    target: PathBuf,
    done: bool,
}

impl AtomicFile {
    /// Creates the temporary file beside `target`. Refuses an existing target unless `force`.
    pub fn create(target: &Path, force: bool) -> Result<(AtomicFile, File)> {
        check_output_dir(target)?;
        if target.exists() && !force {
            bail!(
                "{}: already exists; pass --force to overwrite it",
                target.display()
            );
        }
        let dir = target
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "out".into());
        let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
        let file =
            File::create(&tmp).with_context(|| format!("{}: cannot create", tmp.display()))?;
        Ok((
            AtomicFile {
                tmp,
                target: target.to_path_buf(),
                done: false,
            },
            file,
        ))
    }

    /// Renames the temporary file onto the target.
    pub fn commit(mut self) -> Result<()> {
        std::fs::rename(&self.tmp, &self.target).with_context(|| {
            format!(
                "cannot rename {} to {}",
                self.tmp.display(),
                self.target.display()
            )
        })?;
        self.done = true;
        Ok(())
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}
