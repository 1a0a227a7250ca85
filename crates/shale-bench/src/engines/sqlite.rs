//! SQLite, from Debian's `libsqlite3` through `rusqlite` (without its `bundled` feature, so
//! the system library is linked).
//!
//! Configured as LevelDB's and Symas' SQLite benchmarks do: WAL journal, exclusive locking,
//! `synchronous=OFF` (FULL with `--sync`), a page cache of `--cache_size` bytes, one
//! transaction per batch (and SQLite's implicit one per statement otherwise), and a table
//! `(k BLOB PRIMARY KEY, v BLOB) WITHOUT ROWID` so rows live in the key's B-tree like the
//! other engines' entries. `compact` runs VACUUM and truncates the WAL, SQLite's way of
//! giving space back. SQLite has no merge operator.
//!
//! Thread-safety: one connection behind a mutex. Exclusive locking mode allows no second
//! connection, so concurrent clients take turns, which is how SQLite serves such a load.

use std::path::PathBuf;

use parking_lot::Mutex;
use rusqlite::{params, Connection, OptionalExtension};

use super::{
    library_of, no_merges, setting, BatchHint, BatchSink, Direction, Engine, EngineConfig,
    EngineInfo, Visitor, WriteMode,
};
use crate::error::{Error, Result};

const NAME: &str = "sqlite";
/// The database file inside the benchmark directory.
const FILE_NAME: &str = "bench.sqlite";

const SQL_PUT: &str = "INSERT OR REPLACE INTO kv (k, v) VALUES (?1, ?2)";
const SQL_GET: &str = "SELECT v FROM kv WHERE k = ?1";
const SQL_DELETE: &str = "DELETE FROM kv WHERE k = ?1";

fn sql_err(op: &'static str) -> impl Fn(rusqlite::Error) -> Error {
    move |e| Error::engine(NAME, op, e.to_string())
}

struct State {
    conn: Connection,
    /// The `synchronous` pragma now in force: switched only when a write asks for a mode
    /// other than the last one, so `fillsync` pays one pragma, not one per write.
    synchronous_full: bool,
}

impl State {
    fn set_sync(&mut self, full: bool) -> Result<()> {
        if full != self.synchronous_full {
            let pragma = if full { "FULL" } else { "OFF" };
            self.conn
                .pragma_update(None, "synchronous", pragma)
                .map_err(sql_err("pragma synchronous"))?;
            self.synchronous_full = full;
        }
        Ok(())
    }
}

/// An open SQLite database.
pub struct Sqlite {
    state: Mutex<State>,
    sync_all: bool,
    info: EngineInfo,
}

impl Sqlite {
    /// Opens (creating if missing) `bench.sqlite` in `config.path`.
    pub fn open(config: &EngineConfig) -> Result<Self> {
        let file: PathBuf = config.path.join(FILE_NAME);
        let conn = Connection::open(&file).map_err(sql_err("open"))?;
        let cache_kib = (config.cache_size / 1024).max(1);
        let synchronous = if config.sync { "FULL" } else { "OFF" };
        conn.pragma_update(None, "locking_mode", "EXCLUSIVE")
            .map_err(sql_err("pragma locking_mode"))?;
        // SQLite answers with the mode it took, which need not be the one asked for.
        let mode: String = conn
            .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
            .map_err(sql_err("pragma journal_mode"))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(Error::engine(
                NAME,
                "pragma journal_mode",
                format!("asked for WAL, SQLite chose {mode}"),
            ));
        }
        conn.pragma_update(None, "synchronous", synchronous)
            .map_err(sql_err("pragma synchronous"))?;
        // A negative cache_size is a budget in KiB rather than in pages.
        conn.pragma_update(None, "cache_size", -(cache_kib as i64))
            .map_err(sql_err("pragma cache_size"))?;
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS kv (k BLOB PRIMARY KEY, v BLOB) WITHOUT ROWID",
        )
        .map_err(sql_err("create table"))?;
        let page_size: i64 = conn
            .pragma_query_value(None, "page_size", |r| r.get(0))
            .map_err(sql_err("pragma page_size"))?;
        let mut settings = vec![
            "journal_mode=WAL".to_string(),
            "locking_mode=EXCLUSIVE".to_string(),
            setting("synchronous", synchronous),
            setting("cache_size", format!("-{cache_kib} (KiB)")),
            setting("page_size", page_size),
            "table=(k BLOB PRIMARY KEY, v BLOB) WITHOUT ROWID".to_string(),
            "compression=none".to_string(),
        ];
        if config.disable_wal {
            settings.push("disable_wal=ignored".to_string());
        }
        let library = library_of(rusqlite::ffi::sqlite3_libversion as *const libc::c_void);
        Ok(Sqlite {
            state: Mutex::new(State {
                conn,
                synchronous_full: config.sync,
            }),
            sync_all: config.sync,
            info: EngineInfo {
                name: NAME,
                version: rusqlite::version().to_string(),
                library: library.map(|p| p.display().to_string()),
                warning: None,
                settings,
            },
        })
    }
}

impl Engine for Sqlite {
    fn info(&self) -> &EngineInfo {
        &self.info
    }

    fn put(&self, key: &[u8], value: &[u8], mode: WriteMode) -> Result<()> {
        let mut state = self.state.lock();
        state.set_sync(mode.sync || self.sync_all)?;
        let mut stmt = state
            .conn
            .prepare_cached(SQL_PUT)
            .map_err(sql_err("prepare"))?;
        stmt.execute(params![key, value]).map_err(sql_err("put"))?;
        Ok(())
    }

    fn get(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        // Cleared on a miss too, as the trait says: a stale value would count in MB/s.
        out.clear();
        let state = self.state.lock();
        let mut stmt = state
            .conn
            .prepare_cached(SQL_GET)
            .map_err(sql_err("prepare"))?;
        let found = stmt
            .query_row(params![key], |row| {
                let v = row.get_ref(0)?.as_blob_or_null()?.unwrap_or(&[]);
                out.clear();
                out.extend_from_slice(v);
                Ok(())
            })
            .optional()
            .map_err(sql_err("get"))?;
        Ok(found.is_some())
    }

    fn delete(&self, key: &[u8], mode: WriteMode) -> Result<()> {
        let mut state = self.state.lock();
        state.set_sync(mode.sync || self.sync_all)?;
        let mut stmt = state
            .conn
            .prepare_cached(SQL_DELETE)
            .map_err(sql_err("prepare"))?;
        stmt.execute(params![key]).map_err(sql_err("delete"))?;
        Ok(())
    }

    fn write_with(
        &self,
        _hint: BatchHint,
        fill: &mut dyn FnMut(&mut dyn BatchSink) -> Result<()>,
        mode: WriteMode,
    ) -> Result<()> {
        // A transaction, as SQLite's db_bench batches: nothing to reserve.
        let mut state = self.state.lock();
        state.set_sync(mode.sync || self.sync_all)?;
        let txn = state.conn.transaction().map_err(sql_err("begin"))?;
        {
            let mut sink = SqliteBatch {
                put: txn.prepare_cached(SQL_PUT).map_err(sql_err("prepare"))?,
                delete: txn.prepare_cached(SQL_DELETE).map_err(sql_err("prepare"))?,
            };
            fill(&mut sink)?;
        }
        txn.commit().map_err(sql_err("commit"))
    }

    fn scan(
        &self,
        direction: Direction,
        start: Option<&[u8]>,
        visit: &mut Visitor<'_>,
    ) -> Result<()> {
        let state = self.state.lock();
        let sql = match (direction, start.is_some()) {
            (Direction::Forward, false) => "SELECT k, v FROM kv ORDER BY k",
            (Direction::Forward, true) => "SELECT k, v FROM kv WHERE k >= ?1 ORDER BY k",
            (Direction::Reverse, false) => "SELECT k, v FROM kv ORDER BY k DESC",
            (Direction::Reverse, true) => "SELECT k, v FROM kv WHERE k <= ?1 ORDER BY k DESC",
        };
        let mut stmt = state.conn.prepare_cached(sql).map_err(sql_err("prepare"))?;
        let mut rows = match start {
            Some(s) => stmt.query(params![s]),
            None => stmt.query([]),
        }
        .map_err(sql_err("scan"))?;
        while let Some(row) = rows.next().map_err(sql_err("scan"))? {
            let k = row
                .get_ref(0)
                .and_then(|v| Ok(v.as_blob_or_null()?.unwrap_or(&[])))
                .map_err(sql_err("scan"))?;
            let v = row
                .get_ref(1)
                .and_then(|v| Ok(v.as_blob_or_null()?.unwrap_or(&[])))
                .map_err(sql_err("scan"))?;
            if !visit(k, v) {
                break;
            }
        }
        Ok(())
    }

    fn compact(&self) -> Result<()> {
        let state = self.state.lock();
        state
            .conn
            .execute_batch("VACUUM; PRAGMA wal_checkpoint(TRUNCATE);")
            .map_err(sql_err("vacuum"))
    }

    fn stats(&self) -> Result<String> {
        let state = self.state.lock();
        let mut text = String::new();
        for pragma in ["page_size", "page_count", "freelist_count", "cache_size"] {
            let value: i64 = state
                .conn
                .pragma_query_value(None, pragma, |r| r.get(0))
                .map_err(sql_err("pragma"))?;
            text.push_str(&format!("{pragma}: {value}\n"));
        }
        Ok(text)
    }
}

/// The statements a batch's transaction runs ([`Engine::write_with`]).
struct SqliteBatch<'c> {
    put: rusqlite::CachedStatement<'c>,
    delete: rusqlite::CachedStatement<'c>,
}

impl BatchSink for SqliteBatch<'_> {
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.put
            .execute(params![key, value])
            .map_err(sql_err("put"))?;
        Ok(())
    }

    fn delete(&mut self, key: &[u8]) -> Result<()> {
        self.delete
            .execute(params![key])
            .map_err(sql_err("delete"))?;
        Ok(())
    }

    fn merge(&mut self, _key: &[u8], _operand: &[u8]) -> Result<()> {
        Err(no_merges(NAME))
    }
}
