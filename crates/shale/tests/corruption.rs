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

/// The tables of `level`, as (path, smallest user key), from the `shale.sstables` property.
fn tables_at(db: &Db, dir: &Path, level: usize) -> Vec<(PathBuf, String)> {
    let listing = db.property("shale.sstables").expect("sstables property");
    let header = format!("--- level {level} ---");
    listing
        .lines()
        .skip_while(|l| *l != header)
        .skip(1)
        .take_while(|l| !l.starts_with("---"))
        .map(|l| {
            // " 12:3456[\"key000100\" .. \"key000199\"]"
            let (number, rest) = l.trim().split_once(':').expect("number:size[range]");
            let smallest = rest.split('"').nth(1).expect("quoted smallest key");
            (
                dir.join(format!(
                    "{:06}.sst",
                    number.parse::<u64>().expect("file number")
                )),
                smallest.to_string(),
            )
        })
        .collect()
}

/// A table deleted behind the database's back stops an iterator with an error naming it, in
/// either direction and after a seek into it, and fails a lookup of its keys; every entry
/// returned before the error is one that was written. Tables in level 0 (opened when the
/// iterator is made) and deeper (opened as the cursor reaches them), with handles that lookups
/// pinned in the read view and without (more tables than `max_open_files`: the view pins none).
#[test]
fn missing_table_stops_iterators_and_lookups_naming_it() {
    for (level0, max_open_files) in [(true, 1000), (false, 1000), (true, 16), (false, 16)] {
        let case = format!("level 0: {level0}, max_open_files: {max_open_files}");
        let fs = MemFs::new();
        let dir = Path::new("/db");
        let n = 6000;
        let opts = Options {
            paranoid_checks: false,
            max_open_files,
            // Level 0 keeps every flushed table: none is compacted away under the test.
            level0_file_num_compaction_trigger: 1000,
            level0_slowdown_writes_trigger: 1000,
            level0_stop_writes_trigger: 1000,
            ..options(&fs)
        };
        {
            let db = Db::open(dir, opts.clone()).expect("open");
            for j in 0..n {
                // In key order, each flushed table lies past the others and goes below level
                // 0; shuffled, each spans the key range, and all but the first two (flushed
                // while level 0 was empty) stay in level 0.
                let i = if level0 { (j * 7919) % n } else { j };
                db.put(format!("key{i:06}"), value(i)).expect("put");
            }
            db.flush().expect("flush");
        }
        let db = Db::open(dir, opts).expect("open");
        let level = if level0 {
            0
        } else {
            (1..7)
                .find(|&l| tables_at(&db, dir, l).len() > 1)
                .expect("a deeper level")
        };
        let tables = tables_at(&db, dir, level);
        assert!(
            tables.len() >= 3,
            "{case}: want several tables, got {tables:?}"
        );
        let total: usize = (0..7).map(|l| tables_at(&db, dir, l).len()).sum();
        if max_open_files == 16 {
            assert!(total > 16, "{case}: {total} tables leave the view pinning");
        }
        let (missing, smallest) = &tables[tables.len() / 2];
        fs.remove(missing).expect("remove");
        let names_it = |e: &Error| e.to_string().contains(&missing.display().to_string());
        if max_open_files > total {
            // Lookups pin the handles of the tables they open in the read view, which the
            // iterators below then take instead of the table cache's. A lookup that meets the
            // missing table fails, and pins what it opened before.
            for (_, key) in tables.iter().filter(|(path, _)| path != missing) {
                let _ = db.get(key);
            }
        }

        // Forward from the first key, backward from the last, and a seek to the missing
        // table's smallest key: each ends in the error, having returned only written entries.
        for direction in ["forward", "backward", "seek"] {
            let mut it = db.iter(ReadOptions::default());
            match direction {
                "forward" => it.seek_to_first(),
                "backward" => it.seek_to_last(),
                _ => it.seek(smallest.as_bytes()),
            }
            let mut seen = 0u32;
            while it.valid() {
                let k = String::from_utf8_lossy(it.key()).into_owned();
                let i: u32 = k.trim_start_matches("key").parse().expect("a written key");
                assert_eq!(it.value(), value(i).as_slice(), "{case}, {direction}: {k}");
                seen += 1;
                if direction == "backward" {
                    it.prev();
                } else {
                    it.next();
                }
            }
            match it.status() {
                Err(e) => assert!(names_it(&e), "{case}, {direction}: {e}"),
                Ok(()) => panic!("{case}, {direction}: ended cleanly after {seen} entries"),
            }
            if direction == "seek" && !level0 {
                assert_eq!(
                    seen, 0,
                    "{case}: the seek returned entries before the missing table's error"
                );
            }
        }
        match db.get(smallest) {
            Err(e) => assert!(names_it(&e), "{case}: {e}"),
            Ok(v) => panic!("{case}: the missing table's first key read as {v:?}"),
        }
    }
}

/// Deleted keys never come back through damage: every key is written, then deleted in a newer
/// table, whose middle block is then damaged. A scan (either way) or a lookup must fail rather
/// than fall through to the older table's values for the keys of the unreadable tombstones.
#[test]
fn a_damaged_block_of_tombstones_never_resurrects_older_values() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    let opts = Options {
        paranoid_checks: false,
        // Both tables stay in level 0, the tombstones above the values.
        level0_file_num_compaction_trigger: 1000,
        level0_slowdown_writes_trigger: 1000,
        level0_stop_writes_trigger: 1000,
        write_buffer_size: 1 << 20,
        ..options(&fs)
    };
    let n = 3000;
    {
        let db = Db::open(dir, opts.clone()).expect("open");
        for i in 0..n {
            db.put(format!("key{i:06}"), value(i)).expect("put");
        }
        db.flush().expect("flush");
        for i in 0..n {
            db.delete(format!("key{i:06}")).expect("delete");
        }
        db.flush().expect("flush");
    }
    let tables = files_with_suffix(&fs, dir, ".sst");
    assert_eq!(tables.len(), 2, "{tables:?}");
    // The newer table (higher number) holds the tombstones: small entries, so its data
    // blocks come first and fill most of it; damage one near its middle.
    let tombstones = &tables[1];
    let mut bytes = fs.contents(tombstones).expect("contents");
    let middle = bytes.len() * 2 / 5;
    bytes[middle] ^= 0x40;
    fs.set_contents(tombstones, bytes);

    let db = Db::open(dir, opts).expect("open");
    for reverse in [false, true] {
        let mut it = db.iter(ReadOptions::default());
        if reverse {
            it.seek_to_last();
        } else {
            it.seek_to_first();
        }
        assert!(
            !it.valid(),
            "reverse {reverse}: a deleted key came back: {:?}",
            String::from_utf8_lossy(it.key())
        );
        match it.status() {
            Err(Error::Corruption { path, .. }) => assert_eq!(&path, tombstones),
            other => panic!("reverse {reverse}: expected corruption, got {other:?}"),
        }
    }
    let mut errors = 0;
    for i in 0..n {
        match db.get(format!("key{i:06}")) {
            Ok(None) => {}
            Ok(Some(v)) => panic!("key{i:06} came back as {:?}", String::from_utf8_lossy(&v)),
            Err(_) => errors += 1,
        }
    }
    assert!(errors > 0, "lookups into the damaged block must fail");
}
