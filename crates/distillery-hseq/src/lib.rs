//! HSEQ linearization (paper 000, sections 2.3, 3.1 and appendix 9): turns documents, tables
//! and knowledge-graph edges into one stream of typed [`Segment`]s, decodes the stream back,
//! checks the round trip under the paper's benign equivalence ≡, and packages selected
//! segments as canonical evidence κ.
//!
//! - [`text`]: [`encode_document`] / [`decode_document`]: `document → section → paragraph →
//!   sentence`, absolute char offsets, `content == text[a:b]` (invariant T1). Characters
//!   outside every paragraph (heading lines, stray text) become *gap* paragraphs
//!   (`schema == ["gap"]`), so the paragraph layer alone covers every non-whitespace char and
//!   decoding gives the text back up to whitespace.
//! - [`table`]: [`encode_table`] / [`decode_table`]: `table → table_row → table_cell`; the root
//!   stores the header in `schema`, each row a JSON object `key → cell` with unique keys
//!   ([`column_keys`]) and its index in `offsets` (invariant T2).
//! - [`kg`]: [`KgEncoder`] (streaming) / [`decode_kg`]: one `subgraph` root per run of
//!   consecutive triples with the same subject, one `triplet` per edge (invariant T3).
//! - [`order`]: level names, [`level_rank`] and the stream order ρ ([`sort_stream`]).
//! - [`equiv`]: ≡ per modality ([`text_equivalent`], [`table_equivalent`], [`kg_equivalent`]).
//! - [`verify`]: the [`Verifier`] that decodes each source and counts round trips.
//! - [`canon`]: the canonicalizer κ ([`canonicalize`]) and its [`content_preserving`] check.
//! - [`error`]: [`DecodeError`] and [`Mismatch`], both [`distillery_core::HasKind`] (fatal).
//!
//! ```
//! use distillery_core::{Document, Paragraph};
//! use distillery_hseq::HseqOptions;
//! use distillery_hseq::{decode_document, encode_document, text_equivalent, Verifier};
//!
//! let doc = Document {
//!     id: "d1".into(),
//!     uri: "enwiki:Rust".into(),
//!     title: "Rust".into(),
//!     text: "== Intro ==\nRust is fast.".into(),
//!     paragraphs: vec![Paragraph { start: 12, end: 25, section: -1 }],
//!     ..Default::default()
//! };
//! let segs = encode_document(&doc, &HseqOptions::default());
//! // document root, the heading as a gap paragraph, the paragraph.
//! assert_eq!(segs.len(), 3);
//! assert_eq!(segs[1].content, "== Intro ==");
//! assert_eq!(segs[1].schema, vec!["gap"]);
//! let back = decode_document(&segs).unwrap();
//! assert!(text_equivalent(&back.text, &doc.text));
//!
//! let mut v = Verifier::new();
//! v.verify_document(&doc, &segs).unwrap();
//! assert_eq!(v.counts().documents_ok, 1);
//! ```
//!
//! Dependencies: `schemars` (the schema of [`HseqOptions`] for `docs/pipelines.md`),
//! `distillery-core` (the [`Segment`], record and option types, stable ids and
//! the SHA-1 of segment integrity hashes and κ evidence ids, char offsets, error kinds);
//! `serde` (evidence items and counts are serialized to JSON by the CLI and the summary);
//! `serde_json` (table rows and triplet raw fields are JSON; the workspace enables
//! `preserve_order`, so a row object keeps header order); `foldhash` (the fast hasher of the
//! per-document id map, which takes a lookup per segment; `hashbrown` already builds it);
//! `thiserror` (typed error enums).
//!
//! [`Segment`]: distillery_core::Segment

pub mod canon;
pub mod equiv;
pub mod error;
pub mod kg;
pub mod options;
pub mod order;
pub mod table;
pub mod text;
pub mod verify;

pub use canon::{
    CanonOptions, EvidenceItem, EvidenceMeta, canonicalize, canonicalize_with, content_preserving,
    evidence_id, truncate_snippet,
};
pub use equiv::{
    column_permutation, edge_difference, first_text_difference, kg_equivalent, table_equivalent,
    text_equivalent,
};
pub use error::{DecodeError, Mismatch};
pub use kg::{KgEdge, KgEncoder, TRIPLET_SCHEMA, decode_kg, encode_kg};
pub use options::HseqOptions;
pub use order::{level, level_rank, sort_stream, source_type, stream_cmp};
pub use table::{DecodedTable, column_keys, decode_table, encode_table, table_uri};
pub use text::{DecodedDocument, GAP, decode_document, encode_document, encode_document_unsealed};
pub use verify::{KgStats, Verifier, VerifyCounts, check_document, check_kg, check_table};

use distillery_core::Segment;
use distillery_core::id::sha1_hex;
use std::collections::HashMap;

/// Fills in the integrity hash of a freshly built segment.
pub(crate) fn sealed(mut s: Segment) -> Segment {
    s.sha1 = sha1_hex(&s.content);
    s
}

/// `Some(s)` unless `s` is empty.
pub(crate) fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

/// Checks ids are unique and returns id → position.
pub(crate) fn index_ids(segs: &[Segment]) -> Result<HashMap<&str, usize>, DecodeError> {
    let mut m = HashMap::with_capacity(segs.len());
    for (i, s) in segs.iter().enumerate() {
        if m.insert(s.id.as_str(), i).is_some() {
            return Err(DecodeError::DuplicateId { id: s.id.clone() });
        }
    }
    Ok(m)
}

/// Checks the integrity hash of a segment, when it has one.
pub(crate) fn check_sha1(s: &Segment) -> Result<(), DecodeError> {
    if !s.sha1.is_empty() && s.sha1 != sha1_hex(&s.content) {
        return Err(DecodeError::Sha1 { id: s.id.clone() });
    }
    Ok(())
}

/// Resolves the parent of segment `i`, which must exist and come earlier in the slice.
pub(crate) fn parent_index(
    segs: &[Segment],
    ids: &HashMap<&str, usize>,
    i: usize,
) -> Result<usize, DecodeError> {
    let s = &segs[i];
    let Some(p) = s.parent.as_deref() else {
        return Err(DecodeError::MissingParent {
            id: s.id.clone(),
            parent: None,
        });
    };
    let Some(&pi) = ids.get(p) else {
        return Err(DecodeError::MissingParent {
            id: s.id.clone(),
            parent: Some(p.to_string()),
        });
    };
    if pi >= i {
        return Err(DecodeError::ParentAfterChild {
            id: s.id.clone(),
            parent: p.to_string(),
        });
    }
    Ok(pi)
}
