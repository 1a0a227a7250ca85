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

/// For a buffer filled front to back that just grew from `old_end` to `new_end` (addresses):
/// starts loading the lines that now lie within `distance` bytes past its end, so that each
/// line is requested once, `distance` bytes before the appends reach it. Addresses past the
/// buffer are harmless: a prefetch never faults.
///
/// Why for appends: a store to a line not in the cache waits for the line, and the next
/// locked instruction (any mutex) waits for that store. A plain prefetch serves: a line no
/// other core holds arrives exclusive, and the store that follows needs no second request.
/// (`_MM_HINT_ET0` would ask for `prefetchw`, but without the `prfchw` target feature it
/// compiles to this same `prefetcht0`.)
#[inline]
pub(crate) fn ahead_for_write(old_end: usize, new_end: usize, distance: usize) {
    for address in lines_ahead(old_end, new_end, distance) {
        line(address as *const u8);
    }
}

/// The addresses of the cache lines [`ahead_for_write`] requests.
#[inline]
fn lines_ahead(old_end: usize, new_end: usize, distance: usize) -> impl Iterator<Item = usize> {
    const LINE: usize = 64;
    let first = old_end.wrapping_add(distance).wrapping_add(LINE - 1) & !(LINE - 1);
    let stop = new_end.wrapping_add(distance);
    (first..stop).step_by(LINE)
}

/// Starts loading every cache line of `bytes` at once, so reading them costs about one memory
/// latency instead of one per line as a binary search or a checksum reaches each.
pub(crate) fn lines(bytes: &[u8]) {
    for chunk in bytes.chunks(64) {
        line(chunk.as_ptr());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_request_each_line_ahead_once() {
        // Appends of assorted sizes from an unaligned start: every line between the first
        // append's end plus the distance and the last one's end plus the distance is requested
        // exactly once, in order, and none before it.
        let start = 1000;
        let mut end = start;
        let mut requested = Vec::new();
        for size in [1, 63, 64, 65, 130, 7, 0, 500, 64] {
            requested.extend(lines_ahead(end, end + size, 256));
            end += size;
        }
        let expected: Vec<usize> = ((start + 256).div_ceil(64)..(end + 256).div_ceil(64))
            .map(|l| l * 64)
            .collect();
        assert_eq!(requested, expected);
        // The hint itself changes nothing, wherever it points.
        let bytes = [7u8; 300];
        let base = bytes.as_ptr() as usize;
        ahead_for_write(base, base + 300, 256);
        ahead_for_write(usize::MAX - 100, usize::MAX - 10, 256);
        assert!(bytes.iter().all(|&b| b == 7));
        lines(&bytes);
        line(std::ptr::null::<u8>());
    }
}
