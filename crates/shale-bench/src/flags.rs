//! The command line, in db_bench's syntax and meanings.
//!
//! Flags are `--name=value` with db_bench's underscored names. Booleans take db_bench's
//! `--flag=1`/`--flag=0` as well as `true`/`false`, and a bare `--flag` means true. Sizes
//! whose db_bench default is "the engine's own" (`--write_buffer_size`, `--block_size`,
//! `--max_file_size`, `--subcompactions`, `--max_bytes_for_level_base`,
//! `--level0_file_num_compaction_trigger` and `--max_write_buffer_number` at 0, `--bloom_bits`
//! at -1, `--compression=default`) leave each engine at its default. [`Flags`] is what clap
//! parses; [`Settings`] is the validated run.

use std::path::PathBuf;

use clap::{ArgAction, Parser};

use crate::bench::Benchmark;
use crate::engines::{CompressionChoice, EngineConfig, EngineKind};
use crate::error::{Error, Result};
use crate::keys::KeyFormat;

/// db_bench's default benchmark list (LevelDB's, without the `acquireload` micro-benchmark
/// that measures the C++ atomics rather than a database).
pub const DEFAULT_BENCHMARKS: &str = "fillseq,fillsync,fillrandom,overwrite,readrandom,\
readrandom,readseq,readreverse,compact,readrandom,readseq,readreverse,fill100K,crc32c,\
snappycomp,snappyuncomp";

/// Values per series of the influx workload when `--series` is absent: InfluxDB's largest
/// run wrote 100 million values over 500,000 series.
pub const INFLUX_VALUES_PER_SERIES: u64 = 200;

fn parse_bool(s: &str) -> std::result::Result<bool, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        other => Err(format!("'{other}' is not a boolean; use 1/0 or true/false")),
    }
}

fn parse_ratio(s: &str) -> std::result::Result<f64, String> {
    let r: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a number"))?;
    if r > 0.0 && r <= 1.0 {
        Ok(r)
    } else {
        Err(format!("{r} is outside (0, 1]"))
    }
}

/// `--max_write_buffer_number`: 0 (each engine's default) or at least 2. One memtable would
/// stop every write while it flushes; shale refuses it, and RocksDB quietly raises it to 2.
fn parse_write_buffer_number(s: &str) -> std::result::Result<u32, String> {
    match s.trim().parse::<u32>() {
        Ok(1) => Err("must be 0 (each engine's default) or at least 2".to_string()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

fn parse_compression(s: &str) -> std::result::Result<CompressionChoice, String> {
    CompressionChoice::parse(s).map_err(|e| e.to_string())
}

fn parse_merge_operator(s: &str) -> std::result::Result<String, String> {
    match s.trim() {
        "uint64add" => Ok("uint64add".to_string()),
        other => Err(format!(
            "unknown merge operator '{other}'; supported: uint64add"
        )),
    }
}

/// The raw command line.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "shale-bench",
    version,
    rename_all = "snake_case",
    about = "db_bench-compatible benchmark of shale against LevelDB, RocksDB, LMDB and SQLite",
    after_help = "Benchmarks: fillseq fillrandom fillsync overwrite fillbatch fillrandbatch \
fill100K deleteseq deleterandom readseq readreverse readrandom readmissing readhot seekrandom \
readwhilewriting compact updaterandom mergerandom crc32c snappycomp snappyuncomp stats influx"
)]
pub struct Flags {
    /// Comma-separated benchmarks to run, in order.
    #[arg(long, default_value = DEFAULT_BENCHMARKS)]
    pub benchmarks: String,
    /// Number of key/value pairs.
    #[arg(long, default_value_t = 1_000_000)]
    pub num: u64,
    /// Number of reads (default: --num).
    #[arg(long)]
    pub reads: Option<u64>,
    /// Concurrent client threads.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub threads: u32,
    /// Bytes per key.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub key_size: u32,
    /// Bytes per value.
    #[arg(long, default_value_t = 100)]
    pub value_size: u32,
    /// Fraction of its size a value compresses to.
    #[arg(long, default_value_t = 0.5, value_parser = parse_ratio)]
    pub compression_ratio: f64,
    /// Memtable bytes (0: each engine's default).
    #[arg(long, default_value_t = 0)]
    pub write_buffer_size: u64,
    /// Cache bytes given to every engine that has a cache.
    #[arg(long, default_value_t = 8 << 20)]
    pub cache_size: u64,
    /// Table block bytes (0: each engine's default).
    #[arg(long, default_value_t = 0)]
    pub block_size: u64,
    /// Bloom filter bits per key (-1: each engine's default).
    #[arg(long, default_value_t = -1, allow_negative_numbers = true,
          value_parser = clap::value_parser!(i32).range(-1..=64))]
    pub bloom_bits: i32,
    /// Block compression: default, none, snappy, lz4, zstd.
    #[arg(long, default_value = "default", value_parser = parse_compression)]
    pub compression: CompressionChoice,
    /// Target table file bytes (0: each engine's default).
    #[arg(long, default_value_t = 0)]
    pub max_file_size: u64,
    /// Most parts one compaction is split into, run by threads at once (0: each engine's
    /// default; shale's and RocksDB's is 1).
    #[arg(long, default_value_t = 0)]
    pub subcompactions: u32,
    /// Target bytes of level 1 (0: each engine's default; LevelDB's is fixed at 10 MiB).
    #[arg(long, default_value_t = 0)]
    pub max_bytes_for_level_base: u64,
    /// Level-0 files that start a compaction (0: each engine's default; LevelDB's is fixed
    /// at 4).
    #[arg(long, default_value_t = 0)]
    pub level0_file_num_compaction_trigger: u32,
    /// Memtables a database may hold at once, the one taking writes and those waiting to be
    /// flushed (0: each engine's default; shale's and RocksDB's is 2, LevelDB's is fixed at 2;
    /// 1 is refused).
    #[arg(long, default_value_t = 0, value_parser = parse_write_buffer_number)]
    pub max_write_buffer_number: u32,
    /// Database directory (default: a fresh temporary directory, removed afterwards).
    #[arg(long)]
    pub db: Option<PathBuf>,
    /// Reuse the database in --db instead of starting empty.
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true,
          default_value = "false", default_missing_value = "true", value_parser = parse_bool)]
    pub use_existing_db: bool,
    /// Every write waits for the disk.
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true,
          default_value = "false", default_missing_value = "true", value_parser = parse_bool)]
    pub sync: bool,
    /// Skip the write-ahead log where the engine can.
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true,
          default_value = "false", default_missing_value = "true", value_parser = parse_bool)]
    pub disable_wal: bool,
    /// Print latency percentiles after each benchmark.
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true,
          default_value = "false", default_missing_value = "true", value_parser = parse_bool)]
    pub histogram: bool,
    /// Print the engine's statistics after each benchmark.
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true,
          default_value = "false", default_missing_value = "true", value_parser = parse_bool)]
    pub stats: bool,
    /// Merge operator for mergerandom: uint64add.
    #[arg(long, value_parser = parse_merge_operator)]
    pub merge_operator: Option<String>,
    /// Seed of every random choice (key order, values, reads).
    #[arg(long, default_value_t = 301)]
    pub seed: u64,
    /// The engine: shale, leveldb, rocksdb, rocksdb-tuned, lmdb, sqlite.
    #[arg(long, conflicts_with = "engines")]
    pub engine: Option<String>,
    /// Several engines, run in turn, then compared.
    #[arg(long)]
    pub engines: Option<String>,
    /// Run every engine's suite this many times, reversing the engine order each round, and
    /// report each figure's median: on a host whose speed drifts, one round's ratios mislead.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub repeat: u32,
    /// Write every figure as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write an HTML report with bar charts to this file.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Series ids of the influx workload (default: num/200).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub series: Option<u64>,
    /// Run each engine in a process of its own (this program, run again) and step the engines
    /// benchmark by benchmark, the idle ones stopped, so that the figures a ratio compares are
    /// taken seconds apart rather than a whole suite apart.
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true,
          default_value = "false", default_missing_value = "true", value_parser = parse_bool)]
    pub lockstep: bool,
    /// Internal to --lockstep: run as the child process of this engine.
    #[arg(long, hide = true, requires = "lockstep_child_dir")]
    pub lockstep_child: Option<String>,
    /// Internal to --lockstep: the child's database directory.
    #[arg(long, hide = true, requires = "lockstep_child")]
    pub lockstep_child_dir: Option<PathBuf>,
}

/// A validated run.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The parsed flags, as given.
    pub flags: Flags,
    /// Benchmarks in order.
    pub benchmarks: Vec<Benchmark>,
    /// Engines in order.
    pub engines: Vec<EngineKind>,
    /// Key formatting.
    pub keys: KeyFormat,
    /// Reads per read benchmark.
    pub reads: u64,
    /// Series of the influx workload.
    pub series: u64,
}

impl Settings {
    /// Parses and validates a command line (the first item is the program name).
    pub fn from_args<I, T>(args: I) -> std::result::Result<Settings, SettingsError>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let flags = Flags::try_parse_from(args).map_err(SettingsError::Clap)?;
        Settings::validate(flags).map_err(SettingsError::Invalid)
    }

    /// Checks what clap cannot: benchmark and engine names, sizes that fit together, and
    /// that the chosen engines are compiled in.
    pub fn validate(flags: Flags) -> Result<Settings> {
        if flags.num == 0 {
            return Err(Error::Usage("--num must be at least 1".to_string()));
        }
        let benchmarks = flags
            .benchmarks
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(Benchmark::parse)
            .collect::<Result<Vec<_>>>()?;
        let engine_names: Vec<&str> = match (&flags.engine, &flags.engines) {
            (Some(one), None) => vec![one.as_str()],
            (None, Some(many)) => many
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .collect(),
            (None, None) => vec!["shale"],
            (Some(_), Some(_)) => {
                return Err(Error::Usage(
                    "give --engine or --engines, not both".to_string(),
                ))
            }
        };
        let mut engines = Vec::new();
        for name in engine_names {
            let kind = EngineKind::parse(name)?;
            if engines.contains(&kind) {
                return Err(Error::Usage(format!("engine '{kind}' is listed twice")));
            }
            engines.push(kind);
        }
        if engines.is_empty() {
            return Err(Error::Usage("--engines lists no engine".to_string()));
        }
        if flags.use_existing_db && flags.db.is_none() {
            return Err(Error::Usage(
                "--use_existing_db needs --db: the default database is a fresh temporary \
                 directory"
                    .to_string(),
            ));
        }
        // Without a WAL a synced write has nothing to sync: shale would report synced writes
        // that never touched the disk beside engines that sync theirs (and RocksDB refuses).
        if flags.disable_wal
            && (flags.sync || benchmarks.contains(&crate::bench::Benchmark::FillSync))
        {
            return Err(Error::Usage(
                "--disable_wal cannot be combined with --sync or fillsync: a write without a \
                 log has nothing to sync"
                    .to_string(),
            ));
        }
        let keys = KeyFormat::new(flags.key_size as usize, flags.num)?;
        // Last, so that mistakes in the flags are reported before a missing feature.
        for kind in &engines {
            kind.check_available()?;
        }
        let reads = flags.reads.unwrap_or(flags.num);
        let series = flags
            .series
            .unwrap_or((flags.num / INFLUX_VALUES_PER_SERIES).max(1));
        Ok(Settings {
            flags,
            benchmarks,
            engines,
            keys,
            reads,
            series,
        })
    }

    /// The engine configuration for a database directory.
    pub fn engine_config(&self, path: PathBuf) -> EngineConfig {
        let f = &self.flags;
        let nonzero = |v: u64| (v > 0).then_some(v);
        EngineConfig {
            path,
            write_buffer_size: nonzero(f.write_buffer_size).map(|v| v as usize),
            cache_size: f.cache_size as usize,
            block_size: nonzero(f.block_size).map(|v| v as usize),
            bloom_bits: (f.bloom_bits >= 0).then_some(f.bloom_bits as u32),
            compression: f.compression,
            max_file_size: nonzero(f.max_file_size),
            subcompactions: nonzero(u64::from(f.subcompactions)).map(|v| v as usize),
            max_bytes_for_level_base: nonzero(f.max_bytes_for_level_base),
            level0_file_num_compaction_trigger: nonzero(u64::from(
                f.level0_file_num_compaction_trigger,
            ))
            .map(|v| v as usize),
            max_write_buffer_number: nonzero(u64::from(f.max_write_buffer_number))
                .map(|v| v as usize),
            sync: f.sync,
            disable_wal: f.disable_wal,
            merge_uint64add: f.merge_operator.is_some(),
        }
    }
}

/// Why a command line was refused.
#[derive(Debug)]
pub enum SettingsError {
    /// clap's own error (unknown flag, bad value, --help, --version).
    Clap(clap::Error),
    /// A check beyond clap's.
    Invalid(Error),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> std::result::Result<Settings, SettingsError> {
        let mut all = vec!["shale-bench"];
        all.extend_from_slice(args);
        Settings::from_args(all)
    }

    fn parse_flags(args: &[&str]) -> std::result::Result<Flags, clap::Error> {
        let mut all = vec!["shale-bench"];
        all.extend_from_slice(args);
        Flags::try_parse_from(all)
    }

    fn message(err: SettingsError) -> String {
        match err {
            SettingsError::Clap(e) => e.to_string(),
            SettingsError::Invalid(e) => e.to_string(),
        }
    }

    #[test]
    fn db_bench_syntax_and_defaults() {
        let f = parse_flags(&[]).expect("defaults");
        assert_eq!(f.num, 1_000_000);
        assert_eq!(f.key_size, 16);
        assert_eq!(f.value_size, 100);
        assert_eq!(f.compression_ratio, 0.5);
        assert_eq!(f.threads, 1);
        assert!(!f.histogram && !f.sync && !f.use_existing_db);
        assert_eq!(f.compression, CompressionChoice::Default);

        let f = parse_flags(&[
            "--benchmarks=fillseq,readrandom",
            "--num=1000",
            "--reads=50",
            "--threads=4",
            "--key_size=20",
            "--value_size=400",
            "--compression_ratio=0.25",
            "--write_buffer_size=4194304",
            "--cache_size=1048576",
            "--block_size=65536",
            "--bloom_bits=10",
            "--compression=none",
            "--max_file_size=2097152",
            "--max_bytes_for_level_base=10485760",
            "--level0_file_num_compaction_trigger=8",
            "--max_write_buffer_number=3",
            "--db=/tmp/x",
            "--use_existing_db=1",
            "--sync=0",
            "--disable_wal=true",
            "--histogram",
            "--stats=1",
            "--merge_operator=uint64add",
            "--seed=7",
            "--engine=leveldb",
            "--json=out.json",
            "--report",
            "r.html",
            "--series=10",
        ])
        .expect("all flags");
        assert_eq!(f.benchmarks, "fillseq,readrandom");
        assert_eq!((f.num, f.reads, f.threads), (1000, Some(50), 4));
        assert_eq!((f.key_size, f.value_size), (20, 400));
        assert_eq!(f.compression_ratio, 0.25);
        assert_eq!(
            (f.write_buffer_size, f.cache_size, f.block_size),
            (4194304, 1048576, 65536)
        );
        assert_eq!((f.bloom_bits, f.max_file_size), (10, 2097152));
        assert_eq!(
            (
                f.max_bytes_for_level_base,
                f.level0_file_num_compaction_trigger
            ),
            (10485760, 8)
        );
        assert_eq!(f.max_write_buffer_number, 3);
        assert_eq!(f.compression, CompressionChoice::None);
        assert!(f.use_existing_db && !f.sync && f.disable_wal && f.histogram && f.stats);
        assert_eq!(f.merge_operator.as_deref(), Some("uint64add"));
        assert_eq!((f.seed, f.series), (7, Some(10)));
        assert_eq!(f.engine.as_deref(), Some("leveldb"));
        assert_eq!(f.report, Some(PathBuf::from("r.html")));
        let f = parse_flags(&["--bloom_bits=-1"]).expect("negative sentinel");
        assert_eq!(f.bloom_bits, -1);
    }

    #[test]
    fn bad_flags_and_values_are_clear_errors() {
        let e = parse_flags(&["--nmu=5"]).expect_err("unknown flag");
        assert!(e.to_string().contains("--nmu"), "{e}");
        let e = parse_flags(&["--num=lots"]).expect_err("bad number");
        assert!(e.to_string().contains("lots"), "{e}");
        let e = parse_flags(&["--num=-5"]).expect_err("negative");
        assert!(e.to_string().contains("--num"), "{e}");
        let e = parse_flags(&["--histogram=maybe"]).expect_err("bad bool");
        assert!(e.to_string().contains("not a boolean"), "{e}");
        let e = parse_flags(&["--compression_ratio=1.5"]).expect_err("ratio");
        assert!(e.to_string().contains("outside (0, 1]"), "{e}");
        let e = parse_flags(&["--compression=brotli"]).expect_err("codec");
        assert!(e.to_string().contains("brotli"), "{e}");
        let e = parse_flags(&["--merge_operator=max"]).expect_err("operator");
        assert!(e.to_string().contains("uint64add"), "{e}");
        let e = parse_flags(&["--threads=0"]).expect_err("threads");
        assert!(e.to_string().contains("--threads"), "{e}");
        let e = parse_flags(&["--engine=lmdb", "--engines=lmdb,sqlite"]).expect_err("both");
        assert!(e.to_string().contains("cannot be used with"), "{e}");
    }

    #[test]
    fn validation_names_the_problem() {
        let e = message(
            parse(&["--benchmarks=fillseq,fillfoo", "--engine=leveldb"]).expect_err("bench"),
        );
        assert!(e.contains("unknown benchmark 'fillfoo'"), "{e}");
        let e = message(parse(&["--engine=berkeleydb"]).expect_err("engine"));
        assert!(e.contains("unknown engine 'berkeleydb'"), "{e}");
        let e = message(parse(&["--num=0", "--engine=leveldb"]).expect_err("num"));
        assert!(e.contains("--num"), "{e}");
        let e = message(parse(&["--use_existing_db=1", "--engine=sqlite"]).expect_err("db"));
        assert!(e.contains("--use_existing_db needs --db"), "{e}");
        let e =
            message(parse(&["--key_size=2", "--num=1000", "--engine=sqlite"]).expect_err("keys"));
        assert!(e.contains("--key_size=2"), "{e}");
        for args in [
            ["--disable_wal=1", "--sync=1", "--benchmarks=fillrandom"],
            [
                "--disable_wal=1",
                "--sync=0",
                "--benchmarks=fillseq,fillsync",
            ],
        ] {
            let e = message(parse(&args).expect_err("unsyncable"));
            assert!(
                e.contains("--disable_wal cannot be combined"),
                "{args:?}: {e}"
            );
        }
        parse(&["--disable_wal=1", "--benchmarks=fillseq"]).expect("no sync asked for");
        let e = message(parse(&["--engines=sqlite,sqlite"]).expect_err("twice"));
        assert!(
            e.contains("twice") || e.contains("not in this build"),
            "{e}"
        );
    }

    #[test]
    fn shale_is_the_default_engine_and_reports_when_missing() {
        let result = parse(&["--num=10"]);
        if cfg!(feature = "shale-engine") {
            assert_eq!(result.expect("ok").engines, vec![EngineKind::Shale]);
        } else {
            let e = message(result.expect_err("feature off"));
            assert!(e.contains("shale-engine"), "{e}");
        }
    }

    #[cfg(feature = "baselines")]
    #[test]
    fn settings_map_to_engine_config() {
        let s = parse(&[
            "--engines=leveldb, rocksdb",
            "--num=100",
            "--bloom_bits=10",
            "--block_size=0",
            "--merge_operator=uint64add",
        ])
        .expect("valid");
        assert_eq!(s.engines, vec![EngineKind::LevelDb, EngineKind::RocksDb]);
        assert_eq!(s.reads, 100);
        assert_eq!(s.series, 1);
        let c = s.engine_config(PathBuf::from("/tmp/db"));
        assert_eq!(c.bloom_bits, Some(10));
        assert_eq!(c.block_size, None);
        assert_eq!(c.write_buffer_size, None);
        assert_eq!(c.cache_size, 8 << 20);
        assert!(c.merge_uint64add);
        // 0, the default, leaves each engine's own level sizing.
        assert_eq!(c.max_bytes_for_level_base, None);
        assert_eq!(c.level0_file_num_compaction_trigger, None);
        assert_eq!(c.max_write_buffer_number, None);
        let s = parse(&[
            "--engine=rocksdb",
            "--max_bytes_for_level_base=10485760",
            "--level0_file_num_compaction_trigger=8",
            "--max_write_buffer_number=3",
        ])
        .expect("valid");
        let c = s.engine_config(PathBuf::from("/tmp/db"));
        assert_eq!(c.max_bytes_for_level_base, Some(10 << 20));
        assert_eq!(c.level0_file_num_compaction_trigger, Some(8));
        assert_eq!(c.max_write_buffer_number, Some(3));
        // One memtable is refused at parse time, naming the flag.
        let err = parse_flags(&["--max_write_buffer_number=1"]).expect_err("one memtable");
        assert!(err.to_string().contains("max_write_buffer_number"), "{err}");
    }
}
