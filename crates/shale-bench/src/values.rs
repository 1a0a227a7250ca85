//! Value generation with a target compression ratio, in the manner of db_bench's
//! `RandomGenerator`.
//!
//! A pool of at least 1 MiB is filled with 100-byte pieces; each piece is a run of random
//! printable bytes `round(100 * ratio)` long, repeated to fill the piece. A general-purpose
//! compressor (snappy) finds the repeats and shrinks a value to about `ratio` of its size.
//! Values are slices of the pool taken at a moving offset, so generating one costs nothing and
//! consecutive values differ.
//!
//! One pool serves a whole engine's suite, every benchmark and client thread, each with its own
//! cursor. It is built before the engine's memory baseline is sampled, so the anonymous-memory
//! growth the report charts is the engine's alone (a pool per benchmark used to add 1 MiB to
//! every engine's figure).

use std::sync::Arc;

use rand::{Rng, SeedableRng};

/// Bytes in the pool when values are small (db_bench uses 1 MB).
const POOL_BYTES_MIN: usize = 1 << 20;
/// Length of one compressible piece.
const PIECE_BYTES: usize = 100;

/// The shared, read-only bytes that values are cut from.
#[derive(Debug, Clone)]
pub struct ValuePool {
    /// A `Vec` rather than an `Arc<[u8]>`: converting would copy the pool and free the
    /// `Vec`'s buffer, and freeing a block that large raises glibc's mmap threshold for the
    /// rest of the process (see `docs/benchmarks.md`, "Where the anonymous-memory overshoot
    /// comes from").
    bytes: Arc<Vec<u8>>,
}

impl ValuePool {
    /// A pool for values up to `max_value_size` bytes compressing to about
    /// `compression_ratio` (clamped to 0.01..=1.0) of their size.
    pub fn new(compression_ratio: f64, max_value_size: usize, seed: u64) -> Self {
        let ratio = compression_ratio.clamp(0.01, 1.0);
        let pool_len = POOL_BYTES_MIN.max(max_value_size.saturating_mul(2));
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut pool = Vec::with_capacity(pool_len + PIECE_BYTES);
        let raw_len = ((PIECE_BYTES as f64 * ratio).round() as usize).max(1);
        let mut raw = vec![0u8; raw_len];
        while pool.len() < pool_len {
            for b in raw.iter_mut() {
                *b = b' ' + rng.gen_range(0..95u8);
            }
            let mut piece = 0;
            while piece < PIECE_BYTES {
                let take = raw_len.min(PIECE_BYTES - piece);
                pool.extend_from_slice(raw.get(..take).unwrap_or(&[]));
                piece += take;
            }
        }
        pool.truncate(pool_len);
        ValuePool {
            bytes: Arc::new(pool),
        }
    }

    /// A cursor over the pool starting at an offset drawn from `seed`, so that clients
    /// seeded differently write different values. The offset is a whole number of pieces, as
    /// db_bench's cursor starts at 0: a value of piece size straddling two pieces would
    /// compress worse than the ratio.
    pub fn generator(&self, seed: u64) -> ValueGen {
        let pieces = (self.bytes.len() / PIECE_BYTES).max(1);
        let start = rand::rngs::StdRng::seed_from_u64(seed).gen_range(0..pieces) * PIECE_BYTES;
        ValueGen {
            pool: Arc::clone(&self.bytes),
            position: start,
        }
    }
}

/// Hands out values that compress to about the configured ratio: a cursor over a
/// [`ValuePool`].
#[derive(Debug, Clone)]
pub struct ValueGen {
    pool: Arc<Vec<u8>>,
    position: usize,
}

impl ValueGen {
    /// The next value of `len` bytes (`len` must not exceed the pool; it never does for sizes
    /// up to the `max_value_size` the pool was built for).
    pub fn generate(&mut self, len: usize) -> &[u8] {
        let len = len.min(self.pool.len());
        if self.position + len > self.pool.len() {
            self.position = 0;
        }
        let start = self.position;
        self.position += len;
        self.pool.get(start..start + len).unwrap_or(&[])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compressed_fraction(ratio: f64, value_size: usize) -> f64 {
        let mut g = ValuePool::new(ratio, value_size, 301).generator(1);
        let mut raw = 0usize;
        let mut packed = 0usize;
        let mut enc = snap::raw::Encoder::new();
        for _ in 0..2000 {
            let v = g.generate(value_size).to_vec();
            raw += v.len();
            packed += enc.compress_vec(&v).expect("compress").len();
        }
        packed as f64 / raw as f64
    }

    #[test]
    fn values_compress_to_about_the_ratio() {
        let half = compressed_fraction(0.5, 100);
        assert!((0.45..0.65).contains(&half), "ratio 0.5 gave {half}");
        let quarter = compressed_fraction(0.25, 100);
        assert!((0.2..0.4).contains(&quarter), "ratio 0.25 gave {quarter}");
        let whole = compressed_fraction(1.0, 100);
        assert!(whole > 0.95, "ratio 1.0 gave {whole}");
        let large = compressed_fraction(0.5, 4096);
        assert!((0.45..0.65).contains(&large), "4 KiB values gave {large}");
    }

    #[test]
    fn values_have_the_requested_length_and_vary() {
        let mut g = ValuePool::new(0.5, 100_000, 1).generator(2);
        let a = g.generate(100).to_vec();
        let b = g.generate(100).to_vec();
        assert_eq!(a.len(), 100);
        assert_ne!(a, b);
        assert_eq!(g.generate(100_000).len(), 100_000);
        assert!(a.iter().all(|c| (b' '..=b'~').contains(c)));
    }
}
