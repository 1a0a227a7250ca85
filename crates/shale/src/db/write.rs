//! The write path: a queue of writers whose head (the leader) gathers the batches behind it
//! into one group, appends the group to the WAL as one record with at most one sync, inserts it
//! into the memtable, and then acknowledges every writer of the group (group commit).

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::Thread;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, MutexGuard};

use super::stats::add_by_leader;
use super::{DbInner, DbState, PendingWrite};
use crate::batch::{WalMarker, WriteBatch};
use crate::blob::BlobFileWriter;
use crate::error::{Error, Result};
use crate::filename::{blob_file_name, wal_file_name};
use crate::iter::{split_expiring, EXPIRY_PREFIX_LEN};
use crate::key::ValueKind;
use crate::memtable::MemTable;
use crate::options::WriteOptions;
use crate::wal::{LogKind, LogWriter};

/// A group grows to at most this many bytes, so one writer's latency stays bounded.
const MAX_GROUP_BYTES: usize = 1 << 20;
/// A small leading batch limits the group further, so small writes are not slowed by big ones.
const SMALL_BATCH_BYTES: usize = 128 << 10;
thread_local! {
    /// The slot a writer on this thread waits on. A thread has at most one write queued at a
    /// time, so one per thread serves every write and database without an allocation per
    /// write.
    static WRITER_SLOT: Arc<WriterSlot> = Arc::new(WriterSlot::new());
}

/// What [`DbInner::enqueue`] hands a writer.
enum Turn<'a> {
    /// The write leads the queue; the database mutex is held.
    Lead(MutexGuard<'a, DbState>),
    /// A leader applied the write as part of its group, with this result.
    Done(Result<()>),
}

/// How a queued writer learns that it leads the queue or that a leader applied its write.
///
/// A follower waits here, not on the database mutex: when a group completes, every follower
/// is woken directly and returns without taking the mutex, so the followers of a group resume
/// in parallel instead of one after another as the mutex passes between them.
pub(crate) struct WriterSlot {
    /// [`WAITING`], [`LEAD`] or [`DONE`].
    signal: AtomicU8,
    /// The error of a completed write that failed; read once `signal` is [`DONE`].
    error: Mutex<Option<Error>>,
    /// The writer's thread, unparked on every signal.
    thread: Thread,
}

const WAITING: u8 = 0;
const LEAD: u8 = 1;
const DONE: u8 = 2;

impl WriterSlot {
    fn new() -> Self {
        Self {
            signal: AtomicU8::new(WAITING),
            error: Mutex::new(None),
            thread: std::thread::current(),
        }
    }

    /// Prepares the slot for a new write of its thread.
    fn reset(&self) {
        self.signal.store(WAITING, Ordering::Relaxed);
    }

    /// Tells the writer it now leads the queue.
    fn lead(&self) {
        self.signal.store(LEAD, Ordering::Release);
        self.thread.unpark();
    }

    /// Tells the writer a leader applied its write.
    fn finish(&self, result: &Result<()>) {
        if let Err(e) = result {
            *self.error.lock() = Some(e.duplicate());
        }
        self.signal.store(DONE, Ordering::Release);
        self.thread.unpark();
    }

    /// Blocks until signalled: `Some(result)` once the write is done, `None` when it leads.
    /// `park` may return early (an unpark meant for an earlier write leaves a token behind),
    /// so the signal is checked again each time.
    ///
    /// With a `spin` turn, the writer first watches the signal for up to [`FOLLOWER_SPIN`]
    /// before it parks, and gives the turn back when it stops watching.
    fn wait(&self, spin: Option<SpinTurn>) -> Option<Result<()>> {
        if let Some(_turn) = spin {
            let start = Instant::now();
            'spin: loop {
                for _ in 0..SPINS_PER_CLOCK_READ {
                    if self.signal.load(Ordering::Acquire) != WAITING {
                        break 'spin;
                    }
                    std::hint::spin_loop();
                }
                if start.elapsed() >= FOLLOWER_SPIN {
                    break;
                }
            }
        }
        loop {
            match self.signal.load(Ordering::Acquire) {
                DONE => {
                    return Some(match self.error.lock().take() {
                        Some(e) => Err(e),
                        None => Ok(()),
                    })
                }
                LEAD => return None,
                _ => std::thread::park(),
            }
        }
    }
}

/// How long a follower of an unsynced write watches for its group's end before it parks: a
/// few times what a leader takes to apply a small group.
///
/// Why: a park and the wake-up after it cost two futex calls and two context switches, more
/// than a leader takes to apply a small unsynced group. Two writer threads on two cores parked
/// at nearly every write, and each parked follower's core went to a background job until the
/// wake-up took it back.
const FOLLOWER_SPIN: Duration = Duration::from_micros(8);

/// Signal checks between two readings of the clock while a follower spins: reading the clock
/// costs more than a check, and 64 pause instructions take about 0.1 to 3 us, by processor.
const SPINS_PER_CLOCK_READ: u32 = 64;

/// The cores this process may run on (1 if unknown).
static CORES: std::sync::LazyLock<usize> = std::sync::LazyLock::new(|| {
    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
});

/// Followers spinning now, in every database of the process.
static SPINNING_FOLLOWERS: AtomicUsize = AtomicUsize::new(0);

/// Followers that may spin at once, in the whole process: one fewer than the cores, so the
/// leaders they wait for always have a core to run on.
fn max_spinning_followers() -> usize {
    *CORES - 1
}

/// A follower's leave to spin, one of [`max_spinning_followers`]; given back when dropped.
struct SpinTurn;

impl SpinTurn {
    /// Takes a turn if one is free.
    fn take() -> Option<Self> {
        SPINNING_FOLLOWERS
            .fetch_update(Ordering::Acquire, Ordering::Relaxed, |n| {
                (n < max_spinning_followers()).then_some(n + 1)
            })
            .ok()
            .map(|_| SpinTurn)
    }
}

impl Drop for SpinTurn {
    fn drop(&mut self) {
        SPINNING_FOLLOWERS.fetch_sub(1, Ordering::Release);
    }
}

/// How long one write is delayed when level 0 reaches the slowdown trigger.
const SLOWDOWN_DELAY: Duration = Duration::from_millis(1);

impl DbInner {
    /// Queues `batch` (or, with `None`, a request to freeze the memtable) and returns once it is
    /// applied (and synced, if asked).
    pub(crate) fn write(&self, options: &WriteOptions, batch: Option<WriteBatch>) -> Result<()> {
        if self.read_only {
            return Err(Error::InvalidArgument("database is open read-only".into()));
        }
        let batch = match batch {
            Some(b) => {
                b.validate()?;
                if b.has_blob_index() {
                    return Err(Error::InvalidArgument(
                        "a write batch may not hold blob references; the engine makes them".into(),
                    ));
                }
                if b.has_merge() && self.options.merge_operator.is_none() {
                    return Err(Error::InvalidArgument(
                        "merge requires Options::merge_operator to be set".into(),
                    ));
                }
                Some(self.apply_default_ttl(b)?)
            }
            None => None,
        };
        // Borrowed from the thread: only the queue entry holds a reference of its own.
        WRITER_SLOT.with(|slot| self.write_queued(options, batch, slot))
    }

    /// [`DbInner::write`] once the batch is checked: queues it on `slot`, this thread's.
    fn write_queued(
        &self,
        options: &WriteOptions,
        batch: Option<WriteBatch>,
        slot: &Arc<WriterSlot>,
    ) -> Result<()> {
        slot.reset();
        let force = batch.is_none();
        let write = PendingWrite {
            batch,
            sync: options.sync,
            disable_wal: options.disable_wal,
            slot: slot.clone(),
        };
        let mut state = match self.enqueue(write, slot) {
            Turn::Lead(state) => state,
            Turn::Done(result) => return result,
        };
        // This writer leads: it does the work for itself and the group behind it.
        let mut group_len = 1;
        // A panic here (a user's comparator, inserting the group) must not leave the group's
        // followers, and every writer after them, waiting for ever: it poisons the database,
        // the followers get the error, and the panic goes on in this thread once they have it.
        let (result, panic) = self.run_caught(&mut state, "write", |state| {
            self.lead_group(state, force, &mut group_len)
        });
        // The leader is the queue's first entry; the rest of the group follows it.
        state.writers.pop_front();
        let followers: Vec<PendingWrite> = state.writers.drain(..group_len - 1).collect();
        if let Some(next) = state.writers.front() {
            next.slot.lead();
        }
        drop(state);
        // Woken outside the mutex: a woken follower returns without touching it.
        for w in &followers {
            w.slot.finish(&result);
        }
        if let Some(panic) = panic {
            std::panic::resume_unwind(panic);
        }
        result
    }

    /// The leader's work for the group it leads: room in the memtable, then (unless `force`,
    /// a write of nothing that only makes room) the group built from the queue, logged and
    /// inserted. Sets `group_len` to the writes taken into the group, this one included.
    fn lead_group(
        &self,
        state: &mut MutexGuard<'_, DbState>,
        force: bool,
        group_len: &mut usize,
    ) -> Result<()> {
        self.make_room_for_write(state, force)?;
        if force {
            return Ok(());
        }
        let timed_out = self.gather_sync_cohort(state);
        let (group, len, sync, disable_wal) = Self::build_group(state);
        *group_len = len;
        let result = self.apply_group(state, group, sync, disable_wal);
        if sync && !disable_wal {
            let cohort = &mut state.sync_cohort;
            if len >= cohort.expected {
                cohort.expected = len;
            } else if timed_out {
                // Fewer writers came than before: expect one fewer next time, so a shrinking
                // set of writers stops waiting after a few syncs.
                cohort.expected = (cohort.expected - 1).max(len);
            }
        }
        result
    }

    /// Queues a write and waits until it leads the queue or a leader has completed it.
    fn enqueue(&self, write: PendingWrite, slot: &WriterSlot) -> Turn<'_> {
        let sync = write.sync;
        let mut state = self.state.lock();
        state.writers.push_back(write);
        if state.writers.len() == 1 {
            return Turn::Lead(state);
        }
        // A follower that finds as many writers queued as there are cores (itself included;
        // with one core, any follower) shows writer threads keeping every core busy.
        if state.writers.len() >= *CORES {
            self.crowded_writes.fetch_add(1, Ordering::Relaxed);
        }
        // Only the writer right behind the leader spins, and only for an unsynced write behind
        // an unsynced leader: one further back waits for more than one group, and a synced
        // group takes a disk sync, both far longer than a spin is worth.
        let may_spin = !sync
            && state.writers.len() == 2
            && state.writers.front().is_some_and(|leader| !leader.sync);
        // The leader waits for the queue to reach this length; waking it sooner only to sleep
        // again would cost a context switch per writer.
        if state.sync_cohort.leader_waiting && state.writers.len() >= state.sync_cohort.expected {
            self.cohort_arrived.notify_one();
        }
        drop(state);
        let spin = if may_spin { SpinTurn::take() } else { None };
        match slot.wait(spin) {
            Some(result) => Turn::Done(result),
            None => Turn::Lead(self.state.lock()),
        }
    }

    /// Rewrites plain puts as expiring ones when the database has a default TTL.
    fn apply_default_ttl(&self, batch: WriteBatch) -> Result<WriteBatch> {
        let Some(expiry) = self.default_expiry() else {
            return Ok(batch);
        };
        if !batch.has_plain_value() {
            return Ok(batch);
        }
        let mut out = WriteBatch::new();
        for entry in batch.iter() {
            let entry = entry?;
            match entry.kind {
                ValueKind::Value => out.put_with_expiry(entry.key, entry.value, expiry),
                ValueKind::Deletion => out.delete(entry.key),
                ValueKind::Merge => out.merge(entry.key, entry.value),
                ValueKind::ExpiringValue => {
                    let (expiry, value) =
                        crate::iter::split_expiring(entry.value).ok_or_else(|| {
                            Error::InvalidArgument("expiring value shorter than its expiry".into())
                        })?;
                    out.put_with_expiry(entry.key, value, expiry)
                }
                // Refused before this point: callers never write references.
                ValueKind::BlobIndex | ValueKind::ExpiringBlobIndex => {
                    return Err(Error::InvalidArgument(
                        "a write batch may not hold blob references".into(),
                    ))
                }
            }
        }
        Ok(out)
    }

    /// Lets the leader of a synced group wait, at most half of one sync, until as many writers
    /// are queued as the recent synced groups held (see [`super::SyncCohort`]). Returns whether
    /// the wait ran out before they came.
    fn gather_sync_cohort(&self, state: &mut MutexGuard<'_, DbState>) -> bool {
        let Some(front) = state.writers.front() else {
            return false;
        };
        let cohort = &state.sync_cohort;
        if !front.sync
            || front.disable_wal
            || front.batch.is_none()
            || cohort.sync_nanos == 0
            || state.writers.len() >= cohort.expected
        {
            return false;
        }
        let deadline = Instant::now() + Duration::from_nanos(cohort.sync_nanos / 2);
        state.sync_cohort.leader_waiting = true;
        let mut timed_out = false;
        while state.writers.len() < state.sync_cohort.expected {
            if self.cohort_arrived.wait_until(state, deadline).timed_out() {
                timed_out = true;
                break;
            }
        }
        state.sync_cohort.leader_waiting = false;
        timed_out
    }

    /// Takes the batches of the leader and of the writers behind it that can share its WAL
    /// record. Returns the group, how many queue entries it covers, and its sync/WAL mode.
    fn build_group(state: &mut DbState) -> (WriteBatch, usize, bool, bool) {
        let (lead_sync, lead_no_wal) = match state.writers.front() {
            Some(w) => (w.sync, w.disable_wal),
            None => return (WriteBatch::new(), 0, false, false),
        };
        let mut group = state
            .writers
            .front_mut()
            .and_then(|w| w.batch.take())
            .unwrap_or_default();
        let limit = if group.data_size() <= SMALL_BATCH_BYTES {
            group.data_size() + SMALL_BATCH_BYTES
        } else {
            MAX_GROUP_BYTES
        };
        let mut len = 1;
        for w in state.writers.iter_mut().skip(1) {
            // A sync write must not ride in a group that will not sync; a request to freeze the
            // memtable, or a different WAL mode, ends the group too.
            if (w.sync && !lead_sync) || w.disable_wal != lead_no_wal {
                break;
            }
            let Some(batch) = w.batch.as_ref() else { break };
            if group.data_size() + batch.data_size() > limit {
                break;
            }
            group.append(batch);
            w.batch = None;
            len += 1;
        }
        (group, len, lead_sync, lead_no_wal)
    }

    /// Logs and applies one group. Called by the leader with `state` held; releases it for the
    /// I/O and the memtable insert.
    fn apply_group(
        &self,
        state: &mut MutexGuard<'_, DbState>,
        mut group: WriteBatch,
        sync: bool,
        disable_wal: bool,
    ) -> Result<()> {
        let first = self.last_sequence.load(Ordering::Acquire) + 1;
        let count = u64::from(group.count());
        group.set_sequence(first);
        // Borrowed, not cloned: a reference count costs each write two locked instructions,
        // and each waits for the stores before it. Only the queue's leader replaces the active
        // memtable (`switch_memtable`, from `make_room_for_write`), and this thread leads until
        // it takes itself off the queue after this call, so `state.mem` keeps this memtable
        // alive, and in place, while the mutex is released below.
        let mem: *const MemTable = Arc::as_ptr(&state.mem);
        let blob_number = state.mem_wal_number;
        // What the WAL and the memtable receive when values moved to a blob file; `group`
        // itself stays as the user wrote it, for the statistics.
        let mut separated: Option<WriteBatch> = None;
        let mut sync_time = None;
        let result = MutexGuard::unlocked(state, || -> Result<()> {
            // SAFETY: `mem` points into the `Arc` that `state.mem` holds until this writer, the
            // leader, replaces it or leaves the queue, both after this closure (see above).
            let mem = unsafe { &*mem };
            // The first key's filter word loads while the WAL record is written.
            let first_key_slot = group.prefetch_memtable_filter(mem);
            if !disable_wal {
                let mut wal = self.wal.lock();
                let Some(log) = wal.as_mut() else {
                    return Err(Error::ShuttingDown);
                };
                // The blob writer is locked only when this group may move values to it or
                // must sync it: a mutex costs each write two locked instructions, and each waits
                // for the stores before it.
                let mut blob = (sync || self.separation_threshold(&group).is_some())
                    .then(|| self.blob_writer.lock());
                if let Some(blob) = blob.as_mut() {
                    separated = self.separate_values(&group, blob, blob_number)?;
                }
                let logged = separated.as_ref().unwrap_or(&group);
                if sync {
                    self.sync_sealed_wals(log)?;
                }
                log.add_record(logged.data())?;
                log.flush()?;
                if sync {
                    let started = Instant::now();
                    // A synced WAL record must never name blob bytes that are not durable.
                    if let Some(b) = blob.as_mut().and_then(|b| b.as_mut()) {
                        b.sync(self.options.fs.as_ref())?;
                    }
                    log.sync()?;
                    sync_time = Some(started.elapsed());
                    add_by_leader(&self.stats.wal_syncs, 1);
                }
                add_by_leader(&self.stats.wal_bytes, logged.data_size() as u64);
            }
            separated
                .as_ref()
                .unwrap_or(&group)
                .insert_into_announced(mem, first_key_slot)
        });
        debug_assert!(
            std::ptr::eq(Arc::as_ptr(&state.mem), mem),
            "the active memtable changed under its leader"
        );
        if let Some(took) = sync_time {
            let took = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
            let cohort = &mut state.sync_cohort;
            cohort.sync_nanos = if cohort.sync_nanos == 0 {
                took
            } else {
                (cohort.sync_nanos * 3 + took) / 4
            };
        }
        match result {
            Ok(()) => {
                let last = first + count - 1;
                state.versions.set_last_sequence(last);
                self.last_sequence.store(last, Ordering::Release);
                self.stats.record_user_write(&group);
                Ok(())
            }
            Err(e) => {
                // The WAL may now hold part of the group: nothing later may be acknowledged.
                self.set_bg_error(state, &e);
                Err(e)
            }
        }
    }

    /// `min_blob_size` when [`DbInner::separate_values`] may move any of the group's values:
    /// some value or merge operand reaches it (operands themselves are never moved).
    fn separation_threshold(&self, group: &WriteBatch) -> Option<usize> {
        self.options
            .min_blob_size
            .filter(|&min| group.max_value_len() >= min)
    }

    /// Moves the group's large values (at least `min_blob_size`; plain and expiring puts, never
    /// merge operands) to the active blob file, creating it (numbered like the WAL) on first
    /// use. Returns the group with references in their place, or `None` when no value or merge
    /// operand reaches the threshold. The blob bytes are handed to the OS before this returns,
    /// so the memtable never holds a reference a reader cannot follow. A WAL without its
    /// memtable (`disable_wal`) keeps values inline: nothing would make their blob file durable
    /// before a flush.
    fn separate_values(
        &self,
        group: &WriteBatch,
        blob: &mut Option<BlobFileWriter>,
        number: u64,
    ) -> Result<Option<WriteBatch>> {
        let Some(min) = self.separation_threshold(group) else {
            return Ok(None);
        };
        let mut out = WriteBatch::new();
        out.set_sequence(group.sequence());
        let mut reference = Vec::with_capacity(EXPIRY_PREFIX_LEN + 30);
        for entry in group.iter() {
            let entry = entry?;
            let (expiry, value) = match entry.kind {
                ValueKind::Value if entry.value.len() >= min => (None, entry.value),
                ValueKind::ExpiringValue => match split_expiring(entry.value) {
                    Some((expiry, v)) if v.len() >= min => (Some(expiry), v),
                    _ => {
                        out.push_stored(entry.kind, entry.key, &[entry.value]);
                        continue;
                    }
                },
                _ => {
                    out.push_stored(entry.kind, entry.key, &[entry.value]);
                    continue;
                }
            };
            let kind = self.append_blob(blob, number, entry.key, value, expiry, &mut reference)?;
            out.push_stored(kind, entry.key, &[&reference]);
        }
        if let Some(writer) = blob.as_mut() {
            writer.flush()?;
        }
        Ok(Some(out))
    }

    /// Appends `value` for `key` to the active blob file (creating it, numbered `number`, on
    /// first use) and sets `stored` to the entry's stored value: the reference, after the
    /// expiry if there is one. Returns the entry's kind. The bytes are not yet flushed.
    fn append_blob(
        &self,
        blob: &mut Option<BlobFileWriter>,
        number: u64,
        key: &[u8],
        value: &[u8],
        expiry: Option<u64>,
        stored: &mut Vec<u8>,
    ) -> Result<ValueKind> {
        if blob.is_none() {
            *blob = Some(BlobFileWriter::create(
                self.options.fs.as_ref(),
                &self.dir,
                number,
            )?);
        }
        let Some(writer) = blob.as_mut() else {
            return Err(Error::ShuttingDown);
        };
        let r = writer.add(key, value)?;
        stored.clear();
        let kind = match expiry {
            Some(e) => {
                stored.extend_from_slice(&e.to_le_bytes());
                ValueKind::ExpiringBlobIndex
            }
            None => ValueKind::BlobIndex,
        };
        r.encode_to(stored);
        self.stats
            .blob_bytes_written
            .fetch_add(r.length, Ordering::Relaxed);
        Ok(kind)
    }

    /// A single put whose value goes to a blob file, written from the caller's buffer: the
    /// value is never copied into a write batch (for a 100 KB value that copy, and its
    /// allocation, are a noticeable share of the write). The writer waits for the head of the
    /// queue like any other and then runs alone (a group never absorbs it, nor it a group).
    /// `None` when the put does not qualify (separation off, a small value, `disable_wal`, a
    /// limit exceeded: the batch path then applies and reports limits as always).
    pub(crate) fn put_separated(
        &self,
        options: &WriteOptions,
        key: &[u8],
        value: &[u8],
        expiry: Option<u64>,
    ) -> Option<Result<()>> {
        let min = self.options.min_blob_size?;
        let batch_bytes = crate::batch::BATCH_HEADER_LEN
            + 1
            + crate::codec::varint_len(key.len() as u64)
            + key.len()
            + crate::codec::varint_len(value.len() as u64)
            + value.len()
            + expiry.map_or(0, |_| EXPIRY_PREFIX_LEN);
        let qualifies = !self.read_only
            && !options.disable_wal
            && value.len() >= min
            && key.len() <= crate::limits::MAX_KEY_BYTES
            && value.len() <= crate::limits::MAX_VALUE_BYTES
            && batch_bytes <= crate::limits::MAX_BATCH_BYTES;
        if !qualifies {
            return None;
        }
        let slot = WRITER_SLOT.with(Arc::clone);
        slot.reset();
        // No batch: no leader takes this writer into its group (a group ends at a writer
        // without a batch), so it always leads itself.
        let write = PendingWrite {
            batch: None,
            sync: options.sync,
            disable_wal: false,
            slot: slot.clone(),
        };
        let mut state = match self.enqueue(write, &slot) {
            Turn::Lead(state) => state,
            Turn::Done(result) => return Some(result),
        };
        let (result, panic) = self.run_caught(&mut state, "write", |state| {
            self.make_room_for_write(state, false)?;
            self.apply_separated_put(state, key, value, expiry, options.sync)
        });
        state.writers.pop_front();
        if let Some(next) = state.writers.front() {
            next.slot.lead();
        }
        drop(state);
        if let Some(panic) = panic {
            std::panic::resume_unwind(panic);
        }
        Some(result)
    }

    /// Logs and applies one separated put, as [`DbInner::apply_group`] does a group.
    fn apply_separated_put(
        &self,
        state: &mut MutexGuard<'_, DbState>,
        key: &[u8],
        value: &[u8],
        expiry: Option<u64>,
        sync: bool,
    ) -> Result<()> {
        let sequence = self.last_sequence.load(Ordering::Acquire) + 1;
        let mem = state.mem.clone();
        let blob_number = state.mem_wal_number;
        let result = MutexGuard::unlocked(state, || -> Result<()> {
            let mut wal = self.wal.lock();
            let Some(log) = wal.as_mut() else {
                return Err(Error::ShuttingDown);
            };
            let mut blob = self.blob_writer.lock();
            let mut stored = Vec::with_capacity(EXPIRY_PREFIX_LEN + 30);
            let kind = self.append_blob(&mut blob, blob_number, key, value, expiry, &mut stored)?;
            let Some(writer) = blob.as_mut() else {
                return Err(Error::ShuttingDown);
            };
            // The blob bytes reach the OS before the WAL record naming them.
            writer.flush()?;
            let mut batch = WriteBatch::new();
            batch.push_stored(kind, key, &[&stored]);
            batch.set_sequence(sequence);
            if sync {
                self.sync_sealed_wals(log)?;
            }
            log.add_record(batch.data())?;
            log.flush()?;
            if sync {
                writer.sync(self.options.fs.as_ref())?;
                log.sync()?;
                add_by_leader(&self.stats.wal_syncs, 1);
            }
            add_by_leader(&self.stats.wal_bytes, batch.data_size() as u64);
            batch.insert_into(&mem)
        });
        match result {
            Ok(()) => {
                state.versions.set_last_sequence(sequence);
                self.last_sequence.store(sequence, Ordering::Release);
                self.stats.record_user_put(key.len() + value.len());
                Ok(())
            }
            Err(e) => {
                // The WAL or the blob file may now hold part of the write.
                self.set_bg_error(state, &e);
                Err(e)
            }
        }
    }

    /// Makes sure the active memtable has room, freezing it (and starting a new WAL) when it is
    /// full or when `force` is set, and applies back-pressure when flushes or level-0
    /// compactions fall behind.
    pub(crate) fn make_room_for_write(
        &self,
        state: &mut MutexGuard<'_, DbState>,
        mut force: bool,
    ) -> Result<()> {
        let mut allow_delay = !force;
        loop {
            Self::check_bg_error(state)?;
            if self.shutting_down.load(Ordering::Acquire) {
                return Err(Error::ShuttingDown);
            }
            let l0_files = state.versions.current_ref().num_files(0);
            if allow_delay && self.level0_slows_writes(state.versions.current_ref()) {
                // Give compaction a little CPU instead of stopping the writer later.
                self.stats.slowdowns.fetch_add(1, Ordering::Relaxed);
                let started = Instant::now();
                MutexGuard::unlocked(state, || std::thread::sleep(SLOWDOWN_DELAY));
                self.add_stall_time(started);
                allow_delay = false;
                continue;
            }
            if !force && state.mem.approximate_memory_usage() < self.options.write_buffer_size {
                return Ok(());
            }
            if force && state.mem.is_empty() {
                return Ok(());
            }
            if state.imm.len() + 1 >= self.options.max_write_buffer_number
                || l0_files >= self.options.level0_stop_writes_trigger
            {
                // Every frozen memtable is still flushing, or level 0 is too deep: wait for
                // background work.
                self.stats.stalls.fetch_add(1, Ordering::Relaxed);
                self.work_available.notify_all();
                let started = Instant::now();
                self.background_done.wait(state);
                self.add_stall_time(started);
                continue;
            }
            self.switch_memtable(state)?;
            force = false;
        }
    }

    /// Adds the time since `started` to the writers' stall time.
    fn add_stall_time(&self, started: Instant) {
        let micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.stats.stall_micros.fetch_add(micros, Ordering::Relaxed);
    }

    /// Freezes the active memtable and starts a new WAL. REQUIRES: `state` held by the leader.
    fn switch_memtable(&self, state: &mut MutexGuard<'_, DbState>) -> Result<()> {
        let number = state.versions.new_file_number();
        let old_number = state.mem_wal_number;
        let switched = (|| -> Result<()> {
            let mut wal = self.wal.lock();
            // The old WAL is complete: close it (which trims a preallocated tail) but do not
            // sync it here. Syncing megabytes stalled every writer for milliseconds per switch,
            // and a WAL whose memtable is flushed before anyone asks for a sync is deleted
            // without ever being written to the device. The next synced write syncs it first
            // and says so in the new WAL (`sync_sealed_wals`); recovery relies on that marker
            // (`Replay::replay_all`).
            if let Some(mut old) = wal.take() {
                let mut sealed = self.sealed_wals.lock();
                if let Some(mut blob) = self.blob_writer.lock().take() {
                    blob.flush()?;
                    blob.close()?;
                    sealed.push(blob_file_name(&self.dir, old_number));
                }
                old.add_record(WriteBatch::wal_marker(WalMarker::Seal).data())?;
                old.flush()?;
                old.close()?;
                sealed.push(wal_file_name(&self.dir, old_number));
            }
            let path = wal_file_name(&self.dir, number);
            let kept = if state.reclaiming > 0 {
                None
            } else {
                state.recyclable_wals.pop()
            };
            let reused = kept.and_then(|old| {
                let old_path = wal_file_name(&self.dir, old);
                match self.options.fs.reuse_log(&old_path, &path) {
                    Ok(file) => Some(file),
                    Err(e) => {
                        // A kept file only saves work: start the WAL afresh rather than
                        // refuse writes. The old file, if still there, is obsolete.
                        tracing::warn!(from = %old_path.display(), %e, "cannot reuse a WAL file");
                        None
                    }
                }
            });
            let file = match reused {
                Some(file) => {
                    self.stats.wal_files_reused.fetch_add(1, Ordering::Relaxed);
                    file
                }
                None => self.options.fs.create_log(&path)?,
            };
            let new_log = LogWriter::new(file, path, LogKind::Wal, number)?;
            // Also makes a reused file's new name durable: recovery then reads it as the new
            // log, whose fragments it tells from those the file's earlier log left.
            self.options.fs.sync_dir(&self.dir)?;
            *wal = Some(new_log);
            Ok(())
        })();
        if let Err(e) = switched {
            // A half-made switch leaves the WALs in an unknown state: refuse further writes.
            self.set_bg_error(state, &e);
            return Err(e);
        }
        let old_mem = std::mem::replace(&mut state.mem, Arc::new(self.new_memtable()));
        let old_number = std::mem::replace(&mut state.mem_wal_number, number);
        state.imm.push_back((old_mem, old_number));
        self.install_view(state);
        self.work_available.notify_all();
        Ok(())
    }

    /// Makes the WALs (and blob files) sealed since the last synced write durable, then
    /// appends the sync marker to `log`, the active WAL: the marker tells recovery that every
    /// older WAL was whole when it was written, so damage to one is corruption, not a tail torn
    /// by a crash. Called by a synced write before it appends its own record, so the marker is
    /// durable with that record. A sealed file that no longer exists was retired by a flush,
    /// which made its contents durable in a table.
    fn sync_sealed_wals(&self, log: &mut LogWriter) -> Result<()> {
        let mut sealed = self.sealed_wals.lock();
        if sealed.is_empty() {
            return Ok(());
        }
        let fs = self.options.fs.as_ref();
        for path in sealed.iter() {
            if let Err(e) = fs.sync_file(path) {
                if fs.exists(path) {
                    return Err(e);
                }
            }
        }
        // Blob files are created while their WAL is active, and their entries may not be.
        fs.sync_dir(&self.dir)?;
        sealed.clear();
        log.add_record(WriteBatch::wal_marker(WalMarker::Sync).data())
    }

    /// Freezes the memtable and waits until every frozen memtable is flushed.
    pub(crate) fn flush(&self) -> Result<()> {
        self.write(&WriteOptions::default(), None)?;
        let mut state = self.state.lock();
        while !state.imm.is_empty() {
            Self::check_bg_error(&state)?;
            if self.shutting_down.load(Ordering::Acquire) {
                return Err(Error::ShuttingDown);
            }
            self.work_available.notify_all();
            self.background_done.wait(&mut state);
        }
        Self::check_bg_error(&state)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::{Db, Options};

    #[test]
    fn writer_threads_that_queue_give_back_every_spin_turn_and_lose_no_write() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Arc::new(Db::open(dir.path(), Options::default()).expect("open"));
        // More writer threads than cores, so that writers queue behind each other.
        let threads = 2 * *CORES + 2;
        let writers: Vec<_> = (0..threads)
            .map(|t| {
                let db = Arc::clone(&db);
                std::thread::spawn(move || {
                    for i in 0..2000 {
                        db.put(format!("{t:02}-{i:05}"), format!("{i}"))
                            .expect("put");
                    }
                })
            })
            .collect();
        for w in writers {
            w.join().expect("writer");
        }
        for t in 0..threads {
            for i in (0..2000).step_by(97) {
                assert_eq!(
                    db.get(format!("{t:02}-{i:05}")).expect("get"),
                    Some(format!("{i}").into_bytes()),
                    "thread {t}, write {i}"
                );
            }
        }
        // Every turn taken was given back. Other tests of this binary may hold one for a few
        // microseconds at any moment, so a turn still held after seconds is a leak.
        let deadline = Instant::now() + Duration::from_secs(10);
        while SPINNING_FOLLOWERS.load(Ordering::Acquire) != 0 {
            assert!(
                Instant::now() < deadline,
                "a spin turn was never given back"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}
