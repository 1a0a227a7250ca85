//! The `shale-stress` command: see `docs/durability.md`.

fn main() {
    let plan = shale_stress::crash::CrashPlan {
        seed: 1,
        runs: 20,
        ops_per_run: 120,
        captures_per_run: 30,
        recovery_crash_every: 8,
    };
    let start = std::time::Instant::now();
    let stats = shale_stress::crash::campaign(plan, 2);
    println!("{stats:#?} in {:?}", start.elapsed());
}
