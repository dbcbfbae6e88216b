//! The on-disk cache of compiled modules.
//!
//! NVRTC takes ~30-300 ms per module; a PTX file read back takes microseconds. Entries are
//! keyed by the xxh3 of the source and options, the device arch and the driver version, and
//! live in `$ZIPFLOW_CACHE_DIR`, else `$XDG_CACHE_HOME/zipflow/cuda`, else
//! `$HOME/.cache/zipflow/cuda`. A cache that cannot be read or written is skipped silently:
//! it only ever saves time.

use crate::codegen::Kernel;
use crate::device::GpuInfo;
use std::path::PathBuf;
use zipflow_core::{Error, Result};

/// Where compiled modules are kept between runs.
#[derive(Debug, Clone)]
pub struct ModuleCache {
    dir: Option<PathBuf>,
}

impl ModuleCache {
    /// The cache directory from the environment (see the module docs); none if no variable
    /// names one.
    pub fn from_env() -> ModuleCache {
        let var = |k: &str| {
            std::env::var_os(k)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let dir = var("ZIPFLOW_CACHE_DIR")
            .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("zipflow").join("cuda")))
            .or_else(|| var("HOME").map(|d| d.join(".cache").join("zipflow").join("cuda")));
        ModuleCache { dir }
    }

    /// A cache in `dir`.
    pub fn in_dir(dir: impl Into<PathBuf>) -> ModuleCache {
        ModuleCache {
            dir: Some(dir.into()),
        }
    }

    /// The file an entry lives in.
    pub fn entry_path(&self, source: &str, options: &[String], info: &GpuInfo) -> Option<PathBuf> {
        let mut keyed = options.join("\n");
        keyed.push('\n');
        keyed.push_str(source);
        let hash = xxhash_rust::xxh3::xxh3_64(keyed.as_bytes());
        self.dir.as_ref().map(|d| {
            d.join(format!(
                "{hash:016x}-{}-drv{}.ptx",
                info.sm(),
                info.driver_version
            ))
        })
    }

    /// The PTX of `kernel`: read from the cache, or compiled with NVRTC and stored.
    pub fn ptx(&self, kernel: &Kernel, options: &[String], info: &GpuInfo) -> Result<String> {
        let path = self.entry_path(&kernel.source, options, info);
        if let Some(p) = &path
            && let Ok(text) = std::fs::read_to_string(p)
            && text.contains(".entry")
        {
            return Ok(text);
        }
        let ptx = compile(kernel, options)?;
        if let Some(p) = &path {
            store(p, &ptx);
        }
        Ok(ptx)
    }
}

/// Writes an entry atomically (temporary file, then rename); failures are ignored.
fn store(path: &std::path::Path, text: &str) {
    let Some(dir) = path.parent() else { return };
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    if std::fs::write(&tmp, text).is_ok() && std::fs::rename(&tmp, path).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

/// Compiles `kernel` with NVRTC; a compile error carries NVRTC's log.
pub fn compile(kernel: &Kernel, options: &[String]) -> Result<String> {
    let opts = cudarc::nvrtc::CompileOptions {
        options: options.to_vec(),
        name: Some(format!("zipflow_{}.cu", kernel.out)),
        ..Default::default()
    };
    let ptx = cudarc::nvrtc::compile_ptx_with_opts(&kernel.source, opts).map_err(|e| {
        let what = match &e {
            cudarc::nvrtc::CompileError::CompileError { log, .. } => format!(
                "NVRTC failed to compile the kernel for `{}`:\n{}",
                kernel.key,
                log.to_string_lossy()
            ),
            _ => format!("NVRTC failed for `{}`", kernel.key),
        };
        Error::external(what, e)
    })?;
    let bytes = ptx
        .as_bytes()
        .ok_or_else(|| Error::unsupported("NVRTC returned no PTX image"))?;
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8(bytes[..end].to_vec())
        .map_err(|e| Error::external("NVRTC returned PTX that is not UTF-8", e))
}
