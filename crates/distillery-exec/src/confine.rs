//! Confinement: Distillery writes, moves and deletes only inside the outputs and index roots
//! it owns, and never through a symbolic link out of them.
//!
//! Two rules, for every location a run writes (an output, an index root, a response cache):
//! - **Ownership** ([`crate::claim::claim`]): a location is written only when it is absent, empty, or holds
//!   what Distillery leaves there (an output's `_manifest.json`, `_lock.json` or `_staging/`;
//!   an index root's `CURRENT`, `versions/` or `embedding-cache/`). A directory of the user's
//!   is refused with a message naming it and what it holds, before anything is written.
//! - **No links** ([`Confined`]): on local disk, object_store's `LocalFileSystem` follows
//!   symbolic links when it lists and resolves every directory on a path, so a linked table
//!   folder or a manifest naming `lnk/notes.txt` would reach files elsewhere. A claimed local
//!   location holding a link to a directory is refused, and every write, rename, copy and
//!   delete through a local location checks that no directory on its path is a link (a
//!   link made after the claim is met there), while listings leave out what lies behind one.
//!   A link as the last part of a path is safe: a delete removes the link, a put replaces it.

//!
//! The ownership rule lives in [`crate::claim`]; this module is the store wrapper below
//! `store`, and imports nothing of the crate.

use std::collections::HashMap;
use std::path::{Path as FsPath, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures::StreamExt;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    ObjectStoreExt, PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, Result,
};

/// The first directory on the way from `dir` to `rel` (its last part left out) that is a
/// symbolic link, if any. Parts that do not exist yet end the check: they will be made as
/// plain directories.
pub fn link_on_path(dir: &FsPath, rel: &str) -> Option<PathBuf> {
    let parts: Vec<&str> = rel.split('/').filter(|s| !s.is_empty()).collect();
    let mut at = dir.to_path_buf();
    for part in parts.iter().take(parts.len().saturating_sub(1)) {
        at.push(part);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => return Some(at),
            Ok(_) => {}
            Err(_) => return None,
        }
    }
    None
}

/// A local store that refuses to write, move or delete through a symbolic link, and lists
/// nothing behind one (see the module docs).
#[derive(Debug)]
pub struct Confined {
    inner: Arc<dyn ObjectStore>,
    dir: PathBuf,
}

impl std::fmt::Display for Confined {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Confined({})", self.inner)
    }
}

impl Confined {
    /// `inner`, a store over the local directory `dir`, confined to it.
    pub fn wrap(inner: Arc<dyn ObjectStore>, dir: PathBuf) -> Arc<dyn ObjectStore> {
        Arc::new(Confined { inner, dir })
    }

    fn check(&self, location: &Path) -> Result<()> {
        match link_on_path(&self.dir, location.as_ref()) {
            None => Ok(()),
            Some(link) => {
                tracing::warn!(path = %location, link = %link.display(), "refused: the path goes through a symbolic link");
                Err(object_store::Error::PermissionDenied {
                    path: location.to_string(),
                    source: format!(
                        "{} is a symbolic link: Distillery never writes or deletes through links",
                        link.display()
                    )
                    .into(),
                })
            }
        }
    }
}

#[async_trait]
impl ObjectStore for Confined {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        self.check(location)?;
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.check(location)?;
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.inner.get_opts(location, options).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        let dir = self.dir.clone();
        let inner = self.inner.clone();
        // One at a time: a local store has no bulk delete to lose.
        locations
            .then(move |p| {
                let (dir, inner) = (dir.clone(), inner.clone());
                async move {
                    let p = p?;
                    if let Some(link) = link_on_path(&dir, p.as_ref()) {
                        return Err(object_store::Error::PermissionDenied {
                            path: p.to_string(),
                            source: format!(
                                "{} is a symbolic link: Distillery never deletes through links",
                                link.display()
                            )
                            .into(),
                        });
                    }
                    inner.delete(&p).await.map(|()| p)
                }
            })
            .boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        let dir = self.dir.clone();
        // Whether a directory (relative) lies behind a link, asked once per directory.
        let seen: Mutex<HashMap<String, bool>> = Mutex::default();
        self.inner
            .list(prefix)
            .filter(move |m| {
                let keep = match m {
                    Ok(meta) => {
                        let rel = meta.location.as_ref();
                        let parent = rel.rsplit_once('/').map_or("", |(p, _)| p).to_string();
                        let mut seen = seen.lock().expect("listing cache");
                        !*seen
                            .entry(parent)
                            .or_insert_with(|| link_on_path(&dir, rel).is_some())
                    }
                    Err(_) => true,
                };
                futures::future::ready(keep)
            })
            .boxed()
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        if let Some(p) = prefix
            && link_on_path(&self.dir, &format!("{p}/x")).is_some()
        {
            return Ok(ListResult {
                common_prefixes: Vec::new(),
                objects: Vec::new(),
            });
        }
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.check(from)?;
        self.check(to)?;
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        self.check(from)?;
        self.check(to)?;
        self.inner.rename_opts(from, to, options).await
    }
}
