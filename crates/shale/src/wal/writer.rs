//! Appends records to a log file.

use std::path::PathBuf;

use super::{
    encode_header, fragment_crc, recyclable_fragment_crc, recycle_id, FragmentType, LogKind,
    BLOCK_SIZE, HEADER_SIZE, RECYCLABLE_HEADER_SIZE,
};
use crate::env::WritableFile;
use crate::error::Result;

/// Writes records in the log format. Records reach the OS on [`LogWriter::flush`] and become
/// durable on [`LogWriter::sync`].
pub struct LogWriter {
    file: Box<dyn WritableFile>,
    path: PathBuf,
    block_offset: usize,
    number: u64,
    /// The log number recyclable fragments carry; `None` for plain fragments (manifests).
    recycle: Option<u32>,
}

impl LogWriter {
    /// Starts a new log at the start of `file` and writes its header record. WALs are written
    /// in recyclable fragments, which name their log, so `file` may be a reused WAL still
    /// holding an earlier log's bytes past what this one writes; manifests in plain ones.
    pub fn new(
        file: Box<dyn WritableFile>,
        path: PathBuf,
        kind: LogKind,
        number: u64,
    ) -> Result<Self> {
        let recycle = (kind == LogKind::Wal).then(|| recycle_id(number));
        let mut w = LogWriter {
            file,
            path,
            block_offset: 0,
            number,
            recycle,
        };
        w.add_record(&encode_header(kind, number))?;
        Ok(w)
    }

    /// The file's path.
    pub fn path(&self) -> &PathBuf {
        &self.path
    }

    /// The file number recorded in the header.
    pub fn number(&self) -> u64 {
        self.number
    }

    /// Bytes written to the file so far.
    pub fn file_size(&self) -> u64 {
        self.file.len()
    }

    /// Appends one record, cut into fragments at block boundaries. Not yet flushed.
    pub fn add_record(&mut self, payload: &[u8]) -> Result<()> {
        let mut rest = payload;
        let mut first = true;
        loop {
            let header_size = self.header_size();
            let left_in_block = BLOCK_SIZE - self.block_offset;
            if left_in_block < header_size {
                // Too small for a header: pad with zeros and start a new block.
                if left_in_block > 0 {
                    self.file
                        .append(&[0u8; RECYCLABLE_HEADER_SIZE][..left_in_block])?;
                }
                self.block_offset = 0;
            }
            let available = BLOCK_SIZE - self.block_offset - header_size;
            let take = rest.len().min(available);
            let last = take == rest.len();
            let kind = match (first, last) {
                (true, true) => FragmentType::Full,
                (true, false) => FragmentType::First,
                (false, true) => FragmentType::Last,
                (false, false) => FragmentType::Middle,
            };
            self.emit(kind, &rest[..take])?;
            rest = &rest[take..];
            first = false;
            if last {
                return Ok(());
            }
        }
    }

    fn header_size(&self) -> usize {
        if self.recycle.is_some() {
            RECYCLABLE_HEADER_SIZE
        } else {
            HEADER_SIZE
        }
    }

    fn emit(&mut self, kind: FragmentType, payload: &[u8]) -> Result<()> {
        let header_size = self.header_size();
        debug_assert!(payload.len() <= BLOCK_SIZE - header_size);
        let mut header = [0u8; RECYCLABLE_HEADER_SIZE];
        let byte = kind.byte(self.recycle.is_some());
        let crc = match self.recycle {
            Some(log) => {
                header[7..11].copy_from_slice(&log.to_le_bytes());
                recyclable_fragment_crc(byte, log, payload)
            }
            None => fragment_crc(byte, payload),
        };
        header[..4].copy_from_slice(&crc.to_le_bytes());
        header[4..6].copy_from_slice(&(payload.len() as u16).to_le_bytes());
        header[6] = byte;
        self.file.append(&header[..header_size])?;
        self.file.append(payload)?;
        self.block_offset += header_size + payload.len();
        Ok(())
    }

    /// Hands written records to the OS: they survive a process crash.
    pub fn flush(&mut self) -> Result<()> {
        self.file.flush()
    }

    /// Makes written records durable: they survive a power loss.
    pub fn sync(&mut self) -> Result<()> {
        self.file.sync()
    }

    /// Flushes and closes the file.
    pub fn close(&mut self) -> Result<()> {
        self.file.close()
    }
}
