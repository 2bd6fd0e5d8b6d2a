//! The label-quality report: weak positives compared with gold evidence.
//!
//! Micro precision/recall/F1 (percentages) per dataset, method, level and question type:
//!
//! - **sentence** level: over `(record_id, sentence index)` pairs. Gold: the question's
//!   `sentence` evidence with a record id and an index; predicted: the `sentence` positives
//!   (their `source_id` and `index`). Paragraph or row positives predict no sentence: a method
//!   that labels containers (`hseq-paper` picks paragraphs first) is measured on its sentence
//!   positives only.
//! - **paragraph** level: over record ids. Gold: the record ids of the `paragraph` evidence;
//!   predicted: the `source_id` of every positive, whatever its level.
//!
//! Only questions with gold evidence of a level count at that level (MuSiQue has paragraph
//! gold only, so it has no sentence scores). `questions` counts the label records whose
//! question was found. `sufficient_with_all_gold` is the percentage, among questions with
//! paragraph gold, whose trajectory reached sufficiency and whose selected segments (looked up
//! among the record's positives by segment id) cover every gold paragraph.

use distillery_core::{LabelRecord, Question};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// The two levels of the report, in display order.
pub const LEVELS: [&str; 2] = ["sentence", "paragraph"];

/// Micro precision, recall and F1 (percentages, 0..100) with their counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Prf {
    pub precision: f64,
    pub recall: f64,
    pub f1: f64,
    pub tp: u64,
    pub fp: u64,
    pub fn_: u64,
}

impl Prf {
    /// Scores from counts; a ratio with a zero denominator is 0.
    pub fn from_counts(tp: u64, fp: u64, fn_: u64) -> Prf {
        let pct = |a: u64, b: u64| {
            if b == 0 {
                0.0
            } else {
                100.0 * a as f64 / b as f64
            }
        };
        let precision = pct(tp, tp + fp);
        let recall = pct(tp, tp + fn_);
        let f1 = if precision + recall > 0.0 {
            2.0 * precision * recall / (precision + recall)
        } else {
            0.0
        };
        Prf {
            precision,
            recall,
            f1,
            tp,
            fp,
            fn_,
        }
    }

    fn add(&self, tp: u64, fp: u64, fn_: u64) -> Prf {
        Prf::from_counts(self.tp + tp, self.fp + fp, self.fn_ + fn_)
    }

    fn to_json(self) -> Value {
        json!({
            "precision": self.precision,
            "recall": self.recall,
            "f1": self.f1,
            "tp": self.tp,
            "fp": self.fp,
            "fn": self.fn_,
        })
    }
}

/// The report of one method on one dataset.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MethodReport {
    pub questions: u64,
    /// `sentence`, `paragraph` → scores (a level is absent when no question has its gold).
    pub levels: BTreeMap<String, Prf>,
    /// Question type → level → scores.
    pub by_type: BTreeMap<String, BTreeMap<String, Prf>>,
    /// Percent of questions (with paragraph gold) whose trajectory reached sufficiency and
    /// selected every gold paragraph; `None` when no question has paragraph gold (HybridQA
    /// and MetaQA: nothing to compare with, shown `-` and `null`).
    pub sufficient_with_all_gold: Option<f64>,
}

/// Dataset → method → report.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelReport {
    pub datasets: BTreeMap<String, BTreeMap<String, MethodReport>>,
}

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
struct Acc {
    report: MethodReport,
    with_gold: u64,
    sufficient: u64,
}

impl Acc {
    fn merge(&mut self, o: Acc) {
        let r = &mut self.report;
        r.questions += o.report.questions;
        merge_levels(&mut r.levels, o.report.levels);
        for (qtype, levels) in o.report.by_type {
            merge_levels(r.by_type.entry(qtype).or_default(), levels);
        }
        self.with_gold += o.with_gold;
        self.sufficient += o.sufficient;
    }
}

fn merge_levels(into: &mut BTreeMap<String, Prf>, from: BTreeMap<String, Prf>) {
    for (level, p) in from {
        let e = into.entry(level).or_default();
        *e = e.add(p.tp, p.fp, p.fn_);
    }
}

fn counts<T: Ord>(pred: &BTreeSet<T>, gold: &BTreeSet<T>) -> (u64, u64, u64) {
    let tp = pred.intersection(gold).count() as u64;
    (tp, pred.len() as u64 - tp, gold.len() as u64 - tp)
}

/// A question's gold evidence as the report compares it: `sentence` evidence as (record id,
/// sentence index), `paragraph` evidence as record ids.
struct Gold<'a> {
    sentences: BTreeSet<(&'a str, i32)>,
    paragraphs: BTreeSet<&'a str>,
}

impl<'a> Gold<'a> {
    fn of(q: &'a Question) -> Gold<'a> {
        let of_kind = |kind: &'static str| q.evidence.iter().filter(move |e| e.kind == kind);
        Gold {
            sentences: of_kind("sentence")
                .filter_map(|e| Some((e.record_id.as_deref()?, e.index?)))
                .collect(),
            paragraphs: of_kind("paragraph")
                .filter_map(|e| e.record_id.as_deref())
                .collect(),
        }
    }
}

/// The report built one label record at a time: every figure is a sum of per-record counts
/// (the scores are computed from the summed counts), so records may come in any order, builders
/// of disjoint record sets [`merge`](ReportBuilder::merge) into the builder of their union, and
/// memory is one set of counts per (dataset, method) with one per question type inside it,
/// whatever the number of records. Each record is scored against the question it is given, so
/// two questions sharing an id (ingest does not merge them) are each scored on their own
/// evidence.
/// Its counts serialize (serde), so tasks that each counted a share of the records can be
/// added up elsewhere ([`ReportBuilder::merge`]).
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct ReportBuilder {
    accs: BTreeMap<String, BTreeMap<String, Acc>>,
}

impl ReportBuilder {
    /// Counts one label record against its question (`l.question_id == q.id`).
    pub fn add(&mut self, l: &LabelRecord, q: &Question) {
        self.add_question(q, std::slice::from_ref(l));
    }

    /// Counts the label records of one question (one per method), its gold evidence gathered
    /// once for all of them.
    pub fn add_question(&mut self, q: &Question, labels: &[LabelRecord]) {
        let gold = Gold::of(q);
        for l in labels {
            self.count(l, q, &gold);
        }
    }

    /// The counts of a (dataset, method), its keys allocated only the first time.
    fn acc(&mut self, dataset: &str, method: &str) -> &mut Acc {
        if !self.accs.contains_key(dataset) {
            self.accs.insert(dataset.to_string(), BTreeMap::new());
        }
        let methods = self.accs.get_mut(dataset).expect("inserted above");
        if !methods.contains_key(method) {
            methods.insert(method.to_string(), Acc::default());
        }
        methods.get_mut(method).expect("inserted above")
    }

    fn count(&mut self, l: &LabelRecord, q: &Question, gold: &Gold<'_>) {
        let acc = self.acc(&l.dataset, &l.method);
        acc.report.questions += 1;
        let (gold_sent, gold_para) = (&gold.sentences, &gold.paragraphs);
        if gold_sent.is_empty() && gold_para.is_empty() {
            return;
        }
        let qtype = l
            .question_type
            .clone()
            .or_else(|| q.question_type.clone())
            .unwrap_or_else(|| "none".to_string());
        let mut tally = |level: &str, (tp, fp, fn_): (u64, u64, u64)| {
            let r = &mut acc.report;
            let e = r.levels.entry(level.to_string()).or_default();
            *e = e.add(tp, fp, fn_);
            let t = r
                .by_type
                .entry(qtype.clone())
                .or_default()
                .entry(level.to_string())
                .or_default();
            *t = t.add(tp, fp, fn_);
        };
        if !gold_sent.is_empty() {
            let pred: BTreeSet<(&str, i32)> = l
                .positives
                .iter()
                .filter(|p| p.level == "sentence" && p.index >= 0)
                .map(|p| (p.source_id.as_str(), p.index))
                .collect();
            tally("sentence", counts(&pred, gold_sent));
        }
        if !gold_para.is_empty() {
            let pred: BTreeSet<&str> = l.positives.iter().map(|p| p.source_id.as_str()).collect();
            tally("paragraph", counts(&pred, gold_para));
            acc.with_gold += 1;
            let selected: BTreeSet<&str> = l
                .selected
                .iter()
                .filter_map(|id| l.positives.iter().find(|p| p.segment_id == *id))
                .map(|p| p.source_id.as_str())
                .collect();
            if l.sufficient && gold_para.is_subset(&selected) {
                acc.sufficient += 1;
            }
        }
    }

    /// Adds the counts of another builder (of other records).
    pub fn merge(&mut self, other: ReportBuilder) {
        for (dataset, methods) in other.accs {
            let into = self.accs.entry(dataset).or_default();
            for (method, acc) in methods {
                into.entry(method).or_default().merge(acc);
            }
        }
    }

    /// The report of every record added.
    pub fn finish(self) -> LabelReport {
        let datasets = self
            .accs
            .into_iter()
            .map(|(d, methods)| {
                let methods = methods
                    .into_iter()
                    .map(|(m, mut a)| {
                        if a.with_gold > 0 {
                            a.report.sufficient_with_all_gold =
                                Some(100.0 * a.sufficient as f64 / a.with_gold as f64);
                        }
                        (m, a.report)
                    })
                    .collect();
                (d, methods)
            })
            .collect();
        LabelReport { datasets }
    }
}

/// Compares label records with the gold evidence of their questions (`questions` keyed by
/// `Question::id`, which `LabelRecord::question_id` names). Records whose question is missing
/// are left out. The [`ReportBuilder`] over those records.
pub fn compute(labels: &[LabelRecord], questions: &HashMap<String, Question>) -> LabelReport {
    let mut b = ReportBuilder::default();
    for l in labels {
        if let Some(q) = questions.get(&l.question_id) {
            b.add(l, q);
        }
    }
    b.finish()
}

/// `{"sentence": prf|null, "paragraph": prf|null}` of a level map.
fn levels_json(levels: &BTreeMap<String, Prf>, out: &mut serde_json::Map<String, Value>) {
    for l in LEVELS {
        out.insert(
            l.to_string(),
            levels.get(l).map_or(Value::Null, |p| p.to_json()),
        );
    }
}

impl LabelReport {
    /// `{dataset: {method: {"sentence": {"precision", "recall", "f1", "tp", "fp", "fn"},
    /// "paragraph": {...}, "questions": n, "sufficient_with_all_gold": x|null, "by_type":
    /// {type: {"sentence": {...}, "paragraph": {...}}}}}}`; a level without gold questions is
    /// `null`, and so is `sufficient_with_all_gold` when no question has paragraph gold.
    pub fn to_json(&self) -> Value {
        let mut root = serde_json::Map::new();
        for (d, methods) in &self.datasets {
            let mut dm = serde_json::Map::new();
            for (m, r) in methods {
                let mut o = serde_json::Map::new();
                levels_json(&r.levels, &mut o);
                o.insert("questions".into(), json!(r.questions));
                o.insert(
                    "sufficient_with_all_gold".into(),
                    json!(r.sufficient_with_all_gold),
                );
                let mut bt = serde_json::Map::new();
                for (t, levels) in &r.by_type {
                    let mut to = serde_json::Map::new();
                    levels_json(levels, &mut to);
                    bt.insert(t.clone(), Value::Object(to));
                }
                o.insert("by_type".into(), Value::Object(bt));
                dm.insert(m.clone(), Value::Object(o));
            }
            root.insert(d.clone(), Value::Object(dm));
        }
        Value::Object(root)
    }

    /// A plain-text table per dataset with the methods side by side: P/R/F1 per level, then
    /// per question type and level, the question count and `sufficient_with_all_gold`.
    pub fn render_table(&self) -> String {
        const COL: usize = 24;
        let mut out = String::new();
        for (d, methods) in &self.datasets {
            let names: Vec<&String> = methods.keys().collect();
            let types: BTreeSet<&String> =
                methods.values().flat_map(|r| r.by_type.keys()).collect();
            let label_width = types
                .iter()
                .map(|t| format!("  {t} / paragraph ").chars().count())
                .chain(["sufficient with all gold % ".len()])
                .max()
                .unwrap_or(0);
            let w = label_width;
            out.push_str(&format!("== {d} ==\n{:w$}", ""));
            for m in &names {
                out.push_str(&format!("| {m:<w$}", w = COL - 2));
            }
            out.push_str(&format!("\n{:w$}", "level"));
            for _ in &names {
                out.push_str(&format!("| {:>6} {:>6} {:>6}  ", "P", "R", "F1"));
            }
            out.push('\n');
            let mut rows: Vec<(String, Vec<Option<Prf>>)> = Vec::new();
            for l in LEVELS {
                rows.push((
                    l.to_string(),
                    methods.values().map(|r| r.levels.get(l).copied()).collect(),
                ));
            }
            let types: BTreeSet<&String> =
                methods.values().flat_map(|r| r.by_type.keys()).collect();
            for t in types {
                for l in LEVELS {
                    let cells: Vec<Option<Prf>> = methods
                        .values()
                        .map(|r| r.by_type.get(t).and_then(|m| m.get(l)).copied())
                        .collect();
                    if cells.iter().any(Option::is_some) {
                        rows.push((format!("  {t} / {l}"), cells));
                    }
                }
            }
            for (label, cells) in rows {
                out.push_str(&format!("{label:w$}"));
                for c in cells {
                    match c {
                        Some(p) => out.push_str(&format!(
                            "| {:>6.1} {:>6.1} {:>6.1}  ",
                            p.precision, p.recall, p.f1
                        )),
                        None => out.push_str(&format!("| {:>6} {:>6} {:>6}  ", "-", "-", "-")),
                    }
                }
                out.push('\n');
            }
            out.push_str(&format!("{:w$}", "questions"));
            for r in methods.values() {
                out.push_str(&format!("| {:<w$}", r.questions, w = COL - 2));
            }
            out.push_str(&format!("\n{:w$}", "sufficient with all gold %"));
            for r in methods.values() {
                let pct = match r.sufficient_with_all_gold {
                    Some(p) => format!("{p:.1}"),
                    None => "-".to_string(),
                };
                out.push_str(&format!("| {pct:<w$}", w = COL - 2));
            }
            out.push_str("\n\n");
        }
        out
    }
}
