//! Decontamination shared by the stages that write SFT samples: evaluation files (QA datasets
//! in any supported format) whose questions no training sample may contain. The label stage
//! and every stage writing through [`crate::kit::sft_out::SftOut`] take the same two options,
//! `decontaminate` (file patterns, resolved at planning: [`resolve`]) and
//! `decontaminate_formats` (checked by [`check`]), and drop the samples [`Decontaminator`]
//! finds, counting them in `decontaminated` (and the questions loaded in
//! `decontaminate.questions`).

use std::collections::{HashMap, HashSet};

use distillery_core::spec::{Format, FormatOptions, SftSplit, StageCheck, StageSpec};
use distillery_core::{QuarantineRecord, SftSample, VecSink};
use distillery_ingest::{InputCtx, Opener, read_input};
use distillery_label::normalize::normalize_answer;

use crate::contract::SideFile;
use crate::error::ExecError;
use crate::store::{StoreOpener, resolve_paths};

/// Evaluation questions with fewer normalised words than this are matched only against a
/// sample's own question (exact), not searched for inside prompts: two or three words occur
/// in too many unrelated texts.
pub const MIN_CONTAINED_WORDS: usize = 4;

/// The `decontaminate` files of a stage, each pattern resolved on its own (its format is the
/// pattern's entry in `decontaminate_formats`), for [`crate::contract::Stage::resolve`].
pub fn resolve(stage: &StageSpec, split: &SftSplit) -> Result<Vec<SideFile>, Vec<String>> {
    let patterns = &split.decontaminate;
    let (mut files, mut errors) = (Vec::new(), Vec::new());
    let name = format!("{}.decontaminate", stage.name);
    for (index, pattern) in patterns.iter().enumerate() {
        match resolve_paths(&name, std::slice::from_ref(pattern)) {
            Ok(found) => files.extend(found.into_iter().map(|location| SideFile {
                option: "decontaminate".to_string(),
                index,
                location,
            })),
            Err(ExecError::Inputs(m)) => errors.push(m),
            Err(e) => errors.push(e.to_string()),
        }
    }
    if errors.is_empty() {
        Ok(files)
    } else {
        Err(errors)
    }
}

/// Checks an [`SftSplit`]: `validation_share` in [0, 1), and `decontaminate_formats` against
/// `decontaminate` (one QA format per file, or none).
pub fn check(cx: &mut StageCheck<'_, '_>, split: &SftSplit) {
    if !split.share_ok() {
        cx.error("validation_share", "`validation_share` must be in [0, 1)");
    }
    let (patterns, formats) = (&split.decontaminate, &split.decontaminate_formats);
    if !formats.is_empty() && formats.len() != patterns.len() {
        cx.error(
            "decontaminate_formats",
            "give one format per `decontaminate` file, or none (each told from its file)",
        );
    }
    for f in formats {
        if Format::from_name(f).is_none_or(|f| !f.is_qa()) {
            cx.error("decontaminate_formats", format!("`{f}` is not a QA format"));
        }
    }
}

/// Evaluation questions that no sample may contain.
///
/// A sample is contaminated when the normalised text ([`normalize_answer`]: case, punctuation,
/// articles and spacing folded) of its own question equals a normalised evaluation question,
/// or when the normalised content of one of its `system` / `user` messages contains a
/// normalised evaluation question of at least [`MIN_CONTAINED_WORDS`] words as a run of whole
/// words. The search is one pass over the message's words: each window of
/// [`MIN_CONTAINED_WORDS`] words is looked up by hash among the evaluation questions starting
/// with those words, and each candidate is compared word by word. Assistant turns (targets:
/// segment ids, labels) are not searched. Memory: the normalised evaluation questions.
#[derive(Debug, Default)]
pub struct Decontaminator {
    exact: HashSet<String>,
    /// Word hashes of the questions long enough to be searched for inside texts.
    long: Vec<Vec<u64>>,
    /// Hash of the first [`MIN_CONTAINED_WORDS`] words → indexes into `long`.
    anchors: HashMap<u64, Vec<u32>>,
}

fn word_hash(w: &str) -> u64 {
    // FNV-1a: deterministic and cheap for short words.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in w.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

fn anchor_hash(words: &[u64]) -> u64 {
    words.iter().fold(0x9e37_79b9_7f4a_7c15, |h, w| {
        (h ^ w).wrapping_mul(0x0100_0000_01b3).rotate_left(23)
    })
}

fn word_hashes(normalised: &str) -> Vec<u64> {
    normalised
        .split(' ')
        .filter(|w| !w.is_empty())
        .map(word_hash)
        .collect()
}

impl Decontaminator {
    /// Adds an evaluation question.
    pub fn add(&mut self, question: &str) {
        let n = normalize_answer(question);
        if n.is_empty() || !self.exact.insert(n.clone()) {
            return;
        }
        let words = word_hashes(&n);
        if words.len() >= MIN_CONTAINED_WORDS {
            let key = anchor_hash(&words[..MIN_CONTAINED_WORDS]);
            self.anchors
                .entry(key)
                .or_default()
                .push(self.long.len() as u32);
            self.long.push(words);
        }
    }

    /// Distinct normalised evaluation questions.
    pub fn len(&self) -> usize {
        self.exact.len()
    }

    pub fn is_empty(&self) -> bool {
        self.exact.is_empty()
    }

    /// Whether a text contains an evaluation question (see the type's docs).
    pub fn contained_in(&self, text: &str) -> bool {
        if self.long.is_empty() {
            return false;
        }
        let words = word_hashes(&normalize_answer(text));
        if words.len() < MIN_CONTAINED_WORDS {
            return false;
        }
        (0..=words.len() - MIN_CONTAINED_WORDS).any(|i| {
            let key = anchor_hash(&words[i..i + MIN_CONTAINED_WORDS]);
            self.anchors.get(&key).is_some_and(|cands| {
                cands.iter().any(|&c| {
                    let q = &self.long[c as usize];
                    words.get(i..i + q.len()) == Some(q.as_slice())
                })
            })
        })
    }

    /// Whether a sample of `question` touches an evaluation question.
    pub fn touches(&self, question: &str, sample: &SftSample) -> bool {
        if self.is_empty() {
            return false;
        }
        self.exact.contains(&normalize_answer(question))
            || sample
                .messages
                .iter()
                .filter(|m| m.role == "user" || m.role == "system")
                .any(|m| self.contained_in(&m.content))
    }
}

/// Reads the `decontaminate` files, as planning resolved them, with the real readers, one
/// file at a time (memory: one
/// evaluation file's records while it is read, then its normalised questions). A file's
/// format is its entry in `decontaminate_formats`, else told from its first record
/// ([`distillery_ingest::qa::detect_format`]). An evaluation file is read whole or the stage
/// fails: a file whose format cannot be told, one that holds a bad record, or one that yields
/// no question is an error naming the file (a question left unread could stay in the
/// training set).
pub async fn load(
    decontaminate: &[String],
    formats: &[String],
    side: &[SideFile],
) -> Result<Decontaminator, ExecError> {
    let mut d = Decontaminator::default();
    let files: Vec<&SideFile> = side
        .iter()
        .filter(|f| f.option == "decontaminate")
        .collect();
    // Planning fails on a pattern that matches nothing, so no file means a task planned
    // without them (by a coordinator that does not ship side files): never label unchecked.
    if files.is_empty() && !decontaminate.is_empty() {
        return Err(ExecError::Task(
            "the task carries no `decontaminate` files although the stage names some: it was \
             planned by an older coordinator; resubmit the job"
                .into(),
        ));
    }
    for file in files {
        let given = formats.get(file.index).and_then(|f| Format::from_name(f));
        let location = file.location.clone();
        let handle = tokio::runtime::Handle::current();
        let questions = tokio::task::spawn_blocking(move || {
            evaluation_questions(given, &location, &StoreOpener::new(handle))
        })
        .await
        .map_err(|e| ExecError::Task(e.to_string()))??;
        for q in &questions {
            d.add(q);
        }
    }
    Ok(d)
}

/// Quarantine reasons of a reader that keep the record's question (only its context is
/// missing): an evaluation file may hold them.
const CONTEXT_ONLY_REASONS: &[&str] = &["missing_context"];

/// The questions of one evaluation file (see [`load`]).
fn evaluation_questions(
    given: Option<Format>,
    location: &str,
    opener: &dyn Opener,
) -> Result<Vec<String>, ExecError> {
    let format = match given {
        Some(f) => f,
        None => {
            let options = FormatOptions::default_for(Format::HotpotQa);
            distillery_ingest::qa::detect_format(&InputCtx::opened_by(location, &options, opener))?
                .ok_or_else(|| {
                    ExecError::Inputs(format!(
                        "decontaminate: {location}: its first record (read within the first \
                         {} MiB) is of no QA format known here ({}); name its format in \
                         decontaminate_formats",
                        distillery_ingest::qa::DETECT_HEAD_BYTES >> 20,
                        Format::ALL
                            .iter()
                            .filter(|f| f.is_qa())
                            .map(|f| f.name())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ))
                })?
        }
    };
    let options = FormatOptions::default_for(format);
    let mut sink = VecSink::default();
    read_input(
        format,
        &InputCtx::opened_by(location, &options, opener),
        &mut sink,
    )?;
    // Records of the file itself: a side file's (a HybridQA table) cost no question.
    let lost: Vec<&QuarantineRecord> = sink
        .quarantine()
        .into_iter()
        .filter(|q| q.source == location && !CONTEXT_ONLY_REASONS.contains(&q.reason.as_str()))
        .collect();
    if let Some(first) = lost.first() {
        return Err(ExecError::Inputs(format!(
            "decontaminate: {location} (read as {}): {} bad record(s), the first: {}; an \
             evaluation file must be read whole, or its unread questions could stay in the \
             training data",
            format.name(),
            lost.len(),
            first.describe()
        )));
    }
    let questions: Vec<String> = sink
        .questions()
        .into_iter()
        .map(|q| q.question.clone())
        .collect();
    if questions.is_empty() {
        return Err(ExecError::Inputs(format!(
            "decontaminate: {location} (read as {}): no question in it",
            format.name()
        )));
    }
    Ok(questions)
}
