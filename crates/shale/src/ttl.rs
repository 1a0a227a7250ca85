//! Compaction filters: user callbacks that see every entry a compaction rewrites and may keep,
//! drop or change it. Expiry by TTL uses the same hook internally.

/// What a [`CompactionFilter`] decides for one entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FilterDecision {
    /// Keep the entry as it is.
    Keep,
    /// Drop the entry (and with it, only this version of the key).
    Remove,
    /// Replace the value.
    ChangeValue(Vec<u8>),
}

/// Called by compaction for the newest version of each key that no snapshot still needs.
pub trait CompactionFilter: Send + Sync + 'static {
    /// Identifies the filter in logs and statistics.
    fn name(&self) -> &str;
    /// Decides the fate of `key` with `value` while compacting into `level`.
    fn filter(&self, level: usize, key: &[u8], value: &[u8]) -> FilterDecision;
}
