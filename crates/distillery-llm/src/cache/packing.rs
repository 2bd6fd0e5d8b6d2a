//! Packing: loose entries gathered into packs ([`ResponseCache::pack`]), written under names
//! no other writer uses and created only if absent.

use std::sync::atomic::Ordering;

use futures::StreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};

use super::{CacheEntry, PACK_BYTES, PACK_ENTRIES, PACK_EXT, PACKS, PackReport, ResponseCache};
use crate::LlmError;

impl ResponseCache {
    /// Packs the loose entries: reads every `PREFIX/<fan>/<digest>.json`, writes them into
    /// new packs (at most [`PACK_ENTRIES`] entries and about [`PACK_BYTES`] each, named
    /// uniquely for this writer and created only if absent), and then, unless `keep_loose`,
    /// removes each loose object that has not changed since it was read. Loose entries a
    /// pack already holds unchanged are not packed again. Safe while other workers read and
    /// write the cache, and while other packers run (see the module docs).
    pub async fn pack(&self, keep_loose: bool) -> Result<PackReport, LlmError> {
        self.refresh_packs(self.packs.started.load(Ordering::Acquire))
            .await?;
        let root = if self.prefix.is_empty() {
            None
        } else {
            Some(Path::from(self.prefix.as_str()))
        };
        let mut loose = Vec::new();
        let mut list = self.store.list(root.as_ref());
        while let Some(m) = list.next().await {
            let m = m.map_err(|e| Self::err(root.as_ref().unwrap_or(&Path::from("")), e))?;
            if self.is_loose(&m.location) {
                loose.push(m.location);
            }
        }
        loose.sort();
        let mut report = PackReport {
            loose: loose.len(),
            ..Default::default()
        };
        // Each loose entry: its path, its e_tag when read, its digest and bytes.
        let read = futures::stream::iter(loose.into_iter().map(|path| async move {
            let got = match self.store.get(&path).await {
                Ok(g) => g,
                // Removed since it was listed (by another packer): nothing to do.
                Err(object_store::Error::NotFound { .. }) => return Ok(None),
                Err(e) => return Err(Self::err(&path, e)),
            };
            let meta = got.meta.clone();
            let bytes = got.bytes().await.map_err(|e| Self::err(&path, e))?;
            let entry: CacheEntry = serde_json::from_slice(&bytes)
                .map_err(|e| Self::err(&path, format!("not a cache entry: {e}")))?;
            Ok::<_, LlmError>(Some((path, meta, entry, bytes)))
        }))
        .buffered(32)
        .collect::<Vec<_>>()
        .await;
        let mut batch: Vec<(String, Vec<u8>)> = Vec::new();
        let mut batch_bytes = 0;
        let mut pending = Vec::new();
        let mut packed_paths = Vec::new();
        let tag = writer_tag();
        let mut read = read.into_iter().peekable();
        while let Some(r) = read.next() {
            if let Some((path, meta, entry, bytes)) = r? {
                let digest = entry.key.digest();
                if self.packed(&digest, &entry.key).as_deref() == Some(&entry) {
                    report.already_packed += 1;
                    packed_paths.push((path, meta));
                } else {
                    batch_bytes += bytes.len();
                    batch.push((digest, bytes.to_vec()));
                    pending.push((path, meta, entry));
                }
            }
            let full = batch.len() >= PACK_ENTRIES || batch_bytes >= PACK_BYTES;
            if !batch.is_empty() && (full || read.peek().is_none()) {
                let done = self.write_pack(&tag, &mut report, &mut batch, &mut pending);
                packed_paths.extend(done.await?);
                batch_bytes = 0;
            }
        }
        if !keep_loose {
            let removed =
                futures::stream::iter(packed_paths.into_iter().map(|(path, meta)| async move {
                    // Removed only as it was packed: an overwrite since (a re-asked refusal,
                    // a re-parse) keeps its loose object, which lookups prefer.
                    match self.store.head(&path).await {
                        Ok(now) if now.e_tag == meta.e_tag && now.size == meta.size => {}
                        Ok(_) => return Ok(false),
                        Err(object_store::Error::NotFound { .. }) => return Ok(true),
                        Err(e) => return Err(Self::err(&path, e)),
                    }
                    match self.store.delete(&path).await {
                        Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(true),
                        Err(e) => Err(Self::err(&path, e)),
                    }
                }))
                .buffered(32)
                .collect::<Vec<_>>()
                .await;
            for r in removed {
                if r? {
                    report.removed += 1;
                } else {
                    report.changed += 1;
                }
            }
        }
        Ok(report)
    }

    /// Writes one pack of `batch` (create-if-absent, under a name no other writer uses) and
    /// holds its entries in memory; the loose objects it packed (to remove), as they were read.
    async fn write_pack(
        &self,
        tag: &str,
        report: &mut PackReport,
        batch: &mut Vec<(String, Vec<u8>)>,
        pending: &mut Vec<(Path, object_store::ObjectMeta, CacheEntry)>,
    ) -> Result<Vec<(Path, object_store::ObjectMeta)>, LlmError> {
        let path = self.under(&format!(
            "{PACKS}/{tag}-{:05}{PACK_EXT}",
            report.packs.len()
        ));
        let body = crate::pack::encode(batch);
        let opts = PutOptions {
            mode: PutMode::Create,
            ..Default::default()
        };
        self.store
            .put_opts(&path, PutPayload::from(body), opts)
            .await
            .map_err(|e| Self::err(&path, e))?;
        let mut loaded = self.packs.loaded.lock().await;
        loaded.insert(path.to_string());
        drop(loaded);
        report.packed += batch.len();
        report.packs.push(path.to_string());
        batch.clear();
        let (paths, entries): (Vec<_>, Vec<_>) =
            pending.drain(..).map(|(p, m, e)| ((p, m), e)).unzip();
        self.hold(entries);
        Ok(paths)
    }

    /// Whether `p` is a loose entry: `PREFIX/<2 chars>/<name>.json`.
    fn is_loose(&self, p: &Path) -> bool {
        let parts: Vec<_> = p.parts().collect();
        let skip = if self.prefix.is_empty() {
            0
        } else {
            self.prefix.split('/').count()
        };
        parts.len() == skip + 2
            && parts[skip].as_ref().len() == 2
            && parts[skip].as_ref() != PACKS
            && parts[skip + 1].as_ref().ends_with(".json")
    }
}

/// A name part no other writer uses: the time in milliseconds, the process id and 64
/// random bits.
fn writer_tag() -> String {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    format!(
        "{ms:013}-{:08x}-{:016x}",
        std::process::id(),
        fastrand::u64(..)
    )
}
