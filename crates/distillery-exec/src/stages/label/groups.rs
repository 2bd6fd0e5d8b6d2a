//! Labelling one QA input, group of questions after group: its contexts read whole or, when
//! they are estimated above the budget, routed to groups of questions through spill parts
//! ([`route`]), and its questions streamed in part order into the labelling lanes.

use std::sync::Arc;
use std::time::Instant;

use distillery_core::cpu::{Lap, process_time};
use distillery_core::schema::from_batch;
use distillery_core::{Question, TableKind};
use futures::StreamExt;
use tracing::{info, warn};

use super::clock::Phase;
use super::inputs::{Contexts, load_contexts, parts_of, rows_of};
use super::lanes::Lanes;
use super::outputs::Outputs;
use super::route::{self, Groups, Routes};
use super::{CHUNK, Env};
use crate::error::ExecError;
use crate::parts::{WrittenPart, read_part};
use crate::store::Location;

/// Labels one QA input: its contexts into memory (whole, or per group of questions when they
/// are estimated above the budget, see [`route`]), then its questions streamed in
/// part order.
#[allow(clippy::too_many_arguments)]
pub(super) async fn label_input(
    env: &Env,
    out: &Location,
    staging: &str,
    parts: &[WrittenPart],
    input: &str,
    parallelism: usize,
    outputs: &mut Outputs,
) -> Result<(), ExecError> {
    let started = Instant::now();
    let before = outputs.summary.records_in;
    let docs = parts_of(parts, TableKind::Documents, input);
    let tables = parts_of(parts, TableKind::Tables, input);
    let questions = parts_of(parts, TableKind::Questions, input);
    let estimate = route::estimate(out, &docs, &tables).await?;
    let n_questions = rows_of(&questions) as u64;
    let groups = Groups::plan(estimate, env.context_memory, n_questions);
    outputs
        .summary
        .add("context_groups", u64::from(groups.count));
    let routed = estimate > env.context_memory && n_questions > 0;
    let dir = route::spill_dir(staging, input);
    let result = async {
        let mut spilled = if routed {
            let cpu = process_time();
            let routes = Routes::of_questions(out, &questions, groups).await?;
            let wave = route::groups_per_wave(env.context_memory);
            let s =
                route::spill(out, staging, input, &docs, &tables, &routes, groups, wave).await?;
            env.clock
                .add(Phase::Read, process_time().saturating_sub(cpu));
            outputs.summary.bytes_in += s.bytes_in;
            outputs.summary.add("context_rows_spilled", s.rows_out);
            info!(
                input,
                estimate_bytes = estimate,
                budget_bytes = env.context_memory,
                groups = groups.count,
                questions_per_group = groups.size,
                groups_per_wave = wave,
                cited_documents = routes.documents.len(),
                cited_tables = routes.tables.len(),
                rows_spilled = s.rows_out,
                seconds = started.elapsed().as_secs_f64(),
                "contexts routed to groups of questions"
            );
            Some(s)
        } else {
            None
        };
        label_groups(
            env,
            out,
            (&docs, &tables, &questions),
            groups,
            spilled.as_mut(),
            parallelism,
            outputs,
        )
        .await
    }
    .await;
    if routed {
        // Whatever the labelling's outcome: the spill parts left (all of them when it failed).
        let removed = route::remove_spill_dir(out, &dir).await;
        match (&result, removed) {
            (Ok(()), Err(e)) => return Err(e),
            (Err(_), Err(e)) => {
                warn!(input, error = %e, "spill parts not removed (the staging directory goes with the run)")
            }
            (_, Ok(())) => {}
        }
    }
    result?;
    let n = outputs.summary.records_in - before;
    let secs = started.elapsed().as_secs_f64();
    info!(
        input,
        questions = n,
        seconds = secs,
        per_second = n as f64 / secs.max(1e-9),
        contexts_estimate_bytes = estimate,
        context_groups = groups.count,
        "input labelled"
    );
    Ok(())
}

/// The staged `documents`, `tables` and `questions` parts of one input.
type InputParts<'a, 'b> = (
    &'b [(String, &'a WrittenPart)],
    &'b [(String, &'a WrittenPart)],
    &'b [(String, &'a WrittenPart)],
);

/// Labels the questions of one input group after group: each group's contexts are read when
/// its first question comes (the input's whole contexts when there is one group, else its
/// spill parts), after every chunk of the group before was consumed and its contexts dropped.
async fn label_groups(
    env: &Env,
    out: &Location,
    (docs, tables, questions): InputParts<'_, '_>,
    groups: Groups,
    mut spilled: Option<&mut route::Spilled>,
    parallelism: usize,
    outputs: &mut Outputs,
) -> Result<(), ExecError> {
    let started = Instant::now();
    let mut lanes = Lanes::new(parallelism);
    let mut ctx: Option<Arc<Contexts>> = None;
    let mut group: Option<u32> = None;
    let mut position = 0u64;
    for (tag, part) in questions {
        if outputs.part() != Some((tag.as_str(), part.shard)) {
            lanes.drain(outputs).await?;
            outputs.start_tag(tag, part.shard).await?;
        }
        outputs.summary.bytes_in += part.bytes;
        let mut stream = Box::pin(read_part(out, &part.path()).await?);
        while let Some(batch) = stream.next().await {
            let mut lap = Lap::start();
            let batch: Vec<Question> = from_batch(TableKind::Questions, &batch?)?;
            env.clock.add(Phase::Read, lap.lap());
            let mut chunk = Vec::with_capacity(CHUNK);
            for q in batch {
                let g = groups.of(position);
                position += 1;
                if group != Some(g) {
                    if let Some(c) = &ctx
                        && !chunk.is_empty()
                    {
                        lanes
                            .push(env, c, std::mem::take(&mut chunk), outputs)
                            .await?;
                    }
                    lanes.drain(outputs).await?;
                    // The group before's contexts go before the next group's are read.
                    drop(ctx.take());
                    if let (Some(s), Some(done)) = (spilled.as_deref_mut(), group) {
                        s.remove(out, done).await?;
                    }
                    let cpu = process_time();
                    let (c, bytes) = match spilled.as_deref() {
                        Some(s) => {
                            let d = s.parts(g, TableKind::Documents);
                            let t = s.parts(g, TableKind::Tables);
                            load_contexts(out, &d, &t, parallelism).await?
                        }
                        None => {
                            let (c, bytes) = load_contexts(out, docs, tables, parallelism).await?;
                            outputs.summary.bytes_in += bytes;
                            (c, bytes)
                        }
                    };
                    env.clock
                        .add(Phase::Read, process_time().saturating_sub(cpu));
                    info!(
                        group = g,
                        groups = groups.count,
                        documents = c.documents.len(),
                        tables = c.tables.len(),
                        bytes,
                        seconds = started.elapsed().as_secs_f64(),
                        "contexts read"
                    );
                    ctx = Some(Arc::new(c));
                    group = Some(g);
                }
                chunk.push(q);
                if chunk.len() == CHUNK {
                    let c = ctx.as_ref().expect("contexts read above");
                    lanes
                        .push(env, c, std::mem::take(&mut chunk), outputs)
                        .await?;
                }
            }
            if let Some(c) = &ctx
                && !chunk.is_empty()
            {
                lanes.push(env, c, chunk, outputs).await?;
            }
        }
    }
    lanes.drain(outputs).await?;
    outputs.finish_tag().await
}
