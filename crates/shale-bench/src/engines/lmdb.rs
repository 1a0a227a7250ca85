//! LMDB, from Debian's `liblmdb` through the thin FFI in `lmdb/ffi.rs`.
//!
//! Configured as Symas' microbenchmark does: a large map (address space only; the file
//! grows with the data), `MDB_NOSYNC | MDB_NOMETASYNC` for asynchronous runs and LMDB's
//! default full sync with `--sync`; one write transaction per operation or per batch, one
//! read transaction per read or scan. LMDB has no cache (it reads through the OS page cache),
//! no compression and no merge operator, and a B-tree needs no compaction: `compact` is a
//! no-op and disk space freed by deletes is reused, never returned (as InfluxDB's comparison
//! notes). Symas' MDB_APPEND mode for sequential loads is not used, since the adapter does not
//! know the caller's order.
//!
//! Thread-safety: an `MDB_env` is safe to share; each transaction is begun, used and ended on
//! one thread within one call. LMDB serializes writers with its own mutex.

mod ffi;

use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::ptr;

use super::{
    library_of, no_merges, setting, BatchHint, BatchSink, Direction, Engine, EngineConfig,
    EngineInfo, Visitor, WriteMode,
};
use crate::error::{Error, Result};

const NAME: &str = "lmdb";
/// Size of the memory map: an upper bound on the database size, reserved as address space.
const MAP_BYTES: usize = 256 << 30;
/// Reader slots: one per concurrent read transaction, so at least the client threads.
const MAX_READERS: libc::c_uint = 1024;

fn check(op: &'static str, rc: libc::c_int) -> Result<()> {
    if rc == 0 {
        return Ok(());
    }
    // SAFETY: mdb_strerror returns a pointer to a static or thread-local NUL-terminated
    // message that we only read.
    let message = unsafe { CStr::from_ptr(ffi::mdb_strerror(rc)) }
        .to_string_lossy()
        .into_owned();
    Err(Error::engine(NAME, op, message))
}

fn val(bytes: &[u8]) -> ffi::MDB_val {
    ffi::MDB_val {
        mv_size: bytes.len(),
        mv_data: bytes.as_ptr() as *mut libc::c_void,
    }
}

fn empty_val() -> ffi::MDB_val {
    ffi::MDB_val {
        mv_size: 0,
        mv_data: ptr::null_mut(),
    }
}

/// # Safety
/// `v` must have been filled by LMDB inside a transaction that is still open.
unsafe fn as_slice<'a>(v: &ffi::MDB_val) -> &'a [u8] {
    if v.mv_data.is_null() || v.mv_size == 0 {
        &[]
    } else {
        // SAFETY: per the caller's contract the pointer and length describe live map memory.
        unsafe { std::slice::from_raw_parts(v.mv_data.cast::<u8>(), v.mv_size) }
    }
}

/// An open LMDB environment with its unnamed database.
pub struct Lmdb {
    env: *mut ffi::MDB_env,
    dbi: ffi::MDB_dbi,
    env_syncs: bool,
    info: EngineInfo,
}

// SAFETY: an MDB_env may be used from any thread; transactions never leave the call (and so
// the thread) that began them, and the dbi is a plain integer fixed after open.
unsafe impl Send for Lmdb {}
// SAFETY: as above.
unsafe impl Sync for Lmdb {}

/// A write transaction that aborts unless committed.
struct WriteTxn<'a> {
    db: &'a Lmdb,
    txn: *mut ffi::MDB_txn,
}

impl<'a> WriteTxn<'a> {
    fn begin(db: &'a Lmdb) -> Result<Self> {
        let mut txn = ptr::null_mut();
        // SAFETY: the environment is open; txn receives the new handle.
        check("txn_begin", unsafe {
            ffi::mdb_txn_begin(db.env, ptr::null_mut(), 0, &mut txn)
        })?;
        Ok(WriteTxn { db, txn })
    }

    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        let (mut k, mut v) = (val(key), val(value));
        // SAFETY: the transaction is open; LMDB copies key and value into the map.
        check("put", unsafe {
            ffi::mdb_put(self.txn, self.db.dbi, &mut k, &mut v, 0)
        })
    }

    fn delete(&mut self, key: &[u8]) -> Result<()> {
        let mut k = val(key);
        // SAFETY: the transaction is open; a null data pointer deletes the key.
        let rc = unsafe { ffi::mdb_del(self.txn, self.db.dbi, &mut k, ptr::null_mut()) };
        if rc == ffi::MDB_NOTFOUND {
            return Ok(());
        }
        check("delete", rc)
    }

    fn commit(mut self, mode: WriteMode) -> Result<()> {
        let txn = std::mem::replace(&mut self.txn, ptr::null_mut());
        // SAFETY: commit consumes the open transaction (also on failure).
        check("commit", unsafe { ffi::mdb_txn_commit(txn) })?;
        if mode.sync && !self.db.env_syncs {
            // SAFETY: the environment is open; force=1 flushes even under MDB_NOSYNC.
            check("env_sync", unsafe { ffi::mdb_env_sync(self.db.env, 1) })?;
        }
        Ok(())
    }
}

impl Drop for WriteTxn<'_> {
    fn drop(&mut self) {
        if !self.txn.is_null() {
            // SAFETY: the transaction is open and not committed.
            unsafe { ffi::mdb_txn_abort(self.txn) };
        }
    }
}

/// A read transaction, aborted (its only end) when dropped.
struct ReadTxn {
    txn: *mut ffi::MDB_txn,
}

impl ReadTxn {
    fn begin(db: &Lmdb) -> Result<Self> {
        let mut txn = ptr::null_mut();
        // SAFETY: the environment is open.
        check("txn_begin", unsafe {
            ffi::mdb_txn_begin(db.env, ptr::null_mut(), ffi::MDB_RDONLY, &mut txn)
        })?;
        Ok(ReadTxn { txn })
    }
}

impl Drop for ReadTxn {
    fn drop(&mut self) {
        // SAFETY: the read transaction is open.
        unsafe { ffi::mdb_txn_abort(self.txn) };
    }
}

impl Lmdb {
    /// Opens (creating if missing) an environment in the directory `config.path`.
    pub fn open(config: &EngineConfig) -> Result<Self> {
        let path = CString::new(config.path.as_os_str().as_bytes())
            .map_err(|_| Error::Usage("database path contains a NUL byte".to_string()))?;
        let flags = if config.sync {
            0
        } else {
            ffi::MDB_NOSYNC | ffi::MDB_NOMETASYNC
        };
        let mut env = ptr::null_mut();
        // SAFETY: env receives a new handle, closed in Drop (or below on failure).
        check("env_create", unsafe { ffi::mdb_env_create(&mut env) })?;
        let mut me = Lmdb {
            env,
            dbi: 0,
            env_syncs: config.sync,
            info: EngineInfo {
                name: NAME,
                version: String::new(),
                library: None,
                warning: None,
                settings: Vec::new(),
            },
        };
        // SAFETY: the environment is created but not yet open, as these setters require.
        unsafe {
            check("env_set_mapsize", ffi::mdb_env_set_mapsize(env, MAP_BYTES))?;
            check(
                "env_set_maxreaders",
                ffi::mdb_env_set_maxreaders(env, MAX_READERS),
            )?;
            check(
                "env_open",
                ffi::mdb_env_open(env, path.as_ptr(), flags, 0o644),
            )?;
        }
        {
            let txn = WriteTxn::begin(&me)?;
            let mut dbi = 0;
            // SAFETY: the transaction is open; a null name opens the unnamed database.
            check("dbi_open", unsafe {
                ffi::mdb_dbi_open(txn.txn, ptr::null(), 0, &mut dbi)
            })?;
            txn.commit(WriteMode::default())?;
            me.dbi = dbi;
        }
        let (mut major, mut minor, mut patch) = (0, 0, 0);
        // SAFETY: out-pointers to locals; the returned string is static and ignored.
        unsafe { ffi::mdb_version(&mut major, &mut minor, &mut patch) };
        me.info.version = format!("{major}.{minor}.{patch}");
        me.info.library =
            library_of(ffi::mdb_env_open as *const libc::c_void).map(|p| p.display().to_string());
        let mut settings = vec![
            setting("map_size", MAP_BYTES),
            if config.sync {
                "sync=true (default full sync)".to_string()
            } else {
                "flags=MDB_NOSYNC|MDB_NOMETASYNC".to_string()
            },
            "cache=none (OS page cache)".to_string(),
            "compression=none".to_string(),
        ];
        if config.disable_wal {
            settings.push("disable_wal=ignored (no log)".to_string());
        }
        me.info.settings = settings;
        Ok(me)
    }
}

impl Drop for Lmdb {
    fn drop(&mut self) {
        // SAFETY: no transaction outlives the call that began it, so none is open here.
        unsafe { ffi::mdb_env_close(self.env) };
    }
}

impl Engine for Lmdb {
    fn info(&self) -> &EngineInfo {
        &self.info
    }

    fn put(&self, key: &[u8], value: &[u8], mode: WriteMode) -> Result<()> {
        let mut txn = WriteTxn::begin(self)?;
        txn.put(key, value)?;
        txn.commit(mode)
    }

    fn get(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        let txn = ReadTxn::begin(self)?;
        let (mut k, mut v) = (val(key), empty_val());
        // SAFETY: the read transaction is open; on success `v` points into the map, valid
        // until the transaction ends, and is copied before that.
        let rc = unsafe { ffi::mdb_get(txn.txn, self.dbi, &mut k, &mut v) };
        // Cleared on a miss too, as the trait says: a stale value would count in MB/s.
        out.clear();
        if rc == ffi::MDB_NOTFOUND {
            return Ok(false);
        }
        check("get", rc)?;
        // SAFETY: as above.
        out.extend_from_slice(unsafe { as_slice(&v) });
        Ok(true)
    }

    fn delete(&self, key: &[u8], mode: WriteMode) -> Result<()> {
        let mut txn = WriteTxn::begin(self)?;
        txn.delete(key)?;
        txn.commit(mode)
    }

    fn write_with(
        &self,
        _hint: BatchHint,
        fill: &mut dyn FnMut(&mut dyn BatchSink) -> Result<()>,
        mode: WriteMode,
    ) -> Result<()> {
        // A write transaction, as LMDB's db_bench batches: nothing to reserve.
        let mut txn = WriteTxn::begin(self)?;
        fill(&mut txn)?;
        txn.commit(mode)
    }

    fn scan(
        &self,
        direction: Direction,
        start: Option<&[u8]>,
        visit: &mut Visitor<'_>,
    ) -> Result<()> {
        let txn = ReadTxn::begin(self)?;
        let mut cursor = ptr::null_mut();
        // SAFETY: the read transaction is open; the cursor is closed before it ends.
        check("cursor_open", unsafe {
            ffi::mdb_cursor_open(txn.txn, self.dbi, &mut cursor)
        })?;
        let result = (|| {
            let (mut k, mut v) = (empty_val(), empty_val());
            let get = |k: &mut ffi::MDB_val, v: &mut ffi::MDB_val, op| {
                // SAFETY: the cursor is open; LMDB fills k and v with pointers into the map.
                let rc = unsafe { ffi::mdb_cursor_get(cursor, k, v, op) };
                if rc == ffi::MDB_NOTFOUND {
                    Ok(false)
                } else {
                    check("cursor_get", rc).map(|()| true)
                }
            };
            let mut positioned = match (direction, start) {
                (Direction::Forward, None) => get(&mut k, &mut v, ffi::MDB_FIRST)?,
                (Direction::Reverse, None) => get(&mut k, &mut v, ffi::MDB_LAST)?,
                (Direction::Forward, Some(s)) => {
                    k = val(s);
                    get(&mut k, &mut v, ffi::MDB_SET_RANGE)?
                }
                (Direction::Reverse, Some(s)) => {
                    k = val(s);
                    if get(&mut k, &mut v, ffi::MDB_SET_RANGE)? {
                        // SAFETY: k was filled by LMDB inside the open transaction.
                        // SET_RANGE already filled k and v; step back only past a larger key.
                        if unsafe { as_slice(&k) } > s {
                            get(&mut k, &mut v, ffi::MDB_PREV)?
                        } else {
                            true
                        }
                    } else {
                        get(&mut k, &mut v, ffi::MDB_LAST)?
                    }
                }
            };
            let step = match direction {
                Direction::Forward => ffi::MDB_NEXT,
                Direction::Reverse => ffi::MDB_PREV,
            };
            while positioned {
                // SAFETY: k and v were filled by LMDB inside the open transaction.
                let go_on = unsafe { visit(as_slice(&k), as_slice(&v)) };
                if !go_on {
                    break;
                }
                positioned = get(&mut k, &mut v, step)?;
            }
            Ok(())
        })();
        // SAFETY: the cursor is open and its transaction still is.
        unsafe { ffi::mdb_cursor_close(cursor) };
        drop(txn);
        result
    }

    fn compact(&self) -> Result<()> {
        // A B-tree rebalances on every write; LMDB has no in-place compaction.
        Ok(())
    }

    fn stats(&self) -> Result<String> {
        let mut stat = ffi::MDB_stat::default();
        let mut info = ffi::MDB_envinfo {
            me_mapaddr: ptr::null_mut(),
            me_mapsize: 0,
            me_last_pgno: 0,
            me_last_txnid: 0,
            me_maxreaders: 0,
            me_numreaders: 0,
        };
        // SAFETY: the environment is open; both calls fill structs on this stack frame.
        unsafe {
            check("env_stat", ffi::mdb_env_stat(self.env, &mut stat))?;
            check("env_info", ffi::mdb_env_info(self.env, &mut info))?;
        }
        Ok(format!(
            "page size: {}\ndepth: {}\nbranch pages: {}\nleaf pages: {}\noverflow pages: {}\n\
             entries: {}\nmap size: {}\nlast page: {}\nlast txn: {}\nreaders used: {}\n",
            stat.ms_psize,
            stat.ms_depth,
            stat.ms_branch_pages,
            stat.ms_leaf_pages,
            stat.ms_overflow_pages,
            stat.ms_entries,
            info.me_mapsize,
            info.me_last_pgno,
            info.me_last_txnid,
            info.me_numreaders
        ))
    }
}

impl BatchSink for WriteTxn<'_> {
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        WriteTxn::put(self, key, value)
    }

    fn delete(&mut self, key: &[u8]) -> Result<()> {
        WriteTxn::delete(self, key)
    }

    fn merge(&mut self, _key: &[u8], _operand: &[u8]) -> Result<()> {
        Err(no_merges(NAME))
    }
}
