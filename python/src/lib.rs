//! `zipflow._zipflow`: the Rust half of the `zipflow` Python package.
//!
//! Tables cross the boundary through the Arrow C data and stream interfaces, so neither
//! direction copies column buffers: a pyarrow table or record batch reader is read as an Arrow
//! stream, and the arrays the decoders produce become pyarrow arrays over the same memory.
//! The Python module `zipflow` (python/zipflow) wraps these functions with the documented API:
//! it turns pandas frames and file paths into Arrow streams and holds the docstrings users read.
//! Every long call releases the GIL.

mod errors;
mod file;
mod gpu;
mod provider;
mod query;
mod write;

use pyo3::prelude::*;

/// The extension module.
#[pymodule]
fn _zipflow(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<file::File>()?;
    m.add_class::<gpu::DeviceArray>()?;
    m.add_function(wrap_pyfunction!(file::open, m)?)?;
    m.add_function(wrap_pyfunction!(gpu::decode_on_device, m)?)?;
    m.add_function(wrap_pyfunction!(file::bench_rust_read, m)?)?;
    m.add_function(wrap_pyfunction!(write::compress_stream, m)?)?;
    m.add_function(wrap_pyfunction!(write::compress_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(write::decompress_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(query::sql, m)?)?;
    m.add_function(wrap_pyfunction!(provider::datafusion_table_provider, m)?)?;
    Ok(())
}
