//! RocksDB, from Debian's `librocksdb` through the thin FFI in `rocksdb/ffi.rs`.
//!
//! Two configurations, reported as two engines so a table never mixes them up:
//! - `rocksdb`: RocksDB's defaults, with `info_log_level` set to INFO (Debian's build is a
//!   debug-style build whose default is DEBUG, see BASELINES.md), an LRU block cache of
//!   `--cache_size`, snappy compression, and the command line's flags where given.
//! - `rocksdb-tuned`: additionally the options of RocksDB's own read-modify-write benchmark
//!   report (seed 002): level-0 triggers 4/8/12, 6 levels, a 10 MiB level-1 target, no
//!   compression on levels 0 and 1, 64 KiB blocks unless `--block_size` is given, and
//!   background jobs scaled from that report's 20 to this machine's core count.
//!   `--max_bytes_for_level_base` and `--level0_file_num_compaction_trigger` replace the
//!   report's level-1 target and first trigger (the other two triggers stay at least as deep).
//!
//! `--max_write_buffer_number` applies to both configurations.
//!
//! `--merge_operator=uint64add` installs RocksDB's built-in `uint64add`.
//!
//! Thread-safety: a `rocksdb_t` is safe for concurrent use; option objects are read-only
//! after open.

mod ffi;

use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::ptr;

use libc::c_char;

use super::{
    debian_assertions_warning, library_of, no_merge_operator, setting, version_from_library_name,
    BatchHint, BatchSink, CompressionChoice, Direction, Engine, EngineConfig, EngineInfo, Visitor,
    WriteMode,
};
use crate::error::{Error, Result};

/// Level-1 target size of the tuned configuration (the report's `max_bytes_for_level_base`).
const TUNED_LEVEL_BASE_BYTES: u64 = 10 << 20;
/// Block size of the tuned configuration (the report's `--block_size=65536`).
const TUNED_BLOCK_SIZE: usize = 64 << 10;

/// A count for the C API's `int` settings; counts past its range (never given in practice)
/// become its largest value.
fn c_int_saturating(n: usize) -> libc::c_int {
    libc::c_int::try_from(n).unwrap_or(libc::c_int::MAX)
}

fn take_error(name: &'static str, op: &'static str, err: *mut c_char) -> Result<()> {
    if err.is_null() {
        return Ok(());
    }
    // SAFETY: a non-null errptr is a NUL-terminated malloc'd string that we own; it is copied
    // and freed exactly once.
    let message = unsafe { CStr::from_ptr(err) }
        .to_string_lossy()
        .into_owned();
    // SAFETY: see above.
    unsafe { ffi::rocksdb_free(err.cast()) };
    Err(Error::engine(name, op, message))
}

/// An open RocksDB database.
pub struct RocksDb {
    db: *mut ffi::rocksdb_t,
    options: *mut ffi::rocksdb_options_t,
    cache: *mut ffi::rocksdb_cache_t,
    read: *mut ffi::rocksdb_readoptions_t,
    write_async: *mut ffi::rocksdb_writeoptions_t,
    write_sync: *mut ffi::rocksdb_writeoptions_t,
    sync_all: bool,
    merge: bool,
    info: EngineInfo,
}

// SAFETY: RocksDB's DB object is thread-safe; the options and cache are not mutated after
// open and are destroyed after the database in Drop.
unsafe impl Send for RocksDb {}
// SAFETY: as above.
unsafe impl Sync for RocksDb {}

fn compression_code(choice: CompressionChoice) -> (libc::c_int, &'static str) {
    match choice {
        CompressionChoice::Default | CompressionChoice::Snappy => {
            (ffi::ROCKSDB_SNAPPY_COMPRESSION, "snappy")
        }
        CompressionChoice::None => (ffi::ROCKSDB_NO_COMPRESSION, "none"),
        CompressionChoice::Lz4 => (ffi::ROCKSDB_LZ4_COMPRESSION, "lz4"),
        CompressionChoice::Zstd => (ffi::ROCKSDB_ZSTD_COMPRESSION, "zstd"),
    }
}

impl RocksDb {
    /// Opens (creating if missing) the database in `config.path`; `tuned` selects the
    /// configuration of RocksDB's own benchmark report.
    pub fn open(config: &EngineConfig, tuned: bool) -> Result<Self> {
        let name: &'static str = if tuned { "rocksdb-tuned" } else { "rocksdb" };
        let path = CString::new(config.path.as_os_str().as_bytes())
            .map_err(|_| Error::Usage("database path contains a NUL byte".to_string()))?;
        let mut settings = vec![
            "info_log_level=INFO".to_string(),
            setting("cache_size", config.cache_size),
        ];
        let (compression, compression_name) = compression_code(config.compression);
        // SAFETY: plain constructors; every object is destroyed in Drop after the database.
        let mut me = unsafe {
            RocksDb {
                db: ptr::null_mut(),
                options: ffi::rocksdb_options_create(),
                cache: ffi::rocksdb_cache_create_lru(config.cache_size),
                read: ffi::rocksdb_readoptions_create(),
                write_async: ffi::rocksdb_writeoptions_create(),
                write_sync: ffi::rocksdb_writeoptions_create(),
                sync_all: config.sync,
                merge: config.merge_uint64add,
                info: EngineInfo {
                    name,
                    version: String::new(),
                    library: None,
                    warning: None,
                    settings: Vec::new(),
                },
            }
        };
        // SAFETY: the handles are live; setters store values (the table factory copies the
        // block-based options, and the filter policy is owned by those options).
        unsafe {
            let o = me.options;
            ffi::rocksdb_options_set_create_if_missing(o, 1);
            ffi::rocksdb_options_set_info_log_level(o, ffi::ROCKSDB_INFO_LEVEL);
            ffi::rocksdb_options_set_compression(o, compression);
            settings.push(setting("compression", compression_name));
            if config.disable_wal {
                ffi::rocksdb_writeoptions_disable_WAL(me.write_async, 1);
                ffi::rocksdb_writeoptions_disable_WAL(me.write_sync, 1);
            }
            ffi::rocksdb_writeoptions_set_sync(me.write_sync, 1);
            if config.disable_wal {
                settings.push("disable_wal=true".to_string());
            }
            if let Some(size) = config.write_buffer_size {
                ffi::rocksdb_options_set_write_buffer_size(o, size);
                settings.push(setting("write_buffer_size", size));
            }
            if let Some(memtables) = config.max_write_buffer_number {
                let memtables = c_int_saturating(memtables);
                ffi::rocksdb_options_set_max_write_buffer_number(o, memtables);
                settings.push(setting("max_write_buffer_number", memtables));
            }
            if let Some(size) = config.max_file_size {
                ffi::rocksdb_options_set_target_file_size_base(o, size);
                settings.push(setting("target_file_size_base", size));
            }
            if let Some(parts) = config.subcompactions {
                let parts = u32::try_from(parts).unwrap_or(u32::MAX);
                ffi::rocksdb_options_set_max_subcompactions(o, parts);
                settings.push(setting("max_subcompactions", parts));
            }
            if config.merge_uint64add {
                ffi::rocksdb_options_set_uint64add_merge_operator(o);
                settings.push("merge_operator=uint64add".to_string());
            }
            let table = ffi::rocksdb_block_based_options_create();
            ffi::rocksdb_block_based_options_set_block_cache(table, me.cache);
            let block_size =
                config
                    .block_size
                    .or(if tuned { Some(TUNED_BLOCK_SIZE) } else { None });
            if let Some(size) = block_size {
                ffi::rocksdb_block_based_options_set_block_size(table, size);
                settings.push(setting("block_size", size));
            }
            if let Some(bits) = config.bloom_bits {
                let policy = ffi::rocksdb_filterpolicy_create_bloom_full(f64::from(bits));
                ffi::rocksdb_block_based_options_set_filter_policy(table, policy);
                settings.push(setting("bloom_bits", bits));
            }
            ffi::rocksdb_options_set_block_based_table_factory(o, table);
            ffi::rocksdb_block_based_options_destroy(table);
            if tuned {
                let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
                let jobs = cores.max(2) as libc::c_int;
                // The report's triggers, the first one from the flag if given; the others stay
                // at least as deep (RocksDB would raise them itself).
                let l0 = config
                    .level0_file_num_compaction_trigger
                    .map_or(4, c_int_saturating);
                let (slowdown, stop) = (l0.max(8), l0.max(12));
                ffi::rocksdb_options_set_level0_file_num_compaction_trigger(o, l0);
                ffi::rocksdb_options_set_level0_slowdown_writes_trigger(o, slowdown);
                ffi::rocksdb_options_set_level0_stop_writes_trigger(o, stop);
                ffi::rocksdb_options_set_num_levels(o, 6);
                let base = config
                    .max_bytes_for_level_base
                    .unwrap_or(TUNED_LEVEL_BASE_BYTES);
                ffi::rocksdb_options_set_max_bytes_for_level_base(o, base);
                ffi::rocksdb_options_set_max_background_jobs(o, jobs);
                let per_level = [
                    ffi::ROCKSDB_NO_COMPRESSION,
                    ffi::ROCKSDB_NO_COMPRESSION,
                    compression,
                    compression,
                    compression,
                    compression,
                ];
                ffi::rocksdb_options_set_compression_per_level(
                    o,
                    per_level.as_ptr(),
                    per_level.len(),
                );
                settings.extend([
                    format!("level0_triggers={l0}/{slowdown}/{stop}"),
                    "num_levels=6".to_string(),
                    setting("max_bytes_for_level_base", base),
                    setting("max_background_jobs", jobs),
                    format!("compression_per_level=none,none,{compression_name}..."),
                ]);
            } else {
                // Plain RocksDB (the tuned one took both flags into its own values above).
                if let Some(bytes) = config.max_bytes_for_level_base {
                    ffi::rocksdb_options_set_max_bytes_for_level_base(o, bytes);
                    settings.push(setting("max_bytes_for_level_base", bytes));
                }
                if let Some(files) = config.level0_file_num_compaction_trigger {
                    let files = c_int_saturating(files);
                    ffi::rocksdb_options_set_level0_file_num_compaction_trigger(o, files);
                    settings.push(setting("level0_file_num_compaction_trigger", files));
                }
            }
        }
        settings.push(setting("sync", config.sync));
        let mut err = ptr::null_mut();
        // SAFETY: options and path are valid for the call; errptr points at a local.
        me.db = unsafe { ffi::rocksdb_open(me.options, path.as_ptr(), &mut err) };
        take_error(name, "open", err)?;
        if me.db.is_null() {
            return Err(Error::engine(
                name,
                "open",
                "rocksdb_open returned no handle",
            ));
        }
        let library = library_of(ffi::rocksdb_open as *const libc::c_void);
        me.info.version = library
            .as_deref()
            .and_then(version_from_library_name)
            .unwrap_or_else(|| "unknown".to_string());
        me.info.warning = debian_assertions_warning(library.as_deref());
        me.info.library = library.map(|p| p.display().to_string());
        me.info.settings = settings;
        Ok(me)
    }

    fn write_options(&self, mode: WriteMode) -> *const ffi::rocksdb_writeoptions_t {
        if mode.sync || self.sync_all {
            self.write_sync
        } else {
            self.write_async
        }
    }

    fn name(&self) -> &'static str {
        self.info.name
    }
}

impl Drop for RocksDb {
    fn drop(&mut self) {
        // SAFETY: each pointer came from its constructor and is destroyed once, the database
        // first.
        unsafe {
            if !self.db.is_null() {
                ffi::rocksdb_close(self.db);
            }
            ffi::rocksdb_options_destroy(self.options);
            ffi::rocksdb_cache_destroy(self.cache);
            ffi::rocksdb_readoptions_destroy(self.read);
            ffi::rocksdb_writeoptions_destroy(self.write_async);
            ffi::rocksdb_writeoptions_destroy(self.write_sync);
        }
    }
}

impl Engine for RocksDb {
    fn info(&self) -> &EngineInfo {
        &self.info
    }

    fn put(&self, key: &[u8], value: &[u8], mode: WriteMode) -> Result<()> {
        let mut err = ptr::null_mut();
        // SAFETY: live handles; slices valid for the call, copied by RocksDB.
        unsafe {
            ffi::rocksdb_put(
                self.db,
                self.write_options(mode),
                key.as_ptr().cast(),
                key.len(),
                value.as_ptr().cast(),
                value.len(),
                &mut err,
            );
        }
        take_error(self.name(), "put", err)
    }

    fn get(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        let mut err = ptr::null_mut();
        // SAFETY: live handles; the key slice is valid for the call.
        let pinned = unsafe {
            ffi::rocksdb_get_pinned(self.db, self.read, key.as_ptr().cast(), key.len(), &mut err)
        };
        take_error(self.name(), "get", err)?;
        // Cleared on a miss too, as the trait says: a stale value would count in MB/s.
        out.clear();
        if pinned.is_null() {
            return Ok(false);
        }
        // SAFETY: the pinned slice owns (or pins) `len` bytes until destroyed; we copy them
        // and destroy it once.
        unsafe {
            let mut len = 0;
            let value = ffi::rocksdb_pinnableslice_value(pinned, &mut len);
            if !value.is_null() {
                out.extend_from_slice(std::slice::from_raw_parts(value.cast::<u8>(), len));
            }
            ffi::rocksdb_pinnableslice_destroy(pinned);
        }
        Ok(true)
    }

    fn delete(&self, key: &[u8], mode: WriteMode) -> Result<()> {
        let mut err = ptr::null_mut();
        // SAFETY: as in put.
        unsafe {
            ffi::rocksdb_delete(
                self.db,
                self.write_options(mode),
                key.as_ptr().cast(),
                key.len(),
                &mut err,
            );
        }
        take_error(self.name(), "delete", err)
    }

    fn write_with(
        &self,
        _hint: BatchHint,
        fill: &mut dyn FnMut(&mut dyn BatchSink) -> Result<()>,
        mode: WriteMode,
    ) -> Result<()> {
        // The C API's batch cannot reserve room.
        let mut batch = RocksBatch::new(self.merge, self.name());
        fill(&mut batch)?;
        let mut err = ptr::null_mut();
        // SAFETY: the database and the batch are open; the batch outlives the call.
        unsafe { ffi::rocksdb_write(self.db, self.write_options(mode), batch.batch, &mut err) };
        take_error(self.name(), "write", err)
    }

    fn supports_merge(&self) -> bool {
        self.merge
    }

    fn merge(&self, key: &[u8], operand: &[u8], mode: WriteMode) -> Result<()> {
        if !self.merge {
            return Err(no_merge_operator(self.name()));
        }
        let mut err = ptr::null_mut();
        // SAFETY: as in put.
        unsafe {
            ffi::rocksdb_merge(
                self.db,
                self.write_options(mode),
                key.as_ptr().cast(),
                key.len(),
                operand.as_ptr().cast(),
                operand.len(),
                &mut err,
            );
        }
        take_error(self.name(), "merge", err)
    }

    fn scan(
        &self,
        direction: Direction,
        start: Option<&[u8]>,
        visit: &mut Visitor<'_>,
    ) -> Result<()> {
        // SAFETY: the iterator lives only inside this call; key/value pointers are read while
        // it is valid and unmoved, and the visitor sees them only during its call.
        unsafe {
            let it = ffi::rocksdb_create_iterator(self.db, self.read);
            match (direction, start) {
                (Direction::Forward, None) => ffi::rocksdb_iter_seek_to_first(it),
                (Direction::Reverse, None) => ffi::rocksdb_iter_seek_to_last(it),
                (Direction::Forward, Some(k)) => {
                    ffi::rocksdb_iter_seek(it, k.as_ptr().cast(), k.len())
                }
                (Direction::Reverse, Some(k)) => {
                    ffi::rocksdb_iter_seek_for_prev(it, k.as_ptr().cast(), k.len())
                }
            }
            while ffi::rocksdb_iter_valid(it) != 0 {
                let (mut klen, mut vlen) = (0, 0);
                let key = ffi::rocksdb_iter_key(it, &mut klen);
                let value = ffi::rocksdb_iter_value(it, &mut vlen);
                if !visit(
                    std::slice::from_raw_parts(key.cast::<u8>(), klen),
                    std::slice::from_raw_parts(value.cast::<u8>(), vlen),
                ) {
                    break;
                }
                match direction {
                    Direction::Forward => ffi::rocksdb_iter_next(it),
                    Direction::Reverse => ffi::rocksdb_iter_prev(it),
                }
            }
            let mut err = ptr::null_mut();
            ffi::rocksdb_iter_get_error(it, &mut err);
            ffi::rocksdb_iter_destroy(it);
            take_error(self.name(), "scan", err)
        }
    }

    fn compact(&self) -> Result<()> {
        // SAFETY: null bounds mean the whole key range.
        unsafe { ffi::rocksdb_compact_range(self.db, ptr::null(), 0, ptr::null(), 0) };
        Ok(())
    }

    fn stats(&self) -> Result<String> {
        let mut text = String::new();
        for prop in [
            c"rocksdb.stats",
            c"rocksdb.estimate-table-readers-mem",
            c"rocksdb.cur-size-all-mem-tables",
        ] {
            // SAFETY: constant NUL-terminated names; a non-null result is a malloc'd string we
            // own and free once.
            unsafe {
                let value = ffi::rocksdb_property_value(self.db, prop.as_ptr());
                if !value.is_null() {
                    text.push_str(&format!(
                        "{}: {}\n",
                        prop.to_string_lossy(),
                        CStr::from_ptr(value).to_string_lossy()
                    ));
                    ffi::rocksdb_free(value.cast());
                }
            }
        }
        Ok(text)
    }
}

/// A RocksDB `WriteBatch`, destroyed when dropped.
struct RocksBatch {
    batch: *mut ffi::rocksdb_writebatch_t,
    /// Whether the database has a merge operator.
    merge: bool,
    engine: &'static str,
}

impl RocksBatch {
    fn new(merge: bool, engine: &'static str) -> RocksBatch {
        RocksBatch {
            // SAFETY: creates a batch that only `drop` destroys.
            batch: unsafe { ffi::rocksdb_writebatch_create() },
            merge,
            engine,
        }
    }
}

impl Drop for RocksBatch {
    fn drop(&mut self) {
        // SAFETY: the batch came from `rocksdb_writebatch_create` and is destroyed once.
        unsafe { ffi::rocksdb_writebatch_destroy(self.batch) }
    }
}

impl BatchSink for RocksBatch {
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        // SAFETY: the batch is live; RocksDB copies the slices.
        unsafe {
            ffi::rocksdb_writebatch_put(
                self.batch,
                key.as_ptr().cast(),
                key.len(),
                value.as_ptr().cast(),
                value.len(),
            )
        };
        Ok(())
    }

    fn delete(&mut self, key: &[u8]) -> Result<()> {
        // SAFETY: the batch is live; RocksDB copies the slice.
        unsafe { ffi::rocksdb_writebatch_delete(self.batch, key.as_ptr().cast(), key.len()) };
        Ok(())
    }

    fn merge(&mut self, key: &[u8], operand: &[u8]) -> Result<()> {
        if !self.merge {
            return Err(no_merge_operator(self.engine));
        }
        // SAFETY: the batch is live; RocksDB copies the slices.
        unsafe {
            ffi::rocksdb_writebatch_merge(
                self.batch,
                key.as_ptr().cast(),
                key.len(),
                operand.as_ptr().cast(),
                operand.len(),
            )
        };
        Ok(())
    }
}
