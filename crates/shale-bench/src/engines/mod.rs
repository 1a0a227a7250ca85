//! The storage engines under test, behind one small trait.
//!
//! [`Engine`] is the least a db_bench workload needs: point writes, reads and deletes, atomic
//! batches, merges where the engine has them, ordered scans in both directions from an
//! optional start key, a full compaction, and a statistics dump. Each adapter maps these onto
//! its engine's native calls and nothing more, so the benchmark measures the engine and not
//! the adapter; configuration follows each engine's own benchmark reports (see
//! `docs/benchmarks.md`).
//!
//! Thread-safety: every engine is `Send + Sync`; benchmarks call it from several client
//! threads at once. Engines that serialize internally (SQLite behind one connection, LMDB's
//! single writer) do so inside the adapter.
//!
//! Database directories: the driver owns the directory, creates it, marks it with
//! [`MARKER_FILE`] and wipes it between fresh-database benchmarks; an adapter only creates
//! its own files inside.

use std::fmt;
use std::path::PathBuf;

use crate::error::{Error, Result};

#[cfg(feature = "baselines")]
mod leveldb;
#[cfg(feature = "baselines")]
mod lmdb;
#[cfg(feature = "baselines")]
mod rocksdb;
#[cfg(feature = "shale-engine")]
mod shale;
#[cfg(feature = "baselines")]
mod sqlite;

/// A file the driver writes into every database directory it creates, so that it only ever
/// wipes directories it made itself.
pub const MARKER_FILE: &str = "SHALE_BENCH_DB";

/// Which engine to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum EngineKind {
    /// This project's engine.
    Shale,
    /// LevelDB from Debian's libleveldb.
    LevelDb,
    /// RocksDB from Debian's librocksdb, at its defaults (plus INFO logging).
    RocksDb,
    /// RocksDB tuned as its own read-modify-write benchmark report tunes it.
    RocksDbTuned,
    /// LMDB from Debian's liblmdb.
    Lmdb,
    /// SQLite from Debian's libsqlite3.
    Sqlite,
}

impl EngineKind {
    /// Every engine, in the order comparisons list them.
    pub const ALL: [EngineKind; 6] = [
        EngineKind::Shale,
        EngineKind::LevelDb,
        EngineKind::RocksDb,
        EngineKind::RocksDbTuned,
        EngineKind::Lmdb,
        EngineKind::Sqlite,
    ];

    /// The name used on the command line and in output.
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Shale => "shale",
            EngineKind::LevelDb => "leveldb",
            EngineKind::RocksDb => "rocksdb",
            EngineKind::RocksDbTuned => "rocksdb-tuned",
            EngineKind::Lmdb => "lmdb",
            EngineKind::Sqlite => "sqlite",
        }
    }

    /// Parses a command-line name.
    pub fn parse(name: &str) -> Result<EngineKind> {
        EngineKind::ALL
            .into_iter()
            .find(|k| k.name() == name.trim().to_ascii_lowercase())
            .ok_or_else(|| {
                let known: Vec<&str> = EngineKind::ALL.iter().map(|k| k.name()).collect();
                Error::Usage(format!(
                    "unknown engine '{name}'; known engines: {}",
                    known.join(", ")
                ))
            })
    }

    /// Fails with a clear message when this build does not include the engine.
    pub fn check_available(self) -> Result<()> {
        match self {
            EngineKind::Shale if !cfg!(feature = "shale-engine") => Err(Error::Usage(
                "engine 'shale' is not in this build: the shale adapter sits behind the cargo \
                 feature `shale-engine`, which stays off until the engine's Db lands; rebuild \
                 with `--features shale-engine`, or pick a baseline with --engine"
                    .to_string(),
            )),
            EngineKind::LevelDb
            | EngineKind::RocksDb
            | EngineKind::RocksDbTuned
            | EngineKind::Lmdb
            | EngineKind::Sqlite
                if !cfg!(feature = "baselines") =>
            {
                Err(Error::Usage(format!(
                    "engine '{}' is not in this build: baselines sit behind the cargo feature \
                     `baselines`; run scripts/install-baselines.sh, then build with \
                     `--features baselines`",
                    self.name()
                )))
            }
            _ => Ok(()),
        }
    }
}

impl fmt::Display for EngineKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Block compression requested on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CompressionChoice {
    /// Each engine's own default (LevelDB and RocksDB: snappy; shale: its default).
    Default,
    /// No compression.
    None,
    /// Snappy.
    Snappy,
    /// LZ4.
    Lz4,
    /// Zstandard.
    Zstd,
}

impl CompressionChoice {
    /// Parses `--compression`: default, none, snappy, lz4, zstd.
    pub fn parse(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "default" => Ok(CompressionChoice::Default),
            "none" | "no" | "off" | "0" | "false" => Ok(CompressionChoice::None),
            "snappy" | "1" | "true" => Ok(CompressionChoice::Snappy),
            "lz4" => Ok(CompressionChoice::Lz4),
            "zstd" => Ok(CompressionChoice::Zstd),
            other => Err(Error::Usage(format!(
                "invalid --compression '{other}': expected default, none, snappy, lz4 or zstd"
            ))),
        }
    }
}

/// How an engine is opened: the command line's tuning flags. `None` means "the engine's own
/// default", as db_bench's `-1`/`0` sentinels do.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// The database directory (exists, may be empty).
    pub path: PathBuf,
    /// Memtable size in bytes (`--write_buffer_size`).
    pub write_buffer_size: Option<usize>,
    /// Block or page cache budget in bytes (`--cache_size`), given to every engine that has
    /// a cache of its own.
    pub cache_size: usize,
    /// Table block size (`--block_size`).
    pub block_size: Option<usize>,
    /// Bloom filter bits per key (`--bloom_bits`).
    pub bloom_bits: Option<u32>,
    /// Block compression (`--compression`).
    pub compression: CompressionChoice,
    /// Target table file size (`--max_file_size`).
    pub max_file_size: Option<u64>,
    /// Most parts one compaction is split into (`--subcompactions`).
    pub subcompactions: Option<usize>,
    /// Target bytes of level 1 (`--max_bytes_for_level_base`).
    pub max_bytes_for_level_base: Option<u64>,
    /// Level-0 files that start a compaction (`--level0_file_num_compaction_trigger`).
    pub level0_file_num_compaction_trigger: Option<usize>,
    /// Memtables held at once, active and waiting to be flushed (`--max_write_buffer_number`).
    pub max_write_buffer_number: Option<usize>,
    /// Writes wait for the disk (`--sync`): opens the engine in its synchronous mode.
    pub sync: bool,
    /// Skip the write-ahead log where the engine can (`--disable_wal`).
    pub disable_wal: bool,
    /// Install the uint64add merge operator (`--merge_operator=uint64add`).
    pub merge_uint64add: bool,
}

/// Whether one write must reach the disk before it returns. `fillsync` asks for it on every
/// write, `--sync` on all of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WriteMode {
    /// Wait for the disk.
    pub sync: bool,
}

/// Scan order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Ascending keys; a start key means "the first key at or after it".
    Forward,
    /// Descending keys; a start key means "the last key at or before it".
    Reverse,
}

/// What an engine tells about itself for the header, the JSON and the report.
#[derive(Debug, Clone, serde::Serialize)]
pub struct EngineInfo {
    /// Command-line name.
    pub name: &'static str,
    /// The library's version.
    pub version: String,
    /// The shared library actually loaded, when it is one.
    pub library: Option<String>,
    /// A warning worth printing in the header (e.g. assertions on in Debian's build).
    pub warning: Option<String>,
    /// The settings the adapter applied, as `name=value` lines.
    pub settings: Vec<String>,
}

/// [`EngineInfo`] as read back from JSON (a `--lockstep` child's record), its name owned
/// until it is matched to the engine's `'static` one.
#[derive(serde::Deserialize)]
struct EngineInfoRecord {
    name: String,
    version: String,
    library: Option<String>,
    warning: Option<String>,
    settings: Vec<String>,
}

// By hand: a derived impl would borrow `name` from the input, for `'static`.
impl<'de> serde::Deserialize<'de> for EngineInfo {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let r = EngineInfoRecord::deserialize(d)?;
        let kind = EngineKind::parse(&r.name).map_err(serde::de::Error::custom)?;
        Ok(EngineInfo {
            name: kind.name(),
            version: r.version,
            library: r.library,
            warning: r.warning,
            settings: r.settings,
        })
    }
}

/// One write inside a [`Batch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchEntry<'a> {
    /// Set key to value.
    Put(&'a [u8], &'a [u8]),
    /// Remove key.
    Delete(&'a [u8]),
    /// Merge an operand into key.
    Merge(&'a [u8], &'a [u8]),
}

#[derive(Debug, Clone, Copy)]
enum OpKind {
    Put,
    Delete,
    Merge,
}

#[derive(Debug, Clone, Copy)]
struct BatchOp {
    kind: OpKind,
    key_end: usize,
    value_end: usize,
}

/// Receives the entries of a batch being built ([`Engine::write_with`]).
pub trait BatchSink {
    /// Adds a put.
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()>;
    /// Adds a delete.
    fn delete(&mut self, key: &[u8]) -> Result<()>;
    /// Adds a merge.
    fn merge(&mut self, key: &[u8], operand: &[u8]) -> Result<()>;
}

/// The size of a batch about to be built ([`Engine::write_with`]); an estimate, never a limit.
#[derive(Debug, Clone, Copy, Default)]
pub struct BatchHint {
    /// Entries the batch will hold.
    pub entries: usize,
    /// Bytes of their keys and values together.
    pub payload_bytes: usize,
}

/// Writes applied atomically, collected in one buffer that [`Batch::clear`] keeps for reuse.
/// [`Engine::write`] replays one into the engine's own batch; the benchmarks themselves build
/// the engine's batch directly ([`Engine::write_with`]).
#[derive(Debug, Default, Clone)]
pub struct Batch {
    data: Vec<u8>,
    ops: Vec<BatchOp>,
}

impl Batch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    fn push(&mut self, kind: OpKind, key: &[u8], value: &[u8]) {
        self.data.extend_from_slice(key);
        let key_end = self.data.len();
        self.data.extend_from_slice(value);
        self.ops.push(BatchOp {
            kind,
            key_end,
            value_end: self.data.len(),
        });
    }

    /// Adds a put.
    pub fn put(&mut self, key: &[u8], value: &[u8]) {
        self.push(OpKind::Put, key, value);
    }

    /// Adds a delete.
    pub fn delete(&mut self, key: &[u8]) {
        self.push(OpKind::Delete, key, &[]);
    }

    /// Adds a merge.
    pub fn merge(&mut self, key: &[u8], operand: &[u8]) {
        self.push(OpKind::Merge, key, operand);
    }

    /// Empties the batch, keeping its memory.
    pub fn clear(&mut self) {
        self.data.clear();
        self.ops.clear();
    }

    /// Bytes of the keys and values in the batch.
    pub fn payload_bytes(&self) -> usize {
        self.data.len()
    }

    /// Entries in the batch.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// True when the batch holds no entries.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Adds every entry, in order, to `sink`.
    pub fn replay(&self, sink: &mut dyn BatchSink) -> Result<()> {
        for entry in self.iter() {
            match entry {
                BatchEntry::Put(k, v) => sink.put(k, v)?,
                BatchEntry::Delete(k) => sink.delete(k)?,
                BatchEntry::Merge(k, v) => sink.merge(k, v)?,
            }
        }
        Ok(())
    }

    /// The entries in the order they were added.
    pub fn iter(&self) -> impl Iterator<Item = BatchEntry<'_>> {
        let mut start = 0;
        self.ops.iter().map(move |op| {
            let key = self.data.get(start..op.key_end).unwrap_or(&[]);
            let value = self.data.get(op.key_end..op.value_end).unwrap_or(&[]);
            start = op.value_end;
            match op.kind {
                OpKind::Put => BatchEntry::Put(key, value),
                OpKind::Delete => BatchEntry::Delete(key),
                OpKind::Merge => BatchEntry::Merge(key, value),
            }
        })
    }
}

/// Called for each entry of a scan with its key and value; returns `false` to stop.
pub type Visitor<'a> = dyn FnMut(&[u8], &[u8]) -> bool + 'a;

/// A storage engine as the benchmarks see it.
pub trait Engine: Send + Sync {
    /// Name, version, loaded library and applied settings.
    fn info(&self) -> &EngineInfo;

    /// Sets `key` to `value`.
    fn put(&self, key: &[u8], value: &[u8], mode: WriteMode) -> Result<()>;

    /// Reads `key` into `out` (replacing its contents); returns whether the key exists.
    fn get(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool>;

    /// Removes `key` (absent keys are not an error).
    fn delete(&self, key: &[u8], mode: WriteMode) -> Result<()>;

    /// Applies, atomically, every entry `fill` adds to the sink it is given: the engine's own
    /// batch (or transaction), filled as the entries are made, as each engine's db_bench fills
    /// a `WriteBatch` (LMDB's and SQLite's: a transaction) with no batch of the harness's in
    /// between. `fill` is called exactly once. `hint` sizes the batch for engines that can
    /// reserve room. If `fill` fails, its error is returned and nothing of the batch is
    /// applied; `fill` must pass on the errors of the sink's calls (a sink may refuse an entry,
    /// as engines without merges refuse a merge), or what it added before may be applied.
    fn write_with(
        &self,
        hint: BatchHint,
        fill: &mut dyn FnMut(&mut dyn BatchSink) -> Result<()>,
        mode: WriteMode,
    ) -> Result<()>;

    /// Applies every entry of `batch` atomically ([`Engine::write_with`]).
    fn write(&self, batch: &Batch, mode: WriteMode) -> Result<()> {
        let hint = BatchHint {
            entries: batch.len(),
            payload_bytes: batch.payload_bytes(),
        };
        self.write_with(hint, &mut |sink| batch.replay(sink), mode)
    }

    /// True when [`Engine::merge`] works (a merge operator is installed and the engine has
    /// merges at all).
    fn supports_merge(&self) -> bool {
        false
    }

    /// Merges `operand` into `key` with the configured operator.
    fn merge(&self, _key: &[u8], _operand: &[u8], _mode: WriteMode) -> Result<()> {
        Err(no_merges(self.info().name))
    }

    /// Visits entries in `direction` from `start` (or from the first/last key) until the
    /// visitor returns `false` or the keys run out.
    fn scan(
        &self,
        direction: Direction,
        start: Option<&[u8]>,
        visit: &mut Visitor<'_>,
    ) -> Result<()>;

    /// Compacts the whole key range (B-trees: whatever reclaims space, or nothing).
    fn compact(&self) -> Result<()>;

    /// The engine's own statistics, as text.
    fn stats(&self) -> Result<String>;
}

/// Opens an engine of `kind` on `config.path`.
pub fn open(kind: EngineKind, config: &EngineConfig) -> Result<Box<dyn Engine>> {
    kind.check_available()?;
    match kind {
        #[cfg(feature = "shale-engine")]
        EngineKind::Shale => Ok(Box::new(shale::ShaleEngine::open(config)?)),
        #[cfg(feature = "baselines")]
        EngineKind::LevelDb => Ok(Box::new(leveldb::LevelDb::open(config)?)),
        #[cfg(feature = "baselines")]
        EngineKind::RocksDb => Ok(Box::new(rocksdb::RocksDb::open(config, false)?)),
        #[cfg(feature = "baselines")]
        EngineKind::RocksDbTuned => Ok(Box::new(rocksdb::RocksDb::open(config, true)?)),
        #[cfg(feature = "baselines")]
        EngineKind::Lmdb => Ok(Box::new(lmdb::Lmdb::open(config)?)),
        #[cfg(feature = "baselines")]
        EngineKind::Sqlite => Ok(Box::new(sqlite::Sqlite::open(config)?)),
        #[allow(unreachable_patterns)]
        _ => {
            // Only reached in builds without the engine, where the config goes unused.
            let _ = config;
            Err(Error::Usage(format!(
                "engine '{kind}' is not in this build"
            )))
        }
    }
}

/// The shared library that defines `symbol`, resolved through symlinks, so the header can
/// say which build of a baseline ran (Debian's, with assertions on, or a rebuilt one).
#[cfg(feature = "baselines")]
pub(crate) fn library_of(symbol: *const libc::c_void) -> Option<PathBuf> {
    let mut info = libc::Dl_info {
        dli_fname: std::ptr::null(),
        dli_fbase: std::ptr::null_mut(),
        dli_sname: std::ptr::null(),
        dli_saddr: std::ptr::null_mut(),
    };
    // SAFETY: dladdr only reads the process's link map and writes into `info`, which lives on
    // this stack frame; `symbol` is the address of a function in a loaded library.
    let found = unsafe { libc::dladdr(symbol, &mut info) };
    if found == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dladdr set dli_fname to a NUL-terminated path owned by the dynamic loader,
    // valid while the library stays loaded (for the life of the process here).
    let name = unsafe { std::ffi::CStr::from_ptr(info.dli_fname) };
    let path = PathBuf::from(name.to_string_lossy().into_owned());
    Some(std::fs::canonicalize(&path).unwrap_or(path))
}

/// The version in a shared library's file name (`librocksdb.so.7.8.3` gives `7.8.3`).
#[cfg(any(feature = "baselines", test))]
pub(crate) fn version_from_library_name(path: &std::path::Path) -> Option<String> {
    let name = path.file_name()?.to_str()?;
    let (_, version) = name.split_once(".so.")?;
    Some(version.to_string())
}

/// Debian builds LevelDB and RocksDB without `-DNDEBUG` (see BASELINES.md); a library under
/// the system directory is taken to be that build.
#[cfg(feature = "baselines")]
pub(crate) fn debian_assertions_warning(library: Option<&std::path::Path>) -> Option<String> {
    let path = library?;
    path.starts_with("/usr/lib").then(|| {
        format!(
            "{} is Debian's build, compiled with assertions on (no -DNDEBUG); \
             scripts/build-ndebug-baselines.sh builds a fair one",
            path.display()
        )
    })
}

/// The error of a merge on `engine`, which has no merges at all.
pub(crate) fn no_merges(engine: &'static str) -> Error {
    Error::Unsupported {
        engine,
        what: "merge",
    }
}

/// The error of a merge on `engine` opened without `--merge_operator=uint64add`.
#[cfg(any(feature = "baselines", feature = "shale-engine"))]
pub(crate) fn no_merge_operator(engine: &'static str) -> Error {
    Error::Unsupported {
        engine,
        what: "merge without --merge_operator=uint64add",
    }
}

/// Settings lines shared by the adapters: `name=value`.
#[cfg(any(feature = "baselines", feature = "shale-engine"))]
pub(crate) fn setting(name: &str, value: impl fmt::Display) -> String {
    format!("{name}={value}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn batch_round_trips_entries_in_order() {
        let mut b = Batch::new();
        assert!(b.is_empty());
        b.put(b"k1", b"v1");
        b.delete(b"k2");
        b.merge(b"k3", b"\x01");
        b.put(b"", b"");
        let got: Vec<BatchEntry<'_>> = b.iter().collect();
        assert_eq!(
            got,
            vec![
                BatchEntry::Put(b"k1", b"v1"),
                BatchEntry::Delete(b"k2"),
                BatchEntry::Merge(b"k3", b"\x01"),
                BatchEntry::Put(b"", b""),
            ]
        );
        b.clear();
        assert_eq!(b.len(), 0);
        b.put(b"a", b"b");
        assert_eq!(
            b.iter().collect::<Vec<_>>(),
            vec![BatchEntry::Put(b"a", b"b")]
        );
    }

    #[test]
    fn engine_names_parse_and_unknown_is_clear() {
        for k in EngineKind::ALL {
            assert_eq!(EngineKind::parse(k.name()).expect("known"), k);
        }
        let err = EngineKind::parse("berkeleydb").expect_err("unknown");
        assert!(
            err.to_string().contains("known engines: shale, leveldb"),
            "{err}"
        );
    }

    #[test]
    fn shale_without_its_feature_is_a_clear_error() {
        let result = EngineKind::Shale.check_available();
        if cfg!(feature = "shale-engine") {
            assert!(result.is_ok());
        } else {
            let err = result.expect_err("feature off");
            assert!(err.to_string().contains("shale-engine"), "{err}");
        }
    }

    #[test]
    fn library_versions_come_from_file_names() {
        assert_eq!(
            version_from_library_name(Path::new("/usr/lib/x86_64-linux-gnu/librocksdb.so.7.8.3")),
            Some("7.8.3".to_string())
        );
        assert_eq!(
            version_from_library_name(Path::new("/x/librocksdb.so")),
            None
        );
    }
}
