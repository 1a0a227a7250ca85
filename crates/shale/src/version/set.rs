//! The version set: the current [`Version`], the database's counters (next file number, last
//! sequence number, oldest live WAL), the manifest they are recorded in, and compaction picking.
//!
//! Durability protocol (see `docs/format/manifest.md` and `docs/format/files.md`):
//! - Every change is a [`VersionEdit`] appended to the manifest and synced before the new
//!   version is installed in memory. A version is never visible before it is durable.
//! - The first edit after open, and the first after the manifest passes its size limit, goes
//!   to a new manifest instead: a full snapshot record, synced, the directory synced, then
//!   `CURRENT` replaced atomically. A crash at any point leaves `CURRENT` naming a complete
//!   manifest.
//! - A failed write or sync leaves the manifest in an unknown state: the error is sticky and
//!   every later edit is refused, so the database can poison itself instead of acknowledging
//!   changes it may not be able to recover.
//! - Recovery replays the manifest `CURRENT` names. A torn tail (the last record cut off by a
//!   crash during its append, which was therefore never acknowledged) is dropped; damage
//!   followed by intact records, an undecodable record, an inconsistent edit or a missing
//!   counter is corruption naming the manifest.
//!
//! Thread-safety: not synchronized. The database holds the `VersionSet` under its mutex; the
//! [`Version`]s it hands out are immutable and shared freely.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};

use super::edit::{FileMetaData, VersionEdit};
use super::version::{apply_blob_changes, BlobFileMeta, Version};
use crate::compaction::{self, Compaction};
use crate::env::{read_all, write_file_atomic, Fs};
use crate::error::{Error, Result};
use crate::filename::{
    blob_file_name, current_file_name, manifest_file_name, parse_file_name, table_file_name,
    wal_file_name, FileType, CURRENT_FILE, MAX_FILE_NUMBER,
};
use crate::key::{InternalKeyComparator, MAX_SEQUENCE};
use crate::limits::NUM_LEVELS;
use crate::wal::{LogKind, LogReader, LogWriter};
use crate::Options;

/// Size after which the next edit starts a new manifest (with a compact snapshot) instead of
/// growing the current one.
pub const DEFAULT_MAX_MANIFEST_BYTES: u64 = 64 << 20;

/// The counters recovered from the manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecoveredState {
    /// WALs numbered at or above this must be replayed; older ones are obsolete.
    pub log_number: u64,
    /// The next file number to hand out.
    pub next_file_number: u64,
    /// The sequence number of the last write recorded in tables.
    pub last_sequence: u64,
    /// Number of the manifest that was read.
    pub manifest_number: u64,
}

/// The current version, the counters, and the manifest. See the module docs.
pub struct VersionSet {
    dir: PathBuf,
    options: Options,
    icmp: InternalKeyComparator,
    current: Arc<Version>,
    /// Versions replaced by a later one; some reader may still hold them.
    old_versions: Vec<Weak<Version>>,
    next_file_number: u64,
    manifest_number: u64,
    last_sequence: u64,
    log_number: u64,
    /// Where the next size compaction of each level starts (internal keys; empty = start).
    compact_pointers: [Vec<u8>; NUM_LEVELS],
    /// The compact pointers as last written to the manifest.
    logged_pointers: [Vec<u8>; NUM_LEVELS],
    /// The manifest edits are appended to; `None` until the first edit after open.
    manifest: Option<LogWriter>,
    max_manifest_bytes: u64,
    /// The first manifest write or sync failure; once set, edits are refused.
    sticky_error: Option<Error>,
}

impl std::fmt::Debug for VersionSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VersionSet")
            .field("dir", &self.dir)
            .field("current", &self.current)
            .field("next_file_number", &self.next_file_number)
            .field("manifest_number", &self.manifest_number)
            .field("last_sequence", &self.last_sequence)
            .field("log_number", &self.log_number)
            .field("sticky_error", &self.sticky_error)
            .finish_non_exhaustive()
    }
}

impl VersionSet {
    /// A version set for the database in `dir`, empty until [`VersionSet::create_new_db`] or
    /// [`VersionSet::recover`]. Uses `options.fs`, the comparator and the level sizing.
    pub fn new(dir: PathBuf, options: Options) -> VersionSet {
        let icmp = InternalKeyComparator::new(options.comparator.clone());
        VersionSet {
            dir,
            current: Arc::new(Version::empty(icmp.clone())),
            icmp,
            options,
            old_versions: Vec::new(),
            next_file_number: 2,
            manifest_number: 0,
            last_sequence: 0,
            log_number: 0,
            compact_pointers: Default::default(),
            logged_pointers: Default::default(),
            manifest: None,
            max_manifest_bytes: DEFAULT_MAX_MANIFEST_BYTES,
            sticky_error: None,
        }
    }

    fn fs(&self) -> &dyn Fs {
        self.options.fs.as_ref()
    }

    /// Changes the manifest size after which the next edit starts a new manifest.
    pub fn set_max_manifest_bytes(&mut self, bytes: u64) {
        self.max_manifest_bytes = bytes;
    }

    /// The internal-key comparator of the database.
    pub fn comparator(&self) -> &InternalKeyComparator {
        &self.icmp
    }

    /// Writes the manifest of an empty database: `MANIFEST-000001` holding the comparator name,
    /// log number 0, next file number 2 and last sequence 0, synced; then `CURRENT` naming it,
    /// written atomically and synced with the directory. Leaves this set in the state
    /// [`VersionSet::recover`] would produce.
    pub fn create_new_db(&mut self) -> Result<()> {
        const FIRST_MANIFEST: u64 = 1;
        let edit = VersionEdit {
            comparator: Some(self.icmp.user().name().to_string()),
            log_number: Some(0),
            next_file_number: Some(FIRST_MANIFEST + 1),
            last_sequence: Some(0),
            ..VersionEdit::default()
        };
        self.fs().create_dir_all(&self.dir)?;
        let path = manifest_file_name(&self.dir, FIRST_MANIFEST);
        let written = (|| -> Result<()> {
            let file = self.fs().create(&path)?;
            let mut writer = LogWriter::new(file, path.clone(), LogKind::Manifest, FIRST_MANIFEST)?;
            writer.add_record(&edit.encode())?;
            writer.sync()?;
            writer.close()
        })();
        if let Err(e) = written {
            // Nothing points at the half-written manifest; remove it so a retry starts clean.
            let _ = self.fs().remove(&path);
            return Err(e);
        }
        set_current_file(self.fs(), &self.dir, FIRST_MANIFEST)?;
        self.reset_to_empty();
        self.next_file_number = FIRST_MANIFEST + 1;
        self.manifest_number = FIRST_MANIFEST;
        Ok(())
    }

    /// Makes the in-memory state an empty database's without writing anything: the next
    /// [`VersionSet::log_and_apply`] then writes a new manifest holding the whole state after
    /// its edit and points `CURRENT` at it in one atomic step. Repair builds its database this
    /// way, so that until that step `CURRENT` keeps naming the old manifest (an empty manifest
    /// named by `CURRENT` first would make every table obsolete if the process stopped there).
    pub(crate) fn reset_to_empty(&mut self) {
        self.current = Arc::new(Version::empty(self.icmp.clone()));
        self.next_file_number = 2;
        self.manifest_number = 0;
        self.log_number = 0;
        self.last_sequence = 0;
        self.compact_pointers = Default::default();
        self.logged_pointers = Default::default();
        self.manifest = None;
    }

    /// Reads `CURRENT` and replays the manifest it names, installing the recovered version as
    /// current. A torn tail is dropped (the next [`VersionSet::log_and_apply`] writes a fresh
    /// manifest anyway); other damage, a missing counter, or a comparator other than the one in
    /// the options is an error naming the file.
    pub fn recover(&mut self) -> Result<RecoveredState> {
        let current_path = current_file_name(&self.dir);
        // One manifest name: anything much longer is damage, not worth reading or echoing whole.
        const CURRENT_MAX_BYTES: u64 = 64;
        let size = self.fs().file_size(&current_path)?;
        if size > CURRENT_MAX_BYTES {
            return Err(Error::corruption(
                &current_path,
                0,
                format!(
                    "is {size} bytes, expected a manifest name and a newline \
                     (at most {CURRENT_MAX_BYTES} bytes)"
                ),
            ));
        }
        let contents = read_all(self.fs(), &current_path)?;
        let manifest_number = std::str::from_utf8(&contents)
            .ok()
            .and_then(|s| s.strip_suffix('\n'))
            .and_then(parse_file_name)
            .and_then(|t| match t {
                FileType::Manifest(n) => Some(n),
                _ => None,
            })
            .ok_or_else(|| {
                Error::corruption(
                    &current_path,
                    0,
                    format!(
                        "expected a manifest name and a newline, found {:?}",
                        String::from_utf8_lossy(&contents)
                    ),
                )
            })?;
        let path = manifest_file_name(&self.dir, manifest_number);
        if !self.fs().exists(&path) {
            return Err(Error::corruption(
                &current_path,
                0,
                format!("names {}, which does not exist", path.display()),
            ));
        }
        let file = self.fs().open_sequential(&path)?;
        let mut reader =
            LogReader::new(file, path.clone(), LogKind::Manifest, Some(manifest_number));
        let mut replay = Replay::default();
        while let Some(record) = reader.read_record()? {
            let offset = reader.last_record_offset();
            let edit = VersionEdit::decode(&record).map_err(|m| {
                Error::corruption(&path, offset, format!("undecodable version edit: {m}"))
            })?;
            if let Some(name) = &edit.comparator {
                let expected = self.icmp.user().name();
                if name != expected {
                    return Err(Error::InvalidArgument(format!(
                        "{}: the database was created with comparator {name:?}, \
                         but is being opened with {expected:?}",
                        path.display()
                    )));
                }
            }
            replay
                .apply(edit)
                .map_err(|m| Error::corruption(&path, offset, m))?;
        }
        let torn_tail = reader.torn_tail().cloned();
        if let Some(torn) = &torn_tail {
            tracing::warn!(
                manifest = %path.display(),
                offset = torn.offset,
                dropped_bytes = torn.dropped_bytes,
                reason = %torn.reason,
                "dropping the torn tail of the manifest"
            );
        }
        let missing =
            |what: &str| Error::corruption(&path, 0, format!("manifest records no {what}"));
        if !replay.comparator_seen {
            return Err(missing("comparator name"));
        }
        let next_file_number = replay
            .next_file_number
            .ok_or_else(|| missing("next file number"))?;
        let log_number = replay.log_number.ok_or_else(|| missing("log number"))?;
        let last_sequence = replay
            .last_sequence
            .ok_or_else(|| missing("last sequence"))?;
        // Counters past what shale ever produces would overflow later arithmetic (a sequence
        // above MAX_SEQUENCE loses its high bits in an internal key; a file number near u64::MAX
        // wraps the counter, and the next file created truncates a live one).
        if last_sequence > MAX_SEQUENCE {
            return Err(Error::corruption(
                &path,
                0,
                format!("last sequence {last_sequence} is above the largest, {MAX_SEQUENCE}"),
            ));
        }
        let highest_file = replay
            .files
            .keys()
            .copied()
            .chain(replay.blob_files.keys().copied())
            .chain([next_file_number, log_number])
            .max()
            .unwrap_or(0);
        if highest_file > MAX_FILE_NUMBER {
            return Err(Error::corruption(
                &path,
                0,
                format!(
                    "file number {highest_file} (a file, the log number or the next file \
                     number) is above the largest, {MAX_FILE_NUMBER}"
                ),
            ));
        }

        let mut levels: [Vec<Arc<FileMetaData>>; NUM_LEVELS] = Default::default();
        for (level, f) in replay.files.into_values() {
            levels[level].push(Arc::new(f));
        }
        let version = Version::from_levels(self.icmp.clone(), levels)
            .map_err(|m| Error::corruption(&path, 0, format!("recovered version is invalid: {m}")))?
            .with_blob_files(std::mem::take(&mut replay.blob_files));
        if let Some(torn) = &torn_tail {
            self.check_torn_tail_was_never_applied(&path, torn.offset, log_number, &version)?;
        }

        self.next_file_number = next_file_number;
        self.mark_file_number_used(manifest_number);
        self.mark_file_number_used(log_number);
        let max_table = version.all_file_numbers().max().unwrap_or(0);
        self.mark_file_number_used(max_table);
        let max_blob = version
            .blob_files()
            .keys()
            .next_back()
            .copied()
            .unwrap_or(0);
        self.mark_file_number_used(max_blob);
        self.install(version);
        self.manifest_number = manifest_number;
        self.log_number = log_number;
        self.last_sequence = last_sequence;
        self.compact_pointers = replay.compact_pointers.clone();
        self.logged_pointers = replay.compact_pointers;
        // The next edit opens a new manifest, so a dropped tail is never appended after.
        self.manifest = None;
        Ok(RecoveredState {
            log_number,
            next_file_number: self.next_file_number,
            last_sequence,
            manifest_number,
        })
    }

    /// A torn manifest tail is an edit whose append was cut off by a crash, so it was never
    /// acknowledged and nothing acted on it: every file the version before it needs is still
    /// there. When one is gone (a table it names, or the WAL at its log number), the edit *was*
    /// acknowledged and then acted on, and the "torn" record is a damaged durable one: that is
    /// corruption, not a tail to drop.
    fn check_torn_tail_was_never_applied(
        &self,
        manifest: &Path,
        offset: u64,
        log_number: u64,
        version: &Version,
    ) -> Result<()> {
        let damaged = |what: String| {
            Error::corruption(
                manifest,
                offset,
                format!("the last record is damaged, and {what}: it was durable, not torn"),
            )
        };
        for number in version.all_file_numbers() {
            if !self.fs().exists(&table_file_name(&self.dir, number)) {
                return Err(damaged(format!("table {number} it needs is gone")));
            }
        }
        for &number in version.blob_files().keys() {
            if !self.fs().exists(&blob_file_name(&self.dir, number)) {
                return Err(damaged(format!("blob file {number} it needs is gone")));
            }
        }
        if log_number > 0 && !self.fs().exists(&wal_file_name(&self.dir, log_number)) {
            return Err(damaged(format!("WAL {log_number} it needs is gone")));
        }
        Ok(())
    }

    /// Records `edit` durably and installs the version it produces.
    ///
    /// Fills in `next_file_number` and `last_sequence` (an edit's own values only ever raise
    /// the set's), and `log_number` if absent; adds compact pointers that moved since they were
    /// last written. An edit that does not apply to the current version (deleting a file that
    /// is not there, overlapping files in a level, a log number going backwards) is refused
    /// with [`Error::InvalidArgument`] before anything is written. A write or sync failure is
    /// returned, the version is not installed, and every later call fails with
    /// [`Error::Poisoned`].
    pub fn log_and_apply(&mut self, mut edit: VersionEdit) -> Result<()> {
        if let Some(e) = &self.sticky_error {
            return Err(Error::Poisoned(format!(
                "an earlier manifest write failed: {e}"
            )));
        }
        let refuse = |m: String| Err(Error::InvalidArgument(format!("version edit refused: {m}")));
        if let Some(name) = &edit.comparator {
            if name != self.icmp.user().name() {
                return refuse(format!("comparator {name:?} is not the database's"));
            }
        }
        match edit.log_number {
            Some(n) if n < self.log_number => {
                return refuse(format!(
                    "log number {n} is below the current {}",
                    self.log_number
                ))
            }
            Some(n) if n >= self.next_file_number => {
                return refuse(format!(
                    "log number {n} was never handed out (next file number {})",
                    self.next_file_number
                ))
            }
            Some(_) => {}
            None => edit.log_number = Some(self.log_number),
        }
        if let Some((level, _)) = edit.compact_pointers.iter().find(|(l, _)| *l >= NUM_LEVELS) {
            return refuse(format!(
                "compact pointer for level {level}, which does not exist"
            ));
        }
        let new_version = match self.current.apply(&edit) {
            Ok(v) => v,
            Err(m) => return refuse(m),
        };
        if let Some(n) = edit.next_file_number {
            self.mark_file_number_used(n.saturating_sub(1));
        }
        let last_sequence = self.last_sequence.max(edit.last_sequence.unwrap_or(0));
        let mut pointers = self.compact_pointers.clone();
        for (level, key) in &edit.compact_pointers {
            pointers[*level] = key.clone();
        }
        edit.compact_pointers = (0..NUM_LEVELS)
            .filter(|&l| !pointers[l].is_empty() && pointers[l] != self.logged_pointers[l])
            .map(|l| (l, pointers[l].clone()))
            .collect();
        edit.last_sequence = Some(last_sequence);

        let roll = match &self.manifest {
            Some(w) => w.file_size() >= self.max_manifest_bytes,
            None => true,
        };
        let written = if roll {
            let number = self.new_file_number();
            edit.next_file_number = Some(self.next_file_number);
            let snapshot = VersionEdit {
                comparator: Some(self.icmp.user().name().to_string()),
                log_number: edit.log_number,
                next_file_number: edit.next_file_number,
                last_sequence: edit.last_sequence,
                compact_pointers: (0..NUM_LEVELS)
                    .filter(|&l| !pointers[l].is_empty())
                    .map(|l| (l, pointers[l].clone()))
                    .collect(),
                deleted_files: Vec::new(),
                new_files: (0..NUM_LEVELS)
                    .flat_map(|l| new_version.files(l).iter().map(move |f| (l, (**f).clone())))
                    .collect(),
                blob_files: new_version
                    .blob_files()
                    .iter()
                    .map(|(n, m)| (*n, m.total_bytes))
                    .collect(),
                blob_garbage: new_version
                    .blob_files()
                    .iter()
                    .filter(|(_, m)| m.garbage_bytes > 0)
                    .map(|(n, m)| (*n, m.garbage_bytes))
                    .collect(),
            };
            self.start_manifest(number, &snapshot)
        } else {
            edit.next_file_number = Some(self.next_file_number);
            self.append_to_manifest(&edit)
        };
        if let Err(e) = written {
            tracing::error!(error = %e, "manifest write failed; refusing further version edits");
            self.sticky_error = Some(e.duplicate());
            self.manifest = None;
            return Err(e);
        }

        self.install(new_version);
        self.log_number = edit.log_number.unwrap_or(self.log_number);
        self.last_sequence = last_sequence;
        self.compact_pointers = pointers.clone();
        self.logged_pointers = pointers;
        Ok(())
    }

    /// Writes a new manifest holding `snapshot`, makes it durable, and points `CURRENT` at it.
    fn start_manifest(&mut self, number: u64, snapshot: &VersionEdit) -> Result<()> {
        let path = manifest_file_name(&self.dir, number);
        let written = (|| -> Result<LogWriter> {
            let file = self.fs().create(&path)?;
            let mut writer = LogWriter::new(file, path.clone(), LogKind::Manifest, number)?;
            writer.add_record(&snapshot.encode())?;
            writer.sync()?;
            // The new manifest's directory entry must be durable before CURRENT names it.
            self.fs().sync_dir(&self.dir)?;
            Ok(writer)
        })();
        let writer = match written {
            Ok(w) => w,
            Err(e) => {
                // CURRENT still names the old manifest, so the new one is garbage.
                let _ = self.fs().remove(&path);
                return Err(e);
            }
        };
        // From here on the new manifest is kept even on failure: the rename inside
        // `set_current_file` may have happened, and then it is the live manifest.
        set_current_file(self.fs(), &self.dir, number)?;
        if let Some(mut old) = self.manifest.replace(writer) {
            // Everything in the old manifest was synced; a close error loses nothing.
            if let Err(e) = old.close() {
                tracing::warn!(error = %e, "closing the previous manifest failed");
            }
        }
        tracing::info!(manifest = %path.display(), "started a new manifest");
        self.manifest_number = number;
        Ok(())
    }

    fn append_to_manifest(&mut self, edit: &VersionEdit) -> Result<()> {
        let writer = self
            .manifest
            .as_mut()
            .ok_or_else(|| Error::Poisoned("no manifest is open".into()))?;
        writer.add_record(&edit.encode())?;
        writer.sync()
    }

    /// Makes `version` current, remembering the old one while readers may hold it.
    fn install(&mut self, version: Version) {
        let old = std::mem::replace(&mut self.current, Arc::new(version));
        self.old_versions.retain(|w| w.strong_count() > 0);
        if Arc::strong_count(&old) > 1 {
            self.old_versions.push(Arc::downgrade(&old));
        }
    }

    /// The current version.
    pub fn current(&self) -> Arc<Version> {
        Arc::clone(&self.current)
    }

    /// The current version, borrowed: no reference count taken (each write checks level 0,
    /// and a count costs two locked instructions).
    pub(crate) fn current_ref(&self) -> &Version {
        &self.current
    }

    /// Hands out a new file number.
    pub fn new_file_number(&mut self) -> u64 {
        let n = self.next_file_number;
        self.next_file_number += 1;
        n
    }

    /// Makes sure `n` is never handed out again.
    pub fn mark_file_number_used(&mut self, n: u64) {
        if self.next_file_number <= n {
            self.next_file_number = n.saturating_add(1);
        }
    }

    /// The next file number that will be handed out.
    pub fn next_file_number(&self) -> u64 {
        self.next_file_number
    }

    /// The sequence number of the last write.
    pub fn last_sequence(&self) -> u64 {
        self.last_sequence
    }

    /// Records the sequence number of the last write; it never goes backwards.
    pub fn set_last_sequence(&mut self, s: u64) {
        debug_assert!(
            s >= self.last_sequence,
            "sequence numbers never go backwards"
        );
        self.last_sequence = self.last_sequence.max(s);
    }

    /// WALs numbered below this are obsolete.
    pub fn log_number(&self) -> u64 {
        self.log_number
    }

    /// Number of the live manifest (the one `CURRENT` names).
    pub fn manifest_number(&self) -> u64 {
        self.manifest_number
    }

    /// Every table referenced by the current version or by an older version some reader,
    /// iterator or compaction still holds. Tables outside this set may be deleted.
    pub fn live_files(&self) -> BTreeSet<u64> {
        let mut live: BTreeSet<u64> = self.current.all_file_numbers().collect();
        for v in self.old_versions.iter().filter_map(Weak::upgrade) {
            live.extend(v.all_file_numbers());
        }
        live
    }

    /// Every blob file referenced by the current version or by an older version some reader,
    /// iterator or compaction still holds.
    pub fn live_blob_files(&self) -> BTreeSet<u64> {
        let mut live: BTreeSet<u64> = self.current.blob_files().keys().copied().collect();
        for v in self.old_versions.iter().filter_map(Weak::upgrade) {
            live.extend(v.blob_files().keys().copied());
        }
        live
    }

    /// Compaction score of each level; see [`compaction::level_scores`].
    pub fn level_scores(&self) -> Vec<f64> {
        compaction::level_scores(&self.current, &self.options)
    }

    /// Target bytes of `level`; see [`compaction::max_bytes_for_level`].
    pub fn max_bytes_for_level(&self, level: usize) -> u64 {
        compaction::max_bytes_for_level(&self.options, level)
    }

    /// True if some level scores 1 or more, or some file's entries have all expired at
    /// `now_micros`; see [`compaction::needs_compaction`].
    pub fn needs_compaction(&self, now_micros: u64) -> bool {
        compaction::needs_compaction(&self.current, &self.options, now_micros)
    }

    /// The compaction the current version most needs at `now_micros` (by size, else by
    /// expiry), advancing a size-picked level's compact pointer (written to the manifest with
    /// the next edit); see [`compaction::pick_compaction`].
    pub fn pick_compaction(&mut self, now_micros: u64) -> Option<Compaction> {
        compaction::pick_compaction(
            &self.current,
            &self.options,
            &mut self.compact_pointers,
            now_micros,
        )
    }

    /// When a file of the current version will have all of its entries expired; see
    /// [`compaction::next_file_expiry`].
    pub fn next_file_expiry(&self) -> Option<u64> {
        compaction::next_file_expiry(&self.current)
    }

    /// A manual compaction of the files of `level` overlapping the user-key range
    /// `[begin, end]` into `level` itself; see [`compaction::compact_level_in_place`].
    pub fn compact_level_in_place(
        &self,
        level: usize,
        begin: Option<&[u8]>,
        end: Option<&[u8]>,
    ) -> Option<Compaction> {
        compaction::compact_level_in_place(&self.current, &self.options, level, begin, end)
    }

    /// A manual compaction of the files of `level` overlapping the user-key range
    /// `[begin, end]`; see [`compaction::compact_range`].
    pub fn compact_range(
        &mut self,
        level: usize,
        begin: Option<&[u8]>,
        end: Option<&[u8]>,
    ) -> Option<Compaction> {
        compaction::compact_range(
            &self.current,
            &self.options,
            &mut self.compact_pointers,
            level,
            begin,
            end,
        )
    }
}

/// Writes `CURRENT` naming manifest `number`, atomically and durably.
fn set_current_file(fs: &dyn Fs, dir: &Path, number: u64) -> Result<()> {
    let name = manifest_file_name(Path::new(""), number);
    let contents = format!("{}\n", name.display());
    write_file_atomic(fs, dir, CURRENT_FILE, contents.as_bytes())
}

/// State accumulated while replaying a manifest: cheap per edit, checked as a whole at the end.
#[derive(Default)]
struct Replay {
    comparator_seen: bool,
    log_number: Option<u64>,
    next_file_number: Option<u64>,
    last_sequence: Option<u64>,
    compact_pointers: [Vec<u8>; NUM_LEVELS],
    /// Live files by number, with their level.
    files: BTreeMap<u64, (usize, FileMetaData)>,
    /// Blob files by number.
    blob_files: BTreeMap<u64, BlobFileMeta>,
}

impl Replay {
    fn apply(&mut self, edit: VersionEdit) -> Result<(), String> {
        self.comparator_seen |= edit.comparator.is_some();
        if edit.log_number.is_some() {
            self.log_number = edit.log_number;
        }
        if edit.next_file_number.is_some() {
            self.next_file_number = edit.next_file_number;
        }
        if edit.last_sequence.is_some() {
            self.last_sequence = edit.last_sequence;
        }
        for (level, key) in edit.compact_pointers {
            self.compact_pointers[level] = key;
        }
        for (level, number) in edit.deleted_files {
            match self.files.get(&number) {
                Some((l, _)) if *l == level => {
                    self.files.remove(&number);
                }
                _ => {
                    return Err(format!(
                        "edit deletes file {number} from level {level}, which does not hold it"
                    ))
                }
            }
        }
        for (level, f) in edit.new_files {
            if let Some((l, _)) = self.files.get(&f.number) {
                return Err(format!(
                    "edit adds file {} to level {level}, but it is already in level {l}",
                    f.number
                ));
            }
            self.files.insert(f.number, (level, f));
        }
        apply_blob_changes(&mut self.blob_files, &edit.blob_files, &edit.blob_garbage);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;
    use crate::env::{FileLock, MemFs, RandomAccessFile, SequentialFile, WritableFile};
    use crate::key::{make_internal_key, ValueKind};
    use crate::wal::BLOCK_SIZE;

    fn dir() -> PathBuf {
        PathBuf::from("/db")
    }

    fn options(fs: Arc<dyn Fs>) -> Options {
        Options {
            fs,
            max_file_size: 1000,
            max_bytes_for_level_base: 10_000,
            ..Options::default()
        }
    }

    fn meta(number: u64, smallest: &str, largest: &str, size: u64) -> FileMetaData {
        FileMetaData {
            number,
            file_size: size,
            smallest: make_internal_key(smallest.as_bytes(), number, ValueKind::Value),
            largest: make_internal_key(largest.as_bytes(), number, ValueKind::Value),
            smallest_seqno: number,
            largest_seqno: number,
            num_entries: 1,
            num_deletions: 0,
            max_expiry_micros: 0,
            has_permanent_entries: true,
            oldest_blob_file: 0,
        }
    }

    fn fresh(fs: &MemFs) -> VersionSet {
        let mut vs = VersionSet::new(dir(), options(Arc::new(fs.clone())));
        vs.create_new_db().expect("create");
        vs
    }

    fn reopen(fs: &MemFs) -> (VersionSet, Result<RecoveredState>) {
        let mut vs = VersionSet::new(dir(), options(Arc::new(fs.clone())));
        let r = vs.recover();
        (vs, r)
    }

    /// Files per level as `(level, number)` pairs, in read order.
    fn layout(v: &Version) -> Vec<(usize, u64)> {
        (0..NUM_LEVELS)
            .flat_map(|l| v.files(l).iter().map(move |f| (l, f.number)))
            .collect()
    }

    fn flush_edit(vs: &mut VersionSet, level: usize, smallest: &str, largest: &str) -> u64 {
        let n = vs.new_file_number();
        let mut e = VersionEdit::default();
        e.add_file(level, meta(n, smallest, largest, 100));
        vs.set_last_sequence(vs.last_sequence() + 10);
        vs.log_and_apply(e).expect("apply");
        n
    }

    fn current_names(fs: &MemFs) -> String {
        String::from_utf8(fs.contents(&dir().join("CURRENT")).expect("CURRENT")).expect("utf8")
    }

    #[test]
    fn create_then_recover_empty() {
        let fs = MemFs::new();
        let vs = fresh(&fs);
        assert_eq!(current_names(&fs), "MANIFEST-000001\n");
        assert_eq!(vs.manifest_number(), 1);
        let (vs2, r) = reopen(&fs);
        let r = r.expect("recover");
        assert_eq!(
            r,
            RecoveredState {
                log_number: 0,
                next_file_number: 2,
                last_sequence: 0,
                manifest_number: 1,
            }
        );
        assert_eq!(layout(&vs2.current()), vec![]);
    }

    #[test]
    fn edits_survive_recovery() {
        let fs = MemFs::new();
        let mut vs = fresh(&fs);
        let log = vs.new_file_number();
        let a = flush_edit(&mut vs, 0, "a", "f");
        let b = flush_edit(&mut vs, 0, "c", "k");
        let c = flush_edit(&mut vs, 2, "x", "z");
        // A compaction of a and b into level 1, moving the log number on.
        let out = vs.new_file_number();
        let mut e = VersionEdit {
            log_number: Some(log),
            ..VersionEdit::default()
        };
        e.delete_file(0, a);
        e.delete_file(0, b);
        e.add_file(1, meta(out, "a", "k", 300));
        vs.set_last_sequence(1234);
        vs.log_and_apply(e).expect("apply");
        let d = flush_edit(&mut vs, 0, "b", "d");
        // The first edit started MANIFEST-(a+1); the rest appended to it.
        assert_eq!(vs.manifest_number(), a + 1);
        assert_eq!(current_names(&fs), format!("MANIFEST-{:06}\n", a + 1));

        let (vs2, r) = reopen(&fs);
        let r = r.expect("recover");
        assert_eq!(layout(&vs2.current()), vec![(0, d), (1, out), (2, c)]);
        assert_eq!(layout(&vs2.current()), layout(&vs.current()));
        assert_eq!(r.log_number, log);
        assert_eq!(r.last_sequence, vs.last_sequence());
        assert_eq!(r.last_sequence, 1244);
        assert_eq!(r.next_file_number, vs.next_file_number());
        assert_eq!(r.manifest_number, vs.manifest_number());
        let f = vs2.current().files(1)[0].clone();
        assert_eq!(*f, meta(out, "a", "k", 300), "metadata round-trips");
    }

    #[test]
    fn blob_files_survive_recovery_and_manifest_snapshots() {
        let fs = MemFs::new();
        let mut vs = fresh(&fs);
        let mut edit = VersionEdit::default();
        edit.add_file(0, meta(10, "a", "b", 100));
        edit.add_blob_bytes(7, 1000);
        edit.add_blob_bytes(8, 500);
        vs.log_and_apply(edit).expect("apply");
        let mut edit = VersionEdit::default();
        edit.add_blob_garbage(7, 300);
        edit.add_blob_garbage(8, 500); // all of it: file 8 leaves the version
        vs.log_and_apply(edit).expect("apply");
        let expected = vec![(
            7,
            BlobFileMeta {
                total_bytes: 1000,
                garbage_bytes: 300,
            },
        )];
        let blobs = |v: &Version| {
            v.blob_files()
                .iter()
                .map(|(n, m)| (*n, *m))
                .collect::<Vec<_>>()
        };
        assert_eq!(blobs(&vs.current()), expected);
        let (mut vs, recovered) = reopen(&fs);
        recovered.expect("recover");
        assert_eq!(blobs(&vs.current()), expected, "replayed edit by edit");
        assert!(vs.next_file_number() > 8);
        // The next edit writes a new manifest whose snapshot carries the blob state.
        vs.log_and_apply(VersionEdit::default()).expect("roll");
        let (vs, recovered) = reopen(&fs);
        recovered.expect("recover");
        assert_eq!(blobs(&vs.current()), expected, "from the snapshot");
    }

    #[test]
    fn expiry_metadata_survives_recovery_and_manifest_snapshots() {
        let fs = MemFs::new();
        let mut vs = fresh(&fs);
        let n = vs.new_file_number();
        let mut f = meta(n, "a", "b", 100);
        f.max_expiry_micros = 5_000;
        f.has_permanent_entries = false;
        let mut e = VersionEdit::default();
        e.add_file(3, f.clone());
        vs.log_and_apply(e).expect("apply");
        assert_eq!(vs.next_file_expiry(), Some(5_000));
        assert!(!vs.needs_compaction(4_999));
        assert!(vs.needs_compaction(5_000));

        // Replayed from the edit appended to the manifest...
        let (mut vs2, r) = reopen(&fs);
        r.expect("recover");
        assert_eq!(*vs2.current().files(3)[0], f);
        // ...and from the snapshot that starts the next manifest.
        let m = vs2.new_file_number();
        vs2.log_and_apply(VersionEdit::default())
            .expect("new manifest");
        assert!(vs2.manifest_number() >= m);
        let (vs3, r) = reopen(&fs);
        r.expect("recover");
        assert_eq!(*vs3.current().files(3)[0], f);
        assert_eq!(vs3.next_file_expiry(), Some(5_000));
    }

    #[test]
    fn posix_round_trip() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("db");
        let opts = options(Arc::new(crate::env::PosixFs::new()));
        let mut vs = VersionSet::new(dir.clone(), opts.clone());
        vs.create_new_db().expect("create");
        let a = flush_edit(&mut vs, 0, "a", "c");
        let b = flush_edit(&mut vs, 1, "d", "f");
        let mut vs2 = VersionSet::new(dir.clone(), opts);
        let r = vs2.recover().expect("recover");
        assert_eq!(layout(&vs2.current()), vec![(0, a), (1, b)]);
        assert_eq!(r.manifest_number, vs.manifest_number());
        let current =
            read_all(&crate::env::PosixFs::new(), &dir.join("CURRENT")).expect("read CURRENT");
        assert_eq!(
            current,
            format!("MANIFEST-{:06}\n", vs.manifest_number()).into_bytes()
        );
    }

    #[test]
    fn manifest_rolls_over_at_the_size_limit() {
        let fs = MemFs::new();
        let mut vs = fresh(&fs);
        vs.set_max_manifest_bytes(1);
        let mut numbers = Vec::new();
        let mut files = Vec::new();
        for i in 0..4 {
            let k = format!("k{i}");
            files.push(flush_edit(&mut vs, 3, &k, &k));
            numbers.push(vs.manifest_number());
        }
        numbers.dedup();
        assert_eq!(
            numbers.len(),
            4,
            "every edit started a new manifest: {numbers:?}"
        );
        let last = *numbers.last().expect("numbers");
        assert_eq!(current_names(&fs), format!("MANIFEST-{last:06}\n"));
        // Each new manifest holds the whole state in one snapshot record.
        let (vs2, r) = reopen(&fs);
        assert_eq!(r.expect("recover").manifest_number, last);
        assert_eq!(layout(&vs2.current()), layout(&vs.current()));
        assert_eq!(vs2.current().num_files(3), 4);
        // Manifest numbers come from the file-number counter, never reused.
        let live: BTreeSet<u64> = files.iter().copied().collect();
        assert!(numbers.iter().all(|n| !live.contains(n)));
    }

    #[test]
    fn compact_pointers_are_persisted() {
        let fs = MemFs::new();
        let mut vs = fresh(&fs);
        for (i, k) in ["a", "c", "e"].into_iter().enumerate() {
            let n = vs.new_file_number();
            let mut e = VersionEdit::default();
            e.add_file(1, meta(n, k, &format!("{k}z"), 5_000));
            vs.log_and_apply(e).expect("apply");
            assert_eq!(vs.current().num_files(1), i + 1);
        }
        let c = vs.pick_compaction(0).expect("level 1 is over its target");
        assert_eq!(c.inputs[0][0].smallest_user_key(), b"a");
        drop(c);
        // Any later edit carries the moved pointer to the manifest.
        flush_edit(&mut vs, 0, "q", "r");
        let (mut vs2, r) = reopen(&fs);
        r.expect("recover");
        let c = vs2.pick_compaction(0).expect("still over");
        assert_eq!(
            c.inputs[0][0].smallest_user_key(),
            b"c",
            "round-robin survived"
        );
    }

    #[test]
    fn torn_tail_recovers_the_prefix() {
        let fs = MemFs::new();
        let mut vs = fresh(&fs);
        let mut expected = Vec::new();
        for i in 0..5 {
            let k = format!("k{i}");
            flush_edit(&mut vs, 4, &k, &k);
            expected.push(layout(&vs.current()));
        }
        let path = manifest_file_name(&dir(), vs.manifest_number());
        let full = fs.contents(&path).expect("manifest");
        fs.set_contents(&path, full[..full.len() - 3].to_vec());
        // A torn tail is accepted only while every table the surviving version needs exists.
        for n in vs.current().all_file_numbers() {
            fs.set_contents(&crate::filename::table_file_name(&dir(), n), Vec::new());
        }
        let (mut vs2, r) = reopen(&fs);
        r.expect("a torn tail is not an error");
        assert_eq!(
            layout(&vs2.current()),
            expected[3],
            "the last edit is dropped"
        );
        // The next edit starts a fresh manifest, so nothing is appended after the torn bytes.
        let old_manifest = vs2.manifest_number();
        flush_edit(&mut vs2, 5, "zz", "zz");
        assert_ne!(vs2.manifest_number(), old_manifest);
        let (vs3, r) = reopen(&fs);
        r.expect("recover again");
        assert_eq!(layout(&vs3.current()), layout(&vs2.current()));
    }

    #[test]
    fn torn_tail_whose_files_are_gone_is_corruption() {
        let fs = MemFs::new();
        let mut vs = fresh(&fs);
        for i in 0..3 {
            let k = format!("k{i}");
            flush_edit(&mut vs, 4, &k, &k);
        }
        let path = manifest_file_name(&dir(), vs.manifest_number());
        let full = fs.contents(&path).expect("manifest");
        fs.set_contents(&path, full[..full.len() - 3].to_vec());
        // No table file exists: the dropped edit must have been acted on.
        match reopen(&fs).1 {
            Err(Error::Corruption { path: p, .. }) => assert_eq!(p, path),
            other => panic!("expected corruption naming the manifest, got {other:?}"),
        }
    }

    #[test]
    fn damage_in_the_middle_is_corruption_naming_the_manifest() {
        let fs = MemFs::new();
        let mut vs = fresh(&fs);
        // Big keys make the manifest span several log blocks.
        let big = "k".repeat(2000);
        for i in 0..40 {
            let lo = format!("{big}{i:03}a");
            let hi = format!("{big}{i:03}b");
            flush_edit(&mut vs, 6, &lo, &hi);
        }
        let path = manifest_file_name(&dir(), vs.manifest_number());
        let mut data = fs.contents(&path).expect("manifest");
        assert!(data.len() > 2 * BLOCK_SIZE);
        data[BLOCK_SIZE / 2] ^= 0x40;
        fs.set_contents(&path, data);
        let (_, r) = reopen(&fs);
        match r {
            Err(Error::Corruption { path: p, .. }) => assert_eq!(p, path),
            other => panic!("expected corruption, got {other:?}"),
        }
    }

    fn write_manifest(fs: &MemFs, number: u64, records: &[Vec<u8>]) -> PathBuf {
        fs.create_dir_all(&dir()).expect("mkdir");
        let path = manifest_file_name(&dir(), number);
        let file = fs.create(&path).expect("create");
        let mut w = LogWriter::new(file, path.clone(), LogKind::Manifest, number).expect("writer");
        for r in records {
            w.add_record(r).expect("add");
        }
        w.sync().expect("sync");
        set_current_file(fs, &dir(), number).expect("CURRENT");
        path
    }

    fn base_edit() -> VersionEdit {
        VersionEdit {
            comparator: Some("shale.BytewiseComparator".into()),
            log_number: Some(0),
            next_file_number: Some(10),
            last_sequence: Some(0),
            ..VersionEdit::default()
        }
    }

    fn expect_corruption(fs: &MemFs, path: &Path, needle: &str) {
        match reopen(fs).1 {
            Err(Error::Corruption {
                path: p, message, ..
            }) => {
                assert_eq!(p, path);
                assert!(message.contains(needle), "{message:?} lacks {needle:?}");
            }
            other => panic!("expected corruption with {needle:?}, got {other:?}"),
        }
    }

    #[test]
    fn bad_records_and_missing_fields_are_corruption() {
        let fs = MemFs::new();
        let path = write_manifest(&fs, 3, &[base_edit().encode(), vec![99, 1]]);
        expect_corruption(&fs, &path, "unknown field tag 99");

        let fs = MemFs::new();
        let mut no_next = base_edit();
        no_next.next_file_number = None;
        let path = write_manifest(&fs, 3, &[no_next.encode()]);
        expect_corruption(&fs, &path, "next file number");

        let fs = MemFs::new();
        let path = write_manifest(&fs, 3, &[]);
        expect_corruption(&fs, &path, "comparator");

        let fs = MemFs::new();
        let mut del = VersionEdit::default();
        del.delete_file(1, 5);
        let path = write_manifest(&fs, 3, &[base_edit().encode(), del.encode()]);
        expect_corruption(&fs, &path, "deletes file 5");

        let fs = MemFs::new();
        let mut overlap = base_edit();
        overlap.add_file(1, meta(4, "a", "m", 1));
        overlap.add_file(1, meta(5, "k", "z", 1));
        let path = write_manifest(&fs, 3, &[overlap.encode()]);
        expect_corruption(&fs, &path, "overlap");

        // Counters beyond what shale produces (later arithmetic would overflow on them).
        let fs = MemFs::new();
        let mut late = base_edit();
        late.last_sequence = Some(crate::key::MAX_SEQUENCE + 1);
        let path = write_manifest(&fs, 3, &[late.encode()]);
        expect_corruption(&fs, &path, "last sequence");
        for huge in [u64::MAX, MAX_FILE_NUMBER + 1] {
            let fs = MemFs::new();
            let mut next = base_edit();
            next.next_file_number = Some(huge);
            let path = write_manifest(&fs, 3, &[next.encode()]);
            expect_corruption(&fs, &path, "above the largest");
            let fs = MemFs::new();
            let mut table = base_edit();
            let mut f = meta(4, "a", "m", 1);
            f.number = huge;
            table.add_file(1, f);
            let path = write_manifest(&fs, 3, &[table.encode()]);
            expect_corruption(&fs, &path, "above the largest");
        }

        // CURRENT naming something else, or a manifest that is not there.
        let fs = MemFs::new();
        fs.create_dir_all(&dir()).expect("mkdir");
        write_file_atomic(&fs, &dir(), "CURRENT", b"000005.log\n").expect("write");
        expect_corruption(&fs, &dir().join("CURRENT"), "expected a manifest name");
        write_file_atomic(&fs, &dir(), "CURRENT", b"MANIFEST-000009\n").expect("write");
        expect_corruption(&fs, &dir().join("CURRENT"), "does not exist");
        write_file_atomic(&fs, &dir(), "CURRENT", &[b'M'; 1 << 20]).expect("write");
        expect_corruption(&fs, &dir().join("CURRENT"), "expected a manifest name");
    }

    #[test]
    fn recovery_marks_numbers_used() {
        let fs = MemFs::new();
        let mut e = base_edit();
        e.next_file_number = Some(4);
        e.log_number = Some(7);
        e.add_file(2, meta(12, "a", "b", 1));
        write_manifest(&fs, 9, &[e.encode()]);
        let (mut vs, r) = reopen(&fs);
        let r = r.expect("recover");
        assert_eq!(
            r.next_file_number, 13,
            "above the table, the log and the manifest"
        );
        assert_eq!(vs.new_file_number(), 13);
    }

    struct OtherComparator;
    impl crate::Comparator for OtherComparator {
        fn name(&self) -> &str {
            "test.Reverse"
        }
        fn compare(&self, a: &[u8], b: &[u8]) -> std::cmp::Ordering {
            b.cmp(a)
        }
    }

    #[test]
    fn comparator_mismatch_is_refused() {
        let fs = MemFs::new();
        fresh(&fs);
        let opts = Options {
            comparator: Arc::new(OtherComparator),
            ..options(Arc::new(fs.clone()))
        };
        let mut vs = VersionSet::new(dir(), opts);
        match vs.recover() {
            Err(Error::InvalidArgument(m)) => {
                assert!(m.contains("MANIFEST-000001"), "{m}");
                assert!(m.contains("shale.BytewiseComparator") && m.contains("test.Reverse"));
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn live_files_include_versions_still_held() {
        let fs = MemFs::new();
        let mut vs = fresh(&fs);
        let a = flush_edit(&mut vs, 0, "a", "b");
        let held = vs.current();
        let mut e = VersionEdit::default();
        e.delete_file(0, a);
        let b = vs.new_file_number();
        e.add_file(1, meta(b, "a", "b", 100));
        vs.log_and_apply(e).expect("apply");
        assert_eq!(vs.live_files(), [a, b].into_iter().collect());
        drop(held);
        assert_eq!(vs.live_files(), [b].into_iter().collect());
    }

    #[test]
    fn invalid_edits_are_refused_without_poisoning() {
        let fs = MemFs::new();
        let mut vs = fresh(&fs);
        let mut e = VersionEdit::default();
        e.delete_file(3, 77);
        assert!(matches!(
            vs.log_and_apply(e),
            Err(Error::InvalidArgument(_))
        ));
        let e = VersionEdit {
            log_number: Some(1_000),
            ..VersionEdit::default()
        };
        assert!(matches!(
            vs.log_and_apply(e),
            Err(Error::InvalidArgument(_))
        ));
        flush_edit(&mut vs, 0, "a", "b");
        assert_eq!(vs.current().num_files(0), 1);
    }

    /// Wraps a [`MemFs`]; while `fail` is set, every sync fails.
    struct FailingFs {
        inner: MemFs,
        fail: Arc<AtomicBool>,
    }

    struct FailingFile {
        inner: Box<dyn WritableFile>,
        fail: Arc<AtomicBool>,
    }

    impl WritableFile for FailingFile {
        fn append(&mut self, data: &[u8]) -> Result<()> {
            self.inner.append(data)
        }
        fn flush(&mut self) -> Result<()> {
            self.inner.flush()
        }
        fn sync(&mut self) -> Result<()> {
            if self.fail.load(Ordering::SeqCst) {
                return Err(Error::io(
                    "sync",
                    "/db/x",
                    std::io::Error::other("injected"),
                ));
            }
            self.inner.sync()
        }
        fn close(&mut self) -> Result<()> {
            self.inner.close()
        }
        fn len(&self) -> u64 {
            self.inner.len()
        }
    }

    impl Fs for FailingFs {
        fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
            Ok(Box::new(FailingFile {
                inner: self.inner.create(path)?,
                fail: self.fail.clone(),
            }))
        }
        fn open_random(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
            self.inner.open_random(path)
        }
        fn open_sequential(&self, path: &Path) -> Result<Box<dyn SequentialFile>> {
            self.inner.open_sequential(path)
        }
        fn exists(&self, path: &Path) -> bool {
            self.inner.exists(path)
        }
        fn list(&self, dir: &Path) -> Result<Vec<String>> {
            self.inner.list(dir)
        }
        fn file_size(&self, path: &Path) -> Result<u64> {
            self.inner.file_size(path)
        }
        fn remove(&self, path: &Path) -> Result<()> {
            self.inner.remove(path)
        }
        fn rename(&self, from: &Path, to: &Path) -> Result<()> {
            self.inner.rename(from, to)
        }
        fn link(&self, from: &Path, to: &Path) -> Result<()> {
            self.inner.link(from, to)
        }
        fn create_dir_all(&self, dir: &Path) -> Result<()> {
            self.inner.create_dir_all(dir)
        }
        fn remove_dir(&self, dir: &Path) -> Result<()> {
            self.inner.remove_dir(dir)
        }
        fn sync_dir(&self, dir: &Path) -> Result<()> {
            if self.fail.load(Ordering::SeqCst) {
                return Err(Error::io(
                    "sync dir",
                    dir,
                    std::io::Error::other("injected"),
                ));
            }
            self.inner.sync_dir(dir)
        }
        fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
            self.inner.lock(path)
        }
    }

    fn failing_set() -> (MemFs, Arc<AtomicBool>, VersionSet) {
        let mem = MemFs::new();
        let fail = Arc::new(AtomicBool::new(false));
        let fs = FailingFs {
            inner: mem.clone(),
            fail: fail.clone(),
        };
        let mut vs = VersionSet::new(dir(), options(Arc::new(fs)));
        vs.create_new_db().expect("create");
        (mem, fail, vs)
    }

    #[test]
    fn sync_failure_is_sticky_and_installs_nothing() {
        // Failing while appending to an open manifest.
        let (mem, fail, mut vs) = failing_set();
        flush_edit(&mut vs, 0, "a", "b");
        let before = layout(&vs.current());
        fail.store(true, Ordering::SeqCst);
        let mut e = VersionEdit::default();
        e.add_file(0, meta(vs.new_file_number(), "c", "d", 1));
        assert!(matches!(vs.log_and_apply(e), Err(Error::Io { .. })));
        assert_eq!(layout(&vs.current()), before, "not installed");
        fail.store(false, Ordering::SeqCst);
        let mut e = VersionEdit::default();
        e.add_file(0, meta(vs.new_file_number(), "e", "f", 1));
        assert!(matches!(vs.log_and_apply(e), Err(Error::Poisoned(_))));
        // What is on disk still recovers to a consistent state.
        let (vs2, r) = reopen(&mem);
        r.expect("recover");
        assert!(vs2.current().num_files(0) >= 1);

        // Failing while starting a new manifest: CURRENT keeps naming the old one.
        let (mem, fail, mut vs) = failing_set();
        fail.store(true, Ordering::SeqCst);
        let mut e = VersionEdit::default();
        e.add_file(0, meta(vs.new_file_number(), "c", "d", 1));
        assert!(vs.log_and_apply(e).is_err());
        assert_eq!(vs.current().num_files(0), 0);
        assert_eq!(current_names(&mem), "MANIFEST-000001\n");
        let manifests: Vec<String> = mem
            .list(&dir())
            .expect("list")
            .into_iter()
            .filter(|n| n.starts_with("MANIFEST-"))
            .collect();
        assert_eq!(
            manifests,
            vec!["MANIFEST-000001".to_string()],
            "the new one is removed"
        );
        fail.store(false, Ordering::SeqCst);
        assert!(matches!(
            vs.log_and_apply(VersionEdit::default()),
            Err(Error::Poisoned(_))
        ));
    }

    #[test]
    fn scores_and_picking_through_the_set() {
        let fs = MemFs::new();
        let mut vs = fresh(&fs);
        assert!(!vs.needs_compaction(0));
        assert!(vs.pick_compaction(0).is_none());
        for i in 0..4 {
            let k = format!("k{i}");
            flush_edit(&mut vs, 0, "a", &k);
        }
        assert_eq!(vs.level_scores()[0], 1.0);
        assert!(vs.needs_compaction(0));
        let c = vs.pick_compaction(0).expect("level 0 at its trigger");
        assert_eq!(c.level, 0);
        assert_eq!(c.inputs[0].len(), 4);
        assert_eq!(vs.max_bytes_for_level(2), 100_000);
        let m = vs.compact_range(0, Some(b"a"), Some(b"a")).expect("manual");
        assert_eq!(m.inputs[0].len(), 4);
        assert!(vs.compact_range(1, None, None).is_none());
    }
}
