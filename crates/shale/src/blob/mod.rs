//! Blob files: large values stored once, outside the LSM tree (key-value separation, as in
//! WiscKey and RocksDB's integrated BlobDB).
//!
//! Owns the blob file format (header, checksummed records), the *blob reference* the memtable
//! and tables store in place of a separated value, the writer the write path and compaction
//! append with, and the cache of open blob files reads go through.
//!
//! ```text
//! file   := header record*
//! header := magic "shaleBLB" (8) | version: fixed32 = 1 | file number: fixed64      (20 bytes)
//! record := crc32c_masked: fixed32 | type: u8 (0 = raw) | key_len: fixed32
//!           | value_len: fixed64 | key | value                      (17-byte header + data)
//! crc    := crc32c of every record byte after the crc field, masked as in the WAL
//! ref    := file number: varint64 | record offset: varint64 | record length: varint64
//! ```
//! A [`crate::key::ValueKind::BlobIndex`] entry's value is a `ref`; an
//! [`crate::key::ValueKind::ExpiringBlobIndex`] entry's value is a fixed64 LE expiry followed by
//! a `ref`, laid out like an `ExpiringValue`, so expiry code reads both the same way.
//!
//! Invariants: a reference is created only after its record was appended to the blob file (and
//! handed to the OS) by the same process, and the WAL record carrying it is synced only after the
//! blob file is. Bytes read back are checked against the record's crc and the reference's key
//! before they are returned; anything else is [`crate::Error::Corruption`] naming the blob file
//! and offset. Format doc: `docs/format/blob.md`.
//!
//! Thread-safety: [`BlobRef`] and the format functions are plain data; `BlobFileWriter` is
//! owned by one writer at a time (the write-path leader, or one compaction); `BlobCache` is
//! shared by every reader.

mod cache;
mod format;
mod writer;

pub(crate) use cache::BlobCache;
pub use format::{
    decode_record, encode_header, encode_record_header, BlobRef, BLOB_FORMAT_VERSION,
    BLOB_HEADER_LEN, BLOB_MAGIC, RECORD_HEADER_LEN,
};
pub(crate) use writer::BlobFileWriter;
