//! A table a flush or a compaction writes is checked, as reads will open it, before the
//! manifest names it: one that does not read back as it was built (here a filesystem layer
//! changes a bit of its footer and reports no error) fails the job, and nothing it held is
//! lost.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use shale::env::fault::flip_bit;
use shale::env::{Fs, MemFs, WritableFile};
use shale::{Db, Error, Options};

mod common;
use common::HookedFs;

/// A [`MemFs`] (`mem`) that, while `armed`, flips a bit of the footer of the next table it
/// finishes writing (at its sync, after the bytes are in place), and then disarms.
fn footer_mangler(mem: &MemFs, armed: &Arc<AtomicBool>) -> HookedFs {
    let (inner_mem, armed) = (mem.clone(), armed.clone());
    HookedFs::new(mem.clone()).on_create(move |path, inner| {
        if path.extension().is_some_and(|e| e == "sst") {
            Box::new(ManglingFile {
                inner,
                mem: inner_mem.clone(),
                path: path.to_path_buf(),
                armed: armed.clone(),
            })
        } else {
            inner
        }
    })
}

struct ManglingFile {
    inner: Box<dyn WritableFile>,
    mem: MemFs,
    path: std::path::PathBuf,
    armed: Arc<AtomicBool>,
}

impl WritableFile for ManglingFile {
    fn append(&mut self, data: &[u8]) -> shale::Result<()> {
        self.inner.append(data)
    }

    fn flush(&mut self) -> shale::Result<()> {
        self.inner.flush()
    }

    fn sync(&mut self) -> shale::Result<()> {
        self.inner.sync()?;
        if self.armed.swap(false, Ordering::SeqCst) {
            // The footer's last byte: part of the table magic number.
            let len = self.inner.len() as usize;
            assert!(flip_bit(&self.mem, &self.path, len - 1, 3), "flip failed");
        }
        Ok(())
    }

    fn close(&mut self) -> shale::Result<()> {
        self.inner.close()
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }
}

fn options(fs: Arc<dyn Fs>) -> Options {
    Options {
        write_buffer_size: 64 * 1024,
        // Flushes and compactions only when the test asks.
        level0_file_num_compaction_trigger: 100,
        level0_slowdown_writes_trigger: 200,
        level0_stop_writes_trigger: 300,
        fs,
        ..Options::default()
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn value(i: u32, round: u32) -> Vec<u8> {
    format!("value-{i:06}-{round}-{}", "x".repeat(40)).into_bytes()
}

/// Every key holds its value from `round`, read through a fresh open of `mem`.
fn reopen_and_check(mem: &MemFs, dir: &Path, n: u32, round: u32) {
    let db = Db::open(dir, options(Arc::new(mem.clone()))).expect("reopen");
    for i in 0..n {
        let got = db.get(key(i)).expect("read after reopen");
        assert_eq!(got, Some(value(i, round)), "key {i}");
    }
}

/// The table files in `dir`.
fn tables(mem: &MemFs, dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = mem
        .list(dir)
        .expect("list")
        .into_iter()
        .filter(|n| n.ends_with(".sst"))
        .collect();
    names.sort();
    names
}

/// The job's error, or the poisoning it caused, names the table and the damage.
fn is_corruption_of_a_table(e: &Error) -> bool {
    let message = e.to_string();
    message.contains("corruption in /db/") && message.contains(".sst") && message.contains("magic")
}

#[test]
fn a_flushed_table_that_does_not_read_back_fails_the_flush_and_loses_nothing() {
    let mem = MemFs::new();
    let armed = Arc::new(AtomicBool::new(false));
    let fs = footer_mangler(&mem, &armed);
    let dir = Path::new("/db");
    let db = Db::open(dir, options(Arc::new(fs.clone()))).expect("open");
    for i in 0..500 {
        db.put(key(i), value(i, 0)).expect("put");
    }
    armed.store(true, Ordering::SeqCst);
    let err = db.flush().expect_err("the mangled table was installed");
    assert!(is_corruption_of_a_table(&err), "{err}");
    assert!(!armed.load(Ordering::SeqCst), "no table was written");
    drop(db);
    reopen_and_check(&mem, dir, 500, 0);
}

#[test]
fn a_compaction_output_that_does_not_read_back_fails_the_compaction_and_loses_nothing() {
    let mem = MemFs::new();
    let armed = Arc::new(AtomicBool::new(false));
    let fs = footer_mangler(&mem, &armed);
    let dir = Path::new("/db");
    let db = Db::open(dir, options(Arc::new(fs.clone()))).expect("open");
    // Two overlapping tables, so the compaction merges them into a new one.
    for round in 0..2 {
        for i in 0..500 {
            db.put(key(i), value(i, round)).expect("put");
        }
        db.flush().expect("flush");
    }
    let before = tables(&mem, dir);
    assert_eq!(before.len(), 2, "{before:?}");
    armed.store(true, Ordering::SeqCst);
    let err = db
        .compact_range(None, None)
        .expect_err("the mangled table was installed");
    assert!(is_corruption_of_a_table(&err), "{err}");
    assert!(!armed.load(Ordering::SeqCst), "no table was written");
    // The failed job removed what it wrote; its inputs are still the database's tables.
    assert_eq!(tables(&mem, dir), before);
    drop(db);
    reopen_and_check(&mem, dir, 500, 1);
}

/// A repair whose new table does not read back fails before it touches the manifest: the
/// database opens as it was, with every key, and a second repair succeeds.
#[test]
fn a_repair_whose_table_does_not_read_back_leaves_the_database_as_it_was() {
    let mem = MemFs::new();
    let armed = Arc::new(AtomicBool::new(false));
    let fs = footer_mangler(&mem, &armed);
    let dir = Path::new("/db");
    {
        let db = Db::open(dir, options(Arc::new(fs.clone()))).expect("open");
        for i in 0..500 {
            db.put(key(i), value(i, 0)).expect("put");
        }
        db.flush().expect("flush");
        // Newer values of half the keys stay in the WAL only.
        for i in 0..250 {
            db.put(key(i), value(i, 1)).expect("put");
        }
    }
    let files_before = {
        let mut names = mem.list(dir).expect("list");
        names.sort();
        names
    };
    armed.store(true, Ordering::SeqCst);
    let err = Db::repair(dir, &options(Arc::new(fs.clone()))).expect_err("repair succeeded");
    assert!(is_corruption_of_a_table(&err), "{err}");
    let mut files_after = mem.list(dir).expect("list");
    files_after.sort();
    assert_eq!(
        files_after, files_before,
        "the failed repair left or removed files"
    );
    let check = |db: &Db| {
        for i in 0..500 {
            let round = u32::from(i < 250);
            assert_eq!(
                db.get(key(i)).expect("get"),
                Some(value(i, round)),
                "key {i}"
            );
        }
    };
    check(&Db::open(dir, options(Arc::new(mem.clone()))).expect("open after the failure"));
    Db::repair(dir, &options(Arc::new(mem.clone()))).expect("second repair");
    check(&Db::open(dir, options(Arc::new(mem.clone()))).expect("open after repair"));
}
