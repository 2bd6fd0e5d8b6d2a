//! One night applied to a corpus: the day's newest revisions replace their pages' rows,
//! deletions and restores become tombstones, and what changed is written page by page.
//!
//! The caller streams the input documents twice: [`Night::see`] records the newest revision of
//! each page (the night's memory is its touched pages), [`Night::resolve`] reads the corpus's
//! row heads to find each touched page's row before the night and the pages deletions name,
//! then [`Night::keep`] passes each input document the night writes.

use std::collections::{HashMap, HashSet};

use distillery_core::{Document, Segment};

use super::parts::{RowHead, walk_heads};
use super::{Change, Counts, Day, Manifest, Part, PartWriter, Tomb, jsonl, key_of, tombs};
use crate::IndexError;
use crate::version::{Root, new_name, now_secs};

/// A deletion or restore of a page, by title (logging dumps) or page id (a list).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deletion {
    pub title: String,
    pub page_id: Option<i64>,
    /// When it happened (ISO 8601): a page recreated after its deletion keeps its new row.
    pub timestamp: Option<String>,
    pub restore: bool,
}

/// A page's row in the corpus before the night.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prior {
    pub title: String,
    pub page_id: Option<i64>,
    pub revision_id: Option<i64>,
    /// False for a row a tombstone deletes.
    pub live: bool,
}

/// The newest input row of a touched page.
#[derive(Debug, Clone)]
struct Newest {
    revision_id: Option<i64>,
    title: String,
    page_id: Option<i64>,
    timestamp: Option<String>,
}

/// What a night did.
#[derive(Debug, Clone, Default)]
pub struct NightReport {
    pub counts: Counts,
    /// Input rows passed to the writer.
    pub written: u64,
}

/// A night in progress.
pub struct Night {
    pub version: String,
    pub seq: u32,
    pub prev: Option<Manifest>,
    newest: HashMap<String, Newest>,
    deletions: Vec<Deletion>,
    priors: HashMap<String, Prior>,
    tombs: Vec<Tomb>,
    changes: Vec<Change>,
    counts: Counts,
    written: HashSet<String>,
}

impl Night {
    /// A night applied to `prev` (none: a base).
    pub fn new(prev: Option<Manifest>, seed: &str) -> Night {
        let seq = prev.as_ref().map_or(0, |m| m.seq + 1);
        Night {
            // The night's number first: names sort by how far a version has advanced, then by
            // time.
            version: format!("n{seq:06}-{}", new_name(seed)),
            seq,
            prev,
            newest: HashMap::new(),
            deletions: Vec::new(),
            priors: HashMap::new(),
            tombs: Vec::new(),
            changes: Vec::new(),
            counts: Counts::default(),
            written: HashSet::new(),
        }
    }

    /// A base replacing a corpus whose newest night is `seq - 1` (a rebase): no parts of
    /// its own before it, numbered so that it sorts after the versions it replaces.
    pub fn base_at(seq: u32, seed: &str) -> Night {
        let mut n = Night::new(None, seed);
        n.seq = seq;
        n.version = format!("n{seq:06}-{}", new_name(seed));
        n
    }

    /// Pass 1: records `d` as its page's newest input row when it is.
    pub fn see(&mut self, d: &Document) {
        let n = Newest {
            revision_id: d.revision_id,
            title: d.title.clone(),
            page_id: d.page_id,
            timestamp: d.timestamp.clone(),
        };
        match self.newest.entry(key_of(d)) {
            std::collections::hash_map::Entry::Occupied(mut e) => {
                if n.revision_id > e.get().revision_id {
                    e.insert(n);
                }
            }
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(n);
            }
        }
    }

    pub fn delete(&mut self, d: Deletion) {
        self.deletions.push(d);
    }

    /// Pages the night touches (before deletions resolve).
    pub fn touched(&self) -> usize {
        self.newest.len()
    }

    /// Reads the corpus's rows of the touched pages and of the pages deletions name, then
    /// decides what each page becomes.
    pub async fn resolve(&mut self, root: &Root) -> Result<(), IndexError> {
        if let Some(prev) = &self.prev {
            let tombs = tombs(root, prev).await?;
            let titles: HashSet<&str> = self.deletions.iter().map(|d| d.title.as_str()).collect();
            let ids: HashSet<i64> = self.deletions.iter().filter_map(|d| d.page_id).collect();
            let newest = &self.newest;
            let priors = &mut self.priors;
            walk_heads(root, prev, &tombs, |h: &RowHead, _seq, live, shadowed| {
                let wanted = newest.contains_key(&h.key)
                    || titles.contains(h.title.as_str())
                    || h.page_id.is_some_and(|p| ids.contains(&p));
                if wanted && !shadowed {
                    priors.entry(h.key.clone()).or_insert(Prior {
                        title: h.title.clone(),
                        page_id: h.page_id,
                        revision_id: h.revision_id,
                        live,
                    });
                }
            })
            .await?;
        }
        // Input rows no newer than the corpus's row are stale (a day seen before).
        let priors = &self.priors;
        let stale: Vec<String> = self
            .newest
            .iter()
            .filter(|(k, n)| {
                priors.get(*k).is_some_and(|p| {
                    p.live && p.revision_id.is_some() && n.revision_id <= p.revision_id
                })
            })
            .map(|(k, _)| k.clone())
            .collect();
        self.counts.stale = stale.len() as u64;
        for k in stale {
            self.newest.remove(&k);
        }
        self.apply_deletions();
        self.classify();
        Ok(())
    }

    /// The pages a deletion or restore names, in the order they happened.
    fn apply_deletions(&mut self) {
        let mut dels = std::mem::take(&mut self.deletions);
        dels.sort_by(|a, b| a.timestamp.cmp(&b.timestamp));
        // Per key: deleted (true) or restored (false) by this night.
        let mut state: HashMap<String, bool> = HashMap::new();
        for d in &dels {
            let names = |key: &str, title: &str, page: Option<i64>| match d.page_id {
                Some(p) => page == Some(p),
                None => title == d.title && !key.is_empty(),
            };
            let mut hit = false;
            if d.restore {
                for (k, p) in &self.priors {
                    let buried = state.get(k).copied().unwrap_or(!p.live);
                    if buried && !p.live && names(k, &p.title, p.page_id) {
                        state.insert(k.clone(), false);
                        hit = true;
                    }
                }
            } else {
                // A page's row after the night: its newest input row, else its corpus row.
                let mut targets = Vec::new();
                for (k, n) in &self.newest {
                    let before = match (&n.timestamp, &d.timestamp) {
                        (Some(a), Some(b)) => a <= b,
                        _ => true,
                    };
                    if before && names(k, &n.title, n.page_id) && state.get(k) != Some(&true) {
                        targets.push(k.clone());
                    }
                }
                for (k, p) in &self.priors {
                    let alive = state.get(k).map_or(p.live, |s| !s);
                    if alive && !self.newest.contains_key(k) && names(k, &p.title, p.page_id) {
                        targets.push(k.clone());
                    }
                }
                for k in targets {
                    self.newest.remove(&k);
                    state.insert(k, true);
                    hit = true;
                }
            }
            if !hit {
                self.counts.unmatched += 1;
            }
        }
        let mut keys: Vec<(String, bool)> = state.into_iter().collect();
        keys.sort();
        for (key, deleted) in keys {
            let prior = self.priors.get(&key);
            let was_live = prior.is_some_and(|p| p.live);
            if deleted && !was_live {
                // Added and deleted within the night, or deleted again: nothing to bury
                // beyond what is buried.
                continue;
            }
            if !deleted && was_live {
                continue;
            }
            let p = prior.expect("a restore names a corpus row");
            self.tombs.push(Tomb {
                key: key.clone(),
                seq: self.seq,
                deleted,
            });
            let kind = if deleted { "deleted" } else { "restored" };
            if deleted {
                self.counts.deleted += 1;
            } else {
                self.counts.restored += 1;
            }
            self.changes.push(Change {
                kind: kind.into(),
                key,
                page_id: p.page_id,
                title: p.title.clone(),
                previous_title: None,
                revision_id: p.revision_id,
                previous_revision_id: p.revision_id,
            });
        }
    }

    fn classify(&mut self) {
        let mut keys: Vec<&String> = self.newest.keys().collect();
        keys.sort();
        for k in keys {
            let n = &self.newest[k];
            let prior = self.priors.get(k).filter(|p| p.live);
            let kind = match prior {
                None => "added",
                Some(p) if p.title != n.title => "moved",
                Some(_) => "changed",
            };
            match kind {
                "added" => self.counts.added += 1,
                "moved" => self.counts.moved += 1,
                _ => self.counts.changed += 1,
            }
            self.changes.push(Change {
                kind: kind.into(),
                key: k.clone(),
                page_id: n.page_id,
                title: n.title.clone(),
                previous_title: prior.map(|p| p.title.clone()),
                revision_id: n.revision_id,
                previous_revision_id: prior.and_then(|p| p.revision_id),
            });
        }
    }

    /// Pass 2: whether the night writes `d` (its page's newest input row, once).
    pub fn keep(&mut self, d: &Document) -> bool {
        let k = key_of(d);
        match self.newest.get(&k) {
            Some(n) if n.revision_id == d.revision_id && !self.written.contains(&k) => {
                self.written.insert(k);
                true
            }
            _ => false,
        }
    }

    /// Whether the night changes nothing (no page written, deleted or restored).
    pub fn is_empty(&self) -> bool {
        self.newest.is_empty() && self.tombs.is_empty()
    }

    /// Writes the night's tombstones and changes and returns the version's manifest (not yet
    /// published): `parts` are what the night's writer wrote.
    pub async fn finish(
        self,
        root: &Root,
        parts: Vec<Part>,
        days: Vec<Day>,
        pipeline_hash: &str,
        source: &str,
    ) -> Result<(Manifest, NightReport), IndexError> {
        let dir = format!("versions/{}", self.version);
        let prev = self.prev.clone();
        let mut tombstones = prev
            .as_ref()
            .map_or_else(Vec::new, |m| m.tombstones.clone());
        if !self.tombs.is_empty() {
            let rel = format!("{dir}/tombstones.jsonl");
            root.put(&rel, jsonl(&self.tombs)).await?;
            tombstones.push(rel);
        }
        let changes = if prev.is_some() {
            let rel = format!("{dir}/changes.jsonl");
            root.put(&rel, jsonl(&self.changes)).await?;
            Some(rel)
        } else {
            None
        };
        let written = parts.iter().map(|p| p.rows).sum::<u64>();
        let c = &self.counts;
        let pages = match &prev {
            Some(m) => (m.pages + c.added + c.restored).saturating_sub(c.deleted),
            None => written,
        };
        let mut all_days = prev.as_ref().map_or_else(Vec::new, |m| m.days.clone());
        all_days.extend(days);
        let m = Manifest {
            version: self.version.clone(),
            created: now_secs(),
            previous: prev.as_ref().map(|m| m.version.clone()),
            seq: self.seq,
            parts: prev
                .as_ref()
                .map_or_else(Vec::new, |m| m.parts.clone())
                .into_iter()
                .chain(parts)
                .collect(),
            segment_parts: prev
                .as_ref()
                .map_or_else(Vec::new, |m| m.segment_parts.clone()),
            segments: prev.as_ref().and_then(|m| m.segments.clone()),
            tombstones,
            days: all_days,
            pages,
            counts: self.counts.clone(),
            changes,
            compacted: false,
            pipeline_hash: pipeline_hash.to_string(),
            source: source.to_string(),
        };
        Ok((
            m,
            NightReport {
                counts: self.counts,
                written,
            },
        ))
    }
}

/// Rewrites a version's live rows into fresh parts of its own night (dropping shadowed and
/// deleted rows and the tombstones), in place of the parts it lists.
pub async fn compact(root: &Root, m: &mut Manifest) -> Result<(), IndexError> {
    let dir = format!("{}/compact", m.version);
    // The segments first: their view reads the parts being replaced.
    if !m.segment_parts.is_empty() {
        let mut w = PartWriter::<Segment>::new(root, &dir, m.seq);
        let mut view = super::SegmentView::open(root, m).await?;
        while let Some(segs) = view.next(root, m).await? {
            for s in segs {
                w.push(s).await?;
            }
        }
        m.segment_parts = w.finish().await?;
    }
    let mut w = PartWriter::new(root, &dir, m.seq);
    let mut view = super::LiveView::open(root, m).await?;
    while let Some(docs) = view.next(root, m).await? {
        for d in docs {
            w.push(d).await?;
        }
    }
    let pages = view.count;
    m.parts = w.finish().await?;
    m.tombstones.clear();
    m.pages = pages;
    m.compacted = true;
    Ok(())
}
