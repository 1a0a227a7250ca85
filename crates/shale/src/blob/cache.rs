//! Keeps blob files open for reads, by file number, and reads separated values through them.
//!
//! Reads go through [`Fs::open_random`] (memory-mapped on `PosixFs`). A blob file may still be
//! growing (the active one of the write path): a reference past the end of the handle opened
//! earlier reopens the file once before it is judged out of range.
//!
//! Thread-safety: shared by every reader, the write path's recovery checks and compactions;
//! opening the same file twice at once is harmless (one copy wins the cache slot).

use std::path::PathBuf;
use std::sync::Arc;

use super::format::{
    check_header, check_record_parts, record_lengths, BlobRef, BLOB_HEADER_LEN, RECORD_HEADER_LEN,
};
use crate::env::{Fs, RandomAccessFile};
use crate::error::{Error, Result};
use crate::filename::blob_file_name;

/// Open blob files kept at most; each is one descriptor (and a mapping).
const MAX_OPEN_BLOB_FILES: usize = 64;

/// Open blob files by number.
pub(crate) struct BlobCache {
    dir: PathBuf,
    fs: Arc<dyn Fs>,
    files: quick_cache::sync::Cache<u64, Arc<dyn RandomAccessFile>>,
}

impl BlobCache {
    pub(crate) fn new(dir: PathBuf, fs: Arc<dyn Fs>) -> Self {
        BlobCache::with_capacity(dir, fs, MAX_OPEN_BLOB_FILES)
    }

    /// A cache keeping at most about `files` blob files open (for a caller with a descriptor
    /// budget of its own, such as repair).
    pub(crate) fn with_capacity(dir: PathBuf, fs: Arc<dyn Fs>, files: usize) -> Self {
        BlobCache {
            dir,
            fs,
            files: quick_cache::sync::Cache::new(files.max(1)),
        }
    }

    fn open(&self, number: u64) -> Result<Arc<dyn RandomAccessFile>> {
        self.files.get_or_insert_with(&number, || {
            let path = blob_file_name(&self.dir, number);
            let file = self.fs.open_random(&path)?;
            let mut header = [0u8; BLOB_HEADER_LEN];
            if file.size() < BLOB_HEADER_LEN as u64 {
                return Err(Error::corruption(
                    &path,
                    0,
                    "blob file shorter than its header",
                ));
            }
            file.read_exact_at(0, &mut header)?;
            match check_header(&header, number) {
                Ok(true) => Ok(file),
                Ok(false) => Err(Error::UnsupportedFormat {
                    path,
                    message: "blob file format version is not 1".into(),
                }),
                Err(m) => Err(Error::corruption(&path, 0, m)),
            }
        })
    }

    /// The value `r` points at, checked against its record's crc and, when given, the user key
    /// it must belong to.
    pub(crate) fn read(&self, user_key: Option<&[u8]>, r: &BlobRef) -> Result<Vec<u8>> {
        let path = || blob_file_name(&self.dir, r.file_number);
        let end = r.offset.saturating_add(r.length);
        let mut file = self.open(r.file_number)?;
        if file.size() < end {
            // The file may have grown since it was opened.
            self.files.remove(&r.file_number);
            file = self.open(r.file_number)?;
            if file.size() < end {
                return Err(Error::corruption(
                    path(),
                    r.offset,
                    format!(
                        "blob reference to {} bytes at offset {} is past the end of the {}-byte \
                         blob file",
                        r.length,
                        r.offset,
                        file.size()
                    ),
                ));
            }
        }
        // The header and key first, then the value straight into the buffer returned: a large
        // value is copied once.
        let corrupt = |m: String| Error::corruption(path(), r.offset, m);
        let mut header = [0u8; RECORD_HEADER_LEN];
        file.read_exact_at(r.offset, &mut header)?;
        let (key_len, value_len) = record_lengths(&header, r.length).map_err(corrupt)?;
        let mut key = vec![0u8; key_len];
        let key_at = r.offset + RECORD_HEADER_LEN as u64;
        file.read_exact_at(key_at, &mut key)?;
        let mut value = vec![0u8; value_len];
        file.read_exact_at(key_at + key_len as u64, &mut value)?;
        check_record_parts(&header, &key, &value).map_err(corrupt)?;
        if let Some(expected) = user_key {
            if key != expected {
                return Err(corrupt(format!(
                    "blob record holds key {:?}, but the reference belongs to {:?}",
                    String::from_utf8_lossy(&key),
                    String::from_utf8_lossy(expected)
                )));
            }
        }
        Ok(value)
    }

    /// Forgets blob file `number` (it is being deleted or was rewritten), returning the cache's
    /// handle to it so the caller chooses where the last reference goes.
    pub(crate) fn evict(&self, number: u64) -> Option<Arc<dyn RandomAccessFile>> {
        self.files.remove(&number).map(|(_, file)| file)
    }
}
