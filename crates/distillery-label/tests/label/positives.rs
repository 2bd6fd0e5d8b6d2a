//! Tests of weak positives and the label report.
//!
//! Unit cases on hand-made questions (normalisation, the Jaccard fallback, roots, the
//! candidate cap, indexes of labelled segments, the report's arithmetic and JSON nesting) and
//! [`report_on_shared_samples`], which labels the shared HotpotQA, MuSiQue and 2Wiki samples
//! (and TAT-QA, table and paragraphs, as a smoke test) with both methods, prints the report table (`--nocapture`) and checks that `answer-aware`
//! beats `hseq-paper` on HotpotQA by 10 F1 points at both levels without losing recall.

use std::collections::{HashMap, HashSet};

use distillery_core::spec::Format;
use distillery_core::{
    Document, Evidence, LabelRecord, LabeledSegment, Paragraph, Question, Segment, Sentence, Table,
};
use distillery_hseq::HseqOptions;
use distillery_hseq::{encode_document, encode_table, sort_stream};
use distillery_label::LabelOptions;
use distillery_label::QuestionContext;
use distillery_label::normalize::{answer_variants, jaccard, normalize_answer, tokens};
use distillery_label::positives::{self, Method, Positives, by_name, labeled_segment};
use distillery_label::report::{self, LabelReport, Prf};

use crate::common;

/// A document whose text is the sentences joined by one space, one paragraph covering them.
fn doc(id: &str, title: &str, sentences: &[&str]) -> Document {
    let mut text = String::new();
    let mut spans = Vec::new();
    for s in sentences {
        if !text.is_empty() {
            text.push(' ');
        }
        let a = text.chars().count() as u32;
        text.push_str(s);
        spans.push(Sentence {
            start: a,
            end: text.chars().count() as u32,
            paragraph: 0,
        });
    }
    Document {
        id: id.into(),
        dataset: "test".into(),
        uri: format!("test:{title}"),
        title: title.into(),
        paragraphs: vec![Paragraph {
            start: 0,
            end: text.chars().count() as u32,
            section: -1,
        }],
        sentences: spans,
        text,
        ..Default::default()
    }
}

fn question(text: &str, answers: &[&str]) -> Question {
    Question {
        id: "q1".into(),
        dataset: "test".into(),
        question: text.into(),
        answers: answers.iter().map(|a| a.to_string()).collect(),
        ..Default::default()
    }
}

fn encode_all(docs: &[Document]) -> Vec<Segment> {
    docs.iter()
        .flat_map(|d| encode_document(d, &HseqOptions::default()))
        .collect()
}

fn run(m: &dyn Method, q: &Question, docs: &[Document], sh: &[Segment]) -> Positives {
    let ctx = QuestionContext {
        question: q,
        documents: &common::refs(docs),
        tables: &[],
        triples: &[],
        kg_ids: &[],
    };
    m.label(q, sh, &ctx)
}

/// A table `t1` titled `Revenue` with the given header and rows.
fn revenue_table(header: &[&str], rows: &[&[&str]]) -> Table {
    let strings = |r: &[&str]| r.iter().map(|c| c.to_string()).collect::<Vec<_>>();
    Table {
        id: "t1".into(),
        title: "Revenue".into(),
        header: strings(header),
        rows: rows.iter().map(|r| strings(r)).collect(),
        ..Default::default()
    }
}

/// The context of a question asked about tables alone.
fn table_context<'a>(q: &'a Question, tables: &'a [&'a Table]) -> QuestionContext<'a> {
    QuestionContext {
        question: q,
        documents: &[],
        tables,
        triples: &[],
        kg_ids: &[],
    }
}

fn opts() -> LabelOptions {
    LabelOptions::default()
}

#[test]
fn normalisation_cases() {
    assert_eq!(normalize_answer("The Beatles"), normalize_answer("beatles"));
    assert_eq!(normalize_answer("The Beatles"), "beatles");
    assert_eq!(normalize_answer("1,000"), normalize_answer("1000"));
    assert_eq!(normalize_answer("1,000.50"), "1000.5");
    assert_eq!(normalize_answer("$12"), "12");
    assert_eq!(
        normalize_answer("Greenwich Village, New York City"),
        "greenwich village new york city"
    );
    assert_eq!(tokens("An Apple a day"), vec!["apple", "day"]);

    // Aliases kept, duplicates and yes/no dropped.
    let q = question("?", &["The Beatles", "Beatles", "Fab Four"]);
    assert_eq!(answer_variants(&q), vec!["beatles", "fab four"]);
    assert!(answer_variants(&question("?", &["yes"])).is_empty());
    assert!(answer_variants(&question("?", &["No"])).is_empty());
}

#[test]
fn tatqa_scale_variants() {
    let mut q = question("What was the revenue?", &["$1,496.5"]);
    q.meta = r#"{"scale":"million","answer_type":"span"}"#.into();
    assert_eq!(
        answer_variants(&q),
        vec!["1496.5", "1496.5 million", "1496500000"]
    );
    q.answers = vec!["2.1".into()];
    q.meta = r#"{"scale":"percent"}"#.into();
    assert_eq!(answer_variants(&q), vec!["2.1", "2.1 percent"]);
    q.answers = vec!["0.25".into()];
    q.meta = r#"{"scale":"thousand"}"#.into();
    assert_eq!(answer_variants(&q), vec!["0.25", "0.25 thousand", "250"]);
    // A text answer is not scaled.
    q.answers = vec!["fixed-price type".into()];
    q.meta = r#"{"scale":"million"}"#.into();
    assert_eq!(answer_variants(&q), vec!["fixed price type"]);

    // Matching: the scaled form is found in text that writes the full number.
    let d = doc(
        "d1",
        "Report",
        &["Revenue was $1,496,500,000 in 2019.", "Costs rose."],
    );
    let mut q = question("What was the revenue?", &["1,496.5"]);
    q.meta = r#"{"scale":"million"}"#.into();
    let sh = encode_all(std::slice::from_ref(&d));
    let m = by_name("hseq-paper", &opts()).unwrap();
    let p = run(m.as_ref(), &q, std::slice::from_ref(&d), &sh);
    assert!(!p.low_confidence);
    assert_eq!(p.items[0].reason, "substring");
    assert_eq!(sh[p.items[0].index].level, "paragraph");
}

#[test]
fn jaccard_fallback_sets_low_confidence() {
    let docs = vec![
        doc(
            "d1",
            "Rust",
            &["Rust is a systems programming language.", "It is fast."],
        ),
        doc(
            "d2",
            "Cats",
            &[
                "Cats sleep a lot.",
                "Rust programming language is loved by cats.",
            ],
        ),
    ];
    let sh = encode_all(&docs);
    let q = question("Which programming language is Rust?", &["Ferris"]);
    let o = LabelOptions {
        min_positives: 2,
        ..opts()
    };
    let p = run(by_name("hseq-paper", &o).unwrap().as_ref(), &q, &docs, &sh);
    assert!(p.low_confidence);
    assert_eq!(p.items.len(), 2);
    assert!(p.items.iter().all(|x| x.lexical && x.reason == "lexical"));
    // Highest Jaccard first: "Rust is a systems programming language." shares 3 of 6 words.
    assert_eq!(
        sh[p.items[0].index].content,
        "Rust is a systems programming language."
    );
    let qt = tokens(&q.question);
    let s0 = jaccard(&qt, &tokens(&sh[p.items[0].index].content));
    let s1 = jaccard(&qt, &tokens(&sh[p.items[1].index].content));
    assert!(s0 >= s1 && s1 > 0.0);
    assert_eq!(p.items[0].score, s0);

    // With the answer present, no fallback.
    let q = question(
        "Which programming language is Rust?",
        &["systems programming language"],
    );
    let p = run(
        by_name("hseq-paper", &opts()).unwrap().as_ref(),
        &q,
        &docs,
        &sh,
    );
    assert!(!p.low_confidence);
    assert!(p.items.iter().all(|x| !x.lexical));
    // Containers first: the paragraph, then the sentence.
    let levels: Vec<&str> = p.items.iter().map(|x| sh[x.index].level.as_str()).collect();
    assert_eq!(levels, ["paragraph", "sentence"]);
    assert_eq!(p.items[0].reason, "substring");
}

/// A TAT-QA arithmetic answer is in no segment: `answer-aware` picks the table rows that hold
/// its derivation's operands (not the constant of an average), and is confident about them.
#[test]
fn answer_aware_picks_the_operands_of_an_arithmetic_answer() {
    let table = revenue_table(
        &["item", "2019", "2018"],
        &[
            &["Revenue", "73,260", "57,768"],
            &["Costs", "2", "2"],
            &["Staff", "1,204", "1,180"],
        ],
    );
    let sh = encode_table(&table, &HseqOptions::default());
    let mut q = question("What was the change in revenue?", &["15492"]);
    q.question_type = Some("arithmetic".into());
    q.meta = r#"{"derivation":"(73,260-57,768)/2","scale":"thousand"}"#.into();
    let tables = [&table];
    let ctx = table_context(&q, &tables);
    let p = by_name("answer-aware", &opts())
        .unwrap()
        .label(&q, &sh, &ctx);
    let picked: Vec<(&str, &str)> = p
        .items
        .iter()
        .map(|x| (sh[x.index].content.as_str(), x.reason.as_str()))
        .collect();
    assert_eq!(picked.len(), 1, "{picked:?}");
    assert!(picked[0].0.contains("73,260"), "{picked:?}");
    assert_eq!(picked[0].1, "operand");
    assert!(!p.low_confidence);
    // Without a derivation (any other answer type) the row is only a lexical pick.
    let mut span = q.clone();
    span.question_type = Some("span".into());
    let ctx = QuestionContext {
        question: &span,
        ..ctx
    };
    let p = by_name("answer-aware", &opts())
        .unwrap()
        .label(&span, &sh, &ctx);
    assert!(p.items.iter().all(|x| x.reason != "operand"));
    assert!(p.low_confidence);
}

#[test]
fn a_column_name_is_no_answer_match_in_every_row() {
    // A merged TAT-QA header: the years name the columns of every row.
    let table = revenue_table(
        &["", "Fiscal 2019 (in millions)", "Fiscal 2018 (in millions)"],
        &[
            &["Revenue", "73,260", "57,768"],
            &["Costs", "1,204", "1,180"],
            &["Founded", "2019", ""],
        ],
    );
    let sh = encode_table(&table, &HseqOptions::default());
    assert!(sh[1].content.contains("Fiscal 2019"), "{}", sh[1].content);
    let q = question("In which year was the revenue higher?", &["2019"]);
    let tables = [&table];
    let ctx = table_context(&q, &tables);
    let prep = positives::Prepared::new(&sh);
    assert_eq!(prep.norm(1), "revenue 73260 57768");
    for name in ["hseq-paper", "answer-aware"] {
        let p = by_name(name, &opts()).unwrap().label(&q, &sh, &ctx);
        let matched: Vec<&str> = p
            .items
            .iter()
            .filter(|x| matches!(x.reason.as_str(), "exact" | "substring"))
            .map(|x| sh[x.index].content.as_str())
            .collect();
        // Only the row with `2019` in a cell holds the answer.
        assert_eq!(matched.len(), 1, "{name}: {matched:?}");
        assert!(matched[0].contains("Founded"), "{name}: {matched:?}");
    }
}

#[test]
fn roots_are_never_positives() {
    // The document title is the answer: the root's content matches exactly, yet it is no
    // candidate; the same for a table root.
    let docs = vec![doc(
        "d1",
        "Ed Wood",
        &["He directed films.", "Ed Wood was American."],
    )];
    let table = Table {
        id: "t1".into(),
        title: "Ed Wood".into(),
        header: vec!["name".into(), "born".into()],
        rows: vec![vec!["Ed Wood".into(), "1924".into()]],
        ..Default::default()
    };
    let mut sh = encode_all(&docs);
    sh.extend(encode_table(&table, &HseqOptions::default()));
    let q = question("Who directed films?", &["Ed Wood"]);
    let ctx = QuestionContext {
        question: &q,
        documents: &common::refs(&docs),
        tables: &[&table],
        triples: &[],
        kg_ids: &[],
    };
    for name in ["hseq-paper", "answer-aware"] {
        let m = by_name(name, &opts()).unwrap();
        let p = m.label(&q, &sh, &ctx);
        assert!(!p.items.is_empty(), "{name}");
        for x in &p.items {
            assert!(
                !positives::is_root(&sh[x.index].level),
                "{name} picked a root: {}",
                sh[x.index].level
            );
        }
    }
    // A question whose only match is a root gets the fallback, not the root.
    let docs = vec![doc("d1", "Zyx", &["Nothing here."])];
    let sh = encode_all(&docs);
    let q = question("What is nothing?", &["Zyx"]);
    let p = run(
        by_name("hseq-paper", &opts()).unwrap().as_ref(),
        &q,
        &docs,
        &sh,
    );
    assert!(p.low_confidence);
    assert!(p.items.iter().all(|x| sh[x.index].level != "document"));
}

#[test]
fn candidate_cap() {
    let sents: Vec<String> = (0..30)
        .map(|i| format!("Item {i} mentions Paris."))
        .collect();
    let refs: Vec<&str> = sents.iter().map(String::as_str).collect();
    let docs = vec![doc("d1", "A", &refs[..15]), doc("d2", "B", &refs[15..])];
    let sh = encode_all(&docs);
    let q = question("Where?", &["Paris"]);
    let o = LabelOptions {
        max_segments: Some(5),
        ..opts()
    };
    let p = run(by_name("hseq-paper", &o).unwrap().as_ref(), &q, &docs, &sh);
    assert_eq!(p.candidates, 5);
    assert_eq!(p.items.len(), 5);
    // Both paragraphs first, then the first three sentences of the stream.
    let levels: Vec<&str> = p.items.iter().map(|x| sh[x.index].level.as_str()).collect();
    assert_eq!(
        levels,
        ["paragraph", "paragraph", "sentence", "sentence", "sentence"]
    );
    let texts: Vec<&str> = p.items[2..]
        .iter()
        .map(|x| sh[x.index].content.as_str())
        .collect();
    assert_eq!(texts, refs[..3]);

    // Presets: small and medium 48, large 32.
    for (preset, cap) in [("small", 48), ("medium", 48), ("large", 32)] {
        let o = LabelOptions {
            preset: preset.into(),
            ..opts()
        };
        assert_eq!(positives::max_segments(&o), cap);
        let p = run(by_name("hseq-paper", &o).unwrap().as_ref(), &q, &docs, &sh);
        assert_eq!(p.candidates as usize, cap.min(32), "{preset}");
    }
}

#[test]
fn methods_by_name() {
    for name in ["hseq-paper", "answer-aware"] {
        let m = by_name(name, &opts()).unwrap();
        assert_eq!(m.name(), name);
        assert!(m.params().is_object());
    }
    assert!(by_name("nope", &opts()).is_none());
}

#[test]
fn labeled_segments_carry_indexes() {
    let docs = vec![doc("d1", "A", &["First.", "Second one.", "Third."])];
    let table = Table {
        id: "t1".into(),
        header: vec!["k".into()],
        rows: vec![vec!["x".into()], vec!["y".into()]],
        ..Default::default()
    };
    let mut sh = encode_all(&docs);
    sh.extend(encode_table(&table, &HseqOptions::default()));
    let q = question("?", &[]);
    let ctx = QuestionContext {
        question: &q,
        documents: &common::refs(&docs),
        tables: &[&table],
        triples: &[],
        kg_ids: &[],
    };
    let find = |level: &str, content: &str| {
        sh.iter()
            .position(|s| s.level == level && s.content.contains(content))
            .unwrap()
    };
    let lab = |i: usize| -> LabeledSegment {
        let p = positives::Positive {
            index: i,
            reason: "exact".into(),
            score: 1.0,
            lexical: false,
        };
        labeled_segment(&sh, &p, &ctx)
    };
    let s = lab(find("sentence", "Second"));
    assert_eq!(
        (s.level.as_str(), s.source_id.as_str(), s.index),
        ("sentence", "d1", 1)
    );
    assert_eq!(s.segment_id, sh[find("sentence", "Second")].id);
    assert_eq!(lab(find("sentence", "Third")).index, 2);
    assert_eq!(lab(find("paragraph", "First")).index, 0);
    let r = lab(find("table_row", "\"y\""));
    assert_eq!(
        (r.level.as_str(), r.source_id.as_str(), r.index),
        ("table_row", "t1", 1)
    );
    assert_eq!(lab(find("document", "A")).index, -1);
}

#[test]
fn answer_aware_follows_the_bridge() {
    let docs = vec![
        doc(
            "d1",
            "Kiss and Tell (1945 film)",
            &[
                "Kiss and Tell is a 1945 American comedy film starring Shirley Temple as Corliss Archer.",
                "The film was released by Columbia Pictures.",
            ],
        ),
        doc(
            "d2",
            "Shirley Temple",
            &[
                "Shirley Temple Black was an American actress.",
                "She was a child star in the 1930s.",
                "As an adult, she was named Chief of Protocol of the United States.",
            ],
        ),
        doc(
            "d3",
            "Archer",
            &["An archer shoots arrows.", "Archery is a sport."],
        ),
        doc(
            "d4",
            "Meet Corliss Archer",
            &[
                "Meet Corliss Archer is a radio sitcom.",
                "It aired in 1943.",
            ],
        ),
    ];
    let sh = encode_all(&docs);
    let mut q = question(
        "What government position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?",
        &["Chief of Protocol"],
    );
    q.question_type = Some("bridge".into());
    let p = run(
        by_name("answer-aware", &opts()).unwrap().as_ref(),
        &q,
        &docs,
        &sh,
    );
    let got: Vec<(&str, &str, &str)> = p
        .items
        .iter()
        .map(|x| {
            let s = &sh[x.index];
            (s.source_id.as_str(), s.content.as_str(), x.reason.as_str())
        })
        .collect();
    assert_eq!(
        got,
        [
            (
                "d1",
                "Kiss and Tell is a 1945 American comedy film starring Shirley Temple as Corliss Archer.",
                "bridge"
            ),
            // The source holding the answer gives its answer sentence alone: on retrieved
            // contexts its lead and other sentences are mostly not evidence.
            (
                "d2",
                "As an adult, she was named Chief of Protocol of the United States.",
                "substring"
            ),
        ]
    );
    assert!(!p.low_confidence);
    assert!(p.items.iter().all(|x| sh[x.index].level == "sentence"));
    assert_eq!(p.candidates, 9);

    // A yes/no comparison: both named entities, their lead sentences, low confidence.
    let docs = vec![
        doc(
            "e1",
            "Scott Derrickson",
            &[
                "Scott Derrickson is an American director.",
                "He lives in Los Angeles.",
            ],
        ),
        doc(
            "e2",
            "Ed Wood",
            &[
                "Edward Davis Wood Jr. was an American filmmaker.",
                "He made cult films.",
            ],
        ),
        doc(
            "e3",
            "Ed Wood (film)",
            &["Ed Wood is a 1994 film.", "It was directed by Tim Burton."],
        ),
    ];
    let sh = encode_all(&docs);
    let mut q = question(
        "Were Scott Derrickson and Ed Wood of the same nationality?",
        &["yes"],
    );
    q.question_type = Some("comparison".into());
    let p = run(
        by_name("answer-aware", &opts()).unwrap().as_ref(),
        &q,
        &docs,
        &sh,
    );
    assert!(p.low_confidence);
    let src: HashSet<&str> = p
        .items
        .iter()
        .map(|x| sh[x.index].source_id.as_str())
        .collect();
    assert!(src.contains("e1"), "{src:?}");
    assert_eq!(src.len(), 2);
}

fn lab_seg(id: &str, level: &str, source: &str, index: i32) -> LabeledSegment {
    LabeledSegment {
        segment_id: id.into(),
        level: level.into(),
        source_id: source.into(),
        index,
        reason: "exact".into(),
        score: 1.0,
    }
}

fn ev(kind: &str, record: &str, index: i32) -> Evidence {
    Evidence {
        kind: kind.into(),
        record_id: Some(record.into()),
        index: Some(index),
        ..Default::default()
    }
}

/// Two questions by hand:
/// - q1 (bridge): gold sentences (d1,0), (d2,1); gold paragraphs d1, d2. Positives: sentence
///   (d1,0), sentence (d1,2), paragraph d3. Selected: s1 only, sufficient.
/// - q2 (comparison): gold sentences (d4,0), (d5,0), (d5,1); gold paragraphs d4, d5.
///   Positives: sentences (d4,0), (d5,1). Selected: both, sufficient.
///
/// Sentence: tp = 1 + 2, fp = 1 + 0, fn = 1 + 1 → P 75, R 60, F1 2·75·60/135 = 66.67.
/// Paragraph: q1 pred {d1, d3} → tp 1, fp 1, fn 1; q2 pred {d4, d5} → tp 2 → P 75, R 75.
/// Sufficient with all gold: q1 selected covers d1 only, q2 covers both → 50%.
fn hand_made() -> (Vec<LabelRecord>, HashMap<String, Question>) {
    let q1 = Question {
        id: "q1".into(),
        question_type: Some("bridge".into()),
        evidence: vec![
            ev("sentence", "d1", 0),
            ev("sentence", "d2", 1),
            ev("paragraph", "d1", 0),
            ev("paragraph", "d2", 1),
        ],
        ..Default::default()
    };
    let q2 = Question {
        id: "q2".into(),
        question_type: Some("comparison".into()),
        evidence: vec![
            ev("sentence", "d4", 0),
            ev("sentence", "d5", 0),
            ev("sentence", "d5", 1),
            ev("paragraph", "d4", 0),
            ev("paragraph", "d5", 1),
        ],
        ..Default::default()
    };
    let l1 = LabelRecord {
        id: "l1".into(),
        question_id: "q1".into(),
        dataset: "toy".into(),
        question_type: Some("bridge".into()),
        method: "m".into(),
        positives: vec![
            lab_seg("s1", "sentence", "d1", 0),
            lab_seg("s2", "sentence", "d1", 2),
            lab_seg("p3", "paragraph", "d3", 0),
        ],
        sufficient: true,
        selected: vec!["s1".into()],
        ..Default::default()
    };
    let l2 = LabelRecord {
        id: "l2".into(),
        question_id: "q2".into(),
        dataset: "toy".into(),
        question_type: Some("comparison".into()),
        method: "m".into(),
        positives: vec![
            lab_seg("s4", "sentence", "d4", 0),
            lab_seg("s5", "sentence", "d5", 1),
        ],
        sufficient: true,
        selected: vec!["s4".into(), "s5".into()],
        ..Default::default()
    };
    let qs = [q1, q2].into_iter().map(|q| (q.id.clone(), q)).collect();
    (vec![l1, l2], qs)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn report_math_on_a_hand_made_case() {
    let (labels, qs) = hand_made();
    let r = report::compute(&labels, &qs);
    let m = &r.datasets["toy"]["m"];
    assert_eq!(m.questions, 2);
    let s = m.levels["sentence"];
    assert_eq!((s.tp, s.fp, s.fn_), (3, 1, 2));
    assert!(close(s.precision, 75.0) && close(s.recall, 60.0));
    assert!(close(s.f1, 2.0 * 75.0 * 60.0 / 135.0));
    let p = m.levels["paragraph"];
    assert_eq!((p.tp, p.fp, p.fn_), (3, 1, 1));
    assert!(close(p.precision, 75.0) && close(p.recall, 75.0) && close(p.f1, 75.0));
    assert!(close(m.sufficient_with_all_gold.unwrap(), 50.0));
    // Per type.
    let b = m.by_type["bridge"]["sentence"];
    assert_eq!((b.tp, b.fp, b.fn_), (1, 1, 1));
    assert!(close(b.f1, 50.0));
    let c = m.by_type["comparison"]["paragraph"];
    assert!(close(c.precision, 100.0) && close(c.recall, 100.0));
    // No positives: zeros, not NaN.
    assert_eq!(
        Prf::from_counts(0, 0, 4),
        Prf {
            fn_: 4,
            ..Default::default()
        }
    );

    // A question with paragraph gold only counts at the paragraph level only.
    let mut qs2 = qs.clone();
    qs2.get_mut("q1")
        .unwrap()
        .evidence
        .retain(|e| e.kind == "paragraph");
    let r = report::compute(&labels[..1], &qs2);
    assert!(!r.datasets["toy"]["m"].levels.contains_key("sentence"));
    // Unknown questions are left out.
    let r = report::compute(&labels, &HashMap::new());
    assert!(r.datasets.is_empty());
}

#[test]
fn report_builders_merge_to_the_report_of_all_records() {
    let (mut labels, mut qs) = hand_made();
    // A third record whose question has no gold evidence: counted, nothing scored.
    let mut q3 = qs["q2"].clone();
    q3.id = "q3".into();
    q3.evidence.clear();
    qs.insert("q3".into(), q3);
    let mut l3 = labels[1].clone();
    l3.question_id = "q3".into();
    labels.push(l3);
    // Another method on q1, so the merge meets a method only one side has.
    let mut l4 = labels[0].clone();
    l4.method = "other".into();
    labels.push(l4);

    let whole = report::compute(&labels, &qs);
    assert_eq!(whole.datasets["toy"]["m"].questions, 3);
    let one = |l: &LabelRecord| {
        let mut b = report::ReportBuilder::default();
        b.add(l, &qs[&l.question_id]);
        b
    };
    for order in [[0, 1, 2, 3], [3, 2, 1, 0], [2, 0, 3, 1]] {
        let mut b = report::ReportBuilder::default();
        for i in order {
            b.merge(one(&labels[i]));
        }
        assert_eq!(b.finish(), whole, "merge order {order:?}");
    }
    // Two halves merged: the same report, as JSON too.
    let mut a = report::ReportBuilder::default();
    let mut b = report::ReportBuilder::default();
    for (i, l) in labels.iter().enumerate() {
        let half = if i % 2 == 0 { &mut a } else { &mut b };
        half.add(l, &qs[&l.question_id]);
    }
    a.merge(b);
    assert_eq!(a.finish().to_json(), whole.to_json());
    // The counts of the record without gold do not change the scores.
    let m = &whole.datasets["toy"]["m"];
    let p = m.levels["paragraph"];
    assert_eq!((p.tp, p.fp, p.fn_), (3, 1, 1));
    assert!(close(m.sufficient_with_all_gold.unwrap(), 50.0));
}

#[test]
fn report_json_nesting() {
    let (labels, qs) = hand_made();
    let r = report::compute(&labels, &qs);
    let j = r.to_json();
    let keys = |v: &serde_json::Value| -> Vec<String> {
        let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        k.sort();
        k
    };
    assert_eq!(keys(&j), ["toy"]);
    assert_eq!(keys(&j["toy"]), ["m"]);
    let m = &j["toy"]["m"];
    assert_eq!(
        keys(m),
        [
            "by_type",
            "paragraph",
            "questions",
            "sentence",
            "sufficient_with_all_gold"
        ]
    );
    for level in ["sentence", "paragraph"] {
        assert_eq!(
            keys(&m[level]),
            ["f1", "fn", "fp", "precision", "recall", "tp"]
        );
    }
    assert_eq!(m["questions"], 2);
    assert_eq!(m["sentence"]["precision"], 75.0);
    assert_eq!(m["sentence"]["recall"], 60.0);
    assert_eq!(m["paragraph"]["f1"], 75.0);
    assert_eq!(m["sufficient_with_all_gold"], 50.0);
    assert_eq!(keys(&m["by_type"]), ["bridge", "comparison"]);
    assert_eq!(keys(&m["by_type"]["bridge"]), ["paragraph", "sentence"]);
    assert_eq!(m["by_type"]["bridge"]["sentence"]["f1"], 50.0);

    // A level without gold is null, the key still there.
    let mut qs2 = qs.clone();
    for q in qs2.values_mut() {
        q.evidence.retain(|e| e.kind == "paragraph");
    }
    let j = report::compute(&labels, &qs2).to_json();
    assert!(j["toy"]["m"]["sentence"].is_null());
    assert!(j["toy"]["m"]["paragraph"].is_object());
    // Without paragraph gold there is no sufficiency share to give: null, `-` in the table.
    let mut qs3 = qs.clone();
    for q in qs3.values_mut() {
        q.evidence.clear();
    }
    let none = report::compute(&labels, &qs3);
    assert_eq!(none.datasets["toy"]["m"].sufficient_with_all_gold, None);
    assert!(none.to_json()["toy"]["m"]["sufficient_with_all_gold"].is_null());
    assert!(
        none.render_table()
            .lines()
            .any(|l| l.starts_with("sufficient with all gold %") && l.contains("| -")),
        "{}",
        none.render_table()
    );

    let table = r.render_table();
    assert!(table.contains("== toy =="));
    assert!(table.contains("sentence"));
    assert!(table.contains("75.0"));
}

/// Labels every question of a shared sample with both methods (S_h: the context documents
/// encoded in context order and concatenated, then the context tables; `sorted` also puts it in stream order ρ as
/// `sh::build_sh` does). `selected` = every positive, `sufficient` = true.
fn label_sample(
    format: Format,
    rel: &str,
    sorted: bool,
) -> Option<(Vec<LabelRecord>, HashMap<String, Question>)> {
    let path = common::shared(rel)?;
    let sink = common::read(format, &path);
    let docs: HashMap<&str, &Document> = sink
        .documents()
        .into_iter()
        .map(|d| (d.id.as_str(), d))
        .collect();
    let tables: HashMap<&str, &Table> = sink
        .tables()
        .into_iter()
        .map(|t| (t.id.as_str(), t))
        .collect();
    let methods: Vec<_> = ["hseq-paper", "answer-aware"]
        .iter()
        .map(|m| by_name(m, &opts()).unwrap())
        .collect();
    let mut labels = Vec::new();
    let mut questions = HashMap::new();
    for q in sink.questions() {
        let mut seen = HashSet::new();
        let ctx_docs: Vec<Document> = q
            .context_documents
            .iter()
            .filter(|id| seen.insert(id.as_str()))
            .filter_map(|id| docs.get(id.as_str()).map(|d| (*d).clone()))
            .collect();
        let ctx_tables: Vec<Table> = q
            .context_tables
            .iter()
            .filter(|id| seen.insert(id.as_str()))
            .filter_map(|id| tables.get(id.as_str()).map(|t| (*t).clone()))
            .collect();
        let mut sh = encode_all(&ctx_docs);
        for t in &ctx_tables {
            sh.extend(encode_table(t, &HseqOptions::default()));
        }
        if sorted {
            sort_stream(&mut sh);
        }
        let ctx = QuestionContext {
            question: q,
            documents: &common::refs(&ctx_docs),
            tables: &common::refs(&ctx_tables),
            triples: &[],
            kg_ids: &[],
        };
        for m in &methods {
            let p = m.label(q, &sh, &ctx);
            assert!(
                p.items
                    .iter()
                    .all(|x| x.index < sh.len() && !positives::is_root(&sh[x.index].level)),
                "{} {}",
                m.name(),
                q.id
            );
            let positives: Vec<LabeledSegment> = p
                .items
                .iter()
                .map(|x| labeled_segment(&sh, x, &ctx))
                .collect();
            labels.push(LabelRecord {
                id: format!("{}:{}", q.id, m.name()),
                question_id: q.id.clone(),
                dataset: q.dataset.clone(),
                question_type: q.question_type.clone(),
                method: m.name().to_string(),
                segments: sh.len() as u32,
                candidates: p.candidates,
                selected: positives.iter().map(|x| x.segment_id.clone()).collect(),
                positives,
                low_confidence: p.low_confidence,
                steps: 1,
                sufficient: true,
                sufficient_at: 1,
            });
        }
        questions.insert(q.id.clone(), q.clone());
    }
    Some((labels, questions))
}

/// The shared samples with gold evidence (under `../shared/data`).
const GOLD_SAMPLES: [(Format, &str); 3] = [
    (
        Format::HotpotQa,
        "hotpotqa/hotpot_dev_distractor_v1.head.json",
    ),
    (
        Format::Musique,
        "musique/musique_ans_v1.0_train.first70.jsonl",
    ),
    (
        Format::TwoWiki,
        "2wikimultihopqa/hipporag_2wikimultihopqa.first5.json",
    ),
];
/// TAT-QA: table and paragraphs, no evidence the report reads.
const TATQA_SAMPLE: (Format, &str) = (Format::TatQa, "tatqa/tatqa_dataset_dev.first200.json");

fn shared_report(sorted: bool) -> Option<LabelReport> {
    let mut labels = Vec::new();
    let mut questions = HashMap::new();
    let mut any = false;
    let mut samples = GOLD_SAMPLES.to_vec();
    // TAT-QA (1200 questions, table + paragraphs) once, as a smoke test and for the record.
    if !sorted {
        samples.push(TATQA_SAMPLE);
    }
    for (format, rel) in samples {
        if let Some((l, q)) = label_sample(format, rel, sorted) {
            labels.extend(l);
            questions.extend(q);
            any = true;
        }
    }
    any.then(|| report::compute(&labels, &questions))
}

/// The target on HotpotQA: answer-aware F1 ≥ hseq-paper F1 + 10 at both levels, recall not
/// lower.
fn check_target(r: &LabelReport) {
    let Some(h) = r.datasets.get("hotpotqa") else {
        eprintln!("skipping the HotpotQA target: no HotpotQA sample");
        return;
    };
    let (paper, aware) = (&h["hseq-paper"], &h["answer-aware"]);
    assert_eq!(paper.questions, 53);
    for level in ["sentence", "paragraph"] {
        let (p, a) = (paper.levels[level], aware.levels[level]);
        assert!(
            a.f1 >= p.f1 + 10.0,
            "{level}: answer-aware F1 {:.1} vs hseq-paper {:.1}",
            a.f1,
            p.f1
        );
        assert!(
            a.recall >= p.recall,
            "{level}: answer-aware recall {:.1} vs hseq-paper {:.1}",
            a.recall,
            p.recall
        );
    }
}

#[test]
fn report_on_shared_samples() {
    let Some(r) = shared_report(false) else {
        return;
    };
    println!(
        "S_h = context documents concatenated in context order:\n{}",
        r.render_table()
    );
    check_target(&r);
    for (d, methods) in &r.datasets {
        for (m, rep) in methods {
            assert!(rep.questions > 0, "{d}/{m}");
            assert!(rep.levels.contains_key("paragraph"), "{d}/{m}");
        }
    }
    // The JSON has the same numbers.
    let j = r.to_json();
    if let Some(h) = r.datasets.get("hotpotqa") {
        assert_eq!(
            j["hotpotqa"]["answer-aware"]["sentence"]["f1"],
            h["answer-aware"].levels["sentence"].f1
        );
    }

    // The same in stream order ρ (what `sh::build_sh` produces).
    let r = shared_report(true).unwrap();
    println!("S_h in stream order rho:\n{}", r.render_table());
    check_target(&r);
}

/// The shared HotpotQA files `answer-aware` is measured on, whether its rules were tuned on
/// each, and the sentence F1 it must keep there. The rules were tuned on AMOR's fullwiki
/// records (both files; the 53 distractor records served as a guard) only. The 200 official
/// fullwiki records (`tts200`, another retriever's contexts: fewer gold paragraphs, more
/// distractors that hold the answer) were not looked at while tuning, only scored once each
/// rule was fixed, so their figure is the one that says how the rules generalise. Floors are the measured figures rounded down
/// (docs/benchmarks.md, "Weak positives on questions nobody tuned on").
const HOTPOT_SPLITS: [(&str, &str, bool, f64); 4] = [
    (
        "fullwiki AMOR",
        "hotpot_dev_fullwiki_v1.amor200.jsonl",
        true,
        71.5,
    ),
    (
        "fullwiki AMOR rest",
        "hotpot_dev_fullwiki_v1.amor_rest.jsonl",
        true,
        70.5,
    ),
    (
        "fullwiki official",
        "hotpot_dev_fullwiki_v1.tts200.jsonl",
        false,
        65.0,
    ),
    (
        "distractor",
        "hotpot_dev_distractor_v1.head.json",
        true,
        81.0,
    ),
];

/// Weak positives when a retriever chose the context: the shared HotpotQA fullwiki files,
/// whose contexts miss gold paragraphs and hold distractors that mention the answer, and the
/// distractor file. Prints every split's sentence P/R/F1 with whether the rules were tuned on
/// it (`--nocapture`), and checks each split's floor and that `answer-aware` stays at least 20
/// F1 points above `hseq-paper` on the fullwiki files.
#[test]
fn weak_positives_hold_up_on_retrieved_contexts() {
    let (mut rows, mut failed) = (Vec::new(), Vec::new());
    // While a rule is being tuned, `LABEL_TUNING=1` leaves out the splits it must not be
    // tuned on, so that their figure is not seen until the rule is fixed.
    let tuning = std::env::var_os("LABEL_TUNING").is_some();
    for (name, file, tuned, floor) in HOTPOT_SPLITS {
        if tuning && !tuned {
            eprintln!("skipping {name}: not a tuning split and LABEL_TUNING is set");
            continue;
        }
        let Some((labels, questions)) =
            label_sample(Format::HotpotQa, &format!("hotpotqa/{file}"), true)
        else {
            eprintln!("skipping {name}: {file} is absent");
            continue;
        };
        let r = report::compute(&labels, &questions);
        let h = &r.datasets["hotpotqa"];
        let (aware, paper) = (
            h["answer-aware"].levels["sentence"],
            h["hseq-paper"].levels["sentence"],
        );
        rows.push(format!(
            "{name:20} {:>4} questions  tuned on: {:3}  P {:.1} R {:.1} F1 {:.1}  (hseq-paper F1 {:.1})",
            h["answer-aware"].questions,
            if tuned { "yes" } else { "no" },
            aware.precision,
            aware.recall,
            aware.f1,
            paper.f1
        ));
        if aware.f1 < floor {
            failed.push(format!("{name}: sentence F1 {:.1} < {floor}", aware.f1));
        }
        if file.contains("fullwiki") && aware.f1 < paper.f1 + 20.0 {
            failed.push(format!(
                "{name}: {:.1} vs hseq-paper {:.1}",
                aware.f1, paper.f1
            ));
        }
    }
    println!("answer-aware, sentence level:\n{}", rows.join("\n"));
    assert!(failed.is_empty(), "{}", failed.join("; "));
}

/// `Prepared::norm` of a paragraph is built from its sentences' normalised texts; on every
/// paragraph of the shared samples (HotpotQA, MuSiQue, 2Wiki, TAT-QA) it must equal
/// normalising the paragraph directly, and some paragraphs must take that path.
#[test]
fn prepared_paragraph_norms_equal_direct_normalisation() {
    let samples = GOLD_SAMPLES.iter().chain([&TATQA_SAMPLE]).copied();
    let mut joined = 0;
    let mut any = false;
    for (format, rel) in samples {
        let Some(path) = common::shared(rel) else {
            eprintln!("skipping {rel}: ../shared/data is absent");
            continue;
        };
        any = true;
        let sink = common::read(format, &path);
        for d in sink.documents() {
            let sh = encode_document(d, &HseqOptions::default());
            let prep = positives::Prepared::new(&sh);
            for (i, s) in sh.iter().enumerate() {
                assert_eq!(
                    prep.norm(i),
                    normalize_answer(&s.content),
                    "{rel}: document {} segment {} ({})",
                    d.id,
                    s.id,
                    s.level
                );
                joined += usize::from(
                    s.level == "paragraph" && sh.iter().any(|c| c.parent.as_ref() == Some(&s.id)),
                );
            }
        }
    }
    assert!(
        !any || joined > 100,
        "only {joined} paragraphs with sentences"
    );
}

/// The sentence join also holds where normalisation rules meet sentence ends: numbers,
/// possessives, articles, a sentence that normalises to nothing.
#[test]
fn prepared_paragraph_norm_at_rule_edges() {
    let d = doc(
        "d1",
        "T",
        &[
            "It cost 1,000.50 dollars.",
            "The.",
            "Anne's 3.0 cats'",
            "s 12, 345 ok",
        ],
    );
    let sh = encode_all(std::slice::from_ref(&d));
    let prep = positives::Prepared::new(&sh);
    let p = sh.iter().position(|s| s.level == "paragraph").unwrap();
    assert_eq!(prep.norm(p), normalize_answer(&d.text));
    assert_eq!(
        prep.norm(p),
        "it cost 1000.5 dollars anne 3 cats s 12 345 ok"
    );
}
