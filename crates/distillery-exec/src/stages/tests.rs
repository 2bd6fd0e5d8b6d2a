//! The registry and the stages' option checks, through the pipeline checks as a user meets
//! them.

use distillery_core::spec::Format;
use distillery_hseq::HseqOptions;
use distillery_label::LabelOptions;

use super::*;
use distillery_core::TableKind;

/// The checked options of a stage, when they are a `T`.
fn options<T: 'static>(stage: &StageSpec) -> Option<&T> {
    stage.options.get::<T>()
}

const GOOD: &str = r#"
version = 1
name = "t"
output = "out/t"

[[inputs]]
name = "wiki"
format = "mediawiki"
paths = ["a.xml.bz2"]

[[inputs]]
name = "hp"
format = "hotpotqa"
paths = ["h.json"]

[[stages]]
kind = "hseq"
"#;

fn parse(text: &str, set: &[String]) -> Result<Pipeline, SpecErrors> {
    parse_pipeline("t.toml", text, set)
}

#[test]
fn every_stage_is_registered_once_with_its_outputs() {
    let kinds = Registry.kinds();
    let mut unique = kinds.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), kinds.len(), "{kinds:?}");
    for kind in [
        "hseq",
        "label",
        "triples",
        "cirag",
        "planner",
        "relevance",
        "ras",
    ] {
        assert!(stage(kind).is_some(), "{kind} is not registered");
    }
    let p = parse(GOOD, &["stages.hseq.options.cells=true".into()]).unwrap();
    assert!(p.stages[0].options.get::<HseqOptions>().unwrap().cells);
    assert!(options::<LabelOptions>(&p.stages[0]).is_none());
    let declared = stage_of(&p.stages[0]).unwrap().outputs(&p.stages[0]);
    assert_eq!(declared.tables, vec![TableKind::Segments]);
}

#[test]
fn triples_options_are_checked() {
    let text = GOOD.to_string()
        + "\n[[stages]]\nkind = \"triples\"\noptions = { unit = \"page\", exports = [\"hipporag\", \"csv\"] }\n";
    let e = parse(&text, &[]).unwrap_err().to_string();
    assert!(e.contains("add an `[llm]` section"), "{e}");
    assert!(e.contains("unknown unit `page`"), "{e}");
    assert!(e.contains("unknown export `csv`"), "{e}");
    assert!(e.contains("stages[1].options.exports"), "{e}");
}

#[test]
fn label_options_are_checked() {
    let text = GOOD.to_string()
        + "\n[[stages]]\nkind = \"label\"\noptions = { methods = [\"magic\"], preset = \"huge\", kb = \"hp\", context_memory_bytes = 0 }\n";
    let e = parse(&text, &[]).unwrap_err().to_string();
    assert!(e.contains("unknown method `magic`"), "{e}");
    assert!(e.contains("unknown preset `huge`"), "{e}");
    assert!(e.contains("not a knowledge base"), "{e}");
    assert!(
        e.contains("`context_memory_bytes` must be at least 1"),
        "{e}"
    );
    let ok = GOOD.to_string() + "\n[[stages]]\nkind = \"label\"\n";
    let p = parse(&ok, &[]).unwrap();
    let o: &LabelOptions = options(&p.stages[1]).unwrap();
    assert_eq!(o.methods, vec!["answer-aware"]);
    assert_eq!(o.sft_method(), Some("answer-aware"));
    assert_eq!(o.preset, "small");
    assert_eq!(o.context_memory_bytes, 1 << 30);
    // The memory budget does not change what the stage writes, nor the pipeline's hash.
    let small = ["stages.label.options.context_memory_bytes=4096".to_string()];
    let q = parse(&ok, &small).unwrap();
    let qo: &LabelOptions = options(&q.stages[1]).unwrap();
    assert_eq!(qo.context_memory_bytes, 4096);
    assert_eq!(p.hash, q.hash);
    let other = ["stages.label.options.max_steps=2".to_string()];
    assert_ne!(p.hash, parse(&ok, &other).unwrap().hash);
}

#[test]
fn label_option_errors_come_in_one_round() {
    // A typo'd key does not hide the other options' errors.
    let text = GOOD.to_string()
        + "\n[[inputs]]\nname = \"mq\"\nformat = \"metaqa\"\npaths = [\"q.txt\"]\n\
           [[stages]]\nkind = \"label\"\n\
           options = { methods = [\"answer-aware\", \"magic\", \"answer-aware\"], validation_shre = 0.1 }\n";
    let e = parse(&text, &[]).unwrap_err().to_string();
    for want in [
        "validation_shre",
        "unknown method `magic`",
        "method `answer-aware` is listed twice",
        "input `mq` is MetaQA",
    ] {
        assert!(e.contains(want), "{want:?} not in: {e}");
    }
    // A known key with a bad value is reported, not judged again by its default.
    let bad = GOOD.to_string()
        + "\n[[inputs]]\nname = \"mq\"\nformat = \"metaqa\"\npaths = [\"q.txt\"]\n\
           [[stages]]\nkind = \"label\"\noptions = { kb = 5, presett = \"small\" }\n";
    let e = parse(&bad, &[]).unwrap_err().to_string();
    assert!(
        e.contains("stages[1].options.kb") && e.contains("presett"),
        "{e}"
    );
    assert!(!e.contains("is MetaQA"), "{e}");
    // A label stage over other inputs needs no knowledge base; `2wikimultihopqa` names 2wiki.
    let ok = GOOD.to_string()
        + "\n[[inputs]]\nname = \"mq\"\nformat = \"metaqa\"\npaths = [\"q.txt\"]\n\
           [[inputs]]\nname = \"tw\"\nformat = \"2wikimultihopqa\"\npaths = [\"t.json\"]\n\
           [[stages]]\nkind = \"label\"\ninputs = [\"hp\", \"tw\"]\n";
    let p = parse(&ok, &[]).unwrap();
    assert_eq!(p.inputs[3].format, Format::TwoWiki);
}

#[test]
fn a_label_stage_reads_plans_of_an_earlier_planner_stage_only() {
    let llm = "[llm]\nbase_url = \"http://a/v1\"\nmodel = \"m\"\n";
    let label = "[[stages]]\nkind = \"label\"\noptions = { plans = \"planner\" }\n";
    let planner = "[[stages]]\nkind = \"planner\"\n";
    let late = format!("{GOOD}\n{label}{planner}{llm}");
    let e = parse(&late, &[]).unwrap_err();
    assert!(
        e.errors
            .iter()
            .any(|x| x.path == "stages[1].options.plans" && x.message.contains("no planner")),
        "{e}"
    );
    let ok = format!("{GOOD}\n{planner}{label}{llm}");
    let p = parse(&ok, &[]).unwrap();
    let o: &LabelOptions = options(&p.stages[2]).unwrap();
    assert_eq!(o.plans.as_deref(), Some("planner"));
    // The planner publishes its plans; a cache directory is optional and local.
    let declared = stage_of(&p.stages[1]).unwrap().outputs(&p.stages[1]);
    assert_eq!(declared.files, vec!["planner/plans.jsonl"]);
    let e = parse(&ok, &["stages.planner.options.cache=s3://b/g".into()]).unwrap_err();
    assert!(e.to_string().contains("must be a local directory"), "{e}");
}

#[test]
fn a_stage_task_count_overrides_the_shards_and_stays_out_of_the_hash() {
    let p = parse(GOOD, &[]).unwrap();
    assert_eq!(crate::task::partitioning(&p, &p.stages[0]).1, 4);
    let q = parse(GOOD, &["stages.hseq.tasks=7".into()]).unwrap();
    assert_eq!(crate::task::partitioning(&q, &q.stages[0]).1, 7);
    assert_eq!(p.hash, q.hash);
}

#[test]
fn flattened_option_groups_are_checked_like_the_stage_s_own() {
    let llm = "\n[llm]\nbase_url = \"http://127.0.0.1:1/v1\"\nmodel = \"m\"\n";
    let text = GOOD.to_string()
        + llm
        + "\n[[stages]]\nkind = \"relevance\"\noptions = { validation_shar = 0.1, \
           decontaminate = \"x\", max_questions = \"a\", validation_share = 1.5, \
           decontaminate_formats = [\"csv\"] }\n";
    let e = parse(&text, &[]).unwrap_err().to_string();
    // An unknown key names the options the stage has, its groups' included.
    assert!(
        e.contains("stages[1].options.validation_shar: unknown field `validation_shar`, expected one of `max_questions`, `max_tokens`, `templates`, `validation_share`"),
        "{e}"
    );
    // A bad value in a group's field points at that field.
    assert!(
        e.contains("stages[1].options.decontaminate: invalid type"),
        "{e}"
    );
    assert!(
        e.contains("stages[1].options.max_questions: invalid type"),
        "{e}"
    );
    let text = GOOD.to_string()
        + llm
        + "\n[[stages]]\nkind = \"relevance\"\noptions = { validation_share = 1.5, \
           decontaminate = [\"a.json\"], decontaminate_formats = [\"csv\"], max_questions = 3 }\n";
    let e = parse(&text, &[]).unwrap_err().to_string();
    assert!(e.contains("`validation_share` must be in [0, 1)"), "{e}");
    assert!(e.contains("`csv` is not a QA format"), "{e}");
    let ok = GOOD.to_string()
        + llm
        + "\n[[stages]]\nkind = \"relevance\"\noptions = { max_questions = 3 }\n";
    let p = parse(&ok, &[]).unwrap();
    let st = stage_of(&p.stages[1]).unwrap();
    assert_eq!(st.max_tasks(&p.stages[1]), Some(1));
    // The groups serialize flat, in declaration order: the pipeline hash of a file is what it
    // was before the options were grouped.
    let json = p.stages[1].options.json().to_string();
    assert!(
        json.starts_with(r#"{"max_questions":3,"max_tokens":32,"templates":null,"validation_share":0.05,"decontaminate":[],"decontaminate_formats":[]"#),
        "{json}"
    );
}
