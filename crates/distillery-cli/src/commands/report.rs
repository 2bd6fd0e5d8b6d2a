//! `distillery report labels`: the label-quality report of an output, recomputed from its
//! `labels` and `questions` tables (exactly the files its manifest lists); with
//! `--format html`, the whole output's page ([`super::report_html`]).
//!
//! Memory: every question of the output reduced to what the report reads (id, dataset, type,
//! level, evidence); the label records are streamed into a [`report::ReportBuilder`], so they
//! are never held.

use std::collections::{BTreeMap, HashMap};
use std::process::ExitCode;

use anyhow::{Result, bail};
use distillery_core::schema::from_batch;
use distillery_core::summary::Manifest;
use distillery_core::{LabelRecord, Question, TableKind};
use distillery_exec::parts::read_part;
use distillery_exec::publish::read_manifest;
use distillery_exec::store::{Location, open_location};
use distillery_label::report;
use futures::StreamExt;

use crate::args::ReportFormat;
use crate::out::out;

/// `distillery report labels URL [--format table|json|html]`.
pub async fn run(url: &str, format: ReportFormat) -> Result<ExitCode> {
    match format {
        ReportFormat::Html => out!("{}", super::report_html::output_html(url).await?),
        _ => out!("{}", labels(url, format).await?),
    }
    Ok(ExitCode::SUCCESS)
}

/// Streams the rows of one table of an output to `each`.
pub(super) async fn for_rows<T: serde::de::DeserializeOwned>(
    loc: &Location,
    manifest: &Manifest,
    table: TableKind,
    mut each: impl FnMut(T),
) -> Result<()> {
    let Some(t) = manifest.table(table.name()) else {
        return Ok(());
    };
    for f in &t.files {
        let mut stream = Box::pin(read_part(loc, &f.path).await?);
        while let Some(batch) = stream.next().await {
            for row in from_batch::<T>(table, &batch?)? {
                each(row);
            }
        }
    }
    Ok(())
}

/// The label report of an output, and per method how many questions got each number of
/// positives.
pub(super) async fn label_report(
    loc: &Location,
    manifest: &Manifest,
) -> Result<(report::LabelReport, BTreeMap<String, BTreeMap<usize, u64>>)> {
    let mut questions: HashMap<String, Question> = HashMap::new();
    for_rows(loc, manifest, TableKind::Questions, |q: Question| {
        let slim = Question {
            id: q.id.clone(),
            dataset: q.dataset,
            question_type: q.question_type,
            level: q.level,
            evidence: q.evidence,
            ..Default::default()
        };
        questions.insert(q.id, slim);
    })
    .await?;
    let mut builder = report::ReportBuilder::default();
    let mut positives: BTreeMap<String, BTreeMap<usize, u64>> = BTreeMap::new();
    for_rows(loc, manifest, TableKind::Labels, |l: LabelRecord| {
        *positives
            .entry(l.method.clone())
            .or_default()
            .entry(l.positives.len())
            .or_default() += 1;
        if let Some(q) = questions.get(&l.question_id) {
            builder.add(&l, q);
        }
    })
    .await?;
    Ok((builder.finish(), positives))
}

/// The report of an output as a table or pretty JSON (dataset → method → level →
/// precision/recall/F1).
pub async fn labels(url: &str, format: ReportFormat) -> Result<String> {
    let loc = open_location(url, false)?;
    let manifest = read_manifest(&loc).await?;
    if manifest.table(TableKind::Labels.name()).is_none() {
        bail!("{url} has no labels table: run a pipeline with a label stage first");
    }
    let (r, _) = label_report(&loc, &manifest).await?;
    Ok(match format {
        ReportFormat::Json => format!("{}\n", serde_json::to_string_pretty(&r.to_json())?),
        _ => r.render_table(),
    })
}
