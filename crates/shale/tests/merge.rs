//! Merge operators end to end: a merge-heavy model test against a `BTreeMap` oracle for both
//! built-in operators (string append and u64 add), operator errors, partial merges, snapshots,
//! deletions, write batches and recovery.
//!
//! Replay a model failure with `SHALE_MERGE_SEED=<seed> cargo test -p shale --test merge`.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use shale::env::MemFs;
use shale::{
    Db, Error, MergeOperator, Options, ReadOptions, Snapshot, StringAppendOperator,
    UInt64AddOperator, WriteBatch,
};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;
type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

/// The operator under test, and how the oracle applies one operand.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Append,
    Add,
}

impl Kind {
    fn operator(self) -> Arc<dyn MergeOperator> {
        match self {
            Kind::Append => Arc::new(StringAppendOperator::new(b",")),
            Kind::Add => Arc::new(UInt64AddOperator),
        }
    }

    fn apply(self, existing: Option<&Vec<u8>>, operand: &[u8]) -> Vec<u8> {
        match self {
            Kind::Append => match existing {
                Some(v) => [v.as_slice(), b",", operand].concat(),
                None => operand.to_vec(),
            },
            Kind::Add => {
                let base = existing.map_or(0, |v| u64_of(v));
                base.wrapping_add(u64_of(operand)).to_le_bytes().to_vec()
            }
        }
    }

    /// A value valid for both puts and operands of this operator.
    fn value(self, rng: &mut StdRng) -> Vec<u8> {
        match self {
            Kind::Append => {
                let len = if rng.gen_bool(0.05) {
                    rng.gen_range(100..600)
                } else {
                    rng.gen_range(0..6)
                };
                (0..len).map(|_| rng.gen_range(b'a'..=b'z')).collect()
            }
            Kind::Add => {
                let n: u64 = if rng.gen_bool(0.05) {
                    rng.gen()
                } else {
                    rng.gen_range(0..1000)
                };
                n.to_le_bytes().to_vec()
            }
        }
    }
}

fn u64_of(v: &[u8]) -> u64 {
    u64::from_le_bytes(v.try_into().expect("8-byte counter"))
}

fn small_options(fs: &MemFs, operator: Arc<dyn MergeOperator>) -> Options {
    Options {
        write_buffer_size: 4 * 1024,
        block_size: 256,
        block_restart_interval: 2,
        max_file_size: 4 * 1024,
        max_bytes_for_level_base: 16 * 1024,
        max_bytes_for_level_multiplier: 4.0,
        level0_file_num_compaction_trigger: 2,
        level0_slowdown_writes_trigger: 4,
        level0_stop_writes_trigger: 8,
        block_cache_capacity: 8 * 1024,
        merge_operator: Some(operator),
        fs: Arc::new(fs.clone()),
        ..Options::default()
    }
}

/// Every pair visible in `options`' view, walked in one direction.
fn walk(db: &Db, options: ReadOptions, backward: bool) -> shale::Result<Pairs> {
    let mut it = db.iter(options);
    let mut out = Vec::new();
    if backward {
        it.seek_to_last();
        while it.valid() {
            out.push((it.key().to_vec(), it.value().to_vec()));
            it.prev();
        }
        out.reverse();
    } else {
        it.seek_to_first();
        while it.valid() {
            out.push((it.key().to_vec(), it.value().to_vec()));
            it.next();
        }
    }
    it.status().map(|()| out)
}

fn model_pairs(model: &Model) -> Pairs {
    model.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// Checks gets of every key and scans in both directions against `model`, at `snapshot` if
/// given.
fn check_view(db: &Db, model: &Model, snapshot: Option<&Snapshot>, space: u32, ctx: &str) {
    let options = ReadOptions {
        snapshot: snapshot.cloned(),
        ..ReadOptions::default()
    };
    for i in 0..space {
        let k = key_of(i);
        let got = db
            .get_opt(&k, &options)
            .unwrap_or_else(|e| panic!("{ctx}: get {i}: {e}"));
        assert_eq!(got.as_ref(), model.get(&k), "{ctx}: get key {i}");
    }
    let want = model_pairs(model);
    for backward in [false, true] {
        let got = walk(db, options.clone(), backward)
            .unwrap_or_else(|e| panic!("{ctx}: scan (backward {backward}): {e}"));
        assert_eq!(got, want, "{ctx}: scan (backward {backward})");
    }
}

fn key_of(i: u32) -> Vec<u8> {
    format!("m{i:03}").into_bytes()
}

fn run_model(seed: u64, kind: Kind, steps: usize) {
    let ctx = format!("seed {seed} {kind:?}");
    let mut rng = StdRng::seed_from_u64(seed);
    let fs = MemFs::new();
    let dir = Path::new("/merge");
    let options = small_options(&fs, kind.operator());
    let mut db = Db::open(dir, options.clone()).expect("open");
    // A small key space: keys collect long chains of operands across every layer.
    let space = rng.gen_range(8..40);
    let mut model = Model::new();
    let mut snapshots: Vec<(Snapshot, Model)> = Vec::new();
    let (mut flushes, mut compactions) = (0, 0);
    for step in 0..steps {
        let ctx = format!("{ctx} step {step}");
        let k = key_of(rng.gen_range(0..space));
        match rng.gen_range(0..100) {
            0..=44 => {
                let v = kind.value(&mut rng);
                db.merge(&k, &v).expect("merge");
                let merged = kind.apply(model.get(&k), &v);
                model.insert(k, merged);
            }
            45..=54 => {
                let v = kind.value(&mut rng);
                db.put(&k, &v).expect("put");
                model.insert(k, v);
            }
            55..=61 => {
                db.delete(&k).expect("delete");
                model.remove(&k);
            }
            62..=67 => {
                let mut batch = WriteBatch::new();
                for _ in 0..rng.gen_range(1..8) {
                    let k = key_of(rng.gen_range(0..space));
                    let v = kind.value(&mut rng);
                    match rng.gen_range(0..6) {
                        0 => {
                            batch.delete(&k);
                            model.remove(&k);
                        }
                        1 => {
                            batch.put(&k, &v);
                            model.insert(k, v);
                        }
                        _ => {
                            batch.merge(&k, &v);
                            let merged = kind.apply(model.get(&k), &v);
                            model.insert(k, merged);
                        }
                    }
                }
                db.write(batch).expect("batch");
            }
            68..=75 => {
                let got = db.get(&k).unwrap_or_else(|e| panic!("{ctx}: get: {e}"));
                assert_eq!(got.as_ref(), model.get(&k), "{ctx}: get {k:?}");
            }
            76..=79 => {
                if snapshots.len() < 3 {
                    snapshots.push((db.snapshot(), model.clone()));
                } else {
                    snapshots.remove(rng.gen_range(0..snapshots.len()));
                }
            }
            80..=83 => {
                let backward = rng.gen_bool(0.5);
                let got = walk(&db, ReadOptions::default(), backward)
                    .unwrap_or_else(|e| panic!("{ctx}: scan: {e}"));
                assert_eq!(
                    got,
                    model_pairs(&model),
                    "{ctx}: scan (backward {backward})"
                );
            }
            84..=87 => {
                if !snapshots.is_empty() {
                    let (snap, old) = &snapshots[rng.gen_range(0..snapshots.len())];
                    check_view(&db, old, Some(snap), space, &format!("{ctx} at snapshot"));
                }
            }
            88..=91 => db.flush().expect("flush"),
            92..=94 => {
                let a = rng.gen_range(0..space);
                let b = rng.gen_range(a..space);
                db.compact_range(Some(&key_of(a)), Some(&key_of(b)))
                    .expect("compact range");
            }
            95..=96 => {
                db.compact_range(None, None).expect("compact all");
                db.wait_for_compactions().expect("wait");
            }
            _ => {
                // Snapshots belong to the handle: check them one last time, then reopen.
                for (snap, old) in &snapshots {
                    check_view(&db, old, Some(snap), space, &format!("{ctx} before reopen"));
                }
                snapshots.clear();
                let stats = db.stats();
                flushes += stats.flushes;
                compactions += stats.compactions;
                drop(db);
                db = Db::open(dir, options.clone()).expect("reopen");
                check_view(&db, &model, None, space, &format!("{ctx} after reopen"));
            }
        }
    }
    for (snap, old) in &snapshots {
        check_view(
            &db,
            old,
            Some(snap),
            space,
            &format!("{ctx} final snapshot"),
        );
    }
    check_view(&db, &model, None, space, &format!("{ctx} final"));
    let stats = db.stats();
    flushes += stats.flushes;
    compactions += stats.compactions;
    assert!(flushes > 10, "{ctx}: only {flushes} flushes");
    assert!(compactions > 5, "{ctx}: only {compactions} compactions");
}

fn seeds() -> Vec<u64> {
    match std::env::var("SHALE_MERGE_SEED") {
        Ok(s) => vec![s.parse().expect("SHALE_MERGE_SEED must be a number")],
        Err(_) => vec![11, 12, 13],
    }
}

#[test]
fn model_string_append() {
    for seed in seeds() {
        run_model(seed, Kind::Append, 2500);
    }
}

#[test]
fn model_uint64_add() {
    for seed in seeds() {
        run_model(seed + 1000, Kind::Add, 2500);
    }
}

/// Appends like `StringAppendOperator` but refuses the operand `bad` (unless `lenient`), counts
/// its calls, and combines operands with `partial_merge` only when `partial` is set. A merge
/// with the operand `huge` results in one byte more than the value limit.
struct Checked {
    lenient: bool,
    partial: bool,
    full_merges: AtomicUsize,
    partial_merges: AtomicUsize,
}

impl Checked {
    fn new(lenient: bool, partial: bool) -> Arc<Checked> {
        Arc::new(Checked {
            lenient,
            partial,
            full_merges: AtomicUsize::new(0),
            partial_merges: AtomicUsize::new(0),
        })
    }
}

impl MergeOperator for Checked {
    fn name(&self) -> &str {
        "test.checked"
    }

    fn full_merge(
        &self,
        _key: &[u8],
        existing: Option<&[u8]>,
        operands: &[&[u8]],
    ) -> Result<Vec<u8>, String> {
        self.full_merges.fetch_add(1, Ordering::SeqCst);
        if operands.contains(&&b"huge"[..]) {
            // Zeroed on allocation and never written: no memory is touched for it.
            return Ok(vec![0; shale::limits::MAX_VALUE_BYTES + 1]);
        }
        let mut parts: Vec<&[u8]> = existing.into_iter().collect();
        for op in operands {
            if *op == b"bad" {
                if !self.lenient {
                    return Err("operand \"bad\" is refused".into());
                }
                continue;
            }
            parts.push(op);
        }
        Ok(parts.join(&b","[..]))
    }

    fn partial_merge(&self, key: &[u8], operands: &[&[u8]]) -> Option<Vec<u8>> {
        if !self.partial {
            return None;
        }
        self.partial_merges.fetch_add(1, Ordering::SeqCst);
        self.full_merge(key, None, operands).ok()
    }
}

fn get_text(db: &Db, key: &str) -> Option<String> {
    db.get(key)
        .expect("get")
        .map(|v| String::from_utf8(v).expect("utf8"))
}

#[test]
fn operator_errors_reach_the_caller_and_lose_nothing() {
    let fs = MemFs::new();
    let dir = Path::new("/errors");
    let strict = Checked::new(false, false);
    let options = small_options(&fs, strict.clone());
    {
        let db = Db::open(dir, options.clone()).expect("open");
        db.put("a", "before").expect("put");
        db.put("k", "base").expect("put");
        db.flush().expect("flush");
        db.merge("k", "1").expect("merge");
        db.merge("k", "bad").expect("merge"); // accepted: operands are not checked on write
        db.flush().expect("flush");
        db.merge("k", "2").expect("merge");
        db.put("z", "after").expect("put");

        let check_errors = |db: &Db, when: &str| {
            match db.get("k") {
                Err(Error::Merge { operator, key, .. }) => {
                    assert_eq!((operator.as_str(), key.as_str()), ("test.checked", "k"));
                }
                other => panic!("{when}: expected a merge error, got {other:?}"),
            }
            for backward in [false, true] {
                let err =
                    walk(db, ReadOptions::default(), backward).expect_err("the scan meets the key");
                assert!(matches!(err, Error::Merge { .. }), "{when}: {err}");
            }
            let range: Vec<_> = db.range::<&[u8], _>(..).collect();
            assert!(matches!(range.last(), Some(Err(Error::Merge { .. }))));
            // Other keys are unaffected.
            assert_eq!(get_text(db, "a").as_deref(), Some("before"));
            assert_eq!(get_text(db, "z").as_deref(), Some("after"));
        };
        check_errors(&db, "before compaction");
        db.flush().expect("flush");
        db.compact_range(None, None)
            .expect("a failed merge does not fail compaction");
        db.wait_for_compactions().expect("wait");
        assert!(strict.full_merges.load(Ordering::SeqCst) > 0);
        check_errors(&db, "after compaction");
    }
    // Reopened with an operator that skips the bad operand, every other operand is there.
    let lenient = Checked::new(true, false);
    let db = Db::open(dir, small_options(&fs, lenient)).expect("reopen");
    assert_eq!(get_text(&db, "k").as_deref(), Some("base,1,2"));
    db.compact_range(None, None).expect("compact");
    assert_eq!(get_text(&db, "k").as_deref(), Some("base,1,2"));
}

/// A merge result larger than a user may write is not written by compaction: the operands
/// stay, so the compaction succeeds (a block that large would fail every read, and the job
/// would fail again after every reopen) and reads still compute the value.
#[test]
fn compaction_keeps_the_operands_of_a_merge_result_over_the_value_limit() {
    let fs = MemFs::new();
    let op = Checked::new(false, true);
    let db = Db::open(Path::new("/oversized"), small_options(&fs, op.clone())).expect("open");
    db.put("k", "base").expect("put");
    db.put("other", "x").expect("put");
    db.flush().expect("flush");
    db.merge("k", "huge").expect("merge");
    db.merge("k", "1").expect("merge");
    db.merge("other", "y").expect("merge");
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compaction succeeds");
    db.wait_for_compactions().expect("no background error");
    // `other` was folded; `k`'s operands were kept, so a read merges them again.
    let before = op.full_merges.load(Ordering::SeqCst);
    assert_eq!(get_text(&db, "other").as_deref(), Some("x,y"));
    assert_eq!(op.full_merges.load(Ordering::SeqCst), before);
    let value = db.get("k").expect("get").expect("present");
    assert_eq!(value.len(), shale::limits::MAX_VALUE_BYTES + 1);
    assert_eq!(op.full_merges.load(Ordering::SeqCst), before + 1);
    db.put("after", "z")
        .expect("the database still takes writes");
}

#[test]
fn compaction_uses_partial_merge_when_no_base_is_reachable() {
    let fs = MemFs::new();
    let op = Checked::new(true, true);
    let options = Options {
        // Compactions only when asked for.
        level0_file_num_compaction_trigger: 8,
        level0_slowdown_writes_trigger: 16,
        level0_stop_writes_trigger: 24,
        ..small_options(&fs, op.clone())
    };
    let db = Db::open(Path::new("/partial"), options).expect("open");
    // The base lands deep (level 2); operands above it in levels 1 and 0.
    db.put("k", "base").expect("put");
    db.flush().expect("flush");
    for round in 0..2 {
        for i in 0..3 {
            db.merge("k", format!("{round}.{i}")).expect("merge");
        }
        db.flush().expect("flush");
    }
    let levels: Vec<usize> = db.stats().levels.iter().map(|l| l.files).collect();
    assert_eq!(
        &levels[..3],
        &[1, 1, 1],
        "one table in each of levels 0, 1, 2"
    );
    assert_eq!(op.partial_merges.load(Ordering::SeqCst), 0);

    // Level 0 into level 1: the base is in level 2, out of reach, so the six operands become
    // one. Then level 1 into level 2 folds that operand onto the base.
    db.compact_range(None, None).expect("compact");
    assert!(op.partial_merges.load(Ordering::SeqCst) > 0);
    let expected = "base,0.0,0.1,0.2,1.0,1.1,1.2";
    assert_eq!(get_text(&db, "k").as_deref(), Some(expected));
    // Fully folded: a read applies no operands any more.
    let before = op.full_merges.load(Ordering::SeqCst);
    assert_eq!(get_text(&db, "k").as_deref(), Some(expected));
    assert_eq!(op.full_merges.load(Ordering::SeqCst), before);
}

#[test]
fn operands_collapse_onto_their_base_but_never_past_a_snapshot() {
    let fs = MemFs::new();
    let op = Checked::new(true, true);
    let options = Options {
        level0_file_num_compaction_trigger: 8,
        level0_slowdown_writes_trigger: 16,
        level0_stop_writes_trigger: 24,
        ..small_options(&fs, op.clone())
    };
    let db = Db::open(Path::new("/snap"), options).expect("open");
    db.put("k", "base").expect("put");
    db.merge("k", "1").expect("merge");
    db.flush().expect("flush");
    let s1 = db.snapshot();
    db.merge("k", "2").expect("merge");
    db.merge("k", "3").expect("merge");
    db.flush().expect("flush");
    let s2 = db.snapshot();
    db.merge("k", "4").expect("merge");
    db.delete("gone").expect("delete");
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");

    let at = |s: &Snapshot| {
        db.get_opt("k", &ReadOptions::at(s))
            .expect("get")
            .map(|v| String::from_utf8(v).expect("utf8"))
    };
    let merges = op.full_merges.load(Ordering::SeqCst);
    assert_eq!(at(&s1).as_deref(), Some("base,1"));
    assert_eq!(at(&s2).as_deref(), Some("base,1,2,3"));
    assert_eq!(get_text(&db, "k").as_deref(), Some("base,1,2,3,4"));
    assert_eq!(
        op.full_merges.load(Ordering::SeqCst),
        merges,
        "every view reads a folded value"
    );
    for backward in [false, true] {
        assert_eq!(
            walk(&db, ReadOptions::at(&s1), backward).expect("scan"),
            vec![(b"k".to_vec(), b"base,1".to_vec())]
        );
    }
    drop(s1);
    drop(s2);
    db.merge("k", "5").expect("merge");
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    assert_eq!(get_text(&db, "k").as_deref(), Some("base,1,2,3,4,5"));
}

#[test]
fn a_merge_onto_a_deleted_key_starts_from_nothing() {
    for kind in [Kind::Append, Kind::Add] {
        let fs = MemFs::new();
        let db = Db::open(Path::new("/del"), small_options(&fs, kind.operator())).expect("open");
        let v = |n: u64| match kind {
            Kind::Append => n.to_string().into_bytes(),
            Kind::Add => n.to_le_bytes().to_vec(),
        };
        // In one layer, and with the deletion in a table below the operands.
        db.put("same", v(5)).expect("put");
        db.delete("same").expect("delete");
        db.merge("same", v(7)).expect("merge");
        db.put("deep", v(5)).expect("put");
        db.delete("deep").expect("delete");
        db.flush().expect("flush");
        db.compact_range(None, None).expect("compact");
        db.merge("deep", v(7)).expect("merge");
        db.merge("never-written", v(7)).expect("merge");
        for stage in 0..3 {
            for key in ["same", "deep", "never-written"] {
                assert_eq!(
                    db.get(key).expect("get"),
                    Some(v(7)),
                    "{kind:?} {key} stage {stage}"
                );
            }
            let all = walk(&db, ReadOptions::default(), true).expect("scan");
            assert_eq!(all.len(), 3);
            match stage {
                0 => db.flush().expect("flush"),
                _ => db.compact_range(None, None).expect("compact"),
            }
        }
    }
}

#[test]
fn write_batch_merges_apply_in_order_and_survive_recovery() {
    let fs = MemFs::new();
    let dir = Path::new("/batch");
    let options = small_options(&fs, Arc::new(StringAppendOperator::new(b",")));
    {
        let db = Db::open(dir, options.clone()).expect("open");
        let mut batch = WriteBatch::new();
        batch.merge("k", "a");
        batch.put("k", "p");
        batch.merge("k", "b");
        batch.merge("k", "c");
        batch.merge("j", "x");
        batch.delete("j");
        batch.merge("j", "y");
        batch.merge("only-merges", "1");
        batch.merge("only-merges", "2");
        db.write(batch).expect("write");
        assert_eq!(get_text(&db, "k").as_deref(), Some("p,b,c"));
        assert_eq!(get_text(&db, "j").as_deref(), Some("y"));
        // Dropped without a flush: the batch lives only in the WAL.
    }
    let db = Db::open(dir, options.clone()).expect("reopen");
    assert_eq!(get_text(&db, "k").as_deref(), Some("p,b,c"));
    assert_eq!(get_text(&db, "j").as_deref(), Some("y"));
    assert_eq!(get_text(&db, "only-merges").as_deref(), Some("1,2"));
    db.merge("only-merges", "3").expect("merge");
    db.flush().expect("flush");
    drop(db);
    let db = Db::open(dir, options).expect("reopen");
    db.merge("only-merges", "4").expect("merge");
    assert_eq!(get_text(&db, "only-merges").as_deref(), Some("1,2,3,4"));
    db.compact_range(None, None).expect("compact");
    assert_eq!(get_text(&db, "only-merges").as_deref(), Some("1,2,3,4"));
    assert_eq!(
        walk(&db, ReadOptions::default(), true).expect("scan"),
        vec![
            (b"j".to_vec(), b"y".to_vec()),
            (b"k".to_vec(), b"p,b,c".to_vec()),
            (b"only-merges".to_vec(), b"1,2,3,4".to_vec()),
        ]
    );
}

#[test]
fn merge_without_an_operator_is_refused() {
    let fs = MemFs::new();
    let options = Options {
        fs: Arc::new(fs.clone()),
        ..Options::default()
    };
    let db = Db::open(Path::new("/none"), options).expect("open");
    assert!(matches!(db.merge("k", "v"), Err(Error::InvalidArgument(_))));
    let mut batch = WriteBatch::new();
    batch.put("a", "1");
    batch.merge("k", "v");
    assert!(matches!(db.write(batch), Err(Error::InvalidArgument(_))));
    assert_eq!(
        db.get("a").expect("get"),
        None,
        "the batch is all or nothing"
    );
}
