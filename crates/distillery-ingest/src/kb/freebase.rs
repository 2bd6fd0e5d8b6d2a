//! `freebase`: the `freebase-rdf-latest` dump, N-Triples lines `<s>\t<p>\t<o>\t.` (tabs or
//! spaces; gzip, bzip2 or plain), into triples and (from `type.object.name`) entities.
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

use std::borrow::Cow;
use std::fmt;
use std::io::BufRead;

use distillery_core::id::{StableIdBuilder, stable_id};
use distillery_core::spec::{FormatOptions, FreebaseOptions};
use distillery_core::{Entity, Record, RecordSink, Triple, VecSink};
use memchr::{memchr, memchr3};

use super::{ByteLines, LineRef, bad_line, truncated, utf8_line};
use crate::input::{Compression, open_decompressed};
use crate::parlines::{self, LineChunk, Parsed};
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
    loop {
        match lines.next_line() {
            Ok(Some(line)) => read_line(lc, &line, n, sink)?,
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
        let mut out = VecSink::default();
        let mut counts = Counts::default();
        for line in chunk.lines() {
            read_line(lc, &line, &mut counts, &mut out)?;
        }
        Ok::<_, IngestError>((Parsed::new(out.records, shards)?, counts))
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
}

/// The records of one line.
fn read_line(
    lc: &LineCtx<'_>,
    line: &LineRef<'_>,
    n: &mut Counts,
    sink: &mut dyn RecordSink,
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
    if opts.names
        && let Some(e) = name_entity(ctx, &st)
    {
        sink.emit(Record::Entity(e))?;
        n.entities += 1;
    }
    sink.emit(Record::edge(triple(lc, &st, line.number)))?;
    Ok(())
}

/// The triple of a statement.
fn triple(lc: &LineCtx<'_>, st: &Statement<'_>, line: Option<u64>) -> Triple {
    let subject = term_key(&st.subject);
    let predicate = short(&unescape(st.predicate)).to_string();
    let (object, kind, lang, datatype) = match st.object {
        Term::Iri(raw) => {
            let iri = unescape(raw);
            let kind = if is_node(&iri) { "entity" } else { "iri" };
            (short(&iri).to_string(), kind, None, None)
        }
        Term::Blank(label) => (format!("_:{label}"), "blank", None, None),
        Term::Literal {
            value,
            lang,
            datatype,
        } => (
            unescape(value).into_owned(),
            "literal",
            lang.map(str::to_string),
            datatype.map(|d| short_datatype(&unescape(d))),
        ),
    };
    // stable_id(&[DATASET, source, subject, predicate, object, lang, datatype])
    let mut ids = lc.triple_ids.clone();
    ids.part(&subject)
        .part(&predicate)
        .part(&object)
        .part(lang.as_deref().unwrap_or(""))
        .part(datatype.as_deref().unwrap_or(""));
    let id = ids.finish();
    Triple {
        id,
        dataset: DATASET.to_string(),
        source: lc.ctx.source.clone(),
        subject,
        predicate,
        object,
        object_kind: kind.to_string(),
        lang,
        datatype,
        line,
        ..Triple::default()
    }
}

/// The entity row of a `type.object.name` (its label) or `common.topic.alias` (one alias)
/// statement with an `@en` or untagged literal.
fn name_entity(ctx: &InputCtx<'_>, st: &Statement<'_>) -> Option<Entity> {
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
    let key = term_key(&st.subject);
    let text = unescape(value).into_owned();
    let (id, label, aliases) = if alias {
        let id = stable_id(&[DATASET, "alias", &key, lang.unwrap_or(""), &text]);
        (id, None, vec![text])
    } else {
        let id = stable_id(&[DATASET, "entity", &key, lang.unwrap_or("")]);
        (id, Some(text), Vec::new())
    };
    Some(Entity {
        id,
        dataset: DATASET.to_string(),
        source: ctx.source.clone(),
        key,
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

/// A datatype IRI: `xsd:local` for XML Schema, the local name for `ns:`, else in full.
fn short_datatype(iri: &str) -> String {
    match iri.strip_prefix(XSD) {
        Some(local) if !local.is_empty() => format!("xsd:{local}"),
        _ => short(iri).to_string(),
    }
}

/// Subject key: the shortened IRI, or `_:label`.
fn term_key(t: &Term<'_>) -> String {
    match *t {
        Term::Iri(raw) => short(&unescape(raw)).to_string(),
        Term::Blank(label) => format!("_:{label}"),
        Term::Literal { value, .. } => unescape(value).into_owned(),
    }
}

/// One RDF term as it appears in the line (escapes not yet decoded).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Term<'a> {
    /// The text between `<` and `>`.
    Iri(&'a str),
    /// The label after `_:`.
    Blank(&'a str),
    Literal {
        /// The text between the quotes.
        value: &'a str,
        lang: Option<&'a str>,
        /// The datatype IRI's text between `<` and `>`.
        datatype: Option<&'a str>,
    },
}

/// One N-Triples statement, borrowed from its line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Statement<'a> {
    subject: Term<'a>,
    predicate: &'a str,
    object: Term<'a>,
}

/// A syntax error in a line: what and where (0-based byte column).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SyntaxError {
    column: usize,
    message: &'static str,
}

impl fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at column {}", self.message, self.column + 1)
    }
}

/// Parses one line: `Ok(None)` for a blank or comment-only line.
fn parse_line(line: &str) -> Result<Option<Statement<'_>>, SyntaxError> {
    let mut c = Cursor {
        s: line,
        b: line.as_bytes(),
        pos: 0,
    };
    c.skip_ws();
    if matches!(c.peek(), None | Some(b'#')) {
        return Ok(None);
    }
    let subject = match c.peek() {
        Some(b'<') => Term::Iri(c.iri()?),
        Some(b'_') => Term::Blank(c.blank()?),
        _ => return Err(c.err("expected an IRI or a blank node as subject")),
    };
    c.skip_ws();
    if c.peek() != Some(b'<') {
        return Err(c.err("expected an IRI as predicate"));
    }
    let predicate = c.iri()?;
    c.skip_ws();
    let object = match c.peek() {
        Some(b'<') => Term::Iri(c.iri()?),
        Some(b'_') => Term::Blank(c.blank()?),
        Some(b'"') => c.literal()?,
        _ => return Err(c.err("expected an IRI, a blank node or a literal as object")),
    };
    c.skip_ws();
    if c.peek() != Some(b'.') {
        return Err(c.err("expected '.' after the object"));
    }
    c.pos += 1;
    c.skip_ws();
    if !matches!(c.peek(), None | Some(b'#')) {
        return Err(c.err("unexpected text after '.'"));
    }
    Ok(Some(Statement {
        subject,
        predicate,
        object,
    }))
}

struct Cursor<'a> {
    s: &'a str,
    b: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.pos).copied()
    }

    fn err(&self, message: &'static str) -> SyntaxError {
        self.err_at(self.pos, message)
    }

    fn err_at(&self, column: usize, message: &'static str) -> SyntaxError {
        SyntaxError { column, message }
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.pos += 1;
        }
    }

    /// `<iri>` at `pos`; returns the text between the brackets.
    fn iri(&mut self) -> Result<&'a str, SyntaxError> {
        let start = self.pos + 1;
        let end = match memchr(b'>', &self.b[start..]) {
            Some(i) => start + i,
            None => return Err(self.err("unterminated IRI")),
        };
        let body = &self.b[start..end];
        // Nearly every IRI of the dump is in `ns:`, whose 27 bytes are valid and hold the
        // scheme: only the local name needs checking.
        let mut i = if body.starts_with(NS.as_bytes()) {
            NS.len()
        } else if has_scheme(body) {
            0
        } else {
            return Err(self.err_at(start, "relative IRI (N-Triples IRIs are absolute)"));
        };
        while i < body.len() {
            match IRI_BYTES[usize::from(body[i])] {
                IriByte::Plain => i += 1,
                IriByte::Escape => match hex_escape(&body[i..]) {
                    Some(n) => i += n,
                    None => return Err(self.err_at(start + i, "invalid escape in IRI")),
                },
                IriByte::Invalid => {
                    return Err(self.err_at(start + i, "invalid character in IRI"));
                }
            }
        }
        self.pos = end + 1;
        Ok(&self.s[start..end])
    }

    /// `_:label` at `pos`; returns the label.
    fn blank(&mut self) -> Result<&'a str, SyntaxError> {
        if self.b.get(self.pos + 1) != Some(&b':') {
            return Err(self.err("expected '_:' of a blank node"));
        }
        let start = self.pos + 2;
        let mut p = start;
        while let Some(&ch) = self.b.get(p) {
            if ch.is_ascii_alphanumeric() || matches!(ch, b'_' | b'-' | b'.') || ch >= 0x80 {
                p += 1;
            } else {
                break;
            }
        }
        // A label cannot end with '.': a trailing dot is the statement's terminator.
        while p > start && self.b[p - 1] == b'.' {
            p -= 1;
        }
        if p == start || matches!(self.b[start], b'-' | b'.') {
            return Err(self.err_at(start, "invalid blank node label"));
        }
        self.pos = p;
        Ok(&self.s[start..p])
    }

    /// `"literal"` with an optional `@lang` or `^^<datatype>` at `pos`.
    fn literal(&mut self) -> Result<Term<'a>, SyntaxError> {
        let start = self.pos + 1;
        let mut i = start;
        let end = loop {
            let Some(k) = memchr3(b'"', b'\\', b'\r', &self.b[i..]) else {
                return Err(self.err("unterminated literal"));
            };
            let j = i + k;
            match self.b[j] {
                b'"' => break j,
                b'\r' => return Err(self.err_at(j, "raw carriage return in literal")),
                _ => match self.b.get(j + 1) {
                    Some(b't' | b'b' | b'n' | b'r' | b'f' | b'"' | b'\'' | b'\\') => i = j + 2,
                    Some(b'u' | b'U') => match hex_escape(&self.b[j..]) {
                        Some(n) => i = j + n,
                        None => return Err(self.err_at(j, "invalid \\u escape in literal")),
                    },
                    _ => return Err(self.err_at(j, "invalid escape in literal")),
                },
            }
        };
        let value = &self.s[start..end];
        self.pos = end + 1;
        match self.peek() {
            Some(b'@') => {
                let ls = self.pos + 1;
                let mut p = ls;
                while self.b.get(p).is_some_and(u8::is_ascii_alphabetic) {
                    p += 1;
                }
                if p == ls {
                    return Err(self.err_at(ls, "empty language tag"));
                }
                while self.b.get(p) == Some(&b'-') {
                    let q = p + 1;
                    let mut r = q;
                    while self.b.get(r).is_some_and(u8::is_ascii_alphanumeric) {
                        r += 1;
                    }
                    if r == q {
                        return Err(self.err_at(q, "invalid language tag"));
                    }
                    p = r;
                }
                self.pos = p;
                Ok(Term::Literal {
                    value,
                    lang: Some(&self.s[ls..p]),
                    datatype: None,
                })
            }
            Some(b'^') => {
                if self.b.get(self.pos + 1) != Some(&b'^')
                    || self.b.get(self.pos + 2) != Some(&b'<')
                {
                    return Err(self.err("expected '^^<' of a datatype"));
                }
                self.pos += 2;
                let datatype = self.iri()?;
                Ok(Term::Literal {
                    value,
                    lang: None,
                    datatype: Some(datatype),
                })
            }
            _ => Ok(Term::Literal {
                value,
                lang: None,
                datatype: None,
            }),
        }
    }
}

/// What a byte is inside an IRIREF.
#[derive(Clone, Copy)]
enum IriByte {
    Plain,
    /// `\\`, which must start a `\\u`/`\\U` escape.
    Escape,
    /// Control characters, space and `<>"{}|^``.
    Invalid,
}

/// [`IriByte`] of every byte value, looked up once per byte of an IRI's local part.
const IRI_BYTES: [IriByte; 256] = {
    let mut t = [IriByte::Plain; 256];
    let mut b = 0;
    while b <= 0x20 {
        t[b] = IriByte::Invalid;
        b += 1;
    }
    let bad = b"<>\"{}|^`";
    let mut k = 0;
    while k < bad.len() {
        t[bad[k] as usize] = IriByte::Invalid;
        k += 1;
    }
    t[b'\\' as usize] = IriByte::Escape;
    t
};

/// Whether an IRI body starts with a scheme `[A-Za-z][A-Za-z0-9+.-]*:`.
fn has_scheme(body: &[u8]) -> bool {
    match body.first() {
        Some(c) if c.is_ascii_alphabetic() => {}
        _ => return false,
    }
    for &c in &body[1..] {
        match c {
            b':' => return true,
            c if c.is_ascii_alphanumeric() || matches!(c, b'+' | b'-' | b'.') => {}
            _ => return false,
        }
    }
    false
}

/// Length of a valid `\uXXXX` / `\UXXXXXXXX` escape (naming a Unicode scalar value) at the
/// start of `b`.
fn hex_escape(b: &[u8]) -> Option<usize> {
    let digits = match b.get(1) {
        Some(b'u') => 4,
        Some(b'U') => 8,
        _ => return None,
    };
    let hex = b.get(2..2 + digits)?;
    decode_hex(hex).map(|_| 2 + digits)
}

fn decode_hex(hex: &[u8]) -> Option<char> {
    let mut v: u32 = 0;
    for &h in hex {
        v = v * 16 + (h as char).to_digit(16)?;
    }
    char::from_u32(v)
}

/// Decodes the N-Triples escapes of a validated literal or IRI (borrowed when it has none).
fn unescape(raw: &str) -> Cow<'_, str> {
    let Some(first) = memchr(b'\\', raw.as_bytes()) else {
        return Cow::Borrowed(raw);
    };
    let b = raw.as_bytes();
    let mut out = String::with_capacity(raw.len());
    let mut done = 0;
    let mut i = first;
    while i < b.len() {
        if b[i] != b'\\' {
            i += 1;
            continue;
        }
        out.push_str(&raw[done..i]);
        let (ch, n) = match b.get(i + 1) {
            Some(b't') => ('\t', 2),
            Some(b'b') => ('\u{8}', 2),
            Some(b'n') => ('\n', 2),
            Some(b'r') => ('\r', 2),
            Some(b'f') => ('\u{c}', 2),
            Some(b'"') => ('"', 2),
            Some(b'\'') => ('\'', 2),
            Some(b'\\') => ('\\', 2),
            Some(b'u') => (hex_char(b, i + 2, 4), 6),
            Some(b'U') => (hex_char(b, i + 2, 8), 10),
            // Unreachable for validated input; kept literally.
            _ => ('\\', 1),
        };
        out.push(ch);
        i = (i + n).min(b.len());
        done = i;
    }
    out.push_str(&raw[done..]);
    Cow::Owned(out)
}

fn hex_char(b: &[u8], at: usize, digits: usize) -> char {
    b.get(at..at + digits)
        .and_then(decode_hex)
        .unwrap_or('\u{FFFD}')
}

#[cfg(test)]
mod tests {
    use super::*;
    use distillery_core::VecSink;
    use std::io::Write;

    fn parse(s: &str) -> Statement<'_> {
        parse_line(s).unwrap().unwrap()
    }

    #[test]
    fn parses_tab_and_space_separated_lines() {
        let t = "<http://rdf.freebase.com/ns/m.01>\t<http://rdf.freebase.com/ns/type.object.name>\t\"Blade\"@en\t.";
        let st = parse(t);
        assert_eq!(st.subject, Term::Iri("http://rdf.freebase.com/ns/m.01"));
        assert_eq!(st.predicate, NAME_PREDICATE);
        assert_eq!(
            st.object,
            Term::Literal {
                value: "Blade",
                lang: Some("en"),
                datatype: None
            }
        );
        let s = "<http://a.example/s> <http://a.example/p> \"1\"^^<http://www.w3.org/2001/XMLSchema#int> . # c";
        let st = parse(s);
        assert_eq!(
            st.object,
            Term::Literal {
                value: "1",
                lang: None,
                datatype: Some("http://www.w3.org/2001/XMLSchema#int")
            }
        );
        // No whitespace needed between terms; blank nodes; a label before the final dot.
        let st = parse("_:b1<http://a.example/p>_:b2.");
        assert_eq!(st.subject, Term::Blank("b1"));
        assert_eq!(st.object, Term::Blank("b2"));
        assert_eq!(parse("<http://x/s> <http://x/p> \"v\"@en-GB.").object, {
            Term::Literal {
                value: "v",
                lang: Some("en-GB"),
                datatype: None,
            }
        });
    }

    #[test]
    fn blank_and_comment_lines_are_skipped() {
        assert_eq!(parse_line(""), Ok(None));
        assert_eq!(parse_line(" \t "), Ok(None));
        assert_eq!(parse_line("# a comment"), Ok(None));
    }

    #[test]
    fn rejects_broken_lines() {
        for bad in [
            "<http://x/s> <http://x/p> <http://x/o>",
            "<http://x/s> <http://x/p> \"unterminated .",
            "<http://x/s> <http://x/p <http://x/o> .",
            "<http://x/s> \"lit\" <http://x/o> .",
            "<relative> <http://x/p> <http://x/o> .",
            "<http://x/s> <http://x/p> <http://x/o o> .",
            "<http://x/s> <http://x/p> \"a\\qb\" .",
            "<http://x/s> <http://x/p> \"a\\u12\" .",
            "<http://x/s> <http://x/p> \"a\\uD800\" .",
            "<http://x/s> <http://x/p> \"a\"@ .",
            "<http://x/s> <http://x/p> \"a\"@en- .",
            "<http://x/s> <http://x/p> \"a\"^<http://x/t> .",
            "<http://x/s> <http://x/p> <http://x/o> . extra",
            "<http://x/s> <http://x/p> _: .",
            "\"s\" <http://x/p> <http://x/o> .",
            "<http://x/s>\t<http://x/p>\t\"a\rb\"\t.",
        ] {
            assert!(parse_line(bad).is_err(), "accepted {bad:?}");
        }
        let e = parse_line("<http://x/s> <http://x/p> <http://x/o>").unwrap_err();
        assert_eq!(e.to_string(), "expected '.' after the object at column 39");
    }

    #[test]
    fn unescapes_strings_and_iris() {
        assert_eq!(unescape("plain"), Cow::Borrowed("plain"));
        assert_eq!(
            unescape(r#"a\"b\\c\nd\te\u00e9\U0001F600"#),
            "a\"b\\c\nd\te\u{e9}\u{1F600}"
        );
        let st = parse(r#"<http://x/s\u0041> <http://x/p> "q\"uote" ."#);
        assert_eq!(term_key(&st.subject), "http://x/sA");
    }

    #[test]
    fn english_filter_matches_hydra() {
        let keep = [
            "<http://rdf.freebase.com/ns/m.01> <http://rdf.freebase.com/ns/p> <http://rdf.freebase.com/ns/m.02> .",
            "<http://rdf.freebase.com/ns/g.11> <http://rdf.freebase.com/ns/p> <http://rdf.freebase.com/ns/type.x> .",
            "<http://rdf.freebase.com/ns/m.01> <http://rdf.freebase.com/ns/p> \"x\" .",
            "<http://rdf.freebase.com/ns/m.01> <http://rdf.freebase.com/ns/p> \"x\"@en .",
            "<http://rdf.freebase.com/ns/m.01> <http://rdf.freebase.com/ns/p> \"1\"^^<http://www.w3.org/2001/XMLSchema#int> .",
        ];
        let drop = [
            "<http://rdf.freebase.com/ns/type.x> <http://rdf.freebase.com/ns/p> <http://rdf.freebase.com/ns/m.02> .",
            "<http://rdf.freebase.com/ns/m.01> <http://rdf.freebase.com/ns/p> \"x\"@fr .",
            "<http://rdf.freebase.com/ns/m.01> <http://rdf.freebase.com/ns/p> <http://www.w3.org/2000/01/rdf-schema#label> .",
            "<http://rdf.freebase.com/ns/m.01> <http://rdf.freebase.com/ns/p> _:b .",
            "_:b <http://rdf.freebase.com/ns/p> <http://rdf.freebase.com/ns/m.02> .",
            "<http://example.org/m.01> <http://rdf.freebase.com/ns/p> <http://rdf.freebase.com/ns/m.02> .",
        ];
        for l in keep {
            assert!(english(&parse(l)), "{l}");
        }
        for l in drop {
            assert!(!english(&parse(l)), "{l}");
        }
    }

    fn read_str(content: &[u8], opts: FreebaseOptions) -> VecSink {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("fb.nt");
        std::fs::File::create(&p)
            .unwrap()
            .write_all(content)
            .unwrap();
        let options = FormatOptions::Freebase(opts);
        let ctx = InputCtx::local(p.to_str().unwrap(), &options);
        let mut sink = VecSink::default();
        read(&ctx, &mut sink).unwrap();
        sink
    }

    #[test]
    fn builds_triples_and_names() {
        let data = concat!(
            "<http://rdf.freebase.com/ns/m.0a>\t<http://rdf.freebase.com/ns/type.object.name>\t\"Caf\\u00e9 \\\"X\\\"\"@en\t.\n",
            "<http://rdf.freebase.com/ns/m.0a>\t<http://rdf.freebase.com/ns/type.object.name>\t\"Le Caf\u{e9}\"@fr\t.\n",
            "<http://rdf.freebase.com/ns/m.0a>\t<http://rdf.freebase.com/ns/film.film.directed_by>\t<http://rdf.freebase.com/ns/m.0b>\t.\n",
            "<http://rdf.freebase.com/ns/m.0a>\t<http://rdf.freebase.com/ns/type.object.type>\t<http://rdf.freebase.com/ns/film.film>\t.\n",
            "<http://rdf.freebase.com/ns/m.0a>\t<http://rdf.freebase.com/ns/film.film.initial_release_date>\t\"1999-04-02\"^^<http://www.w3.org/2001/XMLSchema#date>\t.\n",
            "<http://rdf.freebase.com/ns/m.0a>\t<http://www.w3.org/2002/07/owl#sameAs>\t<http://example.org/x>\t.\n",
            "<http://rdf.freebase.com/ns/m.0a>\t<http://rdf.freebase.com/ns/common.topic.alias>\t\"Cafe X\"@en\t.\n",
            "<http://rdf.freebase.com/ns/m.0a>\t<http://rdf.freebase.com/ns/common.topic.alias>\t\"Das Caf\u{e9}\"@de\t.\n",
        );
        let s = read_str(data.as_bytes(), FreebaseOptions::default());
        let t = s.edges();
        assert_eq!(t.len(), 5, "{t:#?}");
        // The entity edge is a `triples` row; the name, type and date are `literals`.
        let entity_edges: Vec<_> = s.triples().iter().map(|t| t.object.clone()).collect();
        assert_eq!(entity_edges, ["m.0b"]);
        let literal_kinds: Vec<_> = s.literals().iter().map(|t| t.object_kind.clone()).collect();
        assert_eq!(literal_kinds, ["literal", "iri", "literal", "literal"]);
        assert_eq!(t[0].subject, "m.0a");
        assert_eq!(t[0].predicate, "type.object.name");
        assert_eq!(t[0].object, "Caf\u{e9} \"X\"");
        assert_eq!(t[0].lang.as_deref(), Some("en"));
        assert_eq!(t[0].object_kind, "literal");
        assert_eq!(t[0].line, Some(1));
        assert_eq!(
            (t[1].object.as_str(), t[1].object_kind.as_str()),
            ("m.0b", "entity")
        );
        assert_eq!(
            (t[2].object.as_str(), t[2].object_kind.as_str()),
            ("film.film", "iri")
        );
        assert_eq!(t[3].datatype.as_deref(), Some("xsd:date"));
        assert_eq!(t[3].line, Some(5));
        assert_eq!(t[0].source, "fb.nt");
        assert_eq!(
            t[1].id,
            stable_id(&[
                "freebase",
                "fb.nt",
                "m.0a",
                "film.film.directed_by",
                "m.0b",
                "",
                ""
            ])
        );
        let e = s.entities();
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].key, "m.0a");
        assert_eq!(e[0].label.as_deref(), Some("Caf\u{e9} \"X\""));
        assert_eq!(e[0].id, stable_id(&["freebase", "entity", "m.0a", "en"]));
        // The English alias is a row of its own; the German one is dropped.
        assert_eq!(
            (
                e[1].key.as_str(),
                e[1].label.as_deref(),
                e[1].aliases.clone()
            ),
            ("m.0a", None, vec!["Cafe X".to_string()])
        );
        assert_eq!(
            e[1].id,
            stable_id(&["freebase", "alias", "m.0a", "en", "Cafe X"])
        );
        assert!(s.quarantine().is_empty());

        let all = read_str(
            data.as_bytes(),
            FreebaseOptions {
                english_only: false,
                names: false,
                ..Default::default()
            },
        );
        assert_eq!(all.edges().len(), 8);
        assert!(all.entities().is_empty());
        assert_eq!(all.edges()[5].object, "http://example.org/x");
        assert_eq!(
            all.edges()[5].predicate,
            "http://www.w3.org/2002/07/owl#sameAs"
        );
    }

    #[test]
    fn identical_edges_share_an_id() {
        let l = "<http://rdf.freebase.com/ns/m.0a> <http://rdf.freebase.com/ns/p> <http://rdf.freebase.com/ns/m.0b> .\n";
        let s = read_str(format!("{l}{l}").as_bytes(), FreebaseOptions::default());
        let t = s.triples();
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].id, t[1].id);
        assert_eq!((t[0].line, t[1].line), (Some(1), Some(2)));
    }
}
