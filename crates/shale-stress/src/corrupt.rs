//! Corruption at every byte: a small database holding files of each kind (table, WAL, blob
//! file, manifest, CURRENT) is copied once per byte of each file with one bit of that byte flipped,
//! opened and read back in full. The damage must be reported (the open or a read fails) and never
//! returned as wrong data. Two outcomes are not errors and are counted apart: the flipped bit
//! was in bytes nothing reads (the data comes back whole), or it was in the newest WAL (or in
//! the blob file its records reference) and recovery dropped the damaged record and everything
//! after it as a torn tail, logging a warning (clause 6 of the contract: a torn tail of the last WAL is indistinguishable from a
//! damaged one). Anything else is an undetected corruption.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use shale::env::fault::flip_bit;
use shale::env::{Fs, MemFs};
use shale::{Compression, Db, Options};

use crate::oracle::State;

/// Outcomes for one kind of file.
#[derive(Debug, Clone, Default)]
pub struct KindStats {
    /// Bits flipped (one per byte offset).
    pub injected: u64,
    /// The open failed.
    pub failed_open: u64,
    /// The open worked, a read failed.
    pub failed_read: u64,
    /// Recovery dropped the damaged newest-WAL record and all after it (with a warning).
    pub dropped_as_torn_tail: u64,
    /// Everything came back intact: the bit was in bytes nothing reads.
    pub harmless: u64,
    /// Wrong or missing data came back without an error.
    pub undetected: u64,
}

impl KindStats {
    /// Damage reported as an error.
    pub fn detected(&self) -> u64 {
        self.failed_open + self.failed_read
    }
}

/// Outcomes by file kind (`table`, `wal`, `blob`, `manifest`, `current`).
#[derive(Debug, Clone, Default)]
pub struct CorruptStats {
    /// Per kind.
    pub by_kind: BTreeMap<&'static str, KindStats>,
    /// The first few undetected cases.
    pub problems: Vec<String>,
}

impl CorruptStats {
    /// Bits flipped in all.
    pub fn injected(&self) -> u64 {
        self.by_kind.values().map(|k| k.injected).sum()
    }
    /// Damage reported as an error, in all.
    pub fn detected(&self) -> u64 {
        self.by_kind.values().map(KindStats::detected).sum()
    }
    /// Undetected corruptions, in all (the contract says none).
    pub fn undetected(&self) -> u64 {
        self.by_kind.values().map(|k| k.undetected).sum()
    }
}

const DIR: &str = "/db";

fn options(fs: MemFs) -> Options {
    Options {
        block_size: 256,
        compression: Compression::None,
        max_background_jobs: 1,
        // Values of 12 bytes and more (about half of them) live in blob files.
        min_blob_size: Some(12),
        fs: Arc::new(fs),
        ..Options::default()
    }
}

fn key(i: u32) -> String {
    format!("key{i:03}")
}

fn val(i: u32) -> String {
    format!("value-{i}-{}", "z".repeat((i % 5) as usize))
}

/// Builds the base database: two tables (keys 0..40 and 100..110), a WAL (keys 40..48, and a
/// deletion of key 0), a manifest and CURRENT. Returns the image and the state it must read back as, plus
/// the states a dropped WAL tail may leave (one per number of WAL records kept).
pub fn base() -> Result<(MemFs, State, Vec<State>), shale::Error> {
    let fs = MemFs::new();
    let mut state = State::new();
    {
        let db = Db::open(DIR, options(fs.clone()))?;
        for i in 0..40 {
            db.put(key(i), val(i))?;
            state.insert(key(i).into_bytes(), val(i).into_bytes());
        }
        db.flush()?;
    }
    // A second session adds a table (so the manifest holds a snapshot and an edit after it),
    // then leaves its last writes in the WAL only.
    let mut prefixes = Vec::new();
    {
        let db = Db::open(DIR, options(fs.clone()))?;
        for i in 100..110 {
            db.put(key(i), val(i))?;
            state.insert(key(i).into_bytes(), val(i).into_bytes());
        }
        db.flush()?;
        prefixes.push(state.clone());
        for i in 40..48 {
            db.put(key(i), val(i))?;
            state.insert(key(i).into_bytes(), val(i).into_bytes());
            prefixes.push(state.clone());
        }
        db.delete(key(0))?;
        state.remove(key(0).as_bytes());
        prefixes.push(state.clone());
    }
    Ok((fs, state, prefixes))
}

fn copy(from: &MemFs) -> MemFs {
    let to = MemFs::new();
    let dir = Path::new(DIR);
    let _ = to.create_dir_all(dir);
    for name in from.list(dir).unwrap_or_default() {
        let path = dir.join(&name);
        if let Some(data) = from.contents(&path) {
            to.set_contents(&path, data);
        }
    }
    to
}

fn read_everything(db: &Db, expected: &State) -> Result<State, shale::Error> {
    let mut state = State::new();
    for item in db.range::<&[u8], _>(..) {
        let (k, v) = item?;
        state.insert(k, v);
    }
    for k in expected.keys() {
        if db.get(k)?.as_ref() != state.get(k) {
            // A point read that disagrees with the scan is wrong data too.
            return Ok(State::new());
        }
    }
    Ok(state)
}

/// Flips one bit at every byte offset (every `stride`-th with `stride` > 1) of each file kind.
pub fn every_byte(stride: usize) -> Result<CorruptStats, shale::Error> {
    let (image, expected, prefixes) = base()?;
    let dir = Path::new(DIR);
    let mut files: Vec<(&'static str, String)> = Vec::new();
    for name in image.list(dir)? {
        let kind = if name.ends_with(".sst") {
            "table"
        } else if name.ends_with(".log") {
            "wal"
        } else if name.ends_with(".blob") {
            "blob"
        } else if name.starts_with("MANIFEST-") {
            "manifest"
        } else if name == "CURRENT" {
            "current"
        } else {
            continue;
        };
        files.push((kind, name));
    }
    let mut stats = CorruptStats::default();
    for (kind, name) in files {
        let path = dir.join(&name);
        let len = image.contents(&path).map_or(0, |d| d.len());
        let mut offset = 0;
        while offset < len {
            let damaged = copy(&image);
            flip_bit(&damaged, &path, offset, (offset % 8) as u8);
            let entry = stats.by_kind.entry(kind).or_default();
            entry.injected += 1;
            match Db::open(DIR, options(damaged)) {
                Err(_) => entry.failed_open += 1,
                Ok(db) => match read_everything(&db, &expected) {
                    Err(_) => entry.failed_read += 1,
                    Ok(state) if state == expected => entry.harmless += 1,
                    Ok(state) if (kind == "wal" || kind == "blob") && prefixes.contains(&state) => {
                        entry.dropped_as_torn_tail += 1
                    }
                    Ok(state) => {
                        entry.undetected += 1;
                        if stats.problems.len() < 20 {
                            stats.problems.push(format!(
                                "{name} byte {offset}: read back {} keys without an error, expected {}",
                                state.len(),
                                expected.len()
                            ));
                        }
                    }
                },
            }
            offset += stride.max(1);
        }
    }
    Ok(stats)
}
