//! Planning: resolving a pipeline's inputs into files and listing what a run will write.

use std::fmt;

use distillery_core::TableKind;
use distillery_core::spec::{Format, Pipeline, StageKind, StageOptions};

use crate::error::ExecError;
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
/// part of the same shard, say), and [`tag_input`] still finds the input.
pub fn stage_tag(tag: &str, stage: &str) -> String {
    match tag.rsplit_once('-') {
        Some((name, index)) => format!("{name}@{stage}-{index}"),
        None => format!("{tag}@{stage}"),
    }
}

/// The input name of a part tag (the inverse of [`file_tag`], and of [`stage_tag`]).
pub fn tag_input(tag: &str) -> Option<&str> {
    let (name, index) = tag.rsplit_once('-')?;
    let name = name.split('@').next().unwrap_or(name);
    (index.len() >= 4 && index.bytes().all(|b| b.is_ascii_digit())).then_some(name)
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
        match s.kind {
            StageKind::Hseq => tables.push(TableKind::Segments),
            StageKind::Label => {
                tables.push(TableKind::Labels);
                tables.push(TableKind::Sft);
                out_files.extend(
                    [
                        crate::label_stage::TRAIN_JSONL,
                        crate::label_stage::VALIDATION_JSONL,
                        crate::label_stage::DATASET_INFO,
                        crate::label_stage::LABEL_REPORT,
                    ]
                    .map(String::from),
                );
            }
            StageKind::Planner => out_files.push(format!("{}/plans.jsonl", s.name)),
            StageKind::Relevance | StageKind::Ras => {
                tables.push(TableKind::Sft);
                for f in ["train.jsonl", "validation.jsonl", "dataset_info.json"] {
                    out_files.push(format!("{}/{f}", s.name));
                }
            }
            StageKind::Cirag => {
                tables.push(TableKind::Sft);
                for f in [
                    "train.jsonl",
                    "validation.jsonl",
                    "trajectories.jsonl",
                    "dataset_info.json",
                ] {
                    out_files.push(format!("{}/{f}", s.name));
                }
            }
            StageKind::Triples => {
                tables.push(TableKind::Triples);
                if let StageOptions::Triples(o) = &s.options {
                    for e in &o.exports {
                        out_files.push(
                            match e.as_str() {
                                "ras" => crate::triples_stage::RAS_EXPORT,
                                _ => crate::triples_stage::OPENIE_EXPORT,
                            }
                            .to_string(),
                        );
                    }
                }
            }
        }
        // Evaluation files of a label stage must exist too.
        if let StageOptions::Label(o) = &s.options
            && !o.decontaminate.is_empty()
            && let Err(e) = resolve_paths(&format!("{}.decontaminate", s.name), &o.decontaminate)
        {
            errors.push(inputs_message(e));
        }
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
        assert_eq!(tag_input(&file_tag("wiki-en", 3)), Some("wiki-en"));
        assert_eq!(tag_input(&file_tag("wiki.en", 12_345)), Some("wiki.en"));
        assert_ne!(file_tag("wiki-en", 0), file_tag("wiki.en", 0));
        assert_eq!(tag_input("nodigits"), None);
        let derived = stage_tag(&file_tag("wiki-en", 3), "my-triples");
        assert_eq!(derived, "wiki-en@my-triples-0003");
        assert_eq!(tag_input(&derived), Some("wiki-en"));
    }
}
