//! Retrieval from a built index (`distillery search`, the `cirag` stage): a root's version
//! opened once (downloaded to a local cache when the root is remote), queries embedded with
//! the model the version was built with, and hits as the triple extractor's passages.

use std::path::PathBuf;
use std::sync::Arc;

use distillery_core::spec::StageCheck;
use distillery_distill::cirag::{Fut, Retriever};
use distillery_index::IndexError;
use distillery_index::dense::Embedder;
use distillery_index::search::{Hit, Retrieval, Searcher};
use distillery_index::version::{self, Root};
use distillery_triples::Passage;
use distillery_triples::align::SentenceSpan;

use crate::contract::ShardOutput;
use crate::error::ExecError;
use crate::kit::contexts::published;
use crate::kit::embedding;

/// Where versions of remote roots are downloaded for reading: `$XDG_CACHE_HOME/distillery/
/// index`, else `~/.cache/distillery/index`.
pub fn cache_dir() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir)
        .join("distillery")
        .join("index")
}

/// The index root at a location, as the index crate sees it.
pub fn root_of(loc: crate::store::Location) -> Root {
    Root {
        store: loc.store,
        prefix: loc.root,
        display: loc.display,
        local_dir: loc.local_dir,
    }
}

/// One version of an index, opened for queries.
pub struct IndexRetriever {
    searcher: Searcher,
    model: Option<Arc<dyn Embedder>>,
    how: Retrieval,
    /// The page revision of each document a hit came from (`Retriever::revision`).
    revisions: std::sync::Mutex<std::collections::HashMap<String, String>>,
}

impl std::fmt::Debug for IndexRetriever {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IndexRetriever")
            .field("version", &self.searcher.version())
            .field("how", &self.how)
            .finish()
    }
}

impl IndexRetriever {
    /// Opens `version` of `root` (default: the one `CURRENT` names) for `how` queries; dense
    /// and hybrid load the version's embedding model.
    pub async fn open(
        root: &Root,
        version: Option<&str>,
        how: Retrieval,
    ) -> Result<IndexRetriever, ExecError> {
        let opened = version::open(root, version, &cache_dir()).await?;
        let searcher = Searcher::open(opened)?;
        let model = if how.needs_vector() {
            let info = searcher.manifest().model.clone().ok_or_else(|| {
                ExecError::Task(format!(
                    "{}: version {} has no dense index (build it with kinds = [\"dense\"])",
                    root.display,
                    searcher.version()
                ))
            })?;
            Some(embedding::open_for(&info).await?)
        } else {
            None
        };
        Ok(IndexRetriever {
            searcher,
            model,
            how,
            revisions: Default::default(),
        })
    }

    pub fn version(&self) -> &str {
        self.searcher.version()
    }

    /// Passages in the version.
    pub fn passages(&self) -> u64 {
        self.searcher.manifest().passages
    }

    /// The `k` best hits for `query`.
    pub async fn search(&self, query: &str, k: usize) -> Result<Vec<Hit>, IndexError> {
        let vector = match &self.model {
            Some(m) => m
                .embed(std::slice::from_ref(&query.to_string()))
                .await?
                .pop(),
            None => None,
        };
        self.searcher.search(self.how, query, vector.as_deref(), k)
    }
}

impl Retriever for IndexRetriever {
    fn retrieve<'a>(&'a self, query: &'a str, k: usize) -> Fut<'a, Vec<Passage>> {
        Box::pin(async move {
            let hits = self.search(query, k).await?;
            let mut seen = self.revisions.lock().unwrap_or_else(|e| e.into_inner());
            for h in &hits {
                let rev = h.revision_id.map(|r| r.to_string());
                let r = distillery_core::page_revision(&h.document_id, h.page_id, rev.as_deref());
                if !r.is_empty() {
                    seen.insert(h.document_id.clone(), r);
                }
            }
            Ok(hits.iter().map(passage_of).collect())
        })
    }

    fn revision(&self, document_id: &str) -> String {
        let seen = self.revisions.lock().unwrap_or_else(|e| e.into_inner());
        seen.get(document_id).cloned().unwrap_or_default()
    }
}

/// A hit as the triple extractor's passage: its document, its position in the document (the
/// `N` of an id ending `#pN`), its sentences split again (numbered within the passage).
pub fn passage_of(h: &Hit) -> Passage {
    let index =
        h.id.rsplit_once('#')
            .and_then(|(_, tag)| tag.get(1..)?.parse().ok())
            .unwrap_or(0);
    let chars: Vec<char> = h.text.chars().collect();
    let mut sentences: Vec<SentenceSpan> = distillery_ingest::text::sentence_spans(&h.text)
        .into_iter()
        .enumerate()
        .map(|(i, (a, b))| SentenceSpan {
            index: i as u32,
            start: a,
            end: b,
            text: chars[a as usize..b as usize].iter().collect(),
        })
        .collect();
    if sentences.is_empty() {
        sentences.push(SentenceSpan {
            index: u32::MAX,
            start: 0,
            end: chars.len() as u32,
            text: h.text.clone(),
        });
    }
    Passage {
        document_id: h.document_id.clone(),
        title: h.title.clone(),
        source: String::new(),
        index,
        start: 0,
        text: h.text.clone(),
        sentences,
        piece: None,
    }
}

/// Checks an `index` option that names a built index: an `index` stage listed before this
/// one (read at the version it builds, so no `index_version` with it), or else an index root.
pub fn check_index(cx: &mut StageCheck<'_, '_>, name: &str, with_version: bool) {
    match cx.earlier_kind(name) {
        Some(kind) if kind != "index" => {
            cx.error("index", format!("stage `{name}` is not an `index` stage"))
        }
        Some(_) if with_version => cx.error(
            "index_version",
            "an index built in this job is read at the version it built",
        ),
        Some(_) => {}
        None if cx
            .stages
            .iter()
            .any(|v| v.get("name").and_then(|n| n.as_str()) == Some(name)) =>
        {
            cx.error(
                "index",
                format!("stage `{name}` must be listed before this one"),
            )
        }
        None => {}
    }
}

/// The root and version of the index an `index` option names: the version an `index` stage
/// listed before this one built in this job, else the root at `version` (`None`: the one its
/// `CURRENT` names).
pub async fn index_root(
    cx: &crate::contract::RunCx<'_>,
    index: &str,
    version: Option<&str>,
) -> Result<(Root, Option<String>), ExecError> {
    let built_here = (cx.pipeline.stages.iter())
        .take_while(|s| s.name != cx.stage.name)
        .any(|s| s.name == index && s.kind == "index");
    let (root, version) = if built_here {
        let (root, version) = built_by(cx.out, cx.upstream, index).await?;
        (root, Some(version))
    } else {
        (index.to_string(), version.map(str::to_string))
    };
    Ok((root_of(crate::store::open_location(&root, false)?), version))
}

/// The root and version an `index` stage listed before this one built (its published
/// `indexes/<stage>.json`).
pub async fn built_by(
    out: &crate::store::Location,
    upstream: &[ShardOutput],
    stage: &str,
) -> Result<(String, String), ExecError> {
    let file = format!("indexes/{stage}.json");
    let Some(dir) = published(upstream, &file) else {
        return Err(ExecError::Task(format!(
            "`index = \"{stage}\"`: no task below this one published {file}"
        )));
    };
    let path = format!("{dir}/{file}");
    let body = out.read(&path).await?;
    let v: serde_json::Value = serde_json::from_slice(&body)
        .map_err(|e| ExecError::Task(format!("{}: {e}", out.show(&path))))?;
    match (v["root"].as_str(), v["version"].as_str()) {
        (Some(root), Some(version)) => Ok((root.to_string(), version.to_string())),
        _ => Err(ExecError::Task(format!(
            "{}: no `root` and `version`",
            out.show(&path)
        ))),
    }
}
