//! SFT output shared by the teacher stages, run as one task per shard of their questions: a
//! task splits its samples by question id hash and writes them to its own
//! `<dir>/train.jsonl` / `<dir>/validation.jsonl` (the label stage's line form,
//! [`crate::kit::jsonl::jsonl_line`]) with one ledger line each
//! ([`crate::kit::sft_merge::LedgerWriter`]), and buffers them for the `sft` table in the
//! shard of the question part they came from, so no two tasks write the same part. The
//! stage's merge task ([`merge_stage`]) removes exact duplicates across the tasks and writes
//! the published `<dir>/train.jsonl`, `validation.jsonl` and `dataset_info.json`
//! ([`crate::kit::sft_merge::merge_sft`]). Chat-template control tokens in a sample's
//! messages are broken before it is written
//! ([`distillery_label::sft::neutralise_control_tokens`]). Memory: the samples of one batch.

use std::collections::BTreeMap;
use std::time::Instant;

use distillery_core::SftSample;
use distillery_core::TableKind;
use distillery_core::schema::sft_batch;
use distillery_core::summary::{ManifestFile, StageSummary};
use distillery_label::sft::neutralise_messages;

use crate::contract::options::SftSplit;
use crate::contract::{MergeCx, RunCx, StageOutput};
use crate::error::ExecError;
use crate::kit::decontam::Decontaminator;
use crate::kit::jsonl::{JsonlLines, TextFile, content_hash, sample_split};
use crate::kit::sft_merge::{LedgerWriter, Merged, SHARED_BYTES_IN, merge_sft};
use crate::parts::{PartWriters, part_name};
use crate::store::Location;

pub(crate) struct SftOut {
    train: TextFile,
    validation: TextFile,
    ledger: LedgerWriter,
    lines: JsonlLines,
    validation_share: f64,
    buffered: BTreeMap<u32, Vec<SftSample>>,
    shared: BTreeMap<String, u64>,
    /// The stage's evaluation questions ([`SftOut::decontaminated_by`]).
    decon: Option<Decontaminator>,
    /// Samples dropped for touching one.
    decontaminated: u64,
}

impl SftOut {
    pub(crate) fn new(out: &Location, staging: &str, dir: &str, validation_share: f64) -> SftOut {
        SftOut {
            train: TextFile::new(out, staging, &format!("{dir}/train.jsonl")),
            validation: TextFile::new(out, staging, &format!("{dir}/validation.jsonl")),
            ledger: LedgerWriter::new(out, staging),
            lines: JsonlLines::default(),
            validation_share,
            buffered: BTreeMap::new(),
            shared: BTreeMap::new(),
            decon: None,
            decontaminated: 0,
        }
    }

    /// The SFT output of a teacher stage's task under `<dir>/`, with its [`SftSplit`]: the
    /// validation share, and the evaluation files of the task (`side`) loaded.
    pub(crate) async fn for_split(
        cx: &RunCx<'_>,
        dir: &str,
        split: &SftSplit,
    ) -> Result<SftOut, ExecError> {
        let (files, formats) = (&split.decontaminate, &split.decontaminate_formats);
        let decon = crate::kit::decontam::load(files, formats, cx.side).await?;
        Ok(SftOut::new(cx.out, cx.dir, dir, split.validation_share).decontaminated_by(decon))
    }

    /// Drops the samples that touch an evaluation question of `d` (the stage's
    /// `decontaminate` files, [`crate::kit::decontam`]), counting them in `decontaminated`;
    /// `decontaminate.questions` counts the questions loaded, once for the stage.
    pub(crate) fn decontaminated_by(mut self, d: Decontaminator) -> SftOut {
        self.ledger.once("decontaminate.questions", d.len() as u64);
        self.decon = (!d.is_empty()).then_some(d);
        self
    }

    /// Splits and writes a sample of `question` (its text; empty for a sample of no question)
    /// read from the part of shard `shard`, unless it touches an evaluation question; its
    /// `sft` row goes to that shard of the part writers of tag `tag` (derived from the
    /// question part's; [`SftOut::flush`] gets them). Duplicates are removed by the merge
    /// task, which also counts the samples.
    pub(crate) async fn add(
        &mut self,
        mut s: SftSample,
        question: &str,
        tag: &str,
        shard: u32,
    ) -> Result<(), ExecError> {
        if self.decon.as_ref().is_some_and(|d| d.touches(question, &s)) {
            self.decontaminated += 1;
            return Ok(());
        }
        // Control tokens from source text (a question, a context, a teacher's answer quoting
        // them) are broken before the line, the row and the duplicate hash see the sample;
        // the ledger marks it and the merge counts it (`control_tokens_neutralised`).
        neutralise_messages(&mut s.messages);
        s.split = sample_split(&s, self.validation_share).to_string();
        let line = self.lines.line(&s);
        if s.split == "validation" {
            self.validation.write(&line).await?;
        } else {
            self.train.write(&line).await?;
        }
        let part = part_name(TableKind::Sft, shard, tag);
        self.ledger.add(&s, content_hash(&s), &part).await?;
        self.buffered.entry(shard).or_default().push(s);
        Ok(())
    }

    /// Bytes every task of the stage reads alike (the context documents, a corpus): added to
    /// the stage's `bytes_in` once, by the merge, however many tasks read them.
    pub(crate) fn shared_bytes_in(&mut self, bytes: u64) {
        self.shared(SHARED_BYTES_IN, bytes);
    }

    /// A counter every task of the stage counts alike (a corpus's passages): the merge adds
    /// it once. Calls add up.
    pub(crate) fn shared(&mut self, counter: &str, n: u64) {
        let total = self.shared.entry(counter.to_string()).or_default();
        *total += n;
        self.ledger.once(counter, *total);
    }

    /// Writes the buffered samples as `sft` batches.
    pub(crate) async fn flush(&mut self, pw: &mut PartWriters) -> Result<(), ExecError> {
        for (shard, rows) in std::mem::take(&mut self.buffered) {
            pw.write(TableKind::Sft, shard, &sft_batch(&rows)?).await?;
        }
        Ok(())
    }

    /// Closes the JSONL files and the ledger: the files staged for the merge task. Counts
    /// `decontaminated` into the task's summary.
    pub(crate) async fn finish(
        self,
        summary: &mut StageSummary,
    ) -> Result<Vec<ManifestFile>, ExecError> {
        summary.add("decontaminated", self.decontaminated);
        let mut files = vec![self.train.finish().await?, self.validation.finish().await?];
        files.extend(self.ledger.finish().await?);
        Ok(files)
    }
}

/// What every sample of one teacher stage's task shares: its lineage.
pub(crate) struct Lineage {
    pub method: &'static str,
    /// The stage's settings that shaped its samples, as JSON.
    pub params: String,
    pub template_id: &'static str,
    pub template_version: String,
    pub pipeline_hash: String,
    pub teacher: String,
}

impl Lineage {
    /// A one-turn sample of question `q` (task `task`: `user` in, `assistant` out) and the
    /// response-cache entries it came from; its id hashes the question, task and target.
    pub(crate) fn sample(
        &self,
        q: &distillery_core::Question,
        task: &str,
        (user, assistant): (String, String),
        cache_entries: Vec<String>,
    ) -> SftSample {
        let tokens = |s: &str| s.chars().count().div_ceil(4) as u32;
        SftSample {
            id: distillery_core::id::stable_id(&[&q.id, task, &assistant]),
            task: task.to_string(),
            prompt_tokens: tokens(&user),
            target_tokens: tokens(&assistant),
            messages: vec![
                distillery_core::Message {
                    role: "user".into(),
                    content: user,
                },
                distillery_core::Message {
                    role: "assistant".into(),
                    content: assistant,
                },
            ],
            weight: 1.0,
            dataset: q.dataset.clone(),
            question_id: q.id.clone(),
            method: self.method.into(),
            params: self.params.clone(),
            template_id: self.template_id.into(),
            template_version: self.template_version.clone(),
            pipeline_hash: self.pipeline_hash.clone(),
            teacher: Some(self.teacher.clone()),
            cache_entries,
            ..Default::default()
        }
    }
}

/// The merge task of a stage that wrote through [`SftOut`] into `<dir>/`: duplicates removed
/// across its tasks, the published JSONL files and `dataset_info.json`, and the samples
/// counted (`samples.<split>`, `samples.<task>`, `duplicates_removed`). `more` adds the
/// stage's own merged files (its fragments, [`crate::kit::fragments`]).
pub(crate) async fn merge_stage(
    cx: &MergeCx<'_>,
    dir: &str,
    more: Vec<ManifestFile>,
) -> Result<StageOutput, ExecError> {
    let started = Instant::now();
    let mut summary = StageSummary::new(&cx.stage.name);
    let Merged {
        mut files,
        adopted,
        parts,
    } = merge_sft(cx.out, cx.dir, dir, cx.shards, &mut summary).await?;
    summary.bytes_out += more.iter().map(|f| f.bytes).sum::<u64>();
    files.extend(more);
    summary.seconds = started.elapsed().as_secs_f64();
    Ok(StageOutput {
        summary,
        parts,
        files,
        adopted,
        ..Default::default()
    })
}

/// What a stage writing through [`SftOut`] declares: the `sft` table and
/// `<stage>/train.jsonl`, `validation.jsonl`, `dataset_info.json`, after its own `extra`
/// files (also under `<stage>/`).
pub fn sft_declared(stage: &str, extra: &[&str]) -> crate::contract::Declared {
    let files = extra
        .iter()
        .chain(&["train.jsonl", "validation.jsonl", "dataset_info.json"])
        .map(|f| format!("{stage}/{f}"))
        .collect();
    crate::contract::Declared {
        tables: vec![distillery_core::TableKind::Sft],
        files,
    }
}
