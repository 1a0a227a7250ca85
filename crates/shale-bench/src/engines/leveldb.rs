//! LevelDB, from Debian's `libleveldb` through the thin FFI in `leveldb/ffi.rs`.
//!
//! Configured as LevelDB's own benchmark page does: default options, an LRU block cache of
//! `--cache_size`, snappy compression, asynchronous writes unless `--sync`; the other flags
//! are applied only when given. LevelDB has no switch to skip its log, so `--disable_wal` is
//! recorded as ignored, and neither are its level-1 target, level-0 trigger and memtable count
//! settable, so `--max_bytes_for_level_base`, `--level0_file_num_compaction_trigger` and
//! `--max_write_buffer_number` are too. LevelDB has no merge operator.
//!
//! Thread-safety: a `leveldb_t` is safe for concurrent use (LevelDB's documented contract);
//! options, cache and filter objects are only read after open.

mod ffi;

use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::ptr;

use libc::c_char;

use super::{
    debian_assertions_warning, library_of, no_merges, setting, BatchHint, BatchSink,
    CompressionChoice, Direction, Engine, EngineConfig, EngineInfo, Visitor, WriteMode,
};
use crate::error::{Error, Result};

const NAME: &str = "leveldb";

/// Turns a C error string into an error and frees it.
fn take_error(op: &'static str, err: *mut c_char) -> Result<()> {
    if err.is_null() {
        return Ok(());
    }
    // SAFETY: a non-null errptr from the C API is a NUL-terminated malloc'd string that we
    // own and free exactly once right after copying it.
    let message = unsafe { CStr::from_ptr(err) }
        .to_string_lossy()
        .into_owned();
    // SAFETY: see above; `err` came from LevelDB's allocator.
    unsafe { ffi::leveldb_free(err.cast()) };
    Err(Error::engine(NAME, op, message))
}

/// An open LevelDB database.
pub struct LevelDb {
    db: *mut ffi::leveldb_t,
    options: *mut ffi::leveldb_options_t,
    cache: *mut ffi::leveldb_cache_t,
    filter: *mut ffi::leveldb_filterpolicy_t,
    read: *mut ffi::leveldb_readoptions_t,
    write_async: *mut ffi::leveldb_writeoptions_t,
    write_sync: *mut ffi::leveldb_writeoptions_t,
    sync_all: bool,
    info: EngineInfo,
}

// SAFETY: LevelDB's DB object is thread-safe; the option, cache and filter objects are
// immutable after open and outlive `db` (they are destroyed after it in Drop).
unsafe impl Send for LevelDb {}
// SAFETY: as above; every method only passes these pointers to thread-safe C calls.
unsafe impl Sync for LevelDb {}

impl LevelDb {
    /// Opens (creating if missing) the database in `config.path`.
    pub fn open(config: &EngineConfig) -> Result<Self> {
        let mut settings = vec![setting("cache_size", config.cache_size)];
        let compression = match config.compression {
            CompressionChoice::Default | CompressionChoice::Snappy => {
                ffi::LEVELDB_SNAPPY_COMPRESSION
            }
            CompressionChoice::None => ffi::LEVELDB_NO_COMPRESSION,
            other => {
                return Err(Error::Usage(format!(
                    "leveldb supports --compression=none or snappy, not {other:?}"
                )))
            }
        };
        settings.push(setting(
            "compression",
            if compression == ffi::LEVELDB_NO_COMPRESSION {
                "none"
            } else {
                "snappy"
            },
        ));
        let path = CString::new(config.path.as_os_str().as_bytes())
            .map_err(|_| Error::Usage("database path contains a NUL byte".to_string()))?;
        // SAFETY: plain constructors of the C API; each object is destroyed in Drop (or below
        // on failure) after the database that uses it.
        let mut me = unsafe {
            LevelDb {
                db: ptr::null_mut(),
                options: ffi::leveldb_options_create(),
                cache: ffi::leveldb_cache_create_lru(config.cache_size),
                filter: ptr::null_mut(),
                read: ffi::leveldb_readoptions_create(),
                write_async: ffi::leveldb_writeoptions_create(),
                write_sync: ffi::leveldb_writeoptions_create(),
                sync_all: config.sync,
                info: EngineInfo {
                    name: NAME,
                    version: format!(
                        "{}.{}",
                        ffi::leveldb_major_version(),
                        ffi::leveldb_minor_version()
                    ),
                    library: None,
                    warning: None,
                    settings: Vec::new(),
                },
            }
        };
        // SAFETY: the handles were just created and are valid; setters only store values.
        unsafe {
            ffi::leveldb_options_set_create_if_missing(me.options, 1);
            ffi::leveldb_options_set_cache(me.options, me.cache);
            ffi::leveldb_options_set_compression(me.options, compression);
            ffi::leveldb_writeoptions_set_sync(me.write_sync, 1);
            if let Some(size) = config.write_buffer_size {
                ffi::leveldb_options_set_write_buffer_size(me.options, size);
                settings.push(setting("write_buffer_size", size));
            }
            if let Some(size) = config.block_size {
                ffi::leveldb_options_set_block_size(me.options, size);
                settings.push(setting("block_size", size));
            }
            if let Some(size) = config.max_file_size {
                ffi::leveldb_options_set_max_file_size(me.options, size as usize);
                settings.push(setting("max_file_size", size));
            }
            // 0 means no filter, as for shale and RocksDB: LevelDB would build a degenerate
            // filter of 0 bits a key, which costs work and rejects nothing.
            match config.bloom_bits {
                Some(0) => settings.push("bloom_bits=0 (no filter)".to_string()),
                Some(bits) => {
                    me.filter = ffi::leveldb_filterpolicy_create_bloom(bits as libc::c_int);
                    ffi::leveldb_options_set_filter_policy(me.options, me.filter);
                    settings.push(setting("bloom_bits", bits));
                }
                None => {}
            }
        }
        settings.push(setting("sync", config.sync));
        if config.disable_wal {
            settings.push("disable_wal=ignored (LevelDB always writes its log)".to_string());
        }
        if config.max_bytes_for_level_base.is_some() {
            settings.push("max_bytes_for_level_base=ignored (fixed at 10 MiB)".to_string());
        }
        if config.level0_file_num_compaction_trigger.is_some() {
            settings.push("level0_file_num_compaction_trigger=ignored (fixed at 4)".to_string());
        }
        if config.max_write_buffer_number.is_some() {
            settings.push(
                "max_write_buffer_number=ignored (fixed at 2: one memtable taking writes, one \
                 being flushed)"
                    .to_string(),
            );
        }
        if config.merge_uint64add {
            settings.push("merge_operator=unsupported".to_string());
        }
        let mut err: *mut c_char = ptr::null_mut();
        // SAFETY: options and path are valid for the call; errptr points at a local.
        me.db = unsafe { ffi::leveldb_open(me.options, path.as_ptr(), &mut err) };
        take_error("open", err)?;
        if me.db.is_null() {
            return Err(Error::engine(
                NAME,
                "open",
                "leveldb_open returned no handle",
            ));
        }
        let library = library_of(ffi::leveldb_open as *const libc::c_void);
        me.info.warning = debian_assertions_warning(library.as_deref());
        me.info.library = library.map(|p| p.display().to_string());
        me.info.settings = settings;
        Ok(me)
    }

    fn write_options(&self, mode: WriteMode) -> *const ffi::leveldb_writeoptions_t {
        if mode.sync || self.sync_all {
            self.write_sync
        } else {
            self.write_async
        }
    }
}

impl Drop for LevelDb {
    fn drop(&mut self) {
        // SAFETY: each pointer was created by the matching constructor and is destroyed once;
        // the database goes first because it uses the options, cache and filter.
        unsafe {
            if !self.db.is_null() {
                ffi::leveldb_close(self.db);
            }
            ffi::leveldb_options_destroy(self.options);
            if !self.filter.is_null() {
                ffi::leveldb_filterpolicy_destroy(self.filter);
            }
            ffi::leveldb_cache_destroy(self.cache);
            ffi::leveldb_readoptions_destroy(self.read);
            ffi::leveldb_writeoptions_destroy(self.write_async);
            ffi::leveldb_writeoptions_destroy(self.write_sync);
        }
    }
}

impl Engine for LevelDb {
    fn info(&self) -> &EngineInfo {
        &self.info
    }

    fn put(&self, key: &[u8], value: &[u8], mode: WriteMode) -> Result<()> {
        let mut err = ptr::null_mut();
        // SAFETY: db and options are live; key and value slices are valid for the call and
        // LevelDB copies them.
        unsafe {
            ffi::leveldb_put(
                self.db,
                self.write_options(mode),
                key.as_ptr().cast(),
                key.len(),
                value.as_ptr().cast(),
                value.len(),
                &mut err,
            );
        }
        take_error("put", err)
    }

    fn get(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        let mut err = ptr::null_mut();
        let mut len = 0usize;
        // SAFETY: db and options are live; the key slice is valid for the call.
        let value = unsafe {
            ffi::leveldb_get(
                self.db,
                self.read,
                key.as_ptr().cast(),
                key.len(),
                &mut len,
                &mut err,
            )
        };
        take_error("get", err)?;
        // Cleared on a miss too, as the trait says: a stale value would count in MB/s.
        out.clear();
        if value.is_null() {
            return Ok(false);
        }
        // SAFETY: a non-null result points at `len` malloc'd bytes that we own; we copy them
        // and free the buffer once.
        unsafe {
            out.extend_from_slice(std::slice::from_raw_parts(value.cast::<u8>(), len));
            ffi::leveldb_free(value.cast());
        }
        Ok(true)
    }

    fn delete(&self, key: &[u8], mode: WriteMode) -> Result<()> {
        let mut err = ptr::null_mut();
        // SAFETY: as in put.
        unsafe {
            ffi::leveldb_delete(
                self.db,
                self.write_options(mode),
                key.as_ptr().cast(),
                key.len(),
                &mut err,
            );
        }
        take_error("delete", err)
    }

    fn write_with(
        &self,
        _hint: BatchHint,
        fill: &mut dyn FnMut(&mut dyn BatchSink) -> Result<()>,
        mode: WriteMode,
    ) -> Result<()> {
        // The C API's batch cannot reserve room.
        let mut batch = LevelBatch::new();
        fill(&mut batch)?;
        let mut err = ptr::null_mut();
        // SAFETY: the database and the batch are open; the batch outlives the call.
        unsafe { ffi::leveldb_write(self.db, self.write_options(mode), batch.0, &mut err) };
        take_error("write", err)
    }

    fn scan(
        &self,
        direction: Direction,
        start: Option<&[u8]>,
        visit: &mut Visitor<'_>,
    ) -> Result<()> {
        // SAFETY: the iterator lives only inside this call and is destroyed before return;
        // key/value pointers are read only while the iterator is valid and unmoved, and the
        // visitor sees them as slices only for the duration of its call.
        unsafe {
            let it = ffi::leveldb_create_iterator(self.db, self.read);
            match (direction, start) {
                (Direction::Forward, None) => ffi::leveldb_iter_seek_to_first(it),
                (Direction::Reverse, None) => ffi::leveldb_iter_seek_to_last(it),
                (Direction::Forward, Some(k)) => {
                    ffi::leveldb_iter_seek(it, k.as_ptr().cast(), k.len())
                }
                (Direction::Reverse, Some(k)) => {
                    ffi::leveldb_iter_seek(it, k.as_ptr().cast(), k.len());
                    if ffi::leveldb_iter_valid(it) == 0 {
                        ffi::leveldb_iter_seek_to_last(it);
                    } else {
                        let mut klen = 0;
                        let key = ffi::leveldb_iter_key(it, &mut klen);
                        if std::slice::from_raw_parts(key.cast::<u8>(), klen) > k {
                            ffi::leveldb_iter_prev(it);
                        }
                    }
                }
            }
            while ffi::leveldb_iter_valid(it) != 0 {
                let (mut klen, mut vlen) = (0, 0);
                let key = ffi::leveldb_iter_key(it, &mut klen);
                let value = ffi::leveldb_iter_value(it, &mut vlen);
                let go_on = visit(
                    std::slice::from_raw_parts(key.cast::<u8>(), klen),
                    std::slice::from_raw_parts(value.cast::<u8>(), vlen),
                );
                if !go_on {
                    break;
                }
                match direction {
                    Direction::Forward => ffi::leveldb_iter_next(it),
                    Direction::Reverse => ffi::leveldb_iter_prev(it),
                }
            }
            let mut err = ptr::null_mut();
            ffi::leveldb_iter_get_error(it, &mut err);
            ffi::leveldb_iter_destroy(it);
            take_error("scan", err)
        }
    }

    fn compact(&self) -> Result<()> {
        // SAFETY: null bounds mean the whole key range.
        unsafe { ffi::leveldb_compact_range(self.db, ptr::null(), 0, ptr::null(), 0) };
        Ok(())
    }

    fn stats(&self) -> Result<String> {
        let mut text = String::new();
        for prop in [c"leveldb.stats", c"leveldb.approximate-memory-usage"] {
            // SAFETY: property names are NUL-terminated constants; a non-null result is a
            // malloc'd NUL-terminated string we own and free once.
            unsafe {
                let value = ffi::leveldb_property_value(self.db, prop.as_ptr());
                if !value.is_null() {
                    text.push_str(&format!(
                        "{}: {}\n",
                        prop.to_string_lossy(),
                        CStr::from_ptr(value).to_string_lossy()
                    ));
                    ffi::leveldb_free(value.cast());
                }
            }
        }
        Ok(text)
    }
}

/// A LevelDB `WriteBatch`, destroyed when dropped.
struct LevelBatch(*mut ffi::leveldb_writebatch_t);

impl LevelBatch {
    fn new() -> LevelBatch {
        // SAFETY: creates a batch that only `drop` destroys.
        LevelBatch(unsafe { ffi::leveldb_writebatch_create() })
    }
}

impl Drop for LevelBatch {
    fn drop(&mut self) {
        // SAFETY: the batch came from `leveldb_writebatch_create` and is destroyed once.
        unsafe { ffi::leveldb_writebatch_destroy(self.0) }
    }
}

impl BatchSink for LevelBatch {
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        // SAFETY: the batch is live; LevelDB copies the slices.
        unsafe {
            ffi::leveldb_writebatch_put(
                self.0,
                key.as_ptr().cast(),
                key.len(),
                value.as_ptr().cast(),
                value.len(),
            )
        };
        Ok(())
    }

    fn delete(&mut self, key: &[u8]) -> Result<()> {
        // SAFETY: the batch is live; LevelDB copies the slice.
        unsafe { ffi::leveldb_writebatch_delete(self.0, key.as_ptr().cast(), key.len()) };
        Ok(())
    }

    fn merge(&mut self, _key: &[u8], _operand: &[u8]) -> Result<()> {
        Err(no_merges(NAME))
    }
}
