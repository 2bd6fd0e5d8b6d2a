//! Locations: output roots and inputs as object_store stores, local disk by default.
//!
//! A location is a local path (relative to the working directory) or a URL: `file://`,
//! `s3://bucket/prefix`, `gs://bucket/prefix`, `az://container/prefix` (credentials from the
//! standard environment variables of each cloud, as object_store's `from_env` builders read
//! them), or `memory://` (tests).

use std::io::{self, Read};
use std::path::{Path as FsPath, PathBuf};
use std::sync::Arc;

use futures::TryStreamExt;
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use tokio::runtime::Handle;
use tokio_util::io::{StreamReader, SyncIoBridge};

use crate::error::ExecError;

/// A store and the root path inside it.
#[derive(Clone)]
pub struct Location {
    pub store: Arc<dyn ObjectStore>,
    pub root: Path,
    /// The location as the user wrote it (for messages).
    pub display: String,
    /// For local locations, the absolute directory.
    pub local_dir: Option<PathBuf>,
}

impl std::fmt::Debug for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Location")
            .field("display", &self.display)
            .field("root", &self.root)
            .finish()
    }
}

impl Location {
    /// `root/rel` as an object path.
    pub fn path(&self, rel: &str) -> Path {
        let mut p = self.root.clone();
        for part in rel.split('/').filter(|s| !s.is_empty()) {
            p = p.join(part);
        }
        p
    }

    /// `display/rel`, for messages.
    pub fn show(&self, rel: &str) -> String {
        format!("{}/{}", self.display.trim_end_matches('/'), rel)
    }

    /// Lists every object under `root/rel` (recursively), as paths relative to the root.
    pub async fn list(&self, rel: &str) -> Result<Vec<(String, u64)>, ExecError> {
        let prefix = self.path(rel);
        let metas: Vec<_> = self
            .store
            .list(Some(&prefix))
            .try_collect()
            .await
            .map_err(|e| ExecError::store(self.show(rel), e))?;
        let root = self.root.as_ref().to_string();
        let mut out: Vec<(String, u64)> = metas
            .into_iter()
            .map(|m| {
                let full = m.location.as_ref().to_string();
                let relp = full
                    .strip_prefix(&root)
                    .unwrap_or(&full)
                    .trim_start_matches('/')
                    .to_string();
                (relp, m.size)
            })
            .collect();
        out.sort();
        Ok(out)
    }

    /// Reads a whole (small) object.
    pub async fn read(&self, rel: &str) -> Result<bytes::Bytes, ExecError> {
        let r = self
            .store
            .get(&self.path(rel))
            .await
            .map_err(|e| ExecError::store(self.show(rel), e))?;
        r.bytes()
            .await
            .map_err(|e| ExecError::store(self.show(rel), e))
    }

    /// A buffered reader over an object, for text read line by line without holding it whole.
    pub async fn reader(
        &self,
        rel: &str,
    ) -> Result<impl tokio::io::AsyncBufRead + Unpin + Send + use<>, ExecError> {
        let r = self
            .store
            .get(&self.path(rel))
            .await
            .map_err(|e| ExecError::store(self.show(rel), e))?;
        Ok(StreamReader::new(r.into_stream().map_err(io::Error::other)))
    }

    /// Writes a whole (small) object atomically.
    pub async fn write(&self, rel: &str, data: Vec<u8>) -> Result<(), ExecError> {
        self.store
            .put(&self.path(rel), data.into())
            .await
            .map_err(|e| ExecError::store(self.show(rel), e))?;
        Ok(())
    }

    /// Deletes an object; a missing object is not an error.
    pub async fn delete(&self, rel: &str) -> Result<(), ExecError> {
        match self.store.delete(&self.path(rel)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(ExecError::store(self.show(rel), e)),
        }
    }

    /// The size of an object, `None` when it does not exist.
    pub async fn size(&self, rel: &str) -> Result<Option<u64>, ExecError> {
        match self.store.head(&self.path(rel)).await {
            Ok(m) => Ok(Some(m.size)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(ExecError::store(self.show(rel), e)),
        }
    }

    /// On local disk, the first directory on the way to `rel` that is a symbolic link (see
    /// [`crate::confine`]); always `None` for object stores.
    pub fn link_on_path(&self, rel: &str) -> Option<PathBuf> {
        let dir = self.local_dir.as_ref()?;
        let mut full = self.root.as_ref().to_string();
        for part in rel.split('/').filter(|s| !s.is_empty()) {
            full.push('/');
            full.push_str(part);
        }
        crate::confine::link_on_path(dir, &full)
    }

    pub async fn exists(&self, rel: &str) -> Result<bool, ExecError> {
        match self.store.head(&self.path(rel)).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(ExecError::store(self.show(rel), e)),
        }
    }
}

/// Whether a location is a URL (as opposed to a local path).
pub fn is_url(s: &str) -> bool {
    s.contains("://")
}

/// Opens a location as a store + root. Local directories are created if missing when
/// `create` is set.
pub fn open_location(location: &str, create: bool) -> Result<Location, ExecError> {
    let bad = |m: String| ExecError::output(location, m);
    if let Some(rest) = location.strip_prefix("memory://") {
        return Ok(Location {
            store: memory_store(),
            root: Path::from(rest),
            display: location.to_string(),
            local_dir: None,
        });
    }
    let local = match location.strip_prefix("file://") {
        Some(p) => Some(PathBuf::from(p)),
        None if !is_url(location) => Some(PathBuf::from(location)),
        None => None,
    };
    if let Some(p) = local {
        if create {
            check_local_target(&p).map_err(bad)?;
        }
        if create && p.exists() && !p.is_dir() {
            return Err(bad("not a directory".to_string()));
        } else if create {
            std::fs::create_dir_all(&p)
                .map_err(|e| bad(format!("cannot create directory: {e}")))?;
        } else if !p.is_dir() {
            return Err(bad(match p.exists() {
                true => "not a directory".to_string(),
                false => "no such directory".to_string(),
            }));
        }
        let abs = absolute(&p).map_err(|e| bad(e.to_string()))?;
        let store =
            LocalFileSystem::new_with_prefix(&abs).map_err(|e| ExecError::store(location, e))?;
        return Ok(Location {
            store: crate::faults::wrap(crate::confine::Confined::wrap(
                Arc::new(store),
                abs.clone(),
            )),
            root: Path::default(),
            display: location.to_string(),
            local_dir: Some(abs),
        });
    }
    let url = url::Url::parse(location).map_err(|e| bad(format!("not a URL: {e}")))?;
    let bucket = url.host_str().unwrap_or_default().to_string();
    let root = Path::from_url_path(url.path().trim_start_matches('/'))
        .map_err(|e| ExecError::store(location, e.into()))?;
    let store: Arc<dyn ObjectStore> = match url.scheme() {
        // Create-only and versioned puts (commit records, generations, the output lock) go
        // out as `If-None-Match: *` and `If-Match: <etag>`: object_store's default
        // (`S3ConditionalPut::ETagMatch`, what AWS S3 supports since 2024), so it is not set
        // here, leaving `AWS_CONDITIONAL_PUT` to the user. tests/cluster/s3.rs checks a
        // server honours both (moto does from 5.1.5).
        "s3" | "s3a" => Arc::new(
            object_store::aws::AmazonS3Builder::from_env()
                .with_bucket_name(&bucket)
                .build()
                .map_err(|e| ExecError::store(location, e))?,
        ),
        "gs" => Arc::new(
            object_store::gcp::GoogleCloudStorageBuilder::from_env()
                .with_bucket_name(&bucket)
                .build()
                .map_err(|e| ExecError::store(location, e))?,
        ),
        "az" | "azure" | "abfs" | "abfss" => Arc::new(
            object_store::azure::MicrosoftAzureBuilder::from_env()
                .with_url(location)
                .build()
                .map_err(|e| ExecError::store(location, e))?,
        ),
        other => return Err(bad(format!("unsupported scheme `{other}`"))),
    };
    Ok(Location {
        store: crate::faults::wrap(store),
        root,
        display: location.to_string(),
        local_dir: None,
    })
}

/// Checks that a local directory can be written by this process: it is not in a special
/// file system (`/proc`, `/sys`, `/dev`, cgroup, debugfs, ...), where writes either fail
/// late or walk endless links, and its nearest existing directory accepts writes.
pub fn check_local_target(p: &FsPath) -> Result<(), String> {
    let abs = absolute(p).map_err(|e| e.to_string())?;
    // The nearest part of the path that exists: the directory itself or the one it would be
    // made in.
    let mut at = abs.as_path();
    while std::fs::symlink_metadata(at).is_err() {
        match at.parent() {
            Some(up) => at = up,
            None => return Err("no part of this path exists".to_string()),
        }
    }
    let real = std::fs::canonicalize(at).map_err(|e| format!("{}: {e}", at.display()))?;
    // `/dev/shm` is memory a user may write an output to; the rest of `/dev` is devices.
    let special_dir = ["/proc", "/sys", "/dev"]
        .iter()
        .find(|d| real.starts_with(d) && !real.starts_with("/dev/shm"));
    if let Some(d) = special_dir {
        return Err(format!(
            "{} is inside {d}, a special file system: choose a directory on a disk",
            real.display()
        ));
    }
    if let Some(name) = special_fs(&real) {
        return Err(format!(
            "{} is on a {name} file system, not a disk: choose another directory",
            real.display()
        ));
    }
    if real.exists() && !real.is_dir() {
        return Err(match at == abs.as_path() {
            true => "not a directory".to_string(),
            false => format!("{} is not a directory", real.display()),
        });
    }
    rustix::fs::access(&real, rustix::fs::Access::WRITE_OK).map_err(|e| {
        format!(
            "{} cannot be written by this user ({e}): choose a writable directory",
            real.display()
        )
    })
}

/// The name of the pseudo file system `p` lies on, if it is one (by `statfs`'s magic number).
fn special_fs(p: &FsPath) -> Option<&'static str> {
    let st = rustix::fs::statfs(p).ok()?;
    // From linux/magic.h.
    let magic = st.f_type as i64;
    [
        (0x9fa0, "proc"),
        (0x6265_6572, "sysfs"),
        (0x0027_e0eb, "cgroup"),
        (0x6367_7270, "cgroup2"),
        (0x6462_6720, "debugfs"),
        (0x7472_6163, "tracefs"),
        (0x7363_6673, "securityfs"),
        (0xcafe_4a11, "bpf"),
        (0x6165_676c, "pstore"),
        (0xde5e_81e4, "efivarfs"),
        (0x6265_6570, "configfs"),
        (0x1cd1, "devpts"),
    ]
    .iter()
    .find(|(m, _)| *m == magic)
    .map(|(_, name)| *name)
}

/// One process-wide in-memory store, so `memory://` outputs outlive a single run in tests.
fn memory_store() -> Arc<dyn ObjectStore> {
    static M: std::sync::OnceLock<Arc<InMemory>> = std::sync::OnceLock::new();
    M.get_or_init(|| Arc::new(InMemory::new())).clone()
}

fn absolute(p: &FsPath) -> io::Result<PathBuf> {
    if p.is_absolute() {
        Ok(p.to_path_buf())
    } else {
        Ok(std::env::current_dir()?.join(p))
    }
}

/// Resolves the `paths` of an input into concrete files: local paths and globs are expanded
/// (sorted, so file order is stable); URLs are taken as given. Every missing file or empty
/// glob is reported, all at once.
pub fn resolve_paths(input: &str, paths: &[String]) -> Result<Vec<String>, ExecError> {
    let (out, missing) = resolve_each(paths);
    if missing.is_empty() {
        Ok(out)
    } else {
        Err(ExecError::Inputs(format!(
            "input `{input}`:\n  {}",
            missing.join("\n  ")
        )))
    }
}

/// [`resolve_paths`] as the files found and one problem per path that finds none
/// (`"no/such.json: no such file"`).
pub fn resolve_each(paths: &[String]) -> (Vec<String>, Vec<String>) {
    let mut out = Vec::new();
    let mut missing = Vec::new();
    for p in paths {
        if is_url(p) && !p.starts_with("file://") {
            out.push(p.clone());
            continue;
        }
        let local = p.strip_prefix("file://").unwrap_or(p);
        if local.contains(['*', '?', '[']) {
            let mut matched: Vec<String> = match glob::glob(local) {
                Ok(g) => g
                    .filter_map(Result::ok)
                    .filter(|f| f.is_file())
                    .map(|f| f.to_string_lossy().into_owned())
                    .collect(),
                Err(e) => {
                    missing.push(format!("{p}: bad glob: {e}"));
                    continue;
                }
            };
            matched.sort();
            if matched.is_empty() {
                missing.push(format!("{p}: the pattern matches no file"));
            }
            out.extend(matched);
        } else if FsPath::new(local).is_file() {
            out.push(local.to_string());
        } else {
            missing.push(format!("{p}: {}", not_a_file(FsPath::new(local))));
        }
    }
    (out, missing)
}

/// Why a local path that is not a regular file cannot be an input: it does not exist, or what
/// it is instead (a directory, a FIFO, a socket, a device).
fn not_a_file(path: &FsPath) -> String {
    let Ok(meta) = std::fs::metadata(path) else {
        return "no such file".to_string();
    };
    let t = meta.file_type();
    let what = if t.is_dir() {
        "a directory"
    } else {
        special_kind(&t)
    };
    format!("not a regular file ({what})")
}

#[cfg(unix)]
fn special_kind(t: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_char_device() {
        "a character device"
    } else {
        "a special file"
    }
}

#[cfg(not(unix))]
fn special_kind(_: &std::fs::FileType) -> &'static str {
    "a special file"
}

#[cfg(all(test, unix))]
mod resolve_each_tests {
    use super::resolve_each;

    #[test]
    fn a_fifo_is_named_as_such_not_as_missing() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("in.fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if !made.is_ok_and(|s| s.success()) {
            eprintln!("skipping: mkfifo is not available");
            return;
        }
        let gone = dir.path().join("gone.json");
        let paths =
            [&fifo, &gone, &dir.path().to_path_buf()].map(|p| p.to_string_lossy().into_owned());
        let (ok, bad) = resolve_each(&paths);
        assert!(ok.is_empty());
        assert!(bad[0].ends_with("not a regular file (a FIFO)"), "{bad:?}");
        assert!(bad[1].ends_with("no such file"), "{bad:?}");
        assert!(
            bad[2].ends_with("not a regular file (a directory)"),
            "{bad:?}"
        );
    }
}

/// An [`distillery_ingest::Opener`] over object_store URLs, for readers running on blocking
/// threads of a tokio runtime. Local paths go straight to the file system.
pub struct StoreOpener {
    handle: Handle,
    /// One client per `scheme://bucket`, so credentials and connections are reused across
    /// the many range reads of a multistream dump.
    stores: std::sync::Mutex<std::collections::HashMap<String, Arc<dyn ObjectStore>>>,
}

impl StoreOpener {
    pub fn new(handle: Handle) -> StoreOpener {
        StoreOpener {
            handle,
            stores: Default::default(),
        }
    }

    fn split(&self, location: &str) -> io::Result<(Arc<dyn ObjectStore>, Path)> {
        let url = url::Url::parse(location)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let bucket = format!("{}://{}", url.scheme(), url.host_str().unwrap_or_default());
        let path = Path::from_url_path(url.path().trim_start_matches('/'))
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let mut stores = self.stores.lock().expect("store cache lock");
        let store = match stores.get(&bucket) {
            Some(s) => s.clone(),
            None => {
                let s = open_location(&bucket, false)
                    .map_err(io::Error::other)?
                    .store;
                stores.insert(bucket, s.clone());
                s
            }
        };
        Ok((store, path))
    }
}

fn to_io(e: object_store::Error) -> io::Error {
    match e {
        object_store::Error::NotFound { .. } => io::Error::new(io::ErrorKind::NotFound, e),
        other => io::Error::other(other),
    }
}

impl distillery_ingest::Opener for StoreOpener {
    fn open(&self, location: &str) -> io::Result<Box<dyn Read + Send>> {
        if !is_url(location) || location.starts_with("file://") {
            return distillery_ingest::LocalFs.open(location);
        }
        let (store, path) = self.split(location)?;
        let get = self.handle.block_on(store.get(&path)).map_err(to_io)?;
        let stream = get.into_stream().map_err(io::Error::other);
        Ok(Box::new(SyncIoBridge::new_with_handle(
            StreamReader::new(stream),
            self.handle.clone(),
        )))
    }

    fn size(&self, location: &str) -> io::Result<u64> {
        if !is_url(location) || location.starts_with("file://") {
            return distillery_ingest::LocalFs.size(location);
        }
        let (store, path) = self.split(location)?;
        Ok(self.handle.block_on(store.head(&path)).map_err(to_io)?.size)
    }

    fn read_range(&self, location: &str, offset: u64, len: u64) -> io::Result<Vec<u8>> {
        if !is_url(location) || location.starts_with("file://") {
            return distillery_ingest::LocalFs.read_range(location, offset, len);
        }
        let (store, path) = self.split(location)?;
        let b = self
            .handle
            .block_on(store.get_range(&path, offset..offset + len))
            .map_err(to_io)?;
        Ok(b.to_vec())
    }

    fn exists(&self, location: &str) -> bool {
        if !is_url(location) || location.starts_with("file://") {
            return distillery_ingest::LocalFs.exists(location);
        }
        self.size(location).is_ok()
    }

    fn list(&self, dir: &str) -> io::Result<Vec<String>> {
        if !is_url(dir) || dir.starts_with("file://") {
            return distillery_ingest::LocalFs.list(dir);
        }
        let loc = open_location(dir, false).map_err(io::Error::other)?;
        let items = self
            .handle
            .block_on(loc.list(""))
            .map_err(io::Error::other)?;
        Ok(items
            .into_iter()
            .filter(|(p, _)| !p.contains('/'))
            .map(|(p, _)| p)
            .collect())
    }
}
