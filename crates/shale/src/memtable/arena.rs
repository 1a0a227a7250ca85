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
//!
//! Regular chunks are anonymous memory maps. A database's arenas share a [`ChunkPool`]: a
//! dropped arena (a flushed memtable) leaves its chunks there for the next one, so the memory
//! of a steady stream of memtables is mapped and faulted in once. The memtables and the spare
//! chunks stay within the write buffers, and spares beyond one write buffer's worth borrow
//! their room from the block cache.

use std::alloc::{self, Layout};
use std::ptr::NonNull;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::cache::BlockCache;

/// Bytes in a regular chunk.
pub(crate) const CHUNK_BYTES: usize = 256 * 1024;

/// Alignment of every chunk; the largest alignment an allocation may ask for.
pub(crate) const MAX_ALIGN: usize = 16;

/// A chunk of raw memory owned by the arena.
///
/// Regular chunks are anonymous memory maps, not heap blocks. A flushed memtable then gives its
/// memory straight back to the kernel; heap blocks of this size are served from, and returned
/// to, the allocator's per-thread arenas, where they stayed resident and fragmented them
/// (measured in a 1M-key fill: 7 MB more resident memory than the memtables held). Oversized
/// chunks, one per large entry, stay on the heap, which maps blocks that big itself and saves
/// the arena a system call per entry.
enum Chunk {
    #[cfg(not(miri))]
    Mapped(memmap2::MmapMut),
    // Held for its `Drop`, which frees the block.
    #[allow(dead_code)]
    Heap(HeapBlock),
}

/// A heap allocation of the arena, freed when dropped.
struct HeapBlock {
    ptr: NonNull<u8>,
    layout: Layout,
}

impl Drop for HeapBlock {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from `alloc::alloc(self.layout)` in `Arena::new_chunk` and is freed
        // only here, once, when the arena that owns the chunk is dropped.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

/// Spare regular chunks of dropped arenas, for the next arenas of the same database.
///
/// The chunks in use plus the spares stay within all the write buffers (`max_chunks`), and the
/// spares beyond what the chunks in use leave of one write buffer (`free_chunks`) are
/// borrowed from the block cache: kept only while the cache lends the room
/// ([`BlockCache::try_lend`]), and the room is given back as soon as they are used or
/// unmapped. Spares within one write buffer are what the active memtable can still grow into
/// when a flushed one is dropped; the borrowed ones are the next memtable's, so a steady stream
/// of memtables reuses the same memory instead of mapping and zeroing fresh pages for each
/// (the kernel's work per fresh page took a fifth of a batch load's writer thread). The
/// memtables, the spares and the cached blocks together stay within the write buffers plus
/// the cache's capacity.
///
/// Once writes pause (no chunk drawn for [`SPARES_IDLE_AFTER`]), background work unmaps the
/// spares ([`ChunkPool::take_idle_spares`]), so reads do not share memory with idle spares.
pub(crate) struct ChunkPool {
    #[cfg(not(miri))]
    state: Mutex<PoolState>,
    /// Chunks in use plus spares that cost nothing beyond one write buffer.
    #[cfg_attr(miri, allow(dead_code))]
    free_chunks: usize,
    /// Chunks in use plus spares, at most (spares beyond it are unmapped).
    #[cfg_attr(miri, allow(dead_code))]
    max_chunks: usize,
    /// Lends the room of the spares beyond `free_chunks`; without it there are none.
    cache: Option<Arc<BlockCache>>,
}

/// How long no arena may have drawn a chunk before the spares count as idle.
///
/// Long enough to outlast a writer stalled on a flush: with "no chunk drawn since the last
/// background job" as the test, spares went whenever two jobs ended back to back during a
/// stall, and a random batch load spent 8% of its writer's time mapping (and zeroing) fresh
/// chunks. Short enough that a pause in writes gives the memory back promptly.
pub(crate) const SPARES_IDLE_AFTER: Duration = Duration::from_millis(200);

#[cfg(not(miri))]
#[derive(Default)]
struct PoolState {
    spare: Vec<memmap2::MmapMut>,
    /// Chunks of live arenas that came from, or will go back to, this pool.
    in_use: usize,
    /// When an arena last asked for a chunk.
    last_draw: Option<Instant>,
    /// Chunks' worth of room borrowed from the cache: always `borrowed()` of the state.
    lent: usize,
}

#[cfg(not(miri))]
impl PoolState {
    /// Spares beyond what the chunks in use leave of `free_chunks`, with `extra` more spares.
    fn borrowed(&self, free_chunks: usize, extra: usize) -> usize {
        (self.spare.len() + extra).saturating_sub(free_chunks.saturating_sub(self.in_use))
    }
}

impl ChunkPool {
    /// A pool for arenas that together usually hold up to `write_buffers_bytes`, whose spares
    /// cost nothing within `free_bytes` and borrow room from `cache` beyond it.
    pub(crate) fn new(
        free_bytes: usize,
        write_buffers_bytes: usize,
        cache: Option<Arc<BlockCache>>,
    ) -> Arc<ChunkPool> {
        Arc::new(ChunkPool {
            #[cfg(not(miri))]
            state: Mutex::new(PoolState::default()),
            free_chunks: free_bytes / CHUNK_BYTES,
            max_chunks: write_buffers_bytes.max(free_bytes) / CHUNK_BYTES,
            cache,
        })
    }

    /// Bytes of the spare chunks held now.
    #[cfg(test)]
    pub(crate) fn spare_bytes(&self) -> usize {
        self.spare_and_lent_bytes().0
    }

    /// Bytes of the spare chunks held now and of the cache's room they borrow, read together
    /// (the loan is never more than the spares).
    pub(crate) fn spare_and_lent_bytes(&self) -> (usize, usize) {
        #[cfg(not(miri))]
        {
            let state = self.state.lock();
            (state.spare.len() * CHUNK_BYTES, state.lent * CHUNK_BYTES)
        }
        #[cfg(miri)]
        (0, 0)
    }

    /// Gives the cache back the room the spares no longer borrow.
    #[cfg(not(miri))]
    fn settle(&self, state: &mut PoolState) {
        let borrowed = state.borrowed(self.free_chunks, 0);
        if state.lent > borrowed {
            if let Some(cache) = &self.cache {
                cache.repay((state.lent - borrowed) * CHUNK_BYTES);
            }
            state.lent = borrowed;
        }
    }

    /// A spare chunk if there is one; either way the caller's next chunk counts as in use.
    #[cfg(not(miri))]
    fn take(&self) -> Option<memmap2::MmapMut> {
        let mut state = self.state.lock();
        state.in_use += 1;
        state.last_draw = Some(Instant::now());
        let spare = state.spare.pop();
        self.settle(&mut state);
        spare
    }

    /// The spares, if no arena has asked for a chunk for [`SPARES_IDLE_AFTER`] before `now`:
    /// writes have paused, so they would only sit in memory. Dropping the result unmaps them;
    /// background work calls this as it ends and drops the result outside the database lock.
    pub(crate) fn take_idle_spares(&self, now: Instant) -> IdleSpares {
        #[cfg(not(miri))]
        {
            let mut state = self.state.lock();
            let idle = state
                .last_draw
                .is_none_or(|t| now.saturating_duration_since(t) >= SPARES_IDLE_AFTER);
            if idle {
                let spares = std::mem::take(&mut state.spare);
                self.settle(&mut state);
                IdleSpares(spares)
            } else {
                IdleSpares(Vec::new())
            }
        }
        #[cfg(miri)]
        {
            let _ = now;
            IdleSpares(Vec::new())
        }
    }

    /// Whether the pool holds spare chunks (idle or not).
    pub(crate) fn has_spares(&self) -> bool {
        #[cfg(not(miri))]
        return !self.state.lock().spare.is_empty();
        #[cfg(miri)]
        return false;
    }

    /// Takes back a chunk of a dropped arena: kept if there is room, otherwise unmapped.
    #[cfg(not(miri))]
    fn give(&self, map: memmap2::MmapMut) {
        let unwanted = {
            let mut state = self.state.lock();
            state.in_use = state.in_use.saturating_sub(1);
            // Kept, the chunk needs at most one chunk's worth of room more than is lent now
            // (a chunk leaving use frees room as much as a spare takes it): borrowed only then,
            // so that a chunk given back while the pool is within one write buffer costs the
            // cache nothing, not a repayment and a loan.
            let to_borrow = state
                .borrowed(self.free_chunks, 1)
                .saturating_sub(state.lent);
            let keep = state.in_use + state.spare.len() < self.max_chunks
                && (to_borrow == 0
                    || self
                        .cache
                        .as_ref()
                        .is_some_and(|c| c.try_lend(to_borrow * CHUNK_BYTES)));
            let unwanted = if keep {
                state.lent += to_borrow;
                state.spare.push(map);
                None
            } else {
                Some(map)
            };
            self.settle(&mut state);
            unwanted
        };
        // Unmapped outside the lock: a writer drawing a chunk need not wait for it.
        drop(unwanted);
    }

    /// A chunk counted by `take` never reached an arena (its map failed).
    #[cfg(not(miri))]
    fn forget(&self) {
        let mut state = self.state.lock();
        state.in_use = state.in_use.saturating_sub(1);
        self.settle(&mut state);
    }
}

impl Drop for ChunkPool {
    fn drop(&mut self) {
        #[cfg(not(miri))]
        if let Some(cache) = &self.cache {
            cache.repay(self.state.get_mut().lent * CHUNK_BYTES);
        }
    }
}

/// Spare chunks taken out of a [`ChunkPool`]; unmapped when dropped.
pub(crate) struct IdleSpares(
    #[cfg(not(miri))] Vec<memmap2::MmapMut>,
    #[cfg(miri)] Vec<()>,
);

impl IdleSpares {
    /// Whether there is nothing to unmap.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Hands out raw, uninitialised, never-freed memory from large chunks.
pub(crate) struct Arena {
    chunks: Vec<Chunk>,
    /// Where regular chunks come from and go back to; `None`: mapped and unmapped each time.
    pool: Option<Arc<ChunkPool>>,
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
    /// An empty arena without a pool; the first chunk is taken on the first allocation.
    #[cfg(test)]
    pub(crate) fn new() -> Arena {
        Arena::with_pool(None)
    }

    /// An empty arena taking regular chunks from `pool` first and leaving them there when
    /// dropped.
    pub(crate) fn with_pool(pool: Option<Arc<ChunkPool>>) -> Arena {
        Arena {
            chunks: Vec::new(),
            pool,
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
        #[cfg(not(miri))]
        if size == CHUNK_BYTES {
            // A new map is populated up front: one system call faults the whole chunk in, where
            // touching it page by page would take a fault per page.
            let map = match self.pool.as_ref().map(|p| p.take()) {
                Some(Some(spare)) => Ok(spare),
                _ => memmap2::MmapOptions::new().len(size).populate().map_anon(),
            };
            if let Ok(mut map) = map {
                // A map's chunk is page-aligned, so aligned for MAX_ALIGN, and never at null.
                if let Some(ptr) = NonNull::new(map.as_mut_ptr()) {
                    self.chunks.push(Chunk::Mapped(map));
                    self.reserved_bytes += size;
                    return ptr;
                }
            }
            if let Some(pool) = &self.pool {
                pool.forget();
            }
            // Out of map areas or address space: the heap may still have room.
        }
        let layout = match Layout::from_size_align(size.max(1), MAX_ALIGN) {
            Ok(layout) => layout,
            Err(_) => panic!("arena allocation of {size} bytes overflows the address space"),
        };
        // SAFETY: the layout has a non-zero size (`max(1)`).
        let raw = unsafe { alloc::alloc(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            alloc::handle_alloc_error(layout)
        };
        self.chunks.push(Chunk::Heap(HeapBlock { ptr, layout }));
        self.reserved_bytes += layout.size();
        ptr
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        #[cfg(not(miri))]
        if let Some(pool) = &self.pool {
            for chunk in self.chunks.drain(..) {
                if let Chunk::Mapped(map) = chunk {
                    pool.give(map);
                }
            }
        }
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

    #[test]
    #[cfg_attr(miri, ignore = "memory maps are not available under miri")]
    fn a_pool_recycles_chunks_within_its_size_and_lets_idle_ones_go() {
        let pool = ChunkPool::new(4 * CHUNK_BYTES, 8 * CHUNK_BYTES, None);
        let fill = |arena: &mut Arena, chunks: usize| -> Vec<usize> {
            (0..chunks)
                .map(|_| arena.allocate(CHUNK_BYTES / 4, 8).as_ptr() as usize)
                .collect::<Vec<_>>()
                .chunks(4)
                .map(|c| c[0])
                .collect()
        };
        // Two arenas of three chunks each: six in use, more than the pool keeps.
        let mut first = Arena::with_pool(Some(pool.clone()));
        let mut second = Arena::with_pool(Some(pool.clone()));
        let first_chunks = fill(&mut first, 12);
        fill(&mut second, 12);
        assert_eq!(pool.spare_bytes(), 0);
        // Dropping the first leaves room for one spare beside the second's three chunks.
        drop(first);
        assert_eq!(pool.spare_bytes(), CHUNK_BYTES);
        // The next arena gets that chunk back rather than a new map.
        let mut third = Arena::with_pool(Some(pool.clone()));
        let reused = fill(&mut third, 4);
        assert!(
            first_chunks.contains(&reused[0]),
            "the spare chunk was not reused"
        );
        assert_eq!(pool.spare_bytes(), 0);
        drop(second);
        assert_eq!(pool.spare_bytes(), 3 * CHUNK_BYTES);
        // A chunk was drawn just now, so the spares stay; once no chunk has been drawn for
        // SPARES_IDLE_AFTER they are let go.
        let now = Instant::now();
        assert!(pool.take_idle_spares(now).is_empty());
        assert!(pool.has_spares());
        assert_eq!(pool.spare_bytes(), 3 * CHUNK_BYTES);
        assert!(!pool.take_idle_spares(now + SPARES_IDLE_AFTER).is_empty());
        assert_eq!(pool.spare_bytes(), 0);
        assert!(!pool.has_spares());
        // Memory handed out from a recycled chunk is as usable as fresh memory.
        let p = third.allocate(64, 8);
        // SAFETY: the arena just handed out 64 writable bytes at `p`.
        unsafe { std::ptr::write_bytes(p.as_ptr(), 0xab, 64) };
    }

    /// An arena holding `chunks` regular chunks of `pool`.
    #[cfg(not(miri))]
    fn arena_of(pool: &Arc<ChunkPool>, chunks: usize) -> Arena {
        let mut arena = Arena::with_pool(Some(pool.clone()));
        for _ in 0..chunks * 4 {
            arena.allocate(CHUNK_BYTES / 4, 8);
        }
        assert_eq!(arena.reserved_bytes(), chunks * CHUNK_BYTES);
        arena
    }

    /// Random memtable lifetimes, cache inserts and pauses against the pool's invariants: the
    /// pool's loan is exactly its spares beyond one write buffer's worth and is what the cache
    /// has lent, the chunks in use and the spares stay within the write buffers, and the
    /// cache's blocks and loan within its capacity.
    #[test]
    #[cfg(not(miri))]
    fn the_loan_always_matches_the_spares_beyond_one_write_buffer() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        let capacity = 6 * CHUNK_BYTES;
        let cache = Arc::new(BlockCache::new(capacity));
        let (free, max) = (4, 8);
        let pool = ChunkPool::new(free * CHUNK_BYTES, max * CHUNK_BYTES, Some(cache.clone()));
        let mut builder = crate::sstable::block::BlockBuilder::new(16);
        builder.add(b"k", &[1u8; 20_000]);
        let block = Arc::new(crate::sstable::block::Block::new(builder.finish()).expect("block"));
        let mut arenas: Vec<Arena> = Vec::new();
        let mut next_offset = 0;
        for step in 0..3000 {
            match rng.gen_range(0..10) {
                0..=3 => arenas.push(arena_of(&pool, rng.gen_range(1..=3))),
                4..=6 if !arenas.is_empty() => {
                    let at = rng.gen_range(0..arenas.len());
                    drop(arenas.swap_remove(at));
                }
                7 | 8 => {
                    // Inserted twice: the second miss is admitted once admission is selective.
                    for _ in 0..2 {
                        cache.insert(9, next_offset, block.clone());
                    }
                    next_offset += 1;
                }
                _ => drop(pool.take_idle_spares(Instant::now() + SPARES_IDLE_AFTER)),
            }
            let state = pool.state.lock();
            let spares = state.spare.len();
            assert_eq!(state.lent, state.borrowed(free, 0), "step {step}");
            assert_eq!(state.lent * CHUNK_BYTES, cache.lent(), "step {step}");
            assert!(spares == 0 || state.in_use + spares <= max, "step {step}");
            assert!(cache.usage() + cache.lent() <= capacity, "step {step}");
            drop(state);
            if arenas.len() > 6 {
                arenas.clear();
            }
        }
        drop(arenas);
        drop(pool);
        assert_eq!(cache.lent(), 0);
    }

    #[test]
    #[cfg(not(miri))]
    fn spares_beyond_one_write_buffer_borrow_room_from_the_cache() {
        let cache = Arc::new(BlockCache::new(3 * CHUNK_BYTES));
        // One write buffer of 2 chunks, two of them in all.
        let pool = ChunkPool::new(2 * CHUNK_BYTES, 4 * CHUNK_BYTES, Some(cache.clone()));
        let flushed = arena_of(&pool, 2);
        let active = arena_of(&pool, 2);
        // The active memtable fills a write buffer: the flushed one's chunks are the next
        // memtable's, kept on loan from the cache.
        drop(flushed);
        assert_eq!(pool.spare_bytes(), 2 * CHUNK_BYTES);
        assert_eq!(cache.lent(), 2 * CHUNK_BYTES);
        // The next memtable takes one: one chunk less on loan.
        let next = arena_of(&pool, 1);
        assert_eq!(
            (pool.spare_bytes(), cache.lent()),
            (CHUNK_BYTES, CHUNK_BYTES)
        );
        // The active memtable flushed: one chunk in use, so one spare is free of charge; the
        // chunks in use and the spares stay within the two write buffers.
        drop(active);
        assert_eq!(pool.spare_bytes(), 3 * CHUNK_BYTES);
        assert_eq!(cache.lent(), 2 * CHUNK_BYTES);
        // Writes pause: the spares go, and with them the loan.
        assert!(!pool
            .take_idle_spares(Instant::now() + SPARES_IDLE_AFTER)
            .is_empty());
        assert_eq!((pool.spare_bytes(), cache.lent()), (0, 0));
        drop(next);
        assert_eq!((pool.spare_bytes(), cache.lent()), (CHUNK_BYTES, 0));
        drop(pool.take_idle_spares(Instant::now() + SPARES_IDLE_AFTER));

        // A cache with blocks in it lends only the room they leave.
        let mut builder = crate::sstable::block::BlockBuilder::new(16);
        builder.add(b"k", &[7u8; 8000]);
        let block = Arc::new(crate::sstable::block::Block::new(builder.finish()).expect("block"));
        let full = Arc::new(BlockCache::new(3 * CHUNK_BYTES));
        let mut offset = 0;
        while full.usage() < CHUNK_BYTES * 3 / 2 {
            assert!(full.insert(1, offset, block.clone()));
            offset += 1;
        }
        assert!(full.usage() < CHUNK_BYTES * 2);
        let pool = ChunkPool::new(2 * CHUNK_BYTES, 4 * CHUNK_BYTES, Some(full.clone()));
        let flushed = arena_of(&pool, 2);
        let active = arena_of(&pool, 2);
        drop(flushed);
        assert_eq!(pool.spare_bytes(), CHUNK_BYTES);
        assert_eq!(full.lent(), CHUNK_BYTES);
        // Dropping the pool repays the cache.
        drop(active);
        drop(pool);
        assert_eq!(full.lent(), 0);

        // Without a cache to borrow from, spares stay within one write buffer.
        let pool = ChunkPool::new(2 * CHUNK_BYTES, 4 * CHUNK_BYTES, None);
        let flushed = arena_of(&pool, 2);
        let _active = arena_of(&pool, 2);
        drop(flushed);
        assert_eq!(pool.spare_bytes(), 0);
    }
}
