//! The `text2triple` stage: RAS text-to-triple SFT samples from the shared WikiOFGraph sample
//! (`pipelines/text2triple.toml`), their exact format, one and two tasks alike, loadability
//! and training; and from triples a `triples` stage extracted with the stand-in teacher, which
//! the `export` stage also writes in KiRAG's layout.

use std::collections::BTreeMap;
use std::path::Path;

use distillery_testkit::fault_server::FaultServer;
use distillery_testkit::stand_in::teacher;
use serde_json::Value;

use crate::label::{sft_check, sft_training_check};
use crate::{ok, repo, shared, stage, summary};

fn lines(out: &Path, stage: &str) -> Vec<Value> {
    ["train", "validation"]
        .iter()
        .flat_map(|s| {
            std::fs::read_to_string(out.join(format!("{stage}/{s}.jsonl")))
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str::<Value>(l).unwrap())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The user turn's passage: what follows the built-in prompt's `Text: `.
fn passage(sample: &Value) -> String {
    let user = sample["messages"][0]["content"].as_str().unwrap();
    user.rsplit_once("\n\nText: ").unwrap().1.to_string()
}

#[test]
fn wikiofgraph_pairs_become_ras_text2triple_samples() {
    let Some(sample) = shared("wikiofgraph/wikiofgraph_gpteval_sample1000.jsonl") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let pipeline = repo().join("pipelines/text2triple.toml");
    let run = |name: &str, shards: u32| {
        let out = tmp.path().join(name);
        ok(&[
            "run",
            pipeline.to_str().unwrap(),
            "--set",
            &format!("output={}", out.display()),
            "--set",
            &format!("run.shards={shards}"),
        ]);
        out
    };
    let (one, two) = (run("one", 1), run("two", 2));

    // One sample per record: the passage is the text, the target the record's triplet with
    // WikiOFGraph's markers rewritten into RAS's.
    let raw: Vec<Value> = std::fs::read_to_string(&sample)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let got = lines(&two, "text2triple");
    assert_eq!(got.len(), raw.len());
    let by_text: BTreeMap<String, &Value> = got.iter().map(|s| (passage(s), s)).collect();
    for r in &raw {
        let want = r["triplet"]
            .as_str()
            .unwrap()
            .replace("(<S> ", "(S> ")
            .replace("| <P> ", "| P> ")
            .replace("| <O> ", "| O> ");
        let s = by_text[r["text"].as_str().unwrap().trim()];
        assert_eq!(s["messages"][1]["content"], want.as_str());
    }
    // Golden: the first record's sample, turn by turn.
    let albury = by_text["HMS Albury was a Hunt-class minesweeper of the Aberdare sub-class built \
                          for the Royal Navy during World War I."];
    assert_eq!(
        albury["messages"],
        serde_json::json!([
            {"role": "user", "content": "Turn the text below into knowledge-graph triples. \
        Write every fact it states as (S> subject| P> predicate| O> object) and separate the triples \
        with \", \". Name entities as the text does, never with a pronoun, and let each predicate say \
        the relation plainly.\n\nText: HMS Albury was a Hunt-class minesweeper of the Aberdare \
        sub-class built for the Royal Navy during World War I."},
            {"role": "assistant", "content": "(S> Hms albury| P> Class| O> Hunt-class), \
        (S> Hms albury| P> Subclass| O> Aberdare sub-class), (S> Hms albury| P> Builtfor| O> Royal navy), \
        (S> Hms albury| P> Builtduring| O> World war i)"}
        ])
    );
    assert_eq!(albury["task"], "ras_text2triple");
    assert_eq!(albury["dataset"], "wikiofgraph");
    assert_eq!(albury["params"]["triples"], "input");
    let s = summary(&two);
    let c = &stage(&s, "text2triple")["counters"];
    assert_eq!(c["triples"], 4980, "{c}");
    assert_eq!(c["triples.unplaced"], 0, "{c}");
    assert_eq!(
        c["samples.train"].as_u64().unwrap() + c["samples.validation"].as_u64().unwrap(),
        1000
    );
    // The same files for one task and two.
    for f in ["train.jsonl", "validation.jsonl"] {
        let read = |o: &Path| {
            let mut v: Vec<String> = std::fs::read_to_string(o.join("text2triple").join(f))
                .unwrap()
                .lines()
                .map(String::from)
                .collect();
            v.sort();
            v
        };
        assert_eq!(read(&one), read(&two), "{f}");
    }
    sft_check(&two.join("text2triple/train.jsonl"));
    sft_training_check(&two.join("text2triple/train.jsonl"));
}

#[test]
fn teacher_extracted_triples_become_text2triple_samples() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(FaultServer::start_with(vec![], teacher()));
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let file = tmp.path().join("t2t.toml");
    std::fs::write(
        &file,
        format!(
            r#"version = 1
name = "t2t-teacher"
output = "{out}"
[run]
shards = 2
[[inputs]]
name = "hotpot"
format = "hotpotqa"
paths = ["{data}"]
[[stages]]
kind = "triples"
options = {{ exports = ["ras"] }}
[[stages]]
kind = "text2triple"
options = {{ triples = "triples" }}
[[stages]]
kind = "export"
options = {{ formats = ["kirag"], triples = "triples" }}
[llm]
base_url = "{url}"
model = "stand-in"
cache = "{cache}"
"#,
            out = out.display(),
            data = repo().join("data/quickstart/hotpot.json").display(),
            url = server.url,
            cache = tmp.path().join("cache").display(),
        ),
    )
    .unwrap();
    ok(&["run", file.to_str().unwrap()]);
    // Each context paragraph is one passage of the triples stage: its sample's target is the
    // RAS export's target of that passage.
    let export: BTreeMap<String, String> = std::fs::read_to_string(out.join("openie/ras.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|v| {
            (
                v["document_id"].as_str().unwrap().to_string(),
                v["target"].as_str().unwrap().to_string(),
            )
        })
        .filter(|(_, t)| !t.is_empty())
        .collect();
    let got = lines(&out, "text2triple");
    assert!(got.len() >= 5, "{} samples", got.len());
    assert_eq!(got.len(), export.len());
    for s in &got {
        let doc = s["question_id"].as_str().unwrap();
        assert_eq!(s["messages"][1]["content"], export[doc].as_str(), "{doc}");
        assert_eq!(s["params"]["triples"], "triples");
        // The OpenIE answer the passage's triples came from (one passage, one answer).
        crate::lineage_check(s, &tmp.path().join("cache"), "stand-in", Some(1));
    }
    let s = summary(&out);
    let c = &stage(&s, "text2triple")["counters"];
    assert_eq!(c["triples.unplaced"], 0, "{c}");

    // The KiRAG export of the same triples: a line per document, its triples in order.
    let kirag = std::fs::read_to_string(out.join("export/kirag_triples.jsonl")).unwrap();
    let mut n = 0;
    for line in kirag.lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        let items: Vec<String> = v["triples"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                assert_eq!(
                    t["text"],
                    format!(
                        "<{}; {}; {}>",
                        t["head"].as_str().unwrap(),
                        t["relation"].as_str().unwrap(),
                        t["tail"].as_str().unwrap()
                    )
                );
                assert!(t["sentence"].is_u64(), "{t}");
                format!(
                    "(S> {}| P> {}| O> {})",
                    t["head"].as_str().unwrap(),
                    t["relation"].as_str().unwrap(),
                    t["tail"].as_str().unwrap()
                )
            })
            .collect();
        assert_eq!(items.join(", "), export[v["id"].as_str().unwrap()]);
        n += 1;
    }
    assert_eq!(n, export.len());
}
