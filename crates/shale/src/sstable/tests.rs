//! Table-level tests: builder and reader together, on the in-memory filesystem.

use std::cmp::Ordering;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::format::{Footer, BLOCK_TRAILER_LEN, FOOTER_LEN, TABLE_FORMAT_VERSION};
use super::reader::SCAN_BLOCKS_BEFORE_BYPASS;
use super::*;
use crate::cache::BlockCache;
use crate::env::{Fs, MemFs};
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::{
    make_internal_key, parse_internal_key, user_key, BytewiseComparator, Comparator, LookupKey,
    ValueKind,
};

type Entries = Vec<(Vec<u8>, Vec<u8>)>;

const CODECS: [Compression; 4] = [
    Compression::None,
    Compression::Snappy,
    Compression::Lz4,
    Compression::Zstd(3),
];

fn icmp() -> InternalKeyComparator {
    InternalKeyComparator::new(Arc::new(BytewiseComparator))
}

fn table_opts(compression: Compression, bloom: u32, block_size: usize) -> TableOptions {
    TableOptions {
        icmp: icmp(),
        block_size,
        block_restart_interval: 4,
        bloom_bits_per_key: bloom,
        compression,
        lz4_acceleration: 1,
    }
}

fn user(i: usize) -> Vec<u8> {
    // Even numbers only: odd numbers name keys that are certainly absent.
    format!("user{:06}", i * 2).into_bytes()
}

fn absent_user(i: usize) -> Vec<u8> {
    format!("user{:06}", i * 2 + 1).into_bytes()
}

/// `n` user keys with 1..=max_versions versions each, of mixed kinds, sorted in internal order.
fn dataset(n: usize, max_versions: u64, seed: u64) -> Entries {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut out = Vec::new();
    for i in 0..n {
        let versions = rng.gen_range(1..=max_versions);
        for v in 0..versions {
            let seq = 1000 - v * 3;
            let kind = match rng.gen_range(0..4) {
                0 => ValueKind::Deletion,
                1 => ValueKind::Merge,
                _ => ValueKind::Value,
            };
            let value = if kind == ValueKind::Deletion {
                Vec::new()
            } else {
                // Repetitive values so every codec has something to compress.
                format!("v{i}.{seq}.")
                    .repeat(rng.gen_range(1..6))
                    .into_bytes()
            };
            out.push((make_internal_key(&user(i), seq, kind), value));
        }
    }
    let c = icmp();
    assert!(out
        .windows(2)
        .all(|w| c.compare(&w[0].0, &w[1].0) == Ordering::Less));
    out
}

fn write_table(fs: &MemFs, path: &Path, opts: &TableOptions, entries: &Entries) -> TableProperties {
    let file = fs.create(path).expect("create");
    let mut b = TableBuilder::new(opts.clone(), file, path.to_path_buf());
    for (k, v) in entries {
        b.add(k, v).expect("add");
    }
    assert_eq!(b.num_entries(), entries.len() as u64);
    let estimate = b.file_size();
    let props = b.finish().expect("finish");
    assert!(props.file_size >= estimate);
    assert_eq!(props.file_size, fs.file_size(path).expect("size"));
    props
}

fn open(
    fs: &MemFs,
    path: &Path,
    opts: &TableOptions,
    cache: Option<Arc<BlockCache>>,
) -> Result<Arc<TableReader>> {
    let file = fs.open_random(path)?;
    TableReader::open(opts.clone(), file, path.to_path_buf(), 1, cache).map(Arc::new)
}

/// Passes reads through and records every [`RandomAccessFile::release`] call.
struct ReleaseRecorder {
    inner: Arc<dyn crate::env::RandomAccessFile>,
    released: std::sync::Mutex<Vec<(u64, u64)>>,
}

impl crate::env::RandomAccessFile for ReleaseRecorder {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.inner.read_exact_at(offset, buf)
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn release(&self, offset: u64, len: u64) {
        self.released
            .lock()
            .expect("not poisoned")
            .push((offset, len));
    }
}

fn scan_forward(it: &mut TableIterator) -> Result<Entries> {
    let mut out = Vec::new();
    it.seek_to_first();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next();
    }
    it.status().map(|()| out)
}

/// Every entry from the last back to the first, returned in forward order.
fn scan_backward(it: &mut TableIterator) -> Result<Entries> {
    let mut out = Vec::new();
    it.seek_to_last();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.prev();
    }
    out.reverse();
    it.status().map(|()| out)
}

/// Entries `get` visits for the lookup key, stopping after the user key changes. Checks that
/// the lookup with the filter checked after the index search, or not at all, visits the same
/// entries, and that each reports whether the filter let the key through.
fn get_versions(t: &TableReader, flags: ReadFlags, ikey: &[u8]) -> Result<Entries> {
    let target = user_key(ikey).to_vec();
    let mut results = Vec::new();
    for filter in [FilterUse::First, FilterUse::Last, FilterUse::Skip] {
        let mut out = Vec::new();
        let passed = t.get_filtered(
            flags,
            ikey,
            &mut |k, v| {
                if user_key(k) != target.as_slice() {
                    return Ok(false);
                }
                out.push((k.to_vec(), v.to_vec()));
                Ok(true)
            },
            filter,
        )?;
        if filter == FilterUse::Skip {
            assert!(passed, "a skipped filter rejected the key");
        } else {
            assert_eq!(passed, t.may_contain(&target), "{filter:?}");
        }
        results.push(out);
    }
    assert_eq!(
        results[0], results[1],
        "where the filter is checked changes no answer"
    );
    assert_eq!(
        results[0], results[2],
        "a lookup without the filter finds what is there, nothing more"
    );
    let mut plain = Vec::new();
    t.get(flags, ikey, &mut |k, v| {
        if user_key(k) != target.as_slice() {
            return Ok(false);
        }
        plain.push((k.to_vec(), v.to_vec()));
        Ok(true)
    })?;
    assert_eq!(plain, results[0]);
    Ok(plain)
}

fn expected_versions(entries: &Entries, ikey: &[u8]) -> Entries {
    let c = icmp();
    let start = entries.partition_point(|(k, _)| c.compare(k, ikey) == Ordering::Less);
    entries[start..]
        .iter()
        .take_while(|(k, _)| user_key(k) == user_key(ikey))
        .cloned()
        .collect()
}

#[test]
fn round_trip_every_codec_with_and_without_bloom() {
    let entries = dataset(400, 3, 1);
    for compression in CODECS {
        for bloom in [0, 10] {
            let fs = MemFs::new();
            let path = PathBuf::from("/db/000007.sst");
            let opts = table_opts(compression, bloom, 1024);
            let props = write_table(&fs, &path, &opts, &entries);
            let t = open(&fs, &path, &opts, None).expect("open");
            let p = t.properties();
            assert_eq!(p, &props, "{compression:?}");
            assert_eq!(p.num_entries, entries.len() as u64);
            let dels = entries
                .iter()
                .filter(|(k, _)| parse_internal_key(k).expect("parse").kind == ValueKind::Deletion)
                .count();
            assert_eq!(p.num_deletions, dels as u64);
            assert!(p.num_merges > 0);
            assert_eq!(p.smallest_key, entries[0].0);
            assert_eq!(p.largest_key, entries[entries.len() - 1].0);
            assert_eq!((p.smallest_seqno, p.largest_seqno), (994, 1000));
            assert_eq!(p.compression, compression_name(compression));
            assert_eq!(p.comparator, "shale.BytewiseComparator");
            assert_eq!(p.format_version, TABLE_FORMAT_VERSION);
            assert!(p.num_data_blocks > 10);
            assert_eq!(p.filter_size > 0, bloom > 0);
            assert_eq!(t.filter().is_some(), bloom > 0);
            let raw: u64 = entries
                .iter()
                .map(|(k, v)| (k.len() + v.len()) as u64)
                .sum();
            assert_eq!(p.raw_key_bytes + p.raw_value_bytes, raw);
            if compression != Compression::None {
                assert!(p.data_size < raw / 2, "{compression:?} did not compress");
            }
            assert_eq!(t.verify().expect("verify"), entries.len() as u64);
            let index = t.index_entries().expect("index");
            assert_eq!(index.len() as u64, p.num_data_blocks);
            assert_eq!(t.meta_entries().len(), if bloom > 0 { 2 } else { 1 });

            let mut it = t.iter(ReadFlags::default());
            assert_eq!(scan_forward(&mut it).expect("scan"), entries);
            assert_eq!(scan_backward(&mut it).expect("scan"), entries);

            for i in 0..400 {
                let lk = LookupKey::new(&user(i), 1000);
                let got = get_versions(&t, ReadFlags::default(), lk.internal_key()).expect("get");
                assert_eq!(
                    got,
                    expected_versions(&entries, lk.internal_key()),
                    "user {i}"
                );
                assert!(t.may_contain(&user(i)));
            }
            let mut filtered = 0;
            for i in 0..400 {
                let lk = LookupKey::new(&absent_user(i), 1000);
                assert!(get_versions(&t, ReadFlags::default(), lk.internal_key())
                    .expect("get")
                    .is_empty());
                filtered += usize::from(!t.may_contain(&absent_user(i)));
            }
            if bloom > 0 {
                assert!(filtered > 380, "bloom filtered only {filtered} of 400");
            } else {
                assert_eq!(filtered, 0);
            }
        }
    }
}

/// Every LZ4 acceleration writes the same format: a table written faster reads back the same
/// entries through a reader that knows nothing of how it was written, and still compresses.
#[test]
fn lz4_accelerations_write_tables_that_read_back_the_same() {
    let entries = dataset(400, 3, 5);
    let raw: u64 = entries
        .iter()
        .map(|(k, v)| (k.len() + v.len()) as u64)
        .sum();
    let mut sizes = Vec::new();
    for acceleration in [1, 2, 8, 65537, u32::MAX] {
        let fs = MemFs::new();
        let path = PathBuf::from("/db/000009.sst");
        let mut opts = table_opts(Compression::Lz4, 10, 1024);
        opts.lz4_acceleration = acceleration;
        let props = write_table(&fs, &path, &opts, &entries);
        let t = open(&fs, &path, &table_opts(Compression::Lz4, 10, 1024), None).expect("open");
        assert_eq!(t.properties(), &props);
        assert!(
            props.data_size < raw,
            "acceleration {acceleration} stored {} of {raw}",
            props.data_size
        );
        assert_eq!(t.verify().expect("verify"), entries.len() as u64);
        let mut it = t.iter(ReadFlags::default());
        assert_eq!(
            scan_forward(&mut it).expect("scan"),
            entries,
            "acceleration {acceleration}"
        );
        sizes.push(props.data_size);
    }
    // Faster settings find fewer matches: the default compresses best.
    assert!(sizes.iter().all(|&s| s >= sizes[0]), "{sizes:?}");
}

/// Point lookups through a cache far smaller than the table: once the cache has filled, most
/// blocks are read for the lookup alone (turned away by admission) and some are cached on a
/// second miss; both ways, every lookup returns exactly the table's versions, and a key read
/// over and over ends up served from the cache.
#[test]
fn lookups_through_a_selective_cache_match_the_table() {
    let entries = dataset(3000, 3, 21);
    let fs = MemFs::new();
    let path = PathBuf::from("/db/selective.sst");
    let opts = table_opts(Compression::Lz4, 10, 512);
    write_table(&fs, &path, &opts, &entries);
    let cache = Arc::new(BlockCache::new(16 * 1024));
    let t = open(&fs, &path, &opts, Some(cache.clone())).expect("open");
    let mut rng = StdRng::seed_from_u64(5);
    for _ in 0..6000 {
        let i = rng.gen_range(0..3000);
        let lk = LookupKey::new(&user(i), rng.gen_range(0..1002));
        let got = get_versions(&t, ReadFlags::default(), lk.internal_key()).expect("get");
        assert_eq!(
            got,
            expected_versions(&entries, lk.internal_key()),
            "user {i}"
        );
    }
    assert!(cache.is_admission_selective(), "the cache never filled");
    assert!(cache.usage() <= cache.capacity());
    let lk = LookupKey::new(&user(1234), 1000);
    let hits = cache.hits();
    for _ in 0..3 {
        let got = get_versions(&t, ReadFlags::default(), lk.internal_key()).expect("get");
        assert_eq!(got, expected_versions(&entries, lk.internal_key()));
    }
    assert!(
        cache.hits() > hits,
        "a block read three times in a row was never cached"
    );
}

#[test]
fn get_crosses_blocks_for_many_versions() {
    let c = icmp();
    let mut entries: Entries = Vec::new();
    entries.push((
        make_internal_key(b"a", 5, ValueKind::Value),
        b"before".to_vec(),
    ));
    for seq in (1..=600u64).rev() {
        let kind = if seq % 10 == 0 {
            ValueKind::Merge
        } else {
            ValueKind::Value
        };
        entries.push((
            make_internal_key(b"hot", seq, kind),
            format!("version-{seq}").into_bytes(),
        ));
    }
    entries.push((
        make_internal_key(b"z", 5, ValueKind::Value),
        b"after".to_vec(),
    ));
    let fs = MemFs::new();
    let path = PathBuf::from("/db/hot.sst");
    let opts = table_opts(Compression::Lz4, 10, 256);
    write_table(&fs, &path, &opts, &entries);
    let t = open(&fs, &path, &opts, None).expect("open");
    assert!(t.properties().num_data_blocks > 20);
    for snapshot in [600u64, 599, 333, 17, 1] {
        let lk = LookupKey::new(b"hot", snapshot);
        let got = get_versions(&t, ReadFlags::default(), lk.internal_key()).expect("get");
        let seqs: Vec<u64> = got
            .iter()
            .map(|(k, _)| parse_internal_key(k).expect("parse").sequence)
            .collect();
        assert_eq!(seqs, (1..=snapshot).rev().collect::<Vec<_>>());
        assert_eq!(got[0].1, format!("version-{snapshot}").into_bytes());
    }
    // visit sees entries past the user key until it says stop; errors pass through unchanged.
    let mut seen = Vec::new();
    t.get(
        ReadFlags::default(),
        LookupKey::new(b"hot", 2).internal_key(),
        &mut |k, _| {
            seen.push(k.to_vec());
            Ok(user_key(k) == b"hot")
        },
    )
    .expect("get");
    assert_eq!(seen.len(), 3);
    assert_eq!(c.compare(&seen[2], &entries[601].0), Ordering::Equal);
    let err = t
        .get(
            ReadFlags::default(),
            LookupKey::new(b"hot", 2).internal_key(),
            &mut |_, _| Err(Error::InvalidArgument("stop here".into())),
        )
        .expect_err("visit error");
    assert!(matches!(err, Error::InvalidArgument(m) if m == "stop here"));
    // A lookup past every key visits nothing.
    let mut n = 0;
    t.get(
        ReadFlags::default(),
        LookupKey::new(b"zz", 9).internal_key(),
        &mut |_, _| {
            n += 1;
            Ok(true)
        },
    )
    .expect("get");
    assert_eq!(n, 0);
}

/// Random seeks and steps in both directions against a sorted Vec.
#[test]
fn iterator_matches_oracle_under_random_ops() {
    let entries = dataset(300, 4, 9);
    let c = icmp();
    for (compression, restart) in [(Compression::None, 1), (Compression::Lz4, 16)] {
        let fs = MemFs::new();
        let path = PathBuf::from("/db/oracle.sst");
        let mut opts = table_opts(compression, 10, 512);
        opts.block_restart_interval = restart;
        write_table(&fs, &path, &opts, &entries);
        let cache = Arc::new(BlockCache::new(16 * 1024));
        let t = open(&fs, &path, &opts, Some(cache)).expect("open");
        let mut it = t.iter(ReadFlags::default());
        let mut rng = StdRng::seed_from_u64(77);
        let mut pos: Option<usize> = None;
        for step in 0..4000 {
            let target = {
                let i = rng.gen_range(0..320);
                let u = if rng.gen_bool(0.5) {
                    user(i)
                } else {
                    absent_user(i)
                };
                make_internal_key(&u, rng.gen_range(990..1002), ValueKind::FOR_SEEK)
            };
            match rng.gen_range(0..8) {
                0 => {
                    it.seek_to_first();
                    pos = Some(0);
                }
                1 => {
                    it.seek_to_last();
                    pos = Some(entries.len() - 1);
                }
                2 => {
                    it.seek(&target);
                    let p =
                        entries.partition_point(|(k, _)| c.compare(k, &target) == Ordering::Less);
                    pos = (p < entries.len()).then_some(p);
                }
                3 => {
                    it.seek_for_prev(&target);
                    let p = entries
                        .partition_point(|(k, _)| c.compare(k, &target) != Ordering::Greater);
                    pos = p.checked_sub(1);
                }
                4 => {
                    // Exact seeks to existing keys, both kinds.
                    let i = rng.gen_range(0..entries.len());
                    if rng.gen_bool(0.5) {
                        it.seek(&entries[i].0);
                    } else {
                        it.seek_for_prev(&entries[i].0);
                    }
                    pos = Some(i);
                }
                5 | 6 => {
                    if let Some(p) = pos {
                        it.next();
                        pos = (p + 1 < entries.len()).then_some(p + 1);
                    }
                }
                _ => {
                    if let Some(p) = pos {
                        it.prev();
                        pos = p.checked_sub(1);
                    }
                }
            }
            it.status().expect("status");
            match pos {
                Some(p) => {
                    assert!(it.valid(), "step {step}");
                    assert_eq!(it.key(), &entries[p].0[..], "step {step}");
                    assert_eq!(it.value(), &entries[p].1[..], "step {step}");
                }
                None => assert!(!it.valid(), "step {step}"),
            }
        }
    }
}

#[test]
fn empty_table() {
    let fs = MemFs::new();
    let path = PathBuf::from("/db/empty.sst");
    let opts = table_opts(Compression::Lz4, 10, 4096);
    let props = write_table(&fs, &path, &opts, &Vec::new());
    assert_eq!((props.num_entries, props.num_data_blocks), (0, 0));
    let t = open(&fs, &path, &opts, None).expect("open");
    assert_eq!(t.verify().expect("verify"), 0);
    let mut it = t.iter(ReadFlags::default());
    assert!(scan_forward(&mut it).expect("scan").is_empty());
    it.seek_to_last();
    assert!(!it.valid());
    it.seek_for_prev(b"anything\x01\0\0\0\0\0\0\0");
    assert!(!it.valid());
    it.status().expect("status");
    assert!(!t.may_contain(b"x"));
    assert_eq!(t.approximate_offset_of(b"x\x01\0\0\0\0\0\0\0"), 0);
}

#[test]
fn cache_hits_and_fill_flag() {
    let entries = dataset(200, 2, 3);
    let fs = MemFs::new();
    let path = PathBuf::from("/db/cached.sst");
    let opts = table_opts(Compression::Snappy, 10, 1024);
    let props = write_table(&fs, &path, &opts, &entries);
    let cache = Arc::new(BlockCache::new(1 << 20));
    let t = open(&fs, &path, &opts, Some(cache.clone())).expect("open");
    let blocks = props.num_data_blocks;

    let no_fill = ReadFlags {
        verify_checksums: true,
        fill_cache: false,
        release_behind: false,
    };
    assert_eq!(scan_forward(&mut t.iter(no_fill)).expect("scan"), entries);
    assert_eq!((cache.hits(), cache.misses(), cache.len()), (0, blocks, 0));

    assert_eq!(
        scan_forward(&mut t.iter(ReadFlags::default())).expect("scan"),
        entries
    );
    assert_eq!((cache.hits(), cache.misses()), (0, 2 * blocks));
    assert_eq!(cache.len() as u64, blocks);
    assert!(cache.usage() > 0 && cache.usage() <= cache.capacity());

    assert_eq!(
        scan_forward(&mut t.iter(ReadFlags::default())).expect("scan"),
        entries
    );
    assert_eq!((cache.hits(), cache.misses()), (blocks, 2 * blocks));
    let lk = LookupKey::new(&user(100), 1000);
    // One lookup (get_versions makes three, to compare them).
    let one_lookup = |t: &TableReader| {
        t.get(ReadFlags::default(), lk.internal_key(), &mut |_, _| {
            Ok(false)
        })
        .expect("get")
    };
    one_lookup(&t);
    assert_eq!(cache.hits(), blocks + 1);

    // A second reader of another file with another cache id does not see these blocks.
    let other = TableReader::open(
        opts.clone(),
        fs.open_random(&path).expect("open"),
        path.clone(),
        2,
        Some(cache.clone()),
    )
    .expect("open");
    one_lookup(&other);
    assert_eq!(cache.hits(), blocks + 1);
}

#[test]
fn long_scans_stop_using_the_cache_and_seeks_start_over() {
    let entries = dataset(3000, 1, 11);
    let fs = MemFs::new();
    let path = PathBuf::from("/db/scanned.sst");
    let opts = table_opts(Compression::Lz4, 10, 1024);
    let props = write_table(&fs, &path, &opts, &entries);
    let streak = u64::from(SCAN_BLOCKS_BEFORE_BYPASS);
    assert!(
        props.num_data_blocks > 3 * streak,
        "{}",
        props.num_data_blocks
    );
    let cache = Arc::new(BlockCache::new(8 << 20));
    let t = open(&fs, &path, &opts, Some(cache.clone())).expect("open");

    // Forward: the block the scan starts in and the next streak - 1 go through the cache;
    // every later block is read past it.
    let mut it = t.iter(ReadFlags::default());
    assert_eq!(scan_forward(&mut it).expect("scan"), entries);
    assert_eq!((cache.misses(), cache.len() as u64), (streak, streak));
    // Scanning again finds those blocks cached and still reads the rest past the cache.
    assert_eq!(scan_forward(&mut it).expect("scan"), entries);
    assert_eq!((cache.hits(), cache.misses()), (streak, streak));

    // Backward from the end: the last `streak` blocks are new to the cache.
    assert_eq!(scan_backward(&mut it).expect("scan"), entries);
    assert_eq!(cache.len() as u64, 2 * streak);

    // A seek starts a new run: a short scan from the middle caches every block it enters.
    let middle = &entries[entries.len() / 2].0;
    it.seek(middle);
    let misses = cache.misses();
    let first = it.key().to_vec();
    let mut entered = 0;
    let mut last = first.clone();
    while it.valid() && entered < 5 {
        let before = cache.misses();
        it.next();
        if cache.misses() != before {
            entered += 1;
        }
        last = it.key().to_vec();
    }
    assert_eq!(entered, 5, "from {first:?} to {last:?}");
    assert_eq!(cache.misses(), misses + 5);
}

#[test]
fn approximate_offsets_increase() {
    let entries = dataset(300, 2, 5);
    let fs = MemFs::new();
    let path = PathBuf::from("/db/approx.sst");
    let opts = table_opts(Compression::None, 0, 1024);
    let props = write_table(&fs, &path, &opts, &entries);
    let t = open(&fs, &path, &opts, None).expect("open");
    let mut last = 0;
    for (k, _) in &entries {
        let off = t.approximate_offset_of(k);
        assert!(off >= last);
        last = off;
    }
    assert!(last > props.data_size / 2);
    let past = make_internal_key(b"zzz", 1, ValueKind::Value);
    assert_eq!(t.approximate_offset_of(&past), props.data_size);
}

#[test]
fn comparator_mismatch_is_refused() {
    struct Reverse;
    impl Comparator for Reverse {
        fn name(&self) -> &str {
            "test.Reverse"
        }
        fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
            b.cmp(a)
        }
    }
    let fs = MemFs::new();
    let path = PathBuf::from("/db/cmp.sst");
    let opts = table_opts(Compression::None, 10, 1024);
    write_table(&fs, &path, &opts, &dataset(10, 1, 1));
    let mut other = opts.clone();
    other.icmp = InternalKeyComparator::new(Arc::new(Reverse));
    let err = open(&fs, &path, &other, None).expect_err("mismatch");
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
}

#[test]
fn truncated_and_foreign_files_are_clear_errors() {
    let fs = MemFs::new();
    let path = PathBuf::from("/db/000042.sst");
    let opts = table_opts(Compression::Lz4, 10, 512);
    write_table(&fs, &path, &opts, &dataset(50, 2, 2));
    let good = fs.contents(&path).expect("contents");
    for len in (0..good.len()).step_by(7).chain([good.len() - 1]) {
        fs.set_contents(&path, good[..len].to_vec());
        let err = open(&fs, &path, &opts, None).expect_err("truncated");
        assert!(err.is_corruption(), "len {len}: {err}");
        assert!(err.to_string().contains("000042.sst"), "{err}");
    }
    fs.set_contents(&path, vec![b'x'; 4096]);
    let err = open(&fs, &path, &opts, None).expect_err("foreign");
    assert!(err.to_string().contains("magic"), "{err}");
}

/// Footers with a valid checksum but handles pointing anywhere must fail cleanly.
#[test]
fn garbage_handles_in_a_valid_footer() {
    let fs = MemFs::new();
    let path = PathBuf::from("/db/handles.sst");
    let opts = table_opts(Compression::None, 10, 512);
    write_table(&fs, &path, &opts, &dataset(50, 2, 2));
    let good = fs.contents(&path).expect("contents");
    let body = &good[..good.len() - FOOTER_LEN];
    let t = open(&fs, &path, &opts, None).expect("open");
    let real = *t.footer();
    let mut rng = StdRng::seed_from_u64(11);
    let n = body.len() as u64;
    for i in 0..500 {
        let mut pick = || match rng.gen_range(0..4) {
            0 => super::format::BlockHandle::new(rng.gen(), rng.gen()),
            1 => super::format::BlockHandle::new(rng.gen_range(0..n), rng.gen_range(0..n)),
            2 => super::format::BlockHandle::new(0, n - BLOCK_TRAILER_LEN as u64),
            _ => real.index,
        };
        let footer = Footer {
            metaindex: if i % 3 == 0 { real.metaindex } else { pick() },
            index: pick(),
            format_version: TABLE_FORMAT_VERSION,
        };
        if footer == real {
            continue;
        }
        let mut bytes = body.to_vec();
        bytes.extend_from_slice(&footer.encode());
        fs.set_contents(&path, bytes);
        if let Err(e) = open(&fs, &path, &opts, None) {
            assert!(e.is_corruption(), "{e}");
        }
    }
}

/// Flips every byte of a small table: each flip must be reported as corruption by open,
/// iteration, get or verify, and nothing may ever come back different from what was written.
#[test]
fn every_flipped_byte_is_detected() {
    let entries = dataset(40, 3, 4);
    let fs = MemFs::new();
    let path = PathBuf::from("/db/000009.sst");
    let opts = table_opts(Compression::Lz4, 10, 300);
    write_table(&fs, &path, &opts, &entries);
    let good = fs.contents(&path).expect("contents");
    assert!(
        good.len() < 6000,
        "keep the test fast: {} bytes",
        good.len()
    );
    let lookups: Vec<Vec<u8>> = (0..40)
        .step_by(5)
        .map(|i| LookupKey::new(&user(i), 1000).internal_key().to_vec())
        .collect();
    for i in 0..good.len() {
        let mut bad = good.clone();
        bad[i] ^= 1 << (i % 8);
        fs.set_contents(&path, bad);
        let mut errors: Vec<Error> = Vec::new();
        match open(&fs, &path, &opts, None) {
            Err(e) => errors.push(e),
            Ok(t) => {
                match scan_forward(&mut t.iter(ReadFlags::default())) {
                    Ok(got) => assert_eq!(got, entries, "flip at {i} changed the data"),
                    Err(e) => errors.push(e),
                }
                for lk in &lookups {
                    match get_versions(&t, ReadFlags::default(), lk) {
                        Ok(got) => assert_eq!(got, expected_versions(&entries, lk), "flip at {i}"),
                        Err(e) => errors.push(e),
                    }
                }
                if let Err(e) = t.verify() {
                    errors.push(e);
                }
                // Without checksums the data may be wrong, but nothing may panic.
                let no_verify = ReadFlags {
                    verify_checksums: false,
                    fill_cache: false,
                    release_behind: false,
                };
                let mut it = t.iter(no_verify);
                let _ = scan_forward(&mut it);
                it.seek_to_last();
                while it.valid() {
                    it.prev();
                }
            }
        }
        assert!(!errors.is_empty(), "flip at byte {i} went unnoticed");
        for e in errors {
            assert!(e.is_corruption(), "flip at {i}: {e}");
            assert!(e.to_string().contains("000009.sst"), "{e}");
        }
    }
}

/// Every bit of a sample of bytes, with verification of the whole table after open.
#[test]
fn every_bit_of_sampled_bytes_is_detected() {
    let entries = dataset(30, 2, 8);
    let fs = MemFs::new();
    let path = PathBuf::from("/db/000010.sst");
    let opts = table_opts(Compression::Zstd(1), 10, 256);
    write_table(&fs, &path, &opts, &entries);
    let good = fs.contents(&path).expect("contents");
    for i in (0..good.len()).step_by(11) {
        for bit in 0..8 {
            let mut bad = good.clone();
            bad[i] ^= 1 << bit;
            fs.set_contents(&path, bad);
            let outcome = open(&fs, &path, &opts, None).and_then(|t| {
                let got = scan_forward(&mut t.iter(ReadFlags::default()))?;
                assert_eq!(got, entries, "flip at {i}.{bit} changed the data");
                t.verify()
            });
            let err = outcome.expect_err("flip must be detected");
            assert!(err.is_corruption(), "flip at {i}.{bit}: {err}");
        }
    }
}

/// Iterators hit by a damaged block become invalid and report it, in both directions.
#[test]
fn iterator_reports_damaged_block_through_status() {
    let entries = dataset(100, 1, 6);
    let fs = MemFs::new();
    let path = PathBuf::from("/db/000011.sst");
    let opts = table_opts(Compression::None, 0, 512);
    write_table(&fs, &path, &opts, &entries);
    let t = open(&fs, &path, &opts, None).expect("open");
    let index = t.index_entries().expect("index");
    let victim = index[index.len() / 2].1;
    let mut bad = fs.contents(&path).expect("contents");
    bad[victim.offset as usize + 3] ^= 0x40;
    fs.set_contents(&path, bad);
    let t = open(&fs, &path, &opts, None).expect("open still works: data blocks load lazily");
    for backward in [false, true] {
        let mut it = t.iter(ReadFlags::default());
        let mut n = 0;
        if backward {
            it.seek_to_last();
        } else {
            it.seek_to_first();
        }
        while it.valid() {
            n += 1;
            if backward {
                it.prev();
            } else {
                it.next();
            }
        }
        assert!(n > 0 && n < entries.len());
        let err = it.status().expect_err("damage reported");
        assert!(
            err.to_string()
                .contains(&format!("offset {}", victim.offset)),
            "{err}"
        );
        // Sticky: repositioning does not hide the error.
        it.seek_to_first();
        assert!(!it.valid());
        assert!(it.status().is_err());
    }
    let err = t.verify().expect_err("verify");
    assert!(err.is_corruption());
}

#[test]
fn builder_refuses_malformed_keys() {
    let fs = MemFs::new();
    let path = PathBuf::from("/db/bad.sst");
    let opts = table_opts(Compression::None, 10, 512);
    let mut b = TableBuilder::new(opts, fs.create(&path).expect("create"), path.clone());
    assert!(matches!(
        b.add(b"short", b"v"),
        Err(Error::InvalidArgument(_))
    ));
    b.add(&make_internal_key(b"k", 1, ValueKind::Value), b"v")
        .expect("add");
    assert!(b.file_size() > 0);
    b.abandon();
}

#[test]
fn readers_are_shareable_between_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    fn assert_send<T: Send>() {}
    assert_send_sync::<TableReader>();
    assert_send_sync::<BlockCache>();
    assert_send::<TableIterator>();
    let defaults = crate::Options::default();
    assert_eq!(TableOptions::from_options(&defaults).lz4_acceleration, 1);
    assert_eq!(
        TableOptions::for_flush(&defaults).lz4_acceleration,
        defaults.flush_lz4_acceleration
    );
    let flags = ReadFlags::default();
    assert!(flags.verify_checksums && flags.fill_cache);
}

#[test]
fn expiry_properties_record_the_latest_expiry_and_permanent_entries() {
    let fs = MemFs::new();
    let opts = table_opts(Compression::Lz4, 10, 4096);
    let expiring = |expiry: u64, v: &str| {
        let mut stored = expiry.to_le_bytes().to_vec();
        stored.extend_from_slice(v.as_bytes());
        stored
    };
    // Every entry expires: the table expires as a whole at its largest expiry.
    let all: Entries = vec![
        (
            make_internal_key(b"a", 3, ValueKind::ExpiringValue),
            expiring(50, "x"),
        ),
        (
            make_internal_key(b"b", 2, ValueKind::ExpiringValue),
            expiring(u64::MAX - 7, ""),
        ),
        (
            make_internal_key(b"c", 1, ValueKind::ExpiringValue),
            expiring(9, "yy"),
        ),
    ];
    let path = PathBuf::from("/db/000001.sst");
    let p = write_table(&fs, &path, &opts, &all);
    assert_eq!((p.num_entries, p.num_expiring), (3, 3));
    assert_eq!(p.max_expiry_micros, u64::MAX - 7);
    let t = open(&fs, &path, &opts, None).expect("open");
    assert_eq!(t.properties(), &p, "the reader sees what the builder wrote");

    // A deletion, a merge operand, a plain value and a malformed expiring value never expire.
    for (kind, value) in [
        (ValueKind::Deletion, Vec::new()),
        (ValueKind::Merge, b"op".to_vec()),
        (ValueKind::Value, b"v".to_vec()),
        (ValueKind::ExpiringValue, b"short".to_vec()),
    ] {
        let mut entries = all.clone();
        entries.push((make_internal_key(b"d", 1, kind), value));
        let path = PathBuf::from("/db/000002.sst");
        let p = write_table(&fs, &path, &opts, &entries);
        assert_eq!((p.num_entries, p.num_expiring), (4, 3), "{kind:?}");
        assert_eq!(p.max_expiry_micros, u64::MAX - 7);
    }

    // No expiring entry at all.
    let path = PathBuf::from("/db/000003.sst");
    let p = write_table(&fs, &path, &opts, &dataset(20, 2, 5));
    assert_eq!((p.num_expiring, p.max_expiry_micros), (0, 0));
}

/// On the real filesystem tables are memory-mapped and blocks are decoded in place; reads must
/// agree with the copying path for every codec, and damage must still be caught.
#[test]
fn mapped_and_copied_reads_agree_and_catch_damage() {
    use crate::env::PosixFs;
    let dir = tempfile::tempdir().expect("tempdir");
    let entries = dataset(400, 2, 3);
    for compression in [
        Compression::None,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd(3),
    ] {
        let mem = MemFs::new();
        let staged = PathBuf::from("/db/000007.sst");
        let opts = table_opts(compression, 10, 512);
        let props = write_table(&mem, &staged, &opts, &entries);
        let bytes = mem.contents(&staged).expect("contents");
        let path = dir.path().join("000007.sst");
        std::fs::write(&path, &bytes).expect("write");
        for fs in [PosixFs::default(), PosixFs::without_mmap()] {
            let file = fs.open_random(&path).expect("open file");
            let t = Arc::new(
                TableReader::open(opts.clone(), file, path.clone(), 1, None).expect("open"),
            );
            assert_eq!(
                scan_forward(&mut t.iter(ReadFlags::default())).expect("scan"),
                entries
            );
        }
        // Flip one byte in the middle of the data region: every full scan must now fail with
        // a corruption naming the file, on both paths.
        let mut damaged = bytes.clone();
        let at = usize::try_from(props.data_size / 2).expect("offset");
        damaged[at] ^= 0x40;
        std::fs::write(&path, &damaged).expect("write damaged");
        for fs in [PosixFs::default(), PosixFs::without_mmap()] {
            let file = fs.open_random(&path).expect("open file");
            let t = Arc::new(
                TableReader::open(opts.clone(), file, path.clone(), 1, None).expect("open"),
            );
            let err = scan_forward(&mut t.iter(ReadFlags::default())).expect_err("damage");
            assert!(err.is_corruption(), "{compression:?}: {err}");
            assert!(err.to_string().contains("000007.sst"), "{err}");
        }
    }
}

/// A memory-mapped table's filter is read in place (no heap copy) and answers exactly as a
/// copied one; a damaged filter block is still refused when the table is opened.
#[test]
fn a_mapped_filter_is_read_in_place_and_checked() {
    use crate::env::PosixFs;
    let dir = tempfile::tempdir().expect("tempdir");
    let entries = dataset(500, 1, 3);
    let mem = MemFs::new();
    let staged = PathBuf::from("/db/000009.sst");
    let opts = table_opts(Compression::Lz4, 10, 512);
    write_table(&mem, &staged, &opts, &entries);
    let bytes = mem.contents(&staged).expect("contents");
    let path = dir.path().join("000009.sst");
    std::fs::write(&path, &bytes).expect("write");
    let open = |fs: &PosixFs| -> Result<TableReader> {
        let file = fs.open_random(&path)?;
        TableReader::open(opts.clone(), file, path.clone(), 1, None)
    };
    let mapped = open(&PosixFs::default()).expect("open mapped");
    let copied = open(&PosixFs::without_mmap()).expect("open copied");
    let (mf, cf) = (
        mapped.filter().expect("filter"),
        copied.filter().expect("filter"),
    );
    assert!(mf.is_mapped() && !cf.is_mapped());
    assert_eq!(
        (mf.num_bytes(), mf.num_probes()),
        (cf.num_bytes(), cf.num_probes())
    );
    for i in 0..500 {
        assert!(mapped.may_contain(&user(i)), "false negative for key {i}");
        assert_eq!(
            mapped.may_contain(&absent_user(i)),
            copied.may_contain(&absent_user(i))
        );
    }
    let filtered = (0..500)
        .filter(|&i| !mapped.may_contain(&absent_user(i)))
        .count();
    assert!(
        filtered > 450,
        "the mapped filter filtered only {filtered} of 500"
    );

    let handle = mapped
        .meta_entries()
        .iter()
        .find(|(name, _)| name.as_slice() == FILTER_BLOCK_NAME.as_bytes())
        .map(|(_, h)| *h)
        .expect("filter block");
    drop((mapped, copied));
    let mut damaged = bytes.clone();
    let at = usize::try_from(handle.offset + handle.size / 2).expect("offset");
    damaged[at] ^= 0x01;
    std::fs::write(&path, &damaged).expect("write damaged");
    for fs in [PosixFs::default(), PosixFs::without_mmap()] {
        let err = open(&fs).expect_err("a damaged filter must be refused");
        assert!(err.is_corruption(), "{err}");
        assert!(err.to_string().contains("000009.sst"), "{err}");
    }
}

#[test]
fn release_behind_gives_back_what_a_forward_scan_has_passed() {
    let fs = MemFs::new();
    let path = PathBuf::from("/release.sst");
    let opts = table_opts(Compression::None, 10, 4096);
    // About 3.5 MB of incompressible-enough values: three releases of at least 1 MiB.
    let mut rng = StdRng::seed_from_u64(7);
    let entries: Entries = (0..30_000)
        .map(|i| {
            let value: Vec<u8> = (0..110).map(|_| rng.gen()).collect();
            (make_internal_key(&user(i), 5, ValueKind::Value), value)
        })
        .collect();
    let props = write_table(&fs, &path, &opts, &entries);
    let recorder = Arc::new(ReleaseRecorder {
        inner: fs.open_random(&path).expect("open"),
        released: std::sync::Mutex::new(Vec::new()),
    });
    let table = Arc::new(
        TableReader::open(opts.clone(), recorder.clone(), path.clone(), 1, None).expect("open"),
    );
    let flags = ReadFlags {
        release_behind: true,
        ..ReadFlags::default()
    };
    assert_eq!(scan_forward(&mut table.iter(flags)).expect("scan"), entries);
    let released = recorder.released.lock().expect("not poisoned").clone();
    assert_eq!(
        released.len() as u64,
        props.data_size / RELEASE_BEHIND_BYTES,
        "{released:?}"
    );
    let mut next = 0;
    for &(offset, len) in &released {
        assert_eq!(offset, next, "ranges follow each other: {released:?}");
        assert!(len >= RELEASE_BEHIND_BYTES, "{released:?}");
        next = offset + len;
    }
    assert!(next <= props.data_size);

    // Readers that may come back (the default) release nothing.
    recorder.released.lock().expect("not poisoned").clear();
    assert_eq!(
        scan_forward(&mut table.iter(ReadFlags::default())).expect("scan"),
        entries
    );
    assert!(recorder.released.lock().expect("not poisoned").is_empty());
}

#[test]
fn point_lookups_nested_in_a_visit_see_their_own_keys() {
    // Two tables whose keys differ in length, looked up alternately and one inside the other's
    // visit: the thread's reused key buffers must never leak a key from one cursor to another.
    let fs = MemFs::new();
    let opts = table_opts(Compression::Lz4, 10, 256);
    let short = dataset(300, 2, 21);
    let long: Entries = short
        .iter()
        .map(|(k, v)| {
            let p = parse_internal_key(k).expect("valid");
            let mut user = p.user_key.to_vec();
            user.extend_from_slice(b"-with-a-much-longer-suffix");
            (make_internal_key(&user, p.sequence, p.kind), v.clone())
        })
        .collect();
    write_table(&fs, Path::new("/short.sst"), &opts, &short);
    write_table(&fs, Path::new("/long.sst"), &opts, &long);
    let a = open(&fs, Path::new("/short.sst"), &opts, None).expect("open");
    let b = open(&fs, Path::new("/long.sst"), &opts, None).expect("open");
    for i in (0..300).step_by(7) {
        let lk = LookupKey::new(&user(i), 2000);
        let mut long_user = user(i);
        long_user.extend_from_slice(b"-with-a-much-longer-suffix");
        let long_lk = LookupKey::new(&long_user, 2000);
        let mut outer = Vec::new();
        let mut inner = Vec::new();
        a.get(ReadFlags::default(), lk.internal_key(), &mut |k, v| {
            if user_key(k) != user(i).as_slice() {
                return Ok(false);
            }
            outer.push((k.to_vec(), v.to_vec()));
            inner = get_versions(&b, ReadFlags::default(), long_lk.internal_key())?;
            Ok(true)
        })
        .expect("get");
        assert_eq!(
            outer,
            expected_versions(&short, lk.internal_key()),
            "key {i}"
        );
        assert_eq!(
            inner,
            expected_versions(&long, long_lk.internal_key()),
            "key {i}"
        );
        assert_eq!(
            get_versions(&b, ReadFlags::default(), long_lk.internal_key()).expect("get"),
            inner
        );
    }
}

/// For a bit flipped at every byte after the data blocks (index, filter, properties, metaindex,
/// footer), [`TableReader::verify_file`] refuses the table exactly when [`TableReader::open`]
/// does, through a mapped and a copied file. (Both refuse on checksums here; what `open` also
/// parses, `verify_file` leaves to the checksums.)
#[test]
fn verify_file_and_open_agree_on_every_flipped_bit_after_the_data() {
    use crate::env::PosixFs;
    let dir = tempfile::tempdir().expect("tempdir");
    let entries = dataset(300, 1, 5);
    let mem = MemFs::new();
    let staged = PathBuf::from("/db/000011.sst");
    let opts = table_opts(Compression::Lz4, 10, 512);
    let props = write_table(&mem, &staged, &opts, &entries);
    let good = mem.contents(&staged).expect("contents");
    let path = dir.path().join("000011.sst");
    let data_end = usize::try_from(props.data_size).expect("size");
    let mut refused = 0;
    for flip in std::iter::once(None).chain((data_end..good.len()).map(Some)) {
        let mut bytes = good.clone();
        if let Some(i) = flip {
            bytes[i] ^= 1 << (i % 8);
        }
        std::fs::write(&path, &bytes).expect("write");
        for fs in [PosixFs::default(), PosixFs::without_mmap()] {
            let opened = TableReader::open(
                opts.clone(),
                fs.open_random(&path).expect("open file"),
                path.clone(),
                1,
                None,
            );
            let verified =
                TableReader::verify_file(fs.open_random(&path).expect("open file").as_ref(), &path);
            assert_eq!(opened.is_ok(), verified.is_ok(), "flip at {flip:?}");
            if let Err(e) = verified {
                assert!(e.is_corruption(), "flip at {flip:?}: {e}");
                assert!(e.to_string().contains("000011.sst"), "{e}");
                refused += 1;
            }
        }
    }
    // Nearly every byte there is covered by a checksum or the footer's checks.
    let flipped = 2 * (good.len() - data_end);
    assert!(
        refused * 10 >= flipped * 9,
        "{refused} of {flipped} refused"
    );
}

#[test]
fn a_key_bound_builds_a_filter_that_admits_every_key_and_is_ignored_once_keys_came() {
    let entries = dataset(2000, 3, 7);
    let users: std::collections::BTreeSet<Vec<u8>> =
        entries.iter().map(|(k, _)| user_key(k).to_vec()).collect();
    // A bound of every entry (a flush's), a bound given after the first key (ignored: the
    // filter must still admit that key), and no bound.
    for when in ["before", "after", "never"] {
        let fs = MemFs::new();
        let path = PathBuf::from("/db/000009.sst");
        let opts = table_opts(Compression::Lz4, 10, 1024);
        let file = fs.create(&path).expect("create");
        let mut b = TableBuilder::new(opts.clone(), file, path.clone());
        if when == "before" {
            b.bound_keys(entries.len());
        }
        for (i, (k, v)) in entries.iter().enumerate() {
            b.add(k, v).expect("add");
            if i == 0 && when == "after" {
                b.bound_keys(1);
            }
        }
        b.finish().expect("finish");
        let t = open(&fs, &path, &opts, None).expect("open");
        let filter = t.filter().expect("a filter");
        for u in &users {
            assert!(filter.may_contain(u), "{when}: {u:?} denied");
        }
        let fp = (0..2000)
            .filter(|&i| filter.may_contain(&absent_user(i)))
            .count();
        assert!(fp < 60, "{when}: {fp} false positives in 2,000");
    }
}
