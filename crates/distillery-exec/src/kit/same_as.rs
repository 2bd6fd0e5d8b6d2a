//! Knowledge graphs taken as one: Hydra merges Wikidata into Freebase through each Wikidata
//! entity's Freebase id (`P646`). One pass reads the `same_as` edges of every KG part (three
//! columns) into [`Aliases`]: key → the key it is the same entity as (`Q82` → `m.01m4t`;
//! FB15k's `/m/x` form written `m.x`, [`canon`]). The `subgraph` stage (its `merge` option)
//! walks, and the `index` stage (its `same_as` option) writes, each aliased node under its
//! target key, so the edges of both graphs meet at it; each edge keeps its `source`.
//!
//! Memory: one entry per aliased entity (about two million for all of Wikidata's P646
//! claims), held for the task.

use std::borrow::Cow;

use arrow::array::{AsArray, RecordBatch, StringArray};
use futures::StreamExt;
use tokio_util::task::AbortOnDropHandle;

use crate::error::ExecError;
use crate::parts::read_part_columns;
use crate::store::Location;

/// A key in canonical form: FB15k's path form `/m/0abc` (and relations `/film/film/genre`)
/// becomes Freebase's dotted form `m.0abc` (`film.film.genre`); other keys are unchanged.
pub fn canon(key: &str) -> Cow<'_, str> {
    match key.strip_prefix('/') {
        Some(rest) if !rest.is_empty() => Cow::Owned(rest.replace('/', ".")),
        _ => Cow::Borrowed(key),
    }
}

fn strings<'b>(batch: &'b RecordBatch, name: &str) -> Result<&'b StringArray, ExecError> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_string_opt::<i32>())
        .ok_or_else(|| ExecError::Task(format!("KG part without a string `{name}` column")))
}

const COLUMNS: [&str; 3] = ["subject", "predicate", "object"];

/// Keys that name the same entity as another key.
#[derive(Debug, Default)]
pub struct Aliases {
    map: foldhash::HashMap<Box<str>, Box<str>>,
}

impl Aliases {
    /// The key a node is walked and written under: its alias target, else itself.
    pub fn key<'a>(&'a self, key: &'a str) -> &'a str {
        self.map.get(key).map_or(key, |k| k)
    }

    /// Aliased keys.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether no key is aliased.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// Reads the `same_as` edges of the KG parts at `paths` (parts in parallel, taken in part and
/// row order: an entity's first such edge wins).
pub async fn read_aliases(
    out: &Location,
    paths: &[String],
    same_as: &[String],
    parallelism: usize,
) -> Result<Aliases, ExecError> {
    let reads = paths.iter().cloned().map(|path| {
        let (out, same_as) = (out.clone(), same_as.to_vec());
        AbortOnDropHandle::new(tokio::spawn(async move {
            let mut found: Vec<(Box<str>, Box<str>)> = Vec::new();
            let mut stream = Box::pin(read_part_columns(&out, &path, &COLUMNS).await?);
            while let Some(batch) = stream.next().await {
                let batch = batch?;
                let [s, p, o] = COLUMNS.map(|c| strings(&batch, c));
                let (s, p, o) = (s?, p?, o?);
                for i in 0..batch.num_rows() {
                    if same_as.iter().any(|r| r == p.value(i)) && !o.value(i).is_empty() {
                        let target = canon(o.value(i));
                        if target != s.value(i) {
                            found.push((s.value(i).into(), target.as_ref().into()));
                        }
                    }
                }
            }
            Ok::<_, ExecError>(found)
        }))
    });
    let mut reads = futures::stream::iter(reads).buffered(parallelism.max(1));
    let mut aliases = Aliases::default();
    while let Some(found) = reads.next().await {
        let found = found.map_err(|e| ExecError::Task(format!("same_as aliases: {e}")))??;
        for (from, to) in found {
            aliases.map.entry(from).or_insert(to);
        }
    }
    Ok(aliases)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_keys() {
        assert_eq!(canon("/m/0abc"), "m.0abc");
        assert_eq!(canon("/film/film/genre"), "film.film.genre");
        assert_eq!(canon("m.0abc"), "m.0abc");
        assert_eq!(canon("Q42"), "Q42");
    }

    #[test]
    fn an_alias_names_its_target_and_other_keys_stay() {
        let mut a = Aliases::default();
        a.map.insert("Q82".into(), "m.01m4t".into());
        assert_eq!(a.key("Q82"), "m.01m4t");
        assert_eq!(a.key("Q5"), "Q5");
        assert_eq!(a.len(), 1);
        assert!(!a.is_empty());
    }
}
