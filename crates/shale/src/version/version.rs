//! A version: the immutable set of table files that make up the database at one point, per
//! level, with the queries reads, flushes and the compaction picker make against it.
//!
//! Invariants (checked whenever a version is built from an edit):
//! - Level 0 files may overlap each other; they are kept newest (highest file number) first,
//!   the order in which a read must consult them.
//! - In every deeper level files are sorted by smallest key and do not overlap: each file's
//!   largest internal key is below the next file's smallest internal key. Adjacent files may
//!   share a user key (a compaction output cut between two versions of one key); the newer
//!   versions are then in the earlier file.
//! - A file number appears at most once in a version.
//!
//! Thread-safety: a `Version` never changes once built; it is shared as `Arc<Version>` by
//! readers, iterators and compactions, and the files it names stay on disk while any of them
//! holds it (see [`crate::version::VersionSet::live_files`]).

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use super::edit::{FileMetaData, VersionEdit};
use crate::key::InternalKeyComparator;
use crate::limits::NUM_LEVELS;

/// The deepest level a flushed memtable may be placed in directly. Pushing a flush below level
/// 0 saves rewriting it when it overlaps nothing, but not too deep: a sparse deep level makes
/// later compactions of the levels above it expensive.
pub const MAX_MEMTABLE_OUTPUT_LEVEL: usize = 2;

/// Applies blob file additions (record bytes added to a file, creating its entry) and garbage
/// (bytes no table references any more) to `blobs`, additions first. A file whose garbage
/// reaches its total leaves the map: nothing references it. Garbage for a file not in the map is
/// ignored: it can only be an over-count for a file already gone, and refusing the edit would
/// refuse a database over an accounting slip.
pub(crate) fn apply_blob_changes(
    blobs: &mut BTreeMap<u64, BlobFileMeta>,
    added: &[(u64, u64)],
    garbage: &[(u64, u64)],
) {
    for &(number, bytes) in added {
        let m = blobs.entry(number).or_default();
        m.total_bytes = m.total_bytes.saturating_add(bytes);
    }
    for &(number, bytes) in garbage {
        if let Some(m) = blobs.get_mut(&number) {
            m.garbage_bytes = m.garbage_bytes.saturating_add(bytes);
            if m.garbage_bytes >= m.total_bytes {
                blobs.remove(&number);
            }
        }
    }
}

/// Sum of the sizes of `files`.
pub fn total_file_size(files: &[Arc<FileMetaData>]) -> u64 {
    files
        .iter()
        .fold(0u64, |sum, f| sum.saturating_add(f.file_size))
}

/// Bytes of grandparent (level + 2) data one compaction output file may overlap before it is
/// cut, and the limit used by trivial moves and flush placement: ten target file sizes, so a
/// later compaction of that output never has to rewrite much more than ten files below it.
pub fn max_grandparent_overlap_bytes(opts: &crate::Options) -> u64 {
    opts.max_file_size.saturating_mul(10)
}

/// What the manifest records about one blob file (`docs/format/blob.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BlobFileMeta {
    /// Record bytes written to the file that some table referenced when it was recorded.
    pub total_bytes: u64,
    /// Of those, the bytes no table references any more.
    pub garbage_bytes: u64,
}

impl BlobFileMeta {
    /// The share of the file no table references, from 0 to 1.
    pub fn garbage_ratio(&self) -> f64 {
        if self.total_bytes == 0 {
            1.0
        } else {
            self.garbage_bytes as f64 / self.total_bytes as f64
        }
    }
}

/// The table files of the database at one point in time, and the blob files their entries
/// reference.
pub struct Version {
    icmp: InternalKeyComparator,
    files: [Vec<Arc<FileMetaData>>; NUM_LEVELS],
    level_bytes: [u64; NUM_LEVELS],
    /// Blob files by number. A file leaves the map once all of its bytes are garbage.
    blob_files: Arc<BTreeMap<u64, BlobFileMeta>>,
}

impl fmt::Debug for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut list = f.debug_struct("Version");
        for (level, files) in self.files.iter().enumerate() {
            if !files.is_empty() {
                let numbers: Vec<u64> = files.iter().map(|f| f.number).collect();
                list.field(&format!("L{level}"), &numbers);
            }
        }
        list.finish()
    }
}

impl Version {
    /// A version without files.
    pub fn empty(icmp: InternalKeyComparator) -> Version {
        Version {
            icmp,
            files: Default::default(),
            level_bytes: [0; NUM_LEVELS],
            blob_files: Arc::default(),
        }
    }

    /// Builds a version from files per level, sorting each level into its read order and
    /// checking the invariants in the module docs. Meant for tools and tests; the engine builds
    /// versions by applying edits.
    pub fn from_levels(
        icmp: InternalKeyComparator,
        levels: [Vec<Arc<FileMetaData>>; NUM_LEVELS],
    ) -> Result<Version, String> {
        let mut v = Version {
            icmp,
            files: levels,
            level_bytes: [0; NUM_LEVELS],
            blob_files: Arc::default(),
        };
        v.finish((0..NUM_LEVELS).collect())?;
        Ok(v)
    }

    /// This version with `blob_files` as its blob files (recovery builds them separately).
    pub(crate) fn with_blob_files(mut self, blob_files: BTreeMap<u64, BlobFileMeta>) -> Version {
        self.blob_files = Arc::new(blob_files);
        self
    }

    /// The blob files the version's tables may reference, by number.
    pub fn blob_files(&self) -> &BTreeMap<u64, BlobFileMeta> {
        &self.blob_files
    }

    /// Blob files whose garbage ratio is at least `threshold`: compactions relocate the values
    /// they still hold.
    pub fn blob_files_due_for_collection(&self, threshold: f64) -> HashSet<u64> {
        self.blob_files
            .iter()
            .filter(|(_, m)| m.garbage_ratio() >= threshold)
            .map(|(n, _)| *n)
            .collect()
    }

    /// The version that results from applying `edit` to this one: deletions first, then
    /// additions. Fails, without side effects, if the edit deletes a file the level does not
    /// hold, adds a file number already present, or breaks the level invariants.
    pub(crate) fn apply(&self, edit: &VersionEdit) -> Result<Version, String> {
        let mut files = self.files.clone();
        let mut touched = Vec::new();
        let mut deleted: HashMap<usize, HashSet<u64>> = HashMap::new();
        for &(level, number) in &edit.deleted_files {
            deleted.entry(level).or_default().insert(number);
        }
        for (level, numbers) in deleted {
            let level_files = files
                .get_mut(level)
                .ok_or_else(|| format!("edit deletes from level {level}, which does not exist"))?;
            let before = level_files.len();
            level_files.retain(|f| !numbers.contains(&f.number));
            if before - level_files.len() != numbers.len() {
                let missing: Vec<u64> = numbers
                    .iter()
                    .filter(|n| !self.files[level].iter().any(|f| f.number == **n))
                    .copied()
                    .collect();
                return Err(format!(
                    "edit deletes files {missing:?} from level {level}, which does not hold them"
                ));
            }
            touched.push(level);
        }
        for (level, f) in &edit.new_files {
            files
                .get_mut(*level)
                .ok_or_else(|| format!("edit adds to level {level}, which does not exist"))?
                .push(Arc::new(f.clone()));
            touched.push(*level);
        }
        let blob_files = if edit.blob_files.is_empty() && edit.blob_garbage.is_empty() {
            Arc::clone(&self.blob_files)
        } else {
            let mut blobs = (*self.blob_files).clone();
            apply_blob_changes(&mut blobs, &edit.blob_files, &edit.blob_garbage);
            Arc::new(blobs)
        };
        let mut v = Version {
            icmp: self.icmp.clone(),
            files,
            level_bytes: self.level_bytes,
            blob_files,
        };
        touched.sort_unstable();
        touched.dedup();
        v.finish(touched)?;
        Ok(v)
    }

    /// Sorts the `touched` levels, recomputes their sizes and checks every invariant.
    fn finish(&mut self, touched: Vec<usize>) -> Result<(), String> {
        let icmp = self.icmp.clone();
        for &level in &touched {
            let files = &mut self.files[level];
            if level == 0 {
                files.sort_by_key(|f| std::cmp::Reverse(f.number));
            } else {
                files.sort_by(|a, b| {
                    icmp.compare(&a.smallest, &b.smallest)
                        .then(a.number.cmp(&b.number))
                });
            }
            for f in files.iter() {
                if icmp.compare(&f.smallest, &f.largest) == Ordering::Greater {
                    return Err(format!(
                        "file {} in level {level} has its smallest key above its largest",
                        f.number
                    ));
                }
            }
            if level > 0 {
                for pair in files.windows(2) {
                    if icmp.compare(&pair[0].largest, &pair[1].smallest) != Ordering::Less {
                        return Err(format!(
                            "files {} and {} overlap in level {level}",
                            pair[0].number, pair[1].number
                        ));
                    }
                }
            }
            self.level_bytes[level] = total_file_size(files);
        }
        let mut seen = HashSet::new();
        for number in self.all_file_numbers() {
            if !seen.insert(number) {
                return Err(format!("file {number} appears twice in the version"));
            }
        }
        Ok(())
    }

    /// The internal-key comparator the version orders its files by.
    pub fn comparator(&self) -> &InternalKeyComparator {
        &self.icmp
    }

    /// The files of `level` in read order (level 0: newest first; deeper: by key). Empty for a
    /// level beyond the last.
    pub fn files(&self, level: usize) -> &[Arc<FileMetaData>] {
        self.files.get(level).map(Vec::as_slice).unwrap_or(&[])
    }

    /// Number of files in `level`.
    pub fn num_files(&self, level: usize) -> usize {
        self.files(level).len()
    }

    /// The deepest level that holds at least one file, if any does.
    pub fn deepest_level_with_files(&self) -> Option<usize> {
        (0..NUM_LEVELS)
            .rev()
            .find(|&level| !self.files(level).is_empty())
    }

    /// Total bytes of the files in `level`.
    pub fn level_bytes(&self, level: usize) -> u64 {
        self.level_bytes.get(level).copied().unwrap_or(0)
    }

    /// A one-line summary of file counts per level, e.g. `files[ 3 1 0 0 0 0 0 ]`.
    pub fn level_summary(&self) -> String {
        let counts: Vec<String> = self.files.iter().map(|f| f.len().to_string()).collect();
        format!("files[ {} ]", counts.join(" "))
    }

    fn contains_user_key(&self, f: &FileMetaData, user_key: &[u8]) -> bool {
        self.icmp.compare_user(user_key, f.smallest_user_key()) != Ordering::Less
            && self.icmp.compare_user(user_key, f.largest_user_key()) != Ordering::Greater
    }

    /// Index of the first file in a sorted level whose largest user key is `>= user_key`.
    fn first_file_ending_at_or_after(&self, level: usize, user_key: &[u8]) -> usize {
        // `compare_user` inlines the bytewise comparison instead of a call through the trait
        // object: this search runs on every point lookup, per level.
        self.files(level).partition_point(|f| {
            self.icmp.compare_user(f.largest_user_key(), user_key) == Ordering::Less
        })
    }

    /// Files that may hold `user_key`, in the order a point lookup must search them (newest
    /// data first): the overlapping level-0 files newest first, then the file of each deeper
    /// level whose range covers the key (found by binary search). A deeper level yields more
    /// than one file only when a compaction cut the versions of this very key across adjacent
    /// files; the earlier file then holds the newer versions, so the order stays newest first.
    ///
    /// Lazy, so a lookup that stops early never binary-searches the deeper levels, and nothing
    /// is allocated.
    pub fn files_for_key<'a>(
        &'a self,
        user_key: &'a [u8],
    ) -> impl Iterator<Item = (usize, &'a Arc<FileMetaData>)> + 'a {
        let level0 = self
            .files(0)
            .iter()
            .filter(move |f| self.contains_user_key(f, user_key))
            .map(|f| (0, f));
        let deeper = (1..NUM_LEVELS).flat_map(move |level| {
            let start = self.first_file_ending_at_or_after(level, user_key);
            self.files(level)
                .get(start..)
                .unwrap_or(&[])
                .iter()
                .take_while(move |f| {
                    self.icmp.compare_user(f.smallest_user_key(), user_key) != Ordering::Greater
                })
                .map(move |f| (level, f))
        });
        level0.chain(deeper)
    }

    /// Files in `level` overlapping the user-key range `[begin, end]` (`None` = unbounded).
    /// For level 0 the range grows to take in every file that overlaps a file already taken,
    /// until it stops growing, so that the result leaves no older version of any of its keys
    /// behind. Level 0 results are newest first; deeper levels in key order.
    pub fn overlapping_files(
        &self,
        level: usize,
        begin: Option<&[u8]>,
        end: Option<&[u8]>,
    ) -> Vec<Arc<FileMetaData>> {
        let ucmp = self.icmp.user();
        let mut begin = begin.map(<[u8]>::to_vec);
        let mut end = end.map(<[u8]>::to_vec);
        if level == 0 {
            'restart: loop {
                let mut out = Vec::new();
                for f in self.files(0) {
                    let f_begin = f.smallest_user_key();
                    let f_end = f.largest_user_key();
                    let before = begin
                        .as_deref()
                        .is_some_and(|b| ucmp.compare(f_end, b) == Ordering::Less);
                    let after = end
                        .as_deref()
                        .is_some_and(|e| ucmp.compare(f_begin, e) == Ordering::Greater);
                    if before || after {
                        continue;
                    }
                    out.push(f.clone());
                    if let Some(b) = &begin {
                        if ucmp.compare(f_begin, b) == Ordering::Less {
                            begin = Some(f_begin.to_vec());
                            continue 'restart;
                        }
                    }
                    if let Some(e) = &end {
                        if ucmp.compare(f_end, e) == Ordering::Greater {
                            end = Some(f_end.to_vec());
                            continue 'restart;
                        }
                    }
                }
                return out;
            }
        }
        let start = match &begin {
            Some(b) => self.first_file_ending_at_or_after(level, b),
            None => 0,
        };
        self.files(level)
            .get(start..)
            .unwrap_or(&[])
            .iter()
            .take_while(|f| {
                end.as_deref()
                    .is_none_or(|e| ucmp.compare(f.smallest_user_key(), e) != Ordering::Greater)
            })
            .cloned()
            .collect()
    }

    /// True if some file in `level` overlaps the user-key range `[smallest_user, largest_user]`.
    pub fn overlaps(&self, level: usize, smallest_user: &[u8], largest_user: &[u8]) -> bool {
        let ucmp = self.icmp.user();
        let disjoint = |f: &FileMetaData| {
            ucmp.compare(f.largest_user_key(), smallest_user) == Ordering::Less
                || ucmp.compare(f.smallest_user_key(), largest_user) == Ordering::Greater
        };
        if level == 0 {
            return self.files(0).iter().any(|f| !disjoint(f));
        }
        let start = self.first_file_ending_at_or_after(level, smallest_user);
        self.files(level).get(start).is_some_and(|f| !disjoint(f))
    }

    /// The level a flushed memtable's table covering `[smallest_user, largest_user]` goes to:
    /// 0 if it overlaps level 0; otherwise pushed down, at most to
    /// [`MAX_MEMTABLE_OUTPUT_LEVEL`], while the next level holds nothing it overlaps and the
    /// level after that holds at most [`max_grandparent_overlap_bytes`] it overlaps.
    pub fn pick_level_for_memtable_output(
        &self,
        smallest_user: &[u8],
        largest_user: &[u8],
        opts: &crate::Options,
    ) -> usize {
        let mut level = 0;
        if self.overlaps(0, smallest_user, largest_user) {
            return level;
        }
        let limit = max_grandparent_overlap_bytes(opts);
        while level < MAX_MEMTABLE_OUTPUT_LEVEL {
            if self.overlaps(level + 1, smallest_user, largest_user) {
                break;
            }
            if level + 2 < NUM_LEVELS {
                let grandparents =
                    self.overlapping_files(level + 2, Some(smallest_user), Some(largest_user));
                if total_file_size(&grandparents) > limit {
                    break;
                }
            }
            level += 1;
        }
        level
    }

    /// Numbers of every table file in the version.
    pub fn all_file_numbers(&self) -> impl Iterator<Item = u64> + '_ {
        self.files.iter().flatten().map(|f| f.number)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::key::{make_internal_key, ValueKind};
    use crate::BytewiseComparator;

    pub(crate) fn icmp() -> InternalKeyComparator {
        InternalKeyComparator::new(Arc::new(BytewiseComparator))
    }

    /// A file covering user keys `[smallest, largest]` with the given sequence numbers.
    pub(crate) fn file_seq(
        number: u64,
        smallest: &str,
        smallest_seq: u64,
        largest: &str,
        largest_seq: u64,
        size: u64,
    ) -> Arc<FileMetaData> {
        Arc::new(FileMetaData {
            number,
            file_size: size,
            smallest: make_internal_key(smallest.as_bytes(), smallest_seq, ValueKind::Value),
            largest: make_internal_key(largest.as_bytes(), largest_seq, ValueKind::Value),
            smallest_seqno: smallest_seq.min(largest_seq),
            largest_seqno: smallest_seq.max(largest_seq),
            num_entries: 10,
            num_deletions: 0,
            max_expiry_micros: 0,
            has_permanent_entries: true,
            oldest_blob_file: 0,
        })
    }

    /// A file covering user keys `[smallest, largest]`, sized `size` bytes.
    pub(crate) fn file(number: u64, smallest: &str, largest: &str, size: u64) -> Arc<FileMetaData> {
        file_seq(number, smallest, 100, largest, 100, size)
    }

    pub(crate) fn version(levels: Vec<(usize, Arc<FileMetaData>)>) -> Version {
        let mut files: [Vec<Arc<FileMetaData>>; NUM_LEVELS] = Default::default();
        for (level, f) in levels {
            files[level].push(f);
        }
        Version::from_levels(icmp(), files).expect("valid version")
    }

    fn numbers(files: &[Arc<FileMetaData>]) -> Vec<u64> {
        files.iter().map(|f| f.number).collect()
    }

    #[test]
    fn levels_are_ordered_and_sized() {
        let v = version(vec![
            (0, file(3, "a", "m", 10)),
            (0, file(7, "c", "d", 20)),
            (0, file(5, "x", "z", 30)),
            (1, file(9, "p", "q", 40)),
            (1, file(8, "a", "b", 50)),
        ]);
        assert_eq!(numbers(v.files(0)), vec![7, 5, 3], "level 0 newest first");
        assert_eq!(numbers(v.files(1)), vec![8, 9], "level 1 by key");
        assert_eq!(v.level_bytes(0), 60);
        assert_eq!(v.level_bytes(1), 90);
        assert_eq!(v.num_files(2), 0);
        assert_eq!(
            v.num_files(NUM_LEVELS + 3),
            0,
            "levels past the last are empty"
        );
        let mut all: Vec<u64> = v.all_file_numbers().collect();
        all.sort_unstable();
        assert_eq!(all, vec![3, 5, 7, 8, 9]);
        assert_eq!(v.level_summary(), "files[ 3 2 0 0 0 0 0 ]");
    }

    #[test]
    fn invariants_are_enforced() {
        let mut files: [Vec<Arc<FileMetaData>>; NUM_LEVELS] = Default::default();
        files[1] = vec![file(1, "a", "f", 1), file(2, "e", "k", 1)];
        let err = Version::from_levels(icmp(), files).expect_err("overlap in level 1");
        assert!(err.contains("overlap"), "{err}");

        let mut files: [Vec<Arc<FileMetaData>>; NUM_LEVELS] = Default::default();
        files[0] = vec![file(1, "a", "f", 1)];
        files[3] = vec![file(1, "x", "y", 1)];
        assert!(
            Version::from_levels(icmp(), files).is_err(),
            "duplicate number"
        );

        let mut files: [Vec<Arc<FileMetaData>>; NUM_LEVELS] = Default::default();
        files[2] = vec![file(1, "z", "a", 1)];
        assert!(
            Version::from_levels(icmp(), files).is_err(),
            "inverted range"
        );

        // Two files in one level may share a user key when the newer versions come first.
        let mut files: [Vec<Arc<FileMetaData>>; NUM_LEVELS] = Default::default();
        files[1] = vec![
            file_seq(1, "a", 9, "k", 7, 1),
            file_seq(2, "k", 6, "p", 5, 1),
        ];
        Version::from_levels(icmp(), files).expect("shared boundary user key");
    }

    #[test]
    fn apply_deletes_then_adds() {
        let v = version(vec![(0, file(1, "a", "c", 1)), (1, file(2, "a", "z", 1))]);
        let mut edit = VersionEdit::default();
        edit.delete_file(0, 1);
        edit.delete_file(1, 2);
        edit.add_file(1, (*file(3, "a", "m", 5)).clone());
        edit.add_file(1, (*file(4, "n", "z", 6)).clone());
        let w = v.apply(&edit).expect("apply");
        assert_eq!(w.num_files(0), 0);
        assert_eq!(numbers(w.files(1)), vec![3, 4]);
        assert_eq!(w.level_bytes(1), 11);
        assert_eq!(w.level_bytes(0), 0);
        // The original is untouched.
        assert_eq!(numbers(v.files(1)), vec![2]);

        let mut bad = VersionEdit::default();
        bad.delete_file(2, 2);
        let err = v.apply(&bad).expect_err("file 2 is not in level 2");
        assert!(err.contains("[2]") && err.contains("level 2"), "{err}");
        let mut dup = VersionEdit::default();
        dup.add_file(3, (*file(2, "a", "b", 1)).clone());
        assert!(v.apply(&dup).is_err(), "number already present");
        let mut overlap = VersionEdit::default();
        overlap.add_file(1, (*file(9, "b", "c", 1)).clone());
        assert!(v.apply(&overlap).is_err(), "overlap in level 1");
        // A trivial move: delete and add the same file in one edit.
        let mut mv = VersionEdit::default();
        mv.delete_file(1, 2);
        mv.add_file(2, (*file(2, "a", "z", 1)).clone());
        let w = v.apply(&mv).expect("move");
        assert_eq!(numbers(w.files(2)), vec![2]);
    }

    #[test]
    fn files_for_key_orders_newest_first() {
        let v = version(vec![
            (0, file(10, "a", "k", 1)),
            (0, file(12, "f", "z", 1)),
            (0, file(11, "m", "p", 1)),
            (1, file(5, "a", "e", 1)),
            (1, file(6, "g", "j", 1)),
            (2, file(3, "a", "z", 1)),
            // A key split across two files of level 3: "k" versions 9..8 then 7..6.
            (3, file_seq(7, "c", 9, "k", 8, 1)),
            (3, file_seq(8, "k", 7, "n", 6, 1)),
        ]);
        let got = |key: &str| -> Vec<(usize, u64)> {
            v.files_for_key(key.as_bytes())
                .map(|(l, f)| (l, f.number))
                .collect()
        };
        assert_eq!(got("h"), vec![(0, 12), (0, 10), (1, 6), (2, 3), (3, 7)]);
        assert_eq!(
            got("f"),
            vec![(0, 12), (0, 10), (2, 3), (3, 7)],
            "gap in level 1"
        );
        assert_eq!(got("k"), vec![(0, 12), (0, 10), (2, 3), (3, 7), (3, 8)]);
        assert_eq!(got("n"), vec![(0, 12), (0, 11), (2, 3), (3, 8)]);
        assert_eq!(got("o"), vec![(0, 12), (0, 11), (2, 3)]);
        assert_eq!(got("zz"), Vec::<(usize, u64)>::new());
        assert_eq!(got(""), Vec::<(usize, u64)>::new());
    }

    #[test]
    fn overlapping_files_grows_level_zero_transitively() {
        let v = version(vec![
            (0, file(1, "a", "c", 1)),
            (0, file(2, "b", "f", 1)),
            (0, file(3, "e", "h", 1)),
            (0, file(4, "x", "y", 1)),
            (1, file(5, "a", "b", 1)),
            (1, file(6, "d", "f", 1)),
            (1, file(7, "m", "o", 1)),
        ]);
        let l0 = |b: &str, e: &str| {
            numbers(&v.overlapping_files(0, Some(b.as_bytes()), Some(e.as_bytes())))
        };
        // [g, g] touches file 3, whose range reaches e, which touches 2, which reaches b and 1.
        assert_eq!(l0("g", "g"), vec![3, 2, 1]);
        assert_eq!(l0("a", "a"), vec![3, 2, 1], "a reaches c, then f, then h");
        assert_eq!(l0("i", "w"), Vec::<u64>::new());
        assert_eq!(l0("y", "zz"), vec![4]);
        assert_eq!(
            numbers(&v.overlapping_files(0, None, None)),
            vec![4, 3, 2, 1]
        );
        let l1 = |b: Option<&str>, e: Option<&str>| {
            numbers(&v.overlapping_files(1, b.map(str::as_bytes), e.map(str::as_bytes)))
        };
        assert_eq!(l1(Some("b"), Some("d")), vec![5, 6]);
        assert_eq!(l1(Some("c"), Some("c")), Vec::<u64>::new());
        assert_eq!(l1(None, Some("e")), vec![5, 6]);
        assert_eq!(l1(Some("e"), None), vec![6, 7]);
        assert_eq!(l1(Some("o"), Some("o")), vec![7]);
        assert!(v.overlaps(1, b"f", b"g"));
        assert!(!v.overlaps(1, b"g", b"l"));
        assert!(!v.overlaps(1, b"p", b"z"));
        assert!(!v.overlaps(0, b"z", b"zz"));
        assert!(v.overlaps(0, b"g", b"g"));
    }

    #[test]
    fn memtable_output_level() {
        let opts = crate::Options {
            max_file_size: 1000,
            ..crate::Options::default()
        };
        let v = version(vec![
            (0, file(1, "a", "c", 1)),
            (1, file(2, "e", "g", 1)),
            (2, file(3, "m", "n", 1)),
            (3, file(4, "s", "t", 20_000)),
        ]);
        let pick =
            |a: &str, b: &str| v.pick_level_for_memtable_output(a.as_bytes(), b.as_bytes(), &opts);
        assert_eq!(pick("b", "d"), 0, "overlaps level 0");
        assert_eq!(pick("d", "f"), 0, "overlaps level 1");
        assert_eq!(pick("h", "m"), 1, "overlaps level 2");
        assert_eq!(pick("u", "w"), 2, "free all the way, capped at level 2");
        assert_eq!(pick("o", "t"), 1, "too many grandparent bytes in level 3");
        let empty = Version::empty(icmp());
        assert_eq!(empty.pick_level_for_memtable_output(b"a", b"z", &opts), 2);
    }
}
