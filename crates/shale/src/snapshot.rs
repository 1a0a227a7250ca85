//! Snapshots: a sequence number pinned so that compaction keeps every entry a read at that
//! sequence number can see. Released when the last clone of the [`Snapshot`] is dropped.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::key::SequenceNumber;

/// The live snapshots of one database: a multiset of sequence numbers.
#[derive(Debug, Default)]
pub(crate) struct SnapshotList {
    live: Mutex<BTreeMap<SequenceNumber, usize>>,
}

impl SnapshotList {
    /// Pins the sequence number `last_sequence` holds and returns its handle. The number is
    /// loaded under the list's lock, so a compaction that copies the list ([`Self::sequences`])
    /// either sees this snapshot or began before it was taken, when every entry it merges was
    /// already at or below the number: loaded before the lock, the number could predate writes
    /// that a compaction, not knowing the snapshot, lets shadow the versions it should see.
    pub(crate) fn acquire(self: &Arc<Self>, last_sequence: &AtomicU64) -> Snapshot {
        let mut live = self.live.lock();
        let sequence = last_sequence.load(Ordering::Acquire);
        *live.entry(sequence).or_insert(0) += 1;
        drop(live);
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
        let last = AtomicU64::new(5);
        let a = list.acquire(&last);
        let b = list.acquire(&last);
        last.store(9, Ordering::Release);
        let c = list.acquire(&last);
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
