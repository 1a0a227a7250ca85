//! Sorted table files: immutable files of internal keys in order, written once by a
//! [`TableBuilder`] (flush or compaction) and read by many threads through a [`TableReader`].
//!
//! ```text
//! table := data block* | filter block? | index block | properties block | metaindex block
//!          | footer (56 bytes)
//! every block is followed by a 5-byte trailer: compression type u8 | masked crc32c fixed32
//! ```
//! - Data blocks hold the entries, prefix-compressed with restart points ([`block`]).
//! - The index block has one entry per data block: a key `>=` every key of that block and `<`
//!   every key of the next, mapping to the block's handle.
//! - The filter block is one bloom filter over every user key ([`filter`]).
//! - The properties block records counts and the key range ([`properties`]).
//! - The metaindex block names the filter and properties blocks.
//! - The footer points at the metaindex and index blocks ([`mod@format`]).
//!
//! Invariants: keys in a table increase strictly in internal key order; every byte read from
//! the file is either checksum-verified or bounds-checked, and damage surfaces as
//! [`crate::Error::Corruption`] naming the file and offset, never as a panic or wrong data
//! (unless the reader opted out of checksums with [`ReadFlags::verify_checksums`]).
//!
//! Thread-safety: a [`TableBuilder`] belongs to one thread; a [`TableReader`] is immutable after
//! open and shared as `Arc<TableReader>`; each [`TableIterator`] belongs to one thread.
//!
//! Format doc: `docs/format/sstable.md`.

pub mod block;
mod buffers;
mod builder;
pub mod filter;
pub mod format;
pub mod properties;
mod reader;

pub use builder::TableBuilder;
pub use properties::TableProperties;
pub use reader::{FilterUse, TableIterator, TableReader};

use crate::key::InternalKeyComparator;
use crate::options::Compression;

/// Metaindex name of the cache-local bloom filter block that tables are written with.
/// Persisted: never rename.
pub const FILTER_BLOCK_NAME: &str = "shale.filter.blocked_bloom.xxh3";
/// Metaindex name of the whole-table bloom filter block of tables written before the
/// cache-local filter; still read. Persisted: never rename.
pub const LEGACY_FILTER_BLOCK_NAME: &str = "shale.filter.bloom.xxh3";
/// Metaindex name of the properties block. Persisted: never rename.
pub const PROPERTIES_BLOCK_NAME: &str = "shale.properties";

/// The settings a table is written and read with.
#[derive(Debug, Clone)]
pub struct TableOptions {
    /// Orders the keys.
    pub icmp: InternalKeyComparator,
    /// Target uncompressed size of a data block.
    pub block_size: usize,
    /// Entries between restart points in data blocks.
    pub block_restart_interval: usize,
    /// Bloom filter bits per key; 0 writes no filter.
    pub bloom_bits_per_key: u32,
    /// How data and index blocks are compressed.
    pub compression: Compression,
    /// LZ4's acceleration when `compression` is LZ4 (1: LZ4's default). Only the writer uses
    /// it; every acceleration writes the same format.
    pub lz4_acceleration: u32,
}

impl TableOptions {
    /// The table settings of a database's options.
    pub fn from_options(o: &crate::Options) -> TableOptions {
        TableOptions {
            icmp: InternalKeyComparator::new(o.comparator.clone()),
            block_size: o.block_size,
            block_restart_interval: o.block_restart_interval,
            bloom_bits_per_key: o.bloom_bits_per_key,
            compression: o.compression,
            lz4_acceleration: 1,
        }
    }

    /// The settings of the tables a flush writes: as [`TableOptions::from_options`], with
    /// [`crate::Options::flush_lz4_acceleration`].
    pub fn for_flush(o: &crate::Options) -> TableOptions {
        TableOptions {
            lz4_acceleration: o.flush_lz4_acceleration,
            ..TableOptions::from_options(o)
        }
    }
}

/// Per-read switches for table reads.
#[derive(Debug, Clone, Copy)]
pub struct ReadFlags {
    /// Check each data block's checksum when it is read from the file (blocks found in the
    /// cache were checked when they were loaded, or loaded by a reader that opted out).
    pub verify_checksums: bool,
    /// Insert data blocks read from the file into the block cache.
    pub fill_cache: bool,
    /// Reading front to back once (a compaction input): every [`RELEASE_BEHIND_BYTES`] the
    /// iterator tells the file it is done with the bytes before its current block (see
    /// [`crate::env::RandomAccessFile::release`]).
    pub release_behind: bool,
}

/// How far a [`ReadFlags::release_behind`] iterator moves between releases: large enough that
/// the `madvise` call is rare, small enough that a compaction holds little of its inputs.
pub const RELEASE_BEHIND_BYTES: u64 = 1 << 20;

impl Default for ReadFlags {
    fn default() -> Self {
        ReadFlags {
            verify_checksums: true,
            fill_cache: true,
            release_behind: false,
        }
    }
}

/// Name of a compression setting as recorded in table properties (`none`, `snappy`, `lz4`,
/// `zstd:LEVEL`); [`Compression::parse`] reads it back.
pub fn compression_name(c: Compression) -> String {
    match c {
        Compression::None => "none".into(),
        Compression::Snappy => "snappy".into(),
        Compression::Lz4 => "lz4".into(),
        Compression::Zstd(level) => format!("zstd:{level}"),
    }
}

#[cfg(test)]
mod tests;
