//! shale-stress: the evidence behind shale's durability contract (`docs/durability.md`).
//!
//! - [`oracle`]: the history of issued writes and the prefix check every recovery must pass;
//! - [`workload`]: random workloads and the runner that records them;
//! - [`crash`]: the simulated crash campaign on the fault-injecting filesystem;
//!
//! The `shale-stress` binary runs them all (`shale-stress all --quick`) and reports counts.

pub mod crash;
pub mod faults;
pub mod oracle;
pub mod workload;
