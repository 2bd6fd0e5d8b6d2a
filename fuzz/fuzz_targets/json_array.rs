//! libFuzzer target `json_array`: see `distillery_fuzz::json_array`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| distillery_fuzz::json_array(data));
