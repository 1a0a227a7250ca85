//! The compaction picker: given a [`Version`] and the level sizing options, decides which level
//! needs compaction and which files of it and of the next level to merge. Pure: no I/O, no
//! clock, no locks; the same inputs always give the same [`Compaction`].
//!
//! Rules (LevelDB's, with its "boundary inputs" fix):
//! - Score: level 0 is `files / level0_file_num_compaction_trigger`; level L >= 1 is
//!   `bytes / max_bytes_for_level(L)`. The last level scores 0: it has nowhere to go. The
//!   highest score >= 1 compacts (ties go to the shallower level).
//! - The first input is the first file of the level whose largest key is past the level's
//!   compact pointer (wrapping around), so a level is compacted round-robin across its key
//!   space. Level-0 inputs grow to every level-0 file overlapping them, transitively: a
//!   level-0 file left behind must never hold an older version of a key than one pushed down.
//! - Boundary inputs: if the next file of a level starts with the same user key the inputs end
//!   with (older versions of that key), it joins too, repeatedly. Otherwise the newer versions
//!   would move one level down while older ones stayed above them, and reads would find the
//!   older one first.
//! - Level+1 inputs are the files overlapping the level inputs' user-key range (plus their own
//!   boundary files). The level inputs then grow to everything the combined range covers if
//!   that does not add level+1 files and keeps the total under
//!   [`max_expanded_compaction_bytes`].
//! - Grandparents (level+2 files overlapping the whole range) let the job cut output files so
//!   none overlaps more than ten target file sizes of level+2.
//! - Expiry: when no level is due by size, a file whose entries have all expired at `now`
//!   ([`FileMetaData::fully_expired_at`]) is compacted on its own account, so its space comes
//!   back without waiting for other work to reach it. The shallowest such file goes first. In
//!   level 0 it compacts into level 1 like a size pick (with every level-0 file it overlaps).
//!   Deeper, if no deeper level overlaps its key range (always so in the last level), it is
//!   compacted *into its own level*: nothing can hide below it, so every expired entry is
//!   dropped and the file disappears. Otherwise it compacts into the next level as usual. An
//!   expiry compaction is never a trivial move. The caller passes `now`, which keeps the picker
//!   pure.
//! - Blob garbage collection: when nothing above is due, a table whose oldest referenced blob
//!   file ([`FileMetaData::oldest_blob_file`]) has reached `blob_garbage_collection_threshold`
//!   is compacted the same way as an expired file (shallowest first, never a trivial move); the
//!   job relocates the values it still references out of every such blob file, so the output no
//!   longer names it and the pick does not repeat.
//!
//! Thread-safety: [`Compaction`] is owned by the job that runs it.

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

use crate::key::{user_key, InternalKeyComparator};
use crate::limits::NUM_LEVELS;
use crate::version::version::max_grandparent_overlap_bytes;
use crate::version::{total_file_size, FileMetaData, Version, VersionEdit};
use crate::Options;

/// Target total bytes of `level`: `max_bytes_for_level_base` for levels 0 and 1 (level 0 is
/// actually scored by file count), times `max_bytes_for_level_multiplier` for each level below
/// 1. Saturates at `u64::MAX`.
pub fn max_bytes_for_level(opts: &Options, level: usize) -> u64 {
    let mut bytes = opts.max_bytes_for_level_base as f64;
    for _ in 1..level.max(1) {
        bytes *= opts.max_bytes_for_level_multiplier;
    }
    // `as` saturates for floats too large for u64, which is the behaviour wanted here.
    bytes as u64
}

/// The most bytes a compaction may read after growing its level inputs: 25 target file sizes,
/// so one compaction stays a bounded amount of work.
pub fn max_expanded_compaction_bytes(opts: &Options) -> u64 {
    opts.max_file_size.saturating_mul(25)
}

/// Compaction score of every level (index = level); `>= 1.0` means the level needs compaction.
/// Level 0 counts files against `level0_file_num_compaction_trigger`; deeper levels compare
/// bytes with [`max_bytes_for_level`]; the last level always scores 0.
pub fn level_scores(version: &Version, opts: &Options) -> Vec<f64> {
    (0..NUM_LEVELS)
        .map(|level| {
            if level + 1 == NUM_LEVELS {
                0.0
            } else if level == 0 {
                version.num_files(0) as f64 / opts.level0_file_num_compaction_trigger.max(1) as f64
            } else {
                version.level_bytes(level) as f64 / max_bytes_for_level(opts, level).max(1) as f64
            }
        })
        .collect()
}

/// The shallowest file whose entries have all expired at `now_micros`, with its level; in a
/// level, the first in read order.
pub fn first_expired_file(
    version: &Version,
    now_micros: u64,
) -> Option<(usize, Arc<FileMetaData>)> {
    (0..NUM_LEVELS).find_map(|level| {
        version
            .files(level)
            .iter()
            .find(|f| f.fully_expired_at(now_micros))
            .map(|f| (level, Arc::clone(f)))
    })
}

/// The shallowest table whose oldest referenced blob file is due for garbage collection (its
/// garbage ratio reached `blob_garbage_collection_threshold`), with its level. Compacting it
/// relocates its live values out of that file, so cold tables never pin garbage for ever.
pub fn first_blob_collection_file(
    version: &Version,
    opts: &Options,
) -> Option<(usize, Arc<FileMetaData>)> {
    let due = version.blob_files_due_for_collection(opts.blob_garbage_collection_threshold);
    if due.is_empty() {
        return None;
    }
    (0..NUM_LEVELS).find_map(|level| {
        version
            .files(level)
            .iter()
            .find(|f| f.oldest_blob_file != 0 && due.contains(&f.oldest_blob_file))
            .map(|f| (level, Arc::clone(f)))
    })
}

/// True if [`pick_compaction`] would return a compaction at `now_micros`: some level scores 1
/// or more, some file's entries have all expired, or some table pins a blob file due for
/// garbage collection.
pub fn needs_compaction(version: &Version, opts: &Options, now_micros: u64) -> bool {
    level_scores(version, opts).iter().any(|&s| s >= 1.0)
        || first_expired_file(version, now_micros).is_some()
        || first_blob_collection_file(version, opts).is_some()
}

/// The earliest time (microseconds since the Unix epoch) at which a file of `version` will have
/// all of its entries expired, if any file consists only of expiring entries. The database
/// wakes its background threads then, since no write may come to trigger the compaction.
pub fn next_file_expiry(version: &Version) -> Option<u64> {
    (0..NUM_LEVELS)
        .flat_map(|level| version.files(level).iter())
        .filter(|f| f.num_entries > 0 && !f.has_permanent_entries)
        .map(|f| f.max_expiry_micros)
        .min()
}

/// Picks the compaction the version most needs: the level with the highest size score if it is
/// at least 1, else a file whose entries have all expired at `now_micros` (see the module
/// docs), else `None`. A size pick advances `compact_pointers[level]` (an internal key, empty =
/// start of the level) past the chosen inputs; an expiry pick leaves the pointers alone.
pub fn pick_compaction(
    version: &Arc<Version>,
    opts: &Options,
    compact_pointers: &mut [Vec<u8>; NUM_LEVELS],
    now_micros: u64,
) -> Option<Compaction> {
    pick_size_compaction(version, opts, compact_pointers)
        .or_else(|| pick_expiry_compaction(version, opts, now_micros))
        .or_else(|| {
            let (level, file) = first_blob_collection_file(version, opts)?;
            pick_file_compaction(version, opts, level, file, CompactionReason::BlobCollection)
        })
}

/// The expiry compaction for the first file whose entries have all expired at `now_micros`.
fn pick_expiry_compaction(
    version: &Arc<Version>,
    opts: &Options,
    now_micros: u64,
) -> Option<Compaction> {
    let (level, file) = first_expired_file(version, now_micros)?;
    pick_file_compaction(version, opts, level, file, CompactionReason::Expired)
}

/// A compaction picked for one file's own sake (expiry, blob garbage collection): the file with
/// what must join it, into the next level, or into its own level when nothing below overlaps.
fn pick_file_compaction(
    version: &Arc<Version>,
    opts: &Options,
    level: usize,
    file: Arc<FileMetaData>,
    reason: CompactionReason,
) -> Option<Compaction> {
    // Expiry picks are not part of the round-robin: their pointer updates go nowhere.
    let mut scratch: [Vec<u8>; NUM_LEVELS] = Default::default();
    let mut c = if level == 0 {
        let inputs = version.overlapping_files(
            0,
            Some(file.smallest_user_key()),
            Some(file.largest_user_key()),
        );
        setup_other_inputs(version, opts, &mut scratch, 0, inputs)
    } else {
        let icmp = version.comparator();
        let mut inputs = vec![file];
        // Older versions of the last user key may continue in the next file of the level; they
        // must be compacted together, or dropping the newer ones would uncover them.
        add_boundary_inputs(icmp, version.files(level), &mut inputs);
        let (lo, hi) = key_range(icmp, &inputs)?;
        let (lo, hi) = (user_key(&lo), user_key(&hi));
        let overlapped_below = (level + 1..NUM_LEVELS).any(|l| version.overlaps(l, lo, hi));
        if overlapped_below {
            setup_other_inputs(version, opts, &mut scratch, level, inputs)
        } else {
            Compaction::new(
                version,
                opts,
                level,
                level,
                [inputs, Vec::new()],
                Vec::new(),
            )
        }
    };
    c.reason = reason;
    Some(c)
}

/// Picks the size compaction the version most needs, or `None` if every score is below 1.
fn pick_size_compaction(
    version: &Arc<Version>,
    opts: &Options,
    compact_pointers: &mut [Vec<u8>; NUM_LEVELS],
) -> Option<Compaction> {
    let scores = level_scores(version, opts);
    let (level, score) = scores
        .iter()
        .copied()
        .enumerate()
        .fold(
            (0, f64::MIN),
            |best, (l, s)| if s > best.1 { (l, s) } else { best },
        );
    if score < 1.0 {
        return None;
    }
    let icmp = version.comparator();
    // Level 0 is stored newest first; round-robin over it by key like the other levels.
    let mut by_key: Vec<&Arc<FileMetaData>> = version.files(level).iter().collect();
    if level == 0 {
        by_key.sort_by(|a, b| icmp.compare(&a.smallest, &b.smallest));
    }
    let pointer = compact_pointers.get(level)?;
    let first = by_key
        .iter()
        .find(|f| pointer.is_empty() || icmp.compare(&f.largest, pointer) == Ordering::Greater)
        .or(by_key.first())
        .map(|f| Arc::clone(f))?;
    let inputs = if level == 0 {
        version.overlapping_files(
            0,
            Some(first.smallest_user_key()),
            Some(first.largest_user_key()),
        )
    } else {
        vec![first]
    };
    Some(setup_other_inputs(
        version,
        opts,
        compact_pointers,
        level,
        inputs,
    ))
}

/// A compaction of the files of `level` overlapping the user-key range `[begin, end]`
/// (`None` = unbounded) into `level + 1`, for manual compaction. For levels below 0 the inputs
/// are cut after about one target file size of data; the caller continues from the largest key
/// of `inputs[0]`. `None` if nothing overlaps or `level` is the last level.
pub fn compact_range(
    version: &Arc<Version>,
    opts: &Options,
    compact_pointers: &mut [Vec<u8>; NUM_LEVELS],
    level: usize,
    begin: Option<&[u8]>,
    end: Option<&[u8]>,
) -> Option<Compaction> {
    if level + 1 >= NUM_LEVELS {
        return None;
    }
    let mut inputs = version.overlapping_files(level, begin, end);
    if inputs.is_empty() {
        return None;
    }
    if level > 0 {
        // Level-0 inputs cannot be cut: a file left behind could hold older versions of keys in
        // the files taken. Deeper levels can, and boundary inputs keep each user key whole.
        let mut total = 0u64;
        if let Some(cut) = inputs.iter().position(|f| {
            total = total.saturating_add(f.file_size);
            total >= opts.max_file_size
        }) {
            inputs.truncate(cut + 1);
        }
    }
    let mut c = setup_other_inputs(version, opts, compact_pointers, level, inputs);
    c.reason = CompactionReason::Manual;
    Some(c)
}

/// A compaction of the files of `level` (at least 1) overlapping the user-key range
/// `[begin, end]` (`None` = unbounded) into `level` itself, for manual compaction of the
/// deepest level holding the range: compacting each level into the next never rewrites what is
/// already in the deepest one, yet a compaction filter or expired entries may change it.
/// Inputs grow to keep every user key whole. `None` for level 0 (its files would come back
/// newer than level-0 files they may be older than) or if nothing overlaps.
pub fn compact_level_in_place(
    version: &Arc<Version>,
    opts: &Options,
    level: usize,
    begin: Option<&[u8]>,
    end: Option<&[u8]>,
) -> Option<Compaction> {
    if level == 0 || level >= NUM_LEVELS {
        return None;
    }
    let mut inputs = version.overlapping_files(level, begin, end);
    if inputs.is_empty() {
        return None;
    }
    add_boundary_inputs(version.comparator(), version.files(level), &mut inputs);
    let grandparents = match key_range(version.comparator(), &inputs) {
        Some((lo, hi)) if level + 1 < NUM_LEVELS => {
            version.overlapping_files(level + 1, Some(user_key(&lo)), Some(user_key(&hi)))
        }
        _ => Vec::new(),
    };
    let mut c = Compaction::new(
        version,
        opts,
        level,
        level,
        [inputs, Vec::new()],
        grandparents,
    );
    c.reason = CompactionReason::Manual;
    Some(c)
}

/// Smallest and largest internal keys over `files`.
fn key_range<'a>(
    icmp: &InternalKeyComparator,
    files: impl IntoIterator<Item = &'a Arc<FileMetaData>>,
) -> Option<(Vec<u8>, Vec<u8>)> {
    let mut range: Option<(&[u8], &[u8])> = None;
    for f in files {
        range = Some(match range {
            None => (&f.smallest, &f.largest),
            Some((lo, hi)) => (
                if icmp.compare(&f.smallest, lo) == Ordering::Less {
                    &f.smallest
                } else {
                    lo
                },
                if icmp.compare(&f.largest, hi) == Ordering::Greater {
                    &f.largest
                } else {
                    hi
                },
            ),
        });
    }
    range.map(|(lo, hi)| (lo.to_vec(), hi.to_vec()))
}

/// Adds to `inputs` every file of `level_files` that continues the user key `inputs` ends with:
/// a file whose smallest key has the same user key as the inputs' largest key but a larger
/// internal key (older versions). Repeats from the added file's largest key.
fn add_boundary_inputs(
    icmp: &InternalKeyComparator,
    level_files: &[Arc<FileMetaData>],
    inputs: &mut Vec<Arc<FileMetaData>>,
) {
    let Some((_, mut largest)) = key_range(icmp, inputs.iter()) else {
        return;
    };
    loop {
        let boundary = level_files
            .iter()
            .filter(|f| {
                icmp.compare(&f.smallest, &largest) == Ordering::Greater
                    && icmp.compare_user(f.smallest_user_key(), user_key(&largest))
                        == Ordering::Equal
            })
            .min_by(|a, b| icmp.compare(&a.smallest, &b.smallest));
        match boundary {
            Some(f) if !inputs.iter().any(|g| g.number == f.number) => {
                // The file's largest key is above its smallest, which is above `largest`, so
                // this loop always moves forward and ends.
                largest = f.largest.clone();
                inputs.push(Arc::clone(f));
            }
            _ => return,
        }
    }
}

/// Fills in level+1 inputs, tries to grow the level inputs, records grandparents and advances
/// the compact pointer.
fn setup_other_inputs(
    version: &Arc<Version>,
    opts: &Options,
    compact_pointers: &mut [Vec<u8>; NUM_LEVELS],
    level: usize,
    mut inputs0: Vec<Arc<FileMetaData>>,
) -> Compaction {
    let icmp = version.comparator();
    let user_range =
        |range: &(Vec<u8>, Vec<u8>)| (user_key(&range.0).to_vec(), user_key(&range.1).to_vec());
    let overlapping = |lvl: usize, range: &(Vec<u8>, Vec<u8>)| {
        let (lo, hi) = user_range(range);
        let mut files = version.overlapping_files(lvl, Some(&lo), Some(&hi));
        add_boundary_inputs(icmp, version.files(lvl), &mut files);
        files
    };

    add_boundary_inputs(icmp, version.files(level), &mut inputs0);
    let empty = (Vec::new(), Vec::new());
    let mut range0 = key_range(icmp, &inputs0).unwrap_or_else(|| empty.clone());
    let mut inputs1 = overlapping(level + 1, &range0);
    let mut all = key_range(icmp, inputs0.iter().chain(&inputs1)).unwrap_or_else(|| empty.clone());

    if !inputs1.is_empty() {
        let expanded0 = overlapping(level, &all);
        let expanded_bytes = total_file_size(&expanded0).saturating_add(total_file_size(&inputs1));
        if expanded0.len() > inputs0.len() && expanded_bytes < max_expanded_compaction_bytes(opts) {
            let new_range0 = key_range(icmp, &expanded0).unwrap_or_else(|| empty.clone());
            let expanded1 = overlapping(level + 1, &new_range0);
            if expanded1.len() == inputs1.len() {
                tracing::debug!(
                    level,
                    from = inputs0.len(),
                    to = expanded0.len(),
                    "growing compaction inputs without adding level+1 files"
                );
                inputs0 = expanded0;
                inputs1 = expanded1;
                range0 = new_range0;
                all = key_range(icmp, inputs0.iter().chain(&inputs1)).unwrap_or(empty);
            }
        }
    }

    let grandparents = if level + 2 < NUM_LEVELS {
        let (lo, hi) = user_range(&all);
        version.overlapping_files(level + 2, Some(&lo), Some(&hi))
    } else {
        Vec::new()
    };
    if let Some(pointer) = compact_pointers.get_mut(level) {
        *pointer = range0.1;
    }
    Compaction::new(
        version,
        opts,
        level,
        level + 1,
        [inputs0, inputs1],
        grandparents,
    )
}

/// Why a compaction was picked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompactionReason {
    /// A level is over its size (or level-0 file count) target.
    Size,
    /// `Db::compact_range` asked for it.
    Manual,
    /// A file's entries have all expired.
    Expired,
    /// A table pins a blob file due for garbage collection.
    BlobCollection,
}

/// How far the keys written by a compaction (or one part of it) have got, for
/// [`Compaction::should_stop_before`] and [`Compaction::is_base_level_for_key`]. Keys arrive in
/// ascending order, so every cursor only moves forward.
#[derive(Debug, Default)]
struct Cursors {
    /// Index of the first grandparent not yet passed by the output keys.
    grandparent_index: usize,
    /// Whether any key has been seen since the current output file started.
    seen_key: bool,
    /// Grandparent bytes overlapped by the current output file.
    overlapped_bytes: u64,
    /// Per level deeper than the output: index of the first file that may still contain a key
    /// passed to [`Compaction::is_base_level_for_key`].
    level_ptrs: [usize; NUM_LEVELS],
}

/// One compaction: the files to merge from `level` and `level + 1`, and the state the job
/// consults while writing outputs into [`Compaction::output_level`].
pub struct Compaction {
    /// The level whose files are compacted; outputs go to [`Compaction::output_level`].
    pub level: usize,
    /// Why the compaction was picked.
    pub reason: CompactionReason,
    /// `level + 1`, or `level` itself for an expiry compaction of a file that nothing below
    /// overlaps.
    output_level: usize,
    /// `inputs[0]`: files of `level`; `inputs[1]`: overlapping files of `level + 1`.
    pub inputs: [Vec<Arc<FileMetaData>>; 2],
    /// Files of `level + 2` overlapping the compaction's key range.
    pub grandparents: Vec<Arc<FileMetaData>>,
    /// The version the inputs were picked from; holding it keeps them on disk.
    pub input_version: Arc<Version>,
    /// Target size of each output file.
    pub max_output_file_size: u64,
    max_grandparent_overlap_bytes: u64,
    /// Where the output keys have got to; each part of a split compaction has its own.
    cursors: Cursors,
    /// For one part of a compaction ([`Compaction::part`]): the user keys this part
    /// writes, from `range_start` (inclusive) to `range_end` (exclusive); `None` is open.
    range_start: Option<Vec<u8>>,
    range_end: Option<Vec<u8>>,
}

impl fmt::Debug for Compaction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let numbers =
            |files: &[Arc<FileMetaData>]| files.iter().map(|f| f.number).collect::<Vec<_>>();
        f.debug_struct("Compaction")
            .field("level", &self.level)
            .field("inputs0", &numbers(&self.inputs[0]))
            .field("inputs1", &numbers(&self.inputs[1]))
            .field("grandparents", &numbers(&self.grandparents))
            .finish_non_exhaustive()
    }
}

impl Compaction {
    fn new(
        version: &Arc<Version>,
        opts: &Options,
        level: usize,
        output_level: usize,
        inputs: [Vec<Arc<FileMetaData>>; 2],
        grandparents: Vec<Arc<FileMetaData>>,
    ) -> Compaction {
        debug_assert!(output_level == level || output_level == level + 1);
        debug_assert!(output_level > 0, "level 0 never compacts into itself");
        Compaction {
            level,
            reason: CompactionReason::Size,
            output_level,
            inputs,
            grandparents,
            input_version: Arc::clone(version),
            max_output_file_size: opts.max_file_size,
            max_grandparent_overlap_bytes: max_grandparent_overlap_bytes(opts),
            cursors: Cursors::default(),
            range_start: None,
            range_end: None,
        }
    }

    /// The user keys this compaction writes: `(start, end)`, start inclusive, end exclusive,
    /// `None` for no bound. Both are `None` unless this is one part of a split compaction.
    pub fn key_bounds(&self) -> (Option<&[u8]>, Option<&[u8]>) {
        (self.range_start.as_deref(), self.range_end.as_deref())
    }

    /// Where to split the compaction into at most `max_parts` parts over disjoint, adjacent
    /// user-key ranges that together cover everything, for the parts to run at once on
    /// separate threads (RocksDB's subcompactions): the user keys the second and later parts
    /// start at, ascending. Empty when the compaction should run whole: a trivial move, a part
    /// already, fewer than two tables to split at, or inputs of less than two output tables'
    /// size (each part gets at least about one table's worth).
    ///
    /// Any user key would do as a point: a part takes every version of the keys in its range.
    /// The points are the smallest keys of tables of one input level, the one of level 1 or
    /// deeper with more tables (level-0 tables overlap, so theirs say little about where the
    /// bytes lie), grouped so each part gets about the same bytes of that level: a part then
    /// reads whole tables of it, and about its share of the other input level.
    pub fn split_points(&self, max_parts: usize) -> Vec<Vec<u8>> {
        if max_parts < 2
            || self.is_trivial_move()
            || self.range_start.is_some()
            || self.range_end.is_some()
        {
            return Vec::new();
        }
        let upper: &[Arc<FileMetaData>] = if self.level > 0 { &self.inputs[0] } else { &[] };
        let files = if upper.len() > self.inputs[1].len() {
            upper
        } else {
            &self.inputs[1]
        };
        // Each part should write at least about one full output table: a smaller part costs a
        // thread and a short table more than it saves.
        let by_size = self.total_input_bytes() / self.max_output_file_size.max(1);
        let parts = (max_parts as u64).min(files.len() as u64).min(by_size);
        if parts < 2 {
            return Vec::new();
        }
        // Bytes of the level's tables before each table.
        let before: Vec<u64> = files
            .iter()
            .scan(0u64, |sum, f| {
                let at = *sum;
                *sum = sum.saturating_add(f.file_size);
                Some(at)
            })
            .collect();
        let total = total_file_size(files);
        let mut points: Vec<Vec<u8>> = Vec::new();
        // Part `k` starts at the table whose preceding bytes are nearest `k / parts` of the
        // total, after the table the previous part starts at.
        let mut next = 1;
        for k in 1..parts {
            let target = (u128::from(total) * u128::from(k) / u128::from(parts)) as u64;
            let last = files.len() - (parts - k) as usize;
            let Some(best) = (next..=last).min_by_key(|&i| before[i].abs_diff(target)) else {
                break;
            };
            points.push(files[best].smallest_user_key().to_vec());
            next = best + 1;
        }
        points
    }

    /// The part of this compaction that writes the user keys from `start` (inclusive) to `end`
    /// (exclusive), `None` for no bound: the same inputs, with cursors of its own.
    pub fn part(&self, start: Option<&[u8]>, end: Option<&[u8]>) -> Compaction {
        Compaction {
            level: self.level,
            reason: self.reason,
            output_level: self.output_level,
            inputs: self.inputs.clone(),
            grandparents: self.grandparents.clone(),
            input_version: Arc::clone(&self.input_version),
            max_output_file_size: self.max_output_file_size,
            max_grandparent_overlap_bytes: self.max_grandparent_overlap_bytes,
            cursors: Cursors::default(),
            range_start: start.map(<[u8]>::to_vec),
            range_end: end.map(<[u8]>::to_vec),
        }
    }

    /// The level outputs are written to: `level + 1`, or `level` for an expiry compaction of a
    /// file nothing below overlaps (see the module docs).
    pub fn output_level(&self) -> usize {
        self.output_level
    }

    /// True if the compaction can move its single input file down a level by editing the
    /// manifest alone: one input file, nothing in `level + 1` to merge with, and little enough
    /// overlap with `level + 2` that the moved file will not make a later compaction expensive.
    /// Never for an expiry compaction, whose point is to rewrite the file without its expired
    /// entries.
    pub fn is_trivial_move(&self) -> bool {
        !matches!(
            self.reason,
            CompactionReason::Expired | CompactionReason::BlobCollection
        ) && self.output_level == self.level + 1
            && self.inputs[0].len() == 1
            && self.inputs[1].is_empty()
            && total_file_size(&self.grandparents) <= self.max_grandparent_overlap_bytes
    }

    /// Records the deletion of every input file in `edit`.
    pub fn add_input_deletions(&self, edit: &mut VersionEdit) {
        for (which, files) in self.inputs.iter().enumerate() {
            for f in files {
                edit.delete_file(self.level + which, f.number);
            }
        }
    }

    /// True if no level deeper than [`Compaction::output_level`] has a file whose range
    /// contains `user_key`, so a tombstone for it can be dropped (nothing older is hidden below).
    /// Must be called with ascending keys: each level keeps a cursor that only moves forward.
    pub fn is_base_level_for_key(&mut self, user_key: &[u8]) -> bool {
        let ucmp = self.input_version.comparator().user();
        for level in self.output_level + 1..NUM_LEVELS {
            let files = self.input_version.files(level);
            while let Some(f) = files.get(self.cursors.level_ptrs[level]) {
                if ucmp.compare(user_key, f.largest_user_key()) != Ordering::Greater {
                    if ucmp.compare(user_key, f.smallest_user_key()) != Ordering::Less {
                        return false;
                    }
                    break;
                }
                // The key is past this file; so is every later key.
                self.cursors.level_ptrs[level] += 1;
            }
        }
        true
    }

    /// True if the output file being written should end before `ikey` (an internal key, passed
    /// in ascending order) because it already overlaps more than ten target file sizes of
    /// grandparent data. Resets the overlap count when it says so.
    pub fn should_stop_before(&mut self, ikey: &[u8]) -> bool {
        let icmp = self.input_version.comparator();
        let cur = &mut self.cursors;
        while let Some(g) = self.grandparents.get(cur.grandparent_index) {
            if icmp.compare(ikey, &g.largest) != Ordering::Greater {
                break;
            }
            if cur.seen_key {
                cur.overlapped_bytes = cur.overlapped_bytes.saturating_add(g.file_size);
            }
            cur.grandparent_index += 1;
        }
        cur.seen_key = true;
        if cur.overlapped_bytes > self.max_grandparent_overlap_bytes {
            cur.overlapped_bytes = 0;
            true
        } else {
            false
        }
    }

    /// Total bytes of the input files of both levels.
    pub fn total_input_bytes(&self) -> u64 {
        total_file_size(&self.inputs[0]).saturating_add(total_file_size(&self.inputs[1]))
    }

    /// The internal-key range covered by the inputs of both levels, or `None` if there are none.
    pub fn key_range(&self) -> Option<(Vec<u8>, Vec<u8>)> {
        key_range(
            self.input_version.comparator(),
            self.inputs[0].iter().chain(&self.inputs[1]),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{make_internal_key, ValueKind};
    use crate::version::version::tests::{file, file_seq, version};

    fn opts() -> Options {
        Options {
            max_file_size: 1000,
            max_bytes_for_level_base: 10_000,
            max_bytes_for_level_multiplier: 10.0,
            level0_file_num_compaction_trigger: 4,
            ..Options::default()
        }
    }

    fn numbers(files: &[Arc<FileMetaData>]) -> Vec<u64> {
        let mut n: Vec<u64> = files.iter().map(|f| f.number).collect();
        n.sort_unstable();
        n
    }

    fn no_pointers() -> [Vec<u8>; NUM_LEVELS] {
        Default::default()
    }

    #[test]
    fn level_targets_and_scores() {
        let o = opts();
        assert_eq!(max_bytes_for_level(&o, 1), 10_000);
        assert_eq!(max_bytes_for_level(&o, 2), 100_000);
        assert_eq!(max_bytes_for_level(&o, 3), 1_000_000);
        assert_eq!(max_bytes_for_level(&o, 6), 1_000_000_000);
        let huge = Options {
            max_bytes_for_level_base: u64::MAX / 2,
            ..opts()
        };
        assert_eq!(max_bytes_for_level(&huge, 6), u64::MAX, "saturates");

        let v = version(vec![
            (0, file(1, "a", "b", 1)),
            (0, file(2, "a", "b", 1)),
            (1, file(3, "a", "b", 5_000)),
            (2, file(4, "a", "b", 250_000)),
            (6, file(5, "a", "b", u64::MAX / 4)),
        ]);
        let scores = level_scores(&v, &o);
        assert_eq!(scores.len(), NUM_LEVELS);
        assert_eq!(scores[0], 0.5);
        assert_eq!(scores[1], 0.5);
        assert_eq!(scores[2], 2.5);
        assert_eq!(scores[3], 0.0);
        assert_eq!(scores[6], 0.0, "the last level never compacts");
        let c = pick_compaction(&Arc::new(v), &o, &mut no_pointers(), 0).expect("level 2 is over");
        assert_eq!(c.level, 2);
        assert_eq!(c.output_level(), 3);
    }

    #[test]
    fn nothing_to_do_below_score_one() {
        let v = Arc::new(version(vec![
            (0, file(1, "a", "b", 1)),
            (1, file(3, "a", "b", 9_999)),
        ]));
        assert!(pick_compaction(&v, &opts(), &mut no_pointers(), 0).is_none());
    }

    #[test]
    fn level_zero_trigger_takes_every_overlapping_file() {
        let v = Arc::new(version(vec![
            (0, file(10, "a", "c", 100)),
            (0, file(11, "b", "e", 100)),
            (0, file(12, "d", "f", 100)),
            (0, file(13, "x", "z", 100)),
            (1, file(5, "a", "b", 100)),
            (1, file(6, "e", "g", 100)),
            (1, file(7, "h", "k", 100)),
            (2, file(8, "a", "z", 100)),
        ]));
        let mut pointers = no_pointers();
        let c = pick_compaction(&v, &opts(), &mut pointers, 0).expect("4 files in level 0");
        assert_eq!(c.level, 0);
        // Starting at the smallest key, "a..c" grows through "b..e" to "d..f"; "x..z" stays.
        assert_eq!(numbers(&c.inputs[0]), vec![10, 11, 12]);
        assert_eq!(numbers(&c.inputs[1]), vec![5, 6]);
        assert_eq!(numbers(&c.grandparents), vec![8]);
        assert!(!c.is_trivial_move());
        assert_eq!(c.total_input_bytes(), 500);
        assert_eq!(user_key(&pointers[0]), b"f");
        // The next pick starts past "f": the "x..z" file, alone, overlapping nothing below.
        let c = pick_compaction(&v, &opts(), &mut pointers, 0).expect("still 4 files");
        assert_eq!(numbers(&c.inputs[0]), vec![13]);
        assert!(c.inputs[1].is_empty());
        assert!(c.is_trivial_move());

        let mut edit = VersionEdit::default();
        c.add_input_deletions(&mut edit);
        assert_eq!(edit.deleted_files, vec![(0, 13)]);
    }

    #[test]
    fn level_zero_never_leaves_a_newer_overlapping_file_behind() {
        // Whatever file is picked first, the inputs are closed under overlap: every level-0
        // file left behind is disjoint from the compacted range.
        let v = Arc::new(version(vec![
            (0, file(20, "m", "p", 10)),
            (0, file(21, "a", "d", 10)),
            (0, file(22, "c", "n", 10)),
            (0, file(23, "q", "r", 10)),
            (0, file(24, "o", "o", 10)),
        ]));
        for start in ["", "d", "n", "p", "r"] {
            let mut pointers = no_pointers();
            if !start.is_empty() {
                pointers[0] = make_internal_key(start.as_bytes(), 0, ValueKind::Deletion);
            }
            let c = pick_compaction(&v, &opts(), &mut pointers, 0).expect("5 files");
            let (lo, hi) = c.key_range().expect("inputs");
            for f in v.files(0) {
                if c.inputs[0].iter().any(|g| g.number == f.number) {
                    continue;
                }
                assert!(
                    f.largest_user_key() < user_key(&lo) || f.smallest_user_key() > user_key(&hi),
                    "file {} left behind overlaps {:?} (start {start})",
                    f.number,
                    c
                );
            }
        }
    }

    #[test]
    fn level_size_trigger_round_robin() {
        let v = Arc::new(version(vec![
            (1, file(1, "a", "c", 4_000)),
            (1, file(2, "d", "f", 4_000)),
            (1, file(3, "g", "i", 4_000)),
            (2, file(4, "e", "h", 4_000)),
        ]));
        let o = opts();
        let mut pointers = no_pointers();
        let picked: Vec<Vec<u64>> = (0..4)
            .map(|_| {
                let c = pick_compaction(&v, &o, &mut pointers, 0).expect("level 1 is over");
                assert_eq!(c.level, 1);
                numbers(&c.inputs[0])
            })
            .collect();
        // "a..c" alone; then "d..f" pulls in the L2 file "e..h", which lets "g..i" join
        // without adding level-2 files; then the pointer is past "i" and wraps around.
        assert_eq!(picked, vec![vec![1], vec![2, 3], vec![1], vec![2, 3]]);
    }

    #[test]
    fn expansion_stops_when_it_would_add_next_level_files() {
        let v = Arc::new(version(vec![
            (1, file(1, "a", "c", 6_000)),
            (1, file(2, "d", "f", 6_000)),
            (2, file(4, "b", "d", 100)),
            (2, file(5, "e", "z", 100)),
        ]));
        let c = pick_compaction(&v, &opts(), &mut no_pointers(), 0).expect("level 1 is over");
        // Growing to "d..f" would bring "e..z" into level 2: stay with one file.
        assert_eq!(numbers(&c.inputs[0]), vec![1]);
        assert_eq!(numbers(&c.inputs[1]), vec![4]);
    }

    #[test]
    fn expansion_respects_the_byte_limit() {
        let v = Arc::new(version(vec![
            (1, file(1, "a", "c", 12_000)),
            (1, file(2, "d", "f", 12_000)),
            (2, file(4, "b", "e", 100)),
        ]));
        // 24_100 bytes is under 25 * 1000: grows.
        let c = pick_compaction(&v, &opts(), &mut no_pointers(), 0).expect("over");
        assert_eq!(numbers(&c.inputs[0]), vec![1, 2]);
        let v = Arc::new(version(vec![
            (1, file(1, "a", "c", 12_000)),
            (1, file(2, "d", "f", 13_000)),
            (2, file(4, "b", "e", 100)),
        ]));
        // 25_100 is not: stays.
        let c = pick_compaction(&v, &opts(), &mut no_pointers(), 0).expect("over");
        assert_eq!(numbers(&c.inputs[0]), vec![1]);
    }

    #[test]
    fn boundary_files_join_their_user_key() {
        // Level 1 holds "k" split across files 1 (versions 9, 8) and 2 (version 7), and file
        // 2's older "m" versions continue in file 3.
        let v = Arc::new(version(vec![
            (1, file_seq(1, "a", 20, "k", 8, 6_000)),
            (1, file_seq(2, "k", 7, "m", 6, 3_000)),
            (1, file_seq(3, "m", 5, "p", 5, 3_000)),
            (1, file(4, "q", "z", 3_000)),
        ]));
        let c = pick_compaction(&v, &opts(), &mut no_pointers(), 0).expect("level 1 is over");
        assert_eq!(
            numbers(&c.inputs[0]),
            vec![1, 2, 3],
            "the whole chain of shared keys"
        );
        assert!(!c.is_trivial_move());

        // The same in the next level: picking "a..c" in level 1 overlaps file 11 of level 2,
        // which shares "c" with file 12.
        let v = Arc::new(version(vec![
            (1, file(1, "a", "c", 20_000)),
            (2, file_seq(11, "a", 9, "c", 9, 100)),
            (2, file_seq(12, "c", 4, "d", 4, 100)),
            (2, file(13, "e", "f", 100)),
        ]));
        let c = pick_compaction(&v, &opts(), &mut no_pointers(), 0).expect("level 1 is over");
        assert_eq!(numbers(&c.inputs[1]), vec![11, 12]);
    }

    #[test]
    fn trivial_move_needs_little_grandparent_overlap() {
        let small = Arc::new(version(vec![
            (1, file(1, "a", "c", 20_000)),
            (3, file(2, "a", "z", 10_000)),
        ]));
        let c = pick_compaction(&small, &opts(), &mut no_pointers(), 0).expect("over");
        assert!(c.is_trivial_move(), "{c:?}");
        let big = Arc::new(version(vec![
            (1, file(1, "a", "c", 20_000)),
            (3, file(2, "a", "z", 10_001)),
        ]));
        let c = pick_compaction(&big, &opts(), &mut no_pointers(), 0).expect("over");
        assert!(!c.is_trivial_move(), "grandparent overlap above 10 files");
    }

    #[test]
    fn grandparent_overlap_cuts_outputs() {
        // Twelve grandparent files of 1_000 bytes each, "b0".."b11"; the limit is 10_000.
        let mut files = vec![(1, file(1, "a", "z", 20_000))];
        for i in 0..12u64 {
            let k = format!("b{i:02}");
            files.push((3, file(100 + i, &k, &k, 1_000)));
        }
        let v = Arc::new(version(files));
        let mut c = pick_compaction(&v, &opts(), &mut no_pointers(), 0).expect("over");
        assert_eq!(c.grandparents.len(), 12);
        let key = |s: &str| make_internal_key(s.as_bytes(), 1, ValueKind::Value);
        assert!(!c.should_stop_before(&key("a")), "first key never stops");
        // Passing grandparents b00..b10 overlaps 11 files = 11_000 bytes > 10_000.
        let mut stops = Vec::new();
        for i in 0..12 {
            let k = format!("b{i:02}x");
            if c.should_stop_before(&key(&k)) {
                stops.push(i);
            }
        }
        assert_eq!(stops, vec![10], "cut once more than 10 files were passed");
        // After a cut the count starts over.
        assert!(!c.should_stop_before(&key("c")));
    }

    #[test]
    fn split_points_balance_the_deeper_level_and_fall_on_its_tables() {
        // Level 1 over its target, overlapping six level-2 tables of uneven sizes.
        let sizes = [100u64, 100, 400, 100, 100, 200];
        let mut files = vec![(1, file(1, "a", "z", 20_000))];
        for (i, &size) in sizes.iter().enumerate() {
            let lo = format!("k{i}a");
            let hi = format!("k{i}z");
            files.push((2, file(10 + i as u64, &lo, &hi, size)));
        }
        let v = Arc::new(version(files));
        let c = pick_compaction(&v, &opts(), &mut no_pointers(), 0).expect("over");
        assert_eq!(c.inputs[1].len(), 6, "{c:?}");
        assert!(c.split_points(1).is_empty(), "one part: no split");
        // 1000 bytes in two: the second part starts where 500 bytes come before (k3, 600,
        // against k2, 200).
        assert_eq!(c.split_points(2), vec![b"k3a".to_vec()]);
        // In three: nearest 333 (k2, 200) and 666 (k4, 700).
        assert_eq!(c.split_points(3), vec![b"k2a".to_vec(), b"k4a".to_vec()]);
        // Never more parts than tables, and every point is a table's smallest key, ascending.
        let many = c.split_points(100);
        assert_eq!(many.len(), 5, "{many:?}");
        assert!(many.windows(2).all(|w| w[0] < w[1]));
        for p in &many {
            assert!(c.inputs[1]
                .iter()
                .any(|f| f.smallest_user_key() == p.as_slice()));
        }
        // Inputs of less than two output tables' size run whole.
        let v = Arc::new(version(vec![
            (1, file(1, "a", "z", 10_001)),
            (2, file(2, "b", "c", 100)),
            (2, file(3, "m", "n", 100)),
        ]));
        let c = pick_compaction(&v, &opts(), &mut no_pointers(), 0).expect("over");
        assert_eq!(c.total_input_bytes(), 10_201);
        assert_eq!(c.split_points(2).len(), 1, "ten tables' worth splits");
        let mut big_tables = opts();
        big_tables.max_file_size = 6_000;
        let c = pick_compaction(&v, &big_tables, &mut no_pointers(), 0).expect("over");
        assert!(
            c.split_points(2).is_empty(),
            "under two tables' worth: {c:?}"
        );
    }

    #[test]
    fn parts_keep_the_inputs_and_get_their_own_bounds_and_cursors() {
        let v = Arc::new(version(vec![
            (1, file(1, "a", "z", 20_000)),
            (2, file(2, "b", "c", 100)),
            (2, file(3, "m", "n", 100)),
            (3, file(4, "d", "e", 100)),
        ]));
        let mut c = pick_compaction(&v, &opts(), &mut no_pointers(), 0).expect("over");
        assert_eq!(c.key_bounds(), (None, None));
        // The whole compaction's cursor has moved past "d"..."e" of level 3.
        assert!(c.is_base_level_for_key(b"f"));
        let mut part = c.part(Some(b"d"), Some(b"m"));
        assert_eq!(part.key_bounds(), (Some(&b"d"[..]), Some(&b"m"[..])));
        assert_eq!(numbers(&part.inputs[0]), numbers(&c.inputs[0]));
        assert_eq!(numbers(&part.inputs[1]), numbers(&c.inputs[1]));
        // A fresh cursor: the part still sees level 3's table.
        assert!(!part.is_base_level_for_key(b"d"));
        // A part is never split again.
        assert!(part.split_points(4).is_empty());
    }

    #[test]
    fn base_level_for_key() {
        let v = Arc::new(version(vec![
            (1, file(1, "a", "z", 20_000)),
            (3, file(2, "c", "e", 100)),
            (3, file(3, "m", "n", 100)),
            (5, file(4, "p", "q", 100)),
        ]));
        let mut c = pick_compaction(&v, &opts(), &mut no_pointers(), 0).expect("over");
        assert_eq!(c.output_level(), 2);
        let answers: Vec<(&str, bool)> = ["a", "c", "d", "f", "m", "o", "p", "q", "r"]
            .into_iter()
            .map(|k| (k, c.is_base_level_for_key(k.as_bytes())))
            .collect();
        assert_eq!(
            answers,
            vec![
                ("a", true),
                ("c", false),
                ("d", false),
                ("f", true),
                ("m", false),
                ("o", true),
                ("p", false),
                ("q", false),
                ("r", true),
            ]
        );
    }

    /// `f` with every entry expiring, the latest at `max_expiry`.
    fn expiring(f: Arc<FileMetaData>, max_expiry: u64) -> Arc<FileMetaData> {
        let mut f = (*f).clone();
        f.max_expiry_micros = max_expiry;
        f.has_permanent_entries = false;
        Arc::new(f)
    }

    #[test]
    fn expired_files_are_picked_only_once_every_entry_has_expired() {
        let mut mixed = (*file(3, "m", "n", 100)).clone();
        mixed.max_expiry_micros = 10; // expired entries, but also permanent ones
        let v = Arc::new(version(vec![
            (0, expiring(file(1, "a", "b", 100), 500)),
            (2, expiring(file(2, "c", "d", 100), 300)),
            (2, Arc::new(mixed)),
        ]));
        let o = opts();
        assert_eq!(
            next_file_expiry(&v),
            Some(300),
            "the mixed file never expires whole"
        );
        for now in [0, 299] {
            assert!(!needs_compaction(&v, &o, now));
            assert!(pick_compaction(&v, &o, &mut no_pointers(), now).is_none());
        }
        // At 300 (an entry with expiry e is gone from now >= e) the level-2 file is due.
        assert!(needs_compaction(&v, &o, 300));
        let mut pointers = no_pointers();
        let mut c = pick_compaction(&v, &o, &mut pointers, 300).expect("file 2 expired");
        assert_eq!(c.reason, CompactionReason::Expired);
        assert_eq!(
            (c.level, c.output_level()),
            (2, 2),
            "nothing below: into itself"
        );
        assert_eq!(numbers(&c.inputs[0]), vec![2]);
        assert!(c.inputs[1].is_empty() && c.grandparents.is_empty());
        assert!(!c.is_trivial_move());
        assert!(
            c.is_base_level_for_key(b"c"),
            "nothing deeper can hold the key"
        );
        assert_eq!(
            pointers,
            no_pointers(),
            "expiry picks leave the round-robin alone"
        );
        // At 500 the shallowest expired file goes first: level 0 compacts into level 1.
        let c = pick_compaction(&v, &o, &mut no_pointers(), 500).expect("file 1 expired");
        assert_eq!((c.level, c.output_level()), (0, 1));
        assert_eq!(numbers(&c.inputs[0]), vec![1]);
        assert!(
            !c.is_trivial_move(),
            "an expired file is rewritten, never moved"
        );
        assert!(first_expired_file(&v, u64::MAX).is_some_and(|(l, f)| l == 0 && f.number == 1));
    }

    #[test]
    fn a_table_pinning_a_blob_file_due_for_collection_is_compacted() {
        let pinning = |f: Arc<FileMetaData>, blob: u64| {
            let mut f = (*f).clone();
            f.oldest_blob_file = blob;
            Arc::new(f)
        };
        let last = NUM_LEVELS - 1;
        let mut v = version(vec![
            (last, pinning(file(1, "a", "b", 100), 50)),
            (last, pinning(file(2, "c", "d", 100), 60)),
        ]);
        let blobs = |garbage_of_60: u64| {
            let mut m = std::collections::BTreeMap::new();
            m.insert(
                50,
                crate::version::BlobFileMeta {
                    total_bytes: 1000,
                    garbage_bytes: 100,
                },
            );
            m.insert(
                60,
                crate::version::BlobFileMeta {
                    total_bytes: 1000,
                    garbage_bytes: garbage_of_60,
                },
            );
            m
        };
        v = v.with_blob_files(blobs(400));
        let v = Arc::new(v);
        assert!(!needs_compaction(&v, &opts(), 0), "below the 0.5 threshold");
        assert!(pick_compaction(&v, &opts(), &mut no_pointers(), 0).is_none());
        let v = Arc::new(
            version(vec![
                (last, pinning(file(1, "a", "b", 100), 50)),
                (last, pinning(file(2, "c", "d", 100), 60)),
            ])
            .with_blob_files(blobs(500)),
        );
        assert!(needs_compaction(&v, &opts(), 0));
        let c = pick_compaction(&v, &opts(), &mut no_pointers(), 0).expect("blob collection");
        assert_eq!(c.reason, CompactionReason::BlobCollection);
        assert_eq!(numbers(&c.inputs[0]), vec![2]);
        assert_eq!(
            (c.level, c.output_level()),
            (last, last),
            "nothing below: in place"
        );
        assert!(!c.is_trivial_move());
    }

    #[test]
    fn expired_file_in_the_last_level_compacts_into_itself() {
        let last = NUM_LEVELS - 1;
        let v = Arc::new(version(vec![
            (last, file(1, "a", "b", 100)),
            (last, expiring(file(2, "c", "d", 100), 7)),
        ]));
        let c = pick_compaction(&v, &opts(), &mut no_pointers(), 7).expect("expired");
        assert_eq!((c.level, c.output_level()), (last, last));
        assert_eq!(numbers(&c.inputs[0]), vec![2]);
        let mut edit = VersionEdit::default();
        c.add_input_deletions(&mut edit);
        assert_eq!(edit.deleted_files, vec![(last, 2)]);
    }

    #[test]
    fn expired_file_with_data_below_compacts_down() {
        // Level 4 may hold older versions of "c".."d": expired entries must turn into
        // tombstones, so the file compacts into level 3 with the usual inputs.
        let v = Arc::new(version(vec![
            (2, expiring(file(2, "c", "d", 100), 7)),
            (3, file(3, "a", "c", 100)),
            (4, file(4, "d", "z", 100)),
        ]));
        let mut c = pick_compaction(&v, &opts(), &mut no_pointers(), 7).expect("expired");
        assert_eq!(c.reason, CompactionReason::Expired);
        assert_eq!((c.level, c.output_level()), (2, 3));
        assert_eq!(numbers(&c.inputs[1]), vec![3]);
        assert_eq!(numbers(&c.grandparents), vec![4]);
        assert!(!c.is_trivial_move());
        assert!(c.is_base_level_for_key(b"c"));
        assert!(!c.is_base_level_for_key(b"d"));
    }

    #[test]
    fn expired_file_takes_the_rest_of_its_last_user_key() {
        // File 2 ends with "k"@8; older versions of "k" continue in file 3 (not expiring).
        let v = Arc::new(version(vec![
            (3, expiring(file_seq(2, "a", 20, "k", 8, 100), 1)),
            (3, file_seq(3, "k", 7, "m", 6, 100)),
            (3, file(4, "p", "q", 100)),
        ]));
        let c = pick_compaction(&v, &opts(), &mut no_pointers(), 1).expect("expired");
        assert_eq!((c.level, c.output_level()), (3, 3));
        assert_eq!(numbers(&c.inputs[0]), vec![2, 3]);
    }

    #[test]
    fn size_compactions_go_before_expiry() {
        let v = Arc::new(version(vec![
            (0, file(1, "a", "b", 1)),
            (0, file(2, "a", "b", 1)),
            (0, file(3, "a", "b", 1)),
            (0, file(4, "a", "b", 1)),
            (3, expiring(file(5, "x", "y", 100), 1)),
        ]));
        let c = pick_compaction(&v, &opts(), &mut no_pointers(), 1).expect("due");
        assert_eq!((c.reason, c.level), (CompactionReason::Size, 0));
    }

    #[test]
    fn manual_range_compaction() {
        let v = Arc::new(version(vec![
            (0, file(20, "a", "b", 10)),
            (0, file(21, "b", "c", 10)),
            (0, file(22, "x", "y", 10)),
            (1, file(1, "a", "b", 600)),
            (1, file(2, "c", "d", 600)),
            (1, file(3, "e", "f", 600)),
            (2, file(4, "a", "d", 100)),
        ]));
        let mut pointers = no_pointers();
        let c =
            compact_range(&v, &opts(), &mut pointers, 0, Some(b"a"), Some(b"a")).expect("overlaps");
        assert_eq!(c.reason, CompactionReason::Manual);
        assert_eq!(
            numbers(&c.inputs[0]),
            vec![20, 21],
            "level 0 grows, never cut"
        );
        assert_eq!(numbers(&c.inputs[1]), vec![1, 2]);
        // Level 1 is cut once the inputs reach max_file_size (1000): two files. (Growing back
        // to the third would not add level-2 files only if level 2 reached "f"; it stops at "d".)
        let c = compact_range(&v, &opts(), &mut pointers, 1, None, None).expect("overlaps");
        assert_eq!(numbers(&c.inputs[0]), vec![1, 2]);
        assert_eq!(numbers(&c.inputs[1]), vec![4]);
        assert!(compact_range(&v, &opts(), &mut pointers, 1, Some(b"g"), Some(b"w")).is_none());
        assert!(compact_range(&v, &opts(), &mut pointers, NUM_LEVELS - 1, None, None).is_none());
    }

    #[test]
    fn manual_compaction_of_a_level_into_itself() {
        let v = Arc::new(version(vec![
            (0, file(20, "a", "z", 10)),
            (2, file_seq(1, "a", 9, "c", 9, 100)),
            (2, file_seq(2, "c", 5, "e", 5, 100)),
            (2, file(3, "g", "h", 100)),
            (3, file(4, "d", "z", 100)),
        ]));
        let mut c = compact_level_in_place(&v, &opts(), 2, Some(b"b"), Some(b"b")).expect("a..c");
        assert_eq!(
            (c.level, c.output_level(), c.reason),
            (2, 2, CompactionReason::Manual)
        );
        assert_eq!(
            numbers(&c.inputs[0]),
            vec![1, 2],
            "file 2 continues user key c"
        );
        assert!(c.inputs[1].is_empty());
        assert_eq!(numbers(&c.grandparents), vec![4]);
        assert!(!c.is_trivial_move());
        assert!(c.is_base_level_for_key(b"c"));
        assert!(!c.is_base_level_for_key(b"e"));
        assert!(compact_level_in_place(&v, &opts(), 0, None, None).is_none());
        assert!(compact_level_in_place(&v, &opts(), 2, Some(b"x"), None).is_none());
    }
}
