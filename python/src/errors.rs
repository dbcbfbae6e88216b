//! zipflow's errors as Python exceptions, with the one-line message the command prints.
//!
//! The exception classes live in `zipflow.errors` (Python), where they can also derive from
//! the built-in exception a Python user would catch (`ValueError`, `NotImplementedError`).

use datafusion::error::DataFusionError;
use pyo3::exceptions::{PyFileNotFoundError, PyOSError, PyPermissionError};
use pyo3::{PyErr, import_exception};
use zipflow_core::Error;

import_exception!(zipflow.errors, ZipflowError);
import_exception!(zipflow.errors, CorruptFileError);
import_exception!(zipflow.errors, UnsupportedError);
import_exception!(zipflow.errors, InvalidInputError);
import_exception!(zipflow.errors, QueryError);

/// A zipflow error as the exception of its kind.
pub fn to_py(e: Error) -> PyErr {
    exception(&e)
}

/// A zipflow error as the exception of its kind, its message passed through `edit`.
pub fn to_py_edited(e: Error, edit: impl FnOnce(String) -> String) -> PyErr {
    exception_with(&e, edit(e.to_string()))
}

/// The exception for `e`.
fn exception(e: &Error) -> PyErr {
    exception_with(e, e.to_string())
}

fn exception_with(e: &Error, message: String) -> PyErr {
    match e {
        Error::Corrupt { .. } | Error::Checksum { .. } => CorruptFileError::new_err(message),
        Error::Unsupported { .. } => UnsupportedError::new_err(message),
        Error::Plan { .. } | Error::Invalid { .. } => InvalidInputError::new_err(message),
        Error::Io { source, .. } => match source.kind() {
            std::io::ErrorKind::NotFound => PyFileNotFoundError::new_err(message),
            std::io::ErrorKind::PermissionDenied => PyPermissionError::new_err(message),
            _ => PyOSError::new_err(message),
        },
        Error::External { .. } => ZipflowError::new_err(message),
    }
}

/// A query error: a zipflow error inside it keeps its kind; anything else (a query that does
/// not parse or plan, a missing table) is a `QueryError`.
pub fn query_error(e: DataFusionError) -> PyErr {
    match e.find_root() {
        DataFusionError::External(inner) => match inner.downcast_ref::<Error>() {
            Some(z) => exception(z),
            None => QueryError::new_err(inner.to_string()),
        },
        root => QueryError::new_err(without_kind(&root.to_string())),
    }
}

/// DataFusion starts messages with the error's kind ("Error during planning: ..."); the
/// exception's class already says it.
fn without_kind(text: &str) -> String {
    const KINDS: [&str; 5] = [
        "Error during planning: ",
        "SQL error: ",
        "Execution error: ",
        "Schema error: ",
        "This feature is not implemented: ",
    ];
    KINDS
        .iter()
        .find_map(|k| text.strip_prefix(k))
        .unwrap_or(text)
        .to_string()
}
