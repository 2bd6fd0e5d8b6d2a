//! Planning: resolving a pipeline's inputs into files and listing what a run will write.

use std::fmt;

use distillery_core::TableKind;
use distillery_core::spec::{Format, Pipeline};

use crate::error::ExecError;
use crate::stages::stage_of;
use crate::store::{is_url, resolve_paths};

/// One input file to read.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedFile {
    pub input: String,
    pub format: Format,
    /// Index of the file within its input.
    pub index: usize,
    pub location: String,
    pub size: Option<u64>,
    /// Part tag: `<input>-<index>`; every part this file produces carries it.
    pub tag: String,
}

/// What a run will do.
#[derive(Debug, Clone)]
pub struct Plan {
    pub pipeline: Pipeline,
    pub files: Vec<PlannedFile>,
    /// Stages in execution order: one `ingest/<input>` per input, then the pipeline's stages.
    pub stages: Vec<String>,
    /// Tables the output will hold.
    pub tables: Vec<TableKind>,
    /// Files the output will hold besides table parts and `_summary.json`/`_manifest.json`.
    pub outputs: Vec<String>,
}

/// Tables a format's reader produces.
pub fn tables_of(format: Format) -> &'static [TableKind] {
    use TableKind::*;
    match format {
        Format::MediaWiki => &[Documents, Tables],
        Format::Freebase | Format::Wikidata | Format::Fb15k => &[Triples, Entities],
        Format::MetaQaKb => &[Triples],
        _ => &[Questions, Documents, Tables],
    }
}

/// The part tag of a file of an input: `<input name>-<index>`. Input names are restricted to
/// file-name-safe characters by the pipeline checks, so tags of different inputs never collide.
pub fn file_tag(input: &str, index: usize) -> String {
    format!("{input}-{index:04}")
}

/// The tag of the parts a stage derives from a file's parts: `<input>@<stage>-<index>`.
/// `@` is not allowed in names (and object_store keeps it as it is in paths, unlike `~`), so
/// a derived part never shares a name with a part of the file itself (an ingest quarantine
/// part of the same shard, say), and [`crate::parts::PartId`] still finds the input.
pub fn stage_tag(tag: &str, stage: &str) -> String {
    match tag.rsplit_once('-') {
        Some((name, index)) => format!("{name}@{stage}-{index}"),
        None => format!("{tag}@{stage}"),
    }
}

/// The table whose rows count as the "records" of a format for the bad-record ratio: one per
/// page, question or edge, not the documents and tables a question's context also yields.
pub fn primary_table(format: Format) -> TableKind {
    match format {
        Format::MediaWiki => TableKind::Documents,
        Format::Freebase | Format::Wikidata | Format::Fb15k | Format::MetaQaKb => {
            TableKind::Triples
        }
        _ => TableKind::Questions,
    }
}

/// Resolves the inputs (globs, existence) and lists stages and tables. Reports every missing
/// input at once.
pub fn plan(p: &Pipeline) -> Result<Plan, ExecError> {
    let mut files = Vec::new();
    let mut errors = Vec::new();
    for input in &p.inputs {
        match resolve_paths(&input.name, &input.paths) {
            Ok(paths) => {
                for (index, location) in paths.into_iter().enumerate() {
                    let size = if is_url(&location) {
                        None
                    } else {
                        std::fs::metadata(&location).ok().map(|m| m.len())
                    };
                    files.push(PlannedFile {
                        input: input.name.clone(),
                        format: input.format,
                        index,
                        tag: file_tag(&input.name, index),
                        location,
                        size,
                    });
                }
            }
            Err(e) => errors.push(inputs_message(e)),
        }
    }
    let mut stages: Vec<String> = p
        .inputs
        .iter()
        .map(|i| format!("ingest/{}", i.name))
        .collect();
    let mut tables: Vec<TableKind> = Vec::new();
    let mut out_files: Vec<String> = Vec::new();
    for i in &p.inputs {
        for t in tables_of(i.format) {
            if !tables.contains(t) {
                tables.push(*t);
            }
        }
    }
    for s in &p.stages {
        stages.push(s.name.clone());
        let stage = stage_of(s)?;
        let declared = stage.outputs(s);
        tables.extend(declared.tables);
        out_files.extend(declared.files);
        // Files the stage reads besides the inputs must exist too.
        errors.extend(stage.resolve(s));
    }
    if !errors.is_empty() {
        return Err(ExecError::Inputs(errors.join("\n")));
    }
    tables.push(TableKind::Quarantine);
    tables.sort();
    tables.dedup();
    Ok(Plan {
        pipeline: p.clone(),
        files,
        stages,
        tables,
        outputs: out_files,
    })
}

fn human(n: u64) -> String {
    const U: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < U.len() {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", U[i])
    }
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = &self.pipeline;
        writeln!(f, "pipeline {} (hash {})", p.name, &p.hash[..12])?;
        writeln!(f, "output   {}", p.output)?;
        writeln!(
            f,
            "shards   {} per table (records assigned by stable id hash; triples by subject)",
            p.run.shards
        )?;
        writeln!(f, "inputs")?;
        for file in &self.files {
            writeln!(
                f,
                "  {:<12} {:<10} {} ({})",
                file.input,
                file.format.name(),
                file.location,
                file.size.map(human).unwrap_or_else(|| "remote".into())
            )?;
        }
        writeln!(f, "stages")?;
        for s in &self.stages {
            writeln!(f, "  {s}")?;
        }
        writeln!(f, "outputs")?;
        for t in &self.tables {
            writeln!(
                f,
                "  {}/{}/part-SSSSS-<input>-<file>.parquet  (up to {} shard(s) x {} file(s))",
                p.output.trim_end_matches('/'),
                t.name(),
                p.run.shards,
                self.files.len()
            )?;
        }
        for file in &self.outputs {
            writeln!(f, "  {}/{file}", p.output.trim_end_matches('/'))?;
        }
        writeln!(f, "  {}/_summary.json", p.output.trim_end_matches('/'))?;
        write!(f, "  {}/_manifest.json", p.output.trim_end_matches('/'))
    }
}

/// An input error's message without the `inputs:` its display starts with (the joined
/// errors get one).
fn inputs_message(e: ExecError) -> String {
    match e {
        ExecError::Inputs(m) => m,
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_round_trip_and_never_collide() {
        let input = |tag: &str| {
            crate::parts::PartId::parse(&crate::parts::part_name(TableKind::Documents, 0, tag))
                .map(|id| id.input)
        };
        assert_eq!(input(&file_tag("wiki-en", 3)).as_deref(), Some("wiki-en"));
        assert_eq!(
            input(&file_tag("wiki.en", 12_345)).as_deref(),
            Some("wiki.en")
        );
        assert_ne!(file_tag("wiki-en", 0), file_tag("wiki.en", 0));
        assert_eq!(input("nodigits"), None);
        let derived = stage_tag(&file_tag("wiki-en", 3), "my-triples");
        assert_eq!(derived, "wiki-en@my-triples-0003");
        assert_eq!(input(&derived).as_deref(), Some("wiki-en"));
    }
}
