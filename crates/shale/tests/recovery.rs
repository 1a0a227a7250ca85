//! Recovery: data written before a reopen is all there, whether it was still in the WAL or
//! already in tables, after a clean close or after the handle was leaked without one.

use std::path::Path;
use std::sync::Arc;

use shale::env::MemFs;
use shale::{Db, Error, Options, WriteBatch, WriteOptions};

fn small_options(fs: &MemFs) -> Options {
    Options {
        write_buffer_size: 16 * 1024,
        max_file_size: 16 * 1024,
        max_bytes_for_level_base: 64 * 1024,
        level0_file_num_compaction_trigger: 2,
        fs: Arc::new(fs.clone()),
        ..Options::default()
    }
}

fn kv(i: u32) -> (Vec<u8>, Vec<u8>) {
    (
        format!("key{i:06}").into_bytes(),
        format!("value-{i}-{}", "x".repeat((i % 50) as usize)).into_bytes(),
    )
}

/// Writes keys `0..n` with [`kv`]'s values.
fn put_all(db: &Db, n: u32) {
    for i in 0..n {
        let (k, v) = kv(i);
        db.put(&k, &v).expect("put");
    }
}

fn check_all(db: &Db, n: u32) {
    check_all_and(db, n, None);
}

/// [`check_all`], with one more key beside keys `0..n` when `extra` names it.
fn check_all_and(db: &Db, n: u32, extra: Option<(&[u8], &[u8])>) {
    for i in 0..n {
        let (k, v) = kv(i);
        assert_eq!(db.get(&k).expect("get"), Some(v), "key {i}");
    }
    if let Some((k, v)) = extra {
        assert_eq!(db.get(k).expect("get").as_deref(), Some(v));
    }
    let count = db.range::<&[u8], _>(..).count();
    assert_eq!(count, n as usize + usize::from(extra.is_some()));
}

#[test]
fn reopen_after_clean_close_keeps_wal_and_table_data() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    {
        let db = Db::open(dir, small_options(&fs)).expect("open");
        put_all(&db, 3000);
        let stats = db.stats();
        assert!(
            stats.flushes > 0,
            "the test must exercise tables, not only the WAL"
        );
    }
    let db = Db::open(dir, small_options(&fs)).expect("reopen");
    check_all(&db, 3000);
}

#[test]
fn reopen_without_close_recovers_from_the_wal() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    let db = Db::open(dir, small_options(&fs)).expect("open");
    put_all(&db, 500);
    // Simulate a process that died: the handle (and its lock) is never dropped, so clear the
    // lock by copying every file into a fresh filesystem.
    let copy = MemFs::new();
    copy_dir(&fs, &copy, dir);
    std::mem::forget(db);
    let db = Db::open(dir, small_options(&copy)).expect("reopen");
    check_all(&db, 500);
}

fn copy_dir(from: &MemFs, to: &MemFs, dir: &Path) {
    use shale::env::Fs;
    to.create_dir_all(dir).expect("mkdir");
    for name in from.list(dir).expect("list") {
        if name == "LOCK" {
            continue;
        }
        let path = dir.join(&name);
        if let Some(data) = from.contents(&path) {
            to.set_contents(&path, data);
        }
    }
}

#[test]
fn batches_and_deletes_survive_repeated_reopens() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    for round in 0..5u32 {
        let db = Db::open(dir, small_options(&fs)).expect("open");
        let mut batch = WriteBatch::new();
        for i in 0..200 {
            batch.put(format!("r{round}-{i:04}"), format!("v{i}"));
        }
        batch.delete(format!("r{round}-0000"));
        db.write_opt(
            batch,
            &WriteOptions {
                sync: true,
                ..WriteOptions::default()
            },
        )
        .expect("write");
        if round > 0 {
            assert_eq!(
                db.get(format!("r{}-0001", round - 1)).expect("get"),
                Some(b"v1".to_vec())
            );
            assert_eq!(db.get(format!("r{}-0000", round - 1)).expect("get"), None);
        }
    }
    let db = Db::open(dir, small_options(&fs)).expect("open");
    assert_eq!(db.range::<&[u8], _>(..).count(), 5 * 199);
}

#[test]
fn second_open_of_the_same_directory_is_refused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let db = Db::open(tmp.path(), Options::default()).expect("open");
    match Db::open(tmp.path(), Options::default()) {
        Err(Error::Locked { .. }) => {}
        other => panic!("expected Locked, got {other:?}"),
    }
    drop(db);
    Db::open(tmp.path(), Options::default()).expect("open after close");
}

#[test]
fn create_if_missing_and_error_if_exists() {
    let fs = MemFs::new();
    let opts = Options {
        create_if_missing: false,
        ..small_options(&fs)
    };
    assert!(Db::open("/nope", opts).is_err());
    drop(Db::open("/db", small_options(&fs)).expect("create"));
    let opts = Options {
        error_if_exists: true,
        ..small_options(&fs)
    };
    assert!(Db::open("/db", opts).is_err());
}

#[test]
fn destroy_removes_the_database() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("db");
    {
        let db = Db::open(&dir, Options::default()).expect("open");
        db.put(b"a", b"b").expect("put");
        db.flush().expect("flush");
    }
    Db::destroy(&dir, &Options::default()).expect("destroy");
    assert!(!dir.exists());
}

#[test]
fn over_limit_keys_and_values_are_invalid_arguments() {
    let fs = MemFs::new();
    let db = Db::open("/db", small_options(&fs)).expect("open");
    let big_key = vec![b'k'; shale::limits::MAX_KEY_BYTES + 1];
    assert!(matches!(
        db.put(&big_key, b"v"),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(db.get(&big_key), Err(Error::InvalidArgument(_))));
    assert!(
        matches!(db.merge(b"k", b"v"), Err(Error::InvalidArgument(_))),
        "merge without operator"
    );
    db.put(b"ok", b"v").expect("database still usable");
}

#[test]
fn read_only_open_sees_wal_and_tables_and_refuses_writes() {
    use shale::env::Fs;
    let fs = MemFs::new();
    let dir = Path::new("/db");
    let db = Db::open(dir, small_options(&fs)).expect("open");
    put_all(&db, 1500);
    // Opened while the writer still holds the lock: read-only takes none.
    let ro = Db::open_read_only(dir, small_options(&fs)).expect("read-only open");
    check_all(&ro, 1500);
    assert!(matches!(ro.put(b"x", b"y"), Err(Error::InvalidArgument(_))));
    assert!(matches!(
        ro.compact_range(None, None),
        Err(Error::InvalidArgument(_))
    ));
    assert!(ro.flush().is_err());
    drop(ro);
    drop(db);
    // With no writer running, a read-only open changes nothing on disk.
    let before: Vec<(String, Option<Vec<u8>>)> = fs
        .list(dir)
        .expect("list")
        .into_iter()
        .map(|n| (n.clone(), fs.contents(&dir.join(&n))))
        .collect();
    let ro = Db::open_read_only(dir, small_options(&fs)).expect("read-only open");
    check_all(&ro, 1500);
    drop(ro);
    let after: Vec<(String, Option<Vec<u8>>)> = fs
        .list(dir)
        .expect("list")
        .into_iter()
        .map(|n| (n.clone(), fs.contents(&dir.join(&n))))
        .collect();
    assert!(
        before == after,
        "a read-only open must not create, change or delete files"
    );
}

/// A database that lost `CURRENT` is damaged, not absent: creating a new one over it would
/// overwrite its first manifest and delete its tables as obsolete. Open refuses and changes
/// nothing; repair brings the data back. An interrupted creation (`MANIFEST-000001` alone) is
/// created again.
#[test]
fn open_refuses_to_create_over_a_database_that_lost_current() {
    use shale::env::Fs;
    let fs = MemFs::new();
    let dir = Path::new("/db");
    {
        let db = Db::open(dir, small_options(&fs)).expect("open");
        put_all(&db, 3000);
    }
    fs.remove(&dir.join("CURRENT")).expect("remove CURRENT");
    let snapshot = |fs: &MemFs| -> Vec<(String, Option<Vec<u8>>)> {
        let mut names = fs.list(dir).expect("list");
        names.sort();
        names
            .into_iter()
            .map(|n| (n.clone(), fs.contents(&dir.join(&n))))
            .collect()
    };
    let before = snapshot(&fs);
    match Db::open(dir, small_options(&fs)) {
        Err(Error::Corruption { path, message, .. }) => {
            assert_eq!(path, dir.join("CURRENT"));
            assert!(
                message.contains(".sst"),
                "names the files it found: {message}"
            );
            assert!(message.contains("repair"), "says what to do: {message}");
        }
        other => panic!("expected corruption, got {:?}", other.map(|_| ())),
    }
    assert!(
        before == snapshot(&fs),
        "the refused open changed the directory"
    );
    Db::repair(dir, &small_options(&fs)).expect("repair");
    let db = Db::open(dir, small_options(&fs)).expect("open after repair");
    check_all(&db, 3000);
    drop(db);

    // Only MANIFEST-000001: a creation cut short before CURRENT was written.
    let fresh = Path::new("/fresh");
    fs.create_dir_all(fresh).expect("mkdir");
    let mut file = fs.create(&fresh.join("MANIFEST-000001")).expect("create");
    file.append(b"half-written").expect("append");
    file.close().expect("close");
    let db = Db::open(fresh, small_options(&fs)).expect("create again");
    db.put(b"k", b"v").expect("put");
    assert_eq!(db.get(b"k").expect("get"), Some(b"v".to_vec()));
}

/// A crash between writing `CURRENT.dbtmp` and renaming it leaves the temporary file behind;
/// the next writable open removes it (and any numbered one), while a read-only open, LevelDB's
/// info log names and files that are not shale's are left alone.
#[test]
fn leftover_temporary_files_are_removed_at_open() {
    use shale::env::Fs;
    let fs = MemFs::new();
    let dir = Path::new("/db");
    {
        let db = Db::open(dir, small_options(&fs)).expect("open");
        db.put(b"k", b"v").expect("put");
    }
    let leftovers = ["CURRENT.dbtmp", "000042.dbtmp"];
    // Names shale never prints (`12.log` would be opened as `000012.log`) are not its files:
    // neither replayed nor deleted.
    let bystanders = [
        "LOG",
        "LOG.old",
        "notes.txt",
        "12.sst.dbtmp",
        "12.log",
        "0000012.log",
        "7.sst",
        "MANIFEST-1",
    ];
    for name in leftovers.iter().chain(&bystanders) {
        let mut file = fs.create(&dir.join(name)).expect("create");
        file.append(b"MANIFEST-000999\n").expect("append");
        file.close().expect("close");
    }
    let ro = Db::open_read_only(dir, small_options(&fs)).expect("read-only open");
    assert_eq!(ro.get(b"k").expect("get"), Some(b"v".to_vec()));
    drop(ro);
    for name in leftovers.iter().chain(&bystanders) {
        assert!(fs.exists(&dir.join(name)), "read-only open removed {name}");
    }
    let db = Db::open(dir, small_options(&fs)).expect("reopen");
    assert_eq!(db.get(b"k").expect("get"), Some(b"v".to_vec()));
    for name in leftovers {
        assert!(!fs.exists(&dir.join(name)), "{name} was left behind");
    }
    for name in bystanders {
        assert!(
            fs.exists(&dir.join(name)),
            "{name} is not shale's to remove"
        );
    }
}

/// A numbered `.log` without a shale log header (another program's, or a log whose start is
/// damaged: the two look alike) is moved into `lost/` unread by repair and reported, since its
/// writes, if it held any, are lost; the database's other data is all there.
#[test]
fn repair_sets_aside_a_log_without_a_shale_header_and_reports_it() {
    use shale::env::Fs;
    let fs = MemFs::new();
    let dir = Path::new("/db");
    {
        let db = Db::open(dir, small_options(&fs)).expect("open");
        put_all(&db, 500);
    }
    let foreign = dir.join("000900.log");
    let mut file = fs.create(&foreign).expect("create");
    file.append(b"GET / HTTP/1.1 200 a web server's log line\n")
        .expect("append");
    file.close().expect("close");
    let report = Db::repair(dir, &small_options(&fs)).expect("repair");
    assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
    assert!(
        report.problems[0].contains("000900.log") && report.problems[0].contains("no shale log"),
        "{:?}",
        report.problems
    );
    assert!(!fs.exists(&foreign));
    assert!(report
        .moved_to_lost
        .iter()
        .any(|p| p.ends_with("000900.log")));
    let db = Db::open(dir, small_options(&fs)).expect("open after repair");
    check_all(&db, 500);
}

/// `open` reads a numbered `.log` that does not start like a shale log as a WAL torn at its
/// first byte, like a torn header (the two can look alike), and keeps the data before it; but
/// it moves such a file into `lost/`, byte for byte, rather than delete it with the obsolete
/// WALs; so is one numbered below the WALs in use, which open would delete unread. A second
/// one of the same name is kept beside the first. A log that starts with zeros (a header a
/// crash cut off) is deleted as before, and a read-only open moves nothing.
#[test]
fn open_keeps_a_log_without_a_shale_header_in_lost() {
    use shale::env::Fs;
    let fs = MemFs::new();
    let dir = Path::new("/db");
    {
        let db = Db::open(dir, small_options(&fs)).expect("open");
        put_all(&db, 500);
    }
    let write = |name: &str, bytes: &[u8]| {
        let mut file = fs.create(&dir.join(name)).expect("create");
        file.append(bytes).expect("append");
        file.close().expect("close");
    };
    let foreign = b"GET / HTTP/1.1 200 a web server's log line\n".to_vec();
    write("000900.log", &foreign);
    {
        let db = Db::open_read_only(dir, small_options(&fs)).expect("read-only open");
        check_all(&db, 500);
    }
    assert_eq!(fs.contents(&dir.join("000900.log")), Some(foreign.clone()));
    let kept = dir.join("lost").join("000900.log");
    for (round, kept) in [kept.clone(), dir.join("lost").join("000900.log.1")]
        .iter()
        .enumerate()
    {
        let bytes = [&foreign[..], &[b'0' + round as u8]].concat();
        write("000900.log", &bytes);
        let db = Db::open(dir, small_options(&fs)).expect("open");
        check_all_and(
            &db,
            500,
            (round > 0).then_some((&b"after"[..], &b"open"[..])),
        );
        db.put(b"after", b"open").expect("put");
        drop(db);
        assert!(!fs.exists(&dir.join("000900.log")), "round {round}");
        assert_eq!(fs.contents(kept), Some(bytes), "round {round}");
    }
    // A header cut off by a crash: nothing to keep. And a foreign file numbered below the
    // WALs in use, which open deletes unread as an obsolete WAL unless it is set aside.
    write("000950.log", &[0u8; 40]);
    write("000002.log", &foreign);
    let db = Db::open(dir, small_options(&fs)).expect("open");
    check_all_and(&db, 500, Some((b"after", b"open")));
    assert!(!fs.exists(&dir.join("000950.log")));
    assert!(!fs.exists(&dir.join("000002.log")));
    let lost = fs.list(&dir.join("lost")).expect("list lost");
    assert_eq!(lost, vec!["000002.log", "000900.log", "000900.log.1"]);
    assert_eq!(fs.contents(&dir.join("lost/000002.log")), Some(foreign));
}

/// A compaction held its input version while deleting obsolete files, so its own inputs
/// survived on disk until some later job ran.
#[test]
fn regression_compaction_inputs_are_deleted_when_it_finishes() {
    use shale::env::Fs;
    let fs = MemFs::new();
    let dir = Path::new("/db");
    let db = Db::open(dir, small_options(&fs)).expect("open");
    for i in 0..4000 {
        let (k, v) = kv(i % 1500);
        db.put(&k, &v).expect("put");
    }
    db.compact_range(None, None).expect("compact");
    db.wait_for_compactions().expect("wait");
    let live: usize = db.stats().levels.iter().map(|l| l.files).sum();
    let on_disk = fs
        .list(dir)
        .expect("list")
        .iter()
        .filter(|n| n.ends_with(".sst"))
        .count();
    assert_eq!(
        on_disk, live,
        "every table on disk must be live after compaction"
    );
}

/// A finished WAL is kept and written over by a later one (`Options::recycle_log_file_num`);
/// past the new log's end the file still holds the earlier log's records, intact, checksums
/// and all. Recovery must take them for the new log's end: read as the new log's, they would
/// either be replayed (bringing back keys whose deletions compaction has since dropped) or make
/// the new log's torn end look like damage followed by intact data.
#[test]
fn a_reused_wal_never_replays_what_its_earlier_log_left() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    let db = Db::open(dir, small_options(&fs)).expect("open");
    // Every WAL gets both puts and deletions of keys that end up deleted.
    for round in 0..4 {
        for i in round * 500..round * 500 + 500 {
            let (k, v) = kv(i);
            db.put(&k, &v).expect("put");
        }
        for i in round * 500..round * 500 + 500 {
            db.delete(kv(i).0).expect("delete");
        }
    }
    assert!(
        db.stats().wal_files_reused > 0,
        "the test must write over reused WAL files"
    );
    // Drop the deleted keys' values and tombstones from the tables (the compaction deletes
    // the kept WAL files), then switch memtables until the active WAL is a reused file.
    db.compact_range(None, None).expect("compact");
    let reused = db.stats().wal_files_reused;
    let mut i = 20_000;
    while db.stats().wal_files_reused == reused {
        let (k, v) = kv(i);
        db.put(&k, &v).expect("put");
        db.delete(&k).expect("delete");
        i += 1;
    }
    // A few writes go to the active WAL, a reused file far longer than they are.
    for i in 10_000..10_005 {
        let (k, v) = kv(i);
        db.put(&k, &v).expect("put");
    }
    let copy = MemFs::new();
    copy_dir(&fs, &copy, dir);
    std::mem::forget(db);

    let db = Db::open(dir, small_options(&copy)).expect("reopen after a crash");
    let keys: Vec<Vec<u8>> = db
        .range::<&[u8], _>(..)
        .map(|e| e.expect("scan").0)
        .collect();
    let expected: Vec<Vec<u8>> = (10_000..10_005).map(|i| kv(i).0).collect();
    assert_eq!(keys, expected);
    // And after a clean close, the reused WALs (sealed and trimmed) reopen the same way.
    drop(db);
    let db = Db::open(dir, small_options(&copy)).expect("reopen after a clean close");
    assert_eq!(db.range::<&[u8], _>(..).count(), 5);
}

/// A manual compaction reclaims the disk a WAL file kept for reuse holds: after it, the
/// directory holds only the active WAL.
#[test]
fn compact_range_deletes_the_wal_files_kept_for_reuse() {
    use shale::env::Fs;
    let fs = MemFs::new();
    let dir = Path::new("/db");
    let db = Db::open(dir, small_options(&fs)).expect("open");
    put_all(&db, 2000);
    let wals = |fs: &MemFs| {
        fs.list(dir)
            .expect("list")
            .into_iter()
            .filter(|n| n.ends_with(".log"))
            .count()
    };
    assert!(db.stats().wal_files_reused > 0);
    db.compact_range(None, None).expect("compact");
    assert_eq!(wals(&fs), 1, "only the active WAL is left");
    check_all(&db, 2000);
    drop(db);
    let db = Db::open(dir, small_options(&fs)).expect("reopen");
    check_all(&db, 2000);
}

/// A snapshot reads only the handle it came from: another database (or a later open of the
/// same one) never pinned its sequence number, so its compactions could drop what the
/// snapshot should see. Reads through a foreign snapshot are refused, never answered.
#[test]
fn a_snapshot_from_another_handle_is_refused() {
    use shale::ReadOptions;
    let fs = MemFs::new();
    let a = Db::open(Path::new("/a"), small_options(&fs)).expect("open a");
    let b = Db::open(Path::new("/b"), small_options(&fs)).expect("open b");
    a.put(b"k", b"a").expect("put");
    b.put(b"k", b"b").expect("put");
    let from_a = ReadOptions {
        snapshot: Some(a.snapshot()),
        ..ReadOptions::default()
    };
    assert_eq!(
        a.get_opt(b"k", &from_a).expect("own snapshot"),
        Some(b"a".to_vec())
    );
    match b.get_opt(b"k", &from_a) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("/b"), "{m}"),
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
    let mut it = b.iter(from_a.clone());
    it.seek_to_first();
    assert!(!it.valid());
    assert!(matches!(it.status(), Err(Error::InvalidArgument(_))));
    it.seek(b"k");
    assert!(!it.valid(), "a seek does not clear the refusal");
    assert!(it.status().is_err());

    // The same directory, reopened: the old handle's snapshot is foreign to the new one.
    let old = ReadOptions {
        snapshot: Some(b.snapshot()),
        ..ReadOptions::default()
    };
    drop(it);
    drop(b);
    let b_again = Db::open(Path::new("/b"), small_options(&fs)).expect("reopen b");
    assert!(matches!(
        b_again.get_opt(b"k", &old),
        Err(Error::InvalidArgument(_))
    ));
}

/// Repair reads the salvaged tables as it merges them (not copied into memory first): tables
/// whose keys interleave come out merged, a table damaged in the middle keeps exactly the
/// entries before its damaged block, and the loss is reported with that count and the table
/// moved to `lost/`, while the merge goes on with the other tables.
#[test]
fn repair_merges_tables_as_it_reads_them_and_keeps_what_precedes_damage() {
    use shale::env::Fs;
    let fs = MemFs::new();
    let dir = Path::new("/db");
    let options = Options {
        write_buffer_size: 1 << 20,
        block_size: 512,
        // Every flush stays a level-0 table of its own, overlapping the others.
        ..level0_only(Arc::new(fs.clone()))
    };
    let rounds = 4u32;
    let n = 2000u32;
    {
        let db = Db::open(dir, options.clone()).expect("open");
        write_interleaved_tables(&db, rounds, n);
    }
    let mut tables: Vec<_> = fs
        .list(dir)
        .expect("list")
        .into_iter()
        .filter(|name| name.ends_with(".sst"))
        .collect();
    tables.sort();
    assert_eq!(tables.len(), rounds as usize, "{tables:?}");
    // Damage a data block a third of the way into the second round's table.
    let damaged = dir.join(&tables[1]);
    let mut data = fs.contents(&damaged).expect("table");
    let offset = data.len() / 3;
    data[offset] ^= 0x40;
    fs.set_contents(&damaged, data.clone());

    // An earlier repair kept a file of the same name: it stays, and this one is kept beside it.
    let earlier = dir.join("lost").join(&tables[1]);
    fs.create_dir_all(&dir.join("lost")).expect("mkdir");
    fs.set_contents(&earlier, b"an earlier repair's".to_vec());

    let report = Db::repair(dir, &options).expect("repair");
    assert_eq!(report.tables_scanned, rounds as usize);
    assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
    let problem = &report.problems[0];
    assert!(
        problem.contains(&tables[1]) && problem.contains("damaged after"),
        "{problem}"
    );
    let kept: u64 = problem
        .split("damaged after ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|count| count.parse().ok())
        .unwrap_or_else(|| panic!("no count in {problem}"));
    let per_table = u64::from(n / rounds);
    assert!(kept > 0 && kept < per_table, "{kept} of {per_table} kept");
    assert_eq!(report.entries_recovered, 3 * per_table + kept);
    let kept_file = dir.join("lost").join(format!("{}.1", tables[1]));
    assert_eq!(report.moved_to_lost, vec![kept_file.clone()]);
    assert_eq!(
        fs.contents(&kept_file),
        Some(data),
        "the damaged table, as it was"
    );
    assert_eq!(fs.contents(&earlier), Some(b"an earlier repair's".to_vec()));
    assert!(
        !fs.exists(&damaged),
        "the original is gone from the database"
    );

    // The damaged table's keys (those with i % rounds == 1) survive up to the damage, in key
    // order; every other key survives whole.
    let db = Db::open(dir, options).expect("open after repair");
    let mut damaged_kept = 0;
    for i in 0..n {
        let (k, v) = kv(i);
        let got = db.get(&k).expect("get");
        if i % rounds == 1 {
            if u64::from(i / rounds) < kept {
                assert_eq!(got, Some(v), "key {i}, before the damage");
                damaged_kept += 1;
            } else {
                assert_eq!(got, None, "key {i}, past the damage");
            }
        } else {
            assert_eq!(got, Some(v), "key {i}");
        }
    }
    assert_eq!(damaged_kept, kept);
    assert_eq!(
        db.range::<&[u8], _>(..).count() as u64,
        report.entries_recovered
    );
}

/// Writes keys `0..n` with [`kv`]'s values in `rounds` level-0 tables that interleave: table
/// `r` holds the keys with `i % rounds == r`, so every table spans the whole key range.
fn write_interleaved_tables(db: &Db, rounds: u32, n: u32) {
    for round in 0..rounds {
        for i in (0..n).filter(|i| i % rounds == round) {
            let (k, v) = kv(i);
            db.put(&k, &v).expect("put");
        }
        db.flush().expect("flush");
    }
}

/// Options under which every flush stays a level-0 table of its own (no compaction runs), so
/// that tests can lay out overlapping tables as they like; values uncompressed.
fn level0_only(fs: Arc<dyn shale::env::Fs>) -> Options {
    Options {
        compression: shale::Compression::None,
        level0_file_num_compaction_trigger: 100,
        level0_slowdown_writes_trigger: 100,
        level0_stop_writes_trigger: 100,
        fs,
        ..Options::default()
    }
}

/// The `.sst` files in `dir`.
fn table_names(fs: &dyn shale::env::Fs, dir: &Path) -> Vec<String> {
    let mut names: Vec<_> = fs
        .list(dir)
        .expect("list")
        .into_iter()
        .filter(|name| name.ends_with(".sst"))
        .collect();
    names.sort();
    names
}

/// Repair opens tables a run at a time, not all at once: 40 tables of consecutive key ranges
/// and 3 that span them all need 4 open at once (one per run), and repair succeeds under a
/// descriptor limit far below the table count, where holding every table open ran out.
#[test]
fn repair_holds_open_only_as_many_tables_as_overlap() {
    let fault = shale::env::FaultFs::in_memory();
    let dir = Path::new("/db");
    let options = level0_only(Arc::new(fault.clone()));
    let (slices, per_slice) = (40u32, 50u32);
    let n = slices * per_slice;
    {
        let db = Db::open(dir, options.clone()).expect("open");
        for slice in 0..slices {
            for i in slice * per_slice..(slice + 1) * per_slice {
                let (k, v) = kv(i);
                db.put(&k, &v).expect("put");
            }
            db.flush().expect("flush");
        }
        // Three tables across the whole range: every tenth key rewritten, then every
        // twentieth, then one key deleted.
        for step in [10u32, 20] {
            for i in (0..n).step_by(step as usize) {
                db.put(&kv(i).0, format!("step-{step}").as_bytes())
                    .expect("put");
            }
            db.flush().expect("flush");
        }
        db.put(&kv(0).0, b"first").expect("put");
        db.delete(&kv(n - 1).0).expect("delete");
        db.flush().expect("flush");
    }
    assert_eq!(table_names(&fault, dir).len(), slices as usize + 3);

    fault.set_open_file_limit(Some(12));
    fault.reset_peak_open_files();
    let report = Db::repair(dir, &options).expect("repair under a limit of 12 open files");
    assert_eq!(report.tables_scanned, slices as usize + 3);
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(report.intermediate_tables, 0);
    // Four runs read at once, plus the table being written and the check of a finished one.
    let peak = fault.peak_open_files();
    assert!(peak <= 6, "{peak} files open at once");

    fault.set_open_file_limit(None);
    let db = Db::open(dir, options).expect("open after repair");
    for i in 0..n {
        let (k, v) = kv(i);
        let want = match i {
            0 => Some(b"first".to_vec()),
            _ if i == n - 1 => None,
            _ if i % 20 == 0 => Some(b"step-20".to_vec()),
            _ if i % 10 == 0 => Some(b"step-10".to_vec()),
            _ => Some(v),
        };
        assert_eq!(db.get(&k).expect("get"), want, "key {i}");
    }
}

/// When more tables overlap than `max_open_files` lets repair hold open, it merges groups of
/// them into intermediate tables first, never holding more open than that, and removes them
/// (with the scratch directory they were written in) once the new manifest is in place. The
/// newest version of every key wins across the passes, deletions included, even for a key
/// whose versions fill several intermediate tables; the database takes new writes after it.
#[test]
fn repair_merges_deep_overlaps_in_passes_within_max_open_files() {
    use shale::env::Fs;
    let fault = shale::env::FaultFs::in_memory();
    let dir = Path::new("/db");
    let options = Options {
        // Six runs at a time (16 less the descriptors repair keeps for other files).
        max_open_files: 16,
        max_file_size: 16 * 1024,
        ..level0_only(Arc::new(fault.clone()))
    };
    // 40 tables, each across the whole key range, each rewriting key 0 and holding 100
    // versions of key 1: 40 runs, six at a time, so that a later pass merges the run an
    // earlier one wrote.
    let (rounds, n) = (40u32, 4000u32);
    let hot = kv(1).0;
    {
        let db = Db::open(dir, options.clone()).expect("open");
        for round in 0..rounds {
            for i in (0..n).filter(|i| i % rounds == round && *i > 2) {
                let (k, v) = kv(i);
                db.put(&k, &v).expect("put");
            }
            db.put(&kv(0).0, format!("round-{round}").as_bytes())
                .expect("put");
            for version in 0..100 {
                db.put(&hot, format!("hot-{round}-{version}").as_bytes())
                    .expect("put");
            }
            if round == rounds - 1 {
                db.delete(&kv(2).0).expect("delete");
            }
            db.flush().expect("flush");
        }
    }
    assert_eq!(table_names(&fault, dir).len(), rounds as usize);

    fault.reset_peak_open_files();
    let report = Db::repair(dir, &options).expect("repair");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert!(report.intermediate_tables > 0, "{report:?}");
    // Six tables read at once, plus the table being written and the check of a finished one.
    let peak = fault.peak_open_files();
    assert!(peak <= 8, "{peak} files open at once");
    assert_eq!(
        table_names(&fault, dir).len(),
        report.tables_written,
        "only the new tables are left"
    );
    assert!(!fault.exists(&dir.join("repair-scratch")));

    let db = Db::open(dir, options.clone()).expect("open after repair");
    for i in 0..n {
        let (k, v) = kv(i);
        let want = match i {
            0 => Some(format!("round-{}", rounds - 1).into_bytes()),
            1 => Some(format!("hot-{}-99", rounds - 1).into_bytes()),
            2 => None,
            _ => Some(v),
        };
        assert_eq!(db.get(&k).expect("get"), want, "key {i}");
    }
    // The repaired database's sequence numbers are past every salvaged entry's.
    db.put(&hot, b"after repair").expect("put");
    db.delete(&kv(0).0).expect("delete");
    drop(db);
    let db = Db::open(dir, options).expect("reopen");
    assert_eq!(db.get(&hot).expect("get"), Some(b"after repair".to_vec()));
    assert_eq!(db.get(&kv(0).0).expect("get"), None);
}

/// Running out of descriptors while the merge reopens tables stops the repair with an error
/// that says so, and the directory is left exactly as it was: every file, with its bytes.
#[test]
fn repair_out_of_descriptors_stops_and_changes_nothing() {
    use shale::env::Fs;
    let fs = MemFs::new();
    let fault = shale::env::FaultFs::new(Arc::new(fs.clone()));
    let dir = Path::new("/db");
    let options = level0_only(Arc::new(fault.clone()));
    {
        let db = Db::open(dir, options.clone()).expect("open");
        // Five tables across the whole range: five runs to hold open at once.
        write_interleaved_tables(&db, 5, 500);
    }
    let before: Vec<(String, Vec<u8>)> = fs
        .list(dir)
        .expect("list")
        .into_iter()
        .map(|name| {
            let bytes = fs.contents(&dir.join(&name)).unwrap_or_default();
            (name, bytes)
        })
        .collect();

    // One table at a time is enough to scan, not to merge.
    fault.set_open_file_limit(Some(3));
    let err = Db::repair(dir, &options).expect_err("too few descriptors");
    assert!(err.is_out_of_handles(), "{err}");
    assert!(err.to_string().contains("nothing was changed"), "{err}");
    let after: Vec<(String, Vec<u8>)> = fs
        .list(dir)
        .expect("list")
        .into_iter()
        .map(|name| {
            let bytes = fs.contents(&dir.join(&name)).unwrap_or_default();
            (name, bytes)
        })
        .collect();
    assert_eq!(
        before.iter().map(|(n, _)| n).collect::<Vec<_>>(),
        after.iter().map(|(n, _)| n).collect::<Vec<_>>()
    );
    assert!(before == after, "a file's bytes changed");

    // With the descriptors back, the same repair goes through and keeps everything.
    fault.set_open_file_limit(None);
    let report = Db::repair(dir, &options).expect("repair");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    let db = Db::open(dir, options).expect("open after repair");
    for i in 0..500u32 {
        let (k, v) = kv(i);
        assert_eq!(db.get(&k).expect("get"), Some(v), "key {i}");
    }
}

/// `destroy` removes what a crashed repair left in its scratch directory, and keeps `lost/`.
#[test]
fn destroy_removes_a_repairs_scratch_directory() {
    use shale::env::Fs;
    let fs = MemFs::new();
    let dir = Path::new("/db");
    let options = small_options(&fs);
    drop(Db::open(dir, options.clone()).expect("open"));
    let scratch = dir.join("repair-scratch");
    fs.create_dir_all(&scratch).expect("mkdir");
    fs.set_contents(&scratch.join("000009.sst"), b"half a table".to_vec());
    fs.create_dir_all(&dir.join("lost")).expect("mkdir");
    fs.set_contents(&dir.join("lost").join("000003.sst"), b"kept".to_vec());
    Db::destroy(dir, &options).expect("destroy");
    assert!(!fs.exists(&scratch));
    assert!(fs.exists(&dir.join("lost").join("000003.sst")));
}

/// A table the manifest names but that is gone (often why repair runs) keeps its number: the
/// new tables are numbered past it, so that the old manifest, should the repair stop before
/// replacing it, never names a file repair wrote.
#[test]
fn repair_numbers_new_tables_past_those_the_old_manifest_names() {
    use shale::env::Fs;
    let fs = MemFs::new();
    let dir = Path::new("/db");
    let options = level0_only(Arc::new(fs.clone()));
    {
        let db = Db::open(dir, options.clone()).expect("open");
        write_interleaved_tables(&db, 3, 300);
    }
    let number = |name: &str| -> u64 {
        name.split('.')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    let newest = table_names(&fs, dir)
        .into_iter()
        .max_by_key(|name| number(name))
        .expect("a table");
    let gone = number(&newest);
    // Nothing else on disk is numbered past the newest table (its WAL is older)...
    fs.remove(&dir.join(&newest)).expect("remove");
    let highest_left = fs
        .list(dir)
        .expect("list")
        .iter()
        .map(|name| number(name))
        .max()
        .unwrap_or(0);
    assert!(
        highest_left < gone,
        "{highest_left} >= {gone}: the test needs the newest file gone"
    );

    let report = Db::repair(dir, &options).expect("repair");
    assert!(report.tables_written > 0);
    // ...yet no new table takes its number or one below it.
    for name in table_names(&fs, dir) {
        assert!(number(&name) > gone, "new table {name} at or below {gone}");
    }
}

/// Where the filesystem cannot link, a damaged file is copied into `lost/` instead: repair
/// still completes and keeps the file's bytes.
#[test]
fn repair_copies_a_damaged_file_into_lost_where_links_fail() {
    use shale::env::{FaultError, FaultSpec, Fs, OpKind};
    let fs = MemFs::new();
    let fault = shale::env::FaultFs::new(Arc::new(fs.clone()));
    let dir = Path::new("/db");
    let options = level0_only(Arc::new(fault.clone()));
    {
        let db = Db::open(dir, options.clone()).expect("open");
        for i in 0..200u32 {
            let (k, v) = kv(i);
            db.put(&k, &v).expect("put");
        }
        db.flush().expect("flush");
    }
    let table = dir.join(&table_names(&fs, dir)[0]);
    let mut data = fs.contents(&table).expect("table");
    let last = data.len() - 1;
    data[last] ^= 0x01; // the footer's magic: the whole table is unreadable
    fs.set_contents(&table, data.clone());
    fault.inject(FaultSpec {
        kind: Some(OpKind::Link),
        nth: 1,
        persistent: true,
        error: FaultError::Io,
    });

    let report = Db::repair(dir, &options).expect("repair");
    let kept = dir.join("lost").join(table.file_name().expect("name"));
    assert_eq!(report.moved_to_lost, vec![kept.clone()]);
    assert_eq!(fs.contents(&kept), Some(data), "the damaged table, copied");
    assert!(!fs.exists(&table));
}
