//! Corruption: damage in a table, the WAL or the manifest is reported as an error naming the
//! file; it is never returned as data.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use shale::env::{Fs, MemFs};
use shale::{Db, Error, Options, ReadOptions};

fn options(fs: &MemFs) -> Options {
    Options {
        write_buffer_size: 16 * 1024,
        paranoid_checks: true,
        compression: shale::Compression::None,
        fs: Arc::new(fs.clone()),
        ..Options::default()
    }
}

fn files_with_suffix(fs: &MemFs, dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs
        .list(dir)
        .expect("list")
        .into_iter()
        .filter(|n| n.ends_with(suffix) || n.starts_with(suffix))
        .map(|n| dir.join(n))
        .collect();
    v.sort();
    v
}

fn value(i: u32) -> Vec<u8> {
    format!("value-{i:08}-{}", "payload".repeat(4)).into_bytes()
}

/// Reads everything back; returns Err if any read reported an error, and panics if any read
/// returned data that was never written.
fn read_back(db: &Db, n: u32) -> Result<(), Error> {
    for i in 0..n {
        let k = format!("key{i:06}");
        if let Some(v) = db.get(&k)? {
            assert_eq!(v, value(i), "wrong data returned for {k}");
        }
    }
    let mut it = db.iter(ReadOptions::default());
    it.seek_to_first();
    while it.valid() {
        let k = String::from_utf8_lossy(it.key()).into_owned();
        let i: u32 = k
            .trim_start_matches("key")
            .parse()
            .expect("only written keys");
        assert_eq!(
            it.value(),
            value(i).as_slice(),
            "wrong data returned by iterator for {k}"
        );
        it.next();
    }
    it.status()
}

fn populate(fs: &MemFs, dir: &Path, n: u32, flush: bool) {
    let db = Db::open(dir, options(fs)).expect("open");
    for i in 0..n {
        db.put(format!("key{i:06}"), value(i)).expect("put");
    }
    if flush {
        db.flush().expect("flush");
    }
}

#[test]
fn flipped_byte_in_a_table_is_reported_naming_the_file() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    populate(&fs, dir, 2000, true);
    let tables = files_with_suffix(&fs, dir, ".sst");
    assert!(!tables.is_empty());
    let table = &tables[0];
    let mut data = fs.contents(table).expect("table");
    let offset = data.len() / 3;
    data[offset] ^= 0x40;
    fs.set_contents(table, data);
    let db = Db::open(dir, options(&fs)).expect("open still works: footer and index are intact");
    match read_back(&db, 2000) {
        Err(Error::Corruption { path, .. }) => assert_eq!(&path, table),
        Err(other) => panic!("expected corruption, got {other}"),
        Ok(()) => panic!("a flipped data byte went unnoticed"),
    }
}

#[test]
fn damaged_table_footer_fails_open_with_paranoid_checks() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    populate(&fs, dir, 500, true);
    let table = files_with_suffix(&fs, dir, ".sst").remove(0);
    let mut data = fs.contents(&table).expect("table");
    let n = data.len();
    data[n - 3] ^= 0xff;
    fs.set_contents(&table, data);
    match Db::open(dir, options(&fs)) {
        Err(e) => assert!(e.to_string().contains(&table.display().to_string()), "{e}"),
        Ok(_) => panic!("open must fail on a damaged footer"),
    }
}

#[test]
fn flipped_byte_in_the_middle_of_the_wal_fails_open() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    {
        let db = Db::open(
            dir,
            Options {
                write_buffer_size: 1 << 20,
                ..options(&fs)
            },
        )
        .expect("open");
        for i in 0..2000 {
            db.put(format!("key{i:06}"), value(i)).expect("put");
        }
    }
    let wal = files_with_suffix(&fs, dir, ".log").pop().expect("wal");
    let mut data = fs.contents(&wal).expect("wal");
    data[100] ^= 0x01;
    fs.set_contents(&wal, data);
    match Db::open(dir, options(&fs)) {
        Err(Error::Corruption { path, .. }) => assert_eq!(path, wal),
        other => panic!("expected corruption naming the WAL, got {other:?}"),
    }
}

#[test]
fn torn_wal_tail_is_dropped_cleanly() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    {
        let db = Db::open(
            dir,
            Options {
                write_buffer_size: 1 << 20,
                ..options(&fs)
            },
        )
        .expect("open");
        for i in 0..1000 {
            db.put(format!("key{i:06}"), value(i)).expect("put");
        }
    }
    let wal = files_with_suffix(&fs, dir, ".log").pop().expect("wal");
    let data = fs.contents(&wal).expect("wal");
    fs.set_contents(&wal, data[..data.len() - 10].to_vec());
    let db = Db::open(dir, options(&fs)).expect("a torn tail is not an error");
    read_back(&db, 1000).expect("intact prefix");
    assert_eq!(db.get("key000998").expect("get"), Some(value(998)));
    assert_eq!(
        db.get("key000999").expect("get"),
        None,
        "the torn record is dropped"
    );
}

#[test]
fn flipped_byte_in_the_manifest_fails_open() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    populate(&fs, dir, 3000, true);
    let manifest = files_with_suffix(&fs, dir, "MANIFEST-")
        .pop()
        .expect("manifest");
    let mut data = fs.contents(&manifest).expect("manifest");
    // Damage the first record (the header), so intact records follow it.
    data[12] ^= 0x10;
    fs.set_contents(&manifest, data);
    match Db::open(dir, options(&fs)) {
        Err(e) => assert!(
            e.to_string().contains("MANIFEST"),
            "error must name the manifest: {e}"
        ),
        Ok(_) => panic!("open must fail on a damaged manifest"),
    }
}
