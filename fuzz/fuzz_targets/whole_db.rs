#![no_main]
//! Fuzz target: see `shale_stress::fuzz::whole_db`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| shale_stress::fuzz::whole_db(data));
