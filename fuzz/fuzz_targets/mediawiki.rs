//! libFuzzer target `mediawiki`: see `distillery_fuzz::mediawiki`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| distillery_fuzz::mediawiki(data));
