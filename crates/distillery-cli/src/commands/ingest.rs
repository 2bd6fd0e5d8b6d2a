//! `distillery ingest FORMAT INPUT... --out URL`: a one-reader pipeline (and HSEQ with
//! `--hseq`) run without a pipeline file.

use std::process::ExitCode;

use anyhow::{Result, bail};
use distillery_exec::run::ProgressMode;

use super::run::run_job;
use crate::args::IngestArgs;

pub async fn run(a: &IngestArgs, mode: ProgressMode) -> Result<ExitCode> {
    let text = ingest_pipeline(a)?;
    let p = distillery_exec::stages::parse_pipeline("(ingest command)", &text, &[])
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    run_job("(ingest command)", &text, &[], &p, mode, None).await
}

/// Builds the TOML of a one-reader pipeline, so `ingest` goes through the same checks as a
/// pipeline file.
fn ingest_pipeline(a: &IngestArgs) -> Result<String> {
    let (format, shards) = (a.format, a.shards);
    let mut root = toml::Table::new();
    root.insert("version".into(), 1.into());
    root.insert("name".into(), format!("ingest-{}", format.name()).into());
    root.insert("output".into(), a.out.as_str().into());
    let mut run = toml::Table::new();
    run.insert("shards".into(), i64::from(shards).into());
    run.insert("max_bad_ratio".into(), a.max_bad_ratio.into());
    root.insert("run".into(), run.into());
    let mut input = toml::Table::new();
    input.insert("name".into(), format.name().replace('-', "_").into());
    input.insert("format".into(), format.name().into());
    input.insert(
        "paths".into(),
        toml::Value::Array(a.inputs.iter().map(|s| s.clone().into()).collect()),
    );
    if let Some(s) = a.split.as_deref() {
        input.insert("split".into(), s.into());
    }
    let mut opts = toml::Table::new();
    for o in &a.options {
        distillery_core::spec::apply_override(&mut opts, o)
            .map_err(|e| anyhow::anyhow!("--option {e}"))?;
    }
    if !opts.is_empty() {
        input.insert("options".into(), opts.into());
    }
    root.insert("inputs".into(), toml::Value::Array(vec![input.into()]));
    if a.hseq {
        let mut st = toml::Table::new();
        st.insert("kind".into(), "hseq".into());
        root.insert("stages".into(), toml::Value::Array(vec![st.into()]));
    }
    if shards == 0 {
        bail!("--shards must be at least 1");
    }
    Ok(toml::to_string(&root)?)
}
