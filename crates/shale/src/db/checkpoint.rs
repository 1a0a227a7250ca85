//! Checkpoints: a consistent copy of an open database in another directory, made while the
//! database keeps serving reads and writes.
//!
//! How: the memtable is flushed, so that every acknowledged write is in a table; the current
//! [`Version`](crate::version::Version) is then taken under the state lock and held, which keeps
//! its tables from being deleted by compaction while they are copied. Each table is hard-linked
//! into the destination (tables are immutable, so sharing the inode is safe), or copied where
//! linking fails (another filesystem). The blob files the version references are linked the same
//! way (a blob file is complete and never written again once its WAL is retired, which the flush
//! guarantees for every blob file a version names). Last, a fresh manifest is written in the
//! destination listing every table at its level, with the sequence number set to the largest one in
//! those tables and a log number past every file number, so that opening the checkpoint replays no
//! WAL.
//!
//! Invariants: the checkpoint holds exactly the state of the version taken after the flush:
//! every write acknowledged before [`Db::checkpoint`] was called, and possibly writes made while
//! it ran, but never a part of a write batch. A destination that exists and is not empty is
//! refused, so a checkpoint never mixes with other files.
//!
//! Thread-safety: `checkpoint` takes `&self` and may run beside any other call; the state lock
//! is held only to take the version. Formats: `docs/format/manifest.md`, `docs/format/files.md`.

use std::path::{Path, PathBuf};

use super::Db;
use crate::env::Fs;
use crate::error::{Error, Result};
use crate::filename::{blob_file_name, manifest_file_name, table_file_name};
use crate::limits::NUM_LEVELS;
use crate::version::{VersionEdit, VersionSet};

/// Bytes moved per read and append when a table has to be copied instead of linked.
const COPY_CHUNK_BYTES: usize = 1 << 20;

impl Db {
    /// Writes a consistent copy of the database into directory `dest`, which must not exist or
    /// be empty. The copy opens with [`Db::open`] and holds every write acknowledged before
    /// this call. Tables are hard-linked where the filesystem allows it, so a checkpoint on the
    /// same filesystem costs little space until the source compacts its tables away.
    ///
    /// Fails with [`Error::InvalidArgument`] on a read-only handle (it cannot flush) or a
    /// non-empty destination.
    pub fn checkpoint(&self, dest: impl AsRef<Path>) -> Result<()> {
        let dest = dest.as_ref();
        let fs = self.inner.options.fs.clone();
        if fs.exists(dest) && !fs.list(dest)?.is_empty() {
            return Err(Error::InvalidArgument(format!(
                "checkpoint destination {} exists and is not empty",
                dest.display()
            )));
        }
        self.flush()?;
        // Holding the version keeps its tables alive: obsolete-file deletion spares every table
        // of a version someone still holds.
        let version = self.inner.state.lock().versions.current();
        fs.create_dir_all(dest)?;
        let mut created: Vec<PathBuf> = Vec::new();
        let result = (|| -> Result<()> {
            let mut edit = VersionEdit::default();
            let mut max_number = 0u64;
            let mut max_sequence = 0u64;
            for level in 0..NUM_LEVELS {
                for file in version.files(level) {
                    let from = table_file_name(&self.inner.dir, file.number);
                    let to = table_file_name(dest, file.number);
                    link_or_copy(fs.as_ref(), &from, &to, &mut created)?;
                    max_number = max_number.max(file.number);
                    max_sequence = max_sequence.max(file.largest_seqno);
                    edit.add_file(level, (**file).clone());
                }
            }
            for (&number, meta) in version.blob_files() {
                let from = blob_file_name(&self.inner.dir, number);
                let to = blob_file_name(dest, number);
                link_or_copy(fs.as_ref(), &from, &to, &mut created)?;
                max_number = max_number.max(number);
                edit.add_blob_bytes(number, meta.total_bytes);
                if meta.garbage_bytes > 0 {
                    edit.add_blob_garbage(number, meta.garbage_bytes);
                }
            }
            fs.sync_dir(dest)?;
            let mut versions = VersionSet::new(dest.to_path_buf(), self.inner.options.clone());
            created.push(manifest_file_name(dest, 1));
            created.push(crate::filename::current_file_name(dest));
            versions.create_new_db()?;
            versions.recover()?;
            versions.mark_file_number_used(max_number);
            // Every WAL number the copy could hold is below this, so opening it replays none.
            edit.log_number = Some(versions.new_file_number());
            edit.last_sequence = Some(max_sequence);
            versions.set_last_sequence(max_sequence);
            versions.log_and_apply(edit)?;
            created.push(manifest_file_name(dest, versions.manifest_number()));
            // The first manifest, written by `create_new_db`, is no longer named by CURRENT.
            let first = manifest_file_name(dest, 1);
            if versions.manifest_number() != 1 {
                fs.remove(&first)?;
            }
            fs.sync_dir(dest)
        })();
        if let Err(e) = result {
            // Leave no half-made database behind: it could be mistaken for a good checkpoint.
            for path in created.iter().rev() {
                let _ = fs.remove(path);
            }
            let _ = fs.remove_dir(dest);
            return Err(e);
        }
        tracing::info!(
            source = %self.inner.dir.display(),
            dest = %dest.display(),
            tables = version.all_file_numbers().count(),
            "checkpoint written"
        );
        Ok(())
    }
}

/// Hard-links `from` to `to`, or copies it (synced) when the link fails, e.g. across
/// filesystems. Records `to` in `created` once it exists.
fn link_or_copy(fs: &dyn Fs, from: &Path, to: &Path, created: &mut Vec<PathBuf>) -> Result<()> {
    if fs.link(from, to).is_ok() {
        created.push(to.to_path_buf());
        return Ok(());
    }
    let mut src = fs.open_sequential(from)?;
    let mut dst = fs.create(to)?;
    created.push(to.to_path_buf());
    let mut buf = vec![0u8; COPY_CHUNK_BYTES];
    loop {
        let n = src.read(&mut buf)?;
        if n == 0 {
            break;
        }
        dst.append(buf.get(..n).unwrap_or(&[]))?;
    }
    dst.sync()?;
    dst.close()
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use crate::env::{Fs, MemFs};
    use crate::{Db, Error, Options};

    fn options(fs: &MemFs) -> Options {
        Options {
            write_buffer_size: 16 * 1024,
            max_file_size: 16 * 1024,
            max_bytes_for_level_base: 64 * 1024,
            level0_file_num_compaction_trigger: 2,
            fs: Arc::new(fs.clone()),
            ..Options::default()
        }
    }

    fn contents(db: &Db) -> Vec<(Vec<u8>, Vec<u8>)> {
        db.range::<&[u8], _>(..)
            .map(|r| r.expect("scan"))
            .collect::<Vec<_>>()
    }

    #[test]
    fn checkpoint_opens_and_equals_the_source() {
        let fs = MemFs::new();
        let db = Db::open("/src", options(&fs)).expect("open");
        let mut rng = StdRng::seed_from_u64(7);
        for i in 0..3000u32 {
            let key = format!("key{:05}", rng.gen_range(0..2000u32));
            if i % 7 == 0 {
                db.delete(key.as_bytes()).expect("delete");
            } else {
                db.put(key.as_bytes(), format!("value{i}").as_bytes())
                    .expect("put");
            }
        }
        assert!(db.stats().flushes > 0, "the test must cover tables");
        // Some writes sit only in the memtable and WAL; the checkpoint must include them.
        db.put(b"last", b"in the memtable").expect("put");
        let expected = contents(&db);

        db.checkpoint("/copy").expect("checkpoint");
        // The source moves on; the checkpoint must not.
        db.put(b"after", b"not in the copy").expect("put");
        db.compact_range(None, None).expect("compact");

        let names = fs.list(Path::new("/copy")).expect("list");
        assert!(
            !names.iter().any(|n| n.ends_with(".log")),
            "a checkpoint holds no WAL: {names:?}"
        );
        let copy = Db::open("/copy", options(&fs)).expect("open checkpoint");
        assert_eq!(contents(&copy), expected);
        assert_eq!(copy.get(b"after").expect("get"), None);
        // The copy is a database of its own: it takes writes and reopens with them.
        copy.put(b"new", b"in the copy").expect("put");
        drop(copy);
        let copy = Db::open("/copy", options(&fs)).expect("reopen checkpoint");
        assert_eq!(
            copy.get(b"new").expect("get"),
            Some(b"in the copy".to_vec())
        );
        assert_eq!(
            copy.get(b"last").expect("get"),
            Some(b"in the memtable".to_vec())
        );
        assert_eq!(contents(&db).len(), expected.len() + 1);
    }

    #[test]
    fn checkpoint_refuses_a_non_empty_destination() {
        let fs = MemFs::new();
        let db = Db::open("/src", options(&fs)).expect("open");
        db.put(b"k", b"v").expect("put");
        fs.create_dir_all(Path::new("/busy")).expect("mkdir");
        let mut f = fs.create(Path::new("/busy/file")).expect("create");
        f.append(b"x").expect("append");
        f.close().expect("close");
        match db.checkpoint("/busy") {
            Err(Error::InvalidArgument(m)) => assert!(m.contains("/busy"), "{m}"),
            other => panic!("expected a refusal, got {other:?}"),
        }
        assert_eq!(fs.list(Path::new("/busy")).expect("list"), vec!["file"]);
    }

    #[test]
    fn checkpoint_of_an_empty_database_opens_empty() {
        let fs = MemFs::new();
        let db = Db::open("/src", options(&fs)).expect("open");
        db.checkpoint("/copy").expect("checkpoint");
        let copy = Db::open("/copy", options(&fs)).expect("open checkpoint");
        assert!(contents(&copy).is_empty());
    }
}
