//! A shard's documents and the triples that cite them, for the stages that write per-document
//! files from both (`text2triple`, `export`): the parts of the inputs (or of the stage that
//! derived them from the inputs), rows read in part order, and the triples grouped by their
//! `document_id` (a document's triples are in its shard: `sink::shard_key`, and the `triples`
//! stage writes its own in the shard of their document).
//!
//! Memory: the shard's triples that cite a document.

use std::collections::{HashMap, HashSet};

use distillery_core::schema::from_batch;
use distillery_core::{Document, TableKind, Triple};
use futures::StreamExt;

use crate::error::ExecError;
use crate::parts::{WrittenPart, read_part_rows};
use crate::store::Location;

/// The parts of `table` the stage reads, in part order: the inputs' own (`from` none), or
/// those the stage named `from` derived from them (`<input>@<from>`).
pub(crate) fn source_parts<'p>(
    parts: &'p [WrittenPart],
    table: TableKind,
    inputs: &[String],
    from: Option<&str>,
) -> Vec<&'p WrittenPart> {
    let mut v: Vec<(String, &WrittenPart)> = parts
        .iter()
        .filter(|w| w.table == table)
        .filter_map(|w| {
            let id = w.id()?;
            (id.of(inputs) && id.stage.as_deref() == from).then_some((id.tag, w))
        })
        .collect();
    v.sort_by(|a, b| (&a.0, &a.1.rel).cmp(&(&b.0, &b.1.rel)));
    v.into_iter().map(|x| x.1).collect()
}

/// Calls `f` with each row of a part, in order.
pub(crate) async fn each_row<T: serde::de::DeserializeOwned>(
    out: &Location,
    table: TableKind,
    part: &WrittenPart,
    mut f: impl FnMut(T),
) -> Result<(), ExecError> {
    let mut stream = Box::pin(read_part_rows(out, &part.path(), 1024).await?);
    while let Some(batch) = stream.next().await {
        for r in from_batch::<T>(table, &batch?)? {
            f(r);
        }
    }
    Ok(())
}

/// The triples of the stage's shard by document, in table order.
#[derive(Debug, Default)]
pub(crate) struct DocTriples {
    pub by_doc: HashMap<String, Vec<Triple>>,
    /// Triples without a `document_id`.
    pub without_document: u64,
    /// Bytes of the parts read.
    pub bytes: u64,
}

impl DocTriples {
    /// Reads the `triples` parts [`source_parts`] picks, each triple once (an input read as
    /// several files or ranges can state one twice).
    pub(crate) async fn read(
        out: &Location,
        parts: &[WrittenPart],
        inputs: &[String],
        from: Option<&str>,
    ) -> Result<DocTriples, ExecError> {
        let mut t = DocTriples::default();
        let mut seen = HashSet::new();
        for part in source_parts(parts, TableKind::Triples, inputs, from) {
            t.bytes += part.bytes;
            each_row(out, TableKind::Triples, part, |x: Triple| {
                if !seen.insert(x.id.clone()) {
                    return;
                }
                match x.document_id.clone() {
                    Some(d) => t.by_doc.entry(d).or_default().push(x),
                    None => t.without_document += 1,
                }
            })
            .await?;
        }
        Ok(t)
    }

    /// Takes the triples of a document out.
    pub(crate) fn take(&mut self, d: &Document) -> Option<Vec<Triple>> {
        self.by_doc.remove(&d.id)
    }

    /// Triples left: of documents the shard does not hold.
    pub(crate) fn left(&self) -> u64 {
        self.by_doc.values().map(|v| v.len() as u64).sum()
    }
}

/// Whether a document is met for the first time in this task: a context paragraph shared by
/// questions of two files (or ranges) is staged once per file, with one id, and so in one
/// shard.
#[derive(Debug, Default)]
pub(crate) struct FirstSeen(HashSet<String>);

impl FirstSeen {
    pub(crate) fn first(&mut self, d: &Document) -> bool {
        self.0.insert(d.id.clone())
    }
}

/// A triple's ends as a text shows them: its names when it has them (an extracted triple's
/// words, its keys being normalised), else its keys.
pub(crate) fn words(t: Triple) -> [String; 3] {
    [
        t.subject_name.unwrap_or(t.subject),
        t.predicate,
        t.object_name.unwrap_or(t.object),
    ]
}
