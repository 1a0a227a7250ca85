//! shale-bench: a db_bench-compatible benchmark that runs the classic LevelDB workloads on
//! shale and, in the same run, on LevelDB, RocksDB, LMDB and SQLite.
//!
//! Layers: [`flags`] parses db_bench's command line into [`flags::Settings`]; [`bench`](mod@bench) runs
//! a suite of benchmarks on one [`engines::Engine`]; [`stats`] and [`histogram`] measure;
//! [`output`] prints db_bench's header and the comparison table; [`record`] holds every
//! figure for `--json`; [`report`] draws the `--report` HTML page. Engines other than shale
//! sit behind the cargo feature `baselines`, shale behind `shale-engine`.
//!
//! See `docs/benchmarks.md` for how to reproduce published figures.

#![deny(missing_docs)]

pub mod bench;
pub mod engines;
pub mod error;
pub mod flags;
pub mod histogram;
pub mod keys;
pub mod lockstep;
pub mod output;
pub mod progress;
pub mod record;
pub mod report;
pub mod stats;
pub mod sysinfo;
pub mod values;

use std::io::Write;
use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::flags::{Settings, SettingsError};
use crate::record::{EngineRecord, RunRecord, Workload};

/// Runs the tool on a command line; returns the process exit code (0 success, 1 an engine
/// failed, 2 a usage error).
pub fn main_with_args<I, T>(args: I) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let args: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
    let settings = match Settings::from_args(args.clone()) {
        Ok(s) => s,
        Err(SettingsError::Clap(e)) => {
            // Prints help/version to stdout with exit 0, errors to stderr with exit 2.
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return code;
        }
        Err(SettingsError::Invalid(e)) => {
            eprintln!("shale-bench: error: {e}");
            return 2;
        }
    };
    let command_line: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    if let (Some(engine), Some(dir)) = (
        &settings.flags.lockstep_child,
        &settings.flags.lockstep_child_dir,
    ) {
        return lockstep::child_main(&settings, engine, dir);
    }
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match run(&settings, command_line, &mut out) {
        Ok(run) => {
            if run.engines.iter().any(|e| e.error.is_some()) {
                1
            } else {
                0
            }
        }
        Err(e) => {
            let _ = out.flush();
            eprintln!("shale-bench: error: {e}");
            match e {
                Error::Usage(_) => 2,
                _ => 1,
            }
        }
    }
}

/// Runs every engine's suite, prints results to `out`, writes `--json` and `--report`, and
/// returns the record.
pub fn run(
    settings: &Settings,
    command_line: Vec<String>,
    out: &mut dyn Write,
) -> Result<RunRecord> {
    let f = &settings.flags;
    let machine = sysinfo::Machine::read();
    // The default database lives in a fresh temporary directory, removed when `_temp` drops.
    let (_temp, root) = match &f.db {
        Some(db) => (None, db.clone()),
        None => {
            let temp = tempfile::Builder::new()
                .prefix("shale-bench-")
                .tempdir()
                .map_err(|e| Error::io("create temporary directory", std::env::temp_dir(), e))?;
            let root = temp.path().to_path_buf();
            (Some(temp), root)
        }
    };
    let several = settings.engines.len() > 1 || f.db.is_none();
    let mut record = RunRecord {
        tool: "shale-bench".to_string(),
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        optimized: !cfg!(debug_assertions),
        date: machine.date.clone(),
        cpu: machine.cpu.clone(),
        cpu_cache: machine.cpu_cache.clone(),
        workload: Workload {
            num: f.num,
            reads: settings.reads,
            threads: f.threads,
            key_size: f.key_size,
            value_size: f.value_size,
            compression_ratio: f.compression_ratio,
            seed: f.seed,
            repeat: f.repeat,
            benchmarks: settings
                .benchmarks
                .iter()
                .map(|b| b.name().to_string())
                .collect(),
            command_line,
        },
        engines: Vec::new(),
    };
    let io = |e: std::io::Error| Error::io("write", "<stdout>", e);
    let rounds = f.repeat.max(1) as usize;
    // rounds_by_engine[n]: engine n's suite, once per round.
    let mut rounds_by_engine: Vec<Vec<EngineRecord>> = vec![Vec::new(); settings.engines.len()];
    let mut first_output = true;
    for round in 0..rounds {
        if rounds > 1 {
            if !first_output {
                writeln!(out).map_err(io)?;
            }
            writeln!(out, "=== Round {} of {rounds} ===", round + 1).map_err(io)?;
            first_output = false;
        }
        // Reversing the order every other round gives each engine both early and late slots,
        // so drift of the host's speed over the run does not favour one engine.
        let mut order: Vec<usize> = (0..settings.engines.len()).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        // One engine uses --db itself, as db_bench does; several get a subdirectory each.
        let dir_of = |kind: engines::EngineKind| -> PathBuf {
            if several {
                root.join(kind.name())
            } else {
                root.clone()
            }
        };
        if f.lockstep {
            let records = lockstep::run_round(
                settings,
                &record.workload.command_line,
                &order,
                &dir_of,
                out,
                &mut first_output,
            )?;
            for (n, engine_record) in records {
                rounds_by_engine[n].push(engine_record);
            }
            continue;
        }
        for n in order {
            let kind = settings.engines[n];
            let dir = dir_of(kind);
            if !first_output {
                writeln!(out).map_err(io)?;
            }
            first_output = false;
            let mut header = |o: &mut dyn Write, info: &engines::EngineInfo| {
                output::print_header(o, settings, info, &machine)
            };
            let hooks = bench::SuiteHooks {
                header: &mut header,
                gate: &mut |_| Ok(()),
            };
            let engine_record = bench::run_suite(settings, kind, &dir, out, hooks);
            rounds_by_engine[n].push(engine_record);
        }
    }
    record.engines = rounds_by_engine
        .iter()
        .filter_map(|r| EngineRecord::median_of_rounds(r))
        .collect();
    if settings.engines.len() > 1 || rounds > 1 {
        writeln!(out, "\n{}", output::comparison_table(&record)).map_err(io)?;
    }
    if let Some(path) = &f.json {
        let text = serde_json::to_string_pretty(&record)
            .map_err(|e| Error::Usage(format!("cannot encode JSON: {e}")))?;
        std::fs::write(path, text + "\n").map_err(|e| Error::io("write", path, e))?;
    }
    if let Some(path) = &f.report {
        std::fs::write(path, report::render(&record)).map_err(|e| Error::io("write", path, e))?;
    }
    Ok(record)
}
