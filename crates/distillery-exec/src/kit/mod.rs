//! Code the stages share, so that no stage imports another: the teacher ([`teacher`]),
//! readers of staged contexts ([`contexts`]), SFT sample text and files ([`jsonl`]), the
//! SFT writer of the teacher stages ([`sft_out`]), the merge of sharded SFT outputs
//! ([`sft_merge`]) and per-part text files joined in part order ([`fragments`]).

pub mod contexts;
pub mod fragments;
pub mod jsonl;
pub mod sft_merge;
pub mod sft_out;
pub mod teacher;
