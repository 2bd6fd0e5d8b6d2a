//! An index fed by a corpus root: the passages of its current version, or, when the index was
//! built from an earlier version of it, only those of the pages changed since
//! ([`distillery_index::corpus::delta_since`]); and the Wikidata pages of its current version
//! (documents of the `entity_documents` reader option) for a KG index, which carries its
//! previous graph on with the pages changed since, or reads them all.

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use distillery_core::spec::WikidataOptions;
use distillery_core::{Document, Record};
use distillery_index::build::Spool;
use distillery_index::corpus::{self, Delta, LiveView, Manifest, SegmentView};
use distillery_index::kg::{self, KgBuilder, KgIndex};
use distillery_index::passage::{self, Unit};
use distillery_index::version::{self, Root};
use distillery_ingest::kb::wikidata::entity_records;
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
    /// The index's current version, when it holds a KG the next one can carry on from.
    prior_kg: Option<String>,
    /// The wikis of the entity pages that KG was built from (empty: not recorded).
    prior_wikis: Vec<String>,
    /// The pages changed since `built_from` (read once, for the passages and the KG alike);
    /// `None` when there is no such version or the delta cannot be told.
    delta: Option<Delta>,
}

/// What [`Feed::fill_kg`] read.
#[derive(Debug, Default)]
pub struct KgFilled {
    /// Wikidata pages parsed.
    pub documents: u64,
    pub bytes: u64,
    /// Edges carried from the index's previous KG (`None`: the KG was read whole).
    pub carried: Option<u64>,
    /// The wikis of the entity pages the KG now holds (sorted).
    pub wikis: Vec<String>,
}

/// A KG carried on from the previous version: its files, the subjects whose edges leave it,
/// and the records of the pages changed since.
struct Carry {
    dir: PathBuf,
    dropped: HashSet<String>,
    wikis: BTreeSet<String>,
    records: Vec<Record>,
    documents: u64,
    bytes: u64,
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
        let (mut built_from, mut prior_kg, mut prior_wikis) = (None, None, Vec::new());
        if let Some(v) = version::current(index).await?
            && let Some(m) = version::manifest(index, &v).await?
        {
            built_from = m.corpus;
            if let Some(kg) = m.kg {
                prior_kg = Some(v);
                prior_wikis = kg.wikis;
            }
        }
        let delta = match &built_from {
            Some(from) if *from != current.version => {
                corpus::delta_since(&root, &current, from).await?
            }
            _ => None,
        };
        Ok(Feed {
            root,
            current,
            built_from,
            prior_kg,
            prior_wikis,
            delta,
        })
    }

    /// Whether the index's current version was built from the corpus's current version.
    pub fn unchanged(&self) -> bool {
        self.built_from.as_deref() == Some(self.current.version.as_str())
    }

    /// Spools the passages of the corpus's current version at `unit` (its documents', or its
    /// segments' for `segment`): with `delta`, and an index built from an ancestor version,
    /// only the touched pages'.
    pub async fn fill(
        &self,
        spool: &mut Spool,
        unit: Unit,
        delta: bool,
    ) -> Result<Filled, ExecError> {
        let d = self.delta.as_ref().filter(|_| delta);
        let view = d.map_or(&self.current, |d| &d.view);
        let mut filled = Filled {
            bytes: view.parts.iter().map(|p| p.bytes).sum(),
            removed: d.map(|d| Arc::new(d.removed.clone())),
            ..Default::default()
        };
        if unit == Unit::Segment {
            if self.current.segments.is_none() {
                return Err(ExecError::Task(format!(
                    "corpus root {}: its versions keep no segments (set `segments` on its \
                     corpus stage, and rebase) for an index of unit `segment`",
                    self.root.display
                )));
            }
            filled.bytes = view.segment_parts.iter().map(|p| p.bytes).sum();
            let mut live = SegmentView::open(&self.root, view).await?;
            while let Some(segs) = live.next(&self.root, view).await? {
                filled.documents += segs.len() as u64;
                for p in segs.iter().filter_map(passage::of_segment_titled) {
                    spool.push(p)?;
                }
            }
            return Ok(filled);
        }
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

    /// Feeds `kg` the corpus's Wikidata pages through `push` (one parsed record at a time).
    /// When the index's current version holds a KG built from an ancestor version of the
    /// corpus, it is carried on: its edges and names, less those of the subjects changed or
    /// deleted since, and the changed pages parsed ([`distillery_index::kg::KgIndex::carry`]);
    /// otherwise every live page is parsed. `scratch` receives the previous KG's files.
    pub async fn fill_kg(
        &self,
        index: &Root,
        kg: &mut KgBuilder,
        scratch: &Path,
        push: &mut (dyn FnMut(&mut KgBuilder, Record) -> Result<(), ExecError> + Send),
    ) -> Result<KgFilled, ExecError> {
        if let Some(c) = self.carry(index, scratch).await? {
            let prior = KgIndex::open(&c.dir)?;
            let carried = prior.carry(kg, &|k| !c.dropped.contains(k))?;
            for r in c.records {
                push(kg, r)?;
            }
            return Ok(KgFilled {
                documents: c.documents,
                bytes: c.bytes,
                carried: Some(carried),
                wikis: c.wikis.into_iter().collect(),
            });
        }
        let (mut documents, mut wikis) = (0, BTreeSet::new());
        let bytes = self
            .entities(|d| {
                documents += 1;
                wikis.insert(wiki_of(&d.uri).to_string());
                self.parse(d)?.into_iter().try_for_each(|r| push(kg, r))
            })
            .await?;
        Ok(KgFilled {
            documents,
            bytes,
            carried: None,
            wikis: wikis.into_iter().collect(),
        })
    }

    /// A Wikidata page's records (the ones its ingest wrote, from the same JSON); none for a
    /// redirect (a merged item).
    fn parse(&self, d: &Document) -> Result<Vec<Record>, ExecError> {
        if d.redirect.is_some() {
            return Ok(Vec::new());
        }
        let opts = WikidataOptions::default();
        entity_records(&d.source, &opts, d.text.as_bytes(), None)
            .map(|(records, _)| records)
            .map_err(|p| {
                ExecError::Task(format!(
                    "corpus {}: page {} (revision {:?}): {}: {}",
                    self.root.display, d.title, d.revision_id, p.reason, p.detail
                ))
            })
    }

    /// How the previous KG carries on, or `None` when it cannot: no previous KG, no delta
    /// from the version it was built from, or (a KG that does not record its wikis) a removed
    /// page that may be an entity of a wiki with no changed entity page.
    async fn carry(&self, index: &Root, scratch: &Path) -> Result<Option<Carry>, ExecError> {
        let (Some(d), Some(prior)) = (&self.delta, &self.prior_kg) else {
            return Ok(None);
        };
        let (mut records, mut dropped, mut documents) = (Vec::new(), HashSet::new(), 0);
        let mut wikis: BTreeSet<String> = self.prior_wikis.iter().cloned().collect();
        let mut live = LiveView::open(&self.root, &d.view).await?;
        while let Some(docs) = live.next(&self.root, &d.view).await? {
            for doc in docs.iter().filter(|d| d.dataset == ENTITY_DATASET) {
                documents += 1;
                wikis.insert(wiki_of(&doc.uri).to_string());
                dropped.insert(entity_id(&doc.title).to_string());
                for r in self.parse(doc)? {
                    if let Record::Entity(e) = &r {
                        dropped.insert(e.key.clone());
                    }
                    records.push(r);
                }
            }
        }
        for uri in &d.removed {
            let Some((wiki, title)) = uri.split_once(':') else {
                continue;
            };
            let id = entity_id(title);
            if wikis.contains(wiki) {
                dropped.insert(id.to_string());
            } else if self.prior_wikis.is_empty() && looks_like_entity(id) {
                // Whether the page was an entity of the previous KG cannot be told.
                return Ok(None);
            }
        }
        let dir = scratch.join("prior-kg");
        for f in [kg::NODES_FILE, kg::EDGES_BY_SUBJECT_FILE] {
            index
                .download(&format!("versions/{prior}/kg/{f}"), &dir.join(f))
                .await?;
        }
        Ok(Some(Carry {
            dir,
            dropped,
            wikis,
            records,
            documents,
            bytes: d.view.parts.iter().map(|p| p.bytes).sum(),
        }))
    }

    /// Calls `f` with every live Wikidata page of the corpus's current version; returns the
    /// bytes of the parts read.
    async fn entities(
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

/// The wiki of a page URI (`wikidatawiki:Q42`: `wikidatawiki`).
fn wiki_of(uri: &str) -> &str {
    uri.split(':').next().unwrap_or("")
}

/// The entity id a Wikidata page's title names (`Q42`; `P31` of `Property:P31`).
fn entity_id(title: &str) -> &str {
    title.rsplit(':').next().unwrap_or(title)
}

/// Whether `id` has the shape of a Wikidata entity id (`Q42`, `P31`, `L7`).
fn looks_like_entity(id: &str) -> bool {
    let mut c = id.chars();
    matches!(c.next(), Some('Q' | 'P' | 'L')) && id.len() > 1 && c.all(|c| c.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::{entity_id, looks_like_entity};

    #[test]
    fn entity_ids_of_titles() {
        assert_eq!(entity_id("Q42"), "Q42");
        assert_eq!(entity_id("Property:P31"), "P31");
        assert!(looks_like_entity("Q42") && looks_like_entity("P31") && looks_like_entity("L7"));
        assert!(
            !looks_like_entity("Q") && !looks_like_entity("Queen") && !looks_like_entity("Place 3")
        );
    }
}
