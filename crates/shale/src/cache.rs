//! The block cache: uncompressed table blocks shared between readers, bounded by the memory
//! they hold in bytes (each block's buffer, the block and its entry).
//!
//! Keys are `(cache_id, block offset)`: each open table gets a `cache_id` unique within the
//! cache (the DB uses the file number), so blocks of different tables never collide. Values are
//! `Arc<Block>`; a block evicted while an iterator still reads it stays alive until the
//! iterator lets go.
//!
//! Invariant: [`BlockCache::usage`] never exceeds [`BlockCache::capacity`]; a block larger than
//! a cache shard is simply not cached.
//!
//! Admission: until the cache has filled once, every block read is admitted. After that a
//! block is admitted only on its second miss within a window (a "doorkeeper" bitset of recent
//! misses, as in TinyLFU). When the blocks read are far more than the cache holds (random reads
//! over a large database), most of them would be evicted before anyone asked again, and
//! admitting each one costs an insert, an eviction and a shard's write lock that concurrent
//! readers then queue on; a block read again soon still gets in on its second read. Scans read
//! each block once, so they no longer flush a warm cache either.
//!
//! Lending: the database may borrow room in the cache for memory it keeps only while writes
//! are under way (spare memtable chunks, see `memtable::ChunkPool`), and repays it when the
//! spares are used or let go after writes pause; the cache does not call a loan back. Room is
//! lent only out of what the cached blocks leave free, and while some is lent, a block is cached
//! only if it fits beside the loan. The blocks and the loans together stay within the
//! capacity, give or take a block per reader inserting at the same moment (the check and the
//! insert are not one step). While a block has been turned away for the loan, misses are
//! admitted as after the cache has filled (on their second miss), so that they do not each
//! read every shard's weight; repaying ends that.
//!
//! Thread-safety: `Send + Sync`; lookups and inserts lock one shard (quick_cache's sharded
//! CLOCK-Pro cache), so readers on different blocks rarely contend. An insert that would wait
//! for a shard's lock is skipped instead: the block is already in the reader's hands.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
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
    /// Adds one to this thread's stripe and returns the stripe's new count.
    fn add_one(&self) -> u64 {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        thread_local! {
            static STRIPE: usize = NEXT.fetch_add(1, Ordering::Relaxed) % STRIPES;
        }
        let i = STRIPE.try_with(|i| *i).unwrap_or(0);
        self.stripes[i].0.fetch_add(1, Ordering::Relaxed) + 1
    }

    fn sum(&self) -> u64 {
        self.stripes
            .iter()
            .map(|s| s.0.load(Ordering::Relaxed))
            .sum()
    }
}

/// Capacity bytes per doorkeeper bit: 32 bits per 2 KiB block the cache holds.
const CAPACITY_BYTES_PER_DOORKEEPER_BIT: usize = 64;
/// Fewest doorkeeper bits, so a small cache still remembers a useful window of misses.
const MIN_DOORKEEPER_BITS: usize = 16384;
/// The doorkeeper's window ends once `bits / DOORKEEPER_FILL_DIVISOR` bits are set: a miss
/// then finds its bit set by another key (a false "seen") at most that often, one time in 16.
///
/// Why: cleared at a quarter full, the bitset admitted a third of the blocks of uniform random
/// reads over a database 15 times the cache (callgrind: 59,744 admissions in 166,608 misses),
/// most of them on another block's bit; each costs an insert, an eviction and their
/// allocation. The window, in misses, is what it was: about twice the blocks the cache holds.
const DOORKEEPER_FILL_DIVISOR: u64 = 16;
/// Inserts a thread makes between checks of whether the cache has filled (the check reads every
/// shard's weight).
const FILL_CHECK_INTERVAL: u64 = 16;
/// Bits a thread sets between checks of whether the doorkeeper's window is over.
const WINDOW_CHECK_INTERVAL: u64 = 64;

/// Remembers which blocks missed recently: one bit per hashed key, all cleared when a
/// sixteenth of the bits have been set ([`DOORKEEPER_FILL_DIVISOR`]), so what "recently"
/// covers is a window of about `bits / 16` misses and a block that did not miss in it looks
/// seen at most one time in 16.
struct Doorkeeper {
    words: Box<[AtomicU64]>,
    /// Bits set in the current window, per thread stripe.
    set: StripedCounter,
    /// `set`'s total when the current window began.
    window_start: AtomicU64,
}

impl Doorkeeper {
    fn new(capacity_bytes: usize) -> Doorkeeper {
        let bits = (capacity_bytes / CAPACITY_BYTES_PER_DOORKEEPER_BIT).max(MIN_DOORKEEPER_BITS);
        Doorkeeper {
            words: (0..bits.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
            set: StripedCounter::default(),
            window_start: AtomicU64::new(0),
        }
    }

    /// Records a miss of `key` and says whether it had missed already in this window.
    fn seen_before(&self, key: (u64, u64)) -> bool {
        // A multiplicative mix of both halves; only the bit choice depends on it.
        let hash =
            (key.0.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ key.1).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        let bit = (hash >> 32) % (self.words.len() as u64 * 64);
        let (word, mask) = ((bit / 64) as usize, 1u64 << (bit % 64));
        let Some(word) = self.words.get(word) else {
            return true;
        };
        // Read before writing: a set bit needs no store, so readers do not bounce its line.
        if word.load(Ordering::Relaxed) & mask != 0 {
            return true;
        }
        word.fetch_or(mask, Ordering::Relaxed);
        if self.set.add_one() % WINDOW_CHECK_INTERVAL == 0 {
            let total = self.set.sum();
            let start = self.window_start.load(Ordering::Relaxed);
            let window = (self.words.len() as u64 * 64) / DOORKEEPER_FILL_DIVISOR;
            if total.saturating_sub(start) >= window
                && self
                    .window_start
                    .compare_exchange(start, total, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
            {
                // Racing setters may lose a bit or two: that only delays an admission.
                for w in self.words.iter() {
                    w.store(0, Ordering::Relaxed);
                }
            }
        }
        false
    }
}

/// Bytes a cached entry costs beyond its block's own memory: the `Arc`'s counts, the cache's
/// slot (key, pointer, weight, links and its hash-table entry) and the allocator's headers.
/// An estimate; it only has to be close.
const ENTRY_OVERHEAD_BYTES: usize = 96;

/// Weighs a cached block by the memory it holds: its buffer's capacity (a recycled buffer may be
/// up to twice the block), the block itself, and the cache entry's overhead, so the configured
/// capacity bounds the memory the cache really takes, not only its blocks' bytes.
#[derive(Debug, Clone, Copy)]
struct BlockWeighter;

impl quick_cache::Weighter<(u64, u64), Arc<Block>> for BlockWeighter {
    fn weight(&self, _key: &(u64, u64), block: &Arc<Block>) -> u64 {
        (block.memory_bytes() + ENTRY_OVERHEAD_BYTES) as u64
    }
}

/// A byte-bounded, concurrent cache of uncompressed blocks.
pub struct BlockCache {
    /// `None` when the capacity is zero: nothing is cached.
    inner: Option<quick_cache::sync::Cache<(u64, u64), Arc<Block>, BlockWeighter>>,
    capacity: usize,
    hits: StripedCounter,
    misses: StripedCounter,
    /// Set once the cache has been (nearly) full: from then on blocks need the doorkeeper.
    filled: AtomicBool,
    /// Inserts while not yet `filled`, per thread stripe, to space out the fill checks.
    inserts_while_filling: StripedCounter,
    doorkeeper: Doorkeeper,
    /// Bytes of the capacity lent out ([`BlockCache::try_lend`]).
    lent: AtomicUsize,
    /// Set when a block was turned away for the loan; cleared by a repayment. While set,
    /// admission is as selective as once `filled`.
    squeezed: AtomicBool,
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
            filled: AtomicBool::new(false),
            inserts_while_filling: StripedCounter::default(),
            doorkeeper: Doorkeeper::new(capacity_bytes),
            lent: AtomicUsize::new(0),
            squeezed: AtomicBool::new(false),
        }
    }

    /// Memory the cached blocks currently hold, as the cache weighs them (see `BlockWeighter`).
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

    /// Caches `block` as the block at `offset` of table `cache_id`, possibly evicting others,
    /// unless admission turns it away (see the module header). Returns whether it was cached.
    pub fn insert(&self, cache_id: u64, offset: u64, block: Arc<Block>) -> bool {
        self.admits(cache_id, offset) && self.insert_admitted(cache_id, offset, block)
    }

    /// The admission decision of [`BlockCache::insert`] alone, recording the miss: whether a
    /// block just read for `offset` of table `cache_id` should be cached. A reader that is
    /// told no can keep the block to itself, unshared.
    pub fn admits(&self, cache_id: u64, offset: u64) -> bool {
        if self.inner.is_none() {
            return false;
        }
        !self.is_admission_selective() || self.doorkeeper.seen_before((cache_id, offset))
    }

    /// Caches `block` after [`BlockCache::admits`] said yes; returns whether it was cached (a
    /// contended shard turns it away).
    pub fn insert_admitted(&self, cache_id: u64, offset: u64, block: Arc<Block>) -> bool {
        let Some(c) = &self.inner else {
            return false;
        };
        let lent = self.lent.load(Ordering::Relaxed);
        if lent > 0 {
            // Room is lent out: cache the block only if it fits beside the loan, so that
            // evicting for it cannot take back what was lent. Without room the cache is as full
            // as the loan lets it be, so admission turns selective until the loan is repaid:
            // later misses rarely come here (and read every shard's weight).
            let weight = quick_cache::Weighter::weight(&BlockWeighter, &(cache_id, offset), &block);
            if c.weight() + weight + lent as u64 > self.capacity as u64 {
                self.squeezed.store(true, Ordering::Relaxed);
                return false;
            }
        }
        let filled = self.filled.load(Ordering::Relaxed);
        if c.try_insert((cache_id, offset), block).is_err() {
            return false;
        }
        if !filled
            && self.inserts_while_filling.add_one() % FILL_CHECK_INTERVAL == 0
            && c.weight() >= (self.capacity as u64 / 8) * 7
        {
            self.filled.store(true, Ordering::Relaxed);
        }
        true
    }

    /// Lends `bytes` of the capacity, if the cached blocks and earlier loans leave that much
    /// free; returns whether it did. Give it back with [`BlockCache::repay`].
    #[cfg_attr(miri, allow(dead_code))]
    pub(crate) fn try_lend(&self, bytes: usize) -> bool {
        let Some(c) = &self.inner else {
            return false;
        };
        let free = self.capacity.saturating_sub(c.weight() as usize);
        self.lent
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |lent| {
                lent.checked_add(bytes).filter(|&after| after <= free)
            })
            .is_ok()
    }

    /// Takes back `bytes` lent by [`BlockCache::try_lend`].
    pub(crate) fn repay(&self, bytes: usize) {
        let _ = self
            .lent
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |lent| {
                Some(lent.saturating_sub(bytes))
            });
        self.squeezed.store(false, Ordering::Relaxed);
    }

    /// Bytes of the capacity lent out now.
    pub fn lent(&self) -> usize {
        self.lent.load(Ordering::Relaxed)
    }

    /// Whether admission turns blocks away on their first miss: the cache has been full, or a
    /// block did not fit beside room lent out (until that is repaid).
    pub fn is_admission_selective(&self) -> bool {
        self.filled.load(Ordering::Relaxed) || self.squeezed.load(Ordering::Relaxed)
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
        // A block weighs what it holds, not only its bytes.
        assert_eq!(cache.usage(), b.memory_bytes() + ENTRY_OVERHEAD_BYTES);
        assert!(cache.usage() > b.data().len());
        assert_eq!(cache.len(), 1);
        cache.evict_table(1);
        assert!(cache.is_empty());
        assert_eq!(cache.usage(), 0);
    }

    #[test]
    fn lent_room_is_kept_free_of_blocks_until_it_is_repaid() {
        let capacity = 64 * 1024;
        let cache = BlockCache::new(capacity);
        let b = block(1000);
        let weight = b.memory_bytes() + ENTRY_OVERHEAD_BYTES;
        // Room is lent only out of what the blocks leave free.
        assert!(cache.try_lend(capacity / 2));
        assert!(!cache.try_lend(capacity / 2 + 1));
        assert!(cache.try_lend(capacity / 4));
        assert_eq!(cache.lent(), capacity / 4 * 3);
        // Blocks fill only what is not lent, and do not evict each other for more.
        let mut cached = 0;
        for i in 0..100 {
            cached += usize::from(cache.insert(3, i * 2000, b.clone()));
            assert!(
                cache.usage() + cache.lent() <= capacity,
                "usage {}",
                cache.usage()
            );
        }
        assert!(
            cached >= 1 && cached <= capacity / 4 / weight,
            "{cached} cached"
        );
        assert!(cache.usage() <= capacity / 4, "usage {}", cache.usage());
        // The blocks leave less to lend.
        assert!(!cache.try_lend(capacity / 4 - cache.usage() + 1));
        // While a block is turned away for the loan, a block is cached on its second miss.
        assert!(cache.is_admission_selective());
        let mut first_misses_admitted = 0;
        for i in 100..200 {
            first_misses_admitted += usize::from(cache.insert(3, i * 2000, b.clone()));
        }
        // (The doorkeeper takes a new block for a seen one about one time in 16.)
        assert!(first_misses_admitted < 30, "{first_misses_admitted} of 100");
        // Repaid, the room is the blocks' again, and a cache that never filled takes every
        // block again.
        cache.repay(capacity / 4 * 3);
        assert_eq!(cache.lent(), 0);
        assert!(!cache.is_admission_selective());
        for i in 200..220 {
            assert!(
                cache.insert(3, i * 2000, b.clone()),
                "block {i} turned away"
            );
        }
        for i in 220..300 {
            cache.insert(3, i * 2000, b.clone());
            cache.insert(3, i * 2000, b.clone());
        }
        assert!(cache.usage() > capacity / 2, "usage {}", cache.usage());
        assert!(!cache.try_lend(capacity), "nothing free to lend");
        // Repaying more than was lent leaves nothing lent, not an underflow.
        cache.repay(1);
        assert_eq!(cache.lent(), 0);
        // A cache of no capacity lends nothing.
        assert!(!BlockCache::new(0).try_lend(1));
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

    /// Fills `cache` until admission turns selective; returns the next free offset.
    fn fill(cache: &BlockCache, table: u64) -> u64 {
        let b = block(1000);
        let mut offset = 0;
        while !cache.is_admission_selective() {
            assert!(offset < 1_000_000, "the cache never counted as filled");
            cache.insert(table, offset, b.clone());
            offset += 2000;
        }
        offset
    }

    #[test]
    fn admits_everything_until_filled_then_only_second_misses() {
        let cache = BlockCache::new(64 * 1024);
        let b = block(1000);
        assert!(cache.insert(1, 0, b.clone()), "an empty cache admits");
        let next = fill(&cache, 1);
        assert!(cache.usage() >= 56 * 1024, "usage {}", cache.usage());
        // A block missed for the first time is turned away, and admitted on its next miss.
        assert!(!cache.insert(2, next, b.clone()));
        assert!(cache.get(2, next).is_none());
        assert!(cache.insert(2, next, b.clone()));
        assert!(cache.get(2, next).is_some());
        assert!(cache.usage() <= cache.capacity());
    }

    #[test]
    fn the_doorkeeper_forgets_old_misses() {
        let keeper = Doorkeeper::new(0);
        let bits = keeper.words.len() as u64 * 64;
        assert_eq!(bits, MIN_DOORKEEPER_BITS as u64);
        assert!(!keeper.seen_before((1, 0)));
        assert!(keeper.seen_before((1, 0)));
        // A window of other misses later, the first one is forgotten.
        let mut fresh = 0u64;
        let mut offset = 0;
        while fresh < bits / DOORKEEPER_FILL_DIVISOR + WINDOW_CHECK_INTERVAL {
            offset += 4096;
            if !keeper.seen_before((2, offset)) {
                fresh += 1;
            }
        }
        let set: u32 = keeper
            .words
            .iter()
            .map(|w| w.load(Ordering::Relaxed).count_ones())
            .sum();
        assert!(
            u64::from(set) < bits / DOORKEEPER_FILL_DIVISOR,
            "{set} bits still set"
        );
        assert!(!keeper.seen_before((1, 0)), "the old miss was remembered");
    }

    /// Blocks that did not miss in the window rarely look seen: at most about one in 16 at
    /// the end of a window, fewer on average over it.
    #[test]
    fn the_doorkeeper_rarely_takes_a_new_block_for_a_seen_one() {
        let keeper = Doorkeeper::new(4 << 20);
        let window = keeper.words.len() as u64 * 64 / DOORKEEPER_FILL_DIVISOR;
        let (mut looked_seen, mut asked) = (0u64, 0u64);
        // Distinct blocks only, over several windows: every "seen" is a false one.
        for i in 0..4 * window {
            asked += 1;
            if keeper.seen_before((i % 7, i * 4096)) {
                looked_seen += 1;
            }
        }
        assert!(
            looked_seen * 20 < asked,
            "{looked_seen} of {asked} new blocks looked seen"
        );
    }

    #[test]
    fn zero_capacity_caches_nothing() {
        let cache = BlockCache::new(0);
        assert!(!cache.insert(1, 0, block(10)));
        assert!(cache.get(1, 0).is_none());
        assert_eq!((cache.usage(), cache.misses()), (0, 1));
    }
}
