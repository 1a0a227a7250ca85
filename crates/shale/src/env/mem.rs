//! [`Fs`] held entirely in memory: fast deterministic tests, and the base that crash and fault
//! injection build on. Every write is immediately visible to readers; there is no durability
//! distinction (that is the fault-injecting layer's job).

use std::collections::{HashMap, HashSet};
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use super::{FileLock, Fs, RandomAccessFile, SequentialFile, WritableFile};
use crate::error::{Error, Result};

type Contents = Arc<RwLock<Vec<u8>>>;

#[derive(Default)]
struct State {
    files: HashMap<PathBuf, Contents>,
    dirs: HashSet<PathBuf>,
    locks: HashSet<PathBuf>,
}

/// An in-memory filesystem. Cloning shares the same files.
#[derive(Clone, Default)]
pub struct MemFs {
    state: Arc<Mutex<State>>,
}

impl MemFs {
    /// An empty filesystem.
    pub fn new() -> Self {
        MemFs::default()
    }

    /// Direct access to a file's bytes, for tests that damage files at rest.
    pub fn contents(&self, path: &Path) -> Option<Vec<u8>> {
        self.state.lock().files.get(path).map(|c| c.read().clone())
    }

    /// Replaces a file's bytes, for tests that damage files at rest.
    pub fn set_contents(&self, path: &Path, data: Vec<u8>) {
        let mut state = self.state.lock();
        state
            .files
            .insert(path.to_path_buf(), Arc::new(RwLock::new(data)));
    }

    fn get(&self, path: &Path, op: &'static str) -> Result<Contents> {
        self.state
            .lock()
            .files
            .get(path)
            .cloned()
            .ok_or_else(|| not_found(op, path))
    }
}

fn not_found(op: &'static str, path: &Path) -> Error {
    Error::io(op, path, std::io::Error::from(ErrorKind::NotFound))
}

struct MemWritable {
    data: Contents,
    len: u64,
    /// A reused log: appends write over the old bytes, and `close` trims what is left of them.
    overwrite: bool,
}

impl WritableFile for MemWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        let mut contents = self.data.write();
        let start = usize::try_from(self.len).unwrap_or(usize::MAX);
        if self.overwrite && start < contents.len() {
            let over = data.len().min(contents.len() - start);
            contents[start..start + over].copy_from_slice(&data[..over]);
            contents.extend_from_slice(&data[over..]);
        } else {
            contents.extend_from_slice(data);
        }
        self.len += data.len() as u64;
        Ok(())
    }
    fn flush(&mut self) -> Result<()> {
        Ok(())
    }
    fn sync(&mut self) -> Result<()> {
        Ok(())
    }
    fn close(&mut self) -> Result<()> {
        if self.overwrite {
            self.data
                .write()
                .truncate(usize::try_from(self.len).unwrap_or(usize::MAX));
            self.overwrite = false;
        }
        Ok(())
    }
    fn len(&self) -> u64 {
        self.len
    }
}

struct MemRandom {
    path: PathBuf,
    data: Contents,
    size: u64,
}

impl RandomAccessFile for MemRandom {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let data = self.data.read();
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        match start
            .checked_add(buf.len())
            .and_then(|end| data.get(start..end))
        {
            Some(src) => {
                buf.copy_from_slice(src);
                Ok(())
            }
            None => Err(Error::io(
                "read",
                &self.path,
                std::io::Error::from(ErrorKind::UnexpectedEof),
            )),
        }
    }
    fn size(&self) -> u64 {
        self.size
    }
}

struct MemSequential {
    data: Contents,
    pos: usize,
}

impl SequentialFile for MemSequential {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize> {
        let data = self.data.read();
        let rest = data.get(self.pos..).unwrap_or(&[]);
        let n = rest.len().min(buf.len());
        buf[..n].copy_from_slice(&rest[..n]);
        self.pos += n;
        Ok(n)
    }
}

struct MemLock {
    state: Arc<Mutex<State>>,
    path: PathBuf,
}

impl FileLock for MemLock {}

impl Drop for MemLock {
    fn drop(&mut self) {
        self.state.lock().locks.remove(&self.path);
    }
}

impl Fs for MemFs {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let data: Contents = Arc::default();
        self.state
            .lock()
            .files
            .insert(path.to_path_buf(), data.clone());
        Ok(Box::new(MemWritable {
            data,
            len: 0,
            overwrite: false,
        }))
    }

    fn reuse_log(&self, old: &Path, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.rename(old, path)?;
        Ok(Box::new(MemWritable {
            data: self.get(path, "open")?,
            len: 0,
            overwrite: true,
        }))
    }

    fn open_random(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        let data = self.get(path, "open")?;
        let size = data.read().len() as u64;
        Ok(Arc::new(MemRandom {
            path: path.to_path_buf(),
            data,
            size,
        }))
    }

    fn open_sequential(&self, path: &Path) -> Result<Box<dyn SequentialFile>> {
        let data = self.get(path, "open")?;
        Ok(Box::new(MemSequential { data, pos: 0 }))
    }

    fn exists(&self, path: &Path) -> bool {
        let state = self.state.lock();
        state.files.contains_key(path) || state.dirs.contains(path)
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        let state = self.state.lock();
        if !state.dirs.contains(dir) {
            return Err(not_found("list", dir));
        }
        let mut names: Vec<String> = state
            .files
            .keys()
            .chain(state.dirs.iter())
            .filter(|p| p.parent() == Some(dir))
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect();
        names.sort();
        names.dedup();
        Ok(names)
    }

    fn file_size(&self, path: &Path) -> Result<u64> {
        Ok(self.get(path, "stat")?.read().len() as u64)
    }

    fn remove(&self, path: &Path) -> Result<()> {
        self.state
            .lock()
            .files
            .remove(path)
            .map(|_| ())
            .ok_or_else(|| not_found("remove", path))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let mut state = self.state.lock();
        let data = state
            .files
            .remove(from)
            .ok_or_else(|| not_found("rename", from))?;
        state.files.insert(to.to_path_buf(), data);
        Ok(())
    }

    fn link(&self, from: &Path, to: &Path) -> Result<()> {
        let mut state = self.state.lock();
        let data = state
            .files
            .get(from)
            .cloned()
            .ok_or_else(|| not_found("link", from))?;
        state.files.insert(to.to_path_buf(), data);
        Ok(())
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        let mut state = self.state.lock();
        for ancestor in dir.ancestors() {
            if ancestor.as_os_str().is_empty() {
                break;
            }
            state.dirs.insert(ancestor.to_path_buf());
        }
        Ok(())
    }

    fn remove_dir(&self, dir: &Path) -> Result<()> {
        let mut state = self.state.lock();
        if state.files.keys().any(|p| p.parent() == Some(dir)) {
            return Err(Error::io(
                "rmdir",
                dir,
                std::io::Error::other("directory not empty"),
            ));
        }
        state.dirs.remove(dir);
        Ok(())
    }

    fn sync_file(&self, path: &Path) -> Result<()> {
        self.get(path, "sync").map(|_| ())
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        if self.state.lock().dirs.contains(dir) {
            Ok(())
        } else {
            Err(not_found("sync dir", dir))
        }
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        let mut state = self.state.lock();
        if !state.locks.insert(path.to_path_buf()) {
            return Err(Error::Locked {
                path: path.parent().unwrap_or(path).to_path_buf(),
            });
        }
        state.files.entry(path.to_path_buf()).or_default();
        Ok(Box::new(MemLock {
            state: self.state.clone(),
            path: path.to_path_buf(),
        }))
    }
}
