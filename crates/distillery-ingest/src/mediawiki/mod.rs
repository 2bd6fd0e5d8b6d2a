//! MediaWiki XML export reader (`format = "mediawiki"`): Wikipedia dumps into documents and
//! tables.
//!
//! Reads the export schema 0.8 and later (`pages-articles.xml`, revision-history exports,
//! Wikimedia's daily adds-changes dumps; plain, bz2, gzip or zstd, with or without `<siteinfo>`),
//! one page at a time:
//!
//! 1. `xml::PageSplitter` cuts the decompressed bytes into `<page>` elements, and
//!    `xml::parse_page` reads each with quick-xml (title, namespace, ids, redirect, and the
//!    newest revision's id, timestamp, SHA-1, content model and text). A Wikidata page
//!    (`wikibase-item`, `wikibase-property`: entity JSON in `<text>`, as the daily dumps of
//!    wikidatawiki hold it) gives the entities, triples and literals the `wikidata` reader
//!    writes (its default languages; the internal layout of before 2014 is quarantined as
//!    `old_entity_layout`); a page of another model (`javascript`, `Scribunto`, ...) is
//!    quarantined as `unsupported_model`.
//! 2. Pages outside [`MediaWikiOptions::namespaces`] are skipped, as are redirects when
//!    [`MediaWikiOptions::redirects`] is false (kept, they carry `Document::redirect`).
//! 3. `wikitext::parse` turns the wikitext into clean text with sections, paragraphs,
//!    sentences, links and infobox fields, and cuts out the tables, which
//!    `table::parse_table` lays out as header + rows. The text is the heading lines and
//!    paragraphs joined by blank lines; templates, references, comments, files, categories
//!    and interlanguage links are dropped (a few inline templates such as `{{lang}}`,
//!    `{{convert}}`, `{{nowrap}}` keep their text); every span is a char offset range into
//!    it. A lead section (level 1, the page title) covers the text before the first heading.
//! 4. Each page becomes one [`Document`] followed by its [`Table`]s.
//!
//! Ids: a document is `stable_id("mediawiki", source, title, revision)`, a table
//! `stable_id("mediawiki", source, title, index, sha1(header + rows))`. URIs are
//! `<wiki>:<Title>` and `<wiki>:<Title>#table<n>` (`wiki` from the options, else `enwiki`).
//!
//! Bad input never stops the reader: a page with invalid UTF-8 (`invalid_utf8`), broken XML
//! (`malformed_xml`, resynchronised at the next `<page>`), no title or text (`missing_field`)
//! or over `max_page_bytes` (`record_too_large`, read past without being held) is quarantined with its byte offset in the decompressed input
//! and its page index, and reading goes on. A cut input keeps every complete page and
//! quarantines the cut (`truncated_input`; `corrupt_input` when the compressed data is damaged
//! rather than short).
//!
//! A daily adds-changes folder (`maxrevid.txt`, `status.txt`, the md5 sums, the
//! `pages-meta-hist-incr.xml.bz2` file) is checked by [`daily::open`] when a pipeline is planned
//! and read as that file; see the `daily` module.
//!
//! Multistream bz2 dumps (`pages-articles-multistream.xml.bz2`) are decoded in parallel, one
//! bz2 stream per job, with records emitted in stream order: see the `multistream` module.
//!
//! A bz2 dump can be read in byte ranges ([`crate::ByteRange`]): a range reads the bz2 streams
//! that start in it, see the `ranged` module; a single-stream dump is cut at bz2 blocks
//! instead (ranges with [`crate::ByteRange::blocks`] set), see the `blocks` module. Its quarantine records cannot know their offset in
//! the whole decompressed input: they name the compressed offset of the stream where decoding
//! started and the decompressed offset from there, in their detail and id, with no
//! `byte_offset` and no page index. Plain, gzip and zstd dumps cannot be split.

mod blocks;
pub mod daily;
pub mod log;
mod multistream;
mod ranged;
mod streams;

pub(crate) use streams::{MAX_STREAM, find_stream_start, first_start_from};
mod table;
mod wikitext;
mod xml;

use std::io::{self, BufRead};

use distillery_core::id::{sha1_hex, stable_id};
use distillery_core::spec::{FormatOptions, MediaWikiOptions};
use distillery_core::{Document, QuarantineRecord, Record, RecordSink, Table};

use crate::range::{ReadMode, Shape, read_mode};
use crate::{IngestError, InputCtx};
use xml::{PageBytes, PageError, PageSplitter, Split, SplitEnd};

const DATASET: &str = "mediawiki";

/// The `dataset` of a Wikidata page written as a document (the `entity_documents` option):
/// its text is entity JSON, which readers of text skip and a corpus-fed KG index reads.
pub const ENTITY_DATASET: &str = "wikidata-entity";

/// Reads one MediaWiki XML export into documents and tables (the streams starting in its byte
/// range when it has one).
pub fn read(ctx: &InputCtx<'_>, sink: &mut dyn RecordSink) -> Result<(), IngestError> {
    let default = MediaWikiOptions::default();
    let opts = match ctx.options {
        FormatOptions::MediaWiki(o) => o,
        _ => &default,
    };
    let pctx = PageCtx::new(ctx, opts);
    match read_mode(Shape::MediaWiki, ctx)? {
        ReadMode::Streams(range) => {
            return ranged::read(ctx, &pctx, range, opts.parallel_streams, sink);
        }
        ReadMode::Blocks(range) => return blocks::read(ctx, &pctx, range, sink),
        _ => {}
    }
    if opts.parallel_streams && multistream::read(ctx, &pctx, sink)? {
        return Ok(());
    }
    let (reader, compression) =
        crate::input::open_decompressed(ctx.opener, &ctx.location, ctx.bytes_read.clone())?;
    // A single compressed stream: decompressed on a thread of its own, parsed on this one.
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut reader: Box<dyn std::io::BufRead + Send> =
        if compression != crate::input::Compression::None && threads > 1 {
            Box::new(crate::input::ReadAhead::new(reader))
        } else {
            reader
        };
    read_sequential(
        &mut *reader,
        Base::default(),
        RootState::default(),
        &pctx,
        sink,
    )
}

/// The input's size in bytes (raw, as stored).
pub(crate) fn file_size(ctx: &InputCtx<'_>) -> Result<u64, IngestError> {
    ctx.opener
        .size(&ctx.location)
        .map_err(|e| IngestError::io(&ctx.location, e))
}

/// What page processing needs to know about the input, shareable across threads.
#[derive(Debug, Clone)]
pub(crate) struct PageCtx {
    pub location: String,
    pub source: String,
    pub wiki: String,
    pub namespaces: Vec<i32>,
    pub redirects: bool,
    /// The `max_page_bytes` option: longer pages are quarantined and read past.
    pub max_page: usize,
    /// The `entity_documents` option: a Wikidata page is a document too.
    pub entity_documents: bool,
}

impl PageCtx {
    fn new(ctx: &InputCtx<'_>, opts: &MediaWikiOptions) -> PageCtx {
        PageCtx {
            location: ctx.location.clone(),
            source: ctx.source.clone(),
            wiki: opts
                .wiki
                .clone()
                .filter(|w| !w.is_empty())
                .unwrap_or_else(|| "enwiki".to_string()),
            namespaces: opts.namespaces.clone(),
            redirects: opts.redirects,
            max_page: usize::try_from(opts.max_page_bytes).unwrap_or(usize::MAX),
            entity_documents: opts.entity_documents,
        }
    }
}

/// A quarantine record waiting for its absolute position (offsets and page indexes of a
/// multistream fragment are only known once the streams before it are done).
#[derive(Debug, Clone)]
pub(crate) struct Pending {
    reason: &'static str,
    detail: String,
    excerpt: Vec<u8>,
    offset: u64,
    page: Option<u64>,
}

/// The output of a page, or of a problem, in input order.
#[derive(Debug, Clone)]
pub(crate) enum Item {
    Records(Vec<Record>),
    Quarantine(Pending),
}

/// Where a stretch of input starts: decompressed byte offset and pages before it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Base {
    pub offset: u64,
    pub page: u64,
    /// Reading a byte range: `offset` counts from the start of the bz2 stream at this
    /// compressed offset, and quarantine records are placed by both (see the module docs).
    pub stream: Option<u64>,
    /// `stream` is the compressed *bit* offset of a bz2 block (a single-stream dump read in
    /// block ranges, see the `blocks` module).
    pub block: bool,
}

/// Whether the `<mediawiki>` root's start and end tags were seen.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct RootState {
    pub start: bool,
    pub end: bool,
}

impl RootState {
    fn merge(&mut self, end: &SplitEnd) {
        self.start |= end.saw_root_start;
        self.end |= end.saw_root_end;
    }
}

pub(crate) fn emit_items(
    items: Vec<Item>,
    base: Base,
    pctx: &PageCtx,
    sink: &mut dyn RecordSink,
) -> Result<(), IngestError> {
    for item in items {
        match item {
            Item::Records(records) => {
                for r in records {
                    sink.emit(r)?;
                }
            }
            Item::Quarantine(p) => {
                let offset = base.offset + p.offset;
                let q = match base.stream {
                    None => {
                        let q = QuarantineRecord::new(
                            DATASET,
                            &pctx.location,
                            p.reason,
                            p.detail,
                            &p.excerpt,
                        )
                        .at_byte(offset);
                        match p.page {
                            Some(page) => q.at_record(base.page + page),
                            None => q,
                        }
                    }
                    Some(stream) => {
                        let detail = if base.block {
                            format!(
                                "at byte {offset} of the text decoded from the bz2 block at \
                                 compressed bit {stream}: {}",
                                p.detail
                            )
                        } else {
                            format!(
                                "at byte {offset} of the text decoded from the bz2 stream at \
                                 compressed byte {stream}: {}",
                                p.detail
                            )
                        };
                        let mut q = QuarantineRecord::new(
                            DATASET,
                            &pctx.location,
                            p.reason,
                            detail,
                            &p.excerpt,
                        );
                        q.id = stable_id(&[&q.id, &stream.to_string(), &offset.to_string()]);
                        q
                    }
                };
                sink.emit(Record::Quarantine(q))?;
            }
        }
    }
    Ok(())
}

fn pending(reason: &'static str, detail: impl Into<String>, page: &PageBytes) -> Item {
    Item::Quarantine(Pending {
        reason,
        detail: detail.into(),
        excerpt: page.bytes[..page.bytes.len().min(512)].to_vec(),
        offset: page.offset,
        page: Some(page.index),
    })
}

/// A Wikidata page (a daily dump's `wikibase-item` or `wikibase-property` revision): its
/// entity JSON into the rows the `wikidata` reader writes (entities, triples, literals), in
/// the default languages. The internal layout of dumps before 2014 (no `id`, an `entity`
/// pair) is quarantined as `old_entity_layout`.
fn entity_page(
    raw: &xml::RawPage,
    title: &str,
    json: &str,
    page: &PageBytes,
    pctx: &PageCtx,
) -> Vec<Item> {
    use crate::kb::wikidata::entity_records;
    let rev = raw.revision_id.map_or("?".to_string(), |r| r.to_string());
    // A merged item: `{"entity":"Q1","redirect":"Q2"}`, no statements of its own. It is a
    // redirect page (a document flagged with its target with `entity_documents`, so that a
    // corpus drops the item), not bad data.
    if let Some(target) = entity_redirect(json) {
        if !pctx.entity_documents || !pctx.redirects {
            return Vec::new();
        }
        let mut doc = entity_document(raw, title, json, pctx);
        doc.redirect = Some(target);
        return vec![Item::Records(vec![Record::Document(doc)])];
    }
    let opts = distillery_core::spec::WikidataOptions::default();
    match entity_records(&pctx.source, &opts, json.as_bytes(), None) {
        Ok((mut records, bad)) => {
            if pctx.entity_documents {
                records.insert(0, Record::Document(entity_document(raw, title, json, pctx)));
            }
            let mut items = vec![Item::Records(records)];
            if let Some(b) = bad {
                items.push(pending(
                    b.reason,
                    format!("page {title:?} (revision {rev}): {}", b.detail),
                    page,
                ));
            }
            items
        }
        Err(p) if p.reason == "missing_field" && json.contains("\"entity\"") => vec![pending(
            "old_entity_layout",
            format!(
                "page {title:?} (revision {rev}) holds entity JSON in Wikidata's internal layout \
                 of before 2014 (an `entity` pair, no `id`), which is not read; today's dumps \
                 write the layout of the JSON dumps"
            ),
            page,
        )],
        Err(p) => vec![pending(
            p.reason,
            format!("page {title:?} (revision {rev}): {}", p.detail),
            page,
        )],
    }
}

/// The target of a Wikidata redirect's JSON (`{"entity":"Q1","redirect":"Q2"}`), if it is one.
fn entity_redirect(json: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Redirect {
        #[serde(rename = "entity")]
        _entity: String,
        redirect: String,
    }
    if !json.contains("\"redirect\"") {
        return None;
    }
    serde_json::from_str::<Redirect>(json)
        .ok()
        .map(|r| r.redirect)
}

/// A Wikidata page as a document (the `entity_documents` option): its entity JSON as the
/// text, with the page's identity and revision, so that a corpus root keeps it by page id.
fn entity_document(raw: &xml::RawPage, title: &str, json: &str, pctx: &PageCtx) -> Document {
    let revision = raw.revision_id.map(|r| r.to_string()).unwrap_or_default();
    Document {
        id: stable_id(&[DATASET, &pctx.source, title, &revision]),
        dataset: ENTITY_DATASET.to_string(),
        source: pctx.source.clone(),
        uri: format!("{}:{}", pctx.wiki, title),
        title: title.to_string(),
        page_id: raw.id,
        namespace: raw.ns,
        redirect: None,
        revision_id: raw.revision_id,
        timestamp: raw.timestamp.clone(),
        sha1: raw.sha1.clone(),
        text: json.to_string(),
        ..Default::default()
    }
}

/// Turns one split-off piece of input into items.
pub(crate) fn process_split(split: Split, pctx: &PageCtx) -> Vec<Item> {
    match split {
        Split::Page(page) => match xml::parse_page(&page.bytes) {
            Ok(raw) => build_page(raw, &page, pctx),
            Err(PageError::InvalidUtf8 { at, detail }) => vec![pending(
                "invalid_utf8",
                format!("invalid UTF-8 at byte {at} of the page: {detail}"),
                &page,
            )],
            Err(PageError::Malformed { at, detail }) => vec![pending(
                "malformed_xml",
                format!("malformed XML at byte {at} of the page: {detail}"),
                &page,
            )],
        },
        Split::Unterminated(page) => vec![pending(
            "malformed_xml",
            "<page> not closed before the next <page>",
            &page,
        )],
        Split::Oversized(page, len) => vec![pending(
            "record_too_large",
            format!(
                "page of {len} bytes is over the limit of {} bytes; it was read past, not parsed \
                 (raise the reader option `max_page_bytes` if it is a real page)",
                pctx.max_page
            ),
            &page,
        )],
    }
}

fn table_fingerprint(header: &[String], rows: &[Vec<String>]) -> String {
    let mut s = header.join("\u{1f}");
    for r in rows {
        s.push('\u{1e}');
        s.push_str(&r.join("\u{1f}"));
    }
    sha1_hex(&s)
}

fn build_page(raw: xml::RawPage, page: &PageBytes, pctx: &PageCtx) -> Vec<Item> {
    let ns = raw.ns.unwrap_or(0);
    if !pctx.namespaces.is_empty() && !pctx.namespaces.contains(&ns) {
        return Vec::new();
    }
    let title = match raw.title.as_deref().map(str::trim) {
        Some(t) if !t.is_empty() => t.to_string(),
        _ => return vec![pending("missing_field", "page has no <title>", page)],
    };
    // Entity JSON, Lua, CSS...: not wikitext, so no document (Wikidata's entities are the
    // `wikidata` reader's).
    if let Some(model) = raw.model.as_deref().filter(|m| *m != "wikitext") {
        if matches!(model, "wikibase-item" | "wikibase-property")
            && let Some(json) = raw.text.as_deref()
        {
            return entity_page(&raw, &title, json, page, pctx);
        }
        return vec![pending(
            "unsupported_model",
            format!(
                "page {title:?} (revision {}) holds content model `{model}`, not wikitext",
                raw.revision_id.map_or("?".to_string(), |r| r.to_string())
            ),
            page,
        )];
    }
    let Some(wikitext) = raw.text else {
        let detail = match (raw.text_deleted, raw.revision_id) {
            (true, Some(r)) => {
                format!("page {title:?}: the text of its newest revision {r} is deleted")
            }
            (true, None) => format!("page {title:?}: the text of its newest revision is deleted"),
            (false, _) if raw.revisions == 0 => format!("page {title:?} has no <revision>"),
            (false, _) => format!("page {title:?} has no revision <text>"),
        };
        return vec![pending("missing_field", detail, page)];
    };
    let parsed = wikitext::parse(&wikitext, &title);
    let redirect = raw
        .redirect
        .filter(|r| !r.trim().is_empty())
        .or(parsed.redirect);
    if redirect.is_some() && !pctx.redirects {
        return Vec::new();
    }
    let revision = raw.revision_id.map(|r| r.to_string()).unwrap_or_default();
    let id = stable_id(&[DATASET, &pctx.source, &title, &revision]);
    let mut records = Vec::with_capacity(1 + parsed.tables.len());
    for (index, t) in parsed.tables.into_iter().enumerate() {
        let fingerprint = table_fingerprint(&t.header, &t.rows);
        records.push(Record::Table(Table {
            id: stable_id(&[
                DATASET,
                &pctx.source,
                &title,
                &index.to_string(),
                &fingerprint,
            ]),
            dataset: DATASET.to_string(),
            source: pctx.source.clone(),
            uri: format!("{}:{}#table{}", pctx.wiki, title, index),
            document_id: Some(id.clone()),
            table_index: index as u32,
            title: title.clone(),
            caption: t.caption,
            section: t.section,
            header: t.header,
            rows: t.rows,
            links: t.links,
        }));
    }
    let doc = Document {
        id,
        dataset: DATASET.to_string(),
        source: pctx.source.clone(),
        uri: format!("{}:{}", pctx.wiki, title),
        title,
        page_id: raw.id,
        namespace: Some(ns),
        redirect,
        revision_id: raw.revision_id,
        timestamp: raw.timestamp,
        sha1: raw.sha1,
        text: parsed.text,
        sections: parsed.sections,
        paragraphs: parsed.paragraphs,
        sentences: parsed.sentences,
        infobox: parsed.infobox,
        links: parsed.links,
    };
    records.insert(0, Record::Document(doc));
    vec![Item::Records(records)]
}

/// Whether an IO error is bad data (quarantined) rather than a failing device (an error).
use crate::input::is_data_error;

/// Reads pages sequentially from a decompressed reader whose first byte is at `base`.
pub(crate) fn read_sequential(
    reader: &mut dyn BufRead,
    base: Base,
    roots: RootState,
    pctx: &PageCtx,
    sink: &mut dyn RecordSink,
) -> Result<(), IngestError> {
    let mut splitter = PageSplitter::with_limit(pctx.max_page);
    let mut failure: Option<io::Error> = None;
    loop {
        let chunk = match reader.fill_buf() {
            Ok([]) => break,
            Ok(c) => c,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                failure = Some(e);
                break;
            }
        };
        let n = chunk.len();
        splitter.feed(chunk, &mut |split| {
            emit_items(process_split(split, pctx), base, pctx, sink)
        })?;
        reader.consume(n);
    }
    finish(splitter.finish(), failure, base, roots, pctx, sink)
}

/// Quarantines what the end of the input says: a decompression failure, a page cut short, a
/// missing `</mediawiki>`, or no MediaWiki content at all.
pub(crate) fn finish(
    end: SplitEnd,
    failure: Option<io::Error>,
    base: Base,
    mut roots: RootState,
    pctx: &PageCtx,
    sink: &mut dyn RecordSink,
) -> Result<(), IngestError> {
    roots.merge(&end);
    let at_end = |reason: &'static str, detail: String| {
        let (offset, page, excerpt) = match &end.open_page {
            Some(p) => (
                p.offset,
                Some(p.index),
                p.bytes[..p.bytes.len().min(512)].to_vec(),
            ),
            None => (end.bytes, None, Vec::new()),
        };
        Item::Quarantine(Pending {
            reason,
            detail,
            excerpt,
            offset,
            page,
        })
    };
    let item = if let Some(e) = failure {
        if !is_data_error(&e) {
            return Err(IngestError::io(&pctx.location, e));
        }
        let reason = if e.kind() == io::ErrorKind::UnexpectedEof {
            "truncated_input"
        } else {
            "corrupt_input"
        };
        tracing::warn!(location = %pctx.location, reason, error = %e, "mediawiki input cut short");
        Some(at_end(
            reason,
            format!("input cannot be read past this point: {e}"),
        ))
    } else if end.open_page.is_some() {
        Some(at_end(
            "truncated_input",
            "input ended inside a <page>".to_string(),
        ))
    } else if base.page + end.pages == 0 && !roots.start {
        Some(at_end(
            "malformed_xml",
            "no <mediawiki> root element and no <page> found".to_string(),
        ))
    } else if roots.start && !roots.end {
        Some(at_end(
            "truncated_input",
            "input ended before </mediawiki>".to_string(),
        ))
    } else {
        None
    };
    if let Some(item) = item {
        emit_items(vec![item], base, pctx, sink)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use distillery_core::VecSink;

    fn pctx() -> PageCtx {
        PageCtx {
            location: "/x/test.xml".into(),
            source: "test.xml".into(),
            wiki: "testwiki".into(),
            namespaces: vec![0],
            redirects: true,
            max_page: distillery_core::spec::DEFAULT_MAX_PAGE_BYTES as usize,
            entity_documents: false,
        }
    }

    fn run(xml: &[u8]) -> VecSink {
        let mut sink = VecSink::default();
        let mut r = xml;
        read_sequential(
            &mut r,
            Base::default(),
            RootState::default(),
            &pctx(),
            &mut sink,
        )
        .unwrap();
        sink
    }

    #[test]
    fn pages_to_documents_and_tables() {
        let sink = run(br#"<mediawiki><page><title>Alpha</title><ns>0</ns><id>1</id>
<revision><id>5</id><timestamp>2001-01-01T00:00:00Z</timestamp>
<text>Alpha is [[beta]].
{|
! h
|-
| [[c|d]]
|}</text></revision></page>
<page><title>Category:Stuff</title><ns>14</ns><revision><text>x</text></revision></page>
<page><title>Gamma</title><ns>0</ns><redirect title="Alpha"/><revision><text>#REDIRECT [[Alpha]]</text></revision></page>
</mediawiki>"#);
        assert_eq!(sink.records.len(), 3, "{:?}", sink.records);
        let docs = sink.documents();
        assert_eq!(docs[0].title, "Alpha");
        assert_eq!(docs[0].text, "Alpha is beta.");
        assert_eq!(docs[0].uri, "testwiki:Alpha");
        assert_eq!(
            docs[0].id,
            stable_id(&["mediawiki", "test.xml", "Alpha", "5"])
        );
        assert_eq!(docs[0].revision_id, Some(5));
        assert_eq!(docs[1].redirect.as_deref(), Some("Alpha"));
        let t = sink.tables()[0];
        assert_eq!(t.uri, "testwiki:Alpha#table0");
        assert_eq!(t.document_id.as_deref(), Some(docs[0].id.as_str()));
        assert_eq!(t.rows, vec![vec!["d"]]);
        assert!(matches!(sink.records[1], Record::Table(_)));
    }

    #[test]
    fn end_of_input_problems() {
        let s = run(b"<mediawiki><page><title>A</title><revision><text>a</text></revision></page>");
        assert_eq!(s.documents().len(), 1);
        assert_eq!(s.quarantine()[0].reason, "truncated_input");
        let input = b"<mediawiki><page><title>A</title><revision><text>a</text></revision></page><page><title>B";
        let s = run(input);
        let q = s.quarantine();
        assert_eq!(q.len(), 1);
        let second = input.len() as u64 - b"<page><title>B".len() as u64;
        assert_eq!(
            (q[0].reason.as_str(), q[0].record, q[0].byte_offset),
            ("truncated_input", Some(1), Some(second))
        );
        assert_eq!(q[0].excerpt, "<page><title>B");
        let s = run(b"just text");
        assert_eq!(s.quarantine()[0].reason, "malformed_xml");
        let s = run(b"<mediawiki><page><revision><text>a</text></revision></page></mediawiki>");
        assert_eq!(s.quarantine()[0].reason, "missing_field");
    }
}
