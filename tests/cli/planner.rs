//! The `planner` stage: teacher plans published as `planner/plans.jsonl` and read from there
//! by the label stage of the same pipeline (its iteration samples carry the plans), the local
//! guidance cache export, the zero-call rerun, and the check that ties the two stages.

use std::path::Path;
use std::sync::Arc;

use distillery_testkit::fault_server::FaultServer;
use serde_json::Value;

use crate::triples::run_file;
use crate::{bin, repo, stage, summary};

fn pipeline(dir: &Path, url: &str) -> std::path::PathBuf {
    let file = dir.join("planner.toml");
    let guidance = dir.join("guidance");
    std::fs::write(
        &file,
        format!(
            r#"version = 1
name = "planner-test"
output = "{out}"
[[inputs]]
name = "hotpot"
format = "hotpotqa"
paths = ["{data}"]
[[stages]]
kind = "planner"
options = {{ cache = "{guidance}" }}
[[stages]]
kind = "label"
options = {{ methods = ["answer-aware"], plans = "planner", hanrag = false }}
[llm]
base_url = "{url}"
model = "stand-in"
cache = "{cache}"
"#,
            out = dir.join("out").display(),
            data = repo().join("data/quickstart/hotpot.json").display(),
            guidance = guidance.display(),
            cache = dir.join("cache").display(),
        ),
    )
    .unwrap();
    file
}

fn sft_lines(out: &Path) -> Vec<Value> {
    let mut v = Vec::new();
    for f in ["sft/train.jsonl", "sft/validation.jsonl"] {
        if let Ok(text) = std::fs::read_to_string(out.join(f)) {
            v.extend(
                text.lines()
                    .map(|l| serde_json::from_str::<Value>(l).unwrap()),
            );
        }
    }
    v
}

#[test]
fn planner_guidance_reaches_the_iteration_samples() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(FaultServer::start_with(
        vec![],
        Arc::new(|body: &Value| {
            let user = body["messages"][1]["content"].as_str().unwrap();
            let q = user
                .lines()
                .next()
                .unwrap()
                .trim_start_matches("Question: ");
            format!(
                "Plan: Look first at the paragraphs that name the subject of \"{q}\". Follow the \
                 linked entity to its own paragraph. Stop once one sentence states the answer."
            )
        }),
    ));
    let tmp = tempfile::tempdir().unwrap();
    let file = pipeline(tmp.path(), &server.url);
    let out = tmp.path().join("out");
    assert!(run_file(&file, &[]).status.success());
    let s = summary(&out);
    let c = &stage(&s, "planner")["counters"];
    assert_eq!(c["questions"], 6);
    assert_eq!(c["plans.written"], 6);
    assert_eq!(c["llm.calls"], 6);
    let files: Vec<_> = walk(&tmp.path().join("guidance/stand-in/hotpotqa"));
    let ext = |e: &str| {
        files
            .iter()
            .filter(|f| f.extension().is_some_and(|x| x == e))
            .count()
    };
    assert_eq!(
        (ext("txt"), ext("json")),
        (6, 6),
        "a plan and its lineage each"
    );
    let plans = std::fs::read_to_string(out.join("planner/plans.jsonl")).unwrap();
    assert_eq!(plans.lines().count(), 6);

    let lines = sft_lines(&out);
    let iteration: Vec<&Value> = lines
        .iter()
        .filter(|l| l["task"] == "hseq_iteration")
        .collect();
    assert!(!iteration.is_empty());
    for l in &iteration {
        assert_eq!(l["params"]["guidance"], "planner", "{l}");
        // The plan's teacher answer (no verification: that one entry).
        crate::lineage_check(l, &tmp.path().join("cache"), "stand-in", Some(1));
        let user = l["messages"][1]["content"].as_str().unwrap();
        assert!(
            user.contains("Look first at the paragraphs that name the subject of"),
            "{user}"
        );
    }

    // Rerun: no call, the plans already there are kept, the same samples.
    let before = std::fs::read(out.join("sft/train.jsonl")).unwrap();
    assert!(run_file(&file, &[]).status.success());
    let c = stage(&summary(&out), "planner")["counters"].clone();
    assert_eq!(c["llm.calls"], 0);
    assert_eq!(c["plans.existing"], 6);
    assert_eq!(std::fs::read(out.join("sft/train.jsonl")).unwrap(), before);

    // A label stage reading the plans of a stage that is no planner is a pipeline error.
    let o = bin()
        .args(["validate", file.to_str().unwrap(), "--set"])
        .arg("stages.label.options.plans=hotpot")
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("names no planner stage"), "{err}");

    // The local cache is an export for other pipelines: a label stage of a pipeline without
    // the planner reads the same plans from it, for the same prompts.
    let text = std::fs::read_to_string(&file).unwrap();
    let start = text.find("[[stages]]\nkind = \"planner\"").unwrap();
    let end = text.find("[[stages]]\nkind = \"label\"").unwrap();
    let other = tmp.path().join("from-cache.toml");
    let guidance = tmp.path().join("guidance");
    let label = format!(
        "guidance_cache = \"{}\", planner_model = \"stand-in\"",
        guidance.display()
    );
    let text = format!("{}{}", &text[..start], &text[end..])
        .replace("plans = \"planner\"", &label)
        .replace("name = \"planner-test\"", "name = \"from-cache\"")
        .replace(
            &out.display().to_string(),
            &tmp.path().join("out2").display().to_string(),
        );
    std::fs::write(&other, text).unwrap();
    assert!(run_file(&other, &[]).status.success());
    let prompts = |lines: Vec<Value>| -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = lines
            .iter()
            .filter(|l| l["task"] == "hseq_iteration")
            .map(|l| (l["id"].to_string(), l["messages"][1]["content"].to_string()))
            .collect();
        v.sort();
        v
    };
    let cached = sft_lines(&tmp.path().join("out2"));
    assert!(
        cached
            .iter()
            .filter(|l| l["task"] == "hseq_iteration")
            .all(|l| l["params"]["guidance"] == "cache")
    );
    // The cached plans' sidecars give the samples the same lineage.
    for l in cached.iter().filter(|l| l["task"] == "hseq_iteration") {
        crate::lineage_check(l, &tmp.path().join("cache"), "stand-in", Some(1));
    }
    assert_eq!(prompts(cached), prompts(sft_lines(&out)));
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "txt" || e == "json"))
                .collect()
        })
        .unwrap_or_default()
}

/// Plans from a real vLLM (random tiny model: structure only) for shared HotpotQA questions,
/// read by the label stage, and the zero-call rerun.
#[test]
fn planner_against_a_real_vllm() {
    let Some((url, model)) = crate::triples::vllm() else {
        return;
    };
    let Some(data) = crate::shared("hotpotqa/hotpot_dev_distractor_v1.head.json") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let file = pipeline(tmp.path(), &url);
    let out = tmp.path().join("out");
    let set = vec![
        format!("inputs.hotpot.paths=[\"{}\"]", data.display()),
        format!("llm.model={model}"),
        "stages.planner.options.max_questions=3".to_string(),
        "stages.planner.options.max_tokens=48".to_string(),
    ];
    assert!(run_file(&file, &set).status.success());
    let c = stage(&summary(&out), "planner")["counters"].clone();
    assert_eq!(c["questions"], 3);
    assert_eq!(
        c["plans.written"].as_u64().unwrap() + c["plans.invalid"].as_u64().unwrap(),
        3
    );
    assert_eq!(c["llm.calls"], 3);
    let plans = std::fs::read_to_string(out.join("planner/plans.jsonl")).unwrap();
    assert_eq!(
        plans.lines().count() as u64,
        c["plans.written"].as_u64().unwrap()
    );
    let before = std::fs::read(out.join("sft/train.jsonl")).unwrap();
    assert!(run_file(&file, &set).status.success());
    let c = stage(&summary(&out), "planner")["counters"].clone();
    assert_eq!(c["llm.calls"], 0);
    assert_eq!(std::fs::read(out.join("sft/train.jsonl")).unwrap(), before);
}
