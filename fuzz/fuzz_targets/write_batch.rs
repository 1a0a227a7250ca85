#![no_main]
//! Fuzz target: see `shale_stress::fuzz::write_batch`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| shale_stress::fuzz::write_batch(data));
