#![no_main]
//! Fuzz target: see `shale_stress::fuzz::table_footer`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| shale_stress::fuzz::table_footer(data));
