//! Salvage of a damaged database directory: every readable entry of every table and WAL is
//! merged into a fresh sorted run, recorded by a brand-new manifest. Damaged files are moved to
//! `lost/` (never deleted), and the report says what could not be read.
//!
//! Rewriting everything (instead of reusing intact tables) keeps the result correct even when
//! salvaged tables would otherwise overlap in ways the level invariants forbid.
//!
//! Memory: tables are read as the merge goes, a block at a time each, so the entries of the
//! database are never all in memory; every table stays open until the merge ends, with its
//! index and filter. A WAL, whose records are not sorted, is replayed into a memtable of its
//! own first (a WAL holds about one write buffer's worth).
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

    let flags = ReadFlags {
        verify_checksums: true,
        fill_cache: false,
        release_behind: true,
    };
    let salvage_log = Arc::new(Mutex::new(SalvageLog::default()));
    for &n in &tables {
        report.tables_scanned += 1;
        let path = table_file_name(dir, n);
        let opened = fs
            .open_random(&path)
            .and_then(|file| TableReader::open(table_options.clone(), file, path.clone(), n, None));
        let table = match opened {
            Ok(t) => Arc::new(t),
            // A table written with another comparator is not damaged: salvaging under the wrong
            // order would move every table aside. Nothing has been changed yet.
            Err(Error::InvalidArgument(message)) => {
                return Err(Error::InvalidArgument(format!(
                    "{message}; repair must be run with the comparator the database was \
                     written with (nothing was changed)"
                )));
            }
            // Every table is held open until the merge ends (a map each, or a descriptor where
            // maps are unavailable): running out of them says nothing about the table, which
            // must not be set aside as lost. Nothing has been changed yet.
            Err(e) if e.is_out_of_handles() => {
                return Err(match e {
                    Error::Io { path, source, .. } => Error::Io {
                        op: "open every table for repair (nothing was changed; raise the limit \
                             on open files and run it again)",
                        path,
                        source,
                    },
                    other => other,
                });
            }
            Err(e) => {
                report.problems.push(format!(
                    "{}: unreadable, all of it lost: {e}",
                    path.display()
                ));
                damaged.push(path);
                continue;
            }
        };
        // Read as the merge goes, not copied into memory first: repair never holds the
        // database's entries, only each open table's index, filter and current block.
        sources.push(Box::new(SalvagedTable::new(
            table.iter(flags),
            icmp.clone(),
            path,
            salvage_log.clone(),
        )));
    }

    // The salvaged entries go into new tables numbered after every existing file. The old
    // manifests are replaced only once every new table is written and checked: a repair that
    // fails before then leaves the directory as it found it, apart from the new tables, which
    // it removes, so it can be run again (and an open in between finds the old manifest, not
    // an empty one that would make the old tables look obsolete).
    let first_number = max_number.saturating_add(1);
    let mut next_number = first_number;
    let mut edit = VersionEdit::default();
    let mut merged = MergingIterator::new(icmp.clone(), sources);
    merged.seek_to_first();
    let built = write_tables(
        TableSink {
            dir,
            options,
            table_options: &table_options,
            next_number: &mut next_number,
            edit: &mut edit,
            report: &mut report,
        },
        &mut merged,
    );
    drop(merged);
    {
        let mut log = salvage_log.lock();
        report.problems.append(&mut log.problems);
        damaged.append(&mut log.damaged);
        last_sequence = last_sequence.max(log.last_sequence);
    }
    let built = built
        .and_then(|()| fs.sync_dir(dir))
        .and_then(|()| super::open::sync_blob_files(options, dir, &edit));
    if let Err(e) = built {
        for n in first_number..next_number {
            let _ = fs.remove(&table_file_name(dir, n));
        }
        return Err(e);
    }

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
    for &n in &manifests {
        let _ = fs.remove(&crate::filename::manifest_file_name(dir, n));
    }

    // Keep damaged files for forensics; every other old table and WAL is now obsolete.
    let lost = dir.join("lost");
    if !damaged.is_empty() {
        fs.create_dir_all(&lost)?;
    }
    for path in damaged {
        if let Some(name) = path.file_name() {
            let dest = lost.join(name);
            fs.rename(&path, &dest)?;
            report.moved_to_lost.push(dest);
        }
    }
    for &n in &wals {
        let _ = fs.remove(&wal_file_name(dir, n));
    }
    for &n in &tables {
        let _ = fs.remove(&table_file_name(dir, n));
    }
    fs.sync_dir(dir)?;
    Ok(report)
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
    dir: &'a Path,
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
        super::background::verify_table(fs.as_ref(), dir, number)?;
        let mut meta = super::background::meta_from_properties(number, &props);
        meta.oldest_blob_file = oldest_blob;
        report.entries_recovered += meta.num_entries;
        report.tables_written += 1;
        edit.add_file(1, meta);
        Ok(())
    };
    // Blob files are kept where they are: entries that reference a readable blob record keep
    // their reference, and the blob files are recorded with the bytes the new tables reference.
    let blob_cache = BlobCache::new(dir.to_path_buf(), fs.clone());
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
                let number = *next_number;
                *next_number += 1;
                let path = table_file_name(dir, number);
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

/// What the salvaged tables met while the merge read them.
#[derive(Default)]
struct SalvageLog {
    /// One line per table with skipped or lost entries.
    problems: Vec<String>,
    /// Tables damaged past some entry, to be moved to `lost/`.
    damaged: Vec<PathBuf>,
    /// The highest sequence number among the entries of the tables read to their end.
    last_sequence: u64,
}

/// One table's readable entries, read from its file as the merge asks for them.
///
/// Entries whose internal key does not parse are skipped. The first damaged block ends the
/// table quietly: `status` stays `Ok`, so the merge goes on with the other sources, and the
/// loss is written to the shared [`SalvageLog`] with the count of entries read before it. So
/// does a key that is not above the one before it (a table whose blocks check out but whose
/// order does not), since the merge and the tables it writes rely on each source's order.
/// Repair reads each source once, front to back; other moves go to the table's iterator and
/// skip malformed keys in their own direction; the order is checked going forward from where
/// the last seek landed.
struct SalvagedTable<I> {
    /// The table's iterator (a [`crate::sstable::TableIterator`]; any source in tests).
    inner: I,
    icmp: InternalKeyComparator,
    /// The key of the last entry passed on going forward (empty before the first).
    previous: Vec<u8>,
    /// A key out of order ended the table.
    out_of_order: bool,
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
            out_of_order: false,
            path,
            entries: 0,
            malformed: 0,
            last_sequence: 0,
            logged: false,
            log,
        }
    }

    /// Forgets the order kept so far, before a seek: order is checked from where a seek lands.
    fn reposition(&mut self) {
        self.previous.clear();
        self.out_of_order = false;
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
                    self.out_of_order = true;
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
        if self.malformed > 0 {
            log.problems.push(format!(
                "{}: {} entries with malformed internal keys skipped",
                self.path.display(),
                self.malformed
            ));
        }
        if let Err(e) = self.inner.status() {
            log.problems.push(format!(
                "{}: damaged after {} entries, the rest lost: {e}",
                self.path.display(),
                self.entries
            ));
            log.damaged.push(self.path.clone());
        } else if self.out_of_order {
            log.problems.push(format!(
                "{}: keys out of order after {} entries, the rest lost",
                self.path.display(),
                self.entries
            ));
            log.damaged.push(self.path.clone());
        }
    }
}

impl<I: InternalIterator> InternalIterator for SalvagedTable<I> {
    fn valid(&self) -> bool {
        !self.out_of_order && self.inner.valid()
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
}
