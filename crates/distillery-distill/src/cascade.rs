//! CIRAG's adaptive cascaded multi-granularity generation (ACMG, paper 003, 3.4): the answer
//! of a kept trajectory from its core triples first, then from the sentences those triples
//! came from, then from their passages, stopping at the first level where the teacher does
//! not refuse.
//!
//! The levels' evidence comes from the trajectory's kept facts and their provenance
//! ([`crate::cirag::Fact`]): the triples as `<s; p; o>` lines, the distinct supporting
//! sentences, the distinct passages (`title`, newline, text), each in the order the facts were
//! kept. A level with no evidence (no kept triple aligned to a sentence) is not asked.
//!
//! The teacher answers `Thought: ...` then `Answer: ...` (the paper's A.3 form); `Unanswerable`
//! is its refusal: the level is insufficient and the next one is asked. The chosen level g* is
//! the first sufficient one; with none, the passages' answer stands (the paper's default).
//! Each asked level is one student sample (task `cirag_generation`): the refusals teach when a
//! granularity is not enough, the last one the answer. Templates: `cascade_system.txt`
//! (`{evidence_kind}`), `cascade_user.txt` (`{evidence_label}`, `{evidence}`, `{question}`).

use std::sync::Arc;

use distillery_core::Question;
use distillery_core::id::stable_id;
use distillery_llm::{
    ChatMessage, ChatRequest, Client, Outcome, Parser, ResponseCache, cached_chat,
};
use serde_json::{Value, json};

use crate::DistillError;
use crate::cirag::{Fact, Step};
use crate::metrics::best_f1;

pub const CASCADE_TEMPLATE: &str = "cirag-cascade";
const CASCADE_SCHEMA: &str = "cirag-cascade-1";
/// The student task of a cascade sample.
pub const TASK_GENERATION: &str = "cirag_generation";
/// The refusal answer.
pub const UNANSWERABLE: &str = "Unanswerable";

const FILES: [&str; 2] = ["cascade_system.txt", "cascade_user.txt"];
const BUILTIN: [&str; 2] = [
    include_str!("../templates/cascade_system.txt"),
    include_str!("../templates/cascade_user.txt"),
];

/// An evidence granularity, in cascade order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Granularity {
    Triples,
    Sentences,
    Passages,
}

impl Granularity {
    pub const ALL: [Granularity; 3] = [
        Granularity::Triples,
        Granularity::Sentences,
        Granularity::Passages,
    ];

    /// `triples`, `sentences`, `passages`: counter and JSON names.
    pub fn name(self) -> &'static str {
        match self {
            Granularity::Triples => "triples",
            Granularity::Sentences => "sentences",
            Granularity::Passages => "passages",
        }
    }

    /// The label of the evidence block in the user turn.
    fn label(self) -> &'static str {
        match self {
            Granularity::Triples => "Triples",
            Granularity::Sentences => "Sentences",
            Granularity::Passages => "Passages",
        }
    }
}

/// The cascade templates.
#[derive(Debug, Clone)]
pub struct CascadePrompts {
    texts: Vec<String>,
}

impl CascadePrompts {
    pub fn load(dir: Option<&str>) -> Result<CascadePrompts, DistillError> {
        let texts = crate::load_templates(dir, &FILES, &BUILTIN)?;
        for (i, ph) in [
            (0, "{evidence_kind}"),
            (1, "{evidence_label}"),
            (1, "{evidence}"),
            (1, "{question}"),
        ] {
            if !texts[i].contains(ph) {
                return Err(DistillError::Template {
                    path: dir.map_or("builtin".into(), |d| format!("{d}/{}", FILES[i])),
                    message: format!("{} needs {ph}", FILES[i]),
                });
            }
        }
        Ok(CascadePrompts { texts })
    }

    /// Version of the templates (part of each cache key and of the samples' lineage).
    pub fn version(&self) -> String {
        stable_id(&[&self.texts[0], &self.texts[1]])[..12].to_string()
    }

    /// `(system, user)` of one level.
    pub fn chat(&self, g: Granularity, question: &str, evidence: &str) -> (String, String) {
        let system = self.texts[0].replace("{evidence_kind}", g.name());
        let user = crate::cirag::fill(
            &self.texts[1],
            &[
                ("{evidence_label}", g.label()),
                ("{evidence}", evidence),
                ("{question}", question),
            ],
        );
        (system, user)
    }
}

/// A teacher answer: its reasoning and its answer (the refusal included).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generation {
    pub thought: String,
    pub answer: String,
}

impl Generation {
    /// Whether the answer is the refusal.
    pub fn refused(&self) -> bool {
        self.answer
            .trim()
            .trim_end_matches('.')
            .eq_ignore_ascii_case(UNANSWERABLE)
    }

    /// The student target: `Thought: ...` and `Answer: ...` on two lines.
    pub fn render(&self) -> String {
        format!("Thought: {}\nAnswer: {}", self.thought, self.answer)
    }
}

/// Parses `Thought: ... Answer: ...`: the answer is the first line after the last
/// `Answer:`; the thought what stands between `Thought:` (or the start) and it.
pub fn parse_generation(raw: &str) -> Result<Generation, String> {
    let at = raw.rfind("Answer:").ok_or("no `Answer:` in the answer")?;
    let answer = raw[at + "Answer:".len()..]
        .trim_start()
        .lines()
        .next()
        .unwrap_or("")
        .trim()
        .to_string();
    if answer.is_empty() {
        return Err("empty `Answer:`".into());
    }
    let head = &raw[..at];
    let thought = match head.find("Thought:") {
        Some(t) => &head[t + "Thought:".len()..],
        None => head,
    };
    Ok(Generation {
        thought: thought.split_whitespace().collect::<Vec<_>>().join(" "),
        answer,
    })
}

struct GenerationParser;

impl Parser for GenerationParser {
    fn version(&self) -> &str {
        "cirag-cascade-1"
    }
    fn parse(&self, raw: &str) -> Result<Value, String> {
        let g = parse_generation(raw)?;
        Ok(json!({"thought": g.thought, "answer": g.answer}))
    }
}

/// One asked level.
#[derive(Debug, Clone, PartialEq)]
pub struct Level {
    pub granularity: Granularity,
    pub system: String,
    pub user: String,
    pub generation: Generation,
    /// The response-cache entry of the level's answer (its digest).
    pub entry: String,
}

/// How a cascade ended.
#[derive(Debug, Clone, PartialEq)]
pub enum CascadeEnd {
    /// The first sufficient level (g*) and its answer's best token F1 against the gold.
    Answered { granularity: Granularity, f1: f64 },
    /// Every level refused: the passages' answer stands (the paper's default).
    Default,
    /// A teacher answer did not parse (its raw text and the reason, for quarantine), or the
    /// server rejected the request (raw empty).
    Invalid { raw: String, reason: String },
}

/// The cascade of one trajectory.
#[derive(Debug, Clone, PartialEq)]
pub struct Cascade {
    pub levels: Vec<Level>,
    pub end: CascadeEnd,
}

impl Cascade {
    /// The chosen granularity's name, `default`, or `invalid`.
    pub fn outcome(&self) -> &'static str {
        match &self.end {
            CascadeEnd::Answered { granularity, .. } => granularity.name(),
            CascadeEnd::Default => "default",
            CascadeEnd::Invalid { .. } => "invalid",
        }
    }
}

/// The evidence of each level from a trajectory's kept facts, in the order kept.
pub fn evidence(steps: &[Step]) -> [String; 3] {
    let mut facts: Vec<&Fact> = Vec::new();
    for s in steps {
        for k in &s.kept {
            if let Some(f) = s.candidates.iter().find(|f| &f.text == k)
                && !facts.iter().any(|x| x.text == f.text)
            {
                facts.push(f);
            }
        }
    }
    let mut sentences: Vec<&str> = Vec::new();
    let mut passages: Vec<&str> = Vec::new();
    for f in &facts {
        if let Some(s) = f.sentence_text.as_deref()
            && !sentences.contains(&s)
        {
            sentences.push(s);
        }
        if !passages.contains(&&*f.passage_text) {
            passages.push(&f.passage_text);
        }
    }
    [
        facts
            .iter()
            .map(|f| f.text.as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        sentences.join("\n"),
        passages.join("\n\n"),
    ]
}

/// Runs cascades with a teacher.
pub struct CascadeRunner {
    pub client: Arc<Client>,
    pub cache: Arc<ResponseCache>,
    pub prompts: CascadePrompts,
    version: String,
    pub max_tokens: u32,
    pub seed: Option<u64>,
    pub model_revision: String,
}

impl CascadeRunner {
    pub fn new(
        client: Arc<Client>,
        cache: Arc<ResponseCache>,
        prompts: CascadePrompts,
        max_tokens: u32,
        seed: Option<u64>,
        model_revision: String,
    ) -> CascadeRunner {
        CascadeRunner {
            version: prompts.version(),
            client,
            cache,
            prompts,
            max_tokens,
            seed,
            model_revision,
        }
    }

    /// `(template id, version)` for the samples' lineage.
    pub fn template(&self) -> (&'static str, &str) {
        (CASCADE_TEMPLATE, &self.version)
    }

    /// The cascade of a trajectory's kept facts for `q`. `budget` is asked before every call.
    pub async fn run(
        &self,
        q: &Question,
        steps: &[Step],
        budget: &(dyn Fn() -> Option<String> + Sync),
    ) -> Result<Cascade, DistillError> {
        let evidence = evidence(steps);
        let mut levels: Vec<Level> = Vec::new();
        for (g, ev) in Granularity::ALL.into_iter().zip(&evidence) {
            if ev.is_empty() {
                continue;
            }
            if let Some(why) = budget() {
                return Err(DistillError::Budget(why));
            }
            let (system, user) = self.prompts.chat(g, &q.question, ev);
            let req = ChatRequest {
                messages: vec![
                    ChatMessage::new("system", system.clone()),
                    ChatMessage::new("user", user.clone()),
                ],
                temperature: Some(0.0),
                top_p: None,
                max_tokens: Some(self.max_tokens),
                seed: self.seed,
                response_format: None,
                prompt: None,
            };
            let out = match cached_chat(
                &self.client,
                &self.cache,
                (CASCADE_TEMPLATE, &self.version),
                (&self.model_revision, CASCADE_SCHEMA),
                &GenerationParser,
                &req,
            )
            .await
            {
                Err(e) if e.is_rejection() => {
                    let end = CascadeEnd::Invalid {
                        raw: String::new(),
                        reason: format!("request rejected: {e}"),
                    };
                    return Ok(Cascade { levels, end });
                }
                other => other?,
            };
            let entry = out.entry().to_string();
            let generation = match out {
                Outcome::Parsed { raw, .. } => parse_generation(&raw).map_err(|r| (raw, r)),
                Outcome::Invalid { raw, reason, .. } => Err((raw, reason)),
            };
            let generation = match generation {
                Ok(x) => x,
                Err((raw, reason)) => {
                    let end = CascadeEnd::Invalid { raw, reason };
                    return Ok(Cascade { levels, end });
                }
            };
            let refused = generation.refused();
            let f1 = best_f1(&generation.answer, &q.answers);
            levels.push(Level {
                granularity: g,
                system,
                user,
                generation,
                entry,
            });
            if !refused {
                let end = CascadeEnd::Answered { granularity: g, f1 };
                return Ok(Cascade { levels, end });
            }
        }
        Ok(Cascade {
            levels,
            end: CascadeEnd::Default,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generations_parse_and_render_exactly() {
        let g = parse_generation(
            "Thought: The triple says Lake Zell is in Salzburg.\n  It is in Austria.\nAnswer: Austria\n",
        )
        .unwrap();
        assert_eq!(
            g.render(),
            "Thought: The triple says Lake Zell is in Salzburg. It is in Austria.\nAnswer: Austria"
        );
        assert!(!g.refused());
        let r = parse_generation("Thought: Nothing about it.\nAnswer: Unanswerable.").unwrap();
        assert!(r.refused());
        assert_eq!(parse_generation("Answer: 1954").unwrap().thought, "");
        assert!(parse_generation("Austria").is_err());
        assert!(parse_generation("Thought: x\nAnswer:").is_err());
    }

    #[test]
    fn the_user_turn_is_exact() {
        let p = CascadePrompts::load(None).unwrap();
        let (system, user) = p.chat(Granularity::Sentences, "Where is {evidence}?", "A.\nB.");
        assert!(
            system.contains("the evidence you are given: sentences."),
            "{system}"
        );
        assert_eq!(user, "Sentences:\nA.\nB.\n\nQuery: Where is {evidence}?");
    }

    /// The cascade against a real OpenAI-compatible server (`DISTILLERY_VLLM_URL`, the CI's
    /// vLLM on CPU with a random tiny model: structure only): every level asked is answered
    /// or ends the cascade as invalid, and a rerun is answered from the cache, the same.
    #[test]
    fn cascade_against_a_real_vllm() {
        let Ok(url) = std::env::var("DISTILLERY_VLLM_URL") else {
            eprintln!("skipping: DISTILLERY_VLLM_URL is not set (scripts/vllm-cpu/serve.sh)");
            return;
        };
        let model = std::env::var("DISTILLERY_VLLM_MODEL").unwrap_or_else(|_| "tiny".into());
        let dir = tempfile::tempdir().unwrap();
        let store = object_store::local::LocalFileSystem::new_with_prefix(dir.path()).unwrap();
        let cache = Arc::new(ResponseCache::new(Arc::new(store), "cache"));
        let client = Arc::new(Client::new(distillery_llm::LlmConfig::new(&url, &model)).unwrap());
        let runner = CascadeRunner::new(
            client,
            cache.clone(),
            CascadePrompts::load(None).unwrap(),
            48,
            Some(7),
            String::new(),
        );
        let passage: Arc<str> = Arc::from("Lake Zell\nLake Zell is a lake in Salzburg, Austria.");
        let steps = [Step {
            query: "Which country is Lake Zell in?".into(),
            candidates: vec![Fact {
                text: "<Lake Zell; is in; Salzburg>".into(),
                document_id: "d".into(),
                passage: 0,
                sentence: Some(0),
                sentence_text: Some("Lake Zell is a lake in Salzburg, Austria.".into()),
                passage_text: passage,
            }],
            user: String::new(),
            decision: crate::cirag::Decision {
                thought: String::new(),
                facts: vec![],
                next: None,
            },
            kept: vec!["<Lake Zell; is in; Salzburg>".into()],
            dropped: 0,
            entry: String::new(),
        }];
        let q = Question {
            question: "Which country is Lake Zell in?".into(),
            answers: vec!["Austria".into()],
            ..Default::default()
        };
        let rt = tokio::runtime::Runtime::new().unwrap();
        let first = rt.block_on(runner.run(&q, &steps, &|| None)).unwrap();
        let asked = cache
            .stats()
            .misses
            .load(std::sync::atomic::Ordering::Relaxed);
        eprintln!(
            "cascade against {url}: {} level(s) answered, {}, {asked} call(s)",
            first.levels.len(),
            first.outcome()
        );
        assert!(asked >= 1);
        match &first.end {
            CascadeEnd::Invalid { .. } => assert_eq!(first.levels.len() as u64 + 1, asked),
            _ => assert_eq!(first.levels.len() as u64, asked),
        }
        assert!(first.levels.iter().all(|l| !l.entry.is_empty()));
        let again = rt.block_on(runner.run(&q, &steps, &|| None)).unwrap();
        assert_eq!(again, first);
        assert_eq!(
            cache
                .stats()
                .misses
                .load(std::sync::atomic::Ordering::Relaxed),
            asked,
            "a rerun asks nothing"
        );
    }

    #[test]
    fn evidence_follows_the_kept_facts_and_their_provenance() {
        let passage: Arc<str> = Arc::from("Lake Zell\nLake Zell is in Salzburg. It is deep.");
        let other: Arc<str> = Arc::from("Salzburg\nSalzburg is in Austria.");
        let fact = |text: &str, sentence: Option<&str>, p: &Arc<str>| Fact {
            text: text.into(),
            document_id: "d".into(),
            passage: 0,
            sentence: sentence.map(|_| 0),
            sentence_text: sentence.map(str::to_string),
            passage_text: p.clone(),
        };
        let step = |candidates: Vec<Fact>, kept: &[&str]| Step {
            query: "q".into(),
            candidates,
            user: String::new(),
            decision: crate::cirag::Decision {
                thought: String::new(),
                facts: vec![],
                next: None,
            },
            kept: kept.iter().map(|s| s.to_string()).collect(),
            dropped: 0,
            entry: String::new(),
        };
        let steps = [
            step(
                vec![
                    fact(
                        "<Lake Zell; is in; Salzburg>",
                        Some("Lake Zell is in Salzburg."),
                        &passage,
                    ),
                    fact("<Lake Zell; is; deep>", None, &passage),
                    fact("<X; y; z>", Some("X y z."), &other),
                ],
                &["<Lake Zell; is; deep>", "<Lake Zell; is in; Salzburg>"],
            ),
            step(
                vec![fact(
                    "<Salzburg; is in; Austria>",
                    Some("Salzburg is in Austria."),
                    &other,
                )],
                &["<Salzburg; is in; Austria>"],
            ),
        ];
        let [t, s, p] = evidence(&steps);
        assert_eq!(
            t,
            "<Lake Zell; is; deep>\n<Lake Zell; is in; Salzburg>\n<Salzburg; is in; Austria>"
        );
        assert_eq!(s, "Lake Zell is in Salzburg.\nSalzburg is in Austria.");
        assert_eq!(
            p,
            "Lake Zell\nLake Zell is in Salzburg. It is deep.\n\nSalzburg\nSalzburg is in Austria."
        );
    }
}
