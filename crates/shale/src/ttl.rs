//! Compaction filters: user callbacks that see the newest value of every key a compaction
//! rewrites and may keep, drop or change it. Expiry by TTL is applied by the same code path in
//! the compaction job (`db/compaction_job.rs`), before the filter.
//!
//! Invariants the engine keeps: the filter is never shown a version a live snapshot reads, a
//! merge operand, a deletion or an expired value; a removed value becomes a tombstone when
//! older versions of the key must stay hidden. Semantics in `docs/ttl.md` ("Compaction
//! filters").
//!
//! Thread-safety: filters run on background compaction threads, concurrently with reads and
//! writes, hence `Send + Sync`. They must not call back into the database.

/// What a [`CompactionFilter`] decides for one entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FilterDecision {
    /// Keep the entry as it is.
    Keep,
    /// Drop the entry, as if it had expired: the key reads as absent afterwards (a tombstone
    /// takes its place where older versions must stay hidden).
    Remove,
    /// Replace the value. A value over [`crate::limits::MAX_VALUE_BYTES`] is not written: the
    /// entry keeps its old value (with a warning in the log).
    ChangeValue(Vec<u8>),
}

/// Called by compaction for the newest version of each key it rewrites, when that version is a
/// value (possibly the result of folding merge operands) that no live snapshot reads.
///
/// ```
/// use shale::{CompactionFilter, FilterDecision};
///
/// /// Drops every key under `tmp/`.
/// struct DropTemporary;
///
/// impl CompactionFilter for DropTemporary {
///     fn name(&self) -> &str {
///         "example.DropTemporary"
///     }
///     fn filter(&self, _level: usize, key: &[u8], _value: &[u8]) -> FilterDecision {
///         if key.starts_with(b"tmp/") {
///             FilterDecision::Remove
///         } else {
///             FilterDecision::Keep
///         }
///     }
/// }
/// # assert_eq!(DropTemporary.filter(1, b"tmp/x", b""), FilterDecision::Remove);
/// ```
pub trait CompactionFilter: Send + Sync + 'static {
    /// Identifies the filter in logs and statistics.
    fn name(&self) -> &str;
    /// Decides the fate of `key` with `value` (the user's value, without an expiry) while
    /// compacting into `level`. [`FilterDecision::ChangeValue`] keeps the entry's expiry.
    fn filter(&self, level: usize, key: &[u8], value: &[u8]) -> FilterDecision;
}
