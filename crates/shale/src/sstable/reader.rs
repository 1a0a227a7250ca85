//! Opens a table file, keeps its index, filter and properties in memory, and serves point
//! lookups and two-level iterators (index block -> data blocks) over it.
//!
//! Invariants: every block handle taken from the file is bounds-checked against the file
//! before anything is read or allocated; the footer, metaindex, index, filter and properties
//! blocks are always checksum-verified at open; data blocks are verified on every read from the
//! file unless [`ReadFlags::verify_checksums`] is off.
//!
//! Thread-safety: [`TableReader`] is `Send + Sync` and immutable after open; reads go through
//! the positional [`RandomAccessFile`] and the concurrent [`BlockCache`]. A [`TableIterator`]
//! belongs to one thread.
//!
//! Format doc: `docs/format/sstable.md` ("Reading a table").

use std::cmp::Ordering;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::cache::BlockCache;
use crate::env::RandomAccessFile;
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::{parse_internal_key, user_key};
use crate::limits::MAX_BLOCK_BYTES;

use super::block::{Block, BlockCorruption, BlockIter};
use super::filter::{filter_hash, BloomFilter, FilterLayout};
use super::format::{
    decode_block, decode_block_in_place, decode_footer, verified_plain_block, BlockHandle, Footer,
    BLOCK_TRAILER_LEN, FOOTER_LEN,
};
use super::properties::{decode_properties, decode_string_block, TableProperties};
use super::{
    ReadFlags, TableOptions, FILTER_BLOCK_NAME, LEGACY_FILTER_BLOCK_NAME, PROPERTIES_BLOCK_NAME,
    RELEASE_BEHIND_BYTES,
};

/// The stored bytes of a block plus its trailer (`len` bytes in all) inside the file's memory
/// map, or `None` when the file is not mapped.
fn mapped_block<'a>(
    file: &'a dyn RandomAccessFile,
    path: &Path,
    handle: BlockHandle,
    len: usize,
) -> Result<Option<&'a [u8]>> {
    let Some(map) = file.mapped() else {
        return Ok(None);
    };
    usize::try_from(handle.offset)
        .ok()
        .and_then(|start| map.get(start..start.checked_add(len)?))
        .map(Some)
        .ok_or_else(|| Error::corruption(path, handle.offset, "block extends past the mapped file"))
}

/// Reads and decodes the footer of the table in `file`; returns it with its offset (where
/// the block area ends).
fn read_footer(file: &dyn RandomAccessFile, path: &Path) -> Result<(Footer, u64)> {
    let file_size = file.size();
    let Some(footer_offset) = file_size.checked_sub(FOOTER_LEN as u64) else {
        return Err(Error::corruption(
            path,
            0,
            format!(
                "file of {file_size} bytes is too short to be a table (footer is {FOOTER_LEN} bytes)"
            ),
        ));
    };
    let mut footer_bytes = [0u8; FOOTER_LEN];
    file.read_exact_at(footer_offset, &mut footer_bytes)?;
    Ok((
        decode_footer(path, footer_offset, &footer_bytes)?,
        footer_offset,
    ))
}

/// The metaindex's entries: each meta block's name and handle.
type MetaIndex = Vec<(Vec<u8>, BlockHandle)>;

/// Reads the metaindex the footer names: every (name, handle) entry, and the handle of the
/// properties block, which every table has.
fn read_metaindex(
    file: &dyn RandomAccessFile,
    path: &Path,
    footer: &Footer,
    footer_offset: u64,
) -> Result<(MetaIndex, BlockHandle)> {
    let at = footer.metaindex.offset;
    let entries = decode_string_block(read_block_contents(
        file,
        path,
        footer_offset,
        footer.metaindex,
        true,
    )?)
    .map_err(|m| Error::corruption(path, at, format!("metaindex: {m}")))?;
    let mut meta = Vec::with_capacity(entries.len());
    for (name, value) in entries {
        let Some(handle) = BlockHandle::decode_exact(&value) else {
            return Err(Error::corruption(
                path,
                at,
                format!(
                    "metaindex entry {:?} holds a malformed handle",
                    String::from_utf8_lossy(&name)
                ),
            ));
        };
        meta.push((name, handle));
    }
    let props = meta
        .iter()
        .find(|(n, _)| n.as_slice() == PROPERTIES_BLOCK_NAME.as_bytes())
        .map(|(_, h)| *h)
        .ok_or_else(|| Error::corruption(path, at, "no properties block"))?;
    Ok((meta, props))
}

/// A data block read for a caller: the cache's, or the caller's own when the cache turned it
/// away.
enum LookupBlock {
    /// Held by the block cache too.
    Shared(Arc<Block>),
    /// Read for this caller alone; dropped (its buffer recycled) when the caller is done.
    Own(Block),
}

impl LookupBlock {
    /// The block, wherever it is held.
    fn get(&self) -> &Block {
        match self {
            LookupBlock::Shared(block) => block,
            LookupBlock::Own(block) => block,
        }
    }
}

/// Bytes the block at `handle` takes in the file, its trailer included.
fn stored_len(handle: BlockHandle) -> Option<usize> {
    usize::try_from(handle.size)
        .ok()?
        .checked_add(BLOCK_TRAILER_LEN)
}

/// Whether the block at `handle` is of an allowed size and lies, trailer included, in the block
/// area (`..footer_offset`).
fn in_block_area(handle: BlockHandle, footer_offset: u64) -> bool {
    handle.size <= MAX_BLOCK_BYTES
        && handle
            .end_with_trailer()
            .is_some_and(|end| end <= footer_offset)
}

/// Reads one block from the file (never the cache) and returns its uncompressed contents.
/// Handles are checked against the block area (`..footer_offset`) before anything is allocated.
fn read_block_contents(
    file: &dyn RandomAccessFile,
    path: &Path,
    footer_offset: u64,
    handle: BlockHandle,
    verify: bool,
) -> Result<Vec<u8>> {
    if !in_block_area(handle, footer_offset) {
        return Err(Error::corruption(
            path,
            handle.offset,
            format!(
                "block handle (offset {}, size {}) points outside the table's {} block bytes",
                handle.offset, handle.size, footer_offset
            ),
        ));
    }
    let len = stored_len(handle)
        .ok_or_else(|| Error::corruption(path, handle.offset, "block size overflows usize"))?;
    if let Some(stored) = mapped_block(file, path, handle, len)? {
        return decode_block_in_place(path, handle.offset, stored, verify);
    }
    let mut buf = vec![0u8; len];
    file.read_exact_at(handle.offset, &mut buf)?;
    decode_block(path, handle.offset, buf, verify)
}

/// After this many data blocks entered one after another without a seek, a table iterator
/// reads the rest of its run straight from the file, neither looking in the block cache nor
/// filling it. A long scan would otherwise push every block through the cache: the lookups
/// and inserts were 4.6% of a `readseq` profile, and each insert evicts a block that point
/// lookups may still want. Short range scans (under about 64 KiB of 2 KiB blocks) still cache.
pub const SCAN_BLOCKS_BEFORE_BYPASS: u32 = 32;

/// Key buffers larger than this are not kept for the next point lookup on the thread.
const MAX_KEPT_KEY_BUFFER: usize = 4096;

thread_local! {
    /// The key buffers of a point lookup's index and data cursors, handed from one lookup to
    /// the next on this thread, so a lookup allocates none (two allocations and frees a table
    /// probed before). Taken out for the lookup and put back after, so a nested lookup on the
    /// same thread simply starts with empty ones.
    static GET_KEY_BUFFERS: std::cell::Cell<(Vec<u8>, Vec<u8>)> =
        const { std::cell::Cell::new((Vec::new(), Vec::new())) };
}

/// When a point lookup checks a table's bloom filter ([`TableReader::get_filtered`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FilterUse {
    /// Before the index search: a key the filter rejects costs one cache line.
    First,
    /// After the index search, its line loaded during it: for a table that most likely holds
    /// the key, the filter's cache miss then costs nothing when it passes; when it does not,
    /// the index search was wasted.
    Last,
    /// Not at all: for a table that almost surely holds the key, the filter's line, hash and
    /// probes are all wasted work (RocksDB's `optimize_filters_for_hits` makes the same trade
    /// for its last level, for good, as an option). A key the table lacks then costs an index
    /// search and a data block read.
    Skip,
}

/// An open table file.
pub struct TableReader {
    opts: TableOptions,
    file: Arc<dyn RandomAccessFile>,
    path: PathBuf,
    cache_id: u64,
    cache: Option<Arc<BlockCache>>,
    footer: Footer,
    /// Offset of the footer: every block must end at or before it.
    footer_offset: u64,
    index: Arc<Block>,
    filter: Option<BloomFilter>,
    meta: MetaIndex,
    props: TableProperties,
}

impl std::fmt::Debug for TableReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableReader")
            .field("path", &self.path)
            .field("cache_id", &self.cache_id)
            .field("footer", &self.footer)
            .finish_non_exhaustive()
    }
}

impl TableReader {
    /// Opens the table in `file` (at `path`, for messages): reads and verifies the footer,
    /// metaindex, index, filter and properties blocks. Blocks of this table are cached under
    /// `cache_id`, which must be unique among the tables sharing `cache`.
    pub fn open(
        opts: TableOptions,
        file: Arc<dyn RandomAccessFile>,
        path: PathBuf,
        cache_id: u64,
        cache: Option<Arc<BlockCache>>,
    ) -> Result<TableReader> {
        let file_size = file.size();
        let (footer, footer_offset) = read_footer(file.as_ref(), &path)?;
        let corrupt = |offset: u64, m: String| Error::corruption(&path, offset, m);
        let read = |handle: BlockHandle| {
            read_block_contents(file.as_ref(), &path, footer_offset, handle, true)
        };

        let (meta, props_handle) = read_metaindex(file.as_ref(), &path, &footer, footer_offset)?;
        let find = |name: &str| {
            meta.iter()
                .find(|(n, _)| n.as_slice() == name.as_bytes())
                .map(|(_, h)| *h)
        };
        let mut props = decode_properties(read(props_handle)?)
            .map_err(|m| corrupt(props_handle.offset, format!("properties: {m}")))?;
        props.file_size = file_size;
        let expected = opts.icmp.user().name();
        if props.comparator != expected {
            return Err(Error::InvalidArgument(format!(
                "table {} was written with comparator {:?} but is opened with {:?}",
                path.display(),
                props.comparator,
                expected
            )));
        }

        // A table has at most one filter; one written before the cache-local layout has the
        // whole-table one.
        let filter_block = find(FILTER_BLOCK_NAME)
            .map(|h| (h, FilterLayout::Blocked))
            .or_else(|| find(LEGACY_FILTER_BLOCK_NAME).map(|h| (h, FilterLayout::Whole)));
        let filter = match filter_block {
            Some((h, layout)) => {
                let parsed = match Self::mapped_filter(&file, &path, footer_offset, h, layout)? {
                    Some(parsed) => parsed,
                    None => BloomFilter::from_bytes(&read(h)?, layout),
                };
                Some(parsed.map_err(|m| corrupt(h.offset, format!("filter: {m}")))?)
            }
            None => None,
        };

        let mut index = Block::new(read(footer.index)?)
            .map_err(|m| corrupt(footer.index.offset, format!("index block: {m}")))?;
        if opts.icmp.is_bytewise() {
            index = index.with_restart_prefixes();
        }
        Ok(TableReader {
            opts,
            file,
            path,
            cache_id,
            cache,
            footer,
            footer_offset,
            index: Arc::new(index),
            filter,
            meta,
            props,
        })
    }

    /// Checks the table in `file` (at `path`, for messages) for what a write can get wrong
    /// where [`TableReader::open`] would look: the footer, then the metaindex, every block it
    /// names (the properties block must be one of them, the filter another when there is one)
    /// and the index, each against its checksum. Unlike `open` it does not decompress or
    /// parse those blocks, which a checksum that matches leaves as the builder made them.
    /// Nothing is kept.
    ///
    /// A mapped file's blocks are checked where they lie, so the check allocates little beyond
    /// the metaindex's few entries: the database checks every table it writes, and copies of
    /// their index blocks, freed at once, still raised the peak memory of a write-only load
    /// by 0.4 MiB (the allocator kept the pages).
    pub fn verify_file(file: &dyn RandomAccessFile, path: &Path) -> Result<()> {
        let (footer, footer_offset) = read_footer(file, path)?;
        let check = |handle: BlockHandle| -> Result<()> {
            let in_place = stored_len(handle).filter(|_| in_block_area(handle, footer_offset));
            if let Some(len) = in_place {
                if let Some(stored) = mapped_block(file, path, handle, len)? {
                    return verified_plain_block(path, handle.offset, stored).map(drop);
                }
            }
            // Not mapped, or out of bounds (which the read reports).
            read_block_contents(file, path, footer_offset, handle, true).map(drop)
        };
        let (meta, _) = read_metaindex(file, path, &footer, footer_offset)?;
        for (_, handle) in meta {
            check(handle)?;
        }
        check(footer.index)
    }

    /// The filter block read in place from the file's memory map, verified, when the file is
    /// mapped and the block is stored uncompressed (as filters are written). `None`: read it.
    fn mapped_filter(
        file: &Arc<dyn RandomAccessFile>,
        path: &Path,
        footer_offset: u64,
        handle: BlockHandle,
        layout: FilterLayout,
    ) -> Result<Option<std::result::Result<BloomFilter, &'static str>>> {
        let in_bounds = handle
            .end_with_trailer()
            .is_some_and(|end| end <= footer_offset);
        let (Some(len), true) = (
            usize::try_from(handle.size)
                .ok()
                .and_then(|n| n.checked_add(BLOCK_TRAILER_LEN)),
            in_bounds,
        ) else {
            // Reading it reports what is wrong.
            return Ok(None);
        };
        let Some(stored) = mapped_block(file.as_ref(), path, handle, len)? else {
            return Ok(None);
        };
        if verified_plain_block(path, handle.offset, stored)?.is_none() {
            return Ok(None);
        }
        let start = usize::try_from(handle.offset).ok();
        let size = usize::try_from(handle.size).ok();
        Ok(start
            .zip(size)
            .and_then(|(start, size)| BloomFilter::from_mapped(file.clone(), start, size, layout)))
    }

    fn corrupt(&self, offset: u64, message: impl Into<String>) -> Error {
        Error::corruption(&self.path, offset, message)
    }

    fn block_corrupt(&self, handle: BlockHandle, what: &str, c: BlockCorruption) -> Error {
        self.corrupt(
            handle.offset,
            format!("{what} block: {} (at byte {} of the block)", c.1, c.0),
        )
    }

    fn read_block_contents(&self, handle: BlockHandle, verify: bool) -> Result<Vec<u8>> {
        read_block_contents(
            self.file.as_ref(),
            &self.path,
            self.footer_offset,
            handle,
            verify,
        )
    }

    /// The data block at `handle`, from the cache when present (filling it if `flags` say so
    /// and admission lets it in).
    pub fn read_block(&self, handle: BlockHandle, flags: ReadFlags) -> Result<Arc<Block>> {
        Ok(match self.lookup_block(handle, flags)? {
            LookupBlock::Shared(block) => block,
            LookupBlock::Own(block) => Arc::new(block),
        })
    }

    /// Asks the CPU to start loading the stored bytes of the block at `handle` when the file
    /// is mapped: the checksum reads the block front to back after the trailer at its end, so
    /// all its cache lines should be on their way at once. A hint only: out-of-range handles
    /// are left to the read to report.
    fn prefetch_stored(&self, handle: BlockHandle) {
        let stored = stored_len(handle)
            .and_then(|len| mapped_block(self.file.as_ref(), &self.path, handle, len).ok())
            .flatten();
        if let Some(stored) = stored {
            crate::prefetch::lines(stored);
        }
    }

    /// The data block at `handle`: shared with the cache when it is cached or admitted to it
    /// (if `flags` fill the cache), otherwise the caller's own.
    ///
    /// Why: with a cache much smaller than the data, admission turns most blocks away, and
    /// sharing one (an `Arc`) then cost a point lookup an allocation and a free, about 90 of
    /// the 8,300 instructions of a lookup on a compacted database (callgrind).
    fn lookup_block(&self, handle: BlockHandle, flags: ReadFlags) -> Result<LookupBlock> {
        // Start loading the stored block before probing the cache: a cache much smaller than
        // the data mostly misses, and the probe's own misses then overlap the block's.
        self.prefetch_stored(handle);
        let Some(cache) = &self.cache else {
            return self
                .load_block(handle, flags.verify_checksums)
                .map(LookupBlock::Own);
        };
        if let Some(block) = cache.get(self.cache_id, handle.offset) {
            // A cached block is usually cold in the CPU cache, and a seek's binary search
            // would take its misses one after another; loading all its lines at once
            // overlaps them (readrandom on a 1 GB cache: 390k -> 563k ops/s).
            block.prefetch();
            return Ok(LookupBlock::Shared(block));
        }
        let block = self.load_block(handle, flags.verify_checksums)?;
        if flags.fill_cache && cache.admits(self.cache_id, handle.offset) {
            let block = Arc::new(block);
            cache.insert_admitted(self.cache_id, handle.offset, block.clone());
            return Ok(LookupBlock::Shared(block));
        }
        Ok(LookupBlock::Own(block))
    }

    /// The data block at `handle`, read from the file without looking in or filling the cache.
    pub fn read_block_uncached(&self, handle: BlockHandle, verify: bool) -> Result<Arc<Block>> {
        self.prefetch_stored(handle);
        self.load_block(handle, verify).map(Arc::new)
    }

    /// Reads and decodes the data block at `handle` (its prefetch already issued).
    fn load_block(&self, handle: BlockHandle, verify: bool) -> Result<Block> {
        let raw = self.read_block_contents(handle, verify)?;
        Block::new(raw).map_err(|m| self.corrupt(handle.offset, format!("data block: {m}")))
    }

    /// The table's properties (`file_size` is the size of the file as opened).
    pub fn properties(&self) -> &TableProperties {
        &self.props
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The id this table's blocks are cached under.
    pub fn cache_id(&self) -> u64 {
        self.cache_id
    }

    /// The decoded footer.
    pub fn footer(&self) -> &Footer {
        &self.footer
    }

    /// The metaindex: `(block name, handle)` pairs, sorted by name.
    pub fn meta_entries(&self) -> &[(Vec<u8>, BlockHandle)] {
        &self.meta
    }

    /// The bloom filter, if the table has one.
    pub fn filter(&self) -> Option<&BloomFilter> {
        self.filter.as_ref()
    }

    /// Every index entry: `(separator key, data block handle)`, in order.
    pub fn index_entries(&self) -> Result<Vec<(Vec<u8>, BlockHandle)>> {
        let mut it = self.index_iter();
        let mut out = Vec::new();
        it.seek_to_first();
        while it.valid() {
            out.push((it.key().to_vec(), self.index_handle(&it)?));
            it.next();
        }
        self.index_status(&it)?;
        Ok(out)
    }

    /// False only if the table certainly holds no entry for `user_key`.
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        self.filter.as_ref().is_none_or(|f| f.may_contain(user_key))
    }

    fn index_iter(&self) -> BlockIter {
        BlockIter::new(self.index.clone(), self.opts.icmp.clone())
    }

    fn index_handle<B: Deref<Target = Block>>(&self, it: &BlockIter<B>) -> Result<BlockHandle> {
        BlockHandle::decode_exact(it.value()).ok_or_else(|| {
            self.corrupt(
                self.footer.index.offset,
                "index block: malformed data block handle",
            )
        })
    }

    fn index_status<B: Deref<Target = Block>>(&self, it: &BlockIter<B>) -> Result<()> {
        match it.corruption() {
            Some(c) => Err(self.block_corrupt(self.footer.index, "index", c)),
            None => Ok(()),
        }
    }

    /// Point lookup: if the bloom filter says the user key of `ikey` may be present, position
    /// at the first entry >= ikey and call visit(internal_key, value) for it and each following
    /// entry (crossing blocks) until visit returns Ok(false) or the table ends. Errors from
    /// visit are returned as they are.
    // The visitor's type is spelled out because the DB layer is written against it.
    #[allow(clippy::type_complexity)]
    pub fn get(
        &self,
        flags: ReadFlags,
        ikey: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]) -> Result<bool>,
    ) -> Result<()> {
        self.get_filtered(flags, ikey, visit, FilterUse::First)
            .map(|_| ())
    }

    /// [`TableReader::get`], returning whether the bloom filter let the key through (true
    /// when the table has none, or `filter` skips it). See [`FilterUse`] for when the filter is
    /// checked.
    #[allow(clippy::type_complexity)] // the visitor's type, as `get` spells it
    pub fn get_filtered(
        &self,
        flags: ReadFlags,
        ikey: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]) -> Result<bool>,
        filter: FilterUse,
    ) -> Result<bool> {
        let table_filter = match filter {
            FilterUse::Skip => None,
            FilterUse::First | FilterUse::Last => self.filter.as_ref(),
        };
        // Hashed only for a filter that is checked.
        let hash = table_filter.map_or(0, |_| filter_hash(user_key(ikey)));
        let passes = |filter: &BloomFilter| filter.may_contain_hash(hash);
        let filter_last = filter == FilterUse::Last;
        if filter_last {
            if let Some(filter) = table_filter {
                filter.prefetch(hash);
            }
        } else if !table_filter.is_none_or(passes) {
            return Ok(false);
        }
        // The index cursor borrows the pinned index block, so a lookup does not write its
        // reference count, which every thread reading this table shares.
        let (index_key, mut data_key) = GET_KEY_BUFFERS.take();
        let mut index = BlockIter::with_key_buffer(&*self.index, self.opts.icmp.clone(), index_key);
        index.seek(ikey);
        let result = if filter_last && !table_filter.is_none_or(passes) {
            Ok(false)
        } else {
            self.get_from(flags, ikey, visit, &mut index, &mut data_key)
                .map(|()| true)
        };
        let keep = |b: Vec<u8>| {
            if b.capacity() > MAX_KEPT_KEY_BUFFER {
                Vec::new()
            } else {
                b
            }
        };
        GET_KEY_BUFFERS.set((keep(index.into_key_buffer()), keep(data_key)));
        result
    }

    /// [`TableReader::get`] after the filter check, with its index cursor and the key buffer
    /// for its data cursors (left in `data_key` for the next lookup).
    #[allow(clippy::type_complexity)] // the visitor's type, as `get` spells it
    fn get_from(
        &self,
        flags: ReadFlags,
        ikey: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]) -> Result<bool>,
        index: &mut BlockIter<&Block>,
        data_key: &mut Vec<u8>,
    ) -> Result<()> {
        let mut first = true;
        while index.valid() {
            let handle = self.index_handle(index)?;
            let block = self.lookup_block(handle, flags)?;
            let mut data = BlockIter::with_key_buffer(
                block.get(),
                self.opts.icmp.clone(),
                std::mem::take(data_key),
            );
            if first {
                data.seek(ikey);
                first = false;
            } else {
                data.seek_to_first();
            }
            while data.valid() {
                if !visit(data.key(), data.value())? {
                    *data_key = data.into_key_buffer();
                    return Ok(());
                }
                data.next();
            }
            let corruption = data.corruption();
            *data_key = data.into_key_buffer();
            if let Some(c) = corruption {
                return Err(self.block_corrupt(handle, "data", c));
            }
            index.next();
        }
        self.index_status(index)
    }

    /// A cursor over every entry of the table.
    pub fn iter(self: &Arc<Self>, flags: ReadFlags) -> TableIterator {
        TableIterator {
            index: self.index_iter(),
            table: self.clone(),
            flags,
            data: None,
            data_handle: BlockHandle::default(),
            released_to: None,
            streak: 0,
            error: None,
        }
    }

    /// File offset of the data block that would hold `ikey`; the end of the data region for
    /// keys past the last block. Used to estimate the bytes of a key range.
    pub fn approximate_offset_of(&self, ikey: &[u8]) -> u64 {
        let mut index = self.index_iter();
        index.seek(ikey);
        if index.valid() {
            if let Ok(h) = self.index_handle(&index) {
                return h.offset;
            }
        }
        self.props.data_size
    }

    /// Reads every data block from the file (bypassing the cache), checking checksums, that
    /// keys are well-formed internal keys in strictly increasing order, that each index key
    /// bounds its block, and that the entry count and key range match the properties. Returns
    /// the number of entries.
    pub fn verify(&self) -> Result<u64> {
        let icmp = &self.opts.icmp;
        let mut index = self.index_iter();
        let mut prev_key: Vec<u8> = Vec::new();
        let mut prev_separator: Option<Vec<u8>> = None;
        let mut count = 0u64;
        index.seek_to_first();
        while index.valid() {
            let handle = self.index_handle(&index)?;
            let mut data = BlockIter::new(self.read_block_uncached(handle, true)?, icmp.clone());
            data.seek_to_first();
            if !data.valid() && data.corruption().is_none() {
                return Err(self.corrupt(handle.offset, "empty data block"));
            }
            while data.valid() {
                let key = data.key();
                let bad = |m: &str| self.corrupt(handle.offset, format!("data block: {m}"));
                if parse_internal_key(key).is_none() {
                    return Err(bad("malformed internal key"));
                }
                if count == 0 && key != self.props.smallest_key.as_slice() {
                    return Err(bad("first key differs from the recorded smallest key"));
                }
                if count > 0 && icmp.compare(&prev_key, key) != Ordering::Less {
                    return Err(bad("keys out of order"));
                }
                if let Some(sep) = &prev_separator {
                    if icmp.compare(sep, key) != Ordering::Less {
                        return Err(bad("key not above the previous block's index key"));
                    }
                }
                if icmp.compare(key, index.key()) == Ordering::Greater {
                    return Err(bad("key above its block's index key"));
                }
                prev_key.clear();
                prev_key.extend_from_slice(key);
                count += 1;
                data.next();
            }
            if let Some(c) = data.corruption() {
                return Err(self.block_corrupt(handle, "data", c));
            }
            prev_separator = Some(index.key().to_vec());
            index.next();
        }
        self.index_status(&index)?;
        if count != self.props.num_entries {
            return Err(self.corrupt(
                self.footer.index.offset,
                format!(
                    "table holds {count} entries but its properties record {}",
                    self.props.num_entries
                ),
            ));
        }
        if prev_key != self.props.largest_key {
            return Err(self.corrupt(
                self.footer.index.offset,
                "last key differs from the recorded largest key",
            ));
        }
        Ok(count)
    }
}

/// A two-level cursor over a table: the index block picks the data block, the data block's
/// cursor picks the entry.
///
/// Errors are sticky: after a block fails to read or decode, the iterator is invalid for good
/// and every later positioning call leaves it so; `status()` reports the first error.
pub struct TableIterator {
    table: Arc<TableReader>,
    flags: ReadFlags,
    index: BlockIter,
    /// Cursor over the data block the index points at; `None` when unpositioned.
    data: Option<BlockIter>,
    data_handle: BlockHandle,
    /// With `flags.release_behind`: the file offset up to which bytes were released (or, before
    /// any, where the first block read starts: a scan that starts mid-file, one part of a split
    /// compaction, must not release the bytes another part is reading).
    released_to: Option<u64>,
    /// Data blocks entered by stepping off the end of the previous one since the last seek.
    streak: u32,
    error: Option<Error>,
}

impl TableIterator {
    fn set_error(&mut self, e: Error) {
        if self.error.is_none() {
            self.error = Some(e);
        }
        self.data = None;
    }

    /// Points `data` at the block the index is positioned on. False when there is none (end of
    /// the index, or an error, which is recorded).
    fn load_data_block(&mut self) -> bool {
        if self.error.is_some() {
            return false;
        }
        if !self.index.valid() {
            if let Err(e) = self.table.index_status(&self.index) {
                self.set_error(e);
            }
            self.data = None;
            return false;
        }
        let handle = match self.table.index_handle(&self.index) {
            Ok(h) => h,
            Err(e) => {
                self.set_error(e);
                return false;
            }
        };
        if self.data.is_some() && self.data_handle == handle {
            return true;
        }
        if self.flags.release_behind {
            match self.released_to {
                None => self.released_to = Some(handle.offset),
                Some(from) if handle.offset >= from + RELEASE_BEHIND_BYTES => {
                    self.table.file.release(from, handle.offset - from);
                    self.released_to = Some(handle.offset);
                }
                Some(_) => {}
            }
        }
        let read = if self.streak >= SCAN_BLOCKS_BEFORE_BYPASS {
            self.table
                .read_block_uncached(handle, self.flags.verify_checksums)
        } else {
            self.table.read_block(handle, self.flags)
        };
        match read {
            Ok(block) => {
                match self.data.as_mut() {
                    Some(data) => data.reset(block),
                    None => self.data = Some(BlockIter::new(block, self.table.opts.icmp.clone())),
                }
                self.data_handle = handle;
                true
            }
            Err(e) => {
                self.set_error(e);
                false
            }
        }
    }

    /// After the data cursor ran off its block: records its corruption, if any. True if the
    /// iterator may continue into the neighbouring block.
    fn data_block_done(&mut self) -> bool {
        if self.error.is_some() {
            return false;
        }
        let corruption = self.data.as_ref().and_then(|d| d.corruption());
        if let Some(c) = corruption {
            let e = self.table.block_corrupt(self.data_handle, "data", c);
            self.set_error(e);
            return false;
        }
        true
    }

    fn data_valid(&self) -> bool {
        self.data.as_ref().is_some_and(|d| d.valid())
    }

    fn skip_empty_blocks_forward(&mut self) {
        while !self.data_valid() {
            if !self.data_block_done() || !self.index.valid() {
                self.data = None;
                return;
            }
            self.index.next();
            self.streak = self.streak.saturating_add(1);
            if !self.load_data_block() {
                return;
            }
            if let Some(d) = &mut self.data {
                d.seek_to_first();
            }
        }
    }

    fn skip_empty_blocks_backward(&mut self) {
        while !self.data_valid() {
            if !self.data_block_done() || !self.index.valid() {
                self.data = None;
                return;
            }
            self.index.prev();
            self.streak = self.streak.saturating_add(1);
            if !self.load_data_block() {
                return;
            }
            if let Some(d) = &mut self.data {
                d.seek_to_last();
            }
        }
    }
}

impl InternalIterator for TableIterator {
    fn valid(&self) -> bool {
        self.error.is_none() && self.data_valid()
    }

    fn seek_to_first(&mut self) {
        if self.error.is_some() {
            return;
        }
        self.streak = 0;
        self.index.seek_to_first();
        if self.load_data_block() {
            if let Some(d) = &mut self.data {
                d.seek_to_first();
            }
        }
        self.skip_empty_blocks_forward();
    }

    fn seek_to_last(&mut self) {
        if self.error.is_some() {
            return;
        }
        self.streak = 0;
        self.index.seek_to_last();
        if self.load_data_block() {
            if let Some(d) = &mut self.data {
                d.seek_to_last();
            }
        }
        self.skip_empty_blocks_backward();
    }

    fn seek(&mut self, target: &[u8]) {
        if self.error.is_some() {
            return;
        }
        self.streak = 0;
        self.index.seek(target);
        if self.load_data_block() {
            if let Some(d) = &mut self.data {
                d.seek(target);
            }
        }
        self.skip_empty_blocks_forward();
    }

    fn seek_for_prev(&mut self, target: &[u8]) {
        self.seek(target);
        if self.error.is_some() {
            return;
        }
        if self.valid() {
            // The first entry >= target; if it is past target, the one before is the answer.
            if self.table.opts.icmp.compare(self.key(), target) == Ordering::Greater {
                self.prev();
            }
        } else {
            self.seek_to_last();
        }
    }

    fn next(&mut self) {
        if !self.valid() {
            return;
        }
        if let Some(d) = &mut self.data {
            d.next();
        }
        self.skip_empty_blocks_forward();
    }

    fn prev(&mut self) {
        if !self.valid() {
            return;
        }
        if let Some(d) = &mut self.data {
            d.prev();
        }
        self.skip_empty_blocks_backward();
    }

    fn key(&self) -> &[u8] {
        self.data.as_ref().map_or(&[], |d| d.key())
    }

    fn value(&self) -> &[u8] {
        self.data.as_ref().map_or(&[], |d| d.value())
    }

    fn status(&self) -> Result<()> {
        match &self.error {
            Some(e) => Err(e.duplicate()),
            None => Ok(()),
        }
    }

    fn source(&self) -> Option<(&Path, u64)> {
        Some((self.table.path(), self.data_handle.offset))
    }
}
