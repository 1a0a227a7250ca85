//! The one public error type of the engine.
//!
//! Every failure names what it was about: I/O errors carry the path and the operation,
//! corruption carries the file and the byte offset, invalid arguments say which argument and
//! what was expected. A missing key is not an error (`Ok(None)`).

use std::path::{Path, PathBuf};

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in shale.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system I/O call failed.
    #[error("I/O error: {op} {path}: {source}")]
    Io {
        /// The operation that failed, e.g. "open", "write", "sync".
        op: &'static str,
        /// The file or directory it was applied to.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Data on disk does not match its checksum or its format.
    #[error("corruption in {path} at offset {offset}: {message}")]
    Corruption {
        /// The damaged file (or the database directory if no single file is to blame).
        path: PathBuf,
        /// Byte offset of the damaged record or block inside the file.
        offset: u64,
        /// What was expected and what was found.
        message: String,
    },
    /// A caller passed something the engine cannot accept.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A file was written by a format version this build does not understand.
    #[error("unsupported format in {path}: {message}")]
    UnsupportedFormat {
        /// The file with the unknown version.
        path: PathBuf,
        /// Which version was found and which are supported.
        message: String,
    },
    /// A previous write, sync or background job failed; the database refuses further writes until
    /// it is reopened, because acknowledging them could lie about durability.
    #[error("database is poisoned by an earlier failure: {0}")]
    Poisoned(String),
    /// Another process (or another `Db` in this process) holds the database lock.
    #[error("database at {path} is locked by another process or handle")]
    Locked {
        /// The database directory.
        path: PathBuf,
    },
    /// The database does not exist and `create_if_missing` is false, or it exists and
    /// `error_if_exists` is true.
    #[error("{0}")]
    Exists(String),
    /// A merge operator or compaction filter supplied by the user failed.
    #[error("merge operator {operator} failed on key {key:?}: {message}")]
    Merge {
        /// Name of the operator.
        operator: String,
        /// The user key being merged, lossily printed.
        key: String,
        /// The operator's message.
        message: String,
    },
    /// The database was closed; background work is stopping.
    #[error("database is shutting down")]
    ShuttingDown,
    /// A flush, a compaction or a write panicked: in a merge operator, compaction filter or
    /// comparator supplied by the user, or in the engine itself. The database is poisoned by
    /// it (writes then fail with [`Error::Poisoned`] naming it); reads go on. The writer
    /// whose thread ran a write's insert when it panicked panics on; the other writes of its
    /// group get this error. Like a write that failed on I/O, such a write may or may not be
    /// found after a reopen (it was logged before the insert).
    #[error("a {job} panicked: {message}")]
    Panicked {
        /// What panicked: "background flush", "background compaction", "manual compaction",
        /// "subcompaction" (a part of either on a thread of its own) or "write".
        job: &'static str,
        /// The panic's message, if it had one.
        message: String,
    },
}

impl Error {
    /// Builds an [`Error::Io`].
    pub fn io(op: &'static str, path: impl AsRef<Path>, source: std::io::Error) -> Self {
        Error::Io {
            op,
            path: path.as_ref().to_path_buf(),
            source,
        }
    }

    /// Builds an [`Error::Corruption`].
    pub fn corruption(path: impl AsRef<Path>, offset: u64, message: impl Into<String>) -> Self {
        Error::Corruption {
            path: path.as_ref().to_path_buf(),
            offset,
            message: message.into(),
        }
    }

    /// True for [`Error::Corruption`].
    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Corruption { .. })
    }

    /// True for [`Error::Io`] whose cause is "no space left on device".
    pub fn is_no_space(&self) -> bool {
        match self {
            Error::Io { source, .. } => source.raw_os_error() == Some(libc::ENOSPC),
            _ => false,
        }
    }

    /// True for [`Error::Io`] whose cause is the process running out of file descriptors or
    /// memory (`EMFILE`, `ENFILE`, `ENOMEM`): nothing about the file it names.
    pub fn is_out_of_handles(&self) -> bool {
        match self {
            Error::Io { source, .. } => matches!(
                source.raw_os_error(),
                Some(libc::EMFILE | libc::ENFILE | libc::ENOMEM)
            ),
            _ => false,
        }
    }

    /// True for [`Error::Io`] whose cause is a missing file.
    pub fn is_not_found(&self) -> bool {
        match self {
            Error::Io { source, .. } => source.kind() == std::io::ErrorKind::NotFound,
            _ => false,
        }
    }

    /// A cheap copy for sticky error states (`std::io::Error` is not `Clone`).
    pub(crate) fn duplicate(&self) -> Error {
        match self {
            Error::Io { op, path, source } => Error::Io {
                op,
                path: path.clone(),
                source: match source.raw_os_error() {
                    Some(code) => std::io::Error::from_raw_os_error(code),
                    None => std::io::Error::new(source.kind(), source.to_string()),
                },
            },
            Error::Corruption {
                path,
                offset,
                message,
            } => Error::Corruption {
                path: path.clone(),
                offset: *offset,
                message: message.clone(),
            },
            Error::InvalidArgument(m) => Error::InvalidArgument(m.clone()),
            Error::UnsupportedFormat { path, message } => Error::UnsupportedFormat {
                path: path.clone(),
                message: message.clone(),
            },
            Error::Poisoned(m) => Error::Poisoned(m.clone()),
            Error::Locked { path } => Error::Locked { path: path.clone() },
            Error::Exists(m) => Error::Exists(m.clone()),
            Error::Merge {
                operator,
                key,
                message,
            } => Error::Merge {
                operator: operator.clone(),
                key: key.clone(),
                message: message.clone(),
            },
            Error::ShuttingDown => Error::ShuttingDown,
            Error::Panicked { job, message } => Error::Panicked {
                job,
                message: message.clone(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_handles_is_told_apart_from_a_bad_file() {
        let io = |code| {
            Error::io(
                "open",
                "/db/000001.sst",
                std::io::Error::from_raw_os_error(code),
            )
        };
        for code in [libc::EMFILE, libc::ENFILE, libc::ENOMEM] {
            assert!(io(code).is_out_of_handles(), "{code}");
        }
        assert!(!io(libc::EIO).is_out_of_handles());
        assert!(!io(libc::ENOSPC).is_out_of_handles());
        assert!(!Error::corruption("/db/000001.sst", 0, "bad").is_out_of_handles());
    }
}
