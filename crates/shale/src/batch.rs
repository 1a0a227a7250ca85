//! Write batches: a group of puts, deletes and merges applied atomically, in order, under
//! consecutive sequence numbers. The encoded batch is also the payload of one WAL record.
//!
//! ```text
//! batch  := sequence: fixed64 | count: fixed32 | record * count
//! record := kind: u8 | key_len: varint64 | key | value_len: varint64 | value
//!           (a Deletion record, kind 0, has no value_len and no value)
//! kind   := 0 Deletion | 1 Value | 2 Merge | 3 ExpiringValue | 4 BlobIndex
//!           | 5 ExpiringBlobIndex                                 (the ValueKind numbers)
//! ```
//! Integers are little-endian; varints are LEB128. The records take sequence numbers
//! `sequence, sequence + 1, ...` in order, so a later record for a key shadows an earlier one.
//! An ExpiringValue's value is a fixed64 LE expiry (microseconds since the Unix epoch) followed by
//! the user's value, exactly as it is stored in the memtable and in tables. Kinds 4 and 5 carry a
//! blob reference (after the expiry, for 5) instead of the value (`docs/format/blob.md`); only
//! the write path makes them, when it moves a large value to a blob file.
//! Format doc: `docs/format/wal.md` ("Write batch").
//!
//! Invariants: the buffer always holds the 12-byte header and exactly `count` well-formed records
//! (batches are built only by the methods here or checked by [`WriteBatch::from_data`]).
//! Building a batch never fails or panics; limits are checked by [`WriteBatch::validate`], which
//! the write path calls before logging.
//!
//! Thread-safety: a plain value; share it by reference or clone it.

use std::fmt;
use std::path::Path;

use crate::codec::{decode_fixed32, decode_fixed64, put_length_prefixed, put_varint64, Decoder};
use crate::error::{Error, Result};
use crate::key::{SequenceNumber, ValueKind, MAX_SEQUENCE};
use crate::limits::{MAX_BATCH_BYTES, MAX_KEY_BYTES, MAX_VALUE_BYTES};
use crate::memtable::{FilterSlot, MemTable};

/// Batches of at least this many records go into the memtable sorted by key from their first
/// record out of order on. Measured with shale-bench's fillrandbatch (batches of 1,000 random
/// keys): 12-20% faster.
const SORTED_INSERT_MIN_RECORDS: u64 = 32;

/// Bytes of the batch header: sequence (fixed64) and count (fixed32).
pub const BATCH_HEADER_LEN: usize = 12;

/// Bytes a record takes beside its key and value, at most: `kind | key_len | value_len`, with
/// the lengths reserved at their widest varint.
const RECORD_FRAMING_MAX: usize = 1 + 10 + 10;

/// Length of the expiry prefix of an ExpiringValue's stored value.
const EXPIRY_LEN: usize = 8;

/// Longest key prefix quoted in an error message.
const KEY_QUOTE_BYTES: usize = 32;

/// Stands in for a file name when a batch built in memory is found malformed, which only a bug
/// can cause.
const IN_MEMORY_BATCH: &str = "<write batch in memory>";

/// The records a WAL holds besides writes (format version 2): empty batches with a sequence
/// number no write uses (`docs/format/wal.md`, section 2.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WalMarker {
    /// Every older WAL was synced whole before this record was written: written by the first
    /// synced write after a memtable switch, before its own record. Sequence 0.
    Sync,
    /// The last record of a WAL sealed by a memtable switch: a WAL that is not the newest and
    /// lacks it was cut short. Sequence 2^63.
    Seal,
}

impl WalMarker {
    fn sequence(self) -> SequenceNumber {
        match self {
            WalMarker::Sync => 0,
            WalMarker::Seal => 1 << 63,
        }
    }

    /// True when one of the WALs numbered `newer` in `dir` holds a [`WalMarker::Sync`]: then
    /// every older WAL was synced whole, and damage to one is corruption rather than a tail a
    /// crash tore. A WAL that cannot be read counts as holding none.
    pub fn sync_recorded_in(fs: &dyn crate::env::Fs, dir: &Path, newer: &[u64]) -> bool {
        use crate::wal::{LogKind, LogReader};
        for &number in newer {
            let path = crate::filename::wal_file_name(dir, number);
            let Ok(file) = fs.open_sequential(&path) else {
                continue;
            };
            let mut reader = LogReader::new(file, path, LogKind::Wal, Some(number));
            while let Ok(Some(record)) = reader.read_record() {
                if WalMarker::of_record(&record) == Some(WalMarker::Sync) {
                    return true;
                }
            }
        }
        false
    }

    /// The marker a WAL record holds, if it is one.
    pub fn of_record(record: &[u8]) -> Option<WalMarker> {
        if record.len() != BATCH_HEADER_LEN || record.get(8..).and_then(decode_fixed32) != Some(0) {
            return None;
        }
        match decode_fixed64(record) {
            Some(0) => Some(WalMarker::Sync),
            Some(s) if s == 1 << 63 => Some(WalMarker::Seal),
            _ => None,
        }
    }
}

/// A group of writes applied atomically. See the module header for the encoding.
#[derive(Clone)]
pub struct WriteBatch {
    rep: Vec<u8>,
    /// What the records hold, kept as they are added so the write path need not walk them.
    summary: Summary,
}

/// Facts about a batch's records that the write path checks.
#[derive(Debug, Clone, Copy, Default)]
struct Summary {
    max_key_len: usize,
    max_value_len: usize,
    has_merge: bool,
    has_plain_value: bool,
    has_blob_index: bool,
}

impl Summary {
    fn add(&mut self, kind: ValueKind, key_len: usize, value_len: usize) {
        self.max_key_len = self.max_key_len.max(key_len);
        self.max_value_len = self.max_value_len.max(value_len);
        self.has_merge |= kind == ValueKind::Merge;
        self.has_plain_value |= kind == ValueKind::Value;
        self.has_blob_index |= kind.is_blob();
    }

    fn union(&mut self, other: &Summary) {
        self.max_key_len = self.max_key_len.max(other.max_key_len);
        self.max_value_len = self.max_value_len.max(other.max_value_len);
        self.has_merge |= other.has_merge;
        self.has_plain_value |= other.has_plain_value;
        self.has_blob_index |= other.has_blob_index;
    }
}

/// One record of a [`WriteBatch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchEntry<'a> {
    /// What the record does.
    pub kind: ValueKind,
    /// The user key.
    pub key: &'a [u8],
    /// The value as stored: empty for a Deletion; for an ExpiringValue, the fixed64 LE expiry
    /// followed by the user's value.
    pub value: &'a [u8],
}

impl Default for WriteBatch {
    fn default() -> Self {
        WriteBatch::new()
    }
}

impl fmt::Debug for WriteBatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WriteBatch")
            .field("sequence", &self.sequence())
            .field("count", &self.count())
            .field("data_size", &self.data_size())
            .finish()
    }
}

/// Whether `count` (> 0) sequence numbers from `first` all fit under [`MAX_SEQUENCE`]; an
/// overflowing range does not (`checked_add` gives `None`, which compares below any `Some`).
fn sequence_range_fits(first: u64, count: u64) -> bool {
    first
        .checked_add(count - 1)
        .is_some_and(|last| last <= MAX_SEQUENCE)
}

impl WriteBatch {
    /// An empty batch with sequence number 0.
    pub fn new() -> WriteBatch {
        WriteBatch {
            rep: vec![0; BATCH_HEADER_LEN],
            summary: Summary::default(),
        }
    }

    /// An empty batch with room for records whose keys and values add up to `payload_bytes`,
    /// plus the framing of one record. Each record is framed by a kind byte and the varint
    /// lengths of its key and value (3 bytes when both are under 128 bytes): a caller that
    /// counts those in too fills the batch without a reallocation.
    pub fn with_capacity(payload_bytes: usize) -> WriteBatch {
        let mut rep = Vec::with_capacity(BATCH_HEADER_LEN + RECORD_FRAMING_MAX + payload_bytes);
        rep.resize(BATCH_HEADER_LEN, 0);
        WriteBatch {
            rep,
            summary: Summary::default(),
        }
    }

    /// Sets `key` to `value`.
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) {
        self.push_record(ValueKind::Value, key.as_ref(), &[value.as_ref()]);
    }

    /// Deletes `key`.
    pub fn delete(&mut self, key: impl AsRef<[u8]>) {
        self.push_record(ValueKind::Deletion, key.as_ref(), &[]);
    }

    /// Adds a merge operand for `key`, combined with older entries by the merge operator.
    pub fn merge(&mut self, key: impl AsRef<[u8]>, operand: impl AsRef<[u8]>) {
        self.push_record(ValueKind::Merge, key.as_ref(), &[operand.as_ref()]);
    }

    /// Sets `key` to a value that expires at `expiry_micros` (microseconds since the Unix epoch):
    /// stored as [`ValueKind::ExpiringValue`] whose value bytes are the fixed64 LE expiry followed
    /// by `value`.
    pub fn put_with_expiry(
        &mut self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        expiry_micros: u64,
    ) {
        self.push_record(
            ValueKind::ExpiringValue,
            key.as_ref(),
            &[&expiry_micros.to_le_bytes(), value.as_ref()],
        );
    }

    /// Number of records.
    pub fn count(&self) -> u32 {
        self.rep.get(8..).and_then(decode_fixed32).unwrap_or(0)
    }

    /// True when the batch holds no records.
    pub fn is_empty(&self) -> bool {
        self.count() == 0
    }

    /// A WAL marker record: an empty batch whose sequence number no write uses
    /// (`docs/format/wal.md`, section 2.1).
    pub(crate) fn wal_marker(marker: WalMarker) -> WriteBatch {
        let mut b = WriteBatch::new();
        b.set_sequence(marker.sequence());
        b
    }

    /// Removes every record and resets the sequence number to 0.
    pub fn clear(&mut self) {
        self.rep.clear();
        self.rep.resize(BATCH_HEADER_LEN, 0);
        self.summary = Summary::default();
    }

    /// Encoded size in bytes, header included.
    pub fn data_size(&self) -> usize {
        self.rep.len()
    }

    /// Appends the records of `other` after this batch's records (group commit joins the
    /// batches of several writers this way). This batch's sequence number is kept.
    pub fn append(&mut self, other: &WriteBatch) {
        self.rep
            .extend_from_slice(other.rep.get(BATCH_HEADER_LEN..).unwrap_or(&[]));
        self.set_count(self.count().saturating_add(other.count()));
        self.summary.union(&other.summary);
    }

    /// True if some record is a merge operand.
    pub(crate) fn has_merge(&self) -> bool {
        self.summary.has_merge
    }

    /// True if some record is a blob reference (only the write path and recovery make them).
    pub(crate) fn has_blob_index(&self) -> bool {
        self.summary.has_blob_index
    }

    /// The longest value of any record, not counting an expiry prefix.
    pub(crate) fn max_value_len(&self) -> usize {
        self.summary.max_value_len
    }

    /// Appends a record of any kind with its stored value bytes as they are (a blob reference,
    /// with its expiry prefix for an expiring one). For the write path, which replaces large
    /// values by references.
    pub(crate) fn push_stored(&mut self, kind: ValueKind, key: &[u8], stored: &[&[u8]]) {
        if kind == ValueKind::Deletion {
            self.push_record(kind, key, &[]);
        } else {
            self.push_record(kind, key, stored);
        }
    }

    /// True if some record is a plain (non-expiring) value.
    pub(crate) fn has_plain_value(&self) -> bool {
        self.summary.has_plain_value
    }

    /// The records, in order.
    pub fn iter(&self) -> WriteBatchIter<'_> {
        WriteBatchIter {
            records: Decoder::new(self.rep.get(BATCH_HEADER_LEN..).unwrap_or(&[])),
            remaining: self.count(),
            failure: None,
        }
    }

    /// Checks the batch against the engine's limits: every key at most
    /// [`MAX_KEY_BYTES`], every value at most [`MAX_VALUE_BYTES`] (for an expiring value, not
    /// counting its expiry), and the whole encoding at most [`MAX_BATCH_BYTES`].
    /// The error is [`Error::InvalidArgument`] naming the offending key.
    pub fn validate(&self) -> Result<()> {
        self.validate_with(MAX_KEY_BYTES, MAX_VALUE_BYTES, MAX_BATCH_BYTES)
    }

    fn validate_with(&self, max_key: usize, max_value: usize, max_batch: usize) -> Result<()> {
        // The common case needs no walk over the records; a walk finds the culprit to name.
        if self.summary.max_key_len <= max_key
            && self.summary.max_value_len <= max_value
            && self.data_size() <= max_batch
        {
            return Ok(());
        }
        for entry in self.iter() {
            let entry = entry?;
            if entry.key.len() > max_key {
                return Err(Error::InvalidArgument(format!(
                    "key {} is {} bytes, over the limit of {max_key}",
                    quote_key(entry.key),
                    entry.key.len()
                )));
            }
            let value_len = match entry.kind {
                ValueKind::ExpiringValue => entry.value.len().saturating_sub(EXPIRY_LEN),
                _ => entry.value.len(),
            };
            if value_len > max_value {
                return Err(Error::InvalidArgument(format!(
                    "value for key {} is {value_len} bytes, over the limit of {max_value}",
                    quote_key(entry.key)
                )));
            }
        }
        if self.data_size() > max_batch {
            return Err(Error::InvalidArgument(format!(
                "write batch of {} records is {} bytes, over the limit of {max_batch}",
                self.count(),
                self.data_size()
            )));
        }
        Ok(())
    }

    /// The sequence number of the first record.
    pub fn sequence(&self) -> SequenceNumber {
        decode_fixed64(&self.rep).unwrap_or(0)
    }

    /// Sets the sequence number of the first record; the others follow consecutively.
    pub fn set_sequence(&mut self, seq: SequenceNumber) {
        if let Some(dst) = self.rep.get_mut(..8) {
            dst.copy_from_slice(&seq.to_le_bytes());
        }
    }

    /// The encoding: what the WAL record holds.
    pub fn data(&self) -> &[u8] {
        &self.rep
    }

    /// Decodes a batch read from a WAL record; checks the header and that `count` records parse
    /// exactly to the end. Errors are [`Error::Corruption`] with `path` and `offset` (the caller
    /// passes the WAL path and record offset); the message gives the byte position inside the
    /// batch.
    pub fn from_data(data: Vec<u8>, path: &Path, offset: u64) -> Result<WriteBatch> {
        let corrupt = |message: String| Error::corruption(path, offset, message);
        if data.len() < BATCH_HEADER_LEN {
            return Err(corrupt(format!(
                "write batch of {} bytes is shorter than its {BATCH_HEADER_LEN}-byte header",
                data.len()
            )));
        }
        let mut batch = WriteBatch {
            rep: data,
            summary: Summary::default(),
        };
        let count = batch.count();
        let sequence = batch.sequence();
        if count > 0 && !sequence_range_fits(sequence, u64::from(count)) {
            return Err(corrupt(format!(
                "write batch sequence {sequence} with {count} records passes the largest \
                 sequence number {MAX_SEQUENCE}"
            )));
        }
        let mut summary = Summary::default();
        let mut records = batch.iter();
        for (parsed, entry) in records.by_ref().enumerate() {
            if let Ok(e) = &entry {
                summary.add(e.kind, e.key.len(), e.value.len());
            }
            if let Err(e) = entry {
                let detail = match e {
                    Error::Corruption { message, .. } => message,
                    other => other.to_string(),
                };
                return Err(corrupt(format!(
                    "write batch record {parsed} of {count}: {detail}"
                )));
            }
        }
        let trailing = records.records.remaining().len();
        if trailing > 0 {
            return Err(corrupt(format!(
                "write batch has {trailing} bytes after its {count} records"
            )));
        }
        batch.summary = summary;
        Ok(batch)
    }

    /// Starts loading the memtable key-filter word of the batch's first key, for a caller with
    /// other work to do before [`WriteBatch::insert_into_announced`] (the WAL append): a single
    /// put's filter word is otherwise a cache miss the insert waits out (9% of fillrandom's
    /// writer time). The insert itself loads each later key's word one record ahead.
    pub(crate) fn prefetch_memtable_filter(&self, mem: &MemTable) -> Option<FilterSlot> {
        let first = self.iter().next()?.ok()?;
        mem.prefetch_filter(first.key)
    }

    /// Adds every record to `mem` under consecutive sequence numbers from [`Self::sequence`].
    /// Large batches are inserted in key order (see [`SORTED_INSERT_MIN_RECORDS`]). A malformed
    /// record ends the insert with an error; batches from a WAL were decoded whole by
    /// [`Self::from_data`] before they get here, and built ones are well formed.
    ///
    /// REQUIRES: the caller holds the memtable's writer role (see [`MemTable::add`]).
    pub(crate) fn insert_into(&self, mem: &MemTable) -> Result<()> {
        self.insert_into_announced(mem, None)
    }

    /// [`WriteBatch::insert_into`], given what [`WriteBatch::prefetch_memtable_filter`]
    /// returned for this batch and `mem`.
    pub(crate) fn insert_into_announced(
        &self,
        mem: &MemTable,
        first_key_slot: Option<FilterSlot>,
    ) -> Result<()> {
        let first = self.sequence();
        let count = u64::from(self.count());
        if count > 0 && !sequence_range_fits(first, count) {
            return Err(Error::InvalidArgument(format!(
                "write batch sequence {first} with {count} records passes the largest sequence \
                 number {MAX_SEQUENCE}"
            )));
        }
        // Records go in as they come while their keys do not decrease (a sequential load is
        // one pass). In a large batch, the first one out of order sends it and the rest into a
        // buffer, inserted sorted: in key order, each insert starts from where the last one
        // ended (the skiplist's splice) and walks only the few nodes between neighbouring keys,
        // most of them still in the cache, instead of a full search that misses the cache at
        // almost every node. Every record keeps its sequence number, so the memtable ends up
        // the same in any order.
        let icmp = mem.comparator();
        let sort_unordered = count >= SORTED_INSERT_MIN_RECORDS;
        let mut records = self.iter();
        let mut mem = mem.inserter_announced(first_key_slot);
        let mut seq = first;
        let mut current = records.next_entry();
        while let Some(entry) = current {
            // The next record's order is decided once, here; only a large batch asks. The next
            // record goes in next unless it breaks the order.
            let next = records.next_entry();
            let in_order = !sort_unordered
                || next
                    .as_ref()
                    .is_none_or(|n| icmp.compare_user(entry.key, n.key).is_le());
            mem.add_before(
                seq,
                entry.kind,
                entry.key,
                entry.value,
                next.as_ref().map(|n| n.key).filter(|_| in_order),
            );
            seq += 1;
            if !in_order {
                // The record at hand went in; the next one breaks the order, so it and every
                // one after it go in sorted.
                // Sized once for the records left: collected from an iterator of unknown
                // length, the buffer grew by doubling, eight reallocations for a batch of 1,000,
                // each able to take fresh pages from the allocator. A record takes at least two
                // bytes, which bounds a count that a damaged batch overstates.
                let left = usize::try_from(count - (seq - first))
                    .unwrap_or(usize::MAX)
                    .min(self.rep.len() / 2);
                let mut unordered: Vec<(u64, BatchEntry<'_>)> = Vec::with_capacity(left);
                unordered.extend(
                    next.map(|n| (seq, n))
                        .into_iter()
                        .chain((seq + 1..).map_while(|s| records.next_entry().map(|e| (s, e)))),
                );
                records.stopped_by()?;
                unordered.sort_unstable_by(|(seq_a, a), (seq_b, b)| {
                    icmp.compare_user(a.key, b.key).then(seq_b.cmp(seq_a))
                });
                let mut sorted = unordered.iter().peekable();
                while let Some((seq, entry)) = sorted.next() {
                    let next = sorted.peek().map(|(_, next)| next.key);
                    mem.add_before(*seq, entry.kind, entry.key, entry.value, next);
                }
                return Ok(());
            }
            current = next;
        }
        records.stopped_by()
    }

    /// Appends one record. The value is given in parts so an expiring value needs no temporary
    /// buffer; Deletion records take no value.
    fn push_record(&mut self, kind: ValueKind, key: &[u8], value_parts: &[&[u8]]) {
        let value_len: usize = value_parts.iter().map(|p| p.len()).sum();
        // Expiring values carry an 8-byte expiry that does not count against the value limit.
        let user_value_len = match kind {
            ValueKind::ExpiringValue => value_len.saturating_sub(EXPIRY_LEN),
            // A reference stands for a value already checked against the limits.
            ValueKind::BlobIndex | ValueKind::ExpiringBlobIndex => 0,
            _ => value_len,
        };
        self.summary.add(kind, key.len(), user_value_len);
        self.rep.reserve(RECORD_FRAMING_MAX + key.len() + value_len);
        self.rep.push(kind as u8);
        put_length_prefixed(&mut self.rep, key);
        if kind == ValueKind::Deletion {
            debug_assert!(value_parts.is_empty());
        } else {
            put_varint64(&mut self.rep, value_len as u64);
            for part in value_parts {
                self.rep.extend_from_slice(part);
            }
        }
        // Saturating, not wrapping: a batch with 2^32 records is billions of bytes, far over
        // MAX_BATCH_BYTES, and `validate` refuses it.
        self.set_count(self.count().saturating_add(1));
    }

    fn set_count(&mut self, count: u32) {
        if let Some(dst) = self.rep.get_mut(8..BATCH_HEADER_LEN) {
            dst.copy_from_slice(&count.to_le_bytes());
        }
    }
}

impl<'a> IntoIterator for &'a WriteBatch {
    type Item = Result<BatchEntry<'a>>;
    type IntoIter = WriteBatchIter<'a>;

    fn into_iter(self) -> WriteBatchIter<'a> {
        self.iter()
    }
}

/// Iterates the records of a [`WriteBatch`] in order. A malformed record (impossible for a
/// batch built by [`WriteBatch`] or accepted by [`WriteBatch::from_data`]) yields one error and
/// ends the iteration.
#[derive(Debug, Clone)]
pub struct WriteBatchIter<'a> {
    /// The records after the header.
    records: Decoder<'a>,
    /// Records not yet decoded; 0 once a malformed record's error has been yielded.
    remaining: u32,
    /// Where the malformed record starts (bytes into the records) and what is wrong with it.
    failure: Option<(usize, RecordError)>,
}

impl<'a> Iterator for WriteBatchIter<'a> {
    type Item = Result<BatchEntry<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(entry) = self.next_entry() {
            return Some(Ok(entry));
        }
        // A malformed record's error is yielded once.
        let error = self.stopped_by().err().filter(|_| self.remaining > 0)?;
        self.remaining = 0;
        Some(Err(error))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        if self.failure.is_some() {
            (0, Some(0))
        } else {
            (0, Some(self.remaining as usize))
        }
    }
}

impl<'a> WriteBatchIter<'a> {
    /// The next record, without a `Result` around it: `None` at the end, and also at a record
    /// that does not decode, whose error [`WriteBatchIter::stopped_by`] then gives.
    ///
    /// Why: the `Result`, with the room of an [`Error`], makes every item too large for
    /// registers. Returned through memory, it was stored field by field and reloaded wider, a
    /// load that cannot take its bytes from those stores and so waits for all older stores to
    /// drain, the previous memtable insert's node and value among them, each a cache miss: a
    /// tenth of a batch load's writer thread sat on that one load.
    #[inline]
    pub(crate) fn next_entry(&mut self) -> Option<BatchEntry<'a>> {
        if self.failure.is_some() || self.remaining == 0 {
            return None;
        }
        let start = self.records.position();
        match decode_record(&mut self.records) {
            Ok(entry) => {
                self.remaining -= 1;
                Some(entry)
            }
            Err(e) => {
                self.failure = Some((start, e));
                None
            }
        }
    }

    /// The error of the record [`WriteBatchIter::next_entry`] stopped at, if it stopped early.
    pub(crate) fn stopped_by(&self) -> Result<()> {
        let Some((start, e)) = self.failure else {
            return Ok(());
        };
        let start = BATCH_HEADER_LEN + start;
        Err(Error::corruption(
            IN_MEMORY_BATCH,
            start as u64,
            format!("{} (record at batch byte {start})", e.message()),
        ))
    }
}

/// What is wrong with a record that does not decode. Small and `Copy`, so the decoder's
/// result stays cheap on the hot path; [`RecordError::message`] spells it out.
#[derive(Debug, Clone, Copy)]
enum RecordError {
    CutBeforeKind,
    UnknownKind(u8),
    KeyCut,
    ValueCut,
    ExpiryTooShort(usize),
    BadBlobRef(usize),
}

impl RecordError {
    fn message(self) -> String {
        match self {
            RecordError::CutBeforeKind => "record cut off before its kind byte".into(),
            RecordError::UnknownKind(b) => format!("unknown kind {b}"),
            RecordError::KeyCut => "key length or key bytes cut off".into(),
            RecordError::ValueCut => "value length or value bytes cut off".into(),
            RecordError::ExpiryTooShort(len) => {
                format!("expiring value of {len} bytes cannot hold its {EXPIRY_LEN}-byte expiry")
            }
            RecordError::BadBlobRef(len) => format!("malformed blob reference of {len} bytes"),
        }
    }
}

/// Decodes one record.
#[inline]
fn decode_record<'a>(d: &mut Decoder<'a>) -> std::result::Result<BatchEntry<'a>, RecordError> {
    let kind_byte = d.u8().ok_or(RecordError::CutBeforeKind)?;
    let kind = ValueKind::from_u8(kind_byte).ok_or(RecordError::UnknownKind(kind_byte))?;
    let key = d.length_prefixed().ok_or(RecordError::KeyCut)?;
    let value: &[u8] = match kind {
        ValueKind::Deletion => &[],
        _ => d.length_prefixed().ok_or(RecordError::ValueCut)?,
    };
    if kind.is_expiring() && value.len() < EXPIRY_LEN {
        return Err(RecordError::ExpiryTooShort(value.len()));
    }
    if kind.is_blob() && blob_ref_of(kind, value).is_none() {
        return Err(RecordError::BadBlobRef(value.len()));
    }
    Ok(BatchEntry { kind, key, value })
}

/// The blob reference a `BlobIndex` or `ExpiringBlobIndex` stored value holds (after the
/// expiry of an expiring one); `None` for other kinds or a malformed reference.
pub(crate) fn blob_ref_of(kind: ValueKind, stored: &[u8]) -> Option<crate::blob::BlobRef> {
    match kind {
        ValueKind::BlobIndex => crate::blob::BlobRef::decode(stored),
        ValueKind::ExpiringBlobIndex => crate::blob::BlobRef::decode(stored.get(EXPIRY_LEN..)?),
        _ => None,
    }
}

/// A key for an error message: lossy UTF-8, cut to its first bytes.
fn quote_key(key: &[u8]) -> String {
    match key.get(..KEY_QUOTE_BYTES) {
        Some(prefix) if key.len() > KEY_QUOTE_BYTES => {
            format!("{:?}...", String::from_utf8_lossy(prefix))
        }
        _ => format!("{:?}", String::from_utf8_lossy(key)),
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::sync::Arc;

    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::iter::InternalIterator;
    use crate::key::{make_internal_key, BytewiseComparator, InternalKeyComparator};

    fn entries(batch: &WriteBatch) -> Vec<(ValueKind, Vec<u8>, Vec<u8>)> {
        batch
            .iter()
            .map(|e| {
                let e = e.expect("well-formed batch");
                (e.kind, e.key.to_vec(), e.value.to_vec())
            })
            .collect()
    }

    /// Every (internal key, value) of `mem`, in order.
    fn dump(mem: &Arc<MemTable>) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut it = mem.iter();
        it.seek_to_first();
        let mut got = Vec::new();
        while it.valid() {
            got.push((it.key().to_vec(), it.value().to_vec()));
            it.next();
        }
        got
    }

    fn wal_path() -> PathBuf {
        PathBuf::from("/db/000007.log")
    }

    fn decode(data: &[u8]) -> Result<WriteBatch> {
        WriteBatch::from_data(data.to_vec(), &wal_path(), 4242)
    }

    fn expect_corruption(data: &[u8], what: &str) -> String {
        match decode(data) {
            Err(Error::Corruption {
                path,
                offset,
                message,
            }) => {
                assert_eq!(path, wal_path(), "{what}");
                assert_eq!(offset, 4242, "{what}");
                message
            }
            Err(other) => panic!("{what}: expected corruption, got {other}"),
            Ok(b) => panic!("{what}: expected corruption, decoded {b:?}"),
        }
    }

    fn sample() -> WriteBatch {
        let mut b = WriteBatch::new();
        b.put("alpha", "one");
        b.delete(b"beta");
        b.merge(vec![b'g'; 3], [1u8, 2, 3]);
        b.put_with_expiry("delta", "soon", 1_700_000_000_000_000);
        b.put("", "");
        b.merge("empty operand", "");
        b.set_sequence(77);
        b
    }

    #[test]
    fn new_batch_is_an_empty_header() {
        let b = WriteBatch::new();
        assert_eq!(b.data(), &[0u8; BATCH_HEADER_LEN]);
        assert_eq!(b.count(), 0);
        assert!(b.is_empty());
        assert_eq!(b.sequence(), 0);
        assert_eq!(b.data_size(), BATCH_HEADER_LEN);
        assert_eq!(b.iter().count(), 0);
        assert_eq!(WriteBatch::default().data(), b.data());
        b.validate().expect("an empty batch is valid");
    }

    #[test]
    fn every_kind_round_trips_through_data() {
        let b = sample();
        let mut expiring = 1_700_000_000_000_000u64.to_le_bytes().to_vec();
        expiring.extend_from_slice(b"soon");
        let expect = vec![
            (ValueKind::Value, b"alpha".to_vec(), b"one".to_vec()),
            (ValueKind::Deletion, b"beta".to_vec(), Vec::new()),
            (ValueKind::Merge, b"ggg".to_vec(), vec![1, 2, 3]),
            (ValueKind::ExpiringValue, b"delta".to_vec(), expiring),
            (ValueKind::Value, Vec::new(), Vec::new()),
            (ValueKind::Merge, b"empty operand".to_vec(), Vec::new()),
        ];
        assert_eq!(entries(&b), expect);
        assert_eq!(b.count(), 6);
        assert_eq!(b.sequence(), 77);

        let decoded = decode(b.data()).expect("decode");
        assert_eq!(decoded.data(), b.data());
        assert_eq!(entries(&decoded), expect);
        assert_eq!(decoded.sequence(), 77);
        assert_eq!(decoded.count(), 6);
        assert_eq!((&decoded).into_iter().size_hint(), (0, Some(6)));
    }

    #[test]
    fn golden_bytes() {
        let mut b = WriteBatch::new();
        b.set_sequence(0x0102);
        b.put("a", "bc");
        b.delete("d");
        b.merge("e", "f");
        b.put_with_expiry("g", "h", 0x0807_0605_0403_0201);
        #[rustfmt::skip]
        let expect: &[u8] = &[
            0x02, 0x01, 0, 0, 0, 0, 0, 0,           // sequence 0x0102, fixed64 LE
            4, 0, 0, 0,                             // count 4, fixed32 LE
            1, 1, b'a', 2, b'b', b'c',              // Value "a" -> "bc"
            0, 1, b'd',                             // Deletion "d"
            2, 1, b'e', 1, b'f',                    // Merge "e" <- "f"
            3, 1, b'g', 9,                          // ExpiringValue "g", 9 value bytes:
            1, 2, 3, 4, 5, 6, 7, 8, b'h',           //   expiry fixed64 LE, then "h"
        ];
        assert_eq!(b.data(), expect);
        assert_eq!(b.data_size(), expect.len());
    }

    /// The example file in `docs/format/wal.md`, section 4: a WAL numbered 7 holding one batch.
    #[test]
    fn golden_wal_file_of_one_batch() {
        use crate::env::{Fs, MemFs};
        use crate::wal::{LogKind, LogReader, LogWriter};

        let fs = MemFs::new();
        let path = wal_path();
        let mut batch = WriteBatch::new();
        batch.set_sequence(1);
        batch.put("k", "v");
        let mut w = LogWriter::new(
            fs.create(&path).expect("create"),
            path.clone(),
            LogKind::Wal,
            7,
        )
        .expect("writer");
        w.add_record(batch.data()).expect("add");
        w.close().expect("close");
        #[rustfmt::skip]
        let expect: &[u8] = &[
            0xe1, 0x19, 0x6f, 0x14, 0x15, 0x00, 0x05,   // masked crc, length 21, recyclable FULL
            7, 0, 0, 0,                                 // of log 7
            b's', b'h', b'a', b'l', b'e', b'L', b'O', b'G', 3, 0, 0, 0, // magic, version 3
            1, 7, 0, 0, 0, 0, 0, 0, 0,                  // kind WAL, file number 7
            0x1c, 0x78, 0x36, 0x2c, 0x11, 0x00, 0x05,   // masked crc, length 17, recyclable FULL
            7, 0, 0, 0,                                 // of log 7
            1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0,         // sequence 1, count 1
            1, 1, b'k', 1, b'v',                        // Value "k" -> "v"
        ];
        assert_eq!(fs.contents(&path).expect("contents"), expect);

        let mut r = LogReader::new(
            fs.open_sequential(&path).expect("open"),
            path.clone(),
            LogKind::Wal,
            Some(7),
        );
        let record = r.read_record().expect("read").expect("one record");
        assert_eq!(r.last_record_offset(), 32);
        let decoded = WriteBatch::from_data(record, &path, r.last_record_offset()).expect("decode");
        assert_eq!(decoded.data(), batch.data());
        assert!(r.read_record().expect("read").is_none());
        assert!(r.torn_tail().is_none());
    }

    #[test]
    fn long_lengths_use_multi_byte_varints() {
        let mut b = WriteBatch::new();
        b.put(vec![b'k'; 200], vec![b'v'; 70_000]);
        // kind, varint 200 = [0xc8, 0x01], key, varint 70000 = [0xf0, 0xa2, 0x04], value.
        assert_eq!(
            b.data()[BATCH_HEADER_LEN..BATCH_HEADER_LEN + 3],
            [1, 0xc8, 0x01]
        );
        let value_len_at = BATCH_HEADER_LEN + 3 + 200;
        assert_eq!(b.data()[value_len_at..value_len_at + 3], [0xf0, 0xa2, 0x04]);
        assert_eq!(entries(&decode(b.data()).expect("decode")), entries(&b));
    }

    #[test]
    fn append_concatenates_records_and_keeps_the_sequence() {
        let mut a = WriteBatch::new();
        a.set_sequence(10);
        a.put("k1", "v1");
        let mut b = sample();
        b.set_sequence(999);
        let mut joined = a.clone();
        joined.append(&b);
        assert_eq!(joined.sequence(), 10);
        assert_eq!(joined.count(), 1 + b.count());
        let mut expect = entries(&a);
        expect.extend(entries(&b));
        assert_eq!(entries(&joined), expect);
        assert_eq!(
            joined.data_size(),
            a.data_size() + b.data_size() - BATCH_HEADER_LEN
        );
        joined.append(&WriteBatch::new());
        assert_eq!(entries(&joined), expect);
        decode(joined.data()).expect("an appended batch decodes");
    }

    #[test]
    fn clear_resets_records_and_sequence() {
        let mut b = sample();
        b.clear();
        assert_eq!(b.data(), WriteBatch::new().data());
        assert!(b.is_empty());
        b.put("x", "y");
        assert_eq!(b.count(), 1);
    }

    #[test]
    fn validate_enforces_the_limits() {
        let mut ok = WriteBatch::new();
        ok.put(vec![b'k'; MAX_KEY_BYTES], "v");
        ok.delete(vec![b'k'; MAX_KEY_BYTES]);
        ok.validate().expect("keys at the limit are fine");

        let mut long_key = WriteBatch::new();
        long_key.put("fine", "v");
        let mut key = b"too-long-key-".to_vec();
        key.resize(MAX_KEY_BYTES + 1, b'z');
        long_key.merge(&key, "v");
        match long_key.validate() {
            Err(Error::InvalidArgument(m)) => {
                assert!(m.contains("too-long-key-zzz"), "{m}");
                assert!(m.contains(&(MAX_KEY_BYTES + 1).to_string()), "{m}");
                assert!(m.len() < 200, "the key is quoted truncated: {m}");
            }
            other => panic!("expected InvalidArgument, got {other:?}"),
        }

        // The value and batch limits are too big to build in a test; the same check runs with
        // small limits.
        let mut b = WriteBatch::new();
        b.put("small", "12345");
        b.put_with_expiry("expiring", "12345", 9);
        b.validate_with(16, 5, 1000).expect("values at the limit");
        b.put("big-value", "123456");
        match b.validate_with(16, 5, 1000) {
            Err(Error::InvalidArgument(m)) => assert!(m.contains("big-value"), "{m}"),
            other => panic!("expected InvalidArgument, got {other:?}"),
        }
        let mut e = WriteBatch::new();
        e.put_with_expiry("expiring", "123456", 9);
        assert!(e.validate_with(16, 5, 1000).is_err());

        let mut big = WriteBatch::new();
        for i in 0..10 {
            big.put(format!("k{i}"), "v");
        }
        big.validate_with(16, 5, big.data_size())
            .expect("batch at the limit");
        match big.validate_with(16, 5, big.data_size() - 1) {
            Err(Error::InvalidArgument(m)) => assert!(m.contains("write batch"), "{m}"),
            other => panic!("expected InvalidArgument, got {other:?}"),
        }
    }

    #[test]
    fn quote_key_truncates_lossily() {
        assert_eq!(quote_key(b"abc"), "\"abc\"");
        let long = vec![b'x'; 100];
        assert_eq!(quote_key(&long), format!("{:?}...", "x".repeat(32)));
        assert!(quote_key(&[0xff, b'a']).contains('\u{fffd}'));
    }

    #[test]
    fn from_data_rejects_short_header_and_wrong_counts() {
        let good = sample();
        let data = good.data().to_vec();
        expect_corruption(&[], "empty");
        expect_corruption(&data[..BATCH_HEADER_LEN - 1], "short header");

        let mut more = data.clone();
        more[8] += 1; // claims one record more than it holds
        let m = expect_corruption(&more, "count too high");
        assert!(m.contains("cut off"), "{m}");

        let mut fewer = data.clone();
        fewer[8] -= 1; // the last record is left over
        let m = expect_corruption(&fewer, "count too low");
        assert!(m.contains("after its 5 records"), "{m}");

        let mut huge = data.clone();
        huge[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        expect_corruption(&huge, "absurd count");

        let mut kind = data.clone();
        kind[BATCH_HEADER_LEN] = 9;
        let m = expect_corruption(&kind, "unknown kind");
        assert!(m.contains("unknown kind 9"), "{m}");

        let mut late = WriteBatch::new();
        late.put("a", "b");
        late.put("c", "d");
        late.set_sequence(MAX_SEQUENCE);
        expect_corruption(late.data(), "sequence overflow");
        // A range that overflows u64 itself (it used to pass: None > Some(_) is false).
        late.set_sequence(u64::MAX);
        expect_corruption(late.data(), "sequence wrapping past u64");
        late.set_sequence(MAX_SEQUENCE - 1);
        decode(late.data()).expect("the last two sequence numbers are usable");
    }

    #[test]
    fn from_data_rejects_an_expiring_value_without_its_expiry() {
        // kind 3, key "k", value of 7 bytes: too short for the fixed64 expiry.
        let mut data = vec![0u8; 8];
        data.extend_from_slice(&1u32.to_le_bytes());
        data.extend_from_slice(&[3, 1, b'k', 7, 1, 2, 3, 4, 5, 6, 7]);
        let m = expect_corruption(&data, "short expiring value");
        assert!(m.contains("expiry"), "{m}");
    }

    #[test]
    fn every_truncation_is_corruption() {
        let data = sample().data().to_vec();
        for cut in 0..data.len() {
            expect_corruption(&data[..cut], &format!("truncated to {cut}"));
        }
        decode(&data).expect("the whole batch decodes");
    }

    #[test]
    fn random_and_mutated_bytes_never_panic() {
        let mut rng = StdRng::seed_from_u64(0xba7c4);
        let base = sample().data().to_vec();
        let mut decoded_ok = 0;
        for round in 0..4000 {
            let data: Vec<u8> = match round % 3 {
                // Pure garbage, with a header whose count is usually small.
                0 => {
                    let len = rng.gen_range(0..64);
                    let mut d: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
                    if let Some(count) = d.get_mut(8..12) {
                        count.copy_from_slice(&rng.gen_range(0u32..6).to_le_bytes());
                    }
                    d
                }
                // A valid batch with a few bytes flipped.
                1 => {
                    let mut d = base.clone();
                    for _ in 0..rng.gen_range(1..4) {
                        let i = rng.gen_range(0..d.len());
                        d[i] ^= 1 << rng.gen_range(0..8);
                    }
                    d
                }
                // A valid batch cut short and padded with garbage.
                _ => {
                    let mut d = base[..rng.gen_range(0..base.len())].to_vec();
                    d.extend((0..rng.gen_range(0..8)).map(|_| rng.gen::<u8>()));
                    d
                }
            };
            match decode(&data) {
                Ok(b) => {
                    decoded_ok += 1;
                    // Whatever decodes is well formed throughout.
                    let all: Result<Vec<_>> = b.iter().collect();
                    assert_eq!(
                        all.expect("decoded batch iterates").len(),
                        b.count() as usize
                    );
                    assert_eq!(b.data(), data.as_slice());
                }
                Err(e) => assert!(e.is_corruption(), "round {round}: {e}"),
            }
        }
        assert!(
            decoded_ok > 0,
            "some mutations (e.g. of value bytes) still decode"
        );
    }

    #[test]
    fn a_large_unordered_batch_inserts_the_same_entries_as_one_record_at_a_time() {
        let icmp = InternalKeyComparator::new(Arc::new(BytewiseComparator));
        let mut rng = StdRng::seed_from_u64(11);
        let mut b = WriteBatch::new();
        // Few distinct keys, so a key often repeats with several kinds inside the batch.
        for i in 0..500u32 {
            let key = format!("key{:03}", rng.gen_range(0..120));
            match rng.gen_range(0..4) {
                0 => b.delete(&key),
                1 => b.merge(&key, i.to_le_bytes()),
                _ => b.put(&key, i.to_le_bytes()),
            }
        }
        b.set_sequence(1000);
        let batched = Arc::new(MemTable::new(icmp.clone()));
        b.insert_into(&batched).expect("insert");
        let one_by_one = Arc::new(MemTable::new(icmp));
        for (seq, e) in (1000..).zip(b.iter()) {
            let e = e.expect("well-formed batch");
            one_by_one.add(seq, e.kind, e.key, e.value);
        }
        let got = dump(&batched);
        assert_eq!(got.len(), 500);
        assert_eq!(got, dump(&one_by_one));
    }

    /// A record that does not decode stops the insert with a corruption error naming its byte:
    /// records in key order before it are in the memtable; once the order broke (the rest
    /// goes in sorted), nothing of the rest is. The iterator reports the same error.
    #[test]
    fn a_malformed_record_stops_the_insert_with_its_position() {
        let icmp = InternalKeyComparator::new(Arc::new(BytewiseComparator));
        for (ordered, bad) in [
            (true, 0usize),
            (true, 40),
            (true, 99),
            (false, 51),
            (false, 60),
        ] {
            let mut b = WriteBatch::new();
            let mut starts = Vec::new();
            for i in 0..100u32 {
                starts.push(b.rep.len());
                // Descending from record 50 on, when asked: the order breaks after record 50.
                let k = if ordered || i < 50 { i } else { 1000 - i };
                b.put(format!("key{k:04}"), i.to_le_bytes());
            }
            b.rep[starts[bad]] = 0x7f;
            b.set_sequence(1);
            let mem = Arc::new(MemTable::new(icmp.clone()));
            let e = b.insert_into(&mem).expect_err("malformed record");
            let what = format!("unknown kind 127 (record at batch byte {})", starts[bad]);
            assert!(e.is_corruption() && e.to_string().contains(&what), "{e}");
            let inserted = if ordered { bad } else { 51 };
            assert_eq!(mem.len(), inserted, "bad record {bad}");
            let iterated: Vec<_> = b.iter().collect();
            assert_eq!(iterated.len(), bad + 1);
            match iterated.last() {
                Some(Err(e)) => assert!(e.to_string().contains(&what), "{e}"),
                other => panic!("the iterator ended with {other:?}"),
            }
            // Either way of walking stops at the same record with the same error.
            let mut it = b.iter();
            assert!(it.by_ref().take(bad).all(|e| e.is_ok()));
            assert!(it.next().is_some_and(|e| e.is_err()));
            let e = it.stopped_by().expect_err("stopped early");
            assert!(e.to_string().contains(&what), "{e}");
            let mut it = b.iter();
            while it.next_entry().is_some() {}
            let e = it.stopped_by().expect_err("stopped early");
            assert!(e.to_string().contains(&what), "{e}");
        }
    }

    #[test]
    fn insert_into_uses_consecutive_sequence_numbers() {
        let mem = Arc::new(MemTable::new(InternalKeyComparator::new(Arc::new(
            BytewiseComparator,
        ))));
        let mut b = WriteBatch::new();
        b.put("k", "v1");
        b.merge("k", "m");
        b.delete("j");
        b.put_with_expiry("k", "v2", 5);
        b.set_sequence(100);
        b.insert_into(&mem).expect("insert");
        assert_eq!(mem.len(), 4);
        let got = dump(&mem);
        let mut expiring = 5u64.to_le_bytes().to_vec();
        expiring.extend_from_slice(b"v2");
        assert_eq!(
            got,
            vec![
                (
                    make_internal_key(b"j", 102, ValueKind::Deletion),
                    Vec::new()
                ),
                (
                    make_internal_key(b"k", 103, ValueKind::ExpiringValue),
                    expiring
                ),
                (
                    make_internal_key(b"k", 101, ValueKind::Merge),
                    b"m".to_vec()
                ),
                (
                    make_internal_key(b"k", 100, ValueKind::Value),
                    b"v1".to_vec()
                ),
            ]
        );

        let mut late = WriteBatch::new();
        late.put("a", "b");
        late.put("a", "c");
        late.set_sequence(MAX_SEQUENCE);
        assert!(matches!(
            late.insert_into(&mem),
            Err(Error::InvalidArgument(_))
        ));
        late.set_sequence(u64::MAX);
        assert!(matches!(
            late.insert_into(&mem),
            Err(Error::InvalidArgument(_))
        ));
        assert_eq!(mem.len(), 4, "nothing of a refused batch is inserted");
    }
}
