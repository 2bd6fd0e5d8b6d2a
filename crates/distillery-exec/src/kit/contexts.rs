//! Readers of staged parts shared by the stages: an input's own parts of a table, its
//! context documents and its question parts by tag, and where a stage below published a file.

use std::collections::BTreeMap;

use distillery_core::schema::from_batch;
use distillery_core::{Document, TableKind};
use futures::StreamExt;

use crate::contract::ShardOutput;
use crate::error::ExecError;
use crate::parts::{WrittenPart, read_part_rows};
use crate::store::Location;

/// The directory (relative to the output) under which a stage task below this one published
/// `file`, itself or by adopting it from an earlier run.
pub fn published<'a>(upstream: &'a [ShardOutput], file: &str) -> Option<&'a str> {
    upstream.iter().find_map(|u| {
        let o = &u.output;
        let own = o.files.iter().any(|f| f.path == file).then_some(&o.dir);
        own.or_else(|| {
            o.adopted
                .iter()
                .find(|a| a.file.path == file)
                .map(|a| &a.dir)
        })
        .map(String::as_str)
    })
}

/// The staged parts of `table` whose input is one of `inputs` (not parts derived by other
/// stages), in part order: tag, then shard.
pub fn parts_of<'a>(
    parts: &'a [WrittenPart],
    table: TableKind,
    inputs: &[String],
) -> Vec<(String, u32, &'a WrittenPart)> {
    let mut v: Vec<(String, u32, &WrittenPart)> = parts
        .iter()
        .filter(|w| w.table == table)
        .filter_map(|w| {
            let id = w.id()?;
            // Parts derived by stages (`input@stage`) are not inputs of this one.
            (id.is_input() && id.of(inputs)).then_some((id.tag, id.shard, w))
        })
        .collect();
    v.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
    v
}

/// One QA input's context documents, by id (**memory: the input's documents**), and the
/// bytes of their parts. Every task of a stage split by questions reads them whole: count
/// those bytes once ([`crate::kit::sft_out::SftOut::shared_bytes_in`]).
pub async fn context_documents(
    out: &Location,
    parts: &[WrittenPart],
    input: &str,
) -> Result<(std::collections::HashMap<String, Document>, u64), ExecError> {
    let mut docs = std::collections::HashMap::new();
    let mut bytes = 0;
    for (_, _, part) in parts_of(parts, TableKind::Documents, &[input.to_string()]) {
        bytes += part.bytes;
        let mut stream = Box::pin(read_part_rows(out, &part.path(), 256).await?);
        while let Some(batch) = stream.next().await {
            for d in from_batch::<Document>(TableKind::Documents, &batch?)? {
                docs.insert(d.id.clone(), d);
            }
        }
    }
    Ok((docs, bytes))
}

/// One input's `questions` parts grouped by tag, in part order.
pub fn question_tags<'a>(
    parts: &'a [WrittenPart],
    input: &str,
) -> BTreeMap<String, Vec<&'a WrittenPart>> {
    let mut by_tag: BTreeMap<String, Vec<&WrittenPart>> = BTreeMap::new();
    for (tag, _, part) in parts_of(parts, TableKind::Questions, &[input.to_string()]) {
        by_tag.entry(tag).or_default().push(part);
    }
    by_tag
}
