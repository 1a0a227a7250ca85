//! File inspection: `sst-dump`, `wal-dump` and `manifest-dump` print what a table, a WAL or a
//! manifest holds, decoded field by field, without opening the database (no lock is taken and
//! nothing is written).
//!
//! Damage is reported with the file and byte offset and exit code 3, after everything readable
//! before it has been printed. A torn WAL or manifest tail is printed, not treated as an error:
//! a crash during an append leaves one, and recovery drops it.
//!
//! Formats decoded: `docs/format/sstable.md`, `docs/format/wal.md`, `docs/format/manifest.md`.
//! Thread-safety: single-threaded.

use std::collections::BTreeMap;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use shale::batch::WriteBatch;
use shale::env::{Fs, PosixFs};
use shale::filename::{current_file_name, manifest_file_name, parse_file_name, FileType};
use shale::iter::InternalIterator;
use shale::key::{parse_internal_key, ValueKind};
use shale::limits::NUM_LEVELS;
use shale::sstable::filter::FilterLayout;
use shale::sstable::{ReadFlags, TableOptions, TableReader};
use shale::version::{FileMetaData, VersionEdit};
use shale::wal::{LogKind, LogReader};

use crate::encoding::Encoding;
use crate::failure::{CliResult, Exit, Failure};
use crate::Context;

type Out = BufWriter<std::io::StdoutLock<'static>>;

fn stdout() -> Out {
    BufWriter::with_capacity(64 * 1024, std::io::stdout().lock())
}

/// The short name of an entry kind.
pub fn kind_name(kind: ValueKind) -> &'static str {
    match kind {
        ValueKind::Deletion => "deletion",
        ValueKind::Value => "value",
        ValueKind::Merge => "merge",
        ValueKind::ExpiringValue => "expiring",
        ValueKind::BlobIndex => "blob",
        ValueKind::ExpiringBlobIndex => "expiring-blob",
    }
}

/// An internal key as `KEY @SEQ kind` (or the raw bytes, flagged, if it does not parse).
pub fn show_internal_key(encoding: Encoding, ikey: &[u8]) -> String {
    match parse_internal_key(ikey) {
        Some(p) => format!(
            "{} @{} {}",
            encoding.encode(p.user_key),
            p.sequence,
            kind_name(p.kind)
        ),
        None => format!("{} (malformed internal key)", encoding.encode(ikey)),
    }
}

/// A stored value as shown: an expiring value splits into its expiry and the user's value.
fn show_value(encoding: Encoding, kind: ValueKind, value: &[u8]) -> String {
    if kind == ValueKind::ExpiringValue {
        if let (Some(expiry), Some(rest)) = (value.get(..8), value.get(8..)) {
            let mut micros = [0u8; 8];
            micros.copy_from_slice(expiry);
            return format!(
                "{}\texpires at {} us since the epoch",
                encoding.encode(rest),
                u64::from_le_bytes(micros)
            );
        }
    }
    encoding.encode(value)
}

/// The number in a file's name, if it is a shale file name of the expected type.
fn number_from_name(path: &Path, want: fn(FileType) -> Option<u64>) -> Option<u64> {
    path.file_name()
        .and_then(|n| n.to_str())
        .and_then(parse_file_name)
        .and_then(want)
}

/// Opens a table for inspection with the default options (the comparator must be bytewise).
pub fn open_table(fs: &dyn Fs, path: &Path) -> shale::Result<Arc<TableReader>> {
    let number = number_from_name(path, |t| match t {
        FileType::Table(n) => Some(n),
        _ => None,
    })
    .unwrap_or(0);
    let file = fs.open_random(path)?;
    let options = TableOptions::from_options(&shale::Options::default());
    Ok(Arc::new(TableReader::open(
        options,
        file,
        path.to_path_buf(),
        number,
        None,
    )?))
}

/// `sst-dump FILE [--verify] [--entries]`.
pub fn sst_dump(ctx: &Context, path: &Path, verify: bool, entries: bool) -> CliResult {
    let enc = ctx.encoding;
    let fs = PosixFs::new();
    let table = open_table(&fs, path)?;
    let mut out = stdout();
    let props = table.properties();
    let footer = table.footer();
    writeln!(out, "table {} ({} bytes)", path.display(), props.file_size)?;
    writeln!(
        out,
        "footer: format version {}, metaindex block at {} ({} bytes), index block at {} ({} bytes)",
        footer.format_version,
        footer.metaindex.offset,
        footer.metaindex.size,
        footer.index.offset,
        footer.index.size
    )?;
    writeln!(out, "properties:")?;
    let rows: [(&str, String); 17] = [
        ("entries", props.num_entries.to_string()),
        ("deletions", props.num_deletions.to_string()),
        ("merge operands", props.num_merges.to_string()),
        ("raw key bytes", props.raw_key_bytes.to_string()),
        ("raw value bytes", props.raw_value_bytes.to_string()),
        ("data bytes", props.data_size.to_string()),
        ("index bytes", props.index_size.to_string()),
        ("filter bytes", props.filter_size.to_string()),
        ("data blocks", props.num_data_blocks.to_string()),
        ("file bytes", props.file_size.to_string()),
        ("smallest key", show_internal_key(enc, &props.smallest_key)),
        ("largest key", show_internal_key(enc, &props.largest_key)),
        ("smallest sequence", props.smallest_seqno.to_string()),
        ("largest sequence", props.largest_seqno.to_string()),
        ("compression", props.compression.clone()),
        ("comparator", props.comparator.clone()),
        ("format version", props.format_version.to_string()),
    ];
    for (name, value) in rows {
        writeln!(out, "  {name:<18} {value}")?;
    }
    writeln!(out, "metaindex:")?;
    for (name, handle) in table.meta_entries() {
        writeln!(
            out,
            "  {:<24} at {} ({} bytes)",
            String::from_utf8_lossy(name),
            handle.offset,
            handle.size
        )?;
    }
    match table.filter() {
        Some(f) => {
            let bits_per_key = if props.num_entries == 0 {
                0.0
            } else {
                f.num_bytes() as f64 * 8.0 / props.num_entries as f64
            };
            let layout = match f.layout() {
                FilterLayout::Blocked => "cache-local",
                FilterLayout::Whole => "whole-table",
            };
            writeln!(
                out,
                "bloom filter: {layout}, {} bytes, {} probes, {bits_per_key:.1} bits per entry",
                f.num_bytes(),
                f.num_probes()
            )?;
        }
        None => writeln!(out, "bloom filter: none")?,
    }
    let index = table.index_entries()?;
    writeln!(out, "index: {} data blocks", index.len())?;
    for (i, (separator, handle)) in index.iter().enumerate() {
        writeln!(
            out,
            "  block {i}: offset {} size {} up to {}",
            handle.offset,
            handle.size,
            show_internal_key(enc, separator)
        )?;
    }
    if entries {
        writeln!(out, "entries (sequence, kind, key, value):")?;
        let mut it = table.iter(ReadFlags {
            verify_checksums: true,
            fill_cache: false,
            release_behind: true,
        });
        it.seek_to_first();
        while it.valid() {
            match parse_internal_key(it.key()) {
                Some(p) => writeln!(
                    out,
                    "  {}\t{}\t{}\t{}",
                    p.sequence,
                    kind_name(p.kind),
                    enc.encode(p.user_key),
                    show_value(enc, p.kind, it.value())
                )?,
                None => writeln!(
                    out,
                    "  ?\tmalformed\t{}\t{}",
                    enc.encode(it.key()),
                    enc.encode(it.value())
                )?,
            }
            it.next();
        }
        out.flush()?;
        it.status()?;
    }
    if verify {
        out.flush()?;
        let n = table.verify()?;
        writeln!(
            out,
            "verified: {n} entries in {} data blocks; every checksum matches and keys are in order",
            index.len()
        )?;
    }
    out.flush()?;
    Ok(())
}

/// `wal-dump FILE`.
/// A missing file is "anything else" (exit 5), like a missing database, not an I/O error.
fn must_exist(path: &Path) -> CliResult {
    if path.exists() {
        return Ok(());
    }
    Err(Failure::new(
        Exit::Other,
        format!("{} does not exist", path.display()),
    ))
}

/// Refuses a file that does not start like a shale log: the log reader would take it for a
/// log torn at its first byte, and the dump would report an empty log with success.
fn ensure_log_file(fs: &PosixFs, path: &Path) -> CliResult {
    match shale::wal::sniff_header(fs, path)? {
        shale::wal::HeaderSniff::Log | shale::wal::HeaderSniff::Blank => Ok(()),
        shale::wal::HeaderSniff::Foreign => Err(Failure::new(
            Exit::Corruption,
            format!(
                "{}: not a shale log file: no \"shaleLOG\" header record at its start (a log \
                 whose first write was cut short by a crash would read as empty to recovery, \
                 and is reported here too)",
                path.display()
            ),
        )),
    }
}

pub fn wal_dump(ctx: &Context, path: &Path) -> CliResult {
    let enc = ctx.encoding;
    let fs = PosixFs::new();
    must_exist(path)?;
    let size = fs.file_size(path)?;
    ensure_log_file(&fs, path)?;
    let number = number_from_name(path, |t| match t {
        FileType::Wal(n) => Some(n),
        _ => None,
    });
    let mut reader = LogReader::new(
        fs.open_sequential(path)?,
        path.to_path_buf(),
        LogKind::Wal,
        number,
    );
    let mut out = stdout();
    writeln!(out, "WAL {} ({size} bytes)", path.display())?;
    let mut records = 0u64;
    let mut entries = 0u64;
    let mut sequences: Option<(u64, u64)> = None;
    loop {
        let record = match reader.read_record() {
            Ok(Some(r)) => r,
            Ok(None) => break,
            Err(e) => {
                out.flush()?;
                return Err(e.into());
            }
        };
        let offset = reader.last_record_offset();
        records += 1;
        match shale::batch::WalMarker::of_record(&record) {
            Some(shale::batch::WalMarker::Sync) => {
                writeln!(
                    out,
                    "record at offset {offset}: sync marker (every older WAL was synced)"
                )?;
                continue;
            }
            Some(shale::batch::WalMarker::Seal) => {
                writeln!(
                    out,
                    "record at offset {offset}: seal (the WAL's last record)"
                )?;
                continue;
            }
            None => {}
        }
        let batch = match WriteBatch::from_data(record, path, offset) {
            Ok(b) => b,
            Err(e) => {
                out.flush()?;
                return Err(e.into());
            }
        };
        let first = batch.sequence();
        writeln!(
            out,
            "record at offset {offset}: {} bytes, batch sequence {first}, {} entries",
            batch.data().len(),
            batch.count()
        )?;
        for (seq, entry) in (first..).zip(batch.iter()) {
            let entry = entry?;
            entries += 1;
            let last = sequences.map_or(seq, |(_, l)| l.max(seq));
            sequences = Some((sequences.map_or(seq, |(f, _)| f.min(seq)), last));
            match entry.kind {
                ValueKind::Deletion => writeln!(
                    out,
                    "  {seq}\t{}\t{}",
                    kind_name(entry.kind),
                    enc.encode(entry.key)
                )?,
                kind => writeln!(
                    out,
                    "  {seq}\t{}\t{}\t{}",
                    kind_name(kind),
                    enc.encode(entry.key),
                    show_value(enc, kind, entry.value)
                )?,
            }
        }
    }
    match sequences {
        Some((first, last)) => writeln!(
            out,
            "{records} records, {entries} entries, sequences {first} to {last}"
        )?,
        None => writeln!(out, "{records} records, no entries")?,
    }
    match reader.torn_tail() {
        Some(torn) => writeln!(
            out,
            "torn tail at offset {}: {}; {} bytes after it are dropped by recovery",
            torn.offset, torn.reason, torn.dropped_bytes
        )?,
        None => writeln!(out, "no torn tail: every byte up to {size} was read")?,
    }
    out.flush()?;
    Ok(())
}

/// Which manifest a path means: the file itself, or the one `CURRENT` names in a directory.
/// Returns the manifest path and its number.
pub fn resolve_manifest(fs: &dyn Fs, path: &Path) -> CliResult<(PathBuf, u64)> {
    if path.is_dir() {
        let current = current_file_name(path);
        if !fs.exists(&current) {
            return Err(Failure::new(
                Exit::Other,
                format!(
                    "{} is not a shale database: it has no CURRENT file",
                    path.display()
                ),
            ));
        }
        let contents = shale::env::read_all(fs, &current)?;
        let number = std::str::from_utf8(&contents)
            .ok()
            .and_then(|s| s.strip_suffix('\n'))
            .and_then(parse_file_name)
            .and_then(|t| match t {
                FileType::Manifest(n) => Some(n),
                _ => None,
            })
            .ok_or_else(|| {
                Failure::from(shale::Error::corruption(
                    &current,
                    0,
                    format!(
                        "expected a manifest name and a newline, found {:?}",
                        String::from_utf8_lossy(&contents)
                    ),
                ))
            })?;
        let manifest = manifest_file_name(path, number);
        if !fs.exists(&manifest) {
            return Err(shale::Error::corruption(
                &current,
                0,
                format!("names {}, which does not exist", manifest.display()),
            )
            .into());
        }
        return Ok((manifest, number));
    }
    must_exist(path)?;
    let number = number_from_name(path, |t| match t {
        FileType::Manifest(n) => Some(n),
        _ => None,
    })
    .ok_or_else(|| {
        Failure::usage(format!(
            "{} is neither a database directory nor a file named MANIFEST-NNNNNN",
            path.display()
        ))
    })?;
    Ok((path.to_path_buf(), number))
}

/// The state a manifest describes, replayed edit by edit.
#[derive(Debug, Default)]
pub struct ManifestState {
    /// Comparator name, once recorded.
    pub comparator: Option<String>,
    /// WALs numbered below this are obsolete.
    pub log_number: Option<u64>,
    /// The next file number to hand out.
    pub next_file_number: Option<u64>,
    /// Last sequence number recorded.
    pub last_sequence: Option<u64>,
    /// Live tables by number, with their level.
    pub files: BTreeMap<u64, (usize, FileMetaData)>,
    /// Edits applied.
    pub edits: u64,
}

impl ManifestState {
    /// Applies one edit; the error says what does not fit the state so far.
    pub fn apply(&mut self, edit: &VersionEdit) -> Result<(), String> {
        self.edits += 1;
        if let Some(c) = &edit.comparator {
            self.comparator = Some(c.clone());
        }
        if edit.log_number.is_some() {
            self.log_number = edit.log_number;
        }
        if edit.next_file_number.is_some() {
            self.next_file_number = edit.next_file_number;
        }
        if edit.last_sequence.is_some() {
            self.last_sequence = edit.last_sequence;
        }
        for &(level, number) in &edit.deleted_files {
            match self.files.get(&number) {
                Some((l, _)) if *l == level => {
                    self.files.remove(&number);
                }
                Some((l, _)) => {
                    return Err(format!(
                        "deletes table {number} from level {level}, but it is in level {l}"
                    ))
                }
                None => {
                    return Err(format!(
                        "deletes table {number} from level {level}, which does not hold it"
                    ))
                }
            }
        }
        for (level, f) in &edit.new_files {
            if *level >= NUM_LEVELS {
                return Err(format!(
                    "adds table {} to level {level}, which does not exist",
                    f.number
                ));
            }
            if self.files.insert(f.number, (*level, f.clone())).is_some() {
                return Err(format!("adds table {}, which is already live", f.number));
            }
        }
        Ok(())
    }

    /// Live tables per level, in file-number order.
    pub fn levels(&self) -> Vec<Vec<&FileMetaData>> {
        let mut levels = vec![Vec::new(); NUM_LEVELS];
        for (level, f) in self.files.values() {
            if let Some(l) = levels.get_mut(*level) {
                l.push(f);
            }
        }
        levels
    }
}

fn show_file(enc: Encoding, f: &FileMetaData) -> String {
    format!(
        "{:06}.sst {} bytes, keys {} .. {}, sequences {}..{}, {} entries ({} deletions)",
        f.number,
        f.file_size,
        show_internal_key(enc, &f.smallest),
        show_internal_key(enc, &f.largest),
        f.smallest_seqno,
        f.largest_seqno,
        f.num_entries,
        f.num_deletions
    )
}

/// `manifest-dump DB|MANIFEST`.
pub fn manifest_dump(ctx: &Context, path: &Path) -> CliResult {
    let enc = ctx.encoding;
    let fs = PosixFs::new();
    let (manifest, number) = resolve_manifest(&fs, path)?;
    ensure_log_file(&fs, &manifest)?;
    let mut out = stdout();
    writeln!(
        out,
        "manifest {} ({} bytes)",
        manifest.display(),
        fs.file_size(&manifest)?
    )?;
    let mut reader = LogReader::new(
        fs.open_sequential(&manifest)?,
        manifest.clone(),
        LogKind::Manifest,
        Some(number),
    );
    let mut state = ManifestState::default();
    loop {
        let record = match reader.read_record() {
            Ok(Some(r)) => r,
            Ok(None) => break,
            Err(e) => {
                out.flush()?;
                return Err(e.into());
            }
        };
        let offset = reader.last_record_offset();
        let edit = VersionEdit::decode(&record).map_err(|m| {
            let _ = out.flush();
            shale::Error::corruption(&manifest, offset, format!("undecodable version edit: {m}"))
        })?;
        writeln!(out, "edit {} at offset {offset}:", state.edits + 1)?;
        print_edit(&mut out, enc, &edit)?;
        if let Err(m) = state.apply(&edit) {
            out.flush()?;
            return Err(shale::Error::corruption(&manifest, offset, m).into());
        }
    }
    if let Some(torn) = reader.torn_tail() {
        writeln!(
            out,
            "torn tail at offset {}: {}; {} bytes after it are dropped by recovery",
            torn.offset, torn.reason, torn.dropped_bytes
        )?;
    }
    let show = |v: Option<u64>| v.map_or_else(|| "missing".to_string(), |n| n.to_string());
    writeln!(out, "final state after {} edits:", state.edits)?;
    writeln!(
        out,
        "  comparator {}, log number {}, next file number {}, last sequence {}",
        state.comparator.as_deref().unwrap_or("missing"),
        show(state.log_number),
        show(state.next_file_number),
        show(state.last_sequence)
    )?;
    for (level, files) in state.levels().iter().enumerate() {
        if files.is_empty() {
            continue;
        }
        let bytes: u64 = files.iter().map(|f| f.file_size).sum();
        writeln!(out, "  level {level}: {} files, {bytes} bytes", files.len())?;
        for f in files {
            writeln!(out, "    {}", show_file(enc, f))?;
        }
    }
    if state.files.is_empty() {
        writeln!(out, "  no tables")?;
    }
    out.flush()?;
    Ok(())
}

fn print_edit(out: &mut Out, enc: Encoding, edit: &VersionEdit) -> std::io::Result<()> {
    if let Some(c) = &edit.comparator {
        writeln!(out, "  comparator {c}")?;
    }
    if let Some(n) = edit.log_number {
        writeln!(out, "  log number {n}")?;
    }
    if let Some(n) = edit.next_file_number {
        writeln!(out, "  next file number {n}")?;
    }
    if let Some(n) = edit.last_sequence {
        writeln!(out, "  last sequence {n}")?;
    }
    for (level, key) in &edit.compact_pointers {
        writeln!(
            out,
            "  compact pointer level {level} at {}",
            show_internal_key(enc, key)
        )?;
    }
    for (level, number) in &edit.deleted_files {
        writeln!(out, "  delete level {level} table {number:06}.sst")?;
    }
    for (level, f) in &edit.new_files {
        writeln!(out, "  add level {level} {}", show_file(enc, f))?;
    }
    Ok(())
}
