//! Salvage of a damaged database directory: every readable entry of every table and WAL is
//! merged into a fresh sorted run, recorded by a brand-new manifest. Damaged files are moved to
//! `lost/` (never deleted), and the report says what could not be read.
//!
//! Rewriting everything (instead of reusing intact tables) keeps the result correct even when
//! salvaged tables would otherwise overlap in ways the level invariants forbid.
//!
//! Memory and descriptors: each table is opened once, alone, to read its first and last keys,
//! and closed. The tables are then dealt into runs whose key ranges do not overlap
//! ([`partition_into_runs`]), and the merge reads each run front to back with only its current
//! table open ([`TableRun`]), a block at a time: the entries of the database are never all in
//! memory, and the tables open at once are one per run, that is as many as overlap at one key
//! (plus one per table whose first or last key could not be read, each a run of its own).
//! When there are more runs than `max_open_files` allows open (less a few descriptors kept for
//! the files repair writes and the blob files it checks, of which it keeps about
//! [`OPEN_BLOB_FILES`] open), groups of runs are first merged into intermediate tables
//! ([`merge_down_to`]). Intermediate and new tables are written in a scratch directory
//! ([`SCRATCH_DIR`]); the new ones move into the database's directory once every one is
//! written and checked, and the scratch directory is then removed. A WAL, whose records
//! are not sorted, is replayed into a memtable of its own first (a WAL holds about one write
//! buffer's worth).
//!
//! Blob files stay where they are and are never rewritten: an entry keeps its blob reference
//! when the record it names reads back intact (else the entry is dropped and reported), and the
//! new manifest records each blob file with the bytes the new tables reference. The blob files
//! are synced before that manifest edit; unreferenced ones are deleted at the next open.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use super::background::{tally_blob_reference, BlobTally};
use crate::batch::{blob_ref_of, WriteBatch};
use crate::blob::BlobCache;
use crate::error::{Error, Result};
use crate::filename::{
    current_file_name, lock_file_name, parse_file_name, table_file_name, wal_file_name, FileType,
    MAX_FILE_NUMBER,
};
use crate::iter::{InternalIterator, MergingIterator};
use crate::key::{parse_internal_key, InternalKeyComparator};
use crate::memtable::MemTable;
use crate::options::Options;
use crate::sstable::{ReadFlags, TableBuilder, TableOptions, TableReader};
use crate::version::{VersionEdit, VersionSet};
use crate::wal::{HeaderSniff, LogKind, LogReader};

/// What [`crate::Db::repair`] found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RepairReport {
    /// Table files examined.
    pub tables_scanned: usize,
    /// WAL files examined.
    pub wals_scanned: usize,
    /// Entries recovered into the repaired database.
    pub entries_recovered: u64,
    /// WAL records replayed.
    pub wal_records_recovered: u64,
    /// One line per file (or part of one) that could not be read, saying what was lost.
    pub problems: Vec<String>,
    /// Files moved into the `lost/` directory.
    pub moved_to_lost: Vec<PathBuf>,
    /// Tables written by the repair.
    pub tables_written: usize,
    /// Tables written by intermediate merges and removed once the repair is done: more tables
    /// overlapped than repair may hold open at once (`max_open_files`, less a few descriptors
    /// kept for other files), so groups of them were merged first. 0 in most repairs.
    pub intermediate_tables: usize,
}

/// Salvages what it can from `dir` into a consistent database.
pub(crate) fn repair(dir: &Path, options: &Options) -> Result<RepairReport> {
    options.validate()?;
    let fs = options.fs.clone();
    if !fs.exists(dir) {
        return Err(Error::Exists(format!("{} does not exist", dir.display())));
    }
    // Before the lock, which would create `LOCK` in a directory that is not a database.
    ensure_database_files(fs.as_ref(), dir)?;
    let _lock = fs.lock(&lock_file_name(dir))?;
    let icmp = InternalKeyComparator::new(options.comparator.clone());
    let table_options = TableOptions::from_options(options);
    let mut report = RepairReport::default();
    let mut tables = Vec::new();
    let mut wals = Vec::new();
    let mut manifests = Vec::new();
    let mut max_number = 1;
    for name in fs.list(dir)? {
        match parse_file_name(&name) {
            Some(FileType::Table(n)) => tables.push(n),
            Some(FileType::Wal(n)) => wals.push(n),
            Some(FileType::Manifest(n)) => manifests.push(n),
            Some(FileType::Blob(_)) => {}
            _ => continue,
        }
        if let Some(
            FileType::Table(n) | FileType::Wal(n) | FileType::Manifest(n) | FileType::Blob(n),
        ) = parse_file_name(&name)
        {
            max_number = max_number.max(n);
        }
    }
    tables.sort_unstable();
    wals.sort_unstable();
    // A table the old manifest names may be missing (often why repair runs): no new file may
    // take its number, or the old manifest would name the new file should the repair stop
    // before it is replaced.
    max_number = max_number.max(numbers_named_by(fs.as_ref(), dir, &manifests)?);

    // A `.log` with a number for a name need not be shale's; one that is not is moved aside
    // with the damaged files rather than read as a log torn at its first byte and deleted.
    let mut foreign_logs = Vec::new();
    wals.retain(|&n| {
        let path = wal_file_name(dir, n);
        // An unreadable one is kept, so the log reader, which opens it next, reports why.
        let foreign = matches!(
            crate::wal::sniff_header(fs.as_ref(), &path),
            Ok(HeaderSniff::Foreign)
        );
        if foreign {
            foreign_logs.push(path);
        }
        !foreign
    });

    let mut sources: Vec<Box<dyn InternalIterator>> = Vec::new();
    let mut damaged: Vec<PathBuf> = Vec::new();
    let mut last_sequence = 0u64;
    for path in foreign_logs {
        // Another program's file, or a log whose first bytes are damaged: the two look alike,
        // so it counts as a loss.
        report.problems.push(format!(
            "{}: no shale log header (another program's file, or a log whose start is \
             damaged), moved aside unread; any writes in it are lost",
            path.display()
        ));
        damaged.push(path);
    }

    for &n in &wals {
        report.wals_scanned += 1;
        let path = wal_file_name(dir, n);
        let mem = Arc::new(MemTable::new(icmp.clone()));
        let mut reader =
            LogReader::new(fs.open_sequential(&path)?, path.clone(), LogKind::Wal, None);
        loop {
            match reader.read_record() {
                Ok(Some(record)) => {
                    let offset = reader.last_record_offset();
                    if crate::batch::WalMarker::of_record(&record).is_some() {
                        // Markers carry no writes.
                        continue;
                    }
                    match WriteBatch::from_data(record, &path, offset) {
                        Ok(batch) => {
                            batch.insert_into(&mem)?;
                            last_sequence = last_sequence
                                .max(batch.sequence() + u64::from(batch.count()).saturating_sub(1));
                            report.wal_records_recovered += 1;
                        }
                        Err(e) => report
                            .problems
                            .push(format!("{}: skipped a record: {e}", path.display())),
                    }
                }
                Ok(None) => {
                    if let Some(torn) = reader.torn_tail() {
                        report.problems.push(format!(
                            "{}: dropped {} bytes of torn tail at offset {}",
                            path.display(),
                            torn.dropped_bytes,
                            torn.offset
                        ));
                    }
                    break;
                }
                Err(e) => {
                    report.problems.push(format!(
                        "{}: rest of the log unreadable: {e}",
                        path.display()
                    ));
                    damaged.push(path.clone());
                    break;
                }
            }
        }
        let mut it = mem.iter();
        it.seek_to_first();
        sources.push(Box::new(it));
    }

    let salvage_log = Arc::new(Mutex::new(SalvageLog::default()));
    let opener = TableOpener {
        fs: fs.clone(),
        table_options: table_options.clone(),
        icmp: icmp.clone(),
        log: salvage_log.clone(),
    };
    // Each table is opened on its own to read its first and last keys, then closed: the merge
    // below reopens it only when it reaches it.
    let mut spans = Vec::new();
    for &n in &tables {
        report.tables_scanned += 1;
        let path = table_file_name(dir, n);
        match opener.open(n, &path) {
            Ok(table) => spans.push(TableSpan {
                number: n,
                range: key_range(&table, &icmp),
                file_size: table.properties().file_size,
                intermediate: false,
                path,
            }),
            Err(e) => {
                let e = damage_or_stop(e)?;
                report.problems.push(format!(
                    "{}: unreadable, all of it lost: {e}",
                    path.display()
                ));
                damaged.push(path);
            }
        }
    }

    // The salvaged entries go into new tables numbered after every existing file, written in a
    // scratch directory and moved into the database's only once every one is written and
    // checked: neither an open nor a later repair ever takes a table a crash cut short for
    // one of the database's (it would read as damaged). The old manifests are replaced only
    // after that: a repair that fails before then leaves the directory as it found it, apart
    // from the new tables, which it removes, so it can be run again (and an open in between
    // finds the old manifest, not an empty one that would make the old tables look obsolete).
    let first_number = max_number.saturating_add(1);
    let mut next_number = first_number;
    let mut edit = VersionEdit::default();
    let scratch = dir.join(SCRATCH_DIR);
    remove_scratch(fs.as_ref(), &scratch)?;
    fs.create_dir_all(&scratch)?;
    let built = (|| {
        let runs = merge_down_to(
            partition_into_runs(spans, &icmp),
            fan_in(options),
            &opener,
            TableSink {
                dir,
                out: &scratch,
                options,
                table_options: &table_options,
                next_number: &mut next_number,
                edit: &mut edit,
                report: &mut report,
            },
        )?;
        sources.extend(
            runs.into_iter()
                .map(|run| Box::new(TableRun::new(run, &opener)) as Box<dyn InternalIterator>),
        );
        let mut merged = MergingIterator::new(icmp.clone(), std::mem::take(&mut sources));
        merged.seek_to_first();
        let written = write_tables(
            TableSink {
                dir,
                out: &scratch,
                options,
                table_options: &table_options,
                next_number: &mut next_number,
                edit: &mut edit,
                report: &mut report,
            },
            &mut merged,
        );
        drop(merged);
        // What stopped a run explains the merge's failure better than the merge does.
        opener.take_fatal()?;
        written
    })();
    {
        let mut log = salvage_log.lock();
        report.problems.append(&mut log.problems);
        damaged.append(&mut log.damaged);
        last_sequence = last_sequence.max(log.last_sequence);
    }
    let built = built
        .and_then(|()| {
            for (_, table) in &edit.new_files {
                let name = table_file_name(dir, table.number);
                fs.rename(&table_file_name(&scratch, table.number), &name)?;
            }
            // A rename between directories is durable once both are synced.
            fs.sync_dir(&scratch)?;
            fs.sync_dir(dir)
        })
        .and_then(|()| super::open::sync_blob_files(options, dir, &edit))
        // The manifest takes two more numbers (its log's and its own), and so must stay under
        // the largest a file name carries, or open would refuse what repair wrote.
        .and_then(|()| numbers_left(next_number, 2))
        .and_then(|()| keep_damaged(fs.as_ref(), dir, &mut damaged, &mut report));
    let to_move = match built {
        Ok(to_move) => to_move,
        Err(e) => {
            for n in first_number..next_number {
                let _ = fs.remove(&table_file_name(dir, n));
            }
            // The originals are all still in place: this attempt's copies in `lost/` go too.
            for kept in &report.moved_to_lost {
                let _ = fs.remove(kept);
            }
            let _ = remove_scratch(fs.as_ref(), &scratch);
            return Err(e);
        }
    };

    // A new manifest from scratch, numbered after every file, old and new, written whole and
    // named by CURRENT in one atomic step; only then do the old manifests go. Until that step
    // CURRENT keeps naming the old manifest (or stays missing), so a repair that stops halfway
    // leaves nothing that opens as a database without the salvaged tables.
    let mut versions = VersionSet::new(dir.to_path_buf(), options.clone());
    versions.reset_to_empty();
    versions.mark_file_number_used(next_number.saturating_sub(1));
    let log_number = versions.new_file_number();
    edit.log_number = Some(log_number);
    versions.set_last_sequence(last_sequence);
    versions.log_and_apply(edit)?;
    // The repair is done: what is left is tidying up, which an open finishes if it fails here
    // (every file below is obsolete now), so a failure is a warning, not an error.
    let tidy = |what: &str, path: &Path, result: Result<()>| {
        if let Err(e) = result {
            tracing::warn!(file = %path.display(), %e, "repair could not {what}");
        }
    };
    for &n in &manifests {
        let path = crate::filename::manifest_file_name(dir, n);
        tidy("remove an old manifest", &path, fs.remove(&path));
    }
    // The last resort for a file that could be neither linked nor copied. One that cannot be
    // moved either stays where it is, reported: the next open would delete it as obsolete.
    let mut stranded = Vec::new();
    let lost = dir.join("lost");
    for (path, name) in &to_move {
        let (dest, _) = super::open::free_name_in(fs.as_ref(), &lost, name, 0);
        match fs.rename(path, &dest) {
            Ok(()) => report.moved_to_lost.push(dest),
            Err(e) => {
                report.problems.push(format!(
                    "{}: could not be kept in lost/ ({e}); it is still in the database \
                     directory, where the next open deletes it: copy it away first",
                    path.display()
                ));
                stranded.push(path.clone());
            }
        }
    }
    let kept_elsewhere = |p: &PathBuf| !to_move.iter().any(|(m, _)| m == p);
    for path in damaged.iter().filter(|p| kept_elsewhere(p)) {
        tidy("remove a damaged file kept in lost/", path, fs.remove(path));
    }
    let stays = |p: &Path| stranded.iter().any(|s| s == p);
    for path in wals
        .iter()
        .map(|&n| wal_file_name(dir, n))
        .filter(|p| !stays(p))
    {
        let _ = fs.remove(&path);
    }
    for path in tables
        .iter()
        .map(|&n| table_file_name(dir, n))
        .filter(|p| !stays(p))
    {
        let _ = fs.remove(&path);
    }
    tidy(
        "remove its scratch directory",
        &scratch,
        remove_scratch(fs.as_ref(), &scratch),
    );
    tidy("sync the directory", dir, fs.sync_dir(dir));
    Ok(report)
}

/// Keeps every damaged file for forensics: links it into `lost/` under a free name (copies it,
/// through a temporary name, where the filesystem has no hard links) and makes the links
/// durable before the new manifest makes the originals obsolete, so that no crash lets an open
/// delete one unseen. The originals are removed once the manifest is in place. A file that
/// can be neither linked nor copied (unreadable, say) is returned with its file name, to be
/// moved there by rename after the manifest switch, as the last resort. Every name made is in
/// `report.moved_to_lost` (and removed again by a repair that stops before the switch).
fn keep_damaged(
    fs: &dyn crate::env::Fs,
    dir: &Path,
    damaged: &mut Vec<PathBuf>,
    report: &mut RepairReport,
) -> Result<Vec<(PathBuf, String)>> {
    // A file is named once however many of its reads failed.
    damaged.sort();
    damaged.dedup();
    let mut to_move = Vec::new();
    if damaged.is_empty() {
        return Ok(to_move);
    }
    let lost = dir.join("lost");
    fs.create_dir_all(&lost)?;
    // What a copy a crash cut short left behind is never a kept file.
    for name in fs.list(&lost)? {
        if name.ends_with(".copying") {
            fs.remove(&lost.join(name))?;
        }
    }
    for path in damaged.iter() {
        let Some(name) = path.file_name().map(|n| n.to_string_lossy().into_owned()) else {
            continue;
        };
        let mut from = 0;
        let dest = loop {
            // An earlier repair may have kept a file of the same name.
            let (dest, copy) = super::open::free_name_in(fs, &lost, &name, from);
            from = copy + 1;
            match fs.link(path, &dest) {
                Ok(()) => break Some(dest),
                Err(e) if e.is_out_of_handles() => return Err(e),
                Err(Error::Io { source, .. })
                    if source.kind() == std::io::ErrorKind::AlreadyExists =>
                {
                    continue
                }
                // No hard links here: a copy, or the rename after the switch.
                Err(_) => break copy_file(fs, path, &dest)?.then_some(dest),
            }
        };
        match dest {
            Some(dest) => report.moved_to_lost.push(dest),
            None => to_move.push((path.clone(), name)),
        }
    }
    fs.sync_dir(&lost)?;
    fs.sync_dir(dir)?;
    Ok(to_move)
}

/// Copies `from` to `to` through a temporary name beside `to`, synced before it takes its
/// name: `Ok(false)` (nothing left behind) if `from` cannot be read whole.
fn copy_file(fs: &dyn crate::env::Fs, from: &Path, to: &Path) -> Result<bool> {
    let mut temp = to.as_os_str().to_owned();
    temp.push(".copying");
    let temp = PathBuf::from(temp);
    let mut reader = match fs.open_sequential(from) {
        Ok(reader) => reader,
        Err(e) if e.is_out_of_handles() => return Err(e),
        Err(_) => return Ok(false),
    };
    let mut out = fs.create(&temp)?;
    let mut buf = vec![0u8; 256 * 1024];
    let copied = loop {
        match reader.read(&mut buf) {
            Ok(0) => break Ok(true),
            Ok(n) => {
                if let Err(e) = out.append(&buf[..n]) {
                    break Err(e);
                }
            }
            Err(e) if e.is_out_of_handles() => break Err(e),
            Err(_) => break Ok(false),
        }
    };
    let finished = copied.and_then(|whole| {
        if whole {
            out.sync()?;
            out.close()?;
        }
        Ok(whole)
    });
    match finished {
        Ok(true) => match fs.rename(&temp, to) {
            Ok(()) => Ok(true),
            Err(e) => {
                let _ = fs.remove(&temp);
                Err(e)
            }
        },
        other => {
            drop(out);
            let _ = fs.remove(&temp);
            other
        }
    }
}

/// The highest file number any of the `manifests` names or has promised (its next file
/// number less one). Read leniently, as far as records decode: a damaged manifest names what
/// it names up to its damage, and a number past [`MAX_FILE_NUMBER`] (which no file name can
/// carry, and open refuses) is ignored with a warning. An I/O error reading one stops the
/// repair (numbers it could not read might be taken by the new tables); damage or a newer
/// format ends what it names.
fn numbers_named_by(fs: &dyn crate::env::Fs, dir: &Path, manifests: &[u64]) -> Result<u64> {
    let mut highest = 0;
    for &n in manifests {
        let path = crate::filename::manifest_file_name(dir, n);
        let file = match fs.open_sequential(&path) {
            Ok(file) => file,
            Err(e) if e.is_not_found() => continue,
            Err(e) => return Err(e),
        };
        let mut reader = LogReader::new(file, path.clone(), LogKind::Manifest, Some(n));
        loop {
            let record = match reader.read_record() {
                Ok(Some(record)) => record,
                Err(Error::Io { path, source, .. }) => {
                    return Err(Error::Io {
                        op: "read a manifest for the file numbers it names (nothing was \
                             changed; move the manifest aside to repair without it)",
                        path,
                        source,
                    })
                }
                // The end, damage or a format this version does not read: what came before
                // is what it names.
                Ok(None) | Err(_) => break,
            };
            let Ok(edit) = VersionEdit::decode(&record) else {
                break;
            };
            let named = edit
                .new_files
                .iter()
                .map(|(_, f)| f.number)
                .chain(edit.blob_files.iter().map(|&(number, _)| number))
                .chain(edit.log_number)
                .chain(edit.next_file_number.map(|n| n.saturating_sub(1)));
            for number in named {
                if number > MAX_FILE_NUMBER {
                    tracing::warn!(
                        file = %path.display(),
                        number,
                        "repair ignores a file number past the largest a file name can carry"
                    );
                } else {
                    highest = highest.max(number);
                }
            }
        }
    }
    Ok(highest)
}

/// Refuses a directory with nothing of a shale database in it: repair would take its numbered
/// `.log` files for WALs and write a new database over it.
fn ensure_database_files(fs: &dyn crate::env::Fs, dir: &Path) -> Result<()> {
    if fs.exists(&current_file_name(dir)) || !super::open::database_files(fs, dir)?.is_empty() {
        return Ok(());
    }
    Err(Error::InvalidArgument(format!(
        "{} holds no shale database files (CURRENT, MANIFEST-NNNNNN, tables, blob files or \
         shale WALs): nothing to repair, and nothing was changed",
        dir.display()
    )))
}

/// Where [`write_tables`] puts what it writes.
struct TableSink<'a> {
    /// The database's directory (where the blob files are).
    dir: &'a Path,
    /// Where the new tables are written.
    out: &'a Path,
    options: &'a Options,
    table_options: &'a TableOptions,
    /// The number the next table gets; the numbers before it, from the first, are the tables
    /// begun so far (a failed repair removes them).
    next_number: &'a mut u64,
    /// Takes the new tables (level 1) and the blob bytes they reference.
    edit: &'a mut VersionEdit,
    report: &'a mut RepairReport,
}

/// Writes the entries of `merged` into new tables of at most about `max_file_size`, each
/// checked once finished ([`super::background::verify_table`]), dropping duplicates and
/// entries whose blob value cannot be read.
fn write_tables(sink: TableSink<'_>, merged: &mut MergingIterator) -> Result<()> {
    let TableSink {
        dir,
        out,
        options,
        table_options,
        next_number,
        edit,
        report,
    } = sink;
    let fs = options.fs.clone();
    let finish = |number: u64,
                  b: TableBuilder,
                  oldest_blob: u64,
                  edit: &mut VersionEdit,
                  report: &mut RepairReport|
     -> Result<()> {
        let props = b.finish()?;
        super::background::verify_table(fs.as_ref(), out, number)?;
        let mut meta = super::background::meta_from_properties(number, &props);
        meta.oldest_blob_file = oldest_blob;
        report.entries_recovered += meta.num_entries;
        report.tables_written += 1;
        edit.add_file(1, meta);
        Ok(())
    };
    // Blob files are kept where they are: entries that reference a readable blob record keep
    // their reference, and the blob files are recorded with the bytes the new tables reference.
    let blob_cache = BlobCache::with_capacity(dir.to_path_buf(), fs.clone(), OPEN_BLOB_FILES);
    let mut blobs = BlobTally::new();
    let mut oldest_blob = 0u64;
    let mut builder: Option<(u64, TableBuilder)> = None;
    let mut previous: Vec<u8> = Vec::new();
    while merged.valid() {
        let key = merged.key();
        // The same entry may survive in both a WAL and the table it was flushed to.
        if !previous.is_empty() && key == previous.as_slice() {
            merged.next();
            continue;
        }
        let new_user_key = crate::key::user_key(&previous) != crate::key::user_key(key);
        if let Some(p) = parse_internal_key(key) {
            if let Some(r) = blob_ref_of(p.kind, merged.value()) {
                if let Err(e) = blob_cache.read(Some(p.user_key), &r) {
                    // Out of descriptors is not damage: dropping the entry would lose it for
                    // good. The new tables are removed and nothing is changed.
                    if e.is_out_of_handles() {
                        return Err(e);
                    }
                    report.problems.push(format!(
                        "dropped an entry whose blob value is unreadable: {e}"
                    ));
                    merged.next();
                    continue;
                }
            }
        }
        if let Some((number, b)) = builder.take() {
            if new_user_key && b.file_size() >= options.max_file_size {
                finish(number, b, std::mem::take(&mut oldest_blob), edit, report)?;
            } else {
                builder = Some((number, b));
            }
        }
        let (_, b) = match builder.as_mut() {
            Some(b) => b,
            None => {
                let number = take_number(next_number)?;
                let path = table_file_name(out, number);
                let file = fs.create(&path)?;
                builder.insert((number, TableBuilder::new(table_options.clone(), file, path)))
            }
        };
        if let Some(blob) = tally_blob_reference(key, merged.value(), &mut blobs) {
            oldest_blob = if oldest_blob == 0 {
                blob
            } else {
                oldest_blob.min(blob)
            };
        }
        b.add(key, merged.value())?;
        previous.clear();
        previous.extend_from_slice(key);
        merged.next();
    }
    if let Some((number, b)) = builder.take() {
        finish(number, b, oldest_blob, edit, report)?;
    }
    merged.status()?;
    for (number, bytes) in blobs {
        edit.add_blob_bytes(number, bytes);
    }
    Ok(())
}

/// Takes the next file number for a table repair writes, refusing to go past the largest a file
/// name can carry (the repair then stops before it changes anything).
fn take_number(next_number: &mut u64) -> Result<u64> {
    numbers_left(*next_number, 1)?;
    let number = *next_number;
    *next_number += 1;
    Ok(number)
}

/// Fails unless `count` file numbers from `next_number` on stay below [`MAX_FILE_NUMBER`].
fn numbers_left(next_number: u64, count: u64) -> Result<()> {
    if next_number.saturating_add(count) > MAX_FILE_NUMBER {
        return Err(Error::InvalidArgument(format!(
            "repair would number a new file past {MAX_FILE_NUMBER}, the largest a file name can \
             carry (nothing was changed)"
        )));
    }
    Ok(())
}

/// Descriptors left for what repair opens besides the tables it reads (the blob files whose
/// values it checks, the table being written and its check, the lock, a few to spare):
/// `max_open_files` less these bounds the tables a merge holds open at once.
const RESERVED_FILES: usize = 10;

/// Blob files repair keeps open at once while it checks the values tables point to.
const OPEN_BLOB_FILES: usize = 4;

/// The directory, inside the database's, where repair writes its intermediate tables.
pub(crate) const SCRATCH_DIR: &str = "repair-scratch";

/// Removes the scratch directory and every file in it, if it exists (what a repair that
/// stopped, or crashed, left there is never data of the database).
pub(crate) fn remove_scratch(fs: &dyn crate::env::Fs, scratch: &Path) -> Result<()> {
    if !fs.exists(scratch) {
        return Ok(());
    }
    for name in fs.list(scratch)? {
        fs.remove(&scratch.join(name))?;
    }
    fs.remove_dir(scratch)
}

/// The first and last internal keys of `table`, read from its first and last blocks; `None`
/// when either cannot be read or parsed, or they are out of order (the table is then read
/// alone, unbounded). These, not the range its properties record, bound the table in its run:
/// properties that disagree with the entries must not cost entries.
fn key_range(table: &Arc<TableReader>, icmp: &InternalKeyComparator) -> Option<(Vec<u8>, Vec<u8>)> {
    let mut it = table.iter(SALVAGE_READ);
    it.seek_to_first();
    let first = it.valid().then(|| it.key().to_vec())?;
    it.seek_to_last();
    let last = it.valid().then(|| it.key().to_vec())?;
    checked_range(first, last, icmp)
}

/// `first` and `last` as a table's key range, if both parse as internal keys and are in order.
fn checked_range(
    first: Vec<u8>,
    last: Vec<u8>,
    icmp: &InternalKeyComparator,
) -> Option<(Vec<u8>, Vec<u8>)> {
    let sane = parse_internal_key(&first).is_some()
        && parse_internal_key(&last).is_some()
        && icmp.compare(&first, &last) != std::cmp::Ordering::Greater;
    sane.then_some((first, last))
}

/// How repair reads tables: checked, kept out of the block cache, released behind the reader.
const SALVAGE_READ: ReadFlags = ReadFlags {
    verify_checksums: true,
    fill_cache: false,
    release_behind: true,
};

/// The most runs of tables one merge reads at once (one table open per run).
fn fan_in(options: &Options) -> usize {
    options.max_open_files.saturating_sub(RESERVED_FILES).max(2)
}

/// Sorts an error met opening a table into a loss of that table (`Ok`, with the error to
/// report) or a reason to stop the repair before it changes anything (`Err`): a table written
/// with another comparator is not damaged, and running out of descriptors says nothing about
/// the table, so neither may set it aside as lost.
fn damage_or_stop(e: Error) -> Result<Error> {
    if e.is_out_of_handles() {
        return Err(match e {
            Error::Io { path, source, .. } => Error::Io {
                op: "open a table for repair (nothing was changed; raise the limit on open \
                     files and run it again)",
                path,
                source,
            },
            other => other,
        });
    }
    match e {
        Error::InvalidArgument(message) => Err(Error::InvalidArgument(format!(
            "{message}; repair must be run with the comparator the database was written with \
             (nothing was changed)"
        ))),
        other => Ok(other),
    }
}

/// Opens the tables repair reads, and hands on what stops it.
#[derive(Clone)]
struct TableOpener {
    fs: Arc<dyn crate::env::Fs>,
    table_options: TableOptions,
    icmp: InternalKeyComparator,
    log: Arc<Mutex<SalvageLog>>,
}

impl TableOpener {
    fn open(&self, number: u64, path: &Path) -> Result<Arc<TableReader>> {
        let file = self.fs.open_random(path)?;
        let table = TableReader::open(
            self.table_options.clone(),
            file,
            path.to_path_buf(),
            number,
            None,
        )?;
        Ok(Arc::new(table))
    }

    /// The error that made a [`TableRun`] stop, if one did.
    fn take_fatal(&self) -> Result<()> {
        match self.log.lock().fatal.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// The error that stops a repair when a table it opened moments before cannot be opened
/// again: that says more about the system (descriptors, permissions, the file replaced) than
/// about the table, which must not be set aside as lost for it.
fn reopen_failed(e: Error) -> Error {
    match e {
        Error::Io { path, source, .. } => Error::Io {
            op: "reopen a table for repair (it opened moments before; nothing was changed, \
                 run the repair again)",
            path,
            source,
        },
        other => other,
    }
}

/// A table repair read once, closed again, and will read through a [`TableRun`].
#[derive(Debug, Clone)]
struct TableSpan {
    number: u64,
    path: PathBuf,
    /// Its first and last internal keys (see [`key_range`]); `None` when they could not be
    /// read (the table is then read on its own, unbounded).
    range: Option<(Vec<u8>, Vec<u8>)>,
    file_size: u64,
    /// Written by this repair's intermediate merges: any damage met reading it is damage to
    /// what the repair just wrote, which stops the repair rather than losing entries the
    /// tables it came from still hold.
    intermediate: bool,
}

impl TableSpan {
    /// An intermediate table just written, whose properties record its keys exactly.
    fn written(
        number: u64,
        path: PathBuf,
        props: &crate::sstable::TableProperties,
        icmp: &InternalKeyComparator,
    ) -> TableSpan {
        TableSpan {
            number,
            path,
            range: checked_range(props.smallest_key.clone(), props.largest_key.clone(), icmp),
            file_size: props.file_size,
            intermediate: true,
        }
    }
}

/// Deals `spans` into runs of tables whose ranges do not overlap, each in key order, so that a
/// merge reads one table of each run at a time: as many runs as tables overlap at any key (the
/// depth of level 0 plus one per level in a database repair finds whole), not one per table.
/// Each table, in order of its smallest key, joins the first run whose last table ends before
/// it starts (which needs the fewest runs); a table with no range is a run of its own.
fn partition_into_runs(spans: Vec<TableSpan>, icmp: &InternalKeyComparator) -> Vec<Vec<TableSpan>> {
    let (mut ranged, unranged): (Vec<_>, Vec<_>) =
        spans.into_iter().partition(|s| s.range.is_some());
    let smallest = |s: &TableSpan| s.range.as_ref().map(|r| r.0.clone()).unwrap_or_default();
    ranged.sort_by(|a, b| {
        icmp.compare(&smallest(a), &smallest(b))
            .then(a.number.cmp(&b.number))
    });
    let mut runs: Vec<Vec<TableSpan>> = Vec::new();
    for span in ranged {
        let Some((start, _)) = span.range.as_ref() else {
            continue;
        };
        let fits = runs.iter().position(|run| {
            run.last()
                .and_then(|last| last.range.as_ref())
                .is_some_and(|(_, end)| icmp.compare(end, start) == std::cmp::Ordering::Less)
        });
        match fits {
            Some(i) => runs[i].push(span),
            None => runs.push(vec![span]),
        }
    }
    runs.extend(unranged.into_iter().map(|span| vec![span]));
    runs
}

/// Merges the smallest runs into one, a pass at a time, until at most `fan_in` are left: the
/// first pass merges just enough of them that the rest takes whole passes of `fan_in` (so the
/// fewest bytes are rewritten twice), later ones `fan_in` at a time. Each pass writes its run as new tables in the sink's
/// output directory (the scratch directory), numbered from the sink's next number; the intermediate
/// tables a pass read are removed once it is done. A pass keeps every entry but exact
/// duplicates (one entry found in two tables): older versions, deletions and blob references
/// are for the final merge to deal with.
fn merge_down_to(
    mut runs: Vec<Vec<TableSpan>>,
    fan_in: usize,
    opener: &TableOpener,
    mut sink: TableSink<'_>,
) -> Result<Vec<Vec<TableSpan>>> {
    let mut first = true;
    while runs.len() > fan_in {
        runs.sort_by_key(|run| run.iter().map(|s| s.file_size).sum::<u64>());
        // The first pass takes as many as leave a multiple of full passes after it: fewer
        // than `fan_in` when the count does not divide evenly, so the small runs are the ones
        // rewritten more than once.
        let take = if first {
            (runs.len() - 2) % (fan_in - 1) + 2
        } else {
            fan_in
        };
        first = false;
        let group: Vec<_> = runs.drain(..take).collect();
        let consumed: Vec<PathBuf> = group
            .iter()
            .flatten()
            .filter(|s| s.intermediate)
            .map(|s| s.path.clone())
            .collect();
        let merged = write_run(group, opener, &mut sink)?;
        if !merged.is_empty() {
            runs.push(merged);
        }
        for path in consumed {
            sink.options.fs.remove(&path)?;
        }
    }
    Ok(runs)
}

/// Writes the merge of `group` as one run of new tables of about `max_file_size` each, each
/// checked once finished.
fn write_run(
    group: Vec<Vec<TableSpan>>,
    opener: &TableOpener,
    sink: &mut TableSink<'_>,
) -> Result<Vec<TableSpan>> {
    let sources = group
        .into_iter()
        .map(|run| Box::new(TableRun::new(run, opener)) as Box<dyn InternalIterator>)
        .collect();
    let mut merged = MergingIterator::new(opener.icmp.clone(), sources);
    merged.seek_to_first();
    let fs = sink.options.fs.clone();
    let mut out = Vec::new();
    let mut builder: Option<(u64, TableBuilder)> = None;
    let mut previous: Vec<u8> = Vec::new();
    let mut finish = |number: u64, b: TableBuilder| -> Result<()> {
        let props = b.finish()?;
        super::background::verify_table(fs.as_ref(), sink.out, number)?;
        let path = table_file_name(sink.out, number);
        out.push(TableSpan::written(number, path, &props, &opener.icmp));
        Ok(())
    };
    while merged.valid() {
        let key = merged.key();
        // The same entry may survive in two tables (a compaction's input and its output).
        if key != previous.as_slice() {
            let (_, b) = match builder.as_mut() {
                Some(b) => b,
                None => {
                    let number = take_number(sink.next_number)?;
                    sink.report.intermediate_tables += 1;
                    let path = table_file_name(sink.out, number);
                    let file = sink.options.fs.create(&path)?;
                    let b = TableBuilder::new(sink.table_options.clone(), file, path);
                    builder.insert((number, b))
                }
            };
            b.add(key, merged.value())?;
            previous.clear();
            previous.extend_from_slice(key);
            if b.file_size() >= sink.options.max_file_size {
                if let Some((number, b)) = builder.take() {
                    finish(number, b)?;
                }
            }
        }
        merged.next();
    }
    if let Some((number, b)) = builder.take() {
        finish(number, b)?;
    }
    // What stopped a run explains the merge's failure better than the merge does.
    opener.take_fatal()?;
    merged.status()?;
    Ok(out)
}

/// Opens a table of a run as a salvaged source (an iterator of `I` in tests).
type OpenSpan<I> = Box<dyn FnMut(&TableSpan) -> Result<I> + Send>;

/// A run of tables whose ranges do not overlap, read in key order with only the table being
/// read open: the next one is opened when it ends. Each table is a [`SalvagedTable`] held to
/// the first and last keys found when it was scanned, so the run's order holds across tables
/// even when a table strays outside them (it ends there, logged as damaged). A table that
/// cannot be opened again, or damage to an intermediate table, stops the run: the error is
/// left in the log for the repair to return, and `status` reports that the run stopped.
struct TableRun<I> {
    spans: Vec<TableSpan>,
    open: OpenSpan<I>,
    icmp: InternalKeyComparator,
    log: Arc<Mutex<SalvageLog>>,
    /// The span of `current`, or the last one tried.
    index: usize,
    current: Option<SalvagedTable<I>>,
    /// The run stopped on an error that stops the repair.
    stopped: bool,
}

impl TableRun<crate::sstable::TableIterator> {
    fn new(spans: Vec<TableSpan>, opener: &TableOpener) -> Self {
        let o = opener.clone();
        let open: OpenSpan<_> =
            Box::new(move |span| Ok(o.open(span.number, &span.path)?.iter(SALVAGE_READ)));
        TableRun::with_opener(spans, open, opener.icmp.clone(), opener.log.clone())
    }
}

impl<I: InternalIterator> TableRun<I> {
    fn with_opener(
        spans: Vec<TableSpan>,
        open: OpenSpan<I>,
        icmp: InternalKeyComparator,
        log: Arc<Mutex<SalvageLog>>,
    ) -> Self {
        TableRun {
            spans,
            open,
            icmp,
            log,
            index: 0,
            current: None,
            stopped: false,
        }
    }

    /// Opens span `index`, or stops the run with the reason in the log.
    fn enter(&mut self, index: usize) -> Option<SalvagedTable<I>> {
        self.index = index;
        let span = &self.spans[index];
        match (self.open)(span) {
            Ok(inner) => Some(
                SalvagedTable::new(
                    inner,
                    self.icmp.clone(),
                    span.path.clone(),
                    self.log.clone(),
                )
                .within(span.range.clone())
                .strict(span.intermediate),
            ),
            Err(e) => {
                self.log.lock().fatal.get_or_insert(reopen_failed(e));
                self.stopped = true;
                None
            }
        }
    }

    /// Stops the run if a table it read left an error that stops the repair; true if so.
    fn stop_if_fatal(&mut self) -> bool {
        if !self.stopped && self.log.lock().fatal.is_some() {
            self.stopped = true;
            self.current = None;
        }
        self.stopped
    }

    /// Lands on the first entry at or after `target` (the first entry without one) in the
    /// spans from `index` on.
    fn forward_from(&mut self, mut index: usize, target: Option<&[u8]>) {
        self.current = None;
        while index < self.spans.len() && !self.stopped {
            if let Some(mut table) = self.enter(index) {
                match target {
                    Some(target) => table.seek(target),
                    None => table.seek_to_first(),
                }
                if table.valid() {
                    self.current = Some(table);
                    return;
                }
            }
            if self.stop_if_fatal() {
                return;
            }
            index += 1;
        }
    }

    /// Lands on the last entry at or before `target` (the last entry without one) in the
    /// spans up to `index`.
    fn backward_from(&mut self, mut index: Option<usize>, target: Option<&[u8]>) {
        self.current = None;
        while let Some(i) = index.filter(|_| !self.stopped) {
            if let Some(mut table) = self.enter(i) {
                match target {
                    Some(target) => table.seek_for_prev(target),
                    None => table.seek_to_last(),
                }
                if table.valid() {
                    self.current = Some(table);
                    return;
                }
            }
            if self.stop_if_fatal() {
                return;
            }
            index = i.checked_sub(1);
        }
    }
}

impl<I: InternalIterator> InternalIterator for TableRun<I> {
    fn valid(&self) -> bool {
        self.current.as_ref().is_some_and(|t| t.valid())
    }
    fn seek_to_first(&mut self) {
        self.forward_from(0, None);
    }
    fn seek_to_last(&mut self) {
        self.backward_from(self.spans.len().checked_sub(1), None);
    }
    fn seek(&mut self, target: &[u8]) {
        // The first span that does not end before the target (one without a range is a run's
        // only span).
        let first = self.spans.partition_point(|s| {
            s.range.as_ref().is_some_and(|(_, largest)| {
                self.icmp.compare(largest, target) == std::cmp::Ordering::Less
            })
        });
        self.forward_from(first, Some(target));
    }
    fn seek_for_prev(&mut self, target: &[u8]) {
        // Past the last span that starts at or before the target.
        let end = self.spans.partition_point(|s| {
            s.range.as_ref().is_none_or(|(smallest, _)| {
                self.icmp.compare(smallest, target) != std::cmp::Ordering::Greater
            })
        });
        self.backward_from(end.checked_sub(1), Some(target));
    }
    fn next(&mut self) {
        let Some(table) = self.current.as_mut() else {
            return;
        };
        table.next();
        if !table.valid() && !self.stop_if_fatal() {
            self.forward_from(self.index + 1, None);
        }
    }
    fn prev(&mut self) {
        let Some(table) = self.current.as_mut() else {
            return;
        };
        table.prev();
        if !table.valid() && !self.stop_if_fatal() {
            self.backward_from(self.index.checked_sub(1), None);
        }
    }
    fn key(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |t| t.key())
    }
    fn value(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |t| t.value())
    }
    fn status(&self) -> Result<()> {
        // Losses are in the log. So is the error that stopped the run, which the repair takes
        // from there; this one only ends the merge at once.
        if self.stopped {
            let path = self.spans.get(self.index).map(|s| s.path.clone());
            return Err(Error::io(
                "read a run of tables for repair",
                path.unwrap_or_default(),
                std::io::Error::other("stopped; the repair returns why"),
            ));
        }
        Ok(())
    }
    fn source(&self) -> Option<(&Path, u64)> {
        self.current.as_ref().and_then(|t| t.source())
    }
}

/// What the salvaged tables met while the merge read them.
#[derive(Default)]
struct SalvageLog {
    /// One line per table with skipped or lost entries.
    problems: Vec<String>,
    /// Tables damaged past some entry, to be moved to `lost/`.
    damaged: Vec<PathBuf>,
    /// The highest sequence number among the entries of the tables read to their end.
    last_sequence: u64,
    /// Why a table could not be reopened in a way that says nothing about the table (out of
    /// descriptors): the repair stops and changes nothing.
    fatal: Option<Error>,
}

/// Why a [`SalvagedTable`] ended before its last entry although its blocks read back intact.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// A key not above the one before it.
    OutOfOrder,
    /// A key outside the first and last keys found when the table was scanned.
    OutsideRange,
}

impl Stop {
    /// What ended the table, for the repair's report.
    fn what(self) -> &'static str {
        match self {
            Stop::OutOfOrder => "keys out of order",
            Stop::OutsideRange => "a key outside the range found when it was scanned",
        }
    }
}

/// One table's readable entries, read from its file as the merge asks for them.
///
/// Entries whose internal key does not parse are skipped. The first damaged block ends the
/// table quietly: `status` stays `Ok`, so the merge goes on with the other sources, and the
/// loss is written to the shared [`SalvageLog`] with the count of entries read before it. So
/// does a key that is not above the one before it (a table whose blocks check out but whose
/// order does not), since the merge and the tables it writes rely on each source's order, and
/// a key outside the range given to [`SalvagedTable::within`], which a [`TableRun`] relies on.
/// Repair reads each source once, front to back; other moves go to the table's iterator and
/// skip malformed keys in their own direction; the order is checked going forward from where
/// the last seek landed.
struct SalvagedTable<I> {
    /// The table's iterator (a [`crate::sstable::TableIterator`]; any source in tests).
    inner: I,
    icmp: InternalKeyComparator,
    /// The key of the last entry passed on going forward (empty before the first).
    previous: Vec<u8>,
    /// The first and last internal keys found when the table was scanned, if it is to be held
    /// to them (a run of tables relies on each staying inside its own range).
    range: Option<(Vec<u8>, Vec<u8>)>,
    /// What ended the table before its last entry, other than damage.
    stop: Option<Stop>,
    /// Any loss stops the repair (an intermediate table: see [`TableSpan::intermediate`]).
    strict: bool,
    path: PathBuf,
    /// Entries passed on so far.
    entries: u64,
    /// Entries skipped for a malformed internal key.
    malformed: u64,
    /// The highest sequence number passed on, written to the log at the end.
    last_sequence: u64,
    /// Whether the table's end (or its damage) has been written to the log.
    logged: bool,
    log: Arc<Mutex<SalvageLog>>,
}

impl<I: InternalIterator> SalvagedTable<I> {
    fn new(
        inner: I,
        icmp: InternalKeyComparator,
        path: PathBuf,
        log: Arc<Mutex<SalvageLog>>,
    ) -> SalvagedTable<I> {
        SalvagedTable {
            inner,
            icmp,
            previous: Vec::new(),
            range: None,
            stop: None,
            strict: false,
            path,
            entries: 0,
            malformed: 0,
            last_sequence: 0,
            logged: false,
            log,
        }
    }

    /// Holds the table to the smallest and largest internal keys of `range`: the first key
    /// outside it ends the table, as a key out of order does.
    fn within(mut self, range: Option<(Vec<u8>, Vec<u8>)>) -> SalvagedTable<I> {
        self.range = range;
        self
    }

    /// Makes any loss stop the repair instead of being logged, if `strict`.
    fn strict(mut self, strict: bool) -> SalvagedTable<I> {
        self.strict = strict;
        self
    }

    /// Forgets the order kept so far, before a seek: order is checked from where a seek lands.
    fn reposition(&mut self) {
        self.previous.clear();
        self.stop = None;
    }

    /// Whether `key` lies outside the range the table is held to.
    fn outside_range(&self, key: &[u8]) -> bool {
        self.range.as_ref().is_some_and(|(smallest, largest)| {
            self.icmp.compare(key, smallest) == std::cmp::Ordering::Less
                || self.icmp.compare(key, largest) == std::cmp::Ordering::Greater
        })
    }

    /// Moves past entries with malformed keys (`forward`: with `next`), then notes the entry
    /// it stops at, or the end of what could be read.
    fn settle(&mut self, forward: bool) {
        while self.valid() {
            match parse_internal_key(self.inner.key()) {
                Some(_)
                    if forward
                        && !self.previous.is_empty()
                        && self.icmp.compare(&self.previous, self.inner.key())
                            != std::cmp::Ordering::Less =>
                {
                    self.stop = Some(Stop::OutOfOrder);
                }
                Some(_) if self.outside_range(self.inner.key()) => {
                    self.stop = Some(Stop::OutsideRange);
                }
                Some(p) => {
                    self.entries += 1;
                    self.last_sequence = self.last_sequence.max(p.sequence);
                    if forward {
                        self.previous.clear();
                        self.previous.extend_from_slice(self.inner.key());
                    }
                    return;
                }
                None => {
                    self.malformed += 1;
                    if forward {
                        self.inner.next();
                    } else {
                        self.inner.prev();
                    }
                }
            }
        }
        if self.logged {
            return;
        }
        self.logged = true;
        let mut log = self.log.lock();
        log.last_sequence = log.last_sequence.max(self.last_sequence);
        let damage = match self.inner.status().err() {
            // Out of descriptors or memory while reading a block says nothing about the table.
            Some(e) if e.is_out_of_handles() => {
                log.fatal.get_or_insert(e);
                return;
            }
            other => other,
        };
        if self.strict {
            // What this repair wrote did not read back: nothing is lost yet (the tables it
            // came from are still there), so the repair stops.
            let what = match (&damage, self.stop, self.malformed) {
                (Some(e), _, _) => format!("damaged after {} entries: {e}", self.entries),
                (None, Some(stop), _) => format!("{} after {} entries", stop.what(), self.entries),
                (None, None, n) if n > 0 => format!("{n} malformed keys"),
                _ => return,
            };
            log.fatal.get_or_insert(Error::corruption(
                &self.path,
                0,
                format!(
                    "an intermediate table this repair wrote did not read back ({what}); \
                     nothing was changed"
                ),
            ));
            return;
        }
        if self.malformed > 0 {
            log.problems.push(format!(
                "{}: {} entries with malformed internal keys skipped",
                self.path.display(),
                self.malformed
            ));
        }
        if let Some(e) = damage {
            log.problems.push(format!(
                "{}: damaged after {} entries, the rest lost: {e}",
                self.path.display(),
                self.entries
            ));
            log.damaged.push(self.path.clone());
        } else if let Some(stop) = self.stop {
            log.problems.push(format!(
                "{}: {} after {} entries, the rest lost",
                self.path.display(),
                stop.what(),
                self.entries
            ));
            log.damaged.push(self.path.clone());
        }
    }
}

impl<I: InternalIterator> InternalIterator for SalvagedTable<I> {
    fn valid(&self) -> bool {
        self.stop.is_none() && self.inner.valid()
    }
    fn seek_to_first(&mut self) {
        self.reposition();
        self.inner.seek_to_first();
        self.settle(true);
    }
    fn seek_to_last(&mut self) {
        self.reposition();
        self.inner.seek_to_last();
        self.settle(false);
    }
    fn seek(&mut self, target: &[u8]) {
        self.reposition();
        self.inner.seek(target);
        self.settle(true);
    }
    fn seek_for_prev(&mut self, target: &[u8]) {
        self.reposition();
        self.inner.seek_for_prev(target);
        self.settle(false);
    }
    fn next(&mut self) {
        self.inner.next();
        self.settle(true);
    }
    fn prev(&mut self) {
        // Order is checked going forward from here on.
        self.previous.clear();
        self.inner.prev();
        self.settle(false);
    }
    fn key(&self) -> &[u8] {
        self.inner.key()
    }
    fn value(&self) -> &[u8] {
        self.inner.value()
    }
    fn status(&self) -> Result<()> {
        // Damage ends the table; what it cost is in the log.
        Ok(())
    }
    fn source(&self) -> Option<(&Path, u64)> {
        self.inner.source()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iter::testing::VecIterator;
    use crate::key::{make_internal_key, ValueKind};

    fn icmp() -> InternalKeyComparator {
        InternalKeyComparator::new(Arc::new(crate::key::BytewiseComparator))
    }

    fn entry(user_key: &str, sequence: u64) -> (Vec<u8>, Vec<u8>) {
        (
            make_internal_key(user_key.as_bytes(), sequence, ValueKind::Value),
            format!("v{sequence}").into_bytes(),
        )
    }

    /// Drains `table` front to back, as repair's merge does.
    fn drain<I: InternalIterator>(table: &mut SalvagedTable<I>) -> Vec<Vec<u8>> {
        let mut keys = Vec::new();
        table.seek_to_first();
        while table.valid() {
            keys.push(table.key().to_vec());
            table.next();
        }
        assert!(table.status().is_ok(), "damage is logged, not returned");
        keys
    }

    #[test]
    fn malformed_keys_are_skipped_and_damage_ends_the_table_with_its_count_logged() {
        let log = Arc::new(Mutex::new(SalvageLog::default()));
        let mut entries: Vec<_> = (1..=6).map(|i| entry(&format!("k{i}"), 10 + i)).collect();
        // Too short to hold a trailer: sorts first, and cannot be parsed.
        entries.push((b"bad".to_vec(), b"x".to_vec()));
        // Sorted, the entries are: "bad", k1 .. k6; k5 (index 5) cannot be read.
        let inner = VecIterator::failing_at(entries, icmp(), 5);
        let mut table =
            SalvagedTable::new(inner, icmp(), PathBuf::from("/db/000007.sst"), log.clone());
        let keys = drain(&mut table);
        assert_eq!(keys.len(), 4, "k1 to k4, before the damage");
        let log = log.lock();
        assert_eq!(log.problems.len(), 2, "{:?}", log.problems);
        assert!(log.problems[0].contains("1 entries with malformed internal keys skipped"));
        assert!(
            log.problems[1].contains("000007.sst: damaged after 4 entries, the rest lost"),
            "{:?}",
            log.problems
        );
        assert_eq!(log.damaged, vec![PathBuf::from("/db/000007.sst")]);
        assert_eq!(log.last_sequence, 14, "k4's, the last entry passed on");
    }

    #[test]
    fn a_key_out_of_order_ends_the_table_and_is_logged() {
        let log = Arc::new(Mutex::new(SalvageLog::default()));
        // Checksums fine, order not: "c" then "b".
        let entries = vec![entry("a", 3), entry("c", 2), entry("b", 1), entry("d", 4)];
        let inner = VecIterator::unsorted(entries, icmp());
        let mut table =
            SalvagedTable::new(inner, icmp(), PathBuf::from("/db/000009.sst"), log.clone());
        let keys = drain(&mut table);
        assert_eq!(keys, vec![entry("a", 3).0, entry("c", 2).0]);
        // A seek starts the order check afresh.
        table.seek_to_first();
        assert!(table.valid() && table.key() == entry("a", 3).0.as_slice());
        let log = log.lock();
        assert_eq!(
            log.problems,
            vec!["/db/000009.sst: keys out of order after 2 entries, the rest lost".to_string()]
        );
        assert_eq!(log.damaged, vec![PathBuf::from("/db/000009.sst")]);
        assert_eq!(log.last_sequence, 3);
    }

    #[test]
    fn an_intact_table_passes_every_entry_and_logs_nothing_but_its_sequence() {
        let log = Arc::new(Mutex::new(SalvageLog::default()));
        let entries: Vec<_> = (0..50)
            .map(|i| entry(&format!("k{i:03}"), 100 - i))
            .collect();
        let inner = VecIterator::new(entries, icmp());
        let mut table =
            SalvagedTable::new(inner, icmp(), PathBuf::from("/db/000003.sst"), log.clone());
        assert_eq!(drain(&mut table).len(), 50);
        let log = log.lock();
        assert!(log.problems.is_empty() && log.damaged.is_empty());
        assert_eq!(log.last_sequence, 100);
    }

    fn span(number: u64, range: Option<(&str, &str)>) -> TableSpan {
        TableSpan {
            number,
            path: PathBuf::from(format!("/db/{number:06}.sst")),
            range: range.map(|(a, b)| (entry(a, 9).0, entry(b, 1).0)),
            file_size: 100,
            intermediate: false,
        }
    }

    fn numbers(runs: &[Vec<TableSpan>]) -> Vec<Vec<u64>> {
        runs.iter()
            .map(|run| run.iter().map(|s| s.number).collect())
            .collect()
    }

    #[test]
    fn tables_are_dealt_into_as_many_runs_as_overlap_at_one_key() {
        let spans = vec![
            span(1, Some(("a", "c"))),
            span(2, Some(("d", "f"))),
            span(3, Some(("b", "e"))),
            span(4, Some(("g", "h"))),
            span(5, Some(("c", "c"))),
            span(6, None),
        ];
        let runs = partition_into_runs(spans, &icmp());
        // a-c, d-f and g-h follow each other; b-e overlaps both of the first two; c-c overlaps
        // a-c and b-e. Three deep at "c", so three runs, and the table without a range alone.
        assert_eq!(
            numbers(&runs),
            vec![vec![1, 2, 4], vec![3], vec![5], vec![6]]
        );
        // A range whose keys do not parse, or whose ends are the wrong way round, is none.
        let props = crate::sstable::TableProperties {
            smallest_key: entry("z", 1).0,
            largest_key: entry("a", 1).0,
            ..Default::default()
        };
        assert!(TableSpan::written(7, PathBuf::new(), &props, &icmp())
            .range
            .is_none());
    }

    type Opened = Arc<Mutex<Vec<u64>>>;
    type Entries = Vec<(Vec<u8>, Vec<u8>)>;

    /// A run over `tables` (span, entries); opening span `number` fails with `fail`'s error.
    fn run_of(
        tables: Vec<(TableSpan, Entries)>,
        fail: Option<(u64, i32)>,
        log: &Arc<Mutex<SalvageLog>>,
    ) -> (TableRun<VecIterator>, Opened) {
        let opened: Opened = Arc::default();
        let seen = opened.clone();
        let contents: Vec<_> = tables.iter().map(|(s, e)| (s.number, e.clone())).collect();
        let open: OpenSpan<VecIterator> = Box::new(move |span| {
            seen.lock().push(span.number);
            if let Some((_, errno)) = fail.filter(|(n, _)| *n == span.number) {
                return Err(Error::io(
                    "open",
                    &span.path,
                    std::io::Error::from_raw_os_error(errno),
                ));
            }
            let entries = contents
                .iter()
                .find(|(n, _)| *n == span.number)
                .map(|(_, e)| e.clone())
                .unwrap_or_default();
            Ok(VecIterator::unsorted(entries, icmp()))
        });
        let spans = tables.into_iter().map(|(s, _)| s).collect();
        (
            TableRun::with_opener(spans, open, icmp(), log.clone()),
            opened,
        )
    }

    fn keys_of(entries: &[(Vec<u8>, Vec<u8>)]) -> Vec<Vec<u8>> {
        entries.iter().map(|(k, _)| k.clone()).collect()
    }

    #[test]
    fn a_run_reads_its_tables_in_key_order_opening_each_when_it_gets_there() {
        let log = Arc::new(Mutex::new(SalvageLog::default()));
        let t1 = vec![entry("a", 5), entry("b", 4)];
        let t2 = vec![entry("c", 3)];
        let t3 = vec![entry("d", 2), entry("e", 1)];
        let (mut run, opened) = run_of(
            vec![
                (span(1, Some(("a", "b"))), t1.clone()),
                (span(2, Some(("c", "c"))), t2.clone()),
                (span(3, Some(("d", "e"))), t3.clone()),
            ],
            None,
            &log,
        );
        let mut keys = Vec::new();
        run.seek_to_first();
        assert_eq!(
            *opened.lock(),
            vec![1],
            "only the first table is open at the start"
        );
        while run.valid() {
            keys.push(run.key().to_vec());
            run.next();
        }
        assert_eq!(keys, [keys_of(&t1), keys_of(&t2), keys_of(&t3)].concat());
        assert_eq!(*opened.lock(), vec![1, 2, 3]);

        // Seeks land in the table that holds the target, and moves cross table bounds.
        run.seek(&entry("bb", 9).0);
        assert_eq!(run.key(), t2[0].0.as_slice());
        run.prev();
        assert_eq!(run.key(), t1[1].0.as_slice());
        run.seek_for_prev(&entry("cc", 9).0);
        assert_eq!(run.key(), t2[0].0.as_slice());
        run.seek_to_last();
        assert_eq!(run.key(), t3[1].0.as_slice());
        run.seek(&entry("f", 9).0);
        assert!(!run.valid());
        let log = log.lock();
        assert!(
            log.problems.is_empty() && log.fatal.is_none(),
            "{:?}",
            log.problems
        );
    }

    #[test]
    fn a_table_straying_outside_its_range_ends_there_and_the_run_goes_on() {
        let log = Arc::new(Mutex::new(SalvageLog::default()));
        // The second table records c..d but holds "e", which the third table's range starts
        // at: passed on, it would break the run's order.
        let (mut run, _) = run_of(
            vec![
                (span(1, Some(("a", "b"))), vec![entry("a", 1)]),
                (
                    span(2, Some(("c", "d"))),
                    vec![entry("c", 2), entry("e", 3)],
                ),
                (
                    span(3, Some(("e", "f"))),
                    vec![entry("e", 4), entry("f", 5)],
                ),
            ],
            None,
            &log,
        );
        let mut keys = Vec::new();
        run.seek_to_first();
        while run.valid() {
            keys.push(run.key().to_vec());
            run.next();
        }
        assert_eq!(
            keys,
            keys_of(&[entry("a", 1), entry("c", 2), entry("e", 4), entry("f", 5)])
        );
        let log = log.lock();
        assert_eq!(
            log.problems,
            vec![
                "/db/000002.sst: a key outside the range found when it was scanned after 1 \
                 entries, the rest lost"
                    .to_string()
            ]
        );
        assert_eq!(log.damaged, vec![PathBuf::from("/db/000002.sst")]);
    }

    #[test]
    fn a_table_that_cannot_be_opened_again_stops_the_run_and_is_not_counted_lost() {
        let tables = || {
            vec![
                (span(1, Some(("a", "a"))), vec![entry("a", 1)]),
                (span(2, Some(("b", "b"))), vec![entry("b", 2)]),
                (span(3, Some(("c", "c"))), vec![entry("c", 3)]),
            ]
        };
        for errno in [libc::EIO, libc::EMFILE, libc::ENOENT] {
            let log = Arc::new(Mutex::new(SalvageLog::default()));
            let (mut run, opened) = run_of(tables(), Some((2, errno)), &log);
            run.seek_to_first();
            assert_eq!(run.key(), entry("a", 1).0.as_slice());
            run.next();
            assert!(!run.valid(), "errno {errno}");
            assert!(run.status().is_err(), "the merge must end at once");
            assert_eq!(
                *opened.lock(),
                vec![1, 2],
                "nothing is opened after the stop"
            );
            let log = log.lock();
            assert!(
                log.damaged.is_empty() && log.problems.is_empty(),
                "not a loss"
            );
            let fatal = log
                .fatal
                .as_ref()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(fatal.contains("it opened moments before"), "{fatal}");
        }
    }

    #[test]
    fn damage_to_an_intermediate_table_stops_the_run_instead_of_losing_entries() {
        let log = Arc::new(Mutex::new(SalvageLog::default()));
        let mut written = span(2, Some(("b", "d")));
        written.intermediate = true;
        let entries = vec![entry("b", 2), entry("c", 3), entry("d", 4)];
        let tables = vec![(written, entries.clone())];
        let open: OpenSpan<VecIterator> =
            Box::new(move |_| Ok(VecIterator::failing_at(entries.clone(), icmp(), 1)));
        let spans = tables.into_iter().map(|(s, _)| s).collect();
        let mut run = TableRun::with_opener(spans, open, icmp(), log.clone());
        run.seek_to_first();
        assert_eq!(run.key(), entry("b", 2).0.as_slice());
        run.next();
        assert!(!run.valid() && run.status().is_err());
        let log = log.lock();
        assert!(
            log.damaged.is_empty() && log.problems.is_empty(),
            "{:?}",
            log.problems
        );
        let fatal = log
            .fatal
            .as_ref()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            fatal.contains("an intermediate table this repair wrote did not read back"),
            "{fatal}"
        );
    }

    #[test]
    fn a_step_back_then_forward_is_not_taken_for_keys_out_of_order() {
        let log = Arc::new(Mutex::new(SalvageLog::default()));
        let entries = vec![entry("a", 1), entry("b", 2), entry("c", 3)];
        let inner = VecIterator::new(entries, icmp());
        let mut table =
            SalvagedTable::new(inner, icmp(), PathBuf::from("/db/000004.sst"), log.clone());
        table.seek_to_first();
        table.next();
        table.next();
        table.prev();
        table.next();
        assert!(table.valid() && table.key() == entry("c", 3).0.as_slice());
        table.next();
        assert!(!table.valid());
        let log = log.lock();
        assert!(
            log.problems.is_empty() && log.damaged.is_empty(),
            "{:?}",
            log.problems
        );
    }
}
