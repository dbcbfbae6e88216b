//! Helping the hardware prefetcher: software prefetch of the words a kernel reads next where
//! it cannot see the pattern (sparse gathers), and loads in address order ahead of kernels whose
//! own loads are scheduled out of order (bit unpacking).

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

/// Loads `words` in ascending address order, four loads per 64 bytes (16 bytes apart), and
/// discards them.
///
/// An unrolled unpacking kernel loads its rows in the order the compiler schedules them, and
/// on an AMD Zen 4 the hardware prefetcher then lost the stream: the fused sum over words
/// packed at 12-17 bits read DRAM at 8-9 GB/s on one core where a plain sum read 24-32 GB/s.
/// Loads issued first in address order, independent of each other, restore the ascending
/// stream, and the kernel's own loads then hit L1 or a fill in flight. One load per line was
/// not enough there (widths 13-16 at 1.4-1.9x the plain sum); four per line, the plain sum's
/// own pattern, gave 2.0-2.7x. Software prefetch some vectors ahead did worse than either. The
/// fused NDVI, which unpacks two bands into L1 and is bound by its arithmetic, got slower with
/// these loads (0.52-0.90x plain to 0.42-0.55x at two threads), so it does not use them.
#[inline(always)]
pub(crate) fn load_in_order<T: Copy>(words: &[T]) {
    let step = (16 / size_of::<T>().max(1)).max(1);
    let mut i = 0;
    while i < words.len() {
        // SAFETY: `i < words.len()`; a volatile read is neither removed nor reordered with the
        // others, and its value is not needed.
        unsafe { std::ptr::read_volatile(words.as_ptr().add(i)) };
        i += step;
    }
}
