//! [`Fs`] on the operating system's files: buffered appends, `pread` for random reads,
//! `fdatasync` for durability and `flock` for the database lock.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::os::unix::fs::MetadataExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use super::{FileLock, Fs, RandomAccessFile, SequentialFile, WritableFile};
use crate::error::{Error, Result};

/// Appends are gathered in a buffer of this size before a `write` system call.
const WRITE_BUFFER_BYTES: usize = 64 * 1024;

/// A huge page (x86-64's, and arm64's with 4 KiB pages): a table's page cache is laid out in
/// aligned regions of this size ([`WritableFile::prefer_huge_pages`]).
const HUGE_REGION_BYTES: u64 = 2 << 20;

/// A blob file's page cache is laid out in aligned regions of this size
/// ([`WritableFile::prefer_large_folios`]): large enough that a value's pages come from a few
/// folios, small enough that the kernel finds them without compacting memory (2 MiB regions
/// made the first values of a fresh file up to ten times slower).
const LARGE_FOLIO_REGION_BYTES: u64 = 256 << 10;

/// A private anonymous map of one huge region that is never written: every page of it reads
/// as the kernel's shared zero page, so it costs address space, not memory. `None` if the map
/// failed.
fn huge_region_zeros() -> Option<&'static [u8]> {
    static ZEROS: std::sync::OnceLock<Option<memmap2::Mmap>> = std::sync::OnceLock::new();
    ZEROS
        .get_or_init(|| {
            memmap2::MmapOptions::new()
                .len(HUGE_REGION_BYTES as usize)
                .map_anon()
                .and_then(memmap2::MmapMut::make_read_only)
                .ok()
        })
        .as_ref()
        .map(|m| &m[..])
}

/// The real filesystem.
///
/// Clones share the maps of closed logs kept for [`Fs::reuse_log`] (see `RetiredLogs`).
#[derive(Debug, Clone)]
pub struct PosixFs {
    mmap_reads: bool,
    retired: Arc<RetiredLogs>,
}

impl Default for PosixFs {
    fn default() -> Self {
        PosixFs {
            mmap_reads: true,
            retired: Arc::default(),
        }
    }
}

impl PosixFs {
    /// The real filesystem, reading tables through memory maps (as LevelDB does on 64-bit
    /// systems): a read is a copy from the page cache, with no system call.
    pub fn new() -> Self {
        PosixFs::default()
    }

    /// The real filesystem, reading with `pread` only (for files another process may truncate,
    /// where a mapped read past the new end would fault).
    pub fn without_mmap() -> Self {
        PosixFs {
            mmap_reads: false,
            retired: Arc::default(),
        }
    }
}

/// Closed memory-mapped logs whose map (and descriptor) is kept, so that a later
/// [`Fs::reuse_log`] of the same file writes through page table entries that are already
/// there.
///
/// Why: a fresh map of a reused log faults every page in again, and on ext4 each fault of a
/// shared writable map also runs `page_mkwrite`; that populating was a fifth of the writer's
/// time in a batched fill even over a reused file. Through the kept map, pages the old log
/// dirtied that writeback has not cleaned since are written with no fault at all.
///
/// Only the newest [`MAX_RETIRED_LOGS`] are kept. Every operation of the owning [`PosixFs`]
/// that removes, replaces or recreates a path drops its entry, so a deleted log's blocks are
/// freed as before; a file deleted by anything else stays allocated until its entry is evicted
/// or the file system value is dropped.
#[derive(Default)]
struct RetiredLogs {
    logs: Mutex<VecDeque<RetiredLog>>,
}

/// A closed log's path, descriptor and map (trimmed to the log's bytes on disk).
struct RetiredLog {
    path: PathBuf,
    file: File,
    map: memmap2::MmapMut,
}

/// Closed logs whose maps are kept at most: a database keeps one log for reuse by default
/// (`Options::recycle_log_file_num`), and a few databases may share a file system value.
const MAX_RETIRED_LOGS: usize = 4;

impl std::fmt::Debug for RetiredLogs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RetiredLogs")
            .field("kept", &self.logs.lock().len())
            .finish()
    }
}

impl RetiredLogs {
    fn keep(&self, log: RetiredLog) {
        let evicted = {
            let mut logs = self.logs.lock();
            let evicted = if logs.len() >= MAX_RETIRED_LOGS {
                logs.pop_front()
            } else {
                None
            };
            logs.push_back(log);
            evicted
        };
        // Unmapped outside the lock.
        drop(evicted);
    }

    /// Takes the kept log of `path` out, if there is one.
    fn take(&self, path: &Path) -> Option<RetiredLog> {
        let mut logs = self.logs.lock();
        let at = logs.iter().position(|l| l.path == path)?;
        logs.remove(at)
    }

    /// Drops the kept log of `path`, if any: the path is about to name something else.
    fn forget(&self, path: &Path) {
        drop(self.take(path));
    }
}

impl PosixFs {
    /// Paths of the closed logs whose maps are kept, oldest first.
    #[cfg(test)]
    pub(crate) fn kept_logs(&self) -> Vec<PathBuf> {
        self.retired
            .logs
            .lock()
            .iter()
            .map(|l| l.path.clone())
            .collect()
    }
}

/// Writes all of `first` then all of `second` with as few `writev` calls as the kernel allows.
fn write_all_vectored(file: &mut File, first: &[u8], second: &[u8]) -> std::io::Result<()> {
    let (mut first, mut second) = (first, second);
    while !first.is_empty() || !second.is_empty() {
        let parts = [std::io::IoSlice::new(first), std::io::IoSlice::new(second)];
        let n = match file.write_vectored(&parts) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let from_first = n.min(first.len());
        first = first.get(from_first..).unwrap_or(&[]);
        second = second.get(n - from_first..).unwrap_or(&[]);
    }
    Ok(())
}

struct PosixWritable {
    path: PathBuf,
    file: Option<File>,
    buffer: Vec<u8>,
    len: u64,
    /// Space was reserved past the end (`reserve`); `close` gives back what is left.
    reserved: bool,
    /// Bytes from the start whose writeback to the device has been started.
    written_back: u64,
    /// Bytes written between starts of their writeback; 0: never started
    /// ([`WritableFile::write_back_every`]).
    writeback_window: u64,
    /// Reads of this file system go through memory maps, which huge pages would help.
    mapped_reads: bool,
    /// Each aligned region of this many bytes is written with zeros before its first byte
    /// ([`PosixWritable::fill_regions_to`]); 0: none. At most [`HUGE_REGION_BYTES`].
    region_bytes: u64,
    /// The zeros past the appended bytes stay, and the file never shrinks: it is read while
    /// it is written, through maps that must never reach past its end (a blob file).
    /// Otherwise a flush, a sync and the close cut them off ([`PosixWritable::trim_zero_fill`]).
    keep_zeros: bool,
    /// End of the regions written with zeros so far: a multiple of `region_bytes`, at
    /// or past the bytes handed to the system (everything from those bytes to here is zeros).
    zero_filled_to: u64,
    /// The file may extend past `len` with zeros, until [`PosixWritable::trim_zero_fill`] (for
    /// good with `keep_zeros`).
    zeros_past_len: bool,
}

impl PosixWritable {
    /// An empty file's writer; `mapped_reads`: the file system reads through memory maps.
    fn new(path: &Path, file: File, mapped_reads: bool) -> PosixWritable {
        PosixWritable {
            path: path.to_path_buf(),
            file: Some(file),
            buffer: Vec::with_capacity(WRITE_BUFFER_BYTES),
            len: 0,
            reserved: false,
            written_back: 0,
            writeback_window: 0,
            mapped_reads,
            region_bytes: 0,
            keep_zeros: false,
            zero_filled_to: 0,
            zeros_past_len: false,
        }
    }

    fn file(&mut self, op: &'static str) -> Result<&mut File> {
        match self.file.as_mut() {
            Some(f) => Ok(f),
            None => Err(Error::io(
                op,
                &self.path,
                std::io::Error::other("file already closed"),
            )),
        }
    }

    /// Starts the device writeback of the whole pages written since the last start, once
    /// there are `writeback_window` bytes of them (`sync_file_range` with
    /// `SYNC_FILE_RANGE_WRITE`: it queues the writes and returns without waiting for them,
    /// unless the device's queue is full, and promises nothing about durability). Only files
    /// asked to ([`WritableFile::write_back_every`]: tables) do it.
    ///
    /// Why: a table is synced once, when it is complete, and that sync then waited for all of
    /// its megabytes to reach the device, on the flush's critical path. Written back as it
    /// is built, the final sync has at most a window left to wait for. Not for blob files:
    /// they are written on the writers' path, where a full device queue would stall writes
    /// (fill100K ran 25-35% slower with them written back so). The page the next append will
    /// extend is left out: on devices that keep pages stable while they are written,
    /// changing a page under writeback waits for it.
    #[cfg(target_os = "linux")]
    fn start_writeback(&mut self) {
        if self.writeback_window == 0 {
            return;
        }
        // A large folio is written back whole: one still being filled would be written twice.
        let unit = self.region_bytes.max(page_size());
        let written = (self.len - self.buffer.len() as u64) / unit * unit;
        if written.saturating_sub(self.written_back) < self.writeback_window {
            return;
        }
        if let (Some(file), Ok(offset), Ok(len)) = (
            self.file.as_ref(),
            libc::off64_t::try_from(self.written_back),
            libc::off64_t::try_from(written - self.written_back),
        ) {
            // SAFETY: sync_file_range is called on a valid, open descriptor owned by `file`;
            // it reads no memory of ours. A failure only leaves the writeback to the sync.
            unsafe {
                libc::sync_file_range(file.as_raw_fd(), offset, len, libc::SYNC_FILE_RANGE_WRITE);
            }
        }
        self.written_back = written;
    }

    #[cfg(not(target_os = "linux"))]
    fn start_writeback(&mut self) {}

    /// Before the bytes up to `end` are handed to the system: writes zeros over each region
    /// (`region_bytes`, aligned) they reach that has none yet, in one `pwrite` of the whole
    /// region.
    ///
    /// Why: the page cache sizes a folio by the write that creates it. A region created by one
    /// aligned write of its full size becomes one folio (on kernels whose file system keeps
    /// large folios in its page cache, such as ext4 since Linux 6.16 and XFS), and the writes
    /// that follow only fill it in. A table's 2 MiB regions let a memory map of the finished
    /// table use one huge-page entry each: random lookups through such a map ran about 10%
    /// faster (readrandom on a compacted 1M-key database). A blob file's 256 KiB regions spare
    /// the writer the page cache's work per 4 KiB page: 100 KB values went in 18.5 us each
    /// instead of 22.8 (a C timing of 3,000 `pwritev`s into a new file, three runs each). The
    /// zeros cost a copy, not memory ([`huge_region_zeros`]); on other kernels that copy is
    /// all they do.
    fn fill_regions_to(&mut self, end: u64) -> Result<()> {
        while self.region_bytes > 0 && self.zero_filled_to < end {
            let Some(zeros) = huge_region_zeros().and_then(|z| z.get(..self.region_bytes as usize))
            else {
                self.region_bytes = 0;
                break;
            };
            let at = self.zero_filled_to;
            let path = self.path.clone();
            self.file("write")?
                .write_all_at(zeros, at)
                .map_err(|e| Error::io("write", &path, e))?;
            self.zero_filled_to = at + self.region_bytes;
            self.zeros_past_len = true;
        }
        Ok(())
    }

    /// Cuts the zeros past the appended bytes off the file, so that its size is `len` again
    /// (before a flush, a sync and the close, unless `keep_zeros`; the buffer is written out
    /// first). The region the file now ends in is not filled again.
    fn trim_zero_fill(&mut self) -> Result<()> {
        if !self.zeros_past_len || self.keep_zeros {
            return Ok(());
        }
        let len = self.len;
        let path = self.path.clone();
        self.file("truncate")?
            .set_len(len)
            .map_err(|e| Error::io("truncate", &path, e))?;
        let region = self.region_bytes.max(1);
        self.zero_filled_to = len.div_ceil(region) * region;
        self.zeros_past_len = false;
        Ok(())
    }

    fn write_buffer(&mut self) -> Result<()> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        self.fill_regions_to(self.len)?;
        let buffer = std::mem::take(&mut self.buffer);
        let result = self.file("write")?.write_all(&buffer);
        self.buffer = buffer;
        self.buffer.clear();
        result.map_err(|e| Error::io("write", &self.path, e))
    }
}

impl WritableFile for PosixWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        if data.len() >= WRITE_BUFFER_BYTES && !self.buffer.is_empty() {
            // A large append after small ones (a blob record's header, then its value): one
            // system call for both.
            self.fill_regions_to(self.len + data.len() as u64)?;
            let buffer = std::mem::take(&mut self.buffer);
            let result = write_all_vectored(self.file("write")?, &buffer, data);
            self.buffer = buffer;
            self.buffer.clear();
            result.map_err(|e| Error::io("write", &self.path, e))?;
            self.len += data.len() as u64;
            self.start_writeback();
            return Ok(());
        }
        if self.buffer.len() + data.len() > WRITE_BUFFER_BYTES {
            self.write_buffer()?;
        }
        if data.len() >= WRITE_BUFFER_BYTES {
            self.fill_regions_to(self.len + data.len() as u64)?;
            let path = self.path.clone();
            self.file("write")?
                .write_all(data)
                .map_err(|e| Error::io("write", &path, e))?;
        } else {
            self.buffer.extend_from_slice(data);
        }
        self.len += data.len() as u64;
        self.start_writeback();
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        self.write_buffer()?;
        self.trim_zero_fill()
    }

    fn write_back_every(&mut self, bytes: u64) {
        self.writeback_window = bytes;
    }

    fn prefer_huge_pages(&mut self) {
        // Regions are counted from the start of the file, so only an empty file takes them.
        if cfg!(target_os = "linux") && self.mapped_reads && self.len == 0 {
            self.region_bytes = HUGE_REGION_BYTES;
        }
    }

    fn prefer_large_folios(&mut self) {
        // Regions are counted from the start of the file, so only an empty file takes them.
        if cfg!(target_os = "linux") && self.len == 0 {
            self.region_bytes = LARGE_FOLIO_REGION_BYTES;
            self.keep_zeros = true;
        }
    }

    fn sync(&mut self) -> Result<()> {
        self.write_buffer()?;
        self.trim_zero_fill()?;
        let path = self.path.clone();
        self.file("sync")?
            .sync_data()
            .map_err(|e| Error::io("sync", &path, e))
    }

    fn close(&mut self) -> Result<()> {
        if self.file.is_none() {
            return Ok(());
        }
        // Without the zeros cut off, the file would not end in what was appended (unless it
        // keeps them: then it ends at the end of the last region filled).
        let result = self.write_buffer().and_then(|()| self.trim_zero_fill());
        if self.reserved && result.is_ok() {
            if let Some(file) = self.file.as_ref() {
                // A file that keeps its zeros keeps the size it has, which a failed write of
                // zeros may have left anywhere past `len`; without that size, the space stays
                // reserved rather than risk shrinking the file.
                let size = if self.keep_zeros {
                    file.metadata().ok().map(|m| m.len().max(self.len))
                } else {
                    Some(self.len)
                };
                // Setting the size it already has frees the blocks reserved past the end. The
                // contents and size are unchanged either way, so a failure costs space only.
                if let Some(size) = size {
                    let _ = file.set_len(size);
                }
            }
        }
        self.file = None;
        result
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn reserve(&mut self, bytes: u64) {
        let offset = self.len;
        let Ok(file) = self.file("reserve") else {
            return;
        };
        // A failure only means the appends allocate as they go.
        if allocate_keeping_size(file, offset, bytes) {
            self.reserved = true;
        }
    }
}

/// The size of a memory page: `madvise` ranges must start on a page boundary (4 KiB on x86-64,
/// up to 64 KiB on some arm64 kernels, where a 4 KiB-aligned range is refused).
fn page_size() -> u64 {
    static PAGE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *PAGE.get_or_init(|| {
        // SAFETY: sysconf reads no memory of ours.
        let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        u64::try_from(n).ok().filter(|&n| n > 0).unwrap_or(4096)
    })
}

/// `fallocate(2)` of `len` bytes of `file` at `offset` with `mode` (0, or flags such as
/// `FALLOC_FL_KEEP_SIZE`).
fn fallocate(file: &File, mode: libc::c_int, offset: u64, len: u64) -> std::io::Result<()> {
    let (Ok(offset), Ok(len)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else {
        return Err(std::io::Error::from_raw_os_error(libc::EFBIG));
    };
    // SAFETY: fallocate is called on a valid, open descriptor owned by `file`; it reads no memory
    // of ours.
    if unsafe { libc::fallocate(file.as_raw_fd(), mode, offset, len) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Allocates the blocks of `len` bytes of `file` at `offset` without changing its size
/// (`FALLOC_FL_KEEP_SIZE`): readers never see blocks past the size, and blocks within it that
/// were holes keep reading as zeros. Returns whether it worked; failing is harmless, as writes
/// then allocate the blocks as they go.
fn allocate_keeping_size(file: &File, offset: u64, len: u64) -> bool {
    fallocate(file, libc::FALLOC_FL_KEEP_SIZE, offset, len).is_ok()
}

/// Allocates the blocks of `len` bytes of `file` at `offset` and extends the file to cover
/// them if it is shorter (no flags); bytes that were not there read as zeros.
fn extend_allocated(file: &File, offset: u64, len: u64) -> std::io::Result<()> {
    fallocate(file, 0, offset, len)
}

impl Drop for PosixWritable {
    fn drop(&mut self) {
        // Best effort: an explicit close reports errors; a drop cannot.
        let _ = self.close();
    }
}

/// Bytes a memory-mapped log grows by at a time.
const LOG_CHUNK_BYTES: u64 = 4 << 20;
/// Bytes of a mapped log made writable ahead of the appends in one `madvise` call.
const LOG_POPULATE_BYTES: u64 = 1 << 20;

/// Bytes past a mapped log's end prefetched after each append: about two small records.
const WRITE_AHEAD: usize = 256;

/// A mapped log's record at least this large goes to the file in one `pwritev` instead of
/// through the map. Why: each page a record fills through the map first takes a write fault
/// (a populate window's, or its own), and a reused log's pages, cleaned by writeback since
/// the old log, go through the file system's `page_mkwrite` again; a `write` copies into the
/// same page cache pages with one call for the whole record. Small records stay on the map,
/// where they cost no system call at all.
///
/// An append right after a sync goes by `pwritev` too, whatever its size: the sync's
/// writeback left the log's last page write-protected, and a store through the map would take
/// a fault into `page_mkwrite` first. One 135-byte record synced per write into a preallocated
/// file (Python, 12 alternated rounds of 500): a copy through the map then `fdatasync` took a
/// median 194 us, `pwrite` then `fdatasync` 176 us. A system call is nothing beside a sync.
const LOG_DIRECT_WRITE_BYTES: usize = 32 << 10;

/// Writes `parts`, one after another, at `offset` of `file`, retrying short writes.
fn write_all_at(file: &File, mut offset: u64, parts: &[&[u8]]) -> std::io::Result<()> {
    // At most this many parts per call (Linux's `IOV_MAX` is 1024).
    const MAX_PARTS: usize = 512;
    let mut parts: Vec<&[u8]> = parts.iter().copied().filter(|p| !p.is_empty()).collect();
    let mut first = 0;
    while first < parts.len() {
        let batch = &parts[first..parts.len().min(first + MAX_PARTS)];
        let iov: Vec<libc::iovec> = batch
            .iter()
            .map(|p| libc::iovec {
                iov_base: p.as_ptr() as *mut libc::c_void,
                iov_len: p.len(),
            })
            .collect();
        let Ok(at) = libc::off_t::try_from(offset) else {
            return Err(std::io::Error::from_raw_os_error(libc::EFBIG));
        };
        // SAFETY: every iovec points into a live slice of `parts` of the given length, which
        // the kernel only reads; the descriptor is owned by `file`.
        let n =
            unsafe { libc::pwritev(file.as_raw_fd(), iov.as_ptr(), iov.len() as libc::c_int, at) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        // Skip the parts written, and the written head of a part cut short.
        let mut n = n as usize;
        offset += n as u64;
        while n > 0 {
            let Some(part) = parts.get_mut(first) else {
                break;
            };
            if n >= part.len() {
                n -= part.len();
                first += 1;
            } else {
                *part = &part[n..];
                n = 0;
            }
        }
    }
    Ok(())
}

/// A log written through a shared memory map: an append is a copy into the page cache, which
/// survives a process crash like a `write` does, without a system call per record. The map
/// covers a chunk of the file's address range; the file itself is extended, and its blocks
/// allocated, one populate window at a time ahead of the appends; `close` trims it to the
/// bytes written. On Linux an append of [`LOG_DIRECT_WRITE_BYTES`] or more goes to the file by
/// `pwritev` instead and does not touch the map; it extends the file to its own end. So does
/// every append right after a sync, whatever its size, but unless the file already covers the
/// record it first extends the file (blocks allocated) a populate window past the record's end,
/// never past the map, so the next sync commits no new size.
///
/// Invariant: nothing reads or writes the map at or past `size` (there the file has no bytes,
/// and a touch would fault with `SIGBUS`); copies into the map stay below `populated <= size`,
/// or, when the map is not populated ahead, the file is extended to the whole map first.
struct PosixMappedLog {
    path: PathBuf,
    file: Option<File>,
    map: Option<memmap2::MmapMut>,
    len: u64,
    /// Bytes the map covers.
    capacity: u64,
    /// The file's size.
    size: u64,
    /// Bytes known to be durable.
    synced: u64,
    /// Bytes from the start of the map already faulted in writable; `u64::MAX` once the
    /// kernel refused to populate, so appends take their page faults as they come.
    populated: u64,
    /// The last record went to the file by `pwritev` (or none was written yet): the next
    /// small append faults in only its own pages, since the window a populate would fault in
    /// ahead of it may well be written by `pwritev` too ([`LOG_DIRECT_WRITE_BYTES`]).
    direct: bool,
    /// The last call was a `sync` that made every appended byte durable: the next append goes
    /// by `pwritev` (see [`LOG_DIRECT_WRITE_BYTES`]).
    just_synced: bool,
    /// Where `close` leaves the map for a later reuse of the file.
    retired: Arc<RetiredLogs>,
}

impl PosixMappedLog {
    /// A log over `file`, of `size` bytes, with nothing written and nothing mapped yet.
    fn empty(path: &Path, file: File, size: u64, retired: &Arc<RetiredLogs>) -> Self {
        PosixMappedLog {
            path: path.to_path_buf(),
            file: Some(file),
            map: None,
            len: 0,
            capacity: 0,
            size,
            synced: 0,
            populated: if cfg!(target_os = "linux") {
                0
            } else {
                u64::MAX
            },
            direct: true,
            just_synced: false,
            retired: retired.clone(),
        }
    }

    /// A log written from byte 0 through the kept map of a closed log, now at `path`. The file
    /// keeps the old log's (trimmed) size; the populate windows extend it as the appends go.
    fn over_kept(path: &Path, kept: RetiredLog, retired: &Arc<RetiredLogs>) -> Result<Self> {
        let size = kept
            .file
            .metadata()
            .map_err(|e| Error::io("open", path, e))?
            .len();
        let capacity = kept.map.len() as u64;
        let mut log = PosixMappedLog::empty(path, kept.file, size, retired);
        log.map = Some(kept.map);
        log.capacity = capacity;
        log.back_whole_map_unless_populating()?;
        Ok(log)
    }

    /// Extends the file over the whole map when appends will not be preceded by populate
    /// windows (a kernel without `MADV_POPULATE_WRITE`, or not Linux), so that their page
    /// faults find file bytes under every page.
    fn back_whole_map_unless_populating(&mut self) -> Result<()> {
        if self.populated == u64::MAX && self.size < self.capacity {
            self.set_size(self.capacity)?;
        }
        Ok(())
    }

    /// Sets the file's size (a sparse extension when it grows).
    fn set_size(&mut self, size: u64) -> Result<()> {
        self.file("grow")?
            .set_len(size)
            .map_err(|e| Error::io("grow", &self.path, e))?;
        self.size = size;
        Ok(())
    }

    /// Extends the file to, and faults in writable, the pages from `self.populated` to a
    /// window past `end` (only to `end`'s page when `self.direct`).
    ///
    /// Without this every fresh 4 KiB page of the log costs the writer a page fault (the
    /// file system allocates its block in `page_mkwrite`), one per ~30 small records; one
    /// `MADV_POPULATE_WRITE` per window does the same work without an exception per page.
    /// The advice never changes the bytes, so it is safe on pages already written.
    ///
    /// The file ends where the window does. Why: a fault on a page the page cache lacks reads
    /// ahead up to the file's end, and a log reusing a file runs into such pages just past the
    /// old log's end, near where it ends itself. With the file extended over the whole map,
    /// that read-ahead built (and `close` then trimmed) up to 2 MB of zeroed pages per log,
    /// a millisecond of the writer's time each time (`strace -T`, a batched fill).
    #[cfg(target_os = "linux")]
    fn populate_ahead(&mut self, end: u64) -> Result<()> {
        if self.populated >= end || self.map.is_none() {
            return Ok(());
        }
        let page = page_size();
        let start = self.populated.max(self.len / page * page);
        let ahead = if self.direct { 0 } else { LOG_POPULATE_BYTES };
        let stop = self.window_end(end, ahead);
        if stop <= start {
            return Ok(());
        }
        if stop > self.size {
            // Blocks allocated first (unwritten extents, read as zeros) make populating
            // cheaper than over a hole, where the file system reserves each page's block as it
            // faults: the populate's share of a fillrandom profile fell by a third. A full
            // disk (or quota, or size limit) is reported here, before any byte of the append
            // is written; a fault on a page with no block behind it would be a `SIGBUS`.
            self.extend_allocated_to(start, stop)?;
        }
        let Some(map) = self.map.as_ref() else {
            return Ok(());
        };
        match map.advise_range(
            memmap2::Advice::PopulateWrite,
            start as usize,
            (stop - start) as usize,
        ) {
            Ok(()) => self.populated = stop,
            // Older kernels do not know the advice; the appends then fault page by page.
            Err(_) => {
                self.populated = u64::MAX;
                self.back_whole_map_unless_populating()?;
            }
        }
        Ok(())
    }

    #[cfg(not(target_os = "linux"))]
    fn populate_ahead(&mut self, _end: u64) -> Result<()> {
        Ok(())
    }

    /// Where a window of `ahead` bytes past `end` ends: on a page boundary, within the map.
    fn window_end(&self, end: u64, ahead: u64) -> u64 {
        let page = page_size();
        (end + ahead)
            .div_ceil(page)
            .saturating_mul(page)
            .min(self.capacity)
    }

    /// Extends the file from `start` (at most its size) to `stop` with blocks allocated (read
    /// as zeros), or sparsely on a file system without `fallocate`.
    fn extend_allocated_to(&mut self, start: u64, stop: u64) -> Result<()> {
        match extend_allocated(self.file("allocate")?, start, stop - start) {
            Ok(()) => self.size = stop,
            // A file system without `fallocate`: a sparse extension, whose pages get their
            // blocks as they are written.
            Err(e) if matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::ENOSYS)) => {
                self.set_size(stop)?;
            }
            Err(e) => return Err(Error::io("allocate", &self.path, e)),
        }
        Ok(())
    }

    fn file(&self, op: &'static str) -> Result<&File> {
        self.file
            .as_ref()
            .ok_or_else(|| Error::io(op, &self.path, std::io::Error::other("file already closed")))
    }

    /// Appends `parts` (`total` bytes) by copying them into the map.
    fn copy_into_map(&mut self, parts: &[&[u8]], total: usize) -> Result<()> {
        let end = self.len + total as u64;
        if end > self.capacity || self.map.is_none() {
            self.grow(end)?;
        }
        self.populate_ahead(end)?;
        if end > self.size {
            return Err(Error::io(
                "write",
                &self.path,
                std::io::Error::other("append past the file's end"),
            ));
        }
        let start = self.len as usize;
        let Some(map) = self.map.as_mut() else {
            return Err(Error::io(
                "write",
                &self.path,
                std::io::Error::other("log is not mapped"),
            ));
        };
        let mut at = start;
        for part in parts {
            map[at..at + part.len()].copy_from_slice(part);
            at += part.len();
        }
        // The next records' lines, requested now, are in the cache by the time they are
        // written: otherwise the WAL's unlock, right after the copy, waits for them.
        let base = map.as_ptr() as usize;
        crate::prefetch::ahead_for_write(base + start, base + at, WRITE_AHEAD);
        self.len = end;
        self.direct = false;
        Ok(())
    }

    /// Appends `parts` (`total` bytes) with `pwritev`, past the map
    /// ([`LOG_DIRECT_WRITE_BYTES`]). With `allocate_ahead`, the file is first extended a
    /// populate window past the record's end unless it already covers it.
    ///
    /// Why: a record written past the file's end changes its size, and the next `fdatasync`
    /// then commits that size to the file system's journal too, every synced record a second
    /// device write (fillsync fell from a median 89.5% of the raw sync rate to 66%).
    fn write_direct(&mut self, parts: &[&[u8]], total: usize, allocate_ahead: bool) -> Result<()> {
        let end = self.len + total as u64;
        if end > self.capacity || self.map.is_none() {
            // `sync` flushes through the map, which must cover every appended byte.
            self.grow(end)?;
        }
        if allocate_ahead && end > self.size {
            // `grow` made the map cover `end`, so the window never stops short of it.
            let stop = self.window_end(end, LOG_POPULATE_BYTES);
            self.extend_allocated_to(self.size, stop)?;
        }
        write_all_at(self.file("write")?, self.len, parts)
            .map_err(|e| Error::io("write", &self.path, e))?;
        // The bytes are in the page cache, where the map sees them. Pages past the populated
        // window were not faulted in: a later small append populates from its own page on.
        self.len = end;
        self.size = self.size.max(end);
        self.direct = true;
        Ok(())
    }

    fn grow(&mut self, needed: u64) -> Result<()> {
        let mut capacity = self.capacity.max(LOG_CHUNK_BYTES);
        while capacity < needed {
            capacity = capacity.saturating_mul(2);
        }
        // Dirty mapped pages stay in the page cache when the old map goes away, but its page
        // table entries do not: the new map is populated afresh.
        self.map = None;
        if self.populated != u64::MAX {
            self.populated = 0;
        }
        let file = self.file("grow")?;
        // SAFETY: the file is private to this writer (shale never opens a live WAL for writing
        // twice). The map may reach past the file's end; nothing touches it there (the
        // struct's invariant): the populate windows extend the file first, or the file is
        // extended over the whole map just below.
        let map = unsafe {
            memmap2::MmapOptions::new()
                .len(capacity as usize)
                .map_mut(file)
        }
        .map_err(|e| Error::io("mmap", &self.path, e))?;
        self.map = Some(map);
        self.capacity = capacity;
        self.back_whole_map_unless_populating()
    }
}

impl WritableFile for PosixMappedLog {
    fn append_parts(&mut self, parts: &[&[u8]]) -> Result<()> {
        let total: usize = parts.iter().map(|p| p.len()).sum();
        let after_sync = std::mem::take(&mut self.just_synced);
        if (total >= LOG_DIRECT_WRITE_BYTES || after_sync) && cfg!(target_os = "linux") {
            self.write_direct(parts, total, after_sync)
        } else {
            self.copy_into_map(parts, total)
        }
    }

    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.append_parts(&[data])
    }

    fn flush(&mut self) -> Result<()> {
        // The bytes are already in the page cache.
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        let mut flushed = false;
        if let Some(map) = &self.map {
            let start = self.synced as usize;
            let dirty = (self.len - self.synced) as usize;
            if dirty > 0 {
                map.flush_range(start, dirty)
                    .map_err(|e| Error::io("sync", &self.path, e))?;
                flushed = true;
            }
        }
        // On Linux `msync(MS_SYNC)` of a shared file mapping ends in the file system's
        // `fsync` with `datasync` set: the range's pages, the metadata needed to read them (the
        // preallocated size among it) and the device cache flush, exactly what `fdatasync`
        // does. A second call would only cost a second device flush per synced write. Elsewhere
        // (and when nothing was dirty) `fdatasync` makes the size durable.
        if !flushed || !cfg!(target_os = "linux") {
            self.file("sync")?
                .sync_data()
                .map_err(|e| Error::io("sync", &self.path, e))?;
        }
        self.synced = self.len;
        self.just_synced = true;
        Ok(())
    }

    fn close(&mut self) -> Result<()> {
        if self.file.is_none() {
            return Ok(());
        }
        // Trimming unmaps the pages past the new end from the map too; the rest stay mapped.
        let map = self.map.take();
        let was_synced = self.synced == self.len;
        let file = self.file("close")?;
        file.set_len(self.len)
            .map_err(|e| Error::io("close", &self.path, e))?;
        if was_synced {
            // Trimming changed the size: keep a synced log synced, so recovery never finds a
            // zero tail in a log that is not the newest.
            file.sync_data()
                .map_err(|e| Error::io("sync", &self.path, e))?;
        }
        self.size = self.len;
        let file = self.file.take();
        if let (Some(map), Some(file)) = (map, file) {
            self.retired.keep(RetiredLog {
                path: self.path.clone(),
                file,
                map,
            });
        }
        Ok(())
    }

    fn len(&self) -> u64 {
        self.len
    }
}

impl Drop for PosixMappedLog {
    fn drop(&mut self) {
        // Best effort: an explicit close reports errors; a drop cannot.
        let _ = self.close();
    }
}

struct PosixRandom {
    path: PathBuf,
    file: File,
    size: u64,
}

impl RandomAccessFile for PosixRandom {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.file
            .read_exact_at(buf, offset)
            .map_err(|e| Error::io("read", &self.path, e))
    }

    fn size(&self) -> u64 {
        self.size
    }
}

/// A read-only file read through a memory map. Shale never changes the bytes a reader of such
/// a file may read, and never shrinks it (tables are immutable once written; the active blob
/// file only grows, past the records references name).
struct PosixMapped {
    path: PathBuf,
    map: memmap2::Mmap,
}

impl RandomAccessFile for PosixMapped {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        match start
            .checked_add(buf.len())
            .and_then(|end| self.map.get(start..end))
        {
            Some(src) => {
                buf.copy_from_slice(src);
                Ok(())
            }
            None => Err(Error::io(
                "read",
                &self.path,
                std::io::Error::from(std::io::ErrorKind::UnexpectedEof),
            )),
        }
    }

    fn size(&self) -> u64 {
        self.map.len() as u64
    }

    fn mapped(&self) -> Option<&[u8]> {
        Some(&self.map)
    }

    fn release(&self, offset: u64, len: u64) {
        // Only whole pages inside the range: a page shared with a neighbouring block stays.
        let page = page_size();
        let start = offset.div_ceil(page) * page;
        let end = offset.saturating_add(len).min(self.map.len() as u64) / page * page;
        if end <= start {
            return;
        }
        // SAFETY: the map is a shared, read-only mapping of a file nobody writes (tables are
        // immutable). MADV_DONTNEED on such a mapping only drops this process's page table
        // entries; the next access faults the same bytes back in from the page cache, so
        // slices other threads hold into the map never see different contents. The result is
        // ignored: this is a hint, and if the kernel refuses, the pages simply stay resident.
        let _ = unsafe {
            self.map.unchecked_advise_range(
                memmap2::UncheckedAdvice::DontNeed,
                start as usize,
                (end - start) as usize,
            )
        };
    }
}

struct PosixSequential {
    path: PathBuf,
    file: File,
}

impl SequentialFile for PosixSequential {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize> {
        loop {
            match self.file.read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Error::io("read", &self.path, e)),
            }
        }
    }
}

struct PosixLock {
    _file: File,
}

impl FileLock for PosixLock {}

impl Fs for PosixFs {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.retired.forget(path);
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(|e| Error::io("create", path, e))?;
        Ok(Box::new(PosixWritable::new(path, file, self.mmap_reads)))
    }

    fn create_log(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        if !self.mmap_reads {
            return self.create(path);
        }
        self.retired.forget(path);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(|e| Error::io("create", path, e))?;
        let mut log = PosixMappedLog::empty(path, file, 0, &self.retired);
        log.grow(LOG_CHUNK_BYTES)?;
        Ok(Box::new(log))
    }

    fn reuse_log(&self, old: &Path, path: &Path) -> Result<Box<dyn WritableFile>> {
        let kept = self.retired.take(old);
        self.rename(old, path)?;
        if !self.mmap_reads {
            // Plain appends through `write` gain nothing from old blocks: start afresh.
            return self.create_log(path);
        }
        if let Some(kept) = kept {
            // The kept descriptor must still be the file now at `path` (nothing outside this
            // value replaced it); otherwise its map belongs to a file no one will read.
            let same = match (kept.file.metadata(), std::fs::metadata(path)) {
                (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
                _ => false,
            };
            if same {
                return Ok(Box::new(PosixMappedLog::over_kept(
                    path,
                    kept,
                    &self.retired,
                )?));
            }
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| Error::io("open", path, e))?;
        let size = file
            .metadata()
            .map_err(|e| Error::io("open", path, e))?
            .len();
        let mut log = PosixMappedLog::empty(path, file, size, &self.retired);
        // Map whole chunks over the old bytes, so the appends write over cached pages the
        // file system has already allocated; `close` trims to what this log wrote.
        log.grow(size.div_ceil(LOG_CHUNK_BYTES).max(1) * LOG_CHUNK_BYTES)?;
        Ok(Box::new(log))
    }

    fn open_random(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        let file = File::open(path).map_err(|e| Error::io("open", path, e))?;
        let size = file
            .metadata()
            .map_err(|e| Error::io("stat", path, e))?
            .len();
        if self.mmap_reads && size > 0 {
            // SAFETY: the map is read-only and private to this handle. Shale never truncates a
            // file opened for random reads below the size it had then, so every mapped page
            // stays backed for the map's lifetime; the only such file still being written is
            // the active blob file, appended to past the records readers were told about (its
            // zeros ahead are overwritten, never its records).
            if let Ok(map) = unsafe { memmap2::Mmap::map(&file) } {
                return Ok(Arc::new(PosixMapped {
                    path: path.to_path_buf(),
                    map,
                }));
            }
        }
        Ok(Arc::new(PosixRandom {
            path: path.to_path_buf(),
            file,
            size,
        }))
    }

    fn open_sequential(&self, path: &Path) -> Result<Box<dyn SequentialFile>> {
        let file = File::open(path).map_err(|e| Error::io("open", path, e))?;
        Ok(Box::new(PosixSequential {
            path: path.to_path_buf(),
            file,
        }))
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(|e| Error::io("list", dir, e))? {
            let entry = entry.map_err(|e| Error::io("list", dir, e))?;
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
        Ok(names)
    }

    fn file_size(&self, path: &Path) -> Result<u64> {
        std::fs::metadata(path)
            .map(|m| m.len())
            .map_err(|e| Error::io("stat", path, e))
    }

    fn remove(&self, path: &Path) -> Result<()> {
        self.retired.forget(path);
        std::fs::remove_file(path).map_err(|e| Error::io("remove", path, e))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.retired.forget(from);
        self.retired.forget(to);
        std::fs::rename(from, to).map_err(|e| Error::io("rename", from, e))
    }

    fn link(&self, from: &Path, to: &Path) -> Result<()> {
        std::fs::hard_link(from, to).map_err(|e| Error::io("link", from, e))
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io("mkdir", dir, e))
    }

    fn remove_dir(&self, dir: &Path) -> Result<()> {
        std::fs::remove_dir(dir).map_err(|e| Error::io("rmdir", dir, e))
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        let file = File::open(dir).map_err(|e| Error::io("open dir", dir, e))?;
        file.sync_all().map_err(|e| Error::io("sync dir", dir, e))
    }

    fn sync_file(&self, path: &Path) -> Result<()> {
        let file = File::open(path).map_err(|e| Error::io("open", path, e))?;
        file.sync_data().map_err(|e| Error::io("sync", path, e))
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| Error::io("open lock", path, e))?;
        // SAFETY: flock is called on a valid, open descriptor owned by `file`.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
                return Err(Error::Locked {
                    path: path.parent().unwrap_or(path).to_path_buf(),
                });
            }
            return Err(Error::io("lock", path, err));
        }
        Ok(Box::new(PosixLock { _file: file }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file that prefers huge pages has each huge region written with zeros before its
    /// first byte (so the page cache can hold it as one folio), starts the writeback of whole
    /// regions only, and ends exactly at its last appended byte after a flush, a sync or the
    /// close, reading back whole, also when appends go on after a sync.
    #[test]
    fn huge_regions_are_zero_filled_ahead_and_trimmed() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("000001.sst");
        let size = |p: &Path| std::fs::metadata(p).expect("metadata").len();
        let mut file = PosixWritable::new(&path, File::create(&path).expect("create"), true);
        file.write_back_every(1 << 20);
        file.prefer_huge_pages();
        let on = cfg!(target_os = "linux");
        assert_eq!(file.region_bytes, if on { HUGE_REGION_BYTES } else { 0 });
        let mut expected = Vec::new();
        let mut piece = 1usize;
        let mut flushed_once = false;
        while expected.len() < 5 * HUGE_REGION_BYTES as usize + 12345 {
            // Never a zero byte, so zeros left where data belongs would show.
            let data: Vec<u8> = (0..piece)
                .map(|i| ((i * 13 + expected.len()) as u8) | 1)
                .collect();
            file.append(&data).expect("append");
            expected.extend_from_slice(&data);
            piece = (piece * 3 + 1) % (3 * WRITE_BUFFER_BYTES);
            let handed = file.len - file.buffer.len() as u64;
            if on {
                assert_eq!(file.zero_filled_to % HUGE_REGION_BYTES, 0);
                assert!(file.zero_filled_to >= handed);
                // Zeros reach the end of the last region filled; after a trim, the file ends
                // at its bytes until a write reaches a new region.
                let now = size(&path);
                assert!(now == handed || now == file.zero_filled_to, "{now} bytes");
                if file.zeros_past_len {
                    assert_eq!(now, file.zero_filled_to);
                }
                assert_eq!(file.written_back % HUGE_REGION_BYTES, 0);
            } else {
                assert_eq!(size(&path), handed);
            }
            assert!(file.written_back <= handed);
            if !flushed_once && expected.len() > 3 * HUGE_REGION_BYTES as usize {
                file.flush().expect("flush");
                assert_eq!(size(&path), expected.len() as u64);
                flushed_once = true;
            }
        }
        file.sync().expect("sync");
        assert_eq!(size(&path), expected.len() as u64);
        assert_eq!(std::fs::read(&path).expect("read"), expected);
        let more = vec![0xab_u8; 3 * HUGE_REGION_BYTES as usize];
        file.append(&more).expect("append");
        expected.extend_from_slice(&more);
        file.close().expect("close");
        assert_eq!(size(&path), expected.len() as u64);
        assert_eq!(std::fs::read(&path).expect("read"), expected);

        // Reads without maps gain nothing from huge pages: such a file system leaves them out.
        let plain = dir.path().join("000002.sst");
        let mut file = PosixWritable::new(&plain, File::create(&plain).expect("create"), false);
        file.prefer_huge_pages();
        assert_eq!(file.region_bytes, 0);
    }

    /// A file that prefers large folios (a blob file) has each 256 KiB region written with
    /// zeros before its first byte and never shrinks: the zeros stay past its appended bytes
    /// across flushes (a flush per write group must not cost a truncate), syncs and the close,
    /// since readers may have mapped it at any size it had. The close gives back the space
    /// reserved past its end, and it reads back as its bytes followed by zeros.
    #[test]
    fn large_folio_regions_are_zero_filled_ahead_and_the_file_never_shrinks() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("000001.blob");
        let size = |p: &Path| std::fs::metadata(p).expect("metadata").len();
        let mut file = PosixWritable::new(&path, File::create(&path).expect("create"), true);
        file.prefer_large_folios();
        let on = cfg!(target_os = "linux");
        let region = if on { LARGE_FOLIO_REGION_BYTES } else { 0 };
        assert_eq!(file.region_bytes, region);
        let expected_size = |len: u64| {
            if on {
                len.div_ceil(region) * region
            } else {
                len
            }
        };
        let mut expected = Vec::new();
        let mut last_size = 0;
        for i in 0..40usize {
            // A record's small header, then its value (never a zero byte, so zeros left where
            // data belongs would show); values of 10 to 130 KB cross regions at every offset.
            let header: Vec<u8> = (0..17).map(|j| (i * 7 + j) as u8 | 1).collect();
            let value = vec![(i as u8) | 1; 10_000 + i * 3_000];
            file.reserve(value.len() as u64 + 17);
            file.append(&header).expect("append");
            file.append(&value).expect("append");
            file.flush().expect("flush");
            expected.extend_from_slice(&header);
            expected.extend_from_slice(&value);
            let len = expected.len() as u64;
            assert_eq!(file.len(), len);
            if i % 10 == 5 {
                file.sync().expect("sync");
            }
            // The zeros reach the end of the region the last append ended in.
            let now = size(&path);
            assert_eq!(now, expected_size(len), "after record {i}");
            assert!(now >= last_size, "shrank from {last_size} to {now} bytes");
            last_size = now;
            let on_disk = std::fs::read(&path).expect("read");
            assert_eq!(&on_disk[..expected.len()], &expected[..]);
            assert!(on_disk[expected.len()..].iter().all(|&b| b == 0));
        }
        file.close().expect("close");
        let len = expected.len() as u64;
        assert_eq!(size(&path), expected_size(len));
        let on_disk = std::fs::read(&path).expect("read");
        assert_eq!(&on_disk[..expected.len()], &expected[..]);
        assert!(on_disk[expected.len()..].iter().all(|&b| b == 0));
        // The 8 MiB reservations past the end are given back (allowing one block of slack).
        let allocated = std::fs::metadata(&path).expect("metadata").blocks() * 512;
        assert!(
            allocated <= expected_size(len) + 4096,
            "{allocated} bytes allocated for {} bytes",
            expected_size(len)
        );

        // Appends already made: the regions would not line up, so the hint is ignored.
        let late = dir.path().join("000002.blob");
        let mut file = PosixWritable::new(&late, File::create(&late).expect("create"), true);
        file.append(b"header").expect("append");
        file.prefer_large_folios();
        assert_eq!(file.region_bytes, 0);
    }

    /// A file written in pieces of every size has its writeback started, once asked for, at
    /// each `WINDOW` of written bytes, over whole pages only, never ahead of the bytes written,
    /// and reads back whole after `sync`.
    #[test]
    fn writeback_follows_the_written_bytes() {
        const WINDOW: u64 = 1 << 20;
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("000001.sst");
        let mut file = PosixWritable::new(&path, File::create(&path).expect("create"), true);
        // Off until asked for.
        let mut expected = vec![7u8; 3 * WINDOW as usize];
        file.append(&expected).expect("append");
        assert_eq!(file.written_back, 0);
        file.write_back_every(WINDOW);
        let mut piece = 1usize;
        while expected.len() < 6 * WINDOW as usize + 12345 {
            let data: Vec<u8> = (0..piece).map(|i| (i * 7 + expected.len()) as u8).collect();
            file.append(&data).expect("append");
            expected.extend_from_slice(&data);
            let written = file.len - file.buffer.len() as u64;
            assert!(
                file.written_back <= written,
                "writeback ahead of the writes"
            );
            assert_eq!(
                file.written_back % page_size(),
                0,
                "a partial page written back"
            );
            if cfg!(target_os = "linux") {
                assert!(written - file.written_back < WINDOW + page_size());
            }
            piece = (piece * 3 + 1) % (2 * WRITE_BUFFER_BYTES);
        }
        if cfg!(target_os = "linux") {
            assert!(file.written_back >= 5 * WINDOW, "no writeback started");
        }
        file.sync().expect("sync");
        file.close().expect("close");
        assert!(std::fs::read(&path).expect("read") == expected);
    }
    fn file_size(path: &Path) -> u64 {
        std::fs::metadata(path).expect("metadata").len()
    }

    /// Appends pieces of varied sizes until `log` holds `total` bytes, checking after each
    /// that the file covers every byte written but ends within a populate window of them (or
    /// at the size `floor` it had before, for a reused file), never at the end of its map.
    fn write_log(
        log: &mut dyn WritableFile,
        path: &Path,
        total: usize,
        floor: u64,
        seed: usize,
    ) -> Vec<u8> {
        let mut written = Vec::new();
        let mut piece = 1usize;
        while written.len() < total {
            let n = piece.min(total - written.len());
            let data: Vec<u8> = (0..n)
                .map(|i| (i * 13 + written.len() + seed) as u8)
                .collect();
            if piece % 2 == 0 {
                log.append(&data).expect("append");
            } else {
                // In parts, with an empty one between: records of 32 KiB and more go to the
                // file by `pwritev`, smaller ones through the map, interleaved.
                let (a, b) = data.split_at(n / 3);
                log.append_parts(&[a, &[], b]).expect("append parts");
            }
            written.extend_from_slice(&data);
            let size = file_size(path);
            let len = written.len() as u64;
            assert!(size >= len, "{len} bytes written to a file of {size}");
            if cfg!(target_os = "linux") {
                let bound = floor.max(len + LOG_POPULATE_BYTES + page_size());
                assert!(
                    size <= bound,
                    "a file of {size} bytes for {len} written (floor {floor})"
                );
            }
            piece = (piece * 7 + 3) % 200_000;
        }
        written
    }

    /// Records appended right after a sync go by `pwritev` (the others through the map) into a
    /// file extended ahead of them: its size changes a window at a time, not at every synced
    /// record, past the first map chunk too and when a reused file is written over; everything
    /// reads back, and `close` trims the file to its bytes.
    #[test]
    fn synced_records_go_by_pwritev_into_a_file_extended_ahead() {
        let dir = tempfile::tempdir().expect("temp dir");
        let fs = PosixFs::new();
        let path = dir.path().join("000001.log");
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .expect("create");
        let mut log = PosixMappedLog::empty(&path, file, 0, &fs.retired);
        log.grow(LOG_CHUNK_BYTES).expect("map");
        // Records of a few KiB, so that few syncs (each a real one) take the file past the
        // first map chunk.
        let record = |i: usize| -> Vec<u8> { (0..3000).map(|j| (i * 7 + j) as u8).collect() };
        // 5.4 MB; every fourth record is not synced, so the next one goes through the map.
        let mut written = Vec::new();
        let mut sizes = std::collections::BTreeSet::new();
        let mut after_sync = false;
        for i in 0..1_800usize {
            let data = record(i);
            log.append(&data).expect("append");
            written.extend_from_slice(&data);
            if cfg!(target_os = "linux") {
                assert_eq!(log.direct, after_sync, "record {i}: by pwritev or the map");
            }
            let size = file_size(&path);
            assert!(
                size >= written.len() as u64,
                "record {i} past the file's end"
            );
            sizes.insert(size);
            after_sync = i % 4 != 3;
            if after_sync {
                log.sync().expect("sync");
            }
        }
        if cfg!(target_os = "linux") {
            // About two sizes per populate window (1 MiB): a record through the map right after
            // one by `pwritev` extends the file only to its own page. Not one per synced record
            // (1,350 of them).
            assert!(
                sizes.len() <= 16,
                "the file took {} sizes: {sizes:?}",
                sizes.len()
            );
        }
        log.close().expect("close");
        assert_eq!(file_size(&path), written.len() as u64);
        assert!(std::fs::read(&path).expect("read") == written);

        // Written over from byte 0 through the kept map: no size change while the old bytes
        // cover the records, whose syncs then change nothing but data.
        let reused = dir.path().join("000002.log");
        let mut log = fs.reuse_log(&path, &reused).expect("reuse");
        let old_size = file_size(&reused);
        let mut written = Vec::new();
        for i in 0..300usize {
            let data = record(i + 1);
            log.append(&data).expect("append");
            log.sync().expect("sync");
            written.extend_from_slice(&data);
            assert_eq!(file_size(&reused), old_size, "record {i} of the reused log");
        }
        log.close().expect("close");
        assert!(std::fs::read(&reused).expect("read") == written);
    }

    /// A mapped log's file grows a populate window at a time, not a map at a time, both when
    /// new and when it reuses a closed log's file (shorter than before, and longer, past the
    /// end of the kept map); `close` trims it to its bytes, which read back whole. A log
    /// dropped without `close` (a crash) holds its bytes too. Appends through the map and
    /// large ones written by `pwritev` interleave.
    #[test]
    fn mapped_log_file_ends_within_a_window_of_its_bytes() {
        let dir = tempfile::tempdir().expect("temp dir");
        let fs = PosixFs::new();
        let paths: Vec<PathBuf> = (1..=4)
            .map(|n| dir.path().join(format!("00000{n}.log")))
            .collect();
        // New, past the first map chunk.
        let total = LOG_CHUNK_BYTES as usize + 777_777;
        let mut log = fs.create_log(&paths[0]).expect("create");
        let written = write_log(log.as_mut(), &paths[0], total, 0, 1);
        log.sync().expect("sync");
        log.close().expect("close");
        assert_eq!(file_size(&paths[0]), written.len() as u64);
        assert!(std::fs::read(&paths[0]).expect("read") == written);
        assert_eq!(fs.kept_logs(), vec![paths[0].clone()]);

        // Reused, through the kept map: shorter, then longer than the map.
        let mut floor = written.len() as u64;
        for (i, total) in [
            (1usize, 2_345_678usize),
            (2, 2 * LOG_CHUNK_BYTES as usize + 4321),
        ] {
            let mut log = fs.reuse_log(&paths[i - 1], &paths[i]).expect("reuse");
            assert!(fs.kept_logs().is_empty(), "the kept map was not taken");
            let written = write_log(log.as_mut(), &paths[i], total, floor, i);
            log.close().expect("close");
            assert_eq!(file_size(&paths[i]), written.len() as u64);
            assert!(std::fs::read(&paths[i]).expect("read") == written);
            floor = written.len() as u64;
        }

        // Dropped without closing, as a crash leaves it: the bytes are in the file, which ends
        // within a window of them.
        let mut log = fs.reuse_log(&paths[2], &paths[3]).expect("reuse");
        let written = write_log(log.as_mut(), &paths[3], 1_234_567, floor, 3);
        std::mem::forget(log);
        let on_disk = std::fs::read(&paths[3]).expect("read");
        assert!(on_disk.get(..written.len()) == Some(&written[..]));
    }

    /// `write_all_at` writes many parts (more than one call takes), empty ones among them,
    /// one after another at its offset, over bytes already there.
    #[test]
    fn write_all_at_writes_every_part_in_order() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("parts");
        std::fs::write(&path, vec![0xeeu8; 10]).expect("write");
        let owned: Vec<Vec<u8>> = (0..1500u32)
            .map(|i| vec![(i % 251) as u8; (i % 7) as usize])
            .collect();
        let parts: Vec<&[u8]> = owned.iter().map(|p| &p[..]).collect();
        let file = OpenOptions::new().write(true).open(&path).expect("open");
        write_all_at(&file, 3, &parts).expect("write_all_at");
        let mut expected = vec![0xeeu8; 3];
        for p in &owned {
            expected.extend_from_slice(p);
        }
        assert!(std::fs::read(&path).expect("read") == expected);
    }

    /// Where the child process of `a_log_that_cannot_grow_fails_cleanly` writes its log.
    #[cfg(target_os = "linux")]
    const LIMIT_DIR_VAR: &str = "SHALE_POSIX_LIMIT_DIR";

    /// Run by [`a_log_that_cannot_grow_fails_cleanly`] in a child process whose files may not
    /// grow past 2 MiB; does nothing elsewhere.
    #[test]
    #[cfg(target_os = "linux")]
    #[ignore = "run in a child process by a_log_that_cannot_grow_fails_cleanly"]
    fn log_append_past_the_size_limit() {
        let Some(dir) = std::env::var_os(LIMIT_DIR_VAR) else {
            return;
        };
        let chunk: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        // Through the map only; then alternating, `pwritev` first, so that the limit falls
        // inside a `pwritev` (21 appends of 100,000 bytes cross 2 MiB, and the 21st is one).
        for (name, direct_every_other) in [("000001.log", false), ("000002.log", true)] {
            let path = Path::new(&dir).join(name);
            let mut log = PosixFs::new().create_log(&path).expect("create");
            let mut written = 0usize;
            let error = loop {
                let appended = if direct_every_other && (written / chunk.len()) % 2 == 0 {
                    let (a, b) = chunk.split_at(40_000);
                    log.append_parts(&[a, b])
                } else {
                    log.append(&chunk)
                };
                match appended {
                    Ok(()) => written += chunk.len(),
                    Err(e) => break e,
                }
                assert!(written < 64 << 20, "no error past the file size limit");
            };
            assert!(matches!(error, Error::Io { .. }), "{error}");
            assert!(written > 0, "the first appends failed too: {error}");
            assert_eq!(log.len(), written as u64, "a failed append counted");
            // What was appended before the error is there.
            let on_disk = std::fs::read(&path).expect("read");
            for (i, piece) in on_disk
                .get(..written)
                .expect("short file")
                .chunks(chunk.len())
                .enumerate()
            {
                assert!(piece == &chunk[..], "append {i} damaged");
            }
            // Closing trims what a failed append left past the log's bytes.
            log.close().expect("close");
            assert_eq!(file_size(&path), written as u64);
            println!("{name}: clean error after {written} bytes: {error}");
        }
    }

    /// A log whose file cannot grow (here a file size limit, as a full disk or a quota would
    /// refuse it) fails its append with an error, keeping what it had written. Mapping the
    /// file's pages ahead of its blocks instead ended a test writing into a full 3 MiB tmpfs
    /// with `SIGBUS`.
    #[test]
    #[cfg(target_os = "linux")]
    fn a_log_that_cannot_grow_fails_cleanly() {
        use std::os::unix::process::CommandExt;
        let dir = tempfile::tempdir().expect("temp dir");
        let exe = std::env::current_exe().expect("test binary");
        let mut child = std::process::Command::new(exe);
        child
            .args([
                "--exact",
                "env::posix::tests::log_append_past_the_size_limit",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(LIMIT_DIR_VAR, dir.path());
        // SAFETY: the hook runs in the forked child before `exec` and only makes two system
        // calls, both async-signal-safe.
        unsafe {
            child.pre_exec(|| {
                let limit = libc::rlimit {
                    rlim_cur: 2 << 20,
                    rlim_max: 2 << 20,
                };
                if libc::setrlimit(libc::RLIMIT_FSIZE, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // Past the limit a write also raises SIGXFSZ, which would end the process:
                // ignored, the call fails with EFBIG instead (the disposition survives `exec`).
                libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
                Ok(())
            });
        }
        let out = child.output().expect("run the child");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "child failed: {:?}\n{stdout}\n{stderr}",
            out.status
        );
        assert!(
            stdout.contains("000001.log: clean error after")
                && stdout.contains("000002.log: clean error after"),
            "the child did not run: {stdout}"
        );
    }
}
