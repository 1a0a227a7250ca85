//! Large short-lived buffers kept out of the allocator: anonymous maps that the kernel zeroes
//! and faults in when they are made, and takes back whole when they are dropped.
//!
//! Why not the heap: glibc's malloc serves a request of 128 KiB or more with a map of its own,
//! and when it frees such a block it raises that threshold to the block's size (up to 32 MiB)
//! and the arenas' trim threshold to twice it. From then on blocks of that size come from the
//! arenas, which keep freed pages resident and fragment between the flush's and compaction's
//! threads. The engine's largest transient buffers (a table builder's filter hashes, the filter
//! bits, a memtable's key filter) are freed after every table and memtable, so they did exactly
//! that: a shale-only run of the merge benchmark (`fillrandom,updaterandom,mergerandom
//! --value_size=8`, 4 MiB cache) peaked at 24.4-24.8 MiB of anonymous memory with the default
//! and at 20.7-22.0 MiB with the threshold pinned (`MALLOC_MMAP_THRESHOLD_=131072`). Mapping
//! these buffers directly keeps the threshold where it was, and what they used goes back to
//! the kernel at once.
//!
//! A buffer written at random is populated when made ([`ZeroedBytes::new`], [`ZeroedWords`]): one
//! system call faults in every page, where faulting a memtable's key filter in page by page as
//! inserts touched it cost the writer 6,600 faults in a 1M-key `fillseq,fillbatch` (0.257 ->
//! 0.287 us a write). A buffer filled front to back is faulted in as it fills
//! ([`ZeroedBytes::new_lazy`]): a fault per 4 KiB page of appends costs little, and room it never
//! reaches is never resident. Small buffers, and any whose map fails (no address space left, or
//! Miri), use the heap.

use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;
use std::sync::atomic::AtomicU64;

/// Buffers smaller than this come from the heap: below glibc's default map threshold (128
/// KiB), and small enough that a system call per buffer would cost more than it saves.
const MAP_MIN_BYTES: usize = 64 * 1024;

/// Maps `len` zeroed bytes, populated up front if `populate`, or `None` if the map fails or
/// `len` is below [`MAP_MIN_BYTES`].
fn map_zeroed(len: usize, populate: bool) -> Option<memmap2::MmapMut> {
    if len < MAP_MIN_BYTES || cfg!(miri) {
        return None;
    }
    let mut options = memmap2::MmapOptions::new();
    options.len(len);
    if populate {
        options.populate();
    }
    let map = options.map_anon().ok()?;
    debug_assert_eq!(map.len(), len);
    Some(map)
}

/// A fixed-length byte buffer, zeroed at creation.
pub(crate) enum ZeroedBytes {
    /// An anonymous map of its own.
    Mapped(memmap2::MmapMut),
    /// A heap block (small, or the map failed).
    Heap(Vec<u8>),
}

impl ZeroedBytes {
    /// `len` zero bytes, every page resident from the start: for a buffer written at random.
    pub(crate) fn new(len: usize) -> ZeroedBytes {
        ZeroedBytes::with_map(map_zeroed(len, true), len)
    }

    /// `len` zero bytes whose pages become resident as they are first touched: for a buffer
    /// filled front to back, which may never fill.
    pub(crate) fn new_lazy(len: usize) -> ZeroedBytes {
        ZeroedBytes::with_map(map_zeroed(len, false), len)
    }

    fn with_map(map: Option<memmap2::MmapMut>, len: usize) -> ZeroedBytes {
        match map {
            Some(map) => ZeroedBytes::Mapped(map),
            None => ZeroedBytes::Heap(vec![0; len]),
        }
    }
}

impl Deref for ZeroedBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            ZeroedBytes::Mapped(map) => map,
            ZeroedBytes::Heap(v) => v,
        }
    }
}

impl DerefMut for ZeroedBytes {
    fn deref_mut(&mut self) -> &mut [u8] {
        match self {
            ZeroedBytes::Mapped(map) => map,
            ZeroedBytes::Heap(v) => v,
        }
    }
}

/// A fixed-length array of atomic words, zeroed at creation, shared by reference.
pub(crate) struct ZeroedWords {
    storage: WordStorage,
}

enum WordStorage {
    /// The map, and its start as words. The pointer is taken once, from the unique `&mut [u8]`
    /// of the whole map, so it may write anywhere in it; nothing borrows the map again before
    /// it is unmapped, so shared access through the atomics never meets a `&[u8]` of the same
    /// bytes.
    Mapped {
        _map: memmap2::MmapMut,
        ptr: NonNull<AtomicU64>,
        len: usize,
    },
    Heap(Box<[AtomicU64]>),
}

// SAFETY: the pointer is the start of a map that the value owns and that lives exactly as long
// as it; every access goes through `AtomicU64`, which is `Send + Sync`.
unsafe impl Send for WordStorage {}
// SAFETY: as for `Send`: shared access is only ever atomic.
unsafe impl Sync for WordStorage {}

impl ZeroedWords {
    /// `len` words, each 0.
    pub(crate) fn new(len: usize) -> ZeroedWords {
        // A size past the address space cannot be mapped; the heap reports it as `Vec` does.
        let map = len
            .checked_mul(std::mem::size_of::<AtomicU64>())
            .and_then(|bytes| map_zeroed(bytes, true));
        if let Some(mut map) = map {
            // A map is page-aligned, so aligned for `AtomicU64`, and never at null.
            if let Some(ptr) = NonNull::new(map.as_mut_ptr().cast::<AtomicU64>()) {
                return ZeroedWords {
                    storage: WordStorage::Mapped {
                        _map: map,
                        ptr,
                        len,
                    },
                };
            }
        }
        ZeroedWords {
            storage: WordStorage::Heap((0..len).map(|_| AtomicU64::new(0)).collect()),
        }
    }
}

impl Deref for ZeroedWords {
    type Target = [AtomicU64];

    #[inline]
    fn deref(&self) -> &[AtomicU64] {
        match &self.storage {
            // SAFETY: `ptr` starts `len` words of zero-initialised (hence valid) `AtomicU64`s in
            // a map that `self` owns, aligned and alive for as long as the borrow of `self`.
            WordStorage::Mapped { ptr, len, .. } => unsafe {
                std::slice::from_raw_parts(ptr.as_ptr(), *len)
            },
            WordStorage::Heap(words) => words,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn bytes_are_zeroed_and_writable_at_every_size() {
        for len in [
            0,
            1,
            MAP_MIN_BYTES - 1,
            MAP_MIN_BYTES,
            3 * MAP_MIN_BYTES + 5,
        ] {
            let mut b = ZeroedBytes::new(len);
            assert_eq!(b.len(), len);
            assert!(b.iter().all(|&x| x == 0), "len {len}");
            if let Some(last) = b.last_mut() {
                *last = 7;
            }
            assert_eq!(
                b.iter().map(|&x| usize::from(x)).sum::<usize>(),
                7 * usize::from(len > 0)
            );
        }
        assert!(matches!(ZeroedBytes::new(MAP_MIN_BYTES), ZeroedBytes::Mapped(_)) || cfg!(miri));
        assert!(matches!(
            ZeroedBytes::new(MAP_MIN_BYTES - 1),
            ZeroedBytes::Heap(_)
        ));
    }

    #[test]
    fn words_are_zeroed_and_shared_between_threads() {
        for len in [1, MAP_MIN_BYTES / 8 - 1, MAP_MIN_BYTES / 8, 100_000] {
            let w = ZeroedWords::new(len);
            assert_eq!(w.len(), len);
            assert!(w.iter().all(|x| x.load(Ordering::Relaxed) == 0));
            std::thread::scope(|s| {
                for t in 0..2u64 {
                    let w = &w;
                    s.spawn(move || {
                        for x in w.iter().skip(t as usize).step_by(2) {
                            x.fetch_or(1 << t, Ordering::Relaxed);
                        }
                    });
                }
            });
            for (i, x) in w.iter().enumerate() {
                assert_eq!(
                    x.load(Ordering::Relaxed),
                    1 << (i % 2),
                    "len {len} word {i}"
                );
            }
        }
    }
}
