//! Text a stage writes per input part in its tasks, joined by its merge task in part order,
//! so a published file (a trajectory list, an export) holds the same bytes for 1, 4 or 16
//! tasks: a task writes the lines of the part `(tag, shard)` to its own
//! `_merge/<name>/<tag>.<shard>` ([`Fragments`]); the merge task reads every task's fragments
//! sorted by (tag, shard), the order one task reads the parts in ([`fragments`],
//! [`concat`]).

use distillery_core::summary::ManifestFile;

use crate::contract::ShardOutput;
use crate::error::ExecError;
use crate::kit::jsonl::TextFile;
use crate::store::Location;

/// The fragments of one named file written by one task.
pub(crate) struct Fragments {
    out: Location,
    staging: String,
    name: String,
    open: Option<((String, u32), TextFile)>,
    done: Vec<ManifestFile>,
}

fn dir_of(name: &str) -> String {
    format!("_merge/{}", name.replace('/', "."))
}

impl Fragments {
    pub(crate) fn new(out: &Location, staging: &str, name: &str) -> Fragments {
        Fragments {
            out: out.clone(),
            staging: staging.to_string(),
            name: name.to_string(),
            open: None,
            done: Vec::new(),
        }
    }

    /// Appends `text` (whole lines) to the fragment of the part `(tag, shard)`. A task writes
    /// one part's lines together, parts in any order.
    pub(crate) async fn write(
        &mut self,
        tag: &str,
        shard: u32,
        text: &str,
    ) -> Result<(), ExecError> {
        let key = (tag.to_string(), shard);
        if self.open.as_ref().map(|(k, _)| k) != Some(&key) {
            self.close().await?;
            let rel = format!("{}/{tag}.{shard:05}", dir_of(&self.name));
            self.open = Some((key, TextFile::new(&self.out, &self.staging, &rel)));
        }
        let (_, file) = self.open.as_mut().expect("opened above");
        file.write(text).await
    }

    async fn close(&mut self) -> Result<(), ExecError> {
        if let Some((_, f)) = self.open.take() {
            self.done.push(f.finish().await?);
        }
        Ok(())
    }

    /// Closes the fragments: the files staged for the merge task.
    pub(crate) async fn finish(mut self) -> Result<Vec<ManifestFile>, ExecError> {
        self.close().await?;
        Ok(self.done)
    }
}

/// Every fragment of `name` the tasks staged, as (tag, shard, path), in part order.
pub(crate) fn fragments(shards: &[ShardOutput], name: &str) -> Vec<(String, u32, String)> {
    let prefix = format!("{}/", dir_of(name));
    let prefix = prefix.as_str();
    let mut v: Vec<(String, u32, String)> = shards
        .iter()
        .flat_map(|s| {
            s.output.intermediate.iter().filter_map(move |f| {
                let key = f.path.strip_prefix(prefix)?;
                let (tag, shard) = key.rsplit_once('.')?;
                Some((
                    tag.to_string(),
                    shard.parse().ok()?,
                    format!("{}/{}", s.output.dir, f.path),
                ))
            })
        })
        .collect();
    v.sort();
    v
}

/// Joins the fragments of `name` into the staged file `name` of the merge task, in part
/// order.
pub(crate) async fn concat(
    out: &Location,
    staging: &str,
    shards: &[ShardOutput],
    name: &str,
) -> Result<ManifestFile, ExecError> {
    let mut file = TextFile::new(out, staging, name);
    for (_, _, rel) in fragments(shards, name) {
        let bytes = out.read(&rel).await?;
        let text = std::str::from_utf8(&bytes)
            .map_err(|e| ExecError::Task(format!("{}: {e}", out.show(&rel))))?;
        file.write_lines(text).await?;
    }
    file.finish().await
}
