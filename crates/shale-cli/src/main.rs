//! `shale`: the command-line tool for shale databases.
//!
//! Owns argument parsing, opening databases the right way for each command (read-only commands
//! open with [`shale::Db::open_read_only`], take no lock and write nothing), and turning every
//! failure into a plain message on stderr and an exit code scripts can rely on (see
//! [`failure`]). The commands themselves live in [`data`] (get, put, delete, scan, count, load,
//! dump), [`inspect`] (sst-dump, wal-dump, manifest-dump) and [`health`] (stats, check, compact,
//! repair, checkpoint, destroy). Keys and values cross the command line in one of the
//! encodings of [`encoding`]; bulk records use the formats of [`records`].
//!
//! Thread-safety: single-threaded; the engine runs its own background threads for commands
//! that open a database for writing.

mod data;
mod encoding;
mod failure;
mod health;
mod inspect;
mod records;

use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::{Args, Parser, Subcommand};

use encoding::Encoding;
use failure::{CliResult, Exit, Failure};
use records::Format;

/// The encoding and exit-code notes, shown after the top-level help.
macro_rules! exit_codes {
    () => {
        "\
Keys and values are escaped text by default: printable characters as they are, and \\\\, \\t, \\n,
\\r and \\xHH for a backslash, tab, newline, carriage return and any other byte. --hex and --base64
switch every key and value, on the command line, in input and in output. A key that starts with
'-' goes after `--` (shale get ./db -- -5) or straight after an option (--from -5).

Exit codes:
  0  success
  1  not found (get of a missing key)
  2  usage: bad arguments, a bad escape or encoding, malformed load input
  3  corruption: damaged data, check found a problem, or repair lost data
  4  I/O error, or the output closed before a dump or a check was complete (other commands
     stop quietly with 0 when their reader goes away, as `shale scan db | head` expects)
  5  anything else, e.g. the database is in use by another process or does not exist"
    };
}

/// The shale command-line tool.
#[derive(Debug, Parser)]
#[command(
    name = "shale",
    version,
    about = "Read, write, load, dump, inspect, check, repair and copy shale databases.",
    long_about = "Read, write, load, dump, inspect, check, repair and copy shale databases.\n\n\
        Read-only commands (get, scan, count, dump, stats, check, manifest-dump) take no lock \
        and write nothing, so they work beside a process that has the database open. Commands \
        that write need the database to themselves.",
    after_help = exit_codes!(),
    after_long_help = concat!(
        "Examples:\n",
        "  shale put ./db user:1 alice\n",
        "  shale get ./db user:1\n",
        "  shale scan ./db --prefix user: --limit 10\n",
        "  shale dump ./db | shale load ./copy\n",
        "  shale check ./db\n\n",
        exit_codes!()
    )
)]
struct Cli {
    #[command(flatten)]
    global: GlobalArgs,
    #[command(subcommand)]
    command: Command,
}

/// Flags that apply to every command.
#[derive(Debug, Args)]
struct GlobalArgs {
    /// Keys and values (arguments, input and output) are hex.
    #[arg(long, global = true, conflicts_with = "base64")]
    hex: bool,
    /// Keys and values (arguments, input and output) are standard base64.
    #[arg(long, global = true)]
    base64: bool,
    /// The merge operator the database's merge operands are combined with: uint64add, max,
    /// stringappend or stringappend:DELIMITER. Needed to read keys written with merge.
    #[arg(long, global = true, value_name = "NAME")]
    merge_operator: Option<String>,
}

/// Key range flags shared by scan and count.
#[derive(Debug, Args)]
struct RangeArgs {
    /// Start at this key (inclusive).
    #[arg(long, value_name = "KEY", allow_hyphen_values = true)]
    from: Option<OsString>,
    /// Stop before this key (exclusive).
    #[arg(long, value_name = "KEY", allow_hyphen_values = true)]
    to: Option<OsString>,
    /// Only keys that start with this prefix (combines with --from and --to).
    #[arg(long, value_name = "PREFIX", allow_hyphen_values = true)]
    prefix: Option<OsString>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the value of a key; exit code 1 if it is not there.
    #[command(after_help = "Example:\n  shale get ./db user:42\n  shale get --hex ./db 00ff")]
    Get {
        /// Database directory.
        db: PathBuf,
        /// The key.
        key: OsString,
        /// Write the value's bytes exactly as stored, with no encoding and no newline.
        #[arg(long)]
        raw: bool,
    },
    /// Set a key to a value (creates the database if it does not exist).
    #[command(after_help = "Example:\n  shale put ./db user:42 'Ada Lovelace'\n  \
                            shale put ./db 'bin\\x00key' 'tab\\tseparated'")]
    Put {
        /// Database directory.
        db: PathBuf,
        /// The key.
        key: OsString,
        /// The value.
        value: OsString,
    },
    /// Remove a key (not an error if it is absent).
    #[command(after_help = "Example:\n  shale delete ./db user:42")]
    Delete {
        /// Database directory.
        db: PathBuf,
        /// The key.
        key: OsString,
    },
    /// Print keys and values in order, as KEY<TAB>VALUE lines.
    #[command(
        after_help = "Examples:\n  shale scan ./db --prefix user: --limit 10\n  \
                            shale scan ./db --from a --to m --reverse --keys-only"
    )]
    Scan {
        /// Database directory.
        db: PathBuf,
        #[command(flatten)]
        range: RangeArgs,
        /// Print at most this many records.
        #[arg(long, value_name = "N")]
        limit: Option<u64>,
        /// Walk from the last key to the first.
        #[arg(long)]
        reverse: bool,
        /// Print keys only.
        #[arg(long)]
        keys_only: bool,
        /// Output format.
        #[arg(long, value_enum, default_value = "tsv")]
        format: Format,
    },
    /// Print the number of keys (in a range, if given).
    #[command(after_help = "Example:\n  shale count ./db --prefix user:")]
    Count {
        /// Database directory.
        db: PathBuf,
        #[command(flatten)]
        range: RangeArgs,
    },
    /// Write records read from stdin, in batches (creates the database if needed).
    #[command(
        long_about = "Write key/value records read from stdin into the database, in atomic \
            batches; the last batch is synced. Input is KEY<TAB>VALUE lines (or JSON lines with \
            --format jsonl) in the same encoding as every other key, so the output of `dump` \
            loads back exactly. A progress line is shown on stderr when it is a terminal. On a \
            malformed line, every record before it is written and the line is named.",
        after_help = "Examples:\n  printf 'a\\t1\\nb\\t2\\n' | shale load ./db\n  \
                      shale dump --hex ./old | shale load --hex ./new"
    )]
    Load {
        /// Database directory.
        db: PathBuf,
        /// Input format.
        #[arg(long, value_enum, default_value = "tsv")]
        format: Format,
        /// Records per write batch.
        #[arg(long, default_value_t = 1000, value_name = "N",
              value_parser = clap::value_parser!(u64).range(1..))]
        batch_size: u64,
        /// Never show the progress line.
        #[arg(long)]
        no_progress: bool,
    },
    /// Write every live record to stdout in a format `load` reads back exactly. Keys and values
    /// only: a record's expiry (TTL) is not in the dump, so loaded records do not expire, and
    /// expired records are left out.
    #[command(after_help = "Example:\n  shale dump ./db > backup.tsv\n  \
                            shale dump --base64 --format jsonl ./db > backup.jsonl")]
    Dump {
        /// Database directory.
        db: PathBuf,
        /// Output format.
        #[arg(long, value_enum, default_value = "tsv")]
        format: Format,
    },
    /// Print a table file: footer, properties, metaindex, index, bloom filter, entries.
    #[command(after_help = "Example:\n  shale sst-dump ./db/000012.sst --verify --entries")]
    SstDump {
        /// The .sst file.
        file: PathBuf,
        /// Read every block and check its checksum and key order; exit code 3 on damage.
        #[arg(long)]
        verify: bool,
        /// Print every entry with its sequence number and kind.
        #[arg(long)]
        entries: bool,
    },
    /// Print a WAL file: its records, the batches they hold, and where a torn tail begins.
    #[command(after_help = "Example:\n  shale wal-dump ./db/000011.log")]
    WalDump {
        /// The .log file.
        file: PathBuf,
    },
    /// Print every version edit of the live manifest, then the levels it describes.
    #[command(after_help = "Examples:\n  shale manifest-dump ./db\n  \
                            shale manifest-dump ./db/MANIFEST-000007")]
    ManifestDump {
        /// Database directory (reads the manifest CURRENT names), or a manifest file.
        path: PathBuf,
    },
    /// Print the database's statistics: levels, files, sizes, compaction work, memory.
    #[command(after_help = "Example:\n  shale stats ./db")]
    Stats {
        /// Database directory.
        db: PathBuf,
    },
    /// Verify every live table block, the manifest's level invariants and every live WAL.
    #[command(
        long_about = "Verify the database without changing it: read every block of every live \
            table and check its checksum and key order, check that the manifest decodes and \
            that each level's key ranges are ordered and do not overlap (level 0 excepted), \
            that each table's recorded key range and size match the file, and read every live \
            WAL to its end. Prints one line per file; exits with code 3 naming every damaged \
            file and offset. It takes no lock: on a database another process is writing, a \
            table compacted away during the check shows as missing, and a second run settles it.",
        after_help = "Example:\n  shale check ./db || shale repair ./db"
    )]
    Check {
        /// Database directory.
        db: PathBuf,
    },
    /// Compact a key range (default: everything) down the levels.
    #[command(
        after_help = "Examples:\n  shale compact ./db\n  shale compact ./db --from a --to f"
    )]
    Compact {
        /// Database directory.
        db: PathBuf,
        /// First key of the range (inclusive; default: the first key).
        #[arg(long, value_name = "KEY", allow_hyphen_values = true)]
        from: Option<OsString>,
        /// Last key of the range (inclusive; default: the last key).
        #[arg(long, value_name = "KEY", allow_hyphen_values = true)]
        to: Option<OsString>,
    },
    /// Salvage a damaged database: rewrite every readable entry, move damaged files to lost/.
    #[command(
        long_about = "Salvage a damaged database: rewrite every readable entry, move damaged \
            files to lost/. Prints what it scanned, salvaged and lost; exits with code 3 when \
            anything was lost (a torn WAL tail too), 0 when nothing was.",
        after_help = "Example:\n  shale repair ./db"
    )]
    Repair {
        /// Database directory.
        db: PathBuf,
    },
    /// Write a consistent copy of the database into a new directory.
    #[command(
        long_about = "Write a consistent copy of the database into DEST, which must not exist \
            or be empty. The memtable is flushed first; tables are hard-linked where possible. \
            The copy opens as a database of its own.",
        after_help = "Example:\n  shale checkpoint ./db ./backup-2024-06-01"
    )]
    Checkpoint {
        /// Database directory.
        db: PathBuf,
        /// Destination directory.
        dest: PathBuf,
    },
    /// Delete the database (asks for confirmation on stdin unless --yes).
    #[command(after_help = "Examples:\n  shale destroy ./db\n  shale destroy --yes ./scratch")]
    Destroy {
        /// Database directory.
        db: PathBuf,
        /// Do not ask.
        #[arg(long)]
        yes: bool,
    },
}

/// What every command gets: the encoding and how to build options.
pub struct Context {
    /// How keys and values are written.
    pub encoding: Encoding,
    merge_operator: Option<Arc<dyn shale::MergeOperator>>,
}

impl Context {
    /// Options for opening a database; `create` allows creating a missing one.
    pub fn options(&self, create: bool) -> shale::Options {
        shale::Options {
            create_if_missing: create,
            merge_operator: self.merge_operator.clone(),
            ..shale::Options::default()
        }
    }

    /// Opens `db` without a lock and without writing anything.
    pub fn open_read_only(&self, db: &Path) -> CliResult<shale::Db> {
        shale::Db::open_read_only(db, self.options(false)).map_err(|e| open_failure(db, e))
    }

    /// Opens `db` for writing, creating it if `create`.
    pub fn open_writable(&self, db: &Path, create: bool) -> CliResult<shale::Db> {
        shale::Db::open(db, self.options(create)).map_err(|e| open_failure(db, e))
    }

    /// Decodes a key (or value) given on the command line; `what` names it in messages.
    pub fn arg_bytes(&self, what: &str, arg: &OsStr) -> CliResult<Vec<u8>> {
        self.encoding
            .decode(arg.as_encoded_bytes())
            .map_err(|e| Failure::usage(format!("{what}: {e}")))
    }
}

/// Explains a failed open; a missing database gets a message naming the directory.
fn open_failure(db: &Path, e: shale::Error) -> Failure {
    match e {
        shale::Error::Exists(m) => Failure::new(
            failure::Exit::Other,
            format!("{m} (looked for {})", db.join("CURRENT").display()),
        ),
        other => Failure::from_engine(other),
    }
}

fn merge_operator(name: &str) -> CliResult<Arc<dyn shale::MergeOperator>> {
    Ok(match name {
        "uint64add" => Arc::new(shale::UInt64AddOperator),
        "max" => Arc::new(shale::MaxOperator),
        "stringappend" => Arc::new(shale::StringAppendOperator::new(b",")),
        other => match other.strip_prefix("stringappend:") {
            Some(delimiter) => Arc::new(shale::StringAppendOperator::new(delimiter.as_bytes())),
            None => {
                return Err(Failure::usage(format!(
                    "unknown merge operator {other:?}; expected uint64add, max, stringappend \
                     or stringappend:DELIMITER"
                )))
            }
        },
    })
}

/// A reader that goes away ends most commands quietly, as `head` expects. Not these two: a
/// dump cut short is not a backup, and a check cut short has no verdict, so success would
/// mislead a pipeline (`shale dump db | gzip > backup`, `shale check db | head`).
fn cut_short(failure: Failure, command: &str) -> Failure {
    if failure.output_closed {
        Failure::new(
            Exit::Io,
            format!("output closed before the {command} was complete"),
        )
    } else {
        failure
    }
}

fn run(cli: Cli) -> CliResult {
    let ctx = Context {
        encoding: Encoding::from_flags(cli.global.hex, cli.global.base64),
        merge_operator: cli
            .global
            .merge_operator
            .as_deref()
            .map(merge_operator)
            .transpose()?,
    };
    match cli.command {
        Command::Get { db, key, raw } => data::get(&ctx, &db, &key, raw),
        Command::Put { db, key, value } => data::put(&ctx, &db, &key, &value),
        Command::Delete { db, key } => data::delete(&ctx, &db, &key),
        Command::Scan {
            db,
            range,
            limit,
            reverse,
            keys_only,
            format,
        } => data::scan(
            &ctx,
            &db,
            &data::ScanArgs {
                from: range.from,
                to: range.to,
                prefix: range.prefix,
                limit,
                reverse,
                keys_only,
                format,
            },
        ),
        Command::Count { db, range } => data::count(&ctx, &db, range.from, range.to, range.prefix),
        Command::Load {
            db,
            format,
            batch_size,
            no_progress,
        } => data::load(&ctx, &db, format, batch_size, no_progress),
        Command::Dump { db, format } => {
            data::dump(&ctx, &db, format).map_err(|f| cut_short(f, "dump"))
        }
        Command::SstDump {
            file,
            verify,
            entries,
        } => inspect::sst_dump(&ctx, &file, verify, entries),
        Command::WalDump { file } => inspect::wal_dump(&ctx, &file),
        Command::ManifestDump { path } => inspect::manifest_dump(&ctx, &path),
        Command::Stats { db } => health::stats(&ctx, &db),
        Command::Check { db } => health::check(&ctx, &db).map_err(|f| cut_short(f, "check")),
        Command::Compact { db, from, to } => health::compact(&ctx, &db, from, to),
        Command::Repair { db } => health::repair(&ctx, &db),
        Command::Checkpoint { db, dest } => health::checkpoint(&ctx, &db, &dest),
        Command::Destroy { db, yes } => health::destroy(&ctx, &db, yes),
    }
}

fn main() -> std::process::ExitCode {
    // Clap exits with 2 on a usage error and 0 for --help and --version.
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(f) if f.output_closed => std::process::ExitCode::SUCCESS,
        Err(f) => {
            let mut stderr = std::io::stderr().lock();
            let _ = writeln!(stderr, "shale: {}", f.message);
            std::process::ExitCode::from(f.exit as u8)
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn command_line_definition_is_consistent() {
        super::Cli::command().debug_assert();
    }
}
