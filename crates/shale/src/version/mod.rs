//! The version layer: which table files make up the database, per level, and the manifest that
//! records every change to that set durably.
//!
//! - [`edit`]: [`VersionEdit`], the manifest record (a delta between versions), and
//!   [`FileMetaData`].
//! - [`version`]: [`Version`], an immutable set of files with the lookups reads and the picker
//!   need.
//! - [`set`]: [`VersionSet`], the current version plus the counters (file numbers, sequence,
//!   live WAL), the manifest writer, recovery, and compaction picking.
//!
//! Layering: uses `wal` (the manifest is a log file), `env`, `key`, `codec`; the compaction picker
//! (`crate::compaction`) reads versions; nothing here reads tables.
//! Format doc: `docs/format/manifest.md`; directory layout: `docs/format/files.md`.

pub mod edit;
pub mod set;
// The brief names the file `version/version.rs`; the inner module holds the `Version` type.
#[allow(clippy::module_inception)]
pub mod version;

pub use edit::{FileMetaData, VersionEdit};
pub use set::{RecoveredState, VersionSet, DEFAULT_MAX_MANIFEST_BYTES};
pub use version::{total_file_size, BlobFileMeta, Version};
