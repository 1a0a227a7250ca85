//! Declarations from `/usr/include/rocksdb/c.h` (RocksDB 7.8), only the functions the adapter
//! calls.
//!
//! Why a hand-written FFI and not the `rocksdb` crate: `librocksdb-sys` compiles RocksDB's
//! C++ sources (hundreds of files) on every clean build, which takes far too long on this
//! 2-core machine, and would benchmark a build other than Debian's library, which is the one
//! this comparison documents. The C API is stable; declaring the calls we use is small.
//!
//! Every function returning `char*` allocates with malloc and must be released with
//! `rocksdb_free`; `errptr` receives such a string on failure.

#![allow(non_camel_case_types)]

use libc::{c_char, c_int, c_uchar, size_t};

macro_rules! opaque {
    ($($name:ident),* $(,)?) => {
        $(
            /// An opaque handle of the C API.
            #[repr(C)]
            pub struct $name {
                _private: [u8; 0],
            }
        )*
    };
}

opaque!(
    rocksdb_t,
    rocksdb_options_t,
    rocksdb_block_based_table_options_t,
    rocksdb_readoptions_t,
    rocksdb_writeoptions_t,
    rocksdb_writebatch_t,
    rocksdb_iterator_t,
    rocksdb_cache_t,
    rocksdb_filterpolicy_t,
    rocksdb_pinnableslice_t,
);

/// `rocksdb_no_compression` from c.h.
pub const ROCKSDB_NO_COMPRESSION: c_int = 0;
/// `rocksdb_snappy_compression` from c.h.
pub const ROCKSDB_SNAPPY_COMPRESSION: c_int = 1;
/// `rocksdb_lz4_compression` from c.h.
pub const ROCKSDB_LZ4_COMPRESSION: c_int = 4;
/// `rocksdb_zstd_compression` from c.h.
pub const ROCKSDB_ZSTD_COMPRESSION: c_int = 7;
/// `InfoLogLevel::INFO_LEVEL`.
pub const ROCKSDB_INFO_LEVEL: c_int = 1;

#[link(name = "rocksdb")]
extern "C" {
    pub fn rocksdb_open(
        options: *const rocksdb_options_t,
        name: *const c_char,
        errptr: *mut *mut c_char,
    ) -> *mut rocksdb_t;
    pub fn rocksdb_close(db: *mut rocksdb_t);
    pub fn rocksdb_put(
        db: *mut rocksdb_t,
        options: *const rocksdb_writeoptions_t,
        key: *const c_char,
        keylen: size_t,
        val: *const c_char,
        vallen: size_t,
        errptr: *mut *mut c_char,
    );
    pub fn rocksdb_delete(
        db: *mut rocksdb_t,
        options: *const rocksdb_writeoptions_t,
        key: *const c_char,
        keylen: size_t,
        errptr: *mut *mut c_char,
    );
    pub fn rocksdb_merge(
        db: *mut rocksdb_t,
        options: *const rocksdb_writeoptions_t,
        key: *const c_char,
        keylen: size_t,
        val: *const c_char,
        vallen: size_t,
        errptr: *mut *mut c_char,
    );
    pub fn rocksdb_write(
        db: *mut rocksdb_t,
        options: *const rocksdb_writeoptions_t,
        batch: *mut rocksdb_writebatch_t,
        errptr: *mut *mut c_char,
    );
    pub fn rocksdb_get_pinned(
        db: *mut rocksdb_t,
        options: *const rocksdb_readoptions_t,
        key: *const c_char,
        keylen: size_t,
        errptr: *mut *mut c_char,
    ) -> *mut rocksdb_pinnableslice_t;
    pub fn rocksdb_pinnableslice_value(
        s: *const rocksdb_pinnableslice_t,
        vlen: *mut size_t,
    ) -> *const c_char;
    pub fn rocksdb_pinnableslice_destroy(s: *mut rocksdb_pinnableslice_t);
    pub fn rocksdb_create_iterator(
        db: *mut rocksdb_t,
        options: *const rocksdb_readoptions_t,
    ) -> *mut rocksdb_iterator_t;
    pub fn rocksdb_property_value(db: *mut rocksdb_t, propname: *const c_char) -> *mut c_char;
    pub fn rocksdb_compact_range(
        db: *mut rocksdb_t,
        start_key: *const c_char,
        start_key_len: size_t,
        limit_key: *const c_char,
        limit_key_len: size_t,
    );

    pub fn rocksdb_iter_destroy(it: *mut rocksdb_iterator_t);
    pub fn rocksdb_iter_valid(it: *const rocksdb_iterator_t) -> c_uchar;
    pub fn rocksdb_iter_seek_to_first(it: *mut rocksdb_iterator_t);
    pub fn rocksdb_iter_seek_to_last(it: *mut rocksdb_iterator_t);
    pub fn rocksdb_iter_seek(it: *mut rocksdb_iterator_t, k: *const c_char, klen: size_t);
    pub fn rocksdb_iter_seek_for_prev(it: *mut rocksdb_iterator_t, k: *const c_char, klen: size_t);
    pub fn rocksdb_iter_next(it: *mut rocksdb_iterator_t);
    pub fn rocksdb_iter_prev(it: *mut rocksdb_iterator_t);
    pub fn rocksdb_iter_key(it: *const rocksdb_iterator_t, klen: *mut size_t) -> *const c_char;
    pub fn rocksdb_iter_value(it: *const rocksdb_iterator_t, vlen: *mut size_t) -> *const c_char;
    pub fn rocksdb_iter_get_error(it: *const rocksdb_iterator_t, errptr: *mut *mut c_char);

    pub fn rocksdb_writebatch_create() -> *mut rocksdb_writebatch_t;
    pub fn rocksdb_writebatch_destroy(b: *mut rocksdb_writebatch_t);
    pub fn rocksdb_writebatch_put(
        b: *mut rocksdb_writebatch_t,
        key: *const c_char,
        klen: size_t,
        val: *const c_char,
        vlen: size_t,
    );
    pub fn rocksdb_writebatch_merge(
        b: *mut rocksdb_writebatch_t,
        key: *const c_char,
        klen: size_t,
        val: *const c_char,
        vlen: size_t,
    );
    pub fn rocksdb_writebatch_delete(
        b: *mut rocksdb_writebatch_t,
        key: *const c_char,
        klen: size_t,
    );

    pub fn rocksdb_options_create() -> *mut rocksdb_options_t;
    pub fn rocksdb_options_destroy(o: *mut rocksdb_options_t);
    pub fn rocksdb_options_set_create_if_missing(o: *mut rocksdb_options_t, v: c_uchar);
    pub fn rocksdb_options_set_info_log_level(o: *mut rocksdb_options_t, level: c_int);
    pub fn rocksdb_options_set_write_buffer_size(o: *mut rocksdb_options_t, s: size_t);
    pub fn rocksdb_options_set_max_write_buffer_number(o: *mut rocksdb_options_t, n: c_int);
    pub fn rocksdb_options_set_target_file_size_base(o: *mut rocksdb_options_t, s: u64);
    pub fn rocksdb_options_set_compression(o: *mut rocksdb_options_t, c: c_int);
    pub fn rocksdb_options_set_compression_per_level(
        o: *mut rocksdb_options_t,
        levels: *const c_int,
        num_levels: size_t,
    );
    pub fn rocksdb_options_set_uint64add_merge_operator(o: *mut rocksdb_options_t);
    pub fn rocksdb_options_set_num_levels(o: *mut rocksdb_options_t, n: c_int);
    pub fn rocksdb_options_set_level0_file_num_compaction_trigger(
        o: *mut rocksdb_options_t,
        n: c_int,
    );
    pub fn rocksdb_options_set_level0_slowdown_writes_trigger(o: *mut rocksdb_options_t, n: c_int);
    pub fn rocksdb_options_set_level0_stop_writes_trigger(o: *mut rocksdb_options_t, n: c_int);
    pub fn rocksdb_options_set_max_bytes_for_level_base(o: *mut rocksdb_options_t, n: u64);
    pub fn rocksdb_options_set_max_background_jobs(o: *mut rocksdb_options_t, n: c_int);
    pub fn rocksdb_options_set_max_subcompactions(o: *mut rocksdb_options_t, n: u32);
    pub fn rocksdb_options_set_block_based_table_factory(
        o: *mut rocksdb_options_t,
        t: *mut rocksdb_block_based_table_options_t,
    );

    pub fn rocksdb_block_based_options_create() -> *mut rocksdb_block_based_table_options_t;
    pub fn rocksdb_block_based_options_destroy(t: *mut rocksdb_block_based_table_options_t);
    pub fn rocksdb_block_based_options_set_block_size(
        t: *mut rocksdb_block_based_table_options_t,
        s: size_t,
    );
    pub fn rocksdb_block_based_options_set_block_cache(
        t: *mut rocksdb_block_based_table_options_t,
        c: *mut rocksdb_cache_t,
    );
    /// Takes ownership of the policy.
    pub fn rocksdb_block_based_options_set_filter_policy(
        t: *mut rocksdb_block_based_table_options_t,
        p: *mut rocksdb_filterpolicy_t,
    );
    pub fn rocksdb_filterpolicy_create_bloom_full(bits_per_key: f64)
        -> *mut rocksdb_filterpolicy_t;

    pub fn rocksdb_cache_create_lru(capacity: size_t) -> *mut rocksdb_cache_t;
    pub fn rocksdb_cache_destroy(c: *mut rocksdb_cache_t);

    pub fn rocksdb_readoptions_create() -> *mut rocksdb_readoptions_t;
    pub fn rocksdb_readoptions_destroy(o: *mut rocksdb_readoptions_t);
    pub fn rocksdb_writeoptions_create() -> *mut rocksdb_writeoptions_t;
    pub fn rocksdb_writeoptions_destroy(o: *mut rocksdb_writeoptions_t);
    pub fn rocksdb_writeoptions_set_sync(o: *mut rocksdb_writeoptions_t, v: c_uchar);
    pub fn rocksdb_writeoptions_disable_WAL(o: *mut rocksdb_writeoptions_t, disable: c_int);

    pub fn rocksdb_free(ptr: *mut libc::c_void);
}
