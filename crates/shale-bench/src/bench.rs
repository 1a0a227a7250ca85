//! The benchmarks and the driver that runs a suite on one engine.
//!
//! Each benchmark keeps db_bench's name and meaning (see `docs/benchmarks.md` for the list).
//! Differences from db_bench, all deliberate:
//! - Random writes follow a seeded permutation of all keys, so each key is written once
//!   (Symas' fix); random reads draw keys uniformly with replacement, as db_bench does.
//! - With `--threads=T` the operations of a benchmark are split among the T clients (db_bench
//!   gives each client the full count), so every key is still written once and run time does
//!   not grow with T. Figures are aggregates over all clients.
//! - `crc32c`, `snappycomp` and `snappyuncomp` process an amount of data proportional to
//!   `--num` (500 and 1024 bytes per entry: db_bench's fixed 500 MB and 1 GB at the default
//!   `--num`), so small smoke runs stay small.
//! - With `--histogram`, a batch write is one sample (its whole latency).
//!
//! Thread-safety: client threads share only the engine (`Sync`) and read-only inputs.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Barrier;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::engines::{
    self, BatchHint, BatchSink, Direction, Engine, EngineKind, WriteMode, MARKER_FILE,
};
use crate::error::{Error, Result};
use crate::flags::Settings;
use crate::keys::{KeyFormat, Permutation};
use crate::progress::Progress;
use crate::record::{BenchRecord, EngineRecord, Status};
use crate::stats::{note_line, result_line, BenchStats, ThreadStats};
use crate::sysinfo;
use crate::values::ValuePool;

/// Entries per batch of `fillbatch`, `fillrandbatch` and the influx workload.
pub const BATCH_ENTRIES: u64 = 1000;
/// Value size of `fill100K`.
pub const LARGE_VALUE_BYTES: usize = 100_000;
/// `fillsync` and `fill100K` write `--num` divided by this.
pub const SMALL_FILL_DIVISOR: u64 = 1000;
/// Bytes per entry `crc32c` checksums in total (db_bench: 500 MB at a million entries).
pub const CRC_BYTES_PER_ENTRY: u64 = 500;
/// Bytes per entry the snappy benchmarks process (db_bench: 1 GB at a million entries).
pub const SNAPPY_BYTES_PER_ENTRY: u64 = 1024;
/// Input block of the checksum and compression benchmarks (db_bench: 4 KiB).
pub const CODEC_BLOCK_BYTES: usize = 4096;
/// Counter width of updaterandom and mergerandom (a little-endian u64).
pub const COUNTER_BYTES: usize = 8;

/// A db_bench benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Benchmark {
    /// Write `num` keys in order, fresh database.
    FillSeq,
    /// Write `num` keys in random order, fresh database.
    FillRandom,
    /// Write `num/1000` keys in random order, each synced, fresh database; the raw
    /// `fdatasync` rate is measured just before and after it (outside its timer) and its share
    /// of that floor reported.
    FillSync,
    /// Rewrite `num` existing keys in random order.
    Overwrite,
    /// Write `num` keys in order, 1000 per batch, fresh database.
    FillBatch,
    /// Write `num` keys in random order, 1000 per batch, fresh database.
    FillRandBatch,
    /// Write `num/1000` 100,000-byte values in random order, fresh database.
    Fill100K,
    /// Delete `num` keys in order.
    DeleteSeq,
    /// Delete `num` keys in random order.
    DeleteRandom,
    /// Scan forward over `reads` entries.
    ReadSeq,
    /// Scan backward over `reads` entries.
    ReadReverse,
    /// Read `reads` random keys.
    ReadRandom,
    /// Read `reads` keys that do not exist.
    ReadMissing,
    /// Read `reads` random keys among the first 1%.
    ReadHot,
    /// Seek to `reads` random keys.
    SeekRandom,
    /// Random reads while one more thread writes random keys.
    ReadWhileWriting,
    /// Compact the whole key range.
    Compact,
    /// Read a counter, add one, write it back, `reads` times.
    UpdateRandom,
    /// Merge +1 into a random counter, `num` times (uint64add).
    MergeRandom,
    /// CRC32C of 4 KiB blocks.
    Crc32c,
    /// Snappy compression of 4 KiB blocks.
    SnappyComp,
    /// Snappy decompression of 4 KiB blocks.
    SnappyUncomp,
    /// The disk's own limit for synchronous writes: `num/1000` appends of one entry's bytes to
    /// a plain file, each followed by `fdatasync`. No engine is involved; fillsync is compared
    /// with it.
    Fdatasync,
    /// Print the engine's statistics.
    Stats,
    /// InfluxDB's time-series workload.
    Influx,
}

impl Benchmark {
    /// Every benchmark with its name.
    pub const ALL: [(Benchmark, &'static str); 25] = [
        (Benchmark::FillSeq, "fillseq"),
        (Benchmark::FillRandom, "fillrandom"),
        (Benchmark::FillSync, "fillsync"),
        (Benchmark::Overwrite, "overwrite"),
        (Benchmark::FillBatch, "fillbatch"),
        (Benchmark::FillRandBatch, "fillrandbatch"),
        (Benchmark::Fill100K, "fill100K"),
        (Benchmark::DeleteSeq, "deleteseq"),
        (Benchmark::DeleteRandom, "deleterandom"),
        (Benchmark::ReadSeq, "readseq"),
        (Benchmark::ReadReverse, "readreverse"),
        (Benchmark::ReadRandom, "readrandom"),
        (Benchmark::ReadMissing, "readmissing"),
        (Benchmark::ReadHot, "readhot"),
        (Benchmark::SeekRandom, "seekrandom"),
        (Benchmark::ReadWhileWriting, "readwhilewriting"),
        (Benchmark::Compact, "compact"),
        (Benchmark::UpdateRandom, "updaterandom"),
        (Benchmark::MergeRandom, "mergerandom"),
        (Benchmark::Crc32c, "crc32c"),
        (Benchmark::SnappyComp, "snappycomp"),
        (Benchmark::SnappyUncomp, "snappyuncomp"),
        (Benchmark::Fdatasync, "fdatasync"),
        (Benchmark::Stats, "stats"),
        (Benchmark::Influx, "influx"),
    ];

    /// Parses a benchmark name (db_bench's spelling; case-insensitive).
    pub fn parse(name: &str) -> Result<Benchmark> {
        Benchmark::ALL
            .iter()
            .find(|(_, n)| n.eq_ignore_ascii_case(name))
            .map(|(b, _)| *b)
            .ok_or_else(|| {
                let known: Vec<&str> = Benchmark::ALL.iter().map(|(_, n)| *n).collect();
                Error::Usage(format!(
                    "unknown benchmark '{name}' in --benchmarks; known: {}",
                    known.join(", ")
                ))
            })
    }

    /// The name printed on result lines.
    pub fn name(self) -> &'static str {
        Benchmark::ALL
            .iter()
            .find(|(b, _)| *b == self)
            .map_or("?", |(_, n)| n)
    }

    /// Starts from an empty database, as db_bench's fill benchmarks do.
    pub fn fresh_db(self) -> bool {
        matches!(
            self,
            Benchmark::FillSeq
                | Benchmark::FillRandom
                | Benchmark::FillSync
                | Benchmark::FillBatch
                | Benchmark::FillRandBatch
                | Benchmark::Fill100K
                | Benchmark::Influx
        )
    }

    /// Changes the database, so its disk usage afterwards is recorded.
    pub fn writes(self) -> bool {
        self.fresh_db()
            || matches!(
                self,
                Benchmark::Overwrite
                    | Benchmark::DeleteSeq
                    | Benchmark::DeleteRandom
                    | Benchmark::ReadWhileWriting
                    | Benchmark::Compact
                    | Benchmark::UpdateRandom
                    | Benchmark::MergeRandom
            )
    }
}

/// What one benchmark produced before the driver adds disk and memory figures.
enum Outcome {
    Ran {
        stats: BenchStats,
        message: String,
    },
    /// A synced fill with the raw `fdatasync` rate measured around it
    /// ([`beside_sync_floor`]).
    RanBesideFloor {
        stats: BenchStats,
        message: String,
        floor_ops_per_sec: f64,
    },
    Note {
        status: Status,
        message: String,
    },
}

/// Inputs shared by a benchmark's client threads.
struct Ctx<'a> {
    settings: &'a Settings,
    engine: &'a dyn Engine,
    /// The engine's database directory.
    dir: &'a Path,
    keys: KeyFormat,
    /// Seed of this benchmark's random choices: the run's seed mixed with the benchmark's
    /// position, so repeated benchmarks differ but every run is reproducible.
    seed: u64,
    progress: Progress,
    /// The suite's value bytes; every client cuts its values from it with its own cursor.
    values: &'a ValuePool,
}

impl Ctx<'_> {
    fn threads(&self) -> usize {
        self.settings.flags.threads as usize
    }

    fn histogram(&self) -> bool {
        self.settings.flags.histogram
    }

    fn thread_seed(&self, tid: usize) -> u64 {
        self.seed
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .wrapping_add(tid as u64 + 1)
    }
}

/// The half-open share `[lo, hi)` of `total` operations that client `tid` of `threads` does.
pub fn share(total: u64, threads: usize, tid: usize) -> (u64, u64) {
    let t = threads.max(1) as u64;
    let id = tid as u64;
    (total * id / t, total * (id + 1) / t)
}

/// Runs `body` on `threads` client threads started together and merges their stats.
fn run_clients<F>(
    threads: usize,
    histogram: bool,
    progress: &Progress,
    body: F,
) -> Result<BenchStats>
where
    F: Fn(usize, &mut ThreadStats) -> Result<()> + Sync,
{
    run_prepared_clients(
        threads,
        histogram,
        progress,
        |_| (),
        |tid, (), st| body(tid, st),
    )
}

/// Like [`run_clients`], with an untimed `setup` per thread (e.g. building a value pool)
/// whose result the thread's `body` receives.
fn run_prepared_clients<S, P, F>(
    threads: usize,
    histogram: bool,
    progress: &Progress,
    setup: P,
    body: F,
) -> Result<BenchStats>
where
    P: Fn(usize) -> S + Sync,
    F: Fn(usize, S, &mut ThreadStats) -> Result<()> + Sync,
{
    let barrier = Barrier::new(threads);
    let outcomes: Vec<Result<ThreadStats>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|tid| {
                let (setup, body, barrier) = (&setup, &body, &barrier);
                let progress = progress.clone();
                scope.spawn(move || {
                    let mut stats = ThreadStats::new(histogram, progress);
                    let prepared = setup(tid);
                    barrier.wait();
                    stats.start();
                    let result = body(tid, prepared, &mut stats);
                    stats.stop();
                    result.map(|()| stats)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(Error::Usage(
                        "a benchmark client thread panicked".to_string(),
                    ))
                })
            })
            .collect()
    });
    progress.finish();
    let mut stats = Vec::with_capacity(outcomes.len());
    for outcome in outcomes {
        stats.push(outcome?);
    }
    Ok(BenchStats::merge(stats))
}

/// Key order of a write benchmark.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Order {
    Sequential,
    Random,
}

/// What a write benchmark writes.
#[derive(Clone, Copy)]
struct WriteSpec {
    order: Order,
    count: u64,
    value_size: usize,
    batch: u64,
    sync: bool,
    delete: bool,
}

fn ops_note(count: u64, num: u64) -> String {
    if count == num {
        String::new()
    } else {
        format!("({count} ops)")
    }
}

fn do_write(ctx: &Ctx<'_>, spec: WriteSpec) -> Result<Outcome> {
    let num = ctx.settings.flags.num;
    let order = match spec.order {
        Order::Random => Some(Permutation::new(num, ctx.seed)),
        Order::Sequential => None,
    };
    let key_of = |i: u64| -> u64 { order.as_ref().map_or(i, |p| p.get(i)) };
    let mode = WriteMode { sync: spec.sync };
    let setup = |tid| ctx.values.generator(ctx.thread_seed(tid));
    let stats = run_prepared_clients(
        ctx.threads(),
        ctx.histogram(),
        &ctx.progress,
        setup,
        |tid, mut values, st| {
            let (lo, hi) = share(spec.count, ctx.threads(), tid);
            let mut key = Vec::with_capacity(ctx.keys.key_size());
            let mut i = lo;
            while i < hi {
                let end = (i + spec.batch).min(hi);
                if spec.batch == 1 {
                    ctx.keys.write(key_of(i), &mut key);
                    if spec.delete {
                        ctx.engine.delete(&key, mode)?;
                        st.add_bytes(key.len() as u64);
                    } else {
                        let value = values.generate(spec.value_size);
                        ctx.engine.put(&key, value, mode)?;
                        st.add_bytes((key.len() + value.len()) as u64);
                    }
                } else {
                    // Into the engine's own batch as the keys and values are made, as
                    // db_bench fills a `WriteBatch`.
                    let value_size = if spec.delete { 0 } else { spec.value_size };
                    let entries = (end - i) as usize;
                    let hint = BatchHint {
                        entries,
                        payload_bytes: entries * (ctx.keys.key_size() + value_size),
                    };
                    let mut bytes = 0u64;
                    let mut fill = |sink: &mut dyn BatchSink| -> Result<()> {
                        for j in i..end {
                            ctx.keys.write(key_of(j), &mut key);
                            if spec.delete {
                                sink.delete(&key)?;
                                bytes += key.len() as u64;
                            } else {
                                let value = values.generate(spec.value_size);
                                sink.put(&key, value)?;
                                bytes += (key.len() + value.len()) as u64;
                            }
                        }
                        Ok(())
                    };
                    ctx.engine.write_with(hint, &mut fill, mode)?;
                    st.add_bytes(bytes);
                }
                st.finished_ops(end - i);
                i = end;
            }
            Ok(())
        },
    )?;
    Ok(Outcome::Ran {
        message: ops_note(stats.ops, num),
        stats,
    })
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum ReadKind {
    Random,
    Missing,
    Hot,
    Seek,
}

fn do_read(ctx: &Ctx<'_>, kind: ReadKind) -> Result<Outcome> {
    let num = ctx.settings.flags.num;
    let reads = ctx.settings.reads;
    let range = if kind == ReadKind::Hot {
        num.div_ceil(100)
    } else {
        num
    };
    let stats = run_clients(ctx.threads(), ctx.histogram(), &ctx.progress, |tid, st| {
        read_loop(
            ctx,
            kind,
            range,
            share(reads, ctx.threads(), tid),
            tid,
            st,
            None,
        )
    })?;
    Ok(Outcome::Ran {
        message: format!("({} of {} found)", stats.found, stats.ops),
        stats,
    })
}

/// The loop of the random-read benchmarks. `stop`, when given, ends the loop early once it
/// is set (never used by plain reads).
fn read_loop(
    ctx: &Ctx<'_>,
    kind: ReadKind,
    range: u64,
    (lo, hi): (u64, u64),
    tid: usize,
    st: &mut ThreadStats,
    stop: Option<&AtomicUsize>,
) -> Result<()> {
    let mut rng = SmallRng::seed_from_u64(ctx.thread_seed(tid));
    let mut key = Vec::with_capacity(ctx.keys.key_size() + 1);
    let mut value = Vec::new();
    for _ in lo..hi {
        if stop.is_some_and(|s| s.load(Ordering::Relaxed) > 0) {
            break;
        }
        let k = rng.gen_range(0..range.max(1));
        let found = match kind {
            ReadKind::Missing => {
                ctx.keys.write_missing(k, &mut key);
                ctx.engine.get(&key, &mut value)?
            }
            ReadKind::Random | ReadKind::Hot => {
                ctx.keys.write(k, &mut key);
                ctx.engine.get(&key, &mut value)?
            }
            ReadKind::Seek => {
                ctx.keys.write(k, &mut key);
                let mut hit = false;
                ctx.engine
                    .scan(Direction::Forward, Some(&key), &mut |k, _| {
                        hit = k == key.as_slice();
                        false
                    })?;
                hit
            }
        };
        if found {
            st.found += 1;
        }
        st.finished_ops(1);
    }
    Ok(())
}

fn do_scan(ctx: &Ctx<'_>, direction: Direction) -> Result<Outcome> {
    let reads = ctx.settings.reads;
    let stats = run_clients(ctx.threads(), ctx.histogram(), &ctx.progress, |tid, st| {
        let (lo, hi) = share(reads, ctx.threads(), tid);
        let want = hi - lo;
        if want == 0 {
            return Ok(());
        }
        let mut seen = 0u64;
        ctx.engine.scan(direction, None, &mut |k, v| {
            st.add_bytes((k.len() + v.len()) as u64);
            st.finished_ops(1);
            seen += 1;
            seen < want
        })
    })?;
    Ok(Outcome::Ran {
        message: ops_note(stats.ops, ctx.settings.flags.num),
        stats,
    })
}

fn do_read_while_writing(ctx: &Ctx<'_>) -> Result<Outcome> {
    let readers = ctx.threads();
    let num = ctx.settings.flags.num;
    let reads = ctx.settings.reads;
    let readers_done = AtomicUsize::new(0);
    let writer_failed = AtomicUsize::new(0);
    let value_size = ctx.settings.flags.value_size as usize;
    /// Counts a reader as finished however it leaves, so the writer never spins forever.
    struct Done<'a>(&'a AtomicUsize);
    impl Drop for Done<'_> {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::Release);
        }
    }
    // Only the writer needs a value cursor; readers get none.
    let setup = |tid| (tid == readers).then(|| ctx.values.generator(ctx.thread_seed(tid)));
    let stats = run_prepared_clients(
        readers + 1,
        ctx.histogram(),
        &ctx.progress,
        setup,
        |tid, values, st| {
            if let Some(mut values) = values {
                st.exclude_from_timing();
                let mut rng = SmallRng::seed_from_u64(ctx.thread_seed(tid));
                let mut key = Vec::with_capacity(ctx.keys.key_size());
                while readers_done.load(Ordering::Acquire) < readers {
                    ctx.keys.write(rng.gen_range(0..num), &mut key);
                    if let Err(e) =
                        ctx.engine
                            .put(&key, values.generate(value_size), WriteMode::default())
                    {
                        writer_failed.store(1, Ordering::Relaxed);
                        return Err(e);
                    }
                    st.background_writes += 1;
                }
                return Ok(());
            }
            let _done = Done(&readers_done);
            read_loop(
                ctx,
                ReadKind::Random,
                num,
                share(reads, readers, tid),
                tid,
                st,
                Some(&writer_failed),
            )
        },
    )?;
    Ok(Outcome::Ran {
        message: format!(
            "({} of {} found; {} writes)",
            stats.found, stats.ops, stats.background_writes
        ),
        stats,
    })
}

fn do_compact(ctx: &Ctx<'_>) -> Result<Outcome> {
    let stats = run_clients(1, ctx.histogram(), &ctx.progress, |_, st| {
        ctx.engine.compact()?;
        st.finished_ops(1);
        Ok(())
    })?;
    Ok(Outcome::Ran {
        stats,
        message: String::new(),
    })
}

fn do_update_random(ctx: &Ctx<'_>) -> Result<Outcome> {
    let num = ctx.settings.flags.num;
    let count = ctx.settings.reads;
    let stats = run_clients(ctx.threads(), ctx.histogram(), &ctx.progress, |tid, st| {
        let (lo, hi) = share(count, ctx.threads(), tid);
        let mut rng = SmallRng::seed_from_u64(ctx.thread_seed(tid));
        let mut key = Vec::with_capacity(ctx.keys.key_size());
        let mut value = Vec::new();
        for _ in lo..hi {
            ctx.keys.write(rng.gen_range(0..num), &mut key);
            let found = ctx.engine.get(&key, &mut value)?;
            // A value that is not a counter (left by a fill benchmark) counts as zero.
            let counter = match <[u8; COUNTER_BYTES]>::try_from(value.as_slice()) {
                Ok(bytes) if found => u64::from_le_bytes(bytes),
                _ => 0,
            };
            if found {
                st.found += 1;
            }
            ctx.engine.put(
                &key,
                &(counter.wrapping_add(1)).to_le_bytes(),
                WriteMode::default(),
            )?;
            st.add_bytes((key.len() + value.len() + COUNTER_BYTES) as u64);
            st.finished_ops(1);
        }
        Ok(())
    })?;
    Ok(Outcome::Ran {
        message: format!("( updates:{} found:{})", stats.ops, stats.found),
        stats,
    })
}

fn do_merge_random(ctx: &Ctx<'_>) -> Result<Outcome> {
    if ctx.settings.flags.merge_operator.is_none() {
        return Ok(Outcome::Note {
            status: Status::Skipped,
            message: "not run: needs --merge_operator=uint64add".to_string(),
        });
    }
    if !ctx.engine.supports_merge() {
        return Ok(Outcome::Note {
            status: Status::Unsupported,
            message: format!(
                "not supported ({} has no merge operator)",
                ctx.engine.info().name
            ),
        });
    }
    let num = ctx.settings.flags.num;
    let one = 1u64.to_le_bytes();
    let stats = run_clients(ctx.threads(), ctx.histogram(), &ctx.progress, |tid, st| {
        let (lo, hi) = share(num, ctx.threads(), tid);
        let mut rng = SmallRng::seed_from_u64(ctx.thread_seed(tid));
        let mut key = Vec::with_capacity(ctx.keys.key_size());
        for _ in lo..hi {
            ctx.keys.write(rng.gen_range(0..num), &mut key);
            ctx.engine.merge(&key, &one, WriteMode::default())?;
            st.add_bytes((key.len() + COUNTER_BYTES) as u64);
            st.finished_ops(1);
        }
        Ok(())
    })?;
    Ok(Outcome::Ran {
        message: format!("( updates:{})", stats.ops),
        stats,
    })
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Codec {
    Crc32c,
    Compress,
    Uncompress,
}

/// Writes `key_size + value_size` bytes at a time to a plain file beside the database and
/// waits for `fdatasync` after each write, as fillsync's engines must: the rate this disk
/// allows one synchronous writer. The file is written full of zeros and synced first, outside
/// the timed region, so each timed sync writes back data only: appending instead would also
/// commit the file's new size at every sync, a slower floor than an engine with a
/// preallocated log pays. Each client thread has its own file, removed afterwards.
fn do_fdatasync(ctx: &Ctx<'_>) -> Result<Outcome> {
    use std::io::Write as _;
    let total = (ctx.settings.flags.num / SMALL_FILL_DIVISOR).max(1);
    let record_len = ctx.settings.flags.key_size as usize + ctx.settings.flags.value_size as usize;
    let path_of = |tid: usize| ctx.dir.join(format!("shale-bench-fdatasync-{tid}.tmp"));
    let io = |op: &'static str, path: &std::path::Path| {
        let path = path.to_path_buf();
        move |e: std::io::Error| Error::io(op, &path, e)
    };
    let prepare = |tid: usize| -> Result<std::fs::File> {
        let (lo, hi) = share(total, ctx.threads(), tid);
        let path = path_of(tid);
        let mut file = std::fs::File::create(&path).map_err(io("create", &path))?;
        let zeros = vec![0u8; 64 << 10];
        let mut left = (hi - lo) as usize * record_len;
        while left > 0 {
            let n = left.min(zeros.len());
            file.write_all(&zeros[..n]).map_err(io("write", &path))?;
            left -= n;
        }
        file.sync_all().map_err(io("fsync", &path))?;
        std::io::Seek::rewind(&mut file).map_err(io("seek", &path))?;
        Ok(file)
    };
    let stats = run_prepared_clients(
        ctx.threads(),
        ctx.histogram(),
        &ctx.progress,
        prepare,
        |tid, prepared, st| {
            let (lo, hi) = share(total, ctx.threads(), tid);
            let path = path_of(tid);
            let synced = || -> Result<()> {
                let mut file = prepared?;
                let mut values = ctx.values.generator(ctx.thread_seed(tid));
                for _ in lo..hi {
                    file.write_all(values.generate(record_len))
                        .map_err(io("write", &path))?;
                    file.sync_data().map_err(io("fdatasync", &path))?;
                    st.add_bytes(record_len as u64);
                    st.finished_ops(1);
                }
                Ok(())
            };
            let outcome = synced();
            // Removed whether or not the writes worked, so a failed round leaves nothing.
            let removed = std::fs::remove_file(&path);
            outcome?;
            removed.map_err(io("remove", &path))
        },
    )?;
    Ok(Outcome::Ran {
        stats,
        message: format!("({total} synced writes of {record_len} bytes into a preallocated file)"),
    })
}

/// Runs `fill` (fillsync) between two runs of [`do_fdatasync`]'s loop, same thread count and
/// sync count, so the disk's limit is measured beside the engine rather than minutes away in
/// the `fdatasync` row: this disk's sync latency drifts by a quarter from one minute to the
/// next, more than the gap being judged. The floor is the rate of the two runs' mean time
/// per sync; a drift within the fill cancels out when it is steady.
fn beside_sync_floor(ctx: &Ctx<'_>, fill: impl FnOnce() -> Result<Outcome>) -> Result<Outcome> {
    // The floor's syncs are not the benchmark's operations: no progress bar for them.
    let quiet = Ctx {
        progress: Progress::hidden(),
        ..*ctx
    };
    let seconds_per_sync = || match do_fdatasync(&quiet) {
        Ok(Outcome::Ran { stats, .. }) if stats.ops > 0 && stats.wall_seconds > 0.0 => {
            Ok(stats.wall_seconds / stats.ops as f64)
        }
        Ok(_) => Err("it produced no figures".to_string()),
        Err(e) => Err(e.to_string()),
    };
    let before = seconds_per_sync();
    let outcome = fill()?;
    let Outcome::Ran { stats, message } = outcome else {
        return Ok(outcome);
    };
    // A floor that could not be measured (a full disk, say) leaves the engine's figure as it
    // is, with the reason in its message.
    let floor = before.and_then(|b| seconds_per_sync().map(|a| 2.0 / (b + a)));
    let (note, floor_ops_per_sec) = match floor {
        Ok(floor) => (
            format!(
                "{:.0}% of {} raw syncs/s measured around it",
                stats.ops_per_sec() / floor * 100.0,
                crate::output::thousands(floor.round() as u64)
            ),
            Some(floor),
        ),
        Err(why) => (format!("no raw fdatasync floor: {why}"), None),
    };
    // `(1000 ops)` becomes `(1000 ops; 97% of ...)`.
    let message = match message.strip_suffix(')') {
        Some(open) if open.starts_with('(') => format!("{open}; {note})"),
        _ if message.is_empty() => format!("({note})"),
        _ => format!("{message} ({note})"),
    };
    Ok(match floor_ops_per_sec {
        Some(floor_ops_per_sec) => Outcome::RanBesideFloor {
            stats,
            message,
            floor_ops_per_sec,
        },
        None => Outcome::Ran { stats, message },
    })
}

fn do_codec(ctx: &Ctx<'_>, codec: Codec) -> Result<Outcome> {
    let num = ctx.settings.flags.num;
    let total = match codec {
        Codec::Crc32c => num * CRC_BYTES_PER_ENTRY,
        Codec::Compress | Codec::Uncompress => num * SNAPPY_BYTES_PER_ENTRY,
    };
    let block_len = CODEC_BLOCK_BYTES;
    let mut values = ctx.values.generator(ctx.seed);
    let input = values.generate(block_len).to_vec();
    let compressed = snap::raw::Encoder::new()
        .compress_vec(&input)
        .map_err(|e| Error::engine("snappy", "compress", e.to_string()))?;
    let produced = AtomicUsize::new(0);
    let stats = run_clients(ctx.threads(), ctx.histogram(), &ctx.progress, |tid, st| {
        let (lo, hi) = share(total, ctx.threads(), tid);
        let mut done = lo;
        let mut encoder = snap::raw::Encoder::new();
        let mut decoder = snap::raw::Decoder::new();
        let mut out = vec![0u8; snap::raw::max_compress_len(block_len).max(block_len)];
        let mut local_produced = 0usize;
        while done < hi {
            match codec {
                Codec::Crc32c => {
                    std::hint::black_box(crc_fast::crc32_iscsi(std::hint::black_box(&input)));
                }
                Codec::Compress => {
                    let n = encoder
                        .compress(std::hint::black_box(&input), &mut out)
                        .map_err(|e| Error::engine("snappy", "compress", e.to_string()))?;
                    local_produced += n;
                }
                Codec::Uncompress => {
                    let n = decoder
                        .decompress(std::hint::black_box(&compressed), &mut out)
                        .map_err(|e| Error::engine("snappy", "uncompress", e.to_string()))?;
                    std::hint::black_box(n);
                }
            }
            done += block_len as u64;
            st.add_bytes(block_len as u64);
            st.finished_ops(1);
        }
        produced.fetch_add(local_produced, Ordering::Relaxed);
        Ok(())
    })?;
    let message = match codec {
        Codec::Crc32c => "(4K per op)".to_string(),
        Codec::Compress => format!(
            "(output: {:.1}%)",
            produced.load(Ordering::Relaxed) as f64 * 100.0 / stats.bytes.max(1) as f64
        ),
        Codec::Uncompress => String::new(),
    };
    Ok(Outcome::Ran { stats, message })
}

/// Runs one benchmark (not `influx`, which has several steps) on an open engine.
fn run_one(ctx: &Ctx<'_>, bench: Benchmark) -> Result<Outcome> {
    let f = &ctx.settings.flags;
    let num = f.num;
    let value_size = f.value_size as usize;
    let write = |order, count, value_size, batch, sync, delete| {
        do_write(
            ctx,
            WriteSpec {
                order,
                count,
                value_size,
                batch,
                sync,
                delete,
            },
        )
    };
    match bench {
        Benchmark::FillSeq => write(Order::Sequential, num, value_size, 1, false, false),
        Benchmark::FillRandom | Benchmark::Overwrite => {
            write(Order::Random, num, value_size, 1, false, false)
        }
        Benchmark::FillSync => beside_sync_floor(ctx, || {
            write(
                Order::Random,
                (num / SMALL_FILL_DIVISOR).max(1),
                value_size,
                1,
                true,
                false,
            )
        }),
        Benchmark::FillBatch => write(
            Order::Sequential,
            num,
            value_size,
            BATCH_ENTRIES,
            false,
            false,
        ),
        Benchmark::FillRandBatch => {
            write(Order::Random, num, value_size, BATCH_ENTRIES, false, false)
        }
        Benchmark::Fill100K => write(
            Order::Random,
            (num / SMALL_FILL_DIVISOR).max(1),
            LARGE_VALUE_BYTES,
            1,
            false,
            false,
        ),
        Benchmark::DeleteSeq => write(Order::Sequential, num, 0, 1, false, true),
        Benchmark::DeleteRandom => write(Order::Random, num, 0, 1, false, true),
        Benchmark::ReadSeq => do_scan(ctx, Direction::Forward),
        Benchmark::ReadReverse => do_scan(ctx, Direction::Reverse),
        Benchmark::ReadRandom => do_read(ctx, ReadKind::Random),
        Benchmark::ReadMissing => do_read(ctx, ReadKind::Missing),
        Benchmark::ReadHot => do_read(ctx, ReadKind::Hot),
        Benchmark::SeekRandom => do_read(ctx, ReadKind::Seek),
        Benchmark::ReadWhileWriting => do_read_while_writing(ctx),
        Benchmark::Compact => do_compact(ctx),
        Benchmark::UpdateRandom => do_update_random(ctx),
        Benchmark::MergeRandom => do_merge_random(ctx),
        Benchmark::Crc32c => do_codec(ctx, Codec::Crc32c),
        Benchmark::SnappyComp => do_codec(ctx, Codec::Compress),
        Benchmark::SnappyUncomp => do_codec(ctx, Codec::Uncompress),
        Benchmark::Fdatasync => do_fdatasync(ctx),
        Benchmark::Stats => Ok(Outcome::Note {
            status: Status::Info,
            message: ctx.engine.stats()?,
        }),
        Benchmark::Influx => Err(Error::Internal(
            "influx runs through run_influx".to_string(),
        )),
    }
}

/// Operations a benchmark will do, for the progress bar.
fn expected_ops(settings: &Settings, bench: Benchmark) -> u64 {
    let num = settings.flags.num;
    match bench {
        Benchmark::FillSync | Benchmark::Fill100K | Benchmark::Fdatasync => {
            num / SMALL_FILL_DIVISOR
        }
        Benchmark::ReadSeq
        | Benchmark::ReadReverse
        | Benchmark::ReadRandom
        | Benchmark::ReadMissing
        | Benchmark::ReadHot
        | Benchmark::SeekRandom
        | Benchmark::ReadWhileWriting
        | Benchmark::UpdateRandom => settings.reads,
        Benchmark::Compact | Benchmark::Stats => 0,
        Benchmark::Crc32c => num * CRC_BYTES_PER_ENTRY / CODEC_BLOCK_BYTES as u64,
        Benchmark::SnappyComp | Benchmark::SnappyUncomp => {
            num * SNAPPY_BYTES_PER_ENTRY / CODEC_BLOCK_BYTES as u64
        }
        _ => num,
    }
}

/// Keys of the influx workload: series id, timestamp and sequence number as three big-endian
/// u64s (24 bytes), so a series' points are adjacent and in time order.
pub fn influx_key(i: u64, series: u64) -> [u8; 24] {
    let series = series.max(1);
    let mut key = [0u8; 24];
    let parts = [i % series, i / series, i];
    for (chunk, part) in key.chunks_exact_mut(8).zip(parts) {
        chunk.copy_from_slice(&part.to_be_bytes());
    }
    key
}

/// Value of the influx workload: like the protobuf `FieldValue` with an `int64` set that
/// InfluxDB stored, a field tag byte followed by the value as a varint.
pub fn influx_value(i: u64, out: &mut Vec<u8>) {
    out.clear();
    out.push(0x18);
    let mut v = i;
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Writes or deletes influx points `from..to` in batches of [`BATCH_ENTRIES`].
fn influx_batches(ctx: &Ctx<'_>, from: u64, to: u64, delete: bool) -> Result<BenchStats> {
    let series = ctx.settings.series;
    run_clients(1, ctx.histogram(), &ctx.progress, |_, st| {
        let mut value = Vec::new();
        let mut i = from;
        while i < to {
            let end = (i + BATCH_ENTRIES).min(to);
            let mut bytes = 0u64;
            let mut fill = |sink: &mut dyn BatchSink| -> Result<()> {
                for j in i..end {
                    let key = influx_key(j, series);
                    if delete {
                        sink.delete(&key)?;
                        bytes += key.len() as u64;
                    } else {
                        influx_value(j, &mut value);
                        sink.put(&key, &value)?;
                        bytes += (key.len() + value.len()) as u64;
                    }
                }
                Ok(())
            };
            // A 24-byte key, and a value of a tag byte and a varint of at most 10 bytes.
            let entries = (end - i) as usize;
            let hint = BatchHint {
                entries,
                payload_bytes: entries * if delete { 24 } else { 24 + 11 },
            };
            ctx.engine
                .write_with(hint, &mut fill, WriteMode::default())?;
            st.add_bytes(bytes);
            st.finished_ops(end - i);
            i = end;
        }
        Ok(())
    })
}

/// Scans every point in key order, checking each key against the previous one (the
/// comparison InfluxDB's range scans make to find where to stop).
fn influx_scan(ctx: &Ctx<'_>) -> Result<BenchStats> {
    run_clients(1, ctx.histogram(), &ctx.progress, |_, st| {
        let mut previous = [0u8; 24];
        let mut ordered = true;
        ctx.engine.scan(Direction::Forward, None, &mut |k, v| {
            ordered &= k >= previous.as_slice();
            if let Ok(key) = <[u8; 24]>::try_from(k) {
                previous = key;
            }
            st.add_bytes((k.len() + v.len()) as u64);
            st.finished_ops(1);
            true
        })?;
        if ordered {
            Ok(())
        } else {
            Err(Error::engine(
                ctx.engine.info().name,
                "scan",
                "keys out of order",
            ))
        }
    })
}

/// The influx workload's steps with their stats: write N, scan, delete N/2, compact, scan
/// the rest, write N/2 more.
fn run_influx(ctx: &Ctx<'_>, mut step_done: impl FnMut(&str, Outcome) -> Result<()>) -> Result<()> {
    let n = ctx.settings.flags.num;
    let half = n / 2;
    let ran = |stats: BenchStats, expected: u64| {
        let message = if stats.ops == expected {
            String::new()
        } else {
            format!("({} of {} entries)", stats.ops, expected)
        };
        Outcome::Ran { stats, message }
    };
    step_done("influx_write", ran(influx_batches(ctx, 0, n, false)?, n))?;
    step_done("influx_scan", ran(influx_scan(ctx)?, n))?;
    step_done(
        "influx_delete",
        ran(influx_batches(ctx, 0, half, true)?, half),
    )?;
    let compact = do_compact(ctx)?;
    step_done("influx_compact", compact)?;
    step_done("influx_rescan", ran(influx_scan(ctx)?, n - half))?;
    step_done(
        "influx_write2",
        ran(influx_batches(ctx, n, n + half, false)?, half),
    )?;
    Ok(())
}

/// Removes a database directory the tool made (or an empty one); refuses anything else so
/// that a mistyped `--db` never deletes someone's files.
pub fn wipe_dir(dir: &Path) -> Result<()> {
    let mut entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io("read_dir", dir, e)),
    };
    let is_empty = entries.next().is_none();
    if !is_empty && !dir.join(MARKER_FILE).exists() {
        return Err(Error::Usage(format!(
            "refusing to delete {}: it is not empty and was not made by shale-bench (no {} \
             file); pass an empty or new --db, or --use_existing_db=1",
            dir.display(),
            MARKER_FILE
        )));
    }
    std::fs::remove_dir_all(dir).map_err(|e| Error::io("remove_dir_all", dir, e))
}

/// Creates the directory (and its parents) and marks it as the tool's.
pub fn prepare_dir(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io("create_dir_all", dir, e))?;
    let marker = dir.join(MARKER_FILE);
    if !marker.exists() {
        std::fs::write(&marker, b"database directory made by shale-bench\n")
            .map_err(|e| Error::io("write", &marker, e))?;
    }
    Ok(())
}

/// What a suite calls back into while it runs.
pub struct SuiteHooks<'a> {
    /// Prints the header, once the engine has opened and described itself.
    pub header: &'a mut dyn FnMut(&mut dyn Write, &engines::EngineInfo) -> std::io::Result<()>,
    /// Runs before each benchmark and waits until it may start: a `--lockstep` child asks its
    /// parent (see [`crate::lockstep`]); a suite run in-process has nothing to wait for.
    pub gate: &'a mut dyn FnMut(&mut dyn Write) -> Result<()>,
}

/// Runs the whole suite on one engine in `dir`, printing each line to `out` as it finishes.
pub fn run_suite(
    settings: &Settings,
    kind: EngineKind,
    dir: &Path,
    out: &mut dyn Write,
    hooks: SuiteHooks<'_>,
) -> EngineRecord {
    let per_engine_peak = sysinfo::reset_peak_rss();
    // Built before the baseline sample: the harness's own buffers are not the engine's memory.
    let values = ValuePool::new(
        settings.flags.compression_ratio,
        largest_value(settings),
        settings.flags.seed,
    );
    let anon_before = sysinfo::anon_rss_bytes();
    let sampler = sysinfo::AnonPeakSampler::start(std::time::Duration::from_millis(5));
    let mut record = EngineRecord {
        info: engines::EngineInfo {
            name: kind.name(),
            version: String::new(),
            library: None,
            warning: None,
            settings: Vec::new(),
        },
        results: Vec::new(),
        peak_rss_bytes: None,
        peak_rss_per_engine: per_engine_peak,
        anon_rss_before_bytes: anon_before,
        peak_anon_rss_bytes: None,
        error: None,
    };
    if let Err(e) = suite_body(settings, kind, dir, &values, out, hooks, &mut record) {
        let line = note_line("error", &e.to_string());
        let _ = writeln!(out, "{line}");
        record.error = Some(e.to_string());
    }
    record.peak_rss_bytes = sysinfo::peak_rss_bytes();
    record.peak_anon_rss_bytes = sampler.map(sysinfo::AnonPeakSampler::finish);
    record
}

fn open_engine(
    settings: &Settings,
    kind: EngineKind,
    dir: &Path,
    fresh: bool,
) -> Result<Box<dyn Engine>> {
    if fresh {
        wipe_dir(dir)?;
    }
    prepare_dir(dir)?;
    engines::open(kind, &settings.engine_config(PathBuf::from(dir)))
}

/// The largest value any of the suite's benchmarks writes (or codes), which the value pool
/// must hold.
fn largest_value(settings: &Settings) -> usize {
    let f = &settings.flags;
    let mut largest = (f.key_size + f.value_size) as usize; // fdatasync's records
    largest = largest.max(CODEC_BLOCK_BYTES);
    if settings.benchmarks.contains(&Benchmark::Fill100K) {
        largest = largest.max(LARGE_VALUE_BYTES);
    }
    largest
}

fn suite_body(
    settings: &Settings,
    kind: EngineKind,
    dir: &Path,
    values: &ValuePool,
    out: &mut dyn Write,
    hooks: SuiteHooks<'_>,
    record: &mut EngineRecord,
) -> Result<()> {
    let io = |e: std::io::Error| Error::io("write", "<stdout>", e);
    let use_existing = settings.flags.use_existing_db;
    let mut engine = Some(open_engine(settings, kind, dir, !use_existing)?);
    if let Some(e) = engine.as_deref() {
        record.info = e.info().clone();
        (hooks.header)(out, e.info()).map_err(io)?;
    }
    for (position, &bench) in settings.benchmarks.iter().enumerate() {
        (hooks.gate)(out)?;
        let name = bench.name();
        if bench.fresh_db() {
            if use_existing {
                let line = note_line(name, "skipping (--use_existing_db is true)");
                writeln!(out, "{line}").map_err(io)?;
                record.results.push(BenchRecord::note(
                    name,
                    Status::Skipped,
                    "skipping (--use_existing_db is true)",
                    line,
                ));
                continue;
            }
            // Close before wiping: the engine must release its files and locks first.
            drop(engine.take());
            engine = Some(open_engine(settings, kind, dir, true)?);
        }
        let Some(db) = engine.as_deref() else {
            return Err(Error::engine(kind.name(), "open", "engine is not open"));
        };
        let ctx = Ctx {
            settings,
            engine: db,
            dir,
            keys: settings.keys,
            seed: settings
                .flags
                .seed
                .wrapping_add((position as u64).wrapping_mul(0x1_0000_0001)),
            progress: Progress::new(
                &format!("{} {}", kind.name(), name),
                expected_ops(settings, bench),
            ),
            values,
        };
        let mut emit = |step: &str, outcome: Outcome| -> Result<()> {
            let rec = finish_record(step, outcome, bench.writes().then_some(dir))?;
            writeln!(out, "{}", rec.line).map_err(io)?;
            if rec.status == Status::Info {
                write!(out, "{}", rec.message).map_err(io)?;
            }
            if let Some(h) = &rec.histogram {
                write!(out, "{}", h.render()).map_err(io)?;
            }
            if settings.flags.stats && rec.status == Status::Ok {
                write!(out, "{}", db.stats()?).map_err(io)?;
            }
            out.flush().map_err(io)?;
            record.results.push(rec);
            Ok(())
        };
        if bench == Benchmark::Influx {
            run_influx(&ctx, &mut emit)?;
        } else {
            let outcome = run_one(&ctx, bench)?;
            emit(name, outcome)?;
        }
    }
    drop(engine);
    Ok(())
}

/// Turns an outcome into its record and printed line, measuring disk usage of `dir` when
/// given and the peak memory so far.
fn finish_record(name: &str, outcome: Outcome, dir: Option<&Path>) -> Result<BenchRecord> {
    let (stats, message, floor) = match outcome {
        Outcome::Note { status, message } => {
            let line = if status == Status::Info {
                note_line(name, "")
            } else {
                note_line(name, &message)
            };
            return Ok(BenchRecord::note(name, status, message, line));
        }
        Outcome::Ran { stats, message } => (stats, message, None),
        Outcome::RanBesideFloor {
            stats,
            message,
            floor_ops_per_sec,
        } => (stats, message, Some(floor_ops_per_sec)),
    };
    let micros = stats.micros_per_op();
    let mb = stats.mb_per_sec();
    let disk = dir.map(sysinfo::disk_usage).transpose()?;
    Ok(BenchRecord {
        name: name.to_string(),
        status: Status::Ok,
        line: result_line(name, micros, mb, &message),
        message,
        ops: stats.ops,
        bytes: stats.bytes,
        micros_per_op: micros,
        ops_per_sec: stats.ops_per_sec(),
        mb_per_sec: mb,
        wall_seconds: stats.wall_seconds,
        disk_bytes: disk.map(|d| d.allocated),
        disk_apparent_bytes: disk.map(|d| d.apparent),
        peak_rss_bytes: sysinfo::peak_rss_bytes(),
        histogram: stats.histogram.as_ref().map(|h| h.summary()),
        round_ops_per_sec: Vec::new(),
        sync_floor_ops_per_sec: floor,
        round_sync_floor_ops_per_sec: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for (b, n) in Benchmark::ALL {
            assert_eq!(Benchmark::parse(n).expect("known"), b);
            assert_eq!(b.name(), n);
        }
        assert_eq!(
            Benchmark::parse("FILL100k").expect("any case"),
            Benchmark::Fill100K
        );
        let e = Benchmark::parse("acquireload").expect_err("not offered");
        assert!(e.to_string().contains("known: fillseq"), "{e}");
    }

    #[test]
    fn shares_cover_the_total_exactly() {
        for total in [0u64, 1, 7, 1000, 1001] {
            for threads in 1..=5 {
                let mut next = 0;
                for tid in 0..threads {
                    let (lo, hi) = share(total, threads, tid);
                    assert_eq!(lo, next);
                    assert!(hi >= lo);
                    next = hi;
                }
                assert_eq!(next, total);
            }
        }
    }

    #[test]
    fn influx_keys_are_series_time_sequence() {
        let k = influx_key(1234, 100);
        assert_eq!(&k[0..8], &34u64.to_be_bytes());
        assert_eq!(&k[8..16], &12u64.to_be_bytes());
        assert_eq!(&k[16..24], &1234u64.to_be_bytes());
        // A series' points sort by time.
        assert!(influx_key(34, 100) < influx_key(134, 100));
        let mut v = Vec::new();
        influx_value(300, &mut v);
        assert_eq!(v, vec![0x18, 0xAC, 0x02]);
    }

    #[test]
    fn wipe_refuses_foreign_directories() {
        let root = tempfile::tempdir().expect("tempdir");
        let foreign = root.path().join("foreign");
        std::fs::create_dir(&foreign).expect("mkdir");
        std::fs::write(foreign.join("precious.txt"), b"keep").expect("write");
        let e = wipe_dir(&foreign).expect_err("not ours");
        assert!(e.to_string().contains("refusing to delete"), "{e}");
        assert!(foreign.join("precious.txt").exists());

        let ours = root.path().join("ours");
        prepare_dir(&ours).expect("prepare");
        std::fs::write(ours.join("000001.log"), b"x").expect("write");
        wipe_dir(&ours).expect("ours");
        assert!(!ours.exists());
        wipe_dir(&ours).expect("missing is fine");
    }
}
