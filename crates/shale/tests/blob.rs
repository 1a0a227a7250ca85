//! Key-value separation end to end (`docs/format/blob.md`): values at or above
//! `min_blob_size` live in blob files; reads, snapshots, merges, TTL and compaction filters see
//! the real values; compaction reclaims blob space; checkpoint, repair and recovery keep blob
//! values; damage in a blob file is reported, never returned as data. On the in-memory
//! filesystem, with time driven by a `ManualClock`, except one test of blob files on disk.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use shale::env::{Fs, ManualClock, MemFs};
use shale::{
    CompactionFilter, Db, Error, FilterDecision, Options, ReadOptions, StringAppendOperator,
    WriteOptions,
};

const T0: u64 = 1_700_000_000_000_000;
const SECOND: u64 = 1_000_000;

fn options(fs: &MemFs) -> Options {
    Options {
        fs: Arc::new(fs.clone()),
        min_blob_size: Some(64),
        write_buffer_size: 16 * 1024,
        max_file_size: 16 * 1024,
        max_bytes_for_level_base: 64 * 1024,
        level0_file_num_compaction_trigger: 2,
        merge_operator: Some(Arc::new(StringAppendOperator::new(b","))),
        clock: Arc::new(ManualClock::new(T0)),
        ..Options::default()
    }
}

fn big(tag: &str, i: usize) -> Vec<u8> {
    let mut v = format!("{tag}-{i:05}-").into_bytes();
    v.resize(1000, b'a' + (i % 26) as u8);
    v
}

fn key(i: usize) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// The blob files in `dir` and their total size.
fn blob_files(fs: &MemFs, dir: &Path) -> (usize, u64) {
    let mut count = 0;
    let mut bytes = 0;
    for name in fs.list(dir).expect("list") {
        if name.ends_with(".blob") {
            count += 1;
            bytes += fs.file_size(&dir.join(&name)).expect("size");
        }
    }
    (count, bytes)
}

fn scan(db: &Db, options: ReadOptions) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut it = db.iter(options);
    it.seek_to_first();
    let mut out = Vec::new();
    while it.valid() {
        out.push((it.key().to_vec(), it.try_value().expect("value").to_vec()));
        it.next();
    }
    it.status().expect("scan");
    out
}

fn scan_back(db: &Db) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut it = db.iter(ReadOptions::default());
    it.seek_to_last();
    let mut out = Vec::new();
    while it.valid() {
        out.push((it.key().to_vec(), it.try_value().expect("value").to_vec()));
        it.prev();
    }
    it.status().expect("reverse scan");
    out.reverse();
    out
}

#[test]
fn large_values_go_to_blob_files_and_read_back_everywhere() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    let db = Db::open(dir, options(&fs)).expect("open");
    for i in 0..50 {
        db.put(key(i), big("v", i)).expect("put");
        db.put(format!("small{i:03}"), b"tiny").expect("put small");
    }
    assert!(blob_files(&fs, dir).0 >= 1, "a blob file exists");
    assert!(db.stats().blob_bytes_written >= 50 * 1000);
    for i in 0..50 {
        assert_eq!(db.get(key(i)).expect("get"), Some(big("v", i)));
    }
    let forward = scan(&db, ReadOptions::default());
    assert_eq!(forward.len(), 100);
    assert_eq!(forward, scan_back(&db));
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    assert_eq!(scan(&db, ReadOptions::default()), forward);
    drop(db);
    let db = Db::open(dir, options(&fs)).expect("reopen");
    assert_eq!(scan(&db, ReadOptions::default()), forward);
    assert_eq!(db.get(key(7)).expect("get"), Some(big("v", 7)));
}

#[test]
fn separation_off_keeps_values_inline() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    let db = Db::open(
        dir,
        Options {
            min_blob_size: None,
            ..options(&fs)
        },
    )
    .expect("open");
    db.put(b"k", vec![7u8; 100_000]).expect("put");
    db.flush().expect("flush");
    assert_eq!(blob_files(&fs, dir).0, 0);
    assert_eq!(db.get(b"k").expect("get"), Some(vec![7u8; 100_000]));
}

#[test]
fn overwrites_and_compaction_reclaim_blob_files() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    let db = Db::open(dir, options(&fs)).expect("open");
    for round in 0..6 {
        for i in 0..100 {
            db.put(key(i), big(&format!("r{round}"), i)).expect("put");
        }
        db.flush().expect("flush");
    }
    db.compact_range(None, None).expect("compact");
    db.wait_for_compactions().expect("wait");
    let (files_after, bytes_after) = blob_files(&fs, dir);
    let stats = db.stats();
    // Six rounds of 100 values were written; only the last round's stay on disk.
    let live = 100 * 1025;
    assert!(stats.blob_bytes_written >= 6 * live);
    assert!(
        bytes_after < 2 * live && files_after <= 2,
        "{files_after} blob files of {bytes_after} bytes left"
    );
    assert!(stats.blob_garbage_bytes * 2 <= stats.blob_total_bytes.max(1));
    for i in 0..100 {
        assert_eq!(db.get(key(i)).expect("get"), Some(big("r5", i)));
    }
    drop(db);
    let db = Db::open(dir, options(&fs)).expect("reopen");
    for i in 0..100 {
        assert_eq!(db.get(key(i)).expect("get"), Some(big("r5", i)));
    }
}

/// A database that collects a blob file once a fifth of it is garbage.
fn open_collecting(fs: &MemFs, dir: &Path) -> Db {
    Db::open(
        dir,
        Options {
            blob_garbage_collection_threshold: 0.2,
            ..options(fs)
        },
    )
    .expect("open")
}

/// Fills one blob file with values that become garbage (`junk*`, written then deleted) and
/// the values the test reads back (`key(i)` = `big("old", i)`).
fn write_junk_and_old(db: &Db) {
    for i in 0..100 {
        db.put(format!("junk{i:03}"), big("junk", i)).expect("put");
    }
    for i in 0..100 {
        db.delete(format!("junk{i:03}")).expect("delete");
        db.put(key(i), big("old", i)).expect("put");
    }
}

#[test]
fn snapshots_keep_relocated_values_readable() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    let db = open_collecting(&fs, dir);
    // One blob file holds values that become garbage (junk, deleted before the snapshot) and
    // the values the snapshot reads: collecting it must move the latter, not lose them.
    write_junk_and_old(&db);
    db.flush().expect("flush");
    let snapshot = db.snapshot();
    let mut it = db.iter(ReadOptions {
        snapshot: Some(snapshot.clone()),
        ..ReadOptions::default()
    });
    for round in 0..4 {
        for i in 0..100 {
            if i % 4 != 0 {
                db.put(key(i), big(&format!("new{round}"), i)).expect("put");
            }
        }
        db.flush().expect("flush");
        db.compact_range(None, None).expect("compact");
    }
    db.wait_for_compactions().expect("wait");
    assert!(
        db.stats().blob_bytes_relocated > 0,
        "garbage collection ran"
    );
    let at_snapshot = ReadOptions {
        snapshot: Some(snapshot.clone()),
        ..ReadOptions::default()
    };
    for i in 0..100 {
        assert_eq!(
            db.get_opt(key(i), &at_snapshot).expect("get"),
            Some(big("old", i))
        );
        let latest = if i % 4 == 0 {
            big("old", i)
        } else {
            big("new3", i)
        };
        assert_eq!(db.get(key(i)).expect("get"), Some(latest));
    }
    // An iterator made before the compactions still reads what it pinned.
    it.seek_to_first();
    let mut n = 0;
    while it.valid() {
        assert_eq!(it.try_value().expect("value"), big("old", n).as_slice());
        n += 1;
        it.next();
    }
    it.status().expect("old iterator");
    assert_eq!(n, 100);
}

#[test]
fn an_iterator_over_a_memtable_keeps_its_blob_file_after_flush_and_collection() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    let db = open_collecting(&fs, dir);
    // The iterator pins the memtable whose values sit in the active WAL's blob file. After
    // the flush, only the iterator's memtable references that file once compaction has
    // relocated (or dropped) what the tables kept of it; the file must stay until the
    // iterator is gone.
    write_junk_and_old(&db);
    let pinned: Vec<String> = fs
        .list(dir)
        .expect("list")
        .into_iter()
        .filter(|n| n.ends_with(".blob"))
        .collect();
    assert!(!pinned.is_empty());
    let mut it = db.iter(ReadOptions::default());
    db.flush().expect("flush");
    for round in 0..4 {
        for i in 0..100 {
            db.put(key(i), big(&format!("new{round}"), i)).expect("put");
        }
        db.flush().expect("flush");
        db.compact_range(None, None).expect("compact");
    }
    db.wait_for_compactions().expect("wait");
    it.seek_to_first();
    let mut n = 0;
    while it.valid() {
        assert_eq!(it.key(), key(n).as_slice());
        assert_eq!(it.try_value().expect("value"), big("old", n).as_slice());
        n += 1;
        it.next();
    }
    it.status().expect("iterator made before the flush");
    assert_eq!(n, 100);
    drop(it);
    // Once the iterator is gone, its files are garbage like any other: the next flush and
    // compaction delete them (the last round's values and the new put keep two files).
    db.put(key(0), big("last", 0)).expect("put");
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    db.wait_for_compactions().expect("wait");
    let left = fs.list(dir).expect("list");
    for name in &pinned {
        assert!(
            !left.contains(name),
            "{name} is still there after the iterator was dropped: {left:?}"
        );
    }
    let (files, _) = blob_files(&fs, dir);
    assert!(
        files <= 2,
        "{files} blob files left after the iterator was dropped"
    );
}

#[test]
fn ttl_applies_to_blob_values() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    let clock = Arc::new(ManualClock::new(T0));
    let db = Db::open(
        dir,
        Options {
            clock: clock.clone(),
            ..options(&fs)
        },
    )
    .expect("open");
    db.put_with_ttl(b"short", big("s", 1), Duration::from_secs(10))
        .expect("put");
    db.put_with_ttl(b"long", big("l", 2), Duration::from_secs(100))
        .expect("put");
    assert_eq!(db.get(b"short").expect("get"), Some(big("s", 1)));
    clock.advance(20 * SECOND);
    assert_eq!(db.get(b"short").expect("get"), None);
    assert_eq!(db.get(b"long").expect("get"), Some(big("l", 2)));
    assert_eq!(scan(&db, ReadOptions::default()).len(), 1);
    db.compact_range(None, None).expect("compact");
    assert_eq!(db.get(b"short").expect("get"), None);
    assert_eq!(db.get(b"long").expect("get"), Some(big("l", 2)));
    clock.advance(100 * SECOND);
    db.compact_range(None, None).expect("compact");
    db.wait_for_compactions().expect("wait");
    assert_eq!(scan(&db, ReadOptions::default()), Vec::new());
    assert_eq!(db.stats().blob_files, 0, "every blob byte was garbage");
}

#[test]
fn merge_operands_fold_onto_a_blob_base() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    let db = Db::open(dir, options(&fs)).expect("open");
    db.put(b"k", big("base", 0)).expect("put");
    db.merge(b"k", b"x").expect("merge");
    let mut expected = big("base", 0);
    expected.extend_from_slice(b",x");
    assert_eq!(db.get(b"k").expect("get"), Some(expected.clone()));
    assert_eq!(
        scan(&db, ReadOptions::default()),
        vec![(b"k".to_vec(), expected.clone())]
    );
    assert_eq!(scan_back(&db), vec![(b"k".to_vec(), expected.clone())]);
    db.flush().expect("flush");
    db.merge(b"k", b"y").expect("merge");
    expected.extend_from_slice(b",y");
    assert_eq!(db.get(b"k").expect("get"), Some(expected.clone()));
    db.compact_range(None, None).expect("compact");
    assert_eq!(db.get(b"k").expect("get"), Some(expected.clone()));
    assert_eq!(scan_back(&db), vec![(b"k".to_vec(), expected)]);
}

struct DropIfMarked;

impl CompactionFilter for DropIfMarked {
    fn name(&self) -> &str {
        "drop-if-marked"
    }
    fn filter(&self, _level: usize, _key: &[u8], value: &[u8]) -> FilterDecision {
        if value.starts_with(b"drop") {
            FilterDecision::Remove
        } else if value.starts_with(b"shrink") {
            FilterDecision::ChangeValue(b"shrunk".to_vec())
        } else {
            FilterDecision::Keep
        }
    }
}

#[test]
fn compaction_filter_sees_the_real_value() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    let db = Db::open(
        dir,
        Options {
            compaction_filter: Some(Arc::new(DropIfMarked)),
            ..options(&fs)
        },
    )
    .expect("open");
    db.put(b"a", big("drop", 1)).expect("put");
    db.put(b"b", big("shrink", 2)).expect("put");
    db.put(b"c", big("keep", 3)).expect("put");
    db.compact_range(None, None).expect("compact");
    assert_eq!(db.get(b"a").expect("get"), None);
    assert_eq!(db.get(b"b").expect("get"), Some(b"shrunk".to_vec()));
    assert_eq!(db.get(b"c").expect("get"), Some(big("keep", 3)));
}

#[test]
fn damaged_blob_is_corruption_naming_the_file() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    let db = Db::open(dir, options(&fs)).expect("open");
    db.put(b"k", big("v", 1)).expect("put");
    db.flush().expect("flush");
    drop(db);
    let name = fs
        .list(dir)
        .expect("list")
        .into_iter()
        .find(|n| n.ends_with(".blob"))
        .expect("a blob file");
    let path = dir.join(&name);
    let mut bytes = fs.contents(&path).expect("contents");
    let last = bytes.len() - 10;
    bytes[last] ^= 0x40;
    fs.set_contents(&path, bytes);
    let db = Db::open(dir, options(&fs)).expect("reopen");
    match db.get(b"k") {
        Err(Error::Corruption { path: p, .. }) => assert_eq!(p, path),
        other => panic!(
            "expected corruption naming {}, got {other:?}",
            path.display()
        ),
    }
    let mut it = db.iter(ReadOptions::default());
    it.seek_to_first();
    assert!(it.valid(), "keys are readable without their values");
    assert!(it.try_value().is_err());
    assert!(it.value().is_empty());
    assert!(matches!(it.status(), Err(Error::Corruption { .. })));
}

#[test]
fn checkpoint_links_blob_files() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    let db = Db::open(dir, options(&fs)).expect("open");
    for i in 0..40 {
        db.put(key(i), big("v", i)).expect("put");
    }
    db.checkpoint("/copy").expect("checkpoint");
    let expected = scan(&db, ReadOptions::default());
    drop(db);
    assert!(blob_files(&fs, Path::new("/copy")).0 >= 1);
    let copy = Db::open("/copy", options(&fs)).expect("open checkpoint");
    assert_eq!(scan(&copy, ReadOptions::default()), expected);
}

#[test]
fn repair_keeps_blob_values() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    let db = Db::open(dir, options(&fs)).expect("open");
    for i in 0..40 {
        db.put(key(i), big("v", i)).expect("put");
        if i == 20 {
            db.flush().expect("flush");
        }
    }
    let expected = scan(&db, ReadOptions::default());
    drop(db);
    // Lose the manifest: repair must rebuild it from the tables and the WAL.
    for name in fs.list(dir).expect("list") {
        if name.starts_with("MANIFEST") || name == "CURRENT" {
            fs.remove(&dir.join(name)).expect("remove");
        }
    }
    let report = Db::repair(dir, &options(&fs)).expect("repair");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    let db = Db::open(dir, options(&fs)).expect("open repaired");
    assert_eq!(scan(&db, ReadOptions::default()), expected);
    db.put(b"after", big("after", 0)).expect("put after repair");
    db.compact_range(None, None).expect("compact");
    assert_eq!(db.get(key(3)).expect("get"), Some(big("v", 3)));
}

#[test]
fn synced_writes_sync_their_blob_file_and_survive_reopen() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    let db = Db::open(dir, options(&fs)).expect("open");
    let sync = WriteOptions {
        sync: true,
        ..WriteOptions::default()
    };
    for i in 0..10 {
        db.put_opt(key(i), big("s", i), &sync).expect("put");
    }
    drop(db);
    let db = Db::open(dir, options(&fs)).expect("reopen");
    for i in 0..10 {
        assert_eq!(db.get(key(i)).expect("get"), Some(big("s", i)));
    }
}

/// A blob file that cannot be opened for a reason other than its absence (EIO here) says
/// nothing about whether the values are durable: open fails and changes nothing, where it used
/// to drop the WAL's tail from the first separated value as torn, for good.
#[test]
fn an_io_error_reading_blob_values_at_replay_fails_the_open_and_loses_nothing() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let mem = MemFs::new();
    let dir = Path::new("/db");
    let db = Db::open(dir, options(&mem)).expect("open");
    for i in 0..5 {
        db.put(key(i), big("w", i)).expect("put");
    }
    drop(db);
    let failing = Arc::new(AtomicBool::new(true));
    let gate = failing.clone();
    let fs = common::HookedFs::new(mem.clone()).before_open(move |path| {
        let blob = path.extension().is_some_and(|e| e == "blob");
        if blob && gate.load(Ordering::SeqCst) {
            return Err(Error::Io {
                op: "open",
                path: path.to_path_buf(),
                source: std::io::Error::other("injected EIO"),
            });
        }
        Ok(())
    });
    let with_fs = |fs: Arc<dyn shale::env::Fs>| Options {
        fs,
        ..options(&mem)
    };
    match Db::open(dir, with_fs(Arc::new(fs.clone()))) {
        Err(Error::Io { source, .. }) => assert!(source.to_string().contains("injected")),
        other => panic!("expected the I/O error, got {:?}", other.map(|_| ())),
    }
    failing.store(false, Ordering::SeqCst);
    let db = Db::open(dir, with_fs(Arc::new(fs))).expect("open once the error is gone");
    for i in 0..5 {
        assert_eq!(db.get(key(i)).expect("get"), Some(big("w", i)), "key {i}");
    }
}

#[test]
fn callers_cannot_write_blob_references() {
    let fs = MemFs::new();
    let db = Db::open(Path::new("/db"), options(&fs)).expect("open");
    // A batch holding a BlobIndex (kind 4) record: key "k", reference to file 1, offset 20.
    let mut data = vec![0u8; 12];
    data[8] = 1; // count
    data.extend_from_slice(&[4, 1, b'k', 3, 1, 20, 30]);
    let batch =
        shale::WriteBatch::from_data(data, Path::new("/crafted"), 0).expect("a valid encoding");
    assert!(matches!(db.write(batch), Err(Error::InvalidArgument(_))));
    assert_eq!(db.get(b"k").expect("get"), None);
}

#[test]
fn read_only_open_and_seeks_resolve_blob_values() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    let db = Db::open(dir, options(&fs)).expect("open");
    for i in 0..30 {
        db.put(key(i), big("v", i)).expect("put");
        if i == 15 {
            db.flush().expect("flush");
        }
    }
    drop(db); // half in a table, half only in the WAL (and its blob file)
    let ro = Db::open_read_only(dir, options(&fs)).expect("read-only open");
    assert_eq!(ro.get(key(20)).expect("get"), Some(big("v", 20)));
    let mut it = ro.iter(ReadOptions {
        lower_bound: Some(key(5)),
        upper_bound: Some(key(25)),
        ..ReadOptions::default()
    });
    it.seek(&key(10));
    assert_eq!(it.key(), key(10).as_slice());
    assert_eq!(it.try_value().expect("value"), big("v", 10).as_slice());
    it.prev();
    assert_eq!(it.try_value().expect("value"), big("v", 9).as_slice());
    it.seek_for_prev(&key(29));
    assert_eq!(it.key(), key(24).as_slice());
    assert_eq!(it.try_value().expect("value"), big("v", 24).as_slice());
    it.next();
    assert!(!it.valid());
    it.status().expect("status");
    let back: Vec<_> = ro
        .range(key(3)..key(7))
        .rev()
        .map(|r| r.expect("item").1)
        .collect();
    assert_eq!(back, (3..7).rev().map(|i| big("v", i)).collect::<Vec<_>>());
}

#[test]
fn default_ttl_applies_to_separated_values() {
    let fs = MemFs::new();
    let clock = Arc::new(ManualClock::new(T0));
    let db = Db::open(
        Path::new("/db"),
        Options {
            default_ttl: Some(Duration::from_secs(5)),
            clock: clock.clone(),
            ..options(&fs)
        },
    )
    .expect("open");
    db.put(b"k", big("ttl", 0)).expect("put");
    db.flush().expect("flush");
    assert_eq!(db.get(b"k").expect("get"), Some(big("ttl", 0)));
    clock.advance(6 * SECOND);
    assert_eq!(db.get(b"k").expect("get"), None);
    db.compact_range(None, None).expect("compact");
    db.wait_for_compactions().expect("wait");
    assert_eq!(db.stats().blob_files, 0);
}

#[test]
fn concurrent_separated_puts_and_batches() {
    let fs = MemFs::new();
    let db = Arc::new(Db::open(Path::new("/db"), options(&fs)).expect("open"));
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let db = db.clone();
            std::thread::spawn(move || {
                for i in 0..200 {
                    let k = format!("t{t}-{i:04}");
                    if i % 3 == 0 {
                        let mut b = shale::WriteBatch::new();
                        b.put(&k, big("batch", i));
                        b.put(format!("{k}-small"), b"s");
                        db.write(b).expect("batch");
                    } else {
                        db.put(&k, big("put", i)).expect("put");
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("writer");
    }
    for t in 0..4 {
        for i in 0..200 {
            let k = format!("t{t}-{i:04}");
            let expected = if i % 3 == 0 {
                big("batch", i)
            } else {
                big("put", i)
            };
            assert_eq!(db.get(&k).expect("get"), Some(expected), "{k}");
        }
    }
    assert_eq!(db.stats().user_writes, 4 * (200 + 67));
}

/// Copies every file of `from` into `to`: what a crash would leave if the page cache survived
/// it (the files are copied while the database is open, nothing closed or synced).
fn copy_files(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create copy");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("entry");
        if entry.file_type().expect("file type").is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name())).expect("copy");
        }
    }
}

/// On the real filesystem a blob file may extend past its records with zeros (laid out ahead
/// for the page cache, `docs/format/blob.md`): values read back while it is written, a crash
/// image taken then recovers every value, and the closed file keeps its zeros and its size.
#[test]
fn blob_files_on_disk_read_back_while_written_after_a_crash_and_once_closed() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("db");
    let options = || Options {
        min_blob_size: Some(4096),
        write_buffer_size: 64 << 20,
        ..Options::default()
    };
    let value = |i: usize| vec![b'a' + (i % 26) as u8; 10_000 + i * 997];
    let db = Db::open(&path, options()).expect("open");
    let n = 60;
    for i in 0..n {
        db.put(key(i), value(i)).expect("put");
        assert_eq!(db.get(key(i)).expect("get"), Some(value(i)), "key {i}");
    }
    let blob_path = |dir: &Path| {
        let names: Vec<_> = std::fs::read_dir(dir)
            .expect("read dir")
            .map(|e| e.expect("entry").path())
            .filter(|p| p.extension().is_some_and(|e| e == "blob"))
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
        names[0].clone()
    };
    let records: u64 = (0..n)
        .map(|i| (17 + key(i).len() + value(i).len()) as u64)
        .sum();
    let written = 20 + records;
    let size = |p: &Path| std::fs::metadata(p).expect("metadata").len();
    if cfg!(target_os = "linux") {
        // The zeros laid out ahead: the records end inside a 256 KiB region.
        assert!(size(&blob_path(&path)) > written);
    } else {
        assert_eq!(size(&blob_path(&path)), written);
    }

    let copy = dir.path().join("crashed");
    copy_files(&path, &copy);
    {
        let recovered = Db::open(&copy, options()).expect("open the crash image");
        for i in 0..n {
            assert_eq!(
                recovered.get(key(i)).expect("get"),
                Some(value(i)),
                "key {i}"
            );
        }
    }

    // Closed, the file keeps its size (readers may have mapped it at that size): its records,
    // then zeros to the end of the 256 KiB region the last one ends in.
    let blob = blob_path(&path);
    let open_size = size(&blob);
    drop(db);
    assert_eq!(size(&blob), open_size, "{}", blob.display());
    let bytes = std::fs::read(&blob).expect("read blob file");
    let last = value(n - 1);
    assert_eq!(
        &bytes[written as usize - last.len()..written as usize],
        &last[..]
    );
    assert!(bytes[written as usize..].iter().all(|&b| b == 0));
    let db = Db::open(&path, options()).expect("reopen");
    for i in 0..n {
        assert_eq!(db.get(key(i)).expect("get"), Some(value(i)), "key {i}");
    }
}
