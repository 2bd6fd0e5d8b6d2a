//! The checks of one section or entry: an `[[inputs]]` entry, a `[[stages]]` entry, the
//! `[llm]` section, and of the names and locations they hold.

use super::catalog::StageCheck;
use super::collect::Collector;
use super::input::RawInput;
use super::locate::{PathSeg, key};
use super::stage::RawStage;
use super::{Format, FormatOptions, InputSpec, LlmSpec, StageCatalog, StageSpec};

pub(super) fn check_input(
    c: &mut Collector<'_>,
    base: &[PathSeg],
    v: &toml::Value,
) -> Option<InputSpec> {
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
        Format::MetaQaKb => c.de(&ob, opts_val).map(FormatOptions::Lines),
        Format::MediaWikiLog => c.de(&ob, opts_val).map(FormatOptions::None),
        _ => c.de(&ob, opts_val).map(FormatOptions::Json),
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

pub(super) fn check_stage(
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

pub(super) fn check_llm_url(c: &mut Collector<'_>, url: &str) {
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        c.push(
            vec![key("llm"), key("base_url")],
            format!("`{url}` is not an http(s) URL (e.g. http://vllm:8000/v1)"),
        );
    }
}

pub(super) fn check_llm(c: &mut Collector<'_>, l: &LlmSpec) {
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
    if l.min_concurrency == 0 || l.min_concurrency > l.max_concurrency.max(1) {
        c.push(
            at("min_concurrency"),
            "`min_concurrency` must be at least 1 and at most `max_concurrency`",
        );
    }
    if l.timeout_secs == 0 {
        c.push(at("timeout_secs"), "`timeout_secs` must be at least 1");
    }
    if l.context_tokens == Some(0) {
        c.push(at("context_tokens"), "`context_tokens` must be at least 1");
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
