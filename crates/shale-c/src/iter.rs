//! The iterator handle `shale_iterator_t`: a cursor over the database (or a snapshot of it),
//! within the bounds of its read options.
//!
//! Contract, as LevelDB's: after any positioning call check `shale_iter_valid`; when it turns
//! false, `shale_iter_get_error` tells an error from the end of the data. Unlike LevelDB, moving
//! or reading an invalid iterator is not undefined: moves do nothing and `key`/`value` return
//! NULL. The pointers `shale_iter_key` and `shale_iter_value` return stay valid until the next
//! call that moves or destroys the iterator; for an empty key or value they point to a static
//! byte, so they are never NULL (nor dangling) while the iterator is valid.
//!
//! Errors that make the iterator invalid: unusable read options (for its whole life), a seek
//! target that cannot be read (until the next positioning call), and the engine's own (a
//! damaged table, or a value that cannot be read from its blob file).
//!
//! Thread-safety: an iterator belongs to one thread at a time.

use std::ffi::c_char;

use shale::{DbIterator, ReadOptions};

use crate::boundary::{argument_detail, bytes, guard, guard_quiet, null_handle};
use crate::db::{db_ref, read_options};
use crate::{ShaleDb, ShaleReadOptions};

/// The C handle `shale_iterator_t`.
pub struct ShaleIterator {
    /// `None` when the read options were unusable; then `error` says why.
    iter: Option<DbIterator>,
    /// Why the read options were unusable; set once, at creation.
    error: Option<String>,
    /// A seek whose target could not be read: the iterator is invalid and reports this until
    /// the next positioning call.
    seek_error: Option<String>,
}

impl ShaleIterator {
    /// The cursor, if it is usable and positioned at an entry.
    fn positioned(&self) -> Option<&DbIterator> {
        if self.seek_error.is_some() {
            return None;
        }
        self.iter.as_ref().filter(|cursor| cursor.valid())
    }
}

/// What `shale_iter_key`/`shale_iter_value` return for an empty slice: a real byte, so that C
/// may pass the pointer to `memcpy`/`memcmp` with length 0 (a dangling pointer there is UB).
pub(crate) static EMPTY: u8 = 0;

/// Creates an iterator, not yet positioned (call a seek first). `options` may be NULL for the
/// defaults. Returns NULL only if `db` is NULL; unusable read options give an iterator that is
/// never valid and reports why from `shale_iter_get_error`.
///
/// # Safety
/// `db` is null or a live handle; `options` is null or a live read options handle.
#[no_mangle]
pub unsafe extern "C" fn shale_create_iterator(
    db: *mut ShaleDb,
    options: *const ShaleReadOptions,
) -> *mut ShaleIterator {
    // SAFETY: forwarded from this function's contract.
    let Ok(db) = (unsafe { db_ref(db) }) else {
        return std::ptr::null_mut();
    };
    // SAFETY: forwarded from this function's contract.
    let options = unsafe { read_options(options) };
    guard_quiet(std::ptr::null_mut(), || {
        let handle = match options {
            Ok(options) => ShaleIterator {
                iter: Some(db.iter(options.cloned().unwrap_or_else(ReadOptions::default))),
                error: None,
                seek_error: None,
            },
            Err(message) => ShaleIterator {
                iter: None,
                error: Some(message),
                seek_error: None,
            },
        };
        Box::into_raw(Box::new(handle))
    })
}

/// Frees an iterator. A null handle is ignored.
///
/// # Safety
/// `iter` is null or a handle from [`shale_create_iterator`] not yet destroyed; it is not used
/// afterwards.
#[no_mangle]
pub unsafe extern "C" fn shale_iter_destroy(iter: *mut ShaleIterator) {
    if !iter.is_null() {
        // SAFETY: the handle came from Box::into_raw and is destroyed once by the contract.
        let handle = unsafe { Box::from_raw(iter) };
        guard_quiet((), move || drop(handle));
    }
}

/// Runs `body` on the handle behind `iter`, if it is not null.
///
/// # Safety
/// `iter` is null or a live handle not used by another thread, and no reference into it (such
/// as a seek target borrowed from `shale_iter_key`) is used during the call.
unsafe fn with_handle(iter: *mut ShaleIterator, body: impl FnOnce(&mut ShaleIterator)) {
    // SAFETY: by the contract a non-null handle is live and exclusively ours for this call.
    if let Some(handle) = unsafe { iter.as_mut() } {
        guard_quiet((), || body(handle));
    }
}

/// Runs a positioning call: it clears an earlier seek error, then moves the cursor (if the
/// read options gave one).
///
/// # Safety
/// As [`with_handle`].
unsafe fn reposition(iter: *mut ShaleIterator, body: impl FnOnce(&mut DbIterator)) {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        with_handle(iter, |handle| {
            handle.seek_error = None;
            if let Some(cursor) = handle.iter.as_mut() {
                body(cursor);
            }
        })
    }
}

/// Shared body of [`shale_iter_seek`] and [`shale_iter_seek_for_prev`]: the target is copied
/// before the handle is borrowed mutably, because it may point into the iterator itself (the
/// current key from `shale_iter_key`). A target that cannot be read leaves the iterator invalid
/// with an error naming the call and the argument.
///
/// # Safety
/// `iter` is null or a live handle not used by another thread; `key` is null with length 0 or
/// points to `keylen` readable bytes.
unsafe fn seek_with(
    iter: *mut ShaleIterator,
    call: &str,
    key: *const c_char,
    keylen: usize,
    seek: fn(&mut DbIterator, &[u8]),
) {
    // SAFETY: forwarded from this function's contract; the slice is copied at once and not
    // kept past this statement.
    let target = unsafe { bytes(key, keylen, "key") }.map(<[u8]>::to_vec);
    match target {
        // SAFETY: forwarded from this function's contract; nothing borrowed from `key` is alive.
        Ok(target) => unsafe { reposition(iter, |cursor| seek(cursor, &target)) },
        // SAFETY: as above.
        Err(message) => unsafe {
            with_handle(iter, |handle| {
                let detail = argument_detail(&message);
                handle.seek_error = Some(format!(
                    "invalid argument: {call}: {detail} (expected a pointer to {keylen} \
                     readable bytes, or a length of 0)"
                ));
            })
        },
    }
}

/// 1 if the iterator is positioned at an entry, else 0 (also for a null handle, after a seek
/// whose key could not be read, and once the current value could not be read).
///
/// # Safety
/// `iter` is null or a live handle not used by another thread.
#[no_mangle]
pub unsafe extern "C" fn shale_iter_valid(iter: *const ShaleIterator) -> u8 {
    // SAFETY: by the contract a non-null handle is live.
    let handle = unsafe { iter.as_ref() };
    guard_quiet(0, || {
        u8::from(handle.and_then(ShaleIterator::positioned).is_some())
    })
}

/// Positions at the first key (at or after the lower bound).
///
/// # Safety
/// `iter` is null or a live handle not used by another thread.
#[no_mangle]
pub unsafe extern "C" fn shale_iter_seek_to_first(iter: *mut ShaleIterator) {
    // SAFETY: forwarded from this function's contract.
    unsafe { reposition(iter, DbIterator::seek_to_first) }
}

/// Positions at the last key (before the upper bound).
///
/// # Safety
/// `iter` is null or a live handle not used by another thread.
#[no_mangle]
pub unsafe extern "C" fn shale_iter_seek_to_last(iter: *mut ShaleIterator) {
    // SAFETY: forwarded from this function's contract.
    unsafe { reposition(iter, DbIterator::seek_to_last) }
}

/// Positions at the first key at or after `key`. A NULL `key` with a non-zero length leaves
/// the iterator invalid, and `shale_iter_get_error` reports it. `key` may point into the
/// iterator itself (the current key).
///
/// # Safety
/// `iter` is null or a live handle not used by another thread; `key` is null with length 0 or
/// points to `keylen` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn shale_iter_seek(
    iter: *mut ShaleIterator,
    key: *const c_char,
    keylen: usize,
) {
    // SAFETY: forwarded from this function's contract.
    unsafe { seek_with(iter, "shale_iter_seek", key, keylen, DbIterator::seek) }
}

/// Positions at the last key at or before `key`; a key that cannot be read is reported as in
/// [`shale_iter_seek`].
///
/// # Safety
/// As [`shale_iter_seek`].
#[no_mangle]
pub unsafe extern "C" fn shale_iter_seek_for_prev(
    iter: *mut ShaleIterator,
    key: *const c_char,
    keylen: usize,
) {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        seek_with(
            iter,
            "shale_iter_seek_for_prev",
            key,
            keylen,
            DbIterator::seek_for_prev,
        )
    }
}

/// Moves to the next key; does nothing if the iterator is not valid.
///
/// # Safety
/// `iter` is null or a live handle not used by another thread.
#[no_mangle]
pub unsafe extern "C" fn shale_iter_next(iter: *mut ShaleIterator) {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        with_handle(iter, |handle| {
            if handle.positioned().is_some() {
                if let Some(cursor) = handle.iter.as_mut() {
                    cursor.next();
                }
            }
        })
    }
}

/// Moves to the previous key; does nothing if the iterator is not valid.
///
/// # Safety
/// `iter` is null or a live handle not used by another thread.
#[no_mangle]
pub unsafe extern "C" fn shale_iter_prev(iter: *mut ShaleIterator) {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        with_handle(iter, |handle| {
            if handle.positioned().is_some() {
                if let Some(cursor) = handle.iter.as_mut() {
                    cursor.prev();
                }
            }
        })
    }
}

/// Shared body of [`shale_iter_key`] and [`shale_iter_value`]: `pick` reads the slice from a
/// valid cursor, or fails (a value that cannot be read from its blob file). NULL with
/// `*len == 0` when the iterator is not valid or `pick` fails; the static [`EMPTY`] byte for an
/// empty slice.
///
/// # Safety
/// `iter` is null or a live handle; `len` is null or writable.
unsafe fn current(
    iter: *const ShaleIterator,
    len: *mut usize,
    pick: fn(&DbIterator) -> Option<&[u8]>,
) -> *const c_char {
    if !len.is_null() {
        // SAFETY: non-null and writable by the contract.
        unsafe { *len = 0 };
    }
    // SAFETY: by the contract a non-null handle is live.
    let handle = unsafe { iter.as_ref() };
    let slice = guard_quiet(None, || {
        handle.and_then(ShaleIterator::positioned).and_then(pick)
    });
    let Some(slice) = slice else {
        return std::ptr::null();
    };
    if !len.is_null() {
        // SAFETY: non-null and writable by the contract.
        unsafe { *len = slice.len() };
    }
    if slice.is_empty() {
        std::ptr::from_ref(&EMPTY).cast()
    } else {
        slice.as_ptr().cast()
    }
}

/// The current key: a pointer to `*klen` bytes owned by the iterator (not NUL-terminated),
/// valid until the iterator moves or is destroyed; an empty key is a valid non-NULL pointer.
/// NULL with `*klen == 0` if not valid.
///
/// # Safety
/// `iter` is null or a live handle not used by another thread; `klen` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn shale_iter_key(
    iter: *const ShaleIterator,
    klen: *mut usize,
) -> *const c_char {
    // SAFETY: forwarded from this function's contract.
    unsafe { current(iter, klen, |cursor| Some(cursor.key())) }
}

/// The current value, as [`shale_iter_key`]. A value kept in a blob file is read here; if that
/// fails this returns NULL with `*vlen == 0`, the iterator turns invalid and
/// `shale_iter_get_error` reports the failure.
///
/// # Safety
/// `iter` is null or a live handle not used by another thread; `vlen` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn shale_iter_value(
    iter: *const ShaleIterator,
    vlen: *mut usize,
) -> *const c_char {
    // SAFETY: forwarded from this function's contract.
    // The engine keeps a failed read as the cursor's status (and turns it invalid), so the
    // error itself is not needed here.
    unsafe { current(iter, vlen, |cursor| cursor.try_value().ok()) }
}

/// Sets `*errptr` if the iterator met an error (unusable read options, a seek key that could
/// not be read, a damaged table, a value that could not be read); leaves it alone if iteration
/// simply reached the end.
///
/// # Safety
/// `iter` is null or a live handle not used by another thread; `errptr` is null or points to a
/// `char*` that is null or `malloc`ed.
#[no_mangle]
pub unsafe extern "C" fn shale_iter_get_error(
    iter: *const ShaleIterator,
    errptr: *mut *mut c_char,
) {
    // SAFETY: every pointer is used within its documented contract.
    unsafe {
        guard(errptr, (), || {
            let Some(handle) = iter.as_ref() else {
                return Err(null_handle("iterator"));
            };
            if let Some(message) = handle.error.as_ref().or(handle.seek_error.as_ref()) {
                return Err(message.clone());
            }
            match &handle.iter {
                Some(cursor) => cursor.status().map_err(|e| e.to_string()),
                None => Ok(()),
            }
        })
    }
}
