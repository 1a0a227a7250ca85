//! The iterator handle `shale_iterator_t`: a cursor over the database (or a snapshot of it),
//! within the bounds of its read options.
//!
//! Contract, as LevelDB's: after any positioning call check `shale_iter_valid`; when it turns
//! false, `shale_iter_get_error` tells an error from the end of the data. Unlike LevelDB, moving
//! or reading an invalid iterator is not undefined: moves do nothing and `key`/`value` return
//! NULL. The pointers `shale_iter_key` and `shale_iter_value` return stay valid until the next
//! call that moves or destroys the iterator.
//!
//! Thread-safety: an iterator belongs to one thread at a time.

use std::ffi::c_char;

use shale::{DbIterator, ReadOptions};

use crate::boundary::{bytes, guard, guard_quiet, null_handle};
use crate::db::{db_ref, read_options};
use crate::{ShaleDb, ShaleReadOptions};

/// The C handle `shale_iterator_t`.
pub struct ShaleIterator {
    /// `None` when the read options were unusable; then `error` says why.
    iter: Option<DbIterator>,
    error: Option<String>,
}

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
            },
            Err(message) => ShaleIterator {
                iter: None,
                error: Some(message),
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

/// Runs `body` on the cursor behind `iter`, if there is one.
///
/// # Safety
/// `iter` is null or a live handle not used by another thread.
unsafe fn with_iter(iter: *mut ShaleIterator, body: impl FnOnce(&mut DbIterator)) {
    // SAFETY: by the contract a non-null handle is live and exclusively ours for this call.
    if let Some(cursor) = unsafe { iter.as_mut() }.and_then(|h| h.iter.as_mut()) {
        guard_quiet((), || body(cursor));
    }
}

/// 1 if the iterator is positioned at an entry, else 0 (also for a null handle).
///
/// # Safety
/// `iter` is null or a live handle not used by another thread.
#[no_mangle]
pub unsafe extern "C" fn shale_iter_valid(iter: *const ShaleIterator) -> u8 {
    // SAFETY: by the contract a non-null handle is live.
    let handle = unsafe { iter.as_ref() };
    u8::from(
        handle
            .and_then(|h| h.iter.as_ref())
            .is_some_and(DbIterator::valid),
    )
}

/// Positions at the first key (at or after the lower bound).
///
/// # Safety
/// `iter` is null or a live handle not used by another thread.
#[no_mangle]
pub unsafe extern "C" fn shale_iter_seek_to_first(iter: *mut ShaleIterator) {
    // SAFETY: forwarded from this function's contract.
    unsafe { with_iter(iter, DbIterator::seek_to_first) }
}

/// Positions at the last key (before the upper bound).
///
/// # Safety
/// `iter` is null or a live handle not used by another thread.
#[no_mangle]
pub unsafe extern "C" fn shale_iter_seek_to_last(iter: *mut ShaleIterator) {
    // SAFETY: forwarded from this function's contract.
    unsafe { with_iter(iter, DbIterator::seek_to_last) }
}

/// Positions at the first key at or after `key`. A NULL `key` with a non-zero length leaves
/// the iterator where it was.
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
    let Ok(target) = (unsafe { bytes(key, keylen, "key") }) else {
        return;
    };
    // SAFETY: forwarded from this function's contract.
    unsafe { with_iter(iter, |cursor| cursor.seek(target)) }
}

/// Positions at the last key at or before `key`. A NULL `key` with a non-zero length leaves
/// the iterator where it was.
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
    let Ok(target) = (unsafe { bytes(key, keylen, "key") }) else {
        return;
    };
    // SAFETY: forwarded from this function's contract.
    unsafe { with_iter(iter, |cursor| cursor.seek_for_prev(target)) }
}

/// Moves to the next key; does nothing if the iterator is not valid.
///
/// # Safety
/// `iter` is null or a live handle not used by another thread.
#[no_mangle]
pub unsafe extern "C" fn shale_iter_next(iter: *mut ShaleIterator) {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        with_iter(iter, |cursor| {
            if cursor.valid() {
                cursor.next();
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
        with_iter(iter, |cursor| {
            if cursor.valid() {
                cursor.prev();
            }
        })
    }
}

/// Shared body of [`shale_iter_key`] and [`shale_iter_value`].
///
/// # Safety
/// `iter` is null or a live handle; `len` is null or writable.
unsafe fn current(
    iter: *const ShaleIterator,
    len: *mut usize,
    pick: fn(&DbIterator) -> &[u8],
) -> *const c_char {
    // SAFETY: by the contract a non-null handle is live.
    let cursor = unsafe { iter.as_ref() }
        .and_then(|h| h.iter.as_ref())
        .filter(|c| c.valid());
    let bytes = cursor.map_or(&[][..], pick);
    if !len.is_null() {
        // SAFETY: non-null and writable by the contract.
        unsafe { *len = bytes.len() };
    }
    match cursor {
        Some(_) => bytes.as_ptr().cast(),
        None => std::ptr::null(),
    }
}

/// The current key: a pointer to `*klen` bytes owned by the iterator (not NUL-terminated),
/// valid until the iterator moves or is destroyed. NULL with `*klen == 0` if not valid.
///
/// # Safety
/// `iter` is null or a live handle not used by another thread; `klen` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn shale_iter_key(
    iter: *const ShaleIterator,
    klen: *mut usize,
) -> *const c_char {
    // SAFETY: forwarded from this function's contract.
    unsafe { current(iter, klen, DbIterator::key) }
}

/// The current value, as [`shale_iter_key`].
///
/// # Safety
/// `iter` is null or a live handle not used by another thread; `vlen` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn shale_iter_value(
    iter: *const ShaleIterator,
    vlen: *mut usize,
) -> *const c_char {
    // SAFETY: forwarded from this function's contract.
    unsafe { current(iter, vlen, DbIterator::value) }
}

/// Sets `*errptr` if the iterator met an error (or could not be created from its read options);
/// leaves it alone if iteration simply reached the end.
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
            if let Some(message) = &handle.error {
                return Err(message.clone());
            }
            match &handle.iter {
                Some(cursor) => cursor.status().map_err(|e| e.to_string()),
                None => Ok(()),
            }
        })
    }
}
