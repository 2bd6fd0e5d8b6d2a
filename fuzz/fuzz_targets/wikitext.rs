//! libFuzzer target `wikitext`: see `distillery_fuzz::wikitext`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| distillery_fuzz::wikitext(data));
