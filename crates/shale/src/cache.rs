//! The block cache: uncompressed table blocks shared between readers, bounded by their total
//! size in bytes.
//!
//! Keys are `(cache_id, block offset)`: each open table gets a `cache_id` unique within the
//! cache (the DB uses the file number), so blocks of different tables never collide. Values are
//! `Arc<Block>`; a block evicted while an iterator still reads it stays alive until the
//! iterator lets go.
//!
//! Invariant: [`BlockCache::usage`] never exceeds [`BlockCache::capacity`]; a block larger than
//! a cache shard is simply not cached.
//!
//! Thread-safety: `Send + Sync`; lookups and inserts lock one shard (quick_cache's sharded
//! CLOCK-Pro cache), so readers on different blocks rarely contend.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::sstable::block::Block;

/// Stripes of a [`StripedCounter`]; a power of two.
const STRIPES: usize = 16;

/// One stripe, alone on its cache line pair (adjacent-line prefetch pulls lines in twos).
#[repr(align(128))]
#[derive(Default)]
struct Stripe(AtomicU64);

/// A statistics counter spread over cache lines: each thread adds to its own stripe, so
/// lookups from several threads do not all write one contended cache line. Reading sums the
/// stripes.
#[derive(Default)]
struct StripedCounter {
    stripes: [Stripe; STRIPES],
}

impl StripedCounter {
    fn add_one(&self) {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        thread_local! {
            static STRIPE: usize = NEXT.fetch_add(1, Ordering::Relaxed) % STRIPES;
        }
        let i = STRIPE.try_with(|i| *i).unwrap_or(0);
        self.stripes[i].0.fetch_add(1, Ordering::Relaxed);
    }

    fn sum(&self) -> u64 {
        self.stripes
            .iter()
            .map(|s| s.0.load(Ordering::Relaxed))
            .sum()
    }
}

/// Weighs a cached block by its uncompressed size.
#[derive(Debug, Clone, Copy)]
struct BlockWeighter;

impl quick_cache::Weighter<(u64, u64), Arc<Block>> for BlockWeighter {
    fn weight(&self, _key: &(u64, u64), block: &Arc<Block>) -> u64 {
        // Zero would let an item live forever; every real block has at least 4 bytes.
        (block.data().len() as u64).max(1)
    }
}

/// A byte-bounded, concurrent cache of uncompressed blocks.
pub struct BlockCache {
    /// `None` when the capacity is zero: nothing is cached.
    inner: Option<quick_cache::sync::Cache<(u64, u64), Arc<Block>, BlockWeighter>>,
    capacity: usize,
    hits: StripedCounter,
    misses: StripedCounter,
}

impl std::fmt::Debug for BlockCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockCache")
            .field("capacity", &self.capacity)
            .field("usage", &self.usage())
            .field("hits", &self.hits())
            .field("misses", &self.misses())
            .finish()
    }
}

/// Typical block size, used only to size the cache's item tables up front.
const TYPICAL_BLOCK_BYTES: usize = 4096;

impl BlockCache {
    /// A cache holding at most `capacity_bytes` bytes of blocks (0 disables caching).
    pub fn new(capacity_bytes: usize) -> BlockCache {
        let inner = (capacity_bytes > 0).then(|| {
            let items = (capacity_bytes / TYPICAL_BLOCK_BYTES).max(16);
            quick_cache::sync::Cache::with_weighter(items, capacity_bytes as u64, BlockWeighter)
        });
        BlockCache {
            inner,
            capacity: capacity_bytes,
            hits: StripedCounter::default(),
            misses: StripedCounter::default(),
        }
    }

    /// Bytes of blocks currently cached.
    pub fn usage(&self) -> usize {
        self.inner.as_ref().map_or(0, |c| c.weight() as usize)
    }

    /// The byte bound given at creation.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Lookups that found their block.
    pub fn hits(&self) -> u64 {
        self.hits.sum()
    }

    /// Lookups that did not.
    pub fn misses(&self) -> u64 {
        self.misses.sum()
    }

    /// Number of cached blocks.
    pub fn len(&self) -> usize {
        self.inner.as_ref().map_or(0, |c| c.len())
    }

    /// True when no block is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The block at `offset` of table `cache_id`, counting a hit or a miss.
    pub fn get(&self, cache_id: u64, offset: u64) -> Option<Arc<Block>> {
        let found = self.inner.as_ref().and_then(|c| c.get(&(cache_id, offset)));
        let counter = if found.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counter.add_one();
        found
    }

    /// Caches `block` as the block at `offset` of table `cache_id`, possibly evicting others.
    pub fn insert(&self, cache_id: u64, offset: u64, block: Arc<Block>) {
        if let Some(c) = &self.inner {
            c.insert((cache_id, offset), block);
        }
    }

    /// Drops every cached block of table `cache_id` (after the table file is deleted). Walks the
    /// whole cache, so it is meant for rare events.
    pub fn evict_table(&self, cache_id: u64) {
        if let Some(c) = &self.inner {
            c.retain(|&(id, _), _| id != cache_id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sstable::block::BlockBuilder;

    fn block(size: usize) -> Arc<Block> {
        let mut b = BlockBuilder::new(16);
        b.add(b"k", &vec![7u8; size]);
        Arc::new(Block::new(b.finish()).expect("block"))
    }

    #[test]
    fn striped_counts_from_many_threads_add_up() {
        let counter = Arc::new(StripedCounter::default());
        let threads: Vec<_> = (0..20)
            .map(|_| {
                let counter = counter.clone();
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        counter.add_one();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("thread");
        }
        assert_eq!(counter.sum(), 20_000);
    }

    #[test]
    fn hits_misses_and_sharing() {
        let cache = BlockCache::new(1 << 20);
        assert!(cache.get(1, 0).is_none());
        let b = block(100);
        cache.insert(1, 0, b.clone());
        let got = cache.get(1, 0).expect("hit");
        assert!(Arc::ptr_eq(&got, &b));
        assert!(cache.get(2, 0).is_none(), "other table, same offset");
        assert!(cache.get(1, 1).is_none());
        assert_eq!((cache.hits(), cache.misses()), (1, 3));
        assert_eq!(cache.usage(), b.data().len());
        assert_eq!(cache.len(), 1);
        cache.evict_table(1);
        assert!(cache.is_empty());
        assert_eq!(cache.usage(), 0);
    }

    #[test]
    fn stays_within_byte_bound() {
        let capacity = 64 * 1024;
        let cache = BlockCache::new(capacity);
        assert_eq!(cache.capacity(), capacity);
        let b = block(1000);
        for i in 0..1000 {
            cache.insert(7, i * 2000, b.clone());
            assert!(cache.usage() <= capacity, "usage {}", cache.usage());
        }
        assert!(cache.usage() > capacity / 2, "usage {}", cache.usage());
        // A block bigger than the whole cache is not kept.
        cache.insert(8, 0, block(capacity * 2));
        assert!(cache.usage() <= capacity);
    }

    #[test]
    fn zero_capacity_caches_nothing() {
        let cache = BlockCache::new(0);
        cache.insert(1, 0, block(10));
        assert!(cache.get(1, 0).is_none());
        assert_eq!((cache.usage(), cache.misses()), (0, 1));
    }
}
