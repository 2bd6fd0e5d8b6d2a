//! An input: the options of each format, [`FormatOptions`], the checked [`InputSpec`] and the
//! `[[inputs]]` entry as written, with its JSON schema for the pipeline reference.

use serde::{Deserialize, Serialize};

use super::Format;

fn default_namespaces() -> Vec<i32> {
    vec![0]
}
fn yes() -> bool {
    true
}

/// Default of `max_line_bytes`: a line longer than this is quarantined (`record_too_large`)
/// and read past without being held. Real Wikidata entity lines reach a few MB.
pub const DEFAULT_MAX_LINE_BYTES: u64 = 64 << 20;
/// Default of `max_page_bytes`: enwiki caps a revision's wikitext at 2 MiB, so a
/// pages-articles `<page>` element is a few MB at most; parsing a page costs about 15 times
/// its size in memory.
pub const DEFAULT_MAX_PAGE_BYTES: u64 = 16 << 20;
/// Default of `max_record_bytes`: one JSON element of a QA file (an array element or a line).
pub const DEFAULT_MAX_RECORD_BYTES: u64 = 64 << 20;

fn default_max_line() -> u64 {
    DEFAULT_MAX_LINE_BYTES
}
fn default_max_page() -> u64 {
    DEFAULT_MAX_PAGE_BYTES
}
fn default_max_record() -> u64 {
    DEFAULT_MAX_RECORD_BYTES
}
// A limit left at its default is not serialized, so the pipeline hash of a file that sets
// none is what it was before the limits existed.
fn is_default_line(v: &u64) -> bool {
    *v == DEFAULT_MAX_LINE_BYTES
}
fn is_default_page(v: &u64) -> bool {
    *v == DEFAULT_MAX_PAGE_BYTES
}
fn is_default_record(v: &u64) -> bool {
    *v == DEFAULT_MAX_RECORD_BYTES
}

/// `mediawiki` options. A path may also name a daily adds-changes folder of Wikimedia's
/// (`other/incr/<wiki>/<date>/`), a glob of them (read in date order), or an object-store
/// prefix holding one (`s3://dumps/incr/enwiki/20261201`): each is checked
/// (`status.txt` done, `maxrevid.txt`, the MD5 of its pages file) and read as its
/// `pages-meta-hist-incr.xml.bz2`. A page with several revisions gives its newest one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MediaWikiOptions {
    /// Namespaces to keep (default `[0]`, articles). An empty list keeps all.
    #[serde(default = "default_namespaces")]
    pub namespaces: Vec<i32>,
    /// Keep redirect pages (flagged with their target). Default true.
    #[serde(default = "yes")]
    pub redirects: bool,
    /// Decode the streams of a multistream `.bz2` dump in parallel. Default true.
    #[serde(default = "yes")]
    pub parallel_streams: bool,
    /// Prefix of document URIs (default `enwiki`).
    #[serde(default)]
    pub wiki: Option<String>,
    /// Largest `<page>` element read, in bytes of XML (default 16 MiB); a longer page is
    /// quarantined as `record_too_large` with its offset and length, skipped without being
    /// held, and reading goes on. History dumps (every revision in one `<page>`) may need more.
    #[serde(default = "default_max_page", skip_serializing_if = "is_default_page")]
    #[schemars(extend("default" = DEFAULT_MAX_PAGE_BYTES))]
    pub max_page_bytes: u64,
    /// Also write each Wikidata page (`wikibase-item`, `wikibase-property`) as a `documents`
    /// row whose `text` is its entity JSON, with its page id, revision and title, besides the
    /// KG rows: what a `corpus` stage keeps, so that a KG index fed by the corpus follows the
    /// days' changes; a merged item's redirect becomes a redirect document (without the
    /// option it gives nothing). Default false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub entity_documents: bool,
}

impl Default for MediaWikiOptions {
    fn default() -> Self {
        MediaWikiOptions {
            namespaces: default_namespaces(),
            redirects: true,
            parallel_streams: true,
            wiki: None,
            max_page_bytes: DEFAULT_MAX_PAGE_BYTES,
            entity_documents: false,
        }
    }
}

/// `freebase` options.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FreebaseOptions {
    /// The English filter of Hydra/PoG: subject `m.`/`g.`; object an `ns:` IRI, an untagged
    /// or `@en` literal, or a typed literal. Default true.
    #[serde(default = "yes")]
    pub english_only: bool,
    /// Also write `type.object.name` literals as `entities` rows (`label`), and
    /// `common.topic.alias` literals as rows of their own (`aliases`, no `label`), `@en` or
    /// untagged. Default true.
    #[serde(default = "yes")]
    pub names: bool,
    /// Longest line read, in bytes (default 64 MiB); a longer one is quarantined as
    /// `record_too_large` with its offset and length, read past without being held, and
    /// reading goes on.
    #[serde(default = "default_max_line", skip_serializing_if = "is_default_line")]
    #[schemars(extend("default" = DEFAULT_MAX_LINE_BYTES))]
    pub max_line_bytes: u64,
}

impl Default for FreebaseOptions {
    fn default() -> Self {
        FreebaseOptions {
            english_only: true,
            names: true,
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
        }
    }
}

fn default_langs() -> Vec<String> {
    vec!["en".to_string()]
}

/// `wikidata` options.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WikidataOptions {
    /// Label/description/alias languages to keep (default `["en"]`).
    #[serde(default = "default_langs")]
    pub languages: Vec<String>,
    /// Longest line (one entity) read, in bytes (default 64 MiB); a longer one is quarantined as
    /// `record_too_large` with its offset and length, read past without being held, and
    /// reading goes on.
    #[serde(default = "default_max_line", skip_serializing_if = "is_default_line")]
    #[schemars(extend("default" = DEFAULT_MAX_LINE_BYTES))]
    pub max_line_bytes: u64,
}

impl Default for WikidataOptions {
    fn default() -> Self {
        WikidataOptions {
            languages: default_langs(),
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
        }
    }
}

/// `fb15k` options: the triple files are the input paths; names come from side files.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Fb15kOptions {
    /// mid-to-name files (`/m/x<TAB>name`), e.g. `FB15k_mid2name.txt` or `entity2text.txt`.
    #[serde(default)]
    pub names: Vec<String>,
    /// Longest line read, in bytes (default 64 MiB); a longer one is quarantined as
    /// `record_too_large` with its offset and length, read past without being held, and
    /// reading goes on.
    #[serde(default = "default_max_line", skip_serializing_if = "is_default_line")]
    #[schemars(extend("default" = DEFAULT_MAX_LINE_BYTES))]
    pub max_line_bytes: u64,
}

impl Default for Fb15kOptions {
    fn default() -> Self {
        Fb15kOptions {
            names: Vec::new(),
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
        }
    }
}

/// `hybridqa` options.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HybridQaOptions {
    /// The WikiTables-WithLinks directory (holding `tables_tok/` and `request_tok/`).
    /// Default: `WikiTables-WithLinks` beside the question file.
    #[serde(default)]
    pub tables_dir: Option<String>,
    /// Largest JSON record read (an array element or a line), in bytes (default 64 MiB); a
    /// larger one is quarantined as `record_too_large` with its offset and length, read past
    /// without being held, and reading goes on.
    #[serde(
        default = "default_max_record",
        skip_serializing_if = "is_default_record"
    )]
    #[schemars(extend("default" = DEFAULT_MAX_RECORD_BYTES))]
    pub max_record_bytes: u64,
}

impl Default for HybridQaOptions {
    fn default() -> Self {
        HybridQaOptions {
            tables_dir: None,
            max_record_bytes: DEFAULT_MAX_RECORD_BYTES,
        }
    }
}

/// `metaqa` options.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MetaQaOptions {
    /// Hop count of the questions; default read from the path (`1-hop/`, `2-hop/`, ...).
    #[serde(default)]
    pub hops: Option<u32>,
    /// The `qa_*_qtype.txt` file aligned line by line with the question file; default: the
    /// file named `qa_<split>_qtype.txt` beside it when present.
    #[serde(default)]
    pub qtype_file: Option<String>,
    /// Longest line read, in bytes (default 64 MiB); a longer one is quarantined as
    /// `record_too_large` with its offset and length, read past without being held, and
    /// reading goes on.
    #[serde(default = "default_max_line", skip_serializing_if = "is_default_line")]
    #[schemars(extend("default" = DEFAULT_MAX_LINE_BYTES))]
    pub max_line_bytes: u64,
}

impl Default for MetaQaOptions {
    fn default() -> Self {
        MetaQaOptions {
            hops: None,
            qtype_file: None,
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
        }
    }
}

/// Options of the JSON readers that take no others (the QA sets in JSON arrays or JSON lines,
/// `wikiofgraph`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JsonOptions {
    /// Largest JSON record read (an array element or a line), in bytes (default 64 MiB); a
    /// larger one is quarantined as `record_too_large` with its offset and length, read past
    /// without being held, and reading goes on.
    #[serde(
        default = "default_max_record",
        skip_serializing_if = "is_default_record"
    )]
    #[schemars(extend("default" = DEFAULT_MAX_RECORD_BYTES))]
    pub max_record_bytes: u64,
}

impl Default for JsonOptions {
    fn default() -> Self {
        JsonOptions {
            max_record_bytes: DEFAULT_MAX_RECORD_BYTES,
        }
    }
}

/// Options of the line readers that take no others (`metaqa-kb`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LineOptions {
    /// Longest line read, in bytes (default 64 MiB); a longer one is quarantined as
    /// `record_too_large` with its offset and length, read past without being held, and
    /// reading goes on.
    #[serde(default = "default_max_line", skip_serializing_if = "is_default_line")]
    #[schemars(extend("default" = DEFAULT_MAX_LINE_BYTES))]
    pub max_line_bytes: u64,
}

impl Default for LineOptions {
    fn default() -> Self {
        LineOptions {
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
        }
    }
}

/// `mediawiki-log`: page deletions, restores and moves (`changes` rows) from a MediaWiki
/// logging dump (`pages-logging.xml.gz`), or deletions from a plain list of page ids or titles,
/// one a line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoOptions {}

/// Typed options of an input, checked against its format.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum FormatOptions {
    MediaWiki(MediaWikiOptions),
    Freebase(FreebaseOptions),
    Wikidata(WikidataOptions),
    Fb15k(Fb15kOptions),
    HybridQa(HybridQaOptions),
    MetaQa(MetaQaOptions),
    Json(JsonOptions),
    Lines(LineOptions),
    None(NoOptions),
}

impl FormatOptions {
    /// The JSON schema of a format's options (names, types, defaults, doc comments), for the
    /// pipeline reference.
    pub fn schema_for(format: Format) -> schemars::Schema {
        match format {
            Format::MediaWiki => schemars::schema_for!(MediaWikiOptions),
            Format::Freebase => schemars::schema_for!(FreebaseOptions),
            Format::Wikidata => schemars::schema_for!(WikidataOptions),
            Format::Fb15k => schemars::schema_for!(Fb15kOptions),
            Format::HybridQa => schemars::schema_for!(HybridQaOptions),
            Format::MetaQa => schemars::schema_for!(MetaQaOptions),
            Format::MetaQaKb => schemars::schema_for!(LineOptions),
            Format::MediaWikiLog => schemars::schema_for!(NoOptions),
            _ => schemars::schema_for!(JsonOptions),
        }
    }

    /// Default options of a format.
    pub fn default_for(format: Format) -> FormatOptions {
        match format {
            Format::MediaWiki => FormatOptions::MediaWiki(Default::default()),
            Format::Freebase => FormatOptions::Freebase(Default::default()),
            Format::Wikidata => FormatOptions::Wikidata(Default::default()),
            Format::Fb15k => FormatOptions::Fb15k(Default::default()),
            Format::HybridQa => FormatOptions::HybridQa(Default::default()),
            Format::MetaQa => FormatOptions::MetaQa(Default::default()),
            Format::MetaQaKb => FormatOptions::Lines(Default::default()),
            Format::MediaWikiLog => FormatOptions::None(NoOptions {}),
            _ => FormatOptions::Json(Default::default()),
        }
    }

    /// The size limit of one record of the input (`max_line_bytes`, `max_page_bytes` or
    /// `max_record_bytes`, whichever the format has) and the option's name; the default of
    /// `max_record_bytes` for [`FormatOptions::None`].
    pub fn record_limit(&self) -> (u64, &'static str) {
        match self {
            FormatOptions::MediaWiki(o) => (o.max_page_bytes, "max_page_bytes"),
            FormatOptions::Freebase(o) => (o.max_line_bytes, "max_line_bytes"),
            FormatOptions::Wikidata(o) => (o.max_line_bytes, "max_line_bytes"),
            FormatOptions::Fb15k(o) => (o.max_line_bytes, "max_line_bytes"),
            FormatOptions::HybridQa(o) => (o.max_record_bytes, "max_record_bytes"),
            FormatOptions::MetaQa(o) => (o.max_line_bytes, "max_line_bytes"),
            FormatOptions::Json(o) => (o.max_record_bytes, "max_record_bytes"),
            FormatOptions::Lines(o) => (o.max_line_bytes, "max_line_bytes"),
            FormatOptions::None(_) => (DEFAULT_MAX_RECORD_BYTES, "max_record_bytes"),
        }
    }
}

/// One input: a reader over one or more files.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InputSpec {
    pub name: String,
    pub format: Format,
    /// Paths, globs or object-store URLs.
    pub paths: Vec<String>,
    /// Split name for QA datasets (default: guessed from the file name, else `unknown`).
    pub split: Option<String>,
    pub options: FormatOptions,
}

/// An `[[inputs]]` entry: one reader over one or more files.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawInput {
    /// The input's name (letters, digits, `_`, `.`, `-`): stages name it in `inputs`, and it
    /// tags every Parquet part the input's files produce.
    pub(super) name: String,
    /// The reader: one of the formats listed below.
    pub(super) format: String,
    /// Files, globs or object-store URLs (relative paths: from the working directory).
    pub(super) paths: Vec<String>,
    /// Split name of a QA dataset (default: guessed from the file name, else `unknown`).
    #[serde(default)]
    pub(super) split: Option<String>,
    /// The reader's options (below, per format).
    #[serde(default)]
    #[schemars(with = "Option<serde_json::Map<String, serde_json::Value>>")]
    pub(super) options: Option<toml::Table>,
}

/// The JSON schema of an `[[inputs]]` entry, for the pipeline reference.
pub fn input_schema() -> schemars::Schema {
    schemars::schema_for!(RawInput)
}
