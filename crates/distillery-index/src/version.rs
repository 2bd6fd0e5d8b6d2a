//! Index roots: immutable versions and the `CURRENT` pointer.
//!
//! ```text
//! ROOT/CURRENT                          the name of the version readers use (written last)
//! ROOT/versions/<version>/manifest.json what the version holds (written after its files)
//! ROOT/versions/<version>/passages/shard-SSSS.parquet   (and a corpus night's delta parts,
//!                                       shard-SSSS.dNNNNN.parquet and .gone.json)
//! ROOT/versions/<version>/bm25/shard-SSSS/…     tantivy's files
//! ROOT/versions/<version>/embeddings/shard-SSSS.parquet
//! ROOT/versions/<version>/ann/shard-SSSS.usearch
//! ROOT/versions/<version>/kg/…          nodes, edges by subject and object, GraphML
//! ```
//!
//! A version's files are never rewritten; its manifest is written after them and `CURRENT`
//! after the manifest, so a reader that resolves `CURRENT` always finds a whole version (an
//! object store's put replaces an object at once). BM25, dense and KG of one build are one
//! version and switch together. Pruning keeps the newest `keep` versions and never the one
//! `CURRENT` names; a reader that lost a race with pruning resolves `CURRENT` again.

use std::path::{Path as FsPath, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use serde::{Deserialize, Serialize};

use crate::IndexError;
use crate::dense::ModelInfo;
use crate::kg::KgStats;

/// An index root in an object store.
#[derive(Clone)]
pub struct Root {
    pub store: Arc<dyn ObjectStore>,
    pub prefix: Path,
    /// The root as the user wrote it (for messages).
    pub display: String,
    /// The absolute directory of a root on local disk (read in place, not downloaded).
    pub local_dir: Option<PathBuf>,
}

impl std::fmt::Debug for Root {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Root")
            .field("display", &self.display)
            .finish()
    }
}

/// The name of the pointer object.
pub const CURRENT: &str = "CURRENT";

/// Bytes per part of a multipart upload (and the largest file uploaded in one put).
pub const UPLOAD_PART: usize = 16 << 20;

impl Root {
    pub fn path(&self, rel: &str) -> Path {
        rel.split('/')
            .filter(|s| !s.is_empty())
            .fold(self.prefix.clone(), |p, s| p.join(s))
    }

    pub fn show(&self, rel: &str) -> String {
        format!("{}/{rel}", self.display.trim_end_matches('/'))
    }

    /// An object, `None` when absent.
    pub async fn get(&self, rel: &str) -> Result<Option<Bytes>, IndexError> {
        match self.store.get(&self.path(rel)).await {
            Ok(r) => Ok(Some(
                r.bytes()
                    .await
                    .map_err(|e| IndexError::store(self.show(rel), e))?,
            )),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(IndexError::store(self.show(rel), e)),
        }
    }

    pub async fn put(&self, rel: &str, data: impl Into<PutPayload>) -> Result<(), IndexError> {
        self.store
            .put(&self.path(rel), data.into())
            .await
            .map(|_| ())
            .map_err(|e| IndexError::store(self.show(rel), e))
    }

    /// Copies an object inside the root (server-side where the store can).
    pub async fn copy(&self, from: &str, to: &str) -> Result<(), IndexError> {
        self.store
            .copy(&self.path(from), &self.path(to))
            .await
            .map_err(|e| IndexError::store(self.show(from), e))
    }

    /// Every object under `rel`, relative to the root, sorted.
    pub async fn list(&self, rel: &str) -> Result<Vec<(String, u64)>, IndexError> {
        let prefix = self.path(rel);
        let metas: Vec<_> = self
            .store
            .list(Some(&prefix))
            .try_collect()
            .await
            .map_err(|e| IndexError::store(self.show(rel), e))?;
        let root = self.prefix.as_ref();
        let mut out: Vec<(String, u64)> = metas
            .into_iter()
            .map(|m| {
                let full = m.location.as_ref();
                let r = full
                    .strip_prefix(root)
                    .unwrap_or(full)
                    .trim_start_matches('/');
                (r.to_string(), m.size)
            })
            .collect();
        out.sort();
        Ok(out)
    }

    /// Uploads local files: `dir/name` to `rel/name` for each name. A file of up to
    /// [`UPLOAD_PART`] bytes is one put; a larger one streams as a multipart upload, so a
    /// big export is never held in memory whole.
    pub async fn upload(
        &self,
        dir: &FsPath,
        rel: &str,
        names: &[String],
    ) -> Result<Vec<FileEntry>, IndexError> {
        let mut out = Vec::with_capacity(names.len());
        for name in names {
            let local = dir.join(name);
            let path = format!("{rel}/{name}");
            let bytes = self.upload_file(&local, &path).await?;
            out.push(FileEntry { path, bytes });
        }
        Ok(out)
    }

    async fn upload_file(&self, local: &FsPath, rel: &str) -> Result<u64, IndexError> {
        use tokio::io::AsyncReadExt;
        let io = |e| IndexError::io(local.display(), e);
        let mut file = tokio::fs::File::open(local).await.map_err(io)?;
        let size = file.metadata().await.map_err(io)?.len();
        if size <= UPLOAD_PART as u64 {
            let data = tokio::fs::read(local).await.map_err(io)?;
            self.put(rel, data).await?;
            return Ok(size);
        }
        let store_err = |e| IndexError::store(self.show(rel), e);
        let upload = self
            .store
            .put_multipart(&self.path(rel))
            .await
            .map_err(store_err)?;
        let mut w = object_store::WriteMultipart::new_with_chunk_size(upload, UPLOAD_PART);
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = file.read(&mut buf).await.map_err(io)?;
            if n == 0 {
                break;
            }
            // At most two parts in flight: memory stays a few parts whatever the file.
            w.wait_for_capacity(2).await.map_err(store_err)?;
            w.write(&buf[..n]);
        }
        w.finish().await.map_err(store_err)?;
        Ok(size)
    }

    /// Downloads `rel` to the local file `to`: a hard link on a local root (the files of a
    /// version are never written again, and tantivy replaces rather than rewrites files), else
    /// a copy.
    pub async fn download(&self, rel: &str, to: &FsPath) -> Result<(), IndexError> {
        if let Some(d) = &self.local_dir {
            if let Some(parent) = to.parent() {
                std::fs::create_dir_all(parent).map_err(|e| IndexError::io(parent.display(), e))?;
            }
            let _ = std::fs::remove_file(to);
            if std::fs::hard_link(d.join(rel), to).is_ok() {
                return Ok(());
            }
        }
        let data = self
            .get(rel)
            .await?
            .ok_or_else(|| IndexError::Invalid(format!("{}: missing", self.show(rel))))?;
        if let Some(d) = to.parent() {
            tokio::fs::create_dir_all(d)
                .await
                .map_err(|e| IndexError::io(d.display(), e))?;
        }
        let tmp = to.with_extension("part");
        tokio::fs::write(&tmp, &data)
            .await
            .map_err(|e| IndexError::io(tmp.display(), e))?;
        tokio::fs::rename(&tmp, to)
            .await
            .map_err(|e| IndexError::io(to.display(), e))
    }
}

/// A file of a version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    /// Relative to the version's directory.
    pub path: String,
    pub bytes: u64,
}

/// How a build's passages compare with the version before it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Changes {
    pub added: u64,
    pub changed: u64,
    pub deleted: u64,
    pub unchanged: u64,
}

/// What a version holds: `versions/<version>/manifest.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub version: String,
    /// Seconds since the Unix epoch when the build finished.
    pub created: u64,
    /// `bm25`, `dense`, `kg`: what this version holds.
    pub kinds: Vec<String>,
    pub unit: String,
    pub shards: u32,
    pub passages: u64,
    /// The version this one was built from (incremental builds).
    pub previous: Option<String>,
    pub changes: Changes,
    /// Shards rebuilt, and shards copied unchanged from `previous`.
    pub shards_rebuilt: u32,
    pub shards_reused: u32,
    pub model: Option<ModelInfo>,
    /// Passages embedded by this build, taken from the previous version, and from the
    /// embedding cache.
    pub embedded: u64,
    pub embeddings_reused: u64,
    pub embeddings_cached: u64,
    pub kg: Option<KgStats>,
    /// The pipeline's hash and the output (its manifest) the passages came from.
    pub pipeline_hash: String,
    pub source: String,
    pub files: Vec<FileEntry>,
    /// Input passages dropped as exact duplicates, and ids seen again with another text
    /// (the last one kept).
    #[serde(default)]
    pub duplicates: u64,
    #[serde(default)]
    pub conflicting: u64,
    /// A hash of what the version was built from (passage ids and content hashes, KG edges,
    /// kinds, unit, shards, model): a build with the same fingerprint as `CURRENT`'s version
    /// keeps that version instead of writing an identical one.
    #[serde(default)]
    pub fingerprint: String,
    /// The corpus version the passages came from (an index fed by a corpus root), from which
    /// the next night's build applies only the changes.
    #[serde(default)]
    pub corpus: Option<String>,
}

fn version_rel(v: &str) -> String {
    format!("versions/{v}")
}

/// The version `CURRENT` names, if any.
pub async fn current(root: &Root) -> Result<Option<String>, IndexError> {
    Ok(root
        .get(CURRENT)
        .await?
        .map(|b| String::from_utf8_lossy(&b).trim().to_string())
        .filter(|s| !s.is_empty()))
}

/// A version's manifest, `None` when it has none (absent, or a build that did not finish).
pub async fn manifest(root: &Root, version: &str) -> Result<Option<Manifest>, IndexError> {
    let rel = format!("{}/manifest.json", version_rel(version));
    match root.get(&rel).await? {
        None => Ok(None),
        Some(b) => serde_json::from_slice(&b)
            .map(Some)
            .map_err(|e| IndexError::Corrupt(root.show(&rel), e.to_string())),
    }
}

/// A version as `index list` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct VersionInfo {
    pub version: String,
    pub current: bool,
    /// `None` for a build that never wrote its manifest (not readable).
    pub manifest: Option<Manifest>,
}

/// The names of the version directories, oldest first (names sort by build time).
pub(crate) async fn names(root: &Root) -> Result<Vec<String>, IndexError> {
    let prefix = root.path("versions");
    let listed = root
        .store
        .list_with_delimiter(Some(&prefix))
        .await
        .map_err(|e| IndexError::store(root.show("versions"), e))?;
    let mut out: Vec<String> = listed
        .common_prefixes
        .iter()
        .filter_map(|p| p.filename().map(str::to_string))
        .collect();
    out.sort();
    Ok(out)
}

/// Every version under the root, oldest first.
pub async fn list(root: &Root) -> Result<Vec<VersionInfo>, IndexError> {
    let cur = current(root).await?;
    let mut out = Vec::new();
    for v in names(root).await? {
        out.push(VersionInfo {
            current: cur.as_deref() == Some(&v),
            manifest: manifest(root, &v).await?,
            version: v,
        });
    }
    Ok(out)
}

/// Points `CURRENT` at `version`, which must have its manifest.
pub async fn switch(root: &Root, version: &str) -> Result<(), IndexError> {
    if manifest(root, version).await?.is_none() {
        return Err(IndexError::Invalid(format!(
            "{}: no version `{version}` with a manifest (see `distillery index list`)",
            root.display
        )));
    }
    root.put(CURRENT, format!("{version}\n")).await
}

/// Deletes the versions older than the newest `keep` (never the current one) and returns
/// their names.
pub async fn prune(root: &Root, keep: usize) -> Result<Vec<String>, IndexError> {
    let cur = current(root).await?;
    let all = names(root).await?;
    let cut = all.len().saturating_sub(keep.max(1));
    let mut gone = Vec::new();
    for v in &all[..cut] {
        if cur.as_deref() == Some(v.as_str()) {
            continue;
        }
        remove(root, v).await?;
        gone.push(v.clone());
    }
    Ok(gone)
}

/// Deletes every object of `version` (the caller makes sure `CURRENT` does not name it).
pub async fn remove(root: &Root, version: &str) -> Result<(), IndexError> {
    for (rel, _) in root.list(&version_rel(version)).await? {
        match root.store.delete(&root.path(&rel)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => return Err(IndexError::store(root.show(&rel), e)),
        }
    }
    if let Some(d) = &root.local_dir {
        // Local stores leave empty directories behind. A linked `versions` is not entered
        // (what it points to is not the root's); a linked version is removed as a link.
        let linked =
            std::fs::symlink_metadata(d.join("versions")).is_ok_and(|m| m.file_type().is_symlink());
        if !linked {
            let _ = std::fs::remove_dir_all(d.join(version_rel(version)));
        }
    }
    Ok(())
}

/// A version ready to read from local disk.
#[derive(Debug, Clone)]
pub struct Opened {
    pub manifest: Manifest,
    /// The version's directory on local disk.
    pub dir: PathBuf,
}

/// Opens `version` (or the current one): in place on a local root, else downloaded once into
/// `cache_dir/<root hash>/<version>/`.
pub async fn open(
    root: &Root,
    version: Option<&str>,
    cache_dir: &FsPath,
) -> Result<Opened, IndexError> {
    // A reader that resolves CURRENT just before pruning removes that version tries again.
    for _ in 0..3 {
        let v = match version {
            Some(v) => v.to_string(),
            None => current(root).await?.ok_or_else(|| {
                IndexError::Invalid(format!(
                    "{}: no CURRENT version (build one first)",
                    root.display
                ))
            })?,
        };
        let Some(m) = manifest(root, &v).await? else {
            if version.is_some() {
                return Err(IndexError::Invalid(format!(
                    "{}: no version `{v}`",
                    root.display
                )));
            }
            continue;
        };
        if let Some(d) = &root.local_dir {
            return Ok(Opened {
                manifest: m,
                dir: d.join(version_rel(&v)),
            });
        }
        let key = format!(
            "{:016x}",
            twox_hash::XxHash64::oneshot(0, root.display.as_bytes())
        );
        let dir = cache_dir.join(key).join(&v);
        let done = dir.join(".complete");
        if !done.exists() {
            let mut ok = true;
            for f in &m.files {
                let rel = format!("{}/{}", version_rel(&v), f.path);
                match root.download(&rel, &dir.join(&f.path)).await {
                    Ok(()) => {}
                    Err(IndexError::Invalid(_)) if version.is_none() => {
                        ok = false;
                        break;
                    }
                    Err(e) => return Err(e),
                }
            }
            if !ok {
                continue;
            }
            tokio::fs::write(&done, b"")
                .await
                .map_err(|e| IndexError::io(done.display(), e))?;
        }
        return Ok(Opened { manifest: m, dir });
    }
    Err(IndexError::Invalid(format!(
        "{}: CURRENT kept moving to pruned versions; try again",
        root.display
    )))
}

/// A version name for a build finishing now: `YYYYMMDDTHHMMSSZ-<8 hex>` (sorts by time; the
/// suffix tells apart builds of one second).
pub fn new_name(seed: &str) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    name_at(now, seed)
}

/// [`new_name`] for a build finishing `now` after the Unix epoch.
fn name_at(now: std::time::Duration, seed: &str) -> String {
    let h = twox_hash::XxHash64::oneshot(now.subsec_nanos() as u64, seed.as_bytes());
    let stamp = compact_utc(now.as_secs()).unwrap_or_else(|| "99991231T235959Z".into());
    format!("{stamp}-{:08x}", h as u32)
}

/// `YYYYMMDDTHHMMSSZ` (UTC) of `secs` after the Unix epoch: humantime's RFC 3339 form without
/// its `-` and `:`; `None` past the year 9999.
pub(crate) fn compact_utc(secs: u64) -> Option<String> {
    use std::fmt::Write;
    let t = std::time::UNIX_EPOCH.checked_add(std::time::Duration::from_secs(secs))?;
    let mut s = String::with_capacity(20);
    write!(s, "{}", humantime::format_rfc3339_seconds(t)).ok()?;
    s.retain(|c| c != '-' && c != ':');
    Some(s)
}

/// Seconds since the Unix epoch.
pub fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_names_are_compact_utc_times() {
        let day = 86_400;
        assert_eq!(compact_utc(0).as_deref(), Some("19700101T000000Z"));
        assert_eq!(
            compact_utc(20_418 * day + 18 * 3600 + 15 * 60 + 9).as_deref(),
            Some("20251126T181509Z")
        );
        assert_eq!(
            compact_utc(11_016 * day + day - 1).as_deref(),
            Some("20000229T235959Z")
        );
        assert_eq!(
            compact_utc(253_402_300_799).as_deref(),
            Some("99991231T235959Z")
        );
        assert_eq!(compact_utc(253_402_300_800), None);
        let at = std::time::Duration::new(20_418 * day + 65, 7);
        let n = name_at(at, "x");
        assert!(n.starts_with("20251126T000105Z-"), "{n}");
        assert_eq!(n.len(), "20261126T181500Z-0123abcd".len());
        assert!(n[17..].bytes().all(|b| b.is_ascii_hexdigit()), "{n}");
        assert_eq!(n, name_at(at, "x"));
        assert_ne!(n, name_at(at, "y"));
        let n = new_name("x");
        assert_eq!(n.len(), "20261126T181500Z-0123abcd".len());
        assert!(n.starts_with("20"));
    }

    fn manifest_of(v: &str) -> String {
        serde_json::json!({
            "version": v, "created": 0, "kinds": ["bm25"], "unit": "paragraph", "shards": 1,
            "passages": 0, "previous": null, "changes": Changes::default(),
            "shards_rebuilt": 1, "shards_reused": 0, "model": null, "embedded": 0,
            "embeddings_reused": 0, "embeddings_cached": 0, "kg": null, "pipeline_hash": "",
            "source": "", "files": [],
        })
        .to_string()
    }

    fn local(dir: &std::path::Path) -> Root {
        Root {
            store: Arc::new(object_store::local::LocalFileSystem::new_with_prefix(dir).unwrap()),
            prefix: Path::from(""),
            display: dir.display().to_string(),
            local_dir: Some(dir.to_path_buf()),
        }
    }

    #[tokio::test]
    async fn upload_streams_files_past_a_part() {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src");
        std::fs::create_dir_all(&src).unwrap();
        // Two full parts and a tail, plus a small file.
        let big: Vec<u8> = (0..2 * UPLOAD_PART + 12_345)
            .map(|i| (i % 251) as u8)
            .collect();
        std::fs::write(src.join("big.bin"), &big).unwrap();
        std::fs::write(src.join("small.txt"), b"small").unwrap();
        std::fs::create_dir_all(tmp.path().join("root")).unwrap();
        let root = local(&tmp.path().join("root"));
        let names = ["big.bin".to_string(), "small.txt".to_string()];
        let got = root.upload(&src, "v/kg", &names).await.unwrap();
        assert_eq!(
            got.iter()
                .map(|f| (f.path.as_str(), f.bytes))
                .collect::<Vec<_>>(),
            vec![("v/kg/big.bin", big.len() as u64), ("v/kg/small.txt", 5)]
        );
        assert!(root.get("v/kg/big.bin").await.unwrap().unwrap() == big);
        assert_eq!(
            &root.get("v/kg/small.txt").await.unwrap().unwrap()[..],
            b"small"
        );
    }

    #[tokio::test]
    async fn prune_keeps_the_newest_and_the_current_version() {
        let tmp = tempfile::tempdir().unwrap();
        let root = local(tmp.path());
        let names = [
            "20260101T000000Z-a",
            "20260102T000000Z-b",
            "20260103T000000Z-c",
        ];
        for v in names.iter().chain(&["20260104T000000Z-d"]) {
            let body = manifest_of(v);
            root.put(&format!("versions/{v}/manifest.json"), body)
                .await
                .unwrap();
        }
        // CURRENT rolled back to the oldest: it survives pruning to 2.
        switch(&root, names[0]).await.unwrap();
        assert!(switch(&root, "no-such").await.is_err());
        let gone = prune(&root, 2).await.unwrap();
        assert_eq!(gone, vec![names[1].to_string()]);
        let left: Vec<(String, bool)> = list(&root)
            .await
            .unwrap()
            .into_iter()
            .map(|v| (v.version, v.current))
            .collect();
        assert_eq!(
            left,
            vec![
                (names[0].to_string(), true),
                (names[2].to_string(), false),
                ("20260104T000000Z-d".to_string(), false),
            ]
        );
        assert!(!tmp.path().join("versions").join(names[1]).exists());
    }
}
