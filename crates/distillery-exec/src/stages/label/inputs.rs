//! Reading what the stage labels from: the staged (or spilled) contexts into id → record
//! maps, a KB input's triples or a `subgraph` stage's rows, and a planner stage's plans.

use std::collections::HashMap;
use std::sync::Arc;

use distillery_core::schema::from_batch;
use distillery_core::{Document, SubgraphEdge, Table, TableKind, Triple};
use distillery_label::sh::{KbIndex, KgIds, kg_ids};
use distillery_label::subgraphs::QuestionSubgraphs;
use futures::StreamExt;
use serde_json::Value;
use tokio_util::task::AbortOnDropHandle;

use super::task_err;
use crate::contract::ShardOutput;
use crate::error::ExecError;
use crate::parts::{WrittenPart, read_part};
use crate::store::Location;

/// One input's question contexts.
pub(super) struct Contexts {
    pub(super) documents: Records<Document>,
    pub(super) tables: Records<Table>,
}

/// Records by id. The records lie in a vector sized once from the parts' row counts and the
/// hash table holds indexes into it: a table of whole records (a `Document` is 352 bytes
/// before its text) runs at most 7/8 full and doubles, so it held up to as many bytes again in
/// empty slots, and twice that while it grew.
pub(super) struct Records<T> {
    index: HashMap<String, usize>,
    rows: Vec<T>,
}

impl<T> Records<T> {
    fn with_capacity(n: usize) -> Records<T> {
        Records {
            index: HashMap::with_capacity(n),
            rows: Vec::with_capacity(n),
        }
    }

    /// Adds a record; a later record with the same id replaces the earlier one.
    fn insert(&mut self, id: String, r: T) {
        match self.index.entry(id) {
            std::collections::hash_map::Entry::Occupied(e) => self.rows[*e.get()] = r,
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(self.rows.len());
                self.rows.push(r);
            }
        }
    }

    pub(super) fn get(&self, id: &str) -> Option<&T> {
        self.index.get(id).map(|&i| &self.rows[i])
    }

    pub(super) fn len(&self) -> usize {
        self.rows.len()
    }
}

/// The rows of some parts (their manifest counts), as a capacity.
pub(super) fn rows_of(parts: &[(String, &WrittenPart)]) -> usize {
    parts.iter().map(|(_, p)| p.rows as usize).sum()
}

/// The staged parts of one input's table, in part order: file tag, then shard.
pub(super) fn parts_of<'a>(
    parts: &'a [WrittenPart],
    table: TableKind,
    input: &str,
) -> Vec<(String, &'a WrittenPart)> {
    let mut v: Vec<(String, u32, &WrittenPart)> = parts
        .iter()
        .filter(|p| p.table == table)
        .filter_map(|p| {
            let id = p.id()?;
            (id.input == input).then_some((id.tag, id.shard, p))
        })
        .collect();
    v.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
    v.into_iter().map(|(tag, _, p)| (tag, p)).collect()
}

/// Reads every row of some staged parts of one table, handing them to `each` in part order.
/// Up to `parallelism` parts are read at once, each on a task of its own (decompression on
/// the runtime's workers, decoding on blocking threads), so reading contexts uses the cores
/// the labelling will; the rows of those parts are held until their turn.
async fn read_rows<T: serde::de::DeserializeOwned + Send + 'static>(
    out: &Location,
    table: TableKind,
    parts: &[(String, &WrittenPart)],
    parallelism: usize,
    mut each: impl FnMut(T),
) -> Result<u64, ExecError> {
    let keep = |batches: Vec<Vec<T>>| batches;
    read_parts(out, table, parts, parallelism, keep, |batches| {
        batches.into_iter().flatten().for_each(&mut each)
    })
    .await
}

/// [`read_rows`] a part at a time: each part's rows (a `Vec` a decoded batch) go through
/// `then` on the part's blocking thread, and what it makes reaches `each`, in part order.
async fn read_parts<T, U>(
    out: &Location,
    table: TableKind,
    parts: &[(String, &WrittenPart)],
    parallelism: usize,
    then: impl Fn(Vec<Vec<T>>) -> U + Clone + Send + 'static,
    mut each: impl FnMut(U),
) -> Result<u64, ExecError>
where
    T: serde::de::DeserializeOwned + Send + 'static,
    U: Send + 'static,
{
    // Owned arguments, so that the stream below holds no closure over borrowed parts (its
    // future then stays `Send` for any lifetime, as a boxed stage future must be).
    let args: Vec<(Location, String)> = parts
        .iter()
        .map(|(_, part)| (out.clone(), part.path()))
        .collect();
    let reads = args.into_iter().map(|(out, path)| {
        let then = then.clone();
        // Aborted when dropped: a failed read or a cancelled stage stops the other reads.
        AbortOnDropHandle::new(tokio::spawn(async move {
            let mut rows = Vec::new();
            let mut stream = Box::pin(read_part(&out, &path).await?);
            while let Some(batch) = stream.next().await {
                let batch = batch?;
                let decoded = tokio::task::spawn_blocking(move || from_batch::<T>(table, &batch))
                    .await
                    .map_err(task_err)??;
                rows.push(decoded);
            }
            tokio::task::spawn_blocking(move || then(rows))
                .await
                .map_err(task_err)
        }))
    });
    let mut reads = futures::stream::iter(reads).buffered(parallelism.max(1));
    while let Some(made) = reads.next().await {
        each(made.map_err(task_err)??);
    }
    Ok(parts.iter().map(|(_, p)| p.bytes).sum())
}

/// The plans of the planner stage `planner` (its `plans.jsonl`, as committed by the task that
/// wrote it), by question id.
pub(super) async fn read_plans(
    out: &Location,
    upstream: &[ShardOutput],
    planner: &str,
) -> Result<HashMap<String, distillery_label::guidance::Plan>, ExecError> {
    use tokio::io::AsyncBufReadExt;
    let file = format!("{planner}/plans.jsonl");
    let Some(dir) = crate::kit::contexts::published(upstream, &file) else {
        return Err(ExecError::Task(format!(
            "`plans = \"{planner}\"`: no task below this one published {file}"
        )));
    };
    let path = format!("{dir}/{file}");
    let mut lines = out.reader(&path).await?.lines();
    let mut plans = HashMap::new();
    let bad = |e: String| ExecError::Task(format!("{}: {e}", out.show(&path)));
    while let Some(line) = lines.next_line().await.map_err(|e| bad(e.to_string()))? {
        let v: Value = serde_json::from_str(&line).map_err(|e| bad(e.to_string()))?;
        if let (Some(id), Some(plan)) = (v["question_id"].as_str(), v["plan"].as_str()) {
            let field = |k: &str| v[k].as_str().unwrap_or_default().to_string();
            let plan = distillery_label::guidance::Plan {
                text: plan.to_string(),
                teacher: field("teacher"),
                entry: field("cache_entry"),
            };
            plans.insert(id.to_string(), plan);
        }
    }
    Ok(plans)
}

/// Where questions' KB edges come from (the `kb` option).
#[derive(Clone)]
pub(super) enum Kb {
    /// A KB input, whole in memory.
    Whole(Arc<KbIndex>),
    /// A `subgraph` stage's rows of the task's questions.
    Subgraphs(Arc<QuestionSubgraphs>),
}

impl Kb {
    pub(super) fn len(&self) -> usize {
        match self {
            Kb::Whole(kb) => kb.len(),
            Kb::Subgraphs(sg) => sg.len(),
        }
    }
}

/// Reads the `subgraphs` parts the `subgraph` stage `stage` wrote for the task's questions
/// (a task of this stage is given its shard's only), in part order.
pub(super) async fn load_subgraphs(
    out: &Location,
    parts: &[WrittenPart],
    stage: &str,
    parallelism: usize,
) -> Result<(QuestionSubgraphs, u64), ExecError> {
    let mut sg_parts: Vec<(String, u32, &WrittenPart)> = parts
        .iter()
        .filter(|p| p.table == TableKind::Subgraphs)
        .filter_map(|p| {
            let id = p.id()?;
            (id.stage.as_deref() == Some(stage)).then_some((id.tag, id.shard, p))
        })
        .collect();
    sg_parts.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
    let sg_parts: Vec<(String, &WrittenPart)> =
        sg_parts.into_iter().map(|(t, _, p)| (t, p)).collect();
    let mut rows: Vec<SubgraphEdge> = Vec::with_capacity(rows_of(&sg_parts));
    let bytes = read_rows(out, TableKind::Subgraphs, &sg_parts, parallelism, |r| {
        rows.push(r)
    })
    .await?;
    let sg = tokio::task::spawn_blocking(move || QuestionSubgraphs::new(rows))
        .await
        .map_err(task_err)?;
    Ok((sg, bytes))
}

/// Reads a KB input's staged triples and literals into an index (the whole KB is held in memory), up to
/// `parallelism` parts at once: each part's edges get the segment ids the HSEQ stage gives
/// them ([`kg_ids`], on the part's thread), so the samples' segment ids join the `segments`
/// table.
pub(super) async fn load_kb(
    out: &Location,
    parts: &[WrittenPart],
    input: &str,
    parallelism: usize,
) -> Result<(KbIndex, u64), ExecError> {
    let mut read: Vec<(Vec<Triple>, Vec<KgIds>)> = Vec::new();
    let mut bytes = 0;
    for table in TableKind::KG_EDGES {
        let kb_parts = parts_of(parts, table, input);
        let with_ids = |batches: Vec<Vec<Triple>>| {
            let rows: Vec<Triple> = batches.into_iter().flatten().collect();
            let ids = kg_ids(&rows);
            (rows, ids)
        };
        bytes += read_parts(out, table, &kb_parts, parallelism, with_ids, |p| {
            read.push(p)
        })
        .await?;
    }
    let kb = tokio::task::spawn_blocking(move || KbIndex::from_parts(read))
        .await
        .map_err(task_err)?;
    Ok((kb, bytes))
}

/// Reads some staged (or spilled) `documents` and `tables` parts into memory; returns them
/// with the bytes of the parts read.
pub(super) async fn load_contexts(
    out: &Location,
    docs: &[(String, &WrittenPart)],
    tables: &[(String, &WrittenPart)],
    parallelism: usize,
) -> Result<(Contexts, u64), ExecError> {
    let mut ctx = Contexts {
        documents: Records::with_capacity(rows_of(docs)),
        tables: Records::with_capacity(rows_of(tables)),
    };
    let mut bytes = read_rows(
        out,
        TableKind::Documents,
        docs,
        parallelism,
        |d: Document| {
            ctx.documents.insert(d.id.clone(), d);
        },
    )
    .await?;
    bytes += read_rows(out, TableKind::Tables, tables, parallelism, |t: Table| {
        ctx.tables.insert(t.id.clone(), t);
    })
    .await?;
    Ok((ctx, bytes))
}
