//! Declarations from `/usr/include/lmdb.h` (LMDB 0.9.24), only the functions the adapter
//! calls.
//!
//! Why not a binding crate: `lmdb-sys` and `lmdb-rkv-sys` ask pkg-config for `liblmdb`, but
//! Debian ships the file as `lmdb.pc`, so they silently compile their own vendored copy of
//! LMDB instead of linking the system library; `heed` (through `lmdb-master-sys`) always
//! compiles its bundled `mdb.master` branch. Either way the benchmark would measure a
//! different LMDB than Debian's. The C API is small and has not changed in years.

#![allow(non_camel_case_types)]

use libc::{c_char, c_int, c_uint, c_void, size_t};

/// `MDB_env`: an environment (one memory map).
#[repr(C)]
pub struct MDB_env {
    _private: [u8; 0],
}
/// `MDB_txn`: a transaction.
#[repr(C)]
pub struct MDB_txn {
    _private: [u8; 0],
}
/// `MDB_cursor`: a cursor in one transaction.
#[repr(C)]
pub struct MDB_cursor {
    _private: [u8; 0],
}
/// `MDB_dbi`: a database handle inside an environment.
pub type MDB_dbi = c_uint;

/// `MDB_val`: a byte string passed to or returned by LMDB.
#[repr(C)]
pub struct MDB_val {
    pub mv_size: size_t,
    pub mv_data: *mut c_void,
}

/// `MDB_stat`.
#[repr(C)]
#[derive(Default)]
pub struct MDB_stat {
    pub ms_psize: c_uint,
    pub ms_depth: c_uint,
    pub ms_branch_pages: size_t,
    pub ms_leaf_pages: size_t,
    pub ms_overflow_pages: size_t,
    pub ms_entries: size_t,
}

/// `MDB_envinfo`.
#[repr(C)]
pub struct MDB_envinfo {
    pub me_mapaddr: *mut c_void,
    pub me_mapsize: size_t,
    pub me_last_pgno: size_t,
    pub me_last_txnid: size_t,
    pub me_maxreaders: c_uint,
    pub me_numreaders: c_uint,
}

/// Environment flag: do not fsync after commit.
pub const MDB_NOSYNC: c_uint = 0x10000;
/// Environment flag: do not fsync the meta page after commit.
pub const MDB_NOMETASYNC: c_uint = 0x40000;
/// Transaction flag: read-only.
pub const MDB_RDONLY: c_uint = 0x20000;
/// `mdb_get`/`mdb_del`/cursor result: no such key.
pub const MDB_NOTFOUND: c_int = -30798;

/// `MDB_cursor_op` values used here.
pub const MDB_FIRST: c_int = 0;

pub const MDB_LAST: c_int = 6;
pub const MDB_NEXT: c_int = 8;
pub const MDB_PREV: c_int = 12;
pub const MDB_SET_RANGE: c_int = 17;

#[link(name = "lmdb")]
extern "C" {
    pub fn mdb_version(major: *mut c_int, minor: *mut c_int, patch: *mut c_int) -> *mut c_char;
    pub fn mdb_strerror(err: c_int) -> *mut c_char;
    pub fn mdb_env_create(env: *mut *mut MDB_env) -> c_int;
    pub fn mdb_env_open(
        env: *mut MDB_env,
        path: *const c_char,
        flags: c_uint,
        mode: libc::mode_t,
    ) -> c_int;
    pub fn mdb_env_close(env: *mut MDB_env);
    pub fn mdb_env_set_mapsize(env: *mut MDB_env, size: size_t) -> c_int;
    pub fn mdb_env_set_maxreaders(env: *mut MDB_env, readers: c_uint) -> c_int;
    pub fn mdb_env_sync(env: *mut MDB_env, force: c_int) -> c_int;
    pub fn mdb_env_stat(env: *mut MDB_env, stat: *mut MDB_stat) -> c_int;
    pub fn mdb_env_info(env: *mut MDB_env, info: *mut MDB_envinfo) -> c_int;

    pub fn mdb_txn_begin(
        env: *mut MDB_env,
        parent: *mut MDB_txn,
        flags: c_uint,
        txn: *mut *mut MDB_txn,
    ) -> c_int;
    pub fn mdb_txn_commit(txn: *mut MDB_txn) -> c_int;
    pub fn mdb_txn_abort(txn: *mut MDB_txn);

    pub fn mdb_dbi_open(
        txn: *mut MDB_txn,
        name: *const c_char,
        flags: c_uint,
        dbi: *mut MDB_dbi,
    ) -> c_int;
    pub fn mdb_get(txn: *mut MDB_txn, dbi: MDB_dbi, key: *mut MDB_val, data: *mut MDB_val)
        -> c_int;
    pub fn mdb_put(
        txn: *mut MDB_txn,
        dbi: MDB_dbi,
        key: *mut MDB_val,
        data: *mut MDB_val,
        flags: c_uint,
    ) -> c_int;
    pub fn mdb_del(txn: *mut MDB_txn, dbi: MDB_dbi, key: *mut MDB_val, data: *mut MDB_val)
        -> c_int;

    pub fn mdb_cursor_open(txn: *mut MDB_txn, dbi: MDB_dbi, cursor: *mut *mut MDB_cursor) -> c_int;
    pub fn mdb_cursor_close(cursor: *mut MDB_cursor);
    pub fn mdb_cursor_get(
        cursor: *mut MDB_cursor,
        key: *mut MDB_val,
        data: *mut MDB_val,
        op: c_int,
    ) -> c_int;
}
