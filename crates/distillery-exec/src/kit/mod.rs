//! Code the stages share, so that no stage imports another: the teacher ([`teacher`]),
//! readers of staged contexts ([`contexts`]), SFT sample text and files ([`jsonl`]), the
//! SFT writer of the teacher stages ([`sft_out`]) and the merge of sharded SFT outputs
//! ([`sft_merge`]).

pub mod contexts;
pub mod jsonl;
pub mod sft_merge;
pub mod sft_out;
pub mod teacher;
