//! Tests of the qa readers: every real shared sample (counts, offset invariants, links between
//! questions and their contexts), the bundled quick-start file, and each kind of bad input.
//!
//! CWQ and SimpleQuestions are tested on small fixture files in the exact Think-on-Graph forms
//! written into a temp dir; the rest of Hydra's benchmark set (WebQuestions, QALD-10,
//! AdvHotpotQA, Zero-Shot RE) on the shared samples, and WebQSP, which has none (its files are
//! not available here), on fixtures in its ToG/Hydra and original forms.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::Path;

use distillery_core::spec::{Format, FormatOptions, HybridQaOptions, MetaQaOptions};
use distillery_core::{VecSink, char_slice};
use serde_json::Value;

use distillery_ingest::InputCtx;
use distillery_ingest::qa::URI_ID_HEX;

use crate::common::{bundled, read, read_with, shared};

/// Checks the offset invariants of every document and every table, and that every id a
/// question refers to is a record of the same read; returns nothing, panics with details.
fn check(s: &VecSink) {
    let mut doc_ids = HashSet::new();
    let mut doc_uris = HashSet::new();
    for d in s.documents() {
        assert!(
            doc_ids.insert(d.id.clone()),
            "document {} written twice",
            d.id
        );
        assert_eq!(d.paragraphs.len(), 1, "{}", d.title);
        for p in &d.paragraphs {
            assert_eq!(p.start, 0);
            assert_eq!(p.end as usize, d.text.chars().count());
            assert!(char_slice(&d.text, p.start, p.end).is_some());
        }
        let mut last = 0;
        for sent in &d.sentences {
            assert!(
                char_slice(&d.text, sent.start, sent.end).is_some(),
                "{}: sentence {:?} out of range",
                d.title,
                sent
            );
            assert!(sent.start >= last, "{}: sentences out of order", d.title);
            assert_eq!(sent.paragraph, 0);
            last = sent.end;
        }
        assert_eq!(
            d.uri,
            format!("{}:{}#{}", d.dataset, d.title, &d.id[..URI_ID_HEX])
        );
        assert!(
            doc_uris.insert(d.uri.clone()),
            "two documents at one uri {}",
            d.uri
        );
    }
    let mut table_ids = HashSet::new();
    for t in s.tables() {
        assert!(
            table_ids.insert(t.id.clone()),
            "table {} written twice",
            t.id
        );
        for r in &t.rows {
            assert_eq!(r.len(), t.header.len(), "{}: ragged row", t.uri);
        }
    }
    let mut qids = HashSet::new();
    for q in s.questions() {
        assert!(
            qids.insert(q.id.clone()),
            "question {} twice",
            q.question_id
        );
        assert!(!q.question.is_empty());
        assert!(serde_json::from_str::<Value>(&q.meta).unwrap().is_object());
        for id in &q.context_documents {
            assert!(
                doc_ids.contains(id),
                "{}: dangling document {id}",
                q.question_id
            );
        }
        for id in &q.context_tables {
            assert!(
                table_ids.contains(id),
                "{}: dangling table {id}",
                q.question_id
            );
        }
        for e in &q.evidence {
            if let Some(id) = &e.record_id {
                assert!(
                    doc_ids.contains(id) || table_ids.contains(id),
                    "{}: evidence on unknown record",
                    q.question_id
                );
            }
        }
    }
}

/// Counts: (questions, documents, tables, evidence, quarantined).
fn counts(s: &VecSink) -> (usize, usize, usize, usize, usize) {
    (
        s.questions().len(),
        s.documents().len(),
        s.tables().len(),
        s.questions().iter().map(|q| q.evidence.len()).sum(),
        s.quarantine().len(),
    )
}

fn reasons(s: &VecSink) -> Vec<String> {
    s.quarantine().iter().map(|q| q.reason.clone()).collect()
}

/// Checks that every document of a HotpotQA-form read has exactly the dataset's sentences.
fn check_given_sentences(s: &VecSink, path: &Path) {
    let data: Vec<Value> = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let docs: HashMap<&str, _> = s
        .documents()
        .into_iter()
        .map(|d| (d.id.as_str(), d))
        .collect();
    for (rec, q) in data.iter().zip(s.questions()) {
        let ctx = rec["context"].as_array().unwrap();
        assert_eq!(ctx.len(), q.context_documents.len());
        for (c, id) in ctx.iter().zip(&q.context_documents) {
            let d = docs[id.as_str()];
            assert_eq!(d.title, c[0].as_str().unwrap());
            let sents = c[1].as_array().unwrap();
            assert_eq!(d.sentences.len(), sents.len());
            for (sp, given) in d.sentences.iter().zip(sents) {
                assert_eq!(
                    char_slice(&d.text, sp.start, sp.end),
                    Some(given.as_str().unwrap())
                );
            }
        }
    }
}

#[test]
fn hotpotqa_shared_sample() {
    let Some(p) = shared("hotpotqa/hotpot_dev_distractor_v1.head.json") else {
        return;
    };
    let s = read(Format::HotpotQa, &p);
    check(&s);
    // 53 questions x 10 paragraphs = 530 contexts, 521 distinct; 235 evidence = 129
    // supporting facts + 2 distinct supporting titles per question.
    assert_eq!(counts(&s), (53, 521, 0, 235, 0));
    check_given_sentences(&s, &p);
    let q = s.questions();
    assert_eq!(q[0].question_id, "5a8b57f25542995d1e6f1371");
    assert_eq!(q[0].answers, vec!["yes"]);
    assert_eq!(q[0].split, "dev");
    assert_eq!(q[0].level.as_deref(), Some("hard"));
    assert_eq!(q[0].question_type.as_deref(), Some("comparison"));
    assert_eq!(q[0].answerable, Some(true));
    assert_eq!(q[0].evidence[0].kind, "sentence");
    assert_eq!(q[0].evidence[0].title.as_deref(), Some("Scott Derrickson"));
    assert!(
        q[0].evidence[0]
            .text
            .as_deref()
            .unwrap()
            .starts_with("Scott Derrickson (born July 16, 1966)")
    );
    let sentence_ev: usize = q
        .iter()
        .map(|q| q.evidence.iter().filter(|e| e.kind == "sentence").count())
        .sum();
    assert_eq!(sentence_ev, 235 - 106, "two supporting titles per question");
    assert!(
        q.iter()
            .all(|q| q.evidence.iter().all(|e| e.record_id.is_some()))
    );
}

#[test]
fn bundled_quickstart_hotpot() {
    let p = bundled("quickstart/hotpot.json");
    let s = read(Format::HotpotQa, &p);
    check(&s);
    assert_eq!(counts(&s), (6, 10, 0, 24, 0));
    check_given_sentences(&s, &p);
    for q in s.questions() {
        assert!(matches!(
            q.question_type.as_deref(),
            Some("bridge" | "comparison")
        ));
        assert!(q.level.is_some());
        assert!((3..=4).contains(&q.context_documents.len()));
        // Every supporting sentence is in range and carries its text.
        for e in q.evidence.iter().filter(|e| e.kind == "sentence") {
            assert!(e.text.is_some(), "{}: {:?}", q.question_id, e);
        }
    }
}

#[test]
fn musique_shared_sample() {
    let Some(p) = shared("musique/musique_ans_v1.0_train.first70.jsonl") else {
        return;
    };
    let s = read(Format::Musique, &p);
    check(&s);
    assert_eq!(counts(&s), (70, 1323, 0, 164, 0));
    let q = s.questions();
    let steps: usize = q.iter().map(|q| q.decomposition.len()).sum();
    assert_eq!(steps, 164);
    let mut types: HashMap<String, usize> = HashMap::new();
    for x in &q {
        *types.entry(x.question_type.clone().unwrap()).or_default() += 1;
    }
    let expected: HashMap<String, usize> =
        [("2hop", 49), ("3hop1", 16), ("4hop1", 3), ("3hop2", 2)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
    assert_eq!(types, expected);
    assert!(
        q.iter()
            .all(|q| q.answerable == Some(true) && q.context_documents.len() == 20)
    );
    assert_eq!(q[0].question_id, "2hop__150763_14904");
    assert_eq!(q[0].split, "train");
    // Each step is supported by a supporting paragraph of its question.
    for x in &q {
        for st in &x.decomposition {
            assert_eq!(st.support.len(), 1);
            let i = st.support[0] as usize;
            assert!(x.evidence.iter().any(|e| e.index == Some(i as i32)));
        }
    }
    let aliases: usize = q.iter().map(|q| q.answers.len() - 1).sum();
    assert!(aliases > 0);
}

#[test]
fn twowiki_shared_sample() {
    let Some(p) = shared("2wikimultihopqa/hipporag_2wikimultihopqa.first5.json") else {
        return;
    };
    let s = read(Format::TwoWiki, &p);
    check(&s);
    // 12 supporting facts, 12 distinct supporting titles, 12 triples.
    assert_eq!(counts(&s), (5, 50, 0, 36, 0));
    let q = s.questions();
    assert_eq!(q[0].question_type.as_deref(), Some("compositional"));
    assert_eq!(q[0].answers, vec!["20 March 851"]);
    let triples: Vec<_> = q[0]
        .evidence
        .iter()
        .filter(|e| e.kind == "triple")
        .collect();
    assert_eq!(
        triples[0].text.as_deref(),
        Some("Lothair II|mother|Ermengarde of Tours")
    );
    let meta: Value = serde_json::from_str(&q[0].meta).unwrap();
    assert_eq!(meta["entity_ids"], "Q298945_Q235653");
    assert_eq!(meta["evidences_id"][0][0], "Q298945");
    // Sentences are stripped in 2Wiki: joined with one space, spans still exact.
    let data: Vec<Value> = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
    let docs: HashMap<&str, _> = s
        .documents()
        .into_iter()
        .map(|d| (d.id.as_str(), d))
        .collect();
    for (rec, q) in data.iter().zip(&q) {
        for (c, id) in rec["context"]
            .as_array()
            .unwrap()
            .iter()
            .zip(&q.context_documents)
        {
            let d = docs[id.as_str()];
            for (sp, given) in d.sentences.iter().zip(c[1].as_array().unwrap()) {
                assert_eq!(char_slice(&d.text, sp.start, sp.end), given.as_str());
            }
        }
    }
    let t = docs.values().find(|d| d.title == "Teutberga").unwrap();
    assert!(t.text.contains("Lothair II. She was"));
}

#[test]
fn hybridqa_shared_sample() {
    let Some(p) = shared("hybridqa/dev.json") else {
        return;
    };
    let s = read(Format::HybridQa, &p);
    check(&s);
    // Only the first dev question's table is in the sample (shared by 2 questions): the other
    // 3,464 questions are written with an empty context and a missing_context record each.
    assert_eq!(counts(&s), (3466, 8, 1, 0, 3464));
    assert!(reasons(&s).iter().all(|r| r == "missing_context"));
    let t = s.tables()[0];
    assert_eq!(
        t.uri,
        "hybridqa:List_of_National_Football_League_rushing_yards_leaders_0"
    );
    assert_eq!(t.header.len(), 6);
    assert_eq!(t.rows.len(), 20);
    assert_eq!(t.rows[0][1], "Emmitt Smith");
    assert_eq!(
        t.section.as_deref(),
        Some("Players with at least 10,000 rushing yards")
    );
    // 143 links in the cells, to 89 distinct pages.
    assert_eq!(t.links.len(), 143);
    let distinct: HashSet<&str> = t.links.iter().map(|l| l.target.as_str()).collect();
    assert_eq!(distinct.len(), 89);
    assert!(
        t.links
            .iter()
            .any(|l| l.row == 0 && l.col == 1 && l.target == "Emmitt Smith")
    );
    let q = s.questions();
    assert_eq!(q[0].question_id, "00153f694413a536");
    assert_eq!(q[0].answers, vec!["Jerry"]);
    assert_eq!(q[0].context_tables, vec![t.id.clone()]);
    assert_eq!(q[0].context_documents.len(), 8);
    let with_table: Vec<_> = q.iter().filter(|q| !q.context_tables.is_empty()).collect();
    assert_eq!(with_table.len(), 2);
    let titles: Vec<&str> = s
        .documents()
        .iter()
        .map(|d| d.title.as_str())
        .collect::<Vec<_>>();
    assert!(titles.contains(&"Emmitt Smith") && titles.contains(&"1990 NFL season"));
    let meta: Value = serde_json::from_str(&q[1].meta).unwrap();
    assert_eq!(meta["table_id"], "Sweden_at_the_1932_Summer_Olympics_0");
    assert!(meta["question_postag"].is_string());
    let bad = s.quarantine();
    assert!(
        bad[0]
            .detail
            .contains("Sweden_at_the_1932_Summer_Olympics_0")
    );
    assert_eq!(bad[0].record, Some(1));
}

#[test]
fn tatqa_shared_sample() {
    let Some(p) = shared("tatqa/tatqa_dataset_dev.first200.json") else {
        return;
    };
    let s = read(Format::TatQa, &p);
    check(&s);
    // 645 paragraph evidence (rel_paragraphs) + 520 cells equal to a span answer.
    assert_eq!(counts(&s), (1200, 984, 200, 1165, 0));
    let q = s.questions();
    let answers: usize = q.iter().map(|q| q.answers.len()).sum();
    assert_eq!(answers, 1419);
    // Header rows (a caption, the years) are merged into one header.
    let t = s.tables()[0];
    assert_eq!(
        t.header,
        vec![
            "",
            "Years Ended September 30, 2019",
            "Years Ended September 30, 2018",
            "Years Ended September 30, 2017"
        ]
    );
    assert_eq!(
        t.rows[0],
        vec!["Fixed Price", "$  1,452.4", "$  1,146.2", "$  1,036.9"]
    );
    let tables = s.tables();
    assert_eq!(
        tables[1].header,
        vec![
            "",
            "Fiscal 2019 (in millions)",
            "Fiscal 2018 (in millions)",
            "Fiscal 2017 (in millions)"
        ]
    );
    // Column names under a caption-only first row.
    let caption = tables
        .iter()
        .find(|t| t.header[0] == "($ in millions) At December 31:")
        .unwrap();
    assert_eq!(caption.header[1..], ["2019", "2018"]);
    // A section row stays in the body.
    let section = tables
        .iter()
        .find(|t| t.header[0] == "(in millions, except per share amounts)")
        .unwrap();
    assert_eq!(
        section.header[1],
        "As of and for the Year Ended May 31, 2019"
    );
    assert_eq!(q[1].answers, vec!["$1,496.5"]);
    assert!(
        q[1].evidence
            .iter()
            .any(|e| e.kind == "table_cell" && e.row == Some(2) && e.col == Some(1))
    );
    let arith = q
        .iter()
        .find(|q| q.question_id == "5103aed0-b4e8-4fae-bf78-e2c9f4ba84cf");
    let arith = arith.unwrap();
    assert_eq!(arith.answers, vec!["2.1"]);
    assert_eq!(arith.question_type.as_deref(), Some("arithmetic"));
    let meta: Value = serde_json::from_str(&arith.meta).unwrap();
    assert_eq!(meta["scale"], "percent");
    assert_eq!(meta["derivation"], "4.00 - 1.90 ");
    assert_eq!(meta["answer_from"], "table");
    assert_eq!(meta["req_comparison"], false);
    assert!(q.iter().all(|q| q.context_tables.len() == 1));
}

#[test]
fn metaqa_shared_samples() {
    for (rel, n, answers, hop) in [
        ("metaqa/1-hop/test.txt", 9947, 19346, "1-hop"),
        ("metaqa/2-hop/test.txt", 14872, 92323, "2-hop"),
    ] {
        let Some(p) = shared(rel) else {
            return;
        };
        let s = read(Format::MetaQa, &p);
        check(&s);
        assert_eq!(counts(&s), (n, 0, 0, 0, 0), "{rel}");
        let q = s.questions();
        assert_eq!(q.iter().map(|q| q.answers.len()).sum::<usize>(), answers);
        assert!(
            q.iter()
                .all(|q| q.topic_entities.len() == 1 && q.question_type.is_some())
        );
        assert!(
            q.iter()
                .all(|q| q.level.as_deref() == Some(hop) && q.split == "test")
        );
        assert_eq!(q[0].question_id, format!("{hop}/test.txt:1"));
    }
    let Some(p) = shared("metaqa/1-hop/test.txt") else {
        return;
    };
    let q = read(Format::MetaQa, &p);
    let q0 = q.questions()[0];
    assert_eq!(q0.question, "what does [Grégoire Colin] appear in");
    assert_eq!(q0.topic_entities, vec!["Grégoire Colin"]);
    assert_eq!(q0.answers, vec!["Before the Rain"]);
    assert_eq!(q0.question_type.as_deref(), Some("actor_to_movie"));
}

// --- CWQ and SimpleQuestions: fixtures in the Think-on-Graph forms (no real files here). ---

#[test]
fn cwq_tog_fixture() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("cwq.json");
    std::fs::write(
        &p,
        r#"[
 {"ID": "WebQTrn-1_abc", "question": "What movies did the actor who played Forrest star in?",
  "webqsp_ID": "WebQTrn-1", "webqsp_question": "what movies did tom hanks star in",
  "machine_question": "what movies did the actor that played the character forrest star in",
  "sparql": "PREFIX ns: <http://rdf.freebase.com/ns/> SELECT DISTINCT ?x WHERE { ... }",
  "answer": "Cast Away", "topic_entity": {"m.0bxtg": "Tom Hanks", "m.02xh1": "Forrest Gump"},
  "compositionality_type": "composition"},
 {"ID": "WebQTrn-2_def", "webqsp_ID": "WebQTrn-2", "answer": "x", "topic_entity": {}},
 {"ID": "WebQTrn-3_ghi", "question": "Which is largest?", "answer": "Ohio",
  "topic_entity": {"m.01": "A"}, "compositionality_type": "superlative"}
]"#,
    )
    .unwrap();
    let s = read(Format::Cwq, &p);
    check(&s);
    assert_eq!(counts(&s), (2, 0, 0, 0, 1));
    assert_eq!(reasons(&s), vec!["missing_field"]);
    assert_eq!(s.quarantine()[0].record, Some(1));
    let q = s.questions();
    assert_eq!(q[0].question_id, "WebQTrn-1_abc");
    assert_eq!(q[0].answers, vec!["Cast Away"]);
    assert_eq!(q[0].topic_entities, vec!["m.0bxtg", "m.02xh1"]);
    assert_eq!(q[0].question_type.as_deref(), Some("composition"));
    assert_eq!(q[0].split, "unknown");
    let meta: Value = serde_json::from_str(&q[0].meta).unwrap();
    assert_eq!(meta["topic_entity_names"]["m.0bxtg"], "Tom Hanks");
    assert_eq!(meta["webqsp_ID"], "WebQTrn-1");
    assert!(meta["sparql"].as_str().unwrap().starts_with("PREFIX"));
    assert_eq!(q[1].question_type.as_deref(), Some("superlative"));
}

#[test]
fn simpleqa_tog_fixture() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("SimpleQA.json");
    std::fs::write(
        &p,
        r#"[
 {"question": "where was the film the lantern keeper released", "answer": "Norway",
  "topic_entity": {"m.0qk1a01": "The Lantern Keeper"}},
 {"question_id": "sq-7", "question": "who directed paper comets", "answer": "Ines Calloway",
  "topic_entity": {"m.0qk1a03": "Paper Comets"}},
 {"answer": "nobody", "topic_entity": {}},
 {"question": "bad topic", "answer": "x", "topic_entity": 5}
]"#,
    )
    .unwrap();
    let s = read(Format::SimpleQa, &p);
    check(&s);
    assert_eq!(counts(&s), (2, 0, 0, 0, 2));
    assert_eq!(reasons(&s), vec!["missing_field", "bad_value"]);
    let q = s.questions();
    assert_eq!(
        q[0].question_id, "0",
        "the element index when the record has no id"
    );
    assert_eq!(q[1].question_id, "sq-7");
    assert_eq!(q[0].topic_entities, vec!["m.0qk1a01"]);
    assert_eq!(q[1].answers, vec!["Ines Calloway"]);
    let meta: Value = serde_json::from_str(&q[1].meta).unwrap();
    assert_eq!(meta["topic_entity_names"]["m.0qk1a03"], "Paper Comets");
}

// --- The rest of Hydra's benchmark set: shared samples, and WebQSP fixtures. ---

/// The meta object of a question.
fn meta_of(q: &distillery_core::Question) -> Value {
    serde_json::from_str(&q.meta).unwrap()
}

#[test]
fn webquestions_shared_sample() {
    let Some(p) = shared("kgqa/WebQuestions.first30.json") else {
        return;
    };
    let s = read(Format::WebQuestions, &p);
    check(&s);
    assert_eq!(counts(&s), (30, 0, 0, 0, 0));
    let q = s.questions();
    assert_eq!(q[0].question_id, "0");
    assert_eq!(q[29].question_id, "29");
    assert_eq!(q[0].dataset, "webquestions");
    assert_eq!(q[0].question, "what does jamaican people speak?");
    assert_eq!(
        q[0].answers,
        vec!["Jamaican Creole English Language", "Jamaican English"]
    );
    assert_eq!(q[0].answerable, Some(true));
    assert_eq!(q[0].topic_entities, vec!["m.03_r3", "Q766"]);
    let meta = meta_of(q[0]);
    assert_eq!(meta["url"], "http://www.freebase.com/view/en/jamaica");
    assert_eq!(meta["topic_entity_names"]["m.03_r3"], "Jamaica");
    assert_eq!(meta["qid_topic_entity_names"]["Q766"], "Jamaica");
    assert!(meta.get("QID").is_none() && meta.get("topic_entity").is_none());
    let answers: usize = q.iter().map(|q| q.answers.len()).sum();
    assert_eq!(answers, 66);
    assert!(q.iter().all(|q| q.topic_entities.len() == 2));
}

#[test]
fn qald_shared_sample() {
    let Some(p) = shared("kgqa/qald_10-en.first30.json") else {
        return;
    };
    let s = read(Format::Qald, &p);
    check(&s);
    assert_eq!(counts(&s), (30, 0, 0, 0, 0));
    let q = s.questions();
    assert_eq!(q[0].question_id, "0");
    assert_eq!(
        q[0].question,
        "After whom is the Riemannian geometry named?"
    );
    assert_eq!(q[0].answers, vec!["Bernhard Riemann"]);
    assert_eq!(q[0].topic_entities, vec!["m.01br2f", "Q761383"]);
    let meta = meta_of(q[0]);
    assert_eq!(meta["answer_qids"], serde_json::json!(["Q42299"]));
    assert!(
        meta["sparql"]
            .as_str()
            .unwrap()
            .ends_with("SELECT DISTINCT ?result WHERE { wd:Q761383 wdt:P138 ?result. }")
    );
    assert_eq!(
        meta["topic_entity_names"]["m.01br2f"],
        "Riemannian geometry"
    );
    assert_eq!(
        meta["qid_topic_entity_names"]["Q761383"],
        "Riemannian geometry"
    );
    // Four answers, in order.
    let siemens = q
        .iter()
        .find(|q| q.question.starts_with("On which stock exchanges"))
        .unwrap();
    assert_eq!(
        siemens.answers,
        vec![
            "New York Stock Exchange",
            "Frankfurt Stock Exchange",
            "SIX Swiss Exchange",
            "XETRA"
        ]
    );
    // A count: a literal keyed by itself, no QID; no Freebase mid, the QID alone.
    let count = q
        .iter()
        .find(|q| q.question == "How many ancient civilizations are there?")
        .unwrap();
    assert_eq!(count.answers, vec!["26"]);
    assert_eq!(meta_of(count)["answer_qids"], serde_json::json!([]));
    assert_eq!(count.topic_entities, vec!["Q28171280"]);
}

#[test]
fn hotpotadv_shared_sample() {
    let Some(p) = shared("kgqa/hotpotadv.first30.json") else {
        return;
    };
    let s = read(Format::HotpotAdv, &p);
    check(&s);
    // 30 questions x 4 paragraphs, all distinct; 67 rationale sentences + 60 supporting
    // paragraphs.
    assert_eq!(counts(&s), (30, 120, 0, 127, 0));
    let q = s.questions();
    let docs = s.documents();
    let q0 = q[0];
    assert_eq!(q0.question_id, "5ab52a255542996a3a96a048");
    assert_eq!(q0.dataset, "hotpotadv");
    assert!(
        q0.question
            .starts_with("Where were the Olympics held when the 1993")
    );
    assert_eq!(q0.answers, vec!["Sochi, Russia"]);
    assert_eq!(q0.answerable, Some(true));
    assert_eq!(
        q0.topic_entities,
        vec![
            "m.05nd_", "m.01hczr", "m.086px", "Q5389", "Q285389", "Q82414"
        ]
    );
    // Four documents in the record's order; the two "added" ones are distinct.
    let titles: Vec<&str> = q0
        .context_documents
        .iter()
        .map(|id| docs.iter().find(|d| &d.id == id).unwrap().title.as_str())
        .collect();
    assert_eq!(
        titles,
        vec![
            "added",
            "Ukraine at the 2014 Winter Olympics",
            "added",
            "Oksana Baiul"
        ]
    );
    assert_ne!(q0.context_documents[0], q0.context_documents[2]);
    assert_eq!(
        q0.context_documents,
        docs[..4].iter().map(|d| d.id.clone()).collect::<Vec<_>>()
    );
    assert!(
        docs[0]
            .text
            .starts_with("Ukraine competed at the 2010 Winter Olympics")
    );
    assert_eq!(docs[1].sentences.len(), 2);
    // Evidence: the four rationale sentences, then the two supporting paragraphs.
    let kinds: Vec<&str> = q0.evidence.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(
        kinds,
        vec![
            "sentence",
            "sentence",
            "sentence",
            "sentence",
            "paragraph",
            "paragraph"
        ]
    );
    let e = &q0.evidence[1];
    assert_eq!(
        e.title.as_deref(),
        Some("Ukraine at the 2014 Winter Olympics")
    );
    assert_eq!(
        e.text.as_deref(),
        Some("The women's relay victory gave Ukraine its second Winter Games gold medal ever.")
    );
    assert_eq!(e.record_id.as_deref(), Some(docs[1].id.as_str()));
    assert_eq!(e.index, Some(1));
    assert_eq!(
        q0.evidence[2].record_id.as_deref(),
        Some(docs[3].id.as_str())
    );
    assert_eq!(q0.evidence[2].index, Some(0));
    assert_eq!(q0.evidence[4].index, Some(1));
    assert_eq!(
        q0.evidence[4].record_id.as_deref(),
        Some(docs[1].id.as_str())
    );
    assert_eq!(q0.evidence[5].index, Some(3));
    assert_eq!(q0.evidence[5].title.as_deref(), Some("Oksana Baiul"));
    let meta = meta_of(q0);
    assert_eq!(meta["rationale"].as_array().unwrap().len(), 4);
    assert_eq!(
        meta["qid_topic_entity_names"]["Q82414"],
        "Winter Olympic Games"
    );
    assert_eq!(
        meta["topic_entity_names"]["m.086px"],
        "Winter Olympic Games"
    );
    // Every rationale sentence is found in a paragraph of its title, and nearly all are one of
    // its sentences or inside one (not where the segmentation cuts one, as at "Inc. (), d.b.a.").
    let mut unsplit = Vec::new();
    for x in &q {
        assert_eq!(x.context_documents.len(), 4);
        for e in x.evidence.iter().filter(|e| e.kind == "sentence") {
            assert!(e.record_id.is_some(), "{}: {e:?}", x.question_id);
            if e.index.is_none() {
                unsplit.push(e.text.clone().unwrap());
            }
        }
        assert_eq!(
            x.evidence.iter().filter(|e| e.kind == "paragraph").count(),
            2
        );
    }
    assert_eq!(unsplit.len(), 2, "{unsplit:#?}");
    // A record with no topic entity of either kind.
    assert!(q.iter().any(|q| q.topic_entities.is_empty()));
}

#[test]
fn zeroshot_re_shared_sample() {
    let Some(p) = shared("kgqa/Zero_Shot_RE.first30.json") else {
        return;
    };
    let s = read(Format::ZeroShotRe, &p);
    check(&s);
    assert_eq!(counts(&s), (30, 0, 0, 0, 0));
    let q = s.questions();
    assert_eq!(q[0].question_id, "0");
    assert_eq!(q[0].dataset, "zeroshot-re");
    assert_eq!(
        q[0].question,
        "Over which river does Jennings Randolph Bridge cross?"
    );
    assert_eq!(
        q[0].answers,
        vec!["Ohio River"],
        "the alias repeats the answer"
    );
    assert_eq!(q[0].topic_entities, vec!["m.05c4fxd", "Q6179056"]);
    let meta = meta_of(q[0]);
    assert_eq!(meta["input"], "Jennings Randolph Bridge [SEP] crosses");
    assert_eq!(meta["relation"], "crosses");
    assert_eq!(meta["answer_numbers"], 2);
    assert_eq!(
        meta["other_template_questions"],
        serde_json::json!([
            "What river does Jennings Randolph Bridge cross?",
            "Over what river does Jennings Randolph Bridge cross?"
        ])
    );
    assert_eq!(
        meta["qid_topic_entity_names"]["Q6179056"],
        "Jennings Randolph Bridge"
    );
    // Aliases after the answer.
    assert_eq!(
        q[5].answers,
        vec!["Bagdasarian Productions", "Universal Animation Studios"]
    );
    // A record with one template question has no other ones.
    assert!(
        q.iter()
            .any(|q| meta_of(q).get("other_template_questions").is_none())
    );
}

/// A WebQSP question in the ToG/Hydra form (the original record plus `topic_entity`).
const WEBQSP_Q0: &str = r#"{
   "QuestionId": "WebQTest-0",
   "RawQuestion": "what does jamaican people speak?",
   "ProcessedQuestion": "what does jamaican people speak",
   "Parses": [
    {
     "ParseId": "WebQTest-0.P0",
     "AnnotatorId": 0,
     "AnnotatorComment": {"ParseQuality": "Complete", "QuestionQuality": "Good", "Confidence": "Normal", "FreeFormComment": "First-round parse verification"},
     "Sparql": "PREFIX ns: <http://rdf.freebase.com/ns/>\nSELECT DISTINCT ?x\nWHERE {\nFILTER (?x != ns:m.03_r3)\nFILTER (!isLiteral(?x) OR lang(?x) = '' OR langMatches(lang(?x), 'en'))\nns:m.03_r3 ns:location.country.languages_spoken ?x .\n}\n",
     "PotentialTopicEntityMention": "jamaican",
     "TopicEntityName": "Jamaica",
     "TopicEntityMid": "m.03_r3",
     "InferentialChain": ["location.country.languages_spoken"],
     "Constraints": [],
     "Time": null,
     "Order": null,
     "Answers": [
      {"AnswerType": "Entity", "AnswerArgument": "m.01428y", "EntityName": "Jamaican English"},
      {"AnswerType": "Entity", "AnswerArgument": "m.04ygk0", "EntityName": "Jamaican Creole English Language"},
      {"AnswerType": "Entity", "AnswerArgument": "m.01428y", "EntityName": "Jamaican English"}
     ]
    },
    {
     "ParseId": "WebQTest-0.P1",
     "Sparql": "PREFIX ns: <http://rdf.freebase.com/ns/>\nSELECT DISTINCT ?x WHERE { ns:m.03_r3 ns:location.country.official_language ?x . }",
     "TopicEntityName": "Jamaica",
     "TopicEntityMid": "m.03_r3",
     "InferentialChain": ["location.country.official_language"],
     "Answers": [{"AnswerType": "Entity", "AnswerArgument": "m.01428y", "EntityName": "Jamaican English"}]
    }
   ],
   "topic_entity": {"m.03_r3": "Jamaica"}
  }"#;

#[test]
fn webqsp_tog_fixture() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("WebQSP.json");
    std::fs::write(
        &p,
        format!(
            r#"[
 {WEBQSP_Q0},
 {{"QuestionId": "WebQTest-8", "RawQuestion": "when was the last time the eagles won?",
   "ProcessedQuestion": "when was the last time the eagles won",
   "Parses": [{{"ParseId": "WebQTest-8.P0", "TopicEntityMid": "m.0d_3x", "TopicEntityName": "Eagles",
     "Sparql": "SELECT ...", "InferentialChain": null,
     "Answers": [{{"AnswerType": "Value", "AnswerArgument": "1980", "EntityName": null}},
                 {{"AnswerType": "Entity", "AnswerArgument": "g.125_abc", "EntityName": null}}]}}]}},
 {{"QuestionId": "WebQTest-9", "ProcessedQuestion": "no raw question", "Parses": [], "topic_entity": {{}}}},
 {{"QuestionId": "WebQTest-10", "RawQuestion": "no parses?", "topic_entity": {{}}, "QID": {{"Q1": "x"}}}}
]"#
        ),
    )
    .unwrap();
    let s = read(Format::WebQsp, &p);
    check(&s);
    assert_eq!(counts(&s), (3, 0, 0, 0, 1));
    assert_eq!(reasons(&s), vec!["missing_field"]);
    assert_eq!(s.quarantine()[0].record, Some(2));
    let q = s.questions();
    assert_eq!(q[0].dataset, "webqsp");
    assert_eq!(q[0].question_id, "WebQTest-0");
    assert_eq!(q[0].question, "what does jamaican people speak?");
    assert_eq!(
        q[0].answers,
        vec!["Jamaican English", "Jamaican Creole English Language"],
        "the first parse's answers, deduplicated"
    );
    assert_eq!(q[0].answerable, Some(true));
    assert_eq!(q[0].topic_entities, vec!["m.03_r3"]);
    let meta = meta_of(q[0]);
    assert_eq!(
        meta["answer_mids"],
        serde_json::json!(["m.01428y", "m.04ygk0"])
    );
    assert_eq!(meta["topic_entity_names"]["m.03_r3"], "Jamaica");
    assert_eq!(meta["ProcessedQuestion"], "what does jamaican people speak");
    assert_eq!(
        meta["parse_ids"],
        serde_json::json!(["WebQTest-0.P0", "WebQTest-0.P1"])
    );
    assert_eq!(meta["sparql"].as_array().unwrap().len(), 2);
    assert!(
        meta["sparql"][0]
            .as_str()
            .unwrap()
            .contains("ns:location.country.languages_spoken")
    );
    assert_eq!(
        meta["inferential_chains"][1],
        serde_json::json!(["location.country.official_language"])
    );
    assert!(meta.get("Parses").is_none());
    // A literal answer and an unnamed entity: their arguments; the topic entity from the parse.
    assert_eq!(q[1].answers, vec!["1980", "g.125_abc"]);
    let meta = meta_of(q[1]);
    assert_eq!(meta["answer_mids"], serde_json::json!(["g.125_abc"]));
    assert_eq!(q[1].topic_entities, vec!["m.0d_3x"]);
    assert_eq!(meta["topic_entity_names"]["m.0d_3x"], "Eagles");
    // No parses: no answers, the QID alone.
    assert!(q[2].answers.is_empty());
    assert_eq!(q[2].answerable, None);
    assert_eq!(q[2].topic_entities, vec!["Q1"]);
}

#[test]
fn webqsp_original_fixture() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("WebQSP.test.json");
    // The original file: one object; its questions have no `topic_entity`.
    let q0 = WEBQSP_Q0
        .replace("\n   \"topic_entity\": {\"m.03_r3\": \"Jamaica\"}", "")
        .replace("],\n  }", "]\n  }");
    assert!(!q0.contains("topic_entity"));
    std::fs::write(
        &p,
        format!(
            r#"{{
 "Version": "1.0",
 "FreebaseVersion": "2015-08-09",
 "Questions": [
  {q0},
  {{"QuestionId": "WebQTest-1", "Parses": []}},
  {{"RawQuestion": "what is the capital?", "Parses": [{{"Answers": "not a list"}}]}},
  {{"RawQuestion": "no id", "Parses": [{{"TopicEntityMid": "m.1", "TopicEntityName": null, "Answers": []}}]}}
 ]
}}
"#
        ),
    )
    .unwrap();
    let s = read(Format::WebQsp, &p);
    check(&s);
    let options = FormatOptions::default_for(Format::WebQsp);
    let loc = p.to_str().unwrap().to_string();
    let detected = distillery_ingest::qa::detect_format(&InputCtx::local(&loc, &options));
    assert_eq!(detected.unwrap(), Some(Format::WebQsp));
    assert_eq!(counts(&s), (2, 0, 0, 0, 2));
    assert_eq!(reasons(&s), vec!["missing_field", "bad_value"]);
    let ids: HashSet<_> = s.quarantine().iter().map(|q| q.id.clone()).collect();
    assert_eq!(ids.len(), 2, "two bad questions of one object: two records");
    assert!(s.quarantine()[0].excerpt.contains("WebQTest-1"));
    let q = s.questions();
    assert_eq!(q[0].question_id, "WebQTest-0");
    assert_eq!(
        q[0].answers,
        vec!["Jamaican English", "Jamaican Creole English Language"]
    );
    assert_eq!(q[0].topic_entities, vec!["m.03_r3"], "from the parses");
    assert_eq!(meta_of(q[0])["topic_entity_names"]["m.03_r3"], "Jamaica");
    assert_eq!(q[1].question_id, "3", "its index in `Questions`");
    assert_eq!(q[1].topic_entities, vec!["m.1"]);
    assert_eq!(meta_of(q[1])["answer_mids"], serde_json::json!([]));

    // The same object on one line reads the same.
    let pretty = std::fs::read_to_string(&p).unwrap();
    let v: Value = serde_json::from_str(&pretty).unwrap();
    let line = dir.path().join("WebQSP.test.line.json");
    std::fs::write(&line, v.to_string()).unwrap();
    let s1 = read(Format::WebQsp, &line);
    assert_eq!(counts(&s1), (2, 0, 0, 0, 2));
    assert_eq!(reasons(&s1), vec!["missing_field", "bad_value"]);
    let strip = |q: &distillery_core::Question| {
        let mut q = q.clone();
        q.source.clear();
        q.id.clear();
        q
    };
    assert_eq!(strip(s1.questions()[0]), strip(q[0]));
    assert_eq!(strip(s1.questions()[1]), strip(q[1]));

    // Cut short, the object is lost whole: one record for it.
    let cut = dir.path().join("WebQSP.test.cut.json");
    std::fs::write(&cut, &pretty[..pretty.len() / 2]).unwrap();
    let s2 = read(Format::WebQsp, &cut);
    assert_eq!(counts(&s2), (0, 0, 0, 0, 1));
    assert_eq!(reasons(&s2), vec!["truncated_input"]);
    let r = &s2.quarantine()[0];
    assert_eq!(
        (r.byte_offset, r.line, r.record),
        (Some(0), Some(1), Some(0))
    );
    assert!(r.excerpt.starts_with("{\n \"Version\""));
}

#[test]
fn hydra_sets_merge_mids_and_qids() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("WebQuestions.json");
    std::fs::write(
        &p,
        r#"[
 {"id": 7, "url": "u", "question": "q?", "answers": "one", "topic_entity": {"m.1": "A", "m.2": "B"},
  "QID": {"Q1": "A"}, "qid_topic_entity": {"Q2": "B", "Q1": "A again"}},
 {"url": "u", "question": "q2?", "answers": [], "topic_entity": null},
 {"url": "u", "question": "q3?", "answers": ["a"], "QID": ["Q5"]},
 {"url": "u", "question": "q4?", "answers": ["a"], "QID": 5}
]"#,
    )
    .unwrap();
    let s = read(Format::WebQuestions, &p);
    check(&s);
    assert_eq!(counts(&s), (3, 0, 0, 0, 1));
    assert_eq!(reasons(&s), vec!["bad_value"]);
    assert!(s.quarantine()[0].detail.contains("`QID`"));
    let q = s.questions();
    assert_eq!(q[0].question_id, "7");
    assert_eq!(q[0].answers, vec!["one"]);
    assert_eq!(q[0].topic_entities, vec!["m.1", "m.2", "Q1", "Q2"]);
    let meta = meta_of(q[0]);
    assert_eq!(
        meta["qid_topic_entity_names"],
        serde_json::json!({"Q1": "A", "Q2": "B"})
    );
    assert_eq!(q[1].question_id, "1");
    assert!(q[1].topic_entities.is_empty() && q[1].answers.is_empty());
    assert_eq!(q[1].answerable, None);
    assert_eq!(meta_of(q[1]), serde_json::json!({"url": "u"}));
    assert_eq!(q[2].topic_entities, vec!["Q5"]);
}

// --- HybridQA joins, on a small WikiTables-WithLinks tree built here. ---

#[test]
fn hybridqa_tables_passages_and_answer_nodes() {
    let dir = tempfile::tempdir().unwrap();
    let wt = dir.path().join("tables");
    std::fs::create_dir_all(wt.join("tables_tok")).unwrap();
    std::fs::create_dir_all(wt.join("request_tok")).unwrap();
    std::fs::write(
        wt.join("tables_tok/Films_1.json"),
        r#"{"url": "https://en.wikipedia.org/wiki/Films", "title": "Films",
            "header": [["Film", []], ["Director", ["/wiki/Directing"]]],
            "data": [[["The Lantern Keeper", ["/wiki/The_Lantern_Keeper"]], ["Ines Calloway", ["/wiki/Ines_Calloway"]]],
                     [["Paper Comets", ["/wiki/Paper_Comets"]], ["Ines Calloway", ["/wiki/Ines_Calloway"]]],
                     [["Short row", []]]],
            "section_title": "Works", "section_text": "", "uid": "Films_1"}"#,
    )
    .unwrap();
    std::fs::write(
        wt.join("request_tok/Films_1.json"),
        r#"{"/wiki/Ines_Calloway": "Ines Calloway is a Norwegian director. She was born in 1972.",
            "/wiki/Paper_Comets": "Paper Comets is a 2018 comedy film.",
            "/wiki/Unlinked": "Not linked from the table."}"#,
    )
    .unwrap();
    // A table whose passages are missing, and one whose table file is broken.
    std::fs::write(
        wt.join("tables_tok/Lonely_0.json"),
        r#"{"title": "L", "header": [["A", []]], "data": [[["x", []]]]}"#,
    )
    .unwrap();
    std::fs::write(
        wt.join("tables_tok/Broken_0.json"),
        r#"{"title": "B", "header": "#,
    )
    .unwrap();
    let p = dir.path().join("train.json");
    std::fs::write(
        &p,
        r#"[
 {"question_id": "q1", "question": "Where is the director of Paper Comets from?", "table_id": "Films_1",
  "answer-text": "Norway", "answer-node": [["Norwegian", [1, 1], "/wiki/Ines_Calloway", "passage"]],
  "question_postag": "WRB VBZ", "where": "passage"},
 {"question_id": "q2", "question": "Which film?", "table_id": "Films_1", "answer-text": "Paper Comets",
  "answer-node": [["Paper Comets", [1, 0], "/wiki/Paper_Comets", "table"]]},
 {"question_id": "q3", "question": "Lonely?", "table_id": "Lonely_0", "answer-text": "x"},
 {"question_id": "q4", "question": "Broken?", "table_id": "Broken_0", "answer-text": "y"},
 {"question_id": "q5", "question": "Bad node?", "table_id": "Films_1", "answer-text": "z",
  "answer-node": [["z", "not a cell", null, "table"]]}
]"#,
    )
    .unwrap();
    let opts = FormatOptions::HybridQa(HybridQaOptions {
        tables_dir: Some(wt.to_str().unwrap().to_string()),
        ..Default::default()
    });
    let s = read_with(Format::HybridQa, opts, &p);
    check(&s);
    assert_eq!(counts(&s), (4, 2, 2, 2, 4));
    assert_eq!(
        reasons(&s),
        vec![
            "missing_context",
            "bad_json",
            "missing_context",
            "bad_value"
        ]
    );
    let t = s.tables()[0];
    assert_eq!(t.header, vec!["Film", "Director"]);
    assert_eq!(
        t.rows[2],
        vec!["Short row", ""],
        "padded to the header width"
    );
    assert_eq!(t.table_index, 1);
    assert_eq!(t.caption, None);
    assert_eq!(t.links[0].row, -1);
    assert_eq!(t.links[0].target, "Directing");
    let q = s.questions();
    let docs = s.documents();
    // Passages in table order: Ines Calloway (row 0) before Paper Comets (row 1).
    assert_eq!(docs[0].title, "Ines Calloway");
    assert_eq!(docs[0].sentences.len(), 2);
    assert_eq!(
        q[0].context_documents,
        vec![docs[0].id.clone(), docs[1].id.clone()]
    );
    assert_eq!(q[0].context_documents, q[1].context_documents);
    let e = &q[0].evidence[0];
    assert_eq!(e.kind, "document");
    assert_eq!(e.record_id.as_deref(), Some(docs[0].id.as_str()));
    assert_eq!((e.row, e.col), (Some(1), Some(1)));
    let e = &q[1].evidence[0];
    assert_eq!(e.kind, "table_cell");
    assert_eq!(e.record_id.as_deref(), Some(t.id.as_str()));
    let meta: Value = serde_json::from_str(&q[0].meta).unwrap();
    assert_eq!(meta["where"], "passage");
    assert_eq!(meta["answer-node"][0][0], "Norwegian");
    assert_eq!(
        q[2].context_tables.len(),
        1,
        "Lonely has its table but no passages"
    );
    assert!(q[2].context_documents.is_empty());
    assert!(q[3].context_tables.is_empty());
    let broken = &s.quarantine()[1];
    assert!(broken.source.ends_with("Broken_0.json"));
}

/// A HybridQA table file is held whole to be parsed: one over `max_record_bytes` is
/// quarantined as too large, not read further, and its question kept without the table.
#[test]
fn hybridqa_side_files_over_the_record_limit_are_quarantined() {
    let dir = tempfile::tempdir().unwrap();
    let wt = dir.path().join("tables");
    std::fs::create_dir_all(wt.join("tables_tok")).unwrap();
    std::fs::create_dir_all(wt.join("request_tok")).unwrap();
    let table = |uid: &str, text: &str| {
        format!(
            r#"{{"title": "{uid}", "header": [["A", []]], "data": [[["x", []]]],
                "section_text": "{text}", "uid": "{uid}"}}"#
        )
    };
    std::fs::write(wt.join("tables_tok/Small_0.json"), table("Small_0", "")).unwrap();
    let padding = "y".repeat(5000);
    std::fs::write(wt.join("tables_tok/Huge_0.json"), table("Huge_0", &padding)).unwrap();
    for t in ["Small_0", "Huge_0"] {
        std::fs::write(wt.join(format!("request_tok/{t}.json")), "{}").unwrap();
    }
    let p = dir.path().join("dev.json");
    std::fs::write(
        &p,
        r#"[{"question_id": "q1", "question": "Small?", "table_id": "Small_0", "answer-text": "x"},
            {"question_id": "q2", "question": "Huge?", "table_id": "Huge_0", "answer-text": "x"}]"#,
    )
    .unwrap();
    let opts = FormatOptions::HybridQa(HybridQaOptions {
        tables_dir: Some(wt.to_str().unwrap().to_string()),
        max_record_bytes: 1000,
    });
    let s = read_with(Format::HybridQa, opts, &p);
    check(&s);
    let q = s.questions();
    assert_eq!(q.len(), 2);
    assert_eq!(q[0].context_tables.len(), 1);
    assert!(q[1].context_tables.is_empty());
    let big: Vec<_> = s
        .quarantine()
        .into_iter()
        .filter(|r| r.reason == "record_too_large")
        .collect();
    assert_eq!(big.len(), 1, "{:?}", s.quarantine());
    assert!(big[0].source.ends_with("Huge_0.json"), "{}", big[0].source);
    assert!(
        big[0].detail.contains("max_record_bytes"),
        "{}",
        big[0].detail
    );
    assert!(big[0].excerpt.len() <= 512);
}

// --- Bad input, for every JSON reader. ---

/// One good record, one missing `question`, one with a wrong type, per JSON format.
fn fixtures(format: Format) -> (&'static str, &'static str, &'static str) {
    match format {
        Format::HotpotQa => (
            r#"{"_id":"g","answer":"a","question":"Q?","supporting_facts":[["T",0]],"context":[["T",["S."]]],"type":"bridge","level":"easy"}"#,
            r#"{"_id":"m","answer":"a","supporting_facts":[],"context":[]}"#,
            r#"{"_id":"w","answer":"a","question":"Q?","supporting_facts":[["T","zero"]],"context":[]}"#,
        ),
        Format::TwoWiki => (
            r#"{"_id":"g","type":"comparison","question":"Q?","context":[["T",["S."]]],"supporting_facts":[["T",0]],"evidences":[["T","r","o"]],"answer":"a"}"#,
            r#"{"_id":"m","type":"comparison","context":[],"answer":"a"}"#,
            r#"{"_id":"w","question":"Q?","context":[["T","not a list"]],"answer":"a"}"#,
        ),
        Format::Musique => (
            r#"{"id":"2hop__g","paragraphs":[{"idx":0,"title":"T","paragraph_text":"S.","is_supporting":true}],"question":"Q?","question_decomposition":[],"answer":"a","answer_aliases":[],"answerable":true}"#,
            r#"{"id":"2hop__m","paragraphs":[],"answer":"a"}"#,
            r#"{"id":"2hop__w","paragraphs":[],"question":"Q?","answer":"a","answerable":"yes"}"#,
        ),
        Format::TatQa => (
            r#"{"table":{"uid":"tg","table":[["h"],["1"]]},"paragraphs":[{"uid":"pg","order":1,"text":"S."}],"questions":[{"uid":"g","question":"Q?","answer":"1","answer_type":"span","answer_from":"table","rel_paragraphs":[]}]}"#,
            r#"{"table":{"uid":"tm","table":[]},"paragraphs":[]}"#,
            r#"{"table":{"uid":"tw","table":[[{"cell":1}]]},"paragraphs":[],"questions":[]}"#,
        ),
        Format::HybridQa => (
            r#"{"question_id":"g","question":"Q?","table_id":"T_0","answer-text":"a"}"#,
            r#"{"question_id":"m","table_id":"T_0","answer-text":"a"}"#,
            r#"{"question_id":"w","question":"Q?","table_id":7,"answer-text":"a"}"#,
        ),
        Format::Cwq => (
            r#"{"ID":"g","question":"Q?","answer":"a","topic_entity":{"m.1":"A"},"compositionality_type":"conjunction"}"#,
            r#"{"ID":"m","answer":"a","topic_entity":{}}"#,
            r#"{"ID":"w","question":"Q?","answer":{"x":1},"topic_entity":{}}"#,
        ),
        Format::SimpleQa => (
            r#"{"question":"Q?","answer":"a","topic_entity":{"m.1":"A"}}"#,
            r#"{"answer":"a","topic_entity":{"m.1":"A"}}"#,
            r#"{"question":["Q?"],"answer":"a","topic_entity":{}}"#,
        ),
        Format::WebQuestions => (
            r#"{"id":"g","url":"u","question":"Q?","answers":["a"],"topic_entity":{"m.1":"A"},"QID":{"Q1":"A"}}"#,
            r#"{"url":"u","answers":["a"],"topic_entity":{"m.1":"A"}}"#,
            r#"{"url":"u","question":"Q?","answers":[{"a":1}],"topic_entity":{}}"#,
        ),
        Format::WebQsp => (
            r#"{"QuestionId":"g","RawQuestion":"Q?","Parses":[{"TopicEntityMid":"m.1","Answers":[{"AnswerType":"Entity","AnswerArgument":"m.2","EntityName":"a"}]}],"topic_entity":{"m.1":"A"}}"#,
            r#"{"QuestionId":"m","ProcessedQuestion":"q","Parses":[]}"#,
            r#"{"QuestionId":"w","RawQuestion":"Q?","Parses":"none"}"#,
        ),
        Format::Qald => (
            r#"{"id":"g","question":"Q?","answer":{"Q2":"a"},"sparql":"SELECT","QID":{"Q1":"A"},"topic_entity":{"m.1":"A"}}"#,
            r#"{"answer":{"Q2":"a"},"sparql":"SELECT","QID":{},"topic_entity":{}}"#,
            r#"{"question":"Q?","answer":{"Q2":["a"]},"sparql":"SELECT","QID":{},"topic_entity":{}}"#,
        ),
        Format::HotpotAdv => (
            r#"{"qas_id":"g","question":"Q?","paragraphs":[{"title":"T","context":"S.","is_supp":true}],"answer":"a","rationale":[{"title":"T","sentence":"S."}],"QID":{},"topic_entity":{}}"#,
            r#"{"qas_id":"m","paragraphs":[],"answer":"a","rationale":[]}"#,
            r#"{"qas_id":"w","question":"Q?","paragraphs":[{"title":"T","context":["S."]}],"answer":"a"}"#,
        ),
        Format::ZeroShotRe => (
            r#"{"id":"g","input":"E [SEP] r","template_questions":["Q?"],"answer":"a","relation":"r","alias":["a"],"QID":{"Q1":"E"},"topic_entity":{"m.1":"E"}}"#,
            r#"{"input":"E [SEP] r","template_questions":[],"answer":"a","relation":"r","alias":[]}"#,
            r#"{"input":"E [SEP] r","template_questions":"Q?","answer":"a","relation":"r","alias":[]}"#,
        ),
        other => panic!("no fixtures for {other:?}"),
    }
}

const JSON_FORMATS: [Format; 12] = [
    Format::HotpotQa,
    Format::TwoWiki,
    Format::Musique,
    Format::TatQa,
    Format::HybridQa,
    Format::Cwq,
    Format::SimpleQa,
    Format::WebQuestions,
    Format::WebQsp,
    Format::Qald,
    Format::HotpotAdv,
    Format::ZeroShotRe,
];

/// Elements: good, syntax error, good, missing field, wrong type, invalid UTF-8, good, then
/// the input ends inside an element. Every good element is written; each bad one is one
/// quarantine record with its location; the cut is `truncated_input`.
#[test]
fn every_json_reader_quarantines_bad_elements_and_keeps_good_ones() {
    for format in JSON_FORMATS {
        let (good, missing, wrong) = fixtures(format);
        let good_n = |n: usize| {
            good.replace("\"g\"", &format!("\"g{n}\""))
                .replace("__g", &format!("__g{n}"))
        };
        let jsonl = format == Format::Musique;
        let elements: Vec<Vec<u8>> = vec![
            good_n(1).into_bytes(),
            br#"{"question": "broken" "no colon"}"#.to_vec(),
            good_n(2).into_bytes(),
            missing.as_bytes().to_vec(),
            wrong.as_bytes().to_vec(),
            {
                let mut v = good_n(9).into_bytes();
                let i = v.windows(2).position(|w| w == b"Q?").unwrap();
                v[i] = 0xff;
                v
            },
            good_n(3).into_bytes(),
        ];
        let mut bytes = Vec::new();
        if !jsonl {
            bytes.extend_from_slice(b"[\n");
        }
        for e in &elements {
            bytes.extend_from_slice(e);
            bytes.extend_from_slice(if jsonl { b"\n" } else { b",\n" });
        }
        bytes.extend_from_slice(br#"{"question": "cut here", "context": [["#);
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("corrupt_dev.json");
        std::fs::write(&p, &bytes).unwrap();
        let s = read(format, &p);
        check(&s);
        let n_good = s.questions().len();
        assert_eq!(n_good, 3, "{format:?}: {:?}", s.quarantine());
        let expect = [
            "bad_json",
            "missing_field",
            "bad_value",
            "invalid_utf8",
            "truncated_input",
        ];
        let mut got = reasons(&s);
        // HybridQA also reports the three good questions' missing tables.
        got.retain(|r| r != "missing_context");
        assert_eq!(got, expect, "{format:?}");
        let bad: Vec<_> = s
            .quarantine()
            .into_iter()
            .filter(|q| q.reason != "missing_context")
            .collect();
        for (q, idx) in bad.iter().zip([1u64, 3, 4, 5]) {
            assert_eq!(q.record, Some(idx), "{format:?} {}", q.reason);
            assert_eq!(q.line, Some(idx + if jsonl { 1 } else { 2 }), "{format:?}");
            let off = q.byte_offset.unwrap() as usize;
            assert_eq!(
                &bytes[off..off + 1],
                b"{",
                "{format:?} {}: offset points at the element",
                q.reason
            );
            assert!(!q.excerpt.is_empty());
            assert_eq!(q.dataset, format.name());
            assert!(q.source.ends_with("corrupt_dev.json"));
        }
        let cut = bad.last().unwrap();
        let cut_at = bytes.windows(8).rposition(|w| w == b"{\"questi").unwrap();
        assert_eq!(cut.byte_offset.unwrap() as usize, cut_at, "{format:?}");
        let ids: HashSet<_> = s.quarantine().iter().map(|q| q.id.clone()).collect();
        assert_eq!(
            ids.len(),
            s.quarantine().len(),
            "{format:?}: quarantine ids unique"
        );
    }
}

/// A gzip stream cut in the middle: everything decoded before the cut is kept and the cut is
/// one `truncated_input` record; nothing panics.
#[test]
fn truncated_gzip_input_keeps_what_was_read() {
    let dir = tempfile::tempdir().unwrap();
    let mut plain = String::from("[");
    for i in 0..400 {
        if i > 0 {
            plain.push(',');
        }
        plain.push_str(&format!(
            r#"{{"_id":"id{i}","answer":"a{i}","question":"Question number {i}?","supporting_facts":[],"context":[["T{i}",["Sentence {i}."," Another {i}."]]],"type":"bridge","level":"easy"}}"#
        ));
    }
    plain.push(']');
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(plain.as_bytes()).unwrap();
    let gz = enc.finish().unwrap();
    let p = dir.path().join("hotpot_dev.json.gz");
    std::fs::write(&p, &gz[..gz.len() / 2]).unwrap();
    let s = read(Format::HotpotQa, &p);
    check(&s);
    let n = s.questions().len();
    assert!(n > 0 && n < 400, "{n}");
    assert_eq!(reasons(&s), vec!["truncated_input"]);
    // The questions kept are the first n, in order.
    for (i, q) in s.questions().iter().enumerate() {
        assert_eq!(q.question_id, format!("id{i}"));
    }
    // The whole file reads fully.
    let full = dir.path().join("hotpot_dev_full.json.gz");
    std::fs::write(&full, &gz).unwrap();
    assert_eq!(counts(&read(Format::HotpotQa, &full)), (400, 400, 0, 0, 0));

    // The same for a line-oriented reader.
    let mut lines = String::new();
    for i in 0..3000 {
        lines.push_str(&format!(
            "what is [Entity {i}] about\tAnswer {i}|Other {i}\n"
        ));
    }
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(lines.as_bytes()).unwrap();
    let gz = enc.finish().unwrap();
    let hop = dir.path().join("3-hop");
    std::fs::create_dir_all(&hop).unwrap();
    let p = hop.join("qa_train.txt.gz");
    std::fs::write(&p, &gz[..gz.len() / 2]).unwrap();
    let s = read(Format::MetaQa, &p);
    let n = s.questions().len();
    assert!(n > 0 && n < 3000, "{n}");
    assert_eq!(reasons(&s), vec!["truncated_input"]);
    assert_eq!(s.questions()[0].question_id, "3-hop/qa_train.txt.gz:1");
    assert_eq!(s.questions()[0].level.as_deref(), Some("3-hop"));
}

#[test]
fn musique_broken_line_costs_that_line_only() {
    let dir = tempfile::tempdir().unwrap();
    let (good, _, _) = fixtures(Format::Musique);
    let body = format!(
        "{}\n{{\"id\": \"2hop__x\", \"question\": \"open string\n{}\n",
        good.replace("__g", "__a"),
        good.replace("__g", "__b")
    );
    let p = dir.path().join("musique_ans_v1.0_dev.jsonl");
    std::fs::write(&p, body).unwrap();
    let s = read(Format::Musique, &p);
    assert_eq!(counts(&s).0, 2);
    assert_eq!(reasons(&s), vec!["bad_json"]);
    assert_eq!(s.quarantine()[0].line, Some(2));
}

#[test]
fn metaqa_qtype_option_and_missing_file() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("qa_dev.txt");
    std::fs::write(&p, "who is [A]\tB\nno tab\nwhat is [C]\tD|E\n").unwrap();
    // No qtype file beside it and no hops in the path: no types, no level, plain ids.
    let s = read(Format::MetaQa, &p);
    assert_eq!(counts(&s), (2, 0, 0, 0, 1));
    assert_eq!(reasons(&s), vec!["bad_line"]);
    let q = s.questions();
    assert_eq!(q[0].question_id, "qa_dev.txt:1");
    assert_eq!(q[1].question_id, "qa_dev.txt:3");
    assert_eq!(q[0].question_type, None);
    assert_eq!(q[0].level, None);
    // The default qtype file beside it, named after the split, and hops from the option.
    std::fs::write(dir.path().join("qa_dev_qtype.txt"), "a_to_b\nx\nc_to_d\n").unwrap();
    let opts = FormatOptions::MetaQa(MetaQaOptions {
        hops: Some(1),
        qtype_file: None,
        ..Default::default()
    });
    let s = read_with(Format::MetaQa, opts, &p);
    let q = s.questions();
    assert_eq!(q[1].question_type.as_deref(), Some("c_to_d"));
    assert_eq!(q[1].question_id, "1-hop/qa_dev.txt:3");
    // A qtype file named in the options that does not exist is an error of the input.
    let opts = FormatOptions::MetaQa(MetaQaOptions {
        hops: None,
        qtype_file: Some(dir.path().join("nope.txt").to_str().unwrap().to_string()),
        ..Default::default()
    });
    let loc = p.to_str().unwrap().to_string();
    let ctx = distillery_ingest::InputCtx::local(&loc, &opts);
    let mut sink = VecSink::default();
    assert!(distillery_ingest::read_input(Format::MetaQa, &ctx, &mut sink).is_err());
}

#[test]
fn same_paragraph_is_one_document_across_questions_and_ids_are_stable() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("hotpot_train.json");
    let rec = |id: &str| {
        format!(
            r#"{{"_id":"{id}","answer":"a","question":"Q {id}?","supporting_facts":[["Shared",0]],"context":[["Shared",["Same text."]],["Own {id}",["Other."]]],"type":"bridge","level":"easy"}}"#
        )
    };
    std::fs::write(&p, format!("[{},{},{}]", rec("a"), rec("b"), rec("c"))).unwrap();
    let s1 = read(Format::HotpotQa, &p);
    let s2 = read(Format::HotpotQa, &p);
    check(&s1);
    assert_eq!(counts(&s1), (3, 4, 0, 6, 0));
    let q = s1.questions();
    assert_eq!(q[0].context_documents[0], q[2].context_documents[0]);
    assert_eq!(q[0].evidence[0].record_id, q[1].evidence[0].record_id);
    let ids = |s: &VecSink| {
        s.records
            .iter()
            .map(|r| r.id().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(&s1), ids(&s2));
    assert_eq!(
        q[0].id,
        distillery_core::id::stable_id(&["hotpotqa", "hotpot_train.json", "a"])
    );
}

#[test]
fn the_shared_samples_tell_their_format() {
    let cases = [
        (
            "hotpotqa/hotpot_dev_distractor_v1.head.json",
            Format::HotpotQa,
        ),
        (
            "musique/musique_ans_v1.0_train.first70.jsonl",
            Format::Musique,
        ),
        (
            "2wikimultihopqa/hipporag_2wikimultihopqa.first5.json",
            Format::TwoWiki,
        ),
        ("hybridqa/dev.json", Format::HybridQa),
        ("tatqa/tatqa_dataset_dev.first200.json", Format::TatQa),
        ("metaqa/1-hop/test.txt", Format::MetaQa),
        ("metaqa/2-hop/test.txt", Format::MetaQa),
        ("kgqa/cwq.first30.json", Format::Cwq),
        ("kgqa/SimpleQA.first30.json", Format::SimpleQa),
        ("kgqa/WebQuestions.first30.json", Format::WebQuestions),
        ("kgqa/qald_10-en.first30.json", Format::Qald),
        ("kgqa/hotpotadv.first30.json", Format::HotpotAdv),
        ("kgqa/Zero_Shot_RE.first30.json", Format::ZeroShotRe),
    ];
    for (rel, want) in cases {
        let Some(p) = shared(rel) else { return };
        let loc = p.to_str().unwrap().to_string();
        let options = FormatOptions::default_for(want);
        let got = distillery_ingest::qa::detect_format(&InputCtx::local(&loc, &options)).unwrap();
        assert_eq!(got, Some(want), "{rel}");
    }
    // The knowledge base and the raw corpora are no QA format.
    for rel in [
        "metaqa/kb.head.txt",
        "freebase/freebase-rdf-latest.head10k.nt",
    ] {
        let Some(p) = shared(rel) else { return };
        let loc = p.to_str().unwrap().to_string();
        let options = FormatOptions::default_for(Format::HotpotQa);
        let got = distillery_ingest::qa::detect_format(&InputCtx::local(&loc, &options)).unwrap();
        assert_eq!(got, None, "{rel}");
    }
}

/// CommonsenseQA and NQ-open in their released layouts (lines written here): the question,
/// the answer (CommonsenseQA's keyed choice), the choices kept; a key naming no choice is
/// quarantined; the formats are told from the first record.
#[test]
fn commonsenseqa_and_nq_open_released_layouts() {
    let dir = tempfile::tempdir().unwrap();
    let csqa = concat!(
        r#"{"answerKey": "A", "id": "075e483d21c29a511267ef62bedc0461", "question": {"question_concept": "punishing", "choices": [{"label": "A", "text": "ignore"}, {"label": "B", "text": "enforce"}], "stem": "The sanctions against the school were a punishing blow, and they seemed to what the efforts the school had made to change?"}}"#,
        "\n",
        r#"{"answerKey": "E", "id": "bad", "question": {"choices": [{"label": "A", "text": "x"}], "stem": "Where?"}}"#,
        "\n",
        r#"{"id": "test-1", "question": {"choices": [{"label": "A", "text": "x"}], "stem": "Who?"}}"#,
        "\n",
    );
    let p = dir.path().join("train_rand_split.jsonl");
    std::fs::write(&p, csqa).unwrap();
    let s = read(Format::CommonsenseQa, &p);
    let q = s.questions();
    assert_eq!(q.len(), 2);
    assert_eq!(q[0].question_id, "075e483d21c29a511267ef62bedc0461");
    assert!(
        q[0].question
            .starts_with("The sanctions against the school")
    );
    assert_eq!(q[0].answers, ["ignore"]);
    let meta: Value = serde_json::from_str(&q[0].meta).unwrap();
    assert_eq!(meta["choices"][1]["text"], "enforce");
    assert_eq!(
        (q[1].question_id.as_str(), q[1].answers.len()),
        ("test-1", 0)
    );
    let bad = s.quarantine();
    assert_eq!(bad.len(), 1);
    assert_eq!(bad[0].reason, "bad_value");
    assert!(s.documents().is_empty());

    let nq = concat!(
        r#"{"question": "where is the world's largest ice sheet located today", "answer": ["Antarctica"]}"#,
        "\n",
        r#"{"question": "who sings does he love me with reba", "answer": ["Linda Davis", "Linda Kaye Davis"]}"#,
        "\n",
    );
    let p2 = dir.path().join("NQ-open.dev.jsonl");
    std::fs::write(&p2, nq).unwrap();
    let s = read(Format::NqOpen, &p2);
    let q = s.questions();
    assert_eq!(q.len(), 2);
    assert_eq!((q[1].question_id.as_str(), q[1].answers.len()), ("1", 2));
    assert!(s.quarantine().is_empty());

    for (path, want) in [(&p, Format::CommonsenseQa), (&p2, Format::NqOpen)] {
        let head = std::fs::read(path).unwrap();
        assert_eq!(distillery_ingest::qa::detect_format_of(&head), Some(want));
    }
}
