//! Helpers shared by the integration tests.

// Each test crate includes this module and uses part of it.
#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;

use shale::env::{FileLock, Fs, MemFs, RandomAccessFile, SequentialFile, WritableFile};

/// Wraps each table or other file [`HookedFs::on_create`] creates.
type CreateHook = dyn Fn(&Path, Box<dyn WritableFile>) -> Box<dyn WritableFile> + Send + Sync;
/// Runs before each [`Fs::remove`].
type RemoveHook = dyn Fn(&Path) + Send + Sync;
/// Runs before each [`Fs::open_random`] and [`Fs::open_sequential`]; an error fails the open.
type OpenHook = dyn Fn(&Path) -> shale::Result<()> + Send + Sync;

/// A [`MemFs`] with hooks on `create`, `remove` and the opens, for tests where one call must behave
/// differently (a file changed behind the engine's back, a removal held at a gate); every other
/// call goes to the [`MemFs`] as it is.
#[derive(Clone)]
pub struct HookedFs {
    mem: MemFs,
    create_hook: Option<Arc<CreateHook>>,
    remove_hook: Option<Arc<RemoveHook>>,
    open_hook: Option<Arc<OpenHook>>,
}

impl HookedFs {
    /// `mem` with no hooks yet.
    pub fn new(mem: MemFs) -> HookedFs {
        HookedFs {
            mem,
            create_hook: None,
            remove_hook: None,
            open_hook: None,
        }
    }

    /// Passes each file [`Fs::create`] makes, with its path, through `hook`.
    pub fn on_create(
        mut self,
        hook: impl Fn(&Path, Box<dyn WritableFile>) -> Box<dyn WritableFile> + Send + Sync + 'static,
    ) -> HookedFs {
        self.create_hook = Some(Arc::new(hook));
        self
    }

    /// Calls `hook` with the path before each [`Fs::remove`].
    pub fn before_remove(mut self, hook: impl Fn(&Path) + Send + Sync + 'static) -> HookedFs {
        self.remove_hook = Some(Arc::new(hook));
        self
    }

    /// Calls `hook` with the path before each open for reading; its error fails the open.
    pub fn before_open(
        mut self,
        hook: impl Fn(&Path) -> shale::Result<()> + Send + Sync + 'static,
    ) -> HookedFs {
        self.open_hook = Some(Arc::new(hook));
        self
    }

    fn check_open(&self, path: &Path) -> shale::Result<()> {
        match &self.open_hook {
            Some(hook) => hook(path),
            None => Ok(()),
        }
    }
}

impl Fs for HookedFs {
    fn create(&self, path: &Path) -> shale::Result<Box<dyn WritableFile>> {
        let file = self.mem.create(path)?;
        Ok(match &self.create_hook {
            Some(hook) => hook(path, file),
            None => file,
        })
    }
    fn create_log(&self, path: &Path) -> shale::Result<Box<dyn WritableFile>> {
        self.mem.create_log(path)
    }
    fn reuse_log(&self, old: &Path, path: &Path) -> shale::Result<Box<dyn WritableFile>> {
        self.mem.reuse_log(old, path)
    }
    fn open_random(&self, path: &Path) -> shale::Result<Arc<dyn RandomAccessFile>> {
        self.check_open(path)?;
        self.mem.open_random(path)
    }
    fn open_sequential(&self, path: &Path) -> shale::Result<Box<dyn SequentialFile>> {
        self.check_open(path)?;
        self.mem.open_sequential(path)
    }
    fn exists(&self, path: &Path) -> bool {
        self.mem.exists(path)
    }
    fn list(&self, dir: &Path) -> shale::Result<Vec<String>> {
        self.mem.list(dir)
    }
    fn file_size(&self, path: &Path) -> shale::Result<u64> {
        self.mem.file_size(path)
    }
    fn remove(&self, path: &Path) -> shale::Result<()> {
        if let Some(hook) = &self.remove_hook {
            hook(path);
        }
        self.mem.remove(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> shale::Result<()> {
        self.mem.rename(from, to)
    }
    fn link(&self, from: &Path, to: &Path) -> shale::Result<()> {
        self.mem.link(from, to)
    }
    fn create_dir_all(&self, dir: &Path) -> shale::Result<()> {
        self.mem.create_dir_all(dir)
    }
    fn remove_dir(&self, dir: &Path) -> shale::Result<()> {
        self.mem.remove_dir(dir)
    }
    fn sync_dir(&self, dir: &Path) -> shale::Result<()> {
        self.mem.sync_dir(dir)
    }
    fn sync_file(&self, path: &Path) -> shale::Result<()> {
        self.mem.sync_file(path)
    }
    fn lock(&self, path: &Path) -> shale::Result<Box<dyn FileLock>> {
        self.mem.lock(path)
    }
}
