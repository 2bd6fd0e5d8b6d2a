//! Code the stages share, so that no stage imports another: the teacher ([`teacher`]),
//! readers of staged contexts ([`contexts`]), SFT sample text and files ([`jsonl`]), the
//! SFT writer of the teacher stages ([`sft_out`]), the merge of sharded SFT outputs
//! ([`sft_merge`]), per-part text files joined in part order ([`fragments`]), embedding models
//! ([`embedding`]) and retrieval from a built index ([`retrieval`]).

pub mod contexts;
pub mod embedding;
pub mod fragments;
pub mod jsonl;
pub mod retrieval;
pub mod sft_merge;
pub mod sft_out;
pub mod teacher;
