//! Concurrency: writer threads, reader threads with snapshots, and background flushes and
//! compactions at once. Each writer owns a disjoint key range, so the expected final state is
//! known; readers check that snapshots never change under them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use shale::env::MemFs;
use shale::{Db, Options, ReadOptions, WriteBatch};

mod common;
use common::HookedFs;

#[test]
fn writers_readers_and_snapshots_agree_with_the_oracle() {
    let fs = MemFs::new();
    let options = Options {
        write_buffer_size: 32 * 1024,
        max_file_size: 32 * 1024,
        max_bytes_for_level_base: 128 * 1024,
        level0_file_num_compaction_trigger: 2,
        fs: Arc::new(fs),
        ..Options::default()
    };
    let db = Arc::new(Db::open("/db", options).expect("open"));
    const WRITERS: u64 = 4;
    const OPS: u64 = 3000;
    let stop = Arc::new(AtomicBool::new(false));
    let mut readers = Vec::new();
    for r in 0..3u64 {
        let db = db.clone();
        let stop = stop.clone();
        readers.push(std::thread::spawn(move || {
            let mut rng = rand::rngs::StdRng::seed_from_u64(r);
            let mut checks = 0u64;
            while !stop.load(Ordering::Relaxed) {
                // A snapshot's view never changes, whatever happens meanwhile.
                let snap = db.snapshot();
                let opts = ReadOptions::at(&snap);
                let first: Vec<(Vec<u8>, Vec<u8>)> = {
                    let mut it = db.iter(opts.clone());
                    it.seek_to_first();
                    let mut v = Vec::new();
                    while it.valid() && v.len() < 300 {
                        v.push((it.key().to_vec(), it.value().to_vec()));
                        it.next();
                    }
                    it.status().expect("iterator status");
                    v
                };
                for (k, v) in first.iter().take(50) {
                    assert_eq!(db.get_opt(k, &opts).expect("get").as_ref(), Some(v));
                }
                // Values are always "<writer>-<counter>" pairs whose counter is monotone per key
                // within a writer, so a key never shows a value from another writer.
                for (k, v) in &first {
                    let kw = &k[..2];
                    assert_eq!(&v[..2], kw, "value of {k:?} written by another writer");
                }
                // Backward, the same snapshot shows the same entries in reverse, however many
                // writes land in the memtable between the steps (they are newer than the
                // snapshot; a backward step in a memtable collects predecessors ahead).
                if rng.gen_range(0..4) == 0 {
                    let mut forward = Vec::new();
                    let mut it = db.iter(opts.clone());
                    it.seek_to_first();
                    while it.valid() {
                        forward.push((it.key().to_vec(), it.value().to_vec()));
                        it.next();
                    }
                    it.status().expect("forward status");
                    let mut backward = Vec::new();
                    it.seek_to_last();
                    while it.valid() {
                        backward.push((it.key().to_vec(), it.value().to_vec()));
                        it.prev();
                    }
                    it.status().expect("backward status");
                    backward.reverse();
                    assert_eq!(
                        backward, forward,
                        "a backward scan differs from the forward one"
                    );
                }
                checks += 1;
            }
            checks
        }));
    }
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let db = db.clone();
        writers.push(std::thread::spawn(move || {
            let mut rng = rand::rngs::StdRng::seed_from_u64(100 + w);
            let mut last = std::collections::BTreeMap::new();
            for i in 0..OPS {
                let k = format!("w{w}-{:04}", rng.gen_range(0..400));
                let v = format!("w{w}-{i}");
                if rng.gen_range(0..10) == 0 {
                    db.delete(&k).expect("delete");
                    last.remove(&k);
                } else if rng.gen_range(0..10) == 0 {
                    let mut b = WriteBatch::new();
                    b.put(&k, &v);
                    b.put(format!("{k}-b"), &v);
                    db.write(b).expect("batch");
                    last.insert(k.clone(), v.clone());
                    last.insert(format!("{k}-b"), v);
                } else {
                    db.put(&k, &v).expect("put");
                    last.insert(k, v);
                }
            }
            last
        }));
    }
    let mut expected = std::collections::BTreeMap::new();
    for w in writers {
        expected.extend(w.join().expect("writer"));
    }
    stop.store(true, Ordering::Relaxed);
    let mut total_checks = 0;
    for r in readers {
        total_checks += r.join().expect("reader");
    }
    assert!(total_checks > 0);
    let got: std::collections::BTreeMap<Vec<u8>, Vec<u8>> =
        db.range::<&[u8], _>(..).map(|r| r.expect("scan")).collect();
    let expected: std::collections::BTreeMap<Vec<u8>, Vec<u8>> = expected
        .into_iter()
        .map(|(k, v)| (k.into_bytes(), v.into_bytes()))
        .collect();
    assert_eq!(got, expected);
    assert!(db.stats().flushes > 0);
}

#[test]
fn handles_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<Db>();
    send_sync::<shale::Snapshot>();
    send::<shale::DbIterator>();
    send::<shale::WriteBatch>();
}

/// Synced writers on many threads share WAL syncs (group commit): every write acknowledged is
/// in the database and survives a power cut, and once a sync fails every writer waiting on
/// it, leader or follower, gets the error and none is acknowledged afterwards.
#[test]
fn synced_writers_from_many_threads_are_durable_and_all_learn_of_a_failed_sync() {
    use shale::env::{CrashMode, FaultError, FaultFs, FaultSpec, OpKind};
    use shale::WriteOptions;

    const THREADS: u32 = 8;
    const OPS: u32 = 200;
    let fs = FaultFs::in_memory();
    let options = Options {
        fs: Arc::new(fs.clone()),
        ..Options::default()
    };
    let db = Arc::new(Db::open("/db", options.clone()).expect("open"));
    // A sync as slow as a disk's: writers queue behind it and ride in groups.
    fs.set_sync_latency(Some(std::time::Duration::from_micros(200)));
    let synced = WriteOptions {
        sync: true,
        ..WriteOptions::default()
    };
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let db = db.clone();
            std::thread::spawn(move || {
                for i in 0..OPS {
                    db.put_opt(format!("t{t}-{i:04}"), format!("v{i}"), &synced)
                        .expect("synced put");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("writer thread");
    }
    let syncs = fs.calls_of(OpKind::Sync);
    assert!(
        syncs < u64::from(THREADS * OPS) / 2,
        "{syncs} syncs for {} synced writes: writers did not share syncs",
        THREADS * OPS
    );

    // Every sync from now on fails: each writer must see an error, whether it led a group or
    // rode in one.
    fs.inject(FaultSpec {
        kind: Some(OpKind::Sync),
        nth: 1,
        persistent: true,
        error: FaultError::Io,
    });
    let barrier = Arc::new(std::sync::Barrier::new(THREADS as usize));
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let db = db.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                db.put_opt(format!("late{t}"), "x", &synced).is_err()
            })
        })
        .collect();
    for t in threads {
        assert!(
            t.join().expect("writer thread"),
            "a write succeeded after a failed sync"
        );
    }
    assert!(
        db.put("after", "x").is_err(),
        "writes refused after a failed sync"
    );

    // A power cut keeps exactly what was synced: all acknowledged writes.
    fs.clear_faults();
    let image = fs.crash_image(CrashMode::PowerLoss, 7);
    drop(db);
    let db = Db::open(
        "/db",
        Options {
            fs: Arc::new(image),
            ..options
        },
    )
    .expect("reopen after power loss");
    for t in 0..THREADS {
        for i in 0..OPS {
            let key = format!("t{t}-{i:04}");
            let value = db.get(key.as_bytes()).expect("get");
            assert_eq!(value.as_deref(), Some(format!("v{i}").as_bytes()), "{key}");
        }
    }
}

#[test]
fn a_writer_held_up_by_a_slow_flush_counts_the_stall_and_its_time() {
    use shale::env::FaultFs;

    let fs = FaultFs::in_memory();
    let options = Options {
        fs: Arc::new(fs.clone()),
        write_buffer_size: 64 * 1024,
        ..Options::default()
    };
    let db = Db::open("/db", options).expect("open");
    // Every flush syncs its table: at 20 ms a sync, a flush takes far longer than the writer
    // takes to fill the next 64 KiB memtable, so the writer must wait for it.
    fs.set_sync_latency(Some(std::time::Duration::from_millis(20)));
    let started = std::time::Instant::now();
    for i in 0..8_000u32 {
        db.put(format!("key{i:06}"), [b'v'; 100]).expect("put");
    }
    let elapsed = started.elapsed();
    fs.set_sync_latency(None);
    let stats = db.stats();
    assert!(stats.stalls > 0, "no stall counted: {stats:?}");
    // The waits happened on this thread, within the loop.
    let waited = std::time::Duration::from_micros(stats.stall_micros);
    assert!(waited >= std::time::Duration::from_millis(1), "{waited:?}");
    assert!(waited <= elapsed, "{waited:?} waited in {elapsed:?}");
    let text = db.property("shale.stats").expect("stats property");
    assert!(text.contains(" s waited)"), "{text}");
}

/// A gate that holds table removals (through [`HookedFs::before_remove`]) while it is closed.
#[derive(Clone, Default)]
struct RemovalGate(Arc<(parking_lot::Mutex<GateState>, parking_lot::Condvar)>);

/// The state of a [`RemovalGate`].
#[derive(Default)]
struct GateState {
    closed: bool,
    /// Table removals that reached the closed gate.
    waiting: usize,
}

impl RemovalGate {
    fn set_closed(&self, closed: bool) {
        let (state, changed) = &*self.0;
        state.lock().closed = closed;
        changed.notify_all();
    }

    /// Table removals held at the gate now.
    fn waiting(&self) -> usize {
        self.0 .0.lock().waiting
    }

    /// Waits until a table removal is held at the gate; false after `limit`.
    fn wait_for_held_removal(&self, limit: std::time::Duration) -> bool {
        let (state, changed) = &*self.0;
        let deadline = std::time::Instant::now() + limit;
        let mut s = state.lock();
        while s.waiting == 0 {
            if changed.wait_until(&mut s, deadline).timed_out() {
                return s.waiting > 0;
            }
        }
        true
    }

    /// Holds the removal of `path`, if it is a table, while the gate is closed.
    fn hold(&self, path: &std::path::Path) {
        if path.extension().is_none_or(|e| e != "sst") {
            return;
        }
        let (state, changed) = &*self.0;
        let mut s = state.lock();
        if s.closed {
            s.waiting += 1;
            changed.notify_all();
            // Bounded, so that a regression fails the test instead of hanging it.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
            while s.closed && !changed.wait_until(&mut s, deadline).timed_out() {}
            s.waiting -= 1;
        }
    }
}

/// Unlinking a table drops its cached pages, about a millisecond for a 4 MiB table on ext4:
/// done under the database mutex, it held up every writer, since each takes the mutex to
/// queue its write. Writes and reads must go on while a compaction's inputs are unlinked.
#[test]
fn writes_go_on_while_a_compaction_unlinks_its_inputs() {
    use shale::env::Fs;

    let gate = RemovalGate::default();
    let fs = HookedFs::new(MemFs::new()).before_remove({
        let gate = gate.clone();
        move |path| gate.hold(path)
    });
    let options = Options {
        fs: Arc::new(fs.clone()),
        // Large enough that the writes below never switch memtables (a switch may wait for a
        // flush, and the flush for the held job); two level-0 tables start a compaction.
        write_buffer_size: 4 << 20,
        level0_file_num_compaction_trigger: 2,
        ..Options::default()
    };
    let db = Arc::new(Db::open("/db", options).expect("open"));
    // Flushes push their tables below level 0 while nothing there overlaps them; once two
    // stay in level 0, a compaction merges them and then deletes both.
    gate.set_closed(true);
    let mut rounds = 0u32;
    loop {
        for i in 0..500u32 {
            db.put(format!("key{i:06}"), format!("value{rounds}-{i}"))
                .expect("put");
        }
        db.flush().expect("flush");
        rounds += 1;
        if gate.wait_for_held_removal(std::time::Duration::from_millis(500)) {
            break;
        }
        assert!(rounds < 8, "no compaction removed its inputs");
    }
    // With a removal held, another thread writes and reads; it must finish on its own.
    let (done, finished) = std::sync::mpsc::channel();
    let writer = {
        let db = db.clone();
        std::thread::spawn(move || {
            for i in 0..200u32 {
                db.put(format!("new{i:06}"), b"v").expect("put");
            }
            let read = db.get(b"key000007").expect("get");
            let _ = done.send(read);
        })
    };
    let read = finished.recv_timeout(std::time::Duration::from_secs(10));
    let still_held = gate.waiting() > 0;
    gate.set_closed(false);
    assert_eq!(
        read.expect("writes waited for the removal of obsolete tables"),
        Some(format!("value{}-7", rounds - 1).into_bytes())
    );
    assert!(still_held, "the removal ended before the writes did");
    writer.join().expect("writer thread");
    db.wait_for_compactions().expect("wait");
    let live: usize = db.stats().levels.iter().map(|l| l.files).sum();
    let on_disk = fs
        .list(std::path::Path::new("/db"))
        .expect("list")
        .iter()
        .filter(|n| n.ends_with(".sst"))
        .count();
    assert_eq!(on_disk, live, "obsolete tables are still removed");
}

/// A clock that, once armed, makes one write on the armed thread the next time that thread
/// reads it: a write landing exactly between two steps of a read that each read the clock.
/// Other threads (background jobs read it under the database's lock) are left alone.
struct WriteOnNextRead {
    db: std::sync::Mutex<Option<Arc<Db>>>,
    armed: std::sync::Mutex<Option<std::thread::ThreadId>>,
}

impl shale::env::Clock for WriteOnNextRead {
    fn now_micros(&self) -> u64 {
        let mine = {
            let mut armed = self.armed.lock().expect("armed");
            let mine = *armed == Some(std::thread::current().id());
            if mine {
                *armed = None;
            }
            mine
        };
        let db = self.db.lock().expect("db").clone();
        if let (true, Some(db)) = (mine, db) {
            // Moves the last key to before the first, in one atomic batch.
            let mut batch = WriteBatch::new();
            batch.delete(b"z");
            batch.put(b"a", b"moved");
            db.write(batch).expect("write");
        }
        shale::env::SystemClock.now_micros()
    }
}

/// The two ends of a `Db::range` read one state: built one after the other, they could straddle
/// a write, and a record the write moved from one end of the range to the other (`z` to `a`)
/// was in neither end's part of the range.
#[test]
fn both_ends_of_a_range_read_one_state() {
    let clock = Arc::new(WriteOnNextRead {
        db: std::sync::Mutex::new(None),
        armed: std::sync::Mutex::new(None),
    });
    let options = Options {
        fs: Arc::new(MemFs::new()),
        clock: clock.clone(),
        ..Options::default()
    };
    let db = Arc::new(Db::open("/db", options).expect("open"));
    for k in b'b'..=b'z' {
        db.put([k], b"v").expect("put");
    }
    *clock.db.lock().expect("db") = Some(db.clone());
    for (what, prefix) in [("range", false), ("prefix", true)] {
        *clock.armed.lock().expect("armed") = Some(std::thread::current().id());
        let mut range = if prefix {
            db.prefix(b"")
        } else {
            db.range::<&[u8], _>(..)
        };
        let mut seen = Vec::new();
        while let Some(front) = range.next() {
            seen.push(front.expect("front").0);
            let Some(back) = range.next_back() else { break };
            seen.push(back.expect("back").0);
        }
        seen.sort();
        let a = seen.iter().filter(|k| k.as_slice() == b"a").count();
        let z = seen.iter().filter(|k| k.as_slice() == b"z").count();
        assert_eq!(
            a + z,
            1,
            "{what}: exactly one of the moved record's keys, saw {seen:?}"
        );
        assert_eq!(seen.len(), 25, "{what}: b..=y and the moved record");
        // Put the record back for the next round.
        let mut batch = WriteBatch::new();
        batch.delete(b"a");
        batch.put(b"z", b"v");
        db.write(batch).expect("write");
    }
    // The clock held the database: let both go.
    clock.db.lock().expect("db").take();
}
