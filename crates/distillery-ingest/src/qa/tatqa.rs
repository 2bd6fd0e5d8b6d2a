//! TAT-QA reader (JSON array of contexts `{table {uid, table [[cells]]}, paragraphs [{uid,
//! order, text}], questions [...]}`).
//!
//! Each context gives one [`distillery_core::Table`] (uri `tatqa:<table uid>`, title = the uid,
//! rows padded to one width) and one document per paragraph
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
//! header rows, as in [`distillery_core::CellLink`], with the matching cell as its text) and
//! `col`; arithmetic and count answers get
//! none, since their cells cannot be read off the data.
//!
//! Header: TAT-QA tables (from financial reports) often spread their column names over
//! several rows: a caption row (`Years Ended September 30,`), the years, a unit row
//! (`(in millions)`, `€m`), each with an empty first cell. Those leading rows are merged into
//! one header (see `header_rows` and `merge_header`), so each body row's segment names its
//! columns `Years Ended September 30, 2019` rather than `2019` being a row of its own; every
//! label is kept in the merged names (a caption over all columns, a column name written over
//! two lines in its own column). The header is the first row alone when the second row holds
//! an amount, or names its row in the first cell under a first row that already names two or
//! more columns; at most four rows are merged, and a table keeps at least one body row.
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
    qa.emit_once(Record::Table(table.table.clone()))?;
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

fn table(qa: &Qa<'_, '_>, t: RawTable) -> Result<TatTable, ItemError> {
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
    let n = header_rows(&cells);
    let header = merge_header(&cells[..n]);
    let header_cells = cells[..n].to_vec();
    let uid = t.uid.0;
    let table = Table {
        id: stable_id(&[DATASET, "table", &uid]),
        dataset: DATASET.to_string(),
        source: qa.ctx.source.clone(),
        uri: format!("{DATASET}:{uid}"),
        title: uid,
        header,
        rows: cells.split_off(n),
        ..Default::default()
    };
    Ok(TatTable {
        table,
        header_cells,
    })
}

/// A context's table and the rows its header was merged from.
struct TatTable {
    table: Table,
    header_cells: Vec<Vec<String>>,
}

/// Most leading rows taken as the header (the shared sample's deepest header has four: `16
/// Weeks`, `12 Weeks Ended`, the dates, the years).
const MAX_HEADER_ROWS: usize = 4;

/// Whether `s` (a trailing `,` aside) is a year, 1900 to 2100.
fn is_year(s: &str) -> bool {
    let s = s.trim_end_matches(',');
    s.len() == 4
        && s.bytes().all(|b| b.is_ascii_digit())
        && (1900..=2100).contains(&s.parse::<u32>().unwrap_or(0))
}

/// How many leading rows form the header: the first row, then each row after it whose cells
/// past the first are all labels and not all empty. A label has a letter in it (`Fiscal`,
/// `2019 €m`), starts with a year (`2019`, `2018 (4)`, `2 0 1 8`) or is a unit symbol (`%`,
/// `$’000`); an amount (`1,452.4`, `(7,227)`, `4.00%`, `—`) is not. The row's first cell must
/// be empty, unless the header so far names no columns (at most one caption past the first
/// column, as in `['($ in millions)', '', '']` or `['', 'Fiscal Year Ended', '']`) and the row
/// names two or more (`['At December 31:', '2019', '2018']`). A row whose one label ends in
/// `:` (`Consolidated Statements of Operations Data:`) is a section of the body. At most
/// [`MAX_HEADER_ROWS`] rows, and never every row of a table of two or more (a table of text
/// under an empty first column keeps a body).
fn header_rows(cells: &[Vec<String>]) -> usize {
    let Some(first) = cells.first() else {
        return 0;
    };
    let label = |c: &str| {
        let compact: String = c.chars().filter(|c| !c.is_whitespace()).collect();
        let symbols = compact.trim_matches(|c| "$€£¥%'’‘()".contains(c));
        c.chars().any(char::is_alphabetic)
            || is_year(&compact)
            || c.split_whitespace().next().is_some_and(is_year)
            || symbols.is_empty()
            || symbols == "000"
    };
    let named = |row: &Vec<String>| row.iter().skip(1).filter(|c| !c.trim().is_empty()).count();
    let mut spread = named(first);
    let mut n = 1;
    let most = MAX_HEADER_ROWS.min(cells.len().saturating_sub(1)).max(1);
    for row in &cells[1..most] {
        let labels = named(row);
        let first_empty = row.first().is_none_or(|c| c.trim().is_empty());
        let all_labels = row.iter().skip(1).all(|c| c.trim().is_empty() || label(c));
        // A lone label ending in ':' heads the rows below it (a section), not the columns.
        let section = labels == 1 && row.iter().any(|c| c.trim_end().ends_with(':'));
        if labels == 0 || !all_labels || section || (!first_empty && (spread > 1 || labels < 2)) {
            break;
        }
        spread = spread.max(labels);
        n += 1;
    }
    n
}

/// One header from the header rows, column by column: each column's name is the non-empty
/// cells above it, top to bottom, joined with a space (a part equal to the one before it is
/// written once). A row with a single label past the first column is a caption naming every
/// column but the first (`Years Ended September 30,` over the years, `(in millions)` under
/// them), unless it ends with a joining word (`Balance at Beginning of`, `Land and`): that is
/// the first line of one column's name, and names that column only. In the last header row,
/// a single label without a letter (`%`) names its own column only. In a row above the last
/// one with two or more labels, a label also names the empty columns to its right, up to the
/// next label (`Domestic`, ``, `International`, `` span two columns each). One header row is
/// the header as it is. The layout alone cannot tell every caption from a column name
/// written over two lines: in 4 of the shared sample's 200 tables a one-column name is
/// spread (`16 Weeks` over the 12-week columns too, `Percent Change` over the years).
fn merge_header(rows: &[Vec<String>]) -> Vec<String> {
    let Some(last) = rows.len().checked_sub(1) else {
        return Vec::new();
    };
    if last == 0 {
        return rows[0].clone();
    }
    let width = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut names: Vec<Vec<&str>> = vec![Vec::new(); width];
    for (r, row) in rows.iter().enumerate() {
        let labels: Vec<usize> = (1..row.len())
            .filter(|&c| !row[c].trim().is_empty())
            .collect();
        let mut filled: Vec<&str> = row.iter().map(|c| c.trim()).collect();
        if let [only] = labels[..] {
            let text = row[only].trim();
            let caption = match r < last {
                true => !ends_with_joining_word(text),
                false => text.chars().any(char::is_alphabetic),
            };
            if caption {
                for cell in filled.iter_mut().skip(1) {
                    *cell = text;
                }
            }
        } else if r < last {
            for c in 2..filled.len() {
                if filled[c].is_empty() && labels.first().is_some_and(|&f| f < c) {
                    filled[c] = filled[c - 1];
                }
            }
        }
        for (c, cell) in filled.into_iter().enumerate() {
            if !cell.is_empty() && names[c].last() != Some(&cell) {
                names[c].push(cell);
            }
        }
    }
    names.into_iter().map(|n| n.join(" ")).collect()
}

/// Whether a header label ends with a word that joins it to the line below (`of`, `and`,
/// `&`, ...): the first line of a column name written over two.
fn ends_with_joining_word(label: &str) -> bool {
    const JOINING: &[&str] = &[
        "of", "and", "at", "in", "for", "to", "the", "by", "per", "from", "on", "or", "&", "-",
    ];
    label
        .split_whitespace()
        .next_back()
        .is_some_and(|w| JOINING.iter().any(|j| w.eq_ignore_ascii_case(j)))
}

fn question(
    qa: &Qa<'_, '_>,
    rq: RawQuestion,
    table: &TatTable,
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
    q.context_tables = vec![table.table.id.clone()];
    q.context_documents = doc_ids.to_vec();
    q.meta = meta_string(&rq.extra);
    Ok(q)
}

/// `table_cell` evidence for every cell equal (trimmed) to an answer span: body cells by their
/// row, and cells of the rows the header was merged from as row -1 (text = that cell).
fn cell_evidence(table: &TatTable, answers: &[String]) -> Vec<Evidence> {
    let t = &table.table;
    let rows = table
        .header_cells
        .iter()
        .map(|row| (-1, row))
        .chain(t.rows.iter().enumerate().map(|(r, row)| (r as i32, row)));
    let mut out: Vec<Evidence> = Vec::new();
    for (r, row) in rows {
        for (c, cell) in row.iter().enumerate() {
            let text = cell.trim();
            let seen = |e: &Evidence| e.row == Some(-1) && e.col == Some(c as i32);
            if !text.is_empty()
                && answers.iter().any(|a| a.trim() == text)
                && !(r == -1 && out.iter().any(seen))
            {
                out.push(Evidence {
                    kind: "table_cell".to_string(),
                    record_id: Some(t.id.clone()),
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

    fn rows(rows: &[&[&str]]) -> Vec<Vec<String>> {
        rows.iter()
            .map(|r| r.iter().map(|c| c.to_string()).collect())
            .collect()
    }

    /// A table's leading rows, how many of them form the header, and the merged header.
    type Case<'a> = (&'a [&'a [&'a str]], usize, &'a [&'a str]);

    /// The header layouts of the shared sample's tables.
    #[test]
    fn header_rows_are_merged_column_by_column() {
        let cases: &[Case] = &[
            (
                &[
                    &["", "", "Years Ended September 30,", ""],
                    &["", "2019", "2018", "2017"],
                    &["Fixed Price", "$  1,452.4", "$  1,146.2", "$  1,036.9"],
                ],
                2,
                &[
                    "",
                    "Years Ended September 30, 2019",
                    "Years Ended September 30, 2018",
                    "Years Ended September 30, 2017",
                ],
            ),
            (
                &[
                    &["", "", "Fiscal", ""],
                    &["", "2019", "2018", "2017"],
                    &["", "", "(in millions)", ""],
                    &["Transportation Solutions:", "", "", ""],
                ],
                3,
                &[
                    "",
                    "Fiscal 2019 (in millions)",
                    "Fiscal 2018 (in millions)",
                    "Fiscal 2017 (in millions)",
                ],
            ),
            (
                &[
                    &["", "Domestic", "", "International", ""],
                    &["", "September 30,", "", "September 30,", ""],
                    &["", "2019", "2018", "2019", "2018"],
                    &["Discount rate", "4.00%", "3.75%", "1.90%", "2.80%"],
                ],
                3,
                &[
                    "",
                    "Domestic September 30, 2019",
                    "Domestic September 30, 2018",
                    "International September 30, 2019",
                    "International September 30, 2018",
                ],
            ),
            (
                &[
                    &["Income statement expense", "", "", ""],
                    &["", "2019 €m", "2018 €m", "2017 €m"],
                    &["Defined contribution schemes", "166", "178", "192"],
                ],
                2,
                &["Income statement expense", "2019 €m", "2018 €m", "2017 €m"],
            ),
            (
                &[
                    &["", "December 31", ""],
                    &["", "2019", "2 0 1 8"],
                    &["", "U.S. $ in thousands", ""],
                    &["Operating loss carryforward", "73,260", "57,768"],
                ],
                3,
                &[
                    "",
                    "December 31 2019 U.S. $ in thousands",
                    "December 31 2 0 1 8 U.S. $ in thousands",
                ],
            ),
            (
                &[
                    &["", "2019", "2018"],
                    &["", "€m", "€m"],
                    &["Cash generated", "14,182", "13,860"],
                ],
                2,
                &["", "2019 €m", "2018 €m"],
            ),
            // A body row: a first cell, or an amount under an empty first cell.
            (
                &[&["As of", "2019", "2018"], &["Assets", "", ""]],
                1,
                &["As of", "2019", "2018"],
            ),
            (
                &[&["", "2019", "2018"], &["", "1,234", "(7,227)"]],
                1,
                &["", "2019", "2018"],
            ),
            (&[&["", "Total", "5"]], 1, &["", "Total", "5"]),
            // Unit symbols, footnoted years, and column names under a caption-only row.
            (
                &[
                    &["", "30 June 2019", "30 June 2018", "Change"],
                    &["", "$’000", "$’000", "%"],
                    &["Revenue", "1,000", "900", "11.1"],
                ],
                2,
                &["", "30 June 2019 $’000", "30 June 2018 $’000", "Change %"],
            ),
            (
                &[
                    &["($ in millions)", "", ""],
                    &["At December 31:", "2019", "2018 (4)"],
                    &["Assets", "", ""],
                ],
                2,
                &["($ in millions) At December 31:", "2019", "2018 (4)"],
            ),
            (
                &[
                    &["", "Fiscal Year Ended", ""],
                    &["(Dollars in Millions)", "April 27, 2019", "April 28, 2018"],
                    &["Revenue", "$ 1", "$ 2"],
                ],
                2,
                &[
                    "(Dollars in Millions)",
                    "Fiscal Year Ended April 27, 2019",
                    "Fiscal Year Ended April 28, 2018",
                ],
            ),
            // A first cell under a header that names its columns starts the body, and so does
            // one naming a single column.
            (
                &[&["", "2019", "2018"], &["Name", "Smith", "Jones"]],
                1,
                &["", "2019", "2018"],
            ),
            (
                &[&["Plans", "", ""], &["Plan A", "Defined", ""]],
                1,
                &["Plans", "", ""],
            ),
            (&[&["", "2019"], &["", "—"]], 1, &["", "2019"]),
            // Column names written over two lines name their own column only.
            (
                &[
                    &["", "Balance at Beginning of", "", ""],
                    &[
                        "",
                        "Period (1/1/19)",
                        "Increase / (Decrease)",
                        "Balance at End of Period",
                    ],
                    &["Accounts receivable", "$90,831", "$7,117", "$97,948"],
                ],
                2,
                &[
                    "",
                    "Balance at Beginning of Period (1/1/19)",
                    "Increase / (Decrease)",
                    "Balance at End of Period",
                ],
            ),
            (
                &[
                    &["", "", "", "", "16 Weeks"],
                    &["", "", "12 Weeks Ended", "", "Ended"],
                    &["", "September 29,", "July 7,", "April 14,", "January 20,"],
                    &["", "2019", "2019", "2019", "2019"],
                    &["Net sales", "$ 1", "$ 2", "$ 3", "$ 4"],
                ],
                4,
                // Four header rows; `16 Weeks` cannot be told from a caption, and is spread.
                &[
                    "",
                    "16 Weeks September 29, 2019",
                    "16 Weeks 12 Weeks Ended July 7, 2019",
                    "16 Weeks 12 Weeks Ended April 14, 2019",
                    "16 Weeks Ended January 20, 2019",
                ],
            ),
            (
                &[
                    &["", "", "Number of Restaurants"],
                    &["", "", "Land and"],
                    &["", "Ground", "Building"],
                    &["Fiscal Year", "Leases", "Leases"],
                ],
                3,
                &[
                    "",
                    "Number of Restaurants Ground",
                    "Number of Restaurants Land and Building",
                ],
            ),
            // A unit under one column only.
            (
                &[
                    &["", "2019", "2018", "Change"],
                    &["", "", "", "%"],
                    &["Revenue", "1,000", "900", "11.1"],
                ],
                2,
                &["", "2019", "2018", "Change %"],
            ),
            // A table of text under an empty first column keeps a body row.
            (
                &[&["", "Name", "Role"], &["", "Jane Doe", "CFO"]],
                1,
                &["", "Name", "Role"],
            ),
            (
                &[&["", "2019", "2018"], &["", "Operations Data:", ""]],
                1,
                &["", "2019", "2018"],
            ),
        ];
        for (table, n, header) in cases {
            let cells = rows(table);
            assert_eq!(header_rows(&cells), *n, "{table:?}");
            assert_eq!(merge_header(&cells[..*n]), *header, "{table:?}");
        }
        assert_eq!(header_rows(&[]), 0);
        assert!(merge_header(&[]).is_empty());
    }

    #[test]
    fn a_merged_header_keeps_its_cells_as_evidence() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("tatqa_dataset_dev.json");
        std::fs::write(
            &p,
            r#"[{"table":{"uid":"t1","table":[["","","Fiscal"],["","2019","2018"],["Sales","5","4"]]},
                 "paragraphs":[],
                 "questions":[{"uid":"q1","question":"Which year had more sales?","answer":["2019"],"derivation":"","answer_type":"span","answer_from":"table","rel_paragraphs":[],"scale":""}]}]"#,
        )
        .unwrap();
        let o = FormatOptions::default_for(Format::TatQa);
        let ctx = InputCtx::local(p.to_str().unwrap(), &o);
        let mut s = VecSink::default();
        read(&ctx, &mut s).unwrap();
        let t = s.tables()[0];
        assert_eq!(t.header, vec!["", "Fiscal 2019", "Fiscal 2018"]);
        assert_eq!(t.rows, vec![vec!["Sales", "5", "4"]]);
        let e = &s.questions()[0].evidence;
        assert_eq!(e.len(), 1, "{e:?}");
        assert_eq!((e[0].row, e[0].col), (Some(-1), Some(1)));
        assert_eq!(e[0].text.as_deref(), Some("2019"));
    }
}
