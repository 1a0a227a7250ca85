//! The memtable's ordered index: a skiplist of internal keys whose nodes live in an [`Arena`].
//!
//! Each node is one allocation in the node arena, 8-byte aligned, laid out as
//!
//! ```text
//! +-------------+------------+---------------+-------------+----------------------------+--------------+
//! | key_len u32 | height u32 | value_len usz | value *u8   | next: height x AtomicPtr   | internal key |
//! +-------------+------------+---------------+-------------+----------------------------+--------------+
//! ```
//!
//! and its value is one allocation in a second, value arena. A search then touches the header,
//! the tower and the key in one or two cache lines, and the nodes it walks lie close together:
//! with values inline, a memtable of 100-byte values spread its nodes over about two and a half
//! times the memory, and a random insert paid a cache and TLB miss for most nodes it compared
//! (`cargo bench -p shale --bench micro -- memtable_insert`: 100,000 random inserts run about
//! 20% faster with values apart). An insert costs two pointer bumps instead of a heap
//! allocation.
//!
//! Invariants:
//! - A node is fully written (header, every tower slot, key, and its value) before it is
//!   published, that is before a pointer to it is stored, with `Release` ordering, into any
//!   tower slot reachable from the head. Readers load tower slots with `Acquire`, so every node
//!   they reach is initialised. Apart from the tower slots, a published node is never written
//!   again.
//! - At every level, the nodes linked from the head are in ascending [`InternalKeyComparator`]
//!   order. A node of height `h` is linked at levels `0..h` only, so a node reached through a
//!   level-`l` link has a tower slot for every level `<= l`.
//! - Nodes are never unlinked or freed before the whole list is dropped, so a pointer to a node
//!   stays valid for as long as the list lives.
//!
//! Thread-safety: inserts serialise on an internal mutex (callers are expected to insert from one
//! thread at a time anyway, so it is uncontended); lookups and iterators take no lock and may run
//! on any number of threads during an insert.

use std::cmp::Ordering;
use std::marker::PhantomData;
use std::mem::{align_of, size_of};
use std::ptr::{self, NonNull};
use std::sync::atomic::{self, AtomicPtr, AtomicUsize};
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};

use super::arena::{Arena, ChunkPool};
use super::EntryVisitor;
use crate::error::Result;
use crate::key::{InternalKeyComparator, TRAILER_LEN};

/// Tallest tower. With a branching factor of 4, twelve levels keep searches logarithmic up to
/// about 4^12 = 16 million entries, far more than a memtable holds.
pub(crate) const MAX_HEIGHT: usize = 12;

/// The fixed-size start of every node; the tower and key follow it in the same allocation, the
/// value lies in the list's value arena (see the module header).
#[repr(C)]
struct Node {
    /// Length of the internal key.
    key_len: u32,
    /// Number of tower slots, `1..=MAX_HEIGHT`.
    height: u32,
    /// Length of the value.
    value_len: usize,
    /// First byte of the value (dangling when it is empty).
    value: *const u8,
}

/// Offset of the tower from the start of a node.
const TOWER_OFFSET: usize = size_of::<Node>();

// The tower follows the header without padding only if the header keeps the slots aligned.
const _: () = assert!(TOWER_OFFSET % align_of::<AtomicPtr<Node>>() == 0);
const _: () = assert!(align_of::<Node>() >= align_of::<AtomicPtr<Node>>());

/// Pointer to the first tower slot of the node at `node`. Computing it is safe; using it is not.
fn tower_ptr(node: NonNull<Node>) -> *mut AtomicPtr<Node> {
    node.as_ptr()
        .cast::<u8>()
        .wrapping_add(TOWER_OFFSET)
        .cast::<AtomicPtr<Node>>()
}

/// Pointer to the first key byte of a node of `height` at `node`.
fn key_ptr(node: NonNull<Node>, height: usize) -> *mut u8 {
    tower_ptr(node).wrapping_add(height).cast::<u8>()
}

/// A published node (or the head) of a list that outlives `'a`.
#[derive(Clone, Copy)]
struct NodeRef<'a> {
    ptr: NonNull<Node>,
    _list: PhantomData<&'a SkipList>,
}

impl<'a> NodeRef<'a> {
    /// # Safety
    /// `ptr` must be the head of a list that lives for `'a`, or a node of that list loaded with
    /// `Acquire` from a tower slot (so that it is published and fully initialised).
    unsafe fn new(ptr: NonNull<Node>) -> NodeRef<'a> {
        NodeRef {
            ptr,
            _list: PhantomData,
        }
    }

    fn header(self) -> &'a Node {
        // SAFETY: by the contract of `NodeRef::new` the node is initialised, never written again
        // outside its tower, and lives as long as the list, which outlives 'a.
        unsafe { self.ptr.as_ref() }
    }

    fn height(self) -> usize {
        self.header().height as usize
    }

    fn tower(self) -> &'a [AtomicPtr<Node>] {
        // SAFETY: the node's `height` tower slots follow its header and were initialised before
        // it was published (module invariant); atomics may be shared across threads.
        unsafe { std::slice::from_raw_parts(tower_ptr(self.ptr), self.height()) }
    }

    fn key(self) -> &'a [u8] {
        let len = self.header().key_len as usize;
        // SAFETY: the key's bytes follow the tower, were written before publication and are
        // never written again.
        unsafe { std::slice::from_raw_parts(key_ptr(self.ptr, self.height()), len) }
    }

    fn value(self) -> &'a [u8] {
        let header = self.header();
        // SAFETY: `value` points at `value_len` bytes of the list's value arena (or dangles with
        // length 0), written before the node was published and never written again; the arena
        // lives as long as the list.
        unsafe { std::slice::from_raw_parts(header.value, header.value_len) }
    }

    /// The next node at `level`. Panics if the node has no slot at `level`, which the search
    /// loops never ask for (a node reached through level `l` has slots up to `l`).
    fn next(self, level: usize) -> Option<NodeRef<'a>> {
        let next = self.tower()[level].load(atomic::Ordering::Acquire);
        // SAFETY: a tower slot holds null or a published node of the same list, and it was
        // loaded with `Acquire`, pairing with the `Release` store that published it.
        NonNull::new(next).map(|ptr| unsafe { NodeRef::new(ptr) })
    }

    /// Starts loading the node after this one at `level` into the cache, without waiting.
    ///
    /// A search compares against `next(level)` and then either moves right to it, needing
    /// the node after it, or steps down, needing `next(level - 1)`. Both pointers are at hand
    /// in towers already loaded, so prefetching both overlaps the next cache miss with this
    /// comparison instead of paying them one after the other.
    #[inline]
    fn prefetch_next(self, level: usize) {
        let next = self.tower()[level].load(atomic::Ordering::Relaxed);
        if !next.is_null() {
            crate::prefetch::line(next.cast_const());
        }
    }

    fn is(self, other: NodeRef<'_>) -> bool {
        self.ptr == other.ptr
    }
}

/// State only the inserting thread touches.
struct Writer {
    /// Nodes: header, tower and key.
    arena: Arena,
    /// Values, apart from the nodes so that the nodes a search walks lie close together.
    values: Arena,
    /// splitmix64 state for tower heights; deterministic, so runs are reproducible.
    rng: u64,
    /// The predecessors of the last inserted key at every level (the last inserted node itself
    /// at the levels it spans; the head where nothing precedes it). Every slot is the head or a
    /// published node with a tower slot at that level. The next insert starts from here, which
    /// makes ordered inserts cheap (RocksDB calls this a splice).
    splice: [NonNull<Node>; MAX_HEIGHT],
}

impl Writer {
    /// A height with P(height > k) = 4^-k, capped at [`MAX_HEIGHT`].
    fn random_height(&mut self) -> usize {
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        // Each pair of low zero bits has probability 1/4: that is one more level.
        1 + ((z.trailing_zeros() / 2) as usize).min(MAX_HEIGHT - 1)
    }
}

/// The writer lock of a [`SkipList`], held for a run of inserts ([`SkipList::inserter`]).
pub(crate) struct Inserter<'a> {
    list: &'a SkipList,
    writer: MutexGuard<'a, Writer>,
}

impl Inserter<'_> {
    /// Inserts the internal key `user_key + trailer` (trailer as fixed64 LE) with `value`.
    ///
    /// Keys are expected to be unique; an equal key is kept too, ordered before the existing
    /// ones, so lookups see the newest insert first.
    ///
    /// Panics if the internal key is 4 GiB or longer (callers enforce far smaller limits).
    pub(crate) fn insert(&mut self, user_key: &[u8], trailer: u64, value: &[u8]) {
        let list = self.list;
        let writer = &mut *self.writer;
        let key_len = user_key.len() + TRAILER_LEN;
        assert!(
            u32::try_from(key_len).is_ok(),
            "memtable key of {key_len} bytes is over 4 GiB"
        );
        let height = writer.random_height();
        let size = TOWER_OFFSET
            .checked_add(height * size_of::<AtomicPtr<Node>>())
            .and_then(|n| n.checked_add(key_len));
        let Some(size) = size else {
            panic!("memtable entry size overflows usize");
        };
        let value_ptr = if value.is_empty() {
            NonNull::dangling()
        } else {
            let to = writer.values.allocate(value.len(), 1);
            // SAFETY: the value arena returned `value.len()` fresh writable bytes that nothing
            // else refers to; the node that will point at them is published below.
            unsafe { ptr::copy_nonoverlapping(value.as_ptr(), to.as_ptr(), value.len()) };
            to
        };
        let node = writer
            .arena
            .allocate(size, align_of::<Node>())
            .cast::<Node>();
        let key_start = key_ptr(node, height);
        // SAFETY: the arena returned `size` fresh writable bytes aligned for `Node`, enough for
        // the header, `height` tower slots and the key at the offsets the layout gives; no one
        // else can see them until the node is published below. The tower slots are filled
        // further down, before publication.
        let key = unsafe {
            node.as_ptr().write(Node {
                key_len: key_len as u32,
                height: height as u32,
                value_len: value.len(),
                value: value_ptr.as_ptr().cast_const(),
            });
            ptr::copy_nonoverlapping(user_key.as_ptr(), key_start, user_key.len());
            let trailer = trailer.to_le_bytes();
            ptr::copy_nonoverlapping(trailer.as_ptr(), key_start.add(user_key.len()), TRAILER_LEN);
            std::slice::from_raw_parts(key_start.cast_const(), key_len)
        };

        // Where the node goes at each level. Levels above the current height start at the head.
        let mut prev = [list.head(); MAX_HEIGHT];
        let list_height = list.max_height();
        // An append past the largest key (a sequential load) goes after the splice at every
        // level: when the splice's level-0 node has no successor, it is the last node, and every
        // level's splice node is the last of its level (nothing is larger than that node, and
        // nothing between a level's splice node and it reaches that level). One comparison
        // then places the node, where walking the splice compares at each level.
        // SAFETY: a splice slot is the head or a published node of this list (`Writer::splice`).
        let last = unsafe { NodeRef::new(writer.splice[0]) };
        let append = !last.is(list.head())
            && last.next(0).is_none()
            && list.cmp.compare(last.key(), key) == Ordering::Less;
        if append {
            for (p, &slot) in prev.iter_mut().zip(&writer.splice).take(list_height) {
                // SAFETY: as above, with a tower slot at every level below `list_height`
                // that it holds a node for.
                *p = unsafe { NodeRef::new(slot) };
            }
        } else {
            list.find_insert_position(&writer.splice, key, list_height, &mut prev);
        }

        if height > list_height {
            // Readers that see the new height before the node is linked find empty head slots
            // there and step down, which is harmless.
            list.max_height.store(height, atomic::Ordering::Relaxed);
        }

        for (level, before) in prev.iter().enumerate().take(height) {
            // Only this thread (holding the writer lock) changes tower slots, so the successor
            // read here stays the successor until the node is linked.
            let successor = before.tower()[level].load(atomic::Ordering::Relaxed);
            // SAFETY: slot `level < height` lies inside the node's allocation; it is written once
            // here, before publication, with no reference to it in existence.
            unsafe { tower_ptr(node).add(level).write(AtomicPtr::new(successor)) };
        }
        // The node is now fully initialised; publish it bottom-up. `Release` makes every write
        // above visible to a reader that loads the pointer with `Acquire`.
        for (level, before) in prev.iter().enumerate().take(height) {
            before.tower()[level].store(node.as_ptr(), atomic::Ordering::Release);
        }
        // The node is the predecessor of the next larger key at its own levels; above them the
        // predecessors found here still are.
        for (level, slot) in writer.splice.iter_mut().enumerate() {
            *slot = if level < height {
                node
            } else {
                prev[level].ptr
            };
        }
        // Only the writer (holding the writer lock) changes the count: a plain store avoids a
        // locked add, which would wait for the node's stores to drain.
        list.len.store(
            list.len.load(atomic::Ordering::Relaxed) + 1,
            atomic::Ordering::Relaxed,
        );
        list.memory_bytes.store(
            writer.arena.used_bytes() + writer.values.used_bytes(),
            atomic::Ordering::Relaxed,
        );
    }
}

/// A concurrent skiplist of (internal key, value) entries; see the module header.
pub(crate) struct SkipList {
    cmp: InternalKeyComparator,
    /// A node of height [`MAX_HEIGHT`] with an empty key, allocated in the arena.
    head: NonNull<Node>,
    /// Height of the tallest node so far. Readers may see a stale value: a level above it is
    /// either empty or not yet used, and searches just step down.
    max_height: AtomicUsize,
    len: AtomicUsize,
    /// Arena bytes in use, mirrored here so readers need not take the writer lock.
    memory_bytes: AtomicUsize,
    writer: Mutex<Writer>,
}

// SAFETY: the raw `head` pointer and the node pointers reachable from it point into the node
// arena, and the nodes' value pointers into the value arena, both owned by the list. Shared state
// is either atomic (tower slots, counters), written once before publication and then only read
// (node headers, keys, values), or behind the writer mutex (the arenas themselves). Nothing is
// tied to the creating thread, so the list may move between threads (`Send`) and be used from
// several at once (`Sync`).
unsafe impl Send for SkipList {}
// SAFETY: see the `Send` impl above.
unsafe impl Sync for SkipList {}

impl SkipList {
    /// An empty list ordered by `cmp`.
    pub(crate) fn new(cmp: InternalKeyComparator) -> SkipList {
        SkipList::with_pool(cmp, None)
    }

    /// An empty list ordered by `cmp` whose arena takes and leaves chunks in `pool`.
    pub(crate) fn with_pool(cmp: InternalKeyComparator, pool: Option<Arc<ChunkPool>>) -> SkipList {
        let mut arena = Arena::with_pool(pool.clone());
        let values = Arena::with_pool(pool);
        let size = TOWER_OFFSET + MAX_HEIGHT * size_of::<AtomicPtr<Node>>();
        let head = arena.allocate(size, align_of::<Node>()).cast::<Node>();
        // SAFETY: the arena just returned `size` writable bytes aligned for `Node`: room for the
        // header and MAX_HEIGHT tower slots. Nothing else refers to them yet.
        unsafe {
            head.as_ptr().write(Node {
                key_len: 0,
                height: MAX_HEIGHT as u32,
                value_len: 0,
                value: NonNull::dangling().as_ptr(),
            });
            for level in 0..MAX_HEIGHT {
                tower_ptr(head)
                    .add(level)
                    .write(AtomicPtr::new(ptr::null_mut()));
            }
        }
        let memory_bytes = AtomicUsize::new(arena.used_bytes());
        SkipList {
            cmp,
            head,
            max_height: AtomicUsize::new(1),
            len: AtomicUsize::new(0),
            memory_bytes,
            writer: Mutex::new(Writer {
                arena,
                values,
                rng: 0x5eed_5eed_5eed_5eed,
                splice: [head; MAX_HEIGHT],
            }),
        }
    }

    /// The comparator the list is ordered by.
    pub(crate) fn comparator(&self) -> &InternalKeyComparator {
        &self.cmp
    }

    /// Entries inserted so far.
    pub(crate) fn len(&self) -> usize {
        self.len.load(atomic::Ordering::Relaxed)
    }

    /// Arena bytes taken by the head and the entries (see [`Arena::used_bytes`]).
    pub(crate) fn memory_usage(&self) -> usize {
        self.memory_bytes.load(atomic::Ordering::Relaxed)
    }

    fn head(&self) -> NodeRef<'_> {
        // SAFETY: the head was initialised in `new` and lives as long as `self`.
        unsafe { NodeRef::new(self.head) }
    }

    fn max_height(&self) -> usize {
        self.max_height.load(atomic::Ordering::Relaxed)
    }

    /// One insert under its own writer lock ([`Inserter::insert`]).
    #[cfg(test)]
    pub(crate) fn insert(&self, user_key: &[u8], trailer: u64, value: &[u8]) {
        self.inserter().insert(user_key, trailer, value);
    }

    /// Takes the writer lock for a run of inserts, so that a batch pays for the lock once
    /// rather than per entry.
    pub(crate) fn inserter(&self) -> Inserter<'_> {
        Inserter {
            list: self,
            writer: self.writer.lock(),
        }
    }

    /// Fills `prev` below `list_height` with the predecessors of `key` at each level: first
    /// from the splice the previous insert left, from the top down while each level's
    /// remembered predecessor still brackets the key (ordered inserts, such as a sorted batch,
    /// find every level valid and compare against only a few nodes), then by an ordinary
    /// descent from the lowest level the splice still held at.
    fn find_insert_position<'a>(
        &'a self,
        splice: &[NonNull<Node>; MAX_HEIGHT],
        key: &[u8],
        list_height: usize,
        prev: &mut [NodeRef<'a>; MAX_HEIGHT],
    ) {
        let mut x = self.head();
        let mut level = list_height - 1;
        let mut splice_holds_to_bottom = false;
        let mut known_smaller: Option<NodeRef<'_>> = None;
        let mut known_bigger: Option<NodeRef<'_>> = None;
        loop {
            // SAFETY: a splice slot is the head or a published node of this list with a tower
            // slot at `level` (see `Writer::splice`).
            let candidate = unsafe { NodeRef::new(splice[level]) };
            let before = candidate.is(self.head())
                || known_smaller.is_some_and(|k| k.is(candidate))
                || self.cmp.compare(candidate.key(), key) == Ordering::Less;
            if !before {
                break;
            }
            known_smaller = Some(candidate);
            let next = candidate.next(level);
            let brackets = match (next, known_bigger) {
                (None, _) => true,
                (Some(n), Some(b)) if n.is(b) => true,
                (Some(n), _) => self.cmp.compare(n.key(), key) != Ordering::Less,
            };
            if !brackets {
                break;
            }
            known_bigger = next;
            prev[level] = candidate;
            x = candidate;
            if level == 0 {
                splice_holds_to_bottom = true;
                break;
            }
            level -= 1;
        }
        if !splice_holds_to_bottom {
            loop {
                let next = x.next(level);
                if let Some(next) = next {
                    next.prefetch_next(level);
                }
                if level > 0 {
                    x.prefetch_next(level - 1);
                }
                // A node found not smaller one level up is often the next one down too: no
                // need to compare it again.
                let smaller = next.is_some_and(|n| {
                    !known_bigger.is_some_and(|b| b.is(n))
                        && self.cmp.compare(n.key(), key) == Ordering::Less
                });
                match next {
                    Some(next) if smaller => x = next,
                    _ => {
                        known_bigger = next;
                        prev[level] = x;
                        if level == 0 {
                            break;
                        }
                        level -= 1;
                    }
                }
            }
        }
    }

    /// The first node with key `>= target`.
    fn find_greater_or_equal(&self, target: &[u8]) -> Option<NodeRef<'_>> {
        let mut x = self.head();
        let mut level = self.max_height() - 1;
        // The node last found to be `>= target`, so that stepping down a level does not compare
        // it again.
        let mut known_bigger: Option<NodeRef<'_>> = None;
        loop {
            let next = x.next(level);
            let before_target = match (next, known_bigger) {
                (Some(n), Some(b)) if n.is(b) => false,
                (Some(n), _) => self.cmp.compare(n.key(), target) == Ordering::Less,
                (None, _) => false,
            };
            if let (true, Some(n)) = (before_target, next) {
                x = n;
            } else {
                if level == 0 {
                    return next;
                }
                known_bigger = next;
                level -= 1;
            }
        }
    }

    /// The last node with key `< target` (or `<= target` when `inclusive`) that a search from
    /// the top finds by the time it reaches level `stop`, or the head if it finds none. With
    /// `stop` 0 that is the last such node of the list; higher up, a node from which a walk on
    /// level 0 reaches it (a backward step walks from there, collecting the nodes between).
    fn find_last_before(&self, target: &[u8], inclusive: bool, stop: usize) -> NodeRef<'_> {
        let mut x = self.head();
        let mut level = self.max_height() - 1;
        loop {
            let advance = x
                .next(level)
                .filter(|n| match self.cmp.compare(n.key(), target) {
                    Ordering::Less => true,
                    Ordering::Equal => inclusive,
                    Ordering::Greater => false,
                });
            match advance {
                Some(n) => x = n,
                None if level <= stop => return x,
                None => level -= 1,
            }
        }
    }

    /// The last node; `None` if the list is empty.
    fn find_last(&self) -> Option<NodeRef<'_>> {
        let mut x = self.head();
        let mut level = self.max_height() - 1;
        loop {
            match x.next(level) {
                Some(n) => x = n,
                None if level == 0 => return (!x.is(self.head())).then_some(x),
                None => level -= 1,
            }
        }
    }

    /// Calls `visit(key, value)` for the first entry `>= target` and each one after it until
    /// `visit` returns `Ok(false)` or the list ends. Errors from `visit` are returned unchanged.
    pub(crate) fn visit_from(&self, target: &[u8], visit: &mut EntryVisitor<'_>) -> Result<()> {
        let mut node = self.find_greater_or_equal(target);
        while let Some(n) = node {
            if !visit(n.key(), n.value())? {
                break;
            }
            node = n.next(0);
        }
        Ok(())
    }
}

/// The level whose nodes a backward step searches for; it then walks level 0 from there. With
/// a branching factor of 4 that walk collects about 4^2 = 16 nodes, so one search from the top
/// serves that many `prev` calls.
const BACKWARD_SEARCH_LEVEL: usize = 2;

/// A cursor over a list it keeps alive. Invalid when `node` is `None`.
pub(crate) struct SkipListIter {
    list: Arc<SkipList>,
    /// A published node of `list` (never its head).
    node: Option<NonNull<Node>>,
    /// Published nodes of `list` just before `node`, in ascending order, so that `prev` pops
    /// the last; empty unless the cursor last moved backward.
    ///
    /// Why: the list has no backward links, so finding a predecessor costs a search from the
    /// top, O(log n) with a cache miss per level. One search to a node of level 2 and a walk
    /// forward on level 0 finds the next 16 or so predecessors at once: a backward merge of
    /// sixteen memtables went from 242 to 87 ns a step (`cargo bench -p shale --bench micro --
    /// merging_scan`).
    behind: Vec<NonNull<Node>>,
}

// SAFETY: the iterator owns an `Arc` of a `Send + Sync` list and pointers to its published
// nodes, which are immutable apart from atomics and live as long as the list.
// Reading it from another thread is as safe as reading it through `&SkipList` there.
unsafe impl Send for SkipListIter {}

impl SkipListIter {
    /// An unpositioned cursor over `list`.
    pub(crate) fn new(list: Arc<SkipList>) -> SkipListIter {
        SkipListIter {
            list,
            node: None,
            behind: Vec::new(),
        }
    }

    fn current(&self) -> Option<NodeRef<'_>> {
        // SAFETY: `node` is only ever set from a `NodeRef` of `self.list` (below; directly or
        // through `behind`, which holds nothing else), so it is a published node of a list kept
        // alive by `self.list` for at least the borrow of `self`.
        self.node.map(|ptr| unsafe { NodeRef::new(ptr) })
    }

    /// True when positioned at an entry.
    pub(crate) fn valid(&self) -> bool {
        self.node.is_some()
    }

    /// Positions at the first entry.
    pub(crate) fn seek_to_first(&mut self) {
        self.behind.clear();
        let first = self.list.head().next(0).map(|n| n.ptr);
        self.node = first;
    }

    /// Positions at the last entry.
    pub(crate) fn seek_to_last(&mut self) {
        self.behind.clear();
        let last = self.list.find_last().map(|n| n.ptr);
        self.node = last;
    }

    /// Positions at the first entry `>= target`.
    pub(crate) fn seek(&mut self, target: &[u8]) {
        self.behind.clear();
        let found = self.list.find_greater_or_equal(target).map(|n| n.ptr);
        self.node = found;
    }

    /// Positions at the last entry `<= target`.
    pub(crate) fn seek_for_prev(&mut self, target: &[u8]) {
        self.behind.clear();
        let list = &*self.list;
        let found = list.find_last_before(target, true, 0);
        self.node = (!found.is(list.head())).then_some(found.ptr);
    }

    /// Moves to the next entry; stays invalid if invalid.
    pub(crate) fn next(&mut self) {
        self.behind.clear();
        let next = self.current().and_then(|n| n.next(0)).map(|n| n.ptr);
        self.node = next;
    }

    /// Moves to the previous entry. Stays invalid if invalid.
    ///
    /// The list has no backward links: this pops the predecessor collected by an earlier
    /// step, or else searches for the last node of level [`BACKWARD_SEARCH_LEVEL`] before the
    /// current one and collects the nodes between them from level 0. Nodes inserted between
    /// them after that walk are not seen, as the type's contract allows.
    pub(crate) fn prev(&mut self) {
        if let Some(before) = self.behind.pop() {
            self.node = Some(before);
            return;
        }
        let Some(current) = self.node else { return };
        // SAFETY: `node` is only ever set from a `NodeRef` of `self.list` (published, and kept
        // alive by `self.list` for as long as this borrow).
        let current = unsafe { NodeRef::new(current) };
        let list = &*self.list;
        let anchor = list.find_last_before(current.key(), false, BACKWARD_SEARCH_LEVEL);
        let mut x = if anchor.is(list.head()) {
            anchor.next(0)
        } else {
            Some(anchor)
        };
        // `current` is linked at level 0 after the anchor, and nodes are never unlinked, so
        // the walk reaches it.
        while let Some(n) = x.filter(|n| !n.is(current)) {
            self.behind.push(n.ptr);
            x = n.next(0);
        }
        self.node = self.behind.pop();
    }

    /// The current internal key; empty when invalid.
    pub(crate) fn key(&self) -> &[u8] {
        self.current().map_or(&[], |n| n.key())
    }

    /// The current value; empty when invalid.
    pub(crate) fn value(&self) -> &[u8] {
        self.current().map_or(&[], |n| n.value())
    }

    #[cfg(test)]
    fn position_height(&self) -> Option<usize> {
        self.current().map(|n| n.height())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{make_internal_key, pack_trailer, BytewiseComparator, ValueKind};

    fn list() -> Arc<SkipList> {
        Arc::new(SkipList::new(InternalKeyComparator::new(Arc::new(
            BytewiseComparator,
        ))))
    }

    #[test]
    #[cfg_attr(miri, ignore = "statistics only; nothing unsafe to check")]
    fn heights_follow_a_quarter_branching_factor() {
        let mut writer = Writer {
            arena: Arena::new(),
            values: Arena::new(),
            rng: 1,
            splice: [NonNull::dangling(); MAX_HEIGHT],
        };
        let mut counts = [0usize; MAX_HEIGHT + 1];
        let draws = 100_000;
        for _ in 0..draws {
            let h = writer.random_height();
            assert!((1..=MAX_HEIGHT).contains(&h));
            counts[h] += 1;
        }
        // Expected: 3/4 of draws at height 1, 3/16 at height 2; allow generous slack.
        assert!((70_000..80_000).contains(&counts[1]), "{counts:?}");
        assert!((16_000..21_500).contains(&counts[2]), "{counts:?}");
    }

    #[test]
    fn empty_list_has_no_positions() {
        let l = list();
        let mut it = SkipListIter::new(l.clone());
        assert!(!it.valid());
        it.seek_to_first();
        assert!(!it.valid());
        it.seek_to_last();
        assert!(!it.valid());
        it.seek(b"anything");
        assert!(!it.valid());
        it.seek_for_prev(b"anything");
        assert!(!it.valid());
        it.next();
        it.prev();
        assert!(!it.valid());
        assert_eq!(it.key(), b"");
        assert_eq!(it.value(), b"");
        assert_eq!(it.position_height(), None);
        assert_eq!(l.len(), 0);
        assert!(l.memory_usage() > 0, "the head lives in the arena");
    }

    /// Runs of appends past the largest key (the one-comparison path) interleaved with inserts
    /// anywhere, including right after an append and right before the next one: every level,
    /// walked from the head, must be in ascending order and hold exactly the nodes of that
    /// height or more, and level 0 every key.
    #[test]
    fn appends_and_inserts_anywhere_keep_every_level_ordered() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        let l = list();
        let mut keys: Vec<Vec<u8>> = Vec::new();
        let mut next_append = 1_000_000u64;
        for round in 0..300u64 {
            let user = if rng.gen_bool(0.6) {
                next_append += rng.gen_range(1..4);
                format!("{next_append:09}")
            } else {
                format!("{:09}", rng.gen_range(0..next_append + 2))
            };
            let ikey = make_internal_key(user.as_bytes(), round + 1, ValueKind::Value);
            l.insert(
                user.as_bytes(),
                pack_trailer(round + 1, ValueKind::Value),
                b"v",
            );
            keys.push(ikey);
        }
        keys.sort_by(|a, b| l.cmp.compare(a, b));
        let head = l.head();
        let mut below: Option<Vec<Vec<u8>>> = None;
        for level in 0..MAX_HEIGHT {
            let mut at_level = Vec::new();
            let mut x = head;
            while let Some(n) = x.next(level) {
                assert!(n.height() > level, "a node linked above its height");
                at_level.push(n.key().to_vec());
                x = n;
            }
            assert!(
                at_level
                    .windows(2)
                    .all(|w| l.cmp.compare(&w[0], &w[1]) == Ordering::Less),
                "level {level} out of order"
            );
            match &below {
                None => assert_eq!(at_level, keys, "level 0 must hold every key in order"),
                Some(lower) => {
                    let expected: Vec<Vec<u8>> = lower
                        .iter()
                        .filter(|k| {
                            let mut it = SkipListIter::new(l.clone());
                            it.seek(k);
                            it.position_height().is_some_and(|h| h > level)
                        })
                        .cloned()
                        .collect();
                    assert_eq!(at_level, expected, "level {level} misses a tall node");
                }
            }
            below = Some(at_level);
        }
    }

    #[test]
    fn nodes_keep_their_bytes_and_order() {
        let l = list();
        for (i, k) in [b"m", b"c", b"x", b"a"].iter().enumerate() {
            l.insert(*k, (i as u64 + 1) << 8 | 1, format!("v{i}").as_bytes());
        }
        let mut it = SkipListIter::new(l.clone());
        it.seek_to_first();
        let mut seen = Vec::new();
        while it.valid() {
            assert!(it
                .position_height()
                .is_some_and(|h| (1..=MAX_HEIGHT).contains(&h)));
            seen.push((it.key()[..1].to_vec(), it.value().to_vec()));
            it.next();
        }
        let expect: Vec<(Vec<u8>, Vec<u8>)> = [("a", "v3"), ("c", "v1"), ("m", "v0"), ("x", "v2")]
            .iter()
            .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect();
        assert_eq!(seen, expect);
    }

    /// Backward steps pop predecessors collected by one search; every other move drops them.
    /// Random runs of steps both ways, seeks and inserts between the steps must position the
    /// cursor as a sorted copy of the keys says.
    #[test]
    fn steps_both_ways_match_a_sorted_copy() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let l = list();
        let mut keys: Vec<Vec<u8>> = Vec::new();
        // Internal keys are unique in a memtable (sequence numbers differ), so each user key
        // goes in once.
        let mut present = std::collections::HashSet::new();
        let mut add = |l: &SkipList, keys: &mut Vec<Vec<u8>>, n: u64| {
            if !present.insert(n) {
                return;
            }
            let user = format!("{n:06}");
            l.insert(user.as_bytes(), pack_trailer(1, ValueKind::Value), b"v");
            keys.push(make_internal_key(user.as_bytes(), 1, ValueKind::Value));
        };
        for _ in 0..3_000 {
            add(&l, &mut keys, rng.gen_range(0..1_000_000));
        }
        keys.sort();
        let mut it = SkipListIter::new(l.clone());
        let mut at: Option<usize> = None;
        for _ in 0..20_000 {
            match rng.gen_range(0..20) {
                0 => {
                    it.seek_to_last();
                    at = keys.len().checked_sub(1);
                }
                1 => {
                    it.seek_to_first();
                    at = (!keys.is_empty()).then_some(0);
                }
                2 => {
                    let target = keys[rng.gen_range(0..keys.len())].clone();
                    it.seek_for_prev(&target);
                    at = keys.binary_search(&target).ok();
                }
                3 if at.is_some() => {
                    // An insert, then a seek back to the cursor's key.
                    let current = it.key().to_vec();
                    let mut fresh = Vec::new();
                    add(&l, &mut fresh, rng.gen_range(0..1_000_000));
                    for key in fresh {
                        if let Err(i) = keys.binary_search(&key) {
                            keys.insert(i, key);
                        }
                    }
                    it.seek(&current);
                    at = keys.binary_search(&current).ok();
                }
                4..=11 if at.is_some() => {
                    it.prev();
                    at = at.and_then(|i| i.checked_sub(1));
                }
                _ if at.is_some() => {
                    it.next();
                    at = at.map(|i| i + 1).filter(|&i| i < keys.len());
                }
                _ => {}
            }
            match at {
                Some(i) => {
                    assert!(it.valid());
                    assert_eq!(it.key(), keys[i].as_slice());
                }
                None => assert!(!it.valid()),
            }
        }
    }

    /// Keys inserted during a backward scan, among the predecessors it already collected,
    /// may go unseen, but the scan stays in order and sees every key that was there before.
    #[test]
    fn a_backward_scan_during_inserts_sees_every_older_key_in_order() {
        let l = list();
        let ikey = |n: u64| make_internal_key(format!("{n:06}").as_bytes(), 1, ValueKind::Value);
        let trailer = pack_trailer(1, ValueKind::Value);
        for n in (0..2_000).map(|n| n * 2) {
            l.insert(format!("{n:06}").as_bytes(), trailer, b"v");
        }
        let mut it = SkipListIter::new(l.clone());
        it.seek_to_last();
        let mut seen = vec![it.key().to_vec()];
        let mut odd = 3_999;
        while it.valid() {
            it.prev();
            if it.valid() {
                seen.push(it.key().to_vec());
            }
            // An odd key, landing just below the cursor: among the collected predecessors.
            if odd > 0 {
                l.insert(format!("{odd:06}").as_bytes(), trailer, b"v");
                odd -= 2;
            }
        }
        assert!(seen.windows(2).all(|w| w[0] > w[1]), "out of order");
        let evens: Vec<Vec<u8>> = seen.iter().filter(|k| k[5] % 2 == 0).cloned().collect();
        let expect: Vec<Vec<u8>> = (0..2_000).rev().map(|n| ikey(n * 2)).collect();
        assert_eq!(evens, expect);
    }
}
