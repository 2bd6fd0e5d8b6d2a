//! Code the stages share, so that no stage imports another: the teacher ([`teacher`]),
//! readers of staged contexts ([`contexts`]), SFT sample text and files ([`jsonl`]), the
//! SFT writer of the teacher stages ([`sft_out`]), the merge of sharded SFT outputs
//! ([`sft_merge`]), per-part text files joined in part order ([`fragments`]), embedding models
//! ([`embedding`]), retrieval from a built index ([`retrieval`]), the `same_as` aliases
//! that merge knowledge graphs ([`same_as`]), a shard's documents with the triples that
//! cite them ([`doc_triples`]) the evaluation questions no sample may contain
//! ([`decontam`]) a stage's input rows ([`rows`]),
//! an index's documents from a corpus root ([`corpus_feed`]), a `mediawiki` input's daily
//! folders ([`daily`]) and the question loop of the stages cut by questions ([`questions`]).

pub mod contexts;
pub mod corpus_feed;
pub mod daily;
pub mod decontam;
pub mod doc_triples;
pub mod embedding;
pub mod fragments;
pub mod jsonl;
pub mod questions;
pub mod retrieval;
pub mod rows;
pub mod same_as;
pub mod sft_merge;
pub mod sft_out;
pub mod teacher;
