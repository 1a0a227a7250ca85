//! `Options::low_priority_compactions`: with it on, a background compaction merges on a thread
//! at the lowest CPU priority (nice 19), unless writers are already being slowed for it, and
//! finishes at normal priority if they come to be slowed while it runs; manual compactions,
//! and every compaction with the option off (the default), merge at the caller's priority. A
//! compaction filter, which runs inside the merge, reads the nice value of the thread it runs
//! on.

#![cfg(target_os = "linux")]

use std::collections::BTreeSet;
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use shale::{CompactionFilter, Db, FilterDecision, Options, WriteBatch};

/// The nice value of the calling thread (field 19 of its `stat`).
fn this_threads_nice() -> i32 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").expect("read the thread's stat");
    // The name, in parentheses, may hold spaces; the fields after it are plain numbers. The
    // first of them is field 3, so field 19 is the seventeenth.
    let (_, fields) = stat.rsplit_once(')').expect("a stat line");
    fields
        .split_whitespace()
        .nth(16)
        .and_then(|f| f.parse().ok())
        .expect("the nice field")
}

/// Keeps every entry and notes, in order, the nice value of the thread of each call. With a
/// hold, its first call signals `entered` and waits for `release`.
#[derive(Default)]
struct NiceRecorder {
    seen: Mutex<Vec<i32>>,
    hold: Option<Hold>,
}

/// The channels a [`NiceRecorder`]'s first call is held on.
struct Hold {
    entered: Mutex<Option<mpsc::Sender<()>>>,
    release: Mutex<mpsc::Receiver<()>>,
}

impl NiceRecorder {
    /// The nice values noted so far, in call order, forgotten here.
    fn take(&self) -> Vec<i32> {
        std::mem::take(&mut *self.seen.lock().expect("recorder lock"))
    }

    /// The distinct nice values noted so far, forgotten here.
    fn take_set(&self) -> BTreeSet<i32> {
        self.take().into_iter().collect()
    }
}

impl CompactionFilter for NiceRecorder {
    fn name(&self) -> &str {
        "nice-recorder"
    }

    fn filter(&self, _level: usize, _key: &[u8], _value: &[u8]) -> FilterDecision {
        let nice = this_threads_nice();
        self.seen.lock().expect("recorder lock").push(nice);
        if let Some(hold) = &self.hold {
            let first = hold.entered.lock().expect("recorder lock").take();
            if let Some(entered) = first {
                entered.send(()).expect("the test waits");
                hold.release
                    .lock()
                    .expect("recorder lock")
                    .recv_timeout(Duration::from_secs(60))
                    .expect("released");
            }
        }
        FilterDecision::Keep
    }
}

/// Distinct keys for distinct `i`, in no particular order.
fn key(i: u32) -> Vec<u8> {
    format!("key{:010}", i.reverse_bits()).into_bytes()
}

fn value(i: u32) -> Vec<u8> {
    vec![(i % 251) as u8; 100]
}

/// Writes enough, in small memtables, that level 0 must be compacted, waits for the
/// background work and checks that it compacted and that every key reads back. Returns the
/// nice values the background compactions merged at.
fn background_compaction_nice(options: Options) -> BTreeSet<i32> {
    let recorder = Arc::new(NiceRecorder::default());
    let options = Options {
        write_buffer_size: 256 << 10,
        compaction_filter: Some(recorder.clone()),
        ..options
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), options).expect("open");
    for round in 0..24u32 {
        let mut batch = WriteBatch::new();
        for i in round * 2000..(round + 1) * 2000 {
            batch.put(key(i), value(i));
        }
        db.write(batch).expect("write");
    }
    db.flush().expect("flush");
    db.wait_for_compactions().expect("wait for compactions");
    let compactions = db.stats().compactions;
    assert!(compactions >= 1, "no compaction ran");
    for i in (0..24 * 2000).step_by(7) {
        assert_eq!(db.get(key(i)).expect("get"), Some(value(i)), "key {i}");
    }
    let seen = recorder.take_set();
    // A manual compaction runs on the caller's thread, at its priority, whatever the option.
    db.compact_range(None, None).expect("compact");
    let manual = recorder.take_set();
    assert_eq!(manual, BTreeSet::from([this_threads_nice()]), "manual");
    seen
}

#[test]
fn background_compactions_merge_at_the_lowest_priority_unless_writes_wait_for_them() {
    // Threads start at the nice value of the thread that makes them: this one's. Run at 19
    // already, the test could not tell the two apart.
    let base = this_threads_nice();
    assert!(
        base < 19,
        "the test runs at nice {base}: it needs a lower one"
    );

    // Writers never slowed (the trigger out of reach): every background merge at nice 19.
    let never_slowed = Options {
        low_priority_compactions: true,
        level0_slowdown_writes_trigger: 1000,
        level0_stop_writes_trigger: 1000,
        ..Options::default()
    };
    assert_eq!(
        background_compaction_nice(never_slowed),
        BTreeSet::from([19]),
        "low priority"
    );

    // Writers slowed as soon as level 0 is due: the compaction they wait for runs at normal
    // priority. (The data never fills level 1, so level 0's are the only compactions.)
    let slowed_at_once = Options {
        low_priority_compactions: true,
        level0_file_num_compaction_trigger: 4,
        level0_slowdown_writes_trigger: 4,
        ..Options::default()
    };
    assert_eq!(
        background_compaction_nice(slowed_at_once),
        BTreeSet::from([base]),
        "writers slowed"
    );

    // Off, the default: at the background threads' priority.
    assert!(!Options::default().low_priority_compactions);
    assert_eq!(
        background_compaction_nice(Options::default()),
        BTreeSet::from([base]),
        "option off"
    );
}

#[test]
fn a_low_priority_merge_finishes_at_normal_priority_once_writers_are_slowed_for_it() {
    let base = this_threads_nice();
    assert!(
        base < 19,
        "the test runs at nice {base}: it needs a lower one"
    );
    let (entered_tx, entered_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel();
    let recorder = Arc::new(NiceRecorder {
        seen: Mutex::new(Vec::new()),
        hold: Some(Hold {
            entered: Mutex::new(Some(entered_tx)),
            release: Mutex::new(release_rx),
        }),
    });
    // Interleaved keys: the first two tables go to levels 2 and 1, which they do not overlap;
    // the next two stay in level 0 and start a compaction while writers are not slowed (at
    // nice 19); a third in level 0 reaches the slowdown trigger while it runs.
    let options = Options {
        low_priority_compactions: true,
        level0_file_num_compaction_trigger: 2,
        level0_slowdown_writes_trigger: 3,
        level0_stop_writes_trigger: 1000,
        compaction_filter: Some(recorder.clone()),
        ..Options::default()
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), options).expect("open");
    let write_table = |round: u32| {
        let mut batch = WriteBatch::new();
        for i in 0..2000 {
            let i = i * 5 + round;
            batch.put(key(i), value(i));
        }
        db.write(batch).expect("write");
        db.flush().expect("flush");
    };
    for round in 0..4 {
        write_table(round);
    }
    entered_rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the compaction's merge began");
    write_table(4);
    release_tx.send(()).expect("the merge waits");
    db.wait_for_compactions().expect("wait for compactions");

    assert!(db.stats().compactions_raised >= 1, "{:?}", db.stats());
    let seen = recorder.take();
    assert_eq!(seen.first(), Some(&19), "began at low priority");
    assert_eq!(seen.last(), Some(&base), "finished at normal priority");
    for i in (0..5 * 2000).step_by(7) {
        assert_eq!(db.get(key(i)).expect("get"), Some(value(i)), "key {i}");
    }
}
