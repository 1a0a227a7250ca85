//! shale-stress: the evidence behind shale's durability contract (`docs/durability.md`).
//!
//! - [`oracle`]: the history of issued writes and the prefix check every recovery must pass;
//! - [`workload`]: random workloads and the runner that records them;
//! - [`crash`]: the simulated crash campaign on the fault-injecting filesystem;
//! - [`faults`]: a fault at every filesystem call of fixed workloads, space quotas;
//! - [`kill`]: the real `kill -9` loop against a child process;
//! - [`corrupt`]: a flipped bit at every byte of each kind of file;
//! - [`fuzz`]: fuzz target bodies and their stable replay over a seeded corpus;
//! - [`report`]: the counts, as text and JSON.
//!
//! The `shale-stress` binary runs them all (`shale-stress all --quick`).

pub mod corrupt;
pub mod crash;
pub mod faults;
pub mod fuzz;
pub mod kill;
pub mod oracle;
pub mod report;
pub mod workload;
