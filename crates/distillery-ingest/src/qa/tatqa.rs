//! TAT-QA reader (JSON array of contexts `{table {uid, table [[cells]]}, paragraphs [{uid,
//! order, text}], questions [...]}`).
//!
//! Each context gives one [`distillery_core::Table`] (header = the first row, rows = the rest,
//! padded to one width; uri `tatqa:<table uid>`, title = the uid) and one document per paragraph
//! (title and uri from the paragraph uid, sentences by [`crate::text::sentence_spans`]); both are
//! written once per file. Each question `{uid, question, answer, derivation, answer_type,
//! answer_from, rel_paragraphs, req_comparison, scale}` becomes one question whose context is
//! that table and those paragraphs. Answers are normalised to strings: a string or number is one
//! answer (numbers as JSON writes them, `2.1`), a list one answer per element.
//! `question_type` = `answer_type`; `meta` keeps every other field verbatim (`scale`,
//! `derivation`, `answer_type`, `answer_from`, `req_comparison`, `order`, ...).
//!
//! Evidence, only what the data supports: a `paragraph` evidence per `rel_paragraphs` entry
//! (paragraph `order` numbers written as strings; `index` = the paragraph's position in the
//! context). The dataset names no table cells; for span answers taken from the table
//! (`answer_from` `table`/`table-text`, `answer_type` `span`/`multi-span`) each cell whose text
//! equals an answer span (trimmed) is given as a `table_cell` evidence with its `row` (-1 for the
//! header row, as in [`distillery_core::CellLink`]) and `col`; arithmetic and count answers get
//! none, since their cells cannot be read off the data.
//!
//! A bad context (wrong table or paragraph layout) is quarantined whole; a bad question alone is
//! quarantined and the other questions of its context are kept.

use distillery_core::id::stable_id;
use distillery_core::{Evidence, Question, Record, RecordSink, Table};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::common::{
    IdString, ItemError, Qa, answers_from, bad_value, excerpt_of, from_value, meta_string,
    scalar_string,
};
use crate::jsonstream::RawItem;
use crate::{IngestError, InputCtx};

const DATASET: &str = "tatqa";

#[derive(Deserialize)]
struct Raw {
    table: RawTable,
    #[serde(default)]
    paragraphs: Vec<RawParagraph>,
    questions: Vec<Value>,
}

#[derive(Deserialize)]
struct RawTable {
    uid: IdString,
    table: Vec<Vec<Value>>,
}

#[derive(Deserialize)]
struct RawParagraph {
    uid: IdString,
    #[serde(default)]
    order: Option<Value>,
    text: String,
}

#[derive(Deserialize)]
struct RawQuestion {
    uid: IdString,
    question: String,
    #[serde(default)]
    answer: Option<Value>,
    #[serde(default)]
    rel_paragraphs: Vec<Value>,
    #[serde(flatten)]
    extra: Map<String, Value>,
}

/// Reads a TAT-QA JSON file.
pub fn read(ctx: &InputCtx<'_>, sink: &mut dyn RecordSink) -> Result<(), IngestError> {
    let mut qa = Qa::new(ctx, DATASET, sink);
    qa.for_each_json(|qa, r: Raw, raw| context(qa, r, raw))
}

fn context(qa: &mut Qa<'_, '_>, r: Raw, raw: &RawItem) -> Result<(), ItemError> {
    let table = table(qa, r.table)?;
    let docs: Vec<_> = r
        .paragraphs
        .iter()
        .map(|p| qa.document_from_text(&p.uid.0, p.text.clone()))
        .collect();
    let orders: Vec<Option<String>> = r
        .paragraphs
        .iter()
        .map(|p| p.order.as_ref().and_then(scalar_string))
        .collect();
    let doc_ids: Vec<String> = docs.iter().map(|d| d.id.clone()).collect();
    qa.emit_once(Record::Table(table.clone()))?;
    for d in docs {
        qa.emit_once(Record::Document(d))?;
    }
    for (i, v) in r.questions.into_iter().enumerate() {
        let excerpt = v.to_string();
        let built = from_value::<RawQuestion>(v, &format!("questions[{i}]"))
            .and_then(|rq| question(qa, rq, &table, &doc_ids, &orders, i));
        match built {
            Ok(q) => qa.emit(Record::Question(q))?,
            Err(ItemError::Bad { reason, detail }) => {
                let q = qa.quarantine_part(raw, i, reason, detail, excerpt.as_bytes());
                qa.quarantine(q)?;
            }
            Err(e @ ItemError::Fatal(_)) => return Err(e),
        }
    }
    Ok(())
}

fn table(qa: &Qa<'_, '_>, t: RawTable) -> Result<Table, ItemError> {
    let mut cells: Vec<Vec<String>> = Vec::with_capacity(t.table.len());
    for (r, row) in t.table.iter().enumerate() {
        let mut out = Vec::with_capacity(row.len());
        for (c, v) in row.iter().enumerate() {
            match v {
                Value::Null => out.push(String::new()),
                v => out.push(scalar_string(v).ok_or_else(|| {
                    bad_value(format!(
                        "table.table[{r}][{c}] is not a string or number: {}",
                        excerpt_of(v)
                    ))
                })?),
            }
        }
        cells.push(out);
    }
    let width = cells.iter().map(Vec::len).max().unwrap_or(0);
    for row in &mut cells {
        row.resize(width, String::new());
    }
    let mut rows = cells.into_iter();
    let header = rows.next().unwrap_or_default();
    let uid = t.uid.0;
    Ok(Table {
        id: stable_id(&[DATASET, "table", &uid]),
        dataset: DATASET.to_string(),
        source: qa.ctx.source.clone(),
        uri: format!("{DATASET}:{uid}"),
        title: uid,
        header,
        rows: rows.collect(),
        ..Default::default()
    })
}

fn question(
    qa: &Qa<'_, '_>,
    rq: RawQuestion,
    table: &Table,
    doc_ids: &[String],
    orders: &[Option<String>],
    i: usize,
) -> Result<Question, ItemError> {
    let answers = answers_from(rq.answer.as_ref(), &format!("questions[{i}].answer"))?;
    let mut q = qa.question(&rq.uid.0, rq.question);
    for (k, v) in rq.rel_paragraphs.iter().enumerate() {
        let order = scalar_string(v).ok_or_else(|| {
            bad_value(format!(
                "questions[{i}].rel_paragraphs[{k}] is not a paragraph order: {}",
                excerpt_of(v)
            ))
        })?;
        let pos = orders
            .iter()
            .position(|o| o.as_deref() == Some(order.as_str()));
        q.evidence.push(Evidence {
            kind: "paragraph".to_string(),
            record_id: pos.map(|p| doc_ids[p].clone()),
            index: pos.map(|p| p as i32),
            // The order as the dataset writes it, so an order naming no paragraph is kept.
            text: pos.is_none().then_some(order),
            ..Default::default()
        });
    }
    let field = |k: &str| rq.extra.get(k).and_then(Value::as_str);
    let from_table = matches!(field("answer_from"), Some("table" | "table-text"));
    let span = matches!(field("answer_type"), Some("span" | "multi-span"));
    if from_table && span {
        q.evidence.extend(cell_evidence(table, &answers));
    }
    q.question_type = field("answer_type").map(str::to_string);
    q.answerable = rq
        .answer
        .as_ref()
        .is_some_and(|a| !a.is_null())
        .then_some(true);
    q.answers = answers;
    q.context_tables = vec![table.id.clone()];
    q.context_documents = doc_ids.to_vec();
    q.meta = meta_string(&rq.extra);
    Ok(q)
}

/// `table_cell` evidence for every cell equal (trimmed) to an answer span.
fn cell_evidence(table: &Table, answers: &[String]) -> Vec<Evidence> {
    let mut out = Vec::new();
    let rows = std::iter::once((-1, &table.header)).chain(
        table
            .rows
            .iter()
            .enumerate()
            .map(|(r, row)| (r as i32, row)),
    );
    for (r, row) in rows {
        for (c, cell) in row.iter().enumerate() {
            let t = cell.trim();
            if !t.is_empty() && answers.iter().any(|a| a.trim() == t) {
                out.push(Evidence {
                    kind: "table_cell".to_string(),
                    record_id: Some(table.id.clone()),
                    row: Some(r),
                    col: Some(c as i32),
                    text: Some(cell.clone()),
                    ..Default::default()
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use distillery_core::VecSink;
    use distillery_core::spec::{Format, FormatOptions};

    #[test]
    fn answers_evidence_and_bad_questions() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("tatqa_dataset_train.json");
        std::fs::write(
            &p,
            r#"[{"table":{"uid":"t1","table":[["","2019"],["Sales","$ 5.0"],["Cost",3]]},
                 "paragraphs":[{"uid":"p1","order":1,"text":"Sales rose. Costs fell."},{"uid":"p2","order":2,"text":"Other."}],
                 "questions":[
                   {"uid":"q1","order":1,"question":"Sales?","answer":["$ 5.0"],"derivation":"","answer_type":"span","answer_from":"table","rel_paragraphs":[],"req_comparison":false,"scale":""},
                   {"uid":"q2","order":2,"question":"Diff?","answer":1.5,"derivation":"5-3.5","answer_type":"arithmetic","answer_from":"table-text","rel_paragraphs":["2","9"],"req_comparison":false,"scale":"million"},
                   {"uid":"q3","order":3,"answer":"x"},
                   {"uid":"q4","order":4,"question":"Bad?","answer":{"x":1}}]}]"#,
        )
        .unwrap();
        let o = FormatOptions::default_for(Format::TatQa);
        let ctx = InputCtx::local(p.to_str().unwrap(), &o);
        let mut s = VecSink::default();
        read(&ctx, &mut s).unwrap();
        let t = s.tables();
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].header, vec!["", "2019"]);
        assert_eq!(t[0].rows, vec![vec!["Sales", "$ 5.0"], vec!["Cost", "3"]]);
        assert_eq!(s.documents().len(), 2);
        let q = s.questions();
        assert_eq!(q.len(), 2);
        assert_eq!(q[0].evidence.len(), 1);
        assert_eq!(
            (q[0].evidence[0].row, q[0].evidence[0].col),
            (Some(0), Some(1))
        );
        assert_eq!(q[1].answers, vec!["1.5"]);
        assert_eq!(q[1].question_type.as_deref(), Some("arithmetic"));
        assert_eq!(q[1].evidence.len(), 2);
        assert_eq!(q[1].evidence[0].index, Some(1));
        assert_eq!(q[1].evidence[1].record_id, None);
        assert_eq!(q[1].evidence[1].text.as_deref(), Some("9"));
        let meta: Value = serde_json::from_str(&q[1].meta).unwrap();
        assert_eq!(meta["scale"], "million");
        assert_eq!(meta["derivation"], "5-3.5");
        assert_eq!(meta["req_comparison"], false);
        let bad = s.quarantine();
        assert_eq!(bad.len(), 2);
        assert_eq!(bad[0].reason, "missing_field");
        assert_eq!(bad[1].reason, "bad_value");
        assert_ne!(bad[0].id, bad[1].id);
    }
}
