//! Snapshots: a sequence number pinned so that compaction keeps every entry a read at that
//! sequence number can see. Released when the last clone of the [`Snapshot`] is dropped.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::key::SequenceNumber;

/// The live snapshots of one database: a multiset of sequence numbers.
#[derive(Debug, Default)]
pub(crate) struct SnapshotList {
    live: Mutex<BTreeMap<SequenceNumber, usize>>,
}

impl SnapshotList {
    /// Pins `sequence` and returns its handle.
    pub(crate) fn acquire(self: &Arc<Self>, sequence: SequenceNumber) -> Snapshot {
        *self.live.lock().entry(sequence).or_insert(0) += 1;
        Snapshot {
            inner: Arc::new(SnapshotInner {
                sequence,
                list: self.clone(),
            }),
        }
    }

    /// Every pinned sequence number, ascending, without repeats.
    pub(crate) fn sequences(&self) -> Vec<SequenceNumber> {
        self.live.lock().keys().copied().collect()
    }

    fn release(&self, sequence: SequenceNumber) {
        let mut live = self.live.lock();
        if let Some(count) = live.get_mut(&sequence) {
            *count -= 1;
            if *count == 0 {
                live.remove(&sequence);
            }
        }
    }
}

struct SnapshotInner {
    sequence: SequenceNumber,
    list: Arc<SnapshotList>,
}

impl Drop for SnapshotInner {
    fn drop(&mut self) {
        self.list.release(self.sequence);
    }
}

/// A consistent point-in-time view of the database. Cheap to clone; the view is released when
/// the last clone is dropped.
#[derive(Clone)]
pub struct Snapshot {
    inner: Arc<SnapshotInner>,
}

impl Snapshot {
    /// The sequence number of the last write this snapshot sees.
    pub fn sequence(&self) -> SequenceNumber {
        self.inner.sequence
    }

    /// True if this snapshot was taken from the database that owns `list`: only that
    /// database's compactions keep what the snapshot sees.
    pub(crate) fn belongs_to(&self, list: &Arc<SnapshotList>) -> bool {
        Arc::ptr_eq(&self.inner.list, list)
    }
}

impl fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Snapshot({})", self.inner.sequence)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_on_last_drop() {
        let list = Arc::new(SnapshotList::default());
        let a = list.acquire(5);
        let b = list.acquire(5);
        let c = list.acquire(9);
        assert_eq!(list.sequences(), vec![5, 9]);
        drop(a);
        assert_eq!(list.sequences().first().copied(), Some(5));
        let b2 = b.clone();
        drop(b);
        assert_eq!(list.sequences().first().copied(), Some(5));
        drop(b2);
        assert_eq!(list.sequences().first().copied(), Some(9));
        assert_eq!(c.sequence(), 9);
        drop(c);
        assert_eq!(list.sequences().first().copied(), None);
    }
}
