//! WALs sealed by a memtable switch are not synced at the switch (`docs/durability.md`,
//! clauses 2 and 6): recovery keeps the writes up to the first WAL that a crash cut short and
//! drops every newer WAL, unless a newer WAL's sync marker says the damaged one was synced,
//! which makes the damage corruption. The WALs here are written by hand so each case is exact;
//! the last test drives the engine itself through a power loss.

use std::path::Path;
use std::sync::Arc;

use shale::env::{CrashMode, FaultFs, Fs, MemFs};
use shale::filename::wal_file_name;
use shale::wal::{LogKind, LogWriter};
use shale::{Db, Error, Options, WriteBatch, WriteOptions};

const DIR: &str = "/db";

/// A batch record putting `pairs`, numbered from `sequence`.
fn puts(sequence: u64, pairs: &[(&str, &str)]) -> Vec<u8> {
    let mut b = WriteBatch::new();
    for (k, v) in pairs {
        b.put(k, v);
    }
    b.set_sequence(sequence);
    b.data().to_vec()
}

/// A marker record: an empty batch with `sequence` (0 = sync marker, 2^63 = seal).
fn marker(sequence: u64) -> Vec<u8> {
    let mut r = sequence.to_le_bytes().to_vec();
    r.extend_from_slice(&0u32.to_le_bytes());
    r
}
const SYNC: u64 = 0;
const SEAL: u64 = 1 << 63;

/// An empty database whose WALs are all removed, ready for hand-written ones.
fn empty_db() -> MemFs {
    let fs = MemFs::new();
    let options = Options {
        fs: Arc::new(fs.clone()),
        ..Options::default()
    };
    drop(Db::open(DIR, options).expect("create"));
    for name in fs.list(Path::new(DIR)).expect("list") {
        if name.ends_with(".log") {
            fs.remove(&Path::new(DIR).join(name)).expect("remove WAL");
        }
    }
    fs
}

/// Writes WAL `number` holding `records`; returns its length.
fn write_wal(fs: &MemFs, number: u64, records: &[Vec<u8>]) -> usize {
    let path = wal_file_name(Path::new(DIR), number);
    let file = fs.create(&path).expect("create WAL");
    let mut log = LogWriter::new(file, path.clone(), LogKind::Wal, number).expect("writer");
    for r in records {
        log.add_record(r).expect("append");
    }
    log.close().expect("close");
    fs.contents(&path).expect("contents").len()
}

fn open(fs: &MemFs) -> shale::Result<Db> {
    Db::open(
        DIR,
        Options {
            fs: Arc::new(fs.clone()),
            ..Options::default()
        },
    )
}

fn get(db: &Db, key: &str) -> Option<Vec<u8>> {
    db.get(key.as_bytes()).expect("get")
}

#[test]
fn a_sealed_wal_replays_whole_and_so_do_the_newer_ones() {
    let fs = empty_db();
    write_wal(&fs, 100, &[puts(1, &[("a", "1")]), marker(SEAL)]);
    write_wal(&fs, 101, &[puts(2, &[("b", "2")])]);
    let db = open(&fs).expect("open");
    assert_eq!(get(&db, "a").as_deref(), Some(&b"1"[..]));
    assert_eq!(get(&db, "b").as_deref(), Some(&b"2"[..]));
}

#[test]
fn an_older_wal_without_its_seal_ends_recovery_there() {
    // A power loss kept the older WAL only up to a record boundary: it lacks its seal.
    let fs = empty_db();
    write_wal(&fs, 100, &[puts(1, &[("a", "1")]), puts(2, &[("b", "2")])]);
    write_wal(&fs, 101, &[puts(3, &[("c", "3")])]);
    let db = open(&fs).expect("open: a cut-short unsynced WAL is not corruption");
    assert_eq!(get(&db, "a").as_deref(), Some(&b"1"[..]));
    assert_eq!(get(&db, "b").as_deref(), Some(&b"2"[..]));
    // The newer write would leave a gap before the lost tail: dropped.
    assert_eq!(get(&db, "c"), None);
    drop(db);
    // The dropped WAL is retired, not replayed by a later open.
    let db = open(&fs).expect("reopen");
    assert_eq!(get(&db, "c"), None);
    assert_eq!(get(&db, "b").as_deref(), Some(&b"2"[..]));
}

#[test]
fn an_older_wal_with_a_torn_tail_ends_recovery_there() {
    let fs = empty_db();
    let len = write_wal(
        &fs,
        100,
        &[puts(1, &[("a", "1")]), puts(2, &[("b", "2")]), marker(SEAL)],
    );
    // Tear the seal and part of the second record.
    let path = wal_file_name(Path::new(DIR), 100);
    assert!(shale::env::fault::truncate(&fs, &path, len - 24));
    write_wal(&fs, 101, &[puts(3, &[("c", "3")])]);
    let db = open(&fs).expect("open");
    assert_eq!(get(&db, "a").as_deref(), Some(&b"1"[..]));
    assert_eq!(get(&db, "b"), None);
    assert_eq!(get(&db, "c"), None);
}

#[test]
fn damage_to_a_wal_that_a_newer_wal_records_as_synced_is_corruption() {
    for torn in [false, true] {
        let fs = empty_db();
        let len = write_wal(&fs, 100, &[puts(1, &[("a", "1")]), puts(2, &[("b", "2")])]);
        if torn {
            let path = wal_file_name(Path::new(DIR), 100);
            assert!(shale::env::fault::truncate(&fs, &path, len - 3));
        }
        write_wal(&fs, 101, &[marker(SYNC), puts(3, &[("c", "3")])]);
        match open(&fs) {
            Err(Error::Corruption { message, .. }) => {
                assert!(message.contains("records as synced"), "{message}")
            }
            Err(e) => panic!("torn={torn}: expected corruption, got {e}"),
            Ok(_) => panic!("torn={torn}: a synced WAL cut short must not open"),
        }
    }
}

#[test]
fn a_synced_write_makes_the_sealed_wals_before_it_durable() {
    let fs = FaultFs::in_memory();
    let options = Options {
        write_buffer_size: 8 * 1024,
        level0_file_num_compaction_trigger: 100,
        level0_slowdown_writes_trigger: 100,
        level0_stop_writes_trigger: 100,
        fs: Arc::new(fs.clone()),
        ..Options::default()
    };
    let db = Db::open(DIR, options.clone()).expect("open");
    // Slow table syncs keep each flush running while the writer goes on, so the last sealed
    // WAL is still needed (its memtable unflushed) when the synced write comes.
    fs.set_sync_latency(Some(std::time::Duration::from_millis(20)));
    // Enough unsynced writes to fill and seal several memtables and their WALs.
    for i in 0..2000u32 {
        db.put(format!("k{i:05}"), format!("v{i}")).expect("put");
    }
    assert!(db.stats().flushes + 1 < 2000 / 100, "several memtables");
    let synced = WriteOptions {
        sync: true,
        ..WriteOptions::default()
    };
    db.put_opt("last", "synced", &synced).expect("synced put");
    fs.set_sync_latency(None);
    let image = fs.crash_image(CrashMode::PowerLoss, 1);
    drop(db);
    let db = Db::open(
        DIR,
        Options {
            fs: Arc::new(image),
            ..options
        },
    )
    .expect("reopen after power loss");
    for i in 0..2000u32 {
        let key = format!("k{i:05}");
        assert_eq!(
            get(&db, &key),
            Some(format!("v{i}").into_bytes()),
            "{key}: written before a synced write, so durable with it"
        );
    }
    assert_eq!(get(&db, "last").as_deref(), Some(&b"synced"[..]));
}
