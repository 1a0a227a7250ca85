//! The fixed pieces of the table format: block handles, the 5-byte block trailer (compression
//! type and checksum), block compression, and the fixed-size footer.
//!
//! Invariants: every block in a table is followed by a trailer whose masked crc32c covers the
//! stored block bytes and the type byte; a compressed block always records its uncompressed
//! length, and nothing is ever allocated for a length over [`MAX_BLOCK_BYTES`].
//!
//! Decoding never panics: malformed input becomes [`Error::Corruption`] naming the file and the
//! byte offset of the damaged piece.
//!
//! Thread-safety: plain functions and `Copy` values.
//!
//! Format doc: `docs/format/sstable.md` ("Block handles", "Block trailer", "Compression",
//! "Footer").

use std::path::Path;

use crate::codec::{
    crc32c, crc32c_parts, decode_fixed32, decode_fixed64, mask_crc, put_fixed32, put_fixed64,
    put_varint32, put_varint64, unmask_crc, Decoder, MAX_VARINT64_LEN,
};
use crate::error::{Error, Result};
use crate::limits::MAX_BLOCK_BYTES;
use crate::options::Compression;

/// Length of the trailer after every block: type byte plus masked crc32c.
pub const BLOCK_TRAILER_LEN: usize = 5;

/// Largest encoded [`BlockHandle`]: two varint64s.
pub const MAX_BLOCK_HANDLE_LEN: usize = 2 * MAX_VARINT64_LEN;

/// Bytes reserved in the footer for the two handles (zero-padded).
const FOOTER_HANDLES_LEN: usize = 2 * MAX_BLOCK_HANDLE_LEN;

/// Length of the footer at the end of every table.
pub const FOOTER_LEN: usize = FOOTER_HANDLES_LEN + 4 + 4 + 8;

/// The last 8 bytes of every table: the ASCII bytes `shaleSST`, read as a little-endian u64.
/// Persisted: never change.
pub const TABLE_MAGIC: u64 = u64::from_le_bytes(*b"shaleSST");

/// The table format version this build writes and reads. Persisted: bump on any change.
pub const TABLE_FORMAT_VERSION: u32 = 1;

/// Compression type byte for a raw block. Persisted: never renumber.
pub const BLOCK_TYPE_NONE: u8 = 0;
/// Compression type byte for a Snappy (raw format) block. Persisted: never renumber.
pub const BLOCK_TYPE_SNAPPY: u8 = 1;
/// Compression type byte for an LZ4 block with a fixed32 size prefix. Persisted: never renumber.
pub const BLOCK_TYPE_LZ4: u8 = 2;
/// Compression type byte for a zstd block with a varint32 size prefix. Persisted: never renumber.
pub const BLOCK_TYPE_ZSTD: u8 = 3;

/// Where a block lives in a table: its offset and the length of its stored bytes (without the
/// trailer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BlockHandle {
    /// Byte offset of the block's first byte in the file.
    pub offset: u64,
    /// Stored (possibly compressed) length, not counting the 5-byte trailer.
    pub size: u64,
}

impl BlockHandle {
    /// A handle for `size` stored bytes at `offset`.
    pub fn new(offset: u64, size: u64) -> Self {
        BlockHandle { offset, size }
    }

    /// Appends the handle as `offset: varint64 | size: varint64`.
    pub fn encode_to(&self, dst: &mut Vec<u8>) {
        put_varint64(dst, self.offset);
        put_varint64(dst, self.size);
    }

    /// The encoded handle.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(MAX_BLOCK_HANDLE_LEN);
        self.encode_to(&mut v);
        v
    }

    /// Reads a handle from a decoder; `None` if the varints are truncated or malformed.
    pub fn decode_from(d: &mut Decoder<'_>) -> Option<BlockHandle> {
        let offset = d.varint64()?;
        let size = d.varint64()?;
        Some(BlockHandle { offset, size })
    }

    /// Decodes a handle that must fill `src` exactly (as index and metaindex values do).
    pub fn decode_exact(src: &[u8]) -> Option<BlockHandle> {
        let mut d = Decoder::new(src);
        let h = Self::decode_from(&mut d)?;
        d.is_empty().then_some(h)
    }

    /// Offset just past this block's trailer, or `None` on overflow.
    pub fn end_with_trailer(&self) -> Option<u64> {
        self.offset
            .checked_add(self.size)?
            .checked_add(BLOCK_TRAILER_LEN as u64)
    }
}

/// The decoded footer of a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Footer {
    /// Handle of the metaindex block (names of the filter and properties blocks).
    pub metaindex: BlockHandle,
    /// Handle of the index block (one entry per data block).
    pub index: BlockHandle,
    /// The format version the table was written with.
    pub format_version: u32,
}

impl Footer {
    /// Encodes the footer; the result is always [`FOOTER_LEN`] bytes.
    ///
    /// ```text
    /// +----------------------------------------------------------+  offset in footer
    /// | metaindex handle | index handle | zero padding            |  0..40
    /// +----------------------------------------------------------+
    /// | format_version: fixed32 LE                               |  40..44
    /// | masked crc32c of bytes 0..44: fixed32 LE                 |  44..48
    /// | magic "shaleSST": fixed64 LE                             |  48..56
    /// +----------------------------------------------------------+
    /// ```
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(FOOTER_LEN);
        self.metaindex.encode_to(&mut v);
        self.index.encode_to(&mut v);
        v.resize(FOOTER_HANDLES_LEN, 0);
        put_fixed32(&mut v, self.format_version);
        let crc = mask_crc(crc32c(&v));
        put_fixed32(&mut v, crc);
        put_fixed64(&mut v, TABLE_MAGIC);
        debug_assert_eq!(v.len(), FOOTER_LEN);
        v
    }
}

/// Decodes the footer of the table at `path` from its last [`FOOTER_LEN`] bytes, which start
/// at file offset `offset`.
///
/// Checks, in order: length, magic (a wrong magic means "not a shale table"), checksum (any
/// damage is [`Error::Corruption`]), then the version (an intact footer with an unknown version
/// is [`Error::UnsupportedFormat`]), then that the handles are well formed.
pub fn decode_footer(path: &Path, offset: u64, src: &[u8]) -> Result<Footer> {
    let corrupt = |m: String| Error::corruption(path, offset, m);
    if src.len() != FOOTER_LEN {
        return Err(corrupt(format!(
            "table footer must be {FOOTER_LEN} bytes, found {}",
            src.len()
        )));
    }
    let magic = src
        .get(FOOTER_LEN - 8..)
        .and_then(decode_fixed64)
        .unwrap_or(0);
    if magic != TABLE_MAGIC {
        return Err(corrupt(format!(
            "bad table magic {magic:#018x} (expected {TABLE_MAGIC:#018x}): not a shale table or truncated"
        )));
    }
    let covered = src.get(..FOOTER_HANDLES_LEN + 4).unwrap_or(&[]);
    let stored = src
        .get(FOOTER_HANDLES_LEN + 4..)
        .and_then(decode_fixed32)
        .unwrap_or(0);
    let actual = crc32c(covered);
    if unmask_crc(stored) != actual {
        return Err(corrupt(format!(
            "footer checksum mismatch: stored {:#010x}, computed {:#010x}",
            unmask_crc(stored),
            actual
        )));
    }
    let format_version = src
        .get(FOOTER_HANDLES_LEN..)
        .and_then(decode_fixed32)
        .unwrap_or(0);
    if format_version != TABLE_FORMAT_VERSION {
        return Err(Error::UnsupportedFormat {
            path: path.to_path_buf(),
            message: format!(
                "table format version {format_version}; this build reads version {TABLE_FORMAT_VERSION}"
            ),
        });
    }
    let mut d = Decoder::new(src.get(..FOOTER_HANDLES_LEN).unwrap_or(&[]));
    let metaindex = BlockHandle::decode_from(&mut d)
        .ok_or_else(|| corrupt("malformed metaindex handle in footer".into()))?;
    let index = BlockHandle::decode_from(&mut d)
        .ok_or_else(|| corrupt("malformed index handle in footer".into()))?;
    if d.remaining().iter().any(|&b| b != 0) {
        return Err(corrupt("non-zero padding in footer".into()));
    }
    Ok(Footer {
        metaindex,
        index,
        format_version,
    })
}

/// The masked crc32c stored in a block trailer: over the stored block bytes, then the type byte.
pub fn block_checksum(contents: &[u8], block_type: u8) -> u32 {
    mask_crc(crc32c_parts(&[contents, &[block_type]]))
}

/// Encodes a block trailer.
///
/// ```text
/// +-----------------+--------------------------------------------------+
/// | type: u8        | masked crc32c(contents ++ [type]): fixed32 LE    |
/// +-----------------+--------------------------------------------------+
/// ```
pub fn encode_block_trailer(contents: &[u8], block_type: u8) -> [u8; BLOCK_TRAILER_LEN] {
    let crc = block_checksum(contents, block_type).to_le_bytes();
    [block_type, crc[0], crc[1], crc[2], crc[3]]
}

/// Appends the fixed32 LE length of `raw` and `raw` as one LZ4 block (the reference C library,
/// whose decoder took half the instructions of `lz4_flex` on the benchmark's table blocks,
/// measured with callgrind), compressed with `acceleration` (1: LZ4's default), to `out`.
/// Returns false if the block is too large for LZ4 or the library fails.
fn lz4_compress(raw: &[u8], acceleration: u32, out: &mut Vec<u8>) -> bool {
    let Ok(len) = std::os::raw::c_int::try_from(raw.len()) else {
        return false;
    };
    // SAFETY: LZ4_compressBound is a pure function of its argument.
    let bound = unsafe { lz4_sys::LZ4_compressBound(len) };
    let Ok(capacity) = usize::try_from(bound) else {
        return false;
    };
    if capacity == 0 {
        return false;
    }
    out.extend_from_slice(&(len as u32).to_le_bytes());
    out.reserve(capacity);
    let start = out.len();
    // LZ4 treats anything below 1 as 1 and clamps large values itself.
    let acceleration =
        std::os::raw::c_int::try_from(acceleration).unwrap_or(std::os::raw::c_int::MAX);
    // SAFETY: `raw` is readable for `len` bytes; the destination is `out`'s spare capacity,
    // at least `bound` writable bytes, and LZ4_compress_fast writes at most `bound` bytes.
    let written = unsafe {
        lz4_sys::LZ4_compress_fast(
            raw.as_ptr().cast(),
            out.as_mut_ptr().add(start).cast(),
            len,
            bound,
            acceleration,
        )
    };
    let Ok(written) = usize::try_from(written) else {
        return false;
    };
    if written == 0 || written > capacity {
        return false;
    }
    // SAFETY: the library initialised `written` bytes of the spare capacity (checked above to
    // lie within the reservation).
    unsafe { out.set_len(start + written) };
    true
}

/// Decodes one LZ4 block of at most `max_len` bytes. Bytes from disk are untrusted:
/// LZ4_decompress_safe never reads past its input nor writes past `max_len` bytes, and reports
/// malformed input as a negative result.
fn lz4_decompress(body: &[u8], max_len: usize) -> std::result::Result<Vec<u8>, String> {
    let (Ok(src_len), Ok(dst_len)) = (
        std::os::raw::c_int::try_from(body.len()),
        std::os::raw::c_int::try_from(max_len),
    ) else {
        return Err("lz4 block too large".into());
    };
    let mut out: Vec<u8> = super::buffers::take(max_len);
    // SAFETY: `body` is readable for `src_len` bytes and `out` has `max_len` bytes of spare
    // capacity; the safe decoder stays within both (see above). Decoding into uninitialised
    // capacity spares zeroing a buffer that is about to be overwritten.
    let got = unsafe {
        lz4_sys::LZ4_decompress_safe(
            body.as_ptr().cast(),
            out.as_mut_ptr().cast(),
            src_len,
            dst_len,
        )
    };
    match usize::try_from(got) {
        Ok(n) if n <= max_len => {
            // SAFETY: the decoder initialised the first `n <= max_len` bytes.
            unsafe { out.set_len(n) };
            Ok(out)
        }
        _ => Err(format!("lz4 block does not decode (error {got})")),
    }
}

/// Compresses `raw` with `compression` into `out` (cleared first) and returns the type byte to
/// store. `lz4_acceleration` applies to LZ4 only (1: LZ4's default). Returns
/// [`BLOCK_TYPE_NONE`] (and leaves `out` empty) when the codec fails or saves less than 12.5%,
/// in which case the caller stores `raw` itself.
pub fn compress_block(
    compression: Compression,
    lz4_acceleration: u32,
    raw: &[u8],
    out: &mut Vec<u8>,
) -> u8 {
    out.clear();
    let block_type = match compression {
        Compression::None => return BLOCK_TYPE_NONE,
        Compression::Snappy => {
            out.resize(snap::raw::max_compress_len(raw.len()), 0);
            match snap::raw::Encoder::new().compress(raw, out) {
                Ok(n) => out.truncate(n),
                Err(_) => out.clear(),
            }
            BLOCK_TYPE_SNAPPY
        }
        Compression::Lz4 => {
            // Fixed32 LE uncompressed length, then one LZ4 block.
            if !lz4_compress(raw, lz4_acceleration, out) {
                out.clear();
            }
            BLOCK_TYPE_LZ4
        }
        Compression::Zstd(level) => {
            let Ok(len) = u32::try_from(raw.len()) else {
                return BLOCK_TYPE_NONE;
            };
            put_varint32(out, len);
            match zstd::bulk::compress(raw, level) {
                Ok(frame) => out.extend_from_slice(&frame),
                Err(_) => out.clear(),
            }
            BLOCK_TYPE_ZSTD
        }
    };
    // Compression must save at least 1/8 to be worth the decompression cost on every read.
    if out.is_empty() || out.len() > raw.len() - raw.len() / 8 {
        out.clear();
        return BLOCK_TYPE_NONE;
    }
    block_type
}

/// Reads the uncompressed length a compressed block claims, and refuses lengths over
/// [`MAX_BLOCK_BYTES`].
fn claimed_len(len: Option<u64>) -> std::result::Result<usize, String> {
    match len {
        None => Err("compressed block has a malformed length prefix".into()),
        Some(n) if n > MAX_BLOCK_BYTES => Err(format!(
            "compressed block claims {n} uncompressed bytes, over the {MAX_BLOCK_BYTES} limit"
        )),
        Some(n) => usize::try_from(n).map_err(|_| "block length overflows usize".into()),
    }
}

/// Decompresses stored block bytes of type `block_type`. Errors are messages; the caller adds
/// the file and offset.
fn decompress(block_type: u8, stored: &[u8]) -> std::result::Result<Vec<u8>, String> {
    match block_type {
        BLOCK_TYPE_NONE => {
            let mut out = super::buffers::take(stored.len());
            out.extend_from_slice(stored);
            Ok(out)
        }
        BLOCK_TYPE_SNAPPY => {
            let n = claimed_len(snap::raw::decompress_len(stored).ok().map(|n| n as u64))?;
            let mut out = super::buffers::take(n);
            out.resize(n, 0);
            match snap::raw::Decoder::new().decompress(stored, &mut out) {
                Ok(got) if got == n => Ok(out),
                Ok(got) => Err(format!("snappy block decoded to {got} bytes, expected {n}")),
                Err(e) => Err(format!("snappy block does not decode: {e}")),
            }
        }
        BLOCK_TYPE_LZ4 => {
            let n = claimed_len(decode_fixed32(stored).map(u64::from))?;
            let body = stored.get(4..).unwrap_or(&[]);
            let out = lz4_decompress(body, n)?;
            if out.len() == n {
                Ok(out)
            } else {
                Err(format!(
                    "lz4 block decoded to {} bytes, expected {n}",
                    out.len()
                ))
            }
        }
        BLOCK_TYPE_ZSTD => {
            let mut d = Decoder::new(stored);
            let n = claimed_len(d.varint32().map(u64::from))?;
            match zstd::bulk::decompress(d.remaining(), n) {
                Ok(out) if out.len() == n => Ok(out),
                Ok(out) => Err(format!(
                    "zstd block decoded to {} bytes, expected {n}",
                    out.len()
                )),
                Err(e) => Err(format!("zstd block does not decode: {e}")),
            }
        }
        other => Err(format!("unknown block compression type {other}")),
    }
}

/// Checks the trailer of one stored block (and its checksum when `verify_checksum` is set);
/// returns the block type and the length of the stored bytes before the trailer.
fn check_block(
    path: &Path,
    offset: u64,
    stored_with_trailer: &[u8],
    verify_checksum: bool,
) -> Result<(u8, usize)> {
    let corrupt = |m: String| Error::corruption(path, offset, m);
    let split = stored_with_trailer
        .len()
        .checked_sub(BLOCK_TRAILER_LEN)
        .ok_or_else(|| corrupt("block shorter than its trailer".into()))?;
    let (stored, trailer) = stored_with_trailer.split_at(split);
    let block_type = trailer.first().copied().unwrap_or(u8::MAX);
    if verify_checksum {
        let expected = trailer.get(1..).and_then(decode_fixed32).unwrap_or(0);
        // The type byte follows the stored bytes: one pass covers both, as
        // `block_checksum(stored, block_type)` would in two calls.
        let covered = stored_with_trailer.get(..split + 1).unwrap_or(stored);
        let actual = mask_crc(crc32c(covered));
        if expected != actual {
            return Err(corrupt(format!(
                "block checksum mismatch: stored {:#010x}, computed {:#010x} ({} bytes)",
                unmask_crc(expected),
                unmask_crc(actual),
                stored.len()
            )));
        }
    }
    Ok((block_type, split))
}

/// Turns the stored bytes of one block plus its trailer (`stored_with_trailer`, read from file
/// offset `offset` of `path`) into the uncompressed block contents. Also the entry point for a
/// block-decoding fuzz target.
///
/// When `verify_checksum` is set, the trailer's checksum is checked before anything is
/// decompressed, so damaged lengths are caught before they can drive an allocation.
pub fn decode_block(
    path: &Path,
    offset: u64,
    mut stored_with_trailer: Vec<u8>,
    verify_checksum: bool,
) -> Result<Vec<u8>> {
    let (block_type, split) = check_block(path, offset, &stored_with_trailer, verify_checksum)?;
    if block_type == BLOCK_TYPE_NONE {
        // Raw blocks are used in place rather than copied.
        stored_with_trailer.truncate(split);
        return Ok(stored_with_trailer);
    }
    decompress(block_type, &stored_with_trailer[..split])
        .map_err(|m| Error::corruption(path, offset, m))
}

/// [`decode_block`] for bytes borrowed from a memory-mapped file: the block is decompressed
/// straight from the map, so the only copy made is the decompressed output (or, for a raw
/// block, the block itself).
pub fn decode_block_in_place(
    path: &Path,
    offset: u64,
    stored_with_trailer: &[u8],
    verify_checksum: bool,
) -> Result<Vec<u8>> {
    let (block_type, split) = check_block(path, offset, stored_with_trailer, verify_checksum)?;
    decompress(block_type, &stored_with_trailer[..split])
        .map_err(|m| Error::corruption(path, offset, m))
}

/// Verifies the checksum of one stored block (plus trailer) and returns its contents when it
/// is stored uncompressed, so they can be used where they lie; `None` for a compressed block.
pub fn verified_plain_block<'a>(
    path: &Path,
    offset: u64,
    stored_with_trailer: &'a [u8],
) -> Result<Option<&'a [u8]>> {
    let (block_type, split) = check_block(path, offset, stored_with_trailer, true)?;
    Ok((block_type == BLOCK_TYPE_NONE).then(|| &stored_with_trailer[..split]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn p() -> PathBuf {
        PathBuf::from("/t/000001.sst")
    }

    #[test]
    fn handle_round_trip_and_golden() {
        let h = BlockHandle::new(300, 5);
        assert_eq!(h.encode(), [0xac, 0x02, 0x05]);
        assert_eq!(BlockHandle::decode_exact(&h.encode()), Some(h));
        assert_eq!(BlockHandle::decode_exact(&[0xac, 0x02, 0x05, 0]), None);
        assert_eq!(BlockHandle::decode_exact(&[0xac]), None);
        let big = BlockHandle::new(u64::MAX, u64::MAX);
        assert_eq!(big.encode().len(), MAX_BLOCK_HANDLE_LEN);
        assert_eq!(BlockHandle::decode_exact(&big.encode()), Some(big));
        assert_eq!(big.end_with_trailer(), None);
    }

    #[test]
    fn footer_golden_bytes() {
        let f = Footer {
            metaindex: BlockHandle::new(1, 2),
            index: BlockHandle::new(300, 4),
            format_version: TABLE_FORMAT_VERSION,
        };
        let enc = f.encode();
        assert_eq!(enc.len(), 56);
        let mut expected = vec![1, 2, 0xac, 0x02, 4];
        expected.resize(40, 0);
        expected.extend_from_slice(&[1, 0, 0, 0]);
        let crc = mask_crc(crc32c(&expected)).to_le_bytes();
        expected.extend_from_slice(&crc);
        expected.extend_from_slice(b"shaleSST");
        assert_eq!(enc, expected);
        assert_eq!(TABLE_MAGIC, 0x5453_5365_6c61_6873);
        assert_eq!(decode_footer(&p(), 0, &enc).expect("decode"), f);
    }

    #[test]
    fn footer_errors_are_clear() {
        let f = Footer {
            metaindex: BlockHandle::new(10, 20),
            index: BlockHandle::new(30, 40),
            format_version: TABLE_FORMAT_VERSION,
        };
        let enc = f.encode();
        let err = decode_footer(&p(), 7, &enc[1..]).expect_err("short");
        assert!(err.is_corruption(), "{err}");
        assert!(err.to_string().contains("000001.sst"), "{err}");
        let mut bad = enc.clone();
        bad[55] ^= 1;
        let err = decode_footer(&p(), 7, &bad).expect_err("magic");
        assert!(err.to_string().contains("magic"), "{err}");
        for i in 0..48 {
            let mut bad = enc.clone();
            bad[i] ^= 0x10;
            let err = decode_footer(&p(), 7, &bad).expect_err("flip");
            assert!(err.is_corruption(), "byte {i}: {err}");
        }
        // An intact footer from a future version is "unsupported", not "corrupt".
        let mut future = enc[..40].to_vec();
        put_fixed32(&mut future, 2);
        let crc = mask_crc(crc32c(&future));
        put_fixed32(&mut future, crc);
        put_fixed64(&mut future, TABLE_MAGIC);
        let err = decode_footer(&p(), 7, &future).expect_err("version");
        assert!(matches!(err, Error::UnsupportedFormat { .. }), "{err}");
    }

    #[test]
    fn trailer_golden_bytes() {
        let t = encode_block_trailer(b"abc", BLOCK_TYPE_NONE);
        let crc = mask_crc(crc32c(b"abc\x00")).to_le_bytes();
        assert_eq!(t, [0, crc[0], crc[1], crc[2], crc[3]]);
        // Pin the actual value so a change to the checksum recipe cannot go unnoticed.
        assert_eq!(u32::from_le_bytes(crc), mask_crc(0x3494_0e4c));
        assert_eq!(crc32c(b"abc\x00"), 0x3494_0e4c);
    }

    #[test]
    fn every_codec_round_trips_and_skips_incompressible() {
        let compressible: Vec<u8> = (0..4000u32).flat_map(|i| (i % 7).to_le_bytes()).collect();
        let mut state = 0x1234_5678_u64;
        let random: Vec<u8> = (0..4000)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (state >> 56) as u8
            })
            .collect();
        for c in [
            Compression::None,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd(3),
        ] {
            let mut out = Vec::new();
            let t = compress_block(c, 1, &compressible, &mut out);
            assert_eq!(t, c.code(), "{c:?}");
            let stored = if t == BLOCK_TYPE_NONE {
                compressible.clone()
            } else {
                assert!(out.len() < compressible.len() / 2);
                out.clone()
            };
            let mut with_trailer = stored.clone();
            with_trailer.extend_from_slice(&encode_block_trailer(&stored, t));
            assert_eq!(
                decode_block(&p(), 0, with_trailer, true).expect("decode"),
                compressible
            );
            assert_eq!(compress_block(c, 1, &random, &mut out), BLOCK_TYPE_NONE);
            assert!(out.is_empty());
        }
    }

    #[test]
    fn huge_claimed_lengths_are_refused_without_allocating() {
        for (t, stored) in [
            (BLOCK_TYPE_LZ4, vec![0xff, 0xff, 0xff, 0xff, 0]),
            (BLOCK_TYPE_SNAPPY, vec![0xff, 0xff, 0xff, 0xff, 0x0f, 0]),
            (BLOCK_TYPE_ZSTD, vec![0xff, 0xff, 0xff, 0xff, 0x0f, 0]),
            (9, vec![1, 2, 3]),
        ] {
            let mut with_trailer = stored.clone();
            with_trailer.extend_from_slice(&encode_block_trailer(&stored, t));
            let err = decode_block(&p(), 99, with_trailer, true).expect_err("refused");
            assert!(err.is_corruption());
            assert!(err.to_string().contains("offset 99"), "{err}");
        }
        let err = decode_block(&p(), 0, vec![1, 2], false).expect_err("short");
        assert!(err.is_corruption());
    }
}
