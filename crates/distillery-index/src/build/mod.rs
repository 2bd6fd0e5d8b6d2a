//! One index build: passages spooled by shard, each shard diffed against the version
//! `CURRENT` names, only changed shards rebuilt, only new content embedded, then the
//! manifest, `CURRENT` and pruning.
//!
//! Memory: passages are spooled to local Parquet files by shard as they arrive
//! ([`Spool`]); a shard is then built in memory (its passages, vectors and HNSW graph), one
//! at a time, so a build needs the memory of its largest shard, whatever the corpus: choose
//! `shards` so that one fits. The KG is built by external sorts in bounded memory (see [`crate::kg`]).

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

use tracing::{info, warn};

use crate::IndexError;
use crate::bm25;
use crate::cache::EmbeddingCache;
use crate::dense::{self, Embedder, Vector};
use crate::kg::{self, KgBuilder};
use crate::passage::{self, Passage, Unit};
use crate::passage_parts;
use crate::version::{self, Changes, FileEntry, Manifest, Root};

pub use crate::spool::{BUCKETS, Spool, can_grow};

/// What to build.
#[derive(Debug, Clone)]
pub struct BuildSpec {
    pub bm25: bool,
    pub dense: bool,
    pub kg: bool,
    pub unit: Unit,
    /// Shards at least (exactly, unless the spool may grow: [`Spool::new`]).
    pub shards: u32,
    /// Passages per shard past which a growing build doubles its shards (0: never).
    pub max_shard_passages: u64,
    pub incremental: bool,
    pub keep_versions: usize,
    pub pipeline_hash: String,
    pub source: String,
    /// A local scratch directory (removed by the caller).
    pub scratch: PathBuf,
    /// Texts per embedding call.
    pub batch: usize,
    /// A build given only what changed: the spool holds the new passages of the touched
    /// documents, and these documents' passages (by `document_id`) leave the previous
    /// version's; the rest are kept. Needs a previous version of the same shape, else the
    /// build fails with [`IndexError::NeedsFull`].
    pub delta: Option<Arc<HashSet<String>>>,
    /// The wikis of the entity pages a corpus-fed KG was built from ([`crate::kg::KgStats`]).
    pub kg_wikis: Vec<String>,
    /// The corpus version the passages come from (recorded in the manifest).
    pub corpus: Option<String>,
}

/// What a build did, beyond its manifest.
#[derive(Debug, Clone)]
pub struct Built {
    pub manifest: Manifest,
    pub duplicates: u64,
    pub conflicting: u64,
    pub pruned: Vec<String>,
    /// The input and settings equal those of the version `CURRENT` names, which is kept: no
    /// version was written.
    pub reused: bool,
}

/// The fingerprint of a build's input and settings ([`Manifest::fingerprint`]).
fn fingerprint(
    spec: &BuildSpec,
    spool: &Spool,
    edges: Option<&KgBuilder>,
    model: Option<&dense::ModelInfo>,
) -> String {
    let (count, e) = edges.map_or((0, [0; 2]), KgBuilder::digest);
    let all = format!(
        "v1|{}{}{}|{}|{}|{:?}|{}|{:x}|{:x}|{}|{:x}|{:x}",
        spec.bm25,
        spec.dense,
        spec.kg,
        spec.unit.name(),
        spec.shards.max(1),
        model.map(|m| m.key()),
        spool.count,
        spool.sums[0],
        spool.sums[1],
        count,
        e[0],
        e[1],
    );
    format!("{:016x}", twox_hash::XxHash64::oneshot(7, all.as_bytes()))
}

/// The previous version a build may start from.
struct Previous {
    name: String,
    manifest: Manifest,
}

async fn previous(
    root: &Root,
    spec: &BuildSpec,
    model: Option<&dense::ModelInfo>,
) -> Result<Option<Previous>, IndexError> {
    if !spec.incremental {
        return Ok(None);
    }
    let Some(name) = version::current(root).await? else {
        return Ok(None);
    };
    let Some(m) = version::manifest(root, &name).await? else {
        return Ok(None);
    };
    // A previous version of another shape cannot be updated: build in full.
    let same = m.shards == spec.shards
        && m.unit == spec.unit.name()
        && (!spec.bm25 || m.kinds.iter().any(|k| k == "bm25"))
        && (!spec.dense
            || (m.kinds.iter().any(|k| k == "dense")
                && m.model.as_ref().map(|x| x.key()) == model.map(|x| x.key())));
    if !same {
        info!(previous = %name, "previous index has another shape; building in full");
        return Ok(None);
    }
    Ok(Some(Previous { name, manifest: m }))
}

fn shard_name(s: usize) -> String {
    format!("shard-{s:04}")
}

/// Builds a version from the spooled passages (and KG edges), switches `CURRENT` to it and
/// prunes old versions.
pub async fn build(
    root: &Root,
    spec: &BuildSpec,
    mut spool: Spool,
    edges: Option<KgBuilder>,
    embedder: Option<&dyn Embedder>,
    cache: Option<&EmbeddingCache>,
) -> Result<Built, IndexError> {
    // What the spool still holds stays in memory (at most `SPOOL_ROWS` passages, as while
    // spooling): writing it out only to read it back cost a Parquet round trip of the corpus.
    let model = embedder.map(|e| e.model().clone());
    if spec.dense && embedder.is_none() {
        return Err(IndexError::Invalid(
            "a dense index needs an embedding model".into(),
        ));
    }
    let current = match version::current(root).await? {
        Some(name) => version::manifest(root, &name).await?,
        None => None,
    };
    let keep = current
        .as_ref()
        .filter(|_| spec.incremental)
        .map(|m| m.shards);
    let spec = &BuildSpec {
        shards: spool.shards_for(spec, keep),
        ..spec.clone()
    };
    let print = fingerprint(spec, &spool, edges.as_ref(), model.as_ref());
    if let Some(m) = current
        && m.fingerprint == print
    {
        let name = m.version.clone();
        info!(version = %name, "index input unchanged; current version kept");
        return Ok(Built {
            duplicates: m.duplicates,
            conflicting: m.conflicting,
            manifest: m,
            pruned: Vec::new(),
            reused: true,
        });
    }
    let prev = previous(root, spec, model.as_ref()).await?;
    if spec.delta.is_some() && prev.is_none() {
        return Err(IndexError::NeedsFull(format!(
            "{}: no current version of this shape to apply the changes to",
            root.display
        )));
    }
    let name = version::new_name(&spec.source);
    let vrel = format!("versions/{name}");
    let mut m = Manifest {
        version: name.clone(),
        created: 0,
        kinds: [(spec.bm25, "bm25"), (spec.dense, "dense"), (spec.kg, "kg")]
            .iter()
            .filter(|k| k.0)
            .map(|k| k.1.to_string())
            .collect(),
        unit: spec.unit.name().to_string(),
        shards: spec.shards.max(1),
        passages: 0,
        previous: prev.as_ref().map(|p| p.name.clone()),
        changes: Changes::default(),
        shards_rebuilt: 0,
        shards_reused: 0,
        model: model.clone(),
        embedded: 0,
        embeddings_reused: 0,
        embeddings_cached: 0,
        kg: None,
        pipeline_hash: spec.pipeline_hash.clone(),
        source: spec.source.clone(),
        files: Vec::new(),
        duplicates: 0,
        conflicting: 0,
        fingerprint: print,
        corpus: spec.corpus.clone(),
    };
    // A build that fails leaves nothing under its version: readers never see it (it has no
    // manifest), but a retried build would otherwise pile up partial copies of the index.
    let written = async {
        let (mut duplicates, mut conflicting) = (0, 0);
        for s in 0..spec.shards as usize {
            let (ps, (d, c)) = spool.take(s, spec.shards)?;
            duplicates += d;
            conflicting += c;
            let cx = ShardCx {
                root,
                spec,
                vrel: &vrel,
                s,
                prev: prev.as_ref(),
                embedder,
                cache,
            };
            let files = cx.build(ps, &mut m).await?;
            m.files.extend(files);
        }
        if spec.kg {
            let kg = match edges {
                Some(kg) => kg,
                None => KgBuilder::new(&spec.scratch.join("kg"), kg::SORT_MEMORY)?,
            };
            let dir = kg.dir().to_path_buf();
            let (mut stats, names) = kg.finish().await?;
            stats.wikis = spec.kg_wikis.clone();
            m.files
                .extend(root.upload(&dir, &format!("{vrel}/kg"), &names).await?);
            m.kg = Some(stats);
        }
        for f in &mut m.files {
            f.path = f
                .path
                .strip_prefix(&format!("{vrel}/"))
                .unwrap_or(&f.path)
                .to_string();
        }
        m.created = version::now_secs();
        (m.duplicates, m.conflicting) = (duplicates, conflicting);
        let body = serde_json::to_vec_pretty(&m).map_err(|e| IndexError::Invalid(e.to_string()))?;
        root.put(&format!("{vrel}/manifest.json"), body).await?;
        Ok::<_, IndexError>((duplicates, conflicting))
    }
    .await;
    let (duplicates, conflicting) = match written {
        Ok(counts) => counts,
        Err(e) => {
            if let Err(gone) = version::remove(root, &name).await {
                warn!(version = %name, error = %gone, "failed build's version not removed");
            }
            return Err(e);
        }
    };
    version::switch(root, &name).await?;
    let pruned = version::prune(root, spec.keep_versions).await?;
    info!(
        version = %name,
        passages = m.passages,
        added = m.changes.added,
        changed = m.changes.changed,
        deleted = m.changes.deleted,
        embedded = m.embedded,
        "index version switched"
    );
    Ok(Built {
        manifest: m,
        duplicates,
        conflicting,
        pruned,
        reused: false,
    })
}

/// One shard's build.
struct ShardCx<'a> {
    root: &'a Root,
    spec: &'a BuildSpec,
    vrel: &'a str,
    s: usize,
    prev: Option<&'a Previous>,
    embedder: Option<&'a dyn Embedder>,
    cache: Option<&'a EmbeddingCache>,
}

impl ShardCx<'_> {
    fn local(&self, what: &str) -> PathBuf {
        self.spec.scratch.join(what).join(shard_name(self.s))
    }

    /// The previous version's passage parts of shard `sn`, downloaded into the scratch
    /// (`prev/.../passages`); none without a previous version.
    async fn prev_parts(&self, sn: &str) -> Result<Vec<passage_parts::PartName>, IndexError> {
        let Some(p) = self.prev else {
            return Ok(Vec::new());
        };
        let paths: Vec<String> = p.manifest.files.iter().map(|f| f.path.clone()).collect();
        let parts = passage_parts::of_shard(passage_parts::names_in(&paths), sn);
        let dir = self.local("prev").join("passages");
        for part in &parts {
            for name in std::iter::once(&part.table).chain(&part.gone) {
                self.root
                    .download(
                        &format!("versions/{}/passages/{name}", p.name),
                        &dir.join(name),
                    )
                    .await?;
            }
        }
        Ok(parts)
    }

    /// Names the previous version's passage parts in this one (copies inside the root).
    async fn copy_parts(
        &self,
        parts: &[passage_parts::PartName],
    ) -> Result<Vec<FileEntry>, IndexError> {
        let Some(p) = self.prev else {
            return Ok(Vec::new());
        };
        let mut files = Vec::new();
        for part in parts {
            for name in std::iter::once(&part.table).chain(&part.gone) {
                let rel = format!("passages/{name}");
                let bytes = (p.manifest.files.iter())
                    .find(|f| f.path == rel)
                    .map_or(0, |f| f.bytes);
                (self.root)
                    .copy(
                        &format!("versions/{}/{rel}", p.name),
                        &format!("{}/{rel}", self.vrel),
                    )
                    .await?;
                files.push(FileEntry {
                    path: format!("{}/{rel}", self.vrel),
                    bytes,
                });
            }
        }
        Ok(files)
    }

    async fn build(
        &self,
        ps: Vec<Passage>,
        m: &mut Manifest,
    ) -> Result<Vec<FileEntry>, IndexError> {
        let sn = shard_name(self.s);
        let parts = self.prev_parts(&sn).await?;
        let pdir_prev = self.local("prev").join("passages");
        let next = parts.last().map_or(0, |p| p.n) + 1;
        // A night fed a corpus delta writes only its own part of the shard's passages (BM25
        // alone: a dense index rewrites its vectors table from every passage anyway), until
        // the shard holds MAX_DELTAS of them; otherwise the shard's table is written whole.
        let in_parts = self.spec.delta.is_some()
            && !self.spec.dense
            && !parts.is_empty()
            && next <= passage_parts::MAX_DELTAS;
        let mut untouched = 0u64;
        // The previous version's passages of this shard, by id: every one, or (in parts) the
        // touched documents' and those the night writes again.
        let (ps, old) = match (&self.spec.delta, self.prev) {
            (Some(removed), Some(_)) if in_parts => {
                let new: HashSet<&str> = ps.iter().map(|p| p.id.as_str()).collect();
                let mut old = HashMap::new();
                let live = passage_parts::for_each_live(&pdir_prev, &parts, |r, i| {
                    let id = r.id.value(i);
                    if new.contains(id)
                        || removed.contains(passage::page_of(r.document_id.value(i)))
                    {
                        old.insert(id.to_string(), r.passage(i));
                    }
                    Ok(())
                })?;
                drop(new);
                untouched = live - old.len() as u64;
                let mut ps = ps;
                ps.sort_unstable_by(|a, b| a.id.cmp(&b.id));
                (ps, Some(old))
            }
            (_, Some(_)) => {
                let mut old: HashMap<String, Passage> = HashMap::new();
                passage_parts::for_each_live(&pdir_prev, &parts, |r, i| {
                    old.insert(r.id.value(i).to_string(), r.passage(i));
                    Ok(())
                })?;
                // A delta build: the previous passages of untouched documents, with the new
                // ones.
                let ps = match &self.spec.delta {
                    Some(removed) => {
                        let new: HashSet<&str> = ps.iter().map(|p| p.id.as_str()).collect();
                        let mut all: Vec<Passage> = old
                            .values()
                            .filter(|p| {
                                !removed.contains(passage::page_of(&p.document_id))
                                    && !new.contains(p.id.as_str())
                            })
                            .cloned()
                            .collect();
                        drop(new);
                        all.extend(ps);
                        all.sort_unstable_by(|a, b| a.id.cmp(&b.id));
                        all
                    }
                    None => ps,
                };
                (ps, Some(old))
            }
            (_, None) => (ps, None),
        };
        m.passages += untouched;
        m.changes.unchanged += untouched;
        m.passages += ps.len() as u64;
        // The previous passages to remove (changed or gone), as the old version holds them.
        let mut removed: Vec<&Passage> = Vec::new();
        let mut added: Vec<&Passage> = Vec::new();
        // The same text at another revision: its BM25 entry names the revision, so it is
        // replaced there; its vector stays.
        let mut relabeled: Vec<(&Passage, &Passage)> = Vec::new();
        let mut gone_ids: Vec<&str> = Vec::new();
        if let Some(old) = &old {
            let now: HashSet<&str> = ps.iter().map(|p| p.id.as_str()).collect();
            for p in &ps {
                match old.get(&p.id) {
                    None => {
                        m.changes.added += 1;
                        added.push(p);
                    }
                    Some(o) if o.content_hash != p.content_hash => {
                        m.changes.changed += 1;
                        removed.push(o);
                        added.push(p);
                    }
                    Some(o) if (o.page_id, o.revision_id) != (p.page_id, p.revision_id) => {
                        m.changes.unchanged += 1;
                        relabeled.push((o, p));
                    }
                    Some(_) => m.changes.unchanged += 1,
                }
            }
            let mut gone: Vec<&Passage> = old
                .values()
                .filter(|o| !now.contains(o.id.as_str()))
                .collect();
            gone.sort_unstable_by(|a, b| a.id.cmp(&b.id));
            m.changes.deleted += gone.len() as u64;
            gone_ids.extend(gone.iter().map(|p| p.id.as_str()));
            removed.extend(gone);
        } else {
            m.changes.added += ps.len() as u64;
        }
        let mut files = Vec::new();
        let pdir = self.local("passages");
        if in_parts {
            files.extend(self.copy_parts(&parts).await?);
            let mut fresh: Vec<Passage> = added
                .iter()
                .copied()
                .chain(relabeled.iter().map(|r| r.1))
                .cloned()
                .collect();
            fresh.sort_unstable_by(|a, b| a.id.cmp(&b.id));
            let (table, gone_file) = passage_parts::delta_names(&sn, next);
            let mut names = Vec::new();
            if !fresh.is_empty() {
                passage::write(&pdir.join(&table), &fresh)?;
                names.push(table);
            }
            if !gone_ids.is_empty() {
                std::fs::create_dir_all(&pdir).map_err(|e| IndexError::io(pdir.display(), e))?;
                passage_parts::write_gone(&pdir.join(&gone_file), &gone_ids)?;
                names.push(gone_file);
            }
            files.extend(
                (self.root)
                    .upload(&pdir, &format!("{}/passages", self.vrel), &names)
                    .await?,
            );
        } else {
            passage::write(&pdir.join(format!("{sn}.parquet")), &ps)?;
            files.extend(
                self.root
                    .upload(
                        &pdir,
                        &format!("{}/passages", self.vrel),
                        &[format!("{sn}.parquet")],
                    )
                    .await?,
            );
        }

        if let (Some(p), true) = (
            self.prev,
            removed.is_empty() && added.is_empty() && relabeled.is_empty(),
        ) {
            // Nothing changed in this shard: its files are the previous version's.
            for f in p
                .manifest
                .files
                .iter()
                .filter(|f| is_shard_file(&f.path, &sn))
            {
                self.root
                    .copy(
                        &format!("versions/{}/{}", p.name, f.path),
                        &format!("{}/{}", self.vrel, f.path),
                    )
                    .await?;
                files.push(FileEntry {
                    path: format!("{}/{}", self.vrel, f.path),
                    bytes: f.bytes,
                });
            }
            if let Some(e) = self.embedder
                && let Some(pm) = &p.manifest.model
                && pm.key() == e.model().key()
            {
                m.embeddings_reused += ps.len() as u64;
            }
            m.shards_reused += 1;
            return Ok(files);
        }
        m.shards_rebuilt += 1;
        if self.spec.bm25 {
            let gone: Vec<&Passage> = removed
                .iter()
                .copied()
                .chain(relabeled.iter().map(|r| r.0))
                .collect();
            let new: Vec<&Passage> = added
                .iter()
                .copied()
                .chain(relabeled.iter().map(|r| r.1))
                .collect();
            files.extend(self.bm25(&ps, &gone, &new).await?);
        }
        if self.spec.dense {
            let ids: Vec<&str> = removed.iter().map(|p| p.id.as_str()).collect();
            files.extend(self.dense(&ps, &ids, &added, m).await?);
        }
        Ok(files)
    }

    async fn bm25(
        &self,
        ps: &[Passage],
        removed: &[&Passage],
        added: &[&Passage],
    ) -> Result<Vec<FileEntry>, IndexError> {
        let sn = shard_name(self.s);
        let dir = self.local("bm25");
        match self.prev {
            Some(p) => {
                let prefix = format!("bm25/{sn}/");
                for f in p
                    .manifest
                    .files
                    .iter()
                    .filter(|f| f.path.starts_with(&prefix))
                {
                    let name = &f.path[prefix.len()..];
                    self.root
                        .download(&format!("versions/{}/{}", p.name, f.path), &dir.join(name))
                        .await?;
                }
                bm25::update(&dir, removed, added)?;
            }
            None => bm25::build(&dir, &ps.iter().collect::<Vec<_>>())?,
        }
        // Segment files (named by segment id, never rewritten) the previous version has are
        // copied inside the root (a hard link on local disk); the rest is uploaded.
        let prefix = format!("bm25/{sn}/");
        let kept: HashMap<&str, u64> = self.prev.map_or_else(HashMap::new, |p| {
            (p.manifest.files.iter())
                .filter_map(|f| Some((f.path.strip_prefix(&prefix)?, f.bytes)))
                .filter(|(name, _)| bm25::is_segment_file(name))
                .collect()
        });
        let (mut copied, mut fresh) = (Vec::new(), Vec::new());
        for name in bm25::files(&dir)? {
            match (self.prev, kept.get(name.as_str())) {
                (Some(p), Some(&bytes)) => {
                    let rel = format!("{}/bm25/{sn}/{name}", self.vrel);
                    (self.root)
                        .copy(&format!("versions/{}/{prefix}{name}", p.name), &rel)
                        .await?;
                    copied.push(FileEntry { path: rel, bytes });
                }
                _ => fresh.push(name),
            }
        }
        let mut files = (self.root)
            .upload(&dir, &format!("{}/bm25/{sn}", self.vrel), &fresh)
            .await?;
        files.extend(copied);
        files.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(files)
    }

    async fn dense(
        &self,
        ps: &[Passage],
        removed: &[&str],
        added: &[&Passage],
        m: &mut Manifest,
    ) -> Result<Vec<FileEntry>, IndexError> {
        let Some(embedder) = self.embedder else {
            return Ok(Vec::new());
        };
        let sn = shard_name(self.s);
        let dim = embedder.model().dimension;
        // Vectors by content hash: the previous version's, then the cache's, then new ones.
        let mut have: HashMap<String, Vec<f32>> = HashMap::new();
        let prev_ann = self.local("prev").join("ann.usearch");
        if let Some(p) = self.prev {
            let t = self.local("prev").join("embeddings.parquet");
            self.root
                .download(&format!("versions/{}/embeddings/{sn}.parquet", p.name), &t)
                .await?;
            self.root
                .download(&format!("versions/{}/ann/{sn}.usearch", p.name), &prev_ann)
                .await?;
            let wanted: HashSet<&str> = ps.iter().map(|p| p.content_hash.as_str()).collect();
            have = dense::by_hash(dense::read_vectors(&t)?.1, &wanted);
            m.embeddings_reused += ps
                .iter()
                .filter(|p| have.contains_key(&p.content_hash))
                .count() as u64;
        }
        let mut missing: Vec<&Passage> = Vec::new();
        let mut seen = HashSet::new();
        for p in ps {
            if !have.contains_key(&p.content_hash) && seen.insert(p.content_hash.as_str()) {
                missing.push(p);
            }
        }
        if let Some(c) = self.cache
            && !missing.is_empty()
        {
            let hs: Vec<&str> = missing.iter().map(|p| p.content_hash.as_str()).collect();
            let got = c.lookup(&hs).await?;
            m.embeddings_cached += ps
                .iter()
                .filter(|p| got.contains_key(&p.content_hash))
                .count() as u64;
            missing.retain(|p| !got.contains_key(&p.content_hash));
            have.extend(got);
        }
        // Texts of similar length share a batch: less padding in each forward pass.
        missing.sort_by_key(|p| (p.title.len() + p.text.len(), p.id.as_str()));
        let mut fresh = Vec::new();
        for chunk in missing.chunks(self.spec.batch.max(1)) {
            let texts: Vec<String> = chunk.iter().map(|p| p.embed_text()).collect();
            let vs = embedder.embed(&texts).await?;
            if vs.len() != chunk.len() || vs.iter().any(|v| v.len() != dim) {
                return Err(IndexError::Embed(format!(
                    "asked for {} vectors of dimension {dim}, got {} (dimension {})",
                    chunk.len(),
                    vs.len(),
                    vs.first().map_or(0, Vec::len)
                )));
            }
            for (p, mut v) in chunk.iter().zip(vs) {
                dense::normalize(&mut v);
                fresh.push((p.content_hash.clone(), v));
            }
        }
        let new: HashSet<&str> = fresh.iter().map(|f| f.0.as_str()).collect();
        m.embedded += ps
            .iter()
            .filter(|p| new.contains(p.content_hash.as_str()))
            .count() as u64;
        if let Some(c) = self.cache
            && !fresh.is_empty()
        {
            c.store(&fresh).await?;
        }
        have.extend(fresh);
        let rows: Vec<Vector> = ps
            .iter()
            .map(|p| Vector {
                id: p.id.clone(),
                content_hash: p.content_hash.clone(),
                vector: have[&p.content_hash].clone(),
            })
            .collect();
        let edir = self.local("embeddings");
        let adir = self.local("ann");
        dense::write_vectors(&edir.join(format!("{sn}.parquet")), dim, &rows)?;
        let ann = adir.join(format!("{sn}.usearch"));
        if self.prev.is_some() {
            let ids: HashSet<&str> = added.iter().map(|p| p.id.as_str()).collect();
            let new: Vec<&Vector> = rows
                .iter()
                .filter(|r| ids.contains(r.id.as_str()))
                .collect();
            dense::update_ann(&prev_ann, &ann, dim, removed, &new)?;
        } else {
            dense::build_ann(&ann, dim, &rows.iter().collect::<Vec<_>>())?;
        }
        let mut files = self
            .root
            .upload(
                &edir,
                &format!("{}/embeddings", self.vrel),
                &[format!("{sn}.parquet")],
            )
            .await?;
        files.extend(
            self.root
                .upload(
                    &adir,
                    &format!("{}/ann", self.vrel),
                    &[format!("{sn}.usearch")],
                )
                .await?,
        );
        Ok(files)
    }
}

/// Whether a version file belongs to shard `sn` of the BM25 or dense index.
fn is_shard_file(path: &str, sn: &str) -> bool {
    path.starts_with(&format!("bm25/{sn}/"))
        || path == format!("embeddings/{sn}.parquet")
        || path == format!("ann/{sn}.usearch")
}

#[cfg(test)]
mod tests;
