//! Corpus roots: the documents a pipeline derives from a wiki, kept as immutable versions that
//! a night advances by the day's changes instead of a rebuild.
//!
//! ```text
//! ROOT/CURRENT                               the version readers use (written last)
//! ROOT/versions/<v>/corpus.json              its manifest (written after its files)
//! ROOT/versions/<v>/documents/part-NNNNN.parquet   rows this version added (`documents` schema)
//! ROOT/versions/<v>/segments/part-NNNNN.parquet    their HSEQ segments (`segments` schema), in
//!                                            a corpus that keeps them
//! ROOT/versions/<v>/tombstones.jsonl         pages this version deleted or restored
//! ROOT/versions/<v>/changes.jsonl            what this version changed, page by page
//! ```
//!
//! A version's manifest lists every part its view reads, oldest first, each with the night
//! (`seq`) that wrote it; parts of older versions are named, not copied, so a night writes
//! only the pages it touched. A page is keyed by its wiki and page id ([`key_of`]): a moved
//! page keeps its key and its old title becomes another page. The view of a version is, per
//! key, the row of the newest part holding it, unless a tombstone of that night or later
//! deletes it (a later restore lifts the tombstone). A page's segments are those of the night of
//! its live row ([`SegmentView`]). Compaction rewrites the live rows into
//! fresh parts when parts pile up ([`Manifest::parts`] past the stage's `compact_after`).
//!
//! A night that fails before `CURRENT` moves leaves the corpus as it was; its unfinished
//! version (no manifest) is not listed as readable and is pruned like any old version.

mod night;
mod parts;

pub use night::{Deletion, Night, NightReport, Prior, compact};
pub use parts::{LiveView, PartRow, PartWriter, SegmentView, read_documents, segment_key};

use std::collections::{BTreeMap, HashMap};

use distillery_core::Document;
use object_store::ObjectStoreExt;
use serde::{Deserialize, Serialize};

use crate::IndexError;
use crate::version::{CURRENT, Root};

/// A part of a version's view.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Part {
    /// Relative to the root (`versions/<v>/documents/part-00000.parquet`).
    pub path: String,
    /// The night that wrote it: a row is shadowed by a newer night's row of its page.
    pub seq: u32,
    pub rows: u64,
    pub bytes: u64,
}

/// A daily folder applied to the corpus.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Day {
    pub wiki: String,
    /// `YYYYMMDD`.
    pub date: String,
    pub max_rev_id: i64,
}

/// Pages a version changed, by kind.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    pub added: u64,
    pub changed: u64,
    pub moved: u64,
    pub deleted: u64,
    pub restored: u64,
    /// Rows of the input not newer than the page's row in the corpus (kept as they were).
    pub stale: u64,
    /// Deletions or restores naming no page of the corpus.
    pub unmatched: u64,
}

/// `versions/<v>/corpus.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub version: String,
    pub created: u64,
    /// The version this one was applied to (`None` for a base).
    pub previous: Option<String>,
    /// The night's number: 0 for a base, one more than `previous`'s for each night.
    pub seq: u32,
    /// Every part of the view, oldest first.
    pub parts: Vec<Part>,
    /// Every segments part of the view, oldest first, each written by the night of the
    /// documents it was cut from; empty in a corpus that keeps no segments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub segment_parts: Vec<Part>,
    /// The HSEQ options the corpus's segments are cut with (JSON); `None`: it keeps none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segments: Option<String>,
    /// Tombstone files of the view, oldest first (relative to the root).
    pub tombstones: Vec<String>,
    /// Every daily folder applied since the base, in date order per wiki.
    pub days: Vec<Day>,
    /// Live pages of the view.
    pub pages: u64,
    /// What this version changed against `previous`.
    pub counts: Counts,
    /// This version's changes file (relative to the root), `None` for a base.
    pub changes: Option<String>,
    /// Whether this version rewrote its live rows into fresh parts.
    pub compacted: bool,
    /// The pipeline's hash and the output the version was applied from.
    pub pipeline_hash: String,
    pub source: String,
}

/// A tombstone line: the page `key` is deleted (or restored) as of night `seq`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tomb {
    pub key: String,
    pub seq: u32,
    pub deleted: bool,
}

/// What a version changed for one page (`changes.jsonl`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    /// `added`, `changed`, `moved`, `deleted` or `restored`.
    pub kind: String,
    pub key: String,
    pub page_id: Option<i64>,
    pub title: String,
    /// The title before a move (or of the deleted row).
    pub previous_title: Option<String>,
    pub revision_id: Option<i64>,
    pub previous_revision_id: Option<i64>,
}

/// The key of a document's page: `<wiki>#<page id>` (the wiki from its URI, `enwiki:Title`),
/// or `id:<document id>` for a document with no page id.
pub fn key_of(doc: &Document) -> String {
    key_from(&doc.uri, doc.page_id, &doc.id)
}

/// [`key_of`] from the columns it reads.
pub fn key_from(uri: &str, page_id: Option<i64>, id: &str) -> String {
    match page_id {
        Some(p) => format!("{}#{p}", uri.split_once(':').map_or("", |x| x.0)),
        None => format!("id:{id}"),
    }
}

fn version_rel(v: &str) -> String {
    format!("versions/{v}")
}

/// The version `CURRENT` names and its manifest.
pub async fn current(root: &Root) -> Result<Option<Manifest>, IndexError> {
    match crate::version::current(root).await? {
        None => Ok(None),
        Some(v) => manifest(root, &v).await?.map(Some).ok_or_else(|| {
            IndexError::Corrupt(
                root.show(CURRENT),
                format!("names `{v}`, which has no corpus.json"),
            )
        }),
    }
}

/// A version's manifest, `None` for a version that never finished.
pub async fn manifest(root: &Root, version: &str) -> Result<Option<Manifest>, IndexError> {
    let rel = format!("{}/corpus.json", version_rel(version));
    match root.get(&rel).await? {
        None => Ok(None),
        Some(b) => serde_json::from_slice(&b)
            .map(Some)
            .map_err(|e| IndexError::Corrupt(root.show(&rel), e.to_string())),
    }
}

/// Writes a version's manifest, then points `CURRENT` at it.
pub async fn publish(root: &Root, m: &Manifest) -> Result<(), IndexError> {
    let body = serde_json::to_vec_pretty(m).map_err(|e| IndexError::Invalid(e.to_string()))?;
    root.put(&format!("{}/corpus.json", version_rel(&m.version)), body)
        .await?;
    root.put(CURRENT, format!("{}\n", m.version)).await
}

/// A version as `corpus list` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct VersionInfo {
    pub version: String,
    pub current: bool,
    pub manifest: Option<Manifest>,
}

/// Every version, oldest first.
pub async fn list(root: &Root) -> Result<Vec<VersionInfo>, IndexError> {
    let cur = crate::version::current(root).await?;
    let mut out = Vec::new();
    for v in crate::version::names(root).await? {
        out.push(VersionInfo {
            current: cur.as_deref() == Some(&v),
            manifest: manifest(root, &v).await?,
            version: v,
        });
    }
    Ok(out)
}

/// Points `CURRENT` at a finished version.
pub async fn rollback(root: &Root, version: &str) -> Result<(), IndexError> {
    if manifest(root, version).await?.is_none() {
        return Err(IndexError::Invalid(format!(
            "{}: no corpus version `{version}` (see `distillery corpus list`)",
            root.display
        )));
    }
    root.put(CURRENT, format!("{version}\n")).await
}

/// Removes the finished versions past the newest `keep` (never `CURRENT`'s) and the
/// unfinished ones of a night no later than `CURRENT`'s (a night killed before its switch),
/// except the files a kept version still reads; returns the versions removed.
pub async fn prune(root: &Root, keep: usize) -> Result<Vec<String>, IndexError> {
    let cur = crate::version::current(root).await?;
    let cur_seq = match &cur {
        Some(v) => manifest(root, v).await?.map(|m| m.seq),
        None => None,
    };
    let mut finished = Vec::new();
    let mut unfinished = Vec::new();
    for v in crate::version::names(root).await? {
        match manifest(root, &v).await? {
            Some(m) => finished.push((v, m)),
            None => unfinished.push(v),
        }
    }
    let cut = finished.len().saturating_sub(keep.max(1));
    let mut used = std::collections::HashSet::new();
    for (_, m) in &finished[cut..] {
        used.extend(
            m.parts
                .iter()
                .chain(&m.segment_parts)
                .map(|p| p.path.clone()),
        );
        used.extend(m.tombstones.iter().cloned());
        used.extend(m.changes.iter().cloned());
    }
    let mut old: Vec<String> = Vec::new();
    for (v, m) in &finished[..cut] {
        if cur.as_deref() == Some(v.as_str()) {
            used.extend(
                m.parts
                    .iter()
                    .chain(&m.segment_parts)
                    .map(|p| p.path.clone()),
            );
            used.extend(m.tombstones.iter().cloned());
            used.extend(m.changes.iter().cloned());
        } else {
            old.push(v.clone());
        }
    }
    // `n000012-…`: the night's number.
    let seq_of = |v: &str| -> Option<u32> { v.strip_prefix('n')?.get(..6)?.parse().ok() };
    old.extend(
        unfinished
            .into_iter()
            .filter(|v| matches!((seq_of(v), cur_seq), (Some(s), Some(c)) if s <= c)),
    );
    let mut gone = Vec::new();
    for v in old {
        // The manifest first: a half-removed version is never listed as readable.
        let head = format!("{}/corpus.json", version_rel(&v));
        let mut files = root.list(&version_rel(&v)).await?;
        files.sort_by_key(|(rel, _)| *rel != head);
        let mut shared = false;
        for (rel, _) in files {
            if used.contains(&rel) {
                shared = true;
                continue;
            }
            match root.store.delete(&root.path(&rel)).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(IndexError::store(root.show(&rel), e)),
            }
        }
        // Local stores leave empty directories behind.
        if let (Some(d), false) = (&root.local_dir, shared) {
            let _ = std::fs::remove_dir_all(d.join(version_rel(&v)));
        }
        gone.push(v);
    }
    Ok(gone)
}

/// The tombstones of a view: per key, the newest line.
pub async fn tombs(root: &Root, m: &Manifest) -> Result<HashMap<String, Tomb>, IndexError> {
    let mut out = HashMap::new();
    for rel in &m.tombstones {
        for t in read_jsonl::<Tomb>(root, rel).await? {
            out.insert(t.key.clone(), t);
        }
    }
    Ok(out)
}

/// Whether a row of night `seq` is deleted by `tomb`.
pub fn buried(tomb: Option<&Tomb>, seq: u32) -> bool {
    tomb.is_some_and(|t| t.deleted && t.seq >= seq)
}

async fn read_jsonl<T: serde::de::DeserializeOwned>(
    root: &Root,
    rel: &str,
) -> Result<Vec<T>, IndexError> {
    let data = root
        .get(rel)
        .await?
        .ok_or_else(|| IndexError::Corrupt(root.show(rel), "missing".into()))?;
    let mut out = Vec::new();
    for (i, line) in data.split(|b| *b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        out.push(
            serde_json::from_slice(line)
                .map_err(|e| IndexError::Corrupt(root.show(rel), format!("line {}: {e}", i + 1)))?,
        );
    }
    Ok(out)
}

pub(crate) fn jsonl<T: Serialize>(rows: &[T]) -> Vec<u8> {
    let mut out = Vec::new();
    for r in rows {
        serde_json::to_writer(&mut out, r).expect("serializable");
        out.push(b'\n');
    }
    out
}

/// A page's change between `since` and `CURRENT`, as `distillery changes` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PageChange {
    /// `added`, `changed`, `moved` or `deleted`, relative to `since`.
    pub kind: String,
    pub key: String,
    pub page_id: Option<i64>,
    pub title: String,
    pub previous_title: Option<String>,
    pub revision_id: Option<i64>,
    /// The version that last changed it.
    pub version: String,
}

/// One page's changes from `since` on.
struct Span {
    /// Whether the page was in the view of `since`.
    before: bool,
    first_title: Option<String>,
    first_revision: Option<i64>,
    last: Change,
    version: String,
}

/// What changed between the version `since` and `CURRENT`, one row per page, by key. A page
/// added and deleted in between is left out; a page deleted and restored is `changed`.
pub async fn changes_since(root: &Root, since: &str) -> Result<Vec<PageChange>, IndexError> {
    let mut m = current(root).await?.ok_or_else(|| {
        IndexError::Invalid(format!("{}: no CURRENT corpus version", root.display))
    })?;
    // Newest first, back to `since`.
    let mut chain = Vec::new();
    while m.version != since {
        let prev = m.previous.clone();
        chain.push(m);
        m = match prev {
            Some(p) => manifest(root, &p).await?.ok_or_else(|| {
                IndexError::Invalid(format!(
                    "{}: version `{p}` (before the current one) is pruned",
                    root.display
                ))
            })?,
            None => {
                return Err(IndexError::Invalid(format!(
                    "{}: `{since}` is not an ancestor of the CURRENT version",
                    root.display
                )));
            }
        };
    }
    // Per key: whether it existed at `since`, and its newest change.
    let mut pages: BTreeMap<String, Span> = BTreeMap::new();
    for v in chain.iter().rev() {
        let Some(rel) = &v.changes else { continue };
        for c in read_jsonl::<Change>(root, rel).await? {
            let e = pages.entry(c.key.clone()).or_insert_with(|| Span {
                before: matches!(c.kind.as_str(), "changed" | "moved" | "deleted"),
                // A deleted row's own title and revision are what it was before.
                first_title: match c.kind.as_str() {
                    "deleted" => Some(c.title.clone()),
                    _ => c.previous_title.clone(),
                },
                first_revision: c.previous_revision_id,
                last: c.clone(),
                version: v.version.clone(),
            });
            e.last = c;
            e.version = v.version.clone();
        }
    }
    let mut out = Vec::new();
    for (key, s) in pages {
        let (last, version, first_title) = (s.last, s.version, s.first_title);
        let after = last.kind != "deleted";
        let same_title = first_title.as_deref() == Some(last.title.as_str());
        let kind = match (s.before, after) {
            (false, true) => "added",
            (true, false) => "deleted",
            (true, true) if !same_title => "moved",
            // Deleted and restored as it was: no change.
            (true, true) if s.first_revision == last.revision_id => continue,
            (true, true) => "changed",
            (false, false) => continue,
        };
        out.push(PageChange {
            kind: kind.into(),
            key,
            page_id: last.page_id,
            title: last.title,
            previous_title: first_title.filter(|_| kind == "moved"),
            revision_id: last.revision_id,
            version,
        });
    }
    Ok(out)
}

/// What an index built from version `since` needs to follow `CURRENT`'s version: the
/// documents to drop (by URI, as passages name their document) and a view of only the parts
/// written after `since`.
#[derive(Debug, Clone)]
pub struct Delta {
    /// The URIs of the touched pages' rows before and after: their passages are replaced.
    pub removed: std::collections::HashSet<String>,
    /// `CURRENT`'s manifest with only the parts of nights after `since`: its live rows are the
    /// touched pages' new rows (read with [`LiveView`]).
    pub view: Manifest,
    /// Pages touched.
    pub pages: u64,
}

/// The delta from `since` to `m` (a version applied after it), or `None` when it cannot be
/// told from the changes (`since` is not an ancestor, a page was restored from an older part,
/// or a document has no page id): the caller then reads the whole view.
pub async fn delta_since(
    root: &Root,
    m: &Manifest,
    since: &str,
) -> Result<Option<Delta>, IndexError> {
    let mut chain = Vec::new();
    let mut v = m.clone();
    let since_seq = loop {
        if v.version == since {
            break v.seq;
        }
        let Some(prev) = v.previous.clone() else {
            return Ok(None);
        };
        chain.push(v);
        v = match manifest(root, &prev).await? {
            Some(p) => p,
            None => return Ok(None),
        };
    };
    let mut removed = std::collections::HashSet::new();
    let mut touched = std::collections::HashSet::new();
    for v in &chain {
        let Some(rel) = &v.changes else {
            return Ok(None);
        };
        for c in read_jsonl::<Change>(root, rel).await? {
            let Some((wiki, _)) = c.key.split_once('#').filter(|_| !c.key.starts_with("id:"))
            else {
                return Ok(None);
            };
            if c.kind == "restored" {
                return Ok(None);
            }
            removed.insert(format!("{wiki}:{}", c.title));
            if let Some(t) = &c.previous_title {
                removed.insert(format!("{wiki}:{t}"));
            }
            touched.insert(c.key);
        }
    }
    let mut view = m.clone();
    view.parts.retain(|p| p.seq > since_seq);
    view.segment_parts.retain(|p| p.seq > since_seq);
    Ok(Some(Delta {
        removed,
        view,
        pages: touched.len() as u64,
    }))
}

/// Days since 1970-01-01 of `YYYYMMDD`; `None` for a date that does not exist (20260231) or
/// is before 1970.
fn day_number(date: &str) -> Option<i64> {
    if date.len() != 8 || !date.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (y, m, d) = (&date[..4], &date[4..6], &date[6..]);
    let t = humantime::parse_rfc3339(&format!("{y}-{m}-{d}T00:00:00Z")).ok()?;
    let secs = t.duration_since(std::time::UNIX_EPOCH).ok()?.as_secs();
    i64::try_from(secs / 86_400).ok()
}

/// `YYYYMMDD` of a day number (1970-01-01 for one before it, 99991231 for one past that).
fn date_of(n: i64) -> String {
    let days = u64::try_from(n).unwrap_or(0);
    let mut s = days
        .checked_mul(86_400)
        .and_then(crate::version::compact_utc)
        .unwrap_or_else(|| "99991231".into());
    s.truncate(8);
    s
}

/// Which of `days` a night applies to a corpus that has applied `applied`: the new ones in
/// date order, the repeated ones (already applied: skipped), or an error naming the first
/// missing day (a gap) unless `allow_gaps`.
pub fn plan_days(
    applied: &[Day],
    days: &[Day],
    allow_gaps: bool,
) -> Result<(Vec<Day>, Vec<Day>), String> {
    let mut days = days.to_vec();
    days.sort();
    days.dedup();
    let mut last: BTreeMap<&str, &Day> = BTreeMap::new();
    for d in applied {
        last.insert(d.wiki.as_str(), d);
    }
    let (mut apply, mut repeated) = (Vec::new(), Vec::new());
    let mut tail: BTreeMap<String, Day> = last
        .iter()
        .map(|(w, d)| (w.to_string(), (*d).clone()))
        .collect();
    for d in days {
        let n = day_number(&d.date)
            .ok_or_else(|| format!("daily folder of {}: `{}` is not a date", d.wiki, d.date))?;
        if applied.iter().any(|a| a.wiki == d.wiki && a.date == d.date) {
            repeated.push(d);
            continue;
        }
        if let Some(prev) = tail.get(&d.wiki) {
            let p = day_number(&prev.date).unwrap_or(n - 1);
            if n <= p {
                return Err(format!(
                    "{} {}: the corpus has applied {} {} already; a day older than the last \
                     applied one cannot be applied (roll the corpus back first)",
                    d.wiki, d.date, prev.wiki, prev.date
                ));
            }
            if d.max_rev_id <= prev.max_rev_id {
                return Err(format!(
                    "{} {}: its maxrevid {} is not past {} of {}, the last day applied",
                    d.wiki, d.date, d.max_rev_id, prev.max_rev_id, prev.date
                ));
            }
            if n > p + 1 && !allow_gaps {
                return Err(format!(
                    "{} {}: day {} is missing (the last day applied is {}); apply it first, \
                     or set `allow_gaps = true` to skip it",
                    d.wiki,
                    d.date,
                    date_of(p + 1),
                    prev.date
                ));
            }
        }
        tail.insert(d.wiki.clone(), d.clone());
        apply.push(d);
    }
    Ok((apply, repeated))
}

#[cfg(test)]
mod tests;
