//! libFuzzer target `ntriples`: see `distillery_fuzz::ntriples`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| distillery_fuzz::ntriples(data));
