//! Teacher-free training samples for HANRAG's Revelator (paper 001, 4.2 and appendix B):
//! the refiner, the ending discriminator and the router, from gold reasoning steps.
//!
//! **Reasoning steps** ([`reasoning_steps`]):
//! - MuSiQue (`question.decomposition`): each step's question with every `#k` replaced by the
//!   answer of step k; a step written as a relation path, `subject >> relation`, becomes a
//!   question by the relation wording below (`Hello Love >> performer` → `Who is the performer
//!   of Hello Love?`); whitespace is tidied, the first letter capitalised, a final `?` added.
//! - 2WikiMultihopQA (no decomposition, `triple` evidence with text `s|r|o`): one step per
//!   evidence triple, in the dataset's order, question = the relation wording of `r` about
//!   `s`, answer = `o`.
//!
//! **Relation wording** ([`relation_question`]): a fixed table for the common Wikidata
//! relations of both datasets (`date of birth` → `When was {s} born?`, `place of birth` →
//! `Where was {s} born?`, `country of citizenship` → `Which country is {s} a citizen of?`,
//! `educated at` → `Where was {s} educated?`, `instance of` → `What is {s} an instance of?`,
//! ...); relations whose value is a person (`director`, `performer`, `father`, `spouse`, ...)
//! read `Who is the {r} of {s}?`; `member of {x}` reads `Which {x} is {s} a member of?`; a
//! relation ending in `of` (`subclass of`) `What is {s} a {r}?`, one ending in another
//! preposition (`licensed to broadcast to`, `owned by`) `What is {s} {r}?`; any other
//! relation `What is the {r} of {s}?`.
//!
//! **Samples** (messages `[system, user, assistant]`, the system omitted when its template is
//! empty; the completed thought lists `*seed query-j**: <q_j>` and `*answer-j**: <a_j>` lines,
//! or reads `nothing` before the first step):
//! - `hanrag_refiner` `<Q, seed question>`: for hop i, the question and the thought of hops
//!   1..i-1 → the seed question of hop i. From decompositions, also one single-step sample
//!   per sub-question (the sub-question with thought `nothing` → itself), as the paper adds
//!   single-step problems as both input and output (B.4).
//! - `hanrag_ending` `<Q, (q1, a1), ..., (qi, ai), IS_ENDING>`: for hop i, the thought of hops
//!   1..i → `true` for the last hop, `false` before.
//! - `hanrag_router` `<Q, CLS>` from decompositions (the paper's MuSiQue source): every
//!   sub-question → `single-step question`; the question → `complex question` (a
//!   one-step decomposition → `single-step question`). From the dataset
//!   ([`dataset_class`], `method` = `dataset`): a CommonsenseQA question →
//!   `straightforward question`, a Natural Questions (open) one → `single-step question`.
//!   A synthesised compound question ([`compound_samples`], the `compound` stage) →
//!   `compound question`.
//! - `hanrag_decomposer` `<Q, q1 … qn>` of a compound question: target
//!   `{"decomposition": [q1, ...]}`.
//!
//! Hops after the first step without an answer are not used (their thought cannot be
//! written). Lineage: `method` = `decomposition` or `evidence`; `params` holds the source,
//! the sample kind, the hop and the hop count; `step` the hop (1-based; none for the router
//! sample of the whole question), `steps` the hop count; `sufficient` the ending target.

use distillery_core::{DecompositionStep, Question, SftSample};

use crate::Labeller;
use crate::prompt::{Prompts, Template};
use crate::sft::{chat_messages, sample_id};

pub const TASK_REFINER: &str = "hanrag_refiner";
pub const TASK_ENDING: &str = "hanrag_ending";
pub const TASK_ROUTER: &str = "hanrag_router";
pub const TASK_DECOMPOSER: &str = "hanrag_decomposer";

/// Router labels (HANRAG's four classes).
pub const STRAIGHTFORWARD: &str = "straightforward question";
pub const SINGLE_STEP: &str = "single-step question";
pub const COMPOUND: &str = "compound question";
pub const COMPLEX: &str = "complex question";

/// One reasoning hop: a standalone sub-question and its answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hop {
    pub question: String,
    pub answer: Option<String>,
}

/// Where the hops came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HopSource {
    /// MuSiQue's `question_decomposition`.
    Decomposition,
    /// 2Wiki's evidence triples.
    Evidence,
}

impl HopSource {
    pub fn name(self) -> &'static str {
        match self {
            HopSource::Decomposition => "decomposition",
            HopSource::Evidence => "evidence",
        }
    }
}

/// The question's reasoning hops, when its dataset gives them (see the module docs).
pub fn reasoning_steps(q: &Question) -> Option<(Vec<Hop>, HopSource)> {
    if !q.decomposition.is_empty() {
        return Some((
            render_decomposition(&q.decomposition),
            HopSource::Decomposition,
        ));
    }
    let hops: Vec<Hop> = q
        .evidence
        .iter()
        .filter(|e| e.kind == "triple")
        .filter_map(|e| e.text.as_deref())
        .filter_map(split_triple)
        .map(|(s, r, o)| Hop {
            question: relation_question(r, s),
            answer: Some(o.to_string()),
        })
        .collect();
    (!hops.is_empty()).then_some((hops, HopSource::Evidence))
}

/// Splits `s|r|o` at its first and last `|`.
fn split_triple(t: &str) -> Option<(&str, &str, &str)> {
    let (s, rest) = t.split_once('|')?;
    let (r, o) = rest.rsplit_once('|')?;
    let (s, r, o) = (s.trim(), r.trim(), o.trim());
    (!s.is_empty() && !r.is_empty() && !o.is_empty()).then_some((s, r, o))
}

/// MuSiQue steps as standalone questions: `#k` replaced by answer k, `x >> r` worded.
pub fn render_decomposition(steps: &[DecompositionStep]) -> Vec<Hop> {
    let answers: Vec<Option<&str>> = steps.iter().map(|s| s.answer.as_deref()).collect();
    steps
        .iter()
        .map(|s| {
            let text = substitute_refs(&s.question, &answers);
            let question = match text.split_once(">>") {
                Some((subject, relation)) => relation_question(relation, subject),
                None => tidy_question(&text),
            };
            Hop {
                question,
                answer: s.answer.clone().filter(|a| !a.trim().is_empty()),
            }
        })
        .collect()
}

/// Replaces `#k` (1-based) by the answer of step k when known.
fn substitute_refs(text: &str, answers: &[Option<&str>]) -> String {
    let mut out = String::with_capacity(text.len() + 32);
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c == '#' {
            let start = i + 1;
            let mut end = start;
            while let Some(&(j, d)) = chars.peek() {
                if d.is_ascii_digit() {
                    end = j + d.len_utf8();
                    chars.next();
                } else {
                    break;
                }
            }
            let digits = &text[start..end];
            let ans = digits
                .parse::<usize>()
                .ok()
                .and_then(|k| k.checked_sub(1))
                .and_then(|k| answers.get(k).copied().flatten());
            match ans {
                Some(a) => out.push_str(a),
                None => {
                    out.push('#');
                    out.push_str(digits);
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Collapses whitespace, removes spaces before `?`/`,`/`.`, capitalises the first letter and
/// ends the question with `?`.
pub fn tidy_question(text: &str) -> String {
    let mut s = text.split_whitespace().collect::<Vec<_>>().join(" ");
    for p in ["?", ",", "."] {
        s = s.replace(&format!(" {p}"), p);
    }
    let s = s.trim_end_matches([',', ' ']).to_string();
    let mut out: String = match s.chars().next() {
        Some(c) => c.to_uppercase().chain(s.chars().skip(1)).collect(),
        None => s,
    };
    if !out.is_empty() && !out.ends_with(['?', '.', '!']) {
        out.push('?');
    }
    out
}

/// Relations whose value is a person: `Who is the {r} of {s}?`.
const PERSON_RELATIONS: &[&str] = &[
    "director",
    "performer",
    "composer",
    "producer",
    "father",
    "mother",
    "spouse",
    "child",
    "sibling",
    "author",
    "creator",
    "editor",
    "screenwriter",
    "lyricist",
    "founder",
    "head of government",
    "head of state",
    "cast member",
    "doctoral advisor",
];

/// A question asking for relation `r` of subject `s` (see the module docs).
pub fn relation_question(relation: &str, subject: &str) -> String {
    let r = relation
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase();
    let s = tidy_subject(subject);
    let q = match r.as_str() {
        "date of birth" => format!("When was {s} born?"),
        "date of death" => format!("When did {s} die?"),
        "place of birth" => format!("Where was {s} born?"),
        "place of death" => format!("Where did {s} die?"),
        "place of burial" => format!("Where was {s} buried?"),
        "publication date" => format!("When was {s} released?"),
        "inception" => format!("When was {s} founded?"),
        "founded by" => format!("Who founded {s}?"),
        "country of citizenship" => format!("Which country is {s} a citizen of?"),
        "country" => format!("Which country is {s} in?"),
        "country of origin" => format!("What is the country of origin of {s}?"),
        "educated at" => format!("Where was {s} educated?"),
        "employer" => format!("Who was the employer of {s}?"),
        "award received" => format!("What award did {s} receive?"),
        "cause of death" => format!("What was the cause of death of {s}?"),
        "occupation" => format!("What is the occupation of {s}?"),
        "located in the administrative territorial entity" => {
            format!("In which administrative territorial entity is {s} located?")
        }
        "located in or next to body of water" => {
            format!("Which body of water is {s} located in or next to?")
        }
        "instance of" => format!("What is {s} an instance of?"),
        "part of" => format!("What is {s} part of?"),
        "member of" => format!("What is {s} a member of?"),
        "shares border with" => format!("What shares a border with {s}?"),
        "continent" => format!("Which continent is {s} on?"),
        "conflict" => format!("Which conflict did {s} take part in?"),
        "applies to jurisdiction" => format!("Which jurisdiction does {s} apply to?"),
        "headquarters location" => format!("Where is the headquarters of {s}?"),
        "location" => format!("Where is {s} located?"),
        "record label" => format!("Which record label is {s} on?"),
        "genre" => format!("What is the genre of {s}?"),
        "follows" => format!("What does {s} follow?"),
        "capital of" => format!("What is {s} the capital of?"),
        "location of formation" => format!("Where was {s} formed?"),
        "mouth of the watercourse" => format!("What does {s} flow into?"),
        "lyrics by" => format!("Who wrote the lyrics of {s}?"),
        "student of" => format!("Who was {s} a student of?"),
        "position held" => format!("What position did {s} hold?"),
        "present in work" => format!("Which work does {s} appear in?"),
        "league" => format!("Which league does {s} play in?"),
        _ if PERSON_RELATIONS.contains(&r.as_str()) => format!("Who is the {r} of {s}?"),
        // `member of political party` → Which political party is X a member of?
        _ if r.starts_with("member of ") && !r["member of ".len()..].contains(" of") => {
            format!("Which {} is {s} a member of?", &r["member of ".len()..])
        }
        // `subclass of` → What is X a subclass of?
        _ if r.ends_with(" of") => format!("What is {s} a {r}?"),
        // A relation ending in a preposition reads after the subject: `licensed to broadcast
        // to`, `owned by`, `named after`, `followed by`.
        _ if r
            .rsplit(' ')
            .next()
            .is_some_and(|w| TRAILING_PREPOSITIONS.contains(&w)) =>
        {
            format!("What is {s} {r}?")
        }
        _ => format!("What is the {r} of {s}?"),
    };
    tidy_question(&q)
}

/// Last words that make a relation read after its subject ([`relation_question`]).
const TRAILING_PREPOSITIONS: &[&str] = &["to", "by", "after", "with", "from", "for", "at", "into"];

fn tidy_subject(s: &str) -> String {
    let mut t = s.split_whitespace().collect::<Vec<_>>().join(" ");
    t = t.replace(" ,", ",");
    t.trim_matches([',', ' ']).to_string()
}

/// The completed thought of the given hops: `*seed query-j**: q` / `*answer-j**: a` lines,
/// or `nothing` when there are none.
pub fn thought(hops: &[Hop]) -> String {
    if hops.is_empty() {
        return "nothing".to_string();
    }
    let mut lines = Vec::with_capacity(hops.len() * 2);
    for (j, h) in hops.iter().enumerate() {
        lines.push(format!("*seed query-{}**: {}", j + 1, h.question));
        lines.push(format!(
            "*answer-{}**: {}",
            j + 1,
            h.answer.as_deref().unwrap_or("")
        ));
    }
    lines.join("\n")
}

/// The router class a question's dataset gives it, for datasets without reasoning steps:
/// CommonsenseQA's need no retrieval, Natural Questions' one lookup.
pub fn dataset_class(dataset: &str) -> Option<&'static str> {
    match dataset {
        "commonsenseqa" => Some(STRAIGHTFORWARD),
        "nq" => Some(SINGLE_STEP),
        _ => None,
    }
}

/// The decomposer target: `{"decomposition": [q1, ...]}` (the key of the paper's decomposer
/// prompt, appendix G).
pub fn decomposition_target(sub_questions: &[String]) -> String {
    serde_json::json!({ "decomposition": sub_questions }).to_string()
}

/// The Revelator samples of a synthesised compound question (HANRAG appendix B.1 to B.3):
/// the router's `compound question`, and the decomposer's `<Q, q1 … qn>` from its
/// sub-questions (`q.decomposition`, in order). `method` names where it came from.
pub fn compound_samples(
    prompts: &Prompts,
    counter: &crate::prompt::TokenCounter,
    pipeline_hash: &str,
    q: &Question,
    params: &str,
) -> Vec<SftSample> {
    let subs: Vec<String> = q.decomposition.iter().map(|d| d.question.clone()).collect();
    let mk = |task: &str, template: &crate::prompt::Template, target: String| {
        let (system, user) = Prompts::render_hanrag(template, &q.question, "");
        let target_tokens = counter.count(&target);
        let (messages, prompt_tokens) = chat_messages(counter, system, user, target);
        SftSample {
            id: sample_id(task, &q.id, "compound", "question:0", &messages),
            task: task.to_string(),
            messages,
            weight: 1.0,
            split: String::new(),
            dataset: q.dataset.clone(),
            question_id: q.id.clone(),
            segment_ids: q.context_documents.clone(),
            // A QA dataset's contexts name no page revision.
            revisions: Vec::new(),
            method: "compound".to_string(),
            params: params.to_string(),
            template_id: template.id.clone(),
            template_version: template.version.clone(),
            pipeline_hash: pipeline_hash.to_string(),
            step: None,
            steps: Some(subs.len() as u32),
            sufficient: None,
            prompt_tokens,
            target_tokens,
            teacher: None,
            cache_entries: Vec::new(),
        }
    };
    vec![
        mk(TASK_ROUTER, &prompts.router, COMPOUND.to_string()),
        mk(
            TASK_DECOMPOSER,
            &prompts.decomposer,
            decomposition_target(&subs),
        ),
    ]
}

/// The router sample of a question whose class its dataset gives ([`dataset_class`]).
fn dataset_router_sample(l: &Labeller, q: &Question, label: &str) -> SftSample {
    let template = &l.prompts.router;
    let (system, user) = Prompts::render_hanrag(template, &q.question, "");
    let (messages, prompt_tokens) = chat_messages(&l.counter, system, user, label.to_string());
    let params = serde_json::json!({"source": "dataset", "kind": "question"});
    SftSample {
        id: sample_id(TASK_ROUTER, &q.id, "dataset", "question:0", &messages),
        task: TASK_ROUTER.to_string(),
        messages,
        weight: 1.0,
        split: String::new(),
        dataset: q.dataset.clone(),
        question_id: q.id.clone(),
        segment_ids: Vec::new(),
        revisions: Vec::new(),
        method: "dataset".to_string(),
        params: params.to_string(),
        template_id: template.id.clone(),
        template_version: template.version.clone(),
        pipeline_hash: l.pipeline_hash.clone(),
        step: None,
        steps: None,
        sufficient: None,
        prompt_tokens,
        target_tokens: l.counter.count(label),
        teacher: None,
        cache_entries: Vec::new(),
    }
}

/// The HANRAG samples of a question: from its reasoning steps, or the router sample its
/// dataset's class gives (empty when it has neither).
pub fn samples(l: &Labeller, q: &Question) -> Vec<SftSample> {
    let Some((hops, source)) = reasoning_steps(q) else {
        return dataset_class(&q.dataset)
            .map(|label| dataset_router_sample(l, q, label))
            .into_iter()
            .collect();
    };
    let n = hops.len() as u32;
    // Hops usable for thoughts: up to the first one without an answer.
    let answered = hops.iter().take_while(|h| h.answer.is_some()).count();
    let mut out = Vec::new();
    let mk = |task: &str,
              template: &Template,
              question: &str,
              th: &str,
              target: &str,
              hop: Option<u32>,
              kind: &str,
              sufficient: Option<bool>| {
        let (system, user) = Prompts::render_hanrag(template, question, th);
        let (messages, prompt_tokens) = chat_messages(&l.counter, system, user, target.to_string());
        let step = format!("{kind}:{}", hop.unwrap_or(0));
        let params = serde_json::json!({
            "source": source.name(),
            "kind": kind,
            "hop": hop,
            "hops": n,
        });
        SftSample {
            id: sample_id(task, &q.id, source.name(), &step, &messages),
            task: task.to_string(),
            messages,
            weight: 1.0,
            split: String::new(),
            dataset: q.dataset.clone(),
            question_id: q.id.clone(),
            segment_ids: Vec::new(),
            revisions: Vec::new(),
            method: source.name().to_string(),
            params: params.to_string(),
            template_id: template.id.clone(),
            template_version: template.version.clone(),
            pipeline_hash: l.pipeline_hash.clone(),
            step: hop,
            steps: Some(n),
            sufficient,
            prompt_tokens,
            target_tokens: l.counter.count(target),
            teacher: None,
            cache_entries: Vec::new(),
        }
    };
    let p = &l.prompts;
    // Refiner: hop i from the thought of hops before it.
    for i in 0..hops.len().min(answered + 1) {
        let th = thought(&hops[..i]);
        out.push(mk(
            TASK_REFINER,
            &p.refiner,
            &q.question,
            &th,
            &hops[i].question,
            Some(i as u32 + 1),
            "seed",
            None,
        ));
    }
    if source == HopSource::Decomposition {
        for (i, h) in hops.iter().enumerate() {
            out.push(mk(
                TASK_REFINER,
                &p.refiner,
                &h.question,
                "nothing",
                &h.question,
                Some(i as u32 + 1),
                "single_step",
                None,
            ));
        }
    }
    // Ending: after hop i, is the search finished?
    for i in 0..answered {
        let th = thought(&hops[..=i]);
        let last = i + 1 == hops.len();
        let target = if last { "true" } else { "false" };
        out.push(mk(
            TASK_ENDING,
            &p.ending,
            &q.question,
            &th,
            target,
            Some(i as u32 + 1),
            "ending",
            Some(last),
        ));
    }
    // Router: sub-questions are single-step, the multi-hop question complex.
    if source == HopSource::Decomposition {
        for (i, h) in hops.iter().enumerate() {
            out.push(mk(
                TASK_ROUTER,
                &p.router,
                &h.question,
                "",
                SINGLE_STEP,
                Some(i as u32 + 1),
                "sub_question",
                None,
            ));
        }
        let label = if hops.len() >= 2 {
            COMPLEX
        } else {
            SINGLE_STEP
        };
        out.push(mk(
            TASK_ROUTER,
            &p.router,
            &q.question,
            "",
            label,
            None,
            "question",
            None,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(q: &str, a: &str) -> DecompositionStep {
        DecompositionStep {
            question: q.into(),
            answer: Some(a.into()),
            support: Vec::new(),
        }
    }

    #[test]
    fn decomposition_refs_and_paths() {
        let hops = render_decomposition(&[
            step("Hello Love >> performer", "Hank Snow"),
            step("What city did #1 live when he died?", "Tennessee"),
            step("how many publix stores are in #2", "35"),
            step("Midway (near Pleasant Plains), #2 , #1 >> country", "U.S."),
        ]);
        assert_eq!(hops[0].question, "Who is the performer of Hello Love?");
        assert_eq!(
            hops[1].question,
            "What city did Hank Snow live when he died?"
        );
        assert_eq!(hops[2].question, "How many publix stores are in Tennessee?");
        assert_eq!(
            hops[3].question,
            "Which country is Midway (near Pleasant Plains), Tennessee, Hank Snow in?"
        );
    }

    #[test]
    fn thoughts_and_triples() {
        let hops = vec![Hop {
            question: "Who is the mother of Lothair II?".into(),
            answer: Some("Ermengarde of Tours".into()),
        }];
        assert_eq!(thought(&[]), "nothing");
        assert_eq!(
            thought(&hops),
            "*seed query-1**: Who is the mother of Lothair II?\n*answer-1**: Ermengarde of Tours"
        );
        assert_eq!(split_triple("a|b c|d"), Some(("a", "b c", "d")));
        assert_eq!(
            relation_question("date of death", "Ermengarde of Tours"),
            "When did Ermengarde of Tours die?"
        );
        assert_eq!(
            relation_question("mother", "Lothair II"),
            "Who is the mother of Lothair II?"
        );
        assert_eq!(
            relation_question("sport", "David Jones"),
            "What is the sport of David Jones?"
        );
        for (r, s, q) in [
            (
                "follows",
                "National Rail",
                "What does National Rail follow?",
            ),
            (
                "licensed to broadcast to",
                "WILM",
                "What is WILM licensed to broadcast to?",
            ),
            (
                "member of political party",
                "Ann Lee",
                "Which political party is Ann Lee a member of?",
            ),
            ("owned by", "The Globe", "What is The Globe owned by?"),
            ("capital of", "Paris", "What is Paris the capital of?"),
            ("subclass of", "Fado", "What is Fado a subclass of?"),
            (
                "member of the crew of",
                "Ann Lee",
                "What is Ann Lee a member of the crew of?",
            ),
            ("lyrics by", "Hey Jude", "Who wrote the lyrics of Hey Jude?"),
            ("student of", "Plato", "Who was Plato a student of?"),
            // A preposition inside the relation is not a trailing one.
            (
                "place of publication",
                "Fado",
                "What is the place of publication of Fado?",
            ),
        ] {
            assert_eq!(relation_question(r, s), q);
        }
        assert_eq!(
            substitute_refs("#10 and #1 #x", &[Some("A")]),
            "#10 and A #x"
        );
    }
}
