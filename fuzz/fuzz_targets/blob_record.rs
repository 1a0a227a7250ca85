#![no_main]
//! Fuzz target: see `shale_stress::fuzz::blob_record`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| shale_stress::fuzz::blob_record(data));
