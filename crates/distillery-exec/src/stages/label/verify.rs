//! The label stage's `verify` option: the teacher judges each positive of the SFT method
//! ([`distillery_distill::support`]) through the response cache, for
//! [`distillery_label::positives::verify::Verified`].
//!
//! Labelling runs on blocking threads; a question's candidates are asked together
//! (`llm.max_concurrency` at a time) by blocking that thread on the runtime. A failed call
//! (the server gone past its retries, the budget reached) stops further calls and fails the
//! task when its chunk is consumed; an answer that is not a verdict keeps its candidate and is
//! counted in `verify.invalid`.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use distillery_core::Question;
use distillery_core::spec::LlmSpec;
use distillery_core::summary::StageSummary;
use distillery_distill::support::{
    SUPPORT_SCHEMA, SUPPORT_TEMPLATE, SupportParser, SupportPrompts,
};
use distillery_label::positives::verify::{Candidate, Verdict, Verifier};
use distillery_llm::Outcome;
use futures::StreamExt;

use crate::error::ExecError;
use crate::kit::teacher::Teacher;

/// `max_tokens` of one verdict.
const VERDICT_TOKENS: u32 = 32;

/// The counters of the option, in the summary whether zero or not.
pub const COUNTERS: [&str; 4] = [
    "verify.candidates",
    "verify.confirmed",
    "verify.rejected",
    "verify.invalid",
];

/// The teacher as a [`Verifier`].
pub struct TeacherVerifier {
    teacher: Teacher,
    llm: LlmSpec,
    prompts: SupportPrompts,
    version: String,
    runtime: tokio::runtime::Handle,
    /// Per [`COUNTERS`] entry.
    counts: [AtomicU64; 4],
    failed: AtomicBool,
    error: Mutex<Option<ExecError>>,
}

impl TeacherVerifier {
    /// Built inside the runtime that will serve the calls.
    pub fn new(
        llm: &LlmSpec,
        teacher: Teacher,
        templates: Option<&str>,
    ) -> Result<Self, ExecError> {
        let prompts =
            SupportPrompts::load(templates).map_err(|e| ExecError::Task(e.to_string()))?;
        Ok(TeacherVerifier {
            teacher,
            llm: llm.clone(),
            version: prompts.version(),
            prompts,
            runtime: tokio::runtime::Handle::current(),
            counts: Default::default(),
            failed: AtomicBool::new(false),
            error: Mutex::new(None),
        })
    }

    /// The error of a failed call, once.
    pub fn take_error(&self) -> Option<ExecError> {
        // A poisoned lock still holds the error.
        self.error
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }

    /// The option's counters and the teacher's `llm.*` into a summary.
    pub fn count(&self, s: &mut StageSummary) {
        for (name, c) in COUNTERS.iter().zip(&self.counts) {
            s.add(name, c.load(Ordering::Relaxed));
        }
        self.teacher.count(s);
    }

    fn add(&self, i: usize) {
        self.counts[i].fetch_add(1, Ordering::Relaxed);
    }
}

impl Verifier for TeacherVerifier {
    fn teacher(&self) -> String {
        crate::kit::teacher::teacher_name(&self.llm)
    }

    fn verdicts(&self, q: &Question, candidates: &[Candidate<'_>]) -> Vec<Verdict> {
        if self.failed.load(Ordering::Relaxed) {
            return vec![Verdict::default(); candidates.len()];
        }
        let llm = &self.llm;
        let asks = futures::stream::iter(candidates)
            .map(|c| async move {
                let req =
                    self.prompts
                        .request(q, c.title, &c.segment.content, VERDICT_TOKENS, llm.seed);
                self.teacher
                    .ask(
                        (SUPPORT_TEMPLATE, &self.version),
                        (&llm.model_revision, SUPPORT_SCHEMA),
                        &SupportParser,
                        &req,
                    )
                    .await
            })
            .buffered(llm.max_concurrency.max(1))
            .collect::<Vec<_>>();
        let results = self.runtime.block_on(asks);
        results
            .into_iter()
            .map(|r| {
                self.add(0);
                let entry = r.as_ref().map_or(String::new(), |o| o.entry().to_string());
                let supports = match r {
                    Ok(Outcome::Parsed { value, .. }) => {
                        let v = value["supports"].as_bool();
                        self.add(match v {
                            Some(true) => 1,
                            Some(false) => 2,
                            None => 3,
                        });
                        v
                    }
                    Ok(Outcome::Invalid { .. }) => {
                        self.add(3);
                        None
                    }
                    Err(e) => {
                        if !self.failed.swap(true, Ordering::Relaxed)
                            && let Ok(mut slot) = self.error.lock()
                        {
                            *slot = Some(e);
                        }
                        None
                    }
                };
                Verdict { supports, entry }
            })
            .collect()
    }
}
