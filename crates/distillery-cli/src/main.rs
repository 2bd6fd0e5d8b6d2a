//! `distillery`: the one binary.
//!
//! - `validate FILE` checks a pipeline file (and that its inputs exist), printing every problem;
//! - `plan FILE [--estimate]` prints the files, shards, stages and outputs a run would
//!   produce (and projects the LLM calls, tokens and cost of its teacher stages);
//! - `run FILE [--set key.path=value ...] [--ui ADDR]` runs it on this machine (exit 3:
//!   stopped by the `[llm.budget]`, nothing published, rerun to resume from the response
//!   cache), serving the job page on ADDR when asked;
//! - `ingest FORMAT INPUT... --out URL [--hseq]` runs a one-reader pipeline without a file;
//! - `label DATASET INPUT... --out URL [--method M,...] [--preset P] [--kb-input FILE]` runs a
//!   QA reader, HSEQ and the label stage without a file;
//! - `inspect URL [--sql QUERY] [--format table|csv|json]` answers SQL over an output (and,
//!   without `--sql`, shows the SFT dataset view of an output that has one);
//! - `report labels URL [--format table|json|html]` compares an output's weak positives with
//!   the gold evidence of its questions (`html`: the whole output as one page); `report compound BENCHMARK PREDICTIONS` scores
//!   predictions on a `compound` stage's benchmark with HANRAG's accuracy
//!   (`distillery-distill`'s metric);
//! - `hseq verify URL` decodes every source of an output from its segments and compares.
//!
//! `anyhow` is used here only; the library crates return typed errors. DataFusion is a
//! dependency of this crate alone (it is the heaviest part of the build), for `inspect`.
//! `tikv-jemallocator` (jemalloc) is the global allocator: faster than glibc's for the
//! labeller's many small strings, and at least as fast as mimalloc with less peak memory
//! (measured with `scripts/bench-label.sh`, see docs/benchmarks.md); it is built with
//! `thp:always` (.cargo/config.toml) so that zeroed large blocks are cleared with memset, not
//! dropped and faulted back in (1.21x on the index stage's embeddings). `quick-xml` escapes the
//! text of the HTML report; `rustix` raises the open-files limit at start.
//! `distillery-embed` gives `--version` the CPU kernels candle's matrix products run on here.
//!
//! This file holds logging, the runtime and the dispatch; the arguments are in `args`, and
//! each command is a module of `commands`.

mod args;
mod commands;
mod out;

use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::Result;
use clap::{CommandFactory, FromArgMatches};
use distillery_exec::run::ProgressMode;
use tracing_subscriber::EnvFilter;

use crate::args::{Cli, Command, HseqCommand, LogFormat, ReportCommand};
use crate::commands::{
    cache, cancel, changes, coordinator, corpus, hseq_verify, index, ingest, inspect, label, plan,
    report, report_compound, run, search, status, submit, validate, worker,
};

/// jemalloc rather than the system allocator or mimalloc: the label stage allocates many
/// short-lived strings per question (glibc malloc was a quarter of its profile) and
/// multi-megabyte buffers per Parquet page and row group; against mimalloc, jemalloc cut the
/// stage's time by about a tenth on 10,000 questions (inside the noise on 100,000) and its
/// peak memory by 5-25% (figures in docs/benchmarks.md).
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Raises the soft limit of open files to the hard one (as Go's runtime does): a coordinator
/// holding a thousand idle metrics connections, or a merge reading many parts, must not stop
/// at the 1,024 many systems give by default.
fn raise_open_files_limit() {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let l = getrlimit(Resource::Nofile);
    if let (Some(cur), Some(max)) = (l.current, l.maximum)
        && cur < max
    {
        let _ = setrlimit(
            Resource::Nofile,
            Rlimit {
                current: Some(max),
                maximum: Some(max),
            },
        );
    }
}

fn main() -> ExitCode {
    raise_open_files_limit();
    // `--version` also names the CPU kernels candle's matrix products run on here (they are
    // picked at run time from the CPU's features), for bench reports and bug reports.
    let long_version: &'static str = Box::leak(
        format!(
            "{}\ncpu matrix kernels: {}",
            env!("CARGO_PKG_VERSION"),
            distillery_embed::cpu_kernels()
        )
        .into_boxed_str(),
    );
    let cli = match Cli::command()
        .long_version(long_version)
        .try_get_matches()
        .and_then(|m| Cli::from_arg_matches(&m))
    {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
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

async fn dispatch(cli: Cli) -> Result<ExitCode> {
    let mode = if cli.quiet {
        ProgressMode::Log
    } else {
        ProgressMode::Auto
    };
    match cli.command {
        Command::Validate(a) => validate::run(&a).await,
        Command::Plan(a) => plan::run(&a).await,
        Command::Run(a) => run::run(&a, mode).await,
        Command::Coordinator(a) => coordinator::run(a).await,
        Command::Worker(a) => worker::run(&a).await,
        Command::Submit(a) => submit::run(&a).await,
        Command::Status(a) => status::run(a).await,
        Command::Cancel(a) => cancel::run(a).await,
        Command::Ingest(a) => ingest::run(&a, mode).await,
        Command::Label(a) => label::run(&a, mode).await,
        Command::Report {
            command: ReportCommand::Labels { url, format },
        } => report::run(&url, format).await,
        Command::Report {
            command:
                ReportCommand::Compound {
                    benchmark,
                    predictions,
                    format,
                },
        } => report_compound::run(&benchmark, &predictions, format),
        Command::Inspect(a) => inspect::run(&a).await,
        Command::Hseq {
            command: HseqCommand::Verify { url },
        } => hseq_verify::run(&url).await,
        Command::Index { command } => index::run(command).await,
        Command::Search(a) => search::run(&a).await,
        Command::Corpus { command } => corpus::run(command).await,
        Command::Cache { command } => cache::run(command).await,
        Command::Changes {
            root,
            since,
            format,
            sft,
        } => changes::run(&root, &since, format, sft.as_deref()).await,
    }
}
