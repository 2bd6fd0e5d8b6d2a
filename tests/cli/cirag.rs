//! The `cirag` stage end to end: a deterministic stand-in teacher on loopback (trajectories,
//! the answer filter, the exact sample format, the zero-call rerun, a budget stop resumed
//! mid-trajectory), and `pipelines/cirag-distill.toml` against a real vLLM when
//! `DISTILLERY_VLLM_URL` is set.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use distillery_testkit::fault_server::{FaultServer, Responder};
use distillery_testkit::stand_in::teacher;
use serde_json::{Value, json};

use crate::triples::run_file;
use crate::{parquet_files, repo, stage, summary};

fn counter(s: &Value, name: &str) -> u64 {
    stage(s, "cirag")["counters"][name]
        .as_u64()
        .unwrap_or_else(|| panic!("no counter {name}"))
}

/// The triples stand-in for extraction calls; integration: keep the first two candidates,
/// ask one follow-up (the object of the first kept fact), then stop; final answer: the gold
/// answer for every other question (by the order of the data file), "Unanswerable" else.
/// Cascade: question 0 is answered from its triples, question 2 from the next level after
/// them, question 4 only from its passages (the gold answer each time).
pub(crate) fn cirag_teacher() -> Responder {
    let data: Value =
        serde_json::from_slice(&std::fs::read(repo().join("data/quickstart/hotpot.json")).unwrap())
            .unwrap();
    let gold: HashMap<String, (usize, String)> = data
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .map(|(i, q)| {
            (
                q["question"].as_str().unwrap().to_string(),
                (i, q["answer"].as_str().unwrap().to_string()),
            )
        })
        .collect();
    let triples = teacher();
    Arc::new(move |body: &Value| {
        if body["response_format"].is_object() {
            return triples(body);
        }
        let user = body["messages"].as_array().unwrap().last().unwrap()["content"]
            .as_str()
            .unwrap()
            .to_string();
        if let Some((evidence, question)) = user.rsplit_once("\n\nQuery: ") {
            let (label, _) = evidence.split_once(":\n").unwrap();
            let (i, answer) = gold[question].clone();
            let refuse = match label {
                "Triples" => i != 0,
                "Sentences" => i == 4,
                _ => false,
            };
            let a = if refuse {
                "Unanswerable".into()
            } else {
                answer
            };
            return format!("Thought: Reading the {label}.\nAnswer: {a}");
        }
        let question = user
            .split("\n\n")
            .next()
            .unwrap()
            .trim_start_matches("[[## Original Query ##]]\n")
            .to_string();
        if user.contains("[[## facts ##]]") {
            let (i, answer) = gold.get(&question).cloned().unwrap_or((1, String::new()));
            let a = if i % 2 == 0 {
                answer
            } else {
                "Unanswerable".into()
            };
            return format!("[[## answer ##]]\n{a}\n\n[[## completed ##]]");
        }
        let facts_json = user
            .split("[[## fact_before_filter ##]]\n")
            .nth(1)
            .unwrap()
            .split("\n\n")
            .next()
            .unwrap();
        let facts: Vec<String> = serde_json::from_value(
            serde_json::from_str::<Value>(facts_json).unwrap()["fact"].clone(),
        )
        .unwrap();
        let kept: Vec<&String> = facts.iter().take(2).collect();
        let first_step = user.contains("[[## historical_context ##]]\nNone");
        let next = match kept.first() {
            Some(f) if first_step => {
                let object = f.trim_end_matches('>').rsplit("; ").next().unwrap();
                format!("What is known about {object}?")
            }
            _ => "<no question>".to_string(),
        };
        format!(
            "[[## thought ##]]\nKeeping {} fact(s).\n\n[[## fact_after_filter ##]]\n{}\n\n[[## question ##]]\n{next}\n\n[[## completed ##]]",
            kept.len(),
            json!({ "fact": kept })
        )
    })
}

fn pipeline(dir: &Path, url: &str) -> std::path::PathBuf {
    let file = dir.join("cirag.toml");
    std::fs::write(
        &file,
        format!(
            r#"version = 1
name = "cirag-test"
output = "{out}"
[run]
shards = 2
[[inputs]]
name = "hotpot"
format = "hotpotqa"
paths = ["{data}"]
[[stages]]
kind = "cirag"
options = {{ top_k = 3, candidates = 5, max_steps = 3, validation_share = 0.3 }}
[llm]
base_url = "{url}"
model = "stand-in"
cache = "{cache}"
max_concurrency = 3
"#,
            out = dir.join("out").display(),
            data = repo().join("data/quickstart/hotpot.json").display(),
            cache = dir.join("cache").display(),
        ),
    )
    .unwrap();
    file
}

fn made(out: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = parquet_files(out)
        .into_iter()
        .filter(|(p, _)| p.starts_with("sft/"))
        .collect();
    for f in [
        "train.jsonl",
        "validation.jsonl",
        "trajectories.jsonl",
        "dataset_info.json",
    ] {
        v.push((
            f.to_string(),
            std::fs::read(out.join("cirag").join(f)).unwrap(),
        ));
    }
    v
}

#[test]
fn cirag_trajectories_become_exact_student_samples() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(FaultServer::start_with(vec![], cirag_teacher()));
    let tmp = tempfile::tempdir().unwrap();
    let file = pipeline(tmp.path(), &server.url);
    let out = tmp.path().join("out");
    assert!(run_file(&file, &[]).status.success());
    let s = summary(&out);
    assert_eq!(counter(&s, "questions"), 6);
    assert_eq!(counter(&s, "trajectories.kept"), 3);
    assert_eq!(counter(&s, "trajectories.wrong_answer"), 3);
    assert_eq!(counter(&s, "trajectories.invalid"), 0);
    let steps = counter(&s, "steps");
    assert_eq!(steps, 12, "two steps a question: one follow-up, then stop");
    assert!(counter(&s, "corpus.passages") > 0);
    let samples = counter(&s, "samples.train") + counter(&s, "samples.validation");
    let generation = counter(&s, "cascade.samples");
    assert_eq!(samples + counter(&s, "duplicates_removed"), 6 + generation);
    // The cascade of each kept trajectory: question 0 stops at its triples, question 4 goes
    // on to its passages.
    let kept: u64 = ["triples", "sentences", "passages", "default", "invalid"]
        .iter()
        .map(|g| counter(&s, &format!("cascade.{g}")))
        .sum();
    assert_eq!(kept, 3);
    assert_eq!(counter(&s, "cascade.triples"), 1);
    assert_eq!(counter(&s, "cascade.passages.hotpotqa"), 1);
    assert_eq!(
        counter(&s, "cascade.invalid") + counter(&s, "cascade.default"),
        0
    );
    let calls = counter(&s, "llm.calls");
    assert!(calls > 0);
    // The HTML report's Figure 3: a third of the kept trajectories stopped at each level.
    let html = crate::ok(&[
        "report",
        "labels",
        out.to_str().unwrap(),
        "--format",
        "html",
    ]);
    let chart = &html[html.find("id=\"cascade-cirag\"").expect("no cascade chart")..];
    let third = format!("data-label=\"triples\" data-value=\"{}\"", 100.0 / 3.0);
    assert!(chart.contains(&third), "{chart}");

    // Samples: system, user with the three input sections, the exact target.
    let mut lines: Vec<Value> = Vec::new();
    for f in ["train.jsonl", "validation.jsonl"] {
        for l in std::fs::read_to_string(out.join("cirag").join(f))
            .unwrap()
            .lines()
        {
            lines.push(serde_json::from_str(l).unwrap());
        }
    }
    assert_eq!(lines.len() as u64, samples);
    let (integration, generations): (Vec<&Value>, Vec<&Value>) =
        lines.iter().partition(|l| l["task"] == "cirag_integration");
    for l in &generations {
        assert_eq!(l["task"], "cirag_generation");
        let m = l["messages"].as_array().unwrap();
        let user = m[1]["content"].as_str().unwrap();
        let label = user.split(":\n").next().unwrap();
        let target = m[2]["content"].as_str().unwrap();
        let refused = l["sufficient"] == false;
        assert!(
            target.starts_with(&format!("Thought: Reading the {label}.\nAnswer: ")),
            "{target}"
        );
        assert_eq!(
            target.ends_with("\nAnswer: Unanswerable"),
            refused,
            "{target}"
        );
        assert_eq!(
            l["params"]["granularity"].as_str().unwrap(),
            label.to_lowercase()
        );
        let last = l["step"] == l["steps"];
        assert_eq!(last, !refused, "only the chosen level answers");
        crate::lineage_check(l, &tmp.path().join("cache"), "stand-in", Some(1));
    }
    assert_eq!(generations.len() as u64, generation);
    for l in &integration {
        assert_eq!(l["task"], "cirag_integration");
        crate::lineage_check(l, &tmp.path().join("cache"), "stand-in", Some(1));
        assert_eq!(l["method"], "cirag");
        let m = l["messages"].as_array().unwrap();
        assert_eq!(m.len(), 3);
        let user = m[1]["content"].as_str().unwrap();
        assert!(user.starts_with("[[## Original Query ##]]\n"), "{user}");
        assert!(user.contains("\n\n[[## fact_before_filter ##]]\n{\"fact\": ["));
        assert!(user.contains("\n\n[[## historical_context ##]]\n"));
        let target = m[2]["content"].as_str().unwrap();
        let step = l["step"].as_u64().unwrap();
        let re_ok = target.starts_with("[[## thought ##]]\nKeeping ")
            && target.contains(" fact(s).\n\n[[## fact_after_filter ##]]\n{\"fact\": [")
            && target.contains("]}\n\n[[## question ##]]\n");
        assert!(re_ok, "{target}");
        if step == 2 {
            assert!(
                target.ends_with("\n\n[[## question ##]]\n<no question>"),
                "{target}"
            );
            assert!(
                user.contains("[[## historical_context ##]]\nStep 1: "),
                "{user}"
            );
        } else {
            assert!(target.ends_with("?"), "{target}");
            assert!(
                user.contains("[[## historical_context ##]]\nNone"),
                "{user}"
            );
        }
        assert!(!target.contains("[[## completed ##]]"));
    }
    // Integration and generation samples load, mask and train as they are.
    crate::label::sft_check(&out.join("cirag/train.jsonl"));
    crate::label::sft_training_check(&out.join("cirag/train.jsonl"));
    let trajectories = std::fs::read_to_string(out.join("cirag/trajectories.jsonl")).unwrap();
    assert_eq!(trajectories.lines().count(), 6);
    let mut levels_asked = 0;
    for l in trajectories.lines() {
        let t: Value = serde_json::from_str(l).unwrap();
        if t["end"] != "kept" {
            assert!(t["cascade"].is_null());
            continue;
        }
        let levels = t["cascade"]["levels"].as_array().unwrap();
        levels_asked += levels.len() as u64;
        let chosen = t["cascade"]["chosen"].as_str().unwrap();
        assert_eq!(levels.last().unwrap()["granularity"], chosen);
        assert!(
            levels[..levels.len() - 1]
                .iter()
                .all(|x| x["refused"] == true)
        );
        assert_eq!(levels[0]["granularity"], "triples");
    }
    assert_eq!(
        levels_asked, generation,
        "every level of a kept cascade is a sample"
    );
    let first: Value = serde_json::from_str(trajectories.lines().next().unwrap()).unwrap();
    assert!(first["steps"][0]["candidates"][0]["document_id"].is_string());
    let info: Value =
        serde_json::from_slice(&std::fs::read(out.join("cirag/dataset_info.json")).unwrap())
            .unwrap();
    assert_eq!(info["distillery_train"]["formatting"], "sharegpt");

    // A rerun makes no call and writes the same bytes.
    let before = made(&out);
    assert!(run_file(&file, &[]).status.success());
    assert_eq!(counter(&summary(&out), "llm.calls"), 0);
    assert_eq!(made(&out), before);

    // One task instead of two (run.shards = 2): the same counters, what every task reads (the
    // corpus, its bytes) counted once, the same trajectories and samples.
    let one = tmp.path().join("one-task");
    let set = [
        format!("output={}", one.display()),
        "stages.cirag.tasks=1".to_string(),
    ];
    assert!(run_file(&file, &set).status.success());
    let s1 = summary(&one);
    for c in [
        "corpus.passages",
        "questions",
        "steps",
        "samples.train",
        "samples.validation",
        "duplicates_removed",
    ] {
        assert_eq!(counter(&s1, c), counter(&s, c), "{c}");
    }
    assert_eq!(
        stage(&s1, "cirag")["bytes_in"],
        stage(&s, "cirag")["bytes_in"]
    );
    assert_eq!(stage(&s, "cirag")["tasks"].as_array().unwrap().len(), 3);
    for f in ["cirag/trajectories.jsonl", "cirag/dataset_info.json"] {
        assert_eq!(
            std::fs::read(one.join(f)).unwrap(),
            std::fs::read(out.join(f)).unwrap(),
            "{f}"
        );
    }
    let sorted = |p: &Path| {
        let mut l: Vec<String> = std::fs::read_to_string(p)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect();
        l.sort();
        l
    };
    assert_eq!(
        sorted(&one.join("cirag/train.jsonl")),
        sorted(&out.join("cirag/train.jsonl"))
    );

    // A budget stop mid-way, then a resume from the cache: the same outputs, and the two runs
    // together make the calls of one.
    let out2 = tmp.path().join("out2");
    let set = vec![
        format!("llm.cache={}", tmp.path().join("cache2").display()),
        format!("output={}", out2.display()),
    ];
    let mut limited = set.clone();
    limited.push(format!("llm.budget.max_tokens={}", 10 * calls / 2));
    let o = run_file(&file, &limited);
    assert_eq!(o.status.code(), Some(3));
    assert!(!out2.join("_manifest.json").exists());
    assert!(run_file(&file, &set).status.success());
    let s2 = summary(&out2);
    assert!(counter(&s2, "llm.cache_hits") > 0);
    assert!(counter(&s2, "llm.calls") < calls);
    assert_eq!(made(&out2), before);

    // A context too small for the longer retrieved passages next to the extraction prompts:
    // they are extracted as pieces that fit (the cuts kept in the cache), and the loop runs
    // as before.
    const CONTEXT: u64 = 540;
    const ANSWER: u64 = 64;
    let tokens = crate::triples::stand_in_tokens();
    server.tokenize_with(tokens.clone());
    let (out3, cache3) = (tmp.path().join("out3"), tmp.path().join("cache3"));
    let small = vec![
        format!("llm.cache={}", cache3.display()),
        format!("output={}", out3.display()),
        format!("llm.context_tokens={CONTEXT}"),
        format!("stages.cirag.options.max_tokens={ANSWER}"),
    ];
    let asked = server.requests();
    assert!(run_file(&file, &small).status.success());
    let s3 = summary(&out3);
    assert_eq!(counter(&s3, "questions"), 6);
    assert_eq!(counter(&s3, "steps"), steps);
    let bodies = server.bodies.lock().unwrap()[asked..].to_vec();
    let (mut whole, mut cut) = (0, 0);
    for b in &bodies {
        let f = b["response_format"]["json_schema"]["name"].as_str();
        if matches!(f, Some("named_entities" | "triples")) {
            assert!(tokens(b) + ANSWER <= CONTEXT, "{b}");
            whole += 1;
        }
    }
    // The kept cuts: one cache entry per passage that was cut.
    for e in crate::walk(&cache3) {
        if std::fs::read_to_string(&e)
            .unwrap()
            .contains("\"passage-pieces\"")
        {
            cut += 1;
        }
    }
    assert!(
        whole > 0 && cut > 0,
        "{whole} extraction requests, {cut} passages cut"
    );
}

/// `pipelines/cirag-distill.toml` on shared samples against a real vLLM (random tiny model:
/// structure only) and the zero-call rerun.
#[test]
fn cirag_pipeline_against_a_real_vllm() {
    let Some((url, model)) = crate::triples::vllm() else {
        return;
    };
    if crate::shared("hotpotqa/hotpot_dev_distractor_v1.head.json").is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let file = repo().join("pipelines/cirag-distill.toml");
    let set = vec![
        format!("output={}", out.display()),
        format!("llm.base_url={url}"),
        format!("llm.model={model}"),
        format!("llm.cache={}", tmp.path().join("cache").display()),
        "llm.max_concurrency=1".to_string(),
        "stages.cirag.options.max_questions=2".to_string(),
        "stages.cirag.options.top_k=2".to_string(),
        "stages.cirag.options.max_steps=2".to_string(),
        "stages.cirag.options.max_tokens=96".to_string(),
        // Every trajectory that ends with an answer is kept, so its cascade runs too.
        "stages.cirag.options.min_f1=0.0".to_string(),
    ];
    assert!(run_file(&file, &set).status.success());
    let s = summary(&out);
    assert_eq!(counter(&s, "questions"), 2);
    let ends: u64 = ["kept", "wrong_answer", "invalid", "no_evidence"]
        .iter()
        .map(|e| counter(&s, &format!("trajectories.{e}")))
        .sum();
    assert_eq!(ends, 2);
    let cascades: u64 = ["triples", "sentences", "passages", "default", "invalid"]
        .iter()
        .map(|g| counter(&s, &format!("cascade.{g}")))
        .sum();
    assert_eq!(cascades, counter(&s, "trajectories.kept"));
    assert!(counter(&s, "llm.calls") > 0);
    let lines = std::fs::read_to_string(out.join("cirag/trajectories.jsonl")).unwrap();
    assert_eq!(lines.lines().count(), 2);
    let before = made(&out);
    assert!(run_file(&file, &set).status.success());
    assert_eq!(counter(&summary(&out), "llm.calls"), 0);
    assert_eq!(made(&out), before);
}

/// The `cirag` stage retrieving from an `index` stage built in the same job (hybrid: BM25
/// and MiniLM vectors fused) and reranking candidate facts by MiniLM similarity; then from
/// the same index root by URL (BM25). Skips without `DISTILLERY_EMBED_MODEL`.
#[test]
fn cirag_retrieves_from_a_built_index_and_reranks_by_embedding() {
    let Some(model) = crate::embed_model("cirag over a built index") else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(FaultServer::start_with(vec![], cirag_teacher()));
    let tmp = tempfile::tempdir().unwrap();
    let file = pipeline(tmp.path(), &server.url);
    let out = tmp.path().join("out");
    let mut toml = std::fs::read_to_string(&file).unwrap();
    let cirag_at = toml.find("[[stages]]").unwrap();
    toml.insert_str(
        cirag_at,
        &format!(
            "[[stages]]\nname = \"passages\"\nkind = \"index\"\n\
             options = {{ kinds = [\"bm25\", \"dense\"], embedding = {{ model = \"{model}\" }} }}\n"
        ),
    );
    let toml = toml.replace(
        "options = { top_k = 3,",
        &format!(
            "options = {{ index = \"passages\", retrieval = \"hybrid\", rerank = {{ model = \"{model}\" }}, top_k = 3,"
        ),
    );
    std::fs::write(&file, &toml).unwrap();
    let o = run_file(&file, &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = summary(&out);
    let built: Value =
        serde_json::from_slice(&std::fs::read(out.join("indexes/passages.json")).unwrap()).unwrap();
    let version = built["version"].as_str().unwrap();
    assert_eq!(
        counter(&s, "corpus.passages"),
        built["manifest"]["passages"].as_u64().unwrap()
    );
    assert_eq!(counter(&s, "questions"), 6);
    assert!(counter(&s, "steps") >= 6);
    assert!(counter(&s, "trajectories.kept") > 0);

    // Candidates come from the index's passages, in descending MiniLM similarity to the
    // step's query (checked here with the model loaded on its own).
    let embedder = rt
        .block_on(distillery_exec::kit::embedding::open(
            &toml::from_str(&format!("model = \"{model}\"")).unwrap(),
        ))
        .unwrap();
    let trajectories = std::fs::read_to_string(out.join("cirag/trajectories.jsonl")).unwrap();
    let mut checked = 0;
    for line in trajectories.lines() {
        let t: Value = serde_json::from_str(line).unwrap();
        for step in t["steps"].as_array().unwrap() {
            let facts: Vec<String> = step["candidates"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["fact"].as_str().unwrap().to_string())
                .collect();
            for c in step["candidates"].as_array().unwrap() {
                assert!(c["document_id"].as_str().unwrap().starts_with("hotpotqa:"));
            }
            let mut texts = vec![step["query"].as_str().unwrap().to_string()];
            texts.extend(facts.iter().cloned());
            let v = rt.block_on(embedder.embed(&texts)).unwrap();
            let sim = |f: &[f32]| v[0].iter().zip(f).map(|(a, b)| a * b).sum::<f32>();
            for w in v[1..].windows(2) {
                assert!(
                    sim(&w[0]) + 1e-4 >= sim(&w[1]),
                    "candidates out of similarity order: {facts:?}"
                );
            }
            checked += facts.len();
        }
    }
    assert!(checked > 10, "{checked} candidates checked");
    let lines = std::fs::read_to_string(out.join("cirag/train.jsonl")).unwrap();
    let first: Value = serde_json::from_str(lines.lines().next().unwrap()).unwrap();
    let params = &first["params"];
    assert_eq!(params["index_version"], version, "{first}");
    assert_eq!(params["retrieval"], "hybrid");

    // A rerun: no call, the same bytes.
    let before = made(&out);
    assert!(run_file(&file, &[]).status.success());
    assert_eq!(counter(&summary(&out), "llm.calls"), 0);
    assert_eq!(made(&out), before);

    // The same root by path, BM25 and shared words: the version CURRENT names, other
    // candidates (word overlap instead of similarity order).
    let root = out.join("index");
    let by_root = tmp.path().join("by-root.toml");
    let start = toml.find("[[stages]]").unwrap();
    let end = toml[start + 1..].find("[[stages]]").unwrap() + start + 1;
    let plain = format!("{}{}", &toml[..start], &toml[end..]).replace(
        &format!(
            "index = \"passages\", retrieval = \"hybrid\", rerank = {{ model = \"{model}\" }},"
        ),
        &format!("index = \"{}\",", root.display()),
    );
    std::fs::write(&by_root, plain).unwrap();
    let out2 = tmp.path().join("out2");
    let o = run_file(&by_root, &[format!("output={}", out2.display())]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s2 = summary(&out2);
    assert_eq!(counter(&s2, "questions"), 6);
    assert_eq!(
        counter(&s2, "corpus.passages"),
        counter(&s, "corpus.passages")
    );
    let t2 = std::fs::read_to_string(out2.join("cirag/trajectories.jsonl")).unwrap();
    assert_ne!(
        t2, trajectories,
        "rerank and retrieval change the candidates"
    );
}
