//! The log format shared by the write-ahead log and the manifest: records cut into fragments
//! that never cross a 32 KiB block boundary, each fragment checksummed, so that a torn tail is
//! recognised and dropped while damage in the middle of a file is reported.
//!
//! ```text
//! block := fragment* trailer?          (trailer: < 7 zero bytes that cannot hold a header)
//! fragment := crc32c_masked: fixed32 | length: fixed16 | type: u8 | payload: length bytes
//! type := 1 FULL | 2 FIRST | 3 MIDDLE | 4 LAST
//! ```
//! The crc covers the type byte and the payload. The first record of every file is a header:
//! `magic "shaleLOG" | version: fixed32 | file kind: u8 | file number: fixed64`.
//! Format doc: `docs/format/wal.md`.
//!
//! Thread-safety: a [`LogWriter`] or [`LogReader`] belongs to one thread at a time.

mod reader;
mod writer;

pub use reader::{LogReader, TornTail};
pub use writer::LogWriter;

/// Size of a log block.
pub const BLOCK_SIZE: usize = 32 * 1024;
/// Bytes of a fragment header: checksum, length, type.
pub const HEADER_SIZE: usize = 7;
/// Magic bytes opening the header record of every log file.
pub const LOG_MAGIC: &[u8; 8] = b"shaleLOG";
/// The log format version written by this build. Version 2 WALs end, once sealed by a memtable
/// switch, with a seal record, and may carry sync markers (`docs/format/wal.md`); a manifest's
/// records are the same in both versions.
pub const LOG_FORMAT_VERSION: u32 = 2;
/// The oldest log format version this build reads.
pub const OLDEST_LOG_FORMAT_VERSION: u32 = 1;

/// Fragment types. Persisted: never renumber.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum FragmentType {
    /// A whole record.
    Full = 1,
    /// The first fragment of a record.
    First = 2,
    /// A middle fragment.
    Middle = 3,
    /// The last fragment.
    Last = 4,
}

impl FragmentType {
    fn from_u8(b: u8) -> Option<Self> {
        match b {
            1 => Some(FragmentType::Full),
            2 => Some(FragmentType::First),
            3 => Some(FragmentType::Middle),
            4 => Some(FragmentType::Last),
            _ => None,
        }
    }
}

/// What a log file holds, recorded in its header. Persisted: never renumber.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum LogKind {
    /// A write-ahead log: each record is an encoded write batch.
    Wal = 1,
    /// A manifest: each record is an encoded version edit.
    Manifest = 2,
}

impl LogKind {
    fn from_u8(b: u8) -> Option<Self> {
        match b {
            1 => Some(LogKind::Wal),
            2 => Some(LogKind::Manifest),
            _ => None,
        }
    }
}

fn fragment_crc(kind: u8, payload: &[u8]) -> u32 {
    crate::codec::mask_crc(crate::codec::crc32c_extend(
        crate::codec::crc32c(&[kind]),
        payload,
    ))
}

fn encode_header(kind: LogKind, file_number: u64) -> Vec<u8> {
    let mut h = Vec::with_capacity(21);
    h.extend_from_slice(LOG_MAGIC);
    crate::codec::put_fixed32(&mut h, LOG_FORMAT_VERSION);
    h.push(kind as u8);
    crate::codec::put_fixed64(&mut h, file_number);
    h
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::*;
    use crate::env::{Fs, MemFs};
    use crate::Error;

    fn write_records(fs: &MemFs, path: &Path, records: &[Vec<u8>]) {
        let file = fs.create(path).expect("create");
        let mut w = LogWriter::new(file, path.to_path_buf(), LogKind::Wal, 7).expect("writer");
        for r in records {
            w.add_record(r).expect("add");
        }
        w.sync().expect("sync");
        w.close().expect("close");
    }

    fn read_all(fs: &MemFs, path: &Path) -> (Result<Vec<Vec<u8>>, Error>, Option<TornTail>) {
        let file = fs.open_sequential(path).expect("open");
        let mut r = LogReader::new(file, path.to_path_buf(), LogKind::Wal, Some(7));
        let mut out = Vec::new();
        loop {
            match r.read_record() {
                Ok(Some(rec)) => out.push(rec),
                Ok(None) => return (Ok(out), r.torn_tail().cloned()),
                Err(e) => return (Err(e), None),
            }
        }
    }

    fn sample_records() -> Vec<Vec<u8>> {
        vec![
            b"small".to_vec(),
            vec![b'x'; BLOCK_SIZE - HEADER_SIZE * 2 - 21 - 5], // ends near a block boundary
            vec![b'y'; 3 * BLOCK_SIZE + 17],                   // spans four blocks
            Vec::new(),
            b"tail".to_vec(),
        ]
    }

    #[test]
    fn round_trip_across_blocks() {
        let fs = MemFs::new();
        let path = PathBuf::from("/log");
        let records = sample_records();
        write_records(&fs, &path, &records);
        let (got, torn) = read_all(&fs, &path);
        assert_eq!(got.expect("read"), records);
        assert!(torn.is_none());
    }

    #[test]
    fn every_truncation_is_a_clean_prefix() {
        let fs = MemFs::new();
        let path = PathBuf::from("/log");
        let records = sample_records();
        write_records(&fs, &path, &records);
        let full = fs.contents(&path).expect("contents");
        let mut cut = 0;
        while cut < full.len() {
            fs.set_contents(&path, full[..cut].to_vec());
            let (got, _) = read_all(&fs, &path);
            let got = got.unwrap_or_else(|e| panic!("truncation at {cut} gave {e}"));
            assert!(got.len() <= records.len());
            assert_eq!(got[..], records[..got.len()], "truncation at {cut}");
            cut += if cut < 200 { 1 } else { 97 };
        }
    }

    #[test]
    fn torn_tail_of_zeros_or_garbage_is_dropped() {
        let fs = MemFs::new();
        let path = PathBuf::from("/log");
        let records = vec![b"one".to_vec(), b"two".to_vec(), b"three".to_vec()];
        write_records(&fs, &path, &records);
        let full = fs.contents(&path).expect("contents");
        for tail in [vec![0u8; 40], vec![0xab; 13]] {
            let mut damaged = full[..full.len() - 6].to_vec(); // the last record is torn
            damaged.extend_from_slice(&tail);
            fs.set_contents(&path, damaged);
            let (got, torn) = read_all(&fs, &path);
            assert_eq!(got.expect("read"), records[..2].to_vec());
            assert!(torn.is_some(), "torn tail must be reported");
        }
    }

    #[test]
    fn damage_before_valid_data_is_corruption() {
        let fs = MemFs::new();
        let path = PathBuf::from("/log");
        let records: Vec<Vec<u8>> = (0..200).map(|i| vec![i as u8; 1000]).collect();
        write_records(&fs, &path, &records);
        let mut data = fs.contents(&path).expect("contents");
        data[100] ^= 0x01; // inside the first block; later blocks are intact
        fs.set_contents(&path, data);
        let (got, _) = read_all(&fs, &path);
        match got {
            Err(Error::Corruption {
                path: p, offset, ..
            }) => {
                assert_eq!(p, path);
                assert!(offset < BLOCK_SIZE as u64);
            }
            other => panic!("expected corruption, got {other:?}"),
        }
    }

    #[test]
    fn header_checks_kind_and_number() {
        let fs = MemFs::new();
        let path = PathBuf::from("/log");
        write_records(&fs, &path, &[b"a".to_vec()]);
        let file = fs.open_sequential(&path).expect("open");
        let mut r = LogReader::new(file, path.clone(), LogKind::Manifest, None);
        assert!(r.read_record().is_err(), "wrong kind must be refused");
        let file = fs.open_sequential(&path).expect("open");
        let mut r = LogReader::new(file, path.clone(), LogKind::Wal, Some(8));
        assert!(r.read_record().is_err(), "wrong number must be refused");
    }
}
