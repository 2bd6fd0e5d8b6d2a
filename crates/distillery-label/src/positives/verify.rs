//! Weak positives confirmed by a teacher: [`Verified`] wraps a method and keeps the positives
//! a [`Verifier`] does not reject. The label stage's `verify` option wraps its SFT method in
//! one, labelled under the name `<method>+verify` beside the method itself, so the report
//! shows both and the SFT samples follow the confirmed positives.
//!
//! The verifier is a trait so this crate stays free of the LLM client: the label stage
//! implements it with the teacher, through the response cache.

use std::sync::Arc;

use distillery_core::{Question, Segment};
use distillery_hseq::level;

use super::{Method, Positives, Prepared};

/// What a verified method's name adds to its method's.
pub const SUFFIX: &str = "+verify";

/// One positive as the verifier sees it.
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    /// The title of the document or table it comes from (empty for KB edges).
    pub title: &'a str,
    pub segment: &'a Segment,
}

/// The judgement of one candidate.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Verdict {
    /// `Some(true)`: it states a fact the answer needs; `Some(false)`: it does not; `None`:
    /// no usable verdict (the candidate stays).
    pub supports: Option<bool>,
    /// The response-cache entry holding the judgement (empty when none was kept).
    pub entry: String,
}

/// Judges candidates against a question and its gold answer.
pub trait Verifier: Send + Sync {
    /// One verdict per candidate, in order.
    fn verdicts(&self, q: &Question, candidates: &[Candidate<'_>]) -> Vec<Verdict>;
    /// The judge's name for lineage (`model@revision`).
    fn teacher(&self) -> String;
}

/// A method whose positives pass a [`Verifier`].
pub struct Verified {
    inner: Box<dyn Method + Send + Sync>,
    name: String,
    verifier: Arc<dyn Verifier>,
    /// `min_positives` of the options: fewer confirmed answer-matched positives is low
    /// confidence.
    min_positives: usize,
}

impl Verified {
    pub fn new(
        inner: Box<dyn Method + Send + Sync>,
        verifier: Arc<dyn Verifier>,
        min_positives: usize,
    ) -> Verified {
        Verified {
            name: format!("{}{SUFFIX}", inner.name()),
            inner,
            verifier,
            min_positives,
        }
    }
}

/// The title of the source of segment `s`: its document's or table's, else empty.
fn title_of<'a>(s: &Segment, ctx: &crate::QuestionContext<'a>) -> &'a str {
    if let Some(d) = ctx.documents.iter().find(|d| d.id == s.source_id) {
        return &d.title;
    }
    if (s.level == level::TABLE_ROW || s.level == level::TABLE)
        && let Some(t) = ctx.tables.iter().find(|t| t.id == s.source_id)
    {
        return &t.title;
    }
    ""
}

impl Method for Verified {
    fn name(&self) -> &str {
        &self.name
    }

    fn params(&self) -> serde_json::Value {
        serde_json::json!({
            "method": self.inner.name(),
            "params": self.inner.params(),
            "verify": "the teacher judges each positive against the gold answer; rejected ones are dropped",
        })
    }

    fn label(&self, q: &Question, sh: &[Segment], ctx: &crate::QuestionContext<'_>) -> Positives {
        self.label_prepared(q, sh, &Prepared::new(sh), ctx)
    }

    fn label_prepared(
        &self,
        q: &Question,
        sh: &[Segment],
        prep: &Prepared<'_>,
        ctx: &crate::QuestionContext<'_>,
    ) -> Positives {
        let p = self.inner.label_prepared(q, sh, prep, ctx);
        if p.items.is_empty() {
            return p;
        }
        let candidates: Vec<Candidate<'_>> = p
            .items
            .iter()
            .map(|x| Candidate {
                title: title_of(&sh[x.index], ctx),
                segment: &sh[x.index],
            })
            .collect();
        let verdicts = self.verifier.verdicts(q, &candidates);
        let entries: Vec<String> = verdicts
            .iter()
            .filter(|v| !v.entry.is_empty())
            .map(|v| v.entry.clone())
            .collect();
        let items: Vec<_> = p
            .items
            .into_iter()
            .zip(
                verdicts
                    .into_iter()
                    .map(|v| v.supports)
                    .chain(std::iter::repeat(None)),
            )
            .filter(|(_, v)| *v != Some(false))
            .map(|(x, _)| x)
            .collect();
        let kept = Positives {
            items,
            candidates: p.candidates,
            low_confidence: false,
            teacher: Some(super::TeacherLineage {
                teacher: self.verifier.teacher(),
                entries,
            }),
        };
        Positives {
            low_confidence: p.low_confidence || kept.answer_matched() < self.min_positives.max(1),
            ..kept
        }
    }
}
