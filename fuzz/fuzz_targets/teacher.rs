//! libFuzzer target `teacher`: see `distillery_fuzz::teacher`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| distillery_fuzz::teacher(data));
