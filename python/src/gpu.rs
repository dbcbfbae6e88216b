//! Columns decoded on the GPU into device memory and handed over by DLPack.
//!
//! The compressed chunks go to the device as they are (the bytes over PCIe are the file's
//! values trees), the generated decoders write the values into one device buffer per column,
//! and `DeviceArray` exports that buffer through DLPack (`__dlpack__`), so `torch.from_dlpack`
//! (or CuPy, JAX) wraps it without a copy. The decode is finished, and its error word checked,
//! before an array is returned, so a consumer may read it on any stream. Freeing is ordered
//! after the consumer's work: when the consumer drops its tensor, the buffer's stream waits on
//! the consumer's stream before the stream-ordered free.

use std::collections::BTreeMap;
use std::ffi::{CStr, c_void};
use std::sync::{Arc, Mutex};

use cudarc::driver::sys::{CUevent_flags, CUevent_wait_flags, CUstream};
use cudarc::driver::{CudaSlice, DevicePtr, result};
use pyo3::exceptions::PyBufferError;
use pyo3::prelude::*;
use zipflow_core::{ColumnType, Error, PType};
use zipflow_cuda::{ColumnDecoder, Gpu};
use zipflow_format::ZfFile;

use crate::errors::{InvalidInputError, UnsupportedError, to_py};
use crate::file::File;

/// GPUs opened so far, by ordinal: each opened once and kept for the process (its context
/// and compiled kernels are what later decodes reuse).
static GPUS: Mutex<BTreeMap<usize, &'static Gpu>> = Mutex::new(BTreeMap::new());

fn gpu(ordinal: usize) -> zipflow_core::Result<&'static Gpu> {
    let mut open = GPUS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(g) = open.get(&ordinal) {
        return Ok(g);
    }
    let g: &'static Gpu = Box::leak(Box::new(Gpu::open(ordinal)?));
    open.insert(ordinal, g);
    Ok(g)
}

/// Decodes `columns` of row groups `chunks` (in that order) on GPU `device` and returns one
/// device array per column. Numeric, date, timestamp, decimal (the scaled integers) and
/// boolean (bytes of 0 and 1) columns without nulls; string columns and nulls are refused.
#[pyfunction]
#[pyo3(signature = (file, columns, chunks, device=0))]
pub fn decode_on_device(
    py: Python<'_>,
    file: &File,
    columns: Vec<String>,
    chunks: Vec<usize>,
    device: usize,
) -> PyResult<Vec<DeviceArray>> {
    let f = file.zf();
    let projection = file.projection(Some(&columns))?;
    if chunks.is_empty() {
        return Err(InvalidInputError::new_err("no row groups to decode"));
    }
    if let Some(&c) = chunks.iter().find(|&&c| c >= f.num_chunks()) {
        return Err(InvalidInputError::new_err(format!(
            "{}: row group {c} out of range: the file has {}",
            f.path().display(),
            f.num_chunks()
        )));
    }
    for &c in &projection {
        check_tensor_column(f, c, &chunks)?;
    }
    let f = Arc::clone(f);
    py.detach(move || {
        let gpu = gpu(device)?;
        projection
            .iter()
            .map(|&c| decode_one(gpu, &f, c, &chunks, device))
            .collect::<zipflow_core::Result<Vec<_>>>()
    })
    .map_err(to_py)
}

/// Refuses a column a tensor cannot hold: strings, or nulls in the chunks asked for.
fn check_tensor_column(f: &ZfFile, c: usize, chunks: &[usize]) -> PyResult<()> {
    let meta = &f.columns()[c];
    if matches!(meta.column_type, ColumnType::Utf8 | ColumnType::Binary) {
        return Err(UnsupportedError::new_err(format!(
            "column `{}` is {}: a tensor holds numbers only",
            meta.name, meta.column_type
        )));
    }
    let mut nulls = 0u64;
    for &chunk in chunks {
        nulls += f.try_chunk_meta(c, chunk).map_err(to_py)?.stats.null_count;
    }
    if nulls > 0 {
        return Err(InvalidInputError::new_err(format!(
            "column `{}` holds {nulls} nulls: a tensor cannot; fill or drop them first \
             (File.read(...) with pyarrow.compute.fill_null)",
            meta.name
        )));
    }
    Ok(())
}

fn decode_one(
    gpu: &Gpu,
    f: &ZfFile,
    column: usize,
    chunks: &[usize],
    ordinal: usize,
) -> zipflow_core::Result<DeviceArray> {
    let meta = &f.columns()[column];
    let mut file_bytes = 0u64;
    for &c in chunks {
        file_bytes += u64::from(f.try_chunk_meta(column, c)?.values_len);
    }
    let mut d = ColumnDecoder::for_chunks(gpu, f, column, chunks)?;
    d.upload_and_decode()?;
    d.finish()
        .map_err(|e| e.at_column(&meta.name).in_file(f.path()))?;
    let h2d_bytes = d.compressed_bytes();
    let col = d.into_column();
    let dtype = DType::of(col.ptype)?;
    Ok(DeviceArray {
        buffer: Arc::new(col.buffer),
        len: col.len,
        dtype,
        ordinal,
        h2d_bytes,
        file_bytes,
        column: meta.name.clone(),
    })
}

/// A DLPack data type: type code, bits.
#[derive(Clone, Copy, Debug)]
struct DType {
    code: u8,
    bits: u8,
    name: &'static str,
}

impl DType {
    fn of(p: PType) -> zipflow_core::Result<DType> {
        // DLPack's codes: 0 signed, 1 unsigned integers, 2 IEEE floats.
        let (code, bits, name) = match p {
            PType::I8 => (0, 8, "int8"),
            PType::I16 => (0, 16, "int16"),
            PType::I32 => (0, 32, "int32"),
            PType::I64 => (0, 64, "int64"),
            PType::U8 => (1, 8, "uint8"),
            PType::U16 => (1, 16, "uint16"),
            PType::U32 => (1, 32, "uint32"),
            PType::U64 => (1, 64, "uint64"),
            PType::F32 => (2, 32, "float32"),
            PType::F64 => (2, 64, "float64"),
            other => {
                return Err(Error::unsupported(format!(
                    "{other} values have no tensor type"
                )));
            }
        };
        Ok(DType { code, bits, name })
    }
}

/// One decoded column in device memory, exported by DLPack (`torch.from_dlpack(array)`).
#[pyclass(module = "zipflow._zipflow", name = "DeviceArray", frozen)]
pub struct DeviceArray {
    buffer: Arc<CudaSlice<u8>>,
    len: usize,
    dtype: DType,
    ordinal: usize,
    /// Bytes copied from host to device for this column: its compressed chunks, each at an
    /// aligned offset, and what the host derived from them for the kernels (entropy-coder
    /// tables).
    #[pyo3(get)]
    h2d_bytes: usize,
    /// Bytes of the column's values trees in the file, for the chunks decoded.
    #[pyo3(get)]
    file_bytes: u64,
    /// The column's name.
    #[pyo3(get)]
    column: String,
}

// DLPack's C structures (dlpack.h, versions 0.8 and 1.0).
#[repr(C)]
#[derive(Clone, Copy)]
struct DlDevice {
    device_type: i32,
    device_id: i32,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct DlDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

#[repr(C)]
struct DlTensor {
    data: *mut c_void,
    device: DlDevice,
    ndim: i32,
    dtype: DlDataType,
    shape: *mut i64,
    strides: *mut i64,
    byte_offset: u64,
}

#[repr(C)]
struct DlManagedTensor {
    dl_tensor: DlTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DlManagedTensor)>,
}

#[repr(C)]
struct DlPackVersion {
    major: u32,
    minor: u32,
}

#[repr(C)]
struct DlManagedTensorVersioned {
    version: DlPackVersion,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DlManagedTensorVersioned)>,
    flags: u64,
    dl_tensor: DlTensor,
}

const DL_CUDA: i32 = 2;
const LEGACY_NAME: &CStr = c"dltensor";
const VERSIONED_NAME: &CStr = c"dltensor_versioned";

/// What an exported tensor keeps alive: the buffer, its shape, and the stream the consumer
/// reads it on (`None`: not said, so freeing waits for the whole device).
struct Export {
    buffer: Arc<CudaSlice<u8>>,
    shape: [i64; 1],
    consumer: Option<usize>,
}

impl Drop for Export {
    fn drop(&mut self) {
        // The consumer may still have work queued that reads the buffer: the buffer's
        // stream (where the free is queued once the last reference goes) waits for it.
        // Nothing can be reported from a deleter; a failure here leaves the free unordered
        // only if the device is already failing.
        let stream = self.buffer.stream();
        let _ = stream.context().bind_to_thread();
        match self.consumer {
            Some(raw) => {
                if let Ok(ev) = result::event::create(CUevent_flags::CU_EVENT_DISABLE_TIMING) {
                    // SAFETY: `ev` was just created; `raw` is the stream the consumer named
                    // (or the legacy / per-thread default stream, 1 and 2, which the driver
                    // accepts as handles); the event is destroyed after the wait is queued,
                    // which the driver allows (its resources go once the wait completes).
                    unsafe {
                        let _ = result::event::record(ev, raw as CUstream);
                        let _ = result::stream::wait_event(
                            stream.cu_stream(),
                            ev,
                            CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
                        );
                        let _ = result::event::destroy(ev);
                    }
                }
            }
            None => {
                let _ = stream.context().synchronize();
            }
        }
    }
}

unsafe extern "C" fn delete_legacy(t: *mut DlManagedTensor) {
    if t.is_null() {
        return;
    }
    // SAFETY: `t` and its context were made by `Box::into_raw` in `__dlpack__`, and DLPack
    // calls the deleter once.
    unsafe {
        let t = Box::from_raw(t);
        drop(Box::from_raw(t.manager_ctx.cast::<Export>()));
    }
}

unsafe extern "C" fn delete_versioned(t: *mut DlManagedTensorVersioned) {
    if t.is_null() {
        return;
    }
    // SAFETY: as in `delete_legacy`.
    unsafe {
        let t = Box::from_raw(t);
        drop(Box::from_raw(t.manager_ctx.cast::<Export>()));
    }
}

/// The capsule destructor: a capsule never consumed still owns its tensor (a consumer
/// renames the capsule to `used_dltensor` when it takes ownership).
unsafe extern "C" fn capsule_destructor(capsule: *mut pyo3::ffi::PyObject) {
    // SAFETY: called by Python with the capsule; the names are the ones given at creation.
    unsafe {
        if pyo3::ffi::PyCapsule_IsValid(capsule, LEGACY_NAME.as_ptr()) == 1 {
            let p = pyo3::ffi::PyCapsule_GetPointer(capsule, LEGACY_NAME.as_ptr());
            delete_legacy(p.cast());
        } else if pyo3::ffi::PyCapsule_IsValid(capsule, VERSIONED_NAME.as_ptr()) == 1 {
            let p = pyo3::ffi::PyCapsule_GetPointer(capsule, VERSIONED_NAME.as_ptr());
            delete_versioned(p.cast());
        }
    }
}

#[pymethods]
impl DeviceArray {
    /// The values' type, as numpy and torch name it ("int64", "float64", ...).
    #[getter]
    fn dtype(&self) -> &'static str {
        self.dtype.name
    }

    /// The CUDA device ordinal holding the values.
    #[getter]
    fn device(&self) -> usize {
        self.ordinal
    }

    fn __len__(&self) -> usize {
        self.len
    }

    fn __repr__(&self) -> String {
        format!(
            "DeviceArray(column='{}', {} {} on cuda:{}, {} bytes copied to the device)",
            self.column, self.len, self.dtype.name, self.ordinal, self.h2d_bytes
        )
    }

    /// DLPack's device: (2 = CUDA, ordinal).
    fn __dlpack_device__(&self) -> (i32, i32) {
        (DL_CUDA, i32::try_from(self.ordinal).unwrap_or(i32::MAX))
    }

    /// The values as a DLPack capsule over the device buffer (no copy). `stream` is the
    /// consumer's CUDA stream (1: legacy default, 2: per-thread default, -1: none given);
    /// the values are ready on every stream, and freeing waits for work queued on it.
    #[pyo3(signature = (stream=None, *, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__(
        &self,
        py: Python<'_>,
        stream: Option<isize>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(i32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Py<PyAny>> {
        if copy == Some(true) {
            return Err(PyBufferError::new_err(
                "a zipflow device array is exported without a copy (copy=True asked)",
            ));
        }
        let device = self.__dlpack_device__();
        if let Some(d) = dl_device
            && d != device
        {
            return Err(PyBufferError::new_err(format!(
                "the values are on device {device:?}, not {d:?}"
            )));
        }
        let consumer = match stream {
            None | Some(-1) => None,
            Some(s) if s > 0 => Some(s as usize),
            Some(s) => {
                return Err(PyBufferError::new_err(format!(
                    "stream {s} is not a CUDA stream handle"
                )));
            }
        };
        let len = i64::try_from(self.len).map_err(|_| PyBufferError::new_err("too many values"))?;
        let export = Box::into_raw(Box::new(Export {
            buffer: Arc::clone(&self.buffer),
            shape: [len],
            consumer,
        }));
        // SAFETY: `export` was just made; its shape lives as long as the tensor.
        let (data, shape) = unsafe {
            let b = &(*export).buffer;
            let (ptr, _sync) = b.device_ptr(b.stream());
            (ptr as usize as *mut c_void, (*export).shape.as_mut_ptr())
        };
        let tensor = DlTensor {
            data,
            device: DlDevice {
                device_type: device.0,
                device_id: device.1,
            },
            ndim: 1,
            dtype: DlDataType {
                code: self.dtype.code,
                bits: self.dtype.bits,
                lanes: 1,
            },
            shape,
            strides: std::ptr::null_mut(),
            byte_offset: 0,
        };
        let versioned = max_version.is_some_and(|(major, _)| major >= 1);
        let (pointer, name): (*mut c_void, &CStr) = if versioned {
            let t = Box::new(DlManagedTensorVersioned {
                version: DlPackVersion { major: 1, minor: 0 },
                manager_ctx: export.cast(),
                deleter: Some(delete_versioned),
                flags: 0,
                dl_tensor: tensor,
            });
            (Box::into_raw(t).cast(), VERSIONED_NAME)
        } else {
            let t = Box::new(DlManagedTensor {
                dl_tensor: tensor,
                manager_ctx: export.cast(),
                deleter: Some(delete_legacy),
            });
            (Box::into_raw(t).cast(), LEGACY_NAME)
        };
        // SAFETY: a capsule over the tensor, with a destructor that frees it unless a
        // consumer took it (and renamed the capsule).
        let capsule =
            unsafe { pyo3::ffi::PyCapsule_New(pointer, name.as_ptr(), Some(capsule_destructor)) };
        if capsule.is_null() {
            // SAFETY: the capsule was not made, so the tensor is still ours to free.
            unsafe {
                if versioned {
                    delete_versioned(pointer.cast());
                } else {
                    delete_legacy(pointer.cast());
                }
            }
            return Err(PyErr::fetch(py));
        }
        // SAFETY: a new reference just returned by the C API.
        Ok(unsafe { Bound::from_owned_ptr(py, capsule) }.unbind())
    }
}
