//! Passages: the unit every index kind of a build shares, and their Parquet table.
//!
//! A passage has a stable `id`, the `document_id` of its source document, a `content_hash` of
//! what is indexed (title and text), a `title` and a `text`, and its lineage where the source
//! has one: the wiki `page_id` and `revision_id` it was cut from. Ids are stable across dumps of
//! different days: a document's passages are named by its URI (`enwiki:Title#p3`), and the
//! document by its URI too (join on `documents.uri`), not by its record id (which hashes the
//! input file's name and the text), so an edited page keeps its passage ids and only their
//! content hashes change; that is what lets an incremental build tell added, changed and
//! deleted passages apart, and what makes it equal to a full rebuild.
//!
//! Units: `paragraph` (the document's paragraphs; the whole text when it has none),
//! `sentence`, `segment` (HSEQ segments of text level `paragraph`/`sentence` and table rows)
//! and `triple` (one passage per triple, `subject predicate object` with names where known).

use std::path::Path;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use distillery_core::{Document, Segment, Triple};
use serde::{Deserialize, Serialize};
use twox_hash::XxHash64;

use crate::IndexError;

/// What a passage is cut from.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Unit {
    /// A paragraph of a document (the whole text of a document without paragraphs).
    #[default]
    Paragraph,
    /// A sentence of a document.
    Sentence,
    /// An HSEQ segment: text paragraphs and sentences, table rows.
    Segment,
    /// A triple, as `subject predicate object`.
    Triple,
}

impl Unit {
    pub fn name(self) -> &'static str {
        match self {
            Unit::Paragraph => "paragraph",
            Unit::Sentence => "sentence",
            Unit::Segment => "segment",
            Unit::Triple => "triple",
        }
    }
}

/// One passage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Passage {
    pub id: String,
    pub document_id: String,
    /// 16 hex digits of the xxHash64 of `title`, a NUL and `text`.
    pub content_hash: String,
    pub title: String,
    pub text: String,
    /// The page the passage was cut from (a wiki document's or text segment's `page_id`).
    #[serde(default)]
    pub page_id: Option<i64>,
    /// The revision of that page (a document's `revision_id`, a segment's `source_version`).
    #[serde(default)]
    pub revision_id: Option<i64>,
}

impl Passage {
    pub fn new(id: String, document_id: String, title: String, text: String) -> Passage {
        let content_hash = content_hash(&title, &text);
        Passage {
            id,
            document_id,
            content_hash,
            title,
            text,
            page_id: None,
            revision_id: None,
        }
    }

    /// The passage naming the page and revision it was cut from.
    pub fn from_revision(mut self, page_id: Option<i64>, revision_id: Option<i64>) -> Passage {
        self.page_id = page_id;
        self.revision_id = revision_id;
        self
    }

    /// What is embedded: the title and the text, as sentence-transformers users index
    /// passages with titles.
    pub fn embed_text(&self) -> String {
        if self.title.is_empty() {
            self.text.clone()
        } else {
            format!("{}\n{}", self.title, self.text)
        }
    }
}

/// The content hash of a title and text.
pub fn content_hash(title: &str, text: &str) -> String {
    let mut h = XxHash64::with_seed(0);
    std::hash::Hasher::write(&mut h, title.as_bytes());
    std::hash::Hasher::write(&mut h, &[0]);
    std::hash::Hasher::write(&mut h, text.as_bytes());
    format!("{:016x}", std::hash::Hasher::finish(&h))
}

/// The 64-bit key of a passage id (the dense index's vector key, the shard it falls in).
pub fn id_key(id: &str) -> u64 {
    XxHash64::oneshot(0x6469_7374_696c_6c00, id.as_bytes())
}

/// The shard of a passage id among `shards`.
pub fn shard_of(id: &str, shards: u32) -> u32 {
    (id_key(id) % u64::from(shards.max(1))) as u32
}

/// `text[a..b]` in chars, trimmed; `None` when out of range or blank.
fn chars(text: &str, a: u32, b: u32) -> Option<&str> {
    let (a, b) = (a as usize, b as usize);
    if a >= b {
        return None;
    }
    let mut it = text.char_indices().map(|(i, _)| i).chain([text.len()]);
    let start = it.nth(a)?;
    let end = if b == a { start } else { it.nth(b - a - 1)? };
    let s = text.get(start..end)?.trim();
    (!s.is_empty()).then_some(s)
}

/// The passages of a document at `unit` (paragraph or sentence; other units give none).
pub fn of_document(doc: &Document, unit: Unit) -> Vec<Passage> {
    let key = if doc.uri.is_empty() {
        &doc.id
    } else {
        &doc.uri
    };
    let mk = |tag: char, i: usize, text: &str| {
        Passage::new(
            format!("{key}#{tag}{i}"),
            key.clone(),
            doc.title.clone(),
            text.to_string(),
        )
        .from_revision(doc.page_id, doc.revision_id)
    };
    let spans: Vec<(u32, u32)> = match unit {
        Unit::Paragraph => doc.paragraphs.iter().map(|p| (p.start, p.end)).collect(),
        Unit::Sentence => doc.sentences.iter().map(|s| (s.start, s.end)).collect(),
        Unit::Segment | Unit::Triple => return Vec::new(),
    };
    let tag = if unit == Unit::Sentence { 's' } else { 'p' };
    if spans.is_empty() {
        let t = doc.text.trim();
        return if t.is_empty() {
            Vec::new()
        } else {
            vec![mk(tag, 0, t)]
        };
    }
    spans
        .iter()
        .enumerate()
        .filter_map(|(i, &(a, b))| chars(&doc.text, a, b).map(|t| mk(tag, i, t)))
        .collect()
}

/// The passage of an HSEQ segment, for the levels that hold retrievable text.
pub fn of_segment(seg: &Segment, title: &str) -> Option<Passage> {
    let keep = matches!(
        seg.level.as_str(),
        "paragraph" | "sentence" | "table_row" | "triplet"
    );
    (keep && !seg.content.trim().is_empty()).then(|| {
        Passage::new(
            seg.id.clone(),
            if seg.uri.is_empty() {
                seg.source_id.clone()
            } else {
                seg.uri.clone()
            },
            title.to_string(),
            seg.content.clone(),
        )
        .from_revision(
            seg.page_id,
            seg.source_version.as_deref().and_then(|v| v.parse().ok()),
        )
    })
}

/// The passage of an HSEQ segment, titled by the page its URI names (`enwiki:Title#table0`:
/// `Title`).
pub fn of_segment_titled(seg: &Segment) -> Option<Passage> {
    let title = seg.uri.split_once(':').map_or(seg.uri.as_str(), |x| x.1);
    of_segment(seg, title.split('#').next().unwrap_or(title))
}

/// The page a passage's `document_id` names: a segment's URI without its fragment
/// (`enwiki:Title#table0`: `enwiki:Title`).
pub fn page_of(document_id: &str) -> &str {
    document_id.split('#').next().unwrap_or(document_id)
}

/// The passage of a triple: `subject predicate object`, names in place of keys when known.
pub fn of_triple(t: &Triple) -> Passage {
    let s = t.subject_name.as_deref().unwrap_or(&t.subject);
    let o = t.object_name.as_deref().unwrap_or(&t.object);
    let p = t
        .predicate
        .rsplit(['/', '.'])
        .next()
        .unwrap_or(&t.predicate)
        .replace('_', " ");
    Passage::new(
        t.id.clone(),
        t.document_id.clone().unwrap_or_else(|| t.subject.clone()),
        s.to_string(),
        format!("{s} {p} {o}"),
    )
}

/// The passages table's schema. `page_id` and `revision_id` are nullable and may be absent
/// from tables written before they were added.
pub fn schema() -> SchemaRef {
    let f = |n: &str| Field::new(n, DataType::Utf8, false);
    let n = |n: &str| Field::new(n, DataType::Int64, true);
    Arc::new(Schema::new(vec![
        f("id"),
        f("document_id"),
        f("content_hash"),
        f("title"),
        f("text"),
        n("page_id"),
        n("revision_id"),
    ]))
}

/// Passages as one batch.
pub fn to_batch(ps: &[Passage]) -> Result<RecordBatch, IndexError> {
    let col = |f: fn(&Passage) -> &str| -> ArrayRef {
        Arc::new(StringArray::from_iter_values(ps.iter().map(f)))
    };
    RecordBatch::try_new(
        schema(),
        vec![
            col(|p| &p.id),
            col(|p| &p.document_id),
            col(|p| &p.content_hash),
            col(|p| &p.title),
            col(|p| &p.text),
            Arc::new(Int64Array::from_iter(ps.iter().map(|p| p.page_id))),
            Arc::new(Int64Array::from_iter(ps.iter().map(|p| p.revision_id))),
        ],
    )
    .map_err(|e| IndexError::parquet("passages", e))
}

/// Writes passages to a Parquet file (zstd).
pub fn write(path: &Path, ps: &[Passage]) -> Result<(), IndexError> {
    crate::table::write(path, schema(), ps.chunks(8192).map(to_batch))
}

/// Reads a passages Parquet file.
pub fn read(path: &Path) -> Result<Vec<Passage>, IndexError> {
    let mut out = Vec::new();
    for batch in crate::table::read(path)? {
        let rows = Rows::of(&batch, path)?;
        out.extend((0..batch.num_rows()).map(|i| rows.passage(i)));
    }
    Ok(out)
}

/// The columns of a batch of a passages table, read row by row.
pub(crate) struct Rows<'a> {
    pub id: &'a StringArray,
    pub document_id: &'a StringArray,
    content_hash: &'a StringArray,
    title: &'a StringArray,
    text: &'a StringArray,
    page_id: Option<&'a Int64Array>,
    revision_id: Option<&'a Int64Array>,
}

impl<'a> Rows<'a> {
    pub fn of(batch: &'a RecordBatch, path: &Path) -> Result<Rows<'a>, IndexError> {
        let s = |name: &str| -> Result<&'a StringArray, IndexError> {
            batch
                .column_by_name(name)
                .and_then(|c| c.as_any().downcast_ref::<StringArray>())
                .ok_or_else(|| {
                    IndexError::Corrupt(
                        path.display().to_string(),
                        format!("no Utf8 column `{name}`"),
                    )
                })
        };
        // Tables written before passages named their page have no such columns.
        let int = |name: &str| {
            batch
                .column_by_name(name)
                .and_then(|c| c.as_any().downcast_ref::<Int64Array>())
        };
        Ok(Rows {
            id: s("id")?,
            document_id: s("document_id")?,
            content_hash: s("content_hash")?,
            title: s("title")?,
            text: s("text")?,
            page_id: int("page_id"),
            revision_id: int("revision_id"),
        })
    }

    /// Row `i` as a passage.
    pub fn passage(&self, i: usize) -> Passage {
        let at = |c: Option<&Int64Array>| c.filter(|c| c.is_valid(i)).map(|c| c.value(i));
        Passage {
            id: self.id.value(i).to_string(),
            document_id: self.document_id.value(i).to_string(),
            content_hash: self.content_hash.value(i).to_string(),
            title: self.title.value(i).to_string(),
            text: self.text.value(i).to_string(),
            page_id: at(self.page_id),
            revision_id: at(self.revision_id),
        }
    }
}

/// Sorts passages by id and removes repeated ids: the same id with the same content is one
/// passage (a paragraph cited by several questions); with different content, the smallest
/// content hash wins so the choice does not depend on input order. Returns how many went.
pub fn dedup(ps: &mut Vec<Passage>) -> (u64, u64) {
    ps.sort_by(|a, b| a.id.cmp(&b.id).then(a.content_hash.cmp(&b.content_hash)));
    let before = ps.len();
    let mut conflicting = 0u64;
    ps.dedup_by(|b, a| {
        let same = a.id == b.id;
        if same && a.content_hash != b.content_hash {
            conflicting += 1;
        }
        same
    });
    ((before - ps.len()) as u64 - conflicting, conflicting)
}

#[cfg(test)]
mod tests {
    use super::*;
    use distillery_core::Paragraph;

    fn doc(text: &str, paras: &[(u32, u32)]) -> Document {
        Document {
            id: "d1".into(),
            uri: "enwiki:Zell".into(),
            title: "Zell".into(),
            text: text.into(),
            paragraphs: paras
                .iter()
                .map(|&(start, end)| Paragraph {
                    start,
                    end,
                    section: 0,
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn passages_name_their_page_and_revision_through_the_table() {
        let mut d = doc("One para. Two para.", &[(0, 9), (10, 19)]);
        d.page_id = Some(42);
        d.revision_id = Some(1007);
        let ps = of_document(&d, Unit::Paragraph);
        assert!(
            ps.iter()
                .all(|p| p.page_id == Some(42) && p.revision_id == Some(1007))
        );
        let tmp = tempfile::tempdir().unwrap();
        let f = tmp.path().join("p.parquet");
        write(&f, &ps).unwrap();
        assert_eq!(read(&f).unwrap(), ps);
        // A table written before the lineage columns reads with none.
        let old = Arc::new(Schema::new(schema().fields()[..5].to_vec()));
        let b = to_batch(&ps).unwrap().project(&[0, 1, 2, 3, 4]).unwrap();
        crate::table::write(&tmp.path().join("old.parquet"), old, [Ok(b)]).unwrap();
        let back = read(&tmp.path().join("old.parquet")).unwrap();
        assert!(
            back.iter()
                .all(|p| p.page_id.is_none() && p.revision_id.is_none())
        );
        assert_eq!(back[0].text, ps[0].text);
    }

    #[test]
    fn paragraphs_are_cut_by_chars_and_named_by_uri() {
        let d = doc(
            "Zéll am See.\n\nA lake town.  \n",
            &[(0, 12), (14, 28), (5, 5)],
        );
        let ps = of_document(&d, Unit::Paragraph);
        assert_eq!(ps.len(), 2);
        assert_eq!(ps[0].id, "enwiki:Zell#p0");
        assert_eq!(ps[0].text, "Zéll am See.");
        assert_eq!(ps[1].text, "A lake town.");
        assert_eq!(ps[1].document_id, "enwiki:Zell");
        // Same title and text, same hash; an edit changes it.
        assert_eq!(ps[0].content_hash, content_hash("Zell", "Zéll am See."));
        assert_ne!(ps[0].content_hash, content_hash("Zell", "Zell am See."));
        let whole = of_document(&doc(" Only text. ", &[]), Unit::Paragraph);
        assert_eq!(whole[0].text, "Only text.");
        assert!(of_document(&doc("  ", &[]), Unit::Sentence).is_empty());
    }

    #[test]
    fn dedup_keeps_one_per_id_whatever_the_order() {
        let p = |id: &str, t: &str| Passage::new(id.into(), "d".into(), "T".into(), t.into());
        let mut a = vec![p("b", "x"), p("a", "y"), p("b", "x"), p("b", "z")];
        let mut b = vec![p("b", "z"), p("b", "x"), p("a", "y"), p("b", "x")];
        assert_eq!(dedup(&mut a), (1, 1));
        dedup(&mut b);
        assert_eq!(a, b);
        assert_eq!(a.len(), 2);
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("p.parquet");
        write(&f, &a).unwrap();
        assert_eq!(read(&f).unwrap(), a);
        assert!(shard_of("a", 4) < 4);
    }
}
