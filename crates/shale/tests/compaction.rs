//! A compaction reuses its buffers from one user key to the next (the key's input entries and
//! the output it decides on), and may run in parts over adjacent key ranges at once
//! (`max_subcompactions`). Keys with many versions, kept for snapshots, next to keys with one;
//! values of 100 bytes next to values of 100 KiB (which grow a reused buffer past what is
//! kept); deletions: every snapshot and the latest state must read exactly what they read
//! before the compaction, and nothing of one key may leak into the next or be lost or written
//! twice where two parts meet.

use std::collections::BTreeMap;

use shale::{Db, Options, ReadOptions, Snapshot};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn key(i: u32) -> Vec<u8> {
    format!("k{i:04}").into_bytes()
}

/// A value of `len` bytes that names its key and version, so a value of the wrong key or
/// version, or a stale tail, cannot compare equal.
fn value(i: u32, version: u8, len: usize) -> Vec<u8> {
    let mut v = format!("{i}/{version}:").into_bytes();
    v.extend((0..len.saturating_sub(v.len())).map(|j| (j as u32 ^ i) as u8 ^ version));
    v
}

fn scan(db: &Db, options: ReadOptions) -> Model {
    let mut it = db.iter(options);
    let mut got = Model::new();
    it.seek_to_first();
    while it.valid() {
        got.insert(it.key().to_vec(), it.value().to_vec());
        it.next();
    }
    it.status().expect("scan");
    got
}

fn check(db: &Db, snapshot: Option<&Snapshot>, want: &Model, what: &str) {
    let options = || match snapshot {
        Some(s) => ReadOptions::at(s),
        None => ReadOptions::default(),
    };
    let got = scan(db, options());
    assert_eq!(got.len(), want.len(), "{what}: number of keys");
    for (k, v) in want {
        let found = got.get(k).map(Vec::len);
        assert_eq!(
            got.get(k),
            Some(v),
            "{what}: key {k:?} (got {found:?} bytes)"
        );
        let point = db.get_opt(k, &options()).expect("get");
        assert_eq!(point.as_ref(), Some(v), "{what}: get {k:?}");
    }
}

#[test]
fn versions_sizes_and_deletions_survive_compaction_under_snapshots() {
    // One background thread: a manual compaction, which may use the background threads'
    // share, then runs whole too.
    let stats = versions_sizes_and_deletions(Options {
        max_background_jobs: 1,
        ..Options::default()
    });
    assert_eq!(stats.split_compactions, 0, "{stats:?}");
}

#[test]
fn compactions_split_into_parts_lose_and_repeat_nothing() {
    let stats = versions_sizes_and_deletions(Options {
        // Many small tables in every level, for the parts to start at.
        max_file_size: 128 << 10,
        max_subcompactions: 4,
        ..Options::default()
    });
    assert!(
        stats.split_compactions > 0,
        "no compaction was split: {stats:?}"
    );
}

/// Runs the workload with `options` (adjusted below) and checks every view after manual
/// compactions; returns the database's statistics.
fn versions_sizes_and_deletions(options: Options) -> shale::DbStats {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = Options {
        // Small memtables: the versions land in several tables and levels before the manual
        // compaction merges them.
        write_buffer_size: 64 << 10,
        // Large values stay in the tables, so they pass through the compaction's buffers.
        min_blob_size: None,
        ..options
    };
    let db = Db::open(dir.path(), options.clone()).expect("open");
    let mut model = Model::new();
    let large = 100 << 10;

    for i in 0..600u32 {
        let len = if i % 5 == 2 { large } else { 100 };
        let v = value(i, 1, len);
        db.put(key(i), &v).expect("put");
        model.insert(key(i), v);
    }
    let first = db.snapshot();
    let at_first = model.clone();

    for i in 0..600u32 {
        match i % 5 {
            1 | 2 => {
                let v = value(i, 2, 100);
                db.put(key(i), &v).expect("put");
                model.insert(key(i), v);
            }
            3 => {
                db.delete(key(i)).expect("delete");
                model.remove(&key(i));
            }
            _ => {}
        }
    }
    let second = db.snapshot();
    let at_second = model.clone();

    for i in 0..600u32 {
        match i % 5 {
            1 => {
                let v = value(i, 3, 70 << 10);
                db.put(key(i), &v).expect("put");
                model.insert(key(i), v);
            }
            3 => {
                let v = value(i, 3, 10);
                db.put(key(i), &v).expect("put");
                model.insert(key(i), v);
            }
            4 => {
                db.delete(key(i)).expect("delete");
                model.remove(&key(i));
            }
            _ => {}
        }
    }

    db.compact_range(None, None).expect("compact");
    check(&db, Some(&first), &at_first, "first snapshot");
    check(&db, Some(&second), &at_second, "second snapshot");
    check(&db, None, &model, "latest");

    // With the snapshots gone, the next compaction keeps only the newest versions.
    drop(first);
    drop(second);
    db.compact_range(None, None).expect("compact again");
    check(&db, None, &model, "latest after the snapshots");
    let stats = db.stats();
    drop(db);
    let db = Db::open(dir.path(), options).expect("reopen");
    check(&db, None, &model, "latest after reopening");
    stats
}

/// Tables a compaction writes into level 2 and deeper are written a huge page's region at a
/// time ahead of their bytes (zeros first, on Linux) and trimmed before they are synced: every
/// such table, several regions long, must end in its own footer and read back whole.
#[test]
fn tables_of_the_deeper_levels_end_at_their_footers_and_read_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = Options {
        // Small level 1: the data reaches level 2 in tables of several 2 MiB regions.
        write_buffer_size: 1 << 20,
        max_bytes_for_level_base: 2 << 20,
        compression: shale::Compression::None,
        min_blob_size: None,
        ..Options::default()
    };
    let db = Db::open(dir.path(), options.clone()).expect("open");
    let mut model = Model::new();
    // Values that do not compress, so the tables are as large as their entries.
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    for i in 0..12_000u32 {
        let v: Vec<u8> = (0..1000)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        db.put(key(i), &v).expect("put");
        model.insert(key(i), v);
    }
    db.compact_range(None, None).expect("compact");
    let stats = db.stats();
    let deep: Vec<_> = stats
        .levels
        .iter()
        .filter(|l| l.level >= 2 && l.files > 0)
        .collect();
    assert!(!deep.is_empty(), "nothing reached level 2: {stats:?}");
    assert!(
        deep.iter().any(|l| l.bytes / l.files as u64 > 2 << 20),
        "no table of level 2 or deeper spans two regions: {stats:?}"
    );
    check(&db, None, &model, "after compaction");
    drop(db);

    // Every table ends in its footer (no zeros after it) and its blocks check out.
    let fs = shale::env::PosixFs::default();
    for entry in std::fs::read_dir(dir.path()).expect("read dir") {
        let path = entry.expect("entry").path();
        if path.extension().and_then(|e| e.to_str()) == Some("sst") {
            let file = shale::env::Fs::open_random(&fs, &path).expect("open table");
            shale::sstable::TableReader::verify_file(file.as_ref(), &path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        }
    }
    let db = Db::open(dir.path(), options).expect("reopen");
    check(&db, None, &model, "after reopening");
}
