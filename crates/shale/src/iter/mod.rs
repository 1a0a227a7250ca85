//! Iterators over internal keys, and the cursor contract every source (memtable, block, table,
//! level, merged view) implements.
//!
//! Contract: after any positioning call, `valid()` says whether `key()`/`value()` may be called.
//! An iterator that hits an error becomes invalid and reports the error from `status()`; callers
//! must check `status()` when `valid()` turns false, because invalid-with-error must never be
//! mistaken for "no more data".

use crate::error::Result;

/// A bidirectional cursor over sorted internal keys.
pub trait InternalIterator: Send {
    /// True when positioned at an entry.
    fn valid(&self) -> bool;
    /// Positions at the first entry.
    fn seek_to_first(&mut self);
    /// Positions at the last entry.
    fn seek_to_last(&mut self);
    /// Positions at the first entry with key `>= target` (an internal key).
    fn seek(&mut self, target: &[u8]);
    /// Positions at the last entry with key `<= target` (an internal key).
    fn seek_for_prev(&mut self, target: &[u8]);
    /// Moves to the next entry. REQUIRES: `valid()`.
    fn next(&mut self);
    /// Moves to the previous entry. REQUIRES: `valid()`.
    fn prev(&mut self);
    /// The current internal key. REQUIRES: `valid()`.
    fn key(&self) -> &[u8];
    /// The current value. REQUIRES: `valid()`.
    fn value(&self) -> &[u8];
    /// The first error met, if any.
    fn status(&self) -> Result<()>;
    /// The file the current entry was read from and the offset of its block there, for error
    /// messages; `None` for entries held in memory. REQUIRES: `valid()`.
    fn source(&self) -> Option<(&std::path::Path, u64)> {
        None
    }
}

mod db_iter;
mod level;
mod merging;
#[cfg(test)]
pub(crate) mod testing;

pub use db_iter::DbIterator;
pub(crate) use db_iter::{
    apply_merge, resolve_value, split_expiring, ReadContext, EXPIRY_PREFIX_LEN,
};
pub(crate) use level::{LevelIterator, LevelSource};
pub use merging::MergingIterator;

/// An iterator over nothing, or over nothing but an error.
pub struct EmptyIterator {
    error: Option<crate::Error>,
}

impl EmptyIterator {
    /// An iterator with no entries.
    pub fn new() -> Self {
        EmptyIterator { error: None }
    }
    /// An iterator with no entries whose status is `error`.
    pub fn with_error(error: crate::Error) -> Self {
        EmptyIterator { error: Some(error) }
    }
}

impl Default for EmptyIterator {
    fn default() -> Self {
        Self::new()
    }
}

impl InternalIterator for EmptyIterator {
    fn valid(&self) -> bool {
        false
    }
    fn seek_to_first(&mut self) {}
    fn seek_to_last(&mut self) {}
    fn seek(&mut self, _target: &[u8]) {}
    fn seek_for_prev(&mut self, _target: &[u8]) {}
    fn next(&mut self) {}
    fn prev(&mut self) {}
    fn key(&self) -> &[u8] {
        &[]
    }
    fn value(&self) -> &[u8] {
        &[]
    }
    fn status(&self) -> Result<()> {
        match &self.error {
            Some(e) => Err(e.duplicate()),
            None => Ok(()),
        }
    }
}
