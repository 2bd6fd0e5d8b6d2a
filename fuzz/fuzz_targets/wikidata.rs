//! libFuzzer target `wikidata`: see `distillery_fuzz::wikidata`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| distillery_fuzz::wikidata(data));
