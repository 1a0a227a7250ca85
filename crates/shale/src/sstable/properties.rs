//! Table properties: counts, sizes, key range and settings recorded in every table, stored as a
//! block of `name -> value` entries sorted by name.
//!
//! Numbers are varint64 values; strings and keys are raw bytes. Readers ignore names they do not
//! know (so later versions may add properties) and treat missing ones as zero/empty. `file_size`
//! is not stored: the properties block is written before the file ends, so the reader fills it
//! in from the file's size.
//!
//! Thread-safety: plain data.
//!
//! Format doc: `docs/format/sstable.md` ("Properties block").

use std::sync::Arc;

use crate::codec::{put_varint64, Decoder};
use crate::key::{BytewiseComparator, InternalKeyComparator};

use super::block::{Block, BlockBuilder, BlockIter};

/// Everything a table records about itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TableProperties {
    /// Entries (of every kind).
    pub num_entries: u64,
    /// Entries of kind [`crate::key::ValueKind::Deletion`].
    pub num_deletions: u64,
    /// Entries of kind [`crate::key::ValueKind::Merge`].
    pub num_merges: u64,
    /// Entries of kind [`crate::key::ValueKind::ExpiringValue`] whose value holds its expiry.
    /// Every other entry (a value without expiry, a merge operand, a deletion, or a malformed
    /// expiring value) never expires, so the table expires as a whole only when this equals
    /// `num_entries`. 0 in tables written before the property existed.
    pub num_expiring: u64,
    /// The largest expiry (microseconds since the Unix epoch) of the table's expiring entries;
    /// 0 if it has none.
    pub max_expiry_micros: u64,
    /// Sum of internal key lengths as added (before prefix compression).
    pub raw_key_bytes: u64,
    /// Sum of value lengths as added (before compression).
    pub raw_value_bytes: u64,
    /// Bytes of the data region: every data block with its trailer, as stored.
    pub data_size: u64,
    /// Bytes of the index block with its trailer.
    pub index_size: u64,
    /// Bytes of the filter block with its trailer (0 without a filter).
    pub filter_size: u64,
    /// Number of data blocks.
    pub num_data_blocks: u64,
    /// Size of the whole file (not stored; filled in by the builder and the reader).
    pub file_size: u64,
    /// Smallest internal key in the table (empty for an empty table).
    pub smallest_key: Vec<u8>,
    /// Largest internal key in the table (empty for an empty table).
    pub largest_key: Vec<u8>,
    /// Smallest sequence number of any entry (0 for an empty table).
    pub smallest_seqno: u64,
    /// Largest sequence number of any entry.
    pub largest_seqno: u64,
    /// The compression setting the table was written with, e.g. `lz4` or `zstd:3`. Blocks that
    /// did not compress well are stored raw regardless.
    pub compression: String,
    /// Name of the user comparator that orders the keys.
    pub comparator: String,
    /// Table format version.
    pub format_version: u32,
}

// Property names. Persisted: never rename.
const NUM_ENTRIES: &str = "shale.num_entries";
const NUM_DELETIONS: &str = "shale.num_deletions";
const NUM_MERGES: &str = "shale.num_merges";
const NUM_EXPIRING: &str = "shale.num_expiring";
const MAX_EXPIRY_MICROS: &str = "shale.max_expiry_micros";
const RAW_KEY_BYTES: &str = "shale.raw_key_bytes";
const RAW_VALUE_BYTES: &str = "shale.raw_value_bytes";
const DATA_SIZE: &str = "shale.data_size";
const INDEX_SIZE: &str = "shale.index_size";
const FILTER_SIZE: &str = "shale.filter_size";
const NUM_DATA_BLOCKS: &str = "shale.num_data_blocks";
const SMALLEST_KEY: &str = "shale.smallest_key";
const LARGEST_KEY: &str = "shale.largest_key";
const SMALLEST_SEQNO: &str = "shale.smallest_seqno";
const LARGEST_SEQNO: &str = "shale.largest_seqno";
const COMPRESSION: &str = "shale.compression";
const COMPARATOR: &str = "shale.comparator";
const FORMAT_VERSION: &str = "shale.format_version";

fn varint(v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    put_varint64(&mut out, v);
    out
}

/// Encodes the properties as the raw (uncompressed) bytes of a properties block.
pub fn encode_properties(p: &TableProperties) -> Vec<u8> {
    let mut entries: Vec<(&str, Vec<u8>)> = vec![
        (NUM_ENTRIES, varint(p.num_entries)),
        (NUM_DELETIONS, varint(p.num_deletions)),
        (NUM_MERGES, varint(p.num_merges)),
        (NUM_EXPIRING, varint(p.num_expiring)),
        (MAX_EXPIRY_MICROS, varint(p.max_expiry_micros)),
        (RAW_KEY_BYTES, varint(p.raw_key_bytes)),
        (RAW_VALUE_BYTES, varint(p.raw_value_bytes)),
        (DATA_SIZE, varint(p.data_size)),
        (INDEX_SIZE, varint(p.index_size)),
        (FILTER_SIZE, varint(p.filter_size)),
        (NUM_DATA_BLOCKS, varint(p.num_data_blocks)),
        (SMALLEST_KEY, p.smallest_key.clone()),
        (LARGEST_KEY, p.largest_key.clone()),
        (SMALLEST_SEQNO, varint(p.smallest_seqno)),
        (LARGEST_SEQNO, varint(p.largest_seqno)),
        (COMPRESSION, p.compression.as_bytes().to_vec()),
        (COMPARATOR, p.comparator.as_bytes().to_vec()),
        (FORMAT_VERSION, varint(u64::from(p.format_version))),
    ];
    entries.sort_by(|a, b| a.0.cmp(b.0));
    let mut b = BlockBuilder::new(1);
    for (name, value) in &entries {
        b.add(name.as_bytes(), value);
    }
    b.finish()
}

/// `(name, value)` pairs of a properties or metaindex block.
pub type NamedEntries = Vec<(Vec<u8>, Vec<u8>)>;

/// Every `(name, value)` entry of a properties (or metaindex) block, in stored order; the
/// message says what is malformed. Names must increase strictly.
pub fn decode_string_block(data: Vec<u8>) -> std::result::Result<NamedEntries, &'static str> {
    let block = Block::new(data)?;
    let icmp = InternalKeyComparator::new(Arc::new(BytewiseComparator));
    let mut it = BlockIter::new(Arc::new(block), icmp);
    let mut out: NamedEntries = Vec::new();
    it.seek_to_first();
    while it.valid() {
        if out
            .last()
            .is_some_and(|(last, _)| last.as_slice() >= it.key())
        {
            return Err("names out of order");
        }
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next();
    }
    match it.corruption() {
        Some((_, m)) => Err(m),
        None => Ok(out),
    }
}

/// Decodes the raw bytes of a properties block; the message says what is malformed.
pub fn decode_properties(data: Vec<u8>) -> std::result::Result<TableProperties, &'static str> {
    let mut p = TableProperties::default();
    for (name, value) in decode_string_block(data)? {
        let num = || -> std::result::Result<u64, &'static str> {
            let mut d = Decoder::new(&value);
            match d.varint64() {
                Some(v) if d.is_empty() => Ok(v),
                _ => Err("malformed numeric property"),
            }
        };
        let text = || String::from_utf8(value.clone()).map_err(|_| "property is not UTF-8");
        match std::str::from_utf8(&name).unwrap_or("") {
            NUM_ENTRIES => p.num_entries = num()?,
            NUM_DELETIONS => p.num_deletions = num()?,
            NUM_MERGES => p.num_merges = num()?,
            NUM_EXPIRING => p.num_expiring = num()?,
            MAX_EXPIRY_MICROS => p.max_expiry_micros = num()?,
            RAW_KEY_BYTES => p.raw_key_bytes = num()?,
            RAW_VALUE_BYTES => p.raw_value_bytes = num()?,
            DATA_SIZE => p.data_size = num()?,
            INDEX_SIZE => p.index_size = num()?,
            FILTER_SIZE => p.filter_size = num()?,
            NUM_DATA_BLOCKS => p.num_data_blocks = num()?,
            SMALLEST_KEY => p.smallest_key = value.clone(),
            LARGEST_KEY => p.largest_key = value.clone(),
            SMALLEST_SEQNO => p.smallest_seqno = num()?,
            LARGEST_SEQNO => p.largest_seqno = num()?,
            COMPRESSION => p.compression = text()?,
            COMPARATOR => p.comparator = text()?,
            FORMAT_VERSION => {
                p.format_version = u32::try_from(num()?).map_err(|_| "format version too large")?
            }
            _ => {} // A property from a later version: ignored.
        }
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let p = TableProperties {
            num_entries: 1,
            num_deletions: 2,
            num_merges: 3,
            num_expiring: 11,
            max_expiry_micros: u64::MAX - 1,
            raw_key_bytes: 4,
            raw_value_bytes: 5,
            data_size: 6,
            index_size: 7,
            filter_size: 8,
            num_data_blocks: 9,
            file_size: 0,
            smallest_key: b"a\x01\x00\x00\x00\x00\x00\x00\x00".to_vec(),
            largest_key: b"z\x01\x00\x00\x00\x00\x00\x00\x00".to_vec(),
            smallest_seqno: 10,
            largest_seqno: u64::MAX,
            compression: "zstd:3".into(),
            comparator: "shale.BytewiseComparator".into(),
            format_version: 1,
        };
        assert_eq!(decode_properties(encode_properties(&p)).expect("decode"), p);
    }

    #[test]
    fn unknown_names_ignored_and_bad_numbers_refused() {
        let mut b = BlockBuilder::new(1);
        b.add(b"shale.num_entries", &[5]);
        b.add(b"zzz.future", b"whatever");
        let p = decode_properties(b.finish()).expect("decode");
        assert_eq!(p.num_entries, 5);
        let mut b = BlockBuilder::new(1);
        b.add(b"shale.num_entries", &[0x80]);
        assert!(decode_properties(b.finish()).is_err());
        let mut b = BlockBuilder::new(1);
        b.add(b"b", b"");
        b.add(b"a", b"");
        assert!(decode_properties(b.finish()).is_err());
    }
}
