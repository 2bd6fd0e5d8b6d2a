//! CIRAG's construction-integration loop with a teacher, and its student SFT samples
//! (paper 003, 3.3-3.5; formats.md "CIRAG trajectory distillation").
//!
//! Per question, for up to `max_steps` (L = 4) steps:
//! 1. **construction**: the current query (the question at step 1, then the teacher's next
//!    sub-question) retrieves the `top_k` (K = 10) best passages (from a [`Retriever`]: the
//!    in-memory BM25 of [`Corpus`], or a built index); each
//!    passage's triples come from the triple extractor (NER then OpenIE, through the response
//!    cache, so passages extracted by a `triples` run cost nothing); the triples not kept by
//!    earlier steps are reranked against the query, by the cosine similarity of their
//!    embeddings when the loop has an embedding model ([`Cirag::with_reranker`], the paper's
//!    bge-small), else by shared words, then by retrieval rank and order in the passage, and
//!    the best `candidates` (N = 30) become `fact_before_filter`,
//!    each rendered `<subject; predicate; object>` with its provenance (passage, document,
//!    sentence) kept;
//! 2. **integration**: the teacher gets `[[## Original Query ##]]`, `[[## fact_before_filter ##]]`
//!    (`{"fact": [...]}`) and `[[## historical_context ##]]` and answers `[[## thought ##]]`,
//!    `[[## fact_after_filter ##]]` (`{"fact": [...]}`, possibly empty) and
//!    `[[## question ##]]` (the next sub-question, or `<no question>` to stop). Facts the
//!    teacher names that were not candidates are dropped and counted.
//!
//! Then the teacher answers the question from every kept fact (`[[## answer ##]]`); the
//! trajectory is kept when the answer's best token F1 against the gold answers (SQuAD
//! normalisation) reaches `min_f1`, else it is filtered out and counted.
//!
//! Every teacher call goes through the response cache. That is the checkpoint of each step:
//! retrieval and reranking are deterministic, so a resumed job replays the steps it already
//! paid for from the cache and continues the trajectory at the first step it had not
//! reached.
//!
//! Student samples ([`step_messages`]): one per step of a kept trajectory: the system
//! instruction, the step's input as the user turn, and the step's decision as the assistant
//! turn ([`render_target`]), the only trained turn.

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use distillery_core::Question;
use distillery_core::id::stable_id;
use distillery_index::Bm25Index;
use distillery_index::dense::Embedder;
use distillery_llm::{
    ChatMessage, ChatRequest, Client, Outcome, Parser, ResponseCache, cached_chat,
};
use distillery_triples::fit::Fitter;
use distillery_triples::{Extraction, Extractor, Passage};
use serde_json::{Value, json};

use crate::DistillError;
use crate::metrics::best_f1;

/// Section markers (exact).
pub const ORIGINAL_QUERY: &str = "[[## Original Query ##]]";
pub const FACT_BEFORE: &str = "[[## fact_before_filter ##]]";
pub const HISTORY: &str = "[[## historical_context ##]]";
pub const THOUGHT: &str = "[[## thought ##]]";
pub const FACT_AFTER: &str = "[[## fact_after_filter ##]]";
pub const QUESTION: &str = "[[## question ##]]";
pub const ANSWER: &str = "[[## answer ##]]";
pub const COMPLETED: &str = "[[## completed ##]]";
/// The stop signal of `[[## question ##]]`.
pub const NO_QUESTION: &str = "<no question>";

pub const INTEGRATION_TEMPLATE: &str = "cirag-integration";
pub const ANSWER_TEMPLATE: &str = "cirag-answer";
const INTEGRATION_SCHEMA: &str = "cirag-integration-1";
const ANSWER_SCHEMA: &str = "cirag-answer-1";

/// Template files; a directory given as the stage's `templates` replaces any of them.
pub const FILES: [&str; 4] = [
    "cirag_system.txt",
    "cirag_user.txt",
    "cirag_answer_system.txt",
    "cirag_answer_user.txt",
];
const BUILTIN: [&str; 4] = [
    include_str!("../templates/cirag_system.txt"),
    include_str!("../templates/cirag_user.txt"),
    include_str!("../templates/cirag_answer_system.txt"),
    include_str!("../templates/cirag_answer_user.txt"),
];

/// The CIRAG templates.
#[derive(Debug, Clone)]
pub struct Prompts {
    texts: Vec<String>,
}

impl Prompts {
    /// The built-in templates, files of `dir` replacing them by name.
    pub fn load(dir: Option<&str>) -> Result<Prompts, DistillError> {
        let texts = crate::load_templates(dir, &FILES, &BUILTIN)?;
        let p = Prompts { texts };
        for (file, ph) in [
            ("cirag_user.txt", "{question}"),
            ("cirag_user.txt", "{facts}"),
            ("cirag_user.txt", "{history}"),
            ("cirag_answer_user.txt", "{question}"),
            ("cirag_answer_user.txt", "{facts}"),
        ] {
            if !p.text(file).contains(ph) {
                return Err(DistillError::Template {
                    path: dir.map_or("builtin".to_string(), |d| format!("{d}/{file}")),
                    message: format!("{file} has no {ph} placeholder"),
                });
            }
        }
        Ok(p)
    }

    fn text(&self, name: &str) -> &str {
        &self.texts[FILES.iter().position(|f| *f == name).expect("known file")]
    }

    /// The integration system instruction.
    pub fn system(&self) -> &str {
        self.text("cirag_system.txt")
    }

    /// Version of the integration template (a hash of its files).
    pub fn integration_version(&self) -> String {
        stable_id(&[self.text("cirag_system.txt"), self.text("cirag_user.txt")])[..12].to_string()
    }

    /// Version of the answer template.
    pub fn answer_version(&self) -> String {
        stable_id(&[
            self.text("cirag_answer_system.txt"),
            self.text("cirag_answer_user.txt"),
        ])[..12]
            .to_string()
    }

    /// The integration user turn.
    pub fn user(&self, question: &str, candidates: &[String], history: &[Step]) -> String {
        fill(
            self.text("cirag_user.txt"),
            &[
                ("{question}", question),
                ("{facts}", &fact_json(candidates)),
                ("{history}", &render_history(history)),
            ],
        )
    }

    fn answer_chat(&self, question: &str, facts: &[String]) -> Vec<ChatMessage> {
        vec![
            ChatMessage::new("system", self.text("cirag_answer_system.txt")),
            ChatMessage::new(
                "user",
                fill(
                    self.text("cirag_answer_user.txt"),
                    &[("{question}", question), ("{facts}", &fact_json(facts))],
                ),
            ),
        ]
    }
}

/// Replaces placeholders in one pass (a value holding a placeholder stays as it is).
pub(crate) fn fill(template: &str, values: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(template.len() + 256);
    let mut rest = template;
    'outer: while let Some(i) = rest.find('{') {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        for (ph, v) in values {
            if let Some(r) = tail.strip_prefix(ph) {
                out.push_str(v);
                rest = r;
                continue 'outer;
            }
        }
        out.push('{');
        rest = &tail[1..];
    }
    out.push_str(rest);
    out
}

/// A JSON string list the way Python's `json.dumps` writes it: `["a", "b"]`.
pub fn py_json_list(items: &[String]) -> String {
    let inner: Vec<String> = items
        .iter()
        .map(|s| Value::String(s.clone()).to_string())
        .collect();
    format!("[{}]", inner.join(", "))
}

/// `{"fact": [...]}`.
pub fn fact_json(facts: &[String]) -> String {
    format!("{{\"fact\": {}}}", py_json_list(facts))
}

/// A triple as a fact: `<subject; predicate; object>`.
pub fn render_fact(t: &[String; 3]) -> String {
    format!("<{}; {}; {}>", t[0], t[1], t[2])
}

fn render_history(steps: &[Step]) -> String {
    if steps.is_empty() {
        return "None".to_string();
    }
    steps
        .iter()
        .enumerate()
        .map(|(i, s)| format!("Step {}: {}\nFacts: {}", i + 1, s.query, fact_json(&s.kept)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// One teacher decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub thought: String,
    pub facts: Vec<String>,
    /// `None` for `<no question>`.
    pub next: Option<String>,
}

/// The student's target for a decision: the three sections, exact markers.
pub fn render_target(d: &Decision) -> String {
    format!(
        "{THOUGHT}\n{}\n\n{FACT_AFTER}\n{}\n\n{QUESTION}\n{}",
        d.thought,
        fact_json(&d.facts),
        d.next.as_deref().unwrap_or(NO_QUESTION)
    )
}

fn section<'a>(raw: &'a str, marker: &str, next: &[&str]) -> Option<&'a str> {
    let start = raw.find(marker)? + marker.len();
    let rest = &raw[start..];
    let end = next
        .iter()
        .filter_map(|m| rest.find(m))
        .min()
        .unwrap_or(rest.len());
    Some(rest[..end].trim())
}

/// Parses an integration answer (markers in order; the fact list as JSON, fences and prose
/// tolerated, a bare list accepted).
pub fn parse_decision(raw: &str) -> Result<Decision, String> {
    let thought = section(raw, THOUGHT, &[FACT_AFTER, QUESTION, COMPLETED])
        .ok_or_else(|| format!("no {THOUGHT} section"))?;
    let facts_text = section(raw, FACT_AFTER, &[QUESTION, COMPLETED])
        .ok_or_else(|| format!("no {FACT_AFTER} section"))?;
    let question =
        section(raw, QUESTION, &[COMPLETED]).ok_or_else(|| format!("no {QUESTION} section"))?;
    let (v, _) = distillery_triples::parse::extract_json(facts_text)
        .map_err(|e| format!("{FACT_AFTER}: {e}"))?;
    let list = v
        .get("fact")
        .or(Some(&v).filter(|v| v.is_array()))
        .and_then(Value::as_array)
        .ok_or_else(|| format!("{FACT_AFTER} has no `fact` list"))?;
    let facts = list
        .iter()
        .filter_map(|f| f.as_str().map(|s| s.trim().to_string()))
        .filter(|s| !s.is_empty())
        .collect();
    if question.is_empty() {
        return Err(format!("empty {QUESTION} section"));
    }
    let next = (question != NO_QUESTION && !question.contains(NO_QUESTION)).then(|| {
        question
            .lines()
            .next()
            .unwrap_or(question)
            .trim()
            .to_string()
    });
    Ok(Decision {
        thought: thought.to_string(),
        facts,
        next,
    })
}

/// Parses a final answer: the `[[## answer ##]]` section, first line.
pub fn parse_answer(raw: &str) -> Result<String, String> {
    let a = section(raw, ANSWER, &[COMPLETED]).ok_or_else(|| format!("no {ANSWER} section"))?;
    let a = a.lines().next().unwrap_or("").trim();
    if a.is_empty() {
        Err(format!("empty {ANSWER} section"))
    } else {
        Ok(a.to_string())
    }
}

struct DecisionParser;

impl Parser for DecisionParser {
    fn version(&self) -> &str {
        "cirag-integration-1"
    }
    fn parse(&self, raw: &str) -> Result<Value, String> {
        let d = parse_decision(raw)?;
        Ok(json!({"thought": d.thought, "fact": d.facts, "question": d.next}))
    }
}

struct AnswerParser;

impl Parser for AnswerParser {
    fn version(&self) -> &str {
        "cirag-answer-1"
    }
    fn parse(&self, raw: &str) -> Result<Value, String> {
        Ok(json!({ "answer": parse_answer(raw)? }))
    }
}

/// A candidate fact with its provenance.
#[derive(Debug, Clone, PartialEq)]
pub struct Fact {
    pub text: String,
    pub document_id: String,
    pub passage: u32,
    pub sentence: Option<u32>,
    /// The text of `sentence`, for the cascade's sentence level.
    pub sentence_text: Option<String>,
    /// The passage the fact was extracted from (`title + "\n" + text`), shared by its facts,
    /// for the cascade's passage level.
    pub passage_text: Arc<str>,
}

/// One step of a trajectory.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub query: String,
    pub candidates: Vec<Fact>,
    /// The user turn the teacher saw.
    pub user: String,
    pub decision: Decision,
    /// Facts kept (those of the decision that were candidates).
    pub kept: Vec<String>,
    /// Facts the teacher named that were not candidates.
    pub dropped: u32,
    /// The response-cache entry of the step's decision (its digest).
    pub entry: String,
}

/// How a trajectory ended.
#[derive(Debug, Clone, PartialEq)]
pub enum End {
    /// The final answer matches the gold (F1 ≥ `min_f1`): its steps become samples.
    Kept { answer: String, f1: f64 },
    /// The final answer misses the gold.
    WrongAnswer { answer: String, f1: f64 },
    /// A teacher answer did not parse, or the server rejected the request (its raw text,
    /// empty for a rejection, and the reason, for quarantine).
    Invalid {
        template: &'static str,
        raw: String,
        reason: String,
    },
    /// No passage was retrieved for the question.
    NoEvidence,
}

/// A teacher trajectory.
#[derive(Debug, Clone, PartialEq)]
pub struct Trajectory {
    pub steps: Vec<Step>,
    pub end: End,
}

/// Loop settings.
#[derive(Debug, Clone)]
pub struct Config {
    pub top_k: usize,
    pub candidates: usize,
    pub max_steps: usize,
    pub min_f1: f64,
    pub max_tokens: u32,
    pub seed: Option<u64>,
    pub model_revision: String,
}

/// A boxed future of this module's traits.
pub type Fut<'a, T> = Pin<Box<dyn Future<Output = Result<T, DistillError>> + Send + 'a>>;

/// Where a trajectory's passages come from: the `k` best for a query, best first. Retrieval
/// must be deterministic (the same passages for the same query), so a resumed trajectory
/// replays its cached steps.
pub trait Retriever: Send + Sync {
    fn retrieve<'a>(&'a self, query: &'a str, k: usize) -> Fut<'a, Vec<Passage>>;

    /// The wiki page revision of a document this retriever has returned passages of
    /// (`distillery_core::page_revision`: `enwiki#12@3456`), empty when it knows none.
    fn revision(&self, _document_id: &str) -> String {
        String::new()
    }
}

/// An in-memory corpus: its passages indexed with BM25 (the fallback when no built index is
/// given).
pub struct Corpus {
    pub passages: Vec<Passage>,
    pub index: Bm25Index,
}

impl std::fmt::Debug for Corpus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Corpus")
            .field("passages", &self.passages.len())
            .finish()
    }
}

impl Corpus {
    /// Indexes the passages (key = position).
    pub fn new(passages: Vec<Passage>) -> Result<Corpus, DistillError> {
        let index = Bm25Index::build(
            passages
                .iter()
                .enumerate()
                .map(|(i, p)| (i as u64, p.title.as_str(), p.text.as_str())),
        )?;
        Ok(Corpus { passages, index })
    }
}

impl Retriever for Corpus {
    fn retrieve<'a>(&'a self, query: &'a str, k: usize) -> Fut<'a, Vec<Passage>> {
        Box::pin(async move {
            let hits = self.index.search(query, k)?;
            Ok(hits
                .into_iter()
                .map(|(key, _)| self.passages[key as usize].clone())
                .collect())
        })
    }
}

/// Runs CIRAG trajectories with a teacher.
#[derive(Clone)]
pub struct Cirag {
    pub client: Arc<Client>,
    pub cache: Arc<ResponseCache>,
    pub extractor: Extractor,
    /// The extractor behind a fitter: a retrieved passage too long for the teacher's
    /// context is extracted as pieces that fit.
    fitter: Arc<Fitter>,
    pub prompts: Arc<Prompts>,
    pub config: Config,
    /// Ranks candidate facts by embedding similarity to the query (else: shared words).
    reranker: Option<Arc<dyn Embedder>>,
    integration_version: String,
    answer_version: String,
}

fn words(s: &str) -> HashSet<String> {
    s.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.len() > 1)
        .map(str::to_lowercase)
        .collect()
}

impl Cirag {
    pub fn new(
        client: Arc<Client>,
        cache: Arc<ResponseCache>,
        extractor: Extractor,
        prompts: Prompts,
        config: Config,
    ) -> Cirag {
        Cirag {
            integration_version: prompts.integration_version(),
            answer_version: prompts.answer_version(),
            client,
            cache,
            fitter: Arc::new(Fitter::new(extractor.clone())),
            extractor,
            prompts: Arc::new(prompts),
            config,
            reranker: None,
        }
    }

    /// Reranks candidate facts by the cosine similarity of their embeddings to the query's
    /// (CIRAG reranks with bge-small), instead of by shared words.
    pub fn with_reranker(mut self, model: Arc<dyn Embedder>) -> Cirag {
        self.reranker = Some(model);
        self
    }

    /// The integration template's (id, version), for sample lineage.
    pub fn template(&self) -> (&'static str, &str) {
        (INTEGRATION_TEMPLATE, &self.integration_version)
    }

    fn request(&self, messages: Vec<ChatMessage>) -> ChatRequest {
        ChatRequest {
            messages,
            temperature: Some(0.0),
            top_p: None,
            max_tokens: Some(self.config.max_tokens),
            seed: self.config.seed,
            response_format: None,
            prompt: None,
        }
    }

    /// The construction phase of one query: the reranked candidate facts.
    async fn construct(
        &self,
        query: &str,
        corpus: &dyn Retriever,
        taken: &HashSet<String>,
    ) -> Result<Vec<Fact>, DistillError> {
        let hits = corpus.retrieve(query, self.config.top_k).await?;
        // (retrieval rank, position in passage, fact)
        let mut found: Vec<(usize, usize, Fact)> = Vec::new();
        let mut seen: HashSet<String> = HashSet::new();
        for (rank, hit) in hits.iter().enumerate() {
            // A passage too long for the context is extracted as pieces; their facts come in
            // piece order, as the whole passage's would.
            let mut pos = 0usize;
            for (p, x) in self.fitter.extract(hit).await? {
                let passage_text: Arc<str> = Arc::from(p.content());
                let Extraction::Done { triples, .. } = x else {
                    // A passage whose extraction answer did not parse gives no facts (it is
                    // in the triples stage's quarantine when that stage runs).
                    continue;
                };
                for t in &triples {
                    let at = pos;
                    pos += 1;
                    let text = render_fact(t);
                    if taken.contains(&text) || !seen.insert(text.clone()) {
                        continue;
                    }
                    let sentence = distillery_triples::align::support(t, &p.sentences)
                        .map(|s| s.sentence)
                        .filter(|s| *s != u32::MAX);
                    let sentence_text = sentence.and_then(|i| {
                        p.sentences
                            .iter()
                            .find(|x| x.index == i)
                            .map(|x| x.text.trim().to_string())
                    });
                    let fact = Fact {
                        text,
                        document_id: p.document_id.clone(),
                        passage: p.index,
                        sentence,
                        sentence_text,
                        passage_text: passage_text.clone(),
                    };
                    found.push((rank, at, fact));
                }
            }
        }
        let scores = self.relevance(query, &found).await?;
        let mut scored: Vec<(f32, (usize, usize, Fact))> = scores.into_iter().zip(found).collect();
        scored.sort_by(|a, b| {
            b.0.total_cmp(&a.0)
                .then(a.1.0.cmp(&b.1.0))
                .then(a.1.1.cmp(&b.1.1))
        });
        Ok(scored
            .into_iter()
            .take(self.config.candidates)
            .map(|x| x.1.2)
            .collect())
    }

    /// How well each fact matches the query: the cosine similarity of their embeddings with a
    /// reranker, else the number of words they share.
    async fn relevance(
        &self,
        query: &str,
        facts: &[(usize, usize, Fact)],
    ) -> Result<Vec<f32>, DistillError> {
        let Some(model) = &self.reranker else {
            let qw = words(query);
            return Ok(facts
                .iter()
                .map(|f| words(&f.2.text).intersection(&qw).count() as f32)
                .collect());
        };
        if facts.is_empty() {
            return Ok(Vec::new());
        }
        let mut texts = Vec::with_capacity(facts.len() + 1);
        texts.push(query.to_string());
        texts.extend(facts.iter().map(|f| f.2.text.clone()));
        let v = model.embed(&texts).await?;
        if v.len() != texts.len() {
            return Err(DistillError::Index(distillery_index::IndexError::Embed(
                format!(
                    "the reranker answered {} vectors for {} texts",
                    v.len(),
                    texts.len()
                ),
            )));
        }
        let dot = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
        // Rounded, so tiny float differences between batches do not reorder equal facts.
        Ok(v[1..]
            .iter()
            .map(|f| (dot(&v[0], f) * 1e5).round() / 1e5)
            .collect())
    }

    /// One question's trajectory. `budget` is asked before every teacher step; `Some(why)`
    /// stops the job.
    pub async fn run(
        &self,
        q: &Question,
        corpus: &dyn Retriever,
        budget: &(dyn Fn() -> Option<String> + Sync),
    ) -> Result<Trajectory, DistillError> {
        let mut steps: Vec<Step> = Vec::new();
        let mut taken: HashSet<String> = HashSet::new();
        let mut query = q.question.clone();
        for _ in 0..self.config.max_steps.max(1) {
            if let Some(why) = budget() {
                return Err(DistillError::Budget(why));
            }
            let candidates = self.construct(&query, corpus, &taken).await?;
            if candidates.is_empty() && steps.is_empty() {
                return Ok(Trajectory {
                    steps,
                    end: End::NoEvidence,
                });
            }
            let texts: Vec<String> = candidates.iter().map(|f| f.text.clone()).collect();
            let user = self.prompts.user(&q.question, &texts, &steps);
            let req = self.request(vec![
                ChatMessage::new("system", self.prompts.system()),
                ChatMessage::new("user", user.clone()),
            ]);
            let out = match cached_chat(
                &self.client,
                &self.cache,
                (INTEGRATION_TEMPLATE, &self.integration_version),
                (&self.config.model_revision, INTEGRATION_SCHEMA),
                &DecisionParser,
                &req,
            )
            .await
            {
                Err(e) if e.is_rejection() => {
                    return Ok(rejected(steps, INTEGRATION_TEMPLATE, &e));
                }
                other => other?,
            };
            let entry = out.entry().to_string();
            let parsed = match out {
                Outcome::Parsed { raw, .. } => parse_decision(&raw).map_err(|r| (raw, r)),
                Outcome::Invalid { raw, reason, .. } => Err((raw, reason)),
            };
            let decision = match parsed {
                Ok(d) => d,
                Err((raw, reason)) => {
                    return Ok(Trajectory {
                        steps,
                        end: End::Invalid {
                            template: INTEGRATION_TEMPLATE,
                            raw,
                            reason,
                        },
                    });
                }
            };
            let allowed: HashSet<&str> = texts.iter().map(String::as_str).collect();
            let kept: Vec<String> = decision
                .facts
                .iter()
                .filter(|f| allowed.contains(f.as_str()))
                .cloned()
                .collect();
            let dropped = (decision.facts.len() - kept.len()) as u32;
            taken.extend(kept.iter().cloned());
            let next = decision.next.clone();
            steps.push(Step {
                query: query.clone(),
                candidates,
                user,
                decision: Decision {
                    facts: kept.clone(),
                    ..decision
                },
                kept,
                dropped,
                entry,
            });
            match next {
                Some(n) => query = n,
                None => break,
            }
        }
        if let Some(why) = budget() {
            return Err(DistillError::Budget(why));
        }
        let facts: Vec<String> = steps.iter().flat_map(|s| s.kept.iter().cloned()).collect();
        let req = self.request(self.prompts.answer_chat(&q.question, &facts));
        let out = match cached_chat(
            &self.client,
            &self.cache,
            (ANSWER_TEMPLATE, &self.answer_version),
            (&self.config.model_revision, ANSWER_SCHEMA),
            &AnswerParser,
            &req,
        )
        .await
        {
            Err(e) if e.is_rejection() => return Ok(rejected(steps, ANSWER_TEMPLATE, &e)),
            other => other?,
        };
        let end = match out {
            Outcome::Parsed { value, .. } => {
                let answer = value["answer"].as_str().unwrap_or_default().to_string();
                let f1 = best_f1(&answer, &q.answers);
                if f1 >= self.config.min_f1 && !q.answers.is_empty() {
                    End::Kept { answer, f1 }
                } else {
                    End::WrongAnswer { answer, f1 }
                }
            }
            Outcome::Invalid { raw, reason, .. } => End::Invalid {
                template: ANSWER_TEMPLATE,
                raw,
                reason,
            },
        };
        Ok(Trajectory { steps, end })
    }
}

/// A trajectory ended by a request the server rejected (too long for its context, say).
fn rejected(steps: Vec<Step>, template: &'static str, e: &distillery_llm::LlmError) -> Trajectory {
    Trajectory {
        steps,
        end: End::Invalid {
            template,
            raw: String::new(),
            reason: format!("request rejected: {e}"),
        },
    }
}

/// The chat of a student sample for one step.
pub fn step_messages(prompts: &Prompts, step: &Step) -> Vec<(String, String)> {
    vec![
        ("system".to_string(), prompts.system().to_string()),
        ("user".to_string(), step.user.clone()),
        ("assistant".to_string(), render_target(&step.decision)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_target_is_byte_exact() {
        let d = Decision {
            thought: "The lake is in Salzburg; next, which country.".into(),
            facts: vec![
                "<Lake Zell; is a lake in; Salzburg>".into(),
                "<O'Neil; said; \"hi\">".into(),
            ],
            next: Some("Which country is Salzburg in?".into()),
        };
        assert_eq!(
            render_target(&d),
            "[[## thought ##]]\nThe lake is in Salzburg; next, which country.\n\n\
             [[## fact_after_filter ##]]\n{\"fact\": [\"<Lake Zell; is a lake in; Salzburg>\", \"<O'Neil; said; \\\"hi\\\">\"]}\n\n\
             [[## question ##]]\nWhich country is Salzburg in?"
        );
        let stop = Decision {
            thought: "Enough.".into(),
            facts: vec![],
            next: None,
        };
        assert_eq!(
            render_target(&stop),
            "[[## thought ##]]\nEnough.\n\n[[## fact_after_filter ##]]\n{\"fact\": []}\n\n[[## question ##]]\n<no question>"
        );
        // Round trip.
        assert_eq!(parse_decision(&render_target(&d)).unwrap(), d);
        assert_eq!(parse_decision(&render_target(&stop)).unwrap(), stop);
    }

    #[test]
    fn teacher_answers_parse_robustly() {
        let raw = "Sure.\n[[## thought ##]]\nThink.\n[[## fact_after_filter ##]]\n```json\n{\"fact\": [\"<a; b; c>\"]}\n```\n[[## question ##]]\n<no question>\n\n[[## completed ##]]";
        let d = parse_decision(raw).unwrap();
        assert_eq!(d.facts, ["<a; b; c>"]);
        assert_eq!(d.next, None);
        assert!(parse_decision("[[## thought ##]] x [[## question ##]] y").is_err());
        assert!(parse_decision("no markers at all").is_err());
        assert_eq!(
            parse_answer("[[## answer ##]]\nAustria\n\n[[## completed ##]]").unwrap(),
            "Austria"
        );
        assert!(parse_answer("Austria").is_err());
    }

    #[test]
    fn the_user_turn_has_the_input_sections() {
        let p = Prompts::load(None).unwrap();
        let u = p.user("Q?", &["<a; b; c>".into()], &[]);
        assert!(u.starts_with(
            "[[## Original Query ##]]\nQ?\n\n[[## fact_before_filter ##]]\n{\"fact\": [\"<a; b; c>\"]}\n\n[[## historical_context ##]]\nNone\n\n"
        ));
    }
}
