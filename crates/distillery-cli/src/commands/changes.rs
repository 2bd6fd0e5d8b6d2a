//! `distillery changes ROOT --since VERSION [--sft OUTPUT]`: the pages a corpus root changed
//! since a version and, given an output holding SFT samples, the samples whose evidence is on
//! one of those pages, so a training set can be refreshed.
//!
//! A sample's evidence is its `segment_ids`: a wiki URI (`enwiki:Title`, what a stage that
//! retrieves from a corpus-fed index records), a passage id (`enwiki:Title#p3`), or the id of
//! a row of the output's `segments` table, read through its `uri`. A page matches by wiki and
//! title, its title now or before a move (so a sample citing a page by its old title is
//! found), and a deleted page by the title it had. A sample that names the revision of its
//! evidence (`revisions`, `enwiki#12@3456`) matches by page id instead, and only when the page
//! is deleted or its revision now is not the one cited.

use std::collections::HashMap;
use std::process::ExitCode;

use anyhow::{Context, Result};
use arrow::array::{Array, AsArray, RecordBatch};
use datafusion::prelude::SessionContext;
use distillery_exec::kit::retrieval::root_of;
use distillery_exec::store::open_location;
use distillery_index::corpus::{self, PageChange};
use serde::Serialize;

use crate::args::OutputFormat;
use crate::commands::inspect::session_for;
use crate::out::outln;

/// A sample whose evidence changed.
#[derive(Debug, Serialize)]
struct Stale {
    id: String,
    task: String,
    split: String,
    question_id: String,
    /// The evidence ids on a changed page, each with the page's change.
    evidence: Vec<Evidence>,
}

#[derive(Debug, Serialize)]
struct Evidence {
    id: String,
    uri: String,
    kind: String,
    key: String,
    title: String,
    revision_id: Option<i64>,
    /// The revision the sample cites (from its `revisions`), when it names one.
    cited_revision: Option<i64>,
}

/// What `--format json` prints with `--sft`.
#[derive(Serialize)]
struct Report<'a> {
    pages: &'a [PageChange],
    samples: Vec<Stale>,
}

pub async fn run(
    root: &str,
    since: &str,
    format: OutputFormat,
    sft: Option<&str>,
) -> Result<ExitCode> {
    let root = root_of(open_location(root, false)?);
    let rows = corpus::changes_since(&root, since).await?;
    let samples = match sft {
        Some(out) => Some(
            stale_samples(out, &rows)
                .await
                .with_context(|| format!("SFT samples of {out}"))?,
        ),
        None => None,
    };
    if format == OutputFormat::Json {
        match samples {
            None => outln!("{}", serde_json::to_string_pretty(&rows)?),
            Some(samples) => outln!(
                "{}",
                serde_json::to_string_pretty(&Report {
                    pages: &rows,
                    samples
                })?
            ),
        }
        return Ok(ExitCode::SUCCESS);
    }
    outln!("{} pages changed since {since}", rows.len());
    for r in &rows {
        let moved = r
            .previous_title
            .as_deref()
            .map_or_else(String::new, |t| format!(" (was {t})"));
        outln!(
            "  {:<8} {:<20} {}{moved}  rev {}",
            r.kind,
            r.key,
            r.title,
            r.revision_id.map_or_else(|| "-".into(), |v| v.to_string())
        );
    }
    if let (Some(samples), Some(out)) = (samples, sft) {
        outln!("{} SFT samples of {out} cite a changed page", samples.len());
        for s in samples {
            let pages: Vec<String> = s
                .evidence
                .iter()
                .map(|e| format!("{} {}", e.kind, e.title))
                .collect();
            outln!(
                "  {:<18} {:<24} {:<10} {}",
                s.id,
                s.task,
                s.split,
                pages.join(", ")
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The `(wiki, title)` of a URI or passage id (`enwiki:Title#p3`), if it has a wiki prefix.
fn page_of(uri: &str) -> Option<(&str, &str)> {
    let (wiki, rest) = uri.split_once(':')?;
    let title = rest.split('#').next().unwrap_or(rest);
    (!wiki.is_empty() && !title.is_empty()).then_some((wiki, title))
}

async fn batches(ctx: &SessionContext, sql: &str) -> Result<Vec<RecordBatch>> {
    Ok(ctx.sql(sql).await?.collect().await?)
}

/// The samples of the output `out` that cite a page of `rows`.
async fn stale_samples(out: &str, rows: &[PageChange]) -> Result<Vec<Stale>> {
    let mut changed: HashMap<(&str, &str), &PageChange> = HashMap::new();
    for r in rows {
        let wiki = r.key.split('#').next().unwrap_or_default();
        changed.insert((wiki, r.title.as_str()), r);
        if let Some(t) = &r.previous_title {
            changed.entry((wiki, t.as_str())).or_insert(r);
        }
    }
    let ctx = session_for(out).await?;
    if !ctx.table_exist("sft")? {
        anyhow::bail!("the output has no `sft` table (run a stage that writes SFT samples)");
    }
    // Segment ids to their URIs, where the output holds the segments the samples cite.
    let mut uris: HashMap<String, String> = HashMap::new();
    if ctx.table_exist("segments")? {
        for b in batches(&ctx, "SELECT id, uri FROM segments").await? {
            let (id, uri) = (
                b.column(0).as_string::<i32>(),
                b.column(1).as_string::<i32>(),
            );
            for i in 0..b.num_rows() {
                uris.insert(id.value(i).to_string(), uri.value(i).to_string());
            }
        }
    }
    let by_key: HashMap<&str, &PageChange> = rows.iter().map(|r| (r.key.as_str(), r)).collect();
    // Outputs written before samples named revisions have no such column.
    let with_revisions = ctx
        .table("sft")
        .await?
        .schema()
        .has_column_with_unqualified_name("revisions");
    let mut stale = Vec::new();
    let sql = if with_revisions {
        "SELECT id, task, split, question_id, segment_ids, revisions FROM sft ORDER BY id"
    } else {
        "SELECT id, task, split, question_id, segment_ids FROM sft ORDER BY id"
    };
    for b in batches(&ctx, sql).await? {
        let s = |c: usize| b.column(c).as_string::<i32>();
        let (id, task, split, question) = (s(0), s(1), s(2), s(3));
        let segs = b.column(4).as_list::<i32>();
        let revs = with_revisions.then(|| b.column(5).as_list::<i32>());
        for i in 0..b.num_rows() {
            let ids = segs.value(i);
            let ids = ids.as_string::<i32>();
            let cited = revs.map(|r| r.value(i));
            let cited = cited.as_ref().map(|c| c.as_string::<i32>());
            let mut evidence = Vec::new();
            for j in 0..ids.len() {
                let seg = ids.value(j);
                let uri = uris.get(seg).map_or(seg, String::as_str);
                let rev = cited
                    .filter(|c| j < c.len() && !c.value(j).is_empty())
                    .map(|c| c.value(j));
                let (c, cited_revision) = match rev {
                    // By page id: stale when deleted, or at another revision now.
                    Some(rev) => {
                        let (key, r) = rev.split_once('@').unwrap_or((rev, ""));
                        let r: Option<i64> = r.parse().ok();
                        match by_key.get(key) {
                            Some(c) if c.kind == "deleted" || c.revision_id != r => (*c, r),
                            _ => continue,
                        }
                    }
                    None => match page_of(uri).and_then(|p| changed.get(&p)) {
                        Some(c) => (*c, None),
                        None => continue,
                    },
                };
                evidence.push(Evidence {
                    id: seg.to_string(),
                    uri: uri.to_string(),
                    kind: c.kind.clone(),
                    key: c.key.clone(),
                    title: c.title.clone(),
                    revision_id: c.revision_id,
                    cited_revision,
                });
            }
            if !evidence.is_empty() {
                stale.push(Stale {
                    id: id.value(i).to_string(),
                    task: task.value(i).to_string(),
                    split: split.value(i).to_string(),
                    question_id: question.value(i).to_string(),
                    evidence,
                });
            }
        }
    }
    Ok(stale)
}

#[cfg(test)]
mod tests {
    use super::page_of;

    #[test]
    fn pages_of_uris_and_passage_ids() {
        assert_eq!(page_of("enwiki:Place 3"), Some(("enwiki", "Place 3")));
        assert_eq!(page_of("enwiki:Place 3#p2"), Some(("enwiki", "Place 3")));
        assert_eq!(
            page_of("enwiki:Talk:Place#s1"),
            Some(("enwiki", "Talk:Place"))
        );
        assert_eq!(page_of("3f2a9c"), None);
        assert_eq!(page_of(":x"), None);
    }
}
