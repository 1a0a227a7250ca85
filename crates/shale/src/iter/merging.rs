//! Merges several sorted sources into one sorted stream, in both directions.
//!
//! Invariant: in forward mode every valid child is positioned at its first entry `>= key()`;
//! in reverse mode at its last entry `<= key()`. The current child is the smallest (forward) or
//! largest (reverse) of them: the top of a heap of the valid children. Keys are unique across
//! children (they differ at least in sequence number), so ties cannot occur among valid
//! internal keys.

use std::cmp::Ordering;

use super::InternalIterator;
use crate::error::Result;
use crate::key::{
    assign_bytes, bytewise_compare, padded_be_word, trailer, user_key, InternalKeyComparator,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Forward,
    Reverse,
}

/// A copy of a child's current internal key, with what a bytewise comparison reads first
/// decoded into integers (for bytewise comparators only; otherwise just the bytes).
#[derive(Debug, Default, Clone)]
struct KeyCopy {
    /// The user key's bytes 0..8 and 8..16 as big-endian integers, zero-padded on the right.
    head: [u64; 2],
    /// The user key's length.
    user_len: usize,
    /// The trailer (sequence number and kind).
    trailer: u64,
    /// The whole internal key.
    bytes: Vec<u8>,
}

impl KeyCopy {
    fn set(&mut self, key: &[u8], bytewise: bool) {
        assign_bytes(&mut self.bytes, key);
        if bytewise {
            let user = user_key(key);
            self.head = [
                padded_be_word(user),
                padded_be_word(user.get(8..).unwrap_or_default()),
            ];
            self.user_len = user.len();
            self.trailer = trailer(key);
        }
    }

    /// The user key's bytes after the sixteen in `head`.
    fn rest(&self) -> &[u8] {
        user_key(&self.bytes).get(16..).unwrap_or_default()
    }
}

/// Orders two copies as [`InternalKeyComparator::compare`] orders their keys under the
/// bytewise comparator: user keys ascending, then trailers descending.
///
/// Equal heads mean equal first sixteen bytes up to the zero padding, so the bytes after them
/// and then the lengths decide (a key that is a prefix of the other comes first).
#[inline]
fn compare_bytewise_copies(a: &KeyCopy, b: &KeyCopy) -> Ordering {
    // Spelled out: `[u64; 2]::cmp` and `then_with` chains compiled to a slice loop and calls.
    if a.head[0] != b.head[0] {
        return a.head[0].cmp(&b.head[0]);
    }
    if a.head[1] != b.head[1] {
        return a.head[1].cmp(&b.head[1]);
    }
    if a.user_len > 16 || b.user_len > 16 {
        let rest = bytewise_compare(a.rest(), b.rest());
        if rest != Ordering::Equal {
            return rest;
        }
    }
    if a.user_len != b.user_len {
        return a.user_len.cmp(&b.user_len);
    }
    b.trailer.cmp(&a.trailer)
}

/// A k-way merge of internal iterators.
///
/// The valid children sit in a binary heap ordered by their keys. A step costs one key
/// comparison when the current child keeps the lead (long runs from one child are the common
/// case: most entries live in the deepest level), and about `2 log k` when it does not.
pub struct MergingIterator {
    icmp: InternalKeyComparator,
    children: Vec<Box<dyn InternalIterator>>,
    /// `keys[i]` is a copy of `children[i].key()` whenever child `i` is in the heap.
    ///
    /// Why: the heap compares keys several times per step (up to `2 log k`: eight with the
    /// sixteen sources of a database right after a random fill), and asking the children
    /// costs a virtual call per key, two for a level (its table's), which was half of the
    /// merge's time in a backward scan. Only the child that moved needs a fresh copy, and
    /// with the bytewise comparator the copy's integers decide most comparisons in two
    /// integer compares.
    keys: Vec<KeyCopy>,
    /// Whether the comparator is the bytewise one, so `compare_bytewise_copies` applies.
    bytewise: bool,
    /// Indices of the valid children as a binary heap whose top (`heap[0]`) is the current
    /// child: the smallest key on top when moving forward, the largest in reverse.
    heap: Vec<usize>,
    /// The child with the second key in heap order (the better of the top's two heap
    /// children) while the heap holds two or more.
    ///
    /// Why: most steps leave the lead with the child that moved (a scan of a database right
    /// after a random fill takes four entries in five from the deepest level), and then one
    /// comparison with this child shows the heap still in order. Sifting from the top compared
    /// the top's two heap children first, every step: about a hundred instructions a step
    /// (callgrind), a tenth of a scan's.
    runner: Option<usize>,
    direction: Direction,
    /// The first child (by index) that stopped on an error at its last move, if any. While
    /// set, the merge is invalid: it never goes on without that child.
    ///
    /// Why a field: asking every child for its status cost a virtual call per child per step:
    /// 4.5% of a backward scan over eleven children. A child only meets an error
    /// when it moves, and then turns invalid (the `InternalIterator` contract), so checking
    /// the children that turn invalid, as they leave the heap, finds every error.
    failed: Option<usize>,
}

impl MergingIterator {
    /// Merges `children`; their order breaks no ties, as keys are unique.
    pub fn new(icmp: InternalKeyComparator, children: Vec<Box<dyn InternalIterator>>) -> Self {
        let heap = Vec::with_capacity(children.len());
        let keys = vec![KeyCopy::default(); children.len()];
        MergingIterator {
            bytewise: icmp.is_bytewise(),
            icmp,
            children,
            keys,
            heap,
            runner: None,
            direction: Direction::Forward,
            failed: None,
        }
    }

    /// Whether child `a` comes out of the heap before child `b` in the current direction. Ties
    /// (impossible among valid internal keys) go to the earlier child, for determinism.
    // Always inlined: left to itself the compiler made it a call, whose register saves cost
    // a fifth of each comparison (callgrind).
    #[inline(always)]
    fn before(&self, a: usize, b: usize) -> bool {
        let (ka, kb) = (&self.keys[a], &self.keys[b]);
        let ord = if self.bytewise {
            compare_bytewise_copies(ka, kb)
        } else {
            self.icmp.compare(&ka.bytes, &kb.bytes)
        };
        let ord = match self.direction {
            Direction::Forward => ord,
            Direction::Reverse => ord.reverse(),
        };
        ord == Ordering::Less || (ord == Ordering::Equal && a < b)
    }

    /// Restores the heap order below `pos`, whose child may have moved back.
    fn sift_down(&mut self, mut pos: usize) {
        let len = self.heap.len();
        loop {
            let left = 2 * pos + 1;
            if left >= len {
                return;
            }
            let right = left + 1;
            let first = if right < len && self.before(self.heap[right], self.heap[left]) {
                right
            } else {
                left
            };
            if !self.before(self.heap[first], self.heap[pos]) {
                return;
            }
            self.heap.swap(pos, first);
            pos = first;
        }
    }

    /// Builds the heap from every valid child, after all of them moved.
    fn rebuild(&mut self) {
        self.heap.clear();
        self.failed = None;
        for (i, child) in self.children.iter().enumerate() {
            if child.valid() {
                self.keys[i].set(child.key(), self.bytewise);
                self.heap.push(i);
            } else if self.failed.is_none() && child.status().is_err() {
                self.failed = Some(i);
            }
        }
        for pos in (0..self.heap.len() / 2).rev() {
            self.sift_down(pos);
        }
        self.find_runner();
    }

    /// Sets `runner` from the heap as it stands.
    fn find_runner(&mut self) {
        self.runner = match *self.heap.as_slice() {
            [_, a, b, ..] => Some(if self.before(b, a) { b } else { a }),
            [_, a] => Some(a),
            _ => None,
        };
    }

    /// Puts the top child, which just stepped, back in its place (or out, when exhausted).
    fn reposition_top(&mut self) {
        let top = self.heap[0];
        let child = &self.children[top];
        if !child.valid() {
            if child.status().is_err() && self.failed.is_none_or(|f| top < f) {
                self.failed = Some(top);
            }
            self.heap.swap_remove(0);
            self.sift_down(0);
            self.find_runner();
            return;
        }
        self.keys[top].set(child.key(), self.bytewise);
        let Some(runner) = self.runner else {
            return; // alone in the heap
        };
        if self.before(top, runner) {
            return; // still ahead of every other child
        }
        // The runner-up takes the lead: it comes before every other child, so it trades places
        // with the top without another comparison, and the old top sinks from there.
        let slot = if self.heap.get(1) == Some(&runner) {
            1
        } else {
            2
        };
        self.heap.swap(0, slot);
        self.sift_down(slot);
        self.find_runner();
    }

    fn current(&self) -> Option<usize> {
        self.heap.first().copied()
    }
}

impl InternalIterator for MergingIterator {
    fn valid(&self) -> bool {
        // A child that stopped on an error ends the merge: going on without it would return
        // entries it holds newer versions of (a tombstone in an unreadable block would let the
        // older value it deletes through).
        !self.heap.is_empty() && self.failed.is_none()
    }

    fn seek_to_first(&mut self) {
        for child in &mut self.children {
            child.seek_to_first();
        }
        self.direction = Direction::Forward;
        self.rebuild();
    }

    fn seek_to_last(&mut self) {
        for child in &mut self.children {
            child.seek_to_last();
        }
        self.direction = Direction::Reverse;
        self.rebuild();
    }

    fn seek(&mut self, target: &[u8]) {
        for child in &mut self.children {
            child.seek(target);
        }
        self.direction = Direction::Forward;
        self.rebuild();
    }

    fn seek_for_prev(&mut self, target: &[u8]) {
        for child in &mut self.children {
            child.seek_for_prev(target);
        }
        self.direction = Direction::Reverse;
        self.rebuild();
    }

    fn next(&mut self) {
        let Some(cur) = self.current() else { return };
        if self.direction != Direction::Forward {
            // Every other child must move to its first entry after key().
            let key = std::mem::take(&mut self.keys[cur].bytes);
            for (i, child) in self.children.iter_mut().enumerate() {
                if i == cur {
                    continue;
                }
                child.seek(&key);
                if child.valid() && self.icmp.compare(&key, child.key()) == Ordering::Equal {
                    child.next();
                }
            }
            self.keys[cur].bytes = key; // keeps its capacity; rebuild refills it
            self.direction = Direction::Forward;
            self.children[cur].next();
            self.rebuild();
            return;
        }
        self.children[cur].next();
        self.reposition_top();
    }

    fn prev(&mut self) {
        let Some(cur) = self.current() else { return };
        if self.direction != Direction::Reverse {
            // Every other child must move to its last entry before key().
            let key = std::mem::take(&mut self.keys[cur].bytes);
            for (i, child) in self.children.iter_mut().enumerate() {
                if i == cur {
                    continue;
                }
                child.seek_for_prev(&key);
                if child.valid() && self.icmp.compare(&key, child.key()) == Ordering::Equal {
                    child.prev();
                }
            }
            self.keys[cur].bytes = key; // keeps its capacity; rebuild refills it
            self.direction = Direction::Reverse;
            self.children[cur].prev();
            self.rebuild();
            return;
        }
        self.children[cur].prev();
        self.reposition_top();
    }

    fn key(&self) -> &[u8] {
        match self.current() {
            Some(i) => &self.keys[i].bytes,
            None => &[],
        }
    }

    fn value(&self) -> &[u8] {
        match self.current() {
            Some(i) => self.children[i].value(),
            None => &[],
        }
    }

    fn source(&self) -> Option<(&std::path::Path, u64)> {
        self.current().and_then(|i| self.children[i].source())
    }

    fn status(&self) -> Result<()> {
        match self.failed {
            Some(i) => self.children[i].status(),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::iter::testing::VecIterator;
    use crate::key::{make_internal_key, BytewiseComparator, ValueKind};

    #[test]
    fn matches_a_sorted_union_under_random_moves() {
        let icmp = InternalKeyComparator::new(Arc::new(BytewiseComparator));
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for _round in 0..60 {
            let mut all = Vec::new();
            let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
            let mut seq = 1;
            for _ in 0..rng.gen_range(0..20) {
                let mut entries = Vec::new();
                for _ in 0..rng.gen_range(0..30) {
                    let k = format!("k{:03}", rng.gen_range(0..50));
                    let ik = make_internal_key(k.as_bytes(), seq, ValueKind::Value);
                    seq += 1;
                    entries.push((ik, format!("v{seq}").into_bytes()));
                }
                all.extend(entries.clone());
                children.push(Box::new(VecIterator::new(entries, icmp.clone())));
            }
            let mut oracle = VecIterator::new(all, icmp.clone());
            let mut merged = MergingIterator::new(icmp.clone(), children);
            for _ in 0..300 {
                match rng.gen_range(0..6) {
                    0 => {
                        merged.seek_to_first();
                        oracle.seek_to_first();
                    }
                    1 => {
                        merged.seek_to_last();
                        oracle.seek_to_last();
                    }
                    2 => {
                        let k = format!("k{:03}", rng.gen_range(0..55));
                        let t = make_internal_key(
                            k.as_bytes(),
                            rng.gen_range(0..seq),
                            ValueKind::Value,
                        );
                        merged.seek(&t);
                        oracle.seek(&t);
                    }
                    3 => {
                        let k = format!("k{:03}", rng.gen_range(0..55));
                        let t = make_internal_key(
                            k.as_bytes(),
                            rng.gen_range(0..seq),
                            ValueKind::Value,
                        );
                        merged.seek_for_prev(&t);
                        oracle.seek_for_prev(&t);
                    }
                    4 if oracle.valid() => {
                        merged.next();
                        oracle.next();
                    }
                    5 if oracle.valid() => {
                        merged.prev();
                        oracle.prev();
                    }
                    _ => {}
                }
                assert_eq!(merged.valid(), oracle.valid());
                if oracle.valid() {
                    assert_eq!(merged.key(), oracle.key());
                    assert_eq!(merged.value(), oracle.value());
                }
            }
        }
    }

    /// Long runs in one direction over children of very unequal sizes, as a scan of a database
    /// right after a fill meets them (most keys in one level): the top child mostly keeps the
    /// lead, sometimes hands it to the runner-up, and children run out on the way.
    #[test]
    fn long_runs_over_one_dominant_child_match_a_sorted_union() {
        let icmp = InternalKeyComparator::new(Arc::new(BytewiseComparator));
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        for _round in 0..40 {
            let mut all = Vec::new();
            let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
            let mut seq = 1;
            let sizes: Vec<usize> = (0..rng.gen_range(1..7))
                .map(|i| if i == 0 { 400 } else { rng.gen_range(0..40) })
                .collect();
            for size in sizes {
                let mut entries = Vec::new();
                for _ in 0..size {
                    let k = format!("key{:05}", rng.gen_range(0..2000));
                    let ik = make_internal_key(k.as_bytes(), seq, ValueKind::Value);
                    seq += 1;
                    entries.push((ik, format!("v{seq}").into_bytes()));
                }
                all.extend(entries.clone());
                children.push(Box::new(VecIterator::new(entries, icmp.clone())));
            }
            let mut oracle = VecIterator::new(all, icmp.clone());
            let mut merged = MergingIterator::new(icmp.clone(), children);
            merged.seek_to_first();
            oracle.seek_to_first();
            for _ in 0..6 {
                let forward = rng.gen_bool(0.5);
                for _ in 0..rng.gen_range(0..500) {
                    assert_eq!(merged.valid(), oracle.valid());
                    if !oracle.valid() {
                        break;
                    }
                    assert_eq!(merged.key(), oracle.key());
                    assert_eq!(merged.value(), oracle.value());
                    if forward {
                        merged.next();
                        oracle.next();
                    } else {
                        merged.prev();
                        oracle.prev();
                    }
                }
                assert_eq!(merged.valid(), oracle.valid());
                if oracle.valid() {
                    assert_eq!(merged.key(), oracle.key());
                } else if rng.gen_bool(0.5) {
                    merged.seek_to_first();
                    oracle.seek_to_first();
                } else {
                    merged.seek_to_last();
                    oracle.seek_to_last();
                }
            }
        }
    }

    proptest::proptest! {
        /// The integer shortcut orders keys exactly as the internal key comparator does,
        /// on short keys, keys longer than sixteen bytes, zero bytes and prefixes.
        #[test]
        fn bytewise_copies_compare_like_the_comparator(
            prefix in proptest::collection::vec(0u8..3, 0..20),
            a in proptest::collection::vec(0u8..3, 0..6),
            b in proptest::collection::vec(0u8..3, 0..6),
            seq_a in 0u64..4,
            seq_b in 0u64..4,
        ) {
            let icmp = InternalKeyComparator::new(Arc::new(BytewiseComparator));
            let ka = make_internal_key(&[prefix.as_slice(), &a].concat(), seq_a, ValueKind::Value);
            let kb = make_internal_key(&[prefix.as_slice(), &b].concat(), seq_b, ValueKind::Merge);
            let (mut ca, mut cb) = (KeyCopy::default(), KeyCopy::default());
            ca.set(&ka, true);
            cb.set(&kb, true);
            proptest::prop_assert_eq!(compare_bytewise_copies(&ca, &cb), icmp.compare(&ka, &kb));
            proptest::prop_assert_eq!(compare_bytewise_copies(&cb, &ca), icmp.compare(&kb, &ka));
        }
    }

    #[test]
    fn a_child_that_stops_on_an_error_is_reported_at_once_in_both_directions() {
        let icmp = InternalKeyComparator::new(Arc::new(BytewiseComparator));
        let entries = |prefix: &str, seq: u64| -> Vec<(Vec<u8>, Vec<u8>)> {
            (0..10)
                .map(|i| {
                    let k = format!("{i:02}{prefix}");
                    (
                        make_internal_key(k.as_bytes(), seq, ValueKind::Value),
                        b"v".to_vec(),
                    )
                })
                .collect()
        };
        let make = || {
            let children: Vec<Box<dyn InternalIterator>> = vec![
                Box::new(VecIterator::new(entries("a", 1), icmp.clone())),
                Box::new(VecIterator::failing_at(entries("b", 2), icmp.clone(), 5)),
                Box::new(VecIterator::new(entries("c", 3), icmp.clone())),
            ];
            MergingIterator::new(icmp.clone(), children)
        };
        // Forward: 00a..04b come out cleanly; stepping off 04b lands the failing child on its
        // bad entry (05b), and the merge reports it at that step and ends there, although the
        // other children could go on (their entries may be older versions of what the failed
        // child holds).
        let mut merged = make();
        merged.seek_to_first();
        let mut clean = 0;
        while merged.valid() && merged.status().is_ok() {
            clean += 1;
            merged.next();
        }
        assert_eq!(clean, 4 * 3 + 2, "the error surfaced at the wrong step");
        assert!(!merged.valid(), "a child's error ends the merge");
        assert!(merged.status().is_err());
        // Backward from the end: 09c..06b, then stepping back off 06b lands on 05b.
        merged.seek_to_last();
        let mut clean = 0;
        while merged.valid() && merged.status().is_ok() {
            clean += 1;
            merged.prev();
        }
        assert_eq!(clean, 3 * 3 + 2);
        assert!(merged.status().is_err());
        // A seek away from the bad entry clears it, as it clears the child's own error.
        let target = make_internal_key(b"07", u64::MAX >> 8, ValueKind::Value);
        merged.seek(&target);
        assert!(merged.valid());
        assert!(merged.status().is_ok());
    }
}
