//! Pipeline files: versioned, strict TOML that names inputs, stages and the output location.
//!
//! ```toml
//! version = 1
//! name = "quickstart"
//! output = "out/quickstart"          # a path, file://, s3://, gs://, az:// URL
//!
//! [run]
//! shards = 4                         # Parquet shards per table, by stable id hash
//! batch_size = 2048                  # records per Arrow batch: bounds reader memory
//! max_bad_ratio = 0.05               # fail the run when more records than this are bad
//!
//! [[inputs]]
//! name = "wiki"
//! format = "mediawiki"
//! paths = ["data/quickstart/wiki.xml"]
//! options = { namespaces = [0] }
//!
//! [[stages]]
//! kind = "hseq"
//! ```
//!
//! [`Pipeline::parse`] reads a file, applies `--set key.path=value` overrides, and checks the
//! whole of it, collecting *every* problem (unknown keys, bad values, dangling references) into
//! one [`SpecErrors`] with a location for each: the key path and, when the key is in the file,
//! its line and column. It does no IO beyond reading nothing: input paths are checked by the
//! executor's planner.

use std::collections::BTreeSet;
use std::fmt;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// The pipeline file version this build understands.
pub const SPEC_VERSION: i64 = 1;

/// One problem of a pipeline file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError {
    /// Dotted key path, e.g. `inputs[1].options.namespaces`.
    pub path: String,
    /// 1-based line and column of the key in the file, when it is in the file.
    pub line: Option<(usize, usize)>,
    pub message: String,
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some((l, c)) => write!(f, "{}:{}: {}: {}", l, c, self.path, self.message),
            None => write!(f, "{}: {}", self.path, self.message),
        }
    }
}

/// All problems of a pipeline file, in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecErrors {
    pub file: String,
    pub errors: Vec<SpecError>,
}

impl fmt::Display for SpecErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{}: {} problem{}",
            self.file,
            self.errors.len(),
            if self.errors.len() == 1 { "" } else { "s" }
        )?;
        for e in &self.errors {
            writeln!(f, "  {}:{}", self.file, e)?;
        }
        Ok(())
    }
}

impl std::error::Error for SpecErrors {}

/// Input formats the readers understand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Format {
    #[serde(rename = "mediawiki")]
    MediaWiki,
    #[serde(rename = "freebase")]
    Freebase,
    #[serde(rename = "wikidata")]
    Wikidata,
    #[serde(rename = "fb15k")]
    Fb15k,
    #[serde(rename = "metaqa-kb")]
    MetaQaKb,
    #[serde(rename = "hotpotqa")]
    HotpotQa,
    #[serde(rename = "musique")]
    Musique,
    #[serde(rename = "2wiki", alias = "2wikimultihopqa")]
    TwoWiki,
    #[serde(rename = "hybridqa")]
    HybridQa,
    #[serde(rename = "tatqa")]
    TatQa,
    #[serde(rename = "metaqa")]
    MetaQa,
    #[serde(rename = "cwq")]
    Cwq,
    #[serde(rename = "simpleqa")]
    SimpleQa,
}

impl Format {
    pub const ALL: [Format; 13] = [
        Format::MediaWiki,
        Format::Freebase,
        Format::Wikidata,
        Format::Fb15k,
        Format::MetaQaKb,
        Format::HotpotQa,
        Format::Musique,
        Format::TwoWiki,
        Format::HybridQa,
        Format::TatQa,
        Format::MetaQa,
        Format::Cwq,
        Format::SimpleQa,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Format::MediaWiki => "mediawiki",
            Format::Freebase => "freebase",
            Format::Wikidata => "wikidata",
            Format::Fb15k => "fb15k",
            Format::MetaQaKb => "metaqa-kb",
            Format::HotpotQa => "hotpotqa",
            Format::Musique => "musique",
            Format::TwoWiki => "2wiki",
            Format::HybridQa => "hybridqa",
            Format::TatQa => "tatqa",
            Format::MetaQa => "metaqa",
            Format::Cwq => "cwq",
            Format::SimpleQa => "simpleqa",
        }
    }

    /// The format of a name, or of an alias: `2wikimultihopqa` is `2wiki`.
    pub fn from_name(s: &str) -> Option<Format> {
        match s {
            "2wikimultihopqa" => Some(Format::TwoWiki),
            _ => Format::ALL.into_iter().find(|f| f.name() == s),
        }
    }

    /// Whether the format yields questions (a QA dataset) rather than a corpus or a KB.
    pub fn is_qa(self) -> bool {
        matches!(
            self,
            Format::HotpotQa
                | Format::Musique
                | Format::TwoWiki
                | Format::HybridQa
                | Format::TatQa
                | Format::MetaQa
                | Format::Cwq
                | Format::SimpleQa
        )
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

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
    /// Also write `type.object.name` literals as `entities` rows. Default true.
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
struct RawInput {
    /// The input's name (letters, digits, `_`, `.`, `-`): stages name it in `inputs`, and it
    /// tags every Parquet part the input's files produce.
    name: String,
    /// The reader: one of the formats listed below.
    format: String,
    /// Files, globs or object-store URLs (relative paths: from the working directory).
    paths: Vec<String>,
    /// Split name of a QA dataset (default: guessed from the file name, else `unknown`).
    #[serde(default)]
    split: Option<String>,
    /// The reader's options (below, per format).
    #[serde(default)]
    #[schemars(with = "Option<serde_json::Map<String, serde_json::Value>>")]
    options: Option<toml::Table>,
}

/// The JSON schema of an `[[inputs]]` entry, for the pipeline reference.
pub fn input_schema() -> schemars::Schema {
    schemars::schema_for!(RawInput)
}

/// The JSON schema of a `[[stages]]` entry, for the pipeline reference.
pub fn stage_schema() -> schemars::Schema {
    schemars::schema_for!(RawStage)
}

/// What the executor's stage registry tells the pipeline checks: the stage kinds this build
/// knows, which of them call the `[llm]` server, and each kind's option checks. The registry
/// lives in `distillery-exec` (one line per stage module), so adding a stage changes nothing
/// here.
pub trait StageCatalog {
    /// Every stage kind, in registry order.
    fn kinds(&self) -> Vec<&'static str>;
    /// Whether a stage of `kind` calls the `[llm]` server.
    fn uses_llm(&self, kind: &str) -> bool;
    /// Deserializes and checks the options of one stage of `kind` (a kind [`Self::kinds`]
    /// lists), reporting every problem through `cx`; `None` when they do not deserialize.
    fn check(&self, kind: &str, cx: &mut StageCheck<'_, '_>) -> Option<StageOptions>;
}

/// A stage's checked options: the typed value its stage module reads back with
/// [`StageOptions::get`], and the JSON form the pipeline hash covers (fields a stage marks
/// `skip_serializing`, such as a memory budget, are left out of it).
#[derive(Clone)]
pub struct StageOptions {
    typed: std::sync::Arc<dyn std::any::Any + Send + Sync>,
    hashed: serde_json::Value,
}

impl StageOptions {
    /// Wraps a stage's typed options.
    pub fn new<T: Serialize + Send + Sync + 'static>(options: T) -> StageOptions {
        let hashed = serde_json::to_value(&options).unwrap_or(serde_json::Value::Null);
        StageOptions {
            typed: std::sync::Arc::new(options),
            hashed,
        }
    }

    /// The typed options, when they are a `T`.
    pub fn get<T: 'static>(&self) -> Option<&T> {
        self.typed.downcast_ref::<T>()
    }

    /// The options as the pipeline hash sees them.
    pub fn json(&self) -> &serde_json::Value {
        &self.hashed
    }
}

impl fmt::Debug for StageOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.hashed)
    }
}

impl PartialEq for StageOptions {
    fn eq(&self, other: &Self) -> bool {
        self.hashed == other.hashed
    }
}

impl Serialize for StageOptions {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.hashed.serialize(s)
    }
}

/// The view of the pipeline a stage's option check gets, and where it reports problems
/// (at the stage's `options` keys, with their lines).
pub struct StageCheck<'c, 'l> {
    c: &'c mut Collector<'l>,
    index: usize,
    options: toml::Value,
    /// Every input of the pipeline that parsed.
    pub inputs: &'c [InputSpec],
    /// The inputs this stage reads.
    pub stage_inputs: Vec<&'c InputSpec>,
    /// The `[llm]` section, when it parsed.
    pub llm: Option<&'c LlmSpec>,
    /// Every `[[stages]]` table of the file as written, for checks that relate two stages.
    pub stages: &'c [toml::Value],
}

impl StageCheck<'_, '_> {
    /// Index of the stage in `stages`.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The stage's options as `T`, every bad key reported at its line.
    pub fn options<T: DeserializeOwned>(&mut self) -> Option<T> {
        let base = [key("stages"), PathSeg::Index(self.index), key("options")];
        self.c.de(&base, self.options.clone())
    }

    /// Reports a problem of the option `option` of this stage (`""`: the options table).
    pub fn error(&mut self, option: &str, message: impl Into<String>) {
        self.error_in(self.index, option, message);
    }

    /// Reports a problem of the option `option` of stage `index` (`""`: that stage itself).
    pub fn error_in(&mut self, index: usize, option: &str, message: impl Into<String>) {
        let mut path = vec![key("stages"), PathSeg::Index(index)];
        if !option.is_empty() {
            path.push(key("options"));
            path.push(key(option));
        }
        self.c.push(path, message);
    }
}
fn default_concurrency() -> usize {
    16
}
fn default_timeout() -> u64 {
    120
}
fn default_retries() -> u32 {
    6
}

/// Prices per million tokens (any currency; the summary's cost is in the same unit).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PriceSpec {
    #[serde(default)]
    pub input_per_million: f64,
    #[serde(default)]
    pub output_per_million: f64,
}

/// Spending limits of one run. At a limit the run stops cleanly, publishes nothing, and a
/// later run resumes: every answer already received is in the cache.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BudgetSpec {
    /// Prompt + completion tokens spent by this run's calls (cache hits are free).
    #[serde(default)]
    pub max_tokens: Option<u64>,
    /// Cost by `[llm.price]`.
    #[serde(default)]
    pub max_cost: Option<f64>,
}

/// The `[llm]` section: the OpenAI-compatible server the teacher stages call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LlmSpec {
    /// API root, e.g. `http://vllm:8000/v1`.
    pub base_url: String,
    /// The served model name.
    pub model: String,
    /// Environment variable holding the API key (none: no `Authorization` header).
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// The model's revision (weights version): part of every cache key.
    #[serde(default)]
    pub model_revision: String,
    /// Requests in flight at once.
    #[serde(default = "default_concurrency")]
    pub max_concurrency: usize,
    /// Per-request timeout, seconds.
    #[serde(default = "default_timeout")]
    pub timeout_secs: u64,
    /// Retries after the first attempt (429, 5xx, timeouts, broken answers).
    #[serde(default = "default_retries")]
    pub max_retries: u32,
    /// Sampling seed sent with every request.
    #[serde(default)]
    pub seed: Option<u64>,
    /// Where the response cache lives (path or URL). Default: `llm-cache` beside the
    /// output, so every pipeline writing next to it shares one cache.
    #[serde(default)]
    pub cache: Option<String>,
    #[serde(default)]
    pub price: PriceSpec,
    #[serde(default)]
    pub budget: BudgetSpec,
}

impl LlmSpec {
    /// The cache location: `cache`, else `llm-cache` in the directory holding `output`.
    pub fn cache_location(&self, output: &str) -> String {
        if let Some(c) = &self.cache {
            return c.clone();
        }
        let trimmed = output.trim_end_matches('/');
        let (scheme, path) = match trimmed.split_once("://") {
            Some((s, rest)) => (format!("{s}://"), rest),
            None => (String::new(), trimmed),
        };
        match path.rsplit_once('/') {
            Some((parent, _)) => format!("{scheme}{parent}/llm-cache"),
            // A bucket root: inside the bucket.
            None if !scheme.is_empty() => format!("{scheme}{path}/llm-cache"),
            None => "llm-cache".to_string(),
        }
    }
}

/// One stage of the pipeline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StageSpec {
    pub name: String,
    /// The stage kind: a kind of the executor's stage registry.
    pub kind: String,
    /// Names of the inputs or stages it consumes (default: all inputs).
    pub inputs: Vec<String>,
    pub options: StageOptions,
    /// GPUs a worker must offer to run this stage's tasks (0: any worker). Where a stage runs
    /// is not part of what it makes, so this is left out of the pipeline hash.
    #[serde(skip)]
    pub gpus: u32,
    /// Tasks a stage that splits runs as (default `run.shards`). An execution setting, left
    /// out of the pipeline hash like `run.shards`.
    #[serde(skip)]
    pub tasks: Option<u32>,
}

/// A `[[stages]]` entry.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawStage {
    /// The stage: one of the kinds listed below.
    kind: String,
    /// The stage's name (default: its kind): `--set stages.<name>.…`, output folders of its
    /// files, the tag of its parts.
    #[serde(default)]
    name: Option<String>,
    /// GPUs a worker must offer to run its tasks (0: any worker). Not part of the hash.
    #[serde(default)]
    gpus: u32,
    /// Tasks a stage that splits runs as (default `run.shards`). Not part of the hash.
    #[serde(default)]
    tasks: Option<u32>,
    /// Names of the inputs it reads (default: all).
    #[serde(default)]
    inputs: Option<Vec<String>>,
    /// The stage's options (below, per kind).
    #[serde(default)]
    #[schemars(with = "Option<serde_json::Map<String, serde_json::Value>>")]
    options: Option<toml::Table>,
}

fn default_shards() -> u32 {
    4
}
fn default_batch() -> usize {
    2048
}
fn default_bad_ratio() -> f64 {
    0.05
}

/// Execution settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunSpec {
    /// Parquet shards per table (records are assigned by stable id hash), and the tasks a
    /// stage that splits runs as (one per shard). An execution setting: the rows and files a
    /// run makes are the same for any count, so it is not part of the pipeline's hash.
    #[serde(default = "default_shards")]
    pub shards: u32,
    /// Records per Arrow batch; with `shards` this bounds the memory of a run.
    #[serde(default = "default_batch")]
    pub batch_size: usize,
    /// Readers and stage tasks run at once; 0 means one per core.
    #[serde(default)]
    pub parallelism: usize,
    /// Fail the run (non-zero exit, nothing published) when quarantined / read records is
    /// above this share. 1.0 never fails.
    #[serde(default = "default_bad_ratio")]
    pub max_bad_ratio: f64,
    /// Input files bigger than this (bytes) are read as several ingest tasks of about this
    /// many bytes each where the format allows: a multistream bz2 MediaWiki dump at bz2
    /// stream starts (from its `-index.txt(.bz2)` beside it, else by scanning), plain
    /// N-Triples and Wikidata JSON at line starts. 0 reads every file as one task. The
    /// records are those of a whole read, in the same order of ids, except that triples read
    /// from a range carry no line number (their quarantine rows give byte offsets). Default
    /// 1 GiB.
    #[serde(
        default = "default_split_bytes",
        skip_serializing_if = "is_default_split"
    )]
    pub split_bytes: u64,
}

fn default_split_bytes() -> u64 {
    1 << 30
}
fn is_default_split(v: &u64) -> bool {
    *v == default_split_bytes()
}

impl Default for RunSpec {
    fn default() -> Self {
        RunSpec {
            split_bytes: default_split_bytes(),
            shards: default_shards(),
            batch_size: default_batch(),
            parallelism: 0,
            max_bad_ratio: default_bad_ratio(),
        }
    }
}

/// A checked pipeline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Pipeline {
    pub version: i64,
    pub name: String,
    pub description: Option<String>,
    /// Where the run writes everything: a local path or an object-store URL.
    pub output: String,
    pub run: RunSpec,
    pub inputs: Vec<InputSpec>,
    pub stages: Vec<StageSpec>,
    /// The teacher server, for stages that call one.
    pub llm: Option<LlmSpec>,
    /// SHA-1 of the effective pipeline (after overrides) less its `output` and
    /// `run.parallelism`, recorded in every manifest and in the lineage of every SFT sample.
    /// Where a run writes and how many threads it uses are not part of what it makes: the
    /// same pipeline run into two places, on any number of cores, writes byte-identical files.
    pub hash: String,
}

const TOP_KEYS: &[&str] = &[
    "version",
    "name",
    "description",
    "output",
    "run",
    "inputs",
    "stages",
    "llm",
];

/// Error of an override argument (`--set key.path=value`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--set {arg}: {message}")]
pub struct OverrideError {
    pub arg: String,
    pub message: String,
}

/// Applies one `key.path=value` override to a TOML tree. The value is parsed as TOML
/// (`8`, `true`, `["a", "b"]`, `"text"`) and taken as a plain string when it does not parse.
/// Array elements are addressed by index (`inputs.0.paths`) or, for arrays of tables with a
/// `name` key, by name (`inputs.wiki.paths`). Missing tables are created.
pub fn apply_override(root: &mut toml::Table, arg: &str) -> Result<(), OverrideError> {
    apply_override_at(root, arg).map(|_| ())
}

/// [`apply_override`], returning the resolved key path (array elements by index).
fn apply_override_at(root: &mut toml::Table, arg: &str) -> Result<Vec<PathSeg>, OverrideError> {
    let err = |m: String| OverrideError {
        arg: arg.to_string(),
        message: m,
    };
    let (key, raw) = arg
        .split_once('=')
        .ok_or_else(|| err("expected key.path=value".into()))?;
    let parts: Vec<&str> = key.trim().split('.').collect();
    if parts.iter().any(|p| p.is_empty()) {
        return Err(err("empty key segment".into()));
    }
    let mut tree = toml::Value::Table(std::mem::take(root));
    let mut resolved = Vec::new();
    let result = set_path(&mut tree, &parts, raw.trim(), &mut resolved).map_err(err);
    if let toml::Value::Table(t) = tree {
        *root = t;
    }
    result.map(|_| resolved)
}

/// The value an override writes: the raw text when it replaces a string (so `name=2024-06-01`
/// stays a string rather than becoming a TOML date), else the text parsed as TOML.
fn override_value(existing: Option<&toml::Value>, raw: &str) -> toml::Value {
    match existing {
        Some(toml::Value::String(_)) if !(raw.starts_with('"') || raw.starts_with('\'')) => {
            toml::Value::String(raw.to_string())
        }
        _ => parse_override_value(raw),
    }
}

fn set_path(
    node: &mut toml::Value,
    parts: &[&str],
    raw: &str,
    resolved: &mut Vec<PathSeg>,
) -> Result<(), String> {
    let (part, rest) = (parts[0], &parts[1..]);
    match node {
        toml::Value::Table(t) => {
            resolved.push(PathSeg::Key(part.to_string()));
            if rest.is_empty() {
                let value = override_value(t.get(part), raw);
                t.insert(part.to_string(), value);
                return Ok(());
            }
            let child = t
                .entry(part.to_string())
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            set_path(child, rest, raw, resolved)
        }
        toml::Value::Array(a) => {
            // By index, by `name`, or (for unnamed stages) by `kind`.
            let idx = part.parse::<usize>().ok().or_else(|| {
                a.iter().position(|v| {
                    let name = v.get("name").and_then(|n| n.as_str());
                    name == Some(part)
                        || (name.is_none() && v.get("kind").and_then(|k| k.as_str()) == Some(part))
                })
            });
            let len = a.len();
            let i = idx
                .filter(|i| *i < len)
                .ok_or_else(|| format!("no element `{part}` in an array of {len}"))?;
            resolved.push(PathSeg::Index(i));
            if rest.is_empty() {
                a[i] = override_value(Some(&a[i]), raw);
                Ok(())
            } else {
                set_path(&mut a[i], rest, raw, resolved)
            }
        }
        _ => Err(format!(
            "cannot set `{part}` inside a value that is not a table"
        )),
    }
}

fn parse_override_value(raw: &str) -> toml::Value {
    let doc = format!("v = {raw}");
    match doc.parse::<toml::Table>() {
        Ok(mut t) => t
            .remove("v")
            .unwrap_or(toml::Value::String(raw.to_string())),
        Err(_) => toml::Value::String(raw.to_string()),
    }
}

/// Maps key paths to positions in the source text.
struct Locator {
    doc: Option<toml_edit::Document<String>>,
    text: String,
}

impl Locator {
    fn new(text: &str) -> Locator {
        Locator {
            doc: toml_edit::Document::parse(text.to_string()).ok(),
            text: text.to_string(),
        }
    }

    fn pos(&self, offset: usize) -> (usize, usize) {
        let before = &self.text[..offset.min(self.text.len())];
        let line = before.matches('\n').count() + 1;
        let col = before.rfind('\n').map(|i| offset - i).unwrap_or(offset + 1);
        (line, col)
    }

    /// Position of the deepest key of `path` (keys and array indexes) present in the file.
    fn locate(&self, path: &[PathSeg]) -> Option<(usize, usize)> {
        let doc = self.doc.as_ref()?;
        let mut best = None;
        locate_in(doc.as_item(), path, &mut best);
        best.map(|o| self.pos(o))
    }
}

fn locate_in(item: &toml_edit::Item, path: &[PathSeg], best: &mut Option<usize>) {
    let Some((seg, rest)) = path.split_first() else {
        return;
    };
    match (seg, item) {
        (PathSeg::Key(k), _) => {
            if let Some((key, child)) = item.as_table_like().and_then(|t| t.get_key_value(k)) {
                if let Some(sp) = key.span().or_else(|| child.span()) {
                    *best = Some(sp.start);
                }
                locate_in(child, rest, best);
            }
        }
        (PathSeg::Index(i), toml_edit::Item::ArrayOfTables(a)) => {
            if let Some(t) = a.get(*i) {
                if let Some(sp) = t.span() {
                    *best = Some(sp.start);
                }
                // Re-wrap the table as an item to keep walking by key.
                locate_in(&toml_edit::Item::Table(t.clone()), rest, best);
            }
        }
        (PathSeg::Index(i), toml_edit::Item::Value(toml_edit::Value::Array(a))) => {
            if let Some(sp) = a.get(*i).and_then(|v| v.span()) {
                *best = Some(sp.start);
            }
        }
        _ => {}
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum PathSeg {
    Key(String),
    Index(usize),
}

fn render_path(path: &[PathSeg]) -> String {
    let mut s = String::new();
    for seg in path {
        match seg {
            PathSeg::Key(k) => {
                if !s.is_empty() {
                    s.push('.');
                }
                s.push_str(k);
            }
            PathSeg::Index(i) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

struct Collector<'a> {
    loc: &'a Locator,
    errors: Vec<SpecError>,
    /// Key paths set from the command line: errors below them point at `--set`, not the file.
    overridden: Vec<(Vec<PathSeg>, String)>,
}

impl Collector<'_> {
    fn push(&mut self, path: Vec<PathSeg>, message: impl Into<String>) {
        let mut message = message.into();
        let line = match self.overridden.iter().find(|(p, _)| path.starts_with(p)) {
            Some((_, arg)) => {
                message = format!("{message} (from --set {arg})");
                None
            }
            None => self.loc.locate(&path),
        };
        self.errors.push(SpecError {
            path: if path.is_empty() {
                "(top level)".to_string()
            } else {
                render_path(&path)
            },
            line,
            message,
        });
    }

    /// Deserializes `value` as `T`, reporting errors at the precise inner keys. serde stops
    /// at the first error; to report every bad key of a table, each key is then checked on
    /// its own (ignoring the "missing field" errors that checking one key alone produces).
    /// When every bad key is an unknown one (a typo) and the table without them deserializes,
    /// that value is returned (after the errors were recorded), so the checks that follow
    /// report their errors in the same round; a known key with a bad value returns `None`,
    /// since the checks would judge its default instead.
    fn de<T: DeserializeOwned>(&mut self, base: &[PathSeg], value: toml::Value) -> Option<T> {
        let first = match serde_path_to_error::deserialize::<_, T>(value.clone()) {
            Ok(v) => return Some(v),
            Err(e) => error_at(base, e),
        };
        let mut found: Vec<(Vec<PathSeg>, String)> = Vec::new();
        let mut rest: Option<toml::Table> = None;
        let mut typos_only = true;
        if let toml::Value::Table(t) = &value
            && t.len() > 1
        {
            let mut kept = t.clone();
            for (k, v) in t {
                let mut single = toml::Table::new();
                single.insert(k.clone(), v.clone());
                if let Err(e) = serde_path_to_error::deserialize::<_, T>(toml::Value::Table(single))
                {
                    let (p, m) = error_at(base, e);
                    if !m.starts_with("missing field") {
                        if m.starts_with("unknown field") {
                            kept.remove(k);
                        } else {
                            typos_only = false;
                        }
                        if !found.contains(&(p.clone(), m.clone())) {
                            found.push((p, m));
                        }
                    }
                }
            }
            rest = Some(kept);
        }
        if found.is_empty() || !typos_only {
            rest = None;
        }
        if found.is_empty() {
            found.push(first);
        }
        for (p, m) in found {
            self.push(p, m);
        }
        serde_path_to_error::deserialize::<_, T>(toml::Value::Table(rest?)).ok()
    }
}

/// The key path and message of a deserialization error below `base`.
fn error_at(
    base: &[PathSeg],
    e: serde_path_to_error::Error<toml::de::Error>,
) -> (Vec<PathSeg>, String) {
    let mut path = base.to_vec();
    for seg in e.path().iter() {
        match seg {
            serde_path_to_error::Segment::Map { key } => path.push(PathSeg::Key(key.clone())),
            serde_path_to_error::Segment::Seq { index } => path.push(PathSeg::Index(*index)),
            _ => {}
        }
    }
    let msg = e.into_inner().message().trim().to_string();
    // serde's unknown-field message names the field; point at it.
    if let Some(field) = msg
        .strip_prefix("unknown field `")
        .and_then(|r| r.split('`').next())
        && path.last() != Some(&PathSeg::Key(field.to_string()))
    {
        path.push(PathSeg::Key(field.to_string()));
    }
    (path, msg)
}

fn key(k: &str) -> PathSeg {
    PathSeg::Key(k.to_string())
}

impl Pipeline {
    /// Parses and checks a pipeline file's text with overrides applied, reporting every problem.
    pub fn parse(
        catalog: &dyn StageCatalog,
        file: &str,
        text: &str,
        overrides: &[String],
    ) -> Result<Pipeline, SpecErrors> {
        Self::parse_checking_paths(catalog, file, text, overrides, &|_| Vec::new())
    }

    /// [`Self::parse`], with every input's `paths` also given to `check_paths` (even where
    /// the rest of the input has errors): each problem it returns (`"a.json: no such file"`)
    /// is reported at `inputs[i].paths` with the other errors, so `validate` says everything
    /// at once.
    pub fn parse_checking_paths(
        catalog: &dyn StageCatalog,
        file: &str,
        text: &str,
        overrides: &[String],
        check_paths: &dyn Fn(&[String]) -> Vec<String>,
    ) -> Result<Pipeline, SpecErrors> {
        let fail = |errors: Vec<SpecError>| SpecErrors {
            file: file.to_string(),
            errors,
        };
        let mut root: toml::Table = match text.parse::<toml::Table>() {
            Ok(t) => t,
            Err(e) => {
                let loc = Locator::new(text);
                return Err(fail(vec![SpecError {
                    path: "(syntax)".into(),
                    line: e.span().map(|s| loc.pos(s.start)),
                    message: e.message().trim().to_string(),
                }]));
            }
        };
        let mut override_errors = Vec::new();
        let mut overridden = Vec::new();
        for o in overrides {
            match apply_override_at(&mut root, o) {
                Ok(path) => overridden.push((path, o.clone())),
                Err(e) => override_errors.push(SpecError {
                    path: "--set".into(),
                    line: None,
                    message: e.to_string(),
                }),
            }
        }
        let loc = Locator::new(text);
        let mut c = Collector {
            loc: &loc,
            errors: override_errors,
            overridden,
        };
        let p = Self::check(catalog, &mut c, &root);
        if let Some(toml::Value::Array(inputs)) = root.get("inputs") {
            for (i, v) in inputs.iter().enumerate() {
                let Some(toml::Value::Array(paths)) = v.get("paths") else {
                    continue;
                };
                let paths: Vec<String> = paths
                    .iter()
                    .filter_map(|p| p.as_str().map(str::to_string))
                    .collect();
                for problem in check_paths(&paths) {
                    c.push(
                        vec![key("inputs"), PathSeg::Index(i), key("paths")],
                        problem,
                    );
                }
            }
        }
        match p {
            Some(mut p) if c.errors.is_empty() => {
                let canonical = serde_json::to_string(&PipelineHashView(&p)).unwrap_or_default();
                p.hash = crate::id::sha1_hex(&canonical);
                Ok(p)
            }
            _ => Err(fail(c.errors)),
        }
    }

    fn check(
        catalog: &dyn StageCatalog,
        c: &mut Collector<'_>,
        root: &toml::Table,
    ) -> Option<Pipeline> {
        for k in root.keys() {
            if !TOP_KEYS.contains(&k.as_str()) {
                c.push(
                    vec![key(k)],
                    format!("unknown key `{k}`, expected one of {}", TOP_KEYS.join(", ")),
                );
            }
        }
        let version = match root.get("version") {
            None => {
                c.push(
                    vec![],
                    format!("missing `version` (this build reads version = {SPEC_VERSION})"),
                );
                None
            }
            Some(toml::Value::Integer(v)) if *v == SPEC_VERSION => Some(*v),
            Some(v) => {
                c.push(
                    vec![key("version")],
                    format!("unsupported version {v}; this build reads version = {SPEC_VERSION}"),
                );
                None
            }
        };
        let name = match root.get("name") {
            Some(toml::Value::String(s)) if !s.trim().is_empty() => s.clone(),
            Some(_) => {
                c.push(vec![key("name")], "`name` must be a non-empty string");
                String::new()
            }
            None => "pipeline".to_string(),
        };
        let description = root
            .get("description")
            .and_then(|v| v.as_str())
            .map(str::to_string);
        let output = match root.get("output") {
            Some(toml::Value::String(s)) => {
                if let Err(m) = check_location(s) {
                    c.push(vec![key("output")], m);
                }
                s.clone()
            }
            Some(_) => {
                c.push(
                    vec![key("output")],
                    "`output` must be a string (path or URL)",
                );
                String::new()
            }
            None => {
                c.push(vec![], "missing `output` (where the run writes everything)");
                String::new()
            }
        };
        let run = match root.get("run") {
            Some(v) => c
                .de::<RunSpec>(&[key("run")], v.clone())
                .unwrap_or_default(),
            None => RunSpec::default(),
        };
        if run.shards == 0 || run.shards > 65_536 {
            c.push(
                vec![key("run"), key("shards")],
                "`shards` must be between 1 and 65536",
            );
        }
        if run.batch_size == 0 {
            c.push(
                vec![key("run"), key("batch_size")],
                "`batch_size` must be at least 1",
            );
        }
        if !(0.0..=1.0).contains(&run.max_bad_ratio) {
            c.push(
                vec![key("run"), key("max_bad_ratio")],
                "`max_bad_ratio` must be between 0.0 and 1.0",
            );
        }

        let mut inputs = Vec::new();
        match root.get("inputs") {
            None => c.push(
                vec![],
                "no `[[inputs]]`: a pipeline needs at least one input",
            ),
            Some(toml::Value::Array(a)) => {
                if a.is_empty() {
                    c.push(vec![key("inputs")], "`inputs` is empty");
                }
                for (i, v) in a.iter().enumerate() {
                    let base = vec![key("inputs"), PathSeg::Index(i)];
                    if let Some(inp) = check_input(c, &base, v) {
                        inputs.push(inp);
                    }
                }
            }
            Some(_) => c.push(
                vec![key("inputs")],
                "`inputs` must be an array of tables `[[inputs]]`",
            ),
        }
        let mut names = BTreeSet::new();
        for (i, inp) in inputs.iter().enumerate() {
            if !names.insert(inp.name.clone()) {
                c.push(
                    vec![key("inputs"), PathSeg::Index(i), key("name")],
                    format!("duplicate input name `{}`", inp.name),
                );
            }
        }
        // Names of inputs that failed to parse still count, so references to them are not
        // reported as dangling on top of the real error.
        let mut input_names: BTreeSet<String> = names.clone();
        if let Some(toml::Value::Array(a)) = root.get("inputs") {
            for v in a {
                if let Some(n) = v.get("name").and_then(|n| n.as_str()) {
                    input_names.insert(n.to_string());
                }
            }
        }

        let llm = match root.get("llm") {
            Some(v) => {
                let spec = c.de::<LlmSpec>(&[key("llm")], v.clone());
                match &spec {
                    Some(l) => check_llm(c, l),
                    // Still report a bad URL next to the key errors.
                    None => {
                        if let Some(url) = v.get("base_url").and_then(|u| u.as_str()) {
                            check_llm_url(c, url);
                        }
                    }
                }
                spec
            }
            None => None,
        };
        let mut stages = Vec::new();
        match root.get("stages") {
            None => {}
            Some(toml::Value::Array(a)) => {
                for i in 0..a.len() {
                    if let Some(st) = check_stage(catalog, c, i, a, &inputs, llm.as_ref()) {
                        stages.push(st);
                    }
                }
            }
            Some(_) => c.push(
                vec![key("stages")],
                "`stages` must be an array of tables `[[stages]]`",
            ),
        }
        for (i, st) in stages.iter().enumerate() {
            if !names.insert(st.name.clone()) {
                c.push(
                    vec![key("stages"), PathSeg::Index(i), key("name")],
                    format!(
                        "duplicate name `{}` (names are shared by inputs and stages)",
                        st.name
                    ),
                );
            }
        }
        for (i, st) in stages.iter().enumerate() {
            if stages[..i].iter().any(|o| o.kind == st.kind) {
                c.push(
                    vec![key("stages"), PathSeg::Index(i), key("kind")],
                    format!(
                        "a second `{}` stage: a pipeline runs each stage kind once",
                        st.kind
                    ),
                );
            }
            for (j, r) in st.inputs.iter().enumerate() {
                if !input_names.contains(r) {
                    c.push(
                        vec![
                            key("stages"),
                            PathSeg::Index(i),
                            key("inputs"),
                            PathSeg::Index(j),
                        ],
                        format!("`{r}` names no input (stages read the pipeline's inputs)"),
                    );
                }
            }
        }
        if llm.is_none() && !root.contains_key("llm") {
            for (i, st) in stages.iter().enumerate() {
                if catalog.uses_llm(&st.kind) {
                    c.push(
                        vec![key("stages"), PathSeg::Index(i), key("kind")],
                        format!(
                            "the `{}` stage calls an LLM: add an `[llm]` section with `base_url` and `model`",
                            st.kind
                        ),
                    );
                }
            }
        }
        Some(Pipeline {
            version: version?,
            name,
            description,
            output,
            run,
            inputs,
            stages,
            llm,
            hash: String::new(),
        })
    }

    /// The input named `name`.
    pub fn input(&self, name: &str) -> Option<&InputSpec> {
        self.inputs.iter().find(|i| i.name == name)
    }
}

#[derive(Serialize)]
struct PipelineHashView<'a>(#[serde(with = "hash_view")] &'a Pipeline);

mod hash_view {
    use super::Pipeline;
    use serde::Serializer;
    use serde::ser::SerializeStruct;

    pub fn serialize<S: Serializer>(p: &&Pipeline, s: S) -> Result<S::Ok, S::Error> {
        // `output`, `run.parallelism` and `run.shards` are left out: where a run writes, how
        // many threads it uses and how many tasks it is spread over are not part of what it
        // makes (every stage's outputs are the same for any shard count).
        let run = super::RunSpec {
            parallelism: 0,
            shards: 1,
            ..p.run.clone()
        };
        let mut st = s.serialize_struct("Pipeline", 6)?;
        st.serialize_field("version", &p.version)?;
        st.serialize_field("name", &p.name)?;
        st.serialize_field("run", &run)?;
        st.serialize_field("inputs", &p.inputs)?;
        st.serialize_field("stages", &p.stages)?;
        // What the teacher is, not where it runs or how it is paid for: the server's URL,
        // key, concurrency, timeouts, cache and budget do not change what it answers.
        if let Some(l) = &p.llm {
            let teacher = serde_json::json!({
                "model": l.model,
                "model_revision": l.model_revision,
                "seed": l.seed,
            });
            st.serialize_field("llm", &teacher)?;
        }
        st.end()
    }
}

fn check_input(c: &mut Collector<'_>, base: &[PathSeg], v: &toml::Value) -> Option<InputSpec> {
    let raw: RawInput = c.de(base, v.clone())?;
    let mut ok = true;
    let with = |k: &str| {
        let mut p = base.to_vec();
        p.push(key(k));
        p
    };
    if !valid_name(&raw.name) {
        c.push(
            with("name"),
            format!(
                "bad name `{}`: use letters, digits, `_`, `.` and `-` (it names output files)",
                raw.name
            ),
        );
        ok = false;
    }
    let format = Format::from_name(&raw.format);
    if format.is_none() {
        let all: Vec<&str> = Format::ALL.iter().map(|f| f.name()).collect();
        c.push(
            with("format"),
            format!(
                "unknown format `{}`, expected one of {}",
                raw.format,
                all.join(", ")
            ),
        );
        ok = false;
    }
    if raw.paths.is_empty() {
        c.push(with("paths"), "`paths` must name at least one file");
        ok = false;
    }
    for (i, p) in raw.paths.iter().enumerate() {
        if let Err(m) = check_location(p) {
            let mut path = with("paths");
            path.push(PathSeg::Index(i));
            c.push(path, m);
            ok = false;
        }
    }
    let format = format?;
    let opts_val = toml::Value::Table(raw.options.unwrap_or_default());
    let ob = with("options");
    let options = match format {
        Format::MediaWiki => c.de(&ob, opts_val).map(FormatOptions::MediaWiki),
        Format::Freebase => c.de(&ob, opts_val).map(FormatOptions::Freebase),
        Format::Wikidata => c.de(&ob, opts_val).map(FormatOptions::Wikidata),
        Format::Fb15k => c.de(&ob, opts_val).map(FormatOptions::Fb15k),
        Format::HybridQa => c.de(&ob, opts_val).map(FormatOptions::HybridQa),
        Format::MetaQa => c.de(&ob, opts_val).map(FormatOptions::MetaQa),
        _ => c
            .de::<NoOptions>(&ob, opts_val)
            .map(|_| FormatOptions::None(NoOptions {})),
    };
    if raw.split.is_some() && !format.is_qa() {
        c.push(
            with("split"),
            format!("`split` applies to QA datasets, not `{format}`"),
        );
        ok = false;
    }
    let options = options?;
    ok.then_some(InputSpec {
        name: raw.name,
        format,
        paths: raw.paths,
        split: raw.split,
        options,
    })
}

fn check_stage(
    catalog: &dyn StageCatalog,
    c: &mut Collector<'_>,
    index: usize,
    stages: &[toml::Value],
    inputs: &[InputSpec],
    llm: Option<&LlmSpec>,
) -> Option<StageSpec> {
    let base = vec![key("stages"), PathSeg::Index(index)];
    let raw: RawStage = c.de(&base, stages[index].clone())?;
    let with = |k: &str| {
        let mut p = base.clone();
        p.push(key(k));
        p
    };
    let kinds = catalog.kinds();
    let Some(kind) = kinds.iter().find(|k| **k == raw.kind) else {
        c.push(
            with("kind"),
            format!(
                "unknown stage kind `{}`, expected one of {}",
                raw.kind,
                kinds.join(", ")
            ),
        );
        return None;
    };
    if let Some(n) = &raw.name
        && !valid_name(n)
    {
        c.push(
            with("name"),
            format!("bad name `{n}`: use letters, digits, `_`, `.` and `-`"),
        );
    }
    if raw.tasks.is_some_and(|t| t == 0 || t > 65_536) {
        c.push(with("tasks"), "`tasks` must be between 1 and 65536");
    }
    let mut cx = StageCheck {
        c,
        index,
        options: toml::Value::Table(raw.options.unwrap_or_default()),
        inputs,
        stage_inputs: inputs
            .iter()
            .filter(|i| raw.inputs.as_ref().is_none_or(|n| n.contains(&i.name)))
            .collect(),
        llm,
        stages,
    };
    let options = catalog.check(kind, &mut cx)?;
    Some(StageSpec {
        name: raw.name.unwrap_or_else(|| kind.to_string()),
        kind: kind.to_string(),
        inputs: raw
            .inputs
            .unwrap_or_else(|| inputs.iter().map(|i| i.name.clone()).collect()),
        options,
        gpus: raw.gpus,
        tasks: raw.tasks,
    })
}

fn check_llm_url(c: &mut Collector<'_>, url: &str) {
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        c.push(
            vec![key("llm"), key("base_url")],
            format!("`{url}` is not an http(s) URL (e.g. http://vllm:8000/v1)"),
        );
    }
}

fn check_llm(c: &mut Collector<'_>, l: &LlmSpec) {
    let at = |k: &str| vec![key("llm"), key(k)];
    check_llm_url(c, &l.base_url);
    if l.model.trim().is_empty() {
        c.push(at("model"), "`model` must name the served model");
    }
    if l.max_concurrency == 0 {
        c.push(
            at("max_concurrency"),
            "`max_concurrency` must be at least 1",
        );
    }
    if l.timeout_secs == 0 {
        c.push(at("timeout_secs"), "`timeout_secs` must be at least 1");
    }
    if let Some(v) = &l.api_key_env
        && v.trim().is_empty()
    {
        c.push(at("api_key_env"), "`api_key_env` names no variable");
    }
    if let Some(cache) = &l.cache
        && let Err(m) = check_location(cache)
    {
        c.push(at("cache"), m);
    }
    if l.price.input_per_million < 0.0 || l.price.output_per_million < 0.0 {
        c.push(at("price"), "prices must not be negative");
    }
    if l.budget.max_cost.is_some_and(|m| m <= 0.0) || l.budget.max_tokens == Some(0) {
        c.push(at("budget"), "budget limits must be positive");
    }
}

/// Input and stage names become part of output file names: ASCII letters, digits, `_`, `.`
/// and `-`, not starting with `.` or `-`.
pub fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && !s.starts_with(['.', '-'])
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// Checks that a location is a local path or a URL with a scheme object_store serves.
pub fn check_location(s: &str) -> Result<(), String> {
    if s.trim().is_empty() {
        return Err("empty path".into());
    }
    if let Some((scheme, rest)) = s.split_once("://") {
        const OK: &[&str] = &[
            "file", "s3", "s3a", "gs", "az", "azure", "abfs", "abfss", "memory",
        ];
        if !OK.contains(&scheme) {
            return Err(format!(
                "unsupported URL scheme `{scheme}://`, expected a local path or one of {}",
                OK.iter()
                    .map(|s| format!("{s}://"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        if rest.is_empty() && scheme != "memory" {
            return Err(format!("`{s}` names no bucket or path"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in for the executor's registry: an `hseq` kind with one option and a
    /// `triples` kind that calls the LLM and checks its `unit`.
    struct Toy;

    #[derive(Debug, Default, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct ToyHseq {
        #[serde(default)]
        cells: bool,
        /// Left out of the hash, as an execution setting would be.
        #[serde(default, skip_serializing)]
        memory: u64,
    }

    #[derive(Debug, Default, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct ToyTriples {
        #[serde(default)]
        unit: Option<String>,
    }

    impl StageCatalog for Toy {
        fn kinds(&self) -> Vec<&'static str> {
            vec!["hseq", "triples"]
        }
        fn uses_llm(&self, kind: &str) -> bool {
            kind == "triples"
        }
        fn check(&self, kind: &str, cx: &mut StageCheck<'_, '_>) -> Option<StageOptions> {
            if kind == "hseq" {
                return cx.options::<ToyHseq>().map(StageOptions::new);
            }
            let o: ToyTriples = cx.options()?;
            if let Some(u) = o.unit.as_deref().filter(|u| *u != "paragraph") {
                cx.error("unit", format!("unknown unit `{u}`"));
            }
            Some(StageOptions::new(o))
        }
    }

    fn parse(file: &str, text: &str, set: &[String]) -> Result<Pipeline, SpecErrors> {
        Pipeline::parse(&Toy, file, text, set)
    }

    fn hseq(p: &Pipeline) -> &ToyHseq {
        p.stages[0].options.get::<ToyHseq>().unwrap()
    }

    const GOOD: &str = r#"
version = 1
name = "t"
output = "out/t"

[run]
shards = 2

[[inputs]]
name = "wiki"
format = "mediawiki"
paths = ["a.xml.bz2"]
options = { namespaces = [0, 14] }

[[inputs]]
name = "hp"
format = "hotpotqa"
paths = ["h.json"]
split = "dev"

[[stages]]
kind = "hseq"
"#;

    #[test]
    fn parses_a_good_file() {
        let p = parse("t.toml", GOOD, &[]).unwrap();
        assert_eq!(p.run.shards, 2);
        assert_eq!(p.inputs.len(), 2);
        assert_eq!(
            p.inputs[0].options,
            FormatOptions::MediaWiki(MediaWikiOptions {
                namespaces: vec![0, 14],
                ..Default::default()
            })
        );
        assert_eq!(p.stages[0].inputs, vec!["wiki", "hp"]);
        assert_eq!(p.hash.len(), 40);
    }

    #[test]
    fn reports_every_problem_with_lines() {
        let bad = r#"
version = 1
output = "ftp://x"
colour = "blue"

[run]
shards = 0
speed = 3

[[inputs]]
name = "a"
format = "mediawki"
paths = ["x"]

[[inputs]]
name = "b"
format = "freebase"
paths = ["y"]
options = { english = true }

[[stages]]
kind = "hseq"
inputs = ["nope"]
"#;
        let e = parse("bad.toml", bad, &[]).unwrap_err();
        let text = e.to_string();
        for needle in [
            "colour",
            "ftp://",
            "speed",
            "mediawki",
            "english",
            "`nope` names no input",
        ] {
            assert!(text.contains(needle), "missing {needle} in:\n{text}");
        }
        let colour = e.errors.iter().find(|x| x.path == "colour").unwrap();
        assert_eq!(colour.line.map(|l| l.0), Some(4));
        let eng = e
            .errors
            .iter()
            .find(|x| x.path.contains("english"))
            .unwrap();
        assert_eq!(eng.path, "inputs[1].options.english");
        assert_eq!(eng.line.map(|l| l.0), Some(19), "{eng:?}");
        let fmt = e
            .errors
            .iter()
            .find(|x| x.path.ends_with("format"))
            .unwrap();
        assert_eq!(fmt.line.map(|l| l.0), Some(12), "{fmt:?}");
    }

    #[test]
    fn overrides_change_any_value() {
        let p = parse(
            "t.toml",
            GOOD,
            &[
                "output=s3://bucket/run".into(),
                "run.shards=8".into(),
                "inputs.wiki.paths=[\"b.xml\"]".into(),
                "inputs.1.split=train".into(),
                "stages.0.options.cells=true".into(),
            ],
        )
        .unwrap();
        assert_eq!(p.output, "s3://bucket/run");
        assert_eq!(p.run.shards, 8);
        assert_eq!(p.inputs[0].paths, vec!["b.xml"]);
        assert_eq!(p.inputs[1].split.as_deref(), Some("train"));
        assert!(hseq(&p).cells);
        let base = parse("t.toml", GOOD, &[]).unwrap();
        assert_ne!(base.hash, p.hash);
        // The output location is not part of the pipeline's identity.
        let moved = parse(
            "t.toml",
            GOOD,
            &[
                "output=/elsewhere".into(),
                "run.parallelism=3".into(),
                "run.shards=16".into(),
            ],
        )
        .unwrap();
        // Nor are the threads and the shards (tasks) it runs on.
        assert_eq!(base.hash, moved.hash);
    }

    #[test]
    fn bad_overrides_are_reported() {
        let e = parse(
            "t.toml",
            GOOD,
            &["inputs.nope.paths=[]".into(), "novalue".into()],
        )
        .unwrap_err();
        assert_eq!(e.errors.len(), 2, "{e}");
        let e = parse("t.toml", GOOD, &["run.shards=\"many\"".into()]).unwrap_err();
        assert!(e.to_string().contains("run.shards"), "{e}");
    }

    #[test]
    fn every_bad_key_of_a_table_is_reported() {
        let text = GOOD.replace(
            "shards = 2",
            "shards = \"x\"\nbatch_size = \"y\"\nspeed = 1",
        );
        let e = parse("t.toml", &text, &[]).unwrap_err();
        let paths: Vec<&str> = e.errors.iter().map(|x| x.path.as_str()).collect();
        assert!(paths.contains(&"run.shards"), "{e}");
        assert!(paths.contains(&"run.batch_size"), "{e}");
        assert!(paths.contains(&"run.speed"), "{e}");
        // A broken input still counts as a name: no dangling-reference error on top.
        let text = GOOD.replace("format = \"hotpotqa\"", "format = \"hotpotqa\"\npathz = 1");
        let text = text.replace("kind = \"hseq\"", "kind = \"hseq\"\ninputs = [\"hp\"]");
        let e = parse("t.toml", &text, &[]).unwrap_err();
        assert_eq!(e.errors.len(), 1, "{e}");
        assert_eq!(e.errors[0].path, "inputs[1].pathz");
    }

    #[test]
    fn override_errors_point_at_the_override() {
        let e = parse("t.toml", GOOD, &["run.shards=0".into()]).unwrap_err();
        assert_eq!(e.errors.len(), 1);
        assert_eq!(e.errors[0].line, None);
        assert!(e.errors[0].message.contains("--set run.shards=0"), "{e}");
    }

    #[test]
    fn the_llm_section_is_checked_and_the_cache_defaults_beside_the_output() {
        let text =
            GOOD.to_string() + "\n[[stages]]\nkind = \"triples\"\noptions = { unit = \"page\" }\n";
        let e = parse("p.toml", &text, &[]).unwrap_err().to_string();
        assert!(e.contains("add an `[llm]` section"), "{e}");
        assert!(e.contains("unknown unit `page`"), "{e}");
        let text = GOOD.to_string()
            + "\n[[stages]]\nkind = \"triples\"\n[llm]\nbase_url = \"vllm:8000\"\nmodel = \"m\"\ntemperature = 1\n";
        let e = parse("p.toml", &text, &[]).unwrap_err().to_string();
        assert!(e.contains("not an http(s) URL"), "{e}");
        assert!(e.contains("unknown field `temperature`"), "{e}");
        let ok = GOOD.to_string()
            + "\n[[stages]]\nkind = \"triples\"\n[llm]\nbase_url = \"http://a/v1\"\nmodel = \"m\"\n";
        let p = parse("p.toml", &ok, &[]).unwrap();
        let l = p.llm.as_ref().unwrap();
        assert_eq!(l.max_concurrency, 16);
        assert_eq!(l.cache_location("out/t"), "out/llm-cache");
        assert_eq!(l.cache_location("/data/out/t/"), "/data/out/llm-cache");
        assert_eq!(l.cache_location("s3://b/runs/t"), "s3://b/runs/llm-cache");
        assert_eq!(l.cache_location("s3://b"), "s3://b/llm-cache");
        assert_eq!(l.cache_location("t"), "llm-cache");
        // The server's address is not part of the hash; the model is.
        let moved = parse("p.toml", &ok, &["llm.base_url=http://b:1/v1".into()]).unwrap();
        assert_eq!(moved.hash, p.hash);
        assert_eq!(moved.llm.unwrap().base_url, "http://b:1/v1");
        let other = parse("p.toml", &ok, &["llm.model=n".into()]).unwrap();
        assert_ne!(other.hash, p.hash);
    }

    #[test]
    fn overrides_keep_strings_and_address_stages_by_kind() {
        let p = parse(
            "t.toml",
            GOOD,
            &[
                "name=2024-06-01".into(),
                "inputs.hp.split=2019".into(),
                "stages.hseq.options.cells=true".into(),
            ],
        )
        .unwrap();
        assert_eq!(p.name, "2024-06-01");
        assert_eq!(p.inputs[1].split.as_deref(), Some("2019"));
        assert!(hseq(&p).cells);
    }

    #[test]
    fn names_and_stage_kinds_are_checked() {
        let text = GOOD.replace("name = \"wiki\"", "name = \"wiki en\"")
            + "\n[[stages]]\nkind = \"hseq\"\nname = \"again\"\n";
        let e = parse("t.toml", &text, &[]).unwrap_err().to_string();
        assert!(e.contains("bad name `wiki en`"), "{e}");
        assert!(e.contains("second `hseq` stage"), "{e}");
        assert!(valid_name("metaqa-kb.v2_1") && !valid_name("-x") && !valid_name("a/b"));
        assert!(check_location("https://x/y").is_err());
    }

    #[test]
    fn stage_options_reach_their_stage_and_skipped_fields_stay_out_of_the_hash() {
        let set = |v: &str| vec![format!("stages.hseq.options.{v}")];
        let p = parse("t.toml", GOOD, &set("memory=4096")).unwrap();
        assert_eq!(hseq(&p).memory, 4096);
        assert_eq!(p.hash, parse("t.toml", GOOD, &[]).unwrap().hash);
        assert_ne!(
            p.hash,
            parse("t.toml", GOOD, &set("cells=true")).unwrap().hash
        );
        assert!(p.stages[0].options.get::<ToyTriples>().is_none());
        // Unknown kinds name the registry's; `tasks` is checked and not hashed.
        let text = GOOD.replace("kind = \"hseq\"", "kind = \"hsek\"");
        let e = parse("t.toml", &text, &[]).unwrap_err().to_string();
        assert!(e.contains("expected one of hseq, triples"), "{e}");
        let e = parse("t.toml", GOOD, &["stages.hseq.tasks=0".into()]).unwrap_err();
        assert!(e.to_string().contains("`tasks` must be between"), "{e}");
        let q = parse("t.toml", GOOD, &["stages.hseq.tasks=16".into()]).unwrap();
        assert_eq!(q.stages[0].tasks, Some(16));
        assert_eq!(q.hash, parse("t.toml", GOOD, &[]).unwrap().hash);
    }

    #[test]
    fn syntax_errors_have_a_position() {
        let e = parse("t.toml", "version = 1\noutput = \n", &[]).unwrap_err();
        assert_eq!(e.errors.len(), 1);
        assert_eq!(e.errors[0].line.map(|l| l.0), Some(2));
    }
}
