//! Ownership: a location is written only when it is absent, empty, or holds what Distillery
//! leaves there (an output's `_manifest.json`, `_lock.json` or `_staging/`; an index root's
//! `CURRENT`, `versions/` or `embedding-cache/`). A directory of the user's is refused with a
//! message naming it and what it holds, before anything is written; so is a local location
//! holding a symbolic link to a directory (see [`crate::confine`] for the guard on every
//! write).

use std::path::{Path as FsPath, PathBuf};

use crate::error::ExecError;
use crate::store::Location;

/// What a location holds when Distillery made it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owned {
    /// A run's output: its manifest, its lock or a run's staging.
    Output,
    /// An index root: its pointer, its versions or its embedding cache.
    IndexRoot,
    /// A corpus root: its pointer and its versions.
    CorpusRoot,
}

impl Owned {
    /// Top-level names only Distillery writes in such a location.
    fn marks(self) -> &'static [&'static str] {
        match self {
            Owned::Output => &["_manifest.json", "_lock.json", "_staging"],
            Owned::IndexRoot => &["CURRENT", "versions", "embedding-cache"],
            Owned::CorpusRoot => &["CURRENT", "versions"],
        }
    }

    fn what(self) -> &'static str {
        match self {
            Owned::Output => "an output",
            Owned::IndexRoot => "an index root",
            Owned::CorpusRoot => "a corpus root",
        }
    }
}

/// Refuses a location Distillery does not own: one that holds other things and none of the
/// marks of `kind`, or (on local disk) one that holds a symbolic link to a directory.
pub async fn claim(loc: &Location, kind: Owned) -> Result<(), ExecError> {
    if let Some(dir) = &loc.local_dir
        && let Some(link) = first_dir_link(dir)
    {
        return Err(ExecError::output(
            &loc.display,
            format!(
                "{} is a symbolic link to a directory: Distillery never writes or deletes \
                 through links out of {}; remove the link or choose another location",
                link.display(),
                kind.what()
            ),
        ));
    }
    let listed = loc
        .store
        .list_with_delimiter(Some(&loc.root))
        .await
        .map_err(|e| ExecError::store(&loc.display, e))?;
    let names: Vec<String> = listed
        .common_prefixes
        .iter()
        .map(|p| format!("{}/", p.filename().unwrap_or_default()))
        .chain(
            listed
                .objects
                .iter()
                .map(|o| o.location.filename().unwrap_or_default().to_string()),
        )
        .collect();
    let ours = names
        .iter()
        .any(|n| kind.marks().contains(&n.trim_end_matches('/')));
    if names.is_empty() || ours {
        return Ok(());
    }
    let mut shown: Vec<&str> = names.iter().map(String::as_str).take(5).collect();
    if names.len() > 5 {
        shown.push("...");
    }
    Err(ExecError::output(
        &loc.display,
        format!(
            "holds files Distillery did not write ({}) and is not {} (no {}): refusing to \
             write or delete anything in it; choose an empty or new directory",
            shown.join(", "),
            kind.what(),
            kind.marks().join(", ")
        ),
    ))
}

/// The first symbolic link to a directory under `dir`, depth first (links to files are
/// harmless: a delete removes the link, a put replaces it). Directories are entered without
/// following links, so a walk ends whatever the tree links to.
fn first_dir_link(dir: &FsPath) -> Option<PathBuf> {
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(t) = e.file_type() else { continue };
            if t.is_symlink() {
                if e.path().is_dir() {
                    return Some(e.path());
                }
            } else if t.is_dir() {
                todo.push(e.path());
            }
        }
    }
    None
}

/// What `validate` can say of an output before a run: a local one must be writable, on a
/// disk, and absent, empty or a Distillery output without links to directories; a remote one
/// is checked when the run starts (its credentials may not be here).
pub async fn check_output(output: &str) -> Result<(), ExecError> {
    if crate::store::is_url(output) && !output.starts_with("file://") {
        return Ok(());
    }
    let path = PathBuf::from(output.strip_prefix("file://").unwrap_or(output));
    crate::store::check_local_target(&path).map_err(|m| ExecError::output(output, m))?;
    if !path.is_dir() {
        return Ok(());
    }
    claim(&crate::store::open_location(output, false)?, Owned::Output).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::open_location;
    use object_store::ObjectStoreExt;

    fn loc(dir: &FsPath) -> Location {
        open_location(&dir.display().to_string(), true).unwrap()
    }

    #[tokio::test]
    async fn only_absent_empty_or_marked_locations_are_claimed() {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("out");
        claim(&loc(&out), Owned::Output).await.unwrap();
        std::fs::write(out.join("notes.txt"), "mine").unwrap();
        let e = claim(&loc(&out), Owned::Output).await.unwrap_err();
        assert!(e.to_string().contains("notes.txt"), "{e}");
        // An index root's marks do not make an output, and the other way round.
        std::fs::write(out.join("CURRENT"), "v").unwrap();
        assert!(claim(&loc(&out), Owned::Output).await.is_err());
        claim(&loc(&out), Owned::IndexRoot).await.unwrap();
        for mark in ["_manifest.json", "_lock.json"] {
            let d = tmp.path().join(mark);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("notes.txt"), "mine").unwrap();
            std::fs::write(d.join(mark), "{}").unwrap();
            claim(&loc(&d), Owned::Output).await.unwrap();
        }
        let d = tmp.path().join("failed-first-run");
        std::fs::create_dir_all(d.join("_staging/job/quarantine")).unwrap();
        std::fs::write(d.join("_staging/job/quarantine/part.parquet"), "q").unwrap();
        claim(&loc(&d), Owned::Output).await.unwrap();
        // In memory (as on S3) the same rules hold.
        let m = open_location("memory://confine-claim", true).unwrap();
        claim(&m, Owned::Output).await.unwrap();
        m.write("x/notes.txt", b"mine".to_vec()).await.unwrap();
        let e = claim(&m, Owned::Output).await.unwrap_err();
        assert!(e.to_string().contains("x/"), "{e}");
    }

    #[tokio::test]
    async fn nothing_is_written_listed_or_deleted_through_a_link() {
        let tmp = tempfile::tempdir().unwrap();
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(outside.join("documents")).unwrap();
        std::fs::write(outside.join("documents/part-00000-a-0000.parquet"), "x").unwrap();
        std::fs::write(outside.join("notes.txt"), "mine").unwrap();
        let out_dir = tmp.path().join("out");
        std::fs::create_dir_all(&out_dir).unwrap();
        std::os::unix::fs::symlink(outside.join("documents"), out_dir.join("documents")).unwrap();
        std::os::unix::fs::symlink(&outside, out_dir.join("lnk")).unwrap();
        std::os::unix::fs::symlink(outside.join("notes.txt"), out_dir.join("file")).unwrap();
        let out = loc(&out_dir);
        let e = claim(&out, Owned::Output).await.unwrap_err().to_string();
        assert!(e.contains("symbolic link"), "{e}");
        // The runtime guard, for a link made after a claim.
        assert!(out.list("documents").await.unwrap().is_empty());
        assert!(out.list("").await.unwrap().iter().all(|(p, _)| p == "file"));
        for rel in ["documents/part-00000-a-0000.parquet", "lnk/notes.txt"] {
            assert!(out.delete(rel).await.is_err(), "{rel}");
            assert!(out.write(rel, b"new".to_vec()).await.is_err(), "{rel}");
            assert!(
                out.store
                    .rename(&out.path("file"), &out.path(rel))
                    .await
                    .is_err()
            );
            assert_eq!(
                out.link_on_path(rel),
                Some(out_dir.join(rel.split('/').next().unwrap()))
            );
        }
        // A link as the last part is removed as a link.
        out.delete("file").await.unwrap();
        assert!(std::fs::symlink_metadata(out_dir.join("file")).is_err());
        assert_eq!(
            std::fs::read_to_string(outside.join("notes.txt")).unwrap(),
            "mine"
        );
        assert_eq!(
            std::fs::read_to_string(outside.join("documents/part-00000-a-0000.parquet")).unwrap(),
            "x"
        );
    }

    #[test]
    fn special_file_systems_are_named() {
        for p in ["/proc/self", "/proc/self/fd/new", "/sys/kernel", "/dev/x"] {
            if std::path::Path::new("/proc/self").exists() {
                let e = crate::store::check_local_target(FsPath::new(p)).unwrap_err();
                assert!(e.contains("special file system"), "{p}: {e}");
            }
        }
        let tmp = tempfile::tempdir().unwrap();
        crate::store::check_local_target(&tmp.path().join("a/b")).unwrap();
        let file = tmp.path().join("f");
        std::fs::write(&file, "x").unwrap();
        assert!(crate::store::check_local_target(&file).is_err());
    }
}
