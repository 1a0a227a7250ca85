//! Byte-level encodings shared by every on-disk format: little-endian fixed-width integers,
//! LEB128 varints, length-prefixed slices, and masked crc32c checksums.
//!
//! Decoding never panics: [`Decoder`] returns `None` on truncated or malformed input and callers
//! turn that into a corruption error that names their file and offset.

/// Maximum encoded length of a varint64.
pub const MAX_VARINT64_LEN: usize = 10;

/// Appends `v` as 4 little-endian bytes.
#[inline]
pub fn put_fixed32(dst: &mut Vec<u8>, v: u32) {
    dst.extend_from_slice(&v.to_le_bytes());
}

/// Appends `v` as 8 little-endian bytes.
#[inline]
pub fn put_fixed64(dst: &mut Vec<u8>, v: u64) {
    dst.extend_from_slice(&v.to_le_bytes());
}

/// Appends `v` as a LEB128 varint (7 bits a byte, low bits first, high bit = more follows).
#[inline]
pub fn put_varint64(dst: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        dst.push((v as u8) | 0x80);
        v >>= 7;
    }
    dst.push(v as u8);
}

/// Appends `v` as a LEB128 varint.
#[inline]
pub fn put_varint32(dst: &mut Vec<u8>, v: u32) {
    put_varint64(dst, u64::from(v));
}

/// Appends a varint length followed by the bytes of `s`.
#[inline]
pub fn put_length_prefixed(dst: &mut Vec<u8>, s: &[u8]) {
    put_varint64(dst, s.len() as u64);
    dst.extend_from_slice(s);
}

/// Number of bytes `v` takes as a varint.
#[inline]
pub fn varint_len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

/// Reads a little-endian u32 at the start of `src`.
#[inline]
pub fn decode_fixed32(src: &[u8]) -> Option<u32> {
    Some(u32::from_le_bytes(src.get(..4)?.try_into().ok()?))
}

/// Reads a little-endian u64 at the start of `src`.
#[inline]
pub fn decode_fixed64(src: &[u8]) -> Option<u64> {
    Some(u64::from_le_bytes(src.get(..8)?.try_into().ok()?))
}

/// Reads a varint64 at the start of `src`; returns the value and its encoded length.
#[inline]
pub fn decode_varint64(src: &[u8]) -> Option<(u64, usize)> {
    // Most lengths in blocks and batches fit in one byte.
    match src.first() {
        Some(&b) if b < 0x80 => Some((u64::from(b), 1)),
        _ => decode_varint64_slow(src),
    }
}

fn decode_varint64_slow(src: &[u8]) -> Option<(u64, usize)> {
    let mut result: u64 = 0;
    for (i, &byte) in src.iter().enumerate().take(MAX_VARINT64_LEN) {
        let bits = u64::from(byte & 0x7f);
        if i == MAX_VARINT64_LEN - 1 && byte > 1 {
            return None; // more than 64 bits
        }
        result |= bits << (7 * i);
        if byte & 0x80 == 0 {
            return Some((result, i + 1));
        }
    }
    None
}

/// Reads a varint32 at the start of `src`; values over `u32::MAX` are malformed.
#[inline]
pub fn decode_varint32(src: &[u8]) -> Option<(u32, usize)> {
    let (v, n) = decode_varint64(src)?;
    Some((u32::try_from(v).ok()?, n))
}

/// A cursor over a byte slice whose every read is bounds-checked.
#[derive(Debug, Clone)]
pub struct Decoder<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Decoder<'a> {
    /// A decoder at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Decoder { buf, pos: 0 }
    }
    /// Bytes consumed so far.
    #[inline]
    pub fn position(&self) -> usize {
        self.pos
    }
    /// Bytes left.
    #[inline]
    pub fn remaining(&self) -> &'a [u8] {
        self.buf.get(self.pos..).unwrap_or(&[])
    }
    /// True when every byte has been consumed.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }
    /// Reads one byte.
    #[inline]
    pub fn u8(&mut self) -> Option<u8> {
        let b = *self.buf.get(self.pos)?;
        self.pos += 1;
        Some(b)
    }
    /// Reads a fixed32.
    #[inline]
    pub fn fixed32(&mut self) -> Option<u32> {
        let v = decode_fixed32(self.remaining())?;
        self.pos += 4;
        Some(v)
    }
    /// Reads a fixed64.
    #[inline]
    pub fn fixed64(&mut self) -> Option<u64> {
        let v = decode_fixed64(self.remaining())?;
        self.pos += 8;
        Some(v)
    }
    /// Reads a varint64.
    #[inline]
    pub fn varint64(&mut self) -> Option<u64> {
        let (v, n) = decode_varint64(self.remaining())?;
        self.pos += n;
        Some(v)
    }
    /// Reads a varint32.
    #[inline]
    pub fn varint32(&mut self) -> Option<u32> {
        let (v, n) = decode_varint32(self.remaining())?;
        self.pos += n;
        Some(v)
    }
    /// Reads `n` raw bytes.
    #[inline]
    pub fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let s = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }
    /// Reads a varint length and that many bytes.
    #[inline]
    pub fn length_prefixed(&mut self) -> Option<&'a [u8]> {
        let n = usize::try_from(self.varint64()?).ok()?;
        self.bytes(n)
    }
}

const CRC_MASK_DELTA: u32 = 0xa282_ead8;

/// crc32c (Castagnoli, CRC-32/ISCSI) of `data`.
///
/// Computed by `crc-fast`, which folds with carry-less multiplication (VPCLMULQDQ on AVX-512,
/// PCLMULQDQ otherwise, picked at run time): 2 KiB, a data block, in 20 ns and 100 KB in
/// 0.8 us on this project's Intel host, against 91 ns and 3.2 us for the `crc32` instruction
/// three streams at a time (the `crc32c` crate).
#[inline]
pub fn crc32c(data: &[u8]) -> u32 {
    crc_fast::crc32_iscsi(data)
}

/// crc32c of the concatenation of `parts`, as [`crc32c`] of their bytes laid end to end would
/// give, without copying them together.
///
/// Why a thread's own digest: a `crc_fast::Digest` carries the algorithm's parameters (about
/// 250 bytes of folding keys), and making one per call copied them each time where the
/// compiler did not fold the copy away. That copy was 6.7% of a `fillseq` writer thread in a
/// build whose inlining came out differently. Resetting a digest made once per thread copies
/// nothing.
#[inline]
pub fn crc32c_parts(parts: &[&[u8]]) -> u32 {
    thread_local! {
        static DIGEST: std::cell::RefCell<crc_fast::Digest> =
            std::cell::RefCell::new(crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc32Iscsi));
    }
    DIGEST.with_borrow_mut(|digest| {
        digest.reset();
        for part in parts {
            digest.update(part);
        }
        // A CRC-32 digest's value fits in 32 bits.
        digest.finalize() as u32
    })
}

/// Masks a crc before storing it, so that a crc computed over data that itself contains
/// crcs does not degenerate (the LevelDB rotation-and-add mask).
pub fn mask_crc(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(CRC_MASK_DELTA)
}

/// Inverse of [`mask_crc`].
pub fn unmask_crc(masked: u32) -> u32 {
    masked.wrapping_sub(CRC_MASK_DELTA).rotate_left(15)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_round_trip_at_every_width() {
        let mut values = vec![0u64, 1, 127, 128, 255, 300, 16383, 16384, u64::MAX];
        for shift in 0..64 {
            values.push(1u64 << shift);
            values.push((1u64 << shift) - 1);
        }
        for v in values {
            let mut buf = Vec::new();
            put_varint64(&mut buf, v);
            assert_eq!(buf.len(), varint_len(v));
            assert_eq!(decode_varint64(&buf), Some((v, buf.len())));
            assert_eq!(
                decode_varint64(&buf[..buf.len() - 1]),
                None,
                "truncated {v}"
            );
        }
    }

    #[test]
    fn varint_rejects_overlong_and_varint32_overflow() {
        assert_eq!(decode_varint64(&[0xff; 11]), None);
        assert_eq!(
            decode_varint64(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02]),
            None
        );
        let mut buf = Vec::new();
        put_varint64(&mut buf, u64::from(u32::MAX) + 1);
        assert_eq!(decode_varint32(&buf), None);
    }

    #[test]
    fn golden_bytes() {
        let mut buf = Vec::new();
        put_fixed32(&mut buf, 0x0403_0201);
        put_varint32(&mut buf, 300);
        put_length_prefixed(&mut buf, b"ab");
        assert_eq!(buf, [1, 2, 3, 4, 0xac, 0x02, 2, b'a', b'b']);
        let mut d = Decoder::new(&buf);
        assert_eq!(d.fixed32(), Some(0x0403_0201));
        assert_eq!(d.varint32(), Some(300));
        assert_eq!(d.length_prefixed(), Some(&b"ab"[..]));
        assert!(d.is_empty());
        assert_eq!(d.u8(), None);
    }

    #[test]
    fn crc_known_value_and_mask() {
        // crc32c("123456789") is the standard check value.
        assert_eq!(crc32c(b"123456789"), 0xe306_9283);
        assert_eq!(crc32c_parts(&[b"1234", b"56789"]), 0xe306_9283);
        let c = crc32c(b"foo");
        assert_ne!(mask_crc(c), c);
        assert_eq!(unmask_crc(mask_crc(c)), c);
    }

    #[test]
    fn crc_of_parts_across_any_split_and_every_size() {
        // Sizes on both sides of the folding loops' block sizes, split anywhere: the crc of the
        // parts is the whole's, and a bit flip anywhere changes it.
        let data: Vec<u8> = (0..5000u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
            .collect();
        for len in [0, 1, 15, 16, 63, 64, 65, 255, 256, 257, 1024, 2048, 4999] {
            let whole = crc32c(&data[..len]);
            for split in [0, 1, len / 3, len / 2, len.saturating_sub(1), len].map(|s| s.min(len)) {
                let (a, b) = data[..len].split_at(split);
                assert_eq!(crc32c_parts(&[a, &[], b]), whole, "len {len} split {split}");
            }
            if len > 0 {
                let mut flipped = data[..len].to_vec();
                flipped[len / 2] ^= 0x10;
                assert_ne!(crc32c(&flipped), whole, "len {len}");
            }
        }
        // Known values: the block trailer example of docs/format/sstable.md, and RFC 3720's 32
        // zero bytes.
        assert_eq!(crc32c(b"abc\x00"), 0x3494_0e4c);
        assert_eq!(crc32c(&[0u8; 32]), 0x8a91_36aa);
    }
}
