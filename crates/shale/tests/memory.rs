//! Spare memtable memory during a write load: the chunks of flushed memtables kept for the
//! next ones, and the block cache's room lent for those beyond one write buffer's worth. Once
//! writes pause, both are given back, and every write reads back meanwhile and after.

use std::time::{Duration, Instant};

use shale::{Db, Options, WriteBatch};

/// One block's weight in the cache, and more: the overlap a concurrent loan may leave.
const SLACK: u64 = 16 << 10;

fn key(i: u32) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

fn value(i: u32) -> Vec<u8> {
    let mut v = format!("value{i}:").into_bytes();
    v.resize(200, (i % 251) as u8);
    v
}

#[test]
fn spares_and_the_cache_loan_are_given_back_once_writes_pause() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = Options {
        write_buffer_size: 1 << 20,
        block_cache_capacity: 4 << 20,
        ..Options::default()
    };
    let db = Db::open(dir.path(), options).expect("open");
    let mut most_lent = 0;
    let mut most_spare = 0;
    for round in 0..40u32 {
        let mut batch = WriteBatch::new();
        for i in round * 1000..(round + 1) * 1000 {
            batch.put(key(i), value(i));
        }
        db.write(batch).expect("write");
        // Reads fill the cache while spares may hold room in it.
        for i in (0..(round + 1) * 1000).step_by(97) {
            let got = db.get(key(i)).expect("get");
            assert_eq!(
                got.as_deref(),
                Some(&value(i)[..]),
                "key {i} after round {round}"
            );
        }
        let stats = db.stats();
        most_lent = most_lent.max(stats.block_cache_lent);
        most_spare = most_spare.max(stats.memtable_spare_bytes);
        // A loan taken while a block is being inserted may overlap it by that block (the
        // check and the insert are not one step): a few KiB of slack, not more.
        assert!(
            stats.block_cache_usage + stats.block_cache_lent <= stats.block_cache_capacity + SLACK,
            "{stats:?}"
        );
        assert!(
            stats.block_cache_lent <= stats.memtable_spare_bytes,
            "{stats:?}"
        );
    }
    assert!(
        db.stats().levels.iter().any(|l| l.files > 0),
        "nothing was flushed"
    );
    // Writes have paused: within a few idle periods the spares, and the loan, are gone.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let stats = db.stats();
        if stats.memtable_spare_bytes == 0 && stats.block_cache_lent == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "spares kept after writes paused: {stats:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    for i in 0..40_000 {
        let got = db.get(key(i)).expect("get");
        assert_eq!(got.as_deref(), Some(&value(i)[..]), "key {i}");
    }
    eprintln!("most spare {most_spare} bytes, most lent {most_lent} bytes");
}
