//! Compaction gives a key's oldest value sequence number 0 once it is in the bottommost level
//! and older than every live snapshot; reads must not notice, snapshots must keep their view.

use std::sync::Arc;

use shale::env::{Fs, PosixFs};
use shale::iter::InternalIterator;
use shale::key::parse_internal_key;
use shale::sstable::{ReadFlags, TableOptions, TableReader};
use shale::{Db, Options, ReadOptions};

/// Every (user key, sequence) pair in the database's tables, read straight from the files.
fn table_sequences(dir: &std::path::Path, options: &Options) -> Vec<(Vec<u8>, u64)> {
    let fs = PosixFs::default();
    let mut out = Vec::new();
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "sst"))
        .collect();
    names.sort();
    for (id, path) in names.into_iter().enumerate() {
        let file = fs.open_random(&path).expect("open table");
        let table = Arc::new(
            TableReader::open(
                TableOptions::from_options(options),
                file,
                path.clone(),
                id as u64,
                None,
            )
            .expect("table"),
        );
        let mut it = table.iter(ReadFlags::default());
        it.seek_to_first();
        while it.valid() {
            let parsed = parse_internal_key(it.key()).expect("internal key");
            out.push((parsed.user_key.to_vec(), parsed.sequence));
            it.next();
        }
        it.status().expect("scan");
    }
    out
}

fn small_options() -> Options {
    Options {
        write_buffer_size: 64 << 10,
        ..Options::default()
    }
}

#[test]
fn bottommost_values_lose_their_sequence_numbers_unless_a_snapshot_needs_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), small_options()).expect("open");
    for i in 0..2000u32 {
        db.put(format!("k{i:05}"), format!("v{i}")).expect("put");
    }
    let snapshot = db.snapshot();
    for i in (0..2000u32).step_by(2) {
        db.put(format!("k{i:05}"), format!("w{i}"))
            .expect("overwrite");
    }
    db.compact_range(None, None).expect("compact");

    let seqs = table_sequences(dir.path(), &small_options());
    // Keys written once: one version, visible to the snapshot too, so sequence 0. Overwritten
    // keys: the new value (newer than the snapshot) keeps its number, the old one (which the
    // snapshot reads) is the oldest and visible to every snapshot, so it becomes 0.
    for i in 0..2000u32 {
        let key = format!("k{i:05}").into_bytes();
        let versions: Vec<u64> = seqs
            .iter()
            .filter(|(k, _)| *k == key)
            .map(|(_, s)| *s)
            .collect();
        if i % 2 == 1 {
            assert_eq!(versions, vec![0], "key {i}");
        } else {
            assert_eq!(versions.len(), 2, "key {i}: {versions:?}");
            assert!(versions[0] > 0 && versions[1] == 0, "key {i}: {versions:?}");
        }
    }
    for i in 0..2000u32 {
        let key = format!("k{i:05}");
        let now = if i % 2 == 0 {
            format!("w{i}")
        } else {
            format!("v{i}")
        };
        assert_eq!(db.get(&key).expect("get"), Some(now.into_bytes()));
        let then = db
            .get_opt(&key, &ReadOptions::at(&snapshot))
            .expect("snapshot get");
        assert_eq!(then, Some(format!("v{i}").into_bytes()));
    }

    // Once the snapshot is gone, the next compaction through the bottommost level drops the
    // old versions and zeroes the rest.
    drop(snapshot);
    for i in (0..2000u32).step_by(3) {
        db.put(format!("k{i:05}"), format!("v{i}"))
            .expect("rewrite");
    }
    db.compact_range(None, None).expect("compact again");
    let seqs = table_sequences(dir.path(), &small_options());
    assert_eq!(seqs.len(), 2000);
    assert!(
        seqs.iter().all(|(_, s)| *s == 0),
        "every value is bottommost"
    );

    // New writes still win over zeroed values, before and after they are compacted.
    db.put("k00001", "fresh").expect("put");
    assert_eq!(db.get("k00001").expect("get"), Some(b"fresh".to_vec()));
    db.compact_range(None, None).expect("compact");
    assert_eq!(db.get("k00001").expect("get"), Some(b"fresh".to_vec()));
    drop(db);
    let db = Db::open(dir.path(), small_options()).expect("reopen");
    assert_eq!(db.get("k00001").expect("get"), Some(b"fresh".to_vec()));
    assert_eq!(db.get("k00003").expect("get"), Some(b"v3".to_vec()));
}
