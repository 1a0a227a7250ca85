//! A short real `kill -9` loop: the child is this package's `shale-stress` binary.

use std::path::Path;

#[test]
fn killed_writers_lose_no_acknowledged_write() {
    let exe = Path::new(env!("CARGO_BIN_EXE_shale-stress"));
    let stats = shale_stress::kill::kill_loop(exe, 5, 3, 42);
    assert_eq!(stats.cycles, 5, "{stats:#?}");
    assert!(stats.acked_verified > 0, "{stats:#?}");
    assert_eq!(stats.violations(), 0, "{:#?}", stats.problems);
}
