//! The `ras` stage: RAS HotpotQA-SUBQ planner and answerer samples from a stand-in teacher
//! and base model (no-retrieval by real sentence embeddings, document filtering, sub-query
//! fallback, exact sample form, zero-call rerun), and from a real vLLM. Both need the
//! embedding model of `DISTILLERY_EMBED_MODEL` (`.ci/run` unpacks all-MiniLM-L6-v2) and skip
//! without it.

use std::path::Path;
use std::sync::Arc;

use distillery_testkit::fault_server::{FaultServer, Responder};
use distillery_testkit::stand_in::teacher;
use serde_json::{Value, json};

use crate::triples::run_file;
use crate::{repo, stage, summary};

fn pipeline(dir: &Path, url: &str, data: &Path, model: &str) -> std::path::PathBuf {
    let file = dir.join("ras.toml");
    std::fs::write(
        &file,
        format!(
            r#"version = 1
name = "ras-test"
output = "{out}"
[[inputs]]
name = "hotpot"
format = "hotpotqa"
paths = ["{data}"]
[[stages]]
kind = "ras"
options = {{ embedding_model = "{model}", validation_share = 0.2 }}
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

/// Stand-in teacher and base model (see the test for what each question should give).
fn ras_teacher() -> Responder {
    let triples = teacher();
    Arc::new(move |body: &Value| {
        let format = body["response_format"]["json_schema"]["name"].as_str();
        let msgs = body["messages"].as_array().unwrap();
        let user = msgs.last().unwrap()["content"].as_str().unwrap();
        match format {
            Some("named_entities") | Some("triples") => triples(body),
            Some("relevance") => {
                let q = user.lines().next().unwrap();
                let title = user.split("```\n").nth(1).unwrap().lines().next().unwrap();
                let irrelevant = (q.contains("Were Midnight") && title == "Midnight Orchard")
                    || (q.contains("How long") && title == "Paper Comets");
                json!({ "relevant": !irrelevant }).to_string()
            }
            _ if user.starts_with("Answer the question with a short span") => {
                if user.contains("What nationality") {
                    "Norwegian".into()
                } else {
                    "I am not sure.".into()
                }
            }
            _ => {
                let title = user
                    .split("Document (")
                    .nth(1)
                    .unwrap()
                    .split("):")
                    .next()
                    .unwrap();
                if title == "Oskar Vey" {
                    "Sure!".into()
                } else {
                    format!("What does the document say about {title}?")
                }
            }
        }
    })
}

fn lines(out: &Path) -> Vec<Value> {
    let mut v = Vec::new();
    for f in ["ras/train.jsonl", "ras/validation.jsonl"] {
        let text = std::fs::read_to_string(out.join(f)).unwrap();
        v.extend(
            text.lines()
                .map(|l| serde_json::from_str::<Value>(l).unwrap()),
        );
    }
    v
}

#[test]
fn ras_subq_samples_from_a_stand_in_teacher() {
    let Some(model) = crate::embed_model("the RAS embedding test") else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(FaultServer::start_with(vec![], ras_teacher()));
    let tmp = tempfile::tempdir().unwrap();
    let file = pipeline(
        tmp.path(),
        &server.url,
        &repo().join("data/quickstart/hotpot.json"),
        &model,
    );
    let out = tmp.path().join("out");
    assert!(run_file(&file, &[]).status.success());
    let c = stage(&summary(&out), "ras")["counters"].clone();
    let n = |k: &str| c[k].as_u64().unwrap_or_else(|| panic!("{k}"));
    assert_eq!(n("questions"), 6);
    assert_eq!(n("no_retrieval"), 1);
    assert_eq!(n("chains"), 4);
    assert_eq!(n("dropped.filtered_out"), 1);
    assert_eq!(n("documents.filtered"), 2);
    assert_eq!(n("documents.kept"), 7);
    assert_eq!(n("subq.fallback"), 1);
    assert_eq!(n("subq.teacher"), 6);
    assert_eq!(n("samples.train") + n("samples.validation"), 17);

    let ls = lines(&out);
    let labels: Vec<&str> = ls
        .iter()
        .map(|l| l["messages"][1]["content"].as_str().unwrap())
        .collect();
    assert_eq!(labels.iter().filter(|l| **l == "[NO_RETRIEVAL]").count(), 1);
    assert_eq!(labels.iter().filter(|l| **l == "[SUFFICIENT]").count(), 4);
    assert_eq!(
        labels.iter().filter(|l| l.starts_with("[SUBQ] ")).count(),
        7
    );
    for l in &ls {
        // The base answer, the filter's judgements and the sub-queries asked for it.
        crate::lineage_check(l, &tmp.path().join("cache"), "stand-in", None);
        let m = l["messages"].as_array().unwrap();
        assert_eq!(m.len(), 2);
        let input = m[0]["content"].as_str().unwrap();
        let task = l["task"].as_str().unwrap();
        assert!(task == "ras_planner" || task == "ras_answerer");
        assert!(input.contains("\nQuestion: "), "{input}");
        for line in input
            .lines()
            .filter(|x| x.starts_with("Retrieved Graph Information: "))
        {
            let g = line.trim_start_matches("Retrieved Graph Information: ");
            assert!(g.starts_with('[') && g.ends_with(']'), "{g}");
            assert!(g == "[]" || g.contains("(S> "), "{g}");
        }
    }
    // The fallback sub-query of Oskar Vey's document.
    assert!(
        labels.contains(
            &"[SUBQ] What does Oskar Vey say about Who was born earlier, Ines Calloway or Oskar Vey"
        ),
        "{labels:?}"
    );
    let before = std::fs::read(out.join("ras/train.jsonl")).unwrap();
    assert!(run_file(&file, &[]).status.success());
    let c = stage(&summary(&out), "ras")["counters"].clone();
    assert_eq!(c["llm.calls"], 0);
    assert_eq!(std::fs::read(out.join("ras/train.jsonl")).unwrap(), before);

    // A context too small for the longer documents next to the extraction prompts: they are
    // extracted as pieces that fit (none refused), and every question gives its samples.
    const CONTEXT: u64 = 540;
    const ANSWER: u64 = 64;
    let tokens = crate::triples::stand_in_tokens();
    server.tokenize_with(tokens.clone());
    let out2 = tmp.path().join("out2");
    let small = vec![
        format!("output={}", out2.display()),
        format!("llm.cache={}", tmp.path().join("cache2").display()),
        format!("llm.context_tokens={CONTEXT}"),
        format!("stages.ras.options.triple_max_tokens={ANSWER}"),
    ];
    let asked = server.requests();
    assert!(run_file(&file, &small).status.success());
    let c = stage(&summary(&out2), "ras")["counters"].clone();
    let n = |k: &str| c[k].as_u64().unwrap_or_else(|| panic!("{k}"));
    assert!(n("triples.split_documents") > 0, "{c}");
    assert!(n("triples.split_documents") < n("documents.kept"), "{c}");
    assert_eq!(n("samples.train") + n("samples.validation"), 17);
    assert!(
        server
            .side_requests
            .load(std::sync::atomic::Ordering::SeqCst)
            > 0
    );
    // Every extraction request of this run fits the context with its answer.
    let bodies = server.bodies.lock().unwrap()[asked..].to_vec();
    let extractions: Vec<_> = bodies
        .iter()
        .filter(|b| {
            let f = b["response_format"]["json_schema"]["name"].as_str();
            matches!(f, Some("named_entities" | "triples"))
        })
        .collect();
    assert!(!extractions.is_empty());
    for b in extractions {
        assert!(tokens(b) + ANSWER <= CONTEXT, "{b}");
    }
    // The pieces' triples reach the graphs of the samples.
    let graphs: Vec<String> = lines(&out2)
        .iter()
        .flat_map(|l| {
            let input = l["messages"][0]["content"].as_str().unwrap().to_string();
            input
                .lines()
                .filter(|x| x.starts_with("Retrieved Graph Information: ['(S> "))
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(!graphs.is_empty());
    // A rerun makes no call: the cuts come from the cache.
    assert!(run_file(&file, &small).status.success());
    let c = stage(&summary(&out2), "ras")["counters"].clone();
    assert_eq!(c["llm.calls"], 0);
}

#[test]
fn ras_against_a_real_vllm() {
    let Some(model) = crate::embed_model("the RAS embedding test") else {
        return;
    };
    let Some((url, served)) = crate::triples::vllm() else {
        return;
    };
    let Some(data) = crate::shared("hotpotqa/hotpot_dev_distractor_v1.head.json") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let file = pipeline(tmp.path(), &url, &data, &model);
    let out = tmp.path().join("out");
    let set = vec![
        format!("llm.model={served}"),
        "stages.ras.options.max_questions=2".to_string(),
        "stages.ras.options.max_tokens=32".to_string(),
        "stages.ras.options.triple_max_tokens=64".to_string(),
    ];
    assert!(run_file(&file, &set).status.success());
    let c = stage(&summary(&out), "ras")["counters"].clone();
    let n = |k: &str| c[k].as_u64().unwrap();
    assert_eq!(n("questions"), 2);
    let ends = n("no_retrieval")
        + n("chains")
        + n("dropped.no_answer")
        + n("dropped.no_supporting_documents")
        + n("dropped.filtered_out");
    assert_eq!(ends, 2);
    assert!(n("llm.calls") > 0);
    let before = std::fs::read(out.join("ras/train.jsonl")).unwrap();
    assert!(run_file(&file, &set).status.success());
    let c = stage(&summary(&out), "ras")["counters"].clone();
    assert_eq!(c["llm.calls"], 0);
    assert_eq!(std::fs::read(out.join("ras/train.jsonl")).unwrap(), before);
}
