#![no_main]
//! Fuzz target: see `shale_stress::fuzz::wal_reader`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| shale_stress::fuzz::wal_reader(data));
