//! libFuzzer target `multistream_index`: see `distillery_fuzz::multistream_index`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| distillery_fuzz::multistream_index(data));
