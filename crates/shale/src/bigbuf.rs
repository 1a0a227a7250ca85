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
//! Maps are populated when made: one system call faults in every page, where a buffer faulted in
//! page by page as it is touched cost the writer a fault per page of a memtable's key filter
//! (6,600 faults in a 1M-key `fillseq,fillbatch`, 0.257 -> 0.287 us a write). Small buffers, and
//! any whose map fails (no address space left, or Miri), use the heap.

use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;
use std::sync::atomic::AtomicU64;

/// Buffers smaller than this come from the heap: below glibc's default map threshold (128
/// KiB), and small enough that a system call per buffer would cost more than it saves.
const MAP_MIN_BYTES: usize = 64 * 1024;

/// Maps `len` zeroed bytes, populated, or `None` if the map fails or `len` is below
/// [`MAP_MIN_BYTES`].
fn map_zeroed(len: usize) -> Option<memmap2::MmapMut> {
    if len < MAP_MIN_BYTES || cfg!(miri) {
        return None;
    }
    memmap2::MmapOptions::new()
        .len(len)
        .populate()
        .map_anon()
        .ok()
}

/// A fixed-length byte buffer, zeroed at creation.
pub(crate) enum ZeroedBytes {
    /// An anonymous map of its own.
    Mapped(memmap2::MmapMut),
    /// A heap block (small, or the map failed).
    Heap(Vec<u8>),
}

impl ZeroedBytes {
    /// `len` zero bytes.
    pub(crate) fn new(len: usize) -> ZeroedBytes {
        match map_zeroed(len) {
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
    /// The map, and its start as words (taken once from the map's mutable pointer, so shared
    /// access through atomics never goes through a `&[u8]` of the same bytes).
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
        let bytes = len.saturating_mul(std::mem::size_of::<AtomicU64>());
        if let Some(mut map) = map_zeroed(bytes) {
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

    /// The words.
    #[inline]
    pub(crate) fn words(&self) -> &[AtomicU64] {
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
            assert_eq!(w.words().len(), len);
            assert!(w.words().iter().all(|x| x.load(Ordering::Relaxed) == 0));
            std::thread::scope(|s| {
                for t in 0..2u64 {
                    let w = &w;
                    s.spawn(move || {
                        for x in w.words().iter().skip(t as usize).step_by(2) {
                            x.fetch_or(1 << t, Ordering::Relaxed);
                        }
                    });
                }
            });
            for (i, x) in w.words().iter().enumerate() {
                assert_eq!(
                    x.load(Ordering::Relaxed),
                    1 << (i % 2),
                    "len {len} word {i}"
                );
            }
        }
    }
}
