//! The `shale-stress` command: see `docs/durability.md`.

fn main() {
    let start = std::time::Instant::now();
    let stats = shale_stress::faults::every_operation(1);
    println!(
        "runs {} faulted {} not fired {} violations {} in {:?}",
        stats.runs,
        stats.faulted(),
        stats.not_fired,
        stats.violations(),
        start.elapsed()
    );
    println!("{:#?}", stats.fired_by_kind);
    for p in &stats.checks.problems {
        println!("{p}");
    }
}
