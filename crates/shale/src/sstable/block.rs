//! Blocks: sorted key/value entries with prefix-compressed keys and restart points, the unit a
//! table reads, checksums, compresses and caches.
//!
//! ```text
//! block   := entry* restart: fixed32 LE * num_restarts | num_restarts: fixed32 LE
//! entry   := shared: varint32 | non_shared: varint32 | value_len: varint32
//!            | key_delta: non_shared bytes | value: value_len bytes
//! ```
//! An entry's key is the first `shared` bytes of the previous entry's key followed by
//! `key_delta`. Every `restart_interval` entries the builder starts a restart point: an entry
//! with `shared == 0` whose offset is listed in the restart array, so a reader can binary-search
//! the restarts and decode forward from one without reading earlier entries. A block always has
//! at least one restart (at offset 0), even when it holds no entries.
//!
//! Invariants checked by [`Block::new`]: the restart array fits, the first restart is 0, and
//! restart offsets increase strictly and lie inside the entry area. Entries are bounds-checked as
//! they are decoded; a malformed entry makes the iterator invalid and records where it failed
//! ([`BlockIter::corruption`]), never a panic.
//!
//! Thread-safety: a [`Block`] is immutable and shared as `Arc<Block>` (the block cache holds
//! those); a [`BlockIter`] belongs to one thread at a time.
//!
//! Format doc: `docs/format/sstable.md` ("Blocks").

use std::cmp::Ordering;
use std::ops::Deref;
use std::sync::Arc;

use crate::codec::{decode_fixed32, put_fixed32, put_varint32, Decoder};
use crate::key::{common_prefix_len, padded_be_word, user_key, InternalKeyComparator, TRAILER_LEN};

/// Accumulates sorted entries into the bytes of one block.
#[derive(Debug)]
pub struct BlockBuilder {
    buf: Vec<u8>,
    restarts: Vec<u32>,
    restart_interval: usize,
    /// Entries since the last restart point.
    counter: usize,
    last_key: Vec<u8>,
    entries: usize,
}

impl BlockBuilder {
    /// A builder that starts a restart point every `restart_interval` entries (at least 1).
    pub fn new(restart_interval: usize) -> Self {
        BlockBuilder {
            buf: Vec::new(),
            restarts: vec![0],
            restart_interval: restart_interval.max(1),
            counter: 0,
            last_key: Vec::new(),
            entries: 0,
        }
    }

    /// Appends an entry. REQUIRES: `key` sorts after every key added since the last reset (the
    /// caller owns the order, since blocks do not know their comparator), and the key and value
    /// are each under 4 GiB.
    pub fn add(&mut self, key: &[u8], value: &[u8]) {
        let shared = if self.counter < self.restart_interval {
            common_prefix_len(&self.last_key, key)
        } else {
            self.restarts.push(self.buf.len() as u32);
            self.counter = 0;
            0
        };
        let non_shared = &key[shared..];
        put_varint32(&mut self.buf, shared as u32);
        put_varint32(&mut self.buf, non_shared.len() as u32);
        put_varint32(&mut self.buf, value.len() as u32);
        self.buf.extend_from_slice(non_shared);
        self.buf.extend_from_slice(value);
        self.last_key.truncate(shared);
        self.last_key.extend_from_slice(non_shared);
        self.counter += 1;
        self.entries += 1;
    }

    /// Appends the restart array and returns the finished block bytes; the builder is reset.
    pub fn finish(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        self.finish_into(&mut out);
        out
    }

    /// Like [`BlockBuilder::finish`], but swaps the finished block into `out` and keeps
    /// `out`'s old allocation for the next block. A table builder that reuses one `out`
    /// allocates nothing per block; growing a fresh buffer from empty took about ten
    /// reallocations a block.
    pub fn finish_into(&mut self, out: &mut Vec<u8>) {
        for &r in &self.restarts {
            put_fixed32(&mut self.buf, r);
        }
        put_fixed32(&mut self.buf, self.restarts.len() as u32);
        std::mem::swap(&mut self.buf, out);
        self.reset();
    }

    /// Forgets every entry.
    pub fn reset(&mut self) {
        self.buf.clear();
        self.restarts.clear();
        self.restarts.push(0);
        self.counter = 0;
        self.last_key.clear();
        self.entries = 0;
    }

    /// Size the block would have if finished now.
    pub fn size_estimate(&self) -> usize {
        self.buf.len() + 4 * self.restarts.len() + 4
    }

    /// True when no entry has been added since the last reset.
    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// Number of entries added since the last reset.
    pub fn len(&self) -> usize {
        self.entries
    }

    /// The last key added (empty if none).
    pub fn last_key(&self) -> &[u8] {
        &self.last_key
    }
}

/// An immutable, validated, uncompressed block.
#[derive(Debug)]
pub struct Block {
    data: Vec<u8>,
    /// Offset where the restart array begins (= end of the entries).
    restart_offset: usize,
    num_restarts: usize,
    /// Set on long-lived blocks of bytewise-ordered tables (index blocks): narrows a seek's
    /// binary search before it reads any restart key.
    prefixes: Option<RestartPrefixes>,
}

/// Eight bytes of every restart key's user key, as big-endian integers in one array, taken
/// after a prefix most of them share.
///
/// Why: a binary search over restart keys loads a restart offset and then a key per step,
/// two dependent cache misses in a block far from the CPU cache (a table's index block is read
/// on every point lookup, and there are many tables). The integers of a block fit in a few
/// cache lines whose upper levels stay cached between lookups, so the search narrows to the
/// restarts whose integer equals the target's, usually one, before it reads a key.
///
/// The integer of a user key ([`RestartPrefixes::window`]) is 0 below the shared prefix, the
/// largest integer above it, and otherwise the eight bytes after the prefix, zero-padded. For
/// bytewise user keys that keeps their order except that keys may become equal: a restart whose
/// integer is below the target's is below the target, one whose integer is above is above it,
/// and only equal integers need the keys themselves. The prefix is that of the first and the
/// next-to-last restart: the last index key is often a short successor ("1" after keys that
/// start "00"), which shares nothing with the rest and would leave every integer equal.
#[derive(Debug)]
struct RestartPrefixes {
    /// The user-key prefix the restart keys share (all but perhaps the last).
    common: Vec<u8>,
    /// Per restart, [`RestartPrefixes::window`] of its user key.
    windows: Box<[u64]>,
}

impl RestartPrefixes {
    /// The prefixes of `block`'s restart keys (internal keys), or `None` if one does not
    /// decode (a seek then reports it).
    fn build(block: &Block) -> Option<RestartPrefixes> {
        let keys: Vec<&[u8]> = (0..block.num_restarts)
            .map(|i| block.restart_key(i).ok().map(user_key))
            .collect::<Option<_>>()?;
        let first = keys.first()?;
        let bulk_last = keys.get(keys.len().saturating_sub(2))?;
        let shared = common_prefix_len(first, bulk_last);
        let mut prefixes = RestartPrefixes {
            common: first.get(..shared)?.to_vec(),
            windows: Box::default(),
        };
        prefixes.windows = keys.iter().map(|k| prefixes.window(k)).collect();
        Some(prefixes)
    }

    /// The integer of `user_key`: 0 if it is below every key that starts with `common`,
    /// `u64::MAX` if above, else its eight bytes after `common`, zero-padded, big-endian.
    fn window(&self, user_key: &[u8]) -> u64 {
        let head = user_key.get(..self.common.len()).unwrap_or(user_key);
        match head.cmp(self.common.get(..head.len()).unwrap_or_default()) {
            Ordering::Less => 0,
            Ordering::Greater => u64::MAX,
            // A proper prefix of `common` is below every key that starts with it.
            Ordering::Equal if head.len() < self.common.len() => 0,
            Ordering::Equal => {
                padded_be_word(user_key.get(self.common.len()..).unwrap_or_default())
            }
        }
    }

    /// The restarts `(lo, hi)`, `lo <= hi`, between which the last restart whose key is below
    /// internal key `target` lies (restart 0 when none is).
    fn bounds(&self, target: &[u8]) -> (usize, usize) {
        let window = self.window(user_key(target));
        let below = self.windows.partition_point(|&w| w < window);
        // Usually no restart or one ties with the target: look at those before searching.
        let rest = self.windows.get(below..).unwrap_or_default();
        let tied = match rest {
            [first, ..] if *first != window => 0,
            [_, second, ..] if *second != window => 1,
            _ => rest.partition_point(|&w| w == window),
        };
        (below.saturating_sub(1), (below + tied).saturating_sub(1))
    }
}

/// Where an entry's parts lie in its block ([`BlockIter::decode_entry`]).
struct EntryBounds {
    /// Key bytes shared with the previous key.
    shared: usize,
    /// Start of the key bytes this entry stores (its value starts where they end).
    key_start: usize,
    value_start: usize,
    value_end: usize,
}

impl Drop for Block {
    fn drop(&mut self) {
        // Blocks are usually dropped by a cache eviction on another thread than the one that
        // allocated them; recycling the buffer avoids the allocator's cross-thread free path.
        super::buffers::give(std::mem::take(&mut self.data));
    }
}

impl Block {
    /// Validates the restart array of `data`; the message says what is wrong.
    pub fn new(data: Vec<u8>) -> std::result::Result<Block, &'static str> {
        let n = data
            .len()
            .checked_sub(4)
            .and_then(|at| data.get(at..))
            .and_then(decode_fixed32)
            .ok_or("block shorter than its restart count")? as usize;
        if n == 0 {
            return Err("block has no restart points");
        }
        let restart_offset = n
            .checked_mul(4)
            .and_then(|r| data.len().checked_sub(4 + r))
            .ok_or("restart array larger than the block")?;
        let block = Block {
            data,
            restart_offset,
            num_restarts: n,
            prefixes: None,
        };
        let mut prev: Option<usize> = None;
        for i in 0..n {
            let r = block.restart_point(i);
            let ok = match prev {
                None => r == 0,
                Some(p) => r > p && r < restart_offset,
            };
            if !ok {
                return Err("restart points out of order or outside the entries");
            }
            prev = Some(r);
        }
        if n > 1 && restart_offset == 0 {
            return Err("empty block with more than one restart point");
        }
        Ok(block)
    }

    /// Adds the restart-key prefixes that speed up seeks in a block that lives long and is
    /// searched often (an index block). REQUIRES: its keys are internal keys of a bytewise
    /// comparator ([`InternalKeyComparator::is_bytewise`]).
    pub fn with_restart_prefixes(mut self) -> Block {
        self.prefixes = RestartPrefixes::build(&self);
        self
    }

    /// Memory the block holds: its buffer's capacity, the prefixes beside it and the block
    /// itself.
    pub fn memory_bytes(&self) -> usize {
        self.data.capacity() + self.restart_prefix_bytes() + std::mem::size_of::<Block>()
    }

    /// Bytes the restart-key prefixes take beside the block (0 without them).
    pub fn restart_prefix_bytes(&self) -> usize {
        self.prefixes
            .as_ref()
            .map_or(0, |p| p.common.len() + p.windows.len() * 8)
    }

    /// The key of restart point `index`, which shares no bytes with an earlier key.
    fn restart_key(&self, index: usize) -> std::result::Result<&[u8], BlockCorruption> {
        let at = self.restart_point(index);
        let entries = self.data.get(at..self.restart_offset).unwrap_or(&[]);
        let mut d = Decoder::new(entries);
        match (d.varint32(), d.varint32(), d.varint32()) {
            (Some(0), Some(non_shared), Some(_)) => d
                .bytes(non_shared as usize)
                .ok_or((at, "restart key runs past the end of the block")),
            (Some(_), Some(_), Some(_)) => Err((at, "restart entry shares key bytes")),
            _ => Err((at, "malformed restart entry header")),
        }
    }

    /// Asks the CPU to start loading every cache line of the block (x86-64; elsewhere a no-op).
    /// Only a hint: it changes no memory and cannot fault.
    pub fn prefetch(&self) {
        crate::prefetch::lines(&self.data);
    }

    /// The uncompressed bytes (entries and restart array); their length is the block's weight
    /// in the cache.
    pub fn data(&self) -> &[u8] {
        &self.data
    }

    /// Number of restart points.
    pub fn num_restarts(&self) -> usize {
        self.num_restarts
    }

    /// True when the block holds no entries.
    pub fn is_empty(&self) -> bool {
        self.restart_offset == 0
    }

    /// Offset of restart point `i`. Validated in [`Block::new`]; out of range reads give 0.
    fn restart_point(&self, i: usize) -> usize {
        self.data
            .get(self.restart_offset + 4 * i..)
            .and_then(decode_fixed32)
            .unwrap_or(0) as usize
    }
}

/// Where and why a block failed to decode: the byte offset inside the uncompressed block and a
/// message. The table layer turns it into [`crate::Error::Corruption`] with the file offset.
pub type BlockCorruption = (usize, &'static str);

/// A bidirectional cursor over one block. Keys are compared as internal keys; blocks whose keys
/// are plain strings (metaindex, properties) are only read front to back.
pub struct BlockIter<B: Deref<Target = Block> = Arc<Block>> {
    block: B,
    icmp: InternalKeyComparator,
    /// Offset of the current entry; `restart_offset` when not positioned.
    current: usize,
    /// Offset just past the current entry (where the next one starts).
    next_offset: usize,
    /// Restart region holding the current entry.
    restart_index: usize,
    key: Vec<u8>,
    value_start: usize,
    value_end: usize,
    valid: bool,
    corruption: Option<BlockCorruption>,
    /// Every entry of one restart region, decoded once when `prev` first steps into it, so
    /// walking backwards costs one decode per entry rather than a rescan of the region per
    /// step. Blocks are immutable, so the cache never goes stale.
    prev_cache: Vec<CachedEntry>,
    /// The full keys of `prev_cache`, back to back.
    prev_cache_keys: Vec<u8>,
    /// The restart region `prev_cache` holds.
    prev_cache_region: Option<usize>,
    /// When the current entry was reached by `prev`: its index in `prev_cache`, whose copy of
    /// the key is the current key (`key` is then stale, and is rebuilt only if the cursor
    /// decodes forward from here). A backward step then copies no key and searches nothing.
    cached: Option<usize>,
}

/// One decoded entry of [`BlockIter::prev_cache`].
#[derive(Clone, Copy)]
struct CachedEntry {
    /// Offset of the entry; the next one starts at `value_end`.
    current: usize,
    value_start: usize,
    value_end: usize,
    key_start: usize,
    key_end: usize,
}

impl<B: Deref<Target = Block>> BlockIter<B> {
    /// An unpositioned cursor over `block`.
    pub fn new(block: B, icmp: InternalKeyComparator) -> Self {
        Self::with_key_buffer(block, icmp, Vec::new())
    }

    /// Like [`BlockIter::new`], with `key` (cleared) as the buffer for the current key, so a
    /// caller that makes many short-lived cursors can hand one buffer from each to the next
    /// ([`BlockIter::into_key_buffer`]) instead of allocating it every time.
    pub fn with_key_buffer(block: B, icmp: InternalKeyComparator, mut key: Vec<u8>) -> Self {
        key.clear();
        let end = block.restart_offset;
        BlockIter {
            block,
            icmp,
            current: end,
            next_offset: end,
            restart_index: 0,
            key,
            value_start: 0,
            value_end: 0,
            valid: false,
            corruption: None,
            prev_cache: Vec::new(),
            prev_cache_keys: Vec::new(),
            prev_cache_region: None,
            cached: None,
        }
    }

    /// Points this cursor at another block, unpositioned, keeping the buffers it has grown
    /// (the current key and the backward-step cache): an iterator moving from block to block
    /// then allocates nothing per block.
    pub fn reset(&mut self, block: B) {
        let end = block.restart_offset;
        self.block = block;
        self.current = end;
        self.next_offset = end;
        self.restart_index = 0;
        self.key.clear();
        self.value_start = 0;
        self.value_end = 0;
        self.valid = false;
        self.corruption = None;
        self.prev_cache.clear();
        self.prev_cache_keys.clear();
        self.prev_cache_region = None;
        self.cached = None;
    }

    /// The block this cursor reads.
    pub fn block(&self) -> &B {
        &self.block
    }

    /// Gives up the cursor, returning the buffer its current key was decoded into.
    pub fn into_key_buffer(self) -> Vec<u8> {
        self.key
    }

    /// True when positioned at an entry.
    pub fn valid(&self) -> bool {
        self.valid
    }

    /// The first decoding failure, if any. Once set, the cursor stays invalid.
    pub fn corruption(&self) -> Option<BlockCorruption> {
        self.corruption
    }

    /// The current key (empty when not valid).
    pub fn key(&self) -> &[u8] {
        if !self.valid {
            return &[];
        }
        match self.cached {
            Some(i) => self.cached_key(i),
            None => &self.key,
        }
    }

    /// The key of `prev_cache[i]`.
    fn cached_key(&self, i: usize) -> &[u8] {
        let range = self
            .prev_cache
            .get(i)
            .map_or(0..0, |e| e.key_start..e.key_end);
        self.prev_cache_keys.get(range).unwrap_or_default()
    }

    /// Makes `key` the current key again after backward steps served it from `prev_cache`,
    /// before the cursor decodes forward (the next entry's key is a delta on it).
    fn materialize_key(&mut self) {
        if let Some(i) = self.cached.take() {
            let mut key = std::mem::take(&mut self.key);
            key.clear();
            key.extend_from_slice(self.cached_key(i));
            self.key = key;
        }
    }

    /// The current value (empty when not valid).
    pub fn value(&self) -> &[u8] {
        if self.valid {
            self.block
                .data
                .get(self.value_start..self.value_end)
                .unwrap_or(&[])
        } else {
            &[]
        }
    }

    fn fail(&mut self, offset: usize, message: &'static str) {
        self.valid = false;
        self.cached = None;
        self.current = self.block.restart_offset;
        self.next_offset = self.block.restart_offset;
        if self.corruption.is_none() {
            self.corruption = Some((offset, message));
        }
    }

    fn seek_to_restart(&mut self, index: usize) {
        self.cached = None;
        self.key.clear();
        self.restart_index = index;
        self.next_offset = self.block.restart_point(index);
    }

    /// Decodes the header of the entry at `at` (`at < restart_offset`), whose previous key is
    /// `prev_len` bytes long: the key bytes it shares with the previous key, where its own key
    /// bytes are and where its value ends. The three header varints take one byte each when
    /// keys and values are under 128 bytes, the common case, which is decoded without the
    /// general varint path.
    ///
    /// Inlined: a point lookup decodes about 14 entries (its index block's and its data
    /// block's), and inlining took 7% off a lookup's instructions (callgrind).
    #[inline(always)]
    fn decode_entry(
        &self,
        at: usize,
        prev_len: usize,
    ) -> std::result::Result<EntryBounds, BlockCorruption> {
        let end = self.block.restart_offset;
        let (shared, non_shared, value_len, header_len) = match self.block.data.get(at..at + 3) {
            Some(&[a, b, c]) if (a | b | c) < 0x80 && at + 3 <= end => {
                (usize::from(a), usize::from(b), usize::from(c), 3)
            }
            _ => {
                let mut d = Decoder::new(self.block.data.get(at..end).unwrap_or_default());
                match (d.varint32(), d.varint32(), d.varint32()) {
                    (Some(s), Some(n), Some(v)) => {
                        (s as usize, n as usize, v as usize, d.position())
                    }
                    _ => return Err((at, "malformed entry header")),
                }
            }
        };
        if shared > prev_len {
            return Err((at, "entry shares more key bytes than the previous key has"));
        }
        let key_start = at + header_len;
        let value_start = key_start + non_shared;
        if value_start > end {
            return Err((at, "entry key runs past the end of the block"));
        }
        let value_end = value_start + value_len;
        if value_end > end {
            return Err((at, "entry value runs past the end of the block"));
        }
        Ok(EntryBounds {
            shared,
            key_start,
            value_start,
            value_end,
        })
    }

    /// Makes the key of the entry decoded as `e` the current key (its bytes shared with the
    /// previous key are already in `key`).
    fn take_key(&mut self, e: &EntryBounds) {
        self.key.truncate(e.shared);
        self.key.extend_from_slice(
            self.block
                .data
                .get(e.key_start..e.value_start)
                .unwrap_or_default(),
        );
    }

    /// Makes the entry at `at`, decoded as `e` and whose key is in `key`, the current position;
    /// the restart region is stepped forward from `restart_index` to the entry's.
    fn settle_at(&mut self, at: usize, e: &EntryBounds) {
        self.current = at;
        self.value_start = e.value_start;
        self.value_end = e.value_end;
        self.next_offset = e.value_end;
        while self.restart_index + 1 < self.block.num_restarts
            && self.block.restart_point(self.restart_index + 1) <= at
        {
            self.restart_index += 1;
        }
        self.valid = true;
    }

    /// Decodes the entry at `next_offset` into the current position. Returns false at the end
    /// of the entries or on corruption.
    fn parse_next(&mut self) -> bool {
        if self.corruption.is_some() {
            self.valid = false;
            return false;
        }
        self.materialize_key();
        let end = self.block.restart_offset;
        self.current = self.next_offset;
        if self.current >= end {
            self.valid = false;
            self.current = end;
            return false;
        }
        let at = self.current;
        match self.decode_entry(at, self.key.len()) {
            Ok(e) => {
                self.take_key(&e);
                self.settle_at(at, &e);
                true
            }
            Err((at, m)) => {
                self.fail(at, m);
                false
            }
        }
    }

    /// Positions at the first entry.
    pub fn seek_to_first(&mut self) {
        self.seek_to_restart(0);
        self.parse_next();
    }

    /// Positions at the last entry.
    pub fn seek_to_last(&mut self) {
        self.seek_to_restart(self.block.num_restarts - 1);
        while self.parse_next() && self.next_offset < self.block.restart_offset {}
    }

    /// Moves to the next entry; invalid past the last.
    pub fn next(&mut self) {
        if self.valid {
            self.parse_next();
        }
    }

    /// Moves to the previous entry; invalid before the first.
    pub fn prev(&mut self) {
        if !self.valid {
            return;
        }
        // Stepping back inside the cached region: the entry before this one in the cache.
        if let Some(i) = self.cached {
            if i > 0 {
                self.take_cached(i - 1);
                return;
            }
        }
        let original = self.current;
        // Find the last restart point strictly before the current entry, then decode forward
        // to the entry that ends where the current one starts.
        while self.block.restart_point(self.restart_index) >= original {
            if self.restart_index == 0 {
                self.valid = false;
                self.cached = None;
                self.current = self.block.restart_offset;
                self.next_offset = self.block.restart_offset;
                return;
            }
            self.restart_index -= 1;
        }
        let region = self.restart_index;
        if self.prev_cache_region != Some(region) && !self.fill_prev_cache(region) {
            return;
        }
        match self
            .prev_cache
            .iter()
            .rposition(|e| e.value_end == original)
        {
            Some(i) => {
                self.restart_index = region;
                self.take_cached(i);
            }
            None => self.fail(original, "no entry ends where the current entry starts"),
        }
    }

    /// Positions at `prev_cache[i]` (an entry of the region `restart_index` names), its key
    /// served from the cache.
    fn take_cached(&mut self, i: usize) {
        let Some(&e) = self.prev_cache.get(i) else {
            return self.fail(self.current, "backward step past the decoded region");
        };
        self.current = e.current;
        self.next_offset = e.value_end;
        self.value_start = e.value_start;
        self.value_end = e.value_end;
        self.cached = Some(i);
        self.valid = true;
    }

    /// Decodes every entry of restart region `region` into the prev cache, each key built in
    /// the cache from the one before it, without moving the cursor. Returns false (with the
    /// cursor failed) on corruption.
    fn fill_prev_cache(&mut self, region: usize) -> bool {
        self.prev_cache.clear();
        self.prev_cache_keys.clear();
        self.prev_cache_region = None;
        let region_end = if region + 1 < self.block.num_restarts {
            self.block.restart_point(region + 1)
        } else {
            self.block.restart_offset
        };
        let mut at = self.block.restart_point(region);
        // Where the previous entry's key starts in `prev_cache_keys`, and its length.
        let (mut prev_start, mut prev_len) = (0, 0);
        while at < region_end {
            let e = match self.decode_entry(at, prev_len) {
                Ok(e) => e,
                Err((at, m)) => {
                    self.fail(at, m);
                    return false;
                }
            };
            let key_start = self.prev_cache_keys.len();
            self.prev_cache_keys
                .extend_from_within(prev_start..prev_start + e.shared);
            self.prev_cache_keys.extend_from_slice(
                self.block
                    .data
                    .get(e.key_start..e.value_start)
                    .unwrap_or_default(),
            );
            let key_end = self.prev_cache_keys.len();
            self.prev_cache.push(CachedEntry {
                current: at,
                value_start: e.value_start,
                value_end: e.value_end,
                key_start,
                key_end,
            });
            (prev_start, prev_len) = (key_start, key_end - key_start);
            at = e.value_end;
        }
        self.prev_cache_region = Some(region);
        true
    }

    /// Decodes the key stored at restart point `index` (which must not share bytes).
    fn restart_key(&self, index: usize) -> std::result::Result<&[u8], BlockCorruption> {
        self.block.restart_key(index)
    }

    /// Positions at the first entry with key `>= target` (internal key order).
    pub fn seek(&mut self, target: &[u8]) {
        self.seek_scanning(target, self.icmp.is_bytewise());
    }

    /// [`BlockIter::seek`], with the in-region scan of [`BlockIter::scan_to_bytewise`] when
    /// `bytewise` (tests compare it with the general one).
    fn seek_scanning(&mut self, target: &[u8], bytewise: bool) {
        if self.corruption.is_some() {
            return;
        }
        self.cached = None;
        // Binary search for the last restart point whose key is < target.
        let (mut left, mut right) = match &self.block.prefixes {
            Some(prefixes) => prefixes.bounds(target),
            None => (0usize, self.block.num_restarts - 1),
        };
        while left < right {
            let mid = left + (right - left).div_ceil(2);
            match self.restart_key(mid) {
                Ok(k) => {
                    if self.icmp.compare(k, target) == Ordering::Less {
                        left = mid;
                    } else {
                        right = mid - 1;
                    }
                }
                Err((at, m)) => {
                    self.fail(at, m);
                    return;
                }
            }
        }
        if bytewise && target.len() >= TRAILER_LEN {
            self.scan_to_bytewise(left, target);
        } else {
            self.scan_to(left, target);
        }
    }

    /// [`BlockIter::scan_to`] for internal keys of the bytewise comparator, deciding most
    /// entries from their shared-prefix length without building their keys.
    ///
    /// Why: building each key (a copy) and comparing it in full was most of a point lookup's
    /// in-block scan. Scanning forward, the previous key is below `target` and first differs
    /// from it at byte `m` of both user keys. An entry sharing more than `m` bytes with it keeps
    /// that byte, so it is below `target` too; one sharing at most `m` bytes starts with
    /// `target`'s first `shared` bytes, so only its stored bytes are compared with the rest of
    /// `target`, and the key of the entry found is `target[..shared]` plus those bytes. When
    /// the first difference is not inside both user keys (equal user keys, whose trailers
    /// order by number, not bytes, or a user key that is a prefix of the other) the general
    /// scan takes over from the restart point.
    fn scan_to_bytewise(&mut self, restart: usize, target: &[u8]) {
        let end = self.block.restart_offset;
        let target_user = target.len() - TRAILER_LEN;
        let mut at = self.block.restart_point(restart);
        // Where the previous key first differs from `target`, below it (0 before the first
        // entry, which shares nothing), and that key's length.
        let mut m = 0usize;
        let mut prev_len = 0usize;
        while at < end {
            let e = match self.decode_entry(at, prev_len) {
                Ok(e) => e,
                Err((at, msg)) => return self.fail(at, msg),
            };
            let len = e.shared + (e.value_start - e.key_start);
            let Some(user_len) = len.checked_sub(TRAILER_LEN) else {
                return self.scan_to(restart, target);
            };
            if e.shared > m {
                // Byte `m` is the previous key's: still below `target` there. In a sorted
                // block the user key reaches past `m` (else it would be a prefix of the
                // previous one); an unsorted one goes to the general scan.
                if m >= user_len {
                    return self.scan_to(restart, target);
                }
            } else {
                let stored = self
                    .block
                    .data
                    .get(e.key_start..e.value_start)
                    .unwrap_or_default();
                let rest = target.get(e.shared..).unwrap_or_default();
                let p = e.shared + common_prefix_len(stored, rest);
                let decisive = p < user_len && p < target_user;
                let below = match (stored.get(p - e.shared), target.get(p)) {
                    (Some(a), Some(b)) if decisive => Some(a < b),
                    // Equal user keys: their trailers decide, through the full compare below.
                    _ if p >= user_len && user_len == target_user => None,
                    _ => return self.scan_to(restart, target),
                };
                if below != Some(true) {
                    self.key.clear();
                    // Sized once: a fresh cursor's empty buffer would otherwise grow twice.
                    self.key.reserve(e.shared + stored.len());
                    self.key
                        .extend_from_slice(target.get(..e.shared).unwrap_or_default());
                    self.key.extend_from_slice(stored);
                    if below.is_none() && self.icmp.compare(&self.key, target) == Ordering::Less {
                        // A version newer than `target`'s: no byte to go on from here.
                        return self.scan_to(restart, target);
                    }
                    self.restart_index = restart;
                    return self.settle_at(at, &e);
                }
                m = p;
            }
            prev_len = len;
            at = e.value_end;
        }
        self.run_off_end();
    }

    /// Leaves the cursor past the last entry, as `parse_next` leaves one that ran off the end.
    fn run_off_end(&mut self) {
        self.valid = false;
        self.current = self.block.restart_offset;
        self.next_offset = self.block.restart_offset;
        self.restart_index = self.block.num_restarts - 1;
    }

    /// Positions at the first entry `>= target` at or after restart point `restart`, whose
    /// key is below `target`: [`BlockIter::parse_next`] until the key is not below, with the
    /// cursor's bookkeeping (restart region, offsets) done once, at the entry found.
    ///
    /// Why: a point lookup scans half a restart interval of a data block on average, and
    /// stepping the restart region at every entry (as `parse_next` does) is wasted on all but
    /// the last.
    fn scan_to(&mut self, restart: usize, target: &[u8]) {
        let end = self.block.restart_offset;
        let mut at = self.block.restart_point(restart);
        self.key.clear();
        while at < end {
            let e = match self.decode_entry(at, self.key.len()) {
                Ok(e) => e,
                Err((at, m)) => return self.fail(at, m),
            };
            self.take_key(&e);
            if self.icmp.compare(&self.key, target) != Ordering::Less {
                self.restart_index = restart;
                return self.settle_at(at, &e);
            }
            at = e.value_end;
        }
        self.run_off_end();
    }

    /// Positions at the last entry with key `<= target` (internal key order).
    pub fn seek_for_prev(&mut self, target: &[u8]) {
        self.seek(target);
        if self.valid {
            if self.icmp.compare(&self.key, target) == Ordering::Greater {
                self.prev();
            }
        } else if self.corruption.is_none() {
            self.seek_to_last();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{make_internal_key, BytewiseComparator, ValueKind};
    use rand::{Rng, SeedableRng};

    fn icmp() -> InternalKeyComparator {
        InternalKeyComparator::new(Arc::new(BytewiseComparator))
    }

    /// Sorted, distinct internal keys with shared prefixes, each with a value.
    fn entries(n: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
        (0..n)
            .map(|i| {
                // Even numbers only, so odd numbers make "between" keys.
                let user = format!("key{:06}", i * 2);
                (
                    make_internal_key(user.as_bytes(), 100, ValueKind::Value),
                    format!("value-{i}-{}", "x".repeat(i % 13)).into_bytes(),
                )
            })
            .collect()
    }

    fn build(items: &[(Vec<u8>, Vec<u8>)], interval: usize) -> Arc<Block> {
        let mut b = BlockBuilder::new(interval);
        for (k, v) in items {
            b.add(k, v);
        }
        assert_eq!(b.len(), items.len());
        let est = b.size_estimate();
        let data = b.finish();
        assert_eq!(data.len(), est);
        assert!(b.is_empty());
        Arc::new(Block::new(data).expect("valid block"))
    }

    fn between(i: usize) -> Vec<u8> {
        make_internal_key(
            format!("key{:06}", i * 2 + 1).as_bytes(),
            100,
            ValueKind::Value,
        )
    }

    #[test]
    fn finish_into_reuses_buffers_and_builds_the_same_blocks() {
        let items = entries(200);
        let mut reused = BlockBuilder::new(4);
        let mut out = Vec::new();
        // Blocks of different sizes through one builder and one output buffer: each must equal
        // the block a fresh builder makes, whatever the buffers held before.
        for chunk in [&items[..150], &items[150..151], &items[151..]] {
            for (k, v) in chunk {
                reused.add(k, v);
            }
            reused.finish_into(&mut out);
            assert!(reused.is_empty());
            let mut fresh = BlockBuilder::new(4);
            for (k, v) in chunk {
                fresh.add(k, v);
            }
            assert_eq!(out, fresh.finish());
        }
    }

    #[test]
    fn round_trip_every_interval() {
        let items = entries(300);
        for interval in [1, 2, 16, 1000] {
            let block = build(&items, interval);
            assert_eq!(block.num_restarts(), 300usize.div_ceil(interval));
            let mut it = BlockIter::new(block.clone(), icmp());
            // Forward.
            it.seek_to_first();
            for (k, v) in &items {
                assert!(it.valid());
                assert_eq!((it.key(), it.value()), (&k[..], &v[..]));
                it.next();
            }
            assert!(!it.valid());
            // Backward.
            it.seek_to_last();
            for (k, v) in items.iter().rev() {
                assert!(it.valid());
                assert_eq!((it.key(), it.value()), (&k[..], &v[..]));
                it.prev();
            }
            assert!(!it.valid());
            assert!(it.corruption().is_none());
            // Seeks at and between every key, and a step each way from there.
            for (i, (k, _)) in items.iter().enumerate() {
                it.seek(k);
                assert_eq!(it.key(), &k[..], "seek exact {i}");
                it.prev();
                if i == 0 {
                    assert!(!it.valid());
                } else {
                    assert_eq!(it.key(), &items[i - 1].0[..]);
                }
                it.seek_for_prev(k);
                assert_eq!(it.key(), &k[..], "seek_for_prev exact {i}");
                it.next();
                match items.get(i + 1) {
                    Some((n, _)) => assert_eq!(it.key(), &n[..]),
                    None => assert!(!it.valid()),
                }
                let b = between(i);
                it.seek(&b);
                match items.get(i + 1) {
                    Some((n, _)) => assert_eq!(it.key(), &n[..], "seek between {i}"),
                    None => assert!(!it.valid()),
                }
                it.seek_for_prev(&b);
                assert_eq!(it.key(), &k[..], "seek_for_prev between {i}");
            }
            let before = make_internal_key(b"a", 1, ValueKind::Value);
            it.seek(&before);
            assert_eq!(it.key(), &items[0].0[..]);
            it.seek_for_prev(&before);
            assert!(!it.valid());
            let after = make_internal_key(b"z", 1, ValueKind::Value);
            it.seek(&after);
            assert!(!it.valid());
            it.seek_for_prev(&after);
            assert_eq!(it.key(), &items[299].0[..]);
            assert!(it.corruption().is_none());
        }
    }

    #[test]
    fn empty_block() {
        let block = build(&[], 16);
        assert!(block.is_empty());
        assert_eq!(block.data().len(), 8);
        let mut it = BlockIter::new(block, icmp());
        it.seek_to_first();
        assert!(!it.valid());
        it.seek_to_last();
        assert!(!it.valid());
        it.seek(b"anything");
        assert!(!it.valid());
        it.seek_for_prev(b"anything");
        assert!(!it.valid());
        assert!(it.corruption().is_none());
    }

    #[test]
    fn golden_bytes() {
        let mut b = BlockBuilder::new(2);
        b.add(b"apple", b"1");
        b.add(b"apricot", b"22");
        b.add(b"banana", b"");
        let data = b.finish();
        #[rustfmt::skip]
        let expected: Vec<u8> = [
            &[0u8, 5, 1][..], b"apple", b"1",       // restart 0 at offset 0
            &[2, 5, 2], b"ricot", b"22",            // shares "ap"
            &[0, 6, 0], b"banana",                  // restart 1 at offset 19
            &[0, 0, 0, 0, 19, 0, 0, 0, 2, 0, 0, 0],
        ]
        .concat();
        assert_eq!(data, expected);
    }

    #[test]
    fn rejects_bad_restart_arrays() {
        assert!(Block::new(vec![]).is_err());
        assert!(Block::new(vec![0, 0, 0, 0]).is_err(), "zero restarts");
        assert!(
            Block::new(vec![0, 0, 0, 0, 5, 0, 0, 0]).is_err(),
            "too many"
        );
        assert!(
            Block::new(vec![1, 0, 0, 0, 1, 0, 0, 0]).is_err(),
            "first not 0"
        );
        let items = entries(10);
        let good = build(&items, 2).data().to_vec();
        let n = good.len();
        let mut swapped = good.clone();
        // Make restart 2 point before restart 1.
        let r1 = n - 4 - 5 * 4 + 4;
        swapped[r1 + 4..r1 + 8].copy_from_slice(&[1, 0, 0, 0]);
        assert!(Block::new(swapped).is_err());
    }

    #[test]
    fn damaged_entries_never_panic() {
        let items = entries(40);
        let good = build(&items, 4).data().to_vec();
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for _ in 0..2000 {
            let mut data = good.clone();
            for _ in 0..rng.gen_range(1..4) {
                let i = rng.gen_range(0..data.len());
                data[i] = rng.gen();
            }
            if rng.gen_bool(0.1) {
                data.truncate(rng.gen_range(0..data.len()));
            }
            let Ok(block) = Block::new(data) else {
                continue;
            };
            let mut it = BlockIter::new(Arc::new(block), icmp());
            it.seek_to_first();
            let mut steps = 0;
            while it.valid() && steps < 1000 {
                it.next();
                steps += 1;
            }
            it.seek_to_last();
            while it.valid() && steps < 2000 {
                it.prev();
                steps += 1;
            }
            it.seek(&items[17].0);
            it.seek_for_prev(&items[3].0);
            let _ = (it.key(), it.value(), it.corruption());
        }
    }

    #[test]
    fn random_walk_against_oracle() {
        // At interval 1 every backward step decodes a region of one entry afresh; at 16 backward
        // steps take long runs from the cache, broken by forward steps and seeks.
        for interval in [1, 3, 16] {
            random_walk(interval, 3000);
        }
    }

    fn random_walk(interval: usize, steps: usize) {
        let items = entries(200);
        let block = build(&items, interval);
        let mut it = BlockIter::new(block, icmp());
        let mut rng = rand::rngs::StdRng::seed_from_u64(42);
        let mut pos: Option<usize> = None;
        for _ in 0..steps {
            // Backward steps twice as likely as the others, so walks reach across regions.
            match rng.gen_range(0..7) {
                0 => {
                    it.seek_to_first();
                    pos = Some(0);
                }
                1 => {
                    it.seek_to_last();
                    pos = Some(items.len() - 1);
                }
                2 => {
                    let i = rng.gen_range(0..items.len());
                    it.seek(&between(i));
                    pos = (i + 1 < items.len()).then_some(i + 1);
                }
                3 => {
                    let i = rng.gen_range(0..items.len());
                    it.seek_for_prev(&between(i));
                    pos = Some(i);
                }
                4 => {
                    if let Some(p) = pos {
                        it.next();
                        pos = (p + 1 < items.len()).then_some(p + 1);
                    }
                }
                _ => {
                    if let Some(p) = pos {
                        it.prev();
                        pos = p.checked_sub(1);
                    }
                }
            }
            match pos {
                Some(p) => {
                    assert!(it.valid());
                    assert_eq!(it.key(), &items[p].0[..]);
                    assert_eq!(it.value(), &items[p].1[..]);
                }
                None => assert!(!it.valid()),
            }
        }
    }

    /// Sorted internal keys of the shapes that stress the prefix search: a long shared prefix,
    /// user keys shorter and longer than it plus eight bytes, zero bytes (equal once padded),
    /// and several versions of one user key.
    fn awkward_keys(rng: &mut rand::rngs::StdRng) -> Vec<Vec<u8>> {
        let mut users: Vec<Vec<u8>> = (0..400)
            .map(|_| {
                let mut k = b"tenant/0042/".to_vec();
                let tail = rng.gen_range(0..14);
                k.extend((0..tail).map(|_| {
                    *[0u8, 1, b'a', b'b', 0xff]
                        .get(rng.gen_range(0..5))
                        .unwrap_or(&0)
                }));
                k
            })
            .collect();
        users.sort();
        users.dedup();
        // Like an index block's last key: a short successor sharing nothing with the rest.
        users.push(b"u".to_vec());
        let mut keys = Vec::new();
        for u in &users {
            for seq in (1..=rng.gen_range(1..4u64)).rev() {
                keys.push(make_internal_key(u, seq * 10, ValueKind::Value));
            }
        }
        keys
    }

    #[test]
    fn restart_prefixes_seek_exactly_like_the_plain_search() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for interval in [1, 2, 5, 16] {
            let keys = awkward_keys(&mut rng);
            let items: Vec<_> = keys.iter().map(|k| (k.clone(), b"v".to_vec())).collect();
            let plain = build(&items, interval);
            let fast = Arc::new(
                Block::new(plain.data().to_vec())
                    .expect("valid block")
                    .with_restart_prefixes(),
            );
            assert!(fast.restart_prefix_bytes() > 0);
            let mut targets: Vec<Vec<u8>> = keys.clone();
            for _ in 0..2000 {
                let mut u = keys[rng.gen_range(0..keys.len())].clone();
                u.truncate(u.len() - TRAILER_LEN);
                match rng.gen_range(0..4) {
                    0 => u.truncate(rng.gen_range(0..=u.len())),
                    1 => u.push(rng.gen()),
                    2 => {
                        let at = rng.gen_range(0..u.len());
                        u[at] = rng.gen();
                    }
                    _ => {}
                }
                targets.push(make_internal_key(
                    &u,
                    rng.gen_range(0..50),
                    ValueKind::Value,
                ));
            }
            targets.push(make_internal_key(b"", 5, ValueKind::Value));
            targets.push(make_internal_key(b"zzz", 5, ValueKind::Value));
            targets.push(make_internal_key(b"tenant/", 5, ValueKind::Value));
            for target in &targets {
                let mut a = BlockIter::new(plain.clone(), icmp());
                let mut b = BlockIter::new(fast.clone(), icmp());
                a.seek(target);
                b.seek(target);
                assert_eq!(
                    a.valid(),
                    b.valid(),
                    "interval {interval}, target {target:?}"
                );
                if a.valid() {
                    assert_eq!(a.key(), b.key(), "interval {interval}, target {target:?}");
                }
                let expected = keys
                    .iter()
                    .find(|k| icmp().compare(k, target) != Ordering::Less);
                assert_eq!(a.valid().then(|| a.key()), expected.map(|k| k.as_slice()));
            }
        }
    }

    #[test]
    fn bytewise_scan_positions_like_the_general_scan() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        for interval in [1, 2, 5, 16, 1000] {
            let keys = awkward_keys(&mut rng);
            let items: Vec<_> = keys
                .iter()
                .enumerate()
                .map(|(i, k)| (k.clone(), format!("v{i}").into_bytes()))
                .collect();
            let block = build(&items, interval);
            let mut targets: Vec<Vec<u8>> = keys.clone();
            for _ in 0..3000 {
                let mut k = keys[rng.gen_range(0..keys.len())].clone();
                k.truncate(k.len() - TRAILER_LEN);
                match rng.gen_range(0..5) {
                    0 => k.truncate(rng.gen_range(0..=k.len())),
                    1 => k.push(rng.gen()),
                    2 => {
                        let at = rng.gen_range(0..k.len());
                        k[at] = rng.gen();
                    }
                    3 => k.extend_from_slice(&[0, 0]),
                    _ => {}
                }
                targets.push(make_internal_key(
                    &k,
                    rng.gen_range(0..50),
                    ValueKind::Value,
                ));
            }
            // Shorter than a trailer: the general scan handles it.
            targets.push(b"ten".to_vec());
            targets.push(Vec::new());
            for target in &targets {
                let mut fast = BlockIter::new(block.clone(), icmp());
                let mut general = BlockIter::new(block.clone(), icmp());
                fast.seek_scanning(target, true);
                general.seek_scanning(target, false);
                let expected = keys
                    .iter()
                    .position(|k| icmp().compare(k, target) != Ordering::Less);
                let ctx = format!("interval {interval}, target {target:?}");
                assert_eq!(fast.valid(), expected.is_some(), "{ctx}");
                // The cursors must be in the same state: stepping either way agrees.
                for step in 0..6 {
                    assert_eq!(fast.valid(), general.valid(), "{ctx} step {step}");
                    assert_eq!(fast.key(), general.key(), "{ctx} step {step}");
                    assert_eq!(fast.value(), general.value(), "{ctx} step {step}");
                    if step < 3 {
                        fast.next();
                        general.next();
                    } else {
                        fast.prev();
                        general.prev();
                    }
                }
                if let Some(i) = expected {
                    let mut it = BlockIter::new(block.clone(), icmp());
                    it.seek(target);
                    assert_eq!(it.key(), &keys[i][..], "{ctx}");
                    assert_eq!(it.value(), &items[i].1[..], "{ctx}");
                    it.prev();
                    assert_eq!(
                        it.valid().then(|| it.key()),
                        i.checked_sub(1).map(|j| &keys[j][..])
                    );
                }
            }
        }
    }

    #[test]
    fn restart_prefixes_narrow_an_index_like_block_to_one_restart() {
        // Zero-padded numbers, as db_bench writes them, and a short successor at the end.
        let mut items: Vec<_> = (0..500u32)
            .map(|i| {
                let user = format!("{:016}", 1_000 + i * 7);
                (
                    make_internal_key(user.as_bytes(), 1, ValueKind::Value),
                    b"h".to_vec(),
                )
            })
            .collect();
        items.push((make_internal_key(b"1", 1, ValueKind::Value), b"h".to_vec()));
        let block = Block::new(build(&items, 1).data().to_vec())
            .expect("valid")
            .with_restart_prefixes();
        let prefixes = block.prefixes.as_ref().expect("prefixes");
        for i in [0u32, 1, 250, 499] {
            let target = make_internal_key(
                format!("{:016}", 1_000 + i * 7 + 3).as_bytes(),
                9,
                ValueKind::Value,
            );
            let (lo, hi) = prefixes.bounds(&target);
            assert_eq!((lo, hi), (i as usize, i as usize), "target after key {i}");
        }
    }

    #[test]
    fn restart_prefixes_of_one_key_and_of_identical_windows() {
        // One restart: the bounds are always (0, 0).
        let one = vec![(
            make_internal_key(b"only", 1, ValueKind::Value),
            b"v".to_vec(),
        )];
        let block = Arc::new(
            Block::new(build(&one, 1).data().to_vec())
                .expect("valid")
                .with_restart_prefixes(),
        );
        for t in [&b"a"[..], b"only", b"p"] {
            let mut it = BlockIter::new(block.clone(), icmp());
            it.seek(&make_internal_key(t, 9, ValueKind::Value));
            assert_eq!(it.valid(), t <= &b"only"[..], "{t:?}");
        }
        // Keys that differ only after the eight window bytes all tie and fall back to keys.
        let items: Vec<_> = (0..50u32)
            .map(|i| {
                let user = format!("p12345678{i:04}");
                (
                    make_internal_key(user.as_bytes(), 1, ValueKind::Value),
                    b"v".to_vec(),
                )
            })
            .collect();
        let block = Arc::new(
            Block::new(build(&items, 1).data().to_vec())
                .expect("valid")
                .with_restart_prefixes(),
        );
        for (i, (k, _)) in items.iter().enumerate() {
            let mut it = BlockIter::new(block.clone(), icmp());
            it.seek(k);
            assert!(it.valid() && it.key() == k.as_slice(), "key {i}");
        }
    }
}
