//! Background thread roles under `Options::low_priority_compactions`: one thread flushes at the
//! process's priority, the others compact at the lowest CPU priority, and the database still
//! flushes and compacts all it should. A test binary of its own, with a single test: it finds
//! the background threads by name among all of the process's threads, so no other database may
//! run beside it.

#![cfg(target_os = "linux")]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use shale::{Db, Options, WriteBatch};

/// The nice value of thread `tid` of this process, or `None` once the thread has gone.
fn nice_of(tid: &str) -> Option<i32> {
    nice_in(&format!("/proc/self/task/{tid}/stat"))
}

/// The nice value in the `stat` file at `path` (its field 19).
fn nice_in(path: &str) -> Option<i32> {
    let stat = std::fs::read_to_string(path).ok()?;
    // The name, in parentheses, may hold spaces; the fields after it are plain numbers. The
    // first of them is field 3, so field 19 is the seventeenth.
    let (_, fields) = stat.rsplit_once(')')?;
    fields.split_whitespace().nth(16)?.parse().ok()
}

/// The nice value of every live thread whose name starts with `shale-`, by name (threads of
/// one name in a list).
fn shale_threads() -> BTreeMap<String, Vec<i32>> {
    let mut out: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    let tasks = std::fs::read_dir("/proc/self/task").expect("list /proc/self/task");
    for task in tasks {
        let task = task.expect("read /proc/self/task");
        let tid = task.file_name().to_string_lossy().into_owned();
        let Ok(name) = std::fs::read_to_string(task.path().join("comm")) else {
            continue; // the thread ended meanwhile
        };
        let name = name.trim_end().to_string();
        if !name.starts_with("shale-") {
            continue;
        }
        if let Some(nice) = nice_of(&tid) {
            out.entry(name).or_default().push(nice);
        }
    }
    out
}

/// Waits (up to a generous bound; it takes microseconds) until the background threads are
/// exactly `want`: a compaction thread lowers its priority as it starts, after `open` returns.
fn expect_threads(want: &BTreeMap<String, Vec<i32>>) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let seen = shale_threads();
        if &seen == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "background threads: want {want:?}, have {seen:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Distinct keys for distinct `i`, in no particular order.
fn key(i: u32) -> Vec<u8> {
    format!("key{:010}", i.reverse_bits()).into_bytes()
}

/// Writes enough, in small memtables, that level 0 must be compacted more than once, waits
/// for the background work and checks that it ran and that every key reads back.
fn load_flushes_and_compacts(db: &Db) {
    for round in 0..24u32 {
        let mut batch = WriteBatch::new();
        for i in round * 2000..(round + 1) * 2000 {
            batch.put(key(i), vec![(i % 251) as u8; 100]);
        }
        db.write(batch).expect("write");
    }
    db.flush().expect("flush");
    db.wait_for_compactions().expect("wait for compactions");
    let stats = db.stats();
    assert!(stats.flushes >= 8, "flushes: {}", stats.flushes);
    assert!(stats.compactions >= 2, "compactions: {}", stats.compactions);
    assert!(
        stats.levels[0].files < 4,
        "level 0 left at {} files",
        stats.levels[0].files
    );
    for i in (0..24 * 2000).step_by(7) {
        let got = db.get(key(i)).expect("get");
        assert_eq!(got, Some(vec![(i % 251) as u8; 100]), "key {i}");
    }
}

#[test]
fn compactions_run_at_the_lowest_priority_and_flushes_at_the_process_priority() {
    // Threads start at the nice value of the thread that makes them: this one's.
    let base = nice_in("/proc/thread-self/stat").expect("this thread's nice value");
    let small = Options {
        write_buffer_size: 256 << 10,
        ..Options::default()
    };
    let threads = |list: &[(&str, i32)]| {
        list.iter()
            .map(|&(name, nice)| (name.to_string(), vec![nice]))
            .collect::<BTreeMap<_, _>>()
    };
    let dir = tempfile::tempdir().expect("tempdir");

    // The default: one flush thread, one compaction thread at nice 19.
    assert!(Options::default().low_priority_compactions);
    let db = Db::open(dir.path(), small.clone()).expect("open");
    expect_threads(&threads(&[("shale-flush", base), ("shale-compact-1", 19)]));
    load_flushes_and_compacts(&db);
    drop(db);
    expect_threads(&BTreeMap::new());

    // More threads: still one flush thread; the rest compact.
    let four = Options {
        max_background_jobs: 4,
        ..small.clone()
    };
    let db = Db::open(dir.path(), four).expect("open with four threads");
    expect_threads(&threads(&[
        ("shale-flush", base),
        ("shale-compact-1", 19),
        ("shale-compact-2", 19),
        ("shale-compact-3", 19),
    ]));
    load_flushes_and_compacts(&db);
    drop(db);
    expect_threads(&BTreeMap::new());

    // Turned off, or with one thread: every thread does both, at the process's priority.
    for (jobs, low) in [(2, false), (1, true)] {
        let options = Options {
            max_background_jobs: jobs,
            low_priority_compactions: low,
            ..small.clone()
        };
        let db = Db::open(dir.path(), options).expect("open");
        let want: Vec<(String, i32)> = (0..jobs).map(|i| (format!("shale-bg-{i}"), base)).collect();
        expect_threads(
            &want
                .iter()
                .map(|(n, nice)| (n.clone(), vec![*nice]))
                .collect(),
        );
        load_flushes_and_compacts(&db);
        drop(db);
        expect_threads(&BTreeMap::new());
    }
}
