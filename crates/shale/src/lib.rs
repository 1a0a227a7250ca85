//! shale: an embedded, persistent, ordered key-value store.
//!
//! An LSM tree: writes go to a write-ahead log and a memtable; full memtables are flushed to
//! sorted table files; background compaction merges tables down a leveled tree. See
//! `ARCHITECTURE.md` for the layers and paths, and `docs/format/` for every on-disk format.

#![deny(missing_docs)]

pub mod batch;
mod bigbuf;
pub mod blob;
pub mod cache;
pub mod codec;
pub mod compaction;
mod db;
pub mod env;
mod error;
pub mod filename;
pub mod iter;
pub mod key;
pub mod limits;
pub mod memtable;
pub mod merge;
mod options;
mod prefetch;
mod snapshot;
pub mod sstable;
mod table_cache;
pub mod ttl;
pub mod version;
pub mod wal;

pub use batch::{WalMarker, WriteBatch};
pub use db::{Db, DbStats, LevelStats, Range, RepairReport};
pub use error::{Error, Result};
pub use iter::DbIterator;
pub use key::{BytewiseComparator, Comparator};
pub use merge::{MaxOperator, MergeOperator, StringAppendOperator, UInt64AddOperator};
pub use options::{Compression, Options, ReadOptions, WriteOptions};
pub use snapshot::Snapshot;
pub use ttl::{CompactionFilter, FilterDecision};

/// The README's examples run as doctests, so the front page never shows code that fails.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
struct ReadmeDoctests;
