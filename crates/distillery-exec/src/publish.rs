//! Publishing: a run writes every part under `_staging/<run-id>/`, then moves the parts to
//! their final place and writes `_summary.json` and, last, `_manifest.json`. The manifest is
//! the commit point: readers refuse an output without one, the previous manifest is removed
//! before any final file is replaced, and files of older runs that the new manifest does not
//! list are deleted after it is written. A run that fails before publishing leaves the
//! previous output untouched.

use std::collections::BTreeSet;

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

/// Builds the manifest of a set of parts.
pub fn build_manifest(
    pipeline: &str,
    pipeline_hash: &str,
    run_id: &str,
    shards: u32,
    tables: &[TableKind],
    parts: &[WrittenPart],
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
    Manifest {
        format_version: 1,
        pipeline: pipeline.to_string(),
        pipeline_hash: pipeline_hash.to_string(),
        run_id: run_id.to_string(),
        shards,
        tables: out,
    }
}

/// Moves staged parts into place and commits the output with its manifest.
pub async fn publish(
    out: &Location,
    run_id: &str,
    manifest: &Manifest,
    summary: &RunSummary,
) -> Result<(), ExecError> {
    let staging = staging_dir(run_id);
    // 0. Check before touching anything: every listed file is staged, and no path is listed
    //    twice (two writers of one path would mean lost rows).
    let mut seen = BTreeSet::new();
    for t in &manifest.tables {
        for f in &t.files {
            if !seen.insert(f.path.as_str()) {
                return Err(ExecError::output(
                    &out.display,
                    format!("two parts would be published as {}", f.path),
                ));
            }
            if !out.exists(&format!("{staging}/{}", f.path)).await? {
                return Err(ExecError::output(
                    out.show(&format!("{staging}/{}", f.path)),
                    "staged part is missing",
                ));
            }
        }
    }
    // 1. The output is about to change: withdraw the old commit point first.
    out.delete(Manifest::FILE).await?;
    // 2. Move every part into place.
    for t in &manifest.tables {
        for f in &t.files {
            let from = out.path(&format!("{staging}/{}", f.path));
            let to = out.path(&f.path);
            out.store
                .rename(&from, &to)
                .await
                .map_err(|e| ExecError::store(out.show(&f.path), e))?;
        }
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
    for t in TableKind::ALL {
        for (rel, _) in out.list(t.name()).await? {
            if !seen.contains(rel.as_str()) && crate::parts::parse_part_name(&rel).is_some() {
                out.delete(&rel).await?;
            }
        }
    }
    remove_staging(out, run_id).await?;
    Ok(())
}

/// Deletes one run's staging directory.
pub async fn remove_staging(out: &Location, run_id: &str) -> Result<(), ExecError> {
    let dir = staging_dir(run_id);
    for (rel, _) in out.list(&dir).await? {
        out.delete(&rel).await?;
    }
    if let Some(local) = &out.local_dir {
        // Local stores leave empty directories behind; remove them (best effort).
        let _ = std::fs::remove_dir_all(local.join(&dir));
        let _ = std::fs::remove_dir(local.join("_staging"));
    }
    Ok(())
}

/// Deletes the staging directories of runs that started more than a day before `run_id`
/// (run ids begin with their UTC start time, so they sort by age). Younger ones may belong to
/// a run still going and are left alone.
pub async fn cleanup_stale_staging(out: &Location, run_id: &str) -> Result<(), ExecError> {
    let cutoff = stale_cutoff(run_id);
    let mut stale = BTreeSet::new();
    for (rel, _) in out.list("_staging").await? {
        if let Some(id) = rel
            .strip_prefix("_staging/")
            .and_then(|r| r.split('/').next())
            && id < cutoff.as_str()
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
