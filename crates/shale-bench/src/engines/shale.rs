//! shale, this project's engine, through its public API.
//!
//! Behind the cargo feature `shale-engine` (on by default). Options
//! follow the command line where given and shale's defaults otherwise; `--cache_size` sets
//! the block cache like every other engine's cache. `--sync` and `--disable_wal` become
//! shale's `WriteOptions`; `--merge_operator=uint64add` installs `UInt64AddOperator`.
//!
//! Thread-safety: `shale::Db` is `Send + Sync`; iterators live inside one `scan` call.

use std::sync::Arc;

use super::{
    no_merge_operator, setting, BatchHint, BatchSink, CompressionChoice, Direction, Engine,
    EngineConfig, EngineInfo, Visitor, WriteMode,
};
use crate::error::{Error, Result};

const NAME: &str = "shale";

fn shale_err(op: &'static str) -> impl Fn(shale::Error) -> Error {
    move |e| Error::engine(NAME, op, e.to_string())
}

/// An open shale database.
pub struct ShaleEngine {
    db: shale::Db,
    write_async: shale::WriteOptions,
    write_sync: shale::WriteOptions,
    merge: bool,
    info: EngineInfo,
}

impl ShaleEngine {
    /// Opens (creating if missing) the database in `config.path`.
    pub fn open(config: &EngineConfig) -> Result<Self> {
        let mut options = shale::Options {
            create_if_missing: true,
            block_cache_capacity: config.cache_size,
            ..shale::Options::default()
        };
        let mut settings = vec![setting("block_cache_capacity", config.cache_size)];
        if let Some(size) = config.write_buffer_size {
            options.write_buffer_size = size;
        }
        if let Some(size) = config.block_size {
            options.block_size = size;
        }
        if let Some(bits) = config.bloom_bits {
            options.bloom_bits_per_key = bits;
        }
        if let Some(size) = config.max_file_size {
            options.max_file_size = size;
        }
        if let Some(parts) = config.subcompactions {
            options.max_subcompactions = parts;
        }
        if let Some(bytes) = config.max_bytes_for_level_base {
            options.max_bytes_for_level_base = bytes;
        }
        if let Some(files) = config.level0_file_num_compaction_trigger {
            options.level0_file_num_compaction_trigger = files;
        }
        if let Some(memtables) = config.max_write_buffer_number {
            options.max_write_buffer_number = memtables;
        }
        options.compression = match config.compression {
            CompressionChoice::Default => options.compression,
            CompressionChoice::None => shale::Compression::None,
            CompressionChoice::Snappy => shale::Compression::Snappy,
            CompressionChoice::Lz4 => shale::Compression::Lz4,
            CompressionChoice::Zstd => shale::Compression::Zstd(3),
        };
        if config.merge_uint64add {
            options.merge_operator = Some(Arc::new(shale::UInt64AddOperator));
            settings.push("merge_operator=uint64add".to_string());
        }
        settings.extend([
            setting("write_buffer_size", options.write_buffer_size),
            setting("max_write_buffer_number", options.max_write_buffer_number),
            setting("block_size", options.block_size),
            setting("bloom_bits_per_key", options.bloom_bits_per_key),
            setting("compression", format!("{:?}", options.compression)),
            setting("flush_lz4_acceleration", options.flush_lz4_acceleration),
            setting("max_file_size", options.max_file_size),
            setting("max_subcompactions", options.max_subcompactions),
            setting("max_background_jobs", options.max_background_jobs),
            setting("low_priority_compactions", options.low_priority_compactions),
            setting("max_bytes_for_level_base", options.max_bytes_for_level_base),
            setting(
                "level0_file_num_compaction_trigger",
                options.level0_file_num_compaction_trigger,
            ),
            setting("sync", config.sync),
            setting("disable_wal", config.disable_wal),
        ]);
        let db = shale::Db::open(&config.path, options).map_err(shale_err("open"))?;
        let write_async = shale::WriteOptions {
            sync: config.sync,
            disable_wal: config.disable_wal,
        };
        let write_sync = shale::WriteOptions {
            sync: true,
            disable_wal: config.disable_wal,
        };
        Ok(ShaleEngine {
            db,
            write_async,
            write_sync,
            merge: config.merge_uint64add,
            info: EngineInfo {
                name: NAME,
                // The bench crate shares the workspace version with the engine crate.
                version: env!("CARGO_PKG_VERSION").to_string(),
                library: None,
                warning: None,
                settings,
            },
        })
    }

    fn write_options(&self, mode: WriteMode) -> &shale::WriteOptions {
        if mode.sync {
            &self.write_sync
        } else {
            &self.write_async
        }
    }
}

impl Engine for ShaleEngine {
    fn info(&self) -> &EngineInfo {
        &self.info
    }

    fn put(&self, key: &[u8], value: &[u8], mode: WriteMode) -> Result<()> {
        self.db
            .put_opt(key, value, self.write_options(mode))
            .map_err(shale_err("put"))
    }

    fn get(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        // Into the caller's buffer, as LevelDB's db_bench reads into one reused string.
        self.db.get_into(key, out).map_err(shale_err("get"))
    }

    fn delete(&self, key: &[u8], mode: WriteMode) -> Result<()> {
        self.db
            .delete_opt(key, self.write_options(mode))
            .map_err(shale_err("delete"))
    }

    fn write_with(
        &self,
        hint: BatchHint,
        fill: &mut dyn FnMut(&mut dyn BatchSink) -> Result<()>,
        mode: WriteMode,
    ) -> Result<()> {
        // Sized up front, as a user filling a large batch would: a kind byte and the varint
        // lengths of its key and value frame each record, 3 bytes while both are under 128
        // bytes (as in every batched benchmark; a longer one costs a reallocation at most).
        let mut batch = ShaleBatch {
            batch: shale::WriteBatch::with_capacity(hint.payload_bytes + 3 * hint.entries),
            merge: self.merge,
        };
        fill(&mut batch)?;
        self.db
            .write_opt(batch.batch, self.write_options(mode))
            .map_err(shale_err("write"))
    }

    fn supports_merge(&self) -> bool {
        self.merge
    }

    fn merge(&self, key: &[u8], operand: &[u8], mode: WriteMode) -> Result<()> {
        if !self.merge {
            return Err(no_merge_operator(NAME));
        }
        self.db
            .merge_opt(key, operand, self.write_options(mode))
            .map_err(shale_err("merge"))
    }

    fn scan(
        &self,
        direction: Direction,
        start: Option<&[u8]>,
        visit: &mut Visitor<'_>,
    ) -> Result<()> {
        let mut it = self.db.iter(shale::ReadOptions::default());
        match (direction, start) {
            (Direction::Forward, None) => it.seek_to_first(),
            (Direction::Reverse, None) => it.seek_to_last(),
            (Direction::Forward, Some(k)) => it.seek(k),
            (Direction::Reverse, Some(k)) => it.seek_for_prev(k),
        }
        while it.valid() {
            if !visit(it.key(), it.value()) {
                break;
            }
            match direction {
                Direction::Forward => it.next(),
                Direction::Reverse => it.prev(),
            }
        }
        it.status().map_err(shale_err("scan"))
    }

    fn compact(&self) -> Result<()> {
        self.db
            .compact_range(None, None)
            .map_err(shale_err("compact"))
    }

    fn stats(&self) -> Result<String> {
        Ok(self
            .db
            .property("shale.stats")
            .unwrap_or_else(|| "shale.stats: not available\n".to_string()))
    }
}

/// The batch a write is built in ([`Engine::write_with`]).
struct ShaleBatch {
    batch: shale::WriteBatch,
    /// Whether the database has a merge operator.
    merge: bool,
}

impl BatchSink for ShaleBatch {
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.batch.put(key, value);
        Ok(())
    }

    fn delete(&mut self, key: &[u8]) -> Result<()> {
        self.batch.delete(key);
        Ok(())
    }

    fn merge(&mut self, key: &[u8], operand: &[u8]) -> Result<()> {
        if !self.merge {
            return Err(no_merge_operator(NAME));
        }
        self.batch.merge(key, operand);
        Ok(())
    }
}
