//! Every engine in the build, end to end: each adapter behaves like an ordered key-value
//! store, and a small run of every benchmark completes on each engine with sensible figures.
//!
//! shale is tested in the default build; the baselines need the Debian libraries
//! (scripts/install-baselines.sh) and `--features baselines`.

use std::path::Path;

use shale_bench::engines::{
    self, Batch, BatchHint, Direction, EngineConfig, EngineKind, WriteMode,
};
use shale_bench::error::Error;
use shale_bench::flags::Settings;
use shale_bench::record::Status;

/// The engines compiled into this build.
fn engines_in_build() -> Vec<EngineKind> {
    let engines: Vec<EngineKind> = EngineKind::ALL
        .into_iter()
        .filter(|k| k.check_available().is_ok())
        .collect();
    if engines.is_empty() {
        println!("SKIP: no engine in this build (features shale-engine and baselines are off)");
    }
    engines
}

/// Engines with a merge operator.
fn has_merge(kind: EngineKind) -> bool {
    matches!(
        kind,
        EngineKind::Shale | EngineKind::RocksDb | EngineKind::RocksDbTuned
    )
}

fn config(path: &Path, merge: bool) -> EngineConfig {
    EngineConfig {
        path: path.to_path_buf(),
        write_buffer_size: None,
        cache_size: 1 << 20,
        block_size: None,
        bloom_bits: Some(10),
        compression: engines::CompressionChoice::Default,
        max_file_size: None,
        subcompactions: None,
        max_bytes_for_level_base: None,
        level0_file_num_compaction_trigger: None,
        max_write_buffer_number: None,
        sync: false,
        disable_wal: false,
        merge_uint64add: merge,
    }
}

fn collect(
    db: &dyn engines::Engine,
    direction: Direction,
    start: Option<&[u8]>,
    limit: usize,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    db.scan(direction, start, &mut |k, v| {
        out.push((k.to_vec(), v.to_vec()));
        out.len() < limit
    })
    .expect("scan");
    out
}

fn keys(entries: &[(Vec<u8>, Vec<u8>)]) -> Vec<&[u8]> {
    entries.iter().map(|(k, _)| k.as_slice()).collect()
}

#[test]
fn every_adapter_behaves_like_an_ordered_map() {
    for kind in engines_in_build() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = engines::open(kind, &config(dir.path(), true)).expect("open");
        let w = WriteMode::default();
        let mut out = Vec::new();

        db.put(b"b", b"2", w).expect("put");
        db.put(b"d", b"4", w).expect("put");
        db.put(b"f", b"6", WriteMode { sync: true })
            .expect("sync put");
        assert!(db.get(b"b", &mut out).expect("get"), "{kind}");
        assert_eq!(out, b"2", "{kind}");
        assert!(!db.get(b"c", &mut out).expect("get missing"), "{kind}");
        db.put(b"b", b"22", w).expect("overwrite");
        db.get(b"b", &mut out).expect("get");
        assert_eq!(out, b"22", "{kind}");
        db.delete(b"d", w).expect("delete");
        db.delete(b"zz", w).expect("deleting a missing key is fine");
        assert!(!db.get(b"d", &mut out).expect("get deleted"), "{kind}");

        let mut batch = Batch::new();
        batch.put(b"a", b"1");
        batch.put(b"h", b"8");
        batch.delete(b"f");
        db.write(&batch, w).expect("batch");
        assert!(!db.get(b"f", &mut out).expect("get"), "{kind}");

        let all = collect(db.as_ref(), Direction::Forward, None, usize::MAX);
        assert_eq!(keys(&all), vec![&b"a"[..], b"b", b"h"], "{kind}");
        assert_eq!(all[1].1, b"22", "{kind}");
        let rev = collect(db.as_ref(), Direction::Reverse, None, usize::MAX);
        assert_eq!(keys(&rev), vec![&b"h"[..], b"b", b"a"], "{kind}");
        // Forward from a start key: the first key at or after it.
        assert_eq!(
            keys(&collect(db.as_ref(), Direction::Forward, Some(b"b"), 9)),
            vec![&b"b"[..], b"h"],
            "{kind}"
        );
        assert_eq!(
            keys(&collect(db.as_ref(), Direction::Forward, Some(b"c"), 9)),
            vec![&b"h"[..]],
            "{kind}"
        );
        assert!(
            collect(db.as_ref(), Direction::Forward, Some(b"i"), 9).is_empty(),
            "{kind}"
        );
        // Reverse from a start key: the last key at or before it.
        assert_eq!(
            keys(&collect(db.as_ref(), Direction::Reverse, Some(b"b"), 9)),
            vec![&b"b"[..], b"a"],
            "{kind}"
        );
        assert_eq!(
            keys(&collect(db.as_ref(), Direction::Reverse, Some(b"c"), 9)),
            vec![&b"b"[..], b"a"],
            "{kind}"
        );
        assert_eq!(
            keys(&collect(db.as_ref(), Direction::Reverse, Some(b"z"), 1)),
            vec![&b"h"[..]],
            "{kind}"
        );
        assert!(
            collect(db.as_ref(), Direction::Reverse, Some(b"0"), 9).is_empty(),
            "{kind}"
        );
        // The visitor stops the scan.
        assert_eq!(
            collect(db.as_ref(), Direction::Forward, None, 1).len(),
            1,
            "{kind}"
        );

        db.compact().expect("compact");
        assert_eq!(
            collect(db.as_ref(), Direction::Forward, None, usize::MAX),
            all,
            "{kind}"
        );
        assert!(!db.stats().expect("stats").is_empty(), "{kind}");

        let one = 1u64.to_le_bytes();
        if db.supports_merge() {
            for _ in 0..3 {
                db.merge(b"counter", &one, w).expect("merge");
            }
            db.get(b"counter", &mut out).expect("get counter");
            assert_eq!(out, 3u64.to_le_bytes(), "{kind}");
        } else {
            let err = db.merge(b"counter", &one, w).expect_err("no merge");
            assert!(matches!(err, Error::Unsupported { .. }), "{kind}: {err}");
        }
        assert!(!db.info().version.is_empty(), "{kind}");
        drop(db);

        // Reopening finds the data.
        let db = engines::open(kind, &config(dir.path(), true)).expect("reopen");
        assert!(db.get(b"h", &mut out).expect("get after reopen"), "{kind}");
        assert_eq!(out, b"8", "{kind}");
    }
}

#[test]
fn merge_support_matches_the_engines() {
    let dir = tempfile::tempdir().expect("tempdir");
    for kind in engines_in_build() {
        let path = dir.path().join(kind.name());
        std::fs::create_dir(&path).expect("mkdir");
        let db = engines::open(kind, &config(&path, true)).expect("open");
        assert_eq!(db.supports_merge(), has_merge(kind), "{kind}");
        drop(db);
        // Without the operator no engine offers merges.
        let path = dir.path().join(format!("{}-plain", kind.name()));
        std::fs::create_dir(&path).expect("mkdir");
        let db = engines::open(kind, &config(&path, false)).expect("open");
        assert!(!db.supports_merge(), "{kind}");
    }
}

#[test]
fn a_batch_built_in_place_applies_whole_or_not_at_all() {
    let dir = tempfile::tempdir().expect("tempdir");
    for kind in engines_in_build() {
        let path = dir.path().join(kind.name());
        std::fs::create_dir(&path).expect("mkdir");
        let db = engines::open(kind, &config(&path, false)).expect("open");
        let w = WriteMode::default();
        let hint = BatchHint {
            entries: 3,
            payload_bytes: 6,
        };
        db.put(b"gone", b"0", w).expect("put");
        db.write_with(
            hint,
            &mut |sink| {
                sink.put(b"a", b"1")?;
                sink.delete(b"gone")?;
                sink.put(b"b", b"2")
            },
            w,
        )
        .expect("batch");
        let all = collect(db.as_ref(), Direction::Forward, None, usize::MAX);
        assert_eq!(
            all,
            vec![
                (b"a".to_vec(), b"1".to_vec()),
                (b"b".to_vec(), b"2".to_vec())
            ],
            "{kind}"
        );

        // A fill that fails part way applies none of what it added.
        let failed = db.write_with(
            hint,
            &mut |sink| {
                sink.put(b"c", b"3")?;
                sink.delete(b"a")?;
                Err(Error::Usage("the fill gives up".into()))
            },
            w,
        );
        assert!(matches!(failed, Err(Error::Usage(_))), "{kind}: {failed:?}");
        // So does a merge the engine cannot take (no engine has an operator here).
        let merged = db.write_with(
            hint,
            &mut |sink| {
                sink.put(b"d", b"4")?;
                sink.merge(b"b", &1u64.to_le_bytes())
            },
            w,
        );
        assert!(
            matches!(merged, Err(Error::Unsupported { .. })),
            "{kind}: {merged:?}"
        );
        let after = collect(db.as_ref(), Direction::Forward, None, usize::MAX);
        assert_eq!(after, all, "{kind}");
        drop(db);

        // With the operator, a batch's merge applies where the engine has merges, and is still
        // refused, with nothing applied, where it has none.
        let path = dir.path().join(format!("{}-merge", kind.name()));
        std::fs::create_dir(&path).expect("mkdir");
        let db = engines::open(kind, &config(&path, true)).expect("open");
        db.put(b"n", &5u64.to_le_bytes(), w).expect("put");
        let merged = db.write_with(
            hint,
            &mut |sink| {
                sink.put(b"m", b"0")?;
                sink.merge(b"n", &2u64.to_le_bytes())
            },
            w,
        );
        let mut out = Vec::new();
        if has_merge(kind) {
            merged.expect("batch with a merge");
            assert!(db.get(b"n", &mut out).expect("get"), "{kind}");
            assert_eq!(out, 7u64.to_le_bytes(), "{kind}");
            assert!(db.get(b"m", &mut out).expect("get"), "{kind}");
        } else {
            assert!(
                matches!(merged, Err(Error::Unsupported { .. })),
                "{kind}: {merged:?}"
            );
            assert!(!db.get(b"m", &mut out).expect("get"), "{kind}");
            assert!(db.get(b"n", &mut out).expect("get"), "{kind}");
            assert_eq!(out, 5u64.to_le_bytes(), "{kind}");
        }
    }
}

/// The order of the smoke suite: fills before the reads that need data, every benchmark once
/// (fillrandom twice, to refill before deleterandom).
const SMOKE_BENCHMARKS: &str = "fillseq,readrandom,readmissing,readhot,seekrandom,readseq,\
readreverse,overwrite,readwhilewriting,updaterandom,mergerandom,compact,stats,fillsync,\
fillbatch,fillrandbatch,deleteseq,fillrandom,deleterandom,fill100K,crc32c,snappycomp,\
snappyuncomp,fdatasync,influx";

const LINE_PATTERN: &str =
    r"^(\S+)\s+:\s+([0-9]+\.[0-9]{3}) micros/op;(?:\s+([0-9]+\.[0-9]) MB/s)?(?:\s+(.*))?$";

#[test]
fn every_benchmark_runs_on_every_baseline() {
    let num = 400u64;
    let line_re = regex::Regex::new(LINE_PATTERN).expect("regex");
    for kind in engines_in_build() {
        let dir = tempfile::tempdir().expect("tempdir");
        let json = dir.path().join("run.json");
        let args = vec![
            "shale-bench".to_string(),
            format!("--engine={kind}"),
            format!("--num={num}"),
            format!("--benchmarks={SMOKE_BENCHMARKS}"),
            "--merge_operator=uint64add".to_string(),
            "--histogram=1".to_string(),
            "--series=7".to_string(),
            format!("--db={}", dir.path().join("db").display()),
            format!("--json={}", json.display()),
        ];
        let settings =
            Settings::from_args(args.clone()).unwrap_or_else(|_| panic!("valid flags for {kind}"));
        let mut out = Vec::new();
        let run = shale_bench::run(&settings, args, &mut out).expect("run");
        let text = String::from_utf8(out).expect("utf-8");
        let engine = run.engines.first().expect("one engine");
        assert!(engine.error.is_none(), "{kind}: {:?}\n{text}", engine.error);
        assert!(text.starts_with(&format!("{}:", kind.name())), "{text}");
        assert!(text.contains("Entries:    400"), "{text}");

        let by_name = |name: &str| {
            engine
                .results
                .iter()
                .find(|r| r.name == name)
                .unwrap_or_else(|| panic!("{kind}: no {name}"))
        };
        for r in &engine.results {
            if r.status == Status::Ok {
                assert!(
                    line_re.is_match(&r.line),
                    "{kind}: line does not parse: {:?}",
                    r.line
                );
                assert!(text.contains(&r.line), "{kind}: {:?} not printed", r.line);
                assert!(r.ops > 0 && r.ops_per_sec > 0.0, "{kind}: {}", r.name);
                let h = r.histogram.as_ref().expect("histogram on");
                assert!(
                    h.count > 0 && h.min_micros <= h.p50_micros && h.p50_micros <= h.max_micros
                );
            }
        }
        // Every key written by fillseq is found; missing keys never are.
        assert_eq!(
            by_name("readrandom").message,
            format!("({num} of {num} found)"),
            "{kind}"
        );
        assert_eq!(
            by_name("readmissing").message,
            format!("(0 of {num} found)"),
            "{kind}"
        );
        // The raw disk benchmark syncs at least once and leaves no file behind.
        assert_eq!(
            by_name("fdatasync").message,
            "(1 synced writes of 116 bytes into a preallocated file)",
            "{kind}"
        );
        assert!(!dir
            .path()
            .join("db")
            .join("shale-bench-fdatasync-0.tmp")
            .exists());
        assert_eq!(
            by_name("seekrandom").message,
            format!("({num} of {num} found)"),
            "{kind}"
        );
        assert_eq!(by_name("readseq").ops, num, "{kind}");
        assert_eq!(by_name("readreverse").ops, num, "{kind}");
        assert!(by_name("readseq").mb_per_sec.is_some(), "{kind}");
        // fillsync carries its share of the raw fdatasync rate measured around it.
        let fillsync = by_name("fillsync");
        let prefix = format!("({} ops; ", num / 1000 + 1);
        assert!(
            fillsync.message.starts_with(&prefix)
                && fillsync
                    .message
                    .ends_with(" raw syncs/s measured around it)"),
            "{kind}: {}",
            fillsync.message
        );
        assert!(
            fillsync.sync_floor_ops_per_sec.is_some_and(|f| f > 0.0),
            "{kind}"
        );
        assert!(
            by_name("fdatasync").sync_floor_ops_per_sec.is_none(),
            "{kind}"
        );
        assert!(
            by_name("updaterandom")
                .message
                .starts_with("( updates:400 found:"),
            "{kind}"
        );
        let merge = by_name("mergerandom");
        if has_merge(kind) {
            assert_eq!(merge.status, Status::Ok, "{kind}");
            assert_eq!(merge.message, "( updates:400)");
        } else {
            assert_eq!(merge.status, Status::Unsupported, "{kind}");
            assert!(text.contains("mergerandom  : not supported"), "{text}");
        }
        assert_eq!(by_name("stats").status, Status::Info, "{kind}");
        assert_eq!(by_name("crc32c").message, "(4K per op)");
        assert!(
            by_name("snappycomp").message.starts_with("(output: "),
            "{kind}"
        );
        // Disk usage follows every write benchmark and only those.
        assert!(
            by_name("fillseq").disk_bytes.is_some_and(|b| b > 0),
            "{kind}"
        );
        assert!(by_name("readrandom").disk_bytes.is_none(), "{kind}");
        assert!(engine.peak_rss_bytes.is_some_and(|b| b > 0));
        // The anonymous peak is at least what was resident before the engine opened.
        let before = engine.anon_rss_before_bytes.expect("RssAnon before");
        assert!(engine.peak_anon_rss_bytes.is_some_and(|b| b >= before));
        // The influx steps, with their entry counts.
        let steps: Vec<(&str, u64)> = engine
            .results
            .iter()
            .filter(|r| r.name.starts_with("influx_"))
            .map(|r| (r.name.as_str(), r.ops))
            .collect();
        assert_eq!(
            steps,
            vec![
                ("influx_write", num),
                ("influx_scan", num),
                ("influx_delete", num / 2),
                ("influx_compact", 1),
                ("influx_rescan", num / 2),
                ("influx_write2", num / 2),
            ],
            "{kind}"
        );
        // The JSON file holds every figure.
        let value: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).expect("json written"))
                .expect("json parses");
        assert_eq!(value["engines"][0]["info"]["name"], kind.name());
        assert_eq!(value["engines"][0]["results"][0]["name"], "fillseq");
        assert!(value["engines"][0]["results"][0]["disk_bytes"]
            .as_u64()
            .is_some());
        assert!(value["engines"][0]["peak_rss_bytes"].as_u64().is_some());
        assert!(value["engines"][0]["peak_anon_rss_bytes"]
            .as_u64()
            .is_some());
    }
}

#[cfg(feature = "baselines")]
#[test]
fn threads_split_the_work_and_engines_compare() {
    let dir = tempfile::tempdir().expect("tempdir");
    let report = dir.path().join("report.html");
    let args: Vec<String> = vec![
        "shale-bench".into(),
        "--engines=lmdb,sqlite,leveldb".into(),
        "--num=600".into(),
        "--threads=3".into(),
        "--benchmarks=fillrandom,readrandom,readwhilewriting,fillrandbatch,readseq".into(),
        format!("--report={}", report.display()),
    ];
    let settings = Settings::from_args(args.clone()).unwrap_or_else(|_| panic!("valid flags"));
    let mut out = Vec::new();
    let run = shale_bench::run(&settings, args, &mut out).expect("run");
    let text = String::from_utf8(out).expect("utf-8");
    assert_eq!(run.engines.len(), 3);
    for engine in &run.engines {
        assert!(engine.error.is_none(), "{:?}", engine.error);
        let fill = &engine.results[0];
        assert_eq!(fill.ops, 600, "three clients share the 600 writes");
        assert_eq!(engine.results[1].message, "(600 of 600 found)");
        assert!(
            engine.results[2].message.contains("of 600 found"),
            "{}",
            engine.results[2].message
        );
    }
    // No shale in this build's run: ratios are to the first engine.
    assert!(
        text.contains("Comparison: ops/sec (ratio to lmdb)"),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("fillrandom") && l.contains("(1.00x)")),
        "{text}"
    );
    let html = std::fs::read_to_string(&report).expect("report written");
    assert!(html.contains("<h3>readwhilewriting</h3>"));
    assert!(html.contains("lmdb 0.9."));
}

#[cfg(feature = "shale-engine")]
#[test]
fn repeat_runs_every_round_and_reports_medians() {
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("run.json");
    let args: Vec<String> = vec![
        "shale-bench".into(),
        "--engine=shale".into(),
        "--num=300".into(),
        "--repeat=3".into(),
        "--benchmarks=fillrandom,readrandom".into(),
        format!("--json={}", json.display()),
    ];
    let settings = Settings::from_args(args.clone()).unwrap_or_else(|_| panic!("valid flags"));
    let mut out = Vec::new();
    let run = shale_bench::run(&settings, args, &mut out).expect("run");
    let text = String::from_utf8(out).expect("utf-8");
    for round in 1..=3 {
        assert!(
            text.contains(&format!("=== Round {round} of 3 ===")),
            "{text}"
        );
    }
    assert!(
        text.contains("Comparison: median ops/sec of 3 rounds"),
        "{text}"
    );
    assert_eq!(run.engines.len(), 1);
    for r in &run.engines[0].results {
        assert_eq!(r.round_ops_per_sec.len(), 3, "{}", r.name);
        let mut sorted = r.round_ops_per_sec.clone();
        sorted.sort_by(f64::total_cmp);
        assert_eq!(r.ops_per_sec, sorted[1], "{}: the median round", r.name);
    }
    assert_eq!(run.engines[0].results[1].message, "(300 of 300 found)");
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("parse");
    assert_eq!(saved["workload"]["repeat"], 3);
}

#[test]
fn use_existing_db_skips_fills_and_reads_the_old_data() {
    let Some(kind) = engines_in_build().first().copied() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let run = |benchmarks: &str, existing: bool| {
        let args: Vec<String> = vec![
            "shale-bench".into(),
            format!("--engine={kind}"),
            "--num=300".into(),
            format!("--benchmarks={benchmarks}"),
            format!("--db={}", db.display()),
            format!("--use_existing_db={}", u8::from(existing)),
        ];
        let settings = Settings::from_args(args.clone()).unwrap_or_else(|_| panic!("valid flags"));
        let mut out = Vec::new();
        let record = shale_bench::run(&settings, args, &mut out).expect("run");
        (record, String::from_utf8(out).expect("utf-8"))
    };
    run("fillseq", false);
    let (record, text) = run("fillrandom,readrandom", true);
    assert!(
        text.contains("fillrandom   : skipping (--use_existing_db is true)"),
        "{text}"
    );
    let results = &record.engines[0].results;
    assert_eq!(results[0].status, Status::Skipped);
    assert_eq!(results[1].message, "(300 of 300 found)");
}

#[test]
fn a_foreign_db_directory_is_never_wiped() {
    let Some(kind) = engines_in_build().first().copied() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("thesis.tex"), b"precious").expect("write");
    let args: Vec<String> = vec![
        "shale-bench".into(),
        format!("--engine={kind}"),
        "--num=10".into(),
        "--benchmarks=fillseq".into(),
        format!("--db={}", dir.path().display()),
    ];
    let settings = Settings::from_args(args.clone()).unwrap_or_else(|_| panic!("valid flags"));
    let mut out = Vec::new();
    let record = shale_bench::run(&settings, args, &mut out).expect("run returns");
    let error = record.engines[0].error.as_deref().expect("refused");
    assert!(error.contains("refusing to delete"), "{error}");
    assert!(dir.path().join("thesis.tex").exists());
}

/// `--max_bytes_for_level_base`, `--level0_file_num_compaction_trigger` and
/// `--max_write_buffer_number` reach the engines that have those settings, each named once on
/// its settings line; LevelDB records them as ignored.
#[test]
fn level_and_memtable_flags_are_applied_or_recorded_as_ignored() {
    for kind in engines_in_build() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut c = config(dir.path(), false);
        c.max_bytes_for_level_base = Some(10 << 20);
        c.level0_file_num_compaction_trigger = Some(10);
        c.max_write_buffer_number = Some(3);
        let db = engines::open(kind, &c).expect("open");
        let settings = &db.info().settings;
        let named = |prefix: &str| settings.iter().filter(|s| s.starts_with(prefix)).count();
        let has = |line: &str| settings.iter().any(|s| s == line);
        match kind {
            EngineKind::Shale | EngineKind::RocksDb | EngineKind::RocksDbTuned => {
                assert!(
                    has("max_bytes_for_level_base=10485760"),
                    "{kind}: {settings:?}"
                );
                assert!(has("max_write_buffer_number=3"), "{kind}: {settings:?}");
                if kind == EngineKind::RocksDbTuned {
                    // The report's slowdown trigger (8) may not be shallower than the first.
                    assert!(has("level0_triggers=10/10/12"), "{kind}: {settings:?}");
                    assert_eq!(named("level0_file_num"), 0, "{kind}: {settings:?}");
                } else {
                    assert!(
                        has("level0_file_num_compaction_trigger=10"),
                        "{kind}: {settings:?}"
                    );
                    assert_eq!(named("level0_file_num"), 1, "{kind}: {settings:?}");
                }
            }
            EngineKind::LevelDb => {
                assert_eq!(named("max_bytes_for_level_base=ignored"), 1, "{settings:?}");
                assert_eq!(
                    named("level0_file_num_compaction_trigger=ignored"),
                    1,
                    "{settings:?}"
                );
                assert_eq!(named("max_write_buffer_number=ignored"), 1, "{settings:?}");
            }
            _ => {}
        }
        assert!(
            named("max_bytes_for_level_base") <= 1,
            "{kind}: {settings:?}"
        );
        assert!(
            named("max_write_buffer_number") <= 1,
            "{kind}: {settings:?}"
        );
    }
}
