#![no_main]
//! Fuzz target: see `shale_stress::fuzz::version_edit`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| shale_stress::fuzz::version_edit(data));
