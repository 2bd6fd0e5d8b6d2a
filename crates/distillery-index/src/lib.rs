//! Retrieval indexes, built as versioned outputs: a passage table shared by three kinds of
//! index, and an in-memory BM25 for stages given no built index.
//!
//! - [`passage`]: documents, HSEQ segments or triples cut into passages (paragraph, sentence,
//!   segment, triple), each with a stable id, its document, a content hash, title and text.
//! - [`bm25`]: a tantivy index on disk per shard, which tantivy's Python package of the same
//!   version opens unchanged.
//! - [`dense`]: normalised passage embeddings as Parquet plus a usearch HNSW file per shard,
//!   which Python's `usearch` opens unchanged.
//! - [`kg`]: triples as an adjacency index (nodes, edges by subject and by object with
//!   offsets) and a GraphML export for igraph and networkx.
//! - [`version`]: an index root of immutable `versions/<version>/` and a `CURRENT` pointer
//!   written last, listing, rollback and pruning.
//! - [`cache`]: embeddings packed by model and content hash in the object store, shared by
//!   jobs.
//! - [`build`]: one build: diff against the version `CURRENT` names, rebuild only the shards
//!   that changed, embed only new content, switch.
//! - [`corpus`]: corpus roots: documents as immutable versions a night advances by the
//!   pages a day touched (delta parts, tombstones, compaction), with the days applied and what
//!   each version changed.
//! - [`search`]: BM25, dense and hybrid (reciprocal-rank fusion) search of a version.
//! - [`ram`]: [`Bm25Index`], BM25 in memory.
//!
//! Dependencies: `tantivy` (BM25 scoring, analyzers, postings; `mmap` for indexes on disk,
//! and its `MmapDirectory` maps the KG's `adjacency.bin` without `unsafe` here),
//! `usearch` (HNSW; chosen over the pure-Rust `hnsw_rs` because its file format is read by
//! its own Python, JavaScript and C packages and it queries and builds 3-4x faster here, at
//! the cost of a C++ build of about 3.5 minutes), `arrow`/`parquet` (the passage, embedding
//! and KG tables), `datafusion` (the KG build's external sorts, which spill to disk past a
//! memory budget), `object_store` (index roots on local disk, S3, GCS or Azure), `twox-hash`
//! (content hashes and vector keys).

pub mod bm25;
pub mod build;
pub mod cache;
pub mod corpus;
pub mod dense;
pub mod error;
pub mod kg;
pub mod passage;
mod passage_parts;
pub mod ram;
pub mod search;
mod spool;
mod table;
pub mod version;

pub use error::IndexError;
pub use ram::Bm25Index;
