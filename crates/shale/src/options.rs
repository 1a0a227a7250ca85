//! Options for opening a database, reading and writing.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::env::{Clock, Fs, PosixFs, SystemClock};
use crate::key::{BytewiseComparator, Comparator};
use crate::merge::MergeOperator;
use crate::snapshot::Snapshot;
use crate::ttl::CompactionFilter;

/// The largest acceleration LZ4 honours (`LZ4_ACCELERATION_MAX` in lz4.c); it clamps larger ones.
const LZ4_MAX_ACCELERATION: u32 = 65537;

/// How table blocks are compressed. Persisted as the block trailer's type byte: never renumber
/// the codes in [`Compression::code`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// Blocks are stored raw.
    None,
    /// Snappy, as LevelDB uses by default.
    Snappy,
    /// LZ4 block format: the fastest to decompress.
    Lz4,
    /// Zstandard at the given level (1 to 22; 3 is a good default).
    Zstd(i32),
}

impl Compression {
    /// The byte recorded in each block trailer. Persisted: never renumber.
    pub fn code(self) -> u8 {
        match self {
            Compression::None => 0,
            Compression::Snappy => 1,
            Compression::Lz4 => 2,
            Compression::Zstd(_) => 3,
        }
    }

    /// Parses a codec name as used on command lines: none, snappy, lz4, zstd, zstd:LEVEL.
    pub fn parse(name: &str) -> Option<Compression> {
        match name.to_ascii_lowercase().as_str() {
            "none" | "no" | "off" => Some(Compression::None),
            "snappy" => Some(Compression::Snappy),
            "lz4" => Some(Compression::Lz4),
            "zstd" => Some(Compression::Zstd(3)),
            other => other
                .strip_prefix("zstd:")
                .and_then(|l| l.parse().ok())
                .map(Compression::Zstd),
        }
    }
}

/// Options for [`crate::Db::open`]. `Options::default()` serves most uses.
#[derive(Clone)]
pub struct Options {
    /// Create the database if the directory holds none. Default: true.
    pub create_if_missing: bool,
    /// Fail if the database already exists. Default: false.
    pub error_if_exists: bool,
    /// At open, read every live table's footer and index and fail on any damage; during
    /// compaction, verify every block read. Default: false (blocks are still checksummed on
    /// every read; this adds up-front checks).
    pub paranoid_checks: bool,
    /// Bytes of writes gathered in a memtable before it is frozen and flushed. Default: 8 MiB.
    pub write_buffer_size: usize,
    /// Memtables (active plus frozen) kept before writes wait for a flush. Default: 2.
    ///
    /// Each one more costs another `write_buffer_size` of memory and lets two flushes run while
    /// the writer fills the next memtable. A batched sequential load, whose pace the flush sets,
    /// ran 13% faster with 3 in a lockstep run (`docs/benchmarks.md`, "Tried and dropped in the
    /// session after `95cf582`"); the random loads moved within noise.
    pub max_write_buffer_number: usize,
    /// Finished WAL files kept to be written over by later WALs instead of being deleted
    /// (RocksDB's `recycle_log_file_num`). Writing over a file's cached, allocated pages costs
    /// the writer far less than growing a new file page by page, and a synced write to a reused
    /// file does not change its size. Each kept file holds about `write_buffer_size` bytes of
    /// disk; [`crate::Db::compact_range`] deletes them. 0 deletes every finished WAL. Default: 1.
    pub recycle_log_file_num: usize,
    /// Table files kept open in the table cache. Default: 1000.
    pub max_open_files: usize,
    /// Uncompressed size of a data block. Default: 2 KiB. A point lookup that misses the block
    /// cache decompresses and checksums one whole block, so smaller blocks make random reads
    /// cheaper; scans pay a little more per block, and compression loses a little.
    pub block_size: usize,
    /// Keys between restart points inside a block. Default: 16.
    pub block_restart_interval: usize,
    /// Memory the block cache may hold, in bytes: its uncompressed blocks, counted with their
    /// buffers' capacity and the cache's own per-block overhead. Room the blocks leave free is
    /// lent to spare memtable memory during writes (beyond one write buffer's worth), and holds
    /// no blocks until it is repaid. Default: 8 MiB.
    pub block_cache_capacity: usize,
    /// Bloom filter bits per key, at most 64 (beyond about 20 the false-positive rate no
    /// longer falls measurably); 0 turns filters off. Default: 10 (about 1% false positives).
    pub bloom_bits_per_key: u32,
    /// Block compression. Default: LZ4.
    pub compression: Compression,
    /// LZ4's acceleration for the tables a flush writes (recovery's flushes of replayed WALs
    /// too), when `compression` is LZ4: 1 is LZ4's default, which compactions use; each step up
    /// trades some compression for speed, in the same format. Default: 2.
    ///
    /// A flush runs beside the writers and, in a batch load, sets their pace. Its tables are
    /// level 0's, which compactions rewrite with the default; a table moved down whole (a
    /// sequential load) keeps the flush's. On db_bench's data, acceleration 2 made a 1M-entry
    /// batch load 8% faster and its tables 0.7% larger (3: 25% larger).
    pub flush_lz4_acceleration: u32,
    /// Target size of a table file written by compaction. Default: 4 MiB.
    pub max_file_size: u64,
    /// Number of level-0 files that triggers a compaction. Default: 4.
    pub level0_file_num_compaction_trigger: usize,
    /// Number of level-0 files at which each write is delayed by 1 ms. Default: 20, as in
    /// RocksDB. LevelDB's 8 delayed about a thousand writes of a 1M-key overwrite by 1 ms each
    /// (about 40% of its time) while one level-0 compaction ran; letting level 0 grow instead
    /// lets the next compaction merge more files into level 1 at once, which costs less
    /// compaction work per byte written.
    pub level0_slowdown_writes_trigger: usize,
    /// Number of level-0 files at which writes wait for compaction. Default: 36, as in RocksDB.
    pub level0_stop_writes_trigger: usize,
    /// Target total size of level 1; each deeper level is `max_bytes_for_level_multiplier`
    /// times larger. Default: 32 MiB.
    pub max_bytes_for_level_base: u64,
    /// Growth factor between levels. Default: 10.
    pub max_bytes_for_level_multiplier: f64,
    /// Threads for flushes and compactions. Default: 2.
    pub max_background_jobs: usize,
    /// Whether background compactions merge at the lowest CPU priority.
    ///
    /// With `true`, a background compaction starts its merge on a thread of its own at the
    /// lowest CPU priority (nice 19 on Linux, as RocksDB's `CpuPriority::kLow`, which there
    /// also lowers the thread's default I/O priority; elsewhere at normal priority), while
    /// flushes, which writes wait for, and the compaction's manifest edit keep the background
    /// threads' normal priority. Where the application's threads, a flush and a compaction
    /// share too few cores, the compaction then gets a small share of them (under Linux's
    /// scheduler nice 19 weighs about 1/70 of nice 0 among the threads of one cgroup or
    /// autogroup) instead of an equal one.
    ///
    /// The merge finishes at normal priority, from the next user key on, once level 0 reaches
    /// `level0_slowdown_writes_trigger` (writers are being slowed for want of it) or once
    /// writer threads alone keep every core busy (64 writes have queued behind as many writers
    /// as there are cores, less one, since it began). A compaction picked while level 0 already
    /// holds `level0_slowdown_writes_trigger` files runs at normal priority throughout. Manual
    /// compactions ([`crate::Db::compact_range`]) run on the caller's thread, at its priority.
    ///
    /// Measured on two cores (`docs/benchmarks.md`, medians of 6 alternated pairs): with one
    /// writer thread, random fills ran 11% and batched random fills 18% faster, overwrites 8%
    /// and merges 8% slower, and the backward scan right after the fills 22% slower; two
    /// readers beside a writer took 7.5 -> 6.1 us a read while the writer wrote about 30%
    /// less (3 pairs); two writer threads ran as fast as without it. Hence off by default.
    /// Default: `false`.
    pub low_priority_compactions: bool,
    /// Most parts one background compaction is split into, by key range, each written by its
    /// own thread at the same time (RocksDB's `max_subcompactions`). A compaction splits at the
    /// tables of one of its input levels of level 1 or deeper, into parts of about equal bytes
    /// and at least about `max_file_size` each, so small compactions and a level-0 compaction
    /// into an empty level run whole. 1 runs each on one thread: on a machine with few cores
    /// the extra threads take CPU time from the writers while a write burst is being
    /// compacted. A manual compaction
    /// ([`crate::Db::compact_range`]), which its caller waits for and which no background
    /// compaction runs beside, splits into up to this or `max_background_jobs` parts, whichever
    /// is more. Default: 1.
    pub max_subcompactions: usize,
    /// Orders user keys. Default: bytewise.
    pub comparator: Arc<dyn Comparator>,
    /// Combines merge operands; `merge` fails without one. Default: none.
    pub merge_operator: Option<Arc<dyn MergeOperator>>,
    /// Shown the newest value of every key compaction rewrites (never a version a snapshot
    /// reads); may keep, drop or change it. See `docs/ttl.md`. Default: none.
    pub compaction_filter: Option<Arc<dyn CompactionFilter>>,
    /// Expiry applied to puts that give none of their own, `now + ttl` at the time of the write
    /// (merge operands and deletions never expire). Stored with each entry: changing it at
    /// reopen affects only later writes. Default: none (never expire).
    pub default_ttl: Option<Duration>,
    /// Key-value separation: a put (plain or expiring, never a merge operand) whose value is
    /// at least this many bytes stores the value once in the current blob file
    /// (`NNNNNN.blob`, one per WAL, `docs/format/blob.md`) and only a small blob reference in
    /// the WAL, the memtable and the tables, so flushes and compactions copy the reference and
    /// never the value. Reads resolve the reference transparently. `None` keeps every value in
    /// the tree. Changing it at reopen affects only later writes. Default: `Some(16 KiB)`.
    pub min_blob_size: Option<usize>,
    /// When the share of a blob file's bytes that no table references any more reaches this
    /// fraction, compactions move its still-live values into a new blob file (and tables that
    /// still point into it are compacted for that reason alone), so the old file can be
    /// deleted. Between 0 (exclusive) and 1. Default: 0.5.
    pub blob_garbage_collection_threshold: f64,
    /// The filesystem. Default: the real one.
    pub fs: Arc<dyn Fs>,
    /// The clock used for TTL: expiry times and the time reads and compactions judge them at.
    /// Keep it monotonic. Default: the system clock.
    pub clock: Arc<dyn Clock>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            create_if_missing: true,
            error_if_exists: false,
            paranoid_checks: false,
            write_buffer_size: 8 << 20,
            max_write_buffer_number: 2,
            recycle_log_file_num: 1,
            max_open_files: 1000,
            block_size: 2048,
            block_restart_interval: 16,
            block_cache_capacity: 8 << 20,
            bloom_bits_per_key: 10,
            compression: Compression::Lz4,
            flush_lz4_acceleration: 2,
            max_file_size: 4 << 20,
            level0_file_num_compaction_trigger: 4,
            level0_slowdown_writes_trigger: 20,
            level0_stop_writes_trigger: 36,
            max_bytes_for_level_base: 32 << 20,
            max_bytes_for_level_multiplier: 10.0,
            max_background_jobs: 2,
            low_priority_compactions: false,
            max_subcompactions: 1,
            comparator: Arc::new(BytewiseComparator),
            merge_operator: None,
            compaction_filter: None,
            default_ttl: None,
            min_blob_size: Some(16 * 1024),
            blob_garbage_collection_threshold: 0.5,
            fs: Arc::new(PosixFs::new()),
            clock: Arc::new(SystemClock),
        }
    }
}

impl fmt::Debug for Options {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Options")
            .field("create_if_missing", &self.create_if_missing)
            .field("error_if_exists", &self.error_if_exists)
            .field("paranoid_checks", &self.paranoid_checks)
            .field("write_buffer_size", &self.write_buffer_size)
            .field("max_write_buffer_number", &self.max_write_buffer_number)
            .field("recycle_log_file_num", &self.recycle_log_file_num)
            .field("max_open_files", &self.max_open_files)
            .field("block_size", &self.block_size)
            .field("block_restart_interval", &self.block_restart_interval)
            .field("block_cache_capacity", &self.block_cache_capacity)
            .field("bloom_bits_per_key", &self.bloom_bits_per_key)
            .field("compression", &self.compression)
            .field("flush_lz4_acceleration", &self.flush_lz4_acceleration)
            .field("max_file_size", &self.max_file_size)
            .field("max_background_jobs", &self.max_background_jobs)
            .field("low_priority_compactions", &self.low_priority_compactions)
            .field("max_subcompactions", &self.max_subcompactions)
            .field("comparator", &self.comparator.name())
            .field(
                "merge_operator",
                &self.merge_operator.as_ref().map(|m| m.name().to_string()),
            )
            .field("default_ttl", &self.default_ttl)
            .field("min_blob_size", &self.min_blob_size)
            .field(
                "blob_garbage_collection_threshold",
                &self.blob_garbage_collection_threshold,
            )
            .finish_non_exhaustive()
    }
}

impl Options {
    /// Checks that the options make sense together.
    pub fn validate(&self) -> crate::Result<()> {
        let bad = |m: &str| Err(crate::Error::InvalidArgument(m.to_string()));
        if self.write_buffer_size < 4 * 1024 {
            return bad("write_buffer_size must be at least 4 KiB");
        }
        if self.max_subcompactions == 0 {
            return bad("max_subcompactions must be at least 1");
        }
        if self.max_write_buffer_number < 2 {
            return bad("max_write_buffer_number must be at least 2");
        }
        if self.block_size < 256 || self.block_size > 64 << 20 {
            return bad("block_size must be between 256 bytes and 64 MiB");
        }
        if self.block_restart_interval == 0 {
            return bad("block_restart_interval must be at least 1");
        }
        if self.max_file_size < 4 * 1024 {
            return bad("max_file_size must be at least 4 KiB");
        }
        if self.level0_file_num_compaction_trigger == 0
            || self.level0_slowdown_writes_trigger < self.level0_file_num_compaction_trigger
            || self.level0_stop_writes_trigger < self.level0_slowdown_writes_trigger
        {
            return bad(&format!(
                "level-0 triggers must satisfy 0 < compaction <= slowdown <= stop, got \
                 level0_file_num_compaction_trigger {}, level0_slowdown_writes_trigger {}, \
                 level0_stop_writes_trigger {}",
                self.level0_file_num_compaction_trigger,
                self.level0_slowdown_writes_trigger,
                self.level0_stop_writes_trigger
            ));
        }
        if self.max_bytes_for_level_multiplier < 2.0 {
            return bad("max_bytes_for_level_multiplier must be at least 2");
        }
        if self.max_background_jobs == 0 {
            return bad("max_background_jobs must be at least 1");
        }
        if self.max_open_files < 16 {
            return bad("max_open_files must be at least 16");
        }
        if self.min_blob_size == Some(0) {
            return bad("min_blob_size must be at least 1 (None turns separation off)");
        }
        if !(self.blob_garbage_collection_threshold > 0.0
            && self.blob_garbage_collection_threshold <= 1.0)
        {
            return bad("blob_garbage_collection_threshold must be in (0, 1]");
        }
        // Unbounded, a table's filter would grow past what a block may hold (or abort the
        // allocation) and every flush would fail.
        if self.bloom_bits_per_key > 64 {
            return bad("bloom_bits_per_key must be at most 64 (0 turns filters off)");
        }
        if !(1..=LZ4_MAX_ACCELERATION).contains(&self.flush_lz4_acceleration) {
            return bad("flush_lz4_acceleration must be between 1 and 65537");
        }
        if let Compression::Zstd(level) = self.compression {
            if !(1..=22).contains(&level) {
                return bad("zstd level must be between 1 and 22");
            }
        }
        Ok(())
    }
}

/// Options for a read or an iterator.
#[derive(Clone, Default)]
pub struct ReadOptions {
    /// Read as of this snapshot instead of the latest state. It must come from the same `Db`
    /// handle ([`crate::Db::snapshot`]); one from another handle, or from an earlier open of
    /// the same directory, is refused with `InvalidArgument`.
    pub snapshot: Option<Snapshot>,
    /// Skip checksum verification of blocks read from disk. Default: false (verify).
    pub skip_checksums: bool,
    /// Do not insert blocks read by this operation into the block cache (for scans).
    /// Default: false.
    pub dont_fill_cache: bool,
    /// Iterators stop before keys below this (inclusive lower bound).
    pub lower_bound: Option<Vec<u8>>,
    /// Iterators stop at keys at or above this (exclusive upper bound).
    pub upper_bound: Option<Vec<u8>>,
}

impl ReadOptions {
    /// Read options at a snapshot.
    pub fn at(snapshot: &Snapshot) -> Self {
        ReadOptions {
            snapshot: Some(snapshot.clone()),
            ..ReadOptions::default()
        }
    }
}

/// Options for a write.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteOptions {
    /// Sync the WAL before acknowledging, so the write survives power loss. Default: false.
    pub sync: bool,
    /// Skip the WAL: the write is lost by a crash before its memtable is flushed.
    /// Default: false.
    pub disable_wal: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_out_of_range_settings_name_themselves() {
        Options::default().validate().expect("defaults");
        for acceleration in [0, LZ4_MAX_ACCELERATION + 1] {
            let options = Options {
                flush_lz4_acceleration: acceleration,
                ..Options::default()
            };
            match options.validate() {
                Err(crate::Error::InvalidArgument(m)) => {
                    assert!(m.contains("flush_lz4_acceleration"), "{m}")
                }
                other => panic!("acceleration {acceleration}: {other:?}"),
            }
        }
        let fastest = Options {
            flush_lz4_acceleration: LZ4_MAX_ACCELERATION,
            ..Options::default()
        };
        fastest.validate().expect("LZ4's largest acceleration");
        for (bits, ok) in [(0, true), (64, true), (65, false), (u32::MAX, false)] {
            let options = Options {
                bloom_bits_per_key: bits,
                ..Options::default()
            };
            match options.validate() {
                Ok(()) => assert!(ok, "{bits} bits per key accepted"),
                Err(crate::Error::InvalidArgument(m)) => {
                    assert!(!ok && m.contains("bloom_bits_per_key"), "{bits}: {m}")
                }
                Err(e) => panic!("{bits}: {e}"),
            }
        }
    }
}
