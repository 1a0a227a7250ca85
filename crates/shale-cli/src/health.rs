//! Health commands: stats, check, compact, repair, checkpoint, destroy.
//!
//! `check` works on the files directly and changes nothing: the manifest `CURRENT` names is
//! replayed edit by edit, the level invariants are checked on the result, every live table is
//! read block by block ([`shale::sstable::TableReader::verify`]) and compared with what the
//! manifest records about it, and every live WAL is read to its end with each batch decoded.
//! Every blob reference a live table or WAL holds is followed: the blob file must exist and the
//! record must pass its checks and belong to the key (`docs/format/blob.md`).
//! Every problem names the file and the byte offset; any problem makes the exit code 3.
//!
//! Thread-safety: single-threaded.

use std::cmp::Ordering;
use std::ffi::OsString;
use std::io::{BufRead, BufWriter, Write};
use std::path::Path;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use shale::batch::{WalMarker, WriteBatch};
use shale::blob::{decode_record, BlobRef};
use shale::env::{Fs, PosixFs, RandomAccessFile};
use shale::filename::{blob_file_name, parse_file_name, table_file_name, wal_file_name, FileType};
use shale::iter::InternalIterator;
use shale::key::{parse_internal_key, InternalKeyComparator, ValueKind};
use shale::sstable::ReadFlags;
use shale::version::VersionEdit;
use shale::wal::{LogKind, LogReader};

use crate::encoding::Encoding;
use crate::failure::{CliResult, Exit, Failure};
use crate::inspect::{open_table, resolve_manifest, show_internal_key, ManifestState};
use crate::Context;

fn stdout() -> BufWriter<std::io::StdoutLock<'static>> {
    BufWriter::new(std::io::stdout().lock())
}

/// `stats DB`.
pub fn stats(ctx: &Context, db_path: &Path) -> CliResult {
    let db = ctx.open_read_only(db_path)?;
    let s = db.stats();
    let mut out = stdout();
    writeln!(out, "{}", db.property("shale.stats").unwrap_or_default())?;
    writeln!(out, "levels:")?;
    for l in &s.levels {
        writeln!(
            out,
            "  level {}: {} files, {} bytes, score {:.2}",
            l.level, l.files, l.bytes, l.score
        )?;
    }
    let rows: [(&str, String); 32] = [
        ("last_sequence", s.last_sequence.to_string()),
        ("user_writes", s.user_writes.to_string()),
        ("user_bytes_written", s.user_bytes_written.to_string()),
        ("wal_bytes", s.wal_bytes.to_string()),
        ("wal_syncs", s.wal_syncs.to_string()),
        ("wal_files_reused", s.wal_files_reused.to_string()),
        ("blob_files", s.blob_files.to_string()),
        ("blob_total_bytes", s.blob_total_bytes.to_string()),
        ("blob_garbage_bytes", s.blob_garbage_bytes.to_string()),
        ("blob_bytes_written", s.blob_bytes_written.to_string()),
        ("blob_bytes_relocated", s.blob_bytes_relocated.to_string()),
        ("flushes", s.flushes.to_string()),
        ("flush_bytes", s.flush_bytes.to_string()),
        ("compactions", s.compactions.to_string()),
        ("split_compactions", s.split_compactions.to_string()),
        ("compactions_raised", s.compactions_raised.to_string()),
        ("trivial_moves", s.trivial_moves.to_string()),
        (
            "write_amplification",
            format!("{:.2}", s.write_amplification),
        ),
        ("slowdowns", s.slowdowns.to_string()),
        ("stalls", s.stalls.to_string()),
        ("stall_micros", s.stall_micros.to_string()),
        ("expired_dropped", s.expired_dropped.to_string()),
        (
            "expired_bytes_reclaimed",
            s.expired_bytes_reclaimed.to_string(),
        ),
        ("filtered_dropped", s.filtered_dropped.to_string()),
        ("memtable_bytes", s.memtable_bytes.to_string()),
        ("memtable_spare_bytes", s.memtable_spare_bytes.to_string()),
        ("block_cache_usage", s.block_cache_usage.to_string()),
        ("block_cache_lent", s.block_cache_lent.to_string()),
        ("block_cache_capacity", s.block_cache_capacity.to_string()),
        ("block_cache_hits", s.block_cache_hits.to_string()),
        ("block_cache_misses", s.block_cache_misses.to_string()),
        (
            "total_sst_bytes",
            db.property("shale.total-sst-size").unwrap_or_default(),
        ),
    ];
    for (name, value) in rows {
        writeln!(out, "{name}: {value}")?;
    }
    writeln!(
        out,
        "(counters of work count from this process's open; the database was opened read-only)"
    )?;
    out.flush()?;
    Ok(())
}

/// Problems found by `check`, each with the exit code it calls for.
#[derive(Default)]
struct Findings {
    problems: Vec<(Exit, String)>,
    warnings: Vec<String>,
}

impl Findings {
    fn problem(&mut self, out: &mut dyn Write, message: String) -> std::io::Result<()> {
        writeln!(out, "PROBLEM {message}")?;
        self.problems.push((Exit::Corruption, message));
        Ok(())
    }

    fn error(&mut self, out: &mut dyn Write, e: &shale::Error) -> std::io::Result<()> {
        let exit = match e {
            shale::Error::Io { .. } => Exit::Io,
            _ => Exit::Corruption,
        };
        let message = describe(e);
        writeln!(out, "PROBLEM {message}")?;
        self.problems.push((exit, message));
        Ok(())
    }

    fn warning(&mut self, out: &mut dyn Write, message: String) -> std::io::Result<()> {
        writeln!(out, "warning {message}")?;
        self.warnings.push(message);
        Ok(())
    }
}

/// An engine error as a check line: file and offset first.
fn describe(e: &shale::Error) -> String {
    match e {
        shale::Error::Corruption {
            path,
            offset,
            message,
        } => format!("{}: at offset {offset}: {message}", path.display()),
        other => other.to_string(),
    }
}

/// A torn tail that a crash during an append can leave; anything else in the tail is damage.
fn tail_is_crash_artifact(reason: &str) -> bool {
    reason.contains("cut off by end of file")
        || reason.contains("partial fragment header")
        || reason.contains("zeroed space")
        || reason.contains("runs past its block")
        // A reused WAL file still holds its earlier log's bytes past the new log's end.
        || reason.contains("an earlier use of this file")
}

/// `check DB`.
pub fn check(ctx: &Context, db_path: &Path) -> CliResult {
    let fs = PosixFs::new();
    if !db_path.is_dir() {
        return Err(Failure::new(
            Exit::Other,
            format!("database {} does not exist", db_path.display()),
        ));
    }
    let (manifest, number) = resolve_manifest(&fs, db_path)?;
    let mut out = stdout();
    let mut found = Findings::default();
    let enc = ctx.encoding;

    // The manifest: every record decodes and applies to the state before it.
    let mut state = ManifestState::default();
    let mut reader = LogReader::new(
        fs.open_sequential(&manifest)?,
        manifest.clone(),
        LogKind::Manifest,
        Some(number),
    );
    let mut manifest_ok = true;
    loop {
        match reader.read_record() {
            Ok(Some(record)) => {
                let offset = reader.last_record_offset();
                match VersionEdit::decode(&record) {
                    Ok(edit) => {
                        if let Err(m) = state.apply(&edit) {
                            manifest_ok = false;
                            found.problem(
                                &mut out,
                                format!("{}: at offset {offset}: {m}", manifest.display()),
                            )?;
                        }
                    }
                    Err(m) => {
                        manifest_ok = false;
                        found.problem(
                            &mut out,
                            format!(
                                "{}: at offset {offset}: undecodable version edit: {m}",
                                manifest.display()
                            ),
                        )?;
                    }
                }
            }
            Ok(None) => break,
            Err(e) => {
                manifest_ok = false;
                found.error(&mut out, &e)?;
                break;
            }
        }
    }
    if let Some(torn) = reader.torn_tail() {
        let message = format!(
            "{}: at offset {}: {}; the {} bytes from there on are unreadable",
            manifest.display(),
            torn.offset,
            torn.reason,
            torn.dropped_bytes
        );
        if tail_is_crash_artifact(&torn.reason) {
            found.warning(
                &mut out,
                format!("{message} (a crash during an append leaves this)"),
            )?;
        } else {
            manifest_ok = false;
            found.problem(&mut out, message)?;
        }
    }
    // A manifest cut short by damage lacks whatever came after it; say so only once.
    let manifest_read = manifest_ok;
    for (what, value) in [
        ("log number", state.log_number),
        ("next file number", state.next_file_number),
        ("last sequence", state.last_sequence),
    ] {
        if value.is_none() && manifest_read {
            manifest_ok = false;
            found.problem(
                &mut out,
                format!("{}: records no {what}", manifest.display()),
            )?;
        }
    }
    let icmp = InternalKeyComparator::new(std::sync::Arc::new(shale::BytewiseComparator));
    match state.comparator.as_deref() {
        None if !manifest_read => {}
        None => {
            manifest_ok = false;
            found.problem(
                &mut out,
                format!("{}: records no comparator name", manifest.display()),
            )?;
        }
        Some(name) if name != icmp.user().name() => {
            // Its tables would all fail to open here, and read as damage that repair (which
            // needs the comparator too) cannot fix: say what the tool cannot do instead.
            out.flush()?;
            return Err(Failure::new(
                Exit::Other,
                format!(
                    "{}: the database is ordered by comparator {name:?}, and this tool knows \
                     only the built-in bytewise order; check it from a program that opens it \
                     with its comparator (Options::paranoid_checks verifies every table at open)",
                    manifest.display()
                ),
            ));
        }
        Some(_) => {}
    }

    // Level invariants.
    let levels = state.levels();
    for (level, files) in levels.iter().enumerate() {
        for f in files {
            if icmp.compare(&f.smallest, &f.largest) == Ordering::Greater {
                manifest_ok = false;
                found.problem(
                    &mut out,
                    format!(
                        "{}: table {:06}.sst in level {level} has its smallest key {} above \
                         its largest {}",
                        manifest.display(),
                        f.number,
                        show_internal_key(enc, &f.smallest),
                        show_internal_key(enc, &f.largest)
                    ),
                )?;
            }
            if let Some(next) = state.next_file_number {
                if f.number >= next {
                    manifest_ok = false;
                    found.problem(
                        &mut out,
                        format!(
                            "{}: table {:06}.sst is numbered at or above the next file number \
                             {next}",
                            manifest.display(),
                            f.number
                        ),
                    )?;
                }
            }
        }
        if level == 0 {
            continue;
        }
        let mut sorted = files.clone();
        sorted.sort_by(|a, b| icmp.compare(&a.smallest, &b.smallest));
        for pair in sorted.windows(2) {
            if let [a, b] = pair {
                if icmp.compare(&a.largest, &b.smallest) != Ordering::Less {
                    manifest_ok = false;
                    found.problem(
                        &mut out,
                        format!(
                            "{}: tables {:06}.sst (up to {}) and {:06}.sst (from {}) overlap \
                             in level {level}",
                            manifest.display(),
                            a.number,
                            show_internal_key(enc, &a.largest),
                            b.number,
                            show_internal_key(enc, &b.smallest)
                        ),
                    )?;
                }
            }
        }
    }
    if manifest_ok {
        writeln!(
            out,
            "ok      {}: {} edits, {} live tables",
            manifest.display(),
            state.edits,
            state.files.len()
        )?;
    }

    // Every live table: present, the size and key range the manifest records, every block, and
    // every blob record it references.
    let mut table_entries = 0u64;
    let mut blobs = BlobChecker::new(db_path, enc);
    for (level, files) in levels.iter().enumerate() {
        for f in files {
            let path = table_file_name(db_path, f.number);
            if !fs.exists(&path) {
                found.problem(
                    &mut out,
                    format!(
                        "{}: missing, but the manifest lists it in level {level}",
                        path.display()
                    ),
                )?;
                continue;
            }
            // A writer beside the check may delete the table between the two calls: that
            // reads as missing, like the check above, rather than ending the whole check.
            let size = match fs.file_size(&path) {
                Ok(size) => size,
                Err(e) => {
                    found.error(&mut out, &e)?;
                    continue;
                }
            };
            if size != f.file_size {
                found.problem(
                    &mut out,
                    format!(
                        "{}: at offset {size}: the file is {size} bytes, the manifest records {}",
                        path.display(),
                        f.file_size
                    ),
                )?;
                continue;
            }
            let table = match open_table(&fs, &path) {
                Ok(t) => t,
                Err(e) => {
                    found.error(&mut out, &e)?;
                    continue;
                }
            };
            let props = table.properties();
            if props.smallest_key != f.smallest || props.largest_key != f.largest {
                found.problem(
                    &mut out,
                    format!(
                        "{}: holds keys {} .. {}, the manifest records {} .. {}",
                        path.display(),
                        show_internal_key(enc, &props.smallest_key),
                        show_internal_key(enc, &props.largest_key),
                        show_internal_key(enc, &f.smallest),
                        show_internal_key(enc, &f.largest)
                    ),
                )?;
                continue;
            }
            match table.verify() {
                Ok(n) => {
                    table_entries += n;
                    writeln!(
                        out,
                        "ok      {}: level {level}, {n} entries, {} data blocks",
                        path.display(),
                        props.num_data_blocks
                    )?;
                }
                Err(e) => {
                    found.error(&mut out, &e)?;
                    continue;
                }
            }
            let mut it = table.iter(ReadFlags {
                verify_checksums: true,
                fill_cache: false,
                release_behind: true,
            });
            it.seek_to_first();
            while it.valid() {
                if let Some(p) = parse_internal_key(it.key()) {
                    if let Err(m) = blobs.check(&fs, p.user_key, p.kind, it.value()) {
                        found
                            .problem(&mut out, format!("{m} (referenced by {})", path.display()))?;
                    }
                }
                it.next();
            }
        }
    }

    // Tables and WALs in the directory.
    let mut wals = Vec::new();
    for name in fs.list(db_path)? {
        match parse_file_name(&name) {
            Some(FileType::Table(n)) if manifest_read && !state.files.contains_key(&n) => found
                .warning(
                    &mut out,
                    format!(
                        "{}: not listed in the manifest (left by an interrupted flush or \
                     compaction; removed at the next read-write open)",
                        db_path.join(&name).display()
                    ),
                )?,
            Some(FileType::Wal(n)) if n >= state.log_number.unwrap_or(0) => wals.push(n),
            _ => {}
        }
    }
    wals.sort_unstable();
    let mut wal_records = 0u64;
    for (i, &n) in wals.iter().enumerate() {
        // Whether a crash may have cut this WAL short (the rule of recovery, `Replay::replay_all`
        // in the engine): the newest may always be; an older one only in format 2 and only
        // while no newer WAL records a sync, which syncs every older WAL first.
        let newer = &wals[i + 1..];
        let synced_later = !newer.is_empty() && WalMarker::sync_recorded_in(&fs, db_path, newer);
        let may_be_torn =
            |version: Option<u32>| newer.is_empty() || (version != Some(1) && !synced_later);
        let mut sealed = false;
        let path = wal_file_name(db_path, n);
        let file = match fs.open_sequential(&path) {
            Ok(file) => file,
            // Retired by a writer since the directory was listed: nothing left to check.
            Err(e) if e.is_not_found() => continue,
            Err(e) => {
                found.error(&mut out, &e)?;
                continue;
            }
        };
        let mut reader = LogReader::new(file, path.clone(), LogKind::Wal, Some(n));
        let mut records = 0u64;
        let mut ok = true;
        loop {
            match reader.read_record() {
                Ok(Some(record)) => {
                    let offset = reader.last_record_offset();
                    sealed = WalMarker::of_record(&record) == Some(WalMarker::Seal);
                    match WriteBatch::from_data(record, &path, offset) {
                        Ok(batch) => {
                            for entry in batch.iter().flatten() {
                                let Err(m) = blobs.check(&fs, entry.key, entry.kind, entry.value)
                                else {
                                    continue;
                                };
                                let m = format!(
                                    "{m} (referenced by {} at offset {offset})",
                                    path.display()
                                );
                                if may_be_torn(reader.format_version()) {
                                    // The write was never synced: recovery drops it.
                                    found.warning(
                                        &mut out,
                                        format!("{m}; recovery drops this record and the rest of the WAL"),
                                    )?;
                                } else {
                                    ok = false;
                                    found.problem(&mut out, m)?;
                                }
                            }
                        }
                        Err(e) => {
                            ok = false;
                            found.error(&mut out, &e)?;
                        }
                    }
                    records += 1;
                    if sealed {
                        // A WAL's last record: a reused file may hold an earlier log's bytes
                        // after it (recovery stops here too).
                        break;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    ok = false;
                    found.error(&mut out, &e)?;
                    break;
                }
            }
        }
        if let Some(torn) = reader.torn_tail() {
            let message = format!(
                "{}: at offset {}: {}; the {} bytes from there on are unreadable",
                path.display(),
                torn.offset,
                torn.reason,
                torn.dropped_bytes
            );
            if may_be_torn(reader.format_version()) && tail_is_crash_artifact(&torn.reason) {
                found.warning(
                    &mut out,
                    format!("{message} (a crash during an append leaves this)"),
                )?;
            } else {
                ok = false;
                found.problem(&mut out, message)?;
            }
        } else if !newer.is_empty() && !sealed && reader.format_version() != Some(1) {
            let message = format!(
                "{}: ends before its seal record though newer WALs exist",
                path.display()
            );
            if may_be_torn(reader.format_version()) {
                found.warning(
                    &mut out,
                    format!(
                        "{message} (a power loss before the WAL was synced leaves this; \
                         recovery keeps its records and drops every newer WAL)"
                    ),
                )?;
            } else {
                ok = false;
                found.problem(
                    &mut out,
                    format!("{message}, and a newer WAL records it synced"),
                )?;
            }
        }
        wal_records += records;
        if ok {
            writeln!(out, "ok      {}: {records} records", path.display())?;
        }
    }

    for (number, (references, bytes)) in &blobs.seen {
        writeln!(
            out,
            "ok      {}: {references} references ({bytes} bytes) followed",
            blob_file_name(db_path, *number).display()
        )?;
    }

    if found.problems.is_empty() {
        writeln!(
            out,
            "check passed: manifest with {} edits, {} tables ({table_entries} entries), {} WALs \
             ({wal_records} records), {} blob files{}",
            state.edits,
            state.files.len(),
            wals.len(),
            blobs.seen.len(),
            match found.warnings.len() {
                0 => String::new(),
                n => format!(", {n} warnings"),
            }
        )?;
        out.flush()?;
        return Ok(());
    }
    out.flush()?;
    let exit = if found.problems.iter().any(|(e, _)| *e == Exit::Corruption) {
        Exit::Corruption
    } else {
        Exit::Io
    };
    let mut message = format!(
        "check of {} found {} {}:",
        db_path.display(),
        found.problems.len(),
        if found.problems.len() == 1 {
            "problem"
        } else {
            "problems"
        }
    );
    for (_, p) in &found.problems {
        message.push_str("\n  ");
        message.push_str(p);
    }
    message.push_str("\nhint: `shale repair` salvages every readable entry");
    Err(Failure::new(exit, message))
}

/// Follows blob references: opens each blob file once and checks each record a reference
/// names, counting references and bytes per blob file.
struct BlobChecker {
    dir: PathBuf,
    /// How keys are shown, as everywhere else in the output (`--hex`, `--base64`).
    encoding: Encoding,
    files: HashMap<u64, Option<Arc<dyn RandomAccessFile>>>,
    /// Per blob file: references followed and their record bytes.
    seen: BTreeMap<u64, (u64, u64)>,
}

impl BlobChecker {
    fn new(dir: &Path, encoding: Encoding) -> BlobChecker {
        BlobChecker {
            dir: dir.to_path_buf(),
            encoding,
            files: HashMap::new(),
            seen: BTreeMap::new(),
        }
    }

    /// Checks the entry's blob reference, if it has one; the error names the blob file and
    /// the record offset.
    fn check(
        &mut self,
        fs: &dyn Fs,
        user_key: &[u8],
        kind: ValueKind,
        stored: &[u8],
    ) -> Result<(), String> {
        let reference = match kind {
            ValueKind::BlobIndex => stored,
            ValueKind::ExpiringBlobIndex => stored.get(8..).unwrap_or(&[]),
            _ => return Ok(()),
        };
        let Some(r) = BlobRef::decode(reference) else {
            return Err(format!(
                "malformed blob reference {reference:02x?} for key {}",
                self.encoding.encode(user_key)
            ));
        };
        let path = blob_file_name(&self.dir, r.file_number);
        let file = self
            .files
            .entry(r.file_number)
            .or_insert_with(|| fs.open_random(&path).ok());
        let Some(file) = file else {
            return Err(format!(
                "{}: missing, but a reference names it",
                path.display()
            ));
        };
        let end = r.offset.saturating_add(r.length);
        if end > file.size() {
            return Err(format!(
                "{}: at offset {}: a reference to {} bytes ends past the {}-byte file",
                path.display(),
                r.offset,
                r.length,
                file.size()
            ));
        }
        let mut record = vec![0u8; usize::try_from(r.length).unwrap_or(usize::MAX).min(1 << 32)];
        file.read_exact_at(r.offset, &mut record)
            .map_err(|e| format!("{}: at offset {}: {e}", path.display(), r.offset))?;
        match decode_record(&record) {
            Ok((key, _)) if key == user_key => {}
            Ok((key, _)) => {
                return Err(format!(
                    "{}: at offset {}: the record holds key {}, the reference belongs to {}",
                    path.display(),
                    r.offset,
                    self.encoding.encode(key),
                    self.encoding.encode(user_key)
                ))
            }
            Err(m) => return Err(format!("{}: at offset {}: {m}", path.display(), r.offset)),
        }
        let seen = self.seen.entry(r.file_number).or_default();
        seen.0 += 1;
        seen.1 += r.length;
        Ok(())
    }
}

/// `compact DB [--from K] [--to K]`.
pub fn compact(
    ctx: &Context,
    db_path: &Path,
    from: Option<OsString>,
    to: Option<OsString>,
) -> CliResult {
    let from = from.map(|k| ctx.arg_bytes("--from", &k)).transpose()?;
    let to = to.map(|k| ctx.arg_bytes("--to", &k)).transpose()?;
    let db = ctx.open_writable(db_path, false)?;
    let summary = |db: &shale::Db| {
        db.stats()
            .levels
            .iter()
            .filter(|l| l.files > 0)
            .map(|l| format!("L{}: {} files {} bytes", l.level, l.files, l.bytes))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut out = stdout();
    writeln!(out, "before: {}", summary(&db))?;
    db.compact_range(from.as_deref(), to.as_deref())?;
    writeln!(out, "after:  {}", summary(&db))?;
    out.flush()?;
    Ok(())
}

/// `repair DB`.
pub fn repair(ctx: &Context, db_path: &Path) -> CliResult {
    if !db_path.is_dir() {
        return Err(Failure::new(
            Exit::Other,
            format!("database {} does not exist", db_path.display()),
        ));
    }
    let report = shale::Db::repair(db_path, &ctx.options(false))?;
    let printed = print_repair_report(db_path, &report);
    // The database is consistent either way, but a script that repairs and carries on must be
    // able to tell that data was lost without parsing the report, even when the report could
    // not be written in full (`shale repair db | head`, a full disk).
    if report.problems.is_empty() {
        return printed;
    }
    let mut message = format!(
        "{} was repaired, but {} losses could not be salvaged",
        db_path.display(),
        report.problems.len()
    );
    match printed {
        Ok(()) => message.push_str(" (listed on stdout)"),
        Err(f) if f.output_closed => {}
        Err(f) => message.push_str(&format!("; the report could not be written: {}", f.message)),
    }
    Err(Failure::new(Exit::Corruption, message))
}

/// Prints what `repair` scanned, salvaged and lost, and where it kept the damaged files.
fn print_repair_report(db_path: &Path, report: &shale::RepairReport) -> CliResult {
    let mut out = stdout();
    writeln!(out, "repaired {}", db_path.display())?;
    writeln!(
        out,
        "  scanned {} tables and {} WALs",
        report.tables_scanned, report.wals_scanned
    )?;
    writeln!(
        out,
        "  salvaged {} entries ({} WAL records replayed) into {} new tables",
        report.entries_recovered, report.wal_records_recovered, report.tables_written
    )?;
    if report.intermediate_tables > 0 {
        writeln!(
            out,
            "  ({} intermediate tables written and removed: more tables overlapped than \
             max_open_files allows open at once)",
            report.intermediate_tables
        )?;
    }
    if report.problems.is_empty() {
        writeln!(out, "  nothing was lost")?;
    } else {
        writeln!(out, "  lost:")?;
        for p in &report.problems {
            writeln!(out, "    {p}")?;
        }
    }
    for path in &report.moved_to_lost {
        writeln!(out, "  damaged file kept as {}", path.display())?;
    }
    out.flush()?;
    Ok(())
}

/// `checkpoint DB DEST`.
pub fn checkpoint(ctx: &Context, db_path: &Path, dest: &Path) -> CliResult {
    let db = ctx.open_writable(db_path, false)?;
    db.checkpoint(dest)?;
    let mut out = stdout();
    writeln!(
        out,
        "checkpoint of {} written to {}",
        db_path.display(),
        dest.display()
    )?;
    out.flush()?;
    Ok(())
}

/// `destroy DB [--yes]`.
pub fn destroy(ctx: &Context, db_path: &Path, yes: bool) -> CliResult {
    let fs = PosixFs::new();
    if !db_path.is_dir() {
        return Err(Failure::new(
            Exit::Other,
            format!("database {} does not exist", db_path.display()),
        ));
    }
    let names = fs.list(db_path)?;
    if !names.iter().any(|n| n == shale::filename::CURRENT_FILE) {
        return Err(Failure::new(
            Exit::Other,
            format!(
                "{} is not a shale database (it has no CURRENT file); nothing was deleted",
                db_path.display()
            ),
        ));
    }
    if !yes {
        let files = names
            .iter()
            .filter(|n| parse_file_name(n).is_some())
            .count();
        let bytes: u64 = names
            .iter()
            .filter(|n| parse_file_name(n).is_some())
            .filter_map(|n| fs.file_size(&db_path.join(n)).ok())
            .sum();
        eprint!(
            "Delete the database at {} ({files} files, {bytes} bytes)? This cannot be undone. \
             Type 'yes' to confirm: ",
            db_path.display()
        );
        let _ = std::io::stderr().flush();
        let mut answer = String::new();
        let read = std::io::stdin().lock().read_line(&mut answer);
        let confirmed = matches!(read, Ok(n) if n > 0) && answer.trim() == "yes";
        if !confirmed {
            eprintln!();
            return Err(Failure::new(
                Exit::Other,
                format!(
                    "destroy of {} not confirmed; nothing was deleted (pass --yes to skip the \
                     question)",
                    db_path.display()
                ),
            ));
        }
    }
    shale::Db::destroy(db_path, &ctx.options(false))?;
    let mut out = stdout();
    writeln!(out, "destroyed {}", db_path.display())?;
    out.flush()?;
    Ok(())
}
