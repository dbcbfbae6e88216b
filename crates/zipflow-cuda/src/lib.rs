//! zipflow on NVIDIA GPUs: decode compressed columns on the device, and encode text there.
//!
//! For each plan shape among a column's chunks (the tree of primitives and types, without
//! parameters), [`codegen`] writes one CUDA C kernel that decodes a chunk's streams in
//! registers and shared memory and writes only the final values. NVRTC compiles it for the
//! device's architecture at run time; modules are cached in memory and on disk ([`cache`]).
//! [`decode`] uploads the compressed bytes from pinned memory, overlapping copies with
//! kernels on two streams, and launches one kernel per shape over all chunks of that shape.
//!
//! [`ops`] holds one module per GPU op (its descriptor slots, its host fill and the CUDA it
//! emits) and maps encoding ids to ops; [`arrow`] turns GPU-decoded columns into Arrow
//! record batches. [`encode`] writes `chardict16` and `chartable` nodes from bytes in device
//! memory, equal byte for byte to the CPU encoder's.
//!
//! `cudarc` loads the CUDA driver and NVRTC dynamically, so this crate builds and its tests
//! run on machines without CUDA; [`Gpu::open`] then fails with `no usable GPU: <why>`.
//!
//! ```no_run
//! use zipflow_cuda::{Gpu, decode_column_to_host};
//! use zipflow_format::ZfFile;
//!
//! let gpu = Gpu::open(0)?;
//! println!("{}", gpu.info());
//! let file = ZfFile::open("lineitem.zf")?;
//! let col = file.column_index("l_extendedprice").unwrap_or(0);
//! let values = decode_column_to_host(&gpu, &file, col)?;
//! # Ok::<(), zipflow_core::Error>(())
//! ```
//!
//! Byte strings decode when their plans are `strdict`, `words` or `plain` over numeric
//! sub-plans (`ans`, `fsst` and the character coders included), into Arrow's layout (bytes,
//! then offsets). Every primitive the CPU writes decodes but `zstd`, which has no GPU decoder;
//! a composition the generator has no code for gives an `Unsupported` error naming it, and
//! callers decode it on the CPU.
//! Validity (null) streams are small and stay on the CPU.

pub mod arrow;
pub mod cache;
pub mod codegen;
pub mod decode;
pub mod device;
pub mod encode;
pub mod ops;
pub mod query;
pub mod shape;

pub use decode::{
    ColumnDecoder, ColumnKernel, DeviceColumn, TunedShape, column_kernels, decode_column,
    decode_column_to_host, decode_trees,
};
pub use device::{Gpu, GpuInfo, no_gpu};
pub use shape::{Op, Shape};

/// Whether `ZIPFLOW_REQUIRE_GPU` is set to a value other than `0` or empty: tests then treat
/// a missing GPU as a failure instead of skipping.
pub fn gpu_required() -> bool {
    std::env::var("ZIPFLOW_REQUIRE_GPU").is_ok_and(|v| !v.is_empty() && v != "0")
}
