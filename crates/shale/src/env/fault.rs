//! [`FaultFs`]: a filesystem wrapper that remembers what a real disk would have kept, so tests can
//! simulate crashes and I/O failures at any filesystem call, and damage files at rest.
//!
//! What it models (per file, by identity: a file keeps its identity across renames):
//! - bytes *appended* but not flushed live in the process (a user-space buffer): a process crash
//!   loses them;
//! - bytes *flushed* reached the operating system: they survive a process crash, not a power loss;
//! - bytes *synced* are durable: they survive a power loss;
//! - a directory entry created, renamed or removed becomes durable only when its parent directory
//!   is synced ([`Fs::sync_dir`]); until then a power loss may undo it. Pending entry changes of a
//!   directory are kept in order, each applied atomically (a rename moves its entry in one step).
//!
//! From that, [`FaultFs::snapshot`] captures the state and [`CrashSnapshot::image`] produces the
//! [`MemFs`] a restarted process would find after a crash of a given [`CrashMode`].
//!
//! Faults: [`FaultFs::inject`] fails the n-th matching call (by [`OpKind`], or any call), once or
//! for good, with `EIO`, `ENOSPC` or a short write; [`FaultFs::set_space_quota`] fails appends
//! with `ENOSPC` once the live files would pass a byte budget. A failed sync is modelled as Linux
//! does it: the bytes it should have made durable are marked lost, and stay lost (as zeros in a
//! power-loss image) even if a later sync of the same file succeeds, so an engine that retries a
//! failed sync and trusts it is caught. [`FaultFs::crash_at`] captures a crash image just before
//! the n-th call and then fails every later call, as if the process had died there.
//!
//! Everything random takes a seed: the same seed and the same calls give the same images.
//!
//! Thread-safety: `FaultFs` is `Send + Sync`; one mutex orders every call, so call numbers are a
//! total order of the calls the engine made (from any thread).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use super::{read_all, FileLock, Fs, MemFs, RandomAccessFile, SequentialFile, WritableFile};
use crate::error::{Error, Result};

/// The kinds of filesystem calls, for counting and for aiming faults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum OpKind {
    /// [`Fs::create`].
    Create,
    /// [`WritableFile::append`].
    Append,
    /// [`WritableFile::flush`].
    Flush,
    /// [`WritableFile::sync`].
    Sync,
    /// [`WritableFile::close`].
    Close,
    /// [`Fs::open_random`] and [`Fs::open_sequential`].
    Open,
    /// Reads through an open file.
    Read,
    /// [`Fs::list`] and [`Fs::file_size`].
    List,
    /// [`Fs::rename`].
    Rename,
    /// [`Fs::remove`].
    Remove,
    /// [`Fs::link`].
    Link,
    /// [`Fs::sync_dir`].
    SyncDir,
    /// [`Fs::create_dir_all`] and [`Fs::remove_dir`].
    Dir,
    /// [`Fs::lock`].
    Lock,
}

impl OpKind {
    /// Every kind, in a fixed order.
    pub const ALL: [OpKind; 14] = [
        OpKind::Create,
        OpKind::Append,
        OpKind::Flush,
        OpKind::Sync,
        OpKind::Close,
        OpKind::Open,
        OpKind::Read,
        OpKind::List,
        OpKind::Rename,
        OpKind::Remove,
        OpKind::Link,
        OpKind::SyncDir,
        OpKind::Dir,
        OpKind::Lock,
    ];

    /// A short lowercase name, for reports.
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Create => "create",
            OpKind::Append => "append",
            OpKind::Flush => "flush",
            OpKind::Sync => "sync",
            OpKind::Close => "close",
            OpKind::Open => "open",
            OpKind::Read => "read",
            OpKind::List => "list",
            OpKind::Rename => "rename",
            OpKind::Remove => "remove",
            OpKind::Link => "link",
            OpKind::SyncDir => "sync_dir",
            OpKind::Dir => "dir",
            OpKind::Lock => "lock",
        }
    }

    /// True for calls that change files or directories (as opposed to reading them).
    pub fn is_mutation(self) -> bool {
        !matches!(
            self,
            OpKind::Open | OpKind::Read | OpKind::List | OpKind::Lock
        )
    }
}

/// How an injected fault fails the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultError {
    /// `EIO`, with no effect.
    Io,
    /// `ENOSPC`, with no effect.
    NoSpace,
    /// For appends: the first half of the bytes is written, then `EIO`. Other calls: as `Io`.
    ShortWrite,
}

/// A fault to inject: fail the `nth` (1-based) call matching `kind` counted from the moment it is
/// armed; `None` matches every kind. A `persistent` fault also fails every later matching call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultSpec {
    /// Which calls count; `None` for all.
    pub kind: Option<OpKind>,
    /// Which matching call fails first (1 = the next one).
    pub nth: u64,
    /// Keep failing after the first failure.
    pub persistent: bool,
    /// How the call fails.
    pub error: FaultError,
}

/// A fault that fired: the call it failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FiredFault {
    /// Global number of the call (1-based, all kinds).
    pub call: u64,
    /// Its kind.
    pub kind: OpKind,
    /// The file or directory it was applied to.
    pub path: PathBuf,
    /// How it failed.
    pub error: FaultError,
}

/// What survives a simulated crash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CrashMode {
    /// The process died: every flushed byte and every directory change survives; bytes still in
    /// the process's buffers are lost.
    ProcessCrash,
    /// The machine lost power: only synced bytes and synced directory entries survive.
    PowerLoss,
    /// Power loss on a disk that had written back some of its cache: each file keeps its synced
    /// bytes plus a random part of its flushed tail; each directory keeps its synced entries plus
    /// a random prefix of its later changes.
    RandomUnsynced,
    /// As a process crash, but the last append (if it was not synced) is torn: only a random
    /// prefix of it is kept, and the rest of its length holds zeros, garbage, or nothing.
    TornLastWrite,
}

impl CrashMode {
    /// Every mode.
    pub const ALL: [CrashMode; 4] = [
        CrashMode::ProcessCrash,
        CrashMode::PowerLoss,
        CrashMode::RandomUnsynced,
        CrashMode::TornLastWrite,
    ];

    /// A short lowercase name, for reports.
    pub fn name(self) -> &'static str {
        match self {
            CrashMode::ProcessCrash => "process_crash",
            CrashMode::PowerLoss => "power_loss",
            CrashMode::RandomUnsynced => "random_unsynced",
            CrashMode::TornLastWrite => "torn_last_write",
        }
    }

    /// True if the mode keeps every flushed byte (so every acknowledged write must survive);
    /// false if only synced data is promised.
    pub fn keeps_flushed(self) -> bool {
        matches!(self, CrashMode::ProcessCrash)
    }
}

/// A small deterministic generator (SplitMix64), so the engine crate needs no `rand`.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..=max`.
    pub fn up_to(&mut self, max: u64) -> u64 {
        if max == u64::MAX {
            self.next_u64()
        } else {
            self.next_u64() % (max + 1)
        }
    }
}

/// One file's contents and how much of them would survive each kind of crash.
#[derive(Debug, Clone, Default)]
struct Node {
    data: Vec<u8>,
    /// Bytes handed to the OS.
    flushed: usize,
    /// Bytes made durable.
    synced: usize,
    /// Byte ranges a failed sync should have made durable: never durable afterwards.
    lost: Vec<(usize, usize)>,
}

/// A directory change not yet made durable by a directory sync: bindings of names to files
/// (`None` removes the name), applied together.
type DirOp = Vec<(PathBuf, Option<usize>)>;

#[derive(Debug, Clone)]
struct LastAppend {
    node: usize,
    start: usize,
    len: usize,
}

#[derive(Debug, Clone, Default)]
struct Shadow {
    nodes: Vec<Node>,
    live: BTreeMap<PathBuf, usize>,
    durable: BTreeMap<PathBuf, usize>,
    /// Per directory, its changes since its last sync, oldest first.
    pending: BTreeMap<PathBuf, Vec<DirOp>>,
    dirs: BTreeSet<PathBuf>,
    last_append: Option<LastAppend>,
}

impl Shadow {
    fn bind(&mut self, path: &Path, node: Option<usize>) {
        self.bind_many(vec![(path.to_path_buf(), node)]);
    }

    fn bind_many(&mut self, op: DirOp) {
        for (path, node) in &op {
            match node {
                Some(n) => self.live.insert(path.clone(), *n),
                None => self.live.remove(path),
            };
        }
        let dir = op
            .first()
            .and_then(|(p, _)| p.parent())
            .map(Path::to_path_buf)
            .unwrap_or_default();
        self.pending.entry(dir).or_default().push(op);
    }

    fn sync_dir(&mut self, dir: &Path) {
        if let Some(ops) = self.pending.remove(dir) {
            for op in ops {
                apply(&mut self.durable, &op);
            }
        }
    }

    fn live_bytes(&self) -> u64 {
        self.live
            .values()
            .map(|&n| self.nodes.get(n).map_or(0, |node| node.data.len() as u64))
            .sum()
    }
}

fn apply(map: &mut BTreeMap<PathBuf, usize>, op: &DirOp) {
    for (path, node) in op {
        match node {
            Some(n) => map.insert(path.clone(), *n),
            None => map.remove(path),
        };
    }
}

#[derive(Debug, Clone)]
struct Armed {
    spec: FaultSpec,
    /// Matching calls seen since the fault was armed.
    seen: u64,
    fired: bool,
}

#[derive(Default)]
struct State {
    shadow: Shadow,
    /// Directories whose pre-existing files were adopted from the inner filesystem.
    scanned: BTreeSet<PathBuf>,
    calls: u64,
    calls_by_kind: BTreeMap<OpKind, u64>,
    armed: Vec<Armed>,
    fired: Vec<FiredFault>,
    quota: Option<u64>,
    crash_at: Option<u64>,
    crashed: Option<CrashSnapshot>,
    /// Calls before which a snapshot is captured without stopping anything.
    capture_at: BTreeSet<u64>,
    captures: Vec<CrashSnapshot>,
    /// Files open right now (created, or opened for reading), and the most open at once.
    open_handles: usize,
    peak_open_handles: usize,
    /// Opens past this many open files fail with `EMFILE`, as a process's descriptor limit
    /// makes them.
    handle_limit: Option<usize>,
    /// How long each file sync takes, as a disk's flush would: lets tests make writers queue
    /// behind a sync (group commit).
    sync_latency: Option<std::time::Duration>,
}

/// A filesystem wrapper that tracks durability and injects faults. See the module docs.
#[derive(Clone)]
pub struct FaultFs {
    inner: Arc<dyn Fs>,
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for FaultFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.state.lock();
        f.debug_struct("FaultFs")
            .field("calls", &state.calls)
            .field("files", &state.shadow.live.len())
            .finish_non_exhaustive()
    }
}

/// The state of a [`FaultFs`] at one moment, from which crash images are made.
#[derive(Debug, Clone)]
pub struct CrashSnapshot {
    shadow: Shadow,
    /// Global number of the last call made before the snapshot.
    pub calls: u64,
}

fn io_error(kind: FaultError, op: &'static str, path: &Path) -> Error {
    let source = match kind {
        FaultError::NoSpace => std::io::Error::from_raw_os_error(libc::ENOSPC),
        FaultError::Io | FaultError::ShortWrite => std::io::Error::from_raw_os_error(libc::EIO),
    };
    Error::io(op, path, source)
}

fn crashed_error(op: &'static str, path: &Path) -> Error {
    Error::io(
        op,
        path,
        std::io::Error::other("simulated crash: the process is dead"),
    )
}

/// What the fault check decided for one call.
enum Verdict {
    Proceed,
    Fail(FaultError),
    Dead,
}

impl FaultFs {
    /// Wraps `inner`. Files already in `inner` are adopted as durable the first time their
    /// directory is touched.
    pub fn new(inner: Arc<dyn Fs>) -> Self {
        FaultFs {
            inner,
            state: Arc::new(Mutex::new(State::default())),
        }
    }

    /// Wraps a fresh, empty [`MemFs`].
    pub fn in_memory() -> Self {
        FaultFs::new(Arc::new(MemFs::new()))
    }

    /// Arms `spec`. Faults are independent: each counts its own matching calls.
    pub fn inject(&self, spec: FaultSpec) {
        self.state.lock().armed.push(Armed {
            spec,
            seen: 0,
            fired: false,
        });
    }

    /// Disarms every fault and the space quota (already-lost sync data stays lost).
    pub fn clear_faults(&self) {
        let mut state = self.state.lock();
        state.armed.clear();
        state.quota = None;
    }

    /// Makes every file sync take `latency` (slept without holding any lock), as a disk's
    /// cache flush does; `None` makes syncs instant again.
    pub fn set_sync_latency(&self, latency: Option<std::time::Duration>) {
        self.state.lock().sync_latency = latency;
    }

    /// Fails appends with `ENOSPC` (after writing what fits) once the live files would hold more
    /// than `bytes`; `None` removes the limit.
    pub fn set_space_quota(&self, bytes: Option<u64>) {
        self.state.lock().quota = bytes;
    }

    /// Fails creates and opens with `EMFILE` while `limit` files are open, as a process's
    /// descriptor limit does; `None` removes the limit. Counted are the files `create`,
    /// `open_random` and `open_sequential` hand out, while they live; not the lock, nor the
    /// brief opens inside `sync_dir` and `sync_file`.
    pub fn set_open_file_limit(&self, limit: Option<usize>) {
        self.state.lock().handle_limit = limit;
    }

    /// The most files open at once (created or opened through this filesystem, not yet
    /// dropped) since the last [`FaultFs::reset_peak_open_files`].
    pub fn peak_open_files(&self) -> usize {
        self.state.lock().peak_open_handles
    }

    /// Starts the count of [`FaultFs::peak_open_files`] afresh from the files open now.
    pub fn reset_peak_open_files(&self) {
        let mut state = self.state.lock();
        state.peak_open_handles = state.open_handles;
    }

    /// Counts one more open file, or fails with `EMFILE` at the limit.
    fn open_handle(&self, op: &'static str, path: &Path) -> Result<OpenHandle> {
        let mut state = self.state.lock();
        if state
            .handle_limit
            .is_some_and(|limit| state.open_handles >= limit)
        {
            return Err(Error::io(
                op,
                path,
                std::io::Error::from_raw_os_error(libc::EMFILE),
            ));
        }
        state.open_handles += 1;
        state.peak_open_handles = state.peak_open_handles.max(state.open_handles);
        Ok(OpenHandle {
            state: self.state.clone(),
        })
    }

    /// Captures a crash snapshot just before global call number `call` (1-based) runs, then fails
    /// that call and every later one, as a dead process would make none.
    pub fn crash_at(&self, call: u64) {
        self.state.lock().crash_at = Some(call);
    }

    /// Captures a snapshot just before each of the global call numbers in `calls` runs, without
    /// failing anything; [`FaultFs::take_captures`] hands them over. Many crash points of one run
    /// cost one run.
    pub fn capture_at(&self, calls: impl IntoIterator<Item = u64>) {
        self.state.lock().capture_at.extend(calls);
    }

    /// The snapshots captured so far by [`FaultFs::capture_at`], oldest first.
    pub fn take_captures(&self) -> Vec<CrashSnapshot> {
        std::mem::take(&mut self.state.lock().captures)
    }

    /// The snapshot captured by [`FaultFs::crash_at`], once the crash point was reached.
    pub fn crashed(&self) -> Option<CrashSnapshot> {
        self.state.lock().crashed.clone()
    }

    /// True once the crash point of [`FaultFs::crash_at`] was reached.
    pub fn is_crashed(&self) -> bool {
        self.state.lock().crashed.is_some()
    }

    /// Every fault that fired, in order.
    pub fn fired(&self) -> Vec<FiredFault> {
        self.state.lock().fired.clone()
    }

    /// Calls made so far (all kinds).
    pub fn calls(&self) -> u64 {
        self.state.lock().calls
    }

    /// Calls made so far of `kind`.
    pub fn calls_of(&self, kind: OpKind) -> u64 {
        self.state
            .lock()
            .calls_by_kind
            .get(&kind)
            .copied()
            .unwrap_or(0)
    }

    /// The current state, for crash images.
    pub fn snapshot(&self) -> CrashSnapshot {
        let state = self.state.lock();
        CrashSnapshot {
            shadow: state.shadow.clone(),
            calls: state.calls,
        }
    }

    /// Shorthand for `self.snapshot().image(mode, seed)`.
    pub fn crash_image(&self, mode: CrashMode, seed: u64) -> MemFs {
        self.snapshot().image(mode, seed)
    }

    /// Counts a call and decides whether it runs. `path` names what it touches.
    fn check(&self, kind: OpKind, path: &Path) -> Verdict {
        let mut state = self.state.lock();
        self.scan_locked(&mut state, path);
        if state.crashed.is_some() {
            return Verdict::Dead;
        }
        state.calls += 1;
        *state.calls_by_kind.entry(kind).or_default() += 1;
        let call = state.calls;
        if state.capture_at.remove(&call) {
            let snapshot = CrashSnapshot {
                shadow: state.shadow.clone(),
                calls: state.calls - 1,
            };
            state.captures.push(snapshot);
        }
        if state.crash_at == Some(state.calls) {
            let snapshot = CrashSnapshot {
                shadow: state.shadow.clone(),
                calls: state.calls - 1,
            };
            state.crashed = Some(snapshot);
            return Verdict::Dead;
        }
        let mut verdict = Verdict::Proceed;
        for armed in state.armed.iter_mut() {
            if armed.spec.kind.is_some_and(|k| k != kind) {
                continue;
            }
            armed.seen += 1;
            let hit = if armed.spec.persistent {
                armed.seen >= armed.spec.nth
            } else {
                armed.seen == armed.spec.nth
            };
            if hit && matches!(verdict, Verdict::Proceed) {
                armed.fired = true;
                verdict = Verdict::Fail(armed.spec.error);
            }
        }
        if let Verdict::Fail(error) = verdict {
            state.fired.push(FiredFault {
                call,
                kind,
                path: path.to_path_buf(),
                error,
            });
        }
        verdict
    }

    /// Adopts the files of `path`'s directory (and of `path` itself, if it is a directory) that
    /// exist in the inner filesystem but were never seen here, as durable.
    fn scan_locked(&self, state: &mut State, path: &Path) {
        let candidates = [Some(path), path.parent()];
        for dir in candidates.into_iter().flatten() {
            if dir.as_os_str().is_empty() || state.scanned.contains(dir) {
                continue;
            }
            // Every path is tried once: files fail to list, and a directory that does not exist
            // yet can only gain files through this wrapper.
            state.scanned.insert(dir.to_path_buf());
            let Ok(names) = self.inner.list(dir) else {
                continue;
            };
            state.shadow.dirs.insert(dir.to_path_buf());
            for name in names {
                let file = dir.join(&name);
                if state.shadow.live.contains_key(&file) {
                    continue;
                }
                // Directories fail to read and are skipped; only files are adopted.
                let Ok(data) = read_all(self.inner.as_ref(), &file) else {
                    continue;
                };
                let len = data.len();
                let id = state.shadow.nodes.len();
                state.shadow.nodes.push(Node {
                    data,
                    flushed: len,
                    synced: len,
                    lost: Vec::new(),
                });
                state.shadow.live.insert(file.clone(), id);
                state.shadow.durable.insert(file, id);
            }
        }
    }

    fn gate(&self, kind: OpKind, op: &'static str, path: &Path) -> Result<()> {
        match self.check(kind, path) {
            Verdict::Proceed => Ok(()),
            Verdict::Fail(e) => Err(io_error(e, op, path)),
            Verdict::Dead => Err(crashed_error(op, path)),
        }
    }
}

impl CrashSnapshot {
    /// The filesystem a restarted process finds after a crash of `mode` at this moment;
    /// `seed` drives the random choices of [`CrashMode::RandomUnsynced`] and
    /// [`CrashMode::TornLastWrite`].
    pub fn image(&self, mode: CrashMode, seed: u64) -> MemFs {
        let mut rng = SplitMix64::new(seed);
        let s = &self.shadow;
        let bindings: BTreeMap<PathBuf, usize> = match mode {
            CrashMode::ProcessCrash | CrashMode::TornLastWrite => s.live.clone(),
            CrashMode::PowerLoss => s.durable.clone(),
            CrashMode::RandomUnsynced => {
                let mut map = s.durable.clone();
                for ops in s.pending.values() {
                    let keep = rng.up_to(ops.len() as u64) as usize;
                    for op in ops.iter().take(keep) {
                        apply(&mut map, op);
                    }
                }
                map
            }
        };
        let fs = MemFs::new();
        for dir in &s.dirs {
            let _ = fs.create_dir_all(dir);
        }
        for (path, &id) in &bindings {
            let Some(node) = s.nodes.get(id) else {
                continue;
            };
            let data = match mode {
                CrashMode::ProcessCrash => node.data[..node.flushed].to_vec(),
                CrashMode::PowerLoss => durable_bytes(node, node.synced),
                CrashMode::RandomUnsynced => {
                    let extra = rng.up_to(node.flushed.saturating_sub(node.synced) as u64);
                    durable_bytes(
                        node,
                        node.synced
                            .max(node.flushed.min(node.synced + extra as usize)),
                    )
                }
                CrashMode::TornLastWrite => torn(node, id, s.last_append.as_ref(), &mut rng),
            };
            if let Some(parent) = path.parent() {
                let _ = fs.create_dir_all(parent);
            }
            fs.set_contents(path, data);
        }
        fs
    }

    /// Global number of the last call made before this snapshot was taken.
    pub fn call_count(&self) -> u64 {
        self.calls
    }
}

/// The first `len` bytes of `node`, with ranges a failed sync lost replaced by zeros.
fn durable_bytes(node: &Node, len: usize) -> Vec<u8> {
    let mut out = node.data[..len.min(node.data.len())].to_vec();
    for &(start, end) in &node.lost {
        for b in out.iter_mut().take(end).skip(start) {
            *b = 0;
        }
    }
    out
}

fn torn(node: &Node, id: usize, last: Option<&LastAppend>, rng: &mut SplitMix64) -> Vec<u8> {
    let mut out = node.data[..node.flushed].to_vec();
    let Some(last) = last.filter(|l| l.node == id && l.start >= node.synced) else {
        return out;
    };
    // The torn write reached the OS as far as the process got: take it whole from the data.
    let end = (last.start + last.len).min(node.data.len());
    out = node.data[..end].to_vec();
    let keep = last.start + rng.up_to(last.len as u64) as usize;
    match rng.up_to(2) {
        0 => out.truncate(keep.min(out.len())),
        1 => out.iter_mut().skip(keep).for_each(|b| *b = 0),
        _ => out
            .iter_mut()
            .skip(keep)
            .for_each(|b| *b = rng.next_u64() as u8),
    }
    out
}

/// One open file counted by its [`FaultFs`]; dropping it closes the file.
struct OpenHandle {
    state: Arc<Mutex<State>>,
}

impl Drop for OpenHandle {
    fn drop(&mut self) {
        let mut state = self.state.lock();
        state.open_handles = state.open_handles.saturating_sub(1);
    }
}

struct FaultWritable {
    fs: FaultFs,
    inner: Box<dyn WritableFile>,
    node: usize,
    path: PathBuf,
    _handle: OpenHandle,
}

impl FaultWritable {
    fn update(&self, f: impl FnOnce(&mut Node)) {
        let mut state = self.fs.state.lock();
        if let Some(node) = state.shadow.nodes.get_mut(self.node) {
            f(node);
        }
    }
}

impl WritableFile for FaultWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        let verdict = self.fs.check(OpKind::Append, &self.path);
        let (write, error) = {
            let mut state = self.fs.state.lock();
            let over_quota = state.quota.and_then(|quota| {
                let used = state.shadow.live_bytes();
                (used + data.len() as u64 > quota).then(|| quota.saturating_sub(used) as usize)
            });
            match (verdict, over_quota) {
                (Verdict::Dead, _) => return Err(crashed_error("write", &self.path)),
                (Verdict::Fail(FaultError::ShortWrite), _) => {
                    (data.len() / 2, Some(FaultError::ShortWrite))
                }
                (Verdict::Fail(e), _) => (0, Some(e)),
                (Verdict::Proceed, Some(fits)) => {
                    let call = state.calls;
                    state.fired.push(FiredFault {
                        call,
                        kind: OpKind::Append,
                        path: self.path.clone(),
                        error: FaultError::NoSpace,
                    });
                    (fits.min(data.len()), Some(FaultError::NoSpace))
                }
                (Verdict::Proceed, None) => (data.len(), None),
            }
        };
        let part = &data[..write];
        if !part.is_empty() {
            self.inner.append(part)?;
            let node_id = self.node;
            let mut state = self.fs.state.lock();
            if let Some(node) = state.shadow.nodes.get_mut(node_id) {
                let start = node.data.len();
                node.data.extend_from_slice(part);
                state.shadow.last_append = Some(LastAppend {
                    node: node_id,
                    start,
                    len: part.len(),
                });
            }
        }
        match error {
            Some(e) => {
                if write > 0 {
                    // A short write reached the OS before failing.
                    self.update(|n| n.flushed = n.data.len());
                }
                Err(io_error(e, "write", &self.path))
            }
            None => Ok(()),
        }
    }

    fn flush(&mut self) -> Result<()> {
        self.fs.gate(OpKind::Flush, "flush", &self.path)?;
        self.inner.flush()?;
        self.update(|n| n.flushed = n.data.len());
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        let latency = self.fs.state.lock().sync_latency;
        if let Some(latency) = latency {
            std::thread::sleep(latency);
        }
        match self.fs.check(OpKind::Sync, &self.path) {
            Verdict::Proceed => {}
            Verdict::Dead => return Err(crashed_error("sync", &self.path)),
            Verdict::Fail(e) => {
                // As on Linux: the data reached the OS, the write-back failed, and the pages are
                // marked clean, so those bytes never become durable through this file.
                self.update(|n| {
                    n.flushed = n.data.len();
                    if n.synced < n.data.len() {
                        n.lost.push((n.synced, n.data.len()));
                    }
                });
                return Err(io_error(e, "sync", &self.path));
            }
        }
        self.inner.sync()?;
        self.update(|n| {
            n.flushed = n.data.len();
            n.synced = n.data.len();
        });
        Ok(())
    }

    fn close(&mut self) -> Result<()> {
        self.fs.gate(OpKind::Close, "close", &self.path)?;
        self.inner.close()?;
        self.update(|n| n.flushed = n.data.len());
        Ok(())
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }
}

struct FaultRandom {
    fs: FaultFs,
    inner: Arc<dyn RandomAccessFile>,
    path: PathBuf,
    _handle: OpenHandle,
}

impl RandomAccessFile for FaultRandom {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.fs.gate(OpKind::Read, "read", &self.path)?;
        self.inner.read_exact_at(offset, buf)
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn release(&self, offset: u64, len: u64) {
        self.inner.release(offset, len);
    }
}

struct FaultSequential {
    fs: FaultFs,
    inner: Box<dyn SequentialFile>,
    path: PathBuf,
    _handle: OpenHandle,
}

impl SequentialFile for FaultSequential {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize> {
        self.fs.gate(OpKind::Read, "read", &self.path)?;
        self.inner.read(buf)
    }
}

impl Fs for FaultFs {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.gate(OpKind::Create, "create", path)?;
        let handle = self.open_handle("create", path)?;
        let inner = self.inner.create(path)?;
        let mut state = self.state.lock();
        // Creating over an existing name truncates that file in place, as open(O_TRUNC) does.
        let node = match state.shadow.live.get(path).copied() {
            Some(existing) => {
                if let Some(n) = state.shadow.nodes.get_mut(existing) {
                    *n = Node::default();
                }
                existing
            }
            None => {
                let id = state.shadow.nodes.len();
                state.shadow.nodes.push(Node::default());
                state.shadow.bind(path, Some(id));
                id
            }
        };
        Ok(Box::new(FaultWritable {
            fs: self.clone(),
            inner,
            node,
            path: path.to_path_buf(),
            _handle: handle,
        }))
    }

    fn open_random(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        self.gate(OpKind::Open, "open", path)?;
        let handle = self.open_handle("open", path)?;
        let inner = self.inner.open_random(path)?;
        Ok(Arc::new(FaultRandom {
            fs: self.clone(),
            inner,
            path: path.to_path_buf(),
            _handle: handle,
        }))
    }

    fn open_sequential(&self, path: &Path) -> Result<Box<dyn SequentialFile>> {
        self.gate(OpKind::Open, "open", path)?;
        let handle = self.open_handle("open", path)?;
        let inner = self.inner.open_sequential(path)?;
        Ok(Box::new(FaultSequential {
            fs: self.clone(),
            inner,
            path: path.to_path_buf(),
            _handle: handle,
        }))
    }

    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        self.gate(OpKind::List, "list", dir)?;
        self.inner.list(dir)
    }

    fn file_size(&self, path: &Path) -> Result<u64> {
        self.gate(OpKind::List, "stat", path)?;
        self.inner.file_size(path)
    }

    fn remove(&self, path: &Path) -> Result<()> {
        self.gate(OpKind::Remove, "remove", path)?;
        self.inner.remove(path)?;
        self.state.lock().shadow.bind(path, None);
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.gate(OpKind::Rename, "rename", to)?;
        self.inner.rename(from, to)?;
        let mut state = self.state.lock();
        if let Some(node) = state.shadow.live.get(from).copied() {
            if from.parent() == to.parent() {
                // Within a directory a rename is atomic: both names change at its sync.
                state.shadow.bind_many(vec![
                    (from.to_path_buf(), None),
                    (to.to_path_buf(), Some(node)),
                ]);
            } else {
                // Between directories each side is durable only once its own directory is
                // synced (the weakest ordering a filesystem may give): until both are, a crash
                // may leave the file under both names or under neither.
                state.shadow.bind(from, None);
                state.shadow.bind(to, Some(node));
            }
        }
        Ok(())
    }

    fn link(&self, from: &Path, to: &Path) -> Result<()> {
        self.gate(OpKind::Link, "link", to)?;
        self.inner.link(from, to)?;
        let mut state = self.state.lock();
        if let Some(node) = state.shadow.live.get(from).copied() {
            state.shadow.bind(to, Some(node));
        }
        Ok(())
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        self.gate(OpKind::Dir, "mkdir", dir)?;
        self.inner.create_dir_all(dir)?;
        let mut state = self.state.lock();
        for ancestor in dir.ancestors() {
            if ancestor.as_os_str().is_empty() {
                break;
            }
            state.shadow.dirs.insert(ancestor.to_path_buf());
        }
        Ok(())
    }

    fn remove_dir(&self, dir: &Path) -> Result<()> {
        self.gate(OpKind::Dir, "rmdir", dir)?;
        self.inner.remove_dir(dir)?;
        self.state.lock().shadow.dirs.remove(dir);
        Ok(())
    }

    fn sync_file(&self, path: &Path) -> Result<()> {
        let node = self.state.lock().shadow.live.get(path).copied();
        let update = |fs: &FaultFs, f: &dyn Fn(&mut Node)| {
            let mut state = fs.state.lock();
            if let Some(n) = node.and_then(|id| state.shadow.nodes.get_mut(id)) {
                f(n);
            }
        };
        match self.check(OpKind::Sync, path) {
            Verdict::Proceed => {}
            Verdict::Dead => return Err(crashed_error("sync", path)),
            Verdict::Fail(e) => {
                // As for a handle's sync: what reached the OS never becomes durable.
                update(self, &|n: &mut Node| {
                    if n.synced < n.flushed {
                        n.lost.push((n.synced, n.flushed));
                    }
                });
                return Err(io_error(e, "sync", path));
            }
        }
        self.inner.sync_file(path)?;
        // Only what reached the OS can be made durable through another descriptor.
        update(self, &|n: &mut Node| n.synced = n.synced.max(n.flushed));
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.gate(OpKind::SyncDir, "sync dir", dir)?;
        self.inner.sync_dir(dir)?;
        self.state.lock().shadow.sync_dir(dir);
        Ok(())
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        self.gate(OpKind::Lock, "lock", path)?;
        self.inner.lock(path)
    }
}

/// Flips bit `bit` (0 = least significant) of byte `offset` of `path` in `fs`. False if the file
/// or the offset does not exist.
pub fn flip_bit(fs: &MemFs, path: &Path, offset: usize, bit: u8) -> bool {
    let Some(mut data) = fs.contents(path) else {
        return false;
    };
    let Some(byte) = data.get_mut(offset) else {
        return false;
    };
    *byte ^= 1 << (bit % 8);
    fs.set_contents(path, data);
    true
}

/// Cuts `path` in `fs` down to `len` bytes. False if the file does not exist.
pub fn truncate(fs: &MemFs, path: &Path, len: usize) -> bool {
    let Some(mut data) = fs.contents(path) else {
        return false;
    };
    data.truncate(len);
    fs.set_contents(path, data);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> PathBuf {
        PathBuf::from("/d")
    }

    fn write(fs: &FaultFs, name: &str, data: &[u8], flush: bool, sync: bool) {
        let mut f = fs.create(&dir().join(name)).expect("create");
        f.append(data).expect("append");
        if flush {
            f.flush().expect("flush");
        }
        if sync {
            f.sync().expect("sync");
        }
    }

    fn contents(fs: &MemFs, name: &str) -> Option<Vec<u8>> {
        fs.contents(&dir().join(name))
    }

    #[test]
    fn each_mode_keeps_what_it_promises() {
        let fs = FaultFs::in_memory();
        fs.create_dir_all(&dir()).expect("mkdir");
        write(&fs, "synced", b"durable", true, true);
        fs.sync_dir(&dir()).expect("sync dir");
        write(&fs, "flushed", b"in the os", true, false);
        write(&fs, "buffered", b"in the process", false, false);
        let mut f = fs.create(&dir().join("mixed")).expect("create");
        f.append(b"aaaa").expect("append");
        f.sync().expect("sync");
        f.append(b"bbbb").expect("append");
        f.flush().expect("flush");
        f.append(b"cccc").expect("append");

        let crash = fs.crash_image(CrashMode::ProcessCrash, 1);
        assert_eq!(contents(&crash, "synced").as_deref(), Some(&b"durable"[..]));
        assert_eq!(
            contents(&crash, "flushed").as_deref(),
            Some(&b"in the os"[..])
        );
        assert_eq!(contents(&crash, "buffered").as_deref(), Some(&b""[..]));
        assert_eq!(contents(&crash, "mixed").as_deref(), Some(&b"aaaabbbb"[..]));

        let power = fs.crash_image(CrashMode::PowerLoss, 1);
        assert_eq!(contents(&power, "synced").as_deref(), Some(&b"durable"[..]));
        assert_eq!(contents(&power, "flushed"), None, "entry never synced");
        assert_eq!(contents(&power, "mixed"), None, "entry never synced");
        fs.sync_dir(&dir()).expect("sync dir");
        let power = fs.crash_image(CrashMode::PowerLoss, 1);
        assert_eq!(contents(&power, "flushed").as_deref(), Some(&b""[..]));
        assert_eq!(contents(&power, "mixed").as_deref(), Some(&b"aaaa"[..]));
    }

    #[test]
    fn random_unsynced_keeps_between_synced_and_flushed() {
        let fs = FaultFs::in_memory();
        fs.create_dir_all(&dir()).expect("mkdir");
        let mut f = fs.create(&dir().join("f")).expect("create");
        fs.sync_dir(&dir()).expect("sync dir");
        f.append(b"0123").expect("append");
        f.sync().expect("sync");
        f.append(b"456789").expect("append");
        f.flush().expect("flush");
        let mut lens = BTreeSet::new();
        for seed in 0..200 {
            let img = fs.crash_image(CrashMode::RandomUnsynced, seed);
            let data = contents(&img, "f").expect("file");
            assert!(b"0123456789".starts_with(&data));
            assert!(data.len() >= 4);
            lens.insert(data.len());
        }
        assert_eq!(lens.len(), 7, "every length from 4 to 10 appears: {lens:?}");
    }

    #[test]
    fn renames_and_removes_need_a_directory_sync() {
        let fs = FaultFs::in_memory();
        fs.create_dir_all(&dir()).expect("mkdir");
        write(&fs, "old", b"x", true, true);
        write(&fs, "gone", b"y", true, true);
        fs.sync_dir(&dir()).expect("sync dir");
        fs.rename(&dir().join("old"), &dir().join("new"))
            .expect("rename");
        fs.remove(&dir().join("gone")).expect("remove");
        let power = fs.crash_image(CrashMode::PowerLoss, 0);
        assert!(contents(&power, "old").is_some());
        assert!(contents(&power, "new").is_none());
        assert!(contents(&power, "gone").is_some());
        let crash = fs.crash_image(CrashMode::ProcessCrash, 0);
        assert!(contents(&crash, "old").is_none());
        assert_eq!(contents(&crash, "new").as_deref(), Some(&b"x"[..]));
        assert!(contents(&crash, "gone").is_none());
        // A rename is atomic in every random image: exactly one of the names exists.
        for seed in 0..50 {
            let img = fs.crash_image(CrashMode::RandomUnsynced, seed);
            assert!(contents(&img, "old").is_some() != contents(&img, "new").is_some());
        }
        fs.sync_dir(&dir()).expect("sync dir");
        let power = fs.crash_image(CrashMode::PowerLoss, 0);
        assert_eq!(contents(&power, "new").as_deref(), Some(&b"x"[..]));
        assert!(contents(&power, "old").is_none() && contents(&power, "gone").is_none());
    }

    #[test]
    fn a_rename_between_directories_needs_both_synced() {
        let fs = FaultFs::in_memory();
        let sub = dir().join("sub");
        fs.create_dir_all(&sub).expect("mkdir");
        write(&fs, "sub/t", b"x", true, true);
        fs.sync_dir(&sub).expect("sync sub");
        fs.rename(&sub.join("t"), &dir().join("t")).expect("rename");
        // Only the destination synced: the new name is durable, the old one not yet gone.
        fs.sync_dir(&dir()).expect("sync dir");
        let power = fs.crash_image(CrashMode::PowerLoss, 0);
        assert_eq!(contents(&power, "t").as_deref(), Some(&b"x"[..]));
        assert_eq!(contents(&power, "sub/t").as_deref(), Some(&b"x"[..]));
        fs.sync_dir(&sub).expect("sync sub");
        let power = fs.crash_image(CrashMode::PowerLoss, 0);
        assert_eq!(contents(&power, "t").as_deref(), Some(&b"x"[..]));
        assert!(contents(&power, "sub/t").is_none());

        // Only the source synced: the file may be under neither name.
        write(&fs, "sub/u", b"y", true, true);
        fs.sync_dir(&sub).expect("sync sub");
        fs.rename(&sub.join("u"), &dir().join("u")).expect("rename");
        fs.sync_dir(&sub).expect("sync sub");
        let power = fs.crash_image(CrashMode::PowerLoss, 0);
        assert!(contents(&power, "u").is_none() && contents(&power, "sub/u").is_none());
    }

    #[test]
    fn open_files_are_counted_and_limited() {
        let fs = FaultFs::in_memory();
        fs.create_dir_all(&dir()).expect("mkdir");
        write(&fs, "a", b"x", true, true);
        fs.set_open_file_limit(Some(2));
        let first = fs.open_random(&dir().join("a")).expect("open");
        let second = fs.open_sequential(&dir().join("a")).expect("open");
        let third = fs.open_random(&dir().join("a"));
        assert!(third.is_err_and(|e| e.is_out_of_handles()));
        assert!(fs
            .create(&dir().join("b"))
            .is_err_and(|e| e.is_out_of_handles()));
        drop(first);
        let again = fs
            .open_random(&dir().join("a"))
            .expect("a slot is free again");
        assert_eq!(fs.peak_open_files(), 2);
        drop((second, again));
        fs.reset_peak_open_files();
        assert_eq!(fs.peak_open_files(), 0);
    }

    #[test]
    fn torn_last_write_damages_only_the_last_append() {
        let fs = FaultFs::in_memory();
        fs.create_dir_all(&dir()).expect("mkdir");
        let mut f = fs.create(&dir().join("f")).expect("create");
        f.append(b"head").expect("append");
        f.sync().expect("sync");
        f.append(&[7u8; 64]).expect("append");
        f.flush().expect("flush");
        let mut shapes = BTreeSet::new();
        for seed in 0..100 {
            let img = fs.crash_image(CrashMode::TornLastWrite, seed);
            let data = contents(&img, "f").expect("file");
            assert_eq!(&data[..4], b"head");
            let tail = &data[4..];
            let sevens = tail.iter().take_while(|&&b| b == 7).count();
            let shape = if data.len() < 68 {
                "prefix"
            } else if tail[sevens..].iter().all(|&b| b == 0) {
                "zeros"
            } else {
                "garbage"
            };
            shapes.insert(shape);
        }
        assert_eq!(shapes.len(), 3, "{shapes:?}");
    }

    #[test]
    fn faults_fire_at_the_nth_call_once_or_for_good() {
        let fs = FaultFs::in_memory();
        fs.create_dir_all(&dir()).expect("mkdir");
        fs.inject(FaultSpec {
            kind: Some(OpKind::Sync),
            nth: 2,
            persistent: false,
            error: FaultError::Io,
        });
        let mut f = fs.create(&dir().join("f")).expect("create");
        f.sync().expect("first sync");
        assert!(f.sync().is_err(), "second sync fails");
        f.sync().expect("third sync");
        let fired = fs.fired();
        assert_eq!(fired.len(), 1);
        assert_eq!(fired[0].kind, OpKind::Sync);

        fs.inject(FaultSpec {
            kind: Some(OpKind::Create),
            nth: 1,
            persistent: true,
            error: FaultError::NoSpace,
        });
        for _ in 0..3 {
            let err = fs.create(&dir().join("g")).err().expect("fails");
            assert!(err.is_no_space(), "{err}");
        }
        fs.clear_faults();
        fs.create(&dir().join("g")).expect("create after clear");
    }

    #[test]
    fn a_failed_sync_loses_its_bytes_for_good() {
        let fs = FaultFs::in_memory();
        fs.create_dir_all(&dir()).expect("mkdir");
        let mut f = fs.create(&dir().join("f")).expect("create");
        fs.sync_dir(&dir()).expect("sync dir");
        f.append(b"safe").expect("append");
        f.sync().expect("sync");
        f.append(b"lost").expect("append");
        fs.inject(FaultSpec {
            kind: Some(OpKind::Sync),
            nth: 1,
            persistent: false,
            error: FaultError::Io,
        });
        assert!(f.sync().is_err());
        f.append(b"more").expect("append");
        f.sync().expect("a retried sync reports success");
        let power = fs.crash_image(CrashMode::PowerLoss, 0);
        assert_eq!(
            contents(&power, "f").as_deref(),
            Some(&b"safe\0\0\0\0more"[..]),
            "the bytes of the failed sync never became durable"
        );
    }

    #[test]
    fn short_writes_and_space_quota() {
        let fs = FaultFs::in_memory();
        fs.create_dir_all(&dir()).expect("mkdir");
        fs.inject(FaultSpec {
            kind: Some(OpKind::Append),
            nth: 1,
            persistent: false,
            error: FaultError::ShortWrite,
        });
        let mut f = fs.create(&dir().join("f")).expect("create");
        assert!(f.append(b"12345678").is_err());
        let crash = fs.crash_image(CrashMode::ProcessCrash, 0);
        assert_eq!(contents(&crash, "f").as_deref(), Some(&b"1234"[..]));

        fs.set_space_quota(Some(10));
        f.append(b"abc").expect("fits");
        let err = f.append(b"defgh").expect_err("over quota");
        assert!(err.is_no_space(), "{err}");
        f.flush().expect("flush");
        let crash = fs.crash_image(CrashMode::ProcessCrash, 0);
        assert_eq!(contents(&crash, "f").as_deref(), Some(&b"1234abcdef"[..]));
    }

    #[test]
    fn crash_at_captures_and_then_fails_everything() {
        let fs = FaultFs::in_memory();
        fs.create_dir_all(&dir()).expect("mkdir"); // call 1
        let mut f = fs.create(&dir().join("f")).expect("create"); // call 2
        f.append(b"one").expect("append"); // call 3
        fs.crash_at(fs.calls() + 2);
        f.flush().expect("flush"); // call 4
        assert!(f.append(b"two").is_err(), "call 5 is the crash point");
        assert!(fs.create(&dir().join("g")).is_err(), "dead afterwards");
        let snapshot = fs.crashed().expect("crashed");
        assert_eq!(snapshot.call_count(), 4);
        let img = snapshot.image(CrashMode::ProcessCrash, 0);
        assert_eq!(contents(&img, "f").as_deref(), Some(&b"one"[..]));
        assert!(contents(&img, "g").is_none());
    }

    #[test]
    fn capture_at_snapshots_without_stopping() {
        let fs = FaultFs::in_memory();
        fs.create_dir_all(&dir()).expect("mkdir"); // call 1
        fs.capture_at([3, 4]);
        let mut f = fs.create(&dir().join("f")).expect("create"); // call 2
        f.append(b"one").expect("append"); // call 3
        f.flush().expect("flush"); // call 4
        f.append(b"two").expect("append"); // call 5
        let captures = fs.take_captures();
        assert_eq!(captures.len(), 2);
        assert_eq!(captures[0].call_count(), 2);
        assert_eq!(captures[1].call_count(), 3);
        let img = captures[1].image(CrashMode::ProcessCrash, 0);
        assert_eq!(
            contents(&img, "f").as_deref(),
            Some(&b""[..]),
            "not flushed yet"
        );
    }

    #[test]
    fn existing_files_are_adopted_as_durable() {
        let mem = MemFs::new();
        mem.create_dir_all(&dir()).expect("mkdir");
        mem.set_contents(&dir().join("old"), b"kept".to_vec());
        let fs = FaultFs::new(Arc::new(mem));
        write(&fs, "new", b"fresh", true, true);
        let power = fs.crash_image(CrashMode::PowerLoss, 0);
        assert_eq!(contents(&power, "old").as_deref(), Some(&b"kept"[..]));
        assert!(contents(&power, "new").is_none());
    }

    #[test]
    fn damage_helpers() {
        let mem = MemFs::new();
        let p = dir().join("f");
        mem.set_contents(&p, vec![0u8; 4]);
        assert!(flip_bit(&mem, &p, 2, 3));
        assert_eq!(mem.contents(&p), Some(vec![0, 0, 8, 0]));
        assert!(!flip_bit(&mem, &p, 9, 0));
        assert!(truncate(&mem, &p, 1));
        assert_eq!(mem.contents(&p), Some(vec![0]));
    }
}
