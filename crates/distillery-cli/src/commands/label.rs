//! `distillery label DATASET INPUT... --out URL`: the questions of a QA dataset labelled into
//! weak positives and an SFT set without a pipeline file (the reader, an optional KB input,
//! HSEQ and the label stage).

use std::process::ExitCode;

use anyhow::{Result, bail};
use distillery_core::spec::Format;
use distillery_exec::run::ProgressMode;
use distillery_label::{LABEL_METHODS, LABEL_PRESETS};

use super::run::run_job;
use crate::args::LabelArgs;

pub async fn run(a: &LabelArgs, mode: ProgressMode) -> Result<ExitCode> {
    let text = label_pipeline(a)?;
    let set = &a.set;
    let p = match distillery_exec::stages::parse_pipeline("(label command)", &text, set) {
        Ok(p) => p,
        Err(errors) => {
            eprint!("{errors}");
            return Ok(ExitCode::FAILURE);
        }
    };
    run_job("(label command)", &text, set, &p, mode, None).await
}

/// Builds the TOML of a labelling pipeline (the QA input, an optional KB input, HSEQ and the
/// label stage), so `label` goes through the same checks as a pipeline file.
fn label_pipeline(a: &LabelArgs) -> Result<String> {
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
    if let Some(p) = a.preset.as_deref()
        && !LABEL_PRESETS.contains(&p)
    {
        bail!("--preset: unknown preset `{p}`, expected small, medium or large");
    }
    if a.dataset == Format::MetaQa && a.kb_input.is_empty() {
        bail!(
            "metaqa questions are labelled from the k-hop subgraph of their topic entity: \
             name the knowledge base with --kb-input FILE (--kb-format, default metaqa-kb)"
        );
    }
    let name = a.dataset.name().replace('-', "_");
    let mut root = toml::Table::new();
    root.insert("version".into(), 1.into());
    root.insert("name".into(), format!("label-{}", a.dataset.name()).into());
    root.insert("output".into(), a.out.as_str().into());
    let mut run = toml::Table::new();
    run.insert("shards".into(), i64::from(a.shards).into());
    run.insert("max_bad_ratio".into(), a.max_bad_ratio.into());
    root.insert("run".into(), run.into());
    let paths = |v: &[String]| toml::Value::Array(v.iter().map(|s| s.clone().into()).collect());
    let mut input = toml::Table::new();
    input.insert("name".into(), name.clone().into());
    input.insert("format".into(), a.dataset.name().into());
    input.insert("paths".into(), paths(&a.inputs));
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
    let mut inputs = vec![toml::Value::Table(input)];
    let mut label = toml::Table::new();
    if !a.kb_input.is_empty() {
        let mut kb = toml::Table::new();
        kb.insert("name".into(), "kb".into());
        kb.insert("format".into(), a.kb_format.name().into());
        kb.insert("paths".into(), paths(&a.kb_input));
        inputs.push(kb.into());
        label.insert("kb".into(), "kb".into());
    }
    root.insert("inputs".into(), toml::Value::Array(inputs));
    if !a.methods.is_empty() {
        label.insert("methods".into(), paths(&a.methods));
    }
    if let Some(p) = a.preset.as_deref() {
        label.insert("preset".into(), p.into());
    }
    if !a.decontaminate.is_empty() {
        label.insert("decontaminate".into(), paths(&a.decontaminate));
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
