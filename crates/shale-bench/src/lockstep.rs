//! `--lockstep`: every engine in a child process of its own, stepped benchmark by benchmark.
//!
//! Without it an engine's whole suite runs before the next engine's starts, so the two figures
//! of a ratio are taken minutes apart, and a host whose speed drifts over minutes (a shared
//! virtual machine) moves the ratio as much as a real difference would. In lockstep each
//! benchmark runs on every engine before the next benchmark starts on any, so the figures
//! compared are taken seconds apart.
//!
//! While one engine runs a benchmark, the others are stopped with `SIGSTOP`: their background
//! work (flushes, compactions) waits for their own next benchmark instead of taking the running
//! engine's cores. Each engine therefore sees what it would see running alone: its own
//! background work, started by its own earlier benchmarks, and nothing else. Its memory is
//! measured in its own process, so no engine's figures carry another's allocator leftovers.
//!
//! The protocol, over the child's standard input and output:
//! - The parent starts the child with its own command line plus `--lockstep_child=ENGINE` and
//!   `--lockstep_child_dir=DIR`.
//! - The child opens the engine, prints its header, then before each benchmark prints a line
//!   holding [`READY`] and waits for a line `go` on its standard input.
//! - After the last benchmark the child prints [`RECORD`] followed by its [`EngineRecord`] as
//!   JSON on one line, and exits.
//! - Every other line the child prints is its db_bench output, which the parent prints as one
//!   block per engine when the round ends.
//! - Between a `READY` and the parent's `go`, the parent stops the child and waits until the
//!   kernel reports it stopped, then resumes it before sending `go`.

use std::io::Read;
use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use crate::bench::{self, SuiteHooks};
use crate::engines::EngineKind;
use crate::error::{Error, Result};
use crate::flags::Settings;
use crate::output;
use crate::record::EngineRecord;
use crate::sysinfo;

/// The line a child prints when it waits for its next benchmark. It starts with an ASCII
/// record separator, which no benchmark output contains.
pub const READY: &str = "\u{1e}shale-bench lockstep ready";

/// The prefix of the child's last line, followed by its record as JSON.
pub const RECORD: &str = "\u{1e}shale-bench lockstep record ";

/// The child's side: runs `engine`'s suite in `dir`, waiting before each benchmark for the
/// parent's `go`, then prints its record. Returns the process exit code.
pub fn child_main(settings: &Settings, engine: &str, dir: &Path) -> i32 {
    die_with_parent();
    let kind = match EngineKind::parse(engine) {
        Ok(kind) => kind,
        Err(e) => {
            eprintln!("shale-bench: error: --lockstep_child: {e}");
            return 2;
        }
    };
    let machine = sysinfo::Machine::read();
    let mut header = |o: &mut dyn Write, info: &crate::engines::EngineInfo| {
        output::print_header(o, settings, info, &machine)
    };
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let mut gate = |o: &mut dyn Write| -> Result<()> {
        let io = |e: std::io::Error| Error::io("write", "<stdout>", e);
        writeln!(o, "{READY}").map_err(io)?;
        o.flush().map_err(io)?;
        let mut line = String::new();
        let read = input
            .read_line(&mut line)
            .map_err(|e| Error::io("read", "<stdin>", e))?;
        match line.trim_end() {
            "go" => Ok(()),
            _ if read == 0 => Err(Error::Internal(
                "lockstep: the parent closed this child's input before its suite finished"
                    .to_string(),
            )),
            other => Err(Error::Internal(format!(
                "lockstep: expected 'go' from the parent, got '{other}'"
            ))),
        }
    };
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let hooks = SuiteHooks {
        header: &mut header,
        gate: &mut gate,
    };
    let record = bench::run_suite(settings, kind, dir, &mut out, hooks);
    let json = match serde_json::to_string(&record) {
        Ok(json) => json,
        Err(e) => {
            eprintln!("shale-bench: error: cannot encode the record as JSON: {e}");
            return 1;
        }
    };
    if writeln!(out, "{RECORD}{json}")
        .and_then(|()| out.flush())
        .is_err()
    {
        return 1;
    }
    i32::from(record.error.is_some())
}

/// Asks the kernel to kill this process when its parent dies: a child stopped between two
/// benchmarks would otherwise wait forever for a parent that is gone.
fn die_with_parent() {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_PDEATHSIG takes a signal number and touches no memory of ours.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
    }
}

/// Splits a line of a child's output into its db_bench output and the protocol marker after
/// it, if any: a marker may follow output that did not end its line (a library's own
/// printing), and the marker character appears in no benchmark output.
fn split_marker(line: &str) -> (&str, &str) {
    match line.find('\u{1e}') {
        Some(at) => line.split_at(at),
        None => (line, ""),
    }
}

/// One engine's child process, seen from the parent.
struct Stepper {
    kind: EngineKind,
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    /// The child's db_bench output so far.
    lines: Vec<String>,
    /// Set once the child has printed its record.
    record: Option<EngineRecord>,
    /// Set once the child's exit has been collected (by `Child::wait` or our own `waitpid`):
    /// its pid may then name another process.
    reaped: bool,
}

impl Stepper {
    /// Starts the child and lets it run up to its first benchmark (it opens the engine and
    /// prints its header), then stops it.
    fn spawn(exe: &Path, args: &[String], kind: EngineKind, dir: &Path) -> Result<Stepper> {
        let mut child = Command::new(exe)
            .args(args)
            .arg(format!("--lockstep_child={}", kind.name()))
            .arg(format!("--lockstep_child_dir={}", dir.display()))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            // A group of its own: job control in the terminal (Ctrl-Z, then `fg`) continues a
            // whole group, which would wake the stopped children too. Ctrl-C still ends them:
            // it ends the parent, and a child dies with its parent.
            .process_group(0)
            .spawn()
            .map_err(|e| Error::io("start a lockstep child", exe, e))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(Error::Internal(
                "lockstep: a child's pipes were not opened".to_string(),
            ));
        };
        let mut stepper = Stepper {
            kind,
            child,
            stdin,
            stdout: BufReader::new(stdout),
            lines: Vec::new(),
            record: None,
            reaped: false,
        };
        stepper.read_until_waiting()?;
        Ok(stepper)
    }

    /// Resumes the child, tells it to run its next benchmark, and stops it again once it
    /// waits for the one after (or has finished).
    fn step(&mut self) -> Result<()> {
        if self.record.is_some() {
            return Ok(());
        }
        self.signal(libc::SIGCONT)?;
        self.stdin
            .write_all(b"go\n")
            .and_then(|()| self.stdin.flush())
            .map_err(|e| self.lost(e))?;
        self.read_until_waiting()
    }

    /// Reads the child's output up to its next `READY` (then stops it) or its record.
    fn read_until_waiting(&mut self) -> Result<()> {
        loop {
            let mut line = String::new();
            let read = self.stdout.read_line(&mut line).map_err(|e| self.lost(e))?;
            if read == 0 {
                let status = self.child.wait().map_err(|e| self.lost(e))?;
                self.reaped = true;
                return Err(Error::Internal(format!(
                    "lockstep: the {} child exited ({status}) before printing its record; its \
                     output ended with: {}",
                    self.kind,
                    self.lines.last().map_or("(nothing)", String::as_str)
                )));
            }
            let line = line.trim_end_matches('\n');
            let (output, marker) = split_marker(line);
            if !output.is_empty() {
                self.lines.push(output.to_string());
            }
            if marker == READY {
                return self.stop();
            }
            if let Some(json) = marker.strip_prefix(RECORD) {
                let record: EngineRecord = serde_json::from_str(json).map_err(|e| {
                    Error::Internal(format!("lockstep: the {} child's record: {e}", self.kind))
                })?;
                self.record = Some(record);
                // Whatever the child prints while it exits is read first: a child blocked on
                // a full pipe would never exit.
                let mut rest = String::new();
                self.stdout
                    .read_to_string(&mut rest)
                    .map_err(|e| self.lost(e))?;
                self.lines.extend(rest.lines().map(str::to_string));
                let status = self.child.wait().map_err(|e| self.lost(e))?;
                self.reaped = true;
                // A child that printed its record exits 0, or 1 when its engine failed (the
                // record says how); anything else is a fault of the harness.
                if !matches!(status.code(), Some(0 | 1)) {
                    return Err(Error::Internal(format!(
                        "lockstep: the {} child exited with {status} after its record",
                        self.kind
                    )));
                }
                return Ok(());
            }
            if !marker.is_empty() {
                return Err(Error::Internal(format!(
                    "lockstep: the {} child printed an unknown marker: {marker:?}",
                    self.kind
                )));
            }
        }
    }

    /// Stops the child and waits until the kernel reports every thread of it stopped.
    fn stop(&mut self) -> Result<()> {
        self.signal(libc::SIGSTOP)?;
        let pid = self.pid()?;
        let mut status = 0;
        let waited = loop {
            // SAFETY: waitpid writes one int through a pointer to a live local. WUNTRACED
            // reports the stop without reaping the child, which `Child::wait` still does later;
            // it reaps the child only if the child exited instead.
            let waited = unsafe { libc::waitpid(pid, &mut status, libc::WUNTRACED) };
            if waited != -1 || std::io::Error::last_os_error().kind() != ErrorKind::Interrupted {
                break waited;
            }
        };
        if waited == pid && libc::WIFSTOPPED(status) {
            return Ok(());
        }
        if waited == pid {
            self.reaped = true;
        }
        Err(Error::Internal(format!(
            "lockstep: the {} child did not stop (waitpid returned {waited}, status \
             {status:#x})",
            self.kind
        )))
    }

    fn signal(&self, signal: libc::c_int) -> Result<()> {
        let pid = self.pid()?;
        if self.reaped {
            return Err(Error::Internal(format!(
                "lockstep: the {} child has exited",
                self.kind
            )));
        }
        // SAFETY: kill only sends a signal to our own child, which has not been reaped
        // (`reaped` is false), so the pid is still its.
        if unsafe { libc::kill(pid, signal) } != 0 {
            return Err(self.lost(std::io::Error::last_os_error()));
        }
        Ok(())
    }

    fn pid(&self) -> Result<libc::pid_t> {
        libc::pid_t::try_from(self.child.id())
            .map_err(|_| Error::Internal(format!("lockstep: pid {} overflows", self.child.id())))
    }

    fn lost(&self, e: std::io::Error) -> Error {
        Error::Internal(format!("lockstep: lost the {} child: {e}", self.kind))
    }
}

impl Drop for Stepper {
    fn drop(&mut self) {
        if !self.reaped {
            // SIGKILL ends a stopped process too.
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The parent's side of one round: starts a child per engine of `order`, in that order, and
/// steps them all through the suite, benchmark by benchmark, in that order. Prints each
/// engine's output as one block, in `order`, when the round ends (or fails), and returns each
/// engine's record with its index in `settings.engines`. The children are this program run
/// again (`/proc/self/exe`) with `command_line`'s flags: a program embedding [`crate::run`]
/// must itself accept the child's flags (as `main_with_args` does) to use `--lockstep`.
pub fn run_round(
    settings: &Settings,
    command_line: &[String],
    order: &[usize],
    dir_of: &dyn Fn(EngineKind) -> PathBuf,
    out: &mut dyn Write,
    first_output: &mut bool,
) -> Result<Vec<(usize, EngineRecord)>> {
    let exe =
        std::env::current_exe().map_err(|e| Error::io("find this program", "/proc/self/exe", e))?;
    // The child parses the same flags as the parent (less the program name) plus its own.
    let args = command_line.get(1..).unwrap_or(&[]);
    let mut steppers = Vec::with_capacity(order.len());
    let mut stepped = || -> Result<()> {
        for &n in order {
            let kind = settings.engines[n];
            steppers.push((n, Stepper::spawn(&exe, args, kind, &dir_of(kind))?));
        }
        for _ in &settings.benchmarks {
            for (_, stepper) in steppers.iter_mut() {
                stepper.step()?;
            }
        }
        Ok(())
    };
    let stepped = stepped();
    // Each engine's output, also when a child failed: what ran before the failure is shown.
    let io = |e: std::io::Error| Error::io("write", "<stdout>", e);
    for (_, stepper) in &steppers {
        if !*first_output {
            writeln!(out).map_err(io)?;
        }
        *first_output = false;
        for line in &stepper.lines {
            writeln!(out, "{line}").map_err(io)?;
        }
    }
    out.flush().map_err(io)?;
    stepped?;
    // After its last benchmark each child has closed its engine and printed its record.
    let mut records = Vec::with_capacity(steppers.len());
    for (n, mut stepper) in steppers {
        let record = stepper.record.take().ok_or_else(|| {
            Error::Internal(format!(
                "lockstep: the {} child finished its last benchmark without a record",
                stepper.kind
            ))
        })?;
        records.push((n, record));
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_are_found_after_unterminated_output() {
        assert_eq!(
            split_marker("fillseq : 1.0 micros/op;"),
            ("fillseq : 1.0 micros/op;", "")
        );
        assert_eq!(split_marker(READY), ("", READY));
        let glued = format!("partial line{READY}");
        assert_eq!(split_marker(&glued), ("partial line", READY));
        let record = format!("{RECORD}{{\"x\":1}}");
        let (output, marker) = split_marker(&record);
        assert_eq!(output, "");
        assert_eq!(marker.strip_prefix(RECORD), Some("{\"x\":1}"));
    }
}
