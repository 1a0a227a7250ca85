//! Expiry by TTL and compaction filters, end to end: the semantics table of `docs/ttl.md`, one
//! test per row and more, with time driven by a `ManualClock` (no test sleeps), on the
//! in-memory filesystem.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use shale::env::{Clock, ManualClock, MemFs};
use shale::{
    CompactionFilter, Compression, Db, FilterDecision, Options, ReadOptions, StringAppendOperator,
    WriteBatch,
};

/// 2023-11-14 in microseconds since the epoch: a realistic 64-bit starting time.
const T0: u64 = 1_700_000_000_000_000;
const SECOND: u64 = 1_000_000;

type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

struct Env {
    fs: MemFs,
    clock: Arc<ManualClock>,
}

impl Env {
    fn new() -> Env {
        Env {
            fs: MemFs::new(),
            clock: Arc::new(ManualClock::new(T0)),
        }
    }

    fn options(&self, default_ttl: Option<Duration>) -> Options {
        Options {
            fs: Arc::new(self.fs.clone()),
            clock: self.clock.clone(),
            default_ttl,
            merge_operator: Some(Arc::new(StringAppendOperator::new(b","))),
            // Table sizes measure reclaimed space; compression would hide the values' bytes.
            compression: Compression::None,
            ..Options::default()
        }
    }

    fn open(&self, default_ttl: Option<Duration>) -> Db {
        Db::open(Path::new("/db"), self.options(default_ttl)).expect("open")
    }

    fn open_with(&self, options: Options) -> Db {
        Db::open(Path::new("/db"), options).expect("open")
    }

    fn advance_secs(&self, secs: u64) {
        self.clock.advance(secs * SECOND);
    }
}

fn get(db: &Db, key: &str) -> Option<String> {
    db.get(key)
        .expect("get")
        .map(|v| String::from_utf8(v).expect("utf8"))
}

fn get_at(db: &Db, key: &str, snapshot: &shale::Snapshot) -> Option<String> {
    db.get_opt(key, &ReadOptions::at(snapshot))
        .expect("get")
        .map(|v| String::from_utf8(v).expect("utf8"))
}

/// Every pair in `options`' view, walked forward with `next` and backward with `prev`; the
/// two walks must agree.
fn scan(db: &Db, options: ReadOptions) -> Pairs {
    let mut it = db.iter(options);
    let mut forward = Vec::new();
    it.seek_to_first();
    while it.valid() {
        forward.push((it.key().to_vec(), it.value().to_vec()));
        it.next();
    }
    it.status().expect("forward scan");
    let mut backward = Vec::new();
    it.seek_to_last();
    while it.valid() {
        backward.push((it.key().to_vec(), it.value().to_vec()));
        it.prev();
    }
    it.status().expect("backward scan");
    backward.reverse();
    assert_eq!(forward, backward, "both directions see the same keys");
    forward
}

fn keys(pairs: &Pairs) -> Vec<String> {
    pairs
        .iter()
        .map(|(k, _)| String::from_utf8(k.clone()).expect("utf8"))
        .collect()
}

fn total_sst_bytes(db: &Db) -> u64 {
    let from_levels: u64 = db.stats().levels.iter().map(|l| l.bytes).sum();
    let property: u64 = db
        .property("shale.total-sst-size")
        .expect("property")
        .parse()
        .expect("number");
    assert_eq!(from_levels, property);
    property
}

fn table_files(db: &Db) -> usize {
    db.stats().levels.iter().map(|l| l.files).sum()
}

/// Where the key's newest version lives when a check runs.
#[derive(Debug, Clone, Copy)]
enum Stage {
    Memtable,
    Table,
    Compacted,
}

const STAGES: [Stage; 3] = [Stage::Memtable, Stage::Table, Stage::Compacted];

fn reach(db: &Db, stage: Stage) {
    match stage {
        Stage::Memtable => {}
        Stage::Table => db.flush().expect("flush"),
        Stage::Compacted => {
            db.flush().expect("flush");
            db.compact_range(None, None).expect("compact");
        }
    }
}

#[test]
fn expiry_is_exact_at_the_boundary_in_every_layer() {
    for stage in STAGES {
        let env = Env::new();
        let db = env.open(None);
        let expiry = T0 + 10 * SECOND;
        let mut batch = WriteBatch::new();
        batch.put_with_expiry("k", "v", expiry);
        batch.put("other", "o");
        db.write(batch).expect("write");
        db.put_with_ttl("ttl", "t", Duration::from_secs(10))
            .expect("put");
        reach(&db, stage);

        env.clock.set(expiry - 1);
        assert_eq!(
            get(&db, "k").as_deref(),
            Some("v"),
            "{stage:?}: one µs before"
        );
        assert_eq!(
            get(&db, "ttl").as_deref(),
            Some("t"),
            "{stage:?}: now + ttl"
        );
        assert_eq!(
            keys(&scan(&db, ReadOptions::default())),
            ["k", "other", "ttl"]
        );
        // Compaction just before the boundary keeps the entries.
        db.compact_range(None, None).expect("compact");
        assert_eq!(get(&db, "k").as_deref(), Some("v"), "{stage:?}");

        env.clock.set(expiry);
        assert_eq!(get(&db, "k"), None, "{stage:?}: gone at now == expiry");
        assert_eq!(get(&db, "ttl"), None, "{stage:?}");
        assert_eq!(keys(&scan(&db, ReadOptions::default())), ["other"]);
    }
}

#[test]
fn expiries_are_64_bit_and_survive_reopen() {
    let env = Env::new();
    // Past 2038 and past 2106 (32-bit seconds), and the largest time there is.
    let year_2100 = 4_102_444_800 * SECOND;
    {
        let db = env.open(None);
        let mut batch = WriteBatch::new();
        batch.put_with_expiry("far", "f", year_2100);
        batch.put_with_expiry("never", "n", u64::MAX);
        batch.put_with_expiry("soon", "s", T0 + SECOND);
        db.write(batch).expect("write");
        db.put_with_ttl("huge-ttl", "h", Duration::MAX)
            .expect("saturates");
        db.flush().expect("flush");
        // These stay in the WAL only.
        db.put_with_ttl("wal-soon", "w", Duration::from_secs(1))
            .expect("put");
        db.put_with_ttl("wal-later", "l", Duration::from_secs(100))
            .expect("put");
    }
    let db = env.open(None);
    assert_eq!(
        keys(&scan(&db, ReadOptions::default())),
        ["far", "huge-ttl", "never", "soon", "wal-later", "wal-soon"]
    );
    env.advance_secs(1);
    assert_eq!(
        keys(&scan(&db, ReadOptions::default())),
        ["far", "huge-ttl", "never", "wal-later"]
    );
    drop(db);
    env.clock.set(year_2100 - 1);
    let db = env.open(None);
    assert_eq!(
        keys(&scan(&db, ReadOptions::default())),
        ["far", "huge-ttl", "never"]
    );
    env.clock.set(year_2100);
    assert_eq!(
        keys(&scan(&db, ReadOptions::default())),
        ["huge-ttl", "never"]
    );
    db.compact_range(None, None).expect("compact");
    db.wait_for_compactions().expect("wait");
    env.clock.set(u64::MAX - 1);
    assert_eq!(
        keys(&scan(&db, ReadOptions::default())),
        ["huge-ttl", "never"]
    );
}

#[test]
fn overwriting_replaces_value_and_expiry() {
    for stage in STAGES {
        let env = Env::new();
        let db = env.open(None);
        db.put_with_ttl("longer", "1", Duration::from_secs(10))
            .expect("put");
        db.put_with_ttl("shorter", "1", Duration::from_secs(100))
            .expect("put");
        db.put_with_ttl("permanent", "1", Duration::from_secs(10))
            .expect("put");
        db.put("gets-ttl", "1").expect("put");
        // The old versions may sit in a table below the new ones.
        reach(&db, stage);
        db.put_with_ttl("longer", "2", Duration::from_secs(100))
            .expect("put");
        db.put_with_ttl("shorter", "2", Duration::from_secs(10))
            .expect("put");
        db.put("permanent", "2").expect("put");
        db.put_with_ttl("gets-ttl", "2", Duration::from_secs(10))
            .expect("put");
        reach(&db, stage);

        env.advance_secs(50);
        assert_eq!(get(&db, "longer").as_deref(), Some("2"), "{stage:?}");
        assert_eq!(
            get(&db, "shorter"),
            None,
            "{stage:?}: the old value stays hidden"
        );
        assert_eq!(get(&db, "permanent").as_deref(), Some("2"), "{stage:?}");
        assert_eq!(
            get(&db, "gets-ttl"),
            None,
            "{stage:?}: not the older permanent one"
        );
        db.compact_range(None, None).expect("compact");
        db.wait_for_compactions().expect("wait");
        assert_eq!(get(&db, "shorter"), None, "{stage:?}: after compaction too");
        assert_eq!(get(&db, "gets-ttl"), None, "{stage:?}");
        env.advance_secs(1000);
        assert_eq!(
            keys(&scan(&db, ReadOptions::default())),
            ["permanent"],
            "{stage:?}"
        );
    }
}

#[test]
fn delete_removes_a_key_whatever_its_expiry() {
    for stage in STAGES {
        let env = Env::new();
        let db = env.open(None);
        db.put_with_ttl("k", "v", Duration::from_secs(100))
            .expect("put");
        db.put_with_ttl("j", "v", Duration::from_secs(100))
            .expect("put");
        reach(&db, stage);
        db.delete("k").expect("delete");
        assert_eq!(get(&db, "k"), None, "{stage:?}: before the expiry");
        reach(&db, stage);
        assert_eq!(get(&db, "k"), None, "{stage:?}");
        assert_eq!(keys(&scan(&db, ReadOptions::default())), ["j"]);
        // Writing it again with a TTL starts over.
        db.put_with_ttl("k", "again", Duration::from_secs(10))
            .expect("put");
        env.advance_secs(5);
        assert_eq!(get(&db, "k").as_deref(), Some("again"));
        env.advance_secs(5);
        assert_eq!(get(&db, "k"), None);
        db.compact_range(None, None).expect("compact");
        assert_eq!(get(&db, "k"), None);
        // Deleting an expired key is fine and changes nothing visible.
        db.delete("k").expect("delete");
        assert_eq!(keys(&scan(&db, ReadOptions::default())), ["j"]);
    }
}

#[test]
fn iteration_skips_expired_keys_in_both_directions_with_bounds() {
    let env = Env::new();
    let db = Db::open(
        Path::new("/db"),
        Options {
            write_buffer_size: 8 * 1024,
            ..env.options(None)
        },
    )
    .expect("open");
    // Key i expires after (i % 4) * 10 seconds; i % 4 == 0 never expires. Spread over
    // tables of several levels and the memtable, with older permanent versions underneath
    // some of the expiring ones.
    let key = |i: usize| format!("k{i:03}");
    for i in (0..120).step_by(3) {
        db.put(key(i), "old").expect("put");
    }
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    for i in 0..120 {
        let ttl = (i % 4) as u64 * 10;
        let value = format!("v{i}");
        if ttl == 0 {
            db.put(key(i), &value).expect("put");
        } else {
            db.put_with_ttl(key(i), &value, Duration::from_secs(ttl))
                .expect("put");
        }
        if i % 40 == 39 {
            db.flush().expect("flush");
        }
    }
    let live_at = |secs: u64| -> Vec<String> {
        (0..120)
            .filter(|i| i % 4 == 0 || (i % 4) as u64 * 10 > secs)
            .map(key)
            .collect()
    };
    for elapsed in [0u64, 10, 20, 30] {
        env.clock.set(T0 + elapsed * SECOND);
        let want = live_at(elapsed);
        assert_eq!(
            keys(&scan(&db, ReadOptions::default())),
            want,
            "at +{elapsed}s"
        );
        // Bounds: [k030, k090).
        let bounded = ReadOptions {
            lower_bound: Some(b"k030".to_vec()),
            upper_bound: Some(b"k090".to_vec()),
            ..ReadOptions::default()
        };
        let want_bounded: Vec<String> = want
            .iter()
            .filter(|k| k.as_str() >= "k030" && k.as_str() < "k090")
            .cloned()
            .collect();
        assert_eq!(keys(&scan(&db, bounded.clone())), want_bounded);
        // Seeks land on the nearest live key in each direction.
        let mut it = db.iter(bounded);
        for target in ["k031", "k045", "k088", "k000", "k200"] {
            it.seek(target.as_bytes());
            let next = want_bounded.iter().find(|k| k.as_str() >= target);
            assert_eq!(
                it.valid()
                    .then(|| String::from_utf8_lossy(it.key()).into_owned()),
                next.cloned(),
                "seek {target} at +{elapsed}s"
            );
            it.seek_for_prev(target.as_bytes());
            let prev = want_bounded.iter().rev().find(|k| k.as_str() <= target);
            assert_eq!(
                it.valid()
                    .then(|| String::from_utf8_lossy(it.key()).into_owned()),
                prev.cloned(),
                "seek_for_prev {target} at +{elapsed}s"
            );
        }
        it.status().expect("status");
        // The Rust ranges agree, forward and reversed.
        let range: Vec<String> = db
            .range("k010".."k100")
            .map(|r| String::from_utf8(r.expect("range").0).expect("utf8"))
            .collect();
        let mut reversed: Vec<String> = db
            .range("k010".."k100")
            .rev()
            .map(|r| String::from_utf8(r.expect("range").0).expect("utf8"))
            .collect();
        reversed.reverse();
        let want_range: Vec<String> = want
            .iter()
            .filter(|k| k.as_str() >= "k010" && k.as_str() < "k100")
            .cloned()
            .collect();
        assert_eq!(range, want_range);
        assert_eq!(reversed, want_range);
        // Values are the newest ones, never the older permanent versions.
        for (k, v) in scan(&db, ReadOptions::default()) {
            let i: usize = String::from_utf8_lossy(&k[1..]).parse().expect("index");
            assert_eq!(v, format!("v{i}").into_bytes());
        }
    }
}

#[test]
fn a_snapshot_taken_before_expiry_does_not_see_expired_entries() {
    for stage in STAGES {
        let env = Env::new();
        let db = env.open(None);
        db.put("k", "permanent").expect("put");
        let before_ttl = db.snapshot();
        db.put_with_ttl("k", "expiring", Duration::from_secs(10))
            .expect("put");
        db.put_with_ttl("j", "expiring", Duration::from_secs(10))
            .expect("put");
        let before_expiry = db.snapshot();
        reach(&db, stage);
        assert_eq!(
            get_at(&db, "k", &before_expiry).as_deref(),
            Some("expiring")
        );

        env.advance_secs(10);
        // Expiry is judged at the time of the read, also at a snapshot.
        assert_eq!(get_at(&db, "k", &before_expiry), None, "{stage:?}");
        assert_eq!(get_at(&db, "j", &before_expiry), None, "{stage:?}");
        assert!(scan(&db, ReadOptions::at(&before_expiry)).is_empty());
        // The expired value hides the older one from later reads; an older snapshot that
        // never saw the expiring write still reads the permanent value.
        assert_eq!(get(&db, "k"), None, "{stage:?}");
        assert_eq!(get_at(&db, "k", &before_ttl).as_deref(), Some("permanent"));
        db.compact_range(None, None).expect("compact");
        db.wait_for_compactions().expect("wait");
        assert_eq!(get(&db, "k"), None, "{stage:?}: compaction keeps it hidden");
        assert_eq!(get_at(&db, "k", &before_ttl).as_deref(), Some("permanent"));
        assert_eq!(
            scan(&db, ReadOptions::at(&before_ttl)),
            vec![(b"k".to_vec(), b"permanent".to_vec())]
        );
        drop(before_ttl);
        drop(before_expiry);
        db.compact_range(None, None).expect("compact");
        assert_eq!(get(&db, "k"), None);
        assert!(scan(&db, ReadOptions::default()).is_empty());
    }
}

#[test]
fn merge_operands_outlive_the_expiry_of_their_base() {
    for stage in STAGES {
        let env = Env::new();
        let db = env.open(None);
        db.put_with_ttl("k", "base", Duration::from_secs(10))
            .expect("put");
        reach(&db, stage);
        db.merge("k", "a").expect("merge");
        reach(&db, stage);
        db.merge("k", "b").expect("merge");
        assert_eq!(get(&db, "k").as_deref(), Some("base,a,b"), "{stage:?}");
        // Compacting while the base is live must not fold the operands into it.
        db.compact_range(None, None).expect("compact");
        assert_eq!(get(&db, "k").as_deref(), Some("base,a,b"), "{stage:?}");

        env.advance_secs(10);
        // The base is gone; the operands apply to nothing, in every read path.
        assert_eq!(get(&db, "k").as_deref(), Some("a,b"), "{stage:?}");
        assert_eq!(
            scan(&db, ReadOptions::default()),
            vec![(b"k".to_vec(), b"a,b".to_vec())]
        );
        db.compact_range(None, None).expect("compact");
        db.wait_for_compactions().expect("wait");
        assert_eq!(get(&db, "k").as_deref(), Some("a,b"), "{stage:?}");
        // A merge onto an expired value starts from nothing, and the result never expires.
        db.merge("k", "c").expect("merge");
        db.put_with_ttl("fresh", "x", Duration::from_secs(1))
            .expect("put");
        env.advance_secs(1);
        db.merge("fresh", "y").expect("merge");
        reach(&db, stage);
        env.advance_secs(1_000_000);
        assert_eq!(get(&db, "k").as_deref(), Some("a,b,c"), "{stage:?}");
        assert_eq!(get(&db, "fresh").as_deref(), Some("y"), "{stage:?}");
    }
}

#[test]
fn compaction_reclaims_the_space_of_expired_entries() {
    let env = Env::new();
    let db = env.open(None);
    let value = "x".repeat(1000);
    for i in 0..200 {
        db.put_with_ttl(format!("exp{i:03}"), &value, Duration::from_secs(60))
            .expect("put");
    }
    for i in 0..20 {
        db.put(format!("keep{i:03}"), &value).expect("put");
    }
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    let before = total_sst_bytes(&db);
    assert!(before > 0);
    assert_eq!(db.stats().expired_dropped, 0);

    env.advance_secs(60);
    db.compact_range(None, None).expect("compact");
    db.wait_for_compactions().expect("wait");
    let after = total_sst_bytes(&db);
    let stats = db.stats();
    assert_eq!(stats.expired_dropped, 200);
    // Each dropped entry had a 6-byte key, an 8-byte trailer, an 8-byte expiry and the value.
    assert_eq!(stats.expired_bytes_reclaimed, 200 * (6 + 8 + 8 + 1000));
    assert!(
        after * 5 < before,
        "the table bytes went from {before} to {after}"
    );
    assert!(db
        .property("shale.stats")
        .expect("stats")
        .contains("Expired dropped: 200"));
    assert_eq!(scan(&db, ReadOptions::default()).len(), 20);
}

#[test]
fn tables_whose_entries_all_expired_go_without_other_writes() {
    let env = Env::new();
    let db = env.open(None);
    // A permanent table and, elsewhere in the key space, a table of expiring entries. Each
    // flush lands below level 0 (nothing overlaps), where no size compaction is due.
    for i in 0..50 {
        db.put(format!("a{i:03}"), "permanent").expect("put");
    }
    db.flush().expect("flush");
    for i in 0..50 {
        db.put_with_ttl(format!("z{i:03}"), "x".repeat(500), Duration::from_secs(10))
            .expect("put");
    }
    db.flush().expect("flush");
    db.wait_for_compactions().expect("nothing due yet");
    assert_eq!(table_files(&db), 2);
    let with_both = total_sst_bytes(&db);
    let compactions = db.stats().compactions;

    env.advance_secs(9);
    db.wait_for_compactions().expect("still nothing due");
    assert_eq!(table_files(&db), 2);

    env.advance_secs(1);
    let writes = db.latest_sequence();
    db.wait_for_compactions().expect("the expired table is due");
    assert_eq!(db.latest_sequence(), writes, "no write was needed");
    assert_eq!(table_files(&db), 1, "the expired table is gone");
    let stats = db.stats();
    assert_eq!(
        stats.compactions,
        compactions + 1,
        "one compaction of that table only"
    );
    assert_eq!(stats.expired_dropped, 50);
    assert!(total_sst_bytes(&db) * 5 < with_both);
    assert_eq!(scan(&db, ReadOptions::default()).len(), 50);
}

#[test]
fn expired_table_in_level_zero_and_after_reopen() {
    let env = Env::new();
    {
        let db = env.open(None);
        db.put("m", "old").expect("put");
        db.flush().expect("flush"); // to level 2: nothing overlaps
        db.put("m", "permanent").expect("put");
        db.flush().expect("flush"); // to level 1: overlaps level 2
                                    // Overlaps the level-1 table, so this one stays in level 0.
        db.put_with_ttl("a", "1", Duration::from_secs(10))
            .expect("put");
        db.put_with_ttl("z", "2", Duration::from_secs(10))
            .expect("put");
        db.flush().expect("flush");
        assert_eq!(db.stats().levels[0].files, 1);
    }
    env.advance_secs(10);
    // The expiry metadata came back from the manifest: the table is due at open.
    let db = env.open(None);
    db.wait_for_compactions().expect("wait");
    assert_eq!(db.stats().levels[0].files, 0);
    assert_eq!(db.stats().expired_dropped, 2);
    assert_eq!(get(&db, "m").as_deref(), Some("permanent"));
    assert_eq!(keys(&scan(&db, ReadOptions::default())), ["m"]);
}

#[test]
fn an_expired_table_over_older_versions_leaves_tombstones() {
    let env = Env::new();
    let db = env.open(None);
    // Level 2: the oldest versions; level 1: newer ones; level 0: expiring ones on top.
    for (value, flushed_to) in [("oldest", 2), ("older", 1)] {
        db.put("k1", value).expect("put");
        db.put("k2", value).expect("put");
        db.flush().expect("flush");
        assert_eq!(db.stats().levels[flushed_to].files, 1);
    }
    for k in ["a", "k1", "k2", "z"] {
        db.put_with_ttl(k, "new", Duration::from_secs(1))
            .expect("put");
    }
    db.flush().expect("flush");
    assert_eq!(db.stats().levels[0].files, 1);
    env.advance_secs(1);
    // The level-0 table compacts into level 1 with the older versions; level 2 is out of
    // reach, so k1 and k2 become tombstones there instead of vanishing.
    db.wait_for_compactions().expect("wait");
    let stats = db.stats();
    assert_eq!(stats.levels[0].files, 0);
    assert_eq!(stats.levels[2].files, 1, "level 2 was not part of it");
    assert_eq!(stats.expired_dropped, 4);
    assert_eq!(
        get(&db, "k1"),
        None,
        "the oldest version must not come back"
    );
    assert_eq!(get(&db, "k2"), None);
    assert!(scan(&db, ReadOptions::default()).is_empty());
    db.compact_range(None, None).expect("compact");
    assert!(scan(&db, ReadOptions::default()).is_empty());
    assert_eq!(table_files(&db), 0, "tombstones and all are gone");
}

#[test]
fn entries_without_ttl_in_a_database_with_a_default_ttl() {
    let env = Env::new();
    {
        let db = env.open(None);
        db.put("before-default", "p").expect("put");
        db.merge("merged", "m").expect("merge");
    }
    let db = env.open(Some(Duration::from_secs(10)));
    db.put("default", "d").expect("put");
    let mut batch = WriteBatch::new();
    batch.put("batch-default", "d");
    batch.put_with_expiry("explicit", "e", T0 + 100 * SECOND);
    db.write(batch).expect("write");
    db.put_with_ttl("own-ttl", "o", Duration::from_secs(50))
        .expect("put");
    db.merge("merged", "n").expect("merge"); // operands never get an expiry
    db.flush().expect("flush");

    env.advance_secs(10);
    assert_eq!(
        keys(&scan(&db, ReadOptions::default())),
        ["before-default", "explicit", "merged", "own-ttl"]
    );
    env.advance_secs(40);
    assert_eq!(
        keys(&scan(&db, ReadOptions::default())),
        ["before-default", "explicit", "merged"]
    );
    env.advance_secs(1_000_000);
    db.compact_range(None, None).expect("compact");
    db.wait_for_compactions().expect("wait");
    assert_eq!(get(&db, "before-default").as_deref(), Some("p"));
    assert_eq!(get(&db, "merged").as_deref(), Some("m,n"));
    assert_eq!(
        keys(&scan(&db, ReadOptions::default())),
        ["before-default", "merged"]
    );
}

#[test]
fn reopening_with_another_default_ttl_affects_only_later_writes() {
    let env = Env::new();
    {
        let db = env.open(Some(Duration::from_secs(10)));
        db.put("a", "1").expect("put");
        db.flush().expect("flush");
        db.put("a-wal", "1").expect("put");
    }
    {
        let db = env.open(Some(Duration::from_secs(100)));
        db.put("b", "2").expect("put");
        env.advance_secs(50);
        assert_eq!(keys(&scan(&db, ReadOptions::default())), ["b"]);
    }
    let db = env.open(None);
    db.put("c", "3").expect("put");
    env.advance_secs(50);
    assert_eq!(keys(&scan(&db, ReadOptions::default())), ["c"]);
    env.advance_secs(1_000_000);
    assert_eq!(keys(&scan(&db, ReadOptions::default())), ["c"]);
}

/// A filter that records what it is shown and acts by key prefix: `drop:` is removed,
/// `upper:` is uppercased, everything else kept.
#[derive(Default)]
struct PrefixFilter {
    calls: AtomicUsize,
    seen: Mutex<Vec<(usize, String, String)>>,
}

impl CompactionFilter for PrefixFilter {
    fn name(&self) -> &str {
        "test.PrefixFilter"
    }

    fn filter(&self, level: usize, key: &[u8], value: &[u8]) -> FilterDecision {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let key = String::from_utf8_lossy(key).into_owned();
        let value_text = String::from_utf8_lossy(value).into_owned();
        self.seen
            .lock()
            .expect("lock")
            .push((level, key.clone(), value_text));
        if key.starts_with("drop:") {
            FilterDecision::Remove
        } else if key.starts_with("upper:") {
            FilterDecision::ChangeValue(value.to_ascii_uppercase())
        } else {
            FilterDecision::Keep
        }
    }
}

fn filtered_env(filter: &Arc<PrefixFilter>) -> (Env, Options) {
    let env = Env::new();
    let options = Options {
        compaction_filter: Some(filter.clone()),
        ..env.options(None)
    };
    (env, options)
}

#[test]
fn compaction_filter_keeps_removes_and_changes_values() {
    let filter = Arc::new(PrefixFilter::default());
    let (env, options) = filtered_env(&filter);
    let db = env.open_with(options);
    db.put("drop:1", "gone").expect("put");
    db.put("upper:1", "shout").expect("put");
    db.put_with_ttl("upper:ttl", "later", Duration::from_secs(10))
        .expect("put");
    db.put("keep:1", "same").expect("put");
    db.merge("upper:merged", "a").expect("merge");
    db.merge("upper:merged", "b").expect("merge");
    db.put("drop:2", "older").expect("put");
    db.flush().expect("flush");
    assert_eq!(
        filter.calls.load(Ordering::SeqCst),
        0,
        "a flush is not filtered"
    );
    db.compact_range(None, None).expect("compact");
    db.put("drop:2", "newer").expect("put");
    db.put("unrelated", "u").expect("put");
    db.put("unrelated2", "u").expect("put");
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    assert!(filter.calls.load(Ordering::SeqCst) > 0);

    assert_eq!(get(&db, "drop:1"), None);
    assert_eq!(get(&db, "drop:2"), None, "not the older version");
    assert_eq!(get(&db, "upper:1").as_deref(), Some("SHOUT"));
    assert_eq!(get(&db, "keep:1").as_deref(), Some("same"));
    // The filter sees merge results, not lone operands.
    assert_eq!(get(&db, "upper:merged").as_deref(), Some("A,B"));
    let seen = filter.seen.lock().expect("lock").clone();
    assert!(
        seen.iter().all(|(_, _, v)| v != "a" && v != "b"),
        "{seen:?}"
    );
    assert!(seen.iter().all(|(level, _, _)| *level >= 1));
    // ChangeValue keeps the entry's expiry.
    assert_eq!(get(&db, "upper:ttl").as_deref(), Some("LATER"));
    env.advance_secs(10);
    assert_eq!(get(&db, "upper:ttl"), None);
    let stats = db.stats();
    // drop:1, then drop:2 twice (its older version in the first compaction, the newer one in
    // the second).
    assert_eq!(stats.filtered_dropped, 3);
    assert_eq!(
        keys(&scan(&db, ReadOptions::default())),
        [
            "keep:1",
            "unrelated",
            "unrelated2",
            "upper:1",
            "upper:merged"
        ]
    );
}

#[test]
fn compaction_filter_never_touches_what_a_snapshot_reads() {
    let filter = Arc::new(PrefixFilter::default());
    let (env, options) = filtered_env(&filter);
    let db = env.open_with(options);
    db.put("drop:a", "1").expect("put");
    db.put("upper:b", "x").expect("put");
    let snapshot = db.snapshot();
    // Newer than the snapshot: the filter may judge these.
    db.put("drop:c", "2").expect("put");
    db.put("upper:b2", "y").expect("put");
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    db.put("z", "z").expect("put");
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");

    assert_eq!(get_at(&db, "drop:a", &snapshot).as_deref(), Some("1"));
    assert_eq!(get_at(&db, "upper:b", &snapshot).as_deref(), Some("x"));
    assert_eq!(get(&db, "drop:c"), None);
    assert_eq!(get(&db, "upper:b2").as_deref(), Some("Y"));
    let seen = filter.seen.lock().expect("lock").clone();
    assert!(
        seen.iter().all(|(_, k, _)| k != "drop:a" && k != "upper:b"),
        "the filter saw a version the snapshot reads: {seen:?}"
    );
    // Once the snapshot is gone, the next compaction filters them.
    drop(snapshot);
    db.compact_range(None, None).expect("compact");
    assert_eq!(get(&db, "drop:a"), None);
    assert_eq!(get(&db, "upper:b").as_deref(), Some("X"));
    assert_eq!(
        keys(&scan(&db, ReadOptions::default())),
        ["upper:b", "upper:b2", "z"]
    );
}

/// Merge operands folded by compaction are judged as the value they fold into, in the newest
/// view only: a snapshot taken between the base and its operands keeps reading the base, while
/// the latest state reads the filtered fold (changed, or removed with a tombstone over the base
/// the snapshot still needs); both directions of a scan agree with `get`.
#[test]
fn compaction_filter_judges_folded_merges_and_spares_snapshots() {
    let filter = Arc::new(PrefixFilter::default());
    let (env, options) = filtered_env(&filter);
    let db = env.open_with(options);
    db.put("drop:m", "x").expect("put");
    db.put("upper:m", "a").expect("put");
    let snapshot = db.snapshot();
    db.merge("drop:m", "y").expect("merge");
    db.merge("upper:m", "b").expect("merge");
    db.merge("upper:m", "c").expect("merge");
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");

    let check = |db: &Db, snapshot: Option<&shale::Snapshot>, want: &[(&str, &str)]| {
        let want: Pairs = want
            .iter()
            .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect();
        let options = ReadOptions {
            snapshot: snapshot.cloned(),
            ..ReadOptions::default()
        };
        // `scan` walks both directions and checks that they agree.
        assert_eq!(scan(db, options.clone()), want, "snapshot {snapshot:?}");
        for key in ["drop:m", "upper:m"] {
            let got = db.get_opt(key, &options).expect("get");
            let expected = want
                .iter()
                .find(|(k, _)| k == key.as_bytes())
                .map(|(_, v)| v.clone());
            assert_eq!(got, expected, "get {key}, snapshot {snapshot:?}");
        }
    };
    check(&db, Some(&snapshot), &[("drop:m", "x"), ("upper:m", "a")]);
    check(&db, None, &[("upper:m", "A,B,C")]);
    let seen = filter.seen.lock().expect("lock").clone();
    assert!(
        seen.iter().any(|(_, k, v)| k == "upper:m" && v == "a,b,c"),
        "the filter judged the folded value: {seen:?}"
    );
    assert!(
        seen.iter().all(|(_, _, v)| v != "a" && v != "x"),
        "the filter saw a version the snapshot reads: {seen:?}"
    );
    drop(snapshot);
    db.compact_range(None, None).expect("compact");
    check(&db, None, &[("upper:m", "A,B,C")]);
}

#[test]
fn compact_range_rewrites_the_deepest_level_only_when_it_can_change() {
    let env = Env::new();
    let db = env.open(None);
    for i in 0..20 {
        db.put(format!("p{i:02}"), "permanent").expect("put");
    }
    db.flush().expect("flush");
    let compactions = db.stats().compactions;
    db.compact_range(None, None).expect("compact");
    assert_eq!(
        db.stats().compactions,
        compactions,
        "no filter, no expiring entries: nothing to gain from rewriting the table"
    );
    // A table mixing permanent and expired entries is rewritten without the expired ones.
    for i in 0..20 {
        db.put_with_ttl(format!("t{i:02}"), "x".repeat(100), Duration::from_secs(1))
            .expect("put");
    }
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    env.advance_secs(1);
    db.wait_for_compactions().expect("wait");
    assert_eq!(
        db.stats().expired_dropped,
        0,
        "the table still holds permanent entries"
    );
    let before = total_sst_bytes(&db);
    db.compact_range(None, None).expect("compact");
    assert_eq!(db.stats().expired_dropped, 20);
    assert!(total_sst_bytes(&db) + 20 * 100 <= before);
    assert_eq!(scan(&db, ReadOptions::default()).len(), 20);
}

/// One write of the oracle's history.
#[derive(Debug, Clone)]
enum Write {
    Put(Vec<u8>),
    PutExpiring(Vec<u8>, u64),
    Delete,
    Merge(Vec<u8>),
}

/// The oracle: every write in order, with its sequence number. A read is evaluated by replaying
/// the key's writes up to the read's sequence number at the read's time, exactly as
/// `docs/ttl.md` defines it.
#[derive(Default)]
struct History {
    writes: Vec<(Vec<u8>, u64, Write)>,
}

impl History {
    fn view(&self, sequence: u64, now: u64) -> Pairs {
        let mut state: std::collections::BTreeMap<Vec<u8>, Option<Vec<u8>>> = Default::default();
        for (key, seq, write) in &self.writes {
            if *seq > sequence {
                continue;
            }
            let slot = state.entry(key.clone()).or_default();
            *slot = match write {
                Write::Put(v) => Some(v.clone()),
                Write::PutExpiring(v, expiry) => (*expiry > now).then(|| v.clone()),
                Write::Delete => None,
                Write::Merge(op) => Some(match slot.take() {
                    Some(v) => [v.as_slice(), b",", op].concat(),
                    None => op.clone(),
                }),
            };
        }
        state
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k, v)))
            .collect()
    }
}

/// A seeded history checked against [`History`]. With `blobs`, most values live in blob files
/// that garbage collection relocates often, and compactions run in two parts at once.
fn model_history(seed: u64, blobs: bool) {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let env = Env::new();
    let mut options = Options {
        write_buffer_size: 4 * 1024,
        block_size: 256,
        max_file_size: 4 * 1024,
        max_bytes_for_level_base: 16 * 1024,
        max_bytes_for_level_multiplier: 4.0,
        level0_file_num_compaction_trigger: 2,
        ..env.options(None)
    };
    if blobs {
        options.min_blob_size = Some(16);
        options.blob_garbage_collection_threshold = 0.25;
        options.max_subcompactions = 2;
    }
    let mut db = env.open_with(options.clone());
    let mut history = History::default();
    let mut snapshots: Vec<shale::Snapshot> = Vec::new();
    // Enough keys with blobs for compactions of several tables, which are what split in parts.
    let space = if blobs {
        rng.gen_range(200..400)
    } else {
        rng.gen_range(10..60)
    };
    let ctx = format!("seed {seed}, blobs {blobs}");
    let (mut expired_dropped, mut compactions, mut relocated, mut split) = (0, 0, 0, 0);
    for step in 0..2500 {
        let key = format!("key{:03}", rng.gen_range(0..space)).into_bytes();
        let value = format!("v{step}{}", "p".repeat(rng.gen_range(0..40))).into_bytes();
        let now = env.clock.now_micros();
        let write = match rng.gen_range(0..100) {
            0..=24 => {
                db.put(&key, &value).expect("put");
                Some(Write::Put(value))
            }
            25..=49 => {
                let expiry = now + rng.gen_range(0..30) * SECOND;
                let mut batch = WriteBatch::new();
                batch.put_with_expiry(&key, &value, expiry);
                db.write(batch).expect("put with expiry");
                Some(Write::PutExpiring(value, expiry))
            }
            50..=59 => {
                db.delete(&key).expect("delete");
                Some(Write::Delete)
            }
            60..=74 => {
                db.merge(&key, &value).expect("merge");
                Some(Write::Merge(value))
            }
            75..=80 => {
                env.clock.advance(rng.gen_range(0..5) * SECOND);
                None
            }
            81..=84 => {
                if snapshots.len() < 3 {
                    snapshots.push(db.snapshot());
                } else {
                    snapshots.remove(rng.gen_range(0..snapshots.len()));
                }
                None
            }
            85..=89 => {
                // Reads at the latest state and at a snapshot, by get and by scans.
                let mut views: Vec<Option<shale::Snapshot>> = vec![None];
                if !snapshots.is_empty() {
                    views.push(Some(snapshots[rng.gen_range(0..snapshots.len())].clone()));
                }
                for snapshot in views {
                    let sequence = snapshot
                        .as_ref()
                        .map_or_else(|| db.latest_sequence(), |s| s.sequence());
                    let want = history.view(sequence, now);
                    let options = ReadOptions {
                        snapshot: snapshot.clone(),
                        ..ReadOptions::default()
                    };
                    assert_eq!(
                        scan(&db, options.clone()),
                        want,
                        "{ctx} step {step} snapshot {snapshot:?}"
                    );
                    let got = db.get_opt(&key, &options).expect("get");
                    let expected = want.iter().find(|(k, _)| *k == key).map(|(_, v)| v.clone());
                    assert_eq!(got, expected, "{ctx} step {step} get {key:?}");
                }
                None
            }
            90..=92 => {
                db.flush().expect("flush");
                None
            }
            93..=95 => {
                db.compact_range(None, None).expect("compact");
                None
            }
            96..=97 => {
                db.wait_for_compactions().expect("wait");
                None
            }
            _ => {
                snapshots.clear();
                let stats = db.stats();
                expired_dropped += stats.expired_dropped;
                compactions += stats.compactions;
                relocated += stats.blob_bytes_relocated;
                split += stats.split_compactions;
                drop(db);
                db = env.open_with(options.clone());
                None
            }
        };
        if let Some(write) = write {
            history.writes.push((key, db.latest_sequence(), write));
        }
    }
    let now = env.clock.now_micros();
    assert_eq!(
        scan(&db, ReadOptions::default()),
        history.view(db.latest_sequence(), now),
        "{ctx} final"
    );
    let stats = db.stats();
    expired_dropped += stats.expired_dropped;
    compactions += stats.compactions;
    relocated += stats.blob_bytes_relocated;
    split += stats.split_compactions;
    assert!(
        expired_dropped > 0,
        "{ctx}: compaction never met an expired entry"
    );
    assert!(compactions > 5, "{ctx}: only {compactions} compactions");
    if blobs {
        assert!(
            relocated > 0,
            "{ctx}: garbage collection never relocated a value"
        );
        assert!(split > 0, "{ctx}: no compaction ran in parts");
    }
}

#[test]
fn model_with_expiry_merges_snapshots_and_compaction() {
    for seed in [1, 2, 3] {
        model_history(seed, false);
    }
}

/// The same histories with values in blob files (expiring ones among them, and merges on
/// them) and compactions split into parts.
#[test]
fn model_with_expiry_merges_snapshots_blobs_and_subcompactions() {
    for seed in [4, 5, 6] {
        model_history(seed, true);
    }
}
