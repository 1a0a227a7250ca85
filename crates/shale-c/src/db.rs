//! The database handle `shale_t` and its operations: open, close, reads, writes, snapshots,
//! flush, compaction and properties; also destroy and repair of a closed database.
//!
//! Thread-safety: a `shale_t` may be used by any number of threads at once (every operation
//! takes the engine's `&Db`); only `shale_close` needs the caller to be sure no other call on
//! the handle is running or will start.

use std::ffi::c_char;

use shale::{Db, Options, ReadOptions, Snapshot, WriteBatch, WriteOptions};

use crate::boundary::{
    bytes, c_path, c_string, guard, guard_quiet, malloc_c_string, malloc_copy, null_handle,
    optional_bytes,
};
use crate::options::{ShaleOptions, ShaleReadOptions, ShaleWriteOptions};
use crate::ShaleWriteBatch;

/// The C handle `shale_t`: an open database.
pub struct ShaleDb {
    pub(crate) db: Db,
}

/// The C handle `shale_snapshot_t`: a pinned point-in-time view.
pub struct ShaleSnapshot {
    pub(crate) snapshot: Snapshot,
}

/// The database behind a handle.
///
/// # Safety
/// `db` is null or a live handle from `shale_open`.
pub(crate) unsafe fn db_ref<'a>(db: *const ShaleDb) -> Result<&'a Db, String> {
    // SAFETY: by the contract a non-null handle is live for the duration of the call.
    unsafe { db.as_ref() }
        .map(|handle| &handle.db)
        .ok_or_else(|| null_handle("database handle"))
}

/// The open options behind a handle (a copy, as `Db::open` takes them by value); NULL means
/// the defaults. Fails with the first setter value that could not be applied.
///
/// # Safety
/// `options` is null or a live handle from `shale_options_create`.
unsafe fn open_options(options: *const ShaleOptions) -> Result<Options, String> {
    // SAFETY: by the contract a non-null handle is live.
    match unsafe { options.as_ref() } {
        None => Ok(Options::default()),
        Some(handle) => handle.rejected.check().map(|()| handle.options.clone()),
    }
}

/// The read options behind a handle, or `None` for NULL (the defaults). Fails with a bound
/// that could not be read.
///
/// # Safety
/// `options` is null or a live handle from `shale_readoptions_create`.
pub(crate) unsafe fn read_options<'a>(
    options: *const ShaleReadOptions,
) -> Result<Option<&'a ReadOptions>, String> {
    // SAFETY: by the contract a non-null handle is live for the duration of the call.
    match unsafe { options.as_ref() } {
        None => Ok(None),
        Some(handle) => handle.rejected.check().map(|()| Some(&handle.options)),
    }
}

/// The write options behind a handle; NULL means the defaults.
///
/// # Safety
/// `options` is null or a live handle from `shale_writeoptions_create`.
unsafe fn write_options(options: *const ShaleWriteOptions) -> WriteOptions {
    // SAFETY: by the contract a non-null handle is live.
    unsafe { options.as_ref() }
        .map(|handle| handle.options)
        .unwrap_or_default()
}

/// Opens (and, by default, creates) the database in directory `path`. `options` may be NULL for
/// the defaults. Returns NULL and sets `*errptr` on failure.
///
/// # Safety
/// `path` is null or a NUL-terminated string; `options` is null or a live options handle;
/// `errptr` is null or points to a `char*` that is null or `malloc`ed (a message there is freed
/// and replaced on failure).
#[no_mangle]
pub unsafe extern "C" fn shale_open(
    path: *const c_char,
    options: *const ShaleOptions,
    errptr: *mut *mut c_char,
) -> *mut ShaleDb {
    // SAFETY: every pointer is used within its documented contract.
    unsafe {
        guard(errptr, std::ptr::null_mut(), || {
            let path = c_path(path)?;
            let options = open_options(options)?;
            let db = Db::open(path, options).map_err(|e| e.to_string())?;
            Ok(Box::into_raw(Box::new(ShaleDb { db })))
        })
    }
}

/// Opens the database in `path` for reading only: no lock is taken and nothing is written, so
/// it works beside another process that has the database open. Every write fails.
///
/// # Safety
/// As [`shale_open`].
#[no_mangle]
pub unsafe extern "C" fn shale_open_read_only(
    path: *const c_char,
    options: *const ShaleOptions,
    errptr: *mut *mut c_char,
) -> *mut ShaleDb {
    // SAFETY: every pointer is used within its documented contract.
    unsafe {
        guard(errptr, std::ptr::null_mut(), || {
            let path = c_path(path)?;
            let options = open_options(options)?;
            let db = Db::open_read_only(path, options).map_err(|e| e.to_string())?;
            Ok(Box::into_raw(Box::new(ShaleDb { db })))
        })
    }
}

/// Closes the database: stops background work and releases the lock. A null handle is ignored.
/// Iterators and snapshots made from it stay memory-safe to use and destroy afterwards (they
/// hold their own references), but should be destroyed first.
///
/// # Safety
/// `db` is null or a handle from `shale_open` not yet closed; no other thread is using it, and
/// it is not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn shale_close(db: *mut ShaleDb) {
    if !db.is_null() {
        // SAFETY: the handle came from Box::into_raw and is closed once by the contract.
        let handle = unsafe { Box::from_raw(db) };
        guard_quiet((), move || drop(handle));
    }
}

/// Sets `key` to `val`. `options` may be NULL for the defaults.
///
/// # Safety
/// `db` is null or a live handle; `options` is null or a live write options handle; `key`
/// and `val` are null with length 0 or point to that many readable bytes; `errptr` as in
/// [`shale_open`].
#[no_mangle]
pub unsafe extern "C" fn shale_put(
    db: *mut ShaleDb,
    options: *const ShaleWriteOptions,
    key: *const c_char,
    keylen: usize,
    val: *const c_char,
    vallen: usize,
    errptr: *mut *mut c_char,
) {
    // SAFETY: every pointer is used within its documented contract.
    unsafe {
        guard(errptr, (), || {
            let db = db_ref(db)?;
            let key = bytes(key, keylen, "key")?;
            let val = bytes(val, vallen, "value")?;
            db.put_opt(key, val, &write_options(options))
                .map_err(|e| e.to_string())
        })
    }
}

/// Removes `key`; not an error if it is absent.
///
/// # Safety
/// As [`shale_put`].
#[no_mangle]
pub unsafe extern "C" fn shale_delete(
    db: *mut ShaleDb,
    options: *const ShaleWriteOptions,
    key: *const c_char,
    keylen: usize,
    errptr: *mut *mut c_char,
) {
    // SAFETY: every pointer is used within its documented contract.
    unsafe {
        guard(errptr, (), || {
            let db = db_ref(db)?;
            let key = bytes(key, keylen, "key")?;
            db.delete_opt(key, &write_options(options))
                .map_err(|e| e.to_string())
        })
    }
}

/// Adds the merge operand `val` to `key`; fails if the database has no merge operator.
///
/// # Safety
/// As [`shale_put`].
#[no_mangle]
pub unsafe extern "C" fn shale_merge(
    db: *mut ShaleDb,
    options: *const ShaleWriteOptions,
    key: *const c_char,
    keylen: usize,
    val: *const c_char,
    vallen: usize,
    errptr: *mut *mut c_char,
) {
    // SAFETY: every pointer is used within its documented contract.
    unsafe {
        guard(errptr, (), || {
            let db = db_ref(db)?;
            let key = bytes(key, keylen, "key")?;
            let val = bytes(val, vallen, "merge operand")?;
            db.merge_opt(key, val, &write_options(options))
                .map_err(|e| e.to_string())
        })
    }
}

/// Applies every operation in `batch` atomically. The batch is left as it was, so it may be
/// written again or cleared and reused. Fails, writing nothing, if an operation could not be
/// added to the batch (a NULL pointer with a non-zero length); the message names its index.
///
/// # Safety
/// `db` is null or a live handle; `options` is null or a live write options handle; `batch`
/// is null or a live batch handle not used by another thread during the call; `errptr` as in
/// [`shale_open`].
#[no_mangle]
pub unsafe extern "C" fn shale_write(
    db: *mut ShaleDb,
    options: *const ShaleWriteOptions,
    batch: *mut ShaleWriteBatch,
    errptr: *mut *mut c_char,
) {
    // SAFETY: every pointer is used within its documented contract.
    unsafe {
        guard(errptr, (), || {
            let db = db_ref(db)?;
            // SAFETY: a non-null batch is a live handle by the contract.
            let batch: &WriteBatch = batch
                .as_ref()
                .ok_or_else(|| null_handle("write batch"))?
                .checked()?;
            db.write_opt(batch.clone(), &write_options(options))
                .map_err(|e| e.to_string())
        })
    }
}

/// The value of `key` in a fresh `malloc`ed buffer of `*vallen` bytes (free it with `free` or
/// `shale_free`; it is not NUL-terminated), or NULL with `*vallen == 0` if the key is absent or
/// on error (then `*errptr` is set). `options` may be NULL for the defaults. With a NULL
/// `errptr` a failed read looks exactly like a missing key, so callers that need to tell them
/// apart must pass one.
///
/// # Safety
/// `db` is null or a live handle; `options` is null or a live read options handle; `key` is
/// null with length 0 or points to `keylen` readable bytes; `vallen` is null or writable;
/// `errptr` as in [`shale_open`].
#[no_mangle]
pub unsafe extern "C" fn shale_get(
    db: *mut ShaleDb,
    options: *const ShaleReadOptions,
    key: *const c_char,
    keylen: usize,
    vallen: *mut usize,
    errptr: *mut *mut c_char,
) -> *mut c_char {
    if !vallen.is_null() {
        // SAFETY: non-null and writable by the contract.
        unsafe { *vallen = 0 };
    }
    // SAFETY: every pointer is used within its documented contract.
    unsafe {
        guard(errptr, std::ptr::null_mut(), || {
            if vallen.is_null() {
                return Err(null_handle("vallen"));
            }
            let db = db_ref(db)?;
            let key = bytes(key, keylen, "key")?;
            let default = ReadOptions::default();
            let options = read_options(options)?.unwrap_or(&default);
            match db.get_opt(key, options).map_err(|e| e.to_string())? {
                None => Ok(std::ptr::null_mut()),
                Some(value) => {
                    *vallen = value.len();
                    Ok(malloc_copy(&value))
                }
            }
        })
    }
}

/// Pins the current state; reads given it (through `shale_readoptions_set_snapshot`) see
/// exactly the writes made before. Release it with [`shale_release_snapshot`]. Returns NULL if
/// `db` is NULL.
///
/// # Safety
/// `db` is null or a live handle.
#[no_mangle]
pub unsafe extern "C" fn shale_create_snapshot(db: *mut ShaleDb) -> *const ShaleSnapshot {
    // SAFETY: forwarded from this function's contract.
    let Ok(db) = (unsafe { db_ref(db) }) else {
        return std::ptr::null();
    };
    guard_quiet(std::ptr::null(), || {
        Box::into_raw(Box::new(ShaleSnapshot {
            snapshot: db.snapshot(),
        }))
        .cast_const()
    })
}

/// Releases a snapshot handle. The view stays pinned while read options or iterators made with
/// it are alive. `db` is accepted for symmetry with LevelDB and not used, so releasing after
/// `shale_close` is harmless. A null snapshot is ignored.
///
/// # Safety
/// `snapshot` is null or a handle from [`shale_create_snapshot`] not yet released; it is not
/// used afterwards.
#[no_mangle]
pub unsafe extern "C" fn shale_release_snapshot(_db: *mut ShaleDb, snapshot: *const ShaleSnapshot) {
    if !snapshot.is_null() {
        // SAFETY: the handle came from Box::into_raw and is released once by the contract.
        let handle = unsafe { Box::from_raw(snapshot.cast_mut()) };
        guard_quiet((), move || drop(handle));
    }
}

/// The value of a named property as a `malloc`ed NUL-terminated string (free it), or NULL if
/// the name is unknown or an argument is NULL. Names: `shale.stats`,
/// `shale.num-files-at-level<N>`, `shale.sstables`, `shale.approximate-memory-usage`,
/// `shale.block-cache-usage`, `shale.total-sst-size`, `shale.last-sequence`.
///
/// # Safety
/// `db` is null or a live handle; `propname` is null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn shale_property_value(
    db: *mut ShaleDb,
    propname: *const c_char,
) -> *mut c_char {
    // SAFETY: forwarded from this function's contract.
    let (Ok(db), Ok(name)) = (unsafe { db_ref(db) }, unsafe {
        c_string(propname, "property name")
    }) else {
        return std::ptr::null_mut();
    };
    guard_quiet(std::ptr::null_mut(), || {
        match db.property(&String::from_utf8_lossy(name)) {
            Some(value) => malloc_c_string(&value),
            None => std::ptr::null_mut(),
        }
    })
}

/// Writes the memtable to a table file and waits for it.
///
/// # Safety
/// `db` is null or a live handle; `errptr` as in [`shale_open`].
#[no_mangle]
pub unsafe extern "C" fn shale_flush(db: *mut ShaleDb, errptr: *mut *mut c_char) {
    // SAFETY: every pointer is used within its documented contract.
    unsafe {
        guard(errptr, (), || {
            db_ref(db)?.flush().map_err(|e| e.to_string())
        })
    }
}

/// Compacts the keys in `[start_key, limit_key]` down the tree, dropping overwritten and
/// deleted data. A NULL key leaves that end unbounded (a non-null key of length 0 is the empty
/// key).
///
/// # Safety
/// `db` is null or a live handle; each key is null or points to its length in readable bytes;
/// `errptr` as in [`shale_open`].
#[no_mangle]
pub unsafe extern "C" fn shale_compact_range(
    db: *mut ShaleDb,
    start_key: *const c_char,
    start_key_len: usize,
    limit_key: *const c_char,
    limit_key_len: usize,
    errptr: *mut *mut c_char,
) {
    // SAFETY: every pointer is used within its documented contract.
    unsafe {
        guard(errptr, (), || {
            let db = db_ref(db)?;
            let start = optional_bytes(start_key, start_key_len, "start key")?;
            let limit = optional_bytes(limit_key, limit_key_len, "limit key")?;
            db.compact_range(start, limit).map_err(|e| e.to_string())
        })
    }
}

/// Deletes the database in `path` (its files and, if then empty, the directory). The database
/// must not be open.
///
/// # Safety
/// As [`shale_open`].
#[no_mangle]
pub unsafe extern "C" fn shale_destroy_db(
    path: *const c_char,
    options: *const ShaleOptions,
    errptr: *mut *mut c_char,
) {
    // SAFETY: every pointer is used within its documented contract.
    unsafe {
        guard(errptr, (), || {
            let path = c_path(path)?;
            let options = open_options(options)?;
            Db::destroy(path, &options).map_err(|e| e.to_string())
        })
    }
}

/// Salvages what it can from a damaged database in `path`; damaged files move to `path/lost/`.
/// The database must not be open.
///
/// # Safety
/// As [`shale_open`].
#[no_mangle]
pub unsafe extern "C" fn shale_repair_db(
    path: *const c_char,
    options: *const ShaleOptions,
    errptr: *mut *mut c_char,
) {
    // SAFETY: every pointer is used within its documented contract.
    unsafe {
        guard(errptr, (), || {
            let path = c_path(path)?;
            let options = open_options(options)?;
            Db::repair(path, &options)
                .map(drop)
                .map_err(|e| e.to_string())
        })
    }
}
