//! The `relevance` stage: HANRAG `<Q, D, IS_REL>` samples from a stand-in teacher (exact
//! sample form, agreement with gold evidence, zero-call rerun) and from a real vLLM.

use std::path::Path;
use std::sync::Arc;

use distillery_testkit::fault_server::FaultServer;
use serde_json::{Value, json};

use crate::triples::run_file;
use crate::{repo, stage, summary};

fn pipeline(dir: &Path, url: &str, data: &Path, format: &str) -> std::path::PathBuf {
    let file = dir.join("relevance.toml");
    std::fs::write(
        &file,
        format!(
            r#"version = 1
name = "relevance-test"
output = "{out}"
[[inputs]]
name = "qa"
format = "{format}"
paths = ["{data}"]
[[stages]]
kind = "relevance"
options = {{ validation_share = 0.2 }}
[llm]
base_url = "{url}"
model = "stand-in"
cache = "{cache}"
"#,
            out = dir.join("out").display(),
            data = data.display(),
            cache = dir.join("cache").display(),
        ),
    )
    .unwrap();
    file
}

fn lines(out: &Path) -> Vec<Value> {
    let mut v = Vec::new();
    for f in ["relevance/train.jsonl", "relevance/validation.jsonl"] {
        let text = std::fs::read_to_string(out.join(f)).unwrap();
        v.extend(
            text.lines()
                .map(|l| serde_json::from_str::<Value>(l).unwrap()),
        );
    }
    v
}

#[test]
fn relevance_labels_become_discriminator_samples() {
    // Relevant when the document's title is named in the question.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(FaultServer::start_with(
        vec![],
        Arc::new(|body: &Value| {
            let user = body["messages"][1]["content"].as_str().unwrap();
            let question = user.lines().next().unwrap();
            let title = user.split("```\n").nth(1).unwrap().lines().next().unwrap();
            json!({ "relevant": question.contains(title) }).to_string()
        }),
    ));
    let tmp = tempfile::tempdir().unwrap();
    let file = pipeline(
        tmp.path(),
        &server.url,
        &repo().join("data/quickstart/hotpot.json"),
        "hotpotqa",
    );
    let out = tmp.path().join("out");
    assert!(run_file(&file, &[]).status.success());
    let s = summary(&out);
    let c = stage(&s, "relevance")["counters"].clone();
    let n = |k: &str| c[k].as_u64().unwrap();
    assert_eq!(n("questions"), 6);
    assert!(n("pairs") >= 12);
    assert_eq!(n("labels.relevant") + n("labels.irrelevant"), n("pairs"));
    assert!(n("labels.relevant") > 0 && n("labels.irrelevant") > 0);
    let gold: u64 = [
        "true_positive",
        "false_positive",
        "false_negative",
        "true_negative",
    ]
    .iter()
    .map(|k| n(&format!("gold.{k}")))
    .sum();
    assert_eq!(
        gold,
        n("pairs"),
        "every quickstart question has gold evidence"
    );
    assert!(n("gold.true_positive") > 0);
    assert_eq!(n("llm.calls"), n("pairs"));

    let ls = lines(&out);
    assert_eq!(ls.len() as u64 + n("duplicates_removed"), n("pairs"));
    for l in &ls {
        assert_eq!(l["task"], "hanrag_relevance");
        let m = l["messages"].as_array().unwrap();
        let user = m[1]["content"].as_str().unwrap();
        assert!(
            user.starts_with("Question: ") && user.ends_with("\n```\nRelevant:"),
            "{user}"
        );
        let target = m[2]["content"].as_str().unwrap();
        assert!(target == "true" || target == "false");
        let question = user.lines().next().unwrap();
        let title = user.split("```\n").nth(1).unwrap().lines().next().unwrap();
        assert_eq!(target == "true", question.contains(title));
        crate::lineage_check(l, &tmp.path().join("cache"), "stand-in", Some(1));
    }
    let before = std::fs::read(out.join("relevance/train.jsonl")).unwrap();
    assert!(run_file(&file, &[]).status.success());
    let c = stage(&summary(&out), "relevance")["counters"].clone();
    assert_eq!(c["llm.calls"], 0);
    assert_eq!(
        std::fs::read(out.join("relevance/train.jsonl")).unwrap(),
        before
    );
}

#[test]
fn relevance_against_a_real_vllm() {
    let Some((url, model)) = crate::triples::vllm() else {
        return;
    };
    let Some(data) = crate::shared("musique/musique_ans_v1.0_train.first70.jsonl") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let file = pipeline(tmp.path(), &url, &data, "musique");
    let out = tmp.path().join("out");
    let set = vec![
        format!("llm.model={model}"),
        "stages.relevance.options.max_questions=2".to_string(),
    ];
    assert!(run_file(&file, &set).status.success());
    let c = stage(&summary(&out), "relevance")["counters"].clone();
    let n = |k: &str| c[k].as_u64().unwrap();
    assert_eq!(n("questions"), 2);
    assert_eq!(
        n("labels.relevant") + n("labels.irrelevant") + n("labels.invalid"),
        n("pairs")
    );
    assert_eq!(n("pairs"), 40, "MuSiQue gives 20 paragraphs a question");
    let before = std::fs::read(out.join("relevance/train.jsonl")).unwrap();
    assert!(run_file(&file, &set).status.success());
    let c = stage(&summary(&out), "relevance")["counters"].clone();
    assert_eq!(c["llm.calls"], 0);
    assert_eq!(
        std::fs::read(out.join("relevance/train.jsonl")).unwrap(),
        before
    );
}

/// `decontaminate` in a teacher stage, as in the label stage: no sample of an evaluation
/// question, the drops counted.
#[test]
fn relevance_samples_of_evaluation_questions_are_dropped() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(FaultServer::start_with(
        vec![],
        Arc::new(|_: &Value| json!({ "relevant": true }).to_string()),
    ));
    let tmp = tempfile::tempdir().unwrap();
    let data = repo().join("data/quickstart/hotpot.json");
    let records: Vec<Value> = serde_json::from_slice(&std::fs::read(&data).unwrap()).unwrap();
    let eval = tmp.path().join("eval.json");
    std::fs::write(&eval, serde_json::to_vec(&records[..1]).unwrap()).unwrap();
    let file = pipeline(tmp.path(), &server.url, &data, "hotpotqa");
    let text = std::fs::read_to_string(&file).unwrap().replace(
        "options = { validation_share = 0.2 }",
        &format!(
            "options = {{ validation_share = 0.2, decontaminate = [\"{}\"] }}",
            eval.display()
        ),
    );
    std::fs::write(&file, text).unwrap();
    let out = tmp.path().join("out");
    assert!(run_file(&file, &[]).status.success());
    let c = stage(&summary(&out), "relevance")["counters"].clone();
    let evaluated = records[0]["question"].as_str().unwrap();
    let dropped = c["decontaminated"].as_u64().unwrap();
    assert!(dropped > 0, "{c}");
    assert_eq!(c["decontaminate.questions"], 1);
    let ls = lines(&out);
    assert_eq!(
        ls.len() as u64 + dropped + c["duplicates_removed"].as_u64().unwrap(),
        c["pairs"].as_u64().unwrap()
    );
    for l in &ls {
        let user = l["messages"][1]["content"].as_str().unwrap();
        assert!(!user.contains(evaluated), "{user}");
    }
}
