//! Tests of the pipeline checks, through a stand-in stage catalog ([`Toy`]).

use serde::{Deserialize, Serialize};

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
    assert_eq!(l.max_concurrency, 64);
    assert_eq!((l.min_concurrency, l.pace), (1, PaceSpec::Adaptive));
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

/// The pipeline hash of fixed pipelines, pinned: a refactor of this module must not
/// change the hash of any pipeline (every manifest and SFT sample records it).
#[test]
fn the_pipeline_hash_is_pinned() {
    let plain = parse("t.toml", GOOD, &[]).unwrap();
    let full = GOOD.to_string()
        + "\n[[stages]]\nkind = \"triples\"\nname = \"tr\"\ngpus = 1\ntasks = 3\n\
           inputs = [\"wiki\"]\noptions = { unit = \"paragraph\" }\n\
           [llm]\nbase_url = \"http://a/v1\"\nmodel = \"m\"\nmodel_revision = \"r1\"\n\
           seed = 7\n[llm.price]\ninput_per_million = 0.5\n";
    let full = parse(
        "t.toml",
        &full,
        &[
            "run.split_bytes=4096".into(),
            "run.max_bad_ratio=0.25".into(),
            "stages.hseq.options.cells=true".into(),
            "inputs.wiki.options.wiki=\"dewiki\"".into(),
            "description=\"d\"".into(),
        ],
    )
    .unwrap();
    assert_eq!(plain.hash, "5c8d83f372d8d079636a5954a06bfa4945f09c29");
    assert_eq!(full.hash, "e7467393d2e220241addcecbf4d25f477c74250d");
}

#[test]
fn syntax_errors_have_a_position() {
    let e = parse("t.toml", "version = 1\noutput = \n", &[]).unwrap_err();
    assert_eq!(e.errors.len(), 1);
    assert_eq!(e.errors[0].line.map(|l| l.0), Some(2));
}

/// A pipeline file found by the `pipeline` fuzz target: toml_edit 0.23 panicked ("all items
/// have spans") while the locator parsed it; 0.25 reports it as a syntax error.
#[test]
fn the_fuzzed_toml_edit_panic_is_a_syntax_error() {
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/regressions/pipeline/crash-a12a422a237e834bf389323dffcddae7974535c0");
    let bytes = std::fs::read(file).unwrap();
    let text = String::from_utf8_lossy(&bytes);
    let text = text.split("\n--side--").next().unwrap();
    let _ = super::locate::Locator::new(text);
    assert!(text.parse::<toml::Table>().is_err());
}
