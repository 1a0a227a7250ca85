//! Iterates one level (1 and deeper) whose tables hold disjoint, sorted key ranges, opening each
//! table only when the cursor reaches it.

use std::cmp::Ordering;
use std::sync::Arc;

use super::{EmptyIterator, InternalIterator};
use crate::error::Result;
use crate::key::InternalKeyComparator;
use crate::sstable::{ReadFlags, TableIterator, TableReader};
use crate::version::FileMetaData;

/// Where a [`LevelIterator`] finds its tables and opens them.
///
/// Why not just a list: a database iterator is often made for one seek (db_bench's
/// seekrandom makes one per lookup), and a list of its own cost every table of the level a
/// reference-count increment and decrement, each on a different cache line, plus the list's
/// allocation: a tenth of such a seek. A source can instead borrow the list from a version the
/// iterator already holds.
pub(crate) trait LevelSource: Send {
    /// The level's tables, sorted by key range and disjoint.
    fn files(&self) -> &[Arc<FileMetaData>];
    /// The open handle of table `number`.
    fn open(&self, number: u64) -> Result<Arc<TableReader>>;
}

/// A concatenation of the tables of one level.
pub(crate) struct LevelIterator<S: LevelSource> {
    icmp: InternalKeyComparator,
    source: S,
    flags: ReadFlags,
    /// Index in the source's files of the open table.
    index: usize,
    current: Option<Table>,
}

/// The open table's cursor, held by value rather than boxed: a scan asks it for its key, value
/// and validity at every step, and a direct call is cheaper than one through a vtable.
// The table cursor is the variant in use; boxing it is what this enum is here to avoid.
#[allow(clippy::large_enum_variant)]
enum Table {
    Open(TableIterator),
    /// The table could not be opened: invalid, with the error as its status.
    Failed(EmptyIterator),
}

impl Table {
    fn get(&self) -> &dyn InternalIterator {
        match self {
            Table::Open(t) => t,
            Table::Failed(e) => e,
        }
    }

    fn get_mut(&mut self) -> &mut dyn InternalIterator {
        match self {
            Table::Open(t) => t,
            Table::Failed(e) => e,
        }
    }

    #[inline]
    fn valid(&self) -> bool {
        match self {
            Table::Open(t) => t.valid(),
            Table::Failed(_) => false,
        }
    }

    #[inline]
    fn next(&mut self) {
        match self {
            Table::Open(t) => t.next(),
            Table::Failed(e) => e.next(),
        }
    }

    #[inline]
    fn key(&self) -> &[u8] {
        match self {
            Table::Open(t) => t.key(),
            Table::Failed(e) => e.key(),
        }
    }

    #[inline]
    fn value(&self) -> &[u8] {
        match self {
            Table::Open(t) => t.value(),
            Table::Failed(e) => e.value(),
        }
    }
}

impl<S: LevelSource> LevelIterator<S> {
    /// An iterator over the tables of `source`.
    pub(crate) fn new(icmp: InternalKeyComparator, source: S, flags: ReadFlags) -> Self {
        LevelIterator {
            icmp,
            source,
            flags,
            index: 0,
            current: None,
        }
    }

    fn open(&mut self, index: usize) {
        let files = self.source.files();
        let Some(file) = files.get(index) else {
            self.current = None;
            self.index = files.len();
            return;
        };
        if self.index == index && self.current.is_some() {
            return;
        }
        self.index = index;
        self.current = Some(match self.source.open(file.number) {
            Ok(table) => Table::Open(table.iter(self.flags)),
            Err(e) => Table::Failed(EmptyIterator::with_error(e)),
        });
    }

    fn current_failed(&self) -> bool {
        self.current
            .as_ref()
            .is_some_and(|c| c.get().status().is_err())
    }

    /// Moves forward over tables until one is positioned at an entry.
    fn skip_empty_forward(&mut self) {
        while self.current.as_ref().is_some_and(|c| !c.valid()) && !self.current_failed() {
            let next = self.index + 1;
            if next >= self.source.files().len() {
                self.current = None;
                return;
            }
            self.open(next);
            if let Some(c) = self.current.as_mut() {
                c.get_mut().seek_to_first();
            }
        }
    }

    /// Moves backward over tables until one is positioned at an entry.
    fn skip_empty_backward(&mut self) {
        while self.current.as_ref().is_some_and(|c| !c.valid()) && !self.current_failed() {
            if self.index == 0 {
                self.current = None;
                return;
            }
            self.open(self.index - 1);
            if let Some(c) = self.current.as_mut() {
                c.get_mut().seek_to_last();
            }
        }
    }
}

impl<S: LevelSource> InternalIterator for LevelIterator<S> {
    fn valid(&self) -> bool {
        self.current.as_ref().is_some_and(|c| c.valid())
    }

    fn seek_to_first(&mut self) {
        self.open(0);
        if let Some(c) = self.current.as_mut() {
            c.get_mut().seek_to_first();
        }
        self.skip_empty_forward();
    }

    fn seek_to_last(&mut self) {
        match self.source.files().len().checked_sub(1) {
            Some(last) => self.open(last),
            None => self.current = None,
        }
        if let Some(c) = self.current.as_mut() {
            c.get_mut().seek_to_last();
        }
        self.skip_empty_backward();
    }

    fn seek(&mut self, target: &[u8]) {
        // The first table whose largest key is >= target.
        let i = self
            .source
            .files()
            .partition_point(|f| self.icmp.compare(&f.largest, target) == Ordering::Less);
        self.open(i);
        if let Some(c) = self.current.as_mut() {
            c.get_mut().seek(target);
        }
        self.skip_empty_forward();
    }

    fn seek_for_prev(&mut self, target: &[u8]) {
        // The last table whose smallest key is <= target.
        let i = self
            .source
            .files()
            .partition_point(|f| self.icmp.compare(&f.smallest, target) != Ordering::Greater);
        match i.checked_sub(1) {
            Some(i) => self.open(i),
            None => {
                self.current = None;
                return;
            }
        }
        if let Some(c) = self.current.as_mut() {
            c.get_mut().seek_for_prev(target);
        }
        self.skip_empty_backward();
    }

    fn next(&mut self) {
        if let Some(c) = self.current.as_mut() {
            c.next();
        }
        self.skip_empty_forward();
    }

    fn prev(&mut self) {
        if let Some(c) = self.current.as_mut() {
            c.get_mut().prev();
        }
        self.skip_empty_backward();
    }

    fn key(&self) -> &[u8] {
        self.current.as_ref().map(|c| c.key()).unwrap_or(&[])
    }

    fn value(&self) -> &[u8] {
        self.current.as_ref().map(|c| c.value()).unwrap_or(&[])
    }

    fn status(&self) -> Result<()> {
        match &self.current {
            Some(c) => c.get().status(),
            None => Ok(()),
        }
    }

    fn source(&self) -> Option<(&std::path::Path, u64)> {
        self.current.as_ref().and_then(|c| c.get().source())
    }
}
