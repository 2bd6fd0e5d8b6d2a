//! libFuzzer target `pipeline`: see `distillery_fuzz::pipeline`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| distillery_fuzz::pipeline(data));
