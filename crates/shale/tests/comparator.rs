//! A database ordered by a user comparator (here: descending bytes) keeps that order everywhere:
//! iteration both ways, range bounds, point lookups and overwrites across flushes and
//! compactions, and reopening. Guards the comparator dispatch (the built-in bytewise order is
//! compared inline; any other goes through the user's `Comparator`). On the in-memory
//! filesystem.

use std::cmp::Ordering;
use std::path::Path;
use std::sync::Arc;

use shale::env::MemFs;
use shale::{Comparator, Db, Error, Options, ReadOptions};

/// Descending byte order.
struct Descending;

impl Comparator for Descending {
    fn name(&self) -> &str {
        "test.Descending"
    }

    fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
        b.cmp(a)
    }
}

fn options(fs: &MemFs) -> Options {
    Options {
        fs: Arc::new(fs.clone()),
        comparator: Arc::new(Descending),
        write_buffer_size: 16 * 1024,
        max_file_size: 8 * 1024,
        level0_file_num_compaction_trigger: 2,
        ..Options::default()
    }
}

fn key(i: usize) -> Vec<u8> {
    format!("key{i:04}").into_bytes()
}

fn forward(db: &Db) -> Vec<Vec<u8>> {
    let mut it = db.iter(ReadOptions::default());
    it.seek_to_first();
    let mut keys = Vec::new();
    while it.valid() {
        keys.push(it.key().to_vec());
        it.next();
    }
    it.status().expect("iterator");
    keys
}

#[test]
fn a_user_comparator_orders_everything() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    let db = Db::open(dir, options(&fs)).expect("open");
    for round in 0..3 {
        for i in 0..400 {
            db.put(key(i), format!("r{round}-{i}")).expect("put");
        }
        db.flush().expect("flush");
    }
    for i in (0..400).step_by(3) {
        db.delete(key(i)).expect("delete");
    }
    let expected: Vec<Vec<u8>> = (0..400).rev().filter(|i| i % 3 != 0).map(key).collect();
    let check = |db: &Db| {
        assert_eq!(forward(db), expected);
        // Backwards is ascending.
        let mut it = db.iter(ReadOptions::default());
        it.seek_to_last();
        let mut back = Vec::new();
        while it.valid() {
            back.push(it.key().to_vec());
            it.prev();
        }
        it.status().expect("iterator");
        let mut ascending = expected.clone();
        ascending.reverse();
        assert_eq!(back, ascending);
        // A seek lands on the first key at or after the target in the database's order.
        let mut it = db.iter(ReadOptions::default());
        it.seek(&key(250));
        assert_eq!(it.key(), key(250).as_slice());
        it.seek(&key(3));
        assert_eq!(it.key(), key(2).as_slice());
        // Bounds follow the comparator: "key0300" comes before "key0100" here.
        let bounded: Vec<Vec<u8>> = db
            .range(key(300).as_slice()..key(100).as_slice())
            .map(|e| e.map(|(k, _)| k))
            .collect::<shale::Result<_>>()
            .expect("range");
        let want: Vec<Vec<u8>> = (101..=300).rev().filter(|i| i % 3 != 0).map(key).collect();
        assert_eq!(bounded, want);
        for i in 0..400 {
            let got = db.get(key(i)).expect("get");
            if i % 3 == 0 {
                assert_eq!(got, None, "key {i}");
            } else {
                assert_eq!(got, Some(format!("r2-{i}").into_bytes()), "key {i}");
            }
        }
    };
    check(&db);
    db.compact_range(None, None).expect("compact");
    db.wait_for_compactions().expect("wait");
    check(&db);
    drop(db);
    let db = Db::open(dir, options(&fs)).expect("reopen");
    check(&db);
    drop(db);
    // The manifest remembers the order: the built-in one is refused.
    let reopened = Db::open(
        dir,
        Options {
            comparator: Arc::new(shale::BytewiseComparator),
            ..options(&fs)
        },
    );
    let Err(err) = reopened else {
        panic!("opening with another comparator must fail");
    };
    assert!(
        matches!(err, Error::InvalidArgument(_) | Error::Corruption { .. }),
        "{err}"
    );
}

/// Repair with the wrong comparator must not mistake well-formed tables for damage (it used to
/// move every one of them to `lost/` and record the wrong order); with the right one it
/// salvages everything.
#[test]
fn repair_refuses_another_comparator_and_changes_nothing() {
    use shale::env::Fs;
    let fs = MemFs::new();
    let dir = Path::new("/db");
    {
        let db = Db::open(dir, options(&fs)).expect("open");
        for i in 0..400 {
            db.put(key(i), format!("v{i}")).expect("put");
        }
        db.flush().expect("flush");
    }
    let listing = |fs: &MemFs| {
        let mut names = fs.list(dir).expect("list");
        names.sort();
        names
    };
    let before = listing(&fs);
    assert!(before.iter().any(|n| n.ends_with(".sst")), "{before:?}");
    let bytewise = Options {
        comparator: Arc::new(shale::BytewiseComparator),
        ..options(&fs)
    };
    match Db::repair(dir, &bytewise) {
        Err(Error::InvalidArgument(message)) => {
            assert!(message.contains("test.Descending"), "{message}");
            assert!(message.contains("nothing was changed"), "{message}");
        }
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
    assert_eq!(
        listing(&fs),
        before,
        "a refused repair must leave the files as they were"
    );
    let report = Db::repair(dir, &options(&fs)).expect("repair");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    let db = Db::open(dir, options(&fs)).expect("open after repair");
    let expected: Vec<Vec<u8>> = (0..400).rev().map(key).collect();
    assert_eq!(forward(&db), expected);
}
