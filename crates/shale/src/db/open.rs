//! Opening a database: the lock, creation or recovery of the manifest, WAL replay into level-0
//! tables, and the start of background threads. What recovery finds is durable before `open`
//! returns: replayed writes are flushed to tables and recorded in a new manifest.

use std::collections::{BTreeSet, VecDeque};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;

use arc_swap::ArcSwap;
use parking_lot::{Condvar, Mutex};

use super::{Db, DbInner, DbState, ReadView};
use crate::batch::{blob_ref_of, WalMarker, WriteBatch};
use crate::blob::BlobCache;
use crate::cache::BlockCache;
use crate::env::Fs;
use crate::error::{Error, Result};
use crate::filename::{
    blob_file_name, current_file_name, lock_file_name, parse_file_name, wal_file_name, FileType,
};
use crate::iter::InternalIterator;
use crate::key::InternalKeyComparator;
use crate::memtable::{ChunkPool, MemTable};
use crate::options::Options;
use crate::snapshot::SnapshotList;
use crate::table_cache::TableCache;
use crate::version::{VersionEdit, VersionSet};
use crate::wal::{LogKind, LogReader, LogWriter};

/// Names of the files in `dir` that hold database data: manifests, tables, blob files, and
/// numbered `.log` files that start like a shale log (or cannot be read to tell). `open` and
/// repair decide with it whether a directory is a database, so that they agree: a `.log` that
/// is not shale's (`20240601.log`) makes no directory a database.
pub(super) fn database_files(fs: &dyn Fs, dir: &Path) -> Result<Vec<String>> {
    let mut found = Vec::new();
    for name in fs.list(dir)? {
        let data = match parse_file_name(&name) {
            Some(FileType::Manifest(_) | FileType::Table(_) | FileType::Blob(_)) => true,
            Some(FileType::Wal(_)) => !matches!(
                crate::wal::sniff_header(fs, &dir.join(&name)),
                Ok(crate::wal::HeaderSniff::Foreign | crate::wal::HeaderSniff::Blank)
            ),
            _ => false,
        };
        if data {
            found.push(name);
        }
    }
    found.sort();
    Ok(found)
}

/// A directory without `CURRENT` is a new database only if it holds no shale data: creating
/// one over a damaged database (its `CURRENT` lost) would overwrite its first manifest and
/// delete its tables as obsolete. An interrupted creation, which leaves `MANIFEST-000001` and
/// nothing else, is created again.
fn refuse_to_create_over_database_files(fs: &dyn Fs, dir: &Path) -> Result<()> {
    let mut found = database_files(fs, dir)?;
    found.retain(|name| parse_file_name(name) != Some(FileType::Manifest(1)));
    if found.is_empty() {
        return Ok(());
    }
    let shown: Vec<&str> = found.iter().take(5).map(|n| n.as_str()).collect();
    let more = found.len().saturating_sub(shown.len());
    Err(Error::corruption(
        current_file_name(dir),
        0,
        format!(
            "CURRENT is missing but the directory holds database files ({}{}): the database \
             is damaged, not absent (or half destroyed): nothing was changed; repair rebuilds \
             it (Db::repair, `shale repair`), destroy removes it",
            shown.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        ),
    ))
}

pub(crate) fn open(dir: &Path, options: Options) -> Result<Db> {
    options.validate()?;
    let fs = options.fs.clone();
    fs.create_dir_all(dir)?;
    let lock = fs.lock(&lock_file_name(dir))?;
    let icmp = InternalKeyComparator::new(options.comparator.clone());
    let mut versions = VersionSet::new(dir.to_path_buf(), options.clone());
    if fs.exists(&current_file_name(dir)) {
        if options.error_if_exists {
            return Err(Error::Exists(format!(
                "database {} already exists (error_if_exists is set)",
                dir.display()
            )));
        }
    } else {
        if !options.create_if_missing {
            return Err(Error::Exists(format!(
                "database {} does not exist (create_if_missing is false)",
                dir.display()
            )));
        }
        refuse_to_create_over_database_files(fs.as_ref(), dir)?;
        versions.create_new_db()?;
    }
    let recovered = versions.recover()?;

    let block_cache = (options.block_cache_capacity > 0)
        .then(|| Arc::new(BlockCache::new(options.block_cache_capacity)));
    let table_cache = Arc::new(TableCache::new(
        dir.to_path_buf(),
        &options,
        block_cache.clone(),
    ));

    let blob_cache = Arc::new(BlobCache::new(dir.to_path_buf(), options.fs.clone()));

    if options.paranoid_checks {
        let version = versions.current();
        for level in 0..crate::limits::NUM_LEVELS {
            for f in version.files(level) {
                table_cache.get(f.number)?;
            }
        }
    }

    // Replay every WAL the manifest does not yet cover, oldest first. Numbers of files the
    // manifest does not know (say, a table whose edit was lost with a torn manifest tail) are
    // never handed out again.
    let names = fs.list(dir)?;
    let mut wals: Vec<u64> = Vec::new();
    let mut obsolete_wals: Vec<u64> = Vec::new();
    for name in &names {
        match parse_file_name(name) {
            Some(FileType::Wal(n)) => {
                versions.mark_file_number_used(n);
                if n >= recovered.log_number {
                    wals.push(n);
                } else {
                    obsolete_wals.push(n);
                }
            }
            Some(FileType::Table(n) | FileType::Manifest(n) | FileType::Blob(n)) => {
                versions.mark_file_number_used(n)
            }
            // A crash between writing a temporary file and renaming it leaves it behind; no
            // thread of this process writes one yet, and none is ever read.
            Some(FileType::Temp) => {
                let path = dir.join(name);
                if let Err(e) = fs.remove(&path) {
                    tracing::warn!(file = %path.display(), %e, "cannot delete leftover temporary file");
                }
            }
            _ => {}
        }
    }
    wals.sort_unstable();
    let mut edit = VersionEdit::default();
    let mut last_sequence = recovered.last_sequence;
    let mut mem = Arc::new(MemTable::new(icmp.clone()));
    let replay = Replay {
        dir,
        options: &options,
        icmp: &icmp,
        blob_cache: &blob_cache,
        read_only: false,
    };
    let unread = replay.replay_all(
        &wals,
        &mut mem,
        &mut last_sequence,
        &mut versions,
        &mut edit,
    )?;
    if !mem.is_empty() {
        replay.flush_recovered(&mem, &mut versions, &mut edit)?;
    }

    // A fresh WAL for new writes; the replayed ones become obsolete with this edit. The file is
    // created only once the edit is durable: a crash in between must not leave a newer WAL
    // beside a replayed one whose torn tail is then no longer the newest.
    let wal_number = versions.new_file_number();
    edit.log_number = Some(wal_number);
    versions.set_last_sequence(last_sequence);
    versions.log_and_apply(edit)?;
    let wal_path = wal_file_name(dir, wal_number);
    let wal = LogWriter::new(
        fs.create_log(&wal_path)?,
        wal_path,
        LogKind::Wal,
        wal_number,
    )?;
    fs.sync_dir(dir)?;
    // The WALs replay stopped at or dropped and those below the log number recovery started
    // from are now obsolete, deleted just below; one that is not shale's is kept instead. Not
    // before the edit is durable: until then the manifest in force may still need a torn WAL
    // as the end of its writes, and an open that fails earlier changes nothing.
    obsolete_wals.extend(unread);
    set_aside_foreign_logs(fs.as_ref(), dir, &obsolete_wals)?;

    let chunk_pool = ChunkPool::new(
        options.write_buffer_size,
        options
            .write_buffer_size
            .saturating_mul(options.max_write_buffer_number),
        block_cache.clone(),
    );
    let mem = Arc::new(super::new_memtable(&options, &icmp, &chunk_pool));
    let inner = Arc::new(build_inner(Parts {
        chunk_pool,
        dir,
        blob_cache,
        options,
        icmp: icmp.clone(),
        table_cache,
        block_cache,
        versions,
        mem,
        wal: Some(wal),
        wal_number,
        last_sequence,
        lock: Some(lock),
        read_only: false,
    }));
    {
        let mut state = inner.state.lock();
        inner.delete_obsolete_files(&mut state);
    }
    let mut threads = Vec::new();
    for i in 0..inner.options.max_background_jobs {
        let worker = inner.clone();
        let handle = std::thread::Builder::new()
            .name(format!("shale-bg-{i}"))
            .spawn(move || worker.background_loop())
            .map_err(|e| Error::io("spawn background thread", dir, e))?;
        threads.push(handle);
    }
    inner.work_available.notify_all();
    Ok(Db { inner, threads })
}

/// Makes the blob files `edit` records durable, with their directory entries. The tables repair
/// writes reference blob records that the process which wrote them may never have synced;
/// once the repair's edit retires the WALs, the references must not outlive the bytes they
/// point at. (Recovery copies such values instead, see `Replay::flush_recovered`, because a
/// sync cannot revive bytes an earlier failed sync lost; repair salvages what is there.)
pub(crate) fn sync_blob_files(options: &Options, dir: &Path, edit: &VersionEdit) -> Result<()> {
    if edit.blob_files.is_empty() {
        return Ok(());
    }
    for &(number, _) in &edit.blob_files {
        options.fs.sync_file(&blob_file_name(dir, number))?;
    }
    options.fs.sync_dir(dir)
}

/// Everything a [`DbInner`] is made of.
struct Parts<'a> {
    chunk_pool: Arc<ChunkPool>,
    dir: &'a Path,
    blob_cache: Arc<BlobCache>,
    options: Options,
    icmp: InternalKeyComparator,
    table_cache: Arc<TableCache>,
    block_cache: Option<Arc<BlockCache>>,
    versions: VersionSet,
    mem: Arc<MemTable>,
    wal: Option<LogWriter>,
    wal_number: u64,
    last_sequence: u64,
    lock: Option<Box<dyn crate::env::FileLock>>,
    read_only: bool,
}

fn build_inner(p: Parts<'_>) -> DbInner {
    let view = ReadView::new(
        p.mem.clone(),
        Vec::new(),
        p.versions.current(),
        p.options.max_open_files,
    );
    DbInner {
        chunk_pool: p.chunk_pool,
        dir: p.dir.to_path_buf(),
        icmp: p.icmp,
        table_cache: p.table_cache,
        block_cache: p.block_cache,
        snapshots: Arc::new(SnapshotList::default()),
        state: Mutex::new(DbState {
            mem: p.mem,
            mem_wal_number: p.wal_number,
            imm: VecDeque::new(),
            recyclable_wals: Vec::new(),
            reclaiming: 0,
            first_own_wal: p.wal_number,
            versions: p.versions,
            bg_error: None,
            pending_outputs: BTreeSet::new(),
            deleting: BTreeSet::new(),
            flushed_mems: Vec::new(),
            writers: VecDeque::new(),
            sync_cohort: super::SyncCohort::default(),
            flush_running: false,
            compaction_running: false,
            manual_waiting: 0,
        }),
        background_done: Condvar::new(),
        work_available: Condvar::new(),
        cohort_arrived: Condvar::new(),
        sealed_wals: Mutex::new(Vec::new()),
        wal: Mutex::new(p.wal),
        blob_writer: Mutex::new(None),
        blob_cache: p.blob_cache,
        last_sequence: AtomicU64::new(p.last_sequence),
        crowded_writes: AtomicU64::new(0),
        view: ArcSwap::from_pointee(view),
        stats: Default::default(),
        shutting_down: AtomicBool::new(false),
        read_only: p.read_only,
        _lock: p.lock,
        options: p.options,
    }
}

/// Opens the database without writing anything: no lock, no new WAL or manifest, no
/// background work. The WAL is replayed into memory. Another process may be writing the
/// database meanwhile; this handle sees the state as of its open.
pub(crate) fn open_read_only(dir: &Path, options: Options) -> Result<Db> {
    options.validate()?;
    let fs = options.fs.clone();
    if !fs.exists(&current_file_name(dir)) {
        return Err(Error::Exists(format!(
            "database {} does not exist",
            dir.display()
        )));
    }
    let icmp = InternalKeyComparator::new(options.comparator.clone());
    let mut versions = VersionSet::new(dir.to_path_buf(), options.clone());
    let recovered = versions.recover()?;
    let block_cache = (options.block_cache_capacity > 0)
        .then(|| Arc::new(BlockCache::new(options.block_cache_capacity)));
    let table_cache = Arc::new(TableCache::new(
        dir.to_path_buf(),
        &options,
        block_cache.clone(),
    ));
    let mut wals: Vec<u64> = fs
        .list(dir)?
        .iter()
        .filter_map(|name| match parse_file_name(name) {
            Some(FileType::Wal(n)) if n >= recovered.log_number => Some(n),
            _ => None,
        })
        .collect();
    wals.sort_unstable();
    let mut mem = Arc::new(MemTable::new(icmp.clone()));
    let mut last_sequence = recovered.last_sequence;
    let mut edit = VersionEdit::default();
    let blob_cache = Arc::new(BlobCache::new(dir.to_path_buf(), options.fs.clone()));
    let replay = Replay {
        dir,
        options: &options,
        icmp: &icmp,
        blob_cache: &blob_cache,
        read_only: true,
    };
    replay.replay_all(
        &wals,
        &mut mem,
        &mut last_sequence,
        &mut versions,
        &mut edit,
    )?;
    let inner = Arc::new(build_inner(Parts {
        chunk_pool: ChunkPool::new(0, 0, None),
        dir,
        blob_cache,
        options,
        icmp,
        table_cache,
        block_cache,
        versions,
        mem,
        wal: None,
        wal_number: 0,
        last_sequence,
        lock: None,
        read_only: true,
    }));
    Ok(Db {
        inner,
        threads: Vec::new(),
    })
}

/// Moves each of the numbered `.log` files `wals` that does not start like a shale log (nor
/// with zeros) into `lost/` (see [`move_into_lost`]), with a warning: `open` is about to delete
/// them as obsolete WALs, replayed in part or not at all, and such a file (which reads as a WAL
/// torn at its first byte) is another program's, or a WAL whose start is damaged (the two look
/// alike, and a header a crash tore can too: keeping its few bytes costs nothing, deleting
/// someone's file costs their data). Out of descriptors or memory, the open fails, to be
/// retried; a file that cannot be read to tell for another reason is taken as shale's.
fn set_aside_foreign_logs(fs: &dyn Fs, dir: &Path, wals: &[u64]) -> Result<()> {
    for &number in wals {
        let path = wal_file_name(dir, number);
        match crate::wal::sniff_header(fs, &path) {
            Ok(crate::wal::HeaderSniff::Foreign) => {}
            Err(e) if e.is_out_of_handles() => return Err(e),
            Ok(_) | Err(_) => continue,
        }
        let kept = move_into_lost(fs, dir, &path)?;
        tracing::warn!(
            file = %path.display(),
            kept = %kept.display(),
            "a numbered .log without a shale log header (another program's file, or a WAL \
             whose start is damaged) was moved into lost/, not deleted; nothing was read from it"
        );
    }
    Ok(())
}

/// The first of `dir/name`, `dir/name.1`, `dir/name.2`, ..., from the `from`th on, that does
/// not exist, and its index: where a file is kept in `lost/` beside files an earlier open or
/// repair kept there under the same name. A caller that finds the name taken after all asks
/// again from the next index.
pub(super) fn free_name_in(
    fs: &dyn Fs,
    dir: &Path,
    name: &str,
    from: u32,
) -> (std::path::PathBuf, u32) {
    let mut copy = from;
    loop {
        let dest = match copy {
            0 => dir.join(name),
            n => dir.join(format!("{name}.{n}")),
        };
        if !fs.exists(&dest) {
            return (dest, copy);
        }
        copy += 1;
    }
}

/// Moves `path` into `dir/lost/` under a free name ([`free_name_in`]), and syncs both
/// directories so the move is durable before the caller goes on. Returns the new path.
fn move_into_lost(fs: &dyn Fs, dir: &Path, path: &Path) -> Result<std::path::PathBuf> {
    let lost = dir.join("lost");
    fs.create_dir_all(&lost)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (dest, _) = free_name_in(fs, &lost, &name, 0);
    fs.rename(path, &dest)?;
    fs.sync_dir(&lost)?;
    fs.sync_dir(dir)?;
    Ok(dest)
}

struct Replay<'a> {
    dir: &'a Path,
    options: &'a Options,
    icmp: &'a InternalKeyComparator,
    /// Checks the blob references of replayed batches.
    blob_cache: &'a BlobCache,
    /// Keep everything in memory: nothing may be written.
    read_only: bool,
}

impl Replay<'_> {
    /// Replays `wals` (ascending numbers) in order, up to the first torn tail. Returns the WAL
    /// replay stopped at (torn, cut short before its seal record, or at a record whose blob is
    /// missing) and every newer one; none if replay went through them all.
    ///
    /// A memtable switch seals a WAL without syncing it (`switch_memtable`), so after a power
    /// loss any WAL can end torn, not only the newest. Nothing newer than a tear was synced,
    /// though: the first synced write after a switch syncs the sealed WALs before its own
    /// record and marks that in its WAL ([`WriteBatch::wal_marker`]). So recovery keeps the
    /// writes up to the first tear and drops every newer WAL, which keeps a prefix of the
    /// writes; and a damaged WAL that a newer WAL's marker says was synced is corruption.
    fn replay_all(
        &self,
        wals: &[u64],
        mem: &mut Arc<MemTable>,
        last_sequence: &mut u64,
        versions: &mut VersionSet,
        edit: &mut VersionEdit,
    ) -> Result<Vec<u64>> {
        for &number in wals {
            versions.mark_file_number_used(number);
        }
        for (i, &number) in wals.iter().enumerate() {
            let newer = &wals[i + 1..];
            let whole = self.replay_wal(number, newer, mem, last_sequence, versions, edit)?;
            if !whole {
                if !newer.is_empty() {
                    tracing::warn!(
                        wal = number,
                        dropped_wals = ?newer,
                        "dropped the WALs newer than a torn one: none of their writes was synced"
                    );
                }
                return Ok(wals[i..].to_vec());
            }
        }
        Ok(Vec::new())
    }

    /// Refuses damage in a WAL that is known to have been synced whole: a newer WAL's sync
    /// marker says so, or it is an older-format WAL that is not the newest (format 1 synced
    /// every WAL before starting the next). Accepts it, as a torn tail, otherwise.
    fn check_tear_allowed(
        &self,
        path: &Path,
        offset: u64,
        reason: &str,
        version: Option<u32>,
        newer: &[u64],
    ) -> Result<()> {
        if newer.is_empty() {
            return Ok(());
        }
        if version == Some(1) {
            return Err(Error::corruption(
                path,
                offset,
                format!("{reason} in a WAL that is not the newest"),
            ));
        }
        if WalMarker::sync_recorded_in(self.options.fs.as_ref(), self.dir, newer) {
            return Err(Error::corruption(
                path,
                offset,
                format!("{reason} in a WAL that a newer WAL records as synced"),
            ));
        }
        Ok(())
    }

    /// Applies one WAL's batches to `mem`, flushing it to level 0 whenever it fills. Returns
    /// false when the WAL ended in a torn tail (dropped, with a warning).
    fn replay_wal(
        &self,
        number: u64,
        newer: &[u64],
        mem: &mut Arc<MemTable>,
        last_sequence: &mut u64,
        versions: &mut VersionSet,
        edit: &mut VersionEdit,
    ) -> Result<bool> {
        let path = wal_file_name(self.dir, number);
        let file = self.options.fs.open_sequential(&path)?;
        let mut reader = LogReader::new(file, path.clone(), LogKind::Wal, Some(number));
        let mut records = 0u64;
        let mut sealed = false;
        while let Some(record) = reader.read_record()? {
            let offset = reader.last_record_offset();
            match WalMarker::of_record(&record) {
                Some(WalMarker::Seal) => {
                    // The seal is a WAL's last record. A reused file whose trim at close was
                    // lost with the power may still hold an earlier log's bytes after it.
                    sealed = true;
                    break;
                }
                Some(_) => {
                    sealed = false;
                    continue;
                }
                None => sealed = false,
            }
            let batch = WriteBatch::from_data(record, &path, offset)?;
            if let Err(e) = self.check_blob_references(&batch) {
                // Only a missing blob file or blob bytes that fail their checks say the value
                // never became durable. Any other failure (EIO, EMFILE, a map that failed)
                // says nothing about the data: stop the open, change nothing, and let the
                // caller retry, rather than retire the WALs' tails for good.
                if !(matches!(e, Error::Corruption { .. }) || e.is_not_found()) {
                    return Err(e);
                }
                // The record was written but its blob bytes never became durable: unless the
                // WAL was synced, the write was not, so it and everything after it are a torn
                // tail.
                let version = reader.format_version();
                self.check_tear_allowed(&path, offset, &e.to_string(), version, newer)?;
                tracing::warn!(
                    wal = %path.display(),
                    offset,
                    error = %e,
                    "dropped the WAL tail from a record whose blob value is missing"
                );
                return Ok(false);
            }
            let first = batch.sequence();
            batch.insert_into(mem)?;
            let last = first + u64::from(batch.count()).saturating_sub(1);
            *last_sequence = (*last_sequence).max(last);
            records += 1;
            if !self.read_only && mem.approximate_memory_usage() >= self.options.write_buffer_size {
                self.flush_recovered(mem, versions, edit)?;
                *mem = Arc::new(MemTable::new(self.icmp.clone()));
            }
        }
        let version = reader.format_version();
        if let Some(torn) = reader.torn_tail() {
            self.check_tear_allowed(&path, torn.offset, &torn.reason.to_string(), version, newer)?;
            tracing::warn!(
                wal = %path.display(),
                offset = torn.offset,
                dropped_bytes = torn.dropped_bytes,
                reason = %torn.reason,
                "dropped torn WAL tail"
            );
            return Ok(false);
        }
        if !newer.is_empty() && !sealed && version != Some(1) {
            // Cut short at a record boundary: a power loss kept only part of a WAL that was
            // sealed but not synced.
            let end = reader.last_record_offset();
            self.check_tear_allowed(
                &path,
                end,
                "the WAL ends before its seal record",
                version,
                newer,
            )?;
            tracing::warn!(
                wal = %path.display(),
                records,
                "a WAL that is not the newest ends before its seal record: dropped what follows"
            );
            return Ok(false);
        }
        tracing::debug!(wal = %path.display(), records, "replayed WAL");
        Ok(true)
    }

    /// Reads back every value `batch` keeps in a blob file, checking it is whole and belongs to
    /// its key.
    fn check_blob_references(&self, batch: &WriteBatch) -> Result<()> {
        if !batch.has_blob_index() {
            return Ok(());
        }
        for entry in batch.iter() {
            let entry = entry?;
            if let Some(r) = blob_ref_of(entry.kind, entry.value) {
                self.blob_cache.read(Some(entry.key), &r)?;
            }
        }
        Ok(())
    }

    /// Writes `mem` to a level-0 table recorded in `edit`. The values its blob references
    /// point at are copied into a new blob file, synced before the table, and the table
    /// references the copies: the replayed WALs' blob files may hold bytes an earlier failed
    /// sync left in the page cache only (such bytes never become durable, whoever syncs them
    /// later), and the edit that retires those WALs must not leave tables pointing at them.
    fn flush_recovered(
        &self,
        mem: &Arc<MemTable>,
        versions: &mut VersionSet,
        edit: &mut VersionEdit,
    ) -> Result<()> {
        let number = versions.new_file_number();
        let blob_number = versions.new_file_number();
        let mut iter = BlobCopier {
            inner: mem.iter(),
            cache: self.blob_cache,
            fs: self.options.fs.as_ref(),
            dir: self.dir,
            number: blob_number,
            writer: None,
            value: None,
            error: None,
        };
        iter.seek_to_first();
        let mut blobs = super::background::BlobTally::new();
        let built = super::background::build_table(
            self.dir,
            self.options,
            number,
            &mut iter,
            mem.len(),
            &mut blobs,
        );
        let built = built.and_then(|meta| {
            iter.status()?;
            if let Some(w) = iter.writer.as_mut() {
                w.flush()?;
                w.sync(self.options.fs.as_ref())?;
                w.close()?;
            }
            Ok(meta)
        });
        let meta = match built {
            Ok(meta) => meta,
            Err(e) => {
                let _ = self
                    .options
                    .fs
                    .remove(&blob_file_name(self.dir, blob_number));
                return Err(e);
            }
        };
        if let Some(meta) = meta {
            self.options.fs.sync_dir(self.dir)?;
            edit.add_file(0, meta);
            for (blob, bytes) in blobs {
                edit.add_blob_bytes(blob, bytes);
            }
        }
        Ok(())
    }
}

/// Walks a recovered memtable for a flush, copying every value a blob reference points at into
/// a new blob file and presenting the entry with a reference to the copy.
struct BlobCopier<'a> {
    inner: crate::memtable::MemTableIterator,
    cache: &'a BlobCache,
    fs: &'a dyn crate::env::Fs,
    dir: &'a Path,
    number: u64,
    writer: Option<crate::blob::BlobFileWriter>,
    /// The current entry's rewritten stored value, when it holds a blob reference.
    value: Option<Vec<u8>>,
    error: Option<Error>,
}

impl BlobCopier<'_> {
    fn copy_current(&mut self) {
        self.value = None;
        if self.error.is_some() || !self.inner.valid() {
            return;
        }
        let Some(p) = crate::key::parse_internal_key(self.inner.key()) else {
            return;
        };
        let Some(r) = blob_ref_of(p.kind, self.inner.value()) else {
            return;
        };
        let copied = (|| -> Result<Vec<u8>> {
            let value = self.cache.read(Some(p.user_key), &r)?;
            if self.writer.is_none() {
                self.writer = Some(crate::blob::BlobFileWriter::create(
                    self.fs,
                    self.dir,
                    self.number,
                )?);
            }
            let Some(w) = self.writer.as_mut() else {
                return Err(Error::ShuttingDown);
            };
            let moved = w.add(p.user_key, &value)?;
            let mut stored = Vec::with_capacity(40);
            if p.kind.is_expiring() {
                stored.extend_from_slice(self.inner.value().get(..8).unwrap_or(&[]));
            }
            moved.encode_to(&mut stored);
            Ok(stored)
        })();
        match copied {
            Ok(stored) => self.value = Some(stored),
            Err(e) => self.error = Some(e),
        }
    }
}

impl InternalIterator for BlobCopier<'_> {
    fn valid(&self) -> bool {
        self.error.is_none() && self.inner.valid()
    }
    fn seek_to_first(&mut self) {
        self.inner.seek_to_first();
        self.copy_current();
    }
    fn seek_to_last(&mut self) {
        self.inner.seek_to_last();
        self.copy_current();
    }
    fn seek(&mut self, target: &[u8]) {
        self.inner.seek(target);
        self.copy_current();
    }
    fn seek_for_prev(&mut self, target: &[u8]) {
        self.inner.seek_for_prev(target);
        self.copy_current();
    }
    fn next(&mut self) {
        self.inner.next();
        self.copy_current();
    }
    fn prev(&mut self) {
        self.inner.prev();
        self.copy_current();
    }
    fn key(&self) -> &[u8] {
        self.inner.key()
    }
    fn value(&self) -> &[u8] {
        match &self.value {
            Some(v) => v,
            None => self.inner.value(),
        }
    }
    fn status(&self) -> Result<()> {
        match &self.error {
            Some(e) => Err(e.duplicate()),
            None => self.inner.status(),
        }
    }
}

/// Deletes every file shale recognises in `dir`, then the directory if it is empty.
pub(crate) fn destroy(dir: &Path, options: &Options) -> Result<()> {
    let fs = options.fs.clone();
    if !fs.exists(dir) {
        return Ok(());
    }
    let lock_path = lock_file_name(dir);
    let lock = fs.lock(&lock_path)?;
    for name in fs.list(dir)? {
        match parse_file_name(&name) {
            Some(FileType::Lock) | None => {}
            Some(_) => fs.remove(&dir.join(&name))?,
        }
    }
    // What a crashed repair left is shale's too (`lost/` stays: it is kept for the user).
    super::repair::remove_scratch(fs.as_ref(), &dir.join(super::repair::SCRATCH_DIR))?;
    drop(lock);
    let _ = fs.remove(&lock_path);
    if fs.list(dir)?.is_empty() {
        fs.remove_dir(dir)?;
    }
    Ok(())
}
