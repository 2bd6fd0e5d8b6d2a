//! Weak positives P* ⊆ S_h: the segments a target trajectory should select.
//!
//! A [`Method`] looks at one question, its S_h and its context records and returns
//! [`Positives`]: indexes into S_h in pick-priority order, each with a reason and a score.
//! Two methods are built in ([`by_name`]):
//!
//! - `hseq-paper` ([`paper::HseqPaper`]): HSEQ appendix 9.2 as written — level priority with
//!   containers first, a capped candidate set, exact/substring answer matching after
//!   [`crate::normalize`]ation, a Jaccard fallback that marks the question low-confidence;
//! - `answer-aware` ([`answer_aware::AnswerAware`]): a teacher-free sentence labeller (BM25
//!   over the question's units, answer presence, titles named by the question, bridge
//!   entities, lead sentences) that picks the evidence chain rather than every container
//!   holding the answer.
//!
//! Either can be wrapped in [`verify::Verified`], which keeps the positives a teacher
//! confirms (the label stage's `verify` option).
//!
//! Neither method reads gold evidence (`Question::evidence`, decompositions): only the
//! question text, its type, its answers and the context.
//!
//! [`labeled_segment`] turns a positive into the [`LabeledSegment`] of a label record, with
//! the sentence/paragraph/row index the report compares with gold evidence.

pub mod answer_aware;
mod bm25;
pub mod paper;
mod stems;
pub mod verify;

use crate::options::LabelOptions;
use distillery_core::{LabeledSegment, Question, Segment};
use distillery_hseq::level;
use foldhash::HashMap;
use std::cell::OnceCell;

use crate::normalize::normalize_answer;

/// One weak positive.
#[derive(Debug, Clone, PartialEq)]
pub struct Positive {
    /// Index into S_h.
    pub index: usize,
    /// `exact`, `substring`, `lexical`, or a method-specific reason (`bridge`, `lead`, `bm25`).
    pub reason: String,
    pub score: f64,
    /// Chosen by lexical overlap with the question only (down-weighted in trajectories).
    pub lexical: bool,
}

/// The weak positives of one question.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Positives {
    /// In pick-priority order.
    pub items: Vec<Positive>,
    /// Size of the candidate set the method looked at.
    pub candidates: u32,
    /// Fewer than `min_positives` positives came from answer matching.
    pub low_confidence: bool,
    /// The teacher behind the positives, when one judged them ([`verify::Verified`]).
    pub teacher: Option<TeacherLineage>,
}

/// Which teacher answers a set of positives rests on.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TeacherLineage {
    /// `model@revision` of the teacher.
    pub teacher: String,
    /// The response-cache entries (digests) of its answers, in the order asked.
    pub entries: Vec<String>,
}

impl Positives {
    /// Positives that came from answer matching (`exact` or `substring`, or `operand`: a
    /// number the answer's derivation uses).
    pub fn answer_matched(&self) -> usize {
        self.items
            .iter()
            .filter(|p| matches!(p.reason.as_str(), "exact" | "substring" | "operand"))
            .count()
    }
}

/// Per-question work shared by the methods: each segment's [`normalize_answer`]ed content,
/// computed on first use (both built-in methods match answers against it; computing it once
/// halves the labeller's normalisation work when both run).
///
/// A paragraph whose text is its sentences' texts with only whitespace between and around
/// them gets its sentences' normalised texts joined by spaces (the empty ones left out),
/// which is what normalising the paragraph itself gives — every rule of
/// [`normalize_answer`] stops at whitespace — without normalising its text a second time.
/// Any other paragraph is normalised directly.
///
/// A `table_row`'s normalised content is that of its cells alone, in column order: its
/// content is a header→cell object, and the column names are the header's, the same in every
/// row of the table, so matching them would make every row hold an answer that names a
/// column (a TAT-QA `2019` under the merged header `Years Ended September 30, 2019` answers
/// "In which year was ... higher?" in every row).
#[derive(Debug)]
pub struct Prepared<'a> {
    sh: &'a [Segment],
    norms: Vec<OnceCell<String>>,
    /// Per segment: its sentences (indexes into S_h, text order) when it is a paragraph with
    /// sentences.
    sentences: Vec<Vec<usize>>,
}

impl<'a> Prepared<'a> {
    pub fn new(sh: &'a [Segment]) -> Prepared<'a> {
        let mut sentences: Vec<Vec<usize>> = vec![Vec::new(); sh.len()];
        let paragraphs: HashMap<&str, usize> = sh
            .iter()
            .enumerate()
            .filter(|(_, s)| s.level == level::PARAGRAPH)
            .map(|(i, s)| (s.id.as_str(), i))
            .collect();
        for (i, s) in sh.iter().enumerate() {
            if s.level == level::SENTENCE
                && let Some(&p) = s.parent.as_deref().and_then(|p| paragraphs.get(p))
            {
                sentences[p].push(i);
            }
        }
        for v in &mut sentences {
            v.sort_by_key(|&i| (sh[i].offsets.first().copied(), i));
        }
        Prepared {
            sh,
            norms: (0..sh.len()).map(|_| OnceCell::new()).collect(),
            sentences,
        }
    }

    /// Per segment of S_h: whether it is the only sentence of its paragraph and reads the
    /// same (whitespace at the ends aside). Such a sentence would show its paragraph's text a
    /// second time under another id, and a trajectory picking either one would teach nothing
    /// the other does not; the trajectory stream leaves it out ([`crate::sft::candidate_stream`]).
    pub fn echoes(&self) -> Vec<bool> {
        let mut echo = vec![false; self.sh.len()];
        for (p, kids) in self.sentences.iter().enumerate() {
            if let [k] = kids[..]
                && self.sh[k].content.trim() == self.sh[p].content.trim()
            {
                echo[k] = true;
            }
        }
        echo
    }

    /// The normalised content of segment `i` of S_h.
    pub fn norm(&self, i: usize) -> &str {
        self.norms[i].get_or_init(|| {
            let kids = &self.sentences[i];
            if !kids.is_empty()
                && tiles(
                    &self.sh[i].content,
                    kids.iter().map(|&k| &*self.sh[k].content),
                )
            {
                let mut out = String::new();
                for &k in kids {
                    let n = self.norm(k);
                    if n.is_empty() {
                        continue;
                    }
                    if !out.is_empty() {
                        out.push(' ');
                    }
                    out.push_str(n);
                }
                out
            } else if self.sh[i].level == level::TABLE_ROW {
                normalize_answer(&row_cells(&self.sh[i].content))
            } else {
                normalize_answer(&self.sh[i].content)
            }
        })
    }
}

/// The cells of a `table_row`'s content (a JSON object header→cell) joined by spaces, in
/// column order; the content as it is when it is no such object.
fn row_cells(content: &str) -> std::borrow::Cow<'_, str> {
    match serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(content) {
        Ok(row) => {
            let mut out = String::with_capacity(content.len());
            for v in row.values() {
                if !out.is_empty() {
                    out.push(' ');
                }
                match v {
                    serde_json::Value::String(s) => out.push_str(s),
                    other => out.push_str(&other.to_string()),
                }
            }
            std::borrow::Cow::Owned(out)
        }
        Err(_) => std::borrow::Cow::Borrowed(content),
    }
}

/// Whether `text` is `pieces` in order with only whitespace before, between and after them.
fn tiles<'t>(text: &str, pieces: impl Iterator<Item = &'t str>) -> bool {
    let mut rest = text;
    for p in pieces {
        rest = rest.trim_start();
        match rest.strip_prefix(p) {
            Some(r) => rest = r,
            None => return false,
        }
    }
    rest.trim_start().is_empty()
}

/// A weak-positive labelling method.
pub trait Method {
    /// The method's name as written in `LabelOptions::methods`.
    fn name(&self) -> &str;
    /// Its parameters (recorded with every sample it produces).
    fn params(&self) -> serde_json::Value;
    /// Labels one question; `sh` is its S_h, `ctx` the records it was built from.
    fn label(&self, q: &Question, sh: &[Segment], ctx: &crate::QuestionContext<'_>) -> Positives;
    /// [`Method::label`] with per-question work shared between methods (`prep` is built over
    /// the same `sh`). The default ignores `prep`.
    fn label_prepared(
        &self,
        q: &Question,
        sh: &[Segment],
        prep: &Prepared<'_>,
        ctx: &crate::QuestionContext<'_>,
    ) -> Positives {
        let _ = prep;
        self.label(q, sh, ctx)
    }
}

/// The method called `name` (`hseq-paper`, `answer-aware`), configured from `opts`.
pub fn by_name(name: &str, opts: &LabelOptions) -> Option<Box<dyn Method + Send + Sync>> {
    match name {
        paper::NAME => Some(Box::new(paper::HseqPaper::new(opts))),
        answer_aware::NAME => Some(Box::new(answer_aware::AnswerAware::new(opts))),
        _ => None,
    }
}

/// The candidate cap of the options: `max_segments`, else the preset's (small 48, medium 48,
/// large 32; an unknown preset counts as small).
pub fn max_segments(opts: &LabelOptions) -> usize {
    opts.max_segments.map_or_else(
        || match opts.preset.as_str() {
            "large" => 32,
            _ => 48,
        },
        |m| m as usize,
    )
}

/// Whether a level is a source root (`document`, `table`, `subgraph`), whose content is a
/// title or summary rather than evidence: roots are never positives.
pub fn is_root(lvl: &str) -> bool {
    matches!(lvl, level::DOCUMENT | level::TABLE | level::SUBGRAPH)
}

/// Whether a segment is a gap paragraph (text outside every paragraph, e.g. a heading line).
pub(crate) fn is_gap(s: &Segment) -> bool {
    s.level == level::PARAGRAPH && s.schema.iter().any(|x| x == distillery_hseq::GAP)
}

/// The label-record form of a positive: segment id, level, source id, index (sentence index
/// within its document for sentences, paragraph index for paragraphs, found by matching the
/// segment's offsets against the document's spans; row index for table rows; -1 otherwise or
/// when nothing matches, e.g. gap paragraphs), reason and score.
pub fn labeled_segment(
    sh: &[Segment],
    p: &Positive,
    ctx: &crate::QuestionContext<'_>,
) -> LabeledSegment {
    let s = &sh[p.index];
    let span = match s.offsets.as_slice() {
        [a, b] => Some((*a, *b)),
        _ => None,
    };
    let doc = || ctx.documents.iter().find(|d| d.id == s.source_id);
    let position = |spans: Vec<(u32, u32)>| -> i32 {
        let Some((a, b)) = span else { return -1 };
        spans
            .iter()
            .position(|&(x, y)| i64::from(x) == a && i64::from(y) == b)
            .map_or(-1, |i| i as i32)
    };
    let index = match s.level.as_str() {
        level::SENTENCE => doc().map_or(-1, |d| {
            position(d.sentences.iter().map(|x| (x.start, x.end)).collect())
        }),
        level::PARAGRAPH if !is_gap(s) => doc().map_or(-1, |d| {
            position(d.paragraphs.iter().map(|x| (x.start, x.end)).collect())
        }),
        level::TABLE_ROW => span.and_then(|(r, _)| i32::try_from(r).ok()).unwrap_or(-1),
        _ => -1,
    };
    LabeledSegment {
        segment_id: s.id.clone(),
        level: s.level.clone(),
        source_id: s.source_id.clone(),
        index,
        reason: p.reason.clone(),
        score: p.score,
    }
}
