//! Named limits on what callers may store. Anything over a limit is refused with
//! [`crate::Error::InvalidArgument`] before it reaches the WAL or a table.

/// Largest user key, in bytes. Keys are repeated in index blocks and the manifest, so they are
/// kept far smaller than values.
pub const MAX_KEY_BYTES: usize = 64 * 1024;

/// Largest value, in bytes.
pub const MAX_VALUE_BYTES: usize = 256 * 1024 * 1024;

/// Largest encoded write batch, in bytes (it is one WAL record and must fit in memory twice).
pub const MAX_BATCH_BYTES: usize = 1024 * 1024 * 1024;

/// Largest block the table reader will allocate for, in bytes; a block handle claiming more is
/// corruption rather than a reason to allocate.
pub const MAX_BLOCK_BYTES: u64 = 512 * 1024 * 1024;

/// Number of levels in the LSM tree.
pub const NUM_LEVELS: usize = 7;
