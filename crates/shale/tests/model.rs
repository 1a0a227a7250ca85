//! Model-based test: seeded random histories of puts, deletes, merges, batches, reads, scans in
//! both directions with bounds, snapshots, flushes, compactions and reopens, run against a
//! `BTreeMap` oracle under several option sets (tiny buffers so that flushes and multi-level
//! compactions happen, every codec, bloom filters on and off, values separated into blob files
//! from 64 bytes, background compactions split into parts; manual ones split in every set).
//!
//! Replay a failure with `SHALE_MODEL_SEED=<seed> cargo test -p shale --test model`.
//! `SHALE_MODEL_STEPS` raises the number of operations per history (default 3000).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use shale::env::MemFs;
use shale::{Compression, Db, Options, ReadOptions, Snapshot, StringAppendOperator, WriteBatch};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn option_sets(fs: &MemFs) -> Vec<(&'static str, Options)> {
    let tiny = |compression: Compression, bloom: u32| Options {
        write_buffer_size: 8 * 1024,
        block_size: 256,
        block_restart_interval: 4,
        max_file_size: 8 * 1024,
        max_bytes_for_level_base: 32 * 1024,
        level0_file_num_compaction_trigger: 2,
        level0_slowdown_writes_trigger: 4,
        level0_stop_writes_trigger: 8,
        block_cache_capacity: 16 * 1024,
        bloom_bits_per_key: bloom,
        compression,
        merge_operator: Some(Arc::new(StringAppendOperator::new(b","))),
        fs: Arc::new(fs.clone()),
        ..Options::default()
    };
    vec![
        ("tiny-none-bloom", tiny(Compression::None, 10)),
        ("tiny-snappy-nobloom", tiny(Compression::Snappy, 0)),
        ("tiny-lz4-bloom", tiny(Compression::Lz4, 10)),
        ("tiny-zstd-bloom", tiny(Compression::Zstd(3), 6)),
        (
            // Most values live in blob files, and garbage collection relocates them often.
            "tiny-blobs",
            Options {
                min_blob_size: Some(64),
                blob_garbage_collection_threshold: 0.25,
                ..tiny(Compression::Lz4, 10)
            },
        ),
        (
            // Background compactions split into two parts that run at once.
            "tiny-subcompactions",
            Options {
                max_subcompactions: 2,
                ..tiny(Compression::Lz4, 10)
            },
        ),
        (
            "defaults",
            Options {
                merge_operator: Some(Arc::new(StringAppendOperator::new(b","))),
                fs: Arc::new(fs.clone()),
                ..Options::default()
            },
        ),
    ]
}

fn key(rng: &mut StdRng, space: u32) -> Vec<u8> {
    format!("key{:05}", rng.gen_range(0..space)).into_bytes()
}

fn value(rng: &mut StdRng) -> Vec<u8> {
    let len = match rng.gen_range(0..10) {
        0 => 0,
        1 => rng.gen_range(200..2000),
        _ => rng.gen_range(1..60),
    };
    (0..len)
        .map(|i| b'a' + ((i * 7 + len) % 26) as u8)
        .collect()
}

fn apply_merge(model: &mut Model, k: &[u8], operand: &[u8]) {
    let entry = model.entry(k.to_vec());
    match entry {
        std::collections::btree_map::Entry::Occupied(mut o) => {
            let v = o.get_mut();
            v.push(b',');
            v.extend_from_slice(operand);
        }
        std::collections::btree_map::Entry::Vacant(v) => {
            v.insert(operand.to_vec());
        }
    }
}

fn scan_model(
    model: &Model,
    lower: Option<&[u8]>,
    upper: Option<&[u8]>,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    model
        .iter()
        .filter(|(k, _)| {
            lower.is_none_or(|l| k.as_slice() >= l) && upper.is_none_or(|u| k.as_slice() < u)
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn check_scan(
    db: &Db,
    model: &Model,
    snapshot: Option<&Snapshot>,
    rng: &mut StdRng,
    space: u32,
    ctx: &str,
) {
    let lower = rng.gen_bool(0.3).then(|| key(rng, space));
    let upper = rng.gen_bool(0.3).then(|| key(rng, space));
    let want = scan_model(model, lower.as_deref(), upper.as_deref());
    let opts = ReadOptions {
        snapshot: snapshot.cloned(),
        lower_bound: lower.clone(),
        upper_bound: upper.clone(),
        ..ReadOptions::default()
    };
    let mut it = db.iter(opts);
    let mut got = Vec::new();
    if rng.gen_bool(0.5) {
        it.seek_to_first();
        while it.valid() {
            got.push((it.key().to_vec(), it.value().to_vec()));
            it.next();
        }
    } else {
        it.seek_to_last();
        while it.valid() {
            got.push((it.key().to_vec(), it.value().to_vec()));
            it.prev();
        }
        got.reverse();
    }
    it.status()
        .unwrap_or_else(|e| panic!("{ctx}: iterator error {e}"));
    assert_eq!(
        got.len(),
        want.len(),
        "{ctx}: scan [{lower:?}, {upper:?}) length"
    );
    assert_eq!(got, want, "{ctx}: scan [{lower:?}, {upper:?})");
    // A seek lands on the first key at or after the target.
    let target = key(rng, space);
    it.seek(&target);
    let first = want.iter().find(|(k, _)| k.as_slice() >= target.as_slice());
    assert_eq!(
        it.valid().then(|| it.key().to_vec()),
        first.map(|e| e.0.clone()),
        "{ctx}: seek"
    );
}

fn run_history(seed: u64, name: &str, options: Options, dir: &Path, steps: usize) {
    let ctx = format!("seed {seed} options {name}");
    let mut rng = StdRng::seed_from_u64(seed);
    let space = rng.gen_range(50..2000);
    let mut db = Db::open(dir, options.clone()).unwrap_or_else(|e| panic!("{ctx}: open: {e}"));
    let mut model = Model::new();
    let mut snapshots: Vec<(Snapshot, Model)> = Vec::new();
    let mut max_levels_used = 0;
    let mut total_compactions = 0;
    let mut total_split = 0;
    let mut total_flushes = 0;
    // One buffer for every `get_into`, so a lookup meets the previous one's value and memory.
    let mut buffer = Vec::new();
    for step in 0..steps {
        let ctx = format!("{ctx} step {step}");
        if step % 50 == 0 {
            let levels = db.stats().levels.iter().filter(|l| l.files > 0).count();
            max_levels_used = max_levels_used.max(levels);
        }
        match rng.gen_range(0..100) {
            0..=34 => {
                let (k, v) = (key(&mut rng, space), value(&mut rng));
                db.put(&k, &v).unwrap_or_else(|e| panic!("{ctx}: put: {e}"));
                model.insert(k, v);
            }
            35..=44 => {
                let k = key(&mut rng, space);
                db.delete(&k)
                    .unwrap_or_else(|e| panic!("{ctx}: delete: {e}"));
                model.remove(&k);
            }
            45..=51 => {
                let (k, v) = (key(&mut rng, space), value(&mut rng));
                db.merge(&k, &v)
                    .unwrap_or_else(|e| panic!("{ctx}: merge: {e}"));
                apply_merge(&mut model, &k, &v);
            }
            52..=57 => {
                let mut batch = WriteBatch::new();
                let mut staged = model.clone();
                for _ in 0..rng.gen_range(1..20) {
                    let k = key(&mut rng, space);
                    match rng.gen_range(0..3) {
                        0 => {
                            batch.delete(&k);
                            staged.remove(&k);
                        }
                        1 => {
                            let v = value(&mut rng);
                            batch.merge(&k, &v);
                            apply_merge(&mut staged, &k, &v);
                        }
                        _ => {
                            let v = value(&mut rng);
                            batch.put(&k, &v);
                            staged.insert(k, v);
                        }
                    }
                }
                db.write(batch)
                    .unwrap_or_else(|e| panic!("{ctx}: write batch: {e}"));
                model = staged;
            }
            58..=79 => {
                let k = key(&mut rng, space);
                let got = db.get(&k).unwrap_or_else(|e| panic!("{ctx}: get: {e}"));
                assert_eq!(got.as_ref(), model.get(&k), "{ctx}: get {k:?}");
                let found = db
                    .get_into(&k, &mut buffer)
                    .unwrap_or_else(|e| panic!("{ctx}: get_into: {e}"));
                assert_eq!(
                    found.then_some(&buffer),
                    model.get(&k),
                    "{ctx}: get_into {k:?}"
                );
                if !found {
                    assert!(buffer.is_empty(), "{ctx}: get_into of absent {k:?}");
                }
            }
            80..=83 => check_scan(&db, &model, None, &mut rng, space, &ctx),
            84..=86 => {
                if snapshots.len() < 4 {
                    snapshots.push((db.snapshot(), model.clone()));
                } else {
                    snapshots.remove(rng.gen_range(0..snapshots.len()));
                }
            }
            87..=90 => {
                if let Some(i) = (!snapshots.is_empty()).then(|| rng.gen_range(0..snapshots.len()))
                {
                    let (snap, old) = &snapshots[i];
                    let k = key(&mut rng, space);
                    let got = db
                        .get_opt(&k, &ReadOptions::at(snap))
                        .unwrap_or_else(|e| panic!("{ctx}: snapshot get: {e}"));
                    assert_eq!(got.as_ref(), old.get(&k), "{ctx}: snapshot get {k:?}");
                    let found = db
                        .get_into_opt(&k, &ReadOptions::at(snap), &mut buffer)
                        .unwrap_or_else(|e| panic!("{ctx}: snapshot get_into: {e}"));
                    let into = found.then_some(&buffer);
                    assert_eq!(into, old.get(&k), "{ctx}: snapshot get_into {k:?}");
                    check_scan(
                        &db,
                        old,
                        Some(snap),
                        &mut rng,
                        space,
                        &format!("{ctx} (snapshot)"),
                    );
                }
            }
            91..=92 => db.flush().unwrap_or_else(|e| panic!("{ctx}: flush: {e}")),
            93..=94 => {
                let a = key(&mut rng, space);
                let b = key(&mut rng, space);
                let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                db.compact_range(Some(&lo), Some(&hi))
                    .unwrap_or_else(|e| panic!("{ctx}: compact_range: {e}"));
            }
            95 => db
                .compact_range(None, None)
                .unwrap_or_else(|e| panic!("{ctx}: compact all: {e}")),
            _ => {
                // Reopen: snapshots do not survive it.
                snapshots.clear();
                let stats = db.stats();
                total_compactions += stats.compactions;
                total_split += stats.split_compactions;
                total_flushes += stats.flushes;
                drop(db);
                db =
                    Db::open(dir, options.clone()).unwrap_or_else(|e| panic!("{ctx}: reopen: {e}"));
            }
        }
    }
    // The tiny option sets must have exercised flushes and several levels, or the test proves
    // little about tables and compaction.
    let stats = db.stats();
    total_compactions += stats.compactions;
    total_split += stats.split_compactions;
    total_flushes += stats.flushes;
    eprintln!(
        "{ctx}: {total_flushes} flushes, {total_compactions} compactions ({total_split} in parts), at most {max_levels_used} levels in use, files per level at the end {:?}",
        stats.levels.iter().map(|l| l.files).collect::<Vec<_>>()
    );
    if name.starts_with("tiny") && steps >= 3000 {
        assert!(total_compactions > 0, "{ctx}: no compaction ran");
        assert!(
            max_levels_used >= 2,
            "{ctx}: at most {max_levels_used} level(s) in use"
        );
    }
    // A final full comparison, before and after a last reopen.
    let all: Vec<(Vec<u8>, Vec<u8>)> = db.range::<&[u8], _>(..).map(|r| r.expect("scan")).collect();
    assert_eq!(all, scan_model(&model, None, None), "{ctx}: final scan");
    let back: Vec<(Vec<u8>, Vec<u8>)> = db
        .range::<&[u8], _>(..)
        .rev()
        .map(|r| r.expect("scan"))
        .collect();
    assert_eq!(back.len(), model.len(), "{ctx}: final reverse scan");
    drop(snapshots);
    drop(db);
    let db = Db::open(dir, options).unwrap_or_else(|e| panic!("{ctx}: final reopen: {e}"));
    for (k, v) in &model {
        assert_eq!(
            db.get(k).expect("get").as_ref(),
            Some(v),
            "{ctx}: after reopen {k:?}"
        );
    }
}

fn seeds() -> Vec<u64> {
    match std::env::var("SHALE_MODEL_SEED") {
        Ok(s) => vec![s.parse().expect("SHALE_MODEL_SEED must be a number")],
        Err(_) => vec![1, 2, 3],
    }
}

fn steps() -> usize {
    std::env::var("SHALE_MODEL_STEPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3000)
}

#[test]
fn model_histories_on_every_option_set() {
    for seed in seeds() {
        let fs = MemFs::new();
        for (i, (name, options)) in option_sets(&fs).into_iter().enumerate() {
            let dir = PathBuf::from(format!("/model/{seed}/{i}"));
            run_history(seed * 100 + i as u64, name, options, &dir, steps());
        }
    }
}

#[test]
fn model_history_on_the_real_filesystem() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let options = Options {
        write_buffer_size: 16 * 1024,
        max_file_size: 16 * 1024,
        max_bytes_for_level_base: 64 * 1024,
        level0_file_num_compaction_trigger: 2,
        merge_operator: Some(Arc::new(StringAppendOperator::new(b","))),
        ..Options::default()
    };
    run_history(77, "posix-small", options, &tmp.path().join("db"), steps());
}

/// Enough data through tiny buffers that the tree grows four levels or more; every key is then
/// checked point-wise and by scans in both directions, across a reopen.
#[test]
fn deep_tree_matches_the_model() {
    let fs = MemFs::new();
    let options = Options {
        write_buffer_size: 8 * 1024,
        block_size: 512,
        max_file_size: 8 * 1024,
        max_bytes_for_level_base: 16 * 1024,
        max_bytes_for_level_multiplier: 4.0,
        level0_file_num_compaction_trigger: 2,
        fs: Arc::new(fs.clone()),
        ..Options::default()
    };
    let dir = Path::new("/deep");
    let mut rng = StdRng::seed_from_u64(9);
    let mut model = Model::new();
    let db = Db::open(dir, options.clone()).expect("open");
    for i in 0..30_000u32 {
        let k = format!("deep{:08}", rng.gen_range(0..20_000u32)).into_bytes();
        if i % 7 == 0 {
            db.delete(&k).expect("delete");
            model.remove(&k);
        } else {
            let v = format!("{i}-{}", "v".repeat((i % 90) as usize)).into_bytes();
            db.put(&k, &v).expect("put");
            model.insert(k, v);
        }
    }
    let levels_used = db.stats().levels.iter().filter(|l| l.files > 0).count();
    assert!(
        levels_used >= 3,
        "only {levels_used} levels in use: {}",
        db.property("shale.stats").unwrap_or_default()
    );
    drop(db);
    let db = Db::open(dir, options).expect("reopen");
    for (k, v) in &model {
        assert_eq!(db.get(k).expect("get").as_ref(), Some(v));
    }
    let forward: Vec<_> = db.range::<&[u8], _>(..).map(|r| r.expect("scan")).collect();
    assert_eq!(forward, scan_model(&model, None, None));
    let mut backward: Vec<_> = db
        .range::<&[u8], _>(..)
        .rev()
        .map(|r| r.expect("scan"))
        .collect();
    backward.reverse();
    assert_eq!(backward, forward);
}
