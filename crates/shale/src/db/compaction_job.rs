//! Runs one compaction: merges the input tables, keeps exactly the entries some reader can
//! still see, combines merge operands, drops expired values and what the compaction filter
//! removes, and writes the result as new tables of the output level.
//!
//! Per user key, the entries (newest first) are cut into *stripes* by the live snapshots: a
//! stripe holds the entries a given snapshot sees and the next older snapshot does not, and the
//! newest stripe holds those only reads without a snapshot see. In each stripe only the newest
//! entry is visible to anyone, so each stripe is reduced to (at most) that entry:
//! - a deletion is kept, unless nothing older of the key is written by this job and no deeper
//!   level can hold the key;
//! - a value that has expired (`expiry <= now`, `now` read once when the job starts) is
//!   removed: it becomes a deletion with the same sequence number when something older must stay
//!   hidden (an expired value reads as a deletion, so no reader can tell), and disappears
//!   otherwise;
//! - in the newest stripe only, the compaction filter judges the value (`Keep`, `Remove`, handled
//!   like an expired value, or `ChangeValue`, which keeps the expiry): no snapshot reads it, so
//!   the filter never changes what a snapshot sees;
//! - merge operands are folded onto the first full entry below them, through older stripes if
//!   need be, when that entry is a value, a deletion, an expired value, or nothing at all because
//!   no deeper level can hold the key; the result is a plain value (a merge never inherits or
//!   renews an expiry). Otherwise (a live expiring base, a base possibly in a deeper level, an
//!   operator error, or a result over `MAX_VALUE_BYTES`) the stripe's operands are kept,
//!   combined into one by `partial_merge` when the operator can (and its result is within the
//!   limit), with their base if it is in the stripe: nothing is lost, and reads report an
//!   operator error themselves. A filter's `ChangeValue` over the limit keeps the old value.
//!
//! The oldest entry written for a key keeps its sequence number only while it can matter: a
//! value that every live snapshot sees, in the bottommost level for its key, is written with
//! sequence number 0 (see [`zero_bottommost_sequence`]).
//!
//! Because every expired value is removed, no output table consists only of expired entries,
//! so an expiry compaction never picks its own output again.
//!
//! Blob references (`BlobIndex`, `ExpiringBlobIndex`) are handled like the values they stand
//! for, and copied as references: a value is read from its blob file only when the compaction
//! filter must judge it or a merge must fold onto it. Every input reference no output keeps is
//! counted as garbage of its blob file in the job's edit. References into a blob file whose
//! garbage ratio has reached `blob_garbage_collection_threshold` (in the input version) are
//! relocated: the value is copied to a new blob file the job writes, and the output keeps a
//! reference to the copy, for every entry kept, including those kept for snapshots.
//!
//! Thread-safety: the job merges with the database mutex released (taking it briefly for each
//! new file number), on the background thread that picked it or, at low priority, on a thread
//! of its own that thread waits for and finishes the merge for if it must be raised
//! ([`DbInner::merge_at`]); a split job's parts run on threads of their own. The inputs are
//! pinned by the compaction's input version.

use std::cmp::Ordering as CmpOrdering;
use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use parking_lot::MutexGuard;

use std::borrow::Cow;

use super::background::{meta_from_properties, verify_table, BlobTally};
use super::{DbInner, DbState};
use crate::batch::blob_ref_of;
use crate::blob::{BlobFileWriter, BlobRef};
use crate::compaction::Compaction;
use crate::error::{Error, Result};
use crate::filename::{blob_file_name, table_file_name};
use crate::iter::{
    split_expiring, InternalIterator, LevelIterator, LevelSource, MergingIterator,
    EXPIRY_PREFIX_LEN,
};
use crate::key::{
    append_internal_key, make_internal_key, parse_internal_key, SequenceNumber, ValueKind,
    MAX_SEQUENCE, TRAILER_LEN,
};
use crate::limits::MAX_VALUE_BYTES;
use crate::sstable::{ReadFlags, TableBuilder, TableOptions, TableReader};
use crate::table_cache::TableCache;
use crate::ttl::FilterDecision;
use crate::version::{FileMetaData, VersionEdit};

/// One entry of the key being assembled.
struct Entry {
    sequence: SequenceNumber,
    kind: ValueKind,
    value: Vec<u8>,
}

/// What compaction decided to write for one user key, newest first. A value kept as it was
/// read borrows the input entry's bytes; only a merged, filtered, relocated or rewritten value
/// is owned.
type Output<'a> = Vec<(SequenceNumber, ValueKind, Cow<'a, [u8]>)>;

/// The user keys one part of a split compaction writes: from the first (inclusive) to the
/// second (exclusive), `None` for no bound.
type KeyBounds<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);

/// Input entry buffers of a larger capacity are freed after their key instead of being kept
/// for the next one: a rare huge value should not stay allocated for the rest of the job.
const MAX_KEPT_ENTRY_BYTES: usize = 64 * 1024;

/// What a compaction job produced, for its manifest edit.
struct JobOutput {
    tables: Vec<FileMetaData>,
    /// Blob bytes no output references any more, by blob file.
    blob_garbage: BlobTally,
    /// The blob files the job relocated values into (one per part at most), with their record
    /// bytes.
    new_blobs: Vec<(u64, u64)>,
}

impl JobOutput {
    /// Every file the job wrote: its tables and its blob files.
    fn file_numbers(&self) -> impl Iterator<Item = u64> + '_ {
        self.tables
            .iter()
            .map(|f| f.number)
            .chain(self.new_blobs.iter().map(|&(n, _)| n))
    }
}

/// The table being written, with the lowest blob file number its entries reference (0: none).
struct OpenOutput {
    number: u64,
    builder: TableBuilder,
    oldest_blob: u64,
}

impl OpenOutput {
    fn finish(self) -> Result<FileMetaData> {
        let mut meta = meta_from_properties(self.number, &self.builder.finish()?);
        meta.oldest_blob_file = self.oldest_blob;
        Ok(meta)
    }
}

/// The metadata of output table `number` that was not finished: only its number counts, so
/// that a failed job's cleanup removes its file with the others.
fn unfinished_output(number: u64) -> FileMetaData {
    FileMetaData {
        number,
        file_size: 0,
        smallest: Vec::new(),
        largest: Vec::new(),
        smallest_seqno: 0,
        largest_seqno: 0,
        num_entries: 0,
        num_deletions: 0,
        max_expiry_micros: 0,
        has_permanent_entries: true,
        oldest_blob_file: 0,
    }
}

/// The CPU priority a compaction merges its inputs at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JobPriority {
    /// On the calling thread, at its priority.
    Normal,
    /// Begun on a thread of its own at the lowest CPU priority, where the platform can lower
    /// one thread's ([`crate::Options::low_priority_compactions`]); the calling thread waits,
    /// and finishes the merge itself if it must be raised ([`DbInner::merge_at`]).
    Low,
}

/// Whether one thread's CPU priority can be lowered here (Linux, where the nice value is per
/// thread; not under Miri, which lacks `setpriority`).
const CAN_LOWER_THREAD_PRIORITY: bool = cfg!(all(target_os = "linux", not(miri)));

/// The nice value of a [`JobPriority::Low`] job's thread: the lowest priority, as RocksDB's
/// `CpuPriority::kLow`.
#[cfg(all(target_os = "linux", not(miri)))]
const LOW_PRIORITY_NICE: libc::c_int = 19;

/// Lowers the calling thread's CPU priority to the lowest, where the platform has per-thread
/// priorities (Linux; elsewhere a no-op). Once lowered, an unprivileged thread may not raise it
/// again, hence a thread of its own for each merge.
fn lower_thread_priority() {
    #[cfg(all(target_os = "linux", not(miri)))]
    {
        // SAFETY: setpriority takes no pointers. On Linux, `PRIO_PROCESS` with `who == 0`
        // names the calling thread alone (the nice value is per thread there).
        let failed = unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, LOW_PRIORITY_NICE) } != 0;
        if failed {
            // The job then runs at normal priority, as with the option off.
            tracing::debug!(
                error = %std::io::Error::last_os_error(),
                "could not lower a compaction thread's CPU priority"
            );
        }
    }
}

/// Runs `work` on a thread of its own at the lowest CPU priority, which this thread waits for
/// (and whose panic it resumes). `None` if that thread could not be started: `work` did not
/// run.
fn run_low<T: Send>(work: impl FnOnce() -> T + Send) -> Option<T> {
    std::thread::scope(|scope| {
        let thread = std::thread::Builder::new()
            .name("shale-compact".into())
            .spawn_scoped(scope, || {
                lower_thread_priority();
                work()
            });
        match thread {
            Ok(handle) => match handle.join() {
                Ok(out) => Some(out),
                Err(panic) => std::panic::resume_unwind(panic),
            },
            Err(e) => {
                tracing::debug!(error = %e, "could not start a low-priority compaction thread");
                None
            }
        }
    })
}

/// Writes queued behind as many other writers as there are cores, less one, during a
/// low-priority merge, that make it finish at normal priority ([`DbInner::merge_at`]): enough
/// that several threads are writing at once, not one brief overlap.
const CROWDED_WRITES_TO_RAISE: u64 = 64;

/// Where [`DbInner::merge_keys`] stopped.
enum Progress {
    /// The inputs (or the part's keys) are merged.
    Done,
    /// Asked to pause, before a user key; the merge goes on from there.
    Paused,
}

/// A merge in progress: the inputs' cursor and everything written so far. Kept apart from
/// the code that advances it, so that a merge begun on one thread can be finished on another.
struct Merge {
    input: MergingIterator,
    /// The first user key the job does not write (a part's end), if any.
    end: Option<Vec<u8>>,
    outputs: Vec<FileMetaData>,
    builder: Option<OpenOutput>,
    key_buf: Vec<u8>,
    /// The newest internal key of the user key being assembled, and the key's entries: the
    /// first `n` slots of `entries`. All are reused from key to key, so a key costs no
    /// allocation for its inputs (before, three per key: most of a compaction's allocator
    /// time).
    first: Vec<u8>,
    entries: Vec<Entry>,
    /// The allocation of the previous key's output, for the next key's.
    spare_out: Output<'static>,
    blob_garbage: BlobTally,
    /// Blob files whose values are relocated ([`crate::version::Version::blob_files_due_for_collection`]).
    collect: HashSet<u64>,
    relocation: Option<BlobFileWriter>,
}

impl DbInner {
    /// Runs `c`, split into at most `max_parts` parts that run at once, and installs its
    /// result. Called with `state` held; releases it for the I/O. The merge (all but the
    /// manifest edit and the view's install) runs at `priority`.
    pub(crate) fn run_compaction(
        &self,
        state: &mut MutexGuard<'_, DbState>,
        mut c: Compaction,
        max_parts: usize,
        priority: JobPriority,
    ) -> Result<()> {
        let start = Instant::now();
        let output_level = c.output_level();
        if c.is_trivial_move() {
            let mut edit = VersionEdit::default();
            let file = c.inputs[0][0].clone();
            edit.delete_file(c.level, file.number);
            edit.add_file(output_level, (*file).clone());
            state.versions.log_and_apply(edit)?;
            self.stats.trivial_moves.fetch_add(1, Ordering::Relaxed);
            self.install_view(state);
            return Ok(());
        }
        let job = JobContext {
            snapshots: self.snapshots.sequences(),
            now: self.options.clock.now_micros(),
        };
        let input_bytes = c.total_input_bytes();
        let points = c.split_points(max_parts);
        let outcome = MutexGuard::unlocked(state, || {
            if points.is_empty() {
                self.compact_inputs(&mut c, &job, priority)
            } else {
                self.compact_parts(&c, &points, &job, priority)
            }
        });
        let mut outputs_numbers: Vec<u64> = Vec::new();
        let result = outcome.and_then(|job_output| {
            outputs_numbers = job_output.file_numbers().collect();
            let JobOutput {
                tables: outputs,
                blob_garbage,
                new_blobs,
            } = job_output;
            let mut edit = VersionEdit::default();
            c.add_input_deletions(&mut edit);
            let written: u64 = outputs.iter().map(|f| f.file_size).sum();
            for f in outputs {
                edit.add_file(output_level, f);
            }
            for (number, bytes) in new_blobs {
                edit.add_blob_bytes(number, bytes);
            }
            for (number, bytes) in blob_garbage {
                edit.add_blob_garbage(number, bytes);
            }
            state.versions.log_and_apply(edit)?;
            let counters = &self.stats.per_level[output_level];
            counters.compactions.fetch_add(1, Ordering::Relaxed);
            counters
                .bytes_read
                .fetch_add(input_bytes, Ordering::Relaxed);
            counters.bytes_written.fetch_add(written, Ordering::Relaxed);
            counters
                .micros
                .fetch_add(start.elapsed().as_micros() as u64, Ordering::Relaxed);
            self.stats.compactions.fetch_add(1, Ordering::Relaxed);
            if !points.is_empty() {
                self.stats.split_compactions.fetch_add(1, Ordering::Relaxed);
            }
            Ok(())
        });
        for n in &outputs_numbers {
            state.pending_outputs.remove(n);
        }
        // Outputs are never removed here on failure: when the manifest write failed, its edit may
        // still have reached the disk, and then they are live. The next open deletes them if not.
        result?;
        // The compaction pins its input version, whose tables are exactly the ones now
        // obsolete: release it before looking for files to delete.
        drop(c);
        self.install_view(state);
        self.delete_obsolete_files(state);
        Ok(())
    }

    /// Finishes output `o` and checks that the table reads back as it was built
    /// ([`verify_table`]), adding it to `outputs` (on failure too, so that the job's cleanup
    /// removes it): a table that does not fails the job before the manifest names it and the
    /// inputs holding the same entries are deleted.
    fn finish_output(&self, o: OpenOutput, outputs: &mut Vec<FileMetaData>) -> Result<()> {
        let number = o.number;
        match o.finish() {
            Ok(meta) => {
                outputs.push(meta);
                verify_table(self.options.fs.as_ref(), &self.dir, number)
            }
            Err(e) => {
                outputs.push(unfinished_output(number));
                Err(e)
            }
        }
    }

    /// Gives back output `number`, which nothing names, and removes its file at `path`.
    fn release_output(&self, number: u64, path: &std::path::Path) {
        self.state.lock().pending_outputs.remove(&number);
        let _ = self.options.fs.remove(path);
    }

    fn new_output_number(&self) -> u64 {
        let mut state = self.state.lock();
        let n = state.versions.new_file_number();
        state.pending_outputs.insert(n);
        n
    }

    /// Runs `c` in parts split at `points` (see [`Compaction::split_points`]), each on its own
    /// thread (the first on this one), and joins their outputs in key order. If any part fails,
    /// the files every other part wrote are removed too, and the first failure is returned.
    /// Runs without the state lock.
    fn compact_parts(
        &self,
        c: &Compaction,
        points: &[Vec<u8>],
        job: &JobContext,
        priority: JobPriority,
    ) -> Result<JobOutput> {
        let bounds: Vec<KeyBounds<'_>> = std::iter::once(None)
            .chain(points.iter().map(|p| Some(p.as_slice())))
            .zip(
                points
                    .iter()
                    .map(|p| Some(p.as_slice()))
                    .chain(std::iter::once(None)),
            )
            .collect();
        let run = |(start, end): KeyBounds<'_>| {
            self.compact_inputs(&mut c.part(start, end), job, priority)
        };
        let results: Vec<Result<JobOutput>> = std::thread::scope(|scope| {
            let mut spawned = Vec::new();
            for &range in bounds.iter().skip(1) {
                let thread = std::thread::Builder::new().name("shale-subcomp".into());
                match thread.spawn_scoped(scope, move || run(range)) {
                    Ok(handle) => spawned.push((range, Some(handle))),
                    Err(e) => {
                        tracing::warn!(%e, "no thread for a subcompaction; running its part here");
                        spawned.push((range, None));
                    }
                }
            }
            let mut results = Vec::with_capacity(bounds.len());
            results.extend(bounds.first().map(|&range| run(range)));
            for (range, handle) in spawned {
                results.push(match handle {
                    Some(h) => h.join().unwrap_or_else(|panic| {
                        Err(Error::Panicked {
                            job: "subcompaction",
                            message: super::background::panic_message(panic.as_ref()),
                        })
                    }),
                    None => run(range),
                });
            }
            results
        });
        let mut failure: Option<Error> = None;
        let mut done: Vec<JobOutput> = Vec::new();
        for result in results {
            match result {
                Ok(out) => done.push(out),
                Err(e) => {
                    // A shutdown stops every part; report a real failure over it.
                    let replace = match &failure {
                        None => true,
                        Some(f) => {
                            matches!(f, Error::ShuttingDown) && !matches!(e, Error::ShuttingDown)
                        }
                    };
                    if replace {
                        failure = Some(e);
                    }
                }
            }
        }
        if let Some(e) = failure {
            let mut state = self.state.lock();
            for out in &done {
                let tables = out
                    .tables
                    .iter()
                    .map(|f| table_file_name(&self.dir, f.number));
                let blobs = out
                    .new_blobs
                    .iter()
                    .map(|&(n, _)| blob_file_name(&self.dir, n));
                for path in tables.chain(blobs) {
                    let _ = self.options.fs.remove(&path);
                }
                for n in out.file_numbers() {
                    state.pending_outputs.remove(&n);
                }
            }
            return Err(e);
        }
        let mut joined = JobOutput {
            tables: Vec::new(),
            blob_garbage: BlobTally::new(),
            new_blobs: Vec::new(),
        };
        for out in done {
            joined.tables.extend(out.tables);
            joined.new_blobs.extend(out.new_blobs);
            for (number, bytes) in out.blob_garbage {
                let total = joined.blob_garbage.entry(number).or_default();
                *total = total.saturating_add(bytes);
            }
        }
        Ok(joined)
    }

    /// Merges the inputs into new tables: the user keys within [`Compaction::key_bounds`] of
    /// the inputs, at `priority` (see [`DbInner::merge_at`]). Runs without the state lock.
    fn compact_inputs(
        &self,
        c: &mut Compaction,
        job: &JobContext,
        priority: JobPriority,
    ) -> Result<JobOutput> {
        // Inputs are read once, front to back: they neither enter the block cache nor stay
        // mapped in this process (without release, a 1M-key overwrite's compactions took the
        // resident set from 68 to 119 MB).
        let flags = ReadFlags {
            verify_checksums: true,
            fill_cache: false,
            release_behind: true,
        };
        let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
        for (which, files) in c.inputs.iter().enumerate() {
            if c.level + which == 0 {
                for f in files {
                    children.push(self.table_cache.iter(f.number, flags));
                }
            } else if !files.is_empty() {
                children.push(Box::new(LevelIterator::new(
                    self.icmp.clone(),
                    InputLevel {
                        files: files.clone(),
                        table_cache: self.table_cache.clone(),
                    },
                    flags,
                )));
            }
        }
        let mut input = MergingIterator::new(self.icmp.clone(), children);
        let (start, end) = c.key_bounds();
        let end = end.map(<[u8]>::to_vec);
        match start {
            Some(start) => input.seek(&make_internal_key(start, MAX_SEQUENCE, ValueKind::FOR_SEEK)),
            None => input.seek_to_first(),
        }

        let mut m = Merge {
            input,
            end,
            outputs: Vec::new(),
            builder: None,
            key_buf: Vec::new(),
            first: Vec::new(),
            entries: Vec::new(),
            spare_out: Vec::new(),
            blob_garbage: BlobTally::new(),
            collect: c
                .input_version
                .blob_files_due_for_collection(self.options.blob_garbage_collection_threshold),
            relocation: None,
        };
        let result = self.merge_at(priority, &mut m, c, job);
        let Merge {
            mut outputs,
            mut builder,
            blob_garbage,
            mut relocation,
            ..
        } = m;
        match result {
            Ok(new_blob) => Ok(JobOutput {
                tables: outputs,
                blob_garbage,
                new_blobs: new_blob.into_iter().collect(),
            }),
            Err(e) => {
                if let Some(w) = relocation.take() {
                    self.release_output(w.number(), w.path());
                }
                if let Some(OpenOutput {
                    number, builder: b, ..
                }) = builder.take()
                {
                    b.abandon();
                    outputs.push(unfinished_output(number));
                }
                let mut state = self.state.lock();
                for f in &outputs {
                    state.pending_outputs.remove(&f.number);
                    let _ = self
                        .options
                        .fs
                        .remove(&table_file_name(&self.dir, f.number));
                }
                Err(e)
            }
        }
    }

    /// Runs [`DbInner::merge_keys`] over `m` to the end at `priority`, then finishes it
    /// ([`DbInner::finish_merge`]), whose result it returns.
    ///
    /// At [`JobPriority::Low`] the merge starts on a thread of its own at the lowest CPU
    /// priority, which also finishes it. That thread stops before its next user key once the
    /// merge is needed sooner than spare CPU would finish it, and this one, at its own
    /// priority, takes the merge over where it stopped:
    /// - when level 0 reaches `level0_slowdown_writes_trigger`: writers are being slowed for
    ///   want of compaction (a merge into a deeper level is raised too, as one picked then runs
    ///   at normal priority: it holds the compaction slot level 0's would take);
    /// - when [`CROWDED_WRITES_TO_RAISE`] writes have queued behind as many other writers as
    ///   there are cores, less one: writer threads alone keep every core busy, and a merge at
    ///   nice 19 would get almost no CPU until level 0 slowed them.
    ///
    /// Why: with two writer threads on two cores, a merge kept at nice 19 fell behind until
    /// level 0 reached the slowdown trigger; overwriting 1M keys then slowed about 500 writes
    /// instead of 0 to 140 (`docs/benchmarks.md`, "Changes of the last sessions").
    fn merge_at(
        &self,
        priority: JobPriority,
        m: &mut Merge,
        c: &mut Compaction,
        job: &JobContext,
    ) -> Result<Option<(u64, u64)>> {
        if priority == JobPriority::Low && CAN_LOWER_THREAD_PRIORITY {
            let crowded_before = self.crowded_writes.load(Ordering::Relaxed);
            // Level 0 is read from the readers' view, which every version change updates,
            // so the check takes no lock.
            let needed_sooner = || {
                self.crowded_writes.load(Ordering::Relaxed) - crowded_before
                    >= CROWDED_WRITES_TO_RAISE
                    || self.level0_slows_writes(&self.view.load().version)
            };
            let low = run_low(|| match self.merge_keys(m, c, job, &needed_sooner) {
                Ok(Progress::Done) => Some(self.finish_merge(m)),
                Ok(Progress::Paused) => None,
                Err(e) => Some(Err(e)),
            });
            match low {
                Some(Some(finished)) => return finished,
                Some(None) => {
                    self.stats
                        .compactions_raised
                        .fetch_add(1, Ordering::Relaxed);
                }
                None => {}
            }
        }
        self.merge_keys(m, c, job, &|| false)?;
        self.finish_merge(m)
    }

    /// Completes a merge that ran to its end: closes its relocation blob file and its last
    /// table, each synced, then syncs the directory. Returns the blob file's number and record
    /// bytes, if it wrote one. On failure the caller removes what `m` names.
    fn finish_merge(&self, m: &mut Merge) -> Result<Option<(u64, u64)>> {
        // The relocated values must be durable before the edit naming their new home.
        let new_blob = match m.relocation.as_mut() {
            Some(w) => {
                w.flush()?;
                w.sync(self.options.fs.as_ref())?;
                w.close()?;
                Some((w.number(), w.record_bytes()))
            }
            None => None,
        };
        if let Some(o) = m.builder.take() {
            self.finish_output(o, &mut m.outputs)?;
        }
        if !m.outputs.is_empty() {
            self.options.fs.sync_dir(&self.dir)?;
        }
        Ok(new_blob)
    }

    /// Merges user keys from where `m` stands until the inputs or the part's keys end, or
    /// until `pause`, asked before each user key, says to stop. Runs without the state lock.
    fn merge_keys(
        &self,
        m: &mut Merge,
        c: &mut Compaction,
        job: &JobContext,
        pause: &(dyn Fn() -> bool + Sync),
    ) -> Result<Progress> {
        let Merge {
            input,
            end,
            outputs,
            builder,
            key_buf,
            first,
            entries,
            spare_out,
            blob_garbage,
            collect,
            relocation,
        } = m;
        while input.valid() {
            if self.shutting_down.load(Ordering::Acquire) {
                return Err(Error::ShuttingDown);
            }
            if pause() {
                return Ok(Progress::Paused);
            }
            // Gather every entry of the next user key.
            first.clear();
            first.extend_from_slice(input.key());
            if parse_internal_key(first).is_none() {
                return Err(Error::corruption(
                    "<compaction>",
                    0,
                    format!("malformed internal key {first:?}"),
                ));
            }
            let user_key = &first[..first.len() - TRAILER_LEN];
            if end
                .as_deref()
                .is_some_and(|end| self.icmp.compare_user(user_key, end) != CmpOrdering::Less)
            {
                break; // the next part's keys
            }
            let mut n = 0;
            while input.valid() {
                let p = parse_internal_key(input.key()).ok_or_else(|| {
                    Error::corruption("<compaction>", 0, "malformed internal key")
                })?;
                if self.icmp.compare_user(p.user_key, user_key) != CmpOrdering::Equal {
                    break;
                }
                if n == entries.len() {
                    entries.push(Entry {
                        sequence: 0,
                        kind: ValueKind::Value,
                        value: Vec::new(),
                    });
                }
                let slot = &mut entries[n];
                slot.sequence = p.sequence;
                slot.kind = p.kind;
                slot.value.clear();
                slot.value.extend_from_slice(input.value());
                n += 1;
                input.next();
            }
            input.status()?;
            let key_entries = &entries[..n];
            let mut out = recycle_output(std::mem::take(spare_out));
            self.resolve_key(c, job, user_key, key_entries, &mut out)?;
            count_blob_garbage(key_entries, &out, blob_garbage);
            if !collect.is_empty() {
                self.relocate_blobs(user_key, &mut out, collect, relocation, blob_garbage)?;
            }
            if out.is_empty() {
                *spare_out = recycle_output(out);
                release_large_entries(&mut entries[..n]);
                continue;
            }
            zero_bottommost_sequence(c, job, user_key, &mut out);
            // Cut files only between user keys, so no key's versions straddle two files.
            let cut = match builder.as_ref() {
                Some(o) => {
                    o.builder.file_size() >= c.max_output_file_size || c.should_stop_before(first)
                }
                None => {
                    c.should_stop_before(first);
                    false
                }
            };
            if cut {
                if let Some(o) = builder.take() {
                    self.finish_output(o, outputs)?;
                }
            }
            if builder.is_none() {
                let number = self.new_output_number();
                let path = table_file_name(&self.dir, number);
                let file = match self.options.fs.create(&path) {
                    Ok(mut file) => {
                        if c.output_level() >= HUGE_PAGE_MIN_LEVEL {
                            file.prefer_huge_pages();
                        }
                        file
                    }
                    Err(e) => {
                        // The cleanup below releases its number (and any file made).
                        outputs.push(unfinished_output(number));
                        return Err(e);
                    }
                };
                *builder = Some(OpenOutput {
                    number,
                    builder: TableBuilder::new(
                        TableOptions::from_options(&self.options),
                        file,
                        path,
                    ),
                    oldest_blob: 0,
                });
            }
            if let Some(o) = builder.as_mut() {
                for (seq, kind, value) in out.drain(..) {
                    if let Some(r) = blob_ref_of(kind, &value) {
                        if o.oldest_blob == 0 || r.file_number < o.oldest_blob {
                            o.oldest_blob = r.file_number;
                        }
                    }
                    key_buf.clear();
                    append_internal_key(key_buf, user_key, seq, kind);
                    o.builder.add(key_buf, &value)?;
                }
            }
            *spare_out = recycle_output(out);
            release_large_entries(&mut entries[..n]);
        }
        input.status()?;
        Ok(Progress::Done)
    }

    /// Decides what to write for one user key. `entries` are newest first. See the module docs
    /// for the rules; they are applied stripe by stripe, newest stripe first.
    /// Appends to `out`, which the caller passes empty.
    fn resolve_key<'a>(
        &self,
        c: &mut Compaction,
        job: &JobContext,
        user_key: &[u8],
        entries: &'a [Entry],
        out: &mut Output<'a>,
    ) -> Result<()> {
        let mut i = 0;
        while let Some(first) = entries.get(i) {
            let stripe = job.stripe_of(first.sequence);
            let end = i + entries[i..]
                .iter()
                .take_while(|e| job.stripe_of(e.sequence) == stripe)
                .count();
            let place = Placement {
                // Nobody but the latest readers sees the newest stripe.
                unseen_by_snapshots: stripe == job.snapshots.len(),
                // Older entries of the key are written too (for snapshots), or may live deeper:
                // dropping this stripe's entry outright would uncover them.
                must_hide_older: end < entries.len() || !c.is_base_level_for_key(user_key),
            };
            match first.kind {
                ValueKind::Deletion => {
                    if place.must_hide_older {
                        out.push((first.sequence, ValueKind::Deletion, Cow::Borrowed(&[])));
                    }
                }
                ValueKind::Value
                | ValueKind::ExpiringValue
                | ValueKind::BlobIndex
                | ValueKind::ExpiringBlobIndex => {
                    let value = EntryValue {
                        sequence: first.sequence,
                        kind: first.kind,
                        stored: Cow::Borrowed(&first.value),
                    };
                    self.emit_value(c, job, user_key, value, place, out)?;
                }
                ValueKind::Merge => {
                    self.resolve_merge(c, job, user_key, &entries[i..], end - i, place, out)?
                }
            }
            i = end;
        }
        Ok(())
    }

    /// The user's value an entry's stored value (after any expiry) stands for: itself, or
    /// what its blob reference points at.
    fn resolve_stored<'a>(
        &self,
        user_key: &[u8],
        kind: ValueKind,
        stored: &'a [u8],
    ) -> Result<Cow<'a, [u8]>> {
        if !kind.is_blob() {
            return Ok(Cow::Borrowed(stored));
        }
        let r = BlobRef::decode(stored)
            .ok_or_else(|| Error::corruption("<compaction>", 0, "malformed blob reference"))?;
        Ok(Cow::Owned(self.blob_cache.read(Some(user_key), &r)?))
    }

    /// Moves the values `out` keeps in blob files due for collection into the job's own blob
    /// file (created on first use), pointing the entries at the copies; the old records become
    /// garbage.
    fn relocate_blobs(
        &self,
        user_key: &[u8],
        out: &mut Output<'_>,
        collect: &std::collections::HashSet<u64>,
        relocation: &mut Option<BlobFileWriter>,
        garbage: &mut BlobTally,
    ) -> Result<()> {
        for (_, kind, stored) in out.iter_mut() {
            let Some(r) = blob_ref_of(*kind, stored) else {
                continue;
            };
            if !collect.contains(&r.file_number) {
                continue;
            }
            let value = self.blob_cache.read(Some(user_key), &r)?;
            if relocation.is_none() {
                let number = self.new_output_number();
                match BlobFileWriter::create(self.options.fs.as_ref(), &self.dir, number) {
                    Ok(writer) => *relocation = Some(writer),
                    Err(e) => {
                        // Nothing names the number or the file it may have made.
                        self.release_output(number, &blob_file_name(&self.dir, number));
                        return Err(e);
                    }
                }
            }
            let Some(writer) = relocation.as_mut() else {
                continue;
            };
            let moved = writer.add(user_key, &value)?;
            let prefix = if kind.is_expiring() {
                EXPIRY_PREFIX_LEN
            } else {
                0
            };
            let stored = stored.to_mut();
            stored.truncate(prefix);
            moved.encode_to(stored);
            let bytes = garbage.entry(r.file_number).or_default();
            *bytes = bytes.saturating_add(r.length);
            self.stats
                .blob_bytes_relocated
                .fetch_add(moved.length, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Resolves a stripe whose newest entry is a merge operand. `entries` starts at that operand
    /// and runs to the key's oldest entry; the stripe is its first `stripe_len` entries.
    #[allow(clippy::too_many_arguments)]
    fn resolve_merge<'a>(
        &self,
        c: &mut Compaction,
        job: &JobContext,
        user_key: &[u8],
        entries: &'a [Entry],
        stripe_len: usize,
        place: Placement,
        out: &mut Output<'a>,
    ) -> Result<()> {
        let sequence = entries[0].sequence;
        // The operands run down to the first full entry, across older stripes too: the readers
        // of this stripe see all of them.
        let run = entries
            .iter()
            .take_while(|e| e.kind == ValueKind::Merge)
            .count();
        let base = entries.get(run);
        let foldable = match base {
            Some(e) => match e.kind {
                ValueKind::Deletion | ValueKind::Value | ValueKind::BlobIndex => true,
                // A live expiring base cannot be folded: once it expires, readers must see the
                // operands applied to nothing, which a folded value could not give them.
                ValueKind::ExpiringValue | ValueKind::ExpiringBlobIndex => {
                    split_expiring(&e.value).is_some_and(|(expiry, _)| expiry <= job.now)
                }
                ValueKind::Merge => false,
            },
            // No entry below the operands: a known nothing only if no deeper level can hold
            // the key.
            None => c.is_base_level_for_key(user_key),
        };
        if foldable {
            let existing = match base {
                Some(e) if matches!(e.kind, ValueKind::Value | ValueKind::BlobIndex) => {
                    Some(self.resolve_stored(user_key, e.kind, &e.value)?)
                }
                _ => None,
            };
            let existing = existing.as_deref();
            let operands: Vec<&[u8]> = entries[..run]
                .iter()
                .rev()
                .map(|e| e.value.as_slice())
                .collect();
            if let Some(merged) = self.full_merge(user_key, existing, &operands) {
                let value = EntryValue {
                    sequence,
                    kind: ValueKind::Value,
                    stored: Cow::Owned(merged),
                };
                return self.emit_value(c, job, user_key, value, place, out);
            }
        }
        // Keep the stripe's operands, combined into one if the operator can, and its base if the
        // base is in the stripe; anything older in the stripe is hidden by that base.
        let stripe_operands = run.min(stripe_len);
        let operands: Vec<&[u8]> = entries[..stripe_operands]
            .iter()
            .rev()
            .map(|e| e.value.as_slice())
            .collect();
        let partial = match (&self.options.merge_operator, operands.len() > 1) {
            (Some(op), true) => op
                .partial_merge(user_key, &operands)
                .filter(|p| within_value_limit(user_key, "partial merge", p)),
            _ => None,
        };
        match partial {
            Some(p) => out.push((sequence, ValueKind::Merge, Cow::Owned(p))),
            None => {
                for e in &entries[..stripe_operands] {
                    out.push((e.sequence, e.kind, Cow::Borrowed(&e.value)));
                }
            }
        }
        if let Some(b) = base.filter(|_| run < stripe_len) {
            out.push((b.sequence, b.kind, Cow::Borrowed(&b.value)));
        }
        Ok(())
    }

    /// The merge operator's full merge, or `None` (logged) if it fails, its result is over
    /// [`MAX_VALUE_BYTES`], or there is none; the caller then keeps the operands as they are, so
    /// nothing is lost, and reads report the error (or compute the large value).
    fn full_merge(
        &self,
        user_key: &[u8],
        existing: Option<&[u8]>,
        operands: &[&[u8]],
    ) -> Option<Vec<u8>> {
        let op = self.options.merge_operator.as_ref()?;
        match op.full_merge(user_key, existing, operands) {
            Ok(v) => within_value_limit(user_key, "merge", &v).then_some(v),
            Err(message) => {
                tracing::warn!(key = ?String::from_utf8_lossy(user_key), %message, "merge failed in compaction; operands kept");
                None
            }
        }
    }

    /// Writes the value a stripe's readers see, after expiry and (in the newest stripe only)
    /// the compaction filter. A removed value becomes a tombstone when it must hide older
    /// entries, and disappears otherwise.
    fn emit_value<'a>(
        &self,
        c: &Compaction,
        job: &JobContext,
        user_key: &[u8],
        value: EntryValue<'a>,
        place: Placement,
        out: &mut Output<'a>,
    ) -> Result<()> {
        let EntryValue {
            sequence,
            kind,
            stored,
        } = value;
        // Where the user's value starts in `stored`, after any expiry prefix.
        let (value_start, expiry) = if kind.is_expiring() {
            match split_expiring(&stored) {
                Some((expiry, _)) => (EXPIRY_PREFIX_LEN, Some(expiry)),
                None => {
                    // Malformed: keep it for reads to report, never guess.
                    out.push((sequence, kind, stored));
                    return Ok(());
                }
            }
        } else {
            (0, None)
        };
        let user_value = stored.get(value_start..).unwrap_or_default();
        let removed = if expiry.is_some_and(|e| e <= job.now) {
            self.stats.expired_dropped.fetch_add(1, Ordering::Relaxed);
            // The bytes no table holds any more: the whole entry, or its value when a
            // tombstone with the same key takes its place.
            let entry_bytes = user_key.len() + TRAILER_LEN + stored.len();
            let reclaimed = if place.must_hide_older {
                stored.len()
            } else {
                entry_bytes
            };
            self.stats
                .expired_bytes_reclaimed
                .fetch_add(reclaimed as u64, Ordering::Relaxed);
            true
        } else {
            false
        };
        let mut changed: Option<Vec<u8>> = None;
        let filter = self
            .options
            .compaction_filter
            .as_ref()
            .filter(|_| place.unseen_by_snapshots && !removed);
        let decision = match filter {
            // The filter judges the user's value, read from its blob file if need be.
            Some(f) => Some(f.filter(
                c.output_level(),
                user_key,
                &self.resolve_stored(user_key, kind, user_value)?,
            )),
            None => None,
        };
        let removed = removed
            || match decision {
                None | Some(FilterDecision::Keep) => false,
                Some(FilterDecision::Remove) => {
                    self.stats.filtered_dropped.fetch_add(1, Ordering::Relaxed);
                    true
                }
                Some(FilterDecision::ChangeValue(v)) => {
                    if within_value_limit(user_key, "compaction filter", &v) {
                        changed = Some(v);
                    }
                    false
                }
            };
        if removed {
            if place.must_hide_older {
                out.push((sequence, ValueKind::Deletion, Cow::Borrowed(&[])));
            }
            return Ok(());
        }
        match (changed, expiry) {
            (None, _) => out.push((sequence, kind, stored)),
            (Some(v), None) => out.push((sequence, ValueKind::Value, Cow::Owned(v))),
            (Some(v), Some(expiry)) => {
                let mut s = Vec::with_capacity(EXPIRY_PREFIX_LEN + v.len());
                s.extend_from_slice(&expiry.to_le_bytes());
                s.extend_from_slice(&v);
                out.push((sequence, ValueKind::ExpiringValue, Cow::Owned(s)));
            }
        }
        Ok(())
    }
}

/// Whether a value a merge operator or compaction filter produced for `user_key` is within
/// [`MAX_VALUE_BYTES`], the limit on values users write; logs one that is not. The caller
/// keeps what it had instead (the operands, the old value): a larger value could make a block
/// no read accepts, and the job would fail, and fail again after every reopen.
fn within_value_limit(user_key: &[u8], made_by: &str, value: &[u8]) -> bool {
    let fits = value.len() <= MAX_VALUE_BYTES;
    if !fits {
        tracing::warn!(
            key = ?String::from_utf8_lossy(user_key),
            bytes = value.len(),
            made_by,
            "value over the {MAX_VALUE_BYTES}-byte limit; kept what it would have replaced"
        );
    }
    fits
}

/// Counts every blob reference of `entries` (one user key's inputs) that `out` does not keep as
/// garbage of its blob file.
fn count_blob_garbage(entries: &[Entry], out: &Output<'_>, garbage: &mut BlobTally) {
    let mut kept: Vec<BlobRef> = out
        .iter()
        .filter_map(|(_, kind, stored)| blob_ref_of(*kind, stored))
        .collect();
    for e in entries {
        let Some(r) = blob_ref_of(e.kind, &e.value) else {
            continue;
        };
        match kept.iter().position(|k| *k == r) {
            Some(i) => {
                kept.swap_remove(i);
            }
            None => {
                let bytes = garbage.entry(r.file_number).or_default();
                *bytes = bytes.saturating_add(r.length);
            }
        }
    }
}

/// The shallowest level whose tables are laid out for memory maps with huge pages
/// ([`crate::env::WritableFile::prefer_huge_pages`]).
///
/// Why not level 1, nor the flushed level-0 tables: under writes they are rewritten within
/// seconds, by work that shares the writers' cores, and a huge folio's first touch can cost
/// more than the small pages the page cache recycles (on the benchmark's virtual machine,
/// whose balloon takes freed huge blocks back: with every compaction output laid out so,
/// fillrandom and overwrite were slower in 4 and 5 of 5 alternated pairs, by 21% and 5% in
/// the medians). The deeper levels hold most of a database and serve most of the lookups of
/// a settled one.
const HUGE_PAGE_MIN_LEVEL: usize = 2;

/// Gives the oldest entry written for a key sequence number 0 when every reader sees it and
/// nothing older of the key exists anywhere: a value in the bottommost level for the key that
/// is older than every live snapshot. Its sequence number can no longer matter to any read,
/// and eight zero bytes compress to almost nothing where a random sequence number does not
/// (RocksDB does the same at its bottommost level). Level 0 outputs are left alone.
fn zero_bottommost_sequence(
    c: &mut Compaction,
    job: &JobContext,
    user_key: &[u8],
    out: &mut Output<'_>,
) {
    let Some(oldest) = out.last_mut() else {
        return;
    };
    let zeroable = oldest.0 != 0
        && matches!(
            oldest.1,
            ValueKind::Value
                | ValueKind::ExpiringValue
                | ValueKind::BlobIndex
                | ValueKind::ExpiringBlobIndex
        )
        && c.output_level() > 0
        && job.stripe_of(oldest.0) == 0
        && c.is_base_level_for_key(user_key);
    if zeroable {
        oldest.0 = 0;
    }
}

/// What a compaction job knows while deciding each key's fate.
struct JobContext {
    /// The live snapshots' sequence numbers when the job started, ascending, without repeats.
    /// A snapshot taken later sees every input entry, like a plain read.
    snapshots: Vec<SequenceNumber>,
    /// The clock when the job started: expiry is judged at this time.
    now: u64,
}

impl JobContext {
    /// The stripe of an entry: the index of the oldest snapshot that sees it, or
    /// `snapshots.len()` for the newest stripe, which only reads without a snapshot see.
    fn stripe_of(&self, sequence: SequenceNumber) -> usize {
        self.snapshots.partition_point(|&s| s < sequence)
    }
}

/// Where the entry being written sits among the key's versions.
#[derive(Debug, Clone, Copy)]
struct Placement {
    /// In the newest stripe: no snapshot reads it, so the compaction filter may judge it.
    unseen_by_snapshots: bool,
    /// Older versions of the key are written below it or may live in deeper levels, so if it
    /// is removed a tombstone must take its place.
    must_hide_older: bool,
}

/// A value entry about to be written: its sequence number, kind (a value or blob reference kind)
/// and value as stored (with the expiry prefix for an expiring value).
struct EntryValue<'a> {
    sequence: SequenceNumber,
    kind: ValueKind,
    stored: Cow<'a, [u8]>,
}

/// `out` emptied, with its allocation kept, for another key's entries to borrow into. Collecting
/// an emptied vector's iterator into a vector of a type of the same layout reuses its buffer
/// (the standard library collects such iterators in place), so this allocates nothing.
// `filter` cannot change the element type (the lifetime), which is the point here.
#[allow(clippy::unnecessary_filter_map)]
fn recycle_output<'b>(mut out: Output<'_>) -> Output<'b> {
    out.clear();
    out.into_iter().filter_map(|_| None).collect()
}

/// Frees the value buffers of `entries` that grew past [`MAX_KEPT_ENTRY_BYTES`].
fn release_large_entries(entries: &mut [Entry]) {
    for e in entries {
        if e.value.capacity() > MAX_KEPT_ENTRY_BYTES {
            e.value = Vec::new();
        }
    }
}

/// A compaction's input tables of one level, opened through the table cache: inputs are read
/// once, front to back, so there is no handle worth pinning.
struct InputLevel {
    /// Sorted by key range and disjoint, as a level's tables are.
    files: Vec<Arc<FileMetaData>>,
    table_cache: Arc<TableCache>,
}

impl LevelSource for InputLevel {
    fn files(&self) -> &[Arc<FileMetaData>] {
        &self.files
    }

    fn open(&self, number: u64) -> Result<Arc<TableReader>> {
        self.table_cache.get(number)
    }
}

#[cfg(all(test, target_os = "linux", not(miri)))]
mod tests {
    use std::sync::{Arc, Mutex, OnceLock, Weak};

    use super::*;
    use crate::{CompactionFilter, Db, Options, WriteBatch};

    /// The calling thread's nice value (per thread on Linux).
    fn this_threads_nice() -> i32 {
        // SAFETY: getpriority takes no pointers; `who == 0` names the calling thread.
        unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) }
    }

    /// Keeps every entry and records the nice value of each call, in order. Its first call
    /// counts as many crowded writes as raise a low-priority merge, as if writer threads had
    /// crowded the cores while the merge ran.
    #[derive(Default)]
    struct Crowd {
        db: OnceLock<Weak<DbInner>>,
        seen: Mutex<Vec<i32>>,
    }

    impl CompactionFilter for Crowd {
        fn name(&self) -> &str {
            "crowd"
        }

        fn filter(&self, _level: usize, _key: &[u8], _value: &[u8]) -> FilterDecision {
            let mut seen = self.seen.lock().expect("crowd lock");
            if seen.is_empty() {
                if let Some(db) = self.db.get().and_then(Weak::upgrade) {
                    db.crowded_writes
                        .fetch_add(CROWDED_WRITES_TO_RAISE, Ordering::Relaxed);
                }
            }
            seen.push(this_threads_nice());
            FilterDecision::Keep
        }
    }

    #[test]
    fn a_low_priority_merge_finishes_at_normal_priority_once_writers_crowd_the_cores() {
        let base = this_threads_nice();
        assert!(
            base < 19,
            "the test runs at nice {base}: it needs a lower one"
        );
        let crowd = Arc::new(Crowd::default());
        let options = Options {
            low_priority_compactions: true,
            level0_file_num_compaction_trigger: 2,
            level0_slowdown_writes_trigger: 1000,
            level0_stop_writes_trigger: 1000,
            compaction_filter: Some(crowd.clone()),
            ..Options::default()
        };
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), options).expect("open");
        crowd.db.set(Arc::downgrade(&db.inner)).expect("set once");
        // Interleaved keys: the first two flushes go to levels 2 and 1, which they do not
        // overlap, the next two stay in level 0 and start a compaction.
        for round in 0..4u32 {
            let mut batch = WriteBatch::new();
            for i in 0..1000u32 {
                batch.put(format!("key{:06}", i * 4 + round), b"value");
            }
            db.write(batch).expect("write");
            db.flush().expect("flush");
        }
        db.wait_for_compactions().expect("wait for compactions");

        assert!(db.stats().compactions >= 1, "{:?}", db.stats());
        assert_eq!(db.stats().compactions_raised, 1, "{:?}", db.stats());
        let seen = std::mem::take(&mut *crowd.seen.lock().expect("crowd lock"));
        assert!(seen.len() >= 2000, "{} keys filtered", seen.len());
        assert_eq!(seen[0], 19, "began at low priority");
        assert!(
            seen[1..].iter().all(|&n| n == base),
            "finished at {base}: {seen:?}"
        );
    }
}
