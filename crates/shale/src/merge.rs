//! Merge operators: read-modify-write in one call. A merge writes an *operand*; reads and
//! compactions combine the operands of a key, oldest first, onto the newest full value below
//! them (or onto nothing, if there is none, it is a deletion, or it has expired). Compaction
//! folds operands onto their base when it reaches one, never past a snapshot that still reads
//! them, and combines them with `partial_merge` when the base is out of reach. Operands never
//! expire. Semantics, including operator errors: `docs/ttl.md` ("Merges").

use std::fmt;

/// Combines merge operands. Implementations must be deterministic: the same inputs always give
/// the same output, whether the merge runs in a read, a flush or a compaction.
pub trait MergeOperator: Send + Sync + 'static {
    /// Identifies the operator in errors and logs. (It is not recorded on disk: reopening with
    /// another operator is allowed, and applies it to the operands already stored.)
    fn name(&self) -> &str;

    /// Applies `operands` (oldest first) to `existing` (`None` when the key had no value or was
    /// deleted) and returns the new full value, or a message saying why it cannot.
    fn full_merge(
        &self,
        key: &[u8],
        existing: Option<&[u8]>,
        operands: &[&[u8]],
    ) -> Result<Vec<u8>, String>;

    /// Combines consecutive operands (oldest first) into one operand without a base value.
    /// Returning `None` (the default) keeps them separate. Must satisfy
    /// `full_merge(e, [partial(ops)]) == full_merge(e, ops)`.
    fn partial_merge(&self, _key: &[u8], _operands: &[&[u8]]) -> Option<Vec<u8>> {
        None
    }
}

/// Adds little-endian `u64` counters with wrapping, as RocksDB's `uint64add`. An operand or
/// existing value that is not 8 bytes is an error.
#[derive(Debug, Default, Clone, Copy)]
pub struct UInt64AddOperator;

fn as_u64(bytes: &[u8], what: &str) -> Result<u64, String> {
    let arr: [u8; 8] = bytes
        .try_into()
        .map_err(|_| format!("{what} is {} bytes, expected 8", bytes.len()))?;
    Ok(u64::from_le_bytes(arr))
}

impl MergeOperator for UInt64AddOperator {
    fn name(&self) -> &str {
        "uint64add"
    }

    fn full_merge(
        &self,
        _key: &[u8],
        existing: Option<&[u8]>,
        operands: &[&[u8]],
    ) -> Result<Vec<u8>, String> {
        let mut sum = match existing {
            Some(v) => as_u64(v, "existing value")?,
            None => 0,
        };
        for op in operands {
            sum = sum.wrapping_add(as_u64(op, "operand")?);
        }
        Ok(sum.to_le_bytes().to_vec())
    }

    fn partial_merge(&self, key: &[u8], operands: &[&[u8]]) -> Option<Vec<u8>> {
        self.full_merge(key, None, operands).ok()
    }
}

/// Appends operands to the value, separated by a delimiter.
#[derive(Clone)]
pub struct StringAppendOperator {
    delimiter: Vec<u8>,
}

impl StringAppendOperator {
    /// Joins with `delimiter` (may be empty).
    pub fn new(delimiter: &[u8]) -> Self {
        StringAppendOperator {
            delimiter: delimiter.to_vec(),
        }
    }
}

impl fmt::Debug for StringAppendOperator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "StringAppendOperator({:?})", self.delimiter)
    }
}

impl MergeOperator for StringAppendOperator {
    fn name(&self) -> &str {
        "stringappend"
    }

    fn full_merge(
        &self,
        _key: &[u8],
        existing: Option<&[u8]>,
        operands: &[&[u8]],
    ) -> Result<Vec<u8>, String> {
        let mut out = existing.map(<[u8]>::to_vec).unwrap_or_default();
        let mut first = existing.is_none();
        for op in operands {
            if !first {
                out.extend_from_slice(&self.delimiter);
            }
            first = false;
            out.extend_from_slice(op);
        }
        Ok(out)
    }

    fn partial_merge(&self, key: &[u8], operands: &[&[u8]]) -> Option<Vec<u8>> {
        self.full_merge(key, None, operands).ok()
    }
}

/// Keeps the bytewise-largest of the value and the operands.
#[derive(Debug, Default, Clone, Copy)]
pub struct MaxOperator;

impl MergeOperator for MaxOperator {
    fn name(&self) -> &str {
        "max"
    }

    fn full_merge(
        &self,
        _key: &[u8],
        existing: Option<&[u8]>,
        operands: &[&[u8]],
    ) -> Result<Vec<u8>, String> {
        Ok(existing
            .into_iter()
            .chain(operands.iter().copied())
            .max()
            .map(<[u8]>::to_vec)
            .unwrap_or_default())
    }

    fn partial_merge(&self, key: &[u8], operands: &[&[u8]]) -> Option<Vec<u8>> {
        self.full_merge(key, None, operands).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uint64add_sums_and_rejects_bad_widths() {
        let op = UInt64AddOperator;
        let one = 1u64.to_le_bytes();
        let five = 5u64.to_le_bytes();
        assert_eq!(
            op.full_merge(b"k", Some(&five), &[&one, &one]),
            Ok(7u64.to_le_bytes().to_vec())
        );
        assert_eq!(op.full_merge(b"k", None, &[&one]), Ok(one.to_vec()));
        assert!(op.full_merge(b"k", Some(b"abc"), &[&one]).is_err());
        assert!(op.full_merge(b"k", None, &[b"x"]).is_err());
        let partial = op.partial_merge(b"k", &[&one, &five]).expect("partial");
        assert_eq!(
            op.full_merge(b"k", Some(&five), &[&partial]),
            op.full_merge(b"k", Some(&five), &[&one, &five])
        );
    }

    #[test]
    fn string_append_and_max() {
        let op = StringAppendOperator::new(b",");
        assert_eq!(
            op.full_merge(b"k", Some(b"a"), &[b"b", b"c"]),
            Ok(b"a,b,c".to_vec())
        );
        assert_eq!(
            op.full_merge(b"k", None, &[b"b", b"c"]),
            Ok(b"b,c".to_vec())
        );
        let max = MaxOperator;
        assert_eq!(
            max.full_merge(b"k", Some(b"m"), &[b"z", b"a"]),
            Ok(b"z".to_vec())
        );
        assert_eq!(max.full_merge(b"k", None, &[]), Ok(Vec::new()));
    }
}
