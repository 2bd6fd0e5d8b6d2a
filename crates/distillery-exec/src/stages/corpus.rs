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
//!
//! With `segments`, the corpus also keeps the HSEQ segments of its pages: each page a version
//! writes is linearized (its text, and the tables the same ingest part took from it), so a
//! night cuts only the touched pages, and an index with unit `segment` follows them.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use distillery_core::schema::from_batch;
use distillery_core::spec::{Format, Pipeline, StageCheck, StageSpec};
use distillery_core::summary::{ManifestFile, StageSummary};
use distillery_core::{Change, Document, Segment, Table, TableKind};
use distillery_hseq::{HseqOptions, Verifier};
use distillery_index::corpus::{self, Day, Deletion, Night, PartWriter};
use distillery_ingest::mediawiki::ENTITY_DATASET;
use futures::StreamExt;
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use tracing::info;

use crate::contract::{Declared, Reads, RunCx, Stage, StageFuture, StageOutput};
use crate::error::ExecError;
use crate::kit::retrieval::root_of;
use crate::kit::rows::{each_row, input_parts};
use crate::parts::{WrittenPart, read_part_rows};
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
    /// Keep the HSEQ segments of the corpus's pages, cut with these options (`segments = {}`
    /// for the defaults): a version linearizes the pages it writes and the tables taken from
    /// them. Set from the base on; changing it needs `rebase`.
    #[serde(default)]
    pub segments: Option<HseqOptions>,
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
    type Options = CorpusOptions;

    fn kind(&self) -> &'static str {
        "corpus"
    }

    fn check(&self, o: &mut CorpusOptions, cx: &mut StageCheck<'_, '_>) {
        if o.compact_after < 2 {
            cx.error("compact_after", "`compact_after` must be at least 2");
        }
        if o.keep_versions == 0 {
            cx.error("keep_versions", "`keep_versions` must be at least 1");
        }
    }

    fn outputs(&self, _o: &CorpusOptions, stage: &StageSpec) -> Declared {
        Declared {
            tables: Vec::new(),
            files: vec![format!("corpora/{}.json", stage.name)],
        }
    }

    fn reads<'a>(
        &'a self,
        o: &'a CorpusOptions,
        stage: &'a StageSpec,
        pipeline: &'a Pipeline,
    ) -> BoxFuture<'a, Result<Reads, ExecError>> {
        Box::pin(applied_folders(o, stage, pipeline))
    }

    fn run<'a>(&'a self, o: &'a CorpusOptions, cx: RunCx<'a>) -> StageFuture<'a> {
        Box::pin(run(o, cx))
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
async fn applied_folders(
    o: &CorpusOptions,
    stage: &StageSpec,
    p: &Pipeline,
) -> Result<Reads, ExecError> {
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
        let (found, _) = crate::kit::daily::daily_days(&input.paths, false);
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
        let (found, errors) = crate::kit::daily::daily_days(&input.paths, false);
        if let Some(e) = errors.into_iter().next() {
            return Err(ExecError::Task(e));
        }
        for (_, folders) in found {
            let Some(folders) = folders else {
                snapshot = true;
                continue;
            };
            for f in folders {
                let name = f.pages_name().to_string();
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

async fn run(o: &CorpusOptions, cx: RunCx<'_>) -> Result<StageOutput, ExecError> {
    let started = Instant::now();
    let root_url = root_url(o, cx.pipeline);
    let loc = open_location(&root_url, true)?;
    crate::claim::claim(&loc, crate::claim::Owned::CorpusRoot).await?;
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
    let cut = o.segments.as_ref().map(Cutter::new);
    let fingerprint = cut.as_ref().map(|c| c.fingerprint.clone());
    if let Some(p) = &prev
        && p.segments != fingerprint
    {
        return Err(ExecError::Task(format!(
            "stage `{}`: {} keeps {}, the stage's `segments` asks for {}; set `rebase = true` \
             with a snapshot to cut the corpus again",
            cx.stage.name,
            root.display,
            p.segments
                .as_deref()
                .map_or("no segments".into(), |s| format!("segments {s}")),
            fingerprint
                .as_deref()
                .map_or("none".into(), |s| format!("segments {s}")),
        )));
    }
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
    let mut sw = cut
        .as_ref()
        .map(|_| PartWriter::<Segment>::new(&root, &night.version, night.seq));
    let tables = tables_by_part(&cx);
    let mut cut = cut;
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
                    // A Wikidata page's text is entity JSON: the KG's, not segments.
                    if let (Some(c), Some(sw), false) =
                        (&mut cut, &mut sw, d.dataset == ENTITY_DATASET)
                    {
                        for s in c.document(&d, &part.rel)? {
                            sw.push(s).await?;
                        }
                    }
                    w.push(d).await?;
                }
            }
        }
        // The tables the same ingest part took from the pages written.
        if let (Some(c), Some(sw)) = (&mut cut, &mut sw)
            && let Some(tps) = part.id().and_then(|id| tables.get(&(id.tag, id.shard)))
        {
            for tp in tps {
                let mut stream = Box::pin(read_part_rows(cx.out, &tp.path(), 256).await?);
                while let Some(batch) = stream.next().await {
                    for t in from_batch::<Table>(TableKind::Tables, &batch?)? {
                        for s in c.table(&t) {
                            sw.push(s).await?;
                        }
                    }
                }
            }
        }
        if let Some(c) = &mut cut {
            c.pages.clear();
        }
    }
    let parts = w.finish().await?;
    let segment_parts = match sw {
        Some(sw) => sw.finish().await?,
        None => Vec::new(),
    };
    let source = format!("{} ({})", cx.pipeline.output, cx.stage.name);
    let (mut m, report) = night
        .finish(&root, parts, apply.clone(), &cx.pipeline.hash, &source)
        .await?;
    m.segment_parts.extend(segment_parts);
    m.segments = fingerprint;
    if let Some(c) = &cut {
        c.count(&mut summary);
    }
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

/// The tables parts of the stage's inputs, by the (tag, shard) of the ingest part they share
/// with the documents they were taken from.
fn tables_by_part(cx: &RunCx<'_>) -> HashMap<(String, u32), Vec<WrittenPart>> {
    let mut out: HashMap<(String, u32), Vec<WrittenPart>> = HashMap::new();
    for p in input_parts(cx, TableKind::Tables) {
        if let Some(id) = p.id() {
            out.entry((id.tag, id.shard)).or_default().push(p);
        }
    }
    out
}

/// Cuts the pages a version writes into HSEQ segments named by their page and revision.
struct Cutter {
    opts: HseqOptions,
    /// The options as the manifest records them (`verify` left out: it changes no segment).
    fingerprint: String,
    verifier: Verifier,
    /// The pages written from the current documents part: document id → (page id, revision).
    pages: HashMap<String, (i64, Option<i64>)>,
    segments: u64,
    failures: u64,
}

impl Cutter {
    fn new(opts: &HseqOptions) -> Cutter {
        let mut key = opts.clone();
        key.verify = true;
        Cutter {
            opts: opts.clone(),
            fingerprint: serde_json::to_string(&key).unwrap_or_default(),
            verifier: Verifier::new(),
            pages: HashMap::new(),
            segments: 0,
            failures: 0,
        }
    }

    /// A written page's text segments; a page needs an id (the corpus keys segments by it).
    fn document(&mut self, d: &Document, part: &str) -> Result<Vec<Segment>, ExecError> {
        let page = d.page_id.ok_or_else(|| {
            ExecError::Task(format!(
                "{part}: document `{}` has no page id; a corpus that keeps segments keys them \
                 by page",
                d.id
            ))
        })?;
        self.pages.insert(d.id.clone(), (page, d.revision_id));
        let segs = distillery_hseq::encode_document(d, &self.opts);
        if self.opts.verify && self.verifier.verify_document(d, &segs).is_err() {
            self.failures += 1;
            tracing::warn!(document = %d.id, "page does not round-trip through hseq");
        }
        self.segments += segs.len() as u64;
        Ok(segs)
    }

    /// The segments of a table taken from a page written from the current part (none for
    /// another page's), named by the page and its revision.
    fn table(&mut self, t: &Table) -> Vec<Segment> {
        let Some(&(page, revision)) = t.document_id.as_ref().and_then(|d| self.pages.get(d)) else {
            return Vec::new();
        };
        let mut segs = distillery_hseq::encode_table(t, &self.opts);
        if self.opts.verify && self.verifier.verify_table(t, &segs).is_err() {
            self.failures += 1;
            tracing::warn!(table = %t.id, "table does not round-trip through hseq");
        }
        for s in &mut segs {
            s.page_id = Some(page);
            s.source_version = revision.map(|r| r.to_string());
        }
        self.segments += segs.len() as u64;
        segs
    }

    fn count(&self, summary: &mut StageSummary) {
        summary
            .counters
            .insert("segments.written".into(), self.segments);
        if self.opts.verify {
            let c = self.verifier.counts();
            summary
                .counters
                .insert("roundtrip.documents_ok".into(), c.documents_ok);
            summary
                .counters
                .insert("roundtrip.tables_ok".into(), c.tables_ok);
            summary
                .counters
                .insert("roundtrip.failed".into(), self.failures);
        }
    }
}
