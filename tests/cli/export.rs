//! The `export` stage: the IRCoT / Adaptive-RAG retrieval corpus of a MediaWiki input and the
//! KiRAG / TRACE document triples of a WikiOFGraph input (a small file written here in its
//! released layout), checked against the staged documents; the same bytes for one task and
//! two.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::{ok, repo, sql_json, stage, summary};

const WIKIOFGRAPH: &str = concat!(
    r#"{"triplet": "(<S> Lake Varnholm| <P> located in| <O> Osterland), (<S> Lake Varnholm| <P> type| <O> glacial lake)", "text": "Lake Varnholm is a glacial lake in Osterland."}"#,
    "\n",
    r#"{"triplet": "(<S> Oskar Vey| <P> occupation| <O> writer)", "text": "Oskar Vey is a writer."}"#,
    "\n",
);

fn read_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn exports_write_the_ircot_corpus_and_kirag_triples() {
    let tmp = tempfile::tempdir().unwrap();
    // The same records in two files: staged twice with one id each, exported once.
    let wog = tmp.path().join("wikiofgraph.jsonl");
    std::fs::write(&wog, WIKIOFGRAPH).unwrap();
    let wog2 = tmp.path().join("wikiofgraph-copy.jsonl");
    std::fs::write(&wog2, WIKIOFGRAPH).unwrap();
    let file = tmp.path().join("export.toml");
    std::fs::write(
        &file,
        format!(
            r#"version = 1
name = "export"
output = "unused"
[[inputs]]
name = "wiki"
format = "mediawiki"
paths = ["{wiki}"]
[[inputs]]
name = "wog"
format = "wikiofgraph"
paths = ["{wog}", "{wog2}"]
[[stages]]
kind = "export"
options = {{ formats = ["ircot", "kirag"] }}
"#,
            wiki = repo().join("data/quickstart/wiki.xml").display(),
            wog = wog.display(),
            wog2 = wog2.display(),
        ),
    )
    .unwrap();
    let run = |name: &str, shards: u32| {
        let out = tmp.path().join(name);
        ok(&[
            "run",
            file.to_str().unwrap(),
            "--set",
            &format!("output={}", out.display()),
            "--set",
            &format!("run.shards={shards}"),
        ]);
        out
    };
    let (one, two) = (run("one", 1), run("two", 3));
    for f in ["ircot_corpus.jsonl", "kirag_triples.jsonl"] {
        let read = |o: &Path| std::fs::read(o.join("export").join(f)).unwrap();
        assert!(
            read(&one) == read(&two),
            "{f} differs between 1 and 3 tasks"
        );
    }

    // IRCoT: every paragraph of every document once, its text a piece of its document's, the
    // lead paragraphs of a wiki page marked as the abstract.
    let docs: BTreeMap<String, Value> =
        sql_json(&two, "SELECT id, title, uri, text FROM documents")
            .into_iter()
            .map(|d| (d["id"].as_str().unwrap().to_string(), d))
            .collect();
    let corpus = read_lines(&two.join("export/ircot_corpus.jsonl"));
    let mut keys: Vec<&str> = Vec::new();
    for p in &corpus {
        let id = p["id"].as_str().unwrap();
        let (doc_id, k) = id.rsplit_once('-').unwrap();
        assert_eq!(k, p["paragraph_index"].to_string());
        let d = &docs[doc_id];
        assert_eq!(p["title"], d["title"]);
        assert_eq!(p["url"], d["uri"]);
        let text = p["paragraph_text"].as_str().unwrap();
        assert!(
            !text.is_empty() && d["text"].as_str().unwrap().contains(text),
            "{p}"
        );
        if k == "0" {
            assert_eq!(p["is_abstract"], true, "{p}");
        }
        keys.push(id);
    }
    let n = keys.len();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), n, "paragraph ids repeat");
    assert!(corpus.iter().any(|p| p["is_abstract"] == false));
    let s = summary(&two);
    let c = &stage(&s, "export")["counters"];
    assert_eq!(c["paragraphs"], n as u64, "{c}");
    assert_eq!(c["documents"], docs.len() as u64, "{c}");

    // KiRAG: one line per WikiOFGraph record, its triples in order.
    let kg = read_lines(&two.join("export/kirag_triples.jsonl"));
    assert_eq!(kg.len(), 2);
    let lake = kg
        .iter()
        .find(|l| l["title"] == "Lake Varnholm")
        .expect("the lake's line");
    assert_eq!(
        lake["text"],
        "Lake Varnholm is a glacial lake in Osterland."
    );
    assert_eq!(
        lake["triples"],
        serde_json::json!([
            {"text": "<Lake Varnholm; located in; Osterland>", "sentence": null,
             "head": "Lake Varnholm", "relation": "located in", "tail": "Osterland"},
            {"text": "<Lake Varnholm; type; glacial lake>", "sentence": null,
             "head": "Lake Varnholm", "relation": "type", "tail": "glacial lake"}
        ])
    );
    assert!(docs.contains_key(lake["id"].as_str().unwrap()));
    assert_eq!(c["triples"], 3, "{c}");
    assert_eq!(c["triples.without_document"], 0, "{c}");
}
