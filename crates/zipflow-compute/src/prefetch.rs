//! Software prefetch of the words a kernel reads next, where the hardware prefetcher does not
//! see the pattern (sparse gathers).

/// Prefetches the cache lines of `words[at..at + len]` (those within `words`) into L1;
/// elsewhere than on x86-64, nothing.
#[inline(always)]
#[cfg_attr(not(target_arch = "x86_64"), allow(unused_variables))]
pub(crate) fn ahead<T>(words: &[T], at: usize, len: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        let end = (at + len).min(words.len());
        let step = (64 / size_of::<T>().max(1)).max(1);
        let mut i = at;
        while i < end {
            // SAFETY: a prefetch of an address inside `words`; it reads nothing.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                    words.as_ptr().add(i).cast::<i8>(),
                )
            };
            i += step;
        }
    }
}
