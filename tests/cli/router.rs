//! The `router` stage: Adaptive-RAG silver labels from a stand-in teacher (the letters follow
//! the answers, a rerun makes no call) and from a real vLLM.

use std::path::Path;
use std::sync::Arc;

use distillery_testkit::fault_server::FaultServer;
use serde_json::Value;

use crate::triples::run_file;
use crate::{repo, stage, summary};

fn pipeline(dir: &Path, url: &str) -> std::path::PathBuf {
    let file = dir.join("router.toml");
    let text = format!(
        "version = 1\nname = \"router-test\"\noutput = \"{out}\"\n[[inputs]]\nname = \"qa\"\n\
         format = \"hotpotqa\"\npaths = [\"{data}\"]\n[[stages]]\nkind = \"router\"\n\
         [llm]\nbase_url = \"{url}\"\nmodel = \"stand-in\"\ncache = \"{cache}\"\n",
        out = dir.join("out").display(),
        data = repo().join("data/quickstart/hotpot.json").display(),
        cache = dir.join("cache").display(),
    );
    std::fs::write(&file, text).unwrap();
    file
}

fn samples(out: &Path) -> Vec<Value> {
    ["router/train.jsonl", "router/validation.jsonl"]
        .iter()
        .flat_map(|f| {
            let text = std::fs::read_to_string(out.join(f)).unwrap();
            text.lines()
                .map(|l| serde_json::from_str::<Value>(l).unwrap())
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn router_letters_follow_the_teacher_s_answers() {
    // Closed-book the stand-in only says "yes"; with documents it names the first title.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(FaultServer::start_with(
        vec![],
        Arc::new(|body: &Value| {
            let user = body["messages"][0]["content"].as_str().unwrap();
            match user.split("\n\n").nth(1) {
                Some(docs) if user.starts_with("Using the documents") => {
                    docs.lines().next().unwrap().to_string()
                }
                _ => "yes".to_string(),
            }
        }),
    ));
    let tmp = tempfile::tempdir().unwrap();
    let file = pipeline(tmp.path(), &server.url);
    let out = tmp.path().join("out");
    assert!(run_file(&file, &[]).status.success());
    let c = stage(&summary(&out), "router")["counters"].clone();
    let n = |k: &str| c[k].as_u64().unwrap_or(0);
    assert_eq!(n("questions"), 6);
    assert_eq!(n("label.a") + n("label.b") + n("label.c"), 6);
    // The one yes/no question is answered closed-book.
    assert_eq!(n("label.a"), 1);
    let got = samples(&out);
    assert_eq!(got.len(), 6);
    for s in &got {
        let m = s["messages"].as_array().unwrap();
        assert_eq!(m.len(), 2);
        assert!(m[0]["content"].as_str().unwrap().contains("Question: "));
        let letter = m[1]["content"].as_str().unwrap();
        assert!(["A", "B", "C"].contains(&letter), "{letter}");
        assert_eq!(s["task"], "router_silver");
        let yes = m[0]["content"]
            .as_str()
            .unwrap()
            .contains("released in the same year");
        assert_eq!(letter == "A", yes, "{s}");
    }
    // A rerun is answered from the cache.
    assert!(run_file(&file, &[]).status.success());
    let c = stage(&summary(&out), "router")["counters"].clone();
    assert_eq!(c["llm.calls"], 0);
    assert_eq!(samples(&out), got);
}

#[test]
fn router_against_a_real_vllm() {
    let Some((url, model)) = crate::triples::vllm() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let file = pipeline(tmp.path(), &url);
    let out = tmp.path().join("out");
    // Any answer reaches F1 0: a question is labelled `A` after one call, unless the tiny
    // model answers nothing (an invalid answer), when the one-step answer decides (`C` when
    // that one is empty too: CI's model answered every request with nothing).
    let set = vec![
        format!("llm.model={model}"),
        "stages.router.options.min_f1=0".to_string(),
        "stages.router.options.max_questions=3".to_string(),
    ];
    assert!(run_file(&file, &set).status.success());
    let c = stage(&summary(&out), "router")["counters"].clone();
    let n = |k: &str| c[k].as_u64().unwrap_or(0);
    assert_eq!(n("questions"), 3);
    assert_eq!(n("label.a") + n("label.b") + n("label.c"), 3);
    // One call a question, and a second one where the closed-book answer was empty.
    assert!((3..=6).contains(&n("llm.calls")), "{c}");
    assert!(n("answers.invalid") <= n("llm.calls"), "{c}");
    assert_eq!(samples(&out).len(), 3);
    assert!(run_file(&file, &set).status.success());
    let c = stage(&summary(&out), "router")["counters"].clone();
    assert_eq!(c["llm.calls"], 0);
}
