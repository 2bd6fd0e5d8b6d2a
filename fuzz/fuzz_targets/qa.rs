//! libFuzzer target `qa`: see `distillery_fuzz::qa`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| distillery_fuzz::qa(data));
