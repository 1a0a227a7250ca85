//! A sorted-vector iterator for tests of the iterators built on top of sources.

use super::InternalIterator;
use crate::error::{Error, Result};
use crate::key::InternalKeyComparator;
use std::cmp::Ordering;

/// Iterates a vector of (internal key, value) pairs sorted by `icmp`.
pub(crate) struct VecIterator {
    entries: Vec<(Vec<u8>, Vec<u8>)>,
    icmp: InternalKeyComparator,
    pos: Option<usize>,
    /// An entry that cannot be read: a move onto it leaves the iterator invalid with an error.
    fail_at: Option<usize>,
    failed: bool,
    /// The file its entries claim to come from ([`InternalIterator::source`]).
    source: Option<std::path::PathBuf>,
}

impl VecIterator {
    pub(crate) fn new(mut entries: Vec<(Vec<u8>, Vec<u8>)>, icmp: InternalKeyComparator) -> Self {
        entries.sort_by(|a, b| icmp.compare(&a.0, &b.0));
        VecIterator::unsorted(entries, icmp)
    }

    /// Iterates `entries` in the order given, sorted or not: a source whose order is broken
    /// (only its forward moves make sense).
    pub(crate) fn unsorted(entries: Vec<(Vec<u8>, Vec<u8>)>, icmp: InternalKeyComparator) -> Self {
        VecIterator {
            entries,
            icmp,
            pos: None,
            fail_at: None,
            failed: false,
            source: None,
        }
    }

    /// Like [`VecIterator::new`], with entries that say they were read from `path`.
    pub(crate) fn from_file(
        entries: Vec<(Vec<u8>, Vec<u8>)>,
        icmp: InternalKeyComparator,
        path: &str,
    ) -> Self {
        VecIterator {
            source: Some(path.into()),
            ..VecIterator::new(entries, icmp)
        }
    }

    /// Like [`VecIterator::new`], but entry `index` (in sorted order) cannot be read: landing
    /// on it stops the iterator with a corruption error, as a bad block stops a table iterator.
    pub(crate) fn failing_at(
        entries: Vec<(Vec<u8>, Vec<u8>)>,
        icmp: InternalKeyComparator,
        index: usize,
    ) -> Self {
        VecIterator {
            fail_at: Some(index),
            ..VecIterator::new(entries, icmp)
        }
    }

    /// Applies the failure after a move to `pos`.
    fn land(&mut self, pos: Option<usize>) {
        self.failed = pos.is_some() && pos == self.fail_at;
        self.pos = if self.failed { None } else { pos };
    }
}

impl InternalIterator for VecIterator {
    fn valid(&self) -> bool {
        self.pos.is_some()
    }
    fn seek_to_first(&mut self) {
        let pos = if self.entries.is_empty() {
            None
        } else {
            Some(0)
        };
        self.land(pos);
    }
    fn seek_to_last(&mut self) {
        self.land(self.entries.len().checked_sub(1));
    }
    fn seek(&mut self, target: &[u8]) {
        let i = self
            .entries
            .partition_point(|(k, _)| self.icmp.compare(k, target) == Ordering::Less);
        self.land((i < self.entries.len()).then_some(i));
    }
    fn seek_for_prev(&mut self, target: &[u8]) {
        let i = self
            .entries
            .partition_point(|(k, _)| self.icmp.compare(k, target) != Ordering::Greater);
        self.land(i.checked_sub(1));
    }
    fn next(&mut self) {
        let pos = self.pos.map(|p| p + 1).filter(|&p| p < self.entries.len());
        self.land(pos);
    }
    fn prev(&mut self) {
        let pos = self.pos.and_then(|p| p.checked_sub(1));
        self.land(pos);
    }
    fn key(&self) -> &[u8] {
        self.pos
            .map(|p| self.entries[p].0.as_slice())
            .unwrap_or(&[])
    }
    fn value(&self) -> &[u8] {
        self.pos
            .map(|p| self.entries[p].1.as_slice())
            .unwrap_or(&[])
    }
    fn status(&self) -> Result<()> {
        match (self.failed, self.fail_at) {
            (true, Some(index)) => Err(Error::corruption(
                "test-source",
                index as u64,
                "entry cannot be read",
            )),
            _ => Ok(()),
        }
    }
    fn source(&self) -> Option<(&std::path::Path, u64)> {
        self.source.as_deref().map(|path| (path, 0))
    }
}
