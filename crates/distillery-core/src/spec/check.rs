//! The checks of a whole pipeline file: [`Pipeline::parse`] and
//! [`Pipeline::parse_checking_paths`] (syntax, overrides, every section, then the hash), and
//! the checks across sections (top-level keys, `[run]`, duplicate names, dangling references,
//! stages that need an `[llm]` section).

use std::collections::BTreeSet;

use super::collect::Collector;
use super::locate::{Locator, PathSeg, key};
use super::overrides::apply_override_at;
use super::pipeline::hash_of;
use super::sections::{check_input, check_llm, check_llm_url, check_stage};
use super::{
    LlmSpec, Pipeline, RunSpec, SPEC_VERSION, SpecError, SpecErrors, StageCatalog, check_location,
};

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

/// The largest pipeline file accepted (after `--set`, before parsing): the text is part of
/// every task a coordinator hands out, and stays far below the gRPC message limit.
pub const MAX_PIPELINE_BYTES: usize = 4 << 20;

impl Pipeline {
    /// Parses and checks a pipeline file's text with overrides applied, reporting every problem.
    pub fn parse(
        catalog: &dyn StageCatalog,
        file: &str,
        text: &str,
        overrides: &[String],
    ) -> Result<Pipeline, SpecErrors> {
        Self::parse_checking_paths(catalog, file, text, overrides, &|_, _| Vec::new())
    }

    /// [`Self::parse`], with every input's `format` (as written) and `paths` also given to
    /// `check_paths` (even where the rest of the input has errors): each problem it returns
    /// (`"a.json: no such file"`) is reported at `inputs[i].paths` with the other errors, so
    /// `validate` says everything at once.
    pub fn parse_checking_paths(
        catalog: &dyn StageCatalog,
        file: &str,
        text: &str,
        overrides: &[String],
        check_paths: &dyn Fn(&str, &[String]) -> Vec<String>,
    ) -> Result<Pipeline, SpecErrors> {
        let fail = |errors: Vec<SpecError>| SpecErrors {
            file: file.to_string(),
            errors,
        };
        if text.len() > MAX_PIPELINE_BYTES {
            return Err(fail(vec![SpecError {
                path: "(file)".into(),
                line: None,
                message: format!(
                    "the pipeline file is {} bytes, over the limit of {} MiB: it travels with \
                     every task, so keep data and long prompt templates in files it names",
                    text.len(),
                    MAX_PIPELINE_BYTES >> 20
                ),
            }]));
        }
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
                let format = v.get("format").and_then(|f| f.as_str()).unwrap_or("");
                for problem in check_paths(format, &paths) {
                    c.push(
                        vec![key("inputs"), PathSeg::Index(i), key("paths")],
                        problem,
                    );
                }
            }
        }
        match p {
            Some(mut p) if c.errors.is_empty() => {
                p.hash = hash_of(&p);
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
}
