//! The Python binding of shale: the `shale` module, with `DB`, `WriteBatch`, `Snapshot`,
//! `Iterator`, `Range` and the exception classes. Built by maturin (`pyproject.toml`); the
//! tests are in `tests/test_shale.py` and run by `scripts/test-python.sh`.
//!
//! Keys and values are `bytes` in and out. Every engine error becomes an exception derived from
//! `shale.Error`, chosen by the error's kind (see [`to_py_err`]).
//!
//! Thread-safety: every class may be shared between Python threads. Calls that can wait on
//! disk or on other writers release the GIL; the engine's own locking keeps them safe. A `DB`
//! holds its database behind a lock only long enough to clone an `Arc`, so `close()` while
//! another thread is mid-call lets that call finish first. Cursors (`Iterator`, `Range`) and
//! batches are guarded by a mutex that is never waited on while holding the GIL: a cursor used
//! by two threads at the same instant raises instead of deadlocking.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, RwLock, TryLockError};

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use shale::{
    Compression, Db, DbIterator, MaxOperator, MergeOperator, Options, ReadOptions,
    StringAppendOperator, UInt64AddOperator, WriteBatch, WriteOptions,
};

create_exception!(
    shale,
    Error,
    PyException,
    "Base class of every shale error."
);
create_exception!(
    shale,
    CorruptionError,
    Error,
    "Data on disk does not match its checksum or format; the message names the file and offset."
);
create_exception!(
    shale,
    IoError,
    Error,
    "An operating-system I/O call failed."
);
create_exception!(
    shale,
    InvalidArgumentError,
    Error,
    "A call or an option the engine cannot accept (also: a write to a read-only database)."
);
create_exception!(
    shale,
    LockedError,
    Error,
    "Another process or handle has the database open."
);
create_exception!(
    shale,
    ExistsError,
    Error,
    "The database does not exist (create_if_missing=False) or exists (error_if_exists=True)."
);
create_exception!(
    shale,
    MergeError,
    Error,
    "The merge operator could not combine a key's operands."
);
create_exception!(
    shale,
    PoisonedError,
    Error,
    "An earlier write or background failure made the database refuse writes until reopened."
);
create_exception!(
    shale,
    UnsupportedFormatError,
    Error,
    "A file was written by a format version this build does not understand."
);
create_exception!(
    shale,
    ClosedError,
    Error,
    "The database, snapshot or cursor was closed or released."
);

/// Turns an engine error into the exception of its kind, carrying the engine's message.
fn to_py_err(error: shale::Error) -> PyErr {
    let message = error.to_string();
    match error {
        shale::Error::Corruption { .. } => CorruptionError::new_err(message),
        shale::Error::Io { .. } => IoError::new_err(message),
        shale::Error::InvalidArgument(_) => InvalidArgumentError::new_err(message),
        shale::Error::Locked { .. } => LockedError::new_err(message),
        shale::Error::Exists(_) => ExistsError::new_err(message),
        shale::Error::Merge { .. } => MergeError::new_err(message),
        shale::Error::Poisoned(_) => PoisonedError::new_err(message),
        shale::Error::UnsupportedFormat { .. } => UnsupportedFormatError::new_err(message),
        _ => Error::new_err(message),
    }
}

/// The built-in merge operator called `name`.
fn merge_operator(name: &str) -> PyResult<Arc<dyn MergeOperator>> {
    match name {
        "uint64add" => Ok(Arc::new(UInt64AddOperator)),
        "stringappend" => Ok(Arc::new(StringAppendOperator::new(b","))),
        "max" => Ok(Arc::new(MaxOperator)),
        other => Err(InvalidArgumentError::new_err(format!(
            "unknown merge operator {other:?} (built-in: uint64add, stringappend, max)"
        ))),
    }
}

/// Locks a cursor or batch without ever waiting while the GIL is held (see the module doc).
fn lock_now<'a, T>(mutex: &'a Mutex<T>, what: &str) -> PyResult<MutexGuard<'a, T>> {
    match mutex.try_lock() {
        Ok(guard) => Ok(guard),
        Err(TryLockError::WouldBlock) => Err(InvalidArgumentError::new_err(format!(
            "{what} is in use by another thread"
        ))),
        // A panic while it was held left the value in an unknown state.
        Err(TryLockError::Poisoned(_)) => Err(Error::new_err(format!(
            "{what} is unusable after an internal error"
        ))),
    }
}

fn bytes<'py>(py: Python<'py>, data: &[u8]) -> Bound<'py, PyBytes> {
    PyBytes::new(py, data)
}

/// An open database.
///
/// `DB(path, **options)` opens (by default creates) the database in directory `path`. Use it
/// as a context manager, or call `close()`, to release the directory's lock promptly.
#[pyclass(frozen, module = "shale", name = "DB")]
struct PyDb {
    db: RwLock<Option<Arc<Db>>>,
    path: PathBuf,
    read_only: bool,
}

impl PyDb {
    /// The open database, or `ClosedError`.
    fn db(&self) -> PyResult<Arc<Db>> {
        let guard = self
            .db
            .read()
            .map_err(|_| Error::new_err("database handle is unusable after an internal error"))?;
        guard
            .clone()
            .ok_or_else(|| ClosedError::new_err("database is closed"))
    }

    /// Read options for an optional snapshot and bounds.
    fn read_options(
        snapshot: Option<PyRef<'_, PySnapshot>>,
        lower_bound: Option<&[u8]>,
        upper_bound: Option<&[u8]>,
    ) -> PyResult<ReadOptions> {
        let snapshot = match snapshot {
            Some(s) => Some(s.get()?),
            None => None,
        };
        Ok(ReadOptions {
            snapshot,
            lower_bound: lower_bound.map(<[u8]>::to_vec),
            upper_bound: upper_bound.map(<[u8]>::to_vec),
            ..ReadOptions::default()
        })
    }
}

#[pymethods]
impl PyDb {
    /// Opens the database in `path` (a str or os.PathLike). Options are keywords; those left
    /// out keep shale's defaults. `merge_operator` is "uint64add", "stringappend" or "max";
    /// `compression` is "none", "snappy", "lz4", "zstd" or "zstd:LEVEL". With `read_only`, no
    /// lock is taken, nothing is written and every write raises.
    #[new]
    #[pyo3(signature = (
        path,
        *,
        create_if_missing = true,
        error_if_exists = false,
        paranoid_checks = false,
        read_only = false,
        write_buffer_size = None,
        max_open_files = None,
        block_size = None,
        block_cache_capacity = None,
        bloom_bits_per_key = None,
        compression = None,
        flush_lz4_acceleration = None,
        max_file_size = None,
        merge_operator = None,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        create_if_missing: bool,
        error_if_exists: bool,
        paranoid_checks: bool,
        read_only: bool,
        write_buffer_size: Option<usize>,
        max_open_files: Option<usize>,
        block_size: Option<usize>,
        block_cache_capacity: Option<usize>,
        bloom_bits_per_key: Option<u32>,
        compression: Option<&str>,
        flush_lz4_acceleration: Option<u32>,
        max_file_size: Option<u64>,
        merge_operator: Option<&str>,
    ) -> PyResult<Self> {
        let defaults = Options::default();
        let options = Options {
            create_if_missing,
            error_if_exists,
            paranoid_checks,
            write_buffer_size: write_buffer_size.unwrap_or(defaults.write_buffer_size),
            max_open_files: max_open_files.unwrap_or(defaults.max_open_files),
            block_size: block_size.unwrap_or(defaults.block_size),
            block_cache_capacity: block_cache_capacity.unwrap_or(defaults.block_cache_capacity),
            bloom_bits_per_key: bloom_bits_per_key.unwrap_or(defaults.bloom_bits_per_key),
            compression: match compression {
                None => defaults.compression,
                Some(name) => Compression::parse(name).ok_or_else(|| {
                    InvalidArgumentError::new_err(format!(
                        "unknown compression {name:?} (none, snappy, lz4, zstd, zstd:LEVEL)"
                    ))
                })?,
            },
            flush_lz4_acceleration: flush_lz4_acceleration
                .unwrap_or(defaults.flush_lz4_acceleration),
            max_file_size: max_file_size.unwrap_or(defaults.max_file_size),
            merge_operator: merge_operator.map(self::merge_operator).transpose()?,
            ..defaults
        };
        let db = py
            .detach(|| {
                if read_only {
                    Db::open_read_only(&path, options)
                } else {
                    Db::open(&path, options)
                }
            })
            .map_err(to_py_err)?;
        Ok(PyDb {
            db: RwLock::new(Some(Arc::new(db))),
            path,
            read_only,
        })
    }

    /// Sets `key` to `value`. With `sync=True` the write is on disk (survives power loss) when
    /// the call returns.
    #[pyo3(signature = (key, value, *, sync = false))]
    fn put(&self, py: Python<'_>, key: &[u8], value: &[u8], sync: bool) -> PyResult<()> {
        let db = self.db()?;
        let options = WriteOptions {
            sync,
            ..WriteOptions::default()
        };
        py.detach(|| db.put_opt(key, value, &options))
            .map_err(to_py_err)
    }

    /// The value of `key` as bytes, or None. With `snapshot`, as of that snapshot.
    #[pyo3(signature = (key, *, snapshot = None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &[u8],
        snapshot: Option<PyRef<'_, PySnapshot>>,
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let db = self.db()?;
        let options = Self::read_options(snapshot, None, None)?;
        let value = py.detach(|| db.get_opt(key, &options)).map_err(to_py_err)?;
        Ok(value.map(|v| bytes(py, &v)))
    }

    /// Removes `key` (not an error if it is absent).
    #[pyo3(signature = (key, *, sync = false))]
    fn delete(&self, py: Python<'_>, key: &[u8], sync: bool) -> PyResult<()> {
        let db = self.db()?;
        let options = WriteOptions {
            sync,
            ..WriteOptions::default()
        };
        py.detach(|| db.delete_opt(key, &options))
            .map_err(to_py_err)
    }

    /// Adds a merge operand for `key`; raises InvalidArgumentError without a merge operator.
    #[pyo3(signature = (key, value, *, sync = false))]
    fn merge(&self, py: Python<'_>, key: &[u8], value: &[u8], sync: bool) -> PyResult<()> {
        let db = self.db()?;
        let options = WriteOptions {
            sync,
            ..WriteOptions::default()
        };
        py.detach(|| db.merge_opt(key, value, &options))
            .map_err(to_py_err)
    }

    /// Applies every operation of `batch` atomically. The batch is unchanged.
    #[pyo3(signature = (batch, *, sync = false))]
    fn write(&self, py: Python<'_>, batch: PyRef<'_, PyWriteBatch>, sync: bool) -> PyResult<()> {
        let db = self.db()?;
        let batch = lock_now(&batch.batch, "write batch")?.clone();
        let options = WriteOptions {
            sync,
            ..WriteOptions::default()
        };
        py.detach(|| db.write_opt(batch, &options))
            .map_err(to_py_err)
    }

    /// A cursor (`shale.Iterator`) over the database, or a snapshot of it, within optional
    /// bounds: `lower_bound` inclusive, `upper_bound` exclusive.
    #[pyo3(signature = (*, snapshot = None, lower_bound = None, upper_bound = None))]
    fn iterator(
        &self,
        py: Python<'_>,
        snapshot: Option<PyRef<'_, PySnapshot>>,
        lower_bound: Option<&[u8]>,
        upper_bound: Option<&[u8]>,
    ) -> PyResult<PyIterator> {
        let db = self.db()?;
        let options = Self::read_options(snapshot, lower_bound, upper_bound)?;
        let iter = py.detach(|| db.iter(options));
        Ok(PyIterator {
            cursor: Mutex::new(Cursor {
                iter,
                positioned: false,
            }),
        })
    }

    /// `(key, value)` pairs with `start <= key < end` (None: unbounded), in key order, or in
    /// reverse order with `reverse=True`.
    #[pyo3(signature = (start = None, end = None, *, reverse = false, snapshot = None))]
    fn range(
        &self,
        py: Python<'_>,
        start: Option<&[u8]>,
        end: Option<&[u8]>,
        reverse: bool,
        snapshot: Option<PyRef<'_, PySnapshot>>,
    ) -> PyResult<PyRange> {
        let db = self.db()?;
        let options = Self::read_options(snapshot, start, end)?;
        let iter = py.detach(|| db.iter(options));
        Ok(PyRange {
            state: Mutex::new(RangeState {
                iter,
                reverse,
                started: false,
            }),
        })
    }

    /// Pins the current state: reads given this snapshot see exactly the writes made before.
    fn snapshot(&self) -> PyResult<PySnapshot> {
        let snapshot = self.db()?.snapshot();
        Ok(PySnapshot {
            snapshot: Mutex::new(Some(snapshot)),
        })
    }

    /// Writes the memtable to a table file and waits for it.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        let db = self.db()?;
        py.detach(|| db.flush()).map_err(to_py_err)
    }

    /// Compacts the keys in `[start, end]` (None: unbounded) down the tree, dropping
    /// overwritten and deleted data.
    #[pyo3(signature = (start = None, end = None))]
    fn compact_range(
        &self,
        py: Python<'_>,
        start: Option<&[u8]>,
        end: Option<&[u8]>,
    ) -> PyResult<()> {
        let db = self.db()?;
        py.detach(|| db.compact_range(start, end))
            .map_err(to_py_err)
    }

    /// A named property as a str, or None if the name is unknown: "shale.stats",
    /// "shale.num-files-at-level<N>", "shale.sstables", "shale.approximate-memory-usage",
    /// "shale.block-cache-usage", "shale.total-sst-size", "shale.last-sequence".
    fn property(&self, py: Python<'_>, name: &str) -> PyResult<Option<String>> {
        let db = self.db()?;
        Ok(py.detach(|| db.property(name)))
    }

    /// Closes the database: stops background work and releases the lock. Calling it again does
    /// nothing. Cursors made from it stay readable until they are dropped.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let db = self
            .db
            .write()
            .map_err(|_| Error::new_err("database handle is unusable after an internal error"))?
            .take();
        // Dropping the last reference joins the background threads: do it without the GIL.
        py.detach(move || drop(db));
        Ok(())
    }

    /// True once `close()` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.db.read().map_or(true, |db| db.is_none())
    }

    /// The directory the database lives in.
    #[getter]
    fn path(&self) -> PathBuf {
        self.path.clone()
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __exit__(
        &self,
        py: Python<'_>,
        _exc_type: &Bound<'_, PyAny>,
        _exc: &Bound<'_, PyAny>,
        _traceback: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        let state = if self.closed() { " closed" } else { "" };
        let mode = if self.read_only { " read-only" } else { "" };
        format!("<shale.DB {:?}{mode}{state}>", self.path)
    }
}

/// Puts, deletes and merges gathered in memory and applied atomically by `DB.write`.
#[pyclass(frozen, module = "shale", name = "WriteBatch")]
struct PyWriteBatch {
    batch: Mutex<WriteBatch>,
}

#[pymethods]
impl PyWriteBatch {
    #[new]
    fn new() -> Self {
        PyWriteBatch {
            batch: Mutex::new(WriteBatch::new()),
        }
    }

    /// Adds "set `key` to `value`".
    fn put(&self, key: &[u8], value: &[u8]) -> PyResult<()> {
        lock_now(&self.batch, "write batch")?.put(key, value);
        Ok(())
    }

    /// Adds "remove `key`".
    fn delete(&self, key: &[u8]) -> PyResult<()> {
        lock_now(&self.batch, "write batch")?.delete(key);
        Ok(())
    }

    /// Adds "merge the operand `value` into `key`".
    fn merge(&self, key: &[u8], value: &[u8]) -> PyResult<()> {
        lock_now(&self.batch, "write batch")?.merge(key, value);
        Ok(())
    }

    /// Removes every operation.
    fn clear(&self) -> PyResult<()> {
        lock_now(&self.batch, "write batch")?.clear();
        Ok(())
    }

    fn __len__(&self) -> PyResult<usize> {
        Ok(lock_now(&self.batch, "write batch")?.count() as usize)
    }

    fn __repr__(&self) -> PyResult<String> {
        Ok(format!(
            "<shale.WriteBatch of {} operations>",
            self.__len__()?
        ))
    }
}

/// A pinned point-in-time view, from `DB.snapshot()`. Pass it as `snapshot=` to reads.
/// Released by `release()`, at the end of a `with` block, or when garbage-collected.
#[pyclass(frozen, module = "shale", name = "Snapshot")]
struct PySnapshot {
    snapshot: Mutex<Option<shale::Snapshot>>,
}

impl PySnapshot {
    /// A clone of the engine snapshot, or `ClosedError` once released.
    fn get(&self) -> PyResult<shale::Snapshot> {
        lock_now(&self.snapshot, "snapshot")?
            .clone()
            .ok_or_else(|| ClosedError::new_err("snapshot was released"))
    }
}

#[pymethods]
impl PySnapshot {
    /// The sequence number of the last write the snapshot sees.
    #[getter]
    fn sequence(&self) -> PyResult<u64> {
        Ok(self.get()?.sequence())
    }

    /// Unpins the view (cursors already made with it keep theirs). Calling it again does
    /// nothing.
    fn release(&self) -> PyResult<()> {
        lock_now(&self.snapshot, "snapshot")?.take();
        Ok(())
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __exit__(
        &self,
        _exc_type: &Bound<'_, PyAny>,
        _exc: &Bound<'_, PyAny>,
        _traceback: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        self.release()?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        match self.get() {
            Ok(s) => format!("<shale.Snapshot at sequence {}>", s.sequence()),
            Err(_) => "<shale.Snapshot released>".to_string(),
        }
    }
}

struct Cursor {
    iter: DbIterator,
    /// Whether a seek has been made; iterating an unpositioned cursor starts at the first key.
    positioned: bool,
}

/// A cursor from `DB.iterator()`: seek, then step with `next()`/`prev()` while `valid()`.
/// Iterating it (`for key, value in it`) yields pairs from its position forwards, from the
/// first key if it was never positioned. Errors met while moving are raised by `check()` and
/// by iteration.
#[pyclass(frozen, module = "shale", name = "Iterator")]
struct PyIterator {
    cursor: Mutex<Cursor>,
}

impl PyIterator {
    /// Runs a move on the cursor without the GIL.
    fn step(&self, py: Python<'_>, step: impl FnOnce(&mut DbIterator) + Send) -> PyResult<()> {
        let mut cursor = lock_now(&self.cursor, "iterator")?;
        cursor.positioned = true;
        let iter = &mut cursor.iter;
        py.detach(move || step(iter));
        Ok(())
    }

    fn current<'py>(
        &self,
        py: Python<'py>,
        pick: fn(&DbIterator) -> &[u8],
    ) -> PyResult<Bound<'py, PyBytes>> {
        let cursor = lock_now(&self.cursor, "iterator")?;
        if !cursor.iter.valid() {
            return Err(InvalidArgumentError::new_err("iterator is not valid"));
        }
        Ok(bytes(py, pick(&cursor.iter)))
    }
}

#[pymethods]
impl PyIterator {
    /// True when positioned at an entry.
    fn valid(&self) -> PyResult<bool> {
        Ok(lock_now(&self.cursor, "iterator")?.iter.valid())
    }

    /// Positions at the first key (at or after the lower bound).
    fn seek_to_first(&self, py: Python<'_>) -> PyResult<()> {
        self.step(py, DbIterator::seek_to_first)
    }

    /// Positions at the last key (before the upper bound).
    fn seek_to_last(&self, py: Python<'_>) -> PyResult<()> {
        self.step(py, DbIterator::seek_to_last)
    }

    /// Positions at the first key `>= key`.
    fn seek(&self, py: Python<'_>, key: &[u8]) -> PyResult<()> {
        self.step(py, |iter| iter.seek(key))
    }

    /// Positions at the last key `<= key`.
    fn seek_for_prev(&self, py: Python<'_>, key: &[u8]) -> PyResult<()> {
        self.step(py, |iter| iter.seek_for_prev(key))
    }

    /// Moves to the next key (does nothing when not valid).
    fn next(&self, py: Python<'_>) -> PyResult<()> {
        self.step(py, |iter| {
            if iter.valid() {
                iter.next();
            }
        })
    }

    /// Moves to the previous key (does nothing when not valid).
    fn prev(&self, py: Python<'_>) -> PyResult<()> {
        self.step(py, |iter| {
            if iter.valid() {
                iter.prev();
            }
        })
    }

    /// The current key; raises InvalidArgumentError when not valid.
    fn key<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        self.current(py, DbIterator::key)
    }

    /// The current value; raises InvalidArgumentError when not valid.
    fn value<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        self.current(py, DbIterator::value)
    }

    /// Raises the error the cursor met, if any (an invalid cursor without one simply reached
    /// the end).
    fn check(&self) -> PyResult<()> {
        lock_now(&self.cursor, "iterator")?
            .iter
            .status()
            .map_err(to_py_err)
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<Option<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)>> {
        let mut cursor = lock_now(&self.cursor, "iterator")?;
        if !cursor.positioned {
            cursor.positioned = true;
            let iter = &mut cursor.iter;
            py.detach(|| iter.seek_to_first());
        }
        if !cursor.iter.valid() {
            cursor.iter.status().map_err(to_py_err)?;
            return Ok(None);
        }
        let value = cursor.iter.try_value().map_err(to_py_err)?;
        let pair = (bytes(py, cursor.iter.key()), bytes(py, value));
        let iter = &mut cursor.iter;
        py.detach(|| iter.next());
        Ok(Some(pair))
    }
}

struct RangeState {
    iter: DbIterator,
    reverse: bool,
    started: bool,
}

/// The Python iterator `DB.range()` returns: `(key, value)` tuples of bytes.
#[pyclass(frozen, module = "shale", name = "Range")]
struct PyRange {
    state: Mutex<RangeState>,
}

#[pymethods]
impl PyRange {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<Option<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)>> {
        let mut state = lock_now(&self.state, "range")?;
        let RangeState {
            iter,
            reverse,
            started,
        } = &mut *state;
        py.detach(|| match (*started, *reverse) {
            (false, false) => iter.seek_to_first(),
            (false, true) => iter.seek_to_last(),
            (true, _) if !iter.valid() => {}
            (true, false) => iter.next(),
            (true, true) => iter.prev(),
        });
        *started = true;
        if !iter.valid() {
            iter.status().map_err(to_py_err)?;
            return Ok(None);
        }
        let value = iter.try_value().map_err(to_py_err)?;
        Ok(Some((bytes(py, iter.key()), bytes(py, value))))
    }
}

/// The `shale` module.
#[pymodule]
#[pyo3(name = "shale")]
fn shale_module(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<PyDb>()?;
    m.add_class::<PyWriteBatch>()?;
    m.add_class::<PySnapshot>()?;
    m.add_class::<PyIterator>()?;
    m.add_class::<PyRange>()?;
    m.add("Error", py.get_type::<Error>())?;
    m.add("CorruptionError", py.get_type::<CorruptionError>())?;
    m.add("IoError", py.get_type::<IoError>())?;
    m.add(
        "InvalidArgumentError",
        py.get_type::<InvalidArgumentError>(),
    )?;
    m.add("LockedError", py.get_type::<LockedError>())?;
    m.add("ExistsError", py.get_type::<ExistsError>())?;
    m.add("MergeError", py.get_type::<MergeError>())?;
    m.add("PoisonedError", py.get_type::<PoisonedError>())?;
    m.add(
        "UnsupportedFormatError",
        py.get_type::<UnsupportedFormatError>(),
    )?;
    m.add("ClosedError", py.get_type::<ClosedError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
