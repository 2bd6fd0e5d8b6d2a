//! The `subgraph` stage on the shared FB15k-237 sample: 200 topic-entity sets (one to three
//! mids each, written as CWQ questions with Freebase's dotted mids), depths 1 to 3 and a
//! node cap, against a breadth-first search written independently in Python with networkx
//! (`tests/python/check_subgraph.py`): identical node and edge sets per question. Also the
//! answer coverage, `hseq verify` over the subgraphs' segments, and identical bytes for one
//! and three tasks.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::{ok, parquet_files, python_script, run, shared, stage, summary};

/// Hydra's relation filter on FB15k's path-form relations (as the test's own check).
fn hydra_drops(relation: &str) -> bool {
    let r = relation.trim_start_matches('/').replace('/', ".");
    r.starts_with("common.") || r.starts_with("freebase.")
}

/// 200 CWQ-form questions over the mids of `tsv`, and how many have an answer one hop away.
fn questions(tsv: &Path, names: &Path) -> (String, u64) {
    let text = std::fs::read_to_string(tsv).unwrap();
    let name: BTreeMap<String, String> = std::fs::read_to_string(names)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(m, n)| (m.to_string(), n.to_string()))
        .collect();
    let mut first_neighbour: BTreeMap<&str, &str> = BTreeMap::new();
    let mut mids: BTreeSet<&str> = BTreeSet::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let [s, r, o] = f[..] else { continue };
        mids.insert(s);
        mids.insert(o);
        if !hydra_drops(r) {
            first_neighbour.entry(s).or_insert(o);
        }
    }
    let mids: Vec<&str> = mids.into_iter().collect();
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = |n: usize| {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) as usize % n
    };
    let dotted = |m: &str| m.trim_start_matches('/').replacen('/', ".", 1);
    let mut qs = Vec::new();
    let mut answerable = 0;
    for i in 0..200 {
        let mut topics = serde_json::Map::new();
        for _ in 0..1 + i % 3 {
            let m = mids[next(mids.len())];
            let n = name.get(m).cloned().unwrap_or_default();
            topics.insert(dotted(m), n.into());
        }
        if i % 50 == 7 {
            topics.insert("m.0absent_from_the_kg".into(), "Nobody".into());
        }
        let first = topics.keys().next().unwrap().replacen('.', "/", 1);
        let answer = match first_neighbour.get(format!("/{first}").as_str()) {
            Some(o) if name.contains_key(*o) => {
                answerable += 1;
                name[*o].clone()
            }
            _ => "an answer no graph holds".to_string(),
        };
        qs.push(serde_json::json!({
            "ID": format!("sg{i:03}"),
            "question": format!("What is linked to topic set {i}?"),
            "answer": answer,
            "topic_entity": topics,
        }));
    }
    (serde_json::to_string_pretty(&qs).unwrap(), answerable)
}

/// A pipeline with one `subgraph` stage `sg` (a pipeline runs each stage kind once).
fn pipeline(dir: &Path, name: &str, files: [&Path; 3], tasks: u32, options: &str) -> PathBuf {
    let [tsv, names, qs] = files;
    let file = dir.join(format!("{name}.toml"));
    let text = format!(
        r#"version = 1
name = "{name}"
output = "{out}"
[run]
shards = 3
[[inputs]]
name = "fb"
format = "fb15k"
paths = ["{tsv}"]
options = {{ names = ["{names}"] }}
[[inputs]]
name = "cwq"
format = "cwq"
paths = ["{qs}"]
{index}[[stages]]
name = "sg"
kind = "subgraph"
inputs = ["cwq"]
tasks = {tasks}
options = {{ kg = "fb", {options} }}
"#,
        index = if options.contains("index = \"kgi\"") {
            format!(
                "[[stages]]\nname = \"kgi\"\nkind = \"index\"\ninputs = [\"fb\"]\n\
                 options = {{ kinds = [\"kg\"], root = \"{}\" }}\n",
                dir.join(format!("root-{name}")).display()
            )
        } else {
            String::new()
        },
        out = dir.join(format!("out-{name}")).display(),
        tsv = tsv.display(),
        names = names.display(),
        qs = qs.display(),
    );
    std::fs::write(&file, text).unwrap();
    dir.join(format!("out-{name}"))
}

/// The independent BFS (`check_subgraph.py`, networkx) on the 200 questions of `out`.
fn bfs_check(out: &Path, tsv: &Path, qs: &Path, check: &str) {
    let args = [
        out.as_os_str(),
        tsv.as_os_str(),
        qs.as_os_str(),
        check.as_ref(),
    ];
    if let Some(stdout) = python_script("networkx, pyarrow", "check_subgraph.py", &args) {
        assert!(stdout.contains("200/200 questions identical"), "{stdout}");
    }
}

#[test]
fn subgraphs_match_an_independent_bfs_on_fb15k() {
    let (Some(tsv), Some(names)) = (
        shared("fb15k237/test.tsv"),
        shared("fb15k237/entity2text.txt"),
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (json, answerable) = questions(&tsv, &names);
    let qs = dir.path().join("topics.json");
    std::fs::write(&qs, json).unwrap();
    let files = [tsv.as_path(), names.as_path(), qs.as_path()];

    let mut edges = Vec::new();
    let mut missing = None;
    for (name, options, check) in [
        ("hops1", "hops = 1", "sg:1"),
        ("hops2", "hops = 2", "sg:2"),
        ("hops3", "hops = 3", "sg:3"),
        ("cap", "hops = 3, max_nodes = 300", "sg:3:300"),
    ] {
        let out = pipeline(dir.path(), name, files, 3, options);
        ok(&[
            "run",
            dir.path().join(format!("{name}.toml")).to_str().unwrap(),
        ]);
        let s = summary(&out);
        let st = stage(&s, "sg");
        let c = &st["counters"];
        assert_eq!(c["questions"], 200, "{st}");
        // The four absent mids, and the same topic entities found at every depth.
        assert_eq!(
            c["topics.missing"],
            missing.unwrap_or(c["topics.missing"].clone())
        );
        missing = Some(c["topics.missing"].clone());
        assert!(c["topics.missing"].as_u64().unwrap() >= 4, "{st}");
        if name == "cap" {
            // The reduction keeps what is near every topic entity: answers near only one go.
            assert!(c["questions.reduced"].as_u64().unwrap() > 0, "{st}");
            assert!(c["answers.covered"].as_u64().unwrap() < answerable, "{st}");
        } else {
            // Every answer one hop from the first topic entity is in every subgraph.
            assert_eq!(c["answers.covered"].as_u64(), Some(answerable), "{st}");
        }
        edges.push(c["edges"].as_u64().unwrap());

        bfs_check(&out, &tsv, &qs, check);

        // The segments decode back to the subgraphs' edges.
        let v = ok(&["hseq", "verify", out.to_str().unwrap()]);
        let kg = v
            .lines()
            .find(|l| l.trim_start().starts_with("kg"))
            .unwrap();
        assert!(kg.ends_with("failed 0") && !v.contains("mismatch"), "{v}");
        let kg_ok: u64 = kg.split_whitespace().nth(2).unwrap().parse().unwrap();
        assert_eq!(kg_ok, *edges.last().unwrap(), "{v}");
    }
    assert!(
        edges[0] < edges[1] && edges[1] < edges[2] && edges[3] < edges[2],
        "{edges:?}"
    );

    // One task, its 200 questions scanned in four batches of 50, writes the same bytes as
    // three tasks walking theirs at once.
    let one = pipeline(dir.path(), "one", files, 1, "hops = 3, walk_batch = 50");
    ok(&["run", dir.path().join("one.toml").to_str().unwrap()]);
    assert_eq!(stage(&summary(&one), "sg")["counters"]["kg.passes"], 12);
    let three = dir.path().join("out-hops3");
    let a = parquet_files(&three.join("subgraphs"));
    assert_eq!(
        a,
        parquet_files(&one.join("subgraphs")),
        "1 and 3 tasks differ"
    );
    let lines = |o: &Path| std::fs::read(o.join("sg/questions.jsonl")).unwrap();
    assert_eq!(lines(&three), lines(&one));

    // The same walks over a built KG index: the BFS's node and edge sets, the scan's rows and
    // counters, and the same bytes for one task and three.
    let rows = |o: &Path| {
        let sql = "SELECT question_id, subject, relation, object, hop FROM subgraphs";
        let v = crate::sql_json(o, sql);
        let set: BTreeSet<String> = v.iter().map(|r| r.to_string()).collect();
        assert_eq!(set.len(), v.len(), "one row per question and edge");
        set
    };
    for (name, options, check, scan) in [
        ("idx3", r#"hops = 3, index = "kgi""#, "sg:3", "hops3"),
        (
            "idx1",
            r#"hops = 3, index = "kgi", walk_batch = 50"#,
            "sg:3",
            "hops3",
        ),
        (
            "idxcap",
            r#"hops = 3, max_nodes = 300, index = "kgi""#,
            "sg:3:300",
            "cap",
        ),
    ] {
        let tasks = if name == "idx1" { 1 } else { 3 };
        let out = pipeline(dir.path(), name, files, tasks, options);
        ok(&[
            "run",
            dir.path().join(format!("{name}.toml")).to_str().unwrap(),
        ]);
        let scanned = dir.path().join(format!("out-{scan}"));
        assert_eq!(rows(&out), rows(&scanned), "{name}");
        let (s, t) = (summary(&out), summary(&scanned));
        let (c, d) = (&stage(&s, "sg")["counters"], &stage(&t, "sg")["counters"]);
        for k in [
            "edges",
            "nodes",
            "topics.missing",
            "answers.covered",
            "questions.reduced",
        ] {
            assert_eq!(c[k], d[k], "{name}: {k}");
        }
        // Three passes per walk: one walk per task, or per batch of 50 of idx1's 200 questions.
        let walks = if name == "idx1" { 4 } else { tasks };
        assert_eq!(c["kg.passes"], 3 * walks, "{c}");
        bfs_check(&out, &tsv, &qs, check);
        let v = ok(&["hseq", "verify", out.to_str().unwrap()]);
        assert!(!v.contains("mismatch"), "{v}");
    }
    let (a, b) = (dir.path().join("out-idx3"), dir.path().join("out-idx1"));
    let files = |o: &Path| parquet_files(&o.join("subgraphs"));
    assert_eq!(files(&a), files(&b), "1 and 3 tasks differ over the index");
    assert_eq!(lines(&a), lines(&b));
}

/// A MediaWiki export (the dump's XML) with Scotland's page, a redirect from "Universe" and
/// the page it names.
const ENWIKI_PAGES: &str = r#"<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.11/" version="0.11" xml:lang="en">
  <page>
    <title>Scotland</title>
    <ns>0</ns>
    <id>26994</id>
    <revision>
      <id>1</id>
      <timestamp>2026-11-01T00:00:00Z</timestamp>
      <text xml:space="preserve">'''Scotland''' is a country that is part of the United Kingdom.</text>
    </revision>
  </page>
  <page>
    <title>Universe</title>
    <ns>0</ns>
    <id>5</id>
    <redirect title="The universe" />
    <revision>
      <id>2</id>
      <timestamp>2026-11-01T00:00:00Z</timestamp>
      <text xml:space="preserve">#REDIRECT [[The universe]]</text>
    </revision>
  </page>
  <page>
    <title>The universe</title>
    <ns>0</ns>
    <id>31880</id>
    <revision>
      <id>3</id>
      <timestamp>2026-11-01T00:00:00Z</timestamp>
      <text xml:space="preserve">The '''universe''' is all of space and time.</text>
    </revision>
  </page>
</mediawiki>
"#;

/// On the shared Wikidata sample: a question about Scotland (Q22) and one whose topic entity
/// (universe, Q1) also names its Wikipedia page, QIDs as Hydra's sets give them; the subgraph
/// holds the claims around them and the questions file their enwiki titles from the sitelinks,
/// and those pages' ids in a MediaWiki input (one through a redirect).
#[test]
fn wikidata_subgraphs_name_the_topic_entities_wikipedia_pages() {
    let Some(wd) = shared("wikidata/entities.first35.json") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let qs = dir.path().join("q.json");
    let questions = serde_json::json!([
        {"ID": "wd1", "question": "Which country is Scotland part of?", "answer": "United Kingdom",
         "topic_entity": {"Q22": "Scotland"}},
        {"ID": "wd2", "question": "What is the universe?", "answer": "universe",
         "topic_entity": {"Q1": "universe", "Q404": "nowhere"}},
    ]);
    std::fs::write(&qs, questions.to_string()).unwrap();
    let wiki = dir.path().join("enwiki.xml");
    std::fs::write(&wiki, ENWIKI_PAGES).unwrap();
    let out = dir.path().join("out");
    let file = dir.path().join("wd.toml");
    std::fs::write(
        &file,
        format!(
            r#"version = 1
name = "wd"
output = "{out}"
[[inputs]]
name = "wd"
format = "wikidata"
paths = ["{wd}"]
[[inputs]]
name = "q"
format = "cwq"
paths = ["{qs}"]
[[inputs]]
name = "enwiki"
format = "mediawiki"
paths = ["{wiki}"]
[[stages]]
kind = "subgraph"
inputs = ["q"]
options = {{ kg = "wd", hops = 1, wikipedia = "enwiki" }}
"#,
            out = out.display(),
            wd = wd.display(),
            qs = qs.display(),
            wiki = wiki.display(),
        ),
    )
    .unwrap();
    ok(&["run", file.to_str().unwrap()]);
    let lines: Vec<serde_json::Value> =
        std::fs::read_to_string(out.join("subgraph/questions.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
    let by_id = |id: &str| {
        lines
            .iter()
            .find(|l| l["dataset_question_id"] == id)
            .unwrap_or_else(|| panic!("no {id} in {lines:?}"))
    };
    let scotland = by_id("wd1");
    assert_eq!(
        scotland["topic_wikipedia"],
        serde_json::json!({"Q22": "Scotland"})
    );
    assert!(scotland["edges"].as_u64().unwrap() > 10, "{scotland}");
    let universe = by_id("wd2");
    assert_eq!(
        universe["topic_wikipedia"],
        serde_json::json!({"Q1": "Universe"})
    );
    assert_eq!(universe["topics_found"], 1, "{universe}");
    // Page ids from the MediaWiki input: Scotland's own, Universe's through its redirect.
    assert_eq!(
        scotland["topic_wikipedia_ids"],
        serde_json::json!({"Q22": 26994})
    );
    assert_eq!(
        universe["topic_wikipedia_ids"],
        serde_json::json!({"Q1": 31880})
    );
    let s = summary(&out);
    assert_eq!(stage(&s, "subgraph")["counters"]["topics.missing"], 1);
    assert_eq!(stage(&s, "subgraph")["counters"]["topics.wikipedia_ids"], 2);
    let v = ok(&["hseq", "verify", out.to_str().unwrap()]);
    assert!(!v.contains("mismatch"), "{v}");

    // Values are a table apart: only the stage with `literals` walks them, and it takes every
    // value edge of the two topic entities (a value is never a subject, so it is a leaf).
    let out_lit = dir.path().join("out-literals");
    let text = std::fs::read_to_string(&file)
        .unwrap()
        .replace(out.to_str().unwrap(), out_lit.to_str().unwrap())
        .replace("hops = 1,", "hops = 1, literals = true,");
    std::fs::write(&file, text).unwrap();
    ok(&["run", file.to_str().unwrap()]);
    let topic_literals = crate::count(
        &out,
        "SELECT count(*) FROM literals WHERE subject IN ('Q22', 'Q1')",
    );
    assert!(topic_literals > 10, "{topic_literals}");
    assert_eq!(
        crate::count(
            &out,
            "SELECT count(*) FROM triples WHERE object_kind <> 'entity'"
        ),
        0
    );
    assert_eq!(
        crate::count(
            &out,
            "SELECT count(*) FROM subgraphs WHERE object_kind <> 'entity'"
        ),
        0
    );
    assert_eq!(
        crate::count(
            &out_lit,
            "SELECT count(*) FROM subgraphs WHERE object_kind <> 'entity'"
        ),
        topic_literals
    );
    let without = stage(&s, "subgraph")["counters"]["edges"].as_u64().unwrap();
    let with = stage(&summary(&out_lit), "subgraph")["counters"]["edges"]
        .as_u64()
        .unwrap();
    assert_eq!(with, without + topic_literals as u64);
}

/// MetaQA 1-hop and 2-hop questions of the shared sample whose topic entity is a node of the
/// shared KB head, as a MetaQA file pair (questions, aligned question types).
fn metaqa_questions(dir: &Path, hop: usize, nodes: &BTreeSet<&str>, want: usize) -> PathBuf {
    let src = shared(&format!("metaqa/{hop}-hop/test.txt")).unwrap();
    let types = shared(&format!("metaqa/{hop}-hop/qa_test_qtype.txt")).unwrap();
    let (qs, ts) = (
        std::fs::read_to_string(src).unwrap(),
        std::fs::read_to_string(types).unwrap(),
    );
    let (mut q_out, mut t_out) = (String::new(), String::new());
    for (q, t) in qs.lines().zip(ts.lines()) {
        let topic = q.split_once('[').and_then(|(_, r)| r.split_once(']'));
        if topic.is_some_and(|(e, _)| nodes.contains(e)) && q_out.lines().count() < want {
            q_out += &format!("{q}\n");
            t_out += &format!("{t}\n");
        }
    }
    let d = dir.join(format!("{hop}-hop"));
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("qa_test.txt"), q_out).unwrap();
    std::fs::write(d.join("qa_test_qtype.txt"), t_out).unwrap();
    d.join("qa_test.txt")
}

/// MetaQA with the shared KB head: every answer reachable from the topic entity within the
/// question's hops (a breadth-first search here, both edge directions) is a node of its
/// subgraph, coverage reported per hop; a label stage then takes its KB edges from the
/// subgraphs (`kb = "sg"`), its KG positives are rows of the subgraph stage's segments, and
/// its outputs do not depend on how many tasks it runs as.
#[test]
fn metaqa_subgraphs_cover_reachable_answers_and_feed_the_label_stage() {
    let Some(kb) = shared("metaqa/kb.head.txt") else {
        return;
    };
    let text = std::fs::read_to_string(&kb).unwrap();
    let mut adj: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for line in text.lines() {
        let mut f = line.split('|');
        let (Some(s), Some(_), Some(o)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        adj.entry(s).or_default().insert(o);
        adj.entry(o).or_default().insert(s);
    }
    let nodes: BTreeSet<&str> = adj.keys().copied().collect();
    let dir = tempfile::tempdir().unwrap();
    let q1 = metaqa_questions(dir.path(), 1, &nodes, 40);
    let q2 = metaqa_questions(dir.path(), 2, &nodes, 40);
    let reach = |from: &str, hops: usize| -> BTreeSet<String> {
        let Some((&start, _)) = adj.get_key_value(from) else {
            return BTreeSet::new();
        };
        let mut seen: BTreeSet<&str> = BTreeSet::from([start]);
        let mut frontier = vec![start];
        for _ in 0..hops {
            let next: Vec<&str> = frontier
                .iter()
                .flat_map(|n| adj.get(n).into_iter().flatten().copied())
                .filter(|n| seen.insert(n))
                .collect();
            frontier = next;
        }
        seen.into_iter().map(String::from).collect()
    };

    let pipe = |name: &str, label_tasks: u32| {
        let out = dir.path().join(format!("out-{name}"));
        let toml = format!(
            r#"version = 1
name = "{name}"
output = "{out}"
[run]
shards = 2
[[inputs]]
name = "kb"
format = "metaqa-kb"
paths = ["{kb}"]
[[inputs]]
name = "one"
format = "metaqa"
paths = ["{q1}"]
[[inputs]]
name = "two"
format = "metaqa"
paths = ["{q2}"]
[[stages]]
name = "sg"
kind = "subgraph"
inputs = ["one", "two"]
options = {{ kg = "kb", hops = 2 }}
[[stages]]
name = "lab"
kind = "label"
inputs = ["one", "two"]
tasks = {label_tasks}
options = {{ kb = "sg" }}
"#,
            out = out.display(),
            kb = kb.display(),
            q1 = q1.display(),
            q2 = q2.display(),
        );
        let file = dir.path().join(format!("{name}.toml"));
        std::fs::write(&file, toml).unwrap();
        ok(&["run", file.to_str().unwrap()]);
        out
    };
    let out = pipe("metaqa", 2);

    // The HTML report counts the edges of each hop as the table holds them.
    let html = ok(&[
        "report",
        "labels",
        out.to_str().unwrap(),
        "--format",
        "html",
    ]);
    let hops = &html[html
        .find("id=\"subgraph-hops\"")
        .expect("no subgraph section")..];
    for r in crate::sql_json(
        &out,
        "SELECT hop, count(*) AS n FROM subgraphs GROUP BY hop",
    ) {
        let row = format!("<tr><td>{}</td><td data-value=\"{}\">", r["hop"], r["n"]);
        assert!(hops.contains(&row), "{row} not in {hops}");
    }

    // Each question's subgraph nodes, from the subgraphs table.
    let rows = crate::sql_json(
        &out,
        "SELECT q.question_id AS q, s.subject, s.object FROM subgraphs s \
         JOIN questions q ON q.id = s.question_id",
    );
    let mut sub: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for r in &rows {
        let set = sub.entry(r["q"].as_str().unwrap().to_string()).or_default();
        set.insert(r["subject"].as_str().unwrap().to_string());
        set.insert(r["object"].as_str().unwrap().to_string());
    }
    let questions = crate::sql_json(
        &out,
        "SELECT question_id AS q, level, topic_entities AS t, answers AS a FROM questions",
    );
    assert_eq!(questions.len(), 80);
    let mut per_hop: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for q in &questions {
        let hops: usize = q["level"].as_str().unwrap()[..1].parse().unwrap();
        let topic = q["t"][0].as_str().unwrap();
        let reachable = reach(topic, hops);
        let have = sub
            .get(q["q"].as_str().unwrap())
            .cloned()
            .unwrap_or_default();
        let c = per_hop
            .entry(q["level"].as_str().unwrap().into())
            .or_default();
        for a in q["a"].as_array().unwrap() {
            let a = a.as_str().unwrap();
            c.0 += 1;
            if reachable.contains(a) {
                c.1 += 1;
                assert!(
                    have.contains(a),
                    "{}: answer {a} reachable, not in the subgraph",
                    q["q"]
                );
            }
        }
    }
    for (level, (answers, reachable)) in &per_hop {
        println!(
            "metaqa {level}: {reachable} of {answers} answers reachable in the KB head, all in their subgraphs"
        );
        assert!(*reachable > 0, "{level}");
    }
    let s = summary(&out);
    let c = &stage(&s, "sg")["counters"];
    println!(
        "subgraph stage: answers.covered {} of {}",
        c["answers.covered"], c["answers"]
    );

    // The label stage labelled every question from its subgraph; its KG positives are
    // segments the subgraph stage wrote.
    let lab = &stage(&s, "lab")["counters"];
    assert_eq!(lab["questions"], 80, "{lab}");
    for (ids, what) in [
        ("SELECT unnest(selected) AS id FROM labels", "selected"),
        (
            "SELECT unnest(segment_ids) AS id FROM sft",
            "sft segment_ids",
        ),
    ] {
        let all = crate::count(&out, &format!("SELECT count(*) FROM ({ids}) p"));
        assert!(all > 0, "{what}");
        let orphans = crate::count(
            &out,
            &format!("SELECT count(*) FROM ({ids}) p WHERE p.id NOT IN (SELECT id FROM segments)"),
        );
        assert_eq!(
            orphans, 0,
            "{what}: ids that are no segment of the subgraphs"
        );
    }
    // One label task reads the subgraphs of all the questions, two their shards: same rows.
    let one = pipe("metaqa-one", 1);
    for table in ["labels", "sft"] {
        assert_eq!(
            parquet_files(&out.join(table)),
            parquet_files(&one.join(table)),
            "{table}: 1 and 2 label tasks differ"
        );
    }
}

/// Freebase edges around Scotland (m.06q1r, Wikidata's Q22 by P646) and the United Kingdom
/// (m.07ssc, Q145), in the dump's N-Triples form.
const FREEBASE_SCOTLAND: &str = "\
<http://rdf.freebase.com/ns/m.06q1r>\t<http://rdf.freebase.com/ns/type.object.name>\t\"Scotland\"@en\t.
<http://rdf.freebase.com/ns/m.06q1r>\t<http://rdf.freebase.com/ns/location.location.containedby>\t<http://rdf.freebase.com/ns/m.07ssc>\t.
<http://rdf.freebase.com/ns/m.06q1r>\t<http://rdf.freebase.com/ns/type.object.type>\t<http://rdf.freebase.com/ns/location.country>\t.
<http://rdf.freebase.com/ns/m.02m77>\t<http://rdf.freebase.com/ns/type.object.name>\t\"Edinburgh\"@en\t.
<http://rdf.freebase.com/ns/m.02m77>\t<http://rdf.freebase.com/ns/location.location.containedby>\t<http://rdf.freebase.com/ns/m.06q1r>\t.
<http://rdf.freebase.com/ns/m.07ssc>\t<http://rdf.freebase.com/ns/type.object.name>\t\"United Kingdom\"@en\t.
<http://rdf.freebase.com/ns/m.07ssc>\t<http://rdf.freebase.com/ns/location.country.capital>\t<http://rdf.freebase.com/ns/m.04jpl>\t.
<http://rdf.freebase.com/ns/m.0zzzz>\t<http://rdf.freebase.com/ns/location.location.containedby>\t<http://rdf.freebase.com/ns/m.0yyyy>\t.
";

/// Freebase (a fixture) and the shared Wikidata sample walked as one graph through P646: a
/// question about Q22 reaches Freebase's edges of m.06q1r, Wikidata's edges are written under
/// Freebase keys where an entity has one, and each row keeps its source. Checked against a
/// merge and breadth-first search written here over the ingested triples.
#[test]
fn freebase_and_wikidata_merge_through_p646() {
    let Some(wd) = shared("wikidata/entities.first35.json") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let fb = dir.path().join("fb.nt");
    std::fs::write(&fb, FREEBASE_SCOTLAND).unwrap();
    let qs = dir.path().join("q.json");
    let questions = serde_json::json!([
        {"ID": "m1", "question": "Which country is Scotland part of?", "answer": "United Kingdom",
         "topic_entity": {"Q22": "Scotland"}},
    ]);
    std::fs::write(&qs, questions.to_string()).unwrap();
    let out = dir.path().join("out");
    let root = dir.path().join("index");
    let file = dir.path().join("merged.toml");
    std::fs::write(
        &file,
        format!(
            r#"version = 1
name = "merged"
output = "{out}"
[[inputs]]
name = "fb"
format = "freebase"
paths = ["{fb}"]
[[inputs]]
name = "wd"
format = "wikidata"
paths = ["{wd}"]
[[inputs]]
name = "q"
format = "cwq"
paths = ["{qs}"]
[[stages]]
name = "sg"
kind = "subgraph"
inputs = ["q"]
options = {{ kg = "fb", merge = ["wd"], hops = 2 }}
[[stages]]
name = "kgi"
kind = "index"
inputs = ["fb", "wd"]
options = {{ kinds = ["kg"], root = "{root}", same_as = ["P646"] }}
"#,
            root = root.display(),
            out = out.display(),
            fb = fb.display(),
            wd = wd.display(),
            qs = qs.display(),
        ),
    )
    .unwrap();
    ok(&["run", file.to_str().unwrap()]);

    // The merge and the walk, written here.
    let triples = crate::sql_json(
        &out,
        "SELECT subject, predicate, object, object_kind, dataset FROM triples \
         UNION ALL SELECT subject, predicate, object, object_kind, dataset FROM literals",
    );
    let text = |r: &serde_json::Value, k: &str| r[k].as_str().unwrap().to_string();
    let alias: BTreeMap<String, String> = triples
        .iter()
        .filter(|r| r["predicate"] == "P646")
        .map(|r| {
            (
                text(r, "subject"),
                text(r, "object").trim_start_matches('/').replace('/', "."),
            )
        })
        .collect();
    assert_eq!(alias.get("Q22").map(String::as_str), Some("m.06q1r"));
    let key = |k: String| alias.get(&k).cloned().unwrap_or(k);
    let dropped = |p: &str| {
        p == "type.object.type"
            || p == "type.object.name"
            || p.starts_with("common.")
            || p.starts_with("freebase.")
            || p.contains("sameAs")
    };
    let edges: Vec<(String, String, String, String)> = triples
        .iter()
        .filter(|r| r["object_kind"] == "entity" && !dropped(r["predicate"].as_str().unwrap()))
        .map(|r| {
            let (s, o) = (key(text(r, "subject")), key(text(r, "object")));
            (s, text(r, "predicate"), o, text(r, "dataset"))
        })
        .collect();
    let mut near: BTreeSet<String> = BTreeSet::from(["m.06q1r".to_string()]);
    for e in &edges {
        if e.0 == "m.06q1r" {
            near.insert(e.2.clone());
        }
        if e.2 == "m.06q1r" {
            near.insert(e.0.clone());
        }
    }
    let want: BTreeSet<(String, String, String, String)> = edges
        .iter()
        .filter(|e| near.contains(&e.0) || near.contains(&e.2))
        .cloned()
        .collect();

    let rows = crate::sql_json(
        &out,
        "SELECT subject, relation, object, source FROM subgraphs",
    );
    let got: BTreeSet<(String, String, String, String)> = rows
        .iter()
        .map(|r| {
            (
                text(r, "subject"),
                text(r, "relation"),
                text(r, "object"),
                text(r, "source"),
            )
        })
        .collect();
    assert_eq!(got.len(), rows.len(), "one row per edge");
    assert_eq!(got, want);
    // Both graphs meet at Scotland and the United Kingdom.
    let has = |s: &str, r: &str, o: &str, src: &str| {
        got.contains(&(s.into(), r.into(), o.into(), src.into()))
    };
    assert!(has(
        "m.06q1r",
        "location.location.containedby",
        "m.07ssc",
        "freebase"
    ));
    assert!(has(
        "m.02m77",
        "location.location.containedby",
        "m.06q1r",
        "freebase"
    ));
    assert!(has("m.06q1r", "P17", "m.07ssc", "wikidata"), "{got:?}");
    assert!(
        !got.iter()
            .any(|e| e.0 == "Q22" || e.2 == "Q22" || e.0 == "m.0zzzz")
    );
    let s = summary(&out);
    let c = &stage(&s, "sg")["counters"];
    assert_eq!(c["kg.aliases"], alias.len() as u64, "{c}");
    assert_eq!(c["answers.covered"], 1, "{c}");
    let line: serde_json::Value = serde_json::from_str(
        std::fs::read_to_string(out.join("sg/questions.jsonl"))
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(line["topic_entities"], serde_json::json!(["Q22"]));
    assert_eq!(
        line["topic_wikipedia"],
        serde_json::json!({"Q22": "Scotland"})
    );
    let v = ok(&["hseq", "verify", out.to_str().unwrap()]);
    assert!(!v.contains("mismatch"), "{v}");

    // The KG index merges the two graphs the same way: each subject's out-edges are the
    // input edges with aliased keys replaced (values as they are), each with its source.
    assert_eq!(
        stage(&s, "kgi")["counters"]["kg.aliases"],
        alias.len() as u64
    );
    let current = std::fs::read_to_string(root.join("CURRENT")).unwrap();
    let kg =
        distillery_index::kg::KgIndex::open(&root.join("versions").join(current.trim()).join("kg"))
            .unwrap();
    let mut want: BTreeMap<String, BTreeSet<(String, String, String)>> = BTreeMap::new();
    for r in &triples {
        let object = match r["object_kind"] == "entity" {
            true => key(text(r, "object")),
            false => text(r, "object"),
        };
        want.entry(key(text(r, "subject"))).or_default().insert((
            text(r, "predicate"),
            object,
            text(r, "dataset"),
        ));
    }
    assert!(kg.node("Q22").is_none());
    for (subject, edges) in &want {
        let got: BTreeSet<(String, String, String)> = kg
            .out_edges(subject)
            .unwrap()
            .into_iter()
            .map(|h| (h.relation, h.object, h.source))
            .collect();
        assert_eq!(&got, edges, "{subject}");
    }
    let scotland: BTreeSet<String> = want["m.06q1r"].iter().map(|e| e.2.clone()).collect();
    assert_eq!(
        scotland,
        BTreeSet::from(["freebase".into(), "wikidata".into()])
    );
    let node = kg.node("m.06q1r").unwrap();
    assert!(!node.aliases.is_empty(), "{node:?}");

    // The walk over that index, Q22 keyed through `merge` as the index keys it: the same rows.
    let text_of = std::fs::read_to_string(&file).unwrap();
    let (inputs, _) = text_of.split_once("[[stages]]").unwrap();
    let indexed = dir.path().join("indexed.toml");
    let out2 = dir.path().join("out2");
    let text2 = format!(
        r#"{inputs}[[stages]]
name = "kgi"
kind = "index"
inputs = ["fb", "wd"]
options = {{ kinds = ["kg"], root = "{root}", same_as = ["P646"] }}
[[stages]]
name = "sg"
kind = "subgraph"
inputs = ["q"]
options = {{ kg = "fb", merge = ["wd"], hops = 2, index = "kgi" }}
"#,
        root = dir.path().join("index2").display()
    )
    .replace(&out.display().to_string(), &out2.display().to_string());
    std::fs::write(&indexed, text2).unwrap();
    ok(&["run", indexed.to_str().unwrap()]);
    let rows2 = crate::sql_json(
        &out2,
        "SELECT subject, relation, object, source FROM subgraphs",
    );
    let got2: BTreeSet<(String, String, String, String)> = rows2
        .iter()
        .map(|r| {
            let t = |k: &str| text(r, k);
            (t("subject"), t("relation"), t("object"), t("source"))
        })
        .collect();
    assert_eq!(got2, got);
    let line2 = std::fs::read_to_string(out2.join("sg/questions.jsonl")).unwrap();
    let line2: serde_json::Value = serde_json::from_str(line2.lines().next().unwrap()).unwrap();
    assert_eq!(line2["topic_wikipedia"], line["topic_wikipedia"]);
    assert_eq!(line2["answers_covered"], 1);
}

/// A plain Freebase dump read as byte-range tasks is written partitioned by subject: each
/// subject's entity edges (`triples`), values (`literals`) and name (`entities`) lie in one
/// shard, whichever range read them.
#[test]
fn a_freebase_dump_read_in_ranges_is_partitioned_by_subject() {
    let dir = tempfile::tempdir().unwrap();
    let ns = "http://rdf.freebase.com/ns/";
    let mut dump = String::new();
    for i in 0..400 {
        let s = format!("<{ns}m.0s{i}>");
        dump.push_str(&format!(
            "{s}\t<{ns}type.object.name>\t\"Subject {i}\"@en\t.\n\
             {s}\t<{ns}type.object.type>\t<{ns}common.topic>\t.\n\
             {s}\t<{ns}people.person.date_of_birth>\t\"19{:02}\"^^<http://www.w3.org/2001/XMLSchema#gYear>\t.\n\
             {s}\t<{ns}people.person.sibling>\t<{ns}m.0s{}>\t.\n\
             {s}\t<{ns}people.person.friend>\t<{ns}m.0s{}>\t.\n",
            i % 100,
            (i + 1) % 400,
            (i * 7) % 400,
        ));
    }
    let fb = dir.path().join("fb.nt");
    std::fs::write(&fb, &dump).unwrap();
    let out = dir.path().join("out");
    let file = dir.path().join("fb.toml");
    std::fs::write(
        &file,
        format!(
            "version = 1\nname = \"fb\"\noutput = \"{}\"\n[run]\nshards = 4\nsplit_bytes = {}\n\
             [[inputs]]\nname = \"fb\"\nformat = \"freebase\"\npaths = [\"{}\"]\n",
            out.display(),
            dump.len() / 8,
            fb.display()
        ),
    )
    .unwrap();
    ok(&["run", file.to_str().unwrap()]);
    let s = summary(&out);
    let tasks = stage(&s, "ingest/fb")["tasks"].as_array().unwrap().len();
    assert!(tasks >= 8, "{tasks} ingest tasks");
    assert_eq!(crate::count(&out, "SELECT count(*) FROM triples"), 800);
    assert_eq!(crate::count(&out, "SELECT count(*) FROM literals"), 1200);
    assert_eq!(crate::count(&out, "SELECT count(*) FROM entities"), 400);
    crate::python_script("pyarrow", "check_kg_partitions.py", &[out.as_os_str()]);
}

/// The `index` options' checks: an index stage named must come first, `walk_batch` is at
/// least one question, and a stage needs a graph to walk.
#[test]
fn subgraph_index_options_are_checked() {
    let tmp = tempfile::tempdir().unwrap();
    let qs = tmp.path().join("q.json");
    std::fs::write(&qs, "[]").unwrap();
    let check = |options: &str, later: &str| {
        let file = tmp.path().join("p.toml");
        let text = format!(
            "version = 1\noutput = \"{out}\"\n[[inputs]]\nname = \"q\"\nformat = \"cwq\"\n\
             paths = [\"{qs}\"]\n[[stages]]\nname = \"sg\"\nkind = \"subgraph\"\n\
             inputs = [\"q\"]\noptions = {{ {options} }}\n{later}",
            out = tmp.path().join("out").display(),
            qs = qs.display(),
        );
        std::fs::write(&file, text).unwrap();
        let r = run(&["validate", file.to_str().unwrap()]);
        assert!(!r.status.success(), "{options}");
        String::from_utf8_lossy(&r.stderr).to_string()
    };
    let later = "[[stages]]\nname = \"kgi\"\nkind = \"index\"\noptions = { kinds = [\"kg\"] }\n";
    let err = check(r#"index = "kgi""#, later);
    assert!(
        err.contains("stage `kgi` must be listed before this one"),
        "{err}"
    );
    let err = check("hops = 2", "");
    assert!(err.contains("give `kg`"), "{err}");
    let err = check(r#"index_version = "v1", kg = "q""#, "");
    assert!(err.contains("`index_version` needs `index`"), "{err}");
    let err = check(r#"walk_batch = 0, index = "/tmp/kg""#, "");
    assert!(err.contains("`walk_batch` must be at least 1"), "{err}");
}
