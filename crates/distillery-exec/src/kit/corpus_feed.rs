//! An index fed by a corpus root: the passages of its current version, or, when the index was
//! built from an earlier version of it, only those of the pages changed since
//! ([`distillery_index::corpus::delta_since`]); and the Wikidata pages of its current version
//! (documents of the `entity_documents` reader option), which a KG index reads whole.

use std::collections::HashSet;
use std::sync::Arc;

use distillery_core::Document;
use distillery_index::build::Spool;
use distillery_index::corpus::{self, LiveView, Manifest};
use distillery_index::passage::{self, Unit};
use distillery_index::version::{self, Root};
use distillery_ingest::mediawiki::ENTITY_DATASET;

use crate::error::ExecError;
use crate::kit::retrieval::root_of;
use crate::store::open_location;

/// A corpus root's current version, and what an index needs of it.
pub struct Feed {
    pub root: Root,
    pub current: Manifest,
    /// The corpus version the index's current version was built from.
    pub built_from: Option<String>,
}

/// What [`Feed::fill`] read.
#[derive(Debug, Default)]
pub struct Filled {
    pub documents: u64,
    pub bytes: u64,
    /// The documents whose previous passages leave the index (a delta), or `None` (all).
    pub removed: Option<Arc<HashSet<String>>>,
}

impl Feed {
    /// Opens the corpus root `url` for the index root `index`.
    pub async fn open(url: &str, index: &Root) -> Result<Feed, ExecError> {
        let root = root_of(open_location(url, false)?);
        let current = corpus::current(&root).await?.ok_or_else(|| {
            ExecError::Task(format!(
                "corpus root {}: no CURRENT version (run a `corpus` stage first)",
                root.display
            ))
        })?;
        let built_from = match version::current(index).await? {
            Some(v) => version::manifest(index, &v).await?.and_then(|m| m.corpus),
            None => None,
        };
        Ok(Feed {
            root,
            current,
            built_from,
        })
    }

    /// Whether the index's current version was built from the corpus's current version.
    pub fn unchanged(&self) -> bool {
        self.built_from.as_deref() == Some(self.current.version.as_str())
    }

    /// Spools the passages of the corpus's current version at `unit`: with `delta`, and an
    /// index built from an ancestor version, only the touched pages'.
    pub async fn fill(
        &self,
        spool: &mut Spool,
        unit: Unit,
        delta: bool,
    ) -> Result<Filled, ExecError> {
        let d = match (&self.built_from, delta) {
            (Some(from), true) => corpus::delta_since(&self.root, &self.current, from).await?,
            _ => None,
        };
        let view = d.as_ref().map_or(&self.current, |d| &d.view);
        let mut filled = Filled {
            bytes: view.parts.iter().map(|p| p.bytes).sum(),
            removed: d.as_ref().map(|d| Arc::new(d.removed.clone())),
            ..Default::default()
        };
        let mut live = LiveView::open(&self.root, view).await?;
        while let Some(docs) = live.next(&self.root, view).await? {
            // A Wikidata page's text is entity JSON: the KG's, not a passage.
            for doc in docs.into_iter().filter(|d| d.dataset != ENTITY_DATASET) {
                filled.documents += 1;
                for p in passage::of_document(&doc, unit) {
                    spool.push(p)?;
                }
            }
        }
        Ok(filled)
    }

    /// Calls `f` with every live Wikidata page of the corpus's current version (all of them:
    /// a KG index is rebuilt from the corpus when it changed); returns the bytes of the parts
    /// read.
    pub async fn entities(
        &self,
        mut f: impl FnMut(&Document) -> Result<(), ExecError>,
    ) -> Result<u64, ExecError> {
        let view = &self.current;
        let mut live = LiveView::open(&self.root, view).await?;
        while let Some(docs) = live.next(&self.root, view).await? {
            docs.iter()
                .filter(|d| d.dataset == ENTITY_DATASET)
                .try_for_each(&mut f)?;
        }
        Ok(view.parts.iter().map(|p| p.bytes).sum())
    }
}
