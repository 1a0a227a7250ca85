//! Key generation: db_bench's fixed-width decimal keys and Symas' shuffled write order.
//!
//! Key `k` of a run is `k` in decimal, left-padded with zeros to `--key_size` bytes, so that
//! bytewise order equals numeric order in every engine (db_bench formats keys the same way).
//! Random writes visit a seeded pseudo-random permutation of `0..num`: every key is written
//! exactly once, so a random fill leaves the same content as a sequential one (the flaw Symas
//! fixed in Google's original benchmark, where random writes drew keys with replacement). The
//! permutation is computed key by key rather than stored, so the benchmark's own memory does
//! not grow with `--num` and stays out of every engine's memory figures.

use crate::error::{Error, Result};

/// Formats keys of a fixed width.
#[derive(Debug, Clone, Copy)]
pub struct KeyFormat {
    key_size: usize,
}

impl KeyFormat {
    /// A format for `num` keys of `key_size` bytes; fails when `num - 1` has more digits than
    /// fit, because the keys would then collide or lose their order.
    pub fn new(key_size: usize, num: u64) -> Result<Self> {
        let largest = num.saturating_sub(1);
        let digits = largest.checked_ilog10().map_or(1, |d| d as usize + 1);
        if key_size < digits {
            return Err(Error::Usage(format!(
                "--key_size={key_size} is too small for --num={num}: keys need {digits} digits"
            )));
        }
        Ok(KeyFormat { key_size })
    }

    /// Bytes in a key.
    pub fn key_size(&self) -> usize {
        self.key_size
    }

    /// Writes key `k` into `buf` (cleared first): zero-padded decimal, `key_size` bytes.
    pub fn write(&self, k: u64, buf: &mut Vec<u8>) {
        buf.clear();
        buf.resize(self.key_size, b'0');
        let mut n = k;
        for slot in buf.iter_mut().rev() {
            *slot = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
    }

    /// Writes a key that sorts among the real keys but never exists: key `k` followed by a
    /// dot, as db_bench's `readmissing` does.
    pub fn write_missing(&self, k: u64, buf: &mut Vec<u8>) {
        self.write(k, buf);
        buf.push(b'.');
    }
}

/// The numbers `0..n` in a random order fixed by a seed, each exactly once, computed one at a
/// time in constant memory.
///
/// A four-round Feistel network over the smallest even number of bits that covers `n` is a
/// bijection on that power-of-two domain; positions it maps past `n` are mapped again until they
/// land inside ("cycle walking"), which keeps it a bijection on `0..n`. The domain is under
/// `4n`, so a position takes fewer than four walks on average.
#[derive(Debug, Clone)]
pub struct Permutation {
    n: u64,
    half_bits: u32,
    round_keys: [u64; 4],
}

impl Permutation {
    /// The permutation of `0..n` chosen by `seed`.
    pub fn new(n: u64, seed: u64) -> Permutation {
        let bits = 64 - n.saturating_sub(1).leading_zeros();
        let half_bits = bits.div_ceil(2).max(1);
        let mut state = seed;
        let round_keys = std::array::from_fn(|_| {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            mix64(state)
        });
        Permutation {
            n,
            half_bits,
            round_keys,
        }
    }

    /// Number of elements permuted.
    pub fn len(&self) -> u64 {
        self.n
    }

    /// Whether there is nothing to permute.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// The element at position `i`; `i` itself when `i >= n`.
    pub fn get(&self, i: u64) -> u64 {
        if i >= self.n {
            return i;
        }
        let mut x = self.feistel(i);
        while x >= self.n {
            x = self.feistel(x);
        }
        x
    }

    fn feistel(&self, x: u64) -> u64 {
        let mask = (1u64 << self.half_bits) - 1;
        let (mut left, mut right) = (x >> self.half_bits, x & mask);
        for key in self.round_keys {
            let next = left ^ (mix64(right ^ key) & mask);
            left = right;
            right = next;
        }
        (left << self.half_bits) | right
    }
}

/// SplitMix64's finaliser: every input bit affects every output bit.
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_fixed_width_and_ordered() {
        let f = KeyFormat::new(16, 1_000_000).expect("fits");
        let mut a = Vec::new();
        let mut b = Vec::new();
        f.write(42, &mut a);
        assert_eq!(a, b"0000000000000042");
        f.write(999_999, &mut b);
        assert_eq!(b, b"0000000000999999");
        assert!(a < b);
        f.write(0, &mut a);
        assert_eq!(a, b"0000000000000000");
        f.write_missing(7, &mut a);
        assert_eq!(a, b"0000000000000007.");
    }

    #[test]
    fn too_small_key_size_is_a_usage_error() {
        assert!(KeyFormat::new(3, 1000).is_ok());
        let err = KeyFormat::new(3, 1001).expect_err("1000 needs 4 digits");
        assert!(err.to_string().contains("--key_size=3"), "{err}");
        assert!(KeyFormat::new(1, 0).is_ok());
    }

    #[test]
    fn permutation_covers_every_key_exactly_once() {
        for &n in &[0u64, 1, 2, 3, 17, 1000, 1024, 65_537] {
            let p = Permutation::new(n, 301);
            assert_eq!(p.len(), n);
            let mut seen = vec![false; n as usize];
            for i in 0..n {
                let k = p.get(i);
                let slot = seen.get_mut(k as usize).expect("in range");
                assert!(!*slot, "key {k} twice");
                *slot = true;
            }
            assert!(seen.iter().all(|&s| s));
        }
    }

    #[test]
    fn permutation_is_seeded_and_shuffled() {
        let order = |seed| -> Vec<u64> {
            let p = Permutation::new(1000, seed);
            (0..1000).map(|i| p.get(i)).collect()
        };
        assert_eq!(order(7), order(7));
        assert_ne!(order(7), order(8));
        let p = order(7);
        let in_place = p
            .iter()
            .enumerate()
            .filter(|(i, &k)| *i as u64 == k)
            .count();
        assert!(in_place < 20, "{in_place} keys kept their place");
        // Neighbouring positions land far apart: no long runs of ascending keys.
        let ascending = p.windows(2).filter(|w| w[1] == w[0] + 1).count();
        assert!(ascending < 20, "{ascending} consecutive keys in order");
    }
}
