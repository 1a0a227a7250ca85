//! Micro-benchmarks of the engine's inner pieces: bloom filter probes (both layouts), block
//! seeks (an index block with and without the index's restart-key integers, and data blocks),
//! memtable inserts and the merging iterator. `cargo bench -p shale --bench micro`; a filter
//! such as `-- bloom` runs one group.
//!
//! These compare variants of one piece on one machine, to see where a change moves. They are
//! not performance claims: those come from shale-bench runs beside the baseline engines
//! (`docs/benchmarks.md`).

use std::hint::black_box;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use shale::iter::{InternalIterator, MergingIterator};
use shale::key::{make_internal_key, InternalKeyComparator, ValueKind};
use shale::memtable::MemTable;
use shale::sstable::block::{Block, BlockBuilder, BlockIter};
use shale::sstable::filter::{BloomFilter, BloomFilterBuilder, FilterLayout};
use shale::BytewiseComparator;

/// db_bench's keys: the number in decimal, zero-padded to 16 bytes.
fn user_key(i: u64) -> Vec<u8> {
    format!("{i:016}").into_bytes()
}

fn icmp() -> InternalKeyComparator {
    InternalKeyComparator::new(Arc::new(BytewiseComparator))
}

/// One million keys at 10 bits each: a filter larger than the CPU's L2 cache, as a table's
/// filters together are in a database of that size.
fn bloom(c: &mut Criterion) {
    let n = 1_000_000u64;
    let mut builder = BloomFilterBuilder::new(10);
    for i in 0..n {
        builder.add_key(&user_key(i * 2));
    }
    let whole = builder.finish_whole();
    let layouts = [
        ("blocked", FilterLayout::Blocked, builder.finish().to_vec()),
        ("whole", FilterLayout::Whole, whole),
    ];
    let mut rng = StdRng::seed_from_u64(1);
    let probes: Vec<Vec<u8>> = (0..4096)
        .map(|_| user_key(rng.gen_range(0..2 * n)))
        .collect();
    let mut group = c.benchmark_group("bloom");
    for (name, layout, bytes) in &layouts {
        let filter = match BloomFilter::from_bytes(bytes, *layout) {
            Ok(filter) => filter,
            Err(m) => panic!("{name} filter: {m}"),
        };
        group.bench_function(format!("{name}/probe_4096"), |b| {
            b.iter(|| {
                probes
                    .iter()
                    .filter(|k| filter.may_contain(black_box(k)))
                    .count()
            })
        });
    }
    // A table builder's share: hashing 200,000 keys (a 4 MiB table of 8-byte values holds
    // about that many) into the builder's chunked log, then setting the filter's bits.
    let keys: Vec<Vec<u8>> = (0..200_000u64).map(|i| user_key(i * 2)).collect();
    group.bench_function("blocked/build_200k", |b| {
        b.iter(|| {
            let mut builder = BloomFilterBuilder::new(10);
            for k in &keys {
                builder.add_key(black_box(k));
            }
            builder.finish().len()
        })
    });
    group.finish();
}

/// An index-like block: one entry per 2 KiB data block of a 1M-key table set, restart
/// interval 8, as tables are written.
fn block_seek(c: &mut Criterion) {
    let entries = 4000u64;
    let mut builder = BlockBuilder::new(8);
    for i in 0..entries {
        builder.add(
            &make_internal_key(&user_key(i * 17), u64::MAX >> 8, ValueKind::Value),
            &[0u8; 6],
        );
    }
    let data = builder.finish();
    let plain = match Block::new(data.clone()) {
        Ok(block) => Arc::new(block),
        Err(m) => panic!("block: {m}"),
    };
    let with_prefixes = match Block::new(data) {
        Ok(block) => Arc::new(block.with_restart_prefixes()),
        Err(m) => panic!("block: {m}"),
    };
    let mut rng = StdRng::seed_from_u64(2);
    let targets: Vec<Vec<u8>> = (0..1024)
        .map(|_| {
            make_internal_key(
                &user_key(rng.gen_range(0..entries * 17)),
                5,
                ValueKind::Value,
            )
        })
        .collect();
    let mut group = c.benchmark_group("block_seek");
    for (name, block) in [("plain", &plain), ("restart_prefixes", &with_prefixes)] {
        group.bench_function(format!("{name}/seek_1024"), |b| {
            b.iter(|| {
                let mut found = 0usize;
                for t in &targets {
                    let mut it = BlockIter::new(block.clone(), icmp());
                    it.seek(black_box(t));
                    found += usize::from(it.valid());
                }
                found
            })
        });
    }
    group.finish();
}

/// Point-lookup seeks in data blocks as db_bench's tables hold them: 2 KiB of 16-byte keys and
/// 100-byte values, one restart point per 16 entries, each seek for a key the block holds (the
/// decompressed block of a lookup is in the CPU cache, so this is the in-block search alone).
fn data_block_seek(c: &mut Criterion) {
    let mut rng = StdRng::seed_from_u64(3);
    let mut blocks = Vec::new();
    let mut targets = Vec::new();
    for b in 0..64u64 {
        let mut keys: Vec<u64> = (0..16).map(|_| rng.gen_range(0..1_000_000)).collect();
        keys.sort_unstable();
        keys.dedup();
        let mut builder = BlockBuilder::new(16);
        for &k in &keys {
            builder.add(
                &make_internal_key(&user_key(b * 1_000_000 + k), 7, ValueKind::Value),
                &[b'v'; 100],
            );
        }
        let block = match Block::new(builder.finish()) {
            Ok(block) => Arc::new(block),
            Err(m) => panic!("block: {m}"),
        };
        for _ in 0..16 {
            let k = keys[rng.gen_range(0..keys.len())];
            let target = make_internal_key(&user_key(b * 1_000_000 + k), 9, ValueKind::Value);
            targets.push((blocks.len(), target));
        }
        blocks.push(block);
    }
    // As a lookup does: the cursor borrows the block and takes over the previous key buffer.
    let icmp = icmp();
    c.bench_function("data_block_seek/1024", |b| {
        let mut key = Vec::new();
        b.iter(|| {
            let mut found = 0usize;
            for (block, t) in &targets {
                let buffer = std::mem::take(&mut key);
                let mut it = BlockIter::with_key_buffer(&*blocks[*block], icmp.clone(), buffer);
                it.seek(black_box(t));
                found += it.value().len();
                key = it.into_key_buffer();
            }
            found
        })
    });
}

/// 100,000 inserts of 16-byte keys and 100-byte values into a fresh memtable, in order and
/// shuffled.
fn memtable_insert(c: &mut Criterion) {
    let n = 100_000u64;
    let value = [7u8; 100];
    let sequential: Vec<Vec<u8>> = (0..n).map(user_key).collect();
    let mut shuffled = sequential.clone();
    let mut rng = StdRng::seed_from_u64(3);
    for i in (1..shuffled.len()).rev() {
        shuffled.swap(i, rng.gen_range(0..=i));
    }
    let mut group = c.benchmark_group("memtable_insert");
    group.sample_size(10);
    for (name, keys) in [("sequential", &sequential), ("random", &shuffled)] {
        group.bench_function(format!("{name}/100k"), |b| {
            b.iter_batched(
                || MemTable::new(icmp()),
                |mem| {
                    for (seq, key) in keys.iter().enumerate() {
                        mem.add(seq as u64 + 1, ValueKind::Value, key, &value);
                    }
                    mem
                },
                BatchSize::LargeInput,
            )
        });
    }
    // With the memtable's key filter, sized as the database sizes it for an 8 MiB write buffer,
    // and the entries added as one batch (one writer lock).
    group.bench_function("sequential_filtered_batch/100k", |b| {
        b.iter_batched(
            || MemTable::with_key_filter(icmp(), (8 << 20) / 32),
            |mem| {
                let mut inserter = mem.inserter();
                for (seq, key) in sequential.iter().enumerate() {
                    inserter.add(seq as u64 + 1, ValueKind::Value, key, &value);
                }
                drop(inserter);
                mem
            },
            BatchSize::LargeInput,
        )
    });
    group.finish();
}

/// Full scans merging memtables: four of 25,000 keys interleaved in turn (one source leads
/// for one key at a time), and sixteen of 6,250 keys dealt at random, like the overlapping
/// level-0 tables right after a random fill, both ways.
fn merging_scan(c: &mut Criterion) {
    let build = |sources: u64, source_of: &mut dyn FnMut(u64) -> u64| -> Vec<Arc<MemTable>> {
        let mems: Vec<Arc<MemTable>> = (0..sources)
            .map(|_| Arc::new(MemTable::new(icmp())))
            .collect();
        for i in 0..100_000u64 {
            mems[source_of(i) as usize].add(i + 1, ValueKind::Value, &user_key(i), b"value");
        }
        mems
    };
    // One full scan over the merge of `sources`, forward or backward.
    let scan = |sources: &[Arc<MemTable>], backward: bool| {
        let children: Vec<Box<dyn InternalIterator>> = sources
            .iter()
            .map(|m| Box::new(m.iter()) as Box<dyn InternalIterator>)
            .collect();
        let mut it = MergingIterator::new(icmp(), children);
        if backward {
            it.seek_to_last();
        } else {
            it.seek_to_first();
        }
        let mut n = 0usize;
        while it.valid() {
            n += black_box(it.key()).len();
            if backward {
                it.prev();
            } else {
                it.next();
            }
        }
        n
    };
    let in_turn = build(4, &mut |i| i % 4);
    let mut rng = StdRng::seed_from_u64(16);
    let dealt = build(16, &mut |_| rng.gen_range(0..16));
    c.bench_function("merging_scan/4x25k", |b| b.iter(|| scan(&in_turn, false)));
    c.bench_function("merging_scan/16_random", |b| b.iter(|| scan(&dealt, false)));
    c.bench_function("merging_scan/16_random_reverse", |b| {
        b.iter(|| scan(&dealt, true))
    });
}

/// A walk of a 100,000-entry memtable filled in random order, each entry copied into a data
/// block builder as a flush does: nodes and values lie in insertion order, so each step is
/// a jump through memory.
fn memtable_flush_walk(c: &mut Criterion) {
    let n = 100_000u64;
    let value = [7u8; 100];
    let mut rng = StdRng::seed_from_u64(5);
    let mut keys: Vec<Vec<u8>> = (0..n).map(user_key).collect();
    for i in (1..keys.len()).rev() {
        keys.swap(i, rng.gen_range(0..=i));
    }
    let mem = Arc::new(MemTable::new(icmp()));
    for (seq, key) in keys.iter().enumerate() {
        mem.add(seq as u64 + 1, ValueKind::Value, key, &value);
    }
    let mut group = c.benchmark_group("memtable_flush_walk");
    group.sample_size(20);
    group.bench_function("random/100k", |b| {
        let mut builder = BlockBuilder::new(16);
        let mut out = Vec::new();
        b.iter(|| {
            builder.reset();
            let mut it = mem.iter();
            it.seek_to_first();
            let mut blocks = 0;
            while it.valid() {
                builder.add(it.key(), it.value());
                if builder.size_estimate() >= 2048 {
                    builder.finish_into(&mut out);
                    blocks += 1;
                }
                it.next();
            }
            black_box(blocks)
        })
    });
}

criterion_group!(
    benches,
    bloom,
    block_seek,
    data_block_seek,
    memtable_insert,
    memtable_flush_walk,
    merging_scan
);
criterion_main!(benches);
