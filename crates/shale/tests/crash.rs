//! Simulated crashes: random workloads on the fault-injecting filesystem, crashed at random
//! filesystem calls under every crash mode (and again during recovery), each recovery checked
//! against the durability contract (`docs/durability.md`). The campaign itself lives in the
//! `shale-stress` crate; `shale-stress all --long` runs it much longer.

use shale_stress::crash::{campaign, CrashPlan};

#[test]
fn random_workloads_survive_crashes_in_every_mode() {
    let plan = CrashPlan {
        seed: 0x5eed,
        runs: 40,
        ops_per_run: 100,
        captures_per_run: 20,
        recovery_crash_every: 6,
    };
    let stats = campaign(plan, 2);
    assert!(stats.states() >= 40 * 10 * 4, "{stats:#?}");
    assert!(stats.states_during_recovery > 0, "{stats:#?}");
    assert_eq!(stats.violations(), 0, "{:#?}", stats.problems);
}

use std::path::Path;
use std::sync::Arc;

use shale::env::{CrashMode, FaultFs, MemFs};
use shale::{Db, Options, WriteOptions};

fn small(fs: Arc<dyn shale::env::Fs>) -> Options {
    Options {
        write_buffer_size: 8 * 1024,
        max_background_jobs: 1,
        fs,
        ..Options::default()
    }
}

fn opens_with_every_key(image: MemFs, keys: std::ops::Range<u32>, what: &str) {
    let db = Db::open("/db", small(Arc::new(image)))
        .unwrap_or_else(|e| panic!("{what}: recovery failed: {e}"));
    for i in keys {
        assert!(
            db.get(format!("k{i:04}")).expect("get").is_some(),
            "{what}: synced key {i} lost"
        );
    }
}

/// Bug: a memtable switch created the new WAL (and synced the directory) before syncing the old
/// one, so a power loss in between left a torn tail in a WAL that was no longer the newest, and
/// recovery refused to open the database.
#[test]
fn regression_torn_wal_tail_before_rotation_sync() {
    let fs = FaultFs::in_memory();
    let db = Db::open("/db", small(Arc::new(fs.clone()))).expect("open");
    db.put_opt(
        "k0000",
        "synced",
        &WriteOptions {
            sync: true,
            ..WriteOptions::default()
        },
    )
    .expect("put");
    for i in 1..40u32 {
        db.put(format!("k{i:04}"), "unsynced").expect("put");
    }
    let first = fs.calls() + 1;
    fs.capture_at(first..first + 40);
    db.flush().expect("flush");
    drop(db);
    let captures = fs.take_captures();
    assert!(captures.len() > 10);
    for snapshot in &captures {
        for seed in 0..8 {
            for mode in [CrashMode::RandomUnsynced, CrashMode::TornLastWrite] {
                let what = format!(
                    "crash before call {} ({mode:?}, seed {seed})",
                    snapshot.call_count() + 1
                );
                opens_with_every_key(snapshot.image(mode, seed), 0..1, &what);
            }
        }
    }
}

/// Bug: recovery created the new WAL before the manifest edit that retires the replayed ones, so
/// a crash during recovery of a torn WAL left that WAL behind a newer one, and the next recovery
/// refused to open the database.
#[test]
fn regression_new_wal_created_before_recovery_edit() {
    let fs = FaultFs::in_memory();
    let db = Db::open("/db", small(Arc::new(fs.clone()))).expect("open");
    for i in 0..20u32 {
        let sync = i < 10;
        db.put_opt(
            format!("k{i:04}"),
            "v",
            &WriteOptions {
                sync,
                ..WriteOptions::default()
            },
        )
        .expect("put");
    }
    std::mem::forget(db); // the process dies: no clean close
    for seed in 0..6 {
        let torn = fs.crash_image(CrashMode::TornLastWrite, seed);
        let recovering = FaultFs::new(Arc::new(torn));
        let first = 1;
        recovering.capture_at(first..first + 60);
        drop(Db::open("/db", small(Arc::new(recovering.clone()))).expect("first recovery"));
        for snapshot in recovering.take_captures() {
            for mode in [CrashMode::ProcessCrash, CrashMode::PowerLoss] {
                let what = format!(
                    "recovery crashed before call {} ({mode:?})",
                    snapshot.call_count() + 1
                );
                opens_with_every_key(snapshot.image(mode, seed), 0..10, &what);
            }
        }
    }
}

#[test]
fn clean_reopen_of_a_crash_image_is_not_locked() {
    let fs = FaultFs::in_memory();
    let db = Db::open(Path::new("/db"), small(Arc::new(fs.clone()))).expect("open");
    db.put("a", "b").expect("put");
    let image = fs.crash_image(CrashMode::ProcessCrash, 0);
    drop(db);
    let db = Db::open("/db", small(Arc::new(image))).expect("reopen");
    assert_eq!(db.get("a").expect("get"), Some(b"b".to_vec()));
}

/// Bug: when the manifest write of a compaction failed, the compaction removed its output tables,
/// but the edit naming them could already be in the manifest (the append reached the OS, only
/// the sync failed), so after a crash the database referenced tables that no longer existed.
#[test]
fn regression_failed_manifest_sync_removed_live_compaction_outputs() {
    use shale::env::{FaultError, FaultSpec, OpKind};
    for nth in 1..12u64 {
        let fs = FaultFs::in_memory();
        let options = Options {
            level0_file_num_compaction_trigger: 8,
            ..small(Arc::new(fs.clone()))
        };
        let db = Db::open("/db", options.clone()).expect("open");
        for round in 0..3u32 {
            for i in 0..50u32 {
                db.put(format!("k{:04}", i * 3 + round), "v").expect("put");
            }
            db.flush().expect("flush");
        }
        fs.inject(FaultSpec {
            kind: Some(OpKind::Sync),
            nth,
            persistent: false,
            error: FaultError::Io,
        });
        let _ = db.compact_range(None, None);
        drop(db);
        let image = fs.crash_image(CrashMode::ProcessCrash, nth);
        let db = Db::open(
            "/db",
            Options {
                fs: Arc::new(image),
                ..options
            },
        )
        .unwrap_or_else(|e| panic!("sync #{nth} failed: recovery failed: {e}"));
        let mut it = db.iter(shale::ReadOptions::default());
        it.seek_to_first();
        let mut n = 0;
        while it.valid() {
            n += 1;
            it.next();
        }
        it.status()
            .unwrap_or_else(|e| panic!("sync #{nth} failed: read failed: {e}"));
        assert_eq!(n, 150, "sync #{nth} failed: keys lost");
    }
}

#[test]
fn a_fault_at_every_call_of_the_fixed_workloads_breaks_no_promise() {
    // Every 5th call of each kind here; `shale-stress all` faults every call.
    let stats = shale_stress::faults::every_operation(5);
    assert!(stats.faulted() > 300, "{stats:#?}");
    assert_eq!(stats.violations(), 0, "{:#?}", stats.checks.problems);
}

fn with_blobs(fs: Arc<dyn shale::env::Fs>) -> Options {
    Options {
        min_blob_size: Some(64),
        ..small(fs)
    }
}

/// Bug (crash campaign, power loss after a reopen): recovery flushed the replayed writes into
/// tables that reference the newest WAL's blob file, then retired the WAL, without ever syncing
/// that blob file; a power loss then left durable tables pointing at lost blob bytes. Syncing
/// the blob file at recovery was not enough (the fault-at-every-call suite: after a failed
/// sync, Linux never writes those bytes back). Fixed in `open`: recovery copies the values the
/// replayed writes reference into a new blob file, synced before the edit.
#[test]
fn regression_recovery_left_tables_referencing_unsynced_blob_bytes() {
    let fs = FaultFs::in_memory();
    let db = Db::open("/db", with_blobs(Arc::new(fs.clone()))).expect("open");
    for i in 0..20u32 {
        db.put(format!("k{i:04}"), vec![b'v'; 100 + i as usize])
            .expect("put");
    }
    drop(db); // a clean close: everything reached the OS, nothing was synced
    drop(Db::open("/db", with_blobs(Arc::new(fs.clone()))).expect("recovery"));
    // The recovery's open was acknowledged, so every earlier write must survive a power loss.
    for seed in 0..4 {
        let image = fs.crash_image(CrashMode::PowerLoss, seed);
        let db = Db::open("/db", with_blobs(Arc::new(image))).expect("open after power loss");
        for i in 0..20u32 {
            assert_eq!(
                db.get(format!("k{i:04}")).expect("get"),
                Some(vec![b'v'; 100 + i as usize]),
                "seed {seed}: key {i}"
            );
        }
    }
}

/// A synced write's blob bytes are synced before its WAL record, so a power loss keeps it; an
/// unsynced write after it whose blob bytes are lost is dropped as a torn tail with everything
/// after it, never read as a broken value.
#[test]
fn power_loss_keeps_synced_blob_writes_and_drops_torn_ones() {
    let fs = FaultFs::in_memory();
    let db = Db::open("/db", with_blobs(Arc::new(fs.clone()))).expect("open");
    let sync = WriteOptions {
        sync: true,
        ..WriteOptions::default()
    };
    for i in 0..10u32 {
        db.put_opt(format!("k{i:04}"), vec![b's'; 200], &sync)
            .expect("put");
    }
    for i in 10..20u32 {
        db.put(format!("k{i:04}"), vec![b'u'; 200]).expect("put");
    }
    std::mem::forget(db); // the process dies
    for seed in 0..8 {
        for mode in [CrashMode::PowerLoss, CrashMode::RandomUnsynced] {
            let image = fs.crash_image(mode, seed);
            let db = Db::open("/db", with_blobs(Arc::new(image))).expect("recover");
            let mut present = 0;
            for i in 0..20u32 {
                match db
                    .get(format!("k{i:04}"))
                    .expect("get: never a broken value")
                {
                    Some(v) => {
                        assert_eq!(v.len(), 200);
                        assert_eq!(i, present, "{mode:?} seed {seed}: a gap before key {i}");
                        present += 1;
                    }
                    None => assert!(i >= 10, "{mode:?} seed {seed}: synced key {i} lost"),
                }
            }
        }
    }
}

/// A WAL file kept for reuse that cannot be renamed into place costs only the reuse: the
/// memtable switch starts a fresh WAL, writes go on, and a crash afterwards loses nothing.
#[test]
fn a_failed_wal_reuse_starts_a_fresh_wal() {
    use shale::env::{FaultError, FaultSpec, OpKind};
    let fs = FaultFs::in_memory();
    let db = Db::open("/db", small(Arc::new(fs.clone()))).expect("open");
    for (i, key) in ["k0000", "k0001"].iter().enumerate() {
        db.put(key, "v").expect("put");
        db.flush().expect("flush");
        assert_eq!(
            db.stats().wal_files_reused,
            i as u64,
            "a kept WAL is reused"
        );
    }
    fs.inject(FaultSpec {
        kind: Some(OpKind::Rename),
        nth: 1,
        persistent: false,
        error: FaultError::Io,
    });
    db.put("k0002", "v").expect("put");
    db.flush().expect("the switch goes on with a fresh WAL");
    assert_eq!(fs.fired().len(), 1, "the reuse's rename failed");
    assert_eq!(db.stats().wal_files_reused, 1);
    db.put("k0003", "v").expect("writes go on");
    let image = fs.crash_image(CrashMode::ProcessCrash, 1);
    drop(db);
    opens_with_every_key(image, 0..4, "after a failed WAL reuse");
}

/// Bug (found in review): repair removed `CURRENT` and the old manifests, pointed `CURRENT` at a
/// new, empty manifest and only then recorded the salvaged tables, so a crash in between left a
/// database that opened empty and deleted every table as obsolete. Crashed at every call of a
/// repair, the directory must either open with every key or, reopened after a second repair,
/// have them all.
#[test]
fn regression_a_crash_during_repair_loses_nothing() {
    let fs = FaultFs::in_memory();
    {
        let db = Db::open("/db", small(Arc::new(fs.clone()))).expect("open");
        for i in 0..300u32 {
            db.put(format!("k{i:04}"), format!("value {i}"))
                .expect("put");
        }
        db.flush().expect("flush");
    }
    let first = fs.calls() + 1;
    fs.capture_at(first..first + 400);
    Db::repair("/db", &small(Arc::new(fs.clone()))).expect("repair");
    let captures = fs.take_captures();
    assert!(captures.len() > 20, "{} calls captured", captures.len());
    for snapshot in &captures {
        for mode in [CrashMode::ProcessCrash, CrashMode::PowerLoss] {
            let what = format!(
                "repair crashed before call {} ({mode:?})",
                snapshot.call_count() + 1
            );
            let image = snapshot.image(mode, 0);
            let opened = Db::open("/db", small(Arc::new(image.clone())));
            let db = match opened {
                Ok(db) => db,
                // A directory repair left without CURRENT is refused, never opened empty;
                // repairing it again must bring everything back.
                Err(first_error) => {
                    Db::repair("/db", &small(Arc::new(image.clone())))
                        .unwrap_or_else(|e| panic!("{what}: {first_error}; then repair: {e}"));
                    Db::open("/db", small(Arc::new(image)))
                        .unwrap_or_else(|e| panic!("{what}: open after repair: {e}"))
                }
            };
            for i in 0..300u32 {
                assert_eq!(
                    db.get(format!("k{i:04}")).expect("get"),
                    Some(format!("value {i}").into_bytes()),
                    "{what}: key {i}"
                );
            }
        }
    }
}

/// Runs `repair` with a crash point captured before each of its calls (checking that
/// `window` calls covered them all) and returns its report and the crash points.
fn crash_points_of_repair(
    fs: &FaultFs,
    window: u64,
    repair: impl FnOnce() -> shale::RepairReport,
) -> (shale::RepairReport, Vec<shale::env::CrashSnapshot>) {
    let first = fs.calls() + 1;
    fs.capture_at(first..first + window);
    let report = repair();
    assert!(
        fs.calls() < first + window,
        "every call of the repair is a crash point"
    );
    (report, fs.take_captures())
}

/// What a crash point is called in failure messages.
fn crash_point(snapshot: &shale::env::CrashSnapshot, mode: CrashMode) -> String {
    format!(
        "repair crashed before call {} ({mode:?})",
        snapshot.call_count() + 1
    )
}

/// A crash at any point of a repair that merges in passes (more overlapping tables than
/// `max_open_files` lets it hold open) leaves a directory that opens with every key (or is
/// refused, never opened short of one), and that a second repair salvages whole, with nothing
/// reported lost: the intermediate and new tables a crash cut short are in the scratch
/// directory, which no repair or open reads as the database's.
#[test]
fn a_crash_during_a_repair_in_passes_leaves_nothing_a_second_repair_calls_lost() {
    let fs = FaultFs::in_memory();
    let options = |fs: Arc<dyn shale::env::Fs>| Options {
        level0_file_num_compaction_trigger: 100,
        level0_slowdown_writes_trigger: 100,
        level0_stop_writes_trigger: 100,
        max_open_files: 16,
        max_file_size: 8 * 1024,
        ..small(fs)
    };
    let (rounds, n) = (12u32, 600u32);
    {
        let db = Db::open("/db", options(Arc::new(fs.clone()))).expect("open");
        for round in 0..rounds {
            for i in (0..n).filter(|i| i % rounds == round) {
                db.put(format!("k{i:04}"), format!("value {i}"))
                    .expect("put");
            }
            db.flush().expect("flush");
        }
        // And some only in the WAL, synced so that they survive a power loss before the repair.
        let synced = WriteOptions {
            sync: true,
            ..WriteOptions::default()
        };
        for i in n..n + 20 {
            db.put_opt(format!("k{i:04}"), format!("value {i}"), &synced)
                .expect("put");
        }
    }
    let n = n + 20;
    let (report, captures) = crash_points_of_repair(&fs, 500, || {
        Db::repair("/db", &options(Arc::new(fs.clone()))).expect("repair")
    });
    assert!(report.intermediate_tables > 0, "{report:?}");
    assert!(captures.len() > 200, "{} calls captured", captures.len());
    for snapshot in &captures {
        for mode in [CrashMode::ProcessCrash, CrashMode::PowerLoss] {
            let what = crash_point(snapshot, mode);
            let image = snapshot.image(mode, 0);
            // Opened on an image of its own: an open changes what it opens.
            if let Ok(db) = Db::open("/db", options(Arc::new(snapshot.image(mode, 0)))) {
                for i in 0..n {
                    assert!(
                        db.get(format!("k{i:04}")).expect("get").is_some(),
                        "{what}: opened without key {i}"
                    );
                }
            }
            let again = Db::repair("/db", &options(Arc::new(image.clone())))
                .unwrap_or_else(|e| panic!("{what}: second repair: {e}"));
            assert!(again.problems.is_empty(), "{what}: {:?}", again.problems);
            let db = Db::open("/db", options(Arc::new(image)))
                .unwrap_or_else(|e| panic!("{what}: open after repair: {e}"));
            for i in 0..n {
                assert_eq!(
                    db.get(format!("k{i:04}")).expect("get"),
                    Some(format!("value {i}").into_bytes()),
                    "{what}: key {i}"
                );
            }
        }
    }
}

/// Whether `bytes` are in `dir` under `name` or anywhere in `dir/lost/`.
fn kept_somewhere(image: &MemFs, dir: &Path, name: &str, bytes: &[u8]) -> bool {
    use shale::env::Fs;
    if image.contents(&dir.join(name)).as_deref() == Some(bytes) {
        return true;
    }
    let lost = dir.join("lost");
    image
        .list(&lost)
        .unwrap_or_default()
        .iter()
        .any(|kept| image.contents(&lost.join(kept)).as_deref() == Some(bytes))
}

/// A crash at any point of a repair that sets damaged files aside never loses one: a damaged
/// table (even after an open of what the crash left) and a foreign `.log` are either where
/// they were or in `lost/`, byte for byte; and a second repair still keeps them.
#[test]
fn a_crash_during_a_repair_never_loses_a_damaged_file() {
    use shale::env::Fs;
    let fs = FaultFs::in_memory();
    let dir = Path::new("/db");
    let options = |fs: Arc<dyn shale::env::Fs>| Options {
        level0_file_num_compaction_trigger: 100,
        level0_slowdown_writes_trigger: 100,
        level0_stop_writes_trigger: 100,
        ..small(fs)
    };
    {
        let db = Db::open(dir, options(Arc::new(fs.clone()))).expect("open");
        for round in 0..3u32 {
            for i in (0..300u32).filter(|i| i % 3 == round) {
                db.put(format!("k{i:04}"), format!("value {i}"))
                    .expect("put");
            }
            db.flush().expect("flush");
        }
    }
    let mut tables: Vec<String> = fs
        .list(dir)
        .expect("list")
        .into_iter()
        .filter(|n| n.ends_with(".sst"))
        .collect();
    tables.sort();
    let damaged = tables[1].clone();
    let mut table = {
        let mut f = fs.open_sequential(&dir.join(&damaged)).expect("open");
        let mut all = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let n = f.read(&mut buf).expect("read");
            if n == 0 {
                break all;
            }
            all.extend_from_slice(&buf[..n]);
        }
    };
    // The footer's magic: the whole table is unreadable.
    let last = table.len() - 1;
    table[last] ^= 0x01;
    let foreign = b"not a shale log, but someone's data".to_vec();
    for (name, bytes) in [(damaged.as_str(), &table), ("000999.log", &foreign)] {
        let mut f = fs.create(&dir.join(name)).expect("create");
        f.append(bytes).expect("write");
        f.sync().expect("sync");
        f.close().expect("close");
    }
    fs.sync_dir(dir).expect("sync dir");

    let (report, captures) = crash_points_of_repair(&fs, 400, || {
        Db::repair(dir, &options(Arc::new(fs.clone()))).expect("repair")
    });
    assert_eq!(report.moved_to_lost.len(), 2, "{report:?}");
    assert!(captures.len() > 30, "{} calls captured", captures.len());
    for snapshot in &captures {
        for mode in [CrashMode::ProcessCrash, CrashMode::PowerLoss] {
            let what = crash_point(snapshot, mode);
            let image = snapshot.image(mode, 0);
            assert!(
                kept_somewhere(&image, dir, "000999.log", &foreign),
                "{what}: the foreign log"
            );
            // An open deletes the tables the manifest in force does not name, and the WALs it
            // does not need; a foreign log among them it moves into lost/.
            drop(Db::open(dir, options(Arc::new(image.clone()))));
            assert!(
                kept_somewhere(&image, dir, &damaged, &table),
                "{what}: the damaged table"
            );
            assert!(
                kept_somewhere(&image, dir, "000999.log", &foreign),
                "{what}: the foreign log, after an open"
            );
            let image = snapshot.image(mode, 0);
            Db::repair(dir, &options(Arc::new(image.clone())))
                .unwrap_or_else(|e| panic!("{what}: second repair: {e}"));
            assert!(
                kept_somewhere(&image, dir, &damaged, &table),
                "{what}: after a second repair"
            );
            assert!(
                kept_somewhere(&image, dir, "000999.log", &foreign),
                "{what}: the log"
            );
        }
    }
}

/// A crash at any point of an open that finds a numbered `.log` without a shale log header
/// (here the newest, beside the live WAL) loses neither that file nor a synced key: it is in
/// place or in `lost/`, byte for byte, in every crash image and after the next open of it. The
/// open moves it only once its recovery edit is durable.
#[test]
fn a_crash_during_an_open_that_sets_a_foreign_log_aside_loses_nothing() {
    use shale::env::{FaultError, FaultSpec, Fs, OpKind};
    let dir = Path::new("/db");
    let fs = FaultFs::in_memory();
    let db = Db::open(dir, small(Arc::new(fs.clone()))).expect("open");
    for i in 0..10u32 {
        let sync = WriteOptions {
            sync: true,
            ..WriteOptions::default()
        };
        db.put_opt(format!("k{i:04}"), "v", &sync).expect("put");
    }
    std::mem::forget(db); // the process dies: no clean close
    let image = fs.crash_image(CrashMode::ProcessCrash, 0);
    let foreign = b"not a shale log, but someone's data".to_vec();
    let mut file = image.create(&dir.join("000999.log")).expect("create");
    file.append(&foreign).expect("append");
    file.sync().expect("sync");
    file.close().expect("close");
    image.sync_dir(dir).expect("sync dir");
    // An open that fails before its recovery edit is durable (every sync fails) moves nothing.
    let failing = FaultFs::new(Arc::new(image.clone()));
    failing.inject(FaultSpec {
        kind: Some(OpKind::Sync),
        nth: 1,
        persistent: true,
        error: FaultError::Io,
    });
    assert!(Db::open(dir, small(Arc::new(failing))).is_err());
    assert_eq!(
        image.contents(&dir.join("000999.log")),
        Some(foreign.clone()),
        "a failed open moved the foreign log"
    );
    // The retry, crashed at every call.
    let recovering = FaultFs::new(Arc::new(image));
    recovering.capture_at(1..400);
    drop(Db::open(dir, small(Arc::new(recovering.clone()))).expect("first recovery"));
    assert!(recovering.exists(&dir.join("lost").join("000999.log")));
    let captures = recovering.take_captures();
    // Every call of the open is a crash point.
    assert!(
        (20..399).contains(&captures.len()),
        "{} crash points",
        captures.len()
    );
    for snapshot in &captures {
        for mode in [CrashMode::ProcessCrash, CrashMode::PowerLoss] {
            let what = format!(
                "the open crashed before call {} ({mode:?})",
                snapshot.call_count() + 1
            );
            let image = snapshot.image(mode, 0);
            assert!(
                kept_somewhere(&image, dir, "000999.log", &foreign),
                "{what}: the foreign log"
            );
            opens_with_every_key(image.clone(), 0..10, &what);
            assert!(
                kept_somewhere(&image, dir, "000999.log", &foreign),
                "{what}: the foreign log, after the next open"
            );
        }
    }
}
