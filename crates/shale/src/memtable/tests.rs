//! Memtable tests: a `BTreeMap` oracle of internal keys, large entries, a custom comparator,
//! and concurrent readers during inserts.

use std::cmp::{Ordering, Reverse};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::*;
use crate::error::Error;
use crate::key::{
    make_internal_key, parse_internal_key, trailer, user_key, BytewiseComparator, Comparator,
    LookupKey,
};

/// `n` in a normal run, a tenth of it under Miri (which checks the unsafe code for undefined
/// behaviour and data races, about a thousand times slower).
fn scaled(n: u64) -> u64 {
    if cfg!(miri) {
        n / 10
    } else {
        n
    }
}

fn bytewise() -> InternalKeyComparator {
    InternalKeyComparator::new(Arc::new(BytewiseComparator))
}

/// Oracle key: ordered as internal keys are under the bytewise comparator.
type OracleKey = (Vec<u8>, Reverse<u64>);

fn oracle_key(ikey: &[u8]) -> OracleKey {
    (user_key(ikey).to_vec(), Reverse(trailer(ikey)))
}

fn oracle_ikey(k: &OracleKey) -> Vec<u8> {
    let mut v = k.0.clone();
    v.extend_from_slice(&k.1 .0.to_le_bytes());
    v
}

const KINDS: [ValueKind; 4] = [
    ValueKind::Deletion,
    ValueKind::Value,
    ValueKind::Merge,
    ValueKind::ExpiringValue,
];

fn random_user_key(rng: &mut StdRng) -> Vec<u8> {
    // A small key space, so that user keys get many versions; some keys are prefixes of others.
    let n = rng.gen_range(0..150u32);
    let mut k = format!("key{n:03}").into_bytes();
    if n % 7 == 0 {
        k.truncate(4);
    }
    if n % 11 == 0 {
        k.push(0xff);
    }
    k
}

struct Filled {
    mem: Arc<MemTable>,
    oracle: BTreeMap<OracleKey, Vec<u8>>,
}

fn fill(seed: u64, entries: u64) -> Filled {
    let mut rng = StdRng::seed_from_u64(seed);
    let mem = Arc::new(MemTable::new(bytewise()));
    let mut oracle = BTreeMap::new();
    // Sequence numbers are unique but added out of order, to exercise every splice position.
    let mut seqs: Vec<u64> = (1..=entries).collect();
    for i in (1..seqs.len()).rev() {
        seqs.swap(i, rng.gen_range(0..=i));
    }
    for seq in seqs {
        let uk = random_user_key(&mut rng);
        let kind = KINDS[rng.gen_range(0..KINDS.len())];
        let len = if rng.gen_bool(0.1) {
            0
        } else {
            rng.gen_range(1..64)
        };
        let value: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        mem.add(seq, kind, &uk, &value);
        let ikey = make_internal_key(&uk, seq, kind);
        assert!(oracle.insert(oracle_key(&ikey), value).is_none());
    }
    Filled { mem, oracle }
}

/// Walks `mem` forwards and then backwards, checking every entry against `oracle`.
fn assert_iterates_like_oracle(mem: &Arc<MemTable>, oracle: &BTreeMap<OracleKey, Vec<u8>>) {
    let mut it = mem.iter();
    it.seek_to_first();
    for (k, v) in oracle {
        assert!(it.valid());
        assert_eq!(it.key(), oracle_ikey(k).as_slice());
        assert_eq!(it.value(), v.as_slice());
        it.next();
    }
    assert!(!it.valid());
    it.seek_to_last();
    for (k, v) in oracle.iter().rev() {
        assert!(it.valid());
        assert_eq!(it.key(), oracle_ikey(k).as_slice());
        assert_eq!(it.value(), v.as_slice());
        it.prev();
    }
    assert!(!it.valid());
    assert!(it.status().is_ok());
}

fn random_target(rng: &mut StdRng, entries: u64) -> Vec<u8> {
    let uk = random_user_key(rng);
    let seq = rng.gen_range(0..=entries + 1);
    make_internal_key(&uk, seq, KINDS[rng.gen_range(0..KINDS.len())])
}

#[test]
fn empty_memtable() {
    let mem = Arc::new(MemTable::new(bytewise()));
    assert!(mem.is_empty());
    assert_eq!(mem.len(), 0);
    let mut it = mem.iter();
    it.seek_to_first();
    assert!(!it.valid());
    it.seek_to_last();
    assert!(!it.valid());
    assert!(it.status().is_ok());
    let mut visits = 0;
    mem.get(LookupKey::new(b"k", 5).internal_key(), &mut |_, _| {
        visits += 1;
        Ok(true)
    })
    .expect("get");
    assert_eq!(visits, 0);
}

#[test]
fn iteration_matches_oracle_in_both_directions() {
    for seed in [1, 2, 3] {
        let Filled { mem, oracle } = fill(seed, scaled(2000));
        assert_eq!(mem.len(), oracle.len());
        assert!(!mem.is_empty());

        assert_iterates_like_oracle(&mem, &oracle);
    }
}

#[test]
fn seek_and_seek_for_prev_match_oracle() {
    let entries = scaled(3000);
    let Filled { mem, oracle } = fill(7, entries);
    let mut rng = StdRng::seed_from_u64(8);
    let mut it = mem.iter();
    for round in 0..scaled(600) {
        // Half the targets are keys that exist, to hit the equality cases exactly.
        let target = if round % 2 == 0 {
            random_target(&mut rng, entries)
        } else {
            let nth = rng.gen_range(0..oracle.len());
            oracle
                .keys()
                .nth(nth)
                .map(oracle_ikey)
                .expect("nth key exists")
        };
        let t = oracle_key(&target);

        it.seek(&target);
        let mut expect = oracle.range(t.clone()..);
        // Walk a few steps forward, then back past the start, against the oracle.
        let mut walked = Vec::new();
        for _ in 0..4 {
            match expect.next() {
                Some((k, v)) => {
                    assert!(it.valid(), "seek {target:?}");
                    assert_eq!(it.key(), oracle_ikey(k).as_slice());
                    assert_eq!(it.value(), v.as_slice());
                    walked.push(k.clone());
                    it.next();
                }
                None => {
                    assert!(!it.valid());
                    break;
                }
            }
        }
        if let Some(first) = walked.first() {
            it.seek(&oracle_ikey(first));
            it.prev();
            match oracle.range(..first.clone()).next_back() {
                Some((k, _)) => assert_eq!(it.key(), oracle_ikey(k).as_slice()),
                None => assert!(!it.valid()),
            }
        }

        it.seek_for_prev(&target);
        match oracle.range(..=t.clone()).next_back() {
            Some((k, v)) => {
                assert!(it.valid());
                assert_eq!(it.key(), oracle_ikey(k).as_slice());
                assert_eq!(it.value(), v.as_slice());
                it.next();
                match oracle
                    .range((
                        std::ops::Bound::Excluded(k.clone()),
                        std::ops::Bound::Unbounded,
                    ))
                    .next()
                {
                    Some((k2, _)) => assert_eq!(it.key(), oracle_ikey(k2).as_slice()),
                    None => assert!(!it.valid()),
                }
            }
            None => assert!(!it.valid()),
        }
    }
}

#[test]
fn get_sees_versions_visible_at_the_lookup_sequence() {
    let entries = scaled(2000);
    let Filled { mem, oracle } = fill(11, entries);
    let mut rng = StdRng::seed_from_u64(12);
    for _ in 0..scaled(400) {
        let uk = random_user_key(&mut rng);
        let snapshot = rng.gen_range(0..=entries + 1);
        let lookup = LookupKey::new(&uk, snapshot);
        let mut seen = Vec::new();
        mem.get(lookup.internal_key(), &mut |ikey, value| {
            let parsed = parse_internal_key(ikey).expect("memtable keys parse");
            if parsed.user_key != uk.as_slice() {
                return Ok(false);
            }
            seen.push((parsed.sequence, parsed.kind, value.to_vec()));
            Ok(true)
        })
        .expect("get");
        let expect: Vec<(u64, ValueKind, Vec<u8>)> = oracle
            .iter()
            .filter(|((k, Reverse(t)), _)| *k == uk && t >> 8 <= snapshot)
            .map(|((_, Reverse(t)), v)| {
                let kind = ValueKind::from_u8((t & 0xff) as u8).expect("kind");
                (t >> 8, kind, v.clone())
            })
            .collect();
        assert_eq!(seen, expect, "user key {uk:?} at {snapshot}");
    }
}

#[test]
fn get_stops_when_told_and_returns_visit_errors() {
    let mem = MemTable::new(bytewise());
    mem.add(3, ValueKind::Value, b"a", b"a3");
    mem.add(2, ValueKind::Merge, b"a", b"a2");
    mem.add(1, ValueKind::Deletion, b"a", b"");
    mem.add(4, ValueKind::Value, b"b", b"b4");

    // The newest visible version first; a lookup below every version sees none of them.
    let mut seen = Vec::new();
    mem.get(LookupKey::new(b"a", 2).internal_key(), &mut |k, v| {
        seen.push((k.to_vec(), v.to_vec()));
        Ok(seen.len() < 2)
    })
    .expect("get");
    assert_eq!(
        seen,
        vec![
            (make_internal_key(b"a", 2, ValueKind::Merge), b"a2".to_vec()),
            (make_internal_key(b"a", 1, ValueKind::Deletion), Vec::new()),
        ]
    );

    let err = mem
        .get(LookupKey::new(b"a", 9).internal_key(), &mut |_, _| {
            Err(Error::InvalidArgument("stop here".into()))
        })
        .expect_err("visit error");
    assert!(matches!(err, Error::InvalidArgument(m) if m == "stop here"));
}

/// Inserts resume from the previous insert's position (the splice); runs in ascending order,
/// descending order, repeated keys and random jumps must all land where a full search would put
/// them.
#[test]
fn ordered_reversed_and_random_runs_match_oracle() {
    let mut rng = StdRng::seed_from_u64(41);
    let mem = Arc::new(MemTable::new(bytewise()));
    let mut oracle = BTreeMap::new();
    let mut seq = 0u64;
    for _ in 0..scaled(200) {
        let start = rng.gen_range(0..10_000u32);
        let run = rng.gen_range(1..40u32);
        let pattern = rng.gen_range(0..3);
        for i in 0..run {
            let n = match pattern {
                0 => start + i,
                1 => start.saturating_sub(i),
                _ => rng.gen_range(0..10_000),
            };
            seq += 1;
            let uk = format!("{n:08}").into_bytes();
            let value = seq.to_le_bytes();
            mem.add(seq, ValueKind::Value, &uk, &value);
            let ikey = make_internal_key(&uk, seq, ValueKind::Value);
            oracle.insert(oracle_key(&ikey), value.to_vec());
        }
    }
    assert_iterates_like_oracle(&mem, &oracle);
}

#[test]
fn equal_keys_are_kept_newest_insert_first() {
    let mem = Arc::new(MemTable::new(bytewise()));
    mem.add(5, ValueKind::Value, b"k", b"first");
    mem.add(5, ValueKind::Value, b"k", b"second");
    let mut values = Vec::new();
    mem.get(
        &make_internal_key(b"k", 5, ValueKind::Value),
        &mut |_, v| {
            values.push(v.to_vec());
            Ok(true)
        },
    )
    .expect("get");
    assert_eq!(values, vec![b"second".to_vec(), b"first".to_vec()]);
    assert_eq!(mem.len(), 2);
}

#[test]
fn entries_larger_than_an_arena_chunk() {
    let mem = Arc::new(MemTable::new(bytewise()));
    let mut rng = StdRng::seed_from_u64(21);
    let sizes = [
        10,
        arena::CHUNK_BYTES / 4 + 1,
        arena::CHUNK_BYTES + 3,
        5,
        4 * arena::CHUNK_BYTES,
        100,
    ];
    let mut expected = Vec::new();
    let mut payload_bytes = 0;
    for (i, &size) in sizes.iter().enumerate() {
        let key = format!("big{i}").into_bytes();
        // A fill byte per entry plus a few random bytes anywhere: cheap to build (also under
        // Miri), and a mix-up of entries or offsets would show.
        let mut value = vec![i as u8; size];
        for _ in 0..16 {
            let at = rng.gen_range(0..size);
            value[at] = rng.gen();
        }
        let before = mem.approximate_memory_usage();
        mem.add(i as u64 + 1, ValueKind::Value, &key, &value);
        assert!(mem.approximate_memory_usage() >= before + size);
        payload_bytes += key.len() + 8 + size;
        expected.push((key, value));
    }
    assert!(mem.approximate_memory_usage() >= payload_bytes);
    // The per-entry overhead is small: a header and a short tower.
    assert!(mem.approximate_memory_usage() < payload_bytes + sizes.len() * 128 + 256);

    let mut it = mem.iter();
    it.seek_to_first();
    for (key, value) in &expected {
        assert!(it.valid());
        assert_eq!(user_key(it.key()), key.as_slice());
        assert_eq!(it.value(), value.as_slice());
        it.next();
    }
    assert!(!it.valid());
}

#[test]
fn memory_usage_grows_with_each_add_not_by_chunks() {
    let mem = MemTable::new(bytewise());
    let empty = mem.approximate_memory_usage();
    assert!(empty < 1024, "an empty memtable reports {empty} bytes");
    let mut last = empty;
    for i in 0..100u64 {
        mem.add(i + 1, ValueKind::Value, &i.to_be_bytes(), &[7u8; 50]);
        let now = mem.approximate_memory_usage();
        assert!(now >= last + 8 + 8 + 50, "add {i}: {last} -> {now}");
        assert!(now <= last + 8 + 8 + 50 + 16 + 8 * skiplist::MAX_HEIGHT + 8);
        last = now;
    }
}

#[test]
fn iterator_keeps_entries_alive_after_the_memtable_is_dropped() {
    let mem = Arc::new(MemTable::new(bytewise()));
    mem.add(1, ValueKind::Value, b"kept", b"alive");
    let mut it = mem.iter();
    drop(mem);
    it.seek_to_first();
    assert!(it.valid());
    assert_eq!(user_key(it.key()), b"kept");
    assert_eq!(it.value(), b"alive");
}

/// Orders user keys by their reversed bytes, so byte order and memtable order differ.
struct ReversedBytes;

impl Comparator for ReversedBytes {
    fn name(&self) -> &str {
        "test.ReversedBytes"
    }
    fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
        a.iter().rev().cmp(b.iter().rev())
    }
}

#[test]
fn order_follows_the_user_comparator() {
    let mem = Arc::new(MemTable::new(InternalKeyComparator::new(Arc::new(
        ReversedBytes,
    ))));
    let keys: [&[u8]; 5] = [b"ab", b"ba", b"ca", b"zz", b"aa"];
    for (i, k) in keys.iter().enumerate() {
        mem.add(i as u64 + 1, ValueKind::Value, k, b"");
    }
    let mut expect: Vec<&[u8]> = keys.to_vec();
    expect.sort_by(|a, b| ReversedBytes.compare(a, b));
    let mut got = Vec::new();
    let mut it = mem.iter();
    it.seek_to_first();
    while it.valid() {
        got.push(user_key(it.key()).to_vec());
        it.next();
    }
    assert_eq!(got, expect);
    it.seek(&make_internal_key(b"b", 100, ValueKind::Value));
    // "b" reversed sorts after "ca" and "ba" (reversed "ac", "ab") and before "ab" ("ba").
    assert_eq!(user_key(it.key()), b"ab");
}

#[test]
fn memtable_and_iterator_cross_threads() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<MemTable>();
    send::<MemTableIterator>();
}

/// The user key written with sequence number `seq` in the concurrency test.
fn concurrent_key(seq: u64) -> Vec<u8> {
    // A scrambled order, so inserts land all over the list, with varying lengths.
    let scrambled = seq.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(17);
    let mut k = format!("{scrambled:016x}").into_bytes();
    k.truncate(8 + (seq % 9) as usize);
    k
}

/// The value written with sequence number `seq`: long enough that a reader seeing a node before
/// its bytes were written would notice.
fn concurrent_value(seq: u64) -> Vec<u8> {
    let len = (seq % 40) as usize + 8;
    (0..len)
        .map(|i| (seq as u8).wrapping_mul(31).wrapping_add(i as u8))
        .collect()
}

/// Checks that an entry a reader saw is one the writer wrote, byte for byte; returns its
/// sequence number.
fn check_concurrent_entry(ikey: &[u8], value: &[u8]) -> u64 {
    let parsed = parse_internal_key(ikey).expect("a published key parses");
    assert_eq!(parsed.kind, ValueKind::Value);
    assert_eq!(parsed.user_key, concurrent_key(parsed.sequence).as_slice());
    assert_eq!(value, concurrent_value(parsed.sequence).as_slice());
    parsed.sequence
}

#[test]
fn readers_see_sorted_complete_entries_while_one_writer_inserts() {
    const READERS: usize = 3;
    let entries: u64 = if cfg!(miri) { 300 } else { 30_000 };
    // Inserts between the writer's pauses for the readers.
    let checkpoint_every: u64 = if cfg!(miri) { 100 } else { 500 };
    let mem = Arc::new(MemTable::new(bytewise()));
    let icmp = bytewise();
    // Sequence numbers `1..=inserted` are all in the memtable.
    let inserted = AtomicUsize::new(0);
    let done = AtomicBool::new(false);
    // Rounds each reader has completed.
    let rounds_done: Vec<AtomicU64> = (0..READERS).map(|_| AtomicU64::new(0)).collect();

    std::thread::scope(|s| {
        s.spawn(|| {
            for seq in 1..=entries {
                mem.add(
                    seq,
                    ValueKind::Value,
                    &concurrent_key(seq),
                    &concurrent_value(seq),
                );
                inserted.store(seq as usize, std::sync::atomic::Ordering::Release);
                if seq % checkpoint_every == 0 {
                    // Let every reader finish a round that started after the previous
                    // checkpoint, so reads and inserts interleave however fast the writer is.
                    let checkpoint = seq / checkpoint_every;
                    while rounds_done
                        .iter()
                        .any(|r| r.load(std::sync::atomic::Ordering::Acquire) < checkpoint)
                    {
                        std::thread::yield_now();
                    }
                }
            }
            done.store(true, std::sync::atomic::Ordering::Release);
        });
        for (reader, rounds) in rounds_done.iter().enumerate() {
            let (mem, icmp, inserted, done) = (&mem, &icmp, &inserted, &done);
            s.spawn(move || {
                // However the reader ends (a failed assertion included), the writer must stop
                // waiting for it, or the test would hang instead of failing.
                struct Finished<'a>(&'a AtomicU64);
                impl Drop for Finished<'_> {
                    fn drop(&mut self) {
                        self.0.store(u64::MAX, std::sync::atomic::Ordering::Release);
                    }
                }
                let _finished = Finished(rounds);
                let mut rng = StdRng::seed_from_u64(100 + reader as u64);
                loop {
                    let finished = done.load(std::sync::atomic::Ordering::Acquire);
                    let floor = inserted.load(std::sync::atomic::Ordering::Acquire) as u64;
                    let mut it = mem.iter();

                    // A full forward scan: sorted, complete entries, and at least everything
                    // inserted before the scan began.
                    it.seek_to_first();
                    let mut below_floor = 0u64;
                    let mut last: Option<Vec<u8>> = None;
                    while it.valid() {
                        let seq = check_concurrent_entry(it.key(), it.value());
                        if seq <= floor {
                            below_floor += 1;
                        }
                        if let Some(prev) = &last {
                            assert_eq!(icmp.compare(prev, it.key()), Ordering::Less);
                        }
                        last = Some(it.key().to_vec());
                        it.next();
                    }
                    assert_eq!(
                        below_floor, floor,
                        "a scan missed entries inserted before it"
                    );

                    // Seeks land on an entry >= target; the entry before it is smaller, and is
                    // below the target too unless it was inserted after the round began.
                    for _ in 0..20 {
                        let target =
                            make_internal_key(&concurrent_key(rng.gen()), 0, ValueKind::Value);
                        it.seek(&target);
                        if it.valid() {
                            check_concurrent_entry(it.key(), it.value());
                            assert_ne!(icmp.compare(it.key(), &target), Ordering::Less);
                            let found = it.key().to_vec();
                            it.prev();
                            if it.valid() {
                                let seq = check_concurrent_entry(it.key(), it.value());
                                assert_eq!(icmp.compare(it.key(), &found), Ordering::Less);
                                if icmp.compare(it.key(), &target) != Ordering::Less {
                                    assert!(seq > floor, "seek skipped an older entry");
                                }
                            }
                        }
                        it.seek_for_prev(&target);
                        if it.valid() {
                            check_concurrent_entry(it.key(), it.value());
                            assert_ne!(icmp.compare(it.key(), &target), Ordering::Greater);
                        }
                    }

                    // A backward walk from the end stays strictly descending.
                    it.seek_to_last();
                    let mut last: Option<Vec<u8>> = None;
                    for _ in 0..50 {
                        if !it.valid() {
                            break;
                        }
                        check_concurrent_entry(it.key(), it.value());
                        if let Some(next) = &last {
                            assert_eq!(icmp.compare(it.key(), next), Ordering::Less);
                        }
                        last = Some(it.key().to_vec());
                        it.prev();
                    }

                    // A point lookup of an entry known to be there finds it first.
                    if floor > 0 {
                        let seq = rng.gen_range(1..=floor);
                        let mut found = None;
                        mem.get(
                            LookupKey::new(&concurrent_key(seq), seq).internal_key(),
                            &mut |k, v| {
                                found = Some(check_concurrent_entry(k, v));
                                Ok(false)
                            },
                        )
                        .expect("get");
                        assert_eq!(found, Some(seq));
                    }

                    rounds.fetch_add(1, std::sync::atomic::Ordering::Release);
                    if finished {
                        break;
                    }
                }
            });
        }
    });
    assert_eq!(mem.len(), entries as usize);
}
