//! Key generation: db_bench's fixed-width decimal keys and Symas' shuffled write order.
//!
//! Key `k` of a run is `k` in decimal, left-padded with zeros to `--key_size` bytes, so that
//! bytewise order equals numeric order in every engine (db_bench formats keys the same way).
//! Random writes visit a seeded Fisher-Yates permutation of `0..num`: every key is written
//! exactly once, so a random fill leaves the same content as a sequential one (the flaw Symas
//! fixed in Google's original benchmark, where random writes drew keys with replacement).

use rand::seq::SliceRandom;
use rand::SeedableRng;

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

/// The numbers `0..n` in a random order fixed by `seed`: each exactly once.
pub fn permutation(n: u64, seed: u64) -> Vec<u64> {
    let mut order: Vec<u64> = (0..n).collect();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    order.shuffle(&mut rng);
    order
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
        for &n in &[0u64, 1, 2, 17, 1000, 65_537] {
            let p = permutation(n, 301);
            assert_eq!(p.len() as u64, n);
            let mut seen = vec![false; n as usize];
            for &k in &p {
                let slot = seen.get_mut(k as usize).expect("in range");
                assert!(!*slot, "key {k} twice");
                *slot = true;
            }
            assert!(seen.iter().all(|&s| s));
        }
    }

    #[test]
    fn permutation_is_seeded_and_shuffled() {
        assert_eq!(permutation(1000, 7), permutation(1000, 7));
        assert_ne!(permutation(1000, 7), permutation(1000, 8));
        let p = permutation(1000, 7);
        let in_place = p
            .iter()
            .enumerate()
            .filter(|(i, &k)| *i as u64 == k)
            .count();
        assert!(in_place < 20, "{in_place} keys kept their place");
    }
}
