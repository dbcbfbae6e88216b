//! Writing .zf files: tables from an Arrow stream, and bytes as text tables.

use std::collections::HashMap;
use std::path::PathBuf;

use arrow::ffi_stream::ArrowArrayStreamReader;
use arrow::record_batch::RecordBatchReader;
use arrow_pyarrow::PyArrowType;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use zipflow_core::{Error, Plan};
use zipflow_format::table::FileSummary;
use zipflow_format::text::{self, TextOptions};
use zipflow_format::{TableWriter, WriteOptions, ZfFile};
use zipflow_select::{Chooser, Objective, SelectOptions};

use crate::errors::{InvalidInputError, to_py, to_py_edited};

/// The selection options for `objective` ("smallest", "balanced", "fastest", "gpu") or, when
/// given, the smallest plan decoding at `min_decode_gbs` GB/s or more.
fn select_options(objective: &str, min_decode_gbs: Option<f64>) -> PyResult<SelectOptions> {
    let objective = match min_decode_gbs {
        Some(x) if x.is_finite() && x > 0.0 => Objective::MinDecodeGbs(x),
        Some(x) => {
            return Err(InvalidInputError::new_err(format!(
                "min_decode_gbs must be a positive number, got {x}"
            )));
        }
        None => objective
            .parse()
            .map_err(|e: Error| InvalidInputError::new_err(e.to_string()))?,
    };
    Ok(SelectOptions {
        objective,
        ..SelectOptions::default()
    })
}

fn parse_plan(column: &str, text: &str) -> PyResult<Plan> {
    text.parse::<Plan>()
        .map_err(|e| InvalidInputError::new_err(format!("plan for column `{column}`: {e}")))
}

/// Compresses the Arrow stream `source` into a .zf file at `path`; returns the summary
/// (rows, bytes, and per column its type, plans and sizes).
#[pyfunction]
#[pyo3(signature = (source, path, objective, plans, chunk_rows, min_decode_gbs, overwrite))]
#[allow(clippy::too_many_arguments)]
pub fn compress_stream<'py>(
    py: Python<'py>,
    source: PyArrowType<ArrowArrayStreamReader>,
    path: PathBuf,
    objective: &str,
    plans: HashMap<String, String>,
    chunk_rows: usize,
    min_decode_gbs: Option<f64>,
    overwrite: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let reader = source.0;
    let schema = reader.schema();
    let mut forced = HashMap::new();
    for (column, text) in &plans {
        if schema.field_with_name(column).is_err() {
            return Err(InvalidInputError::new_err(format!(
                "a plan is given for column `{column}`, which the table does not have"
            )));
        }
        forced.insert(column.clone(), parse_plan(column, text)?);
    }
    if chunk_rows == 0 {
        return Err(InvalidInputError::new_err("chunk_rows must be at least 1"));
    }
    let options = WriteOptions {
        chunk_rows,
        plans: forced,
        overwrite,
        chooser: Some(Chooser::shared(select_options(objective, min_decode_gbs)?)),
        ..WriteOptions::default()
    };
    let summary = py
        .detach(|| -> zipflow_core::Result<FileSummary> {
            let mut writer = TableWriter::create(&path, schema, options)?;
            for batch in reader {
                let batch = batch.map_err(|e| Error::external("reading the source table", e))?;
                writer.write(&batch)?;
            }
            writer.finish()
        })
        .map_err(to_py)?;
    summary_dict(py, &summary)
}

/// `summary` as a dict.
fn summary_dict<'py>(py: Python<'py>, summary: &FileSummary) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    out.set_item("rows", summary.rows)?;
    out.set_item("bytes", summary.bytes)?;
    let columns = PyList::empty(py);
    for c in &summary.columns {
        let col = PyDict::new(py);
        col.set_item("name", &c.name)?;
        col.set_item("type", c.column_type.to_string())?;
        col.set_item("plan", c.plan_summary())?;
        col.set_item("compressed_bytes", c.compressed_bytes)?;
        col.set_item("plain_bytes", c.plain_bytes)?;
        columns.append(col)?;
    }
    out.set_item("columns", columns)?;
    Ok(out)
}

/// Compresses `data` with the text plans (or `plan`) and returns the bytes of the .zf file.
#[pyfunction]
#[pyo3(signature = (data, plan=None, objective="balanced"))]
pub fn compress_bytes<'py>(
    py: Python<'py>,
    data: &[u8],
    plan: Option<&str>,
    objective: &str,
) -> PyResult<Bound<'py, PyBytes>> {
    let plan = plan.map(|p| parse_plan(text::TEXT_COLUMN, p)).transpose()?;
    let options = TextOptions {
        plan,
        chooser: Some(Chooser::shared(select_options(objective, None)?)),
        ..TextOptions::default()
    };
    // The file writer writes to a path; a private directory holds the file meanwhile.
    let dir = tempfile::tempdir()
        .map_err(|e| to_py(Error::external("creating a temporary directory", e)))?;
    let path = dir.path().join("bytes.zf");
    let bytes = py
        .detach(|| -> zipflow_core::Result<Vec<u8>> {
            text::compress(data, &path, &options, |_| {})?;
            std::fs::read(&path).map_err(|e| Error::Io {
                path: path.clone(),
                source: e,
            })
        })
        // Messages name the input, not the private file.
        .map_err(|e| to_py_edited(e, |m| m.replace(&path.display().to_string(), "bytes")))?;
    Ok(PyBytes::new(py, &bytes))
}

/// The bytes a text .zf file (as `compress_bytes` returns) holds.
#[pyfunction]
pub fn decompress_bytes<'py>(py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
    let bytes = py
        .detach(|| -> zipflow_core::Result<Vec<u8>> {
            let file = ZfFile::from_bytes("<bytes>", data)?;
            let mut out = Vec::new();
            text::decompress(&file, &mut out, |_| {})?;
            Ok(out)
        })
        .map_err(to_py)?;
    Ok(PyBytes::new(py, &bytes))
}
