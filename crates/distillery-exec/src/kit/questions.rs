//! The question loop of the stages cut by questions, as a cursor: each input's context
//! documents, then its `questions` parts in part order, read in batches and cut to the
//! stage's [`QuestionCap`]; the part writers of the batch's tag (`<input>@<stage>`) are at
//! hand for its rows. Memory: one input's context documents and one batch of questions.

use std::collections::{BTreeMap, HashMap};
use std::pin::Pin;

use arrow::record_batch::RecordBatch;
use distillery_core::schema::from_batch;
use distillery_core::summary::StageSummary;
use distillery_core::{Document, Question, TableKind};
use futures::{Stream, StreamExt};

use crate::contract::options::QuestionCap;
use crate::contract::{RunCx, stage_tag};
use crate::error::ExecError;
use crate::kit::contexts::{context_documents, question_tags};
use crate::parts::{PartWriters, WrittenPart, read_part_rows};

/// Questions read per batch.
const BATCH: usize = 64;

type Batches = Pin<Box<dyn Stream<Item = Result<RecordBatch, ExecError>> + Send>>;

/// The cursor over a task's questions.
pub struct Questions<'a> {
    cx: &'a RunCx<'a>,
    left: u64,
    inputs: std::slice::Iter<'a, String>,
    docs: HashMap<String, Document>,
    tags: std::collections::btree_map::IntoIter<String, Vec<&'a WrittenPart>>,
    parts: std::vec::IntoIter<&'a WrittenPart>,
    batches: Option<(u32, Batches)>,
    writers: Option<PartWriters>,
    /// Bytes of the context documents read (every task reads them whole: count them once).
    pub context_bytes: u64,
    /// The parts written through [`Questions::writers`], once a tag is done.
    pub written: Vec<WrittenPart>,
}

impl<'a> Questions<'a> {
    /// The task's questions, at most `cap` in all.
    pub fn new(cx: &'a RunCx<'a>, cap: &QuestionCap) -> Questions<'a> {
        Questions {
            cx,
            left: cap.budget(),
            inputs: cx.stage.inputs.iter(),
            docs: HashMap::new(),
            tags: BTreeMap::new().into_iter(),
            parts: Vec::new().into_iter(),
            batches: None,
            writers: None,
            context_bytes: 0,
            written: Vec::new(),
        }
    }

    /// The next batch and the shard of its part (`None` when every question was read),
    /// counting the questions as records and the parts' bytes in `summary`.
    pub async fn next(
        &mut self,
        summary: &mut StageSummary,
    ) -> Result<Option<(Vec<Question>, u32)>, ExecError> {
        let (out, stage) = (self.cx.out, self.cx.stage);
        while self.left > 0 {
            if let Some((shard, batches)) = &mut self.batches {
                if let Some(batch) = batches.next().await {
                    let mut questions: Vec<Question> = from_batch(TableKind::Questions, &batch?)?;
                    questions.truncate(self.left.min(questions.len() as u64) as usize);
                    self.left -= questions.len() as u64;
                    summary.records_in += questions.len() as u64;
                    return Ok(Some((questions, *shard)));
                }
                self.batches = None;
            }
            if let Some(part) = self.parts.next() {
                summary.bytes_in += part.bytes;
                let rows = read_part_rows(out, &part.path(), BATCH).await?;
                self.batches = Some((part.shard, Box::pin(rows)));
                continue;
            }
            self.finish_tag().await?;
            if let Some((tag, parts)) = self.tags.next() {
                self.writers = Some(PartWriters::new(
                    out.clone(),
                    self.cx.dir,
                    &stage_tag(&tag, &stage.name),
                ));
                self.parts = parts.into_iter();
                continue;
            }
            let Some(input) = self.inputs.next() else {
                break;
            };
            let (docs, bytes) = context_documents(out, self.cx.parts, input).await?;
            (self.docs, self.context_bytes) = (docs, self.context_bytes + bytes);
            self.tags = question_tags(self.cx.parts, input).into_iter();
        }
        self.finish_tag().await?;
        Ok(None)
    }

    /// The context documents of the batch's input, by id.
    pub fn docs(&self) -> &HashMap<String, Document> {
        &self.docs
    }

    /// The part writers of the batch's tag.
    pub fn writers(&mut self) -> Result<&mut PartWriters, ExecError> {
        self.writers
            .as_mut()
            .ok_or_else(|| ExecError::Task("no question batch was read".into()))
    }

    async fn finish_tag(&mut self) -> Result<(), ExecError> {
        if let Some(pw) = self.writers.take() {
            self.written.extend(pw.finish().await?);
        }
        Ok(())
    }
}
