//! Background work: flushing frozen memtables to level-0 tables, running compactions, and
//! deleting files no version needs any more. Flushes take priority; one compaction runs at a
//! time, so two jobs never rewrite the same tables.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::MutexGuard;

use super::compaction_job::JobPriority;
use super::{DbInner, DbState};
use crate::batch::blob_ref_of;
use crate::compaction::Compaction;
use crate::env::Fs;
use crate::error::{Error, Result};
use crate::filename::{parse_file_name, table_file_name, wal_file_name, FileType};
use crate::iter::InternalIterator;
use crate::key::parse_internal_key;
use crate::memtable::MemTable;
use crate::sstable::{TableBuilder, TableOptions, TableReader};
use crate::version::{FileMetaData, VersionEdit, VersionSet};

/// The longest an idle background thread sleeps while some table consists only of expiring
/// entries, before it checks again whether one has expired.
const EXPIRY_RECHECK: Duration = Duration::from_secs(60);
/// The shortest such sleep, so that a table expiring right now does not make threads spin.
const EXPIRY_WAKE_MIN: Duration = Duration::from_millis(1);

/// Obsolete files chosen for deletion: their names (marked in `DbState::deleting`) and the
/// handles the caches held on them, dropped with the mutex released.
#[derive(Default)]
struct Doomed {
    names: Vec<String>,
    tables: Vec<Arc<TableReader>>,
    blobs: Vec<Arc<dyn crate::env::RandomAccessFile>>,
}

impl DbInner {
    /// The body of each background thread.
    pub(crate) fn background_loop(self: Arc<Self>) {
        let mut state = self.state.lock();
        loop {
            if self.shutting_down.load(Ordering::Acquire) {
                return;
            }
            let healthy = state.bg_error.is_none();
            if healthy && !state.imm.is_empty() && !state.flush_running {
                state.flush_running = true;
                let (flushed, _) = self.run_caught(&mut state, "background flush", |state| {
                    self.flush_oldest(state)
                });
                if let Err(e) = flushed {
                    if !matches!(e, Error::ShuttingDown) {
                        self.set_bg_error(&mut state, &e);
                    }
                }
                state.flush_running = false;
                self.background_done.notify_all();
                continue;
            }
            let now = self.options.clock.now_micros();
            if healthy && !state.compaction_running && state.manual_waiting == 0 {
                // The pick compares keys (a user's comparator): caught like the job itself.
                let (picked, _) = self.run_caught(&mut state, "background compaction", |state| {
                    Ok(if state.versions.needs_compaction(now) {
                        state.versions.pick_compaction(now)
                    } else {
                        None
                    })
                });
                // A panic poisoned the database; nothing is picked.
                let picked = picked.unwrap_or(None);
                if let Some(c) = picked {
                    state.compaction_running = true;
                    // Once level 0 slows the writers for want of compaction, it runs at
                    // normal priority, as a manual one does.
                    let priority = if self.options.low_priority_compactions
                        && !self.level0_slows_writes(state.versions.current_ref())
                    {
                        JobPriority::Low
                    } else {
                        JobPriority::Normal
                    };
                    let parts = self.options.max_subcompactions;
                    let (result, _) =
                        self.run_caught(&mut state, "background compaction", |state| {
                            self.run_compaction(state, c, parts, priority)
                        });
                    state.compaction_running = false;
                    if let Err(e) = result {
                        if !matches!(e, Error::ShuttingDown) {
                            self.set_bg_error(&mut state, &e);
                        }
                    }
                    self.background_done.notify_all();
                    let spares = self.chunk_pool.take_idle_spares(std::time::Instant::now());
                    MutexGuard::unlocked(&mut state, || drop(spares));
                    continue;
                }
            }
            // A table whose entries all expire becomes due with no write to signal it: wake
            // up when the first one does (re-checking at least every EXPIRY_RECHECK, in case
            // the clock jumps or is driven by hand). While another job runs, its end wakes the
            // threads instead.
            let can_compact = healthy && !state.compaction_running && state.manual_waiting == 0;
            // Writes have paused if no memtable took memory for a while: unmap the spare
            // memtable memory, then look for work again (it may have come meanwhile).
            let spares = self.chunk_pool.take_idle_spares(std::time::Instant::now());
            if !spares.is_empty() {
                MutexGuard::unlocked(&mut state, || drop(spares));
                continue;
            }
            // Spares not yet idle are looked at again once they may be. So are those still to
            // come: a flushed memtable a reader still holds gives its chunks to the pool when the
            // reader lets go, and nothing wakes this thread then.
            let spares_wait = (self.chunk_pool.has_spares()
                || state
                    .flushed_mems
                    .iter()
                    .any(|(mem, _)| mem.strong_count() > 0))
            .then_some(crate::memtable::SPARES_IDLE_AFTER);
            let expiry_wait = match state.versions.next_file_expiry() {
                Some(expiry) if can_compact => Some(
                    Duration::from_micros(expiry.saturating_sub(now))
                        .clamp(EXPIRY_WAKE_MIN, EXPIRY_RECHECK),
                ),
                _ => None,
            };
            match spares_wait.into_iter().chain(expiry_wait).min() {
                Some(wait) => {
                    self.work_available.wait_for(&mut state, wait);
                }
                None => self.work_available.wait(&mut state),
            }
        }
    }

    /// Runs `work` (a flush, a compaction, or a write leader's work for its group) with `state`
    /// held, as the job's own code does. A panic in it (a user's merge operator, compaction
    /// filter or comparator, or a bug) poisons the database with [`Error::Panicked`] naming
    /// `job`, with `state` locked again (a guard's `unlocked` section relocks as it unwinds),
    /// and is handed back with that error, for a caller that goes on with it once it has
    /// released what it holds (a write leader, the queue behind it). The caller clears its
    /// job's running flag as for any failed job. Uncaught, a panic ended the background thread
    /// with its job still marked running, or left the write queue's head in place: no
    /// compaction ran again, or no write, and writers waited for ever. What a job had written
    /// stays behind (a partial table, its number among the pending outputs): the database is
    /// poisoned, and a reopen removes such files.
    pub(crate) fn run_caught<T>(
        &self,
        state: &mut MutexGuard<'_, DbState>,
        job: &'static str,
        work: impl FnOnce(&mut MutexGuard<'_, DbState>) -> Result<T>,
    ) -> (Result<T>, Option<Box<dyn std::any::Any + Send>>) {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(state))) {
            Ok(result) => (result, None),
            Err(panic) => {
                let message = panic_message(panic.as_ref());
                tracing::error!(dir = %self.dir.display(), job, %message, "job panicked");
                let e = Error::Panicked { job, message };
                self.set_bg_error(state, &e);
                (Err(e), Some(panic))
            }
        }
    }

    /// Wakes the background threads and returns once no flush or compaction is due or running
    /// (judging expiry at the clock's time when each check is made), or with the error that
    /// stopped background work.
    pub(crate) fn wait_for_compactions(&self) -> Result<()> {
        if self.read_only {
            // No background threads run on a read-only handle; nothing will ever finish.
            return Ok(());
        }
        let mut state = self.state.lock();
        loop {
            Self::check_bg_error(&state)?;
            if self.shutting_down.load(Ordering::Acquire) {
                return Err(Error::ShuttingDown);
            }
            let now = self.options.clock.now_micros();
            let busy = !state.imm.is_empty()
                || state.flush_running
                || state.compaction_running
                || !state.deleting.is_empty()
                || state.manual_waiting > 0
                || state.versions.needs_compaction(now);
            if !busy {
                return Ok(());
            }
            self.work_available.notify_all();
            self.background_done.wait(&mut state);
        }
    }

    /// Writes the oldest frozen memtable to a table and installs it.
    fn flush_oldest(&self, state: &mut MutexGuard<'_, DbState>) -> Result<()> {
        let Some((mem, _wal)) = state.imm.front().cloned() else {
            return Ok(());
        };
        let number = state.versions.new_file_number();
        state.pending_outputs.insert(number);
        let start = Instant::now();
        let mut blobs = BlobTally::new();
        let written =
            MutexGuard::unlocked(state, || self.write_level0_table(&mem, number, &mut blobs));
        let result = written.and_then(|meta| {
            let mut edit = VersionEdit::default();
            // A flush keeps every entry, so every reference it saw is live.
            for (&blob, &bytes) in &blobs {
                edit.add_blob_bytes(blob, bytes);
            }
            if let Some(meta) = meta {
                // Only push below level 0 while no compaction can be writing those levels.
                let level = if state.compaction_running {
                    0
                } else {
                    state.versions.current().pick_level_for_memtable_output(
                        meta.smallest_user_key(),
                        meta.largest_user_key(),
                        &self.options,
                    )
                };
                let counters = &self.stats.per_level[level];
                counters.compactions.fetch_add(1, Ordering::Relaxed);
                counters
                    .bytes_written
                    .fetch_add(meta.file_size, Ordering::Relaxed);
                counters
                    .micros
                    .fetch_add(start.elapsed().as_micros() as u64, Ordering::Relaxed);
                self.stats
                    .flush_bytes
                    .fetch_add(meta.file_size, Ordering::Relaxed);
                edit.add_file(level, meta);
            }
            // Every WAL older than the next memtable's is now redundant.
            let next_wal = state
                .imm
                .get(1)
                .map(|(_, n)| *n)
                .unwrap_or(state.mem_wal_number);
            edit.log_number = Some(next_wal);
            state.versions.log_and_apply(edit)
        });
        state.pending_outputs.remove(&number);
        result?;
        if let Some((flushed, wal)) = state.imm.pop_front() {
            state.flushed_mems.push((Arc::downgrade(&flushed), wal));
        }
        self.stats.flushes.fetch_add(1, Ordering::Relaxed);
        self.install_view(state);
        self.delete_obsolete_files(state);
        self.work_available.notify_all();
        Ok(())
    }

    /// Writes `mem` to table `number`; `None` if it held nothing. The table and the directory
    /// entry are durable when this returns.
    pub(crate) fn write_level0_table(
        &self,
        mem: &Arc<MemTable>,
        number: u64,
        blobs: &mut BlobTally,
    ) -> Result<Option<FileMetaData>> {
        if mem.is_empty() {
            return Ok(None);
        }
        let mut iter = mem.iter();
        iter.seek_to_first();
        // A table of a memtable holds at most its entries' user keys.
        let meta = build_table(
            &self.dir,
            &self.options,
            number,
            &mut iter,
            mem.len(),
            blobs,
        )?;
        if meta.is_some() {
            // The blob files the table references were sealed with their WAL, maybe unsynced
            // (`switch_memtable`): the table must not outlive their bytes. The directory sync
            // below covers their entries too.
            for &blob in blobs.keys() {
                self.options
                    .fs
                    .sync_file(&crate::filename::blob_file_name(&self.dir, blob))?;
            }
            self.options.fs.sync_dir(&self.dir)?;
        }
        Ok(meta)
    }

    /// Removes tables, WALs and manifests no live version needs.
    ///
    /// The files are chosen with `state` held and unlinked with it released: unlinking a table
    /// drops its pages from the page cache, about a millisecond for a 4 MiB table (80 ms over
    /// a 1M-key fillrandom and overwrite, by `strace`), and every writer takes the mutex to
    /// queue its write. A chosen file never becomes live again (file numbers are never reused),
    /// and while it is being unlinked no other cleanup chooses it or keeps it as a WAL to reuse
    /// (`DbState::deleting`).
    pub(crate) fn delete_obsolete_files(&self, state: &mut MutexGuard<'_, DbState>) {
        let doomed = self.choose_obsolete_files(state);
        if doomed.names.is_empty() {
            return;
        }
        // The job that called this has installed its version: writers waiting for it (a
        // flushed memtable's slot, a shallower level 0) need not wait for the unlinking too.
        self.background_done.notify_all();
        let Doomed {
            names,
            tables,
            blobs,
        } = doomed;
        // Caught, so that the names leave `deleting` however the unlinking ends: a name left
        // there would hold up every later `compact_range` and `wait_for_compactions`.
        let unlinked = MutexGuard::unlocked(state, || {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                // The caches' handles go first: the last reference to a table unmaps it.
                drop(tables);
                drop(blobs);
                for name in &names {
                    let path = self.dir.join(name);
                    match self.options.fs.remove(&path) {
                        Ok(()) => {}
                        // A job releasing an output it failed to finish may unlink it too.
                        Err(e) if e.is_not_found() => {}
                        Err(e) => {
                            tracing::warn!(file = %path.display(), %e, "cannot delete obsolete file")
                        }
                    }
                }
            }))
        });
        for name in &names {
            state.deleting.remove(name);
        }
        // For `compact_range` and `wait_for_compactions`, which return with no unlink in flight.
        self.background_done.notify_all();
        if let Err(panic) = unlinked {
            std::panic::resume_unwind(panic);
        }
    }

    /// The files no live version, job or reader needs and no other cleanup is deleting, marked
    /// as being deleted and dropped from the table and blob caches. REQUIRES: `state` held.
    fn choose_obsolete_files(&self, state: &mut DbState) -> Doomed {
        let mut doomed = Doomed::default();
        if state.bg_error.is_some() {
            // After a failure, what is live on disk is uncertain: delete nothing.
            return doomed;
        }
        let mut live = state.versions.live_files();
        live.extend(state.pending_outputs.iter().copied());
        // A blob file is live while a version names it, while it is being written by a job, or
        // while a memtable of its WAL (same number) is: unflushed (the WAL is live), or flushed
        // but held by a reader.
        let mut live_blobs = state.versions.live_blob_files();
        live_blobs.extend(state.pending_outputs.iter().copied());
        state.flushed_mems.retain(|(mem, _)| mem.strong_count() > 0);
        live_blobs.extend(state.flushed_mems.iter().map(|&(_, wal)| wal));
        let log_number = state.versions.log_number();
        let manifest_number = state.versions.manifest_number();
        let names = match self.options.fs.list(&self.dir) {
            Ok(names) => names,
            Err(e) => {
                tracing::warn!(%e, "cannot list database directory for obsolete files");
                return doomed;
            }
        };
        for name in names {
            if state.deleting.contains(&name) {
                continue;
            }
            if let Some(FileType::Wal(n)) = parse_file_name(&name) {
                if n < log_number && self.keep_for_reuse(state, n) {
                    continue;
                }
            }
            let obsolete = match parse_file_name(&name) {
                Some(FileType::Wal(n)) => n < log_number,
                Some(FileType::Manifest(n)) => n < manifest_number,
                Some(FileType::Table(n)) => !live.contains(&n),
                Some(FileType::Blob(n)) => n < log_number && !live_blobs.contains(&n),
                _ => false,
            };
            if !obsolete {
                continue;
            }
            match parse_file_name(&name) {
                Some(FileType::Table(n)) => doomed.tables.extend(self.table_cache.evict(n)),
                Some(FileType::Blob(n)) => doomed.blobs.extend(self.blob_cache.evict(n)),
                _ => {}
            }
            state.deleting.insert(name.clone());
            doomed.names.push(name);
        }
        doomed
    }

    /// Whether the finished WAL `number` is (now) kept to be written over by a later WAL
    /// instead of deleted: one this process created, while the pool has room.
    fn keep_for_reuse(&self, state: &mut DbState, number: u64) -> bool {
        if state.recyclable_wals.contains(&number) {
            return true;
        }
        if number < state.first_own_wal
            || state.reclaiming > 0
            || state.recyclable_wals.len() >= self.options.recycle_log_file_num
        {
            return false;
        }
        state.recyclable_wals.push(number);
        true
    }

    /// Compacts `[begin, end]` level by level, after flushing the memtable; then rewrites the
    /// deepest level holding the range in place if that can change it (see
    /// [`DbInner::rewrite_deepest_level`]).
    pub(crate) fn compact_range(&self, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        if self.read_only {
            return Err(Error::InvalidArgument("database is open read-only".into()));
        }
        // No WAL file is kept or reused while the compaction runs (the flush's new WAL would
        // otherwise be a kept file, its old blocks allocated), so none is left after it.
        self.state.lock().reclaiming += 1;
        // Caught so the count comes down however it ends (a user's comparator may panic in
        // it); the panic then goes on to the caller.
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.delete_kept_wals();
            self.compact_range_reclaiming(begin, end)
        }));
        let mut state = self.state.lock();
        state.reclaiming -= 1;
        let result = match result {
            Ok(result) => result,
            Err(panic) => {
                drop(state);
                std::panic::resume_unwind(panic);
            }
        };
        // What the compaction made obsolete is gone when it returns, even where a background
        // job chose it and is unlinking it with the mutex released. Only the unlinks in flight
        // now are waited for: later ones, under steady writes, could go on without end.
        let in_flight: Vec<String> = state.deleting.iter().cloned().collect();
        while in_flight.iter().any(|name| state.deleting.contains(name)) {
            self.background_done.wait(&mut state);
        }
        result
    }

    /// [`DbInner::compact_range`] while no WAL file is kept for reuse.
    fn compact_range_reclaiming(&self, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        self.flush()?;
        let deepest = {
            let view = self.current_view();
            (0..crate::limits::NUM_LEVELS)
                .rev()
                .find(|&l| !view.version.overlapping_files(l, begin, end).is_empty())
        };
        let Some(deepest) = deepest else {
            return Ok(());
        };
        for level in 0..deepest.max(1) {
            self.manual_compaction(|versions| versions.compact_range(level, begin, end))?;
        }
        self.rewrite_deepest_level(begin, end)
    }

    /// Deletes the WAL files kept for reuse: a manual compaction is a request to reclaim space,
    /// and each kept file holds about a memtable's worth of disk until the next memtable
    /// switch writes over it, and then as long as it is the active WAL (its old blocks stay
    /// allocated).
    fn delete_kept_wals(&self) {
        let mut state = self.state.lock();
        // Under the mutex, so no switch takes one of them and no cleanup pools them again.
        for number in std::mem::take(&mut state.recyclable_wals) {
            let path = wal_file_name(&self.dir, number);
            if let Err(e) = self.options.fs.remove(&path) {
                tracing::warn!(file = %path.display(), %e, "cannot delete a WAL file kept for reuse");
            }
        }
    }

    /// Compacting each level into the next never rewrites the deepest level holding the range,
    /// so its tables would keep expired entries, and a compaction filter would never see them.
    /// When either can change them (a filter is configured, or the tables hold expiring
    /// entries), they are compacted into their own level once.
    fn rewrite_deepest_level(&self, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        let mut done = false;
        self.manual_compaction(|versions| {
            if std::mem::replace(&mut done, true) {
                return None;
            }
            let version = versions.current();
            let level = (1..crate::limits::NUM_LEVELS)
                .rev()
                .find(|&l| !version.overlapping_files(l, begin, end).is_empty())?;
            let worth_it = self.options.compaction_filter.is_some()
                || version
                    .overlapping_files(level, begin, end)
                    .iter()
                    .any(|f| f.max_expiry_micros != 0);
            if !worth_it {
                return None;
            }
            versions.compact_level_in_place(level, begin, end)
        })
    }

    /// Runs the compactions `pick` returns, one at a time, until it returns `None`.
    fn manual_compaction(
        &self,
        mut pick: impl FnMut(&mut VersionSet) -> Option<Compaction>,
    ) -> Result<()> {
        let mut state = self.state.lock();
        state.manual_waiting += 1;
        let result = loop {
            if let Err(e) = Self::check_bg_error(&state) {
                break Err(e);
            }
            if self.shutting_down.load(Ordering::Acquire) {
                break Err(Error::ShuttingDown);
            }
            if state.compaction_running {
                self.background_done.wait(&mut state);
                continue;
            }
            // The pick compares keys (a user's comparator). A panic in it goes on to the
            // caller, as one in its own call would, once this wait is no longer counted.
            let picked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                pick(&mut state.versions)
            }));
            let c = match picked {
                Ok(Some(c)) => c,
                Ok(None) => break Ok(()),
                Err(panic) => {
                    state.manual_waiting -= 1;
                    self.work_available.notify_all();
                    drop(state);
                    std::panic::resume_unwind(panic);
                }
            };
            state.compaction_running = true;
            // The caller waits for a manual compaction, and no background compaction runs
            // meanwhile: its part of the background threads' budget goes to this one too.
            let parts = self
                .options
                .max_subcompactions
                .max(self.options.max_background_jobs);
            let (r, _) = self.run_caught(&mut state, "manual compaction", |state| {
                self.run_compaction(state, c, parts, JobPriority::Normal)
            });
            state.compaction_running = false;
            self.background_done.notify_all();
            if let Err(e) = r {
                if !matches!(e, Error::ShuttingDown) {
                    self.set_bg_error(&mut state, &e);
                }
                break Err(e);
            }
        };
        state.manual_waiting -= 1;
        self.work_available.notify_all();
        result
    }
}

/// The text a panic was raised with (`panic!` gives a `&str` or a `String`).
pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = panic.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = panic.downcast_ref::<String>() {
        text.clone()
    } else {
        "(no message)".to_string()
    }
}

/// Record bytes referenced per blob file, by blob file number.
pub(crate) type BlobTally = std::collections::BTreeMap<u64, u64>;

/// Adds the blob reference an entry holds, if any, to `tally`; returns its blob file number.
pub(crate) fn tally_blob_reference(
    ikey: &[u8],
    value: &[u8],
    tally: &mut BlobTally,
) -> Option<u64> {
    let kind = parse_internal_key(ikey)?.kind;
    let r = blob_ref_of(kind, value)?;
    let bytes = tally.entry(r.file_number).or_default();
    *bytes = bytes.saturating_add(r.length);
    Some(r.file_number)
}

/// Checks table `number` of `dir`, just written, as a read will open it: its footer, and its
/// metaindex, properties, filter and index blocks against their checksums
/// ([`TableReader::verify_file`]). Flushes, compactions, recovery and repair run it on every
/// table they write, before the manifest names it.
///
/// Why: a table that does not read back as it was built (bytes lost or changed between the
/// builder and the file by a layer that reported no error, a size cut wrong when a
/// preallocated tail is trimmed, a builder bug) would otherwise be found only by a later read,
/// after the job that wrote it had deleted the files or the WAL holding the same entries.
/// LevelDB opens every table it writes for the same reason. The check reads what the
/// filesystem serves, normally its cache: damage the device does to the bytes later is left to
/// the checksums every read verifies. The table is not kept open in the table cache: its index
/// and filter would then be resident for every table written, read or not, which the memory
/// budget of a write-only load has no room for (1.1 MiB more at the peak of a 1M-key fill
/// suite).
pub(crate) fn verify_table(fs: &dyn Fs, dir: &std::path::Path, number: u64) -> Result<()> {
    let path = table_file_name(dir, number);
    let file = fs.open_random(&path)?;
    TableReader::verify_file(file.as_ref(), &path)
}

/// Builds table `number` from every entry of `iter` (positioned at its first entry) and checks
/// it ([`verify_table`]). `None` if there was nothing to write (the file is removed). Adds the
/// record bytes of every blob reference written to `blobs`. `max_keys`, a bound on the entries
/// `iter` holds (a memtable's), spares the filter most of its keys' hashes
/// ([`TableBuilder::bound_keys`]).
pub(crate) fn build_table(
    dir: &std::path::Path,
    options: &crate::Options,
    number: u64,
    iter: &mut dyn InternalIterator,
    max_keys: usize,
    blobs: &mut BlobTally,
) -> Result<Option<FileMetaData>> {
    let path = table_file_name(dir, number);
    let file = options.fs.create(&path)?;
    let mut builder = TableBuilder::new(TableOptions::for_flush(options), file, path.clone());
    builder.bound_keys(max_keys);
    let mut oldest_blob = 0u64;
    while iter.valid() {
        if let Some(blob) = tally_blob_reference(iter.key(), iter.value(), blobs) {
            oldest_blob = if oldest_blob == 0 {
                blob
            } else {
                oldest_blob.min(blob)
            };
        }
        builder.add(iter.key(), iter.value())?;
        iter.next();
    }
    iter.status()?;
    if builder.num_entries() == 0 {
        builder.abandon();
        let _ = options.fs.remove(&path);
        return Ok(None);
    }
    let props = builder.finish()?;
    if let Err(e) = verify_table(options.fs.as_ref(), dir, number) {
        // No manifest names it: nothing else will remove it before the next open.
        let _ = options.fs.remove(&path);
        return Err(e);
    }
    let mut meta = meta_from_properties(number, &props);
    meta.oldest_blob_file = oldest_blob;
    Ok(Some(meta))
}

pub(crate) fn meta_from_properties(
    number: u64,
    props: &crate::sstable::TableProperties,
) -> FileMetaData {
    FileMetaData {
        number,
        file_size: props.file_size,
        smallest: props.smallest_key.clone(),
        largest: props.largest_key.clone(),
        smallest_seqno: props.smallest_seqno,
        largest_seqno: props.largest_seqno,
        num_entries: props.num_entries,
        num_deletions: props.num_deletions,
        max_expiry_micros: props.max_expiry_micros,
        has_permanent_entries: props.num_expiring < props.num_entries,
        oldest_blob_file: 0,
    }
}
