//! Damage at rest: a flipped bit anywhere in a table, WAL, blob file, manifest or CURRENT is reported as an
//! error and never read back as wrong data (`docs/durability.md`, clauses 6 and 7). The sweep
//! lives in `shale-stress` (`corrupt`); here it runs over every third byte, with regression tests
//! for the two holes it found.

use std::path::Path;
use std::sync::Arc;

use shale::env::fault::flip_bit;
use shale::env::{Fs, MemFs};
use shale::{Db, Options};

#[test]
fn a_flipped_bit_in_any_file_is_reported_or_harmless() {
    let stats = shale_stress::corrupt::every_byte(3).expect("base database");
    assert!(stats.injected() > 500, "{stats:#?}");
    assert_eq!(stats.undetected(), 0, "{:#?}", stats.problems);
    for kind in ["table", "wal", "blob", "manifest", "current"] {
        assert!(
            stats.by_kind.get(kind).is_some_and(|k| k.detected() > 0),
            "{kind}: {stats:#?}"
        );
    }
}

fn options(fs: &MemFs) -> Options {
    Options {
        compression: shale::Compression::None,
        fs: Arc::new(fs.clone()),
        ..Options::default()
    }
}

fn named(fs: &MemFs, prefix: &str, suffix: &str) -> std::path::PathBuf {
    let dir = Path::new("/db");
    let mut names: Vec<String> = fs
        .list(dir)
        .expect("list")
        .into_iter()
        .filter(|n| n.starts_with(prefix) && n.ends_with(suffix))
        .collect();
    names.sort();
    dir.join(names.pop().expect("file"))
}

/// Bug: a bit flip in the last manifest record was dropped as a torn tail, so a flush edit
/// already acted on (its WAL deleted) vanished and the table's keys were lost without an error.
/// WALs are deleted here, not kept for reuse: a kept WAL would still hold the keys (see the
/// next test).
#[test]
fn regression_damaged_last_manifest_record_dropped_as_torn_tail() {
    let fs = MemFs::new();
    let options = |fs: &MemFs| Options {
        recycle_log_file_num: 0,
        ..options(fs)
    };
    {
        let db = Db::open("/db", options(&fs)).expect("open");
        db.put("a", "1").expect("put");
        db.flush().expect("flush");
        db.put("b", "2").expect("put");
        db.flush().expect("flush");
    }
    let manifest = named(&fs, "MANIFEST-", "");
    let len = fs.contents(&manifest).expect("manifest").len();
    assert!(flip_bit(&fs, &manifest, len - 2, 0));
    match Db::open("/db", options(&fs)) {
        Err(e) => assert!(
            e.is_corruption() && e.to_string().contains("MANIFEST"),
            "{e}"
        ),
        Ok(db) => panic!(
            "open must fail, not lose data: a={:?} b={:?}",
            db.get("a").expect("get"),
            db.get("b").expect("get")
        ),
    }
}

/// The same damage when the flushed WAL was kept for reuse instead of deleted: the manifest
/// without its last edit names that WAL as live again, it still holds the flushed key, and
/// recovery replays it. Nothing is lost.
#[test]
fn damaged_last_manifest_record_with_the_flushed_wal_kept_for_reuse() {
    let fs = MemFs::new();
    {
        let db = Db::open("/db", options(&fs)).expect("open");
        db.put("a", "1").expect("put");
        db.flush().expect("flush");
        db.put("b", "2").expect("put");
        db.flush().expect("flush");
        assert_eq!(db.stats().wal_files_reused, 1);
    }
    let manifest = named(&fs, "MANIFEST-", "");
    let len = fs.contents(&manifest).expect("manifest").len();
    assert!(flip_bit(&fs, &manifest, len - 2, 0));
    let db = Db::open("/db", options(&fs)).expect("open replays the kept WAL");
    assert_eq!(db.get("a").expect("get"), Some(b"1".to_vec()));
    assert_eq!(db.get("b").expect("get"), Some(b"2".to_vec()));
}

/// Bug: damage in the middle of the newest WAL, with intact records after it in the same
/// block, was dropped as a torn tail, losing the later (possibly synced) writes silently.
#[test]
fn regression_damage_mid_newest_wal_dropped_as_torn_tail() {
    let fs = MemFs::new();
    {
        let db = Db::open("/db", options(&fs)).expect("open");
        for i in 0..10 {
            db.put(format!("k{i}"), "v").expect("put");
        }
    }
    let wal = named(&fs, "", ".log");
    assert!(flip_bit(&fs, &wal, 40, 3));
    match Db::open("/db", options(&fs)) {
        Err(e) => assert!(e.is_corruption() && e.to_string().contains(".log"), "{e}"),
        Ok(_) => panic!("open must fail on damage followed by intact records"),
    }
}
