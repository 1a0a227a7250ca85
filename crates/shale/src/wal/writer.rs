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
    /// The fragments of the record being added (kept to reuse the allocation).
    fragments: Vec<Fragment>,
}

/// One fragment of a record: the zeros padding the block before it, its header, and the
/// payload bytes it carries.
struct Fragment {
    pad: usize,
    header: [u8; RECYCLABLE_HEADER_SIZE],
    start: usize,
    end: usize,
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
            fragments: Vec::new(),
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
    ///
    /// The whole framed record (padding, headers and payload pieces) goes to the file in one
    /// [`WritableFile::append_parts`], so a large record (a write group of a batched load)
    /// can reach the page cache in one system call.
    pub fn add_record(&mut self, payload: &[u8]) -> Result<()> {
        let header_size = self.header_size();
        if self.block_offset + header_size + payload.len() <= BLOCK_SIZE {
            // The common small record: one fragment, in the current block.
            let header = self.header(FragmentType::Full, payload);
            self.file.append_parts(&[&header[..header_size], payload])?;
            self.block_offset += header_size + payload.len();
            return Ok(());
        }
        let mut fragments = std::mem::take(&mut self.fragments);
        fragments.clear();
        let mut block_offset = self.block_offset;
        let mut start = 0;
        loop {
            let left_in_block = BLOCK_SIZE - block_offset;
            // Too small for a header: pad with zeros and start a new block.
            let pad = if left_in_block < header_size {
                block_offset = 0;
                left_in_block
            } else {
                0
            };
            let available = BLOCK_SIZE - block_offset - header_size;
            let end = start + (payload.len() - start).min(available);
            let last = end == payload.len();
            // Not `start == 0`: a record begun exactly a header before the block's end has an
            // empty first fragment, and the next one still starts at byte 0.
            let first = fragments.is_empty();
            let kind = match (first, last) {
                (true, true) => FragmentType::Full,
                (true, false) => FragmentType::First,
                (false, true) => FragmentType::Last,
                (false, false) => FragmentType::Middle,
            };
            fragments.push(Fragment {
                pad,
                header: self.header(kind, &payload[start..end]),
                start,
                end,
            });
            block_offset += header_size + (end - start);
            start = end;
            if last {
                break;
            }
        }
        const ZEROS: [u8; RECYCLABLE_HEADER_SIZE] = [0; RECYCLABLE_HEADER_SIZE];
        let mut parts: Vec<&[u8]> = Vec::with_capacity(fragments.len() * 3);
        for f in &fragments {
            parts.push(&ZEROS[..f.pad]);
            parts.push(&f.header[..header_size]);
            parts.push(&payload[f.start..f.end]);
        }
        let result = self.file.append_parts(&parts);
        self.fragments = fragments;
        result?;
        self.block_offset = block_offset;
        Ok(())
    }

    fn header_size(&self) -> usize {
        if self.recycle.is_some() {
            RECYCLABLE_HEADER_SIZE
        } else {
            HEADER_SIZE
        }
    }

    /// The header of a fragment of `kind` carrying `payload`.
    fn header(&self, kind: FragmentType, payload: &[u8]) -> [u8; RECYCLABLE_HEADER_SIZE] {
        debug_assert!(payload.len() <= BLOCK_SIZE - self.header_size());
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
        header
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
