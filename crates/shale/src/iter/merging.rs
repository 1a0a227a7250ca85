//! Merges several sorted sources into one sorted stream, in both directions.
//!
//! Invariant: in forward mode every valid child is positioned at its first entry `>= key()`;
//! in reverse mode at its last entry `<= key()`. The current child is the smallest (forward) or
//! largest (reverse) of them. Keys are unique across children (they differ at least in sequence
//! number), so ties cannot occur among valid internal keys.

use std::cmp::Ordering;

use super::InternalIterator;
use crate::error::Result;
use crate::key::InternalKeyComparator;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Forward,
    Reverse,
}

/// A k-way merge of internal iterators.
pub struct MergingIterator {
    icmp: InternalKeyComparator,
    children: Vec<Box<dyn InternalIterator>>,
    current: Option<usize>,
    direction: Direction,
}

impl MergingIterator {
    /// Merges `children`; their order breaks no ties, as keys are unique.
    pub fn new(icmp: InternalKeyComparator, children: Vec<Box<dyn InternalIterator>>) -> Self {
        MergingIterator {
            icmp,
            children,
            current: None,
            direction: Direction::Forward,
        }
    }

    fn find_smallest(&mut self) {
        self.find_extreme(Ordering::Less);
    }

    fn find_largest(&mut self) {
        self.find_extreme(Ordering::Greater);
    }

    /// Makes current the valid child whose key is furthest in direction `want` (`Less`: the
    /// smallest); on a tie the earlier child wins.
    fn find_extreme(&mut self, want: Ordering) {
        let mut best: Option<usize> = None;
        for (i, child) in self.children.iter().enumerate() {
            if !child.valid() {
                continue;
            }
            best = match best {
                Some(b) if self.icmp.compare(child.key(), self.children[b].key()) != want => {
                    Some(b)
                }
                _ => Some(i),
            };
        }
        self.current = best;
    }
}

impl InternalIterator for MergingIterator {
    fn valid(&self) -> bool {
        self.current.is_some()
    }

    fn seek_to_first(&mut self) {
        for child in &mut self.children {
            child.seek_to_first();
        }
        self.direction = Direction::Forward;
        self.find_smallest();
    }

    fn seek_to_last(&mut self) {
        for child in &mut self.children {
            child.seek_to_last();
        }
        self.direction = Direction::Reverse;
        self.find_largest();
    }

    fn seek(&mut self, target: &[u8]) {
        for child in &mut self.children {
            child.seek(target);
        }
        self.direction = Direction::Forward;
        self.find_smallest();
    }

    fn seek_for_prev(&mut self, target: &[u8]) {
        for child in &mut self.children {
            child.seek_for_prev(target);
        }
        self.direction = Direction::Reverse;
        self.find_largest();
    }

    fn next(&mut self) {
        let Some(cur) = self.current else { return };
        if self.direction != Direction::Forward {
            // Every other child must move to its first entry after key().
            let key = self.children[cur].key().to_vec();
            for (i, child) in self.children.iter_mut().enumerate() {
                if i == cur {
                    continue;
                }
                child.seek(&key);
                if child.valid() && self.icmp.compare(&key, child.key()) == Ordering::Equal {
                    child.next();
                }
            }
            self.direction = Direction::Forward;
        }
        self.children[cur].next();
        self.find_smallest();
    }

    fn prev(&mut self) {
        let Some(cur) = self.current else { return };
        if self.direction != Direction::Reverse {
            // Every other child must move to its last entry before key().
            let key = self.children[cur].key().to_vec();
            for (i, child) in self.children.iter_mut().enumerate() {
                if i == cur {
                    continue;
                }
                child.seek_for_prev(&key);
                if child.valid() && self.icmp.compare(&key, child.key()) == Ordering::Equal {
                    child.prev();
                }
            }
            self.direction = Direction::Reverse;
        }
        self.children[cur].prev();
        self.find_largest();
    }

    fn key(&self) -> &[u8] {
        match self.current {
            Some(i) => self.children[i].key(),
            None => &[],
        }
    }

    fn value(&self) -> &[u8] {
        match self.current {
            Some(i) => self.children[i].value(),
            None => &[],
        }
    }

    fn status(&self) -> Result<()> {
        for child in &self.children {
            child.status()?;
        }
        Ok(())
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
        for _round in 0..20 {
            let mut all = Vec::new();
            let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
            let mut seq = 1;
            for _ in 0..rng.gen_range(0..5) {
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
}
