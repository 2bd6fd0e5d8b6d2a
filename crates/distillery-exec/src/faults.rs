//! An object-store fault layer for failure drills and tests: with
//! `DISTILLERY_FAULT_STORE_WRITES=N` in the environment, the first `N` writes (puts and
//! multipart uploads) of this process through any opened location fail with a transient
//! error, as a flaky S3 would. Without it, locations use their store directly.
//! [`without_conditional_put`] makes a store answer create-only puts as an S3-compatible
//! server without conditional writes does (for tests of [`crate::lock`]'s fallback).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyMode, CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta,
    ObjectStore, PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions,
    Result,
};

/// Environment variable: how many writes fail.
pub const FAULT_WRITES_ENV: &str = "DISTILLERY_FAULT_STORE_WRITES";

fn budget() -> Option<&'static AtomicU64> {
    static LEFT: OnceLock<Option<AtomicU64>> = OnceLock::new();
    LEFT.get_or_init(|| {
        std::env::var(FAULT_WRITES_ENV)
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .filter(|n| *n > 0)
            .map(AtomicU64::new)
    })
    .as_ref()
}

/// Wraps a store in the fault layer when the environment asks for one.
pub fn wrap(store: Arc<dyn ObjectStore>) -> Arc<dyn ObjectStore> {
    match budget() {
        Some(_) => Arc::new(FaultyStore {
            inner: store,
            no_conditional_put: false,
        }),
        None => store,
    }
}

/// `store`, but conditional writes (a put with `PutMode::Create` or `PutMode::Update`, a
/// copy with `CopyMode::Create`) fail as not implemented.
pub fn without_conditional_put(store: Arc<dyn ObjectStore>) -> Arc<dyn ObjectStore> {
    Arc::new(FaultyStore {
        inner: store,
        no_conditional_put: true,
    })
}

/// A store whose first writes fail (and, if asked, that has no create-only put).
#[derive(Debug)]
pub struct FaultyStore {
    inner: Arc<dyn ObjectStore>,
    no_conditional_put: bool,
}

impl std::fmt::Display for FaultyStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FaultyStore({})", self.inner)
    }
}

fn inject(location: &Path) -> Result<()> {
    if let Some(left) = budget()
        && left
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    {
        tracing::warn!(path = %location, "injected object-store write failure");
        return Err(object_store::Error::Generic {
            store: "fault-layer",
            source: format!("injected write failure at {location}").into(),
        });
    }
    Ok(())
}

#[async_trait]
impl ObjectStore for FaultyStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        inject(location)?;
        if self.no_conditional_put && opts.mode != PutMode::Overwrite {
            return Err(object_store::Error::NotImplemented {
                operation: format!("put with {:?}", opts.mode),
                implementer: self.to_string(),
            });
        }
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        inject(location)?;
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.inner.get_opts(location, options).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        if self.no_conditional_put && options.mode == CopyMode::Create {
            return Err(object_store::Error::NotImplemented {
                operation: "copy with CopyMode::Create".to_string(),
                implementer: self.to_string(),
            });
        }
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        self.inner.rename_opts(from, to, options).await
    }
}
