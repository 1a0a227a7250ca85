//! The write batch handle `shale_writebatch_t`: puts, deletes and merges gathered in memory and
//! applied atomically by `shale_write`.
//!
//! Thread-safety: a batch belongs to one thread at a time.

use std::ffi::c_char;

use shale::WriteBatch;

use crate::boundary::{argument_detail, bytes, guard_quiet};

/// The C handle `shale_writebatch_t`.
#[derive(Default)]
pub struct ShaleWriteBatch {
    pub(crate) batch: WriteBatch,
    /// The first operation that could not be added (a NULL pointer with a non-zero length):
    /// `shale_write` fails with it rather than apply the batch without that operation.
    pub(crate) invalid: Option<String>,
}

impl ShaleWriteBatch {
    /// The batch to write, or the error of the first operation that could not be added.
    pub(crate) fn checked(&self) -> Result<&WriteBatch, String> {
        match &self.invalid {
            Some(message) => Err(message.clone()),
            None => Ok(&self.batch),
        }
    }
}

/// Runs `body` on the batch behind `batch` with the two byte strings it is given, if the handle
/// is not null. There is no error channel here: a byte string that is NULL with a non-zero
/// length is not added, and the batch remembers the first such operation (by its index among
/// the operations added since the batch was created or cleared) so that `shale_write` fails.
///
/// # Safety
/// `batch` is null or a live handle not used by another thread; each pointer is null or points
/// to its length in readable bytes.
unsafe fn with_batch(
    batch: *mut ShaleWriteBatch,
    operation: &str,
    first: (*const c_char, usize),
    second: (*const c_char, usize),
    body: impl FnOnce(&mut WriteBatch, &[u8], &[u8]),
) {
    // SAFETY: by the contract a non-null handle is live and exclusively ours for this call.
    let Some(handle) = (unsafe { batch.as_mut() }) else {
        return;
    };
    // SAFETY: forwarded from this function's contract.
    let (a, b) = unsafe {
        (
            bytes(first.0, first.1, "key"),
            bytes(second.0, second.1, "value"),
        )
    };
    let read = a.and_then(|a| Ok((a, b?)));
    guard_quiet((), || match read {
        Ok((a, b)) => body(&mut handle.batch, a, b),
        Err(message) => {
            if handle.invalid.is_none() {
                // Every earlier operation was added, so the count is this one's index.
                let index = handle.batch.count();
                let detail = argument_detail(&message);
                handle.invalid = Some(format!(
                    "invalid argument: write batch entry {index} ({operation}): {detail}"
                ));
            }
        }
    });
}

/// Creates an empty batch. Free it with [`shale_writebatch_destroy`].
#[no_mangle]
pub extern "C" fn shale_writebatch_create() -> *mut ShaleWriteBatch {
    guard_quiet(std::ptr::null_mut(), || {
        Box::into_raw(Box::<ShaleWriteBatch>::default())
    })
}

/// Frees a batch. A null handle is ignored.
///
/// # Safety
/// `batch` is null or a handle from [`shale_writebatch_create`] not yet destroyed; it is not
/// used afterwards.
#[no_mangle]
pub unsafe extern "C" fn shale_writebatch_destroy(batch: *mut ShaleWriteBatch) {
    if !batch.is_null() {
        // SAFETY: the handle came from Box::into_raw and is destroyed once by the contract.
        let handle = unsafe { Box::from_raw(batch) };
        guard_quiet((), move || drop(handle));
    }
}

/// Removes every operation from the batch, and forgets an operation that could not be added.
///
/// # Safety
/// `batch` is null or a live handle not used by another thread.
#[no_mangle]
pub unsafe extern "C" fn shale_writebatch_clear(batch: *mut ShaleWriteBatch) {
    // SAFETY: by the contract a non-null handle is live and exclusively ours for this call.
    if let Some(handle) = unsafe { batch.as_mut() } {
        guard_quiet((), || {
            handle.batch.clear();
            handle.invalid = None;
        });
    }
}

/// Adds "set `key` to `val`". Both are copied.
///
/// # Safety
/// `batch` is null or a live handle not used by another thread; `key` and `val` are null with
/// length 0 or point to that many readable bytes.
#[no_mangle]
pub unsafe extern "C" fn shale_writebatch_put(
    batch: *mut ShaleWriteBatch,
    key: *const c_char,
    keylen: usize,
    val: *const c_char,
    vallen: usize,
) {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        with_batch(batch, "put", (key, keylen), (val, vallen), |b, k, v| {
            b.put(k, v)
        })
    }
}

/// Adds "remove `key`". The key is copied.
///
/// # Safety
/// `batch` is null or a live handle not used by another thread; `key` is null with length 0 or
/// points to `keylen` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn shale_writebatch_delete(
    batch: *mut ShaleWriteBatch,
    key: *const c_char,
    keylen: usize,
) {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        with_batch(
            batch,
            "delete",
            (key, keylen),
            (std::ptr::null(), 0),
            |b, k, _| b.delete(k),
        )
    }
}

/// Adds "merge the operand `val` into `key`". Both are copied.
///
/// # Safety
/// As [`shale_writebatch_put`].
#[no_mangle]
pub unsafe extern "C" fn shale_writebatch_merge(
    batch: *mut ShaleWriteBatch,
    key: *const c_char,
    keylen: usize,
    val: *const c_char,
    vallen: usize,
) {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        with_batch(batch, "merge", (key, keylen), (val, vallen), |b, k, v| {
            b.merge(k, v)
        })
    }
}

/// The number of operations in the batch (0 for a null handle). An operation that could not be
/// added is not counted.
///
/// # Safety
/// `batch` is null or a live handle not used by another thread.
#[no_mangle]
pub unsafe extern "C" fn shale_writebatch_count(batch: *const ShaleWriteBatch) -> u32 {
    // SAFETY: by the contract a non-null handle is live.
    let handle = unsafe { batch.as_ref() };
    guard_quiet(0, || handle.map_or(0, |handle| handle.batch.count()))
}
