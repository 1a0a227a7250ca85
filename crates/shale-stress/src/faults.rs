//! Fault injection at every filesystem call: fixed workloads (WAL appends and rotation, flush,
//! compaction, manifest roll and open, values in blob files) are run once per call, with that call failing; then the
//! database is closed, crashed in every mode and recovered, and everything is checked against the
//! contract: the failed request fails, no later write is acknowledged until a reopen, and what
//! recovery finds is a prefix of the write order holding every acknowledged write.

use std::collections::BTreeMap;

use shale::env::{CrashMode, FaultError, FaultFs, FaultSpec, OpKind};
use shale::Compression;

use crate::crash::{verify_image, CrashStats};
use crate::oracle::{Entry, MergeKind};
use crate::workload::{Config, Op, Runner};

/// Counts from the fault campaign.
#[derive(Debug, Clone, Default)]
pub struct FaultStats {
    /// Runs, each with one fault armed.
    pub runs: u64,
    /// Runs whose fault fired, by call kind and error.
    pub fired_by_kind: BTreeMap<String, u64>,
    /// Runs whose fault never fired (background work took another path).
    pub not_fired: u64,
    /// Runs with a space quota.
    pub quota_runs: u64,
    /// The crash and recovery checks made after each run.
    pub checks: CrashStats,
    /// Opens during a run whose state broke the contract.
    pub open_violations: u64,
}

impl FaultStats {
    /// Filesystem calls failed on purpose.
    pub fn faulted(&self) -> u64 {
        self.fired_by_kind.values().sum()
    }

    /// Contract violations found.
    pub fn violations(&self) -> u64 {
        self.checks.violations() + self.open_violations
    }
}

fn put(i: u32, pad: usize) -> Entry {
    let mut v = format!("v{i}.").into_bytes();
    v.resize(v.len() + pad, b'p');
    Entry::Put(format!("k{:03}", i % 37).into_bytes(), v)
}

fn write(entries: Vec<Entry>, sync: bool) -> Op {
    Op::Write { entries, sync }
}

/// The fixed workloads, by name.
pub fn workloads() -> Vec<(&'static str, Vec<Op>)> {
    let mut wal = Vec::new();
    for i in 0..60 {
        // About 1 KiB each: the WAL crosses several 32 KiB blocks and rotates with the memtable.
        wal.push(write(vec![put(i, 1000)], i % 10 == 9));
    }
    let mut flush = Vec::new();
    for i in 0..20 {
        flush.push(write(vec![put(i, 50)], false));
    }
    flush.push(Op::Flush);
    flush.push(write(
        vec![put(100, 10), Entry::Delete(b"k001".to_vec()), put(101, 10)],
        true,
    ));
    flush.push(Op::Flush);
    let mut compaction = Vec::new();
    for round in 0..4u32 {
        for i in 0..15 {
            compaction.push(write(vec![put(round * 100 + i, 200)], false));
        }
        compaction.push(write(
            vec![Entry::Merge(
                b"k005".to_vec(),
                format!("m{round}").into_bytes(),
            )],
            false,
        ));
        compaction.push(Op::Flush);
    }
    compaction.push(Op::Compact);
    let mut open = Vec::new();
    for round in 0..3u32 {
        for i in 0..8 {
            open.push(write(vec![put(round * 10 + i, 30)], i == 7));
        }
        open.push(write(
            vec![Entry::Merge(
                b"k002".to_vec(),
                format!("r{round}").into_bytes(),
            )],
            false,
        ));
        open.push(Op::Reopen);
    }
    // Values from 64 bytes go to blob files (see `config_for`): blob file creation, appends,
    // the blob sync before each WAL sync and at rotation, reads, relocation and deletion all
    // meet every fault.
    let mut blobs = Vec::new();
    for round in 0..3u32 {
        for i in 0..12 {
            blobs.push(write(vec![put(round * 100 + i, 300)], i == 11));
        }
        blobs.push(write(
            vec![Entry::Merge(
                b"k004".to_vec(),
                format!("b{round}").into_bytes(),
            )],
            false,
        ));
        blobs.push(Op::Flush);
    }
    blobs.push(Op::Compact);
    blobs.push(Op::Reopen);
    vec![
        ("wal", wal),
        ("flush", flush),
        ("compaction", compaction),
        ("manifest_and_open", open),
        ("blobs", blobs),
    ]
}

/// The configuration workload `name` runs with: [`config`], with key-value separation from
/// 64 bytes for the "blobs" workload.
pub fn config_for(name: &str) -> Config {
    Config {
        min_blob_size: (name == "blobs").then_some(64),
        ..config()
    }
}

/// The configuration the fixed workloads run with.
pub fn config() -> Config {
    Config {
        merge: MergeKind::StringAppend,
        compression: Compression::Lz4,
        write_buffer_size: 16 * 1024,
        keys: 37,
        min_blob_size: None,
        // Compactions split where they can, so a fault can strike one part while another runs.
        max_subcompactions: 2,
    }
}

/// Runs `ops` with `arm` applied to a fresh filesystem, then checks the outcome into `stats`.
fn faulted_run(
    cfg: Config,
    ops: &[Op],
    label: &str,
    arm: impl FnOnce(&FaultFs),
    stats: &mut FaultStats,
) {
    let fs = FaultFs::in_memory();
    arm(&fs);
    let mut runner = Runner::new(cfg, fs.clone());
    runner.check_opens = true;
    runner.run(ops);
    // The workload ends with a clean close, and then a crash.
    runner.db = None;
    fs.clear_faults();
    stats.runs += 1;
    match fs.fired().first() {
        Some(f) => {
            let key = format!("{}:{:?}", f.kind.name(), f.error);
            *stats.fired_by_kind.entry(key).or_default() += 1;
        }
        None => stats.not_fired += 1,
    }
    stats.checks.acked_after_poison += runner.acked_after_poison;
    if runner.acked_after_poison > 0 {
        stats.checks.problems.push(format!(
            "{label}: {} writes acknowledged after a failure (failures: {:?})",
            runner.acked_after_poison, runner.failures
        ));
    }
    for v in &runner.open_violations {
        stats.open_violations += 1;
        if stats.checks.problems.len() < 20 {
            stats.checks.problems.push(format!("{label}: reopen: {v}"));
        }
    }
    let snapshot = fs.snapshot();
    for mode in [CrashMode::ProcessCrash, CrashMode::PowerLoss] {
        let bounds = runner.history.bounds(u64::MAX, mode.keeps_flushed());
        verify_image(
            &cfg,
            &runner.history,
            snapshot.image(mode, stats.runs),
            &bounds,
            mode.name(),
            &mut stats.checks,
            &format!("{label} then {}", mode.name()),
        );
    }
}

/// Runs every fixed workload once per filesystem call of each kind with that call failing
/// (appends also with short writes and `ENOSPC`), plus a set of space quotas. `stride` > 1
/// faults only every `stride`-th call of each kind, for a quick run.
pub fn every_operation(stride: u64) -> FaultStats {
    let mut stats = FaultStats::default();
    for (name, ops) in workloads() {
        let probe = FaultFs::in_memory();
        let cfg = config_for(name);
        let mut runner = Runner::new(cfg, probe.clone());
        runner.run(&ops);
        runner.db = None;
        let total_bytes: u64 = probe.calls_of(OpKind::Append) * 64;
        for kind in OpKind::ALL {
            let n = probe.calls_of(kind);
            let errors: &[FaultError] = if kind == OpKind::Append {
                &[FaultError::Io, FaultError::ShortWrite, FaultError::NoSpace]
            } else {
                &[FaultError::Io]
            };
            for &error in errors {
                let mut nth = 1 + (n % stride.max(1)) / 2;
                while nth <= n {
                    let spec = FaultSpec {
                        kind: Some(kind),
                        nth,
                        persistent: false,
                        error,
                    };
                    let label = format!(
                        "workload {name}, {} #{nth} fails with {error:?}",
                        kind.name()
                    );
                    faulted_run(cfg, &ops, &label, |fs| fs.inject(spec), &mut stats);
                    nth += stride.max(1);
                }
            }
        }
        // A disk that fills up and stays full.
        for tenth in 1..10u64 {
            let quota = total_bytes * tenth / 10;
            let label = format!("workload {name}, space quota {quota} bytes");
            stats.quota_runs += 1;
            faulted_run(
                cfg,
                &ops,
                &label,
                |fs| fs.set_space_quota(Some(quota)),
                &mut stats,
            );
        }
        // Syncs that keep failing.
        let label = format!("workload {name}, every sync fails");
        faulted_run(
            cfg,
            &ops,
            &label,
            |fs| {
                fs.inject(FaultSpec {
                    kind: Some(OpKind::Sync),
                    nth: 1,
                    persistent: true,
                    error: FaultError::Io,
                })
            },
            &mut stats,
        );
    }
    stats
}
