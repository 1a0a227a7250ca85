//! The Python binding of shale: the `shale` module, with `DB`, `WriteBatch`, `Snapshot`,
//! `Iterator`, `Range`, `destroy_db`, `repair_db` and the exception classes. Built by maturin (`pyproject.toml`); the
//! tests are in `tests/test_shale.py` and run by `scripts/test-python.sh`.
//!
//! Keys and values are `bytes` in and out. Every engine error becomes an exception derived from
//! `shale.Error`, chosen by the error's kind (see [`to_py_err`]).
//!
//! Thread-safety: every class may be shared between Python threads. Calls that can wait on
//! disk or on other writers release the GIL; the engine's own locking keeps them safe. A `DB`
//! call holds its database's lock shared for its whole run and `close()` holds it exclusively,
//! both taken with the GIL released: `close()` waits for the calls in flight, then drops the
//! database itself (joining its background threads without the GIL), so when it returns the
//! directory's lock is free. Cursors (`Iterator`, `Range`) and batches are guarded by a mutex
//! that is never waited on while holding the GIL: a cursor used by two threads at the same
//! instant raises instead of deadlocking.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock, TryLockError};

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyOSError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyDict, PyType};

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
/// `shale.IoError`, made at first use: it derives from both `shale.Error` and `OSError`, and
/// `create_exception!` takes one base.
static IO_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// The doc of `shale.IoError`.
const IO_ERROR_DOC: &str = "An operating-system I/O call failed (also an OSError).";

/// The class `shale.IoError`: `class IoError(shale.Error, OSError)`.
fn io_error_type(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    let class = IO_ERROR.get_or_try_init(py, || -> PyResult<Py<PyType>> {
        let namespace = PyDict::new(py);
        namespace.set_item("__module__", "shale")?;
        namespace.set_item("__doc__", IO_ERROR_DOC)?;
        let bases = (py.get_type::<Error>(), py.get_type::<PyOSError>());
        let class = py
            .get_type::<PyType>()
            .call1(("IoError", bases, namespace))?
            .cast_into::<PyType>()?;
        Ok(class.unbind())
    })?;
    Ok(class.bind(py))
}
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
    "The database does not exist (create_if_missing=False, repair) or already exists \
     (error_if_exists=True): the engine reports both as one kind, the message says which."
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
    "An earlier write or background failure (or panic) made the database refuse writes until reopened."
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
        // With an errno, raised as OSError(errno, message, filename) so that code handling
        // it as an OSError finds `errno`, `strerror` and `filename` set.
        shale::Error::Io { source, path, .. } => Python::attach(|py| match io_error_type(py) {
            Ok(class) => match source.raw_os_error() {
                Some(errno) => PyErr::from_type(
                    class.clone(),
                    (errno, message, path.to_string_lossy().into_owned()),
                ),
                None => PyErr::from_type(class.clone(), message),
            },
            Err(failed) => failed,
        }),
        shale::Error::InvalidArgument(_) => InvalidArgumentError::new_err(message),
        shale::Error::Locked { .. } => LockedError::new_err(message),
        shale::Error::Exists(_) => ExistsError::new_err(message),
        shale::Error::Merge { .. } => MergeError::new_err(message),
        // A panic in a flush, compaction or write poisons the database as a failure does.
        shale::Error::Poisoned(_) | shale::Error::Panicked { .. } => {
            PoisonedError::new_err(message)
        }
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

/// Takes what `slot` holds (a cursor and what it pins) and drops it with the GIL released:
/// dropping can unpin tables and memtables. Later uses find `None` and raise ClosedError.
fn release<T: Send>(py: Python<'_>, slot: &Mutex<Option<T>>, what: &str) -> PyResult<()> {
    let taken = lock_now(slot, what)?.take();
    py.detach(move || drop(taken));
    Ok(())
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
    /// The open database, `None` once closed. Calls hold the lock shared while they run and
    /// `close()` holds it exclusively; both take it with the GIL released (see the module doc).
    db: RwLock<Option<Db>>,
    path: PathBuf,
    read_only: bool,
}

/// Why a call on a `DB` could not run or failed; turned into an exception once the GIL is back.
enum DbFailure {
    Closed,
    Engine(shale::Error),
}

impl From<DbFailure> for PyErr {
    fn from(failure: DbFailure) -> PyErr {
        match failure {
            DbFailure::Closed => ClosedError::new_err("database is closed"),
            DbFailure::Engine(error) => to_py_err(error),
        }
    }
}

impl PyDb {
    /// Runs `body` on the open database with the GIL released, holding the database's lock
    /// shared so that `close()` waits for it; `ClosedError` once closed.
    fn with_db<T: Send>(
        &self,
        py: Python<'_>,
        body: impl FnOnce(&Db) -> shale::Result<T> + Send,
    ) -> PyResult<T> {
        let result = py.detach(|| {
            // A panic never happens while the lock is held exclusively (close only takes the
            // value out), so a poisoned lock still holds a consistent value.
            let guard = self.db.read().unwrap_or_else(PoisonError::into_inner);
            let db = guard.as_ref().ok_or(DbFailure::Closed)?;
            body(db).map_err(DbFailure::Engine)
        });
        Ok(result?)
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
            db: RwLock::new(Some(db)),
            path,
            read_only,
        })
    }

    /// Sets `key` to `value`. With `sync=True` the write is on disk (survives power loss) when
    /// the call returns.
    #[pyo3(signature = (key, value, *, sync = false))]
    fn put(&self, py: Python<'_>, key: &[u8], value: &[u8], sync: bool) -> PyResult<()> {
        let options = WriteOptions {
            sync,
            ..WriteOptions::default()
        };
        self.with_db(py, |db| db.put_opt(key, value, &options))
    }

    /// The value of `key` as bytes, or None. With `snapshot`, as of that snapshot.
    #[pyo3(signature = (key, *, snapshot = None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &[u8],
        snapshot: Option<PyRef<'_, PySnapshot>>,
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let options = Self::read_options(snapshot, None, None)?;
        let value = self.with_db(py, |db| db.get_opt(key, &options))?;
        Ok(value.map(|v| bytes(py, &v)))
    }

    /// Removes `key` (not an error if it is absent).
    #[pyo3(signature = (key, *, sync = false))]
    fn delete(&self, py: Python<'_>, key: &[u8], sync: bool) -> PyResult<()> {
        let options = WriteOptions {
            sync,
            ..WriteOptions::default()
        };
        self.with_db(py, |db| db.delete_opt(key, &options))
    }

    /// Adds a merge operand for `key`; raises InvalidArgumentError without a merge operator.
    #[pyo3(signature = (key, value, *, sync = false))]
    fn merge(&self, py: Python<'_>, key: &[u8], value: &[u8], sync: bool) -> PyResult<()> {
        let options = WriteOptions {
            sync,
            ..WriteOptions::default()
        };
        self.with_db(py, |db| db.merge_opt(key, value, &options))
    }

    /// Applies every operation of `batch` atomically. The batch is unchanged.
    #[pyo3(signature = (batch, *, sync = false))]
    fn write(&self, py: Python<'_>, batch: PyRef<'_, PyWriteBatch>, sync: bool) -> PyResult<()> {
        let batch = lock_now(&batch.batch, "write batch")?.clone();
        let options = WriteOptions {
            sync,
            ..WriteOptions::default()
        };
        self.with_db(py, |db| db.write_opt(batch, &options))
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
        let options = Self::read_options(snapshot, lower_bound, upper_bound)?;
        let iter = self.with_db(py, |db| Ok(db.iter(options)))?;
        Ok(PyIterator {
            cursor: Mutex::new(Some(Cursor {
                iter,
                positioned: false,
            })),
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
        let options = Self::read_options(snapshot, start, end)?;
        let iter = self.with_db(py, |db| Ok(db.iter(options)))?;
        Ok(PyRange {
            state: Mutex::new(Some(RangeState {
                iter,
                reverse,
                started: false,
            })),
        })
    }

    /// Pins the current state: reads given this snapshot see exactly the writes made before.
    fn snapshot(&self, py: Python<'_>) -> PyResult<PySnapshot> {
        let snapshot = self.with_db(py, |db| Ok(db.snapshot()))?;
        Ok(PySnapshot {
            snapshot: Mutex::new(Some(snapshot)),
        })
    }

    /// Writes the memtable to a table file and waits for it.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        self.with_db(py, Db::flush)
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
        self.with_db(py, |db| db.compact_range(start, end))
    }

    /// A named property as a str, or None if the name is unknown: "shale.stats",
    /// "shale.num-files-at-level<N>", "shale.sstables", "shale.approximate-memory-usage",
    /// "shale.block-cache-usage", "shale.total-sst-size", "shale.last-sequence".
    fn property(&self, py: Python<'_>, name: &str) -> PyResult<Option<String>> {
        self.with_db(py, |db| Ok(db.property(name)))
    }

    /// Closes the database: waits for the calls other threads have in flight on it (calls
    /// made after it starts raise ClosedError), then stops background work and releases the
    /// directory's lock, all before it returns. Calling it again does nothing. Cursors made
    /// from it stay readable until they are closed or dropped.
    fn close(&self, py: Python<'_>) {
        py.detach(|| {
            let db = self
                .db
                .write()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            // Dropped after the lock is released: joining the background threads can take a
            // while, and waiting calls only need to see that the database is gone.
            drop(db);
        });
    }

    /// True once `close()` was called.
    #[getter]
    fn closed(&self, py: Python<'_>) -> bool {
        // Without the GIL: close() may be waiting for a long call, and holds the lock next.
        py.detach(|| {
            self.db
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .is_none()
        })
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
    ) -> bool {
        self.close(py);
        false
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let state = if self.closed(py) { " closed" } else { "" };
        let mode = if self.read_only { " read-only" } else { "" };
        format!("<shale.DB {:?}{mode}{state}>", self.path)
    }
}

impl Drop for PyDb {
    /// A `DB` collected without `close()`: dropping the engine's handle joins its background
    /// threads, so it is done with the GIL released, as `close()` does.
    fn drop(&mut self) {
        let db = self
            .db
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if db.is_some() {
            Python::attach(|py| py.detach(move || drop(db)));
        }
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
    /// Whether the cursor has been positioned (by a seek, a step or iteration). Iterating or
    /// `next()` on an unpositioned cursor starts at the first key, `prev()` at the last.
    positioned: bool,
}

impl Cursor {
    /// Positions a cursor that was never positioned at the first key (or the last, for a
    /// backward step), so that its first step lands on an entry rather than doing nothing.
    /// True if it did.
    fn start(&mut self, py: Python<'_>, backward: bool) -> bool {
        if self.positioned {
            return false;
        }
        self.positioned = true;
        let iter = &mut self.iter;
        py.detach(|| {
            if backward {
                iter.seek_to_last();
            } else {
                iter.seek_to_first();
            }
        });
        true
    }
}

/// A cursor from `DB.iterator()`: seek, then step with `next()`/`prev()` while `valid()`.
/// Iterating it (`for key, value in it`) yields pairs from its position forwards, from the
/// first key if it was never positioned; likewise `next()` on a cursor never positioned moves
/// to the first key and `prev()` to the last. Errors met while moving are raised by `check()`
/// and by iteration. `close()` (or the end of a `with` block) releases what the cursor pins;
/// any later use raises ClosedError.
#[pyclass(frozen, module = "shale", name = "Iterator")]
struct PyIterator {
    /// `None` once closed.
    cursor: Mutex<Option<Cursor>>,
}

impl PyIterator {
    /// Runs `body` on the open cursor; `ClosedError` once closed.
    fn with_cursor<T>(&self, body: impl FnOnce(&mut Cursor) -> PyResult<T>) -> PyResult<T> {
        let mut guard = lock_now(&self.cursor, "iterator")?;
        let cursor = guard
            .as_mut()
            .ok_or_else(|| ClosedError::new_err("iterator is closed"))?;
        body(cursor)
    }

    /// Runs a seek on the cursor without the GIL.
    fn seek_with(&self, py: Python<'_>, seek: impl FnOnce(&mut DbIterator) + Send) -> PyResult<()> {
        self.with_cursor(|cursor| {
            cursor.positioned = true;
            let iter = &mut cursor.iter;
            py.detach(move || seek(iter));
            Ok(())
        })
    }

    /// Moves one step (backward or not) without the GIL; a cursor never positioned moves to
    /// the first (last) key instead, an invalid one stays where it is.
    fn step(&self, py: Python<'_>, backward: bool) -> PyResult<()> {
        self.with_cursor(|cursor| {
            if cursor.start(py, backward) {
                return Ok(());
            }
            let iter = &mut cursor.iter;
            py.detach(|| match (iter.valid(), backward) {
                (false, _) => {}
                (true, false) => iter.next(),
                (true, true) => iter.prev(),
            });
            Ok(())
        })
    }

    /// The current entry's key, or its value (read from its blob file if it is kept there; a
    /// failed read raises the engine's error).
    fn current<'py>(&self, py: Python<'py>, want_value: bool) -> PyResult<Bound<'py, PyBytes>> {
        self.with_cursor(|cursor| {
            if !cursor.iter.valid() {
                return Err(InvalidArgumentError::new_err("iterator is not valid"));
            }
            let data = if want_value {
                value_without_gil(py, &mut cursor.iter)?
            } else {
                cursor.iter.key()
            };
            Ok(bytes(py, data))
        })
    }
}

#[pymethods]
impl PyIterator {
    /// True when positioned at an entry.
    fn valid(&self) -> PyResult<bool> {
        self.with_cursor(|cursor| Ok(cursor.iter.valid()))
    }

    /// Positions at the first key (at or after the lower bound).
    fn seek_to_first(&self, py: Python<'_>) -> PyResult<()> {
        self.seek_with(py, DbIterator::seek_to_first)
    }

    /// Positions at the last key (before the upper bound).
    fn seek_to_last(&self, py: Python<'_>) -> PyResult<()> {
        self.seek_with(py, DbIterator::seek_to_last)
    }

    /// Positions at the first key `>= key`.
    fn seek(&self, py: Python<'_>, key: &[u8]) -> PyResult<()> {
        self.seek_with(py, |iter| iter.seek(key))
    }

    /// Positions at the last key `<= key`.
    fn seek_for_prev(&self, py: Python<'_>, key: &[u8]) -> PyResult<()> {
        self.seek_with(py, |iter| iter.seek_for_prev(key))
    }

    /// Moves to the next key; on a cursor never positioned, to the first key. Does nothing
    /// when not valid.
    fn next(&self, py: Python<'_>) -> PyResult<()> {
        self.step(py, false)
    }

    /// Moves to the previous key; on a cursor never positioned, to the last key. Does nothing
    /// when not valid.
    fn prev(&self, py: Python<'_>) -> PyResult<()> {
        self.step(py, true)
    }

    /// The current key; raises InvalidArgumentError when not valid.
    fn key<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        self.current(py, false)
    }

    /// The current value; raises InvalidArgumentError when not valid, and the engine's error
    /// (e.g. CorruptionError) when the value cannot be read from its blob file.
    fn value<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        self.current(py, true)
    }

    /// Raises the error the cursor met, if any (an invalid cursor without one simply reached
    /// the end).
    fn check(&self) -> PyResult<()> {
        self.with_cursor(|cursor| cursor.iter.status().map_err(to_py_err))
    }

    /// Releases the cursor and what it pins (tables, memtables, its snapshot). Calling it
    /// again does nothing; any other use afterwards raises ClosedError.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        release(py, &self.cursor, "iterator")
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

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<Option<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)>> {
        self.with_cursor(|cursor| {
            cursor.start(py, false);
            if !cursor.iter.valid() {
                cursor.iter.status().map_err(to_py_err)?;
                return Ok(None);
            }
            let value = bytes(py, value_without_gil(py, &mut cursor.iter)?);
            let pair = (bytes(py, cursor.iter.key()), value);
            let iter = &mut cursor.iter;
            py.detach(|| iter.next());
            Ok(Some(pair))
        })
    }
}

struct RangeState {
    iter: DbIterator,
    reverse: bool,
    started: bool,
}

/// The Python iterator `DB.range()` returns: `(key, value)` tuples of bytes. `close()` (or the
/// end of a `with` block) releases what it pins; iterating it afterwards raises ClosedError.
#[pyclass(frozen, module = "shale", name = "Range")]
struct PyRange {
    /// `None` once closed.
    state: Mutex<Option<RangeState>>,
}

#[pymethods]
impl PyRange {
    /// Releases the range's cursor and what it pins. Calling it again does nothing; iterating
    /// afterwards raises ClosedError.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        release(py, &self.state, "range")
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

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<Option<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)>> {
        let mut guard = lock_now(&self.state, "range")?;
        let RangeState {
            iter,
            reverse,
            started,
        } = guard
            .as_mut()
            .ok_or_else(|| ClosedError::new_err("range is closed"))?;
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
        let value = bytes(py, value_without_gil(py, iter)?);
        Ok(Some((bytes(py, iter.key()), value)))
    }
}

/// The current value of `iter`. A value kept in a blob file is read with the GIL released;
/// the iterator keeps what it read, so the second call, with the GIL, only borrows it.
fn value_without_gil<'a>(py: Python<'_>, iter: &'a mut DbIterator) -> PyResult<&'a [u8]> {
    let reader = &mut *iter;
    if let Some(e) = py.detach(move || reader.try_value().err()) {
        return Err(to_py_err(e));
    }
    let iter: &'a DbIterator = iter;
    iter.try_value().map_err(to_py_err)
}

/// Deletes the database in `path` (a str or os.PathLike): every file named as shale names its
/// files, then the directory if nothing else is left in it; other files stay. A missing
/// directory is not an error. The database must not be open (`LockedError`). Like plyvel's
/// `destroy_db`.
#[pyfunction]
fn destroy_db(py: Python<'_>, path: PathBuf) -> PyResult<()> {
    py.detach(|| Db::destroy(&path, &Options::default()))
        .map_err(to_py_err)
}

/// Salvages what it can from a damaged database in `path` (a str or os.PathLike): every readable
/// entry is rewritten under a new manifest and damaged files move to `path/lost/`. The
/// database must not be open. Returns a dict: `tables_scanned`, `wals_scanned`,
/// `entries_recovered`, `wal_records_recovered`, `tables_written`, `intermediate_tables`
/// (ints; the last counts tables written and removed again when more tables overlapped than
/// repair may hold open at once), `problems` (a str
/// per loss; empty when nothing was lost) and `moved_to_lost` (paths as str). Like plyvel's
/// `repair_db`, which returns nothing.
#[pyfunction]
fn repair_db(py: Python<'_>, path: PathBuf) -> PyResult<Bound<'_, PyDict>> {
    let report = py
        .detach(|| Db::repair(&path, &Options::default()))
        .map_err(to_py_err)?;
    let out = PyDict::new(py);
    out.set_item("tables_scanned", report.tables_scanned)?;
    out.set_item("wals_scanned", report.wals_scanned)?;
    out.set_item("entries_recovered", report.entries_recovered)?;
    out.set_item("wal_records_recovered", report.wal_records_recovered)?;
    out.set_item("tables_written", report.tables_written)?;
    out.set_item("intermediate_tables", report.intermediate_tables)?;
    out.set_item("problems", report.problems)?;
    let moved: Vec<String> = report
        .moved_to_lost
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    out.set_item("moved_to_lost", moved)?;
    Ok(out)
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
    m.add_function(wrap_pyfunction!(destroy_db, m)?)?;
    m.add_function(wrap_pyfunction!(repair_db, m)?)?;
    m.add("Error", py.get_type::<Error>())?;
    m.add("CorruptionError", py.get_type::<CorruptionError>())?;
    m.add("IoError", io_error_type(py)?)?;
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
