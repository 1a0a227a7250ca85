//! A bump allocator for memtable entries: memory is taken from large chunks and given back
//! only when the whole arena is dropped, so an insert costs a pointer bump instead of a heap
//! allocation.
//!
//! Invariants: every pointer handed out stays valid, and never moves, until the arena is
//! dropped; allocations never overlap. An allocation bigger than a quarter of a chunk gets a
//! chunk of its own, so a large value neither wastes the rest of the current chunk nor forces
//! every later chunk to be oversized.
//!
//! Thread-safety: allocating needs `&mut Arena`; the skiplist keeps its arena behind the
//! writer mutex. Memory handed out may be read from any thread (the arena is `Send`).

use std::alloc::{self, Layout};
use std::ptr::NonNull;

/// Bytes in a regular chunk.
pub(crate) const CHUNK_BYTES: usize = 256 * 1024;

/// Alignment of every chunk; the largest alignment an allocation may ask for.
pub(crate) const MAX_ALIGN: usize = 16;

/// A chunk of raw memory owned by the arena.
struct Chunk {
    ptr: NonNull<u8>,
    layout: Layout,
}

impl Drop for Chunk {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from `alloc::alloc(self.layout)` in `Arena::new_chunk` and is freed
        // only here, once, when the arena that owns the chunk is dropped.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

/// Hands out raw, uninitialised, never-freed memory from large chunks.
pub(crate) struct Arena {
    chunks: Vec<Chunk>,
    /// Next free byte of the current chunk (dangling before the first chunk).
    cursor: NonNull<u8>,
    /// Free bytes left at `cursor`.
    remaining: usize,
    /// Bytes handed out so far, including alignment padding.
    used_bytes: usize,
    /// Bytes of all chunks allocated from the system.
    reserved_bytes: usize,
}

// SAFETY: the arena exclusively owns its chunks (like a `Vec<u8>` owns its buffer); the raw
// pointers are only what makes the compiler unable to see that. Moving it to another thread
// moves that ownership, and the chunks are freed with the same global allocator from any thread.
unsafe impl Send for Arena {}

impl Arena {
    /// An empty arena; the first chunk is taken on the first allocation.
    pub(crate) fn new() -> Arena {
        Arena {
            chunks: Vec::new(),
            cursor: NonNull::dangling(),
            remaining: 0,
            used_bytes: 0,
            reserved_bytes: 0,
        }
    }

    /// Bytes handed out so far, padding included: what the entries really occupy.
    pub(crate) fn used_bytes(&self) -> usize {
        self.used_bytes
    }

    /// Bytes obtained from the system allocator, including the unused tail of the current chunk.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn reserved_bytes(&self) -> usize {
        self.reserved_bytes
    }

    /// Returns `size` bytes aligned to `align`, uninitialised, valid until the arena is dropped.
    ///
    /// Panics only if `align` is not a power of two at most [`MAX_ALIGN`] (a programming error)
    /// or if the system allocator fails (as `Vec` does).
    pub(crate) fn allocate(&mut self, size: usize, align: usize) -> NonNull<u8> {
        assert!(align.is_power_of_two() && align <= MAX_ALIGN);
        // Computed from the address rather than with `align_offset`, which is allowed to give up.
        let padding = (self.cursor.as_ptr() as usize).wrapping_neg() & (align - 1);
        if let Some(needed) = padding.checked_add(size) {
            if needed <= self.remaining {
                // SAFETY: `cursor + needed` stays within the current chunk because `needed <=
                // remaining`, and `remaining` counts the bytes left in that chunk.
                let start = unsafe { self.cursor.add(padding) };
                // SAFETY: as above; `cursor + needed` is at most one past the chunk's end.
                self.cursor = unsafe { self.cursor.add(needed) };
                self.remaining -= needed;
                self.used_bytes += needed;
                return start;
            }
        }
        if size > CHUNK_BYTES / 4 {
            // A chunk of its own; the current chunk keeps serving small allocations.
            let ptr = self.new_chunk(size);
            self.used_bytes += size;
            return ptr;
        }
        // Start a new chunk. The tail of the old one is abandoned: at most a quarter of a chunk
        // is wasted, since larger requests never get here.
        let start = self.new_chunk(CHUNK_BYTES);
        // SAFETY: chunks are MAX_ALIGN-aligned, so no padding is needed, and `size <=
        // CHUNK_BYTES / 4` fits in the fresh chunk.
        self.cursor = unsafe { start.add(size) };
        self.remaining = CHUNK_BYTES - size;
        self.used_bytes += size;
        start
    }

    fn new_chunk(&mut self, size: usize) -> NonNull<u8> {
        let layout = match Layout::from_size_align(size.max(1), MAX_ALIGN) {
            Ok(layout) => layout,
            Err(_) => panic!("arena allocation of {size} bytes overflows the address space"),
        };
        // SAFETY: the layout has a non-zero size (`max(1)`).
        let raw = unsafe { alloc::alloc(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            alloc::handle_alloc_error(layout)
        };
        self.chunks.push(Chunk { ptr, layout });
        self.reserved_bytes += layout.size();
        ptr
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocations_are_aligned_disjoint_and_counted() {
        let mut arena = Arena::new();
        assert_eq!(arena.used_bytes(), 0);
        assert_eq!(arena.reserved_bytes(), 0);
        let mut spans = Vec::new();
        for i in 0..if cfg!(miri) { 1500 } else { 5000usize } {
            let size = (i * 37) % 300 + 1;
            let align = [1, 2, 4, 8, 16][i % 5];
            let p = arena.allocate(size, align);
            assert_eq!(p.as_ptr() as usize % align, 0);
            // SAFETY: the arena just handed out `size` writable bytes at `p`.
            unsafe { std::ptr::write_bytes(p.as_ptr(), (i % 251) as u8, size) };
            spans.push((p, size, (i % 251) as u8));
        }
        let mut sorted: Vec<(usize, usize)> = spans
            .iter()
            .map(|(p, size, _)| (p.as_ptr() as usize, *size))
            .collect();
        sorted.sort_unstable();
        for pair in sorted.windows(2) {
            assert!(pair[0].0 + pair[0].1 <= pair[1].0, "allocations overlap");
        }
        for (p, size, fill) in spans {
            // SAFETY: every span is still owned by the live arena and was fully written above.
            let bytes = unsafe { std::slice::from_raw_parts(p.as_ptr().cast_const(), size) };
            assert!(
                bytes.iter().all(|&b| b == fill),
                "an allocation was overwritten"
            );
        }
        assert!(arena.used_bytes() <= arena.reserved_bytes());
        assert!(arena.reserved_bytes() >= CHUNK_BYTES);
    }

    #[test]
    fn large_allocation_gets_its_own_chunk_and_keeps_the_current_one() {
        let mut arena = Arena::new();
        let small = arena.allocate(10, 8);
        let reserved = arena.reserved_bytes();
        let big = arena.allocate(CHUNK_BYTES * 3, 8);
        assert_eq!(arena.reserved_bytes(), reserved + CHUNK_BYTES * 3);
        let next = arena.allocate(10, 8);
        // The small allocation after the big one still comes from the first chunk.
        assert_eq!(next.as_ptr() as usize, small.as_ptr() as usize + 16);
        assert_ne!(big, next);
        assert_eq!(arena.used_bytes(), 16 + CHUNK_BYTES * 3 + 10);
    }
}
