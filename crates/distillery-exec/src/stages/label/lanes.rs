//! The labelling lanes of one input: chunks of [`CHUNK`](super::CHUNK) questions labelled on
//! blocking threads, `parallelism` at once, their results consumed in the order queued.

use std::sync::Arc;
use std::time::{Duration, Instant};

use distillery_core::cpu::{Lap, WallLap};
use distillery_core::{Document, LabelRecord, Question, SftSample, Table};
use distillery_label::report::ReportBuilder;
use distillery_label::{Phases, QuestionContext};
use futures::StreamExt;
use futures::stream::FuturesOrdered;
use tokio::sync::Semaphore;
use tokio_util::task::AbortOnDropHandle;

use super::clock::{Phase, to_cpu};
use super::inputs::{Contexts, Kb};
use super::outputs::Outputs;
use super::{Env, KB_MAX_EDGES, QUEUED_CHUNKS_PER_LANE, task_err};
use crate::error::ExecError;
use crate::kit::jsonl::{JsonlLines, content_hash, sample_split};

/// The labelling lanes of one input: chunks in flight, consumed in the order queued.
pub(super) struct Lanes {
    lanes: usize,
    permits: Arc<Semaphore>,
    inflight: FuturesOrdered<AbortOnDropHandle<Result<ChunkResult, ExecError>>>,
}

impl Lanes {
    pub(super) fn new(parallelism: usize) -> Lanes {
        let lanes = parallelism.max(1);
        Lanes {
            lanes,
            permits: Arc::new(Semaphore::new(lanes)),
            inflight: FuturesOrdered::new(),
        }
    }

    /// Queues a chunk for labelling against `ctx`; while [`QUEUED_CHUNKS_PER_LANE`] chunks a
    /// lane are queued, consumes the oldest.
    pub(super) async fn push(
        &mut self,
        env: &Env,
        ctx: &Arc<Contexts>,
        chunk: Vec<Question>,
        outputs: &mut Outputs,
    ) -> Result<(), ExecError> {
        let (env, ctx, permits) = (env.clone(), ctx.clone(), self.permits.clone());
        self.inflight
            .push_back(AbortOnDropHandle::new(tokio::spawn(async move {
                // Fair (FIFO): chunks start in the order they were queued.
                let _lane = permits
                    .acquire_owned()
                    .await
                    .map_err(|e| ExecError::Task(e.to_string()))?;
                tokio::task::spawn_blocking(move || {
                    let r = label_chunk(&env, &ctx, chunk);
                    match env.verifier.as_ref().and_then(|v| v.take_error()) {
                        Some(e) => Err(e),
                        None => Ok(r),
                    }
                })
                .await
                .map_err(task_err)?
            })));
        while self.inflight.len() >= self.lanes * QUEUED_CHUNKS_PER_LANE {
            let r = self.inflight.next().await.expect("tasks in flight");
            outputs.consume(r.map_err(task_err)??).await?;
        }
        Ok(())
    }

    /// Consumes every chunk in flight.
    pub(super) async fn drain(&mut self, outputs: &mut Outputs) -> Result<(), ExecError> {
        while let Some(r) = self.inflight.next().await {
            outputs.consume(r.map_err(task_err)??).await?;
        }
        Ok(())
    }
}

/// A sample made ready on a labelling thread: its split set, its content hash and
/// contamination checked, its JSONL line rendered.
pub(super) struct Prepared {
    pub(super) sample: SftSample,
    pub(super) hash: u128,
    pub(super) contaminated: bool,
    pub(super) line: String,
}

/// What one chunk of questions produced.
#[derive(Default)]
pub(super) struct ChunkResult {
    pub(super) questions: u64,
    pub(super) missing_context: u64,
    pub(super) labels: Vec<LabelRecord>,
    pub(super) samples: Vec<Prepared>,
    /// The chunk's label records counted for the report.
    pub(super) report: ReportBuilder,
}

/// Labels a chunk of questions (on a blocking thread).
fn label_chunk(env: &Env, ctx: &Contexts, questions: Vec<Question>) -> ChunkResult {
    let mut r = ChunkResult::default();
    let mut lines = JsonlLines::default();
    // The thread's CPU clock is read twice a chunk (a system call each); the phases inside
    // are timed with monotonic-clock laps, turned into CPU time by the chunk's ratio.
    let (mut cpu, wall) = (Lap::start(), Instant::now());
    let (mut read, mut phases) = (Duration::ZERO, Phases::default());
    for q in &questions {
        let mut lap = WallLap::start();
        r.questions += 1;
        let mut missing = false;
        let documents: Vec<&Document> = q
            .context_documents
            .iter()
            .filter_map(|id| {
                let d = ctx.documents.get(id);
                missing |= d.is_none();
                d
            })
            .collect();
        let tables: Vec<&Table> = q
            .context_tables
            .iter()
            .filter_map(|id| {
                let t = ctx.tables.get(id);
                missing |= t.is_none();
                t
            })
            .collect();
        if missing {
            r.missing_context += 1;
        }
        let (triples, kg_ids) = match &env.kb {
            Some(Kb::Whole(kb)) if !q.topic_entities.is_empty() => {
                kb.for_question_with_ids(q, env.max_hops, KB_MAX_EDGES)
            }
            Some(Kb::Subgraphs(sg)) => sg.for_question(q, env.max_hops, KB_MAX_EDGES),
            _ => (Vec::new(), Vec::new()),
        };
        read += lap.lap();
        let out = env.labeller.label_question(&QuestionContext {
            question: q,
            documents: &documents,
            tables: &tables,
            triples: &triples,
            kg_ids: &kg_ids,
        });
        phases += out.phases;
        r.report.add_question(q, &out.labels);
        r.labels.extend(out.labels);
        for mut sample in out.samples {
            sample.split = sample_split(&sample, env.validation_share).to_string();
            let hash = content_hash(&sample);
            let contaminated = env.decon.touches(&q.question, &sample);
            let line = lines.line(&sample);
            r.samples.push(Prepared {
                sample,
                hash,
                contaminated,
                line,
            });
        }
    }
    let (read, phases) = to_cpu(cpu.lap(), wall.elapsed(), read, phases);
    env.clock.add(Phase::Read, read);
    env.clock.add_question(&phases);
    r
}
