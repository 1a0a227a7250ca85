//! Runs one compaction: merges the input tables, keeps exactly the entries some reader can
//! still see, combines merge operands, drops expired values and what the compaction filter
//! removes, and writes the result as new tables of the output level.
//!
//! Per user key (entries arrive newest first), with `s` the oldest live snapshot (or the last
//! sequence number when there is none):
//! - every entry newer than `s` is kept as it is, because some snapshot may read it;
//! - of the entries at or below `s`, only the newest is visible to anyone: a value is kept
//!   (after the compaction filter), a deletion is kept unless no deeper level can hold the key,
//!   and merge operands are folded onto the value below them; everything older is dropped.

use std::cmp::Ordering as CmpOrdering;
use std::sync::atomic::Ordering;
use std::time::Instant;

use parking_lot::MutexGuard;

use super::background::meta_from_properties;
use super::{DbInner, DbState};
use crate::compaction::Compaction;
use crate::error::{Error, Result};
use crate::filename::table_file_name;
use crate::iter::{
    split_expiring, InternalIterator, LevelIterator, MergingIterator, EXPIRY_PREFIX_LEN,
};
use crate::key::{append_internal_key, parse_internal_key, SequenceNumber, ValueKind};
use crate::sstable::{ReadFlags, TableBuilder, TableOptions};
use crate::ttl::FilterDecision;
use crate::version::{FileMetaData, VersionEdit};

/// One entry of the key being assembled.
struct Entry {
    sequence: SequenceNumber,
    kind: ValueKind,
    value: Vec<u8>,
}

/// What compaction decided to write for one user key, newest first.
type Output = Vec<(SequenceNumber, ValueKind, Vec<u8>)>;

impl DbInner {
    /// Runs `c` and installs its result. Called with `state` held; releases it for the I/O.
    pub(crate) fn run_compaction(
        &self,
        state: &mut MutexGuard<'_, DbState>,
        mut c: Compaction,
    ) -> Result<()> {
        let start = Instant::now();
        let output_level = c.output_level();
        if c.is_trivial_move() {
            let mut edit = VersionEdit::default();
            let file = c.inputs[0][0].clone();
            edit.delete_file(c.level, file.number);
            edit.add_file(output_level, (*file).clone());
            state.versions.log_and_apply(edit)?;
            self.stats.trivial_moves.fetch_add(1, Ordering::Relaxed);
            self.install_view(state);
            return Ok(());
        }
        let smallest_snapshot = self
            .snapshots
            .oldest()
            .unwrap_or_else(|| self.last_sequence.load(Ordering::Acquire));
        let input_bytes = c.total_input_bytes();
        let outcome =
            MutexGuard::unlocked(state, || self.compact_inputs(&mut c, smallest_snapshot));
        let mut outputs_numbers: Vec<u64> = Vec::new();
        let result = outcome.and_then(|outputs| {
            outputs_numbers = outputs.iter().map(|f| f.number).collect();
            let mut edit = VersionEdit::default();
            c.add_input_deletions(&mut edit);
            let written: u64 = outputs.iter().map(|f| f.file_size).sum();
            for f in outputs {
                edit.add_file(output_level, f);
            }
            state.versions.log_and_apply(edit)?;
            let counters = &self.stats.per_level[output_level];
            counters.compactions.fetch_add(1, Ordering::Relaxed);
            counters
                .bytes_read
                .fetch_add(input_bytes, Ordering::Relaxed);
            counters.bytes_written.fetch_add(written, Ordering::Relaxed);
            counters
                .micros
                .fetch_add(start.elapsed().as_micros() as u64, Ordering::Relaxed);
            self.stats.compactions.fetch_add(1, Ordering::Relaxed);
            Ok(())
        });
        for n in &outputs_numbers {
            state.pending_outputs.remove(n);
        }
        // Outputs are never removed here on failure: when the manifest write failed, its edit may
        // still have reached the disk, and then they are live. The next open deletes them if not.
        result?;
        self.install_view(state);
        self.delete_obsolete_files(state);
        Ok(())
    }

    fn new_output_number(&self) -> u64 {
        let mut state = self.state.lock();
        let n = state.versions.new_file_number();
        state.pending_outputs.insert(n);
        n
    }

    /// Merges the inputs into new tables. Runs without the state lock.
    fn compact_inputs(
        &self,
        c: &mut Compaction,
        smallest_snapshot: SequenceNumber,
    ) -> Result<Vec<FileMetaData>> {
        let flags = ReadFlags {
            verify_checksums: true,
            fill_cache: false,
        };
        let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
        for (which, files) in c.inputs.iter().enumerate() {
            if c.level + which == 0 {
                for f in files {
                    children.push(self.table_cache.iter(f.number, flags));
                }
            } else if !files.is_empty() {
                children.push(Box::new(LevelIterator::new(
                    self.icmp.clone(),
                    files.clone(),
                    self.table_cache.clone(),
                    flags,
                )));
            }
        }
        let mut input = MergingIterator::new(self.icmp.clone(), children);
        input.seek_to_first();

        let mut outputs: Vec<FileMetaData> = Vec::new();
        let mut builder: Option<(u64, TableBuilder)> = None;
        let mut key_buf: Vec<u8> = Vec::new();
        let mut entries: Vec<Entry> = Vec::new();
        let result = (|| -> Result<()> {
            while input.valid() {
                if self.shutting_down.load(Ordering::Acquire) {
                    return Err(Error::ShuttingDown);
                }
                // Gather every entry of the next user key.
                let first = input.key().to_vec();
                let parsed = parse_internal_key(&first).ok_or_else(|| {
                    Error::corruption(
                        "<compaction>",
                        0,
                        format!("malformed internal key {first:?}"),
                    )
                })?;
                let user_key = parsed.user_key.to_vec();
                entries.clear();
                while input.valid() {
                    let p = parse_internal_key(input.key()).ok_or_else(|| {
                        Error::corruption("<compaction>", 0, "malformed internal key")
                    })?;
                    if self.icmp.compare_user(p.user_key, &user_key) != CmpOrdering::Equal {
                        break;
                    }
                    entries.push(Entry {
                        sequence: p.sequence,
                        kind: p.kind,
                        value: input.value().to_vec(),
                    });
                    input.next();
                }
                input.status()?;
                let out = self.resolve_key(c, &user_key, &entries, smallest_snapshot);
                if out.is_empty() {
                    continue;
                }
                // Cut files only between user keys, so no key's versions straddle two files.
                let cut = match &builder {
                    Some((_, b)) => {
                        b.file_size() >= c.max_output_file_size || c.should_stop_before(&first)
                    }
                    None => {
                        c.should_stop_before(&first);
                        false
                    }
                };
                if cut {
                    if let Some((number, b)) = builder.take() {
                        outputs.push(meta_from_properties(number, &b.finish()?));
                    }
                }
                if builder.is_none() {
                    let number = self.new_output_number();
                    let path = table_file_name(&self.dir, number);
                    let file = self.options.fs.create(&path)?;
                    builder = Some((
                        number,
                        TableBuilder::new(TableOptions::from_options(&self.options), file, path),
                    ));
                }
                if let Some((_, b)) = builder.as_mut() {
                    for (seq, kind, value) in out {
                        key_buf.clear();
                        append_internal_key(&mut key_buf, &user_key, seq, kind);
                        b.add(&key_buf, &value)?;
                    }
                }
            }
            input.status()
        })();
        match result {
            Ok(()) => {
                if let Some((number, b)) = builder.take() {
                    outputs.push(meta_from_properties(number, &b.finish()?));
                }
                if !outputs.is_empty() {
                    self.options.fs.sync_dir(&self.dir)?;
                }
                Ok(outputs)
            }
            Err(e) => {
                if let Some((number, b)) = builder.take() {
                    b.abandon();
                    outputs.push(FileMetaData {
                        number,
                        file_size: 0,
                        smallest: Vec::new(),
                        largest: Vec::new(),
                        smallest_seqno: 0,
                        largest_seqno: 0,
                        num_entries: 0,
                        num_deletions: 0,
                    });
                }
                let mut state = self.state.lock();
                for f in &outputs {
                    state.pending_outputs.remove(&f.number);
                    let _ = self
                        .options
                        .fs
                        .remove(&table_file_name(&self.dir, f.number));
                }
                Err(e)
            }
        }
    }

    /// Decides what to write for one user key. `entries` are newest first.
    fn resolve_key(
        &self,
        c: &mut Compaction,
        user_key: &[u8],
        entries: &[Entry],
        smallest_snapshot: SequenceNumber,
    ) -> Output {
        let mut out: Output = Vec::new();
        let mut i = 0;
        // Entries a snapshot may still read are kept verbatim.
        while i < entries.len() && entries[i].sequence > smallest_snapshot {
            let e = &entries[i];
            out.push((e.sequence, e.kind, e.value.clone()));
            i += 1;
        }
        let Some(newest) = entries.get(i) else {
            return out;
        };
        let now = self.options.clock.now_micros();
        match newest.kind {
            ValueKind::Deletion => {
                if !c.is_base_level_for_key(user_key) {
                    out.push((newest.sequence, ValueKind::Deletion, Vec::new()));
                }
            }
            ValueKind::Value | ValueKind::ExpiringValue => {
                self.emit_value(
                    c,
                    user_key,
                    newest.sequence,
                    newest.kind,
                    &newest.value,
                    now,
                    &mut out,
                );
            }
            ValueKind::Merge => {
                let mut j = i;
                while j < entries.len() && entries[j].kind == ValueKind::Merge {
                    j += 1;
                }
                let operands: Vec<&[u8]> = entries[i..j]
                    .iter()
                    .rev()
                    .map(|e| e.value.as_slice())
                    .collect();
                // The base below the operands: known if an entry ends the run here, or if no
                // deeper level can hold older entries of this key.
                let base: Option<Option<&Entry>> = match entries.get(j) {
                    Some(e) => Some(Some(e)),
                    None if c.is_base_level_for_key(user_key) => Some(None),
                    None => None,
                };
                let merged = base.and_then(|base| self.fold_merge(user_key, base, &operands, now));
                match merged {
                    Some((kind, value)) => {
                        self.emit_value(c, user_key, newest.sequence, kind, &value, now, &mut out)
                    }
                    None => {
                        let partial = self
                            .options
                            .merge_operator
                            .as_ref()
                            .filter(|_| operands.len() > 1 && base.is_none())
                            .and_then(|op| op.partial_merge(user_key, &operands));
                        match partial {
                            Some(p) => out.push((newest.sequence, ValueKind::Merge, p)),
                            None => {
                                // Keep the operands (and their base) exactly as they are.
                                for e in &entries[i..] {
                                    out.push((e.sequence, e.kind, e.value.clone()));
                                    if e.kind != ValueKind::Merge {
                                        break;
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        out
    }

    /// Applies `operands` to `base` (an entry, or `None` for no entry at all). A merge keeps the
    /// base's expiry: it never renews a TTL. `None` if the operator fails, so the caller keeps
    /// the inputs unchanged.
    fn fold_merge(
        &self,
        user_key: &[u8],
        base: Option<&Entry>,
        operands: &[&[u8]],
        now: u64,
    ) -> Option<(ValueKind, Vec<u8>)> {
        let op = self.options.merge_operator.as_ref()?;
        let (existing, expiry): (Option<&[u8]>, Option<u64>) = match base {
            None => (None, None),
            Some(e) => match e.kind {
                ValueKind::Deletion => (None, None),
                ValueKind::Value => (Some(e.value.as_slice()), None),
                ValueKind::ExpiringValue => match split_expiring(&e.value) {
                    Some((expiry, _)) if expiry <= now => (None, None),
                    Some((expiry, v)) => (Some(v), Some(expiry)),
                    None => return None,
                },
                ValueKind::Merge => return None,
            },
        };
        match op.full_merge(user_key, existing, operands) {
            Ok(v) => Some(match expiry {
                Some(expiry) => {
                    let mut stored = Vec::with_capacity(EXPIRY_PREFIX_LEN + v.len());
                    stored.extend_from_slice(&expiry.to_le_bytes());
                    stored.extend_from_slice(&v);
                    (ValueKind::ExpiringValue, stored)
                }
                None => (ValueKind::Value, v),
            }),
            Err(message) => {
                tracing::warn!(key = ?String::from_utf8_lossy(user_key), %message, "merge failed in compaction; operands kept");
                None
            }
        }
    }

    /// Writes the newest visible value of a key, after expiry and the compaction filter.
    #[allow(clippy::too_many_arguments)]
    fn emit_value(
        &self,
        c: &mut Compaction,
        user_key: &[u8],
        sequence: SequenceNumber,
        kind: ValueKind,
        stored: &[u8],
        now: u64,
        out: &mut Output,
    ) {
        let (user_value, expiry) = match kind {
            ValueKind::ExpiringValue => match split_expiring(stored) {
                Some((expiry, v)) => (v, Some(expiry)),
                None => {
                    out.push((sequence, kind, stored.to_vec()));
                    return;
                }
            },
            _ => (stored, None),
        };
        let mut removed = false;
        if expiry.is_some_and(|e| e <= now) {
            self.stats.expired_dropped.fetch_add(1, Ordering::Relaxed);
            removed = true;
        }
        let mut changed: Option<Vec<u8>> = None;
        if !removed {
            if let Some(filter) = &self.options.compaction_filter {
                match filter.filter(c.output_level(), user_key, user_value) {
                    FilterDecision::Keep => {}
                    FilterDecision::Remove => {
                        self.stats.filtered_dropped.fetch_add(1, Ordering::Relaxed);
                        removed = true;
                    }
                    FilterDecision::ChangeValue(v) => changed = Some(v),
                }
            }
        }
        if removed {
            // Older versions may live deeper: a tombstone must hide them.
            if !c.is_base_level_for_key(user_key) {
                out.push((sequence, ValueKind::Deletion, Vec::new()));
            }
            return;
        }
        match (changed, expiry) {
            (None, _) => out.push((sequence, kind, stored.to_vec())),
            (Some(v), None) => out.push((sequence, ValueKind::Value, v)),
            (Some(v), Some(expiry)) => {
                let mut s = Vec::with_capacity(EXPIRY_PREFIX_LEN + v.len());
                s.extend_from_slice(&expiry.to_le_bytes());
                s.extend_from_slice(&v);
                out.push((sequence, ValueKind::ExpiringValue, s));
            }
        }
    }
}
