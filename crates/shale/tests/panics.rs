//! A background job that panics (here in a user's compaction filter or merge operator) poisons
//! the database with [`Error::Panicked`] instead of ending its thread with the job marked
//! running: writers then get an error naming the panic instead of waiting for ever on a level
//! 0 no compaction will ever shrink, reads go on, the handle closes, and a reopen without the
//! faulty code finds every acknowledged write. A write group whose insert panics (a user's
//! comparator) poisons the same way and frees the writers queued behind it.

use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use std::cmp::Ordering;

use shale::{CompactionFilter, Comparator, Db, Error, FilterDecision, MergeOperator, Options};

/// Panics on the key `boom`, keeps every other entry.
struct PanicsOnBoom;

impl CompactionFilter for PanicsOnBoom {
    fn name(&self) -> &str {
        "panics-on-boom"
    }

    fn filter(&self, _level: usize, key: &[u8], _value: &[u8]) -> FilterDecision {
        assert_ne!(key, b"boom", "the test filter met its key");
        FilterDecision::Keep
    }
}

/// Concatenates operands, but panics on any full merge of the key `boom`.
struct PanickingAppend;

impl MergeOperator for PanickingAppend {
    fn name(&self) -> &str {
        "panicking-append"
    }

    fn full_merge(
        &self,
        key: &[u8],
        existing: Option<&[u8]>,
        operands: &[&[u8]],
    ) -> Result<Vec<u8>, String> {
        if key == b"boom" {
            panic!("the test operator met {}", String::from_utf8_lossy(key));
        }
        let mut out = existing.unwrap_or_default().to_vec();
        for op in operands {
            out.extend_from_slice(op);
        }
        Ok(out)
    }
}

/// Small buffers and triggers, so that a few hundred writes flush and compact, and level 0
/// stops writers soon if compactions never run.
fn small_options() -> Options {
    Options {
        write_buffer_size: 64 * 1024,
        level0_file_num_compaction_trigger: 2,
        level0_slowdown_writes_trigger: 3,
        level0_stop_writes_trigger: 4,
        ..Options::default()
    }
}

/// Keys cycle over a small range, so that every table overlaps every other and no compaction
/// is a trivial move (which would leave the faulty code uncalled).
const KEYS: usize = 300;

fn key(i: usize) -> Vec<u8> {
    format!("key{:04}", i % KEYS).into_bytes()
}

/// The value of the `i`th write: 1,000 bytes that name it.
fn value(i: usize) -> Vec<u8> {
    let mut v = format!("{i:08}").into_bytes();
    v.resize(1000, b'v');
    v
}

/// After `acknowledged` writes of [`write_until_refused`], each key holds its last value.
fn assert_holds_the_last_writes(db: &Db, acknowledged: usize) {
    for k in 0..KEYS {
        let expected = (k..acknowledged).step_by(KEYS).next_back().map(value);
        assert_eq!(db.get(key(k)).expect("get"), expected, "key {k}");
    }
}

/// Runs `work` on a thread of its own and fails the test if it takes more than a minute,
/// instead of hanging the suite as the bug this file guards against did.
fn within_a_minute<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    let (done, finished) = mpsc::channel();
    let worker = std::thread::spawn(move || {
        let out = work();
        let _ = done.send(());
        out
    });
    match finished.recv_timeout(Duration::from_secs(60)) {
        // Disconnected: the work panicked; joining passes its panic on.
        Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => match worker.join() {
            Ok(out) => out,
            Err(panic) => std::panic::resume_unwind(panic),
        },
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("the database hung after a panic")
        }
    }
}

/// Runs `test` on a fresh database directory, within a minute ([`within_a_minute`]).
fn in_a_fresh_dir(test: impl FnOnce(&std::path::Path) + Send + 'static) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().to_path_buf();
    within_a_minute(move || test(&path));
}

/// Writes [`value`]s over the [`key`]s until a write fails (the database poisoned), returning
/// how many were acknowledged and the error; panics if 100,000 writes all succeed. After a
/// thousand writes, `boom` writes the key the faulty code panics on: by then the tree has
/// levels, so the key's table lands in level 0 and is compacted (the first flushes of an empty
/// tree go deeper).
fn write_until_refused(db: &Db, boom: impl Fn(&Db) -> shale::Result<()>) -> (usize, Error) {
    for i in 0..100_000 {
        if i == 1000 {
            boom(db).expect("write the key the faulty code panics on");
        }
        if let Err(e) = db.put(key(i), value(i)) {
            return (i, e);
        }
    }
    panic!("100,000 writes went through a database whose compactions panic");
}

#[test]
fn a_panicking_compaction_filter_poisons_a_manual_compaction() {
    in_a_fresh_dir(|path| {
        let opts = Options {
            compaction_filter: Some(Arc::new(PanicsOnBoom)),
            ..small_options()
        };
        let db = Db::open(path, opts).expect("open");
        db.put("a", "1").expect("put a");
        db.put("boom", "2").expect("put boom");
        db.flush().expect("flush");
        let err = db
            .compact_range(None, None)
            .expect_err("a compaction through a panicking filter");
        match &err {
            Error::Panicked { job, message } => {
                assert_eq!(*job, "manual compaction");
                assert!(message.contains("the test filter met its key"), "{message}");
            }
            other => panic!("expected Error::Panicked, got {other}"),
        }
        // Writes are refused, naming the panic; reads go on.
        match db.put("c", "3") {
            Err(Error::Poisoned(message)) => {
                assert!(message.contains("panicked"), "{message}")
            }
            other => panic!("expected Error::Poisoned, got {other:?}"),
        }
        assert_eq!(db.get("a").expect("get a"), Some(b"1".to_vec()));
        assert_eq!(db.get("boom").expect("get boom"), Some(b"2".to_vec()));
        drop(db);

        let db = Db::open(path, small_options()).expect("reopen without the filter");
        assert_eq!(db.get("a").expect("get a"), Some(b"1".to_vec()));
        assert_eq!(db.get("boom").expect("get boom"), Some(b"2".to_vec()));
        assert_eq!(db.get("c").expect("get c"), None);
        db.compact_range(None, None)
            .expect("compact without the filter");
    });
}

#[test]
fn a_background_compaction_that_panics_refuses_writes_instead_of_stalling_them() {
    in_a_fresh_dir(|path| {
        let opts = Options {
            compaction_filter: Some(Arc::new(PanicsOnBoom)),
            ..small_options()
        };
        let db = Db::open(path, opts).expect("open");
        // Without the fix, the compaction thread died, level 0 reached its stop trigger and
        // the next write waited for ever.
        let (acknowledged, err) = write_until_refused(&db, |db| db.put("boom", "x"));
        match &err {
            Error::Poisoned(message) => {
                assert!(
                    message.contains("a background compaction panicked"),
                    "{message}"
                );
                assert!(message.contains("the test filter met its key"), "{message}");
            }
            other => panic!("expected Error::Poisoned, got {other}"),
        }
        assert!(matches!(db.wait_for_compactions(), Err(Error::Poisoned(_))));
        assert_holds_the_last_writes(&db, acknowledged);
        drop(db);

        let db = Db::open(path, small_options()).expect("reopen without the filter");
        assert_eq!(db.get("boom").expect("get boom"), Some(b"x".to_vec()));
        assert_holds_the_last_writes(&db, acknowledged);
    });
}

#[test]
fn a_merge_operator_that_panics_in_a_background_job_poisons_the_database() {
    in_a_fresh_dir(|path| {
        let opts = Options {
            merge_operator: Some(Arc::new(PanickingAppend)),
            ..small_options()
        };
        let db = Db::open(path, opts).expect("open");
        let (acknowledged, err) = write_until_refused(&db, |db| {
            db.put("boom", "base")?;
            db.merge("boom", "+1")
        });
        match &err {
            Error::Poisoned(message) => {
                assert!(message.contains("panicked"), "{message}");
                assert!(message.contains("the test operator met boom"), "{message}");
            }
            other => panic!("expected Error::Poisoned, got {other}"),
        }
        drop(db);

        // Reopened with an operator that does not panic, the merge applies on read.
        let opts = Options {
            merge_operator: Some(Arc::new(shale::StringAppendOperator::new(b""))),
            ..small_options()
        };
        let db = Db::open(path, opts).expect("reopen");
        assert_eq!(db.get("boom").expect("get boom"), Some(b"base+1".to_vec()));
        assert_holds_the_last_writes(&db, acknowledged);
    });
}

/// Bytewise order, but panics whenever it is asked about the key `boom`.
struct PanicsOnBoomKey;

impl Comparator for PanicsOnBoomKey {
    fn name(&self) -> &str {
        "test.bytewise"
    }

    fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
        if a == b"boom" || b == b"boom" {
            panic!("the test comparator met boom");
        }
        a.cmp(b)
    }
}

/// The same order under the same name, without the panic.
struct Bytewise;

impl Comparator for Bytewise {
    fn name(&self) -> &str {
        "test.bytewise"
    }

    fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
        a.cmp(b)
    }
}

/// How a thread's writes ended.
#[derive(Debug)]
enum Ended {
    /// Every write went through.
    Written,
    /// A write was refused with this error.
    Refused(Error),
    /// A write panicked in this thread, with this message.
    Panicked(String),
}

/// Runs `write` in this thread, telling a panic apart from an error.
fn ended(write: impl FnOnce() -> shale::Result<()>) -> Option<Ended> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(write)) {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(Ended::Refused(e)),
        Err(panic) => Some(Ended::Panicked(
            panic
                .downcast_ref::<&str>()
                .map(|m| m.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default(),
        )),
    }
}

/// Writes `boom` with `value` on this thread while four others write small values, over a
/// database whose comparator panics on `boom`; checks that exactly one thread's write
/// panicked (this one, or a writer whose group took `boom` in), that every other write went
/// through or was refused naming the panic, and that later writes are refused. Before the
/// fix, the writers queued behind the panic, and every later one, waited for ever.
fn a_write_panics_among_writers(path: &std::path::Path, value: &[u8]) {
    let opts = Options {
        comparator: Arc::new(PanicsOnBoomKey),
        ..Options::default()
    };
    let db = Arc::new(Db::open(path, opts).expect("open"));
    db.put("a", "1").expect("put a");
    let writers: Vec<_> = (0..4)
        .map(|t| {
            let db = Arc::clone(&db);
            std::thread::spawn(move || {
                for i in 0..5_000 {
                    if let Some(end) = ended(|| db.put(format!("t{t}-{i:05}"), "v")) {
                        return end;
                    }
                }
                Ended::Written
            })
        })
        .collect();
    let mut ends = vec![ended(|| db.put("boom", value)).expect("the write of boom cannot succeed")];
    ends.extend(
        writers
            .into_iter()
            .map(|w| w.join().expect("a writer thread")),
    );
    let panics = ends
        .iter()
        .filter(|e| matches!(e, Ended::Panicked(m) if m.contains("the test comparator met boom")))
        .count();
    assert_eq!(panics, 1, "{ends:?}");
    for end in &ends {
        match end {
            Ended::Written | Ended::Panicked(_) => {}
            Ended::Refused(Error::Panicked { job, message }) => {
                assert_eq!(*job, "write");
                assert!(
                    message.contains("the test comparator met boom"),
                    "{message}"
                );
            }
            Ended::Refused(Error::Poisoned(message)) => {
                assert!(message.contains("a write panicked"), "{message}")
            }
            Ended::Refused(other) => panic!("unexpected error {other}"),
        }
    }
    match db.put("c", "3") {
        Err(Error::Poisoned(message)) => assert!(message.contains("a write panicked"), "{message}"),
        other => panic!("expected Error::Poisoned, got {other:?}"),
    }
    assert_eq!(db.get("a").expect("get a"), Some(b"1".to_vec()));
    drop(db);

    // `boom` reached the log before its insert panicked, so a reopen recovers it, as after a
    // crash at that point. (Reopened with the same comparator, the replay would panic again.)
    let opts = Options {
        comparator: Arc::new(Bytewise),
        ..Options::default()
    };
    let db = Db::open(path, opts).expect("reopen");
    assert_eq!(db.get("a").expect("get a"), Some(b"1".to_vec()));
    assert_eq!(db.get("boom").expect("get boom"), Some(value.to_vec()));
    assert_eq!(db.get("c").expect("get c"), None);
}

#[test]
fn a_comparator_that_panics_in_a_write_group_poisons_the_database_and_frees_the_queue() {
    in_a_fresh_dir(|path| a_write_panics_among_writers(path, b"x"));
}

#[test]
fn a_comparator_that_panics_in_a_separated_put_poisons_the_database_and_frees_the_queue() {
    // A value of `min_blob_size` or more goes to a blob file, by a leader of its own.
    let value = vec![b'v'; Options::default().min_blob_size.expect("separation on") + 1];
    in_a_fresh_dir(move |path| a_write_panics_among_writers(path, &value));
}
