//! The blob file byte format and the blob reference encoding. Normative description:
//! `docs/format/blob.md`; the golden-bytes tests below keep it and the code in step.
//!
//! Thread-safety: pure functions over plain data.

use crate::codec::{
    crc32c, crc32c_parts, decode_fixed32, decode_fixed64, mask_crc, put_fixed32, put_fixed64,
    put_varint64, unmask_crc, Decoder,
};

/// First bytes of every blob file. Persisted: never change.
pub const BLOB_MAGIC: &[u8; 8] = b"shaleBLB";
/// The blob file format version this build writes and reads. Persisted: never renumber.
pub const BLOB_FORMAT_VERSION: u32 = 1;
/// Bytes of the file header: magic, version, file number.
pub const BLOB_HEADER_LEN: usize = 20;
/// Bytes of a record header: crc, type, key length, value length.
pub const RECORD_HEADER_LEN: usize = 17;
/// Record type of a value stored as is. Persisted: never renumber.
pub const RECORD_TYPE_RAW: u8 = 0;

/// Where a separated value lives: the whole record `[offset, offset + length)` of blob file
/// `file_number`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BlobRef {
    /// The blob file, `NNNNNN.blob`.
    pub file_number: u64,
    /// Byte offset of the record's first (crc) byte.
    pub offset: u64,
    /// Length of the whole record: header, key and value.
    pub length: u64,
}

impl BlobRef {
    /// Appends the encoding (three varint64s) to `dst`.
    pub fn encode_to(&self, dst: &mut Vec<u8>) {
        put_varint64(dst, self.file_number);
        put_varint64(dst, self.offset);
        put_varint64(dst, self.length);
    }

    /// The encoding as a new vector.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(30);
        self.encode_to(&mut v);
        v
    }

    /// Decodes a reference that makes up all of `src`; `None` if malformed, if bytes follow it,
    /// if a varint is not in its shortest form (so one reference has one encoding), or if it
    /// cannot describe a record (shorter than a record header, starting inside the file header,
    /// or ending past `u64::MAX`).
    pub fn decode(src: &[u8]) -> Option<BlobRef> {
        let mut d = Decoder::new(src);
        let r = BlobRef {
            file_number: d.varint64()?,
            offset: d.varint64()?,
            length: d.varint64()?,
        };
        let plausible = d.is_empty()
            && r.offset >= BLOB_HEADER_LEN as u64
            && r.length >= RECORD_HEADER_LEN as u64
            && r.offset.checked_add(r.length).is_some()
            && r.encode() == src;
        plausible.then_some(r)
    }
}

/// The 20-byte file header of blob file `file_number`.
pub fn encode_header(file_number: u64) -> Vec<u8> {
    let mut h = Vec::with_capacity(BLOB_HEADER_LEN);
    h.extend_from_slice(BLOB_MAGIC);
    put_fixed32(&mut h, BLOB_FORMAT_VERSION);
    put_fixed64(&mut h, file_number);
    h
}

/// Checks a file header; the error says what is wrong. `Ok(false)` for another format
/// version (the caller reports it as unsupported, not corrupt).
pub fn check_header(header: &[u8], file_number: u64) -> Result<bool, String> {
    if header.len() < BLOB_HEADER_LEN || header.get(..8) != Some(BLOB_MAGIC.as_slice()) {
        return Err("bad blob file magic".into());
    }
    let version = header.get(8..).and_then(decode_fixed32).unwrap_or(0);
    if version != BLOB_FORMAT_VERSION {
        return Ok(false);
    }
    let number = header.get(12..).and_then(decode_fixed64).unwrap_or(0);
    if number != file_number {
        return Err(format!(
            "blob file header names file {number}, expected {file_number}"
        ));
    }
    Ok(true)
}

/// The 17-byte header of a raw record for `key` and `value`. The record is the header, then
/// the key, then the value; written in parts so a large value is never copied to build it.
pub fn encode_record_header(key: &[u8], value: &[u8]) -> [u8; RECORD_HEADER_LEN] {
    let mut h = [0u8; RECORD_HEADER_LEN];
    h[4] = RECORD_TYPE_RAW;
    h[5..9].copy_from_slice(&(key.len() as u32).to_le_bytes());
    h[9..17].copy_from_slice(&(value.len() as u64).to_le_bytes());
    let crc = crc32c_parts(&[&h[4..], key, value]);
    h[..4].copy_from_slice(&mask_crc(crc).to_le_bytes());
    h
}

/// Why a record's lengths do not add up to its `length`. A header of zeros is no record at
/// all: the zeros a blob file may hold after its last record (`docs/format/blob.md`), where a
/// write that never completed (torn off by a crash) would have gone.
fn lengths_mismatch(header: &[u8], key_len: u64, value_len: u64, length: u64) -> String {
    if header.iter().all(|&b| b == 0) {
        format!(
            "no blob record of {length} bytes there, only zeros (the space after the file's \
             last record, where a write that never completed would have gone)"
        )
    } else {
        format!(
            "blob record lengths (key {key_len}, value {value_len}) do not fill its {length} bytes"
        )
    }
}

/// The key and value lengths a record header announces, checked to add up to the record's
/// `length` (from its reference); the error says what is wrong.
pub fn record_lengths(header: &[u8], length: u64) -> Result<(usize, usize), String> {
    let header = header
        .get(..RECORD_HEADER_LEN)
        .ok_or_else(|| format!("blob record of {length} bytes is shorter than its header"))?;
    let key_len = decode_fixed32(&header[5..]).unwrap_or(0) as u64;
    let value_len = decode_fixed64(&header[9..]).unwrap_or(0);
    let body = key_len.checked_add(value_len);
    if body != length.checked_sub(RECORD_HEADER_LEN as u64) {
        return Err(lengths_mismatch(header, key_len, value_len, length));
    }
    let key_len = usize::try_from(key_len).map_err(|_| "blob key length too large".to_string())?;
    let value_len =
        usize::try_from(value_len).map_err(|_| "blob value length too large".to_string())?;
    Ok((key_len, value_len))
}

/// Checks a record read in parts (its header, key and value, whose lengths
/// [`record_lengths`] gave): the crc over all of them and the type.
pub fn check_record_parts(header: &[u8], key: &[u8], value: &[u8]) -> Result<(), String> {
    let stored = decode_fixed32(header).map(unmask_crc).unwrap_or(0);
    let after_crc = header.get(4..RECORD_HEADER_LEN).unwrap_or(&[]);
    let actual = crc32c_parts(&[after_crc, key, value]);
    if actual != stored {
        return Err(format!(
            "blob record checksum mismatch (stored {stored:#010x}, computed {actual:#010x})"
        ));
    }
    match after_crc.first() {
        Some(&RECORD_TYPE_RAW) => Ok(()),
        Some(kind) => Err(format!("unknown blob record type {kind}")),
        None => Err("blob record header cut off".into()),
    }
}

/// Decodes one whole record (exactly `record.len()` bytes) and returns `(key, value)`. Never
/// panics; the error says what is wrong (the caller adds the file and offset).
pub fn decode_record(record: &[u8]) -> Result<(&[u8], &[u8]), String> {
    let header = record.get(..RECORD_HEADER_LEN).ok_or_else(|| {
        format!(
            "blob record of {} bytes is shorter than its header",
            record.len()
        )
    })?;
    let stored = decode_fixed32(header).map(unmask_crc).unwrap_or(0);
    let kind = header[4];
    let key_len = decode_fixed32(&header[5..]).unwrap_or(0) as u64;
    let value_len = decode_fixed64(&header[9..]).unwrap_or(0);
    let body = key_len.checked_add(value_len);
    if body != Some((record.len() - RECORD_HEADER_LEN) as u64) {
        return Err(lengths_mismatch(
            header,
            key_len,
            value_len,
            record.len() as u64,
        ));
    }
    let actual = crc32c(&record[4..]);
    if actual != stored {
        return Err(format!(
            "blob record checksum mismatch (stored {stored:#010x}, computed {actual:#010x})"
        ));
    }
    if kind != RECORD_TYPE_RAW {
        return Err(format!("unknown blob record type {kind}"));
    }
    let (key, value) = record[RECORD_HEADER_LEN..].split_at(key_len as usize);
    Ok((key, value))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(key: &[u8], value: &[u8]) -> Vec<u8> {
        let mut r = encode_record_header(key, value).to_vec();
        r.extend_from_slice(key);
        r.extend_from_slice(value);
        r
    }

    #[test]
    fn golden_bytes() {
        assert_eq!(
            encode_header(7),
            [
                0x73, 0x68, 0x61, 0x6c, 0x65, 0x42, 0x4c, 0x42, // "shaleBLB"
                0x01, 0x00, 0x00, 0x00, // version 1
                0x07, 0, 0, 0, 0, 0, 0, 0, // file number 7
            ]
        );
        let r = record(b"k", b"vv");
        let crc = mask_crc(crc32c(&[
            0, 1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, b'k', b'v', b'v',
        ]));
        assert_eq!(
            crc.to_le_bytes(),
            [0xd8, 0xe0, 0xe9, 0x3d],
            "as in docs/format/blob.md"
        );
        let mut expected = crc.to_le_bytes().to_vec();
        expected.extend_from_slice(&[
            0x00, // type raw
            0x01, 0x00, 0x00, 0x00, // key length 1
            0x02, 0, 0, 0, 0, 0, 0, 0, // value length 2
            b'k', b'v', b'v',
        ]);
        assert_eq!(r, expected);
        let reference = BlobRef {
            file_number: 7,
            offset: 20,
            length: 300,
        };
        assert_eq!(reference.encode(), [0x07, 0x14, 0xac, 0x02]);
        assert_eq!(BlobRef::decode(&reference.encode()), Some(reference));
    }

    /// A reference into the zeros after a file's last record (a write a crash tore off) says
    /// so, instead of naming lengths no record announced.
    #[test]
    fn zeros_where_a_record_should_be_are_named_as_such() {
        let zeros = vec![0u8; 120];
        for message in [
            decode_record(&zeros).expect_err("zeros are no record"),
            record_lengths(&zeros, zeros.len() as u64).expect_err("zeros are no record"),
        ] {
            assert!(message.contains("only zeros"), "{message}");
        }
        let r = record(b"k", &[7; 100]);
        let message = record_lengths(&r, r.len() as u64 + 5).expect_err("lengths do not fill");
        assert!(message.contains("do not fill"), "{message}");
    }

    #[test]
    fn round_trip_and_every_flip_detected() {
        let r = record(b"user-key", &[0x5a; 100]);
        assert_eq!(
            decode_record(&r),
            Ok((b"user-key".as_slice(), [0x5a; 100].as_slice()))
        );
        for byte in 0..r.len() {
            for bit in 0..8 {
                let mut bad = r.clone();
                bad[byte] ^= 1 << bit;
                assert!(
                    decode_record(&bad).is_err(),
                    "flip at {byte}.{bit} undetected"
                );
            }
        }
        for len in 0..r.len() {
            assert!(decode_record(&r[..len]).is_err());
        }
        // Read in parts, as the blob cache does.
        let (k, v) = record_lengths(&r, r.len() as u64).expect("lengths");
        assert_eq!((k, v), (8, 100));
        let (header, rest) = r.split_at(RECORD_HEADER_LEN);
        let (key, value) = rest.split_at(k);
        assert_eq!(check_record_parts(header, key, value), Ok(()));
        assert!(record_lengths(&r, r.len() as u64 + 1).is_err());
        let mut bad = value.to_vec();
        bad[3] ^= 1;
        assert!(check_record_parts(header, key, &bad).is_err());
    }

    #[test]
    fn references_reject_nonsense() {
        assert!(BlobRef::decode(&[]).is_none());
        assert!(BlobRef::decode(&[1, 2]).is_none());
        assert!(
            BlobRef::decode(&[1, 2, 30]).is_none(),
            "offset inside the header"
        );
        assert!(
            BlobRef::decode(&[1, 20, 3]).is_none(),
            "shorter than a record header"
        );
        assert!(BlobRef::decode(&[1, 20, 30, 0]).is_none(), "trailing bytes");
        assert!(BlobRef::decode(&[1, 20, 30]).is_some());
        assert!(
            BlobRef::decode(&[1, 0x94, 0x00, 30]).is_none(),
            "overlong varint"
        );
        assert!(check_header(&encode_header(3), 3).expect("valid"));
        assert!(check_header(&encode_header(3), 4).is_err());
        let mut v2 = encode_header(3);
        v2[8] = 2;
        assert_eq!(check_header(&v2, 3), Ok(false));
        assert!(check_header(b"shaleLOG", 3).is_err());
    }
}
