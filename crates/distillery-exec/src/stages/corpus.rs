//! The `corpus` stage: the documents of its inputs applied to a corpus root
//! ([`distillery_index::corpus`]) as one new version, switched in through the root's
//! `CURRENT`.
//!
//! Given a snapshot (a `mediawiki` input that is not a daily folder) on an empty root, the
//! version is the base: every document. Given daily adds-changes folders, each day not yet
//! applied is applied in date order: the newest revision of each page it holds replaces the
//! page's row (a move follows the page id), the `changes` rows of its `mediawiki-log` inputs
//! (a logging dump, or a list of deleted pages) delete and restore pages, and only the pages
//! touched are written; a day applied before is skipped with a message, a missing day is
//! refused unless `allow_gaps`. A run that changes nothing publishes nothing. The output gets
//! `corpora/<stage>.json`: the version's manifest and its root. One task applies the night.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use distillery_core::schema::from_batch;
use distillery_core::spec::{Format, Pipeline, StageCheck, StageOptions, StageSpec};
use distillery_core::summary::{ManifestFile, StageSummary};
use distillery_core::{Change, Document, TableKind};
use distillery_index::corpus::{self, Day, Deletion, Night, PartWriter};
use futures::StreamExt;
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use tracing::info;

use crate::error::ExecError;
use crate::kit::retrieval::root_of;
use crate::kit::rows::{each_row, input_parts};
use crate::parts::read_part_rows;
use crate::run::StageOutput;
use crate::stages::{Declared, Reads, RunCx, Stage};
use crate::store::{is_url, open_location};

/// Options of a `corpus` stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CorpusOptions {
    /// The corpus root (path or URL). Default: `<output>/corpus`.
    #[serde(default)]
    pub root: Option<String>,
    /// Apply a day even when the day before it was never applied (the dumps service skipped
    /// it, say); otherwise such a night is refused naming the missing day.
    #[serde(default)]
    pub allow_gaps: bool,
    /// Replace a corpus that has a base with the snapshot given (a new base, all its
    /// documents); otherwise a snapshot on a corpus with versions is refused.
    #[serde(default)]
    pub rebase: bool,
    /// Parts past which a night rewrites the live rows into fresh parts (compaction).
    #[serde(default = "default_compact_after")]
    pub compact_after: usize,
    /// Versions kept under the root (the current one always is, and every file a kept version
    /// reads).
    #[serde(default = "default_keep")]
    pub keep_versions: usize,
}

fn default_compact_after() -> usize {
    32
}

fn default_keep() -> usize {
    7
}

/// The `corpus` stage.
pub struct CorpusStage;

impl Stage for CorpusStage {
    fn kind(&self) -> &'static str {
        "corpus"
    }

    fn options_schema(&self) -> schemars::Schema {
        schemars::schema_for!(CorpusOptions)
    }

    fn check(&self, cx: &mut StageCheck<'_, '_>) -> Option<StageOptions> {
        let o: CorpusOptions = cx.options()?;
        if o.compact_after < 2 {
            cx.error("compact_after", "`compact_after` must be at least 2");
        }
        if o.keep_versions == 0 {
            cx.error("keep_versions", "`keep_versions` must be at least 1");
        }
        Some(StageOptions::new(o))
    }

    fn outputs(&self, stage: &StageSpec) -> Declared {
        Declared {
            tables: Vec::new(),
            files: vec![format!("corpora/{}.json", stage.name)],
        }
    }

    fn reads<'a>(
        &'a self,
        stage: &'a StageSpec,
        pipeline: &'a Pipeline,
    ) -> BoxFuture<'a, Result<Reads, ExecError>> {
        Box::pin(applied_folders(stage, pipeline))
    }

    fn run<'a>(&'a self, cx: RunCx<'a>) -> BoxFuture<'a, Result<StageOutput, ExecError>> {
        Box::pin(run(cx))
    }
}

/// The stage's root: its `root` option, else `<output>/corpus`.
fn root_url(o: &CorpusOptions, p: &Pipeline) -> String {
    o.root
        .clone()
        .unwrap_or_else(|| format!("{}/corpus", p.output.trim_end_matches('/')))
}

/// The daily folders of the stage's inputs whose day the root's current version applied: a
/// run need not read them (a rebase reads everything).
async fn applied_folders(stage: &StageSpec, p: &Pipeline) -> Result<Reads, ExecError> {
    let o: &CorpusOptions = crate::stages::options(stage)?;
    let url = root_url(o, p);
    if o.rebase || (!is_url(&url) && !std::path::Path::new(&url).is_dir()) {
        return Ok(Reads::All);
    }
    let root = root_of(open_location(&url, false)?);
    let Some(current) = corpus::current(&root).await? else {
        return Ok(Reads::All);
    };
    let mut applied = HashSet::new();
    for input in &p.inputs {
        if input.format != Format::MediaWiki || !stage.inputs.contains(&input.name) {
            continue;
        }
        let (found, _) = crate::plan::daily_days(&input.paths);
        for f in found.into_iter().filter_map(|(_, f)| f).flatten() {
            if current
                .days
                .iter()
                .any(|d| d.wiki == f.wiki && d.date == f.date)
            {
                applied.insert(f.dir);
            }
        }
    }
    Ok(Reads::AllBut(applied))
}

/// The daily folders of the stage's `mediawiki` inputs, by their pages file's name, and
/// whether any input is a snapshot.
fn days_of(cx: &RunCx<'_>) -> Result<(HashMap<String, Day>, bool), ExecError> {
    let (mut days, mut snapshot) = (HashMap::new(), false);
    for input in &cx.pipeline.inputs {
        if input.format != Format::MediaWiki || !cx.stage.inputs.contains(&input.name) {
            continue;
        }
        let (found, errors) = crate::plan::daily_days(&input.paths);
        if let Some(e) = errors.into_iter().next() {
            return Err(ExecError::Task(e));
        }
        for (_, folders) in found {
            let Some(folders) = folders else {
                snapshot = true;
                continue;
            };
            for f in folders {
                let name = f
                    .pages
                    .file_name()
                    .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
                days.insert(
                    name,
                    Day {
                        wiki: f.wiki,
                        date: f.date,
                        max_rev_id: f.max_rev_id,
                    },
                );
            }
        }
    }
    Ok((days, snapshot))
}

async fn run(cx: RunCx<'_>) -> Result<StageOutput, ExecError> {
    let o: &CorpusOptions = crate::stages::options(cx.stage)?;
    let started = Instant::now();
    let root_url = root_url(o, cx.pipeline);
    let loc = open_location(&root_url, true)?;
    crate::confine::claim(&loc, crate::confine::Owned::CorpusRoot).await?;
    let root = root_of(loc);
    let (days, snapshot) = days_of(&cx)?;
    let prev = corpus::current(&root).await?;
    if snapshot && !days.is_empty() {
        return Err(ExecError::Task(format!(
            "stage `{}`: its inputs hold a snapshot and daily folders; a run applies one or \
             the other (the snapshot first, as the base)",
            cx.stage.name
        )));
    }
    if snapshot && prev.is_some() && !o.rebase {
        return Err(ExecError::Task(format!(
            "stage `{}`: {} has a base already; give daily folders, or set `rebase = true` to \
             replace it with this snapshot",
            cx.stage.name, root.display
        )));
    }
    // A rebase starts a new base, numbered after every version of the root.
    let replaced = match (snapshot, &prev) {
        (true, Some(_)) => Some(
            corpus::list(&root)
                .await?
                .iter()
                .filter_map(|v| v.manifest.as_ref().map(|m| m.seq + 1))
                .max()
                .unwrap_or(1),
        ),
        _ => None,
    };
    let prev = if snapshot { None } else { prev };
    let applied = prev.as_ref().map_or(&[][..], |m| &m.days[..]);
    let all: Vec<Day> = days.values().cloned().collect();
    let (apply, repeated) = corpus::plan_days(applied, &all, o.allow_gaps)
        .map_err(|e| ExecError::Task(format!("stage `{}`: {e}", cx.stage.name)))?;
    for d in &repeated {
        info!(stage = %cx.stage.name, wiki = %d.wiki, date = %d.date, "day applied before: skipped");
    }
    // A row is the night's when it comes from a snapshot or from a day it applies.
    let applies = |d: &Document| match days.get(&d.source) {
        None => snapshot,
        Some(day) => apply.contains(day),
    };
    let docs = input_parts(&cx, TableKind::Documents);
    let mut night = Night::new(prev.clone(), &cx.pipeline.hash);
    if let Some(seq) = replaced {
        night = Night::base_at(seq, &cx.pipeline.hash);
    }
    let mut summary = StageSummary::new(&cx.stage.name);
    let mut records_in = 0u64;
    if prev.is_some() {
        summary.bytes_in += each_row(cx.out, TableKind::Documents, &docs, |d: Document| {
            records_in += 1;
            if applies(&d) {
                night.see(&d);
            }
            Ok(())
        })
        .await?;
        let mut logged_moves = 0u64;
        let changes = input_parts(&cx, TableKind::Changes);
        summary.bytes_in += each_row(cx.out, TableKind::Changes, &changes, |c: Change| {
            records_in += 1;
            match c.kind.as_str() {
                "deleted" | "restored" => night.delete(Deletion {
                    title: c.title,
                    page_id: c.page_id,
                    timestamp: c.timestamp,
                    restore: c.kind == "restored",
                }),
                // A move is in the day's revisions: the page keeps its id.
                _ => logged_moves += 1,
            }
            Ok(())
        })
        .await?;
        summary
            .counters
            .insert("changes.moves_logged".into(), logged_moves);
        night.resolve(&root).await?;
    }
    let out_file = format!("corpora/{}.json", cx.stage.name);
    if let Some(p) = prev
        .as_ref()
        .filter(|_| night.is_empty() && apply.is_empty())
    {
        info!(stage = %cx.stage.name, version = %p.version, "nothing new: the corpus stays as it is");
        summary
            .counters
            .insert("days.repeated".into(), repeated.len() as u64);
        summary.counters.insert("versions.kept".into(), 1);
        summary.counters.insert("pages".into(), p.pages);
        return finish(&cx, summary, started, &out_file, &root.display, p, false).await;
    }
    let mut w = PartWriter::new(&root, &night.version, night.seq);
    let base = prev.is_none();
    if base {
        summary.bytes_in = docs.iter().map(|p| p.bytes).sum();
    }
    for part in &docs {
        let mut stream = Box::pin(read_part_rows(cx.out, &part.path(), 256).await?);
        while let Some(batch) = stream.next().await {
            for d in from_batch::<Document>(TableKind::Documents, &batch?)? {
                if base {
                    records_in += 1;
                }
                if if base { applies(&d) } else { night.keep(&d) } {
                    w.push(d).await?;
                }
            }
        }
    }
    let parts = w.finish().await?;
    let source = format!("{} ({})", cx.pipeline.output, cx.stage.name);
    let (mut m, report) = night
        .finish(&root, parts, apply.clone(), &cx.pipeline.hash, &source)
        .await?;
    if m.parts.len() > o.compact_after {
        corpus::compact(&root, &mut m).await?;
    }
    corpus::publish(&root, &m).await?;
    let pruned = corpus::prune(&root, o.keep_versions).await?;
    let c = &report.counts;
    for (k, v) in [
        ("pages", m.pages),
        ("pages.written", report.written),
        ("pages.added", c.added),
        ("pages.changed", c.changed),
        ("pages.moved", c.moved),
        ("pages.deleted", c.deleted),
        ("pages.restored", c.restored),
        ("pages.stale", c.stale),
        ("changes.unmatched", c.unmatched),
        ("days.applied", apply.len() as u64),
        ("days.repeated", repeated.len() as u64),
        ("compacted", u64::from(m.compacted)),
        ("versions.pruned", pruned.len() as u64),
    ] {
        if v > 0 || k == "pages" {
            summary.counters.insert(k.into(), v);
        }
    }
    summary.records_in = records_in;
    summary.records_out = report.written;
    info!(stage = %cx.stage.name, version = %m.version, root = %root.display, pages = m.pages, "corpus version published");
    finish(&cx, summary, started, &out_file, &root.display, &m, true).await
}

async fn finish(
    cx: &RunCx<'_>,
    mut summary: StageSummary,
    started: Instant,
    rel: &str,
    root: &str,
    m: &corpus::Manifest,
    published: bool,
) -> Result<StageOutput, ExecError> {
    let body = serde_json::to_vec_pretty(&serde_json::json!({
        "root": root,
        "version": m.version,
        "published": published,
        "manifest": m,
    }))
    .map_err(|e| ExecError::Task(e.to_string()))?;
    let bytes = body.len() as u64;
    cx.out.write(&format!("{}/{rel}", cx.dir), body).await?;
    summary.seconds = started.elapsed().as_secs_f64();
    Ok(StageOutput {
        summary,
        files: vec![ManifestFile {
            path: rel.to_string(),
            rows: 1,
            bytes,
        }],
        ..Default::default()
    })
}
