//! The filesystem and clock seam: every file, directory, lock and sync call the engine makes goes
//! through [`Fs`], so tests can swap in the in-memory [`MemFs`] (and, on top of it, crash and
//! fault injection) without the engine knowing.
//!
//! Contract for implementations:
//! - [`WritableFile::append`] may buffer; [`WritableFile::flush`] hands the bytes to the OS
//!   (they then survive a process crash); [`WritableFile::sync`] makes them durable (they then
//!   survive a power loss).
//! - A new or renamed directory entry is durable only after [`Fs::sync_dir`] on its parent.
//! - [`RandomAccessFile`] is shared between threads; reads never move a cursor.
//!
//! All methods return [`crate::Error::Io`] naming the path and the operation on failure.

pub mod fault;
mod mem;
mod posix;

use std::path::Path;
use std::sync::Arc;

use crate::error::Result;

pub use fault::{CrashMode, CrashSnapshot, FaultError, FaultFs, FaultSpec, FiredFault, OpKind};
pub use mem::MemFs;
pub use posix::PosixFs;

/// A file open for appending.
pub trait WritableFile: Send + Sync {
    /// Appends `data` at the end of the file (possibly into a user-space buffer).
    fn append(&mut self, data: &[u8]) -> Result<()>;
    /// Appends `parts` one after another, as one append of their concatenation would. A file
    /// may write them in one system call (a log's framed record: headers between pieces of
    /// the payload). The default appends each non-empty part in turn; after an error, any
    /// prefix of the bytes may have been appended.
    fn append_parts(&mut self, parts: &[&[u8]]) -> Result<()> {
        for part in parts.iter().filter(|p| !p.is_empty()) {
            self.append(part)?;
        }
        Ok(())
    }
    /// Hands buffered bytes to the operating system.
    fn flush(&mut self) -> Result<()>;
    /// Flushes, then makes every appended byte durable (fdatasync).
    fn sync(&mut self) -> Result<()>;
    /// Flushes and closes the file. Closing twice is an error-free no-op.
    fn close(&mut self) -> Result<()>;
    /// Bytes appended so far (the logical size of the file).
    fn len(&self) -> u64;
    /// True when nothing has been appended.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// A hint that about `bytes` more will be appended: an implementation may reserve the space
    /// now (without changing the file's size), so appends need not allocate it piece by piece.
    /// The default does nothing; a failure is not an error (appends report a full disk).
    fn reserve(&mut self, _bytes: u64) {}
    /// A hint for a file synced once, when complete (a table): an implementation may start
    /// writing its bytes back to the device every `bytes` appended, so that the final sync
    /// waits for less. It promises nothing about durability. The default does nothing.
    fn write_back_every(&mut self, _bytes: u64) {}
    /// A hint for a file that, once complete, is read at random through a memory map (a
    /// table): an implementation may lay out its page cache so that the map can use huge
    /// pages (one translation entry for 2 MiB instead of 4 KiB; random lookups ran about 10%
    /// faster). It changes nothing a reader of the finished file sees. The default does
    /// nothing.
    fn prefer_huge_pages(&mut self) {}
    /// A hint for a file appended to in large pieces on the writers' path and read while it
    /// is written (a blob file): an implementation may have the page cache hold it in large
    /// folios, which it may do by writing zeros over aligned regions ahead of the appends.
    /// Such zeros may stay past the appended bytes for good (readers of the file read only
    /// what they were told was written); the file must never shrink, since readers may have
    /// mapped it at any size it had. The default does nothing.
    fn prefer_large_folios(&mut self) {}
}

/// A file open for positional reads, shared between threads.
pub trait RandomAccessFile: Send + Sync {
    /// Fills `buf` with the bytes at `offset`; reading past the end is an error.
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()>;
    /// Size of the file in bytes when it was opened.
    fn size(&self) -> u64;
    /// The whole file as one slice when it is memory-mapped, so readers can decode blocks in
    /// place instead of copying them out first. `None` (the default) means: use
    /// [`RandomAccessFile::read_exact_at`]. Wrappers that inject faults into reads must keep
    /// the default, so every read goes through them.
    fn mapped(&self) -> Option<&[u8]> {
        None
    }
    /// Hints that `len` bytes at `offset` will not be read again soon. A mapped file drops the
    /// range's pages from this process's resident set (the page cache keeps them, and a later
    /// read faults them back in unchanged), so a compaction streaming through a table does
    /// not leave the whole file counted against the process. The default does nothing.
    fn release(&self, _offset: u64, _len: u64) {}
}

/// A file read front to back.
pub trait SequentialFile: Send {
    /// Reads up to `buf.len()` bytes; returns 0 at end of file.
    fn read(&mut self, buf: &mut [u8]) -> Result<usize>;
}

/// A held lock on a database directory; dropping it releases the lock.
pub trait FileLock: Send + Sync {}

/// The filesystem the engine runs on.
pub trait Fs: Send + Sync + 'static {
    /// Creates (or truncates) a file for appending.
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>>;
    /// Creates a write-ahead log: appended in small records, each of which must reach the OS
    /// before it is acknowledged. An implementation may preallocate the file, leaving zeros
    /// after the last record until the file is closed (readers of the log format treat a zero
    /// tail as the end). Defaults to [`Fs::create`].
    fn create_log(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.create(path)
    }
    /// Renames the finished log `old` to `path` and opens it to be written again from its
    /// first byte, like [`Fs::create_log`] but keeping the file's blocks (and the page cache's
    /// copy of them): bytes past what the new log writes still hold the old log's until the
    /// file is closed, which trims it. Writing over cached, allocated pages is much cheaper than
    /// growing a file. The rename is durable only once the directory is synced. Defaults to a
    /// rename and [`Fs::create_log`], which starts the file empty.
    fn reuse_log(&self, old: &Path, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.rename(old, path)?;
        self.create_log(path)
    }
    /// Opens an existing file for positional reads.
    fn open_random(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>>;
    /// Opens an existing file for sequential reads.
    fn open_sequential(&self, path: &Path) -> Result<Box<dyn SequentialFile>>;
    /// True if `path` names an existing file or directory.
    fn exists(&self, path: &Path) -> bool;
    /// Names (not paths) of the entries in directory `dir`.
    fn list(&self, dir: &Path) -> Result<Vec<String>>;
    /// Size of a file in bytes.
    fn file_size(&self, path: &Path) -> Result<u64>;
    /// Removes a file.
    fn remove(&self, path: &Path) -> Result<()>;
    /// Atomically renames `from` to `to`, replacing `to`.
    fn rename(&self, from: &Path, to: &Path) -> Result<()>;
    /// Creates a hard link `to` naming the same file as `from` (used by checkpoints).
    fn link(&self, from: &Path, to: &Path) -> Result<()>;
    /// Creates a directory and its parents; an existing directory is not an error.
    fn create_dir_all(&self, dir: &Path) -> Result<()>;
    /// Removes an empty directory.
    fn remove_dir(&self, dir: &Path) -> Result<()>;
    /// Makes the entries of `dir` durable (creations, renames, removals).
    fn sync_dir(&self, dir: &Path) -> Result<()>;
    /// Makes the contents of an existing file durable without a handle from [`Fs::create`]
    /// (as `fsync` on a newly opened descriptor does on POSIX). Recovery uses it for blob files
    /// written by a process that ended before syncing them. The default refuses: a filesystem
    /// must say how it does this.
    fn sync_file(&self, path: &Path) -> Result<()> {
        Err(crate::Error::InvalidArgument(format!(
            "this filesystem cannot sync {} by name",
            path.display()
        )))
    }
    /// Takes an exclusive lock on `path` (created if missing); fails with
    /// [`crate::Error::Locked`] if another process or handle holds it.
    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>>;
}

/// Reads a whole file through `fs`.
pub fn read_all(fs: &dyn Fs, path: &Path) -> Result<Vec<u8>> {
    let mut file = fs.open_sequential(path)?;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            return Ok(out);
        }
        out.extend_from_slice(&buf[..n]);
    }
}

/// Writes `data` to `path` through a temporary file and a rename, syncing both the file and the
/// directory, so a crash leaves either the old or the new content.
pub fn write_file_atomic(fs: &dyn Fs, dir: &Path, name: &str, data: &[u8]) -> Result<()> {
    let tmp = dir.join(format!("{name}.dbtmp"));
    let mut file = fs.create(&tmp)?;
    file.append(data)?;
    file.sync()?;
    file.close()?;
    fs.rename(&tmp, &dir.join(name))?;
    fs.sync_dir(dir)
}

/// Where time comes from, so TTL and statistics can be driven by tests.
pub trait Clock: Send + Sync + 'static {
    /// Microseconds since the Unix epoch.
    fn now_micros(&self) -> u64;
}

/// The system's real-time clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_micros(&self) -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_micros() as u64)
            .unwrap_or(0)
    }
}

/// A clock that only moves when told to; for tests.
#[derive(Debug, Default)]
pub struct ManualClock {
    micros: std::sync::atomic::AtomicU64,
}

impl ManualClock {
    /// A clock reading `micros`.
    pub fn new(micros: u64) -> Self {
        ManualClock {
            micros: std::sync::atomic::AtomicU64::new(micros),
        }
    }
    /// Sets the time.
    pub fn set(&self, micros: u64) {
        self.micros
            .store(micros, std::sync::atomic::Ordering::SeqCst);
    }
    /// Moves the time forward.
    pub fn advance(&self, micros: u64) {
        self.micros
            .fetch_add(micros, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_micros(&self) -> u64 {
        self.micros.load(std::sync::atomic::Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exercise(fs: &dyn Fs, dir: &Path) {
        fs.create_dir_all(dir).expect("mkdir");
        let a = dir.join("a");
        let mut w = fs.create(&a).expect("create");
        w.append(b"hello ").expect("append");
        w.append(b"world").expect("append");
        assert_eq!(w.len(), 11);
        w.sync().expect("sync");
        w.close().expect("close");
        assert_eq!(fs.file_size(&a).expect("size"), 11);
        let r = fs.open_random(&a).expect("open");
        let mut buf = [0u8; 5];
        r.read_exact_at(6, &mut buf).expect("read");
        assert_eq!(&buf, b"world");
        assert!(
            r.read_exact_at(8, &mut buf).is_err(),
            "read past end must fail"
        );
        assert_eq!(read_all(fs, &a).expect("read_all"), b"hello world");
        write_file_atomic(fs, dir, "b", b"xyz").expect("atomic");
        let mut names = fs.list(dir).expect("list");
        names.sort();
        assert_eq!(names, vec!["a".to_string(), "b".to_string()]);
        fs.rename(&a, &dir.join("c")).expect("rename");
        assert!(!fs.exists(&a));
        assert!(fs.exists(&dir.join("c")));
        fs.remove(&dir.join("c")).expect("remove");
        assert!(fs.open_random(&dir.join("c")).is_err());
        let lock = fs.lock(&dir.join("LOCK")).expect("lock");
        assert!(matches!(
            fs.lock(&dir.join("LOCK")),
            Err(crate::Error::Locked { .. })
        ));
        drop(lock);
        fs.lock(&dir.join("LOCK")).expect("relock after drop");
    }

    #[test]
    fn posix_fs_contract() {
        let tmp = tempfile::tempdir().expect("tempdir");
        exercise(&PosixFs::new(), &tmp.path().join("db"));
    }

    #[test]
    fn posix_released_mapped_pages_read_back_unchanged() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let fs = PosixFs::new();
        let path = tmp.path().join("table");
        let data: Vec<u8> = (0..5 * 4096 + 123u32).map(|i| (i % 251) as u8).collect();
        let mut w = fs.create(&path).expect("create");
        w.append(&data).expect("append");
        w.close().expect("close");
        let file = fs.open_random(&path).expect("open");
        let map = file.mapped().expect("posix reads are mapped");
        assert_eq!(map, &data[..]);
        // Unaligned ends, the whole file, past the end and nothing at all: never an error, and
        // the bytes (held as a slice across the calls) read the same afterwards.
        for (offset, len) in [
            (100, 9000),
            (0, data.len() as u64),
            (4096, u64::MAX),
            (7, 0),
        ] {
            file.release(offset, len);
            assert_eq!(map, &data[..]);
        }
        let mut buf = vec![0u8; 4000];
        file.read_exact_at(8000, &mut buf).expect("read");
        assert_eq!(buf, &data[8000..12000]);
    }

    #[test]
    fn posix_reserve_keeps_the_size_and_close_gives_the_space_back() {
        use std::os::unix::fs::MetadataExt;
        let tmp = tempfile::tempdir().expect("tempdir");
        let path = tmp.path().join("000007.blob");
        let fs = PosixFs::new();
        let mut f = fs.create(&path).expect("create");
        f.append(b"head").expect("append");
        f.reserve(4 << 20);
        f.append(&vec![7u8; 200_000]).expect("append");
        f.flush().expect("flush");
        let during = std::fs::metadata(&path).expect("metadata");
        assert_eq!(during.len(), 200_004, "reserving never changes the size");
        f.close().expect("close");
        let after = std::fs::metadata(&path).expect("metadata");
        assert_eq!(after.len(), 200_004);
        // 512-byte blocks: what is allocated covers the data, not the 4 MiB reserved.
        assert!(after.blocks() * 512 < 1 << 20, "{} blocks", after.blocks());
        assert_eq!(fs.file_size(&path).expect("size"), 200_004);
    }

    #[test]
    fn posix_mapped_log_survives_a_crash_and_trims_on_close() {
        use crate::wal::{LogKind, LogReader, LogWriter};
        let tmp = tempfile::tempdir().expect("tempdir");
        let fs = PosixFs::new();
        let path = tmp.path().join("000001.log");
        let records: Vec<Vec<u8>> = (0..2000u32)
            .map(|i| vec![(i % 251) as u8; (i % 700) as usize])
            .collect();
        let mut w = LogWriter::new(
            fs.create_log(&path).expect("create"),
            path.clone(),
            LogKind::Wal,
            1,
        )
        .expect("writer");
        for r in &records {
            w.add_record(r).expect("add");
        }
        w.flush().expect("flush");
        // As after a crash: the preallocated zero tail is still there, and reads as the end.
        let written = w.file_size();
        assert!(
            fs.file_size(&path).expect("size") > written,
            "the log is preallocated"
        );
        let read_back = |fs: &PosixFs| {
            let mut r = LogReader::new(
                fs.open_sequential(&path).expect("open"),
                path.clone(),
                LogKind::Wal,
                Some(1),
            );
            let mut out = Vec::new();
            while let Some(rec) = r.read_record().expect("read") {
                out.push(rec);
            }
            out
        };
        assert_eq!(read_back(&fs), records);
        w.sync().expect("sync");
        w.close().expect("close");
        assert_eq!(
            fs.file_size(&path).expect("size"),
            written,
            "close trims the zero tail"
        );
        assert_eq!(read_back(&fs), records);
    }

    #[test]
    fn posix_reused_log_writes_through_the_kept_map() {
        use crate::wal::{LogKind, LogReader, LogWriter};
        let tmp = tempfile::tempdir().expect("tempdir");
        let fs = PosixFs::new();
        let log = |n: u64| tmp.path().join(format!("{n:06}.log"));
        let records = |tag: u8, n: usize| -> Vec<Vec<u8>> {
            (0..n)
                .map(|i| vec![tag.wrapping_add(i as u8); 100 + i % 900])
                .collect()
        };
        let writer = |file: Box<dyn WritableFile>, n: u64, recs: &[Vec<u8>]| {
            let mut w = LogWriter::new(file, log(n), LogKind::Wal, n).expect("writer");
            for r in recs {
                w.add_record(r).expect("add");
            }
            w.flush().expect("flush");
            w
        };
        let read = |n: u64| {
            let file = fs.open_sequential(&log(n)).expect("open");
            let mut r = LogReader::new(file, log(n), LogKind::Wal, Some(n));
            let mut out = Vec::new();
            while let Some(rec) = r.read_record().expect("read") {
                out.push(rec);
            }
            out
        };
        // About 5.5 MB: the map outgrows its first chunk, so the kept map spans two.
        let old = records(1, 10_000);
        let new = records(9, 3_000);
        writer(fs.create_log(&log(1)).expect("create"), 1, &old)
            .close()
            .expect("close");
        assert_eq!(fs.kept_logs(), vec![log(1)]);
        let reused = fs.reuse_log(&log(1), &log(2)).expect("reuse");
        assert!(fs.kept_logs().is_empty(), "the reuse took the kept map");
        assert!(!fs.exists(&log(1)));
        let mut w = writer(reused, 2, &new);
        // Not closed (as after a crash): the old log's bytes past the new one read as its end.
        assert_eq!(read(2), new);
        w.close().expect("close");
        assert_eq!(fs.file_size(&log(2)).expect("size"), w.file_size());
        assert_eq!(read(2), new);
        assert_eq!(fs.kept_logs(), vec![log(2)]);
        // A longer log through a shorter kept one: past the old end, then past the old map.
        let mut w = writer(fs.reuse_log(&log(2), &log(3)).expect("reuse"), 3, &old);
        w.close().expect("close");
        assert_eq!(read(3), old);
        // Removing the file drops its map, so its blocks are freed.
        fs.remove(&log(3)).expect("remove");
        assert!(fs.kept_logs().is_empty());

        // A kept log whose file was replaced behind the file system's back is not written
        // through: the new log goes to the file now at the path.
        writer(fs.create_log(&log(5)).expect("create"), 5, &old[..50])
            .close()
            .expect("close");
        std::fs::remove_file(log(5)).expect("remove");
        std::fs::write(log(5), vec![0xAB; 3 * 32 * 1024]).expect("replace");
        writer(fs.reuse_log(&log(5), &log(6)).expect("reuse"), 6, &new)
            .close()
            .expect("close");
        assert_eq!(read(6), new);

        // Only the newest few maps are kept.
        for n in 10..16 {
            writer(fs.create_log(&log(n)).expect("create"), n, &old[..10])
                .close()
                .expect("close");
        }
        assert_eq!(fs.kept_logs(), (12..16).map(log).collect::<Vec<_>>());
    }

    #[test]
    fn mem_fs_contract() {
        exercise(&MemFs::new(), Path::new("/mem/db"));
    }
}
