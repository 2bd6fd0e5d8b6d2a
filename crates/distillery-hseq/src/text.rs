//! The text adapter: [`encode_document`] and [`decode_document`].
//!
//! A [`Document`] becomes, in stream order:
//!
//! 1. one `document` root: `content` = the title, `offsets` = `[0, len(text)]` (chars);
//! 2. `section` segments (when [`HseqOptions::sections`] and the document has sections):
//!    `content == text[a:b]`; the parent is the innermost enclosing section of a lower heading
//!    level (so `===h===` nests under `==h==`), else the document;
//! 3. `paragraph` segments: one per [`Paragraph`], `content == text[a:b]`, parent its section
//!    (the one it names when that section contains it, else the innermost containing one) or
//!    the document; plus **gap paragraphs** (`schema == ["gap"]`): every line of text outside
//!    all paragraphs that holds non-whitespace (heading lines, stray text, the whole text of a
//!    document without paragraphs) becomes a paragraph trimmed of surrounding whitespace;
//! 4. `sentence` segments: one per [`Sentence`], absolute offsets, parent the paragraph it
//!    names when that paragraph contains it, else the innermost containing paragraph, section
//!    or the document.
//!
//! Every span segment satisfies T1: `offsets == [a, b]` and `content == char_slice(text, a,
//! b)`. Spans outside the text are clamped into it first, so T1 holds for any input. Because
//! paragraphs plus gap paragraphs cover every non-whitespace char, [`decode_document`] places
//! each span's content at its offsets and fills the remaining positions (whitespace in the
//! source) with spaces: the result has the source's length and the same non-whitespace
//! sequence, so `decode(encode(x)) ≡ x` ([`crate::text_equivalent`]). The full text is not
//! stored a second time.
//!
//! Ids are `stable_id([doc.id, level, a, b])` (plus an occurrence number for a repeated span
//! of the same level), so they are deterministic and unique within the source even when a
//! paragraph and a sentence share a span. `source_id` = `doc.id`, `uri` = `doc.uri`,
//! `source_version` = the revision id, else the source file name; `time` is left empty (a
//! revision timestamp is not a validity time); `ord` = position in the output.
//!
//! [`Paragraph`]: distillery_core::Paragraph
//! [`Sentence`]: distillery_core::Sentence

use crate::options::HseqOptions;
use crate::order::{level, source_type};
use crate::{DecodeError, check_sha1, index_ids, non_empty, parent_index, sealed};
use distillery_core::id::StableIdBuilder;
use distillery_core::{Document, Segment};
use foldhash::{HashMap, HashMapExt};
use std::cmp::Reverse;

/// The `schema` tag of gap paragraphs: text outside every paragraph of the source.
pub const GAP: &str = "gap";

/// Char-offset index of a text: byte position of every char, for O(1) slicing. An ASCII
/// text (most of Wikipedia and the QA sets) needs no table: char and byte offsets agree.
pub(crate) struct CharIndex<'a> {
    text: &'a str,
    /// Byte position of every char and of the end; `None` for an ASCII text.
    bytes: Option<Vec<usize>>,
}

impl<'a> CharIndex<'a> {
    pub(crate) fn new(text: &'a str) -> Self {
        let bytes = (!text.is_ascii()).then(|| {
            let mut bytes: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
            bytes.push(text.len());
            bytes
        });
        CharIndex { text, bytes }
    }

    /// Number of chars.
    pub(crate) fn len(&self) -> u32 {
        self.bytes.as_ref().map_or(self.text.len(), |b| b.len() - 1) as u32
    }

    /// Byte position of char `c` (`c <= len`).
    fn byte(&self, c: u32) -> usize {
        self.bytes.as_ref().map_or(c as usize, |b| b[c as usize])
    }

    /// `text[a:b]` in chars; `a <= b <= len` must hold.
    fn slice(&self, a: u32, b: u32) -> &'a str {
        &self.text[self.byte(a)..self.byte(b)]
    }

    /// `text[a:b]` in chars, `None` when the span is not inside the text.
    pub(crate) fn get(&self, a: i64, b: i64) -> Option<&'a str> {
        (0 <= a && a <= b && b <= i64::from(self.len())).then(|| self.slice(a as u32, b as u32))
    }

    /// The span clamped into the text (`a <= b <= len`).
    fn clamp(&self, start: u32, end: u32) -> Span {
        let n = self.len();
        let a = start.min(n);
        Span {
            a,
            b: end.min(n).max(a),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    a: u32,
    b: u32,
}

impl Span {
    fn contains(self, o: Span) -> bool {
        self.a <= o.a && o.b <= self.b
    }
}

/// Allocates segment ids, disambiguating repeated spans of one level.
struct Ids<'a> {
    source: &'a str,
    seen: HashMap<(&'static str, u32, u32), u32>,
}

impl Ids<'_> {
    fn next(&mut self, lvl: &'static str, s: Span) -> String {
        let k = self.seen.entry((lvl, s.a, s.b)).or_insert(0);
        let n = *k;
        *k += 1;
        // stable_id(&[source, lvl, a, b]) (and n when the span repeats), the numbers written
        // in decimal without allocating.
        let mut h = StableIdBuilder::new();
        let mut buf = [0u8; 10];
        h.part(self.source)
            .part(lvl)
            .part(decimal(s.a, &mut buf))
            .part(decimal(s.b, &mut buf));
        if n > 0 {
            h.part(decimal(n, &mut buf));
        }
        h.finish()
    }
}

/// `n` in decimal, written into `buf`.
fn decimal(mut n: u32, buf: &mut [u8; 10]) -> &str {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    std::str::from_utf8(&buf[i..]).expect("ascii digits")
}

struct SecItem {
    idx: usize,
    span: Span,
    level: u32,
}

struct ParaItem {
    span: Span,
    gap: bool,
    idx: usize,
    section: i32,
}

/// Pushes the trimmed non-blank lines of `text[a:b]` as gap spans.
fn push_gaps(ix: &CharIndex<'_>, a: u32, b: u32, out: &mut Vec<Span>) {
    let mut first: Option<u32> = None;
    let mut last = 0;
    for (k, c) in ix.slice(a, b).chars().enumerate() {
        let pos = a + k as u32;
        if c == '\n' {
            if let Some(f) = first.take() {
                out.push(Span { a: f, b: last + 1 });
            }
        } else if !c.is_whitespace() {
            first.get_or_insert(pos);
            last = pos;
        }
    }
    if let Some(f) = first {
        out.push(Span { a: f, b: last + 1 });
    }
}

/// Encodes a document as `document`, `section`, `paragraph` (incl. gap) and `sentence`
/// segments in stream order (see the module docs).
pub fn encode_document(doc: &Document, opts: &HseqOptions) -> Vec<Segment> {
    encode_document_with(doc, opts, true)
}

/// [`encode_document`] without the integrity hashes (`sha1` left empty, which decoding and
/// verification accept): for callers that use the segments in memory and never write them,
/// such as the labeller, which builds every question's S_h anew.
pub fn encode_document_unsealed(doc: &Document, opts: &HseqOptions) -> Vec<Segment> {
    encode_document_with(doc, opts, false)
}

fn encode_document_with(doc: &Document, opts: &HseqOptions, seal: bool) -> Vec<Segment> {
    let ix = CharIndex::new(&doc.text);
    let n = ix.len();
    let mut ids = Ids {
        source: &doc.id,
        seen: HashMap::new(),
    };
    let version = doc
        .revision_id
        .map(|r| r.to_string())
        .or_else(|| non_empty(&doc.source));
    let mk = |id: String, lvl: &str, parent: Option<String>, content: String, s: Span, schema| {
        let seg = Segment {
            id,
            level: lvl.to_string(),
            parent,
            content,
            source_id: doc.id.clone(),
            uri: doc.uri.clone(),
            offsets: vec![i64::from(s.a), i64::from(s.b)],
            schema,
            time: None,
            source_type: source_type::TEXT.to_string(),
            sha1: String::new(),
            source_version: version.clone(),
            ord: 0,
            page_id: doc.page_id,
        };
        if seal { sealed(seg) } else { seg }
    };
    let mut out = Vec::new();

    let root_span = Span { a: 0, b: n };
    let root_id = ids.next(level::DOCUMENT, root_span);
    out.push(mk(
        root_id.clone(),
        level::DOCUMENT,
        None,
        doc.title.clone(),
        root_span,
        Vec::new(),
    ));

    // Sections, containers first: by start, longer first, then input order.
    let mut secs: Vec<SecItem> = if opts.sections {
        doc.sections
            .iter()
            .enumerate()
            .map(|(idx, s)| SecItem {
                idx,
                span: ix.clamp(s.start, s.end),
                level: s.level,
            })
            .collect()
    } else {
        Vec::new()
    };
    secs.sort_by_key(|s| (s.span.a, Reverse(s.span.b), s.idx));
    let mut sec_ids: Vec<String> = Vec::with_capacity(secs.len());
    let mut sec_pos: Vec<Option<usize>> = vec![None; doc.sections.len()];
    for (pos, s) in secs.iter().enumerate() {
        let parent = (0..pos)
            .rev()
            .find(|&q| secs[q].level < s.level && secs[q].span.contains(s.span))
            .map_or_else(|| root_id.clone(), |q| sec_ids[q].clone());
        let id = ids.next(level::SECTION, s.span);
        out.push(mk(
            id.clone(),
            level::SECTION,
            Some(parent),
            ix.slice(s.span.a, s.span.b).to_string(),
            s.span,
            Vec::new(),
        ));
        sec_ids.push(id);
        sec_pos[s.idx] = Some(pos);
    }
    // The section a span belongs to: the named one when it contains the span, else the
    // innermost (latest in container-first order) containing one.
    let section_of = |span: Span, hint: i32| -> Option<usize> {
        let named = usize::try_from(hint)
            .ok()
            .and_then(|h| sec_pos.get(h).copied().flatten())
            .filter(|&p| secs[p].span.contains(span));
        named.or_else(|| (0..secs.len()).rev().find(|&q| secs[q].span.contains(span)))
    };

    // Paragraphs and gap paragraphs.
    let mut paras: Vec<ParaItem> = doc
        .paragraphs
        .iter()
        .enumerate()
        .map(|(idx, p)| ParaItem {
            span: ix.clamp(p.start, p.end),
            gap: false,
            idx,
            section: p.section,
        })
        .collect();
    let mut covered: Vec<Span> = paras.iter().map(|p| p.span).collect();
    covered.sort_by_key(|s| (s.a, s.b));
    let mut gaps = Vec::new();
    let mut cursor = 0;
    for s in covered {
        if s.a > cursor {
            push_gaps(&ix, cursor, s.a, &mut gaps);
        }
        cursor = cursor.max(s.b);
    }
    if cursor < n {
        push_gaps(&ix, cursor, n, &mut gaps);
    }
    paras.extend(gaps.into_iter().enumerate().map(|(idx, span)| ParaItem {
        span,
        gap: true,
        idx,
        section: -1,
    }));
    paras.sort_by_key(|p| (p.span.a, p.span.b, p.gap, p.idx));
    let mut para_ids: Vec<String> = Vec::with_capacity(paras.len());
    let mut para_pos: Vec<Option<usize>> = vec![None; doc.paragraphs.len()];
    for (pos, p) in paras.iter().enumerate() {
        let parent =
            section_of(p.span, p.section).map_or_else(|| root_id.clone(), |q| sec_ids[q].clone());
        let id = ids.next(level::PARAGRAPH, p.span);
        let schema = if p.gap {
            vec![GAP.to_string()]
        } else {
            para_pos[p.idx] = Some(pos);
            Vec::new()
        };
        out.push(mk(
            id.clone(),
            level::PARAGRAPH,
            Some(parent),
            ix.slice(p.span.a, p.span.b).to_string(),
            p.span,
            schema,
        ));
        para_ids.push(id);
    }

    // Sentences.
    let mut sents: Vec<(Span, usize, i32)> = doc
        .sentences
        .iter()
        .enumerate()
        .map(|(idx, s)| (ix.clamp(s.start, s.end), idx, s.paragraph))
        .collect();
    sents.sort_by_key(|&(s, idx, _)| (s.a, s.b, idx));
    for (span, _, hint) in sents {
        let named = usize::try_from(hint)
            .ok()
            .and_then(|h| para_pos.get(h).copied().flatten())
            .filter(|&p| paras[p].span.contains(span));
        let para = named.or_else(|| {
            let upto = paras.partition_point(|p| p.span.a <= span.a);
            (0..upto).rev().find(|&q| paras[q].span.contains(span))
        });
        let parent = match para {
            Some(q) => para_ids[q].clone(),
            None => section_of(span, -1).map_or_else(|| root_id.clone(), |q| sec_ids[q].clone()),
        };
        let id = ids.next(level::SENTENCE, span);
        out.push(mk(
            id,
            level::SENTENCE,
            Some(parent),
            ix.slice(span.a, span.b).to_string(),
            span,
            Vec::new(),
        ));
    }

    for (i, s) in out.iter_mut().enumerate() {
        s.ord = i as u32;
    }
    out
}

/// A document rebuilt from its segments.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DecodedDocument {
    /// The root's `source_id` (the document's id).
    pub source_id: String,
    pub uri: String,
    /// The root's content.
    pub title: String,
    /// The text: every span's content at its offsets, other positions filled with spaces.
    pub text: String,
    pub source_version: Option<String>,
    /// Spans `(a, b)` of the `section` segments, in segment order.
    pub sections: Vec<(u32, u32)>,
    /// Spans of the `paragraph` segments that are not gaps, in segment order.
    pub paragraphs: Vec<(u32, u32)>,
    /// Spans of the gap paragraphs.
    pub gaps: Vec<(u32, u32)>,
    /// Spans of the `sentence` segments, in segment order.
    pub sentences: Vec<(u32, u32)>,
}

/// Decodes the segments of one document (root and descendants, parents before children, e.g.
/// the output of [`encode_document`]).
///
/// Checks: one `document` root with offsets `[0, n]` and no parent; unique ids; every other
/// segment is a `section`, `paragraph` or `sentence` whose parent exists, comes earlier, has a
/// level that may contain it, and whose span contains its span; spans inside `[0, n]`; content
/// as long as the span; overlapping spans agree char for char; `sha1` matches the content;
/// one `source_id` throughout.
pub fn decode_document(segs: &[Segment]) -> Result<DecodedDocument, DecodeError> {
    if segs.is_empty() {
        return Err(DecodeError::Empty);
    }
    let ids = index_ids(segs)?;
    let roots: Vec<usize> = (0..segs.len())
        .filter(|&i| segs[i].level == level::DOCUMENT)
        .collect();
    let ri = match roots[..] {
        [] => {
            return Err(DecodeError::NoRoot {
                level: level::DOCUMENT,
            });
        }
        [r] => r,
        _ => {
            return Err(DecodeError::ManyRoots {
                level: level::DOCUMENT,
                count: roots.len(),
            });
        }
    };
    let root = &segs[ri];
    if root.parent.is_some() {
        return Err(DecodeError::RootHasParent {
            id: root.id.clone(),
        });
    }
    let n = match root.offsets[..] {
        [0, n] if (0..=i64::from(u32::MAX)).contains(&n) => n,
        _ => {
            return Err(DecodeError::BadOffsets {
                id: root.id.clone(),
                level: root.level.clone(),
                offsets: root.offsets.clone(),
            });
        }
    };
    let mut buf: Vec<Option<char>> = vec![None; n as usize];
    let mut spans: Vec<(i64, i64)> = vec![(0, n); segs.len()];
    let mut out = DecodedDocument {
        source_id: root.source_id.clone(),
        uri: root.uri.clone(),
        title: root.content.clone(),
        source_version: root.source_version.clone(),
        ..Default::default()
    };
    for (i, s) in segs.iter().enumerate() {
        check_sha1(s)?;
        if s.source_id != root.source_id {
            return Err(DecodeError::SourceMismatch {
                id: s.id.clone(),
                expected: root.source_id.clone(),
                found: s.source_id.clone(),
            });
        }
        if i == ri {
            continue;
        }
        let allowed: &[&str] = match s.level.as_str() {
            level::SECTION | level::PARAGRAPH => &[level::DOCUMENT, level::SECTION],
            level::SENTENCE => &[level::DOCUMENT, level::SECTION, level::PARAGRAPH],
            _ => {
                return Err(DecodeError::UnexpectedLevel {
                    id: s.id.clone(),
                    level: s.level.clone(),
                    source_type: source_type::TEXT,
                });
            }
        };
        let pi = parent_index(segs, &ids, i)?;
        let p = &segs[pi];
        if !allowed.contains(&p.level.as_str()) {
            return Err(DecodeError::WrongParent {
                id: s.id.clone(),
                level: s.level.clone(),
                parent: p.id.clone(),
                parent_level: p.level.clone(),
            });
        }
        let (a, b) = match s.offsets[..] {
            [a, b] => (a, b),
            _ => {
                return Err(DecodeError::BadOffsets {
                    id: s.id.clone(),
                    level: s.level.clone(),
                    offsets: s.offsets.clone(),
                });
            }
        };
        if !(0 <= a && a <= b && b <= n) {
            return Err(DecodeError::OutOfRange {
                id: s.id.clone(),
                start: a,
                end: b,
                len: n,
            });
        }
        let (pa, pb) = spans[pi];
        if !(pa <= a && b <= pb) {
            return Err(DecodeError::NotContained {
                id: s.id.clone(),
                start: a,
                end: b,
                parent_start: pa,
                parent_end: pb,
            });
        }
        spans[i] = (a, b);
        let found = s.content.chars().count() as u64;
        if found != (b - a) as u64 {
            return Err(DecodeError::ContentLength {
                id: s.id.clone(),
                expected: (b - a) as u64,
                found,
            });
        }
        for (k, c) in s.content.chars().enumerate() {
            let at = a as usize + k;
            match buf[at] {
                None => buf[at] = Some(c),
                Some(old) if old == c => {}
                Some(_) => {
                    return Err(DecodeError::ContentConflict {
                        id: s.id.clone(),
                        at: at as u64,
                    });
                }
            }
        }
        let span = (a as u32, b as u32);
        match s.level.as_str() {
            level::SECTION => out.sections.push(span),
            level::PARAGRAPH if s.schema.iter().any(|t| t == GAP) => out.gaps.push(span),
            level::PARAGRAPH => out.paragraphs.push(span),
            _ => out.sentences.push(span),
        }
    }
    out.text = buf.into_iter().map(|c| c.unwrap_or(' ')).collect();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn char_index_slices_by_code_point() {
        let ix = CharIndex::new("aé漢b");
        assert_eq!(ix.len(), 4);
        assert_eq!(ix.get(1, 3), Some("é漢"));
        assert_eq!(ix.get(3, 5), None);
        assert_eq!(ix.get(-1, 2), None);
        assert_eq!(ix.clamp(3, 9), Span { a: 3, b: 4 });
        assert_eq!(ix.clamp(7, 2), Span { a: 4, b: 4 });
    }

    #[test]
    fn gaps_are_trimmed_lines() {
        let ix = CharIndex::new(" == H ==\n\n  x y \n");
        let mut g = Vec::new();
        push_gaps(&ix, 0, ix.len(), &mut g);
        assert_eq!(g, vec![Span { a: 1, b: 8 }, Span { a: 12, b: 15 }]);
        let mut g = Vec::new();
        push_gaps(&ix, 8, 11, &mut g);
        assert!(g.is_empty());
    }
}
