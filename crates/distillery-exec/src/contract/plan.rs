//! What planning resolved, as the stages see it: the input files, the files a stage reads
//! besides them, the plan of a run, and the tags of derived parts.

use std::collections::BTreeMap;
use std::fmt;

use distillery_core::TableKind;
use distillery_core::spec::{Format, Pipeline};
use distillery_ingest::ByteRange;

/// One input file (or byte range of one) to read.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PlannedFile {
    pub input: String,
    pub format: Format,
    /// Index of the file within its input.
    pub index: usize,
    pub location: String,
    /// Bytes this task reads: the file's size, or its range's length.
    pub size: Option<u64>,
    /// Part tag: `<input>-<index>`, or `<input>-<index>.<range>` for a byte range of a split
    /// file; every part this file (range) produces carries it.
    pub tag: String,
    /// The byte range of the file this task reads (`None`: all of it). See [`split_file`].
    pub range: Option<ByteRange>,
}

/// A file a stage reads besides the pipeline's inputs (a label stage's evaluation files),
/// resolved from its option's patterns at planning ([`crate::stages::Stage::resolve`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SideFile {
    /// The option naming it (`decontaminate`).
    pub option: String,
    /// The index of the pattern in that option that matched it.
    pub index: usize,
    pub location: String,
}

/// The side files of each stage that has some, by stage name.
pub type SideFiles = BTreeMap<String, Vec<SideFile>>;

/// What a run will do.
#[derive(Debug, Clone)]
pub struct Plan {
    pub pipeline: Pipeline,
    pub files: Vec<PlannedFile>,
    /// The files stages read besides the inputs, as planning resolved them.
    pub side: SideFiles,
    /// Stages in execution order: one `ingest/<input>` per input, then the pipeline's stages.
    pub stages: Vec<String>,
    /// Tables the output will hold.
    pub tables: Vec<TableKind>,
    /// Files the output will hold besides table parts and `_summary.json`/`_manifest.json`.
    pub outputs: Vec<String>,
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
            for side in self.side.get(s).into_iter().flatten() {
                writeln!(f, "    reads {} ({})", side.location, side.option)?;
            }
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
