//! Every fuzz target replayed on stable over its seeded corpus. One test, so the replay's quiet
//! panic hook is never swapped by two tests at once.

#[test]
fn fuzz_targets_survive_their_replay_corpus() {
    for (name, target) in shale_stress::fuzz::TARGETS {
        let executions = if name == "whole_db" { 200 } else { 3_000 };
        let stats = shale_stress::fuzz::replay(name, target, executions, 0xf022);
        assert_eq!(stats.executions, executions, "{name}");
        assert_eq!(
            stats.panics, 0,
            "{name} panicked on input {:?}",
            stats.first_panic
        );
    }
}
