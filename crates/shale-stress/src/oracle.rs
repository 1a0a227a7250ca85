//! The oracle: every write issued to the database, in order, with what became of it, and the
//! check the durability contract asks of a recovered database.
//!
//! The rule (docs/durability.md, clauses 1-4): after a crash the database holds exactly the
//! state after some prefix of the issued write order. The prefix must include every write that
//! was acknowledged before the crash when only the process died, and every write made durable
//! (an acknowledged sync write, or any write before an acknowledged flush, compaction or open)
//! when power was lost. A write whose request failed may be present or absent; every other write
//! inside the prefix must be whole (batches are all or nothing).
//!
//! Thread-safety: one workload thread owns a [`History`].

use std::collections::{BTreeMap, BTreeSet};

/// The state of the database: user key to value.
pub type State = BTreeMap<Vec<u8>, Vec<u8>>;

/// Which merge operator a workload runs with, and so how the oracle folds merge operands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MergeKind {
    /// `shale::UInt64AddOperator`: values and operands are 8-byte little-endian counters.
    U64Add,
    /// `shale::StringAppendOperator` with delimiter `,`.
    StringAppend,
}

impl MergeKind {
    /// The operator the database is opened with.
    pub fn operator(self) -> std::sync::Arc<dyn shale::MergeOperator> {
        match self {
            MergeKind::U64Add => std::sync::Arc::new(shale::UInt64AddOperator),
            MergeKind::StringAppend => std::sync::Arc::new(shale::StringAppendOperator::new(b",")),
        }
    }

    /// The oracle's own fold of one operand onto a value, written independently of the engine.
    pub fn fold(self, existing: Option<&[u8]>, operand: &[u8]) -> Vec<u8> {
        match self {
            MergeKind::U64Add => {
                let read = |b: &[u8]| {
                    let mut a = [0u8; 8];
                    a.copy_from_slice(&b[..8.min(b.len())]);
                    u64::from_le_bytes(a)
                };
                let base = existing.map(read).unwrap_or(0);
                base.wrapping_add(read(operand)).to_le_bytes().to_vec()
            }
            MergeKind::StringAppend => match existing {
                Some(v) => {
                    let mut out = v.to_vec();
                    out.push(b',');
                    out.extend_from_slice(operand);
                    out
                }
                None => operand.to_vec(),
            },
        }
    }
}

/// One operation of a write batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// Set the key.
    Put(Vec<u8>, Vec<u8>),
    /// Remove the key.
    Delete(Vec<u8>),
    /// Add a merge operand.
    Merge(Vec<u8>, Vec<u8>),
}

impl Entry {
    /// The key the entry touches.
    pub fn key(&self) -> &[u8] {
        match self {
            Entry::Put(k, _) | Entry::Delete(k) | Entry::Merge(k, _) => k,
        }
    }
}

/// One issued write and what became of it.
#[derive(Debug, Clone)]
pub struct WriteRecord {
    /// The batch, in order.
    pub entries: Vec<Entry>,
    /// Whether it asked for `sync`.
    pub sync: bool,
    /// Filesystem calls made before it was issued.
    pub start_call: u64,
    /// Filesystem calls made when it returned (`u64::MAX` while in flight).
    pub end_call: u64,
    /// `Some(true)` acknowledged, `Some(false)` failed, `None` in flight.
    pub outcome: Option<bool>,
    /// Failed with `Error::Poisoned`: refused before it reached the WAL, so never applied.
    pub refused: bool,
}

/// A moment after which every write before `floor` is durable: an acknowledged flush,
/// compaction or open.
#[derive(Debug, Clone, Copy)]
pub struct SyncPoint {
    /// Filesystem calls made when the operation returned.
    pub end_call: u64,
    /// Writes (by index) made durable.
    pub floor: usize,
}

/// What the contract allows at one crash point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bounds {
    /// The recovered prefix must be at least this long.
    pub lo: usize,
    /// And at most this long (writes issued before the crash).
    pub hi: usize,
    /// Writes inside the prefix that may be missing (their request failed or never returned
    /// before a later write was issued... only failed ones here).
    pub optional: Vec<usize>,
}

/// Every write issued in a workload, in order.
#[derive(Debug, Clone)]
pub struct History {
    /// The merge operator in use.
    pub merge: MergeKind,
    /// The writes.
    pub writes: Vec<WriteRecord>,
    /// Acknowledged durability points.
    pub sync_points: Vec<SyncPoint>,
}

/// How a recovered state relates to the history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// It equals the state after this prefix (with these optional writes left out).
    Prefix(usize),
    /// It equals no allowed prefix.
    Violation(String),
}

impl History {
    /// An empty history.
    pub fn new(merge: MergeKind) -> Self {
        History {
            merge,
            writes: Vec::new(),
            sync_points: Vec::new(),
        }
    }

    /// Records a write about to be issued; returns its index.
    pub fn issue(&mut self, entries: Vec<Entry>, sync: bool, start_call: u64) -> usize {
        self.writes.push(WriteRecord {
            entries,
            sync,
            start_call,
            end_call: u64::MAX,
            outcome: None,
            refused: false,
        });
        self.writes.len() - 1
    }

    /// Records how write `index` returned.
    pub fn complete(&mut self, index: usize, ok: bool, end_call: u64) {
        if let Some(w) = self.writes.get_mut(index) {
            w.outcome = Some(ok);
            w.end_call = end_call;
        }
    }

    /// Records that write `index` was refused by a poisoned database: it must never appear.
    pub fn refuse(&mut self, index: usize, end_call: u64) {
        self.complete(index, false, end_call);
        if let Some(w) = self.writes.get_mut(index) {
            w.refused = true;
        }
    }

    /// Records an acknowledged flush, compaction or open that made every earlier write durable.
    pub fn sync_point(&mut self, end_call: u64) {
        self.sync_points.push(SyncPoint {
            end_call,
            floor: self.writes.len(),
        });
    }

    /// The bounds for a crash after `calls` filesystem calls (`u64::MAX`: after everything).
    /// `keeps_flushed` is true for a process crash (every acknowledged write must survive) and
    /// false for power loss (only durable ones must).
    pub fn bounds(&self, calls: u64, keeps_flushed: bool) -> Bounds {
        let mut lo = 0;
        let mut hi = 0;
        let mut optional = Vec::new();
        for (i, w) in self.writes.iter().enumerate() {
            if w.start_call <= calls {
                hi = i + 1;
            }
            let returned = w.end_call <= calls;
            match (returned, w.outcome) {
                (true, Some(true)) if keeps_flushed || w.sync => lo = i + 1,
                (_, Some(false)) if !w.refused => optional.push(i),
                _ => {}
            }
        }
        for sp in &self.sync_points {
            if sp.end_call <= calls {
                lo = lo.max(sp.floor);
            }
        }
        optional.retain(|&i| i < hi);
        Bounds { lo, hi, optional }
    }

    /// The state after every write of the history that was acknowledged (failed writes left
    /// out): what a running, unpoisoned database must show.
    pub fn acknowledged_state(&self) -> State {
        let mut state = State::new();
        for w in &self.writes {
            if w.outcome == Some(true) {
                apply(self.merge, &mut state, &w.entries);
            }
        }
        state
    }

    /// Finds a prefix within `bounds` whose state equals `recovered`.
    pub fn check(&self, recovered: &State, bounds: &Bounds) -> Verdict {
        // Optional (failed) writes are few; try every subset of them, most included first.
        let optional: Vec<usize> = bounds.optional.iter().copied().take(6).collect();
        let subsets = 1u32 << optional.len();
        for mask in 0..subsets {
            let skip: BTreeSet<usize> = optional
                .iter()
                .enumerate()
                .filter(|(bit, _)| mask & (1 << bit) != 0)
                .map(|(_, &i)| i)
                .collect();
            if let Some(p) = self.find_prefix(recovered, bounds.lo, bounds.hi, &skip) {
                return Verdict::Prefix(p);
            }
        }
        Verdict::Violation(self.explain(recovered, bounds))
    }

    /// The first prefix length in `lo..=hi` whose state (leaving out `skip`) equals
    /// `recovered`, found by walking the writes once and counting mismatched keys.
    fn find_prefix(
        &self,
        recovered: &State,
        lo: usize,
        hi: usize,
        skip: &BTreeSet<usize>,
    ) -> Option<usize> {
        let mut model = State::new();
        let mut mismatches = recovered.len();
        for p in 0..=hi.min(self.writes.len()) {
            if p >= lo && mismatches == 0 {
                return Some(p);
            }
            let Some(w) = self.writes.get(p) else { break };
            if skip.contains(&p) || w.refused {
                continue;
            }
            let keys: BTreeSet<&[u8]> = w.entries.iter().map(Entry::key).collect();
            for k in &keys {
                if model.get(*k) != recovered.get(*k) {
                    mismatches -= 1;
                }
            }
            apply(self.merge, &mut model, &w.entries);
            for k in &keys {
                if model.get(*k) != recovered.get(*k) {
                    mismatches += 1;
                }
            }
        }
        None
    }

    /// A readable account of why no prefix matched: the closest prefix and its differences.
    fn explain(&self, recovered: &State, bounds: &Bounds) -> String {
        let mut model = State::new();
        let mut best = (usize::MAX, 0usize);
        for p in 0..=bounds.hi.min(self.writes.len()) {
            let diff = diff_count(&model, recovered);
            if diff < best.0 {
                best = (diff, p);
            }
            if let Some(w) = self.writes.get(p).filter(|w| !w.refused) {
                apply(self.merge, &mut model, &w.entries);
            }
        }
        let mut model = State::new();
        for w in self.writes.iter().take(best.1).filter(|w| !w.refused) {
            apply(self.merge, &mut model, &w.entries);
        }
        let mut diffs = Vec::new();
        for k in model
            .keys()
            .chain(recovered.keys())
            .collect::<BTreeSet<_>>()
        {
            let (m, r) = (model.get(k), recovered.get(k));
            if m != r && diffs.len() < 6 {
                diffs.push(format!(
                    "{}: expected {:?}, found {:?}",
                    String::from_utf8_lossy(k),
                    m.map(|v| short(v)),
                    r.map(|v| short(v))
                ));
            }
        }
        format!(
            "no prefix in {}..={} (optional {:?}) matches; closest is {} with {} keys differing: {}",
            bounds.lo,
            bounds.hi,
            bounds.optional,
            best.1,
            best.0,
            diffs.join("; ")
        )
    }
}

fn short(v: &[u8]) -> String {
    let s = String::from_utf8_lossy(v);
    if s.len() > 24 {
        format!("{}..({} bytes)", &s[..24], v.len())
    } else {
        s.into_owned()
    }
}

fn diff_count(a: &State, b: &State) -> usize {
    let keys: BTreeSet<&Vec<u8>> = a.keys().chain(b.keys()).collect();
    keys.into_iter().filter(|k| a.get(*k) != b.get(*k)).count()
}

/// Applies one batch to `state`.
pub fn apply(merge: MergeKind, state: &mut State, entries: &[Entry]) {
    for e in entries {
        match e {
            Entry::Put(k, v) => {
                state.insert(k.clone(), v.clone());
            }
            Entry::Delete(k) => {
                state.remove(k);
            }
            Entry::Merge(k, op) => {
                let next = merge.fold(state.get(k).map(Vec::as_slice), op);
                state.insert(k.clone(), next);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(k: &str, v: &str) -> Entry {
        Entry::Put(k.as_bytes().to_vec(), v.as_bytes().to_vec())
    }

    fn state(pairs: &[(&str, &str)]) -> State {
        pairs
            .iter()
            .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect()
    }

    #[test]
    fn prefixes_gaps_and_half_batches() {
        let mut h = History::new(MergeKind::StringAppend);
        let a = h.issue(vec![put("a", "1")], false, 0);
        h.complete(a, true, 1);
        let b = h.issue(vec![put("b", "2"), put("c", "3")], true, 1);
        h.complete(b, true, 2);
        let c = h.issue(vec![Entry::Delete(b"a".to_vec())], false, 2);
        h.complete(c, true, 3);
        let all = h.bounds(u64::MAX, true);
        assert_eq!(all.lo, 3);
        assert_eq!(
            h.check(&state(&[("b", "2"), ("c", "3")]), &all),
            Verdict::Prefix(3)
        );
        let power = h.bounds(u64::MAX, false);
        assert_eq!(power.lo, 2);
        assert_eq!(
            h.check(&state(&[("a", "1"), ("b", "2"), ("c", "3")]), &power),
            Verdict::Prefix(2)
        );
        // A half batch, a gap (b without a) and a resurrected delete are all violations.
        for bad in [
            state(&[("a", "1"), ("b", "2")]),
            state(&[("b", "2"), ("c", "3"), ("x", "9")]),
            state(&[("a", "1")]),
        ] {
            assert!(
                matches!(h.check(&bad, &power), Verdict::Violation(_)),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn failed_writes_are_optional_and_merges_fold() {
        let mut h = History::new(MergeKind::U64Add);
        let one = 1u64.to_le_bytes().to_vec();
        let a = h.issue(vec![Entry::Merge(b"n".to_vec(), one.clone())], false, 0);
        h.complete(a, true, 1);
        let b = h.issue(vec![Entry::Merge(b"n".to_vec(), one.clone())], false, 1);
        h.complete(b, false, 2);
        let c = h.issue(vec![Entry::Merge(b"n".to_vec(), one)], false, 2);
        h.complete(c, true, 3);
        let bounds = h.bounds(u64::MAX, true);
        let mut s = State::new();
        s.insert(b"n".to_vec(), 2u64.to_le_bytes().to_vec());
        assert_eq!(h.check(&s, &bounds), Verdict::Prefix(3));
        s.insert(b"n".to_vec(), 3u64.to_le_bytes().to_vec());
        assert_eq!(h.check(&s, &bounds), Verdict::Prefix(3));
        s.insert(b"n".to_vec(), 4u64.to_le_bytes().to_vec());
        assert!(matches!(h.check(&s, &bounds), Verdict::Violation(_)));
    }
}
