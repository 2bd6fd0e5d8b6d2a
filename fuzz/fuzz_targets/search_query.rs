//! libFuzzer target `search_query`: see `distillery_fuzz::search_query`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| distillery_fuzz::search_query(data));
