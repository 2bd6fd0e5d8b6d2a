//! The label stage's `verify` option: the teacher confirms each positive of the SFT method.
//! With a stand-in teacher (a positive supports the answer when its text holds the answer)
//! the confirmed positives, the counters, the SFT method and a zero-call rerun are exact; a
//! real vLLM runs the same pipeline end to end and reruns with no call.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use distillery_testkit::fault_server::FaultServer;
use serde_json::{Value, json};

use crate::triples::run_file;
use crate::{repo, run, sql_json, stage, summary};

fn pipeline(dir: &Path, url: Option<&str>) -> std::path::PathBuf {
    let file = dir.join("verify.toml");
    let llm = url.map_or(String::new(), |url| {
        format!(
            "[llm]\nbase_url = \"{url}\"\nmodel = \"stand-in\"\ncache = \"{}\"\n",
            dir.join("cache").display()
        )
    });
    std::fs::write(
        &file,
        format!(
            r#"version = 1
name = "verify-test"
output = "{out}"
[[inputs]]
name = "hotpot"
format = "hotpotqa"
paths = ["{data}"]
[[stages]]
kind = "hseq"
[[stages]]
kind = "label"
options = {{ verify = true, validation_share = 0.0 }}
{llm}"#,
            out = dir.join("out").display(),
            data = repo().join("data/quickstart/hotpot.json").display(),
        ),
    )
    .unwrap();
    file
}

/// The evidence text and the answer of a support request.
fn parts(user: &str) -> (String, String) {
    let answer = user
        .lines()
        .find_map(|l| l.strip_prefix("Answer: "))
        .unwrap()
        .to_string();
    let evidence = user
        .split("```\n")
        .nth(1)
        .unwrap()
        .trim_end_matches("\n```");
    (evidence.to_string(), answer)
}

fn supports(evidence: &str, answer: &str) -> bool {
    evidence.to_lowercase().contains(&answer.to_lowercase())
}

/// Per question and method, the segment ids of its positives.
fn positives(out: &Path) -> HashMap<(String, String), Vec<String>> {
    sql_json(out, "SELECT question_id, method, positives FROM labels")
        .into_iter()
        .map(|r| {
            let ids = r["positives"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["segment_id"].as_str().unwrap().to_string())
                .collect();
            let key = (
                r["question_id"].as_str().unwrap().to_string(),
                r["method"].as_str().unwrap().to_string(),
            );
            (key, ids)
        })
        .collect()
}

#[test]
fn verify_keeps_the_positives_the_teacher_confirms() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(FaultServer::start_with(
        vec![],
        Arc::new(|body: &Value| {
            assert_eq!(body["response_format"]["json_schema"]["name"], "support");
            let (evidence, answer) = parts(body["messages"][1]["content"].as_str().unwrap());
            json!({ "supports": supports(&evidence, &answer) }).to_string()
        }),
    ));
    let tmp = tempfile::tempdir().unwrap();
    let file = pipeline(tmp.path(), Some(&server.url));
    let out = tmp.path().join("out");
    assert!(run_file(&file, &[]).status.success());

    let content: HashMap<String, String> = sql_json(&out, "SELECT id, content FROM segments")
        .into_iter()
        .map(|r| {
            (
                r["id"].as_str().unwrap().to_string(),
                r["content"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let answers: HashMap<String, String> = sql_json(&out, "SELECT id, answers FROM questions")
        .into_iter()
        .map(|r| {
            let a = r["answers"][0].as_str().unwrap_or_default().to_string();
            (r["id"].as_str().unwrap().to_string(), a)
        })
        .collect();
    let pos = positives(&out);
    let (mut candidates, mut confirmed) = (0u64, 0u64);
    for ((q, method), ids) in &pos {
        if method != "answer-aware" {
            continue;
        }
        let verified = &pos[&(q.clone(), "answer-aware+verify".to_string())];
        let want: Vec<String> = ids
            .iter()
            .filter(|id| supports(&content[*id], &answers[q]))
            .cloned()
            .collect();
        assert_eq!(verified, &want, "question {q}");
        candidates += ids.len() as u64;
        confirmed += want.len() as u64;
    }
    assert_eq!(pos.len(), 12, "6 questions, 2 methods");
    let s = summary(&out);
    let c = stage(&s, "label")["counters"].clone();
    let n = |k: &str| c[k].as_u64().unwrap();
    assert_eq!(n("verify.candidates"), candidates);
    assert_eq!(n("verify.confirmed"), confirmed);
    assert_eq!(n("verify.rejected"), candidates - confirmed);
    assert_eq!(n("verify.invalid"), 0);
    assert!(
        confirmed > 0 && confirmed < candidates,
        "{confirmed} of {candidates}"
    );
    assert_eq!(n("llm.calls") + n("llm.cache_hits"), candidates);
    assert_eq!(n("labels.answer-aware+verify"), 6);

    // The SFT samples follow the verified positives; the report shows both methods.
    let train = std::fs::read_to_string(out.join("sft/train.jsonl")).unwrap();
    let methods: Vec<String> = train
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|l| l["task"] == "hseq_iteration")
        .map(|l| l["method"].as_str().unwrap().to_string())
        .collect();
    assert!(!methods.is_empty());
    assert!(
        methods.iter().all(|m| m == "answer-aware+verify"),
        "{methods:?}"
    );
    // Each names the judgements of its question's candidates; the rest are teacher-free.
    for l in train
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
    {
        if l["task"] != "hseq_iteration" {
            assert!(
                l["teacher"].is_null() && l["cache_entries"] == json!([]),
                "{l}"
            );
            continue;
        }
        let q = l["question_id"].as_str().unwrap().to_string();
        let n = pos[&(q, "answer-aware".to_string())].len();
        crate::lineage_check(&l, &tmp.path().join("cache"), "stand-in", Some(n));
    }
    let report: Value =
        serde_json::from_slice(&std::fs::read(out.join("label_report.json")).unwrap()).unwrap();
    let hotpot = &report["hotpotqa"];
    assert!(hotpot["answer-aware"].is_object() && hotpot["answer-aware+verify"].is_object());

    crate::label::sft_check(&out.join("sft/train.jsonl"));
    crate::label::sft_training_check(&out.join("sft/train.jsonl"));

    // A rerun asks nothing and writes the same samples.
    assert!(run_file(&file, &[]).status.success());
    let c = stage(&summary(&out), "label")["counters"].clone();
    assert_eq!(c["llm.calls"], 0);
    assert_eq!(c["verify.candidates"].as_u64().unwrap(), candidates);
    assert_eq!(
        std::fs::read_to_string(out.join("sft/train.jsonl")).unwrap(),
        train
    );
}

#[test]
fn verify_without_a_teacher_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let file = pipeline(tmp.path(), None);
    let o = run(&["validate", file.to_str().unwrap()]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("verify") && err.contains("[llm]"), "{err}");
}

#[test]
fn verify_against_a_real_vllm() {
    let Some((url, model)) = crate::triples::vllm() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let file = pipeline(tmp.path(), Some(&url));
    let out = tmp.path().join("out");
    let set = vec![format!("llm.model={model}")];
    assert!(run_file(&file, &set).status.success());
    let c = stage(&summary(&out), "label")["counters"].clone();
    let n = |k: &str| c[k].as_u64().unwrap();
    assert!(n("verify.candidates") > 0);
    assert_eq!(
        n("verify.confirmed") + n("verify.rejected") + n("verify.invalid"),
        n("verify.candidates")
    );
    let before = std::fs::read(out.join("sft/train.jsonl")).unwrap();
    assert!(run_file(&file, &set).status.success());
    let c = stage(&summary(&out), "label")["counters"].clone();
    assert_eq!(c["llm.calls"], 0);
    assert_eq!(std::fs::read(out.join("sft/train.jsonl")).unwrap(), before);
}
