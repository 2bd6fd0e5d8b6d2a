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

/// `mediawiki` options.
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
}

impl Default for MediaWikiOptions {
    fn default() -> Self {
        MediaWikiOptions {
            namespaces: default_namespaces(),
            redirects: true,
            parallel_streams: true,
            wiki: None,
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
}

impl Default for FreebaseOptions {
    fn default() -> Self {
        FreebaseOptions {
            english_only: true,
            names: true,
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
}

impl Default for WikidataOptions {
    fn default() -> Self {
        WikidataOptions {
            languages: default_langs(),
        }
    }
}

/// `fb15k` options: the triple files are the input paths; names come from side files.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Fb15kOptions {
    /// mid-to-name files (`/m/x<TAB>name`), e.g. `FB15k_mid2name.txt` or `entity2text.txt`.
    #[serde(default)]
    pub names: Vec<String>,
}

/// `hybridqa` options.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HybridQaOptions {
    /// The WikiTables-WithLinks directory (holding `tables_tok/` and `request_tok/`).
    /// Default: `WikiTables-WithLinks` beside the question file.
    #[serde(default)]
    pub tables_dir: Option<String>,
}

/// `metaqa` options.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MetaQaOptions {
    /// Hop count of the questions; default read from the path (`1-hop/`, `2-hop/`, ...).
    #[serde(default)]
    pub hops: Option<u32>,
    /// The `qa_*_qtype.txt` file aligned line by line with the question file; default: the
    /// file named `qa_<split>_qtype.txt` beside it when present.
    #[serde(default)]
    pub qtype_file: Option<String>,
}

/// Options of formats that take none.
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
            _ => schemars::schema_for!(NoOptions),
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
            _ => FormatOptions::None(NoOptions {}),
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
