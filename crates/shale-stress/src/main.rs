//! The `shale-stress` command: runs the evidence behind `docs/durability.md` and reports counts.
//!
//! ```text
//! shale-stress all [--quick | --long] [--seed N] [--json PATH]
//! shale-stress crash | faults | kill | corrupt | fuzz [--quick | --long] [--seed N] [--json PATH]
//! shale-stress child DIR ACKS SEED STARTS      (used by the kill loop)
//! ```
//! Exits non-zero if any contract violation was found.

use std::path::PathBuf;
use std::time::Instant;

use shale_stress::crash::{campaign, CrashPlan};
use shale_stress::report::Report;
use shale_stress::{corrupt, faults, fuzz, kill};

struct Args {
    what: String,
    long: bool,
    seed: u64,
    json: PathBuf,
}

fn parse() -> Result<Args, String> {
    let mut args = std::env::args().skip(1);
    let what = args.next().unwrap_or_else(|| "all".into());
    let mut parsed = Args {
        what,
        long: false,
        seed: 1,
        json: PathBuf::from("target/shale-stress-report.json"),
    };
    while let Some(a) = args.next() {
        match a.as_str() {
            "--quick" => parsed.long = false,
            "--long" => parsed.long = true,
            "--seed" => {
                parsed.seed = args
                    .next()
                    .and_then(|s| s.parse().ok())
                    .ok_or("--seed needs a number")?
            }
            "--json" => parsed.json = args.next().ok_or("--json needs a path")?.into(),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(parsed)
}

fn main() {
    let raw: Vec<String> = std::env::args().collect();
    if raw.get(1).map(String::as_str) == Some("child") {
        std::process::exit(child(&raw[2..]));
    }
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("shale-stress: {e}");
            std::process::exit(2);
        }
    };
    let all = args.what == "all";
    let want = |name: &str| all || args.what == name;
    if !all && !["crash", "faults", "kill", "corrupt", "fuzz"].contains(&args.what.as_str()) {
        eprintln!("shale-stress: unknown command {}", args.what);
        std::process::exit(2);
    }
    let scale: u64 = if args.long { 10 } else { 1 };
    let mut report = Report::new(if args.long { "long" } else { "quick" }, args.seed);
    let start = Instant::now();

    if want("crash") {
        let t = Instant::now();
        let plan = CrashPlan {
            seed: args.seed,
            runs: 520 * scale,
            ops_per_run: 150,
            captures_per_run: 50,
            recovery_crash_every: 8,
        };
        let stats = campaign(plan, 2);
        report.crash(&stats, t.elapsed());
        println!(
            "crash campaign: {} states in {:.1?}",
            stats.states(),
            t.elapsed()
        );
    }
    if want("faults") {
        let t = Instant::now();
        let stats = faults::every_operation(1);
        report.faults(&stats, t.elapsed());
        println!(
            "fault at every call: {} calls faulted in {:.1?}",
            stats.faulted(),
            t.elapsed()
        );
    }
    if want("kill") {
        let t = Instant::now();
        let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("shale-stress"));
        let stats = kill::kill_loop(&exe, 100 * scale, 4, args.seed);
        report.kill(&stats, t.elapsed());
        println!(
            "kill -9 loop: {} cycles in {:.1?}",
            stats.cycles,
            t.elapsed()
        );
    }
    if want("corrupt") {
        let t = Instant::now();
        match corrupt::every_byte(1) {
            Ok(stats) => {
                report.corrupt(&stats, t.elapsed());
                println!(
                    "corruption: {} bits flipped in {:.1?}",
                    stats.injected(),
                    t.elapsed()
                );
            }
            Err(e) => report.setup_failure(format!("corruption base database: {e}")),
        }
    }
    if want("fuzz") {
        let t = Instant::now();
        for (name, target) in fuzz::TARGETS {
            let executions = if name == "whole_db" { 2_000 } else { 20_000 } * scale;
            let stats = fuzz::replay(name, target, executions, args.seed);
            report.fuzz(name, &stats);
        }
        report.fuzz_time(t.elapsed());
        println!("fuzz replay done in {:.1?}", t.elapsed());
    }
    report.total_time(start.elapsed());
    println!("{}", report.text());
    if let Some(parent) = args.json.parent() {
        let _ = std::fs::create_dir_all(parent);
    }
    match std::fs::write(&args.json, report.json()) {
        Ok(()) => println!("wrote {}", args.json.display()),
        Err(e) => eprintln!("cannot write {}: {e}", args.json.display()),
    }
    if report.violations() > 0 {
        eprintln!("shale-stress: {} contract violations", report.violations());
        std::process::exit(1);
    }
}

fn child(args: &[String]) -> i32 {
    let (Some(dir), Some(acks), Some(seed), Some(starts)) =
        (args.first(), args.get(1), args.get(2), args.get(3))
    else {
        eprintln!("usage: shale-stress child DIR ACKS SEED STARTS");
        return 2;
    };
    let seed = seed.parse().unwrap_or(0);
    let starts: Vec<u64> = starts.split(',').filter_map(|s| s.parse().ok()).collect();
    match kill::child_main(dir.as_ref(), acks.as_ref(), seed, &starts) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("shale-stress child: {e}");
            1
        }
    }
}
