//! The user-facing iterator: turns the merged stream of internal entries into user keys and
//! values as of one sequence number, hiding newer writes, deletions, expired values and older
//! versions, and combining merge operands.
//!
//! Forward mode: the inner iterator is positioned at or after the entries of the current user
//! key. Reverse mode: it is positioned just before them (at the previous user key's oldest
//! entry, or invalid). The current key (and the value, unless it can be borrowed from the inner
//! iterator) is kept in `saved_key`/`saved_value`.
//!
//! A value kept in a blob file is read only when [`DbIterator::value`] is asked for it (once
//! per position): a scan over keys never touches blob files. Merge operands on top of a blob
//! base read the base when they are folded.

use std::cmp::Ordering;
use std::sync::Arc;

use super::InternalIterator;
use crate::blob::{BlobCache, BlobRef};
use crate::error::{Error, Result};
use crate::key::{
    assign_bytes, make_internal_key, parse_internal_key, user_key, Comparator,
    InternalKeyComparator, SequenceNumber, ValueKind, MAX_SEQUENCE,
};
use crate::merge::MergeOperator;

/// Bytes of the expiry prefix in an [`ValueKind::ExpiringValue`] value.
pub(crate) const EXPIRY_PREFIX_LEN: usize = 8;

/// Splits an expiring value into its expiry (microseconds since the epoch) and the user value.
pub(crate) fn split_expiring(value: &[u8]) -> Option<(u64, &[u8])> {
    let expiry = crate::codec::decode_fixed64(value)?;
    Some((expiry, value.get(EXPIRY_PREFIX_LEN..)?))
}

/// Applies merge `operands` (oldest first) to `base` with `operator`; a missing operator or
/// an operator failure is an error naming the key.
pub(crate) fn apply_merge(
    operator: Option<&dyn MergeOperator>,
    user_key: &[u8],
    base: Option<&[u8]>,
    operands: &[&[u8]],
) -> Result<Vec<u8>> {
    let Some(op) = operator else {
        return Err(Error::InvalidArgument(format!(
            "key {:?} has merge operands but no merge operator is configured",
            String::from_utf8_lossy(user_key)
        )));
    };
    op.full_merge(user_key, base, operands)
        .map_err(|message| Error::Merge {
            operator: op.name().to_string(),
            key: String::from_utf8_lossy(user_key).into_owned(),
            message,
        })
}

/// The user's value for a stored value of `kind`: the value itself, or for a blob kind
/// (`stored` without any expiry prefix) the value its reference points at, read through `blobs`.
pub(crate) fn resolve_value(
    blobs: Option<&BlobCache>,
    user_key: &[u8],
    kind: ValueKind,
    stored: &[u8],
) -> Result<Vec<u8>> {
    if !kind.is_blob() {
        return Ok(stored.to_vec());
    }
    let r = BlobRef::decode(stored).ok_or_else(|| {
        Error::corruption(
            "<read>",
            0,
            format!(
                "malformed blob reference for key {:?}",
                String::from_utf8_lossy(user_key)
            ),
        )
    })?;
    match blobs {
        Some(cache) => cache.read(Some(user_key), &r),
        None => Err(Error::InvalidArgument(
            "blob reference read without a blob cache".into(),
        )),
    }
}

/// Everything the read path needs to interpret entries: visibility, expiry and merges.
#[derive(Clone)]
pub(crate) struct ReadContext {
    pub(crate) icmp: InternalKeyComparator,
    pub(crate) sequence: SequenceNumber,
    pub(crate) now_micros: u64,
    pub(crate) merge_operator: Option<Arc<dyn MergeOperator>>,
    /// Where values kept in blob files are read from; `None` only in tests without blobs.
    pub(crate) blobs: Option<Arc<BlobCache>>,
}

impl ReadContext {
    /// Applies merge `operands` (oldest first) to `base`.
    pub(crate) fn merge(
        &self,
        user_key: &[u8],
        base: Option<&[u8]>,
        operands: &[&[u8]],
    ) -> Result<Vec<u8>> {
        apply_merge(self.merge_operator.as_deref(), user_key, base, operands)
    }

    /// The user's value for a stored value of `kind`: the value itself, or for a blob kind the
    /// value its reference points at. `stored` excludes any expiry prefix.
    pub(crate) fn resolve(
        &self,
        user_key: &[u8],
        kind: ValueKind,
        stored: &[u8],
    ) -> Result<Vec<u8>> {
        resolve_value(self.blobs.as_deref(), user_key, kind, stored)
    }

    /// True if an expiring value with this expiry is gone at the read's time.
    pub(crate) fn expired(&self, expiry_micros: u64) -> bool {
        expiry_micros <= self.now_micros
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Forward,
    Reverse,
}

/// Where the current value lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ValueSource {
    /// In the inner iterator's current value, from this offset.
    Inner(usize),
    /// In `saved_value`.
    Saved,
    /// In a blob file, through the reference in the inner iterator's current value from this
    /// offset; read on demand.
    InnerBlob(usize),
    /// In a blob file, through the reference in `saved_value`; read on demand.
    SavedBlob,
}

/// A cursor over user keys and values, as of one snapshot, within optional bounds.
///
/// Obtain one from [`crate::Db::iter`]. After any positioning call, check [`DbIterator::valid`];
/// when it turns false, [`DbIterator::status`] tells an error from the end of the data.
pub struct DbIterator {
    inner: Box<dyn InternalIterator>,
    ctx: ReadContext,
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
    direction: Direction,
    valid: bool,
    saved_key: Vec<u8>,
    /// The user key a forward step skips past. Swapped with `saved_key` instead of copied, so
    /// stepping allocates nothing once both buffers have grown to the longest key.
    skip_key: Vec<u8>,
    saved_value: Vec<u8>,
    value_source: ValueSource,
    /// Left by the last backward step: the kind of the entry the inner cursor sits on, when the
    /// step stopped there, having read it and found it visible, within the upper bound, and of
    /// the user key before the current one. Read only by `prev` while valid in reverse, when
    /// the last move was that step.
    boundary: Option<ValueKind>,
    /// The value read from a blob file for the current position, once asked for.
    blob_value: std::sync::OnceLock<std::result::Result<Vec<u8>, Error>>,
    /// The first failure to read a value from its blob file, kept until the next seek: it
    /// makes the iterator invalid and is reported by `status`, like any other error, even
    /// after the position moves.
    blob_error: std::sync::OnceLock<Error>,
    error: Option<Error>,
    /// Keeps alive what the inner iterators read from (memtables, the version's files).
    _pin: Box<dyn Send + Sync>,
}

impl DbIterator {
    pub(crate) fn new(
        inner: Box<dyn InternalIterator>,
        ctx: ReadContext,
        lower: Option<Vec<u8>>,
        upper: Option<Vec<u8>>,
        pin: Box<dyn Send + Sync>,
    ) -> Self {
        DbIterator {
            inner,
            ctx,
            lower,
            upper,
            direction: Direction::Forward,
            valid: false,
            saved_key: Vec::new(),
            skip_key: Vec::new(),
            saved_value: Vec::new(),
            value_source: ValueSource::Saved,
            boundary: None,
            blob_value: std::sync::OnceLock::new(),
            blob_error: std::sync::OnceLock::new(),
            error: None,
            _pin: pin,
        }
    }

    /// The user-key comparator this iterator orders by.
    pub fn comparator(&self) -> &std::sync::Arc<dyn Comparator> {
        self.ctx.icmp.user()
    }

    /// True when positioned at a key (false once a value could not be read from its blob
    /// file; `status` then says why).
    pub fn valid(&self) -> bool {
        self.valid && self.blob_error.get().is_none()
    }

    /// The current key. REQUIRES: `valid()`.
    pub fn key(&self) -> &[u8] {
        &self.saved_key
    }

    /// The current value. REQUIRES: `valid()`.
    ///
    /// A value kept in a blob file is read here; if that fails the value is empty and
    /// [`DbIterator::status`] reports the error ([`DbIterator::try_value`] returns it directly).
    pub fn value(&self) -> &[u8] {
        self.try_value().unwrap_or(&[])
    }

    /// The current value, or the error met reading it from its blob file. REQUIRES: `valid()`.
    pub fn try_value(&self) -> Result<&[u8]> {
        let reference = match self.value_source {
            ValueSource::Saved => return Ok(&self.saved_value),
            ValueSource::Inner(offset) => {
                return Ok(self.inner.value().get(offset..).unwrap_or(&[]))
            }
            ValueSource::InnerBlob(offset) => self.inner.value().get(offset..).unwrap_or(&[]),
            ValueSource::SavedBlob => &self.saved_value,
        };
        let read = self.blob_value.get_or_init(|| {
            self.ctx
                .resolve(&self.saved_key, ValueKind::BlobIndex, reference)
        });
        match read {
            Ok(v) => Ok(v),
            Err(e) => {
                let _ = self.blob_error.set(e.duplicate());
                Err(e.duplicate())
            }
        }
    }

    /// The first error met; `Ok` if iteration ended because the data (or the bounds) ended.
    /// Includes a failure to read the current value from its blob file.
    pub fn status(&self) -> Result<()> {
        if let Some(e) = self.blob_error.get() {
            return Err(e.duplicate());
        }
        match &self.error {
            Some(e) => Err(e.duplicate()),
            None => self.inner.status(),
        }
    }

    /// Positions at the first key (at or after the lower bound).
    pub fn seek_to_first(&mut self) {
        self.error = None;
        self.blob_error = std::sync::OnceLock::new();
        self.direction = Direction::Forward;
        match self.lower.clone() {
            Some(lower) => self.inner.seek(&make_internal_key(
                &lower,
                self.ctx.sequence,
                ValueKind::FOR_SEEK,
            )),
            None => self.inner.seek_to_first(),
        }
        self.find_next_user_entry(false);
    }

    /// Positions at the last key (before the upper bound).
    pub fn seek_to_last(&mut self) {
        self.error = None;
        self.blob_error = std::sync::OnceLock::new();
        self.direction = Direction::Reverse;
        match self.upper.clone() {
            Some(upper) => self.inner.seek_for_prev(&make_internal_key(
                &upper,
                MAX_SEQUENCE,
                ValueKind::FOR_SEEK,
            )),
            None => self.inner.seek_to_last(),
        }
        self.find_prev_user_entry(None);
    }

    /// Positions at the first key `>= target`.
    pub fn seek(&mut self, target: &[u8]) {
        self.error = None;
        self.blob_error = std::sync::OnceLock::new();
        self.direction = Direction::Forward;
        let target = match &self.lower {
            Some(lower) if self.ctx.icmp.compare_user(target, lower) == Ordering::Less => {
                lower.clone()
            }
            _ => target.to_vec(),
        };
        self.inner.seek(&make_internal_key(
            &target,
            self.ctx.sequence,
            ValueKind::FOR_SEEK,
        ));
        self.find_next_user_entry(false);
    }

    /// Positions at the last key `<= target`.
    pub fn seek_for_prev(&mut self, target: &[u8]) {
        if let Some(upper) = &self.upper {
            if self.ctx.icmp.compare_user(target, upper) != Ordering::Less {
                self.seek_to_last();
                return;
            }
        }
        self.error = None;
        self.blob_error = std::sync::OnceLock::new();
        self.direction = Direction::Reverse;
        // The smallest trailer sorts last among the target's entries.
        self.inner
            .seek_for_prev(&make_internal_key(target, 0, ValueKind::Deletion));
        self.find_prev_user_entry(None);
    }

    /// Moves to the next key. REQUIRES: `valid()`.
    pub fn next(&mut self) {
        if !self.valid() {
            return;
        }
        if self.direction == Direction::Reverse {
            self.direction = Direction::Forward;
            self.inner
                .seek(&make_internal_key(&self.saved_key, 0, ValueKind::Deletion));
        } else if matches!(
            self.value_source,
            ValueSource::Inner(_) | ValueSource::InnerBlob(_)
        ) {
            // The inner iterator still sits on the entry returned (a merge result has moved
            // it past its operands instead): step off it here rather than compare it again.
            self.inner.next();
        }
        std::mem::swap(&mut self.skip_key, &mut self.saved_key);
        self.find_next_user_entry(true);
    }

    /// Moves to the previous key. REQUIRES: `valid()`.
    pub fn prev(&mut self) {
        if !self.valid() {
            return;
        }
        let known = if self.direction == Direction::Forward {
            self.direction = Direction::Reverse;
            let target = make_internal_key(&self.saved_key, MAX_SEQUENCE, ValueKind::FOR_SEEK);
            self.inner.seek_for_prev(&target);
            None
        } else {
            // Valid in reverse: the last move was a backward step, which left `boundary`.
            self.boundary
        };
        self.find_prev_user_entry(known);
    }

    fn fail(&mut self, error: Error) {
        self.error = Some(error);
        self.valid = false;
    }

    /// A corruption error about the entry at the inner cursor, located where it came from:
    /// its table and the offset of its block, or the memtable.
    fn corrupt_entry(&self, what: String) -> Error {
        match self.inner.source() {
            Some((path, block)) => {
                Error::corruption(path, block, format!("{what} (in the block at this offset)"))
            }
            None => Error::corruption("<memtable>", 0, what),
        }
    }

    fn corrupt_key(&mut self) {
        let key = self.inner.key().to_vec();
        let e = self.corrupt_entry(format!("malformed internal key {key:?}"));
        self.fail(e);
    }

    fn past_upper(&self, user_key: &[u8]) -> bool {
        matches!(&self.upper, Some(u) if self.ctx.icmp.compare_user(user_key, u) != Ordering::Less)
    }

    fn below_lower(&self, user_key: &[u8]) -> bool {
        matches!(&self.lower, Some(l) if self.ctx.icmp.compare_user(user_key, l) == Ordering::Less)
    }

    /// Forward: finds the next user key with a value, skipping entries of `skip_key` (when
    /// `skip` is set) and of every key that resolves to nothing.
    fn find_next_user_entry(&mut self, mut skip: bool) {
        self.valid = false;
        self.blob_value = std::sync::OnceLock::new();
        while self.inner.valid() {
            let Some(parsed) = parse_internal_key(self.inner.key()) else {
                self.corrupt_key();
                return;
            };
            if parsed.sequence > self.ctx.sequence {
                self.inner.next();
                continue;
            }
            if skip
                && self.ctx.icmp.compare_user(parsed.user_key, &self.skip_key) != Ordering::Greater
            {
                self.inner.next();
                continue;
            }
            if self.past_upper(parsed.user_key) {
                return;
            }
            // The newest visible entry of a new user key.
            assign_bytes(&mut self.saved_key, parsed.user_key);
            match parsed.kind {
                ValueKind::Value => {
                    self.value_source = ValueSource::Inner(0);
                    self.valid = true;
                    return;
                }
                ValueKind::BlobIndex => {
                    self.value_source = ValueSource::InnerBlob(0);
                    self.valid = true;
                    return;
                }
                ValueKind::ExpiringValue | ValueKind::ExpiringBlobIndex => {
                    match split_expiring(self.inner.value()) {
                        Some((expiry, _)) if !self.ctx.expired(expiry) => {
                            self.value_source = if parsed.kind.is_blob() {
                                ValueSource::InnerBlob(EXPIRY_PREFIX_LEN)
                            } else {
                                ValueSource::Inner(EXPIRY_PREFIX_LEN)
                            };
                            self.valid = true;
                            return;
                        }
                        Some(_) => {}
                        None => {
                            self.corrupt_value();
                            return;
                        }
                    }
                }
                ValueKind::Deletion => {}
                ValueKind::Merge => {
                    if self.collect_forward_merge() {
                        return;
                    }
                    if self.error.is_some() {
                        return;
                    }
                }
            }
            std::mem::swap(&mut self.skip_key, &mut self.saved_key);
            skip = true;
            if self.inner.valid() {
                self.inner.next();
            }
        }
        if let Err(e) = self.inner.status() {
            self.fail(e);
        }
    }

    /// The expiring value at the inner cursor, an entry of `saved_key`, is too short to hold
    /// its expiry.
    fn corrupt_value(&mut self) {
        let key = String::from_utf8_lossy(&self.saved_key).into_owned();
        let e = self.corrupt_entry(format!(
            "expiring value of key {key:?} is shorter than its expiry"
        ));
        self.fail(e);
    }

    /// At the newest visible entry of `saved_key`, a merge operand: gathers the operands and the
    /// base below them and computes the value. Returns true if the iterator is now valid.
    fn collect_forward_merge(&mut self) -> bool {
        let mut operands: Vec<Vec<u8>> = vec![self.inner.value().to_vec()];
        let mut base: Option<Vec<u8>> = None;
        self.inner.next();
        while self.inner.valid() {
            let Some(parsed) = parse_internal_key(self.inner.key()) else {
                self.corrupt_key();
                return false;
            };
            if self.ctx.icmp.compare_user(parsed.user_key, &self.saved_key) != Ordering::Equal {
                break;
            }
            match parsed.kind {
                ValueKind::Merge => operands.push(self.inner.value().to_vec()),
                ValueKind::Value | ValueKind::BlobIndex => {
                    match self
                        .ctx
                        .resolve(&self.saved_key, parsed.kind, self.inner.value())
                    {
                        Ok(v) => base = Some(v),
                        Err(e) => {
                            self.fail(e);
                            return false;
                        }
                    }
                    break;
                }
                ValueKind::ExpiringValue | ValueKind::ExpiringBlobIndex => {
                    match split_expiring(self.inner.value()) {
                        Some((expiry, v)) if !self.ctx.expired(expiry) => {
                            match self.ctx.resolve(&self.saved_key, parsed.kind, v) {
                                Ok(v) => base = Some(v),
                                Err(e) => {
                                    self.fail(e);
                                    return false;
                                }
                            }
                        }
                        Some(_) => {}
                        None => {
                            self.corrupt_value();
                            return false;
                        }
                    }
                    break;
                }
                ValueKind::Deletion => break,
            }
            self.inner.next();
        }
        if let Err(e) = self.inner.status() {
            self.fail(e);
            return false;
        }
        operands.reverse();
        let refs: Vec<&[u8]> = operands.iter().map(Vec::as_slice).collect();
        match self.ctx.merge(&self.saved_key, base.as_deref(), &refs) {
            Ok(v) => {
                self.saved_value = v;
                self.value_source = ValueSource::Saved;
                self.valid = true;
                true
            }
            Err(e) => {
                self.fail(e);
                false
            }
        }
    }

    /// Reverse: the inner iterator is at or before the last entry of the wanted key; walks back
    /// over whole user keys until one resolves to a value. `known` is the kind of the entry the
    /// cursor sits on when the previous backward step stopped there (its `boundary`), so that
    /// entry is not read again.
    fn find_prev_user_entry(&mut self, mut known: Option<ValueKind>) {
        self.valid = false;
        self.boundary = None;
        self.blob_value = std::sync::OnceLock::new();
        let bytewise = self.ctx.icmp.is_bytewise();
        // State of the key being assembled, applied oldest entry first: the key in
        // `saved_key`, its base value in `saved_value` (both reused, so stepping back allocates
        // nothing for plain values).
        let mut has_current = false;
        let mut has_base = false;
        // Whether the base in `saved_value` is a blob reference (read only when asked for).
        let mut base_is_blob = false;
        let mut operands: Vec<Vec<u8>> = Vec::new();
        let mut deleted = true;
        loop {
            let (key, kind) = match known.take() {
                Some(kind) => (user_key(self.inner.key()), kind),
                None => {
                    if !self.inner.valid() {
                        break;
                    }
                    let Some(parsed) = parse_internal_key(self.inner.key()) else {
                        self.corrupt_key();
                        return;
                    };
                    if parsed.sequence > self.ctx.sequence || self.past_upper(parsed.user_key) {
                        self.inner.prev();
                        continue;
                    }
                    (parsed.user_key, parsed.kind)
                }
            };
            let same = has_current
                && if bytewise {
                    key == self.saved_key.as_slice()
                } else {
                    self.ctx.icmp.compare_user(key, &self.saved_key) == Ordering::Equal
                };
            if !same {
                if has_current && (!deleted || !operands.is_empty()) {
                    // The key assembled so far is live. The next step back starts from this
                    // entry without reading it again.
                    self.boundary = Some(kind);
                    break;
                }
                if self.below_lower(key) {
                    has_current = false;
                    break;
                }
                assign_bytes(&mut self.saved_key, key);
                has_current = true;
                has_base = false;
                operands.clear();
                deleted = true;
            }
            match kind {
                ValueKind::Deletion => {
                    has_base = false;
                    operands.clear();
                    deleted = true;
                }
                ValueKind::Value | ValueKind::BlobIndex => {
                    assign_bytes(&mut self.saved_value, self.inner.value());
                    has_base = true;
                    base_is_blob = kind.is_blob();
                    operands.clear();
                    deleted = false;
                }
                ValueKind::ExpiringValue | ValueKind::ExpiringBlobIndex => {
                    operands.clear();
                    match split_expiring(self.inner.value()) {
                        Some((expiry, v)) if !self.ctx.expired(expiry) => {
                            assign_bytes(&mut self.saved_value, v);
                            has_base = true;
                            base_is_blob = kind.is_blob();
                            deleted = false;
                        }
                        Some(_) => {
                            has_base = false;
                            deleted = true;
                        }
                        None => {
                            self.saved_key = key.to_vec();
                            self.corrupt_value();
                            return;
                        }
                    }
                }
                ValueKind::Merge => operands.push(self.inner.value().to_vec()),
            }
            self.inner.prev();
        }
        // A valid cursor has met no error (the iterator contract).
        if !self.inner.valid() {
            if let Err(e) = self.inner.status() {
                self.fail(e);
                return;
            }
        }
        if !has_current || (deleted && operands.is_empty()) {
            return;
        }
        if !operands.is_empty() {
            if has_base && base_is_blob {
                // Merge operands fold onto the real value, read from its blob file now.
                let read =
                    self.ctx
                        .resolve(&self.saved_key, ValueKind::BlobIndex, &self.saved_value);
                match read {
                    Ok(v) => self.saved_value = v,
                    Err(e) => {
                        self.fail(e);
                        return;
                    }
                }
            }
            let refs: Vec<&[u8]> = operands.iter().map(Vec::as_slice).collect();
            let base = has_base.then_some(self.saved_value.as_slice());
            match self.ctx.merge(&self.saved_key, base, &refs) {
                Ok(v) => self.saved_value = v,
                Err(e) => {
                    self.fail(e);
                    return;
                }
            }
            self.value_source = ValueSource::Saved;
        } else if !has_base {
            self.saved_value.clear();
            self.value_source = ValueSource::Saved;
        } else if base_is_blob {
            // `saved_value` holds the reference; `value()` reads the blob.
            self.value_source = ValueSource::SavedBlob;
        } else {
            self.value_source = ValueSource::Saved;
        }
        self.valid = true;
    }
}

impl std::fmt::Debug for DbIterator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DbIterator")
            .field("valid", &self.valid)
            .field("sequence", &self.ctx.sequence)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::iter::testing::VecIterator;
    use crate::key::{BytewiseComparator, InternalKeyComparator};
    use crate::merge::StringAppendOperator;

    type Write = (u64, ValueKind, Vec<u8>);

    /// A model: per key, the list of (seq, kind, value) writes.
    fn expected(
        writes: &[(Vec<u8>, u64, ValueKind, Vec<u8>)],
        seq: u64,
        now: u64,
        lower: Option<&[u8]>,
        upper: Option<&[u8]>,
    ) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut per_key: BTreeMap<Vec<u8>, Vec<Write>> = BTreeMap::new();
        for (k, s, kind, v) in writes {
            if *s <= seq {
                per_key
                    .entry(k.clone())
                    .or_default()
                    .push((*s, *kind, v.clone()));
            }
        }
        let mut out = Vec::new();
        for (k, mut entries) in per_key {
            if lower.is_some_and(|l| k.as_slice() < l) || upper.is_some_and(|u| k.as_slice() >= u) {
                continue;
            }
            entries.sort_by_key(|e| e.0);
            let mut value: Option<Vec<u8>> = None;
            for (_, kind, v) in entries {
                match kind {
                    ValueKind::Deletion => value = None,
                    ValueKind::Value => value = Some(v),
                    ValueKind::ExpiringValue => {
                        let (expiry, user) = split_expiring(&v).expect("valid");
                        value = (expiry > now).then(|| user.to_vec());
                    }
                    ValueKind::Merge => {
                        let mut s = value.unwrap_or_default();
                        if !s.is_empty() {
                            s.push(b',');
                        }
                        s.extend_from_slice(&v);
                        value = Some(s);
                    }
                    ValueKind::BlobIndex | ValueKind::ExpiringBlobIndex => {
                        panic!("the model writes no blob references")
                    }
                }
            }
            if let Some(v) = value {
                out.push((k, v));
            }
        }
        out
    }

    #[test]
    fn matches_model_in_both_directions_with_bounds_merges_and_expiry() {
        let icmp = InternalKeyComparator::new(Arc::new(BytewiseComparator));
        let mut rng = rand::rngs::StdRng::seed_from_u64(42);
        for round in 0..60 {
            let mut writes = Vec::new();
            let n = rng.gen_range(0..80);
            for s in 1..=n {
                let key = format!("k{:02}", rng.gen_range(0..20)).into_bytes();
                let kind = match rng.gen_range(0..10) {
                    0..=1 => ValueKind::Deletion,
                    2..=3 => ValueKind::Merge,
                    4 => ValueKind::ExpiringValue,
                    _ => ValueKind::Value,
                };
                let mut value = Vec::new();
                if kind == ValueKind::ExpiringValue {
                    value.extend_from_slice(&rng.gen_range(0u64..200).to_le_bytes());
                }
                if kind != ValueKind::Deletion {
                    value.extend_from_slice(format!("v{s}").as_bytes());
                }
                writes.push((key, s, kind, value));
            }
            let entries: Vec<(Vec<u8>, Vec<u8>)> = writes
                .iter()
                .map(|(k, s, kind, v)| (make_internal_key(k, *s, *kind), v.clone()))
                .collect();
            let seq = rng.gen_range(0..=n.max(1));
            let now = 100;
            let lower =
                (round % 3 == 1).then(|| format!("k{:02}", rng.gen_range(0..10)).into_bytes());
            let upper =
                (round % 4 == 2).then(|| format!("k{:02}", rng.gen_range(10..21)).into_bytes());
            let want = expected(&writes, seq, now, lower.as_deref(), upper.as_deref());
            // The model's merge joins with ',' only after a non-empty value; use the same operator.
            let ctx = ReadContext {
                icmp: InternalKeyComparator::new(Arc::new(BytewiseComparator)),
                sequence: seq,
                now_micros: now,
                merge_operator: Some(Arc::new(ModelAppend)),
                blobs: None,
            };
            let mut it = DbIterator::new(
                Box::new(VecIterator::new(entries, icmp.clone())),
                ctx,
                lower.clone(),
                upper.clone(),
                Box::new(()),
            );
            let mut got = Vec::new();
            it.seek_to_first();
            while it.valid() {
                got.push((it.key().to_vec(), it.value().to_vec()));
                it.next();
            }
            it.status().expect("status");
            assert_eq!(got, want, "forward, round {round}");
            let mut back = Vec::new();
            it.seek_to_last();
            while it.valid() {
                back.push((it.key().to_vec(), it.value().to_vec()));
                it.prev();
            }
            back.reverse();
            assert_eq!(back, want, "reverse, round {round}");
            // Zig-zag: from each position, next then prev returns to it.
            it.seek_to_first();
            let mut i = 0;
            while it.valid() {
                assert_eq!(it.key(), want[i].0.as_slice());
                it.next();
                if it.valid() {
                    it.prev();
                    assert_eq!(it.key(), want[i].0.as_slice(), "zig-zag round {round}");
                    it.next();
                }
                i += 1;
            }
            assert_eq!(i, want.len());
            // Seeks to arbitrary targets in both directions.
            for _ in 0..10 {
                let t = format!("k{:02}", rng.gen_range(0..22)).into_bytes();
                it.seek(&t);
                let first = want.iter().find(|(k, _)| k.as_slice() >= t.as_slice());
                assert_eq!(
                    it.valid().then(|| it.key().to_vec()),
                    first.map(|e| e.0.clone())
                );
                it.seek_for_prev(&t);
                let last = want
                    .iter()
                    .rev()
                    .find(|(k, _)| k.as_slice() <= t.as_slice());
                assert_eq!(
                    it.valid().then(|| it.key().to_vec()),
                    last.map(|e| e.0.clone())
                );
            }
        }
    }

    /// Appends with ',' after a non-empty value, like the model.
    struct ModelAppend;
    impl MergeOperator for ModelAppend {
        fn name(&self) -> &str {
            "model-append"
        }
        fn full_merge(
            &self,
            _k: &[u8],
            existing: Option<&[u8]>,
            operands: &[&[u8]],
        ) -> Result<Vec<u8>, String> {
            let mut s = existing.map(<[u8]>::to_vec).unwrap_or_default();
            for op in operands {
                if !s.is_empty() {
                    s.push(b',');
                }
                s.extend_from_slice(op);
            }
            Ok(s)
        }
    }

    #[test]
    fn merge_without_operator_is_an_error_not_data() {
        let icmp = InternalKeyComparator::new(Arc::new(BytewiseComparator));
        let entries = vec![(make_internal_key(b"a", 1, ValueKind::Merge), b"x".to_vec())];
        let ctx = ReadContext {
            icmp: InternalKeyComparator::new(Arc::new(BytewiseComparator)),
            sequence: 10,
            now_micros: 0,
            merge_operator: None,
            blobs: None,
        };
        let mut it = DbIterator::new(
            Box::new(VecIterator::new(entries, icmp)),
            ctx,
            None,
            None,
            Box::new(()),
        );
        it.seek_to_first();
        assert!(!it.valid());
        assert!(it.status().is_err());
        let _ = StringAppendOperator::new(b",");
    }

    /// A damaged entry is reported with the file it was read from (a table), or as the
    /// memtable's when it came from memory, in both directions; through a merge, the file is
    /// that of the source holding the entry, not of the first source.
    #[test]
    fn a_damaged_entry_names_the_file_it_came_from() {
        let icmp = InternalKeyComparator::new(Arc::new(BytewiseComparator));
        let good = |key: &[u8], seq| {
            (
                make_internal_key(key, seq, ValueKind::Value),
                b"ok".to_vec(),
            )
        };
        // An expiring value must start with its 8-byte expiry.
        let damaged = || {
            (
                make_internal_key(b"b", 2, ValueKind::ExpiringValue),
                b"abc".to_vec(),
            )
        };
        let table = "/db/000042.sst";
        let cases: Vec<(Box<dyn InternalIterator>, &str)> = vec![
            (
                Box::new(VecIterator::from_file(
                    vec![good(b"a", 1), damaged()],
                    icmp.clone(),
                    table,
                )),
                table,
            ),
            (
                Box::new(VecIterator::new(
                    vec![good(b"a", 1), damaged()],
                    icmp.clone(),
                )),
                "<memtable>",
            ),
            (
                Box::new(crate::iter::MergingIterator::new(
                    icmp.clone(),
                    vec![
                        Box::new(VecIterator::from_file(
                            vec![good(b"a", 5), good(b"c", 6)],
                            icmp.clone(),
                            "/db/000050.sst",
                        )),
                        Box::new(VecIterator::from_file(
                            vec![damaged(), good(b"d", 3)],
                            icmp.clone(),
                            table,
                        )),
                    ],
                )),
                table,
            ),
        ];
        for (inner, want) in cases {
            let ctx = ReadContext {
                icmp: icmp.clone(),
                sequence: 10,
                now_micros: 0,
                merge_operator: None,
                blobs: None,
            };
            let mut it = DbIterator::new(inner, ctx, None, None, Box::new(()));
            it.seek_to_first();
            assert!(it.valid());
            assert_eq!(it.key(), b"a");
            it.next();
            assert!(!it.valid());
            let e = it.status().expect_err("damaged entry");
            assert!(e.is_corruption(), "{e}");
            let text = e.to_string();
            assert!(text.contains(want) && text.contains("\"b\""), "{text}");
            // From the other end, the scan meets the damaged entry after the later keys.
            it.seek_to_last();
            while it.valid() {
                it.prev();
            }
            let text = it.status().expect_err("damaged entry").to_string();
            assert!(text.contains(want), "{text}");
        }
    }
}
