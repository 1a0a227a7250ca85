//! The benchmark's one error type.
//!
//! Usage errors (bad flags, unknown benchmarks, an engine not compiled in) are reported before
//! anything runs; engine errors name the engine and the operation that failed, so a failed
//! run says which database refused what.

/// Result alias for the benchmark.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can stop a benchmark.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The command line asked for something impossible.
    #[error("{0}")]
    Usage(String),
    /// The engine does not offer this operation (e.g. merge on LMDB).
    #[error("not supported by {engine}: {what}")]
    Unsupported {
        /// The engine's name.
        engine: &'static str,
        /// The missing operation.
        what: &'static str,
    },
    /// The engine returned an error.
    #[error("{engine}: {op}: {message}")]
    Engine {
        /// The engine's name.
        engine: &'static str,
        /// The operation that failed, e.g. "put", "open".
        op: &'static str,
        /// The engine's own message.
        message: String,
    },
    /// A fault in the benchmark itself (a client thread panicked, a step was misrouted).
    #[error("internal error: {0}")]
    Internal(String),
    /// A file-system call made by the benchmark itself failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What the benchmark was doing.
        op: &'static str,
        /// The file or directory.
        path: std::path::PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// Builds an [`Error::Engine`].
    pub fn engine(engine: &'static str, op: &'static str, message: impl Into<String>) -> Self {
        Error::Engine {
            engine,
            op,
            message: message.into(),
        }
    }

    /// Builds an [`Error::Io`].
    pub fn io(op: &'static str, path: impl AsRef<std::path::Path>, source: std::io::Error) -> Self {
        Error::Io {
            op,
            path: path.as_ref().to_path_buf(),
            source,
        }
    }
}
