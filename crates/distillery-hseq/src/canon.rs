//! The canonicalizer κ (paper 000, 9.2.1 and 9.3.5): selected segments → a compact,
//! provenance-preserving evidence package.
//!
//! Each item is `(id, level, uri, offsets, source_type, snippet; meta)`:
//!
//! - `id` = [`evidence_id`]: full SHA-1 hex of `uri`, `a`, `b` joined by the unit separator
//!   (0x1f), deterministic and the same for the same place in the same source;
//! - `offsets`: `[a, b)` char offsets for text, `[row, -1]` for a row and `[row, col]` for a
//!   cell (`[-1, -1]` for the table root), `[-1, -1]` for KG segments;
//! - `snippet`: the content, cut to [`CanonOptions::snippet_chars`] at a word boundary with
//!   `…` appended (`meta.truncated` says so);
//! - `meta`: `schema`, `time`, `source_version`, `sha1`, plus the `segment_id` and
//!   `source_id` that trace the item back to its segment.
//!
//! Items are deduplicated by `(uri, offsets)` and ordered by `uri`, then `offsets`. Among
//! segments at the same place the finest level wins (highest [`level_rank`]; a paragraph or
//! sentence spanning a whole document replaces the document root, whose content is only the
//! title), ties going to the smallest segment id, so the package does not depend on the
//! order of the selection.
//!
//! With an unlimited budget κ is content-preserving (Definition 1 of the paper) for every
//! selection in which no two segments with *different* `(content, metadata)` share `(uri,
//! offsets)`; [`content_preserving`] checks it. Our encoders give every distinct place its own
//! `(uri, offsets)`, with two exceptions where dedupe keeps one segment: the document root
//! versus a span over the whole text (the root's content is the title), and the same subject
//! or edge in two separate KG runs (same content, different `source_id`).
//!
//! [`level_rank`]: crate::level_rank

use crate::order::{level_rank, source_type};
use distillery_core::Segment;
use distillery_core::id::sha1_hex;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::collections::btree_map::Entry;

/// Snippet budget of [`CanonOptions::default`], in chars.
pub const DEFAULT_SNIPPET_CHARS: usize = 400;

/// Options of [`canonicalize_with`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CanonOptions {
    /// Longest snippet in chars (the `…` included); `None` keeps whole contents.
    pub snippet_chars: Option<usize>,
}

impl Default for CanonOptions {
    fn default() -> Self {
        CanonOptions {
            snippet_chars: Some(DEFAULT_SNIPPET_CHARS),
        }
    }
}

impl CanonOptions {
    /// Whole contents as snippets: the package is then content-preserving.
    pub fn unlimited() -> CanonOptions {
        CanonOptions {
            snippet_chars: None,
        }
    }
}

/// Integrity and alignment helpers of an evidence item.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct EvidenceMeta {
    /// Id of the segment the item came from.
    pub segment_id: String,
    /// The segment's `source_id` (document, table or subgraph root).
    pub source_id: String,
    pub schema: Vec<String>,
    pub time: Option<String>,
    pub source_version: Option<String>,
    /// SHA-1 of the segment's full content.
    pub sha1: String,
    /// Whether `snippet` is a cut of the content.
    pub truncated: bool,
}

/// One item of the evidence package κ(M).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct EvidenceItem {
    /// [`evidence_id`] of `uri` and `offsets`.
    pub id: String,
    pub level: String,
    pub uri: String,
    pub offsets: [i64; 2],
    pub source_type: String,
    pub snippet: String,
    pub meta: EvidenceMeta,
}

impl EvidenceItem {
    /// The segment's full content, when the snippet was not cut.
    pub fn content(&self) -> Option<&str> {
        (!self.meta.truncated).then_some(self.snippet.as_str())
    }
}

/// The deterministic evidence id: SHA-1 hex of `uri \x1f a \x1f b`.
pub fn evidence_id(uri: &str, offsets: [i64; 2]) -> String {
    sha1_hex(&format!("{uri}\u{1f}{}\u{1f}{}", offsets[0], offsets[1]))
}

/// A segment's κ offsets: `[-1, -1]` for KG, else its first two offsets (`-1` if missing).
fn kappa_offsets(s: &Segment) -> [i64; 2] {
    if s.source_type == source_type::KG {
        return [-1, -1];
    }
    [
        s.offsets.first().copied().unwrap_or(-1),
        s.offsets.get(1).copied().unwrap_or(-1),
    ]
}

/// Cuts `s` to at most `budget` chars at a word boundary, appending `…`; returns the snippet
/// and whether it was cut. The cut falls at the last whitespace of the allowed prefix when
/// that keeps at least half of it, else mid-word.
pub fn truncate_snippet(s: &str, budget: usize) -> (String, bool) {
    if s.chars().count() <= budget {
        return (s.to_string(), false);
    }
    if budget == 0 {
        return (String::new(), true);
    }
    let keep = budget - 1;
    let end = s.char_indices().nth(keep).map_or(s.len(), |(i, _)| i);
    let prefix = &s[..end];
    let cut = prefix
        .char_indices()
        .filter(|(_, c)| c.is_whitespace())
        .map(|(i, _)| i)
        .next_back()
        .filter(|&i| prefix[..i].chars().count() * 2 >= keep)
        .unwrap_or(end);
    let mut out = prefix[..cut].trim_end().to_string();
    out.push('…');
    (out, true)
}

/// κ with the default options (snippets of [`DEFAULT_SNIPPET_CHARS`]).
pub fn canonicalize(selected: &[Segment]) -> Vec<EvidenceItem> {
    canonicalize_with(selected, &CanonOptions::default())
}

/// κ: dedupe by `(uri, offsets)` (finest level wins), order by `uri` then `offsets`.
pub fn canonicalize_with(selected: &[Segment], opts: &CanonOptions) -> Vec<EvidenceItem> {
    let mut best: BTreeMap<(&str, [i64; 2]), &Segment> = BTreeMap::new();
    for s in selected {
        match best.entry((s.uri.as_str(), kappa_offsets(s))) {
            Entry::Vacant(v) => {
                v.insert(s);
            }
            Entry::Occupied(mut o) => {
                let cur = *o.get();
                let finer = level_rank(&s.level) > level_rank(&cur.level)
                    || (level_rank(&s.level) == level_rank(&cur.level) && s.id < cur.id);
                if finer {
                    o.insert(s);
                }
            }
        }
    }
    best.into_iter()
        .map(|((uri, offsets), s)| {
            let (snippet, truncated) = match opts.snippet_chars {
                Some(b) => truncate_snippet(&s.content, b),
                None => (s.content.clone(), false),
            };
            EvidenceItem {
                id: evidence_id(uri, offsets),
                level: s.level.clone(),
                uri: uri.to_string(),
                offsets,
                source_type: s.source_type.clone(),
                snippet,
                meta: EvidenceMeta {
                    segment_id: s.id.clone(),
                    source_id: s.source_id.clone(),
                    schema: s.schema.clone(),
                    time: s.time.clone(),
                    source_version: s.source_version.clone(),
                    sha1: s.sha1.clone(),
                    truncated,
                },
            }
        })
        .collect()
}

/// Whether the `(content, metadata)` of every selected segment (content; `source_id`, `uri`,
/// `offsets`, `schema`, `time`, `source_version`, `sha1`) can be read back from `package`.
/// Fails when a snippet was cut or when dedupe dropped a segment that differs from the one
/// kept at its `(uri, offsets)`.
pub fn content_preserving(selected: &[Segment], package: &[EvidenceItem]) -> bool {
    let at: BTreeMap<(&str, [i64; 2]), &EvidenceItem> = package
        .iter()
        .map(|e| ((e.uri.as_str(), e.offsets), e))
        .collect();
    selected.iter().all(|s| {
        let offsets = kappa_offsets(s);
        at.get(&(s.uri.as_str(), offsets)).is_some_and(|e| {
            e.content() == Some(s.content.as_str())
                && s.offsets == offsets
                && e.meta.source_id == s.source_id
                && e.meta.schema == s.schema
                && e.meta.time == s.time
                && e.meta.source_version == s.source_version
                && e.meta.sha1 == s.sha1
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snippets_cut_at_words() {
        assert_eq!(truncate_snippet("short", 10), ("short".into(), false));
        assert_eq!(
            truncate_snippet("the quick brown fox", 12),
            ("the quick…".into(), true)
        );
        assert_eq!(
            truncate_snippet("abcdefghijkl mn", 8),
            ("abcdefg…".into(), true)
        );
        assert_eq!(truncate_snippet("héllo wörld", 7), ("héllo…".into(), true));
        assert_eq!(truncate_snippet("abc", 0), (String::new(), true));
        assert_eq!(truncate_snippet("abc", 1), ("…".into(), true));
    }

    #[test]
    fn ids_are_sha1_of_uri_and_offsets() {
        assert_eq!(evidence_id("u", [1, 2]), sha1_hex("u\u{1f}1\u{1f}2"));
        assert_ne!(evidence_id("u", [1, 2]), evidence_id("u", [1, 3]));
    }
}
