//! Finding and opening a GPU.
//!
//! `cudarc` loads `libcuda` and `libnvrtc` at run time, and panics when it cannot. [`Gpu::open`]
//! checks that both libraries are present first and turns every failure (no library, no
//! device, a driver error) into one `Unsupported` error that starts with `no usable GPU:`.

use crate::cache::ModuleCache;
use crate::codegen::Kernel;
use cudarc::driver::sys::CUdevice_attribute;
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaStream, DriverError, PinnedHostSlice,
};
use rayon::prelude::*;
use std::collections::HashMap;
use std::mem::ManuallyDrop;
use std::sync::{Arc, Mutex};
use zipflow_core::{Error, Result};

/// What [`Gpu::open`] found out about a device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuInfo {
    /// Device ordinal.
    pub ordinal: usize,
    /// Device name, e.g. `NVIDIA H200`.
    pub name: String,
    /// Compute capability (major, minor); kernels are compiled for `sm_<major><minor>`.
    pub arch: (i32, i32),
    /// Global memory in bytes.
    pub memory_bytes: usize,
    /// Multiprocessors.
    pub multiprocessors: i32,
    /// Driver version as CUDA encodes it (`1000 * major + 10 * minor`).
    pub driver_version: i32,
    /// NVRTC version (major, minor).
    pub nvrtc_version: (i32, i32),
}

impl GpuInfo {
    /// The `-arch` value NVRTC compiles for, e.g. `sm_90`.
    pub fn sm(&self) -> String {
        format!("sm_{}{}", self.arch.0, self.arch.1)
    }

    /// The driver version as `major.minor`.
    pub fn driver(&self) -> String {
        format!(
            "{}.{}",
            self.driver_version / 1000,
            (self.driver_version % 1000) / 10
        )
    }
}

impl std::fmt::Display for GpuInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "GPU {}: {}, compute capability {}.{} ({}), {:.1} GiB, {} multiprocessors, driver {}, NVRTC {}.{}",
            self.ordinal,
            self.name,
            self.arch.0,
            self.arch.1,
            self.sm(),
            self.memory_bytes as f64 / f64::from(1u32 << 30),
            self.multiprocessors,
            self.driver(),
            self.nvrtc_version.0,
            self.nvrtc_version.1
        )
    }
}

/// An open GPU: a CUDA context, two streams, and compiled decode kernels.
pub struct Gpu {
    pub(crate) ctx: Arc<CudaContext>,
    /// Streams that uploads and kernels alternate between, so that the copy of one batch
    /// overlaps the decoding of the previous one.
    pub(crate) streams: [Arc<CudaStream>; 2],
    /// The stream host-to-device copies of compressed bytes queue on, apart from the
    /// kernels: copies for the next columns and batches run back to back over PCIe while
    /// the kernels decode what arrived, each kernel waiting only for its own bytes (events).
    pub(crate) copy: Arc<CudaStream>,
    info: GpuInfo,
    cache: ModuleCache,
    modules: Mutex<HashMap<String, Arc<CudaModule>>>,
    /// Pinned staging buffers that finished decoders gave back, for the next decoder:
    /// allocating pinned memory costs far more than filling it, and a reader decoding batch
    /// after batch would otherwise pay that for every column of every batch.
    staging: Mutex<Vec<PinnedHostSlice<u8>>>,
}

/// Staging buffers kept for reuse at most: their count and their bytes together.
const STAGING_KEPT: usize = 16;
const STAGING_KEPT_BYTES: usize = 1 << 30;

/// A pinned staging buffer lent by [`Gpu`], given back when dropped.
pub(crate) struct Staging<'g> {
    gpu: &'g Gpu,
    /// Taken (once) by `drop`.
    buffer: ManuallyDrop<PinnedHostSlice<u8>>,
}

impl Staging<'_> {
    /// The buffer (at least the bytes asked for; maybe more).
    pub(crate) fn buffer(&self) -> &PinnedHostSlice<u8> {
        &self.buffer
    }

    /// The buffer, to fill.
    pub(crate) fn buffer_mut(&mut self) -> &mut PinnedHostSlice<u8> {
        &mut self.buffer
    }
}

impl Drop for Staging<'_> {
    fn drop(&mut self) {
        // SAFETY: `drop` runs once and nothing uses the field after it.
        let b = unsafe { ManuallyDrop::take(&mut self.buffer) };
        // A copy from the buffer may still be queued (a decoder dropped before it
        // finished): the next borrower must not write into it before that copy ran.
        for s in self.gpu.streams.iter().chain([&self.gpu.copy]) {
            if s.synchronize().is_err() {
                return;
            }
        }
        let mut pool = self.gpu.staging.lock().unwrap_or_else(|e| e.into_inner());
        pool.push(b);
        // Over the limits, the smallest go first: the large ones are the costly ones.
        while pool.len() > STAGING_KEPT
            || pool.iter().map(PinnedHostSlice::len).sum::<usize>() > STAGING_KEPT_BYTES
        {
            let Some(i) = (0..pool.len()).min_by_key(|&i| pool[i].len()) else {
                break;
            };
            pool.swap_remove(i);
        }
    }
}

impl std::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gpu")
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

/// The error for a missing or unusable GPU.
pub fn no_gpu(why: impl std::fmt::Display) -> Error {
    Error::unsupported(format!("no usable GPU: {why}"))
}

/// Wraps a driver error with what was being done.
pub(crate) fn cuda(op: &str) -> impl FnOnce(DriverError) -> Error + '_ {
    move |e| Error::external(format!("CUDA {op}"), e)
}

impl Gpu {
    /// Opens device `ordinal`. Fails with `no usable GPU: <why>` when the driver or NVRTC
    /// library is missing, there is no such device, or the driver refuses.
    pub fn open(ordinal: usize) -> Result<Gpu> {
        // SAFETY: only tries to load the libraries by name (dlopen); no symbol is called.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Err(no_gpu(
                "the CUDA driver library (libcuda.so) was not found; is an NVIDIA driver installed?",
            ));
        }
        // SAFETY: as above.
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            return Err(no_gpu(
                "the NVRTC library (libnvrtc.so) was not found; add the CUDA toolkit's lib64 to LD_LIBRARY_PATH",
            ));
        }
        // cudarc panics on a symbol the loaded library lacks (a driver older than the
        // bindings); report that as an unusable GPU rather than abort.
        match std::panic::catch_unwind(|| Self::open_inner(ordinal)) {
            Ok(r) => r,
            Err(p) => {
                let why = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "the CUDA bindings panicked".into());
                Err(no_gpu(why))
            }
        }
    }

    fn open_inner(ordinal: usize) -> Result<Gpu> {
        cudarc::driver::result::init().map_err(|e| no_gpu(format!("cuInit failed: {e}")))?;
        let count = CudaContext::device_count().map_err(|e| no_gpu(format!("{e}")))?;
        if count <= 0 {
            return Err(no_gpu("the driver reports no CUDA device"));
        }
        if ordinal >= count as usize {
            return Err(no_gpu(format!(
                "device {ordinal} asked for, the driver reports {count}"
            )));
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| no_gpu(format!("{e}")))?;
        let mut driver_version = 0;
        // SAFETY: cuDriverGetVersion writes one int through a valid pointer.
        unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut driver_version) }
            .result()
            .map_err(cuda("cuDriverGetVersion"))?;
        let (mut major, mut minor) = (0, 0);
        // SAFETY: nvrtcVersion writes two ints through valid pointers.
        unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) }
            .result()
            .map_err(|e| no_gpu(format!("NVRTC does not answer: {e:?}")))?;
        let nvrtc_version = (major, minor);
        let info = GpuInfo {
            ordinal,
            name: ctx.name().map_err(cuda("device name"))?,
            arch: ctx
                .compute_capability()
                .map_err(cuda("compute capability"))?,
            memory_bytes: ctx.total_mem().map_err(cuda("memory size"))?,
            multiprocessors: ctx
                .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
                .map_err(cuda("multiprocessor count"))?,
            driver_version,
            nvrtc_version,
        };
        // Streams are ordered explicitly (one per pipeline slot, events for timing), so the
        // per-buffer event tracking cudarc does by default would only add work.
        // SAFETY: every buffer this crate allocates is used on the stream that wrote it, or
        // after a synchronisation of all streams (see `decode`).
        unsafe { ctx.disable_event_tracking() };
        let streams = [
            ctx.new_stream().map_err(cuda("creating a stream"))?,
            ctx.new_stream().map_err(cuda("creating a stream"))?,
        ];
        let copy = ctx.new_stream().map_err(cuda("creating a stream"))?;
        Ok(Gpu {
            ctx,
            streams,
            copy,
            info,
            cache: ModuleCache::from_env(),
            modules: Mutex::new(HashMap::new()),
            staging: Mutex::new(Vec::new()),
        })
    }

    /// A pinned host buffer of at least `bytes` bytes for staging uploads: the smallest one
    /// kept that fits, else a new one.
    pub(crate) fn staging(&self, bytes: usize) -> Result<Staging<'_>> {
        let kept = {
            let mut pool = self.staging.lock().unwrap_or_else(|e| e.into_inner());
            (0..pool.len())
                .filter(|&i| pool[i].len() >= bytes)
                .min_by_key(|&i| pool[i].len())
                .map(|i| pool.swap_remove(i))
        };
        let buffer = match kept {
            Some(b) => b,
            // SAFETY: pinned memory whose bytes the borrower writes before any copy reads
            // them (`Staging` is filled before the upload).
            None => unsafe { self.ctx.alloc_pinned::<u8>(bytes.max(1)) }
                .map_err(cuda("allocating pinned host memory"))?,
        };
        Ok(Staging {
            gpu: self,
            buffer: ManuallyDrop::new(buffer),
        })
    }

    /// What the device is.
    pub fn info(&self) -> &GpuInfo {
        &self.info
    }

    /// The stream the encoders and [`crate::DeviceColumn::to_host`] work on: buffers a caller
    /// fills for them are best allocated and written on it. cudarc's per-buffer event tracking
    /// is off on this context, so work on other streams must be ordered by the caller.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.streams[0]
    }

    /// The block size tuned for a chunk kernel's plan shape `key` on this device, if one was
    /// remembered (see [`ModuleCache::remember_threads`]).
    pub fn launch_threads(&self, key: &str) -> Option<u32> {
        self.cache.remembered_threads(&self.info, key)
    }

    /// Remembers `threads` as the block size of plan shape `key`'s chunk kernel on this device.
    pub fn remember_launch(&self, key: &str, threads: u32) {
        self.cache.remember_threads(&self.info, key, threads);
    }

    /// The in-memory key of `kernel`'s module, with the NVRTC options it is compiled with.
    fn module_key(&self, kernel: &Kernel) -> (String, Vec<String>) {
        let options = compile_options(kernel, &self.info);
        (format!("{}\n{}", options.join(" "), kernel.source), options)
    }

    fn cached_module(&self, key: &str) -> Result<Option<Arc<CudaModule>>> {
        let map = self
            .modules
            .lock()
            .map_err(|_| Error::unsupported("kernel cache lock poisoned"))?;
        Ok(map.get(key).cloned())
    }

    fn load_module(&self, key: String, cubin: Vec<u8>) -> Result<Arc<CudaModule>> {
        let m = self
            .ctx
            .load_module(cudarc::nvrtc::Ptx::from_binary(cubin))
            .map_err(cuda("loading a generated module"))?;
        self.modules
            .lock()
            .map_err(|_| Error::unsupported("kernel cache lock poisoned"))?
            .insert(key, m.clone());
        Ok(m)
    }

    /// Makes the modules of `kernels` ready: those in neither memory nor the disk cache are
    /// compiled with NVRTC on all cores at once (each compile is single-threaded, and a column
    /// or a file may have several shapes), stored on disk, and loaded. The first error is
    /// returned; later calls to [`Gpu::function`] find the modules in memory.
    pub fn prepare(&self, kernels: &[&Kernel]) -> Result<()> {
        let mut seen = std::collections::HashSet::new();
        let mut jobs = Vec::new();
        for &k in kernels {
            let (key, options) = self.module_key(k);
            if self.cached_module(&key)?.is_none() && seen.insert(key.clone()) {
                jobs.push((k, key, options));
            }
        }
        // Compiled in parallel (rayon's pool), loaded in order: the first error is returned.
        let cubins: Vec<Result<Vec<u8>>> = jobs
            .par_iter()
            .map(|(k, _, options)| self.cache.cubin(k, options, &self.info))
            .collect();
        for (cubin, (_, key, _)) in cubins.into_iter().zip(jobs) {
            self.load_module(key, cubin?)?;
        }
        Ok(())
    }

    /// The compiled function `name` ([`crate::codegen::KERNEL_NAME`], or the second kernel some shapes
    /// have) of `kernel`'s module: from memory, else from the disk cache, else compiled with
    /// NVRTC now (and written to the disk cache).
    pub fn function(&self, kernel: &Kernel, name: &str) -> Result<CudaFunction> {
        let (key, options) = self.module_key(kernel);
        let module = match self.cached_module(&key)? {
            Some(m) => m,
            None => {
                let cubin = self.cache.cubin(kernel, &options, &self.info)?;
                self.load_module(key, cubin)?
            }
        };
        module
            .load_function(name)
            .map_err(cuda("finding a decode kernel"))
    }
}

/// NVRTC options for `kernel` on `info`'s device; launch constants go in as `-D` defines so
/// the host and the kernel cannot disagree on them. With `ZIPFLOW_CUDA_LINEINFO` set (not
/// empty or `0`) kernels carry line information, so that a profiler such as Nsight Compute
/// attributes its counters to lines of the generated source (options are part of the cache
/// key: such modules are cached apart). With `ZIPFLOW_CUDA_NO_BULK` set likewise, kernels store
/// every value by their threads instead of by bulk copies (`cp.async.bulk`, Hopper and later):
/// compute-sanitizer's initcheck does not follow bulk copies and would report their output as
/// uninitialised.
pub fn compile_options(kernel: &Kernel, info: &GpuInfo) -> Vec<String> {
    let mut options = vec![
        format!("--gpu-architecture={}", info.sm()),
        format!("-DZF_THREADS={}", kernel.threads),
        format!("-DZF_TILE_VECTORS={}", crate::codegen::TILE_VECTORS),
        "--std=c++17".into(),
    ];
    if std::env::var("ZIPFLOW_CUDA_LINEINFO").is_ok_and(|v| !v.is_empty() && v != "0") {
        options.push("-lineinfo".into());
    }
    if std::env::var("ZIPFLOW_CUDA_NO_BULK").is_ok_and(|v| !v.is_empty() && v != "0") {
        options.push("-DZF_NO_BULK".into());
    }
    options
}
