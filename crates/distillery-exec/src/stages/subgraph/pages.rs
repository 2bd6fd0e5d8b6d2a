//! Topic entities' Wikipedia page ids (the `wikipedia` option): the titles a Wikidata KG's
//! sitelinks give the topic entities, looked up in a MediaWiki input's staged `documents`
//! (three columns: `title`, `page_id`, `redirect`), a redirect followed once. Titles compare
//! with underscores read as spaces. Memory: the wanted titles and what they resolve to.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use arrow::array::{Array, AsArray};
use arrow::datatypes::Int64Type;
use futures::StreamExt;

use super::strings;
use crate::error::ExecError;
use crate::kit::contexts::parts_of;
use crate::parts::{WrittenPart, read_part_columns};
use crate::store::Location;
use distillery_core::TableKind;
use distillery_core::summary::StageSummary;

const COLUMNS: [&str; 3] = ["title", "page_id", "redirect"];

/// A title as compared: underscores as spaces, outer spaces trimmed (borrowed when it has
/// neither, as nearly every title of a dump: this runs on every row).
pub fn norm(title: &str) -> Cow<'_, str> {
    let trimmed = title.trim();
    if trimmed.contains('_') {
        Cow::Owned(trimmed.replace('_', " ").trim().to_string())
    } else {
        Cow::Borrowed(trimmed)
    }
}

/// What one pass found for the titles it looked for: page ids, and redirect targets.
#[derive(Default)]
struct Found {
    ids: HashMap<String, i64>,
    redirects: HashMap<String, String>,
}

async fn pass(
    out: &Location,
    parts: &[&WrittenPart],
    want: &HashSet<String>,
    summary: &mut StageSummary,
) -> Result<Found, ExecError> {
    let mut found = Found::default();
    for part in parts {
        summary.bytes_in += part.bytes;
        let mut stream = Box::pin(read_part_columns(out, &part.path(), &COLUMNS).await?);
        while let Some(batch) = stream.next().await {
            let batch = batch?;
            let (title, redirect) = (strings(&batch, "title")?, strings(&batch, "redirect")?);
            let id = batch
                .column_by_name("page_id")
                .and_then(|c| c.as_primitive_opt::<Int64Type>())
                .ok_or_else(|| ExecError::Task("documents part without `page_id`".into()))?;
            for i in 0..batch.num_rows() {
                let t = norm(title.value(i));
                if !want.contains(t.as_ref()) {
                    continue;
                }
                let t = t.into_owned();
                if !redirect.is_null(i) {
                    let target = norm(redirect.value(i)).into_owned();
                    found.redirects.entry(t).or_insert(target);
                } else if !id.is_null(i) {
                    found.ids.entry(t).or_insert(id.value(i));
                }
            }
        }
    }
    Ok(found)
}

/// Page ids of `titles` in the MediaWiki input `input`: a title's own page, or the page its
/// redirect names (a second pass reads those targets not found by the first).
pub async fn page_ids(
    out: &Location,
    parts: &[WrittenPart],
    input: &str,
    titles: impl IntoIterator<Item = String>,
    summary: &mut StageSummary,
) -> Result<HashMap<String, i64>, ExecError> {
    let want: HashSet<String> = titles.into_iter().map(|t| norm(&t).into_owned()).collect();
    if want.is_empty() {
        return Ok(HashMap::new());
    }
    let docs = parts_of(parts, TableKind::Documents, &[input.to_string()]);
    let docs: Vec<&WrittenPart> = docs.into_iter().map(|(_, _, p)| p).collect();
    let mut first = pass(out, &docs, &want, summary).await?;
    let targets: HashSet<String> = first
        .redirects
        .values()
        .filter(|t| !first.ids.contains_key(*t))
        .cloned()
        .collect();
    let second = if targets.is_empty() {
        Found::default()
    } else {
        pass(out, &docs, &targets, summary).await?
    };
    for (title, target) in std::mem::take(&mut first.redirects) {
        let id = first.ids.get(&target).or(second.ids.get(&target)).copied();
        if let Some(id) = id {
            first.ids.entry(title).or_insert(id);
        }
    }
    Ok(first.ids)
}
