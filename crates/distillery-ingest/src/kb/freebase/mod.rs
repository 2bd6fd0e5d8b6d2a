//! `freebase`: the `freebase-rdf-latest` dump, N-Triples lines `<s>\t<p>\t<o>\t.` (tabs or
//! spaces; gzip, bzip2, zstd or plain), into triples and (from `type.object.name`) entities.
//!
//! IRIs in `http://rdf.freebase.com/ns/` are shortened to their local name (`m.0abc`,
//! `type.object.name`); other IRIs are kept in full. Objects are `entity` (an `ns:m.`/`ns:g.`
//! node), `iri` (any other IRI), `blank` (`_:x`) or `literal` (with `lang` from `@en` and
//! `datatype` from `^^<...>`, the XML Schema namespace written `xsd:`). String escapes (`\"`,
//! `\\`, `\n`, `\t`, `\uXXXX`, `\UXXXXXXXX`, ...) are decoded.
//! Edges to an `entity` are `triples`; the others (literal values, other IRIs, blank nodes)
//! are kept apart as `literals` ([`Record::edge`]), so a walk over the graph's entities never
//! reads the values.
//!
//! The English filter of Hydra/PoG (`english_only`, default on) keeps a line only when its
//! subject is `ns:m.` or `ns:g.` and its object is an `ns:` IRI, an untagged or `@en` literal,
//! or a typed literal. Dropped lines are not errors: they are counted and the counts logged at
//! debug level. With `names` (default on) a kept `type.object.name` literal (`@en` or untagged)
//! also becomes an [`Entity`] of its subject with that `label`, and a `common.topic.alias`
//! literal an [`Entity`] row of its own with that one alias and no label (id from the key and
//! the alias): a streamed dump cannot join a subject's statements, so the KG index joins them
//! by key (`distillery_index::kg`).
//!
//! The line parser is hand-written rather than `oxttl`: the dump is a strict one-statement-a-
//! line format of ~3 billion lines, and each bad line must become one quarantine record with
//! its line number, byte offset and raw bytes, after which reading goes on. `oxttl` reports
//! errors by position in its own token stream (giving the raw line back means tracking line
//! boundaries beside it anyway), and it builds owned terms for every statement, including the
//! ones the English filter drops. Here each line is read as bytes into one reused buffer,
//! validated as UTF-8 once, and split with `memchr` into borrowed slices; nothing is allocated
//! for a dropped line, and strings are unescaped only for kept triples. The parser
//! follows the N-Triples grammar (W3C Recommendation 2014): absolute IRIREFs without the
//! excluded characters and with only `\u`/`\U` escapes, blank node labels, literals with
//! ECHAR/UCHAR escapes, language tags `[a-zA-Z]+(-[a-zA-Z0-9]+)*`, datatype IRIs, the final
//! `.` and an optional trailing comment. Blank and comment-only lines are skipped.
//!
//! A plain dump can be read in byte ranges (the lines starting in the range, positions by byte
//! offset only: see [`crate::ByteRange`]); a compressed one is read whole, decompressed on one
//! thread and parsed on the others (`crate::parlines`), with the same records in the same order.

mod ntriples;
#[cfg(test)]
mod tests;

use std::io::BufRead;

use distillery_core::id::{StableIdBuilder, stable_id};
use distillery_core::spec::{FormatOptions, FreebaseOptions};
use distillery_core::{Entity, Record, RecordSink, Triple};

use self::ntriples::{Statement, Term, parse_line, unescape};
use super::{ByteLines, LineRef, bad_line, truncated, utf8_line};
use crate::input::{Compression, open_decompressed};
use crate::parlines::{self, ChunkSink, LineChunk};
use crate::range::{LineRange, ReadMode, Shape, read_mode};
use crate::{IngestError, InputCtx};

const DATASET: &str = "freebase";
/// The Freebase namespace (`ns:`).
pub const NS: &str = "http://rdf.freebase.com/ns/";
const XSD: &str = "http://www.w3.org/2001/XMLSchema#";
const NAME_PREDICATE: &str = "http://rdf.freebase.com/ns/type.object.name";
const ALIAS_PREDICATE: &str = "http://rdf.freebase.com/ns/common.topic.alias";

/// Line counts of one read, logged at debug level when it ends.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Counts {
    kept: u64,
    dropped: u64,
    entities: u64,
    quarantined: u64,
    skipped: u64,
}

impl Counts {
    fn add(&mut self, o: Counts) {
        self.kept += o.kept;
        self.dropped += o.dropped;
        self.entities += o.entities;
        self.quarantined += o.quarantined;
        self.skipped += o.skipped;
    }
}

/// Reads a Freebase N-Triples dump: the lines of its byte range when it has one (see
/// [`crate::ByteRange`]), else the whole file, a compressed one decompressed on one thread and
/// parsed on the others.
pub fn read(ctx: &InputCtx<'_>, sink: &mut dyn RecordSink) -> Result<(), IngestError> {
    let default = FreebaseOptions::default();
    let opts = match ctx.options {
        FormatOptions::Freebase(o) => o,
        _ => &default,
    };
    let line_ctx = LineCtx::new(ctx, opts);
    let mut n = Counts::default();
    match read_mode(Shape::NTriples, ctx)? {
        ReadMode::Lines(range) => {
            let (reader, first) = LineRange::open(ctx, range)?;
            let lines = ByteLines::ranged(reader, first).limit(opts.max_line_bytes);
            read_lines(&line_ctx, lines, &mut n, sink)?;
        }
        _ => {
            let counter = ctx.bytes_read.clone();
            let (mut reader, compression) = open_decompressed(ctx.opener, &ctx.location, counter)?;
            let parsers = parlines::parsers();
            if compression != Compression::None && parsers > 0 {
                read_parallel(&line_ctx, &mut *reader, parsers, &mut n, sink)?;
            } else {
                let lines = ByteLines::new(reader).limit(opts.max_line_bytes);
                read_lines(&line_ctx, lines, &mut n, sink)?;
            }
        }
    }
    tracing::debug!(
        location = %ctx.location,
        kept = n.kept,
        dropped_by_english_filter = n.dropped,
        entities = n.entities,
        quarantined = n.quarantined,
        blank_or_comment = n.skipped,
        "freebase read done"
    );
    Ok(())
}

/// Reads lines one after the other on this thread.
fn read_lines<R: BufRead>(
    lc: &LineCtx<'_>,
    mut lines: ByteLines<R>,
    n: &mut Counts,
    sink: &mut dyn RecordSink,
) -> Result<(), IngestError> {
    let mut row = lc.row();
    loop {
        match lines.next_line() {
            Ok(Some(line)) => read_line(lc, &line, n, sink, &mut row)?,
            Ok(None) => return Ok(()),
            Err(e) => {
                let (offset, number) = lines.position();
                sink.emit(truncated(DATASET, lc.ctx, e, offset, number)?)?;
                n.quarantined += 1;
                return Ok(());
            }
        }
    }
}

/// Decompresses on one thread and parses chunks of lines on `parsers` others.
fn read_parallel(
    lc: &LineCtx<'_>,
    reader: &mut (dyn BufRead + Send),
    parsers: usize,
    n: &mut Counts,
    sink: &mut dyn RecordSink,
) -> Result<(), IngestError> {
    let shards = sink.shards();
    let parse = |chunk: LineChunk| {
        let mut out = ChunkSink::new(shards);
        let mut counts = Counts::default();
        let mut row = lc.row();
        for line in chunk.lines() {
            read_line(lc, &line, &mut counts, &mut out, &mut row)?;
        }
        Ok::<_, IngestError>((out.finish()?, counts))
    };
    let cut = parlines::run(reader, parsers, lc.opts.max_line_bytes, parse, |parsed| {
        let (parsed, counts) = parsed?;
        n.add(counts);
        Ok(parsed.emit(sink)?)
    })?;
    if let Some(cut) = cut {
        sink.emit(truncated(
            DATASET,
            lc.ctx,
            cut.error,
            cut.offset,
            Some(cut.line),
        )?)?;
        n.quarantined += 1;
    }
    Ok(())
}

/// What every line of one read shares.
struct LineCtx<'a> {
    ctx: &'a InputCtx<'a>,
    opts: &'a FreebaseOptions,
    /// A triple id's first two parts (dataset, source), hashed once.
    triple_ids: StableIdBuilder,
}

impl<'a> LineCtx<'a> {
    fn new(ctx: &'a InputCtx<'a>, opts: &'a FreebaseOptions) -> LineCtx<'a> {
        let mut triple_ids = StableIdBuilder::new();
        triple_ids.part(DATASET).part(&ctx.source);
        LineCtx {
            ctx,
            opts,
            triple_ids,
        }
    }

    /// The row a reader fills line after line ([`fill_triple`]): what every row of the
    /// input shares is set once, the strings keep their buffers.
    fn row(&self) -> Triple {
        Triple {
            dataset: DATASET.to_string(),
            source: self.ctx.source.clone(),
            ..Triple::default()
        }
    }
}

/// The records of one line; `row` is the reader's reused edge row ([`LineCtx::row`]).
fn read_line(
    lc: &LineCtx<'_>,
    line: &LineRef<'_>,
    n: &mut Counts,
    sink: &mut dyn RecordSink,
    row: &mut Triple,
) -> Result<(), IngestError> {
    let (ctx, opts) = (lc.ctx, lc.opts);
    let Some(text) = utf8_line(DATASET, ctx, line, sink)? else {
        n.quarantined += 1;
        return Ok(());
    };
    let st = match parse_line(text) {
        Ok(Some(st)) => st,
        Ok(None) => {
            n.skipped += 1;
            return Ok(());
        }
        Err(e) => {
            sink.emit(bad_line(DATASET, ctx, "bad_ntriples", e.to_string(), line))?;
            n.quarantined += 1;
            return Ok(());
        }
    };
    if opts.english_only && !english(&st) {
        n.dropped += 1;
        return Ok(());
    }
    n.kept += 1;
    row.subject.clear();
    push_term_key(&st.subject, &mut row.subject);
    if opts.names
        && let Some(e) = name_entity(ctx, &st, &row.subject)
    {
        sink.emit(Record::Entity(e))?;
        n.entities += 1;
    }
    fill_triple(lc, &st, line.number, row);
    sink.emit_edge(row)?;
    Ok(())
}

/// Fills `row` ([`LineCtx::row`], its subject already the statement's [`push_term_key`])
/// with the rest of the statement's triple, reusing its strings' buffers.
fn fill_triple(lc: &LineCtx<'_>, st: &Statement<'_>, line: Option<u64>, row: &mut Triple) {
    set(&mut row.predicate, short(&unescape(st.predicate)));
    row.object.clear();
    let kind = match st.object {
        Term::Iri(raw) => {
            let iri = unescape(raw);
            row.object.push_str(short(&iri));
            (row.lang, row.datatype) = (None, None);
            if is_node(&iri) { "entity" } else { "iri" }
        }
        Term::Blank(label) => {
            row.object.push_str("_:");
            row.object.push_str(label);
            (row.lang, row.datatype) = (None, None);
            "blank"
        }
        Term::Literal {
            value,
            lang,
            datatype,
        } => {
            row.object.push_str(&unescape(value));
            match lang {
                Some(l) => set(row.lang.get_or_insert_default(), l),
                None => row.lang = None,
            }
            match datatype {
                Some(d) => {
                    let out = row.datatype.get_or_insert_default();
                    out.clear();
                    push_short_datatype(&unescape(d), out);
                }
                None => row.datatype = None,
            }
            "literal"
        }
    };
    set(&mut row.object_kind, kind);
    // stable_id(&[DATASET, source, subject, predicate, object, lang, datatype])
    let mut ids = lc.triple_ids.clone();
    ids.part(&row.subject)
        .part(&row.predicate)
        .part(&row.object)
        .part(row.lang.as_deref().unwrap_or(""))
        .part(row.datatype.as_deref().unwrap_or(""));
    ids.finish_into(&mut row.id);
    row.line = line;
}

/// `out` made `s`, in its own buffer.
fn set(out: &mut String, s: &str) {
    out.clear();
    out.push_str(s);
}

/// The entity row of a `type.object.name` (its label) or `common.topic.alias` (one alias)
/// statement with an `@en` or untagged literal; `key` is the subject's [`push_term_key`].
fn name_entity(ctx: &InputCtx<'_>, st: &Statement<'_>, key: &str) -> Option<Entity> {
    let alias = match st.predicate {
        NAME_PREDICATE => false,
        ALIAS_PREDICATE => true,
        _ => return None,
    };
    let Term::Literal {
        value,
        lang,
        datatype: None,
    } = st.object
    else {
        return None;
    };
    if lang.is_some_and(|l| !l.eq_ignore_ascii_case("en")) {
        return None;
    }
    let text = unescape(value).into_owned();
    let (id, label, aliases) = if alias {
        let id = stable_id(&[DATASET, "alias", key, lang.unwrap_or(""), &text]);
        (id, None, vec![text])
    } else {
        let id = stable_id(&[DATASET, "entity", key, lang.unwrap_or("")]);
        (id, Some(text), Vec::new())
    };
    Some(Entity {
        id,
        dataset: DATASET.to_string(),
        source: ctx.source.clone(),
        key: key.to_string(),
        lang: lang.map(str::to_string),
        label,
        description: None,
        aliases,
        wikipedia: None,
    })
}

/// The English filter of Hydra/PoG (see the module doc).
fn english(st: &Statement<'_>) -> bool {
    let subject_ok = matches!(st.subject, Term::Iri(s) if is_node(s));
    subject_ok
        && match st.object {
            Term::Iri(o) => o.starts_with(NS),
            Term::Literal { lang: None, .. } => true,
            Term::Literal { lang: Some(l), .. } => l.eq_ignore_ascii_case("en"),
            Term::Blank(_) => false,
        }
}

/// Whether an IRI is a Freebase node: `ns:m.` (a mid) or `ns:g.`.
fn is_node(iri: &str) -> bool {
    iri.strip_prefix(NS)
        .is_some_and(|l| l.starts_with("m.") || l.starts_with("g."))
}

/// An `ns:` IRI's local name, any other IRI in full.
fn short(iri: &str) -> &str {
    match iri.strip_prefix(NS) {
        Some(local) if !local.is_empty() => local,
        _ => iri,
    }
}

/// A datatype IRI, appended to `out`: `xsd:local` for XML Schema, the local name for `ns:`,
/// else in full.
fn push_short_datatype(iri: &str, out: &mut String) {
    match iri.strip_prefix(XSD) {
        Some(local) if !local.is_empty() => {
            out.push_str("xsd:");
            out.push_str(local);
        }
        _ => out.push_str(short(iri)),
    }
}

/// Subject key, appended to `out`: the shortened IRI, or `_:label`.
fn push_term_key(t: &Term<'_>, out: &mut String) {
    match *t {
        Term::Iri(raw) => out.push_str(short(&unescape(raw))),
        Term::Blank(label) => {
            out.push_str("_:");
            out.push_str(label);
        }
        Term::Literal { value, .. } => out.push_str(&unescape(value)),
    }
}
