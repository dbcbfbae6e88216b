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

/// A small deterministic generator (xorshift64*).
#[allow(dead_code)] // Not every test file that shares this module draws numbers.
pub fn rng(seed: u64) -> impl FnMut() -> u64 {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    move || {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        s.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}
