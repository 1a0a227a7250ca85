//! Version edits: the records of the manifest. An edit is a delta from one version to the
//! next (files added and deleted per level) plus the counters recovery needs (next file number,
//! last sequence, the WAL still needed, the comparator's name, compaction round-robin
//! pointers). A full snapshot of a version is an edit that only adds files.
//!
//! Encoding: a sequence of tagged fields, each a varint32 tag followed by the tag's payload.
//! Unknown tags are an error: an old build must refuse a field it does not know rather than
//! drop state silently. Tag 8 was added without a log format version bump because refusing
//! it *is* that clean failure, and it only appears in databases that use TTL. Tags 9-11 (blob
//! files) were added the same way, for the same reason: they appear only in databases that
//! stored a value in a blob file, which an older build could not read anyway.
//!
//! ```text
//! edit         := field*
//! field        := tag: varint32 | payload
//! 1 comparator      : name: varint64 length | bytes (UTF-8)
//! 2 log_number      : varint64
//! 3 next_file_number: varint64
//! 4 last_sequence   : varint64
//! 5 compact_pointer : level: varint32 | internal key: varint64 length | bytes
//! 6 deleted_file    : level: varint32 | file number: varint64
//! 7 new_file        : level: varint32 | number: varint64 | file_size: varint64
//!                     | smallest: varint64 length | bytes | largest: varint64 length | bytes
//!                     | smallest_seqno: varint64 | largest_seqno: varint64
//!                     | num_entries: varint64 | num_deletions: varint64
//! 8 new_file_expiry : number: varint64 | max_expiry_micros: varint64
//!                     | has_permanent_entries: u8 (0 or 1)
//! 9 blob_file       : number: varint64 | total_bytes: varint64
//! 10 blob_garbage   : number: varint64 | garbage_bytes: varint64
//! 11 new_file_blob  : number: varint64 | oldest_blob_file: varint64
//! ```
//! Tag 9 adds `total_bytes` of records to blob file `number` (creating its entry), tag 10 adds
//! bytes no table references any more; a blob file whose garbage reaches its total leaves the
//! version. Tag 11 completes a `new_file` of the same edit with the lowest blob file number its
//! entries reference (absent: none).
//! Levels must be below [`crate::limits::NUM_LEVELS`]; file keys are internal keys and must be
//! at least a trailer long. Tag 8 is optional and completes the `new_file` of the same edit
//! with that number; a file without it has no expiring entries as far as the manifest knows
//! (`max_expiry_micros` 0, `has_permanent_entries` true), which is also how files recorded
//! before the tag existed read. It is written only for files holding expiring entries, so a
//! database that never uses TTL writes exactly the bytes it wrote before the tag existed.
//! Format doc: `docs/format/manifest.md`.
//!
//! Thread-safety: plain data.

use crate::codec::{put_length_prefixed, put_varint32, put_varint64, Decoder};
use crate::key::{user_key, TRAILER_LEN};
use crate::limits::NUM_LEVELS;

/// Field tags of an encoded edit. Persisted: never renumber.
mod tag {
    pub const COMPARATOR: u32 = 1;
    pub const LOG_NUMBER: u32 = 2;
    pub const NEXT_FILE_NUMBER: u32 = 3;
    pub const LAST_SEQUENCE: u32 = 4;
    pub const COMPACT_POINTER: u32 = 5;
    pub const DELETED_FILE: u32 = 6;
    pub const NEW_FILE: u32 = 7;
    pub const NEW_FILE_EXPIRY: u32 = 8;
    pub const BLOB_FILE: u32 = 9;
    pub const BLOB_GARBAGE: u32 = 10;
    pub const NEW_FILE_BLOB: u32 = 11;
}

/// What the manifest records about one table file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileMetaData {
    /// The file number: the table lives in `NNNNNN.sst`.
    pub number: u64,
    /// Size of the file in bytes.
    pub file_size: u64,
    /// Smallest internal key in the file.
    pub smallest: Vec<u8>,
    /// Largest internal key in the file.
    pub largest: Vec<u8>,
    /// Smallest sequence number of any entry in the file.
    pub smallest_seqno: u64,
    /// Largest sequence number of any entry in the file.
    pub largest_seqno: u64,
    /// Entries in the file.
    pub num_entries: u64,
    /// Tombstones among those entries.
    pub num_deletions: u64,
    /// The largest expiry (microseconds since the Unix epoch) of the file's expiring entries;
    /// 0 if it has none.
    pub max_expiry_micros: u64,
    /// True if some entry never expires (a plain value, a merge operand, a deletion). Files
    /// recorded before expiry metadata existed read as true: they are never dropped whole.
    pub has_permanent_entries: bool,
    /// The lowest blob file number any entry of the table references; 0 if none does (or the
    /// table was recorded without tag 11). Lets the picker find tables that pin a blob file
    /// due for garbage collection.
    pub oldest_blob_file: u64,
}

impl FileMetaData {
    /// The user-key part of [`FileMetaData::smallest`].
    pub fn smallest_user_key(&self) -> &[u8] {
        user_key(&self.smallest)
    }

    /// The user-key part of [`FileMetaData::largest`].
    pub fn largest_user_key(&self) -> &[u8] {
        user_key(&self.largest)
    }

    /// True if every entry of the file is an expiring value that has expired at `now_micros`
    /// (an entry with expiry `e` is expired from `now >= e` on): nobody can read anything from
    /// the file any more, and compacting it reclaims all of its space.
    pub fn fully_expired_at(&self, now_micros: u64) -> bool {
        self.num_entries > 0 && !self.has_permanent_entries && self.max_expiry_micros <= now_micros
    }

    /// True if the expiry fields differ from what a file without tag 8 reads as, so the
    /// manifest must record them.
    fn has_expiry_metadata(&self) -> bool {
        self.max_expiry_micros != 0 || !self.has_permanent_entries
    }
}

/// A change from one version to the next, as recorded in the manifest.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VersionEdit {
    /// Name of the user comparator; recorded once, in the first edit of each manifest.
    pub comparator: Option<String>,
    /// WAL files numbered below this are no longer needed: their data is in tables.
    pub log_number: Option<u64>,
    /// The next file number to hand out; every number below it may be in use.
    pub next_file_number: Option<u64>,
    /// The sequence number of the last write covered by this state.
    pub last_sequence: Option<u64>,
    /// Where the next size compaction of a level starts: `(level, internal key)`.
    pub compact_pointers: Vec<(usize, Vec<u8>)>,
    /// Table files removed: `(level, file number)`.
    pub deleted_files: Vec<(usize, u64)>,
    /// Table files added: `(level, metadata)`.
    pub new_files: Vec<(usize, FileMetaData)>,
    /// Record bytes added to blob files: `(blob file number, bytes)`, at most one per file.
    pub blob_files: Vec<(u64, u64)>,
    /// Bytes of blob files no table references any more: `(blob file number, bytes)`, at most
    /// one per file.
    pub blob_garbage: Vec<(u64, u64)>,
}

impl VersionEdit {
    /// Records that `f` joins `level`.
    pub fn add_file(&mut self, level: usize, f: FileMetaData) {
        debug_assert!(level < NUM_LEVELS);
        self.new_files.push((level, f));
    }

    /// Records `bytes` more record bytes in blob file `number` (merged with an earlier
    /// addition for the same file in this edit).
    pub fn add_blob_bytes(&mut self, number: u64, bytes: u64) {
        add_to(&mut self.blob_files, number, bytes);
    }

    /// Records `bytes` of blob file `number` that no table references any more.
    pub fn add_blob_garbage(&mut self, number: u64, bytes: u64) {
        add_to(&mut self.blob_garbage, number, bytes);
    }

    /// Records that file `number` leaves `level`.
    pub fn delete_file(&mut self, level: usize, number: u64) {
        debug_assert!(level < NUM_LEVELS);
        self.deleted_files.push((level, number));
    }

    /// Serializes the edit (see the module docs for the grammar). Fields are written in tag
    /// order; repeated fields in the order they were added.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        if let Some(name) = &self.comparator {
            put_varint32(&mut out, tag::COMPARATOR);
            put_length_prefixed(&mut out, name.as_bytes());
        }
        if let Some(n) = self.log_number {
            put_varint32(&mut out, tag::LOG_NUMBER);
            put_varint64(&mut out, n);
        }
        if let Some(n) = self.next_file_number {
            put_varint32(&mut out, tag::NEXT_FILE_NUMBER);
            put_varint64(&mut out, n);
        }
        if let Some(s) = self.last_sequence {
            put_varint32(&mut out, tag::LAST_SEQUENCE);
            put_varint64(&mut out, s);
        }
        for (level, key) in &self.compact_pointers {
            put_varint32(&mut out, tag::COMPACT_POINTER);
            put_level(&mut out, *level);
            put_length_prefixed(&mut out, key);
        }
        for (level, number) in &self.deleted_files {
            put_varint32(&mut out, tag::DELETED_FILE);
            put_level(&mut out, *level);
            put_varint64(&mut out, *number);
        }
        for (level, f) in &self.new_files {
            put_varint32(&mut out, tag::NEW_FILE);
            put_level(&mut out, *level);
            put_varint64(&mut out, f.number);
            put_varint64(&mut out, f.file_size);
            put_length_prefixed(&mut out, &f.smallest);
            put_length_prefixed(&mut out, &f.largest);
            put_varint64(&mut out, f.smallest_seqno);
            put_varint64(&mut out, f.largest_seqno);
            put_varint64(&mut out, f.num_entries);
            put_varint64(&mut out, f.num_deletions);
        }
        for (_, f) in self
            .new_files
            .iter()
            .filter(|(_, f)| f.has_expiry_metadata())
        {
            put_varint32(&mut out, tag::NEW_FILE_EXPIRY);
            put_varint64(&mut out, f.number);
            put_varint64(&mut out, f.max_expiry_micros);
            out.push(u8::from(f.has_permanent_entries));
        }
        for (number, bytes) in &self.blob_files {
            put_varint32(&mut out, tag::BLOB_FILE);
            put_varint64(&mut out, *number);
            put_varint64(&mut out, *bytes);
        }
        for (number, bytes) in &self.blob_garbage {
            put_varint32(&mut out, tag::BLOB_GARBAGE);
            put_varint64(&mut out, *number);
            put_varint64(&mut out, *bytes);
        }
        for (_, f) in self
            .new_files
            .iter()
            .filter(|(_, f)| f.oldest_blob_file != 0)
        {
            put_varint32(&mut out, tag::NEW_FILE_BLOB);
            put_varint64(&mut out, f.number);
            put_varint64(&mut out, f.oldest_blob_file);
        }
        out
    }

    /// Parses an encoded edit. Never panics; the error says which field is bad and at which
    /// byte of the record, and the caller adds the file and record offset.
    pub fn decode(data: &[u8]) -> Result<VersionEdit, String> {
        let mut edit = VersionEdit::default();
        // Expiry fields by file number, with the byte their field started at; attached to the
        // edit's new files once every field is read, because fields may come in any order.
        let mut expiries: Vec<(u64, u64, bool, usize)> = Vec::new();
        let mut blob_links: Vec<(u64, u64, usize)> = Vec::new();
        let mut d = Decoder::new(data);
        while !d.is_empty() {
            let field_start = d.position();
            let tag = d
                .varint32()
                .ok_or_else(|| format!("bad field tag at byte {field_start}"))?;
            let bad = |what: &str| format!("bad {what} field at byte {field_start}");
            match tag {
                tag::COMPARATOR => {
                    let name = d.length_prefixed().ok_or_else(|| bad("comparator"))?;
                    let name = std::str::from_utf8(name)
                        .map_err(|_| bad("comparator (name is not UTF-8)"))?;
                    edit.comparator = Some(name.to_string());
                }
                tag::LOG_NUMBER => {
                    edit.log_number = Some(d.varint64().ok_or_else(|| bad("log number"))?);
                }
                tag::NEXT_FILE_NUMBER => {
                    edit.next_file_number =
                        Some(d.varint64().ok_or_else(|| bad("next file number"))?);
                }
                tag::LAST_SEQUENCE => {
                    edit.last_sequence = Some(d.varint64().ok_or_else(|| bad("last sequence"))?);
                }
                tag::COMPACT_POINTER => {
                    let level = get_level(&mut d).ok_or_else(|| bad("compact pointer"))?;
                    let key = get_internal_key(&mut d).ok_or_else(|| bad("compact pointer"))?;
                    edit.compact_pointers.push((level, key.to_vec()));
                }
                tag::DELETED_FILE => {
                    let level = get_level(&mut d).ok_or_else(|| bad("deleted file"))?;
                    let number = d.varint64().ok_or_else(|| bad("deleted file"))?;
                    edit.deleted_files.push((level, number));
                }
                tag::NEW_FILE => {
                    let level = get_level(&mut d).ok_or_else(|| bad("new file"))?;
                    let f = get_file(&mut d).ok_or_else(|| bad("new file"))?;
                    edit.new_files.push((level, f));
                }
                tag::NEW_FILE_EXPIRY => {
                    let number = d.varint64().ok_or_else(|| bad("new file expiry"))?;
                    let max_expiry = d.varint64().ok_or_else(|| bad("new file expiry"))?;
                    let has_permanent = match d.u8() {
                        Some(0) => false,
                        Some(1) => true,
                        _ => return Err(bad("new file expiry (flag is not 0 or 1)")),
                    };
                    expiries.push((number, max_expiry, has_permanent, field_start));
                }
                tag::BLOB_FILE => {
                    let number = d.varint64().ok_or_else(|| bad("blob file"))?;
                    let bytes = d.varint64().ok_or_else(|| bad("blob file"))?;
                    edit.add_blob_bytes(number, bytes);
                }
                tag::BLOB_GARBAGE => {
                    let number = d.varint64().ok_or_else(|| bad("blob garbage"))?;
                    let bytes = d.varint64().ok_or_else(|| bad("blob garbage"))?;
                    edit.add_blob_garbage(number, bytes);
                }
                tag::NEW_FILE_BLOB => {
                    let number = d.varint64().ok_or_else(|| bad("new file blob"))?;
                    let oldest = d.varint64().ok_or_else(|| bad("new file blob"))?;
                    blob_links.push((number, oldest, field_start));
                }
                other => return Err(format!("unknown field tag {other} at byte {field_start}")),
            }
        }
        // Indexed once: a manifest snapshot of a large database carries these fields for
        // tens of thousands of files, and a search per field would be quadratic.
        let mut added: std::collections::HashMap<u64, usize> =
            std::collections::HashMap::with_capacity(edit.new_files.len());
        if !expiries.is_empty() || !blob_links.is_empty() {
            for (i, (_, f)) in edit.new_files.iter().enumerate() {
                added.entry(f.number).or_insert(i);
            }
        }
        for (number, max_expiry, has_permanent, field_start) in expiries {
            let file = added_file(&mut edit, &added, number, "expiry", field_start)?;
            file.max_expiry_micros = max_expiry;
            file.has_permanent_entries = has_permanent;
        }
        for (number, oldest, field_start) in blob_links {
            added_file(&mut edit, &added, number, "blob", field_start)?.oldest_blob_file = oldest;
        }
        Ok(edit)
    }
}

/// Adds `bytes` to the entry for `number` in `list`, or appends one.
fn add_to(list: &mut Vec<(u64, u64)>, number: u64, bytes: u64) {
    match list.iter_mut().find(|(n, _)| *n == number) {
        Some((_, total)) => *total = total.saturating_add(bytes),
        None => list.push((number, bytes)),
    }
}

fn put_level(out: &mut Vec<u8>, level: usize) {
    // Levels are tiny; the cast cannot truncate for any level the engine uses.
    put_varint32(out, u32::try_from(level).unwrap_or(u32::MAX));
}

fn get_level(d: &mut Decoder<'_>) -> Option<usize> {
    let level = usize::try_from(d.varint32()?).ok()?;
    (level < NUM_LEVELS).then_some(level)
}

fn get_internal_key<'a>(d: &mut Decoder<'a>) -> Option<&'a [u8]> {
    let key = d.length_prefixed()?;
    (key.len() >= TRAILER_LEN).then_some(key)
}

fn get_file(d: &mut Decoder<'_>) -> Option<FileMetaData> {
    Some(FileMetaData {
        number: d.varint64()?,
        file_size: d.varint64()?,
        smallest: get_internal_key(d)?.to_vec(),
        largest: get_internal_key(d)?.to_vec(),
        smallest_seqno: d.varint64()?,
        largest_seqno: d.varint64()?,
        num_entries: d.varint64()?,
        num_deletions: d.varint64()?,
        max_expiry_micros: 0,
        has_permanent_entries: true,
        oldest_blob_file: 0,
    })
}

/// The file a field completing a `new_file` names (`field` at byte `field_start`), which must be
/// one the edit adds.
fn added_file<'a>(
    edit: &'a mut VersionEdit,
    added: &std::collections::HashMap<u64, usize>,
    number: u64,
    field: &str,
    field_start: usize,
) -> std::result::Result<&'a mut FileMetaData, String> {
    added
        .get(&number)
        .and_then(|&i| edit.new_files.get_mut(i))
        .map(|(_, f)| f)
        .ok_or_else(|| {
            format!(
                "new file {field} field at byte {field_start} names file {number}, which the \
                 edit does not add"
            )
        })
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::key::{make_internal_key, ValueKind};

    fn file(number: u64, smallest: &[u8], largest: &[u8]) -> FileMetaData {
        FileMetaData {
            number,
            file_size: number.wrapping_add(1000),
            smallest: make_internal_key(smallest, 5, ValueKind::Value),
            largest: make_internal_key(largest, 9, ValueKind::Deletion),
            smallest_seqno: 5,
            largest_seqno: 9,
            num_entries: 77,
            num_deletions: 3,
            max_expiry_micros: 0,
            has_permanent_entries: true,
            oldest_blob_file: 0,
        }
    }

    fn full_edit() -> VersionEdit {
        let mut e = VersionEdit {
            comparator: Some("shale.BytewiseComparator".into()),
            log_number: Some(12),
            next_file_number: Some(300),
            last_sequence: Some(1 << 40),
            compact_pointers: vec![(1, make_internal_key(b"m", 3, ValueKind::Value))],
            ..VersionEdit::default()
        };
        e.delete_file(2, 41);
        e.delete_file(6, u64::MAX);
        e.add_file(0, file(100, b"a", b"z"));
        e.add_file(6, file(u64::MAX, b"", b"\xff\xff"));
        let mut expiring = file(101, b"b", b"c");
        expiring.max_expiry_micros = u64::MAX;
        expiring.has_permanent_entries = false;
        e.add_file(3, expiring);
        let mut mixed = file(102, b"d", b"e");
        mixed.max_expiry_micros = 1_700_000_000_000_000;
        e.add_file(4, mixed);
        e
    }

    #[test]
    fn round_trip_every_field() {
        let e = full_edit();
        assert_eq!(VersionEdit::decode(&e.encode()).expect("decode"), e);
        let empty = VersionEdit::default();
        assert!(empty.encode().is_empty());
        assert_eq!(VersionEdit::decode(&[]).expect("decode"), empty);
    }

    #[test]
    fn golden_bytes() {
        let mut e = VersionEdit {
            comparator: Some("cmp".into()),
            log_number: Some(3),
            next_file_number: Some(200),
            last_sequence: Some(7),
            compact_pointers: vec![(1, b"k\x01\x07\0\0\0\0\0\0".to_vec())],
            ..VersionEdit::default()
        };
        e.delete_file(2, 5);
        e.add_file(
            1,
            FileMetaData {
                number: 9,
                file_size: 300,
                smallest: b"a\x01\x05\0\0\0\0\0\0".to_vec(),
                largest: b"b\x01\x06\0\0\0\0\0\0".to_vec(),
                smallest_seqno: 5,
                largest_seqno: 6,
                num_entries: 2,
                num_deletions: 0,
                max_expiry_micros: 0,
                has_permanent_entries: true,
                oldest_blob_file: 0,
            },
        );
        #[rustfmt::skip]
        let expected: Vec<u8> = vec![
            1, 3, b'c', b'm', b'p',                  // comparator "cmp"
            2, 3,                                    // log_number 3
            3, 0xc8, 0x01,                           // next_file_number 200
            4, 7,                                    // last_sequence 7
            5, 1, 9, b'k', 1, 7, 0, 0, 0, 0, 0, 0,   // compact pointer level 1
            6, 2, 5,                                 // delete level 2 file 5
            7, 1, 9, 0xac, 0x02,                     // new file level 1, number 9, size 300
            9, b'a', 1, 5, 0, 0, 0, 0, 0, 0,         //   smallest
            9, b'b', 1, 6, 0, 0, 0, 0, 0, 0,         //   largest
            5, 6, 2, 0,                              //   seqnos 5..6, 2 entries, 0 deletions
        ];
        assert_eq!(e.encode(), expected);
        assert_eq!(VersionEdit::decode(&expected).expect("decode"), e);
        assert_eq!(
            doc_golden_bytes(),
            expected,
            "docs/format/manifest.md is out of date"
        );
    }

    #[test]
    fn golden_bytes_with_expiry() {
        let mut e = VersionEdit::default();
        let mut f = FileMetaData {
            number: 9,
            file_size: 300,
            smallest: b"a\x03\x05\0\0\0\0\0\0".to_vec(),
            largest: b"b\x03\x06\0\0\0\0\0\0".to_vec(),
            smallest_seqno: 5,
            largest_seqno: 6,
            num_entries: 2,
            num_deletions: 0,
            max_expiry_micros: 1_000_000,
            has_permanent_entries: false,
            oldest_blob_file: 0,
        };
        e.add_file(1, f.clone());
        // A file without expiring entries gets no tag 8: its bytes are those of older builds.
        f.number = 10;
        f.max_expiry_micros = 0;
        f.has_permanent_entries = true;
        e.add_file(2, f);
        #[rustfmt::skip]
        let expected: Vec<u8> = vec![
            7, 1, 9, 0xac, 0x02,                     // new file level 1, number 9, size 300
            9, b'a', 3, 5, 0, 0, 0, 0, 0, 0,         //   smallest "a"@5 ExpiringValue
            9, b'b', 3, 6, 0, 0, 0, 0, 0, 0,         //   largest  "b"@6 ExpiringValue
            5, 6, 2, 0,                              //   seqnos 5..6, 2 entries, 0 deletions
            7, 2, 10, 0xac, 0x02,                    // new file level 2, number 10, size 300
            9, b'a', 3, 5, 0, 0, 0, 0, 0, 0,
            9, b'b', 3, 6, 0, 0, 0, 0, 0, 0,
            5, 6, 2, 0,
            8, 9, 0xc0, 0x84, 0x3d, 0,               // expiry of file 9: 1_000_000, all expire
        ];
        assert_eq!(e.encode(), expected);
        assert_eq!(VersionEdit::decode(&expected).expect("decode"), e);
        assert_eq!(
            doc_golden_section_bytes("## Golden example with expiry"),
            expected,
            "docs/format/manifest.md is out of date"
        );
    }

    #[test]
    fn golden_bytes_with_blob_files() {
        let mut e = VersionEdit::default();
        e.add_file(
            1,
            FileMetaData {
                number: 9,
                file_size: 300,
                smallest: b"a\x04\x05\0\0\0\0\0\0".to_vec(),
                largest: b"b\x04\x06\0\0\0\0\0\0".to_vec(),
                smallest_seqno: 5,
                largest_seqno: 6,
                num_entries: 2,
                num_deletions: 0,
                max_expiry_micros: 0,
                has_permanent_entries: true,
                oldest_blob_file: 4,
            },
        );
        e.add_blob_bytes(8, 2000);
        e.add_blob_garbage(4, 1000);
        #[rustfmt::skip]
        let expected: Vec<u8> = vec![
            7, 1, 9, 0xac, 0x02,                     // new file level 1, number 9, size 300
            9, b'a', 4, 5, 0, 0, 0, 0, 0, 0,         //   smallest "a"@5 BlobIndex
            9, b'b', 4, 6, 0, 0, 0, 0, 0, 0,         //   largest  "b"@6 BlobIndex
            5, 6, 2, 0,                              //   seqnos 5..6, 2 entries, 0 deletions
            9, 8, 0xd0, 0x0f,                        // blob file 8: 2000 bytes added
            10, 4, 0xe8, 0x07,                       // blob file 4: 1000 bytes of garbage
            11, 9, 4,                                // table 9 references blob files from 4
        ];
        assert_eq!(e.encode(), expected);
        assert_eq!(VersionEdit::decode(&expected).expect("decode"), e);
        assert_eq!(
            doc_golden_section_bytes("## Golden example with blob files"),
            expected,
            "docs/format/manifest.md is out of date"
        );
        // Tag 11 must name a table the edit adds.
        assert!(VersionEdit::decode(&[11, 9, 4]).is_err());
        // Repeated additions for one blob file merge.
        let mut twice = VersionEdit::default();
        twice.add_blob_bytes(3, 10);
        twice.add_blob_bytes(3, 5);
        assert_eq!(twice.blob_files, vec![(3, 15)]);
    }

    #[test]
    fn expiry_fields_must_name_a_new_file_of_the_edit() {
        // Before its new_file, in any order: accepted.
        let mut e = VersionEdit::default();
        let mut f = file(4, b"a", b"b");
        f.max_expiry_micros = 77;
        f.has_permanent_entries = false;
        e.add_file(1, f);
        let bytes = e.encode();
        let split = bytes.iter().rposition(|&b| b == 8).expect("tag 8");
        let mut reordered = bytes[split..].to_vec();
        reordered.extend_from_slice(&bytes[..split]);
        assert_eq!(VersionEdit::decode(&reordered).expect("any order"), e);
        // Files recorded without the tag read as never expiring whole.
        let plain = VersionEdit::decode(&bytes[..split]).expect("without tag 8");
        assert_eq!(plain.new_files[0].1.max_expiry_micros, 0);
        assert!(plain.new_files[0].1.has_permanent_entries);
        assert!(!plain.new_files[0].1.fully_expired_at(u64::MAX));
        assert!(e.new_files[0].1.fully_expired_at(77));
        assert!(
            !e.new_files[0].1.fully_expired_at(76),
            "visible while now < expiry"
        );

        let err = VersionEdit::decode(&[8, 4, 77, 0]).expect_err("no such new file");
        assert!(err.contains("file 4"), "{err}");
        let mut bad_flag = bytes.clone();
        let last = bad_flag.len() - 1;
        bad_flag[last] = 2;
        assert!(
            VersionEdit::decode(&bad_flag).is_err(),
            "flag must be 0 or 1"
        );
    }

    /// The hex bytes of the "Golden example" block of the format doc: on each line, the leading
    /// two-digit hex tokens (the rest of the line is commentary).
    fn doc_golden_bytes() -> Vec<u8> {
        doc_golden_section_bytes("## Golden example\n")
    }

    /// The hex bytes of the first code block after `heading` in the format doc.
    fn doc_golden_section_bytes(heading: &str) -> Vec<u8> {
        let doc = include_str!("../../../../docs/format/manifest.md");
        let section = doc.split(heading).nth(1).expect("golden section");
        let block = section.split("```").nth(1).expect("code block");
        let mut bytes = Vec::new();
        for line in block.lines().skip(1) {
            for token in line.split_whitespace() {
                match (token.len(), u8::from_str_radix(token, 16)) {
                    (2, Ok(b)) => bytes.push(b),
                    _ => break,
                }
            }
        }
        bytes
    }

    #[test]
    fn every_truncation_is_an_error() {
        let bytes = full_edit().encode();
        // Cutting inside a field must fail; cutting exactly between fields yields a valid
        // (smaller) edit, so only check that decoding never panics and, when it succeeds, that
        // the result re-encodes to the prefix.
        let mut errors = 0;
        for cut in 0..bytes.len() {
            match VersionEdit::decode(&bytes[..cut]) {
                Ok(e) => assert_eq!(e.encode(), bytes[..cut]),
                Err(_) => errors += 1,
            }
        }
        assert!(errors > bytes.len() / 2, "most cuts land inside a field");
    }

    #[test]
    fn unknown_tags_and_bad_levels_are_errors() {
        assert!(VersionEdit::decode(&[9, 0]).is_err(), "unknown tag");
        assert!(VersionEdit::decode(&[0]).is_err(), "tag 0 is unused");
        assert!(
            VersionEdit::decode(&[6, NUM_LEVELS as u8, 1]).is_err(),
            "level out of range"
        );
        assert!(VersionEdit::decode(&[6, 6, 1]).is_ok(), "deepest level");
        assert!(
            VersionEdit::decode(&[5, 1, 3, b'a', b'b', b'c']).is_err(),
            "key shorter than a trailer"
        );
        assert!(
            VersionEdit::decode(&[1, 2, 0xff, 0xfe]).is_err(),
            "comparator name not UTF-8"
        );
        assert!(
            VersionEdit::decode(&[
                2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01
            ])
            .is_err(),
            "overlong varint"
        );
        let err = VersionEdit::decode(&[2, 1, 99]).expect_err("unknown tag after a field");
        assert!(err.contains("99") && err.contains("byte 2"), "{err}");
    }

    #[test]
    fn random_garbage_never_panics() {
        let mut rng = StdRng::seed_from_u64(0x5ba1e);
        let valid = full_edit().encode();
        let mut errors = 0;
        for round in 0..5000 {
            let input: Vec<u8> = if round % 2 == 0 {
                let len = rng.gen_range(0..64);
                (0..len).map(|_| rng.gen()).collect()
            } else {
                // Mutate a valid encoding: flip bytes, then maybe truncate.
                let mut v = valid.clone();
                for _ in 0..rng.gen_range(1..4) {
                    let i = rng.gen_range(0..v.len());
                    v[i] = rng.gen();
                }
                let cut = rng.gen_range(0..=v.len());
                v.truncate(cut);
                v
            };
            match VersionEdit::decode(&input) {
                Ok(e) => {
                    // Whatever decodes must be internally valid and re-encodable.
                    let levels = e.new_files.iter().map(|(l, _)| *l);
                    let levels = levels.chain(e.deleted_files.iter().map(|(l, _)| *l));
                    let levels = levels.chain(e.compact_pointers.iter().map(|(l, _)| *l));
                    assert!(levels.into_iter().all(|l| l < NUM_LEVELS));
                    let again = VersionEdit::decode(&e.encode()).expect("re-decode");
                    assert_eq!(again, e);
                }
                Err(msg) => {
                    assert!(!msg.is_empty());
                    errors += 1;
                }
            }
        }
        assert!(
            errors > 2500,
            "garbage is mostly refused, got {errors} errors"
        );
    }
}
