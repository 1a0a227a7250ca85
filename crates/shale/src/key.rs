//! Internal keys: a user key followed by an 8-byte trailer `(sequence << 8) | kind`, stored
//! little-endian. Internal keys order by user key ascending (per the user comparator), then by
//! trailer descending, so the newest entry for a user key comes first.
//!
//! ```text
//! +-------------------+---------------------------------------------+
//! | user key (n bytes)| fixed64 LE: sequence (56 bits) << 8 | kind   |
//! +-------------------+---------------------------------------------+
//! ```
//! Format doc: `docs/format/sstable.md` ("Internal keys").

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

use crate::codec::{decode_fixed64, put_fixed64};

/// A write's position in the total order of writes. 56 bits are usable.
pub type SequenceNumber = u64;

/// The largest sequence number that fits in a trailer.
pub const MAX_SEQUENCE: SequenceNumber = (1 << 56) - 1;

/// Length of the trailer appended to every user key.
pub const TRAILER_LEN: usize = 8;

/// What an entry says about its user key. Persisted: never renumber.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum ValueKind {
    /// A tombstone: the key is deleted as of this sequence number.
    Deletion = 0,
    /// A full value.
    Value = 1,
    /// A merge operand, combined with older entries by the merge operator.
    Merge = 2,
    /// A full value with an expiry time: the value bytes start with a fixed64 LE expiry in
    /// microseconds since the Unix epoch, followed by the user's value.
    ExpiringValue = 3,
    /// A full value stored in a blob file: the value bytes are a blob reference
    /// (`docs/format/blob.md`), resolved to the user's value when read.
    BlobIndex = 4,
    /// An expiring value stored in a blob file: the value bytes are a fixed64 LE expiry followed
    /// by a blob reference, laid out like an `ExpiringValue`'s.
    ExpiringBlobIndex = 5,
}

impl ValueKind {
    /// The kind with the highest number: seeking to `(user_key, seq, KIND_FOR_SEEK)` lands on
    /// the newest entry visible at `seq`. It moved from `ExpiringValue` to `ExpiringBlobIndex`
    /// when the blob kinds were added; only seeks and index separators use it, and a separator
    /// written with the old value still sorts at or after every real entry of its user key
    /// with a sequence number below `MAX_SEQUENCE`, so tables written before stay valid.
    pub const FOR_SEEK: ValueKind = ValueKind::ExpiringBlobIndex;

    /// True for the kinds whose value starts with a fixed64 expiry.
    pub fn is_expiring(self) -> bool {
        matches!(
            self,
            ValueKind::ExpiringValue | ValueKind::ExpiringBlobIndex
        )
    }

    /// True for the kinds whose value is (after any expiry) a blob reference.
    pub fn is_blob(self) -> bool {
        matches!(self, ValueKind::BlobIndex | ValueKind::ExpiringBlobIndex)
    }

    /// Decodes a persisted kind byte.
    pub fn from_u8(b: u8) -> Option<ValueKind> {
        match b {
            0 => Some(ValueKind::Deletion),
            1 => Some(ValueKind::Value),
            2 => Some(ValueKind::Merge),
            3 => Some(ValueKind::ExpiringValue),
            4 => Some(ValueKind::BlobIndex),
            5 => Some(ValueKind::ExpiringBlobIndex),
            _ => None,
        }
    }
}

/// Packs a sequence number and kind into a trailer.
pub fn pack_trailer(seq: SequenceNumber, kind: ValueKind) -> u64 {
    debug_assert!(seq <= MAX_SEQUENCE);
    (seq << 8) | kind as u64
}

/// Appends the internal key for `(user_key, seq, kind)` to `dst`.
pub fn append_internal_key(
    dst: &mut Vec<u8>,
    user_key: &[u8],
    seq: SequenceNumber,
    kind: ValueKind,
) {
    dst.extend_from_slice(user_key);
    put_fixed64(dst, pack_trailer(seq, kind));
}

/// Builds the internal key for `(user_key, seq, kind)`.
pub fn make_internal_key(user_key: &[u8], seq: SequenceNumber, kind: ValueKind) -> Vec<u8> {
    let mut k = Vec::with_capacity(user_key.len() + TRAILER_LEN);
    append_internal_key(&mut k, user_key, seq, kind);
    k
}

/// An internal key split into its parts.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct ParsedInternalKey<'a> {
    /// The user's key.
    pub user_key: &'a [u8],
    /// The write's sequence number.
    pub sequence: SequenceNumber,
    /// What the entry is.
    pub kind: ValueKind,
}

impl fmt::Debug for ParsedInternalKey<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?}@{}:{:?}",
            String::from_utf8_lossy(self.user_key),
            self.sequence,
            self.kind
        )
    }
}

/// Splits an internal key; `None` if it is shorter than a trailer or has an unknown kind.
pub fn parse_internal_key(ikey: &[u8]) -> Option<ParsedInternalKey<'_>> {
    let split = ikey.len().checked_sub(TRAILER_LEN)?;
    let trailer = decode_fixed64(ikey.get(split..)?)?;
    Some(ParsedInternalKey {
        user_key: ikey.get(..split)?,
        sequence: trailer >> 8,
        kind: ValueKind::from_u8((trailer & 0xff) as u8)?,
    })
}

/// The user-key part of an internal key (the whole slice if it is too short to have a trailer).
#[inline]
pub fn user_key(ikey: &[u8]) -> &[u8] {
    ikey.get(..ikey.len().saturating_sub(TRAILER_LEN))
        .unwrap_or(ikey)
}

/// Length of the longest common prefix of `a` and `b`, compared eight bytes at a time.
#[inline]
pub(crate) fn common_prefix_len(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + 8 <= n {
        let word = |s: &[u8]| {
            s.get(i..i + 8)
                .and_then(|w| <[u8; 8]>::try_from(w).ok())
                .map_or(0, u64::from_le_bytes)
        };
        let diff = word(a) ^ word(b);
        if diff != 0 {
            // Little-endian: the lowest set bit is in the first differing byte.
            return i + (diff.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < n && a.get(i) == b.get(i) {
        i += 1;
    }
    i
}

/// Lexicographic order of two byte strings, compared eight bytes at a time in registers.
///
/// Memtable and block searches compare short keys (tens of bytes) millions of times a second;
/// inlined word compares avoid a `memcmp` call and its length dispatch per comparison, which
/// was a tenth of a random-insert profile.
#[inline]
pub fn bytewise_compare(a: &[u8], b: &[u8]) -> Ordering {
    let common = a.len().min(b.len());
    let mut i = 0;
    while i + 8 <= common {
        let (Some(x), Some(y)) = (a.get(i..i + 8), b.get(i..i + 8)) else {
            break;
        };
        let x = u64::from_be_bytes(x.try_into().unwrap_or([0; 8]));
        let y = u64::from_be_bytes(y.try_into().unwrap_or([0; 8]));
        if x != y {
            return x.cmp(&y);
        }
        i += 8;
    }
    // The last 0-7 common bytes, zero-padded: padding cannot decide the order, since equal
    // padded words leave it to the lengths.
    let tail = |s: &[u8]| padded_be_word(s.get(i..common).unwrap_or_default());
    match tail(a).cmp(&tail(b)) {
        Ordering::Equal => a.len().cmp(&b.len()),
        other => other,
    }
}

/// Makes `dst` a copy of `src`, reusing its memory.
///
/// Keys of one length follow one another in most scans, and a copy of a length known only at
/// run time compiles to a call to `memcpy`: when the lengths already match and `src` is 8 to
/// 32 bytes long, the bytes go in two fixed-size copies (which may overlap) instead.
#[inline]
pub(crate) fn assign_bytes(dst: &mut Vec<u8>, src: &[u8]) {
    if dst.len() != src.len() {
        dst.clear();
        dst.extend_from_slice(src);
        return;
    }
    if !copy_ends::<16>(dst, src) && !copy_ends::<8>(dst, src) {
        dst.copy_from_slice(src);
    }
}

/// Copies `src` over `dst` (of the same length) as its first and its last `N` bytes, if it is
/// `N` to `2N` bytes long; returns whether it did.
#[inline(always)]
fn copy_ends<const N: usize>(dst: &mut [u8], src: &[u8]) -> bool {
    if src.len() > 2 * N {
        return false;
    }
    let (Some(head), Some(tail)) = (src.first_chunk::<N>(), src.last_chunk::<N>()) else {
        return false;
    };
    if let Some(d) = dst.first_chunk_mut::<N>() {
        *d = *head;
    }
    if let Some(d) = dst.last_chunk_mut::<N>() {
        *d = *tail;
    }
    true
}

/// The first eight bytes of `bytes` (all of them if fewer) as a big-endian integer,
/// zero-padded on the right. Between strings, a smaller word means a smaller string in bytewise
/// order; equal words leave the order to the bytes after them and to the lengths.
#[inline]
pub(crate) fn padded_be_word(bytes: &[u8]) -> u64 {
    // Eight bytes or more: one fixed-size load. Fewer: shifted in one by one. A padded copy
    // (`copy_from_slice` of a length known only at run time) compiles to a call to `memcpy`.
    if let Some(head) = bytes.first_chunk::<8>() {
        return u64::from_be_bytes(*head);
    }
    bytes
        .iter()
        .enumerate()
        .fold(0, |word, (i, &b)| word | u64::from(b) << (56 - 8 * i))
}

/// The trailer of an internal key (0 if it is too short).
#[inline]
pub fn trailer(ikey: &[u8]) -> u64 {
    ikey.len()
        .checked_sub(TRAILER_LEN)
        .and_then(|s| ikey.get(s..))
        .and_then(decode_fixed64)
        .unwrap_or(0)
}

/// Orders user keys. Implementations must be a total order and stay the same for the life of a
/// database: its name is recorded in the manifest and checked at open.
///
/// Two keys may compare equal only if their bytes are equal: bloom filters (in tables and
/// memtables) hash a key's bytes, so a comparator that equates different bytes (say, case
/// insensitively) would have lookups of one spelling miss the other.
///
/// The shortening hooks are checked, not trusted: a result outside the range they allow is
/// ignored and the key kept as it is.
pub trait Comparator: Send + Sync + 'static {
    /// Recorded in the manifest; opening with a comparator of another name fails. The name
    /// `shale.BytewiseComparator` is reserved: a comparator with that name is taken to be the
    /// built-in byte order, which is compared inline.
    fn name(&self) -> &str;
    /// Three-way comparison of two user keys.
    fn compare(&self, a: &[u8], b: &[u8]) -> Ordering;
    /// May shorten `start` to any key in `[start, limit)`, to make index blocks smaller.
    fn find_shortest_separator(&self, _start: &mut Vec<u8>, _limit: &[u8]) {}
    /// May change `key` to any key `>= key`, to make index blocks smaller.
    fn find_short_successor(&self, _key: &mut Vec<u8>) {}
}

/// Lexicographic byte order, the default.
#[derive(Debug, Default, Clone, Copy)]
pub struct BytewiseComparator;

impl Comparator for BytewiseComparator {
    fn name(&self) -> &str {
        "shale.BytewiseComparator"
    }

    fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
        bytewise_compare(a, b)
    }

    fn find_shortest_separator(&self, start: &mut Vec<u8>, limit: &[u8]) {
        let common = common_prefix_len(start, limit);
        if common >= start.len().min(limit.len()) {
            return; // one is a prefix of the other
        }
        let byte = start[common];
        if byte < 0xff && byte + 1 < limit[common] {
            start[common] = byte + 1;
            start.truncate(common + 1);
            debug_assert!(start.as_slice() < limit);
        }
    }

    fn find_short_successor(&self, key: &mut Vec<u8>) {
        if let Some(i) = key.iter().position(|&b| b != 0xff) {
            key[i] += 1;
            key.truncate(i + 1);
        }
    }
}

/// Orders internal keys: user key ascending, then trailer descending.
///
/// The built-in [`BytewiseComparator`] (recognised by its name, which is also how the manifest
/// identifies comparators) is held without a reference count and compared inline: a clone is
/// a copy, so the iterators a point lookup makes never write a count shared by every thread,
/// and no comparison goes through a virtual call.
#[derive(Clone)]
pub struct InternalKeyComparator {
    user: UserComparator,
}

#[derive(Clone)]
enum UserComparator {
    Bytewise,
    Custom(Arc<dyn Comparator>),
}

/// The shared handle [`InternalKeyComparator::user`] returns for the built-in comparator.
fn bytewise_handle() -> &'static Arc<dyn Comparator> {
    static HANDLE: std::sync::OnceLock<Arc<dyn Comparator>> = std::sync::OnceLock::new();
    HANDLE.get_or_init(|| Arc::new(BytewiseComparator))
}

impl fmt::Debug for InternalKeyComparator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "InternalKeyComparator({})", self.user().name())
    }
}

impl InternalKeyComparator {
    /// Wraps a user comparator.
    pub fn new(user: Arc<dyn Comparator>) -> Self {
        let user = if user.name() == BytewiseComparator.name() {
            UserComparator::Bytewise
        } else {
            UserComparator::Custom(user)
        };
        InternalKeyComparator { user }
    }

    /// Whether user keys are ordered bytewise (the built-in comparator), so that byte-level
    /// shortcuts such as fixed-width key prefixes order keys correctly.
    pub fn is_bytewise(&self) -> bool {
        matches!(self.user, UserComparator::Bytewise)
    }

    /// The user comparator.
    pub fn user(&self) -> &Arc<dyn Comparator> {
        match &self.user {
            UserComparator::Bytewise => bytewise_handle(),
            UserComparator::Custom(user) => user,
        }
    }

    /// Compares two user keys.
    #[inline]
    pub fn compare_user(&self, a: &[u8], b: &[u8]) -> Ordering {
        match &self.user {
            UserComparator::Bytewise => bytewise_compare(a, b),
            UserComparator::Custom(user) => user.compare(a, b),
        }
    }

    /// Compares two encoded internal keys.
    #[inline]
    pub fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
        match self.compare_user(user_key(a), user_key(b)) {
            Ordering::Equal => trailer(b).cmp(&trailer(a)),
            other => other,
        }
    }

    /// Shortens `start` towards `limit` (both internal keys) keeping `start <= result < limit`.
    pub fn find_shortest_separator(&self, start: &mut Vec<u8>, limit: &[u8]) {
        let user_start = user_key(start).to_vec();
        let mut shortened = user_start.clone();
        self.user()
            .find_shortest_separator(&mut shortened, user_key(limit));
        // A user comparator's separator is checked, not trusted: one at or past `limit` would
        // make an index entry that sends lookups of the next block's keys past it.
        if shortened.len() < user_start.len()
            && self.user().compare(&user_start, &shortened) == Ordering::Less
            && self.user().compare(&shortened, user_key(limit)) == Ordering::Less
        {
            // A shorter user key that is strictly greater: the largest trailer keeps it
            // at the front of its user key.
            shortened
                .extend_from_slice(&pack_trailer(MAX_SEQUENCE, ValueKind::FOR_SEEK).to_le_bytes());
            *start = shortened;
        }
    }

    /// Changes `key` (an internal key) to a short internal key `>= key`.
    pub fn find_short_successor(&self, key: &mut Vec<u8>) {
        let user = user_key(key).to_vec();
        let mut shortened = user.clone();
        self.user().find_short_successor(&mut shortened);
        if shortened.len() < user.len() && self.user().compare(&user, &shortened) == Ordering::Less
        {
            shortened
                .extend_from_slice(&pack_trailer(MAX_SEQUENCE, ValueKind::FOR_SEEK).to_le_bytes());
            *key = shortened;
        }
    }
}

/// Internal-key bytes a [`LookupKey`] holds without allocating (user keys up to 120 bytes).
const LOOKUP_KEY_INLINE_BYTES: usize = 128;

/// The key a point lookup seeks to: the user key with the read's sequence number and
/// [`ValueKind::FOR_SEEK`], so the first entry at or after it is the newest visible one.
///
/// A short key is kept inline (as LevelDB's `LookupKey` keeps it in a 200-byte array): an
/// allocation and its free were 1.5% of a point lookup's instructions (callgrind).
#[derive(Debug, Clone)]
pub struct LookupKey {
    inline: [u8; LOOKUP_KEY_INLINE_BYTES],
    /// Bytes of `inline` in use; 0 when the key is in `heap`.
    inline_len: usize,
    heap: Vec<u8>,
}

impl LookupKey {
    /// The lookup key for `user_key` as of `sequence`.
    pub fn new(user_key: &[u8], sequence: SequenceNumber) -> Self {
        let len = user_key.len() + TRAILER_LEN;
        let mut key = LookupKey {
            inline: [0; LOOKUP_KEY_INLINE_BYTES],
            inline_len: 0,
            heap: Vec::new(),
        };
        match key.inline.get_mut(..len) {
            Some(inline) => {
                let (user, trailer) = inline.split_at_mut(user_key.len());
                user.copy_from_slice(user_key);
                trailer.copy_from_slice(&pack_trailer(sequence, ValueKind::FOR_SEEK).to_le_bytes());
                key.inline_len = len;
            }
            None => key.heap = make_internal_key(user_key, sequence, ValueKind::FOR_SEEK),
        }
        key
    }
    /// The encoded internal key.
    pub fn internal_key(&self) -> &[u8] {
        match self.inline.get(..self.inline_len) {
            Some(inline) if self.inline_len > 0 => inline,
            _ => &self.heap,
        }
    }
    /// The user key.
    pub fn user_key(&self) -> &[u8] {
        user_key(self.internal_key())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn icmp() -> InternalKeyComparator {
        InternalKeyComparator::new(Arc::new(BytewiseComparator))
    }

    #[test]
    fn lookup_keys_inline_or_not_encode_like_internal_keys() {
        for len in [0, 1, 16, 119, 120, 121, 200, 4096] {
            let user: Vec<u8> = (0..len).map(|i| (i * 31 + 7) as u8).collect();
            for seq in [0, 1, 0x00ab_cdef_0123_4567, MAX_SEQUENCE] {
                let lookup = LookupKey::new(&user, seq);
                let expected = make_internal_key(&user, seq, ValueKind::FOR_SEEK);
                assert_eq!(lookup.internal_key(), &expected[..], "length {len}");
                assert_eq!(lookup.user_key(), &user[..]);
                assert_eq!(lookup.clone().internal_key(), &expected[..]);
            }
        }
    }

    #[test]
    fn assign_bytes_copies_every_length_over_every_length() {
        let source: Vec<u8> = (1..=40).collect();
        for from in 0..=source.len() {
            for to in 0..=source.len() {
                // `dst` starts as other bytes of length `from`; it ends as `source[..to]`.
                let mut dst: Vec<u8> = (0..from).map(|i| 200 - i as u8).collect();
                let src = &source[..to];
                assign_bytes(&mut dst, src);
                assert_eq!(dst, src, "from {from} bytes to {to}");
            }
        }
    }

    #[test]
    fn padded_words_take_the_first_eight_bytes_zero_padded() {
        let bytes: Vec<u8> = (1..=12).collect();
        for len in 0..=bytes.len() {
            let mut word = [0u8; 8];
            for (w, b) in word.iter_mut().zip(&bytes[..len]) {
                *w = *b;
            }
            assert_eq!(
                padded_be_word(&bytes[..len]),
                u64::from_be_bytes(word),
                "{len}"
            );
        }
    }

    #[test]
    fn bytewise_compare_orders_prefixes_and_zero_bytes() {
        let cases: [(&[u8], &[u8]); 8] = [
            (b"", b""),
            (b"", b"\0"),
            (b"a", b"a\0"),
            (b"abcdefgh", b"abcdefgh\0"),
            (b"abcdefgh1", b"abcdefgh2"),
            (b"abcdefg\xff", b"abcdefh"),
            (b"0000000000123456", b"0000000000123457"),
            (
                b"\xff\xff\xff\xff\xff\xff\xff\xff\x01",
                b"\xff\xff\xff\xff\xff\xff\xff\xff",
            ),
        ];
        for (a, b) in cases {
            assert_eq!(bytewise_compare(a, b), a.cmp(b), "{a:?} vs {b:?}");
            assert_eq!(bytewise_compare(b, a), b.cmp(a), "{b:?} vs {a:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn bytewise_compare_matches_slice_order(
            prefix in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..20),
            a in proptest::collection::vec(0u8..3, 0..20),
            b in proptest::collection::vec(0u8..3, 0..20),
        ) {
            // A shared prefix and a small alphabet make equal words and ties common.
            let a = [prefix.as_slice(), &a].concat();
            let b = [prefix.as_slice(), &b].concat();
            proptest::prop_assert_eq!(bytewise_compare(&a, &b), a.cmp(&b));
        }

        #[test]
        fn common_prefix_len_matches_a_byte_count(
            prefix in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..20),
            a in proptest::collection::vec(0u8..3, 0..20),
            b in proptest::collection::vec(0u8..3, 0..20),
        ) {
            let a = [prefix.as_slice(), &a].concat();
            let b = [prefix.as_slice(), &b].concat();
            let expected = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
            proptest::prop_assert_eq!(common_prefix_len(&a, &b), expected);
        }
    }

    #[test]
    fn parse_round_trip() {
        let k = make_internal_key(b"apple", 77, ValueKind::Merge);
        let p = parse_internal_key(&k).expect("parse");
        assert_eq!(p.user_key, b"apple");
        assert_eq!(p.sequence, 77);
        assert_eq!(p.kind, ValueKind::Merge);
        assert!(parse_internal_key(b"short").is_none());
        let mut bad = k.clone();
        let n = bad.len();
        bad[n - 8] = 9; // unknown kind
        assert!(parse_internal_key(&bad).is_none());
    }

    #[test]
    fn golden_trailer_bytes() {
        let k = make_internal_key(b"a", 1, ValueKind::Value);
        assert_eq!(k, [b'a', 0x01, 0x01, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn ordering_newest_first() {
        let c = icmp();
        let a5 = make_internal_key(b"a", 5, ValueKind::Value);
        let a3 = make_internal_key(b"a", 3, ValueKind::Value);
        let b1 = make_internal_key(b"b", 1, ValueKind::Value);
        assert_eq!(c.compare(&a5, &a3), Ordering::Less);
        assert_eq!(c.compare(&a3, &b1), Ordering::Less);
        assert_eq!(c.compare(&a5, &a5), Ordering::Equal);
        let seek = LookupKey::new(b"a", 4);
        assert_eq!(c.compare(seek.internal_key(), &a5), Ordering::Greater);
        assert_eq!(c.compare(seek.internal_key(), &a3), Ordering::Less);
    }

    #[test]
    fn separators_stay_between() {
        let c = icmp();
        let cases: &[(&[u8], &[u8])] = &[
            (b"abcdefg", b"abzzz"),
            (b"foo", b"foobar"),
            (b"a\xff\xff", b"b"),
            (b"hello", b"hellp"),
            (b"x", b"y"),
        ];
        for (s, l) in cases {
            let start = make_internal_key(s, 10, ValueKind::Value);
            let limit = make_internal_key(l, 5, ValueKind::Value);
            let mut sep = start.clone();
            c.find_shortest_separator(&mut sep, &limit);
            assert_ne!(c.compare(&sep, &start), Ordering::Less);
            assert_eq!(c.compare(&sep, &limit), Ordering::Less);
        }
        let mut succ = make_internal_key(b"abc", 3, ValueKind::Value);
        let orig = succ.clone();
        c.find_short_successor(&mut succ);
        assert_eq!(user_key(&succ), b"b");
        assert_eq!(c.compare(&orig, &succ), Ordering::Less);
    }

    /// A user comparator whose separator overshoots `limit` is ignored, not trusted (in a
    /// release build it used to become an index entry that hid the next block's keys).
    #[test]
    fn an_overshooting_user_separator_is_ignored() {
        struct Overshoot;
        impl Comparator for Overshoot {
            fn name(&self) -> &str {
                "test.Overshoot"
            }
            fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
                a.cmp(b)
            }
            fn find_shortest_separator(&self, start: &mut Vec<u8>, _limit: &[u8]) {
                *start = b"z".to_vec();
            }
        }
        let c = InternalKeyComparator::new(Arc::new(Overshoot));
        let start = make_internal_key(b"apple", 10, ValueKind::Value);
        let limit = make_internal_key(b"banana", 5, ValueKind::Value);
        let mut sep = start.clone();
        c.find_shortest_separator(&mut sep, &limit);
        assert_eq!(sep, start);
    }
}
