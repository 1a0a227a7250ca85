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
        stdout.contains("fillsync     :") && stdout.contains("(1 ops)"),
        "{stdout}"
    );
    // stderr is not a terminal here, so no progress bar was drawn.
    assert!(stderr.is_empty(), "{stderr}");
}
