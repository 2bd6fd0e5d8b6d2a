//! `distillery`: the one binary.
//!
//! - `validate FILE` checks a pipeline file (and that its inputs exist), printing every problem;
//! - `plan FILE [--estimate]` prints the files, shards, stages and outputs a run would
//!   produce (and projects the LLM calls, tokens and cost of its teacher stages);
//! - `run FILE [--set key.path=value ...]` runs it on this machine (exit 3: stopped by the
//!   `[llm.budget]`, nothing published, rerun to resume from the response cache);
//! - `ingest FORMAT INPUT... --out URL [--hseq]` runs a one-reader pipeline without a file;
//! - `label DATASET INPUT... --out URL [--method M,...] [--preset P] [--kb-input FILE]` runs a
//!   QA reader, HSEQ and the label stage without a file;
//! - `inspect URL [--sql QUERY] [--format table|csv|json]` answers SQL over an output (and,
//!   without `--sql`, shows the SFT dataset view of an output that has one);
//! - `report labels URL [--format table|json]` compares an output's weak positives with the
//!   gold evidence of its questions;
//! - `hseq verify URL` decodes every source of an output from its segments and compares.
//!
//! `anyhow` is used here only; the library crates return typed errors. DataFusion is a
//! dependency of this crate alone (it is the heaviest part of the build), for `inspect`.
//! `tikv-jemallocator` (jemalloc) is the global allocator: faster than glibc's for the
//! labeller's many small strings, and at least as fast as mimalloc with less peak memory
//! (measured with `scripts/bench-label.sh`, see docs/benchmarks.md).

mod cluster;
mod inspect;
mod out;
mod report;

use crate::out::{out, outln};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand, ValueEnum};
use distillery_core::spec::{Format, Pipeline};
use distillery_exec::run::{ProgressMode, RunOutcome, plan_pipeline};
use distillery_label::{LABEL_METHODS, LABEL_PRESETS};
use tracing_subscriber::EnvFilter;

#[derive(Parser)]
#[command(
    name = "distillery",
    version,
    about = "Turn raw corpora, knowledge bases and QA datasets into Parquet, HSEQ segments and training data"
)]
struct Cli {
    /// Only warnings and errors on stderr.
    #[arg(short, long, global = true)]
    quiet: bool,
    /// Debug logging (or set RUST_LOG).
    #[arg(short, long, global = true)]
    verbose: bool,
    /// Log lines as text (coloured only on a terminal) or as one JSON object a line, for log
    /// collectors.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

/// How log lines are written to stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Check a pipeline file and its inputs; print every problem with its location.
    Validate {
        file: PathBuf,
        /// Override a value of the file: key.path=value (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
    },
    /// Print the input files, shards, stages and outputs a run would produce.
    Plan {
        file: PathBuf,
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// Also project the LLM calls, tokens and cost of the teacher stages: a sample of
        /// passages is read and its prompts rendered and counted (server /tokenize, else
        /// --tokenizer, else 4 characters a token).
        #[arg(long)]
        estimate: bool,
        /// Passages sampled per LLM stage for --estimate.
        #[arg(long, default_value_t = 200)]
        sample: usize,
        /// A Hugging Face tokenizer.json to count tokens when the server cannot.
        #[arg(long)]
        tokenizer: Option<String>,
    },
    /// Run a pipeline on this machine (an embedded coordinator and worker on loopback).
    Run {
        file: PathBuf,
        /// Override a value of the file: key.path=value (repeatable), e.g.
        /// `--set output=s3://bucket/run --set run.shards=16 --set inputs.wiki.paths=["a.xml.bz2"]`.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
    },
    /// Read files of one format into an output, without a pipeline file.
    Ingest {
        #[arg(value_parser = parse_format)]
        format: Format,
        #[arg(required = true)]
        inputs: Vec<String>,
        /// Output location (path or s3://, gs://, az:// URL).
        #[arg(long)]
        out: String,
        /// Also linearize into HSEQ segments.
        #[arg(long)]
        hseq: bool,
        /// Parquet shards per table.
        #[arg(long, default_value_t = 4)]
        shards: u32,
        /// Split name for QA datasets.
        #[arg(long)]
        split: Option<String>,
        /// Reader option: key=value, value as TOML (e.g. `namespaces=[0,14]`).
        #[arg(long = "option", value_name = "KEY=VALUE")]
        options: Vec<String>,
        /// Share of bad records above which the run fails.
        #[arg(long, default_value_t = 0.05)]
        max_bad_ratio: f64,
    },
    /// Label the questions of a QA dataset into weak positives and an SFT set, without a
    /// pipeline file: the reader, HSEQ and the label stage.
    Label {
        /// The QA dataset format: hotpotqa, musique, 2wiki, hybridqa, tatqa, metaqa, cwq,
        /// simpleqa.
        #[arg(value_parser = parse_qa_format)]
        dataset: Format,
        /// Question files (paths, globs or object-store URLs).
        #[arg(required = true)]
        inputs: Vec<String>,
        /// Output location (path or s3://, gs://, az:// URL).
        #[arg(long)]
        out: String,
        /// Labelling methods, comma-separated (hseq-paper, answer-aware); the first one's
        /// trajectories become the SFT samples.
        #[arg(long = "method", value_delimiter = ',')]
        methods: Vec<String>,
        /// Size group: small, medium or large.
        #[arg(long)]
        preset: Option<String>,
        /// A knowledge base file for k-hop subgraphs of the questions' topic entities
        /// (MetaQA); repeatable.
        #[arg(long)]
        kb_input: Vec<String>,
        /// Format of --kb-input.
        #[arg(long, value_parser = parse_format, default_value = "metaqa-kb")]
        kb_format: Format,
        /// Evaluation files whose questions must not appear in any sample (repeatable).
        #[arg(long)]
        decontaminate: Vec<String>,
        /// Format of the --decontaminate files (default: told from each file's first record).
        #[arg(long, value_parser = parse_qa_format)]
        decontaminate_format: Option<Format>,
        /// Parquet shards per table.
        #[arg(long, default_value_t = 4)]
        shards: u32,
        /// Split name of the questions.
        #[arg(long)]
        split: Option<String>,
        /// Reader option: key=value, value as TOML (e.g. `tables_dir="WikiTables-WithLinks"`).
        #[arg(long = "option", value_name = "KEY=VALUE")]
        options: Vec<String>,
        /// Share of bad records above which the run fails.
        #[arg(long, default_value_t = 0.05)]
        max_bad_ratio: f64,
        /// Override a value of the generated pipeline: key.path=value (repeatable), e.g.
        /// `--set stages.label.options.validation_share=0.1`.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
    },
    /// Run SQL over an output; tables are registered by name (documents, tables, triples,
    /// entities, questions, segments, labels, sft, quarantine). Without --sql, list tables and
    /// counts, and the SFT dataset view when the output has samples.
    Inspect {
        url: String,
        #[arg(long)]
        sql: Option<String>,
        #[arg(long, value_enum, default_value_t = OutFormat::Table)]
        format: OutFormat,
    },
    /// Serve the coordinator: plans submitted jobs into tasks for workers, with its durable
    /// state (job records, one commit record per task) under --state.
    Coordinator {
        /// gRPC address.
        #[arg(long, default_value = "0.0.0.0:7070")]
        listen: std::net::SocketAddr,
        /// Where the state lives: a path or an object-store URL.
        #[arg(long)]
        state: String,
        /// Address of /metrics, /healthz and /readyz.
        #[arg(long)]
        metrics_listen: Option<std::net::SocketAddr>,
        /// A file holding the shared token (else DISTILLERY_TOKEN).
        #[arg(long)]
        token_file: Option<PathBuf>,
        /// Seconds a lease lasts without a heartbeat.
        #[arg(long, default_value_t = 15.0)]
        lease_secs: f64,
        /// Milliseconds between worker pulls.
        #[arg(long, default_value_t = 1000)]
        heartbeat_ms: u64,
        /// Attempts of a task before its job fails.
        #[arg(long, default_value_t = 4)]
        max_attempts: u32,
        /// First retry delay in milliseconds (doubled per attempt).
        #[arg(long, default_value_t = 500)]
        backoff_ms: u64,
        /// Copy a task running this many times longer than its stage's median (0: never).
        #[arg(long, default_value_t = 4.0)]
        straggler_factor: f64,
        /// ...once it has run at least this many seconds.
        #[arg(long, default_value_t = 30.0)]
        straggler_min_secs: f64,
        /// PEM certificate chain for TLS (with --tls-key).
        #[arg(long, requires = "tls_key")]
        tls_cert: Option<PathBuf>,
        #[arg(long, requires = "tls_cert")]
        tls_key: Option<PathBuf>,
    },
    /// Run tasks for a coordinator until SIGTERM (then drain within --grace-secs).
    Worker {
        #[command(flatten)]
        conn: cluster::Conn,
        /// Worker id (default: host name, pid and a random suffix).
        #[arg(long)]
        worker_id: Option<String>,
        /// Tasks at once.
        #[arg(long, default_value_t = 1)]
        slots: u32,
        /// GPUs this worker offers.
        #[arg(long, default_value_t = 0)]
        gpus: u32,
        /// A label key=value (repeatable).
        #[arg(long = "label")]
        labels: Vec<String>,
        /// Threads per task (default: cores / slots).
        #[arg(long)]
        parallelism: Option<usize>,
        /// Seconds running tasks get to finish after SIGTERM.
        #[arg(long, default_value_t = 60)]
        grace_secs: u64,
        #[arg(long)]
        metrics_listen: Option<std::net::SocketAddr>,
    },
    /// Submit a pipeline to a coordinator; with --wait, exit 0 only if the job succeeded.
    Submit {
        file: PathBuf,
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        #[command(flatten)]
        conn: cluster::Conn,
        #[arg(long)]
        wait: bool,
    },
    /// A job's progress per stage, its workers and failures (all jobs without JOB).
    Status {
        job: Option<String>,
        #[command(flatten)]
        conn: cluster::Conn,
        /// `json`: one object per job with its stages and each stage's tasks (task, state,
        /// worker, attempts, records_out, seconds).
        #[arg(long, value_enum, default_value_t = ReportFormat::Table)]
        format: ReportFormat,
    },
    /// Cancel a job.
    Cancel {
        job: String,
        #[command(flatten)]
        conn: cluster::Conn,
    },
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
}

#[derive(Subcommand)]
enum ReportCommand {
    /// Weak positives against gold evidence: precision, recall and F1 per dataset, method,
    /// level and question type, from the output's `labels` and `questions` tables.
    Labels {
        url: String,
        #[arg(long, value_enum, default_value_t = ReportFormat::Table)]
        format: ReportFormat,
    },
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    Table,
    Json,
}

#[derive(Subcommand)]
enum HseqCommand {
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

/// jemalloc rather than the system allocator or mimalloc: the label stage allocates many
/// short-lived strings per question (glibc malloc was a quarter of its profile) and
/// multi-megabyte buffers per Parquet page and row group; against mimalloc, jemalloc cut the
/// stage's time by about a tenth on 10,000 questions (inside the noise on 100,000) and its
/// peak memory by 5-25% (figures in docs/benchmarks.md).
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Exit status of a run stopped by `[llm.budget]`.
const EXIT_BUDGET: u8 = 3;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let level = if cli.verbose {
        "debug"
    } else if cli.quiet {
        "warn"
    } else {
        "info"
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(level));
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false);
    match cli.log_format {
        LogFormat::Json => logs.json().init(),
        // Colour codes only where a person reads them: files and pipes get plain text.
        LogFormat::Text => logs.with_ansi(std::io::stderr().is_terminal()).init(),
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(dispatch(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn load(file: &PathBuf, set: &[String]) -> Result<std::result::Result<Pipeline, String>> {
    let text = std::fs::read_to_string(file)
        .with_context(|| format!("cannot read pipeline file {}", file.display()))?;
    // Missing input files are reported with the file's other problems.
    let check = |paths: &[String]| distillery_exec::store::resolve_each(paths).1;
    Ok(distillery_exec::stages::parse_pipeline_checking_paths(
        &file.display().to_string(),
        &text,
        set,
        &check,
    )
    .map_err(|e| e.to_string()))
}

async fn dispatch(cli: Cli) -> Result<ExitCode> {
    let mode = if cli.quiet {
        ProgressMode::Log
    } else {
        ProgressMode::Auto
    };
    match cli.command {
        Command::Validate { file, set } => match load(&file, &set)? {
            Err(errors) => {
                eprint!("{errors}");
                Ok(ExitCode::FAILURE)
            }
            Ok(p) => match plan_pipeline(&p) {
                Ok(plan) => {
                    outln!(
                        "{}: ok (pipeline `{}`, {} input file(s), {} stage(s), output {})",
                        file.display(),
                        p.name,
                        plan.files.len(),
                        plan.stages.len(),
                        p.output
                    );
                    Ok(ExitCode::SUCCESS)
                }
                Err(e) => {
                    eprintln!("{}: {e}", file.display());
                    Ok(ExitCode::FAILURE)
                }
            },
        },
        Command::Plan {
            file,
            set,
            estimate,
            sample,
            tokenizer,
        } => match load(&file, &set)? {
            Err(errors) => {
                eprint!("{errors}");
                Ok(ExitCode::FAILURE)
            }
            Ok(p) => {
                let plan = plan_pipeline(&p)?;
                outln!("{plan}");
                if estimate {
                    let est = distillery_exec::estimate::estimate(
                        &p,
                        &plan,
                        sample.max(1),
                        tokenizer.as_deref(),
                    )
                    .await?;
                    if est.is_empty() {
                        outln!("estimate: no stage of this pipeline calls an LLM");
                    }
                    for e in &est {
                        outln!("{e}");
                    }
                }
                Ok(ExitCode::SUCCESS)
            }
        },
        Command::Run { file, set } => match load(&file, &set)? {
            Err(errors) => {
                eprint!("{errors}");
                Ok(ExitCode::FAILURE)
            }
            Ok(p) => {
                let text = std::fs::read_to_string(&file)?;
                cluster::run_job(&file.display().to_string(), &text, &set, &p, mode).await
            }
        },
        Command::Coordinator {
            listen,
            state,
            metrics_listen,
            token_file,
            lease_secs,
            heartbeat_ms,
            max_attempts,
            backoff_ms,
            straggler_factor,
            straggler_min_secs,
            tls_cert,
            tls_key,
        } => {
            let cfg = distillery_cluster::coordinator::CoordinatorConfig {
                lease: std::time::Duration::from_secs_f64(lease_secs.max(0.1)),
                heartbeat: std::time::Duration::from_millis(heartbeat_ms.max(10)),
                max_attempts: max_attempts.max(1),
                backoff: std::time::Duration::from_millis(backoff_ms),
                straggler_factor,
                straggler_min: std::time::Duration::from_secs_f64(straggler_min_secs.max(0.0)),
            };
            let tls = match (tls_cert, tls_key) {
                (Some(cert), Some(key)) => Some(distillery_cluster::local::TlsFiles { cert, key }),
                _ => None,
            };
            cluster::coordinator(listen, &state, metrics_listen, token_file, cfg, tls).await
        }
        Command::Worker {
            conn,
            worker_id,
            slots,
            gpus,
            labels,
            parallelism,
            grace_secs,
            metrics_listen,
        } => {
            let cores = distillery_exec::run::cores();
            let par = parallelism.unwrap_or((cores / slots.max(1) as usize).max(1));
            cluster::worker(
                &conn,
                worker_id,
                slots,
                gpus,
                &labels,
                par,
                std::time::Duration::from_secs(grace_secs),
                metrics_listen,
            )
            .await
        }
        Command::Submit {
            file,
            set,
            conn,
            wait,
        } => cluster::submit(&conn, &file, &set, wait).await,
        Command::Status { job, conn, format } => {
            cluster::status(&conn, job, format == ReportFormat::Json).await
        }
        Command::Cancel { job, conn } => cluster::cancel(&conn, job).await,
        Command::Ingest {
            format,
            inputs,
            out,
            hseq,
            shards,
            split,
            options,
            max_bad_ratio,
        } => {
            let text = ingest_pipeline(
                format,
                &inputs,
                &out,
                hseq,
                shards,
                split.as_deref(),
                &options,
                max_bad_ratio,
            )?;
            let p = distillery_exec::stages::parse_pipeline("(ingest command)", &text, &[])
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            cluster::run_job("(ingest command)", &text, &[], &p, mode).await
        }
        Command::Label {
            dataset,
            inputs,
            out,
            methods,
            preset,
            kb_input,
            kb_format,
            decontaminate,
            decontaminate_format,
            shards,
            split,
            options,
            max_bad_ratio,
            set,
        } => {
            let text = label_pipeline(&LabelArgs {
                dataset,
                inputs: &inputs,
                out: &out,
                methods: &methods,
                preset: preset.as_deref(),
                kb_inputs: &kb_input,
                kb_format,
                decontaminate: &decontaminate,
                decontaminate_format,
                shards,
                split: split.as_deref(),
                options: &options,
                max_bad_ratio,
            })?;
            let p = match distillery_exec::stages::parse_pipeline("(label command)", &text, &set) {
                Ok(p) => p,
                Err(errors) => {
                    eprint!("{errors}");
                    return Ok(ExitCode::FAILURE);
                }
            };
            cluster::run_job("(label command)", &text, &set, &p, mode).await
        }
        Command::Report {
            command: ReportCommand::Labels { url, format },
        } => {
            out!("{}", report::labels(&url, format).await?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Inspect { url, sql, format } => {
            inspect::inspect(&url, sql.as_deref(), format).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Hseq {
            command: HseqCommand::Verify { url },
        } => {
            let report = distillery_exec::verify::verify_output(&url).await?;
            outln!("{report}");
            if report.failed() > 0 {
                eprintln!("error: {} source(s) do not round-trip", report.failed());
                Ok(ExitCode::FAILURE)
            } else {
                Ok(ExitCode::SUCCESS)
            }
        }
    }
}

/// Builds the TOML of a one-reader pipeline, so `ingest` goes through the same checks as a
/// pipeline file.
#[allow(clippy::too_many_arguments)]
fn ingest_pipeline(
    format: Format,
    inputs: &[String],
    out: &str,
    hseq: bool,
    shards: u32,
    split: Option<&str>,
    options: &[String],
    max_bad_ratio: f64,
) -> Result<String> {
    let mut root = toml::Table::new();
    root.insert("version".into(), 1.into());
    root.insert("name".into(), format!("ingest-{}", format.name()).into());
    root.insert("output".into(), out.into());
    let mut run = toml::Table::new();
    run.insert("shards".into(), i64::from(shards).into());
    run.insert("max_bad_ratio".into(), max_bad_ratio.into());
    root.insert("run".into(), run.into());
    let mut input = toml::Table::new();
    input.insert("name".into(), format.name().replace('-', "_").into());
    input.insert("format".into(), format.name().into());
    input.insert(
        "paths".into(),
        toml::Value::Array(inputs.iter().map(|s| s.clone().into()).collect()),
    );
    if let Some(s) = split {
        input.insert("split".into(), s.into());
    }
    let mut opts = toml::Table::new();
    for o in options {
        distillery_core::spec::apply_override(&mut opts, o)
            .map_err(|e| anyhow::anyhow!("--option {e}"))?;
    }
    if !opts.is_empty() {
        input.insert("options".into(), opts.into());
    }
    root.insert("inputs".into(), toml::Value::Array(vec![input.into()]));
    if hseq {
        let mut st = toml::Table::new();
        st.insert("kind".into(), "hseq".into());
        root.insert("stages".into(), toml::Value::Array(vec![st.into()]));
    }
    if shards == 0 {
        bail!("--shards must be at least 1");
    }
    Ok(toml::to_string(&root)?)
}

/// Arguments of the `label` command.
struct LabelArgs<'a> {
    dataset: Format,
    inputs: &'a [String],
    out: &'a str,
    methods: &'a [String],
    preset: Option<&'a str>,
    kb_inputs: &'a [String],
    kb_format: Format,
    decontaminate: &'a [String],
    decontaminate_format: Option<Format>,
    shards: u32,
    split: Option<&'a str>,
    options: &'a [String],
    max_bad_ratio: f64,
}

/// Builds the TOML of a labelling pipeline (the QA input, an optional KB input, HSEQ and the
/// label stage), so `label` goes through the same checks as a pipeline file.
fn label_pipeline(a: &LabelArgs<'_>) -> Result<String> {
    if a.shards == 0 {
        bail!("--shards must be at least 1");
    }
    for (i, m) in a.methods.iter().enumerate() {
        if !LABEL_METHODS.contains(&m.as_str()) {
            bail!(
                "--method: unknown method `{m}`, expected one of {}",
                LABEL_METHODS.join(", ")
            );
        }
        if a.methods[..i].contains(m) {
            bail!("--method: `{m}` is given twice");
        }
    }
    if let Some(p) = a.preset
        && !LABEL_PRESETS.contains(&p)
    {
        bail!("--preset: unknown preset `{p}`, expected small, medium or large");
    }
    if a.dataset == Format::MetaQa && a.kb_inputs.is_empty() {
        bail!(
            "metaqa questions are labelled from the k-hop subgraph of their topic entity: \
             name the knowledge base with --kb-input FILE (--kb-format, default metaqa-kb)"
        );
    }
    let name = a.dataset.name().replace('-', "_");
    let mut root = toml::Table::new();
    root.insert("version".into(), 1.into());
    root.insert("name".into(), format!("label-{}", a.dataset.name()).into());
    root.insert("output".into(), a.out.into());
    let mut run = toml::Table::new();
    run.insert("shards".into(), i64::from(a.shards).into());
    run.insert("max_bad_ratio".into(), a.max_bad_ratio.into());
    root.insert("run".into(), run.into());
    let paths = |v: &[String]| toml::Value::Array(v.iter().map(|s| s.clone().into()).collect());
    let mut input = toml::Table::new();
    input.insert("name".into(), name.clone().into());
    input.insert("format".into(), a.dataset.name().into());
    input.insert("paths".into(), paths(a.inputs));
    if let Some(s) = a.split {
        input.insert("split".into(), s.into());
    }
    let mut opts = toml::Table::new();
    for o in a.options {
        distillery_core::spec::apply_override(&mut opts, o)
            .map_err(|e| anyhow::anyhow!("--option {e}"))?;
    }
    if !opts.is_empty() {
        input.insert("options".into(), opts.into());
    }
    let mut inputs = vec![toml::Value::Table(input)];
    let mut label = toml::Table::new();
    if !a.kb_inputs.is_empty() {
        let mut kb = toml::Table::new();
        kb.insert("name".into(), "kb".into());
        kb.insert("format".into(), a.kb_format.name().into());
        kb.insert("paths".into(), paths(a.kb_inputs));
        inputs.push(kb.into());
        label.insert("kb".into(), "kb".into());
    }
    root.insert("inputs".into(), toml::Value::Array(inputs));
    if !a.methods.is_empty() {
        label.insert("methods".into(), paths(a.methods));
    }
    if let Some(p) = a.preset {
        label.insert("preset".into(), p.into());
    }
    if !a.decontaminate.is_empty() {
        label.insert("decontaminate".into(), paths(a.decontaminate));
        if let Some(f) = a.decontaminate_format {
            let formats = vec![f.name().to_string(); a.decontaminate.len()];
            label.insert("decontaminate_formats".into(), paths(&formats));
        }
    }
    let mut hseq = toml::Table::new();
    hseq.insert("kind".into(), "hseq".into());
    let mut st = toml::Table::new();
    st.insert("kind".into(), "label".into());
    st.insert("inputs".into(), toml::Value::Array(vec![name.into()]));
    if !label.is_empty() {
        st.insert("options".into(), label.into());
    }
    root.insert(
        "stages".into(),
        toml::Value::Array(vec![hseq.into(), st.into()]),
    );
    Ok(toml::to_string(&root)?)
}

fn print_outcome(o: &RunOutcome) {
    outln!(
        "{:<22} {:>10} {:>10} {:>8} {:>11} {:>11} {:>8}",
        "stage",
        "in",
        "out",
        "bad",
        "bytes in",
        "bytes out",
        "seconds"
    );
    for s in &o.summary.stages {
        outln!(
            "{:<22} {:>10} {:>10} {:>8} {:>11} {:>11} {:>8.2}",
            s.stage,
            s.records_in,
            s.records_out,
            s.quarantined,
            s.bytes_in,
            s.bytes_out,
            s.seconds
        );
        let interesting: Vec<String> = s
            .counters
            .iter()
            .filter(|(k, _)| !k.starts_with("rows."))
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        if !interesting.is_empty() {
            outln!("{:<22} {}", "", interesting.join(" "));
        }
    }
    outln!("tables:");
    for t in &o.manifest.tables {
        outln!(
            "  {:<12} {:>10} rows in {} file(s)",
            t.name,
            t.rows,
            t.files.len()
        );
    }
    if !o.manifest.files.is_empty() {
        outln!("files:");
        for f in &o.manifest.files {
            outln!("  {:<24} {:>10} rows {:>11} bytes", f.path, f.rows, f.bytes);
        }
    }
    outln!("published {} ({:.2} s)", o.output, o.summary.seconds);
}
