//! The `compound` stage: HANRAG's compound-query benchmark (paper 001, appendix B.1) from the
//! documents of its inputs, and the Revelator samples it trains (router class `compound
//! question`, decomposer `<Q, q1 … qn>`; B.2, B.3).
//!
//! 1. **Entities.** Every document title of the inputs is a candidate, in the order of a hash
//!    of the title (the paper's random pick, the same on every run). A candidate's documents
//!    are its own page (when the inputs hold one) and the pages that link to it (MediaWiki
//!    `links`) and the documents without links (QA context paragraphs) whose text names its
//!    title; at most `docs_per_entity`, own page first, the others in hash order, a text
//!    staged twice (by two inputs) once. A candidate with fewer than 2 documents is skipped;
//!    `max_entities` are taken.
//! 2. **Simple questions.** Per (entity, document) the teacher writes one question about the
//!    entity with its answer ([`distillery_distill::compound`]); the document is shown as its
//!    first `doc_chars` characters (a linking page: from the paragraph holding the link). An
//!    answer not found in that excerpt is dropped and counted.
//! 3. **Compound questions.** An entity's kept questions are cut into groups of 2 to 4 (sizes
//!    from a hash of the entity, no group of 1 left over); the teacher combines each group
//!    into one question (or answers `no`: dropped, counted). The compound answer is the
//!    sub-answers joined by `; `, each kept apart in `answers`.
//! 4. **Outputs.** `<stage>/benchmark/{train,dev,test}.jsonl`, split by a hash of the entity
//!    (`dev_share`, `test_share`: the paper's 50,000 / 8,000 / 2,000 by default), one line per
//!    compound question: `{id, entity, question, answer, answers, sub_questions: [{question,
//!    answer, document_id, title}], documents, split}`. The train split's questions become
//!    Revelator samples ([`distillery_label::hanrag::compound_samples`], the label stage's
//!    templates, `templates` replacing them) in the `sft` table and `<stage>/train.jsonl`,
//!    `validation.jsonl`, `dataset_info.json`. `distillery report compound` scores predictions
//!    against a split with the paper's accuracy.
//!
//! The stage runs as one task per shard (`run.shards`, or `tasks`) plus its merge task: every
//! task reads every document and makes the same pick, then handles the entities of its
//! output parts (64 parts by a hash of the entity, part modulo the task count), so the teacher
//! calls spread over the tasks and the merged benchmark holds the same bytes for any task
//! count. Teacher calls go `llm.max_concurrency` at a time per task through the response
//! cache, so a rerun makes no call. **Memory: every document of the inputs, per task**
//! (titles, links and text). Counters: `corpus.documents` (counted once for all tasks),
//! `entities` (the stage's records), `documents`, `qa.asked`, `qa.kept`,
//! `qa.answer_not_in_document`, `qa.invalid`, `compounds.asked`, `compounds.kept`,
//! `compounds.refused`, `compounds.invalid`, `benchmark.train`, `benchmark.dev`,
//! `benchmark.test`, `decontaminated`, `samples.*`, `llm.*`.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use distillery_core::id::{shard_of, stable_id};
use distillery_core::schema::to_batch;
use distillery_core::spec::{StageCheck, StageSpec};
use distillery_core::summary::StageSummary;
use distillery_core::{
    DecompositionStep, Document, QuarantineRecord, Question, SftSample, TableKind, char_slice,
};
use distillery_distill::compound::{
    COMBINE_SCHEMA, COMBINE_TEMPLATE, CombineParser, CompoundPrompts, QA_SCHEMA, QA_TEMPLATE,
    QaParser, answer_in,
};
use distillery_label::normalize::normalize_answer;
use distillery_llm::Outcome;
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::contract::options::SftSplit;
use crate::contract::{
    Declared, MergeCx, Partitioning, RunCx, SideFile, Stage, StageFuture, StageOutput, stage_tag,
};
use crate::error::ExecError;
use crate::kit::doc_triples::{each_row, source_parts};
use crate::kit::fragments::{Fragments, concat};
use crate::kit::sft_out::{SftOut, merge_stage};
use crate::kit::teacher::{Teacher, teacher_name};
use crate::parts::PartWriters;

fn default_entities() -> u64 {
    100
}
fn default_docs() -> u32 {
    10
}
fn default_doc_chars() -> u32 {
    1500
}
fn default_tokens() -> u32 {
    128
}
fn default_dev() -> f64 {
    0.133
}
fn default_test() -> f64 {
    0.033
}
/// `compound` stage options (HANRAG appendix B.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CompoundOptions {
    /// Entities to build questions for (the paper: 10,000).
    #[serde(default = "default_entities")]
    pub max_entities: u64,
    /// Documents per entity at most: its page and pages linking to it (the paper: 10).
    #[serde(default = "default_docs")]
    pub docs_per_entity: u32,
    /// Characters of a document shown to the teacher.
    #[serde(default = "default_doc_chars")]
    pub doc_chars: u32,
    /// `max_tokens` of each teacher answer.
    #[serde(default = "default_tokens")]
    pub max_tokens: u32,
    /// Share of entities (by hash) whose compound questions form the dev split.
    #[serde(default = "default_dev")]
    pub dev_share: f64,
    /// Share of entities (by hash) whose compound questions form the test split.
    #[serde(default = "default_test")]
    pub test_share: f64,
    /// The validation split and the decontamination (`validation_share`, `decontaminate`,
    /// `decontaminate_formats`: see [`SftSplit`]).
    #[serde(flatten)]
    pub split: SftSplit,
    /// Directory of templates replacing the built-in ones: the benchmark's
    /// (`compound_qa_*.txt`, `compound_combine_*.txt`) and the label stage's router and
    /// decomposer (`hanrag_router_*.txt`, `hanrag_decomposer_*.txt`).
    #[serde(default)]
    pub templates: Option<String>,
}

/// The `compound` stage.
pub struct CompoundStage;

const SPLITS: [&str; 3] = ["train", "dev", "test"];

fn benchmark_file(stage: &str, split: &str) -> String {
    format!("{stage}/benchmark/{split}.jsonl")
}

impl Stage for CompoundStage {
    type Options = CompoundOptions;

    fn kind(&self) -> &'static str {
        "compound"
    }

    fn uses_llm(&self) -> bool {
        true
    }

    fn check(&self, o: &mut CompoundOptions, cx: &mut StageCheck<'_, '_>) {
        if o.max_entities == 0 || o.docs_per_entity < 2 || o.doc_chars == 0 || o.max_tokens == 0 {
            cx.error(
                "",
                "`max_entities`, `doc_chars` and `max_tokens` must be at least 1, \
                 `docs_per_entity` at least 2 (a compound question combines 2 to 4)",
            );
        }
        let shares = [o.dev_share, o.test_share];
        if shares.iter().any(|s| !(0.0..1.0).contains(s)) || o.dev_share + o.test_share >= 1.0 {
            cx.error(
                "",
                "`dev_share` and `test_share` must be in [0, 1), `dev_share + test_share` below 1",
            );
        }
        crate::kit::decontam::check(cx, &o.split);
    }

    fn resolve(
        &self,
        o: &CompoundOptions,
        stage: &StageSpec,
    ) -> Result<Vec<SideFile>, Vec<String>> {
        crate::kit::decontam::resolve(stage, &o.split)
    }

    fn outputs(&self, _o: &CompoundOptions, stage: &StageSpec) -> Declared {
        let extra: Vec<String> = SPLITS
            .iter()
            .map(|s| format!("benchmark/{s}.jsonl"))
            .collect();
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        crate::kit::sft_out::sft_declared(&stage.name, &extra)
    }

    /// Every task reads every documents part (only questions are split) and takes the
    /// entities of its parts ([`part_of`]).
    fn partitioning(&self) -> Partitioning {
        Partitioning::Questions
    }

    fn merges(&self) -> bool {
        true
    }

    fn run<'a>(&'a self, o: &'a CompoundOptions, cx: RunCx<'a>) -> StageFuture<'a> {
        Box::pin(run_stage(o, cx))
    }

    fn merge<'a>(&'a self, _o: &'a CompoundOptions, cx: MergeCx<'a>) -> StageFuture<'a> {
        Box::pin(async move {
            let mut files = Vec::new();
            for split in SPLITS {
                let name = benchmark_file(&cx.stage.name, split);
                files.push(concat(cx.out, cx.dir, cx.shards, &name).await?);
            }
            merge_stage(&cx, &cx.stage.name, files).await
        })
    }
}

/// The text of a document the teacher sees: from the paragraph holding `at` (a char offset;
/// the start without one), at most `chars` characters, ending at the last sentence that ends
/// inside them (the document's sentence spans; a hard cut when the first one is longer).
fn excerpt(d: &Document, at: Option<u32>, chars: u32) -> String {
    let start = at
        .and_then(|a| d.paragraphs.iter().find(|p| p.start <= a && a < p.end))
        .map_or(0, |p| p.start);
    let len = d.text.chars().count() as u32;
    let limit = start.saturating_add(chars).min(len);
    let end = d
        .sentences
        .iter()
        .filter(|s| s.start >= start && s.end <= limit)
        .map(|s| s.end)
        .max()
        .unwrap_or(limit);
    char_slice(&d.text, start, end)
        .unwrap_or(&d.text)
        .trim()
        .to_string()
}

/// An entity and its documents (indexes into the corpus) with the char offset of the link
/// to it in each (none for its own page or a text mention).
struct Entity {
    title: String,
    docs: Vec<(usize, Option<u32>)>,
}

/// Step 1: the entities of the corpus, in hash order.
fn pick_entities(docs: &[Document], o: &CompoundOptions) -> Vec<Entity> {
    let mut by_title: HashMap<&str, usize> = HashMap::new();
    for (i, d) in docs.iter().enumerate() {
        by_title.entry(d.title.as_str()).or_insert(i);
    }
    // Documents with links point at the pages they link to; the others (QA context
    // paragraphs) at the titles their text names.
    let mut linked: HashMap<&str, Vec<(usize, u32)>> = HashMap::new();
    for (i, d) in docs.iter().enumerate() {
        let mut seen = HashSet::new();
        for l in &d.links {
            if l.target != d.title && seen.insert(l.target.as_str()) {
                linked
                    .entry(l.target.as_str())
                    .or_default()
                    .push((i, l.start));
            }
        }
    }
    let unlinked: Vec<(usize, String)> = docs
        .iter()
        .enumerate()
        .filter(|(_, d)| d.links.is_empty())
        .map(|(i, d)| (i, normalize_answer(&d.text)))
        .collect();
    let mut titles: Vec<&str> = by_title.keys().copied().collect();
    titles.sort_by_key(|t| (stable_id(&["entity", t]), *t));
    let order = |i: &usize| stable_id(&["doc", &docs[*i].id]);
    let mut out = Vec::new();
    // Candidates in batches: each batch's mentions come from one scan of the texts.
    let batch = (4 * o.max_entities).clamp(256, 65_536) as usize;
    for chunk in titles.chunks(batch) {
        let named = mentions(chunk, &unlinked);
        for (t, named) in chunk.iter().zip(named) {
            if out.len() as u64 >= o.max_entities {
                return out;
            }
            let own = by_title[t];
            let mut others: Vec<(usize, Option<u32>)> = linked
                .get(t)
                .map(|v| v.iter().map(|&(i, at)| (i, Some(at))).collect())
                .unwrap_or_default();
            others.extend(
                named
                    .into_iter()
                    .filter(|&i| i != own && docs[i].title != *t)
                    .map(|i| (i, None)),
            );
            others.sort_by_key(|(i, _)| order(i));
            // The same paragraph staged by two inputs (two ids, one text) counts once.
            let mut texts: HashSet<&str> = HashSet::from([docs[own].text.as_str()]);
            let mut entity_docs = vec![(own, None)];
            for (i, at) in others {
                if entity_docs.len() >= o.docs_per_entity as usize {
                    break;
                }
                if texts.insert(docs[i].text.as_str()) {
                    entity_docs.push((i, at));
                }
            }
            if entity_docs.len() >= 2 {
                out.push(Entity {
                    title: t.to_string(),
                    docs: entity_docs,
                });
            }
        }
    }
    out
}

/// Per title of `titles`: the documents of `texts` (index, normalised text) whose text names
/// it (its normalised form as whole words), each once, in `texts` order. One scan of every
/// text for all the titles.
fn mentions(titles: &[&str], texts: &[(usize, String)]) -> Vec<Vec<usize>> {
    let names: Vec<String> = titles.iter().map(|t| normalize_answer(t)).collect();
    let mut out: Vec<Vec<usize>> = vec![Vec::new(); titles.len()];
    // Empty names match nothing; the automaton gets the others, with their title index.
    let (pattern, of): (Vec<&str>, Vec<usize>) = names
        .iter()
        .enumerate()
        .filter(|(_, n)| !n.is_empty())
        .map(|(k, n)| (n.as_str(), k))
        .unzip();
    if pattern.is_empty() {
        return out;
    }
    let ac = aho_corasick::AhoCorasick::new(&pattern).expect("titles build an automaton");
    for (doc, text) in texts {
        let bytes = text.as_bytes();
        for m in ac.find_overlapping_iter(text.as_str()) {
            let whole = (m.start() == 0 || bytes[m.start() - 1] == b' ')
                && (m.end() == bytes.len() || bytes[m.end()] == b' ');
            let k = of[m.pattern().as_usize()];
            if whole && out[k].last() != Some(doc) {
                out[k].push(*doc);
            }
        }
    }
    out
}

/// Step 3's group sizes for `n` questions of `entity`: 2 to 4 each, from a hash, never a
/// group of 1 left.
fn group_sizes(entity: &str, n: usize) -> Vec<usize> {
    let mut sizes = Vec::new();
    let mut left = n;
    let mut k = 0;
    while left >= 2 {
        let mut size =
            (2 + shard_of(&format!("group\u{1f}{entity}\u{1f}{k}"), 3) as usize).min(left);
        if left - size == 1 {
            size = if size < 4 { size + 1 } else { size - 1 };
        }
        sizes.push(size);
        left -= size;
        k += 1;
    }
    sizes
}

/// The output parts an entity's lines and samples go to; a part belongs to one task (part
/// modulo the task count), so the merged benchmark is the same bytes for any task count.
const PARTS: u32 = 64;

fn part_of(entity: &str) -> u32 {
    shard_of(&format!("compound-part\u{1f}{entity}"), PARTS)
}

/// The benchmark split of an entity.
fn split_of(entity: &str, o: &CompoundOptions) -> &'static str {
    const SCALE: u32 = 1_000_000;
    let u = f64::from(shard_of(&format!("compound\u{1f}{entity}"), SCALE)) / f64::from(SCALE);
    if u < o.test_share {
        "test"
    } else if u < o.test_share + o.dev_share {
        "dev"
    } else {
        "train"
    }
}

/// A kept simple question.
struct Simple {
    question: String,
    answer: String,
    doc: usize,
    /// The response-cache entry of the question.
    entry: String,
}

async fn run_stage(o: &CompoundOptions, cx: RunCx<'_>) -> Result<StageOutput, ExecError> {
    let (p, stage, out, staging) = (cx.pipeline, cx.stage, cx.out, cx.dir);
    let started = Instant::now();
    let (llm, teacher) = Teacher::for_task(&cx)?;
    let prompts = CompoundPrompts::load(o.templates.as_deref())
        .map_err(|e| ExecError::Task(e.to_string()))?;
    let (qa_version, combine_version) = prompts.versions();
    let label_prompts = distillery_label::prompt::Prompts::load(o.templates.as_deref())
        .map_err(|e| ExecError::Task(e.to_string()))?;
    let counter = distillery_label::prompt::TokenCounter::new(None, 4.0)
        .map_err(|e| ExecError::Task(e.to_string()))?;
    let mut summary = StageSummary::with_counters(
        &stage.name,
        &[
            "entities",
            "documents",
            "qa.asked",
            "qa.kept",
            "qa.answer_not_in_document",
            "qa.invalid",
            "compounds.asked",
            "compounds.kept",
            "compounds.refused",
            "compounds.invalid",
            "benchmark.train",
            "benchmark.dev",
            "benchmark.test",
            "llm.quarantined",
        ],
    );

    // Step 1: the corpus and its entities.
    let mut docs: Vec<Document> = Vec::new();
    let parts = source_parts(cx.parts, TableKind::Documents, &stage.inputs, None);
    let tag = parts
        .first()
        .and_then(|w| w.id())
        .map_or_else(|| stage.name.clone(), |id| id.tag);
    let mut corpus_bytes = 0;
    for part in parts {
        corpus_bytes += part.bytes;
        each_row(out, TableKind::Documents, part, |d: Document| {
            if d.redirect.is_none() && !d.text.trim().is_empty() {
                docs.push(d);
            }
        })
        .await?;
    }
    // The pick is over the whole corpus, every task alike; each keeps its parts' entities.
    let (_, tasks) = crate::task::partitioning(p, stage);
    let entities: Vec<Entity> = pick_entities(&docs, o)
        .into_iter()
        .filter(|e| cx.shard.is_none_or(|s| part_of(&e.title) % tasks == s))
        .collect();
    summary.add("entities", entities.len() as u64);
    summary.records_in = entities.len() as u64;

    // Step 2: a simple question per (entity, document).
    let asks: Vec<(usize, usize, Option<u32>)> = entities
        .iter()
        .enumerate()
        .flat_map(|(e, ent)| ent.docs.iter().map(move |&(d, at)| (e, d, at)))
        .collect();
    summary.add("documents", asks.len() as u64);
    let shown: Vec<String> = asks
        .iter()
        .map(|&(_, d, at)| excerpt(&docs[d], at, o.doc_chars))
        .collect();
    let results: Vec<Result<Outcome, ExecError>> = futures::stream::iter(0..asks.len())
        .map(|k| {
            let (e, d, _) = asks[k];
            let req = prompts.qa_request(
                &entities[e].title,
                &docs[d].title,
                &shown[k],
                o.max_tokens,
                llm.seed,
            );
            let (teacher, version) = (&teacher, &qa_version);
            async move {
                teacher
                    .ask(
                        (QA_TEMPLATE, version),
                        (&llm.model_revision, QA_SCHEMA),
                        &QaParser,
                        &req,
                    )
                    .await
            }
        })
        .buffered(llm.max_concurrency.max(1))
        .collect()
        .await;
    let mut bad: Vec<(u32, QuarantineRecord)> = Vec::new();
    let mut quarantine = |summary: &mut StageSummary,
                          (part, key): (u32, &str),
                          template: &str,
                          raw: &str,
                          reason: &str| {
        summary.add("llm.quarantined", 1);
        summary.quarantined += 1;
        bad.push((
            part,
            QuarantineRecord {
                id: stable_id(&[key, template]),
                dataset: "compound".into(),
                source: key.to_string(),
                reason: "llm_invalid_answer".into(),
                detail: format!("{template}: {reason}"),
                excerpt: raw.chars().take(512).collect(),
                ..Default::default()
            },
        ));
    };
    let mut simple: Vec<Vec<Simple>> = (0..entities.len()).map(|_| Vec::new()).collect();
    for (k, (&(e, d, _), r)) in asks.iter().zip(results).enumerate() {
        summary.add("qa.asked", 1);
        let r = r?;
        let entry = r.entry().to_string();
        match r {
            Outcome::Parsed { value, .. } => {
                let (q, a) = (
                    value["question"].as_str().unwrap_or_default(),
                    value["answer"].as_str().unwrap_or_default(),
                );
                // In what the teacher saw, not merely somewhere in the page.
                if answer_in(a, &shown[k]) {
                    summary.add("qa.kept", 1);
                    simple[e].push(Simple {
                        question: q.to_string(),
                        answer: a.to_string(),
                        doc: d,
                        entry,
                    });
                } else {
                    summary.add("qa.answer_not_in_document", 1);
                }
            }
            Outcome::Invalid { raw, reason, .. } => {
                summary.add("qa.invalid", 1);
                let key = format!("{} / {}", entities[e].title, docs[d].id);
                let part = part_of(&entities[e].title);
                quarantine(&mut summary, (part, &key), QA_TEMPLATE, &raw, &reason);
            }
        }
    }

    // Step 3: groups of 2 to 4 combined.
    let groups: Vec<(usize, Vec<usize>)> = simple
        .iter()
        .enumerate()
        .flat_map(|(e, qs)| {
            let mut at = 0;
            group_sizes(&entities[e].title, qs.len())
                .into_iter()
                .map(|n| {
                    let g = (e, (at..at + n).collect());
                    at += n;
                    g
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let combined: Vec<Result<Outcome, ExecError>> = futures::stream::iter(0..groups.len())
        .map(|k| {
            let (e, idx) = &groups[k];
            let qs: Vec<&str> = idx
                .iter()
                .map(|&i| simple[*e][i].question.as_str())
                .collect();
            let req = prompts.combine_request(&qs, o.max_tokens, llm.seed);
            let (teacher, version) = (&teacher, &combine_version);
            async move {
                teacher
                    .ask(
                        (COMBINE_TEMPLATE, version),
                        (&llm.model_revision, COMBINE_SCHEMA),
                        &CombineParser,
                        &req,
                    )
                    .await
            }
        })
        .buffered(llm.max_concurrency.max(1))
        .collect()
        .await;

    // Step 4: the benchmark and the samples.
    let mut files: HashMap<&str, Fragments> = SPLITS
        .iter()
        .map(|s| {
            (
                *s,
                Fragments::new(out, staging, &benchmark_file(&stage.name, s)),
            )
        })
        .collect();
    let mut sft = SftOut::new(out, staging, &stage.name, o.split.validation_share)
        .decontaminated_by(
            crate::kit::decontam::load(
                &o.split.decontaminate,
                &o.split.decontaminate_formats,
                cx.side,
            )
            .await?,
        );
    // Every task reads the whole corpus: its documents and bytes are counted once, by the
    // merge.
    sft.shared("corpus.documents", docs.len() as u64);
    sft.shared_bytes_in(corpus_bytes);
    let mut pw = PartWriters::new(out.clone(), staging, &stage_tag(&tag, &stage.name));
    let params = json!({ "teacher": llm.model }).to_string();
    let teacher_label = teacher_name(llm);
    // Per kept compound question: its part, split, benchmark line, question and samples;
    // written by part (each part's lines together, entity order inside it).
    let mut made: Vec<(u32, &'static str, String, String, Vec<SftSample>)> = Vec::new();
    for ((e, idx), r) in groups.iter().zip(combined) {
        summary.add("compounds.asked", 1);
        let ent = &entities[*e];
        let subs: Vec<&Simple> = idx.iter().map(|&i| &simple[*e][i]).collect();
        let r = r?;
        let combine_entry = r.entry().to_string();
        let question = match r {
            Outcome::Parsed { value, .. } => match value["compound"].as_str() {
                Some(c) => c.to_string(),
                None => {
                    summary.add("compounds.refused", 1);
                    continue;
                }
            },
            Outcome::Invalid { raw, reason, .. } => {
                summary.add("compounds.invalid", 1);
                let key = format!("{} / group {}", ent.title, idx[0]);
                let part = part_of(&ent.title);
                quarantine(&mut summary, (part, &key), COMBINE_TEMPLATE, &raw, &reason);
                continue;
            }
        };
        summary.add("compounds.kept", 1);
        let answers: Vec<String> = subs.iter().map(|s| s.answer.clone()).collect();
        let mut documents: Vec<String> = Vec::new();
        for s in &subs {
            if !documents.contains(&docs[s.doc].id) {
                documents.push(docs[s.doc].id.clone());
            }
        }
        let id = stable_id(&["compound", &ent.title, &question]);
        let split = split_of(&ent.title, o);
        summary.add(&format!("benchmark.{split}"), 1);
        let line = json!({
            "id": id,
            "entity": ent.title,
            "question": question,
            "answer": answers.join("; "),
            "answers": answers,
            "sub_questions": subs.iter().map(|s| json!({
                "question": s.question, "answer": s.answer,
                "document_id": docs[s.doc].id, "title": docs[s.doc].title,
            })).collect::<Vec<_>>(),
            "documents": documents,
            "split": split,
        });
        let part = part_of(&ent.title);
        if split != "train" {
            made.push((part, split, format!("{line}\n"), question, Vec::new()));
            continue;
        }
        let q = Question {
            id: id.clone(),
            dataset: "compound".into(),
            question: question.clone(),
            answers: answers.clone(),
            question_type: Some("compound".into()),
            decomposition: subs
                .iter()
                .map(|s| DecompositionStep {
                    question: s.question.clone(),
                    answer: Some(s.answer.clone()),
                    support: Vec::new(),
                })
                .collect(),
            context_documents: documents,
            ..Default::default()
        };
        // Lineage: the sub-questions' entries, then the combination's.
        let mut entries: Vec<String> = subs.iter().map(|s| s.entry.clone()).collect();
        entries.push(combine_entry);
        let mut samples = distillery_label::hanrag::compound_samples(
            &label_prompts,
            &counter,
            &p.hash,
            &q,
            &params,
        );
        for s in &mut samples {
            s.teacher = Some(teacher_label.clone());
            s.cache_entries = entries.clone();
        }
        made.push((part, split, format!("{line}\n"), question, samples));
    }
    made.sort_by_key(|m| m.0);
    for (part, split, line, question, samples) in made {
        let f = files.get_mut(split).expect("three splits");
        f.write(&tag, part, &line).await?;
        for s in samples {
            sft.add(s, &question, pw.tag(), part).await?;
        }
    }
    sft.flush(&mut pw).await?;
    bad.sort_by_key(|b| b.0);
    for chunk in bad.chunk_by(|a, b| a.0 == b.0) {
        let rows: Vec<QuarantineRecord> = chunk.iter().map(|b| b.1.clone()).collect();
        pw.write(
            TableKind::Quarantine,
            chunk[0].0,
            &to_batch(TableKind::Quarantine, &rows)?,
        )
        .await?;
    }
    let written = pw.finish().await?;
    let mut staged = sft.finish(&mut summary).await?;
    for s in SPLITS {
        let f = files.remove(s).expect("three splits");
        staged.extend(f.finish().await?);
    }
    Ok(teacher.finish_shard(summary, written, staged, started))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mentions_are_whole_word_and_match_a_scan_per_title() {
        let texts: Vec<(usize, String)> = [
            "liu xiang won in athens",
            "xiang liu is someone else",
            "the liu xiangs",
            "athens and liu xiang and athens",
        ]
        .iter()
        .enumerate()
        .map(|(i, t)| (i * 10, t.to_string()))
        .collect();
        // "The" normalises to nothing (articles go): it names no text.
        let titles = ["Liu Xiang", "Athens", "Xiangs", "The"];
        let got = mentions(&titles, &texts);
        assert_eq!(got, vec![vec![0, 30], vec![0, 30], vec![20], vec![]]);
        // The same as checking each title against each text.
        for (k, t) in titles.iter().enumerate() {
            let name = normalize_answer(t);
            let want: Vec<usize> = texts
                .iter()
                .filter(|(_, x)| distillery_label::normalize::contains_phrase(x, &name))
                .map(|(i, _)| *i)
                .collect();
            assert_eq!(got[k], want, "{t}");
        }
    }

    #[test]
    fn groups_are_2_to_4_with_none_left_over() {
        for n in 0..40 {
            let sizes = group_sizes("Liu Xiang", n);
            assert!(sizes.iter().all(|s| (2..=4).contains(s)), "{n}: {sizes:?}");
            let total: usize = sizes.iter().sum();
            assert!(total == n || (n == 1 && total == 0), "{n}: {sizes:?}");
        }
    }

    #[test]
    fn excerpts_start_at_the_linking_paragraph_and_end_at_a_sentence() {
        let span = |start: u32, end: u32, paragraph: i32| distillery_core::Sentence {
            start,
            end,
            paragraph,
        };
        let para = |start: u32, end: u32| distillery_core::Paragraph {
            start,
            end,
            section: 0,
        };
        let d = Document {
            text: "First paragraph. About cats.\nSecond one names Liu Xiang. It ends here.".into(),
            paragraphs: vec![para(0, 28), para(29, 70)],
            sentences: vec![
                span(0, 16, 0),
                span(17, 28, 0),
                span(29, 56, 1),
                span(57, 70, 1),
            ],
            ..Default::default()
        };
        assert_eq!(
            excerpt(&d, Some(46), 100),
            "Second one names Liu Xiang. It ends here."
        );
        assert_eq!(excerpt(&d, None, 30), "First paragraph. About cats.");
        assert_eq!(excerpt(&d, None, 20), "First paragraph.");
        assert_eq!(
            excerpt(&d, None, 10),
            "First para",
            "no sentence fits: a hard cut"
        );
    }
}
