//! The command line: the clap types of every command's arguments, and the parsers of format
//! names.

use std::path::PathBuf;

use anyhow::Result;
use clap::{Parser, Subcommand, ValueEnum};
use distillery_cluster::auth::Token;
use distillery_cluster::client::connect;
use distillery_core::spec::Format;

#[derive(Parser)]
#[command(
    name = "distillery",
    version,
    about = "Turn raw corpora, knowledge bases and QA datasets into Parquet, HSEQ segments and training data"
)]
pub struct Cli {
    /// Only warnings and errors on stderr.
    #[arg(short, long, global = true)]
    pub quiet: bool,
    /// Debug logging (or set RUST_LOG).
    #[arg(short, long, global = true)]
    pub verbose: bool,
    /// Log lines as text (coloured only on a terminal) or as one JSON object a line, for log
    /// collectors.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

/// How log lines are written to stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
pub enum Command {
    /// Check a pipeline file and its inputs; print every problem with its location.
    Validate(ValidateArgs),
    /// Print the input files, shards, stages and outputs a run would produce.
    Plan(PlanArgs),
    /// Run a pipeline on this machine (an embedded coordinator and worker on loopback).
    Run(RunArgs),
    /// Read files of one format into an output, without a pipeline file.
    Ingest(IngestArgs),
    /// Label the questions of a QA dataset into weak positives and an SFT set, without a
    /// pipeline file: the reader, HSEQ and the label stage.
    Label(LabelArgs),
    /// Run SQL over an output; tables are registered by name (documents, tables, triples,
    /// literals, entities, questions, segments, labels, sft, quarantine, subgraphs). Without
    /// --sql, list tables and
    /// counts, and the SFT dataset view when the output has samples.
    Inspect(InspectArgs),
    /// Serve the coordinator: plans submitted jobs into tasks for workers, with its durable
    /// state (job records, one commit record per task) under --state.
    Coordinator(CoordinatorArgs),
    /// Run tasks for a coordinator until SIGTERM (then drain within --grace-secs).
    Worker(WorkerArgs),
    /// Submit a pipeline to a coordinator; with --wait, exit 0 only if the job succeeded.
    Submit(SubmitArgs),
    /// A job's progress per stage, its workers and failures (all jobs without JOB).
    Status(StatusArgs),
    /// Cancel a job.
    Cancel(CancelArgs),
    /// Reports over an output.
    Report {
        #[command(subcommand)]
        command: ReportCommand,
    },
    /// HSEQ tools.
    Hseq {
        #[command(subcommand)]
        command: HseqCommand,
    },
    /// Index roots: list versions, roll back.
    Index {
        #[command(subcommand)]
        command: IndexCommand,
    },
    /// Search the current version of an index root.
    Search(SearchArgs),
    /// Corpus roots: list versions, roll back, print the documents of a version.
    Corpus {
        #[command(subcommand)]
        command: CorpusCommand,
    },
    /// The teacher's response cache: pack its loose entries.
    Cache {
        #[command(subcommand)]
        command: CacheCommand,
    },
    /// The pages a corpus root changed since a version: added, changed, moved, deleted; and,
    /// with `--sft`, the SFT samples whose evidence is on one of them.
    Changes {
        /// The corpus root (path or URL).
        root: String,
        /// The version to compare `CURRENT` with (see `distillery corpus list`).
        #[arg(long)]
        since: String,
        /// An output holding SFT samples (its `sft` table): list those citing a changed page.
        #[arg(long)]
        sft: Option<String>,
        #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
        format: OutputFormat,
    },
}

/// The subcommands of `cache`.
#[derive(Subcommand)]
pub enum CacheCommand {
    /// Gather the loose entries of a response cache (a path or URL, as `llm.cache`) into
    /// packs, so a warm lookup reads no object of its own; then remove the loose objects
    /// packed. Safe while jobs read and write the cache.
    Pack {
        /// The response cache (path or URL).
        cache: String,
        /// Keep the loose objects after packing them.
        #[arg(long)]
        keep_loose: bool,
        #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
        format: OutputFormat,
    },
}

/// The subcommands of `corpus`.
#[derive(Subcommand)]
pub enum CorpusCommand {
    /// The versions under a corpus root, oldest first; `*` marks the one `CURRENT` names.
    List {
        /// The corpus root (path or URL).
        root: String,
        #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
        format: OutputFormat,
    },
    /// Point `CURRENT` at an earlier (or any) version.
    Rollback { root: String, version: String },
    /// The live documents of a version (default: the current one) as JSON lines; with
    /// `--segments`, their HSEQ segments (a corpus stage with `segments`).
    Cat {
        root: String,
        #[arg(long)]
        version: Option<String>,
        #[arg(long)]
        segments: bool,
    },
}

/// The subcommands of `index`.
#[derive(Subcommand)]
pub enum IndexCommand {
    /// The versions under an index root, oldest first; `*` marks the one `CURRENT` names.
    List {
        /// The index root (path or URL).
        root: String,
        #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
        format: OutputFormat,
    },
    /// Point `CURRENT` at an earlier (or any) version.
    Rollback { root: String, version: String },
}

/// How `search` and `index list` print.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    Table,
    Json,
}

/// How `search` ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SearchKind {
    Bm25,
    Dense,
    /// Reciprocal-rank fusion of BM25 and dense.
    Hybrid,
}

/// The arguments of `search`.
#[derive(clap::Args)]
pub struct SearchArgs {
    /// The index root (path or URL).
    pub root: String,
    pub query: String,
    #[arg(long, value_enum, default_value_t = SearchKind::Bm25)]
    pub kind: SearchKind,
    /// Hits to print.
    #[arg(short = 'k', long = "k", default_value_t = 10)]
    pub k: usize,
    /// A version other than the current one.
    #[arg(long)]
    pub version: Option<String>,
    /// `json`: one object per line with `id`, `document_id`, `title`, `score`, `text`.
    #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
    pub format: OutputFormat,
}

/// The arguments of `validate`.
#[derive(clap::Args)]
pub struct ValidateArgs {
    pub file: PathBuf,
    /// Override a value of the file: key.path=value (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
}

/// The arguments of `plan`.
#[derive(clap::Args)]
pub struct PlanArgs {
    pub file: PathBuf,
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Also project the LLM calls, tokens and cost of the teacher stages: a sample of
    /// passages is read and its prompts rendered and counted (server /tokenize, else
    /// --tokenizer, else 4 characters a token).
    #[arg(long)]
    pub estimate: bool,
    /// Passages sampled per LLM stage for --estimate.
    #[arg(long, default_value_t = 200)]
    pub sample: usize,
    /// A Hugging Face tokenizer.json to count tokens when the server cannot.
    #[arg(long)]
    pub tokenizer: Option<String>,
}

/// The arguments of `run`.
#[derive(clap::Args)]
pub struct RunArgs {
    pub file: PathBuf,
    /// Override a value of the file: key.path=value (repeatable), e.g.
    /// `--set output=s3://bucket/run --set run.shards=16 --set inputs.wiki.paths=["a.xml.bz2"]`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Serve the job page (and /metrics) on this address while the run lasts, e.g.
    /// `--ui 127.0.0.1:8080`, then open http://127.0.0.1:8080/.
    #[arg(long, value_name = "ADDR")]
    pub ui: Option<std::net::SocketAddr>,
}

/// The arguments of `ingest`.
#[derive(clap::Args)]
pub struct IngestArgs {
    #[arg(value_parser = parse_format)]
    pub format: Format,
    #[arg(required = true)]
    pub inputs: Vec<String>,
    /// Output location (path or s3://, gs://, az:// URL).
    #[arg(long)]
    pub out: String,
    /// Also linearize into HSEQ segments.
    #[arg(long)]
    pub hseq: bool,
    /// Parquet shards per table.
    #[arg(long, default_value_t = 4)]
    pub shards: u32,
    /// Split name for QA datasets.
    #[arg(long)]
    pub split: Option<String>,
    /// Reader option: key=value, value as TOML (e.g. `namespaces=[0,14]`).
    #[arg(long = "option", value_name = "KEY=VALUE")]
    pub options: Vec<String>,
    /// Share of bad records above which the run fails.
    #[arg(long, default_value_t = 0.05)]
    pub max_bad_ratio: f64,
}

/// The arguments of `label`.
#[derive(clap::Args)]
pub struct LabelArgs {
    /// The QA dataset format: hotpotqa, musique, 2wiki, hybridqa, tatqa, metaqa, cwq,
    /// simpleqa, webquestions, webqsp, qald, hotpotadv, zeroshot-re.
    #[arg(value_parser = parse_qa_format)]
    pub dataset: Format,
    /// Question files (paths, globs or object-store URLs).
    #[arg(required = true)]
    pub inputs: Vec<String>,
    /// Output location (path or s3://, gs://, az:// URL).
    #[arg(long)]
    pub out: String,
    /// Labelling methods, comma-separated (answer-aware, hseq-paper; default answer-aware);
    /// answer-aware's trajectories become the SFT samples when it is listed, else the first
    /// method's.
    #[arg(long = "method", value_delimiter = ',')]
    pub methods: Vec<String>,
    /// Size group: small, medium or large.
    #[arg(long)]
    pub preset: Option<String>,
    /// A knowledge base file for k-hop subgraphs of the questions' topic entities
    /// (MetaQA); repeatable.
    #[arg(long)]
    pub kb_input: Vec<String>,
    /// Format of --kb-input.
    #[arg(long, value_parser = parse_format, default_value = "metaqa-kb")]
    pub kb_format: Format,
    /// Evaluation files whose questions must not appear in any sample (repeatable).
    #[arg(long)]
    pub decontaminate: Vec<String>,
    /// Format of the --decontaminate files (default: told from each file's first record).
    #[arg(long, value_parser = parse_qa_format)]
    pub decontaminate_format: Option<Format>,
    /// Parquet shards per table.
    #[arg(long, default_value_t = 4)]
    pub shards: u32,
    /// Split name of the questions.
    #[arg(long)]
    pub split: Option<String>,
    /// Reader option: key=value, value as TOML (e.g. `tables_dir="WikiTables-WithLinks"`).
    #[arg(long = "option", value_name = "KEY=VALUE")]
    pub options: Vec<String>,
    /// Share of bad records above which the run fails.
    #[arg(long, default_value_t = 0.05)]
    pub max_bad_ratio: f64,
    /// Override a value of the generated pipeline: key.path=value (repeatable), e.g.
    /// `--set stages.label.options.validation_share=0.1`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
}

/// The arguments of `inspect`.
#[derive(clap::Args)]
pub struct InspectArgs {
    pub url: String,
    /// The query. It may only read the output's tables: CREATE [EXTERNAL] TABLE, CREATE VIEW,
    /// DROP, INSERT, COPY ... TO and SET are refused unless --allow-writes is given.
    #[arg(long)]
    pub sql: Option<String>,
    #[arg(long, value_enum, default_value_t = OutFormat::Table)]
    pub format: OutFormat,
    /// Let --sql run DDL, DML and statements: CREATE EXTERNAL TABLE (reads any file),
    /// COPY ... TO and INSERT (write any file this user may write), DROP, SET.
    #[arg(long, requires = "sql")]
    pub allow_writes: bool,
}

/// The arguments of `coordinator`.
#[derive(clap::Args)]
pub struct CoordinatorArgs {
    /// gRPC address.
    #[arg(long, default_value = "0.0.0.0:7070")]
    pub listen: std::net::SocketAddr,
    /// Where the state lives: a path or an object-store URL.
    #[arg(long)]
    pub state: String,
    /// Address of /metrics, /healthz, /readyz and the job pages (`/`, `/jobs/<id>`).
    #[arg(long)]
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// Connections that port serves at once (more wait to be accepted); one that sends no
    /// request within 10 s is closed.
    #[arg(long, default_value_t = 2048)]
    pub metrics_max_connections: usize,
    /// A file holding the shared token (else DISTILLERY_TOKEN).
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// Seconds a lease lasts without a heartbeat.
    #[arg(long, default_value_t = 15.0)]
    pub lease_secs: f64,
    /// Milliseconds between worker pulls.
    #[arg(long, default_value_t = 1000)]
    pub heartbeat_ms: u64,
    /// Attempts of a task before its job fails.
    #[arg(long, default_value_t = 4)]
    pub max_attempts: u32,
    /// First retry delay in milliseconds (doubled per attempt).
    #[arg(long, default_value_t = 500)]
    pub backoff_ms: u64,
    /// Copy a task running this many times longer than its stage's median (0: never).
    #[arg(long, default_value_t = 4.0)]
    pub straggler_factor: f64,
    /// ...once it has run at least this many seconds.
    #[arg(long, default_value_t = 30.0)]
    pub straggler_min_secs: f64,
    /// PEM certificate chain for TLS (with --tls-key).
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
}

/// The arguments of `worker`.
#[derive(clap::Args)]
pub struct WorkerArgs {
    #[command(flatten)]
    pub conn: Conn,
    /// Worker id (default: host name, pid and a random suffix).
    #[arg(long)]
    pub worker_id: Option<String>,
    /// Tasks at once.
    #[arg(long, default_value_t = 1)]
    pub slots: u32,
    /// GPUs this worker offers.
    #[arg(long, default_value_t = 0)]
    pub gpus: u32,
    /// A label key=value (repeatable).
    #[arg(long = "label")]
    pub labels: Vec<String>,
    /// Threads per task (default: cores / slots).
    #[arg(long)]
    pub parallelism: Option<usize>,
    /// Seconds running tasks get to finish after SIGTERM.
    #[arg(long, default_value_t = 60)]
    pub grace_secs: u64,
    /// Address of /metrics, /healthz and /readyz.
    #[arg(long)]
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// Connections that port serves at once (more wait to be accepted); one that sends no
    /// request within 10 s is closed.
    #[arg(long, default_value_t = 2048)]
    pub metrics_max_connections: usize,
}

/// The arguments of `submit`.
#[derive(clap::Args)]
pub struct SubmitArgs {
    pub file: PathBuf,
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    #[command(flatten)]
    pub conn: Conn,
    #[arg(long)]
    pub wait: bool,
}

/// The arguments of `status`.
#[derive(clap::Args)]
pub struct StatusArgs {
    pub job: Option<String>,
    #[command(flatten)]
    pub conn: Conn,
    /// `json`: one object per job with its stages and each stage's tasks (task, state,
    /// worker, attempts, records_out, seconds).
    #[arg(long, value_enum, default_value_t = ReportFormat::Table)]
    pub format: ReportFormat,
}

/// The arguments of `cancel`.
#[derive(clap::Args)]
pub struct CancelArgs {
    pub job: String,
    #[command(flatten)]
    pub conn: Conn,
}

#[derive(Subcommand)]
pub enum ReportCommand {
    /// Weak positives against gold evidence: precision, recall and F1 per dataset, method,
    /// level and question type, from the output's `labels` and `questions` tables. `html`:
    /// the whole output on one page (stages, quarantine, labels, CIRAG's cascade, subgraphs
    /// per hop, indexes), e.g. `> report.html`.
    Labels {
        url: String,
        #[arg(long, value_enum, default_value_t = ReportFormat::Table)]
        format: ReportFormat,
    },
    /// HANRAG's accuracy on a compound benchmark split (`<stage>/benchmark/<split>.jsonl` of
    /// a `compound` stage): the share of each answer's entities found in the prediction of
    /// JSON lines `{"id", "prediction"}`, overall and per number of sub-questions.
    Compound {
        benchmark: String,
        predictions: String,
        #[arg(long, value_enum, default_value_t = ReportFormat::Table)]
        format: ReportFormat,
    },
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    Table,
    Json,
    /// One self-contained HTML page (charts as inline SVG), on standard output.
    Html,
}

#[derive(Subcommand)]
pub enum HseqCommand {
    /// Decode every source of an output from its segments and compare with the source under
    /// the paper's equivalence; exit non-zero on any mismatch.
    Verify { url: String },
}

#[derive(Clone, Copy, ValueEnum)]
pub enum OutFormat {
    Table,
    Csv,
    Json,
}

fn parse_format(s: &str) -> Result<Format, String> {
    Format::from_name(s).ok_or_else(|| {
        let all: Vec<&str> = Format::ALL.iter().map(|f| f.name()).collect();
        format!("unknown format `{s}`, expected one of {}", all.join(", "))
    })
}

fn parse_qa_format(s: &str) -> Result<Format, String> {
    let f = parse_format(s)?;
    if f.is_qa() {
        Ok(f)
    } else {
        let qa: Vec<&str> = Format::ALL
            .iter()
            .filter(|f| f.is_qa())
            .map(|f| f.name())
            .collect();
        Err(format!(
            "`{s}` is not a QA dataset format, expected one of {}",
            qa.join(", ")
        ))
    }
}

/// Connection flags shared by the client commands.
#[derive(clap::Args, Debug, Clone)]
pub struct Conn {
    /// The coordinator's gRPC URL.
    #[arg(
        long,
        env = "DISTILLERY_COORDINATOR",
        default_value = "http://127.0.0.1:7070"
    )]
    pub coordinator: String,
    /// A file holding the shared token (else DISTILLERY_TOKEN).
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// PEM of the CA to trust for an https:// coordinator.
    #[arg(long)]
    pub tls_ca: Option<PathBuf>,
}

impl Conn {
    /// A client of the coordinator these flags name.
    pub fn client(&self) -> Result<distillery_cluster::client::Client> {
        let token = Token::load(self.token_file.as_deref())?;
        Ok(connect(&self.coordinator, token, self.tls_ca.as_deref())?)
    }
}
