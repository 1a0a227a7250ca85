//! Keeps open [`TableReader`]s by file number, bounded by `max_open_files`, so that a read does
//! not reopen and re-verify a table's footer, index and filter each time.
//!
//! Thread-safety: shared by every reader and background job; opening the same table twice at
//! once is harmless (one copy wins the cache slot).

use std::path::PathBuf;
use std::sync::Arc;

use crate::cache::BlockCache;
use crate::env::Fs;
use crate::error::Result;
use crate::filename::table_file_name;
use crate::iter::{EmptyIterator, InternalIterator};
use crate::sstable::{ReadFlags, TableOptions, TableReader};

/// File descriptors kept back from `max_open_files` for WALs, the manifest and the lock.
const RESERVED_FILES: usize = 10;

/// Open tables by file number.
pub(crate) struct TableCache {
    dir: PathBuf,
    fs: Arc<dyn Fs>,
    table_options: TableOptions,
    block_cache: Option<Arc<BlockCache>>,
    tables: quick_cache::sync::Cache<u64, Arc<TableReader>>,
}

impl TableCache {
    pub(crate) fn new(
        dir: PathBuf,
        options: &crate::Options,
        block_cache: Option<Arc<BlockCache>>,
    ) -> Self {
        let capacity = options.max_open_files.saturating_sub(RESERVED_FILES).max(1);
        TableCache {
            dir,
            fs: options.fs.clone(),
            table_options: TableOptions::from_options(options),
            block_cache,
            tables: quick_cache::sync::Cache::new(capacity),
        }
    }

    /// The open table `number`, opening it on a miss.
    pub(crate) fn get(&self, number: u64) -> Result<Arc<TableReader>> {
        self.tables.get_or_insert_with(&number, || {
            let path = table_file_name(&self.dir, number);
            let file = self.fs.open_random(&path)?;
            let reader = TableReader::open(
                self.table_options.clone(),
                file,
                path,
                number,
                self.block_cache.clone(),
            )?;
            Ok(Arc::new(reader))
        })
    }

    /// An iterator over table `number`; an open failure becomes the iterator's status.
    pub(crate) fn iter(&self, number: u64, flags: ReadFlags) -> Box<dyn InternalIterator> {
        iter_or_error(self.get(number), flags)
    }

    /// Forgets table `number` (it is being deleted), returning the cache's handle to it so
    /// the caller chooses where the last reference (and the table's unmapping) goes.
    pub(crate) fn evict(&self, number: u64) -> Option<Arc<TableReader>> {
        self.tables.remove(&number).map(|(_, table)| table)
    }
}

/// An iterator over an opened table, or, if opening it failed, an empty one whose status is
/// that error (so a reader reports the table, never skips it).
pub(crate) fn iter_or_error(
    table: Result<Arc<TableReader>>,
    flags: ReadFlags,
) -> Box<dyn InternalIterator> {
    match table {
        Ok(table) => Box::new(table.iter(flags)),
        Err(e) => Box::new(EmptyIterator::with_error(e)),
    }
}
