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
        if is_std(path) {
            bail!(
                "`-` (standard input or output) has no extension to tell the format by: pass \
                 --format csv or --format arrow (an Arrow IPC stream)"
            );
        }
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

/// Whether `path` is `-`, standard input or output.
pub fn is_std(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// How CSV input is read.
#[derive(Debug, Clone)]
pub struct CsvOptions {
    /// The field delimiter.
    pub delimiter: u8,
    /// Fields (besides empty ones) read as nulls, e.g. `NA`.
    pub nulls: Vec<String>,
}

impl CsvOptions {
    /// The reader's format: header, delimiter, and the null spellings as one anchored
    /// regular expression (the empty field always among them).
    fn format(&self) -> Result<arrow::csv::reader::Format> {
        let format = arrow::csv::reader::Format::default()
            .with_header(true)
            .with_delimiter(self.delimiter);
        if self.nulls.is_empty() {
            return Ok(format);
        }
        let alternatives: Vec<String> = std::iter::once(String::new())
            .chain(self.nulls.iter().map(|n| regex::escape(n)))
            .collect();
        let re = regex::Regex::new(&format!("^(?:{})$", alternatives.join("|")))
            .context("--null-values")?;
        Ok(format.with_null_regex(re))
    }
}

/// Opens `path` as a table; `-` reads CSV or an Arrow IPC stream from standard input.
pub fn open(path: &Path, format: TableFormat, csv: &CsvOptions) -> Result<Input> {
    if is_std(path) {
        return open_stdin(format, csv);
    }
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
            let format = csv.format()?;
            let header = csv_header(&mut file, csv.delimiter)?;
            let (schema, _) = format
                .infer_schema(BufReader::new(&mut file), Some(CSV_INFER_ROWS))
                .map_err(|e| explain_csv_error(e, &header))
                .with_context(|| format!("{}: cannot infer the CSV schema", path.display()))?;
            let schema = null_columns_as_strings(&schema);
            file.rewind()?;
            let reader = arrow::csv::ReaderBuilder::new(std::sync::Arc::new(schema))
                .with_format(format)
                .with_batch_size(64 * 1024)
                .build(Box::new(BufReader::new(file)) as Box<dyn BufRead + Send>)
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

/// Rows of a CSV read to infer its column types.
const CSV_INFER_ROWS: usize = 100_000;

/// A column with no values to infer from (e.g. a header-only file) reads as strings.
fn null_columns_as_strings(schema: &arrow::datatypes::Schema) -> arrow::datatypes::Schema {
    arrow::datatypes::Schema::new(
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
    )
}

/// Standard input as a table: CSV (types inferred from the first rows, which are kept in
/// memory and read again) or an Arrow IPC stream. Parquet needs a seekable file.
fn open_stdin(format: TableFormat, csv: &CsvOptions) -> Result<Input> {
    let delimiter = csv.delimiter;
    let stdin = std::io::stdin();
    match format {
        TableFormat::Parquet => bail!(
            "standard input (`-`) cannot be Parquet: a Parquet reader starts at the file's \
             end; give a file, or stream CSV or Arrow IPC"
        ),
        TableFormat::Arrow => {
            let reader = arrow::ipc::reader::StreamReader::try_new(BufReader::new(stdin), None)
                .context("standard input: not an Arrow IPC stream")?;
            Ok(Input {
                reader: Box::new(reader),
                rows: None,
            })
        }
        TableFormat::Csv => {
            let mut input = BufReader::with_capacity(1 << 20, stdin);
            let mut head = Vec::new();
            let mut lines = 0;
            while lines <= CSV_INFER_ROWS && input.read_until(b'\n', &mut head)? > 0 {
                lines += 1;
            }
            let header: Vec<String> = head
                .split(|&b| b == b'\n')
                .next()
                .unwrap_or_default()
                .trim_ascii_end()
                .split(|&b| b == delimiter)
                .map(|f| String::from_utf8_lossy(f).trim_matches('"').to_string())
                .collect();
            let format = csv.format()?;
            // Leave out the last line read, which may hold only part of a quoted record.
            let (schema, _) = format
                .infer_schema(&head[..], Some(lines.saturating_sub(2).max(1)))
                .map_err(|e| explain_csv_error(e, &header))
                .context("standard input: cannot infer the CSV schema")?;
            let schema = null_columns_as_strings(&schema);
            let source: Box<dyn BufRead + Send> =
                Box::new(std::io::Read::chain(std::io::Cursor::new(head), input));
            let reader = arrow::csv::ReaderBuilder::new(std::sync::Arc::new(schema))
                .with_format(format)
                .with_batch_size(64 * 1024)
                .build(source)
                .context("standard input: reading CSV")?;
            Ok(Input {
                reader: Box::new(CsvReader {
                    inner: reader,
                    header,
                }),
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
    inner: arrow::csv::Reader<Box<dyn BufRead + Send>>,
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
pub enum TableSink<W: Write + Send> {
    /// Parquet.
    Parquet(ArrowWriter<W>),
    /// CSV.
    Csv(arrow::csv::Writer<W>),
    /// Arrow IPC file.
    Arrow(arrow::ipc::writer::FileWriter<W>),
    /// Arrow IPC stream (for standard output, which cannot seek back to write a file footer).
    ArrowStream(arrow::ipc::writer::StreamWriter<W>),
}

/// Parquet writer settings used for outputs and comparisons: zstd level 3.
pub fn parquet_props() -> Result<WriterProperties> {
    Ok(WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(3)?))
        .build())
}

impl<W: Write + Send> TableSink<W> {
    /// Starts writing `format` into `out`; `stream` writes Arrow IPC as a stream.
    pub fn new(
        out: W,
        format: TableFormat,
        schema: &SchemaRef,
        stream: bool,
    ) -> Result<TableSink<W>> {
        Ok(match format {
            TableFormat::Parquet => TableSink::Parquet(ArrowWriter::try_new(
                out,
                schema.clone(),
                Some(parquet_props()?),
            )?),
            TableFormat::Csv => TableSink::Csv(arrow::csv::WriterBuilder::new().build(out)),
            TableFormat::Arrow if stream => {
                TableSink::ArrowStream(arrow::ipc::writer::StreamWriter::try_new(out, schema)?)
            }
            TableFormat::Arrow => {
                TableSink::Arrow(arrow::ipc::writer::FileWriter::try_new(out, schema)?)
            }
        })
    }

    /// Writes one batch.
    pub fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        match self {
            TableSink::Parquet(w) => w.write(batch)?,
            TableSink::Csv(w) => w.write(batch)?,
            TableSink::Arrow(w) => w.write(batch)?,
            TableSink::ArrowStream(w) => w.write(batch)?,
        }
        Ok(())
    }

    /// Completes the table and flushes it; returns the writer.
    pub fn finish(self) -> Result<W> {
        let mut out = match self {
            TableSink::Parquet(w) => w.into_inner()?,
            TableSink::Csv(w) => w.into_inner(),
            TableSink::Arrow(mut w) => {
                w.finish()?;
                w.into_inner()?
            }
            TableSink::ArrowStream(mut w) => {
                w.finish()?;
                w.into_inner()?
            }
        };
        out.flush()?;
        Ok(out)
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

/// Refuses an output that is one of the inputs, and an output that is a symbolic link (with
/// or without --force: zipflow neither replaces a link nor writes through it).
pub fn check_output(output: &Path, inputs: &[&Path]) -> Result<()> {
    if is_std(output) {
        return Ok(());
    }
    if std::fs::symlink_metadata(output).is_ok_and(|m| m.file_type().is_symlink()) {
        bail!(
            "{}: is a symbolic link; zipflow does not replace links or write through them \
             (name the file it points to)",
            output.display()
        );
    }
    let Ok(out) = std::fs::canonicalize(output) else {
        return Ok(());
    };
    for input in inputs.iter().filter(|i| !is_std(i)) {
        if std::fs::canonicalize(input).is_ok_and(|i| i == out) {
            bail!(
                "{}: is the input too; write the output to another path",
                output.display()
            );
        }
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
