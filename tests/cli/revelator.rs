//! `pipelines/revelator.toml` with a stand-in teacher on loopback: HANRAG's five Revelator
//! skills from one run (the router set holding all four classes), the compound benchmark
//! (B.1) with exact decomposer targets and its accuracy report, sub-question relevance
//! pairs, and a rerun with no call; the `compound` stage against a real vLLM.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::Arc;

use distillery_testkit::fault_server::{FaultServer, Responder};
use serde_json::{Value, json};

use crate::triples::run_file;
use crate::{ok, repo, stage, summary};

/// Relevance: the paragraph's title is named by the question. A simple question: "What does
/// <title> say about <topic>?", answered by the last word of the document's first sentence.
/// A combination: the simple questions joined, or `no` for a group of 4.
fn revelator_teacher() -> Responder {
    Arc::new(|body: &Value| {
        let user = body["messages"][1]["content"].as_str().unwrap();
        match body["response_format"]["json_schema"]["name"].as_str() {
            Some("relevance") => {
                let question = user.lines().next().unwrap();
                let title = user.split("```\n").nth(1).unwrap().lines().next().unwrap();
                json!({ "relevant": question.contains(title) }).to_string()
            }
            Some("compound_qa") => {
                let field = |k: &str| {
                    user.lines()
                        .find_map(|l| l.strip_prefix(k))
                        .unwrap()
                        .to_string()
                };
                let (topic, title, doc) = (field("Topic: "), field("Title: "), field("Doc: "));
                let first = doc.split(". ").next().unwrap();
                let answer = first
                    .split_whitespace()
                    .last()
                    .unwrap()
                    .trim_matches(|c: char| !c.is_alphanumeric());
                json!({
                    "Question": format!("What does {title} say about {topic}?"),
                    "Answer": answer,
                })
                .to_string()
            }
            _ => {
                let qs: Vec<&str> = user
                    .lines()
                    .filter_map(|l| {
                        l.split_once(": ")
                            .filter(|(k, _)| k.starts_with("Simple Question"))
                    })
                    .map(|(_, q)| q)
                    .collect();
                if qs.len() == 4 {
                    return "no".to_string();
                }
                let joined: Vec<&str> = qs.iter().map(|q| q.trim_end_matches('?')).collect();
                format!("Compound Question: \"{}?\"", joined.join(", and "))
            }
        }
    })
}

/// The teacher `pipelines/revelator.toml` names.
const MODEL: &str = "Qwen/Qwen2.5-7B-Instruct";

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn samples(out: &Path, dir: &str) -> Vec<Value> {
    let mut v = lines(&out.join(dir).join("train.jsonl"));
    v.extend(lines(&out.join(dir).join("validation.jsonl")));
    v
}

fn target(s: &Value) -> &str {
    s["messages"].as_array().unwrap().last().unwrap()["content"]
        .as_str()
        .unwrap()
}

fn counters(out: &Path, name: &str) -> Value {
    stage(&summary(out), name)["counters"].clone()
}

#[test]
fn revelator_pipeline_writes_all_five_skills() {
    if crate::shared("musique/musique_ans_v1.0_train.first70.jsonl").is_none() {
        return;
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(FaultServer::start_with(vec![], revelator_teacher()));
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let set = vec![
        format!("output={}", out.display()),
        format!("llm.base_url={}", server.url),
        format!("llm.cache={}", tmp.path().join("cache").display()),
        "llm.max_concurrency=4".to_string(),
    ];
    let file = repo().join("pipelines/revelator.toml");
    assert!(run_file(&file, &set).status.success());

    // The router set: all four classes, the compound one from the compound stage.
    let label = samples(&out, "sft");
    let compound = samples(&out, "compound");
    let classes: BTreeSet<&str> = label
        .iter()
        .chain(&compound)
        .filter(|s| s["task"] == "hanrag_router")
        .map(target)
        .collect();
    assert_eq!(
        classes.into_iter().collect::<Vec<_>>(),
        [
            "complex question",
            "compound question",
            "single-step question",
            "straightforward question"
        ]
    );
    for task in ["hanrag_refiner", "hanrag_ending"] {
        assert!(label.iter().any(|s| s["task"] == task), "{task}");
    }

    // The benchmark: every kept compound question once, in the split of its entity; the
    // train split's questions are the decomposer's, targets exact.
    let c = counters(&out, "compound");
    let n = |k: &str| c[k].as_u64().unwrap();
    assert!(n("entities") > 0 && n("compounds.kept") > 0, "{c}");
    assert!(n("compounds.refused") > 0, "groups of 4 are refused: {c}");
    assert_eq!(n("qa.asked"), n("documents"));
    assert_eq!(
        n("qa.kept") + n("qa.answer_not_in_document") + n("qa.invalid"),
        n("qa.asked")
    );
    assert_eq!(
        n("compounds.kept") + n("compounds.refused") + n("compounds.invalid"),
        n("compounds.asked")
    );
    let mut by_split: HashMap<String, Vec<Value>> = HashMap::new();
    let mut entity_split: HashMap<String, String> = HashMap::new();
    for split in ["train", "dev", "test"] {
        let ls = lines(&out.join(format!("compound/benchmark/{split}.jsonl")));
        assert_eq!(ls.len() as u64, n(&format!("benchmark.{split}")));
        for l in &ls {
            assert_eq!(l["split"], split);
            let e = l["entity"].as_str().unwrap().to_string();
            let prev = entity_split.insert(e, split.to_string());
            assert!(prev.is_none_or(|p| p == split), "an entity in two splits");
            let subs = l["sub_questions"].as_array().unwrap();
            assert!((2..=4).contains(&subs.len()), "{l}");
            let answers: Vec<&Value> = subs.iter().map(|s| &s["answer"]).collect();
            assert_eq!(
                l["answers"].as_array().unwrap().iter().collect::<Vec<_>>(),
                answers
            );
            let joined: Vec<&str> = subs
                .iter()
                .map(|s| s["question"].as_str().unwrap().trim_end_matches('?'))
                .collect();
            assert_eq!(l["question"], format!("{}?", joined.join(", and ")));
        }
        by_split.insert(split.to_string(), ls);
    }
    let train = &by_split["train"];
    let decomposer: Vec<&Value> = compound
        .iter()
        .filter(|s| s["task"] == "hanrag_decomposer")
        .collect();
    assert_eq!(
        decomposer.len() + c["duplicates_removed"].as_u64().unwrap_or(0) as usize / 2,
        train.len()
    );
    for d in &decomposer {
        let b = train
            .iter()
            .find(|b| b["id"] == d["question_id"])
            .expect("a train question");
        let subs: Vec<&str> = b["sub_questions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["question"].as_str().unwrap())
            .collect();
        assert_eq!(target(d), json!({ "decomposition": subs }).to_string());
        // The sub-questions' entries and the combination's.
        crate::lineage_check(d, &tmp.path().join("cache"), MODEL, Some(subs.len() + 1));
        let user = d["messages"].as_array().unwrap()[1]["content"]
            .as_str()
            .unwrap();
        assert_eq!(
            user,
            format!("Query: {}\nAnswer:", b["question"].as_str().unwrap())
        );
    }

    // Accuracy: the answers themselves score 100, nothing scores 0 and is missing.
    let test = out.join("compound/benchmark/train.jsonl");
    let preds = tmp.path().join("preds.jsonl");
    let mut text = String::new();
    for b in train {
        let p = b["answers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect::<Vec<_>>()
            .join(" / ");
        text.push_str(&format!("{}\n", json!({"id": b["id"], "prediction": p})));
    }
    std::fs::write(&preds, text).unwrap();
    let report = |p: &Path| -> Value {
        serde_json::from_str(&ok(&[
            "report",
            "compound",
            test.to_str().unwrap(),
            p.to_str().unwrap(),
            "--format",
            "json",
        ]))
        .unwrap()
    };
    let r = report(&preds);
    assert_eq!(
        (
            r["accuracy"].as_f64().unwrap(),
            r["missing"].as_u64().unwrap()
        ),
        (100.0, 0)
    );
    std::fs::write(&preds, "").unwrap();
    let r = report(&preds);
    assert_eq!(r["accuracy"].as_f64().unwrap(), 0.0);
    assert_eq!(r["missing"].as_u64().unwrap(), train.len() as u64);

    // The Revelator's file loads and masks as the label stage's does.
    crate::label::sft_check(&out.join("compound/train.jsonl"));
    crate::label::sft_training_check(&out.join("compound/train.jsonl"));

    // Relevance: sub-questions judged against the supporting paragraphs too.
    let rc = counters(&out, "relevance");
    assert!(rc["sub_queries.pairs"].as_u64().unwrap() > 0, "{rc}");
    let rel = samples(&out, "relevance");
    let questions: BTreeSet<&str> = rel
        .iter()
        .map(|s| {
            s["messages"].as_array().unwrap()[1]["content"]
                .as_str()
                .unwrap()
                .lines()
                .next()
                .unwrap()
        })
        .collect();
    assert!(questions.len() > 20, "whole questions and sub-questions");
    for s in &rel {
        crate::lineage_check(s, &tmp.path().join("cache"), MODEL, Some(1));
    }
    for s in &label {
        assert!(s["teacher"].is_null(), "teacher-free: {s}");
    }

    // One task instead of two: the same benchmark bytes and the same samples.
    let one = tmp.path().join("one-task");
    let mut single = set.clone();
    single[0] = format!("output={}", one.display());
    single.push("stages.compound.tasks=1".to_string());
    assert!(run_file(&file, &single).status.success());
    let sorted = |p: &Path| {
        let mut l: Vec<String> = std::fs::read_to_string(p)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect();
        l.sort();
        l
    };
    for split in ["train", "dev", "test"] {
        let f = format!("compound/benchmark/{split}.jsonl");
        assert_eq!(
            std::fs::read(one.join(&f)).unwrap(),
            std::fs::read(out.join(&f)).unwrap(),
            "{f}"
        );
    }
    assert_eq!(
        sorted(&one.join("compound/train.jsonl")),
        sorted(&out.join("compound/train.jsonl"))
    );
    let tasks = stage(&summary(&out), "compound")["tasks"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(tasks, 3, "two shard tasks and the merge");

    // A rerun asks nothing and writes the same files.
    let files = [
        "compound/benchmark/train.jsonl",
        "compound/train.jsonl",
        "relevance/train.jsonl",
        "sft/train.jsonl",
    ];
    let before: Vec<Vec<u8>> = files
        .iter()
        .map(|f| std::fs::read(out.join(f)).unwrap())
        .collect();
    assert!(run_file(&file, &set).status.success());
    for s in ["relevance", "compound"] {
        assert_eq!(counters(&out, s)["llm.calls"], 0, "{s}");
    }
    let after: Vec<Vec<u8>> = files
        .iter()
        .map(|f| std::fs::read(out.join(f)).unwrap())
        .collect();
    assert_eq!(after, before);
}

#[test]
fn compound_stage_against_a_real_vllm() {
    let Some((url, model)) = crate::triples::vllm() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("compound.toml");
    std::fs::write(
        &file,
        format!(
            "version = 1\nname = \"compound-vllm\"\noutput = \"{out}\"\n\
             [[inputs]]\nname = \"hotpot\"\nformat = \"hotpotqa\"\npaths = [\"{data}\"]\n\
             [[stages]]\nkind = \"compound\"\noptions = {{ max_entities = 2, max_tokens = 48 }}\n\
             [llm]\nbase_url = \"{url}\"\nmodel = \"{model}\"\ncache = \"{cache}\"\n",
            out = tmp.path().join("out").display(),
            data = repo().join("data/quickstart/hotpot.json").display(),
            cache = tmp.path().join("cache").display(),
        ),
    )
    .unwrap();
    let out = tmp.path().join("out");
    assert!(run_file(&file, &[]).status.success());
    let c = counters(&out, "compound");
    let n = |k: &str| c[k].as_u64().unwrap();
    assert!(n("qa.asked") > 0);
    assert_eq!(
        n("qa.kept") + n("qa.answer_not_in_document") + n("qa.invalid"),
        n("qa.asked")
    );
    let before = std::fs::read(out.join("compound/benchmark/train.jsonl")).unwrap();
    assert!(run_file(&file, &[]).status.success());
    assert_eq!(counters(&out, "compound")["llm.calls"], 0);
    assert_eq!(
        std::fs::read(out.join("compound/benchmark/train.jsonl")).unwrap(),
        before
    );
}
