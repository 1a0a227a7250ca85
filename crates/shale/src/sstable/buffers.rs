//! Per-thread recycling of block buffers.
//!
//! A point lookup that misses the block cache decompresses a block into a fresh buffer, and the
//! insert that caches it evicts another block, often one a different thread allocated. With
//! glibc's per-thread arenas, freeing that buffer takes the other arena's lock: two threads
//! reading through a small cache spent their time waiting on each other's arena locks (two
//! `readrandom` threads ran 1.2x one thread). A dropped block's buffer goes to a small pool of
//! the dropping thread instead, and that thread's next decompression reuses it, so buffers move
//! between threads without going back through the allocator.
//!
//! The pool is bounded by count and by total bytes, so a thread holds at most
//! `MAX_POOLED_BYTES` in it, whatever the block size; it is freed when the thread exits.

use std::cell::RefCell;

/// Buffers kept per thread.
const MAX_POOLED: usize = 32;
/// Bytes of buffer capacity kept per thread, all buffers together.
const MAX_POOLED_BYTES: usize = 256 * 1024;

struct Pool {
    buffers: Vec<Vec<u8>>,
    /// Total capacity of `buffers`.
    bytes: usize,
}

thread_local! {
    static POOL: RefCell<Pool> = const {
        RefCell::new(Pool {
            buffers: Vec::new(),
            bytes: 0,
        })
    };
}

/// An empty buffer with room for at least `capacity` bytes: a pooled one when one is large
/// enough, else a new allocation.
pub(crate) fn take(capacity: usize) -> Vec<u8> {
    let pooled = POOL
        .try_with(|pool| {
            let mut pool = pool.try_borrow_mut().ok()?;
            // The most recently returned buffer is the likeliest to still be in the CPU cache.
            // At most twice the size asked for: the block cache weighs a block by its length,
            // so a much larger buffer would hold memory the cache does not count.
            let fits = |b: &Vec<u8>| b.capacity() >= capacity && b.capacity() / 2 <= capacity;
            let at = pool.buffers.iter().rposition(fits)?;
            let buf = pool.buffers.swap_remove(at);
            pool.bytes -= buf.capacity();
            Some(buf)
        })
        .ok()
        .flatten();
    match pooled {
        Some(mut buf) => {
            buf.clear();
            buf
        }
        None => Vec::with_capacity(capacity),
    }
}

/// Keeps `buf` for a later [`take`] on this thread, or frees it when the pool is full or the
/// buffer too small to be worth keeping.
pub(crate) fn give(buf: Vec<u8>) {
    if buf.capacity() < 64 {
        return;
    }
    // During thread teardown the pool may be gone: then the buffer is simply freed.
    let _ = POOL.try_with(|pool| {
        if let Ok(mut pool) = pool.try_borrow_mut() {
            if pool.buffers.len() < MAX_POOLED && pool.bytes + buf.capacity() <= MAX_POOLED_BYTES {
                pool.bytes += buf.capacity();
                pool.buffers.push(buf);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_given_buffer_is_taken_back_when_large_enough() {
        let mut buf = Vec::with_capacity(4096);
        buf.extend_from_slice(b"old contents");
        let ptr = buf.as_ptr();
        give(buf);
        // Too large a request: a new buffer.
        let big = take(8192);
        assert!(big.capacity() >= 8192);
        assert_ne!(big.as_ptr(), ptr);
        // Fits: the pooled buffer, emptied.
        let again = take(2048);
        assert_eq!(again.as_ptr(), ptr);
        assert!(again.is_empty());
        assert!(again.capacity() >= 4096);
    }

    #[test]
    fn the_pool_is_bounded_in_count_and_bytes() {
        for _ in 0..MAX_POOLED * 2 {
            give(Vec::with_capacity(1024));
        }
        let (count, bytes) = POOL.with(|p| {
            let p = p.borrow();
            (
                p.buffers.len(),
                p.buffers.iter().map(Vec::capacity).sum::<usize>(),
            )
        });
        assert_eq!(count, MAX_POOLED);
        assert_eq!(bytes, POOL.with(|p| p.borrow().bytes));
        // Large buffers stop at the byte bound, well before the count bound.
        std::thread::spawn(|| {
            for _ in 0..MAX_POOLED {
                give(Vec::with_capacity(64 * 1024));
            }
            let (count, bytes) = POOL.with(|p| (p.borrow().buffers.len(), p.borrow().bytes));
            assert_eq!(count, MAX_POOLED_BYTES / (64 * 1024));
            assert!(bytes <= MAX_POOLED_BYTES);
            // A much smaller request does not get a large buffer.
            assert!(take(1024).capacity() < 64 * 1024);
            // Taking one back gives its bytes back to the budget.
            let taken = take(60 * 1024);
            assert!(taken.capacity() >= 64 * 1024);
            assert_eq!(POOL.with(|p| p.borrow().bytes), bytes - taken.capacity());
        })
        .join()
        .expect("thread");
    }
}
