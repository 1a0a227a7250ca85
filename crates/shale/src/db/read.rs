//! The read path: point lookups that stop at the first source holding a full value (or a
//! deletion) for the key, and iterators that merge every source.

use std::cmp::Ordering as CmpOrdering;
use std::ops::{Bound, RangeBounds};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{Db, DbInner, ReadView};
use crate::blob::BlobCache;
use crate::error::{Error, Result};
use crate::iter::{
    apply_merge, resolve_value, split_expiring, DbIterator, InternalIterator, LevelIterator,
    LevelSource, MergingIterator, ReadContext,
};
use crate::key::{parse_internal_key, InternalKeyComparator, LookupKey, SequenceNumber, ValueKind};
use crate::merge::MergeOperator;
use crate::options::ReadOptions;
use crate::sstable::{FilterUse, ReadFlags, TableReader};
use crate::table_cache::{iter_or_error, TableCache};
use crate::version::FileMetaData;

/// Gathers what a point lookup finds, newest entry first.
struct GetState<'a> {
    user_key: &'a [u8],
    /// Borrowed from the database rather than cloned into a [`ReadContext`]: a point lookup
    /// then touches no shared reference count, so concurrent readers do not contend.
    icmp: &'a InternalKeyComparator,
    /// Read only when an expiring entry turns up: most lookups meet none, and the clock read
    /// was 1.7% of a readrandom profile.
    clock: &'a dyn crate::env::Clock,
    now_micros: Option<u64>,
    merge_operator: Option<&'a dyn MergeOperator>,
    /// Where values kept in blob files are read from.
    blobs: &'a BlobCache,
    /// Merge operands seen so far, newest first.
    operands: Vec<Vec<u8>>,
    outcome: Outcome,
    /// The value found, once `outcome` is `Found`; the caller's buffer, so that a lookup
    /// through [`crate::Db::get_into`] copies the value into memory it already has.
    value: Vec<u8>,
}

enum Outcome {
    /// Keep looking in older sources.
    Searching,
    /// A full value was found; it is in `GetState::value`.
    Found,
    /// A deletion or an expired value ends the search with no base value.
    Deleted,
}

impl GetState<'_> {
    /// Looks at one entry; returns whether the source should keep feeding entries.
    fn visit(&mut self, ikey: &[u8], value: &[u8]) -> Result<bool> {
        let parsed = parse_internal_key(ikey).ok_or_else(|| {
            Error::corruption("<read>", 0, format!("malformed internal key {ikey:?}"))
        })?;
        if self.icmp.compare_user(parsed.user_key, self.user_key) != CmpOrdering::Equal {
            return Ok(false);
        }
        match parsed.kind {
            ValueKind::Value | ValueKind::BlobIndex => self.found(parsed.kind, value)?,
            ValueKind::ExpiringValue | ValueKind::ExpiringBlobIndex => {
                let (expiry, v) = split_expiring(value).ok_or_else(|| {
                    Error::corruption("<read>", 0, "expiring value shorter than its expiry")
                })?;
                let now = *self
                    .now_micros
                    .get_or_insert_with(|| self.clock.now_micros());
                if expiry <= now {
                    self.outcome = Outcome::Deleted;
                } else {
                    self.found(parsed.kind, v)?;
                }
            }
            ValueKind::Deletion => self.outcome = Outcome::Deleted,
            ValueKind::Merge => {
                self.operands.push(value.to_vec());
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Records the full value stored (as `kind`) as `stored`.
    fn found(&mut self, kind: ValueKind, stored: &[u8]) -> Result<()> {
        if kind.is_blob() {
            self.value = resolve_value(Some(self.blobs), self.user_key, kind, stored)?;
        } else {
            self.value.clear();
            self.value.extend_from_slice(stored);
        }
        self.outcome = Outcome::Found;
        Ok(())
    }

    fn done(&self) -> bool {
        !matches!(self.outcome, Outcome::Searching)
    }

    /// Whether the key has a value, and the buffer holding it (cleared when it has none).
    fn finish(mut self) -> Result<(bool, Vec<u8>)> {
        let found = matches!(self.outcome, Outcome::Found);
        if !found {
            self.value.clear();
        }
        if self.operands.is_empty() {
            return Ok((found, self.value));
        }
        self.operands.reverse();
        let refs: Vec<&[u8]> = self.operands.iter().map(Vec::as_slice).collect();
        let base = found.then_some(self.value.as_slice());
        let merged = apply_merge(self.merge_operator, self.user_key, base, &refs)?;
        Ok((true, merged))
    }
}

thread_local! {
    /// How often this thread's lookups that reached the deepest level holding tables found
    /// nothing of their key there: a moving average, out of 65,536, over about the last 16.
    static DEEPEST_MISS_RATE: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// How a lookup uses the filter of the deepest level's table ([`FilterUse`]).
///
/// A lookup that reaches the deepest level holding tables without finding its key finds it
/// there if it exists, and most data lives there. So:
/// - while that table almost always holds the key (at most 1 in 32 of this thread's recent
///   lookups there found nothing of it), its filter is not checked at all: its hash, probes and
///   cache line are a cost with no use on a hit (a compacted readrandom: 1.329 against
///   1.353 us per lookup, medians of 16 runs in 8 alternated pairs, faster in 6 of the 8; a
///   small gain within a noisy host's spread, kept for the work it removes);
/// - while it mostly does, the filter's line is loaded during the index search and checked
///   after it ([`FilterUse::Last`]), which saved 7-9% of a compacted readrandom;
/// - once more than 3 in 8 recent lookups missed, the filter goes first again: a workload of
///   absent keys would otherwise pay an index search per lookup (readmissing ran twice as slow
///   with the filter last).
///
/// Per thread, so readers share no counter.
struct DeepestFilterMisses;

impl DeepestFilterMisses {
    /// Added to the rate by a lookup that found nothing (the rate is out of 65,536).
    const MISS: u32 = 4096;
    /// The rate at or below which the filter is skipped: 1 in 32.
    const SKIP_AT_OR_BELOW: u32 = 65_536 / 32;
    /// The rate above which the filter is checked first: 3 in 8.
    const FIRST_ABOVE: u32 = 65_536 * 3 / 8;

    fn filter_use() -> FilterUse {
        let rate = DEEPEST_MISS_RATE.with(std::cell::Cell::get);
        if rate <= Self::SKIP_AT_OR_BELOW {
            FilterUse::Skip
        } else if rate <= Self::FIRST_ABOVE {
            FilterUse::Last
        } else {
            FilterUse::First
        }
    }

    /// Records whether a lookup found anything of its key in the deepest level's table.
    fn record(found: bool) {
        DEEPEST_MISS_RATE.with(|r| {
            let rate = r.get();
            r.set(rate - rate / 16 + if found { 0 } else { Self::MISS });
        });
    }
}

impl DbInner {
    /// The sequence number a read sees: its snapshot's, or the last published one. Load it
    /// after the view. A read without a snapshot is registered nowhere, so compactions do not
    /// keep what an earlier sequence number needs: loaded first, the number could predate a
    /// write that a compaction finished before the view was loaded let drop the version the
    /// read should see. Loaded after, every table in the view was built from entries at or
    /// below it; writes that went to a memtable made after the view are not seen, and those
    /// all come after everything the view holds, so the read still sees a prefix of the
    /// writes.
    fn read_sequence(&self, options: &ReadOptions) -> SequenceNumber {
        match &options.snapshot {
            Some(s) => s.sequence(),
            None => self.last_sequence.load(Ordering::Acquire),
        }
    }

    /// Refuses a snapshot taken from another database (or from an earlier open of this one):
    /// its sequence number means nothing here, and nothing here keeps what it should see.
    fn check_snapshot(&self, options: &ReadOptions) -> Result<()> {
        match &options.snapshot {
            Some(s) if !s.belongs_to(&self.snapshots) => Err(Error::InvalidArgument(format!(
                "snapshot at sequence {} was not taken from this database ({}): a snapshot \
                 reads only the database handle it came from",
                s.sequence(),
                self.dir.display()
            ))),
            _ => Ok(()),
        }
    }

    /// The context of a read. Call it after loading the view (see [`Self::read_sequence`]).
    fn read_context(&self, options: &ReadOptions) -> ReadContext {
        ReadContext {
            icmp: self.icmp.clone(),
            sequence: self.read_sequence(options),
            now_micros: self.options.clock.now_micros(),
            merge_operator: self.options.merge_operator.clone(),
            blobs: Some(self.blob_cache.clone()),
        }
    }

    fn read_flags(options: &ReadOptions) -> ReadFlags {
        ReadFlags {
            verify_checksums: !options.skip_checksums,
            fill_cache: !options.dont_fill_cache,
            release_behind: false,
        }
    }

    pub(crate) fn get(&self, options: &ReadOptions, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let (found, value) = self.get_with_buffer(options, key, Vec::new())?;
        Ok(found.then_some(value))
    }

    /// [`DbInner::get`] into `out`: true and the value in `out`, or false and `out` empty.
    /// `out`'s memory is reused when the value fits in it.
    pub(crate) fn get_into(
        &self,
        options: &ReadOptions,
        key: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<bool> {
        let (found, value) = self.get_with_buffer(options, key, std::mem::take(out))?;
        *out = value;
        Ok(found)
    }

    /// A point lookup whose value, if found, is written into `buffer` (cleared first).
    fn get_with_buffer(
        &self,
        options: &ReadOptions,
        key: &[u8],
        buffer: Vec<u8>,
    ) -> Result<(bool, Vec<u8>)> {
        if key.len() > crate::limits::MAX_KEY_BYTES {
            return Err(Error::InvalidArgument(format!(
                "key of {} bytes exceeds the limit of {} bytes",
                key.len(),
                crate::limits::MAX_KEY_BYTES
            )));
        }
        self.check_snapshot(options)?;
        // Borrowed for the lookup only, without taking a reference count.
        let view = self.view.load();
        let sequence = self.read_sequence(options);
        let lookup = LookupKey::new(key, sequence);
        let ikey = lookup.internal_key();
        let mut state = GetState {
            user_key: key,
            icmp: &self.icmp,
            clock: self.options.clock.as_ref(),
            now_micros: None,
            merge_operator: self.options.merge_operator.as_deref(),
            blobs: &self.blob_cache,
            operands: Vec::new(),
            outcome: Outcome::Searching,
            value: buffer,
        };
        if view.mem.may_contain(key) {
            view.mem.get(ikey, &mut |k, v| state.visit(k, v))?;
            if state.done() {
                return state.finish();
            }
        }
        for imm in view.imm.iter().filter(|m| m.may_contain(key)) {
            imm.get(ikey, &mut |k, v| state.visit(k, v))?;
            if state.done() {
                return state.finish();
            }
        }
        let flags = Self::read_flags(options);
        let deepest = view.version.deepest_level_with_files();
        for (level, file) in view.version.files_for_key(key) {
            let mut opened = None;
            let table = view.table(&self.table_cache, file.number, &mut opened)?;
            let operands = state.operands.len();
            let visit = &mut |k: &[u8], v: &[u8]| state.visit(k, v);
            if level > 0 && Some(level) == deepest {
                table.get_filtered(flags, ikey, visit, DeepestFilterMisses::filter_use())?;
                // Merge operands without a base are the key found too: a filter would pass.
                DeepestFilterMisses::record(state.done() || state.operands.len() > operands);
            } else {
                table.get(flags, ikey, visit)?;
            }
            if state.done() {
                break;
            }
        }
        state.finish()
    }

    /// Every source of `view` as one merged internal iterator.
    pub(crate) fn internal_iter(
        &self,
        view: &Arc<ReadView>,
        flags: ReadFlags,
    ) -> Box<dyn InternalIterator> {
        let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
        // An empty memtable adds nothing the iterator may see: whatever is inserted later has a
        // newer sequence number than the iterator reads at.
        if !view.mem.is_empty() {
            children.push(Box::new(view.mem.iter()));
        }
        for imm in &view.imm {
            children.push(Box::new(imm.iter()));
        }
        for file in view.version.files(0) {
            children.push(iter_or_error(
                view.table_handle(&self.table_cache, file.number),
                flags,
            ));
        }
        for level in 1..crate::limits::NUM_LEVELS {
            if !view.version.files(level).is_empty() {
                children.push(Box::new(LevelIterator::new(
                    self.icmp.clone(),
                    ViewLevel {
                        view: view.clone(),
                        table_cache: self.table_cache.clone(),
                        level,
                    },
                    flags,
                )));
            }
        }
        if children.len() == 1 {
            // One source (a compacted database with an empty memtable) needs no merging.
            if let Some(only) = children.pop() {
                return only;
            }
        }
        Box::new(MergingIterator::new(self.icmp.clone(), children))
    }

    pub(crate) fn iter(&self, options: &ReadOptions) -> DbIterator {
        let view = self.current_view();
        let ctx = self.read_context(options);
        self.iter_over(options, view, ctx)
    }

    /// Two cursors over one state (one view, sequence number and clock reading), for the two
    /// ends of a [`Range`]: ends built one after the other could straddle a write, and a key
    /// the write moved would be in neither end's part of the range.
    pub(crate) fn iter_pair(&self, options: &ReadOptions) -> (DbIterator, DbIterator) {
        let view = self.current_view();
        let ctx = self.read_context(options);
        (
            self.iter_over(options, view.clone(), ctx.clone()),
            self.iter_over(options, view, ctx),
        )
    }

    fn iter_over(
        &self,
        options: &ReadOptions,
        view: Arc<ReadView>,
        ctx: ReadContext,
    ) -> DbIterator {
        let inner: Box<dyn InternalIterator> = match self.check_snapshot(options) {
            Ok(()) => self.internal_iter(&view, Self::read_flags(options)),
            // Never valid; every positioning call leaves `status` reporting the refusal.
            Err(e) => Box::new(crate::iter::EmptyIterator::with_error(e)),
        };
        DbIterator::new(
            inner,
            ctx,
            options.lower_bound.clone(),
            options.upper_bound.clone(),
            Box::new(view),
        )
    }

    pub(crate) fn approximate_sizes(&self, ranges: &[(&[u8], &[u8])]) -> Result<Vec<u64>> {
        let view = self.current_view();
        let mut sizes = Vec::with_capacity(ranges.len());
        for (start, end) in ranges {
            let start_key = LookupKey::new(start, crate::key::MAX_SEQUENCE);
            let end_key = LookupKey::new(end, crate::key::MAX_SEQUENCE);
            let mut total = 0u64;
            for level in 0..crate::limits::NUM_LEVELS {
                for file in view.version.files(level) {
                    if self.icmp.compare(&file.largest, start_key.internal_key())
                        == CmpOrdering::Less
                        || self.icmp.compare(&file.smallest, end_key.internal_key())
                            != CmpOrdering::Less
                    {
                        continue;
                    }
                    let table = self.table_cache.get(file.number)?;
                    let a = table.approximate_offset_of(start_key.internal_key());
                    let b = table.approximate_offset_of(end_key.internal_key());
                    total += b.saturating_sub(a);
                }
            }
            sizes.push(total);
        }
        Ok(sizes)
    }
}

/// A Rust iterator over a key range, from [`Db::range`] or [`Db::prefix`]. Yields
/// `Result<(key, value)>`; an error ends the iteration. Double-ended: `.rev()` walks backwards,
/// and both ends may be used at once without crossing.
pub struct Range {
    front: DbIterator,
    back: DbIterator,
    start: Bound<Vec<u8>>,
    end: Bound<Vec<u8>>,
    prefix: Option<Vec<u8>>,
    front_started: bool,
    back_started: bool,
    /// Last key yielded from each end; the ends stop when they meet.
    front_last: Option<Vec<u8>>,
    back_last: Option<Vec<u8>>,
    finished: bool,
}

fn owned(b: Bound<&impl AsRef<[u8]>>) -> Bound<Vec<u8>> {
    match b {
        Bound::Included(k) => Bound::Included(k.as_ref().to_vec()),
        Bound::Excluded(k) => Bound::Excluded(k.as_ref().to_vec()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

impl Range {
    pub(crate) fn new<K: AsRef<[u8]>, R: RangeBounds<K>>(
        front: DbIterator,
        back: DbIterator,
        range: R,
    ) -> Range {
        Range {
            front,
            back,
            start: owned(range.start_bound()),
            end: owned(range.end_bound()),
            prefix: None,
            front_started: false,
            back_started: false,
            front_last: None,
            back_last: None,
            finished: false,
        }
    }

    pub(crate) fn prefix(db: &Db, prefix: &[u8]) -> Range {
        let mut options = ReadOptions {
            lower_bound: Some(prefix.to_vec()),
            ..ReadOptions::default()
        };
        // The smallest key after every key with this prefix (none if the prefix is all 0xff).
        let mut upper = prefix.to_vec();
        while let Some(last) = upper.pop() {
            if last < 0xff {
                upper.push(last + 1);
                options.upper_bound = Some(upper);
                break;
            }
        }
        let (front, back) = db.inner.iter_pair(&options);
        let mut r = Range::new::<&[u8], _>(front, back, ..);
        r.prefix = Some(prefix.to_vec());
        r
    }

    fn compare_keys(&self, a: &[u8], b: &[u8]) -> CmpOrdering {
        self.front.comparator().compare(a, b)
    }

    fn in_range(&self, key: &[u8]) -> bool {
        let after_start = match &self.start {
            Bound::Included(s) => self.compare_keys(key, s) != CmpOrdering::Less,
            Bound::Excluded(s) => self.compare_keys(key, s) == CmpOrdering::Greater,
            Bound::Unbounded => true,
        };
        let before_end = match &self.end {
            Bound::Included(e) => self.compare_keys(key, e) != CmpOrdering::Greater,
            Bound::Excluded(e) => self.compare_keys(key, e) == CmpOrdering::Less,
            Bound::Unbounded => true,
        };
        let prefixed = self.prefix.as_ref().is_none_or(|p| key.starts_with(p));
        after_start && before_end && prefixed
    }

    fn take(&mut self, from_front: bool) -> Option<Result<(Vec<u8>, Vec<u8>)>> {
        if self.finished {
            return None;
        }
        let it = if from_front { &self.front } else { &self.back };
        if !it.valid() {
            self.finished = true;
            return it.status().err().map(Err);
        }
        let key = it.key().to_vec();
        let crossed = if from_front {
            self.back_last
                .as_ref()
                .is_some_and(|b| self.compare_keys(&key, b) != CmpOrdering::Less)
        } else {
            self.front_last
                .as_ref()
                .is_some_and(|f| self.compare_keys(&key, f) != CmpOrdering::Greater)
        };
        if crossed || !self.in_range(&key) {
            self.finished = true;
            return None;
        }
        let value = match it.try_value() {
            Ok(v) => v.to_vec(),
            Err(e) => {
                // A value that cannot be read from its blob file ends the iteration with the error.
                self.finished = true;
                return Some(Err(e));
            }
        };
        if from_front {
            self.front_last = Some(key.clone());
        } else {
            self.back_last = Some(key.clone());
        }
        Some(Ok((key, value)))
    }
}

impl Iterator for Range {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.finished {
            return None;
        }
        if !self.front_started {
            self.front_started = true;
            match &self.start {
                Bound::Included(s) | Bound::Excluded(s) => {
                    let s = s.clone();
                    self.front.seek(&s);
                    if matches!(self.start, Bound::Excluded(_))
                        && self.front.valid()
                        && self.compare_keys(self.front.key(), &s) == CmpOrdering::Equal
                    {
                        self.front.next();
                    }
                }
                Bound::Unbounded => self.front.seek_to_first(),
            }
        } else {
            self.front.next();
        }
        self.take(true)
    }
}

impl DoubleEndedIterator for Range {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.finished {
            return None;
        }
        if !self.back_started {
            self.back_started = true;
            match &self.end {
                Bound::Included(e) | Bound::Excluded(e) => {
                    let e = e.clone();
                    self.back.seek_for_prev(&e);
                    if matches!(self.end, Bound::Excluded(_))
                        && self.back.valid()
                        && self.compare_keys(self.back.key(), &e) == CmpOrdering::Equal
                    {
                        self.back.prev();
                    }
                }
                Bound::Unbounded => self.back.seek_to_last(),
            }
        } else {
            self.back.prev();
        }
        self.take(false)
    }
}

impl std::fmt::Debug for Range {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Range")
            .field("start", &self.start)
            .field("end", &self.end)
            .finish_non_exhaustive()
    }
}

/// One level of a read view's version, for a [`LevelIterator`]: the view's list of tables,
/// shared rather than copied, opened through the handles point lookups pinned in the view,
/// else through the table cache.
struct ViewLevel {
    view: Arc<ReadView>,
    table_cache: Arc<TableCache>,
    level: usize,
}

impl LevelSource for ViewLevel {
    fn files(&self) -> &[Arc<FileMetaData>] {
        self.view.version.files(self.level)
    }

    fn open(&self, number: u64) -> Result<Arc<TableReader>> {
        self.view.table_handle(&self.table_cache, number)
    }
}

#[cfg(test)]
mod deepest_filter_tests {
    use super::{DeepestFilterMisses, FilterUse};

    #[test]
    fn the_filter_is_skipped_on_hits_and_goes_first_while_lookups_mostly_miss() {
        std::thread::spawn(|| {
            // A fresh thread has seen no misses: the filter is skipped.
            assert_eq!(DeepestFilterMisses::filter_use(), FilterUse::Skip);
            // One miss brings it back, checked last, for a dozen lookups or so.
            DeepestFilterMisses::record(false);
            assert_eq!(DeepestFilterMisses::filter_use(), FilterUse::Last);
            for _ in 0..20 {
                DeepestFilterMisses::record(true);
            }
            assert_eq!(DeepestFilterMisses::filter_use(), FilterUse::Skip);
            // Two in three lookups miss: it goes first within a few dozen lookups.
            for i in 0..60 {
                DeepestFilterMisses::record(i % 3 == 0);
            }
            assert_eq!(DeepestFilterMisses::filter_use(), FilterUse::First);
            // One in eight misses is below 3/8 but above 1/32: checked last again.
            for i in 0..60 {
                DeepestFilterMisses::record(i % 8 != 0);
            }
            assert_eq!(DeepestFilterMisses::filter_use(), FilterUse::Last);
            // One in 64 is below 1/32 on average, but each miss checks the filter for a while.
            let mut skipped = 0;
            for i in 0..640 {
                DeepestFilterMisses::record(i % 64 != 0);
                skipped += usize::from(DeepestFilterMisses::filter_use() == FilterUse::Skip);
            }
            assert!((400..640).contains(&skipped), "{skipped} of 640 skipped");
        })
        .join()
        .expect("test thread");
    }
}
