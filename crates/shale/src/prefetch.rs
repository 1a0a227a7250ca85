//! Cache prefetch hints: ask the CPU to start loading memory the code is about to read, so that
//! its misses overlap instead of following one another. Hints only: they change no memory and
//! never fault, whatever the address. On targets other than x86-64 they do nothing.

/// Starts loading the cache line holding `ptr`.
#[inline]
pub(crate) fn line<T>(ptr: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint that never faults and writes nothing, for any address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(ptr.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = ptr;
}

/// Starts loading every cache line of `bytes` at once, so reading them costs about one memory
/// latency instead of one per line as a binary search or a checksum reaches each.
pub(crate) fn lines(bytes: &[u8]) {
    for chunk in bytes.chunks(64) {
        line(chunk.as_ptr());
    }
}
