//! The per-table bloom filter over user keys: one "full" filter for the whole table, probed
//! before any index or data block is read by a point lookup.
//!
//! ```text
//! filter := bits: num_bytes bytes | num_probes: u8
//! hash   := xxh3_64(user key), seed 0
//! probe i (0 <= i < num_probes) sets/tests bit  (h1 + i * h2) mod (8 * num_bytes)
//!           where h1 = hash & 0xffff_ffff, h2 = (hash >> 32) | 1, arithmetic in wrapping u64
//! bit b   := byte b / 8, mask 1 << (b % 8)
//! ```
//! Invariants: `num_bytes >= 8`; `1 <= num_probes <= 30`. The filter hashes raw user-key bytes,
//! so it is only correct for comparators under which equal keys have equal bytes (true of every
//! comparator shale ships).
//!
//! Thread-safety: [`BloomFilter`] is immutable and `Send + Sync`.
//!
//! Format doc: `docs/format/sstable.md` ("Filter block").

use std::sync::Arc;

use xxhash_rust::xxh3::xxh3_64;

use crate::env::RandomAccessFile;

/// Smallest filter bit array, so tiny tables still get a useful filter.
const MIN_FILTER_BYTES: usize = 8;
/// Most probes a filter may ask for; more buys nothing and costs lookups.
pub const MAX_PROBES: u8 = 30;

/// The 64-bit hash of a user key that the filter is built from.
pub fn filter_hash(user_key: &[u8]) -> u64 {
    xxh3_64(user_key)
}

/// Bit positions probed for `hash` in a filter of `num_bits` bits.
#[inline]
fn probes(hash: u64, num_probes: u8, num_bits: u64) -> impl Iterator<Item = u64> {
    let h1 = hash & 0xffff_ffff;
    let h2 = (hash >> 32) | 1;
    (0..u64::from(num_probes)).map(move |i| h1.wrapping_add(i.wrapping_mul(h2)) % num_bits)
}

/// Collects the user keys of a table and builds its filter.
#[derive(Debug)]
pub struct BloomFilterBuilder {
    bits_per_key: u32,
    hashes: Vec<u64>,
}

impl BloomFilterBuilder {
    /// A builder spending about `bits_per_key` bits per distinct key. REQUIRES: `bits_per_key > 0`.
    pub fn new(bits_per_key: u32) -> Self {
        debug_assert!(bits_per_key > 0);
        BloomFilterBuilder {
            bits_per_key: bits_per_key.max(1),
            hashes: Vec::new(),
        }
    }

    /// Adds a user key. Keys repeat consecutively when a table holds several versions of one
    /// user key; the repeats are skipped so they do not inflate the filter.
    pub fn add_key(&mut self, user_key: &[u8]) {
        let h = filter_hash(user_key);
        if self.hashes.last() != Some(&h) {
            self.hashes.push(h);
        }
    }

    /// Number of (deduplicated) keys added.
    pub fn num_keys(&self) -> usize {
        self.hashes.len()
    }

    /// Builds the filter bytes.
    pub fn finish(&self) -> Vec<u8> {
        // ln 2 probes per bit-per-key minimise the false-positive rate.
        let num_probes = (f64::from(self.bits_per_key) * std::f64::consts::LN_2).round() as u64;
        let num_probes = num_probes.clamp(1, u64::from(MAX_PROBES)) as u8;
        let num_bits = (self.hashes.len() as u64).saturating_mul(u64::from(self.bits_per_key));
        let num_bytes = usize::try_from(num_bits.div_ceil(8))
            .unwrap_or(usize::MAX)
            .max(MIN_FILTER_BYTES);
        let mut out = vec![0u8; num_bytes + 1];
        let m = num_bytes as u64 * 8;
        for &h in &self.hashes {
            for bit in probes(h, num_probes, m) {
                if let Some(byte) = out.get_mut((bit / 8) as usize) {
                    *byte |= 1 << (bit % 8);
                }
            }
        }
        if let Some(last) = out.last_mut() {
            *last = num_probes;
        }
        out
    }
}

/// A decoded filter, ready to answer "may this table contain the key?".
#[derive(Clone)]
pub struct BloomFilter {
    bits: FilterBits,
    num_probes: u8,
}

/// Where a filter's bit array lives.
#[derive(Clone)]
enum FilterBits {
    Owned(Vec<u8>),
    /// Bytes `start..start + len` of a memory-mapped table file, read in place: the filter
    /// then costs page cache the kernel can reclaim instead of a heap copy per open table.
    Mapped {
        file: Arc<dyn RandomAccessFile>,
        start: usize,
        len: usize,
    },
}

impl std::fmt::Debug for BloomFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BloomFilter")
            .field("num_bytes", &self.num_bytes())
            .field("num_probes", &self.num_probes)
            .field("mapped", &self.is_mapped())
            .finish()
    }
}

/// Splits filter bytes into the bit array and the probe count, checking both.
fn parse(data: &[u8]) -> std::result::Result<(&[u8], u8), &'static str> {
    let (&num_probes, bits) = data.split_last().ok_or("empty filter block")?;
    if bits.len() < MIN_FILTER_BYTES {
        return Err("filter bit array shorter than 8 bytes");
    }
    if num_probes == 0 || num_probes > MAX_PROBES {
        return Err("filter probe count outside 1..=30");
    }
    Ok((bits, num_probes))
}

impl BloomFilter {
    /// Parses filter bytes (copying them); the message says what is malformed.
    pub fn from_bytes(data: &[u8]) -> std::result::Result<BloomFilter, &'static str> {
        let (bits, num_probes) = parse(data)?;
        Ok(BloomFilter {
            bits: FilterBits::Owned(bits.to_vec()),
            num_probes,
        })
    }

    /// Parses the filter stored, uncompressed and already verified, at bytes `start..start +
    /// len` of the memory-mapped `file`, and reads it there from then on. `None` when the file
    /// is not mapped or the range is outside it.
    pub fn from_mapped(
        file: Arc<dyn RandomAccessFile>,
        start: usize,
        len: usize,
    ) -> Option<std::result::Result<BloomFilter, &'static str>> {
        let data = file.mapped()?.get(start..start.checked_add(len)?)?;
        let parsed = parse(data).map(|(bits, num_probes)| (bits.len(), num_probes));
        Some(parsed.map(|(len, num_probes)| BloomFilter {
            bits: FilterBits::Mapped { file, start, len },
            num_probes,
        }))
    }

    fn bits(&self) -> &[u8] {
        match &self.bits {
            FilterBits::Owned(bits) => bits,
            FilterBits::Mapped { file, start, len } => file
                .mapped()
                .and_then(|m| m.get(*start..start + len))
                .unwrap_or_default(),
        }
    }

    /// Whether the bit array is read in place from a memory-mapped table file.
    pub fn is_mapped(&self) -> bool {
        matches!(self.bits, FilterBits::Mapped { .. })
    }

    /// Number of probes per key.
    pub fn num_probes(&self) -> u8 {
        self.num_probes
    }

    /// Size of the bit array in bytes.
    pub fn num_bytes(&self) -> usize {
        self.bits().len()
    }

    /// False only if `user_key` was certainly not added.
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        self.may_contain_hash(filter_hash(user_key))
    }

    /// [`BloomFilter::may_contain`] for a precomputed [`filter_hash`].
    pub fn may_contain_hash(&self, hash: u64) -> bool {
        let bits = self.bits();
        if bits.is_empty() {
            // A map that vanished (never expected): no answer is safe but "maybe".
            return true;
        }
        let m = bits.len() as u64 * 8;
        probes(hash, self.num_probes, m).all(|bit| {
            bits.get((bit / 8) as usize)
                .is_some_and(|b| b & (1 << (bit % 8)) != 0)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(keys: impl Iterator<Item = Vec<u8>>, bits: u32) -> BloomFilter {
        let mut b = BloomFilterBuilder::new(bits);
        for k in keys {
            b.add_key(&k);
        }
        BloomFilter::from_bytes(&b.finish()).expect("valid")
    }

    #[test]
    fn no_false_negatives_and_low_false_positive_rate() {
        for n in [1usize, 10, 100, 1000, 10_000] {
            let f = build((0..n).map(|i| format!("key{i}").into_bytes()), 10);
            for i in 0..n {
                assert!(f.may_contain(format!("key{i}").as_bytes()), "n={n} i={i}");
            }
            let trials = 10_000;
            let fp = (0..trials)
                .filter(|i| f.may_contain(format!("other{i}").as_bytes()))
                .count();
            let rate = fp as f64 / trials as f64;
            // 10 bits/key gives about 0.8% in theory; tiny filters get their 64-bit minimum.
            assert!(rate < 0.02, "n={n}: false-positive rate {rate}");
            assert_eq!(f.num_probes(), 7);
        }
    }

    #[test]
    fn fewer_bits_more_false_positives() {
        let n = 5000;
        let rate = |bits| {
            let f = build((0..n).map(|i| format!("k{i}").into_bytes()), bits);
            (0..20_000)
                .filter(|i| f.may_contain(format!("x{i}").as_bytes()))
                .count() as f64
                / 20_000.0
        };
        let (r4, r16) = (rate(4), rate(16));
        assert!(r4 > r16, "{r4} vs {r16}");
        assert!(r4 < 0.25, "{r4}");
        assert!(r16 < 0.005, "{r16}");
    }

    #[test]
    fn repeated_keys_are_counted_once() {
        let mut b = BloomFilterBuilder::new(10);
        for _ in 0..50 {
            b.add_key(b"same");
        }
        b.add_key(b"other");
        assert_eq!(b.num_keys(), 2);
    }

    #[test]
    fn golden_bytes() {
        let mut b = BloomFilterBuilder::new(10);
        b.add_key(b"hello");
        let bytes = b.finish();
        assert_eq!(bytes.len(), 9);
        assert_eq!(bytes[8], 7);
        let h = xxh3_64(b"hello");
        let mut expected = [0u8; 8];
        for i in 0..7u64 {
            let bit = (h & 0xffff_ffff).wrapping_add(i.wrapping_mul((h >> 32) | 1)) % 64;
            expected[(bit / 8) as usize] |= 1 << (bit % 8);
        }
        assert_eq!(&bytes[..8], &expected);
        // Pin the hash itself so a dependency change cannot silently alter the format.
        assert_eq!(h, 0x9555_e8555c62dcfd);
    }

    #[test]
    fn rejects_malformed() {
        assert!(BloomFilter::from_bytes(&[]).is_err());
        assert!(BloomFilter::from_bytes(&[0; 5]).is_err());
        assert!(BloomFilter::from_bytes(&[0, 0, 0, 0, 0, 0, 0, 0, 0]).is_err());
        assert!(BloomFilter::from_bytes(&[0, 0, 0, 0, 0, 0, 0, 0, 31]).is_err());
        assert!(BloomFilter::from_bytes(&[0, 0, 0, 0, 0, 0, 0, 0, 30]).is_ok());
    }
}
