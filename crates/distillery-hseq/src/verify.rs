//! Round-trip verification: decode each source from its segments and compare with the
//! source under ≡.
//!
//! The free functions [`check_document`], [`check_table`] and [`check_kg`] check one source;
//! a [`Verifier`] runs the same checks and counts the outcomes in [`VerifyCounts`], keeping
//! the first few failures as messages. The executor calls it per document and table record
//! and per shard for KG triples, merges the counts of its workers ([`VerifyCounts::merge`])
//! and writes them to the run summary; `distillery hseq verify` prints them.
//!
//! A document passes when its segments decode, name its id, uri and title, every span
//! segment's content is the source's slice at its offsets (T1, checked against the source,
//! not only between segments), the paragraph and sentence spans are the source's (clamped
//! into the text), section spans are the source's when sections were emitted, and the
//! decoded text is ≡ the source text. A table passes when it decodes, names the table's id
//! and [`table_uri`], and header plus rows are ≡ (global column permutation). A KG shard
//! passes when its triplets decode to the same edge multiset as its triples.

use crate::Mismatch;
use crate::equiv::{edge_difference, first_text_difference, table_equivalent};
use crate::kg::{KgEdge, decode_kg};
use crate::order::level;
use crate::table::{decode_table, table_uri};
use crate::text::{CharIndex, decode_document};
use distillery_core::{Document, Segment, Table, Triple};
use serde::{Deserialize, Serialize};

/// Checks that `segs` encode `doc` (see the module docs).
pub fn check_document(doc: &Document, segs: &[Segment]) -> Result<(), Mismatch> {
    let d = decode_document(segs)?;
    if d.source_id != doc.id {
        return Err(Mismatch::SourceId {
            expected: doc.id.clone(),
            found: d.source_id,
        });
    }
    if d.uri != doc.uri {
        return Err(Mismatch::Uri {
            expected: doc.uri.clone(),
            found: d.uri,
        });
    }
    if d.title != doc.title {
        return Err(Mismatch::Title {
            expected: doc.title.clone(),
            found: d.title,
        });
    }
    let ix = CharIndex::new(&doc.text);
    for s in segs {
        if s.level == level::DOCUMENT {
            continue;
        }
        let (a, b) = (s.offsets[0], s.offsets[1]);
        if ix.get(a, b) != Some(s.content.as_str()) {
            return Err(Mismatch::Span {
                id: s.id.clone(),
                start: a,
                end: b,
            });
        }
    }
    let n = ix.len();
    let clamp = |start: u32, end: u32| {
        let a = start.min(n);
        (a, end.min(n).max(a))
    };
    let same = |lvl: &'static str, mut want: Vec<(u32, u32)>, got: &[(u32, u32)]| {
        let mut got = got.to_vec();
        want.sort_unstable();
        got.sort_unstable();
        if want == got {
            Ok(())
        } else {
            Err(Mismatch::Spans {
                level: lvl,
                expected: want.len(),
                found: got.len(),
            })
        }
    };
    let paras = doc.paragraphs.iter().map(|p| clamp(p.start, p.end));
    same(level::PARAGRAPH, paras.collect(), &d.paragraphs)?;
    let sents = doc.sentences.iter().map(|p| clamp(p.start, p.end));
    same(level::SENTENCE, sents.collect(), &d.sentences)?;
    if !d.sections.is_empty() {
        let secs = doc.sections.iter().map(|p| clamp(p.start, p.end));
        same(level::SECTION, secs.collect(), &d.sections)?;
    }
    match first_text_difference(&d.text, &doc.text) {
        None => Ok(()),
        Some(at) => Err(Mismatch::Text { at }),
    }
}

/// Checks that `segs` encode `t` (see the module docs).
pub fn check_table(t: &Table, segs: &[Segment]) -> Result<(), Mismatch> {
    let d = decode_table(segs)?;
    if d.source_id != t.id {
        return Err(Mismatch::SourceId {
            expected: t.id.clone(),
            found: d.source_id,
        });
    }
    let uri = table_uri(t);
    if d.uri != uri {
        return Err(Mismatch::Uri {
            expected: uri,
            found: d.uri,
        });
    }
    if !table_equivalent(&d.header, &d.rows, &t.header, &t.rows) {
        return Err(Mismatch::Table {
            expected_rows: t.rows.len(),
            expected_cols: t.header.len(),
            found_rows: d.rows.len(),
            found_cols: d.header.len(),
        });
    }
    Ok(())
}

/// What a KG check saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KgStats {
    /// `subgraph` roots.
    pub subgraphs: u64,
    /// Edges (`triplet` segments).
    pub edges: u64,
}

/// Checks that `segs` (the `subgraph` and `triplet` segments of a shard) encode exactly the
/// edge multiset of `triples`.
pub fn check_kg(triples: &[Triple], segs: &[Segment]) -> Result<KgStats, Mismatch> {
    let got = decode_kg(segs)?;
    let want: Vec<KgEdge> = triples.iter().map(KgEdge::from_triple).collect();
    let (missing, extra) = edge_difference(&want, &got);
    if !missing.is_empty() || !extra.is_empty() {
        let example = missing
            .first()
            .or(extra.first())
            .map(|e| e.content())
            .unwrap_or_default();
        return Err(Mismatch::Edges {
            missing: missing.len(),
            extra: extra.len(),
            example,
        });
    }
    Ok(KgStats {
        subgraphs: segs.iter().filter(|s| s.level == level::SUBGRAPH).count() as u64,
        edges: got.len() as u64,
    })
}

/// Round-trip counts of a run (or of one worker, before [`merge`](VerifyCounts::merge)).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct VerifyCounts {
    pub documents_ok: u64,
    pub documents_failed: u64,
    pub tables_ok: u64,
    pub tables_failed: u64,
    /// KG checks (one per shard, or per call) that passed / failed.
    pub kg_ok: u64,
    pub kg_failed: u64,
    /// Subgraph roots and edges in KG checks that passed.
    pub subgraphs_ok: u64,
    pub edges_ok: u64,
    /// Triples in KG checks that failed.
    pub edges_failed: u64,
    /// The first failures, `"<kind> <id>: <reason>"`, at most [`Verifier::max_failures`].
    pub first_failures: Vec<String>,
}

impl VerifyCounts {
    /// Sources that round-tripped (documents, tables and KG checks).
    pub fn ok(&self) -> u64 {
        self.documents_ok + self.tables_ok + self.kg_ok
    }

    /// Sources that did not round-trip (documents, tables and KG checks).
    pub fn failed(&self) -> u64 {
        self.documents_failed + self.tables_failed + self.kg_failed
    }

    /// Adds another set of counts, keeping at most `max_failures` failure messages.
    pub fn merge(&mut self, other: &VerifyCounts, max_failures: usize) {
        self.documents_ok += other.documents_ok;
        self.documents_failed += other.documents_failed;
        self.tables_ok += other.tables_ok;
        self.tables_failed += other.tables_failed;
        self.kg_ok += other.kg_ok;
        self.kg_failed += other.kg_failed;
        self.subgraphs_ok += other.subgraphs_ok;
        self.edges_ok += other.edges_ok;
        self.edges_failed += other.edges_failed;
        let room = max_failures.saturating_sub(self.first_failures.len());
        self.first_failures
            .extend(other.first_failures.iter().take(room).cloned());
    }
}

/// Counts round trips over many sources; see the module docs.
#[derive(Debug, Clone)]
pub struct Verifier {
    counts: VerifyCounts,
    max_failures: usize,
}

impl Default for Verifier {
    fn default() -> Self {
        Verifier::new()
    }
}

impl Verifier {
    /// Failure messages kept by [`Verifier::new`].
    pub const DEFAULT_MAX_FAILURES: usize = 10;

    /// A verifier keeping the first [`Verifier::DEFAULT_MAX_FAILURES`] failure messages.
    pub fn new() -> Verifier {
        Verifier::with_max_failures(Self::DEFAULT_MAX_FAILURES)
    }

    /// A verifier keeping the first `n` failure messages.
    pub fn with_max_failures(n: usize) -> Verifier {
        Verifier {
            counts: VerifyCounts::default(),
            max_failures: n,
        }
    }

    /// How many failure messages are kept.
    pub fn max_failures(&self) -> usize {
        self.max_failures
    }

    fn note(&mut self, what: &str, id: &str, e: &Mismatch) {
        if self.counts.first_failures.len() < self.max_failures {
            self.counts.first_failures.push(format!("{what} {id}: {e}"));
        }
    }

    /// Checks a document ([`check_document`]) and counts the outcome.
    pub fn verify_document(&mut self, doc: &Document, segs: &[Segment]) -> Result<(), Mismatch> {
        let r = check_document(doc, segs);
        match &r {
            Ok(()) => self.counts.documents_ok += 1,
            Err(e) => {
                self.counts.documents_failed += 1;
                self.note("document", &doc.id, e);
            }
        }
        r
    }

    /// Checks a table ([`check_table`]) and counts the outcome.
    pub fn verify_table(&mut self, t: &Table, segs: &[Segment]) -> Result<(), Mismatch> {
        let r = check_table(t, segs);
        match &r {
            Ok(()) => self.counts.tables_ok += 1,
            Err(e) => {
                self.counts.tables_failed += 1;
                self.note("table", &t.id, e);
            }
        }
        r
    }

    /// Checks a shard of triples ([`check_kg`]) and counts the outcome. Failure messages name
    /// the shard by its first triple's `dataset:source`.
    pub fn verify_kg(&mut self, triples: &[Triple], segs: &[Segment]) -> Result<KgStats, Mismatch> {
        let r = check_kg(triples, segs);
        match &r {
            Ok(st) => {
                self.counts.kg_ok += 1;
                self.counts.subgraphs_ok += st.subgraphs;
                self.counts.edges_ok += st.edges;
            }
            Err(e) => {
                self.counts.kg_failed += 1;
                self.counts.edges_failed += triples.len() as u64;
                let label = triples
                    .first()
                    .map_or_else(String::new, |t| format!("{}:{}", t.dataset, t.source));
                self.note("kg", &label, e);
            }
        }
        r
    }

    /// The counts so far.
    pub fn counts(&self) -> &VerifyCounts {
        &self.counts
    }

    /// The counts, consuming the verifier.
    pub fn into_counts(self) -> VerifyCounts {
        self.counts
    }
}
