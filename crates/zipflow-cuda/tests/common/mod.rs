//! What the GPU test files share.

use zipflow_cuda::{Gpu, gpu_required};

/// The first GPU, or `None` (the test skips, saying why) when there is none; with
/// `ZIPFLOW_REQUIRE_GPU` set, a missing GPU fails the test instead.
pub fn gpu(test: &str) -> Option<Gpu> {
    match Gpu::open(0) {
        Ok(g) => Some(g),
        Err(e) if gpu_required() => panic!("{test}: ZIPFLOW_REQUIRE_GPU is set, but: {e}"),
        Err(e) => {
            eprintln!("{test}: skipped ({e})");
            None
        }
    }
}
