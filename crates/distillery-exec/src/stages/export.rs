//! The `export` stage: the staged corpus of its inputs in the file layouts other RAG code
//! reads as it is (`formats`):
//!
//! - `ircot` → `<stage>/ircot_corpus.jsonl`: one line per paragraph, the retrieval corpus of
//!   IRCoT and Adaptive-RAG (`../shared/docs/formats.md`, "Corpus conventions"):
//!   `{"id", "title", "paragraph_index", "paragraph_text", "url", "is_abstract"}`; `id` is
//!   `<document id>-<paragraph index>`, `url` the document's URI, `is_abstract` whether the
//!   paragraph is in the lead (before the first heading; the first paragraph of a document
//!   without sections);
//! - `kirag` → `<stage>/kirag_triples.jsonl`: one line per document with triples, the
//!   document-level knowledge triples KiRAG caches per document id and TRACE attaches to each
//!   context: `{"id", "title", "text", "triples": [{"text": "<head; relation; tail>",
//!   "sentence", "head", "relation", "tail"}]}` (`sentence`: the index of the supporting
//!   sentence in the document's sentences, `null` when the triple has none). The triples are
//!   the inputs' own (a `wikiofgraph` input's) or, with `triples = "<stage>"`, those a
//!   `triples` stage extracted with the teacher; each end is written with its words
//!   ([`crate::kit::doc_triples::words`]).
//!
//! A document staged twice (a context paragraph shared by two QA files) is written once.
//! One task per shard writes each file's lines per part ([`crate::kit::fragments`]); the merge
//! task joins them in part order, so the files hold the same bytes for any number of tasks.
//! **Memory: the shard's triples that cite a document** (and one batch of documents).
//! Counters: `documents`, `paragraphs`, `documents.with_triples`, `triples`,
//! `triples.without_document` (of documents the shard does not hold, or of none).

use std::time::Instant;

use distillery_core::spec::{StageCheck, StageSpec};
use distillery_core::summary::StageSummary;
use distillery_core::{Document, TableKind, char_slice};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::contract::{Declared, MergeCx, Partitioning, RunCx, Stage, StageFuture, StageOutput};
use crate::error::ExecError;
use crate::kit::doc_triples::{DocTriples, FirstSeen, each_row, source_parts, words};
use crate::kit::fragments::{Fragments, concat};

/// An export layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ExportFormat {
    /// IRCoT / Adaptive-RAG retrieval corpus, a paragraph a line.
    Ircot,
    /// KiRAG / TRACE document-level knowledge triples, a document a line.
    Kirag,
}

impl ExportFormat {
    fn file(self) -> &'static str {
        match self {
            ExportFormat::Ircot => "ircot_corpus.jsonl",
            ExportFormat::Kirag => "kirag_triples.jsonl",
        }
    }
}

/// `export` stage options.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExportOptions {
    /// The layouts to write, any of `ircot` and `kirag`.
    pub formats: Vec<ExportFormat>,
    /// For `kirag`: the name of a `triples` stage whose teacher-extracted triples are written.
    /// Default: the inputs' own triples.
    #[serde(default)]
    pub triples: Option<String>,
}

/// The `export` stage.
pub struct Export;

fn path(stage: &str, f: ExportFormat) -> String {
    format!("{stage}/{}", f.file())
}

impl Stage for Export {
    type Options = ExportOptions;

    fn kind(&self) -> &'static str {
        "export"
    }

    fn check(&self, o: &mut ExportOptions, cx: &mut StageCheck<'_, '_>) {
        if o.formats.is_empty() {
            cx.error("formats", "name at least one of `ircot`, `kirag`");
        }
    }

    fn outputs(&self, o: &ExportOptions, stage: &StageSpec) -> Declared {
        Declared {
            tables: Vec::new(),
            files: o.formats.iter().map(|&f| path(&stage.name, f)).collect(),
        }
    }

    fn partitioning(&self) -> Partitioning {
        Partitioning::Shards
    }

    fn merges(&self) -> bool {
        true
    }

    fn run<'a>(&'a self, o: &'a ExportOptions, cx: RunCx<'a>) -> StageFuture<'a> {
        Box::pin(run(o, cx))
    }

    fn merge<'a>(&'a self, o: &'a ExportOptions, cx: MergeCx<'a>) -> StageFuture<'a> {
        Box::pin(merge(o, cx))
    }
}

/// Whether paragraph `k` of `d` is in its lead.
fn is_abstract(d: &Document, k: usize) -> bool {
    let p = &d.paragraphs[k];
    match usize::try_from(p.section)
        .ok()
        .and_then(|s| d.sections.get(s))
    {
        Some(section) => section.level <= 1,
        None => k == 0,
    }
}

/// The IRCoT corpus lines of a document.
fn ircot_lines(d: &Document) -> String {
    let mut out = String::new();
    for (k, p) in d.paragraphs.iter().enumerate() {
        let text = char_slice(&d.text, p.start, p.end)
            .unwrap_or_default()
            .trim();
        if text.is_empty() {
            continue;
        }
        let line = json!({
            "id": format!("{}-{k}", d.id),
            "title": d.title,
            "paragraph_index": k,
            "paragraph_text": text,
            "url": d.uri,
            "is_abstract": is_abstract(d, k),
        });
        out.push_str(&line.to_string());
        out.push('\n');
    }
    out
}

async fn run(opts: &ExportOptions, cx: RunCx<'_>) -> Result<StageOutput, ExecError> {
    let started = Instant::now();
    let inputs = &cx.stage.inputs;
    let has = |f: ExportFormat| opts.formats.contains(&f);
    let mut summary = StageSummary::with_counters(
        &cx.stage.name,
        &[
            "documents",
            "paragraphs",
            "documents.with_triples",
            "triples",
            "triples.without_document",
        ],
    );
    let mut triples = if has(ExportFormat::Kirag) {
        DocTriples::read(cx.out, cx.parts, inputs, opts.triples.as_deref()).await?
    } else {
        DocTriples::default()
    };
    summary.bytes_in += triples.bytes;
    let file =
        |f: ExportFormat| has(f).then(|| Fragments::new(cx.out, cx.dir, &path(&cx.stage.name, f)));
    let (mut ircot, mut kirag) = (file(ExportFormat::Ircot), file(ExportFormat::Kirag));
    let mut seen = FirstSeen::default();
    for part in source_parts(cx.parts, TableKind::Documents, inputs, None) {
        summary.bytes_in += part.bytes;
        let id = part.id().expect("a part of source_parts has an id");
        let mut docs: Vec<Document> = Vec::new();
        each_row(cx.out, TableKind::Documents, part, |d: Document| {
            docs.push(d)
        })
        .await?;
        let (mut corpus, mut kg) = (String::new(), String::new());
        for d in docs.into_iter().filter(|d| seen.first(d)) {
            summary.records_in += 1;
            summary.add("documents", 1);
            if ircot.is_some() {
                let lines = ircot_lines(&d);
                summary.add("paragraphs", lines.lines().count() as u64);
                corpus.push_str(&lines);
            }
            let Some(cited) = kirag.as_ref().and_then(|_| triples.take(&d)) else {
                continue;
            };
            summary.add("documents.with_triples", 1);
            summary.add("triples", cited.len() as u64);
            let items: Vec<_> = cited
                .into_iter()
                .map(|t| {
                    let sentence = t.sentence;
                    let [h, r, o] = words(t);
                    json!({
                        "text": format!("<{h}; {r}; {o}>"),
                        "sentence": sentence,
                        "head": h,
                        "relation": r,
                        "tail": o,
                    })
                })
                .collect();
            let line = json!({"id": d.id, "title": d.title, "text": d.text, "triples": items});
            kg.push_str(&line.to_string());
            kg.push('\n');
        }
        for (f, text) in [(&mut ircot, corpus), (&mut kirag, kg)] {
            if let Some(f) = f.as_mut().filter(|_| !text.is_empty()) {
                f.write(&id.tag, id.shard, &text).await?;
            }
        }
    }
    summary.add(
        "triples.without_document",
        triples.without_document + triples.left(),
    );
    let mut intermediate = Vec::new();
    for f in [ircot, kirag].into_iter().flatten() {
        intermediate.extend(f.finish().await?);
    }
    summary.seconds = started.elapsed().as_secs_f64();
    Ok(StageOutput {
        summary,
        intermediate,
        ..Default::default()
    })
}

/// The merge task: each file's fragments joined in part order.
async fn merge(opts: &ExportOptions, cx: MergeCx<'_>) -> Result<StageOutput, ExecError> {
    let started = Instant::now();
    let mut summary = StageSummary::new(&cx.stage.name);
    let mut files = Vec::new();
    for &f in &opts.formats {
        files.push(concat(cx.out, cx.dir, cx.shards, &path(&cx.stage.name, f)).await?);
    }
    summary.bytes_out = files.iter().map(|f| f.bytes).sum();
    summary.seconds = started.elapsed().as_secs_f64();
    Ok(StageOutput {
        summary,
        files,
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use distillery_core::{Paragraph, Section};

    #[test]
    fn lead_paragraphs_are_abstracts() {
        let para = |start, end, section| Paragraph {
            start,
            end,
            section,
        };
        let mut d = Document {
            id: "d".into(),
            title: "T".into(),
            uri: "enwiki:T".into(),
            text: "Lead one. Body two.".into(),
            sections: vec![
                Section {
                    title: "T".into(),
                    level: 1,
                    start: 0,
                    end: 9,
                },
                Section {
                    title: "History".into(),
                    level: 2,
                    start: 10,
                    end: 19,
                },
            ],
            paragraphs: vec![para(0, 9, 0), para(10, 19, 1)],
            ..Default::default()
        };
        let lines: Vec<serde_json::Value> = ircot_lines(&d)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(
            lines[0],
            json!({"id": "d-0", "title": "T", "paragraph_index": 0,
                   "paragraph_text": "Lead one.", "url": "enwiki:T", "is_abstract": true})
        );
        assert_eq!(lines[1]["is_abstract"], false);
        assert_eq!(lines[1]["paragraph_text"], "Body two.");
        // Without sections, the first paragraph is the abstract.
        d.sections.clear();
        d.paragraphs = vec![para(0, 9, -1), para(10, 19, -1)];
        assert!(is_abstract(&d, 0) && !is_abstract(&d, 1));
    }
}
