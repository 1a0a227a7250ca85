//! Databases written by earlier versions of shale still open and read the same.
//!
//! `tests/fixtures/<name>/` holds a database as one version of shale left it: tables in level 0
//! and deeper levels, a WAL with writes that were never flushed, a blob file, merge operands,
//! deletions and an expiring value. Each fixture records in `FIXTURE` the commit and the
//! on-disk formats it was written with. The test copies a fixture to a temporary directory
//! (opening writes a new manifest and WAL), opens it, and checks every key against the
//! content the generator wrote, then writes to it and reads it again.
//!
//! A new fixture is written by the ignored test below, with the code of the commit it is
//! named after:
//! `SHALE_FIXTURE_OUT=crates/shale/tests/fixtures/NAME cargo test -p shale --test compat -- --ignored`.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use shale::env::{Fs, PosixFs};
use shale::sstable::{TableOptions, TableReader, FILTER_BLOCK_NAME, LEGACY_FILTER_BLOCK_NAME};
use shale::{Db, Options, UInt64AddOperator};

/// The options every fixture is written and read with: small memtables and tables so a few
/// thousand keys span several files, and a low blob threshold so some values are separated.
fn fixture_options() -> Options {
    Options {
        write_buffer_size: 32 << 10,
        max_file_size: 16 << 10,
        min_blob_size: Some(512),
        merge_operator: Some(Arc::new(UInt64AddOperator)),
        ..Options::default()
    }
}

/// A value for key number `i`: some small, every 97th large enough for a blob file.
fn value(i: u32) -> Vec<u8> {
    if i % 97 == 0 {
        format!("blob-{i}-").repeat(80).into_bytes()
    } else {
        format!("value-{i}").into_bytes()
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// Writes the fixture content into an empty database at `dir` and returns what every key holds.
fn write_fixture(dir: &Path) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let db = Db::open(dir, fixture_options()).expect("open new fixture database");
    let mut expected = BTreeMap::new();
    for i in 0..3000u32 {
        db.put(key(i), value(i)).expect("put");
        expected.insert(key(i), value(i));
    }
    // Everything so far goes down the tree; what follows stays in level 0 and the WAL.
    db.compact_range(None, None).expect("compact");
    for i in (0..3000u32).step_by(7) {
        db.delete(key(i)).expect("delete");
        expected.remove(&key(i));
    }
    for i in 0..20u32 {
        let counter = format!("counter{i:02}").into_bytes();
        for _ in 0..=i {
            db.merge(&counter, 1u64.to_le_bytes()).expect("merge");
        }
        expected.insert(counter, u64::from(i + 1).to_le_bytes().to_vec());
    }
    // An expiry a century away is part of the format but never reached by the test.
    let ttl = Duration::from_secs(100 * 365 * 24 * 3600);
    db.put_with_ttl(b"expiring", b"not yet", ttl)
        .expect("put with ttl");
    expected.insert(b"expiring".to_vec(), b"not yet".to_vec());
    db.flush().expect("flush");
    for i in 3000..3100u32 {
        db.put(key(i), value(i)).expect("put into the WAL only");
        expected.insert(key(i), value(i));
    }
    expected
}

/// The content [`write_fixture`] leaves, computed without a database.
fn fixture_content() -> BTreeMap<Vec<u8>, Vec<u8>> {
    let dir = tempfile::tempdir().expect("tempdir");
    write_fixture(dir.path())
}

fn copy_dir(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).expect("read fixture directory") {
        let entry = entry.expect("fixture entry");
        std::fs::copy(entry.path(), to.join(entry.file_name())).expect("copy fixture file");
    }
}

/// Opens a copy of fixture `name`, checks its content, then writes and reads it again.
fn check_fixture(name: &str) -> tempfile::TempDir {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    let dir = tempfile::tempdir().expect("tempdir");
    copy_dir(&fixture, dir.path());
    std::fs::remove_file(dir.path().join("FIXTURE")).expect("remove the fixture's note");
    let expected = fixture_content();
    {
        let db = Db::open(dir.path(), fixture_options()).expect("open fixture");
        for (k, v) in &expected {
            let got = db.get(k).expect("get");
            assert_eq!(
                got.as_ref(),
                Some(v),
                "{name}: key {:?}",
                String::from_utf8_lossy(k)
            );
        }
        for i in (0..3000u32).step_by(7) {
            assert_eq!(
                db.get(key(i)).expect("get"),
                None,
                "{name}: deleted key {i}"
            );
        }
        let scanned: BTreeMap<Vec<u8>, Vec<u8>> = db
            .range::<&[u8], _>(..)
            .collect::<shale::Result<_>>()
            .expect("scan");
        assert_eq!(scanned, expected, "{name}: a full scan differs");
        db.put(b"written-after", b"upgrade")
            .expect("put after open");
        db.compact_range(None, None)
            .expect("compact the old tables");
    }
    let db = Db::open(dir.path(), fixture_options()).expect("reopen");
    assert_eq!(
        db.get(b"written-after").expect("get"),
        Some(b"upgrade".to_vec())
    );
    for (k, v) in &expected {
        assert_eq!(
            db.get(k).expect("get").as_ref(),
            Some(v),
            "{name}: after compaction"
        );
    }
    dir
}

/// Names of the filter blocks in the tables of `dir`.
fn filter_names(dir: &Path) -> Vec<&'static str> {
    let fs = PosixFs::default();
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read dir") {
        let path = entry.expect("entry").path();
        if path.extension().is_none_or(|x| x != "sst") {
            continue;
        }
        let file = fs.open_random(&path).expect("open table");
        let table = TableReader::open(
            TableOptions::from_options(&fixture_options()),
            file,
            path.clone(),
            0,
            None,
        )
        .expect("table");
        for (name, _) in table.meta_entries() {
            for known in [FILTER_BLOCK_NAME, LEGACY_FILTER_BLOCK_NAME] {
                if name.as_slice() == known.as_bytes() {
                    names.push(known);
                }
            }
        }
    }
    names
}

#[test]
fn format_v1_fixture_opens_and_reads_the_same() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/format-v1");
    // The fixture's tables carry the whole-table bloom filter of that version.
    let old = filter_names(&fixture);
    assert!(!old.is_empty(), "the fixture has no tables with filters");
    assert!(
        old.iter().all(|n| *n == LEGACY_FILTER_BLOCK_NAME),
        "{old:?}"
    );
    let upgraded = check_fixture("format-v1");
    // Compaction rewrote every table with the current filter.
    let new = filter_names(upgraded.path());
    assert!(!new.is_empty());
    assert!(new.iter().all(|n| *n == FILTER_BLOCK_NAME), "{new:?}");
}

#[test]
#[ignore = "writes a fixture; run by hand when a format changes"]
fn write_a_new_fixture() {
    let Some(out) = std::env::var_os("SHALE_FIXTURE_OUT") else {
        panic!("set SHALE_FIXTURE_OUT to the directory to write");
    };
    let out = Path::new(&out);
    std::fs::create_dir_all(out).expect("create output directory");
    assert!(
        std::fs::read_dir(out)
            .expect("read output")
            .next()
            .is_none(),
        "{} is not empty",
        out.display()
    );
    write_fixture(out);
    std::fs::remove_file(out.join("LOCK")).expect("remove LOCK");
    let commit = std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    std::fs::write(
        out.join("FIXTURE"),
        format!("Written by tests/compat.rs (write_a_new_fixture) at commit {commit}.\n"),
    )
    .expect("write FIXTURE");
}
