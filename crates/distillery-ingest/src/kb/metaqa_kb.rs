//! `metaqa-kb`: the MetaQA movie KB (`kb.txt`), `subject|relation|object` lines, into triples.
//!
//! Entities are their names: `subject`/`object` hold the names and so do
//! `subject_name`/`object_name`; `object_kind` is `entity`. A line that does not split into
//! exactly three non-empty `|`-separated fields is quarantined as `bad_kb_line` rather than
//! guessed at (a name holding `|` would make the split ambiguous; the real KB has none).
//! Blank lines are skipped.

use distillery_core::id::stable_id;
use distillery_core::{Record, RecordSink, Triple};

use super::{ByteLines, bad_line, truncated, utf8_line};
use crate::{IngestError, InputCtx};

const DATASET: &str = "metaqa-kb";

/// Reads a MetaQA KB file.
pub fn read(ctx: &InputCtx<'_>, sink: &mut dyn RecordSink) -> Result<(), IngestError> {
    let mut lines = ByteLines::new(ctx.open()?).limit(ctx.options.record_limit().0);
    loop {
        let line = match lines.next_line() {
            Ok(Some(l)) => l,
            Ok(None) => break,
            Err(e) => {
                let (offset, number) = lines.position();
                sink.emit(truncated(DATASET, ctx, e, offset, number)?)?;
                break;
            }
        };
        let Some(text) = utf8_line(DATASET, ctx, &line, sink)? else {
            continue;
        };
        if text.trim().is_empty() {
            continue;
        }
        let mut parts = text.split('|');
        let (Some(s), Some(p), Some(o), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            let n = text.split('|').count();
            let detail = format!("expected 3 '|'-separated fields, found {n}");
            sink.emit(bad_line(DATASET, ctx, "bad_kb_line", detail, &line))?;
            continue;
        };
        let (s, p, o) = (s.trim(), p.trim(), o.trim());
        if s.is_empty() || p.is_empty() || o.is_empty() {
            sink.emit(bad_line(DATASET, ctx, "bad_kb_line", "empty field", &line))?;
            continue;
        }
        sink.emit(Record::Triple(Triple {
            id: stable_id(&[DATASET, &ctx.source, s, p, o, "", ""]),
            dataset: DATASET.to_string(),
            source: ctx.source.clone(),
            subject: s.to_string(),
            predicate: p.to_string(),
            object: o.to_string(),
            object_kind: "entity".to_string(),
            subject_name: Some(s.to_string()),
            object_name: Some(o.to_string()),
            line: line.number,
            ..Triple::default()
        }))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use distillery_core::VecSink;
    use distillery_core::spec::{Format, FormatOptions};

    #[test]
    fn reads_lines_and_quarantines_bad_ones() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("kb.txt");
        std::fs::write(
            &p,
            "Kismet|directed_by|William Dieterle\nA|b\n\nX|y|z|w\nKismet|release_year|1944\n|r|o\n",
        )
        .unwrap();
        let options = FormatOptions::default_for(Format::MetaQaKb);
        let ctx = InputCtx::local(p.to_str().unwrap(), &options);
        let mut sink = VecSink::default();
        read(&ctx, &mut sink).unwrap();
        let t = sink.triples();
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].subject_name.as_deref(), Some("Kismet"));
        assert_eq!(t[0].object_name.as_deref(), Some("William Dieterle"));
        assert_eq!(t[1].line, Some(5));
        let q = sink.quarantine();
        assert_eq!(
            q.iter().map(|q| q.line.unwrap()).collect::<Vec<_>>(),
            vec![2, 4, 6]
        );
        assert!(q.iter().all(|q| q.reason == "bad_kb_line"));
        assert_eq!(q[0].detail, "expected 3 '|'-separated fields, found 2");
    }
}
