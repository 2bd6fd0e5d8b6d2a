//! The XML layer of the MediaWiki reader: splitting a decompressed export into `<page>`
//! elements, and parsing one page with quick-xml.
//!
//! [`PageSplitter`] is a byte-level state machine fed with chunks of the decompressed input. It
//! finds `<page>` ... `</page>` with `memchr::memmem` and hands each page's bytes over whole,
//! so memory is bounded by one page, at most its limit (the `max_page_bytes` option): a longer page is read past, keeping only its start and length.
//! Everything outside pages (the `<mediawiki>` root, `<siteinfo>`) is skipped; only the root's
//! start and end tags are noted, to tell a complete input from a cut one. Splitting first and
//! parsing each page on its own means a malformed page, or one with invalid UTF-8, costs that
//! page alone: the next `<page>` is the resync point. A literal `<page` cannot occur inside a
//! well-formed page (text content escapes `<`), so the split is exact on valid exports.
//!
//! [`parse_page`] runs the quick-xml pull parser over one page and keeps title, namespace, page
//! id, redirect target and the newest revision's id, timestamp, SHA-1, content model and text.
//! A page of a history export or of a daily adds-changes dump holds several `<revision>`s; the
//! one with the highest id is kept (files list them in id order, the highest last), and each
//! revision's fields are its own: a revision without `<text>` (a stub) or whose text is
//! `deleted="deleted"` has no text, whatever an earlier revision held. quick-xml 0.42 reports
//! entity and character references as separate [`Event::GeneralRef`] events;
//! [`decode_xml_ref`] turns them into text.

use memchr::memmem;
use quick_xml::XmlVersion;
use quick_xml::events::{BytesStart, Event};

/// Bytes kept between chunks outside pages so markers split across chunks are still found
/// (`</mediawiki>` is 12 bytes).
const OUTSIDE_TAIL: usize = 11;

/// One `<page>` element's raw bytes with its position in the input.
#[derive(Debug, Clone)]
pub(crate) struct PageBytes {
    pub bytes: Vec<u8>,
    /// Byte offset of `<page` in the decompressed input (relative to the splitter's start).
    pub offset: u64,
    /// 0-based index of the page among all `<page>` elements met so far.
    pub index: u64,
}

/// What the splitter hands out.
#[derive(Debug)]
pub(crate) enum Split {
    /// A complete `<page>` ... `</page>`.
    Page(PageBytes),
    /// A `<page>` that another `<page>` interrupted before its `</page>`.
    Unterminated(PageBytes),
    /// A page over the limit: its start only, and its length in bytes (to `</page>`, or to
    /// the next `<page>` when it has no end tag).
    Oversized(PageBytes, u64),
}

/// The splitter's state at the end of its input.
#[derive(Debug, Default)]
pub(crate) struct SplitEnd {
    /// Bytes consumed in all.
    pub bytes: u64,
    /// `<page>` elements met (complete or not).
    pub pages: u64,
    pub saw_root_start: bool,
    pub saw_root_end: bool,
    /// The input ended inside this page (partial bytes; empty when it was oversized).
    pub open_page: Option<PageBytes>,
}

/// Splits a byte stream into `<page>` elements; see the module docs.
#[derive(Debug)]
pub(crate) struct PageSplitter {
    buf: Vec<u8>,
    /// Offset of `buf[0]`.
    buf_off: u64,
    in_page: bool,
    /// Inside an oversized page: bytes are dropped until `</page>` or the next `<page`.
    skipping: bool,
    /// The start of the oversized page being skipped, and its bytes dropped so far.
    skipped: Vec<u8>,
    skipped_len: u64,
    page_off: u64,
    page_index: u64,
    pages: u64,
    /// Where to resume searching in `buf`.
    scan: usize,
    saw_root_start: bool,
    saw_root_end: bool,
    max_page: usize,
}

enum PageStart {
    Found(usize),
    /// Not found; bytes from this index on may still start one.
    NeedMore(usize),
}

fn find_page_start(buf: &[u8], from: usize) -> PageStart {
    let mut pos = from;
    while pos < buf.len() {
        match memmem::find(&buf[pos..], b"<page") {
            None => return PageStart::NeedMore(buf.len().saturating_sub(4).max(from)),
            Some(i) => {
                let i = pos + i;
                match buf.get(i + 5) {
                    None => return PageStart::NeedMore(i),
                    Some(b'>' | b' ' | b'\t' | b'\r' | b'\n' | b'/') => return PageStart::Found(i),
                    Some(_) => pos = i + 1,
                }
            }
        }
    }
    PageStart::NeedMore(buf.len().max(from))
}

impl PageSplitter {
    pub(crate) fn with_limit(max_page: usize) -> PageSplitter {
        PageSplitter {
            buf: Vec::new(),
            buf_off: 0,
            in_page: false,
            skipping: false,
            skipped: Vec::new(),
            skipped_len: 0,
            page_off: 0,
            page_index: 0,
            pages: 0,
            scan: 0,
            saw_root_start: false,
            saw_root_end: false,
            max_page,
        }
    }

    /// A splitter whose first byte is at decoded offset `offset` (page offsets count from
    /// there).
    pub(crate) fn starting_at(max_page: usize, offset: u64) -> PageSplitter {
        PageSplitter {
            buf_off: offset,
            ..PageSplitter::with_limit(max_page)
        }
    }

    /// Bytes consumed so far.
    pub(crate) fn position(&self) -> u64 {
        self.buf_off + self.buf.len() as u64
    }

    /// The lowest offset at which a page not handed out yet can start: the open page's start,
    /// else the first byte still held (a `<page` cut by the chunk's end starts there or later).
    pub(crate) fn settled_from(&self) -> u64 {
        if self.in_page {
            self.page_off
        } else {
            self.buf_off
        }
    }

    fn note_root(&mut self, outside: &[u8]) {
        if !self.saw_root_start && memmem::find(outside, b"<mediawiki").is_some() {
            self.saw_root_start = true;
        }
        if !self.saw_root_end && memmem::find(outside, b"</mediawiki>").is_some() {
            self.saw_root_end = true;
        }
    }

    fn drain(&mut self, n: usize) {
        self.buf.drain(..n);
        self.buf_off += n as u64;
    }

    fn start_page(&mut self) {
        self.in_page = true;
        self.skipping = false;
        self.page_off = self.buf_off;
        self.page_index = self.pages;
        self.pages += 1;
        self.scan = 1;
    }

    fn take_page(&mut self, len: usize) -> PageBytes {
        let bytes = self.buf[..len].to_vec();
        self.drain(len);
        PageBytes {
            bytes,
            offset: self.page_off,
            index: self.page_index,
        }
    }

    /// Feeds the next chunk; calls `out` for every page completed by it.
    pub(crate) fn feed<E>(
        &mut self,
        chunk: &[u8],
        out: &mut dyn FnMut(Split) -> Result<(), E>,
    ) -> Result<(), E> {
        self.buf.extend_from_slice(chunk);
        loop {
            if !self.in_page {
                match find_page_start(&self.buf, self.scan) {
                    PageStart::Found(i) => {
                        let outside = std::mem::take(&mut self.buf);
                        self.note_root(&outside[..i]);
                        self.buf = outside;
                        self.drain(i);
                        self.start_page();
                    }
                    PageStart::NeedMore(keep) => {
                        let outside = std::mem::take(&mut self.buf);
                        self.note_root(&outside);
                        self.buf = outside;
                        let keep = keep.min(self.buf.len().saturating_sub(OUTSIDE_TAIL));
                        self.drain(keep);
                        self.scan = 0;
                        return Ok(());
                    }
                }
            } else {
                let from = self.scan.min(self.buf.len());
                let end = memmem::find(&self.buf[from..], b"</page>").map(|j| from + j);
                let limit = end.unwrap_or(self.buf.len());
                let next = match find_page_start(&self.buf[..limit], from) {
                    PageStart::Found(k) => Some(k),
                    PageStart::NeedMore(_) => None,
                };
                if let Some(k) = next {
                    // A new page starts before this one ended.
                    if !self.skipping && k > self.max_page {
                        self.start_skipping();
                    }
                    if self.skipping {
                        self.drain(k);
                        self.skipped_len += k as u64;
                        out(self.oversized())?;
                    } else {
                        let page = self.take_page(k);
                        out(Split::Unterminated(page))?;
                    }
                    self.start_page();
                } else if let Some(j) = end {
                    let len = j + b"</page>".len();
                    if !self.skipping && len > self.max_page {
                        self.start_skipping();
                    }
                    if self.skipping {
                        self.drain(len);
                        self.skipped_len += len as u64;
                        out(self.oversized())?;
                    } else {
                        let page = self.take_page(len);
                        out(Split::Page(page))?;
                    }
                    self.in_page = false;
                    self.skipping = false;
                    self.scan = 0;
                } else {
                    if !self.skipping && self.buf.len() > self.max_page {
                        self.start_skipping();
                    }
                    if self.skipping {
                        let keep = self.buf.len().saturating_sub(8);
                        self.drain(keep);
                        self.skipped_len += keep as u64;
                        self.scan = 0;
                    } else {
                        self.scan = self.buf.len().saturating_sub(7).max(1);
                    }
                    return Ok(());
                }
            }
        }
    }

    /// Starts skipping the page at the start of `buf`: over the limit.
    fn start_skipping(&mut self) {
        self.skipped = self.buf[..self.buf.len().min(512)].to_vec();
        self.skipped_len = 0;
        self.skipping = true;
    }

    /// The oversized page just skipped.
    fn oversized(&mut self) -> Split {
        let page = PageBytes {
            bytes: std::mem::take(&mut self.skipped),
            offset: self.page_off,
            index: self.page_index,
        };
        Split::Oversized(page, std::mem::take(&mut self.skipped_len))
    }

    /// Ends the input.
    pub(crate) fn finish(mut self) -> SplitEnd {
        if !self.in_page {
            let outside = std::mem::take(&mut self.buf);
            self.note_root(&outside);
            self.buf = outside;
        }
        let bytes = self.position();
        let open_page = self.in_page.then(|| PageBytes {
            bytes: if self.skipping {
                Vec::new()
            } else {
                std::mem::take(&mut self.buf)
            },
            offset: self.page_off,
            index: self.page_index,
        });
        SplitEnd {
            bytes,
            pages: self.pages,
            saw_root_start: self.saw_root_start,
            saw_root_end: self.saw_root_end,
            open_page,
        }
    }
}

/// The fields of one page, as the export gives them, with its newest revision's.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct RawPage {
    pub title: Option<String>,
    pub ns: Option<i32>,
    pub id: Option<i64>,
    pub redirect: Option<String>,
    pub revision_id: Option<i64>,
    pub timestamp: Option<String>,
    /// The revision's `<sha1>` (base 36, as MediaWiki writes it).
    pub sha1: Option<String>,
    /// The revision's `<model>` (`wikitext`, `wikibase-item`, ...); `None` in exports before
    /// 0.5 or when absent.
    pub model: Option<String>,
    /// Wikitext of the newest revision; `None` when absent or deleted.
    pub text: Option<String>,
    /// The newest revision's text is `deleted="deleted"`.
    pub text_deleted: bool,
    /// `<revision>` elements in the page.
    pub revisions: u32,
}

/// The fields of the `<revision>` being read.
#[derive(Debug, Default)]
struct Revision {
    id: Option<i64>,
    timestamp: Option<String>,
    sha1: Option<String>,
    model: Option<String>,
    text: Option<String>,
    text_deleted: bool,
}

impl RawPage {
    /// Keeps `rev` when it is newer than the revision kept so far (a higher id, or the later
    /// of two without ids).
    fn keep(&mut self, rev: Revision) {
        self.revisions += 1;
        let newer = match (self.revision_id, rev.id) {
            (Some(kept), Some(id)) => id >= kept,
            (Some(_), None) => false,
            (None, _) => true,
        };
        if self.revisions == 1 || newer {
            self.revision_id = rev.id;
            self.timestamp = rev.timestamp;
            self.sha1 = rev.sha1;
            self.model = rev.model;
            self.text = rev.text;
            self.text_deleted = rev.text_deleted;
        }
    }
}

/// Why a page could not be parsed; `at` is the byte offset within the page.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum PageError {
    InvalidUtf8 { at: usize, detail: String },
    Malformed { at: usize, detail: String },
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Field {
    Title,
    Ns,
    Id,
    RevId,
    Timestamp,
    Sha1,
    Model,
    Text,
}

fn field_of(path: &[String]) -> Option<Field> {
    let p: Vec<&str> = path.iter().map(String::as_str).collect();
    match p.as_slice() {
        ["page", "title"] => Some(Field::Title),
        ["page", "ns"] => Some(Field::Ns),
        ["page", "id"] => Some(Field::Id),
        ["page", "revision", "id"] => Some(Field::RevId),
        ["page", "revision", "timestamp"] => Some(Field::Timestamp),
        ["page", "revision", "sha1"] => Some(Field::Sha1),
        ["page", "revision", "model"] => Some(Field::Model),
        ["page", "revision", "text"] => Some(Field::Text),
        _ => None,
    }
}

/// Decodes an XML entity or character reference (the part between `&` and `;`).
pub(crate) fn decode_xml_ref(name: &str) -> Option<char> {
    match name {
        "lt" => Some('<'),
        "gt" => Some('>'),
        "amp" => Some('&'),
        "quot" => Some('"'),
        "apos" => Some('\''),
        _ => decode_char_ref(name),
    }
}

/// Appends the text of the reference `&name;`: its character, or the reference as written
/// when it names none.
pub(crate) fn push_xml_ref(value: &mut String, name: &str) {
    match decode_xml_ref(name) {
        Some(c) => value.push(c),
        None => {
            value.push('&');
            value.push_str(name);
            value.push(';');
        }
    }
}

/// Decodes `#123` / `#x1F` into a char (`None` for other names and invalid code points).
pub(crate) fn decode_char_ref(name: &str) -> Option<char> {
    let num = name.strip_prefix('#')?;
    let v = if let Some(hex) = num.strip_prefix(['x', 'X']) {
        u32::from_str_radix(hex, 16).ok()?
    } else {
        num.parse::<u32>().ok()?
    };
    if v == 0 {
        return None;
    }
    char::from_u32(v)
}

fn attr(e: &BytesStart<'_>, name: &str) -> Option<String> {
    let a = e.try_get_attribute(name).ok()??;
    a.normalized_value(XmlVersion::Implicit1_0)
        .ok()
        .map(|v| v.into_owned())
}

/// Parses one `<page>` element.
pub(crate) fn parse_page(bytes: &[u8]) -> Result<RawPage, PageError> {
    let s = std::str::from_utf8(bytes).map_err(|e| PageError::InvalidUtf8 {
        at: e.valid_up_to(),
        detail: e.to_string(),
    })?;
    let mut reader = quick_xml::Reader::from_str(s);
    reader.config_mut().check_end_names = true;
    let mut page = RawPage::default();
    let mut rev = Revision::default();
    let mut path: Vec<String> = Vec::new();
    let mut field: Option<Field> = None;
    let mut value = String::new();
    let mut done = false;
    while !done {
        let ev = reader.read_event().map_err(|e| PageError::Malformed {
            at: reader.error_position() as usize,
            detail: e.to_string(),
        })?;
        match ev {
            Event::Start(e) => {
                if path.len() >= 64 {
                    return Err(PageError::Malformed {
                        at: reader.buffer_position() as usize,
                        detail: "elements nested too deep".into(),
                    });
                }
                let name = e.local_name().as_ref().to_string();
                if path.is_empty() && name != "page" {
                    return Err(PageError::Malformed {
                        at: 0,
                        detail: format!("expected <page>, found <{name}>"),
                    });
                }
                if name == "redirect" && path.len() == 1 {
                    page.redirect = attr(&e, "title");
                }
                if name == "revision" && path.len() == 1 {
                    rev = Revision::default();
                }
                if name == "text" && path.len() == 2 {
                    rev.text_deleted = attr(&e, "deleted").is_some();
                }
                path.push(name);
                field = field_of(&path);
                value.clear();
            }
            Event::Empty(e) => {
                let name = e.local_name().as_ref().to_string();
                path.push(name);
                let f = field_of(&path);
                let top = path.pop();
                if path.len() == 1 && top.as_deref() == Some("redirect") {
                    page.redirect = attr(&e, "title");
                }
                match f {
                    Some(Field::Text) => {
                        rev.text_deleted = attr(&e, "deleted").is_some();
                        rev.text = (!rev.text_deleted).then(String::new);
                    }
                    Some(Field::Title) => page.title = Some(String::new()),
                    _ => {}
                }
                // `<revision/>`: a revision with no fields.
                if path.len() == 1 && top.as_deref() == Some("revision") {
                    page.keep(Revision::default());
                }
            }
            Event::Text(t) if field.is_some() => value.push_str(&t.xml10_content()),
            Event::CData(t) if field.is_some() => value.push_str(&t.xml10_content()),
            Event::GeneralRef(r) if field.is_some() => push_xml_ref(&mut value, &r),
            Event::End(_) => {
                if let Some(f) = field.take() {
                    let v = std::mem::take(&mut value);
                    match f {
                        Field::Title => page.title = Some(v),
                        Field::Ns => page.ns = v.trim().parse().ok(),
                        Field::Id => page.id = v.trim().parse().ok(),
                        Field::RevId => rev.id = v.trim().parse().ok(),
                        Field::Timestamp => rev.timestamp = Some(v.trim().to_string()),
                        Field::Sha1 => rev.sha1 = Some(v.trim().to_string()),
                        Field::Model => rev.model = Some(v.trim().to_string()),
                        Field::Text if rev.text_deleted => {}
                        Field::Text => rev.text = Some(v),
                    }
                }
                if path.len() == 2 && path[1] == "revision" {
                    page.keep(std::mem::take(&mut rev));
                }
                path.pop();
                if path.is_empty() {
                    done = true;
                }
            }
            Event::Eof => {
                return Err(PageError::Malformed {
                    at: bytes.len(),
                    detail: format!("page ended inside <{}>", path.join("/")),
                });
            }
            _ => {}
        }
    }
    Ok(page)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split_all(input: &[u8], chunk: usize) -> (Vec<String>, SplitEnd) {
        let mut sp = PageSplitter::with_limit(1 << 20);
        let mut got = Vec::new();
        for c in input.chunks(chunk.max(1)) {
            sp.feed::<()>(c, &mut |s| {
                got.push(match s {
                    Split::Page(p) => {
                        format!(
                            "page@{}#{}:{}",
                            p.offset,
                            p.index,
                            String::from_utf8_lossy(&p.bytes)
                        )
                    }
                    Split::Unterminated(p) => format!("open@{}#{}", p.offset, p.index),
                    Split::Oversized(p, _) => format!("big@{}", p.offset),
                });
                Ok(())
            })
            .unwrap();
        }
        (got, sp.finish())
    }

    #[test]
    fn splits_pages_whatever_the_chunking() {
        let input = b"<mediawiki><siteinfo/>\n<page><title>A</title></page>\n<page>\n<x/></page><pagex/><page><title>C</title></page>\n</mediawiki>\n";
        let (want, end) = split_all(input, input.len());
        assert_eq!(want.len(), 3, "{want:?}");
        assert!(want[0].starts_with("page@23#0:<page><title>A"));
        assert!(end.saw_root_start && end.saw_root_end && end.open_page.is_none());
        assert_eq!(end.pages, 3);
        assert_eq!(end.bytes, input.len() as u64);
        for n in 1..20 {
            let (got, end) = split_all(input, n);
            assert_eq!(got, want, "chunk {n}");
            assert!(end.saw_root_start && end.saw_root_end, "chunk {n}");
        }
    }

    #[test]
    fn reports_unterminated_and_open_pages() {
        let input =
            b"<mediawiki><page><title>A</title>\n<page><title>B</title></page><page><title>C";
        let (got, end) = split_all(input, 7);
        assert_eq!(got.len(), 2);
        assert!(got[0].starts_with("open@11#0"));
        assert!(got[1].starts_with("page@34#1"), "{got:?}");
        let open = end.open_page.unwrap();
        assert_eq!(open.index, 2);
        assert_eq!(open.bytes, b"<page><title>C");
        assert!(!end.saw_root_end);
    }

    #[test]
    fn oversized_pages_are_skipped() {
        let mut input = b"<mediawiki><page>".to_vec();
        input.extend(std::iter::repeat_n(b'x', 3000));
        input.extend_from_slice(b"</page><page><title>B</title></page></mediawiki>");
        let mut sp = PageSplitter::with_limit(1000);
        let mut got = Vec::new();
        for c in input.chunks(100) {
            sp.feed::<()>(c, &mut |s| {
                got.push(match s {
                    Split::Page(p) => format!("page#{}", p.index),
                    Split::Unterminated(p) => format!("open#{}", p.index),
                    Split::Oversized(p, len) => format!("big#{}@{}+{len}", p.index, p.offset),
                });
                Ok(())
            })
            .unwrap();
        }
        // `<page>` + 3000 bytes + `</page>`: 3013 bytes, reported when the page ends.
        assert_eq!(got, vec!["big#0@11+3013", "page#1"]);
        assert!(sp.finish().saw_root_end);
    }

    #[test]
    fn parses_a_page_with_entities() {
        let page = br#"<page>
    <title>AT&amp;T &#x263A; &#65;</title>
    <ns>0</ns>
    <id>7</id>
    <redirect title="Bell &amp; Co" />
    <revision>
      <id>11</id>
      <timestamp>2020-01-01T00:00:00Z</timestamp>
      <text bytes="3" xml:space="preserve">a &lt;b&gt; &amp;nbsp; &unknown;</text>
    </revision>
  </page>"#;
        let p = parse_page(page).unwrap();
        assert_eq!(p.title.as_deref(), Some("AT&T \u{263A} A"));
        assert_eq!(p.ns, Some(0));
        assert_eq!(p.id, Some(7));
        assert_eq!(p.redirect.as_deref(), Some("Bell & Co"));
        assert_eq!(p.revision_id, Some(11));
        assert_eq!(p.timestamp.as_deref(), Some("2020-01-01T00:00:00Z"));
        assert_eq!(p.text.as_deref(), Some("a <b> &nbsp; &unknown;"));
    }

    #[test]
    fn page_errors() {
        assert!(matches!(
            parse_page(b"<page><title>A</titl></page>"),
            Err(PageError::Malformed { .. })
        ));
        assert!(matches!(
            parse_page(b"<page><title>\xff</title></page>"),
            Err(PageError::InvalidUtf8 { at: 13, .. })
        ));
        let p = parse_page(
            b"<page><title>A</title><revision><text deleted=\"deleted\"/></revision></page>",
        )
        .unwrap();
        assert_eq!(p.text, None);
        let p = parse_page(b"<page><title>A</title><revision><text/></revision></page>").unwrap();
        assert_eq!(p.text.as_deref(), Some(""));
        assert_eq!(decode_xml_ref("#0"), None);
        assert_eq!(decode_xml_ref("#xD800"), None);
    }

    /// A page of a history export: the newest revision's fields, each its own, whatever the
    /// order of the revisions or of `<model>` and `<text>` in them.
    #[test]
    fn the_newest_revision_of_a_history_page_is_kept() {
        let p = parse_page(
            br#"<page><title>A</title><ns>0</ns><id>7</id>
            <revision><id>12</id><parentid>3</parentid><timestamp>2024-01-02T00:00:00Z</timestamp>
              <model>wikitext</model><format>text/x-wiki</format>
              <text bytes="5" xml:space="preserve">newer</text><sha1>abc</sha1></revision>
            <revision><id>10</id><timestamp>2024-01-01T00:00:00Z</timestamp>
              <text bytes="5">older</text><sha1>old</sha1><model>wikitext</model></revision>
            </page>"#,
        )
        .unwrap();
        assert_eq!(p.revisions, 2);
        assert_eq!(p.revision_id, Some(12));
        assert_eq!(p.text.as_deref(), Some("newer"));
        assert_eq!(p.sha1.as_deref(), Some("abc"));
        assert_eq!(p.model.as_deref(), Some("wikitext"));
        assert_eq!(p.timestamp.as_deref(), Some("2024-01-02T00:00:00Z"));
        // Text after model, as export 0.11 writes it; the newest text deleted.
        let p = parse_page(
            br#"<page><title>B</title>
            <revision><id>1</id><text>visible</text><sha1>s1</sha1></revision>
            <revision><id>2</id><model>wikitext</model><text deleted="deleted">hidden</text></revision>
            </page>"#,
        )
        .unwrap();
        assert_eq!((p.revision_id, p.text.as_deref()), (Some(2), None));
        assert!(p.text_deleted);
        assert_eq!(p.sha1, None, "the newest revision has no sha1 of its own");
        // A stub's newest revision has no text, though an older one did.
        let p = parse_page(
            b"<page><title>C</title><revision><id>1</id><text>old</text></revision>\
              <revision><id>2</id><text bytes=\"3\" sha1=\"x\" id=\"9\"/></revision></page>",
        )
        .unwrap();
        assert_eq!((p.revision_id, p.text.as_deref()), (Some(2), Some("")));
        assert!(!p.text_deleted);
    }
}
