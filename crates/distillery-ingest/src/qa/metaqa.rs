//! MetaQA question reader (`<question with [Topic Entity]>\t<ans1>|<ans2>` lines).
//!
//! The question text is kept as given, brackets included; the bracketed entity becomes the
//! topic entity. Answers are the `|`-separated names. The question type comes from the
//! `qa_<split>_qtype.txt` file aligned with the question file line by line (option
//! `qtype_file`, else that file beside the question file when present; read in step with the
//! questions, so memory stays one line of each). The hop count comes from option `hops`, else
//! from an `N-hop` component of the path; `level` is `N-hop` and the question id
//! `N-hop/<file>:<line>` (`<file>:<line>` when the hop count is unknown), so the same line
//! number in the 1-hop and 2-hop `test.txt` gives two ids.
//!
//! Bad lines are quarantined and reading goes on: no tab (`bad_line`), an empty question
//! (`missing_field`), invalid UTF-8 (`invalid_utf8`); a compressed input cut short ends with a
//! `truncated_input` record. Empty lines are skipped.

use std::io::BufRead;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use distillery_core::spec::FormatOptions;
use distillery_core::{Record, RecordSink};

use super::common::{Qa, is_data_error};
use crate::input::open_decompressed;
use crate::{IngestError, InputCtx};

const DATASET: &str = "metaqa";

/// Reads a MetaQA question file.
pub fn read(ctx: &InputCtx<'_>, sink: &mut dyn RecordSink) -> Result<(), IngestError> {
    let (hops_opt, qtype_opt) = match ctx.options {
        FormatOptions::MetaQa(o) => (o.hops, o.qtype_file.clone()),
        _ => (None, None),
    };
    let hops = hops_opt.or_else(|| hops_from_path(&ctx.location));
    let mut qa = Qa::new(ctx, DATASET, sink);
    let qtype_location = match qtype_opt {
        Some(q) => Some(q),
        None => {
            let q = ctx
                .opener
                .sibling(&ctx.location, &format!("qa_{}_qtype.txt", qa.split));
            ctx.opener.exists(&q).then_some(q)
        }
    };
    let mut qtypes = match &qtype_location {
        Some(l) => Some(open_decompressed(ctx.opener, l, Arc::new(AtomicU64::new(0)))?.0),
        None => None,
    };
    let mut qtype_buf = Vec::new();
    let mut lines = crate::kb::ByteLines::new(ctx.open()?).limit(ctx.options.record_limit().0);
    loop {
        let line = match lines.next_line() {
            Ok(Some(line)) => line,
            Ok(None) => break,
            Err(e) if is_data_error(&e) => {
                let (offset, number) = lines.position();
                let line_no = number.unwrap_or(1) - 1;
                let q = qa
                    .quarantine_record(
                        "truncated_input",
                        format!(
                            "reading stopped after line {line_no}: {e}; everything before it was kept"
                        ),
                        b"",
                    )
                    .at_byte(offset)
                    .at_line(line_no + 1);
                qa.quarantine(q)?;
                break;
            }
            Err(e) => return Err(IngestError::io(&ctx.location, e)),
        };
        let (start, line_no) = (line.offset, line.number.unwrap_or(0));
        let qtype = match &mut qtypes {
            Some(r) => {
                qtype_buf.clear();
                r.read_until(b'\n', &mut qtype_buf)
                    .map_err(|e| IngestError::io(qtype_location.as_deref().unwrap_or(""), e))?;
                let t = String::from_utf8_lossy(&qtype_buf).trim().to_string();
                (!t.is_empty()).then_some(t)
            }
            None => None,
        };
        let buf = line.bytes;
        if line.oversized() {
            let (limit, option) = ctx.options.record_limit();
            let q = qa
                .quarantine_record(
                    "record_too_large",
                    format!(
                        "line of {} bytes is over the limit of {limit} bytes; it was read \
                         past, not parsed (raise the reader option `{option}` if it is a real \
                         record)",
                        line.len
                    ),
                    buf,
                )
                .at_byte(start)
                .at_line(line_no);
            qa.quarantine(q)?;
            continue;
        }
        let bad = |reason: &str, detail: String| {
            qa.quarantine_record(reason, detail, buf)
                .at_byte(start)
                .at_line(line_no)
        };
        let line = match std::str::from_utf8(buf) {
            Ok(l) => l,
            Err(e) => {
                let q = bad(
                    "invalid_utf8",
                    format!("invalid UTF-8 at byte {} of the line", e.valid_up_to()),
                );
                qa.quarantine(q)?;
                continue;
            }
        };
        if line.trim().is_empty() {
            continue;
        }
        let Some((question, answers)) = line.split_once('\t') else {
            let q = bad(
                "bad_line",
                "no tab between the question and its answers".into(),
            );
            qa.quarantine(q)?;
            continue;
        };
        if question.trim().is_empty() {
            let q = bad("missing_field", "empty question".into());
            qa.quarantine(q)?;
            continue;
        }
        let question_id = match hops {
            Some(h) => format!("{h}-hop/{}:{line_no}", ctx.source),
            None => format!("{}:{line_no}", ctx.source),
        };
        let mut q = qa.question(&question_id, question.to_string());
        q.answers = answers
            .split('|')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(str::to_string)
            .collect();
        q.topic_entities = topic_entity(question).into_iter().collect();
        q.question_type = qtype;
        q.level = hops.map(|h| format!("{h}-hop"));
        qa.emit(Record::Question(q))?;
    }
    Ok(())
}

/// The text of the first `[...]` of a question.
fn topic_entity(question: &str) -> Option<String> {
    let a = question.find('[')?;
    let b = question[a + 1..].find(']')? + a + 1;
    Some(question[a + 1..b].to_string())
}

/// The hop count named by an `N-hop` path component.
fn hops_from_path(location: &str) -> Option<u32> {
    location
        .split(['/', '\\'])
        .rev()
        .find_map(|c| c.strip_suffix("-hop")?.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use distillery_core::VecSink;
    use distillery_core::spec::{Format, MetaQaOptions};

    #[test]
    fn parses_entities_and_hops() {
        assert_eq!(
            topic_entity("what does [Grégoire Colin] appear in").as_deref(),
            Some("Grégoire Colin")
        );
        assert_eq!(topic_entity("no entity"), None);
        assert_eq!(
            hops_from_path("/d/MetaQA/3-hop/vanilla/qa_dev.txt"),
            Some(3)
        );
        assert_eq!(hops_from_path("/d/qa_dev.txt"), None);
    }

    #[test]
    fn options_and_bad_lines() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("qa_dev.txt");
        let mut bytes = b"who wrote [A]\tX|Y\r\nno tab here\n\n".to_vec();
        bytes.extend_from_slice(b"bad \xff [B]\tZ\n\tonly answers\nlast [C]\tW");
        std::fs::write(&p, bytes).unwrap();
        let t = dir.path().join("types.txt");
        std::fs::write(&t, "t1\nt2\nt3\nt4\nt5\nt6\n").unwrap();
        let o = FormatOptions::MetaQa(MetaQaOptions {
            hops: Some(2),
            qtype_file: Some(t.to_str().unwrap().to_string()),
            ..Default::default()
        });
        let ctx = InputCtx::local(p.to_str().unwrap(), &o);
        let mut s = VecSink::default();
        crate::read_input(Format::MetaQa, &ctx, &mut s).unwrap();
        let q = s.questions();
        assert_eq!(q.len(), 2);
        assert_eq!(q[0].question, "who wrote [A]");
        assert_eq!(q[0].answers, vec!["X", "Y"]);
        assert_eq!(q[0].topic_entities, vec!["A"]);
        assert_eq!(q[0].question_id, "2-hop/qa_dev.txt:1");
        assert_eq!(q[0].level.as_deref(), Some("2-hop"));
        assert_eq!(q[0].question_type.as_deref(), Some("t1"));
        assert_eq!(q[1].question_type.as_deref(), Some("t6"), "aligned by line");
        assert_eq!(q[1].split, "dev");
        let bad: Vec<_> = s
            .quarantine()
            .iter()
            .map(|r| (r.reason.clone(), r.line))
            .collect();
        assert_eq!(
            bad,
            vec![
                ("bad_line".to_string(), Some(2)),
                ("invalid_utf8".to_string(), Some(4)),
                ("missing_field".to_string(), Some(5)),
            ]
        );
    }
}
