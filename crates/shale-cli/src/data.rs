//! Data commands: get, put, delete, scan, count, and the bulk pair load and dump.
//!
//! Reads open the database read-only; single writes are synced before the command returns;
//! `load` writes atomic batches and syncs the last one, so when it exits 0 every record is
//! durable. `dump` walks the database in key order and writes records that `load` turns back
//! into the same keys and values.
//!
//! Thread-safety: single-threaded.

use std::ffi::{OsStr, OsString};
use std::io::{BufRead, BufReader, BufWriter, IsTerminal, Write};
use std::path::Path;
use std::time::Duration;

use shale::{Db, ReadOptions, WriteBatch, WriteOptions};

use crate::encoding::escape;
use crate::failure::{CliResult, Exit, Failure};
use crate::records::{write_record, Format, RecordReader};
use crate::Context;

/// Input buffer for `load`.
const LOAD_BUFFER_BYTES: usize = 1 << 20;
/// Bytes of records after which `load` writes its batch even before it has `batch_size`
/// records, so that large values never build a batch near the engine's limit.
const LOAD_BATCH_BYTES_MAX: usize = 64 << 20;

const SYNCED: WriteOptions = WriteOptions {
    sync: true,
    disable_wal: false,
};

/// A key quoted for a message, in escaped text whatever the encoding.
pub fn quote(key: &[u8]) -> String {
    format!("\"{}\"", escape(key))
}

fn stdout() -> BufWriter<std::io::StdoutLock<'static>> {
    BufWriter::with_capacity(64 * 1024, std::io::stdout().lock())
}

/// `get DB KEY`.
pub fn get(ctx: &Context, db_path: &Path, key: &OsStr, raw: bool) -> CliResult {
    let key = ctx.arg_bytes("KEY", key)?;
    let db = ctx.open_read_only(db_path)?;
    match db.get(&key)? {
        Some(value) => {
            let mut out = stdout();
            if raw {
                out.write_all(&value)?;
            } else {
                writeln!(out, "{}", ctx.encoding.encode(&value))?;
            }
            out.flush()?;
            Ok(())
        }
        None => Err(Failure::new(
            Exit::NotFound,
            format!("key {} not found in {}", quote(&key), db_path.display()),
        )),
    }
}

/// `put DB KEY VALUE`.
pub fn put(ctx: &Context, db_path: &Path, key: &OsStr, value: &OsStr) -> CliResult {
    let key = ctx.arg_bytes("KEY", key)?;
    let value = ctx.arg_bytes("VALUE", value)?;
    let db = ctx.open_writable(db_path, true)?;
    db.put_opt(&key, &value, &SYNCED)?;
    Ok(())
}

/// `delete DB KEY`.
pub fn delete(ctx: &Context, db_path: &Path, key: &OsStr) -> CliResult {
    let key = ctx.arg_bytes("KEY", key)?;
    let db = ctx.open_writable(db_path, false)?;
    db.delete_opt(&key, &SYNCED)?;
    Ok(())
}

/// The smallest key greater than every key starting with `prefix`, or `None` if there is none
/// (the prefix is empty or all 0xff bytes).
fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// Read options bounding an iterator to `[from, to)` intersected with the keys starting with
/// `prefix`; `None` when the range is empty.
fn range_options(
    ctx: &Context,
    from: Option<OsString>,
    to: Option<OsString>,
    prefix: Option<OsString>,
) -> CliResult<Option<ReadOptions>> {
    let mut lower = from.map(|k| ctx.arg_bytes("--from", &k)).transpose()?;
    let mut upper = to.map(|k| ctx.arg_bytes("--to", &k)).transpose()?;
    if let Some(prefix) = prefix {
        let prefix = ctx.arg_bytes("--prefix", &prefix)?;
        if lower.as_ref().is_none_or(|l| *l < prefix) {
            lower = Some(prefix.clone());
        }
        if let Some(end) = prefix_successor(&prefix) {
            if upper.as_ref().is_none_or(|u| *u > end) {
                upper = Some(end);
            }
        }
    }
    if let (Some(l), Some(u)) = (&lower, &upper) {
        if l >= u {
            return Ok(None);
        }
    }
    Ok(Some(ReadOptions {
        lower_bound: lower,
        upper_bound: upper,
        dont_fill_cache: true,
        ..ReadOptions::default()
    }))
}

/// What [`walk`] calls for each record: return false to stop.
type Visitor<'a> = dyn FnMut(&[u8], &[u8]) -> CliResult<bool> + 'a;

/// Calls `visit` for each record of `db` within `options`, in order (or reversed), until it
/// returns false; then reports any read error. Without `values`, `visit` gets an empty value
/// and no value is read (a separated one would cost a blob file read).
fn walk(
    db: &Db,
    options: Option<ReadOptions>,
    reverse: bool,
    values: bool,
    visit: &mut Visitor<'_>,
) -> CliResult {
    let Some(options) = options else {
        return Ok(());
    };
    let mut it = db.iter(options);
    if reverse {
        it.seek_to_last();
    } else {
        it.seek_to_first();
    }
    while it.valid() {
        // A value that cannot be read from its blob file fails the command, never prints empty.
        let value = if values { it.try_value()? } else { &[] };
        if !visit(it.key(), value)? {
            return Ok(());
        }
        if reverse {
            it.prev();
        } else {
            it.next();
        }
    }
    it.status()?;
    Ok(())
}

/// The arguments of `scan`.
pub struct ScanArgs {
    /// Inclusive lower bound.
    pub from: Option<OsString>,
    /// Exclusive upper bound.
    pub to: Option<OsString>,
    /// Key prefix.
    pub prefix: Option<OsString>,
    /// Most records to print.
    pub limit: Option<u64>,
    /// Walk backwards.
    pub reverse: bool,
    /// Print keys only.
    pub keys_only: bool,
    /// Output format.
    pub format: Format,
}

/// `scan DB [--from K] [--to K] [--prefix P] [--limit N] [--reverse] [--keys-only]`.
pub fn scan(ctx: &Context, db_path: &Path, args: &ScanArgs) -> CliResult {
    let options = range_options(ctx, args.from.clone(), args.to.clone(), args.prefix.clone())?;
    let db = ctx.open_read_only(db_path)?;
    let mut out = stdout();
    let mut printed = 0u64;
    if args.limit == Some(0) {
        return Ok(());
    }
    walk(
        &db,
        options,
        args.reverse,
        !args.keys_only,
        &mut |key, value| {
            let value = (!args.keys_only).then_some(value);
            write_record(&mut out, args.format, ctx.encoding, key, value)?;
            printed += 1;
            Ok(args.limit.is_none_or(|limit| printed < limit))
        },
    )?;
    out.flush()?;
    Ok(())
}

/// `count DB [--from K] [--to K] [--prefix P]`.
pub fn count(
    ctx: &Context,
    db_path: &Path,
    from: Option<OsString>,
    to: Option<OsString>,
    prefix: Option<OsString>,
) -> CliResult {
    let options = range_options(ctx, from, to, prefix)?;
    let db = ctx.open_read_only(db_path)?;
    let mut n = 0u64;
    walk(&db, options, false, false, &mut |_, _| {
        n += 1;
        Ok(true)
    })?;
    let mut out = stdout();
    writeln!(out, "{n}")?;
    out.flush()?;
    Ok(())
}

/// `dump DB [--format F]`.
pub fn dump(ctx: &Context, db_path: &Path, format: Format) -> CliResult {
    let db = ctx.open_read_only(db_path)?;
    let mut out = stdout();
    let options = Some(ReadOptions {
        dont_fill_cache: true,
        ..ReadOptions::default()
    });
    walk(&db, options, false, true, &mut |key, value| {
        write_record(&mut out, format, ctx.encoding, key, Some(value))?;
        Ok(true)
    })?;
    out.flush()?;
    Ok(())
}

/// A progress line on stderr, shown only when stderr is a terminal.
struct Progress {
    bar: Option<indicatif::ProgressBar>,
}

impl Progress {
    fn new(enabled: bool) -> Progress {
        if !enabled || !std::io::stderr().is_terminal() {
            return Progress { bar: None };
        }
        let bar =
            indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::stderr());
        let style = indicatif::ProgressStyle::with_template(
            "{spinner} {human_pos} records loaded, {msg} [{elapsed}]",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner());
        bar.set_style(style);
        bar.enable_steady_tick(Duration::from_millis(200));
        Progress { bar: Some(bar) }
    }

    fn update(&self, records: u64, bytes: u64) {
        if let Some(bar) = &self.bar {
            bar.set_position(records);
            bar.set_message(format!("{} read", indicatif::HumanBytes(bytes)));
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// `load DB [--format F] [--batch-size N]`.
pub fn load(
    ctx: &Context,
    db_path: &Path,
    format: Format,
    batch_size: u64,
    no_progress: bool,
) -> CliResult {
    let stdin = std::io::stdin();
    let input = BufReader::with_capacity(LOAD_BUFFER_BYTES, stdin.lock());
    load_from(ctx, db_path, input, format, batch_size, no_progress)
}

fn load_from(
    ctx: &Context,
    db_path: &Path,
    input: impl BufRead,
    format: Format,
    batch_size: u64,
    no_progress: bool,
) -> CliResult {
    let db = ctx.open_writable(db_path, true)?;
    let mut reader = RecordReader::new(input, format, ctx.encoding);
    let progress = Progress::new(!no_progress);
    let mut batch = WriteBatch::new();
    let mut written = 0u64;
    let write = |db: &Db, batch: &mut WriteBatch, sync: bool| -> CliResult<u64> {
        let n = u64::from(batch.count());
        let options = WriteOptions {
            sync,
            disable_wal: false,
        };
        db.write_opt(std::mem::take(batch), &options)?;
        Ok(n)
    };
    loop {
        let record = match reader.next_record() {
            Ok(r) => r,
            Err(mut failure) => {
                progress.finish();
                // Keep what came before the bad line, and say so.
                written += write(&db, &mut batch, true)?;
                failure.message = format!(
                    "{}\nthe {written} records before line {} were loaded into {}",
                    failure.message,
                    reader.line_number(),
                    db_path.display()
                );
                return Err(failure);
            }
        };
        let Some((key, value)) = record else { break };
        // A full batch is written only once another record arrives, so the batch written last
        // is never empty and its sync makes every earlier (unsynced) batch durable too: the WAL
        // is written in order.
        if u64::from(batch.count()) >= batch_size || batch.data_size() >= LOAD_BATCH_BYTES_MAX {
            written += write(&db, &mut batch, false)?;
            progress.update(written, reader.bytes_read());
        }
        batch.put(&key, &value);
    }
    written += write(&db, &mut batch, true)?;
    progress.finish();
    eprintln!(
        "loaded {written} records from {} lines into {}",
        reader.line_number(),
        db_path.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_successor_skips_trailing_ff() {
        assert_eq!(prefix_successor(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_successor(b"a\xff"), Some(b"b".to_vec()));
        assert_eq!(prefix_successor(b"\xff\xff"), None);
        assert_eq!(prefix_successor(b""), None);
    }
}
