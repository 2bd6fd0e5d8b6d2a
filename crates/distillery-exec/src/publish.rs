//! Publishing: a run writes every part under `_staging/<run-id>/`, then moves the parts to
//! their final place and writes `_summary.json` and, last, `_manifest.json`. The manifest is
//! the commit point: readers refuse an output without one, the previous manifest is removed
//! before any final file is replaced, and files of older runs that the new manifest does not
//! list are deleted after it is written. A run that fails before publishing leaves the
//! previous output untouched.
//!
//! Besides table parts a stage may stage other files (the label stage's `sft/train.jsonl`,
//! `sft/dataset_info.json`, `label_report.json`): they are moved into place the same way and
//! listed in the manifest's `files`. Such a file left from an earlier run is deleted only when
//! the previous manifest listed it and the new one does not: a file Distillery never listed is
//! not ours to remove.

use std::collections::{BTreeMap, BTreeSet};

use distillery_core::TableKind;
use distillery_core::schema::schema_hash;
use distillery_core::summary::{Manifest, ManifestFile, ManifestTable, RunSummary};
use object_store::ObjectStoreExt;

use crate::error::ExecError;
use crate::parts::WrittenPart;
use crate::store::Location;

/// Where a run stages its parts.
pub fn staging_dir(run_id: &str) -> String {
    format!("_staging/{run_id}")
}

/// Builds the manifest of a set of parts and other staged files (paths relative to the
/// staging directory, which are their paths in the output).
pub fn build_manifest(
    pipeline: &str,
    pipeline_hash: &str,
    run_id: &str,
    shards: u32,
    tables: &[TableKind],
    parts: &[WrittenPart],
    files: &[ManifestFile],
) -> Manifest {
    let mut out = Vec::new();
    for t in tables {
        let mut files: Vec<ManifestFile> = parts
            .iter()
            .filter(|p| p.table == *t)
            .map(|p| ManifestFile {
                path: p.rel.clone(),
                rows: p.rows,
                bytes: p.bytes,
            })
            .collect();
        files.sort_by(|a, b| a.path.cmp(&b.path));
        out.push(ManifestTable {
            name: t.name().to_string(),
            schema_hash: schema_hash(*t),
            rows: files.iter().map(|f| f.rows).sum(),
            files,
        });
    }
    let mut files = files.to_vec();
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Manifest {
        format_version: 1,
        pipeline: pipeline.to_string(),
        pipeline_hash: pipeline_hash.to_string(),
        run_id: run_id.to_string(),
        shards,
        tables: out,
        files,
    }
}

/// Publishes a run whose every file is staged under `_staging/<run_id>/` at its output path.
pub async fn publish(
    out: &Location,
    run_id: &str,
    manifest: &Manifest,
    summary: &RunSummary,
) -> Result<(), ExecError> {
    let staging = staging_dir(run_id);
    let sources: BTreeMap<String, (String, u64)> = manifest
        .tables
        .iter()
        .flat_map(|t| t.files.iter())
        .chain(manifest.files.iter())
        .map(|f| (f.path.clone(), (format!("{staging}/{}", f.path), f.bytes)))
        .collect();
    publish_from(out, run_id, manifest, summary, &sources).await
}

/// Moves staged files into place and commits the output with its manifest. `sources` maps
/// every listed path to where it lies now (relative to the output) and its size in bytes.
///
/// Repeatable after a crash part-way: a file whose source is gone but whose destination has
/// the recorded size was moved by the interrupted attempt and is taken as moved.
pub async fn publish_from(
    out: &Location,
    job: &str,
    manifest: &Manifest,
    summary: &RunSummary,
    sources: &BTreeMap<String, (String, u64)>,
) -> Result<(), ExecError> {
    // 0. Check before touching anything: every listed file is staged, and no path is listed
    //    twice (two writers of one path would mean lost rows).
    //    The same for the other files, which must not collide with parts or the manifest.
    let mut seen = BTreeSet::new();
    let all = manifest
        .tables
        .iter()
        .flat_map(|t| t.files.iter())
        .chain(manifest.files.iter());
    let mut moves: Vec<(&str, &str)> = Vec::new();
    for f in all.clone() {
        if f.path == Manifest::FILE || f.path == Manifest::SUMMARY || f.path.starts_with('_') {
            return Err(ExecError::output(
                &out.display,
                format!("a stage file may not be named {}", f.path),
            ));
        }
        if !seen.insert(f.path.as_str()) {
            return Err(ExecError::output(
                &out.display,
                format!("two files would be published as {}", f.path),
            ));
        }
        let Some((from, bytes)) = sources.get(&f.path) else {
            return Err(ExecError::output(
                out.show(&f.path),
                "no staged file for this output path",
            ));
        };
        if let Some(link) = out.link_on_path(&f.path) {
            return Err(ExecError::output(
                out.show(&f.path),
                format!(
                    "{} is a symbolic link: Distillery never writes through links out of its \
                     output; remove the link",
                    link.display()
                ),
            ));
        }
        if out.exists(from).await? {
            moves.push((from.as_str(), f.path.as_str()));
        } else if out.size(&f.path).await? != Some(*bytes) {
            return Err(ExecError::output(out.show(from), "staged file is missing"));
        }
    }
    // The other files the previous output listed: removed after the commit unless listed
    // again. An unreadable previous manifest lists nothing (its files are left alone).
    let previous_files: Vec<String> = match read_manifest(out).await {
        Ok(m) => m.files.into_iter().map(|f| f.path).collect(),
        Err(_) => Vec::new(),
    };
    // 1. The output is about to change: withdraw the old commit point first.
    out.delete(Manifest::FILE).await?;
    // 2. Move every part and file into place.
    for (from, to) in moves {
        out.store
            .rename(&out.path(from), &out.path(to))
            .await
            .map_err(|e| ExecError::store(out.show(to), e))?;
    }
    // 3. Summary, then the manifest: the commit.
    out.write(
        Manifest::SUMMARY,
        serde_json::to_vec_pretty(summary).expect("summary serializes"),
    )
    .await?;
    out.write(
        Manifest::FILE,
        serde_json::to_vec_pretty(manifest).expect("manifest serializes"),
    )
    .await?;
    // 4. Remove parts of earlier runs that this output no longer lists (only files named as
    //    Distillery parts: anything else in the directory is not ours), and this run's staging.
    //    Nothing is deleted through a symbolic link (a listing leaves out what lies behind
    //    one; a previous manifest naming such a path is skipped with a warning).
    for t in TableKind::ALL {
        for (rel, _) in out.list(t.name()).await? {
            if !seen.contains(rel.as_str()) && crate::parts::PartId::parse(&rel).is_some() {
                out.delete(&rel).await?;
            }
        }
    }
    for rel in previous_files {
        if seen.contains(rel.as_str()) || rel.starts_with('_') {
            continue;
        }
        match out.link_on_path(&rel) {
            None => out.delete(&rel).await?,
            Some(link) => {
                tracing::warn!(file = %out.show(&rel), link = %link.display(), "not deleted: the previous manifest names it through a symbolic link")
            }
        }
    }
    remove_staging(out, job).await?;
    Ok(())
}

/// Deletes one run's staging directory.
pub async fn remove_staging(out: &Location, run_id: &str) -> Result<(), ExecError> {
    let dir = staging_dir(run_id);
    for (rel, _) in out.list(&dir).await? {
        out.delete(&rel).await?;
    }
    if let Some(local) = &out.local_dir
        && out.link_on_path(&format!("{dir}/-")).is_none()
    {
        // Local stores leave empty directories behind; remove them (best effort). A linked
        // `_staging` is not entered: what it points to is not ours.
        let _ = std::fs::remove_dir_all(local.join(&dir));
        let _ = std::fs::remove_dir(local.join("_staging"));
    }
    Ok(())
}

/// Deletes one run's staging directory but its `quarantine` parts: what a run stopped by the
/// bad-record gate leaves for the user to read (the error names where). They go with the
/// other stale staging a day later ([`cleanup_stale_staging`]).
pub async fn remove_staging_but_quarantine(out: &Location, run_id: &str) -> Result<(), ExecError> {
    let dir = staging_dir(run_id);
    for (rel, _) in out.list(&dir).await? {
        if !rel.contains("/quarantine/") {
            out.delete(&rel).await?;
        }
    }
    if let Some(local) = &out.local_dir
        && out.link_on_path(&format!("{dir}/-")).is_none()
    {
        remove_empty_dirs(&local.join(&dir));
    }
    Ok(())
}

/// Removes the empty directories under `dir`, deepest first (best effort: local stores leave
/// them behind).
fn remove_empty_dirs(dir: &std::path::Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_empty_dirs(&e.path());
            }
        }
    }
    let _ = std::fs::remove_dir(dir);
}

/// Deletes the staging directories of runs that started more than a day before `run_id`
/// (run ids begin with their UTC start time, so they sort by age). Younger ones may belong to
/// a run still going and are left alone, as are the ids in `keep` (jobs a coordinator still
/// runs, however old).
pub async fn cleanup_stale_staging(
    out: &Location,
    run_id: &str,
    keep: &[String],
) -> Result<(), ExecError> {
    let cutoff = stale_cutoff(run_id);
    let mut stale = BTreeSet::new();
    for (rel, _) in out.list("_staging").await? {
        if let Some(id) = rel
            .strip_prefix("_staging/")
            .and_then(|r| r.split('/').next())
            && id < cutoff.as_str()
            && !keep.iter().any(|k| k == id)
        {
            stale.insert(id.to_string());
        }
    }
    for id in stale {
        remove_staging(out, &id).await?;
    }
    Ok(())
}

/// The run-id prefix one day before `run_id` (`YYYYMMDDTHHMMSS...`).
fn stale_cutoff(run_id: &str) -> String {
    let date = &run_id[..run_id.len().min(8)];
    let Ok(n) = date.parse::<u32>() else {
        return String::new();
    };
    // Subtracting one from the day is enough for a cutoff; day 0 sorts before day 1.
    format!("{:08}", n.saturating_sub(1))
}

/// Reads an output's manifest; an output without one is incomplete.
pub async fn read_manifest(out: &Location) -> Result<Manifest, ExecError> {
    if !out.exists(Manifest::FILE).await? {
        return Err(ExecError::output(
            &out.display,
            "no _manifest.json: not a Distillery output, or a run did not finish publishing it",
        ));
    }
    let bytes = out.read(Manifest::FILE).await?;
    serde_json::from_slice(&bytes)
        .map_err(|e| ExecError::output(out.show(Manifest::FILE), format!("bad manifest: {e}")))
}

/// Reads an output's run summary.
pub async fn read_summary(out: &Location) -> Result<RunSummary, ExecError> {
    let bytes = out.read(Manifest::SUMMARY).await?;
    serde_json::from_slice(&bytes)
        .map_err(|e| ExecError::output(out.show(Manifest::SUMMARY), format!("bad summary: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::open_location;

    fn file(path: &str) -> ManifestFile {
        ManifestFile {
            path: path.to_string(),
            rows: 1,
            bytes: 1,
        }
    }

    #[tokio::test]
    async fn stage_files_are_published_listed_and_removed_when_no_longer_listed() {
        let out = open_location("memory://publish-files-test", true).unwrap();
        let summary = RunSummary::default();
        out.write("_staging/r1/label_report.json", b"{}".to_vec())
            .await
            .unwrap();
        out.write("_staging/r1/sft/train.jsonl", b"{}\n".to_vec())
            .await
            .unwrap();
        let files = [file("sft/train.jsonl"), file("label_report.json")];
        let m = build_manifest("p", "h", "r1", 1, &[], &[], &files);
        assert_eq!(m.files[0].path, "label_report.json", "sorted by path");
        publish(&out, "r1", &m, &summary).await.unwrap();
        assert!(out.exists("sft/train.jsonl").await.unwrap());
        assert_eq!(read_manifest(&out).await.unwrap().files, m.files);
        assert!(out.list("_staging").await.unwrap().is_empty());

        // The next run lists only the report: the JSONL goes, a file nobody listed stays.
        out.write("notes.txt", b"mine".to_vec()).await.unwrap();
        out.write("_staging/r2/label_report.json", b"{}".to_vec())
            .await
            .unwrap();
        let m2 = build_manifest("p", "h", "r2", 1, &[], &[], &[file("label_report.json")]);
        publish(&out, "r2", &m2, &summary).await.unwrap();
        assert!(!out.exists("sft/train.jsonl").await.unwrap());
        assert!(out.exists("notes.txt").await.unwrap());
        assert!(out.exists("label_report.json").await.unwrap());

        // A listed file that was not staged fails the publish before anything changes; so
        // does a file named like the manifest.
        let m3 = build_manifest("p", "h", "r3", 1, &[], &[], &[file("missing.json")]);
        let e = publish(&out, "r3", &m3, &summary).await.unwrap_err();
        assert!(e.to_string().contains("staged file is missing"), "{e}");
        out.write("_staging/r4/_manifest.json", b"{}".to_vec())
            .await
            .unwrap();
        let m4 = build_manifest("p", "h", "r4", 1, &[], &[], &[file(Manifest::FILE)]);
        assert!(publish(&out, "r4", &m4, &summary).await.is_err());
        assert_eq!(read_manifest(&out).await.unwrap().run_id, "r2");
    }
}
