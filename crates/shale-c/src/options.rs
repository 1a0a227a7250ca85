//! Option handles: `shale_options_t` (open), `shale_readoptions_t` and `shale_writeoptions_t`.
//!
//! Setters never fail on the spot, as in LevelDB's C API: a value that cannot be used (an
//! unknown compression code or merge operator name) is remembered, and [`crate::shale_open`]
//! reports it; a later usable value for the same option forgets it. Each handle belongs to one
//! thread at a time; a database does not keep a reference to the options it was opened with,
//! so they may be destroyed right after.

use std::ffi::c_char;
use std::sync::Arc;

use shale::{
    Compression, MaxOperator, MergeOperator, Options, ReadOptions, StringAppendOperator,
    UInt64AddOperator, WriteOptions,
};

use crate::boundary::{argument_detail, c_string, guard_quiet, optional_bytes};
use crate::ShaleSnapshot;

/// The C handle `shale_options_t`.
pub struct ShaleOptions {
    pub(crate) options: Options,
    /// Setter values that could not be applied; `shale_open` fails with them.
    pub(crate) rejected: Rejected,
}

/// The C handle `shale_readoptions_t`.
#[derive(Default)]
pub struct ShaleReadOptions {
    pub(crate) options: ReadOptions,
    /// Bounds that could not be read; reads and iterators fail with them.
    pub(crate) rejected: Rejected,
}

/// The setter values of one handle that could not be applied, one per option, in the order
/// they were set. A setter that applies a value of its option drops that option's entry, so a
/// mistake can be corrected on the same handle.
#[derive(Debug, Default)]
pub(crate) struct Rejected {
    entries: Vec<(&'static str, String)>,
}

impl Rejected {
    /// Records that `option` was given a value it cannot take, replacing an earlier record.
    fn reject(&mut self, option: &'static str, message: String) {
        self.accept(option);
        self.entries.push((option, message));
    }

    /// Forgets an earlier rejected value of `option`: it was just given a usable one.
    fn accept(&mut self, option: &'static str) {
        self.entries.retain(|(name, _)| *name != option);
    }

    /// `Ok` if every option holds a usable value, else an error listing those that do not.
    pub(crate) fn check(&self) -> Result<(), String> {
        if self.entries.is_empty() {
            return Ok(());
        }
        let messages: Vec<&str> = self.entries.iter().map(|(_, m)| m.as_str()).collect();
        Err(format!("invalid argument: {}", messages.join("; ")))
    }
}

/// The C handle `shale_writeoptions_t`.
#[derive(Default)]
pub struct ShaleWriteOptions {
    pub(crate) options: WriteOptions,
}

/// `shale_no_compression`. Persisted in the C header: never renumber.
pub const SHALE_NO_COMPRESSION: i32 = 0;
/// `shale_snappy_compression`. Persisted in the C header: never renumber.
pub const SHALE_SNAPPY_COMPRESSION: i32 = 1;
/// `shale_lz4_compression`. Persisted in the C header: never renumber.
pub const SHALE_LZ4_COMPRESSION: i32 = 2;
/// `shale_zstd_compression` (level 3). Persisted in the C header: never renumber.
pub const SHALE_ZSTD_COMPRESSION: i32 = 3;

/// The built-in merge operator called `name`, as `shale_options_set_merge_operator` and the
/// Python binding accept it: `uint64add`, `stringappend` (joins with `,`), `max`.
pub fn merge_operator_by_name(name: &str) -> Option<Arc<dyn MergeOperator>> {
    match name {
        "uint64add" => Some(Arc::new(UInt64AddOperator)),
        "stringappend" => Some(Arc::new(StringAppendOperator::new(b","))),
        "max" => Some(Arc::new(MaxOperator)),
        _ => None,
    }
}

/// Runs `body` on the options behind `options` if it is not null; null handles are ignored,
/// as there is nowhere to report them.
///
/// # Safety
/// `options` is null or a live handle from `shale_options_create`, not used by another thread.
unsafe fn with_options(options: *mut ShaleOptions, body: impl FnOnce(&mut ShaleOptions)) {
    // SAFETY: by the contract a non-null handle is live and exclusively ours for this call.
    if let Some(handle) = unsafe { options.as_mut() } {
        guard_quiet((), || body(handle));
    }
}

/// Creates open options holding shale's defaults (note: `create_if_missing` is on by default,
/// unlike LevelDB). Free with [`shale_options_destroy`].
#[no_mangle]
pub extern "C" fn shale_options_create() -> *mut ShaleOptions {
    guard_quiet(std::ptr::null_mut(), || {
        Box::into_raw(Box::new(ShaleOptions {
            options: Options::default(),
            rejected: Rejected::default(),
        }))
    })
}

/// Frees open options. A null handle is ignored.
///
/// # Safety
/// `options` is null or a handle from [`shale_options_create`] not yet destroyed; it is not
/// used afterwards.
#[no_mangle]
pub unsafe extern "C" fn shale_options_destroy(options: *mut ShaleOptions) {
    if !options.is_null() {
        // SAFETY: the handle came from Box::into_raw and is destroyed once by the contract.
        let handle = unsafe { Box::from_raw(options) };
        guard_quiet((), move || drop(handle));
    }
}

/// Create the database if it does not exist (default: on).
///
/// # Safety
/// `options` is null or a live handle not used concurrently by another thread.
#[no_mangle]
pub unsafe extern "C" fn shale_options_set_create_if_missing(options: *mut ShaleOptions, v: u8) {
    // SAFETY: forwarded from this function's contract.
    unsafe { with_options(options, |o| o.options.create_if_missing = v != 0) }
}

/// Fail to open if the database already exists (default: off).
///
/// # Safety
/// `options` is null or a live handle not used concurrently by another thread.
#[no_mangle]
pub unsafe extern "C" fn shale_options_set_error_if_exists(options: *mut ShaleOptions, v: u8) {
    // SAFETY: forwarded from this function's contract.
    unsafe { with_options(options, |o| o.options.error_if_exists = v != 0) }
}

/// Verify every table at open and every block compaction reads (default: off).
///
/// # Safety
/// `options` is null or a live handle not used concurrently by another thread.
#[no_mangle]
pub unsafe extern "C" fn shale_options_set_paranoid_checks(options: *mut ShaleOptions, v: u8) {
    // SAFETY: forwarded from this function's contract.
    unsafe { with_options(options, |o| o.options.paranoid_checks = v != 0) }
}

/// Bytes gathered in a memtable before it is flushed (default 8 MiB, at least 4 KiB: smaller
/// values make `shale_open` fail).
///
/// # Safety
/// `options` is null or a live handle not used concurrently by another thread.
#[no_mangle]
pub unsafe extern "C" fn shale_options_set_write_buffer_size(
    options: *mut ShaleOptions,
    size: usize,
) {
    // SAFETY: forwarded from this function's contract.
    unsafe { with_options(options, |o| o.options.write_buffer_size = size) }
}

/// Table files kept open (default 1000, at least 16).
///
/// # Safety
/// `options` is null or a live handle not used concurrently by another thread.
#[no_mangle]
pub unsafe extern "C" fn shale_options_set_max_open_files(options: *mut ShaleOptions, n: i32) {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        with_options(options, |o| {
            if let Some(n) = non_negative(o, "max_open_files", n) {
                o.options.max_open_files = n;
            }
        })
    }
}

/// Uncompressed bytes per data block (default 2048).
///
/// # Safety
/// `options` is null or a live handle not used concurrently by another thread.
#[no_mangle]
pub unsafe extern "C" fn shale_options_set_block_size(options: *mut ShaleOptions, size: usize) {
    // SAFETY: forwarded from this function's contract.
    unsafe { with_options(options, |o| o.options.block_size = size) }
}

/// Bytes of the block cache (default 8 MiB; 0 turns it off).
///
/// # Safety
/// `options` is null or a live handle not used concurrently by another thread.
#[no_mangle]
pub unsafe extern "C" fn shale_options_set_block_cache_capacity(
    options: *mut ShaleOptions,
    capacity: usize,
) {
    // SAFETY: forwarded from this function's contract.
    unsafe { with_options(options, |o| o.options.block_cache_capacity = capacity) }
}

/// Bloom filter bits per key (default 10; 0 turns filters off).
///
/// # Safety
/// `options` is null or a live handle not used concurrently by another thread.
#[no_mangle]
pub unsafe extern "C" fn shale_options_set_bloom_bits_per_key(
    options: *mut ShaleOptions,
    bits: i32,
) {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        with_options(options, |o| {
            if let Some(bits) = non_negative(o, "bloom_bits_per_key", bits) {
                o.options.bloom_bits_per_key = bits;
            }
        })
    }
}

/// Target size of a table file written by compaction (default 4 MiB).
///
/// # Safety
/// `options` is null or a live handle not used concurrently by another thread.
#[no_mangle]
pub unsafe extern "C" fn shale_options_set_max_file_size(options: *mut ShaleOptions, size: usize) {
    // SAFETY: forwarded from this function's contract.
    unsafe { with_options(options, |o| o.options.max_file_size = size as u64) }
}

/// LZ4 acceleration for the tables a flush writes (default 2; 1 is LZ4's default, larger is
/// faster and compresses less; compactions always use 1). Out of 1 to 65537 makes `shale_open`
/// fail.
///
/// # Safety
/// `options` is null or a live handle not used concurrently by another thread.
#[no_mangle]
pub unsafe extern "C" fn shale_options_set_flush_lz4_acceleration(
    options: *mut ShaleOptions,
    acceleration: i32,
) {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        with_options(options, |o| {
            if let Some(a) = non_negative(o, "flush_lz4_acceleration", acceleration) {
                o.options.flush_lz4_acceleration = a;
            }
        })
    }
}

/// Block compression: one of `shale_no_compression`, `shale_snappy_compression`,
/// `shale_lz4_compression` (the default), `shale_zstd_compression`. Another code makes
/// `shale_open` fail.
///
/// # Safety
/// `options` is null or a live handle not used concurrently by another thread.
#[no_mangle]
pub unsafe extern "C" fn shale_options_set_compression(options: *mut ShaleOptions, code: i32) {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        with_options(options, |o| {
            o.options.compression = match code {
                SHALE_NO_COMPRESSION => Compression::None,
                SHALE_SNAPPY_COMPRESSION => Compression::Snappy,
                SHALE_LZ4_COMPRESSION => Compression::Lz4,
                SHALE_ZSTD_COMPRESSION => Compression::Zstd(3),
                other => {
                    let message = format!("unknown compression code {other}");
                    return o.rejected.reject("compression", message);
                }
            };
            o.rejected.accept("compression");
        })
    }
}

/// Sets a built-in merge operator by name: `"uint64add"` (little-endian u64 counters),
/// `"stringappend"` (joins operands with `,`) or `"max"` (bytewise largest). NULL removes it.
/// An unknown name makes `shale_open` fail.
///
/// # Safety
/// `options` is null or a live handle not used concurrently by another thread; `name` is null
/// or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn shale_options_set_merge_operator(
    options: *mut ShaleOptions,
    name: *const c_char,
) {
    // None: remove the operator. Some(Err): a name that cannot be used, reported at open.
    let chosen = if name.is_null() {
        None
    } else {
        // SAFETY: non-null and NUL-terminated by the contract.
        let name = unsafe { c_string(name, "merge operator name") }
            .map(|raw| String::from_utf8_lossy(raw).into_owned());
        Some(name.and_then(|name| {
            merge_operator_by_name(&name).ok_or_else(|| {
                format!("unknown merge operator {name:?} (built-in: uint64add, stringappend, max)")
            })
        }))
    };
    // SAFETY: forwarded from this function's contract.
    unsafe {
        with_options(options, |o| match chosen {
            Some(Err(message)) => o.rejected.reject("merge_operator", message),
            Some(Ok(operator)) => {
                o.options.merge_operator = Some(operator);
                o.rejected.accept("merge_operator");
            }
            None => {
                o.options.merge_operator = None;
                o.rejected.accept("merge_operator");
            }
        })
    }
}

/// `v` as a `T` if it is not negative (forgetting an earlier rejected value of option
/// `name`); otherwise records that option `name` must not be.
fn non_negative<T: TryFrom<i32>>(
    options: &mut ShaleOptions,
    name: &'static str,
    v: i32,
) -> Option<T> {
    let converted = T::try_from(v).ok();
    match converted {
        Some(_) => options.rejected.accept(name),
        None => options
            .rejected
            .reject(name, format!("{name} must not be negative, got {v}")),
    }
    converted
}

/// Creates read options: latest state, checksums verified, blocks cached, no bounds.
#[no_mangle]
pub extern "C" fn shale_readoptions_create() -> *mut ShaleReadOptions {
    guard_quiet(std::ptr::null_mut(), || {
        Box::into_raw(Box::<ShaleReadOptions>::default())
    })
}

/// Frees read options (and their hold on a snapshot). A null handle is ignored.
///
/// # Safety
/// `options` is null or a handle from [`shale_readoptions_create`] not yet destroyed; it is
/// not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn shale_readoptions_destroy(options: *mut ShaleReadOptions) {
    if !options.is_null() {
        // SAFETY: the handle came from Box::into_raw and is destroyed once by the contract.
        let handle = unsafe { Box::from_raw(options) };
        guard_quiet((), move || drop(handle));
    }
}

/// Runs `body` on the read options handle behind `options` if it is not null.
///
/// # Safety
/// `options` is null or a live handle not used concurrently by another thread.
unsafe fn with_read_handle(
    options: *mut ShaleReadOptions,
    body: impl FnOnce(&mut ShaleReadOptions),
) {
    // SAFETY: by the contract a non-null handle is live and exclusively ours for this call.
    if let Some(handle) = unsafe { options.as_mut() } {
        guard_quiet((), || body(handle));
    }
}

/// Runs `body` on the read options behind `options` if it is not null.
///
/// # Safety
/// `options` is null or a live handle not used concurrently by another thread.
unsafe fn with_read_options(options: *mut ShaleReadOptions, body: impl FnOnce(&mut ReadOptions)) {
    // SAFETY: forwarded from this function's contract.
    unsafe { with_read_handle(options, |handle| body(&mut handle.options)) }
}

/// Verify block checksums on reads (default: on).
///
/// # Safety
/// `options` is null or a live handle not used concurrently by another thread.
#[no_mangle]
pub unsafe extern "C" fn shale_readoptions_set_verify_checksums(
    options: *mut ShaleReadOptions,
    v: u8,
) {
    // SAFETY: forwarded from this function's contract.
    unsafe { with_read_options(options, |o| o.skip_checksums = v == 0) }
}

/// Insert blocks this read loads into the block cache (default: on; turn off for scans).
///
/// # Safety
/// `options` is null or a live handle not used concurrently by another thread.
#[no_mangle]
pub unsafe extern "C" fn shale_readoptions_set_fill_cache(options: *mut ShaleReadOptions, v: u8) {
    // SAFETY: forwarded from this function's contract.
    unsafe { with_read_options(options, |o| o.dont_fill_cache = v == 0) }
}

/// Read as of `snapshot` (NULL: the latest state). The read options hold their own reference,
/// so the snapshot stays pinned until they are destroyed or given another snapshot, even if
/// the caller releases its handle first.
///
/// # Safety
/// `options` is null or a live handle not used concurrently by another thread; `snapshot` is
/// null or a live handle from `shale_create_snapshot`.
#[no_mangle]
pub unsafe extern "C" fn shale_readoptions_set_snapshot(
    options: *mut ShaleReadOptions,
    snapshot: *const ShaleSnapshot,
) {
    // SAFETY: a non-null snapshot is a live handle by the contract.
    let snapshot = unsafe { snapshot.as_ref() }.map(|s| s.snapshot.clone());
    // SAFETY: forwarded from this function's contract.
    unsafe { with_read_options(options, |o| o.snapshot = snapshot) }
}

/// Iterators created with these options start at `key` (inclusive). NULL removes the bound;
/// a non-null key of length 0 is the empty key. The key is copied.
///
/// # Safety
/// `options` is null or a live handle not used concurrently by another thread; `key` is null
/// or points to `keylen` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn shale_readoptions_set_iterate_lower_bound(
    options: *mut ShaleReadOptions,
    key: *const c_char,
    keylen: usize,
) {
    // SAFETY: forwarded from this function's contract.
    let bound = unsafe { optional_bytes(key, keylen, "lower bound") };
    // SAFETY: forwarded from this function's contract.
    unsafe {
        with_read_handle(options, |o| match bound {
            Ok(bound) => {
                o.options.lower_bound = bound.map(<[u8]>::to_vec);
                o.rejected.accept("lower bound");
            }
            Err(message) => o
                .rejected
                .reject("lower bound", argument_detail(&message).to_string()),
        })
    }
}

/// Iterators created with these options stop before `key` (exclusive). NULL removes the
/// bound. The key is copied.
///
/// # Safety
/// `options` is null or a live handle not used concurrently by another thread; `key` is null
/// or points to `keylen` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn shale_readoptions_set_iterate_upper_bound(
    options: *mut ShaleReadOptions,
    key: *const c_char,
    keylen: usize,
) {
    // SAFETY: forwarded from this function's contract.
    let bound = unsafe { optional_bytes(key, keylen, "upper bound") };
    // SAFETY: forwarded from this function's contract.
    unsafe {
        with_read_handle(options, |o| match bound {
            Ok(bound) => {
                o.options.upper_bound = bound.map(<[u8]>::to_vec);
                o.rejected.accept("upper bound");
            }
            Err(message) => o
                .rejected
                .reject("upper bound", argument_detail(&message).to_string()),
        })
    }
}

/// Creates write options: no sync, WAL on.
#[no_mangle]
pub extern "C" fn shale_writeoptions_create() -> *mut ShaleWriteOptions {
    guard_quiet(std::ptr::null_mut(), || {
        Box::into_raw(Box::<ShaleWriteOptions>::default())
    })
}

/// Frees write options. A null handle is ignored.
///
/// # Safety
/// `options` is null or a handle from [`shale_writeoptions_create`] not yet destroyed; it is
/// not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn shale_writeoptions_destroy(options: *mut ShaleWriteOptions) {
    if !options.is_null() {
        // SAFETY: the handle came from Box::into_raw and is destroyed once by the contract.
        let handle = unsafe { Box::from_raw(options) };
        guard_quiet((), move || drop(handle));
    }
}

/// Runs `body` on the write options behind `options` if it is not null.
///
/// # Safety
/// `options` is null or a live handle not used concurrently by another thread.
unsafe fn with_write_options(
    options: *mut ShaleWriteOptions,
    body: impl FnOnce(&mut WriteOptions),
) {
    // SAFETY: by the contract a non-null handle is live and exclusively ours for this call.
    if let Some(handle) = unsafe { options.as_mut() } {
        guard_quiet((), || body(&mut handle.options));
    }
}

/// Sync the WAL before a write returns, so it survives power loss (default: off).
///
/// # Safety
/// `options` is null or a live handle not used concurrently by another thread.
#[no_mangle]
pub unsafe extern "C" fn shale_writeoptions_set_sync(options: *mut ShaleWriteOptions, v: u8) {
    // SAFETY: forwarded from this function's contract.
    unsafe { with_write_options(options, |o| o.sync = v != 0) }
}

/// Skip the WAL: faster, but the write is lost by a crash before its memtable is flushed
/// (default: off).
///
/// # Safety
/// `options` is null or a live handle not used concurrently by another thread.
#[no_mangle]
pub unsafe extern "C" fn shale_writeoptions_set_disable_wal(
    options: *mut ShaleWriteOptions,
    v: u8,
) {
    // SAFETY: forwarded from this function's contract.
    unsafe { with_write_options(options, |o| o.disable_wal = v != 0) }
}
