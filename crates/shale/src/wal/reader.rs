//! Reads records back from a log file, telling a torn tail (dropped) from damage in the middle
//! (reported as corruption).

use std::path::PathBuf;

use super::{
    fragment_crc, recyclable_fragment_crc, recycle_id, FragmentType, LogKind, BLOCK_SIZE,
    HEADER_SIZE, LOG_FORMAT_VERSION, LOG_MAGIC, OLDEST_LOG_FORMAT_VERSION, RECYCLABLE_HEADER_SIZE,
    RECYCLABLE_LOG_FORMAT_VERSION,
};
use crate::codec::{decode_fixed32, Decoder};
use crate::env::SequentialFile;
use crate::error::{Error, Result};

/// Where and why the readable part of a log ended early.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TornTail {
    /// Offset of the first byte that was dropped.
    pub offset: u64,
    /// Bytes dropped from there to the end of the file.
    pub dropped_bytes: u64,
    /// What was wrong there.
    pub reason: String,
}

/// Reads records written by [`super::LogWriter`].
pub struct LogReader {
    file: Box<dyn SequentialFile>,
    path: PathBuf,
    kind: LogKind,
    expected_number: Option<u64>,
    block: Vec<u8>,
    /// Offset in the file of `block[0]`.
    block_start: u64,
    /// Read position inside `block`.
    pos: usize,
    eof: bool,
    header_checked: bool,
    /// The header's format version, once checked.
    version: Option<u32>,
    torn: Option<TornTail>,
    record_offset: u64,
    finished: bool,
    /// Whether the file is framed in recyclable fragments: decided by its first fragment.
    recyclable: Option<bool>,
    /// The log number this file's recyclable fragments carry: from the expected file number,
    /// or else from the first fragment. Fragments naming another log are an earlier use's.
    own_log: Option<u32>,
}

/// An intact fragment read at a position: its type, recyclable or not, the log it names (0 for
/// a plain fragment), and its payload's range in the block.
struct Parsed {
    kind: FragmentType,
    recyclable: bool,
    log: u32,
    payload: std::ops::Range<usize>,
}

enum Fragment {
    Data(FragmentType, u64, Vec<u8>),
    End,
    Bad(u64, String),
}

impl LogReader {
    /// A reader for a log of `kind`; `expected_number` is checked against the header if given.
    pub fn new(
        file: Box<dyn SequentialFile>,
        path: PathBuf,
        kind: LogKind,
        expected_number: Option<u64>,
    ) -> Self {
        LogReader {
            file,
            path,
            kind,
            expected_number,
            block: Vec::with_capacity(BLOCK_SIZE),
            block_start: 0,
            pos: 0,
            eof: false,
            header_checked: false,
            version: None,
            torn: None,
            record_offset: 0,
            finished: false,
            recyclable: None,
            own_log: expected_number.map(recycle_id),
        }
    }

    /// The format version in the file's header, once a record has been read past it.
    pub fn format_version(&self) -> Option<u32> {
        self.version
    }

    /// Set once reading stopped at a torn tail.
    pub fn torn_tail(&self) -> Option<&TornTail> {
        self.torn.as_ref()
    }

    /// File offset of the start of the record last returned.
    pub fn last_record_offset(&self) -> u64 {
        self.record_offset
    }

    /// The next record; `Ok(None)` at the end of the file or at a torn tail (see
    /// [`LogReader::torn_tail`]); a corruption error for damage followed by intact data.
    pub fn read_record(&mut self) -> Result<Option<Vec<u8>>> {
        if !self.header_checked {
            self.header_checked = true;
            match self.read_physical_record()? {
                Some(header) => self.version = Some(self.check_header(&header)?),
                None => return Ok(None),
            }
        }
        self.read_physical_record()
    }

    /// Checks the header record; returns its format version.
    fn check_header(&self, header: &[u8]) -> Result<u32> {
        let bad = |m: String| Err(Error::corruption(&self.path, 0, m));
        let mut d = Decoder::new(header);
        if d.bytes(8) != Some(&LOG_MAGIC[..]) {
            return bad("log header magic missing: not a shale log file".into());
        }
        let version = d.fixed32().unwrap_or(0);
        if self.recyclable == Some(true)
            && (OLDEST_LOG_FORMAT_VERSION..RECYCLABLE_LOG_FORMAT_VERSION).contains(&version)
        {
            return bad(format!(
                "log format version {version} in recyclable fragments, which version \
                 {RECYCLABLE_LOG_FORMAT_VERSION} introduced"
            ));
        }
        if !(OLDEST_LOG_FORMAT_VERSION..=LOG_FORMAT_VERSION).contains(&version) {
            return Err(Error::UnsupportedFormat {
                path: self.path.clone(),
                message: format!(
                    "log format version {version}, this build reads \
                     {OLDEST_LOG_FORMAT_VERSION} to {LOG_FORMAT_VERSION}"
                ),
            });
        }

        let kind = d.u8().and_then(LogKind::from_u8);
        if kind != Some(self.kind) {
            return bad(format!(
                "log header says {kind:?}, expected {:?}",
                self.kind
            ));
        }
        let number = d.fixed64();
        if let (Some(expected), Some(found)) = (self.expected_number, number) {
            if expected != found {
                return bad(format!(
                    "log header names file {found}, expected {expected}"
                ));
            }
        }
        Ok(version)
    }

    /// Assembles the next logical record from fragments.
    fn read_physical_record(&mut self) -> Result<Option<Vec<u8>>> {
        if self.finished {
            return Ok(None);
        }
        let mut assembling: Option<(u64, Vec<u8>)> = None;
        loop {
            match self.next_fragment()? {
                Fragment::End => {
                    if let Some((start, _)) = assembling {
                        self.stop_torn(start, "record cut off by end of file");
                    }
                    self.finished = true;
                    return Ok(None);
                }
                Fragment::Bad(offset, reason) => {
                    let start = assembling.map(|(s, _)| s).unwrap_or(offset);
                    return self.bad_fragment(start, offset, reason);
                }
                Fragment::Data(kind, offset, payload) => match (kind, assembling.take()) {
                    (FragmentType::Full, None) => {
                        self.record_offset = offset;
                        return Ok(Some(payload));
                    }
                    (FragmentType::First, None) => assembling = Some((offset, payload)),
                    (FragmentType::Middle, Some((start, mut buf))) => {
                        buf.extend_from_slice(&payload);
                        assembling = Some((start, buf));
                    }
                    (FragmentType::Last, Some((start, mut buf))) => {
                        buf.extend_from_slice(&payload);
                        self.record_offset = start;
                        return Ok(Some(buf));
                    }
                    (kind, _) => {
                        return Err(Error::corruption(
                            &self.path,
                            offset,
                            format!("log fragment {kind:?} out of order"),
                        ))
                    }
                },
            }
        }
    }

    fn stop_torn(&mut self, offset: u64, reason: &str) {
        let end = self.block_start + self.block.len() as u64;
        self.torn = Some(TornTail {
            offset,
            dropped_bytes: end.saturating_sub(offset),
            reason: reason.to_string(),
        });
        self.finished = true;
    }

    /// A damaged fragment is a torn tail only if no intact fragment follows it: none later in
    /// its block (a torn write is the last thing in the file) and none starting a later block.
    /// `offset` is where the loss starts (the record being assembled, which may have begun in
    /// an earlier block), `fragment` the damaged fragment itself, where the search starts.
    fn bad_fragment(
        &mut self,
        offset: u64,
        fragment: u64,
        reason: String,
    ) -> Result<Option<Vec<u8>>> {
        if let Some(intact) = self.intact_fragment_later_in_block(fragment) {
            return Err(Error::corruption(
                &self.path,
                offset,
                format!("{reason}, followed by an intact record at offset {intact}"),
            ));
        }
        while self.load_block()? {
            if self.block_starts_with_valid_fragment() {
                return Err(Error::corruption(
                    &self.path,
                    offset,
                    format!(
                        "{reason}, followed by intact records at offset {}",
                        self.block_start
                    ),
                ));
            }
        }
        self.stop_torn(offset, &reason);
        Ok(None)
    }

    /// The file offset of the first intact fragment after the damaged one at `offset`, in the
    /// current block. The scan starts one byte past the damaged fragment, not at the end its
    /// length claims: a damaged length could claim past intact records and hide them. Bytes
    /// of the damaged fragment's own payload pass for a fragment only if they hold a whole
    /// fragment of this log with a matching checksum, and then the damage is reported as
    /// corruption, never dropped.
    fn intact_fragment_later_in_block(&self, offset: u64) -> Option<u64> {
        let start = usize::try_from(offset.checked_sub(self.block_start)?).ok()?;
        (start + 1..self.block.len())
            .find(|&p| self.valid_fragment_at(p))
            .map(|p| self.block_start + p as u64)
    }

    fn block_starts_with_valid_fragment(&self) -> bool {
        self.valid_fragment_at(0)
    }

    /// True if an intact fragment of this log (known type, length inside the block, matching
    /// checksum, and for a recyclable fragment this log's number) starts at `pos` of the
    /// current block. A fragment an earlier use of the file left is not this log's data.
    fn valid_fragment_at(&self, pos: usize) -> bool {
        match self.parse_at(pos) {
            Ok(f) if f.recyclable => {
                self.recyclable != Some(false) && self.own_log.is_none_or(|own| own == f.log)
            }
            Ok(_) => self.recyclable != Some(true),
            Err(_) => false,
        }
    }

    /// Parses the fragment at `pos` of the current block, checking its length and checksum;
    /// the error says what is wrong. Needs at least [`HEADER_SIZE`] bytes at `pos`.
    fn parse_at(&self, pos: usize) -> std::result::Result<Parsed, String> {
        let Some(header) = self.block.get(pos..pos + HEADER_SIZE) else {
            return Err("partial fragment header".into());
        };
        let crc = decode_fixed32(header).unwrap_or(0);
        let len = usize::from(u16::from_le_bytes([header[4], header[5]]));
        let kind_byte = header[6];
        if kind_byte == 0 && len == 0 && crc == 0 {
            return Err("zeroed space where a fragment was expected".into());
        }
        let Some((kind, recyclable)) = FragmentType::from_u8(kind_byte) else {
            return Err(format!("unknown fragment type {kind_byte}"));
        };
        let (header_size, log) = if recyclable {
            let Some(log) = self
                .block
                .get(pos + HEADER_SIZE..pos + RECYCLABLE_HEADER_SIZE)
            else {
                return Err("partial fragment header".into());
            };
            (RECYCLABLE_HEADER_SIZE, decode_fixed32(log).unwrap_or(0))
        } else {
            (HEADER_SIZE, 0)
        };
        let payload = pos + header_size..pos + header_size + len;
        let Some(bytes) = self.block.get(payload.clone()) else {
            return Err(format!("fragment length {len} runs past its block"));
        };
        let expected = if recyclable {
            recyclable_fragment_crc(kind_byte, log, bytes)
        } else {
            fragment_crc(kind_byte, bytes)
        };
        if crc != expected {
            return Err("fragment checksum mismatch".into());
        }
        Ok(Parsed {
            kind,
            recyclable,
            log,
            payload,
        })
    }

    /// Reads the next block into `self.block`; false at end of file.
    fn load_block(&mut self) -> Result<bool> {
        if self.eof {
            return Ok(false);
        }
        self.block_start += self.block.len() as u64;
        self.block.resize(BLOCK_SIZE, 0);
        let mut filled = 0;
        while filled < BLOCK_SIZE {
            let n = self.file.read(&mut self.block[filled..])?;
            if n == 0 {
                self.eof = true;
                break;
            }
            filled += n;
        }
        self.block.truncate(filled);
        self.pos = 0;
        Ok(filled > 0)
    }

    fn next_fragment(&mut self) -> Result<Fragment> {
        loop {
            // A block's last bytes that cannot hold a header are its zero trailer.
            let header_size = if self.recyclable == Some(true) {
                RECYCLABLE_HEADER_SIZE
            } else {
                HEADER_SIZE
            };
            let left = self.block.len() - self.pos;
            if left < header_size {
                let tail = &self.block[self.pos..];
                if self.eof && !tail.is_empty() && self.block.len() < BLOCK_SIZE {
                    // A partial header at the very end of the file.
                    let offset = self.block_start + self.pos as u64;
                    return Ok(Fragment::Bad(offset, "partial fragment header".into()));
                }
                if !self.load_block()? {
                    return Ok(Fragment::End);
                }
                continue;
            }
            let offset = self.block_start + self.pos as u64;
            let parsed = match self.parse_at(self.pos) {
                Ok(parsed) => parsed,
                Err(reason) => return Ok(Fragment::Bad(offset, reason)),
            };
            match (self.recyclable, parsed.recyclable) {
                (None, recyclable) => {
                    // The first fragment decides the framing of the whole file.
                    self.recyclable = Some(recyclable);
                    if recyclable && self.own_log.is_none() {
                        self.own_log = Some(parsed.log);
                    }
                }
                (Some(file), fragment) if file != fragment => {
                    let what = if fragment { "recyclable" } else { "plain" };
                    return Ok(Fragment::Bad(
                        offset,
                        format!("{what} fragment in a log framed otherwise"),
                    ));
                }
                _ => {}
            }
            if parsed.recyclable && self.own_log != Some(parsed.log) {
                // The file was reused: from here on it holds what an earlier log left.
                return Ok(Fragment::Bad(
                    offset,
                    format!(
                        "fragment of log {} (an earlier use of this file), not of this log",
                        parsed.log
                    ),
                ));
            }
            let payload = self.block[parsed.payload.clone()].to_vec();
            self.pos = parsed.payload.end;
            return Ok(Fragment::Data(parsed.kind, offset, payload));
        }
    }
}
