//! The `text2triple` stage: SFT samples for RAS's text-to-triple extractor (seed 002, 3.2 and
//! appendix C.1): a passage in, its triples out in RAS's target form
//! `(S> s| P> p| O> o), (S> s2| P> p2| O> o2)` ([`distillery_core::ras_form`]).
//!
//! The pairs come from the stage's inputs' staged `documents` and `triples`:
//! - by default the inputs' own triples, those a reader gave each document: WikiOFGraph
//!   (`wikiofgraph` input), where each record is one text and its triples in order, so the
//!   target is the record's `triplet` in RAS's form, exactly;
//! - with `triples = "<stage>"`, the triples a `triples` stage extracted with the teacher from
//!   any corpus (the stage's `triples` parts, `<input>@<stage>`).
//!
//! A triple belongs to the paragraph of its document that holds its supporting span
//! (`start`; one without a span, to the paragraph of a one-paragraph document, else it is
//! counted as unplaced); one sample per paragraph with at least one triple, its triples in the order the
//! table holds them (a document's triples are in its shard: see `sink::shard_key`), each end
//! written with its name when it has one (an extracted triple's words as the text has them,
//! its key being normalised), else its key. The user
//! turn is the prompt template (built in, or the file `template` names, with `{text}`) filled
//! with the paragraph; the assistant turn is the target. Samples (task `ras_text2triple`) go
//! to `<stage>/train.jsonl`, `validation.jsonl`, `dataset_info.json` and the `sft` table, split
//! by document id (a document's samples go together) and, through the merge task, without
//! exact duplicates across tasks ([`crate::kit::sft_out`]). Lineage: `question_id` is the
//! document id, `params` names the triples' source.
//!
//! One task per shard; **memory: the shard's documents and the triples they hold.**
//! Counters: `documents`, `documents.without_triples`, `paragraphs`, `triples`,
//! `triples.unplaced` (no document or offsets to place them), `samples.*`,
//! `duplicates_removed`.

use std::time::Instant;

use distillery_core::id::{sha1_hex, stable_id};
use distillery_core::ras_form;
use distillery_core::spec::{StageCheck, StageSpec};
use distillery_core::summary::StageSummary;
use distillery_core::{Document, Message, SftSample, TableKind, char_slice};
use serde::{Deserialize, Serialize};

use crate::contract::options::SftSplit;
use crate::contract::{
    Declared, MergeCx, Partitioning, RunCx, SideFile, Stage, StageFuture, StageOutput, stage_tag,
};
use crate::error::ExecError;
use crate::kit::doc_triples::{DocTriples, FirstSeen, each_row, source_parts, words};
use crate::kit::sft_out::{SftOut, merge_stage};
use crate::parts::PartWriters;

/// The built-in prompt: instruction prose of our own around RAS's exact target form.
pub const TEMPLATE: &str = "Turn the text below into knowledge-graph triples. Write every fact \
it states as (S> subject| P> predicate| O> object) and separate the triples with \", \". Name \
entities as the text does, never with a pronoun, and let each predicate say the relation \
plainly.\n\nText: {text}";

/// `text2triple` stage options (RAS text-to-triple SFT).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Text2TripleOptions {
    /// The name of a `triples` stage whose teacher-extracted triples are the targets. Default:
    /// the inputs' own triples (a `wikiofgraph` input's).
    #[serde(default)]
    pub triples: Option<String>,
    /// A prompt template file replacing the built-in one; `{text}` marks the passage.
    #[serde(default)]
    pub template: Option<String>,
    /// The validation split and the decontamination (`validation_share`, `decontaminate`,
    /// `decontaminate_formats`: see [`SftSplit`]).
    #[serde(flatten)]
    pub split: SftSplit,
}

/// The `text2triple` stage.
pub struct Text2Triple;

impl Stage for Text2Triple {
    type Options = Text2TripleOptions;

    fn kind(&self) -> &'static str {
        "text2triple"
    }

    fn check(&self, o: &mut Text2TripleOptions, cx: &mut StageCheck<'_, '_>) {
        if let Some(t) = &o.template {
            match read_template(t) {
                Ok(text) if text.contains("{text}") => {}
                Ok(_) => cx.error("template", format!("{t}: the template has no `{{text}}`")),
                Err(e) => cx.error("template", format!("{t}: {e}")),
            }
        }
        crate::kit::decontam::check(cx, &o.split);
    }

    fn resolve(
        &self,
        o: &Text2TripleOptions,
        stage: &StageSpec,
    ) -> Result<Vec<SideFile>, Vec<String>> {
        crate::kit::decontam::resolve(stage, &o.split)
    }

    fn outputs(&self, _o: &Text2TripleOptions, stage: &StageSpec) -> Declared {
        crate::kit::sft_out::sft_declared(&stage.name, &[])
    }

    fn partitioning(&self) -> Partitioning {
        Partitioning::Shards
    }

    fn merges(&self) -> bool {
        true
    }

    fn run<'a>(&'a self, o: &'a Text2TripleOptions, cx: RunCx<'a>) -> StageFuture<'a> {
        Box::pin(run(o, cx))
    }

    fn merge<'a>(&'a self, _o: &'a Text2TripleOptions, cx: MergeCx<'a>) -> StageFuture<'a> {
        Box::pin(async move { merge_stage(&cx, &cx.stage.name, Vec::new()).await })
    }
}

/// The largest prompt template read.
const MAX_TEMPLATE_BYTES: u64 = 1 << 20;

/// A prompt template file: a regular file of at most [`MAX_TEMPLATE_BYTES`] (a device or FIFO
/// named by the pipeline would never end), as UTF-8.
fn read_template(path: &str) -> Result<String, String> {
    let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a regular file".to_string());
    }
    if meta.len() > MAX_TEMPLATE_BYTES {
        return Err(format!(
            "{} bytes: a prompt template is at most {MAX_TEMPLATE_BYTES} bytes",
            meta.len()
        ));
    }
    std::fs::read_to_string(path).map_err(|e| e.to_string())
}

/// The paragraph (index) of `d` holding char offset `at`, if any.
fn paragraph_at(d: &Document, at: u32) -> Option<usize> {
    d.paragraphs
        .iter()
        .position(|p| p.start <= at && (at < p.end || (p.start == p.end && at == p.end)))
        .or_else(|| (d.paragraphs.is_empty() && at == 0).then_some(0))
}

async fn run(opts: &Text2TripleOptions, cx: RunCx<'_>) -> Result<StageOutput, ExecError> {
    let started = Instant::now();
    let template = match &opts.template {
        Some(path) => read_template(path).map_err(|e| ExecError::Task(format!("{path}: {e}")))?,
        None => TEMPLATE.to_string(),
    };
    let version = sha1_hex(&template)[..12].to_string();
    let inputs = &cx.stage.inputs;
    let from = opts.triples.as_deref();

    let mut summary = StageSummary::with_counters(
        &cx.stage.name,
        &[
            "documents",
            "documents.without_triples",
            "paragraphs",
            "triples",
            "triples.unplaced",
        ],
    );
    let mut triples = DocTriples::read(cx.out, cx.parts, inputs, from).await?;
    summary.bytes_in += triples.bytes;
    let mut unplaced = triples.without_document;
    let params = serde_json::json!({ "triples": from.unwrap_or("input") }).to_string();
    let mut sft = SftOut::new(cx.out, cx.dir, &cx.stage.name, opts.split.validation_share)
        .decontaminated_by(
            crate::kit::decontam::load(
                &opts.split.decontaminate,
                &opts.split.decontaminate_formats,
                cx.side,
            )
            .await?,
        );
    let mut written = Vec::new();
    let mut seen = FirstSeen::default();
    for part in source_parts(cx.parts, TableKind::Documents, inputs, None) {
        summary.bytes_in += part.bytes;
        let id = part.id().expect("a part of parts_of has an id");
        let mut pw = PartWriters::new(cx.out.clone(), cx.dir, &stage_tag(&id.tag, &cx.stage.name));
        let mut docs: Vec<Document> = Vec::new();
        each_row(cx.out, TableKind::Documents, part, |d: Document| {
            docs.push(d)
        })
        .await?;
        for d in docs.into_iter().filter(|d| seen.first(d)) {
            summary.records_in += 1;
            summary.add("documents", 1);
            let Some(cited) = triples.take(&d) else {
                summary.add("documents.without_triples", 1);
                continue;
            };
            let mut paragraphs: Vec<Vec<[String; 3]>> = vec![Vec::new(); d.paragraphs.len().max(1)];
            // Per paragraph, the teacher and cache entries of its triples (a `triples` stage's).
            let mut lineage: Vec<(Option<String>, Vec<String>)> =
                vec![(None, Vec::new()); paragraphs.len()];
            for t in cited {
                // A triple the teacher gave without a supporting sentence still belongs to
                // a one-paragraph document.
                let single = (d.paragraphs.len() <= 1).then_some(0);
                match t.start.map_or(single, |s| paragraph_at(&d, s)) {
                    Some(p) => {
                        summary.add("triples", 1);
                        let (teacher, entries) = &mut lineage[p];
                        if teacher.is_none() {
                            teacher.clone_from(&t.teacher);
                        }
                        if let Some(e) = &t.cache_entry
                            && !entries.contains(e)
                        {
                            entries.push(e.clone());
                        }
                        paragraphs[p].push(words(t));
                    }
                    None => unplaced += 1,
                }
            }
            for (n, triples) in paragraphs.iter().enumerate() {
                if triples.is_empty() {
                    continue;
                }
                let text = match d.paragraphs.get(n) {
                    Some(p) => char_slice(&d.text, p.start, p.end).unwrap_or(&d.text),
                    None => &d.text,
                };
                let prompt = template.replace("{text}", text.trim());
                let target = ras_form::render(triples);
                let tokens = |s: &str| s.chars().count().div_ceil(4) as u32;
                let s = SftSample {
                    id: stable_id(&["ras_text2triple", &d.id, &n.to_string(), &target]),
                    task: "ras_text2triple".into(),
                    prompt_tokens: tokens(&prompt),
                    target_tokens: tokens(&target),
                    messages: vec![
                        Message {
                            role: "user".into(),
                            content: prompt,
                        },
                        Message {
                            role: "assistant".into(),
                            content: target,
                        },
                    ],
                    weight: 1.0,
                    dataset: d.dataset.clone(),
                    question_id: d.id.clone(),
                    method: "ras_text2triple".into(),
                    params: params.clone(),
                    template_id: "ras-text2triple".into(),
                    template_version: version.clone(),
                    pipeline_hash: cx.pipeline.hash.clone(),
                    teacher: lineage[n].0.clone(),
                    cache_entries: lineage[n].1.clone(),
                    ..Default::default()
                };
                summary.add("paragraphs", 1);
                summary.records_out += 1;
                sft.add(s, "", pw.tag(), id.shard).await?;
            }
        }
        sft.flush(&mut pw).await?;
        written.extend(pw.finish().await?);
    }
    // Triples of documents this shard does not hold cannot be placed.
    unplaced += triples.left();
    summary.add("triples.unplaced", unplaced);
    let files = sft.finish(&mut summary).await?;
    summary.bytes_out =
        written.iter().map(|w| w.bytes).sum::<u64>() + files.iter().map(|f| f.bytes).sum::<u64>();
    summary.seconds = started.elapsed().as_secs_f64();
    written.sort_by(|a, b| a.rel.cmp(&b.rel));
    Ok(StageOutput {
        summary,
        parts: written,
        intermediate: files,
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use distillery_core::Paragraph;

    #[test]
    fn a_triple_belongs_to_the_paragraph_of_its_span() {
        let d = Document {
            text: "One. Two.".into(),
            paragraphs: vec![
                Paragraph {
                    start: 0,
                    end: 4,
                    section: -1,
                },
                Paragraph {
                    start: 5,
                    end: 9,
                    section: -1,
                },
            ],
            ..Default::default()
        };
        assert_eq!(paragraph_at(&d, 0), Some(0));
        assert_eq!(paragraph_at(&d, 6), Some(1));
        assert_eq!(paragraph_at(&d, 4), None);
        assert_eq!(paragraph_at(&d, 9), None);
    }

    #[test]
    fn templates_are_regular_files_of_bounded_size() {
        if std::path::Path::new("/dev/zero").exists() {
            assert_eq!(
                read_template("/dev/zero").unwrap_err(),
                "not a regular file"
            );
        }
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big.txt");
        std::fs::write(&big, vec![b'x'; (MAX_TEMPLATE_BYTES + 1) as usize]).unwrap();
        let e = read_template(big.to_str().unwrap()).unwrap_err();
        assert!(e.contains("at most"), "{e}");
        let ok = dir.path().join("t.txt");
        std::fs::write(&ok, "Extract from {text}").unwrap();
        assert_eq!(
            read_template(ok.to_str().unwrap()).unwrap(),
            "Extract from {text}"
        );
    }
}
