//! The on-disk cache of compiled modules.
//!
//! NVRTC takes ~0.1-1.5 s per module; a cubin read back takes microseconds. Entries are
//! keyed by the xxh3 of the source and options, the device arch and the driver version, and
//! live in `$ZIPFLOW_CACHE_DIR`, else `$XDG_CACHE_HOME/zipflow/cuda`, else
//! `$HOME/.cache/zipflow/cuda`. A cache that cannot be read or written is skipped silently:
//! it only ever saves time.
//!
//! The same directory remembers launch shapes tuned on a device (`zipflow gpu tune`): the block
//! size chosen for a chunk kernel's plan shape, per arch and driver, one line each in
//! `launch.tsv` (`sm_90`, driver version, threads, shape key; tab-separated).

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
                "{hash:016x}-{}-drv{}.cubin",
                info.sm(),
                info.driver_version
            ))
        })
    }

    /// The cubin of `kernel`: read from the cache, or compiled with NVRTC and stored.
    pub fn cubin(&self, kernel: &Kernel, options: &[String], info: &GpuInfo) -> Result<Vec<u8>> {
        let path = self.entry_path(&kernel.source, options, info);
        if let Some(p) = &path
            && let Ok(image) = std::fs::read(p)
            && is_cubin(&image)
        {
            return Ok(image);
        }
        let cubin = compile(kernel, options)?;
        if let Some(p) = &path {
            store(p, &cubin);
        }
        Ok(cubin)
    }
}

/// Block sizes (threads per block) a numeric chunk kernel may be tuned to; the generated code
/// holds for each, and 256 ([`crate::codegen::CHUNK_THREADS`]) is the default.
pub const TUNE_THREADS: [u32; 3] = [128, 256, 512];

/// The entries of a `launch.tsv`: (arch, driver, threads, shape key); malformed lines and
/// block sizes outside [`TUNE_THREADS`] are left out.
fn launch_entries(text: &str) -> Vec<(String, i32, u32, String)> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.splitn(4, '\t');
            let sm = f.next()?.to_string();
            let driver = f.next()?.parse().ok()?;
            let threads = f
                .next()?
                .parse()
                .ok()
                .filter(|t| TUNE_THREADS.contains(t))?;
            let key = f.next().filter(|k| !k.is_empty())?.to_string();
            Some((sm, driver, threads, key))
        })
        .collect()
}

impl ModuleCache {
    fn launch_file(&self) -> Option<PathBuf> {
        self.dir.as_ref().map(|d| d.join("launch.tsv"))
    }

    /// The block size remembered for plan shape `key` on `info`'s arch and driver.
    pub fn remembered_threads(&self, info: &GpuInfo, key: &str) -> Option<u32> {
        let text = std::fs::read_to_string(self.launch_file()?).ok()?;
        launch_entries(&text)
            .into_iter()
            .find(|(sm, d, _, k)| *sm == info.sm() && *d == info.driver_version && k == key)
            .map(|(_, _, t, _)| t)
    }

    /// Remembers `threads` for plan shape `key` on `info`'s arch and driver, replacing what was
    /// remembered before. Like the module cache, a file that cannot be written is skipped.
    pub fn remember_threads(&self, info: &GpuInfo, key: &str, threads: u32) {
        let Some(path) = self.launch_file() else {
            return;
        };
        if !TUNE_THREADS.contains(&threads) || key.contains(['\t', '\n']) {
            return;
        }
        let old = std::fs::read_to_string(&path).unwrap_or_default();
        let mut text = String::new();
        for (sm, d, t, k) in launch_entries(&old) {
            if !(sm == info.sm() && d == info.driver_version && k == key) {
                text.push_str(&format!("{sm}\t{d}\t{t}\t{k}\n"));
            }
        }
        text.push_str(&format!(
            "{}\t{}\t{threads}\t{key}\n",
            info.sm(),
            info.driver_version
        ));
        store(&path, &text);
    }
}

/// Writes an entry atomically (temporary file, then rename); failures are ignored.
fn store(path: &std::path::Path, bytes: impl AsRef<[u8]>) {
    let Some(dir) = path.parent() else { return };
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    if std::fs::write(&tmp, bytes).is_ok() && std::fs::rename(&tmp, path).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

/// Compiles `kernel` with NVRTC for the architecture its options name (a real one,
/// `sm_XY`) and returns the cubin: the device code the driver loads as it is. NVRTC builds it
/// anyway for a real architecture; loading the PTX instead would have the driver compile the
/// same code a second time. A compile error carries NVRTC's log.
pub fn compile(kernel: &Kernel, options: &[String]) -> Result<Vec<u8>> {
    use cudarc::nvrtc::{result, sys};
    let nvrtc = |what: &str| {
        let what = format!("NVRTC failed ({what}) for `{}`", kernel.key);
        move |e: result::NvrtcError| Error::external(what, e)
    };
    let src = std::ffi::CString::new(kernel.source.as_bytes())
        .map_err(|e| Error::external("a generated kernel holds a NUL byte", e))?;
    let name = std::ffi::CString::new(format!("zipflow_{}.cu", kernel.out))
        .map_err(|e| Error::external("a kernel name holds a NUL byte", e))?;
    let prog = result::create_program(&src, Some(&name)).map_err(nvrtc("creating a program"))?;
    // The program is destroyed on every path out.
    struct Program(sys::nvrtcProgram);
    impl Drop for Program {
        fn drop(&mut self) {
            // SAFETY: created by `create_program` above and destroyed only here.
            let _ = unsafe { result::destroy_program(self.0) };
        }
    }
    let prog = Program(prog);
    // SAFETY: `prog.0` is a live program; the options are copied into C strings by the call.
    if let Err(e) = unsafe { result::compile_program(prog.0, options) } {
        // SAFETY: as above; the log is NUL-terminated.
        let log = unsafe { result::get_program_log(prog.0) }
            .map(|l| {
                let bytes: Vec<u8> = l.iter().map(|&c| c as u8).take_while(|&b| b != 0).collect();
                String::from_utf8_lossy(&bytes).into_owned()
            })
            .unwrap_or_default();
        return Err(Error::external(
            format!(
                "NVRTC failed to compile the kernel for `{}`:\n{log}",
                kernel.key
            ),
            e,
        ));
    }
    let mut size = 0usize;
    // SAFETY: `prog.0` was compiled; NVRTC writes the size, then that many bytes.
    unsafe { sys::nvrtcGetCUBINSize(prog.0, &mut size) }
        .result()
        .map_err(nvrtc("sizing the cubin"))?;
    if size == 0 {
        return Err(Error::unsupported(format!(
            "NVRTC returned no cubin for `{}` (options: {})",
            kernel.key,
            options.join(" ")
        )));
    }
    let mut cubin = vec![0u8; size];
    // SAFETY: `cubin` holds the `size` bytes NVRTC asked for.
    unsafe { sys::nvrtcGetCUBIN(prog.0, cubin.as_mut_ptr().cast()) }
        .result()
        .map_err(nvrtc("reading the cubin"))?;
    Ok(cubin)
}

/// Whether `image` is a cubin (an ELF file), as [`compile`] returns and the cache keeps.
pub fn is_cubin(image: &[u8]) -> bool {
    image.starts_with(b"\x7fELF")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(arch: (i32, i32), driver: i32) -> GpuInfo {
        GpuInfo {
            ordinal: 0,
            name: "test".into(),
            arch,
            memory_bytes: 0,
            multiprocessors: 1,
            driver_version: driver,
            nvrtc_version: (13, 0),
        }
    }

    #[test]
    fn launch_shapes_are_remembered_per_arch_driver_and_shape() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let cache = ModuleCache::in_dir(dir.path());
        let h200 = info((9, 0), 13000);
        let key = "delta:i64(rle:i64(bitpack(6):i64,bitpack(3):u32))";
        assert_eq!(cache.remembered_threads(&h200, key), None);
        cache.remember_threads(&h200, key, 512);
        cache.remember_threads(&h200, "rle:i64(plain:i64,plain:u32)", 128);
        assert_eq!(cache.remembered_threads(&h200, key), Some(512));
        // Another arch or driver has its own.
        assert_eq!(cache.remembered_threads(&info((8, 0), 13000), key), None);
        assert_eq!(cache.remembered_threads(&info((9, 0), 12080), key), None);
        // Tuned again: replaced, not added.
        cache.remember_threads(&h200, key, 128);
        assert_eq!(cache.remembered_threads(&h200, key), Some(128));
        let text = std::fs::read_to_string(dir.path().join("launch.tsv"))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(text.lines().count(), 2, "{text}");
        // Sizes outside the tuned set are neither written nor read back.
        cache.remember_threads(&h200, key, 1000);
        assert_eq!(cache.remembered_threads(&h200, key), Some(128));
        std::fs::write(
            dir.path().join("launch.tsv"),
            format!("garbage\nsm_90\t13000\t96\t{key}\nsm_90\tx\t256\t{key}\n"),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(cache.remembered_threads(&h200, key), None);
        // No directory: nothing remembered, nothing fails.
        let none = ModuleCache { dir: None };
        none.remember_threads(&h200, key, 256);
        assert_eq!(none.remembered_threads(&h200, key), None);
    }
}
