//! Reading Parquet, CSV and Arrow IPC inputs as record batches, and writing them back.

use anyhow::{Context, Result, bail};
use arrow::datatypes::SchemaRef;
use arrow::error::ArrowError;
use arrow::record_batch::{RecordBatch, RecordBatchReader};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use std::fs::File;
use std::io::{BufRead, BufReader, Seek, Write};
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
            let header = csv_header(&mut file, delimiter)?;
            let (schema, _) = format
                .infer_schema(BufReader::new(&mut file), Some(100_000))
                .map_err(|e| explain_csv_error(e, &header))
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
                reader: Box::new(CsvReader {
                    inner: reader,
                    header,
                }),
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

/// The CSV header's field names (lossy UTF-8, quotes trimmed), to name columns in errors.
fn csv_header(file: &mut File, delimiter: u8) -> Result<Vec<String>> {
    let mut line = Vec::new();
    BufReader::new(&mut *file).read_until(b'\n', &mut line)?;
    file.rewind()?;
    Ok(line
        .trim_ascii_end()
        .split(|&b| b == delimiter)
        .map(|f| String::from_utf8_lossy(f).trim_matches('"').to_string())
        .collect())
}

/// Rewrites the CSV reader's UTF-8 error ("invalid UTF-8 in field K near byte index B at line
/// L") to name the column; other errors pass through.
fn explain_csv_error(e: ArrowError, header: &[String]) -> ArrowError {
    let text = e.to_string();
    let number_after = |key: &str| -> Option<usize> {
        let rest = &text[text.find(key)? + key.len()..];
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    };
    if !text.contains("invalid utf-8") && !text.contains("invalid UTF-8") {
        return e;
    }
    // Two phrasings: "in field K (0-based) ... at line L" while inferring, "for line L and
    // field K (1-based)" while reading.
    let located = match (number_after("in field "), number_after("at line ")) {
        (Some(f), Some(l)) => Some((f, l)),
        _ => match (number_after("and field "), number_after("for line ")) {
            (Some(f), Some(l)) if f > 0 => Some((f - 1, l)),
            _ => None,
        },
    };
    let Some((field, line)) = located else {
        return e;
    };
    let column = header.get(field).map_or_else(
        || format!("field {}", field + 1),
        |n| format!("column `{n}`"),
    );
    ArrowError::CsvError(format!(
        "line {line}, {column}: invalid UTF-8 in a text field (fix the file's encoding, e.g. \
         iconv -f latin1 -t utf-8)"
    ))
}

/// A CSV reader whose errors name the column.
struct CsvReader {
    inner: arrow::csv::Reader<BufReader<File>>,
    header: Vec<String>,
}

impl Iterator for CsvReader {
    type Item = Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.inner
            .next()
            .map(|r| r.map_err(|e| explain_csv_error(e, &self.header)))
    }
}

impl RecordBatchReader for CsvReader {
    fn schema(&self) -> arrow::datatypes::SchemaRef {
        self.inner.schema()
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
/// dropped before [`AtomicFile::commit`], it deletes the temporary file. The temporary path
/// is on the list a signal cleans up ([`zipflow_format::cleanup`]).
pub struct AtomicFile {
    tmp: PathBuf,
    target: PathBuf,
    done: bool,
    _listed: zipflow_format::cleanup::Registered,
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
        let tmp = zipflow_format::file::temp_path(target);
        let listed = zipflow_format::cleanup::register_file(&tmp);
        let file =
            File::create(&tmp).with_context(|| format!("{}: cannot create", tmp.display()))?;
        Ok((
            AtomicFile {
                tmp,
                target: target.to_path_buf(),
                done: false,
                _listed: listed,
            },
            file,
        ))
    }

    /// Syncs the temporary file's bytes, renames it onto the target and syncs the directory,
    /// so the new file is on disk, whole, once this returns.
    pub fn commit(mut self) -> Result<()> {
        File::open(&self.tmp)
            .and_then(|f| f.sync_all())
            .with_context(|| format!("{}: cannot sync to disk", self.tmp.display()))?;
        std::fs::rename(&self.tmp, &self.target).with_context(|| {
            format!(
                "cannot rename {} to {}",
                self.tmp.display(),
                self.target.display()
            )
        })?;
        self.done = true;
        zipflow_format::cleanup::sync_parent(&self.target).with_context(|| {
            format!(
                "{}: renamed into place, but syncing its directory failed",
                self.target.display()
            )
        })?;
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
