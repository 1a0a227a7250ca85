//! The tool's failures and the exit codes scripts rely on.
//!
//! | code | meaning |
//! |------|---------|
//! | 0 | success |
//! | 1 | not found: `get` of a missing key |
//! | 2 | usage: bad arguments, a bad escape or encoding, malformed `load` input |
//! | 3 | corruption: damaged data, `check` found a problem, or `repair` lost data |
//! | 4 | I/O: the operating system refused a read or write |
//! | 5 | anything else: the database is in use, does not exist, a confirmation was declined |
//!
//! Persisted in scripts: never renumber.

use std::fmt;

/// Why the tool stopped, as a process exit code. Persisted in scripts: never renumber.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// 1: `get` of a key that is not there.
    NotFound = 1,
    /// 2: the command line or the input was not what the tool expects.
    Usage = 2,
    /// 3: damaged data.
    Corruption = 3,
    /// 4: an operating-system I/O failure.
    Io = 4,
    /// 5: anything else.
    Other = 5,
}

/// A failure with the words shown to the user.
#[derive(Debug)]
pub struct Failure {
    /// The exit code.
    pub exit: Exit,
    /// One or more lines saying what went wrong, naming the file, key or line involved.
    pub message: String,
    /// The reader of our output went away (`shale scan db | head`): stop quietly, with
    /// success, as other Unix tools do.
    pub output_closed: bool,
}

/// Result alias for commands.
pub type CliResult<T = ()> = Result<T, Failure>;

impl Failure {
    /// A failure with `exit` and `message`.
    pub fn new(exit: Exit, message: impl Into<String>) -> Failure {
        Failure {
            exit,
            message: message.into(),
            output_closed: false,
        }
    }

    /// A usage failure (exit code 2).
    pub fn usage(message: impl Into<String>) -> Failure {
        Failure::new(Exit::Usage, message)
    }

    /// Wraps an engine error, choosing its exit code and explaining a locked database in
    /// plain words.
    pub fn from_engine(error: shale::Error) -> Failure {
        let exit = match &error {
            shale::Error::Corruption { .. } => Exit::Corruption,
            shale::Error::Io { .. } => Exit::Io,
            _ => Exit::Other,
        };
        let message = match &error {
            shale::Error::Locked { path } => format!(
                "database {} is in use by another process (its LOCK file is held); \
                 close that process first, or use a read-only command (get, scan, count, \
                 dump, stats, check, manifest-dump)",
                path.display()
            ),
            shale::Error::Corruption {
                path,
                offset,
                message,
            } => format!(
                "corruption in {} at offset {offset}: {message}\n\
                 hint: `shale check` lists every problem; `shale repair` salvages what it can",
                path.display()
            ),
            other => other.to_string(),
        };
        Failure::new(exit, message)
    }
}

impl From<shale::Error> for Failure {
    fn from(error: shale::Error) -> Failure {
        Failure::from_engine(error)
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<std::io::Error> for Failure {
    fn from(error: std::io::Error) -> Failure {
        if error.kind() == std::io::ErrorKind::BrokenPipe {
            Failure {
                output_closed: true,
                ..Failure::new(Exit::Io, "output closed")
            }
        } else {
            Failure::new(Exit::Io, format!("writing output: {error}"))
        }
    }
}
