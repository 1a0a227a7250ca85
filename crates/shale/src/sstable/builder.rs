//! Writes one table file front to back: data blocks as entries arrive, then the filter, index,
//! properties and metaindex blocks and the footer.
//!
//! Invariants: keys arrive in strictly increasing internal key order (debug-asserted); an index
//! entry for a data block is written only once the next key (or the end of the table) is known,
//! so its separator can be shortened to lie between the two blocks. After a failed write the
//! builder refuses further work and returns that error again.
//!
//! Thread-safety: one thread at a time.
//!
//! Format doc: `docs/format/sstable.md` ("File layout").

use std::cmp::Ordering;
use std::path::{Path, PathBuf};

use crate::env::WritableFile;
use crate::error::{Error, Result};
use crate::key::{parse_internal_key, ValueKind};
use crate::limits::MAX_BLOCK_BYTES;
use crate::options::Compression;

use super::block::BlockBuilder;
use super::filter::BloomFilterBuilder;
use super::format::{
    compress_block, encode_block_trailer, BlockHandle, Footer, BLOCK_TRAILER_LEN, BLOCK_TYPE_NONE,
    TABLE_FORMAT_VERSION,
};
use super::properties::{encode_properties, TableProperties};
use super::{compression_name, TableOptions, FILTER_BLOCK_NAME, PROPERTIES_BLOCK_NAME};

/// Index entries between restart points. Neighbouring separators share most of their bytes,
/// so prefix-compressing them shrinks the index, which every open table keeps in memory, by
/// about 40% (at 2 KiB blocks, 1.4 MB less for a 1M-key database); a lookup then scans up to
/// this many entries after its binary search.
const INDEX_RESTART_INTERVAL: usize = 8;

/// Bytes of a table written between starts of their writeback to the device
/// ([`WritableFile::write_back_every`]).
const WRITEBACK_BYTES: u64 = 1 << 20;

/// Builds a table file from entries added in order.
pub struct TableBuilder {
    opts: TableOptions,
    file: Box<dyn WritableFile>,
    path: PathBuf,
    /// Bytes written to the file so far.
    offset: u64,
    data_block: BlockBuilder,
    index_block: BlockBuilder,
    filter: Option<BloomFilterBuilder>,
    /// The last key added, kept across data blocks for separators and the order check.
    last_key: Vec<u8>,
    /// Handle of the last flushed data block, whose index entry waits for the next key.
    pending_handle: Option<BlockHandle>,
    props: TableProperties,
    /// The finished data block, reused from block to block.
    raw: Vec<u8>,
    /// Reused output buffer for compression.
    compressed: Vec<u8>,
    /// The first write error; every later call returns it again.
    failed: Option<Error>,
}

/// Compresses (if worthwhile) and appends one block with its trailer; returns its handle.
/// A block whose contents exceed `max_block_bytes` ([`MAX_BLOCK_BYTES`] but in tests) is
/// refused, compressed or not: readers refuse to inflate one (a merge result or a
/// compaction filter's value can make a block that large, and it would fail every read).
#[allow(clippy::too_many_arguments)]
fn write_block(
    file: &mut dyn WritableFile,
    path: &Path,
    offset: &mut u64,
    scratch: &mut Vec<u8>,
    raw: &[u8],
    compression: Compression,
    lz4_acceleration: u32,
    max_block_bytes: u64,
) -> Result<BlockHandle> {
    if raw.len() as u64 > max_block_bytes {
        return Err(Error::InvalidArgument(format!(
            "block of {} bytes for {} exceeds the {max_block_bytes}-byte limit",
            raw.len(),
            path.display()
        )));
    }
    // A compressed block is kept only when smaller than its contents: checked above too.
    let block_type = compress_block(compression, lz4_acceleration, raw, scratch);
    let stored: &[u8] = if block_type == BLOCK_TYPE_NONE {
        raw
    } else {
        scratch
    };
    let handle = BlockHandle::new(*offset, stored.len() as u64);
    file.append(stored)?;
    file.append(&encode_block_trailer(stored, block_type))?;
    *offset += stored.len() as u64 + BLOCK_TRAILER_LEN as u64;
    Ok(handle)
}

impl TableBuilder {
    /// Bounds the bloom filter's distinct user keys by `max_keys`, so that past a quarter of
    /// them it sets its bits as keys come instead of keeping every key's hash to the end
    /// ([`BloomFilterBuilder::with_key_bound`]). Only before the first key; later calls are
    /// ignored.
    pub fn bound_keys(&mut self, max_keys: usize) {
        if self.props.num_entries == 0 {
            if let Some(filter) = &mut self.filter {
                *filter =
                    BloomFilterBuilder::with_key_bound(self.opts.bloom_bits_per_key, max_keys);
            }
        }
    }

    /// A builder writing to `file` (a new, empty file at `path`).
    pub fn new(opts: TableOptions, mut file: Box<dyn WritableFile>, path: PathBuf) -> TableBuilder {
        // A table is synced once, complete: its bytes may head for the device as they come.
        file.write_back_every(WRITEBACK_BYTES);
        let filter =
            (opts.bloom_bits_per_key > 0).then(|| BloomFilterBuilder::new(opts.bloom_bits_per_key));
        let props = TableProperties {
            compression: compression_name(opts.compression),
            comparator: opts.icmp.user().name().to_string(),
            format_version: TABLE_FORMAT_VERSION,
            ..TableProperties::default()
        };
        TableBuilder {
            data_block: BlockBuilder::new(opts.block_restart_interval),
            index_block: BlockBuilder::new(INDEX_RESTART_INTERVAL),
            opts,
            file,
            path,
            offset: 0,
            filter,
            last_key: Vec::new(),
            pending_handle: None,
            props,
            raw: Vec::new(),
            compressed: Vec::new(),
            failed: None,
        }
    }

    fn check_failed(&self) -> Result<()> {
        match &self.failed {
            Some(e) => Err(e.duplicate()),
            None => Ok(()),
        }
    }

    fn remember<T>(&mut self, r: Result<T>) -> Result<T> {
        if let Err(e) = &r {
            if self.failed.is_none() {
                self.failed = Some(e.duplicate());
            }
        }
        r
    }

    /// Adds an entry.
    ///
    /// REQUIRES: ikey strictly greater than every key added before (internal key order).
    pub fn add(&mut self, ikey: &[u8], value: &[u8]) -> Result<()> {
        self.check_failed()?;
        let Some(parsed) = parse_internal_key(ikey) else {
            return Err(Error::InvalidArgument(format!(
                "table {}: malformed internal key {:?}",
                self.path.display(),
                String::from_utf8_lossy(ikey)
            )));
        };
        debug_assert!(
            self.props.num_entries == 0
                || self.opts.icmp.compare(&self.last_key, ikey) == Ordering::Less,
            "keys must be added in strictly increasing order"
        );
        if let Some(handle) = self.pending_handle.take() {
            // Shorten the index key to anything in [last key of the block, first key of next).
            let mut separator = std::mem::take(&mut self.last_key);
            self.opts.icmp.find_shortest_separator(&mut separator, ikey);
            self.index_block.add(&separator, &handle.encode());
        }
        if let Some(f) = &mut self.filter {
            f.add_key(parsed.user_key);
        }
        let p = &mut self.props;
        if p.num_entries == 0 {
            p.smallest_key = ikey.to_vec();
            p.smallest_seqno = parsed.sequence;
        }
        p.num_entries += 1;
        match parsed.kind {
            ValueKind::Deletion => p.num_deletions += 1,
            ValueKind::Merge => p.num_merges += 1,
            ValueKind::ExpiringValue | ValueKind::ExpiringBlobIndex => {
                // A value too short to hold its expiry is corrupt; it is kept as it is and
                // counts as never expiring, so the table is never dropped for it.
                if let Some(expiry) = crate::codec::decode_fixed64(value) {
                    p.num_expiring += 1;
                    p.max_expiry_micros = p.max_expiry_micros.max(expiry);
                }
            }
            ValueKind::Value | ValueKind::BlobIndex => {}
        }
        p.raw_key_bytes += ikey.len() as u64;
        p.raw_value_bytes += value.len() as u64;
        p.smallest_seqno = p.smallest_seqno.min(parsed.sequence);
        p.largest_seqno = p.largest_seqno.max(parsed.sequence);
        self.last_key.clear();
        self.last_key.extend_from_slice(ikey);
        self.data_block.add(ikey, value);
        if self.data_block.size_estimate() >= self.opts.block_size {
            self.flush_data_block()?;
        }
        Ok(())
    }

    fn flush_data_block(&mut self) -> Result<()> {
        if self.data_block.is_empty() {
            return Ok(());
        }
        self.data_block.finish_into(&mut self.raw);
        let r = write_block(
            self.file.as_mut(),
            &self.path,
            &mut self.offset,
            &mut self.compressed,
            &self.raw,
            self.opts.compression,
            self.opts.lz4_acceleration,
            MAX_BLOCK_BYTES,
        );
        let handle = self.remember(r)?;
        self.props.num_data_blocks += 1;
        self.props.data_size = self.offset;
        self.pending_handle = Some(handle);
        Ok(())
    }

    fn write_meta_block(&mut self, raw: &[u8], compression: Compression) -> Result<BlockHandle> {
        let r = write_block(
            self.file.as_mut(),
            &self.path,
            &mut self.offset,
            &mut self.compressed,
            raw,
            compression,
            self.opts.lz4_acceleration,
            MAX_BLOCK_BYTES,
        );
        self.remember(r)
    }

    /// Entries added so far.
    pub fn num_entries(&self) -> u64 {
        self.props.num_entries
    }

    /// Bytes written so far plus the size of the block being filled.
    pub fn file_size(&self) -> u64 {
        let pending = if self.data_block.is_empty() {
            0
        } else {
            self.data_block.size_estimate() as u64
        };
        self.offset + pending
    }

    /// Writes the filter, index, properties and metaindex blocks and the footer, then syncs and
    /// closes the file. Returns the table's properties, `file_size` included.
    pub fn finish(mut self) -> Result<TableProperties> {
        self.check_failed()?;
        self.flush_data_block()?;
        self.props.largest_key = self.last_key.clone();
        let filter_bytes = self.filter.take().map(|f| f.finish());
        let filter_handle = match filter_bytes {
            // A bloom filter is close to random bits: compressing it is wasted effort.
            Some(bytes) => Some(self.write_meta_block(&bytes, Compression::None)?),
            None => None,
        };
        if let Some(handle) = self.pending_handle.take() {
            let mut successor = std::mem::take(&mut self.last_key);
            self.opts.icmp.find_short_successor(&mut successor);
            self.index_block.add(&successor, &handle.encode());
        }
        let index_raw = self.index_block.finish();
        let index_handle = self.write_meta_block(&index_raw, self.opts.compression)?;
        self.props.filter_size = filter_handle.map_or(0, |h| h.size + BLOCK_TRAILER_LEN as u64);
        self.props.index_size = index_handle.size + BLOCK_TRAILER_LEN as u64;
        let props_raw = encode_properties(&self.props);
        let props_handle = self.write_meta_block(&props_raw, Compression::None)?;
        // Metaindex entries must be sorted by name.
        let mut meta: Vec<(&str, BlockHandle)> = vec![(PROPERTIES_BLOCK_NAME, props_handle)];
        if let Some(h) = filter_handle {
            meta.push((FILTER_BLOCK_NAME, h));
        }
        meta.sort_by(|a, b| a.0.cmp(b.0));
        let mut metaindex = BlockBuilder::new(1);
        for (name, handle) in &meta {
            metaindex.add(name.as_bytes(), &handle.encode());
        }
        let metaindex_raw = metaindex.finish();
        let metaindex_handle = self.write_meta_block(&metaindex_raw, Compression::None)?;
        let footer = Footer {
            metaindex: metaindex_handle,
            index: index_handle,
            format_version: TABLE_FORMAT_VERSION,
        }
        .encode();
        let file = self.file.as_mut();
        let r = file
            .append(&footer)
            .and_then(|()| file.sync())
            .and_then(|()| file.close());
        self.remember(r)?;
        self.offset += footer.len() as u64;
        self.props.file_size = self.offset;
        Ok(self.props)
    }

    /// Closes the file without finishing the table; the caller deletes it.
    pub fn abandon(mut self) {
        // The file is garbage either way; a close error changes nothing.
        let _ = self.file.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::{Fs, MemFs};

    /// The limit applies to what a reader must inflate, not to what is stored: a block of
    /// zeros compresses to almost nothing, and was written although no read could take it.
    #[test]
    fn a_block_too_large_to_read_back_is_refused_however_well_it_compresses() {
        let fs = MemFs::new();
        let path = Path::new("/db/000007.sst");
        fs.create_dir_all(Path::new("/db")).expect("dir");
        let mut file = fs.create(path).expect("create");
        let raw = vec![0u8; 64 << 10];
        let limit = 4096;
        let mut offset = 0;
        let mut write = |raw: &[u8], compression, offset: &mut u64| {
            write_block(
                file.as_mut(),
                path,
                offset,
                &mut Vec::new(),
                raw,
                compression,
                1,
                limit,
            )
        };
        for compression in [Compression::None, Compression::Lz4, Compression::Zstd(3)] {
            let e = write(&raw, compression, &mut offset).expect_err("over the limit");
            assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
            let text = e.to_string();
            assert!(
                text.contains("65536 bytes") && text.contains("000007.sst"),
                "{text}"
            );
            assert_eq!(offset, 0, "nothing written");
        }
        let handle =
            write(&raw[..limit as usize], Compression::Lz4, &mut offset).expect("at the limit");
        assert_eq!(handle.offset, 0);
        assert!(offset > 0);
    }
}
