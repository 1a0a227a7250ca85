//! What crosses the FFI boundary: error strings written through `char** errptr`, buffers handed
//! to C (allocated with `malloc` so that C may `free` them), byte slices and strings read from C
//! pointers, and the guard that keeps panics on the Rust side.
//!
//! Invariants: nothing here dereferences a null pointer; every buffer given to C comes from
//! `malloc` and is freed by `free` (or [`crate::shale_free`]); a panic inside a guarded body is
//! caught and turned into an error message, never unwound into C.

use std::ffi::{c_char, CStr, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

/// Copies `bytes` into a fresh `malloc` block and returns it. At least one byte is allocated, so
/// an empty value is a valid pointer and never confused with "not found".
pub(crate) fn malloc_copy(bytes: &[u8]) -> *mut c_char {
    // SAFETY: malloc has no preconditions; the size is never 0, so a null return means failure.
    let block = unsafe { libc::malloc(bytes.len().max(1)) }.cast::<u8>();
    if block.is_null() {
        handle_out_of_memory(bytes.len().max(1));
    }
    // SAFETY: `block` is a fresh allocation of at least `bytes.len()` bytes and cannot overlap
    // `bytes`, which lives in Rust memory.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), block, bytes.len()) };
    block.cast::<c_char>()
}

/// Copies `text` into a fresh `malloc`ed NUL-terminated string. Interior NUL bytes (which would
/// silently cut the string short in C) are replaced by `?`.
pub(crate) fn malloc_c_string(text: &str) -> *mut c_char {
    let mut bytes: Vec<u8> = text
        .bytes()
        .map(|b| if b == 0 { b'?' } else { b })
        .collect();
    bytes.push(0);
    malloc_copy(&bytes)
}

/// Out of memory while building a buffer for C: there is no way to report it through a buffer
/// that cannot be allocated, so this aborts as Rust's own allocator does.
fn handle_out_of_memory(size: usize) -> ! {
    match std::alloc::Layout::array::<u8>(size) {
        Ok(layout) => std::alloc::handle_alloc_error(layout),
        Err(_) => std::process::abort(),
    }
}

/// Stores `message` in `*errptr` as LevelDB does: a message already there is freed first, then
/// replaced by a `malloc`ed copy. A null `errptr` means the caller does not want the message.
///
/// # Safety
/// `errptr` is null or points to a `char*` that is null or was allocated with `malloc`.
pub(crate) unsafe fn set_error(errptr: *mut *mut c_char, message: &str) {
    if errptr.is_null() {
        return;
    }
    // SAFETY: `errptr` is non-null and, by the contract, points to a readable `char*`.
    let old = unsafe { *errptr };
    if !old.is_null() {
        // SAFETY: by the contract a non-null message came from malloc and is freed only here.
        unsafe { libc::free(old.cast()) };
    }
    // SAFETY: `errptr` is non-null and writable by the contract.
    unsafe { *errptr = malloc_c_string(message) };
}

/// The message for a caught panic: its payload when it is a string.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    let detail = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic payload".to_string());
    format!("internal error (panic inside shale): {detail}")
}

/// Runs `body`, reporting its error (or a panic) through `errptr` and returning `fallback` in
/// either case. Every exported function that takes an `errptr` runs its body through this.
///
/// # Safety
/// As [`set_error`]: `errptr` is null or points to a null or `malloc`ed `char*`.
pub(crate) unsafe fn guard<T>(
    errptr: *mut *mut c_char,
    fallback: T,
    body: impl FnOnce() -> Result<T, String>,
) -> T {
    let message = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(value)) => return value,
        Ok(Err(message)) => message,
        Err(payload) => panic_message(payload.as_ref()),
    };
    // SAFETY: forwarded from this function's contract.
    unsafe { set_error(errptr, &message) };
    fallback
}

/// Runs `body` for a function with no error channel (setters, iterator moves, destructors):
/// a panic is caught and `fallback` returned instead.
pub(crate) fn guard_quiet<T>(fallback: T, body: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(fallback)
}

/// The bytes `[ptr, ptr + len)`. A null `ptr` is accepted only with `len == 0` (the empty
/// string); otherwise it is an error naming `what`.
///
/// # Safety
/// When `ptr` is non-null it points to `len` readable bytes that stay unchanged for `'a`.
pub(crate) unsafe fn bytes<'a>(
    ptr: *const c_char,
    len: usize,
    what: &str,
) -> Result<&'a [u8], String> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(format!(
            "invalid argument: {what} is NULL but its length is {len}"
        ));
    }
    if len > isize::MAX as usize {
        return Err(format!(
            "invalid argument: {what} length {len} is too large"
        ));
    }
    // SAFETY: `ptr` is non-null, `len` fits in isize, and the caller promises `len` readable
    // bytes that stay unchanged for `'a`.
    Ok(unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) })
}

/// Like [`bytes`], but a null `ptr` means "no key" (an unbounded end of a range) whatever `len`
/// is, and a non-null `ptr` with `len == 0` is the empty key.
///
/// # Safety
/// As [`bytes`].
pub(crate) unsafe fn optional_bytes<'a>(
    ptr: *const c_char,
    len: usize,
    what: &str,
) -> Result<Option<&'a [u8]>, String> {
    if ptr.is_null() {
        return Ok(None);
    }
    // SAFETY: forwarded from this function's contract.
    unsafe { bytes(ptr, len, what) }.map(Some)
}

/// The NUL-terminated string at `ptr`, as raw bytes.
///
/// # Safety
/// When `ptr` is non-null it points to a NUL-terminated string that stays unchanged for `'a`.
pub(crate) unsafe fn c_string<'a>(ptr: *const c_char, what: &str) -> Result<&'a [u8], String> {
    if ptr.is_null() {
        return Err(format!("invalid argument: {what} is NULL"));
    }
    // SAFETY: non-null and NUL-terminated by the contract.
    Ok(unsafe { CStr::from_ptr(ptr) }.to_bytes())
}

/// The NUL-terminated path at `ptr`. Paths are bytes on Unix, so any non-empty string is
/// accepted, UTF-8 or not.
///
/// # Safety
/// As [`c_string`].
pub(crate) unsafe fn c_path<'a>(ptr: *const c_char) -> Result<&'a Path, String> {
    // SAFETY: forwarded from this function's contract.
    let raw = unsafe { c_string(ptr, "path") }?;
    if raw.is_empty() {
        return Err("invalid argument: path is empty".to_string());
    }
    Ok(Path::new(OsStr::from_bytes(raw)))
}

/// `message` without the leading `invalid argument: ` that argument errors carry, to put it
/// inside a longer message that has its own.
pub(crate) fn argument_detail(message: &str) -> &str {
    message
        .strip_prefix("invalid argument: ")
        .unwrap_or(message)
}

/// The error for a null handle argument.
pub(crate) fn null_handle(what: &str) -> String {
    format!("invalid argument: {what} is NULL")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads and frees an error string set through `errptr`.
    fn take(err: &mut *mut c_char) -> Option<String> {
        if err.is_null() {
            return None;
        }
        // SAFETY: set_error stored a NUL-terminated malloc'd string.
        let text = unsafe { CStr::from_ptr(*err) }
            .to_string_lossy()
            .into_owned();
        // SAFETY: allocated by malloc in malloc_copy, freed once here.
        unsafe { libc::free((*err).cast()) };
        *err = std::ptr::null_mut();
        Some(text)
    }

    #[test]
    fn set_error_replaces_and_frees_an_earlier_message() {
        let mut err: *mut c_char = std::ptr::null_mut();
        // SAFETY: `err` is a valid, initially null, char*.
        unsafe { set_error(&mut err, "first") };
        let first = err;
        assert!(!first.is_null());
        // SAFETY: as above; the first message is freed by the second call.
        unsafe { set_error(&mut err, "second\0with nul") };
        assert_eq!(take(&mut err).as_deref(), Some("second?with nul"));
        // SAFETY: a null errptr is documented as "ignore the message".
        unsafe { set_error(std::ptr::null_mut(), "ignored") };
    }

    #[test]
    fn guard_reports_errors_and_catches_panics() {
        let mut err: *mut c_char = std::ptr::null_mut();
        // SAFETY: `err` is a valid null char*.
        let ok = unsafe { guard(&mut err, 0, || Ok(7)) };
        assert_eq!(ok, 7);
        assert!(err.is_null(), "success leaves errptr alone");

        // SAFETY: as above.
        let failed = unsafe { guard(&mut err, -1, || Err("boom".to_string())) };
        assert_eq!(failed, -1);
        assert_eq!(take(&mut err).as_deref(), Some("boom"));

        // SAFETY: as above.
        let panicked: i32 = unsafe { guard(&mut err, -2, || panic!("kaput")) };
        assert_eq!(panicked, -2);
        let message = take(&mut err).expect("a panic is reported");
        assert!(message.contains("kaput"), "{message}");

        assert_eq!(guard_quiet(3, || panic!("quiet")), 3);
    }

    #[test]
    fn byte_slices_from_c_pointers() {
        // SAFETY: null with length 0 is the empty string; no memory is read.
        assert_eq!(unsafe { bytes(std::ptr::null(), 0, "key") }, Ok(&[][..]));
        // SAFETY: null is rejected before any read.
        let err = unsafe { bytes(std::ptr::null(), 3, "key") }.expect_err("null with length");
        assert!(err.contains("key is NULL"), "{err}");
        let data = b"abc";
        // SAFETY: `data` has 3 readable bytes.
        assert_eq!(
            unsafe { bytes(data.as_ptr().cast(), 3, "key") },
            Ok(&b"abc"[..])
        );
        // SAFETY: null means unbounded and is never read.
        assert_eq!(
            unsafe { optional_bytes(std::ptr::null(), 5, "start") },
            Ok(None)
        );
        // SAFETY: a non-null pointer with length 0 reads nothing.
        assert_eq!(
            unsafe { optional_bytes(data.as_ptr().cast(), 0, "start") },
            Ok(Some(&[][..]))
        );
        // SAFETY: null is rejected before any read.
        assert!(unsafe { c_path(std::ptr::null()) }.is_err());
        // SAFETY: a NUL-terminated literal.
        assert!(unsafe { c_path(c"".as_ptr()) }.is_err());
        // SAFETY: a NUL-terminated literal.
        assert_eq!(
            unsafe { c_path(c"/tmp/db".as_ptr()) },
            Ok(Path::new("/tmp/db"))
        );
    }

    #[test]
    fn malloc_copy_of_empty_bytes_is_not_null() {
        let block = malloc_copy(b"");
        assert!(!block.is_null());
        // SAFETY: allocated by malloc in malloc_copy.
        unsafe { libc::free(block.cast()) };
    }
}
