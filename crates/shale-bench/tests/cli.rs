//! The `shale-bench` binary as a user runs it: exit codes, error messages, output shape.

use std::process::Command;

fn shale_bench(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_shale-bench"))
        .args(args)
        .output()
        .expect("run shale-bench");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn help_lists_db_bench_flags() {
    let (code, stdout, _) = shale_bench(&["--help"]);
    assert_eq!(code, 0);
    for flag in [
        "--benchmarks",
        "--num",
        "--value_size",
        "--use_existing_db",
        "--engines",
        "--report",
    ] {
        assert!(stdout.contains(flag), "{flag} missing from help:\n{stdout}");
    }
}

#[test]
fn unknown_flags_and_bad_values_exit_2_with_a_clear_message() {
    let (code, _, stderr) = shale_bench(&["--nmu=10"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("--nmu"), "{stderr}");
    let (code, _, stderr) = shale_bench(&["--value_size=big"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("big"), "{stderr}");
    let (code, _, stderr) = shale_bench(&["--benchmarks=fillseq,nosuch", "--engine=lmdb"]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("unknown benchmark 'nosuch'") || stderr.contains("not in this build"),
        "{stderr}"
    );
}

#[test]
fn shale_engine_reports_its_feature_when_off() {
    let (code, _, stderr) = shale_bench(&["--engine=shale", "--num=10"]);
    if cfg!(feature = "shale-engine") {
        assert_ne!(code, 2, "{stderr}");
    } else {
        assert_eq!(code, 2);
        assert!(stderr.contains("`shale-engine`"), "{stderr}");
    }
}

#[cfg(feature = "baselines")]
#[test]
fn result_lines_parse_like_db_bench_output() {
    let (code, stdout, stderr) = shale_bench(&[
        "--engine=lmdb",
        "--num=500",
        "--benchmarks=fillseq,fillsync,readrandom,readseq,compact",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let re = regex::Regex::new(
        r"^(\S+)\s+:\s+([0-9]+\.[0-9]{3}) micros/op;(?:\s+([0-9]+\.[0-9]) MB/s)?(?:\s+(.*))?$",
    )
    .expect("regex");
    let names: Vec<String> = stdout
        .lines()
        .filter_map(|l| re.captures(l).map(|c| c[1].to_string()))
        .collect();
    assert_eq!(
        names,
        ["fillseq", "fillsync", "readrandom", "readseq", "compact"],
        "{stdout}"
    );
    assert!(stdout.starts_with("lmdb:       version 0.9."), "{stdout}");
    assert!(
        stdout.lines().any(|l| l.starts_with("fillsync     :")
            && l.contains("(1 ops; ")
            && l.ends_with(" raw syncs/s measured around it)")),
        "{stdout}"
    );
    // stderr is not a terminal here, so no progress bar was drawn.
    assert!(stderr.is_empty(), "{stderr}");
}

/// `--lockstep` runs each engine in a child process and steps the engines benchmark by
/// benchmark; the output, the rounds and the JSON keep the shape of an in-process run.
#[test]
fn lockstep_runs_each_engine_in_a_child_and_keeps_the_output_shape() {
    if !cfg!(feature = "shale-engine") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("run.json");
    let mut engines = "shale".to_string();
    if cfg!(feature = "baselines") {
        engines.push_str(",lmdb");
    }
    let (code, stdout, stderr) = shale_bench(&[
        &format!("--engines={engines}"),
        "--lockstep",
        "--num=400",
        "--repeat=2",
        "--benchmarks=fillrandom,readrandom,readseq,fillseq,readrandom",
        &format!("--json={}", json.display()),
    ]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stderr.is_empty(), "{stderr}");
    // The protocol's lines stay between parent and child.
    assert!(!stdout.contains('\u{1e}'), "{stdout}");
    let engine_count = engines.split(',').count();
    for round in 1..=2 {
        assert!(
            stdout.contains(&format!("=== Round {round} of 2 ===")),
            "{stdout}"
        );
    }
    // Each round prints one block per engine, each with every benchmark's line.
    assert_eq!(
        stdout.matches("readseq      :").count(),
        2 * engine_count,
        "{stdout}"
    );
    assert!(
        stdout.contains("Comparison: median ops/sec of 2 rounds"),
        "{stdout}"
    );
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("parse");
    let engines_saved = saved["engines"].as_array().expect("engines");
    assert_eq!(engines_saved.len(), engine_count);
    for engine in engines_saved {
        let results = engine["results"].as_array().expect("results");
        assert_eq!(results.len(), 5, "{engine}");
        for r in results {
            assert_eq!(r["status"], "ok", "{r}");
            assert_eq!(r["round_ops_per_sec"].as_array().map(Vec::len), Some(2));
        }
        assert_eq!(results[1]["message"], "(400 of 400 found)");
        // Each engine ran in a process of its own, so its peak is its own.
        assert_eq!(engine["peak_rss_per_engine"], true, "{engine}");
    }
}

/// A lockstep child whose parent goes away stops with an error in its record, not a hang.
#[test]
fn a_lockstep_child_without_its_parent_reports_and_exits() {
    if !cfg!(feature = "shale-engine") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let out = Command::new(env!("CARGO_BIN_EXE_shale-bench"))
        .args([
            "--num=100",
            "--benchmarks=fillseq,readrandom",
            "--lockstep_child=shale",
            &format!("--lockstep_child_dir={}", db.display()),
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run shale-bench");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("closed this child's input before its suite finished"),
        "{stdout}"
    );
    let record = stdout
        .lines()
        .find_map(|l| l.strip_prefix(shale_bench::lockstep::RECORD))
        .expect("the record line");
    let record: serde_json::Value = serde_json::from_str(record).expect("record JSON");
    assert!(record["error"]
        .as_str()
        .is_some_and(|e| e.contains("lockstep")));
    assert_eq!(record["results"].as_array().map(Vec::len), Some(0));
}
