//! The memtable: recent writes held in memory, ordered by internal key, until they are flushed
//! to a table.
//!
//! Every entry is an internal key (`user key | fixed64 LE (sequence << 8 | kind)`, see
//! [`crate::key`]) with its value, stored in a concurrent skiplist whose nodes live in an arena
//! of large chunks (`skiplist.rs`, `arena.rs`). Entries are never removed or changed; the whole
//! memtable is dropped once it has been flushed and its last reader is gone.
//!
//! Invariants: iteration yields entries in ascending [`InternalKeyComparator`] order, so for one
//! user key the newest sequence number comes first. Internal keys are expected to be unique (the
//! write path gives every record its own sequence number); an equal key is kept, before the
//! existing one.
//!
//! Thread-safety: `MemTable` is `Send + Sync`. Callers serialise [`MemTable::add`] (the DB's
//! write path has one writer at a time; concurrent adds would still be sound, as they serialise
//! on an internal mutex). Lookups and iterators take no lock and may run on any number of threads
//! while an add is in progress: an entry becomes visible to them only once it is fully written.
//!
//! Format: in memory only; its contents reach disk through the WAL (`docs/format/wal.md`) and
//! flushed tables (`docs/format/sstable.md`).

mod arena;
mod skiplist;

pub(crate) use arena::{ChunkPool, SPARES_IDLE_AFTER};

use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::bigbuf::ZeroedWords;
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{pack_trailer, InternalKeyComparator, SequenceNumber, ValueKind};

use skiplist::{SkipList, SkipListIter};

/// What [`MemTable::get`] calls for each entry: `visit(internal_key, value)` returns whether to
/// go on to the next entry.
pub type EntryVisitor<'a> = dyn FnMut(&[u8], &[u8]) -> Result<bool> + 'a;

/// Recent writes, in memory, ordered by internal key. See the module header.
pub struct MemTable {
    list: Arc<SkipList>,
    filter: Option<KeyFilter>,
}

/// A bloom filter over the user keys added, so that a point lookup of a key the memtable does
/// not hold skips the skiplist search. Blocked: all probes of a key fall in one 64-bit word, so
/// a check costs one cache miss. Bits are set before the entry is inserted, and readers only
/// look up entries published after their insert, so a reader never misses a visible entry.
struct KeyFilter {
    /// An anonymous map of its own when large (320 KiB for an 8 MiB write buffer): see
    /// [`crate::bigbuf`] for why not the heap.
    words: ZeroedWords,
}

/// Bits a key sets in its word.
const KEY_FILTER_PROBES: u32 = 4;

impl KeyFilter {
    fn new(expected_keys: usize) -> KeyFilter {
        // About 10 bits a key.
        // At most 2^32 - 1 words, which `locate`'s multiply-shift needs.
        let words = (expected_keys.saturating_mul(10) / 64).clamp(64, u32::MAX as usize);
        KeyFilter {
            words: ZeroedWords::new(words),
        }
    }

    fn locate(&self, user_key: &[u8]) -> (usize, u64) {
        let hash = crate::sstable::filter::filter_hash(user_key);
        // The low half scaled to the length (a multiply and a shift, exact in 64 bits for a
        // length below 2^32) rather than reduced modulo it: a 64-bit division is tens of
        // cycles, on every insert and lookup.
        let word = (((hash & 0xffff_ffff) * self.words.len() as u64) >> 32) as usize;
        let mut mask = 0u64;
        let mut bits = hash >> 32;
        for _ in 0..KEY_FILTER_PROBES {
            mask |= 1 << (bits & 63);
            bits >>= 6;
        }
        (word, mask)
    }

    /// Sets the bits of a key at `(word, mask)` (from [`KeyFilter::locate`]). Only one thread
    /// at a time may add (the caller holds the skiplist's writer lock), so a plain load and
    /// store do: a locked `fetch_or` would stall the writer on the cache miss of a random word
    /// (a sixth of a sequential load's writer time).
    fn set(&self, (word, mask): (usize, u64)) {
        let slot = &self.words[word];
        let bits = slot.load(Ordering::Relaxed);
        if bits & mask != mask {
            slot.store(bits | mask, Ordering::Relaxed);
        }
    }

    fn may_contain(&self, user_key: &[u8]) -> bool {
        let (word, mask) = self.locate(user_key);
        self.words[word].load(Ordering::Relaxed) & mask == mask
    }
}

impl MemTable {
    /// An empty memtable ordered by `icmp`.
    pub fn new(icmp: InternalKeyComparator) -> MemTable {
        MemTable {
            list: Arc::new(SkipList::new(icmp)),
            filter: None,
        }
    }

    /// An empty memtable with a bloom filter over its user keys, sized for `expected_keys`.
    /// Requires a comparator under which only byte-equal keys are equal.
    pub fn with_key_filter(icmp: InternalKeyComparator, expected_keys: usize) -> MemTable {
        MemTable::with_filter_and_pool(icmp, Some(expected_keys), None)
    }

    /// An empty memtable, with a key filter sized for `expected_keys` if given, whose memory
    /// comes from `pool` first and goes back to it when the memtable is dropped.
    pub(crate) fn with_filter_and_pool(
        icmp: InternalKeyComparator,
        expected_keys: Option<usize>,
        pool: Option<Arc<ChunkPool>>,
    ) -> MemTable {
        MemTable {
            list: Arc::new(SkipList::with_pool(icmp, pool)),
            filter: expected_keys.map(KeyFilter::new),
        }
    }

    /// False only if no entry for `user_key` was ever added (always true without a filter).
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        self.filter.as_ref().is_none_or(|f| f.may_contain(user_key))
    }

    /// Adds the entry `(user_key, seq, kind) -> value`.
    ///
    /// REQUIRES: callers serialise `add` calls (one writer at a time); any number of concurrent
    /// readers and iterators may run during `add` without locks. `seq <= MAX_SEQUENCE`, and the
    /// key is under 4 GiB (the DB refuses keys over [`crate::limits::MAX_KEY_BYTES`] long before).
    pub fn add(&self, seq: SequenceNumber, kind: ValueKind, user_key: &[u8], value: &[u8]) {
        self.inserter().add(seq, kind, user_key, value);
    }

    /// Starts loading the word of the key filter that an add of `user_key` will set, so that its
    /// cache miss overlaps whatever the caller does before the add (the WAL append). Returns
    /// where the key's bits go (`None` without a filter), for
    /// [`MemTable::inserter_announced`], so the add need not hash the key again.
    pub(crate) fn prefetch_filter(&self, user_key: &[u8]) -> Option<FilterSlot> {
        let f = self.filter.as_ref()?;
        let slot = f.locate(user_key);
        crate::prefetch::line(f.words[slot.0].as_ptr());
        Some(FilterSlot(slot))
    }

    /// Takes the memtable's writer lock for a run of adds (a write batch), so that each add
    /// does not pay for it again. Other adds wait until the inserter is dropped; readers and
    /// iterators do not.
    pub fn inserter(&self) -> MemTableInserter<'_> {
        self.inserter_announced(None)
    }

    /// [`MemTable::inserter`] whose first add is of the key `first` was prefetched for
    /// ([`MemTable::prefetch_filter`]).
    pub(crate) fn inserter_announced(&self, first: Option<FilterSlot>) -> MemTableInserter<'_> {
        MemTableInserter {
            list: self.list.inserter(),
            filter: self.filter.as_ref(),
            next_filter_slot: first.map(|FilterSlot(slot)| slot),
        }
    }

    /// Positions at the first entry `>= ikey` (an internal key) and calls
    /// `visit(internal_key, value)` for it and each following entry until `visit` returns
    /// `Ok(false)` or the table ends. Errors from `visit` are returned unchanged.
    ///
    /// A point lookup passes [`crate::key::LookupKey::internal_key`], so the first entry visited
    /// is the newest version of the key visible at the lookup's sequence number, if any.
    pub fn get(&self, ikey: &[u8], visit: &mut EntryVisitor<'_>) -> Result<()> {
        self.list.visit_from(ikey, visit)
    }

    /// A cursor over every entry; it keeps the entries alive even if the memtable is dropped.
    pub fn iter(self: &Arc<Self>) -> MemTableIterator {
        MemTableIterator {
            inner: SkipListIter::new(self.list.clone()),
        }
    }

    /// Bytes the entries occupy in the arena, node overhead and padding included. The unused
    /// tail of the current arena chunk is not counted, so the figure grows with each add and
    /// stays meaningful for small write buffers.
    pub fn approximate_memory_usage(&self) -> usize {
        self.list.memory_usage() + self.filter.as_ref().map_or(0, |f| f.words.len() * 8)
    }

    /// Number of entries added.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// True when nothing has been added.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The comparator the entries are ordered by.
    pub fn comparator(&self) -> &InternalKeyComparator {
        self.list.comparator()
    }
}

/// Where a key's bits go in a memtable's key filter, found by [`MemTable::prefetch_filter`].
pub(crate) struct FilterSlot((usize, u64));

/// Adds entries to a [`MemTable`] while holding its writer lock; see [`MemTable::inserter`].
pub struct MemTableInserter<'a> {
    list: skiplist::Inserter<'a>,
    filter: Option<&'a KeyFilter>,
    /// Where the filter bits of the next key go, announced by [`MemTableInserter::add_before`]
    /// or [`MemTable::inserter_announced`].
    next_filter_slot: Option<(usize, u64)>,
}

impl MemTableInserter<'_> {
    /// Adds the entry `(user_key, seq, kind) -> value`, with the requirements of
    /// [`MemTable::add`].
    pub fn add(&mut self, seq: SequenceNumber, kind: ValueKind, user_key: &[u8], value: &[u8]) {
        self.add_before(seq, kind, user_key, value, None);
    }

    /// [`MemTableInserter::add`], told the user key of the next add (which must follow with
    /// that key): the next key's filter word starts loading before this entry's skiplist
    /// insert, so that its cache miss overlaps the insert instead of stalling the next add.
    pub(crate) fn add_before(
        &mut self,
        seq: SequenceNumber,
        kind: ValueKind,
        user_key: &[u8],
        value: &[u8],
        next_user_key: Option<&[u8]>,
    ) {
        // The filter's bits go in first: a reader that finds the entry must pass the filter.
        if let Some(f) = self.filter {
            let slot = match self.next_filter_slot.take() {
                Some(slot) => {
                    debug_assert_eq!(slot, f.locate(user_key), "add_before named another key");
                    slot
                }
                None => f.locate(user_key),
            };
            f.set(slot);
            if let Some(next) = next_user_key {
                let slot = f.locate(next);
                crate::prefetch::line(f.words[slot.0].as_ptr());
                self.next_filter_slot = Some(slot);
            }
        }
        self.list.insert(user_key, pack_trailer(seq, kind), value);
    }
}

impl fmt::Debug for MemTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemTable")
            .field("len", &self.len())
            .field("memory_bytes", &self.approximate_memory_usage())
            .finish()
    }
}

/// A bidirectional cursor over a [`MemTable`]; see [`InternalIterator`] for the contract.
///
/// `next` is O(1). Nodes have no backward links, so `seek_to_last` searches from the top of the
/// skiplist, O(log n), and `prev` does too, but collects about 16 predecessors per search, which
/// the next backward steps take in O(1). Entries added after the cursor was made may or may not
/// be seen, but everything it does see is in order and complete.
pub struct MemTableIterator {
    inner: SkipListIter,
}

impl InternalIterator for MemTableIterator {
    fn valid(&self) -> bool {
        self.inner.valid()
    }

    fn seek_to_first(&mut self) {
        self.inner.seek_to_first();
    }

    fn seek_to_last(&mut self) {
        self.inner.seek_to_last();
    }

    fn seek(&mut self, target: &[u8]) {
        self.inner.seek(target);
    }

    fn seek_for_prev(&mut self, target: &[u8]) {
        self.inner.seek_for_prev(target);
    }

    fn next(&mut self) {
        debug_assert!(self.valid(), "next() on an invalid memtable iterator");
        self.inner.next();
    }

    fn prev(&mut self) {
        debug_assert!(self.valid(), "prev() on an invalid memtable iterator");
        self.inner.prev();
    }

    fn key(&self) -> &[u8] {
        debug_assert!(self.valid(), "key() on an invalid memtable iterator");
        self.inner.key()
    }

    fn value(&self) -> &[u8] {
        debug_assert!(self.valid(), "value() on an invalid memtable iterator");
        self.inner.value()
    }

    /// Always `Ok`: memory holds no damaged data.
    fn status(&self) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod filter_tests {
    use super::*;
    use crate::key::BytewiseComparator;

    #[test]
    fn key_filter_has_no_false_negatives_and_few_false_positives() {
        let icmp = InternalKeyComparator::new(Arc::new(BytewiseComparator));
        let mem = MemTable::with_key_filter(icmp, 10_000);
        for i in 0..10_000u32 {
            mem.add(
                u64::from(i) + 1,
                ValueKind::Value,
                format!("key{i}").as_bytes(),
                b"v",
            );
        }
        for i in 0..10_000u32 {
            assert!(
                mem.may_contain(format!("key{i}").as_bytes()),
                "false negative for key{i}"
            );
        }
        let false_positives = (0..10_000u32)
            .filter(|i| mem.may_contain(format!("other{i}").as_bytes()))
            .count();
        assert!(
            false_positives < 500,
            "{false_positives} false positives in 10000"
        );
        let unfiltered = MemTable::new(InternalKeyComparator::new(Arc::new(BytewiseComparator)));
        assert!(unfiltered.may_contain(b"anything"));
    }

    /// A prefetch is only a hint: it sets no filter bit and adds nothing, with or without a
    /// filter.
    #[test]
    fn prefetch_filter_changes_nothing() {
        let icmp = InternalKeyComparator::new(Arc::new(BytewiseComparator));
        let filtered = MemTable::with_key_filter(icmp.clone(), 1_000);
        let unfiltered = MemTable::new(icmp);
        for i in 0..1_000u32 {
            let key = format!("key{i}");
            assert!(filtered.prefetch_filter(key.as_bytes()).is_some());
            assert!(unfiltered.prefetch_filter(key.as_bytes()).is_none());
        }
        assert!((0..1_000u32).all(|i| !filtered.may_contain(format!("key{i}").as_bytes())));
        assert!(filtered.is_empty() && unfiltered.is_empty());
    }

    /// Adds through inserters, each key announced by the add before it (as a write batch does),
    /// set every key's filter bits and insert every entry, in a run or one at a time, and an add
    /// after the run that announced nothing locates its own key.
    #[test]
    fn inserter_adds_announced_keys_to_filter_and_list() {
        let icmp = InternalKeyComparator::new(Arc::new(BytewiseComparator));
        let mem = MemTable::with_key_filter(icmp, 1_000);
        let keys: Vec<Vec<u8>> = (0..2_000u32)
            .map(|i| format!("key{:05}", (i * 7919) % 2_000).into_bytes())
            .collect();
        for (run, chunk) in keys.chunks(300).enumerate() {
            let mut inserter = mem.inserter();
            for (i, key) in chunk.iter().enumerate() {
                // The last run announces nothing: each add locates its own key.
                let next = if run == 6 { None } else { chunk.get(i + 1) };
                let seq = (run * 300 + i) as u64 + 1;
                inserter.add_before(seq, ValueKind::Value, key, key, next.map(Vec::as_slice));
            }
        }
        mem.add(5_000, ValueKind::Deletion, b"key00003", b"");
        assert_eq!(mem.len(), keys.len() + 1);
        for key in &keys {
            assert!(mem.may_contain(key), "false negative for {key:?}");
            let mut found = None;
            let lookup = crate::key::LookupKey::new(key, crate::key::MAX_SEQUENCE);
            mem.get(lookup.internal_key(), &mut |ikey, value| {
                if crate::key::user_key(ikey) == key.as_slice() {
                    found = Some((crate::key::trailer(ikey) & 0xff, value.to_vec()));
                }
                Ok(false)
            })
            .expect("get");
            let (kind, value) = found.expect("entry present");
            if key.as_slice() == b"key00003" {
                assert_eq!(kind, ValueKind::Deletion as u64);
            } else {
                assert_eq!((kind, value), (ValueKind::Value as u64, key.clone()));
            }
        }
        let mut it = Arc::new(mem).iter();
        it.seek_to_first();
        let mut seen = 0;
        while it.valid() {
            seen += 1;
            it.next();
        }
        assert_eq!(seen, keys.len() + 1);
    }
}
