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
//! The pool is bounded (count and size of buffers), so a thread holds at most
//! `MAX_POOLED * MAX_POOLED_CAPACITY` bytes; it is freed when the thread exits.

use std::cell::RefCell;

/// Buffers kept per thread.
const MAX_POOLED: usize = 32;
/// Buffers larger than this are freed, not kept (blocks are a few KiB; large ones are rare).
const MAX_POOLED_CAPACITY: usize = 64 * 1024;

thread_local! {
    static POOL: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// An empty buffer with room for at least `capacity` bytes: a pooled one when one is large
/// enough, else a new allocation.
pub(crate) fn take(capacity: usize) -> Vec<u8> {
    let pooled = POOL
        .try_with(|pool| {
            let mut pool = pool.try_borrow_mut().ok()?;
            // The most recently returned buffer is the likeliest to still be in the CPU cache.
            let at = pool.iter().rposition(|b| b.capacity() >= capacity)?;
            Some(pool.swap_remove(at))
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
/// buffer is too small or too large to be worth keeping.
pub(crate) fn give(buf: Vec<u8>) {
    if buf.capacity() < 64 || buf.capacity() > MAX_POOLED_CAPACITY {
        return;
    }
    // During thread teardown the pool may be gone: then the buffer is simply freed.
    let _ = POOL.try_with(|pool| {
        if let Ok(mut pool) = pool.try_borrow_mut() {
            if pool.len() < MAX_POOLED {
                pool.push(buf);
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
    fn the_pool_is_bounded() {
        for _ in 0..MAX_POOLED * 2 {
            give(Vec::with_capacity(1024));
        }
        give(Vec::with_capacity(MAX_POOLED_CAPACITY + 1));
        let pooled = POOL.with(|p| p.borrow().len());
        assert!(pooled <= MAX_POOLED);
        assert!(POOL.with(|p| p
            .borrow()
            .iter()
            .all(|b| b.capacity() <= MAX_POOLED_CAPACITY)));
    }
}
