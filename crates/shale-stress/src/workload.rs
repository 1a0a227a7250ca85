//! Random workloads and the runner that applies them to a database on a [`FaultFs`], recording
//! every write and its outcome in a [`History`].
//!
//! Thread-safety: a [`Runner`] belongs to one thread (the database's background threads run
//! beside it); the filesystem call counter orders its operations against background work.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::Rng;
use shale::env::{FaultFs, Fs};
use shale::{Compression, Db, Error, Options, ReadOptions, WriteBatch, WriteOptions};

use crate::oracle::{Entry, History, MergeKind, State};

/// The database directory used by every simulated run.
pub const DIR: &str = "/db";

/// The database settings of one run: small, so a short workload flushes, compacts and rolls
/// files many times.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// The merge operator.
    pub merge: MergeKind,
    /// Block compression.
    pub compression: Compression,
    /// Memtable size.
    pub write_buffer_size: usize,
    /// Number of distinct keys.
    pub keys: usize,
    /// Values at least this long go to blob files (`None`: separation off).
    pub min_blob_size: Option<usize>,
    /// Parts a compaction may be split into, run on threads at once.
    pub max_subcompactions: usize,
}

impl Config {
    /// A random configuration.
    pub fn random(rng: &mut StdRng) -> Config {
        Config {
            merge: if rng.gen_bool(0.5) {
                MergeKind::U64Add
            } else {
                MergeKind::StringAppend
            },
            compression: match rng.gen_range(0..3) {
                0 => Compression::None,
                1 => Compression::Lz4,
                _ => Compression::Snappy,
            },
            write_buffer_size: [4096, 8192, 16384][rng.gen_range(0..3)],
            keys: [8, 24, 64][rng.gen_range(0..3)],
            min_blob_size: [None, Some(64), Some(1000)][rng.gen_range(0..3)],
            max_subcompactions: [1, 2, 4][rng.gen_range(0..3)],
        }
    }

    /// The options for a database on `fs`.
    pub fn options(&self, fs: Arc<dyn Fs>) -> Options {
        Options {
            write_buffer_size: self.write_buffer_size,
            max_file_size: 4096,
            block_size: 512,
            compression: self.compression,
            level0_file_num_compaction_trigger: 2,
            level0_slowdown_writes_trigger: 40,
            level0_stop_writes_trigger: 48,
            max_bytes_for_level_base: 16 * 1024,
            max_bytes_for_level_multiplier: 4.0,
            max_background_jobs: 1,
            block_cache_capacity: 64 * 1024,
            merge_operator: Some(self.merge.operator()),
            min_blob_size: self.min_blob_size,
            max_subcompactions: self.max_subcompactions,
            fs,
            ..Options::default()
        }
    }
}

/// One step of a workload.
#[derive(Debug, Clone)]
pub enum Op {
    /// A write batch (a single put, delete or merge is a batch of one).
    Write {
        /// The batch.
        entries: Vec<Entry>,
        /// Whether it asks for `sync`.
        sync: bool,
    },
    /// `Db::flush`.
    Flush,
    /// `Db::compact_range` over everything.
    Compact,
    /// Close the database and open it again.
    Reopen,
}

/// Generates `n` random operations for `cfg`. Every value written is unique, so a value that
/// was never written, or one that should have been overwritten, cannot go unnoticed.
pub fn generate(rng: &mut StdRng, cfg: &Config, n: usize) -> Vec<Op> {
    let mut uid = 0u64;
    let mut ops = Vec::with_capacity(n);
    for _ in 0..n {
        let roll = rng.gen_range(0..100);
        let op = match roll {
            0..=3 => Op::Flush,
            4..=5 => Op::Compact,
            6..=8 => Op::Reopen,
            _ => {
                let count = if rng.gen_bool(0.25) {
                    rng.gen_range(2..=6)
                } else {
                    1
                };
                let entries = (0..count)
                    .map(|_| {
                        uid += 1;
                        random_entry(rng, cfg, uid)
                    })
                    .collect();
                Op::Write {
                    entries,
                    sync: rng.gen_bool(0.2),
                }
            }
        };
        ops.push(op);
    }
    ops
}

fn random_entry(rng: &mut StdRng, cfg: &Config, uid: u64) -> Entry {
    let k = rng.gen_range(0..cfg.keys);
    // Under u64add, counters ("c" keys) only ever hold 8-byte values.
    let counter = cfg.merge == MergeKind::U64Add && k % 2 == 0;
    let key = format!("{}{k:03}", if counter { "c" } else { "s" }).into_bytes();
    let roll = rng.gen_range(0..100);
    if roll < 12 {
        return Entry::Delete(key);
    }
    let merge_allowed = counter || cfg.merge == MergeKind::StringAppend;
    if roll < 40 && merge_allowed {
        let operand = match cfg.merge {
            MergeKind::U64Add => rng.gen_range(1u64..1000).to_le_bytes().to_vec(),
            MergeKind::StringAppend => format!("m{uid}").into_bytes(),
        };
        return Entry::Merge(key, operand);
    }
    let value = if counter {
        (uid << 20 | rng.gen_range(0..1u64 << 20))
            .to_le_bytes()
            .to_vec()
    } else {
        let pad = if rng.gen_bool(0.05) {
            rng.gen_range(1000..3000)
        } else {
            rng.gen_range(0..120)
        };
        let mut v = format!("v{uid}.").into_bytes();
        v.extend(std::iter::repeat_n(b'a' + (uid % 26) as u8, pad));
        v
    };
    Entry::Put(key, value)
}

/// Builds the engine's batch for `entries`.
pub fn batch_of(entries: &[Entry]) -> WriteBatch {
    let mut b = WriteBatch::new();
    for e in entries {
        match e {
            Entry::Put(k, v) => b.put(k, v),
            Entry::Delete(k) => b.delete(k),
            Entry::Merge(k, v) => b.merge(k, v),
        }
    }
    b
}

/// Reads every key and value of `db` with an iterator.
pub fn read_state(db: &Db) -> Result<State, Error> {
    let mut state = State::new();
    let mut it = db.iter(ReadOptions::default());
    it.seek_to_first();
    while it.valid() {
        state.insert(it.key().to_vec(), it.value().to_vec());
        it.next();
    }
    it.status()?;
    Ok(state)
}

/// Checks point reads of a few keys against an iterator's view.
pub fn spot_check_gets(db: &Db, state: &State, keys: &[Vec<u8>]) -> Result<(), String> {
    for k in keys {
        match db.get(k) {
            Ok(v) if v.as_ref() == state.get(k) => {}
            Ok(v) => {
                return Err(format!(
                    "get({}) = {:?} but the iterator shows {:?}",
                    String::from_utf8_lossy(k),
                    v.map(|v| v.len()),
                    state.get(k).map(Vec::len)
                ))
            }
            Err(e) => return Err(format!("get failed: {e}")),
        }
    }
    Ok(())
}

/// Applies a workload to a database on a [`FaultFs`], recording what happened.
pub struct Runner {
    /// The settings.
    pub cfg: Config,
    /// The filesystem.
    pub fs: FaultFs,
    /// The database directory.
    pub dir: PathBuf,
    /// The open database, if any.
    pub db: Option<Db>,
    /// Every write issued.
    pub history: History,
    /// Set once a write, flush or compaction failed; cleared by a reopen.
    pub poisoned: bool,
    /// Writes acknowledged while `poisoned` (the contract says none).
    pub acked_after_poison: u64,
    /// Operations that failed, with their errors.
    pub failures: Vec<String>,
    /// Check the state after every successful open against the history.
    pub check_opens: bool,
    /// Opens whose state broke the contract.
    pub open_violations: Vec<String>,
}

impl Runner {
    /// A runner for a new database on `fs` (not opened yet).
    pub fn new(cfg: Config, fs: FaultFs) -> Runner {
        Runner {
            history: History::new(cfg.merge),
            cfg,
            fs,
            dir: PathBuf::from(DIR),
            db: None,
            poisoned: false,
            acked_after_poison: 0,
            failures: Vec::new(),
            check_opens: false,
            open_violations: Vec::new(),
        }
    }

    /// Opens the database; an acknowledged open makes every earlier write durable.
    pub fn open(&mut self) -> Result<(), Error> {
        self.db = None;
        let options = self.cfg.options(Arc::new(self.fs.clone()));
        match Db::open(Path::new(&self.dir), options) {
            Ok(db) => {
                if self.check_opens {
                    // Nothing crashed: every acknowledged write must be there.
                    let bounds = self.history.bounds(u64::MAX, true);
                    match read_state(&db) {
                        Ok(state) => {
                            if let crate::oracle::Verdict::Violation(why) =
                                self.history.check(&state, &bounds)
                            {
                                self.open_violations.push(why);
                            }
                        }
                        // An injected I/O error may fail the read; reporting it is right.
                        Err(Error::Io { .. }) => {}
                        Err(e) => self.open_violations.push(format!("read after open: {e}")),
                    }
                }
                self.db = Some(db);
                self.poisoned = false;
                self.history.sync_point(self.fs.calls());
                Ok(())
            }
            Err(e) => {
                self.failures.push(format!("open: {e}"));
                Err(e)
            }
        }
    }

    /// Applies one operation. Failures are recorded, not returned: the workload goes on, and
    /// the contract says what later operations may do.
    pub fn step(&mut self, op: &Op) {
        if self.db.is_none() && !matches!(op, Op::Reopen) && self.open().is_err() {
            return;
        }
        match op {
            Op::Write { entries, sync } => {
                let Some(db) = self.db.as_ref() else { return };
                let index = self.history.issue(entries.clone(), *sync, self.fs.calls());
                let options = WriteOptions {
                    sync: *sync,
                    ..WriteOptions::default()
                };
                // A single put goes through `put_opt` (which writes a large value to its blob
                // file without a batch); everything else as a batch.
                let result = match entries.as_slice() {
                    [Entry::Put(k, v)] => db.put_opt(k, v, &options),
                    _ => db.write_opt(batch_of(entries), &options),
                };
                if matches!(result, Err(Error::Poisoned(_))) {
                    self.history.refuse(index, self.fs.calls());
                } else {
                    self.history
                        .complete(index, result.is_ok(), self.fs.calls());
                }
                match result {
                    Ok(()) if self.poisoned => self.acked_after_poison += 1,
                    Ok(()) => {}
                    Err(e) => {
                        self.poisoned = true;
                        self.failures.push(format!("write: {e}"));
                    }
                }
            }
            Op::Flush | Op::Compact => {
                let Some(db) = self.db.as_ref() else { return };
                let result = match op {
                    Op::Flush => db.flush(),
                    _ => db.compact_range(None, None),
                };
                match result {
                    Ok(()) if !self.poisoned => self.history.sync_point(self.fs.calls()),
                    Ok(()) => {}
                    Err(e) => {
                        self.poisoned = true;
                        self.failures.push(format!("flush/compact: {e}"));
                    }
                }
            }
            Op::Reopen => {
                self.db = None;
                let _ = self.open();
            }
        }
    }

    /// Runs every operation of `ops`, stopping early once the filesystem has crashed.
    pub fn run(&mut self, ops: &[Op]) {
        for op in ops {
            if self.fs.is_crashed() {
                break;
            }
            self.step(op);
        }
    }
}
