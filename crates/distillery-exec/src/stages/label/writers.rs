//! The Parquet writer task of one shard: the `labels` and `sft` rows sent to it built into
//! batches, encoded and compressed into the shard's parts, off the consumer.

use distillery_core::schema::{sft_batch, to_batch};
use distillery_core::{LabelRecord, SftSample, TableKind};
use tokio_util::task::AbortOnDropHandle;

use super::task_err;
use crate::error::ExecError;
use crate::parts::{PartWriters, WrittenPart};

/// Rows for one shard's Parquet parts.
pub(super) enum Rows {
    Labels(Vec<LabelRecord>),
    Samples(Vec<SftSample>),
}

/// Batches in a shard writer's queue: with
/// [`SAMPLE_BUFFER_BYTES`](super::outputs::SAMPLE_BUFFER_BYTES) of samples a batch, at most
/// this many + 1 (the one being written) such batches per shard are held.
const SHARD_QUEUE: usize = 2;

/// The `labels` and `sft` parts of one shard of the current tag, written by a task of its own
/// (building the batch, encoding and compressing it), so the shards encode in parallel with
/// each other and with the labelling while the consumer moves on. Rows reach it in the order
/// they were sent.
pub(super) struct ShardWriter {
    tx: tokio::sync::mpsc::Sender<Rows>,
    task: AbortOnDropHandle<Result<Vec<WrittenPart>, ExecError>>,
}

impl ShardWriter {
    pub(super) fn spawn(mut writers: PartWriters, shard: u32) -> ShardWriter {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Rows>(SHARD_QUEUE);
        let task = AbortOnDropHandle::new(tokio::spawn(async move {
            while let Some(rows) = rx.recv().await {
                match rows {
                    Rows::Labels(r) => {
                        write_rows(&mut writers, TableKind::Labels, shard, &r).await?;
                    }
                    Rows::Samples(r) => write_sft_rows(&mut writers, shard, &r).await?,
                }
            }
            writers.finish().await
        }));
        ShardWriter { tx, task }
    }

    /// Queues rows (waits while the queue is full). When the task has stopped on an error,
    /// returns that error; the stage then fails, and the writer is not used again.
    pub(super) async fn send(&mut self, rows: Rows) -> Result<(), ExecError> {
        if self.tx.send(rows).await.is_ok() {
            return Ok(());
        }
        match (&mut self.task).await {
            Ok(Err(e)) => Err(e),
            Ok(Ok(_)) => Err(ExecError::Task("shard writer stopped early".into())),
            Err(e) => Err(task_err(e)),
        }
    }

    /// Closes the queue and the shard's parts.
    pub(super) async fn finish(self) -> Result<Vec<WrittenPart>, ExecError> {
        drop(self.tx);
        self.task.await.map_err(task_err)?
    }
}

async fn write_rows<T: serde::Serialize>(
    w: &mut PartWriters,
    table: TableKind,
    shard: u32,
    rows: &[T],
) -> Result<(), ExecError> {
    if rows.is_empty() {
        return Ok(());
    }
    let batch = to_batch(table, rows)?;
    w.write(table, shard, &batch).await
}

/// [`write_rows`] for SFT samples ([`sft_batch`]: buffers sized once, not grown).
async fn write_sft_rows(
    w: &mut PartWriters,
    shard: u32,
    rows: &[SftSample],
) -> Result<(), ExecError> {
    if rows.is_empty() {
        return Ok(());
    }
    w.write(TableKind::Sft, shard, &sft_batch(rows)?).await
}
