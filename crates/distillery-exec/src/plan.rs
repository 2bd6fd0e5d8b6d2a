//! Planning: resolving a pipeline's inputs into files, and the files stages read besides
//! them into [`SideFile`]s, and listing what a run will write. What planning resolved travels
//! with the tasks and the job record: workers and a restarted coordinator never resolve a
//! glob again.

use distillery_core::TableKind;
use distillery_core::spec::{Format, FormatOptions, Pipeline};
use distillery_ingest::{
    ByteRange, InputCtx, LocalFs, Opener, find_multistream_index, split_ranges,
};

pub use crate::contract::{Plan, PlannedFile, SideFile, SideFiles, stage_tag};

use crate::contract::Reads;
use crate::error::ExecError;
use crate::kit::daily::daily_days;
use crate::stages::stage_of;
use crate::store::{StoreOpener, is_url, resolve_paths};

/// Tables a format's reader produces.
pub fn tables_of(format: Format) -> &'static [TableKind] {
    use TableKind::*;
    match format {
        Format::MediaWiki => &[Documents, Tables],
        Format::Freebase | Format::Wikidata => &[Triples, Literals, Entities],
        Format::Fb15k => &[Triples, Entities],
        Format::MetaQaKb => &[Triples],
        Format::WikiOfGraph => &[Documents, Triples],
        Format::MediaWikiLog => &[Changes],
        _ => &[Questions, Documents, Tables],
    }
}

/// The part tag of a file of an input: `<input name>-<index>`. Input names are restricted to
/// file-name-safe characters by the pipeline checks, so tags of different inputs never collide.
pub fn file_tag(input: &str, index: usize) -> String {
    format!("{input}-{index:04}")
}

/// The tag of the parts of range `r` of a split file: `<input>-<index>.<range>` (5 digits, so
/// tags sort in file order).
pub fn range_tag(input: &str, index: usize, r: usize) -> String {
    format!("{input}-{index:04}.{r:05}")
}

/// Formats whose big files are read as byte ranges: a multistream bz2 MediaWiki dump (cut at
/// bz2 stream starts, from its `-index.txt(.bz2)` when it lies beside the dump, else by
/// scanning), plain N-Triples and Wikidata JSON (cut anywhere; each range reads the lines that
/// start in it). QA files are not split: their questions share context documents, which a
/// range cannot know an earlier range wrote.
const SPLITTABLE: [Format; 3] = [Format::MediaWiki, Format::Freebase, Format::Wikidata];

/// The byte ranges one file is read in: more than one only when `run.split_bytes` is set, the
/// file is bigger and its format splits ([`SPLITTABLE`]; the ingest crate's `split_ranges` also
/// keeps compressed line files and single-stream dumps whole). An object-store file's size,
/// index and stream starts are read through object_store ([`split_remote`]).
pub fn split_file(
    format: Format,
    options: &FormatOptions,
    location: &str,
    size: Option<u64>,
    split_bytes: u64,
) -> Result<Vec<ByteRange>, ExecError> {
    if split_bytes == 0 || !SPLITTABLE.contains(&format) {
        return Ok(Vec::new());
    }
    if is_url(location) {
        return split_remote(format, options, location, split_bytes);
    }
    let Some(size) = size.filter(|s| *s > split_bytes) else {
        return Ok(Vec::new());
    };
    let ctx = InputCtx::opened_by(location, options, &LocalFs);
    let index = (format == Format::MediaWiki)
        .then(|| find_multistream_index(&LocalFs, location))
        .flatten();
    let ranges = split_ranges(format, &ctx, split_bytes, index.as_deref())?;
    Ok(whole_or(ranges, size))
}

/// No ranges when the planner gave one range over the whole file.
fn whole_or(ranges: Vec<ByteRange>, size: u64) -> Vec<ByteRange> {
    if ranges.len() > 1 || ranges.first().is_some_and(|r| !r.covers(size)) {
        ranges
    } else {
        Vec::new()
    }
}

/// [`split_file`] of an object-store file: its size by a HEAD request, then the index and the
/// stream starts by ranged GETs, on a thread with a runtime of its own (planning is
/// synchronous and may run inside the coordinator's runtime, which it must not block).
fn split_remote(
    format: Format,
    options: &FormatOptions,
    location: &str,
    split_bytes: u64,
) -> Result<Vec<ByteRange>, ExecError> {
    let (options, location) = (options.clone(), location.to_string());
    let planned = std::thread::spawn(move || -> Result<Vec<ByteRange>, ExecError> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .map_err(|e| ExecError::Task(format!("planning {location}: {e}")))?;
        let opener = StoreOpener::new(rt.handle().clone());
        let size = opener
            .size(&location)
            .map_err(|e| ExecError::Inputs(format!("{location}: {e}")))?;
        if size <= split_bytes {
            return Ok(Vec::new());
        }
        let ctx = InputCtx::opened_by(&location, &options, &opener);
        let index = (format == Format::MediaWiki)
            .then(|| find_multistream_index(&opener, &location))
            .flatten();
        let ranges = split_ranges(format, &ctx, split_bytes, index.as_deref())?;
        Ok(whole_or(ranges, size))
    });
    planned
        .join()
        .map_err(|_| ExecError::Task("planning the byte ranges of an input panicked".into()))?
}

/// The tables whose rows count as the "records" of a format for the bad-record ratio: one per
/// page, question or edge (entity edges and literal ones alike), not the documents and tables
/// a question's context also yields.
pub fn primary_tables(format: Format) -> &'static [TableKind] {
    match format {
        Format::MediaWiki | Format::WikiOfGraph => &[TableKind::Documents],
        Format::MediaWikiLog => &[TableKind::Changes],
        Format::Freebase | Format::Wikidata | Format::Fb15k | Format::MetaQaKb => {
            &TableKind::KG_EDGES
        }
        _ => &[TableKind::Questions],
    }
}

/// Resolves the inputs (globs, existence) and lists stages and tables. Reports every missing
/// input at once.
pub fn plan(p: &Pipeline) -> Result<Plan, ExecError> {
    let mut files = Vec::new();
    let mut errors = Vec::new();
    for input in &p.inputs {
        let paths = match input.format {
            Format::MediaWiki => {
                let (paths, bad) = daily_folders(&input.paths);
                errors.extend(bad);
                paths
            }
            _ => input.paths.clone(),
        };
        match resolve_paths(&input.name, &paths) {
            Ok(paths) => {
                for (index, location) in paths.into_iter().enumerate() {
                    let size = if is_url(&location) {
                        None
                    } else {
                        std::fs::metadata(&location).ok().map(|m| m.len())
                    };
                    let file = PlannedFile {
                        input: input.name.clone(),
                        format: input.format,
                        index,
                        tag: file_tag(&input.name, index),
                        location,
                        size,
                        range: None,
                    };
                    let ranges = split_file(
                        input.format,
                        &input.options,
                        &file.location,
                        size,
                        p.run.split_bytes,
                    );
                    match ranges {
                        Ok(ranges) if !ranges.is_empty() => {
                            for (r, range) in ranges.into_iter().enumerate() {
                                files.push(PlannedFile {
                                    tag: range_tag(&input.name, index, r),
                                    size: Some(range.end - range.start),
                                    range: Some(range),
                                    ..file.clone()
                                });
                            }
                        }
                        Ok(_) => files.push(file),
                        Err(e) => errors.push(format!("{}: {}", file.location, inputs_message(e))),
                    }
                }
            }
            Err(e) => errors.push(inputs_message(e)),
        }
    }
    if let Some(e) = shard_bound(p, &files) {
        errors.push(e);
    }
    let side = match resolve_side(p) {
        Ok(side) => side,
        Err(e) => {
            errors.extend(e);
            SideFiles::new()
        }
    };
    if !errors.is_empty() {
        return Err(ExecError::Inputs(errors.join("\n")));
    }
    plan_known(p, files, side)
}

/// A `mediawiki` input's paths with each daily adds-changes folder (a directory, or a glob of
/// directories, holding `maxrevid.txt` or `status.txt`) checked and replaced by its pages
/// file, in the order given (a glob's folders sorted, so days apply in date order); and why
/// the folders that cannot be read are refused.
pub fn daily_folders(paths: &[String]) -> (Vec<String>, Vec<String>) {
    let mut out = Vec::new();
    let (found, errors) = daily_days(paths, true);
    for (p, days) in found {
        match days {
            None => out.push(p),
            Some(days) => out.extend(days.into_iter().map(|d| d.pages)),
        }
    }
    (out, errors)
}

/// Leaves out of `p`'s `mediawiki` inputs the daily folders that no stage reading them needs
/// ([`crate::stages::Stage::reads`]: days its `corpus` stages applied before), so that a
/// night given a day it applied does not parse it again; returns the folders left out. An
/// input whose folders are all left out keeps no path. Folders that cannot be read are kept,
/// for planning to refuse with its message.
pub async fn leave_out_read_days(p: &mut Pipeline) -> Result<Vec<String>, ExecError> {
    let mut reads = Vec::with_capacity(p.stages.len());
    for s in &p.stages {
        reads.push((s.inputs.clone(), stage_of(s)?.reads(s, p).await?));
    }
    let mut left = Vec::new();
    for input in p.inputs.iter_mut() {
        if input.format != Format::MediaWiki {
            continue;
        }
        let readers: Vec<_> = reads
            .iter()
            .filter(|(inputs, _)| inputs.contains(&input.name))
            .map(|(_, r)| r)
            .collect();
        if readers.is_empty() || readers.iter().all(|r| **r == Reads::All) {
            continue;
        }
        let (found, errors) = daily_days(&input.paths, false);
        if !errors.is_empty() {
            continue;
        }
        let mut paths = Vec::new();
        for (path, days) in found {
            let Some(days) = days else {
                paths.push(path);
                continue;
            };
            let (skip, keep): (Vec<_>, Vec<_>) = days
                .into_iter()
                .partition(|d| readers.iter().all(|r| r.skips(&d.dir)));
            if skip.is_empty() {
                paths.push(path);
                continue;
            }
            paths.extend(keep.into_iter().map(|d| d.dir));
            left.extend(skip.into_iter().map(|d| d.dir));
        }
        input.paths = paths;
    }
    Ok(left)
}

/// Below this many shards (or tasks of a stage) any input is accepted.
pub const SHARDS_ALWAYS_ALLOWED: u32 = 1024;

/// Input bytes per shard beyond which more shards only make empty tasks.
pub const BYTES_PER_SHARD: u64 = 4096;

/// Refuses a shard count (`run.shards`, or a stage's `tasks`) that can only make empty tasks:
/// more than [`SHARDS_ALWAYS_ALLOWED`], one per input file, and one per [`BYTES_PER_SHARD`]
/// bytes of input. Inputs of unknown size (URLs) are not judged.
fn shard_bound(p: &Pipeline, files: &[PlannedFile]) -> Option<String> {
    let sizes: Option<Vec<u64>> = files.iter().map(|f| f.size).collect();
    let bytes: u64 = sizes?.iter().sum();
    let bound = (bytes / BYTES_PER_SHARD)
        .max(files.len() as u64)
        .max(SHARDS_ALWAYS_ALLOWED as u64);
    let asked = std::iter::once(("run.shards".to_string(), p.run.shards)).chain(
        p.stages
            .iter()
            .filter_map(|s| Some((format!("stages.{}.tasks", s.name), s.tasks?))),
    );
    let over: Vec<String> = asked
        .filter(|(_, n)| *n as u64 > bound)
        .map(|(k, n)| format!("{k} = {n}"))
        .collect();
    (!over.is_empty()).then(|| {
        format!(
            "{} for {} input file(s) of {bytes} bytes in all: at most {bound} (one per input \
             file or per {BYTES_PER_SHARD} bytes of input, and never fewer than \
             {SHARDS_ALWAYS_ALLOWED}); more would only schedule empty tasks",
            over.join(", "),
            files.len()
        )
    })
}

/// The files each stage reads besides the inputs, resolved now; every problem at once.
pub fn resolve_side(p: &Pipeline) -> Result<SideFiles, Vec<String>> {
    let (mut side, mut errors) = (SideFiles::new(), Vec::new());
    for s in &p.stages {
        match stage_of(s)
            .map_err(|e| vec![e.to_string()])
            .and_then(|st| st.resolve(s))
        {
            Ok(files) if files.is_empty() => {}
            Ok(files) => {
                side.insert(s.name.clone(), files);
            }
            Err(e) => errors.extend(e),
        }
    }
    if errors.is_empty() {
        Ok(side)
    } else {
        Err(errors)
    }
}

/// The plan of `p` over files resolved before (at submission, say): nothing is resolved
/// again.
pub fn plan_known(
    p: &Pipeline,
    files: Vec<PlannedFile>,
    side: SideFiles,
) -> Result<Plan, ExecError> {
    let mut stages: Vec<String> = p
        .inputs
        .iter()
        .map(|i| format!("ingest/{}", i.name))
        .collect();
    let mut tables: Vec<TableKind> = Vec::new();
    let mut out_files: Vec<String> = Vec::new();
    for i in &p.inputs {
        tables.extend(tables_of(i.format));
    }
    for s in &p.stages {
        stages.push(s.name.clone());
        let declared = stage_of(s)?.outputs(s);
        tables.extend(declared.tables);
        out_files.extend(declared.files);
    }
    tables.push(TableKind::Quarantine);
    tables.sort();
    tables.dedup();
    Ok(Plan {
        pipeline: p.clone(),
        files,
        side,
        stages,
        tables,
        outputs: out_files,
    })
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

    #[test]
    fn big_plain_line_files_split_and_small_or_compressed_ones_do_not() {
        let tmp = tempfile::tempdir().unwrap();
        let nt = tmp.path().join("kb.nt");
        let line = "<http://rdf.freebase.com/ns/m.0a> <http://rdf.freebase.com/ns/p> \"x\"@en .\n";
        std::fs::write(&nt, line.repeat(1000)).unwrap();
        let size = std::fs::metadata(&nt).unwrap().len();
        let loc = nt.to_str().unwrap();
        let opts = FormatOptions::default_for(Format::Freebase);
        let ranges = split_file(Format::Freebase, &opts, loc, Some(size), size / 3).unwrap();
        assert!(ranges.len() >= 3, "{ranges:?}");
        assert_eq!(ranges.first().unwrap().start, 0);
        assert_eq!(ranges.last().unwrap().end, size);
        assert!(ranges.windows(2).all(|w| w[0].end == w[1].start));
        // Not bigger than the target, splitting off, or a format that does not split: whole.
        for (f, bytes) in [
            (Format::Freebase, size),
            (Format::Freebase, 0),
            (Format::HotpotQa, 10),
        ] {
            let o = FormatOptions::default_for(f);
            assert!(
                split_file(f, &o, loc, Some(size), bytes)
                    .unwrap()
                    .is_empty()
            );
        }
        assert_eq!(range_tag("kb", 1, 7), "kb-0001.00007");
    }

    /// Daily adds-changes folders given as `mediawiki` paths: a glob of them read as their
    /// pages files in date order, an unfinished one refused by name, other paths untouched.
    #[test]
    fn daily_folders_become_their_pages_files_in_date_order() {
        use md5::Digest;
        let tmp = tempfile::tempdir().unwrap();
        let day = |date: &str, status: &str| {
            let d = tmp.path().join("incr").join(date);
            std::fs::create_dir_all(&d).unwrap();
            let name = format!("testwiki-{date}-pages-meta-hist-incr.xml.bz2");
            let body = format!("pages of {date}");
            std::fs::write(d.join(&name), &body).unwrap();
            let sum: String = md5::Md5::digest(body.as_bytes())
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            std::fs::write(d.join("md5sums"), format!("{sum}  {name}\n")).unwrap();
            std::fs::write(d.join("status.txt"), status).unwrap();
            std::fs::write(d.join("maxrevid.txt"), "100").unwrap();
            d.join(name).to_string_lossy().into_owned()
        };
        let (second, first) = (day("20240102", "done"), day("20240101", "done:all"));
        let glob = format!("{}/incr/2024*", tmp.path().display());
        let plain = "/some/dump.xml.bz2".to_string();
        let (paths, errors) = daily_folders(&[glob.clone(), plain.clone()]);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(paths, [first, second, plain]);
        day("20240103", "in-progress");
        let (_, errors) = daily_folders(&[glob]);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].contains("20240103") && errors[0].contains("in-progress"));
    }
}
