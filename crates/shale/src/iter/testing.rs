//! A sorted-vector iterator for tests of the iterators built on top of sources.

use super::InternalIterator;
use crate::error::Result;
use crate::key::InternalKeyComparator;
use std::cmp::Ordering;

/// Iterates a vector of (internal key, value) pairs sorted by `icmp`.
pub(crate) struct VecIterator {
    entries: Vec<(Vec<u8>, Vec<u8>)>,
    icmp: InternalKeyComparator,
    pos: Option<usize>,
}

impl VecIterator {
    pub(crate) fn new(mut entries: Vec<(Vec<u8>, Vec<u8>)>, icmp: InternalKeyComparator) -> Self {
        entries.sort_by(|a, b| icmp.compare(&a.0, &b.0));
        VecIterator {
            entries,
            icmp,
            pos: None,
        }
    }
}

impl InternalIterator for VecIterator {
    fn valid(&self) -> bool {
        self.pos.is_some()
    }
    fn seek_to_first(&mut self) {
        self.pos = if self.entries.is_empty() {
            None
        } else {
            Some(0)
        };
    }
    fn seek_to_last(&mut self) {
        self.pos = self.entries.len().checked_sub(1);
    }
    fn seek(&mut self, target: &[u8]) {
        let i = self
            .entries
            .partition_point(|(k, _)| self.icmp.compare(k, target) == Ordering::Less);
        self.pos = (i < self.entries.len()).then_some(i);
    }
    fn seek_for_prev(&mut self, target: &[u8]) {
        let i = self
            .entries
            .partition_point(|(k, _)| self.icmp.compare(k, target) != Ordering::Greater);
        self.pos = i.checked_sub(1);
    }
    fn next(&mut self) {
        self.pos = self.pos.map(|p| p + 1).filter(|&p| p < self.entries.len());
    }
    fn prev(&mut self) {
        self.pos = self.pos.and_then(|p| p.checked_sub(1));
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
        Ok(())
    }
}
