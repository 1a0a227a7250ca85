//! Repair does not hold the database's entries in memory: the salvaged tables are read as the
//! merge goes, a block at a time, not copied into memtables first. Measured as the process's peak
//! resident set (Linux's `VmHWM`, reset through `/proc/self/clear_refs`), which counts the
//! memtables' mapped arenas that an allocator would not see; the files are read without
//! memory maps, whose page cache would count too. The peak is the process's, so this test has
//! a binary of its own. Linux only (`/proc/self`).
#![cfg(target_os = "linux")]

use std::sync::Arc;

use shale::env::PosixFs;
use shale::{Db, Options, WriteBatch};

/// A field of `/proc/self/status`, in bytes.
fn status_bytes(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.trim().strip_suffix("kB"))
        .and_then(|kb| kb.trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .unwrap_or_else(|| panic!("no {field} in /proc/self/status"))
}

#[test]
fn repair_reads_tables_in_bounded_memory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = Options {
        write_buffer_size: 1 << 20,
        block_cache_capacity: 1 << 20,
        compression: shale::Compression::None,
        fs: Arc::new(PosixFs::without_mmap()),
        ..Options::default()
    };
    let value = |i: u32| {
        let mut v = format!("value{i}:").into_bytes();
        v.resize(1000, (i % 251) as u8);
        v
    };
    let n = 32_000u32;
    {
        let db = Db::open(dir.path(), options.clone()).expect("open");
        for chunk in 0..n / 1000 {
            let mut batch = WriteBatch::new();
            for i in chunk * 1000..(chunk + 1) * 1000 {
                batch.put(format!("key{i:08}"), value(i));
            }
            db.write(batch).expect("write");
        }
        db.compact_range(None, None).expect("compact");
    }
    let table_bytes: u64 = std::fs::read_dir(dir.path())
        .expect("read dir")
        .map(|e| e.expect("entry"))
        .filter(|e| e.file_name().to_string_lossy().ends_with(".sst"))
        .map(|e| e.metadata().expect("metadata").len())
        .sum();
    assert!(table_bytes > 30 << 20, "{table_bytes} bytes of tables");

    // Resets the peak resident set to the current one.
    std::fs::write("/proc/self/clear_refs", "5").expect("reset VmHWM");
    let before = status_bytes("VmRSS:");
    let report = Db::repair(dir.path(), &options).expect("repair");
    let grew = status_bytes("VmHWM:").saturating_sub(before);
    eprintln!("repair's resident set grew by {grew} bytes for {table_bytes} bytes of tables");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(report.entries_recovered, u64::from(n));
    // A table's builder, the merge's blocks and the tables' indexes: a few MiB, against the
    // 32 MB of entries a copy into memory would hold.
    assert!(
        grew < 8 << 20,
        "repair's resident set grew by {grew} bytes for {table_bytes} bytes of tables"
    );

    let db = Db::open(dir.path(), options).expect("open after repair");
    for i in (0..n).step_by(101) {
        assert_eq!(
            db.get(format!("key{i:08}")).expect("get"),
            Some(value(i)),
            "key {i}"
        );
    }
}
