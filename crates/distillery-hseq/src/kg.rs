//! The KG adapter: the streaming [`KgEncoder`] and [`decode_kg`].
//!
//! Triples arrive one at a time (a shard can hold billions); the encoder keeps only the
//! current subject run. Each run of consecutive triples with the same
//! `(dataset, source, subject)` gets one `subgraph` root, emitted with the run's first
//! triple; each triple then gets exactly one `triplet` segment (T3), child of that root:
//!
//! - `subgraph`: `content` = the subject (`name (key)` when the first triple names it),
//!   `uri` = `<dataset>:<subject>`, `offsets` = `[-1, -1]`, `source_id` = its own id. Its id
//!   is `stable_id([dataset, source, subject, first triple id, first triple line])`, so a
//!   subject that appears in two separate runs gets two distinct roots; should two runs still
//!   collide (same first edge on the same line, or no line numbers), an occurrence number is
//!   appended.
//! - `triplet`: `content` = a JSON array `[h, r, t]`, the compact human-readable edge, using
//!   the subject/object *names* when the triple has them; `time` = the triple's `time`;
//!   `offsets` = `[-1, -1]`; `source_id` = the root's id; `uri` = the root's uri +
//!   `#<edge key>`, so every distinct edge has its own `(uri, offsets)` in κ.
//!
//! **Raw edge fields.** [`Segment`] has no free metadata map, so a triplet's `schema` is
//! `["subject", "predicate", "object", <raw>]` (see [`TRIPLET_SCHEMA`]): the first three name
//! the positions of `content`, and `<raw>` is a JSON object with the exact fields of the edge:
//! `s`, `p`, `o`, `k` (object kind) and, when present, `lang`, `dt` (datatype), `sn`, `on`
//! (subject and object name). The decoder reads the edge from `<raw>` and `time`, and checks
//! that `content` is the rendering of `<raw>`.
//!
//! Provenance fields of a triple (`document_id`, `sentence`, `start`, `end`, `line`, the
//! record `id`) are not part of the edge and are not decoded.

use crate::order::{level, source_type};
use crate::{DecodeError, check_sha1, index_ids, non_empty, parent_index, sealed};
use distillery_core::id::stable_id;
use distillery_core::{Segment, Triple};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// The first three entries of a triplet's `schema`: the positions of its content array.
pub const TRIPLET_SCHEMA: [&str; 3] = ["subject", "predicate", "object"];

/// One KG edge, as the decoder gives it back and as ≡ compares it (a multiset of these).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize)]
pub struct KgEdge {
    pub subject: String,
    pub predicate: String,
    pub object: String,
    /// `entity`, `literal` or `iri`.
    pub object_kind: String,
    pub lang: Option<String>,
    pub datatype: Option<String>,
    pub subject_name: Option<String>,
    pub object_name: Option<String>,
    /// Validity time.
    pub time: Option<String>,
}

impl KgEdge {
    /// The edge of a triple (provenance fields dropped).
    pub fn from_triple(t: &Triple) -> KgEdge {
        KgEdge {
            subject: t.subject.clone(),
            predicate: t.predicate.clone(),
            object: t.object.clone(),
            object_kind: t.object_kind.clone(),
            lang: t.lang.clone(),
            datatype: t.datatype.clone(),
            subject_name: t.subject_name.clone(),
            object_name: t.object_name.clone(),
            time: t.time.clone(),
        }
    }

    /// The compact `[h, r, t]` rendering: names where present and non-empty, else keys.
    pub fn display(&self) -> [&str; 3] {
        [
            self.subject_name
                .as_deref()
                .filter(|n| !n.is_empty())
                .unwrap_or(&self.subject),
            &self.predicate,
            self.object_name
                .as_deref()
                .filter(|n| !n.is_empty())
                .unwrap_or(&self.object),
        ]
    }

    /// The content of the edge's triplet segment: `display()` as a JSON array.
    pub fn content(&self) -> String {
        serde_json::to_string(&self.display()).expect("an array of strings serializes")
    }
}

/// The exact fields of an edge, stored as JSON in a triplet's `schema[3]`.
#[derive(Debug, Serialize, Deserialize)]
struct RawEdge {
    s: String,
    p: String,
    o: String,
    k: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lang: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dt: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sn: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    on: Option<String>,
}

impl RawEdge {
    fn of(e: &KgEdge) -> RawEdge {
        RawEdge {
            s: e.subject.clone(),
            p: e.predicate.clone(),
            o: e.object.clone(),
            k: e.object_kind.clone(),
            lang: e.lang.clone(),
            dt: e.datatype.clone(),
            sn: e.subject_name.clone(),
            on: e.object_name.clone(),
        }
    }

    fn into_edge(self, time: Option<String>) -> KgEdge {
        KgEdge {
            subject: self.s,
            predicate: self.p,
            object: self.o,
            object_kind: self.k,
            lang: self.lang,
            datatype: self.dt,
            subject_name: self.sn,
            object_name: self.on,
            time,
        }
    }
}

/// The subject run being encoded.
#[derive(Debug)]
struct Run {
    dataset: String,
    source: String,
    subject: String,
    root_id: String,
    uri: String,
    next_ord: u32,
}

/// Streaming KG encoder: [`push`](KgEncoder::push) one triple at a time, in the shard's
/// order; each call returns the segments it completes (a new `subgraph` root when the subject
/// run changes, then the triple's `triplet`). Memory is O(1) per run, plus the ids of the
/// roots started on the current input line (or, for triples without a line number, of all
/// roots), kept to make root ids unique.
#[derive(Debug, Default)]
pub struct KgEncoder {
    run: Option<Run>,
    seen: HashMap<String, u32>,
    seen_line: Option<(String, String, u64)>,
    roots: u64,
    triplets: u64,
}

impl KgEncoder {
    /// A fresh encoder.
    pub fn new() -> KgEncoder {
        KgEncoder::default()
    }

    /// Number of `subgraph` roots emitted so far.
    pub fn roots(&self) -> u64 {
        self.roots
    }

    /// Number of `triplet` segments emitted so far.
    pub fn triplets(&self) -> u64 {
        self.triplets
    }

    /// Id of the current subject run's root, if any.
    pub fn current_root(&self) -> Option<&str> {
        self.run.as_ref().map(|r| r.root_id.as_str())
    }

    /// Encodes one triple: returns `[triplet]`, or `[subgraph, triplet]` when it starts a
    /// new subject run.
    pub fn push(&mut self, t: &Triple) -> Vec<Segment> {
        let mut out = Vec::with_capacity(2);
        let same_run = self.run.as_ref().is_some_and(|r| {
            r.subject == t.subject && r.source == t.source && r.dataset == t.dataset
        });
        let edge = KgEdge::from_triple(t);
        let version = non_empty(&t.source);
        if !same_run {
            out.push(self.start_run(t, &edge, version.clone()));
        }
        let run = self.run.as_mut().expect("a run was just started");
        let key = stable_id(&[
            &t.dataset,
            &t.source,
            &t.subject,
            &t.predicate,
            &t.object,
            &t.object_kind,
            t.lang.as_deref().unwrap_or(""),
            t.datatype.as_deref().unwrap_or(""),
            t.time.as_deref().unwrap_or(""),
        ]);
        let ord = run.next_ord;
        run.next_ord += 1;
        let raw = serde_json::to_string(&RawEdge::of(&edge)).expect("raw edge serializes");
        let mut schema: Vec<String> = TRIPLET_SCHEMA.iter().map(|s| s.to_string()).collect();
        schema.push(raw);
        out.push(sealed(Segment {
            id: stable_id(&[&run.root_id, level::TRIPLET, &ord.to_string()]),
            level: level::TRIPLET.to_string(),
            parent: Some(run.root_id.clone()),
            content: edge.content(),
            source_id: run.root_id.clone(),
            uri: format!("{}#{key}", run.uri),
            offsets: vec![-1, -1],
            schema,
            time: t.time.clone(),
            source_type: source_type::KG.to_string(),
            sha1: String::new(),
            source_version: version,
            ord,
            page_id: None,
        }));
        self.triplets += 1;
        out
    }

    fn start_run(&mut self, t: &Triple, edge: &KgEdge, version: Option<String>) -> Segment {
        let first = if t.id.is_empty() {
            stable_id(&[&t.subject, &t.predicate, &t.object])
        } else {
            t.id.clone()
        };
        let line = t.line.map(|l| l.to_string()).unwrap_or_default();
        if let Some(l) = t.line {
            let here = (t.dataset.clone(), t.source.clone(), l);
            if self.seen_line.as_ref() != Some(&here) {
                self.seen.clear();
                self.seen_line = Some(here);
            }
        }
        let base = stable_id(&[&t.dataset, &t.source, &t.subject, &first, &line]);
        let n = self.seen.entry(base.clone()).or_insert(0);
        let root_id = if *n == 0 {
            base
        } else {
            stable_id(&[&base, &n.to_string()])
        };
        *n += 1;
        let dataset = if t.dataset.is_empty() {
            "kg"
        } else {
            &t.dataset
        };
        let uri = format!("{dataset}:{}", t.subject);
        let content = match edge.subject_name.as_deref() {
            Some(name) if !name.is_empty() && name != t.subject => {
                format!("{name} ({})", t.subject)
            }
            _ => t.subject.clone(),
        };
        self.run = Some(Run {
            dataset: t.dataset.clone(),
            source: t.source.clone(),
            subject: t.subject.clone(),
            root_id: root_id.clone(),
            uri: uri.clone(),
            next_ord: 1,
        });
        self.roots += 1;
        sealed(Segment {
            id: root_id.clone(),
            level: level::SUBGRAPH.to_string(),
            parent: None,
            content,
            source_id: root_id,
            uri,
            offsets: vec![-1, -1],
            schema: Vec::new(),
            time: None,
            source_type: source_type::KG.to_string(),
            sha1: String::new(),
            source_version: version,
            ord: 0,
            page_id: None,
        })
    }
}

/// Encodes a list of triples with a fresh [`KgEncoder`].
pub fn encode_kg(triples: &[Triple]) -> Vec<Segment> {
    let mut enc = KgEncoder::new();
    triples.iter().flat_map(|t| enc.push(t)).collect()
}

/// Decodes KG segments (`subgraph` roots and `triplet`s, parents before children, any number
/// of subgraphs) into the edge multiset, in segment order.
///
/// Checks: unique ids; roots have no parent and offsets `[-1, -1]`; each triplet's parent is
/// an earlier `subgraph`, its `source_id` is that root, its offsets are `[-1, -1]`, its
/// `schema` is the triplet layout with a valid raw edge, and its content is that edge's
/// rendering; `sha1` matches.
pub fn decode_kg(segs: &[Segment]) -> Result<Vec<KgEdge>, DecodeError> {
    let ids = index_ids(segs)?;
    let mut edges = Vec::new();
    for (i, s) in segs.iter().enumerate() {
        check_sha1(s)?;
        if s.offsets != [-1, -1] {
            return Err(DecodeError::BadOffsets {
                id: s.id.clone(),
                level: s.level.clone(),
                offsets: s.offsets.clone(),
            });
        }
        match s.level.as_str() {
            level::SUBGRAPH => {
                if s.parent.is_some() {
                    return Err(DecodeError::RootHasParent { id: s.id.clone() });
                }
            }
            level::TRIPLET => {
                let pi = parent_index(segs, &ids, i)?;
                let p = &segs[pi];
                if p.level != level::SUBGRAPH {
                    return Err(DecodeError::WrongParent {
                        id: s.id.clone(),
                        level: s.level.clone(),
                        parent: p.id.clone(),
                        parent_level: p.level.clone(),
                    });
                }
                if s.source_id != p.id {
                    return Err(DecodeError::SourceMismatch {
                        id: s.id.clone(),
                        expected: p.id.clone(),
                        found: s.source_id.clone(),
                    });
                }
                let raw = match &s.schema[..] {
                    [a, b, c, raw] if [a, b, c] == TRIPLET_SCHEMA => raw,
                    _ => return Err(DecodeError::TripletSchema { id: s.id.clone() }),
                };
                let raw: RawEdge =
                    serde_json::from_str(raw).map_err(|source| DecodeError::TripletJson {
                        id: s.id.clone(),
                        source,
                    })?;
                let edge = raw.into_edge(s.time.clone());
                if edge.content() != s.content {
                    return Err(DecodeError::TripletContent { id: s.id.clone() });
                }
                edges.push(edge);
            }
            _ => {
                return Err(DecodeError::UnexpectedLevel {
                    id: s.id.clone(),
                    level: s.level.clone(),
                    source_type: source_type::KG,
                });
            }
        }
    }
    Ok(edges)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_prefers_names() {
        let mut e = KgEdge {
            subject: "Q42".into(),
            predicate: "P69".into(),
            object: "Q691283".into(),
            object_kind: "entity".into(),
            ..Default::default()
        };
        assert_eq!(e.content(), r#"["Q42","P69","Q691283"]"#);
        e.subject_name = Some("Douglas Adams".into());
        e.object_name = Some(String::new());
        assert_eq!(e.content(), r#"["Douglas Adams","P69","Q691283"]"#);
    }

    #[test]
    fn raw_edge_omits_absent_fields() {
        let e = KgEdge {
            subject: "a".into(),
            predicate: "b".into(),
            object: "c".into(),
            object_kind: "literal".into(),
            lang: Some("en".into()),
            ..Default::default()
        };
        let raw = serde_json::to_string(&RawEdge::of(&e)).unwrap();
        assert_eq!(
            raw,
            r#"{"s":"a","p":"b","o":"c","k":"literal","lang":"en"}"#
        );
    }
}
