//! The log format shared by the write-ahead log and the manifest: records cut into fragments
//! that never cross a 32 KiB block boundary, each fragment checksummed, so that a torn tail is
//! recognised and dropped while damage in the middle of a file is reported.
//!
//! ```text
//! block := fragment* trailer?          (trailer: zero bytes too few to hold a header)
//! fragment := crc32c_masked: fixed32 | length: fixed16 | type: u8 | payload: length bytes
//!           | crc32c_masked: fixed32 | length: fixed16 | type: u8 | log: fixed32 | payload
//! type := 1 FULL | 2 FIRST | 3 MIDDLE | 4 LAST     (manifests)
//!       | 5 FULL | 6 FIRST | 7 MIDDLE | 8 LAST     (WALs: recyclable, naming their log)
//! ```
//! The crc covers the type byte, the log number of a recyclable fragment, and the payload.
//! Recyclable fragments let a WAL file be reused for a later log without clearing it: the
//! previous use's fragments name another log, so a reader stops at them. The first record of
//! every file is a header: `magic "shaleLOG" | version: fixed32 | file kind: u8 | file number:
//! fixed64`. Format doc: `docs/format/wal.md`.
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
/// Bytes of a recyclable fragment's header: checksum, length, type, log number.
pub const RECYCLABLE_HEADER_SIZE: usize = HEADER_SIZE + 4;
/// Magic bytes opening the header record of every log file.
pub const LOG_MAGIC: &[u8; 8] = b"shaleLOG";
/// The log format version written by this build. Version 2 WALs end, once sealed by a memtable
/// switch, with a seal record, and may carry sync markers; version 3 WALs are framed in
/// recyclable fragments (`docs/format/wal.md`). A manifest's records are the same in every
/// version; its header says 3 so that a build that cannot read version 3 WALs refuses the
/// database instead of taking their fragments for a torn tail.
pub const LOG_FORMAT_VERSION: u32 = 3;
/// The first log format version whose WALs are framed in recyclable fragments.
pub const RECYCLABLE_LOG_FORMAT_VERSION: u32 = 3;
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

/// A recyclable fragment's type byte is its [`FragmentType`] plus this.
const RECYCLABLE_TYPE_OFFSET: u8 = 4;

impl FragmentType {
    /// The type of a type byte and whether the fragment is recyclable (bytes 5 to 8).
    fn from_u8(b: u8) -> Option<(Self, bool)> {
        let (plain, recyclable) = match b {
            1..=4 => (b, false),
            5..=8 => (b - RECYCLABLE_TYPE_OFFSET, true),
            _ => return None,
        };
        let kind = match plain {
            1 => FragmentType::Full,
            2 => FragmentType::First,
            3 => FragmentType::Middle,
            _ => FragmentType::Last,
        };
        Some((kind, recyclable))
    }

    /// The stored type byte.
    fn byte(self, recyclable: bool) -> u8 {
        if recyclable {
            self as u8 + RECYCLABLE_TYPE_OFFSET
        } else {
            self as u8
        }
    }
}

/// The log number a recyclable fragment carries: the low 32 bits of the file number. Numbers
/// are never reused, so a fragment left by a file's earlier use names another log (until 2^32
/// more files have been numbered).
pub fn recycle_id(file_number: u64) -> u32 {
    file_number as u32
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
    crate::codec::mask_crc(crate::codec::crc32c_parts(&[&[kind], payload]))
}

/// The checksum of a recyclable fragment: over its type byte, its log number and its payload.
fn recyclable_fragment_crc(kind: u8, log: u32, payload: &[u8]) -> u32 {
    let mut prefix = [0u8; 5];
    prefix[0] = kind;
    prefix[1..].copy_from_slice(&log.to_le_bytes());
    crate::codec::mask_crc(crate::codec::crc32c_parts(&[&prefix, payload]))
}

/// What the first bytes of a file say about it, before any record is read: [`LogReader`]
/// reads a file whose start is damaged (or that is not a log at all) as a log torn at byte 0,
/// which tools that decide what to do with a file named like a log must not take for one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderSniff {
    /// The header record's payload begins with [`LOG_MAGIC`] (plain or recyclable framing).
    Log,
    /// Empty, or zeros only: a log created but never written, holding nothing.
    Blank,
    /// Anything else: not a shale log, or one whose first bytes are damaged.
    Foreign,
}

/// Reads the first bytes of `path` and says whether it starts like a shale log.
pub fn sniff_header(fs: &dyn crate::env::Fs, path: &std::path::Path) -> crate::Result<HeaderSniff> {
    let mut head = [0u8; RECYCLABLE_HEADER_SIZE + LOG_MAGIC.len()];
    let mut len = 0;
    let mut file = fs.open_sequential(path)?;
    while len < head.len() {
        match file.read(&mut head[len..])? {
            0 => break,
            n => len += n,
        }
    }
    let head = &head[..len];
    if head.iter().all(|&b| b == 0) {
        return Ok(HeaderSniff::Blank);
    }
    // The header record's payload starts after a plain or a recyclable fragment header.
    let holds_magic = |at: usize| head.get(at..at + LOG_MAGIC.len()) == Some(&LOG_MAGIC[..]);
    Ok(
        if holds_magic(HEADER_SIZE) || holds_magic(RECYCLABLE_HEADER_SIZE) {
            HeaderSniff::Log
        } else {
            HeaderSniff::Foreign
        },
    )
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

    /// Every record of WAL 7 at `path`, and the torn tail where reading stopped.
    fn read_all(fs: &MemFs, path: &Path) -> (Result<Vec<Vec<u8>>, Error>, Option<TornTail>) {
        read_log(fs, path, 7)
    }

    /// Every record of WAL `number` at `path`, and the torn tail where reading stopped.
    fn read_log(
        fs: &MemFs,
        path: &Path,
        number: u64,
    ) -> (Result<Vec<Vec<u8>>, Error>, Option<TornTail>) {
        let file = fs.open_sequential(path).expect("open");
        let mut r = LogReader::new(file, path.to_path_buf(), LogKind::Wal, Some(number));
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

    /// The framing of `records`, written by the plain loop the writer used before it framed
    /// a record into one call: per fragment, zero padding when the block has no room for a
    /// header, then the header, then the payload piece.
    fn reference_framing(records: &[Vec<u8>], recycle: Option<u32>) -> Vec<u8> {
        let header_size = if recycle.is_some() {
            RECYCLABLE_HEADER_SIZE
        } else {
            HEADER_SIZE
        };
        let mut out = Vec::new();
        let mut block_offset = 0;
        for record in records {
            let mut rest = &record[..];
            let mut first = true;
            loop {
                let left = BLOCK_SIZE - block_offset;
                if left < header_size {
                    out.extend(std::iter::repeat_n(0u8, left));
                    block_offset = 0;
                }
                let take = rest.len().min(BLOCK_SIZE - block_offset - header_size);
                let last = take == rest.len();
                let kind = match (first, last) {
                    (true, true) => FragmentType::Full,
                    (true, false) => FragmentType::First,
                    (false, true) => FragmentType::Last,
                    (false, false) => FragmentType::Middle,
                };
                let byte = kind.byte(recycle.is_some());
                let piece = &rest[..take];
                let crc = match recycle {
                    Some(log) => recyclable_fragment_crc(byte, log, piece),
                    None => fragment_crc(byte, piece),
                };
                out.extend_from_slice(&crc.to_le_bytes());
                out.extend_from_slice(&(take as u16).to_le_bytes());
                out.push(byte);
                if let Some(log) = recycle {
                    out.extend_from_slice(&log.to_le_bytes());
                }
                out.extend_from_slice(piece);
                block_offset += header_size + take;
                rest = &rest[take..];
                first = false;
                if last {
                    break;
                }
            }
        }
        out
    }

    /// Records begun at every distance from a block's end that matters (no room for a header,
    /// exactly a header's room, so an empty first fragment, and a few bytes more), in both
    /// fragment formats: the file holds exactly the reference framing, and reads back whole.
    #[test]
    fn framing_around_block_ends_matches_the_reference() {
        for (kind, header_size) in [
            (LogKind::Wal, RECYCLABLE_HEADER_SIZE),
            (LogKind::Manifest, HEADER_SIZE),
        ] {
            let recycle = (kind == LogKind::Wal).then(|| recycle_id(7));
            let head = encode_header(kind, 7);
            for left in [
                0,
                1,
                header_size - 1,
                header_size,
                header_size + 1,
                header_size + 2,
                64,
            ] {
                // A filler that leaves `left` bytes of the first block, then records of assorted
                // sizes, some across blocks.
                let filler = BLOCK_SIZE - left - 2 * header_size - head.len();
                let mut records = vec![vec![b'f'; filler]];
                for (i, len) in [1, 0, 50, BLOCK_SIZE + 5, 2 * BLOCK_SIZE - 3, 7]
                    .into_iter()
                    .enumerate()
                {
                    records.push(vec![b'a' + i as u8; len]);
                }
                let fs = MemFs::new();
                let path = PathBuf::from(format!("/log-{left}"));
                let file = fs.create(&path).expect("create");
                let mut w = LogWriter::new(file, path.clone(), kind, 7).expect("writer");
                for r in &records {
                    w.add_record(r).expect("add");
                }
                w.close().expect("close");
                let mut all = vec![head.clone()];
                all.extend(records.iter().cloned());
                let written = fs.contents(&path).expect("the log file");
                assert!(
                    written == reference_framing(&all, recycle),
                    "{kind:?}, {left} bytes left: framing differs"
                );
                let file = fs.open_sequential(&path).expect("open");
                let number = (kind == LogKind::Wal).then_some(7);
                let mut r = LogReader::new(file, path.clone(), kind, number);
                let mut got = Vec::new();
                while let Some(rec) = r.read_record().expect("read") {
                    got.push(rec);
                }
                assert!(
                    got == records,
                    "{kind:?}, {left} bytes left: records differ"
                );
            }
        }
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

    /// Damage to the LAST fragment of a record that began in an earlier block, followed by
    /// intact records in the same block: the search for intact data must start at the damaged
    /// fragment, not at the record's start (a block before), or the intact records after it
    /// are dropped as a torn tail.
    #[test]
    fn damage_to_a_continuation_before_intact_records_in_its_block_is_corruption() {
        let fs = MemFs::new();
        let path = PathBuf::from("/log");
        let mut records = vec![vec![7u8; BLOCK_SIZE + 100]];
        records.extend((0..5).map(|i| vec![i as u8; 50]));
        write_records(&fs, &path, &records);
        let (got, torn) = read_all(&fs, &path);
        assert_eq!(got.expect("intact log"), records);
        assert!(torn.is_none());
        let mut data = fs.contents(&path).expect("contents");
        // The LAST fragment's payload, just past its header at the second block's start.
        data[BLOCK_SIZE + RECYCLABLE_HEADER_SIZE + 20] ^= 0x01;
        fs.set_contents(&path, data);
        let (got, _) = read_all(&fs, &path);
        match got {
            Err(Error::Corruption { message, .. }) => {
                assert!(
                    message.contains("followed by an intact record"),
                    "{message}"
                )
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
        // A WAL's fragments name their log: a file holding log 7 read as log 8 is a reused
        // file whose new header never reached the disk, so it holds no record of log 8.
        let file = fs.open_sequential(&path).expect("open");
        let mut r = LogReader::new(file, path.clone(), LogKind::Wal, Some(8));
        assert_eq!(r.read_record().expect("read"), None);
        let torn = r.torn_tail().expect("reported as a torn tail");
        assert_eq!(torn.offset, 0);
        assert!(torn.reason.contains("log 7"), "{}", torn.reason);
        // A manifest (plain fragments) is still refused when its header names another file.
        let file = fs.create(&path).expect("create");
        let mut w = LogWriter::new(file, path.clone(), LogKind::Manifest, 7).expect("writer");
        w.add_record(b"edit").expect("add");
        w.close().expect("close");
        let file = fs.open_sequential(&path).expect("open");
        let mut r = LogReader::new(file, path.clone(), LogKind::Manifest, Some(8));
        assert!(r.read_record().is_err(), "wrong number must be refused");
    }

    /// Writes log `number` over the start of the file at `path`, as a reused WAL does, leaving
    /// whatever the earlier log wrote past it; `close` trims those bytes off.
    fn write_reused(fs: &MemFs, path: &Path, number: u64, records: &[Vec<u8>], close: bool) {
        let old = path.with_extension("old");
        fs.rename(path, &old).expect("rename");
        let file = fs.reuse_log(&old, path).expect("reuse");
        let mut w = LogWriter::new(file, path.to_path_buf(), LogKind::Wal, number).expect("w");
        for r in records {
            w.add_record(r).expect("add");
        }
        if close {
            w.close().expect("close");
        }
    }

    /// `n` records of 100 to 999 bytes.
    fn many_records(tag: u8, n: usize) -> Vec<Vec<u8>> {
        (0..n)
            .map(|i| vec![tag.wrapping_add(i as u8); 100 + i % 900])
            .collect()
    }

    #[test]
    fn reused_file_reads_only_the_new_log() {
        let fs = MemFs::new();
        let path = PathBuf::from("/log");
        let old = many_records(1, 300); // about 2.3 blocks
        write_records(&fs, &path, &old);
        let new = many_records(9, 40);
        write_reused(&fs, &path, 11, &new, false);
        // Not closed (a process crash): the rest of the file is log 7's, a torn tail of log 11.
        let (got, torn) = read_log(&fs, &path, 11);
        assert_eq!(got.expect("read"), new);
        let torn = torn.expect("the earlier log's bytes are a torn tail");
        assert!(torn.reason.contains("log 7"), "{}", torn.reason);
        // Closed: trimmed to the new log, which ends cleanly.
        write_reused(&fs, &path, 12, &new, true);
        let (got, torn) = read_log(&fs, &path, 12);
        assert_eq!(got.expect("read"), new);
        assert!(torn.is_none());
        // The new log ends exactly where an earlier record starts (same header size, same
        // first record): that record is intact, checksum and all, but names log 7.
        write_records(&fs, &path, &old);
        write_reused(&fs, &path, 14, &old[..1], false);
        let (got, torn) = read_log(&fs, &path, 14);
        assert_eq!(got.expect("read"), old[..1].to_vec());
        assert!(torn.expect("torn tail").reason.contains("log 7"));
        // Every cut of an unclosed reused file is a clean prefix of the new log.
        write_records(&fs, &path, &old);
        write_reused(&fs, &path, 13, &new, false);
        let full = fs.contents(&path).expect("contents");
        let mut cut = 0;
        while cut < full.len() {
            fs.set_contents(&path, full[..cut].to_vec());
            let (got, _) = read_log(&fs, &path, 13);
            let got = got.unwrap_or_else(|e| panic!("cut at {cut} gave {e}"));
            assert_eq!(got[..], new[..got.len()], "cut at {cut}");
            cut += 331;
        }
    }

    #[test]
    fn damage_in_a_reused_file_is_told_from_the_earlier_log() {
        let fs = MemFs::new();
        let path = PathBuf::from("/log");
        write_records(&fs, &path, &many_records(1, 900)); // about 15 blocks
        let new = many_records(9, 400); // about 4 blocks
        write_reused(&fs, &path, 11, &new, false);
        let pristine = fs.contents(&path).expect("contents");
        // Damage in the new log's last record, followed only by the earlier log: a torn tail.
        let last = {
            let file = fs.open_sequential(&path).expect("open");
            let mut r = LogReader::new(file, path.clone(), LogKind::Wal, Some(11));
            let mut at = 0;
            while r.read_record().expect("read").is_some() {
                at = r.last_record_offset() as usize;
            }
            at
        };
        let last_len = new.last().map_or(0, Vec::len) + RECYCLABLE_HEADER_SIZE;
        assert!(
            last % BLOCK_SIZE + last_len <= BLOCK_SIZE,
            "the last record is one fragment"
        );
        let mut data = pristine.clone();
        data[last + RECYCLABLE_HEADER_SIZE + 40] ^= 1;
        fs.set_contents(&path, data);
        let (got, torn) = read_log(&fs, &path, 11);
        let got = got.expect("a torn tail, not corruption");
        assert!(
            got.len() < new.len() && got[..] == new[..got.len()],
            "{} of {}: {torn:?}",
            got.len(),
            new.len()
        );
        assert!(torn.is_some());
        // Damage in the first block, followed by intact blocks of the new log: corruption.
        let mut data = pristine;
        data[100] ^= 1;
        fs.set_contents(&path, data);
        let (got, _) = read_log(&fs, &path, 11);
        assert!(matches!(got, Err(Error::Corruption { .. })), "{got:?}");
    }
}
