//! The database: open and recovery, the write path with group commit, the read path, flushes,
//! compactions and their background threads.
//!
//! Locking: `state` (a mutex) guards the memtables' lifecycle, the version set, the writer
//! queue and background bookkeeping. Readers never take it: they load the current [`ReadView`]
//! and then the published sequence number (in that order, so that no compaction the view
//! reflects dropped a version the sequence number needs; see `DbInner::read_sequence`). Only
//! the writer at the head of the queue touches the WAL and inserts into the
//! active memtable, with `state` released while it does.

mod background;
mod checkpoint;
mod compaction_job;
mod open;
mod read;
mod repair;
mod stats;
mod write;

use std::collections::{BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::thread::JoinHandle;

use arc_swap::ArcSwap;
use parking_lot::{Condvar, Mutex};

use crate::batch::WriteBatch;
use crate::blob::{BlobCache, BlobFileWriter};
use crate::cache::BlockCache;
use crate::env::FileLock;
use crate::error::{Error, Result};
use crate::iter::DbIterator;
use crate::key::{InternalKeyComparator, SequenceNumber};
use crate::memtable::{ChunkPool, MemTable};
use crate::options::{Options, ReadOptions, WriteOptions};
use crate::snapshot::{Snapshot, SnapshotList};
use crate::sstable::TableReader;
use crate::table_cache::TableCache;
use crate::version::{Version, VersionSet};
use crate::wal::LogWriter;

pub use read::Range;
pub use repair::RepairReport;
pub use stats::{DbStats, LevelStats};

/// What readers need, published as one unit so that a reader sees a memtable or the table it
/// was flushed into, never neither.
pub(crate) struct ReadView {
    pub(crate) mem: Arc<MemTable>,
    /// Frozen memtables, newest first.
    pub(crate) imm: Vec<Arc<MemTable>>,
    pub(crate) version: Arc<Version>,
    /// The open handle of each of the version's tables, by file number (sorted), filled by the
    /// first point lookup that needs it. A point lookup then borrows the handle from the view
    /// instead of taking a table-cache shard lock and a reference count that every reader of
    /// that table writes; an iterator takes a handle pinned here if there is one. Handles live
    /// as long as the view. Empty when the version has more tables than `max_open_files`:
    /// pinning them all would keep more files open than allowed, so lookups go through the
    /// table cache.
    pub(crate) tables: Vec<(u64, OnceLock<Arc<TableReader>>)>,
}

impl ReadView {
    pub(crate) fn new(
        mem: Arc<MemTable>,
        imm: Vec<Arc<MemTable>>,
        version: Arc<Version>,
        max_open_files: usize,
    ) -> ReadView {
        let count: usize = (0..crate::limits::NUM_LEVELS)
            .map(|level| version.num_files(level))
            .sum();
        let mut tables = Vec::new();
        if count <= max_open_files {
            tables.reserve_exact(count);
            for level in 0..crate::limits::NUM_LEVELS {
                tables.extend(
                    version
                        .files(level)
                        .iter()
                        .map(|f| (f.number, OnceLock::new())),
                );
            }
            tables.sort_unstable_by_key(|&(number, _)| number);
        }
        ReadView {
            mem,
            imm,
            version,
            tables,
        }
    }

    /// The slot where this view pins table `number`'s handle, if it pins tables and the
    /// version has that table.
    fn slot(&self, number: u64) -> Option<&OnceLock<Arc<TableReader>>> {
        let at = self
            .tables
            .binary_search_by_key(&number, |&(n, _)| n)
            .ok()?;
        self.tables.get(at).map(|(_, slot)| slot)
    }

    /// The open handle of table `number`: the one this view pinned, else from `cache` (then
    /// pinned, when this view pins tables). A handle the view does not hold is kept alive in
    /// `opened`, which the caller owns for as long as it uses the returned reference.
    pub(crate) fn table<'a>(
        &'a self,
        cache: &TableCache,
        number: u64,
        opened: &'a mut Option<Arc<TableReader>>,
    ) -> Result<&'a TableReader> {
        let slot = self.slot(number);
        if let Some(pinned) = slot.and_then(OnceLock::get) {
            return Ok(pinned);
        }
        let table = cache.get(number)?;
        if let Some(slot) = slot {
            // Another reader may have pinned it first; either handle will do.
            let _ = slot.set(table.clone());
        }
        Ok(opened.insert(table))
    }

    /// A shared handle of table `number`, for an iterator that keeps it: the one this view
    /// pinned (a reference count, not a table-cache lookup under a shard lock), else the table
    /// cache's. Never pinned here: an iterator may outlive its view's time as the current one,
    /// and its scan would then pin every table of a view no reader else uses, open beyond the
    /// table cache's `max_open_files` for as long as the iterator lives.
    pub(crate) fn table_handle(&self, cache: &TableCache, number: u64) -> Result<Arc<TableReader>> {
        match self.slot(number).and_then(OnceLock::get) {
            Some(pinned) => Ok(pinned.clone()),
            None => cache.get(number),
        }
    }
}

/// A write waiting in the queue for its turn (or for a leader to do it).
pub(crate) struct PendingWrite {
    /// `None` once a leader has taken the batch into its group; also `None` for a request to
    /// switch the memtable.
    pub(crate) batch: Option<WriteBatch>,
    pub(crate) sync: bool,
    pub(crate) disable_wal: bool,
    /// Where the writer waits to lead or to learn its result.
    pub(crate) slot: Arc<write::WriterSlot>,
}

/// What a leader of a synced group knows about the writers that sync together.
///
/// When many threads write with `sync`, the writers a leader acknowledges need a moment to
/// come back with their next write; a leader that starts its sync at once takes only those
/// that queued during the previous sync, and the writers settle into two cohorts that sync
/// alternately, each sync covering half of them. A leader that waits (a bounded time, a
/// fraction of one sync) for the writers of the previous synced group lets one sync cover them
/// all.
#[derive(Debug, Default)]
pub(crate) struct SyncCohort {
    /// How many writers recent synced groups held: what a leader waits for.
    pub(crate) expected: usize,
    /// Moving average of one WAL sync, in nanoseconds: bounds the wait.
    pub(crate) sync_nanos: u64,
    /// Set while a leader waits: a writer that queues wakes it.
    pub(crate) leader_waiting: bool,
}

/// Everything guarded by the database mutex.
pub(crate) struct DbState {
    pub(crate) mem: Arc<MemTable>,
    /// The WAL the active memtable's writes go to.
    pub(crate) mem_wal_number: u64,
    /// Frozen memtables waiting to be flushed, oldest first, with the WAL each was written to.
    pub(crate) imm: VecDeque<(Arc<MemTable>, u64)>,
    /// Numbers of finished WALs kept to be written over by the next WALs
    /// ([`crate::Options::recycle_log_file_num`]). Their files stay under their old names,
    /// older than the manifest's log number, so recovery ignores them.
    pub(crate) recyclable_wals: Vec<u64>,
    /// Manual compactions running: while any is, no WAL file is kept or reused, so that the
    /// compaction leaves none behind (see `DbInner::delete_kept_wals`).
    pub(crate) reclaiming: usize,
    /// The first WAL this process created. Only WALs from it on are reused: they are known to
    /// be framed in recyclable fragments, which a reader tells from a later log's.
    pub(crate) first_own_wal: u64,
    pub(crate) versions: VersionSet,
    /// Set by a failed WAL write or sync or a failed background job; refuses writes until reopen.
    pub(crate) bg_error: Option<Error>,
    /// Table numbers being written by running jobs: not live yet, but not garbage.
    pub(crate) pending_outputs: BTreeSet<u64>,
    /// Names of obsolete files a job is unlinking with the mutex released: no other cleanup
    /// chooses them (or keeps one of them as a WAL to reuse) meanwhile.
    pub(crate) deleting: BTreeSet<String>,
    /// Flushed memtables, each with its WAL number, that readers may still hold: their blob
    /// references point into the blob file of that number, which no version may name any more
    /// once compaction has collected it. Pruned as their readers go.
    pub(crate) flushed_mems: Vec<(Weak<MemTable>, u64)>,
    pub(crate) writers: VecDeque<PendingWrite>,
    /// How synced groups gather their writers; see [`SyncCohort`].
    pub(crate) sync_cohort: SyncCohort,
    pub(crate) flush_running: bool,
    pub(crate) compaction_running: bool,
    /// Manual compactions waiting; automatic ones yield to them.
    pub(crate) manual_waiting: usize,
}

/// State shared by the handle and the background threads.
pub(crate) struct DbInner {
    pub(crate) dir: PathBuf,
    pub(crate) options: Options,
    pub(crate) icmp: InternalKeyComparator,
    /// Spare memtable memory: a flushed memtable's chunks, for the next memtable.
    pub(crate) chunk_pool: Arc<ChunkPool>,
    pub(crate) table_cache: Arc<TableCache>,
    pub(crate) block_cache: Option<Arc<BlockCache>>,
    pub(crate) snapshots: Arc<SnapshotList>,
    pub(crate) state: Mutex<DbState>,
    /// Signalled whenever background work finishes or fails.
    pub(crate) background_done: Condvar,
    /// Wakes background threads when there may be work.
    pub(crate) work_available: Condvar,
    /// Wakes the leader of a synced group that waits for its writers ([`SyncCohort`]).
    pub(crate) cohort_arrived: Condvar,
    /// The active WAL. Only the head of the writer queue uses it.
    pub(crate) wal: Mutex<Option<LogWriter>>,
    /// The active WAL's blob file, created by the first separated value written beside that
    /// WAL and numbered like it. Only the head of the writer queue uses it, always while holding
    /// `wal` (taken first).
    pub(crate) blob_writer: Mutex<Option<BlobFileWriter>>,
    /// WALs (and their blob files) sealed by a memtable switch but not synced, oldest first.
    /// The next synced write syncs them before its own record (see
    /// [`DbInner::sync_sealed_wals`]); a flush makes their contents durable in a table.
    /// Locked only while holding `wal`.
    pub(crate) sealed_wals: Mutex<Vec<PathBuf>>,
    /// Open blob files, for reads.
    pub(crate) blob_cache: Arc<BlobCache>,
    /// The last sequence number whose write is fully in the memtable.
    pub(crate) last_sequence: AtomicU64,
    /// Writes that queued behind at least as many other writers as there are cores, less one
    /// (with one core, every write that queued behind another): a sign that writer threads
    /// alone keep every core busy (see `DbInner::merge_at`).
    pub(crate) crowded_writes: AtomicU64,
    /// What readers search, swapped whole on every flush and compaction. An `ArcSwap` lets a
    /// point lookup borrow it without touching a shared reference count, so concurrent readers
    /// do not contend on one cache line.
    pub(crate) view: ArcSwap<ReadView>,
    pub(crate) stats: stats::Counters,
    pub(crate) shutting_down: AtomicBool,
    /// Opened by [`Db::open_read_only`]: every write is refused.
    pub(crate) read_only: bool,
    pub(crate) _lock: Option<Box<dyn FileLock>>,
}

/// An open database. Share it between threads with `Arc<Db>`; every method takes `&self`.
///
/// ```
/// # fn main() -> shale::Result<()> {
/// let dir = tempfile::tempdir().expect("tempdir");
/// let db = shale::Db::open(dir.path(), shale::Options::default())?;
/// db.put(b"hello", b"world")?;
/// assert_eq!(db.get(b"hello")?, Some(b"world".to_vec()));
/// db.delete(b"hello")?;
/// assert_eq!(db.get(b"hello")?, None);
/// # Ok(())
/// # }
/// ```
pub struct Db {
    inner: Arc<DbInner>,
    threads: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db").field("dir", &self.inner.dir).finish()
    }
}

impl Db {
    /// Opens (and by default creates) the database in directory `path`, replaying its WAL.
    pub fn open(path: impl AsRef<Path>, options: Options) -> Result<Db> {
        open::open(path.as_ref(), options)
    }

    /// Opens the database in `path` for reading only: it takes no lock, writes nothing (the WAL
    /// is replayed into memory) and runs no background work. Writes, flushes and compactions
    /// return [`Error::InvalidArgument`]. Use it to inspect a database, even one another process
    /// has open (this handle then sees the state as of its open).
    pub fn open_read_only(path: impl AsRef<Path>, options: Options) -> Result<Db> {
        open::open_read_only(path.as_ref(), options)
    }

    /// Deletes the database in `path`: its files and, if then empty, the directory.
    pub fn destroy(path: impl AsRef<Path>, options: &Options) -> Result<()> {
        open::destroy(path.as_ref(), options)
    }

    /// Salvages what it can from a damaged database in `path`: every readable entry of every
    /// table and WAL is rewritten under a new manifest; damaged files (and numbered `.log` files
    /// that are not shale logs) move to `path/lost/`. The database must not be open. Refused,
    /// with nothing changed, for a directory holding no shale files and for tables written with
    /// a comparator other than `options.comparator` (`Error::InvalidArgument`), and stopped
    /// before it replaces the manifest if the process runs out of descriptors
    /// (`Error::is_out_of_handles`), leaving the database as it was: the new tables and its
    /// copies in `lost/` are removed again (only a failure while writing the new manifest
    /// itself may leave them, and the next open deletes tables no manifest names).
    /// Tables are read a few at a time, however many there are: one per run of tables whose
    /// key ranges do not overlap, that is about as many as overlap at one key, and no more than
    /// `options.max_open_files` less a few descriptors kept for other files (deeper overlaps
    /// are merged first, in passes, into a scratch directory). The new manifest replaces the
    /// old in one atomic step, so a repair that stops halfway can be run again.
    pub fn repair(path: impl AsRef<Path>, options: &Options) -> Result<RepairReport> {
        repair::repair(path.as_ref(), options)
    }

    /// The directory the database lives in.
    pub fn path(&self) -> &Path {
        &self.inner.dir
    }

    /// The options the database was opened with.
    pub fn options(&self) -> &Options {
        &self.inner.options
    }

    /// Sets `key` to `value`.
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        self.put_opt(key, value, &WriteOptions::default())
    }

    /// Sets `key` to `value` with explicit write options.
    pub fn put_opt(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        options: &WriteOptions,
    ) -> Result<()> {
        let (key, value) = (key.as_ref(), value.as_ref());
        let expiry = self.inner.default_expiry();
        if let Some(done) = self.inner.put_separated(options, key, value, expiry) {
            return done;
        }
        let mut batch = WriteBatch::with_capacity(key.len() + value.len());
        batch.put(key, value);
        self.inner.write(options, Some(batch))
    }

    /// Sets `key` to `value`, expiring after `ttl`: once it has passed, reads no longer see the
    /// value and compaction reclaims its space.
    pub fn put_with_ttl(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        ttl: std::time::Duration,
    ) -> Result<()> {
        let (key, value) = (key.as_ref(), value.as_ref());
        let expiry = self.inner.expiry_after(ttl);
        let options = WriteOptions::default();
        if let Some(done) = self.inner.put_separated(&options, key, value, Some(expiry)) {
            return done;
        }
        let mut batch = WriteBatch::new();
        batch.put_with_expiry(key, value, expiry);
        self.inner.write(&WriteOptions::default(), Some(batch))
    }

    /// Removes `key` (not an error if it is absent).
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        self.delete_opt(key, &WriteOptions::default())
    }

    /// Removes `key` with explicit write options.
    pub fn delete_opt(&self, key: impl AsRef<[u8]>, options: &WriteOptions) -> Result<()> {
        let key = key.as_ref();
        let mut batch = WriteBatch::with_capacity(key.len());
        batch.delete(key);
        self.inner.write(options, Some(batch))
    }

    /// Adds a merge operand for `key`; fails if no merge operator is configured.
    pub fn merge(&self, key: impl AsRef<[u8]>, operand: impl AsRef<[u8]>) -> Result<()> {
        self.merge_opt(key, operand, &WriteOptions::default())
    }

    /// Adds a merge operand for `key` with explicit write options.
    pub fn merge_opt(
        &self,
        key: impl AsRef<[u8]>,
        operand: impl AsRef<[u8]>,
        options: &WriteOptions,
    ) -> Result<()> {
        let (key, operand) = (key.as_ref(), operand.as_ref());
        // Sized up front, as `put_opt`'s: growing it would reallocate once or twice a merge.
        let mut batch = WriteBatch::with_capacity(key.len() + operand.len());
        batch.merge(key, operand);
        self.inner.write(options, Some(batch))
    }

    /// Applies every operation of `batch` atomically.
    pub fn write(&self, batch: WriteBatch) -> Result<()> {
        self.write_opt(batch, &WriteOptions::default())
    }

    /// Applies every operation of `batch` atomically, with explicit write options.
    pub fn write_opt(&self, batch: WriteBatch, options: &WriteOptions) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        self.inner.write(options, Some(batch))
    }

    /// The value of `key`, or `None`.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.inner.get(&ReadOptions::default(), key.as_ref())
    }

    /// The value of `key` with explicit read options (e.g. at a snapshot).
    pub fn get_opt(&self, key: impl AsRef<[u8]>, options: &ReadOptions) -> Result<Option<Vec<u8>>> {
        self.inner.get(options, key.as_ref())
    }

    /// Looks `key` up into `out`: true with the value in `out`, or false with `out` empty.
    /// The value is copied into `out`'s memory when it fits, so a loop of lookups through one
    /// buffer allocates nothing per lookup (as LevelDB's `Get` into a reused `std::string`).
    /// On an error `out` is left empty.
    pub fn get_into(&self, key: impl AsRef<[u8]>, out: &mut Vec<u8>) -> Result<bool> {
        self.inner
            .get_into(&ReadOptions::default(), key.as_ref(), out)
    }

    /// [`Db::get_into`] with explicit read options (e.g. at a snapshot).
    pub fn get_into_opt(
        &self,
        key: impl AsRef<[u8]>,
        options: &ReadOptions,
        out: &mut Vec<u8>,
    ) -> Result<bool> {
        self.inner.get_into(options, key.as_ref(), out)
    }

    /// A cursor over the database (or the snapshot in `options`), within its bounds.
    pub fn iter(&self, options: ReadOptions) -> DbIterator {
        self.inner.iter(&options)
    }

    /// A Rust iterator over the keys in `range`, as `(key, value)` pairs; `.rev()` walks it
    /// backwards.
    pub fn range<K: AsRef<[u8]>, R: std::ops::RangeBounds<K>>(&self, range: R) -> Range {
        let (front, back) = self.inner.iter_pair(&ReadOptions::default());
        Range::new(front, back, range)
    }

    /// A Rust iterator over every key that starts with `prefix` (bytewise comparator).
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> Range {
        Range::prefix(self, prefix.as_ref())
    }

    /// Pins the current state: reads given this snapshot see exactly the writes made before it.
    pub fn snapshot(&self) -> Snapshot {
        self.inner.snapshots.acquire(&self.inner.last_sequence)
    }

    /// Freezes the memtable and waits until it (and any frozen before it) is in a table.
    pub fn flush(&self) -> Result<()> {
        self.inner.flush()
    }

    /// Compacts every level's tables overlapping the user-key range `[begin, end]` (None:
    /// unbounded) down the tree, dropping overwritten, deleted and expired data. The deepest
    /// level holding the range is also rewritten in place when that can change it: when a
    /// compaction filter is set or its tables hold expiring entries.
    pub fn compact_range(&self, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        self.inner.compact_range(begin, end)
    }

    /// Wakes the background threads and waits until no flush or compaction is due or running:
    /// levels over their size targets and tables whose entries have all expired (at the
    /// clock's current time, see [`Options::clock`]) have been compacted. Background work
    /// does this by itself; this is for callers that need it done now, such as tests that
    /// drive time with [`crate::env::ManualClock`].
    pub fn wait_for_compactions(&self) -> Result<()> {
        self.inner.wait_for_compactions()
    }

    /// Approximate bytes on disk used by each user-key range `[start, end)`.
    pub fn approximate_sizes(&self, ranges: &[(&[u8], &[u8])]) -> Result<Vec<u64>> {
        self.inner.approximate_sizes(ranges)
    }

    /// A named property: `shale.stats`, `shale.num-files-at-level<N>`, `shale.sstables`,
    /// `shale.approximate-memory-usage`, `shale.block-cache-usage`, `shale.total-sst-size`,
    /// `shale.last-sequence`. `None` for an unknown name.
    pub fn property(&self, name: &str) -> Option<String> {
        self.inner.property(name)
    }

    /// Structured statistics: per-level files and bytes, compaction work, amplification, memory.
    pub fn stats(&self) -> DbStats {
        self.inner.stats()
    }

    /// The sequence number of the last acknowledged write.
    pub fn latest_sequence(&self) -> SequenceNumber {
        self.inner.last_sequence.load(Ordering::Acquire)
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        self.inner.shutting_down.store(true, Ordering::SeqCst);
        {
            let _state = self.inner.state.lock();
            self.inner.work_available.notify_all();
            self.inner.background_done.notify_all();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        // Hand the WAL's last bytes to the OS; a failure here cannot be reported from drop, and
        // every acknowledged write was already flushed by its writer.
        if let Some(wal) = self.inner.wal.lock().as_mut() {
            if let Some(blob) = self.inner.blob_writer.lock().as_mut() {
                let _ = blob.flush();
                let _ = blob.close();
            }
            let _ = wal.flush();
            let _ = wal.close();
        }
    }
}

/// Smallest entry the memtable filter is sized for: small entries mean more keys per buffer.
const MEMTABLE_FILTER_BYTES_PER_KEY: usize = 32;

/// A new empty memtable for `options`: with a key filter when keys are ordered bytewise (the
/// filter hashes bytes, so it needs a comparator under which only equal bytes are equal keys).
pub(crate) fn new_memtable(
    options: &Options,
    icmp: &InternalKeyComparator,
    pool: &Arc<ChunkPool>,
) -> MemTable {
    let bytewise =
        options.comparator.name() == crate::key::Comparator::name(&crate::key::BytewiseComparator);
    let expected_keys =
        bytewise.then_some(options.write_buffer_size / MEMTABLE_FILTER_BYTES_PER_KEY);
    MemTable::with_filter_and_pool(icmp.clone(), expected_keys, Some(pool.clone()))
}

impl DbInner {
    /// The expiry for a write made now with the database's default TTL, if it has one.
    pub(crate) fn default_expiry(&self) -> Option<u64> {
        self.options.default_ttl.map(|ttl| self.expiry_after(ttl))
    }

    pub(crate) fn expiry_after(&self, ttl: std::time::Duration) -> u64 {
        let micros = u64::try_from(ttl.as_micros()).unwrap_or(u64::MAX);
        self.options.clock.now_micros().saturating_add(micros)
    }

    /// A new empty memtable, with a key filter when the comparator allows one.
    pub(crate) fn new_memtable(&self) -> MemTable {
        new_memtable(&self.options, &self.icmp, &self.chunk_pool)
    }

    /// Publishes the current memtables and version to readers. REQUIRES: `state` held.
    pub(crate) fn install_view(&self, state: &DbState) {
        let view = ReadView::new(
            state.mem.clone(),
            state.imm.iter().rev().map(|(m, _)| m.clone()).collect(),
            state.versions.current(),
            self.options.max_open_files,
        );
        self.view.store(Arc::new(view));
    }

    /// Whether `version`'s level 0 holds `level0_slowdown_writes_trigger` tables: writers are
    /// then delayed for want of compaction.
    pub(crate) fn level0_slows_writes(&self, version: &Version) -> bool {
        version.num_files(0) >= self.options.level0_slowdown_writes_trigger
    }

    pub(crate) fn current_view(&self) -> Arc<ReadView> {
        self.view.load_full()
    }

    /// Records a background failure; every later write fails until reopen.
    pub(crate) fn set_bg_error(&self, state: &mut DbState, error: &Error) {
        if state.bg_error.is_none() {
            tracing::error!(dir = %self.dir.display(), %error, "database poisoned");
            state.bg_error = Some(error.duplicate());
        }
        self.background_done.notify_all();
    }

    pub(crate) fn check_bg_error(state: &DbState) -> Result<()> {
        match &state.bg_error {
            Some(e) => Err(Error::Poisoned(e.to_string())),
            None => Ok(()),
        }
    }
}
