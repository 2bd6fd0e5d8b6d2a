//! The `index` stage and `distillery search` / `index list` / `index rollback`: BM25, dense
//! (the CI MiniLM model, and a vLLM embeddings server) and KG indexes from the shared samples
//! and the quick start; Python's `tantivy`, `usearch` and `networkx` open the files; an
//! incremental build answers as a full rebuild; a reader racing builds never fails; BM25
//! recall@10 on the shared HotpotQA sample against `bm25s`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use serde_json::Value;

use crate::{ok, repo, run, shared, stage, summary};

/// A MediaWiki export of `(title, id, text)` pages.
fn wiki(pages: &[(&str, u32, &str)]) -> String {
    let mut s = String::from(
        r#"<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/" version="0.10" xml:lang="en">
  <siteinfo><sitename>Test</sitename><dbname>testwiki</dbname><namespaces><namespace key="0" case="first-letter" /></namespaces></siteinfo>
"#,
    );
    for (title, id, text) in pages {
        s.push_str(&format!(
            "  <page><title>{title}</title><ns>0</ns><id>{id}</id><revision><id>{}</id><timestamp>2026-11-26T00:00:00Z</timestamp><model>wikitext</model><format>text/x-wiki</format><text xml:space=\"preserve\">{text}</text></revision></page>\n",
            id + 1000
        ));
    }
    s.push_str("</mediawiki>\n");
    s
}

const PAGES: &[(&str, u32, &str)] = &[
    (
        "Lake Varnholm",
        1,
        "Lake Varnholm is a glacial lake in Osterland.\n\nIts outflow is the Varn River, which runs north to the sea.",
    ),
    (
        "Tessel River",
        2,
        "The Tessel River feeds Lake Varnholm from the south.\n\nTrout and grayling live in the Tessel.",
    ),
    (
        "Osterland",
        3,
        "Osterland is a region with many lakes.\n\nIts capital is Brenna, a market town on the Varn.",
    ),
    (
        "Brenna",
        4,
        "Brenna is the capital of Osterland.\n\nThe town hosts a fish market every Friday.",
    ),
];

/// A pipeline indexing a wiki file into `root`.
fn pipeline(dir: &Path, name: &str, wiki: &Path, root: &Path, kinds: &str, extra: &str) -> PathBuf {
    let file = dir.join(format!("{name}.toml"));
    std::fs::write(
        &file,
        format!(
            r#"version = 1
name = "{name}"
output = "{out}"
[[inputs]]
name = "wiki"
format = "mediawiki"
paths = ["{wiki}"]
[[stages]]
kind = "index"
options = {{ kinds = {kinds}, root = "{root}", incremental = true, keep_versions = 2{extra} }}
"#,
            out = dir.join(format!("out-{name}")).display(),
            wiki = wiki.display(),
            root = root.display(),
        ),
    )
    .unwrap();
    file
}

fn embedding(model: &Option<String>) -> (String, String) {
    match model {
        Some(m) => (
            r#"["bm25", "dense"]"#.into(),
            format!(r#", embedding = {{ model = "{m}", batch = 32 }}"#),
        ),
        None => (r#"["bm25"]"#.into(), String::new()),
    }
}

fn search(root: &Path, query: &str, kind: &str, extra: &[&str]) -> Vec<Value> {
    let mut args = vec![
        "search",
        root.to_str().unwrap(),
        query,
        "--kind",
        kind,
        "-k",
        "3",
        "--format",
        "json",
    ];
    args.extend(extra);
    ok(&args)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn counter(s: &Value, k: &str) -> u64 {
    s["counters"][k].as_u64().unwrap_or(0)
}

/// Python's own packages open the files of a version (required in CI).
fn python_check(version_dir: &Path) -> Option<String> {
    crate::python_script(
        "tantivy, usearch, networkx",
        "check_index.py",
        &[version_dir.as_os_str()],
    )
}

#[test]
fn an_incremental_build_answers_as_a_full_rebuild_and_switches_atomically() {
    let tmp = tempfile::tempdir().unwrap();
    let model = crate::embed_model("the dense index");
    let (kinds, extra) = embedding(&model);
    let (w1, w2) = (tmp.path().join("day1.xml"), tmp.path().join("day2.xml"));
    std::fs::write(&w1, wiki(PAGES)).unwrap();
    // Day 2: one paragraph of one page edited, one page (2 paragraphs) gone, one page (1
    // paragraph) new: 7 passages.
    let mut day2: Vec<(&str, u32, &str)> = PAGES.to_vec();
    day2[3].2 =
        "Brenna is the capital of Osterland.\n\nThe town hosts a cheese fair every Saturday.";
    day2.remove(1);
    day2.push((
        "Varn River",
        5,
        "The Varn River leaves Lake Varnholm and passes Brenna.",
    ));
    std::fs::write(&w2, wiki(&day2)).unwrap();
    let root = tmp.path().join("index");
    let p1 = pipeline(tmp.path(), "day1", &w1, &root, &kinds, &extra);
    let p2 = pipeline(tmp.path(), "day2", &w2, &root, &kinds, &extra);
    ok(&["run", p1.to_str().unwrap()]);
    let s1 = summary(&tmp.path().join("out-day1"));
    let st1 = stage(&s1, "index");
    assert_eq!(counter(st1, "passages"), 8, "{st1}");
    let v1 = std::fs::read_to_string(root.join("CURRENT")).unwrap();
    let before = search(&root, "fish market", "bm25", &[]);
    assert_eq!(before[0]["title"], "Brenna");

    // A reader loops while day 2 builds: every search answers.
    let stop = Arc::new(AtomicBool::new(false));
    let served = Arc::new(AtomicU64::new(0));
    let reader = {
        let (stop, served, root) = (stop.clone(), served.clone(), root.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let hits = search(&root, "Osterland capital", "bm25", &[]);
                assert!(!hits.is_empty(), "a search found nothing mid-build");
                served.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    ok(&["run", p2.to_str().unwrap()]);
    // The day-1 version is still readable, with its old text.
    let old = search(&root, "grayling trout", "bm25", &["--version", v1.trim()]);
    assert_eq!(old[0]["title"], "Tessel River");
    // A second build of the same input: nothing changes, the current version is kept.
    ok(&["run", p2.to_str().unwrap()]);
    stop.store(true, Ordering::Relaxed);
    reader.join().expect("the reader never failed");
    eprintln!(
        "reader searches during the builds: {}",
        served.load(Ordering::Relaxed)
    );

    let s2 = summary(&tmp.path().join("out-day2"));
    let st2 = stage(&s2, "index");
    eprintln!("{st2}");
    // The rerun of day 2 changed nothing.
    assert_eq!(counter(st2, "passages.unchanged"), 7, "{st2}");
    assert_eq!(counter(st2, "shards.reused"), 1, "{st2}");
    assert_eq!(counter(st2, "embeddings.computed"), 0, "{st2}");
    assert_eq!(counter(st2, "versions.kept"), 1, "{st2}");

    // The versions: CURRENT moved, the day-1 version is still readable.
    let list: Vec<Value> = serde_json::from_str(&ok(&[
        "index",
        "list",
        root.to_str().unwrap(),
        "--format",
        "json",
    ]))
    .unwrap();
    assert_eq!(list.len(), 2, "day 1, day 2 (kept by its rerun): {list:?}");
    let cur: Vec<&Value> = list.iter().filter(|v| v["current"] == true).collect();
    assert_eq!(cur.len(), 1);
    let m = &cur[0]["manifest"];
    let day2_build = m;
    assert_eq!(day2_build["changes"]["changed"], 1, "{day2_build}");
    assert_eq!(day2_build["changes"]["deleted"], 2, "{day2_build}");
    assert_eq!(day2_build["changes"]["added"], 1, "{day2_build}");
    assert_eq!(day2_build["changes"]["unchanged"], 5, "{day2_build}");
    if model.is_some() {
        // Only the edited and the new passage were embedded.
        assert_eq!(day2_build["embedded"], 2, "{day2_build}");
        assert_eq!(day2_build["embeddings_reused"], 5, "{day2_build}");
    }
    assert_eq!(m["passages"], 7);
    assert_ne!(v1.trim(), m["version"].as_str().unwrap());

    // Search finds the new text, not the old; the old version still answers with it.
    let now = search(&root, "cheese fair", "bm25", &[]);
    assert_eq!(now[0]["title"], "Brenna");
    assert!(search(&root, "grayling trout", "bm25", &[]).is_empty());

    // A full rebuild of day 2 into another root answers every query the same.
    let full_root = tmp.path().join("full");
    let pf = pipeline(tmp.path(), "full", &w2, &full_root, &kinds, &extra);
    ok(&["run", pf.to_str().unwrap()]);
    let queries = [
        "Lake Varnholm outflow",
        "capital of Osterland",
        "cheese fair Saturday",
        "river passes Brenna",
        "fish market",
        "glacial lake region",
    ];
    let kinds_to_check: &[&str] = if model.is_some() {
        &["bm25", "dense", "hybrid"]
    } else {
        &["bm25"]
    };
    for kind in kinds_to_check {
        for q in queries {
            let (a, b) = (
                search(&root, q, kind, &[]),
                search(&full_root, q, kind, &[]),
            );
            assert_eq!(a, b, "{kind} `{q}`: incremental and full rebuild differ");
        }
    }

    // Rollback points CURRENT back.
    let versions: Vec<String> = list
        .iter()
        .map(|v| v["version"].as_str().unwrap().to_string())
        .collect();
    ok(&["index", "rollback", root.to_str().unwrap(), &versions[0]]);
    assert_eq!(
        std::fs::read_to_string(root.join("CURRENT"))
            .unwrap()
            .trim(),
        versions[0]
    );
    let bad = run(&[
        "index",
        "rollback",
        root.to_str().unwrap(),
        "no-such-version",
    ]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("no-such-version"));
}

/// A pipeline over the shared HotpotQA and MuSiQue samples and the quick-start inputs.
fn samples_pipeline(dir: &Path, root: &Path, kinds: &str, extra: &str) -> Option<PathBuf> {
    let hotpot = shared("hotpotqa/hotpot_dev_distractor_v1.head.json")?;
    let musique = shared("musique/musique_ans_v1.0_train.first70.jsonl")?;
    let qs = repo().join("data/quickstart");
    let file = dir.join("samples.toml");
    std::fs::write(
        &file,
        format!(
            r#"version = 1
name = "index-samples"
output = "{out}"
[run]
shards = 2
[[inputs]]
name = "hotpot"
format = "hotpotqa"
paths = ["{hotpot}"]
split = "dev"
[[inputs]]
name = "musique"
format = "musique"
paths = ["{musique}"]
split = "train"
[[inputs]]
name = "wiki"
format = "mediawiki"
paths = ["{qs}/wiki.xml"]
[[inputs]]
name = "moviekb"
format = "metaqa-kb"
paths = ["{qs}/kb.txt"]
[[inputs]]
name = "freebase"
format = "freebase"
paths = ["{qs}/freebase.nt"]
[[stages]]
kind = "index"
options = {{ kinds = {kinds}, root = "{root}"{extra} }}
"#,
            out = dir.join("out").display(),
            hotpot = hotpot.display(),
            musique = musique.display(),
            qs = qs.display(),
            root = root.display(),
        ),
    )
    .unwrap();
    Some(file)
}

#[test]
fn the_shared_samples_index_into_bm25_dense_and_kg_that_python_opens() {
    let tmp = tempfile::tempdir().unwrap();
    let model = crate::embed_model("the dense index");
    let (kinds, extra) = embedding(&model);
    let kinds = kinds.replace(']', r#", "kg"]"#);
    let root = tmp.path().join("index");
    let Some(p) = samples_pipeline(tmp.path(), &root, &kinds, &extra) else {
        return;
    };
    ok(&["run", p.to_str().unwrap()]);
    let s = summary(&tmp.path().join("out"));
    let st = stage(&s, "index");
    eprintln!("{st}");
    assert!(counter(st, "passages") > 500, "{st}");
    assert!(counter(st, "kg.edges") > 10, "{st}");
    let hits = search(&root, "Which magazine was started first?", "bm25", &[]);
    assert_eq!(hits.len(), 3);
    for key in ["id", "document_id", "title", "score", "text"] {
        assert!(hits[0].get(key).is_some(), "{key} missing: {}", hits[0]);
    }
    if model.is_some() {
        let dense = search(&root, "a glacial lake in Osterland", "dense", &[]);
        assert_eq!(dense[0]["title"], "Lake Varnholm", "{dense:?}");
        let hybrid = search(&root, "Lake Varnholm outflow river", "hybrid", &[]);
        assert_eq!(hybrid.len(), 3);
    }
    let table = ok(&["search", root.to_str().unwrap(), "Lake Varnholm"]);
    assert!(table.contains("Lake Varnholm"), "{table}");
    let v = std::fs::read_to_string(root.join("CURRENT")).unwrap();
    let version = root.join("versions").join(v.trim());
    // The quickstart's two English `common.topic.alias` rows name their nodes.
    let kg = distillery_index::kg::KgIndex::open(&version.join("kg")).unwrap();
    assert_eq!(kg.node("m.0qk1b03").unwrap().aliases, ["Kingdom of Norway"]);
    assert_eq!(kg.node("m.0qk1a01").unwrap().aliases, ["Lantern Keeper"]);
    if let Some(out) = python_check(&version) {
        assert!(out.contains(" 0 cvt 2 with aliases"), "{out}");
    }
}

/// recall@10 of the supporting paragraphs of each question (question as query) over the
/// pooled paragraphs, for `search`.
fn recall_at_10(questions: &[Value], search: impl Fn(&str) -> Vec<String>) -> f64 {
    let mut total = 0.0;
    for q in questions {
        let gold: std::collections::BTreeSet<&str> = q["supporting_facts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f[0].as_str().unwrap())
            .collect();
        let titles = search(q["question"].as_str().unwrap());
        let found = gold
            .iter()
            .filter(|t| titles.iter().any(|x| x == *t))
            .count();
        total += found as f64 / gold.len() as f64;
    }
    total / questions.len() as f64
}

#[test]
fn bm25_recall_on_hotpotqa_is_within_a_point_of_bm25s() {
    let Some(hotpot) = shared("hotpotqa/hotpot_dev_distractor_v1.head.json") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("index");
    let file = tmp.path().join("hotpot.toml");
    std::fs::write(
        &file,
        format!(
            r#"version = 1
name = "hotpot-bm25"
output = "{out}"
[[inputs]]
name = "hotpot"
format = "hotpotqa"
paths = ["{hotpot}"]
split = "dev"
[[stages]]
kind = "index"
options = {{ root = "{root}" }}
"#,
            out = tmp.path().join("out").display(),
            hotpot = hotpot.display(),
            root = root.display(),
        ),
    )
    .unwrap();
    ok(&["run", file.to_str().unwrap()]);
    let questions: Vec<Value> = serde_json::from_slice(&std::fs::read(&hotpot).unwrap()).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let searcher = rt.block_on(async {
        let root = distillery_exec::kit::retrieval::root_of(
            distillery_exec::store::open_location(root.to_str().unwrap(), false).unwrap(),
        );
        let opened = distillery_index::version::open(&root, None, tmp.path())
            .await
            .unwrap();
        distillery_index::search::Searcher::open(opened).unwrap()
    });
    // One title per passage: a paragraph cited by two questions is one passage.
    let ours = recall_at_10(&questions, |q| {
        searcher
            .bm25(q, 10)
            .unwrap()
            .into_iter()
            .map(|h| h.title)
            .collect()
    });
    eprintln!(
        "bm25 recall@10 (tantivy) on {} questions: {:.4}",
        questions.len(),
        ours
    );
    assert!(ours > 0.5, "recall@10 {ours}");
    let v = std::fs::read_to_string(root.join("CURRENT")).unwrap();
    let passages = root
        .join("versions")
        .join(v.trim())
        .join("passages/shard-0000.parquet");
    let Some(out) = crate::python_script(
        "bm25s, pyarrow",
        "bm25s_recall.py",
        &[passages.as_os_str(), hotpot.as_os_str()],
    ) else {
        return;
    };
    let theirs: f64 = out.trim().parse().unwrap();
    eprintln!("bm25 recall@10 (bm25s) on the same passages: {theirs:.4}");
    assert!(
        (ours - theirs).abs() <= 0.01,
        "recall@10 {ours:.4} vs bm25s {theirs:.4}: more than 1 point apart"
    );
}

/// The dense index embedded by a real OpenAI-compatible embeddings server (vLLM serving
/// MiniLM with `--runner pooling` in CI): the same nearest passages as the local model.
#[test]
fn a_dense_index_from_an_embeddings_server() {
    let (Ok(url), Some(model)) = (
        std::env::var("DISTILLERY_VLLM_EMBED_URL"),
        crate::embed_model("the dense index"),
    ) else {
        eprintln!("skipping: DISTILLERY_VLLM_EMBED_URL (a vLLM embeddings server) is not set");
        return;
    };
    let served = std::env::var("DISTILLERY_VLLM_EMBED_MODEL").unwrap_or_else(|_| "minilm".into());
    let tmp = tempfile::tempdir().unwrap();
    let w = tmp.path().join("wiki.xml");
    std::fs::write(&w, wiki(PAGES)).unwrap();
    let (server_root, local_root) = (tmp.path().join("server"), tmp.path().join("local"));
    let ps = pipeline(
        tmp.path(),
        "server",
        &w,
        &server_root,
        r#"["dense"]"#,
        &format!(r#", embedding = {{ model = "{served}", server = "{url}", batch = 3 }}"#),
    );
    let pl = pipeline(
        tmp.path(),
        "local",
        &w,
        &local_root,
        r#"["dense"]"#,
        &format!(r#", embedding = {{ model = "{model}" }}"#),
    );
    ok(&["run", ps.to_str().unwrap()]);
    ok(&["run", pl.to_str().unwrap()]);
    let st = stage(&summary(&tmp.path().join("out-server")), "index").clone();
    assert_eq!(counter(&st, "embeddings.computed"), 8, "{st}");
    for q in [
        "fish market",
        "a river that feeds a lake",
        "regional capital",
    ] {
        let ids = |r: &Path| -> Vec<Value> {
            search(r, q, "dense", &[])
                .into_iter()
                .map(|h| h["id"].clone())
                .collect()
        };
        assert_eq!(ids(&server_root), ids(&local_root), "`{q}`");
    }
    // A rerun asks the server nothing: the embedding cache has every passage.
    std::fs::remove_dir_all(server_root.join("versions")).unwrap();
    std::fs::remove_file(server_root.join("CURRENT")).unwrap();
    ok(&["run", ps.to_str().unwrap()]);
    let st = stage(&summary(&tmp.path().join("out-server")), "index").clone();
    assert_eq!(counter(&st, "embeddings.computed"), 0, "{st}");
    assert_eq!(counter(&st, "embeddings.cached"), 8, "{st}");
}

/// `same_as` merges the shared FB15k-237 sample (path-form mids, `/m/06q1r`) with the shared
/// Wikidata sample through P646: keys are written in Freebase's dotted form, and Scotland and
/// Belgium hold the edges of both graphs.
#[test]
fn same_as_merges_fb15k_and_wikidata_in_dotted_keys() {
    let (Some(fb), Some(wd)) = (
        shared("fb15k237/test.tsv"),
        shared("wikidata/entities.first35.json"),
    ) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("index");
    let file = tmp.path().join("kg.toml");
    std::fs::write(
        &file,
        format!(
            r#"version = 1
name = "kg-merge"
output = "{out}"
[[inputs]]
name = "fb"
format = "fb15k"
paths = ["{fb}"]
[[inputs]]
name = "wd"
format = "wikidata"
paths = ["{wd}"]
[[stages]]
kind = "index"
options = {{ kinds = ["kg"], root = "{root}", same_as = ["P646"] }}
"#,
            out = tmp.path().join("out").display(),
            fb = fb.display(),
            wd = wd.display(),
            root = root.display(),
        ),
    )
    .unwrap();
    ok(&["run", file.to_str().unwrap()]);
    let v = std::fs::read_to_string(root.join("CURRENT")).unwrap();
    let kg = distillery_index::kg::KgIndex::open(&root.join("versions").join(v.trim()).join("kg"))
        .unwrap();
    // `/m/06q1r` is left only as the text of Q22's P646 value, a literal node.
    assert_eq!(kg.node("/m/06q1r").unwrap().kind, "literal");
    assert!(kg.node("Q22").is_none());
    for mid in ["m.06q1r", "m.0154j"] {
        let mut sources: Vec<String> = kg
            .out_edges(mid)
            .unwrap()
            .into_iter()
            .chain(kg.in_edges(mid).unwrap())
            .map(|h| h.source)
            .collect();
        sources.sort();
        sources.dedup();
        assert_eq!(sources, ["fb15k", "wikidata"], "{mid}");
    }
}
