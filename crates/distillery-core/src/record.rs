//! Record types of the data plane.
//!
//! Every reader turns its input into these records; [`crate::schema`] turns them into Arrow
//! `RecordBatch`es (one schema per [`TableKind`]) and back. Offsets are Unicode scalar value
//! (code point) indices into the record's `text`, half-open `[start, end)`, the same indexing as
//! Python's `str`, so `text[start:end]` in pyarrow/pandas gives the span.

use serde::{Deserialize, Serialize};

/// The output tables of a run, each written as its own Parquet directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TableKind {
    Documents,
    Tables,
    Triples,
    Entities,
    Questions,
    Segments,
    Labels,
    Sft,
    Quarantine,
    Subgraphs,
    Literals,
    Changes,
}

impl TableKind {
    /// All tables, in the order outputs list them.
    pub const ALL: [TableKind; 12] = [
        TableKind::Documents,
        TableKind::Tables,
        TableKind::Triples,
        TableKind::Entities,
        TableKind::Questions,
        TableKind::Segments,
        TableKind::Labels,
        TableKind::Sft,
        TableKind::Quarantine,
        TableKind::Subgraphs,
        TableKind::Literals,
        TableKind::Changes,
    ];

    /// The tables of a knowledge graph's edges: `triples` (entity to entity) and `literals`
    /// (to a value), which hold the same columns.
    pub const KG_EDGES: [TableKind; 2] = [TableKind::Triples, TableKind::Literals];

    /// The table's name: its directory in an output and its SQL table name in `inspect`.
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// Parses a table name as written by [`TableKind::name`].
    pub fn from_name(name: &str) -> Option<TableKind> {
        TableKind::ALL.into_iter().find(|t| t.name() == name)
    }
}

impl std::fmt::Display for TableKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A section heading of a document; `start..end` covers the section's text including its
/// heading line, up to the next heading of the same or a higher level.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Section {
    pub title: String,
    /// 1 for the lead, 2 for `==h==`, 3 for `===h===`, ...
    pub level: u32,
    pub start: u32,
    pub end: u32,
}

/// A paragraph span; `section` indexes `Document::sections` (or -1 when there are none).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Paragraph {
    pub start: u32,
    pub end: u32,
    pub section: i32,
}

/// A sentence span; `paragraph` indexes `Document::paragraphs`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Sentence {
    pub start: u32,
    pub end: u32,
    pub paragraph: i32,
}

/// A key/value field of an infobox (or any template kept as structured data).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct InfoboxField {
    /// The template name, e.g. `Infobox country`.
    pub template: String,
    pub key: String,
    pub value: String,
}

/// A hyperlink in the clean text: `text[start..end]` is the anchor, `target` the linked title
/// (or URL for external links).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Link {
    pub target: String,
    pub start: u32,
    pub end: u32,
}

/// A text document: a wiki page, or a context paragraph of a QA record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Document {
    /// Stable id: [`crate::id::stable_id`] of (dataset, source, natural key, text).
    pub id: String,
    /// The reader that produced it (`mediawiki`, `hotpotqa`, ...).
    pub dataset: String,
    /// The input file's name (its last path component), part of the provenance.
    pub source: String,
    /// A URI naming the document, e.g. `enwiki:Title`, or `hotpotqa:Title#<12 hex digits of
    /// the id>` for a QA context paragraph (a title may name several).
    pub uri: String,
    pub title: String,
    pub page_id: Option<i64>,
    pub namespace: Option<i32>,
    /// Target title when the page is a redirect.
    pub redirect: Option<String>,
    pub revision_id: Option<i64>,
    /// The revision's timestamp (ISO 8601, as the export writes it).
    pub timestamp: Option<String>,
    /// The revision's SHA-1 as the export gives it (`<sha1>`, base 36): the same text gives
    /// the same value from one dump to the next.
    pub sha1: Option<String>,
    pub text: String,
    pub sections: Vec<Section>,
    pub paragraphs: Vec<Paragraph>,
    pub sentences: Vec<Sentence>,
    pub infobox: Vec<InfoboxField>,
    pub links: Vec<Link>,
}

/// A change to a wiki's pages that a revision dump does not carry (the `changes` table): a
/// deletion, a restore or a move, from a logging dump or a list of deleted pages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Change {
    /// Stable id of (dataset, source, log id or line, kind, title).
    pub id: String,
    /// The reader (`mediawiki-log`).
    pub dataset: String,
    pub source: String,
    /// `deleted`, `restored` or `moved`.
    pub kind: String,
    /// The page's full title as logged (namespace prefix included); empty when a list names
    /// the page by id.
    pub title: String,
    /// The page id, when known (a list of ids; logging dumps give none).
    pub page_id: Option<i64>,
    /// The new title of a moved page.
    pub target: Option<String>,
    pub timestamp: Option<String>,
    /// The log item's id.
    pub log_id: Option<i64>,
}

/// A link inside a table cell (`row` -1 is the header row).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct CellLink {
    pub row: i32,
    pub col: i32,
    pub target: String,
}

/// A structured table: a header and rows of cells (all rows as wide as the header, spans
/// expanded into every cell they cover).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Table {
    pub id: String,
    pub dataset: String,
    pub source: String,
    pub uri: String,
    /// The document the table came from, when it came from one.
    pub document_id: Option<String>,
    /// Position of the table within its document (0-based).
    pub table_index: u32,
    pub title: String,
    pub caption: Option<String>,
    pub section: Option<String>,
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
    pub links: Vec<CellLink>,
}

/// One knowledge-graph edge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Triple {
    /// Stable id of (dataset, source, subject, predicate, object, lang, datatype).
    pub id: String,
    pub dataset: String,
    pub source: String,
    /// Subject key as the source writes it, shortened where the source has a namespace
    /// (Freebase `m.0abc`, Wikidata `Q42`, FB15k `/m/0abc`, MetaQA the entity name).
    pub subject: String,
    pub predicate: String,
    pub object: String,
    /// `entity` (another node), `literal` (a value) or `iri` (a non-entity IRI).
    pub object_kind: String,
    pub lang: Option<String>,
    pub datatype: Option<String>,
    pub subject_name: Option<String>,
    pub object_name: Option<String>,
    /// Validity time of the edge when the source gives one.
    pub time: Option<String>,
    /// Provenance for triples extracted from text.
    pub document_id: Option<String>,
    pub sentence: Option<u32>,
    pub start: Option<u32>,
    pub end: Option<u32>,
    /// 1-based line of the input for line-oriented sources; `None` when the file was read as
    /// byte ranges (`run.split_bytes`), which cannot know how many lines come before them.
    pub line: Option<u64>,
    /// For triples a teacher extracted: its `model@revision`, and the digest of the
    /// response-cache entry of the answer that stated the triple.
    #[serde(default)]
    pub teacher: Option<String>,
    #[serde(default)]
    pub cache_entry: Option<String>,
}

/// A named entity of a knowledge base (labels of Wikidata items, names of Freebase mids).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Entity {
    pub id: String,
    pub dataset: String,
    pub source: String,
    /// The entity key (`Q42`, `m.0abc`, `/m/0abc`).
    pub key: String,
    pub lang: Option<String>,
    pub label: Option<String>,
    pub description: Option<String>,
    pub aliases: Vec<String>,
    /// The title of the entity's Wikipedia page in `lang` (a Wikidata sitelink such as
    /// `enwiki`), when the source has one.
    pub wikipedia: Option<String>,
}

/// One edge of a question's KG subgraph (the `subgraph` stage): an edge of the knowledge
/// graph that touches a node within `hops - 1` hops of one of the question's topic entities.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct SubgraphEdge {
    /// Stable id of (stage, question record id, triple id).
    pub id: String,
    /// The question's record id (`questions.id`).
    pub question_id: String,
    /// The KG's own entity key of the subject (a Freebase mid, a Wikidata QID, a MetaQA name).
    pub subject: String,
    pub relation: String,
    pub object: String,
    /// `entity`, or `literal`/`iri` for an edge kept with the stage's `literals` option.
    pub object_kind: String,
    /// 1 for an edge touching a topic entity, `h` for one whose nearer end is `h - 1` hops
    /// from the nearest topic entity.
    pub hop: u32,
    pub subject_name: Option<String>,
    pub object_name: Option<String>,
    /// The KG edge's `triples.id`.
    pub triple_id: String,
    /// The dataset the edge came from (`freebase`, `wikidata`, `fb15k`, ...).
    pub source: String,
}

impl SubgraphEdge {
    /// The edge as a triple of the question's own subgraph (`source` = the question id), the
    /// form its HSEQ segments encode and `hseq verify` decodes back.
    pub fn edge_triple(&self) -> Triple {
        Triple {
            id: self.triple_id.clone(),
            dataset: self.source.clone(),
            source: self.question_id.clone(),
            subject: self.subject.clone(),
            predicate: self.relation.clone(),
            object: self.object.clone(),
            object_kind: self.object_kind.clone(),
            subject_name: self.subject_name.clone(),
            object_name: self.object_name.clone(),
            ..Default::default()
        }
    }
}

/// A piece of gold evidence of a question.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Evidence {
    /// `sentence`, `paragraph`, `table_cell`, `table_row`, `triple` or `document`.
    pub kind: String,
    /// Title of the supporting page/paragraph when the dataset names it.
    pub title: Option<String>,
    /// Id of the document or table record holding the evidence.
    pub record_id: Option<String>,
    /// Sentence or paragraph index within that record.
    pub index: Option<i32>,
    pub row: Option<i32>,
    pub col: Option<i32>,
    /// Evidence given as text (a triple `s|r|o`, a fact, a cell value).
    pub text: Option<String>,
}

/// One step of a gold decomposition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct DecompositionStep {
    pub question: String,
    pub answer: Option<String>,
    /// Indexes into the question's context documents that support this step.
    pub support: Vec<i32>,
}

/// A question of a QA dataset, in one schema for all datasets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Question {
    pub id: String,
    pub dataset: String,
    pub source: String,
    pub split: String,
    /// The dataset's own id for the question.
    pub question_id: String,
    pub question: String,
    /// Gold answers; the first is the canonical one, the rest aliases.
    pub answers: Vec<String>,
    pub question_type: Option<String>,
    pub level: Option<String>,
    /// Topic entities named by the question (MetaQA's bracketed entity, CWQ/SimpleQuestions
    /// topic mids; the Hydra sets' Freebase mids, then their Wikidata QIDs).
    pub topic_entities: Vec<String>,
    pub evidence: Vec<Evidence>,
    pub decomposition: Vec<DecompositionStep>,
    /// Ids of the documents this question's context became, in the dataset's order.
    pub context_documents: Vec<String>,
    /// Ids of the tables this question's context became.
    pub context_tables: Vec<String>,
    pub answerable: Option<bool>,
    /// Dataset-specific fields kept verbatim as a JSON object (TAT-QA `scale`, `derivation`,
    /// `answer_type`, `answer_from`; HybridQA `answer-node`; ...).
    pub meta: String,
}

/// One HSEQ segment (paper 000, section 2.3): `id, level, parent, content, metadata`, with the
/// metadata keys flattened into columns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Segment {
    pub id: String,
    /// `document`, `section`, `paragraph`, `sentence`, `table`, `table_row`, `table_cell`,
    /// `subgraph` or `triplet`.
    pub level: String,
    pub parent: Option<String>,
    pub content: String,
    /// Metadata `source_id`: id of the document / table / subgraph root record.
    pub source_id: String,
    /// Metadata `uri`.
    pub uri: String,
    /// Metadata `offsets`: `[a, b]` char offsets for text, `[row, -1]` for rows, `[row, col]`
    /// for cells, `[-1, -1]` for KG and container segments without a span.
    pub offsets: Vec<i64>,
    /// Metadata `schema`: the header for a table root, `[s, p, o]` field names for triplets.
    pub schema: Vec<String>,
    /// Metadata `time`.
    pub time: Option<String>,
    /// `text`, `table` or `kg`.
    pub source_type: String,
    /// Integrity helper: sha1 of `content`.
    pub sha1: String,
    /// Integrity helper: version of the source record (revision id, or the source file name).
    pub source_version: Option<String>,
    /// Position in the stream order ρ within the source (parents before children).
    pub ord: u32,
    /// Lineage helper: the wiki page a text segment was cut from (its document's `page_id`);
    /// `None` for tables, KG segments and documents without one.
    #[serde(default)]
    pub page_id: Option<i64>,
}

impl Segment {
    /// The page revision the segment was cut from ([`page_revision`]): empty for a segment
    /// with no page (KG, or a table outside a corpus).
    pub fn page_revision(&self) -> String {
        page_revision(&self.uri, self.page_id, self.source_version.as_deref())
    }
}

/// One weak-positive segment chosen by a labelling method.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct LabeledSegment {
    pub segment_id: String,
    pub level: String,
    /// Id of the source record (document or table) the segment belongs to.
    pub source_id: String,
    /// Sentence index within the document (sentence segments), paragraph index (paragraph
    /// segments), row index (table rows); -1 when not applicable.
    pub index: i32,
    /// Why it was chosen: `exact`, `substring`, `lexical` (Jaccard fallback, low confidence),
    /// or a method-specific reason (`bm25`, `bridge`, `title`, ...); `within:<reason>` for a
    /// segment the trajectory picked in place of a positive it holds that the candidate
    /// stream does not show (not one of the method's positives, not counted as one).
    pub reason: String,
    pub score: f64,
}

/// The weak-positive labels and synthesized trajectory of one question by one method.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct LabelRecord {
    /// Stable id of (question id, method).
    pub id: String,
    pub question_id: String,
    pub dataset: String,
    pub question_type: Option<String>,
    pub method: String,
    /// Size of S_h and of the capped candidate set.
    pub segments: u32,
    pub candidates: u32,
    pub positives: Vec<LabeledSegment>,
    /// True when fewer positives than wanted were found by answer matching.
    pub low_confidence: bool,
    /// Steps of the synthesized trajectory and whether it reached sufficiency.
    pub steps: u32,
    pub sufficient: bool,
    /// Step (1-based) at which sufficiency was reached, 0 when never.
    pub sufficient_at: u32,
    /// Segment ids selected by the trajectory, in selection order.
    pub selected: Vec<String>,
}

/// One chat message of an SFT sample.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Message {
    /// `system`, `user` or `assistant`.
    pub role: String,
    pub content: String,
}

/// One supervised fine-tuning sample: chat messages where only the assistant turn is trained,
/// with its lineage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct SftSample {
    /// Stable id of the sample's content and lineage.
    pub id: String,
    /// `hseq_iteration`, `hanrag_refiner`, `hanrag_ending`, `hanrag_router`, ...
    pub task: String,
    pub messages: Vec<Message>,
    /// Loss weight of the sample (lower for low-confidence picks).
    pub weight: f64,
    /// `train` or `validation` (deterministic by a hash of the question id: a question's samples
    /// share a split).
    pub split: String,
    pub dataset: String,
    pub question_id: String,
    /// Segments shown in or selected by the sample.
    pub segment_ids: Vec<String>,
    pub method: String,
    /// The method's parameters, as a JSON object.
    pub params: String,
    pub template_id: String,
    pub template_version: String,
    pub pipeline_hash: String,
    /// Trajectory step (1-based) and length, for iteration samples.
    pub step: Option<u32>,
    pub steps: Option<u32>,
    pub sufficient: Option<bool>,
    /// Token counts (with the configured tokenizer, else the character estimate).
    pub prompt_tokens: u32,
    pub target_tokens: u32,
    /// The teacher the sample's content came from: the `[llm]` `model@model_revision`
    /// (`model` alone without a revision); `None` for a teacher-free sample.
    #[serde(default)]
    pub teacher: Option<String>,
    /// Digests of the response-cache entries the sample was built from, in the order asked
    /// (each kept as `<fan>/<digest>.json` under the cache root, `fan` its first two
    /// characters).
    #[serde(default)]
    pub cache_entries: Vec<String>,
    /// The wiki page revision of each of `segment_ids`, in its order: `<wiki>#<page
    /// id>@<revision id>` (`enwiki#12@3456`, [`page_revision`]), or an empty string where the
    /// evidence names none (a QA dataset's context). Empty when no evidence has one.
    #[serde(default)]
    pub revisions: Vec<String>,
}

/// A page revision as an SFT sample names its evidence: `<wiki>#<page id>@<revision id>` (the
/// wiki from a URI such as `enwiki:Title`), `<wiki>#<page id>` without a revision; an empty
/// string without a page id.
pub fn page_revision(uri: &str, page_id: Option<i64>, revision: Option<&str>) -> String {
    let Some(page) = page_id else {
        return String::new();
    };
    let wiki = uri.split_once(':').map_or("", |x| x.0);
    match revision {
        Some(r) => format!("{wiki}#{page}@{r}"),
        None => format!("{wiki}#{page}"),
    }
}

/// [`SftSample::revisions`] for evidence of which `of` tells each revision: empty when none
/// has one.
pub fn revisions_of<T>(evidence: &[T], of: impl Fn(&T) -> String) -> Vec<String> {
    let v: Vec<String> = evidence.iter().map(of).collect();
    if v.iter().all(String::is_empty) {
        Vec::new()
    } else {
        v
    }
}

/// A record that could not be read, kept with enough context to find and fix it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct QuarantineRecord {
    /// Stable id of (source, offset, reason).
    pub id: String,
    pub dataset: String,
    /// The input file (full path or URL as given).
    pub source: String,
    /// Byte offset into the (decompressed) input where the bad record starts, when known.
    pub byte_offset: Option<u64>,
    /// 1-based line, for line-oriented inputs.
    pub line: Option<u64>,
    /// Record index within the input (the n-th JSON object, page, ...), when known.
    pub record: Option<u64>,
    /// Short machine-readable class: `truncated_input`, `malformed_xml`, `invalid_utf8`,
    /// `bad_ntriples`, `bad_json`, `missing_field`, `bad_value`, `wikitext`, ...
    pub reason: String,
    /// Human-readable detail.
    pub detail: String,
    /// Up to 512 bytes of the raw record, lossily decoded.
    pub excerpt: String,
}

impl QuarantineRecord {
    /// Builds a quarantine record with a stable id; `excerpt` is cut to 512 bytes on a char
    /// boundary.
    pub fn new(
        dataset: &str,
        source: &str,
        reason: &str,
        detail: impl Into<String>,
        excerpt: &[u8],
    ) -> QuarantineRecord {
        let excerpt = String::from_utf8_lossy(&excerpt[..excerpt.len().min(512)]).into_owned();
        let detail = detail.into();
        QuarantineRecord {
            id: String::new(),
            dataset: dataset.to_string(),
            source: source.to_string(),
            byte_offset: None,
            line: None,
            record: None,
            reason: reason.to_string(),
            detail,
            excerpt,
        }
        .with_id()
    }

    pub fn at_byte(mut self, offset: u64) -> Self {
        self.byte_offset = Some(offset);
        self.with_id()
    }

    pub fn at_line(mut self, line: u64) -> Self {
        self.line = Some(line);
        self.with_id()
    }

    pub fn at_record(mut self, record: u64) -> Self {
        self.record = Some(record);
        self.with_id()
    }

    /// Where and why, for an error message: `FILE line L, record R, byte B: REASON: DETAIL`
    /// (the positions known; the detail cut to 200 characters).
    pub fn describe(&self) -> String {
        let mut at = Vec::new();
        if let Some(l) = self.line {
            at.push(format!("line {l}"));
        }
        if let Some(r) = self.record {
            at.push(format!("record {r}"));
        }
        if let Some(b) = self.byte_offset {
            at.push(format!("byte {b}"));
        }
        let mut detail: String = self.detail.chars().take(200).collect();
        if detail.len() < self.detail.len() {
            detail.push('…');
        }
        match at.is_empty() {
            true => format!("{}: {}: {detail}", self.source, self.reason),
            false => format!(
                "{} {}: {}: {detail}",
                self.source,
                at.join(", "),
                self.reason
            ),
        }
    }

    fn with_id(mut self) -> Self {
        let b = self.byte_offset.map(|v| v.to_string()).unwrap_or_default();
        let l = self.line.map(|v| v.to_string()).unwrap_or_default();
        let r = self.record.map(|v| v.to_string()).unwrap_or_default();
        self.id = crate::id::stable_id(&[
            "quarantine",
            &self.dataset,
            &self.source,
            &b,
            &l,
            &r,
            &self.reason,
        ]);
        self
    }
}

/// Any record of the data plane, as a reader emits it.
#[derive(Debug, Clone, PartialEq)]
pub enum Record {
    Document(Document),
    Table(Table),
    Triple(Triple),
    Entity(Entity),
    Question(Question),
    Segment(Segment),
    Label(LabelRecord),
    Sft(SftSample),
    Quarantine(QuarantineRecord),
    Subgraph(SubgraphEdge),
    /// A knowledge-graph edge to a literal, IRI or blank-node object: the `literals` table,
    /// kept apart from the entity-to-entity edges of `triples`.
    Literal(Triple),
    /// A deletion, restore or move of a wiki page (the `changes` table).
    Change(Change),
}

impl Record {
    pub fn kind(&self) -> TableKind {
        match self {
            Record::Document(_) => TableKind::Documents,
            Record::Table(_) => TableKind::Tables,
            Record::Triple(_) => TableKind::Triples,
            Record::Entity(_) => TableKind::Entities,
            Record::Question(_) => TableKind::Questions,
            Record::Segment(_) => TableKind::Segments,
            Record::Label(_) => TableKind::Labels,
            Record::Sft(_) => TableKind::Sft,
            Record::Quarantine(_) => TableKind::Quarantine,
            Record::Subgraph(_) => TableKind::Subgraphs,
            Record::Literal(_) => TableKind::Literals,
            Record::Change(_) => TableKind::Changes,
        }
    }

    /// The record's stable id.
    pub fn id(&self) -> &str {
        match self {
            Record::Document(r) => &r.id,
            Record::Table(r) => &r.id,
            Record::Triple(r) => &r.id,
            Record::Entity(r) => &r.id,
            Record::Question(r) => &r.id,
            Record::Segment(r) => &r.id,
            Record::Label(r) => &r.id,
            Record::Sft(r) => &r.id,
            Record::Quarantine(r) => &r.id,
            Record::Subgraph(r) => &r.id,
            Record::Literal(r) => &r.id,
            Record::Change(r) => &r.id,
        }
    }

    /// A knowledge-graph edge as the record of its table: `triples` when its object is an
    /// entity (`object_kind` `entity`), else `literals`.
    pub fn edge(t: Triple) -> Record {
        match Record::edge_table(&t) {
            TableKind::Triples => Record::Triple(t),
            _ => Record::Literal(t),
        }
    }

    /// The table [`Record::edge`] puts `t` in: `triples` for an edge to an entity, else
    /// `literals`.
    pub fn edge_table(t: &Triple) -> TableKind {
        if t.object_kind == "entity" {
            TableKind::Triples
        } else {
            TableKind::Literals
        }
    }
}

/// Where readers put what they read. Implementations batch records into Arrow `RecordBatch`es
/// (the executor) or keep them (tests). An error from `emit` stops the reader: it means the
/// consumer is gone or failed, never that a record was bad.
pub trait RecordSink {
    fn emit(&mut self, record: Record) -> Result<(), SinkError>;

    /// Emits [`Record::edge`] of `t`, lent rather than given. A sink that copies rows into
    /// columns takes it as it is, so a reader can fill one `Triple` line after line instead
    /// of allocating every string of every row. The default emits an owned copy.
    fn emit_edge(&mut self, t: &Triple) -> Result<(), SinkError> {
        self.emit(Record::edge(t.clone()))
    }

    /// The number of shards this sink spreads records over by
    /// [`shard_key`](crate::sharded::shard_key), when it shards them: a reader parsing on
    /// several threads may then group and convert its records there
    /// ([`ShardedBuilder`](crate::sharded::ShardedBuilder)) and hand them over
    /// with [`RecordSink::emit_batches`]. `None` (the default): records only.
    fn shards(&self) -> Option<u32> {
        None
    }

    /// Takes batches built for [`RecordSink::shards`]'s shards. Only a sink that shards can;
    /// the default refuses.
    fn emit_batches(&mut self, batches: crate::sharded::ShardedBatches) -> Result<(), SinkError> {
        let _ = batches;
        Err(SinkError("this sink takes records one at a time".into()))
    }
}

/// The consumer of a [`RecordSink`] stopped; the reader must stop too.
#[derive(Debug, thiserror::Error)]
#[error("record sink closed: {0}")]
pub struct SinkError(pub String);

/// A sink that keeps every record, for tests and small in-memory uses.
#[derive(Debug, Default)]
pub struct VecSink {
    pub records: Vec<Record>,
}

impl RecordSink for VecSink {
    fn emit(&mut self, record: Record) -> Result<(), SinkError> {
        self.records.push(record);
        Ok(())
    }
}

macro_rules! vec_sink_accessor {
    ($name:ident, $variant:ident, $ty:ty) => {
        pub fn $name(&self) -> Vec<&$ty> {
            self.records
                .iter()
                .filter_map(|r| match r {
                    Record::$variant(x) => Some(x),
                    _ => None,
                })
                .collect()
        }
    };
}

impl VecSink {
    vec_sink_accessor!(documents, Document, Document);
    vec_sink_accessor!(tables, Table, Table);
    vec_sink_accessor!(triples, Triple, Triple);
    vec_sink_accessor!(entities, Entity, Entity);
    vec_sink_accessor!(questions, Question, Question);
    vec_sink_accessor!(segments, Segment, Segment);
    vec_sink_accessor!(labels, Label, LabelRecord);
    vec_sink_accessor!(sft, Sft, SftSample);
    vec_sink_accessor!(quarantine, Quarantine, QuarantineRecord);
    vec_sink_accessor!(literals, Literal, Triple);
    vec_sink_accessor!(changes, Change, Change);

    /// The KG edges, `triples` and `literals` alike, in the order they were emitted.
    pub fn edges(&self) -> Vec<&Triple> {
        self.records
            .iter()
            .filter_map(|r| match r {
                Record::Triple(t) | Record::Literal(t) => Some(t),
                _ => None,
            })
            .collect()
    }
}

/// Counts of the character offsets helpers: the number of chars in `s`, as u32.
pub fn char_len(s: &str) -> u32 {
    s.chars().count() as u32
}

/// `text[start..end]` in char offsets. Returns `None` if the span is out of range.
pub fn char_slice(text: &str, start: u32, end: u32) -> Option<&str> {
    if start > end {
        return None;
    }
    let mut it = text
        .char_indices()
        .map(|(i, _)| i)
        .chain(std::iter::once(text.len()));
    let a = it.nth(start as usize)?;
    let b = if end == start {
        a
    } else {
        it.nth((end - start - 1) as usize)?
    };
    Some(&text[a..b])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn char_slice_counts_code_points() {
        let t = "aé漢b";
        assert_eq!(char_slice(t, 1, 3), Some("é漢"));
        assert_eq!(char_slice(t, 0, 4), Some(t));
        assert_eq!(char_slice(t, 4, 4), Some(""));
        assert_eq!(char_slice(t, 2, 5), None);
        assert_eq!(char_len(t), 4);
    }

    #[test]
    fn table_names_round_trip() {
        for t in TableKind::ALL {
            assert_eq!(TableKind::from_name(t.name()), Some(t));
        }
    }

    #[test]
    fn evidence_names_the_page_revision_it_was_cut_from() {
        let seg = |uri: &str, page: Option<i64>, rev: Option<&str>| Segment {
            uri: uri.into(),
            page_id: page,
            source_version: rev.map(str::to_string),
            ..Default::default()
        };
        let text = seg("enwiki:Lake Varnholm", Some(12), Some("3456"));
        assert_eq!(text.page_revision(), "enwiki#12@3456");
        let table = seg("enwiki:Lake Varnholm#table0", Some(12), Some("3456"));
        assert_eq!(table.page_revision(), "enwiki#12@3456");
        // A KG segment, or a table outside a corpus (its version is a file name): no page.
        let kg = seg("fb:m.0abc", None, Some("kb.txt"));
        assert_eq!(kg.page_revision(), "");
        assert_eq!(page_revision("enwiki:X", Some(3), None), "enwiki#3");
        let mixed = [text.clone(), kg.clone()];
        assert_eq!(
            revisions_of(&mixed, Segment::page_revision),
            vec!["enwiki#12@3456".to_string(), String::new()]
        );
        assert!(revisions_of(&[kg], Segment::page_revision).is_empty());
    }
}
