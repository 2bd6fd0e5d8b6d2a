//! `wikiofgraph`: the WikiOFGraph text-to-triples corpus (daehuikim/WikiOFGraph; RAS, seed
//! 002, trains its text-to-triple extractor on it), JSON lines
//! `{"triplet": "(<S> s| <P> p| <O> o), ...", "text": "..."}` (gzip, bzip2, zstd or plain; a JSON
//! array of the same objects is read too).
//!
//! Per record, one [`Document`] (the text, sentences found by the shared splitter, the title
//! the first triple's subject) and one [`Triple`] per item of `triplet`, in order, each with
//! `document_id` set and its support the whole text (`start` 0, `end` its length in chars):
//! the pairs RAS's extractor learns from, which the `text2triple` stage turns into SFT
//! samples. Items are read in RAS's own form (`(S> s| P> p| O> o)`) as well as WikiOFGraph's;
//! the document id covers the text and the `triplet`, and a record repeated whole is written
//! once; a record whose `triplet` does not read back as the same string in RAS's form (an item
//! without the three markers, a stray separator) is quarantined as `bad_triplet` with the
//! first item that does not parse, so a training target is never silently cut. A record
//! without `text` or `triplet` is `missing_field`; empty ones are `bad_value`.

use distillery_core::id::stable_id;
use distillery_core::ras_form;
use distillery_core::{Record, RecordSink, Triple, char_len};
use serde::Deserialize;

use crate::qa::common::{ItemError, Qa, URI_ID_HEX, bad_value};
use crate::{IngestError, InputCtx};

const DATASET: &str = "wikiofgraph";

#[derive(Deserialize)]
struct Raw {
    triplet: String,
    text: String,
}

/// Reads a WikiOFGraph JSON-lines file.
pub fn read(ctx: &InputCtx<'_>, sink: &mut dyn RecordSink) -> Result<(), IngestError> {
    let mut qa = Qa::new(ctx, DATASET, sink);
    qa.for_each_json(|qa, r: Raw, raw| {
        if r.text.trim().is_empty() {
            return Err(bad_value("empty `text`"));
        }
        let triples = triples_of(&r.triplet)?;
        let title = triples[0][0].clone();
        let mut doc = qa.document_from_text(&title, r.text);
        // Two records with one text but other triples are two documents; a record repeated
        // whole is written once.
        doc.id = stable_id(&[DATASET, "doc", &title, &doc.text, &r.triplet]);
        doc.uri = format!("{DATASET}:{title}#{}", &doc.id[..URI_ID_HEX]);
        let (doc_id, end) = (doc.id.clone(), char_len(&doc.text));
        let line = qa.numbered().then_some(raw.line);
        if !qa.emit_once(Record::Document(doc))? {
            return Ok(());
        }
        for (ord, [s, p, o]) in triples.into_iter().enumerate() {
            let id = stable_id(&[DATASET, &doc_id, &ord.to_string(), &s, &p, &o]);
            qa.emit(Record::Triple(Triple {
                id,
                dataset: DATASET.to_string(),
                source: ctx.source.clone(),
                subject: s,
                predicate: p,
                object: o,
                object_kind: "entity".to_string(),
                document_id: Some(doc_id.clone()),
                start: Some(0),
                end: Some(end),
                line,
                ..Triple::default()
            }))?;
        }
        Ok(())
    })
}

/// The items of a `triplet` string, which must read back as the same string in RAS's form.
fn triples_of(triplet: &str) -> Result<Vec<[String; 3]>, ItemError> {
    let want = ras_form::normalise(triplet.trim());
    if want.is_empty() {
        return Err(bad_value("empty `triplet`"));
    }
    let triples = ras_form::parse(&want);
    // A part holding a marker is two items run together (`c),(S> d| ...`).
    let clean = |x: &String| !["(S> ", "| P> ", "| O> "].iter().any(|m| x.contains(m));
    if ras_form::render(&triples) == want && triples.iter().flatten().all(clean) {
        return Ok(triples);
    }
    let bad = want
        .split("), ")
        .find(|item| {
            let t = ras_form::parse(item);
            t.len() != 1 || !t.iter().flatten().all(clean)
        })
        .unwrap_or(&want);
    Err(ItemError::Bad {
        reason: "bad_triplet",
        detail: format!(
            "{} item(s) read, but they do not render back to the target; first item not in the \
             (S> s| P> p| O> o) form: {:?}",
            triples.len(),
            truncate(bad, 200)
        ),
    })
}

fn truncate(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wikiofgraph_items_read_in_both_forms() {
        let t =
            triples_of("(<S> Anarchism| <P> type| <O> political philosophy), (S> A| P> b| O> c)")
                .unwrap();
        assert_eq!(
            t,
            [
                ["Anarchism", "type", "political philosophy"].map(String::from),
                ["A", "b", "c"].map(String::from)
            ]
        );
    }

    #[test]
    fn a_triplet_that_does_not_render_back_is_refused() {
        for bad in [
            "(<S> a| <P> b| <O> c), (x y z)",
            "(<S> a| <P> b| <O> c),(<S> d| <P> e| <O> f)",
            "no triples here",
            "  ",
        ] {
            assert!(triples_of(bad).is_err(), "{bad}");
        }
        let Err(ItemError::Bad { reason, detail }) = triples_of("(<S> a| <P> b| <O> c), (x y z)")
        else {
            panic!("not refused");
        };
        assert_eq!(reason, "bad_triplet");
        assert!(detail.contains("(x y z)"), "{detail}");
    }
}
