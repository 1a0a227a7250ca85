//! The C API of shale, in the style of LevelDB's `c.h`: opaque handles created and destroyed by
//! functions, byte strings passed as pointer plus length, errors returned through
//! `char** errptr`. The header is `include/shale.h`; keep it in step with this crate (the
//! C smoke test in `tests/` compiles against it).
//!
//! Error convention, as LevelDB's: a function that can fail takes `char** errptr` last. On
//! failure it stores a `malloc`ed NUL-terminated message in `*errptr` (freeing a message that
//! was already there); on success it leaves `*errptr` alone. Free messages, and every buffer a
//! function returns, with `free` or [`shale_free`].
//!
//! Invariants of the boundary (see `boundary.rs`): a null pointer is never dereferenced (it is
//! reported through `errptr` where there is one, and otherwise makes the call a no-op returning
//! NULL/0); a panic never unwinds into C; every function documents its safety contract.
//!
//! Thread-safety: a database handle (`shale_t`) may be shared by threads; every other handle
//! belongs to one thread at a time.

#![deny(missing_docs)]

mod batch;
mod boundary;
mod db;
mod iter;
mod options;

use std::ffi::c_void;

pub use batch::*;
pub use db::*;
pub use iter::*;
pub use options::*;

/// Frees a buffer returned by this API (`shale_get`, `shale_property_value`, error messages).
/// The same as `free`, for callers whose `free` may belong to another C runtime. NULL is
/// ignored.
///
/// # Safety
/// `ptr` is null or a buffer returned by this API that has not been freed yet.
#[no_mangle]
pub unsafe extern "C" fn shale_free(ptr: *mut c_void) {
    // SAFETY: by the contract `ptr` is null (a no-op for free) or came from malloc.
    boundary::guard_quiet((), || unsafe { libc::free(ptr) })
}

#[cfg(test)]
mod tests;
