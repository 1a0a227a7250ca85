//! Rust-side tests of the exported functions, called as C would call them.

use std::ffi::{c_char, CStr, CString};

use super::*;

/// Takes the message out of `err` (freeing it), or `None` if no error was set.
fn take_error(err: &mut *mut c_char) -> Option<String> {
    if err.is_null() {
        return None;
    }
    // SAFETY: the API stores NUL-terminated malloc'd strings.
    let text = unsafe { CStr::from_ptr(*err) }
        .to_string_lossy()
        .into_owned();
    // SAFETY: freed once, here.
    unsafe { shale_free((*err).cast()) };
    *err = std::ptr::null_mut();
    Some(text)
}

fn no_error(err: &mut *mut c_char) {
    if let Some(message) = take_error(err) {
        panic!("unexpected error: {message}");
    }
}

fn c_path(dir: &tempfile::TempDir) -> CString {
    CString::new(dir.path().join("db").to_str().expect("utf-8 temp path")).expect("no NUL")
}

/// Opens a database in a fresh directory with the given options (NULL for the defaults).
fn open(dir: &tempfile::TempDir, options: *const ShaleOptions) -> *mut ShaleDb {
    let path = c_path(dir);
    let mut err = std::ptr::null_mut();
    // SAFETY: valid path, options handle or NULL, and error slot.
    let db = unsafe { shale_open(path.as_ptr(), options, &mut err) };
    no_error(&mut err);
    assert!(!db.is_null());
    db
}

fn put(db: *mut ShaleDb, key: &[u8], value: &[u8]) {
    let mut err = std::ptr::null_mut();
    // SAFETY: live handle, slices valid for the call.
    unsafe {
        shale_put(
            db,
            std::ptr::null(),
            key.as_ptr().cast(),
            key.len(),
            value.as_ptr().cast(),
            value.len(),
            &mut err,
        )
    };
    no_error(&mut err);
}

/// `shale_get` as a Rust result: `Ok(None)` when missing.
fn get_with(
    db: *mut ShaleDb,
    options: *const ShaleReadOptions,
    key: &[u8],
) -> Result<Option<Vec<u8>>, String> {
    let mut err = std::ptr::null_mut();
    let mut len = usize::MAX;
    // SAFETY: live handles, slices valid for the call.
    let value = unsafe {
        shale_get(
            db,
            options,
            key.as_ptr().cast(),
            key.len(),
            &mut len,
            &mut err,
        )
    };
    if let Some(message) = take_error(&mut err) {
        assert!(value.is_null());
        assert_eq!(len, 0);
        return Err(message);
    }
    if value.is_null() {
        assert_eq!(len, 0);
        return Ok(None);
    }
    // SAFETY: shale_get returned `len` bytes at `value`.
    let bytes = unsafe { std::slice::from_raw_parts(value.cast::<u8>(), len) }.to_vec();
    // SAFETY: malloc'd by the API, freed once.
    unsafe { shale_free(value.cast()) };
    Ok(Some(bytes))
}

fn get(db: *mut ShaleDb, key: &[u8]) -> Option<Vec<u8>> {
    get_with(db, std::ptr::null(), key).expect("get")
}

/// Every key the iterator yields walking forwards from the first entry.
fn keys(iter: *mut ShaleIterator) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    // SAFETY: a live iterator handle; key pointers are read before the next move.
    unsafe {
        shale_iter_seek_to_first(iter);
        while shale_iter_valid(iter) != 0 {
            let mut len = 0;
            let key = shale_iter_key(iter, &mut len);
            out.push(std::slice::from_raw_parts(key.cast::<u8>(), len).to_vec());
            shale_iter_next(iter);
        }
    }
    out
}

#[test]
fn put_get_delete_round_trip_and_empty_values() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(&dir, std::ptr::null());
    put(db, b"k1", b"v1");
    put(db, b"", b"");
    assert_eq!(get(db, b"k1"), Some(b"v1".to_vec()));
    assert_eq!(get(db, b""), Some(Vec::new()), "empty key, empty value");
    assert_eq!(get(db, b"absent"), None);

    let mut err = std::ptr::null_mut();
    let sync = shale_writeoptions_create();
    // SAFETY: live handles, a static key.
    unsafe {
        shale_writeoptions_set_sync(sync, 1);
        shale_delete(db, sync, c"k1".as_ptr(), 2, &mut err);
        shale_writeoptions_destroy(sync);
    }
    no_error(&mut err);
    assert_eq!(get(db, b"k1"), None);
    // SAFETY: closed once.
    unsafe { shale_close(db) };
}

#[test]
fn null_arguments_are_reported_not_dereferenced() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(&dir, std::ptr::null());
    let mut err = std::ptr::null_mut();
    let mut len = 0usize;
    // SAFETY: every NULL below is one the contract allows; the functions must check it.
    unsafe {
        shale_put(
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
            0,
            std::ptr::null(),
            0,
            &mut err,
        );
        assert!(take_error(&mut err)
            .expect("error")
            .contains("database handle is NULL"));

        shale_put(
            db,
            std::ptr::null(),
            std::ptr::null(),
            4,
            std::ptr::null(),
            0,
            &mut err,
        );
        assert!(take_error(&mut err).expect("error").contains("key is NULL"));

        shale_merge(
            db,
            std::ptr::null(),
            c"k".as_ptr(),
            1,
            std::ptr::null(),
            8,
            &mut err,
        );
        assert!(take_error(&mut err)
            .expect("error")
            .contains("merge operand is NULL"));

        let value = shale_get(
            db,
            std::ptr::null(),
            c"k".as_ptr(),
            1,
            std::ptr::null_mut(),
            &mut err,
        );
        assert!(value.is_null());
        assert!(take_error(&mut err)
            .expect("error")
            .contains("vallen is NULL"));

        let value = shale_get(
            std::ptr::null_mut(),
            std::ptr::null(),
            c"k".as_ptr(),
            1,
            &mut len,
            &mut err,
        );
        assert!(value.is_null());
        assert!(take_error(&mut err).is_some());

        assert!(shale_iter_value(std::ptr::null(), &mut len).is_null());
        assert_eq!(len, 0);
        shale_iter_seek(std::ptr::null_mut(), std::ptr::null(), 5);
        shale_free(std::ptr::null_mut());
        shale_writeoptions_set_sync(std::ptr::null_mut(), 1);

        shale_write(db, std::ptr::null(), std::ptr::null_mut(), &mut err);
        assert!(take_error(&mut err)
            .expect("error")
            .contains("write batch is NULL"));

        shale_flush(std::ptr::null_mut(), &mut err);
        assert!(take_error(&mut err).is_some());

        shale_iter_get_error(std::ptr::null(), &mut err);
        assert!(take_error(&mut err)
            .expect("error")
            .contains("iterator is NULL"));

        // Without an error slot, failures are silent but still safe.
        shale_put(
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
            0,
            std::ptr::null(),
            0,
            std::ptr::null_mut(),
        );

        assert!(shale_create_iterator(std::ptr::null_mut(), std::ptr::null()).is_null());
        assert!(shale_create_snapshot(std::ptr::null_mut()).is_null());
        assert!(shale_property_value(db, std::ptr::null()).is_null());
        assert!(shale_property_value(std::ptr::null_mut(), c"shale.stats".as_ptr()).is_null());
        assert_eq!(shale_iter_valid(std::ptr::null()), 0);
        assert!(shale_iter_key(std::ptr::null(), &mut len).is_null());
        assert_eq!(len, 0);
        assert_eq!(shale_writebatch_count(std::ptr::null()), 0);
        shale_iter_next(std::ptr::null_mut());
        shale_writebatch_put(std::ptr::null_mut(), c"k".as_ptr(), 1, c"v".as_ptr(), 1);
        shale_options_set_compression(std::ptr::null_mut(), 1);
        shale_readoptions_set_snapshot(std::ptr::null_mut(), std::ptr::null());
        shale_close(db);
    }
}

#[test]
fn an_error_replaces_an_earlier_unfreed_message() {
    let mut err = std::ptr::null_mut();
    // SAFETY: NULL handles are reported; the second call frees the first message.
    unsafe {
        shale_flush(std::ptr::null_mut(), &mut err);
        assert!(!err.is_null());
        shale_open(std::ptr::null(), std::ptr::null(), &mut err);
    }
    assert!(take_error(&mut err)
        .expect("error")
        .contains("path is NULL"));
}

/// A setter applied to a fresh options handle.
type SetOption = fn(*mut ShaleOptions);

#[test]
fn invalid_options_fail_at_open_with_a_message() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = c_path(&dir);
    let attempts: [(&str, SetOption); 7] = [
        ("unknown merge operator \"sum\"", |o| {
            // SAFETY: a live handle and a static string.
            unsafe { shale_options_set_merge_operator(o, c"sum".as_ptr()) }
        }),
        ("unknown compression code 9", |o| {
            // SAFETY: a live handle.
            unsafe { shale_options_set_compression(o, 9) }
        }),
        ("bloom_bits_per_key must not be negative", |o| {
            // SAFETY: a live handle.
            unsafe { shale_options_set_bloom_bits_per_key(o, -1) }
        }),
        ("max_open_files must not be negative", |o| {
            // SAFETY: a live handle.
            unsafe { shale_options_set_max_open_files(o, -5) }
        }),
        ("write_buffer_size must be at least 4 KiB", |o| {
            // SAFETY: a live handle.
            unsafe { shale_options_set_write_buffer_size(o, 10) }
        }),
        ("flush_lz4_acceleration must not be negative", |o| {
            // SAFETY: a live handle.
            unsafe { shale_options_set_flush_lz4_acceleration(o, -1) }
        }),
        ("flush_lz4_acceleration must be between 1 and 65537", |o| {
            // SAFETY: a live handle.
            unsafe { shale_options_set_flush_lz4_acceleration(o, 0) }
        }),
    ];
    for (expected, set) in attempts {
        let options = shale_options_create();
        set(options);
        let mut err = std::ptr::null_mut();
        // SAFETY: valid path, live options, error slot.
        let db = unsafe { shale_open(path.as_ptr(), options, &mut err) };
        assert!(db.is_null());
        let message = take_error(&mut err).expect("open fails");
        assert!(message.contains(expected), "{message:?} lacks {expected:?}");
        // SAFETY: destroyed once.
        unsafe { shale_options_destroy(options) };
    }
}

#[test]
fn every_builtin_merge_operator_by_name() {
    for (name, operands, expected) in [
        (
            "uint64add",
            vec![2u64.to_le_bytes().to_vec(), 40u64.to_le_bytes().to_vec()],
            42u64.to_le_bytes().to_vec(),
        ),
        (
            "stringappend",
            vec![b"a".to_vec(), b"b".to_vec()],
            b"a,b".to_vec(),
        ),
        (
            "max",
            vec![b"m".to_vec(), b"z".to_vec(), b"c".to_vec()],
            b"z".to_vec(),
        ),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let options = shale_options_create();
        let c_name = CString::new(name).expect("no NUL");
        // SAFETY: live handle, NUL-terminated name.
        unsafe { shale_options_set_merge_operator(options, c_name.as_ptr()) };
        let db = open(&dir, options);
        // SAFETY: destroyed once; the database does not keep the handle.
        unsafe { shale_options_destroy(options) };
        for operand in &operands {
            let mut err = std::ptr::null_mut();
            // SAFETY: live handle, slices valid for the call.
            unsafe {
                shale_merge(
                    db,
                    std::ptr::null(),
                    c"k".as_ptr(),
                    1,
                    operand.as_ptr().cast(),
                    operand.len(),
                    &mut err,
                )
            };
            no_error(&mut err);
        }
        assert_eq!(get(db, b"k"), Some(expected), "{name}");
        // SAFETY: closed once.
        unsafe { shale_close(db) };
    }
}

#[test]
fn merge_without_an_operator_is_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(&dir, std::ptr::null());
    let mut err = std::ptr::null_mut();
    // SAFETY: live handle, static strings.
    unsafe {
        shale_merge(
            db,
            std::ptr::null(),
            c"k".as_ptr(),
            1,
            c"v".as_ptr(),
            1,
            &mut err,
        )
    };
    let message = take_error(&mut err).expect("merge fails");
    assert!(message.contains("merge"), "{message}");
    // SAFETY: closed once.
    unsafe { shale_close(db) };
}

#[test]
fn batches_are_atomic_and_reusable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(&dir, std::ptr::null());
    put(db, b"gone", b"x");
    let batch = shale_writebatch_create();
    let mut err = std::ptr::null_mut();
    // SAFETY: live handles, static strings.
    unsafe {
        shale_writebatch_put(batch, c"a".as_ptr(), 1, c"1".as_ptr(), 1);
        shale_writebatch_put(batch, c"b".as_ptr(), 1, c"2".as_ptr(), 1);
        shale_writebatch_delete(batch, c"gone".as_ptr(), 4);
        assert_eq!(shale_writebatch_count(batch), 3);
        shale_write(db, std::ptr::null(), batch, &mut err);
    }
    no_error(&mut err);
    assert_eq!(get(db, b"a"), Some(b"1".to_vec()));
    assert_eq!(get(db, b"b"), Some(b"2".to_vec()));
    assert_eq!(get(db, b"gone"), None);
    // SAFETY: live handles; the batch is unchanged by the write and reused.
    unsafe {
        assert_eq!(shale_writebatch_count(batch), 3);
        shale_writebatch_clear(batch);
        assert_eq!(shale_writebatch_count(batch), 0);
        shale_writebatch_put(batch, c"a".as_ptr(), 1, c"one".as_ptr(), 3);
        shale_write(db, std::ptr::null(), batch, &mut err);
        shale_writebatch_destroy(batch);
    }
    no_error(&mut err);
    assert_eq!(get(db, b"a"), Some(b"one".to_vec()));
    // SAFETY: closed once.
    unsafe { shale_close(db) };
}

#[test]
fn snapshots_iterators_and_bounds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(&dir, std::ptr::null());
    for key in [b"a", b"b", b"c", b"d"] {
        put(db, key, b"old");
    }
    // SAFETY: live handles throughout; each is destroyed once at the end.
    unsafe {
        let snapshot = shale_create_snapshot(db);
        put(db, b"e", b"new");
        put(db, b"a", b"new");

        let at_snapshot = shale_readoptions_create();
        shale_readoptions_set_snapshot(at_snapshot, snapshot);
        shale_release_snapshot(db, snapshot);
        assert_eq!(get_with(db, at_snapshot, b"a"), Ok(Some(b"old".to_vec())));
        assert_eq!(get_with(db, at_snapshot, b"e"), Ok(None));
        assert_eq!(get(db, b"a"), Some(b"new".to_vec()));

        let iter = shale_create_iterator(db, at_snapshot);
        assert_eq!(
            keys(iter),
            vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec(), b"d".to_vec()]
        );
        shale_iter_destroy(iter);

        let bounded = shale_readoptions_create();
        shale_readoptions_set_iterate_lower_bound(bounded, c"b".as_ptr(), 1);
        shale_readoptions_set_iterate_upper_bound(bounded, c"e".as_ptr(), 1);
        let iter = shale_create_iterator(db, bounded);
        assert_eq!(
            keys(iter),
            vec![b"b".to_vec(), b"c".to_vec(), b"d".to_vec()]
        );
        shale_iter_seek_to_last(iter);
        let mut len = 0;
        let key = shale_iter_key(iter, &mut len);
        assert_eq!(std::slice::from_raw_parts(key.cast::<u8>(), len), b"d");
        let value = shale_iter_value(iter, &mut len);
        assert_eq!(std::slice::from_raw_parts(value.cast::<u8>(), len), b"old");
        shale_iter_prev(iter);
        let key = shale_iter_key(iter, &mut len);
        assert_eq!(std::slice::from_raw_parts(key.cast::<u8>(), len), b"c");
        shale_iter_seek(iter, c"z".as_ptr(), 1);
        assert_eq!(shale_iter_valid(iter), 0);
        assert!(shale_iter_value(iter, &mut len).is_null());
        let mut err = std::ptr::null_mut();
        shale_iter_get_error(iter, &mut err);
        no_error(&mut err);
        shale_iter_destroy(iter);

        // Removing the bounds with NULL.
        shale_readoptions_set_iterate_lower_bound(bounded, std::ptr::null(), 0);
        shale_readoptions_set_iterate_upper_bound(bounded, std::ptr::null(), 0);
        let iter = shale_create_iterator(db, bounded);
        assert_eq!(keys(iter).len(), 5);
        shale_iter_destroy(iter);

        shale_readoptions_destroy(bounded);
        shale_readoptions_destroy(at_snapshot);
        shale_close(db);
    }
}

#[test]
fn unusable_read_options_fail_reads_and_iterators() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(&dir, std::ptr::null());
    put(db, b"k", b"v");
    // SAFETY: live handles; the impossible length is rejected before any byte is read.
    unsafe {
        let bad = shale_readoptions_create();
        shale_readoptions_set_iterate_lower_bound(bad, c"x".as_ptr(), usize::MAX);
        let message = get_with(db, bad, b"k").expect_err("get fails");
        assert!(message.contains("lower bound length"), "{message}");
        let iter = shale_create_iterator(db, bad);
        assert!(!iter.is_null());
        shale_iter_seek_to_first(iter);
        assert_eq!(shale_iter_valid(iter), 0);
        let mut err = std::ptr::null_mut();
        shale_iter_get_error(iter, &mut err);
        assert!(take_error(&mut err)
            .expect("error")
            .contains("lower bound length"));
        shale_iter_destroy(iter);
        shale_readoptions_destroy(bad);
        shale_close(db);
    }
}

#[test]
fn properties_flush_compaction_and_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(&dir, std::ptr::null());
    for i in 0..100u32 {
        put(db, format!("key{i:03}").as_bytes(), &i.to_le_bytes());
    }
    let mut err = std::ptr::null_mut();
    // SAFETY: live handles, static strings; returned strings are freed once.
    unsafe {
        shale_flush(db, &mut err);
        no_error(&mut err);
        shale_compact_range(db, c"key010".as_ptr(), 6, std::ptr::null(), 0, &mut err);
        no_error(&mut err);
        let sequence = shale_property_value(db, c"shale.last-sequence".as_ptr());
        assert_eq!(CStr::from_ptr(sequence).to_str(), Ok("100"));
        shale_free(sequence.cast());
        assert!(shale_property_value(db, c"shale.nope".as_ptr()).is_null());
        shale_close(db);
    }
    let db = open(&dir, std::ptr::null());
    assert_eq!(get(db, b"key042"), Some(42u32.to_le_bytes().to_vec()));
    // SAFETY: closed once, then the closed database is destroyed.
    unsafe {
        shale_close(db);
        let path = c_path(&dir);
        shale_destroy_db(path.as_ptr(), std::ptr::null(), &mut err);
        no_error(&mut err);
        shale_repair_db(path.as_ptr(), std::ptr::null(), &mut err);
        assert!(take_error(&mut err)
            .expect("nothing to repair")
            .contains("does not exist"));
    }
}

/// The bytes at `ptr` (from `shale_iter_key`/`shale_iter_value`), checking that a valid
/// iterator never hands out NULL.
///
/// # Safety
/// `ptr` points to `len` readable bytes.
unsafe fn slice_at<'a>(ptr: *const c_char, len: usize) -> &'a [u8] {
    assert!(!ptr.is_null());
    // SAFETY: forwarded from this function's contract.
    unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) }
}

#[test]
fn option_errors_are_cleared_by_a_later_valid_value() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = c_path(&dir);
    let options = shale_options_create();
    let mut err = std::ptr::null_mut();
    // SAFETY: live handles, static strings; every opened database is closed once.
    unsafe {
        shale_options_set_compression(options, 9);
        shale_options_set_max_open_files(options, -1);
        shale_options_set_merge_operator(options, c"sum".as_ptr());
        // Correcting two of three: the third still makes open fail, alone.
        shale_options_set_compression(options, SHALE_ZSTD_COMPRESSION);
        shale_options_set_merge_operator(options, std::ptr::null());
        assert!(shale_open(path.as_ptr(), options, &mut err).is_null());
        let message = take_error(&mut err).expect("open fails");
        assert_eq!(
            message,
            "invalid argument: max_open_files must not be negative, got -1"
        );
        shale_options_set_max_open_files(options, 100);
        shale_options_set_merge_operator(options, c"max".as_ptr());
        let db = shale_open(path.as_ptr(), options, &mut err);
        no_error(&mut err);
        assert!(!db.is_null());
        shale_options_destroy(options);

        let read = shale_readoptions_create();
        shale_readoptions_set_iterate_lower_bound(read, c"a".as_ptr(), usize::MAX);
        shale_readoptions_set_iterate_upper_bound(read, c"z".as_ptr(), usize::MAX);
        shale_readoptions_set_iterate_lower_bound(read, std::ptr::null(), 0);
        let message = get_with(db, read, b"k").expect_err("the upper bound is still bad");
        assert!(message.contains("upper bound length"), "{message}");
        assert!(!message.contains("lower bound"), "{message}");
        shale_readoptions_set_iterate_upper_bound(read, c"z".as_ptr(), 1);
        put(db, b"k", b"v");
        assert_eq!(get_with(db, read, b"k"), Ok(Some(b"v".to_vec())));
        let iter = shale_create_iterator(db, read);
        assert_eq!(keys(iter), vec![b"k".to_vec()]);
        shale_iter_destroy(iter);
        shale_readoptions_destroy(read);
        shale_close(db);
    }
}

#[test]
fn a_batch_entry_that_could_not_be_added_fails_the_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(&dir, std::ptr::null());
    let batch = shale_writebatch_create();
    let mut err = std::ptr::null_mut();
    // SAFETY: live handles, static strings; NULL pointers are rejected before any read.
    unsafe {
        shale_writebatch_put(batch, c"a".as_ptr(), 1, c"1".as_ptr(), 1);
        shale_writebatch_delete(batch, c"b".as_ptr(), 1);
        shale_writebatch_merge(batch, c"c".as_ptr(), 1, std::ptr::null(), 8);
        shale_writebatch_put(batch, std::ptr::null(), 3, c"v".as_ptr(), 1);
        shale_writebatch_put(batch, c"d".as_ptr(), 1, c"4".as_ptr(), 1);
        assert_eq!(
            shale_writebatch_count(batch),
            3,
            "the bad entries are not added"
        );
        shale_write(db, std::ptr::null(), batch, &mut err);
    }
    assert_eq!(
        take_error(&mut err).as_deref(),
        Some("invalid argument: write batch entry 2 (merge): value is NULL but its length is 8")
    );
    assert_eq!(get(db, b"a"), None, "nothing of the batch was applied");
    assert_eq!(get(db, b"d"), None, "nothing of the batch was applied");
    // SAFETY: live handles; clearing forgets the bad entry, so the batch is usable again.
    unsafe {
        shale_writebatch_clear(batch);
        shale_writebatch_put(batch, c"a".as_ptr(), 1, c"1".as_ptr(), 1);
        shale_write(db, std::ptr::null(), batch, &mut err);
        shale_writebatch_destroy(batch);
    }
    no_error(&mut err);
    assert_eq!(get(db, b"a"), Some(b"1".to_vec()));
    // SAFETY: closed once.
    unsafe { shale_close(db) };
}

#[test]
fn a_seek_key_that_cannot_be_read_is_an_iterator_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(&dir, std::ptr::null());
    put(db, b"a", b"1");
    put(db, b"b", b"2");
    let mut err = std::ptr::null_mut();
    let mut len = 0usize;
    // SAFETY: live handles; the NULL key is rejected before any read.
    unsafe {
        let iter = shale_create_iterator(db, std::ptr::null());
        shale_iter_seek_to_first(iter);
        assert_eq!(shale_iter_valid(iter), 1);
        shale_iter_seek(iter, std::ptr::null(), 5);
        assert_eq!(shale_iter_valid(iter), 0, "a bad seek leaves no position");
        assert!(shale_iter_key(iter, &mut len).is_null());
        shale_iter_next(iter);
        assert_eq!(
            shale_iter_valid(iter),
            0,
            "moving after a bad seek does nothing"
        );
        shale_iter_get_error(iter, &mut err);
        assert_eq!(
            take_error(&mut err).as_deref(),
            Some(
                "invalid argument: shale_iter_seek: key is NULL but its length is 5 \
                 (expected a pointer to 5 readable bytes, or a length of 0)"
            )
        );
        shale_iter_seek_for_prev(iter, std::ptr::null(), 2);
        shale_iter_get_error(iter, &mut err);
        let message = take_error(&mut err).expect("error");
        assert!(
            message.contains("shale_iter_seek_for_prev: key is NULL"),
            "{message}"
        );

        // The next positioning call clears the error.
        shale_iter_seek(iter, c"b".as_ptr(), 1);
        assert_eq!(slice_at(shale_iter_key(iter, &mut len), len), b"b");
        shale_iter_get_error(iter, &mut err);
        no_error(&mut err);

        // Seeking to the iterator's own current key: the target points into the iterator.
        let current = shale_iter_key(iter, &mut len);
        shale_iter_seek(iter, current, len);
        assert_eq!(slice_at(shale_iter_key(iter, &mut len), len), b"b");
        let current = shale_iter_key(iter, &mut len);
        shale_iter_seek_for_prev(iter, current, len);
        assert_eq!(slice_at(shale_iter_key(iter, &mut len), len), b"b");
        shale_iter_destroy(iter);
        shale_close(db);
    }
}

#[test]
fn empty_keys_and_values_are_valid_pointers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(&dir, std::ptr::null());
    put(db, b"", b"");
    let mut klen = usize::MAX;
    let mut vlen = usize::MAX;
    // SAFETY: live handles; the pointers are compared, and read with length 0 only.
    unsafe {
        let iter = shale_create_iterator(db, std::ptr::null());
        shale_iter_seek_to_first(iter);
        assert_eq!(shale_iter_valid(iter), 1);
        let key = shale_iter_key(iter, &mut klen);
        let value = shale_iter_value(iter, &mut vlen);
        assert_eq!((klen, vlen), (0, 0));
        let empty: *const c_char = std::ptr::from_ref(&crate::iter::EMPTY).cast();
        assert_eq!(key, empty, "an empty key points to the static byte");
        assert_eq!(value, empty, "an empty value points to the static byte");
        shale_iter_destroy(iter);
        shale_close(db);
    }
}

#[test]
fn a_value_that_cannot_be_read_is_an_iterator_error_not_an_empty_value() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(&dir, std::ptr::null());
    // Large enough to be kept in a blob file (the default threshold is 16 KiB).
    let big = vec![b'v'; 64 * 1024];
    put(db, b"big", &big);
    put(db, b"small", b"s");
    let mut err = std::ptr::null_mut();
    // SAFETY: a live handle, closed once.
    unsafe {
        shale_flush(db, &mut err);
        no_error(&mut err);
        shale_close(db);
    }
    let blob = std::fs::read_dir(dir.path().join("db"))
        .expect("list the database")
        .map(|entry| entry.expect("directory entry").path())
        .find(|path| path.extension().is_some_and(|e| e == "blob"))
        .expect("a blob file");
    let mut bytes = std::fs::read(&blob).expect("read the blob file");
    // Inside the value (after the 20-byte file header, the 17-byte record header and the
    // key; the file may end in zeros past the record): its checksum no longer matches.
    let inside = 20 + 17 + b"big".len() + big.len() / 2;
    bytes[inside] ^= 0x40;
    std::fs::write(&blob, bytes).expect("write the blob file");

    let options = shale_options_create();
    // SAFETY: a live handle.
    unsafe {
        shale_options_set_create_if_missing(options, 0);
        shale_options_set_block_cache_capacity(options, 0);
    }
    let db = open(&dir, options);
    let mut len = usize::MAX;
    // SAFETY: live handles, each destroyed once.
    unsafe {
        shale_options_destroy(options);
        let iter = shale_create_iterator(db, std::ptr::null());
        shale_iter_seek_to_first(iter);
        assert_eq!(
            shale_iter_valid(iter),
            1,
            "keys are readable without their values"
        );
        assert_eq!(slice_at(shale_iter_key(iter, &mut len), len), b"big");
        assert!(shale_iter_value(iter, &mut len).is_null());
        assert_eq!(len, 0);
        assert_eq!(
            shale_iter_valid(iter),
            0,
            "the failed read ends the iteration"
        );
        assert!(shale_iter_key(iter, &mut len).is_null());
        shale_iter_get_error(iter, &mut err);
        let message = take_error(&mut err).expect("the failed read is reported");
        assert!(message.contains(".blob"), "{message}");

        // Another entry still reads after a fresh seek.
        shale_iter_seek(iter, c"small".as_ptr(), 5);
        assert_eq!(slice_at(shale_iter_value(iter, &mut len), len), b"s");
        shale_iter_get_error(iter, &mut err);
        no_error(&mut err);
        shale_iter_destroy(iter);
        shale_close(db);
    }
}
