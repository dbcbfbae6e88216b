//! zipflow tables for the `datafusion` Python package, through DataFusion's FFI.
//!
//! `SessionContext.register_table(name, zipflow.open(path))` calls the File's
//! `__datafusion_table_provider__(session)`, which hands over zipflow's `ZfTable` (projection,
//! zone-map filter and limit pushdown, statistics, chunks as partitions) as an
//! `FFI_TableProvider` in a capsule. The scans then run in this library, on the session's
//! threads; the `datafusion` package and this one must be built on the same DataFusion major
//! version (55).

use std::sync::Arc;

use datafusion_ffi::proto::logical_extension_codec::FFI_LogicalExtensionCodec;
use datafusion_ffi::table_provider::FFI_TableProvider;
use pyo3::prelude::*;
use pyo3::types::PyCapsule;
use zipflow_datafusion::ZfTable;

use crate::errors::{InvalidInputError, query_error};
use crate::file::File;

/// The capsule name DataFusion looks for.
const PROVIDER: &std::ffi::CStr = c"datafusion_table_provider";
/// The capsule name of the session's logical extension codec.
const CODEC: &std::ffi::CStr = c"datafusion_logical_extension_codec";
const CODEC_ATTR: &str = "__datafusion_logical_extension_codec__";

/// The file as a DataFusion table provider capsule, for `session` (a `datafusion`
/// SessionContext, or the codec capsule it passes).
#[pyfunction]
pub fn datafusion_table_provider<'py>(
    py: Python<'py>,
    file: &File,
    session: Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyCapsule>> {
    let codec = session_codec(session)?;
    let table = ZfTable::from_files(vec![Arc::clone(file.zf())]).map_err(query_error)?;
    // Filters are pushed down (zone maps prune chunks; reported inexact, so DataFusion still
    // filters the rows that remain).
    let provider = FFI_TableProvider::new_with_ffi_codec(Arc::new(table), true, None, codec);
    PyCapsule::new_with_value(py, provider, PROVIDER)
}

/// The session's logical extension codec: DataFusion passes the session (which exports it)
/// or the codec capsule itself.
fn session_codec(session: Bound<'_, PyAny>) -> PyResult<FFI_LogicalExtensionCodec> {
    let capsule = if session.hasattr(CODEC_ATTR)? {
        session.getattr(CODEC_ATTR)?.call0()?
    } else {
        session
    };
    let capsule = capsule.cast_into::<PyCapsule>().map_err(|_| {
        InvalidInputError::new_err(
            "expected a datafusion SessionContext (or its logical extension codec capsule); \
             register the file with datafusion's SessionContext.register_table",
        )
    })?;
    let pointer = capsule.pointer_checked(Some(CODEC)).map_err(|_| {
        InvalidInputError::new_err("the capsule is not a datafusion logical extension codec")
    })?;
    // SAFETY: the capsule's name says it holds an `FFI_LogicalExtensionCodec`, which the
    // session keeps alive while we clone it (a clone is the FFI's own reference count).
    let codec = unsafe { pointer.cast::<FFI_LogicalExtensionCodec>().as_ref() };
    Ok(codec.clone())
}
