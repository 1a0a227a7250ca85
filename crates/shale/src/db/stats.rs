//! Counters and the statistics reported by `Db::stats` and the `shale.*` properties.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

use super::DbInner;
use crate::batch::WriteBatch;
use crate::limits::NUM_LEVELS;

/// Counters updated on the hot paths with relaxed atomics.
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) user_bytes_written: AtomicU64,
    pub(crate) user_writes: AtomicU64,
    pub(crate) wal_bytes: AtomicU64,
    pub(crate) blob_bytes_written: AtomicU64,
    pub(crate) blob_bytes_relocated: AtomicU64,
    pub(crate) wal_syncs: AtomicU64,
    pub(crate) wal_files_reused: AtomicU64,
    pub(crate) slowdowns: AtomicU64,
    pub(crate) stalls: AtomicU64,
    pub(crate) stall_micros: AtomicU64,
    pub(crate) flushes: AtomicU64,
    pub(crate) flush_bytes: AtomicU64,
    pub(crate) compactions: AtomicU64,
    pub(crate) split_compactions: AtomicU64,
    pub(crate) compactions_raised: AtomicU64,
    pub(crate) trivial_moves: AtomicU64,
    pub(crate) expired_dropped: AtomicU64,
    pub(crate) expired_bytes_reclaimed: AtomicU64,
    pub(crate) filtered_dropped: AtomicU64,
    pub(crate) per_level: [LevelCounters; NUM_LEVELS],
}

/// Compaction work done into one level.
#[derive(Default)]
pub(crate) struct LevelCounters {
    pub(crate) compactions: AtomicU64,
    pub(crate) bytes_read: AtomicU64,
    pub(crate) bytes_written: AtomicU64,
    pub(crate) micros: AtomicU64,
}

/// Adds `n` to a counter that only the write queue's leader changes (one thread at a time, with
/// the database or WAL mutex held), readers only load.
///
/// A plain load and store instead of a locked read-modify-write: on x86 a locked instruction
/// waits until every earlier store (the WAL and memtable copies of the write just made, often
/// to lines not yet in the cache) has left the store buffer: in a fillrandom profile, the
/// locked add of the WAL byte count alone took 29% of the write path's own samples.
pub(crate) fn add_by_leader(counter: &AtomicU64, n: u64) {
    counter.store(
        counter.load(Ordering::Relaxed).wrapping_add(n),
        Ordering::Relaxed,
    );
}

impl Counters {
    /// A put written without a batch (see `DbInner::put_separated`): counted as the batch of
    /// one it stands for.
    pub(crate) fn record_user_put(&self, key_and_value_bytes: usize) {
        add_by_leader(&self.user_writes, 1);
        add_by_leader(&self.user_bytes_written, key_and_value_bytes as u64);
    }

    pub(crate) fn record_user_write(&self, batch: &WriteBatch) {
        add_by_leader(&self.user_writes, u64::from(batch.count()));
        add_by_leader(&self.user_bytes_written, batch.data_size() as u64);
    }
}

/// Per-level figures.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LevelStats {
    /// Level number.
    pub level: usize,
    /// Table files in the level.
    pub files: usize,
    /// Bytes of those files.
    pub bytes: u64,
    /// The level's compaction score (>= 1 means it is due).
    pub score: f64,
    /// Compactions that wrote into this level (flushes for level 0).
    pub compactions: u64,
    /// Bytes read by those compactions.
    pub bytes_read: u64,
    /// Bytes written by those compactions.
    pub bytes_written: u64,
    /// Time those compactions took, in microseconds.
    pub micros: u64,
}

/// A snapshot of the database's statistics.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DbStats {
    /// One entry per level.
    pub levels: Vec<LevelStats>,
    /// Bytes of user data written (encoded batches).
    pub user_bytes_written: u64,
    /// Operations written.
    pub user_writes: u64,
    /// Bytes appended to WALs.
    pub wal_bytes: u64,
    /// WAL syncs.
    pub wal_syncs: u64,
    /// Bytes of records the write path appended to blob files (separated values).
    pub blob_bytes_written: u64,
    /// Bytes of records blob garbage collection copied to new blob files.
    pub blob_bytes_relocated: u64,
    /// Blob files the current version references.
    pub blob_files: u64,
    /// Record bytes of those blob files.
    pub blob_total_bytes: u64,
    /// Of `blob_total_bytes`, the bytes no table references any more.
    pub blob_garbage_bytes: u64,
    /// Bytes written by flushes.
    pub flush_bytes: u64,
    /// Memtables flushed.
    pub flushes: u64,
    /// Compactions run (excluding trivial moves).
    pub compactions: u64,
    /// Of `compactions`, those split into parts that ran at once
    /// ([`crate::Options::max_subcompactions`]).
    pub split_compactions: u64,
    /// Merges begun at low priority ([`crate::Options::low_priority_compactions`]) and
    /// finished at normal priority, because level 0 reached `level0_slowdown_writes_trigger`
    /// or writer threads crowded every core while they ran. Each part of a split compaction is
    /// a merge of its own, so this may exceed `compactions`.
    pub compactions_raised: u64,
    /// Tables moved down a level without rewriting.
    pub trivial_moves: u64,
    /// Bytes written to tables, WALs and blob files for each byte of user data.
    pub write_amplification: f64,
    /// WALs started in a reused file instead of a new one
    /// ([`crate::Options::recycle_log_file_num`]).
    pub wal_files_reused: u64,
    /// Writes delayed by a level-0 slowdown.
    pub slowdowns: u64,
    /// Times a writer had to wait for a flush or compaction.
    pub stalls: u64,
    /// Microseconds writers spent in those waits and in slowdowns: how much of a write load's
    /// time went to back-pressure, which the count alone does not tell.
    pub stall_micros: u64,
    /// Expired entries compaction removed (dropped, or replaced by a tombstone where one must
    /// hide older versions of the key).
    pub expired_dropped: u64,
    /// Bytes of those expired entries no table holds any more: internal key and stored value of
    /// each dropped entry, the stored value of each one a tombstone replaced, counted before
    /// block compression. The space on disk shows in `levels[..].bytes` and the
    /// `shale.total-sst-size` property.
    pub expired_bytes_reclaimed: u64,
    /// Entries removed by the compaction filter.
    pub filtered_dropped: u64,
    /// Bytes held by memtables.
    pub memtable_bytes: u64,
    /// Bytes of spare memtable memory kept for the next memtables; unmapped by a background
    /// thread once no memtable has taken memory for 200 ms.
    pub memtable_spare_bytes: u64,
    /// Bytes held by the block cache.
    pub block_cache_usage: u64,
    /// Bytes of the block cache's capacity lent to spare memtable memory: the memory beyond one
    /// write buffer's worth of memtables and spares, which the cache leaves free meanwhile.
    pub block_cache_lent: u64,
    /// Capacity of the block cache.
    pub block_cache_capacity: u64,
    /// Block cache hits.
    pub block_cache_hits: u64,
    /// Block cache misses.
    pub block_cache_misses: u64,
    /// Sequence number of the last write.
    pub last_sequence: u64,
}

impl DbInner {
    pub(crate) fn stats(&self) -> DbStats {
        let view = self.current_view();
        let scores = self.state.lock().versions.level_scores();
        let c = &self.stats;
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let levels: Vec<LevelStats> = (0..NUM_LEVELS)
            .map(|level| LevelStats {
                level,
                files: view.version.num_files(level),
                bytes: view.version.level_bytes(level),
                score: scores.get(level).copied().unwrap_or(0.0),
                compactions: load(&c.per_level[level].compactions),
                bytes_read: load(&c.per_level[level].bytes_read),
                bytes_written: load(&c.per_level[level].bytes_written),
                micros: load(&c.per_level[level].micros),
            })
            .collect();
        let user = load(&c.user_bytes_written);
        let table_bytes: u64 = levels.iter().map(|l| l.bytes_written).sum();
        let wal = load(&c.wal_bytes);
        let memtable_bytes = view.mem.approximate_memory_usage()
            + view
                .imm
                .iter()
                .map(|m| m.approximate_memory_usage())
                .sum::<usize>();
        let (usage, capacity, hits, misses) = match &self.block_cache {
            Some(cache) => (
                cache.usage() as u64,
                cache.capacity() as u64,
                cache.hits(),
                cache.misses(),
            ),
            None => (0, 0, 0, 0),
        };
        // The database's pool is the only borrower of its cache; its two figures are read under
        // one lock, so the loan never shows more than the spares it is for.
        let (spare, lent) = self.chunk_pool.spare_and_lent_bytes();
        DbStats {
            levels,
            user_bytes_written: user,
            user_writes: load(&c.user_writes),
            wal_bytes: wal,
            wal_syncs: load(&c.wal_syncs),
            blob_bytes_written: load(&c.blob_bytes_written),
            blob_bytes_relocated: load(&c.blob_bytes_relocated),
            blob_files: view.version.blob_files().len() as u64,
            blob_total_bytes: view
                .version
                .blob_files()
                .values()
                .map(|m| m.total_bytes)
                .sum(),
            blob_garbage_bytes: view
                .version
                .blob_files()
                .values()
                .map(|m| m.garbage_bytes)
                .sum(),
            flush_bytes: load(&c.flush_bytes),
            flushes: load(&c.flushes),
            compactions: load(&c.compactions),
            split_compactions: load(&c.split_compactions),
            compactions_raised: load(&c.compactions_raised),
            trivial_moves: load(&c.trivial_moves),
            write_amplification: if user == 0 {
                0.0
            } else {
                (table_bytes + wal + load(&c.blob_bytes_written) + load(&c.blob_bytes_relocated))
                    as f64
                    / user as f64
            },
            wal_files_reused: load(&c.wal_files_reused),
            slowdowns: load(&c.slowdowns),
            stalls: load(&c.stalls),
            stall_micros: load(&c.stall_micros),
            expired_dropped: load(&c.expired_dropped),
            expired_bytes_reclaimed: load(&c.expired_bytes_reclaimed),
            filtered_dropped: load(&c.filtered_dropped),
            memtable_bytes: memtable_bytes as u64,
            memtable_spare_bytes: spare as u64,
            block_cache_usage: usage,
            block_cache_lent: lent as u64,
            block_cache_capacity: capacity,
            block_cache_hits: hits,
            block_cache_misses: misses,
            last_sequence: self.last_sequence.load(Ordering::Acquire),
        }
    }

    pub(crate) fn property(&self, name: &str) -> Option<String> {
        let rest = name.strip_prefix("shale.")?;
        if let Some(level) = rest.strip_prefix("num-files-at-level") {
            let level: usize = level.parse().ok()?;
            return (level < NUM_LEVELS)
                .then(|| self.current_view().version.num_files(level).to_string());
        }
        match rest {
            "stats" => Some(format_stats(&self.stats())),
            "sstables" => {
                let view = self.current_view();
                let mut out = String::new();
                for level in 0..NUM_LEVELS {
                    let _ = writeln!(out, "--- level {level} ---");
                    for f in view.version.files(level) {
                        let _ = writeln!(
                            out,
                            " {}:{}[{:?} .. {:?}]",
                            f.number,
                            f.file_size,
                            String::from_utf8_lossy(f.smallest_user_key()),
                            String::from_utf8_lossy(f.largest_user_key())
                        );
                    }
                }
                Some(out)
            }
            "approximate-memory-usage" => Some(self.stats().memtable_bytes.to_string()),
            "block-cache-usage" => Some(self.stats().block_cache_usage.to_string()),
            "total-sst-size" => {
                let view = self.current_view();
                Some(
                    (0..NUM_LEVELS)
                        .map(|l| view.version.level_bytes(l))
                        .sum::<u64>()
                        .to_string(),
                )
            }
            "last-sequence" => Some(self.last_sequence.load(Ordering::Acquire).to_string()),
            _ => None,
        }
    }
}

/// The multi-line table of `shale.stats`.
pub(crate) fn format_stats(s: &DbStats) -> String {
    let mb = |b: u64| b as f64 / 1048576.0;
    let mut out = String::new();
    let _ = writeln!(out, "                               Compactions");
    let _ = writeln!(
        out,
        "Level  Files Size(MB) Score Time(sec) Count Read(MB) Write(MB)"
    );
    let _ = writeln!(
        out,
        "---------------------------------------------------------------"
    );
    for l in &s.levels {
        if l.files == 0 && l.compactions == 0 {
            continue;
        }
        let _ = writeln!(
            out,
            "{:>5} {:>6} {:>8.1} {:>5.2} {:>9.1} {:>5} {:>8.1} {:>9.1}",
            l.level,
            l.files,
            mb(l.bytes),
            l.score,
            l.micros as f64 / 1e6,
            l.compactions,
            mb(l.bytes_read),
            mb(l.bytes_written)
        );
    }
    let _ = writeln!(
        out,
        "User writes: {} ops, {:.1} MB; WAL: {:.1} MB, {} syncs, {} files reused; write amplification {:.2}",
        s.user_writes,
        mb(s.user_bytes_written),
        mb(s.wal_bytes),
        s.wal_syncs,
        s.wal_files_reused,
        s.write_amplification
    );
    let _ = writeln!(
        out,
        "Flushes: {}; compactions: {} ({} split); merges raised from low priority: {}; trivial moves: {}; slowdowns: {}; stalls: {} ({:.3} s waited)",
        s.flushes,
        s.compactions,
        s.split_compactions,
        s.compactions_raised,
        s.trivial_moves,
        s.slowdowns,
        s.stalls,
        s.stall_micros as f64 / 1e6
    );
    let _ = writeln!(
        out,
        "Expired dropped: {} ({:.1} MB reclaimed); filtered dropped: {}",
        s.expired_dropped,
        mb(s.expired_bytes_reclaimed),
        s.filtered_dropped
    );
    let _ = writeln!(
        out,
        "Memtables: {:.1} MB, {:.1} MB spare; block cache: {:.1} / {:.1} MB ({:.1} MB lent to \
         the spares), {} hits, {} misses",
        mb(s.memtable_bytes),
        mb(s.memtable_spare_bytes),
        mb(s.block_cache_usage),
        mb(s.block_cache_capacity),
        mb(s.block_cache_lent),
        s.block_cache_hits,
        s.block_cache_misses
    );
    out
}
