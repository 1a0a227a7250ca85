//! The simulated crash campaign: random workloads on a [`FaultFs`], crash snapshots captured at
//! random filesystem calls (inside writes, flushes, compactions, manifest rolls and opens), and
//! every snapshot recovered under every [`CrashMode`] and checked against the [`History`].
//! Some recoveries are themselves crashed part-way and recovered again.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use shale::env::{CrashMode, CrashSnapshot, FaultFs, MemFs};
use shale::Db;

use crate::oracle::{Bounds, History, Verdict};
use crate::workload::{generate, read_state, spot_check_gets, Config, Runner, DIR};

/// Counts from a crash campaign.
#[derive(Debug, Clone, Default)]
pub struct CrashStats {
    /// Workloads run.
    pub runs: u64,
    /// Crash states recovered and checked, by crash mode name.
    pub states_by_mode: BTreeMap<&'static str, u64>,
    /// Of those, states reached by crashing a recovery part-way and recovering again.
    pub states_during_recovery: u64,
    /// Writes acknowledged before a crash (summed over states) that the check required.
    pub acked_writes_verified: u64,
    /// Recovered states missing an acknowledged (or durable) write.
    pub acked_lost: u64,
    /// Recovered states that are no prefix at all: a gap, half a batch, a value never written
    /// or a deleted key come back.
    pub not_a_prefix: u64,
    /// Recoveries (opens or reads) that failed on a crash image.
    pub recovery_failed: u64,
    /// Point reads that disagreed with the iterator.
    pub read_mismatches: u64,
    /// Writes acknowledged after the database reported a failure.
    pub acked_after_poison: u64,
    /// The first few problems, described.
    pub problems: Vec<String>,
}

impl CrashStats {
    /// Total crash states checked.
    pub fn states(&self) -> u64 {
        self.states_by_mode.values().sum()
    }

    /// Adds `other` into `self`.
    pub fn merge(&mut self, other: CrashStats) {
        self.runs += other.runs;
        for (k, v) in other.states_by_mode {
            *self.states_by_mode.entry(k).or_default() += v;
        }
        self.states_during_recovery += other.states_during_recovery;
        self.acked_writes_verified += other.acked_writes_verified;
        self.acked_lost += other.acked_lost;
        self.not_a_prefix += other.not_a_prefix;
        self.recovery_failed += other.recovery_failed;
        self.read_mismatches += other.read_mismatches;
        self.acked_after_poison += other.acked_after_poison;
        for p in other.problems {
            if self.problems.len() < 20 {
                self.problems.push(p);
            }
        }
    }

    /// Problems found (every one breaks the contract).
    pub fn violations(&self) -> u64 {
        self.acked_lost
            + self.not_a_prefix
            + self.recovery_failed
            + self.read_mismatches
            + self.acked_after_poison
    }

    fn problem(&mut self, p: String) {
        if self.problems.len() < 20 {
            self.problems.push(p);
        }
    }
}

/// Settings of a campaign.
#[derive(Debug, Clone, Copy)]
pub struct CrashPlan {
    /// Base seed; run `i` uses `seed + i`.
    pub seed: u64,
    /// Workloads to run.
    pub runs: u64,
    /// Operations per workload.
    pub ops_per_run: usize,
    /// Crash points captured per workload.
    pub captures_per_run: usize,
    /// One recovery in this many is crashed part-way and recovered again.
    pub recovery_crash_every: u64,
}

/// Runs the campaign of `plan` on `threads` threads.
pub fn campaign(plan: CrashPlan, threads: u64) -> CrashStats {
    let threads = threads.max(1);
    let results: Vec<CrashStats> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                scope.spawn(move || {
                    let mut stats = CrashStats::default();
                    let mut run = t;
                    while run < plan.runs {
                        stats.merge(one_run(&plan, plan.seed.wrapping_add(run)));
                        run += threads;
                    }
                    stats
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect()
    });
    let mut total = CrashStats::default();
    for r in results {
        total.merge(r);
    }
    total
}

/// One workload with its crash points. Public so a failing seed can be replayed alone.
pub fn one_run(plan: &CrashPlan, seed: u64) -> CrashStats {
    let mut stats = CrashStats {
        runs: 1,
        ..CrashStats::default()
    };
    let mut rng = StdRng::seed_from_u64(seed);
    let cfg = Config::random(&mut rng);
    let ops = generate(&mut rng, &cfg, plan.ops_per_run);

    // A probe run tells how many filesystem calls the workload makes, so the crash points can
    // be spread over all of it.
    let probe = {
        let mut runner = Runner::new(cfg, FaultFs::in_memory());
        runner.run(&ops);
        runner.db = None;
        runner.fs.calls().max(1)
    };
    let fs = FaultFs::in_memory();
    let points: Vec<u64> = (0..plan.captures_per_run)
        .map(|_| rng.gen_range(1..=probe))
        .collect();
    fs.capture_at(points);
    let mut runner = Runner::new(cfg, fs);
    runner.run(&ops);
    stats.acked_after_poison += runner.acked_after_poison;
    if !runner.failures.is_empty() {
        stats.problem(format!(
            "seed {seed}: operations failed without any fault: {:?}",
            &runner.failures[..runner.failures.len().min(3)]
        ));
        stats.recovery_failed += 1;
    }
    // The live database must show every acknowledged write.
    if let Some(db) = runner.db.as_ref() {
        match read_state(db) {
            Ok(state) if state == runner.history.acknowledged_state() => {}
            Ok(_) => {
                stats.not_a_prefix += 1;
                stats.problem(format!(
                    "seed {seed}: the live database differs from the model"
                ));
            }
            Err(e) => {
                stats.recovery_failed += 1;
                stats.problem(format!("seed {seed}: live read failed: {e}"));
            }
        }
    }
    let mut captures = runner.fs.take_captures();
    runner.db = None;
    captures.push(runner.fs.snapshot());
    for (i, snapshot) in captures.iter().enumerate() {
        for mode in CrashMode::ALL {
            let image_seed = seed ^ ((i as u64) << 32) ^ mode as u64;
            let crash_recovery =
                plan.recovery_crash_every > 0 && rng.gen_range(0..plan.recovery_crash_every) == 0;
            check_snapshot(
                &cfg,
                &runner.history,
                snapshot,
                mode,
                image_seed,
                crash_recovery.then(|| rng.gen_range(1..=60)),
                &mut stats,
                &format!("seed {seed} capture {i} (call {})", snapshot.call_count()),
            );
        }
    }
    stats
}

/// Recovers `snapshot` under `mode` and checks it; with `crash_recovery_at`, first crashes the
/// recovery at that filesystem call and checks the recovery of that crash instead.
#[allow(clippy::too_many_arguments)]
pub fn check_snapshot(
    cfg: &Config,
    history: &History,
    snapshot: &CrashSnapshot,
    mode: CrashMode,
    image_seed: u64,
    crash_recovery_at: Option<u64>,
    stats: &mut CrashStats,
    label: &str,
) {
    let image = snapshot.image(mode, image_seed);
    let bounds = history.bounds(snapshot.call_count(), mode.keeps_flushed());
    if let Some(at) = crash_recovery_at {
        let fs = FaultFs::new(Arc::new(image.clone()));
        fs.crash_at(at);
        let opened = Db::open(Path::new(DIR), cfg.options(Arc::new(fs.clone())));
        drop(opened);
        if let Some(second) = fs.crashed() {
            // The recovery died part-way. A power loss then may also take whatever the first
            // crash left only in the page cache, so only durable writes are required.
            let second_mode = if image_seed % 2 == 0 {
                CrashMode::ProcessCrash
            } else {
                CrashMode::PowerLoss
            };
            let bounds2 = if second_mode.keeps_flushed() {
                bounds.clone()
            } else {
                history.bounds(snapshot.call_count(), false)
            };
            let image2 = second.image(second_mode, image_seed.rotate_left(7));
            stats.states_during_recovery += 1;
            verify_image(
                cfg,
                history,
                image2,
                &bounds2,
                mode.name(),
                stats,
                &format!("{label} {} then recovery crashed at call {at}", mode.name()),
            );
            return;
        }
    }
    verify_image(
        cfg,
        history,
        image,
        &bounds,
        mode.name(),
        stats,
        &format!("{label} {}", mode.name()),
    );
}

/// Opens `image`, reads everything and checks it against `bounds`.
pub fn verify_image(
    cfg: &Config,
    history: &History,
    image: MemFs,
    bounds: &Bounds,
    mode_name: &'static str,
    stats: &mut CrashStats,
    label: &str,
) {
    *stats.states_by_mode.entry(mode_name).or_default() += 1;
    stats.acked_writes_verified += bounds.lo as u64;
    let db = match Db::open(Path::new(DIR), cfg.options(Arc::new(image))) {
        Ok(db) => db,
        Err(e) => {
            stats.recovery_failed += 1;
            stats.problem(format!("{label}: open failed: {e}"));
            return;
        }
    };
    let state = match read_state(&db) {
        Ok(s) => s,
        Err(e) => {
            stats.recovery_failed += 1;
            stats.problem(format!("{label}: read failed: {e}"));
            return;
        }
    };
    match history.check(&state, bounds) {
        Verdict::Prefix(_) => {}
        Verdict::Violation(why) => {
            let relaxed = Bounds {
                lo: 0,
                ..bounds.clone()
            };
            if matches!(history.check(&state, &relaxed), Verdict::Prefix(_)) {
                stats.acked_lost += 1;
                stats.problem(format!("{label}: acknowledged writes lost: {why}"));
            } else {
                stats.not_a_prefix += 1;
                stats.problem(format!("{label}: {why}"));
            }
            return;
        }
    }
    let keys: Vec<Vec<u8>> = state.keys().take(4).cloned().collect();
    if let Err(why) = spot_check_gets(&db, &state, &keys) {
        stats.read_mismatches += 1;
        stats.problem(format!("{label}: {why}"));
    }
}
