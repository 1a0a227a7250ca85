//! The real `kill -9` loop: a child process writes from several threads into a database in a real
//! directory, recording each acknowledged write in a per-thread side file (written to the OS
//! right after the acknowledgement, so it survives the kill); the parent kills it with SIGKILL
//! at a random moment, reopens the database and checks that every recorded write is there, that
//! each thread's writes form a prefix (no gaps), that every batch is whole and every value is one
//! that was written.
//!
//! Each write `n` of thread `t` is a batch of two puts, `t{t}-a{n%SLOTS}` and `t{t}-b{n%SLOTS}`,
//! both set to `value(t, n)`: a half batch shows as two slots that disagree. Every
//! [`WIDE_EVERY`]th write is also a wide one: it sets [`WIDE_SLOTS`] more keys, `t{t}-w{i}`, to
//! `wide_value(t, n, i)`, about 44 KB of records, so its WAL record is large enough for the
//! direct write path of the mapped log (`pwritev`, from 32 KiB) and a kill can tear one there.
//! After recovery every wide slot holds the newest wide write, and all of them the same one.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use shale::{Db, Options, WriteBatch, WriteOptions};

/// Key slots per thread.
const SLOTS: u64 = 40;
/// One write in this many is wide (write `n` with `n % WIDE_EVERY == WIDE_EVERY - 1`).
pub const WIDE_EVERY: u64 = 16;
/// The extra keys a wide write sets.
pub const WIDE_SLOTS: u64 = 400;

/// Counts from the kill loop.
#[derive(Debug, Clone, Default)]
pub struct KillStats {
    /// Child processes killed and recovered.
    pub cycles: u64,
    /// Acknowledged writes (from the side files) checked present after recovery.
    pub acked_verified: u64,
    /// Acknowledged writes missing after recovery.
    pub acked_lost: u64,
    /// Half batches, gaps in a thread's writes, or values never written.
    pub inconsistent: u64,
    /// Recoveries that failed.
    pub recovery_failed: u64,
    /// Children that exited before they were killed.
    pub child_failures: u64,
    /// The first few problems.
    pub problems: Vec<String>,
}

impl KillStats {
    /// Contract violations found.
    pub fn violations(&self) -> u64 {
        self.acked_lost + self.inconsistent + self.recovery_failed + self.child_failures
    }

    fn problem(&mut self, p: String) {
        if self.problems.len() < 20 {
            self.problems.push(p);
        }
    }
}

/// The value of write `n` of thread `t`.
pub fn value(t: u64, n: u64) -> Vec<u8> {
    let mut v = format!("t{t}.n{n}.").into_bytes();
    v.resize(v.len() + (n % 7) as usize * 40, b'x');
    v
}

/// The value a wide write `n` of thread `t` gives its wide slot `i`: 100 bytes, under the blob
/// threshold of [`options`], so the records stay in the WAL.
pub fn wide_value(t: u64, n: u64, i: u64) -> Vec<u8> {
    let mut v = format!("t{t}.n{n}.w{i}.").into_bytes();
    v.resize(100, b'y');
    v
}

/// Whether write `n` is a wide one.
fn is_wide(n: u64) -> bool {
    n % WIDE_EVERY == WIDE_EVERY - 1
}

/// The newest wide write among the first `count` writes.
fn newest_wide(count: u64) -> Option<u64> {
    (count >= WIDE_EVERY).then(|| count - 1 - count % WIDE_EVERY)
}

fn parse_value(v: &[u8]) -> Option<(u64, u64)> {
    let s = std::str::from_utf8(v).ok()?;
    let mut parts = s.split('.');
    let t = parts.next()?.strip_prefix('t')?.parse().ok()?;
    let n = parts.next()?.strip_prefix('n')?.parse().ok()?;
    Some((t, n))
}

/// The options both sides open the database with: small, so flushes and compactions happen.
pub fn options() -> Options {
    Options {
        write_buffer_size: 64 * 1024,
        max_file_size: 64 * 1024,
        max_bytes_for_level_base: 256 * 1024,
        level0_file_num_compaction_trigger: 2,
        // About half the values (10 to 250 bytes) go to blob files, so kill -9 meets them on
        // the real filesystem too.
        min_blob_size: Some(128),
        ..Options::default()
    }
}

fn side_file(acks: &Path, t: u64) -> PathBuf {
    acks.join(format!("acks-{t}"))
}

/// The child: opens `dir` and writes from `starts.len()` threads forever, thread `t` starting at
/// write number `starts[t]`. Prints `ready` once the database is open.
pub fn child_main(dir: &Path, acks: &Path, seed: u64, starts: &[u64]) -> Result<(), String> {
    let db = Arc::new(Db::open(dir, options()).map_err(|e| format!("child open: {e}"))?);
    println!("ready");
    let _ = std::io::stdout().flush();
    let handles: Vec<_> = starts
        .iter()
        .enumerate()
        .map(|(t, &start)| {
            let db = db.clone();
            let path = side_file(acks, t as u64);
            std::thread::spawn(move || -> Result<(), String> {
                let t = t as u64;
                let mut rng = StdRng::seed_from_u64(seed ^ (t << 40));
                let mut side = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&path)
                    .map_err(|e| format!("side file: {e}"))?;
                let mut n = start;
                loop {
                    let v = value(t, n);
                    let mut batch = WriteBatch::new();
                    batch.put(format!("t{t}-a{:03}", n % SLOTS), &v);
                    batch.put(format!("t{t}-b{:03}", n % SLOTS), &v);
                    if is_wide(n) {
                        for i in 0..WIDE_SLOTS {
                            batch.put(format!("t{t}-w{i:03}"), wide_value(t, n, i));
                        }
                    }
                    let sync = rng.gen_bool(0.05);
                    db.write_opt(
                        batch,
                        &WriteOptions {
                            sync,
                            ..WriteOptions::default()
                        },
                    )
                    .map_err(|e| format!("write: {e}"))?;
                    // One write(2) per acknowledgement: it reaches the OS, so it survives the
                    // kill, and it is never ahead of the database.
                    side.write_all(format!("{n}\n").as_bytes())
                        .map_err(|e| format!("side file: {e}"))?;
                    n += 1;
                }
            })
        })
        .collect();
    for h in handles {
        match h.join() {
            Ok(r) => r?,
            Err(_) => return Err("writer thread panicked".into()),
        }
    }
    Ok(())
}

/// Runs `cycles` kill cycles of a child started as `exe child ...`, with `threads` writers.
pub fn kill_loop(exe: &Path, cycles: u64, threads: u64, seed: u64) -> KillStats {
    let mut stats = KillStats::default();
    let tmp = match tempdir() {
        Ok(t) => t,
        Err(e) => {
            stats.recovery_failed += 1;
            stats.problem(format!("tempdir: {e}"));
            return stats;
        }
    };
    let dir = tmp.join("db");
    let acks = tmp.join("acks");
    let mut rng = StdRng::seed_from_u64(seed);
    let mut starts = vec![0u64; threads as usize];
    for cycle in 0..cycles {
        let _ = std::fs::remove_dir_all(&acks);
        if let Err(e) = std::fs::create_dir_all(&acks) {
            stats.problem(format!("mkdir: {e}"));
            break;
        }
        let starts_arg = starts
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(",");
        let child = Command::new(exe)
            .arg("child")
            .arg(&dir)
            .arg(&acks)
            .arg((seed ^ cycle).to_string())
            .arg(&starts_arg)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn();
        let mut child = match child {
            Ok(c) => c,
            Err(e) => {
                stats.child_failures += 1;
                stats.problem(format!("spawn {}: {e}", exe.display()));
                break;
            }
        };
        let mut ready = String::new();
        if let Some(out) = child.stdout.take() {
            let _ = BufReader::new(out).read_line(&mut ready);
        }
        if ready.trim() != "ready" {
            stats.child_failures += 1;
            stats.problem(format!("cycle {cycle}: child did not start"));
            let _ = child.kill();
            let _ = child.wait();
            continue;
        }
        std::thread::sleep(Duration::from_millis(rng.gen_range(5..60)));
        let exited_early = matches!(child.try_wait(), Ok(Some(_)));
        let _ = child.kill();
        let _ = child.wait();
        if exited_early {
            stats.child_failures += 1;
            stats.problem(format!("cycle {cycle}: child exited before the kill"));
        }
        stats.cycles += 1;
        match verify(&dir, &acks, threads, &mut stats, cycle) {
            Some(next) => starts = next,
            None => break,
        }
    }
    let _ = std::fs::remove_dir_all(&tmp);
    stats
}

/// Checks the database after a kill; returns where each thread goes on.
fn verify(
    dir: &Path,
    acks: &Path,
    threads: u64,
    stats: &mut KillStats,
    cycle: u64,
) -> Option<Vec<u64>> {
    let db = match Db::open(dir, options()) {
        Ok(db) => db,
        Err(e) => {
            stats.recovery_failed += 1;
            stats.problem(format!("cycle {cycle}: open after kill: {e}"));
            return None;
        }
    };
    let mut slots: BTreeMap<(u64, char, u64), Vec<u8>> = BTreeMap::new();
    for item in db.range::<&[u8], _>(..) {
        let (k, v) = match item {
            Ok(kv) => kv,
            Err(e) => {
                stats.recovery_failed += 1;
                stats.problem(format!("cycle {cycle}: read: {e}"));
                return None;
            }
        };
        let key = String::from_utf8_lossy(&k).into_owned();
        let parsed = key.strip_prefix('t').and_then(|rest| {
            let (t, rest) = rest.split_once('-')?;
            let side = rest.chars().next()?;
            Some((t.parse().ok()?, side, rest.get(1..)?.parse().ok()?))
        });
        match parsed {
            Some(slot) => {
                slots.insert(slot, v);
            }
            None => {
                stats.inconsistent += 1;
                stats.problem(format!("cycle {cycle}: unknown key {key}"));
            }
        }
    }
    let mut next = Vec::new();
    for t in 0..threads {
        // The recovered writes of thread t: the newest write number in any slot.
        let mut count = 0u64;
        for s in 0..SLOTS {
            let a = slots.get(&(t, 'a', s));
            let b = slots.get(&(t, 'b', s));
            if a != b {
                stats.inconsistent += 1;
                stats.problem(format!("cycle {cycle}: thread {t} slot {s}: half a batch"));
            }
            if let Some(v) = a {
                match parse_value(v) {
                    Some((vt, n)) if vt == t && n % SLOTS == s && *v == value(t, n) => {
                        count = count.max(n + 1);
                    }
                    _ => {
                        stats.inconsistent += 1;
                        stats.problem(format!(
                            "cycle {cycle}: thread {t} slot {s}: a value never written"
                        ));
                    }
                }
            }
        }
        // No gaps: each slot holds the newest write below `count` that maps to it.
        for s in 0..SLOTS {
            let expected = (count > s).then(|| {
                let last = count - 1;
                last - ((last + SLOTS - s) % SLOTS)
            });
            let found = slots
                .get(&(t, 'a', s))
                .and_then(|v| parse_value(v))
                .map(|(_, n)| n);
            if expected != found {
                stats.inconsistent += 1;
                stats.problem(format!(
                    "cycle {cycle}: thread {t} slot {s}: expected write {expected:?}, found {found:?} (a gap)"
                ));
            }
        }
        // Every wide slot holds the newest wide write below `count`: a torn wide batch, or
        // one recovered without the narrow slots of the same write, shows here (counted once
        // per thread, so one torn batch does not crowd out every other problem).
        let wide = newest_wide(count);
        let wrong: Vec<u64> = (0..WIDE_SLOTS)
            .filter(|&i| match (wide, slots.get(&(t, 'w', i))) {
                (None, None) => false,
                (Some(n), Some(v)) => *v != wide_value(t, n, i),
                _ => true,
            })
            .collect();
        if let Some(&first) = wrong.first() {
            stats.inconsistent += 1;
            let found = slots
                .get(&(t, 'w', first))
                .map(|v| String::from_utf8_lossy(v).into_owned());
            stats.problem(format!(
                "cycle {cycle}: thread {t}: {} of {WIDE_SLOTS} wide slots wrong; slot {first} \
                 expected wide write {wide:?}, found {found:?}",
                wrong.len()
            ));
        }
        // Every acknowledged write must be there.
        let acked: Vec<u64> = std::fs::read_to_string(side_file(acks, t))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.parse().ok())
            .collect();
        for &n in &acked {
            if n < count {
                stats.acked_verified += 1;
            } else {
                stats.acked_lost += 1;
                stats.problem(format!(
                    "cycle {cycle}: thread {t}: acknowledged write {n} lost (recovered {count})"
                ));
            }
        }
        next.push(count);
    }
    Some(next)
}

/// A fresh temporary directory (removed by the caller).
fn tempdir() -> std::io::Result<PathBuf> {
    let base = std::env::temp_dir().join(format!(
        "shale-kill-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    ));
    std::fs::create_dir_all(&base)?;
    Ok(base)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newest_wide_write_below_a_count() {
        assert_eq!(newest_wide(0), None);
        assert_eq!(newest_wide(WIDE_EVERY - 1), None);
        assert_eq!(newest_wide(WIDE_EVERY), Some(WIDE_EVERY - 1));
        assert_eq!(newest_wide(2 * WIDE_EVERY - 1), Some(WIDE_EVERY - 1));
        assert_eq!(newest_wide(2 * WIDE_EVERY), Some(2 * WIDE_EVERY - 1));
        for count in 1..100 {
            let brute = (0..count).rev().find(|&n| is_wide(n));
            assert_eq!(newest_wide(count), brute, "count {count}");
        }
    }

    #[test]
    fn a_wide_write_is_large_enough_for_the_direct_wal_path_and_under_the_blob_threshold() {
        let bytes: usize = (0..WIDE_SLOTS)
            .map(|i| format!("t7-w{i:03}").len() + wide_value(7, 123_456, i).len())
            .sum();
        assert!(bytes > 40 * 1024, "{bytes} bytes");
        let blob_min = options().min_blob_size.unwrap_or(usize::MAX);
        assert!(wide_value(99, u64::MAX, WIDE_SLOTS).len() < blob_min);
    }
}
